/*
 * vocab_gguf.c - the vocabulary read from a GGUF file's tokenizer.ggml.* keys
 * (arrays bounds-checked before use).
 */
#include "worker/text/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/model/gguf.h"

/* ---- GGUF ---- */

static enum cm_status gguf_str_array(const struct wk_gguf *g, const char *key, int required,
				     const char ***ptrs, size_t **lens, size_t *count,
				     char *err, size_t err_len)
{
	enum wk_gguf_vtype et;
	uint64_t n;
	enum cm_status st = wk_gguf_get_arr(g, key, &et, &n);

	*ptrs = NULL;
	*lens = NULL;
	*count = 0;
	if (st == CM_ENOTFOUND && !required)
		return CM_OK;
	if (st != CM_OK || et != WK_GGUF_STRING) {
		snprintf(err, err_len, "%s: expected an array of strings%s", key,
			 st == CM_ENOTFOUND ? ", found none" : "");
		return st == CM_ENOTFOUND ? CM_ENOTFOUND : CM_EFORMAT;
	}
	if (n > WK_TOK_MAX_MERGES) {
		snprintf(err, err_len, "%s: expected at most %u entries, found %llu", key,
			 WK_TOK_MAX_MERGES, (unsigned long long)n);
		return CM_ELIMIT;
	}
	*ptrs = cm_calloc(n ? n : 1, sizeof(char *));
	*lens = cm_calloc(n ? n : 1, sizeof(size_t));
	if (!*ptrs || !*lens)
		return CM_ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		struct wk_gguf_str s;

		st = wk_gguf_arr_str(g, key, i, &s);
		if (st != CM_OK) {
			snprintf(err, err_len, "%s[%llu]: unreadable string", key, (unsigned long long)i);
			return st;
		}
		(*ptrs)[i] = s.ptr;
		(*lens)[i] = (size_t)s.len;
	}
	*count = (size_t)n;
	return CM_OK;
}

/* Numeric array of exactly n elements converted to float or int32. */
static enum cm_status gguf_num_array(const struct wk_gguf *g, const char *key, size_t n,
				     float *fout, int32_t *iout, char *err, size_t err_len)
{
	enum wk_gguf_vtype et;
	uint64_t cnt;
	const uint8_t *p;
	size_t esz;
	enum cm_status st = wk_gguf_get_arr(g, key, &et, &cnt);

	if (st == CM_ENOTFOUND)
		return CM_ENOTFOUND;
	if (st != CM_OK) {
		snprintf(err, err_len, "%s: expected an array", key);
		return CM_EFORMAT;
	}
	if (cnt != n) {
		snprintf(err, err_len, "%s: expected %zu elements (one per token), found %llu",
			 key, n, (unsigned long long)cnt);
		return CM_EFORMAT;
	}
	switch (et) {
	case WK_GGUF_F32: case WK_GGUF_I32: case WK_GGUF_U32: esz = 4; break;
	case WK_GGUF_I8: case WK_GGUF_U8: esz = 1; break;
	case WK_GGUF_I16: case WK_GGUF_U16: esz = 2; break;
	default:
		snprintf(err, err_len, "%s: unexpected element type %d", key, (int)et);
		return CM_EFORMAT;
	}
	if (fout && et != WK_GGUF_F32) {
		snprintf(err, err_len, "%s: expected f32 elements, found type %d", key, (int)et);
		return CM_EFORMAT;
	}
	p = wk_gguf_arr_data(g, key);
	if (!p && n) {
		snprintf(err, err_len, "%s: no element data", key);
		return CM_EFORMAT;
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = p + i * esz;

		if (fout) {
			uint32_t u = cm_le32(e);

			memcpy(&fout[i], &u, 4);
			continue;
		}
		switch (et) {
		case WK_GGUF_I32: case WK_GGUF_U32: iout[i] = (int32_t)cm_le32(e); break;
		case WK_GGUF_I16: iout[i] = (int16_t)cm_le16(e); break;
		case WK_GGUF_U16: iout[i] = cm_le16(e); break;
		case WK_GGUF_I8: iout[i] = (int8_t)e[0]; break;
		default: iout[i] = e[0]; break;
		}
	}
	return CM_OK;
}

static void gguf_cstr(const struct wk_gguf *g, const char *key, char *dst, size_t cap, int *found)
{
	struct wk_gguf_str s;

	*found = 0;
	dst[0] = '\0';
	if (wk_gguf_get_str(g, key, &s) != CM_OK)
		return;
	if (s.len >= cap)
		s.len = cap - 1;
	memcpy(dst, s.ptr, s.len);
	dst[s.len] = '\0';
	*found = 1;
}

