/*
 * pretok_split_main.c - test driver for pretok_reference.py: builds a
 * one-token byte-level BPE vocabulary with the pre-tokenizer named in
 * argv[1], reads NUL-terminated texts from stdin and prints, per text, the
 * byte offsets where its pre-tokenizer words end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/text/tokenizer.h"

int main(int argc, char **argv)
{
	static char in[1 << 22];
	const char *toks[] = { "a" };
	struct wk_tok_vocab v;
	struct wk_tok *t = NULL;
	char err[256];
	size_t n, *ends;

	if (argc != 2)
		return 2;
	n = fread(in, 1, sizeof(in) - 1, stdin);
	in[n] = '\0';
	wk_tok_vocab_init(&v);
	v.model = "gpt2";
	v.pre = argv[1];
	v.n_tokens = 1;
	v.tokens = toks;
	if (wk_tok_new_from_vocab(&v, &t, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	ends = malloc(sizeof(size_t) * (n + 1));
	if (!ends)
		return 1;
	for (size_t p = 0; p < n;) {
		size_t l = strlen(in + p), nw;

		if (wk_tok_pre_split(t, in + p, l, ends, n + 1, &nw) != CM_OK)
			return 1;
		for (size_t i = 0; i < nw; i++)
			printf("%zu ", ends[i]);
		printf("\n");
		p += l + 1;
	}
	free(ends);
	wk_tok_free(t);
	return 0;
}
