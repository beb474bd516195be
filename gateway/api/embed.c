/*
 * embed.c - the embedding endpoints' request bodies and answers (see
 * embed.h): the OpenAI and Ollama readers, the token estimate for quota
 * admission, and the renderers (JSON numbers that read back as the same
 * float32, or OpenAI's base64 of the little-endian float32 bytes).
 */
#include "gateway/api/embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "gateway/api/internal.h"

/* One input from a JSON string (non-empty unless allow_empty). */
static enum cm_status text_input(const json_t *v, const char *field, int allow_empty,
				 struct cm_arena *a, struct gw_api_embed *r,
				 struct proto_embed_input *in, struct gw_api_error *err)
{
	if (!json_is_string(v) || (!allow_empty && json_string_length(v) == 0))
		return gw_api_bad(err, field, allow_empty ? "a string" : "a non-empty string", v);
	in->kind = PROTO_INPUT_TEXT;
	r->text_bytes += json_string_length(v);
	return gw_api_copy_str(a, v, &in->text, err);
}

/* One input from a JSON array of token ids (OpenAI). */
static enum cm_status ids_input(const json_t *v, const char *field, struct cm_arena *a,
				struct gw_api_embed *r, struct proto_embed_input *in,
				struct gw_api_error *err)
{
	size_t n = json_array_size(v);
	uint32_t *ids;

	if (n == 0 || n > CM_LIM_PROTO_FRAME_BYTES / 4)
		return gw_api_bad(err, field, "a non-empty array of token ids", v);
	ids = cm_arena_alloc(a, n * sizeof(uint32_t));
	if (!ids)
		return gw_api_oom(err);
	for (size_t i = 0; i < n; i++) {
		json_t *t = json_array_get(v, i);

		if (!json_is_integer(t) || json_integer_value(t) < 0 ||
		    json_integer_value(t) > (json_int_t)INT32_MAX)
			return gw_api_bad(err, field, "token ids (integers from 0)", t);
		ids[i] = (uint32_t)json_integer_value(t);
	}
	in->kind = PROTO_INPUT_TOKENS;
	in->text = (struct proto_str){ "", 0 };
	in->n_tokens = (uint32_t)n;
	in->tokens = ids;
	r->token_ids += n;
	return CM_OK;
}

/* input: a string, or an array of strings / token ids / arrays of ids. */
static enum cm_status read_inputs(const json_t *root, const char *key, int openai,
				  const struct gw_api_limits *lim, struct cm_arena *a,
				  struct gw_api_embed *r, struct gw_api_error *err)
{
	json_t *v = gw_api_field(root, key);
	const char *expect = openai ? "a string, an array of strings, an array of token ids or "
				      "an array of arrays of token ids"
				    : "a string or an array of strings";
	size_t n;
	enum cm_status st = CM_OK;

	if (!v || !(json_is_string(v) || json_is_array(v)))
		return gw_api_bad(err, key, expect, v);
	n = json_is_string(v) ? 1 : json_array_size(v);
	/* an array of integers is one input of ids (OpenAI) */
	if (openai && json_is_array(v) && n > 0 && json_is_integer(json_array_get(v, 0)))
		n = 1;
	if ((openai && n == 0) || n > lim->embed_inputs) {
		gw_api_error_set(err, 400, key, NULL, "%s: expected 1 to %u inputs, found %zu", key,
				 lim->embed_inputs, n);
		return CM_EINVAL;
	}
	r->n_inputs = (uint32_t)n;
	if (n == 0)
		return CM_OK;
	r->inputs = cm_arena_alloc(a, n * sizeof(*r->inputs));
	if (!r->inputs)
		return gw_api_oom(err);
	memset(r->inputs, 0, n * sizeof(*r->inputs));
	if (json_is_string(v))
		return text_input(v, key, !openai, a, r, &r->inputs[0], err);
	if (openai && json_is_integer(json_array_get(v, 0)))
		return ids_input(v, key, a, r, &r->inputs[0], err);
	for (size_t i = 0; i < n && st == CM_OK; i++) {
		json_t *e = json_array_get(v, i);
		char field[48];

		snprintf(field, sizeof(field), "%s[%zu]", key, i);
		if (openai && json_is_array(e))
			st = ids_input(e, field, a, r, &r->inputs[i], err);
		else if (json_is_string(e))
			st = text_input(e, field, !openai, a, r, &r->inputs[i], err);
		else
			st = gw_api_bad(err, field, openai ? "a string or an array of token ids"
							   : "a string", e);
	}
	return st;
}

