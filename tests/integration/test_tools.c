/*
 * test_tools.c - tool calling through the whole service (redis-server, a
 * worker, the gateway with TLS, curl), on the shipped model (no chat
 * template: the generic JSON form) and on a random-weight model with its
 * chatml template (Qwen/Hermes syntax) and served as llama3 and as
 * mistral (worker.chat_template): a forced call comes back in each
 * dialect's shape with arguments that keep the tool's schema, streamed as
 * OpenAI's tool-call deltas; the tool loop goes on with the result; every
 * bad tool, choice or history is a 400 naming its field; reasoning comes
 * apart from content in both dialects; the official npm clients
 * (compat.mjs, SLUICE_ONLY=tools) on the random model.
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

static char model_file[1024];
static char model_name[64];

#define TOOLS "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":" \
	"\"Weather of a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":" \
	"{\"type\":\"string\",\"maxLength\":12},\"days\":{\"type\":\"integer\",\"minimum\":1," \
	"\"maximum\":7}},\"required\":[\"city\",\"days\"],\"additionalProperties\":false}}}," \
	"{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":" \
	"\"object\",\"properties\":{\"zone\":{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"]," \
	"\"additionalProperties\":false}}}]"

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

/* A call's name and arguments keep the tool's schema. */
static void assert_call(const char *name, json_t *args)
{
	assert_non_null(name);
	assert_true(json_is_object(args));
	if (strcmp(name, "get_weather") == 0) {
		json_t *city = json_object_get(args, "city"), *days = json_object_get(args, "days");

		assert_int_equal(json_object_size(args), 2);
		assert_true(json_is_string(city));
		assert_true(json_is_integer(days));
		assert_true(json_integer_value(days) >= 1 && json_integer_value(days) <= 7);
	} else {
		const char *zone = json_string_value(json_object_get(args, "zone"));

		assert_string_equal(name, "get_time");
		assert_non_null(zone);
		assert_true(strcmp(zone, "utc") == 0 || strcmp(zone, "cet") == 0);
	}
}

/* An OpenAI tool call object: id, type, function.name, arguments text. */
static const char *assert_openai_call(json_t *c)
{
	json_t *fn = json_object_get(c, "function"), *args;
	const char *id = json_string_value(json_object_get(c, "id"));
	const char *name = json_string_value(json_object_get(fn, "name"));

	if (!id) {
		char *t = json_dumps(c, 0);

		fail_msg("no id: %s", t);
	}
	assert_int_equal(strncmp(id, "call_", 5), 0);
	assert_string_equal(json_string_value(json_object_get(c, "type")), "function");
	assert_true(json_is_string(json_object_get(fn, "arguments")));
	args = json_loads(json_string_value(json_object_get(fn, "arguments")), 0, NULL);
	assert_call(name, args);
	json_decref(args);
	return name;
}

static void test_openai_forced_call(void **state)
{
	char body[4096];
	json_t *j, *msg, *calls;

	(void)state;
	for (int seed = 0; seed < 3; seed++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":%d,\"max_tokens\":200,"
			 "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"}],"
			 "\"tools\":" TOOLS ",\"tool_choice\":\"required\",\"parallel_tool_calls\":false}",
			 model_name, seed);
		j = post("/v1/chat/completions", body, 200);
		msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
		assert_string_equal(json_string_value(json_object_get(json_array_get(
					    json_object_get(j, "choices"), 0), "finish_reason")), "tool_calls");
		assert_true(json_is_null(json_object_get(msg, "content")));
		calls = json_object_get(msg, "tool_calls");
		assert_int_equal(json_array_size(calls), 1);
		assert_openai_call(json_array_get(calls, 0));
		json_decref(j);
	}
	/* a named tool */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":4,\"max_tokens\":200,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Time?\"}],\"tools\":" TOOLS ","
		 "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}},"
		 "\"parallel_tool_calls\":false}",
		 model_name);
	j = post("/v1/chat/completions", body, 200);
	calls = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
						"message"), "tool_calls");
	assert_string_equal(assert_openai_call(json_array_get(calls, 0)), "get_time");
	json_decref(j);
}

/* Streamed: the call is one delta with index, id, type, name and
 * arguments; the choice finishes with tool_calls. */
