/*
 * schema_eval.c - a JSON Schema validator for single values, used where the
 * compiler knows the candidate values in advance: a schema whose own enum
 * or const (or one of its allOf branches') lists them is compiled to
 * exactly the listed values that validate against the WHOLE schema, so
 * keywords a grammar cannot express (not, if/then/else, multipleOf,
 * uniqueItems, patternProperties ...) are decided by evaluation instead of
 * being refused.  Anything it does not know how to evaluate makes it
 * answer "unknown" (-1), and the caller refuses as before.
 *
 * Pure computation, any thread; recursion bounded by WK_EVAL_DEPTH.
 */
#include <math.h>
#include <string.h>

#include "common/utf8.h"
#include "worker/grammar/match.h"
#include "worker/grammar/regex.h"
#include "worker/grammar/schema_internal.h"

#define WK_EVAL_DEPTH 48

static int is_int_value(const json_t *v)
{
	return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
}

/* JSON Schema equality: numbers by value, containers deep. */
static int equal(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	if (json_typeof(a) != json_typeof(b))
		return 0;
	if (json_is_array(a)) {
		if (json_array_size(a) != json_array_size(b))
			return 0;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!equal(json_array_get(a, i), json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (json_is_object(a)) {
		if (json_object_size(a) != json_object_size(b))
			return 0;
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)a, k, x) {
			const json_t *y = json_object_get(b, k);
			if (!y || !equal(x, y))
				return 0;
		}
		return 1;
	}
	return json_equal((json_t *)a, (json_t *)b);
}

/* 1 when the ECMAScript pattern finds a match in s, 0 when not, -1 unknown. */
int wk_schema_pattern_matches(const char *re, const char *s, size_t len)
{
	struct wk_gram_b *b = wk_gram_b_new(NULL);
	struct wk_gram *g = NULL;
	struct wk_gm *m = NULL;
	struct wk_gx *x = NULL;
	char err[128];
	int rc = -1;
	if (!b)
		return -1;
	uint32_t root = wk_gram_rule(b, "root", 1);
	if (wk_regex_compile(b, re, strlen(re), wk_regex_plain_class, NULL, &x, err, sizeof(err)) != CM_OK)
		goto out;
	wk_gram_set_body(b, root, x);
	enum cm_status st = wk_gram_build(b, root, &g, err, sizeof(err));
	if (st == CM_EINVAL && strstr(err, "unsatisfiable")) {
		rc = 0;
		goto out;
	}
	if (st != CM_OK || !(m = wk_gm_new(g, NULL)))
		goto out;
	int32_t state = wk_gm_steps(m, wk_gm_start(m), s, len);
	rc = state == WK_GM_ERROR ? -1 : wk_gm_accepting(m, state);
out:
	wk_gm_free(m);
	wk_gram_free(g);
	wk_gram_b_free(b);
	return rc;
}

static int eval(struct sc *c, const json_t *s, const json_t *v, int depth);

/* r and e combined: -1 (unknown) wins, then 0. */
static int both(int r, int e)
{
	return e < 0 ? -1 : (e ? r : 0);
}

static int eval_number(const json_t *s, const json_t *v)
{
	double x = json_number_value(v);
	const json_t *k;
	if ((k = json_object_get(s, "minimum")) && json_is_number(k)) {
		int excl = json_is_true(json_object_get(s, "exclusiveMinimum"));
		if (excl ? !(x > json_number_value(k)) : !(x >= json_number_value(k)))
			return 0;
	}
	if ((k = json_object_get(s, "maximum")) && json_is_number(k)) {
		int excl = json_is_true(json_object_get(s, "exclusiveMaximum"));
		if (excl ? !(x < json_number_value(k)) : !(x <= json_number_value(k)))
			return 0;
	}
	if ((k = json_object_get(s, "exclusiveMinimum")) && json_is_number(k) && !(x > json_number_value(k)))
		return 0;
	if ((k = json_object_get(s, "exclusiveMaximum")) && json_is_number(k) && !(x < json_number_value(k)))
		return 0;
	if ((k = json_object_get(s, "multipleOf")) && json_is_number(k)) {
		double m = json_number_value(k), q = x / m;
		if (m <= 0)
			return -1;
		if (fabs(q - nearbyint(q)) > 1e-9 * fmax(1.0, fabs(q)))
			return 0;
	}
	return 1;
}

