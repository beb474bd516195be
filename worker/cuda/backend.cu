/*
 * backend.cu - the CUDA backend (see backend.h): weight upload, memory
 * budget, the forward step, decode graphs.
 *
 * A step's tokens are put in two classes, decided per sequence:
 *   decode rows  - the token is its sequence's only token in the step;
 *                  matmuls run on our GEMV kernels (gemv.cuh);
 *   prefill rows - the sequence has several tokens in the step; matmuls
 *                  run on cuBLASLt with a pinned algorithm (gemm.cuh).
 * Rows are reordered so decode rows come first, each class is multiplied
 * by its own kernel, and everything per token (norms, rope, attention) is
 * one kernel over all rows.  Both matmul paths fix each output element's
 * reduction order independently of the token count, so a token's logits
 * depend on its class, never on the rest of the batch.
 *
 * Attention: decode rows use the position-split form (attention.cuh),
 * prefill rows the single-pass form; both fixed by the token's position.
 *
 * Decode graphs: a step of decode rows only (T <= 256) runs as a CUDA
 * graph, captured once per bucket B in {1,2,4,...,256} (T rounded up to B,
 * padding rows have position WK_CU_POS_NONE).  The graph's kernels read
 * the step's tokens, positions, sequence indices, output rows and block
 * tables from device buffers at fixed addresses, refreshed by async copies
 * before each launch, so a graph stays valid while block tables change.
 * Graphs are dropped (and re-captured on demand) only when a buffer is
 * reallocated: more tokens than ever before, or a longer block table.
 *
 * Sampling: the scheduler samples on the host; the backend copies the
 * n_out requested logits rows (vocab floats each) to the host per step.
 */
#include "worker/cuda/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <cuda_fp16.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "worker/cuda/attention.cuh"
#include "worker/cuda/check.cuh"
#include "worker/cuda/gemm.cuh"
#include "worker/cuda/gemv.cuh"
#include "worker/cuda/moe.cuh"
#include "worker/cuda/gemv_mma.cuh"
#include "worker/cuda/ops.cuh"

/* C headers: a struct and a function share a name there (legal C,
 * a -Wshadow complaint in C++) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
extern "C" {
#include "common/alloc.h"
#include "common/log.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"
}
#pragma GCC diagnostic pop

#define WK_CU_N_BUCKETS 9          /* 1, 2, 4, ..., 256 */
#define WK_CU_GRAPH_MAX 256
#define WK_CU_ALIGN 256
/* scratch reserve assumed by wk_cuda_kv_blocks_for: a step of this many tokens */
#define WK_CU_RESERVE_TOKENS 4096
#define WK_CU_RESERVE_FIXED (768ull << 20) /* context, cuBLAS, graphs */

struct dev_tensor {
	uint32_t type;
	uint64_t rows, cols, row_bytes;
	const void *d;        /* device copy, NULL when absent */
	uint64_t expert_stride; /* 3-D expert tensors: bytes between experts */
};

struct dev_layer {
	const float *attn_norm, *ffn_norm;
	struct dev_tensor wq, wk, wv, wo, w_gate, w_up, w_down;
	const float *bq, *bk, *bv;   /* F32 biases or NULL */
	const float *q_norm, *k_norm; /* qwen3 per-head norms or NULL */
	const float *attn_post_norm, *ffn_post_norm; /* gemma2's, or NULL */
	/* a mixture of experts (worker/cuda/moe.cuh): the router and every
	 * expert of each of the three matrices (d: expert 0) */
	struct dev_tensor gate_inp, exp_gate, exp_up, exp_down;
	/* qwen2moe's shared expert (d NULL without one) */
	struct dev_tensor shexp_gate_inp, shexp_gate, shexp_up, shexp_down;
};

struct cuda_backend {
	struct wk_backend base;
	const struct wk_model *m;
	int dev;
	char dev_name[128];
	cudaStream_t s;
	struct wk_cu_gemm *gemm;
	uint8_t *wmem;               /* all weights */
	uint64_t weight_bytes;
	struct dev_tensor tok_embd, output;
	const float *output_norm;
	struct dev_layer *layers;
	double *inv_freq;            /* [rope_dim/2] */
	double *inv_freq_swa;        /* gemma3's windowed layers: their base, no factors */
	__half *kv;                  /* [n_layer][2][n_blocks*bt*kv_dim] */
	uint64_t kv_bytes;
	uint32_t n_blocks, block_tokens;
	struct wk_cu_kvgeo geo;
	/* scratch for cap tokens */
	uint32_t cap;
	float *x, *h, *q, *k, *v, *att, *g, *u;
	/* a mixture of experts: router logits [cap][n_expert], routing
	 * [cap][k], per-pair gate/up [cap k][ff_exp] and outputs [cap k][embd] */
	float *m_logits, *m_w, *m_g, *m_u, *m_y;
	float *m_sg, *m_sy;          /* the shared expert: gate logit [cap], output [cap][embd] */
	uint32_t *m_ids;             /* [n_layer][cap][k]: kept for wk_cuda_backend_routing */
	uint32_t last_T;             /* tokens of the last step */
	/* step metadata: device and pinned host copies */
	uint32_t stride;             /* block-table entries per sequence */
	uint32_t *d_meta, *h_meta;   /* tokens|pos|seq|out [cap] then tables [cap][stride] */
	float *d_logits;
	uint32_t cap_logits;
	float *att_part;             /* split attention of decode rows */
	uint32_t part_rows, part_nch;
	cudaGraphExec_t graph[WK_CU_N_BUCKETS];
	/* host staging */
	uint32_t *perm, *inv, *cnt, *outs, *out_orig;
};

static uint64_t align_up(uint64_t n)
{
	return (n + WK_CU_ALIGN - 1) & ~(uint64_t)(WK_CU_ALIGN - 1);
}

/* ---- weights ------------------------------------------------------------ */

/* Bytes a matrix takes on the device. */
static uint64_t mat_bytes(const struct wk_tensor *t)
{
	return t->data ? align_up(t->rows * t->row_bytes) : 0;
}

/* Bytes a 3-D expert tensor takes on the device: every expert. */
static uint64_t experts_bytes(const struct wk_tensor *t, uint32_t n_expert)
{
	return t->data ? align_up((uint64_t)(n_expert - 1) * t->expert_stride +
				  t->rows * t->row_bytes) : 0;
}

/* Bytes a vector takes as F32 on the device. */
static uint64_t vec_bytes(const struct wk_tensor *t)
{
	return t->data ? align_up(t->cols * t->rows * sizeof(float)) : 0;
}

