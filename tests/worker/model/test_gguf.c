/*
 * test_gguf.c - the GGUF reader and writer: round trips of every value
 * type and tensor type, and crafted bad files that must each give a clear
 * error (asserted by message substring), never a crash.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "worker/model/gguf.h"
#include "tools/gguf_write.h"

/* ---- helpers ---- */

static uint8_t *write_mem(struct wk_gguf_writer *w, size_t *len)
{
	uint8_t *buf = NULL;

	assert_int_equal(wk_gguf_writer_write_mem(w, &buf, len), CM_OK);
	assert_non_null(buf);
	return buf;
}

/* Opens a private exact-size copy (so that ASan sees over-reads). */
static enum cm_status open_copy(const uint8_t *data, size_t len, struct wk_gguf **g,
				char *err, size_t err_len)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum cm_status st;

	assert_non_null(copy);
	memcpy(copy, data, len);
	st = wk_gguf_open_mem(copy, len, g, err, err_len);
	if (st == CM_OK) {
		/* walk everything while the copy is alive */
		for (uint64_t i = 0; i < wk_gguf_n_tensors(*g); i++) {
			const struct wk_gguf_tensor *t = wk_gguf_tensor(*g, i);
			volatile uint8_t x = ((const uint8_t *)t->data)[t->n_bytes - 1];

			(void)x;
		}
		wk_gguf_close(*g);
		*g = NULL;
	}
	free(copy);
	return st;
}

static void expect_error(const uint8_t *data, size_t len, const char *substr)
{
	struct wk_gguf *g = NULL;
	char err[512] = "";
	enum cm_status st = open_copy(data, len, &g, err, sizeof(err));

	if (st == CM_OK || !strstr(err, substr))
		fail_msg("expected an error containing \"%s\", got status %d: \"%s\"", substr,
			 st, err);
	assert_null(g);
}

static void expect_writer_error(struct wk_gguf_writer *w, const char *substr)
{
	size_t len;
	uint8_t *buf = write_mem(w, &len);

	expect_error(buf, len, substr);
	cm_free(buf);
	wk_gguf_writer_free(w);
}

static struct wk_gguf_writer *new_writer(void)
{
	struct wk_gguf_writer *w = NULL;

	assert_int_equal(wk_gguf_writer_new(&w), CM_OK);
	return w;
}

static void add_f32_tensor(struct wk_gguf_writer *w, const char *name, uint64_t n)
{
	float *d = calloc(n, sizeof(float));
	uint64_t dims[1] = { n };

	assert_non_null(d);
	for (uint64_t i = 0; i < n; i++)
		d[i] = (float)i;
	assert_int_equal(wk_gguf_writer_add_tensor(w, name, WK_Q_F32, 1, dims, d, n * 4), CM_OK);
	free(d);
}

/* A small valid file: a few keys and two F32 tensors of 32 bytes each. */
static uint8_t *small_valid(size_t *len)
{
	struct wk_gguf_writer *w = new_writer();
	const char *strs[2] = { "a", "bc" };
	uint8_t *buf;

	assert_int_equal(wk_gguf_writer_add_str(w, "general.architecture", "llama"), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "x.count", 7), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr_str(w, "x.strs", strs, NULL, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_bool(w, "x.flag", 1), CM_OK);
	add_f32_tensor(w, "a.weight", 8);
	add_f32_tensor(w, "b.weight", 8);
	buf = write_mem(w, len);
	wk_gguf_writer_free(w);
	return buf;
}

/* Raw header + nothing else (for count / magic / version tests). */
static void put_header(struct cm_buf *b, const char *magic, uint32_t version,
		       uint64_t n_tensors, uint64_t n_kv)
{
	assert_int_equal(cm_buf_append(b, magic, 4), CM_OK);
	assert_int_equal(cm_buf_put_u32(b, version), CM_OK);
	assert_int_equal(cm_buf_put_u64(b, n_tensors), CM_OK);
	assert_int_equal(cm_buf_put_u64(b, n_kv), CM_OK);
}

static void put_gstr(struct cm_buf *b, const char *s)
{
	assert_int_equal(cm_buf_put_u64(b, strlen(s)), CM_OK);
	assert_int_equal(cm_buf_append(b, s, strlen(s)), CM_OK);
}

