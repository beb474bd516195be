/*
 * test_embed_api.c - the embedding endpoints through the whole service
 * (gateway_fixture.h: a private redis-server, a real sluice-worker on a
 * bert-tiny F32 embedding model served as "minilm", a real sluice-gateway
 * with the test's certificate, keys from sluicectl), with curl and the
 * official npm clients:
 *   - /v1/embeddings: a string, a batch, token ids, base64 (the same
 *     float32 bits as the JSON numbers), usage.prompt_tokens; /api/embed
 *     (string, array, truncate), legacy /api/embeddings (and its empty
 *     prompt); a vector does not depend on its batch;
 *   - the model lists say it embeds (capabilities), and a generation
 *     request to it is refused;
 *   - every bad input is a 400 in the API's own format naming the field
 *     (or 404 for an unknown model), and the service keeps serving;
 *   - usage records in Redis count the embedded tokens; a tenant's tokens
 *     per minute limit refuses embeddings with 429;
 *   - openai (embeddings.create: string, batch, its default base64),
 *     ollama-js (embed), LangChain's OpenAIEmbeddings and OllamaEmbeddings
 *     (tests/clients/compat.mjs, scenarios "embed:").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/integration/gateway_fixture.h"

static uint32_t dim;

/* POST body to path as key A; the parsed JSON answer (asserts the code). */
static json_t *post(const char *path, const char *body, int want)
{
	struct gwt_resp r;
	json_t *j;

	gwt_req(&r, path, gwt_key_a, body, strlen(body), NULL);
	if (r.code != want)
		fail_msg("%s %s: expected %d, found %d: %.300s", path, body, want, r.code,
			 r.body ? r.body : "");
	j = gwt_parse(r.body);
	gwt_resp_free(&r);
	assert_non_null(j);
	return j;
}

/* A JSON array of numbers into v (asserting its length); its L2 norm. */
static double floats(const json_t *a, float *v, uint32_t n)
{
	double s = 0;

	assert_true(json_is_array(a));
	assert_int_equal(json_array_size(a), n);
	for (uint32_t i = 0; i < n; i++) {
		v[i] = (float)json_number_value(json_array_get(a, i));
		s += (double)v[i] * v[i];
	}
	return sqrt(s);
}

static int b64val(char c)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(t, c) : NULL;

	return p ? (int)(p - t) : -1;
}

/* base64 of little-endian float32s into v; the values decoded. */
static uint32_t unbase64(const char *s, float *v, uint32_t cap)
{
	uint8_t *b = (uint8_t *)v;
	size_t n = 0, len = strlen(s);

	for (size_t i = 0; i + 3 < len + 0 && n + 3 <= cap * 4; i += 4) {
		int a = b64val(s[i]), bb = b64val(s[i + 1]), c = s[i + 2] == '=' ? 0 : b64val(s[i + 2]),
		    d = s[i + 3] == '=' ? 0 : b64val(s[i + 3]);
		uint32_t w;

		assert_true(a >= 0 && bb >= 0 && c >= 0 && d >= 0);
		w = (uint32_t)a << 18 | (uint32_t)bb << 12 | (uint32_t)c << 6 | (uint32_t)d;
		b[n++] = (uint8_t)(w >> 16);
		if (s[i + 2] != '=')
			b[n++] = (uint8_t)(w >> 8);
		if (s[i + 3] != '=')
			b[n++] = (uint8_t)w;
	}
	return (uint32_t)(n / 4);
}

