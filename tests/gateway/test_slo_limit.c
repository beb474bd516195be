/*
 * test_slo_limit.c - gateway/slo_limit.c on synthetic latency series: a
 * worker whose latency grows with its concurrency c as
 * base * (1 + (c / knee)^3) (+ up to 10% deterministic noise), with the
 * p95 targets at twice the base: the limit converges just under the knee
 * from the static cap, backs off to the floor when the base latency steps
 * up (a slower model, a noisy neighbour), and climbs back when it steps
 * down; an unsaturated worker's limit is left alone; ITL is held like
 * TTFT; bad constants are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

#include <cmocka.h>

#include "gateway/slo_limit.h"

static uint64_t rng = 88172645463325252ull;

static double noise(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (double)(rng % 1000) / 10000.0; /* 0 .. 0.1 */
}

/* One window at the current limit, the worker saturated; ms latencies. */
static void window(struct gw_slo_limit *l, double base_ms, double knee, int itl)
{
	double c = gw_slo_limit_get(l);
	double lat = base_ms * (1 + pow(c / knee, 3));

	for (uint32_t i = 0; i < l->cfg.window; i++) {
		int64_t ns = (int64_t)(lat * (1 + noise()) * 1e6);

		gw_slo_limit_observe(l, 0, itl ? 1000000 : ns, itl ? ns : -1, 1);
	}
}

static const struct gw_slo_cfg cfg = {
	.ttft_p95_ns = 200000000, /* 200 ms: twice the 100 ms base */
	.itl_p95_ns = 0,
	.window = 20,
	.decrease = 0.8,
	.increase = 1,
	.min_limit = 1,
};

static void test_converges_to_the_knee(void **state)
{
	struct gw_slo_limit l;
	double sum = 0;
	uint32_t hi = 0, lo = 64;

	(void)state;
	assert_int_equal(gw_slo_limit_init(&l, &cfg, 64), CM_OK);
	assert_int_equal(gw_slo_limit_get(&l), 64);
	for (int w = 0; w < 300; w++) {
		window(&l, 100, 32, 0);
		if (w >= 100) {
			uint32_t v = gw_slo_limit_get(&l);

			sum += v;
			hi = v > hi ? v : hi;
			lo = v < lo ? v : lo;
		}
	}
	/* the largest concurrency holding 200 ms at +10% noise is 0.94 x 32 = 30;
	 * AIMD oscillates between it and 0.8 of it */
	assert_true(sum / 200 > 0.6 * 32 && sum / 200 <= 32);
	assert_true(hi <= 31);
	assert_true(lo >= 19);
	assert_true(l.decreases > 0 && l.increases > 0);
	gw_slo_limit_deinit(&l);
}

static void test_backs_off_and_recovers(void **state)
{
	struct gw_slo_limit l;
	int w;

	(void)state;
	assert_int_equal(gw_slo_limit_init(&l, &cfg, 64), CM_OK);
	for (w = 0; w < 150; w++)
		window(&l, 100, 32, 0);
	assert_true(gw_slo_limit_get(&l) >= 19);
	/* the base latency triples: even one request misses the target */
	for (w = 0; w < 20; w++)
		window(&l, 300, 32, 0);
	assert_int_equal(gw_slo_limit_get(&l), 1);
	/* back to normal: the limit climbs one per window */
	for (w = 0; w < 40 && gw_slo_limit_get(&l) < 19; w++)
		window(&l, 100, 32, 0);
	assert_true(gw_slo_limit_get(&l) >= 19);
	assert_true(w <= 25);
	gw_slo_limit_deinit(&l);
}

static void test_unsaturated_and_itl(void **state)
{
	struct gw_slo_limit l;
	struct gw_slo_cfg c = cfg;

	(void)state;
	/* fast requests that never reached the limit: no evidence to grow */
	assert_int_equal(gw_slo_limit_init(&l, &cfg, 64), CM_OK);
	gw_slo_limit_set_ceiling(&l, 8);
	assert_int_equal(gw_slo_limit_get(&l), 8);
	for (int i = 0; i < 40; i++)
		gw_slo_limit_observe(&l, 0, 150000000, -1, 0);
	assert_int_equal(gw_slo_limit_get(&l), 8);
	for (int i = 0; i < 20; i++)
		gw_slo_limit_observe(&l, 0, 250000000, -1, 0);
	assert_int_equal(gw_slo_limit_get(&l), 6); /* 8 x 0.8 */
	gw_slo_limit_set_ceiling(&l, 4);
	assert_int_equal(gw_slo_limit_get(&l), 4);
	gw_slo_limit_deinit(&l);
	/* the ITL target is held the same way */
	c.ttft_p95_ns = 1000000000;
	c.itl_p95_ns = 200000000;
	assert_int_equal(gw_slo_limit_init(&l, &c, 64), CM_OK);
	for (int w = 0; w < 300; w++)
		window(&l, 100, 32, 1);
	assert_true(gw_slo_limit_get(&l) <= 31 && gw_slo_limit_get(&l) >= 19);
	assert_true(l.last_itl_p95 > 0);
	gw_slo_limit_deinit(&l);
	/* refusals */
	c = cfg;
	c.window = 0;
	assert_int_equal(gw_slo_limit_init(&l, &c, 8), CM_EINVAL);
	c = cfg;
	c.decrease = 1.0;
	assert_int_equal(gw_slo_limit_init(&l, &c, 8), CM_EINVAL);
	c = cfg;
	c.min_limit = 9;
	assert_int_equal(gw_slo_limit_init(&l, &c, 8), CM_EINVAL);
}

