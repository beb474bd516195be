/*
 * gemm.cuh - the prefill matmul: Y[t][r] = X[t] . W[r] for many tokens on
 * the tensor cores through cuBLASLt, FP32 accumulation, FP32 output.
 *
 * Operand types: BF16 weights and every quantised type run as BF16 x BF16
 * (quantised weights are dequantised tile by tile -- WK_CU_GEMM_TILE_BYTES
 * of BF16 rows at a time -- into a scratch buffer, then multiplied); F16
 * weights as F16 x F16; F32 weights as F32 x F32 (no TF32).  Activations
 * are converted from F32 into the operand type first.
 *
 * Batch invariance: for each (operand type, rows, cols) the algorithm is
 * chosen ONCE (heuristic at a reference M), split-K forced to 1, and then
 * used for every token count, so the K-order of every output element's
 * reduction does not depend on how many tokens share the call.  Tiling
 * along rows (dequant tiles) does not change any element's K-order either.
 *
 * Thread: the owner's (the backend's forward thread); not re-entrant.
 */
#ifndef SLUICE_WORKER_CUDA_GEMM_CUH
#define SLUICE_WORKER_CUDA_GEMM_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"

#define WK_CU_GEMM_TILE_BYTES (64ull << 20)

struct wk_cu_gemm;

/* max_cols: the longest row of any weight; max_tok: tokens per call. */
enum cm_status wk_cu_gemm_new(cudaStream_t s, uint64_t max_cols, uint32_t max_tok,
			      struct wk_cu_gemm **out);
/* Grows the activation buffer to max_tok tokens; the pinned algorithms are kept. */
enum cm_status wk_cu_gemm_reserve(struct wk_cu_gemm *g, uint32_t max_tok);
void wk_cu_gemm_free(struct wk_cu_gemm *g);
/* Device bytes of the helper's scratch. */
uint64_t wk_cu_gemm_scratch_bytes(uint64_t max_cols, uint32_t max_tok);

enum cm_status wk_cu_gemm_run(struct wk_cu_gemm *g, uint32_t type, const void *w, uint64_t rows,
			  uint64_t cols, uint64_t row_bytes, const float *x, uint32_t n_tok,
			  float *y);

#endif
