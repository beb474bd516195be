/*
 * test_render.c - gateway/api/render.c, errors.c, fixed.c: every rendered
 * body (streamed chunks, final chunks, whole bodies, errors, the fixed
 * endpoints) parsed back with jansson.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/utf8.h"
#include "gateway/api/api.h"

#include "tests/gateway/api/api_fixture.h"

static void fill_result(struct gw_api_result *res)
{
	struct proto_done d = {
		.finish = PROTO_FINISH_LENGTH, .prompt_tokens = 11, .cached_tokens = 4,
		.gen_tokens = 3, .load_ns = 5, .queue_ns = 6, .prefill_ns = 700,
		.decode_ns = 800, .ttft_ns = 900,
	};

	gw_api_result_from_done(res, &d);
	assert_int_equal(res->total_ns, 0);
	res->total_ns = 123456789;
	res->ttft_ns = 1000;
	res->queue_ns = 2000;
}

static void check_ollama_done(json_t *j, int chat)
{
	json_t *x = json_object_get(j, "sluice");

	assert_true(json_is_true(json_object_get(j, "done")));
	assert_string_equal(json_string_value(json_object_get(j, "done_reason")), "length");
	assert_int_equal(json_integer_value(json_object_get(j, "total_duration")), 123456789);
	assert_int_equal(json_integer_value(json_object_get(j, "load_duration")), 5);
	assert_int_equal(json_integer_value(json_object_get(j, "prompt_eval_count")), 11);
	assert_int_equal(json_integer_value(json_object_get(j, "prompt_eval_duration")), 700);
	assert_int_equal(json_integer_value(json_object_get(j, "eval_count")), 3);
	assert_int_equal(json_integer_value(json_object_get(j, "eval_duration")), 800);
	assert_int_equal(json_integer_value(json_object_get(x, "ttft_ns")), 1000);
	assert_int_equal(json_integer_value(json_object_get(x, "queue_ns")), 2000);
	assert_int_equal(json_integer_value(json_object_get(x, "cached_prompt_tokens")), 4);
	assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
	assert_true(json_is_string(json_object_get(j, "created_at")));
	if (chat)
		assert_string_equal(json_string_value(json_object_get(
					    json_object_get(j, "message"), "role")), "assistant");
}

static void test_render_ollama(void **state)
{
	struct gw_api_request r;
	struct gw_api_stream s;
	struct gw_api_result res;
	struct cm_buf b;
	json_t *j;
	char *nl;

	(void)state;
	cm_buf_init(&b, 1 << 16);
	fill_result(&res);
	api_ok(GW_API_OLLAMA_GENERATE, "{\"model\":\"m\",\"prompt\":\"p\"}", &r);
	assert_string_equal(gw_api_content_type(&r), GW_API_CT_NDJSON);
	gw_api_stream_init(&s, &r, 1, 1700000000LL * 1000000000LL);
	assert_int_equal(gw_api_render_chunk(&b, &s, "He said \"hi\"\n", 13, NULL), CM_OK);
	nl = memchr(cm_buf_data(&b), '\n', cm_buf_len(&b));
	assert_ptr_equal(nl, cm_buf_data(&b) + cm_buf_len(&b) - 1); /* one line */
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "He said \"hi\"\n");
	assert_true(json_is_false(json_object_get(j, "done")));
	assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_final(&b, &s, &res), CM_OK);
	assert_int_equal(cm_buf_data(&b)[cm_buf_len(&b) - 1], '\n');
	j = api_load(&b);
	check_ollama_done(j, 0);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "whole", 5, &res), CM_OK);
	j = api_load(&b);
	check_ollama_done(j, 0);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "whole");
	json_decref(j);

	api_ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 2, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_chunk(&b, &s, "tok", 3, NULL), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "message"), "content")), "tok");
	assert_null(json_object_get(j, "response"));
	json_decref(j);
	cm_buf_reset(&b);
	res.finish = PROTO_FINISH_STOP;
	assert_int_equal(gw_api_render_full(&b, &s, "all", 3, &res), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "done_reason")), "stop");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "message"), "content")), "all");
	json_decref(j);
	cm_buf_deinit(&b);
}

