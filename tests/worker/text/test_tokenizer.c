/*
 * test_tokenizer.c - worker/text/{vocab,vocab_gguf,encode,detok}.c: the shared test vectors (every
 * ggml-vocab-*.gguf in ../shared/testdata/tokenizer must match exactly),
 * special-token policy, streaming detokenization, invalid UTF-8 policy,
 * SPM byte-fallback round trips and vocabulary validation.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/utf8.h"
#include "worker/model/gguf.h"
#include "worker/text/tokenizer.h"

/* ---- helpers ---- */

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

static const char *vec_dir(char *buf, size_t cap)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	DIR *d;

	if (!src)
		return NULL;
	snprintf(buf, cap, "%s/../shared/testdata/tokenizer", src);
	d = opendir(buf);
	if (!d)
		return NULL;
	closedir(d);
	return buf;
}

static size_t encode(const struct wk_tok *tok, const char *s, size_t len, unsigned flags,
		     int32_t *out, size_t cap)
{
	size_t n = 0;

	assert_int_equal(wk_tok_encode(tok, s, len, flags, out, cap, &n), CM_OK);
	return n;
}

static char *decode_all(const struct wk_tok *tok, const int32_t *ids, size_t n, unsigned flags,
			size_t *len)
{
	struct cm_buf b;
	struct wk_detok d;

	cm_buf_init(&b, 1 << 20);
	wk_detok_init(&d, tok, flags);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(wk_detok_push(&d, ids[i], &b), CM_OK);
	assert_int_equal(wk_detok_flush(&d, &b), CM_OK);
	return cm_buf_take(&b, len);
}

/* ---- shared vectors ---- */

static int run_vocab(const char *dir, const char *name, int *n_cases)
{
	char path[1024], err[256];
	char *inp = NULL, *outp = NULL;
	size_t inp_len, out_len, n_fail = 0;
	struct wk_gguf *g = NULL;
	struct wk_tok *tok = NULL;
	const char *sep = "\n__ggml_vocab_test__\n";
	char *p, *q, *line;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (wk_gguf_open(path, &g, err, sizeof(err)) != CM_OK) {
		print_error("%s: %s\n", name, err);
		return 1;
	}
	if (wk_tok_new_from_gguf(g, &tok, err, sizeof(err)) != CM_OK) {
		print_error("%s: %s\n", name, err);
		wk_gguf_close(g);
		return 1;
	}
	wk_gguf_close(g); /* the tokenizer keeps its own copies */
	snprintf(path, sizeof(path), "%s/%s.inp", dir, name);
	inp = read_file(path, &inp_len);
	snprintf(path, sizeof(path), "%s/%s.out", dir, name);
	outp = read_file(path, &out_len);
	assert_non_null(inp);
	assert_non_null(outp);
	p = inp;
	line = outp;
	for (;;) {
		int32_t got[4096], want[4096];
		size_t n_got, n_want = 0;
		char *nl, *e;

		q = strstr(p, sep);
		if (!q)
			break;
		nl = strchr(line, '\n');
		assert_non_null(nl);
		*nl = '\0';
		for (char *s = line; *s;) {
			long v = strtol(s, &e, 10);

			if (e == s)
				break;
			want[n_want++] = (int32_t)v;
			s = e;
		}
		n_got = encode(tok, p, (size_t)(q - p), 0, got, 4096);
		if (n_got != n_want || memcmp(got, want, n_got * sizeof(int32_t)) != 0) {
			n_fail++;
			print_error("%s case %d: input \"%.*s\"\n  want:", name, *n_cases,
				    (int)(q - p), p);
			for (size_t i = 0; i < n_want; i++)
				print_error(" %d", want[i]);
			print_error("\n  got: ");
			for (size_t i = 0; i < n_got; i++)
				print_error(" %d", got[i]);
			print_error("\n");
		}
		(*n_cases)++;
		p = q + strlen(sep);
		line = nl + 1;
	}
	free(inp);
	free(outp);
	wk_tok_free(tok);
	return n_fail != 0;
}

