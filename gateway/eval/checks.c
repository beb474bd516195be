/*
 * checks.c - an eval case's "expect" checks (eval.h) and the JSON Schema
 * validator behind "json_schema".
 *
 * The validator asserts: boolean schemas, type, enum, const, properties,
 * required, additionalProperties, minProperties, maxProperties, items
 * (a schema; an array is prefixItems), prefixItems, minItems, maxItems,
 * uniqueItems, minLength, maxLength (code points), pattern (translated to
 * a POSIX ERE by gw_eval_regcomp, unanchored as in JSON Schema), minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum (numbers, or draft 4's booleans), multipleOf, allOf,
 * anyOf, oneOf, not, and local $ref ("#", "#/JSON/pointer").  Keywords
 * that assert something else (if/then/else, dependencies, contains,
 * patternProperties, propertyNames, unevaluated*, additionalItems,
 * dynamic refs) make the check refused when the set is read, never
 * ignored; the rest (title, format, $defs, ...) are annotations.
 * Pure functions; regcomp per use (eval runs are rare and small).
 */
#include "gateway/eval/eval.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

static const char *const sv_refused[] = {
	"if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
	"contains", "patternProperties", "propertyNames", "unevaluatedProperties",
	"unevaluatedItems", "additionalItems", "$dynamicRef", "$recursiveRef", NULL,
};

struct sv_ctx {
	const json_t *root;   /* for $ref */
	unsigned long steps;  /* schemas visited, up to GW_EVAL_SCHEMA_STEPS */
};

static int sv(struct sv_ctx *cx, const json_t *s, const json_t *doc, int depth, char *err,
	      size_t len);

static int sv_fail(char *err, size_t len, int rc, const char *fmt, const char *what)
{
	snprintf(err, len, fmt, what);
	return rc;
}

/* Code points of a UTF-8 string (bytes that do not decode count one each). */
static size_t sv_codepoints(const char *s, size_t n)
{
	size_t cps = 0;

	for (size_t i = 0; i < n; i++)
		cps += ((unsigned char)s[i] & 0xC0) != 0x80;
	return cps;
}

/* JSON Schema equality: numbers by value (2 == 2.0), the rest as jansson. */
static int sv_equal(const json_t *a, const json_t *b)
{
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	if (json_is_array(a) && json_is_array(b)) {
		if (json_array_size(a) != json_array_size(b))
			return 0;
		json_array_foreach((json_t *)a, i, v)
			if (!sv_equal(v, json_array_get(b, i)))
				return 0;
		return 1;
	}
	if (json_is_object(a) && json_is_object(b)) {
		if (json_object_size(a) != json_object_size(b))
			return 0;
		json_object_foreach((json_t *)a, k, v)
			if (!json_object_get(b, k) || !sv_equal(v, json_object_get(b, k)))
				return 0;
		return 1;
	}
	return json_equal((json_t *)a, (json_t *)b);
}

static int sv_type_is(const char *t, const json_t *doc)
{
	if (strcmp(t, "null") == 0)
		return json_is_null(doc);
	if (strcmp(t, "boolean") == 0)
		return json_is_boolean(doc);
	if (strcmp(t, "object") == 0)
		return json_is_object(doc);
	if (strcmp(t, "array") == 0)
		return json_is_array(doc);
	if (strcmp(t, "string") == 0)
		return json_is_string(doc);
	if (strcmp(t, "number") == 0)
		return json_is_number(doc);
	if (strcmp(t, "integer") == 0) /* 1.0 is not (draft 4, and what the grammar writes) */
		return json_is_integer(doc);
	return 0;
}

static int sv_type(const json_t *t, const json_t *doc, char *err, size_t len)
{
	size_t i;
	json_t *e;

	if (json_is_string(t))
		return sv_type_is(json_string_value(t), doc) ? 1
			: sv_fail(err, len, 0, "expected type %s", json_string_value(t));
	json_array_foreach(t, i, e)
		if (json_is_string(e) && sv_type_is(json_string_value(e), doc))
			return 1;
	return sv_fail(err, len, 0, "expected one of the listed types%s", "");
}

