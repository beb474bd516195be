/*
 * test_sampler.c - worker/engine/sampler.c: greedy, each filter alone on small
 * hand-made logits, penalties to the bit, seed reproducibility, statistical
 * sanity of the draw, large vocabularies against a brute-force reference,
 * parameter validation and allocation failures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/engine/sampler.h"


/* ---- helpers ------------------------------------------------------- */

static struct wk_sampler_params plain(void)
{
	struct wk_sampler_params p;

	wk_sampler_params_default(&p);
	p.temperature = 1.0f;
	p.top_k = 0;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	p.repeat_penalty = 1.0f;
	p.has_seed = true;
	p.seed = 1234;
	return p;
}

static struct wk_sampler *mk(const struct wk_sampler_params *p, uint32_t nv)
{
	struct wk_sampler *s = NULL;
	char err[256];

	assert_int_equal(wk_sampler_new(p, nv, &s, err, sizeof(err)), CM_OK);
	assert_non_null(s);
	return s;
}

/* Draws `draws` tokens and counts them in hist[nv]. */
static void draw_hist(const struct wk_sampler_params *p, const float *logits,
		      uint32_t nv, int draws, unsigned *hist)
{
	struct wk_sampler *s = mk(p, nv);
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	struct wk_sample o;

	assert_non_null(ws);
	memset(hist, 0, nv * sizeof(*hist));
	for (int i = 0; i < draws; i++) {
		assert_int_equal(wk_sampler_sample(s, ws, logits, nv, &o), CM_OK);
		assert_true(o.token < nv);
		hist[o.token]++;
	}
	wk_sampler_ws_free(ws);
	wk_sampler_free(s);
}

/* Asserts that exactly the tokens in keep[] (terminated by -1) were drawn. */
static void assert_support(const unsigned *hist, uint32_t nv, const int *keep)
{
	for (uint32_t t = 0; t < nv; t++) {
		int want = 0;

		for (const int *k = keep; *k >= 0; k++)
			if ((uint32_t)*k == t)
				want = 1;
		if (want && hist[t] == 0)
			fail_msg("token %u expected in the support, never drawn", t);
		if (!want && hist[t] != 0)
			fail_msg("token %u expected filtered out, drawn %u times",
				 t, hist[t]);
	}
}

static uint64_t lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return *x >> 33;
}

/* ---- tests --------------------------------------------------------- */

static void test_exp(void **state)
{
	(void)state;
	assert_true(wk_sampler_exp(0.0) == 1.0);
	assert_true(wk_sampler_exp(-INFINITY) == 0.0);
	assert_true(wk_sampler_exp(NAN) == 0.0);
	assert_true(wk_sampler_exp(-800.0) == 0.0);
	for (double x = -700.0; x <= 5.0; x += 0.37) {
		double a = wk_sampler_exp(x), b = exp(x);

		if (fabs(a - b) > 1e-12 * b)
			fail_msg("exp(%g): %.17g, libm %.17g", x, a, b);
	}
}

static void test_greedy(void **state)
{
	struct wk_sampler_params p = plain();
	struct wk_sampler *s;
	struct wk_sampler_ws *ws = wk_sampler_ws_new(5);
	const float l[5] = { 1.0f, 3.0f, 2.0f, 3.0f, -1.0f };
	struct wk_sample o;
	double z = 0.0;

	(void)state;
	p.temperature = 0.0f;
	p.top_k = 1; /* filters are irrelevant when greedy */
	s = mk(&p, 5);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(wk_sampler_sample(s, ws, l, 5, &o), CM_OK);
		assert_int_equal(o.token, 1); /* tie 1 vs 3: lowest id */
	}
	for (int i = 0; i < 5; i++)
		z += exp(l[i] - 3.0);
	assert_float_equal(o.logprob, -log(z), 1e-6);
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
}

/* The mask removes tokens before anything else; the alternatives are the
 * k best of what is left, best first, ties to the lower id, never a
 * removed token, with the draw's logprobs. */
