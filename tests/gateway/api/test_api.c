/*
 * test_api.c - gateway/api/api.c: every accepted field and its mapping onto
 * proto_submit, every refusal (status, message naming the field, the API's
 * error format), and every rendered body parsed back with jansson.
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
#include "gateway/api/api.h"

static struct cm_arena *A;
static struct gw_api_limits L;

static int setup(void **state)
{
	(void)state;
	A = cm_arena_new(4096, 16 * 1024 * 1024);
	gw_api_limits_defaults(&L);
	return A ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	cm_arena_free(A);
	return 0;
}

static enum cm_status parse(enum gw_api_kind k, const char *json,
			    struct gw_api_request *r, struct gw_api_error *e)
{
	cm_arena_reset(A);
	return gw_api_parse(k, json, strlen(json), &L, A, r, e);
}

static void ok(enum gw_api_kind k, const char *json, struct gw_api_request *r)
{
	struct gw_api_error e;

	if (parse(k, json, r, &e) != CM_OK)
		fail_msg("refused %s: %s", json, e.message);
}

static int streq(struct proto_str s, const char *c)
{
	return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

static json_t *load(const struct cm_buf *b)
{
	json_error_t je;
	json_t *j = json_loadb((const char *)cm_buf_data(b), cm_buf_len(b), 0, &je);

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, (const char *)cm_buf_data(b));
	return j;
}

/* Asserts a refusal, its message, and its rendering in the API's format. */
static void bad(enum gw_api_kind k, const char *json, int status,
		const char *msg_part, const char *param)
{
	struct gw_api_request r;
	struct gw_api_error e;
	enum cm_status st = parse(k, json, &r, &e);
	enum gw_api_style style = (k == GW_API_OPENAI_CHAT || k == GW_API_OPENAI_COMPLETIONS)
					  ? GW_STYLE_OPENAI
					  : GW_STYLE_OLLAMA;
	struct cm_buf b;
	json_t *j, *err;

	if (st == CM_OK)
		fail_msg("accepted %s", json);
	if (e.status != status)
		fail_msg("%s: expected status %d, got %d (%s)", json, status, e.status, e.message);
	if (!strstr(e.message, msg_part))
		fail_msg("%s: message '%s' lacks '%s'", json, e.message, msg_part);
	if (param && strcmp(e.param, param) != 0)
		fail_msg("%s: param '%s', expected '%s'", json, e.param, param);
	cm_buf_init(&b, 8192);
	assert_int_equal(gw_api_render_error(&b, style, &e), CM_OK);
	j = load(&b);
	err = json_object_get(j, "error");
	if (style == GW_STYLE_OLLAMA) {
		assert_true(json_is_string(err));
		assert_string_equal(json_string_value(err), e.message);
		assert_int_equal(json_object_size(j), 1);
	} else {
		assert_true(json_is_object(err));
		assert_string_equal(json_string_value(json_object_get(err, "message")), e.message);
		assert_string_equal(json_string_value(json_object_get(err, "type")),
				    status >= 500 ? "server_error" : "invalid_request_error");
		if (param && param[0])
			assert_string_equal(json_string_value(json_object_get(err, "param")), param);
		assert_non_null(json_object_get(err, "code"));
	}
	json_decref(j);
	cm_buf_deinit(&b);
}

/* ---- Ollama ------------------------------------------------------------ */