static uint64_t model_device_bytes(const struct wk_model *m)
{
	uint64_t n = mat_bytes(&m->tok_embd) + vec_bytes(&m->output_norm);

	if (m->output.data != m->tok_embd.data)
		n += mat_bytes(&m->output);
	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];

		n += vec_bytes(&L->attn_norm) + vec_bytes(&L->ffn_norm);
		n += mat_bytes(&L->wq) + mat_bytes(&L->wk) + mat_bytes(&L->wv) + mat_bytes(&L->wo);
		n += mat_bytes(&L->w_gate) + mat_bytes(&L->w_up) + mat_bytes(&L->w_down);
		n += vec_bytes(&L->bq) + vec_bytes(&L->bk) + vec_bytes(&L->bv);
		n += vec_bytes(&L->q_norm) + vec_bytes(&L->k_norm);
		n += vec_bytes(&L->attn_post_norm) + vec_bytes(&L->ffn_post_norm);
		n += mat_bytes(&L->shexp_gate_inp) + mat_bytes(&L->shexp_gate) +
		     mat_bytes(&L->shexp_up) + mat_bytes(&L->shexp_down);
		n += mat_bytes(&L->ffn_gate_inp) + experts_bytes(&L->exp_gate, m->hp.n_expert) +
		     experts_bytes(&L->exp_up, m->hp.n_expert) +
		     experts_bytes(&L->exp_down, m->hp.n_expert);
	}
	return n + 2 * align_up((uint64_t)m->hp.rope_dim / 2 * sizeof(double));
}

static uint64_t per_token_scratch(const struct wk_hparams *hp)
{
	uint64_t e = hp->n_embd, qd = (uint64_t)hp->n_head * hp->head_dim;
	uint64_t kvd = (uint64_t)hp->n_head_kv * hp->head_dim;

	uint64_t k = hp->n_expert_used;
	uint64_t ff = hp->n_ff_shexp > hp->n_ff ? hp->n_ff_shexp : hp->n_ff;

	return 4 * (e + (e > qd ? e : qd) + 2 * qd + 2 * kvd + 2 * ff +
		    (k ? hp->n_expert + 2 * k + k * (2ull * hp->n_ff_exp + e) : 0) +
		    (hp->n_ff_shexp ? 1 + e : 0));
}

static uint64_t max_cols(const struct wk_model *m)
{
	const struct wk_hparams *hp = &m->hp;
	uint64_t c = hp->n_embd;

	if (hp->n_ff > c)
		c = hp->n_ff;
	if ((uint64_t)hp->n_head * hp->head_dim > c)
		c = (uint64_t)hp->n_head * hp->head_dim;
	return c;
}

static int type_ok(const struct wk_tensor *t)
{
	uint32_t n;

	switch (t->type) {
	case WK_Q_F32: n = 4; break;
	case WK_Q_F16: case WK_Q_BF16: n = 8; break;
	case WK_Q_Q8_0: case WK_Q_Q4_0: case WK_Q_Q4_1: case WK_Q_Q5_0: case WK_Q_Q5_1: case WK_Q_IQ4_NL:
	case WK_Q_Q4_K: case WK_Q_Q5_K: case WK_Q_Q6_K:
	case WK_Q_Q2_K: case WK_Q_Q3_K: case WK_Q_IQ4_XS: n = 32; break;
	default: return 0;
	}
	return t->cols % n == 0;
}

static enum cm_status up_mat(struct cuda_backend *be, uint64_t *off, const struct wk_tensor *t,
			     struct dev_tensor *d)
{
	d->type = t->type;
	d->rows = t->rows;
	d->cols = t->cols;
	d->row_bytes = t->row_bytes;
	d->d = NULL;
	if (!t->data)
		return CM_OK;
	WK_CU(cudaMemcpyAsync(be->wmem + *off, t->data, t->rows * t->row_bytes,
			      cudaMemcpyHostToDevice, be->s));
	d->d = be->wmem + *off;
	*off += mat_bytes(t);
	return CM_OK;
}

/* Every expert of a 3-D expert tensor (a fused gate|up is uploaded once
 * per view: gate and up each with their own copy) */
static enum cm_status up_experts(struct cuda_backend *be, uint64_t *off, const struct wk_tensor *t,
				 struct dev_tensor *d)
{
	uint64_t n = be->m->hp.n_expert;

	d->type = t->type;
	d->rows = t->rows;
	d->cols = t->cols;
	d->row_bytes = t->row_bytes;
	d->expert_stride = t->expert_stride;
	d->d = NULL;
	if (!t->data)
		return CM_OK;
	WK_CU(cudaMemcpyAsync(be->wmem + *off, t->data, (n - 1) * t->expert_stride +
			      t->rows * t->row_bytes, cudaMemcpyHostToDevice, be->s));
	d->d = be->wmem + *off;
	*off += experts_bytes(t, (uint32_t)n);
	return CM_OK;
}

static enum cm_status up_vec(struct cuda_backend *be, uint64_t *off, const struct wk_tensor *t,
			     const float **d)
{
	uint64_t n = t->cols * t->rows;
	float *f;

	*d = NULL;
	if (!t->data)
		return CM_OK;
	f = (float *)cm_malloc(n * sizeof(float));
	if (!f)
		return CM_ENOMEM;
	wk_dequantize_row(t->type, t->data, f, n);
	{
		cudaError_t e = cudaMemcpy(be->wmem + *off, f, n * sizeof(float),
					   cudaMemcpyHostToDevice);

		cm_free(f);
		WK_CU(e);
	}
	*d = (const float *)(be->wmem + *off);
	*off += vec_bytes(t);
	return CM_OK;
}

/* Writes base^(-2i/rope_dim) / factors[i] (factors may be NULL) for the
 * n_pair rotation pairs into f, then copies it to dev. */
static cudaError_t put_inv_freq(double *dev, double *f, uint32_t n_pair,
				uint32_t rope_dim, double base, const float *factors)
{
	for (uint32_t i = 0; i < n_pair; i++) {
		f[i] = pow(base, -2.0 * i / rope_dim);
		if (factors)
			f[i] /= factors[i];
	}
	return cudaMemcpy(dev, f, n_pair * sizeof(double), cudaMemcpyHostToDevice);
}

static enum cm_status upload(struct cuda_backend *be)
{
	const struct wk_model *m = be->m;
	const struct wk_hparams *hp = &m->hp;
	uint64_t off = 0;
	enum cm_status st;
	uint32_t n_pair = hp->rope_dim / 2;
	double *f;

