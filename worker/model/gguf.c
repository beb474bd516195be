/*
 * gguf.c - validating reader for GGUF v2/v3 files (see gguf.h for the format).
 *
 * Owns: the read-only mapping (or borrows a caller buffer), a NUL-terminated
 * copy of every key and tensor name, one record per key/value and per tensor,
 * two open-addressing hash indexes (keys, tensor names) and, for every string
 * array, a table of element offsets so that element i is found in O(1).
 *
 * Open walks the whole header once and checks, before any use:
 *  - magic, version 2 or 3; tensor and kv counts against the HARD limits of
 *    common/limits.h and against the bytes left (a kv needs >= 14 bytes, a
 *    tensor info >= 33), so a hostile count cannot make us allocate;
 *  - every string length (<= CM_LIM_GGUF_STRING_BYTES_HARD and inside the
 *    file); keys 1..65535 bytes, tensor names 1..WK_GGUF_NAME_MAX bytes,
 *    neither may contain a NUL byte; duplicate keys and tensor names;
 *  - value types 0..12; bool bytes 0 or 1; array element types and counts
 *    (<= CM_LIM_GGUF_ARRAY_ELEMS_HARD, count * element size inside the
 *    file), arrays of arrays up to WK_GGUF_ARRAY_DEPTH levels;
 *  - general.alignment: type u32, a power of two in
 *    [WK_GGUF_ALIGN_MIN, WK_GGUF_ALIGN_MAX] (default 32);
 *  - tensors: n_dims 1..4, every dim >= 1, element and byte counts without
 *    overflow, type known and supported (wk_qtype_supported), innermost dim
 *    a multiple of the type's block size, offset a multiple of the
 *    alignment, data [offset, offset + n_bytes) inside the file and not
 *    overlapping another tensor.
 *
 * Thread: any; the object is immutable after open.
 */
#include "worker/model/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "common/limits.h"

#define WK_GGUF_KEY_MAX 65535u     /* bytes in a key */
#define WK_GGUF_NAME_MAX 255u      /* bytes in a tensor name */
#define WK_GGUF_ARRAY_DEPTH 8      /* nesting of arrays of arrays */
#define WK_GGUF_ALIGN_MIN 8u       /* every tensor pointer 8-byte aligned */
#define WK_GGUF_ALIGN_MAX (1u << 20)
#define WK_GGUF_ALIGN_DEFAULT 32u
#define WK_GGUF_HEADER_BYTES 24u
/* Smallest encodings: key (8 + 1) + type 4 + u8 value 1. */
#define WK_GGUF_KV_MIN_BYTES 14u
/* name (8 + 1) + n_dims 4 + one dim 8 + type 4 + offset 8. */
#define WK_GGUF_TENSOR_MIN_BYTES 33u

/* Parsing state: a cursor over the file plus the error sink. */
struct gguf_parse {
	struct wk_gguf *g;
	uint64_t pos;
	char *err;
	size_t err_len;
};

static enum cm_status gguf_fail(struct gguf_parse *p, enum cm_status st,
			   const char *fmt, ...) CM_PRINTF(3, 4);

static enum cm_status gguf_fail(struct gguf_parse *p, enum cm_status st,
			   const char *fmt, ...)
{
	va_list ap;

	if (p->err && p->err_len) {
		va_start(ap, fmt);
		vsnprintf(p->err, p->err_len, fmt, ap);
		va_end(ap);
	}
	return st;
}

/* ==== type tables ================================================== */

static const char *const vtype_names[] = {
	"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
	"string", "array", "u64", "i64", "f64",
};

static const char *vtype_name(uint32_t t)
{
	return t <= WK_GGUF_F64 ? vtype_names[t] : "unknown";
}

/* Bytes of a fixed-size value; 0 for string/array/unknown. */
uint32_t wk_gguf_vtype_size(uint32_t t)
{
	switch (t) {
	case WK_GGUF_U8: case WK_GGUF_I8: case WK_GGUF_BOOL: return 1;
	case WK_GGUF_U16: case WK_GGUF_I16: return 2;
	case WK_GGUF_U32: case WK_GGUF_I32: case WK_GGUF_F32: return 4;
	case WK_GGUF_U64: case WK_GGUF_I64: case WK_GGUF_F64: return 8;
	default: return 0;
	}
}

