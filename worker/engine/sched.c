/*
 * sched.c - continuous batching scheduler (see sched.h).
 *
 * Invariants:
 *  - a sequence is on exactly one list: waiting (FIFO, probes and
 *    preempted sequences at the front) or running (admission order, oldest
 *    first);
 *  - toks[0..n_toks) are the prompt then the generated tokens; KV of
 *    toks[0..n_computed) is in blocks[0..ceil(n_computed / bt)); a waiting
 *    sequence holds no blocks;
 *  - with a KV window, blocks[0..n_dropped) were released (every one of them
 *    before the window of the next position, and offered to the prefix
 *    cache first): their ids stay in the table, which no kernel reads there;
 *  - chain is the prefix hash after n_hashed full blocks, every one of which
 *    has been looked up or offered to the prefix cache.
 */
#include "worker/engine/sched.h"

#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "worker/engine/backend.h"
#include "worker/engine/kv.h"

enum { SEQ_WAITING = 0, SEQ_RUNNING = 1 };

struct wk_seq {
	struct wk_seq *prev, *next;
	int state;
	uint64_t id;
	void *owner_data;
	int probe;
	uint8_t salt[32];
	int32_t *toks;           /* [cap_toks] */
	uint32_t n_toks, cap_toks;
	uint32_t n_prompt, max_tokens, n_gen;
	uint32_t n_computed;
	uint32_t *blocks;        /* [cap_blocks] */
	uint32_t n_blocks, cap_blocks;
	uint32_t n_dropped;      /* blocks[0..n_dropped) released: out of the window */
	uint8_t chain[WK_KV_HASH_LEN];
	uint32_t n_hashed;
	uint32_t n_cached;
	int matched_once;
	uint32_t preemptions;
	uint64_t admit_order;
	int step_prefill, step_decode; /* roles in the current step */
	struct wk_seq_timing tm;
};

struct seq_list {
	struct wk_seq *head, *tail;
	uint32_t n;
};

struct wk_sched {
	struct wk_sched_config cfg;
	struct wk_backend *be;
	struct wk_kv *kv;
	struct wk_sched_cb cb;
	void *owner;
	uint32_t bt;
	struct seq_list waiting, running;
	uint64_t admit_counter;
	/* step arrays */
	uint32_t cap_tokens;
	int32_t *b_tokens;
	uint32_t *b_pos, *b_seq, *b_out;
	struct wk_batch_seq *b_seqs;
	struct wk_seq **b_seqp;  /* [max_running + 1]: sequence of each b_seqs entry */
	struct wk_seq **out_seq; /* [max_running + 1] */
	float *logits;           /* [max_running + 1][n_vocab] */
	struct wk_sched_stats st;
};

/* ---- lists ---- */
static void list_remove(struct seq_list *l, struct wk_seq *q)
{
	if (q->prev)
		q->prev->next = q->next;
	else
		l->head = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		l->tail = q->prev;
	q->prev = q->next = NULL;
	l->n--;
}

static void list_push_back(struct seq_list *l, struct wk_seq *q)
{
	q->next = NULL;
	q->prev = l->tail;
	if (l->tail)
		l->tail->next = q;
	else
		l->head = q;
	l->tail = q;
	l->n++;
}

static void list_push_front(struct seq_list *l, struct wk_seq *q)
{
	q->prev = NULL;
	q->next = l->head;
	if (l->head)
		l->head->prev = q;
	else
		l->tail = q;
	l->head = q;
	l->n++;
}

/* ---- lifecycle ---- */
struct wk_sched *wk_sched_new(const struct wk_sched_config *cfg,
			      struct wk_backend *be, struct wk_kv *kv,
			      const struct wk_sched_cb *cb, void *owner)
{
	struct wk_sched *s;
	uint32_t nr = cfg->max_running + 1;

	if (cfg->max_running == 0 || cfg->step_tokens == 0 || cfg->n_vocab == 0)
		return NULL;
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->cfg = *cfg;
	s->be = be;
	s->kv = kv;
	s->cb = *cb;
	s->owner = owner;
	s->bt = wk_kv_block_tokens(kv);
	s->cap_tokens = cfg->step_tokens + nr;
	s->b_tokens = cm_calloc(s->cap_tokens, sizeof(int32_t));
	s->b_pos = cm_calloc(s->cap_tokens, sizeof(uint32_t));
	s->b_seq = cm_calloc(s->cap_tokens, sizeof(uint32_t));
	s->b_out = cm_calloc(nr, sizeof(uint32_t));
	s->b_seqs = cm_calloc(nr, sizeof(struct wk_batch_seq));
	s->b_seqp = cm_calloc(nr, sizeof(struct wk_seq *));
	s->out_seq = cm_calloc(nr, sizeof(struct wk_seq *));
	if (be->ops->host_alloc)
		s->logits = be->ops->host_alloc(be, (uint64_t)nr * cfg->n_vocab * sizeof(float));
	else
		s->logits = cm_calloc((uint64_t)nr * cfg->n_vocab, sizeof(float));
	if (!s->b_tokens || !s->b_pos || !s->b_seq || !s->b_out || !s->b_seqs ||
	    !s->b_seqp || !s->out_seq || !s->logits) {
		wk_sched_free(s);
		return NULL;
	}
	return s;
}