static int eval_string(struct sc *c, const json_t *s, const json_t *v)
{
	(void)c;
	const char *str = json_string_value(v);
	size_t len = json_string_length(v), n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((uint8_t)str[i] & 0xC0) != 0x80;
	const json_t *k;
	if ((k = json_object_get(s, "minLength")) && json_is_number(k) && (double)n < json_number_value(k))
		return 0;
	if ((k = json_object_get(s, "maxLength")) && json_is_number(k) && (double)n > json_number_value(k))
		return 0;
	if ((k = json_object_get(s, "pattern")) && json_is_string(k)) {
		int m = wk_schema_pattern_matches(json_string_value(k), str, len);
		if (m <= 0)
			return m;
	}
	k = json_object_get(s, "$sluice_not_strings"); /* a not of listed strings */
	for (size_t i = 0; i < json_array_size(k); i++)
		if (json_equal(json_array_get(k, i), (json_t *)v))
			return 0;
	k = json_object_get(s, "$sluice_patterns"); /* merged from allOf */
	for (size_t i = 0; i < json_array_size(k); i++) {
		const json_t *p = json_array_get(k, i);
		int m = json_is_string(p) ? wk_schema_pattern_matches(json_string_value(p), str, len) : -1;
		if (m <= 0)
			return m;
	}
	if ((k = json_object_get(s, "format")) && json_is_string(k)) {
		if (wk_schema_format_asserts(json_string_value(k)))
			return -1; /* formats are decided by the grammar, not here */
	}
	return 1;
}

static int eval_array(struct sc *c, const json_t *s, const json_t *v, int depth)
{
	size_t n = json_array_size(v);
	const json_t *k;
	int r = 1;
	if ((k = json_object_get(s, "minItems")) && json_is_number(k) && (double)n < json_number_value(k))
		return 0;
	if ((k = json_object_get(s, "maxItems")) && json_is_number(k) && (double)n > json_number_value(k))
		return 0;
	if (json_is_true(json_object_get(s, "uniqueItems")))
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				if (equal(json_array_get(v, i), json_array_get(v, j)))
					return 0;
	const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	const json_t *rest = items;
	if (json_is_array(items)) {
		prefix = items;
		rest = json_object_get(s, "additionalItems");
	}
	size_t np = json_is_array(prefix) ? json_array_size(prefix) : 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *sch = i < np ? json_array_get(prefix, i) : rest;
		if (sch)
			if ((r = both(r, eval(c, sch, json_array_get(v, i), depth + 1))) < 0)
			return -1;
	}
	if ((k = json_object_get(s, "contains"))) {
		if (json_object_get(s, "minContains") || json_object_get(s, "maxContains"))
			return -1;
		int any = 0;
		for (size_t i = 0; i < n && !any; i++) {
			int e = eval(c, k, json_array_get(v, i), depth + 1);
			if (e < 0)
				return -1;
			any = e;
		}
		if (!any)
			r = 0;
	}
	return r;
}

static int eval_object(struct sc *c, const json_t *s, const json_t *v, int depth)
{
	const json_t *k;
	int r = 1;
	size_t n = json_object_size(v);
	if ((k = json_object_get(s, "minProperties")) && json_is_number(k) && (double)n < json_number_value(k))
		return 0;
	if ((k = json_object_get(s, "maxProperties")) && json_is_number(k) && (double)n > json_number_value(k))
		return 0;
	const json_t *req = json_object_get(s, "required");
	for (size_t i = 0; i < json_array_size(req); i++)
		if (json_is_string(json_array_get(req, i)) && !json_object_get(v, json_string_value(json_array_get(req, i))))
			return 0;
	const json_t *props = json_object_get(s, "properties"), *pp = json_object_get(s, "patternProperties");
	const json_t *addl = json_object_get(s, "additionalProperties"), *names = json_object_get(s, "propertyNames");
	const json_t *deps = json_object_get(s, "dependencies"), *dreq = json_object_get(s, "dependentRequired");
	const json_t *dsch = json_object_get(s, "dependentSchemas");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)v, key, val) {
		int matched = 0;
		const json_t *ps = props ? json_object_get(props, key) : NULL;
		if (ps) {
			matched = 1;
			if ((r = both(r, eval(c, ps, val, depth + 1))) < 0)
			return -1;
		}
		if (json_is_object(pp)) {
			const char *pk;
			json_t *psch;
			json_object_foreach((json_t *)pp, pk, psch) {
				int m = wk_schema_pattern_matches(pk, key, strlen(key));
				if (m < 0)
					return -1;
				if (m) {
					matched = 1;
					if ((r = both(r, eval(c, psch, val, depth + 1))) < 0)
			return -1;
				}
			}
		}
		if (!matched && addl)
			if ((r = both(r, eval(c, addl, val, depth + 1))) < 0)
			return -1;
		if (names) {
			json_t *ks = json_string(key);
			if (!ks)
				return -1;
			int e = eval(c, names, ks, depth + 1);
			json_decref(ks);
			if ((r = both(r, e)) < 0)
			return -1;
		}
		const json_t *d = deps ? json_object_get(deps, key) : NULL;
		const json_t *dr = dreq ? json_object_get(dreq, key) : NULL;
		const json_t *ds = dsch ? json_object_get(dsch, key) : NULL;
		if (d && json_is_array(d))
			dr = d;
		else if (d)
			ds = d;
		for (size_t i = 0; dr && i < json_array_size(dr); i++)
			if (json_is_string(json_array_get(dr, i)) && !json_object_get(v, json_string_value(json_array_get(dr, i))))
				r = 0;
		if (ds)
			if ((r = both(r, eval(c, ds, v, depth + 1))) < 0)
			return -1;
	}
	return r;
}