/* Splits SSE events: returns the number of "data: " payloads. */
static int sse_split(const struct cm_buf *b, char ev[][4096], int max)
{
	const char *p = (const char *)cm_buf_data(b), *end = p + cm_buf_len(b);
	int n = 0;

	while (p < end) {
		const char *e = strstr(p, "\n\n");

		assert_non_null(e);
		assert_int_equal(strncmp(p, "data: ", 6), 0);
		assert_true(n < max);
		snprintf(ev[n], 4096, "%.*s", (int)(e - p - 6), p + 6);
		n++;
		p = e + 2;
	}
	return n;
}

static json_t *loads(const char *s)
{
	json_t *j = json_loads(s, 0, NULL);

	if (!j)
		fail_msg("not JSON: %s", s);
	return j;
}

static void test_render_openai(void **state)
{
	struct gw_api_request r;
	struct gw_api_stream s;
	struct gw_api_result res;
	struct cm_buf b;
	char ev[8][4096];
	json_t *j, *c, *u;
	int n;

	(void)state;
	cm_buf_init(&b, 1 << 16);
	fill_result(&res);
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", &r);
	gw_api_stream_init(&s, &r, 9, 1700000000LL * 1000000000LL);
	assert_int_equal(strncmp(s.id, "chatcmpl-", 9), 0);
	assert_int_equal(gw_api_render_chunk(&b, &s, "Hel", 3, NULL), CM_OK);
	assert_int_equal(gw_api_render_chunk(&b, &s, "lo", 2, NULL), CM_OK);
	assert_int_equal(gw_api_render_final(&b, &s, &res), CM_OK);
	n = sse_split(&b, ev, 8);
	assert_int_equal(n, 5);
	j = loads(ev[0]);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion.chunk");
	assert_string_equal(json_string_value(json_object_get(j, "id")), s.id);
	assert_int_equal(json_integer_value(json_object_get(j, "created")), 1700000000);
	assert_string_equal(json_string_value(json_object_get(j, "model")), "gm");
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "delta"), "role")), "assistant");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "delta"), "content")), "Hel");
	assert_true(json_is_null(json_object_get(c, "finish_reason")));
	assert_true(json_is_null(json_object_get(j, "usage")));
	json_decref(j);
	j = loads(ev[1]);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_null(json_object_get(json_object_get(c, "delta"), "role"));
	json_decref(j);
	j = loads(ev[2]);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
	assert_int_equal(json_object_size(json_object_get(c, "delta")), 0);
	json_decref(j);
	j = loads(ev[3]);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 0);
	u = json_object_get(j, "usage");
	assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 11);
	assert_int_equal(json_integer_value(json_object_get(u, "completion_tokens")), 3);
	assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 14);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"),
							    "cached_tokens")), 4);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "sluice"), "ttft_ns")), 1000);
	json_decref(j);
	assert_string_equal(ev[4], "[DONE]");

	/* without include_usage: finish chunk then [DONE], no usage chunk */
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_chunk(&b, &s, "a", 1, NULL), CM_OK);
	assert_int_equal(gw_api_render_final(&b, &s, &res), CM_OK);
	n = sse_split(&b, ev, 8);
	assert_int_equal(n, 3);
	j = loads(ev[0]);
	assert_null(json_object_get(j, "usage"));
	json_decref(j);
	assert_string_equal(ev[2], "[DONE]");

	/* non-streaming chat.completion */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "answer", 6, &res), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "message"), "content")), "answer");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "message"), "role")), "assistant");
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 14);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "sluice"), "cached_prompt_tokens")), 4);
	json_decref(j);

	/* text_completion, streaming and not */
	api_ok(GW_API_OPENAI_COMPLETIONS, "{\"model\":\"gm\",\"prompt\":\"x\",\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	assert_int_equal(strncmp(s.id, "cmpl-", 5), 0);
	cm_buf_reset(&b);
	res.finish = PROTO_FINISH_STOP;
	assert_int_equal(gw_api_render_chunk(&b, &s, "t", 1, NULL), CM_OK);
	assert_int_equal(gw_api_render_final(&b, &s, &res), CM_OK);
	n = sse_split(&b, ev, 8);
	assert_int_equal(n, 3);
	j = loads(ev[0]);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "text_completion");
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "text")), "t");
	json_decref(j);
	j = loads(ev[1]);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "stop");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "full", 4, &res), CM_OK);
	j = api_load(&b);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "text")), "full");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 11);
	json_decref(j);
	cm_buf_deinit(&b);
}

