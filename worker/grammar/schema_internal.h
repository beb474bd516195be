/*
 * schema_internal.h - what schema.c (keywords, references, allOf, the node
 * dispatch) and schema_value.c (the JSON value pieces: strings, numbers,
 * objects, arrays), schema_oneof.c (oneOf's exclusivity) and schema_eval.c
 * share, and nothing else includes.
 */
#ifndef SLUICE_WORKER_GRAMMAR_SCHEMA_INTERNAL_H
#define SLUICE_WORKER_GRAMMAR_SCHEMA_INTERNAL_H

#include "worker/grammar/schema.h"

struct memo {
	const json_t *node;
	uint32_t rule;
};

struct sc {
	struct wk_gram_b *b;
	const json_t *root;
	struct wk_schema_opts o;
	char *err;
	size_t err_len;
	enum cm_status st;
	char path[512];
	uint32_t depth;
	uint32_t r_ws, r_any, r_str, r_num, r_int, r_jchar; /* +1, made on first use */
	struct memo *memo;
	size_t n_memo, cap_memo;
	json_t *owned; /* merged schemas live here */
	json_t *strings; /* "min,max,pattern" -> rule index: equal string constraints share a rule */
};

/* schema.c: errors (the first one wins; the path is appended) and nodes */
struct wk_gx *wk_schema_fail(struct sc *c, enum cm_status st, const char *fmt, const char *a);
struct wk_gx *wk_schema_oom(struct sc *c);
/* The named rule of schema node s (memoised), as a reference. */
struct wk_gx *wk_schema_node(struct sc *c, const json_t *s, const char *seg);

/* The node a local "$ref" names (error set when none). */
const json_t *wk_schema_resolve(struct sc *c, const char *ref);
/* The JSON types s can match (bits: null 1, boolean 2, object 4, array 8,
 * string 16, integer 32, non-integer number 64; an over-approximation). */
unsigned wk_schema_types(struct sc *c, const json_t *s, int depth);
/* s with its allOf and $ref merged into one schema (s itself when it has
 * neither; NULL after an error). */
const json_t *wk_schema_flatten(struct sc *c, const json_t *s);
/* v, kept alive until the compile ends (NULL when v is NULL or no memory). */
json_t *wk_schema_own(struct sc *c, json_t *v);

/* schema_rewrite.c: s with not (of what it can complement) and
 * dependencies rewritten into allOf/anyOf, or s itself; NULL on error */
const json_t *wk_schema_rewrite(struct sc *c, const json_t *s);

/* schema_oneof.c: 1 when no value matches both a and b (sound, partial) */
int wk_schema_disjoint(struct sc *c, const json_t *a, const json_t *b, int depth);
/* cur (a, narrowed so far) narrowed so that it matches nothing b matches,
 * or NULL when that cannot be expressed */
const json_t *wk_schema_exclude(struct sc *c, const json_t *cur, const json_t *a, const json_t *b);

/* schema_eval.c: 1 when v validates against s, 0 when not, -1 when s uses
 * something the evaluator does not decide (the caller then refuses). */
int wk_schema_eval(struct sc *c, const json_t *s, const json_t *v);
/* 1 when the ECMAScript pattern finds a match in s[0..len), 0 when not,
 * -1 when the pattern is not supported. */
int wk_schema_pattern_matches(const char *re, const char *s, size_t len);

/* schema_value.c: 1 for the formats validators check (enforced by a
 * pattern or refused); other format names are annotations */
int wk_schema_format_asserts(const char *f);

/* schema_value.c: shared pieces (whitespace, one string character, any
 * string, a property name's literal, a class as JSON string content) */
struct wk_gx *wk_schema_ws(struct sc *c);
/* A non-negative integer keyword (dflt when absent); -1 with the error set. */
int wk_schema_count(struct sc *c, const json_t *s, const char *key, uint32_t *v, uint32_t dflt);
struct wk_gx *wk_schema_jchar(struct sc *c);
struct wk_gx *wk_schema_any_string(struct sc *c);
struct wk_gx *wk_schema_key_literal(struct sc *c, const char *k);
struct wk_gx *wk_schema_json_class(void *ctx, struct wk_gram_b *b, const uint32_t *ranges, size_t n,
				   int negated);

/* schema_value.c, schema_object.c: the pieces, for the keywords of node s */
struct wk_gx *wk_schema_any_value(struct sc *c);
struct wk_gx *wk_schema_literal(struct sc *c, const json_t *v);
struct wk_gx *wk_schema_string(struct sc *c, const json_t *s);
struct wk_gx *wk_schema_pattern_key(struct sc *c, const char *re, const char *const *names, size_t n);
struct wk_gx *wk_schema_number(struct sc *c, const json_t *s, int is_int);
struct wk_gx *wk_schema_object(struct sc *c, const json_t *s);
struct wk_gx *wk_schema_array(struct sc *c, const json_t *s);

#endif
