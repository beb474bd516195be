/*
 * backend.c - the CPU backend: the transformer forward pass of the
 * architectures in worker/model/model_config.h over a paged KV cache, behind
 * wk_cpu_backend_ops (a mixture of experts' FFN: worker/cpu/moe.h).
 *
 * Owns: the KV storage (per layer, K and V: [n_head_kv][n_blocks]
 * [block_tokens][head_dim] in F16 or F32, one huge-page region), activation
 * scratch sized for the largest batch seen, and a compute thread pool.
 * Weights are read in place from the model mapping.
 *
 * Per step, for the batch's T tokens (shapes in comments):
 *   x = embed(tokens) * embd_scale                     (T, embd)
 *   each layer: h = rmsnorm(x) * attn_norm
 *               q,k,v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
 *               qwen3: q, k = rmsnorm per head * q_norm, k_norm
 *               rope(q, k) at each token's position
 *               k, v -> KV blocks of the token's sequence
 *               a = causal attention of each token over its sequence
 *                   (q.k times attn_scale, 1/sqrt(head_dim) but for granite)
 *               x += (a Wo^T) * residual_scale
 *               h = rmsnorm(x) * ffn_norm
 *               x += (silu(h Wg^T) * (h Wu^T)) Wd^T * residual_scale
 *                    (MoE: the same per chosen expert, weighted, summed)
 *   logits of the requested rows = rmsnorm(x) * output_norm  Wout^T / logit_scale
 *   (granite's four scales; 1 for the other architectures)
 *
 * Batch invariance: every per-token operation (norms, rope, attention) is
 * computed for one token at a time in a fixed order, and the matmuls are
 * row-invariant (worker/cpu/matmul.h), so a token's logits never depend on
 * the rest of the batch or on the thread count.
 *
 * The elementwise work uses worker/cpu/ops.h (vectorised, ISA picked at
 * run time); rope's cos/sin are computed once per token per step, not per
 * layer and head.  Attention: one pool task per (token, KV head); each K/V
 * row is read once for the query heads of its GQA group.  The per-token
 * norms / adds / SwiGLU stay on the caller's thread: next to the matmuls
 * they are under 1% of a step (perf, 1b preset), less than a dispatch.
 *
 * Threading: forward() runs on the caller's thread and fans out to the pool.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "worker/engine/backend.h"
#include "worker/cpu/backend.h"
#include "worker/cpu/encoder.h"
#include "worker/cpu/expert_cache.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/moe.h"
#include "worker/cpu/ops.h"
#include "worker/cpu/pack.h"
#include "worker/cpu/pool.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"

struct cpu_backend {
	struct wk_backend base;
	const struct wk_model *m;
	struct wk_pool *pool;
	struct wk_cpu_mm *mm;
	int n_threads;
	uint32_t n_blocks;
	uint32_t block_tokens;
	uint32_t kv_type;        /* WK_Q_F16 or WK_Q_F32 */
	uint32_t kv_elem;        /* bytes per element */
	uint32_t kv_dim;         /* n_head_kv * head_dim */
	uint8_t *kv_mem;         /* per layer K then V, each [n_head_kv][n_blocks][block_tokens]
				  * [head_dim] (kv_block_head) */
	uint64_t kv_bytes;
	/* scratch for up to cap_tokens tokens */
	uint32_t cap_tokens;
	float *x, *h, *q, *kk, *vv, *att, *g, *u;
	float *att_scratch;      /* per thread: [group][max_ctx] scores */
	uint32_t att_scratch_ctx;
	float *rope_cs;          /* [cap_tokens][rope_dim]: cos/sin per token */
	float *rope_cs_swa;      /* the same for the windowed layers' rope (gemma3) */
	struct wk_cpu_rope rope, rope_swa;
	int two_ropes;           /* hp.rope_base_swa set: windowed layers use rope_swa */
	struct wk_cpu_moe *moe;  /* the experts' FFN (hp.n_expert > 0), else NULL */
	struct wk_cpu_xcache *xcache; /* the experts' rows16 copies, mapped, or NULL */
	struct wk_cpu_xcache_info xinfo;
	char xerr[512];          /* why the experts have no cache ("": none asked or fine) */
	uint32_t *routing;       /* MoE: [n_layer][cap_tokens][n_expert_used] of the last step */
	uint32_t routing_tokens; /* tokens of the last step */
};

/* ---- helpers ----------------------------------------------------------- */

static void embed_row(const struct wk_tensor *t, int32_t tok, float *out)
{
	const uint8_t *row = (const uint8_t *)t->data + (uint64_t)tok * t->row_bytes;

	wk_dequantize_row(t->type, row, out, t->cols);
}

/* x[0..n) *= s, skipped when s is 1 (every architecture but granite) */
static void scale_vec(float *x, uint64_t n, float s)
{
	if (s == 1.0f)
		return;
	for (uint64_t i = 0; i < n; i++)
		x[i] *= s;
}

static void vec_from_tensor(const struct wk_tensor *t, float *out)
{
	wk_dequantize_row(t->type, t->data, out, t->cols);
}

/* y[i] (n, rows_i) = x (n, cols) W_i^T (+ bias_i) for up to 4 weights of
 * the same input in one parallel run (x quantised once) */
