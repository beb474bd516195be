/*
 * schema.c - JSON Schema to grammar rules (schema.h): per schema node one
 * named rule (memoised by node, so $ref recursion is a rule reference),
 * the JSON value pieces (strings with their escapes, numbers and integer
 * ranges, objects with ordered properties, arrays with counts), and the
 * merge of allOf.
 *
 * Pure computation, any thread; recursion is bounded by opts.max_depth.
 */
#include "worker/grammar/schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/grammar/regex.h"

struct wk_gx *wk_schema_fail(struct sc *c, enum cm_status st, const char *fmt, const char *a)
{
	if (c->st == CM_OK) {
		char m[256];
		snprintf(m, sizeof(m), fmt, a);
		c->st = cm_fail(c->err, c->err_len, st, "%s at %s", m, c->path[0] ? c->path : "/");
	}
	return NULL;
}

struct wk_gx *wk_schema_oom(struct sc *c)
{
	if (c->st == CM_OK)
		c->st = cm_fail(c->err, c->err_len, wk_gram_b_broken(c->b) ? CM_ELIMIT : CM_ENOMEM,
				"schema: grammar too large or out of memory");
	return NULL;
}

/* ---- keywords, references, combinators ------------------------------------------------------ */

/* Keywords that assert something and are not enforced: refused. */
static const char *const UNSUPPORTED[] = {
	"not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
	"contains", "minContains", "maxContains", "uniqueItems", "propertyNames",
	"unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
	"$recursiveRef",
};

/* 1 when keyword k of s can be ignored although listed as unsupported. */
static int harmless(const json_t *s, const char *k, const json_t *v)
{
	if (!strcmp(k, "uniqueItems"))
		return json_is_false(v);
	if (!strcmp(k, "then") || !strcmp(k, "else"))
		return !json_object_get(s, "if"); /* without if they say nothing */
	if (!strcmp(k, "dependencies") || !strcmp(k, "dependentRequired") ||
	    !strcmp(k, "dependentSchemas"))
		return json_is_object(v) && json_object_size(v) == 0;
	return 0;
}

static int check_keywords(struct sc *c, const json_t *s)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		for (size_t i = 0; i < sizeof(UNSUPPORTED) / sizeof(UNSUPPORTED[0]); i++)
			if (!strcmp(k, UNSUPPORTED[i]) && !harmless(s, k, v)) {
				wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported keyword '%s'", k);
				return -1;
			}
	}
	return 0;
}

/* "#", "#/a/b" (JSON Pointer, ~0 ~1 and %-escapes not decoded beyond ~). */
const json_t *wk_schema_resolve(struct sc *c, const char *ref)
{
	if (ref[0] != '#')
		return wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported $ref '%.200s': only local references (#...)", ref) ? NULL : NULL;
	const json_t *cur = c->root;
	const char *p = ref + 1;
	if (*p == 0)
		return cur;
	if (*p != '/')
		return wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported $ref '%.200s': expected a JSON Pointer", ref) ? NULL : NULL;
	while (*p == '/') {
		p++;
		char seg[256];
		size_t n = 0;
		while (*p && *p != '/' && n < sizeof(seg) - 1) {
			if (p[0] == '~' && p[1] == '0')
				seg[n++] = '~', p += 2;
			else if (p[0] == '~' && p[1] == '1')
				seg[n++] = '/', p += 2;
			else
				seg[n++] = *p++;
		}
		seg[n] = 0;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, seg);
		} else if (json_is_array(cur)) {
			char *end;
			unsigned long idx = strtoul(seg, &end, 10);
			cur = *end ? NULL : json_array_get(cur, idx);
		} else {
			cur = NULL;
		}
		if (!cur)
			return wk_schema_fail(c, CM_EINVAL, "$ref '%.200s' points to nothing", ref) ? NULL : NULL;
	}
	return cur;
}

static int is_annotation(const char *k)
{
	static const char *const A[] = { "title", "description", "default", "examples", "example", "$schema",
					 "$id", "id", "$comment", "readOnly", "writeOnly", "deprecated",
					 "definitions", "$defs", "format", "contentEncoding", "contentMediaType" };
	for (size_t i = 0; i < sizeof(A) / sizeof(A[0]); i++)
		if (!strcmp(A[i], k))
			return 1;
	return 0;
}

