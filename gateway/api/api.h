/*
 * api.h - the Ollama- and OpenAI-compatible request bodies and responses.
 *
 * Owns no state: parsing turns a request body into a struct gw_api_request
 * whose strings live in the caller's arena (the request's), and rendering
 * appends bytes to a caller's cm_buf.  Pure functions, any thread; used on
 * the gateway's event loop.  docs/api.md lists every field.
 *
 * Validation (every refusal is a gw_api_error with status 400 and a message
 * "<field>: expected <what>, found <what>" unless stated):
 *   - the body must be valid UTF-8 without NUL bytes, and no string may
 *     contain the escape \u0000;
 *   - nesting deeper than limits.json_depth is refused by a byte scan BEFORE
 *     jansson parses (its recursion is unbounded);
 *   - duplicate object keys are refused (JSON_REJECT_DUPLICATES);
 *   - the top level must be an object; known fields must have the right
 *     type and range; unknown fields are ignored (as Ollama and OpenAI do);
 *     fields that ask for something Sluice does not do (images, the
 *     legacy functions, custom templates, best_of > 1, batched prompts)
 *     are refused rather than silently ignored;
 *   - salt-, tenant- or key-like fields in a body are never read: the
 *     tenant, its cache salt and the key id come from authentication only.
 */
#ifndef SLUICE_GATEWAY_API_API_H
#define SLUICE_GATEWAY_API_API_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/status.h"
#include "gateway/http/paths.h"
#include "proto/proto.h"

/* Version reported by /api/version (Ollama clients compare it). */
#define GW_API_OLLAMA_COMPAT_VERSION "0.6.0"
#define GW_API_MODEL_NAME_MAX 256
/* limits.choices' bound: choices of one request (OpenAI allows 128) */
#define GW_API_CHOICES_MAX 128
/* A tool's name: 1..64 of [A-Za-z0-9_-] (OpenAI's rule) */
#define GW_API_TOOL_NAME_MAX 64
/* limits.tools' and limits.tools_bytes' bounds */
#define GW_API_TOOLS_MAX 1024
#define GW_API_TOOLS_BYTES_MAX (4u << 20)
/* Reasoning text a non-streamed reply holds per choice */
#define GW_API_REASONING_BYTES (4u << 20)

#define GW_API_CT_JSON "application/json"
#define GW_API_CT_NDJSON "application/x-ndjson"
#define GW_API_CT_SSE "text/event-stream"

enum gw_api_kind {
	GW_API_OLLAMA_GENERATE = 0, /* POST /api/generate */
	GW_API_OLLAMA_CHAT,         /* POST /api/chat */
	GW_API_OPENAI_CHAT,         /* POST /v1/chat/completions */
	GW_API_OPENAI_COMPLETIONS,  /* POST /v1/completions */
};

struct gw_api_limits {
	uint32_t json_depth;        /* limits.json_depth: nesting of [ and { */
	uint32_t messages;          /* limits.messages per request */
	uint32_t stop_strings;      /* limits.stop_strings */
	uint32_t stop_string_bytes; /* limits.stop_string_bytes, each */
	uint32_t max_output_tokens; /* limits.max_output_tokens: cap and default */
	uint32_t constraint_bytes;  /* limits.constraint_bytes: a schema or grammar */
	uint32_t choices;           /* limits.choices: OpenAI `n` at most */
	uint32_t embed_inputs;      /* limits.embed_inputs: inputs of one embeddings request */
	uint32_t tools;             /* limits.tools: tools in one request */
	uint32_t tools_bytes;       /* limits.tools_bytes: all of them as compact JSON */
	uint32_t thinking_token_budget; /* limits.thinking_token_budget: default, 0 none */
	int max_tokens_strict;      /* limits.max_tokens_over_context = strict: an
				     * explicit max_tokens over what the context
				     * leaves is refused, not lowered */
};

void gw_api_limits_defaults(struct gw_api_limits *l);

/*
 * Checks the limits against their bounds (json_depth 2..256, messages
 * 1..CM_LIM_PROTO_MESSAGES_HARD, stop_strings 0..CM_LIM_PROTO_STOP_STRINGS_HARD,
 * stop_string_bytes 1..4096, max_output_tokens 1..1048576, constraint_bytes
 * 16..64 MiB, choices 1..GW_API_CHOICES_MAX, tools 0..GW_API_TOOLS_MAX,
 * tools_bytes 1 KiB..GW_API_TOOLS_BYTES_MAX, thinking_token_budget
 * 0..CM_LIM_THINKING_TOKEN_BUDGET_MAX); CM_EINVAL with
 * a message naming the config key.
 */
enum cm_status gw_api_limits_check(const struct gw_api_limits *l, char *err,
				   size_t err_len) CM_WUR;