static enum cm_status mm_same_x(struct cpu_backend *be, int k, const struct wk_tensor *const *w,
				const float *x, uint32_t n, float *const *y,
				const struct wk_tensor *const *bias)
{
	struct wk_cpu_mm_op ops[4];
	enum cm_status st;

	for (int i = 0; i < k; i++)
		ops[i] = (struct wk_cpu_mm_op){ w[i]->type, w[i]->data, (int)w[i]->rows,
						(int)w[i]->cols, x, (int)n, y[i] };
	st = wk_cpu_matmul_multi(be->mm, ops, k);
	for (int i = 0; st == CM_OK && i < k; i++)
		if (bias && bias[i] && bias[i]->data) {
			float b[bias[i]->cols];

			vec_from_tensor(bias[i], b);
			for (uint32_t t = 0; t < n; t++)
				wk_cpu_add(y[i] + (uint64_t)t * w[i]->rows, b, (int)w[i]->rows);
		}
	return st;
}

/* y (n, rows) = x (n, cols) W^T, plus bias when present */
static enum cm_status mm(struct cpu_backend *be, const struct wk_tensor *w, const float *x,
	       uint32_t n, float *y, const struct wk_tensor *bias)
{
	return mm_same_x(be, 1, &w, x, n, &y, &bias);
}

/* ---- attention ---------------------------------------------------------- */

struct att_ctx {
	struct cpu_backend *be;
	const struct wk_batch *b;
	uint32_t layer;
	uint32_t n_sub;             /* tasks per KV head: its query heads split in n_sub */
	uint32_t n_tasks_per_token; /* = n_head_kv x n_sub */
};

/*
 * Tasks per KV head of an attention run over T tokens: 1, unless the run
 * would leave threads idle (gemma3-1b decodes with one KV head: its whole
 * attention was one task on the caller while the other thread waited);
 * then the group's query heads are split into the fewest equal parts
 * that give every thread a task.  Each query head's scores and output
 * are computed alone whatever the split (wk_cpu_att_scores and
 * wk_cpu_att_values: per head, the same sequence), so the values do not
 * change; the split costs each part its own read of the head's K and V.
 */
static uint32_t att_sub_tasks(uint32_t T, uint32_t n_head_kv, uint32_t group, int threads)
{
	uint32_t d = 1;

	while (d < group && (uint64_t)T * n_head_kv * d < (uint64_t)threads)
		for (d++; group % d != 0; d++)
			;
	return d;
}

/*
 * KV head h's rows of block blk in a layer, K (v = 0) or V (v = 1):
 * block_tokens rows of head_dim elements, one after the other, and the
 * head's blocks one after the other (kv_mem: per layer K then V).  A head's
 * attention reads its positions as one stream (2 KiB a block at head_dim
 * 64 F16) instead of head_dim elements of every position's row of all the
 * heads, and its blocks do not fall on the same cache sets: with the
 * heads of a block together, phi3-1b's blocks (32 heads x 2 KiB) were 64
 * KiB apart and a 512-token prefill ran 15-40 % slower than with the rows
 * of all heads; this order made its decode at 1024 tokens of context 2x
 * faster than those rows, and 1.6x faster than blocks holding every
 * layer (a head's 2 KiB 3 MiB apart).  docs/engine-cpu.md, "The KV cache
 * by head".
 */
static uint8_t *kv_block_head(const struct cpu_backend *be, uint32_t layer, int v, uint32_t blk,
			      uint32_t h)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint64_t head_bytes = (uint64_t)be->block_tokens * hp->head_dim * be->kv_elem;
	uint64_t head = ((uint64_t)layer * 2 + (uint64_t)v) * hp->n_head_kv + h;

	return be->kv_mem + (head * be->n_blocks + blk) * head_bytes;
}

/* A KV block's rows of one head into the cache ahead of their use: the
 * blocks of a sequence lie anywhere in kv_mem, past what the hardware
 * prefetchers follow. */
static void att_prefetch(const uint8_t *p, uint64_t bytes)
{
	for (uint64_t o = 0; o < bytes; o += 64)
		__builtin_prefetch(p + o, 0, 3);
}

/*
 * One task = one token x one KV head (x one part of its query heads,
 * att_sub_tasks): the query heads sharing that KV head (GQA group) attend
 * over positions 0..pos of the token's sequence.  Each K and V row is read
 * once for the task's heads; every output element still accumulates over
 * j in increasing order, so the result depends only on the token's own
 * sequence.
 */