static void test_openai_streamed_call(void **state)
{
	char body[4096];
	struct gwt_resp r;
	int calls = 0, finish = 0;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":7,\"max_tokens\":200,\"stream\":true,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}],\"tools\":" TOOLS ","
		 "\"tool_choice\":\"required\",\"parallel_tool_calls\":false}", model_name);
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	for (char *p = strstr(r.body, "data: {"); p; p = strstr(p + 1, "data: {")) {
		char *end = strstr(p, "\n\n");
		json_t *c, *ch, *tc;

		assert_non_null(end);
		*end = '\0';
		c = gwt_parse(p + 6);
		*end = '\n';
		ch = json_array_get(json_object_get(c, "choices"), 0);
		tc = json_object_get(json_object_get(ch, "delta"), "tool_calls");
		if (tc) {
			assert_int_equal(json_integer_value(json_object_get(json_array_get(tc, 0), "index")),
					 calls);
			assert_openai_call(json_array_get(tc, 0));
			calls++;
		}
		if (json_is_string(json_object_get(ch, "finish_reason"))) {
			assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")),
					    "tool_calls");
			finish++;
		}
		json_decref(c);
	}
	assert_int_equal(calls, 1);
	assert_int_equal(finish, 1);
	assert_non_null(strstr(r.body, "data: [DONE]"));
	gwt_resp_free(&r);
}

/* The loop: the call and its result go back in the history; the model
 * answers (auto: it may call again or write text, either is 200). */
static void test_tool_loop(void **state)
{
	char body[8192];
	json_t *j;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0,\"max_tokens\":24,\"tools\":" TOOLS ","
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
		 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
		 "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
		 "\"{\\\"city\\\":\\\"Paris\\\",\\\"days\\\":1}\"}}]},"
		 "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"sunny, 21 C\"}]}",
		 model_name);
	j = post("/v1/chat/completions", body, 200);
	assert_non_null(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"));
	json_decref(j);
	/* Ollama: arguments as an object, results without ids */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"stream\":false,\"tools\":" TOOLS ",\"options\":{\"temperature\":0,"
		 "\"num_predict\":24},\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},"
		 "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"function\":{\"name\":"
		 "\"get_weather\",\"arguments\":{\"city\":\"Paris\",\"days\":1}}}]},"
		 "{\"role\":\"tool\",\"content\":\"sunny\"}]}", model_name);
	j = post("/api/chat", body, 200);
	assert_true(json_is_true(json_object_get(j, "done")));
	json_decref(j);
}

/* Ollama: a forced call (Sluice's tool_choice there) in message.tool_calls
 * with arguments as an object, whole and streamed. */
static void test_ollama_call(void **state)
{
	char body[4096];
	struct gwt_resp r;
	json_t *j, *calls, *fn;
	int seen = 0;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"stream\":false,\"tools\":" TOOLS ",\"tool_choice\":\"required\","
		 "\"parallel_tool_calls\":false,"
		 "\"options\":{\"temperature\":0.8,\"seed\":3,\"num_predict\":200},"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}", model_name);
	j = post("/api/chat", body, 200);
	calls = json_object_get(json_object_get(j, "message"), "tool_calls");
	assert_true(json_array_size(calls) >= 1);
	fn = json_object_get(json_array_get(calls, 0), "function");
	assert_call(json_string_value(json_object_get(fn, "name")), json_object_get(fn, "arguments"));
	assert_string_equal(json_string_value(json_object_get(j, "done_reason")), "stop");
	json_decref(j);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"tools\":" TOOLS ",\"tool_choice\":\"required\","
		 "\"parallel_tool_calls\":false,"
		 "\"options\":{\"temperature\":0.8,\"seed\":3,\"num_predict\":200},"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"}]}", model_name);
	gwt_req(&r, "/api/chat", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *o = gwt_parse(line);
		json_t *tc = json_object_get(json_object_get(o, "message"), "tool_calls");

		if (tc) {
			fn = json_object_get(json_array_get(tc, 0), "function");
			assert_call(json_string_value(json_object_get(fn, "name")),
				    json_object_get(fn, "arguments"));
			seen++;
		}
		json_decref(o);
	}
	assert_true(seen >= 1);
	gwt_resp_free(&r);
}

static void expect_bad(const char *path, const char *body_tail, const char *param, const char *msg)
{
	char body[8192];
	json_t *j, *e;

	snprintf(body, sizeof(body), "{\"model\":\"%s\",%s}", model_name, body_tail);
	j = post(path, body, 400);
	e = json_object_get(j, "error");
	if (param) {
		assert_string_equal(json_string_value(json_object_get(e, "param")), param);
		assert_non_null(strstr(json_string_value(json_object_get(e, "message")), msg));
	} else {
		assert_non_null(strstr(json_string_value(e), msg));
	}
	json_decref(j);
}

