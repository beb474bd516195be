/*
 * moe.cuh - the mixture-of-experts FFN on the GPU (qwen3moe, Mixtral): the
 * routing of each token, the chosen experts' matrices applied per (token,
 * expert) pair straight from the 3-D expert tensors in device memory, and
 * the weighted sum per token.  The same definition as the CPU's
 * (worker/cpu/moe.h): softmax over the router logits, the top k (the lower
 * id on a tie), ids increasing, weights renormalised when asked, then
 * scaled; the outputs summed in increasing expert id.
 *
 * Batch invariance by construction: routing is one thread per token over
 * that token's logits; each (token, expert, row) dot product is one warp
 * over the row in a fixed order (the decode GEMV's, gemv.cuh) whatever the
 * number of pairs in the launch; the sum per output element runs over the
 * token's k experts in order.  No kernel reads another token's data.
 * Decode and prefill rows take the same kernels (one weight row per warp:
 * simple and exact, not the fastest for long prompts).
 */
#ifndef SLUICE_WORKER_CUDA_MOE_CUH
#define SLUICE_WORKER_CUDA_MOE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"

/*
 * ids[T][k] (increasing) and w[T][k] from logits[T][n_expert]; norm: the
 * weights renormalised to sum 1; then times scale.  k <= 64, n <= 512.
 */
enum cm_status wk_cu_moe_route(const float *logits, uint32_t T, uint32_t n_expert, uint32_t k,
			       int norm, float scale, uint32_t *ids, float *w, cudaStream_t s);

/*
 * For every pair p in [0, T k): y[p][r] = dot(W_{ids[p]} row r, x row),
 * where W_e starts at w + e * expert_stride (rows x cols, row_bytes per
 * row) and the x row is x[p / k] (x_per_pair 0: the token's input) or x[p]
 * (1: the pair's own, as the down projection takes).  CM_EUNSUPPORTED for
 * a type gemv.cuh does not read.
 */
enum cm_status wk_cu_moe_gemv(uint32_t type, const void *w, uint64_t expert_stride,
			      uint64_t rows, uint64_t cols, uint64_t row_bytes, const uint32_t *ids,
			      uint32_t T, uint32_t k, const float *x, int x_per_pair, float *y,
			      cudaStream_t s);

/*
 * out[t][i] = sum over j < k, in order, of w[t][j] y[t k + j][i] (i < e),
 * then, when sy is not NULL (qwen2moe's shared expert), plus
 * sigmoid(sg[t]) sy[t][i].
 */
enum cm_status wk_cu_moe_combine(const float *y, const float *w, uint32_t T, uint32_t k,
				 uint32_t e, const float *sy, const float *sg, float *out,
				 cudaStream_t s);

#endif