static void test_mask_and_alternatives(void **state)
{
	struct wk_sampler_params p = plain();
	struct wk_sampler *s;
	struct wk_sampler_ws *ws = wk_sampler_ws_new(5);
	const float l[5] = { 1.0f, 3.0f, 2.0f, 3.0f, -1.0f };
	const uint32_t allow = (1u << 0) | (1u << 2) | (1u << 3); /* 1 and 4 removed */
	uint32_t ids[4];
	float lps[4];
	uint32_t n;
	struct wk_sample o;
	double z = exp(1.0 - 3.0) + exp(2.0 - 3.0) + exp(0.0);

	(void)state;
	p.temperature = 0.0f;
	s = mk(&p, 5);
	assert_int_equal(wk_sampler_sample_masked(s, ws, l, 5, &allow, &o), CM_OK);
	assert_int_equal(o.token, 3);
	assert_float_equal(o.logprob, -log(z), 1e-6);
	assert_int_equal(wk_sampler_top(s, ws, 4, ids, lps, &n), CM_OK);
	assert_int_equal(n, 3); /* only three allowed */
	assert_int_equal(ids[0], 3);
	assert_int_equal(ids[1], 2);
	assert_int_equal(ids[2], 0);
	assert_float_equal(lps[0], -log(z), 1e-6);
	assert_float_equal(lps[2], (1.0 - 3.0) - log(z), 1e-6);
	/* without a mask: the tie 1 vs 3 goes to the lower id */
	assert_int_equal(wk_sampler_sample(s, ws, l, 5, &o), CM_OK);
	assert_int_equal(wk_sampler_top(s, ws, 2, ids, lps, &n), CM_OK);
	assert_int_equal(n, 2);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 3);
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
}

static void test_top_k(void **state)
{
	struct wk_sampler_params p = plain();
	const float l[6] = { 0.0f, 5.0f, 5.0f, -1.0f, 5.0f, 4.5f };
	unsigned h[6];

	(void)state;
	p.top_k = 2; /* three tokens tie at 5: ids 1 and 2 win */
	draw_hist(&p, l, 6, 2000, h);
	assert_support(h, 6, (const int[]){ 1, 2, -1 });
	p.top_k = 4;
	draw_hist(&p, l, 6, 4000, h);
	assert_support(h, 6, (const int[]){ 1, 2, 4, 5, -1 });
	p.top_k = 1;
	draw_hist(&p, l, 6, 100, h);
	assert_int_equal(h[1], 100);
}

static void test_top_p(void **state)
{
	struct wk_sampler_params p = plain();
	float l[4];
	unsigned h[4];

	(void)state;
	/* probabilities 0.15, 0.5, 0.05, 0.3 */
	l[0] = logf(0.15f);
	l[1] = logf(0.5f);
	l[2] = logf(0.05f);
	l[3] = logf(0.3f);
	p.top_p = 0.4f; /* 0.5 alone reaches it */
	draw_hist(&p, l, 4, 500, h);
	assert_support(h, 4, (const int[]){ 1, -1 });
	p.top_p = 0.75f; /* 0.5 + 0.3 */
	draw_hist(&p, l, 4, 4000, h);
	assert_support(h, 4, (const int[]){ 1, 3, -1 });
	p.top_p = 0.9f; /* 0.5 + 0.3 + 0.15 */
	draw_hist(&p, l, 4, 4000, h);
	assert_support(h, 4, (const int[]){ 0, 1, 3, -1 });
	p.top_p = 1.0f;
	draw_hist(&p, l, 4, 4000, h);
	assert_support(h, 4, (const int[]){ 0, 1, 2, 3, -1 });
}

static void test_min_p(void **state)
{
	struct wk_sampler_params p = plain();
	float l[4];
	unsigned h[4];

	(void)state;
	l[0] = logf(0.15f);
	l[1] = logf(0.5f);
	l[2] = logf(0.05f);
	l[3] = logf(0.3f);
	p.min_p = 0.5f; /* p >= 0.25 */
	draw_hist(&p, l, 4, 4000, h);
	assert_support(h, 4, (const int[]){ 1, 3, -1 });
	p.min_p = 0.2f; /* p >= 0.1 */
	draw_hist(&p, l, 4, 4000, h);
	assert_support(h, 4, (const int[]){ 0, 1, 3, -1 });
	p.min_p = 1.0f; /* only the best */
	draw_hist(&p, l, 4, 200, h);
	assert_support(h, 4, (const int[]){ 1, -1 });
}