	be->weight_bytes = model_device_bytes(m);
	WK_CU(cudaMalloc(&be->wmem, be->weight_bytes));
	if ((st = up_mat(be, &off, &m->tok_embd, &be->tok_embd)) != CM_OK)
		return st;
	if (m->output.data == m->tok_embd.data)
		be->output = be->tok_embd;
	else if ((st = up_mat(be, &off, &m->output, &be->output)) != CM_OK)
		return st;
	if ((st = up_vec(be, &off, &m->output_norm, &be->output_norm)) != CM_OK)
		return st;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];
		struct dev_layer *D = &be->layers[l];

		if ((st = up_vec(be, &off, &L->attn_norm, &D->attn_norm)) != CM_OK ||
		    (st = up_vec(be, &off, &L->ffn_norm, &D->ffn_norm)) != CM_OK ||
		    (st = up_mat(be, &off, &L->wq, &D->wq)) != CM_OK ||
		    (st = up_mat(be, &off, &L->wk, &D->wk)) != CM_OK ||
		    (st = up_mat(be, &off, &L->wv, &D->wv)) != CM_OK ||
		    (st = up_mat(be, &off, &L->wo, &D->wo)) != CM_OK ||
		    (st = up_mat(be, &off, &L->w_gate, &D->w_gate)) != CM_OK ||
		    (st = up_mat(be, &off, &L->w_up, &D->w_up)) != CM_OK ||
		    (st = up_mat(be, &off, &L->w_down, &D->w_down)) != CM_OK ||
		    (st = up_vec(be, &off, &L->bq, &D->bq)) != CM_OK ||
		    (st = up_vec(be, &off, &L->bk, &D->bk)) != CM_OK ||
		    (st = up_vec(be, &off, &L->bv, &D->bv)) != CM_OK ||
		    (st = up_vec(be, &off, &L->q_norm, &D->q_norm)) != CM_OK ||
		    (st = up_vec(be, &off, &L->k_norm, &D->k_norm)) != CM_OK ||
		    (st = up_vec(be, &off, &L->attn_post_norm, &D->attn_post_norm)) != CM_OK ||
		    (st = up_vec(be, &off, &L->ffn_post_norm, &D->ffn_post_norm)) != CM_OK ||
		    (st = up_mat(be, &off, &L->ffn_gate_inp, &D->gate_inp)) != CM_OK ||
		    (st = up_experts(be, &off, &L->exp_gate, &D->exp_gate)) != CM_OK ||
		    (st = up_experts(be, &off, &L->exp_up, &D->exp_up)) != CM_OK ||
		    (st = up_experts(be, &off, &L->exp_down, &D->exp_down)) != CM_OK ||
		    (st = up_mat(be, &off, &L->shexp_gate_inp, &D->shexp_gate_inp)) != CM_OK ||
		    (st = up_mat(be, &off, &L->shexp_gate, &D->shexp_gate)) != CM_OK ||
		    (st = up_mat(be, &off, &L->shexp_up, &D->shexp_up)) != CM_OK ||
		    (st = up_mat(be, &off, &L->shexp_down, &D->shexp_down)) != CM_OK)
			return st;
		/* a pending async copy reads the mapping: wait per layer so the
		 * page cache, not pinned memory, bounds host use */
		WK_CU(cudaStreamSynchronize(be->s));
	}
	/* rope: inverse frequencies in double, as worker/cpu/backend.c; the
	 * windowed layers' table has their base and no factors (gemma3) */
	f = (double *)cm_malloc((n_pair ? n_pair : 1) * sizeof(double));
	if (!f)
		return CM_ENOMEM;
	be->inv_freq = (double *)(be->wmem + off);
	off += align_up((uint64_t)n_pair * sizeof(double));
	be->inv_freq_swa = (double *)(be->wmem + off);
	{
		cudaError_t e = put_inv_freq(be->inv_freq, f, n_pair, hp->rope_dim,
					     hp->rope_base, hp->rope_freqs);

		if (e == cudaSuccess)
			e = put_inv_freq(be->inv_freq_swa, f, n_pair, hp->rope_dim,
					 hp->rope_base_swa > 0 ? hp->rope_base_swa
							       : hp->rope_base,
					 NULL);
		cm_free(f);
		WK_CU(e);
	}
	WK_CU(cudaStreamSynchronize(be->s));
	return CM_OK;
}

/* ---- scratch and metadata ------------------------------------------------- */

static void drop_graphs(struct cuda_backend *be)
{
	for (int i = 0; i < WK_CU_N_BUCKETS; i++)
		if (be->graph[i]) {
			cudaGraphExecDestroy(be->graph[i]);
			be->graph[i] = NULL;
		}
}

static void free_scratch(struct cuda_backend *be)
{
	float **p[] = { &be->x, &be->h, &be->q, &be->k, &be->v, &be->att, &be->g, &be->u,
			&be->m_logits, &be->m_w, &be->m_g, &be->m_u, &be->m_y, &be->m_sg, &be->m_sy };

	for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++) {
		cudaFree(*p[i]);
		*p[i] = NULL;
	}
	cudaFree(be->m_ids);
	be->m_ids = NULL;
	cudaFree(be->d_meta);
	cudaFreeHost(be->h_meta);
	be->d_meta = be->h_meta = NULL;
	cm_free(be->perm);
	cm_free(be->inv);
	cm_free(be->cnt);
	cm_free(be->outs);
	cm_free(be->out_orig);
	be->perm = be->inv = be->cnt = be->outs = be->out_orig = NULL;
	be->cap = 0;
}

static uint64_t meta_words(uint32_t cap, uint32_t stride)
{
	return 4ull * cap + (uint64_t)cap * stride;
}

/* Makes room for n tokens and block tables of `stride` entries. */
static enum cm_status ensure(struct cuda_backend *be, uint32_t n, uint32_t stride)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint64_t e = hp->n_embd, qd = (uint64_t)hp->n_head * hp->head_dim, kvd = be->geo.kv_dim;
	enum cm_status st;

	if (n <= be->cap && stride <= be->stride)
		return CM_OK;
	drop_graphs(be);
	if (n < be->cap)
		n = be->cap;
	if (stride < be->stride)
		stride = be->stride;
	n = n < WK_CU_GRAPH_MAX ? WK_CU_GRAPH_MAX : n;
	free_scratch(be);
	WK_CU(cudaMalloc(&be->x, n * e * 4));
	WK_CU(cudaMalloc(&be->h, n * (e > qd ? e : qd) * 4));
	WK_CU(cudaMalloc(&be->q, n * qd * 4));
	WK_CU(cudaMalloc(&be->k, n * kvd * 4));
	WK_CU(cudaMalloc(&be->v, n * kvd * 4));
	WK_CU(cudaMalloc(&be->att, n * qd * 4));
	/* g, u: the dense FFN's, or qwen2moe's shared expert's (the wider) */
	WK_CU(cudaMalloc(&be->g, (uint64_t)n * (hp->n_ff > hp->n_ff_shexp ? hp->n_ff
									 : hp->n_ff_shexp) * 4));
	WK_CU(cudaMalloc(&be->u, (uint64_t)n * (hp->n_ff > hp->n_ff_shexp ? hp->n_ff
									 : hp->n_ff_shexp) * 4));
	if (hp->n_ff_shexp) {
		WK_CU(cudaMalloc(&be->m_sg, (uint64_t)n * 4));
		WK_CU(cudaMalloc(&be->m_sy, (uint64_t)n * e * 4));
	}
	if (hp->n_expert) {
		uint64_t nk = (uint64_t)n * hp->n_expert_used;

		WK_CU(cudaMalloc(&be->m_logits, (uint64_t)n * hp->n_expert * 4));
		WK_CU(cudaMalloc(&be->m_ids, nk * hp->n_layer * 4));
		WK_CU(cudaMalloc(&be->m_w, nk * 4));
		WK_CU(cudaMalloc(&be->m_g, nk * hp->n_ff_exp * 4));
		WK_CU(cudaMalloc(&be->m_u, nk * hp->n_ff_exp * 4));
		WK_CU(cudaMalloc(&be->m_y, nk * e * 4));
	}
	WK_CU(cudaMalloc(&be->d_meta, meta_words(n, stride) * 4));
	WK_CU(cudaMallocHost(&be->h_meta, meta_words(n, stride) * 4));
	be->perm = (uint32_t *)cm_calloc(n, 4);
	be->inv = (uint32_t *)cm_calloc(n, 4);
	be->cnt = (uint32_t *)cm_calloc(n, 4);
	be->outs = (uint32_t *)cm_calloc(n, 4);
	be->out_orig = (uint32_t *)cm_calloc(n, 4);
	if (!be->perm || !be->inv || !be->cnt || !be->outs || !be->out_orig)
		return CM_ENOMEM;
	/* one GEMM helper for the backend's life: its pinned algorithms stay */
	st = be->gemm ? wk_cu_gemm_reserve(be->gemm, n)
		      : wk_cu_gemm_new(be->s, max_cols(be->m), n, &be->gemm);
	if (st != CM_OK)
		return st;
	be->cap = n;
	be->stride = stride;
	be->geo.table_stride = stride;
	return CM_OK;
}

