/*
 * internal.h - what the files of worker/grammar/ share and nothing else
 * includes: the matcher's frame and state tables (match.c) as the mask
 * computation (mask.c) reads them, and the "local" form of a state.
 *
 * Frames: node 0 is the empty stack (NONE), node 1 the BOTTOM sentinel of
 * a local state.  A local state is a group of a state's stacks cut at a
 * common frame (the base) with the base replaced by BOTTOM: it consumes
 * bytes exactly like the real stacks as long as they do not return into
 * the base, and flags WK_GM_F_POP where they would.  Its behaviour does not
 * depend on what lies below the base, so the tokens it accepts can be
 * cached per local state and shared by every context it appears in.
 *
 * Expressions: the builder's nodes (grammar.c builds them, length.c reads
 * them to intersect a pattern with a length range).
 */
#ifndef SLUICE_WORKER_GRAMMAR_INTERNAL_H
#define SLUICE_WORKER_GRAMMAR_INTERNAL_H

#include "worker/grammar/mask.h"
#include "worker/grammar/match.h"

enum gx_kind { GX_EMPTY, GX_NOTHING, GX_LIT, GX_CLASS, GX_BYTES, GX_REF, GX_SEQ, GX_ALT, GX_REP };

struct wk_gx { /* see grammar.h: built by the wk_gx_* functions */
	uint8_t kind;
	uint32_t n;        /* LIT bytes, CLASS pairs, SEQ/ALT kids */
	uint32_t min, max; /* REP */
	uint32_t anon;     /* lowering: the rule made for this node, +1 */
	union {
		uint8_t *lit;
		uint32_t *ranges; /* normalised: sorted, disjoint, no surrogates */
		uint8_t *set;
		uint32_t rule;
		struct wk_gx **kids;
		struct wk_gx *kid;
	} u;
};

#define WK_GM_NONE 0u
#define WK_GM_BOTTOM 1u

#define WK_GM_F_ACCEPT 1u /* a stack emptied: end of input allowed */
#define WK_GM_F_POP 2u    /* a stack returned into BOTTOM (local states) */

struct wk_gm {
	const struct wk_gram *g;
	struct wk_gm_limits lim;
	/* frames */
	uint32_t *node_pos, *node_parent;
	uint32_t n_nodes, cap_nodes;
	uint32_t *node_hash, node_hash_cap; /* id + 1 */
	/* states: tops in a pool */
	uint32_t *st_off, *st_n;
	uint8_t *st_flags;
	int32_t **st_trans; /* [256] each, lazily: 0 unknown, -1 dead, id + 1 */
	uint32_t n_states, cap_states;
	uint32_t *st_hash, st_hash_cap;
	uint32_t *pool;
	size_t n_pool, cap_pool;
	size_t trans_bytes;
	int32_t start;
	/* scratch of one expansion */
	uint32_t *tops, n_tops, cap_tops;
	uint32_t *work, cap_work;
	uint64_t *seen;     /* (pos << 32 | parent) + 1, generation-stamped */
	uint32_t *seen_gen, seen_cap, gen;
	uint8_t flags;
};

/* grammar_check.c: liveness, nullability, minimum lengths, left recursion
 * of a grammar lowered by wk_gram_build (which calls it). */
enum cm_status wk_gram_check(struct wk_gram *g, char *err, size_t err_len) CM_WUR;

/* Frame (pos, parent), interned; UINT32_MAX on a limit or no memory. */
uint32_t wk_gm_node(struct wk_gm *m, uint32_t pos, uint32_t parent);
/* State from tops[0..n) (sorted and deduplicated here) and flags. */
int32_t wk_gm_state(struct wk_gm *m, uint32_t *tops, uint32_t n, uint8_t flags);
/* The state of rule `rule` entered on frame `parent` (BOTTOM: its local
 * state as the mask cache keys it). */
int32_t wk_gm_enter_rule(struct wk_gm *m, uint32_t rule, uint32_t parent);
/* The state reached by entering position `pos` with parent frame `parent`
 * (no byte consumed): the context a group returns into. */
int32_t wk_gm_enter(struct wk_gm *m, uint32_t pos, uint32_t parent);

/* ---- mask.c / mask_pool.c ---------------------------------------------- */

/* What a local state allows: tokens accepted whatever the context, and the
 * remainders (token, offset) to walk from the context, sorted by bytes. */
struct mk_entry {
	int32_t local;
	uint32_t n_acc;
	int32_t *acc;     /* sparse form, or NULL */
	uint32_t *bits;   /* dense form, or NULL */
	uint32_t n_u;
	int32_t *u_tok;   /* remainders sorted by bytes */
	uint16_t *u_k;    /* the remainder starts k bytes into the piece */
	uint16_t *u_lcp;  /* common prefix with the previous remainder */
	size_t bytes;
};
void wk_mask_entry_clear(struct mk_entry *e);

/* A local state's structure written out canonically: its frames' rest of
 * alternatives and every rule they can reach, rules renumbered by first
 * use.  Equal texts behave the same in any grammar. */
struct wk_mask_fpbuf {
	uint32_t *v;
	size_t n, cap;
};
/* 0 and *hash set; -1 when too large to share or out of memory. */
int wk_mask_fp(const struct wk_gm *m, int32_t local, uint32_t horizon, struct wk_mask_fpbuf *fp,
	       uint64_t *hash);
/* 0 with a deep copy of the entry in *out (its .local unset); -1 if absent.
 * `words` is the dense mask's length (the vocabulary's, the same for every
 * entry of a pool). */
int wk_mask_pool_get(struct wk_mask_pool *p, uint64_t hash, const struct wk_mask_fpbuf *fp,
		     size_t words, struct mk_entry *out);
/* Stores a deep copy (best effort: nothing on no memory). */
void wk_mask_pool_put(struct wk_mask_pool *p, uint64_t hash, const struct wk_mask_fpbuf *fp,
		      size_t words, const struct mk_entry *e);

/* wk_gm_step with the cached transition read inline (the mask walks). */
static inline int32_t wk_gm_step_fast(struct wk_gm *m, int32_t s, uint8_t byte)
{
	const int32_t *t = m->st_trans[s];
	if (t) {
		int32_t v = t[byte];
		if (v > 0)
			return v - 1;
		if (v < 0)
			return WK_GM_DEAD;
	}
	return wk_gm_step(m, s, byte);
}

#endif
