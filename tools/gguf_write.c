/*
 * gguf_write.c - GGUF v3 writer (see gguf_write.h).
 *
 * Owns: the encoded metadata section (a capped cm_buf), one record per
 * tensor (name copy, info fields, copied data or fill callback).  Write is
 * one sequential pass through an output sink (a FILE or a cm_buf) that
 * counts the bytes it wrote, so padding is computed from the position and
 * no seek is needed.
 */
#include "tools/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"

#define WRITER_META_CAP ((size_t)1 << 31)   /* metadata section bytes */
#define WRITER_MEM_CAP ((size_t)1 << 34)    /* write_mem output bytes */
#define WRITER_TENSORS_MAX (1u << 20)
#define WRITER_FILE_BUF (1u << 20)

struct writer_tensor {
	char *name;
	uint32_t type;
	uint32_t n_dims;
	uint64_t dims[8];
	uint64_t n_bytes;
	uint8_t *data;          /* copied data, or NULL (fill or zeros) */
	wk_gguf_fill_fn fill;
	void *ctx;
	uint64_t offset;        /* layout offset in the data section */
	int has_override;
	uint64_t override;
};

struct writer_sink {
	FILE *f;
	struct cm_buf *b;
	uint64_t pos;
};

struct wk_gguf_writer {
	uint32_t version;
	uint32_t align;
	uint64_t n_kv;
	struct cm_buf meta;
	struct writer_tensor *t;
	uint64_t n_t, cap_t;
	/* while a fill callback runs */
	struct writer_sink *sink;
	uint64_t emit_left;
	enum cm_status emit_st;
};

enum cm_status wk_gguf_writer_new(struct wk_gguf_writer **out)
{
	struct wk_gguf_writer *w = cm_calloc(1, sizeof(*w));

	*out = NULL;
	if (!w)
		return CM_ENOMEM;
	w->version = 3;
	w->align = 32;
	cm_buf_init(&w->meta, WRITER_META_CAP);
	*out = w;
	return CM_OK;
}

void wk_gguf_writer_free(struct wk_gguf_writer *w)
{
	uint64_t i;

	if (!w)
		return;
	for (i = 0; i < w->n_t; i++) {
		cm_free(w->t[i].name);
		cm_free(w->t[i].data);
	}
	cm_free(w->t);
	cm_buf_deinit(&w->meta);
	cm_free(w);
}

void wk_gguf_writer_set_version(struct wk_gguf_writer *w, uint32_t version)
{
	w->version = version;
}

enum cm_status wk_gguf_writer_set_alignment(struct wk_gguf_writer *w, uint32_t align,
					    int add_key)
{
	if (align == 0 || (align & (align - 1)) || align > (1u << 20))
		return CM_EINVAL;
	w->align = align;
	return add_key ? wk_gguf_writer_add_u32(w, "general.alignment", align) : CM_OK;
}

/* ==== metadata ====================================================== */

static enum cm_status put_str(struct cm_buf *b, const char *s, size_t len)
{
	enum cm_status st = cm_buf_put_u64(b, len);

	return st != CM_OK ? st : cm_buf_append(b, s, len);
}

/* key + type; the caller appends the value.  Rolls back on failure. */
static enum cm_status kv_begin(struct wk_gguf_writer *w, const char *key, uint32_t type)
{
	enum cm_status st = put_str(&w->meta, key, strlen(key));

	if (st == CM_OK)
		st = cm_buf_put_u32(&w->meta, type);
	return st;
}