/*
 * ggml type names for messages about types we do not read (the ids are the
 * GGUF format's; names only, so that "Q2_K is not supported" can be said).
 */
static const char *ggml_type_name(uint32_t t)
{
	static const char *const names[] = {
		[0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1",
		[6] = "Q5_0", [7] = "Q5_1", [8] = "Q8_0", [9] = "Q8_1",
		[10] = "Q2_K", [11] = "Q3_K", [12] = "Q4_K", [13] = "Q5_K",
		[14] = "Q6_K", [15] = "Q8_K", [16] = "IQ2_XXS", [17] = "IQ2_XS",
		[18] = "IQ3_XXS", [19] = "IQ1_S", [20] = "IQ4_NL", [21] = "IQ3_S",
		[22] = "IQ2_S", [23] = "IQ4_XS", [24] = "I8", [25] = "I16",
		[26] = "I32", [27] = "I64", [28] = "F64", [29] = "IQ1_M",
		[30] = "BF16", [34] = "TQ1_0", [35] = "TQ2_0", [39] = "MXFP4",
	};

	if (t < sizeof(names) / sizeof(names[0]) && names[t])
		return names[t];
	return NULL;
}

/* ==== hash index ==================================================== */

static uint64_t hash_str(const char *s)
{
	return cm_fnv64(CM_FNV64_SEED, s, strlen(s));
}

/* Slots: a power of two >= 2n (n <= 65536, so at most 2^18 slots). */
static uint64_t index_slots(uint64_t n)
{
	uint64_t s = 16;

	while (s < 2 * n)
		s <<= 1;
	return s;
}

/*
 * Looks `name` up in an index whose entries are named by name_of(i).
 * Returns the entry index or -1; *slot_out gets the empty slot where it
 * would go.
 */
int64_t wk_gguf_index_find(const uint32_t *slots, uint64_t mask, const char *name,
			  const char *(*name_of)(const struct wk_gguf *, uint64_t),
			  const struct wk_gguf *g, uint64_t *slot_out)
{
	uint64_t i = hash_str(name) & mask;

	while (slots[i]) {
		uint64_t e = slots[i] - 1;

		if (strcmp(name_of(g, e), name) == 0)
			return (int64_t)e;
		i = (i + 1) & mask;
	}
	if (slot_out)
		*slot_out = i;
	return -1;
}

const char *wk_gguf_kv_name_of(const struct wk_gguf *g, uint64_t i)
{
	return g->kv[i].key;
}

const char *wk_gguf_tensor_name_of(const struct wk_gguf *g, uint64_t i)
{
	return g->tensors[i].name;
}

/* ==== cursor ======================================================== */

static uint64_t left(const struct gguf_parse *p)
{
	return p->g->size - p->pos;
}

static const uint8_t *at(const struct gguf_parse *p)
{
	return p->g->base + p->pos;
}

/* Reads a u32/u64 after the caller checked the bytes are there. */
static uint32_t take_u32(struct gguf_parse *p)
{
	uint32_t v;

	memcpy(&v, at(p), 4);
	p->pos += 4;
	return v;
}

static uint64_t take_u64(struct gguf_parse *p)
{
	uint64_t v;

	memcpy(&v, at(p), 8);
	p->pos += 8;
	return v;
}

/*
 * Reads a gguf string header and checks the bytes are in the file and the
 * length is within `max`.  `what` names it for the message.  On success
 * *off is the file offset of the bytes and the cursor is past them.
 */
static enum cm_status read_str(struct gguf_parse *p, const char *what,
			       uint64_t max, uint64_t *off, uint64_t *len)
{
	uint64_t n;

	if (left(p) < 8)
		return gguf_fail(p, CM_EFORMAT,
			    "%s: truncated: string length needs 8 bytes at offset %llu, "
			    "file size %llu", what, (unsigned long long)p->pos,
			    (unsigned long long)p->g->size);
	n = take_u64(p);
	if (n > max)
		return gguf_fail(p, CM_EFORMAT,
			    "%s: string length %llu exceeds the limit of %llu bytes",
			    what, (unsigned long long)n, (unsigned long long)max);
	if (n > left(p))
		return gguf_fail(p, CM_EFORMAT,
			    "%s: truncated: string of %llu bytes at offset %llu runs "
			    "past the end of the file (size %llu)", what,
			    (unsigned long long)n, (unsigned long long)p->pos,
			    (unsigned long long)p->g->size);
	*off = p->pos;
	*len = n;
	p->pos += n;
	return CM_OK;
}

/* NUL-terminated copy of a name; refuses empty, over-long or NUL-containing. */
static enum cm_status copy_name(struct gguf_parse *p, const char *what, uint64_t idx,
				uint64_t max, char **out)
{
	enum cm_status st;
	uint64_t off, len;

	st = read_str(p, what, CM_LIM_GGUF_STRING_BYTES_HARD, &off, &len);
	if (st != CM_OK)
		return st;
	if (len == 0)
		return gguf_fail(p, CM_EFORMAT, "%s #%llu: empty name", what,
			    (unsigned long long)idx);
	if (len > max)
		return gguf_fail(p, CM_EFORMAT, "%s #%llu: name of %llu bytes, expected at most %llu",
			    what, (unsigned long long)idx, (unsigned long long)len,
			    (unsigned long long)max);
	if (memchr(p->g->base + off, 0, len))
		return gguf_fail(p, CM_EFORMAT, "%s #%llu: name contains a NUL byte", what,
			    (unsigned long long)idx);
	*out = cm_strndup((const char *)p->g->base + off, len);
	if (!*out)
		return gguf_fail(p, CM_ENOMEM, "out of memory copying %s #%llu name", what,
			    (unsigned long long)idx);
	return CM_OK;
}

/* ==== metadata ====================================================== */

static enum cm_status skip_value(struct gguf_parse *p, const char *key,
				 uint32_t type, int depth);

/*
 * Validates an array body at the cursor (element type, count, elements).
 * When `kv` is given (top level) records its element type and count, and
 * for a string array builds the element offset table.
 */
static enum cm_status read_array(struct gguf_parse *p, const char *key, int depth,
				 struct gguf_kv *kv)
{
	enum cm_status st;
	uint32_t et;
	uint64_t count, min_elem, i;
	uint64_t *offs = NULL;

	if (depth >= WK_GGUF_ARRAY_DEPTH)
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': arrays nested deeper than %d levels", key,
			    WK_GGUF_ARRAY_DEPTH);
	if (left(p) < 12)
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': truncated: array header needs 12 bytes at offset "
			    "%llu, file size %llu", key, (unsigned long long)p->pos,
			    (unsigned long long)p->g->size);
	et = take_u32(p);
	count = take_u64(p);
	if (et > WK_GGUF_F64)
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': unknown array element type %u (expected 0..12)",
			    key, et);
	if (count > CM_LIM_GGUF_ARRAY_ELEMS_HARD)
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': array of %llu elements exceeds the limit of %u",
			    key, (unsigned long long)count, CM_LIM_GGUF_ARRAY_ELEMS_HARD);
	min_elem = et == WK_GGUF_STRING ? 8 : et == WK_GGUF_ARRAY ? 12 : wk_gguf_vtype_size(et);
	/* count <= 2^24 and min_elem <= 12: the product cannot overflow */
	if (count * min_elem > left(p))
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': truncated: array of %llu %s elements needs at least "
			    "%llu bytes at offset %llu, %llu left", key,
			    (unsigned long long)count, vtype_name(et),
			    (unsigned long long)(count * min_elem),
			    (unsigned long long)p->pos, (unsigned long long)left(p));
	if (kv) {
		kv->elem_type = (enum wk_gguf_vtype)et;
		kv->len = count;
		kv->off = p->pos;
	}
	if (et != WK_GGUF_STRING && et != WK_GGUF_ARRAY && et != WK_GGUF_BOOL) {
		p->pos += count * min_elem;
		return CM_OK;
	}
	if (kv && et == WK_GGUF_STRING && count) {
		offs = cm_calloc(count, sizeof(*offs));
		if (!offs)
			return gguf_fail(p, CM_ENOMEM,
				    "key '%s': out of memory for %llu string offsets", key,
				    (unsigned long long)count);
		kv->str_offs = offs;
	}
	for (i = 0; i < count; i++) {
		if (offs)
			offs[i] = p->pos;
		st = skip_value(p, key, et, depth + 1);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

/* Validates one value of type `type` at the cursor and moves past it. */
static enum cm_status skip_value(struct gguf_parse *p, const char *key,
				 uint32_t type, int depth)
{
	uint64_t off, len;
	uint32_t sz;

	if (type == WK_GGUF_STRING) {
		char what[96];

		snprintf(what, sizeof(what), "key '%s'", key);
		return read_str(p, what, CM_LIM_GGUF_STRING_BYTES_HARD, &off, &len);
	}
	if (type == WK_GGUF_ARRAY)
		return read_array(p, key, depth, NULL);
	sz = wk_gguf_vtype_size(type);
	if (!sz)
		return gguf_fail(p, CM_EFORMAT, "key '%s': unknown value type %u (expected 0..12)",
			    key, type);
	if (left(p) < sz)
		return gguf_fail(p, CM_EFORMAT,
			    "key '%s': truncated: %s value needs %u bytes at offset %llu, "
			    "file size %llu", key, vtype_name(type), sz,
			    (unsigned long long)p->pos, (unsigned long long)p->g->size);
	if (type == WK_GGUF_BOOL && *at(p) > 1)
		return gguf_fail(p, CM_EFORMAT, "key '%s': bool value %u, expected 0 or 1", key,
			    *at(p));
	p->pos += sz;
	return CM_OK;
}

static enum cm_status read_kvs(struct gguf_parse *p)
{
	struct wk_gguf *g = p->g;
	enum cm_status st;
	uint64_t i, slot;

	g->kv = cm_calloc(g->n_kv ? g->n_kv : 1, sizeof(*g->kv));
	g->kv_mask = index_slots(g->n_kv) - 1;
	g->kv_index = cm_calloc(g->kv_mask + 1, sizeof(*g->kv_index));
	if (!g->kv || !g->kv_index)
		return gguf_fail(p, CM_ENOMEM, "out of memory for %llu metadata entries",
			    (unsigned long long)g->n_kv);
	for (i = 0; i < g->n_kv; i++) {
		struct gguf_kv *kv = &g->kv[i];
		uint32_t type;

		st = copy_name(p, "key", i, WK_GGUF_KEY_MAX, &kv->key);
		if (st != CM_OK)
			return st;
		if (wk_gguf_index_find(g->kv_index, g->kv_mask, kv->key, wk_gguf_kv_name_of, g, &slot) >= 0)
			return gguf_fail(p, CM_EFORMAT, "key '%s': duplicate key (entry #%llu)",
				    kv->key, (unsigned long long)i);
		g->kv_index[slot] = (uint32_t)(i + 1);
		if (left(p) < 4)
			return gguf_fail(p, CM_EFORMAT,
				    "key '%s': truncated: value type needs 4 bytes at offset "
				    "%llu, file size %llu", kv->key,
				    (unsigned long long)p->pos, (unsigned long long)g->size);
		type = take_u32(p);
		if (type > WK_GGUF_F64)
			return gguf_fail(p, CM_EFORMAT,
				    "key '%s': unknown value type %u (expected 0..12)",
				    kv->key, type);
		kv->type = (enum wk_gguf_vtype)type;
		kv->off = p->pos;
		if (type == WK_GGUF_ARRAY) {
			st = read_array(p, kv->key, 0, kv);
		} else if (type == WK_GGUF_STRING) {
			char what[96];

			snprintf(what, sizeof(what), "key '%s'", kv->key);
			st = read_str(p, what, CM_LIM_GGUF_STRING_BYTES_HARD, &kv->off,
				      &kv->len);
		} else {
			st = skip_value(p, kv->key, type, 0);
		}
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

static enum cm_status read_alignment(struct gguf_parse *p)
{
	struct wk_gguf *g = p->g;
	int64_t i = wk_gguf_find_key(g, "general.alignment");
	uint32_t a;

	g->alignment = WK_GGUF_ALIGN_DEFAULT;
	if (i < 0)
		return CM_OK;
	if (g->kv[i].type != WK_GGUF_U32)
		return gguf_fail(p, CM_EFORMAT, "key 'general.alignment': expected type u32, found %s",
			    vtype_name(g->kv[i].type));
	memcpy(&a, g->base + g->kv[i].off, 4);
	if (a < WK_GGUF_ALIGN_MIN || a > WK_GGUF_ALIGN_MAX || (a & (a - 1)))
		return gguf_fail(p, CM_EFORMAT,
			    "key 'general.alignment': expected a power of two in [%u, %u], "
			    "found %u", WK_GGUF_ALIGN_MIN, WK_GGUF_ALIGN_MAX, a);
	g->alignment = a;
	return CM_OK;
}

/* ==== tensors ======================================================= */

static enum cm_status read_tensor_info(struct gguf_parse *p, uint64_t i, uint64_t *rel_off)
{
	struct wk_gguf *g = p->g;
	struct wk_gguf_tensor *t = &g->tensors[i];
	char *name = NULL;
	enum cm_status st;
	uint32_t n_dims, type, d;
	uint64_t n = 1, slot, row_bytes, rows;

	st = copy_name(p, "tensor", i, WK_GGUF_NAME_MAX, &name);
	if (st != CM_OK)
		return st;
	t->name = name;
	if (wk_gguf_index_find(g->t_index, g->t_mask, name, wk_gguf_tensor_name_of, g, &slot) >= 0)
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': duplicate tensor name (entry #%llu)",
			    name, (unsigned long long)i);
	g->t_index[slot] = (uint32_t)(i + 1);
	if (left(p) < 4)
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': truncated: n_dims needs 4 bytes at "
			    "offset %llu, file size %llu", name, (unsigned long long)p->pos,
			    (unsigned long long)g->size);
	n_dims = take_u32(p);
	if (n_dims < 1 || n_dims > CM_LIM_GGUF_DIMS_HARD)
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': n_dims %u, expected 1..%d", name,
			    n_dims, CM_LIM_GGUF_DIMS_HARD);
	if (left(p) < (uint64_t)n_dims * 8 + 12)
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': truncated: %u dims, type and offset "
			    "need %u bytes at offset %llu, file size %llu", name, n_dims,
			    n_dims * 8 + 12, (unsigned long long)p->pos,
			    (unsigned long long)g->size);
	t->n_dims = n_dims;
	for (d = 0; d < 4; d++)
		t->dims[d] = 1;
	for (d = 0; d < n_dims; d++) {
		uint64_t v = take_u64(p);

		if (v == 0)
			return gguf_fail(p, CM_EFORMAT, "tensor '%s': dim %u is 0, expected >= 1",
				    name, d);
		if (v > (uint64_t)INT64_MAX || __builtin_mul_overflow(n, v, &n) ||
		    n > (uint64_t)INT64_MAX)
			return gguf_fail(p, CM_EFORMAT, "tensor '%s': element count overflows "
				    "at dim %u (%llu)", name, d, (unsigned long long)v);
		t->dims[d] = v;
	}
	t->n_elems = n;
	type = take_u32(p);
	*rel_off = take_u64(p);
	if (!ggml_type_name(type))
		return gguf_fail(p, CM_EUNSUPPORTED, "tensor '%s': unknown type id %u", name, type);
	if (!wk_qtype_supported(type))
		return gguf_fail(p, CM_EUNSUPPORTED,
			    "tensor '%s': weight type %s (id %u) is not supported (supported: "
			    "F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K)", name,
			    ggml_type_name(type), type);
	t->type = (enum wk_qtype)type;
	if (t->dims[0] % wk_qtype_block_elems(type))
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': innermost dim %llu is not a multiple "
			    "of the %s block size %u", name, (unsigned long long)t->dims[0],
			    wk_qtype_name(type), wk_qtype_block_elems(type));
	row_bytes = wk_qtype_row_bytes(type, t->dims[0]);
	rows = n / t->dims[0];
	if (row_bytes == 0 || __builtin_mul_overflow(row_bytes, rows, &t->n_bytes))
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': byte size overflows", name);
	if (*rel_off % g->alignment)
		return gguf_fail(p, CM_EFORMAT, "tensor '%s': offset %llu is not a multiple of "
			    "the alignment %u", name, (unsigned long long)*rel_off,
			    g->alignment);
	return CM_OK;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int cmp_by_data(const void *a, const void *b, void *ctx)
{
	const struct wk_gguf_tensor *t = ctx;
	const uint8_t *pa = t[*(const uint32_t *)a].data;
	const uint8_t *pb = t[*(const uint32_t *)b].data;

	return pa < pb ? -1 : pa > pb;
}

