/*
 * schema_object.c - JSON objects of a schema: properties in the schema's
 * order (required or optional), additionalProperties (extra names that
 * differ from the listed ones), patternProperties with one pattern.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/grammar/length.h"
#include "worker/grammar/schema_internal.h"

/* ---- objects ------------------------------------------------------------------------------ */


/* String content for names not in keys[lo..hi) that share the first
 * `depth` code points; keys are sorted code point arrays. */
/* A property name (with quotes) that is none of names[0..n): the names'
 * trie in JSON string content (length.c); the closing quote is here, so
 * the "key" rule keeps its frame (a call in last position would be a tail
 * call and hide the rule from the mask cache). */
static struct wk_gx *other_key(struct sc *c, const char *const *names, size_t n)
{
	struct wk_gram_b *b = c->b;
	if (n == 0)
		return wk_schema_any_string(c);
	struct wk_gx *x = wk_gx_other_names(b, names, n, wk_schema_json_class, NULL,
					    wk_gx_rep(b, wk_schema_jchar(c), 0, WK_GRAM_INF));
	if (!x)
		return wk_gram_b_broken(b) ? wk_schema_oom(c)
					   : wk_schema_fail(c, CM_ELIMIT, "%s",
							    "too many property names sharing a prefix");
	x = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "\""), x, wk_gx_str(b, "\"") }, 3);
	return x ? x : wk_schema_oom(c);
}

struct prop {
	const char *name;
	const json_t *schema;
	int required;
};

/* A pattern every name matches ("", ".*", "^.*$" ...). */
static int universal_pattern(const char *re)
{
	static const char *const U[] = { "", ".*", "^.*", ".*$", "^.*$", "^(.*)$", "(.*)" };
	for (size_t i = 0; i < sizeof(U) / sizeof(U[0]); i++)
		if (!strcmp(U[i], re))
			return 1;
	return 0;
}

/*
 * patternProperties (one pattern): *pk its pattern and *ps its schema, or
 * NULL when absent.  Names that match it are written with that schema;
 * a listed property whose name matches keeps both schemas (allOf).  The
 * names written beyond the listed ones are the pattern's: what
 * additionalProperties would allow for other names is not written (all
 * of it valid, some of the valid documents never written), except that
 * for a pattern every name matches nothing else exists.
 */
static int pattern_props(struct sc *c, const json_t *s, const char **pk, const json_t **ps)
{
	const json_t *pp = json_object_get(s, "patternProperties");
	*pk = NULL;
	*ps = NULL;
	if (!pp || (json_is_object(pp) && json_object_size(pp) == 0))
		return 0;
	if (!json_is_object(pp))
		return wk_schema_fail(c, CM_EINVAL, "%s", "'patternProperties': expected an object"), -1;
	if (json_object_size(pp) > 1)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s",
				      "unsupported: patternProperties with more than one pattern"), -1;
	void *it = json_object_iter((json_t *)pp);
	*pk = json_object_iter_key(it);
	*ps = json_object_iter_value(it);
	return 0;
}

/* The schema of listed (or required) name `name`: its own, and the
 * pattern's when the name matches it; NULL after an error. */
static const json_t *name_schema(struct sc *c, const char *name, const json_t *own_schema,
				 const char *pk, const json_t *ps, int *matches)
{
	*matches = 0;
	if (!pk)
		return own_schema;
	int m = universal_pattern(pk) ? 1 : wk_schema_pattern_matches(pk, name, strlen(name));
	if (m < 0)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s",
				      "unsupported: a patternProperties pattern the evaluator cannot run"), NULL;
	*matches = m;
	if (!m)
		return own_schema;
	if (!own_schema)
		return ps;
	json_t *both = wk_schema_own(c, json_pack("{s:[OO]}", "allOf", own_schema, ps));
	return both ? both : (wk_schema_oom(c), NULL);
}

/* "name": value for the names beyond the listed ones: the pattern's
 * (patternProperties, minus the listed names when it matches one) or
 * any other name (additionalProperties); NULL after an error. */
