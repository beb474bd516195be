/*
 * request.c - the request model: limits, the byte checks and the JSON field
 * readers, chat messages (one loop for both dialects), the parse entry points
 * and the hand-off to proto_submit (see api.h for the rules).
 *
 * Cheap byte checks (UTF-8, NUL, \u0000, depth) run before jansson, which
 * runs with duplicate keys rejected; every accepted string is copied into
 * the caller's arena so that the jansson tree is released before return.
 */
#include "gateway/api/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/utf8.h"

void gw_api_limits_defaults(struct gw_api_limits *l)
{
	l->json_depth = CM_LIM_JSON_DEPTH;
	l->messages = CM_LIM_MESSAGES;
	l->stop_strings = CM_LIM_STOP_STRINGS;
	l->stop_string_bytes = CM_LIM_STOP_STRING_BYTES;
	l->max_output_tokens = CM_LIM_MAX_OUTPUT_TOKENS;
	l->constraint_bytes = CM_LIM_CONSTRAINT_BYTES;
	l->choices = CM_LIM_CHOICES;
	l->embed_inputs = CM_LIM_EMBED_INPUTS;
	l->tools = CM_LIM_TOOLS;
	l->tools_bytes = CM_LIM_TOOLS_BYTES;
	l->thinking_token_budget = CM_LIM_THINKING_TOKEN_BUDGET;
	l->max_tokens_strict = 0;
}

static int lim_ok(const char *key, uint32_t v, uint32_t lo, uint32_t hi,
		  char *err, size_t err_len)
{
	if (v >= lo && v <= hi)
		return 1;
	snprintf(err, err_len, "%s: expected %u..%u, found %u", key, lo, hi, v);
	return 0;
}

enum cm_status gw_api_limits_check(const struct gw_api_limits *l, char *err,
				   size_t err_len)
{
	if (!lim_ok("limits.json_depth", l->json_depth, 2, 256, err, err_len) ||
	    !lim_ok("limits.messages", l->messages, 1, CM_LIM_PROTO_MESSAGES_HARD, err, err_len) ||
	    !lim_ok("limits.stop_strings", l->stop_strings, 0, CM_LIM_PROTO_STOP_STRINGS_HARD, err, err_len) ||
	    !lim_ok("limits.stop_string_bytes", l->stop_string_bytes, 1, 4096, err, err_len) ||
	    !lim_ok("limits.max_output_tokens", l->max_output_tokens, 1, 1048576, err, err_len) ||
	    !lim_ok("limits.constraint_bytes", l->constraint_bytes, 16, 64u << 20, err, err_len) ||
	    !lim_ok("limits.choices", l->choices, 1, GW_API_CHOICES_MAX, err, err_len) ||
	    !lim_ok("limits.embed_inputs", l->embed_inputs, 1, CM_LIM_PROTO_EMBED_INPUTS_HARD, err,
		    err_len) ||
	    !lim_ok("limits.tools", l->tools, 0, GW_API_TOOLS_MAX, err, err_len) ||
	    !lim_ok("limits.tools_bytes", l->tools_bytes, 1024, GW_API_TOOLS_BYTES_MAX, err, err_len) ||
	    !lim_ok("limits.thinking_token_budget", l->thinking_token_budget, 0,
		    CM_LIM_THINKING_TOKEN_BUDGET_MAX, err, err_len))
		return CM_EINVAL;
	return CM_OK;
}


/* ---- byte-level checks before jansson ---------------------------------- */

/*
 * Nesting depth and "\u0000" escapes, tracking strings so that brackets
 * and backslashes inside them do not count.
 */
static enum cm_status prescan(const uint8_t *p, size_t n, uint32_t max_depth,
			      struct gw_api_error *err)
{
	uint32_t depth = 0;
	int in_str = 0, esc = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];

		if (in_str) {
			if (esc) {
				esc = 0;
				if (c == 'u' && n - i > 4 && memcmp(p + i + 1, "0000", 4) == 0) {
					gw_api_error_set(err, 400, NULL, NULL,
							 "body: expected strings without NUL characters, found \\u0000");
					return CM_EINVAL;
				}
			} else if (c == '\\') {
				esc = 1;
			} else if (c == '"') {
				in_str = 0;
			}
			continue;
		}
		if (c == '"') {
			in_str = 1;
		} else if (c == '[' || c == '{') {
			if (++depth > max_depth) {
				gw_api_error_set(err, 400, NULL, NULL,
						 "body: expected JSON nested at most %u levels deep, found deeper nesting",
						 max_depth);
				return CM_EINVAL;
			}
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return CM_OK;
}

