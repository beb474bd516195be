/*
 * regex.h - ECMAScript regular expressions (JSON Schema "pattern") as
 * grammar expressions.
 *
 * Supported: literals and escapes (\d \w \s \D \W \S \b-free escapes,
 * \n \t \r \f \v \0 \xHH \uHHHH \u{...} and escaped punctuation), classes
 * and negated classes with ranges, ".", groups (capturing, (?:...) and
 * named), alternation, the quantifiers * + ? {n} {n,} {n,m} (lazy forms
 * match the same strings), and ^ / $ at the ends of the pattern or of a
 * top-level alternative.  An unanchored side matches any text there
 * (JSON Schema patterns are searches).  Refused with a message naming the
 * construct and its offset: backreferences, lookaround, word boundaries,
 * anchors inside groups.
 *
 * Every class of code points goes through `cls` so that the caller decides
 * how a character is written (the schema compiler writes JSON-escaped
 * string content).
 */
#ifndef SLUICE_WORKER_GRAMMAR_REGEX_H
#define SLUICE_WORKER_GRAMMAR_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/grammar.h"

/* Builds the expression for code points in ranges[0..2n) (pairs). */
typedef struct wk_gx *(*wk_regex_class_fn)(void *ctx, struct wk_gram_b *b, const uint32_t *ranges,
					   size_t n, int negated);

/* A wk_regex_class_fn making plain classes of code points (wk_gx_class):
 * patterns that are matched, intersected or measured, not written as JSON. */
struct wk_gx *wk_regex_plain_class(void *ctx, struct wk_gram_b *b, const uint32_t *ranges,
				   size_t n, int negated);

enum cm_status wk_regex_compile(struct wk_gram_b *b, const char *re, size_t len,
				wk_regex_class_fn cls, void *ctx, struct wk_gx **out, char *err,
				size_t err_len) CM_WUR;

#endif