/* ---- round trips ---- */

static void test_roundtrip_values(void **state)
{
	struct wk_gguf_writer *w = new_writer();
	struct wk_gguf *g = NULL;
	struct wk_gguf_str s;
	enum wk_gguf_vtype et;
	uint8_t *buf;
	size_t len;
	char err[256];
	uint32_t u32;
	uint64_t u64, count;
	int64_t i64;
	float f;
	int b;
	const uint8_t u8a[3] = { 1, 2, 250 };
	const int16_t i16a[2] = { -3, 300 };
	const uint32_t u32a[2] = { 7, 0xffffffffu };
	const int32_t i32a[2] = { -7, 70000 };
	const float f32a[2] = { 1.5f, -2.25f };
	const uint64_t u64a[2] = { 1, UINT64_MAX };
	const int64_t i64a[1] = { INT64_MIN };
	const double f64a[1] = { 3.25 };
	const uint8_t boola[2] = { 0, 1 };
	const char *strs[4] = { "<unk>", "", "\xe2\x96\x81the", "x" };
	/* a nested array: array of 2 arrays of u8 (1 element each) */
	uint8_t nested[4 + 8 + 2 * (4 + 8 + 1)];
	size_t o = 0;

	(void)state;
	{
		uint32_t t = WK_GGUF_ARRAY; uint64_t n = 2, one = 1; uint32_t t8 = WK_GGUF_U8;

		memcpy(nested + o, &t, 4); o += 4;
		memcpy(nested + o, &n, 8); o += 8;
		for (int k = 0; k < 2; k++) {
			memcpy(nested + o, &t8, 4); o += 4;
			memcpy(nested + o, &one, 8); o += 8;
			nested[o++] = (uint8_t)(40 + k);
		}
	}
	assert_int_equal(wk_gguf_writer_add_u8(w, "v.u8", 200), CM_OK);
	assert_int_equal(wk_gguf_writer_add_i8(w, "v.i8", -5), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u16(w, "v.u16", 65535), CM_OK);
	assert_int_equal(wk_gguf_writer_add_i16(w, "v.i16", -300), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "v.u32", 4000000000u), CM_OK);
	assert_int_equal(wk_gguf_writer_add_i32(w, "v.i32", -2000000000), CM_OK);
	assert_int_equal(wk_gguf_writer_add_f32(w, "v.f32", 0.125f), CM_OK);
	assert_int_equal(wk_gguf_writer_add_bool(w, "v.bool", 1), CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "v.str", "hello"), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u64(w, "v.u64", UINT64_MAX), CM_OK);
	assert_int_equal(wk_gguf_writer_add_i64(w, "v.i64", INT64_MIN), CM_OK);
	assert_int_equal(wk_gguf_writer_add_f64(w, "v.f64", 1e-300), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.u8", WK_GGUF_U8, u8a, 3), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.i16", WK_GGUF_I16, i16a, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.u32", WK_GGUF_U32, u32a, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.i32", WK_GGUF_I32, i32a, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.f32", WK_GGUF_F32, f32a, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.u64", WK_GGUF_U64, u64a, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.i64", WK_GGUF_I64, i64a, 1), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.f64", WK_GGUF_F64, f64a, 1), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.bool", WK_GGUF_BOOL, boola, 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.empty", WK_GGUF_U8, NULL, 0), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr_str(w, "a.str", strs, NULL, 4), CM_OK);
	assert_int_equal(wk_gguf_writer_add_raw(w, "a.nested", WK_GGUF_ARRAY, nested, o), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr(w, "a.bad", WK_GGUF_STRING, strs, 1), CM_EINVAL);
	assert_int_equal(wk_gguf_writer_n_kv(w), 24);
	buf = write_mem(w, &len);
	wk_gguf_writer_free(w);

	assert_int_equal(wk_gguf_open_mem(buf, len, &g, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_gguf_version(g), 3);
	assert_int_equal(wk_gguf_file_size(g), len);
	assert_int_equal(wk_gguf_n_kv(g), 24);
	assert_int_equal(wk_gguf_n_tensors(g), 0);
	assert_string_equal(wk_gguf_key_name(g, 0), "v.u8");
	assert_int_equal(wk_gguf_key_type(g, 8), WK_GGUF_STRING);
	assert_null(wk_gguf_key_name(g, 24));
	for (uint64_t i = 0; i < wk_gguf_n_kv(g); i++)
		assert_int_equal(wk_gguf_find_key(g, wk_gguf_key_name(g, i)), (int64_t)i);
	assert_int_equal(wk_gguf_find_key(g, "v.missing"), -1);

	/* integer getters accept any integer type whose value fits */
	assert_int_equal(wk_gguf_get_u32(g, "v.u8", &u32), CM_OK);
	assert_int_equal(u32, 200);
	assert_int_equal(wk_gguf_get_u32(g, "v.i8", &u32), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_i64(g, "v.i8", &i64), CM_OK);
	assert_int_equal(i64, -5);
	assert_int_equal(wk_gguf_get_u32(g, "v.u16", &u32), CM_OK);
	assert_int_equal(u32, 65535);
	assert_int_equal(wk_gguf_get_i64(g, "v.i16", &i64), CM_OK);
	assert_int_equal(i64, -300);
	assert_int_equal(wk_gguf_get_u32(g, "v.u32", &u32), CM_OK);
	assert_int_equal(u32, 4000000000u);
	assert_int_equal(wk_gguf_get_i64(g, "v.i32", &i64), CM_OK);
	assert_int_equal(i64, -2000000000);
	assert_int_equal(wk_gguf_get_u64(g, "v.u64", &u64), CM_OK);
	assert_true(u64 == UINT64_MAX);
	assert_int_equal(wk_gguf_get_u32(g, "v.u64", &u32), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_i64(g, "v.u64", &i64), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_i64(g, "v.i64", &i64), CM_OK);
	assert_true(i64 == INT64_MIN);
	assert_int_equal(wk_gguf_get_u64(g, "v.i64", &u64), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_u32(g, "v.f32", &u32), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_u32(g, "v.nope", &u32), CM_ENOTFOUND);
	assert_int_equal(wk_gguf_get_f32(g, "v.f32", &f), CM_OK);
	assert_true(f == 0.125f);
	assert_int_equal(wk_gguf_get_f32(g, "v.f64", &f), CM_OK);
	assert_int_equal(wk_gguf_get_f32(g, "v.u8", &f), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_bool(g, "v.bool", &b), CM_OK);
	assert_int_equal(b, 1);
	assert_int_equal(wk_gguf_get_bool(g, "v.u8", &b), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_str(g, "v.str", &s), CM_OK);
	assert_int_equal(s.len, 5);
	assert_memory_equal(s.ptr, "hello", 5);
	assert_int_equal(wk_gguf_get_str(g, "v.u8", &s), CM_EFORMAT);

	/* arrays */
	assert_int_equal(wk_gguf_get_arr(g, "a.u8", &et, &count), CM_OK);
	assert_int_equal(et, WK_GGUF_U8);
	assert_int_equal(count, 3);
	assert_memory_equal(wk_gguf_arr_data(g, "a.u8"), u8a, 3);
	assert_memory_equal(wk_gguf_arr_data(g, "a.i16"), i16a, sizeof(i16a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.u32"), u32a, sizeof(u32a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.i32"), i32a, sizeof(i32a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.f32"), f32a, sizeof(f32a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.u64"), u64a, sizeof(u64a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.i64"), i64a, sizeof(i64a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.f64"), f64a, sizeof(f64a));
	assert_memory_equal(wk_gguf_arr_data(g, "a.bool"), boola, sizeof(boola));
	assert_int_equal(wk_gguf_get_arr(g, "a.empty", &et, &count), CM_OK);
	assert_int_equal(count, 0);
	assert_int_equal(wk_gguf_get_arr(g, "a.str", &et, &count), CM_OK);
	assert_int_equal(et, WK_GGUF_STRING);
	assert_int_equal(count, 4);
	assert_null(wk_gguf_arr_data(g, "a.str"));
	for (uint64_t i = 0; i < 4; i++) {
		assert_int_equal(wk_gguf_arr_str(g, "a.str", i, &s), CM_OK);
		assert_int_equal(s.len, strlen(strs[i]));
		assert_memory_equal(s.ptr, strs[i], s.len);
	}
	assert_int_equal(wk_gguf_arr_str(g, "a.str", 4, &s), CM_EINVAL);
	assert_int_equal(wk_gguf_arr_str(g, "a.u8", 0, &s), CM_EFORMAT);
	assert_int_equal(wk_gguf_arr_str(g, "v.str", 0, &s), CM_EFORMAT);
	assert_int_equal(wk_gguf_get_arr(g, "a.nested", &et, &count), CM_OK);
	assert_int_equal(et, WK_GGUF_ARRAY);
	assert_int_equal(count, 2);
	assert_null(wk_gguf_arr_data(g, "a.nested"));
	assert_int_equal(wk_gguf_get_arr(g, "v.u8", &et, &count), CM_EFORMAT);
	wk_gguf_close(g);
	cm_free(buf);
}