static void test_temperature_statistics(void **state)
{
	struct wk_sampler_params p = plain();
	const float l[2] = { logf(3.0f), 0.0f };
	unsigned h[2];
	const int n = 20000;
	double f, expect;

	(void)state;
	/* 5 standard deviations: sqrt(0.75 * 0.25 / 20000) = 0.0031 */
	draw_hist(&p, l, 2, n, h);
	f = (double)h[0] / n;
	if (fabs(f - 0.75) > 0.0155)
		fail_msg("temperature 1: share of token 0 %.4f, expected 0.75", f);
	/* temperature 2: p0 = sqrt(3) / (sqrt(3) + 1) */
	p.temperature = 2.0f;
	p.seed = 99;
	draw_hist(&p, l, 2, n, h);
	f = (double)h[0] / n;
	expect = sqrt(3.0) / (sqrt(3.0) + 1.0);
	if (fabs(f - expect) > 0.0171)
		fail_msg("temperature 2: share %.4f, expected %.4f", f, expect);
	/* temperature 0.01: nearly greedy */
	p.temperature = 0.01f;
	draw_hist(&p, l, 2, 1000, h);
	assert_int_equal(h[0], 1000);
}

static void test_logprob_unfiltered(void **state)
{
	struct wk_sampler_params p = plain();
	struct wk_sampler *s;
	struct wk_sampler_ws *ws = wk_sampler_ws_new(3);
	const float l[3] = { 2.0f, 1.0f, 0.0f };
	struct wk_sample o;
	double z;

	(void)state;
	p.top_k = 1;
	p.temperature = 0.5f;
	s = mk(&p, 3);
	assert_int_equal(wk_sampler_sample(s, ws, l, 3, &o), CM_OK);
	assert_int_equal(o.token, 0);
	/* log softmax of l / 0.5 over all three, not log(1) after top-k */
	z = exp(0.0) + exp(-2.0) + exp(-4.0);
	assert_float_equal(o.logprob, -log(z), 1e-6);
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
}

/* Greedy logprob over two tokens tells the penalised difference exactly. */
static double penalised_gap(const struct wk_sampler_params *p, const float *l,
			    const uint32_t *hist, int nh, uint32_t *tok)
{
	struct wk_sampler *s = mk(p, 2);
	struct wk_sampler_ws *ws = wk_sampler_ws_new(2);
	struct wk_sample o;

	for (int i = 0; i < nh; i++)
		assert_int_equal(wk_sampler_accept(s, hist[i]), CM_OK);
	assert_int_equal(wk_sampler_sample(s, ws, l, 2, &o), CM_OK);
	*tok = o.token;
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
	/* logprob = -log(1 + exp(-gap)) => gap = -log(exp(-logprob) - 1) */
	return -log(exp(-(double)o.logprob) - 1.0);
}

static void test_penalties_exact(void **state)
{
	struct wk_sampler_params p = plain();
	const float pos[2] = { 2.0f, 0.5f };
	const float neg[2] = { -1.0f, 0.5f };
	const uint32_t h0[3] = { 0, 0, 0 };
	const uint32_t h01[3] = { 0, 1, 1 };
	uint32_t tok;
	double gap;

	(void)state;
	p.temperature = 0.0f;
	p.repeat_last_n = 64;

	/* repeat: positive logit divided: 2 / 2 = 1, gap to 0.5 is 0.5 */
	p.repeat_penalty = 2.0f;
	gap = penalised_gap(&p, pos, h0, 3, &tok);
	assert_int_equal(tok, 0);
	assert_float_equal(gap, 0.5, 1e-5);
	/* negative logit multiplied: -1 * 2 = -2, token 1 wins by 2.5 */
	gap = penalised_gap(&p, neg, h0, 1, &tok);
	assert_int_equal(tok, 1);
	assert_float_equal(gap, 2.5, 1e-5);

	/* frequency: 2 - 3 * 0.25 = 1.25 (count 3), gap 0.75 */
	p.repeat_penalty = 1.0f;
	p.frequency_penalty = 0.25f;
	gap = penalised_gap(&p, pos, h0, 3, &tok);
	assert_int_equal(tok, 0);
	assert_float_equal(gap, 0.75, 1e-5);
	/* presence: 2 - 0.5 once, whatever the count: gap 1.0 */
	p.frequency_penalty = 0.0f;
	p.presence_penalty = 0.5f;
	gap = penalised_gap(&p, pos, h0, 3, &tok);
	assert_int_equal(tok, 0);
	assert_float_equal(gap, 1.0, 1e-5);
	/* all three: 2 / 2 = 1, - (3 * 0.25 + 0.5) = -0.25; token 1 by 0.75 */
	p.repeat_penalty = 2.0f;
	p.frequency_penalty = 0.25f;
	gap = penalised_gap(&p, pos, h0, 3, &tok);
	assert_int_equal(tok, 1);
	assert_float_equal(gap, 0.75, 1e-5);

	/* window of 2: history 0,1,1 leaves only 1,1 (count 2) */
	p.repeat_last_n = 2;
	p.repeat_penalty = 1.0f;
	p.presence_penalty = 0.0f;
	p.frequency_penalty = 1.0f;
	gap = penalised_gap(&p, pos, h01, 3, &tok);
	/* token 0 untouched (2), token 1: 0.5 - 2 = -1.5: gap 3.5 */
	assert_int_equal(tok, 0);
	assert_float_equal(gap, 3.5, 1e-5);
	/* window 0: penalties off */
	p.repeat_last_n = 0;
	gap = penalised_gap(&p, pos, h0, 3, &tok);
	assert_float_equal(gap, 1.5, 1e-5);
}