static void att_task(void *arg, int task_i, int thread)
{
	struct att_ctx *c = arg;
	struct cpu_backend *be = c->be;
	const struct wk_hparams *hp = &be->m->hp;
	uint32_t task = (uint32_t)task_i;
	uint32_t t = task / c->n_tasks_per_token;
	uint32_t g = task % c->n_tasks_per_token / c->n_sub;
	uint32_t hd = hp->head_dim, group = hp->n_head / hp->n_head_kv;
	uint32_t nh = group / c->n_sub;                 /* this task's query heads */
	uint32_t h0 = g * group + task % c->n_sub * nh; /* the first of them */
	uint32_t pos = c->b->pos[t];
	const struct wk_batch_seq *s = &c->b->seqs[c->b->seq[t]];
	float *scores = be->att_scratch + (uint64_t)thread * group * be->att_scratch_ctx;
	const float scale = hp->attn_scale;
	uint32_t q_dim = hp->n_head * hd;
	const float *q0 = be->q + (uint64_t)t * q_dim + (uint64_t)h0 * hd;
	float *out0 = be->att + (uint64_t)t * q_dim + (uint64_t)h0 * hd;
	const uint32_t bt = be->block_tokens;
	const uint64_t row_bytes = (uint64_t)hd * be->kv_elem; /* one head's row */
	/* a sliding window (this layer's, if any) sees positions lo..pos only */
	const uint32_t swa = wk_layer_swa(hp, c->layer);
	const uint32_t lo = swa && pos >= swa ? pos + 1 - swa : 0;
	const float cap = hp->attn_softcap;

	const int f16 = be->kv_type == WK_Q_F16;

	/* scores, one KV block at a time, every head of the task at once */
	for (uint32_t j0 = lo / bt * bt; j0 <= pos; j0 += bt) {
		uint32_t j1 = j0 + bt - 1 < pos ? j0 + bt - 1 : pos, js = j0 < lo ? lo : j0;
		const uint8_t *blk = kv_block_head(be, c->layer, 0, s->blocks[j0 / bt], g);

		/* the next block's K (or the first V) while this one is read */
		att_prefetch(j0 + bt <= pos ? kv_block_head(be, c->layer, 0, s->blocks[j0 / bt + 1], g)
					    : kv_block_head(be, c->layer, 1, s->blocks[lo / bt], g),
			     (uint64_t)bt * row_bytes);

		wk_cpu_att_scores(blk + (uint64_t)(js - j0) * row_bytes, row_bytes, f16,
				  (int)(j1 - js + 1), q0, (int)nh, (int)hd, scores + js,
				  be->att_scratch_ctx);
	}
	for (uint32_t hh = 0; hh < nh; hh++) {
		float *sc = scores + (uint64_t)hh * be->att_scratch_ctx;

		wk_cpu_scale(sc + lo, (int)(pos + 1 - lo), scale);
		if (cap > 0) /* gemma2: soft-capped scores */
			wk_cpu_softcap(sc + lo, (int)(pos + 1 - lo), cap);
		wk_cpu_softmax(sc + lo, (int)(pos + 1 - lo));
		memset(out0 + (uint64_t)hh * hd, 0, hd * sizeof(float));
	}
	for (uint32_t j0 = lo / bt * bt; j0 <= pos; j0 += bt) {
		uint32_t j1 = j0 + bt - 1 < pos ? j0 + bt - 1 : pos, js = j0 < lo ? lo : j0;
		const uint8_t *blk = kv_block_head(be, c->layer, 1, s->blocks[j0 / bt], g);

		if (j0 + bt <= pos)
			att_prefetch(kv_block_head(be, c->layer, 1, s->blocks[j0 / bt + 1], g),
				     (uint64_t)bt * row_bytes);
		wk_cpu_att_values(out0, (int)nh, (int)hd,
				  blk + (uint64_t)(js - j0) * row_bytes, row_bytes, f16,
				  (int)(j1 - js + 1), scores + js, be->att_scratch_ctx);
	}
}

/* ---- per-token elementwise work --------------------------------------------- */

struct tok_ctx {
	struct cpu_backend *be;
	const struct wk_batch *b;
	uint32_t layer;
};

/* rope q and k of token t and store k, v into the token's KV slot */
static void rope_store_task(void *arg, int t_i, int thread)
{
	struct tok_ctx *c = arg;
	struct cpu_backend *be = c->be;
	const struct wk_hparams *hp = &be->m->hp;
	uint32_t t = (uint32_t)t_i;
	uint32_t hd = hp->head_dim, q_dim = hp->n_head * hd;
	uint32_t pos = c->b->pos[t];
	const struct wk_batch_seq *s = &c->b->seqs[c->b->seq[t]];
	float *q = be->q + (uint64_t)t * q_dim;
	float *k = be->kk + (uint64_t)t * be->kv_dim;
	const float *v = be->vv + (uint64_t)t * be->kv_dim;
	const int local = be->two_ropes && wk_layer_swa(hp, c->layer) != 0;
	const float *cs = (local ? be->rope_cs_swa : be->rope_cs) + (uint64_t)t * hp->rope_dim;
	uint32_t blk = s->blocks[pos / be->block_tokens];
	uint64_t at = (uint64_t)(pos % be->block_tokens) * hd * be->kv_elem;

	(void)thread;
	wk_cpu_rope_apply(local ? &be->rope_swa : &be->rope, cs, q, (int)hp->n_head, (int)hd);
	wk_cpu_rope_apply(local ? &be->rope_swa : &be->rope, cs, k, (int)hp->n_head_kv, (int)hd);
	for (uint32_t h = 0; h < hp->n_head_kv; h++) {
		uint8_t *kd = kv_block_head(be, c->layer, 0, blk, h) + at;
		uint8_t *vd = kv_block_head(be, c->layer, 1, blk, h) + at;

		if (be->kv_type == WK_Q_F16) {
			wk_cpu_f32_to_f16((uint16_t *)kd, k + (uint64_t)h * hd, (int)hd);
			wk_cpu_f32_to_f16((uint16_t *)vd, v + (uint64_t)h * hd, (int)hd);
		} else {
			memcpy(kd, k + (uint64_t)h * hd, hd * sizeof(float));
			memcpy(vd, v + (uint64_t)h * hd, hd * sizeof(float));
		}
	}
}

/* ---- scratch -------------------------------------------------------------- */

static void free_scratch(struct cpu_backend *be)
{
	cm_free(be->x);
	cm_free(be->h);
	cm_free(be->q);
	cm_free(be->kk);
	cm_free(be->vv);
	cm_free(be->att);
	cm_free(be->g);
	cm_free(be->u);
	cm_free(be->rope_cs);
	cm_free(be->rope_cs_swa);
	cm_free(be->routing);
	be->routing = NULL;
	be->routing_tokens = 0;
	be->x = be->h = be->q = be->kk = be->vv = be->att = be->g = be->u = NULL;
	be->rope_cs = be->rope_cs_swa = NULL;
	be->cap_tokens = 0;
}