static void seq_release_blocks(struct wk_sched *s, struct wk_seq *q)
{
	for (uint32_t i = q->n_dropped; i < q->n_blocks; i++)
		wk_kv_unref(s->kv, q->blocks[i]);
	q->n_blocks = 0;
	q->n_dropped = 0;
	q->n_computed = 0;
	q->n_hashed = 0;
	wk_kv_chain_seed(q->salt, q->chain);
}

static void seq_free(struct wk_seq *q)
{
	if (!q)
		return;
	cm_free(q->toks);
	cm_free(q->blocks);
	cm_free(q);
}

void wk_sched_free(struct wk_sched *s)
{
	struct seq_list *lists[2];

	if (!s)
		return;
	lists[0] = &s->waiting;
	lists[1] = &s->running;
	for (int i = 0; i < 2; i++) {
		while (lists[i]->head) {
			struct wk_seq *q = lists[i]->head;

			list_remove(lists[i], q);
			seq_release_blocks(s, q);
			seq_free(q);
		}
	}
	cm_free(s->b_tokens);
	cm_free(s->b_pos);
	cm_free(s->b_seq);
	cm_free(s->b_out);
	cm_free(s->b_seqs);
	cm_free(s->b_seqp);
	cm_free(s->out_seq);
	if (s->logits && s->be->ops->host_free)
		s->be->ops->host_free(s->be, s->logits);
	else
		cm_free(s->logits);
	cm_free(s);
}

enum cm_status wk_sched_submit(struct wk_sched *s, const struct wk_seq_params *p,
			       struct wk_seq **out)
{
	struct wk_seq *q;
	uint64_t total = (uint64_t)p->n_prompt + p->max_tokens;

	if (p->n_prompt == 0 || p->max_tokens == 0)
		return CM_EINVAL;
	if (total > s->cfg.n_ctx)
		return CM_ELIMIT;
	/* it must fit in the whole cache on its own, or it could never run */
	if ((total + s->bt - 1) / s->bt > wk_kv_n_blocks(s->kv))
		return CM_ELIMIT;
	q = cm_calloc(1, sizeof(*q));
	if (!q)
		return CM_ENOMEM;
	q->cap_toks = (uint32_t)total;
	q->cap_blocks = (uint32_t)((total + s->bt - 1) / s->bt);
	q->toks = cm_calloc(q->cap_toks, sizeof(int32_t));
	q->blocks = cm_calloc(q->cap_blocks, sizeof(uint32_t));
	if (!q->toks || !q->blocks) {
		seq_free(q);
		return CM_ENOMEM;
	}
	memcpy(q->toks, p->prompt, p->n_prompt * sizeof(int32_t));
	q->n_toks = q->n_prompt = p->n_prompt;
	q->max_tokens = p->max_tokens;
	q->id = p->id;
	q->owner_data = p->owner_data;
	q->probe = p->probe;
	memcpy(q->salt, p->salt, 32);
	wk_kv_chain_seed(q->salt, q->chain);
	q->tm.t_submit = cm_mono_ns();
	q->state = SEQ_WAITING;
	if (q->probe)
		list_push_front(&s->waiting, q);
	else
		list_push_back(&s->waiting, q);
	*out = q;
	return CM_OK;
}

static void seq_end(struct wk_sched *s, struct wk_seq *q, enum wk_seq_end end)
{
	list_remove(q->state == SEQ_RUNNING ? &s->running : &s->waiting, q);
	seq_release_blocks(s, q);
	q->tm.t_end = cm_mono_ns();
	s->cb.done(s->owner, q, end);
	seq_free(q);
}

