/*
 * test_grammar.c - worker/grammar/: the builder's checks, the matcher on
 * hand-built grammars, patterns, JSON Schema (integer ranges checked
 * exhaustively against arithmetic), and the token mask against the
 * matcher token by token (with and without the shared pool).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "worker/grammar/cache.h"
#include "worker/grammar/gbnf.h"
#include "worker/grammar/mask.h"
#include "worker/grammar/regex.h"
#include "worker/grammar/schema.h"

struct fx {
	struct wk_gram *g;
	struct wk_gm *m;
	char err[512];
};

static void fx_free(struct fx *f)
{
	wk_gm_free(f->m);
	wk_gram_free(f->g);
	memset(f, 0, sizeof(*f));
}

static int matches(struct wk_gm *m, const char *s)
{
	int32_t st = wk_gm_steps(m, wk_gm_start(m), s, strlen(s));
	return wk_gm_accepting(m, st);
}

/* Schema text -> matcher; returns the compile status (err in f->err). */
static enum cm_status schema(struct fx *f, const char *text)
{
	json_error_t je;
	json_t *s = json_loads(text, JSON_DECODE_ANY, &je);
	assert_non_null(s);
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	uint32_t root = 0;
	enum cm_status st = wk_schema_compile(b, s, NULL, &root, f->err, sizeof(f->err));
	if (st == CM_OK)
		st = wk_gram_build(b, root, &f->g, f->err, sizeof(f->err));
	if (st == CM_OK) {
		f->m = wk_gm_new(f->g, NULL);
		assert_non_null(f->m);
	}
	wk_gram_b_free(b);
	json_decref(s);
	return st;
}

/* ---- builder and matcher -------------------------------------------------- */

static void test_repetition_bounds(void **state)
{
	(void)state;
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	uint32_t r = wk_gram_rule(b, "root", 1);
	wk_gram_set_body(b, r, wk_gx_seq2(b, wk_gx_rep(b, wk_gx_str(b, "ab"), 2, 4), wk_gx_str(b, "!")));
	struct fx f = { 0 };
	assert_int_equal(wk_gram_build(b, r, &f.g, f.err, sizeof(f.err)), CM_OK);
	f.m = wk_gm_new(f.g, NULL);
	assert_false(matches(f.m, "ab!"));
	assert_true(matches(f.m, "abab!"));
	assert_true(matches(f.m, "abababab!"));
	assert_false(matches(f.m, "ababababab!"));
	assert_false(matches(f.m, "aba!"));
	fx_free(&f);
	wk_gram_b_free(b);
}

static void test_utf8_class_across_steps(void **state)
{
	(void)state;
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	uint32_t r = wk_gram_rule(b, "root", 1);
	uint32_t not_quote[2] = { '"', '"' };
	wk_gram_set_body(b, r, wk_gx_rep(b, wk_gx_class(b, not_quote, 1, 1), 1, WK_GRAM_INF));
	struct fx f = { 0 };
	enum cm_status bst = wk_gram_build(b, r, &f.g, f.err, sizeof(f.err));
	if (bst != CM_OK)
		fail_msg("%s", f.err);
	f.m = wk_gm_new(f.g, NULL);
	assert_true(matches(f.m, "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"));
	/* a character split in the middle: alive but not complete */
	int32_t s = wk_gm_steps(f.m, wk_gm_start(f.m), "\xe2\x82", 2);
	assert_true(s >= 0);
	assert_false(wk_gm_accepting(f.m, s));
	assert_true(wk_gm_accepting(f.m, wk_gm_step(f.m, s, 0xac)));
	/* invalid UTF-8 and surrogates never match */
	assert_false(matches(f.m, "\xc0\xaf"));
	assert_false(matches(f.m, "\xed\xa0\x80"));
	assert_false(matches(f.m, "a\"b"));
	fx_free(&f);
	wk_gram_b_free(b);
}