static void test_vectors(void **state)
{
	char dirbuf[1024];
	const char *dir = vec_dir(dirbuf, sizeof(dirbuf));
	struct dirent *de;
	DIR *d;
	int fails = 0, files = 0, cases = 0;

	(void)state;
	if (!dir)
		skip();
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, "ggml-vocab-", 11) != 0 || l < 5 ||
		    strcmp(de->d_name + l - 5, ".gguf") != 0)
			continue;
		files++;
		fails += run_vocab(dir, de->d_name, &cases);
	}
	closedir(d);
	print_message("tokenizer vectors: %d files, %d cases, %d files with mismatches\n",
		      files, cases, fails);
	assert_true(files >= 6);
	assert_int_equal(fails, 0);
}

/*
 * SLUICE_EXTRA_VOCABS=DIR: the same check on the ggml-vocab-*.gguf files
 * (with their .inp/.out) of another directory, e.g. a llama.cpp checkout's
 * models/ (its BERT/bge WordPiece vocabulary; nothing of it is committed
 * here: docs/tokenizers.md).  Skipped without it.
 */
static void test_extra_vectors(void **state)
{
	const char *dir = getenv("SLUICE_EXTRA_VOCABS");
	struct dirent *de;
	DIR *d;
	int fails = 0, files = 0, cases = 0;
	char inp[1200];

	(void)state;
	if (!dir || !(d = opendir(dir)))
		skip();
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		snprintf(inp, sizeof(inp), "%s/%s.inp", dir, de->d_name);
		if (strncmp(de->d_name, "ggml-vocab-", 11) != 0 || l < 5 ||
		    strcmp(de->d_name + l - 5, ".gguf") != 0 || access(inp, R_OK) != 0)
			continue;
		files++;
		fails += run_vocab(dir, de->d_name, &cases);
	}
	closedir(d);
	print_message("extra tokenizer vectors (%s): %d files, %d cases, %d files with "
		      "mismatches\n", dir, files, cases, fails);
	assert_int_equal(fails, 0);
}

/* ---- generated vocabularies ---- */

/*
 * A small SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces
 * with scores, and two control tokens used by chat templates.
 */
struct gen_vocab {
	const char *tokens[400];
	float scores[400];
	int32_t types[400];
	char bytes[256][8];
	size_t n;
};

static void gen_add(struct gen_vocab *g, const char *s, float score, int32_t type)
{
	g->tokens[g->n] = s;
	g->scores[g->n] = score;
	g->types[g->n] = type;
	g->n++;
}

static struct wk_tok *make_spm(struct gen_vocab *g)
{
	static const char *pieces[] = {
		"\xE2\x96\x81", "h", "e", "l", "o", "w", "r", "d", "a", "b", "c",
		"he", "hel", "hell", "hello", "\xE2\x96\x81hello",
		"wo", "wor", "worl", "world", "\xE2\x96\x81world", "<", ">", "|", "_",
		"\xC3\xA9", /* é */
	};
	struct wk_tok_vocab v;
	struct wk_tok *tok = NULL;
	char err[256];

	memset(g, 0, sizeof(*g));
	gen_add(g, "<unk>", 0, WK_TOK_T_UNKNOWN);
	gen_add(g, "<s>", 0, WK_TOK_T_CONTROL);
	gen_add(g, "</s>", 0, WK_TOK_T_CONTROL);
	for (int b = 0; b < 256; b++) {
		snprintf(g->bytes[b], sizeof(g->bytes[b]), "<0x%02X>", b);
		gen_add(g, g->bytes[b], 0, WK_TOK_T_BYTE);
	}
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
		gen_add(g, pieces[i], -(float)(sizeof(pieces) / sizeof(pieces[0]) - i) / 10.0f -
			(float)strlen(pieces[i]) * 0.0f, WK_TOK_T_NORMAL);
	gen_add(g, "<|im_end|>", 0, WK_TOK_T_CONTROL);
	gen_add(g, "<|im_start|>", 0, WK_TOK_T_CONTROL);
	wk_tok_vocab_init(&v);
	v.model = "llama";
	v.n_tokens = g->n;
	v.tokens = g->tokens;
	v.scores = g->scores;
	v.types = g->types;
	v.bos = 1;
	v.eos = 2;
	v.unk = 0;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_OK);
	return tok;
}

