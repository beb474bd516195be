/*
 * test_sched.c - the continuous-batching scheduler over a stand-in backend.
 *
 * The stand-in backend stores each token id in its KV "cell" (one u32 per
 * position, addressed through the block table exactly like real KV) and
 * derives the logits of a row from a hash of every cell 0..pos of that
 * sequence.  Any mistake in block tables, prefix sharing, preemption or
 * recomputation changes the generated tokens, so "same output as a solo
 * run" checks the scheduler end to end without a model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/engine/backend.h"
#include "worker/engine/kv.h"
#include "worker/engine/sched.h"

#define VOCAB 97
#define BT 4

struct fake_be {
	struct wk_backend base;
	uint32_t n_blocks;
	uint32_t *cells; /* [n_blocks * BT] token+1, 0 = never written */
	uint32_t max_batch_seqs;
	uint32_t window; /* a sliding window: the logits hash only its positions */
};

static enum cm_status fake_forward(struct wk_backend *base, const struct wk_batch *b,
				   float *logits)
{
	struct fake_be *be = (struct fake_be *)base;

	if (b->n_seqs > be->max_batch_seqs)
		be->max_batch_seqs = b->n_seqs;
	for (uint32_t t = 0; t < b->n_tokens; t++) {
		const struct wk_batch_seq *s = &b->seqs[b->seq[t]];
		uint32_t p = b->pos[t];

		assert_true(p / BT < s->n_blocks);
		be->cells[s->blocks[p / BT] * BT + p % BT] = (uint32_t)b->tokens[t] + 1;
	}
	for (uint32_t o = 0; o < b->n_out; o++) {
		uint32_t t = b->out[o];
		const struct wk_batch_seq *s = &b->seqs[b->seq[t]];
		uint32_t h = 2166136261u, pos = b->pos[t];
		uint32_t lo = be->window && pos + 1 > be->window ? pos + 1 - be->window : 0;

		for (uint32_t p = lo; p <= pos; p++) {
			h ^= be->cells[s->blocks[p / BT] * BT + p % BT];
			h *= 16777619u;
		}
		for (uint32_t v = 0; v < VOCAB; v++)
			logits[(uint64_t)o * VOCAB + v] = (v == h % VOCAB) ? 1.0f : 0.0f;
	}
	return CM_OK;
}

static const struct wk_backend_ops fake_ops = { .name = "fake", .forward = fake_forward };

struct result {
	int32_t toks[64];
	uint32_t n;
	enum wk_seq_end end;
	uint32_t cached;
	uint32_t preemptions;
	int done;
};

struct owner {
	int stop_at_token; /* emit() returns 1 when this token appears; -1 never */
};

static int32_t cb_sample(void *owner, struct wk_seq *s, const float *logits,
			 const int32_t *hist, uint32_t n_hist, float *logprob)
{
	int32_t best = 0;

	(void)owner; (void)s; (void)hist; (void)n_hist;
	for (int32_t v = 1; v < VOCAB; v++)
		if (logits[v] > logits[best])
			best = v;
	*logprob = 0;
	return best;
}

static int cb_emit(void *ownerp, struct wk_seq *s, int32_t tok, float lp,
		   const float *logits)
{
	struct owner *o = ownerp;
	struct result *r = wk_seq_owner_data(s);

	(void)lp; (void)logits;
	r->toks[r->n++] = tok;
	return tok == o->stop_at_token;
}

static void cb_done(void *owner, struct wk_seq *s, enum wk_seq_end end)
{
	struct result *r = wk_seq_owner_data(s);

	(void)owner;
	r->end = end;
	r->cached = wk_seq_n_cached(s);
	r->preemptions = wk_seq_preemptions(s);
	r->done = 1;
}

static const struct wk_sched_cb cbs = { cb_sample, cb_emit, cb_done };

struct rig {
	struct fake_be be;
	struct wk_kv *kv;
	struct wk_sched *s;
	struct owner own;
};

static void rig_init_w(struct rig *r, uint32_t n_blocks, uint32_t max_running,
		       uint32_t step_tokens, uint32_t window)
{
	struct wk_sched_config cfg = { max_running, step_tokens, 256, VOCAB, window };

	memset(r, 0, sizeof(*r));
	r->be.window = window;
	r->be.base.ops = &fake_ops;
	r->be.n_blocks = n_blocks;
	r->be.cells = cm_calloc((size_t)n_blocks * BT, sizeof(uint32_t));
	r->kv = wk_kv_new(n_blocks, BT);
	r->own.stop_at_token = -1;
	r->s = wk_sched_new(&cfg, &r->be.base, r->kv, &cbs, &r->own);
	assert_non_null(r->s);
}

static void rig_init(struct rig *r, uint32_t n_blocks, uint32_t max_running,
		     uint32_t step_tokens)
{
	rig_init_w(r, n_blocks, max_running, step_tokens, 0);
}

