/*
 * schema_rewrite.c - keywords the compiler has no grammar for, rewritten
 * exactly into ones it has:
 *
 *   dependencies / dependentRequired  d: [r...]  ->  anyOf [{d absent}, {required: [d, r...]}]
 *   dependencies / dependentSchemas   d: S       ->  anyOf [{d absent}, {required: [d]} and S]
 *   not T  (T of: booleans, {}, type, required, type + required, anyOf
 *           of those)                            ->  its complement
 *   if I then T else E (I one of those)          ->  anyOf [I and T, not I and E]
 *
 * where "d absent" is {properties: {d: false}} (vacuous for values that
 * are not objects, as dependencies are).  A `not` of anything else is
 * left alone (the keyword check refuses it, naming it).  The node is
 * rebuilt as {allOf: [the node without the keyword, the rewrites]}, which
 * the allOf merge turns into one schema (alternatives multiply).
 */
#include <string.h>

#include "worker/grammar/schema_internal.h"

static const char *const TYPES[] = { "null", "boolean", "object", "array", "string", "integer",
				     "number" };

static int only_keys(const json_t *s, const char *const *keys, size_t n)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		size_t i = 0;
		(void)v;
		while (i < n && strcmp(keys[i], k))
			i++;
		if (i == n && strcmp(k, "title") && strcmp(k, "description") && strcmp(k, "$comment"))
			return 0;
	}
	return 1;
}

/* {"type": [every type but those of t]} (number and integer: a number
 * that is not an integer cannot be named alone, so "not integer" keeps
 * only what is neither). */
static json_t *type_complement(const json_t *t)
{
	int out[7] = { 1, 1, 1, 1, 1, 1, 1 };
	json_t *list = json_array();
	for (size_t i = 0; i < (json_is_array(t) ? json_array_size(t) : 1); i++) {
		const json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
		if (!json_is_string(e)) {
			json_decref(list);
			return NULL;
		}
		for (int k = 0; k < 7; k++)
			if (!strcmp(TYPES[k], json_string_value(e)))
				out[k] = 0;
	}
	if (!out[6]) /* not number: no integer either */
		out[5] = 0;
	if (!out[5] && out[6]) /* not integer: "number" would bring them back */
		out[6] = 0;
	for (int k = 0; k < 7 && list; k++)
		if (out[k])
			json_array_append_new(list, json_string(TYPES[k]));
	if (!list)
		return NULL;
	if (json_array_size(list) == 0) {
		json_decref(list);
		return json_false();
	}
	return json_pack("{so}", "type", list);
}

/* anyOf [{type: object, properties: {r: false}} ...] or NULL */
static json_t *some_absent(const json_t *req)
{
	json_t *any = json_array();
	for (size_t i = 0; any && i < json_array_size(req); i++) {
		const json_t *r = json_array_get(req, i);
		if (!json_is_string(r)) {
			json_decref(any);
			return NULL;
		}
		json_array_append_new(any, json_pack("{ss s{sb}}", "type", "object", "properties",
						     json_string_value(r), 0));
	}
	return any;
}

/* The complement of t as a schema (new reference), NULL when not known. */
static json_t *negate(const json_t *t, int depth)
{
	static const char *const K_TYPE[] = { "type" }, *const K_REQ[] = { "required" },
			  *const K_TREQ[] = { "type", "required" }, *const K_ANY[] = { "anyOf" };
	if (json_is_true(t) || (json_is_object(t) && only_keys(t, NULL, 0)))
		return json_false();
	if (json_is_false(t))
		return json_true();
	if (!json_is_object(t) || depth > 8)
		return NULL;
	const json_t *ty = json_object_get(t, "type"), *req = json_object_get(t, "required");
	if (ty && only_keys(t, K_TYPE, 1))
		return type_complement(ty);
	if (json_is_array(req) && json_array_size(req) &&
	    (only_keys(t, K_REQ, 1) || (only_keys(t, K_TREQ, 2) && json_is_string(ty) &&
					!strcmp(json_string_value(ty), "object")))) {
		/* not an object with all of them: not an object, or one absent */
		json_t *obj = json_string("object");
		json_t *any = some_absent(req), *nonobj = obj ? type_complement(obj) : NULL;
		json_decref(obj);
		if (!any || !nonobj) {
			json_decref(any);
			json_decref(nonobj);
			return NULL;
		}
		json_array_append_new(any, nonobj);
		return json_pack("{so}", "anyOf", any);
	}
	/* listed strings: any other value (strings through a pattern of
	 * every other string, "$sluice_not_strings") */
	const json_t *en = json_object_get(t, "enum"), *co = json_object_get(t, "const");
	static const char *const K_EN[] = { "enum", "type" }, *const K_CO[] = { "const", "type" };
	if ((json_is_array(en) && only_keys(t, K_EN, 2)) || (co && only_keys(t, K_CO, 2))) {
		json_t *vals = co ? json_pack("[O]", co) : json_incref((json_t *)en);
		int strings = vals != NULL;
		for (size_t i = 0; strings && i < json_array_size(vals); i++)
			strings = json_is_string(json_array_get(vals, i));
		if (ty && !(json_is_string(ty) && !strcmp(json_string_value(ty), "string")))
			strings = 0;
		json_t *obj = strings ? json_string("string") : NULL;
		json_t *other = obj ? type_complement(obj) : NULL;
		json_t *r = other ? json_pack("{s[o{sssO}]}", "anyOf", other, "type", "string",
					      "$sluice_not_strings", vals) : NULL;
		if (!r)
			json_decref(other);
		json_decref(obj);
		json_decref(vals);
		if (r)
			return r;
	}
	/* properties: one of them present with a value its schema refuses */
	const json_t *props = json_object_get(t, "properties");
	static const char *const K_PR[] = { "properties", "type" };
	if (json_is_object(props) && json_object_size(props) && only_keys(t, K_PR, 2) &&
	    (!ty || (json_is_string(ty) && !strcmp(json_string_value(ty), "object")))) {
		json_t *alts = json_array();
		const char *pk;
		json_t *pv;
		json_object_foreach((json_t *)props, pk, pv) {
			json_t *n = negate(pv, depth + 1);
			if (!n || !alts) {
				json_decref(n);
				json_decref(alts);
				return NULL;
			}
			json_array_append_new(alts, json_pack("{sss[s]s{so}}", "type", "object", "required", pk,
							      "properties", pk, n));
		}
		if (ty) /* {type: object, properties}: values that are not objects fail it too */
			json_array_append_new(alts, type_complement(ty));
		return json_pack("{so}", "anyOf", alts);
	}
	const json_t *any = json_object_get(t, "anyOf");
	if (json_is_array(any) && only_keys(t, K_ANY, 1)) {
		json_t *all = json_array();
		for (size_t i = 0; all && i < json_array_size(any); i++) {
			json_t *n = negate(json_array_get(any, i), depth + 1);
			if (!n) {
				json_decref(all);
				return NULL;
			}
			json_array_append_new(all, n);
		}
		return all ? json_pack("{so}", "allOf", all) : NULL;
	}
	return NULL;
}

