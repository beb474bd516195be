/*
 * render_tools.c - tool calls and reasoning in the responses of both
 * dialects (docs/tools.md): each TOKEN entry of the reasoning or tool-call
 * channel as a streamed chunk (OpenAI delta.reasoning_content and
 * delta.tool_calls with their index, id, type and name; Ollama
 * message.thinking and message.tool_calls), or collected in the response
 * state for a whole body; the calls' ids.
 */
#include "gateway/api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crypto.h"
#include "common/utf8.h"

/* "call_" and 24 hex digits, unless the model wrote an id (Mistral's). */
static json_t *call_id(const json_t *call)
{
	const char *id = json_string_value(json_object_get(call, "id"));
	uint8_t rnd[12];
	char hex[25], out[32];

	if (id && id[0])
		return json_string(id);
	if (cm_random_bytes(rnd, sizeof(rnd)) != CM_OK)
		memset(rnd, 0x5a, sizeof(rnd));
	cm_hex_encode(rnd, sizeof(rnd), hex);
	snprintf(out, sizeof(out), "call_%s", hex);
	return json_string(out);
}

/*
 * A call in the dialect's shape: OpenAI {"id", "type": "function",
 * "function": {"name", "arguments": <compact JSON text>}} (with "index"
 * when streamed), Ollama {"function": {"name", "arguments": object}}.
 * NULL when the worker's text is not a call.
 */
static json_t *call_object(const struct gw_api_stream *s, const struct proto_token *tk, int index)
{
	json_t *c = json_loadb(tk->text.ptr, tk->text.len, 0, NULL), *args, *fn, *o;
	char *argtxt;

	args = json_object_get(c, "arguments");
	if (!json_is_string(json_object_get(c, "name")) || !json_is_object(args)) {
		json_decref(c);
		return NULL;
	}
	fn = json_object();
	o = json_object();
	json_object_set(fn, "name", json_object_get(c, "name"));
	if (s->kind == GW_API_OLLAMA_CHAT || s->kind == GW_API_OLLAMA_GENERATE) {
		json_object_set(fn, "arguments", args);
		json_object_set_new(o, "function", fn);
	} else {
		argtxt = json_dumps(args, JSON_COMPACT);
		json_object_set_new(fn, "arguments", json_string(argtxt ? argtxt : "{}"));
		free(argtxt);
		if (index >= 0)
			json_object_set_new(o, "index", json_integer(index));
		json_object_set_new(o, "id", call_id(c));
		json_object_set_new(o, "type", json_string("function"));
		json_object_set_new(o, "function", fn);
	}
	json_decref(c);
	return o;
}

/* A streamed chunk carrying `field` (reasoning text or a list of calls). */
static enum cm_status chunk(struct cm_buf *out, struct gw_api_stream *s, const char *key,
			    json_t *value)
{
	json_t *o;

	if (s->kind == GW_API_OLLAMA_CHAT || s->kind == GW_API_OLLAMA_GENERATE) {
		o = gw_api_ollama_base(s);
		if (!o) {
			json_decref(value);
			return CM_ENOMEM;
		}
		if (s->kind == GW_API_OLLAMA_CHAT) {
			json_t *m = json_object();

			json_object_set_new(m, "role", json_string("assistant"));
			json_object_set_new(m, "content", json_string(""));
			json_object_set_new(m, key, value);
			json_object_set_new(o, "message", m);
		} else {
			json_object_set_new(o, "response", json_string(""));
			json_object_set_new(o, key, value);
		}
		json_object_set_new(o, "done", json_false());
		return gw_api_ndjson_line(out, o);
	}
	o = gw_api_openai_base(s, 1);
	if (!o) {
		json_decref(value);
		return CM_ENOMEM;
	}
	{
		json_t *choices = json_array(), *c = json_object(), *d = json_object();

		if (s->chunks == 0)
			json_object_set_new(d, "role", json_string("assistant"));
		if (strcmp(key, "tool_calls") == 0)
			json_object_set_new(d, "content", json_null());
		json_object_set_new(d, key, value);
		json_object_set_new(c, "index", json_integer(s->index));
		json_object_set_new(c, "delta", d);
		json_object_set_new(c, "logprobs", json_null());
		json_object_set_new(c, "finish_reason", json_null());
		json_array_append_new(choices, c);
		json_object_set_new(o, "choices", choices);
		if (s->include_usage)
			json_object_set_new(o, "usage", json_null());
	}
	return gw_api_sse_event(out, o);
}

enum cm_status gw_api_render_entry(struct cm_buf *out, struct gw_api_stream *s,
				   const struct proto_token *tk)
{
	enum cm_status st;

	if (tk->channel == PROTO_CH_CONTENT)
		return gw_api_render_chunk(out, s, tk->text.ptr, tk->text.len, tk);
	if (tk->channel == PROTO_CH_REASONING) {
		if (tk->text.len == 0 || !cm_utf8_valid(tk->text.ptr, tk->text.len))
			return CM_OK;
		st = chunk(out, s, s->kind == GW_API_OLLAMA_CHAT || s->kind == GW_API_OLLAMA_GENERATE
					   ? "thinking" : "reasoning_content",
			   gw_api_jstrn(tk->text.ptr, tk->text.len));
	} else {
		json_t *c = call_object(s, tk, (int)s->n_calls), *list;

		if (!c)
			return gw_api_render_chunk(out, s, tk->text.ptr, tk->text.len, tk);
		list = json_array();
		json_array_append_new(list, c);
		st = chunk(out, s, "tool_calls", list);
		if (st == CM_OK)
			s->n_calls++;
	}
	if (st == CM_OK)
		s->chunks++;
	return st;
}

enum cm_status gw_api_stream_collect(struct gw_api_stream *s, const struct proto_token *tk)
{
	json_t *c;

	if (tk->channel == PROTO_CH_REASONING) {
		if (!cm_utf8_valid(tk->text.ptr, tk->text.len))
			return CM_OK;
		return cm_buf_append(&s->reasoning, tk->text.ptr, tk->text.len);
	}
	if (tk->channel != PROTO_CH_TOOL_CALL)
		return CM_OK;
	c = call_object(s, tk, -1);
	if (!c)
		return CM_EINVAL; /* the caller keeps it as content */
	if (!s->calls && !(s->calls = json_array())) {
		json_decref(c);
		return CM_ENOMEM;
	}
	json_array_append_new(s->calls, c);
	s->n_calls++;
	return CM_OK;
}

void gw_api_message_extras(json_t *msg, struct gw_api_stream *s, int ollama)
{
	if (cm_buf_len(&s->reasoning))
		json_object_set_new(msg, ollama ? "thinking" : "reasoning_content",
				    gw_api_jstrn((const char *)cm_buf_data(&s->reasoning),
						 cm_buf_len(&s->reasoning)));
	if (s->calls) {
		json_object_set_new(msg, "tool_calls", s->calls);
		s->calls = NULL;
		if (!ollama) {
			/* a message of calls only has no content (OpenAI's shape) */
			json_t *content = json_object_get(msg, "content");

			if (json_is_string(content) && json_string_length(content) == 0)
				json_object_set_new(msg, "content", json_null());
		}
	}
}