enum cm_status gw_api_load_object(const void *body, size_t len,
				  const struct gw_api_limits *lim, json_t **out,
				  struct gw_api_error *err)
{
	json_error_t jerr;
	json_t *root;
	enum cm_status st;

	*out = NULL;
	if (len == 0) {
		gw_api_error_set(err, 400, NULL, NULL,
				 "body: expected a JSON object, found an empty body");
		return CM_EINVAL;
	}
	if (cm_utf8_has_nul(body, len)) {
		gw_api_error_set(err, 400, NULL, NULL,
				 "body: expected UTF-8 text without NUL bytes, found a NUL byte");
		return CM_EINVAL;
	}
	if (!cm_utf8_valid(body, len)) {
		gw_api_error_set(err, 400, NULL, NULL,
				 "body: expected valid UTF-8, found invalid byte sequences");
		return CM_EINVAL;
	}
	st = prescan(body, len, lim->json_depth, err);
	if (st != CM_OK)
		return st;
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root) {
		gw_api_error_set(err, 400, NULL, NULL,
				 "body: expected valid JSON, found an error at line %d column %d: %.160s",
				 jerr.line, jerr.column, jerr.text);
		return CM_EINVAL;
	}
	if (!json_is_object(root)) {
		gw_api_error_set(err, 400, NULL, NULL,
				 "body: expected a JSON object, found %s",
				 json_is_array(root) ? "an array" : "a scalar");
		json_decref(root);
		return CM_EINVAL;
	}
	*out = root;
	return CM_OK;
}


/* Describes a JSON value for "found ..." without quoting client strings. */
void gw_api_describe(const json_t *v, char *buf, size_t len)
{
	if (!v) {
		snprintf(buf, len, "nothing");
		return;
	}
	switch (json_typeof(v)) {
	case JSON_OBJECT: snprintf(buf, len, "an object"); break;
	case JSON_ARRAY: snprintf(buf, len, "an array"); break;
	case JSON_STRING:
		snprintf(buf, len, json_string_length(v) ? "a string" : "an empty string");
		break;
	case JSON_INTEGER:
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: snprintf(buf, len, "%g", json_real_value(v)); break;
	case JSON_TRUE: snprintf(buf, len, "true"); break;
	case JSON_FALSE: snprintf(buf, len, "false"); break;
	case JSON_NULL: snprintf(buf, len, "null"); break;
	}
}

enum cm_status gw_api_bad(struct gw_api_error *err, const char *field,
			  const char *expected, const json_t *found)
{
	char f[64];

	gw_api_describe(found, f, sizeof(f));
	gw_api_error_set(err, 400, field, NULL, "%s: expected %s, found %s", field,
			 expected, f);
	return CM_EINVAL;
}

enum cm_status gw_api_unsupported(struct gw_api_error *err, const char *field,
				  const char *what)
{
	gw_api_error_set(err, 400, field, "unsupported", "%s: %s", field, what);
	return CM_EINVAL;
}

enum cm_status gw_api_oom(struct gw_api_error *err)
{
	gw_api_error_set(err, 500, NULL, NULL, "request too large to process");
	return CM_ENOMEM;
}

/* "present" = the key exists and is not null. */
json_t *gw_api_field(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_null(v) ? NULL : v;
}

enum cm_status gw_api_copy_str(struct cm_arena *a, const json_t *v,
			       struct proto_str *out, struct gw_api_error *err)
{
	size_t n = json_string_length(v);
	char *s;

	if (n > UINT32_MAX)
		return gw_api_oom(err);
	s = cm_arena_strndup(a, json_string_value(v), n);
	if (!s)
		return gw_api_oom(err);
	out->ptr = s;
	out->len = (uint32_t)n;
	return CM_OK;
}

enum cm_status gw_api_get_bool(const json_t *o, const char *key,
			       const char *name, int *out, struct gw_api_error *err)
{
	json_t *v = gw_api_field(o, key);

	if (!v)
		return CM_OK;
	if (!json_is_boolean(v))
		return gw_api_bad(err, name, "a boolean", v);
	*out = json_is_true(v);
	return CM_OK;
}

/* Integer in [lo, hi]; *given set when present. */
enum cm_status gw_api_get_int(const json_t *o, const char *key,
			      const char *name, json_int_t lo, json_int_t hi,
			      json_int_t *out, int *given,
			      struct gw_api_error *err)
{
	json_t *v = gw_api_field(o, key);
	char exp[96];

	if (given)
		*given = 0;
	if (!v)
		return CM_OK;
	snprintf(exp, sizeof(exp), "an integer from %" JSON_INTEGER_FORMAT
		 " to %" JSON_INTEGER_FORMAT, lo, hi);
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return gw_api_bad(err, name, exp, v);
	*out = json_integer_value(v);
	if (given)
		*given = 1;
	return CM_OK;
}

