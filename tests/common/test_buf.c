/*
 * test_buf.c - cm_buf: caps, FIFO use, little-endian puts, take, and
 * allocation failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"

static void test_append_within_cap(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 8);
	assert_int_equal(cm_buf_append(&b, "abcd", 4), CM_OK);
	assert_int_equal(cm_buf_append(&b, "efgh", 4), CM_OK);
	assert_int_equal(cm_buf_len(&b), 8);
	assert_string_equal((char *)cm_buf_data(&b), "abcdefgh");
	/* one more byte is over the cap and changes nothing */
	assert_int_equal(cm_buf_append(&b, "i", 1), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 8);
	assert_string_equal((char *)cm_buf_data(&b), "abcdefgh");
	cm_buf_deinit(&b);
}

static void test_fifo_consume_and_compact(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 100);
	for (int round = 0; round < 1000; round++) {
		assert_int_equal(cm_buf_printf(&b, "%03d", round % 1000), CM_OK);
		if (cm_buf_len(&b) > 60)
			cm_buf_consume(&b, 30);
	}
	assert_true(cm_buf_len(&b) <= 63);
	/* the last thing written is at the end */
	assert_memory_equal(cm_buf_data(&b) + cm_buf_len(&b) - 3, "999", 3);
	cm_buf_consume(&b, cm_buf_len(&b) + 5);
	assert_int_equal(cm_buf_len(&b), 0);
	cm_buf_deinit(&b);
}

static void test_le_puts(void **state)
{
	struct cm_buf b;
	const uint8_t *d;

	(void)state;
	cm_buf_init(&b, 64);
	assert_int_equal(cm_buf_put_u8(&b, 0xAB), CM_OK);
	assert_int_equal(cm_buf_put_u16(&b, 0x1234), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, 0xDEADBEEF), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0x0102030405060708ULL), CM_OK);
	d = cm_buf_data(&b);
	assert_int_equal(d[0], 0xAB);
	assert_int_equal(cm_le16(d + 1), 0x1234);
	assert_int_equal(d[1], 0x34);
	assert_int_equal(cm_le32(d + 3), 0xDEADBEEF);
	assert_int_equal(d[3], 0xEF);
	assert_true(cm_le64(d + 7) == 0x0102030405060708ULL);
	assert_int_equal(d[7], 0x08);
	cm_buf_deinit(&b);
}

static void test_printf_over_cap(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 10);
	assert_int_equal(cm_buf_printf(&b, "%s", "0123456789x"), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 0);
	cm_buf_deinit(&b);
}

static void test_take(void **state)
{
	struct cm_buf b;
	size_t n;
	char *s;

	(void)state;
	cm_buf_init(&b, 64);
	assert_int_equal(cm_buf_append_str(&b, "xxhello"), CM_OK);
	cm_buf_consume(&b, 2);
	s = cm_buf_take(&b, &n);
	assert_non_null(s);
	assert_int_equal(n, 5);
	assert_string_equal(s, "hello");
	assert_int_equal(cm_buf_len(&b), 0);
	cm_free(s);
	cm_buf_deinit(&b);
}

static void test_alloc_failure(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 1024);
	cm_alloc_fail_after(0);
	assert_int_equal(cm_buf_append(&b, "abc", 3), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(cm_buf_append(&b, "abc", 3), CM_OK);
	cm_buf_deinit(&b);
	cm_buf_deinit(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_append_within_cap),
		cmocka_unit_test(test_fifo_consume_and_compact),
		cmocka_unit_test(test_le_puts),
		cmocka_unit_test(test_printf_over_cap),
		cmocka_unit_test(test_take),
		cmocka_unit_test(test_alloc_failure),
	};

	return cmocka_run_group_tests_name("common/buf", tests, NULL, NULL);
}
