/*
 * vocab.c - the tokenizer's vocabulary: token texts, their decoded pieces,
 * scores, types and attributes, the text -> id map, special ids and the
 * end-of-generation set, and the (left, right) -> rank merge map of BPE
 * (see tokenizer.h and docs/tokenizers.md).
 */
#include "worker/text/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

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

/* Exact lookup over all tokens: id or -1. */
int32_t wk_tok_find_exact(const struct wk_tok *t, const char *s, size_t n)
{
	uint64_t h = tok_hash(s, n);

	for (uint32_t i = (uint32_t)h & t->map_mask;; i = (i + 1) & t->map_mask) {
		uint32_t v = t->map[i];
		size_t len;
		const char *txt;

		if (v == 0)
			return -1;
		txt = wk_tok_text(t, v - 1, &len);
		if (len == n && memcmp(txt, s, n) == 0)
			return (int32_t)(v - 1);
	}
}

/*
 * Lookup used while encoding text: control, unknown and byte tokens are
 * never produced from their spelling (the SentencePiece rule), nor are
 * end-of-generation tokens of any type.
 */
int32_t wk_tok_find_text(const struct wk_tok *t, const char *s, size_t n)
{
	int32_t id = wk_tok_find_exact(t, s, n);

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

int64_t wk_tok_merge_rank(const struct wk_tok *t, int32_t l, int32_t r)
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
uint32_t wk_tok_bpe_byte_cp(uint8_t b)
{
	if (b <= 0x20)
		return 256u + b;
	if (b >= 0x7F && b <= 0xA0)
		return 256u + 33u + (b - 0x7Fu);
	if (b == 0xAD)
		return 256u + 67u;
	return b;
}

/* Inverse of wk_tok_bpe_byte_cp: byte, or -1 for a code point outside the table. */
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
	const char *s = wk_tok_text(t, id, &len);
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
		l = wk_tok_find_exact(t, s, sp);
		rr = wk_tok_find_exact(t, s + sp + 1, n - sp - 1);
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

/* The tokenizer family (tokenizer.ggml.model) and its pre-tokenizer. */
static enum cm_status vocab_kind(struct wk_tok *t, const struct wk_tok_vocab *v, char *err,
				 size_t err_len)
{
	const char *pre_name = v->pre && v->pre[0] ? v->pre : "default";

	if (v->model && strcmp(v->model, "llama") == 0) {
		t->is_bpe = 0;
	} else if (v->model && strcmp(v->model, "gpt2") == 0) {
		t->is_bpe = 1;
	} else if (v->model && strcmp(v->model, "bert") == 0) {
		t->is_bpe = 0;
		t->is_wpm = 1;
	} else {
		snprintf(err, err_len, "tokenizer.ggml.model: expected \"llama\", \"gpt2\" or \"bert\", "
			 "found \"%s\"", v->model ? v->model : "(absent)");
		return CM_EUNSUPPORTED;
	}
	if (!t->is_bpe) {
		t->pre = wk_tok_pre_default();
		return CM_OK;
	}
	t->pre = wk_tok_pre_find(pre_name);
	if (!t->pre) {
		snprintf(err, err_len, "tokenizer.ggml.pre: unsupported pre-tokenizer \"%.64s\" "
			 "(known: default, llama3/llama-bpe, qwen2, deepseek-llm, deepseek-coder, "
			 "starcoder, refact, falcon, mpt, gpt-2, ...)", pre_name);
		return CM_EUNSUPPORTED;
	}
	return CM_OK;
}

/* Checks the token count and sizes; *total: bytes of all token texts. */
static enum cm_status vocab_sizes(const struct wk_tok_vocab *v, size_t *total, char *err,
				  size_t err_len)
{
	size_t n = v->n_tokens;

	*total = 0;
	if (n == 0 || n > WK_TOK_MAX_VOCAB || !v->tokens) {
		snprintf(err, err_len, "tokenizer.ggml.tokens: expected 1..%u tokens, found %zu",
			 WK_TOK_MAX_VOCAB, v->tokens ? n : 0);
		return n > WK_TOK_MAX_VOCAB ? CM_ELIMIT : CM_EFORMAT;
	}
	for (size_t i = 0; i < n; i++) {
		size_t len = vlen(v->tokens, v->token_lens, i);

		if (!v->tokens[i] && len) {
			snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: missing text", i);
			return CM_EFORMAT;
		}
		if (len > WK_TOK_MAX_TOKEN_BYTES) {
			snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: expected at most %u bytes, found %zu",
				 i, WK_TOK_MAX_TOKEN_BYTES, len);
			return CM_ELIMIT;
		}
		*total += len;
		if (*total > WK_TOK_MAX_TEXT_BYTES) {
			snprintf(err, err_len, "tokenizer.ggml.tokens: more than %u bytes of token text",
				 WK_TOK_MAX_TEXT_BYTES);
			return CM_ELIMIT;
		}
	}
	return CM_OK;
}

