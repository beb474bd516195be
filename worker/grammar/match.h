/*
 * match.h - the pushdown matcher: one grammar's runtime, advancing on bytes.
 *
 * A matcher state is the set of parse stacks alive after the bytes seen so
 * far.  A stack is a chain of frames (grammar position, parent frame);
 * frames are hash-consed, so equal stacks are one node id, and states
 * (sorted sets of top nodes plus an "accepting" flag) are interned too:
 * a state is an int32 id and equal parses share it.  Calls in tail
 * position reuse the caller's frame, so repetition (x*, lowered as
 * L ::= x L | e) runs in constant stack depth.  Transitions are cached per
 * (state, byte), so the matcher becomes a lazily built DFA over the states
 * actually visited; the cache is memory that can be dropped, node and
 * state ids stay valid for the matcher's lifetime.
 *
 * A sequence holds only its current state id; rebuilding a preempted
 * sequence's state is replaying its accepted tokens from wk_gm_start().
 *
 * Threads: a struct wk_gm is used by one thread at a time (the worker's
 * scheduler thread); the struct wk_gram it reads is immutable.
 */
#ifndef SLUICE_WORKER_GRAMMAR_MATCH_H
#define SLUICE_WORKER_GRAMMAR_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/grammar.h"

#define WK_GM_DEAD (-1)  /* no stack survives the byte */
#define WK_GM_ERROR (-2) /* a limit (worker.grammar_max_states) or memory ran out */

struct wk_gm_limits {
	uint32_t max_nodes;      /* stack frames (worker.grammar_max_states x 4) */
	uint32_t max_states;     /* interned states (worker.grammar_max_states) */
	size_t trans_bytes;      /* transition cache before it is dropped */
};
void wk_gm_limits_default(struct wk_gm_limits *lim);

struct wk_gm;

/* `g` must outlive the matcher. */
struct wk_gm *wk_gm_new(const struct wk_gram *g, const struct wk_gm_limits *lim);
void wk_gm_free(struct wk_gm *m);
const struct wk_gram *wk_gm_grammar(const struct wk_gm *m);

/* The state before any byte (>= 0), or WK_GM_ERROR. */
int32_t wk_gm_start(struct wk_gm *m);
/* The state after `byte`, WK_GM_DEAD, or WK_GM_ERROR. */
int32_t wk_gm_step(struct wk_gm *m, int32_t state, uint8_t byte);
/* The state after bytes[0..len), stopping at the first dead byte. */
int32_t wk_gm_steps(struct wk_gm *m, int32_t state, const void *bytes, size_t len);
/* 1 when the input so far is a complete match (end of input allowed). */
int wk_gm_accepting(const struct wk_gm *m, int32_t state);
/* Interned states and frames so far (metrics, tests). */
uint32_t wk_gm_n_states(const struct wk_gm *m);
uint32_t wk_gm_n_nodes(const struct wk_gm *m);

#endif
