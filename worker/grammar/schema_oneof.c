/*
 * schema_oneof.c - oneOf: "exactly one branch matches".  Two branches that
 * no value can match both are compiled as alternatives (disjoint: types,
 * listed values, a property one of them requires whose schemas are
 * disjoint, a required name the other's additionalProperties: false
 * refuses).  Otherwise a branch is narrowed until it cannot match the
 * other: the JSON types the other accepts whole are removed from it, and
 * for objects a name the other requires (and it does not) is forbidden in
 * it (properties: {name: false}).  Narrowing only removes documents, so
 * every output is valid; what cannot be narrowed is refused, never
 * approximated the other way.
 */
#include "worker/grammar/schema_internal.h"
#include "worker/grammar/length.h"
#include "worker/grammar/regex.h"

#include <string.h>

/* s with a leading local $ref followed (no siblings considered), or s. */
static const json_t *deref(struct sc *c, const json_t *s)
{
	for (int i = 0; i < 8 && json_is_object(s); i++) {
		const json_t *r = json_object_get(s, "$ref");
		if (!json_is_string(r))
			break;
		enum cm_status save = c->st;
		const json_t *t = wk_schema_resolve(c, json_string_value(r));
		c->st = save;
		if (!t)
			break;
		s = t;
	}
	return s;
}

/* The values a schema allows when it lists them (enum / const, or
 * alternatives that all list theirs), or NULL. */
static json_t *value_set(struct sc *c, const json_t *s, int depth)
{
	s = deref(c, s);
	if (!json_is_object(s) || depth > 8)
		return NULL;
	const json_t *co = json_object_get(s, "const"), *en = json_object_get(s, "enum");
	if (co)
		return json_pack("[O]", co);
	if (json_is_array(en))
		return json_incref((json_t *)en);
	const json_t *alts = json_object_get(s, "anyOf");
	if (!alts)
		alts = json_object_get(s, "oneOf");
	if (!json_is_array(alts) || json_array_size(alts) == 0)
		return NULL;
	json_t *u = json_array();
	for (size_t i = 0; u && i < json_array_size(alts); i++) {
		json_t *v = value_set(c, json_array_get(alts, i), depth + 1);
		if (!v) {
			json_decref(u);
			return NULL;
		}
		json_array_extend(u, v);
		json_decref(v);
	}
	return u;
}

/* 1 when no listed value of vs validates against s. */
static int none_valid(struct sc *c, const json_t *vs, const json_t *s)
{
	for (size_t i = 0; i < json_array_size(vs); i++) {
		enum cm_status save = c->st;
		int e = wk_schema_eval(c, s, json_array_get(vs, i));
		c->st = save;
		if (e != 0)
			return 0;
	}
	return 1;
}

/* Strings: two patterns no string matches both. */
static int patterns_disjoint(const json_t *a, const json_t *b)
{
	const json_t *pa = json_object_get(a, "pattern"), *pb = json_object_get(b, "pattern");
	if (!json_is_string(pa) || !json_is_string(pb))
		return 0;
	struct wk_gram_b *g = wk_gram_b_new(NULL);
	struct wk_gx *x = NULL, *y = NULL;
	char err[128];
	int rc = 0;
	if (g && wk_regex_compile(g, json_string_value(pa), json_string_length(pa), wk_regex_plain_class, NULL,
				  &x, err, sizeof(err)) == CM_OK &&
	    wk_regex_compile(g, json_string_value(pb), json_string_length(pb), wk_regex_plain_class, NULL, &y,
			     err, sizeof(err)) == CM_OK)
		rc = wk_gx_disjoint(g, x, y) == 1;
	wk_gram_b_free(g);
	return rc;
}

/* Arrays: items no value matches both, and one of them has an item. */
static int arrays_disjoint(struct sc *c, const json_t *a, const json_t *b, int depth)
{
	const json_t *ia = json_object_get(a, "items"), *ib = json_object_get(b, "items");
	const json_t *ma = json_object_get(a, "minItems"), *mb = json_object_get(b, "minItems");
	if (!ia || !ib || json_is_array(ia) || json_is_array(ib))
		return 0;
	if (!(json_is_number(ma) && json_number_value(ma) >= 1) &&
	    !(json_is_number(mb) && json_number_value(mb) >= 1))
		return 0;
	return wk_schema_disjoint(c, ia, ib, depth + 1);
}

static int in_list(const json_t *list, const char *name)
{
	for (size_t i = 0; i < json_array_size(list); i++) {
		const json_t *k = json_array_get(list, i);
		if (json_is_string(k) && !strcmp(json_string_value(k), name))
			return 1;
	}
	return 0;
}

/* 1 when b's additionalProperties: false refuses some name a requires. */
static int refuses_required(const json_t *a, const json_t *b)
{
	const json_t *ra = json_object_get(a, "required"), *pb = json_object_get(b, "properties");
	if (!json_is_false(json_object_get(b, "additionalProperties")) ||
	    json_object_get(b, "patternProperties"))
		return 0;
	for (size_t i = 0; i < json_array_size(ra); i++) {
		const json_t *k = json_array_get(ra, i);
		if (json_is_string(k) && !(pb && json_object_get(pb, json_string_value(k))))
			return 1;
	}
	return 0;
}