static void test_generate_fields(void **state)
{
	struct gw_api_request r;
	struct proto_submit s;
	uint32_t flags;

	(void)state;
	ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"tiny\",\"prompt\":\"Why?\",\"system\":\"Be brief.\","
	   "\"template\":\"\",\"keep_alive\":\"5m\",\"unknown_field\":[1,{\"a\":2}],"
	   "\"options\":{\"num_predict\":42,\"temperature\":0.25,\"top_k\":7,\"top_p\":0.5,"
	   "\"min_p\":0.05,\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"presence_penalty\":0.5,"
	   "\"frequency_penalty\":-0.5,\"seed\":1234,\"stop\":[\"\\n\\n\",\"END\"],"
	   "\"num_ctx\":999999,\"mirostat\":\"ignored\"}}",
	   &r);
	assert_int_equal(r.kind, GW_API_OLLAMA_GENERATE);
	assert_int_equal(r.style, GW_STYLE_OLLAMA);
	assert_true(streq(r.model, "tiny"));
	assert_true(r.stream); /* Ollama's default */
	assert_false(r.raw);
	assert_int_equal(r.max_tokens, 42);
	assert_true(r.max_tokens_given);
	assert_float_equal(r.sampling.temperature, 0.25, 1e-6);
	assert_int_equal(r.sampling.top_k, 7);
	assert_float_equal(r.sampling.top_p, 0.5, 1e-6);
	assert_float_equal(r.sampling.min_p, 0.05, 1e-6);
	assert_float_equal(r.sampling.repeat_penalty, 1.3, 1e-6);
	assert_int_equal(r.sampling.repeat_last_n, UINT32_MAX);
	assert_float_equal(r.sampling.presence_penalty, 0.5, 1e-6);
	assert_float_equal(r.sampling.frequency_penalty, -0.5, 1e-6);
	assert_int_equal(r.sampling.seed, 1234);
	assert_true(r.submit_flags & PROTO_SUBMIT_F_HAS_SEED);
	assert_int_equal(r.n_stop, 2);
	assert_true(streq(r.stop[0], "\n\n"));
	assert_true(streq(r.stop[1], "END"));
	/* not raw: the model's template renders system + user */
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(r.n_messages, 2);
	assert_true(streq(r.messages[0].role, "system"));
	assert_true(streq(r.messages[0].content, "Be brief."));
	assert_true(streq(r.messages[1].role, "user"));
	assert_true(streq(r.messages[1].content, "Why?"));

	gw_api_to_submit(&r, &s, &flags);
	assert_true(streq(s.model, "tiny"));
	assert_int_equal(s.max_tokens, 42);
	assert_int_equal(s.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(s.n_messages, 2);
	assert_int_equal(s.n_stop, 2);
	assert_int_equal(flags, PROTO_SUBMIT_F_HAS_SEED);
	assert_int_equal(s.tenant_id.len, 0);
	assert_int_equal(s.key_id.len, 0);
	assert_int_equal(s.template_name.len, 0);
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		assert_int_equal(s.cache_salt[i], 0);

	/* defaults; raw -> TEXT with BOS, system not applied */
	ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"m\",\"prompt\":\"[INST] hi\",\"raw\":true,\"system\":\"x\","
	   "\"stream\":false,\"options\":{\"num_predict\":-1,\"seed\":-1}}", &r);
	assert_false(r.stream);
	assert_true(r.raw);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_TEXT);
	assert_true(streq(r.text, "[INST] hi"));
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS);
	assert_int_equal(r.max_tokens, L.max_output_tokens);
	assert_false(r.max_tokens_given);
	assert_float_equal(r.sampling.temperature, 0.8, 1e-6);
	assert_int_equal(r.sampling.top_k, 40);
	assert_float_equal(r.sampling.top_p, 0.9, 1e-6);
	assert_float_equal(r.sampling.repeat_penalty, 1.1, 1e-6);
	assert_int_equal(r.sampling.repeat_last_n, 64);
	gw_api_to_submit(&r, &s, &flags);
	assert_int_equal(s.n_messages, 0);
	assert_null(s.messages);
	assert_true(streq(s.text, "[INST] hi"));

	/* a single stop string, -2 num_predict, null fields */
	ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"\",\"images\":null,"
	   "\"options\":{\"stop\":\"###\",\"num_predict\":-2,\"temperature\":null}}", &r);
	assert_int_equal(r.n_stop, 1);
	assert_true(streq(r.stop[0], "###"));
	assert_int_equal(r.n_messages, 1);
	assert_float_equal(r.sampling.temperature, 0.8, 1e-6);
}