static void test_build_errors(void **state)
{
	(void)state;
	char err[256];
	struct wk_gram *g = NULL;
	/* left recursion: a ::= a "x" | "y" */
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	uint32_t a = wk_gram_rule(b, "a", 1);
	wk_gram_set_body(b, a, wk_gx_alt2(b, wk_gx_seq2(b, wk_gx_ref(b, a), wk_gx_str(b, "x")), wk_gx_str(b, "y")));
	assert_int_equal(wk_gram_build(b, a, &g, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "left recursion: rule 'a'"));
	wk_gram_b_free(b);
	/* a nullable loop body is not left recursion: (x?)* */
	b = wk_gram_b_new(NULL);
	a = wk_gram_rule(b, "a", 1);
	wk_gram_set_body(b, a, wk_gx_seq2(b, wk_gx_rep(b, wk_gx_opt(b, wk_gx_str(b, "x")), 0, WK_GRAM_INF), wk_gx_str(b, ";")));
	assert_int_equal(wk_gram_build(b, a, &g, err, sizeof(err)), CM_OK);
	struct wk_gm *m = wk_gm_new(g, NULL);
	assert_true(matches(m, "xxx;"));
	assert_true(matches(m, ";"));
	wk_gm_free(m);
	wk_gram_free(g);
	wk_gram_b_free(b);
	/* a rule used but never defined */
	b = wk_gram_b_new(NULL);
	a = wk_gram_rule(b, "a", 1);
	uint32_t u = wk_gram_rule(b, "missing", 1);
	wk_gram_set_body(b, a, wk_gx_ref(b, u));
	assert_int_equal(wk_gram_build(b, a, &g, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "'missing' is used but not defined"));
	wk_gram_b_free(b);
	/* only infinite derivations: unsatisfiable */
	b = wk_gram_b_new(NULL);
	a = wk_gram_rule(b, "a", 1);
	wk_gram_set_body(b, a, wk_gx_seq2(b, wk_gx_str(b, "("), wk_gx_ref(b, a)));
	assert_int_equal(wk_gram_build(b, a, &g, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "unsatisfiable"));
	wk_gram_b_free(b);
}

/* ---- patterns ---------------------------------------------------------------- */

static struct wk_gx *raw_class(void *ctx, struct wk_gram_b *b, const uint32_t *r, size_t n, int neg)
{
	(void)ctx;
	return wk_gx_class(b, r, n, neg);
}

static int re_matches(const char *re, const char *s, char *err, size_t err_len, enum cm_status *st)
{
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	struct wk_gx *x = NULL;
	uint32_t r = wk_gram_rule(b, "root", 1);
	*st = wk_regex_compile(b, re, strlen(re), raw_class, NULL, &x, err, err_len);
	int ok = 0;
	if (*st == CM_OK) {
		wk_gram_set_body(b, r, x);
		struct wk_gram *g = NULL;
		*st = wk_gram_build(b, r, &g, err, err_len);
		if (*st == CM_OK) {
			struct wk_gm *m = wk_gm_new(g, NULL);
			ok = matches(m, s);
			wk_gm_free(m);
			wk_gram_free(g);
		}
	}
	wk_gram_b_free(b);
	return ok;
}

static void test_regex(void **state)
{
	(void)state;
	char err[256];
	enum cm_status st;
	assert_true(re_matches("^[a-c]+$", "abcab", err, sizeof(err), &st));
	assert_false(re_matches("^[a-c]+$", "abd", err, sizeof(err), &st));
	assert_true(re_matches("^\\d{3}-\\d{2}$", "123-45", err, sizeof(err), &st));
	assert_false(re_matches("^\\d{3}-\\d{2}$", "123-456", err, sizeof(err), &st));
	/* patterns are searches unless anchored */
	assert_true(re_matches("abc", "xxabcyy", err, sizeof(err), &st));
	assert_false(re_matches("^abc", "xabc", err, sizeof(err), &st));
	assert_true(re_matches("^(foo|ba[rz])(?:-\\w+)?$", "baz-x_1", err, sizeof(err), &st));
	assert_false(re_matches("^(foo|ba[rz])(?:-\\w+)?$", "bay", err, sizeof(err), &st));
	assert_true(re_matches("^[^\\s]+$", "a\xc3\xa9", err, sizeof(err), &st));
	assert_false(re_matches("^[^\\s]+$", "a b", err, sizeof(err), &st));
	re_matches("^(a)\\1$", "aa", err, sizeof(err), &st);
	assert_int_equal(st, CM_EINVAL);
	assert_non_null(strstr(err, "backreferences"));
	re_matches("^(?=a)a$", "a", err, sizeof(err), &st);
	assert_int_equal(st, CM_EINVAL);
	assert_non_null(strstr(err, "lookaround"));
	re_matches("^[b-a]$", "a", err, sizeof(err), &st);
	assert_int_equal(st, CM_EINVAL);
	assert_non_null(strstr(err, "offset"));
}

/* ---- JSON Schema ---------------------------------------------------------------- */

/* Every integer in [-300, 300] against every bound combination. */
static void test_integer_ranges_exhaustive(void **state)
{
	(void)state;
	const int bounds[] = { -150, -100, -10, -1, 0, 1, 9, 10, 99, 100, 101, 150 };
	size_t nb = sizeof(bounds) / sizeof(bounds[0]);
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < nb; j++)
			for (int ex = 0; ex < 4; ex++) {
				int lo = bounds[i], hi = bounds[j];
				char text[200];
				snprintf(text, sizeof(text), "{\"type\":\"integer\",\"%s\":%d,\"%s\":%d}",
					 ex & 1 ? "exclusiveMinimum" : "minimum", lo,
					 ex & 2 ? "exclusiveMaximum" : "maximum", hi);
				struct fx f = { 0 };
				enum cm_status st = schema(&f, text);
				int lo_ok = ex & 1 ? lo + 1 : lo, hi_ok = ex & 2 ? hi - 1 : hi;
				if (lo_ok > hi_ok) {
					assert_int_equal(st, CM_EINVAL);
					assert_non_null(strstr(f.err, "unsatisfiable"));
					continue;
				}
				assert_int_equal(st, CM_OK);
				for (int v = -300; v <= 300; v++) {
					char num[16];
					snprintf(num, sizeof(num), "%d", v);
					if (matches(f.m, num) != (v >= lo_ok && v <= hi_ok))
						fail_msg("%s: %d", text, v);
				}
				assert_false(matches(f.m, "-0"));
				assert_false(matches(f.m, "007"));
				fx_free(&f);
			}
}