static enum cm_status ensure_scratch(struct cpu_backend *be, uint32_t n_tokens,
				     uint32_t max_ctx)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint64_t e = hp->n_embd, qd = (uint64_t)hp->n_head * hp->head_dim;
	uint32_t group = hp->n_head / hp->n_head_kv;

	if (n_tokens > be->cap_tokens) {
		uint32_t cap = n_tokens < 16 ? 16 : n_tokens;

		free_scratch(be);
		be->x = cm_calloc_aligned((uint64_t)cap * e, sizeof(float));
		be->h = cm_calloc_aligned((uint64_t)cap * (e > qd ? e : qd), sizeof(float));
		be->q = cm_calloc_aligned((uint64_t)cap * qd, sizeof(float));
		be->kk = cm_calloc_aligned((uint64_t)cap * be->kv_dim, sizeof(float));
		be->vv = cm_calloc_aligned((uint64_t)cap * be->kv_dim, sizeof(float));
		be->att = cm_calloc_aligned((uint64_t)cap * qd, sizeof(float));
		/* g: the dense FFN's gate, or a mixture of experts' output */
		be->g = cm_calloc_aligned((uint64_t)cap * (hp->n_ff > e ? hp->n_ff : e), sizeof(float));
		be->u = cm_calloc_aligned((uint64_t)cap * hp->n_ff, sizeof(float));
		be->rope_cs = cm_calloc_aligned((uint64_t)cap * (hp->rope_dim ? hp->rope_dim : 2),
					sizeof(float));
		if (be->two_ropes)
			be->rope_cs_swa = cm_calloc_aligned((uint64_t)cap *
							    (hp->rope_dim ? hp->rope_dim : 2),
						    sizeof(float));
		if (be->moe)
			be->routing = cm_calloc((uint64_t)hp->n_layer * cap * hp->n_expert_used,
						sizeof(uint32_t));
		if (!be->x || !be->h || !be->q || !be->kk || !be->vv || !be->att ||
		    !be->g || !be->u || !be->rope_cs || (be->two_ropes && !be->rope_cs_swa) ||
		    (be->moe && !be->routing)) {
			free_scratch(be);
			return CM_ENOMEM;
		}
		be->cap_tokens = cap;
	}
	if (max_ctx > be->att_scratch_ctx) {
		uint32_t ctx = max_ctx < 256 ? 256 : max_ctx;
		float *p = cm_calloc((uint64_t)be->n_threads * group * ctx,
				     sizeof(float));

		if (!p)
			return CM_ENOMEM;
		cm_free(be->att_scratch);
		be->att_scratch = p;
		be->att_scratch_ctx = ctx;
	}
	return CM_OK;
}

/* ---- the step ----------------------------------------------------------------- */

/* token t's gate row times the activation of its up row (GeGLU or SwiGLU) */
static void ffn_act_task(void *arg, int t_i, int thread)
{
	struct cpu_backend *be = arg;
	const struct wk_hparams *hp = &be->m->hp;
	float *g = be->g + (uint64_t)t_i * hp->n_ff;
	const float *u = be->u + (uint64_t)t_i * hp->n_ff;

	(void)thread;
	if (hp->ffn_act == WK_FFN_GELU_TANH)
		wk_cpu_gelu_mul(g, g, u, (int)hp->n_ff);
	else
		wk_cpu_silu_mul(g, g, u, (int)hp->n_ff);
}

/* h (T, embd) <- the dense FFN of h: act(h Wg^T) * (h Wu^T), then Wd^T */
static enum cm_status ffn_dense(struct cpu_backend *be, const struct wk_layer *L, uint32_t T)
{
	enum cm_status st;

	const struct wk_tensor *w[2] = { &L->w_gate, &L->w_up };
	float *const y[2] = { be->g, be->u };

	if ((st = mm_same_x(be, 2, w, be->h, T, y, NULL)) != CM_OK)
		return st;
	/* a token a task: one thread did all of a prompt's (gemma3-1b, 128
	 * tokens: GeGLU 3 % of the prefill) while the others waited */
	if (T == 1)
		ffn_act_task(be, 0, 0);
	else
		wk_pool_run(be->pool, ffn_act_task, be, (int)T);
	return mm(be, &L->w_down, be->g, T, be->h, NULL);
}

/* The layers over the batch (its K and V into the blocks): the final
 * hidden states in be->x, one row per token.  Checks as forward(). */
static enum cm_status forward_layers(struct cpu_backend *be, const struct wk_batch *b)
{
	const struct wk_model *m = be->m;
	const struct wk_hparams *hp = &m->hp;
	uint32_t T = b->n_tokens, e = hp->n_embd;
	uint32_t max_pos = 0;
	enum cm_status st;
	float *fo;

	st = wk_batch_check(b, hp->n_vocab, be->block_tokens, be->n_blocks, &max_pos);
	if (st != CM_OK)
		return st;
	st = ensure_scratch(be, T, max_pos + 1);
	if (st != CM_OK)
		return st;
	be->routing_tokens = T;

