/*
 * test_stories.c - the shipped model (models/stories260K) served by the
 * real service: redis-server, a worker on the GGUF in the repository, the
 * gateway with TLS, curl.  Greedy /v1/completions output equals what the
 * original llama2.c program wrote for the same checkpoint
 * (models/stories260K/llama2c-greedy.json), and the chat and generate
 * endpoints serve this base model (no chat template) with real English.
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

static char model_file[1024], ref_file[1024];

static int st_setup(void **state)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");

	if (!src)
		return -1;
	snprintf(model_file, sizeof(model_file), "%s/models/stories260K/stories260K.gguf", src);
	snprintf(ref_file, sizeof(ref_file), "%s/models/stories260K/llama2c-greedy.json", src);
	gwt_model_file = model_file;
	gwt_model_name = "stories260k";
	gwt_max_inflight = 4; /* OpenAI n (compat.mjs) */
	return gwt_setup(state);
}

/* A JSON string of `s` (jansson's escaping), malloc'd. */
static char *jstr(const char *s)
{
	json_t *j = json_string(s);
	char *o = json_dumps(j, JSON_ENCODE_ANY);

	json_decref(j);
	assert_non_null(o);
	return o;
}

static void test_greedy_equals_llama2c(void **state)
{
	json_error_t je;
	json_t *ref = json_load_file(ref_file, 0, &je), *list;
	size_t i;

	(void)state;
	assert_non_null(ref);
	list = json_object_get(ref, "completions");
	assert_true(json_array_size(list) >= 3);
	for (i = 0; i < json_array_size(list); i++) {
		json_t *c = json_array_get(list, i), *j, *ch;
		char *p = jstr(json_string_value(json_object_get(c, "prompt")));
		char body[2048];
		struct gwt_resp r;

		snprintf(body, sizeof(body),
			 "{\"model\":\"stories260k\",\"prompt\":%s,\"max_tokens\":%lld,"
			 "\"temperature\":0}", p,
			 (long long)json_integer_value(json_object_get(c, "max_tokens")));
		free(p);
		gwt_req(&r, "/v1/completions", gwt_key_a, body, 0, NULL);
		assert_int_equal(r.code, 200);
		j = gwt_parse(r.body);
		ch = json_array_get(json_object_get(j, "choices"), 0);
		assert_string_equal(json_string_value(json_object_get(ch, "text")),
				    json_string_value(json_object_get(c, "text")));
		assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
								    "completion_tokens")),
				 json_integer_value(json_object_get(c, "max_tokens")));
		assert_string_equal(json_string_value(json_object_get(ch, "finish_reason")), "length");
		json_decref(j);
		gwt_resp_free(&r);
	}
	json_decref(ref);
}

/* The endpoints a newcomer tries first, on a base model: a story. */
static void test_base_model_endpoints(void **state)
{
	struct gwt_resp r;
	json_t *j;
	const char *text;

	(void)state;
	gwt_req(&r, "/api/generate", gwt_key_a,
		"{\"model\":\"stories260k\",\"prompt\":\"Once upon a time\",\"stream\":false,"
		"\"options\":{\"temperature\":0,\"num_predict\":40}}", 0, NULL);
	assert_int_equal(r.code, 200);
	j = gwt_parse(r.body);
	text = json_string_value(json_object_get(j, "response"));
	assert_non_null(text);
	assert_non_null(strstr(text, "there was a little girl named Lily"));
	json_decref(j);
	gwt_resp_free(&r);

	/* chat without max_tokens: as much as fits (context 512), a real story */
	gwt_req(&r, "/v1/chat/completions", gwt_key_a,
		"{\"model\":\"stories260k:latest\",\"temperature\":0,"
		"\"messages\":[{\"role\":\"user\",\"content\":\"Once upon a time\"}]}", 0, NULL);
	assert_int_equal(r.code, 200);
	j = gwt_parse(r.body);
	text = json_string_value(json_object_get(json_object_get(json_array_get(
		json_object_get(j, "choices"), 0), "message"), "content"));
	assert_non_null(text);
	assert_non_null(strstr(text, "there was a little girl named Lily"));
	json_decref(j);
	gwt_resp_free(&r);

	/* from BOS alone the first piece is "\u2581Once": SentencePiece's decoder
	 * drops that dummy-prefix space, so the text starts "Once" */
	gwt_req(&r, "/api/chat", gwt_key_a,
		"{\"model\":\"stories260k\",\"stream\":false,\"options\":{\"temperature\":0,"
		"\"num_predict\":8},\"messages\":[{\"role\":\"user\",\"content\":\"\"}]}", 0, NULL);
	assert_int_equal(r.code, 200);
	j = gwt_parse(r.body);
	text = json_string_value(json_object_get(json_object_get(j, "message"), "content"));
	assert_non_null(text);
	assert_true(strncmp(text, "Once upon a time", 16) == 0);
	json_decref(j);
	gwt_resp_free(&r);
}

/*
 * The official `openai` and `ollama` npm packages and LangChain's clients,
 * unmodified, against this stack (tests/clients/compat.mjs, one assertion
 * per scenario), installed with `npm ci` from the committed lock file into a
 * folder of their own under the build directory.
 */
static void test_official_clients(void **state)
{
	char env[2048], key_lim[64], key_paced[64];
	char *out;
	int st;

	(void)state;
	h_ctl(NULL, 0, "tenant create limited --rpm 1");
	h_ctl(NULL, 0, "client create limited/app");
	h_issue_key("limited/app", key_lim, NULL);
	h_ctl(NULL, 0, "tenant create paced --rpm 30");
	h_ctl(NULL, 0, "client create paced/app");
	h_issue_key("paced/app", key_paced, NULL);
	snprintf(env, sizeof(env), "SLUICE_KEY_LIMITED=%s SLUICE_KEY_PACED=%s SLUICE_MODEL_FILE='%s' "
		 "SLUICE_SKIP=tools:,thinking:", key_lim, key_paced, model_file);
	out = gwt_run_clients("clients", env, "stories260k", &st);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "all scenarios passed"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_greedy_equals_llama2c),
		cmocka_unit_test(test_base_model_endpoints),
		cmocka_unit_test(test_official_clients),
	};

	return cmocka_run_group_tests(tests, st_setup, gwt_teardown);
}
