/*
 * moe.c - the CPU mixture-of-experts FFN (see moe.h).
 *
 * Owns: struct wk_cpu_moe and its scratch (router logits, the routing, the
 * token rows grouped by expert, their gate / up / down outputs, the
 * product list).  A step: the router matmul over all T tokens; each token's
 * routing; the tokens' rows copied into one group per expert (in token
 * order); per expert with tokens, gate and up over its group, SwiGLU, down;
 * then each token's output summed over its experts in increasing id.  The
 * copies, SwiGLU and sums run on the pool a row or token a task (moe_rows).
 */
#include "worker/cpu/moe.h"

#include <string.h>

#include "common/alloc.h"
#include "worker/cpu/ops.h"

struct wk_cpu_moe {
	struct wk_hparams hp;
	uint32_t cap;        /* tokens the scratch holds */
	float *logits;       /* [cap][n_expert] */
	uint32_t *ids;       /* [cap][k] chosen experts, increasing */
	float *w;            /* [cap][k] their weights */
	uint32_t *slot;      /* [cap][k] grouped row of (token, choice) */
	uint32_t *count;     /* [n_expert] tokens routed to each expert this step */
	uint32_t *start;     /* [n_expert + 1] first grouped row of each expert */
	float *x, *g, *u, *y; /* grouped rows: [cap * k][embd], [.][ff] x2, [.][embd] */
	float *sg, *sgu, *suu, *sy; /* the shared expert: gate [cap], [cap][ff_sh] x2,
				     * [cap][embd] (NULL without one) */
	struct wk_cpu_mm_op *ops; /* [2 * n_expert]: one parallel run per phase */
};

static void moe_scratch_free(struct wk_cpu_moe *s)
{
	cm_free(s->logits);
	cm_free(s->ids);
	cm_free(s->w);
	cm_free(s->slot);
	cm_free(s->x);
	cm_free(s->g);
	cm_free(s->u);
	cm_free(s->y);
	cm_free(s->sg);
	cm_free(s->sgu);
	cm_free(s->suu);
	cm_free(s->sy);
	s->logits = s->w = s->x = s->g = s->u = s->y = NULL;
	s->sg = s->sgu = s->suu = s->sy = NULL;
	s->ids = s->slot = NULL;
	s->cap = 0;
}

static enum cm_status moe_ensure(struct wk_cpu_moe *s, uint32_t T)
{
	uint64_t k = s->hp.n_expert_used, e = s->hp.n_embd, f = s->hp.n_ff_exp, cap;

	if (T <= s->cap)
		return CM_OK;
	cap = T < 16 ? 16 : T;
	moe_scratch_free(s);
	s->logits = cm_calloc(cap * s->hp.n_expert, sizeof(float));
	s->ids = cm_calloc(cap * k, sizeof(uint32_t));
	s->w = cm_calloc(cap * k, sizeof(float));
	s->slot = cm_calloc(cap * k, sizeof(uint32_t));
	s->x = cm_calloc_aligned(cap * k * e, sizeof(float));
	s->g = cm_calloc_aligned(cap * k * f, sizeof(float));
	s->u = cm_calloc_aligned(cap * k * f, sizeof(float));
	s->y = cm_calloc_aligned(cap * k * e, sizeof(float));
	if (s->hp.n_ff_shexp) {
		s->sg = cm_calloc(cap, sizeof(float));
		s->sgu = cm_calloc_aligned(cap * s->hp.n_ff_shexp, sizeof(float));
		s->suu = cm_calloc_aligned(cap * s->hp.n_ff_shexp, sizeof(float));
		s->sy = cm_calloc_aligned(cap * e, sizeof(float));
	}
	if (!s->logits || !s->ids || !s->w || !s->slot || !s->x || !s->g || !s->u || !s->y ||
	    (s->hp.n_ff_shexp && (!s->sg || !s->sgu || !s->suu || !s->sy))) {
		moe_scratch_free(s);
		return CM_ENOMEM;
	}
	s->cap = (uint32_t)cap;
	return CM_OK;
}