static void test_spm_basic(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	int32_t ids[64];
	size_t n;
	int32_t hello = wk_tok_lookup(tok, "\xE2\x96\x81hello");
	int32_t world = wk_tok_lookup(tok, "\xE2\x96\x81world");

	(void)state;
	assert_true(hello > 0 && world > 0);
	n = encode(tok, "hello world", 11, 0, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], hello);
	assert_int_equal(ids[1], world);
	/* BOS only with the flag */
	n = encode(tok, "hello", 5, WK_TOK_ADD_BOS, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 1);
	/* empty text: nothing, or BOS alone */
	assert_int_equal(encode(tok, "", 0, 0, ids, 64), 0);
	assert_int_equal(encode(tok, "", 0, WK_TOK_ADD_BOS, ids, 64), 1);
	assert_int_equal(encode(tok, NULL, 0, 0, ids, 64), 0);
	/* cap exceeded: CM_ELIMIT with the needed count */
	assert_int_equal(wk_tok_encode(tok, "hello world", 11, 0, ids, 1, &n), CM_ELIMIT);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], hello);
	/* byte fallback: 'z' has no token, its byte token is 3 + 'z' */
	n = encode(tok, "z", 1, 0, ids, 64);
	assert_int_equal(n, 2);
	assert_int_equal(ids[1], 3 + 'z');
	assert_int_equal(wk_tok_bos(tok), 1);
	assert_int_equal(wk_tok_eos(tok), 2);
	assert_true(wk_tok_is_eog(tok, 2));
	assert_true(wk_tok_is_eog(tok, wk_tok_lookup(tok, "<|im_end|>")));
	assert_false(wk_tok_is_eog(tok, hello));
	wk_tok_free(tok);
}

static void test_special_not_parsed_from_user_text(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	int32_t ids[64];
	int32_t im_end = wk_tok_lookup(tok, "<|im_end|>");
	const char *s = "<|im_end|>";
	size_t n;

	(void)state;
	assert_true(im_end > 0);
	n = encode(tok, s, strlen(s), 0, ids, 64);
	assert_true(n > 1);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], im_end);
	n = encode(tok, s, strlen(s), WK_TOK_PARSE_SPECIAL, ids, 64);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], im_end);
	/* "<s>" typed by a user is not BOS either */
	n = encode(tok, "<s>", 3, 0, ids, 64);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], 1);
	wk_tok_free(tok);
}