static void test_roundtrip_tensors(void **state)
{
	static const uint32_t types[] = { WK_Q_F32, WK_Q_F16, WK_Q_BF16, WK_Q_Q8_0,
					  WK_Q_Q4_0, WK_Q_Q4_1, WK_Q_Q5_0, WK_Q_Q5_1, WK_Q_IQ4_NL,
					  WK_Q_Q4_K, WK_Q_Q5_K, WK_Q_Q6_K };
	struct wk_gguf_writer *w = new_writer();
	struct wk_gguf *g = NULL;
	uint8_t *buf, *data[8];
	size_t len;
	char err[256], name[32];

	(void)state;
	assert_int_equal(wk_gguf_writer_set_alignment(w, 64, 1), CM_OK);
	for (int i = 0; i < 8; i++) {
		uint64_t dims[3] = { 512, 3, (uint64_t)(i % 2 + 1) };
		uint64_t nb = wk_qtype_row_bytes(types[i], 512) * 3 * dims[2];

		data[i] = malloc(nb);
		assert_non_null(data[i]);
		for (uint64_t k = 0; k < nb; k++)
			data[i][k] = (uint8_t)(k * 31 + i);
		snprintf(name, sizeof(name), "t.%s", wk_qtype_name(types[i]));
		assert_int_equal(wk_gguf_writer_add_tensor(w, name, types[i], 3, dims, data[i], nb),
				 CM_OK);
		/* wrong byte count and bad block multiple are refused */
		assert_int_equal(wk_gguf_writer_add_tensor(w, "bad", types[i], 3, dims, data[i],
							   nb - 1), CM_EINVAL);
	}
	{
		uint64_t dims[1] = { 100 };

		assert_int_equal(wk_gguf_writer_add_tensor(w, "bad", WK_Q_Q4_K, 1, dims, data[0],
							   1), CM_EINVAL);
	}
	buf = write_mem(w, &len);
	wk_gguf_writer_free(w);
	assert_int_equal(wk_gguf_open_mem(buf, len, &g, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_gguf_n_tensors(g), 8);
	for (int i = 0; i < 8; i++) {
		const struct wk_gguf_tensor *t = wk_gguf_tensor(g, (uint64_t)i);

		snprintf(name, sizeof(name), "t.%s", wk_qtype_name(types[i]));
		assert_ptr_equal(wk_gguf_find_tensor(g, name), t);
		assert_string_equal(t->name, name);
		assert_int_equal(t->type, types[i]);
		assert_int_equal(t->n_dims, 3);
		assert_int_equal(t->dims[0], 512);
		assert_int_equal(t->dims[1], 3);
		assert_int_equal(t->dims[3], 1);
		assert_int_equal(t->n_elems, 512 * 3 * (i % 2 + 1));
		assert_int_equal(t->n_bytes, wk_qtype_row_bytes(types[i], 512) * 3 * (i % 2 + 1));
		assert_int_equal(((const uint8_t *)t->data - buf) % 64, 0);
		assert_memory_equal(t->data, data[i], t->n_bytes);
		free(data[i]);
	}
	assert_null(wk_gguf_find_tensor(g, "t.nope"));
	assert_null(wk_gguf_tensor(g, 8));
	wk_gguf_close(g);
	cm_free(buf);
}

static enum cm_status fill_cb(void *ctx, struct wk_gguf_writer *w, uint64_t index)
{
	uint8_t chunk[100];
	uint64_t left = wk_gguf_writer_tensor_bytes(w, index);

	(void)ctx;
	memset(chunk, (int)(0x40 + index), sizeof(chunk));
	while (left) {
		size_t n = left < sizeof(chunk) ? (size_t)left : sizeof(chunk);
		enum cm_status st = wk_gguf_writer_emit(w, chunk, n);

		if (st != CM_OK)
			return st;
		left -= n;
	}
	return CM_OK;
}

static enum cm_status short_fill_cb(void *ctx, struct wk_gguf_writer *w, uint64_t index)
{
	(void)ctx;
	(void)index;
	return wk_gguf_writer_emit(w, "x", 1);
}

static void test_fill_and_file(void **state)
{
	struct wk_gguf_writer *w = new_writer();
	struct wk_gguf *g = NULL;
	char path[] = "/tmp/sluice-test-gguf-XXXXXX";
	uint64_t dims[2] = { 64, 5 };
	char err[256];
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	wk_gguf_writer_set_version(w, 2);
	assert_int_equal(wk_gguf_writer_add_tensor_fill(w, "f.a", WK_Q_Q8_0, 2, dims, fill_cb,
							NULL), CM_OK);
	assert_int_equal(wk_gguf_writer_add_tensor_fill(w, "f.b", WK_Q_F16, 2, dims, fill_cb,
							NULL), CM_OK);
	assert_int_equal(wk_gguf_writer_write_file(w, path, err, sizeof(err)), CM_OK);
	wk_gguf_writer_free(w);
	assert_int_equal(wk_gguf_open(path, &g, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_gguf_version(g), 2);
	assert_int_equal(wk_gguf_tensor(g, 0)->n_bytes, 34 * 2 * 5);
	assert_int_equal(((const uint8_t *)wk_gguf_tensor(g, 1)->data)[639], 0x41);
	wk_gguf_close(g);

	/* a fill that emits too little fails the write */
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_fill(w, "f.a", WK_Q_F32, 2, dims,
							short_fill_cb, NULL), CM_OK);
	assert_int_not_equal(wk_gguf_writer_write_file(w, path, err, sizeof(err)), CM_OK);
	wk_gguf_writer_free(w);

	/* empty file, missing file */
	fd = open(path, O_WRONLY | O_TRUNC);
	close(fd);
	assert_int_equal(wk_gguf_open(path, &g, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "truncated"));
	unlink(path);
	assert_int_equal(wk_gguf_open(path, &g, err, sizeof(err)), CM_ENOTFOUND);
	assert_null(g);
}

/* ---- bad files ---- */

static void test_truncated_every_prefix(void **state)
{
	size_t len;
	uint8_t *buf = small_valid(&len);
	struct wk_gguf *g = NULL;
	char err[256];

	(void)state;
	assert_int_equal(open_copy(buf, len, &g, err, sizeof(err)), CM_OK);
	for (size_t n = 0; n < len; n++) {
		assert_int_not_equal(open_copy(buf, n, &g, err, sizeof(err)), CM_OK);
		assert_true(strlen(err) > 0);
	}
	cm_free(buf);
}

static void test_bad_magic_and_version(void **state)
{
	size_t len;
	uint8_t *buf = small_valid(&len);
	uint32_t v;

	(void)state;
	buf[0] = 'X';
	expect_error(buf, len, "bad magic");
	buf[0] = 'G';
	v = 1;
	memcpy(buf + 4, &v, 4);
	expect_error(buf, len, "unsupported GGUF version 1 (expected 2 or 3");
	v = 4;
	memcpy(buf + 4, &v, 4);
	expect_error(buf, len, "unsupported GGUF version 4");
	v = 0x03000000;
	memcpy(buf + 4, &v, 4);
	expect_error(buf, len, "big-endian");
	cm_free(buf);
}

static void test_absurd_counts(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 1 << 20);
	put_header(&b, "GGUF", 3, 0, 1ull << 40);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "metadata count 1099511627776 exceeds");
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, UINT64_MAX, 0);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "tensor count");
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 1000, 60000);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "need at least");
	cm_buf_deinit(&b);
}

