/*
 * fuzz_toolcall.c - libFuzzer target for the tool-call and reasoning
 * parser (worker/text/toolcall.c).  The first byte picks the family and
 * the thinking flags, the second where the text is split; the rest is the
 * model's output.  The text is fed whole and again in two pieces: both
 * must give the same events (crashes, leaks and unbounded work are caught
 * by the sanitizers), and with no family and no thinking the content must
 * be the text itself.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "worker/text/toolcall.h"

struct rec {
	uint8_t *b;
	size_t n, cap;
};

static void rec_put(struct rec *r, const void *p, size_t n)
{
	if (r->n + n + 1 > r->cap) {
		size_t cap = (r->n + n + 1) * 2;
		uint8_t *b = realloc(r->b, cap);

		if (!b)
			abort();
		r->b = b;
		r->cap = cap;
	}
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

/* Texts of one kind are concatenated (the split may cut them anywhere);
 * a kind change or a call is marked. */
static int last_kind = -1;

static enum cm_status rec_event(void *ctx, const struct wk_tc_event *e)
{
	struct rec *r = ctx;
	uint8_t k = (uint8_t)('0' + e->kind);

	if (e->kind == WK_TC_CALL) {
		rec_put(r, "\x01", 1);
		rec_put(r, e->name, strlen(e->name));
		rec_put(r, "\x02", 1);
		rec_put(r, e->args, strlen(e->args));
		if (e->id)
			rec_put(r, e->id, strlen(e->id));
		last_kind = -1;
		return CM_OK;
	}
	if (e->len == 0)
		abort(); /* empty texts are never emitted */
	if (last_kind != (int)e->kind) {
		rec_put(r, "\x03", 1);
		rec_put(r, &k, 1);
		last_kind = e->kind;
	}
	rec_put(r, e->text, e->len);
	return CM_OK;
}

static void run(const struct wk_tc_config *cfg, const uint8_t *t, size_t n, size_t cut,
		struct rec *r)
{
	struct wk_tc *p;

	last_kind = -1;
	if (wk_tc_new(cfg, &p) != CM_OK)
		abort();
	if (wk_tc_feed(p, (const char *)t, cut, rec_event, r) != CM_OK ||
	    wk_tc_feed(p, (const char *)t + cut, n - cut, rec_event, r) != CM_OK ||
	    wk_tc_finish(p, rec_event, r) != CM_OK)
		abort();
	wk_tc_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wk_tc_config cfg;
	struct rec a = { 0 }, b = { 0 };
	size_t cut, n;
	const uint8_t *t;

	if (size < 2)
		return 0;
	cfg.family = (enum wk_tc_family)(data[0] % 5);
	cfg.think = (data[0] >> 3) & 1;
	cfg.think_open = (data[0] >> 4) & 1;
	t = data + 2;
	n = size - 2;
	cut = n ? (size_t)data[1] * n / 255 : 0;
	run(&cfg, t, n, n, &a);
	run(&cfg, t, n, cut, &b);
	if (a.n != b.n || (a.n && memcmp(a.b, b.b, a.n) != 0))
		abort(); /* the split changed what was parsed */
	if (cfg.family == WK_TC_NONE && !cfg.think &&
	    (n ? (a.n != n + 2 || memcmp(a.b + 2, t, n) != 0) : a.n != 0))
		abort(); /* a pass-through parser must give the text back */
	free(a.b);
	free(b.b);
	return 0;
}
