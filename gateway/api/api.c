/*
 * api.c - request validation and response rendering for the Ollama and
 * OpenAI APIs (see api.h for the rules, docs/api.md for the fields).
 *
 * Parsing: cheap byte checks (UTF-8, NUL, \u0000, depth) first, then
 * jansson with duplicate keys rejected, then one reader per endpoint.
 * Every accepted string is copied into the caller's arena so that the
 * jansson tree can be released before the function returns.
 * Rendering: jansson objects dumped compactly into a cm_buf.
 */
#include "gateway/api/api.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/utf8.h"

/* Ranges accepted for sampling parameters (both APIs). */
#define API_TEMPERATURE_MAX 2.0
#define API_TOP_K_MAX 100000
#define API_REPEAT_PENALTY_MAX 10.0
#define API_PENALTY_ABS_MAX 2.0
#define API_REPEAT_LAST_N_MAX 1048576
#define API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS 16 /* OpenAI's default */

void gw_api_limits_defaults(struct gw_api_limits *l)
{
	l->json_depth = CM_LIM_JSON_DEPTH;
	l->messages = CM_LIM_MESSAGES;
	l->stop_strings = CM_LIM_STOP_STRINGS;
	l->stop_string_bytes = CM_LIM_STOP_STRING_BYTES;
	l->max_output_tokens = CM_LIM_MAX_OUTPUT_TOKENS;
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
	    !lim_ok("limits.max_output_tokens", l->max_output_tokens, 1, 1048576, err, err_len))
		return CM_EINVAL;
	return CM_OK;
}

/* ---- errors ------------------------------------------------------------ */

void gw_api_error_set(struct gw_api_error *err, int status, const char *param,
		      const char *code, const char *fmt, ...)
{
	va_list ap;

	err->status = status;
	err->code = code;
	snprintf(err->param, sizeof(err->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
}

void gw_api_error_model_not_found(struct gw_api_error *err, const char *name,
				  size_t len)
{
	char shown[65];
	size_t n = len > 64 ? 64 : len;

	/* cut on a character boundary so the message stays valid UTF-8 */
	n = cm_utf8_complete_prefix((const uint8_t *)name, n);
	memcpy(shown, name, n);
	shown[n] = '\0';
	gw_api_error_set(err, 404, "model", "model_not_found",
			 "model '%s' not found", shown);
}

static const char *openai_type(int status)
{
	switch (status) {
	case 401: return "authentication_error";
	case 403: return "permission_error";
	case 404: return "not_found_error";
	case 429: return "rate_limit_error";
	default: return status >= 500 ? "server_error" : "invalid_request_error";
	}
}

static enum cm_status dump_json(struct cm_buf *out, json_t *j)
{
	size_t n;
	enum cm_status st;

	if (!j)
		return CM_ENOMEM;
	n = json_dumpb(j, NULL, 0, JSON_COMPACT);
	if (n == 0) {
		json_decref(j);
		return CM_EINVAL;
	}
	st = cm_buf_reserve(out, n);
	if (st == CM_OK) {
		json_dumpb(j, (char *)cm_buf_tail(out), n, JSON_COMPACT);
		cm_buf_commit(out, n);
	}
	json_decref(j);
	return st;
}

/* json_string of text we produced or validated; invalid UTF-8 -> U+FFFD-free "" */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s ? s : "");

	return j ? j : json_string("");
}

static json_t *error_object(enum gw_api_style style, const struct gw_api_error *e)
{
	json_t *o = json_object(), *in;

	if (!o)
		return NULL;
	if (style == GW_STYLE_OLLAMA) {
		json_object_set_new(o, "error", jstr(e->message));
		return o;
	}
	in = json_object();
	json_object_set_new(in, "message", jstr(e->message));
	json_object_set_new(in, "type", json_string(openai_type(e->status)));
	json_object_set_new(in, "param", e->param[0] ? jstr(e->param) : json_null());
	json_object_set_new(in, "code", e->code ? jstr(e->code) : json_null());
	json_object_set_new(o, "error", in);
	return o;
}

enum cm_status gw_api_render_error(struct cm_buf *out, enum gw_api_style style,
				   const struct gw_api_error *err)
{
	return dump_json(out, error_object(style, err));
}

enum cm_status gw_api_http_error(int status, const char *message,
				 const char *path, struct cm_buf *body,
				 const char **content_type, void *ctx)
{
	struct gw_api_error e;

	gw_api_error_set(&e, status, NULL, NULL, "%s", message);
	*content_type = GW_API_CT_JSON;
	return gw_api_render_error(body, gw_paths_style(path), &e);
}

enum cm_status gw_api_render_manage_forbidden(struct cm_buf *out, const char *op)
{
	struct gw_api_error e;

