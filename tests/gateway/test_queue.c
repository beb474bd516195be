/*
 * test_queue.c - gateway/queue.c: weighted deficit round robin shares,
 * interactive-over-batch priority, FIFO order, tenant and global bounds,
 * queue timeout (one per class), removal of a departed client, Retry-After
 * arithmetic and the wait estimate, which a pop put back leaves alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/queue.h"

#define MS 1000000LL

struct item {
	struct gw_queue_item qi; /* first: the cast below relies on it */
	const char *tenant;
	int n;
};

static struct gw_queue *mkq(uint32_t tmax, uint32_t gmax, int64_t timeout_ms)
{
	struct gw_queue_config c = { tmax, gmax, timeout_ms * MS };
	struct gw_queue *q;

	assert_int_equal(gw_queue_new(&c, &q), CM_OK);
	return q;
}

static enum gw_queue_verdict push(struct gw_queue *q, struct item *it, const char *t,
				  uint32_t w, enum gw_queue_class k, int64_t now)
{
	enum gw_queue_verdict v;

	it->tenant = t;
	assert_int_equal(gw_queue_push(q, t, w, UINT32_MAX, k, &it->qi, now, &v), CM_OK);
	return v;
}

static void test_wdrr_shares(void **state)
{
	static struct item a[200], b[200], c[200];
	struct gw_queue *q = mkq(1000, 10000, 60000);
	int na = 0, nb = 0, nc = 0;

	(void)state;
	for (int i = 0; i < 200; i++) {
		assert_int_equal(push(q, &a[i], "a", 3, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
		assert_int_equal(push(q, &b[i], "b", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
		assert_int_equal(push(q, &c[i], "c", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
	}
	/* 100 dispatches: shares 3:1:1 exactly over whole rounds (5 per round) */
	for (int i = 0; i < 100; i++) {
		struct item *it = (struct item *)gw_queue_pop(q, i * MS);

		assert_non_null(it);
		na += strcmp(it->tenant, "a") == 0;
		nb += strcmp(it->tenant, "b") == 0;
		nc += strcmp(it->tenant, "c") == 0;
	}
	assert_int_equal(na, 60);
	assert_int_equal(nb, 20);
	assert_int_equal(nc, 20);
	assert_int_equal(gw_queue_depth(q), 500);
	gw_queue_free(q);
}

static void test_fifo_within_tenant_and_idle_tenant(void **state)
{
	static struct item a[10], b[1];
	struct gw_queue *q = mkq(100, 100, 60000);
	struct item *it;

	(void)state;
	for (int i = 0; i < 10; i++) {
		a[i].n = i;
		push(q, &a[i], "a", 1, GW_QUEUE_INTERACTIVE, 0);
	}
	/* a tenant arriving later gets its turn within one round */
	it = (struct item *)gw_queue_pop(q, 0);
	assert_int_equal(it->n, 0);
	push(q, &b[0], "b", 1, GW_QUEUE_INTERACTIVE, 0);
	it = (struct item *)gw_queue_pop(q, 0);
	assert_string_equal(it->tenant, "b");
	for (int i = 1; i < 10; i++) {
		it = (struct item *)gw_queue_pop(q, 0);
		assert_int_equal(it->n, i);
	}
	assert_null(gw_queue_pop(q, 0));
	gw_queue_free(q);
}

static void test_interactive_before_batch(void **state)
{
	static struct item batch[64], chat;
	struct gw_queue *q = mkq(1000, 1000, 60000);
	struct item *it;

	(void)state;
	for (int i = 0; i < 64; i++)
		assert_int_equal(push(q, &batch[i], "night", 1000, GW_QUEUE_BATCH, 0), GW_QUEUE_OK);
	assert_int_equal(push(q, &chat, "chat", 1, GW_QUEUE_INTERACTIVE, 1), GW_QUEUE_OK);
	it = (struct item *)gw_queue_pop(q, 2);
	assert_ptr_equal(it, &chat);
	for (int i = 0; i < 64; i++) {
		it = (struct item *)gw_queue_pop(q, 3);
		assert_ptr_equal(it, &batch[i]);
	}
	assert_null(gw_queue_pop(q, 4));
	gw_queue_free(q);
}

static void test_bounds(void **state)
{
	static struct item it[10];
	struct gw_queue *q = mkq(3, 5, 60000);
	enum gw_queue_verdict v;

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(push(q, &it[i], "a", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
	/* both classes count against the tenant bound */
	assert_int_equal(push(q, &it[3], "a", 1, GW_QUEUE_BATCH, 0), GW_QUEUE_TENANT_FULL);
	assert_int_equal(push(q, &it[4], "b", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
	assert_int_equal(push(q, &it[5], "b", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
	assert_int_equal(push(q, &it[6], "c", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_GLOBAL_FULL);
	assert_int_equal(gw_queue_depth(q), 5);
	assert_int_equal(gw_queue_tenant_depth(q, "a"), 3);
	/* a per-tenant override (the tenant record's `queue`) of 0 refuses */
	assert_int_equal(gw_queue_push(q, "d", 1, 0, GW_QUEUE_INTERACTIVE, &it[7].qi, 0, &v), CM_OK);
	assert_int_equal(v, GW_QUEUE_TENANT_FULL);
	/* removal (client gone) frees the place */
	gw_queue_remove(q, &it[0].qi);
	gw_queue_remove(q, &it[0].qi); /* idempotent */
	assert_int_equal(gw_queue_tenant_depth(q, "a"), 2);
	assert_int_equal(push(q, &it[8], "c", 1, GW_QUEUE_INTERACTIVE, 0), GW_QUEUE_OK);
	gw_queue_free(q);
}

static void test_timeout(void **state)
{
	static struct item it[3];
	struct gw_queue *q = mkq(10, 10, 100);

	(void)state;
	push(q, &it[0], "a", 1, GW_QUEUE_INTERACTIVE, 0);
	push(q, &it[1], "b", 1, GW_QUEUE_BATCH, 50 * MS);
	push(q, &it[2], "a", 1, GW_QUEUE_INTERACTIVE, 60 * MS);
	assert_int_equal(gw_queue_next_expiry_ns(q, 10 * MS), 90 * MS);
	assert_null(gw_queue_pop_expired(q, 99 * MS));
	assert_ptr_equal(gw_queue_pop_expired(q, 100 * MS), &it[0].qi);
	assert_null(gw_queue_pop_expired(q, 100 * MS));
	assert_ptr_equal(gw_queue_pop_expired(q, 200 * MS), &it[1].qi);
	assert_ptr_equal(gw_queue_pop_expired(q, 200 * MS), &it[2].qi);
	assert_int_equal(gw_queue_depth(q), 0);
	assert_true(gw_queue_next_expiry_ns(q, 0) == INT64_MAX);
	gw_queue_free(q);
}

static void test_retry_after(void **state)
{
	static struct item it[40];
	struct gw_queue *q = mkq(100, 100, 60000);

	(void)state;
	/* nothing measured: one second per position, clamped */
	assert_int_equal(gw_queue_retry_after_s(q, 0), 1);
	assert_int_equal(gw_queue_retry_after_s(q, 7), 7);
	assert_int_equal(gw_queue_retry_after_s(q, 100000), GW_QUEUE_RETRY_MAX_S);
	for (int i = 0; i < 40; i++)
		push(q, &it[i], "a", 1, GW_QUEUE_INTERACTIVE, 0);
	/* one dispatch every 250 ms: 4 per second */
	for (int i = 0; i < 40; i++)
		assert_non_null(gw_queue_pop(q, i * 250 * MS));
	assert_true(gw_queue_drain_rate(q) > 3.99 && gw_queue_drain_rate(q) < 4.01);
	assert_int_equal(gw_queue_retry_after_s(q, 4), 1);
	assert_int_equal(gw_queue_retry_after_s(q, 5), 2);
	assert_int_equal(gw_queue_retry_after_s(q, 40), 10);
	gw_queue_free(q);
}

static void test_unpop(void **state)
{
	static struct item a[3];
	struct gw_queue *q = mkq(10, 10, 60000);
	struct gw_queue_item *x;

	(void)state;
	for (int i = 0; i < 3; i++) {
		a[i].n = i;
		push(q, &a[i], "a", 1, GW_QUEUE_INTERACTIVE, 0);
	}
	x = gw_queue_pop(q, 0);
	gw_queue_unpop(q, x); /* no worker could take it: it stays first */
	assert_ptr_equal(gw_queue_pop(q, 0), &a[0].qi);
	assert_ptr_equal(gw_queue_pop(q, 0), &a[1].qi);
	gw_queue_free(q);
}

static void test_class_timeout(void **state)
{
	static struct item it[3];
	struct gw_queue *q = mkq(10, 10, 1000);

	(void)state;
	/* gateway.slo: interactive work may wait 100 ms, batch the 1 s */
	gw_queue_set_timeout(q, GW_QUEUE_INTERACTIVE, 100 * MS);
	assert_true(gw_queue_timeout(q, GW_QUEUE_INTERACTIVE) == 100 * MS);
	assert_true(gw_queue_timeout(q, GW_QUEUE_BATCH) == 1000 * MS);
	push(q, &it[0], "a", 1, GW_QUEUE_BATCH, 0);
	push(q, &it[1], "a", 1, GW_QUEUE_INTERACTIVE, 10 * MS);
	push(q, &it[2], "b", 1, GW_QUEUE_INTERACTIVE, 20 * MS);
	assert_int_equal(gw_queue_class_depth(q, GW_QUEUE_INTERACTIVE), 2);
	assert_int_equal(gw_queue_class_depth(q, GW_QUEUE_BATCH), 1);
	/* the interactive deadline (110 ms) comes before the older batch one */
	assert_true(gw_queue_next_expiry_ns(q, 0) == 110 * MS);
	assert_null(gw_queue_pop_expired(q, 109 * MS));
	assert_ptr_equal(gw_queue_pop_expired(q, 110 * MS), &it[1].qi);
	assert_ptr_equal(gw_queue_pop_expired(q, 500 * MS), &it[2].qi);
	assert_null(gw_queue_pop_expired(q, 999 * MS));
	assert_int_equal(gw_queue_class_depth(q, GW_QUEUE_INTERACTIVE), 0);
	assert_ptr_equal(gw_queue_pop_expired(q, 1000 * MS), &it[0].qi);
	assert_int_equal(gw_queue_class_depth(q, GW_QUEUE_BATCH), 0);
	gw_queue_free(q);
}

static void test_wait_estimate(void **state)
{
	static struct item it[8];
	struct gw_queue *q = mkq(10, 10, 60000);
	struct gw_queue_item *x;

	(void)state;
	for (int i = 0; i < 8; i++)
		push(q, &it[i], "a", 1, GW_QUEUE_INTERACTIVE, 0);
	assert_true(gw_queue_wait_estimate_ns(q, 3) == -1); /* nothing measured */
	for (int i = 0; i < 4; i++)
		assert_non_null(gw_queue_pop(q, i * 40 * MS)); /* every 40 ms */
	assert_true(gw_queue_wait_estimate_ns(q, 3) == 120 * MS);
	/* a pop 1 ms later that no worker could take is no dispatch: the
	 * estimate stays (it used to count as one, and an arrival burst
	 * made the service look fast) */
	x = gw_queue_pop(q, 121 * MS);
	gw_queue_unpop(q, x);
	assert_true(gw_queue_wait_estimate_ns(q, 3) == 120 * MS);
	assert_int_equal(gw_queue_class_depth(q, GW_QUEUE_INTERACTIVE), 4);
	/* the real dispatch 40 ms after the last one */
	assert_ptr_equal(gw_queue_pop(q, 160 * MS), x);
	assert_true(gw_queue_wait_estimate_ns(q, 1) == 40 * MS);
	gw_queue_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wdrr_shares),
		cmocka_unit_test(test_fifo_within_tenant_and_idle_tenant),
		cmocka_unit_test(test_interactive_before_batch),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_retry_after),
		cmocka_unit_test(test_unpop),
		cmocka_unit_test(test_class_timeout),
		cmocka_unit_test(test_wait_estimate),
	};

	return cmocka_run_group_tests_name("gateway/queue", tests, NULL, NULL);
}