static enum cm_status read_tensors(struct gguf_parse *p)
{
	struct wk_gguf *g = p->g;
	enum cm_status st;
	uint64_t *rel = NULL, i;
	uint32_t *order = NULL;

	g->tensors = cm_calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*g->tensors));
	g->t_mask = index_slots(g->n_tensors) - 1;
	g->t_index = cm_calloc(g->t_mask + 1, sizeof(*g->t_index));
	rel = cm_calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*rel));
	order = cm_calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*order));
	if (!g->tensors || !g->t_index || !rel || !order) {
		st = gguf_fail(p, CM_ENOMEM, "out of memory for %llu tensors",
			  (unsigned long long)g->n_tensors);
		goto out;
	}
	for (i = 0; i < g->n_tensors; i++) {
		st = read_tensor_info(p, i, &rel[i]);
		if (st != CM_OK)
			goto out;
	}
	/* data section: after the infos, padded to the alignment */
	g->data_off = (p->pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors && g->data_off > g->size) {
		st = gguf_fail(p, CM_EFORMAT, "truncated: tensor data section starts at %llu, "
			  "past the end of the file (size %llu)",
			  (unsigned long long)g->data_off, (unsigned long long)g->size);
		goto out;
	}
	for (i = 0; i < g->n_tensors; i++) {
		struct wk_gguf_tensor *t = &g->tensors[i];
		uint64_t room = g->size - g->data_off;

		if (rel[i] > room || t->n_bytes > room - rel[i]) {
			uint64_t start = sat_add(g->data_off, rel[i]);

			st = gguf_fail(p, CM_EFORMAT, "tensor '%s': data [%llu, %llu) runs past the "
				  "end of the file (size %llu)", t->name,
				  (unsigned long long)start,
				  (unsigned long long)sat_add(start, t->n_bytes),
				  (unsigned long long)g->size);
			goto out;
		}
		t->data = g->base + g->data_off + rel[i];
		order[i] = (uint32_t)i;
	}
	qsort_r(order, g->n_tensors, sizeof(*order), cmp_by_data, g->tensors);
	for (i = 1; i < g->n_tensors; i++) {
		const struct wk_gguf_tensor *a = &g->tensors[order[i - 1]];
		const struct wk_gguf_tensor *b = &g->tensors[order[i]];

		if ((const uint8_t *)a->data + a->n_bytes > (const uint8_t *)b->data) {
			st = gguf_fail(p, CM_EFORMAT, "tensor '%s': data [%llu, %llu) overlaps "
				  "tensor '%s' [%llu, %llu)", b->name,
				  (unsigned long long)((const uint8_t *)b->data - g->base),
				  (unsigned long long)((const uint8_t *)b->data - g->base + b->n_bytes),
				  a->name,
				  (unsigned long long)((const uint8_t *)a->data - g->base),
				  (unsigned long long)((const uint8_t *)a->data - g->base + a->n_bytes));
			goto out;
		}
	}
	st = CM_OK;