/* OpenAI `n` > 1: each choice its own index and first-delta role, one
 * finish chunk per choice, the usage of the whole response, one body of n
 * choices with their own logprobs. */
static void test_render_choices(void **state)
{
	struct gw_api_request r;
	struct gw_api_stream s0, s1, s2;
	struct gw_api_result res, one;
	struct gw_api_choice_text ct[3];
	struct proto_token tk = { .id = 7, .logprob = -0.5f, .text = { "b", 1 }, .piece = { "b", 1 } };
	struct cm_buf b;
	static char ev[10][4096];
	json_t *j, *c;
	int n;

	(void)state;
	cm_buf_init(&b, 1 << 16);
	fill_result(&one);
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"n\":3,\"stream\":true,\"stream_options\":{\"include_usage\":true}}", &r);
	gw_api_stream_init(&s0, &r, 9, 1700000000LL * 1000000000LL);
	gw_api_stream_init_choice(&s1, &s0, 1);
	gw_api_stream_init_choice(&s2, &s0, 2);
	assert_string_equal(s1.id, s0.id);
	assert_int_equal(s2.created_s, s0.created_s);
	assert_int_equal(gw_api_render_chunk(&b, &s0, "a", 1, NULL), CM_OK);
	assert_int_equal(gw_api_render_chunk(&b, &s2, "c", 1, NULL), CM_OK);
	assert_int_equal(gw_api_render_chunk(&b, &s0, "A", 1, NULL), CM_OK);
	assert_int_equal(gw_api_render_choice_end(&b, &s0, &one), CM_OK);
	assert_int_equal(gw_api_render_choice_end(&b, &s1, &one), CM_OK); /* no text at all */
	assert_int_equal(gw_api_render_choice_end(&b, &s2, &one), CM_OK);
	res = one;
	res.gen_tokens = 9;
	assert_int_equal(gw_api_render_stream_end(&b, &s0, &res), CM_OK);
	n = sse_split(&b, ev, 10);
	assert_int_equal(n, 8);
	{
		static const int idx[6] = { 0, 2, 0, 0, 1, 2 };
		static const int role[6] = { 1, 1, 0, 0, 1, 0 };

		for (int i = 0; i < 6; i++) {
			j = loads(ev[i]);
			assert_string_equal(json_string_value(json_object_get(j, "id")), s0.id);
			c = json_array_get(json_object_get(j, "choices"), 0);
			assert_int_equal(json_array_size(json_object_get(j, "choices")), 1);
			assert_int_equal(json_integer_value(json_object_get(c, "index")), idx[i]);
			assert_int_equal(json_object_get(json_object_get(c, "delta"), "role") != NULL,
					 role[i]);
			assert_int_equal(json_is_string(json_object_get(c, "finish_reason")), i >= 3);
			assert_true(json_is_null(json_object_get(j, "usage")));
			json_decref(j);
		}
	}
	j = loads(ev[6]);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "completion_tokens")), 9);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "total_tokens")), 20);
	json_decref(j);
	assert_string_equal(ev[7], "[DONE]");
	/* without include_usage each finish chunk carries its choice's operator fields */
	api_ok(GW_API_OPENAI_COMPLETIONS, "{\"model\":\"gm\",\"prompt\":\"x\",\"n\":2,\"stream\":true}", &r);
	gw_api_stream_init(&s0, &r, 9, 0);
	gw_api_stream_init_choice(&s1, &s0, 1);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_choice_end(&b, &s1, &one), CM_OK);
	assert_int_equal(gw_api_render_stream_end(&b, &s0, &res), CM_OK);
	n = sse_split(&b, ev, 10);
	assert_int_equal(n, 2);
	j = loads(ev[0]);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_int_equal(json_integer_value(json_object_get(c, "index")), 1);
	assert_string_equal(json_string_value(json_object_get(c, "text")), "");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "sluice"),
							    "cached_prompt_tokens")), 4);
	json_decref(j);
	assert_string_equal(ev[1], "[DONE]");

	/* one body, choices in order, each its own text, finish and logprobs */
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"n\":3,\"logprobs\":true}", &r);
	gw_api_stream_init(&s0, &r, 9, 0);
	gw_api_stream_init_choice(&s1, &s0, 1);
	gw_api_stream_init_choice(&s2, &s0, 2);
	assert_int_equal(gw_api_stream_add_logprobs(&s1, &tk), CM_OK);
	ct[0] = (struct gw_api_choice_text){ &s0, "zero", 4, PROTO_FINISH_STOP };
	ct[1] = (struct gw_api_choice_text){ &s1, "b", 1, PROTO_FINISH_LENGTH };
	ct[2] = (struct gw_api_choice_text){ &s2, "", 0, PROTO_FINISH_STOP };
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full_choices(&b, ct, 3, &res), CM_OK);
	j = api_load(&b);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 3);
	for (int i = 0; i < 3; i++) {
		c = json_array_get(json_object_get(j, "choices"), (size_t)i);
		assert_int_equal(json_integer_value(json_object_get(c, "index")), i);
		assert_string_equal(json_string_value(json_object_get(json_object_get(c, "message"),
								      "content")), ct[i].text);
		assert_string_equal(json_string_value(json_object_get(c, "finish_reason")),
				    i == 1 ? "length" : "stop");
	}
	c = json_array_get(json_object_get(j, "choices"), 1);
	assert_int_equal(json_array_size(json_object_get(json_object_get(c, "logprobs"), "content")), 1);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_true(json_is_null(json_object_get(c, "logprobs")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "completion_tokens")), 9);
	json_decref(j);
	gw_api_stream_deinit(&s0);
	gw_api_stream_deinit(&s1);
	gw_api_stream_deinit(&s2);
	cm_buf_deinit(&b);
}