static enum cm_status read_openai(const json_t *root, const struct gw_api_limits *lim,
				  struct cm_arena *a, struct gw_api_embed *r,
				  struct gw_api_error *err)
{
	json_t *v = gw_api_field(root, "encoding_format");
	json_int_t dim = 0;
	enum cm_status st;

	if ((st = read_inputs(root, "input", 1, lim, a, r, err)) != CM_OK)
		return st;
	if (v) {
		if (json_is_string(v) && strcmp(json_string_value(v), "float") == 0)
			r->base64 = 0;
		else if (json_is_string(v) && strcmp(json_string_value(v), "base64") == 0)
			r->base64 = 1;
		else
			return gw_api_bad(err, "encoding_format", "\"float\" or \"base64\"", v);
	}
	st = gw_api_get_int(root, "dimensions", "dimensions", 1, CM_LIM_PROTO_EMBED_DIM_HARD,
			    &dim, NULL, err);
	r->dimensions = (uint32_t)dim;
	r->truncate = 0; /* OpenAI refuses an input over the context */
	return st;
}

static enum cm_status read_ollama(const json_t *root, int legacy,
				  const struct gw_api_limits *lim, struct cm_arena *a,
				  struct gw_api_embed *r, struct gw_api_error *err)
{
	json_int_t dim = 0;
	json_t *o = gw_api_field(root, "options");
	enum cm_status st;

	if (o && !json_is_object(o))
		return gw_api_bad(err, "options", "an object", o);
	r->truncate = 1;
	if (legacy) {
		json_t *p = gw_api_field(root, "prompt");

		if (!p || !json_is_string(p))
			return gw_api_bad(err, "prompt", "a string", p);
		if (json_string_length(p) == 0)
			return CM_OK; /* Ollama answers an empty vector */
		r->n_inputs = 1;
		r->inputs = cm_arena_alloc(a, sizeof(*r->inputs));
		if (!r->inputs)
			return gw_api_oom(err);
		memset(r->inputs, 0, sizeof(*r->inputs));
		return text_input(p, "prompt", 0, a, r, &r->inputs[0], err);
	}
	if ((st = read_inputs(root, "input", 0, lim, a, r, err)) != CM_OK ||
	    (st = gw_api_get_bool(root, "truncate", "truncate", &r->truncate, err)) != CM_OK)
		return st;
	st = gw_api_get_int(root, "dimensions", "dimensions", 1, CM_LIM_PROTO_EMBED_DIM_HARD,
			    &dim, NULL, err);
	r->dimensions = (uint32_t)dim;
	return st;
}

enum cm_status gw_api_parse_embed(enum gw_api_embed_kind kind, const void *body, size_t len,
				  const struct gw_api_limits *lim, struct cm_arena *arena,
				  struct gw_api_embed *out, struct gw_api_error *err)
{
	json_t *root = NULL;
	enum cm_status st;

	memset(out, 0, sizeof(*out));
	memset(err, 0, sizeof(*err));
	out->kind = kind;
	st = gw_api_load_object(body, len, lim, &root, err);
	if (st != CM_OK)
		goto out;
	if ((st = gw_api_get_model(root, "model", arena, &out->model, err)) != CM_OK)
		goto out;
	if (kind == GW_API_OPENAI_EMBEDDINGS)
		st = read_openai(root, lim, arena, out, err);
	else
		st = read_ollama(root, kind == GW_API_OLLAMA_EMBEDDINGS, lim, arena, out, err);
out:
	json_decref(root);
	return st;
}

int64_t gw_api_embed_token_estimate(const struct gw_api_embed *r, uint32_t ctx)
{
	int64_t n = 0;

	for (uint32_t i = 0; i < r->n_inputs; i++) {
		const struct proto_embed_input *in = &r->inputs[i];
		int64_t t = in->kind == PROTO_INPUT_TOKENS ? in->n_tokens : (int64_t)in->text.len + 2;

		n += ctx && t > ctx ? ctx : t;
	}
	return n;
}

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* "<base64 of the float32 little-endian bytes>" */
static enum cm_status put_base64(struct cm_buf *out, const float *v, uint32_t n)
{
	size_t bytes = (size_t)n * 4, olen = (bytes + 2) / 3 * 4;
	const uint8_t *p = (const uint8_t *)v; /* x86-64, aarch64: little-endian */
	enum cm_status st = cm_buf_reserve(out, olen + 2);
	char *o;

