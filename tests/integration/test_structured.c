/*
 * test_structured.c - structured outputs and logprobs through the whole
 * service (redis-server, a worker, the gateway with TLS, curl), twice: on
 * the shipped model (models/stories260K) and on a generated random-weight
 * model.  Each dialect's constraint field gives text that parses and keeps
 * its schema (greedy, sampled, streamed); bad schemas and grammars are a
 * 400 in the dialect's format naming the field and what is wrong, and the
 * service serves on; logprobs come in each dialect's shape, best first.
 */
#include <math.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/integration/gateway_fixture.h"

static char model_file[1024];
static char model_name[64];

#define PERSON "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12}," \
	"\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99}},\"required\":[\"name\",\"age\"]," \
	"\"additionalProperties\":false}"

/*
 * Parses model-written JSON.  JSON (RFC 8259) bounds no exponent, and a
 * random model writes 5E1475, which jansson refuses as an overflow (a
 * JavaScript client reads Infinity): such exponents are read as e0, so
 * what is checked is that the text is JSON.
 */
static json_t *parse_model_json(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	char *copy;
	size_t o = 0;
	int in_str = 0;

	if (j || !strstr(je.text, "overflow"))
		return j;
	copy = malloc(strlen(text) + 1);
	assert_non_null(copy);
	for (size_t i = 0; text[i]; i++) {
		char c = text[i];

		if (in_str) {
			if (c == '\\' && text[i + 1])
				copy[o++] = text[i++];
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if ((c == 'e' || c == 'E') && i > 0 && text[i - 1] >= '0' && text[i - 1] <= '9') {
			copy[o++] = 'e';
			copy[o++] = '0';
			for (i++; text[i] == '+' || text[i] == '-' || (text[i] >= '0' && text[i] <= '9'); i++)
				;
			i--;
			continue;
		}
		copy[o++] = c;
	}
	copy[o] = '\0';
	j = json_loads(copy, 0, &je);
	free(copy);
	return j;
}

/* Text that is exactly a PERSON. */
static void assert_person_text(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je), *name, *age;

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, text);
	assert_true(json_is_object(j));
	assert_int_equal(json_object_size(j), 2);
	name = json_object_get(j, "name");
	age = json_object_get(j, "age");
	assert_true(json_is_string(name));
	assert_true(json_is_integer(age));
	assert_true(json_integer_value(age) >= 0 && json_integer_value(age) <= 99);
	json_decref(j);
}

static json_t *post(const char *path, const char *body, int want)
{
	struct gwt_resp r;
	json_t *j;

	gwt_req(&r, path, gwt_key_a, body, 0, NULL);
	if (r.code != want)
		fail_msg("%s: expected %d, found %d: %.400s", path, want, r.code, r.body);
	j = gwt_parse(r.body);
	gwt_resp_free(&r);
	return j;
}

static const char *chat_content(json_t *j)
{
	json_t *ch = json_array_get(json_object_get(j, "choices"), 0);

	assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "stop");
	return json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
}

static void test_openai_json_schema(void **state)
{
	char body[2048];
	json_t *j;

	(void)state;
	for (int i = 0; i < 4; i++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"%s\",\"temperature\":%s,\"seed\":%d,\"max_tokens\":400,"
			 "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}],"
			 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\","
			 "\"strict\":true,\"schema\":" PERSON "}}}",
			 model_name, i == 0 ? "0" : "0.9", i);
		j = post("/v1/chat/completions", body, 200);
		assert_person_text(chat_content(j));
		json_decref(j);
	}
	/* json_object on completions: when it ends, it is an object */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once upon a time\",\"temperature\":0,\"max_tokens\":300,"
		 "\"response_format\":{\"type\":\"json_object\"}}", model_name);
	j = post("/v1/completions", body, 200);
	{
		json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
		const char *text = json_string_value(json_object_get(ch, "text"));

		assert_non_null(text);
		assert_int_equal(text[0] == '{' || text[0] == ' ' || text[0] == '\n', 1);
		if (strcmp(json_string_value(json_object_get(ch, "finish_reason")), "stop") == 0) {
			json_t *o = parse_model_json(text);

			assert_true(json_is_object(o));
			json_decref(o);
		}
	}
	json_decref(j);
}