static void test_huge_string_and_arrays(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 1 << 20);
	/* key length 2^62 */
	put_header(&b, "GGUF", 3, 0, 1);
	assert_int_equal(cm_buf_put_u64(&b, 1ull << 62), CM_OK);
	assert_int_equal(cm_buf_append(&b, "0123456789abcdef", 16), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "string length 4611686018427387904 exceeds");

	/* string value longer than the file */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "k");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_STRING), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 1000), CM_OK);
	assert_int_equal(cm_buf_append(&b, "abc", 3), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "key 'k': truncated: string of 1000 bytes");

	/* array count whose byte size would overflow */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "arr");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_ARRAY), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_U64), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 1ull << 61), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "key 'arr': array of 2305843009213693952 elements exceeds");

	/* array count under the limit but past the end of the file */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "arr");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_ARRAY), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_STRING), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 1000000), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "truncated: array of 1000000 string");

	/* unknown array element type, unknown value type, bad bool */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "arr");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_ARRAY), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, 13), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "unknown array element type 13");
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "val");
	assert_int_equal(cm_buf_put_u32(&b, 99), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "key 'val': unknown value type 99");
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "flag");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_BOOL), CM_OK);
	assert_int_equal(cm_buf_put_u8(&b, 2), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "key 'flag': bool value 2");

	/* arrays nested too deep */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	put_gstr(&b, "deep");
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_ARRAY), CM_OK);
	for (int d = 0; d < 20; d++) {
		assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_ARRAY), CM_OK);
		assert_int_equal(cm_buf_put_u64(&b, 1), CM_OK);
	}
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "nested deeper");

	/* empty key, key with a NUL byte */
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_U8), CM_OK);
	assert_int_equal(cm_buf_put_u8(&b, 0), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "empty name");
	cm_buf_reset(&b);
	put_header(&b, "GGUF", 3, 0, 1);
	assert_int_equal(cm_buf_put_u64(&b, 3), CM_OK);
	assert_int_equal(cm_buf_append(&b, "a\0b", 3), CM_OK);
	assert_int_equal(cm_buf_put_u32(&b, WK_GGUF_U8), CM_OK);
	assert_int_equal(cm_buf_put_u8(&b, 0), CM_OK);
	assert_int_equal(cm_buf_put_u64(&b, 0), CM_OK);
	expect_error(cm_buf_data(&b), cm_buf_len(&b), "NUL byte");
	cm_buf_deinit(&b);
}