/* A window closed by time (slo.window_ms): at a few requests per second
 * the count alone would decide too rarely; with a 1 s window, 8 first
 * tokens over it decide, 7 do not; far over the target, the gradient
 * step halves the limit (not x 0.8), and the ITL means taken at the ends
 * of requests count in the window in progress. */
static void test_window_by_time(void **state)
{
	struct gw_slo_limit l;
	struct gw_slo_cfg c = cfg;
	const int64_t s = 1000000000;

	(void)state;
	c.window_ns = s;
	c.itl_p95_ns = 100000000;
	assert_int_equal(gw_slo_limit_init(&l, &c, 64), CM_OK);
	/* 7 first tokens over 2 s: no decision */
	for (int i = 0; i < 6; i++)
		assert_int_equal(gw_slo_limit_observe(&l, i * s / 3, 150000000, -1, 1), 0);
	assert_int_equal(gw_slo_limit_observe(&l, 2 * s, 150000000, -1, 1), 0);
	/* TTFT holds, but the requests' mean gaps are 4x the target */
	gw_slo_limit_itl(&l, 400000000);
	gw_slo_limit_itl(&l, 400000000);
	assert_true(gw_slo_limit_current(&l, 0)); /* never changed: all count */
	assert_int_equal(gw_slo_limit_observe(&l, 2 * s + 1, 150000000, -1, 1), 1);
	assert_int_equal(gw_slo_limit_get(&l), 32);
	assert_true(l.last_itl_p95 == 400000000);
	/* requests placed before the cut ran under 64: they do not count */
	assert_false(gw_slo_limit_current(&l, 2 * s));
	assert_true(gw_slo_limit_current(&l, 2 * s + 1));
	/* the next window starts empty: its own 8 first tokens, 1 s */
	for (int i = 0; i < 7; i++)
		assert_int_equal(gw_slo_limit_observe(&l, 3 * s + i, 150000000, -1, 1), 0);
	assert_int_equal(gw_slo_limit_observe(&l, 3 * s + 7, 150000000, -1, 1), 0); /* too young */
	assert_int_equal(gw_slo_limit_observe(&l, 4 * s, 150000000, 50000000, 1), 1);
	assert_int_equal(gw_slo_limit_get(&l), 33); /* both hold, saturated: + 1 */
	gw_slo_limit_deinit(&l);
}

/* First tokens arrive every window, generations end later: a window whose
 * ITL samples all come from requests placed before the last increase is no
 * evidence for the limit in force, so it does not raise it again; a miss
 * among them (placed under a lower limit: optimistic) still cuts it. */
static void test_increase_needs_itl_at_the_limit(void **state)
{
	struct gw_slo_limit l;
	struct gw_slo_cfg c = cfg;
	const int64_t s = 1000000000;
	uint32_t before;

	(void)state;
	c.window = 4;
	c.itl_p95_ns = 100000000;
	assert_int_equal(gw_slo_limit_init(&l, &c, 64), CM_OK);
	l.limit = 10;
	for (int i = 0; i < 3; i++)
		gw_slo_limit_observe(&l, s + i, 150000000, -1, 1);
	gw_slo_limit_itl_at(&l, 50000000, s);
	assert_int_equal(gw_slo_limit_observe(&l, s + 3, 150000000, -1, 1), 1);
	assert_int_equal(gw_slo_limit_get(&l), 11); /* evidence at 10: + 1 */
	/* next window: TTFT holds, the only ITL is from a request placed at 10 */
	for (int i = 0; i < 3; i++)
		gw_slo_limit_observe(&l, 2 * s + i, 150000000, -1, 1);
	gw_slo_limit_itl_at(&l, 50000000, s + 1);
	assert_int_equal(gw_slo_limit_observe(&l, 2 * s + 3, 150000000, -1, 1), 1);
	assert_int_equal(gw_slo_limit_get(&l), 11); /* no evidence at 11: held */
	/* a request placed at 10 that missed is a miss at 11 too */
	assert_true(gw_slo_limit_current(&l, s + 2));
	for (int i = 0; i < 3; i++)
		gw_slo_limit_observe(&l, 3 * s + i, 150000000, -1, 1);
	gw_slo_limit_itl_at(&l, 400000000, s + 2);
	gw_slo_limit_itl_at(&l, 400000000, s + 2);
	before = gw_slo_limit_get(&l);
	assert_int_equal(gw_slo_limit_observe(&l, 3 * s + 3, 150000000, -1, 1), 1);
	assert_true(gw_slo_limit_get(&l) < before);
	/* after the cut, requests placed before it no longer count */
	assert_false(gw_slo_limit_current(&l, 3 * s));
	gw_slo_limit_deinit(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_increase_needs_itl_at_the_limit),
		cmocka_unit_test(test_converges_to_the_knee),
		cmocka_unit_test(test_backs_off_and_recovers),
		cmocka_unit_test(test_unsaturated_and_itl),
		cmocka_unit_test(test_window_by_time),
	};

	return cmocka_run_group_tests_name("gateway_slo_limit", tests, NULL, NULL);
}
