/*
 * gemm.cu - see gemm.cuh.
 *
 * Layout: cuBLASLt is column-major.  Row-major Y[T][N] = X[T][K] W[N][K]^T
 * is, column-major, Y^T (N x T, ld N) = op(A) B with A = W seen as K x N
 * (ld K, op = transpose) and B = X^T seen as K x T (ld K).
 */
#include "worker/cuda/gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>

#include "worker/cuda/check.cuh"
#include "worker/cuda/dequant.cuh"

extern "C" {
#include "common/alloc.h"
#include "common/log.h"
}

#define WK_CU_GEMM_REF_M 2048 /* token count the algorithm is chosen for */
#define WK_CU_GEMM_WS (32ull << 20)
#define WK_CU_GEMM_ALGOS 32

struct wk_cu_algo {
	int op;         /* 0 BF16, 1 F16, 2 F32 */
	uint64_t n, k;
	cublasLtMatmulAlgo_t algo;
};

struct wk_cu_gemm {
	cudaStream_t s;
	cublasLtHandle_t lt;
	void *ws;           /* cuBLASLt workspace */
	void *xa;           /* activations in operand type [max_tok][max_cols] */
	__nv_bfloat16 *wt;  /* dequantised weight tile */
	uint64_t max_cols;
	uint32_t max_tok;
	struct wk_cu_algo algos[WK_CU_GEMM_ALGOS];
	int n_algos;
	cublasLtMatmulAlgo_t fallback;
	int warned;
};

uint64_t wk_cu_gemm_scratch_bytes(uint64_t max_cols, uint32_t max_tok)
{
	return WK_CU_GEMM_WS + (uint64_t)max_tok * max_cols * 4 + WK_CU_GEMM_TILE_BYTES;
}

enum cm_status wk_cu_gemm_new(cudaStream_t s, uint64_t max_cols, uint32_t max_tok,
			      struct wk_cu_gemm **out)
{
	struct wk_cu_gemm *g = (struct wk_cu_gemm *)cm_calloc(1, sizeof(*g));

	*out = NULL;
	if (!g)
		return CM_ENOMEM;
	g->s = s;
	g->max_cols = max_cols;
	g->max_tok = max_tok;
	*out = g; /* freed by the caller with wk_cu_gemm_free on error too */
	WK_CU(cublasLtCreate(&g->lt));
	WK_CU(cudaMalloc(&g->ws, WK_CU_GEMM_WS));
	WK_CU(cudaMalloc(&g->xa, (uint64_t)max_tok * max_cols * 4));
	WK_CU(cudaMalloc(&g->wt, WK_CU_GEMM_TILE_BYTES));
	return CM_OK;
}

enum cm_status wk_cu_gemm_reserve(struct wk_cu_gemm *g, uint32_t max_tok)
{
	if (max_tok <= g->max_tok)
		return CM_OK;
	cudaFree(g->xa);
	g->xa = NULL;
	g->max_tok = 0;
	WK_CU(cudaMalloc(&g->xa, (uint64_t)max_tok * g->max_cols * 4));
	g->max_tok = max_tok;
	return CM_OK;
}

void wk_cu_gemm_free(struct wk_cu_gemm *g)
{
	if (!g)
		return;
	cudaFree(g->ws);
	cudaFree(g->xa);
	cudaFree(g->wt);
	if (g->lt)
		cublasLtDestroy(g->lt);
	cm_free(g);
}

/* ---- conversions ---- */

__global__ void wk_cu_to_bf16_kernel(const float *x, __nv_bfloat16 *y, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = __float2bfloat16_rn(x[i]);
}

__global__ void wk_cu_to_f16_kernel(const float *x, __half *y, uint64_t n)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		y[i] = __float2half_rn(x[i]);
}

/* rows [r0, r0+nr) of a quantised (or F16) weight into BF16, one unit per thread */
template <int T>
__global__ void wk_cu_dequant_bf16_kernel(const uint8_t *w, uint64_t row_bytes, uint64_t cols,
					  uint64_t r0, uint64_t nr, __nv_bfloat16 *out)
{
	constexpr int N = wk_cu_unit<T>::N;
	uint64_t upr = cols / N, total = upr * nr;
	float v[N];

	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total;
	     i += (uint64_t)gridDim.x * blockDim.x) {
		uint64_t r = i / upr, u = i % upr;

		wk_cu_unit<T>::get(w + (r0 + r) * row_bytes, (uint32_t)u, v);
		for (int j = 0; j < N; j++)
			out[r * cols + u * N + j] = __float2bfloat16_rn(v[j]);
	}
}

static unsigned wk_cu_grid(uint64_t n)
{
	uint64_t b = (n + 255) / 256;

	return (unsigned)(b > 65535 ? 65535 : b < 1 ? 1 : b);
}