static void test_bad_dims(void **state)
{
	struct wk_gguf_writer *w;
	uint64_t dims[5] = { 32, 1, 1, 1, 1 };
	uint64_t big[2] = { 1ull << 32, 1ull << 32 };

	(void)state;
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "t0", WK_Q_F32, 0, dims, NULL, 128), CM_OK);
	expect_writer_error(w, "tensor 't0': n_dims 0, expected 1..4");
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "t5", WK_Q_F32, 5, dims, NULL, 128), CM_OK);
	expect_writer_error(w, "tensor 't5': n_dims 5, expected 1..4");
	w = new_writer();
	dims[1] = 0;
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "z", WK_Q_F32, 2, dims, NULL, 128), CM_OK);
	expect_writer_error(w, "tensor 'z': dim 1 is 0");
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "ovf", WK_Q_F32, 2, big, NULL, 128), CM_OK);
	expect_writer_error(w, "tensor 'ovf': element count overflows");
	w = new_writer();
	big[0] = 1ull << 62;
	big[1] = 1;
	/* elements fit in int64, bytes (x4) do not */
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "bytes", WK_Q_F32, 2, big, NULL, 128),
			 CM_OK);
	expect_writer_error(w, "tensor 'bytes': byte size overflows");
	w = new_writer();
	dims[0] = 33;
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "blk", WK_Q_Q8_0, 1, dims, NULL, 64),
			 CM_OK);
	expect_writer_error(w, "tensor 'blk': innermost dim 33 is not a multiple of the Q8_0 "
			       "block size 32");
}

