/*
 * test_cuda_probe.c - worker/cuda/probe.cu: with a device, the probe finds
 * it, names it and creates a cuBLAS handle; twice in a row (the handle is
 * destroyed each time).  With no device or driver the whole test is
 * skipped (exit 77), which ctest reports as "Not Run" rather than passed.
 * Built only when CUDA is enabled; label `gpu`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "worker/cuda/probe.h"

static void test_probe_finds_device(void **state)
{
	char desc[512];

	(void)state;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(wk_cuda_probe(desc, sizeof(desc)), CM_OK);
		assert_non_null(strstr(desc, "device(s); 0: "));
		assert_non_null(strstr(desc, "cuBLAS "));
	}
	printf("%s\n", desc);
}

static void test_probe_small_buffer(void **state)
{
	char desc[8];

	(void)state;
	memset(desc, 'x', sizeof(desc));
	assert_int_equal(wk_cuda_probe(desc, sizeof(desc)), CM_OK);
	assert_int_equal(desc[7], '\0');
	assert_int_equal(strlen(desc), 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_finds_device),
		cmocka_unit_test(test_probe_small_buffer),
	};
	char desc[512];
	enum cm_status st = wk_cuda_probe(desc, sizeof(desc));

	if (st == CM_ENOTFOUND) {
		printf("skipped: %s\n", desc);
		return 77;
	}
	return cmocka_run_group_tests_name("worker/cuda/probe", tests, NULL,
					   NULL);
}