enum cm_status wk_cpu_moe_new(const struct wk_hparams *hp, struct wk_cpu_moe **out)
{
	struct wk_cpu_moe *s;

	*out = NULL;
	if (hp->n_expert == 0 || hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
		return CM_EINVAL;
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		return CM_ENOMEM;
	s->hp = *hp;
	s->count = cm_calloc(hp->n_expert, sizeof(uint32_t));
	s->start = cm_calloc(hp->n_expert + 1, sizeof(uint32_t));
	s->ops = cm_calloc(2ull * hp->n_expert, sizeof(*s->ops));
	if (!s->count || !s->start || !s->ops) {
		wk_cpu_moe_free(s);
		return CM_ENOMEM;
	}
	*out = s;
	return CM_OK;
}

void wk_cpu_moe_free(struct wk_cpu_moe *s)
{
	if (!s)
		return;
	moe_scratch_free(s);
	cm_free(s->count);
	cm_free(s->start);
	cm_free(s->ops);
	cm_free(s);
}

void wk_cpu_moe_route(const struct wk_hparams *hp, const float *logits, uint32_t *ids,
		      float *w)
{
	uint32_t n = hp->n_expert, k = hp->n_expert_used;
	float mx = logits[0], sum = 0, chosen = 0;

	for (uint32_t e = 1; e < n; e++)
		mx = logits[e] > mx ? logits[e] : mx;
	for (uint32_t e = 0; e < n; e++)
		sum += wk_cpu_expf(logits[e] - mx);
	/* the top k by selection: each pass takes the largest logit not yet
	 * taken, the lower id on a tie (k is small) */
	for (uint32_t j = 0; j < k; j++) {
		uint32_t best = n;

		for (uint32_t e = 0; e < n; e++) {
			int taken = 0;

			for (uint32_t i = 0; i < j && !taken; i++)
				taken = ids[i] == e;
			if (!taken && (best == n || logits[e] > logits[best]))
				best = e;
		}
		ids[j] = best;
	}
	/* increasing id: the order the outputs are summed in */
	for (uint32_t j = 1; j < k; j++)
		for (uint32_t i = j; i > 0 && ids[i - 1] > ids[i]; i--) {
			uint32_t t = ids[i];

			ids[i] = ids[i - 1];
			ids[i - 1] = t;
		}
	for (uint32_t j = 0; j < k; j++) {
		w[j] = wk_cpu_expf(logits[ids[j]] - mx) / sum;
		chosen += w[j];
	}
	for (uint32_t j = 0; j < k; j++) {
		if (hp->expert_norm)
			w[j] /= chosen;
		w[j] *= hp->expert_scale;
	}
}

/* the product y (n, rows) = x (n, cols) W^T for expert e's matrix of t */
static struct wk_cpu_mm_op expert_op(const struct wk_tensor *t, uint32_t e, const float *x,
				     uint32_t n, float *y)
{
	struct wk_tensor w = wk_tensor_expert(t, e);
	struct wk_cpu_mm_op op = { w.type, w.data, (int)w.rows, (int)w.cols, x, (int)n, y };

	return op;
}

/* Routes the T tokens and gives each (token, choice) its row in its
 * expert's group (slot); MOE_COPY fills the rows. */
static void moe_group(struct wk_cpu_moe *s, uint32_t T)
{
	uint32_t k = s->hp.n_expert_used, n = s->hp.n_expert;

	memset(s->count, 0, n * sizeof(uint32_t));
	for (uint32_t t = 0; t < T; t++) {
		wk_cpu_moe_route(&s->hp, s->logits + (uint64_t)t * n, s->ids + (uint64_t)t * k,
				 s->w + (uint64_t)t * k);
		for (uint32_t j = 0; j < k; j++)
			s->count[s->ids[(uint64_t)t * k + j]]++;
	}
	s->start[0] = 0;
	for (uint32_t x = 0; x < n; x++)
		s->start[x + 1] = s->start[x] + s->count[x];
	memset(s->count, 0, n * sizeof(uint32_t)); /* now: rows filled per expert */
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t j = 0; j < k; j++) {
			uint32_t x = s->ids[(uint64_t)t * k + j];

			s->slot[(uint64_t)t * k + j] = s->start[x] + s->count[x]++;
		}
}