/* Keywords that constrain instances (the rest are annotations). */
static int is_assertion(const char *k)
{
	static const char *const A[] = { "type", "enum", "const", "properties", "required",
					 "additionalProperties", "items", "prefixItems", "additionalItems",
					 "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
					 "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf",
					 "oneOf", "allOf", "$ref", "patternProperties", "minProperties",
					 "maxProperties", "$sluice_patterns", "$sluice_not_strings", "multipleOf" };
	for (size_t i = 0; i < sizeof(A) / sizeof(A[0]); i++)
		if (!strcmp(A[i], k))
			return 1;
	for (size_t i = 0; i < sizeof(UNSUPPORTED) / sizeof(UNSUPPORTED[0]); i++)
		if (!strcmp(UNSUPPORTED[i], k))
			return 1;
	return 0;
}

/* Type bits: null 1, boolean 2, object 4, array 8, string 16, integer 32, number 64 (non-integer). */
#define T_ALL 127u

static unsigned type_bit(const char *t)
{
	static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer", "number" };
	for (unsigned i = 0; i < 7; i++)
		if (!strcmp(N[i], t))
			return i == 6 ? 96u : 1u << i;
	return 0;
}

static unsigned value_types(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL: return 1;
	case JSON_TRUE:
	case JSON_FALSE: return 2;
	case JSON_OBJECT: return 4;
	case JSON_ARRAY: return 8;
	case JSON_STRING: return 16;
	case JSON_INTEGER: return 32;
	case JSON_REAL: return json_real_value(v) == floor(json_real_value(v)) ? 32 : 64;
	}
	return 0;
}

/* The JSON types a schema can match (an over-approximation). */
unsigned wk_schema_types(struct sc *c, const json_t *s, int depth)
{
	if (json_is_false(s))
		return 0;
	if (!json_is_object(s) || depth > 32)
		return T_ALL;
	unsigned t = T_ALL;
	const json_t *ty = json_object_get(s, "type");
	if (json_is_string(ty))
		t = type_bit(json_string_value(ty));
	else if (json_is_array(ty)) {
		t = 0;
		for (size_t i = 0; i < json_array_size(ty); i++)
			if (json_is_string(json_array_get(ty, i)))
				t |= type_bit(json_string_value(json_array_get(ty, i)));
	}
	const json_t *en = json_object_get(s, "enum"), *co = json_object_get(s, "const");
	if (json_is_array(en)) {
		unsigned e = 0;
		for (size_t i = 0; i < json_array_size(en); i++)
			e |= value_types(json_array_get(en, i));
		t &= e;
	}
	if (co)
		t &= value_types(co);
	const json_t *ref = json_object_get(s, "$ref");
	if (json_is_string(ref) && json_string_value(ref)[0] == '#') {
		int save = c->st;
		const json_t *tg = wk_schema_resolve(c, json_string_value(ref));
		c->st = save;
		if (tg)
			t &= wk_schema_types(c, tg, depth + 1);
	}
	const json_t *any = json_object_get(s, "anyOf");
	if (!any)
		any = json_object_get(s, "oneOf");
	if (json_is_array(any)) {
		unsigned u = 0;
		for (size_t i = 0; i < json_array_size(any); i++)
			u |= wk_schema_types(c, json_array_get(any, i), depth + 1);
		t &= u;
	}
	return t;
}

/* ---- allOf: merging schemas -------------------------------------------------------------------- */

json_t *wk_schema_own(struct sc *c, json_t *v)
{
	if (v && json_array_append_new(c->owned, v) == 0)
		return v;
	return NULL;
}

static json_t *all_of2(struct sc *c, const json_t *a, const json_t *b)
{
	if (!a || json_is_true(a))
		return (json_t *)b;
	if (!b || json_is_true(b))
		return (json_t *)a;
	if (json_is_false(a) || json_is_false(b))
		return json_false();
	return wk_schema_own(c, json_pack("{s:[OO]}", "allOf", a, b));
}

