/*
 * gpu_bench.cu - `bench-gpu`: the device ceilings and the CUDA backend's
 * own speed, for bench/gpu-check.sh.  Prints key=value lines.
 *
 *   bench-gpu membw [--gib 4]            device-to-device copy bandwidth
 *                                        (bytes read + written) / time
 *   bench-gpu gemm [--n 8192]            cuBLAS BF16 x BF16 -> BF16 GEMM,
 *                                        FP32 accumulation, random data
 *   bench-gpu engine --model PATH [--prompt 2048] [--gen 64] [--reps 3]
 *                                        prefill of one --prompt batch and
 *                                        batch-1 decode through the backend
 *
 * Timing: CUDA events for membw/gemm (median of 10 after 3 warm-ups), the
 * host monotonic clock around forward() for the engine (forward() returns
 * after the logits reached the host, so that is the real step time).
 * Exit 77 without a device.
 */
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "common/clock.h"
#include "worker/engine/backend.h"
#include "worker/cuda/backend.h"
#include "worker/model/model.h"
}
#pragma GCC diagnostic pop

#define CK(call)                                                                         \
	do {                                                                             \
		cudaError_t e_ = (call);                                                 \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "bench-gpu: %s failed at %s:%d: %s\n", #call,    \
				__FILE__, __LINE__, cudaGetErrorString(e_));             \
			return 1;                                                        \
		}                                                                        \
	} while (0)
#define CKB(call)                                                                        \
	do {                                                                             \
		cublasStatus_t b_ = (call);                                              \
		if (b_ != CUBLAS_STATUS_SUCCESS) {                                       \
			fprintf(stderr, "bench-gpu: %s failed at %s:%d: %s\n", #call,    \
				__FILE__, __LINE__, cublasGetStatusString(b_));          \
			return 1;                                                        \
		}                                                                        \
	} while (0)

static const char *arg_str(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 2; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return def;
}

static double arg_num(int argc, char **argv, const char *name, double def)
{
	const char *s = arg_str(argc, argv, name, NULL);

	return s ? atof(s) : def;
}

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

__global__ void fill_random(__nv_bfloat16 *p, size_t n, uint32_t seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint32_t x = (uint32_t)i * 2654435761u ^ seed;

		x ^= x >> 13;
		x *= 0x5bd1e995u;
		x ^= x >> 15;
		p[i] = __float2bfloat16((float)(x & 0xffff) / 32768.0f - 1.0f);
	}
}

static int cmd_membw(int argc, char **argv)
{
	size_t bytes = (size_t)(arg_num(argc, argv, "--gib", 4) * (1ull << 30));
	void *a = NULL, *b = NULL;
	cudaEvent_t e0, e1;
	std::vector<double> ms;

	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	CK(cudaMemset(a, 1, bytes));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < 13; i++) {
		float t;

		CK(cudaEventRecord(e0));
		CK(cudaMemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, cudaMemcpyDeviceToDevice));
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&t, e0, e1));
		if (i >= 3)
			ms.push_back(t);
	}
	printf("membw_bytes=%zu membw_ms=%.3f membw_gbs=%.1f\n", bytes, median(ms),
	       2.0 * bytes / (median(ms) * 1e-3) / 1e9);
	cudaFree(a);
	cudaFree(b);
	return 0;
}

static int cmd_gemm(int argc, char **argv)
{
	int n = (int)arg_num(argc, argv, "--n", 8192);
	size_t el = (size_t)n * n;
	__nv_bfloat16 *a = NULL, *b = NULL, *c = NULL;
	cublasHandle_t h;
	cudaEvent_t e0, e1;
	const float one = 1.0f, zero = 0.0f;
	std::vector<double> ms;

	CK(cudaMalloc(&a, el * 2));
	CK(cudaMalloc(&b, el * 2));
	CK(cudaMalloc(&c, el * 2));
	fill_random<<<4096, 256>>>(a, el, 1);
	fill_random<<<4096, 256>>>(b, el, 2);
	CK(cudaGetLastError());
	CKB(cublasCreate(&h));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < 13; i++) {
		float t;

		CK(cudaEventRecord(e0));
		CKB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a, CUDA_R_16BF, n, b,
				 CUDA_R_16BF, n, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
				 CUBLAS_GEMM_DEFAULT));
		CK(cudaEventRecord(e1));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&t, e0, e1));
		if (i >= 3)
			ms.push_back(t);
	}
	printf("gemm_n=%d gemm_ms=%.3f gemm_tflops=%.1f\n", n, median(ms),
	       2.0 * n * (double)n * n / (median(ms) * 1e-3) / 1e12);
	cublasDestroy(h);
	cudaFree(a);
	cudaFree(b);
	cudaFree(c);
	return 0;
}

/* multiply-add count of one token through every matmul (weights only) */
static double matmul_params(const struct wk_model *m)
{
	double n = (double)m->output.rows * m->output.cols;

	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];
		const struct wk_tensor *t[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate,
						&L->w_up, &L->w_down };

		for (int i = 0; i < 7; i++)
			n += (double)t[i]->rows * t[i]->cols;
	}
	return n;
}

