/*
 * tokenizer.c - SentencePiece-style and byte-level BPE tokenizers and the
 * streaming detokenizer (see tokenizer.h and docs/tokenizers.md).
 *
 * Owns: copies of the token texts, their decoded pieces, scores and types,
 * a text -> id hash map and a (left id, right id) -> rank merge map.  All
 * of it is built once and read-only afterwards; encode allocates its
 * scratch per call, so one struct wk_tok serves any number of threads.
 * The pre-tokenizers live in tokenizer_pre.c.
 */
#include "worker/text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/model/gguf.h"
#include "worker/text/pretok.h"

#define TOK_A_EOG 0x01u
#define TOK_A_RSTRIP 0x02u
#define TOK_A_LSTRIP 0x04u

#define TOK_MAX_INPUT_BYTES (64u << 20)


struct tok_merge {
	uint32_t left, right; /* token ids */
	uint32_t rank1;       /* rank + 1; 0 = empty slot */
};

struct wk_tok {
	int is_bpe;
	const struct wk_tok_pre *pre;
	uint32_t n_vocab;
	char *text;          /* token texts back to back */
	uint32_t *text_off;  /* [n_vocab + 1] */
	char *piece;         /* decoded pieces back to back */
	uint32_t *piece_off; /* [n_vocab + 1] */
	float *scores;       /* [n_vocab] */
	uint8_t *types;      /* [n_vocab] enum wk_tok_type */
	uint8_t *attrs;      /* [n_vocab] TOK_A_* */
	uint32_t *map;       /* text hash -> id + 1; 0 empty */
	uint32_t map_mask;
	struct tok_merge *merges;
	uint32_t merge_mask;
	size_t n_ignored_merges;
	int32_t byte_tok[256]; /* <0xNN> token of each byte, -1 */
	int32_t *specials;     /* tokens matched as whole strings, longest first */
	size_t n_specials;
	int32_t bos, eos, eot, eom, unk, pad;
	int add_bos, add_eos, add_space_prefix;
};

/* ================================================================ */
/* helpers                                                          */
/* ================================================================ */

static uint64_t tok_hash(const void *p, size_t n)
{
	const uint8_t *s = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h ^ (h >> 29);
}

static uint64_t tok_pair_hash(uint32_t a, uint32_t b)
{
	uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;

	return h ^ (h >> 31);
}

static inline const char *tok_text(const struct wk_tok *t, uint32_t id, size_t *len)
{
	*len = t->text_off[id + 1] - t->text_off[id];
	return t->text + t->text_off[id];
}

/* Exact lookup over all tokens: id or -1. */
static int32_t tok_find(const struct wk_tok *t, const char *s, size_t n)
{
	uint64_t h = tok_hash(s, n);

	for (uint32_t i = (uint32_t)h & t->map_mask;; i = (i + 1) & t->map_mask) {
		uint32_t v = t->map[i];
		size_t len;
		const char *txt;

		if (v == 0)
			return -1;
		txt = tok_text(t, v - 1, &len);
		if (len == n && memcmp(txt, s, n) == 0)
			return (int32_t)(v - 1);
	}
}

/*
 * Lookup used while encoding text: control, unknown and byte tokens are
 * never produced from their spelling (the SentencePiece rule), nor are
 * end-of-generation tokens of any type.
 */
static int32_t tok_find_text(const struct wk_tok *t, const char *s, size_t n)
{
	int32_t id = tok_find(t, s, n);

	if (id < 0 || (t->attrs[id] & TOK_A_EOG))
		return -1;
	switch (t->types[id]) {
	case WK_TOK_T_CONTROL:
	case WK_TOK_T_UNKNOWN:
	case WK_TOK_T_BYTE:
		return -1;
	default:
		return id;
	}
}

static int64_t tok_merge_rank(const struct wk_tok *t, int32_t l, int32_t r)
{
	if (!t->merges || l < 0 || r < 0)
		return -1;
	for (uint32_t i = (uint32_t)tok_pair_hash((uint32_t)l, (uint32_t)r) & t->merge_mask;;
	     i = (i + 1) & t->merge_mask) {
		const struct tok_merge *m = &t->merges[i];

		if (m->rank1 == 0)
			return -1;
		if (m->left == (uint32_t)l && m->right == (uint32_t)r)
			return (int64_t)m->rank1 - 1;
	}
}

/*
 * GPT-2 byte <-> code point table: printable bytes map to themselves, the
 * other 68 (0x00-0x20, 0x7F-0xA0, 0xAD) to U+0100.. in byte order.
 */
static uint32_t bpe_byte_cp(uint8_t b)
{
	if (b <= 0x20)
		return 256u + b;
	if (b >= 0x7F && b <= 0xA0)
		return 256u + 33u + (b - 0x7Fu);
	if (b == 0xAD)
		return 256u + 67u;
	return b;
}