static int64_t gguf_id(const struct wk_gguf *g, const char *key)
{
	int64_t v;

	if (wk_gguf_get_i64(g, key, &v) != CM_OK)
		return -1;
	return v < 0 ? -1 : v; /* negative ids mean "none" in some files */
}

static int gguf_flag(const struct wk_gguf *g, const char *key)
{
	int v;

	if (wk_gguf_get_bool(g, key, &v) != CM_OK)
		return -1;
	return v ? 1 : 0;
}

enum cm_status wk_tok_new_from_gguf(const struct wk_gguf *g, struct wk_tok **out,
				    char *err, size_t err_len)
{
	struct wk_tok_vocab v;
	char model[32], pre[64], name[128];
	const char **tokens = NULL, **merges = NULL;
	size_t *tlens = NULL, *mlens = NULL, n = 0, nm = 0;
	float *scores = NULL;
	int32_t *types = NULL;
	int found;
	enum cm_status st;

	*out = NULL;
	wk_tok_vocab_init(&v);
	gguf_cstr(g, "tokenizer.ggml.model", model, sizeof(model), &found);
	if (!found) {
		snprintf(err, err_len, "tokenizer.ggml.model: expected a string, found none");
		return CM_EFORMAT;
	}
	gguf_cstr(g, "tokenizer.ggml.pre", pre, sizeof(pre), &found);
	gguf_cstr(g, "general.name", name, sizeof(name), &found);
	v.model = model;
	v.pre = pre[0] ? pre : NULL;
	v.name = found ? name : NULL;
	st = gguf_str_array(g, "tokenizer.ggml.tokens", 1, &tokens, &tlens, &n, err, err_len);
	if (st != CM_OK)
		goto out;
	if (n == 0 || n > WK_TOK_MAX_VOCAB) {
		snprintf(err, err_len, "tokenizer.ggml.tokens: expected 1..%u tokens, found %zu",
			 WK_TOK_MAX_VOCAB, n);
		st = CM_EFORMAT;
		goto out;
	}
	scores = cm_calloc(n, sizeof(float));
	types = cm_calloc(n, sizeof(int32_t));
	if (!scores || !types) {
		st = CM_ENOMEM;
		goto out;
	}
	st = gguf_num_array(g, "tokenizer.ggml.scores", n, scores, NULL, err, err_len);
	if (st == CM_ENOTFOUND)
		st = CM_OK; /* BPE files carry no scores */
	if (st != CM_OK)
		goto out;
	st = gguf_num_array(g, "tokenizer.ggml.token_type", n, NULL, types, err, err_len);
	if (st == CM_ENOTFOUND) {
		for (size_t i = 0; i < n; i++)
			types[i] = WK_TOK_T_NORMAL;
		st = CM_OK;
	}
	if (st != CM_OK)
		goto out;
	st = gguf_str_array(g, "tokenizer.ggml.merges", 0, &merges, &mlens, &nm, err, err_len);
	if (st != CM_OK)
		goto out;
	v.n_tokens = n;
	v.tokens = tokens;
	v.token_lens = tlens;
	v.scores = scores;
	v.types = types;
	v.n_merges = nm;
	v.merges = merges;
	v.merge_lens = mlens;
	v.bos = gguf_id(g, "tokenizer.ggml.bos_token_id");
	v.eos = gguf_id(g, "tokenizer.ggml.eos_token_id");
	v.eot = gguf_id(g, "tokenizer.ggml.eot_token_id");
	v.eom = gguf_id(g, "tokenizer.ggml.eom_token_id");
	v.unk = gguf_id(g, "tokenizer.ggml.unknown_token_id");
	v.pad = gguf_id(g, "tokenizer.ggml.padding_token_id");
	v.add_bos = gguf_flag(g, "tokenizer.ggml.add_bos_token");
	v.add_eos = gguf_flag(g, "tokenizer.ggml.add_eos_token");
	v.add_space_prefix = gguf_flag(g, "tokenizer.ggml.add_space_prefix");
	if (v.model && strcmp(v.model, "bert") == 0) {
		/* WordPiece files name [CLS] and [SEP] (the key is spelled so) */
		int64_t cls = gguf_id(g, "tokenizer.ggml.cls_token_id");
		int64_t sep = gguf_id(g, "tokenizer.ggml.seperator_token_id");

		if (cls != -1)
			v.bos = cls;
		if (sep != -1)
			v.eos = sep;
	}
	st = wk_tok_new_from_vocab(&v, out, err, err_len);
out:
	cm_free(tokens);
	cm_free(tlens);
	cm_free(merges);
	cm_free(mlens);
	cm_free(scores);
	cm_free(types);
	return st;
}