/* Tool calls and reasoning in both dialects, streamed and whole. */
static void test_render_tool_calls(void **state)
{
	struct gw_api_request r;
	struct gw_api_stream s;
	struct gw_api_result res;
	static char ev[8][4096];
	struct cm_buf b;
	json_t *j, *c, *d, *tc;
	int n;
	const struct proto_token think = { .id = 5, .text = { "hmm", 3 }, .channel = PROTO_CH_REASONING };
	const struct proto_token call1 = { .id = UINT32_MAX, .text = { "{\"name\":\"f\",\"arguments\":{\"a\":1}}", 32 },
					   .channel = PROTO_CH_TOOL_CALL };
	const struct proto_token call2 = { .id = UINT32_MAX,
					   .text = { "{\"name\":\"g\",\"arguments\":{},\"id\":\"abcdefghi\"}", 44 },
					   .channel = PROTO_CH_TOOL_CALL };
	const struct proto_token junk = { .id = 6, .text = { "not a call", 10 }, .channel = PROTO_CH_TOOL_CALL };

	(void)state;
	cm_buf_init(&b, 1 << 16);
	fill_result(&res);
	res.finish = PROTO_FINISH_STOP;
	res.reasoning_tokens = 2;
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	assert_int_equal(gw_api_render_entry(&b, &s, &think), CM_OK);
	assert_int_equal(gw_api_render_entry(&b, &s, &call1), CM_OK);
	assert_int_equal(gw_api_render_entry(&b, &s, &call2), CM_OK);
	assert_int_equal(gw_api_render_choice_end(&b, &s, &res), CM_OK);
	n = sse_split(&b, ev, 8);
	assert_int_equal(n, 4);
	j = loads(ev[0]);
	d = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
	assert_string_equal(json_string_value(json_object_get(d, "role")), "assistant");
	assert_string_equal(json_string_value(json_object_get(d, "reasoning_content")), "hmm");
	json_decref(j);
	for (int i = 1; i <= 2; i++) {
		j = loads(ev[i]);
		d = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
		assert_null(json_object_get(d, "role"));
		tc = json_array_get(json_object_get(d, "tool_calls"), 0);
		assert_int_equal(json_integer_value(json_object_get(tc, "index")), i - 1);
		assert_string_equal(json_string_value(json_object_get(tc, "type")), "function");
		assert_string_equal(json_string_value(json_object_get(json_object_get(tc, "function"), "name")),
				    i == 1 ? "f" : "g");
		assert_string_equal(json_string_value(json_object_get(json_object_get(tc, "function"),
								      "arguments")), i == 1 ? "{\"a\":1}" : "{}");
		if (i == 1)
			assert_int_equal(strncmp(json_string_value(json_object_get(tc, "id")), "call_", 5), 0);
		else /* the model's own id (Mistral's) */
			assert_string_equal(json_string_value(json_object_get(tc, "id")), "abcdefghi");
		json_decref(j);
	}
	j = loads(ev[3]);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
	json_decref(j);
	/* something that is no call is text */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_entry(&b, &s, &junk), CM_OK);
	assert_non_null(strstr((const char *)cm_buf_data(&b), "\"content\":\"not a call\""));
	gw_api_stream_deinit(&s);

	/* whole: content null, the calls, the reasoning, reasoning tokens */
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	assert_int_equal(gw_api_stream_collect(&s, &think), CM_OK);
	assert_int_equal(gw_api_stream_collect(&s, &call1), CM_OK);
	assert_int_equal(gw_api_stream_collect(&s, &call2), CM_OK);
	assert_int_equal(gw_api_stream_collect(&s, &junk), CM_EINVAL);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "", 0, &res), CM_OK);
	j = api_load(&b);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "tool_calls");
	d = json_object_get(c, "message");
	assert_true(json_is_null(json_object_get(d, "content")));
	assert_string_equal(json_string_value(json_object_get(d, "reasoning_content")), "hmm");
	assert_int_equal(json_array_size(json_object_get(d, "tool_calls")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(j, "usage"),
									   "completion_tokens_details"),
							    "reasoning_tokens")), 2);
	json_decref(j);
	gw_api_stream_deinit(&s);

	/* Ollama: arguments as an object, thinking beside the content */
	api_ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"stream\":false}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	assert_int_equal(gw_api_stream_collect(&s, &think), CM_OK);
	assert_int_equal(gw_api_stream_collect(&s, &call1), CM_OK);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "", 0, &res), CM_OK);
	j = api_load(&b);
	d = json_object_get(j, "message");
	assert_string_equal(json_string_value(json_object_get(d, "thinking")), "hmm");
	assert_string_equal(json_string_value(json_object_get(d, "content")), "");
	tc = json_object_get(json_array_get(json_object_get(d, "tool_calls"), 0), "function");
	assert_string_equal(json_string_value(json_object_get(tc, "name")), "f");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(tc, "arguments"), "a")), 1);
	assert_string_equal(json_string_value(json_object_get(j, "done_reason")), "stop");
	json_decref(j);
	gw_api_stream_deinit(&s);
	/* streamed Ollama lines */
	api_ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_entry(&b, &s, &call1), CM_OK);
	j = api_load(&b);
	assert_true(json_is_false(json_object_get(j, "done")));
	tc = json_object_get(json_array_get(json_object_get(json_object_get(j, "message"), "tool_calls"), 0),
			     "function");
	assert_true(json_is_object(json_object_get(tc, "arguments")));
	json_decref(j);
	gw_api_stream_deinit(&s);
	cm_buf_deinit(&b);
}