	gw_api_error_set(&e, 403, NULL, NULL,
			 "model management (%s) is not available through the API: "
			 "models are installed and configured by the operator",
			 op ? op : "this operation");
	return gw_api_render_error(out, GW_STYLE_OLLAMA, &e);
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

static enum cm_status load_object(const void *body, size_t len,
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

/* ---- field readers ------------------------------------------------------ */

/* Describes a JSON value for "found ..." without quoting client strings. */
static void describe(const json_t *v, char *buf, size_t len)
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

static enum cm_status bad(struct gw_api_error *err, const char *field,
			  const char *expected, const json_t *found)
{
	char f[64];

	describe(found, f, sizeof(f));
	gw_api_error_set(err, 400, field, NULL, "%s: expected %s, found %s", field,
			 expected, f);
	return CM_EINVAL;
}

static enum cm_status unsupported(struct gw_api_error *err, const char *field,
				  const char *what)
{
	gw_api_error_set(err, 400, field, "unsupported", "%s: %s", field, what);
	return CM_EINVAL;
}

static enum cm_status oom(struct gw_api_error *err)
{
	gw_api_error_set(err, 500, NULL, NULL, "request too large to process");
	return CM_ENOMEM;
}

/* "present" = the key exists and is not null. */
static json_t *field(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_null(v) ? NULL : v;
}

static enum cm_status copy_str(struct cm_arena *a, const json_t *v,
			       struct proto_str *out, struct gw_api_error *err)
{
	size_t n = json_string_length(v);
	char *s;

	if (n > UINT32_MAX)
		return oom(err);
	s = cm_arena_strndup(a, json_string_value(v), n);
	if (!s)
		return oom(err);
	out->ptr = s;
	out->len = (uint32_t)n;
	return CM_OK;
}

static enum cm_status get_bool(const json_t *o, const char *key,
			       const char *name, int *out, struct gw_api_error *err)
{
	json_t *v = field(o, key);

	if (!v)
		return CM_OK;
	if (!json_is_boolean(v))
		return bad(err, name, "a boolean", v);
	*out = json_is_true(v);
	return CM_OK;
}

/* Integer in [lo, hi]; *given set when present. */
static enum cm_status get_int(const json_t *o, const char *key,
			      const char *name, json_int_t lo, json_int_t hi,
			      json_int_t *out, int *given,
			      struct gw_api_error *err)
{
	json_t *v = field(o, key);
	char exp[96];

	if (given)
		*given = 0;
	if (!v)
		return CM_OK;
	snprintf(exp, sizeof(exp), "an integer from %" JSON_INTEGER_FORMAT
		 " to %" JSON_INTEGER_FORMAT, lo, hi);
	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return bad(err, name, exp, v);
	*out = json_integer_value(v);
	if (given)
		*given = 1;
	return CM_OK;
}

static enum cm_status get_num(const json_t *o, const char *key,
			      const char *name, double lo, double hi,
			      float *out, struct gw_api_error *err)
{
	json_t *v = field(o, key);
	char exp[96];
	double d;

	if (!v)
		return CM_OK;
	snprintf(exp, sizeof(exp), "a number from %g to %g", lo, hi);
	if (!json_is_number(v))
		return bad(err, name, exp, v);
	d = json_number_value(v);
	if (!isfinite(d) || d < lo || d > hi)
		return bad(err, name, exp, v);
	*out = (float)d;
	return CM_OK;
}

static enum cm_status get_model(const json_t *o, const char *key,
				struct cm_arena *a, struct proto_str *out,
				struct gw_api_error *err)
{
	json_t *v = field(o, key);

	if (!v || !json_is_string(v) || json_string_length(v) == 0)
		return bad(err, key, "a non-empty model name", v);
	if (json_string_length(v) > GW_API_MODEL_NAME_MAX) {
		gw_api_error_set(err, 400, key, NULL,
				 "%s: expected a name of at most %d bytes, found %zu bytes",
				 key, GW_API_MODEL_NAME_MAX, json_string_length(v));
		return CM_EINVAL;
	}
	return copy_str(a, v, out, err);
}

/* stop: a string or an array of strings; null or absent = none. */
static enum cm_status get_stop(const json_t *o, const char *key,
			       const char *name, const struct gw_api_limits *lim,
			       struct cm_arena *a, struct gw_api_request *r,
			       struct gw_api_error *err)
{
	json_t *v = field(o, key);
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
		return bad(err, name, "a string or an array of strings", v);
	}
	if (n > lim->stop_strings) {
		gw_api_error_set(err, 400, name, NULL,
				 "%s: expected at most %u stop strings, found %zu",
				 name, lim->stop_strings, n);
		return CM_EINVAL;
	}
	r->stop = n ? cm_arena_calloc(a, n, sizeof(*r->stop)) : NULL;
	if (n && !r->stop)
		return oom(err);
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_is_string(v) ? v : json_array_get(v, i);

		snprintf(fname, sizeof(fname), "%s[%zu]", name, i);
		if (!json_is_string(s))
			return bad(err, fname, "a string", s);
		if (json_string_length(s) == 0)
			return bad(err, fname, "a non-empty string", s);
		if (json_string_length(s) > lim->stop_string_bytes) {
			gw_api_error_set(err, 400, name, NULL,
					 "%s: expected at most %u bytes, found %zu bytes",
					 fname, lim->stop_string_bytes,
					 json_string_length(s));
			return CM_EINVAL;
		}
		st = copy_str(a, s, &r->stop[i], err);
		if (st != CM_OK)
			return st;
	}
	r->n_stop = (uint32_t)n;
	return CM_OK;
}

/* A field that must be absent, null, false, "" or empty ([] / {}). */
static int is_empty(const json_t *v)
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

static enum cm_status refuse_if_set(const json_t *o, const char *key,
				    const char *what, struct gw_api_error *err)
{
	if (!is_empty(json_object_get(o, key)))
		return unsupported(err, key, what);
	return CM_OK;
}

/* ---- defaults ---------------------------------------------------------- */

static void ollama_defaults(struct gw_api_request *r, const struct gw_api_limits *lim)
{
	r->style = GW_STYLE_OLLAMA;
	r->stream = 1;
	r->max_tokens = lim->max_output_tokens;
	r->sampling.temperature = 0.8f;
	r->sampling.top_k = 40;
	r->sampling.top_p = 0.9f;
	r->sampling.min_p = 0.0f;
	r->sampling.repeat_penalty = 1.1f;
	r->sampling.repeat_last_n = 64;
	r->sampling.presence_penalty = 0.0f;
	r->sampling.frequency_penalty = 0.0f;
}

static void openai_defaults(struct gw_api_request *r, const struct gw_api_limits *lim)
{
	r->style = GW_STYLE_OPENAI;
	r->stream = 0;
	r->max_tokens = lim->max_output_tokens;
	r->sampling.temperature = 1.0f;
	r->sampling.top_k = 0;
	r->sampling.top_p = 1.0f;
	r->sampling.min_p = 0.0f;
	r->sampling.repeat_penalty = 1.0f;
	r->sampling.repeat_last_n = 64;
}

/* ---- Ollama -------------------------------------------------------------- */

/* options{...}: num_ctx and the runtime/hardware options are ignored. */
static enum cm_status ollama_options(const json_t *root,
				     const struct gw_api_limits *lim,
				     struct cm_arena *a, struct gw_api_request *r,
				     struct gw_api_error *err)
{
	json_t *o = field(root, "options");
	json_int_t iv;
	int given;
	enum cm_status st;