static void rig_run(struct rig *r)
{
	int guard = 0;

	while (!wk_sched_idle(r->s)) {
		enum cm_status st = wk_sched_step(r->s);

		assert_true(st == CM_OK || st == CM_AGAIN);
		assert_true(++guard < 100000);
	}
}

static void rig_free(struct rig *r)
{
	struct wk_kv_stats st;

	wk_sched_free(r->s);
	wk_kv_stats(r->kv, &st);
	assert_int_equal(st.used, 0); /* every block released */
	wk_kv_free(r->kv);
	cm_free(r->be.cells);
}

static void make_prompt(int32_t *p, uint32_t n, uint32_t seed)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (int32_t)((seed * 31 + i * 7) % VOCAB);
}

static void submit(struct rig *r, struct result *res, const uint8_t *salt,
		   const int32_t *prompt, uint32_t n, uint32_t max_tokens, uint64_t id)
{
	struct wk_seq_params p = { id, res, salt, prompt, n, max_tokens, 0 };
	struct wk_seq *q;

	memset(res, 0, sizeof(*res));
	assert_int_equal(wk_sched_submit(r->s, &p, &q), CM_OK);
}

static void solo(const int32_t *prompt, uint32_t n, uint32_t max_tokens,
		 struct result *out)
{
	struct rig r;
	uint8_t salt[32] = { 9 };

	rig_init(&r, 256, 4, 64);
	submit(&r, out, salt, prompt, n, max_tokens, 1);
	rig_run(&r);
	rig_free(&r);
}

static void test_concurrent_equals_solo(void **state)
{
	enum { N = 32 };
	static struct result conc[N], alone[N];
	static int32_t prompts[N][40];
	uint8_t salt[32] = { 9 };
	struct rig r;

	(void)state;
	for (int i = 0; i < N; i++) {
		make_prompt(prompts[i], 5 + i, (uint32_t)i);
		solo(prompts[i], 5 + i, 8 + i % 13, &alone[i]);
	}
	rig_init(&r, 512, 32, 48);
	for (int i = 0; i < N; i++)
		submit(&r, &conc[i], salt, prompts[i], 5 + i, 8 + i % 13, (uint64_t)i);
	rig_run(&r);
	for (int i = 0; i < N; i++) {
		assert_true(conc[i].done);
		assert_int_equal(conc[i].end, WK_END_LENGTH);
		assert_int_equal(conc[i].n, alone[i].n);
		assert_memory_equal(conc[i].toks, alone[i].toks, alone[i].n * sizeof(int32_t));
	}
	assert_true(r.be.max_batch_seqs > 1); /* they really were batched */
	rig_free(&r);
}

/*
 * A KV window (every layer windowed): blocks wholly before the window of the
 * next position are released as a sequence moves on, so one sequence holds
 * a few blocks however long it runs; and since the stand-in's logits read
 * the window's cells, a block released too early (and reused by another
 * sequence) would change the tokens: many at once must equal each alone.
 */
static void test_kv_window_releases_blocks(void **state)
{
	enum { N = 12, W = 9 };
	static struct result conc[N], alone[N];
	static int32_t prompts[N][40];
	uint8_t salt[32] = { 7 };
	struct wk_kv_stats ks;
	struct rig r;
	int guard = 0;

	(void)state;
	/* one sequence: 5 prompt + 60 generated positions in at most 5 blocks
	 * (17 without the window) */
	make_prompt(prompts[0], 5, 3);
	rig_init_w(&r, 64, 4, 16, W);
	submit(&r, &alone[0], salt, prompts[0], 5, 60, 1);
	while (!wk_sched_idle(r.s)) {
		assert_true(wk_sched_step(r.s) == CM_OK);
		wk_kv_stats(r.kv, &ks);
		assert_true(ks.used <= 5);
		assert_true(++guard < 1000);
	}
	assert_int_equal(alone[0].n, 60);
	rig_free(&r);
	for (int i = 0; i < N; i++) {
		struct rig one;

		make_prompt(prompts[i], 5 + 3 * i, (uint32_t)i + 40);
		rig_init_w(&one, 64, 4, 16, W);
		submit(&one, &alone[i], salt, prompts[i], 5 + 3 * i, 30 + i, 1);
		rig_run(&one);
		rig_free(&one);
	}
	/* few blocks for many: only the window lets them all run at once */
	rig_init_w(&r, 36, N, 24, W);
	for (int i = 0; i < N; i++)
		submit(&r, &conc[i], salt, prompts[i], 5 + 3 * i, 30 + i, (uint64_t)i);
	rig_run(&r);
	for (int i = 0; i < N; i++) {
		assert_true(conc[i].done);
		assert_int_equal(conc[i].n, alone[i].n);
		assert_memory_equal(conc[i].toks, alone[i].toks, alone[i].n * sizeof(int32_t));
	}
	rig_free(&r);
}