static void test_openai_stream_schema(void **state)
{
	char body[2048], text[8192] = "";
	struct gwt_resp r;
	char *p;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"stream\":true,\"temperature\":0.9,\"seed\":3,\"max_tokens\":400,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Tell me\"}],"
		 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
		 "\"schema\":" PERSON "}}}", model_name);
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	for (p = strstr(r.body, "data: {"); p; p = strstr(p + 1, "data: {")) {
		char *end = strstr(p, "\n\n");
		json_t *c, *d;

		assert_non_null(end);
		*end = '\0';
		c = gwt_parse(p + 6);
		*end = '\n';
		d = json_object_get(json_object_get(json_array_get(json_object_get(c, "choices"), 0),
						    "delta"), "content");
		if (json_is_string(d))
			strncat(text, json_string_value(d), sizeof(text) - strlen(text) - 1);
		json_decref(c);
	}
	assert_non_null(strstr(r.body, "\"finish_reason\":\"stop\""));
	assert_person_text(text);
	gwt_resp_free(&r);
}

static void test_ollama_format(void **state)
{
	char body[2048];
	json_t *j, *o;
	const char *text;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once upon a time\",\"stream\":false,\"format\":\"json\","
		 "\"options\":{\"temperature\":0,\"num_predict\":300}}", model_name);
	j = post("/api/generate", body, 200);
	text = json_string_value(json_object_get(j, "response"));
	assert_non_null(text);
	if (strcmp(json_string_value(json_object_get(j, "done_reason")), "stop") == 0) {
		o = parse_model_json(text);
		if (!json_is_object(o))
			fail_msg("format json: not an object: '%s'", text);
		json_decref(o);
	}
	json_decref(j);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"stream\":false,\"format\":" PERSON ","
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Who?\"}],"
		 "\"options\":{\"temperature\":0.8,\"seed\":11,\"num_predict\":400}}", model_name);
	j = post("/api/chat", body, 200);
	assert_string_equal(json_string_value(json_object_get(j, "done_reason")), "stop");
	assert_person_text(json_string_value(json_object_get(json_object_get(j, "message"), "content")));
	json_decref(j);
}

static void test_grammar_field(void **state)
{
	char body[2048];
	json_t *j;
	const char *text;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Is it?\",\"temperature\":0.9,\"seed\":1,\"max_tokens\":20,"
		 "\"grammar\":\"root ::= (\\\"yes\\\" | \\\"no\\\") \\\".\\\"\"}", model_name);
	j = post("/v1/completions", body, 200);
	text = json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
						 "text"));
	assert_true(strcmp(text, "yes.") == 0 || strcmp(text, "no.") == 0);
	json_decref(j);
}

static void test_bad_constraints(void **state)
{
	char body[2048];
	json_t *j, *e;

	(void)state;
	/* a keyword that cannot be enforced: named, with its path */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"n\",\"schema\":"
		 "{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"maxLength\":3}}}}}}}",
		 model_name);
	j = post("/v1/chat/completions", body, 400);
	e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "param")),
			    "response_format.json_schema.schema");
	assert_string_equal(json_string_value(json_object_get(e, "type")), "invalid_request_error");
	assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "not"));
	assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "/properties/a"));
	json_decref(j);
	/* contradictory */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"x\",\"stream\":false,"
		 "\"format\":{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}}", model_name);
	j = post("/api/generate", body, 400);
	assert_non_null(strstr(gwt_ollama_error(j), "format: "));
	assert_non_null(strstr(gwt_ollama_error(j), "unsatisfiable"));
	json_decref(j);
	/* a grammar with a syntax error: its line and column */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"x\",\"grammar\":\"root ::= a\\na ::= [\"}", model_name);
	j = post("/v1/completions", body, 400);
	e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "param")), "grammar");
	assert_non_null(strstr(json_string_value(json_object_get(e, "message")), "line 2"));
	json_decref(j);
	/* recursive without a base case */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"x\",\"stream\":false,\"format\":{\"$ref\":\"#/$defs/a\","
		 "\"$defs\":{\"a\":{\"type\":\"object\",\"properties\":{\"n\":{\"$ref\":\"#/$defs/a\"}},"
		 "\"required\":[\"n\"]}}}}", model_name);
	j = post("/api/generate", body, 400);
	assert_non_null(strstr(gwt_ollama_error(j), "format: "));
	json_decref(j);
	/* and the service serves on */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once\",\"temperature\":0,\"max_tokens\":5}", model_name);
	json_decref(post("/v1/completions", body, 200));
}