static void test_render_errors(void **state)
{
	struct gw_api_error e;
	struct gw_api_request r;
	struct gw_api_stream s;
	struct cm_buf b;
	const char *ct = NULL;
	json_t *j;
	char longname[200];

	(void)state;
	cm_buf_init(&b, 8192);
	/* model not found: 404 in both formats, name truncated */
	memset(longname, 'n', sizeof(longname));
	gw_api_error_model_not_found(&e, longname, sizeof(longname));
	assert_int_equal(e.status, 404);
	assert_int_equal(strlen(e.message), strlen("model '' not found") + 64);
	assert_int_equal(gw_api_render_error(&b, GW_STYLE_OPENAI, &e), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")), "not_found_error");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "model_not_found");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "model");
	json_decref(j);

	/* the server's own errors, by path */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(413, "request body is larger than the body limit",
					   "/v1/chat/completions", &b, &ct, NULL), CM_OK);
	assert_string_equal(ct, GW_API_CT_JSON);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			    "request body is larger than the body limit");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
			    "invalid_request_error");
	assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(431, "too big", "/api/chat", &b, &ct, NULL), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "too big");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(400, "x", NULL, &b, &ct, NULL), CM_OK);
	j = api_load(&b);
	assert_true(json_is_string(json_object_get(j, "error")));
	json_decref(j);

	/* OpenAI types by status */
	{
		struct { int status; const char *type; } t[] = {
			{ 401, "authentication_error" }, { 403, "permission_error" },
			{ 429, "rate_limit_error" }, { 503, "server_error" }, { 500, "server_error" },
		};

		for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
			gw_api_error_set(&e, t[i].status, NULL, NULL, "m");
			cm_buf_reset(&b);
			assert_int_equal(gw_api_render_error(&b, GW_STYLE_OPENAI, &e), CM_OK);
			j = api_load(&b);
			assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
					    t[i].type);
			json_decref(j);
		}
	}

	/* 403 for model management */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_manage_forbidden(&b, "pull"), CM_OK);
	j = api_load(&b);
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "model management (pull)"));
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "operator"));
	json_decref(j);

	/* errors after streaming started */
	gw_api_error_set(&e, 500, NULL, NULL, "worker failed");
	api_ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 1, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_stream_error(&b, &s, &e), CM_OK);
	assert_int_equal(cm_buf_data(&b)[cm_buf_len(&b) - 1], '\n');
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "worker failed");
	json_decref(j);
	api_ok(GW_API_OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 1, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_stream_error(&b, &s, &e), CM_OK);
	{
		char ev[2][4096];

		assert_int_equal(sse_split(&b, ev, 2), 1);
		j = loads(ev[0]);
		assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
				    "server_error");
		json_decref(j);
	}
	cm_buf_deinit(&b);
}

