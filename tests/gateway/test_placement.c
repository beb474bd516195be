/*
 * test_placement.c - gateway/placement.c: routing keys (tenant isolation, prefix
 * length), rendezvous stability when workers come and go, the load bound
 * under a flood, weighted shares, and ineligible workers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "gateway/placement.h"

static const uint8_t salt_a[32] = { 1, 2, 3 };
static const uint8_t salt_b[32] = { 9, 8, 7 };

static char names[64][16];

static void mk_workers(struct gw_place_worker *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "gpu-%02zu", i);
		w[i] = (struct gw_place_worker){ .name = names[i], .weight = 1.0,
						 .load = 0, .healthy = true,
						 .draining = false };
	}
}

static void key_of(const uint8_t *salt, unsigned i, struct gw_place_key *k)
{
	char prompt[64];
	int n = snprintf(prompt, sizeof(prompt), "system prompt number %u", i);

	gw_place_key(salt, 32, prompt, (size_t)n, GW_PLACE_PREFIX_BYTES_DEFAULT, k);
}

static size_t pick(const struct gw_place_key *k, const struct gw_place_worker *w,
		   size_t n, double c)
{
	struct gw_place_pick p;

	assert_int_equal(gw_place_choose(k, w, n, c, &p), CM_OK);
	assert_true(p.index < n);
	return p.index;
}

static void test_key(void **state)
{
	struct gw_place_key a1, a2, b1, c1, d1;
	const char *p1 = "You are a helpful assistant. Question one";
	const char *p2 = "You are a helpful assistant. Question two";

	(void)state;
	gw_place_key(salt_a, 32, p1, strlen(p1), 1024, &a1);
	gw_place_key(salt_a, 32, p1, strlen(p1), 1024, &a2);
	assert_memory_equal(a1.b, a2.b, GW_PLACE_KEY_LEN);
	/* another tenant, same text: unrelated key */
	gw_place_key(salt_b, 32, p1, strlen(p1), 1024, &b1);
	assert_memory_not_equal(a1.b, b1.b, GW_PLACE_KEY_LEN);
	/* only the leading prefix_bytes count */
	gw_place_key(salt_a, 32, p2, strlen(p2), 29, &c1);
	gw_place_key(salt_a, 32, p1, strlen(p1), 29, &d1);
	assert_memory_equal(c1.b, d1.b, GW_PLACE_KEY_LEN);
	gw_place_key(salt_a, 32, p2, strlen(p2), 1024, &c1);
	assert_memory_not_equal(a1.b, c1.b, GW_PLACE_KEY_LEN);
	/* the key is not the plain HMAC of the prompt under the salt: a
	 * routing key cannot be replayed as a cache-chain value */
	gw_place_key(salt_a, 32, "", 0, 1024, &d1);
	assert_memory_not_equal(a1.b, d1.b, GW_PLACE_KEY_LEN);
	/* two-step form with a cached sub-key gives the same key */
	{
		uint8_t sub[GW_PLACE_KEY_LEN];

		gw_place_subkey(salt_a, 32, sub);
		gw_place_key_sub(sub, p1, strlen(p1), 1024, &d1);
		assert_memory_equal(a1.b, d1.b, GW_PLACE_KEY_LEN);
	}
}