static void test_openai(void **state)
{
	static float a[1024], b[1024], c[1024];
	json_t *j, *data;

	(void)state;
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":\"hello world\"}", 200);
	data = json_object_get(j, "data");
	assert_int_equal(json_array_size(data), 1);
	dim = (uint32_t)json_array_size(json_object_get(json_array_get(data, 0), "embedding"));
	assert_true(dim >= 16 && dim <= 1024);
	assert_true(fabs(floats(json_object_get(json_array_get(data, 0), "embedding"), a, dim) - 1) < 1e-5);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "list");
	assert_string_equal(json_string_value(json_object_get(j, "model")), "minilm");
	assert_string_equal(json_string_value(json_object_get(json_array_get(data, 0), "object")), "embedding");
	/* [CLS] hello world [SEP] */
	assert_true(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")) >= 4);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")),
			 json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")));
	json_decref(j);
	/* a batch: the same vector for "hello world" wherever it stands */
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":[\"a b c\",\"hello world\","
				   "\"x\"]}", 200);
	data = json_object_get(j, "data");
	assert_int_equal(json_array_size(data), 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(json_integer_value(json_object_get(json_array_get(data, i), "index")), i);
	floats(json_object_get(json_array_get(data, 1), "embedding"), b, dim);
	assert_memory_equal(a, b, dim * sizeof(float));
	json_decref(j);
	/* base64: the float32 bits of the same vector */
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":[\"hello world\"],"
				   "\"encoding_format\":\"base64\"}", 200);
	assert_int_equal(unbase64(json_string_value(json_object_get(json_array_get(
				  json_object_get(j, "data"), 0), "embedding")), c, 1024), dim);
	assert_memory_equal(a, c, dim * sizeof(float));
	json_decref(j);
	/* token ids: one input, and an array of them */
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":[2,40,41,3]}", 200);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 4);
	floats(json_object_get(json_array_get(json_object_get(j, "data"), 0), "embedding"), b, dim);
	json_decref(j);
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":[[5,6],[2,40,41,3]]}", 200);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 6);
	floats(json_object_get(json_array_get(json_object_get(j, "data"), 1), "embedding"), c, dim);
	assert_memory_equal(b, c, dim * sizeof(float));
	json_decref(j);
	/* the request log line: what was asked, never the text */
	assert_int_equal(gwt_wait_log(gwt_gateway.log, "\"route\":\"openai_embeddings\""), 0);
	assert_int_equal(gwt_wait_log(gwt_gateway.log, "\"inputs\":3,\"encoding\":\"float\""), 0);
	assert_int_equal(gwt_wait_log(gwt_gateway.log, "\"inputs\":1,\"encoding\":\"base64\""), 0);
	assert_int_equal(gwt_log_count(gwt_gateway.log, "hello world"), 0);
	assert_int_equal(gwt_log_count(gwt_worker.log, "hello world"), 0);
}

