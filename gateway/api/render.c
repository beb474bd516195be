/*
 * render.c - generation responses for both dialects: per-response state,
 * streamed chunks (NDJSON lines or SSE events), the final chunk, whole
 * bodies and errors after streaming began.
 */
#include "gateway/api/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/utf8.h"

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
	res->reasoning_tokens = d->reasoning_tokens;
}

const char *gw_api_finish_of(const struct gw_api_stream *s, uint8_t finish)
{
	if (s->n_calls && finish == PROTO_FINISH_STOP && s->kind == GW_API_OPENAI_CHAT)
		return "tool_calls";
	return gw_api_finish_name(finish);
}

void gw_api_stream_init(struct gw_api_stream *s, const struct gw_api_request *r,
			uint64_t request_id, int64_t wall_ns)
{
	uint8_t rnd[12];
	char hex[25];
	size_t n;

	memset(s, 0, sizeof(*s));
	cm_buf_init(&s->reasoning, GW_API_REASONING_BYTES);
	s->kind = r->kind;
	n = r->model.len < GW_API_MODEL_NAME_MAX ? r->model.len : GW_API_MODEL_NAME_MAX;
	memcpy(s->model, r->model.ptr, n);
	s->model[n] = '\0';
	s->created_s = wall_ns / CM_NS_PER_S;
	s->include_usage = r->include_usage;
	s->logprobs = r->logprobs;
	if (cm_random_bytes(rnd, sizeof(rnd)) != CM_OK) {
		memset(rnd, 0, sizeof(rnd));
		for (int i = 0; i < 8; i++)
			rnd[i] = (uint8_t)(request_id >> (8 * i));
	}
	cm_hex_encode(rnd, sizeof(rnd), hex);
	snprintf(s->id, sizeof(s->id), "%s%s",
		 r->kind == GW_API_OPENAI_COMPLETIONS ? "cmpl-" : "chatcmpl-", hex);
}

void gw_api_stream_init_choice(struct gw_api_stream *s, const struct gw_api_stream *base,
			       uint32_t index)
{
	*s = *base;
	s->chunks = 0;
	s->lp = NULL;
	s->text_off = 0;
	s->index = index;
	s->n_calls = 0;
	s->calls = NULL;
	cm_buf_init(&s->reasoning, GW_API_REASONING_BYTES);
}

const char *gw_api_content_type(const struct gw_api_request *r)
{
	if (!r->stream)
		return GW_API_CT_JSON;
	return r->style == GW_STYLE_OPENAI ? GW_API_CT_SSE : GW_API_CT_NDJSON;
}

const char *gw_api_finish_name(uint8_t f)
{
	switch (f) {
	case PROTO_FINISH_STOP: return "stop";
	case PROTO_FINISH_LENGTH: return "length";
	default: return "cancelled";
	}
}

json_t *gw_api_jstrn(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);

	/* the worker sends validated UTF-8; never fail the whole reply on it */
	return j ? j : json_string("");
}

json_t *gw_api_operator_fields(const struct gw_api_result *res)
{
	json_t *x = json_object();

	json_object_set_new(x, "ttft_ns", json_integer(res->ttft_ns));
	json_object_set_new(x, "queue_ns", json_integer(res->queue_ns));
	json_object_set_new(x, "cached_prompt_tokens", json_integer(res->cached_tokens));
	return x;
}

enum cm_status gw_api_sse_event(struct cm_buf *out, json_t *j)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st = cm_buf_append(out, "data: ", 6);

	if (st == CM_OK)
		st = gw_api_dump_json(out, j);
	else
		json_decref(j);
	if (st == CM_OK)
		st = cm_buf_append(out, "\n\n", 2);
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

enum cm_status gw_api_ndjson_line(struct cm_buf *out, json_t *j)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st = gw_api_dump_json(out, j);

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

/* The chunk's logprobs value as JSON text (malloc'd), NULL when none. */
static char *chunk_logprobs(const struct gw_api_stream *s, const struct proto_token *tk)
{
	json_t *arr, *v;
	char *txt;

	if (!s->logprobs || !tk || tk->id == UINT32_MAX)
		return NULL;
	arr = json_array();
	if (!arr)
		return NULL;
	json_array_append_new(arr, gw_api_lp_entry(tk));
	v = gw_api_lp_field(s, arr, s->text_off);
	txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(v);
	return txt;
}

enum cm_status gw_api_render_chunk(struct cm_buf *out, struct gw_api_stream *s,
				   const char *text, size_t len, const struct proto_token *tk)
{
	size_t mark = cm_buf_len(out);
	char *lp = chunk_logprobs(s, tk);
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
			st = cm_buf_append_str(out, s->kind == GW_API_OLLAMA_CHAT ? "\"}" : "\"");
		if (st == CM_OK && lp)
			st = cm_buf_printf(out, ",\"logprobs\":%s", lp);
		if (st == CM_OK)
			st = cm_buf_append_str(out, ",\"done\":false}\n");
	} else {
		int compl = s->kind == GW_API_OPENAI_COMPLETIONS;

		st = cm_buf_printf(out, "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":%" PRId64
				   ",\"model\":\"", s->id,
				   compl ? "text_completion" : "chat.completion.chunk",
				   s->created_s);
		if (st == CM_OK)
			st = esc_append(out, s->model, strlen(s->model));
		if (st == CM_OK)
			st = cm_buf_printf(out, "\",\"choices\":[{\"index\":%u,%s", s->index,
					   compl ? "\"text\":\""
					   : s->chunks == 0 ? "\"delta\":{\"role\":\"assistant\",\"content\":\""
							    : "\"delta\":{\"content\":\"");
		if (st == CM_OK)
			st = esc_append(out, text, len);
		if (st == CM_OK)
			st = cm_buf_printf(out, "%s\"logprobs\":%s,\"finish_reason\":null}]",
					   compl ? "\"," : "\"},", lp ? lp : "null");
		if (st == CM_OK)
			st = cm_buf_append_str(out, s->include_usage ? ",\"usage\":null}\n\n" : "}\n\n");
	}
	free(lp);
	if (st != CM_OK) {
		cm_buf_truncate(out, mark);
		return st;
	}
	s->chunks++;
	s->text_off += len;
	return CM_OK;
}

