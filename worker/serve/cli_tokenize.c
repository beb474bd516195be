/*
 * cli_tokenize.c - `sluice-worker tokenize --model PATH [--add-special]`.
 *
 * Reads all of stdin (at most WK_CLI_TOKENIZE_MAX_INPUT bytes), tokenizes
 * it with the model's tokenizer and prints the ids space-separated on one
 * line.  By default no BOS/EOS is added and special tokens are not parsed
 * (the convention of the shared test vectors); --add-special adds BOS/EOS
 * where the model asks for them and parses special tokens in the text.
 * Runs on the main thread of a short-lived process; exit status 0 on
 * success, 1 on a runtime error, 2 on a usage error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "worker/model/gguf.h"
#include "worker/text/tokenizer.h"

#define WK_CLI_TOKENIZE_MAX_INPUT (64u << 20)

int wk_cli_tokenize(int argc, char **argv);

static void tokenize_usage(FILE *f)
{
	fprintf(f, "usage: sluice-worker tokenize --model PATH [--add-special] < text\n"
		   "  prints the token ids of stdin, space-separated, on one line\n"
		   "  --add-special  add BOS/EOS as the model asks and parse special tokens\n");
}

int wk_cli_tokenize(int argc, char **argv)
{
	const char *model = NULL;
	unsigned flags = 0;
	struct cm_buf in;
	struct wk_gguf *g = NULL;
	struct wk_tok *tok = NULL;
	int32_t *ids = NULL;
	size_t cap, n = 0;
	char err[512];
	enum cm_status st;
	int rc = 1;

	cm_buf_init(&in, WK_CLI_TOKENIZE_MAX_INPUT);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
			model = argv[++i];
		} else if (strncmp(argv[i], "--model=", 8) == 0) {
			model = argv[i] + 8;
		} else if (strcmp(argv[i], "--add-special") == 0) {
			flags |= WK_TOK_ADD_BOS | WK_TOK_ADD_EOS | WK_TOK_PARSE_SPECIAL;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			tokenize_usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "tokenize: unexpected argument \"%s\"\n", argv[i]);
			tokenize_usage(stderr);
			return 2;
		}
	}
	if (!model) {
		fprintf(stderr, "tokenize: --model PATH is required\n");
		tokenize_usage(stderr);
		return 2;
	}
	for (;;) {
		size_t got;

		st = cm_buf_reserve(&in, 65536 < cm_buf_room(&in) ? 65536 : cm_buf_room(&in));
		if (st != CM_OK || cm_buf_room(&in) == 0) {
			fprintf(stderr, "tokenize: input larger than %u bytes\n", WK_CLI_TOKENIZE_MAX_INPUT);
			goto out;
		}
		got = fread(cm_buf_tail(&in), 1, 65536 < cm_buf_room(&in) ? 65536 : cm_buf_room(&in), stdin);
		cm_buf_commit(&in, got);
		if (got == 0)
			break;
	}
	if (ferror(stdin)) {
		fprintf(stderr, "tokenize: reading stdin failed\n");
		goto out;
	}
	if (wk_gguf_open(model, &g, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "tokenize: %s: %s\n", model, err);
		goto out;
	}
	if (wk_tok_new_from_gguf(g, &tok, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "tokenize: %s: %s\n", model, err);
		goto out;
	}
	cap = cm_buf_len(&in) + 16;
	for (int attempt = 0; attempt < 2; attempt++) {
		cm_free(ids);
		ids = cm_calloc(cap, sizeof(int32_t));
		if (!ids) {
			fprintf(stderr, "tokenize: out of memory\n");
			goto out;
		}
		st = wk_tok_encode(tok, (const char *)cm_buf_data(&in), cm_buf_len(&in), flags,
				   ids, cap, &n);
		if (st != CM_ELIMIT)
			break;
		cap = n;
	}
	if (st != CM_OK) {
		fprintf(stderr, "tokenize: encoding failed: %s\n", cm_status_str(st));
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		printf(i ? " %d" : "%d", ids[i]);
	printf("\n");
	rc = fflush(stdout) == 0 ? 0 : 1;
out:
	cm_free(ids);
	wk_tok_free(tok);
	wk_gguf_close(g);
	cm_buf_deinit(&in);
	return rc;
}