static void test_number_bounds(void **state)
{
	(void)state;
	struct fx f = { 0 };
	assert_int_equal(schema(&f, "{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":10}"), CM_OK);
	assert_false(matches(f.m, "0"));
	assert_false(matches(f.m, "0.0"));
	assert_true(matches(f.m, "0.001"));
	assert_true(matches(f.m, "10"));
	assert_true(matches(f.m, "10.000"));
	assert_false(matches(f.m, "10.001"));
	assert_false(matches(f.m, "-0.5"));
	fx_free(&f);
	/* fractional bounds: every hundredth in [-3, 3] (written shortest and
	 * with a trailing zero) against the arithmetic */
	const int bh[] = { -250, -100, -25, 0, 10, 50, 100, 175, 205 }; /* bounds x 100 */
	size_t nb = sizeof(bh) / sizeof(bh[0]);
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < nb; j++)
			for (int ex = 0; ex < 4; ex++) {
				char text[200];
				snprintf(text, sizeof(text), "{\"type\":\"number\",\"%s\":%g,\"%s\":%g}",
					 ex & 1 ? "exclusiveMinimum" : "minimum", bh[i] / 100.0,
					 ex & 2 ? "exclusiveMaximum" : "maximum", bh[j] / 100.0);
				enum cm_status st = schema(&f, text);
				int empty = bh[i] > bh[j] || (bh[i] == bh[j] && ex);
				if (empty) {
					assert_int_equal(st, CM_EINVAL);
					continue;
				}
				assert_int_equal(st, CM_OK);
				for (int v = -300; v <= 300; v++) {
					char num[32], num0[40];
					snprintf(num, sizeof(num), "%s%d.%02d", v < 0 ? "-" : "", abs(v) / 100, abs(v) % 100);
					snprintf(num0, sizeof(num0), "%s0", num);
					int want = (ex & 1 ? v > bh[i] : v >= bh[i]) && (ex & 2 ? v < bh[j] : v <= bh[j]);
					if (matches(f.m, num) != want || matches(f.m, num0) != want)
						fail_msg("%s: %s", text, num);
				}
				fx_free(&f);
			}
}

static void test_objects(void **state)
{
	(void)state;
	struct fx f = { 0 };
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":3},"
				    "\"b\":{\"type\":\"integer\"}},\"required\":[\"b\"],\"additionalProperties\":false}"), CM_OK);
	assert_true(matches(f.m, "{\"b\":1}"));
	assert_true(matches(f.m, "{\"a\":\"xyz\",\"b\":1}"));
	assert_true(matches(f.m, "{ \"a\": \"xyz\",\n  \"b\": 1 }"));
	assert_false(matches(f.m, "{\"a\":\"xyzw\",\"b\":1}"));
	assert_false(matches(f.m, "{\"a\":\"x\"}"));       /* b required */
	assert_false(matches(f.m, "{\"b\":1,\"a\":\"x\"}")); /* schema order */
	assert_false(matches(f.m, "{\"b\":1,\"c\":2}"));   /* no extras */
	fx_free(&f);
	/* extras allowed: any name but the listed ones */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"integer\"}}}"), CM_OK);
	assert_true(matches(f.m, "{\"ab\":1,\"abc\":\"x\"}"));
	assert_true(matches(f.m, "{\"a\":[true]}"));
	assert_false(matches(f.m, "{\"ab\":1,\"ab\":\"x\"}"));
	assert_false(matches(f.m, "{\"ab\":\"x\"}"));
	fx_free(&f);
}