static void test_generate_refusals(void **state)
{
	const enum gw_api_kind G = GW_API_OLLAMA_GENERATE;
	char big[8192];

	(void)state;
	bad(G, "{\"prompt\":\"p\"}", 400, "model: expected a non-empty model name, found nothing", "model");
	bad(G, "{\"model\":5,\"prompt\":\"p\"}", 400, "model: expected a non-empty model name, found 5", "model");
	bad(G, "{\"model\":\"\",\"prompt\":\"p\"}", 400, "found an empty string", "model");
	snprintf(big, sizeof(big), "{\"model\":\"%0300d\",\"prompt\":\"p\"}", 0);
	bad(G, big, 400, "model: expected a name of at most 256 bytes, found 300 bytes", "model");
	bad(G, "{\"model\":\"m\"}", 400, "prompt: expected a non-empty string, found nothing", "prompt");
	bad(G, "{\"model\":\"m\",\"prompt\":[\"a\"]}", 400, "prompt: expected a non-empty string, found an array", "prompt");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"system\":1}", 400, "system: expected a string, found 1", "system");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"template\":\"{{ .Prompt }}\"}", 400,
	    "template: custom prompt templates are not supported", "template");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"images\":[\"aGk=\"]}", 400,
	    "images: image inputs are not supported", "images");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"json\"}", 400,
	    "format: structured output formats are not supported", "format");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"context\":[1,2,3]}", 400, "context:", "context");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"suffix\":\"x\"}", 400, "suffix:", "suffix");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"stream\":\"yes\"}", 400,
	    "stream: expected a boolean, found a string", "stream");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"raw\":1}", 400, "raw: expected a boolean, found 1", "raw");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":[]}", 400, "options: expected an object, found an array", "options");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":-5}}", 400,
	    "options.num_predict: expected an integer from -2 to 4096, found -5", "options.num_predict");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":0}}", 400,
	    "options.num_predict: expected an integer from 1 to the limit, or -1, found 0", "options.num_predict");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":1000000000}}", 400,
	    "found 1000000000", "options.num_predict");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":1.5}}", 400,
	    "options.num_predict: expected an integer from -2 to 4096, found 1.5", "options.num_predict");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":\"10\"}}", 400,
	    "found a string", "options.num_predict");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":-0.1}}", 400,
	    "options.temperature: expected a number from 0 to 2, found -0.1", "options.temperature");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":1e300}}", 400,
	    "options.temperature: expected a number from 0 to 2, found 1e+300", "options.temperature");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":true}}", 400,
	    "found true", "options.temperature");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"top_p\":1.5}}", 400,
	    "options.top_p: expected a number from 0 to 1, found 1.5", "options.top_p");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"top_k\":-1}}", 400,
	    "options.top_k: expected an integer from 0 to 100000, found -1", "options.top_k");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"min_p\":2}}", 400, "options.min_p", "options.min_p");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"repeat_penalty\":11}}", 400,
	    "options.repeat_penalty", "options.repeat_penalty");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"repeat_last_n\":-2}}", 400,
	    "options.repeat_last_n", "options.repeat_last_n");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"presence_penalty\":2.5}}", 400,
	    "options.presence_penalty: expected a number from -2 to 2", "options.presence_penalty");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"frequency_penalty\":-3}}", 400,
	    "options.frequency_penalty", "options.frequency_penalty");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"seed\":-2}}", 400,
	    "options.seed: expected an integer from -1 to", "options.seed");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":5}}", 400,
	    "options.stop: expected a string or an array of strings, found 5", "options.stop");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"a\",7]}}", 400,
	    "options.stop[1]: expected a string, found 7", "options.stop[1]");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"\"]}}", 400,
	    "options.stop[0]: expected a non-empty string, found an empty string", "options.stop[0]");
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":"
	       "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}}",
	    400, "options.stop: expected at most 16 stop strings, found 17", "options.stop");
	{
		int n = snprintf(big, sizeof(big), "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"");

		memset(big + n, 's', 257);
		snprintf(big + n + 257, sizeof(big) - (size_t)n - 257, "\"]}}");
		bad(G, big, 400, "options.stop[0]: expected at most 256 bytes, found 257 bytes", "options.stop");
	}
}

static void test_chat_ollama(void **state)
{
	const enum gw_api_kind C = GW_API_OLLAMA_CHAT;
	struct gw_api_request r;
	char *many;
	size_t off = 0;

	(void)state;
	ok(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
	      "{\"role\":\"user\",\"content\":\"u\",\"images\":[]},"
	      "{\"role\":\"assistant\",\"tool_calls\":[]},{\"role\":\"user\",\"content\":\"t\"}],"
	      "\"options\":{\"top_k\":0},\"keep_alive\":0}", &r);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(r.n_messages, 4);
	assert_true(streq(r.messages[0].role, "system"));
	assert_true(streq(r.messages[2].role, "assistant"));
	assert_int_equal(r.messages[2].content.len, 0);
	assert_true(streq(r.messages[3].content, "t"));
	/* the gateway refuses a role the worker would refuse (proto_role_parse) */
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"t\"}]}", 400,
	    "messages[0].role: expected one of system, user, assistant, found \"tool\"", "messages[0].role");
	bad(GW_API_OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"t\"}]}", 400,
	    "messages[0].role: expected one of system, developer, user, assistant, found \"tool\"", "messages[0].role");
	assert_int_equal(r.sampling.top_k, 0);
	assert_true(r.stream);

	bad(C, "{\"model\":\"m\"}", 400, "messages: expected an array of messages, found nothing", "messages");
	bad(C, "{\"model\":\"m\",\"messages\":{}}", 400, "messages: expected an array of messages, found an object", "messages");
	bad(C, "{\"model\":\"m\",\"messages\":[]}", 400, "messages: expected at least one message, found an empty array", "messages");
	bad(C, "{\"model\":\"m\",\"messages\":[\"hi\"]}", 400, "messages[0]: expected an object", "messages[0]");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, user, assistant, found another string", "messages[0].role");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, user, assistant, found nothing", "messages[0].role");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400,
	    "messages[0].content: expected a string, found 5", "messages[0].content");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400,
	    "messages[0].content: expected a string, found nothing", "messages[0].content");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"aGk=\"]}]}", 400,
	    "messages[0].images: image inputs are not supported", "messages[0].images");
	bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", 400,
	    "tools: tool calling is not supported", "tools");
	many = malloc(64 * 300);
	off = (size_t)sprintf(many, "{\"model\":\"m\",\"messages\":[");
	for (int i = 0; i < 257; i++)
		off += (size_t)sprintf(many + off, "%s{\"role\":\"user\",\"content\":\"x\"}", i ? "," : "");
	sprintf(many + off, "]}");
	bad(C, many, 400, "messages: expected at most 256 messages, found 257", "messages");
	free(many);
}

