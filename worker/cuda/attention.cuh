/*
 * attention.cuh - causal attention over the paged KV cache (F16 blocks,
 * layout per layer [n_blocks][block_tokens][kv_dim]), for prefill and
 * decode alike.
 *
 * One thread block per (token, KV head): the GQA group of query heads that
 * share the KV head is handled together, so each K/V row is read once per
 * group.  Four warps split the positions 0..pos round-robin (warp w takes
 * positions w, w+4, ...); each warp keeps a flash-attention style running
 * max, sum and output per query head (lane l owns head_dim/32 dimensions),
 * and the four partial states are merged in a fixed order at the end.
 * The order of every reduction depends only on the token's position, not
 * on the batch: batch-invariant.
 * Decode rows use the split form: blockIdx.z takes chunk c of
 * WK_CU_ATT_CHUNK positions (a flash-decoding split fixed by the token's
 * position alone, so still batch-invariant), each chunk leaves its
 * unnormalised state in a scratch buffer, and a merge kernel combines the
 * chunks 0..pos/CHUNK in order.  That puts pos/CHUNK+1 blocks per KV head
 * on a long context instead of one.  Prefill rows (many tokens: enough
 * blocks already) use the single-pass form.
 * A sliding window (g->n_swa) starts the positions at pos + 1 - n_swa; the
 * split form skips the chunks wholly before it.
 * Limits: head_dim 32, 64, 96 (Phi-3), 128 or 256; group size 1, 2, 4 or 8.
 */
#ifndef SLUICE_WORKER_CUDA_ATTENTION_CUH
#define SLUICE_WORKER_CUDA_ATTENTION_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/cuda/ops.cuh"

#define WK_CU_ATT_MAX_HD 256
#define WK_CU_ATT_MAX_GROUP 8
#define WK_CU_ATT_CHUNK 256

/* q: [n][n_head*hd] F32 (already rotated); out: same shape. */
enum cm_status wk_cu_attention(const float *q, const uint32_t *pos, const uint32_t *seq,
			       const uint32_t *tables, const struct wk_cu_kvgeo *g,
			       const __half *kc, const __half *vc, float *out, uint32_t n,
			       cudaStream_t s);

/* Chunks per token for the split form: the block table's whole span. */
uint32_t wk_cu_att_chunks(const struct wk_cu_kvgeo *g);
/* Scratch: part[n][n_head][wk_cu_att_chunks(g)][head_dim + 2] floats. */
enum cm_status wk_cu_attention_split(const float *q, const uint32_t *pos, const uint32_t *seq,
				     const uint32_t *tables, const struct wk_cu_kvgeo *g,
				     const __half *kc, const __half *vc, float *out,
				     float *part, uint32_t n, cudaStream_t s);

#endif