/* The hand-rendered per-token chunks escape everything JSON requires. */
static void test_render_chunk_escaping(void **state)
{
	static const char nasty[] = "q\"b\\s/ \n\r\t\b\f\x01\x1f\x7f \xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x98\x80 </script>";
	const char *bodies[] = {
		"{\"model\":\"m\\\"x\",\"prompt\":\"p\"}",
		"{\"model\":\"m\\\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
		"{\"model\":\"m\\\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
		"{\"model\":\"m\\\"x\",\"prompt\":\"p\",\"stream\":true}",
	};
	struct gw_api_request r;
	struct gw_api_stream st;
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 1 << 16);
	for (int k = 0; k < 4; k++) {
		json_t *j, *c;
		const char *got;

		api_ok((enum gw_api_kind)k, bodies[k], &r);
		gw_api_stream_init(&st, &r, 1, 0);
		for (int rep = 0; rep < 2; rep++) {
			const char *p;
			size_t n;

			cm_buf_reset(&b);
			assert_int_equal(gw_api_render_chunk(&b, &st, nasty, sizeof(nasty) - 1, NULL), CM_OK);
			p = (const char *)cm_buf_data(&b);
			n = cm_buf_len(&b);
			if (k >= 2) {
				assert_int_equal(strncmp(p, "data: ", 6), 0);
				assert_int_equal(strcmp(p + n - 2, "\n\n"), 0);
				p += 6;
				n -= 8;
			} else {
				assert_int_equal(p[n - 1], '\n');
				assert_null(memchr(p, '\n', n - 1)); /* one line */
				n -= 1;
			}
			j = json_loadb(p, n, 0, NULL);
			assert_non_null(j);
			assert_string_equal(json_string_value(json_object_get(j, "model")), "m\"x");
			if (k == 0)
				got = json_string_value(json_object_get(j, "response"));
			else if (k == 1)
				got = json_string_value(json_object_get(json_object_get(j, "message"), "content"));
			else if (k == 2)
				got = json_string_value(json_object_get(json_object_get(
					json_array_get(json_object_get(j, "choices"), 0), "delta"), "content"));
			else
				got = json_string_value(json_object_get(
					json_array_get(json_object_get(j, "choices"), 0), "text"));
			assert_non_null(got);
			assert_string_equal(got, nasty);
			if (k == 2) {
				c = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
				assert_int_equal(json_object_get(c, "role") != NULL, rep == 0);
				assert_true(json_is_null(json_object_get(j, "usage")));
			}
			json_decref(j);
		}
		/* invalid UTF-8 from a broken worker never produces invalid JSON */
		cm_buf_reset(&b);
		assert_int_equal(gw_api_render_chunk(&b, &st, "\xff\xfe", 2, NULL), CM_OK);
		if (k < 2) {
			j = json_loadb((const char *)cm_buf_data(&b), cm_buf_len(&b) - 1, 0, NULL);
			assert_non_null(j);
			json_decref(j);
		}
	}
	/* at the buffer's cap: refused and the buffer is unchanged */
	cm_buf_deinit(&b);
	cm_buf_init(&b, 40);
	assert_int_equal(cm_buf_append_str(&b, "keep"), CM_OK);
	assert_int_equal(gw_api_render_chunk(&b, &st, nasty, sizeof(nasty) - 1, NULL), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 4);
	cm_buf_deinit(&b);
}