/* ---- OpenAI ------------------------------------------------------------ */

static void test_openai_chat(void **state)
{
	const enum gw_api_kind O = GW_API_OPENAI_CHAT;
	struct gw_api_request r;
	struct proto_submit s;
	uint32_t flags;

	(void)state;
	ok(O, "{\"model\":\"gpt-x\",\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},"
	      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
	      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],"
	      "\"max_tokens\":100,\"temperature\":0,\"top_p\":0.1,\"n\":1,\"stop\":\"\\n\","
	      "\"seed\":-7,\"presence_penalty\":1,\"frequency_penalty\":-2,\"stream\":true,"
	      "\"stream_options\":{\"include_usage\":true},\"user\":\"u-1\",\"logprobs\":false,"
	      "\"response_format\":{\"type\":\"text\"},\"tools\":[]}", &r);
	assert_int_equal(r.style, GW_STYLE_OPENAI);
	assert_int_equal(r.n_messages, 3);
	assert_true(streq(r.messages[0].role, "system"));
	assert_true(streq(r.messages[1].content, "a\nb"));
	assert_true(streq(r.messages[2].role, "assistant"));
	assert_int_equal(r.messages[2].content.len, 0);
	assert_int_equal(r.max_tokens, 100);
	assert_float_equal(r.sampling.temperature, 0, 0);
	assert_float_equal(r.sampling.top_p, 0.1, 1e-6);
	assert_int_equal(r.n_stop, 1);
	assert_true(streq(r.stop[0], "\n"));
	assert_int_equal(r.sampling.seed, (uint64_t)(int64_t)-7);
	assert_true(r.submit_flags & PROTO_SUBMIT_F_HAS_SEED);
	assert_float_equal(r.sampling.presence_penalty, 1, 1e-6);
	assert_float_equal(r.sampling.frequency_penalty, -2, 1e-6);
	assert_true(r.stream);
	assert_true(r.include_usage);
	assert_string_equal(gw_api_content_type(&r), GW_API_CT_SSE);
	gw_api_to_submit(&r, &s, &flags);
	assert_int_equal(s.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(flags & PROTO_SUBMIT_F_ADD_BOS, 0);

	/* defaults */
	ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":9}", &r);
	assert_false(r.stream);
	assert_false(r.include_usage);
	assert_int_equal(r.max_tokens, 9);
	assert_float_equal(r.sampling.temperature, 1.0, 0);
	assert_float_equal(r.sampling.top_p, 1.0, 0);
	assert_int_equal(r.sampling.top_k, 0);
	assert_float_equal(r.sampling.repeat_penalty, 1.0, 0);
	assert_int_equal(r.submit_flags, 0);
	assert_string_equal(gw_api_content_type(&r), GW_API_CT_JSON);
	ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
	assert_int_equal(r.max_tokens, L.max_output_tokens);

	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", 400,
	    "n: expected 1 (only one choice per request is supported), found 2", "n");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", 400, "found 0", "n");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":\"1\"}", 400, "found a string", "n");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1}", 400,
	    "max_tokens: expected an integer from 1 to 4096, found -1", "max_tokens");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":4097}", 400,
	    "max_tokens: expected an integer from 1 to 4096, found 4097", "max_tokens");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":0}", 400,
	    "max_completion_tokens: expected an integer from 1 to 4096, found 0", "max_completion_tokens");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,\"max_completion_tokens\":6}", 400,
	    "max_completion_tokens: expected the same value as max_tokens", "max_completion_tokens");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":2.5}", 400,
	    "temperature: expected a number from 0 to 2, found 2.5", "temperature");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-0.5}", 400,
	    "top_p: expected a number from 0 to 1, found -0.5", "top_p");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"presence_penalty\":3}", 400,
	    "presence_penalty", "presence_penalty");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", 400,
	    "seed: expected an integer", "seed");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400,
	    "stream: expected a boolean, found 1", "stream");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":true}}", 400,
	    "stream_options: only allowed when stream is true", "stream_options");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":{\"include_usage\":\"y\"}}", 400,
	    "stream_options.include_usage: expected a boolean", "stream_options.include_usage");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":3}", 400,
	    "stream_options: expected an object, found 3", "stream_options");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}", 400,
	    "messages[0].content[0].type: expected \"text\", found another part type", "messages[0].content[0].type");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400,
	    "messages[0].content[0].text: expected a string, found nothing", "messages[0].content[0].text");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[7]}]}", 400,
	    "messages[0].content[0]: expected an object", "messages[0].content[0]");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":{}}]}", 400,
	    "messages[0].content: expected a string or an array of text parts, found an object", "messages[0].content");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400,
	    "messages[0].content: expected a string or an array of text parts, found nothing", "messages[0].content");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, developer, user, assistant, found another string", "messages[0].role");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true}", 400,
	    "logprobs: log probabilities are not supported", "logprobs");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}", 400,
	    "tools: tool calling is not supported", "tools");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}", 400,
	    "response_format: structured output formats are not supported", "response_format");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":5}}", 400,
	    "logit_bias", "logit_bias");
	bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"\"]}", 400,
	    "stop[1]: expected a non-empty string", "stop[1]");
	bad(O, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "model: expected a non-empty model name", "model");
}