/* Inverse of bpe_byte_cp: byte, or -1 for a code point outside the table. */
static int bpe_cp_byte(uint32_t cp)
{
	if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
		return (int)cp;
	if (cp >= 256 && cp <= 256 + 32)
		return (int)(cp - 256);
	if (cp >= 256 + 33 && cp <= 256 + 66)
		return (int)(0x7F + cp - 256 - 33);
	if (cp == 256 + 67)
		return 0xAD;
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* "<0xNN>" -> NN, or -1. */
static int parse_byte_token(const char *s, size_t n)
{
	int hi, lo;

	if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>')
		return -1;
	hi = hexval(s[3]);
	lo = hexval(s[4]);
	if (hi < 0 || lo < 0)
		return -1;
	return hi * 16 + lo;
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 16;

	while (p < n)
		p <<= 1;
	return p;
}

/* ================================================================ */
/* construction                                                     */
/* ================================================================ */

void wk_tok_vocab_init(struct wk_tok_vocab *v)
{
	memset(v, 0, sizeof(*v));
	v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = -1;
	v->add_bos = v->add_eos = v->add_space_prefix = -1;
}

void wk_tok_free(struct wk_tok *t)
{
	if (!t)
		return;
	cm_free(t->text);
	cm_free(t->text_off);
	cm_free(t->piece);
	cm_free(t->piece_off);
	cm_free(t->scores);
	cm_free(t->types);
	cm_free(t->attrs);
	cm_free(t->map);
	cm_free(t->merges);
	cm_free(t->specials);
	cm_free(t);
}

static size_t vlen(const char *const *s, const size_t *lens, size_t i)
{
	return lens ? lens[i] : (s[i] ? strlen(s[i]) : 0);
}

/* Decoded bytes of token `id` appended at dst (room: 4 * text length). */
static size_t tok_decode_piece(const struct wk_tok *t, uint32_t id, char *dst)
{
	size_t len, n = 0;
	const char *s = tok_text(t, id, &len);
	int type = t->types[id];

	if (type == WK_TOK_T_BYTE) {
		dst[0] = (char)parse_byte_token(s, len);
		return 1;
	}
	if (type != WK_TOK_T_NORMAL) {
		memcpy(dst, s, len);
		return len;
	}
	if (!t->is_bpe) {
		for (size_t i = 0; i < len;) {
			if (i + 3 <= len && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
				dst[n++] = ' ';
				i += 3;
			} else {
				dst[n++] = s[i++];
			}
		}
		return n;
	}
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int k = cm_utf8_decode((const uint8_t *)s + i, len - i, &cp);
		int b;

		if (k == 0) { /* not UTF-8: keep the byte */
			dst[n++] = s[i++];
			continue;
		}
		b = bpe_cp_byte(cp);
		if (b >= 0) {
			dst[n++] = (char)b;
		} else { /* outside the byte table: keep the character */
			memcpy(dst + n, s + i, (size_t)k);
			n += (size_t)k;
		}
		i += (size_t)k;
	}
	return n;
}

static int cmp_special(const void *a, const void *b, void *arg)
{
	const struct wk_tok *t = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	size_t lx = t->text_off[x + 1] - t->text_off[x];
	size_t ly = t->text_off[y + 1] - t->text_off[y];

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return x < y ? -1 : (x > y);
}

static const char *const tok_eog_names[] = {
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
	"<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
	("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"),
};

static int name_has(const char *name, const char *needle)
{
	size_t n = strlen(needle);

	if (!name)
		return 0;
	for (const char *p = name; *p; p++) {
		size_t i;

		for (i = 0; i < n && p[i]; i++) {
			char c = p[i];

			if (c >= 'A' && c <= 'Z')
				c = (char)(c - 'A' + 'a');
			if (c != needle[i])
				break;
		}
		if (i == n)
			return 1;
	}
	return 0;
}

static enum cm_status check_id(int64_t id, const char *what, size_t n, int32_t *out,
			       char *err, size_t err_len)
{
	if (id == -1) {
		*out = -1;
		return CM_OK;
	}
	if (id < 0 || (uint64_t)id >= n) {
		snprintf(err, err_len, "tokenizer.ggml.%s: expected a token id below %zu, found %lld",
			 what, n, (long long)id);
		return CM_EFORMAT;
	}
	*out = (int32_t)id;
	return CM_OK;
}

static enum cm_status tok_build_merges(struct wk_tok *t, const struct wk_tok_vocab *v,
				       char *err, size_t err_len)
{
	size_t cap;

	if (v->n_merges > WK_TOK_MAX_MERGES) {
		snprintf(err, err_len, "tokenizer.ggml.merges: expected at most %u merges, found %zu",
			 WK_TOK_MAX_MERGES, v->n_merges);
		return CM_ELIMIT;
	}
	if (v->n_merges == 0)
		return CM_OK;
	cap = pow2_at_least(v->n_merges * 2);
	t->merges = cm_calloc(cap, sizeof(*t->merges));
	if (!t->merges)
		return CM_ENOMEM;
	t->merge_mask = (uint32_t)(cap - 1);
	for (size_t r = 0; r < v->n_merges; r++) {
		const char *s = v->merges[r];
		size_t n = vlen(v->merges, v->merge_lens, r), sp;
		int32_t l, rr;
		uint32_t i;

		if (!s) {
			t->n_ignored_merges++;
			continue;
		}
		/* split at the first space after the first byte */
		for (sp = 1; sp < n && s[sp] != ' '; sp++)
			;
		if (sp >= n) {
			t->n_ignored_merges++;
			continue;
		}
		l = tok_find(t, s, sp);
		rr = tok_find(t, s + sp + 1, n - sp - 1);
		if (l < 0 || rr < 0) {
			t->n_ignored_merges++;
			continue;
		}
		for (i = (uint32_t)tok_pair_hash((uint32_t)l, (uint32_t)rr) & t->merge_mask;;
		     i = (i + 1) & t->merge_mask) {
			struct tok_merge *m = &t->merges[i];

			if (m->rank1 == 0) {
				m->left = (uint32_t)l;
				m->right = (uint32_t)rr;
				m->rank1 = (uint32_t)r + 1;
				break;
			}
			if (m->left == (uint32_t)l && m->right == (uint32_t)rr)
				break; /* duplicate: the first (lowest) rank wins */
		}
	}
	return CM_OK;
}

