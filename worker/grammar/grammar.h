/*
 * grammar.h - context-free grammars over Unicode, built as expressions and
 * lowered to a byte-level form the matcher runs.
 *
 * Building: a struct wk_gram_b holds rules whose bodies are expressions
 * (literals, code-point classes and negated classes, byte classes, rule
 * references, sequences, alternatives, repetition with bounds).  Every
 * expression lives in the builder's arena; builder calls never fail one
 * by one: an allocation failure or a size limit makes the builder sticky
 * broken and wk_gram_build() reports it.
 *
 * Lowering (wk_gram_build): each rule becomes alternatives of element
 * sequences over three element kinds: BYTES (one byte from a 256-bit set),
 * RULE (a call) and END.  Code-point classes are translated to UTF-8 byte
 * sequences (so a character may be split across tokens); nested
 * alternatives and repetitions become anonymous rules (x* is L ::= x L | e,
 * tail-recursive so the matcher's stack does not grow); x{m,n} is m copies
 * of x followed by n-m nested optional copies.  The build then checks what
 * a matcher needs: no left recursion (named in the error), and a root that
 * can match at least one string (alternatives that cannot complete are
 * marked dead so that the matcher never enters a dead end).
 *
 * The lowered grammar (struct wk_gram) is immutable: share it freely
 * between threads.
 */
#ifndef SLUICE_WORKER_GRAMMAR_GRAMMAR_H
#define SLUICE_WORKER_GRAMMAR_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define WK_GRAM_INF UINT32_MAX /* unbounded repetition */

/* Limits of one grammar, checked while building and lowering. */
struct wk_gram_limits {
	uint32_t max_rules;   /* rules after lowering (worker.grammar_max_rules) */
	uint32_t max_elems;   /* elements after lowering (worker.grammar_max_elems) */
	size_t arena_bytes;   /* expression memory while building */
};
void wk_gram_limits_default(struct wk_gram_limits *lim);

struct wk_gx; /* an expression (builder-owned) */
struct wk_gram_b;

struct wk_gram_b *wk_gram_b_new(const struct wk_gram_limits *lim);
void wk_gram_b_free(struct wk_gram_b *b);
/* 1 once something failed (memory or a limit); builds then fail. */
int wk_gram_b_broken(const struct wk_gram_b *b);

/* A new rule named `name` (copied; "" allowed); its body is set later.
 * `named` rules are units the mask cache may cut the stack at (rules a
 * person or a schema node wrote, not helpers).  Returns the rule index,
 * or UINT32_MAX when broken. */
uint32_t wk_gram_rule(struct wk_gram_b *b, const char *name, int named);
void wk_gram_set_body(struct wk_gram_b *b, uint32_t rule, struct wk_gx *body);
/* The rule named `name`, UINT32_MAX when none. */
uint32_t wk_gram_find_rule(const struct wk_gram_b *b, const char *name);
uint32_t wk_gram_n_rules(const struct wk_gram_b *b);
/* 1 when the rule has a body. */
int wk_gram_has_body(const struct wk_gram_b *b, uint32_t rule);
const char *wk_gram_rule_name(const struct wk_gram_b *b, uint32_t rule);

/* Expressions.  Each returns NULL only when the builder is broken; every
 * constructor accepts NULL children (and then returns NULL). */
struct wk_gx *wk_gx_empty(struct wk_gram_b *b);
struct wk_gx *wk_gx_nothing(struct wk_gram_b *b); /* matches no string */
struct wk_gx *wk_gx_lit(struct wk_gram_b *b, const void *bytes, size_t len);
struct wk_gx *wk_gx_str(struct wk_gram_b *b, const char *s);
/* Code points: `ranges` holds n pairs [lo, hi] (inclusive, any order,
 * overlaps allowed); negated classes are complemented within U+0000 ..
 * U+10FFFF minus the surrogates. */
struct wk_gx *wk_gx_class(struct wk_gram_b *b, const uint32_t *ranges, size_t n, int negated);
struct wk_gx *wk_gx_cp(struct wk_gram_b *b, uint32_t lo, uint32_t hi);
/* One byte from a 256-bit set. */
struct wk_gx *wk_gx_bytes(struct wk_gram_b *b, const uint8_t set[32]);
struct wk_gx *wk_gx_ref(struct wk_gram_b *b, uint32_t rule);
struct wk_gx *wk_gx_seq(struct wk_gram_b *b, struct wk_gx *const *kids, size_t n);
struct wk_gx *wk_gx_alt(struct wk_gram_b *b, struct wk_gx *const *kids, size_t n);
struct wk_gx *wk_gx_seq2(struct wk_gram_b *b, struct wk_gx *x, struct wk_gx *y);
struct wk_gx *wk_gx_alt2(struct wk_gram_b *b, struct wk_gx *x, struct wk_gx *y);
struct wk_gx *wk_gx_rep(struct wk_gram_b *b, struct wk_gx *x, uint32_t min, uint32_t max);
struct wk_gx *wk_gx_opt(struct wk_gram_b *b, struct wk_gx *x);
/* 1 for wk_gx_nothing() (and alternatives/sequences made only of it). */
int wk_gx_is_nothing(const struct wk_gx *x);

/* ---- the lowered grammar ---------------------------------------------- */

enum wk_gram_op {
	WK_GRAM_END = 0,   /* end of an alternative */
	WK_GRAM_BYTES = 1, /* arg: index of a 256-bit byte set */
	WK_GRAM_RULE = 2,  /* arg: rule index */
};

struct wk_gram_elem {
	uint32_t op : 2;
	uint32_t arg : 30;
};

struct wk_gram {
	uint32_t n_rules, n_elems, n_sets, n_alts;
	uint32_t root;
	struct wk_gram_elem *elems;
	uint8_t (*sets)[32];
	uint32_t *rule_alt0;  /* [n_rules]: rule r's alternatives are alts[rule_alt0[r] ..] */
	uint32_t *rule_nalt;  /* [n_rules]: ... and there are rule_nalt[r] of them */
	uint32_t *alts;       /* [n_alts]: first element of each alternative */
	uint8_t *alt_live;    /* [n_alts]: 0 when the alternative cannot complete */
	uint32_t *elem_rule;  /* [n_elems]: the rule each element belongs to */
	uint8_t *rule_named;  /* [n_rules] */
	uint8_t *rule_nullable; /* [n_rules]: 1 when the rule can match the empty string */
	uint32_t *rule_minlen;  /* [n_rules]: fewest bytes the rule matches (capped at 2^30) */
	char **rule_names;    /* [n_rules] */
	uint64_t hash;        /* of the lowered form */
};

/*
 * Lowers the rules reachable from `root`.  Errors (err filled): CM_ENOMEM,
 * CM_ELIMIT (a limit, named), CM_EINVAL (a referenced rule without a body,
 * left recursion, or a root that matches nothing: "unsatisfiable").
 * The builder may be freed afterwards.
 */
enum cm_status wk_gram_build(struct wk_gram_b *b, uint32_t root, struct wk_gram **out,
			     char *err, size_t err_len) CM_WUR;
void wk_gram_free(struct wk_gram *g);

static inline int wk_gram_set_has(const uint8_t set[32], uint8_t byte)
{
	return (set[byte >> 3] >> (byte & 7)) & 1;
}

#endif