static enum cm_status ensure_logits(struct cuda_backend *be, uint32_t rows)
{
	if (rows <= be->cap_logits)
		return CM_OK;
	drop_graphs(be);
	cudaFree(be->d_logits);
	be->d_logits = NULL;
	be->cap_logits = 0;
	rows = rows < WK_CU_GRAPH_MAX ? WK_CU_GRAPH_MAX : rows;
	WK_CU(cudaMalloc(&be->d_logits, (uint64_t)rows * be->m->hp.n_vocab * 4));
	be->cap_logits = rows;
	return CM_OK;
}

/* Scratch of the split attention for n decode rows (after ensure()). */
static enum cm_status ensure_part(struct cuda_backend *be, uint32_t n)
{
	uint32_t nch = wk_cu_att_chunks(&be->geo);

	if (n <= be->part_rows && nch == be->part_nch)
		return CM_OK;
	drop_graphs(be);
	cudaFree(be->att_part);
	be->att_part = NULL;
	be->part_rows = 0;
	n = n < WK_CU_GRAPH_MAX ? WK_CU_GRAPH_MAX : n;
	WK_CU(cudaMalloc(&be->att_part, (uint64_t)n * be->geo.n_head * nch *
					   (be->geo.head_dim + 2) * sizeof(float)));
	be->part_rows = n;
	be->part_nch = nch;
	return CM_OK;
}

/* ---- the step -------------------------------------------------------------- */

/* device views of the metadata arrays */
#define M_TOK(be) ((const int32_t *)(be)->d_meta)
#define M_POS(be) ((be)->d_meta + (be)->cap)
#define M_SEQ(be) ((be)->d_meta + 2 * (be)->cap)
#define M_OUT(be) ((be)->d_meta + 3 * (be)->cap)
#define M_TAB(be) ((be)->d_meta + 4 * (be)->cap)

/* y[0..T) = x W^T (+ b): rows [0, nd) on the GEMV path, [nd, T) on the GEMM path */
static enum cm_status mm(struct cuda_backend *be, const struct dev_tensor *w, const float *x,
			 uint32_t T, uint32_t nd, float *y, const float *bias)
{
	enum cm_status st;

	if (nd > 0) {
		st = wk_cu_gemv(w->type, w->d, w->rows, w->cols, w->row_bytes, x, nd, y, be->s);
		if (st != CM_OK)
			return st;
	}
	if (T > nd) {
		st = wk_cu_gemm_run(be->gemm, w->type, w->d, w->rows, w->cols, w->row_bytes,
				x + (uint64_t)nd * w->cols, T - nd, y + (uint64_t)nd * w->rows);
		if (st != CM_OK)
			return st;
	}
	if (bias)
		return wk_cu_add_bias(y, bias, (uint32_t)w->rows, T, be->s);
	return CM_OK;
}

/*
 * n matmuls of one width over the same x (Q, K, V; gate, up): the decode
 * rows in one tensor-core launch when every weight takes it (the same
 * per-row result as separate launches), else as mm() each.
 */
static enum cm_status mm_multi(struct cuda_backend *be, uint32_t n, const struct dev_tensor *const *w,
			       const float *x, uint32_t T, uint32_t nd, float *const *y,
			       const float *const *bias)
{
	const void *wd[3];
	uint64_t rows[3];
	int fuse = nd > 0 && n <= 3;
	enum cm_status st;

	for (uint32_t i = 0; i < n && fuse; i++) {
		fuse = w[i]->cols == w[0]->cols && w[i]->row_bytes == w[0]->row_bytes &&
		       wk_cu_gemv_is_mma(w[i]->type, w[i]->cols, w[i]->row_bytes, w[i]->d);
		wd[i] = w[i]->d;
		rows[i] = w[i]->rows;
	}
	if (!fuse) {
		for (uint32_t i = 0; i < n; i++)
			if ((st = mm(be, w[i], x, T, nd, y[i], bias[i])) != CM_OK)
				return st;
		return CM_OK;
	}
	st = wk_cu_gemv_mma_multi(n, wd, rows, w[0]->cols, w[0]->row_bytes, x, nd, y, be->s);
	if (st != CM_OK)
		return st;
	for (uint32_t i = 0; i < n; i++) {
		if (T > nd) {
			st = wk_cu_gemm_run(be->gemm, w[i]->type, w[i]->d, w[i]->rows, w[i]->cols,
					    w[i]->row_bytes, x + (uint64_t)nd * w[i]->cols, T - nd,
					    y[i] + (uint64_t)nd * w[i]->rows);
			if (st != CM_OK)
				return st;
		}
		if (bias[i] && (st = wk_cu_add_bias(y[i], bias[i], (uint32_t)w[i]->rows, T, be->s)) != CM_OK)
			return st;
	}
	return CM_OK;
}

/* h <- the dense FFN of h (gate and up over the same h in one launch) */
static enum cm_status ffn_dense(struct cuda_backend *be, const struct dev_layer *L, uint32_t T,
				uint32_t nd, const struct dev_tensor *const *gu, float *const *gu_y,
				const float *const *gu_b)
{
	const struct wk_hparams *hp = &be->m->hp;
	enum cm_status st;

	if ((st = mm_multi(be, 2, gu, be->h, T, nd, gu_y, gu_b)) != CM_OK ||
	    (st = (hp->ffn_act == WK_FFN_GELU_TANH ? wk_cu_gelu_mul : wk_cu_silu_mul)(
		     be->g, be->u, (uint64_t)T * hp->n_ff, be->s)) != CM_OK)
		return st;
	return mm(be, &L->w_down, be->g, T, nd, be->h, NULL);
}

/*
 * h <- the mixture of experts of h (worker/cuda/moe.cuh): the router on
 * the matmul paths, then routing, the chosen experts per (token, expert)
 * pair, SwiGLU and the weighted sum, all on the device (graph-capturable).
 */
static enum cm_status ffn_moe(struct cuda_backend *be, uint32_t l, uint32_t T, uint32_t nd)
{
	const struct wk_hparams *hp = &be->m->hp;
	const struct dev_layer *L = &be->layers[l];
	uint32_t k = hp->n_expert_used, e = hp->n_embd, f = hp->n_ff_exp;
	const struct dev_tensor *g = &L->exp_gate, *u = &L->exp_up, *d = &L->exp_down;
	uint32_t *ids = be->m_ids + (uint64_t)l * be->cap * k; /* this layer's routing */
	enum cm_status st;

