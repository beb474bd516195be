/*
 * test_thinking.c - thinking models through the whole service
 * (redis-server, a worker, the gateway with TLS, curl, the npm clients),
 * on random-weight models synthesized with Qwen3's templates:
 *
 *  - qwen3-thinking (the generation prompt opens "<think>\n", as Qwen3
 *    thinking models, QwQ and the R1 distills do): the answer streams its
 *    thinking apart from its content in both dialects (reasoning_content
 *    deltas, then content deltas; Ollama message.thinking, then content),
 *    the same as whole; the thinking budget (limits.thinking_token_budget,
 *    or the request's thinking_token_budget) closes the thinking, and the
 *    usage counts it; a json_schema constraint with thinking on is valid
 *    JSON in the content; a forced tool call comes after the thinking;
 *    thinking_token_budget 0 is the no-thinking form; bad budgets are 400
 *    naming the field; the official clients' tool and thinking scenarios;
 *  - qwen3 (hybrid: the model opens thinking itself): a json_schema
 *    constraint with thinking on opens the thinking for it (reasoning, then
 *    valid JSON); enable_thinking false renders the empty block (more
 *    prompt tokens, no reasoning).
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

#include "tests/integration/gateway_fixture.h"
#include "tests/integration/harness.h"

#define BUDGET 16

#define SCHEMA "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":10}," \
	"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99}},\"required\":[\"name\",\"age\"]," \
	"\"additionalProperties\":false}"
#define TOOLS "[{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":" \
	"\"object\",\"properties\":{\"zone\":{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"]," \
	"\"additionalProperties\":false}}}]"
#define USER "\"messages\":[{\"role\":\"user\",\"content\":\"Think, then answer.\"}]"

static json_t *post(const char *path, const char *body, int want)
{
	struct gwt_resp r;
	json_t *j;

	gwt_req(&r, path, gwt_key_a, body, 0, NULL);
	if (r.code != want)
		fail_msg("%s: expected %d, found %d: %.600s", path, want, r.code, r.body);
	j = gwt_parse(r.body);
	gwt_resp_free(&r);
	return j;
}

static json_t *openai_message(json_t *j)
{
	return json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
}

static json_int_t usage_of(json_t *j, const char *key)
{
	json_t *u = json_object_get(j, "usage");

	if (strcmp(key, "reasoning_tokens") == 0)
		u = json_object_get(u, "completion_tokens_details");
	return json_integer_value(json_object_get(u, key));
}

/* No thinking tag is left in a text that was split. */
static void assert_no_tags(const char *s)
{
	assert_non_null(s);
	assert_null(strstr(s, "<think>"));
	assert_null(strstr(s, "</think>"));
}

/* Characters (code points) of UTF-8 text: maxLength counts them. */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; s && *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/* A person of SCHEMA. */
static void assert_person(const char *text)
{
	json_t *p = json_loads(text, 0, NULL);
	json_t *age = json_object_get(p, "age");

	if (!p)
		fail_msg("content is not JSON: [%s]", text);
	assert_int_equal(json_object_size(p), 2);
	assert_true(json_is_string(json_object_get(p, "name")));
	assert_true(utf8_chars(json_string_value(json_object_get(p, "name"))) <= 10);
	assert_true(json_is_integer(age));
	assert_true(json_integer_value(age) >= 0 && json_integer_value(age) <= 99);
	json_decref(p);
}

/* The reasoning and content of an OpenAI SSE answer; reasoning never
 * after content (*interleaved set otherwise); the usage chunk. */
static void openai_stream(const char *body, char *reasoning, char *content, size_t cap,
			  int *interleaved, json_int_t *reasoning_tokens)
{
	struct gwt_resp r;

	reasoning[0] = content[0] = '\0';
	*interleaved = 0;
	*reasoning_tokens = -1;
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	if (r.code != 200)
		fail_msg("stream: %d %.400s", r.code, r.body);
	for (char *p = strstr(r.body, "data: {"); p; p = strstr(p + 1, "data: {")) {
		char *end = strstr(p, "\n\n");
		json_t *c, *d;

		assert_non_null(end);
		*end = '\0';
		c = gwt_parse(p + 6);
		*end = '\n';
		d = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
		if (json_is_string(json_object_get(d, "reasoning_content"))) {
			*interleaved |= content[0] != '\0';
			strncat(reasoning, json_string_value(json_object_get(d, "reasoning_content")),
				cap - strlen(reasoning) - 1);
		}
		if (json_is_string(json_object_get(d, "content")))
			strncat(content, json_string_value(json_object_get(d, "content")),
				cap - strlen(content) - 1);
		if (json_object_get(c, "usage") && !json_is_null(json_object_get(c, "usage")))
			*reasoning_tokens = usage_of(c, "reasoning_tokens");
		json_decref(c);
	}
	assert_non_null(strstr(r.body, "data: [DONE]"));
	gwt_resp_free(&r);
}