static void test_arrays_enums_combinators(void **state)
{
	(void)state;
	struct fx f = { 0 };
	assert_int_equal(schema(&f, "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",2,null]},\"minItems\":1,\"maxItems\":2}"), CM_OK);
	assert_true(matches(f.m, "[\"x\"]"));
	assert_true(matches(f.m, "[2, null]"));
	assert_false(matches(f.m, "[]"));
	assert_false(matches(f.m, "[2,2,2]"));
	assert_false(matches(f.m, "[3]"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"definitions\":{\"t\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":\"array\","
				    "\"items\":{\"$ref\":\"#/definitions/t\"}}},\"additionalProperties\":false}},\"$ref\":\"#/definitions/t\"}"), CM_OK);
	assert_true(matches(f.m, "{\"kids\":[{\"kids\":[{}]},{}]}"));
	assert_false(matches(f.m, "{\"kids\":[{\"kid\":[]}]}"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
				    "{\"properties\":{\"a\":{\"minimum\":5}}}]}"), CM_OK);
	assert_true(matches(f.m, "{\"a\":5}"));
	assert_false(matches(f.m, "{\"a\":4}"));
	fx_free(&f);
	/* listed values are filtered by evaluating the whole schema */
	assert_int_equal(schema(&f, "{\"allOf\":[{\"enum\":[1,2,3,4,6]},{\"not\":{\"multipleOf\":2}}]}"), CM_OK);
	assert_true(matches(f.m, "1"));
	assert_true(matches(f.m, "3"));
	assert_false(matches(f.m, "2"));
	assert_false(matches(f.m, "6"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"enum\":[\"a\",\"bb\",[1,1]],\"not\":{\"maxLength\":1},\"uniqueItems\":true}"), CM_OK);
	assert_true(matches(f.m, "\"bb\""));
	assert_false(matches(f.m, "\"a\""));
	assert_false(matches(f.m, "[1,1]"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"enum\":[1],\"not\":{\"enum\":[1.0]}}"), CM_EINVAL);
	assert_non_null(strstr(f.err, "unsatisfiable"));
	assert_int_equal(schema(&f, "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"string\",\"maxLength\":2}]}"), CM_EUNSUPPORTED);
	assert_non_null(strstr(f.err, "oneOf"));
	assert_int_equal(schema(&f, "{\"properties\":{\"a\":{\"not\":{\"maxLength\":3}}}}"), CM_EUNSUPPORTED);
	assert_non_null(strstr(f.err, "'not' at /properties/a"));
	/* not of a type, of required: their complements, exactly */
	assert_int_equal(schema(&f, "{\"not\":{\"type\":[\"string\",\"object\",\"array\",\"null\"]}}"), CM_OK);
	assert_true(matches(f.m, "true"));
	assert_true(matches(f.m, "12"));
	assert_false(matches(f.m, "\"x\""));
	assert_false(matches(f.m, "{}"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},"
				    "\"not\":{\"required\":[\"a\",\"b\"]}}"), CM_OK);
	assert_true(matches(f.m, "{\"a\":1}"));
	assert_true(matches(f.m, "{}"));
	assert_false(matches(f.m, "{\"a\":1,\"b\":2}"));
	fx_free(&f);
	/* dependencies: a needs b (list), c needs d to be a string (schema) */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{},\"d\":{}},"
				    "\"additionalProperties\":false,"
				    "\"dependencies\":{\"a\":[\"b\"],\"c\":{\"properties\":{\"d\":{\"type\":\"string\"}}}}}"), CM_OK);
	assert_true(matches(f.m, "{\"a\":1,\"b\":2}"));
	assert_true(matches(f.m, "{\"b\":2}"));
	assert_false(matches(f.m, "{\"a\":1}"));
	assert_true(matches(f.m, "{\"c\":1,\"d\":\"x\"}"));
	assert_true(matches(f.m, "{\"d\":5}"));
	assert_false(matches(f.m, "{\"c\":1,\"d\":5}"));
	fx_free(&f);
	/* oneOf whose branches overlap: narrowed until exclusive */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},"
				    "\"y\":{\"type\":\"integer\"}},\"oneOf\":[{\"required\":[\"x\"]},{\"required\":[\"y\"]}]}"), CM_OK);
	assert_true(matches(f.m, "{\"x\":1}"));
	assert_true(matches(f.m, "{\"y\":1}"));
	assert_false(matches(f.m, "{\"x\":1,\"y\":2}"));
	assert_false(matches(f.m, "{}"));
	fx_free(&f);
	/* patternProperties: names matching the pattern take its schema */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"patternProperties\":{\"^n[0-9]+$\":{\"type\":\"integer\"}},"
				    "\"additionalProperties\":false}"), CM_OK);
	assert_true(matches(f.m, "{\"n1\":1,\"n22\":2}"));
	assert_false(matches(f.m, "{\"n1\":\"x\"}"));
	assert_false(matches(f.m, "{\"m1\":1}"));
	fx_free(&f);
	/* min/maxProperties counted; pattern with lengths intersected */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},"
				    "\"additionalProperties\":false,\"minProperties\":2,\"maxProperties\":2}"), CM_OK);
	assert_true(matches(f.m, "{\"a\":1,\"c\":3}"));
	assert_false(matches(f.m, "{\"a\":1}"));
	assert_false(matches(f.m, "{\"a\":1,\"b\":2,\"c\":3}"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"^[a-c]+-[0-9]*$\",\"minLength\":3,\"maxLength\":4}"), CM_OK);
	assert_true(matches(f.m, "\"ab-\""));
	assert_true(matches(f.m, "\"a-12\""));
	assert_false(matches(f.m, "\"a-\""));
	assert_false(matches(f.m, "\"a-123\""));
	assert_false(matches(f.m, "\"abcd\""));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"minLength\":4,\"maxLength\":3}"), CM_EINVAL);
	assert_non_null(strstr(f.err, "unsatisfiable"));
	assert_int_equal(schema(&f, "{\"$ref\":\"#/definitions/nope\"}"), CM_EINVAL);
	assert_non_null(strstr(f.err, "points to nothing"));
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}},\"required\":[\"a\"]}"), CM_EINVAL);
	assert_non_null(strstr(f.err, "unsatisfiable"));
}