enum cm_status wk_tok_new_from_vocab(const struct wk_tok_vocab *v, struct wk_tok **out,
				     char *err, size_t err_len)
{
	struct wk_tok *t = NULL;
	enum cm_status st = CM_OK;
	size_t n = v->n_tokens, total = 0, cap, pbytes = 0;
	const char *pre_name = v->pre && v->pre[0] ? v->pre : "default";

	*out = NULL;
	if (err_len)
		err[0] = '\0';
	t = cm_calloc(1, sizeof(*t));
	if (!t)
		return CM_ENOMEM;
	if (v->model && strcmp(v->model, "llama") == 0) {
		t->is_bpe = 0;
	} else if (v->model && strcmp(v->model, "gpt2") == 0) {
		t->is_bpe = 1;
	} else {
		snprintf(err, err_len, "tokenizer.ggml.model: expected \"llama\" or \"gpt2\", found \"%s\"",
			 v->model ? v->model : "(absent)");
		st = CM_EUNSUPPORTED;
		goto out;
	}
	if (t->is_bpe) {
		t->pre = wk_tok_pre_find(pre_name);
		if (!t->pre) {
			snprintf(err, err_len, "tokenizer.ggml.pre: unsupported pre-tokenizer \"%.64s\" "
				 "(known: default, llama3/llama-bpe, qwen2, deepseek-llm, deepseek-coder, "
				 "starcoder, refact, falcon, mpt, gpt-2, ...)", pre_name);
			st = CM_EUNSUPPORTED;
			goto out;
		}
	} else {
		t->pre = wk_tok_pre_default();
	}
	if (n == 0 || n > WK_TOK_MAX_VOCAB || !v->tokens) {
		snprintf(err, err_len, "tokenizer.ggml.tokens: expected 1..%u tokens, found %zu",
			 WK_TOK_MAX_VOCAB, v->tokens ? n : 0);
		st = n > WK_TOK_MAX_VOCAB ? CM_ELIMIT : CM_EFORMAT;
		goto out;
	}
	t->n_vocab = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		size_t len = vlen(v->tokens, v->token_lens, i);

		if (!v->tokens[i] && len) {
			snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: missing text", i);
			st = CM_EFORMAT;
			goto out;
		}
		if (len > WK_TOK_MAX_TOKEN_BYTES) {
			snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: expected at most %u bytes, found %zu",
				 i, WK_TOK_MAX_TOKEN_BYTES, len);
			st = CM_ELIMIT;
			goto out;
		}
		total += len;
		if (total > WK_TOK_MAX_TEXT_BYTES) {
			snprintf(err, err_len, "tokenizer.ggml.tokens: more than %u bytes of token text",
				 WK_TOK_MAX_TEXT_BYTES);
			st = CM_ELIMIT;
			goto out;
		}
	}
	t->text = cm_malloc(total + 1);
	t->text_off = cm_calloc(n + 1, sizeof(uint32_t));
	t->piece_off = cm_calloc(n + 1, sizeof(uint32_t));
	t->scores = cm_calloc(n, sizeof(float));
	t->types = cm_calloc(n, 1);
	t->attrs = cm_calloc(n, 1);
	cap = pow2_at_least(n * 2);
	t->map = cm_calloc(cap, sizeof(uint32_t));
	if (!t->text || !t->text_off || !t->piece_off || !t->scores || !t->types || !t->attrs || !t->map) {
		st = CM_ENOMEM;
		goto out;
	}
	t->map_mask = (uint32_t)(cap - 1);
	for (int b = 0; b < 256; b++)
		t->byte_tok[b] = -1;
	total = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = vlen(v->tokens, v->token_lens, i);
		int32_t type = v->types ? v->types[i] : WK_TOK_T_NORMAL;

		if (len)
			memcpy(t->text + total, v->tokens[i], len);
		t->text_off[i] = (uint32_t)total;
		total += len;
		if (type == 0)
			type = WK_TOK_T_NORMAL; /* "undefined" in older files */
		if (type < WK_TOK_T_NORMAL || type > WK_TOK_T_BYTE) {
			snprintf(err, err_len, "tokenizer.ggml.token_type[%zu]: expected 1..6, found %d",
				 i, (int)type);
			st = CM_EFORMAT;
			goto out;
		}
		t->types[i] = (uint8_t)type;
		t->scores[i] = v->scores ? v->scores[i] : 0.0f;
		if (type == WK_TOK_T_BYTE) {
			int b = parse_byte_token(t->text + t->text_off[i], len);

			if (b < 0) {
				snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: a byte token must be "
					 "\"<0xNN>\", found \"%.*s\"", i, (int)(len > 32 ? 32 : len),
					 t->text + t->text_off[i]);
				st = CM_EFORMAT;
				goto out;
			}
			if (t->byte_tok[b] < 0)
				t->byte_tok[b] = (int32_t)i;
		}
	}
	t->text_off[n] = (uint32_t)total;
	/* text -> id map: the last of duplicate texts wins (as the reference) */
	for (size_t i = 0; i < n; i++) {
		size_t len;
		const char *s = tok_text(t, (uint32_t)i, &len);
		uint32_t h = (uint32_t)tok_hash(s, len) & t->map_mask;

		for (;; h = (h + 1) & t->map_mask) {
			uint32_t e = t->map[h];
			size_t elen;
			const char *es;

			if (e == 0) {
				t->map[h] = (uint32_t)i + 1;
				break;
			}
			es = tok_text(t, e - 1, &elen);
			if (elen == len && memcmp(es, s, len) == 0) {
				t->map[h] = (uint32_t)i + 1;
				break;
			}
		}
	}
	/* special ids */
	if ((st = check_id(v->bos, "bos_token_id", n, &t->bos, err, err_len)) ||
	    (st = check_id(v->eos, "eos_token_id", n, &t->eos, err, err_len)) ||
	    (st = check_id(v->eot, "eot_token_id", n, &t->eot, err, err_len)) ||
	    (st = check_id(v->eom, "eom_token_id", n, &t->eom, err, err_len)) ||
	    (st = check_id(v->unk, "unknown_token_id", n, &t->unk, err, err_len)) ||
	    (st = check_id(v->pad, "padding_token_id", n, &t->pad, err, err_len)))
		goto out;
	if (!t->is_bpe) {
		if (v->bos == -1 && n > 1)
			t->bos = 1;
		if (v->eos == -1 && n > 2)
			t->eos = 2;
		if (v->unk == -1)
			t->unk = 0;
	}
	/* family defaults apply only when the id exists; explicit flags must */
	t->add_bos = v->add_bos >= 0 ? v->add_bos : ((t->is_bpe ? t->pre->add_bos : 1) && t->bos >= 0);
	t->add_eos = v->add_eos >= 0 ? v->add_eos : 0;
	t->add_space_prefix = t->is_bpe ? 0 : (v->add_space_prefix >= 0 ? v->add_space_prefix : 1);
	if ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)) {
		snprintf(err, err_len, "tokenizer.ggml.add_%s_token is true but no %s token id is set",
			 t->add_bos && t->bos < 0 ? "bos" : "eos", t->add_bos && t->bos < 0 ? "BOS" : "EOS");
		st = CM_EFORMAT;
		goto out;
	}
	/* decoded pieces */
	for (size_t i = 0; i < n; i++)
		pbytes += (t->text_off[i + 1] - t->text_off[i]) * 3 + 1;
	t->piece = cm_malloc(pbytes + 1);
	if (!t->piece) {
		st = CM_ENOMEM;
		goto out;
	}
	pbytes = 0;
	for (size_t i = 0; i < n; i++) {
		t->piece_off[i] = (uint32_t)pbytes;
		pbytes += tok_decode_piece(t, (uint32_t)i, t->piece + pbytes);
	}
	t->piece_off[n] = (uint32_t)pbytes;
	/* tokens matched as whole strings: control, user-defined, unknown */
	t->specials = cm_calloc(n, sizeof(int32_t));
	if (!t->specials) {
		st = CM_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		int type = t->types[i];

		if ((type == WK_TOK_T_CONTROL || type == WK_TOK_T_USER_DEFINED ||
		     type == WK_TOK_T_UNKNOWN) && t->text_off[i + 1] > t->text_off[i])
			t->specials[t->n_specials++] = (int32_t)i;
	}
	qsort_r(t->specials, t->n_specials, sizeof(int32_t), cmp_special, t);
	/* end-of-generation set */
	if (t->eos >= 0)
		t->attrs[t->eos] |= TOK_A_EOG;
	if (t->eot >= 0)
		t->attrs[t->eot] |= TOK_A_EOG;
	if (t->eom >= 0)
		t->attrs[t->eom] |= TOK_A_EOG;
	for (size_t i = 0; i < sizeof(tok_eog_names) / sizeof(tok_eog_names[0]); i++) {
		int32_t id = tok_find(t, tok_eog_names[i], strlen(tok_eog_names[i]));

		if (id >= 0 && (t->types[id] == WK_TOK_T_CONTROL || t->types[id] == WK_TOK_T_USER_DEFINED)) {
			t->attrs[id] |= TOK_A_EOG;
			if (t->eot < 0 && i < 4)
				t->eot = id;
		}
	}
	/* the reference strips spaces after Phi-3's special tokens */
	if (name_has(v->name, "phi-3") || name_has(v->name, "phi3")) {
		static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };

		for (size_t i = 0; i < t->n_specials; i++)
			t->attrs[t->specials[i]] |= TOK_A_RSTRIP;
		for (size_t i = 0; i < 3; i++) {
			int32_t id = tok_find(t, keep[i], strlen(keep[i]));

			if (id >= 0)
				t->attrs[id] &= (uint8_t)~TOK_A_RSTRIP;
		}
	}
	if (t->is_bpe && (st = tok_build_merges(t, v, err, err_len)) != CM_OK)
		goto out;
	*out = t;
	t = NULL;
