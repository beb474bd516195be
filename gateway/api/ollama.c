/*
 * ollama.c - the Ollama dialect: /api/generate and /api/chat bodies
 * (defaults, options{}), and the pieces of its NDJSON responses.
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

void gw_api_ollama_defaults(struct gw_api_request *r, const struct gw_api_limits *lim)
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

/* options{...}: num_ctx and the runtime/hardware options are ignored. */
static enum cm_status ollama_options(const json_t *root,
				     const struct gw_api_limits *lim,
				     struct cm_arena *a, struct gw_api_request *r,
				     struct gw_api_error *err)
{
	json_t *o = gw_api_field(root, "options");
	json_int_t iv;
	int given;
	enum cm_status st;

	if (!o)
		return CM_OK;
	if (!json_is_object(o))
		return gw_api_bad(err, "options", "an object", o);
	/* num_predict: -1 (and -2, "fill the context") = up to the limit */
	st = gw_api_get_int(o, "num_predict", "options.num_predict", -2,
		     (json_int_t)lim->max_output_tokens, &iv, &given, err);
	if (st == CM_OK && given) {
		if (iv == 0)
			return gw_api_bad(err, "options.num_predict",
				   "an integer from 1 to the limit, or -1", json_object_get(o, "num_predict"));
		if (iv > 0) {
			r->max_tokens = (uint32_t)iv;
			r->max_tokens_given = 1;
		}
	}
	if (st == CM_OK)
		st = gw_api_get_num(o, "temperature", "options.temperature", 0.0,
			     GW_API_TEMPERATURE_MAX, &r->sampling.temperature, err);
	if (st == CM_OK) {
		st = gw_api_get_int(o, "top_k", "options.top_k", 0, GW_API_TOP_K_MAX, &iv,
			     &given, err);
		if (st == CM_OK && given)
			r->sampling.top_k = (uint32_t)iv;
	}
	if (st == CM_OK)
		st = gw_api_get_num(o, "top_p", "options.top_p", 0.0, 1.0,
			     &r->sampling.top_p, err);
	if (st == CM_OK)
		st = gw_api_get_num(o, "min_p", "options.min_p", 0.0, 1.0,
			     &r->sampling.min_p, err);
	if (st == CM_OK)
		st = gw_api_get_num(o, "repeat_penalty", "options.repeat_penalty", 0.0,
			     GW_API_REPEAT_PENALTY_MAX, &r->sampling.repeat_penalty, err);
	if (st == CM_OK && !(r->sampling.repeat_penalty > 0.0f)) {
		/* a divisor: 0 is no penalty at all but infinity; 1 disables it */
		gw_api_error_set(err, 400, "options.repeat_penalty", NULL,
				 "options.repeat_penalty: expected a value in (0, %g] (1 disables "
				 "the penalty), found 0", GW_API_REPEAT_PENALTY_MAX);
		st = CM_EINVAL;
	}
	if (st == CM_OK) {
		/* -1 = the whole context */
		st = gw_api_get_int(o, "repeat_last_n", "options.repeat_last_n", -1,
			     GW_API_REPEAT_LAST_N_MAX, &iv, &given, err);
		if (st == CM_OK && given)
			r->sampling.repeat_last_n = iv < 0 ? UINT32_MAX : (uint32_t)iv;
	}
	if (st == CM_OK)
		st = gw_api_get_num(o, "presence_penalty", "options.presence_penalty",
			     -GW_API_PENALTY_ABS_MAX, GW_API_PENALTY_ABS_MAX,
			     &r->sampling.presence_penalty, err);
	if (st == CM_OK)
		st = gw_api_get_num(o, "frequency_penalty", "options.frequency_penalty",
			     -GW_API_PENALTY_ABS_MAX, GW_API_PENALTY_ABS_MAX,
			     &r->sampling.frequency_penalty, err);
	if (st == CM_OK) {
		/* -1 = random (no seed) */
		st = gw_api_get_int(o, "seed", "options.seed", -1, INT64_MAX, &iv, &given, err);
		if (st == CM_OK && given && iv >= 0) {
			r->sampling.seed = (uint64_t)iv;
			r->submit_flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	if (st == CM_OK)
		st = gw_api_get_stop(o, "stop", "options.stop", lim, a, r, err);
	return st;
}

/* format ("json" or a schema), grammar, logprobs, think. */
static enum cm_status ollama_common(const json_t *root,
				    const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err)
{
	enum cm_status st;

	st = gw_api_get_model(root, "model", a, &r->model, err);
	if (st == CM_OK)
		st = gw_api_get_bool(root, "stream", "stream", &r->stream, err);
	if (st == CM_OK)
		st = gw_api_ollama_format(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_grammar(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_logprobs(root, 0, r, err);
	if (st == CM_OK)
		st = gw_api_think(root, lim, r, err);
	if (st == CM_OK)
		st = ollama_options(root, lim, a, r, err);
	/* keep_alive: ignored (models stay loaded; the operator decides) */
	return st;
}

enum cm_status gw_api_ollama_generate(const json_t *root,
				      const struct gw_api_limits *lim,
				      struct cm_arena *a, struct gw_api_request *r,
				      struct gw_api_error *err)
{
	json_t *prompt, *system, *tmpl;
	enum cm_status st;

	gw_api_ollama_defaults(r, lim);
	st = ollama_common(root, lim, a, r, err);
	if (st != CM_OK)
		return st;
	st = gw_api_get_bool(root, "raw", "raw", &r->raw, err);
	if (st != CM_OK)
		return st;
	tmpl = gw_api_field(root, "template");
	if (tmpl && !json_is_string(tmpl))
		return gw_api_bad(err, "template", "a string", tmpl);
	if (!gw_api_is_empty(tmpl))
		return gw_api_unsupported(err, "template",
				   "custom prompt templates are not supported; the model's own chat template is used");
	st = gw_api_refuse_if_set(root, "images", "image inputs are not supported", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "tools", "tools need a chat: send them to /api/chat", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "suffix", "fill-in-the-middle (suffix) is not supported", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "context",
				   "continuing from a context array is not supported; use /api/chat",
				   err);
	if (st != CM_OK)
		return st;
	prompt = gw_api_field(root, "prompt");
	if (!prompt || !json_is_string(prompt) || json_string_length(prompt) == 0)
		return gw_api_bad(err, "prompt", "a non-empty string", prompt);
	system = gw_api_field(root, "system");
	if (system && !json_is_string(system))
		return gw_api_bad(err, "system", "a string", system);
	if (r->raw) {
		/* raw: the prompt goes to the model as is; system is not applied */
		r->prompt_kind = PROTO_PROMPT_TEXT;
		r->submit_flags |= PROTO_SUBMIT_F_ADD_BOS;
		return gw_api_copy_str(a, prompt, &r->text, err);
	}
	r->prompt_kind = PROTO_PROMPT_CHAT;
	r->messages = cm_arena_calloc(a, 2, sizeof(*r->messages));
	if (!r->messages)
		return gw_api_oom(err);
	if (system && json_string_length(system) > 0) {
		r->messages[0].role = (struct proto_str){ "system", 6 };
		st = gw_api_copy_str(a, system, &r->messages[0].content, err);
		if (st != CM_OK)
			return st;
		r->n_messages = 1;
	}
	r->messages[r->n_messages].role = (struct proto_str){ "user", 4 };
	st = gw_api_copy_str(a, prompt, &r->messages[r->n_messages].content, err);
	if (st != CM_OK)
		return st;
	r->n_messages++;
	return CM_OK;
}

enum cm_status gw_api_ollama_chat(const json_t *root,
				  const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err)
{
	static const struct gw_api_msg_rules rules = {
		.role_expect = "one of " PROTO_ROLE_LIST,
		.aliases = NULL,
		.images_refused = 1,
		.content = gw_api_content_string,
		.content_expect = "a string",
	};
	enum cm_status st;

	gw_api_ollama_defaults(r, lim);
	st = ollama_common(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_tools(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_messages(root, lim, &rules, a, r, err);
	return st;
}

json_t *gw_api_ollama_base(const struct gw_api_stream *s)
{
	json_t *o = json_object();
	char ts[32];

	if (!o)
		return NULL;
	cm_wall_iso8601(cm_wall_ns(), ts);
	json_object_set_new(o, "model", gw_api_jstr(s->model));
	json_object_set_new(o, "created_at", gw_api_jstr(ts));
	return o;
}

void gw_api_ollama_text(json_t *o, const struct gw_api_stream *s,
			const char *text, size_t len)
{
	if (s->kind == GW_API_OLLAMA_CHAT) {
		json_t *m = json_object();

		json_object_set_new(m, "role", json_string("assistant"));
		json_object_set_new(m, "content", gw_api_jstrn(text, len));
		json_object_set_new(o, "message", m);
	} else {
		json_object_set_new(o, "response", gw_api_jstrn(text, len));
	}
}

void gw_api_ollama_done(json_t *o, const struct gw_api_result *res)
{
	json_object_set_new(o, "done", json_true());
	json_object_set_new(o, "done_reason", json_string(gw_api_finish_name(res->finish)));
	json_object_set_new(o, "total_duration", json_integer(res->total_ns));
	json_object_set_new(o, "load_duration", json_integer(res->load_ns));
	json_object_set_new(o, "prompt_eval_count", json_integer(res->prompt_tokens));
	json_object_set_new(o, "prompt_eval_duration", json_integer(res->prefill_ns));
	json_object_set_new(o, "eval_count", json_integer(res->gen_tokens));
	json_object_set_new(o, "eval_duration", json_integer(res->decode_ns));
	json_object_set_new(o, "sluice", gw_api_operator_fields(res));
}
