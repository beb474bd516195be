/*
 * ops.cuh - the per-token kernels of the CUDA backend: embedding lookup,
 * fused RMSNorm, fused RoPE + KV-block write, SwiGLU, residual and bias
 * adds, final-row gather.
 *
 * Every kernel computes each token's output from that token's data alone
 * with a reduction order fixed by the model shape (never by the number of
 * tokens), which is what keeps the backend batch-invariant.  A token whose
 * position is WK_CU_POS_NONE is padding (CUDA-graph buckets): its KV write
 * and attention are skipped, its rows hold don't-care values.
 * Launchers enqueue on the given stream and return the launch status.
 */
#ifndef SLUICE_WORKER_CUDA_OPS_CUH
#define SLUICE_WORKER_CUDA_OPS_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"

#define WK_CU_POS_NONE 0xffffffffu

/* Geometry shared by the attention and KV kernels. */
struct wk_cu_kvgeo {
	uint32_t n_head, n_head_kv, head_dim, kv_dim;
	uint32_t block_tokens, table_stride; /* block table row length per sequence */
	float scale;                         /* of q.k: 1/sqrt(head_dim), granite's own */
	uint32_t n_swa;                      /* sliding window (0: none): a query sees the
					      * n_swa positions up to its own */
	float rope_mscale;                   /* multiplies RoPE's cos and sin (1: none) */
	float softcap;                       /* scores become c * tanh(s / c) (0: none) */
};

/* x[t] = embedding row tokens[t] (any weight type), F32. */
enum cm_status wk_cu_embed(uint32_t type, const void *w, uint64_t row_bytes, uint32_t cols,
			   const int32_t *tokens, uint32_t n, float *x, cudaStream_t s);
/* y[t] = x[src ? src[t] : t] * rsqrt(mean(x^2) + eps) * w, for t < n. */
enum cm_status wk_cu_rmsnorm(const float *x, const uint32_t *src, const float *w, float eps,
			     uint32_t dim, uint32_t n, float *y, cudaStream_t s);
/*
 * Rotates q (n_head heads) and k (n_head_kv heads) of each token at its
 * position (inv_freq[rope_dim/2] in double, positions scaled by pos_scale),
 * then writes k and v as F16 into the token's KV slot of layer storage
 * kc/vc ([n_blocks][block_tokens][kv_dim]) through the block table.
 */
enum cm_status wk_cu_rope_store(float *q, float *k, const float *v, const uint32_t *pos,
				const uint32_t *seq, const uint32_t *tables,
				const struct wk_cu_kvgeo *g, uint32_t rope_dim, int neox,
				const double *inv_freq, double pos_scale, __half *kc, __half *vc,
				uint32_t n, cudaStream_t s);
/* g[t][i] = silu(g) * u; y[t][i] += x[t][i] * scale (scale 1: exactly y += x);
 * y[t][i] += b[i]; x[i] *= scale. */
enum cm_status wk_cu_silu_mul(float *g, const float *u, uint64_t n, cudaStream_t s);
/* g = gelu_tanh(g) * u (gemma); x = c * tanh(x / c) */
enum cm_status wk_cu_gelu_mul(float *g, const float *u, uint64_t n, cudaStream_t s);
enum cm_status wk_cu_softcap(float *x, uint64_t n, float c, cudaStream_t s);
enum cm_status wk_cu_add(float *y, const float *x, uint64_t n, float scale, cudaStream_t s);
enum cm_status wk_cu_scale(float *x, uint64_t n, float scale, cudaStream_t s);
enum cm_status wk_cu_add_bias(float *y, const float *b, uint32_t dim, uint32_t n, cudaStream_t s);

#endif