	for (uint32_t t = 0; t < T; t++) {
		embed_row(&m->tok_embd, b->tokens[t], be->x + (uint64_t)t * e);
		scale_vec(be->x + (uint64_t)t * e, e, hp->embd_scale);
		/* the rotation angles depend only on the position: once per step */
		wk_cpu_rope_sincos(&be->rope, (int)b->pos[t],
				   be->rope_cs + (uint64_t)t * hp->rope_dim);
		if (be->two_ropes)
			wk_cpu_rope_sincos(&be->rope_swa, (int)b->pos[t],
					   be->rope_cs_swa + (uint64_t)t * hp->rope_dim);
	}

	const uint32_t n_sub = att_sub_tasks(T, hp->n_head_kv, hp->n_head / hp->n_head_kv,
					     be->n_threads);

	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];
		struct tok_ctx tc = { be, b, l };
		struct att_ctx ac = { be, b, l, n_sub, hp->n_head_kv * n_sub };

		for (uint32_t t = 0; t < T; t++)
			wk_cpu_rmsnorm(be->h + (uint64_t)t * e, be->x + (uint64_t)t * e,
				       L->attn_norm.data, (int)e, hp->rms_eps);
		const struct wk_tensor *qkv[3] = { &L->wq, &L->wk, &L->wv };
		const struct wk_tensor *bqkv[3] = { &L->bq, &L->bk, &L->bv };
		float *const yqkv[3] = { be->q, be->kk, be->vv };

		if ((st = mm_same_x(be, 3, qkv, be->h, T, yqkv, bqkv)) != CM_OK)
			return st;
		if (L->q_norm.data) /* qwen3: each head's q and k normalised before RoPE */
			for (uint32_t t = 0; t < T * hp->n_head; t++)
				wk_cpu_rmsnorm(be->q + (uint64_t)t * hp->head_dim,
					       be->q + (uint64_t)t * hp->head_dim, L->q_norm.data,
					       (int)hp->head_dim, hp->rms_eps);
		if (L->k_norm.data)
			for (uint32_t t = 0; t < T * hp->n_head_kv; t++)
				wk_cpu_rmsnorm(be->kk + (uint64_t)t * hp->head_dim,
					       be->kk + (uint64_t)t * hp->head_dim, L->k_norm.data,
					       (int)hp->head_dim, hp->rms_eps);
		if (T == 1) /* decode of one sequence: not worth a dispatch */
			rope_store_task(&tc, 0, 0);
		else
			wk_pool_run(be->pool, rope_store_task, &tc, (int)T);
		wk_pool_run(be->pool, att_task, &ac, (int)(T * ac.n_tasks_per_token));
		if ((st = mm(be, &L->wo, be->att, T, be->h, NULL)) != CM_OK)
			return st;
		if (L->attn_post_norm.data) /* gemma2: the output normalised before the add */
			for (uint32_t t = 0; t < T; t++)
				wk_cpu_rmsnorm(be->h + (uint64_t)t * e, be->h + (uint64_t)t * e,
					       L->attn_post_norm.data, (int)e, hp->rms_eps);
		scale_vec(be->h, (uint64_t)T * e, hp->residual_scale);
		for (uint32_t t = 0; t < T; t++)
			wk_cpu_add(be->x + (uint64_t)t * e, be->h + (uint64_t)t * e, (int)e);

		for (uint32_t t = 0; t < T; t++)
			wk_cpu_rmsnorm(be->h + (uint64_t)t * e, be->x + (uint64_t)t * e,
				       L->ffn_norm.data, (int)e, hp->rms_eps);
		/* the FFN's output: in h (dense), in g (a mixture of experts) */
		fo = L->ffn_gate_inp.data ? be->g : be->h;
		st = L->ffn_gate_inp.data
			     ? wk_cpu_moe_ffn(be->moe, be->mm, L, be->h, T, fo,
					      be->routing + (uint64_t)l * be->cap_tokens *
								    hp->n_expert_used)
			     : ffn_dense(be, L, T);
		if (st != CM_OK)
			return st;
		if (L->ffn_post_norm.data)
			for (uint32_t t = 0; t < T; t++)
				wk_cpu_rmsnorm(fo + (uint64_t)t * e, fo + (uint64_t)t * e,
					       L->ffn_post_norm.data, (int)e, hp->rms_eps);
		scale_vec(fo, (uint64_t)T * e, hp->residual_scale);
		for (uint32_t t = 0; t < T; t++)
			wk_cpu_add(be->x + (uint64_t)t * e, fo + (uint64_t)t * e, (int)e);
	}
	return CM_OK;
}

static enum cm_status cpu_forward(struct wk_backend *base, const struct wk_batch *b,
				  float *logits)
{
	struct cpu_backend *be = (struct cpu_backend *)base;
	const struct wk_model *m = be->m;
	const struct wk_hparams *hp = &m->hp;
	uint32_t e = hp->n_embd;
	enum cm_status st;

	if (!hp->causal || !m->output.data)
		return CM_EUNSUPPORTED; /* an encoder embeds (cpu_embed), never generates */
	if (b->n_tokens == 0)
		return CM_OK;
	if ((st = forward_layers(be, b)) != CM_OK)
		return st;

	/* final norm of the requested rows only, then the vocabulary projection */
	for (uint32_t o = 0; o < b->n_out; o++)
		wk_cpu_rmsnorm(be->h + (uint64_t)o * e, be->x + (uint64_t)b->out[o] * e,
			       m->output_norm.data, (int)e, hp->rms_eps);
	if (b->n_out) {
		st = mm(be, &m->output, be->h, b->n_out, logits, NULL);
		if (st == CM_OK && hp->logit_scale != 1.0f)
			scale_vec(logits, (uint64_t)b->n_out * hp->n_vocab, 1.0f / hp->logit_scale);
		for (uint32_t o = 0; st == CM_OK && hp->final_softcap > 0 && o < b->n_out; o++)
			wk_cpu_softcap(logits + (uint64_t)o * hp->n_vocab, (int)hp->n_vocab,
				       hp->final_softcap);
		return st;
	}
	return CM_OK;
}