/*
 * The step's row-wise work outside the products, on the pool: the tokens'
 * rows into their groups (MOE_COPY), SwiGLU of the grouped rows
 * (MOE_SILU), each token's weighted sum of its experts (MOE_SUM).  Each
 * row or token is computed by one task alone, in the order it was on one
 * thread, so the values are the same; at 16 streams of moe-1b the three
 * took 5 % of a step on one thread while the others waited.
 */
enum moe_phase { MOE_COPY, MOE_SILU, MOE_SUM };

struct moe_rows {
	struct wk_cpu_moe *s;
	enum moe_phase phase;
	const float *h; /* MOE_COPY: the tokens' rows */
	float *out;     /* MOE_SUM */
	uint32_t n;     /* tokens (MOE_COPY, MOE_SUM) or grouped rows (MOE_SILU) */
	int tasks;
};

static void moe_rows_task(void *ctx, int task, int thread)
{
	const struct moe_rows *c = ctx;
	struct wk_cpu_moe *s = c->s;
	uint32_t k = s->hp.n_expert_used, e = s->hp.n_embd, f = s->hp.n_ff_exp;
	uint32_t i0 = (uint32_t)((uint64_t)c->n * (uint32_t)task / (uint32_t)c->tasks);
	uint32_t i1 = (uint32_t)((uint64_t)c->n * (uint32_t)(task + 1) / (uint32_t)c->tasks);

	(void)thread;
	for (uint32_t i = i0; i < i1; i++) {
		if (c->phase == MOE_SILU) {
			wk_cpu_silu_mul(s->g + (uint64_t)i * f, s->g + (uint64_t)i * f,
					s->u + (uint64_t)i * f, (int)f);
			continue;
		}
		if (c->phase == MOE_COPY) {
			for (uint32_t j = 0; j < k; j++)
				memcpy(s->x + (uint64_t)s->slot[(uint64_t)i * k + j] * e,
				       c->h + (uint64_t)i * e, e * sizeof(float));
			continue;
		}
		/* token i: its experts' outputs, weighted, in increasing expert id */
		float *o = c->out + (uint64_t)i * e;

		memset(o, 0, e * sizeof(float));
		for (uint32_t j = 0; j < k; j++) {
			const float *y = s->y + (uint64_t)s->slot[(uint64_t)i * k + j] * e;
			float wj = s->w[(uint64_t)i * k + j];

			for (uint32_t d = 0; d < e; d++)
				o[d] += wj * y[d];
		}
	}
}

/* One phase over n rows or tokens: on this thread when small, else in
 * about MOE_ROWS_PER_THREAD pieces a thread (the two threads of the hosts
 * measured run at unequal speeds). */
#define MOE_ROWS_MIN_VALUES 16384
#define MOE_ROWS_PER_THREAD 4
static void moe_rows(struct wk_cpu_moe *s, struct wk_cpu_mm *mm, enum moe_phase phase,
		     const float *h, float *out, uint32_t n)
{
	struct wk_pool *pool = wk_cpu_mm_pool(mm);
	uint64_t width = phase == MOE_SILU ? s->hp.n_ff_exp
					   : (uint64_t)s->hp.n_embd * s->hp.n_expert_used;
	int threads = pool ? wk_pool_threads(pool) : 1;
	struct moe_rows c = { s, phase, h, out, n, 1 };

	if (threads > 1 && (uint64_t)n * width >= MOE_ROWS_MIN_VALUES) {
		c.tasks = threads * MOE_ROWS_PER_THREAD;
		if ((uint32_t)c.tasks > n)
			c.tasks = (int)n;
		wk_pool_run(pool, moe_rows_task, &c, c.tasks);
		return;
	}
	moe_rows_task(&c, 0, 0);
}

/*
 * qwen2moe's shared expert over all T tokens: out[t] += sigmoid(h[t] .
 * gate_inp) * down(silu(gate h[t]) * up h[t]), after the routed experts.
 */
