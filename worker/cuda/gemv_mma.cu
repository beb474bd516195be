/*
 * gemv_mma.cu - see gemv_mma.cuh.
 */
#include "worker/cuda/gemv_mma.cuh"

#include <cuda_bf16.h>

#include "worker/cuda/check.cuh"

extern "C" {
#include "worker/model/quant.h"
}

#define WK_MMA_WARPS 8 /* K slices per block */
#define WK_MMA_ROWS 16 /* weight rows per block */
#define WK_MMA_U 4     /* 32-value K blocks in flight per lane */
#define WK_MMA_TILES 8 /* token tiles of 8 per block: 64 tokens */

__device__ __forceinline__ uint32_t wk_mma_pack(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ void wk_mma_16816(float c[4], uint32_t a0, uint32_t a1, uint32_t a2,
					      uint32_t a3, uint32_t b0, uint32_t b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int NT>
__global__ void __launch_bounds__(WK_MMA_WARPS * 32)
wk_cu_gemv_mma_kernel(struct wk_cu_mma_set set, uint32_t cols, uint64_t row_bytes,
		      const float *x, uint32_t n_tok)
{
	__shared__ float4 part[WK_MMA_WARPS][NT][32];
	uint32_t lane = threadIdx.x & 31, wid = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
	/* which matrix of the set this block works on: blocks [end[m-1], end[m]) */
	/* (selects, not indexing: a parameter indexed at run time goes to local memory) */
	uint32_t m = blockIdx.x >= set.blk_end[0] ? (blockIdx.x >= set.blk_end[1] ? 2 : 1) : 0;
	uint32_t blk = blockIdx.x - (m == 0 ? 0 : m == 1 ? set.blk_end[0] : set.blk_end[1]);
	uint32_t rows = m == 0 ? set.rows[0] : m == 1 ? set.rows[1] : set.rows[2];
	const uint8_t *w = m == 0 ? set.w[0] : m == 1 ? set.w[1] : set.w[2];
	float *y = m == 0 ? set.y[0] : m == 1 ? set.y[1] : set.y[2];
	uint32_t r0 = blk * WK_MMA_ROWS, t0 = blockIdx.y * (NT * 8);
	uint32_t nt = n_tok - t0 < NT * 8 ? n_tok - t0 : NT * 8;
	uint32_t ra = r0 + g < rows ? r0 + g : rows - 1;
	uint32_t rb = r0 + g + 8 < rows ? r0 + g + 8 : rows - 1;
	const uint8_t *wa = w + (uint64_t)ra * row_bytes + 16 * q;
	const uint8_t *wb = w + (uint64_t)rb * row_bytes + 16 * q;
	uint32_t nkb = cols / 32;
	uint32_t kb0 = wid * nkb / WK_MMA_WARPS, kb1 = (wid + 1) * nkb / WK_MMA_WARPS;
	float acc[NT][4];

#pragma unroll
	for (int t = 0; t < NT; t++)
		acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
	for (uint32_t kb = kb0; kb < kb1; kb += WK_MMA_U) {
		uint4 A[WK_MMA_U], B[WK_MMA_U];

		/* the weight loads of several K blocks before any use */
#pragma unroll
		for (int u = 0; u < WK_MMA_U; u++) {
			A[u] = make_uint4(0, 0, 0, 0);
			B[u] = A[u];
			if (kb + u < kb1) {
				A[u] = __ldg((const uint4 *)(wa + (uint64_t)(kb + u) * 64));
				B[u] = __ldg((const uint4 *)(wb + (uint64_t)(kb + u) * 64));
			}
		}
#pragma unroll
		for (int u = 0; u < WK_MMA_U; u++) {
			if (kb + u >= kb1)
				break;
#pragma unroll
			for (int t = 0; t < NT; t++) {
				uint32_t tl = 8 * t + g;
				float4 x0 = make_float4(0.f, 0.f, 0.f, 0.f), x1 = x0;

				if (8 * t >= nt)
					break; /* warp-uniform: no token in this tile */
				if (tl < nt) {
					const float4 *xp = (const float4 *)(x + (uint64_t)(t0 + tl) * cols +
									    (uint64_t)(kb + u) * 32 + 8 * q);
					x0 = __ldg(xp);
					x1 = __ldg(xp + 1);
				}
				wk_mma_16816(acc[t], A[u].x, B[u].x, A[u].y, B[u].y,
					     wk_mma_pack(x0.x, x0.y), wk_mma_pack(x0.z, x0.w));
				wk_mma_16816(acc[t], A[u].z, B[u].z, A[u].w, B[u].w,
					     wk_mma_pack(x1.x, x1.y), wk_mma_pack(x1.z, x1.w));
			}
		}
	}
#pragma unroll
	for (int t = 0; t < NT; t++)
		part[wid][t][lane] = make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
	__syncthreads();
	/* warp w sums tiles w, w+8, ...: slices added in order 0..7 */
	for (uint32_t t = wid; t < NT; t += WK_MMA_WARPS) {
		float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
		uint32_t n0 = 8 * t + 2 * q, rlo = r0 + g, rhi = r0 + g + 8;

		if (8 * t >= nt)
			break;
		for (int k = 0; k < WK_MMA_WARPS; k++) {
			float4 p = part[k][t][lane];

			sum.x += p.x;
			sum.y += p.y;
			sum.z += p.z;
			sum.w += p.w;
		}
		/* c0, c1: row g, tokens 2q, 2q+1; c2, c3: row g+8 */
		if (n0 < nt) {
			if (rlo < rows)
				y[(uint64_t)(t0 + n0) * rows + rlo] = sum.x;
			if (rhi < rows)
				y[(uint64_t)(t0 + n0) * rows + rhi] = sum.z;
		}
		if (n0 + 1 < nt) {
			if (rlo < rows)
				y[(uint64_t)(t0 + n0 + 1) * rows + rlo] = sum.y;
			if (rhi < rows)
				y[(uint64_t)(t0 + n0 + 1) * rows + rhi] = sum.w;
		}
	}
}

int wk_cu_gemv_mma_ok(uint32_t type, uint64_t cols, uint64_t row_bytes, const void *w)
{
	return type == WK_Q_BF16 && cols % 32 == 0 && cols > 0 && row_bytes % 16 == 0 &&
	       ((uintptr_t)w & 15) == 0;
}

enum cm_status wk_cu_gemv_mma(const void *w, uint64_t rows, uint64_t cols, uint64_t row_bytes,
			      const float *x, uint32_t n_tok, float *y, cudaStream_t s)
{
	const void *ws[1] = { w };
	uint64_t rs[1] = { rows };
	float *ys[1] = { y };

	return wk_cu_gemv_mma_multi(1, ws, rs, cols, row_bytes, x, n_tok, ys, s);
}

enum cm_status wk_cu_gemv_mma_multi(uint32_t n, const void *const *w, const uint64_t *rows,
				    uint64_t cols, uint64_t row_bytes, const float *x,
				    uint32_t n_tok, float *const *y, cudaStream_t s)
{
	struct wk_cu_mma_set set = {};
	uint64_t blocks = 0;
	dim3 grid;

	if (n_tok == 0 || n == 0)
		return CM_OK;
	if (n > 3 || cols > UINT32_MAX)
		return CM_EUNSUPPORTED;
	for (uint32_t m = 0; m < 3; m++) {
		if (m < n) {
			if (rows[m] == 0 || rows[m] > UINT32_MAX)
				return CM_EUNSUPPORTED;
			set.w[m] = (const uint8_t *)w[m];
			set.y[m] = y[m];
			set.rows[m] = (uint32_t)rows[m];
			blocks += (rows[m] + WK_MMA_ROWS - 1) / WK_MMA_ROWS;
		}
		set.blk_end[m] = (uint32_t)blocks; /* past n: never below blockIdx.x */
	}
	if (blocks > INT32_MAX)
		return CM_EUNSUPPORTED;
	grid = dim3((unsigned)blocks, 1);
	/* one tile per 8 tokens up to 64; a launch's tile count is only how
	 * many columns each mma computes, never a token's sum */
	if (n_tok <= 8)
		wk_cu_gemv_mma_kernel<1><<<grid, WK_MMA_WARPS * 32, 0, s>>>(
			set, (uint32_t)cols, row_bytes, x, n_tok);
	else if (n_tok <= 16)
		wk_cu_gemv_mma_kernel<2><<<grid, WK_MMA_WARPS * 32, 0, s>>>(
			set, (uint32_t)cols, row_bytes, x, n_tok);
	else if (n_tok <= 32)
		wk_cu_gemv_mma_kernel<4><<<grid, WK_MMA_WARPS * 32, 0, s>>>(
			set, (uint32_t)cols, row_bytes, x, n_tok);
	else {
		grid.y = (n_tok + 8 * WK_MMA_TILES - 1) / (8 * WK_MMA_TILES);
		wk_cu_gemv_mma_kernel<WK_MMA_TILES><<<grid, WK_MMA_WARPS * 32, 0, s>>>(
			set, (uint32_t)cols, row_bytes, x, n_tok);
	}
	WK_CU_LAUNCH();
	return CM_OK;
}
