/*
 * gemv.cuh - the decode matmul: y[t][r] = dot(W row r, x[t]) for a few
 * tokens, reading the weight in its stored type (every type of
 * dequant.cuh) and dequantising in registers.
 *
 * One warp per weight row; lane l takes the row's units l, l+32, ...
 * (16-byte loads for float types, 32-value blocks for quantised ones, four
 * units in flight per lane) and accumulates up to 8 tokens at once; the 32
 * lane sums are combined in a fixed butterfly.  The order of every
 * (row, token) reduction depends only on the row length, never on how many
 * tokens run: the kernel is batch-invariant by construction.  Tokens are
 * processed in groups of 8 along grid.y.
 */
#ifndef SLUICE_WORKER_CUDA_GEMV_CUH
#define SLUICE_WORKER_CUDA_GEMV_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/status.h"

/* Units per row are cols / (8 | 4 | 32); CM_EUNSUPPORTED for other types. */
enum cm_status wk_cu_gemv(uint32_t type, const void *w, uint64_t rows, uint64_t cols,
			  uint64_t row_bytes, const float *x, uint32_t n_tok, float *y,
			  cudaStream_t s);

/* 1 when wk_cu_gemv() runs this weight on the tensor-core kernel
 * (gemv_mma.cuh), so that several such weights may share one launch. */
int wk_cu_gemv_is_mma(uint32_t type, uint64_t cols, uint64_t row_bytes, const void *w);

#endif