static void test_same_key_same_worker_and_stability(void **state)
{
	struct gw_place_worker w[11];
	size_t before[2000], after, moved = 0;

	(void)state;
	mk_workers(w, 11);
	for (unsigned i = 0; i < 2000; i++) {
		struct gw_place_key k;

		key_of(salt_a, i, &k);
		before[i] = pick(&k, w, 10, 1.25);
		assert_int_equal(pick(&k, w, 10, 1.25), before[i]);
	}
	/* add worker 10: keys move only to it, about 1/11 of them */
	for (unsigned i = 0; i < 2000; i++) {
		struct gw_place_key k;

		key_of(salt_a, i, &k);
		after = pick(&k, w, 11, 1.25);
		if (after != before[i]) {
			assert_int_equal(after, 10);
			moved++;
		}
	}
	assert_true(moved > 2000 / 11 / 2 && moved < 2000 / 11 * 2);
	/* remove worker 3 (marked unhealthy): only its keys move */
	w[3].healthy = false;
	moved = 0;
	for (unsigned i = 0; i < 2000; i++) {
		struct gw_place_key k;

		key_of(salt_a, i, &k);
		after = pick(&k, w, 10, 1.25);
		if (before[i] == 3) {
			assert_true(after != 3);
			moved++;
		} else {
			assert_int_equal(after, before[i]);
		}
	}
	assert_true(moved > 2000 / 10 / 2);
	/* the array order does not matter, only the names */
	{
		struct gw_place_worker r[10];
		struct gw_place_key k;

		for (size_t i = 0; i < 10; i++)
			r[i] = w[9 - i];
		r[6].healthy = true; /* w[3] */
		for (unsigned i = 0; i < 200; i++) {
			key_of(salt_a, i, &k);
			assert_int_equal(9 - pick(&k, r, 10, 1.25), before[i]);
		}
	}
}

static void test_tenants_spread_differently(void **state)
{
	struct gw_place_worker w[8];
	unsigned same = 0;

	(void)state;
	mk_workers(w, 8);
	for (unsigned i = 0; i < 4000; i++) {
		struct gw_place_key ka, kb;

		key_of(salt_a, i, &ka);
		key_of(salt_b, i, &kb);
		same += pick(&ka, w, 8, 0.0) == pick(&kb, w, 8, 0.0);
	}
	/* independent placements agree 1/8 of the time: 500 +- 5 sigma */
	assert_true(same > 395 && same < 605);
}

static void test_flood_respects_bound(void **state)
{
	struct gw_place_worker w[8];
	struct gw_place_key hot;
	const double c = 1.25;
	size_t first;
	uint64_t x = 1;
	unsigned total = 0, spills = 0;

	(void)state;
	mk_workers(w, 8);
	key_of(salt_a, 7, &hot);
	first = pick(&hot, w, 8, c);
	/* one tenant, one prefix, 5000 arrivals; requests finish at random */
	for (int r = 0; r < 5000; r++) {
		struct gw_place_pick p;
		double bound = ceil(c * (total + 1.0) / 8.0);

		assert_int_equal(gw_place_choose(&hot, w, 8, c, &p), CM_OK);
		assert_false(p.fallback);
		assert_true(w[p.index].load + 1.0 <= bound);
		if (p.index != first) {
			assert_true(p.spilled);
			spills++;
		}
		w[p.index].load++;
		total++;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		if ((x >> 33) % 3 != 0) { /* one completion on a random worker */
			size_t v = (x >> 40) % 8;

			if (w[v].load > 0) {
				w[v].load--;
				total--;
			}
		}
	}
	assert_true(spills > 0);
	/* unbounded (plain rendezvous) piles everything on one worker */
	for (size_t i = 0; i < 8; i++)
		w[i].load = 100;
	assert_int_equal(pick(&hot, w, 8, 0.0), first);
}

static void test_weights_shift_share(void **state)
{
	struct gw_place_worker w[4];
	const double wt[4] = { 1.0, 1.0, 2.0, 4.0 };
	unsigned count[4] = { 0 };
	const unsigned n = 40000;

	(void)state;
	mk_workers(w, 4);
	for (size_t i = 0; i < 4; i++)
		w[i].weight = wt[i];
	for (unsigned i = 0; i < n; i++) {
		struct gw_place_key k;

		key_of(salt_a, i, &k);
		count[pick(&k, w, 4, 0.0)]++;
	}
	for (size_t i = 0; i < 4; i++) {
		double share = (double)count[i] / n, want = wt[i] / 8.0;

		if (fabs(share - want) > 0.012)
			fail_msg("worker %zu weight %g: share %.4f, expected %.4f",
				 i, wt[i], share, want);
	}
	/* weighted bound: a weight-4 worker may carry 4x a weight-1 one */
	{
		struct gw_place_key k;
		unsigned total = 0;

		key_of(salt_a, 1, &k);
		for (int r = 0; r < 800; r++) {
			size_t i = pick(&k, w, 4, 1.25);

			assert_true(w[i].load + 1.0 <=
				    ceil(1.25 * (total + 1.0) * w[i].weight / 8.0));
			w[i].load++;
			total++;
		}
		assert_true(w[3].load > 3 * w[0].load);
	}
}