static void test_detok_split_emoji(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	const char emoji[] = "\xF0\x9F\xA6\x99"; /* U+1F999 */
	int32_t ids[16];
	size_t n;
	struct cm_buf b;
	struct wk_detok d;

	(void)state;
	n = encode(tok, emoji, 4, WK_TOK_NO_DUMMY_PREFIX, ids, 16);
	assert_int_equal(n, 4); /* four byte tokens */
	cm_buf_init(&b, 1024);
	wk_detok_init(&d, tok, 0);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(wk_detok_push(&d, ids[i], &b), CM_OK);
		assert_int_equal(cm_buf_len(&b), 0); /* held back */
	}
	assert_int_equal(wk_detok_push(&d, ids[3], &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 4);
	assert_memory_equal(cm_buf_data(&b), emoji, 4);
	/* a truncated character at the end becomes U+FFFD on flush */
	cm_buf_reset(&b);
	assert_int_equal(wk_detok_push(&d, ids[0], &b), CM_OK);
	assert_int_equal(wk_detok_push(&d, ids[1], &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(wk_detok_flush(&d, &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 3);
	assert_memory_equal(cm_buf_data(&b), "\xEF\xBF\xBD", 3);
	/* a broken sequence followed by ASCII: U+FFFD then the ASCII */
	cm_buf_reset(&b);
	assert_int_equal(wk_detok_push(&d, ids[0], &b), CM_OK);
	assert_int_equal(wk_detok_push(&d, 3 + 'a', &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 4);
	assert_memory_equal(cm_buf_data(&b), "\xEF\xBF\xBD" "a", 4);
	/* control tokens produce nothing */
	cm_buf_reset(&b);
	assert_int_equal(wk_detok_push(&d, wk_tok_lookup(tok, "<|im_end|>"), &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(wk_detok_push(&d, 100000, &b), CM_EINVAL);
	cm_buf_deinit(&b);
	wk_tok_free(tok);
}

static void test_invalid_utf8_policy(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	const char bad[] = "a\xFF" "b\xC3"; /* stray 0xFF, truncated 2-byte sequence */
	int32_t ids[64];
	size_t n, len;
	char *txt;

	(void)state;
	n = encode(tok, bad, sizeof(bad) - 1, 0, ids, 64);
	txt = decode_all(tok, ids, n, WK_DETOK_STRIP_DUMMY_PREFIX, &len);
	assert_true(cm_utf8_valid(txt, len));
	assert_string_equal(txt, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
	cm_free(txt);
	wk_tok_free(tok);
}

static void test_spm_round_trip(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	static const char *cases[] = {
		"hello world", "  two  spaces ", "z\xC3\xA9 caf\xC3\xA9",
		"\xF0\x9F\x9A\x80 rocket \xE4\xB8\xAD\xE6\x96\x87", "\n\t\r", "<|im_end|> <s>",
		"a", " leading", "trailing ",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int32_t ids[256];
		size_t n = encode(tok, cases[i], strlen(cases[i]), 0, ids, 256), len;
		char *txt = decode_all(tok, ids, n, WK_DETOK_STRIP_DUMMY_PREFIX, &len);

		assert_string_equal(txt, cases[i]);
		cm_free(txt);
	}
	wk_tok_free(tok);
}

static void test_vocab_validation(void **state)
{
	const char *toks[] = { "<unk>", "<s>", "</s>", "<0xZZ>", "a" };
	int32_t types[] = { 2, 3, 3, 6, 1 };
	float scores[5] = { 0 };
	struct wk_tok_vocab v;
	struct wk_tok *tok = NULL;
	char err[256];

	(void)state;
	wk_tok_vocab_init(&v);
	v.model = "llama";
	v.n_tokens = 5;
	v.tokens = toks;
	v.types = types;
	v.scores = scores;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "<0xNN>"));
	toks[3] = "<0x41>";
	v.bos = 5; /* out of range */
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "bos_token_id"));
	v.bos = 1;
	types[4] = 9;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "token_type[4]"));
	types[4] = 1;
	v.model = "wordpiece";
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_EUNSUPPORTED);
	assert_non_null(strstr(err, "wordpiece"));
	v.model = "gpt2";
	v.pre = "no-such-pre";
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_EUNSUPPORTED);
	assert_non_null(strstr(err, "no-such-pre"));
	v.model = "llama";
	v.pre = NULL;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_OK);
	wk_tok_free(tok);
	/* allocation failures are reported, never crash */
	for (long k = 0; k < 40; k++) {
		enum cm_status st;

		cm_alloc_fail_after(k);
		st = wk_tok_new_from_vocab(&v, &tok, err, sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			wk_tok_free(tok);
			break;
		}
		assert_int_equal(st, CM_ENOMEM);
		assert_null(tok);
	}
}

/* Byte-level BPE from a generated vocabulary: merges by rank. */
static void test_bpe_generated(void **state)
{
	/* GPT-2 byte map: ' ' -> U+0120 "Ġ" */
	const char *toks[] = { "h", "e", "l", "o", "\xC4\xA0", "he", "ll", "hell", "hello",
			       "\xC4\xA0h", "<|endoftext|>", "w", "r", "d" };
	const char *merges[] = { "h e", "l l", "he ll", "hell o", "\xC4\xA0 h", "bogus merge" };
	int32_t types[14];
	struct wk_tok_vocab v;
	struct wk_tok *tok = NULL;
	char err[256];
	int32_t ids[32];
	size_t n, len;
	char *txt;

	(void)state;
	for (int i = 0; i < 14; i++)
		types[i] = i == 10 ? WK_TOK_T_CONTROL : WK_TOK_T_NORMAL;
	wk_tok_vocab_init(&v);
	v.model = "gpt2";
	v.pre = "gpt-2";
	v.n_tokens = 14;
	v.tokens = toks;
	v.types = types;
	v.n_merges = 6;
	v.merges = merges;
	v.eos = 10;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_tok_n_ignored_merges(tok), 1);
	n = encode(tok, "hello hello", 11, 0, ids, 32);
	/* "hello" then " hello" -> "Ġh" e l l o: Ġh + (no Ġh-e merge) ... */
	assert_true(n >= 2);
	assert_int_equal(ids[0], 8);
	txt = decode_all(tok, ids, n, 0, &len);
	assert_string_equal(txt, "hello hello");
	cm_free(txt);
	n = encode(tok, "<|endoftext|>", 13, WK_TOK_PARSE_SPECIAL, ids, 32);
	assert_int_equal(n, 1);
	assert_int_equal(ids[0], 10);
	n = encode(tok, "<|endoftext|>", 13, 0, ids, 32);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], 10);
	assert_true(wk_tok_is_eog(tok, 10));
	wk_tok_free(tok);
}