static int merge_into(struct sc *c, json_t *acc, const json_t *s, int depth);

/* acc (object) and s merged; -1 with c->st set when they cannot be. */
static int merge_key(struct sc *c, json_t *acc, const char *k, const json_t *v)
{
	json_t *old = json_object_get(acc, k);
	if (!old)
		return json_object_set(acc, k, (json_t *)v) ? (wk_schema_oom(c), -1) : 0;
	if (json_equal(old, (json_t *)v))
		return 0;
	if (!strcmp(k, "type")) {
		unsigned a = 0, b = 0;
		json_t *tmp = wk_schema_own(c, json_pack("{sO}", "type", old)), *tmp2 = wk_schema_own(c, json_pack("{sO}", "type", v));
		if (!tmp || !tmp2)
			return wk_schema_oom(c), -1;
		a = wk_schema_types(c, tmp, 0);
		b = wk_schema_types(c, tmp2, 0);
		unsigned t = a & b;
		json_t *arr = json_array();
		static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer", "number" };
		if (!wk_schema_own(c, arr))
			return wk_schema_oom(c), -1;
		if (t & 64)
			json_array_append_new(arr, json_string("number"));
		else if (t & 32)
			json_array_append_new(arr, json_string("integer"));
		for (unsigned i = 0; i < 5; i++)
			if (t & (1u << i))
				json_array_append_new(arr, json_string(N[i]));
		return json_object_set(acc, k, arr) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!strcmp(k, "required")) {
		json_t *u = wk_schema_own(c, json_deep_copy(old));
		if (!u || !json_is_array(v))
			return wk_schema_oom(c), -1;
		for (size_t i = 0; i < json_array_size(v); i++) {
			int dup = 0;
			for (size_t j = 0; j < json_array_size(u); j++)
				dup |= json_equal(json_array_get(u, j), json_array_get(v, i));
			if (!dup)
				json_array_append(u, json_array_get(v, i));
		}
		return json_object_set(acc, k, u) ? (wk_schema_oom(c), -1) : 0;
	}
	static const char *const MAXK[] = { "minimum", "exclusiveMinimum", "minLength", "minItems" };
	static const char *const MINK[] = { "maximum", "exclusiveMaximum", "maxLength", "maxItems" };
	for (int i = 0; i < 4; i++) {
		int is_max = !strcmp(k, MAXK[i]), is_min = !strcmp(k, MINK[i]);
		if ((is_max || is_min) && json_is_number(old) && json_is_number(v)) {
			double a = json_number_value(old), b = json_number_value(v);
			if ((is_max && b > a) || (is_min && b < a))
				return json_object_set(acc, k, (json_t *)v) ? (wk_schema_oom(c), -1) : 0;
			return 0;
		}
	}
	if (!strcmp(k, "enum") && json_is_array(old) && json_is_array(v)) {
		json_t *e = wk_schema_own(c, json_array());
		if (!e)
			return wk_schema_oom(c), -1;
		for (size_t i = 0; i < json_array_size(old); i++)
			for (size_t j = 0; j < json_array_size(v); j++)
				if (json_equal(json_array_get(old, i), json_array_get(v, j))) {
					json_array_append(e, json_array_get(old, i));
					break;
				}
		return json_object_set(acc, k, e) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!strcmp(k, "items") && json_is_object(old) && json_is_object(v)) {
		json_t *m = all_of2(c, old, v);
		return !m || json_object_set(acc, k, m) ? (wk_schema_oom(c), -1) : 0;
	}
	if ((!strcmp(k, "pattern") && json_is_string(v)) ||
	    (!strcmp(k, "$sluice_patterns") && json_is_array(v))) {
		/* both patterns must match: the string compiler intersects them */
		json_t *more = json_object_get(acc, "$sluice_patterns");
		json_t *u = wk_schema_own(c, more ? json_deep_copy(more) : json_array());
		if (!u)
			return wk_schema_oom(c), -1;
		if (json_is_string(v))
			json_array_append(u, (json_t *)v);
		else
			json_array_extend(u, (json_t *)v);
		return json_object_set(acc, "$sluice_patterns", u) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!strcmp(k, "$sluice_not_strings") && json_is_array(old) && json_is_array(v)) {
		json_t *u = wk_schema_own(c, json_deep_copy(old));
		if (!u || json_array_extend(u, (json_t *)v))
			return wk_schema_oom(c), -1;
		return json_object_set(acc, k, u) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!strcmp(k, "not")) {
		/* not a and not b: not (a or b) */
		json_t *m = wk_schema_own(c, json_pack("{s[OO]}", "anyOf", old, v));
		return !m || json_object_set(acc, k, m) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!strcmp(k, "patternProperties") && json_is_object(old) && json_is_object(v)) {
		/* every pattern of both; one named in both: both schemas */
		json_t *u = wk_schema_own(c, json_deep_copy(old));
		const char *pk;
		json_t *ps;
		if (!u)
			return wk_schema_oom(c), -1;
		json_object_foreach((json_t *)v, pk, ps) {
			json_t *o = json_object_get(u, pk), *m = o ? all_of2(c, o, ps) : ps;
			if (!m || json_object_set(u, pk, m))
				return wk_schema_oom(c), -1;
		}
		return json_object_set(acc, k, u) ? (wk_schema_oom(c), -1) : 0;
	}
	if ((is_annotation(k) && strcmp(k, "format")) || !is_assertion(k))
		return 0; /* annotations and unknown keywords: the first one stays */
	wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported: allOf branches that disagree on '%s'", k);
	return -1;
}

