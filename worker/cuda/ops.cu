/*
 * ops.cu - see ops.cuh.  One thread block per token for the row kernels
 * (embedding, norm, rope); grid-stride loops for the elementwise ones.
 * The RMSNorm sum is accumulated in double per thread over a fixed
 * strided set of elements and combined in a fixed tree, so the result for
 * a token depends only on its row and the block size (a constant).
 */
#include "worker/cuda/ops.cuh"

#include <cuda_fp16.h>

#include "worker/cuda/check.cuh"
#include "worker/cuda/dequant.cuh"

#define WK_CU_ROW_THREADS 256

template <int T>
__global__ void wk_cu_embed_kernel(const uint8_t *w, uint64_t row_bytes, uint32_t cols,
				   const int32_t *tokens, float *x)
{
	uint32_t t = blockIdx.x;
	const uint8_t *row = w + (uint64_t)tokens[t] * row_bytes;
	float *out = x + (uint64_t)t * cols;
	constexpr int N = wk_cu_unit<T>::N;
	float v[N];

	for (uint32_t u = threadIdx.x; u < cols / N; u += blockDim.x) {
		wk_cu_unit<T>::get(row, u, v);
		for (int i = 0; i < N; i++)
			out[(uint64_t)u * N + i] = v[i];
	}
}

enum cm_status wk_cu_embed(uint32_t type, const void *w, uint64_t row_bytes, uint32_t cols,
			   const int32_t *tokens, uint32_t n, float *x, cudaStream_t s)
{
	if (n == 0)
		return CM_OK;
	WK_CU_DISPATCH(type, (wk_cu_embed_kernel<WT><<<n, 128, 0, s>>>(
		(const uint8_t *)w, row_bytes, cols, tokens, x)));
	WK_CU_LAUNCH();
	return CM_OK;
}

__global__ void wk_cu_rmsnorm_kernel(const float *x, const uint32_t *src, const float *w,
				     float eps, uint32_t dim, float *y)
{
	__shared__ double part[WK_CU_ROW_THREADS];
	uint32_t t = blockIdx.x;
	const float *xr = x + (uint64_t)(src ? src[t] : t) * dim;
	float *yr = y + (uint64_t)t * dim;
	double ss = 0;
	float scale;

	for (uint32_t i = threadIdx.x; i < dim; i += WK_CU_ROW_THREADS)
		ss += (double)xr[i] * xr[i];
	part[threadIdx.x] = ss;
	__syncthreads();
	for (uint32_t half = WK_CU_ROW_THREADS / 2; half > 0; half >>= 1) {
		if (threadIdx.x < half)
			part[threadIdx.x] += part[threadIdx.x + half];
		__syncthreads();
	}
	scale = (float)(1.0 / sqrt(part[0] / dim + eps));
	for (uint32_t i = threadIdx.x; i < dim; i += WK_CU_ROW_THREADS)
		yr[i] = xr[i] * scale * w[i];
}

enum cm_status wk_cu_rmsnorm(const float *x, const uint32_t *src, const float *w, float eps,
			     uint32_t dim, uint32_t n, float *y, cudaStream_t s)
{
	if (n == 0)
		return CM_OK;
	wk_cu_rmsnorm_kernel<<<n, WK_CU_ROW_THREADS, 0, s>>>(x, src, w, eps, dim, y);
	WK_CU_LAUNCH();
	return CM_OK;
}

/* Rotates one head vector v at position p (as worker/cpu/backend.c op_rope, in double). */
__device__ __forceinline__ void wk_cu_rope_head(float *v, uint32_t rope_dim, int neox,
						const double *inv_freq, double p, uint32_t i,
						double ms)
{
	uint32_t d = rope_dim;
	uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + d / 2 : 2 * i + 1;
	double sn, cs;
	float c, sf, a, b;

	sincos(p * inv_freq[i], &sn, &cs);
	c = (float)(cs * ms);
	sf = (float)(sn * ms);
	a = v[i0];
	b = v[i1];
	v[i0] = a * c - b * sf;
	v[i1] = a * sf + b * c;
}

#define WK_CU_ROPE_TABLE 256 /* pairs whose angles a block computes once */