/* Copies the texts, types and scores; byte tokens must be "<0xNN>". */
static enum cm_status vocab_texts(struct wk_tok *t, const struct wk_tok_vocab *v, char *err,
				  size_t err_len)
{
	size_t n = t->n_vocab, total = 0;

	for (int b = 0; b < 256; b++)
		t->byte_tok[b] = -1;
	for (size_t i = 0; i < n; i++) {
		size_t len = vlen(v->tokens, v->token_lens, i);
		int32_t type = v->types ? v->types[i] : WK_TOK_T_NORMAL;

		if (len)
			memcpy(t->text + total, v->tokens[i], len);
		t->text_off[i] = (uint32_t)total;
		total += len;
		if (len > t->max_token_len)
			t->max_token_len = (uint32_t)len;
		if (type == 0)
			type = WK_TOK_T_NORMAL; /* "undefined" in older files */
		if (type < WK_TOK_T_NORMAL || type > WK_TOK_T_BYTE) {
			snprintf(err, err_len, "tokenizer.ggml.token_type[%zu]: expected 1..6, found %d",
				 i, (int)type);
			return CM_EFORMAT;
		}
		t->types[i] = (uint8_t)type;
		t->scores[i] = v->scores ? v->scores[i] : 0.0f;
		if (type == WK_TOK_T_BYTE) {
			int b = parse_byte_token(t->text + t->text_off[i], len);

			if (b < 0) {
				snprintf(err, err_len, "tokenizer.ggml.tokens[%zu]: a byte token must be "
					 "\"<0xNN>\", found \"%.*s\"", i, (int)(len > 32 ? 32 : len),
					 t->text + t->text_off[i]);
				return CM_EFORMAT;
			}
			if (t->byte_tok[b] < 0)
				t->byte_tok[b] = (int32_t)i;
		}
	}
	t->text_off[n] = (uint32_t)total;
	return CM_OK;
}

/* The text -> id map: the last of duplicate texts wins (as the reference). */
static void vocab_map(struct wk_tok *t)
{
	for (size_t i = 0; i < t->n_vocab; i++) {
		size_t len;
		const char *s = wk_tok_text(t, (uint32_t)i, &len);
		uint32_t h = (uint32_t)tok_hash(s, len) & t->map_mask;

		for (;; h = (h + 1) & t->map_mask) {
			uint32_t e = t->map[h];
			size_t elen;
			const char *es;

			if (e == 0) {
				t->map[h] = (uint32_t)i + 1;
				break;
			}
			es = wk_tok_text(t, e - 1, &elen);
			if (elen == len && memcmp(es, s, len) == 0) {
				t->map[h] = (uint32_t)i + 1;
				break;
			}
		}
	}
}

/* Special ids, the family defaults, and the add_bos / add_eos flags. */
static enum cm_status vocab_special_ids(struct wk_tok *t, const struct wk_tok_vocab *v,
					char *err, size_t err_len)
{
	size_t n = t->n_vocab;
	enum cm_status st;

	if ((st = check_id(v->bos, "bos_token_id", n, &t->bos, err, err_len)) ||
	    (st = check_id(v->eos, "eos_token_id", n, &t->eos, err, err_len)) ||
	    (st = check_id(v->eot, "eot_token_id", n, &t->eot, err, err_len)) ||
	    (st = check_id(v->eom, "eom_token_id", n, &t->eom, err, err_len)) ||
	    (st = check_id(v->unk, "unknown_token_id", n, &t->unk, err, err_len)) ||
	    (st = check_id(v->pad, "padding_token_id", n, &t->pad, err, err_len)))
		return st;
	if (!t->is_bpe && !t->is_wpm) {
		if (v->bos == -1 && n > 1)
			t->bos = 1;
		if (v->eos == -1 && n > 2)
			t->eos = 2;
		if (v->unk == -1)
			t->unk = 0;
	}
	/* family defaults apply only when the id exists; explicit flags must.
	 * WordPiece: [CLS] (bos) first and [SEP] (eos) last, as BERT does */
	t->add_bos = v->add_bos >= 0 ? v->add_bos : ((t->is_bpe ? t->pre->add_bos : 1) && t->bos >= 0);
	t->add_eos = v->add_eos >= 0 ? v->add_eos : t->is_wpm && t->eos >= 0;
	t->add_space_prefix = t->is_bpe ? 0 : (v->add_space_prefix >= 0 ? v->add_space_prefix : 1);
	if ((t->add_bos && t->bos < 0) || (t->add_eos && t->eos < 0)) {
		snprintf(err, err_len, "tokenizer.ggml.add_%s_token is true but no %s token id is set",
			 t->add_bos && t->bos < 0 ? "bos" : "eos", t->add_bos && t->bos < 0 ? "BOS" : "EOS");
		return CM_EFORMAT;
	}
	return CM_OK;
}