/* properties and additionalProperties of two object schemas, exactly. */
static int merge_props(struct sc *c, json_t *acc, const json_t *s)
{
	const json_t *pa = json_object_get(acc, "properties"), *pb = json_object_get(s, "properties");
	const json_t *aa = json_object_get(acc, "additionalProperties"), *ab = json_object_get(s, "additionalProperties");
	if (!pb && !ab)
		return 0;
	json_t *props = wk_schema_own(c, json_object());
	if (!props)
		return wk_schema_oom(c), -1;
	const char *k;
	json_t *v;
	if (pa)
		json_object_foreach((json_t *)pa, k, v) {
			const json_t *o = pb ? json_object_get(pb, k) : NULL;
			json_t *m = all_of2(c, v, o ? o : ab);
			if (!m || json_object_set(props, k, m))
				return wk_schema_oom(c), -1;
		}
	if (pb)
		json_object_foreach((json_t *)pb, k, v) {
			if (pa && json_object_get(pa, k))
				continue;
			json_t *m = all_of2(c, aa, v);
			if (!m || json_object_set(props, k, m))
				return wk_schema_oom(c), -1;
		}
	if (json_object_set(acc, "properties", props))
		return wk_schema_oom(c), -1;
	if (aa || ab) {
		json_t *m = all_of2(c, aa, ab);
		if (!m || json_object_set(acc, "additionalProperties", m))
			return wk_schema_oom(c), -1;
	}
	return 0;
}