static void test_bad_types(void **state)
{
	struct wk_gguf_writer *w;
	uint64_t dims[1] = { 256 };

	(void)state;
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "u", 99, 1, dims, NULL, 256), CM_OK);
	expect_writer_error(w, "tensor 'u': unknown type id 99");
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "iq2", 16, 1, dims, NULL, 66), CM_OK);
	expect_writer_error(w, "tensor 'iq2': weight type IQ2_XXS (id 16) is not supported");
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, "q8k", WK_Q_Q8_K, 1, dims, NULL, 292),
			 CM_OK);
	expect_writer_error(w, "tensor 'q8k': weight type Q8_K");
}

static void test_bad_offsets(void **state)
{
	struct wk_gguf_writer *w;

	(void)state;
	w = new_writer();
	add_f32_tensor(w, "a", 8);
	wk_gguf_writer_override_offset(w, 0, 4);
	expect_writer_error(w, "tensor 'a': offset 4 is not a multiple of the alignment 32");

	w = new_writer();
	add_f32_tensor(w, "a", 8);
	wk_gguf_writer_override_offset(w, 0, 1 << 20);
	expect_writer_error(w, "tensor 'a': data [");
	w = new_writer();
	add_f32_tensor(w, "a", 8);
	wk_gguf_writer_override_offset(w, 0, UINT64_MAX - 31);
	expect_writer_error(w, "runs past the end of the file");

	w = new_writer();
	add_f32_tensor(w, "a", 16);
	add_f32_tensor(w, "b", 8);
	wk_gguf_writer_override_offset(w, 1, 32);
	expect_writer_error(w, "overlaps tensor 'a'");
}