/* ---- lifecycle -------------------------------------------------------------------- */

static void cpu_destroy(struct wk_backend *base)
{
	struct cpu_backend *be = (struct cpu_backend *)base;

	if (!be)
		return;
	cm_huge_free(be->kv_mem, be->kv_bytes);
	free_scratch(be);
	cm_free(be->att_scratch);
	wk_cpu_moe_free(be->moe);
	wk_cpu_mm_free(be->mm);
	wk_cpu_xcache_close(be->xcache); /* after the mm that reads it */
	wk_pool_free(be->pool);
	cm_free(be);
}

/*
 * The dense matrices (not the experts, which stay mapped), copied into
 * huge pages (wk_cpu_mm_pack): in the strip kernels' layout where the ISA
 * has them for the type (the same values bit for bit, read as one stream
 * per 16 rows), else as they are.
 */
static enum cm_status pack_weights(struct cpu_backend *be)
{
	const struct wk_model *m = be->m;
	enum cm_status st = CM_OK;

	for (size_t i = 0; st == CM_OK && i < wk_cpu_pack_candidates(&m->hp); i++) {
		const struct wk_tensor *t = wk_cpu_pack_candidate(&m->hp, m->layers, &m->output, i);

		if (wk_cpu_pack_eligible(t) && wk_cpu_mm_can_pack(be->mm, t->type))
			st = wk_cpu_mm_pack(be->mm, t->type, t->data, (int)t->rows, (int)t->cols);
	}
	return st;
}

static enum cm_status cpu_backend_new(const struct wk_model *m, uint32_t n_blocks,
				      uint32_t block_tokens, int n_threads, uint32_t kv_type,
				      int repack, const char *xdir, struct wk_backend **out,
				      char *err, size_t err_len);

/* The KV cache is written in chunks of this many bytes at creation. */
#define KV_FAULT_CHUNK ((uint64_t)32 << 20)

static void kv_fault_task(void *arg, int task, int thread)
{
	struct cpu_backend *be = arg;
	uint64_t lo = (uint64_t)task * KV_FAULT_CHUNK,
		 hi = lo + KV_FAULT_CHUNK < be->kv_bytes ? lo + KV_FAULT_CHUNK : be->kv_bytes;
	volatile uint8_t *p = be->kv_mem;

	(void)thread;
	for (uint64_t i = lo; i < hi; i += 4096)
		p[i] = 0;
}

/*
 * Every page of the KV cache faulted in now, by the pool, rather than by
 * the requests that first reach it: a fault on fresh memory costs ~12-25
 * us a 4 KiB page on this project's KVM hosts (2 MiB pages: ~1 ms), and a
 * head's blocks are kept together (kv_block_head), so a fresh worker's
 * first request touched a huge page per layer, head and K or V (qwen3moe-
 * 1b: time to first token 82-100 ms -> 274-312 ms before this).  The
 * worker's KV memory is thereby committed when it starts, as llama.cpp
 * clears its cache buffer at creation.
 */
static void kv_fault_in(struct cpu_backend *be)
{
	wk_pool_run(be->pool, kv_fault_task, be,
		    (int)((be->kv_bytes + KV_FAULT_CHUNK - 1) / KV_FAULT_CHUNK));
}

uint64_t wk_cpu_backend_repack_bytes(const struct wk_model *m)
{
	struct wk_cpu_mm *mm = NULL;
	uint64_t bytes = 0;

	if (wk_cpu_mm_new(NULL, &mm) != CM_OK)
		return 0;
	for (size_t i = 0; i < wk_cpu_pack_candidates(&m->hp); i++) {
		const struct wk_tensor *t = wk_cpu_pack_candidate(&m->hp, m->layers, &m->output, i);

		if (wk_cpu_pack_eligible(t))
			bytes += wk_cpu_mm_pack_bytes(mm, t->type, (int)t->rows, (int)t->cols);
	}
	wk_cpu_mm_free(mm);
	return bytes;
}

enum cm_status wk_cpu_backend_create(const struct wk_model *m, uint32_t n_blocks,
				     uint32_t block_tokens, int n_threads,
				     uint32_t kv_type, struct wk_backend **out,
				     char *err, size_t err_len)
{
	return cpu_backend_new(m, n_blocks, block_tokens, n_threads, kv_type, 1, NULL, out, err,
			       err_len);
}