/* The decoded piece of every token, back to back. */
static enum cm_status vocab_pieces(struct wk_tok *t)
{
	size_t n = t->n_vocab, pbytes = 0;

	for (size_t i = 0; i < n; i++)
		pbytes += (t->text_off[i + 1] - t->text_off[i]) * 3 + 1;
	t->piece = cm_malloc(pbytes + 1);
	if (!t->piece)
		return CM_ENOMEM;
	pbytes = 0;
	for (size_t i = 0; i < n; i++) {
		t->piece_off[i] = (uint32_t)pbytes;
		pbytes += tok_decode_piece(t, (uint32_t)i, t->piece + pbytes);
	}
	t->piece_off[n] = (uint32_t)pbytes;
	return CM_OK;
}

/*
 * Tokens matched as whole strings (control, user-defined, unknown; longest
 * first), the end-of-generation set, and the family's strip attributes.
 */
static enum cm_status vocab_specials(struct wk_tok *t, const struct wk_tok_vocab *v)
{
	size_t n = t->n_vocab;

	t->specials = cm_calloc(n, sizeof(int32_t));
	if (!t->specials)
		return CM_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int type = t->types[i];

		if ((type == WK_TOK_T_CONTROL || type == WK_TOK_T_USER_DEFINED ||
		     type == WK_TOK_T_UNKNOWN) && t->text_off[i + 1] > t->text_off[i])
			t->specials[t->n_specials++] = (int32_t)i;
	}
	qsort_r(t->specials, t->n_specials, sizeof(int32_t), cmp_special, t);
	if (t->eos >= 0)
		t->attrs[t->eos] |= TOK_A_EOG;
	if (t->eot >= 0)
		t->attrs[t->eot] |= TOK_A_EOG;
	if (t->eom >= 0)
		t->attrs[t->eom] |= TOK_A_EOG;
	for (size_t i = 0; i < sizeof(tok_eog_names) / sizeof(tok_eog_names[0]); i++) {
		int32_t id = wk_tok_find_exact(t, tok_eog_names[i], strlen(tok_eog_names[i]));

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
			int32_t id = wk_tok_find_exact(t, keep[i], strlen(keep[i]));

			if (id >= 0)
				t->attrs[id] &= (uint8_t)~TOK_A_RSTRIP;
		}
	}
	return CM_OK;
}

enum cm_status wk_tok_new_from_vocab(const struct wk_tok_vocab *v, struct wk_tok **out,
				     char *err, size_t err_len)
{
	struct wk_tok *t = NULL;
	enum cm_status st = CM_OK;
	size_t n = v->n_tokens, total = 0, cap;

	*out = NULL;
	if (err_len)
		err[0] = '\0';
	t = cm_calloc(1, sizeof(*t));
	if (!t)
		return CM_ENOMEM;
	st = vocab_kind(t, v, err, err_len);
	if (st == CM_OK)
		st = vocab_sizes(v, &total, err, err_len);
	if (st != CM_OK)
		goto out;
	t->n_vocab = (uint32_t)n;
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
	st = vocab_texts(t, v, err, err_len);
	if (st != CM_OK)
		goto out;
	vocab_map(t);
	st = vocab_special_ids(t, v, err, err_len);
	if (st == CM_OK)
		st = vocab_pieces(t);
	if (st == CM_OK)
		st = vocab_specials(t, v);
	if (st == CM_OK && t->is_bpe)
		st = tok_build_merges(t, v, err, err_len);
	if (st != CM_OK)
		goto out;
	*out = t;
	t = NULL;
out:
	if (st == CM_ENOMEM && err_len && !err[0])
		snprintf(err, err_len, "out of memory building the tokenizer");
	wk_tok_free(t);
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
	return wk_tok_find_exact(t, text, strlen(text));
}
