/*
 * constraint.c - the request fields that shape the output: OpenAI
 * `response_format` (text, json_object, json_schema), Ollama `format`
 * ("json" or a schema), Sluice's `grammar` (both dialects), and the
 * logprobs fields of each dialect.  The gateway checks their JSON shape
 * and size only; the worker compiles them (docs/structured-outputs.md),
 * and its refusal comes back as a 400 naming the field.
 */
#include "gateway/api/internal.h"

#include <stdio.h>
#include <string.h>

/* Copies `schema` as compact JSON into the arena (the key order kept:
 * properties come out in the schema's order). */
static enum cm_status schema_text(const json_t *schema, const char *field,
				  const struct gw_api_limits *lim, struct cm_arena *a,
				  struct gw_api_request *r, struct gw_api_error *err)
{
	size_t n = json_dumpb(schema, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	char *s;

	if (n == 0)
		return gw_api_oom(err);
	if (n > lim->constraint_bytes) {
		gw_api_error_set(err, 400, field, NULL,
				 "%s: expected at most %u bytes of schema (limits.constraint_bytes), "
				 "found %zu", field, lim->constraint_bytes, n);
		return CM_EINVAL;
	}
	s = cm_arena_alloc(a, n + 1);
	if (!s || json_dumpb(schema, s, n, JSON_COMPACT | JSON_ENCODE_ANY) != n)
		return gw_api_oom(err);
	s[n] = '\0';
	r->constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
	r->constraint.ptr = s;
	r->constraint.len = (uint32_t)n;
	return CM_OK;
}

static enum cm_status json_schema_format(const json_t *rf, const struct gw_api_limits *lim,
					 struct cm_arena *a, struct gw_api_request *r,
					 struct gw_api_error *err)
{
	json_t *js = gw_api_field(rf, "json_schema"), *v, *schema;

	if (!json_is_object(js))
		return gw_api_bad(err, "response_format.json_schema",
				  "an object {\"name\", \"schema\", \"strict\"}", js);
	v = gw_api_field(js, "name");
	if (v && (!json_is_string(v) || json_string_length(v) == 0 ||
		  json_string_length(v) > 64))
		return gw_api_bad(err, "response_format.json_schema.name",
				  "a string of 1 to 64 characters", v);
	v = gw_api_field(js, "strict");
	if (v && !json_is_boolean(v))
		return gw_api_bad(err, "response_format.json_schema.strict", "a boolean", v);
	schema = json_object_get(js, "schema");
	if (!schema) {
		/* OpenAI: a schema-less json_schema is any JSON object */
		r->constraint_kind = PROTO_CONSTRAINT_JSON_OBJECT;
		return CM_OK;
	}
	if (!json_is_object(schema) && !json_is_boolean(schema))
		return gw_api_bad(err, "response_format.json_schema.schema",
				  "a JSON Schema (an object)", schema);
	r->constraint_param = "response_format.json_schema.schema";
	return schema_text(schema, "response_format.json_schema.schema", lim, a, r, err);
}

enum cm_status gw_api_response_format(const json_t *root, const struct gw_api_limits *lim,
				      struct cm_arena *a, struct gw_api_request *r,
				      struct gw_api_error *err)
{
	json_t *rf = gw_api_field(root, "response_format"), *t;
	const char *ts;

	r->constraint_param = "response_format";
	if (!rf)
		return CM_OK;
	if (!json_is_object(rf))
		return gw_api_bad(err, "response_format", "an object {\"type\": ...}", rf);
	t = gw_api_field(rf, "type");
	if (!json_is_string(t))
		return gw_api_bad(err, "response_format.type",
				  "one of \"text\", \"json_object\", \"json_schema\"", t);
	ts = json_string_value(t);
	if (strcmp(ts, "text") == 0)
		return CM_OK;
	if (strcmp(ts, "json_object") == 0) {
		r->constraint_kind = PROTO_CONSTRAINT_JSON_OBJECT;
		return CM_OK;
	}
	if (strcmp(ts, "json_schema") == 0)
		return json_schema_format(rf, lim, a, r, err);
	return gw_api_bad(err, "response_format.type",
			  "one of \"text\", \"json_object\", \"json_schema\"", t);
}

enum cm_status gw_api_ollama_format(const json_t *root, const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err)
{
	json_t *f = gw_api_field(root, "format");

	r->constraint_param = "format";
	if (!f || (json_is_string(f) && json_string_length(f) == 0))
		return CM_OK;
	if (json_is_string(f)) {
		if (strcmp(json_string_value(f), "json") != 0)
			return gw_api_bad(err, "format", "\"json\" or a JSON Schema object", f);
		r->constraint_kind = PROTO_CONSTRAINT_JSON_OBJECT;
		return CM_OK;
	}
	if (!json_is_object(f))
		return gw_api_bad(err, "format", "\"json\" or a JSON Schema object", f);
	return schema_text(f, "format", lim, a, r, err);
}

enum cm_status gw_api_grammar(const json_t *root, const struct gw_api_limits *lim,
			      struct cm_arena *a, struct gw_api_request *r,
			      struct gw_api_error *err)
{
	json_t *g = gw_api_field(root, "grammar");
	enum cm_status st;

	if (!g || (json_is_string(g) && json_string_length(g) == 0))
		return CM_OK;
	if (!json_is_string(g))
		return gw_api_bad(err, "grammar", "a grammar text (a string)", g);
	if (r->constraint_kind != PROTO_CONSTRAINT_NONE) {
		gw_api_error_set(err, 400, "grammar", NULL,
				 "grammar: expected either grammar or %s, found both",
				 r->constraint_param);
		return CM_EINVAL;
	}
	if (json_string_length(g) > lim->constraint_bytes) {
		gw_api_error_set(err, 400, "grammar", NULL,
				 "grammar: expected at most %u bytes (limits.constraint_bytes), found %zu",
				 lim->constraint_bytes, json_string_length(g));
		return CM_EINVAL;
	}
	st = gw_api_copy_str(a, g, &r->constraint, err);
	if (st != CM_OK)
		return st;
	r->constraint_kind = PROTO_CONSTRAINT_GRAMMAR;
	r->constraint_param = "grammar";
	return CM_OK;
}

enum cm_status gw_api_logprobs(const json_t *root, int legacy_count, struct gw_api_request *r,
			       struct gw_api_error *err)
{
	json_int_t n = 0;
	int given = 0;
	enum cm_status st;

	if (legacy_count) {
		/* /v1/completions: logprobs is the number of alternatives, 0..5 */
		st = gw_api_get_int(root, "logprobs", "logprobs", 0, 5, &n, &given, err);
		if (st != CM_OK || !given)
			return st;
		r->logprobs = 1;
		r->top_logprobs = (uint8_t)n;
		r->submit_flags |= PROTO_SUBMIT_F_LOGPROBS;
		return CM_OK;
	}
	st = gw_api_get_bool(root, "logprobs", "logprobs", &r->logprobs, err);
	if (st == CM_OK)
		st = gw_api_get_int(root, "top_logprobs", "top_logprobs", 0, PROTO_TOP_LOGPROBS_MAX,
				    &n, &given, err);
	if (st != CM_OK)
		return st;
	if (given && n > 0 && !r->logprobs) {
		gw_api_error_set(err, 400, "top_logprobs", NULL,
				 "top_logprobs: only allowed when logprobs is true");
		return CM_EINVAL;
	}
	r->top_logprobs = (uint8_t)n;
	if (r->logprobs)
		r->submit_flags |= PROTO_SUBMIT_F_LOGPROBS;
	return CM_OK;
}
