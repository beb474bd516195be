/*
 * sched.h - continuous batching over the paged KV cache.
 *
 * The scheduler owns the sequences admitted to the worker and decides, step
 * by step, which tokens go into the next forward pass:
 *   1. decode first: every running sequence that has finished its prompt
 *      contributes its last token (one token each);
 *   2. then prefill: chunks of prompts of running sequences, then newly
 *      admitted ones (FIFO, health probes first), until the step's token
 *      budget is used;
 *   3. admission needs free KV blocks (after prefix-cache matching) and a
 *      free running slot; when blocks run out for a running sequence, the
 *      youngest running sequence is preempted: its blocks are released and
 *      it goes back to the front of the queue to be recomputed later (its
 *      already-streamed tokens are kept and not sent again).
 * Tokens are produced by the caller's callbacks: the scheduler computes
 * logits, asks `sample` for the token, then tells `emit` (which may stop the
 * sequence: stop string, end of generation).  Finished and cancelled
 * sequences release their blocks at once.
 *
 * Prefix cache: at admission the prompt's full blocks are looked up by
 * their chain hash (worker/engine/kv.h, seeded with the request's tenant salt);
 * every block that becomes full is registered.  At least one prompt token
 * is always computed so the sequence gets logits.
 *
 * Threading: everything runs on the worker's main thread; the backend
 * parallelises inside forward().
 */
#ifndef SLUICE_WORKER_ENGINE_SCHED_H
#define SLUICE_WORKER_ENGINE_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct wk_backend;
struct wk_kv;
struct wk_sched;
struct wk_seq;

enum wk_seq_end {
	WK_END_NONE = 0,
	WK_END_STOP,       /* emit() asked to stop (EOG token, stop string) */
	WK_END_LENGTH,     /* max_tokens or the context is full */
	WK_END_CANCELLED,  /* wk_sched_cancel() */
	WK_END_ERROR,      /* backend failure */
};

/* Callbacks into the owner (the server, or a CLI). */
struct wk_sched_cb {
	/*
	 * Picks the next token from logits[vocab]; `hist` holds the sequence's
	 * tokens so far (prompt then generated) for penalties.  Returns the
	 * token id and writes its logprob.
	 */
	int32_t (*sample)(void *owner, struct wk_seq *s, const float *logits,
			  const int32_t *hist, uint32_t n_hist, float *logprob);
	/* A token was generated; return 1 to stop the sequence (it ends STOP). */
	int (*emit)(void *owner, struct wk_seq *s, int32_t token, float logprob,
		    const float *logits);
	/* The sequence ended; its blocks are already released.  It is freed after. */
	void (*done)(void *owner, struct wk_seq *s, enum wk_seq_end end);
};

struct wk_sched_config {
	uint32_t max_running;    /* sequences in the running set */
	uint32_t step_tokens;    /* token budget per step (decode + prefill) */
	uint32_t n_ctx;          /* max positions per sequence */
	uint32_t n_vocab;
	uint32_t kv_window;      /* every layer sees only the kv_window positions up to
				  * its token (a model windowed in all layers, as
				  * Phi-3 mini): the blocks wholly before that are
				  * released as a sequence moves on; 0: keep all */
};

/* With a KV window, the most blocks of bt tokens a sequence holds at once
 * (admission asks for no more): the window's, a step's and one, rounded
 * up.  sluice-model plan sizes a sequence by it too. */
static inline uint32_t wk_sched_window_blocks(uint32_t kv_window, uint32_t step_tokens,
					      uint32_t bt)
{
	return (kv_window + step_tokens) / bt + 2;
}

struct wk_seq_params {
	uint64_t id;             /* request id, unique per owner connection */
	void *owner_data;        /* opaque for the callbacks */
	const uint8_t *salt;     /* 32 bytes: tenant cache salt */
	const int32_t *prompt;   /* copied */
	uint32_t n_prompt;       /* >= 1 */
	uint32_t max_tokens;     /* >= 1 */
	int probe;               /* health probe: admitted before everything else */
};

struct wk_seq_timing {
	int64_t t_submit;        /* mono ns */
	int64_t t_admit;         /* first admission */
	int64_t t_first_token;
	int64_t t_end;
	int64_t prefill_ns;      /* time of steps that carried its prompt */
	int64_t decode_ns;       /* time of steps that carried its decode */
};

struct wk_sched *wk_sched_new(const struct wk_sched_config *cfg,
			      struct wk_backend *be, struct wk_kv *kv,
			      const struct wk_sched_cb *cb, void *owner);
void wk_sched_free(struct wk_sched *s);

/* Queues a sequence.  CM_ELIMIT: prompt + max_tokens over n_ctx. */
enum cm_status wk_sched_submit(struct wk_sched *s, const struct wk_seq_params *p,
			       struct wk_seq **out) CM_WUR;
/*
 * Ends a sequence now (done() is called with WK_END_CANCELLED before this
 * returns) and frees its blocks.
 */
void wk_sched_cancel(struct wk_sched *s, struct wk_seq *q);

/* Runs one step; CM_AGAIN when there was nothing to do. */
enum cm_status wk_sched_step(struct wk_sched *s) CM_WUR;
int wk_sched_idle(const struct wk_sched *s);

/* Sequence accessors for the callbacks. */
uint64_t wk_seq_id(const struct wk_seq *q);
void *wk_seq_owner_data(const struct wk_seq *q);
uint32_t wk_seq_n_prompt(const struct wk_seq *q);
uint32_t wk_seq_n_generated(const struct wk_seq *q);
uint32_t wk_seq_n_cached(const struct wk_seq *q);     /* prompt tokens from the prefix cache */
uint32_t wk_seq_preemptions(const struct wk_seq *q);
const struct wk_seq_timing *wk_seq_timing(const struct wk_seq *q);

struct wk_sched_stats {
	uint32_t waiting;
	uint32_t running;
	uint32_t last_batch_seqs;
	uint32_t last_batch_tokens;
	uint64_t steps;
	uint64_t prefill_tokens;   /* computed, cumulative */
	uint64_t decode_tokens;    /* cumulative */
	uint64_t prefix_hit_tokens;
	uint64_t preemptions;
	uint64_t forward_ns;       /* cumulative: in the backend's forward() */
	uint64_t emit_ns;          /* cumulative: sampling and emitting the step's tokens */
};

void wk_sched_stats(const struct wk_sched *s, struct wk_sched_stats *out);

#endif