void wk_sched_cancel(struct wk_sched *s, struct wk_seq *q)
{
	seq_end(s, q, WK_END_CANCELLED);
}

int wk_sched_idle(const struct wk_sched *s)
{
	return s->waiting.n == 0 && s->running.n == 0;
}

/* ---- blocks ---- */

/* Makes q's block table cover positions [0, n_pos).  0 when out of blocks
 * (the blocks taken so far stay with q). */
static int ensure_blocks(struct wk_sched *s, struct wk_seq *q, uint32_t n_pos)
{
	uint32_t need = (n_pos + s->bt - 1) / s->bt;

	while (q->n_blocks < need) {
		uint32_t b;

		if (q->n_blocks >= q->cap_blocks)
			return 0;
		if (wk_kv_alloc(s->kv, &b) != CM_OK)
			return 0;
		q->blocks[q->n_blocks++] = b;
	}
	return 1;
}

/* Drops blocks of q beyond those covering n_computed (after a failed ensure). */
static void trim_blocks(struct wk_sched *s, struct wk_seq *q)
{
	uint32_t keep = (q->n_computed + s->bt - 1) / s->bt;

	while (q->n_blocks > keep)
		wk_kv_unref(s->kv, q->blocks[--q->n_blocks]);
}

static void preempt(struct wk_sched *s, struct wk_seq *q)
{
	list_remove(&s->running, q);
	seq_release_blocks(s, q);
	q->state = SEQ_WAITING;
	q->step_decode = q->step_prefill = 0;
	q->preemptions++;
	s->st.preemptions++;
	list_push_front(&s->waiting, q);
}

/* Prefix-cache matching at admission: full blocks, never the whole prompt. */
static void match_prefix(struct wk_sched *s, struct wk_seq *q)
{
	uint32_t max_blocks = (q->n_toks - 1) / s->bt;

	while (q->n_hashed < max_blocks && q->n_blocks < q->cap_blocks) {
		uint8_t h[WK_KV_HASH_LEN];
		uint32_t b;

		wk_kv_chain_next(q->chain, q->toks + (uint64_t)q->n_hashed * s->bt, s->bt, h);
		b = wk_kv_lookup(s->kv, h);
		if (b == WK_KV_NONE)
			break;
		memcpy(q->chain, h, WK_KV_HASH_LEN);
		q->blocks[q->n_blocks++] = b;
		q->n_hashed++;
		q->n_computed += s->bt;
	}
}

/*
 * With a KV window: releases the blocks no layer will read again, those
 * wholly before the window of the next position to compute (n_computed),
 * once the prefix cache has been offered them.
 */
static void drop_window_blocks(struct wk_sched *s, struct wk_seq *q)
{
	uint32_t w = s->cfg.kv_window, first;

	if (w == 0 || q->n_computed + 1 <= w)
		return;
	first = (q->n_computed + 1 - w) / s->bt; /* the block holding the oldest position read */
	while (q->n_dropped < first && q->n_dropped < q->n_hashed && q->n_dropped < q->n_blocks)
		wk_kv_unref(s->kv, q->blocks[q->n_dropped++]);
}

/* Offers every newly full block to the prefix cache. */
static void register_full_blocks(struct wk_sched *s, struct wk_seq *q)
{
	while ((q->n_hashed + 1) * s->bt <= q->n_computed) {
		uint8_t h[WK_KV_HASH_LEN];

		wk_kv_chain_next(q->chain, q->toks + (uint64_t)q->n_hashed * s->bt, s->bt, h);
		enum cm_status st = wk_kv_register(s->kv, q->blocks[q->n_hashed], h);

		/* CM_EEXIST: another sequence registered the same block first;
		 * CM_EINVAL: the block came from the cache and is registered */
		(void)st;
		memcpy(q->chain, h, WK_KV_HASH_LEN);
		q->n_hashed++;
	}
}

/* ---- the step ---- */

struct step {
	uint32_t n_tokens, n_seqs, n_out;
};

static void add_tokens(struct wk_sched *s, struct step *b, struct wk_seq *q,
		       uint32_t n)
{
	uint32_t si = b->n_seqs++;

	s->b_seqs[si].blocks = q->blocks;
	s->b_seqs[si].n_blocks = q->n_blocks;
	s->b_seqp[si] = q;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t p = q->n_computed + i;

		s->b_tokens[b->n_tokens] = q->toks[p];
		s->b_pos[b->n_tokens] = p;
		s->b_seq[b->n_tokens] = si;
		b->n_tokens++;
	}
	if (q->n_computed + n == q->n_toks) {
		s->b_out[b->n_out] = b->n_tokens - 1;
		s->out_seq[b->n_out] = q;
		b->n_out++;
	}
}