static int merge_into(struct sc *c, json_t *acc, const json_t *s, int depth)
{
	if (depth > 32)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s", "allOf/$ref nested too deeply to merge"), -1;
	if (json_is_true(s))
		return 0;
	if (json_is_false(s)) {
		/* false: an empty enum, which matches nothing */
		return json_object_set_new(acc, "enum", json_array()) ? (wk_schema_oom(c), -1) : 0;
	}
	if (!json_is_object(s))
		return wk_schema_fail(c, CM_EINVAL, "%s", "expected a schema (an object or a boolean)"), -1;
	const json_t *ref = json_object_get(s, "$ref");
	if (ref) {
		if (!json_is_string(ref))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'$ref': expected a string"), -1;
		const json_t *t = wk_schema_resolve(c, json_string_value(ref));
		if (!t || merge_into(c, acc, t, depth + 1) < 0)
			return -1;
	}
	const json_t *all = json_object_get(s, "allOf");
	if (all) {
		if (!json_is_array(all))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'allOf': expected an array"), -1;
		for (size_t i = 0; i < json_array_size(all); i++)
			if (merge_into(c, acc, json_array_get(all, i), depth + 1) < 0)
				return -1;
	}
	if (merge_props(c, acc, s))
		return -1;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		if (!strcmp(k, "$ref") || !strcmp(k, "allOf") || !strcmp(k, "properties") ||
		    !strcmp(k, "additionalProperties"))
			continue;
		if ((!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) && json_object_get(acc, k)) {
			/* two lists of alternatives: their pairwise conjunctions */
			const json_t *A = json_object_get(acc, k);
			if (!json_is_array(v) || json_array_size(A) * json_array_size(v) > 256)
				return wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported: allOf of two large '%s' lists", k), -1;
			json_t *x = wk_schema_own(c, json_array());
			if (!x)
				return wk_schema_oom(c), -1;
			for (size_t i = 0; i < json_array_size(A); i++)
				for (size_t j = 0; j < json_array_size(v); j++) {
					json_t *m = all_of2(c, json_array_get(A, i), json_array_get(v, j));
					if (!m || json_array_append(x, m))
						return wk_schema_oom(c), -1;
				}
			if (json_object_set(acc, k, x))
				return wk_schema_oom(c), -1;
			continue;
		}
		if (merge_key(c, acc, k, v))
			return -1;
	}
	return 0;
}

const json_t *wk_schema_flatten(struct sc *c, const json_t *s)
{
	if (!json_is_object(s) || (!json_object_get(s, "allOf") && !json_object_get(s, "$ref")))
		return s;
	json_t *m = wk_schema_own(c, json_object());
	if (!m || merge_into(c, m, s, 0) < 0)
		return m ? NULL : (wk_schema_oom(c), NULL);
	return m;
}

/* ---- one schema node ----------------------------------------------------------------------------- */

static struct wk_gx *sc_body(struct sc *c, const json_t *s);

static int has_assertions(const json_t *s, const char *skip1, const char *skip2)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		(void)v;
		if (strcmp(k, skip1) && strcmp(k, skip2) && !is_annotation(k))
			return 1;
	}
	return 0;
}

static struct wk_gx *alternatives(struct sc *c, const json_t *s, const char *kw)
{
	struct wk_gram_b *b = c->b;
	const json_t *list = json_object_get(s, kw);
	if (!json_is_array(list))
		return wk_schema_fail(c, CM_EINVAL, "'%s': expected an array", kw);
	size_t n = json_array_size(list);
	int one = !strcmp(kw, "oneOf");
	json_t *sib = NULL;
	if (has_assertions(s, kw, "")) {
		sib = wk_schema_own(c, json_deep_copy(s));
		if (!sib || json_object_del(sib, kw))
			return wk_schema_oom(c);
	}
	/* each branch with its siblings; for oneOf also merged alone (its
	 * references and allOf resolved) to judge exclusivity, but compiled
	 * as written unless it had to be narrowed (a recursive reference
	 * stays a reference) */
	json_t *br_all = wk_schema_own(c, json_array()), *res = wk_schema_own(c, json_array());
	if (!br_all || !res)
		return wk_schema_oom(c);
	for (size_t i = 0; i < n; i++) {
		const json_t *br = json_array_get(list, i), *r = br;
		if (sib || one) {
			json_t *m = wk_schema_own(c, json_object());
			if (!m || (sib && merge_into(c, m, sib, 0) < 0) || merge_into(c, m, br, 0) < 0)
				return c->st == CM_OK ? wk_schema_oom(c) : NULL;
			r = m;
			if (sib)
				br = m;
		}
		if (json_array_append(br_all, (json_t *)br) || json_array_append(res, (json_t *)r))
			return wk_schema_oom(c);
	}
	for (size_t i = 0; one && i < n; i++) {
		const json_t *bi = json_array_get(res, i), *cur = bi;
		for (size_t j = 0; j < n && cur; j++) {
			const json_t *bj = json_array_get(res, j);
			if (j != i && !wk_schema_disjoint(c, bi, bj, 0))
				cur = wk_schema_exclude(c, cur, bi, bj);
		}
		if (!cur)
			return c->st != CM_OK ? NULL
					      : wk_schema_fail(c, CM_EUNSUPPORTED, "%s",
							       "unsupported: oneOf whose branches can match the same value");
		if (cur != bi && json_array_set(br_all, i, (json_t *)cur))
			return wk_schema_oom(c);
	}
	struct wk_gx *alt = wk_gx_nothing(b);
	for (size_t i = 0; i < n; i++) {
		const json_t *br = json_array_get(br_all, i);
		char seg[48];
		snprintf(seg, sizeof(seg), "%.8s/%zu", kw, i);
		struct wk_gx *x = wk_schema_node(c, br, seg);
		if (!x)
			return NULL;
		alt = wk_gx_alt2(b, alt, x);
	}
	return alt ? alt : wk_schema_oom(c);
}