out:
	if (st == CM_ENOMEM && err_len && !err[0])
		snprintf(err, err_len, "out of memory building the tokenizer");
	wk_tok_free(t);
	return st;
}

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

/* ================================================================ */
/* accessors                                                        */
/* ================================================================ */

size_t wk_tok_n_vocab(const struct wk_tok *t) { return t->n_vocab; }
int32_t wk_tok_bos(const struct wk_tok *t) { return t->bos; }
int32_t wk_tok_eos(const struct wk_tok *t) { return t->eos; }
int32_t wk_tok_eot(const struct wk_tok *t) { return t->eot; }
int wk_tok_add_bos(const struct wk_tok *t) { return t->add_bos; }
size_t wk_tok_n_ignored_merges(const struct wk_tok *t) { return t->n_ignored_merges; }
const char *wk_tok_model_name(const struct wk_tok *t) { return t->is_bpe ? "bpe" : "spm"; }
const char *wk_tok_pre_name(const struct wk_tok *t) { return t->is_bpe ? t->pre->name : "spm"; }

int wk_tok_is_eog(const struct wk_tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_vocab && (t->attrs[id] & TOK_A_EOG);
}

int wk_tok_is_control(const struct wk_tok *t, int32_t id)
{
	return id >= 0 && (uint32_t)id < t->n_vocab && t->types[id] == WK_TOK_T_CONTROL;
}

enum wk_tok_type wk_tok_type(const struct wk_tok *t, int32_t id)
{
	if (id < 0 || (uint32_t)id >= t->n_vocab)
		return 0;
	return (enum wk_tok_type)t->types[id];
}

const char *wk_tok_piece(const struct wk_tok *t, int32_t id, size_t *len)
{
	if (id < 0 || (uint32_t)id >= t->n_vocab) {
		*len = 0;
		return NULL;
	}
	*len = t->piece_off[id + 1] - t->piece_off[id];
	return t->piece + t->piece_off[id];
}

int32_t wk_tok_lookup(const struct wk_tok *t, const char *text)
{
	return tok_find(t, text, strlen(text));
}

/* ================================================================ */
/* encoding                                                         */
/* ================================================================ */

struct sym {
	uint32_t off, n;   /* bytes in the work buffer; n == 0: merged away */
	int32_t prev, next;
	int32_t id;        /* BPE: token of the text so far, -1 */
};

