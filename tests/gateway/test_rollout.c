/*
 * test_rollout.c - gateway/rollout.c over three fake workers on one loop
 * (w0 serving, w1 and w2 staged, all "tiny"): promotion refused without a
 * verdict, with a failed one and after a reconnect; canary, full promotion
 * and both rollbacks; what placement may use under each role; the canary
 * bucket (stable, spread, monotone in the share); the inventory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "gateway/rollout.h"
#include "gateway/workers.h"
#include "tests/gateway/fake_worker.h"

#define NW 3
#define RT_DEADLINE_MS 10000

static struct event_base *base;
static struct gw_workers *ws;
static struct gw_rollout *ro;
static struct fake_worker fk[NW];
static char paths[NW][108];

static void loop_until_ready(size_t i, uint64_t min_reconnects)
{
	int64_t end = cm_mono_ns() + RT_DEADLINE_MS * 1000000LL;
	struct gw_worker_info wi;

	for (;;) {
		struct timeval tv = { 0, 5000 };

		gw_workers_info(ws, i, &wi);
		if (wi.ready && wi.reconnects >= min_reconnects)
			return;
		if (cm_mono_ns() > end)
			fail_msg("worker %zu not ready", i);
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
}

static int setup(void **state)
{
	struct gw_worker_spec spec[NW];
	const struct gw_workers_config wc = { 0, 200, 60000, 0, 0 };
	const uint8_t staged[NW] = { 0, 1, 1 };
	static char names[NW][8];

	(void)state;
	base = event_base_new();
	if (!base)
		return -1;
	for (int i = 0; i < NW; i++) {
		snprintf(names[i], sizeof(names[i]), "w%d", i);
		snprintf(paths[i], sizeof(paths[i]), "/tmp/sluice-test-rollout-%d-%ld.sock", i,
			 (long)getpid());
		if (fake_worker_start(&fk[i], base, paths[i]) != 0)
			return -1;
		spec[i] = (struct gw_worker_spec){ names[i], paths[i], "tiny" };
	}
	if (gw_workers_new(base, spec, NW, &wc, &ws) != CM_OK ||
	    gw_rollout_new(ws, staged, &ro) != CM_OK)
		return -1;
	for (size_t i = 0; i < NW; i++)
		loop_until_ready(i, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gw_rollout_free(ro);
	gw_workers_free(ws);
	for (int i = 0; i < NW; i++)
		fake_worker_stop(&fk[i]);
	event_base_free(base);
	return 0;
}

static void passed(size_t i, int ok)
{
	struct gw_eval_verdict v;

	memset(&v, 0, sizeof(v));
	v.passed = ok;
	v.cases = 4;
	v.have_baseline = 1;
	v.exact_match = ok ? 1.0 : 0.25;
	snprintf(v.reason, sizeof(v.reason), "%s", ok ? "" : "exact match 0.250 below the gate's 1.000");
	gw_rollout_set_verdict(ro, i, &v);
}

static void test_promote_needs_a_passing_eval(void **state)
{
	char msg[300];

	(void)state;
	assert_int_equal(gw_rollout_role(ro, 0), GW_ROLE_SERVING);
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_STAGED);
	/* placement: the serving worker only */
	assert_true(gw_rollout_admits(ro, 0, 0));
	assert_false(gw_rollout_admits(ro, 1, 0));
	assert_false(gw_rollout_admits(ro, 1, 1));
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w1", 100, msg, sizeof(msg)), CM_EPERM);
	assert_non_null(strstr(msg, "no eval has run"));
	passed(1, 0);
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w1", 100, msg, sizeof(msg)), CM_EPERM);
	assert_non_null(strstr(msg, "failed its gates: exact match 0.250"));
	assert_int_equal(gw_rollout_promote(ro, "tiny", "nosuch", 100, msg, sizeof(msg)),
			 CM_ENOTFOUND);
	assert_int_equal(gw_rollout_promote(ro, "other", "w1", 100, msg, sizeof(msg)), CM_EINVAL);
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w1", 0, msg, sizeof(msg)), CM_EINVAL);
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w0", 100, msg, sizeof(msg)), CM_EINVAL);
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_STAGED); /* nothing changed */
}

