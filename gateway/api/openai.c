/*
 * openai.c - the OpenAI dialect: /v1/chat/completions and /v1/completions
 * bodies (defaults, max_tokens, text parts), and the pieces of its SSE and
 * JSON responses.
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

void gw_api_openai_defaults(struct gw_api_request *r, const struct gw_api_limits *lim)
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

static enum cm_status openai_common(const json_t *root,
				    const struct gw_api_limits *lim,
				    struct cm_arena *a, struct gw_api_request *r,
				    struct gw_api_error *err)
{
	json_int_t iv, mt = 0, mct = 0;
	int given, g_mt = 0, g_mct = 0;
	json_t *so;
	enum cm_status st;

	st = gw_api_get_model(root, "model", a, &r->model, err);
	if (st == CM_OK)
		st = gw_api_get_int(root, "max_tokens", "max_tokens", 1,
			     (json_int_t)lim->max_output_tokens, &mt, &g_mt, err);
	if (st == CM_OK && r->kind == GW_API_OPENAI_CHAT)
		st = gw_api_get_int(root, "max_completion_tokens", "max_completion_tokens", 1,
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
	st = gw_api_get_num(root, "temperature", "temperature", 0.0, GW_API_TEMPERATURE_MAX,
		     &r->sampling.temperature, err);
	if (st == CM_OK)
		st = gw_api_get_num(root, "top_p", "top_p", 0.0, 1.0, &r->sampling.top_p, err);
	if (st == CM_OK) {
		st = gw_api_get_int(root, "n", "n", 1, (json_int_t)lim->choices, &iv, &given, err);
		if (st == CM_OK && given)
			r->n = (uint32_t)iv;
	}
	if (st == CM_OK)
		st = gw_api_get_stop(root, "stop", "stop", lim, a, r, err);
	if (st == CM_OK) {
		st = gw_api_get_int(root, "seed", "seed", INT64_MIN, INT64_MAX, &iv, &given, err);
		if (st == CM_OK && given) {
			r->sampling.seed = (uint64_t)iv;
			r->submit_flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	if (st == CM_OK)
		st = gw_api_get_num(root, "presence_penalty", "presence_penalty",
			     -GW_API_PENALTY_ABS_MAX, GW_API_PENALTY_ABS_MAX,
			     &r->sampling.presence_penalty, err);
	if (st == CM_OK)
		st = gw_api_get_num(root, "frequency_penalty", "frequency_penalty",
			     -GW_API_PENALTY_ABS_MAX, GW_API_PENALTY_ABS_MAX,
			     &r->sampling.frequency_penalty, err);
	if (st == CM_OK)
		st = gw_api_get_bool(root, "stream", "stream", &r->stream, err);
	if (st != CM_OK)
		return st;
	so = gw_api_field(root, "stream_options");
	if (so) {
		if (!json_is_object(so))
			return gw_api_bad(err, "stream_options", "an object", so);
		if (!r->stream) {
			gw_api_error_set(err, 400, "stream_options", NULL,
					 "stream_options: only allowed when stream is true");
			return CM_EINVAL;
		}
		st = gw_api_get_bool(so, "include_usage", "stream_options.include_usage",
			      &r->include_usage, err);
		if (st != CM_OK)
			return st;
	}
	/* user: ignored (an end-user id for abuse tracking upstream) */
	st = gw_api_logprobs(root, r->kind == GW_API_OPENAI_COMPLETIONS, r, err);
	if (st == CM_OK)
		st = gw_api_response_format(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_grammar(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "functions", "functions is OpenAI's deprecated form of "
					  "tool calling; send tools (and tool_choice) instead", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "function_call", "function_call is OpenAI's deprecated "
					  "form of tool_choice; send tools and tool_choice instead", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "logit_bias", "logit_bias is not supported", err);
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
		return gw_api_copy_str(a, content, out, err);
	if (!json_is_array(content))
		return gw_api_bad(err, f, "a string or an array of text parts", content);
	n = json_array_size(content);
	for (size_t j = 0; j < n; j++) {
		json_t *part = json_array_get(content, j), *type, *text;

		snprintf(f, sizeof(f), "messages[%zu].content[%zu]", idx, j);
		if (!json_is_object(part))
			return gw_api_bad(err, f, "an object {\"type\":\"text\",\"text\":...}", part);
		type = gw_api_field(part, "type");
		snprintf(f, sizeof(f), "messages[%zu].content[%zu].type", idx, j);
		if (!json_is_string(type))
			return gw_api_bad(err, f, "\"text\"", type);
		if (strcmp(json_string_value(type), "text") != 0) {
			gw_api_error_set(err, 400, f, "unsupported",
					 "%s: expected \"text\", found another part type (only text content is supported)",
					 f);
			return CM_EINVAL;
		}
		text = gw_api_field(part, "text");
		snprintf(f, sizeof(f), "messages[%zu].content[%zu].text", idx, j);
		if (!json_is_string(text))
			return gw_api_bad(err, f, "a string", text);
		total += json_string_length(text) + (j ? 1 : 0);
	}
	if (total > UINT32_MAX)
		return gw_api_oom(err);
	s = cm_arena_alloc(a, total + 1);
	if (!s)
		return gw_api_oom(err);
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

enum cm_status gw_api_openai_chat(const json_t *root,
				  const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_request *r,
				  struct gw_api_error *err)
{
	/* developer is the newer name of system */
	static const struct gw_api_role_alias aliases[] = {
		{ "developer", "system" }, { NULL, NULL } };
	static const struct gw_api_msg_rules rules = {
		.role_expect = "one of system, developer, user, assistant, tool",
		.aliases = aliases,
		.images_refused = 0,
		.content = openai_content,
		.content_expect = "a string or an array of text parts",
	};
	enum cm_status st;

	gw_api_openai_defaults(r, lim);
	st = openai_common(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_tools(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_think(root, lim, r, err);
	if (st != CM_OK)
		return st;
	return gw_api_messages(root, lim, &rules, a, r, err);
}

enum cm_status gw_api_openai_completions(const json_t *root,
					 const struct gw_api_limits *lim,
					 struct cm_arena *a,
					 struct gw_api_request *r,
					 struct gw_api_error *err)
{
	json_t *prompt, *v;
	enum cm_status st;

	gw_api_openai_defaults(r, lim);
	r->max_tokens = GW_API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS < lim->max_output_tokens
				? GW_API_OPENAI_COMPLETIONS_DEFAULT_MAX_TOKENS
				: lim->max_output_tokens;
	st = openai_common(root, lim, a, r, err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "tools", "tools need a chat: send them to "
					  "/v1/chat/completions", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "suffix", "fill-in-the-middle (suffix) is not supported", err);
	if (st == CM_OK)
		st = gw_api_refuse_if_set(root, "echo", "echo is not supported", err);
	if (st != CM_OK)
		return st;
	v = gw_api_field(root, "best_of");
	if (v && (!json_is_integer(v) || json_integer_value(v) != 1))
		return gw_api_bad(err, "best_of", "1 (best_of ranks candidates and returns the best: "
				  "not supported; n returns every choice)", v);
	prompt = gw_api_field(root, "prompt");
	/* a one-string array is that string (LangChain sends prompts so) */
	if (json_is_array(prompt) && json_array_size(prompt) == 1 &&
	    json_is_string(json_array_get(prompt, 0)))
		prompt = json_array_get(prompt, 0);
	if (json_is_array(prompt)) {
		gw_api_error_set(err, 400, "prompt", "unsupported",
				 "prompt: expected a string or an array of one string, found an array of "
				 "%zu elements or of token ids (batched and token prompts are not supported)",
				 json_array_size(prompt));
		return CM_EINVAL;
	}
	if (!prompt || !json_is_string(prompt) || json_string_length(prompt) == 0)
		return gw_api_bad(err, "prompt", "a non-empty string", prompt);
	r->prompt_kind = PROTO_PROMPT_TEXT;
	r->submit_flags |= PROTO_SUBMIT_F_ADD_BOS;
	return gw_api_copy_str(a, prompt, &r->text, err);
}

json_t *gw_api_openai_base(const struct gw_api_stream *s, int chunk)
{
	json_t *o = json_object();
	const char *obj;

	if (!o)
		return NULL;
	if (s->kind == GW_API_OPENAI_COMPLETIONS)
		obj = "text_completion";
	else
		obj = chunk ? "chat.completion.chunk" : "chat.completion";
	json_object_set_new(o, "id", gw_api_jstr(s->id));
	json_object_set_new(o, "object", json_string(obj));
	json_object_set_new(o, "created", json_integer(s->created_s));
	json_object_set_new(o, "model", gw_api_jstr(s->model));
	return o;
}

/* One choice: delta (chat chunk), message (chat full) or text (completions). */
json_t *gw_api_openai_choice(const struct gw_api_stream *s, int chunk,
			     int with_role, const char *text, size_t len,
			     const char *finish)
{
	json_t *c = json_object();

	json_object_set_new(c, "index", json_integer(s->index));
	if (s->kind == GW_API_OPENAI_COMPLETIONS) {
		json_object_set_new(c, "text", gw_api_jstrn(text, len));
	} else {
		json_t *m = json_object();

		if (with_role)
			json_object_set_new(m, "role", json_string("assistant"));
		if (text)
			json_object_set_new(m, "content", gw_api_jstrn(text, len));
		json_object_set_new(c, chunk ? "delta" : "message", m);
	}
	json_object_set_new(c, "logprobs", json_null());
	json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
	return c;
}

json_t *gw_api_usage_object(const struct gw_api_result *res)
{
	json_t *u = json_object(), *d = json_object();

	json_object_set_new(u, "prompt_tokens", json_integer(res->prompt_tokens));
	json_object_set_new(u, "completion_tokens", json_integer(res->gen_tokens));
	json_object_set_new(u, "total_tokens",
			    json_integer((json_int_t)res->prompt_tokens + res->gen_tokens));
	json_object_set_new(d, "cached_tokens", json_integer(res->cached_tokens));
	json_object_set_new(u, "prompt_tokens_details", d);
	if (res->reasoning_tokens) {
		json_t *c = json_object();

		json_object_set_new(c, "reasoning_tokens", json_integer(res->reasoning_tokens));
		json_object_set_new(u, "completion_tokens_details", c);
	}
	return u;
}