/*
 * The thinking model streams its thinking apart from its content: the
 * budget (limits.thinking_token_budget here) ends the thinking, the answer
 * follows; streamed equals whole; the usage counts the thinking.
 */
static void test_openai_thinking_apart(void **state)
{
	char body[2048], reasoning[4096], content[4096];
	const char *wr, *wc;
	json_t *j, *msg;
	json_int_t rt;
	int interleaved;

	(void)state;
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":4,\"max_tokens\":48,"
		 USER "}");
	j = post("/v1/chat/completions", body, 200);
	msg = openai_message(j);
	wr = json_string_value(json_object_get(msg, "reasoning_content"));
	wc = json_string_value(json_object_get(msg, "content"));
	assert_no_tags(wr);
	assert_no_tags(wc);
	if (strlen(wr) == 0 || strlen(wc) == 0)
		fail_msg("reasoning [%s] content [%s]", wr, wc);
	/* the budget's tokens, then the close the worker wrote (a few tokens) */
	rt = usage_of(j, "reasoning_tokens");
	if (rt < BUDGET || rt > BUDGET + 8)
		fail_msg("reasoning_tokens %lld, expected %d and the close", (long long)rt, BUDGET);
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":4,\"max_tokens\":48,"
		 "\"stream\":true,\"stream_options\":{\"include_usage\":true}," USER "}");
	openai_stream(body, reasoning, content, sizeof(reasoning), &interleaved, &rt);
	assert_false(interleaved);
	assert_string_equal(reasoning, wr);
	assert_string_equal(content, wc);
	assert_int_equal(rt, usage_of(j, "reasoning_tokens"));
	json_decref(j);
	/* the request's own budget, smaller */
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":4,\"max_tokens\":48,"
		 "\"thinking_token_budget\":4," USER "}");
	j = post("/v1/chat/completions", body, 200);
	rt = usage_of(j, "reasoning_tokens");
	if (rt < 4 || rt > 4 + 8)
		fail_msg("reasoning_tokens %lld with a budget of 4", (long long)rt);
	assert_true(json_string_length(json_object_get(openai_message(j), "content")) > 0);
	json_decref(j);
}

/* Ollama: message.thinking then message.content, streamed and whole. */
static void test_ollama_thinking_apart(void **state)
{
	char body[2048], thinking[4096] = "", content[4096] = "";
	struct gwt_resp r;
	json_t *j, *msg;
	int interleaved = 0, done = 0;

	(void)state;
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"stream\":false,\"think\":true,"
		 "\"options\":{\"temperature\":0.9,\"seed\":5,\"num_predict\":48}," USER "}");
	j = post("/api/chat", body, 200);
	msg = json_object_get(j, "message");
	assert_no_tags(json_string_value(json_object_get(msg, "thinking")));
	assert_no_tags(json_string_value(json_object_get(msg, "content")));
	assert_true(json_string_length(json_object_get(msg, "thinking")) > 0);
	assert_true(json_string_length(json_object_get(msg, "content")) > 0);
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"think\":true,"
		 "\"options\":{\"temperature\":0.9,\"seed\":5,\"num_predict\":48}," USER "}");
	gwt_req(&r, "/api/chat", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *o = gwt_parse(line), *m = json_object_get(o, "message");
		const char *t = json_string_value(json_object_get(m, "thinking"));
		const char *c = json_string_value(json_object_get(m, "content"));

		if (t && t[0]) {
			interleaved |= content[0] != '\0';
			strncat(thinking, t, sizeof(thinking) - strlen(thinking) - 1);
		}
		if (c)
			strncat(content, c, sizeof(content) - strlen(content) - 1);
		done += json_is_true(json_object_get(o, "done"));
		json_decref(o);
	}
	gwt_resp_free(&r);
	assert_false(interleaved);
	assert_int_equal(done, 1);
	assert_string_equal(thinking, json_string_value(json_object_get(msg, "thinking")));
	assert_string_equal(content, json_string_value(json_object_get(msg, "content")));
	json_decref(j);
}

