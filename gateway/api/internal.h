/*
 * internal.h - what the files of gateway/api/ share, and nothing outside
 * the folder includes: the JSON field readers (request.c), the shared
 * message loop, the per-dialect request readers (ollama.c, openai.c) and
 * the JSON pieces the renderers assemble (render.c, errors.c).
 *
 * Every reader follows one contract: CM_OK and the output set (or left at
 * its default when the field is absent or null), CM_EINVAL with *err
 * filled ("<field>: expected <what>, found <what>", status 400), CM_ENOMEM
 * with *err filled (status 500).  Strings are copied into the request's
 * arena.  Pure functions, any thread.
 */
#ifndef SLUICE_GATEWAY_API_INTERNAL_H
#define SLUICE_GATEWAY_API_INTERNAL_H

#include <jansson.h>

#include "gateway/api/api.h"

/* Ranges accepted for sampling parameters (both APIs). */
#define GW_API_TEMPERATURE_MAX 2.0
#define GW_API_TOP_K_MAX 100000
#define GW_API_REPEAT_PENALTY_MAX 10.0
#define GW_API_PENALTY_ABS_MAX 2.0
#define GW_API_REPEAT_LAST_N_MAX 1048576
#define GW_API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS 16 /* OpenAI's default */

/* ---- request.c: the body and its fields ---------------------------------- */

/* Byte checks (UTF-8, NUL, \u0000, depth), then jansson; *out an object. */
enum cm_status gw_api_load_object(const void *body, size_t len,
				  const struct gw_api_limits *lim, json_t **out,
				  struct gw_api_error *err) CM_WUR;
/* "found ..." text for a value, never quoting client strings. */
void gw_api_describe(const json_t *v, char *buf, size_t len);
enum cm_status gw_api_bad(struct gw_api_error *err, const char *field,
			  const char *expected, const json_t *found);
enum cm_status gw_api_unsupported(struct gw_api_error *err, const char *field,
				  const char *what);
enum cm_status gw_api_oom(struct gw_api_error *err);
/* The value of `key`, NULL when absent or null. */
json_t *gw_api_field(const json_t *o, const char *key);
enum cm_status gw_api_copy_str(struct cm_arena *a, const json_t *v,
			       struct proto_str *out, struct gw_api_error *err);
enum cm_status gw_api_get_bool(const json_t *o, const char *key,
			       const char *name, int *out, struct gw_api_error *err);
/* Integer in [lo, hi]; *given set when present. */
enum cm_status gw_api_get_int(const json_t *o, const char *key,
			      const char *name, json_int_t lo, json_int_t hi,
			      json_int_t *out, int *given, struct gw_api_error *err);
enum cm_status gw_api_get_num(const json_t *o, const char *key,
			      const char *name, double lo, double hi,
			      float *out, struct gw_api_error *err);
enum cm_status gw_api_get_model(const json_t *o, const char *key,
				struct cm_arena *a, struct proto_str *out,
				struct gw_api_error *err);
/* stop: a string or an array of strings within the limits. */
enum cm_status gw_api_get_stop(const json_t *o, const char *key,
			       const char *name, const struct gw_api_limits *lim,
			       struct cm_arena *a, struct gw_api_request *r,
			       struct gw_api_error *err);
/* Absent, null, false, "", [] or {}. */
int gw_api_is_empty(const json_t *v);
/* CM_EINVAL "unsupported" unless the field is empty. */
enum cm_status gw_api_refuse_if_set(const json_t *o, const char *key,
				    const char *what, struct gw_api_error *err);

/* ---- request.c: chat messages, one loop for both dialects --------------- */

struct gw_api_role_alias {
	const char *alias; /* the dialect's name ("developer") */
	const char *role;  /* the proto/ role it means ("system") */
};

typedef enum cm_status (*gw_api_content_fn)(json_t *content, size_t idx,
					    struct cm_arena *a,
					    struct proto_str *out,
					    struct gw_api_error *err);

/* What differs between the dialects' messages arrays. */
struct gw_api_msg_rules {
	const char *role_expect;                   /* "one of system, user, assistant" */
	const struct gw_api_role_alias *aliases;   /* { NULL } terminated, or NULL */
	int images_refused;                        /* messages[i].images must be empty */
	gw_api_content_fn content;                 /* reads messages[i].content */
	const char *content_expect;                /* for a missing content */
};

/*
 * messages: a non-empty array of at most limits.messages objects, each
 * with a role the worker renders (proto_role_parse, after the dialect's
 * aliases) and a content (assistant turns may omit it).  Sets
 * r->messages, n_messages and prompt_kind CHAT.
 */
enum cm_status gw_api_messages(const json_t *root, const struct gw_api_limits *lim,
			       const struct gw_api_msg_rules *rules,
			       struct cm_arena *a, struct gw_api_request *r,
			       struct gw_api_error *err) CM_WUR;
/* A gw_api_content_fn: content must be a string. */
enum cm_status gw_api_content_string(json_t *content, size_t idx,
				     struct cm_arena *a, struct proto_str *out,
				     struct gw_api_error *err);

/* ---- tools.c: tool calling and thinking -------------------------------------- */

/* tools (both dialects), tool_choice and parallel_tool_calls (OpenAI):
 * checked, r->tools the compact array; a forced call with a constraint
 * already set is refused (call after the constraint fields). */