/* An error for the client, rendered in the API's format. */
struct gw_api_error {
	int status;          /* HTTP status */
	char message[320];   /* never file paths, keys or internal state */
	char param[64];      /* the offending field ("" when none) */
	const char *code;    /* OpenAI "code" (NULL -> null) */
};

/*
 * A validated request.  The first group maps 1:1 onto struct proto_submit
 * (gw_api_to_submit); the rest are API flags the response needs.  Strings
 * point into the arena passed to gw_api_parse (NUL-terminated).
 */
struct gw_api_request {
	enum gw_api_kind kind;
	enum gw_api_style style;
	/* -> proto_submit */
	struct proto_str model;
	uint32_t max_tokens;        /* >= 1; the limit or API default when not given */
	struct proto_sampling sampling;
	uint32_t submit_flags;      /* PROTO_SUBMIT_F_HAS_SEED, F_ADD_BOS, F_FIT */
	uint32_t n_stop;
	struct proto_str *stop;
	uint8_t prompt_kind;        /* enum proto_prompt_kind */
	struct proto_str text;      /* TEXT prompts */
	uint32_t n_messages;
	struct proto_message *messages; /* CHAT prompts */
	/* API flags */
	int max_tokens_given;       /* the client set num_predict / max_tokens */
	int stream;                 /* Ollama default 1, OpenAI default 0 */
	int include_usage;          /* OpenAI stream_options.include_usage */
	int raw;                    /* Ollama generate raw (no template) */
	/* structured output and logprobs (-> proto_submit, version 3) */
	uint8_t constraint_kind;    /* enum proto_constraint */
	struct proto_str constraint; /* compact schema JSON or grammar text */
	const char *constraint_param; /* the field it came from, for errors */
	int logprobs;               /* logprobs wanted in the response */
	uint8_t top_logprobs;       /* alternatives per token, 0..20 */
	uint32_t n;                 /* OpenAI `n`: choices, 1..limits.choices (1 elsewhere) */
	/* tool calls and thinking (-> proto_submit, version 4; docs/tools.md) */
	struct proto_str tools;     /* compact JSON array of tools; "" none */
	uint8_t tool_choice;        /* enum proto_tool_choice (NONE without tools) */
	struct proto_str tool_name; /* PROTO_TOOLS_NAMED */
	int parallel_tool_calls;    /* OpenAI parallel_tool_calls (default true) */
	uint8_t think;              /* enum proto_think */
	uint32_t think_budget;      /* thinking_token_budget (-> version 5); 0 none */
};

/*
 * Parses and validates `body` for `kind`.  CM_OK: *out filled.  CM_EINVAL:
 * *err filled (status 400), CM_ENOMEM: arena full or allocation failure
 * (*err filled with 500).
 */
enum cm_status gw_api_parse(enum gw_api_kind kind, const void *body, size_t len,
			    const struct gw_api_limits *lim, struct cm_arena *arena,
			    struct gw_api_request *out,
			    struct gw_api_error *err) CM_WUR;

/* Body of POST /api/show: {"model": "..."} (or the older "name"). */
enum cm_status gw_api_parse_show(const void *body, size_t len,
				 const struct gw_api_limits *lim,
				 struct cm_arena *arena, struct proto_str *model,
				 struct gw_api_error *err) CM_WUR;

/*
 * Copies the request's fields into `s` and the flags into *flags; the
 * fields that come from authentication and policy (tenant_id, cache_salt,
 * key_id, klass, max_prompt_tokens) are zeroed for the dispatcher to set.
 * `s` borrows the request's strings.
 */
void gw_api_to_submit(const struct gw_api_request *r, struct proto_submit *s,
		      uint32_t *flags);

/*
 * An upper bound of the SUBMIT payload the request encodes to (its strings
 * with their length prefixes, the fixed fields, and room for the tenant,
 * key and salt the dispatcher adds): a request above the worker frame
 * limit is refused at admission (413) instead of failing at dispatch.
 */
size_t gw_api_submit_bytes(const struct gw_api_request *r);

/*
 * The tokens a request may cost, for quota admission before the worker has
 * counted: about one per 4 prompt bytes, plus its max_tokens for each of
 * its `n` choices; with PROTO_SUBMIT_F_FIT each choice at most `context` (a
 * prompt and its completion share it; 0 = unknown).
 */
int64_t gw_api_token_estimate(const struct gw_api_request *r, uint32_t context);

/* ---- errors ------------------------------------------------------------ */

/* Fills *err (message truncated to fit). */
void gw_api_error_set(struct gw_api_error *err, int status, const char *param,
		      const char *code, const char *fmt, ...) CM_PRINTF(5, 6);