static void test_openai_completions(void **state)
{
	const enum gw_api_kind P = GW_API_OPENAI_COMPLETIONS;
	struct gw_api_request r;

	(void)state;
	ok(P, "{\"model\":\"m\",\"prompt\":\"Once\",\"best_of\":1,\"echo\":false,\"suffix\":null}", &r);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_TEXT);
	assert_true(streq(r.text, "Once"));
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS);
	assert_int_equal(r.max_tokens, 16); /* OpenAI's default for completions */
	ok(P, "{\"model\":\"m\",\"prompt\":\"Once\",\"max_tokens\":300,\"seed\":5}", &r);
	assert_int_equal(r.max_tokens, 300);
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_HAS_SEED);
	bad(P, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 400,
	    "prompt: expected a string, found an array (batched or token prompts are not supported)", "prompt");
	bad(P, "{\"model\":\"m\",\"prompt\":[1,2]}", 400, "found an array", "prompt");
	bad(P, "{\"model\":\"m\"}", 400, "prompt: expected a non-empty string, found nothing", "prompt");
	bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"best_of\":2}", 400, "best_of: expected 1", "best_of");
	bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", 400, "echo:", "echo");
	bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":3}", 400, "logprobs:", "logprobs");
	bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":3}", 400, "n: expected 1", "n");
	bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"max_completion_tokens\":3,\"max_tokens\":99999}", 400, "max_tokens", "max_tokens");
}

/* ---- body-level checks -------------------------------------------------- */