struct cand {
	double key;        /* lower is better: -score (SPM) or rank (BPE) */
	int32_t left, right;
	uint32_t ln, rn;   /* symbol lengths when pushed: staleness check */
};

struct enc {
	const struct wk_tok *tok;
	int32_t *out;
	size_t cap, n;
	/* scratch, grown per call */
	char *buf;
	size_t buf_cap;
	struct sym *syms;
	size_t syms_cap;
	struct cand *heap;
	size_t heap_n, heap_cap;
	uint32_t *cps;
	uint32_t *boff;
	struct wk_tok_chunk *ch[2];
	size_t cps_cap;
};

static void emit(struct enc *e, int32_t id)
{
	if (e->n < e->cap)
		e->out[e->n] = id;
	e->n++;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	np = cm_reallocarray(*p, nc, elem);
	if (!np)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

static int cand_better(const struct cand *a, const struct cand *b)
{
	return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(struct enc *e, struct cand c)
{
	size_t i;

	if (grow((void **)&e->heap, &e->heap_cap, e->heap_n + 1, sizeof(*e->heap)))
		return -1;
	i = e->heap_n++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!cand_better(&c, &e->heap[parent]))
			break;
		e->heap[i] = e->heap[parent];
		i = parent;
	}
	e->heap[i] = c;
	return 0;
}

static struct cand heap_pop(struct enc *e)
{
	struct cand top = e->heap[0], last = e->heap[--e->heap_n];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, best = i;
		const struct cand *bc = &last;

		if (l < e->heap_n && cand_better(&e->heap[l], bc)) {
			best = l;
			bc = &e->heap[l];
		}
		if (r < e->heap_n && cand_better(&e->heap[r], bc))
			best = r;
		if (best == i)
			break;
		e->heap[i] = e->heap[best];
		i = best;
	}
	if (e->heap_n)
		e->heap[i] = last;
	return top;
}

/* Pushes the pair (l, r) when it merges; -1 on allocation failure. */
static int try_pair(struct enc *e, int32_t l, int32_t r)
{
	const struct wk_tok *t = e->tok;
	struct sym *a, *b;
	struct cand c;

	if (l < 0 || r < 0)
		return 0;
	a = &e->syms[l];
	b = &e->syms[r];
	if (!t->is_bpe) {
		int32_t id = tok_find_text(t, e->buf + a->off, a->n + b->n);

		if (id < 0)
			return 0;
		c.key = -(double)t->scores[id];
	} else {
		int64_t rank = tok_merge_rank(t, a->id, b->id);

		if (rank < 0)
			return 0;
		c.key = (double)rank;
	}
	c.left = l;
	c.right = r;
	c.ln = a->n;
	c.rn = b->n;
	return heap_push(e, c);
}

/*
 * Merges the symbols of e->buf (already split into e->syms[0..n)) by the
 * best candidate first until none is left.
 */
static int merge_all(struct enc *e, size_t n)
{
	e->heap_n = 0;
	for (size_t i = 1; i < n; i++)
		if (try_pair(e, (int32_t)i - 1, (int32_t)i))
			return -1;
	while (e->heap_n) {
		struct cand c = heap_pop(e);
		struct sym *a = &e->syms[c.left], *b = &e->syms[c.right];

		if (a->n == 0 || b->n == 0 || a->n != c.ln || b->n != c.rn || a->next != c.right)
			continue;
		a->n += b->n;
		b->n = 0;
		a->next = b->next;
		if (b->next >= 0)
			e->syms[b->next].prev = c.left;
		if (e->tok->is_bpe)
			a->id = tok_find(e->tok, e->buf + a->off, a->n);
		if (try_pair(e, a->prev, c.left) || try_pair(e, c.left, a->next))
			return -1;
	}
	return 0;
}

static size_t utf8_len(uint8_t b)
{
	if (b < 0x80)
		return 1;
	if ((b & 0xE0) == 0xC0)
		return 2;
	if ((b & 0xF0) == 0xE0)
		return 3;
	if ((b & 0xF8) == 0xF0)
		return 4;
	return 1;
}

/* Splits e->buf[0..len) into one symbol per UTF-8 character. */
static int split_chars(struct enc *e, size_t len, size_t *n_syms)
{
	size_t n = 0;

	if (grow((void **)&e->syms, &e->syms_cap, len + 1, sizeof(*e->syms)))
		return -1;
	for (size_t off = 0; off < len;) {
		size_t k = utf8_len((uint8_t)e->buf[off]);

		if (k > len - off)
			k = len - off;
		e->syms[n] = (struct sym){ (uint32_t)off, (uint32_t)k, (int32_t)n - 1,
					   off + k == len ? -1 : (int32_t)n + 1, -1 };
		if (e->tok->is_bpe)
			e->syms[n].id = tok_find(e->tok, e->buf + off, k);
		n++;
		off += k;
	}
	*n_syms = n;
	return 0;
}

/* SentencePiece: one raw fragment. */
static int encode_spm(struct enc *e, const char *s, size_t len, int prefix)
{
	const struct wk_tok *t = e->tok;
	size_t n = 0, n_syms;

	if (grow((void **)&e->buf, &e->buf_cap, (len + 1) * 3 + 1, 1))
		return -1;
	if (prefix) {
		memcpy(e->buf, "\xE2\x96\x81", 3);
		n = 3;
	}
	for (size_t i = 0; i < len; i++) {
		if (s[i] == ' ') {
			memcpy(e->buf + n, "\xE2\x96\x81", 3);
			n += 3;
		} else {
			e->buf[n++] = s[i];
		}
	}
	if (n == 0)
		return 0;
	if (split_chars(e, n, &n_syms) || merge_all(e, n_syms))
		return -1;
	for (int32_t i = 0; i != -1; i = e->syms[i].next) {
		const struct sym *y = &e->syms[i];
		int32_t id = tok_find_text(t, e->buf + y->off, y->n);

		if (id >= 0) {
			emit(e, id);
			continue;
		}
		for (uint32_t j = 0; j < y->n; j++) {
			int32_t b = t->byte_tok[(uint8_t)e->buf[y->off + j]];

			if (b >= 0)
				emit(e, b);
			else if (t->unk >= 0)
				emit(e, t->unk);
		}
	}
	return 0;
}