/* "#" or "#/a/b~1c": the schema it points to in root, NULL when none. */
static const json_t *sv_ref(const json_t *root, const char *ref)
{
	char seg[256];
	const json_t *cur = root;
	const char *p;

	if (ref[0] != '#')
		return NULL;
	p = ref + 1;
	while (*p == '/') {
		size_t n = 0;

		p++;
		while (*p && *p != '/' && n + 1 < sizeof(seg)) {
			if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
				seg[n++] = p[1] == '0' ? '~' : '/';
				p += 2;
			} else {
				seg[n++] = *p++;
			}
		}
		seg[n] = '\0';
		if (json_is_object(cur))
			cur = json_object_get(cur, seg);
		else if (json_is_array(cur))
			cur = json_array_get(cur, (size_t)strtoul(seg, NULL, 10));
		else
			return NULL;
		if (!cur)
			return NULL;
	}
	return *p ? NULL : cur;
}

static int sv_number(const json_t *s, const json_t *doc, char *err, size_t len)
{
	double x = json_number_value(doc), b;
	const json_t *k;

	if ((k = json_object_get(s, "minimum")) && json_is_number(k)) {
		const json_t *ex = json_object_get(s, "exclusiveMinimum");

		b = json_number_value(k);
		if (json_is_true(ex) ? !(x > b) : !(x >= b))
			return sv_fail(err, len, 0, "a number below the minimum%s", "");
	}
	if ((k = json_object_get(s, "maximum")) && json_is_number(k)) {
		const json_t *ex = json_object_get(s, "exclusiveMaximum");

		b = json_number_value(k);
		if (json_is_true(ex) ? !(x < b) : !(x <= b))
			return sv_fail(err, len, 0, "a number above the maximum%s", "");
	}
	if ((k = json_object_get(s, "exclusiveMinimum")) && json_is_number(k) &&
	    !(x > json_number_value(k)))
		return sv_fail(err, len, 0, "a number not above exclusiveMinimum%s", "");
	if ((k = json_object_get(s, "exclusiveMaximum")) && json_is_number(k) &&
	    !(x < json_number_value(k)))
		return sv_fail(err, len, 0, "a number not below exclusiveMaximum%s", "");
	if ((k = json_object_get(s, "multipleOf")) && json_is_number(k) &&
	    json_number_value(k) > 0) {
		double q = x / json_number_value(k);

		if (fabs(q - nearbyint(q)) > 1e-9 * fmax(1.0, fabs(q)))
			return sv_fail(err, len, 0, "a number that is not a multiple of multipleOf%s", "");
	}
	return 1;
}

/*
 * Compiles a JSON Schema (ECMA-262) pattern or a check's regex as a POSIX
 * ERE: \d \w \s and their negations become classes, an escaped
 * character inside brackets loses its backslash (POSIX brackets take it
 * literally).  0, or -1 when it does not translate or compile (\u, \b,
 * look-around, lazy quantifiers, a quantifier on a quantifier, more than
 * GW_EVAL_PATTERN_MAX bytes).
 */
int gw_eval_regcomp(void *re, const char *pat)
{
	size_t n = strlen(pat), k = 0;
	char *out = cm_malloc(n * 14 + 1);
	int in_br = 0, br_dash = 0, rc = -1;

	if (!out || n > GW_EVAL_PATTERN_MAX) {
		cm_free(out);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		char c = pat[i];

		if (c == '\\' && i + 1 < n) {
			char e = pat[++i];
			const char *cls = e == 'd' ? "0-9" : e == 'w' ? "A-Za-z0-9_"
				: e == 's' ? "[:space:]" : NULL;
			const char *neg = e == 'D' ? "0-9" : e == 'W' ? "A-Za-z0-9_"
				: e == 'S' ? "[:space:]" : NULL;

			if (e == 'u' || e == 'b' || e == 'B' || e == 'x' || (in_br && neg))
				goto out;
			if (cls || neg) {
				k += (size_t)sprintf(out + k, in_br ? "%s" : neg ? "[^%s]" : "[%s]",
						     cls ? cls : neg);
			} else if (e == 'n' || e == 't' || e == 'r') {
				out[k++] = e == 'n' ? '\n' : e == 't' ? '\t' : '\r';
			} else if (in_br && e == '-') {
				br_dash = 1; /* literal only last in a POSIX bracket */
			} else if (in_br && (e == ']' || (e == '^' && out[k - 1] == '['))) {
				goto out;
			} else if (in_br) {
				out[k++] = e;
			} else {
				out[k++] = '\\';
				out[k++] = e;
			}
			continue;
		}
		if (c == '(' && i + 1 < n && pat[i + 1] == '?')
			goto out;
		/* a quantifier on a quantifier: lazy or possessive in ECMA, and
		 * stacked ones make glibc's matcher crawl */
		if ((c == '?' || c == '+' || c == '*' || c == '{') && i > 0 && !in_br &&
		    (pat[i - 1] == '*' || pat[i - 1] == '+' || pat[i - 1] == '?' || pat[i - 1] == '}') &&
		    (i < 2 || pat[i - 2] != '\\'))
			goto out;
		if (c == '[' && !in_br) {
			in_br = 1;
			out[k++] = c;
			if (i + 1 < n && pat[i + 1] == '^')
				out[k++] = pat[++i];
			continue;
		}
		if (c == ']' && in_br) {
			in_br = 0;
			if (br_dash)
				out[k++] = '-';
			br_dash = 0;
		}
		out[k++] = c;
	}
	out[k] = '\0';
	rc = regcomp((regex_t *)re, out, REG_EXTENDED | REG_NOSUB) == 0 ? 0 : -1;
out:
	cm_free(out);
	return rc;
}