static struct wk_gx *sc_body(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	if (json_is_true(s))
		return wk_schema_any_value(c);
	if (json_is_false(s))
		return wk_gx_nothing(b);
	if (!json_is_object(s))
		return wk_schema_fail(c, CM_EINVAL, "%s", "expected a schema (an object or a boolean)");
	/* not and dependencies in terms of the keywords below */
	const json_t *rw = wk_schema_rewrite(c, s);
	if (!rw)
		return NULL;
	if (rw != s)
		return sc_body(c, rw);
	/* listed values (own, or an allOf branch's): exactly those that validate */
	const json_t *cands = NULL;
	if (json_object_get(s, "enum") || json_object_get(s, "const")) {
		cands = s;
	} else {
		const json_t *all = json_object_get(s, "allOf");
		for (size_t i = 0; i < json_array_size(all) && !cands; i++) {
			const json_t *br = json_array_get(all, i);
			if (json_is_object(br) && (json_object_get(br, "enum") || json_object_get(br, "const")))
				cands = br;
		}
	}
	if (cands) {
		const json_t *co = json_object_get(cands, "const"), *en = json_object_get(cands, "enum");
		size_t n = co ? 1 : json_array_size(en);
		struct wk_gx *alt = wk_gx_nothing(b);
		int unknown = 0;
		for (size_t i = 0; i < n && !unknown; i++) {
			const json_t *v = co ? co : json_array_get(en, i);
			int e = wk_schema_eval(c, s, v);
			if (e < 0)
				unknown = 1;
			else if (e)
				alt = wk_gx_alt2(b, alt, wk_schema_literal(c, v));
		}
		if (!unknown)
			return alt ? alt : wk_schema_oom(c);
	}
	const json_t *ref = json_object_get(s, "$ref");
	if (json_object_get(s, "allOf") || (ref && has_assertions(s, "$ref", ""))) {
		json_t *m = wk_schema_own(c, json_object());
		if (!m || merge_into(c, m, s, 0) < 0)
			return c->st == CM_OK ? wk_schema_oom(c) : NULL;
		return sc_body(c, m);
	}
	if (ref) {
		if (!json_is_string(ref))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'$ref': expected a string");
		const json_t *t = wk_schema_resolve(c, json_string_value(ref));
		return t ? wk_schema_node(c, t, "$ref") : NULL;
	}
	if (check_keywords(c, s))
		return NULL;
	if (json_object_get(s, "anyOf"))
		return alternatives(c, s, "anyOf");
	if (json_object_get(s, "oneOf"))
		return alternatives(c, s, "oneOf");
	unsigned types = T_ALL;
	const json_t *ty = json_object_get(s, "type");
	if (ty) {
		if (!json_is_string(ty) && !json_is_array(ty))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'type': expected a string or an array of strings");
		json_t *tmp = wk_schema_own(c, json_pack("{sO}", "type", ty));
		if (!tmp)
			return wk_schema_oom(c);
		types = wk_schema_types(c, tmp, 0);
	}
	const json_t *en = json_object_get(s, "enum"), *co = json_object_get(s, "const");
	if (en || co) {
		if (en && !json_is_array(en))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'enum': expected an array");
		struct wk_gx *alt = wk_gx_nothing(b);
		size_t n = co ? 1 : json_array_size(en);
		for (size_t i = 0; i < n; i++) {
			const json_t *v = co ? co : json_array_get(en, i);
			if (en && co && !json_equal((json_t *)v, json_array_get(en, i)))
				continue;
			unsigned vt = value_types(v);
			if (!(vt & types) && !(vt == 32 && (types & 64)))
				continue;
			alt = wk_gx_alt2(b, alt, wk_schema_literal(c, v));
		}
		return alt ? alt : wk_schema_oom(c);
	}
	struct wk_gx *alt = wk_gx_nothing(b);
	if (types & 1)
		alt = wk_gx_alt2(b, alt, wk_gx_str(b, "null"));
	if (types & 2)
		alt = wk_gx_alt2(b, alt, wk_gx_alt2(b, wk_gx_str(b, "true"), wk_gx_str(b, "false")));
	if (types & 4)
		alt = wk_gx_alt2(b, alt, wk_schema_object(c, s));
	if (types & 8)
		alt = wk_gx_alt2(b, alt, wk_schema_array(c, s));
	if (types & 16)
		alt = wk_gx_alt2(b, alt, wk_schema_string(c, s));
	if (types & 96)
		alt = wk_gx_alt2(b, alt, wk_schema_number(c, s, !(types & 64)));
	if (c->st != CM_OK)
		return NULL;
	return alt ? alt : wk_schema_oom(c);
}