/* The keywords rewritten or intersected: every case exact (the invalid
 * side rejected, the valid side accepted). */
static void test_rewrites_and_products(void **state)
{
	struct fx f;

	(void)state;
	/* pattern and format together: both */
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"format\":\"email\",\"pattern\":\"^[a-c@.]+$\"}"), CM_OK);
	assert_true(matches(f.m, "\"a@b.c\""));
	assert_false(matches(f.m, "\"a@b.d\""));
	assert_false(matches(f.m, "\"abc\""));
	fx_free(&f);
	/* two patterns from allOf */
	assert_int_equal(schema(&f, "{\"allOf\":[{\"type\":\"string\",\"pattern\":\"^[0-9]+$\"},{\"pattern\":\"7\"}]}"), CM_OK);
	assert_true(matches(f.m, "\"170\""));
	assert_false(matches(f.m, "\"123\""));
	assert_false(matches(f.m, "\"7a\""));
	fx_free(&f);
	/* not of listed strings: every other value */
	assert_int_equal(schema(&f, "{\"not\":{\"enum\":[\"a\",\"bc\"]}}"), CM_OK);
	assert_true(matches(f.m, "\"b\""));
	assert_true(matches(f.m, "\"abc\""));
	assert_true(matches(f.m, "5"));
	assert_false(matches(f.m, "\"a\""));
	assert_false(matches(f.m, "\"bc\""));
	fx_free(&f);
	/* if / then / else on a listed value */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\"},"
				    "\"n\":{\"type\":\"integer\"}},\"additionalProperties\":false,"
				    "\"if\":{\"properties\":{\"k\":{\"const\":\"int\"}}},\"then\":{\"required\":[\"n\"]},"
				    "\"else\":{\"properties\":{\"n\":false}}}"), CM_OK);
	assert_true(matches(f.m, "{\"k\":\"int\",\"n\":1}"));
	assert_false(matches(f.m, "{\"k\":\"int\"}"));
	assert_true(matches(f.m, "{\"k\":\"str\"}"));
	assert_false(matches(f.m, "{\"k\":\"str\",\"n\":1}"));
	fx_free(&f);
	/* patternProperties beside a listed name it matches: that name takes
	 * both schemas and is not written twice */
	assert_int_equal(schema(&f, "{\"type\":\"object\",\"properties\":{\"a1\":{\"minimum\":10}},"
				    "\"patternProperties\":{\"^a\":{\"type\":\"integer\"}},\"additionalProperties\":false}"), CM_OK);
	assert_true(matches(f.m, "{\"a1\":10,\"ab\":3}"));
	assert_false(matches(f.m, "{\"a1\":3}"));
	assert_false(matches(f.m, "{\"a1\":10,\"a1\":11}"));
	assert_false(matches(f.m, "{\"b\":1}"));
	fx_free(&f);
	/* oneOf of disjoint patterns and of arrays of disjoint items */
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"oneOf\":[{\"pattern\":\"^[^:]+$\"},{\"pattern\":\"^[^:]+:[0-9]+$\"}]}"), CM_OK);
	assert_true(matches(f.m, "\"ab\""));
	assert_true(matches(f.m, "\"ab:12\""));
	assert_false(matches(f.m, "\"ab:\""));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"oneOf\":[{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"string\"}},"
				    "{\"type\":\"array\",\"minItems\":1,\"items\":{\"type\":\"integer\"}}]}"), CM_OK);
	assert_true(matches(f.m, "[\"a\"]"));
	assert_true(matches(f.m, "[1,2]"));
	assert_false(matches(f.m, "[1,\"a\"]"));
	assert_false(matches(f.m, "[]"));
	fx_free(&f);
	/* multipleOf 0.01: at most two fraction digits that are not zeros */
	assert_int_equal(schema(&f, "{\"type\":\"number\",\"minimum\":0,\"multipleOf\":0.01}"), CM_OK);
	assert_true(matches(f.m, "10.99"));
	assert_true(matches(f.m, "10.990"));
	assert_true(matches(f.m, "3"));
	assert_false(matches(f.m, "10.001"));
	assert_false(matches(f.m, "-0.01"));
	assert_false(matches(f.m, "1e2"));
	fx_free(&f);
	/* alternatives written as groups keep their anchors */
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"(^a$)|(?:^b)|(c$)\"}"), CM_OK);
	assert_true(matches(f.m, "\"a\""));
	assert_true(matches(f.m, "\"bxx\""));
	assert_true(matches(f.m, "\"xxc\""));
	assert_false(matches(f.m, "\"xa\""));
	assert_false(matches(f.m, "\"xb\""));
	assert_false(matches(f.m, "\"cx\""));
	fx_free(&f);
	/* ipv6: hexadecimal groups */
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"format\":\"ipv6\"}"), CM_OK);
	assert_true(matches(f.m, "\"::1\""));
	assert_true(matches(f.m, "\"fe80::1:2\""));
	assert_true(matches(f.m, "\"1:2:3:4:5:6:7:8\""));
	assert_false(matches(f.m, "\"1:2:3:4:5:6:7:8:9\""));
	assert_false(matches(f.m, "\"1::2::3\""));
	fx_free(&f);
	/* an integer step: the digits read modulo it end at 0 */
	assert_int_equal(schema(&f, "{\"type\":\"integer\",\"multipleOf\":7}"), CM_OK);
	assert_true(matches(f.m, "0"));
	assert_true(matches(f.m, "14"));
	assert_true(matches(f.m, "-21"));
	assert_true(matches(f.m, "700"));
	assert_false(matches(f.m, "15"));
	assert_false(matches(f.m, "-1"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"number\",\"minimum\":10,\"maximum\":40,\"multipleOf\":12}"), CM_OK);
	for (int v = -50; v <= 100; v++) {
		char t[16];
		snprintf(t, sizeof(t), "%d", v);
		if (matches(f.m, t) != (v >= 10 && v <= 40 && v % 12 == 0))
			fail_msg("multipleOf 12 in [10, 40]: %d", v);
	}
	assert_false(matches(f.m, "24.5"));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"number\",\"multipleOf\":0.3}"), CM_EUNSUPPORTED);
	assert_non_null(strstr(f.err, "multipleOf"));
	/* one quantifier per atom (ECMAScript's rule; stacked ones cost the
	 * matcher exponential work): "e??" is lazy, "e???" an error */
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"^e??x$\"}"), CM_OK);
	assert_true(matches(f.m, "\"x\""));
	fx_free(&f);
	assert_int_not_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"^e???x$\"}"), CM_OK);
	assert_non_null(strstr(f.err, "quantifier after a quantifier"));
	assert_int_not_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"a+{2}\"}"), CM_OK);
	/* an overlap that cannot be narrowed is refused, never approximated */
	assert_int_equal(schema(&f, "{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"a\"},{\"type\":\"string\"}]}"), CM_EUNSUPPORTED);
	assert_non_null(strstr(f.err, "oneOf"));
}