static enum cm_status wk_cu_dequant_tile(uint32_t type, const void *w, uint64_t row_bytes,
					 uint64_t cols, uint64_t r0, uint64_t nr,
					 __nv_bfloat16 *out, cudaStream_t s)
{
	const uint8_t *p = (const uint8_t *)w;

	WK_CU_DISPATCH(type, (wk_cu_dequant_bf16_kernel<WT><<<
		wk_cu_grid(cols / wk_cu_unit<WT>::N * nr), 256, 0, s>>>(p, row_bytes, cols, r0, nr,
									out)));
	WK_CU_LAUNCH();
	return CM_OK;
}

/* ---- cuBLASLt ---- */

static cudaDataType_t wk_cu_dt(int op)
{
	return op == 0 ? CUDA_R_16BF : op == 1 ? CUDA_R_16F : CUDA_R_32F;
}

struct wk_cu_desc {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t a, b, c;
};

static void wk_cu_desc_free(struct wk_cu_desc *d)
{
	if (d->op)
		cublasLtMatmulDescDestroy(d->op);
	if (d->a)
		cublasLtMatrixLayoutDestroy(d->a);
	if (d->b)
		cublasLtMatrixLayoutDestroy(d->b);
	if (d->c)
		cublasLtMatrixLayoutDestroy(d->c);
	memset(d, 0, sizeof(*d));
}

