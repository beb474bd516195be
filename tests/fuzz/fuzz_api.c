/*
 * fuzz_api.c - libFuzzer target for gateway/api/ (request.c, ollama.c, openai.c, render.c): request bodies for every
 * endpoint, then the responses rendered from what was accepted.
 *
 * Input layout: byte 0 selects the endpoint (generate, chat, OpenAI chat,
 * OpenAI completions, show, OpenAI embeddings, Ollama embed, Ollama legacy
 * embeddings: embed.c); the rest is the body.  An accepted embeddings
 * request has a model, at most limits.embed_inputs inputs, each text valid
 * UTF-8 and each id input non-empty; its answer (both encodings) is valid
 * JSON.  Invariants: an accepted
 * request has a model, max_tokens >= 1, counts within the limits and valid
 * UTF-8 strings; a refusal has a 4xx/5xx status and a non-empty message;
 * every rendered body is valid JSON (checked with jansson).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/arena.h"
#include "common/utf8.h"
#include "gateway/api/api.h"
#include "gateway/api/embed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const struct cm_buf *b)
{
	json_t *j = json_loadb((const char *)cm_buf_data(b), cm_buf_len(b), 0, NULL);

	if (!j)
		abort();
	json_decref(j);
}

static void check_str(struct proto_str s)
{
	if (!cm_utf8_valid(s.ptr, s.len) || cm_utf8_has_nul(s.ptr, s.len))
		abort();
}

/* The embeddings bodies (sel 5..7) and their answers. */
static void fuzz_embed(unsigned sel, const uint8_t *data, size_t size,
		       const struct gw_api_limits *lim, struct cm_arena *a, struct cm_buf *b)
{
	static const float vec[6] = { 0.5f, -0.5f, 0.5f, -0.5f, 1e-30f, -3.4e38f };
	struct gw_api_embed r;
	struct gw_api_error e;
	float *vals;

	if (gw_api_parse_embed((enum gw_api_embed_kind)(sel - 5), data, size, lim, a, &r, &e) !=
	    CM_OK) {
		if (e.status < 400 || e.status > 599 || !e.message[0])
			abort();
		return;
	}
	if (r.model.len == 0 || r.n_inputs > lim->embed_inputs || (r.n_inputs && !r.inputs))
		abort();
	check_str(r.model);
	for (uint32_t i = 0; i < r.n_inputs; i++) {
		if (r.inputs[i].kind == PROTO_INPUT_TEXT)
			check_str(r.inputs[i].text);
		else if (r.inputs[i].kind != PROTO_INPUT_TOKENS || r.inputs[i].n_tokens == 0)
			abort();
	}
	if (gw_api_embed_token_estimate(&r, 512) > (int64_t)r.n_inputs * 512)
		abort();
	vals = malloc(((size_t)r.n_inputs + 1) * 6 * sizeof(float));
	if (!vals)
		return;
	for (uint32_t i = 0; i < r.n_inputs; i++)
		memcpy(vals + (size_t)i * 6, vec, sizeof(vec));
	for (int enc = 0; enc < 2; enc++) {
		r.base64 = enc;
		cm_buf_reset(b);
		if (gw_api_render_embed(b, &r, "m\"odel", vals, 6, 7, 10) != CM_OK)
			abort();
		check_json(b);
	}
	free(vals);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_api_limits lim;
	struct gw_api_request r;
	struct gw_api_error e;
	struct cm_arena *a;
	struct cm_buf b;
	unsigned sel;
	enum cm_status st;

	if (size < 1)
		return 0;
	sel = data[0] % 8;
	data++;
	size--;
	gw_api_limits_defaults(&lim);
	a = cm_arena_new(4096, 8 * 1024 * 1024);
	if (!a)
		return 0;
	cm_buf_init(&b, 16 * 1024 * 1024);
	if (sel >= 5) {
		fuzz_embed(sel, data, size, &lim, a, &b);
		goto out;
	}
	if (sel == 4) {
		struct proto_str m;

		st = gw_api_parse_show(data, size, &lim, a, &m, &e);
		if (st == CM_OK)
			check_str(m);
		goto out;
	}
	st = gw_api_parse((enum gw_api_kind)sel, data, size, &lim, a, &r, &e);
	if (st != CM_OK) {
		if (e.status < 400 || e.status > 599 || !e.message[0])
			abort();
		if (gw_api_render_error(&b, r.style, &e) != CM_OK)
			abort();
		check_json(&b);
		goto out;
	}
	if (r.model.len == 0 || r.max_tokens < 1 || r.max_tokens > lim.max_output_tokens ||
	    r.n_stop > lim.stop_strings || r.n_messages > lim.messages)
		abort();
	check_str(r.model);
	for (uint32_t i = 0; i < r.n_stop; i++)
		check_str(r.stop[i]);
	for (uint32_t i = 0; i < r.n_messages; i++)
		check_str(r.messages[i].content);
	if (r.prompt_kind == PROTO_PROMPT_TEXT)
		check_str(r.text);
	{
		struct proto_submit s;
		struct gw_api_stream gs;
		struct gw_api_result res = { .finish = PROTO_FINISH_LENGTH, .prompt_tokens = 3,
					     .gen_tokens = 2, .total_ns = 10 };
		uint32_t flags;
		const char *text = r.prompt_kind == PROTO_PROMPT_TEXT ? r.text.ptr : r.messages[0].content.ptr;
		size_t tlen = r.prompt_kind == PROTO_PROMPT_TEXT ? r.text.len : r.messages[0].content.len;

		/* a token whose bytes are the client's (any bytes: a piece need
		 * not be UTF-8), with alternatives, for the logprobs renderers */
		struct proto_top top[2] = { { 1, -0.5f, { text, (uint32_t)(tlen > 3 ? 3 : tlen) } },
					    { 2, -1.5f, { text, (uint32_t)tlen } } };
		struct proto_token tk = { 1, -0.5f, { text, (uint32_t)tlen },
					  { text, (uint32_t)(tlen > 1 ? tlen - 1 : tlen) },
					  r.top_logprobs < 2 ? r.top_logprobs : 2, top, PROTO_CH_CONTENT };
		/* the client's text as a tool call and as reasoning (the
		 * renderers must give valid JSON whatever the worker sent) */
		struct proto_token call = { UINT32_MAX, 0.0f, { text, (uint32_t)tlen }, { NULL, 0 }, 0, NULL,
					    PROTO_CH_TOOL_CALL };
		struct proto_token why = { 3, 0.0f, { text, (uint32_t)tlen }, { NULL, 0 }, 0, NULL,
					   PROTO_CH_REASONING };

		gw_api_to_submit(&r, &s, &flags);
		if (flags & ~PROTO_SUBMIT_FLAGS_ALL)
			abort();
		if (s.constraint_kind > PROTO_CONSTRAINT_GRAMMAR || s.top_logprobs > PROTO_TOP_LOGPROBS_MAX)
			abort();
		gw_api_stream_init(&gs, &r, 1, 0);
		if (gw_api_stream_add_logprobs(&gs, &tk) != CM_OK)
			abort();
		if (gw_api_stream_collect(&gs, &why) != CM_OK)
			abort();
		(void)gw_api_stream_collect(&gs, &call); /* CM_EINVAL: no call, text */
		if (gw_api_render_full(&b, &gs, text, tlen, &res) != CM_OK)
			abort();
		check_json(&b);
		cm_buf_reset(&b);
		if (gw_api_render_entry(&b, &gs, &call) != CM_OK || gw_api_render_entry(&b, &gs, &why) != CM_OK)
			abort();
		cm_buf_reset(&b);
		if (gw_api_render_chunk(&b, &gs, text, tlen, &tk) != CM_OK)
			abort();
		gw_api_stream_deinit(&gs);
		{
			/* one NDJSON line or one SSE event holding valid JSON */
			const char *p = (const char *)cm_buf_data(&b);
			size_t n = cm_buf_len(&b);
			json_t *j;

			if (r.style == GW_STYLE_OPENAI) {
				if (n < 8 || memcmp(p, "data: ", 6) != 0 || memcmp(p + n - 2, "\n\n", 2) != 0)
					abort();
				p += 6;
				n -= 8;
			} else {
				if (n < 2 || p[n - 1] != '\n' || memchr(p, '\n', n - 1))
					abort();
				n -= 1;
			}
			j = json_loadb(p, n, 0, NULL);
			if (!j)
				abort();
			json_decref(j);
		}
		if (gw_api_render_final(&b, &gs, &res) != CM_OK)
			abort();
	}
out:
	cm_buf_deinit(&b);
	cm_arena_free(a);
	return 0;
}