static void test_formats(void **state)
{
	(void)state;
	struct fx f = { 0 };
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"format\":\"date-time\"}"), CM_OK);
	assert_true(matches(f.m, "\"2024-02-29T12:30:00Z\""));
	assert_true(matches(f.m, "\"2024-02-29T12:30:00.123+05:30\""));
	assert_false(matches(f.m, "\"2024-13-01T00:00:00Z\""));
	assert_false(matches(f.m, "\"yesterday\""));
	fx_free(&f);
	assert_int_equal(schema(&f, "{\"type\":\"string\",\"pattern\":\"^a\\\"b\\\\\\\\c$\"}"), CM_OK);
	/* the pattern matches the decoded string a"b\c, written with escapes */
	assert_true(matches(f.m, "\"a\\\"b\\\\c\""));
	assert_false(matches(f.m, "\"a\"b\\c\""));
	fx_free(&f);
}

/* ---- the grammar text format ------------------------------------------------------ */

static enum cm_status gbnf(struct fx *f, const char *text)
{
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	uint32_t root = 0;
	enum cm_status st = wk_gbnf_parse(b, text, strlen(text), &root, f->err, sizeof(f->err));
	if (st == CM_OK)
		st = wk_gram_build(b, root, &f->g, f->err, sizeof(f->err));
	if (st == CM_OK)
		assert_non_null(f->m = wk_gm_new(f->g, NULL));
	wk_gram_b_free(b);
	return st;
}