	if ((st = mm(be, &L->gate_inp, be->h, T, nd, be->m_logits, NULL)) != CM_OK ||
	    (st = wk_cu_moe_route(be->m_logits, T, hp->n_expert, k, hp->expert_norm,
				  hp->expert_scale, ids, be->m_w, be->s)) != CM_OK ||
	    (st = wk_cu_moe_gemv(g->type, g->d, g->expert_stride, f, e, g->row_bytes, ids, T,
				 k, be->h, 0, be->m_g, be->s)) != CM_OK ||
	    (st = wk_cu_moe_gemv(u->type, u->d, u->expert_stride, f, e, u->row_bytes, ids, T,
				 k, be->h, 0, be->m_u, be->s)) != CM_OK ||
	    (st = wk_cu_silu_mul(be->m_g, be->m_u, (uint64_t)T * k * f, be->s)) != CM_OK ||
	    (st = wk_cu_moe_gemv(d->type, d->d, d->expert_stride, e, f, d->row_bytes, ids, T,
				 k, be->m_g, 1, be->m_y, be->s)) != CM_OK)
		return st;
	if (L->shexp_gate.d) { /* qwen2moe's shared expert over h, before h is overwritten */
		const struct dev_tensor *gu[2] = { &L->shexp_gate, &L->shexp_up };
		float *const gu_y[2] = { be->g, be->u };
		const float *const gu_b[2] = { NULL, NULL };

		if ((st = mm_multi(be, 2, gu, be->h, T, nd, gu_y, gu_b)) != CM_OK ||
		    (st = wk_cu_silu_mul(be->g, be->u, (uint64_t)T * hp->n_ff_shexp, be->s)) != CM_OK ||
		    (st = mm(be, &L->shexp_down, be->g, T, nd, be->m_sy, NULL)) != CM_OK ||
		    (st = mm(be, &L->shexp_gate_inp, be->h, T, nd, be->m_sg, NULL)) != CM_OK)
			return st;
	}
	return wk_cu_moe_combine(be->m_y, be->m_w, T, k, e, L->shexp_gate.d ? be->m_sy : NULL,
				 be->m_sg, be->h, be->s);
}

/*
 * Enqueues the whole step for T rows (nd of them decode rows) and n_out
 * output rows (nd_out of them from decode rows) whose logits land in
 * d_logits.  Everything it reads comes from the metadata buffers, so the
 * same sequence of launches can be captured into a graph.
 */
static enum cm_status enqueue_step(struct cuda_backend *be, uint32_t T, uint32_t nd,
				   uint32_t n_out, uint32_t nd_out)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint32_t e = hp->n_embd, qd = hp->n_head * hp->head_dim;
	uint64_t layer_kv = (uint64_t)be->n_blocks * be->block_tokens * be->geo.kv_dim;
	enum cm_status st;

	st = wk_cu_embed(be->tok_embd.type, be->tok_embd.d, be->tok_embd.row_bytes, e, M_TOK(be),
			 T, be->x, be->s);
	if (st == CM_OK)
		st = wk_cu_scale(be->x, (uint64_t)T * e, hp->embd_scale, be->s);
	if (st != CM_OK)
		return st;
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct dev_layer *L = &be->layers[l];
		__half *kc = be->kv + 2 * l * layer_kv, *vc = kc + layer_kv;
		const struct dev_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv }, *gu[2] = { &L->w_gate, &L->w_up };
		float *qkv_y[3] = { be->q, be->k, be->v }, *gu_y[2] = { be->g, be->u };
		const float *qkv_b[3] = { L->bq, L->bk, L->bv }, *gu_b[2] = { NULL, NULL };
		struct wk_cu_kvgeo geo = be->geo;

		geo.n_swa = wk_layer_swa(hp, l); /* gemma2: the window on even layers only */
		/* gemma3's windowed layers: their own rope base, unscaled */
		const int local = hp->rope_base_swa > 0 && geo.n_swa != 0;

		if (local)
			geo.rope_mscale = 1.0f;

		if ((st = wk_cu_rmsnorm(be->x, NULL, L->attn_norm, hp->rms_eps, e, T, be->h,
					be->s)) != CM_OK ||
		    (st = mm_multi(be, 3, qkv, be->h, T, nd, qkv_y, qkv_b)) != CM_OK ||
		    /* qwen3: each head of q and k normalised in place before RoPE */
		    (L->q_norm && (st = wk_cu_rmsnorm(be->q, NULL, L->q_norm, hp->rms_eps, hp->head_dim,
						      T * hp->n_head, be->q, be->s)) != CM_OK) ||
		    (L->k_norm && (st = wk_cu_rmsnorm(be->k, NULL, L->k_norm, hp->rms_eps, hp->head_dim,
						      T * hp->n_head_kv, be->k, be->s)) != CM_OK) ||
		    (st = wk_cu_rope_store(be->q, be->k, be->v, M_POS(be), M_SEQ(be), M_TAB(be),
					   &geo, hp->rope_dim, hp->rope_style == WK_ROPE_NEOX,
					   local ? be->inv_freq_swa : be->inv_freq,
					   local ? 1.0 : hp->rope_pos_scale, kc, vc, T, be->s)) != CM_OK ||
		    (st = wk_cu_attention_split(be->q, M_POS(be), M_SEQ(be), M_TAB(be), &geo,
						kc, vc, be->att, be->att_part, nd, be->s)) != CM_OK ||
		    (st = wk_cu_attention(be->q + (uint64_t)nd * qd, M_POS(be) + nd,
					  M_SEQ(be) + nd, M_TAB(be), &geo, kc, vc,
					  be->att + (uint64_t)nd * qd, T - nd, be->s)) != CM_OK ||
		    (st = mm(be, &L->wo, be->att, T, nd, be->h, NULL)) != CM_OK ||
		    (L->attn_post_norm && (st = wk_cu_rmsnorm(be->h, NULL, L->attn_post_norm, hp->rms_eps,
							      e, T, be->h, be->s)) != CM_OK) ||
		    (st = wk_cu_add(be->x, be->h, (uint64_t)T * e, hp->residual_scale, be->s)) != CM_OK ||
		    (st = wk_cu_rmsnorm(be->x, NULL, L->ffn_norm, hp->rms_eps, e, T, be->h,
					be->s)) != CM_OK ||
		    (st = L->gate_inp.d ? ffn_moe(be, l, T, nd)
					: ffn_dense(be, L, T, nd, gu, gu_y, gu_b)) != CM_OK ||
		    (L->ffn_post_norm && (st = wk_cu_rmsnorm(be->h, NULL, L->ffn_post_norm, hp->rms_eps,
							     e, T, be->h, be->s)) != CM_OK) ||
		    (st = wk_cu_add(be->x, be->h, (uint64_t)T * e, hp->residual_scale, be->s)) != CM_OK)
			return st;
	}
	if (n_out == 0)
		return CM_OK;
	st = wk_cu_rmsnorm(be->x, M_OUT(be), be->output_norm, hp->rms_eps, e, n_out, be->h, be->s);
	if (st != CM_OK)
		return st;
	st = mm(be, &be->output, be->h, n_out, nd_out, be->d_logits, NULL);
	if (st == CM_OK && hp->logit_scale != 1.0f)
		st = wk_cu_scale(be->d_logits, (uint64_t)n_out * hp->n_vocab, 1.0f / hp->logit_scale,
				 be->s);
	if (st == CM_OK && hp->final_softcap > 0)
		st = wk_cu_softcap(be->d_logits, (uint64_t)n_out * hp->n_vocab, hp->final_softcap,
				   be->s);
	return st;
}