out:
	cm_free(rel);
	cm_free(order);
	return st;
}

/* ==== open / close ================================================== */

static enum cm_status gguf_parse_all(struct wk_gguf *g, char *err, size_t err_len)
{
	struct gguf_parse p = { .g = g, .pos = 0, .err = err, .err_len = err_len };
	enum cm_status st;
	uint64_t rest;

	if (g->size < WK_GGUF_HEADER_BYTES)
		return gguf_fail(&p, CM_EFORMAT, "truncated: header needs %u bytes, file size %llu",
			    WK_GGUF_HEADER_BYTES, (unsigned long long)g->size);
	if (memcmp(g->base, "GGUF", 4) != 0)
		return gguf_fail(&p, CM_EFORMAT,
			    "bad magic: expected \"GGUF\" (47 47 55 46), found %02x %02x %02x %02x",
			    g->base[0], g->base[1], g->base[2], g->base[3]);
	p.pos = 4;
	g->version = take_u32(&p);
	if (g->version != 2 && g->version != 3)
		return gguf_fail(&p, CM_EUNSUPPORTED,
			    "unsupported GGUF version %u (expected 2 or 3%s)", g->version,
			    g->version > 0xffff ? "; a big-endian file?" : "");
	g->n_tensors = take_u64(&p);
	g->n_kv = take_u64(&p);
	rest = left(&p);
	if (g->n_kv > CM_LIM_GGUF_KV_PAIRS_HARD)
		return gguf_fail(&p, CM_EFORMAT, "metadata count %llu exceeds the limit of %d",
			    (unsigned long long)g->n_kv, CM_LIM_GGUF_KV_PAIRS_HARD);
	if (g->n_tensors > CM_LIM_GGUF_TENSORS_HARD)
		return gguf_fail(&p, CM_EFORMAT, "tensor count %llu exceeds the limit of %d",
			    (unsigned long long)g->n_tensors, CM_LIM_GGUF_TENSORS_HARD);
	if (g->n_kv * WK_GGUF_KV_MIN_BYTES + g->n_tensors * WK_GGUF_TENSOR_MIN_BYTES > rest)
		return gguf_fail(&p, CM_EFORMAT,
			    "truncated: %llu metadata entries and %llu tensor infos need at "
			    "least %llu bytes, %llu left after the header",
			    (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors,
			    (unsigned long long)(g->n_kv * WK_GGUF_KV_MIN_BYTES +
						 g->n_tensors * WK_GGUF_TENSOR_MIN_BYTES),
			    (unsigned long long)rest);
	st = read_kvs(&p);
	if (st != CM_OK)
		return st;
	st = read_alignment(&p);
	if (st != CM_OK)
		return st;
	return read_tensors(&p);
}

static enum cm_status open_common(struct wk_gguf *g, struct wk_gguf **out, char *err,
				  size_t err_len)
{
	enum cm_status st;

	if (err && err_len)
		err[0] = '\0';
	st = gguf_parse_all(g, err, err_len);
	if (st != CM_OK) {
		wk_gguf_close(g);
		return st;
	}
	*out = g;
	return CM_OK;
}

enum cm_status wk_gguf_open_mem(const void *data, size_t len, struct wk_gguf **out,
				char *err, size_t err_len)
{
	struct wk_gguf *g;

	*out = NULL;
	g = cm_calloc(1, sizeof(*g));
	if (!g) {
		if (err && err_len)
			snprintf(err, err_len, "out of memory");
		return CM_ENOMEM;
	}
	g->base = data ? data : (const uint8_t *)"";
	g->size = data ? len : 0;
	return open_common(g, out, err, err_len);
}

enum cm_status wk_gguf_open(const char *path, struct wk_gguf **out, char *err,
			    size_t err_len)
{
	struct wk_gguf *g;
	struct stat sb;
	void *map;
	int fd;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below */
	if (fd < 0) {
		int e = errno;

		if (err && err_len)
			snprintf(err, err_len, "%s: cannot open: %s", path, strerror(e));
		return e == ENOENT ? CM_ENOTFOUND : CM_EIO;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		if (err && err_len)
			snprintf(err, err_len, "%s: not a regular file", path);
		close(fd);
		return CM_EIO;
	}
	if (sb.st_size < WK_GGUF_HEADER_BYTES) {
		if (err && err_len)
			snprintf(err, err_len,
				 "%s: truncated: header needs %u bytes, file size %lld", path,
				 WK_GGUF_HEADER_BYTES, (long long)sb.st_size);
		close(fd);
		return CM_EFORMAT;
	}
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		if (err && err_len)
			snprintf(err, err_len, "%s: mmap failed: %s", path, strerror(errno));
		return CM_EIO;
	}
	g = cm_calloc(1, sizeof(*g));
	if (!g) {
		munmap(map, (size_t)sb.st_size);
		if (err && err_len)
			snprintf(err, err_len, "out of memory");
		return CM_ENOMEM;
	}
	g->base = map;
	g->size = (uint64_t)sb.st_size;
	g->mapped = 1;
	return open_common(g, out, err, err_len);
}

void wk_gguf_close(struct wk_gguf *g)
{
	uint64_t i;

	if (!g)
		return;
	if (g->kv) {
		for (i = 0; i < g->n_kv; i++) {
			cm_free(g->kv[i].key);
			cm_free(g->kv[i].str_offs);
		}
	}
	if (g->tensors) {
		for (i = 0; i < g->n_tensors; i++)
			cm_free((char *)g->tensors[i].name);
	}
	cm_free(g->kv);
	cm_free(g->kv_index);
	cm_free(g->tensors);
	cm_free(g->t_index);
	if (g->mapped)
		munmap((void *)g->base, (size_t)g->size);
	cm_free(g);
}