static void test_gbnf(void **state)
{
	(void)state;
	struct fx f = { 0 };
	assert_int_equal(gbnf(&f, "# a list of pairs\n"
				  "root   ::= \"{\" ws pair (\",\" ws pair)* \"}\"\n"
				  "pair   ::= [a-z_]+ \":\" ws ( \"true\" | \"false\" | num )\n"
				  "num    ::= \"-\"? [0-9]{1,3} (\".\" [0-9]+)?\n"
				  "ws     ::= [ \\t\\n]*\n"), CM_OK);
	assert_true(matches(f.m, "{a: true, b_c:-12.5}"));
	assert_false(matches(f.m, "{a: 1234}"));
	assert_false(matches(f.m, "{A: true}"));
	fx_free(&f);
	/* alternatives on continuation lines, escapes, any character */
	assert_int_equal(gbnf(&f, "root ::= \"\\u00e9\" . x\n  | \"\\x41\"\nx ::= [^\\]\\n]"), CM_OK);
	assert_true(matches(f.m, "\xc3\xa9\xe2\x82\xacz"));
	assert_true(matches(f.m, "A"));
	assert_false(matches(f.m, "\xc3\xa9" "a]"));
	fx_free(&f);
	assert_int_equal(gbnf(&f, "root ::= a\na ::= \"x\" b\n"), CM_EINVAL);
	assert_non_null(strstr(f.err, "line 2, column 11: rule 'b' is used but not defined"));
	assert_int_equal(gbnf(&f, "root ::= \"x\"\nfoo := \"y\""), CM_EINVAL);
	assert_non_null(strstr(f.err, "line 2, column 5: expected a literal"));
	assert_int_equal(gbnf(&f, "root ::= (\"x\" | \"y\""), CM_EINVAL);
	assert_non_null(strstr(f.err, "unclosed '('"));
	assert_int_equal(gbnf(&f, "root ::= \"x\"{3,2}"), CM_EINVAL);
	assert_non_null(strstr(f.err, "n < m"));
	assert_int_equal(gbnf(&f, "start ::= \"x\""), CM_EINVAL);
	assert_non_null(strstr(f.err, "no 'root' rule"));
	assert_int_equal(gbnf(&f, "root ::= root \"x\" | \"y\""), CM_EINVAL);
	assert_non_null(strstr(f.err, "left recursion"));
	assert_int_equal(gbnf(&f, "root ::= \"abc"), CM_EINVAL);
	assert_non_null(strstr(f.err, "line 1, column 10: unterminated string literal"));
}

/* ---- masks against the matcher ---------------------------------------------------- */

static const char *const PIECES[] = {
	"{", "}", "[", "]", ",", ":", "\"", "\":", "\",", "\"}", "\"]", " ", "\n", "  ", ", \"", "{\"",
	"a", "b", "ab", "abc", "name", "\"name", "\"name\":", "age", "\"age\":", "1", "12", "0", "-", ".5",
	"true", "false", "null", "tru", "e", "\xc3", "\xa9", "\xc3\xa9", "x\"", "\\", "\\\"", "\\n", "u00",
	"}}", "]}", "},{", "\"x", "-1", "99", "\":\"", "\":[", "e5", "E", "ok\"}", "a\"b", "zz",
};

static void check_mask(struct wk_mask *k, struct wk_gm *m, int32_t s, size_t n)
{
	uint32_t bits[8] = { 0 };
	assert_int_equal(wk_mask_fill(k, s, bits), CM_OK);
	for (size_t i = 0; i < n; i++) {
		int in = (bits[i >> 5] >> (i & 31)) & 1;
		int allowed;
		if (i == n - 1) /* the EOG id */
			allowed = wk_gm_accepting(m, s);
		else
			allowed = wk_gm_steps(m, s, PIECES[i], strlen(PIECES[i])) >= 0;
		if (in != allowed)
			fail_msg("state %d token %zu ('%s'): mask %d, matcher %d", s, i, i < n - 1 ? PIECES[i] : "EOG", in, allowed);
		assert_int_equal(wk_mask_allows(k, s, (int32_t)i), allowed);
	}
}

static void test_mask_matches_matcher(void **state)
{
	(void)state;
	size_t n = sizeof(PIECES) / sizeof(PIECES[0]) + 1;
	const char *pieces[80];
	size_t lens[80];
	uint8_t eog[80] = { 0 };
	for (size_t i = 0; i < n - 1; i++) {
		pieces[i] = PIECES[i];
		lens[i] = strlen(PIECES[i]);
	}
	pieces[n - 1] = "";
	lens[n - 1] = 0;
	eog[n - 1] = 1;
	struct wk_vtrie *t = NULL;
	assert_int_equal(wk_vtrie_new_pieces(n, pieces, lens, eog, &t), CM_OK);
	struct wk_mask_pool *pool = wk_mask_pool_new(64u << 20);
	const char *schemas[] = {
		"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0}},\"required\":[\"name\"]}",
		"{\"type\":\"array\",\"items\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"number\"},{\"type\":\"boolean\"}]}}",
		"{}",
	};
	const char *texts[] = {
		"{\"name\":\"ab\\n\",\"age\":12}", "{ \"name\": \"\xc3\xa9x\\\"\", \"zz\": [true, null, {\"a\": -1.5e5}]}",
		"[\"ab\", 12, true, \"x\"]", "[]", "{\"a\":[{},[],\"\",0]}",
	};
	for (int use_pool = 0; use_pool < 2; use_pool++)
		for (size_t si = 0; si < sizeof(schemas) / sizeof(schemas[0]); si++) {
			struct fx f = { 0 };
			assert_int_equal(schema(&f, schemas[si]), CM_OK);
			struct wk_mask *k = wk_mask_new(f.m, t, 1u << 20, use_pool ? pool : NULL);
			for (size_t ti = 0; ti < sizeof(texts) / sizeof(texts[0]); ti++) {
				int32_t s = wk_gm_start(f.m);
				const char *p = texts[ti];
				check_mask(k, f.m, s, n);
				for (; *p && s >= 0; p++) {
					s = wk_gm_step(f.m, s, (uint8_t)*p);
					if (s >= 0)
						check_mask(k, f.m, s, n);
				}
			}
			wk_mask_free(k);
			fx_free(&f);
		}
	wk_mask_pool_free(pool);
	wk_vtrie_free(t);
}