/* Every bad tool, choice or history: 400 naming the field; then served. */
static void test_bad_tools(void **state)
{
	static const char user[] = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
	char tail[4096];

	(void)state;
	snprintf(tail, sizeof(tail), "%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", user);
	expect_bad("/v1/chat/completions", tail, "tools[0].function.name", "a name of 1 to 64");
	snprintf(tail, sizeof(tail), "%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
		 "{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", user);
	expect_bad("/v1/chat/completions", tail, "tools[1].function.name", "no other tool has");
	snprintf(tail, sizeof(tail), "%s,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
		 "\"parameters\":[1]}}]", user);
	expect_bad("/v1/chat/completions", tail, "tools[0].function.parameters", "a JSON Schema object");
	snprintf(tail, sizeof(tail), "%s,\"tools\":" TOOLS ",\"tool_choice\":{\"type\":\"function\","
		 "\"function\":{\"name\":\"nope\"}}", user);
	expect_bad("/v1/chat/completions", tail, "tool_choice.function.name", "one of the tools");
	snprintf(tail, sizeof(tail), "%s,\"tool_choice\":\"required\"", user);
	expect_bad("/v1/chat/completions", tail, "tool_choice", "expected tools to choose from");
	snprintf(tail, sizeof(tail), "%s,\"tools\":" TOOLS ",\"tool_choice\":\"required\","
		 "\"response_format\":{\"type\":\"json_object\"}", user);
	expect_bad("/v1/chat/completions", tail, "tool_choice", "cannot both constrain");
	snprintf(tail, sizeof(tail), "\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\","
		 "\"tool_call_id\":\"call_9\",\"content\":\"r\"}]");
	expect_bad("/v1/chat/completions", tail, "messages[1].tool_call_id", "an earlier assistant");
	snprintf(tail, sizeof(tail), "\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
		 "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]}]");
	expect_bad("/v1/chat/completions", tail, "messages[0].tool_calls[0].function.arguments",
		   "a string holding a JSON object");
	snprintf(tail, sizeof(tail), "%s,\"functions\":[{\"name\":\"f\"}]", user);
	expect_bad("/v1/chat/completions", tail, "functions", "send tools");
	snprintf(tail, sizeof(tail), "\"prompt\":\"x\",\"tools\":" TOOLS);
	expect_bad("/v1/completions", tail, "tools", "/v1/chat/completions");
	snprintf(tail, sizeof(tail), "%s,\"tools\":{}", user);
	expect_bad("/api/chat", tail, NULL, "tools: expected an array of tools");
	gwt_assert_served();
}

/*
 * Reasoning apart from content, in both dialects: a grammar makes the
 * random model write "<think>...</think>" then words, and thinking on
 * (OpenAI enable_thinking, Ollama think) splits them: the words are the
 * content, the thinking is reasoning_content / thinking, streamed too.
 */
