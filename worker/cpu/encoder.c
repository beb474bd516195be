/*
 * encoder.c - the CPU encoder forward pass (see encoder.h).
 *
 * Owns nothing beyond one call: the activations of the input (n x embd,
 * n x ff) are allocated per call and freed before it returns.  Every
 * per-token operation runs in a fixed order; the projections go through
 * wk_cpu_matmul.
 */
#include "worker/cpu/encoder.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "worker/cpu/ops.h"
#include "worker/cpu/pool.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"

struct enc_buf {
	float *x, *q, *k, *v, *a, *h, *f, *g, *vec, *sc;
	const uint32_t *start, *len; /* each input's first row and its rows */
	uint32_t n_in, max_len;
	uint64_t sc_per_thread;      /* scores, K^T and V^T of one (input, head) */
	const struct wk_hparams *hp;
};

static void enc_free(struct enc_buf *b)
{
	cm_free(b->x);
	cm_free(b->q);
	cm_free(b->k);
	cm_free(b->v);
	cm_free(b->a);
	cm_free(b->h);
	cm_free(b->f);
	cm_free(b->g);
	cm_free(b->vec);
	cm_free(b->sc);
}

/* y = LayerNorm(x) * w + b over n values (mean and variance in double) */
static void layer_norm(float *y, const float *x, const float *w, const float *b, uint32_t n,
		       float eps)
{
	double mean = 0, var = 0;

	for (uint32_t i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (uint32_t i = 0; i < n; i++)
		var += ((double)x[i] - mean) * ((double)x[i] - mean);
	var /= n;
	float inv = (float)(1.0 / sqrt(var + eps)), m = (float)mean;

	for (uint32_t i = 0; i < n; i++)
		y[i] = (x[i] - m) * inv * w[i] + b[i];
}

/* y (n, rows) = x (n, cols) W^T + bias (an F32 vector; nomic-bert: none) */
static enum cm_status proj(struct wk_cpu_mm *mm, const struct wk_tensor *w,
			   const struct wk_tensor *bias, const float *x, uint32_t n, float *y)
{
	enum cm_status st = wk_cpu_matmul(mm, w->type, w->data, (int)w->rows, (int)w->cols, x,
					  (int)n, y);
	const float *b = bias->data;

	for (uint32_t t = 0; st == CM_OK && b && t < n; t++)
		wk_cpu_add(y + (uint64_t)t * w->rows, b, (int)w->rows);
	return st;
}

/* nomic-bert: q and k of every input's positions 0.. turned by RoPE (neox) */
static void rope_qk(const struct wk_hparams *hp, struct enc_buf *b)
{
	struct wk_cpu_rope r = { .n_rot = (int)hp->rope_dim, .neox = 1, .base = hp->rope_base,
				 .freq_scale = hp->rope_pos_scale, .mscale = 1.0f };
	uint32_t e = hp->n_embd, kvd = hp->n_head_kv * hp->head_dim;

	for (uint32_t in = 0; in < b->n_in; in++)
		for (uint32_t t = 0; t < b->len[in]; t++) {
			uint64_t row = (uint64_t)b->start[in] + t;

			wk_cpu_rope_sincos(&r, (int)t, b->vec);
			wk_cpu_rope_apply(&r, b->vec, b->q + row * e, (int)hp->n_head, (int)hp->head_dim);
			wk_cpu_rope_apply(&r, b->vec, b->k + row * kvd, (int)hp->n_head_kv,
					  (int)hp->head_dim);
		}
}

/* the FFN into b->h: bert up (+bias), GELU, down (+bias); nomic-bert
 * silu(gate) * up, down */
static enum cm_status ffn(struct wk_cpu_mm *mm, const struct wk_hparams *hp,
			  const struct wk_layer *L, struct enc_buf *b, uint32_t n)
{
	uint32_t f = hp->n_ff;
	enum cm_status st;

	if (hp->arch == WK_ARCH_NOMIC_BERT) {
		struct wk_cpu_mm_op ops[2] = {
			{ L->w_gate.type, L->w_gate.data, (int)L->w_gate.rows, (int)L->w_gate.cols, b->x,
			  (int)n, b->f },
			{ L->w_up.type, L->w_up.data, (int)L->w_up.rows, (int)L->w_up.cols, b->x, (int)n,
			  b->g },
		};

		if ((st = wk_cpu_matmul_multi(mm, ops, 2)) != CM_OK)
			return st;
		for (uint32_t t = 0; t < n; t++)
			wk_cpu_silu_mul(b->f + (uint64_t)t * f, b->f + (uint64_t)t * f,
					b->g + (uint64_t)t * f, (int)f);
	} else {
		if ((st = proj(mm, &L->w_up, &L->b_up, b->x, n, b->f)) != CM_OK)
			return st;
		for (uint32_t t = 0; t < n; t++)
			wk_cpu_gelu(b->f + (uint64_t)t * f, (int)f);
	}
	return proj(mm, &L->w_down, &L->b_down, b->f, n, b->h);
}

/* q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv in one parallel run */
static enum cm_status proj_qkv(struct wk_cpu_mm *mm, const struct wk_layer *L, const float *x,
			       uint32_t n, struct enc_buf *b)
{
	const struct wk_tensor *w[3] = { &L->wq, &L->wk, &L->wv }, *bias[3] = { &L->bq, &L->bk, &L->bv };
	float *y[3] = { b->q, b->k, b->v };
	struct wk_cpu_mm_op ops[3];
	enum cm_status st;

	for (int i = 0; i < 3; i++)
		ops[i] = (struct wk_cpu_mm_op){ .wtype = w[i]->type, .w = w[i]->data,
						.rows = (int)w[i]->rows, .cols = (int)w[i]->cols,
						.x = x, .n = (int)n, .y = y[i] };
	if ((st = wk_cpu_matmul_multi(mm, ops, 3)) != CM_OK)
		return st;
	for (int i = 0; i < 3 && bias[i]->data; i++)
		for (uint32_t t = 0; t < n; t++)
			wk_cpu_add(y[i] + (uint64_t)t * w[i]->rows, bias[i]->data, (int)w[i]->rows);
	return CM_OK;
}

/*
 * a = softmax(q k^T / sqrt(hd)) v for one (input, head): every position
 * of the input sees every other of the same input, none of another.  The
 * head's K and V are copied transposed (hd rows of n) into the thread's
 * scratch, so that a query's scores are hd axpys over n and its output hd
 * dots over n: long vectors for the SIMD ops.
 */
static void attention_task(void *ctx, int task, int thread)
{
	struct enc_buf *b = ctx;
	const struct wk_hparams *hp = b->hp;
	uint32_t hd = hp->head_dim, e = hp->n_embd, grp = hp->n_head / hp->n_head_kv;
	uint32_t kvd = hp->n_head_kv * hd, in = (uint32_t)task / hp->n_head;
	uint32_t h = (uint32_t)task % hp->n_head, n = b->len[in];
	uint64_t r0 = b->start[in], kv0 = (uint64_t)(h / grp) * hd;
	float scale = 1.0f / sqrtf((float)hd);
	float *sc = b->sc + (uint64_t)thread * b->sc_per_thread, *kt = sc + b->max_len,
	      *vt = kt + (uint64_t)hd * b->max_len;

	for (uint32_t j = 0; j < n; j++)
		for (uint32_t c = 0; c < hd; c++) {
			kt[(uint64_t)c * n + j] = b->k[(r0 + j) * kvd + kv0 + c];
			vt[(uint64_t)c * n + j] = b->v[(r0 + j) * kvd + kv0 + c];
		}
	for (uint32_t i = 0; i < n; i++) {
		const float *q = b->q + (r0 + i) * e + (uint64_t)h * hd;
		float *o = b->a + (r0 + i) * e + (uint64_t)h * hd;

		memset(sc, 0, n * sizeof(float));
		for (uint32_t c = 0; c < hd; c++)
			wk_cpu_axpy_f32(sc, q[c] * scale, kt + (uint64_t)c * n, (int)n);
		wk_cpu_softmax(sc, (int)n);
		for (uint32_t c = 0; c < hd; c++)
			o[c] = wk_cpu_dot_f32(sc, vt + (uint64_t)c * n, (int)n);
	}
}

/* one layer over the n positions in b->x */
static enum cm_status layer(struct wk_cpu_mm *mm, const struct wk_hparams *hp,
			    const struct wk_layer *L, struct enc_buf *b, uint32_t n)
{
	uint32_t e = hp->n_embd;
	enum cm_status st;

	if ((st = proj_qkv(mm, L, b->x, n, b)) != CM_OK)
		return st;
	if (hp->arch == WK_ARCH_NOMIC_BERT)
		rope_qk(hp, b);
	wk_pool_run(wk_cpu_mm_pool(mm), attention_task, b, (int)(b->n_in * hp->n_head));
	if ((st = proj(mm, &L->wo, &L->bo, b->a, n, b->h)) != CM_OK)
		return st;
	for (uint32_t t = 0; t < n; t++) {
		float *x = b->x + (uint64_t)t * e;

		wk_cpu_add(x, b->h + (uint64_t)t * e, (int)e);
		layer_norm(x, x, L->ln_attn.data, L->ln_attn_b.data, e, hp->norm_eps);
	}
	if ((st = ffn(mm, hp, L, b, n)) != CM_OK)
		return st;
	for (uint32_t t = 0; t < n; t++) {
		float *x = b->x + (uint64_t)t * e;

		wk_cpu_add(x, b->h + (uint64_t)t * e, (int)e);
		layer_norm(x, x, L->ln_out.data, L->ln_out_b.data, e, hp->norm_eps);
	}
	return CM_OK;
}

void wk_cpu_pool(const struct wk_hparams *hp, const float *x, uint32_t n, float *out)
{
	uint32_t e = hp->n_embd;
	double norm = 0;

	memset(out, 0, e * sizeof(float));
	if (hp->pooling == WK_POOL_CLS || hp->pooling == WK_POOL_LAST) {
		memcpy(out, x + (uint64_t)(hp->pooling == WK_POOL_CLS ? 0 : n - 1) * e,
		       e * sizeof(float));
	} else {
		for (uint32_t t = 0; t < n; t++)
			wk_cpu_add(out, x + (uint64_t)t * e, (int)e);
		for (uint32_t i = 0; i < e; i++)
			out[i] /= (float)n;
	}
	for (uint32_t i = 0; i < e; i++)
		norm += (double)out[i] * out[i];
	norm = sqrt(norm);
	for (uint32_t i = 0; norm > 0 && i < e; i++)
		out[i] = (float)(out[i] / norm);
}

/* b->x rows of input `in`: token + type 0 + position embeddings, LayerNorm */
static void embed_input(const struct wk_model *m, struct enc_buf *b, const int32_t *tokens,
			uint32_t in)
{
	const struct wk_mcfg *c = m->cfg;
	uint64_t e = m->hp.n_embd;

	for (uint32_t t = 0; t < b->len[in]; t++) {
		uint64_t r = b->start[in] + t;
		float *x = b->x + r * e;

		wk_dequantize_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data +
							    (uint64_t)tokens[r] * m->tok_embd.row_bytes,
				  x, e);
		wk_cpu_add(x, b->a, (int)e);
		if (c->pos_embd.data) { /* bert; nomic-bert turns q and k instead */
			wk_dequantize_row(c->pos_embd.type, (const uint8_t *)c->pos_embd.data +
								    (uint64_t)t * c->pos_embd.row_bytes,
					  b->vec, e);
			wk_cpu_add(x, b->vec, (int)e);
		}
		layer_norm(x, x, c->embd_norm.data, c->embd_norm_b.data, (uint32_t)e,
			   m->hp.norm_eps);
	}
}