static void test_body_checks(void **state)
{
	const enum gw_api_kind G = GW_API_OLLAMA_GENERATE;
	struct gw_api_request r;
	struct gw_api_error e;
	char *deep;

	(void)state;
	bad(G, "", 400, "body: expected a JSON object, found an empty body", NULL);
	bad(G, "{\"model\":", 400, "body: expected valid JSON, found an error at line 1", NULL);
	bad(G, "[1,2]", 400, "body: expected a JSON object, found an array", NULL);
	bad(G, "\"str\"", 400, "found a scalar", NULL);
	bad(G, "{\"model\":\"a\",\"model\":\"b\",\"prompt\":\"p\"}", 400, "duplicate", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"\xff\xfe\"}", 400, "body: expected valid UTF-8", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"\xc0\xaf\"}", 400, "body: expected valid UTF-8", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"a\\u0000b\"}", 400, "found \\u0000", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":99999999999999999999999}}", 400,
	    "body: expected valid JSON", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":1e999}}", 400,
	    "body: expected valid JSON", NULL);
	bad(G, "{\"model\":\"m\",\"prompt\":\"p\"} trailing", 400, "body: expected valid JSON", NULL);
	/* a raw NUL byte: measured length includes it */
	{
		static const char nul[] = "{\"model\":\"m\",\"prompt\":\"a\0b\"}";

		cm_arena_reset(A);
		assert_int_equal(gw_api_parse(G, nul, sizeof(nul) - 1, &L, A, &r, &e), CM_EINVAL);
		assert_int_equal(e.status, 400);
		assert_non_null(strstr(e.message, "found a NUL byte"));
	}
	/* an escaped backslash followed by u0000 is plain text, not a NUL */
	ok(G, "{\"model\":\"m\",\"prompt\":\"a\\\\u0000b\"}", &r);
	assert_true(streq(r.messages[0].content, "a\\u0000b"));
	/* depth: 32 levels accepted, 33 refused, brackets in strings ignored */
	deep = malloc(300000);
	{
		size_t n = 0;

		n += (size_t)sprintf(deep, "{\"model\":\"m\",\"prompt\":\"[[[[{{{{\",\"x\":");
		for (int i = 0; i < 30; i++)
			deep[n++] = '[';
		for (int i = 0; i < 30; i++)
			deep[n++] = ']';
		sprintf(deep + n, "}");
		ok(G, deep, &r);
		n = (size_t)sprintf(deep, "{\"model\":\"m\",\"prompt\":\"p\",\"x\":");
		for (int i = 0; i < 32; i++)
			deep[n++] = '[';
		for (int i = 0; i < 32; i++)
			deep[n++] = ']';
		sprintf(deep + n, "}");
		bad(G, deep, 400, "body: expected JSON nested at most 32 levels deep", NULL);
		/* a very deep document is refused by the scan, not by recursion */
		n = (size_t)sprintf(deep, "{\"x\":");
		for (int i = 0; i < 200000; i++)
			deep[n++] = '[';
		deep[n] = '\0';
		bad(G, deep, 400, "nested at most 32 levels", NULL);
	}
	free(deep);
}

static void test_tenant_fields_ignored(void **state)
{
	struct gw_api_request a, b;
	struct proto_submit sa, sb;
	uint32_t fa, fb;
	struct cm_arena *a2 = cm_arena_new(4096, 1 << 20);
	struct gw_api_error e;
	static const char plain[] =
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"seed\":3}";
	static const char spiked[] =
		"{\"cache_salt\":\"00ff\",\"salt\":\"x\",\"tenant\":\"other-team\",\"tenant_id\":\"t2\","
		"\"key_id\":\"k\",\"prefix_salt\":[1],\"model\":\"m\",\"messages\":[{\"role\":\"user\","
		"\"content\":\"hi\",\"tenant\":\"x\"}],\"seed\":3,\"sluice\":{\"tenant\":\"t\"}}";

	(void)state;
	ok(GW_API_OPENAI_CHAT, plain, &a);
	assert_int_equal(gw_api_parse(GW_API_OPENAI_CHAT, spiked, sizeof(spiked) - 1, &L, a2, &b, &e), CM_OK);
	gw_api_to_submit(&a, &sa, &fa);
	gw_api_to_submit(&b, &sb, &fb);
	assert_int_equal(fa, fb);
	assert_memory_equal(&sa.sampling, &sb.sampling, sizeof(sa.sampling));
	assert_memory_equal(sa.cache_salt, sb.cache_salt, PROTO_DIGEST_LEN);
	assert_int_equal(sb.tenant_id.len, 0);
	assert_int_equal(sb.key_id.len, 0);
	assert_int_equal(sa.n_messages, sb.n_messages);
	assert_true(streq(sb.messages[0].content, "hi"));
	cm_arena_free(a2);
}

