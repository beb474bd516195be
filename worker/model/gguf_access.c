/*
 * gguf_access.c - typed reads of a parsed GGUF file: keys by name and
 * type (integers widened where lossless, strings and arrays bounds-checked
 * at open), and tensors by name or index (see gguf.h).
 */
#include "worker/model/internal.h"

#include <stdio.h>
#include <string.h>

#include "common/limits.h"

uint32_t wk_gguf_version(const struct wk_gguf *g)
{
	return g->version;
}

uint64_t wk_gguf_file_size(const struct wk_gguf *g)
{
	return g->size;
}

/* ==== metadata access =============================================== */

int64_t wk_gguf_find_key(const struct wk_gguf *g, const char *key)
{
	if (!g->kv_index || !key)
		return -1;
	return wk_gguf_index_find(g->kv_index, g->kv_mask, key, wk_gguf_kv_name_of, g, NULL);
}

uint64_t wk_gguf_n_kv(const struct wk_gguf *g)
{
	return g->n_kv;
}

const char *wk_gguf_key_name(const struct wk_gguf *g, uint64_t i)
{
	return i < g->n_kv ? g->kv[i].key : NULL;
}

enum wk_gguf_vtype wk_gguf_key_type(const struct wk_gguf *g, uint64_t i)
{
	return i < g->n_kv ? g->kv[i].type : WK_GGUF_U8;
}

static const struct gguf_kv *find_kv(const struct wk_gguf *g, const char *key)
{
	int64_t i = wk_gguf_find_key(g, key);

	return i < 0 ? NULL : &g->kv[i];
}

/* Integer scalar as a sign flag + magnitude; CM_EFORMAT for non-integers. */
static enum cm_status read_int(const struct wk_gguf *g, const char *key, int *neg,
			       uint64_t *mag)
{
	const struct gguf_kv *kv = find_kv(g, key);
	const uint8_t *v;
	int64_t s = 0;
	uint64_t u = 0;
	int is_signed = 0;

	if (!kv)
		return CM_ENOTFOUND;
	v = g->base + kv->off;
	switch (kv->type) {
	case WK_GGUF_U8: u = v[0]; break;
	case WK_GGUF_I8: s = (int8_t)v[0]; is_signed = 1; break;
	case WK_GGUF_U16: { uint16_t x; memcpy(&x, v, 2); u = x; break; }
	case WK_GGUF_I16: { int16_t x; memcpy(&x, v, 2); s = x; is_signed = 1; break; }
	case WK_GGUF_U32: { uint32_t x; memcpy(&x, v, 4); u = x; break; }
	case WK_GGUF_I32: { int32_t x; memcpy(&x, v, 4); s = x; is_signed = 1; break; }
	case WK_GGUF_U64: memcpy(&u, v, 8); break;
	case WK_GGUF_I64: memcpy(&s, v, 8); is_signed = 1; break;
	default: return CM_EFORMAT;
	}
	if (is_signed && s < 0) {
		*neg = 1;
		*mag = (uint64_t)(-(s + 1)) + 1;
	} else {
		*neg = 0;
		*mag = is_signed ? (uint64_t)s : u;
	}
	return CM_OK;
}

enum cm_status wk_gguf_get_u32(const struct wk_gguf *g, const char *key, uint32_t *out)
{
	int neg;
	uint64_t m;
	enum cm_status st = read_int(g, key, &neg, &m);

	if (st != CM_OK)
		return st;
	if (neg || m > UINT32_MAX)
		return CM_EFORMAT;
	*out = (uint32_t)m;
	return CM_OK;
}

enum cm_status wk_gguf_get_u64(const struct wk_gguf *g, const char *key, uint64_t *out)
{
	int neg;
	uint64_t m;
	enum cm_status st = read_int(g, key, &neg, &m);

	if (st != CM_OK)
		return st;
	if (neg)
		return CM_EFORMAT;
	*out = m;
	return CM_OK;
}

