/*
 * gguf_write.h - writer of GGUF v3 files (the format is described in gguf.h).
 *
 * Used by `sluice-model synth` and by tests that craft files.  The writer
 * records metadata and tensor infos in memory, then writes the file in one
 * sequential pass (no seeking: the output may be a pipe or /dev/null):
 * header, metadata, tensor infos, padding, then each tensor's data padded
 * to the alignment.  Tensor data is either copied at add time or produced
 * at write time by a fill callback, so that a 16 GB model is streamed to
 * disk and never held in memory.
 *
 * The writer checks what it needs to lay the file out (a known type and
 * dims for add_tensor, a power-of-two alignment) but not the rest: it will
 * write duplicate keys, any value type, odd offsets (see the _raw and
 * _override functions), because tests use it to craft invalid files.  The
 * reader (gguf.c) is the validator.
 *
 * Thread: one thread per writer.
 */
#ifndef SLUICE_TOOLS_GGUF_WRITE_H
#define SLUICE_TOOLS_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/gguf.h"

struct wk_gguf_writer;

/*
 * Produces the data of tensor `index` at write time: calls
 * wk_gguf_writer_emit() until exactly the tensor's byte size was emitted.
 */
typedef enum cm_status (*wk_gguf_fill_fn)(void *ctx, struct wk_gguf_writer *w,
					  uint64_t index);

enum cm_status wk_gguf_writer_new(struct wk_gguf_writer **out) CM_WUR;
void wk_gguf_writer_free(struct wk_gguf_writer *w);

/* Version field to write (default 3; tests write 2, or anything). */
void wk_gguf_writer_set_version(struct wk_gguf_writer *w, uint32_t version);
/*
 * Layout alignment (default 32).  Also adds the key general.alignment (u32)
 * unless `add_key` is 0.  CM_EINVAL unless a power of two in [1, 1 MiB].
 */
enum cm_status wk_gguf_writer_set_alignment(struct wk_gguf_writer *w, uint32_t align,
					    int add_key) CM_WUR;

/* ---- metadata (keys are copied; no duplicate check) ---- */
enum cm_status wk_gguf_writer_add_u8(struct wk_gguf_writer *w, const char *key, uint8_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_i8(struct wk_gguf_writer *w, const char *key, int8_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_u16(struct wk_gguf_writer *w, const char *key, uint16_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_i16(struct wk_gguf_writer *w, const char *key, int16_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_u32(struct wk_gguf_writer *w, const char *key, uint32_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_i32(struct wk_gguf_writer *w, const char *key, int32_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_f32(struct wk_gguf_writer *w, const char *key, float v) CM_WUR;
enum cm_status wk_gguf_writer_add_bool(struct wk_gguf_writer *w, const char *key, int v) CM_WUR;
enum cm_status wk_gguf_writer_add_u64(struct wk_gguf_writer *w, const char *key, uint64_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_i64(struct wk_gguf_writer *w, const char *key, int64_t v) CM_WUR;
enum cm_status wk_gguf_writer_add_f64(struct wk_gguf_writer *w, const char *key, double v) CM_WUR;
enum cm_status wk_gguf_writer_add_str(struct wk_gguf_writer *w, const char *key, const char *s) CM_WUR;
enum cm_status wk_gguf_writer_add_strn(struct wk_gguf_writer *w, const char *key,
				       const char *s, size_t len) CM_WUR;
/*
 * Numeric array: `count` elements of `elem_type` (u8..f64, not string or
 * array) in host (little-endian) layout, copied.  CM_EINVAL for string or
 * array element types.
 */
enum cm_status wk_gguf_writer_add_arr(struct wk_gguf_writer *w, const char *key,
				      enum wk_gguf_vtype elem_type, const void *data,
				      uint64_t count) CM_WUR;
/* String array; lens may be NULL (then strlen each). */
enum cm_status wk_gguf_writer_add_arr_str(struct wk_gguf_writer *w, const char *key,
					  const char *const *strs, const size_t *lens,
					  uint64_t count) CM_WUR;
/*
 * Crafting: a key with value type `type` (any u32) followed by `n` raw
 * value bytes (e.g. nested arrays, bad lengths).
 */
enum cm_status wk_gguf_writer_add_raw(struct wk_gguf_writer *w, const char *key,
				      uint32_t type, const void *bytes, size_t n) CM_WUR;
uint64_t wk_gguf_writer_n_kv(const struct wk_gguf_writer *w);

/* ---- tensors ---- */
/*
 * Adds a tensor whose data is copied now.  dims innermost first, n_dims
 * 1..4; CM_EINVAL when the type is unknown, a dim is 0, dims[0] is not a
 * multiple of the block size or n_bytes is not the tensor's byte size.
 */
enum cm_status wk_gguf_writer_add_tensor(struct wk_gguf_writer *w, const char *name,
					 uint32_t type, uint32_t n_dims,
					 const uint64_t *dims, const void *data,
					 uint64_t n_bytes) CM_WUR;
/* Same, data produced at write time by fill(ctx, w, index). */
enum cm_status wk_gguf_writer_add_tensor_fill(struct wk_gguf_writer *w, const char *name,
					      uint32_t type, uint32_t n_dims,
					      const uint64_t *dims, wk_gguf_fill_fn fill,
					      void *ctx) CM_WUR;
/*
 * Crafting: writes the info fields as given (n_dims up to 8 dims written,
 * any type id) and `n_bytes` of data (copied, may be NULL: zeros).
 */
enum cm_status wk_gguf_writer_add_tensor_raw(struct wk_gguf_writer *w, const char *name,
					     uint32_t type, uint32_t n_dims,
					     const uint64_t *dims, const void *data,
					     uint64_t n_bytes) CM_WUR;
/* Crafting: the offset field written for tensor `index` (data stays put). */
void wk_gguf_writer_override_offset(struct wk_gguf_writer *w, uint64_t index,
				    uint64_t offset);
uint64_t wk_gguf_writer_n_tensors(const struct wk_gguf_writer *w);
/* Byte size of tensor `index` as laid out. */
uint64_t wk_gguf_writer_tensor_bytes(const struct wk_gguf_writer *w, uint64_t index);

/* Called from a fill callback: appends tensor data. */
enum cm_status wk_gguf_writer_emit(struct wk_gguf_writer *w, const void *p, size_t n) CM_WUR;

/* ---- output ---- */
/* Writes the whole file to `path` (created or truncated). */
enum cm_status wk_gguf_writer_write_file(struct wk_gguf_writer *w, const char *path,
					 char *err, size_t err_len) CM_WUR;
/* Writes into a cm_malloc'd buffer the caller frees with cm_free(). */
enum cm_status wk_gguf_writer_write_mem(struct wk_gguf_writer *w, uint8_t **out,
					size_t *len) CM_WUR;

#endif