static void test_show_and_limits(void **state)
{
	struct proto_str m;
	struct gw_api_error e;
	struct gw_api_request r;
	struct cm_arena *tiny;
	static const char big_prompt[] = "{\"model\":\"m\",\"prompt\":\"0123456789012345678901234567890123456789\"}";

	(void)state;
	cm_arena_reset(A);
	assert_int_equal(gw_api_parse_show("{\"model\":\"llama3\"}", 18, &L, A, &m, &e), CM_OK);
	assert_true(streq(m, "llama3"));
	assert_int_equal(gw_api_parse_show("{\"name\":\"old\"}", 14, &L, A, &m, &e), CM_OK);
	assert_true(streq(m, "old"));
	assert_int_equal(gw_api_parse_show("{}", 2, &L, A, &m, &e), CM_EINVAL);
	assert_int_equal(e.status, 400);
	assert_non_null(strstr(e.message, "model: expected a non-empty model name, found nothing"));
	assert_int_equal(gw_api_parse_show("{\"model\":1", 10, &L, A, &m, &e), CM_EINVAL);
	/* limit bounds */
	{
		char msg[128];

		assert_int_equal(gw_api_limits_check(&L, msg, sizeof(msg)), CM_OK);
		L.json_depth = 1;
		assert_int_equal(gw_api_limits_check(&L, msg, sizeof(msg)), CM_EINVAL);
		assert_string_equal(msg, "limits.json_depth: expected 2..256, found 1");
		gw_api_limits_defaults(&L);
		L.stop_strings = 65;
		assert_int_equal(gw_api_limits_check(&L, msg, sizeof(msg)), CM_EINVAL);
		assert_non_null(strstr(msg, "limits.stop_strings"));
		gw_api_limits_defaults(&L);
	}
	/* configured limits apply */
	L.messages = 1;
	bad(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}",
	    400, "expected at most 1 messages, found 2", "messages");
	L.json_depth = 2;
	bad(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
	    400, "nested at most 2 levels", NULL);
	gw_api_limits_defaults(&L);
	/* arena exhaustion is a 500, not a crash */
	tiny = cm_arena_new(1024, 32);
	assert_int_equal(gw_api_parse(GW_API_OLLAMA_GENERATE, big_prompt, sizeof(big_prompt) - 1,
				      &L, tiny, &r, &e), CM_ENOMEM);
	assert_int_equal(e.status, 500);
	cm_arena_free(tiny);
}

/* ---- rendering ---------------------------------------------------------- */

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
	ok(GW_API_OLLAMA_GENERATE, "{\"model\":\"m\",\"prompt\":\"p\"}", &r);
	assert_string_equal(gw_api_content_type(&r), GW_API_CT_NDJSON);
	gw_api_stream_init(&s, &r, 1, 1700000000LL * 1000000000LL);
	assert_int_equal(gw_api_render_chunk(&b, &s, "He said \"hi\"\n", 13), CM_OK);
	nl = memchr(cm_buf_data(&b), '\n', cm_buf_len(&b));
	assert_ptr_equal(nl, cm_buf_data(&b) + cm_buf_len(&b) - 1); /* one line */
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "He said \"hi\"\n");
	assert_true(json_is_false(json_object_get(j, "done")));
	assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_final(&b, &s, &res), CM_OK);
	assert_int_equal(cm_buf_data(&b)[cm_buf_len(&b) - 1], '\n');
	j = load(&b);
	check_ollama_done(j, 0);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_full(&b, &s, "whole", 5, &res), CM_OK);
	j = load(&b);
	check_ollama_done(j, 0);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "whole");
	json_decref(j);

	ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 2, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_chunk(&b, &s, "tok", 3), CM_OK);
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "message"), "content")), "tok");
	assert_null(json_object_get(j, "response"));
	json_decref(j);
	cm_buf_reset(&b);
	res.finish = PROTO_FINISH_STOP;
	assert_int_equal(gw_api_render_full(&b, &s, "all", 3, &res), CM_OK);
	j = load(&b);
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
	ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
			       "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", &r);
	gw_api_stream_init(&s, &r, 9, 1700000000LL * 1000000000LL);
	assert_int_equal(strncmp(s.id, "chatcmpl-", 9), 0);
	assert_int_equal(gw_api_render_chunk(&b, &s, "Hel", 3), CM_OK);
	assert_int_equal(gw_api_render_chunk(&b, &s, "lo", 2), CM_OK);
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
	ok(GW_API_OPENAI_CHAT, "{\"model\":\"gm\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_chunk(&b, &s, "a", 1), CM_OK);
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
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "object")), "chat.completion");
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "message"), "content")), "answer");
	assert_string_equal(json_string_value(json_object_get(json_object_get(c, "message"), "role")), "assistant");
	assert_string_equal(json_string_value(json_object_get(c, "finish_reason")), "length");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "total_tokens")), 14);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "sluice"), "cached_prompt_tokens")), 4);
	json_decref(j);

	/* text_completion, streaming and not */
	ok(GW_API_OPENAI_COMPLETIONS, "{\"model\":\"gm\",\"prompt\":\"x\",\"stream\":true}", &r);
	gw_api_stream_init(&s, &r, 9, 0);
	assert_int_equal(strncmp(s.id, "cmpl-", 5), 0);
	cm_buf_reset(&b);
	res.finish = PROTO_FINISH_STOP;
	assert_int_equal(gw_api_render_chunk(&b, &s, "t", 1), CM_OK);
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
	j = load(&b);
	c = json_array_get(json_object_get(j, "choices"), 0);
	assert_string_equal(json_string_value(json_object_get(c, "text")), "full");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 11);
	json_decref(j);
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
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")), "not_found_error");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "model_not_found");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")), "model");
	json_decref(j);

	/* the server's own errors, by path */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(413, "request body is larger than the body limit",
					   "/v1/chat/completions", &b, &ct, NULL), CM_OK);
	assert_string_equal(ct, GW_API_CT_JSON);
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			    "request body is larger than the body limit");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
			    "invalid_request_error");
	assert_true(json_is_null(json_object_get(json_object_get(j, "error"), "param")));
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(431, "too big", "/api/chat", &b, &ct, NULL), CM_OK);
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "too big");
	json_decref(j);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_http_error(400, "x", NULL, &b, &ct, NULL), CM_OK);
	j = load(&b);
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
			j = load(&b);
			assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
					    t[i].type);
			json_decref(j);
		}
	}

	/* 403 for model management */
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_manage_forbidden(&b, "pull"), CM_OK);
	j = load(&b);
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "model management (pull)"));
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "operator"));
	json_decref(j);

	/* errors after streaming started */
	gw_api_error_set(&e, 500, NULL, NULL, "worker failed");
	ok(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	gw_api_stream_init(&s, &r, 1, 0);
	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_stream_error(&b, &s, &e), CM_OK);
	assert_int_equal(cm_buf_data(&b)[cm_buf_len(&b) - 1], '\n');
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "error")), "worker failed");
	json_decref(j);
	ok(GW_API_OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}", &r);
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

		ok((enum gw_api_kind)k, bodies[k], &r);
		gw_api_stream_init(&st, &r, 1, 0);
		for (int rep = 0; rep < 2; rep++) {
			const char *p;
			size_t n;

			cm_buf_reset(&b);
			assert_int_equal(gw_api_render_chunk(&b, &st, nasty, sizeof(nasty) - 1), CM_OK);
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
		assert_int_equal(gw_api_render_chunk(&b, &st, "\xff\xfe", 2), CM_OK);
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
	assert_int_equal(gw_api_render_chunk(&b, &st, nasty, sizeof(nasty) - 1), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 4);
	cm_buf_deinit(&b);
}