	if (!o)
		return CM_OK;
	if (!json_is_object(o))
		return bad(err, "options", "an object", o);
	/* num_predict: -1 (and -2, "fill the context") = up to the limit */
	st = get_int(o, "num_predict", "options.num_predict", -2,
		     (json_int_t)lim->max_output_tokens, &iv, &given, err);
	if (st == CM_OK && given) {
		if (iv == 0)
			return bad(err, "options.num_predict",
				   "an integer from 1 to the limit, or -1", json_object_get(o, "num_predict"));
		if (iv > 0) {
			r->max_tokens = (uint32_t)iv;
			r->max_tokens_given = 1;
		}
	}
	if (st == CM_OK)
		st = get_num(o, "temperature", "options.temperature", 0.0,
			     API_TEMPERATURE_MAX, &r->sampling.temperature, err);
	if (st == CM_OK) {
		st = get_int(o, "top_k", "options.top_k", 0, API_TOP_K_MAX, &iv,
			     &given, err);
		if (st == CM_OK && given)
			r->sampling.top_k = (uint32_t)iv;
	}
	if (st == CM_OK)
		st = get_num(o, "top_p", "options.top_p", 0.0, 1.0,
			     &r->sampling.top_p, err);
	if (st == CM_OK)
		st = get_num(o, "min_p", "options.min_p", 0.0, 1.0,
			     &r->sampling.min_p, err);
	if (st == CM_OK)
		st = get_num(o, "repeat_penalty", "options.repeat_penalty", 0.0,
			     API_REPEAT_PENALTY_MAX, &r->sampling.repeat_penalty, err);
	if (st == CM_OK) {
		/* -1 = the whole context */
		st = get_int(o, "repeat_last_n", "options.repeat_last_n", -1,
			     API_REPEAT_LAST_N_MAX, &iv, &given, err);
		if (st == CM_OK && given)
			r->sampling.repeat_last_n = iv < 0 ? UINT32_MAX : (uint32_t)iv;
	}
	if (st == CM_OK)
		st = get_num(o, "presence_penalty", "options.presence_penalty",
			     -API_PENALTY_ABS_MAX, API_PENALTY_ABS_MAX,
			     &r->sampling.presence_penalty, err);
	if (st == CM_OK)
		st = get_num(o, "frequency_penalty", "options.frequency_penalty",
			     -API_PENALTY_ABS_MAX, API_PENALTY_ABS_MAX,
			     &r->sampling.frequency_penalty, err);
	if (st == CM_OK) {
		/* -1 = random (no seed) */
		st = get_int(o, "seed", "options.seed", -1, INT64_MAX, &iv, &given, err);
		if (st == CM_OK && given && iv >= 0) {
			r->sampling.seed = (uint64_t)iv;
			r->submit_flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	if (st == CM_OK)
		st = get_stop(o, "stop", "options.stop", lim, a, r, err);
	return st;
}

/* format: "" / null only (structured output is not supported). */
static enum cm_status ollama_common(const json_t *root,
				    const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err)
{
	enum cm_status st;

	st = get_model(root, "model", a, &r->model, err);
	if (st == CM_OK)
		st = get_bool(root, "stream", "stream", &r->stream, err);
	if (st == CM_OK)
		st = refuse_if_set(root, "format",
				   "structured output formats are not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "tools", "tool calling is not supported", err);
	if (st == CM_OK)
		st = ollama_options(root, lim, a, r, err);
	/* keep_alive: ignored (models stay loaded; the operator decides) */
	return st;
}

static enum cm_status ollama_generate(const json_t *root,
				      const struct gw_api_limits *lim,
				      struct cm_arena *a, struct gw_api_request *r,
				      struct gw_api_error *err)
{
	json_t *prompt, *system, *tmpl;
	enum cm_status st;

	ollama_defaults(r, lim);
	st = ollama_common(root, lim, a, r, err);
	if (st != CM_OK)
		return st;
	st = get_bool(root, "raw", "raw", &r->raw, err);
	if (st != CM_OK)
		return st;
	tmpl = field(root, "template");
	if (tmpl && !json_is_string(tmpl))
		return bad(err, "template", "a string", tmpl);
	if (!is_empty(tmpl))
		return unsupported(err, "template",
				   "custom prompt templates are not supported; the model's own chat template is used");
	st = refuse_if_set(root, "images", "image inputs are not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "suffix", "fill-in-the-middle (suffix) is not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "context",
				   "continuing from a context array is not supported; use /api/chat",
				   err);
	if (st != CM_OK)
		return st;
	prompt = field(root, "prompt");
	if (!prompt || !json_is_string(prompt) || json_string_length(prompt) == 0)
		return bad(err, "prompt", "a non-empty string", prompt);
	system = field(root, "system");
	if (system && !json_is_string(system))
		return bad(err, "system", "a string", system);
	if (r->raw) {
		/* raw: the prompt goes to the model as is; system is not applied */
		r->prompt_kind = PROTO_PROMPT_TEXT;
		r->submit_flags |= PROTO_SUBMIT_F_ADD_BOS;
		return copy_str(a, prompt, &r->text, err);
	}
	r->prompt_kind = PROTO_PROMPT_CHAT;
	r->messages = cm_arena_calloc(a, 2, sizeof(*r->messages));
	if (!r->messages)
		return oom(err);
	if (system && json_string_length(system) > 0) {
		r->messages[0].role = (struct proto_str){ "system", 6 };
		st = copy_str(a, system, &r->messages[0].content, err);
		if (st != CM_OK)
			return st;
		r->n_messages = 1;
	}
	r->messages[r->n_messages].role = (struct proto_str){ "user", 4 };
	st = copy_str(a, prompt, &r->messages[r->n_messages].content, err);
	if (st != CM_OK)
		return st;
	r->n_messages++;
	return CM_OK;
}

static int role_of(const char *s, const char *const *roles, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, roles[i]) == 0)
			return (int)i;
	return -1;
}

/* messages: a non-empty array, at most limits.messages. */
static enum cm_status messages_array(const json_t *root,
				     const struct gw_api_limits *lim,
				     struct cm_arena *a, struct gw_api_request *r,
				     json_t **out, struct gw_api_error *err)
{
	json_t *m = field(root, "messages");
	size_t n;

	if (!m || !json_is_array(m))
		return bad(err, "messages", "an array of messages", m);
	n = json_array_size(m);
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
		return oom(err);
	r->n_messages = (uint32_t)n;
	r->prompt_kind = PROTO_PROMPT_CHAT;
	*out = m;
	return CM_OK;
}

static enum cm_status ollama_chat(const json_t *root,
				  const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err)
{
	static const char *const roles[] = { "system", "user", "assistant", "tool" };
	json_t *msgs;
	char f[64];
	enum cm_status st;

	ollama_defaults(r, lim);
	st = ollama_common(root, lim, a, r, err);
	if (st == CM_OK)
		st = messages_array(root, lim, a, r, &msgs, err);
	if (st != CM_OK)
		return st;
	for (size_t i = 0; i < r->n_messages; i++) {
		json_t *m = json_array_get(msgs, i), *role, *content;
		int ri;

		snprintf(f, sizeof(f), "messages[%zu]", i);
		if (!json_is_object(m))
			return bad(err, f, "an object with role and content", m);
		role = field(m, "role");
		snprintf(f, sizeof(f), "messages[%zu].role", i);
		if (!json_is_string(role))
			return bad(err, f, "one of system, user, assistant, tool", role);
		ri = role_of(json_string_value(role), roles, 4);
		if (ri < 0) {
			gw_api_error_set(err, 400, f, NULL,
					 "%s: expected one of system, user, assistant, tool, found another string",
					 f);
			return CM_EINVAL;
		}
		r->messages[i].role = (struct proto_str){ roles[ri], (uint32_t)strlen(roles[ri]) };
		snprintf(f, sizeof(f), "messages[%zu].images", i);
		if (!is_empty(json_object_get(m, "images")))
			return unsupported(err, f, "image inputs are not supported");
		content = field(m, "content");
		snprintf(f, sizeof(f), "messages[%zu].content", i);
		if (!content) {
			r->messages[i].content = (struct proto_str){ "", 0 };
			if (ri == 2) /* assistant turns (tool calls) may omit it */
				continue;
			return bad(err, f, "a string", content);
		}
		if (!json_is_string(content))
			return bad(err, f, "a string", content);
		st = copy_str(a, content, &r->messages[i].content, err);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

/* ---- OpenAI ------------------------------------------------------------- */

static enum cm_status openai_common(const json_t *root,
				    const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err)
{
	json_int_t iv, mt = 0, mct = 0;
	int given, g_mt = 0, g_mct = 0;
	json_t *so;
	enum cm_status st;

	st = get_model(root, "model", a, &r->model, err);
	if (st == CM_OK)
		st = get_int(root, "max_tokens", "max_tokens", 1,
			     (json_int_t)lim->max_output_tokens, &mt, &g_mt, err);
	if (st == CM_OK && r->kind == GW_API_OPENAI_CHAT)
		st = get_int(root, "max_completion_tokens", "max_completion_tokens", 1,
			     (json_int_t)lim->max_output_tokens, &mct, &g_mct, err);
	if (st != CM_OK)
		return st;
	if (g_mt && g_mct && mt != mct) {
		gw_api_error_set(err, 400, "max_completion_tokens", NULL,
				 "max_completion_tokens: expected the same value as max_tokens when both are given, found %" JSON_INTEGER_FORMAT " and %" JSON_INTEGER_FORMAT,
				 mct, mt);
		return CM_EINVAL;
	}
	if (g_mt || g_mct) {
		r->max_tokens = (uint32_t)(g_mct ? mct : mt);
		r->max_tokens_given = 1;
	}
	st = get_num(root, "temperature", "temperature", 0.0, API_TEMPERATURE_MAX,
		     &r->sampling.temperature, err);
	if (st == CM_OK)
		st = get_num(root, "top_p", "top_p", 0.0, 1.0, &r->sampling.top_p, err);
	if (st == CM_OK) {
		json_t *n = field(root, "n");

		if (n && (!json_is_integer(n) || json_integer_value(n) != 1))
			return bad(err, "n", "1 (only one choice per request is supported)", n);
	}
	if (st == CM_OK)
		st = get_stop(root, "stop", "stop", lim, a, r, err);
	if (st == CM_OK) {
		st = get_int(root, "seed", "seed", INT64_MIN, INT64_MAX, &iv, &given, err);
		if (st == CM_OK && given) {
			r->sampling.seed = (uint64_t)iv;
			r->submit_flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	if (st == CM_OK)
		st = get_num(root, "presence_penalty", "presence_penalty",
			     -API_PENALTY_ABS_MAX, API_PENALTY_ABS_MAX,
			     &r->sampling.presence_penalty, err);
	if (st == CM_OK)
		st = get_num(root, "frequency_penalty", "frequency_penalty",
			     -API_PENALTY_ABS_MAX, API_PENALTY_ABS_MAX,
			     &r->sampling.frequency_penalty, err);
	if (st == CM_OK)
		st = get_bool(root, "stream", "stream", &r->stream, err);
	if (st != CM_OK)
		return st;
	so = field(root, "stream_options");
	if (so) {
		if (!json_is_object(so))
			return bad(err, "stream_options", "an object", so);
		if (!r->stream) {
			gw_api_error_set(err, 400, "stream_options", NULL,
					 "stream_options: only allowed when stream is true");
			return CM_EINVAL;
		}
		st = get_bool(so, "include_usage", "stream_options.include_usage",
			      &r->include_usage, err);
		if (st != CM_OK)
			return st;
	}
	/* user: ignored (an end-user id for abuse tracking upstream) */
	st = refuse_if_set(root, "logprobs", "log probabilities are not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "tools", "tool calling is not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "functions", "function calling is not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "logit_bias", "logit_bias is not supported", err);
	return st;
}

/* content: a string, or an array of {"type":"text","text":...} parts joined by "\n". */
static enum cm_status openai_content(json_t *content, size_t idx,
				     struct cm_arena *a, struct proto_str *out,
				     struct gw_api_error *err)
{
	char f[80];
	size_t total = 0, n;
	char *s, *p;

	snprintf(f, sizeof(f), "messages[%zu].content", idx);
	if (json_is_string(content))
		return copy_str(a, content, out, err);
	if (!json_is_array(content))
		return bad(err, f, "a string or an array of text parts", content);
	n = json_array_size(content);
	for (size_t j = 0; j < n; j++) {
		json_t *part = json_array_get(content, j), *type, *text;

		snprintf(f, sizeof(f), "messages[%zu].content[%zu]", idx, j);
		if (!json_is_object(part))
			return bad(err, f, "an object {\"type\":\"text\",\"text\":...}", part);
		type = field(part, "type");
		snprintf(f, sizeof(f), "messages[%zu].content[%zu].type", idx, j);
		if (!json_is_string(type))
			return bad(err, f, "\"text\"", type);
		if (strcmp(json_string_value(type), "text") != 0) {
			gw_api_error_set(err, 400, f, "unsupported",
					 "%s: expected \"text\", found another part type (only text content is supported)",
					 f);
			return CM_EINVAL;
		}
		text = field(part, "text");
		snprintf(f, sizeof(f), "messages[%zu].content[%zu].text", idx, j);
		if (!json_is_string(text))
			return bad(err, f, "a string", text);
		total += json_string_length(text) + (j ? 1 : 0);
	}
	if (total > UINT32_MAX)
		return oom(err);
	s = cm_arena_alloc(a, total + 1);
	if (!s)
		return oom(err);
	p = s;
	for (size_t j = 0; j < n; j++) {
		json_t *text = json_object_get(json_array_get(content, j), "text");
		size_t l = json_string_length(text);

		if (j)
			*p++ = '\n';
		memcpy(p, json_string_value(text), l);
		p += l;
	}
	*p = '\0';
	out->ptr = s;
	out->len = (uint32_t)total;
	return CM_OK;
}

static enum cm_status openai_chat(const json_t *root,
				  const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err)
{
	static const char *const roles[] = { "system", "developer", "user",
					     "assistant", "tool" };
	json_t *msgs;
	char f[64];
	enum cm_status st;

	openai_defaults(r, lim);
	st = openai_common(root, lim, a, r, err);
	if (st != CM_OK)
		return st;
	{
		json_t *rf = field(root, "response_format");

		/* {"type":"text"} is the default and accepted */
		if (rf && !is_empty(rf)) {
			json_t *t = json_is_object(rf) ? field(rf, "type") : NULL;

			if (!json_is_string(t) || strcmp(json_string_value(t), "text") != 0)
				return unsupported(err, "response_format",
						   "structured output formats are not supported");
		}
	}
	st = messages_array(root, lim, a, r, &msgs, err);
	if (st != CM_OK)
		return st;
	for (size_t i = 0; i < r->n_messages; i++) {
		json_t *m = json_array_get(msgs, i), *role, *content;
		int ri;

		snprintf(f, sizeof(f), "messages[%zu]", i);
		if (!json_is_object(m))
			return bad(err, f, "an object with role and content", m);
		role = field(m, "role");
		snprintf(f, sizeof(f), "messages[%zu].role", i);
		if (!json_is_string(role))
			return bad(err, f, "one of system, developer, user, assistant, tool", role);
		ri = role_of(json_string_value(role), roles, 5);
		if (ri < 0) {
			gw_api_error_set(err, 400, f, NULL,
					 "%s: expected one of system, developer, user, assistant, tool, found another string",
					 f);
			return CM_EINVAL;
		}
		if (ri == 1) /* developer is the newer name of system */
			ri = 0;
		r->messages[i].role = (struct proto_str){ roles[ri], (uint32_t)strlen(roles[ri]) };
		content = field(m, "content");
		if (!content) {
			r->messages[i].content = (struct proto_str){ "", 0 };
			if (ri == 3) /* assistant with tool_calls: content may be null */
				continue;
			snprintf(f, sizeof(f), "messages[%zu].content", i);
			return bad(err, f, "a string or an array of text parts", content);
		}
		st = openai_content(content, i, a, &r->messages[i].content, err);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

static enum cm_status openai_completions(const json_t *root,
					 const struct gw_api_limits *lim,
					 struct cm_arena *a,
					 struct gw_api_request *r,
					 struct gw_api_error *err)
{
	json_t *prompt, *v;
	enum cm_status st;

	openai_defaults(r, lim);
	r->max_tokens = API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS < lim->max_output_tokens
				? API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS
				: lim->max_output_tokens;
	st = openai_common(root, lim, a, r, err);
	if (st == CM_OK)
		st = refuse_if_set(root, "suffix", "fill-in-the-middle (suffix) is not supported", err);
	if (st == CM_OK)
		st = refuse_if_set(root, "echo", "echo is not supported", err);
	if (st != CM_OK)
		return st;
	v = field(root, "best_of");
	if (v && (!json_is_integer(v) || json_integer_value(v) != 1))
		return bad(err, "best_of", "1 (only one candidate is supported)", v);
	prompt = field(root, "prompt");
	if (json_is_array(prompt)) {
		gw_api_error_set(err, 400, "prompt", "unsupported",
				 "prompt: expected a string, found an array (batched or token prompts are not supported)");
		return CM_EINVAL;
	}
	if (!prompt || !json_is_string(prompt) || json_string_length(prompt) == 0)
		return bad(err, "prompt", "a non-empty string", prompt);
	r->prompt_kind = PROTO_PROMPT_TEXT;
	r->submit_flags |= PROTO_SUBMIT_F_ADD_BOS;
	return copy_str(a, prompt, &r->text, err);
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
	out->style = (kind == GW_API_OPENAI_CHAT || kind == GW_API_OPENAI_COMPLETIONS)
			     ? GW_STYLE_OPENAI
			     : GW_STYLE_OLLAMA;
	st = load_object(body, len, lim, &root, err);
	if (st != CM_OK)
		goto out;
	switch (kind) {
	case GW_API_OLLAMA_GENERATE:
		st = ollama_generate(root, lim, arena, out, err);
		break;
	case GW_API_OLLAMA_CHAT:
		st = ollama_chat(root, lim, arena, out, err);
		break;
	case GW_API_OPENAI_CHAT:
		st = openai_chat(root, lim, arena, out, err);
		break;
	case GW_API_OPENAI_COMPLETIONS:
		st = openai_completions(root, lim, arena, out, err);
		break;
	default:
		gw_api_error_set(err, 500, NULL, NULL, "internal error");
		st = CM_EINTERNAL;
		break;
	}
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
	st = load_object(body, len, lim, &root, err);
	if (st != CM_OK)
		goto out;
	if (field(root, "model") || !field(root, "name"))
		st = get_model(root, "model", arena, model, err);
	else
		st = get_model(root, "name", arena, model, err);
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
	*flags = r->submit_flags;
}

/* ---- generation responses ---------------------------------------------- */

void gw_api_result_from_done(struct gw_api_result *res, const struct proto_done *d)
{
	memset(res, 0, sizeof(*res));
	res->finish = d->finish;
	res->prompt_tokens = d->prompt_tokens;
	res->cached_tokens = d->cached_tokens;
	res->gen_tokens = d->gen_tokens;
	res->load_ns = d->load_ns;
	res->prefill_ns = d->prefill_ns;
	res->decode_ns = d->decode_ns;
	res->ttft_ns = d->ttft_ns;
	res->queue_ns = d->queue_ns;
}

void gw_api_stream_init(struct gw_api_stream *s, const struct gw_api_request *r,
			uint64_t request_id, int64_t wall_ns)
{
	uint8_t rnd[12];
	char hex[25];
	size_t n;

	memset(s, 0, sizeof(*s));
	s->kind = r->kind;
	n = r->model.len < GW_API_MODEL_NAME_MAX ? r->model.len : GW_API_MODEL_NAME_MAX;
	memcpy(s->model, r->model.ptr, n);
	s->model[n] = '\0';
	s->created_s = wall_ns / CM_NS_PER_S;
	s->include_usage = r->include_usage;
	if (cm_random_bytes(rnd, sizeof(rnd)) != CM_OK) {
		memset(rnd, 0, sizeof(rnd));
		for (int i = 0; i < 8; i++)
			rnd[i] = (uint8_t)(request_id >> (8 * i));
	}
	cm_hex_encode(rnd, sizeof(rnd), hex);
	snprintf(s->id, sizeof(s->id), "%s%s",
		 r->kind == GW_API_OPENAI_COMPLETIONS ? "cmpl-" : "chatcmpl-", hex);
}

const char *gw_api_content_type(const struct gw_api_request *r)
{
	if (!r->stream)
		return GW_API_CT_JSON;
	return r->style == GW_STYLE_OPENAI ? GW_API_CT_SSE : GW_API_CT_NDJSON;
}

static const char *finish_name(uint8_t f)
{
	switch (f) {
	case PROTO_FINISH_STOP: return "stop";
	case PROTO_FINISH_LENGTH: return "length";
	default: return "cancelled";
	}
}

static json_t *jstrn(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);

	/* the worker sends validated UTF-8; never fail the whole reply on it */
	return j ? j : json_string("");
}

static json_t *ollama_base(const struct gw_api_stream *s)
{
	json_t *o = json_object();
	char ts[32];

	if (!o)
		return NULL;
	cm_wall_iso8601(cm_wall_ns(), ts);
	json_object_set_new(o, "model", jstr(s->model));
	json_object_set_new(o, "created_at", jstr(ts));
	return o;
}

static void ollama_text(json_t *o, const struct gw_api_stream *s,
			const char *text, size_t len)
{
	if (s->kind == GW_API_OLLAMA_CHAT) {
		json_t *m = json_object();

		json_object_set_new(m, "role", json_string("assistant"));
		json_object_set_new(m, "content", jstrn(text, len));
		json_object_set_new(o, "message", m);
	} else {
		json_object_set_new(o, "response", jstrn(text, len));
	}
}

static json_t *operator_fields(const struct gw_api_result *res)
{
	json_t *x = json_object();

	json_object_set_new(x, "ttft_ns", json_integer(res->ttft_ns));
	json_object_set_new(x, "queue_ns", json_integer(res->queue_ns));
	json_object_set_new(x, "cached_prompt_tokens", json_integer(res->cached_tokens));
	return x;
}

static void ollama_done(json_t *o, const struct gw_api_result *res)
{
	json_object_set_new(o, "done", json_true());
	json_object_set_new(o, "done_reason", json_string(finish_name(res->finish)));
	json_object_set_new(o, "total_duration", json_integer(res->total_ns));
	json_object_set_new(o, "load_duration", json_integer(res->load_ns));
	json_object_set_new(o, "prompt_eval_count", json_integer(res->prompt_tokens));
	json_object_set_new(o, "prompt_eval_duration", json_integer(res->prefill_ns));
	json_object_set_new(o, "eval_count", json_integer(res->gen_tokens));
	json_object_set_new(o, "eval_duration", json_integer(res->decode_ns));
	json_object_set_new(o, "sluice", operator_fields(res));
}

static json_t *usage_object(const struct gw_api_result *res)
{
	json_t *u = json_object(), *d = json_object();

	json_object_set_new(u, "prompt_tokens", json_integer(res->prompt_tokens));
	json_object_set_new(u, "completion_tokens", json_integer(res->gen_tokens));
	json_object_set_new(u, "total_tokens",
			    json_integer((json_int_t)res->prompt_tokens + res->gen_tokens));
	json_object_set_new(d, "cached_tokens", json_integer(res->cached_tokens));
	json_object_set_new(u, "prompt_tokens_details", d);
	return u;
}

static json_t *openai_base(const struct gw_api_stream *s, int chunk)
{
	json_t *o = json_object();
	const char *obj;

	if (!o)
		return NULL;
	if (s->kind == GW_API_OPENAI_COMPLETIONS)
		obj = "text_completion";
	else
		obj = chunk ? "chat.completion.chunk" : "chat.completion";
	json_object_set_new(o, "id", jstr(s->id));
	json_object_set_new(o, "object", json_string(obj));
	json_object_set_new(o, "created", json_integer(s->created_s));
	json_object_set_new(o, "model", jstr(s->model));
	return o;
}

/* One choice: delta (chat chunk), message (chat full) or text (completions). */
static json_t *openai_choice(const struct gw_api_stream *s, int chunk,
			     int with_role, const char *text, size_t len,
			     const char *finish)
{
	json_t *c = json_object();

	json_object_set_new(c, "index", json_integer(0));
	if (s->kind == GW_API_OPENAI_COMPLETIONS) {
		json_object_set_new(c, "text", jstrn(text, len));
	} else {
		json_t *m = json_object();

		if (with_role)
			json_object_set_new(m, "role", json_string("assistant"));
		if (text)
			json_object_set_new(m, "content", jstrn(text, len));
		json_object_set_new(c, chunk ? "delta" : "message", m);
	}
	json_object_set_new(c, "logprobs", json_null());
	json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
	return c;
}

static enum cm_status sse_event(struct cm_buf *out, json_t *j)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st = cm_buf_append(out, "data: ", 6);

	if (st == CM_OK)
		st = dump_json(out, j);
	else
		json_decref(j);
	if (st == CM_OK)
		st = cm_buf_append(out, "\n\n", 2);
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

static enum cm_status ndjson_line(struct cm_buf *out, json_t *j)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st = dump_json(out, j);

	if (st == CM_OK)
		st = cm_buf_append(out, "\n", 1);
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

/*
 * Appends s[0..n) escaped as the inside of a JSON string.  The per-token
 * path renders by hand (no jansson tree per token); `s` must be valid UTF-8.
 */
static enum cm_status esc_append(struct cm_buf *out, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t start = 0;
	enum cm_status st = CM_OK;

	for (size_t i = 0; i < n && st == CM_OK; i++) {
		unsigned char c = (unsigned char)s[i];
		char u[7];
		const char *rep;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		switch (c) {
		case '"': rep = "\\\""; break;
		case '\\': rep = "\\\\"; break;
		case '\n': rep = "\\n"; break;
		case '\r': rep = "\\r"; break;
		case '\t': rep = "\\t"; break;
		case '\b': rep = "\\b"; break;
		case '\f': rep = "\\f"; break;
		default:
			u[0] = '\\';
			u[1] = 'u';
			u[2] = '0';
			u[3] = '0';
			u[4] = hex[c >> 4];
			u[5] = hex[c & 15];
			u[6] = '\0';
			rep = u;
			break;
		}
		st = cm_buf_append(out, s + start, i - start);
		if (st == CM_OK)
			st = cm_buf_append_str(out, rep);
		start = i + 1;
	}
	if (st == CM_OK)
		st = cm_buf_append(out, s + start, n - start);
	return st;
}

enum cm_status gw_api_render_chunk(struct cm_buf *out, struct gw_api_stream *s,
				   const char *text, size_t len)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st;

	/* the worker sends validated UTF-8; never emit invalid JSON */
	if (!cm_utf8_valid(text, len))
		len = 0;
	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT) {
		char ts[32];

		cm_wall_iso8601(cm_wall_ns(), ts);
		st = cm_buf_append_str(out, "{\"model\":\"");
		if (st == CM_OK)
			st = esc_append(out, s->model, strlen(s->model));
		if (st == CM_OK)
			st = cm_buf_printf(out, "\",\"created_at\":\"%s\",%s", ts,
					   s->kind == GW_API_OLLAMA_CHAT
						   ? "\"message\":{\"role\":\"assistant\",\"content\":\""
						   : "\"response\":\"");
		if (st == CM_OK)
			st = esc_append(out, text, len);
		if (st == CM_OK)
			st = cm_buf_append_str(out, s->kind == GW_API_OLLAMA_CHAT
							    ? "\"},\"done\":false}\n"
							    : "\",\"done\":false}\n");
	} else {
		int compl = s->kind == GW_API_OPENAI_COMPLETIONS;

		st = cm_buf_printf(out, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64
				   ",\"model\":\"", s->id,
				   compl ? "text_completion" : "chat.completion.chunk",
				   s->created_s);
		if (st == CM_OK)
			st = esc_append(out, s->model, strlen(s->model));
		if (st == CM_OK)
			st = cm_buf_append_str(out, compl ? "\",\"choices\":[{\"index\":0,\"text\":\""
						  : s->chunks == 0
							  ? "\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\""
							  : "\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"");
		if (st == CM_OK)
			st = esc_append(out, text, len);
		if (st == CM_OK)
			st = cm_buf_append_str(out, compl ? "\",\"logprobs\":null,\"finish_reason\":null}]"
						  : "\"},\"logprobs\":null,\"finish_reason\":null}]");
		if (st == CM_OK)
			st = cm_buf_append_str(out, s->include_usage ? ",\"usage\":null}\n\n" : "}\n\n");
	}
	if (st != CM_OK) {
		cm_buf_truncate(out, mark);
		return st;
	}
	s->chunks++;
	return CM_OK;
}

enum cm_status gw_api_render_final(struct cm_buf *out, struct gw_api_stream *s,
				   const struct gw_api_result *res)
{
	size_t mark = cm_buf_len(out);
	json_t *o, *choices;
	enum cm_status st;

	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT) {
		o = ollama_base(s);
		if (!o)
			return CM_ENOMEM;
		ollama_text(o, s, "", 0);
		ollama_done(o, res);
		return ndjson_line(out, o);
	}
	o = openai_base(s, 1);
	choices = json_array();
	if (!o || !choices) {
		json_decref(o);
		json_decref(choices);
		return CM_ENOMEM;
	}
	json_array_append_new(choices, openai_choice(s, 1, s->chunks == 0,
						     s->kind == GW_API_OPENAI_CHAT ? NULL : "",
						     0, finish_name(res->finish)));
	json_object_set_new(o, "choices", choices);
	if (s->include_usage) {
		json_object_set_new(o, "usage", json_null());
	} else {
		json_object_set_new(o, "sluice", operator_fields(res));
	}
	st = sse_event(out, o);
	if (st == CM_OK && s->include_usage) {
		o = openai_base(s, 1);
		if (!o) {
			st = CM_ENOMEM;
		} else {
			json_object_set_new(o, "choices", json_array());
			json_object_set_new(o, "usage", usage_object(res));
			json_object_set_new(o, "sluice", operator_fields(res));
			st = sse_event(out, o);
		}
	}
	if (st == CM_OK)
		st = cm_buf_append_str(out, "data: [DONE]\n\n");
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	else
		s->chunks++;
	return st;
}

enum cm_status gw_api_render_full(struct cm_buf *out, struct gw_api_stream *s,
				  const char *text, size_t len,
				  const struct gw_api_result *res)
{
	json_t *o, *choices;

	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT) {
		o = ollama_base(s);
		if (!o)
			return CM_ENOMEM;
		ollama_text(o, s, text, len);
		ollama_done(o, res);
		return dump_json(out, o);
	}
	o = openai_base(s, 0);
	choices = json_array();
	if (!o || !choices) {
		json_decref(o);
		json_decref(choices);
		return CM_ENOMEM;
	}
	json_array_append_new(choices, openai_choice(s, 0, 1, text, len,
						     finish_name(res->finish)));
	json_object_set_new(o, "choices", choices);
	json_object_set_new(o, "usage", usage_object(res));
	json_object_set_new(o, "sluice", operator_fields(res));
	return dump_json(out, o);
}

enum cm_status gw_api_render_stream_error(struct cm_buf *out,
					  const struct gw_api_stream *s,
					  const struct gw_api_error *err)
{
	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT)
		return ndjson_line(out, error_object(GW_STYLE_OLLAMA, err));
	return sse_event(out, error_object(GW_STYLE_OPENAI, err));
}

/* ---- fixed endpoints --------------------------------------------------- */

enum cm_status gw_api_render_version(struct cm_buf *out)
{
	json_t *o = json_object();

	if (!o)
		return CM_ENOMEM;
	json_object_set_new(o, "version", json_string(GW_API_OLLAMA_COMPAT_VERSION));
	json_object_set_new(o, "sluice_version", json_string(SLUICE_VERSION));
	return dump_json(out, o);
}

static json_t *model_details(const struct gw_api_model *m)
{
	json_t *d = json_object(), *fams = json_array();

	json_object_set_new(d, "parent_model", json_string(""));
	json_object_set_new(d, "format", json_string("gguf"));
	json_object_set_new(d, "family", jstr(m->family));
	json_array_append_new(fams, jstr(m->family));
	json_object_set_new(d, "families", fams);
	json_object_set_new(d, "parameter_size", jstr(m->parameter_size));
	json_object_set_new(d, "quantization_level", jstr(m->quantization));
	return d;
}

static json_t *model_entry(const struct gw_api_model *m)
{
	json_t *o = json_object();
	char ts[32], hex[2 * PROTO_DIGEST_LEN + 1];

	cm_wall_iso8601(m->modified_wall_ns, ts);
	cm_hex_encode(m->sha256, PROTO_DIGEST_LEN, hex);
	json_object_set_new(o, "name", jstr(m->name));
	json_object_set_new(o, "model", jstr(m->name));
	json_object_set_new(o, "modified_at", jstr(ts));
	json_object_set_new(o, "size", json_integer((json_int_t)m->size_bytes));
	json_object_set_new(o, "digest", jstr(hex));
	json_object_set_new(o, "details", model_details(m));
	return o;
}

static enum cm_status model_list(struct cm_buf *out, const struct gw_api_model *m,
				 size_t n, int ps)
{
	json_t *o = json_object(), *arr = json_array();

	if (!o || !arr) {
		json_decref(o);
		json_decref(arr);
		return CM_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = model_entry(&m[i]);

		if (ps) {
			/* models stay loaded until the operator stops the worker */
			json_object_set_new(e, "expires_at", json_string("2999-12-31T23:59:59Z"));
			json_object_set_new(e, "size_vram", json_integer((json_int_t)m[i].vram_bytes));
		}
		json_array_append_new(arr, e);
	}
	json_object_set_new(o, "models", arr);
	return dump_json(out, o);
}

enum cm_status gw_api_render_tags(struct cm_buf *out,
				  const struct gw_api_model *m, size_t n)
{
	return model_list(out, m, n, 0);
}

enum cm_status gw_api_render_ps(struct cm_buf *out,
				const struct gw_api_model *m, size_t n)
{
	return model_list(out, m, n, 1);
}

enum cm_status gw_api_render_models(struct cm_buf *out,
				    const struct gw_api_model *m, size_t n)
{
	json_t *o = json_object(), *arr = json_array();

	if (!o || !arr) {
		json_decref(o);
		json_decref(arr);
		return CM_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_object();

		json_object_set_new(e, "id", jstr(m[i].name));
		json_object_set_new(e, "object", json_string("model"));
		json_object_set_new(e, "created",
				    json_integer(m[i].modified_wall_ns / CM_NS_PER_S));
		json_object_set_new(e, "owned_by", json_string("sluice"));
		json_array_append_new(arr, e);
	}
	json_object_set_new(o, "object", json_string("list"));
	json_object_set_new(o, "data", arr);
	return dump_json(out, o);
}

enum cm_status gw_api_render_show(struct cm_buf *out, const struct gw_api_model *m)
{
	json_t *o = json_object(), *info = json_object(), *caps = json_array();
	char key[96], ts[32];
	const char *arch = m->architecture ? m->architecture : "llama";

	if (!o || !info || !caps) {
		json_decref(o);
		json_decref(info);
		json_decref(caps);
		return CM_ENOMEM;
	}
	cm_wall_iso8601(m->modified_wall_ns, ts);
	/* no Modelfile, parameters or Go template exist: the worker's config does */
	json_object_set_new(o, "modelfile", json_string(""));
	json_object_set_new(o, "parameters", json_string(""));
	json_object_set_new(o, "template", json_string(""));
	json_object_set_new(o, "details", model_details(m));
	json_object_set_new(info, "general.architecture", jstr(arch));
	snprintf(key, sizeof(key), "%.64s.context_length", arch);
	json_object_set_new(info, key, json_integer(m->context_len));
	json_object_set_new(o, "model_info", info);
	json_array_append_new(caps, json_string("completion"));
	json_object_set_new(o, "capabilities", caps);
	json_object_set_new(o, "modified_at", jstr(ts));
	return dump_json(out, o);
}