static void test_seed_reproducible(void **state)
{
	const uint32_t nv = 1000;
	float *l = malloc(nv * sizeof(*l));
	struct wk_sampler_params p = plain();
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	struct wk_sampler *a, *b, *c;
	uint64_t x = 7;
	int differ = 0;

	(void)state;
	for (uint32_t i = 0; i < nv; i++)
		l[i] = (float)(lcg(&x) % 1000) / 200.0f;
	p.top_k = 100;
	p.top_p = 0.95f;
	p.seed = 42;
	a = mk(&p, nv);
	b = mk(&p, nv);
	p.seed = 43;
	c = mk(&p, nv);
	assert_int_equal(wk_sampler_seed(a), 42);
	for (int i = 0; i < 200; i++) {
		struct wk_sample oa, ob, oc;

		assert_int_equal(wk_sampler_sample(a, ws, l, nv, &oa), CM_OK);
		assert_int_equal(wk_sampler_sample(b, ws, l, nv, &ob), CM_OK);
		assert_int_equal(wk_sampler_sample(c, ws, l, nv, &oc), CM_OK);
		assert_int_equal(oa.token, ob.token);
		assert_true(oa.logprob == ob.logprob);
		differ += oa.token != oc.token;
	}
	assert_true(differ > 100);
	wk_sampler_free(a);
	wk_sampler_free(b);
	wk_sampler_free(c);

	/* no seed: drawn, and two samplers disagree */
	p.has_seed = false;
	a = mk(&p, nv);
	b = mk(&p, nv);
	assert_true(wk_sampler_seed(a) != wk_sampler_seed(b));
	wk_sampler_free(a);
	wk_sampler_free(b);
	wk_sampler_ws_free(ws);
	free(l);
}

/*
 * no_logprob: the same draws token for token (greedy, few survivors, many
 * survivors), logprob 0 where the log partition would have been needed.
 */
static void test_no_logprob_same_draws(void **state)
{
	const uint32_t nv = 5000;
	float *l = malloc(nv * sizeof(*l));
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	uint64_t x = 11;
	static const struct { float temp; uint32_t top_k; float top_p; } cases[] = {
		{ 0.0f, 0, 1.0f }, { 0.8f, 40, 0.9f }, { 1.0f, 0, 1.0f }, { 1.3f, 0, 0.5f },
	};

	(void)state;
	for (uint32_t i = 0; i < nv; i++)
		l[i] = (float)(lcg(&x) % 1000) / 150.0f;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct wk_sampler_params p = plain();
		struct wk_sampler *a, *b;

		p.temperature = cases[c].temp;
		p.top_k = cases[c].top_k;
		p.top_p = cases[c].top_p;
		p.seed = 5;
		a = mk(&p, nv);
		p.no_logprob = true;
		b = mk(&p, nv);
		for (int i = 0; i < 100; i++) {
			struct wk_sample oa, ob;

			assert_int_equal(wk_sampler_sample(a, ws, l, nv, &oa), CM_OK);
			assert_int_equal(wk_sampler_sample(b, ws, l, nv, &ob), CM_OK);
			assert_int_equal(oa.token, ob.token);
			assert_true(oa.logprob <= 0.0f);
			/* skipped only where it costs a pass of its own */
			assert_true(ob.logprob == 0.0f || ob.logprob == oa.logprob);
		}
		wk_sampler_free(a);
		wk_sampler_free(b);
	}
	wk_sampler_ws_free(ws);
	free(l);
}