static uint32_t pending(const struct wk_seq *q)
{
	return q->n_toks - q->n_computed;
}

/* 1. Decode tokens first; preempt the youngest when blocks run out. */
static void step_decode(struct wk_sched *s, struct step *b, uint32_t *budget)
{
	struct wk_seq *q, *next;

	for (q = s->running.head; q; q = next) {
		next = q->next;
		q->step_prefill = q->step_decode = 0;
		if (pending(q) != 1)
			continue;
		while (!ensure_blocks(s, q, q->n_computed + 1)) {
			struct wk_seq *victim = s->running.tail;

			if (victim == next)
				next = next->next;
			preempt(s, victim);
			if (victim == q)
				break;
		}
		if (q->state != SEQ_RUNNING)
			continue;
		if (*budget == 0)
			break;
		add_tokens(s, b, q, 1);
		q->step_decode = 1;
		(*budget)--;
	}
}

/* 2. Prompt chunks of running sequences. */
static void step_prefill(struct wk_sched *s, struct step *b, uint32_t *budget)
{
	struct wk_seq *q, *next;

	for (q = s->running.head; q && *budget > 0; q = next) {
		uint32_t chunk;

		next = q->next;
		if (pending(q) <= 1 || q->step_decode)
			continue;
		chunk = pending(q) < *budget ? pending(q) : *budget;
		if (!ensure_blocks(s, q, q->n_computed + chunk)) {
			uint32_t covered = q->n_blocks * s->bt - q->n_computed;

			chunk = covered < chunk ? covered : chunk;
			if (chunk == 0 && q == s->running.head) {
				/* guarantee progress for the oldest: preempt the youngest */
				while (!ensure_blocks(s, q, q->n_computed + 1)) {
					struct wk_seq *victim = s->running.tail;

					/* never a sequence already in this batch */
					if (victim == q || victim->step_decode ||
					    victim->step_prefill)
						break;
					preempt(s, victim);
				}
				next = q->next;
				covered = q->n_blocks * s->bt - q->n_computed;
				chunk = covered < *budget ? covered : *budget;
				if (chunk > pending(q))
					chunk = pending(q);
			}
			trim_blocks(s, q);
			if (chunk == 0)
				continue;
			if (!ensure_blocks(s, q, q->n_computed + chunk))
				continue;
		}
		add_tokens(s, b, q, chunk);
		q->step_prefill = 1;
		*budget -= chunk;
	}
}

/* 3. Admissions: the whole remaining prompt must fit in free blocks. */
static void step_admit(struct wk_sched *s, struct step *b, uint32_t *budget)
{
	struct wk_seq *q;

	while (*budget > 0 && s->waiting.head) {
		uint32_t chunk, need;

		q = s->waiting.head;
		if (!q->probe && s->running.n >= s->cfg.max_running)
			break;
		match_prefix(s, q);
		need = (q->n_toks + s->bt - 1) / s->bt - q->n_blocks;
		if (s->cfg.kv_window) {
			uint32_t cap = wk_sched_window_blocks(s->cfg.kv_window, s->cfg.step_tokens,
							      s->bt);

			need = need < cap ? need : cap;
		}
		if (need > wk_kv_available(s->kv)) {
			/* keep the matched blocks only while waiting is short-lived */
			seq_release_blocks(s, q);
			break;
		}
		list_remove(&s->waiting, q);
		q->state = SEQ_RUNNING;
		q->step_decode = 0;
		if (!q->matched_once) {
			/* DONE reports what the first admission found cached */
			q->n_cached = q->n_computed < q->n_prompt ? q->n_computed : q->n_prompt;
			q->matched_once = 1;
			s->st.prefix_hit_tokens += q->n_cached;
		}
		q->admit_order = ++s->admit_counter;
		if (!q->tm.t_admit)
			q->tm.t_admit = cm_mono_ns();
		list_push_back(&s->running, q);
		chunk = pending(q) < *budget ? pending(q) : *budget;
		if (!ensure_blocks(s, q, q->n_computed + chunk)) {
			trim_blocks(s, q);
			break;
		}
		add_tokens(s, b, q, chunk);
		q->step_prefill = 1;
		*budget -= chunk;
	}
}