static void test_render_fixed(void **state)
{
	struct gw_api_model m[2] = {
		{ .name = "tiny:latest", .architecture = "llama", .family = "llama",
		  .parameter_size = "1.1B", .quantization = "Q4_K_M", .size_bytes = 123,
		  .vram_bytes = 456, .modified_wall_ns = 1700000000LL * 1000000000LL,
		  .context_len = 2048 },
		{ .name = "qwen", .architecture = "qwen2", .family = "qwen2",
		  .parameter_size = "0.5B", .quantization = "Q8_0", .context_len = 4096 },
	};
	struct cm_buf b;
	json_t *j, *e;

	(void)state;
	m[0].sha256[0] = 0xab;
	cm_buf_init(&b, 1 << 16);
	assert_int_equal(gw_api_render_version(&b), CM_OK);
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(j, "version")), GW_API_OLLAMA_COMPAT_VERSION);
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_tags(&b, m, 2), CM_OK);
	j = load(&b);
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
	j = load(&b);
	e = json_array_get(json_object_get(j, "models"), 0);
	assert_int_equal(json_integer_value(json_object_get(e, "size_vram")), 456);
	assert_true(json_is_string(json_object_get(e, "expires_at")));
	json_decref(j);

	cm_buf_reset(&b);
	assert_int_equal(gw_api_render_models(&b, m, 2), CM_OK);
	j = load(&b);
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
	j = load(&b);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "model_info"),
							      "general.architecture")), "qwen2");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "model_info"),
							    "qwen2.context_length")), 4096);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "details"), "family")), "qwen2");
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "capabilities"), 0)), "completion");
	json_decref(j);
	cm_buf_deinit(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generate_fields),
		cmocka_unit_test(test_generate_refusals),
		cmocka_unit_test(test_chat_ollama),
		cmocka_unit_test(test_openai_chat),
		cmocka_unit_test(test_openai_completions),
		cmocka_unit_test(test_body_checks),
		cmocka_unit_test(test_tenant_fields_ignored),
		cmocka_unit_test(test_show_and_limits),
		cmocka_unit_test(test_render_ollama),
		cmocka_unit_test(test_render_openai),
		cmocka_unit_test(test_render_errors),
		cmocka_unit_test(test_render_chunk_escaping),
		cmocka_unit_test(test_render_fixed),
	};

	return cmocka_run_group_tests_name("gateway_api", tests, setup, teardown);
}