/*
 * Known answer: this exact token sequence is what every IEEE-754 machine
 * must produce for these logits and seed (portability of the draw).  It was
 * cross-checked with an independent Python model of the documented
 * algorithm (xoshiro256** seeded by splitmix64, libm exp, float64 sums).
 */
static void test_seed_known_answer(void **state)
{
	const uint32_t nv = 64;
	float l[64];
	struct wk_sampler_params p = plain();
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	struct wk_sampler *s;
	static const uint32_t want[12] = { 19, 31, 57, 38, 43, 19,
					     5, 29, 57, 24, 24, 19 };
	uint32_t got[12];

	(void)state;
	for (uint32_t i = 0; i < nv; i++)
		l[i] = (float)((i * 37u) % 64u) / 16.0f;
	p.seed = 20240601;
	p.temperature = 0.7f;
	p.top_k = 20;
	p.top_p = 0.9f;
	p.min_p = 0.02f;
	s = mk(&p, nv);
	for (int i = 0; i < 12; i++) {
		struct wk_sample o;

		assert_int_equal(wk_sampler_sample(s, ws, l, nv, &o), CM_OK);
		got[i] = o.token;
	}
	for (int i = 0; i < 12; i++)
		assert_int_equal(got[i], want[i]);
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
}

/* Reference top-k set membership by sorting. */
static int cmp_desc_ref(const void *a, const void *b, void *ctx)
{
	const float *w = ctx;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (w[x] != w[y])
		return w[x] > w[y] ? -1 : 1;
	return (x > y) - (x < y);
}

