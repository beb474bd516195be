/*
 * fuzz_schema.c - libFuzzer target for the structured-output compiler:
 * the input is split at the first NUL byte into a JSON Schema and a text.
 * The schema goes through wk_schema_compile and wk_gram_build (errors are
 * fine, crashes, leaks and unbounded work are not); when it compiles, the
 * text is fed to the matcher byte by byte and a mask over a small
 * vocabulary is computed at every step and checked against the matcher.
 * A first byte '/' makes the first part an ECMAScript pattern (regex.c),
 * '=' a grammar in the text format (gbnf.c).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/grammar/gbnf.h"
#include "worker/grammar/mask.h"
#include "worker/grammar/regex.h"
#include "worker/grammar/schema.h"

static const char *const PIECES[] = { "{", "}", "\"", "\":", ",", "[", "]", "a", "ab", "1", "-", " ",
				      "true", "null", "\\", "\xc3", "\xa9", "e", "." };
#define N_PIECES (sizeof(PIECES) / sizeof(PIECES[0]))

static struct wk_vtrie *trie(void)
{
	static struct wk_vtrie *t;
	if (!t) {
		size_t lens[N_PIECES + 1];
		const char *p[N_PIECES + 1];
		uint8_t eog[N_PIECES + 1] = { 0 };
		for (size_t i = 0; i < N_PIECES; i++)
			p[i] = PIECES[i], lens[i] = strlen(PIECES[i]);
		p[N_PIECES] = "";
		lens[N_PIECES] = 0;
		eog[N_PIECES] = 1;
		if (wk_vtrie_new_pieces(N_PIECES + 1, p, lens, eog, &t) != CM_OK)
			abort();
	}
	return t;
}

static struct wk_gx *raw(void *ctx, struct wk_gram_b *b, const uint32_t *r, size_t n, int neg)
{
	(void)ctx;
	return wk_gx_class(b, r, n, neg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	const uint8_t *nul = memchr(data, 0, size);
	size_t slen = nul ? (size_t)(nul - data) : size;
	const char *text = nul ? (const char *)nul + 1 : "";
	size_t tlen = nul ? size - slen - 1 : 0;
	struct wk_gram_limits lim;
	wk_gram_limits_default(&lim);
	lim.max_rules = 20000;
	lim.max_elems = 200000;
	lim.arena_bytes = 16u << 20;
	struct wk_gram_b *b = wk_gram_b_new(&lim);
	if (!b)
		return 0;
	char err[256];
	uint32_t root = 0;
	enum cm_status st;
	json_t *s = NULL;
	if (slen && data[0] == '=') { /* "=gbnf text" */
		st = wk_gbnf_parse(b, (const char *)data + 1, slen - 1, &root, err, sizeof(err));
	} else if (slen && data[0] == '/') { /* "/pattern" */
		struct wk_gx *x = NULL;
		root = wk_gram_rule(b, "root", 1);
		st = wk_regex_compile(b, (const char *)data + 1, slen - 1, raw, NULL, &x, err, sizeof(err));
		if (st == CM_OK)
			wk_gram_set_body(b, root, x);
	} else {
		json_error_t je;
		s = json_loadb((const char *)data, slen, JSON_DECODE_ANY, &je);
		st = s ? wk_schema_compile(b, s, NULL, &root, err, sizeof(err)) : CM_EINVAL;
	}
	struct wk_gram *g = NULL;
	if (st == CM_OK)
		st = wk_gram_build(b, root, &g, err, sizeof(err));
	if (st == CM_OK) {
		struct wk_gm_limits ml;
		wk_gm_limits_default(&ml);
		ml.max_states = 20000;
		ml.max_nodes = 80000;
		struct wk_gm *m = wk_gm_new(g, &ml);
		struct wk_mask *k = m ? wk_mask_new(m, trie(), 1u << 20, NULL) : NULL;
		if (k) {
			uint32_t bits[1] = { 0 };
			int32_t state = wk_gm_start(m);
			for (size_t i = 0; i <= tlen && state >= 0; i++) {
				if (wk_mask_fill(k, state, bits) != CM_OK)
					break;
				for (size_t t = 0; t < N_PIECES; t++) {
					int in = (bits[0] >> t) & 1;
					if (in != (wk_mask_allows(k, state, (int32_t)t) != 0))
						abort(); /* the mask disagrees with the matcher */
				}
				if (i < tlen)
					state = wk_gm_step(m, state, (uint8_t)text[i]);
			}
		}
		wk_mask_free(k);
		wk_gm_free(m);
	}
	wk_gram_free(g);
	wk_gram_b_free(b);
	json_decref(s);
	return 0;
}
