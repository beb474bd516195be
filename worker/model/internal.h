/*
 * internal.h - the parsed GGUF file (struct wk_gguf) as gguf.c (open,
 * validate) and gguf_access.c (typed reads of keys and tensors) share it;
 * and one configuration load (struct mcfg_load) as model_config.c (keys)
 * and model_tensors.c (tensors) share it.
 * Nothing outside worker/model/ includes it.  Immutable after open: any
 * thread may read it.
 */
#ifndef SLUICE_WORKER_MODEL_INTERNAL_H
#define SLUICE_WORKER_MODEL_INTERNAL_H

#include <stdint.h>

#include "worker/model/gguf.h"

struct gguf_kv {
	char *key;             /* NUL-terminated copy */
	enum wk_gguf_vtype type;
	uint64_t off;          /* file offset of the value (string: its bytes;
				  array: its first element) */
	uint64_t len;          /* string: bytes; array: element count */
	enum wk_gguf_vtype elem_type; /* arrays only */
	uint64_t *str_offs;    /* string arrays: file offset of each element's
				  u64 length prefix */
};

struct wk_gguf {
	const uint8_t *base;
	uint64_t size;
	int mapped;            /* base is our mmap */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_off;     /* start of the tensor data section */

	uint64_t n_kv;
	struct gguf_kv *kv;
	uint32_t *kv_index;    /* hash slots: kv index + 1, 0 = empty */
	uint64_t kv_mask;

	uint64_t n_tensors;
	struct wk_gguf_tensor *tensors;
	uint32_t *t_index;
	uint64_t t_mask;
};

/* Bytes of one value of a fixed-size type; 0 for strings and arrays. */
uint32_t wk_gguf_vtype_size(uint32_t t);
/* Name of key i / tensor i (the hash index's key reader). */
const char *wk_gguf_kv_name_of(const struct wk_gguf *g, uint64_t i);
const char *wk_gguf_tensor_name_of(const struct wk_gguf *g, uint64_t i);
/* Index of `name` in a hash index (slots hold index + 1), -1 when absent. */
int64_t wk_gguf_index_find(const uint32_t *slots, uint64_t mask, const char *name,
			  const char *(*name_of)(const struct wk_gguf *, uint64_t),
			  const struct wk_gguf *g, uint64_t *slot_out);

/* ---- model_config.c and model_tensors.c: one configuration load ---- */

#include <stddef.h>

#include "worker/model/model_config.h"

struct mcfg_load {
	const struct wk_gguf *g;
	struct wk_mcfg *c;
	char *err;
	size_t err_len;
	char key[128];  /* scratch for "{arch}.xxx" */
	char tname[96]; /* scratch for "blk.N.xxx" */
};

/* Writes the message into l->err; returns st. */
enum cm_status wk_mcfg_fail(struct mcfg_load *l, enum cm_status st, const char *fmt, ...)
	CM_PRINTF(3, 4);
/* 1 for the architectures that always have experts (qwen3moe, qwen2moe). */
int wk_mcfg_moe_arch(enum wk_arch a);
/* Every weight tensor of l->c's architecture (model_tensors.c). */
enum cm_status wk_mcfg_read_tensors(struct mcfg_load *l);

#endif
