/*
 * mask.h - which tokens of the vocabulary a matcher state allows.
 *
 * The vocabulary is a byte trie of the token pieces (struct wk_vtrie,
 * built once per model, immutable, shared).  A mask is one bit per token:
 * the token's bytes can all be consumed from the state; the end-of-
 * generation tokens are allowed exactly when the state is accepting;
 * other control tokens and empty pieces never are.
 *
 * How it is fast: a state's stacks are grouped by the frame where they
 * would return into their context (the base: below the innermost named,
 * non-nullable rule).  For each group the trie is walked ONCE per local
 * state (the group with its base replaced by a sentinel, see internal.h),
 * giving the tokens accepted whatever the context is and, separately, the
 * tokens that return into the context after k bytes; those remainders are
 * kept sorted, so at run time only they are walked, from the real context,
 * sharing prefixes.  Results are cached per local state in a bounded cache
 * (worker.grammar_mask_cache_bytes) that is dropped whole when full.
 * wk_mask_allows() checks one token without any mask: the sampler draws
 * first and only computes the mask when the draw is refused.
 *
 * Threads: a struct wk_mask belongs to its matcher's thread.
 */
#ifndef SLUICE_WORKER_GRAMMAR_MASK_H
#define SLUICE_WORKER_GRAMMAR_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/match.h"

struct wk_tok;
struct wk_vtrie;
struct wk_mask;

/* From the tokenizer's pieces (control tokens excluded, EOG ids kept). */
enum cm_status wk_vtrie_new(const struct wk_tok *tok, struct wk_vtrie **out, char *err,
			    size_t err_len) CM_WUR;
/* From explicit pieces (tests): eog[i] 1 for end-of-generation ids,
 * pieces with len 0 are never allowed. */
enum cm_status wk_vtrie_new_pieces(size_t n, const char *const *pieces, const size_t *lens,
				   const uint8_t *eog, struct wk_vtrie **out) CM_WUR;
void wk_vtrie_free(struct wk_vtrie *t);
size_t wk_vtrie_n_vocab(const struct wk_vtrie *t);
size_t wk_vtrie_n_nodes(const struct wk_vtrie *t);
/* The bytes of token `id` (NULL and 0 for excluded ids). */
const uint8_t *wk_vtrie_piece(const struct wk_vtrie *t, int32_t id, size_t *len);
int wk_vtrie_is_eog(const struct wk_vtrie *t, int32_t id);

/*
 * The cache shared by every grammar of one model (one thread): entries of
 * local states keyed by their structure, so the string interior, numbers
 * and other common pieces are walked once per model, not once per grammar.
 * Bounded by `cap_bytes` (worker.grammar_pool_bytes), dropped whole when full.
 */
struct wk_mask_pool;
struct wk_mask_pool *wk_mask_pool_new(size_t cap_bytes);
void wk_mask_pool_free(struct wk_mask_pool *p);

/* m, t and pool (NULL: no sharing) must outlive the mask. */
struct wk_mask *wk_mask_new(struct wk_gm *m, const struct wk_vtrie *t, size_t cache_bytes,
			    struct wk_mask_pool *pool);
void wk_mask_free(struct wk_mask *k);

/* Work done so far (benchmarks, metrics). */
struct wk_mask_stats {
	uint64_t walks;      /* full trie walks (local states not cached) */
	uint64_t groups;     /* stack groups looked up */
	uint64_t remainders; /* remainder entries walked from a context */
	uint64_t bulk;       /* subtrees accepted whole (self-looping bytes) */
	uint64_t shared;     /* local states found in the shared pool */
};
void wk_mask_get_stats(const struct wk_mask *k, struct wk_mask_stats *out);

/*
 * Compile-time warming: walks, ahead of the first request, the local
 * states a sequence meets when it enters each named rule and after its
 * first byte (the inside of a string, of a number ...), until `budget_ns`
 * is spent.  Moves the first walks (about a millisecond each on a 100k
 * vocabulary) out of the per-token path into the compile.
 */
enum cm_status wk_mask_warm(struct wk_mask *k, int64_t budget_ns) CM_WUR;

/* Words of a mask: (n_vocab + 31) / 32. */
size_t wk_mask_words(const struct wk_mask *k);
/* bits[i >> 5] >> (i & 31) & 1 for token i.  CM_ELIMIT / CM_ENOMEM when the
 * matcher ran out of room (the caller ends the sequence with an error). */
enum cm_status wk_mask_fill(struct wk_mask *k, int32_t state, uint32_t *bits) CM_WUR;
/* 1 when token `id` is allowed from `state` (no mask computed). */
int wk_mask_allows(struct wk_mask *k, int32_t state, int32_t id);
/* The state after token `id` (EOG: the same state), or WK_GM_DEAD/ERROR. */
int32_t wk_mask_advance(struct wk_mask *k, int32_t state, int32_t id);
/* The state after bytes that are not one token (text after </think>). */
int32_t wk_mask_advance_bytes(struct wk_mask *k, int32_t state, const void *bytes, size_t len);

#endif