static enum cm_status moe_shared(struct wk_cpu_moe *s, struct wk_cpu_mm *mm,
				 const struct wk_layer *L, const float *h, uint32_t T, float *out)
{
	uint32_t e = s->hp.n_embd, f = s->hp.n_ff_shexp;
	const struct wk_tensor *gi = &L->shexp_gate_inp, *gw = &L->shexp_gate, *uw = &L->shexp_up;
	struct wk_cpu_mm_op ops[3] = {
		{ gw->type, gw->data, (int)f, (int)e, h, (int)T, s->sgu },
		{ uw->type, uw->data, (int)f, (int)e, h, (int)T, s->suu },
		/* the gate's logit: the vector as a one-row matrix */
		{ gi->type, gi->data, 1, (int)e, h, (int)T, s->sg },
	};
	enum cm_status st = wk_cpu_matmul_multi(mm, ops, 3);

	if (st != CM_OK)
		return st;
	for (uint32_t t = 0; t < T; t++)
		wk_cpu_silu_mul(s->sgu + (uint64_t)t * f, s->sgu + (uint64_t)t * f,
				s->suu + (uint64_t)t * f, (int)f);
	st = wk_cpu_matmul(mm, L->shexp_down.type, L->shexp_down.data, (int)e, (int)f, s->sgu,
			   (int)T, s->sy);
	if (st != CM_OK)
		return st;
	for (uint32_t t = 0; t < T; t++) {
		float g = 1.0f / (1.0f + wk_cpu_expf(-s->sg[t]));
		float *o = out + (uint64_t)t * e;
		const float *y = s->sy + (uint64_t)t * e;

		for (uint32_t i = 0; i < e; i++)
			o[i] += g * y[i];
	}
	return CM_OK;
}

enum cm_status wk_cpu_moe_ffn(struct wk_cpu_moe *s, struct wk_cpu_mm *mm,
			      const struct wk_layer *L, const float *h, uint32_t T, float *out,
			      uint32_t *ids)
{
	const struct wk_hparams *hp = &s->hp;
	uint32_t k = hp->n_expert_used, e = hp->n_embd, f = hp->n_ff_exp;
	int n_ops = 0;
	enum cm_status st;

	if (T == 0)
		return CM_OK;
	st = moe_ensure(s, T);
	if (st == CM_OK)
		st = wk_cpu_matmul(mm, L->ffn_gate_inp.type, L->ffn_gate_inp.data,
				   (int)hp->n_expert, (int)e, h, (int)T, s->logits);
	if (st != CM_OK)
		return st;
	moe_group(s, T);
	moe_rows(s, mm, MOE_COPY, h, NULL, T);
	if (ids)
		memcpy(ids, s->ids, (uint64_t)T * k * sizeof(uint32_t));
	/* every chosen expert's gate and up in one parallel run (gate and up
	 * of one expert quantise its rows once), then every down in another */
	for (uint32_t x = 0; x < hp->n_expert; x++) {
		uint32_t r0 = s->start[x], n = s->count[x];

		if (n == 0)
			continue;
		s->ops[n_ops++] = expert_op(&L->exp_gate, x, s->x + (uint64_t)r0 * e, n,
					    s->g + (uint64_t)r0 * f);
		s->ops[n_ops++] = expert_op(&L->exp_up, x, s->x + (uint64_t)r0 * e, n,
					    s->u + (uint64_t)r0 * f);
	}
	if ((st = wk_cpu_matmul_multi(mm, s->ops, n_ops)) != CM_OK)
		return st;
	moe_rows(s, mm, MOE_SILU, NULL, NULL, T * k);
	n_ops = 0;
	for (uint32_t x = 0; x < hp->n_expert; x++)
		if (s->count[x])
			s->ops[n_ops++] = expert_op(&L->exp_down, x, s->g + (uint64_t)s->start[x] * f,
						    s->count[x], s->y + (uint64_t)s->start[x] * e);
	if ((st = wk_cpu_matmul_multi(mm, s->ops, n_ops)) != CM_OK)
		return st;
	moe_rows(s, mm, MOE_SUM, NULL, out, T);
	return L->shexp_gate.data ? moe_shared(s, mm, L, h, T, out) : CM_OK;
}
