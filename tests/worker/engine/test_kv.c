/*
 * test_kv.c - KV block manager: allocation, reference counts, prefix cache
 * registration and lookup, LRU eviction, tenant isolation of hashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/engine/kv.h"

static void test_alloc_until_full(void **state)
{
	struct wk_kv *kv = wk_kv_new(4, 16);
	uint32_t b[5];
	struct wk_kv_stats st;

	(void)state;
	assert_non_null(kv);
	for (int i = 0; i < 4; i++)
		assert_int_equal(wk_kv_alloc(kv, &b[i]), CM_OK);
	assert_int_equal(wk_kv_alloc(kv, &b[4]), CM_ELIMIT);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.used, 4);
	assert_int_equal(st.free, 0);
	/* all ids distinct and in range */
	for (int i = 0; i < 4; i++) {
		assert_true(b[i] < 4);
		for (int j = 0; j < i; j++)
			assert_int_not_equal(b[i], b[j]);
	}
	wk_kv_ref(kv, b[0]);
	wk_kv_unref(kv, b[0]);
	assert_int_equal(wk_kv_refcount(kv, b[0]), 1);
	for (int i = 0; i < 4; i++)
		wk_kv_unref(kv, b[i]);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.free, 4);
	assert_int_equal(st.used, 0);
	assert_int_equal(wk_kv_available(kv), 4);
	/* a double release is ignored */
	wk_kv_unref(kv, b[0]);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.free, 4);
	wk_kv_free(kv);
}

static void test_prefix_register_lookup_evict(void **state)
{
	struct wk_kv *kv = wk_kv_new(3, 4);
	uint8_t salt[32] = { 1 }, h0[32], h1[32], h2[32];
	int32_t toks[8] = { 5, 6, 7, 8, 9, 10, 11, 12 };
	uint32_t a, b, c, d, x;
	struct wk_kv_stats st;

	(void)state;
	wk_kv_chain_seed(salt, h0);
	wk_kv_chain_next(h0, toks, 4, h1);
	wk_kv_chain_next(h1, toks + 4, 4, h2);
	assert_int_equal(wk_kv_alloc(kv, &a), CM_OK);
	assert_int_equal(wk_kv_alloc(kv, &b), CM_OK);
	assert_int_equal(wk_kv_register(kv, a, h1), CM_OK);
	assert_int_equal(wk_kv_register(kv, b, h2), CM_OK);
	assert_int_equal(wk_kv_register(kv, b, h2), CM_EINVAL); /* once */
	/* a second sequence computing the same block gets EEXIST */
	assert_int_equal(wk_kv_alloc(kv, &c), CM_OK);
	assert_int_equal(wk_kv_register(kv, c, h1), CM_EEXIST);
	wk_kv_unref(kv, c);
	/* release: registered blocks become cached, not free */
	wk_kv_unref(kv, a);
	wk_kv_unref(kv, b);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.cached, 2);
	assert_int_equal(st.free, 1);
	/* lookup takes a reference and leaves the LRU */
	x = wk_kv_lookup(kv, h1);
	assert_int_equal(x, a);
	assert_int_equal(wk_kv_refcount(kv, a), 1);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.cached, 1);
	assert_int_equal(st.hits, 1);
	wk_kv_unref(kv, a); /* a is now the most recently used cached block */
	/* need 3 blocks: free one, then evict LRU (b), then a */
	assert_int_equal(wk_kv_alloc(kv, &c), CM_OK);
	assert_int_equal(wk_kv_alloc(kv, &d), CM_OK);
	assert_int_equal(d, b);
	assert_int_equal(wk_kv_lookup(kv, h2), WK_KV_NONE); /* evicted */
	assert_int_equal(wk_kv_lookup(kv, h1), a);          /* still cached */
	wk_kv_stats(kv, &st);
	assert_int_equal(st.evictions, 1);
	wk_kv_free(kv);
}

static void test_tenant_isolation_of_chain(void **state)
{
	uint8_t s1[32], s2[32], a0[32], b0[32], a1[32], b1[32], a1b[32];
	int32_t toks[16];

	(void)state;
	memset(s1, 0x11, 32);
	memset(s2, 0x22, 32);
	for (int i = 0; i < 16; i++)
		toks[i] = i * 31;
	wk_kv_chain_seed(s1, a0);
	wk_kv_chain_seed(s2, b0);
	wk_kv_chain_next(a0, toks, 16, a1);
	wk_kv_chain_next(b0, toks, 16, b1);
	wk_kv_chain_next(a0, toks, 16, a1b);
	assert_memory_not_equal(a1, b1, 32);
	assert_memory_equal(a1, a1b, 32);
	/* the same tokens after a different prefix hash differently */
	wk_kv_chain_next(a1, toks, 16, b1);
	assert_memory_not_equal(a1, b1, 32);
}

static void test_many_entries_and_flush(void **state)
{
	enum { N = 1000 };
	struct wk_kv *kv = wk_kv_new(N, 16);
	uint8_t h[32], seed[32] = { 0 };
	uint32_t ids[N];
	struct wk_kv_stats st;

	(void)state;
	wk_kv_chain_seed(seed, h);
	for (int i = 0; i < N; i++) {
		int32_t t = i;

		assert_int_equal(wk_kv_alloc(kv, &ids[i]), CM_OK);
		wk_kv_chain_next(h, &t, 1, h);
		assert_int_equal(wk_kv_register(kv, ids[i], h), CM_OK);
	}
	for (int i = 0; i < N; i++)
		wk_kv_unref(kv, ids[i]);
	/* every entry still findable (probe chains intact after removals) */
	wk_kv_chain_seed(seed, h);
	for (int i = 0; i < N; i++) {
		int32_t t = i;
		uint32_t id;

		wk_kv_chain_next(h, &t, 1, h);
		id = wk_kv_lookup(kv, h);
		assert_int_equal(id, ids[i]);
		if (i % 2 == 0) {
			/* evict half of them through allocation pressure later */
		}
		wk_kv_unref(kv, id);
	}
	wk_kv_flush_cache(kv);
	wk_kv_stats(kv, &st);
	assert_int_equal(st.free, N);
	assert_int_equal(st.cached, 0);
	wk_kv_free(kv);
}

static void test_new_alloc_failure(void **state)
{
	(void)state;
	for (long n = 0; n < 4; n++) {
		cm_alloc_fail_after(n);
		struct wk_kv *kv = wk_kv_new(8, 16);

		cm_alloc_fail_reset();
		if (kv)
			wk_kv_free(kv);
	}
	assert_null(wk_kv_new(0, 16));
	wk_kv_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_until_full),
		cmocka_unit_test(test_prefix_register_lookup_evict),
		cmocka_unit_test(test_tenant_isolation_of_chain),
		cmocka_unit_test(test_many_entries_and_flush),
		cmocka_unit_test(test_new_alloc_failure),
	};

	return cmocka_run_group_tests_name("worker/kv", tests, NULL, NULL);
}
