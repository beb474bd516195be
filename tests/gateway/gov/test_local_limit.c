/*
 * test_local_limit.c - gateway/gov/local_limit.c: the per-gateway fallback
 * quotas (fraction of the global limits, GCRA RPM, concurrency, both
 * scopes consumed together, table full fails closed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/gov/local_limit.h"

#define SEC 1000000000LL

static struct gw_quota_subject subj(const char *t, const char *c, int64_t trpm,
				    int64_t tconc, int64_t crpm, int64_t cconc)
{
	struct gw_quota_subject s;

	memset(&s, 0, sizeof(s));
	s.tenant = t;
	s.client = c;
	s.tenant_limits.rpm = trpm;
	s.tenant_limits.concurrency = tconc;
	s.client_limits.rpm = crpm;
	s.client_limits.concurrency = cconc;
	return s;
}

static void test_scaled(void **state)
{
	struct gw_local_limit *ll;

	(void)state;
	assert_int_equal(gw_local_limit_new(0, &ll), CM_EINVAL);
	assert_int_equal(gw_local_limit_new(1.5, &ll), CM_EINVAL);
	assert_int_equal(gw_local_limit_new(0.5, &ll), CM_OK);
	assert_int_equal(gw_local_limit_scaled(ll, 0), 0);
	assert_int_equal(gw_local_limit_scaled(ll, 1), 1);
	assert_int_equal(gw_local_limit_scaled(ll, 10), 5);
	gw_local_limit_free(ll);
}

static void test_rpm_gcra(void **state)
{
	struct gw_local_limit *ll;
	struct gw_quota_subject s = subj("t", "c", 20, 0, 0, 0);
	struct gw_quota_verdict v;
	int64_t now = 1000 * SEC;
	int admitted = 0;

	(void)state;
	assert_int_equal(gw_local_limit_new(0.5, &ll), CM_OK);
	for (int i = 0; i < 30; i++) {
		gw_local_limit_admit(ll, &s, now, &v);
		if (v.allowed) {
			admitted++;
			gw_local_limit_finish(ll, &s);
		}
	}
	assert_int_equal(admitted, 10); /* a burst of half of 20 */
	gw_local_limit_admit(ll, &s, now, &v);
	assert_false(v.allowed);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_RPM);
	assert_true(v.retry_after_ms >= 1 && v.retry_after_ms <= 6001);
	/* one emission interval (6 s) later, exactly one more */
	gw_local_limit_admit(ll, &s, now + 6 * SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_finish(ll, &s);
	gw_local_limit_admit(ll, &s, now + 6 * SEC, &v);
	assert_false(v.allowed);
	gw_local_limit_free(ll);
}

static void test_concurrency_both_scopes(void **state)
{
	struct gw_local_limit *ll;
	struct gw_quota_subject a = subj("t", "a", 0, 4, 0, 2);
	struct gw_quota_subject b = subj("t", "b", 0, 4, 0, 0);
	struct gw_quota_verdict v;

	(void)state;
	assert_int_equal(gw_local_limit_new(1, &ll), CM_OK);
	gw_local_limit_admit(ll, &a, SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_admit(ll, &a, SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_admit(ll, &a, SEC, &v);
	assert_false(v.allowed);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_CLIENT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_CONCURRENCY);
	/* the refused request consumed nothing from the tenant */
	gw_local_limit_admit(ll, &b, SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_admit(ll, &b, SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_admit(ll, &b, SEC, &v);
	assert_false(v.allowed);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
	gw_local_limit_finish(ll, &a);
	gw_local_limit_admit(ll, &b, SEC, &v);
	assert_true(v.allowed);
	gw_local_limit_free(ll);
}

static void test_full_table_fails_closed(void **state)
{
	static char names[GW_LOCAL_LIMIT_ENTRIES][16];
	struct gw_local_limit *ll;
	struct gw_quota_verdict v;
	int admitted = 0;

	(void)state;
	assert_int_equal(gw_local_limit_new(1, &ll), CM_OK);
	/* every admitted subject holds two entries (tenant, client) */
	for (int i = 0; i < GW_LOCAL_LIMIT_ENTRIES; i++) {
		struct gw_quota_subject s;

		snprintf(names[i], sizeof(names[i]), "t%d", i);
		s = subj(names[i], "c", 0, 5, 0, 0);
		gw_local_limit_admit(ll, &s, SEC, &v);
		admitted += v.allowed;
	}
	assert_int_equal(admitted, GW_LOCAL_LIMIT_ENTRIES / 2);
	/* idle entries are reused */
	for (int i = 0; i < GW_LOCAL_LIMIT_ENTRIES / 2; i++) {
		struct gw_quota_subject s = subj(names[i], "c", 0, 5, 0, 0);

		gw_local_limit_finish(ll, &s);
	}
	{
		struct gw_quota_subject s = subj("fresh", "c", 0, 5, 0, 0);

		gw_local_limit_admit(ll, &s, SEC, &v);
		assert_true(v.allowed);
	}
	gw_local_limit_free(ll);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scaled),
		cmocka_unit_test(test_rpm_gcra),
		cmocka_unit_test(test_concurrency_both_scopes),
		cmocka_unit_test(test_full_table_fails_closed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