enum cm_status gw_api_get_num(const json_t *o, const char *key,
			      const char *name, double lo, double hi,
			      float *out, struct gw_api_error *err)
{
	json_t *v = gw_api_field(o, key);
	char exp[96];
	double d;

	if (!v)
		return CM_OK;
	snprintf(exp, sizeof(exp), "a number from %g to %g", lo, hi);
	if (!json_is_number(v))
		return gw_api_bad(err, name, exp, v);
	d = json_number_value(v);
	if (!isfinite(d) || d < lo || d > hi)
		return gw_api_bad(err, name, exp, v);
	*out = (float)d;
	return CM_OK;
}

enum cm_status gw_api_get_model(const json_t *o, const char *key,
				struct cm_arena *a, struct proto_str *out,
				struct gw_api_error *err)
{
	json_t *v = gw_api_field(o, key);

	if (!v || !json_is_string(v) || json_string_length(v) == 0)
		return gw_api_bad(err, key, "a non-empty model name", v);
	if (json_string_length(v) > GW_API_MODEL_NAME_MAX) {
		gw_api_error_set(err, 400, key, NULL,
				 "%s: expected a name of at most %d bytes, found %zu bytes",
				 key, GW_API_MODEL_NAME_MAX, json_string_length(v));
		return CM_EINVAL;
	}
	return gw_api_copy_str(a, v, out, err);
}

/* stop: a string or an array of strings; null or absent = none. */
enum cm_status gw_api_get_stop(const json_t *o, const char *key,
			       const char *name, const struct gw_api_limits *lim,
			       struct cm_arena *a, struct gw_api_request *r,
			       struct gw_api_error *err)
{
	json_t *v = gw_api_field(o, key);
	size_t n;
	enum cm_status st;
	char fname[64];

	if (!v)
		return CM_OK;
	if (json_is_string(v)) {
		n = 1;
	} else if (json_is_array(v)) {
		n = json_array_size(v);
	} else {
		return gw_api_bad(err, name, "a string or an array of strings", v);
	}
	if (n > lim->stop_strings) {
		gw_api_error_set(err, 400, name, NULL,
				 "%s: expected at most %u stop strings, found %zu",
				 name, lim->stop_strings, n);
		return CM_EINVAL;
	}
	r->n_stop = 0;
	r->stop = n ? cm_arena_calloc(a, n, sizeof(*r->stop)) : NULL;
	if (n && !r->stop)
		return gw_api_oom(err);
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_is_string(v) ? v : json_array_get(v, i);

		snprintf(fname, sizeof(fname), "%s[%zu]", name, i);
		if (!json_is_string(s))
			return gw_api_bad(err, fname, "a string", s);
		if (json_string_length(s) == 0)
			continue; /* "" stops nothing: ignored, as OpenAI and Ollama do */
		if (json_string_length(s) > lim->stop_string_bytes) {
			gw_api_error_set(err, 400, name, NULL,
					 "%s: expected at most %u bytes, found %zu bytes",
					 fname, lim->stop_string_bytes,
					 json_string_length(s));
			return CM_EINVAL;
		}
		st = gw_api_copy_str(a, s, &r->stop[r->n_stop], err);
		if (st != CM_OK)
			return st;
		r->n_stop++;
	}
	return CM_OK;
}

/* A field that must be absent, null, false, "" or empty ([] / {}). */
int gw_api_is_empty(const json_t *v)
{
	if (!v || json_is_null(v) || json_is_false(v))
		return 1;
	if (json_is_string(v))
		return json_string_length(v) == 0;
	if (json_is_array(v))
		return json_array_size(v) == 0;
	if (json_is_object(v))
		return json_object_size(v) == 0;
	return 0;
}

enum cm_status gw_api_refuse_if_set(const json_t *o, const char *key,
				    const char *what, struct gw_api_error *err)
{
	if (!gw_api_is_empty(json_object_get(o, key)))
		return gw_api_unsupported(err, key, what);
	return CM_OK;
}

/* messages[i].role: one of the roles the worker renders (proto/), or an
 * alias the dialect defines; *out is the worker's name. */
static enum cm_status msg_role(const json_t *m, size_t i,
			       const struct gw_api_msg_rules *rules, const struct proto_str *model,
			       struct proto_str *out, struct gw_api_error *err)
{
	json_t *role = gw_api_field(m, "role");
	const char *s;
	char f[64];
	int ri;

