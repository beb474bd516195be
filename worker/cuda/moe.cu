/*
 * moe.cu - see moe.cuh.
 */
#include "worker/cuda/moe.cuh"

#include "worker/cuda/check.cuh"
#include "worker/cuda/dequant.cuh"

#define WK_CU_MOE_WARPS 4    /* weight rows per thread block */
#define WK_CU_MOE_PAIRS 65535 /* grid.y limit: more pairs loop */

__global__ void wk_cu_moe_route_kernel(const float *logits, uint32_t T, uint32_t n, uint32_t k,
				       int norm, float scale, uint32_t *ids, float *w)
{
	uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;

	if (t >= T)
		return;
	const float *lg = logits + (uint64_t)t * n;
	uint32_t *id = ids + (uint64_t)t * k;
	float *wt = w + (uint64_t)t * k;
	float mx = lg[0], sum = 0.0f, chosen = 0.0f;

	for (uint32_t e = 1; e < n; e++)
		mx = lg[e] > mx ? lg[e] : mx;
	for (uint32_t e = 0; e < n; e++)
		sum += expf(lg[e] - mx);
	for (uint32_t j = 0; j < k; j++) {
		uint32_t best = n;

		for (uint32_t e = 0; e < n; e++) {
			bool taken = false;

			for (uint32_t i = 0; i < j && !taken; i++)
				taken = id[i] == e;
			if (!taken && (best == n || lg[e] > lg[best]))
				best = e;
		}
		id[j] = best;
	}
	for (uint32_t j = 1; j < k; j++) /* increasing id: the order of the sum */
		for (uint32_t i = j; i > 0 && id[i - 1] > id[i]; i--) {
			uint32_t x = id[i];

			id[i] = id[i - 1];
			id[i - 1] = x;
		}
	for (uint32_t j = 0; j < k; j++) {
		wt[j] = expf(lg[id[j]] - mx) / sum;
		chosen += wt[j];
	}
	for (uint32_t j = 0; j < k; j++)
		wt[j] = (norm ? wt[j] / chosen : wt[j]) * scale;
}

enum cm_status wk_cu_moe_route(const float *logits, uint32_t T, uint32_t n_expert, uint32_t k,
			       int norm, float scale, uint32_t *ids, float *w, cudaStream_t s)
{
	if (T == 0)
		return CM_OK;
	if (k == 0 || k > 64 || k > n_expert || n_expert > 512)
		return CM_EINVAL;
	wk_cu_moe_route_kernel<<<(T + 127) / 128, 128, 0, s>>>(logits, T, n_expert, k, norm, scale,
							      ids, w);
	WK_CU_LAUNCH();
	return CM_OK;
}

/* one warp per (pair, weight row); lanes over the row's units, then the
 * fixed butterfly: gemv.cuh's order for one token */
template <int T>
__global__ void __launch_bounds__(WK_CU_MOE_WARPS * 32)
wk_cu_moe_gemv_kernel(const uint8_t *w, uint64_t stride, uint64_t rows, uint64_t cols,
		      uint64_t row_bytes, const uint32_t *ids, uint32_t n_pairs, uint32_t k,
		      const float *x, int x_per_pair, float *y)
{
	constexpr int N = wk_cu_unit<T>::N;
	uint32_t lane = threadIdx.x & 31;
	uint64_t r = (uint64_t)blockIdx.x * WK_CU_MOE_WARPS + (threadIdx.x >> 5);
	uint32_t units = (uint32_t)(cols / N);

	if (r >= rows)
		return;
	for (uint32_t p = blockIdx.y; p < n_pairs; p += gridDim.y) {
		const uint8_t *row = w + (uint64_t)ids[p] * stride + r * row_bytes;
		const float *xr = x + (uint64_t)(x_per_pair ? p : p / k) * cols;
		float acc = 0.0f;

		for (uint32_t u = lane; u < units; u += 32) {
			float v[N];
			const float4 *xv = (const float4 *)(xr + (uint64_t)u * N);

			wk_cu_unit<T>::get(row, u, v);
#pragma unroll
			for (int i = 0; i < N / 4; i++) {
				float4 q = __ldg(xv + i);

				acc = fmaf(v[4 * i], q.x, acc);
				acc = fmaf(v[4 * i + 1], q.y, acc);
				acc = fmaf(v[4 * i + 2], q.z, acc);
				acc = fmaf(v[4 * i + 3], q.w, acc);
			}
		}
		for (int o = 16; o > 0; o >>= 1)
			acc += __shfl_xor_sync(0xffffffffu, acc, o);
		if (lane == 0)
			y[(uint64_t)p * rows + r] = acc;
	}
}

enum cm_status wk_cu_moe_gemv(uint32_t type, const void *w, uint64_t expert_stride,
			      uint64_t rows, uint64_t cols, uint64_t row_bytes, const uint32_t *ids,
			      uint32_t T, uint32_t k, const float *x, int x_per_pair, float *y,
			      cudaStream_t s)
{
	uint32_t n_pairs = T * k;
	dim3 grid((unsigned)((rows + WK_CU_MOE_WARPS - 1) / WK_CU_MOE_WARPS),
		  n_pairs < WK_CU_MOE_PAIRS ? n_pairs : WK_CU_MOE_PAIRS);

	if (n_pairs == 0 || rows == 0)
		return CM_OK;
	WK_CU_DISPATCH(type, (wk_cu_moe_gemv_kernel<WT><<<grid, WK_CU_MOE_WARPS * 32, 0, s>>>(
				     (const uint8_t *)w, expert_stride, rows, cols, row_bytes, ids,
				     n_pairs, k, x, x_per_pair, y)));
	WK_CU_LAUNCH();
	return CM_OK;
}

__global__ void wk_cu_moe_combine_kernel(const float *y, const float *w, uint32_t T, uint32_t k,
					 uint32_t e, const float *sy, const float *sg, float *out)
{
	uint64_t idx = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= (uint64_t)T * e)
		return;
	uint64_t t = idx / e, i = idx % e;
	float a = 0.0f;

	for (uint32_t j = 0; j < k; j++)
		a = fmaf(w[t * k + j], y[(t * k + j) * e + i], a);
	if (sy) /* the shared expert, after the routed ones (as the CPU) */
		a += 1.0f / (1.0f + expf(-sg[t])) * sy[idx];
	out[idx] = a;
}

enum cm_status wk_cu_moe_combine(const float *y, const float *w, uint32_t T, uint32_t k,
				 uint32_t e, const float *sy, const float *sg, float *out,
				 cudaStream_t s)
{
	uint64_t n = (uint64_t)T * e;

	if (n == 0)
		return CM_OK;
	wk_cu_moe_combine_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(y, w, T, k, e, sy, sg,
									       out);
	WK_CU_LAUNCH();
	return CM_OK;
}
