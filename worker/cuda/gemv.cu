/*
 * gemv.cu - see gemv.cuh.
 */
#include "worker/cuda/gemv.cuh"

#include <stdlib.h>
#include <string.h>

#include "worker/cuda/backend.h"
#include "worker/cuda/check.cuh"
#include "worker/cuda/dequant.cuh"
#include "worker/cuda/gemv_mma.cuh"

#define WK_CU_GEMV_WARPS 4  /* rows per thread block */
#define WK_CU_GEMV_TOK 8    /* tokens per thread block */
#define WK_CU_GEMV_INFLIGHT 4

template <int T, int NT>
__global__ void __launch_bounds__(WK_CU_GEMV_WARPS * 32)
wk_cu_gemv_kernel(const uint8_t *w, uint64_t rows, uint64_t cols, uint64_t row_bytes,
		  const float *x, uint32_t n_tok, float *y)
{
	constexpr int N = wk_cu_unit<T>::N;
	uint32_t lane = threadIdx.x & 31;
	uint64_t r = (uint64_t)blockIdx.x * WK_CU_GEMV_WARPS + (threadIdx.x >> 5);
	uint32_t t0 = blockIdx.y * WK_CU_GEMV_TOK;
	uint32_t nt = n_tok - t0 < NT ? n_tok - t0 : NT;
	uint32_t units = (uint32_t)(cols / N);
	const uint8_t *row = w + r * row_bytes;
	float acc[NT];

	if (r >= rows)
		return;
	for (int t = 0; t < NT; t++)
		acc[t] = 0.0f;
	for (uint32_t base = lane; base < units; base += 32 * WK_CU_GEMV_INFLIGHT) {
		float v[WK_CU_GEMV_INFLIGHT][N];

		/* issue the loads of several units before using any */
#pragma unroll
		for (int f = 0; f < WK_CU_GEMV_INFLIGHT; f++) {
			uint32_t u = base + 32 * f;

			if (u < units)
				wk_cu_unit<T>::get(row, u, v[f]);
		}
#pragma unroll
		for (int f = 0; f < WK_CU_GEMV_INFLIGHT; f++) {
			uint32_t u = base + 32 * f;

			if (u >= units)
				break;
#pragma unroll
			for (int t = 0; t < NT; t++) {
				if ((uint32_t)t < nt) {
					const float4 *xv = (const float4 *)(x + (uint64_t)(t0 + t) * cols +
									   (uint64_t)u * N);
					float a = acc[t];
#pragma unroll
					for (int i = 0; i < N / 4; i++) {
						float4 q = __ldg(xv + i);
						a = fmaf(v[f][4 * i], q.x, a);
						a = fmaf(v[f][4 * i + 1], q.y, a);
						a = fmaf(v[f][4 * i + 2], q.z, a);
						a = fmaf(v[f][4 * i + 3], q.w, a);
					}
					acc[t] = a;
				}
			}
		}
	}
#pragma unroll
	for (int t = 0; t < NT; t++) {
		float a = acc[t];

		for (int o = 16; o > 0; o >>= 1)
			a += __shfl_xor_sync(0xffffffffu, a, o);
		if (lane == 0 && (uint32_t)t < nt)
			y[(uint64_t)(t0 + t) * rows + r] = a;
	}
}

template <int T>
static void wk_cu_gemv_launch(const uint8_t *w, uint64_t rows, uint64_t cols,
			      uint64_t row_bytes, const float *x, uint32_t n_tok, float *y,
			      cudaStream_t s)
{
	dim3 grid((unsigned)((rows + WK_CU_GEMV_WARPS - 1) / WK_CU_GEMV_WARPS),
		  (n_tok + WK_CU_GEMV_TOK - 1) / WK_CU_GEMV_TOK);

	/* one token gets its own instantiation (fewer registers, same order) */
	if (n_tok == 1)
		wk_cu_gemv_kernel<T, 1><<<grid, WK_CU_GEMV_WARPS * 32, 0, s>>>(
			w, rows, cols, row_bytes, x, n_tok, y);
	else
		wk_cu_gemv_kernel<T, WK_CU_GEMV_TOK><<<grid, WK_CU_GEMV_WARPS * 32, 0, s>>>(
			w, rows, cols, row_bytes, x, n_tok, y);
}

