/*
 * gguf.h - reader for GGUF model files (versions 2 and 3), memory-mapped.
 *
 * The format, little-endian throughout:
 *  1. magic "GGUF" (4 bytes), version u32 (2 or 3), tensor count u64,
 *     metadata key/value count u64.
 *  2. metadata: key (gguf string: u64 length + bytes), value type u32,
 *     value.  Types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
 *     8 string, 9 array (element type u32, count u64, elements; arrays of
 *     arrays allowed), 10 u64, 11 i64, 12 f64.
 *  3. tensor infos: name (string), n_dims u32 (1..4), dims u64[n_dims]
 *     (innermost first), type u32 (ggml type id), offset u64 (relative to
 *     the data section, multiple of the alignment).
 *  4. padding to `general.alignment` (u32, default 32, a power of two), then
 *     the tensor data section.
 *
 * Every count, length, rank, dimension, type, offset and alignment is
 * checked against the file size and against overflow before use; tensor
 * data ranges must lie inside the file and must not overlap.  A malformed
 * file is an error message naming the key or tensor, never a crash.
 *
 * Ownership: struct wk_gguf owns the mapping; every pointer it hands out
 * (strings, arrays, tensor data) lives until wk_gguf_close().  Read-only
 * after open: safe to share between threads.
 */
#ifndef SLUICE_WORKER_MODEL_GGUF_H
#define SLUICE_WORKER_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/quant.h"

enum wk_gguf_vtype {
	WK_GGUF_U8 = 0, WK_GGUF_I8 = 1, WK_GGUF_U16 = 2, WK_GGUF_I16 = 3,
	WK_GGUF_U32 = 4, WK_GGUF_I32 = 5, WK_GGUF_F32 = 6, WK_GGUF_BOOL = 7,
	WK_GGUF_STRING = 8, WK_GGUF_ARRAY = 9, WK_GGUF_U64 = 10,
	WK_GGUF_I64 = 11, WK_GGUF_F64 = 12,
};

struct wk_gguf;

struct wk_gguf_str {
	const char *ptr; /* not NUL-terminated: points into the mapping */
	uint64_t len;
};

struct wk_gguf_tensor {
	const char *name;      /* NUL-terminated copy owned by the reader */
	enum wk_qtype type;
	uint32_t n_dims;
	uint64_t dims[4];      /* innermost first; unused dims are 1 */
	uint64_t n_elems;
	uint64_t n_bytes;
	const void *data;      /* inside the mapping */
};

/*
 * Opens and validates `path`.  On failure returns an error status and
 * writes a message into err[err_len] ("tensor 'blk.0.attn_q.weight': data
 * [a, b) runs past the end of the file (size n)").
 */
enum cm_status wk_gguf_open(const char *path, struct wk_gguf **out,
			    char *err, size_t err_len) CM_WUR;
/* Same over a caller-owned buffer (fuzzers, tests); the buffer must outlive it. */
enum cm_status wk_gguf_open_mem(const void *data, size_t len, struct wk_gguf **out,
				char *err, size_t err_len) CM_WUR;
void wk_gguf_close(struct wk_gguf *g);

uint32_t wk_gguf_version(const struct wk_gguf *g);
uint64_t wk_gguf_file_size(const struct wk_gguf *g);

/* ---- metadata ---- */
/* Index of `key` or -1. */
int64_t wk_gguf_find_key(const struct wk_gguf *g, const char *key);
uint64_t wk_gguf_n_kv(const struct wk_gguf *g);
const char *wk_gguf_key_name(const struct wk_gguf *g, uint64_t i);
enum wk_gguf_vtype wk_gguf_key_type(const struct wk_gguf *g, uint64_t i);

/*
 * Typed getters.  Each returns CM_ENOTFOUND when the key is absent and
 * CM_EFORMAT when it has another type (integer getters accept any integer
 * type whose value fits).
 */
enum cm_status wk_gguf_get_u32(const struct wk_gguf *g, const char *key, uint32_t *out) CM_WUR;
enum cm_status wk_gguf_get_u64(const struct wk_gguf *g, const char *key, uint64_t *out) CM_WUR;
enum cm_status wk_gguf_get_i64(const struct wk_gguf *g, const char *key, int64_t *out) CM_WUR;
enum cm_status wk_gguf_get_f32(const struct wk_gguf *g, const char *key, float *out) CM_WUR;
enum cm_status wk_gguf_get_bool(const struct wk_gguf *g, const char *key, int *out) CM_WUR;
enum cm_status wk_gguf_get_str(const struct wk_gguf *g, const char *key, struct wk_gguf_str *out) CM_WUR;

/* Arrays: element type and count, then element access by index. */
enum cm_status wk_gguf_get_arr(const struct wk_gguf *g, const char *key,
			       enum wk_gguf_vtype *elem_type, uint64_t *count) CM_WUR;
/* String element i of a string array (validated at open). */
enum cm_status wk_gguf_arr_str(const struct wk_gguf *g, const char *key, uint64_t i,
			       struct wk_gguf_str *out) CM_WUR;
/*
 * Raw pointer to the elements of a fixed-size numeric array (u8..f64,
 * little-endian, possibly unaligned: use memcpy).  NULL for string arrays.
 */
const void *wk_gguf_arr_data(const struct wk_gguf *g, const char *key);

/* ---- tensors ---- */
uint64_t wk_gguf_n_tensors(const struct wk_gguf *g);
const struct wk_gguf_tensor *wk_gguf_tensor(const struct wk_gguf *g, uint64_t i);
/* NULL when absent. */
const struct wk_gguf_tensor *wk_gguf_find_tensor(const struct wk_gguf *g, const char *name);

#endif