static struct wk_gx *extra_pair(struct sc *c, const json_t *addl, const char *pk, const json_t *ps,
				const char *const *names, size_t n, int named_match)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *xv = pk ? wk_schema_node(c, ps, "patternProperties")
		: addl && !json_is_true(addl) ? wk_schema_node(c, addl, "additionalProperties")
					      : wk_schema_any_value(c);
	/* the extra name is a named rule of its own: the mask cache cuts the
	 * stack there, so its inside is walked once per object, not once
	 * per position among the listed properties */
	uint32_t kr = wk_gram_rule(b, "key", 1);
	struct wk_gx *kb = NULL;
	if (pk && !universal_pattern(pk) && named_match) {
		kb = wk_schema_pattern_key(c, pk, names, n);
	} else if (pk && !universal_pattern(pk)) {
		json_t *ks = wk_schema_own(c, json_pack("{ssss}", "type", "string", "pattern", pk));
		kb = ks ? wk_schema_string(c, ks) : wk_schema_oom(c);
	} else {
		kb = other_key(c, names, n);
	}
	if (!xv || c->st != CM_OK)
		return NULL;
	if (kr == UINT32_MAX || !kb)
		return wk_schema_oom(c);
	wk_gram_set_body(b, kr, kb);
	struct wk_gx *x = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_ref(b, kr), wk_schema_ws(c), wk_gx_str(b, ":"),
							  wk_schema_ws(c), xv }, 5);
	return x ? x : wk_schema_oom(c);
}