enum cm_status wk_cpu_encode_batch(struct wk_cpu_mm *mm, const struct wk_model *m,
				   uint32_t n_in, const int32_t *tokens, const uint32_t *lens,
				   float *out)
{
	const struct wk_hparams *hp = &m->hp;
	uint64_t e = hp->n_embd, kvd = (uint64_t)hp->n_head_kv * hp->head_dim, n = 0;
	uint32_t *start = NULL;
	struct enc_buf b = { 0 };
	enum cm_status st = CM_OK;
	int nth = wk_pool_threads(wk_cpu_mm_pool(mm));

	if (!wk_mcfg_encoder_arch(hp->arch) || n_in == 0 ||
	    (uint64_t)n_in * hp->n_head > WK_POOL_MAX_TASKS)
		return CM_EINVAL;
	for (uint32_t i = 0; i < n_in; i++) {
		if (lens[i] == 0 || lens[i] > hp->n_ctx_train)
			return CM_EINVAL;
		b.max_len = lens[i] > b.max_len ? lens[i] : b.max_len;
		n += lens[i];
	}
	if (n > INT32_MAX / (hp->n_ff > e ? hp->n_ff : e))
		return CM_EINVAL;
	for (uint64_t t = 0; t < n; t++)
		if (tokens[t] < 0 || (uint32_t)tokens[t] >= hp->n_vocab)
			return CM_EINVAL;
	start = cm_malloc(n_in * sizeof(uint32_t));
	b.x = cm_calloc_aligned(n * e, sizeof(float));
	b.q = cm_calloc_aligned(n * e, sizeof(float));
	b.k = cm_calloc_aligned(n * kvd, sizeof(float));
	b.v = cm_calloc_aligned(n * kvd, sizeof(float));
	b.a = cm_calloc_aligned(n * e, sizeof(float));
	b.h = cm_calloc_aligned(n * e, sizeof(float));
	b.f = cm_calloc_aligned(n * hp->n_ff, sizeof(float));
	b.g = hp->arch == WK_ARCH_NOMIC_BERT ? cm_calloc_aligned(n * hp->n_ff, sizeof(float)) : NULL;
	b.vec = cm_malloc((e > hp->rope_dim ? e : hp->rope_dim) * sizeof(float));
	b.sc_per_thread = (1 + 2 * (uint64_t)hp->head_dim) * b.max_len;
	b.sc = cm_malloc((uint64_t)nth * b.sc_per_thread * sizeof(float));
	if (!start || !b.x || !b.q || !b.k || !b.v || !b.a || !b.h || !b.f || !b.vec || !b.sc ||
	    (hp->arch == WK_ARCH_NOMIC_BERT && !b.g)) {
		st = CM_ENOMEM;
		goto out;
	}
	start[0] = 0;
	for (uint32_t i = 1; i < n_in; i++)
		start[i] = start[i - 1] + lens[i - 1];
	b.start = start;
	b.len = lens;
	b.n_in = n_in;
	b.hp = hp;
	/* token type 0 for every token: its row, decoded once (a is free until
	 * the first attention) */
	wk_dequantize_row(m->cfg->tok_types.type, m->cfg->tok_types.data, b.a, e);
	for (uint32_t i = 0; i < n_in; i++)
		embed_input(m, &b, tokens, i);
	for (uint32_t l = 0; l < hp->n_layer && st == CM_OK; l++)
		st = layer(mm, hp, &m->layers[l], &b, (uint32_t)n);
	for (uint32_t i = 0; st == CM_OK && i < n_in; i++)
		wk_cpu_pool(hp, b.x + (uint64_t)start[i] * e, lens[i], out + i * e);
out:
	cm_free(start);
	enc_free(&b);
	return st;
}

enum cm_status wk_cpu_encode(struct wk_cpu_mm *mm, const struct wk_model *m,
			     const int32_t *tokens, uint32_t n, float *out)
{
	return wk_cpu_encode_batch(mm, m, 1, tokens, &n, out);
}