static enum cm_status cpu_backend_new(const struct wk_model *m, uint32_t n_blocks,
				      uint32_t block_tokens, int n_threads, uint32_t kv_type,
				      int repack, const char *xdir, struct wk_backend **out,
				      char *err, size_t err_len)
{
	struct cpu_backend *be = NULL;
	const struct wk_hparams *hp = &m->hp;
	uint64_t per_layer;
	enum cm_status st = CM_OK;

	err[0] = '\0';
	if (kv_type != WK_Q_F16 && kv_type != WK_Q_F32) {
		snprintf(err, err_len, "kv cache type: expected F16 or F32, found %s",
			 wk_qtype_name(kv_type));
		return CM_EINVAL;
	}
	be = cm_calloc(1, sizeof(*be));
	if (!be) {
		st = CM_ENOMEM;
		goto out;
	}
	be->base.ops = &wk_cpu_backend_ops;
	be->m = m;
	be->n_blocks = n_blocks;
	be->block_tokens = block_tokens;
	be->kv_type = kv_type;
	be->kv_elem = kv_type == WK_Q_F16 ? 2 : 4;
	be->kv_dim = hp->n_head_kv * hp->head_dim;
	be->n_threads = n_threads < 1 ? 1 : n_threads;
	if (be->n_threads > WK_POOL_MAX_THREADS)
		be->n_threads = WK_POOL_MAX_THREADS;
	be->rope.n_rot = (int)hp->rope_dim;
	be->rope.neox = hp->rope_style == WK_ROPE_NEOX;
	be->rope.base = hp->rope_base;
	be->rope.freq_scale = hp->rope_pos_scale;
	be->rope.freq_factors = hp->rope_freqs;
	be->rope.mscale = hp->rope_attn_factor;
	/* gemma3's local layers: their own base, no scaling, no factors */
	be->two_ropes = hp->rope_base_swa > 0;
	be->rope_swa = be->rope;
	be->rope_swa.base = hp->rope_base_swa;
	be->rope_swa.freq_scale = 1.0f;
	be->rope_swa.freq_factors = NULL;
	be->rope_swa.mscale = 1.0f;
	st = wk_pool_new(be->n_threads, &be->pool);
	if (st != CM_OK)
		goto out;
	st = wk_cpu_mm_new(be->pool, &be->mm);
	if (st == CM_OK && repack && (st = pack_weights(be)) != CM_OK) {
		if (st == CM_ENOMEM)
			snprintf(err, err_len,
				 "cpu backend: no memory for the repacked weights (%llu bytes so far; worker.cpu_repack false reads the mapped file only)",
				 (unsigned long long)wk_cpu_mm_packed_bytes(be->mm));
		else
			snprintf(err, err_len, "cpu backend: repacking the weights failed (%s)",
				 cm_status_str(st));
	}
	if (st == CM_OK && repack && xdir && hp->n_expert &&
	    wk_cpu_xcache_open(m, be->mm, xdir, &be->xcache, &be->xinfo, be->xerr,
			       sizeof(be->xerr)) != CM_OK) {
		/* not fatal: the experts are read from the model's mapping,
		 * and info() reports xerr, which says why */
	}
	if (st == CM_OK && hp->n_expert)
		st = wk_cpu_moe_new(hp, &be->moe);
	if (st != CM_OK)
		goto out;
	per_layer = (uint64_t)n_blocks * block_tokens * be->kv_dim * be->kv_elem;
	/* one region in huge pages (then faulted in: kv_fault_in): in 4 KiB
	 * pages, faulted as positions were written, phi3-1b's new rows cost
	 * two faults a layer and token, 5 % of a decode step */
	if (per_layer > UINT64_MAX / 2 / hp->n_layer || 2 * per_layer * hp->n_layer > SIZE_MAX ||
	    (be->kv_mem = cm_huge_alloc(2 * per_layer * hp->n_layer)) == NULL) {
		snprintf(err, err_len, "kv cache: cannot allocate %llu bytes a layer for %u layers",
			 (unsigned long long)(2 * per_layer), hp->n_layer);
		st = CM_ENOMEM;
		goto out;
	}
	be->kv_bytes = 2 * per_layer * hp->n_layer;
	kv_fault_in(be);
	*out = &be->base;
	be = NULL;
out:
	if (st == CM_ENOMEM && err[0] == '\0')
		snprintf(err, err_len, "cpu backend: out of memory");
	cpu_destroy(be ? &be->base : NULL);
	return st;
}

static enum cm_status cpu_create(const struct wk_model *m, const struct wk_backend_params *p,
				 struct wk_backend **out, char *err, size_t err_len)
{
	return cpu_backend_new(m, p->n_blocks, p->block_tokens, p->n_threads, p->kv_type,
			       !p->cpu_plain_weights, p->cpu_expert_cache, out, err, err_len);
}

static enum cm_status cpu_copy_block(struct wk_backend *base, uint32_t dst, uint32_t src)
{
	struct cpu_backend *be = (struct cpu_backend *)base;
	uint64_t bb = (uint64_t)be->block_tokens * be->m->hp.head_dim * be->kv_elem;

	if (dst >= be->n_blocks || src >= be->n_blocks)
		return CM_EINVAL;
	for (uint32_t l = 0; l < be->m->hp.n_layer; l++)
		for (uint32_t h = 0; h < be->m->hp.n_head_kv; h++) {
			memcpy(kv_block_head(be, l, 0, dst, h), kv_block_head(be, l, 0, src, h), bb);
			memcpy(kv_block_head(be, l, 1, dst, h), kv_block_head(be, l, 1, src, h), bb);
		}
	return CM_OK;
}

