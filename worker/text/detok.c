/*
 * detok.c - the streaming detokenizer: ids to UTF-8 text, holding back
 * incomplete sequences across tokens (see tokenizer.h).
 */
#include "worker/text/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

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
