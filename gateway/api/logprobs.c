/*
 * logprobs.c - log probabilities in each dialect's shape, from the TOKEN
 * frames of a request that asked for them (PROTO_SUBMIT_F_LOGPROBS): one
 * entry per generated token with its alternatives (docs/api.md).
 *
 *   OpenAI chat:        choices[].logprobs = {"content": [entry], "refusal": null}
 *   OpenAI completions: choices[].logprobs = {"tokens", "token_logprobs",
 *                       "top_logprobs": [{token: logprob}], "text_offset"}
 *   Ollama:             "logprobs": [entry] beside the text
 *   entry = {"token", "logprob", "bytes": [0..255], "top_logprobs": [
 *            {"token", "logprob", "bytes"}]}
 *
 * A token's string is its bytes with any sequence that is not UTF-8 on
 * its own (a byte token, half a character) written as U+FFFD; "bytes" is
 * exact.  Owns the entries a non-streamed reply collects (struct
 * gw_api_stream's lp, released by gw_api_stream_deinit).
 */
#include "gateway/api/internal.h"

#include <string.h>

#include "common/utf8.h"

/* The bytes as a JSON string, invalid sequences replaced by U+FFFD. */
static json_t *piece_string(const struct proto_str *p)
{
	const uint8_t *s = (const uint8_t *)p->ptr;
	char buf[512];
	size_t o = 0;

	if (!p->len)
		return json_string("");
	if (cm_utf8_valid(s, p->len))
		return gw_api_jstrn(p->ptr, p->len);
	for (size_t i = 0; i < p->len && o + 4 <= sizeof(buf);) {
		uint32_t cp;
		int n = cm_utf8_decode(s + i, p->len - i, &cp);

		if (n > 0) {
			memcpy(buf + o, s + i, (size_t)n);
			o += (size_t)n;
			i += (size_t)n;
		} else {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	return gw_api_jstrn(buf, o);
}

static json_t *piece_bytes(const struct proto_str *p)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < p->len; i++)
		json_array_append_new(a, json_integer((unsigned char)p->ptr[i]));
	return a;
}

static json_t *entry(const struct proto_str *piece, float logprob)
{
	json_t *e = json_object();

	if (!e)
		return NULL;
	json_object_set_new(e, "token", piece_string(piece));
	json_object_set_new(e, "logprob", json_real(logprob));
	json_object_set_new(e, "bytes", piece_bytes(piece));
	return e;
}

json_t *gw_api_lp_entry(const struct proto_token *t)
{
	json_t *e = entry(&t->piece, t->logprob), *top = json_array();

	if (!e || !top) {
		json_decref(e);
		json_decref(top);
		return NULL;
	}
	for (uint32_t i = 0; i < t->n_top; i++)
		json_array_append_new(top, entry(&t->top[i].piece, t->top[i].logprob));
	json_object_set_new(e, "top_logprobs", top);
	return e;
}

/* /v1/completions' shape of a list of entries, text offsets from `off`. */
static json_t *completions_shape(const json_t *entries, size_t off)
{
	json_t *o = json_object(), *toks = json_array(), *lps = json_array(),
	       *tops = json_array(), *offs = json_array();
	size_t i;
	json_t *e;

	if (!o || !toks || !lps || !tops || !offs) {
		json_decref(o);
		json_decref(toks);
		json_decref(lps);
		json_decref(tops);
		json_decref(offs);
		return NULL;
	}
	json_array_foreach(entries, i, e) {
		json_t *m = json_object(), *alt;
		size_t k;

		json_array_append(toks, json_object_get(e, "token"));
		json_array_append(lps, json_object_get(e, "logprob"));
		json_array_foreach(json_object_get(e, "top_logprobs"), k, alt)
			json_object_set(m, json_string_value(json_object_get(alt, "token")),
					json_object_get(alt, "logprob"));
		json_array_append_new(tops, m);
		json_array_append_new(offs, json_integer((json_int_t)off));
		off += json_array_size(json_object_get(e, "bytes"));
	}
	json_object_set_new(o, "tokens", toks);
	json_object_set_new(o, "token_logprobs", lps);
	json_object_set_new(o, "top_logprobs", tops);
	json_object_set_new(o, "text_offset", offs);
	return o;
}

json_t *gw_api_lp_field(const struct gw_api_stream *s, json_t *entries, size_t text_off)
{
	json_t *o;

	if (!entries)
		return json_null();
	if (s->kind == GW_API_OPENAI_COMPLETIONS) {
		o = completions_shape(entries, text_off);
		json_decref(entries);
		return o ? o : json_null();
	}
	if (s->kind == GW_API_OPENAI_CHAT) {
		o = json_object();
		if (!o) {
			json_decref(entries);
			return json_null();
		}
		json_object_set_new(o, "content", entries);
		json_object_set_new(o, "refusal", json_null());
		return o;
	}
	return entries; /* Ollama: the list itself */
}

enum cm_status gw_api_stream_add_logprobs(struct gw_api_stream *s, const struct proto_token *t)
{
	json_t *e;

	if (!s->logprobs || t->id == UINT32_MAX)
		return CM_OK;
	if (!s->lp && !(s->lp = json_array()))
		return CM_ENOMEM;
	e = gw_api_lp_entry(t);
	if (!e || json_array_append_new(s->lp, e) != 0)
		return CM_ENOMEM;
	return CM_OK;
}

void gw_api_stream_deinit(struct gw_api_stream *s)
{
	json_decref(s->lp);
	s->lp = NULL;
	json_decref(s->calls);
	s->calls = NULL;
	cm_buf_deinit(&s->reasoning);
}