enum cm_status gw_api_tools(const json_t *root, const struct gw_api_limits *lim,
			    struct cm_arena *a, struct gw_api_request *r,
			    struct gw_api_error *err) CM_WUR;
/* Ollama think, OpenAI chat_template_kwargs.enable_thinking -> r->think;
 * thinking_token_budget (both; 0: thinking off) or limits.thinking_token_budget
 * -> r->think_budget. */
enum cm_status gw_api_think(const json_t *root, const struct gw_api_limits *lim,
			    struct gw_api_request *r, struct gw_api_error *err) CM_WUR;
/* messages[i]'s tool_calls (assistant) and tool_call_id (tool: the id of
 * an earlier call; required in OpenAI) into r->messages[i]. */
enum cm_status gw_api_message_tools(json_t *m, size_t i, struct cm_arena *a,
				    struct gw_api_request *r, struct gw_api_error *err) CM_WUR;

/* render_tools.c: a message's reasoning and tool calls from the collected
 * state (taken); OpenAI's content of a calls-only message becomes null. */
void gw_api_message_extras(json_t *msg, struct gw_api_stream *s, int ollama);
/* The finish_reason of a choice: "tool_calls" for an OpenAI chat choice
 * that called tools and stopped. */
const char *gw_api_finish_of(const struct gw_api_stream *s, uint8_t finish);

/* ---- constraint.c: output constraints and logprobs ------------------------- */

/* OpenAI response_format: text, json_object, json_schema {name, schema, strict}. */
enum cm_status gw_api_response_format(const json_t *root, const struct gw_api_limits *lim,
				      struct cm_arena *a, struct gw_api_request *r,
				      struct gw_api_error *err) CM_WUR;
/* Ollama format: "" / "json" / a schema object. */
enum cm_status gw_api_ollama_format(const json_t *root, const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err) CM_WUR;
/* Sluice's grammar (after the dialect's format: both set is refused). */
enum cm_status gw_api_grammar(const json_t *root, const struct gw_api_limits *lim,
			      struct cm_arena *a, struct gw_api_request *r,
			      struct gw_api_error *err) CM_WUR;
/* logprobs (bool) + top_logprobs (0..20); legacy_count: /v1/completions'
 * logprobs, the number of alternatives (0..5). */
enum cm_status gw_api_logprobs(const json_t *root, int legacy_count, struct gw_api_request *r,
			       struct gw_api_error *err) CM_WUR;

/* ---- logprobs.c ---------------------------------------------------------- */

/* {"token", "logprob", "bytes", "top_logprobs"} of one token. */
json_t *gw_api_lp_entry(const struct proto_token *t);
/* The dialect's logprobs value for `entries` (stolen; NULL -> null). */
json_t *gw_api_lp_field(const struct gw_api_stream *s, json_t *entries, size_t text_off);

/* ---- ollama.c, openai.c: one reader per endpoint -------------------------- */

void gw_api_ollama_defaults(struct gw_api_request *r, const struct gw_api_limits *lim);
void gw_api_openai_defaults(struct gw_api_request *r, const struct gw_api_limits *lim);
enum cm_status gw_api_ollama_generate(const json_t *root, const struct gw_api_limits *lim,
				      struct cm_arena *a, struct gw_api_request *r,
				      struct gw_api_error *err);
enum cm_status gw_api_ollama_chat(const json_t *root, const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err);
enum cm_status gw_api_openai_chat(const json_t *root, const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err);
enum cm_status gw_api_openai_completions(const json_t *root,
					 const struct gw_api_limits *lim,
					 struct cm_arena *a, struct gw_api_request *r,
					 struct gw_api_error *err);

/* ---- JSON pieces of the responses ----------------------------------------- */

/* Dumps j compactly into out and releases j (also on failure). */
enum cm_status gw_api_dump_json(struct cm_buf *out, json_t *j) CM_WUR;
/* json_string that never returns NULL for a NULL or invalid input. */
json_t *gw_api_jstr(const char *s);
json_t *gw_api_jstrn(const char *s, size_t n);
/* "data: <json>\n\n" / "<json>\n"; both release j; nothing appended on failure. */
enum cm_status gw_api_sse_event(struct cm_buf *out, json_t *j) CM_WUR;
enum cm_status gw_api_ndjson_line(struct cm_buf *out, json_t *j) CM_WUR;
/* errors.c: the error object of a dialect. */
json_t *gw_api_error_object(enum gw_api_style style, const struct gw_api_error *e);
/* "stop", "length", "cancelled". */
const char *gw_api_finish_name(uint8_t f);
/* The "sluice" object: ttft_ns, queue_ns, cached_prompt_tokens. */
json_t *gw_api_operator_fields(const struct gw_api_result *res);

/* ollama.c: {"model","created_at"}; the text as response or message; done fields. */
json_t *gw_api_ollama_base(const struct gw_api_stream *s);
void gw_api_ollama_text(json_t *o, const struct gw_api_stream *s,
			const char *text, size_t len);
void gw_api_ollama_done(json_t *o, const struct gw_api_result *res);
/* openai.c: {"id","object","created","model"}; one choice; the usage object. */
json_t *gw_api_openai_base(const struct gw_api_stream *s, int chunk);
json_t *gw_api_openai_choice(const struct gw_api_stream *s, int chunk,
			     int with_role, const char *text, size_t len,
			     const char *finish);
json_t *gw_api_usage_object(const struct gw_api_result *res);

#endif