	if (st != CM_OK)
		return st;
	o = (char *)cm_buf_tail(out);
	*o++ = '"';
	for (size_t i = 0; i < bytes; i += 3) {
		uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < bytes ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < bytes ? p[i + 2] : 0);

		*o++ = b64[w >> 18 & 63];
		*o++ = b64[w >> 12 & 63];
		*o++ = i + 1 < bytes ? b64[w >> 6 & 63] : '=';
		*o++ = i + 2 < bytes ? b64[w & 63] : '=';
	}
	*o = '"';
	cm_buf_commit(out, olen + 2);
	return CM_OK;
}

/* [v0,v1,...]: each the shortest of %.9g (reads back as the same float) */
static enum cm_status put_floats(struct cm_buf *out, const float *v, uint32_t n)
{
	enum cm_status st = cm_buf_reserve(out, (size_t)n * 17 + 2);
	char *o, *start;

	if (st != CM_OK)
		return st;
	start = o = (char *)cm_buf_tail(out);
	*o++ = '[';
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			*o++ = ',';
		o += snprintf(o, 16, "%.9g", (double)v[i]);
	}
	*o++ = ']';
	cm_buf_commit(out, (size_t)(o - start));
	return CM_OK;
}

static enum cm_status put_model(struct cm_buf *out, const char *model)
{
	json_t *s = json_string(model);
	char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
	enum cm_status st = q ? cm_buf_append_str(out, q) : CM_ENOMEM;

	free(q);
	json_decref(s);
	return st;
}

#define PUT(x)                                   \
	do {                                     \
		if ((st = (x)) != CM_OK)         \
			return st;               \
	} while (0)

enum cm_status gw_api_render_embed(struct cm_buf *out, const struct gw_api_embed *r,
				   const char *model, const float *vectors, uint32_t dim,
				   uint32_t prompt_tokens, int64_t total_ns)
{
	char num[96];
	enum cm_status st;

	if (r->kind == GW_API_OLLAMA_EMBEDDINGS) {
		PUT(cm_buf_append_str(out, "{\"embedding\":"));
		PUT(r->n_inputs ? put_floats(out, vectors, dim) : cm_buf_append_str(out, "[]"));
		return cm_buf_append_str(out, "}\n");
	}
	if (r->kind == GW_API_OLLAMA_EMBED) {
		PUT(cm_buf_append_str(out, "{\"model\":"));
		PUT(put_model(out, model));
		PUT(cm_buf_append_str(out, ",\"embeddings\":["));
		for (uint32_t i = 0; i < r->n_inputs; i++) {
			if (i)
				PUT(cm_buf_append_str(out, ","));
			PUT(put_floats(out, vectors + (uint64_t)i * dim, dim));
		}
		snprintf(num, sizeof(num), "],\"total_duration\":%lld,\"load_duration\":0,"
			 "\"prompt_eval_count\":%u}\n", (long long)total_ns, prompt_tokens);
		return cm_buf_append_str(out, num);
	}
	PUT(cm_buf_append_str(out, "{\"object\":\"list\",\"data\":["));
	for (uint32_t i = 0; i < r->n_inputs; i++) {
		snprintf(num, sizeof(num), "%s{\"object\":\"embedding\",\"index\":%u,\"embedding\":",
			 i ? "," : "", i);
		PUT(cm_buf_append_str(out, num));
		PUT(r->base64 ? put_base64(out, vectors + (uint64_t)i * dim, dim)
			      : put_floats(out, vectors + (uint64_t)i * dim, dim));
		PUT(cm_buf_append_str(out, "}"));
	}
	PUT(cm_buf_append_str(out, "],\"model\":"));
	PUT(put_model(out, model));
	snprintf(num, sizeof(num), ",\"usage\":{\"prompt_tokens\":%u,\"total_tokens\":%u}}\n",
		 prompt_tokens, prompt_tokens);
	return cm_buf_append_str(out, num);
}