static void test_canary_then_full_then_rollbacks(void **state)
{
	const char *what;
	char msg[300];
	uint32_t pct;
	int ready;

	(void)state;
	passed(1, 1);
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w1", 30, msg, sizeof(msg)), CM_OK);
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_CANARY);
	gw_rollout_canary(ro, "tiny", 4, &pct, &ready);
	assert_int_equal(pct, 30);
	assert_true(ready);
	assert_true(gw_rollout_admits(ro, 1, 1));
	assert_false(gw_rollout_admits(ro, 1, 0));
	assert_true(gw_rollout_admits(ro, 0, 0));
	/* rollback of a canary: it goes back to staged, no share left */
	assert_int_equal(gw_rollout_rollback(ro, "tiny", &what, msg, sizeof(msg)), CM_OK);
	assert_string_equal(what, "canary");
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_STAGED);
	gw_rollout_canary(ro, "tiny", 4, &pct, &ready);
	assert_int_equal(pct, 0);
	/* full promotion: w1 serves, w0 is previous (loaded, no traffic) */
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w1", 100, msg, sizeof(msg)), CM_OK);
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_SERVING);
	assert_int_equal(gw_rollout_role(ro, 0), GW_ROLE_PREVIOUS);
	assert_int_equal(gw_rollout_role(ro, 2), GW_ROLE_STAGED);
	assert_false(gw_rollout_admits(ro, 0, 0));
	/* rollback: w0 serves again at once, w1 staged */
	assert_int_equal(gw_rollout_rollback(ro, "tiny", &what, msg, sizeof(msg)), CM_OK);
	assert_string_equal(what, "previous");
	assert_int_equal(gw_rollout_role(ro, 0), GW_ROLE_SERVING);
	assert_int_equal(gw_rollout_role(ro, 1), GW_ROLE_STAGED);
	/* nothing left to roll back to */
	assert_int_equal(gw_rollout_rollback(ro, "tiny", &what, msg, sizeof(msg)), CM_ENOTFOUND);
	assert_int_equal(gw_rollout_rollback(ro, "other", &what, msg, sizeof(msg)), CM_ENOTFOUND);
}

static void test_verdict_ends_with_the_connection(void **state)
{
	struct gw_worker_info wi;
	char msg[300];

	(void)state;
	passed(2, 1);
	gw_workers_info(ws, 2, &wi);
	fake_worker_drop(&fk[2]); /* the worker restarts: maybe another build */
	loop_until_ready(2, wi.reconnects + 1);
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w2", 100, msg, sizeof(msg)), CM_EPERM);
	assert_non_null(strstr(msg, "another connection"));
	passed(2, 1); /* a new run on this connection */
	assert_int_equal(gw_rollout_promote(ro, "tiny", "w2", 50, msg, sizeof(msg)), CM_OK);
	assert_int_equal(gw_rollout_role(ro, 2), GW_ROLE_CANARY);
	{
		const char *what;

		assert_int_equal(gw_rollout_rollback(ro, "tiny", &what, msg, sizeof(msg)), CM_OK);
	}
}

static void test_bucket(void **state)
{
	uint8_t salt[32];
	int below[3] = { 0, 0, 0 }, n = 2000, moved = 0;

	(void)state;
	for (int i = 0; i < n; i++) {
		uint32_t b;

		cm_sha256(&i, sizeof(i), salt);
		b = gw_rollout_bucket(salt, sizeof(salt), "tiny");
		assert_true(b < 100);
		assert_int_equal(b, gw_rollout_bucket(salt, sizeof(salt), "tiny")); /* stable */
		below[0] += b < 10;
		below[1] += b < 25;
		below[2] += b < 50;
		moved += b != gw_rollout_bucket(salt, sizeof(salt), "tiny-2");
	}
	/* binomial spread, bounds beyond 4.5 standard deviations */
	assert_true(below[0] > 140 && below[0] < 260);
	assert_true(below[1] > 410 && below[1] < 590);
	assert_true(below[2] > 890 && below[2] < 1110);
	/* another model draws other buckets for most tenants */
	assert_true(moved > n * 9 / 10);
}

static void test_inventory(void **state)
{
	json_t *inv = gw_rollout_inventory(ro), *m, *w;
	size_t i;

	(void)state;
	assert_non_null(inv);
	m = json_object_get(json_object_get(inv, "models"), "tiny");
	assert_non_null(m);
	assert_int_equal(json_array_size(json_object_get(m, "workers")), NW);
	assert_false(json_is_true(json_object_get(m, "digest_mismatch")));
	json_array_foreach(json_object_get(m, "workers"), i, w) {
		assert_string_equal(json_string_value(json_object_get(w, "state")), "ready");
		assert_int_equal(strlen(json_string_value(json_object_get(w, "model_sha256"))), 64);
	}
	w = json_array_get(json_object_get(m, "workers"), 2);
	assert_true(json_is_true(json_object_get(json_object_get(w, "last_eval"), "passed")));
	w = json_array_get(json_object_get(m, "workers"), 0);
	assert_true(json_is_null(json_object_get(w, "last_eval")));
	json_decref(inv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_promote_needs_a_passing_eval),
		cmocka_unit_test(test_canary_then_full_then_rollbacks),
		cmocka_unit_test(test_verdict_ends_with_the_connection),
		cmocka_unit_test(test_bucket),
		cmocka_unit_test(test_inventory),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