static int bucket_of(uint32_t T, uint32_t *B)
{
	uint32_t b = 1;

	for (int i = 0; i < WK_CU_N_BUCKETS; i++, b <<= 1)
		if (T <= b) {
			*B = b;
			return i;
		}
	return -1;
}

static enum cm_status upload_meta(struct cuda_backend *be, uint32_t T, uint32_t n_seqs)
{
	uint32_t c = be->cap;

	for (int a = 0; a < 4; a++)
		WK_CU(cudaMemcpyAsync(be->d_meta + (uint64_t)a * c, be->h_meta + (uint64_t)a * c,
				      (uint64_t)T * 4, cudaMemcpyHostToDevice, be->s));
	WK_CU(cudaMemcpyAsync(M_TAB(be), be->h_meta + 4ull * c,
			      (uint64_t)n_seqs * be->stride * 4, cudaMemcpyHostToDevice, be->s));
	return CM_OK;
}

static enum cm_status cuda_forward_inner(struct cuda_backend *be, const struct wk_batch *b,
					 float *logits)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint32_t T = b->n_tokens, bt = be->block_tokens, need = 1, nd = 0, nd_out = 0, k;
	uint32_t *h_tok, *h_pos, *h_seq, *h_out, *h_tab;
	uint32_t rows, B = 0;
	int bucket = -1;
	enum cm_status st;

	uint32_t max_pos = 0;

	/* the checks every backend makes (worker/engine/backend.h) */
	st = wk_batch_check(b, hp->n_vocab, bt, be->n_blocks, &max_pos);
	if (st != CM_OK)
		return st;
	if (T > 0)
		need = max_pos / bt + 1;
	/* sequences without tokens in the step still get a table row */
	rows = T > b->n_seqs ? T : b->n_seqs;
	st = ensure(be, rows, need);
	if (st != CM_OK)
		return st;
	st = ensure_logits(be, b->n_out);
	if (st != CM_OK)
		return st;

	/* classes: count each sequence's tokens; decode rows first, order kept */
	memset(be->cnt, 0, (size_t)b->n_seqs * 4);
	for (uint32_t t = 0; t < T; t++)
		be->cnt[b->seq[t]]++;
	k = 0;
	for (uint32_t t = 0; t < T; t++)
		if (be->cnt[b->seq[t]] == 1)
			be->perm[k++] = t;
	nd = k;
	for (uint32_t t = 0; t < T; t++)
		if (be->cnt[b->seq[t]] != 1)
			be->perm[k++] = t;
	for (uint32_t i = 0; i < T; i++)
		be->inv[be->perm[i]] = i;
	be->last_T = T;
	/* outputs sorted by their (new) row, so decode outputs come first */
	k = 0;
	for (uint32_t i = 0; i < T; i++)
		for (uint32_t o = 0; o < b->n_out; o++)
			if (b->out[o] == be->perm[i]) {
				be->outs[k] = i;
				be->out_orig[k] = o;
				k++;
			}
	if (k != b->n_out)
		return CM_EINVAL; /* duplicate out[] entries */
	for (uint32_t o = 0; o < b->n_out; o++)
		if (be->outs[o] < nd)
			nd_out++;

	/* a pure decode step small enough for a graph bucket */
	if (nd == T && T > 0)
		bucket = bucket_of(T, &B);
	if (bucket >= 0 && B > be->cap)
		bucket = -1;
	st = ensure_part(be, bucket >= 0 ? B : nd);
	if (st != CM_OK)
		return st;

	h_tok = be->h_meta;
	h_pos = be->h_meta + be->cap;
	h_seq = be->h_meta + 2ull * be->cap;
	h_out = be->h_meta + 3ull * be->cap;
	h_tab = be->h_meta + 4ull * be->cap;
	for (uint32_t i = 0; i < T; i++) {
		uint32_t t = be->perm[i];

		h_tok[i] = (uint32_t)b->tokens[t];
		h_pos[i] = b->pos[t];
		h_seq[i] = b->seq[t];
	}
	for (uint32_t o = 0; o < b->n_out; o++)
		h_out[o] = be->outs[o];
	for (uint32_t sidx = 0; sidx < b->n_seqs; sidx++) {
		const struct wk_batch_seq *sq = &b->seqs[sidx];
		uint32_t n = sq->n_blocks < be->stride ? sq->n_blocks : be->stride;

		for (uint32_t i = 0; i < be->stride; i++)
			h_tab[(uint64_t)sidx * be->stride + i] =
				i < n && sq->blocks[i] < be->n_blocks ? sq->blocks[i] : 0;
	}

	if (bucket >= 0) {
		/* padding rows: no KV write, no attention, outputs unused */
		for (uint32_t i = T; i < B; i++) {
			h_tok[i] = 0;
			h_pos[i] = WK_CU_POS_NONE;
			h_seq[i] = 0;
		}
		for (uint32_t o = b->n_out; o < B; o++)
			h_out[o] = 0;
		st = ensure_logits(be, B);
		if (st != CM_OK)
			return st;
		st = upload_meta(be, B, b->n_seqs);
		if (st != CM_OK)
			return st;
		if (!be->graph[bucket]) {
			cudaGraph_t gr = NULL;
			cudaError_t ce;

			WK_CU(cudaStreamBeginCapture(be->s, cudaStreamCaptureModeThreadLocal));
			st = enqueue_step(be, B, B, B, B);
			ce = cudaStreamEndCapture(be->s, &gr);
			if (st != CM_OK) {
				if (gr)
					cudaGraphDestroy(gr);
				return st;
			}
			WK_CU(ce);
			ce = cudaGraphInstantiate(&be->graph[bucket], gr, 0);
			cudaGraphDestroy(gr);
			WK_CU(ce);
		}
		WK_CU(cudaGraphLaunch(be->graph[bucket], be->s));
	} else {
		st = upload_meta(be, T, b->n_seqs);
		if (st != CM_OK)
			return st;
		st = enqueue_step(be, T, nd, b->n_out, nd_out);
		if (st != CM_OK)
			return st;
	}
	/* the logits copy: n_out rows back to the caller's order, one copy per
	 * run of rows that stay consecutive (a decode-only step: one copy) */
	for (uint32_t o = 0, n; o < b->n_out; o += n) {
		for (n = 1; o + n < b->n_out && be->out_orig[o + n] == be->out_orig[o] + n; n++)
			;
		WK_CU(cudaMemcpyAsync(logits + (uint64_t)be->out_orig[o] * hp->n_vocab,
				      be->d_logits + (uint64_t)o * hp->n_vocab,
				      (uint64_t)n * hp->n_vocab * 4, cudaMemcpyDeviceToHost, be->s));
	}
	WK_CU(cudaStreamSynchronize(be->s));
	return CM_OK;
}