/* With equal weights the shortcut ranking equals the weighted formula. */
static void test_uniform_matches_formula(void **state)
{
	struct gw_place_worker w[16];

	(void)state;
	mk_workers(w, 16);
	for (unsigned i = 0; i < 500; i++) {
		struct gw_place_key k;
		size_t best = 0;

		key_of(salt_b, i, &k);
		for (size_t j = 1; j < 16; j++)
			if (gw_place_score(&k, w[j].name, 1.0) >
			    gw_place_score(&k, w[best].name, 1.0))
				best = j;
		assert_int_equal(pick(&k, w, 16, 0.0), best);
	}
}

static void test_ineligible_never_chosen(void **state)
{
	struct gw_place_worker w[12];
	uint64_t x = 99;
	struct gw_place_pick p;
	struct gw_place_key k;

	(void)state;
	mk_workers(w, 12);
	for (unsigned i = 0; i < 3000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		for (size_t j = 0; j < 12; j++) {
			unsigned r = (unsigned)(x >> (j * 5)) & 7;

			w[j].healthy = r != 0;
			w[j].draining = r == 1;
			w[j].weight = r == 2 ? 0.0 : 1.0;
			w[j].load = (unsigned)(x >> (j * 3)) & 15;
		}
		w[i % 12].healthy = true;
		w[i % 12].draining = false;
		w[i % 12].weight = 1.0;
		key_of(salt_b, i, &k);
		assert_int_equal(gw_place_choose(&k, w, 12, 1.25, &p), CM_OK);
		assert_true(w[p.index].healthy && !w[p.index].draining &&
			    w[p.index].weight > 0.0);
	}
	for (size_t j = 0; j < 12; j++)
		w[j].draining = true;
	assert_int_equal(gw_place_choose(&k, w, 12, 1.25, &p), CM_ENOTFOUND);
	assert_int_equal(gw_place_choose(&k, w, 0, 1.25, &p), CM_ENOTFOUND);
}

static void test_bad_parameters(void **state)
{
	struct gw_place_worker w[2];
	struct gw_place_pick p;
	struct gw_place_key k;

	(void)state;
	mk_workers(w, 2);
	key_of(salt_a, 0, &k);
	assert_int_equal(gw_place_choose(&k, w, 2, 0.5, &p), CM_EINVAL);
	assert_int_equal(gw_place_choose(&k, w, 2, NAN, &p), CM_EINVAL);
	assert_int_equal(gw_place_choose(&k, w, 2, 101.0, &p), CM_EINVAL);
	w[1].weight = -1.0;
	assert_int_equal(gw_place_choose(&k, w, 2, 1.25, &p), CM_EINVAL);
	w[1].weight = INFINITY;
	assert_int_equal(gw_place_choose(&k, w, 2, 1.25, &p), CM_EINVAL);
	w[1].weight = 1.0;
	w[1].name = NULL;
	assert_int_equal(gw_place_choose(&k, w, 2, 1.25, &p), CM_EINVAL);
	/* scores are finite and positive */
	assert_true(gw_place_score(&k, "a", 1.0) > 0.0);
	assert_true(isfinite(gw_place_score(&k, "a", 1.0)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key),
		cmocka_unit_test(test_same_key_same_worker_and_stability),
		cmocka_unit_test(test_tenants_spread_differently),
		cmocka_unit_test(test_flood_respects_bound),
		cmocka_unit_test(test_weights_shift_share),
		cmocka_unit_test(test_uniform_matches_formula),
		cmocka_unit_test(test_ineligible_never_chosen),
		cmocka_unit_test(test_bad_parameters),
	};

	return cmocka_run_group_tests_name("gateway/route", tests, NULL, NULL);
}
