/*
 * backend.h - the one interface between the engine (scheduler, KV block
 * manager, sampler) and a compute backend (CPU in worker/cpu/, CUDA in
 * worker/cuda/).  The scheduler never knows which backend runs.
 *
 * A backend owns the weights in its memory, the storage of the KV cache
 * (n_blocks blocks of block_tokens tokens, for every layer, K and V) and
 * its scratch.  Which block belongs to which sequence is decided outside
 * (worker/engine/kv.h); the backend only reads and writes the blocks it is told.
 *
 * Batch invariance contract: the logits a backend returns for a token
 * depend only on the model, that token's sequence (its tokens and KV
 * content) and the backend build + hardware, never on the other sequences
 * in the batch, the batch size or the thread count.
 *
 * Threading: forward() is called from one thread at a time (the scheduler
 * thread); a backend may use its own thread pool inside.
 */
#ifndef SLUICE_WORKER_ENGINE_BACKEND_H
#define SLUICE_WORKER_ENGINE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct wk_model;

/* One sequence taking part in a forward step. */
struct wk_batch_seq {
	const uint32_t *blocks; /* block table: block id of positions [i*bt, (i+1)*bt) */
	uint32_t n_blocks;      /* entries in blocks[] (enough for every position in the batch) */
};

/*
 * A forward step over n_tokens tokens from n_seqs sequences.  The tokens of
 * one sequence are contiguous and in increasing position; positions before
 * the first one of a sequence in this batch must already be in its KV
 * blocks.  K and V of every token in the batch are written into the blocks,
 * then each token attends causally to positions 0..pos of its sequence.
 */
struct wk_batch {
	uint32_t n_tokens;
	const int32_t *tokens;   /* [n_tokens] token ids */
	const uint32_t *pos;     /* [n_tokens] position within its sequence */
	const uint32_t *seq;     /* [n_tokens] index into seqs[] */
	uint32_t n_seqs;
	const struct wk_batch_seq *seqs;
	uint32_t n_out;          /* rows of logits wanted */
	const uint32_t *out;     /* [n_out] token indices (into tokens[]) whose logits are returned */
};

struct wk_backend_info {
	const char *name;        /* "cpu", "cuda" */
	char device[128];        /* human-readable device description */
	uint64_t weight_bytes;   /* bytes of weights resident in backend memory */
	uint64_t repacked_bytes; /* CPU: bytes of weight copies repacked for its kernels */
	/* CPU, a mixture of experts: the experts' cache file mapped (bytes 0:
	 * none), whether this start wrote it, and why there is none when one
	 * was asked for ("" otherwise) */
	uint64_t expert_cache_bytes;
	int expert_cache_built;
	int64_t expert_cache_build_ns; /* the writing's time when built */
	char expert_cache_path[4200];
	char expert_cache_error[512];
	uint64_t kv_bytes;       /* bytes of KV storage */
	uint64_t mem_used;       /* device memory in use (0 when not meaningful) */
	uint64_t mem_total;      /* device memory total (0 when not meaningful) */
	/* the CUDA stack as its APIs report it (13000 = 13.0, cuBLAS 130100 =
	 * 13.1.0); 0 on other backends (worker.pin_* compare them) */
	int cuda_driver, cuda_runtime, cublas;
};

struct wk_backend;

/* How a backend is created (worker/serve/backend_open.c fills it). */
struct wk_backend_params {
	uint32_t n_blocks;       /* KV storage: blocks ... */
	uint32_t block_tokens;   /* ... of this many tokens */
	int n_threads;           /* CPU: compute threads (>= 1); others ignore it */
	int device;              /* CUDA: device index; others ignore it */
	uint32_t kv_type;        /* WK_Q_F16 (every backend) or WK_Q_F32 (CPU only) */
	int cpu_plain_weights;   /* CPU: 1 = read the mapped weights only, no repacked
				  * copies (worker.cpu_repack false); others ignore it */
	const char *cpu_expert_cache; /* CPU: directory of the experts' cache file
				       * (worker/cpu/expert_cache.h); NULL = experts read
				       * as the model file has them; others ignore it */
};

struct wk_backend_ops {
	const char *name;
	/* Creates the backend for `model`.  Writes a message into err on failure. */
	enum cm_status (*create)(const struct wk_model *model, const struct wk_backend_params *p,
				 struct wk_backend **out, char *err, size_t err_len);
	void (*destroy)(struct wk_backend *be);
	/* logits: [n_out][vocab] floats. */
	enum cm_status (*forward)(struct wk_backend *be, const struct wk_batch *b,
				  float *logits);
	/* Copies block `src` to block `dst` in every layer (copy-on-write); optional (NULL). */
	enum cm_status (*copy_block)(struct wk_backend *be, uint32_t dst, uint32_t src);
	void (*info)(const struct wk_backend *be, struct wk_backend_info *out);
	/*
	 * Optional (NULL: the backend computes in host memory): devices
	 * present, and how many KV blocks of p->block_tokens fit in `fraction`
	 * of p->device's memory left after the weights (CM_ENOTFOUND without
	 * that device).
	 */
	int (*device_count)(void);
	enum cm_status (*kv_blocks_for)(const struct wk_model *model,
					const struct wk_backend_params *p, double fraction,
					uint32_t *out);
	/*
	 * Optional (NULL: the heap): zeroed host memory that forward() copies
	 * logits into fastest (CUDA: page-locked, so the device writes it at
	 * full link speed instead of through a staging buffer).  The caller
	 * frees it with host_free before destroying the backend.
	 */
	void *(*host_alloc)(struct wk_backend *be, size_t bytes);
	void (*host_free)(struct wk_backend *be, void *p);
	/*
	 * Optional (NULL: this backend embeds nothing): the pooled,
	 * L2-normalised embeddings of n_in inputs, input i being lens[i] tokens
	 * of `tokens` (the inputs one after another), into out[i * n_embd ..].
	 * An input's vector depends only on its tokens, never on the other
	 * inputs (batch invariance).  An encoder ignores `blocks` (NULL).  A
	 * decoder with a pooling type (Qwen3-Embedding: last) runs each input
	 * causally from position 0, its K and V written into the caller's
	 * blocks (input i's ceil(lens[i] / block_tokens) of them, the inputs'
	 * lists one after another; their contents are overwritten), and pools
	 * the final-norm states.  CM_EUNSUPPORTED when the model does not embed
	 * (a decoder without pooling), CM_EINVAL for an input the model cannot
	 * take (empty, over its positions, an id outside the vocabulary, a
	 * block outside the cache).  An encoder model's forward() is
	 * CM_EUNSUPPORTED: it never generates.
	 */
	enum cm_status (*embed)(struct wk_backend *be, uint32_t n_in, const int32_t *tokens,
				const uint32_t *lens, const uint32_t *blocks, float *out);
};

/* Every backend struct starts with this header so that generic code can
 * find its ops. */
struct wk_backend {
	const struct wk_backend_ops *ops;
};

extern const struct wk_backend_ops wk_cpu_backend_ops;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The checks every backend's forward() makes before touching memory:
 * token ids below n_vocab, sequence indices in range, the block of every
 * position (and of every position before it) listed and below n_blocks,
 * output indices below n_tokens.  CM_EINVAL on the first violation;
 * *max_pos (may be NULL) the largest position in the batch (0 when empty).
 */
enum cm_status wk_batch_check(const struct wk_batch *b, uint32_t n_vocab,
			      uint32_t block_tokens, uint32_t n_blocks, uint32_t *max_pos) CM_WUR;

#ifdef __cplusplus
}
#endif

#endif