static void test_ollama(void **state)
{
	static float a[1024], b[1024];
	json_t *j;
	char body[4096];

	(void)state;
	j = post("/api/embed", "{\"model\":\"minilm\",\"input\":\"hello world\"}", 200);
	assert_string_equal(json_string_value(json_object_get(j, "model")), "minilm");
	assert_int_equal(json_array_size(json_object_get(j, "embeddings")), 1);
	floats(json_array_get(json_object_get(j, "embeddings"), 0), a, dim);
	assert_true(json_integer_value(json_object_get(j, "prompt_eval_count")) >= 4);
	assert_true(json_integer_value(json_object_get(j, "total_duration")) > 0);
	json_decref(j);
	j = post("/api/embed", "{\"model\":\"minilm:latest\",\"input\":[\"x\",\"hello world\"]}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "embeddings")), 2);
	floats(json_array_get(json_object_get(j, "embeddings"), 1), b, dim);
	assert_memory_equal(a, b, dim * sizeof(float));
	json_decref(j);
	j = post("/api/embed", "{\"model\":\"minilm\",\"input\":[]}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "embeddings")), 0);
	json_decref(j);
	/* legacy */
	j = post("/api/embeddings", "{\"model\":\"minilm\",\"prompt\":\"hello world\"}", 200);
	floats(json_object_get(j, "embedding"), b, dim);
	assert_memory_equal(a, b, dim * sizeof(float));
	json_decref(j);
	j = post("/api/embeddings", "{\"model\":\"minilm\",\"prompt\":\"\"}", 200);
	assert_int_equal(json_array_size(json_object_get(j, "embedding")), 0);
	json_decref(j);
	/* over the context (512 tokens): truncated by default, 400 without */
	{
		size_t n = 0;

		n += (size_t)snprintf(body, sizeof(body), "{\"model\":\"minilm\",\"input\":\"");
		for (int i = 0; i < 600; i++)
			n += (size_t)snprintf(body + n, sizeof(body) - n, "a ");
		snprintf(body + n, sizeof(body) - n, "\"}");
	}
	j = post("/api/embed", body, 200);
	assert_int_equal(json_integer_value(json_object_get(j, "prompt_eval_count")), 512);
	json_decref(j);
	memcpy(body + strlen(body) - 1, ",\"truncate\":false}", 19);
	j = post("/api/embed", body, 400);
	assert_non_null(strstr(gwt_ollama_error(j), "input 0: 602 tokens, over the model's context of 512"));
	json_decref(j);
	/* dimensions: this model was not trained for shortened vectors */
	j = post("/v1/embeddings", "{\"model\":\"minilm\",\"input\":[[1,2],[3]],\"dimensions\":8}", 400);
	assert_non_null(strstr(gwt_openai_error(j), "not trained for shortened vectors"));
	json_decref(j);
}

/* Each bad body: its status and a message naming what is wrong. */
static void test_refusals(void **state)
{
	static const struct {
		const char *path, *body;
		int status;
		const char *needle;
	} bad[] = {
		{ "/v1/embeddings", "{\"model\":\"minilm\"}", 400, "input: expected a string" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[]}", 400, "expected 1 to 2048 inputs, found 0" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":\"\"}", 400, "input: expected a non-empty string" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[\"a\",\"\"]}", 400, "input[1]: expected a non-empty string" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[\"a\",7]}", 400, "input[1]: expected a string or an array of token ids" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[[1,-2]]}", 400, "input[0]: expected token ids" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[[]]}", 400, "input[0]: expected a non-empty array of token ids" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":[[1,99999999]]}", 400, "outside the vocabulary" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":\"a\",\"encoding_format\":\"hex\"}", 400, "encoding_format: expected \"float\" or \"base64\"" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":\"a\",\"dimensions\":0}", 400, "dimensions" },
		{ "/v1/embeddings", "{\"model\":\"minilm\",\"input\":\"a\",\"dimensions\":100000}", 400, "dimensions" },
		{ "/v1/embeddings", "{\"model\":\"nope\",\"input\":\"a\"}", 404, "nope" },
		{ "/v1/embeddings", "[1,2]", 400, "" },
		{ "/api/embed", "{\"model\":\"minilm\",\"input\":5}", 400, "input: expected a string or an array of strings" },
		{ "/api/embed", "{\"model\":\"minilm\",\"input\":[[1,2]]}", 400, "input[0]: expected a string" },
		{ "/api/embed", "{\"model\":\"minilm\",\"input\":\"a\",\"truncate\":\"yes\"}", 400, "truncate: expected a boolean" },
		{ "/api/embed", "{\"model\":\"minilm\",\"input\":\"a\",\"options\":3}", 400, "options: expected an object" },
		{ "/api/embed", "{\"input\":\"a\"}", 400, "model: expected a non-empty model name" },
		{ "/api/embeddings", "{\"model\":\"minilm\",\"prompt\":[\"a\"]}", 400, "prompt: expected a string" },
		{ "/api/generate", "{\"model\":\"minilm\",\"prompt\":\"hi\",\"stream\":false}", 400, "is an embedding model: it does not generate" },
		{ "/v1/chat/completions", "{\"model\":\"minilm\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 400, "use /v1/embeddings" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = post(bad[i].path, bad[i].body, bad[i].status);
		const char *msg = strncmp(bad[i].path, "/v1/", 4) == 0 ? gwt_openai_error(j)
									: gwt_ollama_error(j);

		if (!msg || !strstr(msg, bad[i].needle))
			fail_msg("%s %s: expected a message with '%s', found '%s'", bad[i].path,
				 bad[i].body, bad[i].needle, msg ? msg : "(none)");
		json_decref(j);
	}
	/* still serving */
	json_decref(post("/api/embed", "{\"model\":\"minilm\",\"input\":\"ok\"}", 200));
}

static void test_model_lists(void **state)
{
	json_t *j, *caps;

	(void)state;
	j = post("/api/show", "{\"model\":\"minilm\"}", 200);
	caps = json_object_get(j, "capabilities");
	assert_int_equal(json_array_size(caps), 1);
	assert_string_equal(json_string_value(json_array_get(caps, 0)), "embedding");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "model_info"),
							    "bert.embedding_length")), dim);
	json_decref(j);
}