static const char *const UNKNOWN[] = { "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
				       "$recursiveRef", "minContains", "maxContains" };

static int eval(struct sc *c, const json_t *s, const json_t *v, int depth)
{
	if (json_is_true(s))
		return 1;
	if (json_is_false(s))
		return 0;
	if (!json_is_object(s) || depth > WK_EVAL_DEPTH)
		return -1;
	const char *kw;
	json_t *x;
	json_object_foreach((json_t *)s, kw, x) {
		for (size_t i = 0; i < sizeof(UNKNOWN) / sizeof(UNKNOWN[0]); i++)
			if (!strcmp(kw, UNKNOWN[i]))
				return -1;
	}
	int r = 1;
	const json_t *k;
	if ((k = json_object_get(s, "$ref"))) {
		if (!json_is_string(k) || json_string_value(k)[0] != '#')
			return -1;
		enum cm_status save = c->st;
		const json_t *t = wk_schema_resolve(c, json_string_value(k));
		c->st = save;
		if (!t)
			return -1;
		if ((r = both(r, eval(c, t, v, depth + 1))) < 0)
			return -1;
	}
	if ((k = json_object_get(s, "type"))) {
		int ok = 0;
		for (size_t i = 0; i < (json_is_array(k) ? json_array_size(k) : 1); i++) {
			const json_t *t = json_is_array(k) ? json_array_get(k, i) : k;
			const char *tn = json_string_value(t);
			if (!tn)
				return -1;
			ok |= (!strcmp(tn, "null") && json_is_null(v)) || (!strcmp(tn, "boolean") && json_is_boolean(v)) ||
			      (!strcmp(tn, "object") && json_is_object(v)) || (!strcmp(tn, "array") && json_is_array(v)) ||
			      (!strcmp(tn, "string") && json_is_string(v)) || (!strcmp(tn, "number") && json_is_number(v)) ||
			      (!strcmp(tn, "integer") && is_int_value(v));
		}
		if (!ok)
			return 0;
	}
	if ((k = json_object_get(s, "enum"))) {
		int in = 0;
		for (size_t i = 0; i < json_array_size(k) && !in; i++)
			in = equal(json_array_get(k, i), v);
		if (!in)
			return 0;
	}
	if ((k = json_object_get(s, "const")) && !equal(k, v))
		return 0;
	if ((k = json_object_get(s, "not"))) {
		int e = eval(c, k, v, depth + 1);
		if (e < 0)
			return -1;
		if (e)
			r = 0;
	}
	if ((k = json_object_get(s, "allOf")))
		for (size_t i = 0; i < json_array_size(k); i++)
			if ((r = both(r, eval(c, json_array_get(k, i), v, depth + 1))) < 0)
			return -1;
	const char *alts[2] = { "anyOf", "oneOf" };
	for (int a = 0; a < 2; a++) {
		if (!(k = json_object_get(s, alts[a])))
			continue;
		size_t hits = 0;
		for (size_t i = 0; i < json_array_size(k); i++) {
			int e = eval(c, json_array_get(k, i), v, depth + 1);
			if (e < 0)
				return -1;
			hits += (size_t)e;
		}
		if (a == 0 ? hits == 0 : hits != 1)
			r = 0;
	}
	if ((k = json_object_get(s, "if"))) {
		int e = eval(c, k, v, depth + 1);
		if (e < 0)
			return -1;
		const json_t *branch = json_object_get(s, e ? "then" : "else");
		if (branch)
			if ((r = both(r, eval(c, branch, v, depth + 1))) < 0)
			return -1;
	}
	int e = 1;
	if (json_is_number(v))
		e = eval_number(s, v);
	else if (json_is_string(v))
		e = eval_string(c, s, v);
	else if (json_is_array(v))
		e = eval_array(c, s, v, depth);
	else if (json_is_object(v))
		e = eval_object(c, s, v, depth);
	if ((r = both(r, e)) < 0)
		return -1;
	return r;
}

int wk_schema_eval(struct sc *c, const json_t *s, const json_t *v)
{
	return eval(c, s, v, 0);
}
