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
#include <string.h>

#include "common/alloc.h"
#include "worker/cpu/ops.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"

struct enc_buf {
	float *x, *q, *k, *v, *a, *h, *f, *vec, *sc;
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

/* y (n, rows) = x (n, cols) W^T + bias (an F32 vector) */
static enum cm_status proj(struct wk_cpu_mm *mm, const struct wk_tensor *w,
			   const struct wk_tensor *bias, const float *x, uint32_t n, float *y)
{
	enum cm_status st = wk_cpu_matmul(mm, w->type, w->data, (int)w->rows, (int)w->cols, x,
					  (int)n, y);
	const float *b = bias->data;

	for (uint32_t t = 0; st == CM_OK && t < n; t++)
		wk_cpu_add(y + (uint64_t)t * w->rows, b, (int)w->rows);
	return st;
}

/* a = softmax(q k^T / sqrt(hd)) v per head, every position seeing every other */
static void attention(const struct wk_hparams *hp, struct enc_buf *b, uint32_t n)
{
	uint32_t hd = hp->head_dim, e = hp->n_embd, grp = hp->n_head / hp->n_head_kv;
	uint32_t kvd = hp->n_head_kv * hd;
	float scale = 1.0f / sqrtf((float)hd);

	for (uint32_t h = 0; h < hp->n_head; h++)
		for (uint32_t i = 0; i < n; i++) {
			const float *q = b->q + (uint64_t)i * e + (uint64_t)h * hd;
			float *o = b->a + (uint64_t)i * e + (uint64_t)h * hd;

			for (uint32_t j = 0; j < n; j++) {
				const float *k = b->k + (uint64_t)j * kvd + (uint64_t)(h / grp) * hd;
				float d = 0;

				for (uint32_t c = 0; c < hd; c++)
					d += q[c] * k[c];
				b->sc[j] = d * scale;
			}
			wk_cpu_softmax(b->sc, (int)n);
			memset(o, 0, hd * sizeof(float));
			for (uint32_t j = 0; j < n; j++) {
				const float *v = b->v + (uint64_t)j * kvd + (uint64_t)(h / grp) * hd;

				for (uint32_t c = 0; c < hd; c++)
					o[c] += b->sc[j] * v[c];
			}
		}
}

/* one layer over the n positions in b->x */
static enum cm_status layer(struct wk_cpu_mm *mm, const struct wk_hparams *hp,
			    const struct wk_layer *L, struct enc_buf *b, uint32_t n)
{
	uint32_t e = hp->n_embd, f = hp->n_ff;
	enum cm_status st;

	if ((st = proj(mm, &L->wq, &L->bq, b->x, n, b->q)) != CM_OK ||
	    (st = proj(mm, &L->wk, &L->bk, b->x, n, b->k)) != CM_OK ||
	    (st = proj(mm, &L->wv, &L->bv, b->x, n, b->v)) != CM_OK)
		return st;
	attention(hp, b, n);
	if ((st = proj(mm, &L->wo, &L->bo, b->a, n, b->h)) != CM_OK)
		return st;
	for (uint32_t t = 0; t < n; t++) {
		float *x = b->x + (uint64_t)t * e;

		wk_cpu_add(x, b->h + (uint64_t)t * e, (int)e);
		layer_norm(x, x, L->ln_attn.data, L->ln_attn_b.data, e, hp->norm_eps);
	}
	if ((st = proj(mm, &L->w_up, &L->b_up, b->x, n, b->f)) != CM_OK)
		return st;
	for (uint64_t i = 0; i < (uint64_t)n * f; i++) {
		float g = b->f[i];

		b->f[i] = 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
	}
	if ((st = proj(mm, &L->w_down, &L->b_down, b->f, n, b->h)) != CM_OK)
		return st;
	for (uint32_t t = 0; t < n; t++) {
		float *x = b->x + (uint64_t)t * e;

		wk_cpu_add(x, b->h + (uint64_t)t * e, (int)e);
		layer_norm(x, x, L->ln_out.data, L->ln_out_b.data, e, hp->norm_eps);
	}
	return CM_OK;
}

/* out = the pooled, L2-normalised final states */
static void pool(const struct wk_hparams *hp, const float *x, uint32_t n, float *out)
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

enum cm_status wk_cpu_encode(struct wk_cpu_mm *mm, const struct wk_model *m,
			     const int32_t *tokens, uint32_t n, float *out)
{
	const struct wk_hparams *hp = &m->hp;
	const struct wk_mcfg *c = m->cfg;
	uint64_t e = hp->n_embd, kvd = (uint64_t)hp->n_head_kv * hp->head_dim;
	struct enc_buf b = { 0 };
	enum cm_status st = CM_OK;

	if (hp->arch != WK_ARCH_BERT || n == 0 || n > hp->n_ctx_train)
		return CM_EINVAL;
	for (uint32_t t = 0; t < n; t++)
		if (tokens[t] < 0 || (uint32_t)tokens[t] >= hp->n_vocab)
			return CM_EINVAL;
	b.x = cm_malloc(n * e * sizeof(float));
	b.q = cm_malloc(n * e * sizeof(float));
	b.k = cm_malloc(n * kvd * sizeof(float));
	b.v = cm_malloc(n * kvd * sizeof(float));
	b.a = cm_malloc(n * e * sizeof(float));
	b.h = cm_malloc(n * e * sizeof(float));
	b.f = cm_malloc((uint64_t)n * hp->n_ff * sizeof(float));
	b.vec = cm_malloc(e * sizeof(float));
	b.sc = cm_malloc(n * sizeof(float));
	if (!b.x || !b.q || !b.k || !b.v || !b.a || !b.h || !b.f || !b.vec || !b.sc) {
		st = CM_ENOMEM;
		goto out;
	}
	/* token type 0 for every token: its row, decoded once (a is free until
	 * the first attention) */
	wk_dequantize_row(c->tok_types.type, c->tok_types.data, b.a, e);
	for (uint32_t t = 0; t < n; t++) {
		float *x = b.x + (uint64_t)t * e;

		wk_dequantize_row(m->tok_embd.type, (const uint8_t *)m->tok_embd.data +
							    (uint64_t)tokens[t] * m->tok_embd.row_bytes,
				  x, e);
		wk_cpu_add(x, b.a, (int)e);
		wk_dequantize_row(c->pos_embd.type, (const uint8_t *)c->pos_embd.data +
							    (uint64_t)t * c->pos_embd.row_bytes,
				  b.vec, e);
		wk_cpu_add(x, b.vec, (int)e);
		layer_norm(x, x, c->embd_norm.data, c->embd_norm_b.data, (uint32_t)e, hp->norm_eps);
	}
	for (uint32_t l = 0; l < hp->n_layer && st == CM_OK; l++)
		st = layer(mm, hp, &m->layers[l], &b, n);
	if (st == CM_OK)
		pool(hp, b.x, n, out);
out:
	enc_free(&b);
	return st;
}