/* Entries best first, each logprob <= 0, greedy picks the first. */
static void assert_entry(json_t *en, size_t want_top, int greedy)
{
	json_t *top = json_object_get(en, "top_logprobs");
	double lp = json_real_value(json_object_get(en, "logprob"));

	assert_true(json_is_string(json_object_get(en, "token")));
	assert_true(json_is_array(json_object_get(en, "bytes")));
	assert_true(lp <= 1e-6);
	assert_true(json_array_size(top) >= 1 && json_array_size(top) <= want_top);
	for (size_t k = 1; k < json_array_size(top); k++)
		assert_true(json_real_value(json_object_get(json_array_get(top, k - 1), "logprob")) >=
			    json_real_value(json_object_get(json_array_get(top, k), "logprob")));
	if (greedy) {
		assert_true(json_equal(json_object_get(json_array_get(top, 0), "bytes"),
				       json_object_get(en, "bytes")));
		assert_true(fabs(json_real_value(json_object_get(json_array_get(top, 0), "logprob")) - lp) < 1e-6);
	}
}

static void test_logprobs(void **state)
{
	char body[2048];
	json_t *j, *lp, *content;
	json_int_t n;

	(void)state;
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0,\"max_tokens\":12,\"logprobs\":true,\"top_logprobs\":3,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}", model_name);
	j = post("/v1/chat/completions", body, 200);
	n = json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens"));
	lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
	content = json_object_get(lp, "content");
	assert_int_equal((json_int_t)json_array_size(content), n);
	for (size_t i = 0; i < json_array_size(content); i++)
		assert_entry(json_array_get(content, i), 3, 1);
	json_decref(j);
	/* constrained and sampled: alternatives are allowed tokens only, so
	 * their probabilities sum to at most 1 */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":1,\"seed\":4,\"max_tokens\":400,\"logprobs\":true,"
		 "\"top_logprobs\":20,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
		 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"schema\":"
		 PERSON "}}}", model_name);
	j = post("/v1/chat/completions", body, 200);
	assert_person_text(chat_content(j));
	content = json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
						  "logprobs"), "content");
	assert_true(json_array_size(content) > 0);
	for (size_t i = 0; i < json_array_size(content); i++) {
		json_t *top = json_object_get(json_array_get(content, i), "top_logprobs");
		double sum = 0;

		assert_entry(json_array_get(content, i), 20, 0);
		for (size_t k = 0; k < json_array_size(top); k++)
			sum += exp(json_real_value(json_object_get(json_array_get(top, k), "logprob")));
		assert_true(sum <= 1.0 + 1e-4);
	}
	json_decref(j);
	/* completions: the legacy arrays, one per token */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once\",\"temperature\":0,\"max_tokens\":6,\"logprobs\":2}",
		 model_name);
	j = post("/v1/completions", body, 200);
	lp = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "logprobs");
	n = json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens"));
	assert_int_equal((json_int_t)json_array_size(json_object_get(lp, "tokens")), n);
	assert_int_equal((json_int_t)json_array_size(json_object_get(lp, "token_logprobs")), n);
	assert_int_equal((json_int_t)json_array_size(json_object_get(lp, "top_logprobs")), n);
	assert_true(json_object_size(json_array_get(json_object_get(lp, "top_logprobs"), 0)) >= 1);
	json_decref(j);
	/* Ollama: the list beside the text */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once\",\"stream\":false,\"logprobs\":true,\"top_logprobs\":2,"
		 "\"options\":{\"temperature\":0,\"num_predict\":5}}", model_name);
	j = post("/api/generate", body, 200);
	lp = json_object_get(j, "logprobs");
	assert_int_equal((json_int_t)json_array_size(lp),
			 json_integer_value(json_object_get(j, "eval_count")));
	for (size_t i = 0; i < json_array_size(lp); i++)
		assert_entry(json_array_get(lp, i), 2, 1);
	json_decref(j);
}