/* ---- the cache of compiled constraints ------------------------------------------ */

static void test_cache(void **state)
{
	(void)state;
	const char *pieces[4] = { "{", "}", "\"", "" };
	size_t lens[4] = { 1, 1, 1, 0 };
	uint8_t eog[4] = { 0, 0, 0, 1 };
	struct wk_vtrie *t = NULL;
	assert_int_equal(wk_vtrie_new_pieces(4, pieces, lens, eog, &t), CM_OK);
	struct wk_gcache_limits lim;
	wk_gcache_limits_default(&lim);
	lim.max_entries = 2;
	struct wk_gcache *c = wk_gcache_new(t, NULL, &lim);
	struct wk_gentry *a = NULL, *a2 = NULL, *b = NULL, *d = NULL;
	int64_t ns = 0;
	char err[256];
	const char *sa = "{\"type\":\"object\"}", *sb = "root ::= \"{\" \"}\"";
	assert_int_equal(wk_gcache_get(c, WK_GKIND_SCHEMA, sa, strlen(sa), &a, &ns, err, sizeof(err)), CM_OK);
	assert_true(ns > 0);
	assert_int_equal(wk_gcache_get(c, WK_GKIND_SCHEMA, sa, strlen(sa), &a2, &ns, err, sizeof(err)), CM_OK);
	assert_ptr_equal(a, a2); /* a hit: the same matcher and masks */
	assert_int_equal(ns, 0);
	assert_int_equal(wk_gcache_get(c, WK_GKIND_GBNF, sb, strlen(sb), &b, &ns, err, sizeof(err)), CM_OK);
	assert_true(matches(wk_gentry_matcher(b), "{}"));
	/* both in use and the cache full: a third is refused, nothing evicted */
	assert_int_equal(wk_gcache_get(c, WK_GKIND_JSON_OBJECT, NULL, 0, &d, &ns, err, sizeof(err)), CM_ELIMIT);
	assert_non_null(strstr(err, "worker.grammar_cache_entries"));
	assert_int_equal(wk_gcache_size(c), 2);
	/* errors are reported, not cached */
	assert_int_equal(wk_gcache_get(c, WK_GKIND_GBNF, "root ::= (", 10, &d, &ns, err, sizeof(err)), CM_ELIMIT);
	wk_gcache_put(c, b);
	assert_int_equal(wk_gcache_get(c, WK_GKIND_GBNF, "root ::= (", 10, &d, &ns, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "line 1"));
	assert_int_equal(wk_gcache_get(c, WK_GKIND_SCHEMA, "{", 1, &d, &ns, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "not JSON"));
	/* b is unused: evicted for the new one; a is held and stays */
	assert_int_equal(wk_gcache_get(c, WK_GKIND_JSON_OBJECT, NULL, 0, &d, &ns, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_gcache_size(c), 2);
	assert_true(matches(wk_gentry_matcher(d), "{}"));
	assert_true(matches(wk_gentry_matcher(a), "{ }"));
	wk_gcache_put(c, a);
	wk_gcache_put(c, a2);
	wk_gcache_put(c, d);
	wk_gcache_free(c);
	wk_vtrie_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repetition_bounds),
		cmocka_unit_test(test_utf8_class_across_steps),
		cmocka_unit_test(test_build_errors),
		cmocka_unit_test(test_regex),
		cmocka_unit_test(test_integer_ranges_exhaustive),
		cmocka_unit_test(test_number_bounds),
		cmocka_unit_test(test_objects),
		cmocka_unit_test(test_arrays_enums_combinators),
		cmocka_unit_test(test_rewrites_and_products),
		cmocka_unit_test(test_formats),
		cmocka_unit_test(test_gbnf),
		cmocka_unit_test(test_cache),
		cmocka_unit_test(test_mask_matches_matcher),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
