/*
 * encode.c - text to token ids: special tokens cut out longest first, then
 * SentencePiece-style merges by score or byte-level BPE merges by rank over
 * the pre-tokenizer's words (see tokenizer.h).
 */
#include "worker/text/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/text/unicode.h"

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
		int32_t id = wk_tok_find_text(t, e->buf + a->off, a->n + b->n);

		if (id < 0)
			return 0;
		c.key = -(double)t->scores[id];
	} else {
		int64_t rank = wk_tok_merge_rank(t, a->id, b->id);

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
			a->id = wk_tok_find_exact(e->tok, e->buf + a->off, a->n);
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
			e->syms[n].id = wk_tok_find_exact(e->tok, e->buf + off, k);
		n++;
		off += k;
	}
	*n_syms = n;
	return 0;
}

/* A merged symbol with no token of its own, SentencePiece style: its bytes
 * as <0xNN> tokens, or the unknown token. */
static void spm_fallback(struct enc *e, const struct sym *y)
{
	const struct wk_tok *t = e->tok;

	for (uint32_t j = 0; j < y->n; j++) {
		int32_t b = t->byte_tok[(uint8_t)e->buf[y->off + j]];

		if (b >= 0)
			emit(e, b);
		else if (t->unk >= 0)
			emit(e, t->unk);
	}
}

/* The same for byte-level BPE, as the reference: each byte of the text on
 * its own, when it is a token. */
static void bpe_fallback(struct enc *e, const struct sym *y)
{
	for (uint32_t j = 0; j < y->n; j++) {
		int32_t id = wk_tok_find_text(e->tok, e->buf + y->off + j, 1);

		if (id >= 0)
			emit(e, id);
	}
}

/* Emits the token of every merged symbol, in order; `fallback` for a
 * symbol whose text is no token. */
static void emit_syms(struct enc *e, void (*fallback)(struct enc *e, const struct sym *y))
{
	for (int32_t i = 0; i != -1; i = e->syms[i].next) {
		const struct sym *y = &e->syms[i];
		int32_t id = wk_tok_find_text(e->tok, e->buf + y->off, y->n);

		if (id >= 0)
			emit(e, id);
		else
			fallback(e, y);
	}
}

/* SentencePiece: one raw fragment. */
static int encode_spm(struct enc *e, const char *s, size_t len, int prefix)
{
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
	emit_syms(e, spm_fallback);
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
		int k = cm_utf8_encode(wk_tok_bpe_byte_cp((uint8_t)s[i]), u);

		memcpy(e->buf + n, u, (size_t)k);
		n += (size_t)k;
	}
	if (t->pre->ignore_merges) {
		int32_t id = wk_tok_find_text(t, e->buf, n);

		if (id >= 0) {
			emit(e, id);
			return 0;
		}
	}
	if (split_chars(e, n, &n_syms) || merge_all(e, n_syms))
		return -1;
	emit_syms(e, bpe_fallback);
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

/* BERT's basic tokenizer splits CJK ideographs into words of one (the
 * ranges as Hugging Face's and llama.cpp's) */
static int wpm_cjk(uint32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
	       (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
	       (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
	       (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/*
 * One word of WordPiece: "\u2581" + word, then from each byte position the
 * longest token (at most max_token_len bytes) that matches exactly; a
 * position where nothing matches makes the whole word [UNK].
 */
static void wpm_word(struct enc *e, const char *w, size_t n)
{
	const struct wk_tok *t = e->tok;
	size_t start = e->n;

	for (size_t i = 0; i < n;) {
		size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
		int32_t id = -1;

		for (; j > i && id < 0; j--)
			id = wk_tok_find_exact(t, w + i, j - i);
		if (id < 0) {
			e->n = start; /* discard the word's pieces */
			break;
		}
		emit(e, id);
		i = j + 1;
	}
	if (e->n == start && t->unk >= 0)
		emit(e, t->unk);
}

/*
 * WordPiece (tokenizer.ggml.model "bert"), as BERT's uncased basic
 * tokenizer and llama.cpp do it: each code point to the first of its NFD
 * decomposition (accents drop), whitespace ends a word, NUL, U+FFFD and
 * control characters vanish, punctuation, ASCII symbols and CJK
 * ideographs are words of their own, everything lowercased; then each
 * word by wpm_word.
 */
static int encode_wpm(struct enc *e, const char *s, size_t len)
{
	char *w;
	size_t n = 0;

	if (grow((void **)&e->buf, &e->buf_cap, 3 + 4 * len + 1, 1))
		return -1;
	w = e->buf;
	memcpy(w, "\xe2\x96\x81", 3); /* U+2581 before every word */
	for (size_t i = 0; i <= len;) {
		uint32_t c = 0x20;
		int k = i < len ? cm_utf8_decode((const uint8_t *)s + i, len - i, &c) : 1;

		i += k > 0 ? (size_t)k : 1;
		c = wk_uc_nfd_first(c);
		if (i > len || wk_uc_is_space(c)) {
			if (n)
				wpm_word(e, w, 3 + n);
			n = 0;
			if (i > len)
				break;
			continue;
		}
		if (c == 0 || c == 0xFFFD || wk_uc_is_control(c))
			continue;
		uint32_t lc = wk_uc_tolower(c);
		enum wk_uc_class cl = wk_uc_class(c);

		if (cl == WK_UC_P || (c < 0x7F && cl == WK_UC_S) || wpm_cjk(c)) {
			if (n)
				wpm_word(e, w, 3 + n);
			n = (size_t)cm_utf8_encode(lc, (uint8_t *)w + 3);
			wpm_word(e, w, 3 + n);
			n = 0;
			continue;
		}
		n += (size_t)cm_utf8_encode(lc, (uint8_t *)w + 3 + n);
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
		const char *tt = wk_tok_text(t, (uint32_t)id, &tl);
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
		else if (t->is_wpm)
			rc = encode_wpm(&e, text + fr[i].off, fr[i].len);
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