/* weight bytes one decode step reads (every matmul; not the embedding table) */
static double matmul_bytes(const struct wk_model *m)
{
	double n = (double)m->output.rows * m->output.row_bytes;

	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];
		const struct wk_tensor *t[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate,
						&L->w_up, &L->w_down };

		for (int i = 0; i < 7; i++)
			n += (double)t[i]->rows * t[i]->row_bytes;
	}
	return n;
}

static int cmd_engine(int argc, char **argv)
{
	const char *path = arg_str(argc, argv, "--model", NULL);
	uint32_t prompt = (uint32_t)arg_num(argc, argv, "--prompt", 2048);
	uint32_t gen = (uint32_t)arg_num(argc, argv, "--gen", 64);
	int reps = (int)arg_num(argc, argv, "--reps", 3);
	struct wk_model *m = NULL;
	struct wk_model_opts mo = {};
	struct wk_backend *be = NULL;
	struct wk_backend_info bi;
	char err[256];
	uint32_t bt = 16, n_blocks = (prompt + gen) / bt + 2, V;
	std::vector<uint32_t> blocks(n_blocks), pos(prompt), seq(prompt, 0);
	std::vector<int32_t> toks(prompt);
	std::vector<float> logits;
	std::vector<double> pre, dec;
	struct wk_batch_seq s;
	struct wk_batch b;
	uint32_t out;

	if (!path) {
		fprintf(stderr, "bench-gpu engine: --model PATH is required\n");
		return 2;
	}
	if (wk_model_load(path, &mo, &m, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "bench-gpu: %s\n", err);
		return 1;
	}
	if (wk_cuda_backend_create(m, 0, n_blocks, bt, &be, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "bench-gpu: %s\n", err);
		return 1;
	}
	V = m->hp.n_vocab;
	logits.resize(V);
	for (uint32_t i = 0; i < n_blocks; i++)
		blocks[i] = i;
	for (uint32_t i = 0; i < prompt; i++) {
		toks[i] = (int32_t)((i * 7919u + 13) % V);
		pos[i] = i;
	}
	s.blocks = blocks.data();
	s.n_blocks = n_blocks;
	for (int r = 0; r < reps + 1; r++) {
		int64_t t0;

		b.n_tokens = prompt;
		b.tokens = toks.data();
		b.pos = pos.data();
		b.seq = seq.data();
		b.n_seqs = 1;
		b.seqs = &s;
		b.n_out = 1;
		out = prompt - 1;
		b.out = &out;
		t0 = cm_mono_ns();
		if (be->ops->forward(be, &b, logits.data()) != CM_OK) {
			fprintf(stderr, "bench-gpu: prefill failed\n");
			return 1;
		}
		if (r > 0)
			pre.push_back((cm_mono_ns() - t0) / 1e9);
		/* batch-1 decode after the prompt */
		t0 = cm_mono_ns();
		for (uint32_t g = 0; g < gen; g++) {
			uint32_t p = prompt + g, z = 0, o = 0;
			int32_t tk = (int32_t)((g * 31u + 1) % V);

			b.n_tokens = 1;
			b.tokens = &tk;
			b.pos = &p;
			b.seq = &z;
			b.n_out = 1;
			b.out = &o;
			if (be->ops->forward(be, &b, logits.data()) != CM_OK) {
				fprintf(stderr, "bench-gpu: decode failed\n");
				return 1;
			}
		}
		if (r > 0)
			dec.push_back((cm_mono_ns() - t0) / 1e9);
	}
	be->ops->info(be, &bi);
	{
		double mp = matmul_params(m);
		double att = 2.0 * m->hp.n_layer * (double)prompt * prompt * m->hp.n_head *
			     m->hp.head_dim; /* QK^T and PV, causal half */
		double tp = median(pre), td = median(dec);

		printf("engine_model=%s weight_bytes=%llu kv_bytes=%llu mem_used=%llu mem_total=%llu\n",
		       m->name, (unsigned long long)bi.weight_bytes, (unsigned long long)bi.kv_bytes,
		       (unsigned long long)bi.mem_used, (unsigned long long)bi.mem_total);
		printf("prefill_tokens=%u prefill_s=%.4f prefill_tok_s=%.1f prefill_tflops=%.1f\n",
		       prompt, tp, prompt / tp, (2.0 * mp * prompt + att) / tp / 1e12);
		printf("decode_steps=%u decode_s=%.4f decode_tok_s=%.1f step_read_bytes=%.0f "
		       "decode_gbs=%.1f\n", gen, td, gen / td, matmul_bytes(m),
		       matmul_bytes(m) * (gen / td) / 1e9);
	}
	be->ops->destroy(be);
	wk_model_free(m);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: bench-gpu membw|gemm|engine [options]\n");
		return 2;
	}
	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("skipped: no CUDA device\n");
		return 77;
	}
	if (strcmp(argv[1], "membw") == 0)
		return cmd_membw(argc, argv);
	if (strcmp(argv[1], "gemm") == 0)
		return cmd_gemm(argc, argv);
	if (strcmp(argv[1], "engine") == 0)
		return cmd_engine(argc, argv);
	fprintf(stderr, "bench-gpu: unknown command %s\n", argv[1]);
	return 2;
}