static void cpu_info(const struct wk_backend *base, struct wk_backend_info *out)
{
	const struct cpu_backend *be = (const struct cpu_backend *)base;

	memset(out, 0, sizeof(*out));
	out->name = "cpu";
	const int pf = wk_cpu_mm_strip_prefetch(be->mm) & WK_CPU_PF_ALL;
	const enum wk_cpu_isa isa = wk_cpu_mm_isa(be->mm);
	/* the CPU has vdpbf16ps and the default left it (matmul.h) */
	const int bf16fma = isa == WK_CPU_ISA_AVX512 && wk_cpu_isa_available(WK_CPU_ISA_AVX512BF16);

	snprintf(out->device, sizeof(out->device), "cpu x%u threads (%s%s%s)",
		 be->n_threads, wk_cpu_isa_name(isa), bf16fma ? ", BF16 by FMA" : "",
		 pf == WK_CPU_PF_ALL ? ""
		 : pf == WK_CPU_PF_K ? ", strip prefetch 256-value only"
		 : pf == WK_CPU_PF_32 ? ", strip prefetch 32-value only"
				      : ", strip prefetch off");
	out->weight_bytes = be->m->weight_bytes;
	out->repacked_bytes = wk_cpu_mm_packed_bytes(be->mm);
	out->kv_bytes = be->kv_bytes;
	out->expert_cache_bytes = be->xinfo.bytes;
	out->expert_cache_built = be->xinfo.built;
	out->expert_cache_build_ns = be->xinfo.build_ns;
	snprintf(out->expert_cache_path, sizeof(out->expert_cache_path), "%s", be->xinfo.path);
	snprintf(out->expert_cache_error, sizeof(out->expert_cache_error), "%s", be->xerr);
}

/* out = the pooled final-norm states of rows x[0..n): the rows the
 * pooling reads get the output norm in place, then the encoder's pooling
 * and L2 normalisation (wk_cpu_pool) */
static void pool_states(struct cpu_backend *be, float *x, uint32_t n, float *out)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint32_t e = hp->n_embd, first = hp->pooling == WK_POOL_LAST ? n - 1 : 0;
	uint32_t last = hp->pooling == WK_POOL_MEAN ? n : first + 1;

	for (uint32_t t = first; t < last; t++)
		wk_cpu_rmsnorm(x + (uint64_t)t * e, x + (uint64_t)t * e, be->m->output_norm.data,
			       (int)e, hp->rms_eps);
	wk_cpu_pool(hp, x, n, out);
}

/* A decoder with a pooling type: every input its own causal sequence in one
 * batch (their K and V in the caller's blocks), no logits. */
static enum cm_status decoder_embed(struct cpu_backend *be, uint32_t n_in, const int32_t *tokens,
				    const uint32_t *lens, const uint32_t *blocks, float *out)
{
	const struct wk_hparams *hp = &be->m->hp;
	uint64_t n = 0, nb = 0;
	uint32_t *pos = NULL, *seq = NULL, bt = be->block_tokens;
	struct wk_batch_seq *seqs = NULL;
	enum cm_status st = CM_ENOMEM;

	if (hp->pooling == WK_POOL_NONE || !blocks)
		return hp->pooling == WK_POOL_NONE ? CM_EUNSUPPORTED : CM_EINVAL;
	for (uint32_t i = 0; i < n_in; i++) {
		if (lens[i] == 0)
			return CM_EINVAL;
		n += lens[i];
	}
	if (n > UINT32_MAX / 2)
		return CM_EINVAL;
	pos = cm_malloc(n * sizeof(uint32_t));
	seq = cm_malloc(n * sizeof(uint32_t));
	seqs = cm_calloc(n_in, sizeof(*seqs));
	if (!pos || !seq || !seqs)
		goto out;
	n = 0;
	for (uint32_t i = 0; i < n_in; i++) {
		seqs[i].blocks = blocks + nb;
		seqs[i].n_blocks = (lens[i] + bt - 1) / bt;
		nb += seqs[i].n_blocks;
		for (uint32_t t = 0; t < lens[i]; t++, n++) {
			pos[n] = t;
			seq[n] = i;
		}
	}
	{
		struct wk_batch b = { (uint32_t)n, tokens, pos, seq, n_in, seqs, 0, NULL };

		st = forward_layers(be, &b);
	}
	n = 0;
	for (uint32_t i = 0; st == CM_OK && i < n_in; i++) {
		pool_states(be, be->x + n * hp->n_embd, lens[i], out + (uint64_t)i * hp->n_embd);
		n += lens[i];
	}
out:
	cm_free(pos);
	cm_free(seq);
	cm_free(seqs);
	return st;
}

static enum cm_status cpu_embed(struct wk_backend *base, uint32_t n_in, const int32_t *tokens,
				const uint32_t *lens, const uint32_t *blocks, float *out)
{
	struct cpu_backend *be = (struct cpu_backend *)base;

	if (n_in == 0)
		return CM_EINVAL;
	if (be->m->hp.causal)
		return decoder_embed(be, n_in, tokens, lens, blocks, out);
	return wk_cpu_encode_batch(be->mm, be->m, n_in, tokens, lens, out);
}

const struct wk_backend_ops wk_cpu_backend_ops = {
	.name = "cpu",
	.create = cpu_create,
	.destroy = cpu_destroy,
	.forward = cpu_forward,
	.copy_block = cpu_copy_block,
	.info = cpu_info,
	.device_count = NULL,
	.kv_blocks_for = NULL,
	.embed = cpu_embed,
};

struct wk_pool *wk_cpu_backend_pool(const struct wk_backend *base)
{
	return ((const struct cpu_backend *)base)->pool;
}

enum cm_status wk_cpu_backend_routing(const struct wk_backend *base, uint32_t layer,
				      uint32_t token, uint32_t *ids)
{
	const struct cpu_backend *be = (const struct cpu_backend *)base;
	uint32_t k = be->m->hp.n_expert_used;

	if (!be->routing || layer >= be->m->hp.n_layer || token >= be->routing_tokens)
		return CM_ENOTFOUND;
	memcpy(ids, be->routing + ((uint64_t)layer * be->cap_tokens + token) * k,
	       k * sizeof(uint32_t));
	return CM_OK;
}
