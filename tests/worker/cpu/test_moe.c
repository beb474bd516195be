/*
 * test_moe.c - the routing of the CPU mixture of experts (worker/cpu/moe.h):
 * the top k by logit with ties to the lower id, ids in increasing order,
 * weights from the softmax over all experts, renormalised over the chosen
 * ones when the model says so, then scaled; and what the constructor
 * refuses.  The forward pass itself is checked against the double
 * reference in test_backend.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>

#include <cmocka.h>

#include "worker/cpu/moe.h"

static struct wk_hparams hp_of(uint32_t n, uint32_t k, int norm, float scale)
{
	struct wk_hparams hp = { 0 };

	hp.n_embd = 32;
	hp.n_expert = n;
	hp.n_expert_used = k;
	hp.n_ff_exp = 64;
	hp.expert_norm = norm;
	hp.expert_scale = scale;
	return hp;
}

static void test_route_top_k(void **state)
{
	struct wk_hparams hp = hp_of(6, 3, 1, 1.0f);
	const float lg[6] = { 0.5f, 2.0f, -1.0f, 3.0f, 2.0f, 0.0f };
	uint32_t ids[3];
	float w[3], sum = 0;

	(void)state;
	wk_cpu_moe_route(&hp, lg, ids, w);
	/* 3.0 (id 3), then the tie at 2.0: ids 1 and 4 both; increasing order */
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 3);
	assert_int_equal(ids[2], 4);
	for (int j = 0; j < 3; j++)
		sum += w[j];
	assert_true(fabsf(sum - 1.0f) < 1e-6f);
	/* softmax over the chosen logits: e^3 / (e^2 + e^3 + e^2) */
	assert_true(fabsf(w[1] - expf(3) / (2 * expf(2) + expf(3))) < 1e-5f);
	assert_true(w[0] == w[2]);
}

static void test_route_tie_lower_id(void **state)
{
	struct wk_hparams hp = hp_of(4, 1, 1, 1.0f);
	const float lg[4] = { 1.0f, 1.0f, 1.0f, 0.0f };
	uint32_t id;
	float w;

	(void)state;
	wk_cpu_moe_route(&hp, lg, &id, &w);
	assert_int_equal(id, 0);
	assert_true(w == 1.0f);
}

static void test_route_unnormalised_scaled(void **state)
{
	struct wk_hparams hp = hp_of(4, 2, 0, 2.5f);
	const float lg[4] = { 0.0f, 1.0f, 0.0f, 2.0f };
	double z = 2 + expf(1) + expf(2);
	uint32_t ids[2];
	float w[2];

	(void)state;
	wk_cpu_moe_route(&hp, lg, ids, w);
	assert_int_equal(ids[0], 1);
	assert_int_equal(ids[1], 3);
	/* the probabilities over all four experts, times the scale */
	assert_true(fabs(w[0] - 2.5 * expf(1) / z) < 1e-5);
	assert_true(fabs(w[1] - 2.5 * expf(2) / z) < 1e-5);
}

static void test_new_refuses(void **state)
{
	struct wk_hparams dense = hp_of(0, 0, 1, 1.0f), over = hp_of(4, 5, 1, 1.0f);
	struct wk_hparams ok = hp_of(4, 2, 1, 1.0f);
	struct wk_cpu_moe *s = (struct wk_cpu_moe *)&s;

	(void)state;
	assert_int_equal(wk_cpu_moe_new(&dense, &s), CM_EINVAL);
	assert_null(s);
	assert_int_equal(wk_cpu_moe_new(&over, &s), CM_EINVAL);
	assert_int_equal(wk_cpu_moe_new(&ok, &s), CM_OK);
	assert_non_null(s);
	wk_cpu_moe_free(s);
	wk_cpu_moe_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_top_k),
		cmocka_unit_test(test_route_tie_lower_id),
		cmocka_unit_test(test_route_unnormalised_scaled),
		cmocka_unit_test(test_new_refuses),
	};

	return cmocka_run_group_tests_name("worker/moe", tests, NULL, NULL);
}