/* 404 "model '<name>' not found" (the name is truncated to 64 bytes). */
void gw_api_error_model_not_found(struct gw_api_error *err, const char *name,
				  size_t len);

/*
 * The client's error for a worker's refusal `code` (proto PROTO_E_*, or
 * anything else for a failed worker: 502).  A 400 carries the worker's own
 * message ("<field>: expected ..., found ..."; a fixed text when empty), cut
 * to fit on a character boundary, the field it names as `param`, and
 * `context_length_exceeded` for a prompt over the context; 503 (overloaded,
 * draining) and 502 carry a fixed text.
 */
void gw_api_error_from_worker(struct gw_api_error *err, uint16_t code,
			      const char *msg, size_t len);

/*
 * Appends an error body: Ollama {"error":"message"}; OpenAI
 * {"error":{"message","type","param","code"}} with type derived from the
 * status (invalid_request_error, authentication_error, permission_error,
 * not_found_error, rate_limit_error, server_error).
 */
enum cm_status gw_api_render_error(struct cm_buf *out, enum gw_api_style style,
				   const struct gw_api_error *err) CM_WUR;

/* A gw_error_fn for gw_server_set_error_renderer(): style from the path. */
enum cm_status gw_api_http_error(int status, const char *message,
				 const char *path, struct cm_buf *body,
				 const char **content_type, void *ctx) CM_WUR;

/* 403 body for /api/pull etc. (Ollama format). */
enum cm_status gw_api_render_manage_forbidden(struct cm_buf *out,
					      const char *op) CM_WUR;

/* ---- generation responses ---------------------------------------------- */

/* What the final chunk and the non-streaming body report. */
struct gw_api_result {
	uint8_t finish;             /* enum proto_finish */
	uint32_t prompt_tokens;
	uint32_t cached_tokens;     /* prompt tokens served from the prefix cache */
	uint32_t gen_tokens;
	int64_t total_ns;           /* request received -> done (gateway clock) */
	int64_t load_ns;
	int64_t prefill_ns;         /* Ollama prompt_eval_duration */
	int64_t decode_ns;          /* Ollama eval_duration */
	int64_t ttft_ns;            /* request received -> first token sent */
	int64_t queue_ns;           /* gateway queue + worker queue */
	uint32_t reasoning_tokens;  /* of gen_tokens, those spent thinking */
};

/* Copies a DONE's counts and worker durations (total_ns left 0). */
void gw_api_result_from_done(struct gw_api_result *res, const struct proto_done *d);

/* Per-response rendering state. */
struct gw_api_stream {
	enum gw_api_kind kind;
	char model[GW_API_MODEL_NAME_MAX + 1];
	char id[48];                /* OpenAI "chatcmpl-..." / "cmpl-..." */
	int64_t created_s;          /* OpenAI "created" (Unix seconds) */
	int include_usage;
	int chunks;                 /* chunks rendered so far */
	int logprobs;               /* the request asked for logprobs */
	struct json_t *lp;          /* a non-streamed reply's entries (logprobs.c) */
	size_t text_off;            /* text bytes streamed so far */
	uint32_t index;             /* OpenAI choices[].index of this choice */
	uint32_t n_calls;           /* tool calls so far (streamed: the next index) */
	struct json_t *calls;       /* a non-streamed reply's calls, the dialect's shape */
	struct cm_buf reasoning;    /* a non-streamed reply's reasoning text */
};

/* Releases what the state collected (the logprobs entries). */
void gw_api_stream_deinit(struct gw_api_stream *s);
/* Collects the logprobs of one generated token for a non-streamed reply
 * (nothing unless the request asked for them). */
enum cm_status gw_api_stream_add_logprobs(struct gw_api_stream *s,
					  const struct proto_token *t) CM_WUR;

/* `wall_ns`: cm_wall_ns() at request start.  The id is random (or derived
 * from request_id when randomness fails). */
void gw_api_stream_init(struct gw_api_stream *s, const struct gw_api_request *r,
			uint64_t request_id, int64_t wall_ns);

/* The state of choice `index` of the same response as `base` (same id,
 * created and model; nothing rendered yet). */
void gw_api_stream_init_choice(struct gw_api_stream *s, const struct gw_api_stream *base,
			       uint32_t index);

/* One TOKEN entry streamed by its channel: content as gw_api_render_chunk,
 * reasoning as OpenAI delta.reasoning_content / Ollama thinking, a tool call
 * as OpenAI delta.tool_calls (index, id, type, name, arguments) / Ollama
 * message.tool_calls (docs/tools.md). */
enum cm_status gw_api_render_entry(struct cm_buf *out, struct gw_api_stream *s,
				   const struct proto_token *tk) CM_WUR;