static void test_render_fixed(void **state)
{
	struct gw_api_model m[2] = {
		{ .name = "tiny:latest", .architecture = "llama", .family = "llama",
		  .parameter_size = "1.1B", .quantization = "Q4_K_M", .size_bytes = 123,
		  .vram_bytes = 456, .modified_wall_ns = 1700000000LL * 1000000000LL,
		  .context_len = 2048, .generates = 1 },
		{ .name = "qwen", .architecture = "qwen2", .family = "qwen2",
		  .parameter_size = "0.5B", .quantization = "Q8_0", .context_len = 4096,
		  .generates = 1 },
	};
	struct gw_api_model emb = { .name = "minilm", .architecture = "bert", .family = "bert",
				    .parameter_size = "22.6M", .quantization = "F16",
				    .context_len = 512, .embedding_dim = 384 };
	struct cm_buf b;
	json_t *j, *e;

	(void)state;
	m[0].sha256[0] = 0xab;
	cm_buf_init(&b, 1 << 16);
	assert_int_equal(gw_api_render_version(&b), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "version")), GW_API_OLLAMA_COMPAT_VERSION);
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_tags(&b, m, 2), CM_OK);
	j = api_load(&b);
	assert_int_equal(json_array_size(json_object_get(j, "models")), 2);
	e = json_array_get(json_object_get(j, "models"), 0);
	assert_string_equal(json_string_value(json_object_get(e, "name")), "tiny:latest");
	assert_string_equal(json_string_value(json_object_get(e, "model")), "tiny:latest");
	assert_int_equal(json_integer_value(json_object_get(e, "size")), 123);
	assert_int_equal(strlen(json_string_value(json_object_get(e, "digest"))), 64);
	assert_int_equal(strncmp(json_string_value(json_object_get(e, "digest")), "ab00", 4), 0);
	assert_string_equal(json_string_value(json_object_get(e, "modified_at")), "2023-11-14T22:13:20.000Z");
	assert_string_equal(json_string_value(json_object_get(json_object_get(e, "details"), "quantization_level")), "Q4_K_M");
	assert_string_equal(json_string_value(json_object_get(json_object_get(e, "details"), "format")), "gguf");
	assert_null(json_object_get(e, "size_vram"));
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_ps(&b, m, 1), CM_OK);
	j = api_load(&b);
	e = json_array_get(json_object_get(j, "models"), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "size_vram")), 456);
	assert_true(json_is_string(json_object_get(e, "expires_at")));
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_models(&b, m, 2), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "list");
	e = json_array_get(json_object_get(j, "data"), 1);
	assert_string_equal(json_string_value(json_object_get(e, "id")), "qwen");
	assert_string_equal(json_string_value(json_object_get(e, "object")), "model");
	assert_string_equal(json_string_value(json_object_get(e, "owned_by")), "sluice");
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_tags(&b, m, 0), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b), "{\"models\":[]}");

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_show(&b, &m[1]), CM_OK);
	j = api_load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "model_info"),
							      "general.architecture")), "qwen2");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "model_info"),
							    "qwen2.context_length")), 4096);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "details"), "family")), "qwen2");
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "capabilities"), 0)), "completion");
	assert_int_equal(json_array_size(json_object_get(j, "capabilities")), 1);
	json_decref(j);

	/* an embedding model: capabilities ["embedding"] everywhere, its width */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_show(&b, &emb), CM_OK);
	j = api_load(&b);
	assert_int_equal(json_array_size(json_object_get(j, "capabilities")), 1);
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "capabilities"), 0)), "embedding");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "model_info"),
							    "bert.embedding_length")), 384);
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_models(&b, &emb, 1), CM_OK);
	j = api_load(&b);
	e = json_array_get(json_object_get(j, "data"), 0);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "capabilities"), 0)), "embedding");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_tags(&b, &emb, 1), CM_OK);
	j = api_load(&b);
	e = json_array_get(json_object_get(j, "models"), 0);
	assert_string_equal(json_string_value(json_array_get(json_object_get(e, "capabilities"), 0)), "embedding");
	json_decref(j);
	cm_buf_deinit(&b);
}