/* Byte-level BPE of one pre-tokenized word (bytes s[0..len)). */
static int encode_bpe_word(struct enc *e, const char *s, size_t len)
{
	const struct wk_tok *t = e->tok;
	size_t n = 0, n_syms;

	if (grow((void **)&e->buf, &e->buf_cap, len * 2 + 1, 1))
		return -1;
	for (size_t i = 0; i < len; i++) {
		uint8_t u[4];
		int k = cm_utf8_encode(bpe_byte_cp((uint8_t)s[i]), u);

		memcpy(e->buf + n, u, (size_t)k);
		n += (size_t)k;
	}
	if (t->pre->ignore_merges) {
		int32_t id = tok_find_text(t, e->buf, n);

		if (id >= 0) {
			emit(e, id);
			return 0;
		}
	}
	if (split_chars(e, n, &n_syms) || merge_all(e, n_syms))
		return -1;
	for (int32_t i = 0; i != -1; i = e->syms[i].next) {
		const struct sym *y = &e->syms[i];
		int32_t id = tok_find_text(t, e->buf + y->off, y->n);

		if (id >= 0) {
			emit(e, id);
			continue;
		}
		/* as the reference: each byte of the text on its own, when a token */
		for (uint32_t j = 0; j < y->n; j++) {
			id = tok_find_text(t, e->buf + y->off + j, 1);
			if (id >= 0)
				emit(e, id);
		}
	}
	return 0;
}

/*
 * Runs the pre-tokenizer over s[0..len) (valid UTF-8): on return the
 * chunks e->ch[*which][0..*n_ch) are the words, in code points, and
 * e->boff maps code points to byte offsets.
 */
static int pre_split(struct enc *e, const char *s, size_t len, struct wk_tok_chunk **words, size_t *n_words)
{
	const struct wk_tok_pre *pre = e->tok->pre;
	size_t n = 0, n_ch = 1;
	struct wk_tok_chunk *cur, *nxt;
	size_t old_cap = e->cps_cap;

	*n_words = 0;
	if (grow((void **)&e->cps, &e->cps_cap, len + 1, sizeof(uint32_t)))
		return -1;
	if (e->cps_cap != old_cap || !e->boff) {
		/* the other per-code-point arrays follow cps_cap */
		uint32_t *b = cm_reallocarray(e->boff, e->cps_cap, sizeof(uint32_t));
		struct wk_tok_chunk *c0, *c1;

		if (!b)
			return -1;
		e->boff = b;
		c0 = cm_reallocarray(e->ch[0], e->cps_cap, sizeof(struct wk_tok_chunk));
		if (!c0)
			return -1;
		e->ch[0] = c0;
		c1 = cm_reallocarray(e->ch[1], e->cps_cap, sizeof(struct wk_tok_chunk));
		if (!c1)
			return -1;
		e->ch[1] = c1;
	}
	for (size_t off = 0; off < len;) {
		uint32_t cp;
		int k = cm_utf8_decode((const uint8_t *)s + off, len - off, &cp);

		if (k == 0)
			k = 1; /* cannot happen: input is sanitized */
		e->cps[n] = cp;
		e->boff[n] = (uint32_t)off;
		n++;
		off += (size_t)k;
	}
	e->boff[n] = (uint32_t)len;
	if (n == 0)
		return 0;
	cur = e->ch[0];
	nxt = e->ch[1];
	cur[0] = (struct wk_tok_chunk){ 0, (uint32_t)n };
	for (size_t p = 0; p < pre->n_pats; p++) {
		struct wk_tok_chunk *tmp;

		n_ch = wk_tok_pre_pass((enum wk_tok_pat)pre->pats[p], e->cps, cur, n_ch, nxt);
		tmp = cur;
		cur = nxt;
		nxt = tmp;
	}
	*words = cur;
	*n_words = n_ch;
	return 0;
}

/* Byte-level BPE: one raw fragment (valid UTF-8). */
static int encode_bpe(struct enc *e, const char *s, size_t len)
{
	struct wk_tok_chunk *w;
	size_t n_w;

	if (pre_split(e, s, len, &w, &n_w))
		return -1;
	for (size_t i = 0; i < n_w; i++) {
		size_t b0 = e->boff[w[i].start], b1 = e->boff[w[i].start + w[i].len];

		if (encode_bpe_word(e, s + b0, b1 - b0))
			return -1;
	}
	return 0;
}

static void enc_deinit(struct enc *e)
{
	cm_free(e->buf);
	cm_free(e->syms);
	cm_free(e->heap);
	cm_free(e->cps);
	cm_free(e->boff);
	cm_free(e->ch[0]);
	cm_free(e->ch[1]);
}

enum cm_status wk_tok_pre_split(const struct wk_tok *tok, const char *text, size_t len,
				size_t *ends, size_t cap, size_t *n_words)
{
	struct enc e = { .tok = tok };
	struct wk_tok_chunk *w;
	size_t n_w;
	enum cm_status st = CM_OK;

	*n_words = 0;
	if (!tok->is_bpe)
		return CM_EINVAL;
	if (pre_split(&e, text, len, &w, &n_w)) {
		st = CM_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_w && i < cap; i++)
		ends[i] = e.boff[w[i].start + w[i].len];
	*n_words = n_w;
	if (n_w > cap)
		st = CM_ELIMIT;
out:
	enc_deinit(&e);
	return st;
}

struct frag {
	size_t off, len;
	int32_t id; /* >= 0: a whole token */
};

