/*
 * stop.c - stop-string matcher (see stop.h).
 *
 * One Knuth-Morris-Pratt automaton per stop string, advanced over each new
 * byte exactly once: state[k] is the length of the longest suffix of the
 * stream that is a proper prefix of stop string k.  The held-back bytes are
 * the last max_k(state[k]) bytes of the stream (widened to a character
 * boundary), so every partial match is inside the buffer and a match found
 * on a new byte starts inside it too.
 *
 * Buffer: buf[0..held) are unemitted bytes from earlier calls, followed by
 * the bytes of the current call.  The span returned to the caller is
 * buf[0..emit); the bytes after it move to the front at the next call
 * (not before, so the returned pointer stays valid).
 */
#include "worker/engine/stop.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

struct wk_stop {
	size_t n;            /* stop strings */
	uint8_t **str;       /* [n] copies */
	uint16_t *len;       /* [n] lengths, 1..WK_STOP_MAX_BYTES */
	uint16_t **fail;     /* [n][len] KMP borders */
	uint16_t *state;     /* [n] current partial match length */
	uint8_t *buf;        /* held bytes, then the current feed */
	size_t buf_alloc;
	size_t held;         /* unemitted bytes at buf[consumed..] */
	size_t consumed;     /* bytes at the front emitted by the last call */
	bool matched;
};

void wk_stop_free(struct wk_stop *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < s->n; k++) {
		if (s->str)
			cm_free(s->str[k]);
		if (s->fail)
			cm_free(s->fail[k]);
	}
	cm_free(s->str);
	cm_free(s->fail);
	cm_free(s->len);
	cm_free(s->state);
	cm_free(s->buf);
	cm_free(s);
}

static void kmp_borders(const uint8_t *p, size_t m, uint16_t *f)
{
	size_t q = 0;

	f[0] = 0;
	for (size_t i = 1; i < m; i++) {
		while (q > 0 && p[i] != p[q])
			q = f[q - 1];
		if (p[i] == p[q])
			q++;
		f[i] = (uint16_t)q;
	}
}

enum cm_status wk_stop_new(const char *const *strs, const size_t *lens,
			   size_t n, struct wk_stop **out, char *err,
			   size_t err_len)
{
	struct wk_stop *s = NULL;
	enum cm_status st = CM_ENOMEM;

	*out = NULL;
	if (n > WK_STOP_MAX_STRINGS) {
		st = cm_fail(err, err_len, CM_EINVAL,
			      "stop: expected at most %u stop strings, found %zu",
			      (unsigned)WK_STOP_MAX_STRINGS, n);
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		if (lens[k] == 0) {
			st = cm_fail(err, err_len, CM_EINVAL,
				      "stop[%zu]: expected a non-empty string, found an empty one",
				      k);
			goto out;
		}
		if (lens[k] > WK_STOP_MAX_BYTES) {
			st = cm_fail(err, err_len, CM_EINVAL,
				      "stop[%zu]: expected at most %u bytes, found %zu",
				      k, (unsigned)WK_STOP_MAX_BYTES, lens[k]);
			goto out;
		}
	}
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		goto out;
	/* room for the largest hold-back plus one typical token */
	s->buf_alloc = WK_STOP_MAX_BYTES + 256;
	s->buf = cm_malloc(s->buf_alloc);
	if (!s->buf)
		goto out;
	if (n > 0) {
		s->str = cm_calloc(n, sizeof(*s->str));
		s->fail = cm_calloc(n, sizeof(*s->fail));
		s->len = cm_calloc(n, sizeof(*s->len));
		s->state = cm_calloc(n, sizeof(*s->state));
		if (!s->str || !s->fail || !s->len || !s->state)
			goto out;
		s->n = n;
		for (size_t k = 0; k < n; k++) {
			s->str[k] = cm_malloc(lens[k]);
			s->fail[k] = cm_calloc(lens[k], sizeof(uint16_t));
			if (!s->str[k] || !s->fail[k])
				goto out;
			memcpy(s->str[k], strs[k], lens[k]);
			s->len[k] = (uint16_t)lens[k];
			kmp_borders(s->str[k], lens[k], s->fail[k]);
		}
	}
	*out = s;
	s = NULL;
	st = CM_OK;
out:
	wk_stop_free(s);
	return st;
}

size_t wk_stop_held(const struct wk_stop *s)
{
	return s->held;
}

/* Advances automaton k over byte c; 1 when the whole string matched. */
static int kmp_step(struct wk_stop *s, size_t k, uint8_t c)
{
	const uint8_t *p = s->str[k];
	const uint16_t *f = s->fail[k];
	size_t q = s->state[k];

	while (q > 0 && p[q] != c)
		q = f[q - 1];
	if (p[q] == c)
		q++;
	if (q == s->len[k]) {
		s->state[k] = f[q - 1];
		return 1;
	}
	s->state[k] = (uint16_t)q;
	return 0;
}

/* Moves the held bytes to the front (the last span has been consumed). */
static void compact(struct wk_stop *s)
{
	if (s->consumed > 0 && s->held > 0)
		memmove(s->buf, s->buf + s->consumed, s->held);
	s->consumed = 0;
}

enum cm_status wk_stop_feed(struct wk_stop *s, const void *bytes, size_t len,
			    struct wk_stop_out *out)
{
	size_t total, hold = 0, emit, j, k;

	out->text = s->buf;
	out->len = 0;
	out->matched = s->matched;
	if (s->matched)
		return CM_OK;
	if (len > WK_STOP_FEED_MAX_BYTES)
		return CM_ELIMIT;
	compact(s);
	total = s->held + len;
	if (total > s->buf_alloc) {
		uint8_t *nb = cm_realloc(s->buf, total);

		if (!nb)
			return CM_ENOMEM;
		s->buf = nb;
		s->buf_alloc = total;
		out->text = s->buf;
	}
	if (len > 0)
		memcpy(s->buf + s->held, bytes, len);

	for (j = s->held; j < total; j++) {
		size_t best = 0;

		for (k = 0; k < s->n; k++)
			if (kmp_step(s, k, s->buf[j]) && s->len[k] > best)
				best = s->len[k];
		if (best > 0) {
			/* the match started inside buf: held >= every state */
			out->len = j + 1 - best;
			out->matched = true;
			s->matched = true;
			s->held = 0;
			return CM_OK;
		}
	}
	for (k = 0; k < s->n; k++)
		if (s->state[k] > hold)
			hold = s->state[k];
	/* never end the span inside a character, nor on an incomplete one */
	emit = cm_utf8_complete_prefix(s->buf, total - hold);
	out->len = emit;
	s->consumed = emit;
	s->held = total - emit;
	return CM_OK;
}

void wk_stop_flush(struct wk_stop *s, struct wk_stop_out *out)
{
	out->matched = s->matched;
	out->text = s->buf;
	out->len = 0;
	if (s->matched)
		return;
	compact(s);
	out->len = s->held;
	s->consumed = s->held;
	s->held = 0;
	for (size_t k = 0; k < s->n; k++)
		s->state[k] = 0;
}