/* descriptors for an (n rows of W) x (m tokens) product; ldc = rows of the whole Y */
static enum cm_status wk_cu_desc_make(struct wk_cu_desc *d, int op, uint64_t n, uint64_t k,
				      uint64_t m, uint64_t ldc)
{
	cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
	cudaDataType_t dt = wk_cu_dt(op);

	memset(d, 0, sizeof(*d));
	WK_CU(cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
	WK_CU(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
	WK_CU(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
	WK_CU(cublasLtMatrixLayoutCreate(&d->a, dt, k, n, k));
	WK_CU(cublasLtMatrixLayoutCreate(&d->b, dt, k, m, k));
	WK_CU(cublasLtMatrixLayoutCreate(&d->c, CUDA_R_32F, n, m, ldc));
	return CM_OK;
}

/* the pinned algorithm for (op, n, k): chosen once, split-K forced to 1 */
static enum cm_status wk_cu_algo_get(struct wk_cu_gemm *g, int op, uint64_t n, uint64_t k,
				     const cublasLtMatmulAlgo_t **out)
{
	struct wk_cu_desc d;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res[8];
	uint64_t ws = WK_CU_GEMM_WS;
	int n_res = 0, found = -1;
	enum cm_status st = CM_OK;

	for (int i = 0; i < g->n_algos; i++)
		if (g->algos[i].op == op && g->algos[i].n == n && g->algos[i].k == k) {
			*out = &g->algos[i].algo;
			return CM_OK;
		}
	if (g->n_algos == WK_CU_GEMM_ALGOS)
		return CM_ELIMIT;
	st = wk_cu_desc_make(&d, op, n, k, WK_CU_GEMM_REF_M, n);
	if (st != CM_OK)
		goto out;
	{
		cublasStatus_t bs = cublasLtMatmulPreferenceCreate(&pref);

		if (bs == CUBLAS_STATUS_SUCCESS)
			bs = cublasLtMatmulPreferenceSetAttribute(
				pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
		if (bs == CUBLAS_STATUS_SUCCESS)
			bs = cublasLtMatmulAlgoGetHeuristic(g->lt, d.op, d.a, d.b, d.c, d.c, pref,
							    8, res, &n_res);
		if (bs != CUBLAS_STATUS_SUCCESS || n_res == 0) {
			wk_cuda_report("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__,
				       bs != CUBLAS_STATUS_SUCCESS ? cublasGetStatusString(bs)
								   : "no algorithm");
			st = CM_EIO;
			goto out;
		}
	}
	for (int i = 0; i < n_res && found < 0; i++) {
		uint32_t one = 1;
		uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
		cublasLtMatmulHeuristicResult_t chk;

		if (cublasLtMatmulAlgoConfigSetAttribute(&res[i].algo,
							 CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one,
							 sizeof(one)) != CUBLAS_STATUS_SUCCESS)
			continue;
		(void)cublasLtMatmulAlgoConfigSetAttribute(
			&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, sizeof(none));
		if (cublasLtMatmulAlgoCheck(g->lt, d.op, d.a, d.b, d.c, d.c, &res[i].algo, &chk) ==
		    CUBLAS_STATUS_SUCCESS && chk.workspaceSize <= WK_CU_GEMM_WS)
			found = i;
	}
	if (found < 0) {
		wk_cuda_report("cublasLtMatmulAlgoCheck", __FILE__, __LINE__,
			       "no algorithm accepts split-K 1");
		st = CM_EIO;
		goto out;
	}
	g->algos[g->n_algos].op = op;
	g->algos[g->n_algos].n = n;
	g->algos[g->n_algos].k = k;
	g->algos[g->n_algos].algo = res[found].algo;
	*out = &g->algos[g->n_algos].algo;
	g->n_algos++;
out:
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	wk_cu_desc_free(&d);
	return st;
}

static enum cm_status wk_cu_lt(struct wk_cu_gemm *g, int op, const void *a, uint64_t n,
			       uint64_t k, const void *b, uint64_t m, float *c, uint64_t ldc,
			       uint64_t n_full)
{
	const cublasLtMatmulAlgo_t *algo = NULL;
	struct wk_cu_desc d;
	const float one = 1.0f, zero = 0.0f;
	cublasStatus_t bs;
	enum cm_status st;

	/* the algorithm is keyed by the full weight shape, not the tile */
	st = wk_cu_algo_get(g, op, n_full, k, &algo);
	if (st != CM_OK)
		return st;
	st = wk_cu_desc_make(&d, op, n, k, m, ldc);
	if (st != CM_OK) {
		wk_cu_desc_free(&d);
		return st;
	}
	{
		/* the pinned algorithm should take any token count; if this
		 * cuBLAS refuses it for this shape, use its own choice for
		 * the shape and say once that invariance is weakened */
		cublasLtMatmulHeuristicResult_t chk;

		if (cublasLtMatmulAlgoCheck(g->lt, d.op, d.a, d.b, d.c, d.c, algo, &chk) !=
			    CUBLAS_STATUS_SUCCESS ||
		    chk.workspaceSize > WK_CU_GEMM_WS) {
			cublasLtMatmulPreference_t pref = NULL;
			uint64_t ws = WK_CU_GEMM_WS;
			int n_res = 0;

			if (!g->warned) {
				cm_logf(CM_LOG_WARN, "cuda_gemm_unpinned",
					"cuBLASLt refused the pinned algorithm for %llu x %llu x %llu; "
					"using its own choice (batch invariance not guaranteed "
					"for prefill rows)", (unsigned long long)m,
					(unsigned long long)n, (unsigned long long)k);
				g->warned = 1;
			}
			bs = cublasLtMatmulPreferenceCreate(&pref);
			if (bs == CUBLAS_STATUS_SUCCESS)
				bs = cublasLtMatmulPreferenceSetAttribute(
					pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
					sizeof(ws));
			if (bs == CUBLAS_STATUS_SUCCESS)
				bs = cublasLtMatmulAlgoGetHeuristic(g->lt, d.op, d.a, d.b, d.c, d.c,
								    pref, 1, &chk, &n_res);
			if (pref)
				cublasLtMatmulPreferenceDestroy(pref);
			if (bs == CUBLAS_STATUS_SUCCESS && n_res == 0)
				bs = CUBLAS_STATUS_NOT_SUPPORTED;
			if (bs != CUBLAS_STATUS_SUCCESS) {
				wk_cu_desc_free(&d);
				WK_CU(bs);
			}
			g->fallback = chk.algo;
			algo = &g->fallback;
		}
	}
	bs = cublasLtMatmul(g->lt, d.op, &one, a, d.a, b, d.b, &zero, c, d.c, c, d.c, algo, g->ws,
			    WK_CU_GEMM_WS, g->s);
	wk_cu_desc_free(&d);
	WK_CU(bs);
	return CM_OK;
}

enum cm_status wk_cu_gemm_run(struct wk_cu_gemm *g, uint32_t type, const void *w, uint64_t rows,
			  uint64_t cols, uint64_t row_bytes, const float *x, uint32_t n_tok,
			  float *y)
{
	uint64_t n = (uint64_t)n_tok * cols;
	enum cm_status st;

	if (n_tok == 0)
		return CM_OK;
	if (n_tok > g->max_tok || cols > g->max_cols)
		return CM_EINVAL;
	if (type == WK_Q_F32)
		return wk_cu_lt(g, 2, w, rows, cols, x, n_tok, y, rows, rows);
	if (type == WK_Q_F16) {
		wk_cu_to_f16_kernel<<<wk_cu_grid(n), 256, 0, g->s>>>(x, (__half *)g->xa, n);
		WK_CU_LAUNCH();
		return wk_cu_lt(g, 1, w, rows, cols, g->xa, n_tok, y, rows, rows);
	}
	wk_cu_to_bf16_kernel<<<wk_cu_grid(n), 256, 0, g->s>>>(x, (__nv_bfloat16 *)g->xa, n);
	WK_CU_LAUNCH();
	if (type == WK_Q_BF16)
		return wk_cu_lt(g, 0, w, rows, cols, g->xa, n_tok, y, rows, rows);
	/* quantised: dequantise a tile of rows, multiply it, next tile */
	{
		uint64_t tile = WK_CU_GEMM_TILE_BYTES / (cols * 2);

		if (tile == 0)
			return CM_EINVAL;
		if (tile > 256)
			tile &= ~(uint64_t)255; /* keep tiles aligned to the GEMM's row tiles */
		for (uint64_t r0 = 0; r0 < rows; r0 += tile) {
			uint64_t nr = rows - r0 < tile ? rows - r0 : tile;

			st = wk_cu_dequant_tile(type, w, row_bytes, cols, r0, nr, g->wt, g->s);
			if (st != CM_OK)
				return st;
			st = wk_cu_lt(g, 0, g->wt, nr, cols, g->xa, n_tok, y + r0, rows, rows);
			if (st != CM_OK)
				return st;
		}
	}
	return CM_OK;
}