static uint32_t sc_node_rule(struct sc *c, const json_t *s, const char *seg)
{
	for (size_t i = 0; i < c->n_memo; i++)
		if (c->memo[i].node == s)
			return c->memo[i].rule;
	if (c->depth >= c->o.max_depth) {
		wk_schema_fail(c, CM_ELIMIT, "%s", "schema nested deeper than worker.grammar_schema_depth");
		return UINT32_MAX;
	}
	if (c->n_memo == c->cap_memo) {
		size_t cap = c->cap_memo ? 2 * c->cap_memo : 64;
		struct memo *m = cm_reallocarray(c->memo, cap, sizeof(*m));
		if (!m) {
			wk_schema_oom(c);
			return UINT32_MAX;
		}
		c->memo = m;
		c->cap_memo = cap;
	}
	uint32_t r = wk_gram_rule(c->b, seg[0] ? seg : "root", 1);
	if (r == UINT32_MAX) {
		wk_schema_oom(c);
		return r;
	}
	c->memo[c->n_memo++] = (struct memo){ .node = s, .rule = r };
	size_t plen = strlen(c->path);
	snprintf(c->path + plen, sizeof(c->path) - plen, "%s%s", seg[0] ? "/" : "", seg);
	c->depth++;
	struct wk_gx *body = sc_body(c, s);
	c->depth--;
	c->path[plen] = 0;
	if (!body)
		return UINT32_MAX;
	wk_gram_set_body(c->b, r, body);
	return r;
}

struct wk_gx *wk_schema_node(struct sc *c, const json_t *s, const char *seg)
{
	uint32_t r = sc_node_rule(c, s, seg);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

void wk_schema_opts_default(struct wk_schema_opts *o)
{
	o->compact = 0;
	o->max_depth = 64;
}

enum cm_status wk_schema_compile(struct wk_gram_b *b, const json_t *schema,
				 const struct wk_schema_opts *o, uint32_t *root, char *err, size_t err_len)
{
	struct sc c = { .b = b, .root = schema, .err = err, .err_len = err_len, .st = CM_OK };
	if (o)
		c.o = *o;
	else
		wk_schema_opts_default(&c.o);
	c.owned = json_array();
	c.strings = json_object();
	if (!c.owned || !c.strings) {
		json_decref(c.owned);
		json_decref(c.strings);
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	}
	*root = sc_node_rule(&c, schema, "");
	if (*root == UINT32_MAX && c.st == CM_OK)
		wk_schema_oom(&c);
	if (c.st == CM_OK && wk_gram_b_broken(b))
		wk_schema_oom(&c);
	json_decref(c.owned);
	json_decref(c.strings);
	cm_free(c.memo);
	return c.st;
}