/* After the forward pass: positions computed, time accounted, blocks shared. */
static void step_account(struct wk_sched *s, const struct step *b, int64_t dt)
{
	for (uint32_t i = 0; i < b->n_seqs; i++) {
		struct wk_seq *sq = s->b_seqp[i];
		uint32_t n = 0;

		for (uint32_t t = 0; t < b->n_tokens; t++)
			n += s->b_seq[t] == i;
		sq->n_computed += n;
		if (sq->step_decode) {
			sq->tm.decode_ns += dt;
			s->st.decode_tokens += n;
		} else {
			sq->tm.prefill_ns += dt;
			s->st.prefill_tokens += n;
		}
		register_full_blocks(s, sq);
		drop_window_blocks(s, sq);
	}
}

/* Samples each output row, emits the token and ends what must end. */
static void step_emit(struct wk_sched *s, const struct step *b)
{
	for (uint32_t o = 0; o < b->n_out; o++) {
		struct wk_seq *sq = s->out_seq[o];
		const float *lg = s->logits + (uint64_t)o * s->cfg.n_vocab;
		float lp = 0;
		int32_t tok = s->cb.sample(s->owner, sq, lg, sq->toks, sq->n_toks, &lp);
		int stop;

		if (tok < 0 || (uint32_t)tok >= s->cfg.n_vocab) {
			seq_end(s, sq, WK_END_ERROR);
			continue;
		}
		sq->toks[sq->n_toks++] = tok;
		sq->n_gen++;
		if (!sq->tm.t_first_token)
			sq->tm.t_first_token = cm_mono_ns();
		stop = s->cb.emit(s->owner, sq, tok, lp, lg);
		if (stop)
			seq_end(s, sq, WK_END_STOP);
		else if (sq->n_gen >= sq->max_tokens || sq->n_toks >= sq->cap_toks)
			seq_end(s, sq, WK_END_LENGTH);
	}
}

enum cm_status wk_sched_step(struct wk_sched *s)
{
	struct step b = { 0, 0, 0 };
	uint32_t budget = s->cfg.step_tokens;
	struct wk_batch batch;
	int64_t t0, dt;
	enum cm_status st;

	step_decode(s, &b, &budget);
	step_prefill(s, &b, &budget);
	step_admit(s, &b, &budget);
	if (b.n_tokens == 0)
		return CM_AGAIN;

	batch.n_tokens = b.n_tokens;
	batch.tokens = s->b_tokens;
	batch.pos = s->b_pos;
	batch.seq = s->b_seq;
	batch.n_seqs = b.n_seqs;
	batch.seqs = s->b_seqs;
	batch.n_out = b.n_out;
	batch.out = s->b_out;
	t0 = cm_mono_ns();
	st = s->be->ops->forward(s->be, &batch, s->logits);
	dt = cm_mono_ns() - t0;
	s->st.steps++;
	s->st.last_batch_seqs = b.n_seqs;
	s->st.last_batch_tokens = b.n_tokens;
	if (st != CM_OK) {
		/* a failed step ends every sequence in it */
		for (uint32_t i = 0; i < b.n_seqs; i++)
			seq_end(s, s->b_seqp[i], WK_END_ERROR);
		return st;
	}
	step_account(s, &b, dt);
	t0 = cm_mono_ns();
	step_emit(s, &b);
	s->st.forward_ns += (uint64_t)dt;
	s->st.emit_ns += (uint64_t)(cm_mono_ns() - t0);
	return CM_OK;
}

/* ---- accessors ---- */
uint64_t wk_seq_id(const struct wk_seq *q) { return q->id; }
void *wk_seq_owner_data(const struct wk_seq *q) { return q->owner_data; }
uint32_t wk_seq_n_prompt(const struct wk_seq *q) { return q->n_prompt; }
uint32_t wk_seq_n_generated(const struct wk_seq *q) { return q->n_gen; }
uint32_t wk_seq_n_cached(const struct wk_seq *q) { return q->n_cached; }
uint32_t wk_seq_preemptions(const struct wk_seq *q) { return q->preemptions; }
const struct wk_seq_timing *wk_seq_timing(const struct wk_seq *q) { return &q->tm; }

void wk_sched_stats(const struct wk_sched *s, struct wk_sched_stats *out)
{
	*out = s->st;
	out->waiting = s->waiting.n;
	out->running = s->running.n;
}