static void test_encode_segments(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	int32_t im_end = wk_tok_lookup(tok, "<|im_end|>");
	int32_t ids[128], ids2[128];
	size_t n, n2;
	/* the token split across a template and a user segment is not parsed */
	const struct wk_tok_seg split[] = {
		{ "<|im_", 5, 1 }, { "end|>", 5, 0 },
	};
	const struct wk_tok_seg mixed[] = {
		{ "<|im_end|>", 10, 1 }, { "hello<|im_end|>", 15, 0 }, { "<|im_end|>", 10, 1 },
	};
	const struct wk_tok_seg plain[] = { { "hel", 3, 1 }, { "lo world", 8, 0 } };

	(void)state;
	assert_int_equal(wk_tok_encode_segments(tok, split, 2, 0, ids, 128, &n), CM_OK);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], im_end);
	assert_int_equal(wk_tok_encode_segments(tok, mixed, 3, 0, ids, 128, &n), CM_OK);
	assert_int_equal(ids[0], im_end);
	assert_int_equal(ids[n - 1], im_end);
	for (size_t i = 1; i + 1 < n; i++)
		assert_int_not_equal(ids[i], im_end);
	/* segments tokenize as one text: pieces merge across the boundary */
	assert_int_equal(wk_tok_encode_segments(tok, plain, 2, 0, ids, 128, &n), CM_OK);
	n2 = encode(tok, "hello world", 11, 0, ids2, 128);
	assert_int_equal(n, n2);
	assert_memory_equal(ids, ids2, n * sizeof(int32_t));
	wk_tok_free(tok);
}

static void test_encode_alloc_failures(void **state)
{
	struct gen_vocab g;
	struct wk_tok *tok = make_spm(&g);
	const char *s = "hello <|im_end|> w\xC3\xA9rld \xFF";
	int32_t ids[128];
	size_t n;
	int ok = 0;

	(void)state;
	for (long k = 0; k < 64 && !ok; k++) {
		enum cm_status st;

		cm_alloc_fail_after(k);
		st = wk_tok_encode(tok, s, strlen(s), WK_TOK_PARSE_SPECIAL, ids, 128, &n);
		cm_alloc_fail_reset();
		assert_true(st == CM_OK || st == CM_ENOMEM);
		ok = st == CM_OK;
	}
	assert_true(ok);
	wk_tok_free(tok);
}

/* Byte-level BPE: a character split across byte tokens is emitted whole. */
static void test_detok_bpe_split_char(void **state)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char path[1024], err[256];
	struct wk_gguf *gg = NULL;
	struct wk_tok *tok = NULL;
	const char *s = "\xF0\x9F\xA6\x99"; /* not one token in GPT-2 */
	int32_t ids[16];
	size_t n;
	struct cm_buf b;
	struct wk_detok d;

	(void)state;
	if (!src)
		skip();
	snprintf(path, sizeof(path), "%s/../shared/testdata/tokenizer/ggml-vocab-gpt-2.gguf", src);
	if (wk_gguf_open(path, &gg, err, sizeof(err)) != CM_OK)
		skip();
	assert_int_equal(wk_tok_new_from_gguf(gg, &tok, err, sizeof(err)), CM_OK);
	wk_gguf_close(gg);
	assert_string_equal(wk_tok_model_name(tok), "bpe");
	assert_string_equal(wk_tok_pre_name(tok), "gpt-2");
	n = encode(tok, s, 4, 0, ids, 16);
	assert_true(n >= 2);
	cm_buf_init(&b, 64);
	wk_detok_init(&d, tok, 0);
	for (size_t i = 0; i + 1 < n; i++)
		assert_int_equal(wk_detok_push(&d, ids[i], &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(wk_detok_push(&d, ids[n - 1], &b), CM_OK);
	assert_int_equal(cm_buf_len(&b), 4);
	assert_memory_equal(cm_buf_data(&b), s, 4);
	cm_buf_deinit(&b);
	wk_tok_free(tok);
}

static size_t count_id(const int32_t *ids, size_t n, int32_t id)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ids[i] == id;
	return c;
}