__global__ void wk_cu_rope_store_kernel(float *q, float *k, const float *v, const uint32_t *pos,
					const uint32_t *seq, const uint32_t *tables,
					struct wk_cu_kvgeo g, uint32_t rope_dim, int neox,
					const double *inv_freq, double pos_scale, __half *kc,
					__half *vc)
{
	uint32_t t = blockIdx.x, p = pos[t];
	uint32_t hd = g.head_dim, half = rope_dim / 2;
	uint32_t qd = g.n_head * hd;
	float *qt = q + (uint64_t)t * qd, *kt = k + (uint64_t)t * g.kv_dim;
	const float *vt = v + (uint64_t)t * g.kv_dim;
	double pp = (double)p * pos_scale;
	uint64_t slot;
	__shared__ float tc[WK_CU_ROPE_TABLE], ts[WK_CU_ROPE_TABLE];
	int table = half <= WK_CU_ROPE_TABLE;

	if (p == WK_CU_POS_NONE)
		return;
	/* the angle of pair i is the same for every head: its cosine and sine
	 * once per token (the same double sincos as wk_cu_rope_head) */
	if (table) {
		for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) {
			double sn, cs;

			sincos(pp * inv_freq[i], &sn, &cs);
			tc[i] = (float)(cs * (double)g.rope_mscale);
			ts[i] = (float)(sn * (double)g.rope_mscale);
		}
		__syncthreads();
	}
	/* each (head, pair) is independent: no ordering concerns */
	for (uint32_t w = threadIdx.x; w < (g.n_head + g.n_head_kv) * half; w += blockDim.x) {
		uint32_t h = w / half, i = w % half;

		if (table) {
			float *hv = h < g.n_head ? qt + (uint64_t)h * hd
						 : kt + (uint64_t)(h - g.n_head) * hd;
			uint32_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
			float a = hv[i0], b = hv[i1];

			hv[i0] = a * tc[i] - b * ts[i];
			hv[i1] = a * ts[i] + b * tc[i];
		} else if (h < g.n_head)
			wk_cu_rope_head(qt + (uint64_t)h * hd, rope_dim, neox, inv_freq, pp, i,
					(double)g.rope_mscale);
		else
			wk_cu_rope_head(kt + (uint64_t)(h - g.n_head) * hd, rope_dim, neox,
					inv_freq, pp, i, (double)g.rope_mscale);
	}
	__syncthreads();
	slot = (uint64_t)tables[(uint64_t)seq[t] * g.table_stride + p / g.block_tokens] *
		       g.block_tokens + p % g.block_tokens;
	for (uint32_t i = threadIdx.x; i < g.kv_dim; i += blockDim.x) {
		kc[slot * g.kv_dim + i] = __float2half_rn(kt[i]);
		vc[slot * g.kv_dim + i] = __float2half_rn(vt[i]);
	}
}

enum cm_status wk_cu_rope_store(float *q, float *k, const float *v, const uint32_t *pos,
				const uint32_t *seq, const uint32_t *tables,
				const struct wk_cu_kvgeo *g, uint32_t rope_dim, int neox,
				const double *inv_freq, double pos_scale, __half *kc, __half *vc,
				uint32_t n, cudaStream_t s)
{
	if (n == 0)
		return CM_OK;
	wk_cu_rope_store_kernel<<<n, 128, 0, s>>>(q, k, v, pos, seq, tables, *g, rope_dim, neox,
						  inv_freq, pos_scale, kc, vc);
	WK_CU_LAUNCH();
	return CM_OK;
}

__global__ void wk_cu_silu_mul_kernel(float *g, const float *u, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ void wk_cu_gelu_mul_kernel(float *g, const float *u, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		float x = g[i];

		g[i] = 0.5f * x * (1.0f + tanhf(0.7978845608028654f * x * (1.0f + 0.044715f * x * x))) *
		       u[i];
	}
}

__global__ void wk_cu_softcap_kernel(float *x, uint64_t n, float c)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		x[i] = c * tanhf(x[i] / c);
}

__global__ void wk_cu_add_kernel(float *y, const float *x, uint64_t n, float scale)
{
	/* x * scale rounded first (as the CPU: scale, then add), no FMA */
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = __fadd_rn(y[i], __fmul_rn(x[i], scale));
}

__global__ void wk_cu_scale_kernel(float *x, uint64_t n, float scale)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		x[i] *= scale;
}

__global__ void wk_cu_add_bias_kernel(float *y, const float *b, uint32_t dim, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] += b[i % dim];
}

static unsigned wk_cu_grid(uint64_t n)
{
	uint64_t b = (n + 255) / 256;

	return (unsigned)(b > 65535 ? 65535 : b < 1 ? 1 : b);
}

enum cm_status wk_cu_silu_mul(float *g, const float *u, uint64_t n, cudaStream_t s)
{
	wk_cu_silu_mul_kernel<<<wk_cu_grid(n), 256, 0, s>>>(g, u, n);
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_gelu_mul(float *g, const float *u, uint64_t n, cudaStream_t s)
{
	wk_cu_gelu_mul_kernel<<<wk_cu_grid(n), 256, 0, s>>>(g, u, n);
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_softcap(float *x, uint64_t n, float c, cudaStream_t s)
{
	if (n == 0)
		return CM_OK;
	wk_cu_softcap_kernel<<<wk_cu_grid(n), 256, 0, s>>>(x, n, c);
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_add(float *y, const float *x, uint64_t n, float scale, cudaStream_t s)
{
	wk_cu_add_kernel<<<wk_cu_grid(n), 256, 0, s>>>(y, x, n, scale);
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_scale(float *x, uint64_t n, float scale, cudaStream_t s)
{
	if (scale == 1.0f || n == 0)
		return CM_OK;
	wk_cu_scale_kernel<<<wk_cu_grid(n), 256, 0, s>>>(x, n, scale);
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_add_bias(float *y, const float *b, uint32_t dim, uint32_t n, cudaStream_t s)
{
	uint64_t total = (uint64_t)dim * n;

	if (total == 0)
		return CM_OK;
	wk_cu_add_bias_kernel<<<wk_cu_grid(total), 256, 0, s>>>(y, b, dim, total);
	WK_CU_LAUNCH();
	return CM_OK;
}