/*
 * A json_schema constraint with thinking on: the thinking is free, the
 * constraint starts after it, the content is valid JSON; both dialects,
 * several seeds, streamed too.
 */
static void test_schema_after_thinking(void **state)
{
	char body[4096], reasoning[4096], content[4096];
	json_t *j, *msg;
	json_int_t rt;
	int interleaved;

	(void)state;
	for (int seed = 0; seed < 4; seed++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":%d,\"max_tokens\":120,"
			 "\"chat_template_kwargs\":{\"enable_thinking\":true},"
			 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
			 "\"strict\":true,\"schema\":" SCHEMA "}}," USER "}", seed);
		j = post("/v1/chat/completions", body, 200);
		msg = openai_message(j);
		assert_true(json_string_length(json_object_get(msg, "reasoning_content")) > 0);
		assert_no_tags(json_string_value(json_object_get(msg, "reasoning_content")));
		assert_person(json_string_value(json_object_get(msg, "content")));
		assert_string_equal(json_string_value(json_object_get(json_array_get(
			json_object_get(j, "choices"), 0), "finish_reason")), "stop");
		json_decref(j);
	}
	snprintf(body, sizeof(body),
		 "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":9,\"max_tokens\":120,\"stream\":true,"
		 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
		 "\"schema\":" SCHEMA "}}," USER "}");
	openai_stream(body, reasoning, content, sizeof(reasoning), &interleaved, &rt);
	assert_false(interleaved);
	assert_true(strlen(reasoning) > 0);
	assert_person(content);
	/* Ollama: format a schema, think true */
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"stream\":false,\"think\":true,\"format\":"
		 SCHEMA ",\"options\":{\"temperature\":0.9,\"seed\":2,\"num_predict\":120}," USER "}");
	j = post("/api/chat", body, 200);
	msg = json_object_get(j, "message");
	assert_true(json_string_length(json_object_get(msg, "thinking")) > 0);
	assert_person(json_string_value(json_object_get(msg, "content")));
	json_decref(j);
}

/* tool_choice required with thinking: the thinking, then the call. */
static void test_call_after_thinking(void **state)
{
	char body[4096];
	json_t *j, *msg, *fn, *args;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":3,\"max_tokens\":120,\"tools\":" TOOLS
		 ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false," USER "}");
	j = post("/v1/chat/completions", body, 200);
	msg = openai_message(j);
	assert_string_equal(json_string_value(json_object_get(json_array_get(
		json_object_get(j, "choices"), 0), "finish_reason")), "tool_calls");
	assert_true(json_string_length(json_object_get(msg, "reasoning_content")) > 0);
	fn = json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function");
	assert_string_equal(json_string_value(json_object_get(fn, "name")), "get_time");
	args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
	assert_non_null(args);
	assert_true(strcmp(json_string_value(json_object_get(args, "zone")), "utc") == 0 ||
		    strcmp(json_string_value(json_object_get(args, "zone")), "cet") == 0);
	json_decref(args);
	json_decref(j);
}

/*
 * thinking_token_budget 0 is the no-thinking form: no reasoning, and the
 * prompt holds the empty block instead of the opening; bad budgets are a
 * 400 naming the field; then served.
 */
static void test_budget_zero_and_bad(void **state)
{
	char body[2048];
	json_t *j, *msg, *e;
	json_int_t p_open, p_off;
	static const char *const bad[] = { "-1", "\"8\"", "1.5", "2000000" };

	(void)state;
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0,\"max_tokens\":8," USER "}");
	j = post("/v1/chat/completions", body, 200);
	p_open = usage_of(j, "prompt_tokens");
	json_decref(j);
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0,\"max_tokens\":8,"
		 "\"thinking_token_budget\":0," USER "}");
	j = post("/v1/chat/completions", body, 200);
	p_off = usage_of(j, "prompt_tokens");
	msg = openai_message(j);
	assert_null(json_object_get(msg, "reasoning_content"));
	assert_int_equal(usage_of(j, "reasoning_tokens"), 0);
	/* "<think>\n\n</think>\n\n" is longer than "<think>\n" */
	assert_true(p_off > p_open);
	json_decref(j);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"thinking_token_budget\":%s," USER "}",
			 bad[i]);
		j = post("/v1/chat/completions", body, 400);
		e = json_object_get(j, "error");
		assert_string_equal(json_string_value(json_object_get(e, "param")), "thinking_token_budget");
		json_decref(j);
		snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"thinking_token_budget\":%s," USER "}",
			 bad[i]);
		j = post("/api/chat", body, 400);
		assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "thinking_token_budget"));
		json_decref(j);
	}
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"thinking_token_budget\":0,\"think\":true," USER "}");
	j = post("/api/chat", body, 400);
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "turns thinking off"));
	json_decref(j);
	gwt_assert_served();
}