/* ---- n > 1 ------------------------------------------------------------ */

#define N_PROMPT "Once upon a time, there was a little girl named Lily. She loved to play " \
	"outside in the park with her friends and her big red ball."

/* The text of choice `i` of a non-streamed chat answer. */
static const char *choice_text(json_t *j, size_t i)
{
	json_t *ch = json_array_get(json_object_get(j, "choices"), i);

	assert_non_null(ch);
	assert_int_equal(json_integer_value(json_object_get(ch, "index")), (json_int_t)i);
	return json_string_value(json_object_get(json_object_get(ch, "message"), "content"));
}

/* What a stream of several choices said, per index. */
struct n_stream {
	char text[4][4096];
	int finishes[4];
	json_int_t tokens[4];     /* logprobs entries */
	json_int_t cached[4];     /* the finish chunk's sluice.cached_prompt_tokens (-1 none) */
	json_int_t usage_completion, usage_prompt;
	int done;
};

static void read_n_stream(char *body, struct n_stream *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < 4; i++)
		o->cached[i] = -1;
	o->usage_completion = o->usage_prompt = -1;
	for (char *p = strstr(body, "data: "); p; p = strstr(p + 1, "data: ")) {
		char *end = strstr(p, "\n\n");
		json_t *c, *ch, *d, *u, *x;
		json_int_t i;

		assert_non_null(end);
		if (strncmp(p, "data: [DONE]", 12) == 0) {
			o->done++;
			continue;
		}
		*end = '\0';
		c = gwt_parse(p + 6);
		*end = '\n';
		u = json_object_get(c, "usage");
		if (json_is_object(u)) {
			o->usage_completion = json_integer_value(json_object_get(u, "completion_tokens"));
			o->usage_prompt = json_integer_value(json_object_get(u, "prompt_tokens"));
		}
		ch = json_array_get(json_object_get(c, "choices"), 0);
		if (ch) {
			i = json_integer_value(json_object_get(ch, "index"));
			assert_true(i >= 0 && i < 4);
			d = json_object_get(json_object_get(ch, "delta"), "content");
			if (json_is_string(d))
				strncat(o->text[i], json_string_value(d), sizeof(o->text[i]) - strlen(o->text[i]) - 1);
			o->tokens[i] += (json_int_t)json_array_size(
				json_object_get(json_object_get(ch, "logprobs"), "content"));
			if (json_is_string(json_object_get(ch, "finish_reason"))) {
				o->finishes[i]++;
				x = json_object_get(json_object_get(c, "sluice"), "cached_prompt_tokens");
				if (x)
					o->cached[i] = json_integer_value(x);
			}
		}
		json_decref(c);
	}
}

/*
 * n choices from one prompt: each with its own seed (the request's + its
 * index: choice i is what the same request with n = 1 and that seed
 * writes, batch and prefix cache notwithstanding), streamed with index,
 * the prompt shared through the worker's prefix cache, usage counting every
 * choice and the prompt once, logprobs per choice, constraints on each.
 */
