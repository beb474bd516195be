/*
 * gemv_mma.cuh - the decode matmul for BF16 weights on the tensor cores:
 * y[t][r] = dot(W row r, bf16(x[t])) for 1..any tokens, FP32 accumulation.
 *
 * Why: the SIMT GEMV (gemv.cuh) re-reads the weights for every group of 8
 * tokens and every token re-reads its FP32 activations with FP32 FMAs, so a
 * step of 128 decoding sequences costs 16 passes over the weights.  Here a
 * block of 8 warps owns 16 weight rows; warp w takes the fixed K slice
 * [w*nkb/8, (w+1)*nkb/8) of 32-value blocks, holds the weight fragments in
 * registers and runs mma.m16n8k16 (BF16 in, FP32 accumulate) over up to 64
 * tokens (8 tiles of 8) per weight load; the 8 slice sums are added in
 * shared memory in slice order.  Token groups beyond 64 go along grid.y.
 *
 * Batch invariance: a (row, token) output is the same sequence of mma
 * instructions over the same K blocks, then the same 8-term sum, whatever
 * the number of tokens or the token's place: the tile size only decides
 * how many columns an mma computes, and a column's result does not depend
 * on the other columns.  The activations are rounded to BF16 (the GEMM path
 * does the same for BF16 weights).
 *
 * Fragment layout: lane (g = lane/4, q = lane%4) loads 16 bytes of rows g
 * and g+8 at K offset 8q of each 32-value block, and the 8 activations of
 * token g at the same offsets; mma j (0, 1) of the block takes values
 * 4j..4j+3 of each.  That is a permutation of K shared by both operands,
 * which the sum does not see.
 */
#ifndef SLUICE_WORKER_CUDA_GEMV_MMA_CUH
#define SLUICE_WORKER_CUDA_GEMV_MMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"

/* 1 when wk_cu_gemv_mma() takes this weight: BF16, cols a multiple of 32,
 * 16-byte aligned rows. */
int wk_cu_gemv_mma_ok(uint32_t type, uint64_t cols, uint64_t row_bytes, const void *w);

enum cm_status wk_cu_gemv_mma(const void *w, uint64_t rows, uint64_t cols, uint64_t row_bytes,
			      const float *x, uint32_t n_tok, float *y, cudaStream_t s);

/* Up to 3 matrices of one width over the same x in one launch (Q, K, V;
 * gate, up): y[m] = x W[m]^T.  The same per-(row, token) computation as
 * one launch each, so the result is bit for bit the same; it saves the
 * launches and the tail of the small matrices (K and V). */
struct wk_cu_mma_set {
	const uint8_t *w[3];
	float *y[3];
	uint32_t rows[3];
	uint32_t blk_end[3]; /* cumulative block counts */
};

enum cm_status wk_cu_gemv_mma_multi(uint32_t n, const void *const *w, const uint64_t *rows,
				    uint64_t cols, uint64_t row_bytes, const float *x,
				    uint32_t n_tok, float *const *y, cudaStream_t s);

#endif