/*
 * Splits text into raw fragments and whole tokens: every special token,
 * longest first, is cut out of every raw fragment (left to right), as the
 * reference tokenizer does.  Tokens marked LSTRIP/RSTRIP eat the ASCII
 * whitespace next to them.
 */
struct frag_list {
	struct frag *f;
	size_t n, cap;
};

static int frag_add(struct frag_list *l, size_t off, size_t len, int32_t id)
{
	if (grow((void **)&l->f, &l->cap, l->n + 1, sizeof(*l->f)))
		return -1;
	l->f[l->n++] = (struct frag){ off, len, id };
	return 0;
}

static int is_ascii_space(char c)
{
	return c == ' ' || (c >= 9 && c <= 13);
}

struct span {
	size_t start, end;
};

/* 1 when [off, off + n) lies inside one of the sorted, merged spans. */
static int span_covers(const struct span *sp, size_t n_sp, size_t off, size_t n)
{
	size_t lo = 0, hi = n_sp;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (off < sp[mid].start)
			hi = mid;
		else if (off >= sp[mid].end)
			lo = mid + 1;
		else
			return off + n <= sp[mid].end;
	}
	return 0;
}

static int partition(const struct wk_tok *t, const char *s, size_t len,
		     const struct span *sp, size_t n_sp, struct frag **fr, size_t *n_fr)
{
	struct frag_list cur = { 0 }, nxt = { 0 };
	uint8_t present[256] = { 0 };
	uint64_t pairs[65536 / 64] = { 0 }; /* byte pairs present in the text */

	*fr = NULL;
	*n_fr = 0;
	if (len && frag_add(&cur, 0, len, -1))
		goto fail;
	for (size_t i = 0; i < len; i++) {
		present[(uint8_t)s[i]] = 1;
		if (i + 1 < len) {
			unsigned pr = (unsigned)(uint8_t)s[i] << 8 | (uint8_t)s[i + 1];

			pairs[pr / 64] |= 1ull << (pr % 64);
		}
	}
	for (size_t k = 0; k < t->n_specials; k++) {
		int32_t id = t->specials[k];
		size_t tl;
		const char *tt = tok_text(t, (uint32_t)id, &tl);
		uint8_t attr = t->attrs[id];
		/* user-defined tokens match in any text, unless they end turns */
		int always = t->types[id] == WK_TOK_T_USER_DEFINED && !(attr & TOK_A_EOG);
		struct frag_list tmp;

		if (!always && n_sp == 0)
			continue;
		if (!present[(uint8_t)tt[0]] || tl > len)
			continue;
		if (tl > 1) {
			unsigned pr = (unsigned)(uint8_t)tt[0] << 8 | (uint8_t)tt[1];

			if (!(pairs[pr / 64] & (1ull << (pr % 64))))
				continue;
		}
		nxt.n = 0;
		for (size_t i = 0; i < cur.n; i++) {
			const struct frag *f = &cur.f[i];
			size_t pos = f->off, at = f->off, end = f->off + f->len;
			const char *hit;

			if (f->id >= 0 || f->len < tl) {
				if (frag_add(&nxt, f->off, f->len, f->id))
					goto fail;
				continue;
			}
			while (at < end && (hit = memmem(s + at, end - at, tt, tl)) != NULL) {
				size_t h = (size_t)(hit - s), ll = h - pos;

				if (!always && !span_covers(sp, n_sp, h, tl)) {
					at = h + 1; /* user text: not a token here */
					continue;
				}
				if (attr & TOK_A_LSTRIP)
					while (ll > 0 && is_ascii_space(s[pos + ll - 1]))
						ll--;
				if ((ll && frag_add(&nxt, pos, ll, -1)) || frag_add(&nxt, 0, 0, id))
					goto fail;
				pos = h + tl;
				if (attr & TOK_A_RSTRIP)
					while (pos < end && is_ascii_space(s[pos]))
						pos++;
				at = pos;
			}
			if (pos < end && frag_add(&nxt, pos, end - pos, -1))
				goto fail;
		}
		tmp = cur;
		cur = nxt;
		nxt = tmp;
	}
	cm_free(nxt.f);
	*fr = cur.f;
	*n_fr = cur.n;
	return 0;
fail:
	cm_free(cur.f);
	cm_free(nxt.f);
	return -1;
}

/*
 * Appends s[0..len) to d at *n with every byte that starts no valid UTF-8
 * sequence replaced by U+FFFD (d has room for 3 * len).
 */
static void sanitize_into(char *d, size_t *n, const char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		int k = cm_utf8_decode((const uint8_t *)s + i, len - i, &cp);

		if (k == 0) {
			memcpy(d + *n, "\xEF\xBF\xBD", 3);
			*n += 3;
			i++;
		} else {
			memcpy(d + *n, s + i, (size_t)k);
			*n += (size_t)k;
			i += (size_t)k;
		}
	}
}