/* anyOf [{d absent}, {required: [d, ...]} (and S)] for one dependency. */
static json_t *dependency(const char *d, const json_t *v)
{
	json_t *absent = json_pack("{s{sb}}", "properties", d, 0), *present = NULL;
	if (json_is_array(v)) {
		json_t *req = json_pack("[s]", d);
		for (size_t i = 0; req && i < json_array_size(v); i++) {
			if (!json_is_string(json_array_get(v, i))) {
				json_decref(req);
				req = NULL;
				break;
			}
			json_array_append(req, json_array_get(v, i));
		}
		present = req ? json_pack("{so}", "required", req) : NULL;
	} else if (json_is_object(v) || json_is_boolean(v)) {
		present = json_pack("{s[{s[s]}O]}", "allOf", "required", d, v);
	}
	if (!absent || !present) {
		json_decref(absent);
		json_decref(present);
		return NULL;
	}
	return json_pack("{s[oo]}", "anyOf", absent, present);
}

/* x (stolen; NULL: nothing to add) joins the rewrites and the keywords it
 * replaces leave the rest (a copy of s made on first use); -1 without
 * memory. */
static int add(json_t **all, json_t **rest, const json_t *s, json_t *x, const char *const *drop,
	       size_t n_drop)
{
	if (!x)
		return 0;
	if ((!*all && !(*all = json_array())) || (!*rest && !(*rest = json_deep_copy(s)))) {
		json_decref(x);
		return -1;
	}
	if (json_array_append_new(*all, x)) /* frees x */
		return -1;
	for (size_t i = 0; i < n_drop; i++)
		json_object_del(*rest, drop[i]);
	return 0;
}

const json_t *wk_schema_rewrite(struct sc *c, const json_t *s)
{
	static const char *const DEP[] = { "dependencies", "dependentRequired", "dependentSchemas" };
	static const char *const IF[] = { "if", "then", "else" }, *const NOT[] = { "not" };
	if (!json_is_object(s))
		return s;
	json_t *rest = NULL, *all = NULL;
	for (size_t i = 0; i < 3; i++) {
		const json_t *deps = json_object_get(s, DEP[i]);
		const char *d;
		json_t *v;
		if (!json_is_object(deps))
			continue;
		json_object_foreach((json_t *)deps, d, v) {
			json_t *x = dependency(d, v);
			if (!x || add(&all, &rest, s, x, DEP + i, 1))
				goto keep;
		}
	}
	/* if I then T else E: (I and T) or (not I and E) */
	const json_t *cond = json_object_get(s, "if");
	json_t *ni = cond ? negate(cond, 0) : NULL;
	if (ni) {
		const json_t *th = json_object_get(s, "then"), *el = json_object_get(s, "else");
		json_t *x = json_pack("{s[{s[OO]}{s[oO]}]}", "anyOf", "allOf", cond, th ? th : json_true(),
				      "allOf", ni, el ? el : json_true());
		if (!x) {
			json_decref(ni);
			goto keep;
		}
		if (add(&all, &rest, s, x, IF, 3))
			goto keep;
	}
	const json_t *no = json_object_get(s, "not");
	if (no && add(&all, &rest, s, negate(no, 0), NOT, 1))
		goto keep;
	if (!all)
		return s;
	if (json_array_insert_new(all, 0, rest)) {
		json_decref(all);
		return wk_schema_oom(c), NULL;
	}
	json_t *out = wk_schema_own(c, json_pack("{so}", "allOf", all));
	return out ? out : (wk_schema_oom(c), NULL);
keep:
	json_decref(rest);
	json_decref(all);
	return s;
}