static void test_large_vocab_reference(void **state)
{
	const uint32_t nv = 50000;
	float *l = malloc(nv * sizeof(*l));
	uint32_t *ord = malloc(nv * sizeof(*ord));
	unsigned char *in = calloc(nv, 1);
	struct wk_sampler_params p = plain();
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	struct wk_sampler *s;
	uint64_t x = 3;
	double z = 0.0, cum = 0.0, target;
	uint32_t cut_n = 0;

	(void)state;
	for (uint32_t i = 0; i < nv; i++) {
		l[i] = (float)(lcg(&x) % 4000) / 400.0f; /* many ties */
		ord[i] = i;
	}
	qsort_r(ord, nv, sizeof(*ord), cmp_desc_ref, l);

	/* top-k 2000 (quickselect path) */
	p.top_k = 2000;
	s = mk(&p, nv);
	for (uint32_t i = 0; i < p.top_k; i++)
		in[ord[i]] = 1;
	for (int i = 0; i < 300; i++) {
		struct wk_sample o;

		assert_int_equal(wk_sampler_sample(s, ws, l, nv, &o), CM_OK);
		assert_true(in[o.token]);
	}
	wk_sampler_free(s);

	/* top-p 0.5 without top-k (bucket path): reference cut by sorting */
	memset(in, 0, nv);
	for (uint32_t i = 0; i < nv; i++)
		z += exp((double)l[i] - (double)l[ord[0]]);
	target = 0.5 * z;
	for (cut_n = 0; cut_n < nv; cut_n++) {
		cum += exp((double)l[ord[cut_n]] - (double)l[ord[0]]);
		in[ord[cut_n]] = 1;
		if (cum >= target)
			break;
	}
	p.top_k = 0;
	p.top_p = 0.5f;
	s = mk(&p, nv);
	for (int i = 0; i < 300; i++) {
		struct wk_sample o;

		assert_int_equal(wk_sampler_sample(s, ws, l, nv, &o), CM_OK);
		if (!in[o.token])
			fail_msg("top-p drew token %u (logit %g) outside the %u best",
				 o.token, (double)l[o.token], cut_n + 1);
	}
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
	free(l);
	free(ord);
	free(in);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Cost per sample for a 128k vocabulary (printed; loosely bounded). */
static void test_timing_128k(void **state)
{
	const uint32_t nv = 128256;
	float *l = malloc(nv * sizeof(*l));
	struct wk_sampler_ws *ws = wk_sampler_ws_new(nv);
	static const struct {
		const char *what;
		float temp;
		uint32_t k;
		float top_p, min_p;
	} cases[] = {
		{ "greedy", 0.0f, 0, 1.0f, 0.0f },
		{ "k=40 p=0.9 (Ollama default)", 0.8f, 40, 0.9f, 0.0f },
		{ "k=0 p=1 (full softmax)", 1.0f, 0, 1.0f, 0.0f },
		{ "k=0 p=0.9", 0.8f, 0, 0.9f, 0.0f },
		{ "k=0 p=1 min_p=0.05", 0.8f, 0, 1.0f, 0.05f },
		{ "k=5000 p=0.95", 1.0f, 5000, 0.95f, 0.0f },
	};
	uint64_t x = 11;

	(void)state;
	/* a peaked, model-like shape: a few strong logits over a normal tail */
	for (uint32_t i = 0; i < nv; i++) {
		double u1 = ((double)lcg(&x) + 1.0) / 2147483649.0;
		double u2 = (double)lcg(&x) / 2147483648.0;

		l[i] = (float)(2.5 * sqrt(-2.0 * log(u1)) * cos(6.283185307 * u2));
	}
	for (int i = 0; i < 20; i++)
		l[(i * 7919u) % nv] = 14.0f + (float)i * 0.1f;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct wk_sampler_params p = plain();
		struct wk_sampler *s;
		const int reps = 20;
		double t0, ms;

		p.temperature = cases[c].temp;
		p.top_k = cases[c].k;
		p.top_p = cases[c].top_p;
		p.min_p = cases[c].min_p;
		p.repeat_penalty = 1.1f;
		s = mk(&p, nv);
		for (uint32_t i = 0; i < 64; i++)
			assert_int_equal(wk_sampler_accept(s, (i * 31u) % nv), CM_OK);
		/* the fastest of the repetitions: the machine is shared */
		ms = 1e9;
		for (int i = 0; i < reps; i++) {
			struct wk_sample o;
			double t;

			t0 = now_ms();
			assert_int_equal(wk_sampler_sample(s, ws, l, nv, &o), CM_OK);
			t = now_ms() - t0;
			ms = t < ms ? t : ms;
		}
		printf("sampler 128k vocab, %-30s %.3f ms/sample (best of %d)\n",
		       cases[c].what, ms, reps);
		assert_true(ms < 50.0); /* loose: shared CI machines */
		wk_sampler_free(s);
	}
	wk_sampler_ws_free(ws);
	free(l);
}

static void test_bad_input(void **state)
{
	struct wk_sampler_params p = plain();
	struct wk_sampler *s;
	struct wk_sampler_ws *ws = wk_sampler_ws_new(4);
	const float all_neg_inf[3] = { -INFINITY, NAN, -INFINITY };
	const float with_nan[3] = { NAN, 1.0f, INFINITY };
	struct wk_sample o;

	(void)state;
	s = mk(&p, 3);
	assert_int_equal(wk_sampler_accept(s, 3), CM_EINVAL);
	assert_int_equal(wk_sampler_sample(s, ws, with_nan, 2, &o), CM_EINVAL);
	assert_int_equal(wk_sampler_sample(s, ws, all_neg_inf, 3, &o), CM_EINVAL);
	/* NaN is -inf, +inf is the largest float: token 2 always */
	for (int i = 0; i < 50; i++) {
		assert_int_equal(wk_sampler_sample(s, ws, with_nan, 3, &o), CM_OK);
		assert_int_equal(o.token, 2);
	}
	wk_sampler_free(s);
	wk_sampler_free(NULL);
	wk_sampler_ws_free(ws);
	wk_sampler_ws_free(NULL);
	/* workspace smaller than the vocabulary */
	ws = wk_sampler_ws_new(2);
	s = mk(&p, 3);
	assert_int_equal(wk_sampler_sample(s, ws, with_nan, 3, &o), CM_EINVAL);
	wk_sampler_free(s);
	wk_sampler_ws_free(ws);
	assert_null(wk_sampler_ws_new(0));
}