/* usage records count the embedded tokens; a tenant's TPM refuses with 429 */
static void test_usage_and_quota(void **state)
{
	char key[64], cmd[2048], *o;
	int st, n429 = 0;
	json_t *u, *row;
	size_t i;
	int64_t prompt = 0, reqs = 0;

	(void)state;
	h_ctl(NULL, 0, "tenant create embq --tpm 40");
	h_ctl(NULL, 0, "client create embq/app");
	h_issue_key("embq/app", key, NULL);
	for (int k = 0; k < 6; k++) {
		struct gwt_resp r;
		const char *b = "{\"model\":\"minilm\",\"input\":[\"one two three\",\"four five\"]}";

		gwt_req(&r, "/v1/embeddings", key, b, strlen(b), NULL);
		assert_true(r.code == 200 || r.code == 429);
		if (r.code == 429) {
			n429++;
			assert_non_null(strstr(r.body, "quota exceeded"));
			assert_non_null(strstr(r.headers, "etry-After"));
		}
		gwt_resp_free(&r);
	}
	assert_true(n429 > 0 && n429 < 6);
	/* usage: what was answered, in tokens */
	for (int64_t deadline = h_now_ms() + DEADLINE_MS; h_now_ms() < deadline; h_pause_ms(100)) {
		snprintf(cmd, sizeof(cmd), "%s --redis unix://%s usage embq --format json",
			 h_bin("tools/sluicectl"), gwt_redis_sock);
		o = h_run_capture(cmd, &st);
		assert_non_null(o);
		u = gwt_parse(o);
		free(o);
		prompt = reqs = 0;
		json_array_foreach(u, i, row) {
			if (!json_is_null(json_object_get(row, "client")))
				continue;
			prompt += json_integer_value(json_object_get(row, "prompt_tokens"));
			reqs += json_integer_value(json_object_get(row, "requests"));
			assert_int_equal(json_integer_value(json_object_get(row, "completion_tokens")), 0);
		}
		json_decref(u);
		if (reqs == 6)
			break;
	}
	assert_int_equal(reqs, 6);
	assert_true(prompt > 0);
	assert_int_equal(prompt % (6 - n429), 0); /* each answered request the same tokens */

	/* a separate embedding limit: --embed-rpm 2 lets two through a minute */
	{
		char out[4096], key2[64];
		struct gwt_resp r;
		const char *b = "{\"model\":\"minilm\",\"input\":\"one\"}";

		h_ctl(NULL, 0, "tenant create embr --embed-rpm 2");
		h_ctl(NULL, 0, "client create embr/app");
		h_issue_key("embr/app", key2, NULL);
		h_ctl(out, sizeof(out), "tenant show embr");
		assert_non_null(strstr(out, "embed_rpm"));
		for (int k = 0; k < 3; k++) {
			gwt_req(&r, "/api/embed", key2, b, strlen(b), NULL);
			assert_int_equal(r.code, k < 2 ? 200 : 429);
			if (k == 2)
				assert_non_null(strstr(r.body, "quota exceeded: tenant embed_rpm"));
			gwt_resp_free(&r);
		}
	}
}

static void test_npm_clients(void **state)
{
	int st;
	char *out;

	(void)state;
	out = gwt_run_clients("clients-embed", "SLUICE_ONLY=embed: SLUICE_EMBED=1", "minilm", &st);
	if (!out)
		skip();
	fprintf(stderr, "%s", out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "ok embed: openai"));
	assert_null(strstr(out, "not ok"));
	free(out);
}

static int setup(void **state)
{
	static char model[512];
	const char *m = h_model("bert-tiny", "F32", "bert");

	if (!m)
		return -1;
	snprintf(model, sizeof(model), "%s", m);
	gwt_model_file = model;
	gwt_model_name = "minilm";
	return gwt_setup(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_openai),
		cmocka_unit_test(test_ollama),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_model_lists),
		cmocka_unit_test(test_usage_and_quota),
		cmocka_unit_test(test_npm_clients),
	};

	return cmocka_run_group_tests_name("it_embed_api", tests, setup, gwt_teardown);
}
