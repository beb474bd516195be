/*
 * test_misc.c - status names, arena, huge-page and aligned allocations, clock, crypto
 * (known-answer vectors), secret files, UTF-8 validation and log record
 * format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/secret.h"
#include "common/log.h"
#include "common/status.h"
#include "common/utf8.h"

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(cm_status_str(CM_OK), "ok");
	assert_string_equal(cm_status_str(CM_ELIMIT), "limit exceeded");
	assert_string_equal(cm_status_str((enum cm_status)-999), "unknown status");
	for (int s = CM_EINTERNAL; s <= CM_AGAIN; s++)
		assert_string_not_equal(cm_status_str((enum cm_status)s),
					"unknown status");
}

static void test_arena(void **state)
{
	struct cm_arena *a = cm_arena_new(1024, 4096);
	char *p, *q;

	(void)state;
	assert_non_null(a);
	p = cm_arena_alloc(a, 10);
	q = cm_arena_alloc(a, 3000); /* bigger than a chunk: own chunk */
	assert_non_null(p);
	assert_non_null(q);
	assert_int_equal((uintptr_t)p % 16, 0);
	assert_int_equal((uintptr_t)q % 16, 0);
	memset(q, 'x', 3000);
	assert_null(cm_arena_alloc(a, 2000)); /* over the 4096 cap */
	assert_string_equal(cm_arena_strndup(a, "hello world", 5), "hello");
	cm_arena_reset(a);
	assert_int_equal(cm_arena_used(a), 0);
	assert_non_null(cm_arena_alloc(a, 4000));
	assert_null(cm_arena_alloc(a, (size_t)-1));
	cm_arena_free(a);
	cm_arena_free(NULL);
}

/* cm_huge_alloc: 2 MiB-aligned, zero-filled, writable to the last byte,
 * freed with its size; an injected failure returns NULL. */
static void test_huge_alloc(void **state)
{
	(void)state;
	const size_t sizes[] = { 1, 4096, (size_t)2 << 20, ((size_t)5 << 20) + 3 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *p = cm_huge_alloc(sizes[i]);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % ((uintptr_t)2 << 20), 0);
		assert_int_equal(p[0], 0);
		assert_int_equal(p[sizes[i] - 1], 0);
		memset(p, 0xa5, sizes[i]);
		assert_int_equal(p[sizes[i] - 1], 0xa5);
		cm_huge_free(p, sizes[i]);
	}
	cm_huge_free(NULL, 10);
	assert_null(cm_huge_alloc(SIZE_MAX - 4096));
	cm_alloc_fail_after(0);
	assert_null(cm_huge_alloc(4096));
	assert_int_equal(cm_alloc_failed_count(), 1);
	cm_alloc_fail_reset();
}

/* cm_calloc_aligned: 64-byte aligned and zeroed for small and large (mmap)
 * sizes, freed with cm_free; overflow and an injected failure give NULL. */
static void test_calloc_aligned(void **state)
{
	(void)state;
	const size_t counts[] = { 0, 1, 17, 4096, (size_t)1 << 20 };
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		float *p = cm_calloc_aligned(counts[i], sizeof(float));
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 64, 0);
		for (size_t k = 0; k < counts[i]; k++)
			assert_true(p[k] == 0.0f);
		cm_free(p);
	}
	assert_null(cm_calloc_aligned(SIZE_MAX / 2, 4));
	cm_alloc_fail_after(0);
	assert_null(cm_calloc_aligned(16, 4));
	assert_int_equal(cm_alloc_failed_count(), 1);
	cm_alloc_fail_reset();
}

static void test_clock(void **state)
{
	int64_t a = cm_mono_ns(), b = cm_mono_ns();
	char iso[32];

	(void)state;
	assert_true(b >= a);
	cm_wall_iso8601(1700000000123LL * CM_NS_PER_MS, iso);
	assert_string_equal(iso, "2023-11-14T22:13:20.123Z");
}