enum cm_status wk_gguf_get_i64(const struct wk_gguf *g, const char *key, int64_t *out)
{
	int neg;
	uint64_t m;
	enum cm_status st = read_int(g, key, &neg, &m);

	if (st != CM_OK)
		return st;
	if (neg) {
		if (m > (uint64_t)INT64_MAX + 1)
			return CM_EFORMAT;
		*out = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
	} else {
		if (m > (uint64_t)INT64_MAX)
			return CM_EFORMAT;
		*out = (int64_t)m;
	}
	return CM_OK;
}

enum cm_status wk_gguf_get_f32(const struct wk_gguf *g, const char *key, float *out)
{
	const struct gguf_kv *kv = find_kv(g, key);

	if (!kv)
		return CM_ENOTFOUND;
	if (kv->type == WK_GGUF_F32) {
		memcpy(out, g->base + kv->off, 4);
		return CM_OK;
	}
	if (kv->type == WK_GGUF_F64) {
		double d;

		memcpy(&d, g->base + kv->off, 8);
		*out = (float)d;
		return CM_OK;
	}
	return CM_EFORMAT;
}

enum cm_status wk_gguf_get_bool(const struct wk_gguf *g, const char *key, int *out)
{
	const struct gguf_kv *kv = find_kv(g, key);

	if (!kv)
		return CM_ENOTFOUND;
	if (kv->type != WK_GGUF_BOOL)
		return CM_EFORMAT;
	*out = g->base[kv->off] != 0;
	return CM_OK;
}

enum cm_status wk_gguf_get_str(const struct wk_gguf *g, const char *key,
			       struct wk_gguf_str *out)
{
	const struct gguf_kv *kv = find_kv(g, key);

	if (!kv)
		return CM_ENOTFOUND;
	if (kv->type != WK_GGUF_STRING)
		return CM_EFORMAT;
	out->ptr = (const char *)g->base + kv->off;
	out->len = kv->len;
	return CM_OK;
}

enum cm_status wk_gguf_get_arr(const struct wk_gguf *g, const char *key,
			       enum wk_gguf_vtype *elem_type, uint64_t *count)
{
	const struct gguf_kv *kv = find_kv(g, key);

	if (!kv)
		return CM_ENOTFOUND;
	if (kv->type != WK_GGUF_ARRAY)
		return CM_EFORMAT;
	*elem_type = kv->elem_type;
	*count = kv->len;
	return CM_OK;
}

enum cm_status wk_gguf_arr_str(const struct wk_gguf *g, const char *key, uint64_t i,
			       struct wk_gguf_str *out)
{
	const struct gguf_kv *kv = find_kv(g, key);
	uint64_t off, len;

	if (!kv)
		return CM_ENOTFOUND;
	if (kv->type != WK_GGUF_ARRAY || kv->elem_type != WK_GGUF_STRING)
		return CM_EFORMAT;
	if (i >= kv->len)
		return CM_EINVAL;
	off = kv->str_offs[i];
	memcpy(&len, g->base + off, 8);
	out->ptr = (const char *)g->base + off + 8;
	out->len = len;
	return CM_OK;
}

const void *wk_gguf_arr_data(const struct wk_gguf *g, const char *key)
{
	const struct gguf_kv *kv = find_kv(g, key);

	if (!kv || kv->type != WK_GGUF_ARRAY || !wk_gguf_vtype_size(kv->elem_type))
		return NULL;
	return g->base + kv->off;
}

/* ==== tensor access ================================================= */

uint64_t wk_gguf_n_tensors(const struct wk_gguf *g)
{
	return g->n_tensors;
}

const struct wk_gguf_tensor *wk_gguf_tensor(const struct wk_gguf *g, uint64_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct wk_gguf_tensor *wk_gguf_find_tensor(const struct wk_gguf *g, const char *name)
{
	int64_t i;

	if (!g->t_index || !name)
		return NULL;
	i = wk_gguf_index_find(g->t_index, g->t_mask, name, wk_gguf_tensor_name_of, g, NULL);
	return i < 0 ? NULL : &g->tensors[i];
}