static enum cm_status cuda_forward(struct wk_backend *base, const struct wk_batch *b,
				   float *logits)
{
	struct cuda_backend *be = (struct cuda_backend *)base;

	if (b->n_tokens == 0)
		return CM_OK;
	WK_CU(cudaSetDevice(be->dev));
	return cuda_forward_inner(be, b, logits);
}

/* ---- lifecycle ---------------------------------------------------------------- */

static void cuda_destroy(struct wk_backend *base)
{
	struct cuda_backend *be = (struct cuda_backend *)base;

	if (!be)
		return;
	cudaSetDevice(be->dev);
	if (be->s)
		cudaStreamSynchronize(be->s);
	drop_graphs(be);
	free_scratch(be);
	wk_cu_gemm_free(be->gemm);
	cudaFree(be->d_logits);
	cudaFree(be->att_part);
	cudaFree(be->kv);
	cudaFree(be->wmem);
	if (be->s)
		cudaStreamDestroy(be->s);
	cm_free(be->layers);
	cm_free(be);
}

extern "C" int wk_cuda_device_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return n;
}

static uint64_t kv_block_bytes(const struct wk_hparams *hp, uint32_t bt)
{
	return 2ull * hp->n_layer * bt * hp->n_head_kv * hp->head_dim * sizeof(__half);
}

extern "C" enum cm_status wk_cuda_kv_blocks_for(int device, const struct wk_model *m,
						uint32_t bt, double fraction, uint32_t *out)
{
	size_t mem_free = 0, mem_total = 0;
	uint64_t need, per_block = kv_block_bytes(&m->hp, bt), avail, n;

	*out = 0;
	if (device < 0 || device >= wk_cuda_device_count())
		return CM_ENOTFOUND;
	WK_CU(cudaSetDevice(device));
	WK_CU(cudaMemGetInfo(&mem_free, &mem_total));
	need = model_device_bytes(m) + WK_CU_RESERVE_FIXED +
	       WK_CU_RESERVE_TOKENS * per_token_scratch(&m->hp) +
	       wk_cu_gemm_scratch_bytes(max_cols(m), WK_CU_RESERVE_TOKENS) +
	       (uint64_t)WK_CU_GRAPH_MAX * m->hp.n_vocab * 4 +
	       /* split-attention partials of 256 decode rows over n_ctx_train */
	       (uint64_t)WK_CU_GRAPH_MAX * m->hp.n_head * (m->hp.head_dim + 2) * 4 *
		       ((m->hp.n_ctx_train ? m->hp.n_ctx_train : 4096) / WK_CU_ATT_CHUNK + 2);
	if (mem_free <= need || per_block == 0)
		return CM_OK;
	avail = (uint64_t)((double)(mem_free - need) * fraction);
	n = avail / per_block;
	*out = (uint32_t)(n > (1u << 24) ? (1u << 24) : n);
	return CM_OK;
}

static enum cm_status create_inner(struct cuda_backend *be, char *err, size_t err_len)
{
	const struct wk_model *m = be->m;
	const struct wk_hparams *hp = &m->hp;
	cudaDeviceProp prop;
	enum cm_status st;
	const struct wk_tensor *check[17];

	uint32_t grp = hp->n_head_kv ? hp->n_head / hp->n_head_kv : 0;

	if (!hp->causal || !m->output.data) {
		snprintf(err, err_len, "cuda backend: model architecture '%s' is an encoder (an "
			 "embedding model): the cuda backend does not run encoders yet; "
			 "worker.backend = cpu does", m->cfg ? m->cfg->arch_name : "?");
		return CM_EUNSUPPORTED;
	}
	/* exactly the shapes attention.cu instantiates */
	if ((hp->head_dim != 32 && hp->head_dim != 64 && hp->head_dim != 96 &&
	     hp->head_dim != 128 && hp->head_dim != 256) ||
	    hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv ||
	    (grp != 1 && grp != 2 && grp != 4 && grp != 8) || hp->rope_dim % 2) {
		snprintf(err, err_len, "cuda backend: unsupported shape (head_dim %u, heads %u/%u): "
			 "expected head_dim 32/64/96/128/256 and a GQA group of 1, 2, 4 or 8",
			 hp->head_dim, hp->n_head, hp->n_head_kv);
		return CM_EUNSUPPORTED;
	}
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];

		check[0] = &L->wq; check[1] = &L->wk; check[2] = &L->wv; check[3] = &L->wo;
		check[4] = &L->w_gate; check[5] = &L->w_up; check[6] = &L->w_down;
		check[7] = &m->output;
		check[8] = &m->tok_embd;
		check[9] = &L->ffn_gate_inp; check[10] = &L->exp_gate; check[11] = &L->exp_up;
		check[12] = &L->exp_down;
		check[13] = &L->shexp_gate_inp; check[14] = &L->shexp_gate; check[15] = &L->shexp_up;
		check[16] = &L->shexp_down;
		for (int i = 0; i < 17; i++)
			if (!type_ok(check[i])) {
				snprintf(err, err_len, "cuda backend: tensor %s: type %s with %llu "
					 "columns is not supported",
					 check[i]->name ? check[i]->name : "?",
					 wk_qtype_name(check[i]->type),
					 (unsigned long long)check[i]->cols);
				return CM_EUNSUPPORTED;
			}
	}
	WK_CU(cudaSetDevice(be->dev));
	WK_CU(cudaGetDeviceProperties(&prop, be->dev));
	snprintf(be->dev_name, sizeof(be->dev_name), "%.80s (sm_%d%d, device %d)", prop.name,
		 prop.major, prop.minor, be->dev);
	WK_CU(cudaStreamCreateWithFlags(&be->s, cudaStreamNonBlocking));
	be->layers = (struct dev_layer *)cm_calloc(hp->n_layer, sizeof(*be->layers));
	if (!be->layers)
		return CM_ENOMEM;
	st = upload(be);
	if (st != CM_OK) {
		snprintf(err, err_len, "cuda backend: uploading %llu bytes of weights failed",
			 (unsigned long long)be->weight_bytes);
		return st;
	}
	be->kv_bytes = kv_block_bytes(hp, be->block_tokens) * be->n_blocks;
	{
		cudaError_t ce = cudaMalloc(&be->kv, be->kv_bytes);

		if (ce != cudaSuccess) {
			(void)cudaGetLastError();
			snprintf(err, err_len, "cuda backend: cannot allocate %llu bytes of KV cache "
				 "(%u blocks): %s", (unsigned long long)be->kv_bytes, be->n_blocks,
				 cudaGetErrorString(ce));
			return CM_ENOMEM;
		}
	}
	WK_CU(cudaMemset(be->kv, 0, be->kv_bytes));
	be->geo.n_head = hp->n_head;
	be->geo.n_head_kv = hp->n_head_kv;
	be->geo.head_dim = hp->head_dim;
	be->geo.scale = hp->attn_scale;
	be->geo.n_swa = hp->n_swa;
	be->geo.rope_mscale = hp->rope_attn_factor;
	be->geo.softcap = hp->attn_softcap;
	be->geo.kv_dim = hp->n_head_kv * hp->head_dim;
	be->geo.block_tokens = be->block_tokens;
	{
		uint32_t ctx = hp->n_ctx_train ? hp->n_ctx_train : 4096;
		uint32_t stride = (ctx + be->block_tokens - 1) / be->block_tokens;

		if (stride > be->n_blocks)
			stride = be->n_blocks;
		st = ensure(be, WK_CU_GRAPH_MAX, stride ? stride : 1);
	}
	if (st == CM_OK)
		st = ensure_logits(be, WK_CU_GRAPH_MAX);
	if (st != CM_OK)
		snprintf(err, err_len, "cuda backend: allocating scratch failed");
	return st;
}