static void test_choices(void **state)
{
	char body[4096], solo[3][4096];
	struct gwt_resp r;
	struct n_stream ns;
	json_t *j, *one;
	json_int_t prompt_tokens, sum = 0;

	(void)state;
	for (int i = 0; i < 3; i++) {
		snprintf(body, sizeof(body),
			 "{\"model\":\"%s\",\"temperature\":1,\"seed\":%d,\"max_tokens\":20,"
			 "\"messages\":[{\"role\":\"user\",\"content\":\"" N_PROMPT "\"}]}", model_name, 50 + i);
		one = post("/v1/chat/completions", body, 200);
		snprintf(solo[i], sizeof(solo[i]), "%s", choice_text(one, 0));
		prompt_tokens = json_integer_value(json_object_get(json_object_get(one, "usage"),
								   "prompt_tokens"));
		json_decref(one);
	}
	/* the seeds differ, so do the texts (fixed seeds: this never flips) */
	assert_true(strcmp(solo[0], solo[1]) != 0 || strcmp(solo[1], solo[2]) != 0);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":1,\"seed\":50,\"max_tokens\":20,\"n\":3,\"logprobs\":true,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"" N_PROMPT "\"}]}", model_name);
	j = post("/v1/chat/completions", body, 200);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 3);
	for (size_t i = 0; i < 3; i++) {
		json_t *ch = json_array_get(json_object_get(j, "choices"), i);

		assert_string_equal(choice_text(j, i), solo[i]);
		sum += (json_int_t)json_array_size(json_object_get(json_object_get(ch, "logprobs"), "content"));
	}
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), sum);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")),
			 prompt_tokens);
	json_decref(j);

	/* streamed: the same choices by index, one finish chunk each, the
	 * later ones served their prompt from the prefix cache */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":1,\"seed\":50,\"max_tokens\":20,\"n\":3,\"stream\":true,"
		 "\"logprobs\":true,\"messages\":[{\"role\":\"user\",\"content\":\"" N_PROMPT "\"}]}", model_name);
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	read_n_stream(r.body, &ns);
	gwt_resp_free(&r);
	assert_int_equal(ns.done, 1);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(ns.text[i], solo[i]);
		assert_int_equal(ns.finishes[i], 1);
		assert_true(ns.tokens[i] > 0);
		if (i > 0)
			assert_true(ns.cached[i] >= 16); /* at least one KV block of the prompt */
	}
	assert_int_equal(ns.finishes[3], 0);
	/* include_usage: one usage chunk for all of them */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":1,\"seed\":50,\"max_tokens\":20,\"n\":3,\"stream\":true,"
		 "\"logprobs\":true,\"stream_options\":{\"include_usage\":true},"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"" N_PROMPT "\"}]}", model_name);
	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	read_n_stream(r.body, &ns);
	gwt_resp_free(&r);
	assert_int_equal(ns.usage_completion, ns.tokens[0] + ns.tokens[1] + ns.tokens[2]);
	assert_int_equal(ns.usage_prompt, prompt_tokens);

	/* completions, and a schema every choice keeps */
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"prompt\":\"Once upon a time\",\"temperature\":0.9,\"seed\":1,"
		 "\"max_tokens\":8,\"n\":2}", model_name);
	j = post("/v1/completions", body, 200);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(j, "choices"), 1),
							    "index")), 1);
	json_decref(j);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"temperature\":0.9,\"seed\":7,\"max_tokens\":400,\"n\":4,"
		 "\"messages\":[{\"role\":\"user\",\"content\":\"Who?\"}],"
		 "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"person\","
		 "\"strict\":true,\"schema\":" PERSON "}}}", model_name);
	j = post("/v1/chat/completions", body, 200);
	for (size_t i = 0; i < 4; i++) {
		assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), i),
								      "finish_reason")), "stop");
		assert_person_text(choice_text(j, i));
	}
	json_decref(j);

	/* refusals: over limits.choices, over the worker's batch (4 here),
	 * best_of; the service serves on */
	snprintf(body, sizeof(body), "{\"model\":\"%s\",\"prompt\":\"x\",\"n\":9}", model_name);
	j = post("/v1/completions", body, 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "n");
	assert_non_null(strstr(gwt_openai_error(j), "from 1 to 8, found 9"));
	json_decref(j);
	snprintf(body, sizeof(body),
		 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":5}", model_name);
	j = post("/v1/chat/completions", body, 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "n");
	assert_non_null(strstr(gwt_openai_error(j), "at most 4"));
	json_decref(j);
	snprintf(body, sizeof(body), "{\"model\":\"%s\",\"prompt\":\"x\",\"best_of\":2}", model_name);
	j = post("/v1/completions", body, 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "best_of");
	json_decref(j);
	gwt_assert_served();
}

/*
 * A client that goes away from a stream of several choices: every choice
 * is cancelled on the worker (whichever were sent), their KV blocks are
 * free, the slots reserved come back, and the service serves on.
 */