/* A non-streamed reply's reasoning and tool calls (content is the
 * caller's); CM_EINVAL for a call entry that is no call (keep it as text). */
enum cm_status gw_api_stream_collect(struct gw_api_stream *s, const struct proto_token *tk) CM_WUR;

/* Content-Type of the response for this request. */
const char *gw_api_content_type(const struct gw_api_request *r);

/* One streamed piece of text: an NDJSON line (Ollama) or an SSE event;
 * `tk` (NULL: none) the token it came with, for logprobs. */
enum cm_status gw_api_render_chunk(struct cm_buf *out, struct gw_api_stream *s,
				   const char *text, size_t len,
				   const struct proto_token *tk) CM_WUR;

/* The end of a stream: Ollama's done line; OpenAI's finish chunk, the usage
 * chunk when include_usage, and `data: [DONE]`. */
enum cm_status gw_api_render_final(struct cm_buf *out, struct gw_api_stream *s,
				   const struct gw_api_result *res) CM_WUR;

/*
 * A stream of several choices (OpenAI `n` > 1) ends in two parts:
 * gw_api_render_choice_end is the finish chunk of one choice (its
 * finish_reason; its own operator fields unless include_usage), as each
 * ends; gw_api_render_stream_end, once all have, the usage chunk for the
 * whole response when include_usage (`res`: the summed counts), then
 * `data: [DONE]`.  gw_api_render_final is the two for one choice.
 */
enum cm_status gw_api_render_choice_end(struct cm_buf *out, struct gw_api_stream *s,
					const struct gw_api_result *res) CM_WUR;
enum cm_status gw_api_render_stream_end(struct cm_buf *out, struct gw_api_stream *s,
					const struct gw_api_result *res) CM_WUR;

/* A whole non-streaming response body holding `text`. */
enum cm_status gw_api_render_full(struct cm_buf *out, struct gw_api_stream *s,
				  const char *text, size_t len,
				  const struct gw_api_result *res) CM_WUR;

/* One choice of a non-streamed reply of several (its state collected its
 * logprobs). */
struct gw_api_choice_text {
	struct gw_api_stream *stream;
	const char *text;
	size_t len;
	uint8_t finish;             /* enum proto_finish */
};

/* A whole non-streaming OpenAI body of `n` choices, in index order; `res`
 * the counts of the whole response (prompt once, completions summed). */
enum cm_status gw_api_render_full_choices(struct cm_buf *out,
					  const struct gw_api_choice_text *c, size_t n,
					  const struct gw_api_result *res) CM_WUR;

/* An error after streaming began: an NDJSON {"error"} line or an SSE event. */
enum cm_status gw_api_render_stream_error(struct cm_buf *out,
					  const struct gw_api_stream *s,
					  const struct gw_api_error *err) CM_WUR;

/* ---- fixed endpoints --------------------------------------------------- */

struct gw_api_model {
	const char *name;
	const char *architecture;   /* "llama", "qwen2" */
	const char *family;
	char parameter_size[16];    /* "1.1B" (gw_api_parameter_size) */
	uint64_t parameter_count;
	const char *quantization;   /* "Q4_K_M" */
	uint64_t size_bytes;        /* model file */
	uint64_t vram_bytes;        /* device memory in use (ps) */
	uint8_t sha256[PROTO_DIGEST_LEN];
	int64_t modified_wall_ns;
	uint32_t context_len;
	uint32_t embedding_dim;     /* 0: it does not embed */
	int generates;              /* 1: it generates */
	/* what produces its answers (HELLO): /api/show's "sluice" object */
	const char *engine_version; /* "0.1.0+abc1234" */
	const char *backend;        /* "cpu", "cuda" */
	const char *device;         /* with the CUDA versions on a GPU */
};

/* Ollama's parameter_size: "8.0B", "494.0M", "260.1K", "12". */
void gw_api_parameter_size(uint64_t n, char out[16]);

enum cm_status gw_api_render_version(struct cm_buf *out) CM_WUR;
enum cm_status gw_api_render_tags(struct cm_buf *out,
				  const struct gw_api_model *m, size_t n) CM_WUR;
enum cm_status gw_api_render_ps(struct cm_buf *out,
				const struct gw_api_model *m, size_t n) CM_WUR;
enum cm_status gw_api_render_models(struct cm_buf *out,
				    const struct gw_api_model *m, size_t n) CM_WUR;
/* GET /v1/models/{id}: one model object. */
enum cm_status gw_api_render_model(struct cm_buf *out,
				   const struct gw_api_model *m) CM_WUR;
enum cm_status gw_api_render_show(struct cm_buf *out,
				  const struct gw_api_model *m) CM_WUR;

#endif