static void test_bad_alignment(void **state)
{
	struct wk_gguf_writer *w;
	static const uint32_t bad[] = { 0, 48, 4, 1u << 21 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		w = new_writer();
		assert_int_equal(wk_gguf_writer_add_u32(w, "general.alignment", bad[i]), CM_OK);
		add_f32_tensor(w, "a", 8);
		expect_writer_error(w, "key 'general.alignment': expected a power of two in [8, "
				       "1048576]");
	}
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_i32(w, "general.alignment", 32), CM_OK);
	expect_writer_error(w, "key 'general.alignment': expected type u32, found i32");
	w = new_writer();
	assert_int_equal(wk_gguf_writer_set_alignment(w, 3, 0), CM_EINVAL);
	assert_int_equal(wk_gguf_writer_set_alignment(w, 0, 0), CM_EINVAL);
	wk_gguf_writer_free(w);
}

static void test_duplicates(void **state)
{
	struct wk_gguf_writer *w;

	(void)state;
	w = new_writer();
	assert_int_equal(wk_gguf_writer_add_u32(w, "k.one", 1), CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "k.one", "again"), CM_OK);
	expect_writer_error(w, "key 'k.one': duplicate key");
	w = new_writer();
	add_f32_tensor(w, "same", 8);
	add_f32_tensor(w, "same", 8);
	expect_writer_error(w, "tensor 'same': duplicate tensor name");
}

/* Allocation failures anywhere in open give CM_ENOMEM, never a crash or leak. */
static void test_alloc_failures(void **state)
{
	size_t len;
	uint8_t *buf = small_valid(&len);
	struct wk_gguf *g = NULL;
	char err[256];
	enum cm_status st;
	long n;

	(void)state;
	for (n = 0; n < 100; n++) {
		cm_alloc_fail_after(n);
		st = wk_gguf_open_mem(buf, len, &g, err, sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK)
			break;
		assert_int_equal(st, CM_ENOMEM);
		assert_null(g);
	}
	assert_int_equal(st, CM_OK);
	assert_true(n > 3);
	wk_gguf_close(g);
	wk_gguf_close(NULL);
	cm_free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_values),
		cmocka_unit_test(test_roundtrip_tensors),
		cmocka_unit_test(test_fill_and_file),
		cmocka_unit_test(test_truncated_every_prefix),
		cmocka_unit_test(test_bad_magic_and_version),
		cmocka_unit_test(test_absurd_counts),
		cmocka_unit_test(test_huge_string_and_arrays),
		cmocka_unit_test(test_bad_dims),
		cmocka_unit_test(test_bad_types),
		cmocka_unit_test(test_bad_offsets),
		cmocka_unit_test(test_bad_alignment),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_alloc_failures),
	};

	return cmocka_run_group_tests_name("worker/gguf", tests, NULL, NULL);
}