static void test_choices_client_gone(void **state)
{
	static const char needle[] = "\"end\":\"cancelled\"";
	char cmd[4096], series[160];
	int fd, before = gwt_log_count(gwt_worker.log, needle);
	double gone;
	pid_t pid;
	char *m;

	(void)state;
	snprintf(series, sizeof(series), "sluice_gateway_requests_total{tenant=\"alpha\",status=\"499\"}");
	m = gwt_metrics();
	gone = h_metric(m, series);
	free(m);
	if (gone < 0)
		gone = 0;
	snprintf(cmd, sizeof(cmd), "{\"model\":\"%s\",\"n\":3,\"stream\":true,\"max_tokens\":440,"
		 "\"prompt\":\"" N_PROMPT "\"}", model_name);
	/* choice 0 has its first token: the others were sent */
	pid = gwt_stream_begun("/v1/completions", NULL, cmd, &fd, NULL, 0, NULL);
	/* the worker paused: what ends the choices must be the CANCELs */
	assert_int_equal(h_signal(&gwt_worker, SIGSTOP), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	close(fd);
	assert_int_equal(gwt_wait_metric(series, gone + 1, 1), 0);
	assert_int_equal(h_signal(&gwt_worker, SIGCONT), 0);
	assert_int_equal(gwt_wait_log_count(gwt_worker.log, needle, before + 3), 0);
	assert_int_equal(gwt_wait_metric("sluice_worker_kv_blocks_used{worker=\"w0\"}", 0, 0), 0);
	assert_int_equal(gwt_wait_metric("sluice_worker_inflight{worker=\"w0\"}", 0, 0), 0);
	/* all four slots are free again: n = 4 is placed */
	snprintf(cmd, sizeof(cmd), "{\"model\":\"%s\",\"prompt\":\"Once\",\"max_tokens\":4,\"n\":4}",
		 model_name);
	json_decref(post("/v1/completions", cmd, 200));
	gwt_assert_served();
}

/*
 * The official npm clients' structured scenarios (tests/clients/compat.mjs,
 * SLUICE_ONLY=structured) against the random-weight model; test_stories.c
 * runs all of them on the shipped one.  Their own folder under the build
 * directory: the two tests may run at once.
 */
static void test_official_clients(void **state)
{
	int st;
	char *out;

	(void)state;
	out = gwt_run_clients("clients-structured", "SLUICE_ONLY=structured", model_name, &st);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "ok structured: openai json_schema strict"));
	assert_non_null(strstr(out, "all scenarios passed"));
	free(out);
}

static int stories_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "stories260k");
	if (gwt_use_stories(model_file, sizeof(model_file), "stories260k") != 0)
		return -1;
	gwt_max_inflight = 4;
	return gwt_setup(state);
}

static int random_setup(void **state)
{
	snprintf(model_name, sizeof(model_name), "tiny");
	gwt_model_file = NULL;
	gwt_model_name = "tiny";
	gwt_max_inflight = 4;
	return gwt_setup(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openai_json_schema),
		cmocka_unit_test(test_openai_stream_schema),
		cmocka_unit_test(test_ollama_format),
		cmocka_unit_test(test_grammar_field),
		cmocka_unit_test(test_bad_constraints),
		cmocka_unit_test(test_logprobs),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_choices_client_gone),
	};
	const struct CMUnitTest random_tests[] = {
		cmocka_unit_test(test_openai_json_schema),
		cmocka_unit_test(test_openai_stream_schema),
		cmocka_unit_test(test_ollama_format),
		cmocka_unit_test(test_grammar_field),
		cmocka_unit_test(test_bad_constraints),
		cmocka_unit_test(test_logprobs),
		cmocka_unit_test(test_choices),
		cmocka_unit_test(test_choices_client_gone),
		cmocka_unit_test(test_official_clients),
	};
	int rc = cmocka_run_group_tests_name("structured/stories260k", tests, stories_setup,
					     gwt_teardown);

	return rc | cmocka_run_group_tests_name("structured/random", random_tests, random_setup,
						 gwt_teardown);
}