extern "C" enum cm_status wk_cuda_backend_create(const struct wk_model *m, int device,
						 uint32_t n_blocks, uint32_t block_tokens,
						 struct wk_backend **out, char *err,
						 size_t err_len)
{
	struct cuda_backend *be;
	enum cm_status st;

	err[0] = '\0';
	*out = NULL;
	if (device < 0 || device >= wk_cuda_device_count()) {
		snprintf(err, err_len, "cuda backend: device %d not found (%d visible)", device,
			 wk_cuda_device_count());
		return CM_ENOTFOUND;
	}
	if (n_blocks == 0 || block_tokens == 0) {
		snprintf(err, err_len, "cuda backend: expected n_blocks and block_tokens > 0");
		return CM_EINVAL;
	}
	be = (struct cuda_backend *)cm_calloc(1, sizeof(*be));
	if (!be) {
		snprintf(err, err_len, "cuda backend: out of memory");
		return CM_ENOMEM;
	}
	be->base.ops = &wk_cuda_backend_ops;
	be->m = m;
	be->dev = device;
	be->n_blocks = n_blocks;
	be->block_tokens = block_tokens;
	st = create_inner(be, err, err_len);
	if (st != CM_OK) {
		if (err[0] == '\0')
			snprintf(err, err_len, "cuda backend: setup failed (see the cuda_error log)");
		cuda_destroy(&be->base);
		return st;
	}
	*out = &be->base;
	return CM_OK;
}

static enum cm_status cuda_create(const struct wk_model *m, const struct wk_backend_params *p,
				  struct wk_backend **out, char *err, size_t err_len)
{
	if (p->kv_type != WK_Q_F16) {
		snprintf(err, err_len, "worker.kv_type: the cuda backend keeps F16 KV, found F32");
		return CM_EUNSUPPORTED;
	}
	return wk_cuda_backend_create(m, p->device, p->n_blocks, p->block_tokens, out, err,
				      err_len);
}

static enum cm_status cuda_kv_blocks_for(const struct wk_model *m,
					 const struct wk_backend_params *p, double fraction,
					 uint32_t *out)
{
	return wk_cuda_kv_blocks_for(p->device, m, p->block_tokens, fraction, out);
}

static enum cm_status cuda_copy_block(struct wk_backend *base, uint32_t dst, uint32_t src)
{
	struct cuda_backend *be = (struct cuda_backend *)base;
	uint64_t layer_kv = (uint64_t)be->n_blocks * be->block_tokens * be->geo.kv_dim;
	uint64_t blk = (uint64_t)be->block_tokens * be->geo.kv_dim;

	if (dst >= be->n_blocks || src >= be->n_blocks)
		return CM_EINVAL;
	WK_CU(cudaSetDevice(be->dev));
	for (uint32_t l = 0; l < 2 * be->m->hp.n_layer; l++)
		WK_CU(cudaMemcpyAsync(be->kv + l * layer_kv + dst * blk,
				      be->kv + l * layer_kv + src * blk, blk * sizeof(__half),
				      cudaMemcpyDeviceToDevice, be->s));
	WK_CU(cudaStreamSynchronize(be->s));
	return CM_OK;
}

/* The driver, runtime and cuBLAS versions, for worker.pin_* and HELLO. */
static void cuda_versions(struct wk_backend_info *out)
{
	int v = 0, ma = 0, mi = 0, pa = 0;

	if (cudaDriverGetVersion(&v) == cudaSuccess)
		out->cuda_driver = v;
	if (cudaRuntimeGetVersion(&v) == cudaSuccess)
		out->cuda_runtime = v;
	if (cublasGetProperty(MAJOR_VERSION, &ma) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(MINOR_VERSION, &mi) == CUBLAS_STATUS_SUCCESS &&
	    cublasGetProperty(PATCH_LEVEL, &pa) == CUBLAS_STATUS_SUCCESS)
		out->cublas = ma * 10000 + mi * 100 + pa;
	(void)cudaGetLastError();
}

static void cuda_info(const struct wk_backend *base, struct wk_backend_info *out)
{
	const struct cuda_backend *be = (const struct cuda_backend *)base;
	size_t mem_free = 0, mem_total = 0;

	memset(out, 0, sizeof(*out));
	out->name = "cuda";
	snprintf(out->device, sizeof(out->device), "%.120s", be->dev_name);
	out->weight_bytes = be->weight_bytes;
	out->kv_bytes = be->kv_bytes;
	if (cudaSetDevice(be->dev) == cudaSuccess &&
	    cudaMemGetInfo(&mem_free, &mem_total) == cudaSuccess) {
		out->mem_used = mem_total - mem_free;
		out->mem_total = mem_total;
	} else {
		(void)cudaGetLastError();
	}
	cuda_versions(out);
}

/* page-locked host memory for the logits (sched.c asks for it) */
static void *cuda_host_alloc(struct wk_backend *base, size_t bytes)
{
	struct cuda_backend *be = (struct cuda_backend *)base;
	void *p = NULL;

	if (cudaSetDevice(be->dev) != cudaSuccess || cudaMallocHost(&p, bytes) != cudaSuccess)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void cuda_host_free(struct wk_backend *base, void *p)
{
	(void)base;
	cudaFreeHost(p);
}

const struct wk_backend_ops wk_cuda_backend_ops = {
	"cuda",
	cuda_create,
	cuda_destroy,
	cuda_forward,
	cuda_copy_block,
	cuda_info,
	wk_cuda_device_count,
	cuda_kv_blocks_for,
	cuda_host_alloc,
	cuda_host_free,
	NULL, /* embed: encoders run on the cpu backend (docs/engine-cuda.md) */
};

extern "C" enum cm_status wk_cuda_backend_routing(const struct wk_backend *base, uint32_t layer,
						  uint32_t token, uint32_t *ids)
{
	const struct cuda_backend *be = (const struct cuda_backend *)base;
	uint32_t k = be->m->hp.n_expert_used;

	if (!be->m_ids || layer >= be->m->hp.n_layer || token >= be->last_T)
		return CM_ENOTFOUND;
	WK_CU(cudaStreamSynchronize(be->s));
	WK_CU(cudaMemcpy(ids, be->m_ids + ((uint64_t)layer * be->cap + be->inv[token]) * k,
			 (uint64_t)k * sizeof(uint32_t), cudaMemcpyDeviceToHost));
	return CM_OK;
}