static void test_prefix_cache_per_tenant(void **state)
{
	int32_t prompt[30];
	uint8_t salt_a[32] = { 1 }, salt_b[32] = { 2 };
	struct result r1, r2, r3, alone;
	struct rig r;

	(void)state;
	make_prompt(prompt, 30, 5);
	solo(prompt, 30, 6, &alone);
	rig_init(&r, 64, 4, 64);
	submit(&r, &r1, salt_a, prompt, 30, 6, 1);
	rig_run(&r);
	submit(&r, &r2, salt_a, prompt, 30, 6, 2);
	rig_run(&r);
	submit(&r, &r3, salt_b, prompt, 30, 6, 3);
	rig_run(&r);
	assert_int_equal(r1.cached, 0);
	assert_int_equal(r2.cached, 28); /* 7 full blocks of 4 (30 tokens) */
	assert_int_equal(r3.cached, 0);  /* another tenant: nothing shared */
	assert_memory_equal(r2.toks, alone.toks, 6 * sizeof(int32_t));
	assert_memory_equal(r3.toks, alone.toks, 6 * sizeof(int32_t));
	rig_free(&r);
}

static void test_preemption_keeps_outputs(void **state)
{
	enum { N = 8 };
	static struct result conc[N], alone[N];
	static int32_t prompts[N][32];
	uint8_t salt[32] = { 7 };
	struct rig r;
	uint32_t total_preempt = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		make_prompt(prompts[i], 20 + i, (uint32_t)(100 + i));
		solo(prompts[i], 20 + i, 30, &alone[i]);
	}
	/* 40 blocks of 4 tokens: far less than 8 x ~55 tokens */
	rig_init(&r, 40, 8, 64);
	for (int i = 0; i < N; i++)
		submit(&r, &conc[i], salt, prompts[i], 20 + i, 30, (uint64_t)i);
	rig_run(&r);
	for (int i = 0; i < N; i++) {
		assert_true(conc[i].done);
		assert_int_equal(conc[i].n, 30);
		assert_memory_equal(conc[i].toks, alone[i].toks, 30 * sizeof(int32_t));
		total_preempt += conc[i].preemptions;
	}
	assert_true(total_preempt > 0);
	rig_free(&r);
}

static void test_cancel_frees_blocks(void **state)
{
	int32_t prompt[20];
	uint8_t salt[32] = { 3 };
	struct result res;
	struct rig r;
	struct wk_seq_params p = { 1, &res, salt, prompt, 20, 50, 0 };
	struct wk_seq *q;
	struct wk_kv_stats st;

	(void)state;
	make_prompt(prompt, 20, 1);
	rig_init(&r, 64, 4, 8);
	memset(&res, 0, sizeof(res));
	assert_int_equal(wk_sched_submit(r.s, &p, &q), CM_OK);
	for (int i = 0; i < 5; i++)
		assert_int_equal(wk_sched_step(r.s), CM_OK);
	wk_kv_stats(r.kv, &st);
	assert_true(st.used > 0);
	wk_sched_cancel(r.s, q);
	assert_true(res.done);
	assert_int_equal(res.end, WK_END_CANCELLED);
	wk_kv_stats(r.kv, &st);
	assert_int_equal(st.used, 0);
	assert_true(wk_sched_idle(r.s));
	rig_free(&r);
}

static void test_stop_and_limits(void **state)
{
	int32_t prompt[300];
	uint8_t salt[32] = { 3 };
	struct result res, alone;
	struct rig r;
	struct wk_seq_params p = { 1, &res, salt, prompt, 250, 10, 0 };
	struct wk_seq *q;

	(void)state;
	make_prompt(prompt, 300, 2);
	solo(prompt, 10, 20, &alone);
	rig_init(&r, 64, 4, 16);
	/* prompt + max_tokens over the context (256) */
	assert_int_equal(wk_sched_submit(r.s, &p, &q), CM_ELIMIT);
	p.n_prompt = 0;
	assert_int_equal(wk_sched_submit(r.s, &p, &q), CM_EINVAL);
	/* emit() asking to stop ends the sequence with STOP */
	r.own.stop_at_token = alone.toks[3];
	submit(&r, &res, salt, prompt, 10, 20, 2);
	rig_run(&r);
	assert_int_equal(res.end, WK_END_STOP);
	assert_true(res.n <= 4);
	assert_int_equal(res.toks[res.n - 1], alone.toks[3]);
	rig_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_equals_solo),
		cmocka_unit_test(test_kv_window_releases_blocks),
		cmocka_unit_test(test_prefix_cache_per_tenant),
		cmocka_unit_test(test_preemption_keeps_outputs),
		cmocka_unit_test(test_cancel_frees_blocks),
		cmocka_unit_test(test_stop_and_limits),
	};

	return cmocka_run_group_tests_name("worker/sched", tests, NULL, NULL);
}