static int sv_string(const json_t *s, const json_t *doc, char *err, size_t len)
{
	const char *str = json_string_value(doc);
	size_t cps = sv_codepoints(str, json_string_length(doc));
	const json_t *k;

	if ((k = json_object_get(s, "minLength")) && json_is_integer(k) &&
	    (json_int_t)cps < json_integer_value(k))
		return sv_fail(err, len, 0, "a string shorter than minLength%s", "");
	if ((k = json_object_get(s, "maxLength")) && json_is_integer(k) &&
	    (json_int_t)cps > json_integer_value(k))
		return sv_fail(err, len, 0, "a string longer than maxLength%s", "");
	if ((k = json_object_get(s, "pattern")) && json_is_string(k)) {
		regex_t re;
		int m;

		if (gw_eval_regcomp(&re, json_string_value(k)) != 0)
			return sv_fail(err, len, -1, "pattern %s does not translate to a POSIX ERE",
				       json_string_value(k));
		m = regexec(&re, str, 0, NULL, 0);
		regfree(&re);
		if (m != 0)
			return sv_fail(err, len, 0, "a string that does not match pattern %s",
				       json_string_value(k));
	}
	return 1;
}

static int sv_object(struct sv_ctx *cx, const json_t *s, const json_t *doc, int depth,
		     char *err, size_t len)
{
	const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	const json_t *addl = json_object_get(s, "additionalProperties"), *k, *v;
	const char *name;
	size_t i;
	int rc;

	json_array_foreach(req, i, k)
		if (json_is_string(k) && !json_object_get(doc, json_string_value(k)))
			return sv_fail(err, len, 0, "the required property \"%s\" is missing",
				       json_string_value(k));
	if ((k = json_object_get(s, "minProperties")) && json_is_integer(k) &&
	    (json_int_t)json_object_size(doc) < json_integer_value(k))
		return sv_fail(err, len, 0, "fewer properties than minProperties%s", "");
	if ((k = json_object_get(s, "maxProperties")) && json_is_integer(k) &&
	    (json_int_t)json_object_size(doc) > json_integer_value(k))
		return sv_fail(err, len, 0, "more properties than maxProperties%s", "");
	json_object_foreach((json_t *)doc, name, v) {
		const json_t *ps = props ? json_object_get(props, name) : NULL;

		if (!ps && json_is_false(addl))
			return sv_fail(err, len, 0, "the property \"%s\" is not allowed", name);
		if (!ps && json_is_object(addl))
			ps = addl;
		if (ps && (rc = sv(cx, ps, v, depth + 1, err, len)) != 1)
			return rc;
	}
	return 1;
}