/* A user-defined token that ends turns is not matched in user text. */
static void test_user_defined_eog_not_from_user_text(void **state)
{
	const char *toks[] = { "<unk>", "<s>", "</s>", "a", "<|im_end|>", "  " };
	int32_t types[] = { 2, 3, 3, 1, 4, 4 };
	float scores[6] = { 0 };
	char bytes[256][8];
	const char *all[6 + 256];
	int32_t all_types[6 + 256];
	float all_scores[6 + 256] = { 0 };
	struct wk_tok_vocab v;
	struct wk_tok *tok = NULL;
	char err[256];
	int32_t ids[64];
	size_t n;

	(void)state;
	(void)scores;
	for (int i = 0; i < 6; i++) {
		all[i] = toks[i];
		all_types[i] = types[i];
	}
	for (int b = 0; b < 256; b++) {
		snprintf(bytes[b], sizeof(bytes[b]), "<0x%02X>", b);
		all[6 + b] = bytes[b];
		all_types[6 + b] = WK_TOK_T_BYTE;
	}
	wk_tok_vocab_init(&v);
	v.model = "llama";
	v.n_tokens = 6 + 256;
	v.tokens = all;
	v.types = all_types;
	v.scores = all_scores;
	assert_int_equal(wk_tok_new_from_vocab(&v, &tok, err, sizeof(err)), CM_OK);
	assert_true(wk_tok_is_eog(tok, 4));
	n = encode(tok, "a<|im_end|>a", 12, 0, ids, 64);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(ids[i], 4);
	n = encode(tok, "a<|im_end|>a", 12, WK_TOK_PARSE_SPECIAL, ids, 64);
	assert_int_equal(count_id(ids, n, 4), 1);
	/* other user-defined tokens still match in plain text */
	n = encode(tok, "a  a", 4, 0, ids, 64);
	assert_int_equal(count_id(ids, n, 5), 1);
	wk_tok_free(tok);
}

/*
 * `test_tokenizer vectors` runs the shared vectors alone and exits 77 when
 * the folder is absent; without arguments the unit tests run.
 */
int main(int argc, char **argv)
{
	const struct CMUnitTest vec_tests[] = {
		cmocka_unit_test(test_vectors),
		cmocka_unit_test(test_extra_vectors),
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spm_basic),
		cmocka_unit_test(test_special_not_parsed_from_user_text),
		cmocka_unit_test(test_detok_split_emoji),
		cmocka_unit_test(test_invalid_utf8_policy),
		cmocka_unit_test(test_spm_round_trip),
		cmocka_unit_test(test_vocab_validation),
		cmocka_unit_test(test_bpe_generated),
		cmocka_unit_test(test_encode_segments),
		cmocka_unit_test(test_encode_alloc_failures),
		cmocka_unit_test(test_detok_bpe_split_char),
		cmocka_unit_test(test_user_defined_eog_not_from_user_text),
	};
	char dirbuf[1024];

	if (argc > 1 && strcmp(argv[1], "vectors") == 0) {
		if (!vec_dir(dirbuf, sizeof(dirbuf)))
			return 77;
		return cmocka_run_group_tests_name("tokenizer_vectors", vec_tests, NULL, NULL);
	}

	return cmocka_run_group_tests_name("tokenizer", tests, NULL, NULL);
}