/* SLUICE_CUDA_GEMV=simt keeps BF16 weights on the SIMT kernel (a
 * benchmarking switch, read once; docs/engine-cuda.md) */
static int gemv_simt_only(void)
{
	static int v = -1;

	if (v < 0) {
		const char *e = getenv("SLUICE_CUDA_GEMV");

		v = e && strcmp(e, "simt") == 0;
	}
	return v;
}

static enum cm_status gemv_path(uint32_t type, const void *w, uint64_t rows, uint64_t cols,
				uint64_t row_bytes, const float *x, uint32_t n_tok, float *y,
				cudaStream_t s, int simt)
{
	if (n_tok == 0 || rows == 0)
		return CM_OK;
	if (!simt && wk_cu_gemv_mma_ok(type, cols, row_bytes, w))
		return wk_cu_gemv_mma(w, rows, cols, row_bytes, x, n_tok, y, s);
	WK_CU_DISPATCH(type, (wk_cu_gemv_launch<WT>((const uint8_t *)w, rows, cols, row_bytes, x,
						    n_tok, y, s)));
	WK_CU_LAUNCH();
	return CM_OK;
}

int wk_cu_gemv_is_mma(uint32_t type, uint64_t cols, uint64_t row_bytes, const void *w)
{
	return !gemv_simt_only() && wk_cu_gemv_mma_ok(type, cols, row_bytes, w);
}

enum cm_status wk_cu_gemv(uint32_t type, const void *w, uint64_t rows, uint64_t cols,
			  uint64_t row_bytes, const float *x, uint32_t n_tok, float *y,
			  cudaStream_t s)
{
	return gemv_path(type, w, rows, cols, row_bytes, x, n_tok, y, s, gemv_simt_only());
}

static enum cm_status gemv_host_inner(uint32_t type, const void *w, uint64_t rows, uint64_t cols,
				      uint64_t row_bytes, const float *x, uint32_t n_tok, float *y,
				      int simt, void **dw, float **dx, float **dy)
{
	WK_CU(cudaMalloc(dw, rows * row_bytes));
	WK_CU(cudaMalloc((void **)dx, (uint64_t)n_tok * cols * sizeof(float)));
	WK_CU(cudaMalloc((void **)dy, (uint64_t)n_tok * rows * sizeof(float)));
	WK_CU(cudaMemcpy(*dw, w, rows * row_bytes, cudaMemcpyHostToDevice));
	WK_CU(cudaMemcpy(*dx, x, (uint64_t)n_tok * cols * sizeof(float), cudaMemcpyHostToDevice));
	/* poisoned: an output the kernel does not write shows as NaN */
	WK_CU(cudaMemset(*dy, 0xff, (uint64_t)n_tok * rows * sizeof(float)));
	enum cm_status st = gemv_path(type, *dw, rows, cols, row_bytes, *dx, n_tok, *dy, 0, simt);
	if (st != CM_OK)
		return st;
	WK_CU(cudaDeviceSynchronize());
	WK_CU(cudaMemcpy(y, *dy, (uint64_t)n_tok * rows * sizeof(float), cudaMemcpyDeviceToHost));
	return CM_OK;
}

extern "C" enum cm_status wk_cuda_gemv_host(int device, uint32_t type, const void *w,
					    uint64_t rows, uint64_t cols, uint64_t row_bytes,
					    const float *x, uint32_t n_tok, float *y, int simt)
{
	void *dw = NULL;
	float *dx = NULL, *dy = NULL;
	enum cm_status st;

	WK_CU(cudaSetDevice(device));
	st = gemv_host_inner(type, w, rows, cols, row_bytes, x, n_tok, y, simt, &dw, &dx, &dy);
	cudaFree(dw);
	cudaFree(dx);
	cudaFree(dy);
	return st;
}