static void test_reasoning_split(void **state)
{
	static const char grammar[] = "\"grammar\":\"root ::= \\\"<think>\\\" [a-z]{3,12} \\\"</think>\\\" "
				      "[a-z]{3,12}\"";
	char body[4096];
	struct gwt_resp r;
	json_t *j, *msg;
	const char *content, *reasoning;
	char streamed[2][256] = { "", "" }, whole[2][256];

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":2,\"max_tokens\":80,%s,"
		 "\"chat_template_kwargs\":{\"enable_thinking\":true},"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Think first.\"}]}", model_name, grammar);
	j = post("/v1/chat/completions", body, 200);
	msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
	content = json_string_value(json_object_get(msg, "content"));
	reasoning = json_string_value(json_object_get(msg, "reasoning_content"));
	assert_non_null(content);
	assert_non_null(reasoning);
	assert_true(strlen(reasoning) >= 3 && strspn(reasoning, "abcdefghijklmnopqrstuvwxyz") == strlen(reasoning));
	assert_true(strlen(content) >= 3 && strspn(content, "abcdefghijklmnopqrstuvwxyz") == strlen(content));
	assert_true(json_integer_value(json_object_get(json_object_get(json_object_get(j, "usage"),
								     "completion_tokens_details"),
						       "reasoning_tokens")) > 0);
	snprintf(whole[0], sizeof(whole[0]), "%s", reasoning);
	snprintf(whole[1], sizeof(whole[1]), "%s", content);
	json_decref(j);
	/* streamed OpenAI: deltas of each kind, the same texts */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":2,\"max_tokens\":80,\"stream\":true,%s,"
		 "\"chat_template_kwargs\":{\"enable_thinking\":true},"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Think first.\"}]}", model_name, grammar);
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	for (char *p = strstr(r.body, "data: {"); p; p = strstr(p + 1, "data: {")) {
		char *end = strstr(p, "\n\n");
		json_t *c, *d;

		*end = '\0';
		c = gwt_parse(p + 6);
		*end = '\n';
		d = json_object_get(json_array_get(json_object_get(c, "choices"), 0), "delta");
		if (json_is_string(json_object_get(d, "reasoning_content")))
			strncat(streamed[0], json_string_value(json_object_get(d, "reasoning_content")), 200);
		if (json_is_string(json_object_get(d, "content")))
			strncat(streamed[1], json_string_value(json_object_get(d, "content")), 200);
		json_decref(c);
	}
	gwt_resp_free(&r);
	assert_string_equal(streamed[0], whole[0]);
	assert_string_equal(streamed[1], whole[1]);
	/* Ollama: think true */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"stream\":false,\"think\":true,%s,\"options\":{\"temperature\":0.9,"
		 "\"seed\":2,\"num_predict\":80},\"messages\":[{\"role\":\"user\",\"content\":\"Think first.\"}]}",
		 model_name, grammar);
	j = post("/api/chat", body, 200);
	msg = json_object_get(j, "message");
	assert_true(json_string_length(json_object_get(msg, "thinking")) >= 3);
	assert_true(json_string_length(json_object_get(msg, "content")) >= 3);
	assert_null(strchr(json_string_value(json_object_get(msg, "content")), '<'));
	json_decref(j);
}

/*
 * The official npm clients' tool scenarios (tests/clients/compat.mjs,
 * SLUICE_ONLY=tools:): the openai SDK's tool loop and its streaming
 * accumulation, LangChain's bindTools and withStructuredOutput (tool
 * mode), the Vercel AI SDK's generateText
 * with tools, ollama-js chat with tools.
 */
static void test_official_clients(void **state)
{
	int st;
	char *out;

	(void)state;
	/* their own folder per model: the groups' clients may run at once */
	out = gwt_run_clients(strcmp(model_name, "tiny") == 0 ? "clients-tools" : "clients-tools-stories",
			      "SLUICE_ONLY=tools:", model_name, &st);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "ok tools: openai tool loop"));
	assert_non_null(strstr(out, "all scenarios passed"));
	free(out);
}

static int stories_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "stories260k");
	if (gwt_use_stories(model_file, sizeof(model_file), "stories260k") != 0)
		return -1;
	gwt_max_inflight = 4;
	/* the tools' prompt is longer than the model's 512 tokens */
	gwt_context = 2048;
	return gwt_setup(state);
}

static int random_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "tiny");
	gwt_model_file = NULL;
	gwt_model_name = "tiny";
	gwt_max_inflight = 4;
	/* the tools' prompt is longer than the tiny model's 512 tokens */
	gwt_context = 2048;
	gwt_chat_template = NULL;
	return gwt_setup(state);
}

/* The same random model rendered and parsed as another family (context
 * and batch as random_setup set them): its
 * vocabulary has not their special tokens, so their markers are text, and
 * the whole path (prompt, forcing grammar, parser, answer) is the family's. */
static int llama3_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "tiny");
	gwt_model_file = NULL;
	gwt_model_name = "tiny";
	gwt_chat_template = "llama3";
	return gwt_setup(state);
}

static int mistral_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "tiny");
	gwt_model_file = NULL;
	gwt_model_name = "tiny";
	gwt_chat_template = "mistral";
	return gwt_setup(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openai_forced_call),
		cmocka_unit_test(test_openai_streamed_call),
		cmocka_unit_test(test_tool_loop),
		cmocka_unit_test(test_ollama_call),
		cmocka_unit_test(test_bad_tools),
		cmocka_unit_test(test_reasoning_split),
		cmocka_unit_test(test_official_clients),
	};
	int rc = cmocka_run_group_tests_name("tools/stories260k", tests, stories_setup, gwt_teardown);

	rc |= cmocka_run_group_tests_name("tools/random-chatml", tests, random_setup, gwt_teardown);
	rc |= cmocka_run_group_tests_name("tools/random-llama3", tests, llama3_setup, gwt_teardown);
	return rc | cmocka_run_group_tests_name("tools/random-mistral", tests, mistral_setup,
						 gwt_teardown);
}