static void test_sha256_vectors(void **state)
{
	uint8_t d[32];
	char hex[65];

	(void)state;
	cm_sha256("abc", 3, d);
	cm_hex_encode(d, 32, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* RFC 4231 test case 2 */
	cm_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
	cm_hex_encode(d, 32, hex);
	assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void test_sha256_incremental_and_file(void **state)
{
	char path[] = "/tmp/sluice-test-sha-XXXXXX";
	int fd = mkstemp(path);
	uint8_t d1[32], d2[32], d3[32];
	struct cm_sha256_ctx *c;
	static char data[3000000];

	(void)state;
	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	assert_int_equal(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	close(fd);
	cm_sha256(data, sizeof(data), d1);
	c = cm_sha256_new();
	cm_sha256_update(c, data, 1000);
	cm_sha256_update(c, data + 1000, sizeof(data) - 1000);
	cm_sha256_final(c, d2);
	assert_int_equal(cm_sha256_file(path, d3), CM_OK);
	assert_memory_equal(d1, d2, 32);
	assert_memory_equal(d1, d3, 32);
	unlink(path);
	assert_int_equal(cm_sha256_file(path, d3), CM_ENOTFOUND);
}

static void test_random_ct_hex(void **state)
{
	uint8_t a[32], b[32], back[4];

	(void)state;
	assert_int_equal(cm_random_bytes(a, sizeof(a)), CM_OK);
	assert_int_equal(cm_random_bytes(b, sizeof(b)), CM_OK);
	assert_memory_not_equal(a, b, 32);
	assert_true(cm_ct_equal(a, a, 32));
	assert_false(cm_ct_equal(a, b, 32));
	assert_int_equal(cm_hex_decode("00ffA0b1", 8, back, 4), CM_OK);
	assert_int_equal(back[1], 0xff);
	assert_int_equal(back[2], 0xa0);
	assert_int_equal(cm_hex_decode("00ffA0bz", 8, back, 4), CM_EFORMAT);
	assert_int_equal(cm_hex_decode("00ff", 4, back, 4), CM_EFORMAT);
}

static void test_utf8(void **state)
{
	uint8_t enc[4];
	uint32_t cp;

	(void)state;
	assert_true(cm_utf8_valid("hello", 5));
	assert_true(cm_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
	assert_false(cm_utf8_valid("\xc0\xaf", 2));         /* overlong */
	assert_false(cm_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
	assert_false(cm_utf8_valid("\xf4\x90\x80\x80", 4)); /* > U+10FFFF */
	assert_false(cm_utf8_valid("\xe2\x82", 2));         /* truncated */
	assert_false(cm_utf8_valid("\x80", 1));             /* lone continuation */
	assert_false(cm_utf8_valid("\xff", 1));
	assert_true(cm_utf8_has_nul("a\0b", 3));
	assert_int_equal(cm_utf8_encode(0x1F600, enc), 4);
	assert_memory_equal(enc, "\xf0\x9f\x98\x80", 4);
	assert_int_equal(cm_utf8_encode(0xD800, enc), 0);
	assert_int_equal(cm_utf8_decode((const uint8_t *)"\xe2\x82\xac", 3, &cp), 3);
	assert_int_equal(cp, 0x20AC);
	/* streaming: an incomplete tail is held back, an invalid one is not */
	assert_int_equal(cm_utf8_complete_prefix((const uint8_t *)"ab\xe2\x82", 4), 2);
	assert_int_equal(cm_utf8_complete_prefix((const uint8_t *)"ab\xf0", 3), 2);
	assert_int_equal(cm_utf8_complete_prefix((const uint8_t *)"ab\xe2\x82\xac", 5), 5);
	assert_int_equal(cm_utf8_complete_prefix((const uint8_t *)"ab\xff", 3), 3);
	assert_int_equal(cm_utf8_complete_prefix((const uint8_t *)"ab\xe0\x80", 4), 4);
}

static void test_log_json_lines(void **state)
{
	int fds[2];
	char out[8192];
	ssize_t n;
	struct cm_log_rec r;
	json_t *j;
	json_error_t err;
	char big[6000];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	cm_log_setup(CM_LOG_INFO, fds[1], "test");
	cm_log_begin(&r, CM_LOG_INFO, "request_done");
	cm_log_str(&r, "tenant", "eng\"team\n");
	cm_log_u64(&r, "tokens", 42);
	cm_log_f64(&r, "ratio", 0.5);
	cm_log_bool(&r, "ok", 1);
	cm_log_end(&r);
	n = read(fds[0], out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = '\0';
	assert_int_equal(out[n - 1], '\n');
	j = json_loads(out, 0, &err);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "tenant")), "eng\"team\n");
	assert_int_equal(json_integer_value(json_object_get(j, "tokens")), 42);
	assert_string_equal(json_string_value(json_object_get(j, "level")), "info");
	assert_string_equal(json_string_value(json_object_get(j, "comp")), "test");
	json_decref(j);

	/* below the level: nothing written */
	cm_logf(CM_LOG_DEBUG, "noise", "x=%d", 1);
	/* an over-long record is truncated but still one valid JSON line */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cm_log_begin(&r, CM_LOG_WARN, "big");
	cm_log_str(&r, "v", big);
	cm_log_end(&r);
	n = read(fds[0], out, sizeof(out) - 1);
	out[n] = '\0';
	j = json_loads(out, 0, &err);
	assert_non_null(j);
	assert_true(json_is_true(json_object_get(j, "trunc")));
	assert_string_equal(json_string_value(json_object_get(j, "event")), "big");
	json_decref(j);
	close(fds[0]);
	close(fds[1]);
	cm_log_setup(CM_LOG_INFO, 2, "test");
}

/* Writes `data` (n bytes) to dir/name with `mode`; the path in path[256]. */
static void secret_file(const char *dir, const char *name, const char *data, size_t n,
			mode_t mode, char path[256])
{
	FILE *f;

	snprintf(path, 256, "%s/%s", dir, name);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_secret_read(void **state)
{
	char dir[] = "/tmp/sluice-secret-XXXXXX", path[256], err[512];
	uint8_t buf[8];
	size_t len = 99;

	(void)state;
	assert_non_null(mkdtemp(dir));
	secret_file(dir, "a", "hunter2\n", 8, 0600, path);
	assert_int_equal(cm_secret_read(path, "test secret", buf, sizeof(buf), &len, err,
					 sizeof(err)), CM_OK);
	assert_int_equal(len, 7);
	assert_memory_equal(buf, "hunter2", 7);
	/* CRLF dropped; exactly cap bytes with and without a newline */
	secret_file(dir, "b", "abc\r\n", 5, 0400, path);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)), CM_OK);
	assert_int_equal(len, 3);
	secret_file(dir, "c", "12345678\n", 9, 0600, path);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)), CM_OK);
	assert_int_equal(len, 8);
	secret_file(dir, "d", "12345678", 8, 0600, path);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)), CM_OK);
	assert_int_equal(len, 8);
	/* longer than cap: refused, the message names the file, not the bytes */
	secret_file(dir, "e", "123456789", 9, 0600, path);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)),
			 CM_EFORMAT);
	assert_non_null(strstr(err, "expected at most 8 bytes"));
	assert_null(strstr(err, "1234"));
	secret_file(dir, "f", "12345678\n\n", 10, 0600, path);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)),
			 CM_EFORMAT);
	/* readable by others: refused with the mode and the fix */
	secret_file(dir, "g", "hunter2\n", 8, 0644, path);
	assert_int_equal(cm_secret_read(path, "test secret", buf, sizeof(buf), &len, err,
					 sizeof(err)), CM_EPERM);
	assert_non_null(strstr(err, "test secret"));
	assert_non_null(strstr(err, "mode 0644"));
	assert_non_null(strstr(err, "chmod 600"));
	assert_null(strstr(err, "hunter2"));
	/* group read: a root-owned file only (a Kubernetes secret with fsGroup) */
	secret_file(dir, "g", "hunter2\n", 8, 0440, path);
	if (geteuid() == 0) {
		assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err,
						 sizeof(err)), CM_OK);
		assert_int_equal(len, 7);
		assert_int_equal(chown(path, 65534, 65534), 0);
	}
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)),
			 CM_EPERM);
	assert_non_null(strstr(err, "mode 0440"));
	/* missing; a directory */
	snprintf(path, sizeof(path), "%s/none", dir);
	assert_int_equal(cm_secret_read(path, "t", buf, sizeof(buf), &len, err, sizeof(err)),
			 CM_ENOTFOUND);
	assert_int_equal(cm_secret_read(dir, "t", buf, sizeof(buf), &len, err, sizeof(err)),
			 CM_EFORMAT);
	assert_non_null(strstr(err, "regular file"));
	for (const char *n = "abcdefg"; *n; n++) {
		snprintf(path, sizeof(path), "%s/%c", dir, *n);
		unlink(path);
	}
	rmdir(dir);
}

/*
 * Issue 13, finding 17: a pepper file that is a FIFO hung start-up (open
 * waits for a writer).  Secrets, configuration files and files to hash
 * are refused when they are not regular files, at once (an alarm fails
 * the test if anything waits).
 */
static void test_fifo_refused(void **state)
{
	char dir[] = "/tmp/sluice-fifo-XXXXXX", path[256], err[512];
	uint8_t buf[64], digest[CM_SHA256_LEN];
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10);
	assert_int_equal(cm_secret_read(path, "pepper file", buf, sizeof(buf), &len, err,
					 sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "regular file"));
	assert_int_equal(cm_sha256_file(path, digest), CM_EFORMAT);
	alarm(0);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_names),
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_huge_alloc),
		cmocka_unit_test(test_calloc_aligned),
		cmocka_unit_test(test_clock),
		cmocka_unit_test(test_sha256_vectors),
		cmocka_unit_test(test_sha256_incremental_and_file),
		cmocka_unit_test(test_random_ct_hex),
		cmocka_unit_test(test_secret_read),
		cmocka_unit_test(test_fifo_refused),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_log_json_lines),
	};

	return cmocka_run_group_tests_name("common/misc", tests, NULL, NULL);
}