struct wk_gx *wk_schema_object(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	const json_t *props = json_object_get(s, "properties");
	const json_t *req = json_object_get(s, "required");
	const json_t *addl = json_object_get(s, "additionalProperties");
	const char *pk;
	const json_t *ps;
	int named_match = 0, m;
	if (pattern_props(c, s, &pk, &ps))
		return NULL;
	if (props && !json_is_object(props))
		return wk_schema_fail(c, CM_EINVAL, "%s", "'properties': expected an object");
	if (req && !json_is_array(req))
		return wk_schema_fail(c, CM_EINVAL, "%s", "'required': expected an array");
	size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
	struct prop *p = cm_calloc(np + nr + 1, sizeof(*p));
	const char **names = cm_calloc(np + nr + 1, sizeof(char *));
	uint32_t *rules = NULL;
	struct wk_gx *out = NULL;
	size_t n = 0;
	if (!p || !names)
		goto oom;
	const char *key;
	json_t *val;
	if (props)
		json_object_foreach((json_t *)props, key, val) {
			p[n].name = key;
			if (!(p[n].schema = name_schema(c, key, val, pk, ps, &m)))
				goto out;
			named_match |= m;
			n++;
		}
	for (size_t i = 0; i < nr; i++) {
		const json_t *r = json_array_get(req, i);
		if (!json_is_string(r)) {
			wk_schema_fail(c, CM_EINVAL, "%s", "'required': expected an array of strings");
			goto out;
		}
		size_t j = 0;
		while (j < n && strcmp(p[j].name, json_string_value(r)))
			j++;
		if (j == n) { /* required but not listed: the pattern's schema when
			       * its name matches, else additionalProperties' */
			p[n].name = json_string_value(r);
			p[n].schema = pk ? name_schema(c, p[n].name, NULL, pk, ps, &m) : NULL;
			if (c->st != CM_OK)
				goto out;
			if (!pk || !m)
				p[n].schema = addl ? addl : json_true();
			else
				named_match = 1;
			n++;
		}
		p[j].required = 1;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = p[i].name;
	int extras = pk || !json_is_false(addl);

	/*
	 * R(i, k) = rules[i W + k]: the properties from the i-th on, k
	 * written so far (k >= 1: a separator comes first).  k counts up to
	 * maxProperties, or saturates at max(minProperties, 1).  Extra names
	 * may repeat one another, so only listed properties (distinct by
	 * construction) count toward minProperties, and extras once (one
	 * or more extras are one name at least); all count toward
	 * maxProperties.
	 */
	uint32_t minp, maxp;
	if (wk_schema_count(c, s, "minProperties", &minp, 0) ||
	    wk_schema_count(c, s, "maxProperties", &maxp, WK_GRAM_INF))
		goto out;
	if (minp > n + (extras ? 1u : 0u)) {
		if (extras)
			wk_schema_fail(c, CM_EUNSUPPORTED, "%s",
				       "unsupported: minProperties above the number of listed properties");
		else
			wk_schema_fail(c, CM_EINVAL, "%s",
				       "unsatisfiable: minProperties above the properties allowed");
		goto out;
	}
	uint32_t top = maxp != WK_GRAM_INF ? maxp : (minp > 1 ? minp : 1), W = top + 1;
	if ((uint64_t)(n + 1) * W > 100000) {
		wk_schema_fail(c, CM_EUNSUPPORTED, "%s",
			       "unsupported: maxProperties/minProperties too large for this object");
		goto out;
	}
	rules = cm_calloc((n + 1) * W, sizeof(uint32_t));
	if (!rules)
		goto oom;
	for (size_t i = 0; i < (n + 1) * W; i++)
		if ((rules[i] = wk_gram_rule(b, "", 0)) == UINT32_MAX)
			goto oom;
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ wk_schema_ws(c), wk_gx_str(b, ","), wk_schema_ws(c) }, 3);
	struct wk_gx *xkv = NULL;
	if (extras && !(xkv = extra_pair(c, addl, pk, ps, names, n, named_match)))
		goto out;
	for (size_t i = n + 1; i-- > 0;) {
		struct wk_gx *v = NULL, *kv = NULL;
		if (i < n) {
			char seg[300];
			snprintf(seg, sizeof(seg), "properties/%.250s", p[i].name);
			v = wk_schema_node(c, p[i].schema, seg);
			if (!v)
				goto out;
			kv = wk_gx_seq(b, (struct wk_gx *[]){ wk_schema_key_literal(c, p[i].name), wk_schema_ws(c), wk_gx_str(b, ":"), wk_schema_ws(c), v }, 5);
		}
		for (uint32_t k = 0; k < W; k++) {
			struct wk_gx *body;
			if (i == n) {
				uint32_t room = maxp == WK_GRAM_INF ? WK_GRAM_INF : maxp - k;
				if (k < minp && (!extras || minp - k > 1 || room == 0))
					body = wk_gx_nothing(b);
				else if (k < minp) /* one extra at least */
					body = k ? wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 1, room)
						 : wk_gx_seq2(b, xkv, wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 0,
										 room == WK_GRAM_INF ? room : room - 1));
				else if (!extras || room == 0)
					body = wk_gx_empty(b);
				else if (k)
					body = wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 0, room);
				else
					body = wk_gx_opt(b, wk_gx_seq2(b, xkv, wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 0,
											 room == WK_GRAM_INF ? room : room - 1)));
			} else {
				struct wk_gx *with = wk_gx_nothing(b);
				if (maxp == WK_GRAM_INF || k < maxp) {
					uint32_t nk = k + 1 > top ? top : k + 1;
					with = wk_gx_seq(b, (struct wk_gx *[]){ k ? sep : wk_gx_empty(b), kv,
										wk_gx_ref(b, rules[(i + 1) * W + nk]) }, 3);
				}
				body = p[i].required ? with : wk_gx_alt2(b, with, wk_gx_ref(b, rules[(i + 1) * W + k]));
			}
			if (!body)
				goto oom;
			wk_gram_set_body(b, rules[i * W + k], body);
		}
	}
	out = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "{"), wk_schema_ws(c), wk_gx_ref(b, rules[0]), wk_schema_ws(c), wk_gx_str(b, "}") }, 5);
	if (!out)
		goto oom;
	goto out;
oom:
	out = wk_schema_oom(c);
out:
	cm_free(p);
	cm_free(names);
	cm_free(rules);
	return c->st == CM_OK ? out : NULL;
}