enum cm_status gw_api_render_choice_end(struct cm_buf *out, struct gw_api_stream *s,
					const struct gw_api_result *res)
{
	json_t *o = gw_api_openai_base(s, 1), *choices = json_array();

	if (!o || !choices) {
		json_decref(o);
		json_decref(choices);
		return CM_ENOMEM;
	}
	json_array_append_new(choices, gw_api_openai_choice(s, 1, s->chunks == 0,
						     s->kind == GW_API_OPENAI_CHAT ? NULL : "",
						     0, gw_api_finish_of(s, res->finish)));
	json_object_set_new(o, "choices", choices);
	if (s->include_usage)
		json_object_set_new(o, "usage", json_null());
	else
		json_object_set_new(o, "sluice", gw_api_operator_fields(res));
	return gw_api_sse_event(out, o);
}

enum cm_status gw_api_render_stream_end(struct cm_buf *out, struct gw_api_stream *s,
					const struct gw_api_result *res)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st = CM_OK;

	if (s->include_usage) {
		json_t *o = gw_api_openai_base(s, 1);

		if (!o)
			return CM_ENOMEM;
		json_object_set_new(o, "choices", json_array());
		json_object_set_new(o, "usage", gw_api_usage_object(res));
		json_object_set_new(o, "sluice", gw_api_operator_fields(res));
		st = gw_api_sse_event(out, o);
	}
	if (st == CM_OK)
		st = cm_buf_append_str(out, "data: [DONE]\n\n");
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

enum cm_status gw_api_render_final(struct cm_buf *out, struct gw_api_stream *s,
				   const struct gw_api_result *res)
{
	size_t mark = cm_buf_len(out);
	json_t *o;
	enum cm_status st;

	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT) {
		o = gw_api_ollama_base(s);
		if (!o)
			return CM_ENOMEM;
		gw_api_ollama_text(o, s, "", 0);
		gw_api_ollama_done(o, res);
		return gw_api_ndjson_line(out, o);
	}
	st = gw_api_render_choice_end(out, s, res);
	if (st == CM_OK)
		st = gw_api_render_stream_end(out, s, res);
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	else
		s->chunks++;
	return st;
}

enum cm_status gw_api_render_full_choices(struct cm_buf *out,
					  const struct gw_api_choice_text *c, size_t n,
					  const struct gw_api_result *res)
{
	json_t *o = gw_api_openai_base(c[0].stream, 0), *choices = json_array();

	if (!o || !choices) {
		json_decref(o);
		json_decref(choices);
		return CM_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct gw_api_stream *s = c[i].stream;
		json_t *ch = gw_api_openai_choice(s, 0, 1, c[i].text, c[i].len,
						  gw_api_finish_of(s, c[i].finish));

		if (s->kind == GW_API_OPENAI_CHAT)
			gw_api_message_extras(json_object_get(ch, "message"), s, 0);
		if (s->logprobs) {
			json_object_set_new(ch, "logprobs", gw_api_lp_field(s, s->lp, 0));
			s->lp = NULL;
		}
		json_array_append_new(choices, ch);
	}
	json_object_set_new(o, "choices", choices);
	json_object_set_new(o, "usage", gw_api_usage_object(res));
	json_object_set_new(o, "sluice", gw_api_operator_fields(res));
	return gw_api_dump_json(out, o);
}

enum cm_status gw_api_render_full(struct cm_buf *out, struct gw_api_stream *s,
				  const char *text, size_t len,
				  const struct gw_api_result *res)
{
	struct gw_api_choice_text c = { s, text, len, res->finish };
	json_t *o;

	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT) {
		o = gw_api_ollama_base(s);
		if (!o)
			return CM_ENOMEM;
		gw_api_ollama_text(o, s, text, len);
		gw_api_message_extras(s->kind == GW_API_OLLAMA_CHAT ? json_object_get(o, "message") : o,
				      s, 1);
		if (s->logprobs) {
			json_object_set_new(o, "logprobs", s->lp ? s->lp : json_array());
			s->lp = NULL;
		}
		gw_api_ollama_done(o, res);
		return gw_api_dump_json(out, o);
	}
	return gw_api_render_full_choices(out, &c, 1, res);
}

enum cm_status gw_api_render_stream_error(struct cm_buf *out,
					  const struct gw_api_stream *s,
					  const struct gw_api_error *err)
{
	if (s->kind == GW_API_OLLAMA_GENERATE || s->kind == GW_API_OLLAMA_CHAT)
		return gw_api_ndjson_line(out, gw_api_error_object(GW_STYLE_OLLAMA, err));
	return gw_api_sse_event(out, gw_api_error_object(GW_STYLE_OPENAI, err));
}