/* The official clients' tool and thinking scenarios on the thinking
 * model (every forced call after the budget's thinking). */
static void test_official_clients(void **state)
{
	int st;
	char *out;

	(void)state;
	out = gwt_run_clients("clients-thinking", "SLUICE_ONLY=tools:,thinking:", "tiny", &st);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "ok thinking: openai streamed reasoning_content"));
	assert_non_null(strstr(out, "ok tools: openai tool loop"));
	assert_non_null(strstr(out, "all scenarios passed"));
	free(out);
}

/*
 * The hybrid model opens thinking itself, so a constraint could not know
 * where its output starts: with thinking on, Sluice opens it in the
 * prompt; the JSON follows the thinking.  enable_thinking false renders
 * the empty block.
 */
static void test_hybrid(void **state)
{
	char body[4096];
	json_t *j, *msg;
	json_int_t p_default, p_off;

	(void)state;
	for (int seed = 0; seed < 3; seed++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"tiny\",\"temperature\":0.9,\"seed\":%d,\"max_tokens\":120,"
			 "\"chat_template_kwargs\":{\"enable_thinking\":true},\"thinking_token_budget\":8,"
			 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
			 "\"schema\":" SCHEMA "}}," USER "}", seed);
		j = post("/v1/chat/completions", body, 200);
		msg = openai_message(j);
		assert_true(json_string_length(json_object_get(msg, "reasoning_content")) > 0);
		assert_person(json_string_value(json_object_get(msg, "content")));
		json_decref(j);
	}
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0,\"max_tokens\":4," USER "}");
	j = post("/v1/chat/completions", body, 200);
	p_default = usage_of(j, "prompt_tokens");
	json_decref(j);
	snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"temperature\":0,\"max_tokens\":4,"
		 "\"chat_template_kwargs\":{\"enable_thinking\":false}," USER "}");
	j = post("/v1/chat/completions", body, 200);
	p_off = usage_of(j, "prompt_tokens");
	assert_null(json_object_get(openai_message(j), "reasoning_content"));
	assert_true(p_off > p_default);
	json_decref(j);
}

static int setup_with(void **state, const char *tmpl, unsigned budget)
{
	gwt_model_file = h_model_template("tiny", "Q8_0", "llama", tmpl);
	if (!gwt_model_file)
		return -1;
	gwt_model_name = "tiny";
	gwt_max_inflight = 4;
	/* the tools' prompt is longer than the tiny model's 512 tokens */
	gwt_context = 2048;
	gwt_thinking_budget = budget;
	return gwt_setup(state);
}

static int thinking_setup(void **state)
{
	return setup_with(state, "qwen3-thinking", BUDGET);
}

static int hybrid_setup(void **state)
{
	return setup_with(state, "qwen3", 0);
}

int main(void)
{
	const struct CMUnitTest thinking[] = {
		cmocka_unit_test(test_openai_thinking_apart),
		cmocka_unit_test(test_ollama_thinking_apart),
		cmocka_unit_test(test_schema_after_thinking),
		cmocka_unit_test(test_call_after_thinking),
		cmocka_unit_test(test_budget_zero_and_bad),
		cmocka_unit_test(test_official_clients),
	};
	const struct CMUnitTest hybrid[] = {
		cmocka_unit_test(test_hybrid),
	};
	int rc = cmocka_run_group_tests_name("thinking/random-qwen3-thinking", thinking, thinking_setup,
					     gwt_teardown);

	return rc | cmocka_run_group_tests_name("thinking/random-qwen3", hybrid, hybrid_setup,
						gwt_teardown);
}