	snprintf(f, sizeof(f), "messages[%zu].role", i);
	if (!json_is_string(role))
		return gw_api_bad(err, f, rules->role_expect, role);
	s = json_string_value(role);
	for (size_t k = 0; rules->aliases && rules->aliases[k].alias; k++)
		if (strcmp(s, rules->aliases[k].alias) == 0)
			s = rules->aliases[k].role;
	(void)model;
	ri = proto_role_parse(s, strlen(s));
	if (ri >= 0) {
		*out = (struct proto_str){ proto_role_names[ri],
					   (uint32_t)strlen(proto_role_names[ri]) };
		return CM_OK;
	}
	gw_api_error_set(err, 400, f, NULL, "%s: expected %s, found another string",
			 f, rules->role_expect);
	return CM_EINVAL;
}

enum cm_status gw_api_messages(const json_t *root, const struct gw_api_limits *lim,
			       const struct gw_api_msg_rules *rules,
			       struct cm_arena *a, struct gw_api_request *r,
			       struct gw_api_error *err)
{
	json_t *msgs = gw_api_field(root, "messages");
	char f[64];
	size_t n;
	enum cm_status st;

	if (!msgs || !json_is_array(msgs))
		return gw_api_bad(err, "messages", "an array of messages", msgs);
	n = json_array_size(msgs);
	if (n == 0) {
		gw_api_error_set(err, 400, "messages", NULL,
				 "messages: expected at least one message, found an empty array");
		return CM_EINVAL;
	}
	if (n > lim->messages) {
		gw_api_error_set(err, 400, "messages", NULL,
				 "messages: expected at most %u messages, found %zu",
				 lim->messages, n);
		return CM_EINVAL;
	}
	r->messages = cm_arena_calloc(a, n, sizeof(*r->messages));
	if (!r->messages)
		return gw_api_oom(err);
	r->n_messages = (uint32_t)n;
	r->prompt_kind = PROTO_PROMPT_CHAT;
	for (size_t i = 0; i < n; i++) {
		json_t *m = json_array_get(msgs, i), *content;

		snprintf(f, sizeof(f), "messages[%zu]", i);
		if (!json_is_object(m))
			return gw_api_bad(err, f, "an object with role and content", m);
		st = msg_role(m, i, rules, &r->model, &r->messages[i].role, err);
		if (st != CM_OK)
			return st;
		if (rules->images_refused) {
			snprintf(f, sizeof(f), "messages[%zu].images", i);
			if (!gw_api_is_empty(json_object_get(m, "images")))
				return gw_api_unsupported(err, f, "image inputs are not supported");
		}
		content = gw_api_field(m, "content");
		if (!content) {
			r->messages[i].content = (struct proto_str){ "", 0 };
			/* assistant turns (tool calls) may omit it */
			if (strcmp(r->messages[i].role.ptr, "assistant") == 0) {
				st = gw_api_message_tools(m, i, a, r, err);
				if (st != CM_OK)
					return st;
				continue;
			}
			snprintf(f, sizeof(f), "messages[%zu].content", i);
			return gw_api_bad(err, f, rules->content_expect, content);
		}
		st = rules->content(content, i, a, &r->messages[i].content, err);
		if (st == CM_OK)
			st = gw_api_message_tools(m, i, a, r, err);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

/* A string content (the Ollama rule; OpenAI also takes text parts). */
enum cm_status gw_api_content_string(json_t *content, size_t idx,
				     struct cm_arena *a, struct proto_str *out,
				     struct gw_api_error *err)
{
	char f[64];

	snprintf(f, sizeof(f), "messages[%zu].content", idx);
	if (!json_is_string(content))
		return gw_api_bad(err, f, "a string", content);
	return gw_api_copy_str(a, content, out, err);
}

/* ---- entry points ------------------------------------------------------- */

enum cm_status gw_api_parse(enum gw_api_kind kind, const void *body, size_t len,
			    const struct gw_api_limits *lim, struct cm_arena *arena,
			    struct gw_api_request *out, struct gw_api_error *err)
{
	json_t *root = NULL;
	enum cm_status st;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	out->kind = kind;
	out->n = 1;
	out->style = (kind == GW_API_OPENAI_CHAT || kind == GW_API_OPENAI_COMPLETIONS)
			     ? GW_STYLE_OPENAI
			     : GW_STYLE_OLLAMA;
	st = gw_api_load_object(body, len, lim, &root, err);
	if (st != CM_OK)
		goto out;
	switch (kind) {
	case GW_API_OLLAMA_GENERATE:
		st = gw_api_ollama_generate(root, lim, arena, out, err);
		break;
	case GW_API_OLLAMA_CHAT:
		st = gw_api_ollama_chat(root, lim, arena, out, err);
		break;
	case GW_API_OPENAI_CHAT:
		st = gw_api_openai_chat(root, lim, arena, out, err);
		break;
	case GW_API_OPENAI_COMPLETIONS:
		st = gw_api_openai_completions(root, lim, arena, out, err);
		break;
	default:
		gw_api_error_set(err, 500, NULL, NULL, "internal error");
		st = CM_EINTERNAL;
		break;
	}
	/* no limit asked for (or a limit, unless strict): as much as fits */
	if (st == CM_OK && (!out->max_tokens_given || !lim->max_tokens_strict))
		out->submit_flags |= PROTO_SUBMIT_F_FIT;
out:
	json_decref(root);
	return st;
}

enum cm_status gw_api_parse_show(const void *body, size_t len,
				 const struct gw_api_limits *lim,
				 struct cm_arena *arena, struct proto_str *model,
				 struct gw_api_error *err)
{
	json_t *root = NULL;
	enum cm_status st;

	memset(err, 0, sizeof(*err));
	st = gw_api_load_object(body, len, lim, &root, err);
	if (st != CM_OK)
		goto out;
	if (gw_api_field(root, "model") || !gw_api_field(root, "name"))
		st = gw_api_get_model(root, "model", arena, model, err);
	else
		st = gw_api_get_model(root, "name", arena, model, err);
out:
	json_decref(root);
	return st;
}

void gw_api_to_submit(const struct gw_api_request *r, struct proto_submit *s,
		      uint32_t *flags)
{
	memset(s, 0, sizeof(*s));
	s->tenant_id = (struct proto_str){ "", 0 };
	s->key_id = (struct proto_str){ "", 0 };
	s->model = r->model;
	s->klass = PROTO_CLASS_INTERACTIVE;
	s->max_tokens = r->max_tokens;
	s->max_prompt_tokens = 0;
	s->sampling = r->sampling;
	s->n_stop = r->n_stop;
	s->stop = r->stop;
	s->prompt_kind = r->prompt_kind;
	s->text = r->prompt_kind == PROTO_PROMPT_TEXT ? r->text : (struct proto_str){ "", 0 };
	s->n_messages = r->prompt_kind == PROTO_PROMPT_CHAT ? r->n_messages : 0;
	s->messages = s->n_messages ? r->messages : NULL;
	s->template_name = (struct proto_str){ "", 0 };
	s->constraint_kind = r->constraint_kind;
	s->constraint = r->constraint_kind ? r->constraint : (struct proto_str){ "", 0 };
	s->top_logprobs = r->top_logprobs;
	s->tools = r->tools.len ? r->tools : (struct proto_str){ "", 0 };
	s->tool_choice = r->tool_choice;
	s->tool_name = r->tool_choice == PROTO_TOOLS_NAMED ? r->tool_name : (struct proto_str){ "", 0 };
	s->parallel_tool_calls = r->parallel_tool_calls ? 1 : 0;
	s->think = r->think;
	s->think_budget = r->think_budget;
	*flags = r->submit_flags;
}

size_t gw_api_submit_bytes(const struct gw_api_request *r)
{
	/* fixed fields, sampling, tenant, key, salt, template name: < 1 KiB */
	size_t n = 1024 + r->model.len + r->text.len + r->constraint.len + r->tools.len +
		   r->tool_name.len;

	for (uint32_t i = 0; i < r->n_stop; i++)
		n += 4 + r->stop[i].len;
	for (uint32_t i = 0; i < r->n_messages; i++)
		n += 16 + r->messages[i].role.len + r->messages[i].content.len +
		     r->messages[i].tool_calls.len + r->messages[i].tool_call_id.len;
	return n;
}

int64_t gw_api_token_estimate(const struct gw_api_request *r, uint32_t context)
{
	uint64_t bytes = r->text.len + r->tools.len, prompt;
	int64_t estimate;

	for (uint32_t i = 0; i < r->n_messages; i++)
		bytes += r->messages[i].content.len + r->messages[i].tool_calls.len + 8;
	prompt = bytes / 4 + 1;
	estimate = (int64_t)(prompt + r->max_tokens);
	if ((r->submit_flags & PROTO_SUBMIT_F_FIT) && estimate > (int64_t)context &&
	    prompt <= context)
		estimate = (int64_t)context;
	if (r->n > 1) {
		/* each further choice: its own completion (the prompt is counted once) */
		int64_t completion = estimate > (int64_t)prompt ? estimate - (int64_t)prompt : 0;

		estimate += (int64_t)(r->n - 1) * completion;
	}
	return estimate;
}