/* A worker's refusal: its words, the field it names, OpenAI's code. */
/* Ollama's parameter_size from the worker's parameter count. */
static void test_parameter_size(void **state)
{
	static const struct { uint64_t n; const char *s; } c[] = {
		{ 0, "0" }, { 999, "999" }, { 1000, "1.0K" }, { 260104, "260.1K" },
		{ 494032768, "494.0M" }, { 1100048384, "1.1B" }, { 8030261248ull, "8.0B" },
		{ 70553706496ull, "70.6B" },
	};
	char out[16];

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		gw_api_parameter_size(c[i].n, out);
		assert_string_equal(out, c[i].s);
	}
}

static void test_render_worker_refusal(void **state)
{
	struct gw_api_error e;
	char longmsg[600];
	const char *m;
	size_t i;

	(void)state;
	m = "top_p: expected a number in (0, 1], found 0";
	gw_api_error_from_worker(&e, PROTO_E_BAD_REQUEST, m, strlen(m));
	assert_int_equal(e.status, 400);
	assert_string_equal(e.message, m);
	assert_string_equal(e.param, "top_p");
	assert_null(e.code);
	m = "messages[2].role: expected user or assistant after the first turn, found system";
	gw_api_error_from_worker(&e, PROTO_E_BAD_REQUEST, m, strlen(m));
	assert_string_equal(e.param, "messages[2].role");
	/* no field prefix: no param; a prompt over the context has its code */
	m = "prompt (900 tokens) and max tokens (200) exceed the context (1024)";
	gw_api_error_from_worker(&e, PROTO_E_TOO_LONG, m, strlen(m));
	assert_int_equal(e.status, 400);
	assert_string_equal(e.param, "");
	assert_string_equal(e.code, "context_length_exceeded");
	gw_api_error_from_worker(&e, PROTO_E_TOO_LONG, NULL, 0);
	assert_string_equal(e.message, "the prompt and max tokens exceed the model's context");
	assert_string_equal(e.code, "context_length_exceeded");
	/* overload and failure: fixed texts, never the worker's */
	m = "internal: kv pool state";
	gw_api_error_from_worker(&e, PROTO_E_OVERLOADED, m, strlen(m));
	assert_int_equal(e.status, 503);
	assert_null(strstr(e.message, "internal"));
	gw_api_error_from_worker(&e, PROTO_E_INTERNAL, m, strlen(m));
	assert_int_equal(e.status, 502);
	assert_null(strstr(e.message, "internal"));
	/* a long message is cut on a character boundary: still UTF-8 */
	for (i = 0; i + 2 <= sizeof(longmsg); i += 2) {
		longmsg[i] = (char)0xC3;
		longmsg[i + 1] = (char)0xA9;
	}
	longmsg[0] = 'x';
	longmsg[1] = ' ';
	gw_api_error_from_worker(&e, PROTO_E_BAD_REQUEST, longmsg, sizeof(longmsg));
	assert_true(strlen(e.message) < sizeof(e.message));
	assert_int_equal(cm_utf8_valid(e.message, strlen(e.message)), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_ollama),
		cmocka_unit_test(test_render_openai),
		cmocka_unit_test(test_render_choices),
		cmocka_unit_test(test_render_tool_calls),
		cmocka_unit_test(test_render_errors),
		cmocka_unit_test(test_render_worker_refusal),
		cmocka_unit_test(test_render_chunk_escaping),
		cmocka_unit_test(test_render_fixed),
		cmocka_unit_test(test_parameter_size),
	};

	return cmocka_run_group_tests_name("gateway_api_render", tests, api_setup, api_teardown);
}