/* Objects: a property one of them requires, with disjoint schemas. */
static int objects_disjoint(struct sc *c, const json_t *a, const json_t *b, int depth)
{
	const json_t *pa = json_object_get(a, "properties"), *pb = json_object_get(b, "properties");
	const json_t *req[2] = { json_object_get(a, "required"), json_object_get(b, "required") };
	if (refuses_required(a, b) || refuses_required(b, a))
		return 1;
	for (int r = 0; r < 2; r++)
		for (size_t i = 0; i < json_array_size(req[r]); i++) {
			const json_t *k = json_array_get(req[r], i);
			if (!json_is_string(k))
				continue;
			const json_t *sa = pa ? json_object_get(pa, json_string_value(k)) : NULL;
			const json_t *sb = pb ? json_object_get(pb, json_string_value(k)) : NULL;
			if (sa && sb && wk_schema_disjoint(c, sa, sb, depth + 1))
				return 1;
		}
	return 0;
}

int wk_schema_disjoint(struct sc *c, const json_t *a, const json_t *b, int depth)
{
	enum cm_status save = c->st;
	a = deref(c, a);
	b = deref(c, b);
	if (depth > 4 || !json_is_object(a) || !json_is_object(b))
		return json_is_false(a) || json_is_false(b);
	/* allOf and references with siblings: judged merged */
	const json_t *fa = wk_schema_flatten(c, a), *fb = wk_schema_flatten(c, b);
	c->st = save;
	if (!fa || !fb)
		return 0;
	a = fa;
	b = fb;
	unsigned ta = wk_schema_types(c, a, 0), tb = wk_schema_types(c, b, 0);
	if (!(ta & tb))
		return 1;
	json_t *va = value_set(c, a, 0), *vb = value_set(c, b, 0);
	if ((va && !vb && none_valid(c, va, b)) || (vb && !va && none_valid(c, vb, a))) {
		json_decref(va);
		json_decref(vb);
		return 1;
	}
	int none_common = -1;
	if (va && vb) {
		none_common = 1;
		for (size_t i = 0; i < json_array_size(va) && none_common; i++)
			for (size_t j = 0; j < json_array_size(vb); j++)
				if (json_equal(json_array_get(va, i), json_array_get(vb, j))) {
					none_common = 0;
					break;
				}
	}
	json_decref(va);
	json_decref(vb);
	if (none_common == 1)
		return 1;
	if ((ta & tb) == 8)
		return arrays_disjoint(c, a, b, depth);
	if ((ta & tb) == 16)
		return patterns_disjoint(a, b);
	return (ta & tb) == 4 && objects_disjoint(c, a, b, depth);
}

/* 1 when s says nothing about values that are not objects: it accepts
 * every value of each other type its "type" allows. */
static int only_object_keywords(const json_t *s)
{
	static const char *const K[] = { "type", "properties", "required", "additionalProperties",
					 "patternProperties",
					 "title", "description", "$comment", "default", "examples",
					 "$schema", "$id", "id", "definitions", "$defs", "deprecated",
					 "readOnly", "writeOnly" };
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		size_t i = 0;
		(void)v;
		while (i < sizeof(K) / sizeof(K[0]) && strcmp(K[i], k))
			i++;
		if (i == sizeof(K) / sizeof(K[0]))
			return 0;
	}
	return 1;
}

static json_t *type_list(unsigned t)
{
	static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer" };
	json_t *a = json_array();
	for (unsigned i = 0; a && i < 6; i++)
		if (t & (1u << i))
			json_array_append_new(a, json_string(N[i]));
	if (a && (t & 64))
		json_array_append_new(a, json_string("number"));
	return a;
}

const json_t *wk_schema_exclude(struct sc *c, const json_t *cur, const json_t *a, const json_t *b)
{
	if (!json_is_object(cur) || !json_is_object(a) || !json_is_object(b))
		return NULL;
	unsigned ta = wk_schema_types(c, cur, 0), tb = wk_schema_types(c, b, 0);
	unsigned common = ta & tb, other = common & ~4u;
	json_t *out = wk_schema_own(c, json_deep_copy(cur));
	if (!out)
		return NULL;
	if (other) {
		/* the types b accepts whole leave a; numbers that are not
		 * integers cannot be named without the integers ("number"),
		 * so removing the integers removes them too */
		if (!only_object_keywords(b) || json_object_get(b, "enum") || json_object_get(b, "const"))
			return NULL;
		if ((other & 32) && (ta & 64))
			other |= 64;
		json_t *tl = type_list(ta & ~other);
		if (!tl || json_object_set_new(out, "type", tl))
			return NULL;
	}
	if (!(common & 4) || objects_disjoint(c, cur, b, 0))
		return out;
	/* a name b requires and a does not: forbidden in a */
	const json_t *rb = json_object_get(b, "required"), *ra = json_object_get(cur, "required");
	for (size_t i = 0; i < json_array_size(rb); i++) {
		const json_t *k = json_array_get(rb, i);
		if (!json_is_string(k) || in_list(ra, json_string_value(k)))
			continue;
		json_t *props = json_object_get(out, "properties");
		json_t *np = props ? json_deep_copy(props) : json_object();
		if (!np || !json_is_object(np) || json_object_set_new(np, json_string_value(k), json_false()) ||
		    json_object_set_new(out, "properties", np))
			return NULL;
		return out;
	}
	return NULL;
}