static int sv_array(struct sv_ctx *cx, const json_t *s, const json_t *doc, int depth,
		    char *err, size_t len)
{
	const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	const json_t *k, *v;
	size_t i, n = json_array_size(doc), np;
	int rc;

	if (json_is_array(items)) { /* draft 4's tuple form */
		prefix = items;
		items = NULL;
	}
	np = json_array_size(prefix);
	if ((k = json_object_get(s, "minItems")) && json_is_integer(k) &&
	    (json_int_t)n < json_integer_value(k))
		return sv_fail(err, len, 0, "fewer items than minItems%s", "");
	if ((k = json_object_get(s, "maxItems")) && json_is_integer(k) &&
	    (json_int_t)n > json_integer_value(k))
		return sv_fail(err, len, 0, "more items than maxItems%s", "");
	json_array_foreach(doc, i, v) {
		const json_t *is = i < np ? json_array_get(prefix, i) : items;

		if (is && (rc = sv(cx, is, v, depth + 1, err, len)) != 1)
			return rc;
	}
	if (json_is_true(json_object_get(s, "uniqueItems")))
		for (i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				if (sv_equal(json_array_get(doc, i), json_array_get(doc, j)))
					return sv_fail(err, len, 0, "repeated items under uniqueItems%s", "");
	return 1;
}

/* allOf, anyOf, oneOf, not. */
static int sv_logic(struct sv_ctx *cx, const json_t *s, const json_t *doc, int depth,
		    char *err, size_t len)
{
	const json_t *k, *e;
	size_t i;
	int rc, hits;

	json_array_foreach(json_object_get(s, "allOf"), i, e)
		if ((rc = sv(cx, e, doc, depth + 1, err, len)) != 1)
			return rc;
	if ((k = json_object_get(s, "anyOf"))) {
		hits = 0;
		json_array_foreach(k, i, e) {
			if ((rc = sv(cx, e, doc, depth + 1, err, len)) < 0)
				return rc;
			hits += rc;
		}
		if (!hits)
			return sv_fail(err, len, 0, "no branch of anyOf matches%s", "");
	}
	if ((k = json_object_get(s, "oneOf"))) {
		hits = 0;
		json_array_foreach(k, i, e) {
			if ((rc = sv(cx, e, doc, depth + 1, err, len)) < 0)
				return rc;
			hits += rc;
		}
		if (hits != 1)
			return sv_fail(err, len, 0, "not exactly one branch of oneOf matches%s", "");
	}
	if ((k = json_object_get(s, "not"))) {
		if ((rc = sv(cx, k, doc, depth + 1, err, len)) < 0)
			return rc;
		if (rc == 1)
			return sv_fail(err, len, 0, "the document matches the schema under not%s", "");
	}
	return 1;
}

static int sv(struct sv_ctx *cx, const json_t *s, const json_t *doc, int depth, char *err,
	      size_t len)
{
	const json_t *k, *e;
	size_t i;
	int rc, hit = 0;

	if (depth > GW_EVAL_SCHEMA_DEPTH)
		return sv_fail(err, len, -1, "the schema nests deeper than %s levels", "32");
	if (++cx->steps > GW_EVAL_SCHEMA_STEPS) /* $ref cycles under anyOf: exponential */
		return sv_fail(err, len, -1, "the document takes more than %s schema steps", "100000");
	if (json_is_boolean(s))
		return json_is_true(s) ? 1 : sv_fail(err, len, 0, "the schema false%s", "");
	if (!json_is_object(s))
		return sv_fail(err, len, -1, "a schema must be an object or a boolean%s", "");
	for (const char *const *r = sv_refused; *r; r++)
		if (json_object_get(s, *r))
			return sv_fail(err, len, -1, "the keyword %s is not supported by the eval "
				       "validator", *r);
	if ((k = json_object_get(s, "$ref"))) {
		const json_t *t = json_is_string(k) ? sv_ref(cx->root, json_string_value(k)) : NULL;

		if (!t)
			return sv_fail(err, len, -1, "$ref %s: expected a local reference",
				       json_is_string(k) ? json_string_value(k) : "?");
		if ((rc = sv(cx, t, doc, depth + 1, err, len)) != 1)
			return rc;
	}
	if ((k = json_object_get(s, "type")) && (rc = sv_type(k, doc, err, len)) != 1)
		return rc;
	if ((k = json_object_get(s, "const")) && !sv_equal(k, doc))
		return sv_fail(err, len, 0, "a value other than const%s", "");
	if ((k = json_object_get(s, "enum"))) {
		json_array_foreach(k, i, e)
			hit |= sv_equal(e, doc);
		if (!hit)
			return sv_fail(err, len, 0, "a value outside enum%s", "");
	}
	if (json_is_number(doc) && (rc = sv_number(s, doc, err, len)) != 1)
		return rc;
	if (json_is_string(doc) && (rc = sv_string(s, doc, err, len)) != 1)
		return rc;
	if (json_is_object(doc) && (rc = sv_object(cx, s, doc, depth, err, len)) != 1)
		return rc;
	if (json_is_array(doc) && (rc = sv_array(cx, s, doc, depth, err, len)) != 1)
		return rc;
	return sv_logic(cx, s, doc, depth, err, len);
}

int gw_eval_schema_valid(const json_t *schema, const json_t *doc, char *err, size_t err_len)
{
	struct sv_ctx cx = { schema, 0 };

	err[0] = '\0';
	return sv(&cx, schema, doc, 0, err, err_len);
}

/* ---- expect ---------------------------------------------------------- */

static const char *const expect_members[] = {
	"equals", "contains", "regex", "json_schema", "min_mean_logprob", NULL,
};

const char *gw_eval_expect_validate(const json_t *expect, char *err, size_t err_len)
{
	const char *k;
	json_t *v;

	if (!expect)
		return NULL;
	if (!json_is_object(expect))
		return "expect: expected an object of checks";
	json_object_foreach((json_t *)expect, k, v) {
		const char *const *m = expect_members;

		while (*m && strcmp(*m, k) != 0)
			m++;
		if (!*m) {
			snprintf(err, err_len, "expect.%s: expected one of equals, contains, regex, "
				 "json_schema, min_mean_logprob", k);
			return err;
		}
		if ((!strcmp(k, "equals") || !strcmp(k, "contains") || !strcmp(k, "regex")) &&
		    !json_is_string(v)) {
			snprintf(err, err_len, "expect.%s: expected a string", k);
			return err;
		}
		if (!strcmp(k, "min_mean_logprob") && (!json_is_number(v) || json_number_value(v) > 0)) {
			snprintf(err, err_len, "expect.min_mean_logprob: expected a number <= 0 (nats)");
			return err;
		}
		if (!strcmp(k, "regex")) {
			regex_t re;

			if (gw_eval_regcomp(&re, json_string_value(v)) != 0) {
				snprintf(err, err_len, "expect.regex: expected a POSIX extended regular "
					 "expression (with \\d \\w \\s), found one that does not compile");
				return err;
			}
			regfree(&re);
		}
		if (!strcmp(k, "json_schema")) {
			char why[200];

			/* A probe document exercises every keyword check at the top level. */
			if (!json_is_object(v) && !json_is_boolean(v)) {
				snprintf(err, err_len, "expect.json_schema: expected an object or a boolean");
				return err;
			}
			if (gw_eval_schema_valid(v, json_null(), why, sizeof(why)) < 0) {
				snprintf(err, err_len, "expect.json_schema: %s", why);
				return err;
			}
		}
	}
	return NULL;
}

static int check_add(json_t *arr, const char *name, int passed, const char *detail)
{
	return json_array_append_new(arr, json_pack("{s:s,s:b,s:s}", "check", name, "passed",
						     passed, "detail", detail));
}

json_t *gw_eval_checks_run(const json_t *expect, const char *text, size_t len,
			   double mean_logprob, uint32_t *failed)
{
	json_t *arr = json_array(), *v;
	const char *k;
	char detail[256];

	*failed = 0;
	if (!arr || !expect)
		return arr;
	json_object_foreach((json_t *)expect, k, v) {
		int ok = 0;

		detail[0] = '\0';
		if (!strcmp(k, "equals")) {
			ok = json_string_length(v) == len && memcmp(json_string_value(v), text, len) == 0;
		} else if (!strcmp(k, "contains")) {
			ok = memmem(text, len, json_string_value(v), json_string_length(v)) != NULL;
		} else if (!strcmp(k, "regex")) {
			regex_t re;

			ok = gw_eval_regcomp(&re, json_string_value(v)) == 0;
			if (ok) {
				ok = strlen(text) == len && regexec(&re, text, 0, NULL, 0) == 0;
				regfree(&re);
			}
		} else if (!strcmp(k, "json_schema")) {
			json_error_t je;
			json_t *doc = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);

			if (!doc)
				snprintf(detail, sizeof(detail), "not a JSON document (line %d column %d)",
					 je.line, je.column);
			else
				ok = gw_eval_schema_valid(v, doc, detail, sizeof(detail)) == 1;
			json_decref(doc);
		} else if (!strcmp(k, "min_mean_logprob")) {
			ok = mean_logprob >= json_number_value(v);
			snprintf(detail, sizeof(detail), "mean log-probability %.4f, at least %.4f",
				 mean_logprob, json_number_value(v));
		}
		*failed += !ok;
		if (check_add(arr, k, ok, detail) != 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}