static enum cm_status add_scalar(struct wk_gguf_writer *w, const char *key, uint32_t type,
				 const void *v, size_t n)
{
	size_t mark = cm_buf_len(&w->meta);
	enum cm_status st = kv_begin(w, key, type);

	if (st == CM_OK)
		st = cm_buf_append(&w->meta, v, n);
	if (st != CM_OK) {
		cm_buf_truncate(&w->meta, mark);
		return st;
	}
	w->n_kv++;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_u8(struct wk_gguf_writer *w, const char *key, uint8_t v)
{
	return add_scalar(w, key, WK_GGUF_U8, &v, 1);
}

enum cm_status wk_gguf_writer_add_i8(struct wk_gguf_writer *w, const char *key, int8_t v)
{
	return add_scalar(w, key, WK_GGUF_I8, &v, 1);
}

enum cm_status wk_gguf_writer_add_u16(struct wk_gguf_writer *w, const char *key, uint16_t v)
{
	return add_scalar(w, key, WK_GGUF_U16, &v, 2);
}

enum cm_status wk_gguf_writer_add_i16(struct wk_gguf_writer *w, const char *key, int16_t v)
{
	return add_scalar(w, key, WK_GGUF_I16, &v, 2);
}

enum cm_status wk_gguf_writer_add_u32(struct wk_gguf_writer *w, const char *key, uint32_t v)
{
	return add_scalar(w, key, WK_GGUF_U32, &v, 4);
}

enum cm_status wk_gguf_writer_add_i32(struct wk_gguf_writer *w, const char *key, int32_t v)
{
	return add_scalar(w, key, WK_GGUF_I32, &v, 4);
}

enum cm_status wk_gguf_writer_add_f32(struct wk_gguf_writer *w, const char *key, float v)
{
	return add_scalar(w, key, WK_GGUF_F32, &v, 4);
}

enum cm_status wk_gguf_writer_add_bool(struct wk_gguf_writer *w, const char *key, int v)
{
	uint8_t b = v ? 1 : 0;

	return add_scalar(w, key, WK_GGUF_BOOL, &b, 1);
}

enum cm_status wk_gguf_writer_add_u64(struct wk_gguf_writer *w, const char *key, uint64_t v)
{
	return add_scalar(w, key, WK_GGUF_U64, &v, 8);
}

enum cm_status wk_gguf_writer_add_i64(struct wk_gguf_writer *w, const char *key, int64_t v)
{
	return add_scalar(w, key, WK_GGUF_I64, &v, 8);
}

enum cm_status wk_gguf_writer_add_f64(struct wk_gguf_writer *w, const char *key, double v)
{
	return add_scalar(w, key, WK_GGUF_F64, &v, 8);
}

enum cm_status wk_gguf_writer_add_strn(struct wk_gguf_writer *w, const char *key,
				       const char *s, size_t len)
{
	size_t mark = cm_buf_len(&w->meta);
	enum cm_status st = kv_begin(w, key, WK_GGUF_STRING);

	if (st == CM_OK)
		st = put_str(&w->meta, s, len);
	if (st != CM_OK) {
		cm_buf_truncate(&w->meta, mark);
		return st;
	}
	w->n_kv++;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_str(struct wk_gguf_writer *w, const char *key, const char *s)
{
	return wk_gguf_writer_add_strn(w, key, s, strlen(s));
}

static size_t elem_size(uint32_t t)
{
	switch (t) {
	case WK_GGUF_U8: case WK_GGUF_I8: case WK_GGUF_BOOL: return 1;
	case WK_GGUF_U16: case WK_GGUF_I16: return 2;
	case WK_GGUF_U32: case WK_GGUF_I32: case WK_GGUF_F32: return 4;
	case WK_GGUF_U64: case WK_GGUF_I64: case WK_GGUF_F64: return 8;
	default: return 0;
	}
}

enum cm_status wk_gguf_writer_add_arr(struct wk_gguf_writer *w, const char *key,
				      enum wk_gguf_vtype elem_type, const void *data,
				      uint64_t count)
{
	size_t mark = cm_buf_len(&w->meta);
	size_t es = elem_size(elem_type);
	enum cm_status st;

	if (!es || count > SIZE_MAX / es)
		return CM_EINVAL;
	st = kv_begin(w, key, WK_GGUF_ARRAY);
	if (st == CM_OK)
		st = cm_buf_put_u32(&w->meta, elem_type);
	if (st == CM_OK)
		st = cm_buf_put_u64(&w->meta, count);
	if (st == CM_OK && count)
		st = cm_buf_append(&w->meta, data, (size_t)count * es);
	if (st != CM_OK) {
		cm_buf_truncate(&w->meta, mark);
		return st;
	}
	w->n_kv++;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_arr_str(struct wk_gguf_writer *w, const char *key,
					  const char *const *strs, const size_t *lens,
					  uint64_t count)
{
	size_t mark = cm_buf_len(&w->meta);
	enum cm_status st;
	uint64_t i;

	st = kv_begin(w, key, WK_GGUF_ARRAY);
	if (st == CM_OK)
		st = cm_buf_put_u32(&w->meta, WK_GGUF_STRING);
	if (st == CM_OK)
		st = cm_buf_put_u64(&w->meta, count);
	for (i = 0; st == CM_OK && i < count; i++)
		st = put_str(&w->meta, strs[i], lens ? lens[i] : strlen(strs[i]));
	if (st != CM_OK) {
		cm_buf_truncate(&w->meta, mark);
		return st;
	}
	w->n_kv++;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_raw(struct wk_gguf_writer *w, const char *key,
				      uint32_t type, const void *bytes, size_t n)
{
	return add_scalar(w, key, type, bytes, n);
}

uint64_t wk_gguf_writer_n_kv(const struct wk_gguf_writer *w)
{
	return w->n_kv;
}

/* ==== tensors ======================================================= */

static struct writer_tensor *new_tensor(struct wk_gguf_writer *w, const char *name)
{
	struct writer_tensor *t;

	if (w->n_t == WRITER_TENSORS_MAX)
		return NULL;
	if (w->n_t == w->cap_t) {
		uint64_t nc = w->cap_t ? w->cap_t * 2 : 16;
		struct writer_tensor *nt = cm_reallocarray(w->t, nc, sizeof(*nt));

		if (!nt)
			return NULL;
		w->t = nt;
		w->cap_t = nc;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->name = cm_strdup(name);
	if (!t->name)
		return NULL;
	w->n_t++;
	return t;
}

/* Byte size of a well-formed tensor; 0 when the fields do not describe one. */
static uint64_t tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *dims)
{
	uint64_t rows = 1, row, n;
	uint32_t d;

	if (n_dims < 1 || n_dims > 4)
		return 0;
	for (d = 0; d < n_dims; d++)
		if (dims[d] == 0)
			return 0;
	for (d = 1; d < n_dims; d++)
		if (__builtin_mul_overflow(rows, dims[d], &rows))
			return 0;
	row = wk_qtype_row_bytes(type, dims[0]);
	if (row == 0 || __builtin_mul_overflow(row, rows, &n))
		return 0;
	return n;
}

static enum cm_status add_tensor_common(struct wk_gguf_writer *w, const char *name,
					uint32_t type, uint32_t n_dims,
					const uint64_t *dims, struct writer_tensor **out)
{
	uint64_t nb = tensor_bytes(type, n_dims, dims);
	struct writer_tensor *t;

	if (nb == 0)
		return CM_EINVAL;
	t = new_tensor(w, name);
	if (!t)
		return CM_ENOMEM;
	t->type = type;
	t->n_dims = n_dims;
	memcpy(t->dims, dims, n_dims * sizeof(*dims));
	t->n_bytes = nb;
	*out = t;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_tensor(struct wk_gguf_writer *w, const char *name,
					 uint32_t type, uint32_t n_dims,
					 const uint64_t *dims, const void *data,
					 uint64_t n_bytes)
{
	struct writer_tensor *t;
	enum cm_status st;

	if (tensor_bytes(type, n_dims, dims) != n_bytes || n_bytes > SIZE_MAX)
		return CM_EINVAL;
	st = add_tensor_common(w, name, type, n_dims, dims, &t);
	if (st != CM_OK)
		return st;
	t->data = cm_malloc((size_t)n_bytes);
	if (!t->data) {
		cm_free(t->name);
		w->n_t--;
		return CM_ENOMEM;
	}
	memcpy(t->data, data, (size_t)n_bytes);
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_tensor_fill(struct wk_gguf_writer *w, const char *name,
					      uint32_t type, uint32_t n_dims,
					      const uint64_t *dims, wk_gguf_fill_fn fill,
					      void *ctx)
{
	struct writer_tensor *t;
	enum cm_status st;

	if (!fill)
		return CM_EINVAL;
	st = add_tensor_common(w, name, type, n_dims, dims, &t);
	if (st != CM_OK)
		return st;
	t->fill = fill;
	t->ctx = ctx;
	return CM_OK;
}

enum cm_status wk_gguf_writer_add_tensor_raw(struct wk_gguf_writer *w, const char *name,
					     uint32_t type, uint32_t n_dims,
					     const uint64_t *dims, const void *data,
					     uint64_t n_bytes)
{
	struct writer_tensor *t;
	uint32_t nd = n_dims > 8 ? 8 : n_dims;

	if (n_bytes > SIZE_MAX)
		return CM_EINVAL;
	t = new_tensor(w, name);
	if (!t)
		return CM_ENOMEM;
	t->type = type;
	t->n_dims = n_dims;
	if (nd)
		memcpy(t->dims, dims, nd * sizeof(*dims));
	t->n_bytes = n_bytes;
	if (n_bytes) {
		t->data = cm_calloc(1, (size_t)n_bytes);
		if (!t->data) {
			cm_free(t->name);
			w->n_t--;
			return CM_ENOMEM;
		}
		if (data)
			memcpy(t->data, data, (size_t)n_bytes);
	}
	return CM_OK;
}

void wk_gguf_writer_override_offset(struct wk_gguf_writer *w, uint64_t index,
				    uint64_t offset)
{
	if (index < w->n_t) {
		w->t[index].has_override = 1;
		w->t[index].override = offset;
	}
}

uint64_t wk_gguf_writer_n_tensors(const struct wk_gguf_writer *w)
{
	return w->n_t;
}

uint64_t wk_gguf_writer_tensor_bytes(const struct wk_gguf_writer *w, uint64_t index)
{
	return index < w->n_t ? w->t[index].n_bytes : 0;
}

/* ==== output ======================================================== */

static enum cm_status sink_put(struct writer_sink *s, const void *p, size_t n)
{
	if (!n)
		return CM_OK;
	if (s->f) {
		if (fwrite(p, 1, n, s->f) != n)
			return CM_EIO;
	} else {
		enum cm_status st = cm_buf_append(s->b, p, n);

		if (st != CM_OK)
			return st;
	}
	s->pos += n;
	return CM_OK;
}

static enum cm_status sink_u32(struct writer_sink *s, uint32_t v)
{
	return sink_put(s, &v, 4);
}

static enum cm_status sink_u64(struct writer_sink *s, uint64_t v)
{
	return sink_put(s, &v, 8);
}

static enum cm_status sink_pad(struct writer_sink *s, uint64_t to)
{
	static const uint8_t zeros[4096];
	enum cm_status st = CM_OK;

	while (st == CM_OK && s->pos < to) {
		uint64_t n = to - s->pos;

		st = sink_put(s, zeros, n > sizeof(zeros) ? sizeof(zeros) : (size_t)n);
	}
	return st;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

enum cm_status wk_gguf_writer_emit(struct wk_gguf_writer *w, const void *p, size_t n)
{
	if (!w->sink || n > w->emit_left)
		return CM_EINVAL;
	w->emit_left -= n;
	return sink_put(w->sink, p, n);
}

static enum cm_status write_all(struct wk_gguf_writer *w, struct writer_sink *s)
{
	enum cm_status st;
	uint64_t i, off = 0, data_start;

	/* layout: each tensor at the next aligned offset */
	for (i = 0; i < w->n_t; i++) {
		w->t[i].offset = off;
		off = align_up(off + w->t[i].n_bytes, w->align);
	}
	st = sink_put(s, "GGUF", 4);
	if (st == CM_OK)
		st = sink_u32(s, w->version);
	if (st == CM_OK)
		st = sink_u64(s, w->n_t);
	if (st == CM_OK)
		st = sink_u64(s, w->n_kv);
	if (st == CM_OK)
		st = sink_put(s, cm_buf_data(&w->meta), cm_buf_len(&w->meta));
	for (i = 0; st == CM_OK && i < w->n_t; i++) {
		const struct writer_tensor *t = &w->t[i];
		uint32_t d, nd = t->n_dims > 8 ? 8 : t->n_dims;

		st = sink_u64(s, strlen(t->name));
		if (st == CM_OK)
			st = sink_put(s, t->name, strlen(t->name));
		if (st == CM_OK)
			st = sink_u32(s, t->n_dims);
		for (d = 0; st == CM_OK && d < nd; d++)
			st = sink_u64(s, t->dims[d]);
		if (st == CM_OK)
			st = sink_u32(s, t->type);
		if (st == CM_OK)
			st = sink_u64(s, t->has_override ? t->override : t->offset);
	}
	if (st != CM_OK)
		return st;
	data_start = align_up(s->pos, w->align);
	if (w->n_t)
		st = sink_pad(s, data_start);
	for (i = 0; st == CM_OK && i < w->n_t; i++) {
		const struct writer_tensor *t = &w->t[i];

		st = sink_pad(s, data_start + t->offset);
		if (st != CM_OK)
			break;
		if (t->fill) {
			w->sink = s;
			w->emit_left = t->n_bytes;
			st = t->fill(t->ctx, w, i);
			if (st == CM_OK && w->emit_left)
				st = CM_EINVAL;
			w->sink = NULL;
		} else if (t->data) {
			st = sink_put(s, t->data, (size_t)t->n_bytes);
		}
		if (st == CM_OK)
			st = sink_pad(s, data_start + align_up(t->offset + t->n_bytes, w->align));
	}
	return st;
}

enum cm_status wk_gguf_writer_write_file(struct wk_gguf_writer *w, const char *path,
					 char *err, size_t err_len)
{
	struct writer_sink s = { 0 };
	enum cm_status st;
	char *fbuf = NULL;

	s.f = fopen(path, "wb");
	if (!s.f) {
		if (err && err_len)
			snprintf(err, err_len, "%s: cannot create: %s", path, strerror(errno));
		return CM_EIO;
	}
	fbuf = cm_malloc(WRITER_FILE_BUF);
	if (fbuf)
		setvbuf(s.f, fbuf, _IOFBF, WRITER_FILE_BUF);
	st = write_all(w, &s);
	if (fclose(s.f) != 0 && st == CM_OK)
		st = CM_EIO;
	cm_free(fbuf);
	if (st != CM_OK && err && err_len)
		snprintf(err, err_len, "%s: write failed: %s", path,
			 st == CM_EIO ? strerror(errno) : cm_status_str(st));
	return st;
}

enum cm_status wk_gguf_writer_write_mem(struct wk_gguf_writer *w, uint8_t **out,
					size_t *len)
{
	struct cm_buf b;
	struct writer_sink s = { 0 };
	enum cm_status st;

	*out = NULL;
	*len = 0;
	cm_buf_init(&b, WRITER_MEM_CAP);
	s.b = &b;
	st = write_all(w, &s);
	if (st == CM_OK) {
		*out = (uint8_t *)cm_buf_take(&b, len);
		if (!*out)
			st = CM_ENOMEM;
	}
	cm_buf_deinit(&b);
	return st;
}