enum cm_status wk_tok_encode_segments(const struct wk_tok *t, const struct wk_tok_seg *segs,
				      size_t n_segs, unsigned flags, int32_t *out, size_t cap,
				      size_t *n_out)
{
	struct enc e = { .tok = t, .out = out, .cap = cap };
	struct frag *fr = NULL;
	struct span *sp = NULL;
	size_t n_fr = 0, n_sp = 0, total = 0, len = 0;
	char *text = NULL;
	enum cm_status st = CM_OK;
	int prev_special = !(flags & WK_TOK_NO_DUMMY_PREFIX);

	*n_out = 0;
	for (size_t i = 0; i < n_segs; i++) {
		if (segs[i].len > TOK_MAX_INPUT_BYTES - total)
			return CM_ELIMIT;
		total += segs[i].len;
	}
	text = cm_malloc(total * 3 + 1);
	sp = cm_calloc(n_segs ? n_segs : 1, sizeof(*sp));
	if (!text || !sp) {
		st = CM_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_segs; i++) {
		size_t start = len;

		if (segs[i].len == 0)
			continue;
		if (cm_utf8_valid(segs[i].text, segs[i].len)) {
			memcpy(text + len, segs[i].text, segs[i].len);
			len += segs[i].len;
		} else {
			sanitize_into(text, &len, segs[i].text, segs[i].len);
		}
		if (!segs[i].parse_special || len == start)
			continue;
		if (n_sp && sp[n_sp - 1].end == start)
			sp[n_sp - 1].end = len; /* adjacent template text: one span */
		else
			sp[n_sp++] = (struct span){ start, len };
	}
	if (partition(t, text, len, sp, n_sp, &fr, &n_fr)) {
		st = CM_ENOMEM;
		goto out;
	}
	if ((flags & WK_TOK_ADD_BOS) && t->add_bos && t->bos >= 0)
		emit(&e, t->bos);
	for (size_t i = 0; i < n_fr; i++) {
		int rc;

		if (fr[i].id >= 0) {
			emit(&e, fr[i].id);
			prev_special = 1;
			continue;
		}
		if (t->is_bpe)
			rc = encode_bpe(&e, text + fr[i].off, fr[i].len);
		else
			rc = encode_spm(&e, text + fr[i].off, fr[i].len,
					t->add_space_prefix && prev_special);
		if (rc) {
			st = CM_ENOMEM;
			goto out;
		}
		prev_special = 0;
	}
	if ((flags & WK_TOK_ADD_EOS) && t->add_eos && t->eos >= 0)
		emit(&e, t->eos);
	*n_out = e.n;
	if (e.n > cap)
		st = CM_ELIMIT;
out:
	cm_free(fr);
	cm_free(sp);
	cm_free(text);
	enc_deinit(&e);
	return st;
}

enum cm_status wk_tok_encode(const struct wk_tok *t, const char *text, size_t len,
			     unsigned flags, int32_t *out, size_t cap, size_t *n_out)
{
	struct wk_tok_seg seg = { text, len, (flags & WK_TOK_PARSE_SPECIAL) != 0 };

	return wk_tok_encode_segments(t, &seg, 1, flags, out, cap, n_out);
}

/* ================================================================ */
/* streaming detokenizer                                            */
/* ================================================================ */

void wk_detok_init(struct wk_detok *d, const struct wk_tok *tok, unsigned flags)
{
	memset(d, 0, sizeof(*d));
	d->tok = tok;
	d->strip = (flags & WK_DETOK_STRIP_DUMMY_PREFIX) && tok->add_space_prefix;
}

static int utf8_need(uint8_t b)
{
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF)
		return 3;
	if (b >= 0xF0 && b <= 0xF4)
		return 4;
	return 0;
}

/* May byte b follow the pending bytes at position idx (>= 1)? */
static int utf8_cont_ok(uint8_t lead, int idx, uint8_t b)
{
	if (idx == 1) {
		if (lead == 0xE0)
			return b >= 0xA0 && b <= 0xBF;
		if (lead == 0xED)
			return b >= 0x80 && b <= 0x9F;
		if (lead == 0xF0)
			return b >= 0x90 && b <= 0xBF;
		if (lead == 0xF4)
			return b >= 0x80 && b <= 0x8F;
	}
	return (b & 0xC0) == 0x80;
}

struct stage {
	uint8_t b[256];
	size_t n;
	struct cm_buf *out;
	enum cm_status st;
};

static void stage_put(struct stage *s, const void *p, size_t n)
{
	if (s->n + n > sizeof(s->b)) {
		if (s->st == CM_OK)
			s->st = cm_buf_append(s->out, s->b, s->n);
		s->n = 0;
	}
	memcpy(s->b + s->n, p, n);
	s->n += n;
}

static void detok_byte(struct wk_detok *d, struct stage *s, uint8_t b)
{
	for (;;) {
		if (d->n_pend == 0) {
			int need = utf8_need(b);

			if (b < 0x80) {
				stage_put(s, &b, 1);
			} else if (need) {
				d->pend[0] = b;
				d->n_pend = 1;
				d->need = (uint8_t)need;
			} else {
				stage_put(s, "\xEF\xBF\xBD", 3);
			}
			return;
		}
		if (utf8_cont_ok(d->pend[0], d->n_pend, b)) {
			d->pend[d->n_pend++] = b;
			if (d->n_pend == d->need) {
				stage_put(s, d->pend, d->n_pend);
				d->n_pend = 0;
			}
			return;
		}
		/* the pending sequence is broken: replace it, reconsider b */
		stage_put(s, "\xEF\xBF\xBD", 3);
		d->n_pend = 0;
	}
}

enum cm_status wk_detok_push(struct wk_detok *d, int32_t id, struct cm_buf *out)
{
	const struct wk_tok *t = d->tok;
	struct stage s = { .out = out, .st = CM_OK };
	const char *p;
	size_t len;
	int type;

	if (id < 0 || (uint32_t)id >= t->n_vocab)
		return CM_EINVAL;
	type = t->types[id];
	if (type == WK_TOK_T_CONTROL || type == WK_TOK_T_UNKNOWN || type == WK_TOK_T_UNUSED)
		return CM_OK;
	p = wk_tok_piece(t, id, &len);
	if (d->strip) {
		d->strip = 0;
		if (len && p[0] == ' ') {
			p++;
			len--;
		}
	}
	for (size_t i = 0; i < len; i++)
		detok_byte(d, &s, (uint8_t)p[i]);
	if (s.st == CM_OK && s.n)
		s.st = cm_buf_append(out, s.b, s.n);
	return s.st;
}

enum cm_status wk_detok_flush(struct wk_detok *d, struct cm_buf *out)
{
	if (d->n_pend == 0)
		return CM_OK;
	d->n_pend = 0;
	return cm_buf_append(out, "\xEF\xBF\xBD", 3);
}