static void expect_invalid(const struct wk_sampler_params *p, uint32_t nv,
			   const char *name, const char *found)
{
	char err[256] = "";
	struct wk_sampler *s = (struct wk_sampler *)1;

	assert_int_equal(wk_sampler_params_validate(p, nv, err, sizeof(err)),
			 CM_EINVAL);
	if (!strstr(err, name) || !strstr(err, found) || !strstr(err, "expected"))
		fail_msg("message \"%s\" should name %s and %s", err, name, found);
	assert_int_equal(wk_sampler_new(p, nv, &s, NULL, 0), CM_EINVAL);
	assert_null(s);
}

static void test_validation(void **state)
{
	struct wk_sampler_params p;
	char err[128];

	(void)state;
	wk_sampler_params_default(&p);
	assert_int_equal(wk_sampler_params_validate(&p, 32000, err, sizeof(err)),
			 CM_OK);
	p.temperature = 100.5f;
	expect_invalid(&p, 100, "temperature", "100.5");
	p.temperature = NAN;
	expect_invalid(&p, 100, "temperature", "nan");
	p.temperature = -0.5f;
	expect_invalid(&p, 100, "temperature", "-0.5");
	wk_sampler_params_default(&p);
	p.top_k = 101;
	expect_invalid(&p, 100, "top_k", "101");
	wk_sampler_params_default(&p);
	p.top_p = 1.5f;
	expect_invalid(&p, 100, "top_p", "1.5");
	p.top_p = 0.0f;
	expect_invalid(&p, 100, "top_p", "found 0");
	wk_sampler_params_default(&p);
	p.min_p = -0.25f;
	expect_invalid(&p, 100, "min_p", "-0.25");
	wk_sampler_params_default(&p);
	p.repeat_penalty = 0.0f;
	expect_invalid(&p, 100, "repeat_penalty", "found 0");
	wk_sampler_params_default(&p);
	p.repeat_last_n = WK_SAMPLER_REPEAT_LAST_N_MAX + 1;
	expect_invalid(&p, 100, "repeat_last_n", "65537");
	wk_sampler_params_default(&p);
	p.presence_penalty = INFINITY;
	expect_invalid(&p, 100, "presence_penalty", "inf");
	wk_sampler_params_default(&p);
	p.frequency_penalty = -101.0f;
	expect_invalid(&p, 100, "frequency_penalty", "-101");
	wk_sampler_params_default(&p);
	expect_invalid(&p, 0, "n_vocab", "found 0");
	/* edges that are valid */
	wk_sampler_params_default(&p);
	p.temperature = 0.0f;
	p.top_k = 100;
	p.top_p = 1.0f;
	p.min_p = 1.0f;
	p.repeat_last_n = WK_SAMPLER_REPEAT_LAST_N_MAX;
	assert_int_equal(wk_sampler_params_validate(&p, 100, NULL, 0), CM_OK);
}

static void test_alloc_failures(void **state)
{
	struct wk_sampler_params p;
	int ok_at = -1;

	(void)state;
	wk_sampler_params_default(&p);
	p.has_seed = true;
	for (long n = 0; n < 10 && ok_at < 0; n++) {
		struct wk_sampler *s = NULL;
		enum cm_status st;

		cm_alloc_fail_after(n);
		st = wk_sampler_new(&p, 1000, &s, NULL, 0);
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			ok_at = (int)n;
			wk_sampler_free(s);
		} else {
			assert_int_equal(st, CM_ENOMEM);
			assert_null(s);
		}
	}
	assert_true(ok_at > 0);
	for (long n = 0; n < 8; n++) {
		cm_alloc_fail_after(n);
		assert_null(wk_sampler_ws_new(1000));
		cm_alloc_fail_reset();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exp),
		cmocka_unit_test(test_greedy),
		cmocka_unit_test(test_mask_and_alternatives),
		cmocka_unit_test(test_top_k),
		cmocka_unit_test(test_top_p),
		cmocka_unit_test(test_min_p),
		cmocka_unit_test(test_temperature_statistics),
		cmocka_unit_test(test_logprob_unfiltered),
		cmocka_unit_test(test_penalties_exact),
		cmocka_unit_test(test_seed_reproducible),
		cmocka_unit_test(test_seed_known_answer),
		cmocka_unit_test(test_no_logprob_same_draws),
		cmocka_unit_test(test_large_vocab_reference),
		cmocka_unit_test(test_timing_128k),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_alloc_failures),
	};

	return cmocka_run_group_tests_name("worker/sampler", tests, NULL, NULL);
}
