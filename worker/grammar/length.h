/*
 * length.h - a pattern's expression intersected with a length range in
 * code points (minLength / maxLength with pattern or format), exactly:
 * see length.c.
 */
#ifndef SLUICE_WORKER_GRAMMAR_LENGTH_H
#define SLUICE_WORKER_GRAMMAR_LENGTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/grammar.h"
#include "worker/grammar/regex.h"

/*
 * x: wk_regex_compile's output with a class function that returns plain
 * classes (wk_gx_class).  *out: the strings of L(x) of lo..hi code points
 * (hi WK_GRAM_INF: no upper bound), each atom written through `atom`.
 * CM_ELIMIT (too many positions or states, message in err), CM_ENOMEM.
 */
enum cm_status wk_gx_length(struct wk_gram_b *b, const struct wk_gx *x, uint32_t lo, uint32_t hi,
			    wk_regex_class_fn atom, void *ctx, struct wk_gx **out, char *err,
			    size_t err_len) CM_WUR;

/*
 * The strings in every L(xs[i]) (k <= 4 patterns) of lo..hi code points,
 * each atom the intersection of the patterns' atoms written through
 * `atom`.  Errors as wk_gx_length.
 */
enum cm_status wk_gx_product(struct wk_gram_b *b, const struct wk_gx *const *xs, size_t k,
			     uint32_t lo, uint32_t hi, wk_regex_class_fn atom, void *ctx,
			     struct wk_gx **out, char *err, size_t err_len) CM_WUR;

/* As wk_gx_product, and with mod > 0 the decimal digits the strings
 * contain, read as one number, are a multiple of mod (integers'
 * multipleOf; other characters such as a sign leave it alone). */
enum cm_status wk_gx_product_mod(struct wk_gram_b *b, const struct wk_gx *const *xs, size_t k,
				 uint32_t lo, uint32_t hi, uint32_t mod, wk_regex_class_fn atom,
				 void *ctx, struct wk_gx **out, char *err, size_t err_len) CM_WUR;

/*
 * Every string but names[0..n): a trie of the names whose every node also
 * leads, through a code point no name continues with, to `rest` (what may
 * follow: any string, in the caller's alphabet); code points are written
 * through `atom`.  NULL without memory or past 256 names branching at
 * one code point.
 */
struct wk_gx *wk_gx_other_names(struct wk_gram_b *b, const char *const *names, size_t n,
				wk_regex_class_fn atom, void *ctx, struct wk_gx *rest);

/* 1 when no string is in both L(x) and L(y) (patterns as for
 * wk_gx_length, built in b, which gains their product's rules), 0 when
 * one is, -1 when too large to tell. */
int wk_gx_disjoint(struct wk_gram_b *b, const struct wk_gx *x, const struct wk_gx *y);

#endif
