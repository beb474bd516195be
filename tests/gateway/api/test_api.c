/*
 * test_api.c - gateway/api/request.c, ollama.c, openai.c: every accepted
 * field and its mapping onto proto_submit, every refusal (status, message
 * naming the field, the API's error format).
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
#include "common/limits.h"
#include "gateway/api/api.h"

#include "tests/gateway/api/api_fixture.h"

/* ---- Ollama ------------------------------------------------------------ */

static void test_generate_fields(void **state)
{
	struct gw_api_request r;
	struct proto_submit s;
	uint32_t flags;

	(void)state;
	api_ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"tiny\",\"prompt\":\"Why?\",\"system\":\"Be brief.\","
	   "\"template\":\"\",\"keep_alive\":\"5m\",\"unknown_field\":[1,{\"a\":2}],"
	   "\"options\":{\"num_predict\":42,\"temperature\":0.25,\"top_k\":7,\"top_p\":0.5,"
	   "\"min_p\":0.05,\"repeat_penalty\":1.3,\"repeat_last_n\":-1,\"presence_penalty\":0.5,"
	   "\"frequency_penalty\":-0.5,\"seed\":1234,\"stop\":[\"\\n\\n\",\"END\"],"
	   "\"num_ctx\":999999,\"mirostat\":\"ignored\"}}",
	   &r);
	assert_int_equal(r.kind, GW_API_OLLAMA_GENERATE);
	assert_int_equal(r.style, GW_STYLE_OLLAMA);
	assert_true(api_streq(r.model, "tiny"));
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
	assert_true(api_streq(r.stop[0], "\n\n"));
	assert_true(api_streq(r.stop[1], "END"));
	/* not raw: the model's template renders system + user */
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(r.n_messages, 2);
	assert_true(api_streq(r.messages[0].role, "system"));
	assert_true(api_streq(r.messages[0].content, "Be brief."));
	assert_true(api_streq(r.messages[1].role, "user"));
	assert_true(api_streq(r.messages[1].content, "Why?"));

	gw_api_to_submit(&r, &s, &flags);
	assert_true(api_streq(s.model, "tiny"));
	assert_int_equal(s.max_tokens, 42);
	assert_int_equal(s.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(s.n_messages, 2);
	assert_int_equal(s.n_stop, 2);
	/* an explicit limit is lowered to what fits unless strict */
	assert_int_equal(flags, PROTO_SUBMIT_F_HAS_SEED | PROTO_SUBMIT_F_FIT);
	assert_int_equal(s.tenant_id.len, 0);
	assert_int_equal(s.key_id.len, 0);
	assert_int_equal(s.template_name.len, 0);
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		assert_int_equal(s.cache_salt[i], 0);

	/* defaults; raw -> TEXT with BOS, system not applied */
	api_ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"m\",\"prompt\":\"[INST] hi\",\"raw\":true,\"system\":\"x\","
	   "\"stream\":false,\"options\":{\"num_predict\":-1,\"seed\":-1}}", &r);
	assert_false(r.stream);
	assert_true(r.raw);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_TEXT);
	assert_true(api_streq(r.text, "[INST] hi"));
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_FIT);
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
	assert_true(api_streq(s.text, "[INST] hi"));

	/* a single stop string, -2 num_predict, null fields */
	api_ok(GW_API_OLLAMA_GENERATE,
	   "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"\",\"images\":null,"
	   "\"options\":{\"stop\":\"###\",\"num_predict\":-2,\"temperature\":null}}", &r);
	assert_int_equal(r.n_stop, 1);
	assert_true(api_streq(r.stop[0], "###"));
	assert_int_equal(r.n_messages, 1);
	assert_float_equal(r.sampling.temperature, 0.8, 1e-6);
}

static void test_generate_refusals(void **state)
{
	const enum gw_api_kind G = GW_API_OLLAMA_GENERATE;
	struct gw_api_request r;
	char big[8192];

	(void)state;
	api_bad(G, "{\"prompt\":\"p\"}", 400, "model: expected a non-empty model name, found nothing", "model");
	api_bad(G, "{\"model\":5,\"prompt\":\"p\"}", 400, "model: expected a non-empty model name, found 5", "model");
	api_bad(G, "{\"model\":\"\",\"prompt\":\"p\"}", 400, "found an empty string", "model");
	snprintf(big, sizeof(big), "{\"model\":\"%0300d\",\"prompt\":\"p\"}", 0);
	api_bad(G, big, 400, "model: expected a name of at most 256 bytes, found 300 bytes", "model");
	api_bad(G, "{\"model\":\"m\"}", 400, "prompt: expected a non-empty string, found nothing", "prompt");
	api_bad(G, "{\"model\":\"m\",\"prompt\":[\"a\"]}", 400, "prompt: expected a non-empty string, found an array", "prompt");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"system\":1}", 400, "system: expected a string, found 1", "system");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"template\":\"{{ .Prompt }}\"}", 400,
	    "template: custom prompt templates are not supported", "template");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"images\":[\"aGk=\"]}", 400,
	    "images: image inputs are not supported", "images");
	/* format: "json" is any JSON object, an object is a schema (kept as
	 * compact JSON in its key order), anything else is refused */
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"json\"}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_JSON_OBJECT);
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":{\"type\": \"object\", "
	       "\"properties\": {\"z\": {}, \"a\": {}}}}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_JSON_SCHEMA);
	assert_true(api_streq(r.constraint, "{\"type\":\"object\",\"properties\":{\"z\":{},\"a\":{}}}"));
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"yaml\"}", 400,
	    "format: expected \"json\" or a JSON Schema object, found a string", "format");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":[1]}", 400,
	    "format: expected \"json\" or a JSON Schema object, found an array", "format");
	/* grammar: a string, not together with format */
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"p\",\"grammar\":\"root ::= \\\"a\\\"\"}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_GRAMMAR);
	assert_true(api_streq(r.constraint, "root ::= \"a\""));
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"grammar\":7}", 400,
	    "grammar: expected a grammar text (a string), found 7", "grammar");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"format\":\"json\",\"grammar\":\"root ::= [a]\"}", 400,
	    "grammar: expected either grammar or format, found both", "grammar");
	/* logprobs (Ollama): a boolean and 0..20 alternatives */
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"p\",\"logprobs\":true,\"top_logprobs\":20}", &r);
	assert_true(r.logprobs);
	assert_int_equal(r.top_logprobs, 20);
	assert_true(r.submit_flags & PROTO_SUBMIT_F_LOGPROBS);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"logprobs\":true,\"top_logprobs\":21}", 400,
	    "top_logprobs: expected", "top_logprobs");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"top_logprobs\":2}", 400,
	    "top_logprobs: only allowed when logprobs is true", "top_logprobs");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"context\":[1,2,3]}", 400, "context:", "context");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"suffix\":\"x\"}", 400, "suffix:", "suffix");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"stream\":\"yes\"}", 400,
	    "stream: expected a boolean, found a string", "stream");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"raw\":1}", 400, "raw: expected a boolean, found 1", "raw");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":[]}", 400, "options: expected an object, found an array", "options");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":-5}}", 400,
	    "options.num_predict: expected an integer from -2 to 4096, found -5", "options.num_predict");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":0}}", 400,
	    "options.num_predict: expected an integer from 1 to the limit, or -1, found 0", "options.num_predict");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":1000000000}}", 400,
	    "found 1000000000", "options.num_predict");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":1.5}}", 400,
	    "options.num_predict: expected an integer from -2 to 4096, found 1.5", "options.num_predict");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":\"10\"}}", 400,
	    "found a string", "options.num_predict");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":-0.1}}", 400,
	    "options.temperature: expected a number from 0 to 2, found -0.1", "options.temperature");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":1e300}}", 400,
	    "options.temperature: expected a number from 0 to 2, found 1e+300", "options.temperature");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":true}}", 400,
	    "found true", "options.temperature");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"top_p\":1.5}}", 400,
	    "options.top_p: expected a number from 0 to 1, found 1.5", "options.top_p");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"top_k\":-1}}", 400,
	    "options.top_k: expected an integer from 0 to 100000, found -1", "options.top_k");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"min_p\":2}}", 400, "options.min_p", "options.min_p");
	/* issue 13, finding 9: 0 went to the worker and came back as a 400
	 * naming no field */
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"repeat_penalty\":0}}", 400,
	    "options.repeat_penalty: expected a value in (0, 10] (1 disables the penalty), found 0",
	    "options.repeat_penalty");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"repeat_penalty\":11}}", 400,
	    "options.repeat_penalty", "options.repeat_penalty");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"repeat_last_n\":-2}}", 400,
	    "options.repeat_last_n", "options.repeat_last_n");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"presence_penalty\":2.5}}", 400,
	    "options.presence_penalty: expected a number from -2 to 2", "options.presence_penalty");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"frequency_penalty\":-3}}", 400,
	    "options.frequency_penalty", "options.frequency_penalty");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"seed\":-2}}", 400,
	    "options.seed: expected an integer from -1 to", "options.seed");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":5}}", 400,
	    "options.stop: expected a string or an array of strings, found 5", "options.stop");
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"a\",7]}}", 400,
	    "options.stop[1]: expected a string, found 7", "options.stop[1]");
	/* an empty stop string stops nothing: ignored */
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"\",\"END\",\"\"]}}", &r);
	assert_int_equal(r.n_stop, 1);
	assert_true(api_streq(r.stop[0], "END"));
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":"
	       "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\",\"16\",\"17\"]}}",
	    400, "options.stop: expected at most 16 stop strings, found 17", "options.stop");
	{
		int n = snprintf(big, sizeof(big), "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"stop\":[\"");

		memset(big + n, 's', 257);
		snprintf(big + n + 257, sizeof(big) - (size_t)n - 257, "\"]}}");
		api_bad(G, big, 400, "options.stop[0]: expected at most 256 bytes, found 257 bytes", "options.stop");
	}
}

static void test_chat_ollama(void **state)
{
	const enum gw_api_kind C = GW_API_OLLAMA_CHAT;
	struct gw_api_request r;
	char *many;
	size_t off = 0;

	(void)state;
	api_ok(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
	      "{\"role\":\"user\",\"content\":\"u\",\"images\":[]},"
	      "{\"role\":\"assistant\",\"tool_calls\":[]},{\"role\":\"user\",\"content\":\"t\"}],"
	      "\"options\":{\"top_k\":0},\"keep_alive\":0}", &r);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_CHAT);
	assert_int_equal(r.n_messages, 4);
	assert_true(api_streq(r.messages[0].role, "system"));
	assert_true(api_streq(r.messages[2].role, "assistant"));
	assert_int_equal(r.messages[2].content.len, 0);
	assert_true(api_streq(r.messages[3].content, "t"));
	assert_int_equal(r.sampling.top_k, 0);
	assert_true(r.stream);
	/* a tool result: Ollama needs no id; OpenAI the id of an earlier call */
	api_ok(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"t\"}]}", &r);
	assert_true(api_streq(r.messages[0].role, "tool"));
	api_bad(GW_API_OPENAI_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"t\"}]}", 400,
	    "messages[0].tool_call_id: expected the id of the call this answers, found nothing",
	    "messages[0].tool_call_id");

	api_bad(C, "{\"model\":\"m\"}", 400, "messages: expected an array of messages, found nothing", "messages");
	api_bad(C, "{\"model\":\"m\",\"messages\":{}}", 400, "messages: expected an array of messages, found an object", "messages");
	api_bad(C, "{\"model\":\"m\",\"messages\":[]}", 400, "messages: expected at least one message, found an empty array", "messages");
	api_bad(C, "{\"model\":\"m\",\"messages\":[\"hi\"]}", 400, "messages[0]: expected an object", "messages[0]");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, user, assistant, tool, found another string", "messages[0].role");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, user, assistant, tool, found nothing", "messages[0].role");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400,
	    "messages[0].content: expected a string, found 5", "messages[0].content");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400,
	    "messages[0].content: expected a string, found nothing", "messages[0].content");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"images\":[\"aGk=\"]}]}", 400,
	    "messages[0].images: image inputs are not supported", "messages[0].images");
	api_bad(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{}]}", 400,
	    "tools[0].type: expected \"function\", found nothing", "tools[0].type");
	many = malloc(64 * 300);
	off = (size_t)sprintf(many, "{\"model\":\"m\",\"messages\":[");
	for (int i = 0; i < 257; i++)
		off += (size_t)sprintf(many + off, "%s{\"role\":\"user\",\"content\":\"x\"}", i ? "," : "");
	sprintf(many + off, "]}");
	api_bad(C, many, 400, "messages: expected at most 256 messages, found 257", "messages");
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
	api_ok(O, "{\"model\":\"gpt-x\",\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},"
	      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
	      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}],"
	      "\"max_tokens\":100,\"temperature\":0,\"top_p\":0.1,\"n\":1,\"stop\":\"\\n\","
	      "\"seed\":-7,\"presence_penalty\":1,\"frequency_penalty\":-2,\"stream\":true,"
	      "\"stream_options\":{\"include_usage\":true},\"user\":\"u-1\",\"logprobs\":false,"
	      "\"response_format\":{\"type\":\"text\"},\"tools\":[]}", &r);
	assert_int_equal(r.style, GW_STYLE_OPENAI);
	assert_int_equal(r.n_messages, 3);
	assert_true(api_streq(r.messages[0].role, "system"));
	assert_true(api_streq(r.messages[1].content, "a\nb"));
	assert_true(api_streq(r.messages[2].role, "assistant"));
	assert_int_equal(r.messages[2].content.len, 0);
	assert_int_equal(r.max_tokens, 100);
	assert_float_equal(r.sampling.temperature, 0, 0);
	assert_float_equal(r.sampling.top_p, 0.1, 1e-6);
	assert_int_equal(r.n_stop, 1);
	assert_true(api_streq(r.stop[0], "\n"));
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
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_completion_tokens\":9}", &r);
	assert_false(r.stream);
	assert_false(r.include_usage);
	assert_int_equal(r.max_tokens, 9);
	assert_float_equal(r.sampling.temperature, 1.0, 0);
	assert_float_equal(r.sampling.top_p, 1.0, 0);
	assert_int_equal(r.sampling.top_k, 0);
	assert_float_equal(r.sampling.repeat_penalty, 1.0, 0);
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_FIT);
	assert_string_equal(gw_api_content_type(&r), GW_API_CT_JSON);
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
	assert_int_equal(r.max_tokens, L.max_output_tokens);
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_FIT);
	/* strict: an explicit limit is the client's to keep (the worker refuses
	 * it when it does not fit); an omitted one still fits */
	L.max_tokens_strict = 1;
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9}", &r);
	assert_int_equal(r.submit_flags & PROTO_SUBMIT_F_FIT, 0);
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_FIT);
	L.max_tokens_strict = 0;

	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}", &r);
	assert_int_equal(r.n, 2);
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":8,\"stream\":true}", &r);
	assert_int_equal(r.n, 8);
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
	assert_int_equal(r.n, 1);
	/* limits.choices (8 by default) */
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":9}", 400,
	    "n: expected an integer from 1 to 8, found 9", "n");
	L.choices = 2;
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":3}", 400,
	    "n: expected an integer from 1 to 2, found 3", "n");
	L.choices = 8;
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", 400, "found 0", "n");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":\"1\"}", 400, "found a string", "n");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1}", 400,
	    "max_tokens: expected an integer from 1 to 4096, found -1", "max_tokens");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":4097}", 400,
	    "max_tokens: expected an integer from 1 to 4096, found 4097", "max_tokens");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":0}", 400,
	    "max_completion_tokens: expected an integer from 1 to 4096, found 0", "max_completion_tokens");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,\"max_completion_tokens\":6}", 400,
	    "max_completion_tokens: expected the same value as max_tokens", "max_completion_tokens");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":2.5}", 400,
	    "temperature: expected a number from 0 to 2, found 2.5", "temperature");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_p\":-0.5}", 400,
	    "top_p: expected a number from 0 to 1, found -0.5", "top_p");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"presence_penalty\":3}", 400,
	    "presence_penalty", "presence_penalty");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", 400,
	    "seed: expected an integer", "seed");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400,
	    "stream: expected a boolean, found 1", "stream");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":true}}", 400,
	    "stream_options: only allowed when stream is true", "stream_options");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":{\"include_usage\":\"y\"}}", 400,
	    "stream_options.include_usage: expected a boolean", "stream_options.include_usage");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream_options\":3}", 400,
	    "stream_options: expected an object, found 3", "stream_options");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}", 400,
	    "messages[0].content[0].type: expected \"text\", found another part type", "messages[0].content[0].type");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", 400,
	    "messages[0].content[0].text: expected a string, found nothing", "messages[0].content[0].text");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[7]}]}", 400,
	    "messages[0].content[0]: expected an object", "messages[0].content[0]");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":{}}]}", 400,
	    "messages[0].content: expected a string or an array of text parts, found an object", "messages[0].content");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400,
	    "messages[0].content: expected a string or an array of text parts, found nothing", "messages[0].content");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400,
	    "messages[0].role: expected one of system, developer, user, assistant, tool, found another string", "messages[0].role");
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,"
	       "\"top_logprobs\":3}", &r);
	assert_true(r.logprobs);
	assert_int_equal(r.top_logprobs, 3);
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", 400,
	    "logprobs: expected a boolean, found 1", "logprobs");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{\"type\":\"function\"}]}", 400,
	    "tools[0].function: expected an object with name and parameters, found nothing", "tools[0].function");
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_object\"}}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_JSON_OBJECT);
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
	       "{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\",\"strict\":true,\"schema\":{\"type\":\"integer\"}}}}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_JSON_SCHEMA);
	assert_true(api_streq(r.constraint, "{\"type\":\"integer\"}"));
	assert_string_equal(r.constraint_param, "response_format.json_schema.schema");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"xml\"}}", 400,
	    "response_format.type: expected one of \"text\", \"json_object\", \"json_schema\", found a string", "response_format.type");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":\"json\"}", 400,
	    "response_format: expected an object", "response_format");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":{\"type\":\"json_schema\"}}", 400,
	    "response_format.json_schema: expected an object", "response_format.json_schema");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
	    "{\"type\":\"json_schema\",\"json_schema\":{\"schema\":[]}}}", 400,
	    "response_format.json_schema.schema: expected a JSON Schema (an object), found an array", "response_format.json_schema.schema");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
	    "{\"type\":\"json_schema\",\"json_schema\":{\"strict\":\"yes\",\"schema\":{}}}}", 400,
	    "response_format.json_schema.strict: expected a boolean", "response_format.json_schema.strict");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logit_bias\":{\"1\":5}}", 400,
	    "logit_bias", "logit_bias");
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":\"\"}", &r);
	assert_int_equal(r.n_stop, 0);
	api_bad(O, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 400, "model: expected a non-empty model name", "model");
}

/* ---- tools ----------------------------------------------------------------- */

#define TOOL_F "{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\"," \
	"\"parameters\":{\"type\":\"object\"},\"strict\":true}}"
#define TOOL_G "{\"type\":\"function\",\"function\":{\"name\":\"g-2\"}}"
#define USER "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"

/* tools, tool_choice, parallel_tool_calls, the history's calls and
 * results, thinking: what reaches SUBMIT, and each refusal's field. */
static void test_tools(void **state)
{
	const enum gw_api_kind O = GW_API_OPENAI_CHAT, C = GW_API_OLLAMA_CHAT;
	struct gw_api_request r;
	struct proto_submit sb;
	uint32_t flags;

	(void)state;
	api_ok(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "," TOOL_G "]}", &r);
	/* written for the worker: strict dropped, key order kept */
	assert_true(api_streq(r.tools, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":"
				       "\"d\",\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\","
				       "\"function\":{\"name\":\"g-2\"}}]"));
	assert_int_equal(r.tool_choice, PROTO_TOOLS_AUTO);
	assert_true(r.parallel_tool_calls);
	api_ok(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "],\"tool_choice\":{\"type\":\"function\","
		  "\"function\":{\"name\":\"f\"}},\"parallel_tool_calls\":false}", &r);
	assert_int_equal(r.tool_choice, PROTO_TOOLS_NAMED);
	assert_true(api_streq(r.tool_name, "f"));
	gw_api_to_submit(&r, &sb, &flags);
	assert_int_equal(sb.tool_choice, PROTO_TOOLS_NAMED);
	assert_true(api_streq(sb.tool_name, "f"));
	assert_int_equal(sb.parallel_tool_calls, 0);
	assert_int_equal(sb.tools.len, r.tools.len);
	api_ok(O, "{\"model\":\"m\"," USER ",\"tools\":[]}", &r);
	assert_int_equal(r.tool_choice, PROTO_TOOLS_NONE);
	assert_int_equal(r.tools.len, 0);
	api_ok(C, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_G "],\"tool_choice\":\"required\",\"think\":false}", &r);
	assert_int_equal(r.tool_choice, PROTO_TOOLS_REQUIRED);
	assert_int_equal(r.think, PROTO_THINK_OFF);
	api_ok(O, "{\"model\":\"m\"," USER ",\"chat_template_kwargs\":{\"enable_thinking\":true}}", &r);
	assert_int_equal(r.think, PROTO_THINK_ON);
	/* the history: calls normalized, results tied to them */
	api_ok(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\","
		  "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":"
		  "\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
		  "\"content\":\"7\"}]}", &r);
	assert_true(api_streq(r.messages[1].tool_calls, "[{\"id\":\"c1\",\"name\":\"f\",\"arguments\":{\"a\":1}}]"));
	assert_true(api_streq(r.messages[2].tool_call_id, "c1"));
	api_ok(C, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
		  "{\"name\":\"f\",\"arguments\":{\"b\":[2]}}}]},{\"role\":\"tool\",\"content\":\"r\"}]}", &r);
	assert_true(api_streq(r.messages[0].tool_calls, "[{\"id\":\"\",\"name\":\"f\",\"arguments\":{\"b\":[2]}}]"));
	assert_int_equal(r.messages[1].tool_call_id.len, 0);

	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}",
		400, "tools[0].function.name: expected a name of 1 to 64", "tools[0].function.name");
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "," TOOL_F "]}", 400,
		"tools[1].function.name: expected a name no other tool has, found the name of tools[0]",
		"tools[1].function.name");
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[{\"type\":\"retrieval\"}]}", 400,
		"tools[0].type: expected \"function\"", "tools[0].type");
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "],\"tool_choice\":\"always\"}", 400,
		"tool_choice: expected \"none\", \"auto\", \"required\"", "tool_choice");
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "],\"tool_choice\":\"required\","
		  "\"response_format\":{\"type\":\"json_object\"}}", 400, "cannot both constrain", "tool_choice");
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "],\"parallel_tool_calls\":1}", 400,
		"parallel_tool_calls: expected a boolean", "parallel_tool_calls");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", 400,
		"messages[0].tool_calls: expected no tool calls outside assistant messages", "messages[0].tool_calls");
	api_bad(O, "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
		  "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}", 400,
		"messages[0].tool_calls[0].id: expected the call's id", "messages[0].tool_calls[0].id");
	api_bad(O, "{\"model\":\"m\"," USER ",\"function_call\":\"auto\"}", 400,
		"function_call: function_call is OpenAI's deprecated form of tool_choice", "function_call");
	api_bad(GW_API_OLLAMA_GENERATE, "{\"model\":\"m\",\"prompt\":\"x\",\"tools\":[" TOOL_F "]}", 400,
		"tools: tools need a chat", "tools");
	api_bad(C, "{\"model\":\"m\"," USER ",\"think\":\"yes\"}", 400, "think: expected true or false", "think");
	/* the limits */
	L.tools = 1;
	api_bad(O, "{\"model\":\"m\"," USER ",\"tools\":[" TOOL_F "," TOOL_G "]}", 400,
		"tools: expected at most 1 tools (limits.tools), found 2", "tools");
	L.tools = CM_LIM_TOOLS;
	L.tools_bytes = 1024;
	{
		char body[4096];

		snprintf(body, sizeof(body), "{\"model\":\"m\"," USER ",\"tools\":[{\"type\":\"function\","
			 "\"function\":{\"name\":\"f\",\"description\":\"%01100d\"}}]}", 0);
		api_bad(O, body, 400, "(limits.tools_bytes)", "tools");
	}
	L.tools_bytes = CM_LIM_TOOLS_BYTES;
}

static void test_openai_completions(void **state)
{
	const enum gw_api_kind P = GW_API_OPENAI_COMPLETIONS;
	struct gw_api_request r;

	(void)state;
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"Once\",\"best_of\":1,\"echo\":false,\"suffix\":null}", &r);
	assert_int_equal(r.prompt_kind, PROTO_PROMPT_TEXT);
	assert_true(api_streq(r.text, "Once"));
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_FIT);
	assert_int_equal(r.max_tokens, 16); /* OpenAI's default for completions */
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"Once\",\"max_tokens\":300,\"seed\":5}", &r);
	assert_int_equal(r.max_tokens, 300);
	assert_int_equal(r.submit_flags, PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_HAS_SEED | PROTO_SUBMIT_F_FIT);
	/* the quota estimate: ~4 bytes a token plus max_tokens, at most the
	 * context when the worker fits the limit to it */
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"0123456789abcdef\",\"max_tokens\":300}", &r);
	assert_int_equal(gw_api_token_estimate(&r, 0), 5 + 300);
	assert_int_equal(gw_api_token_estimate(&r, 256), 256);
	assert_int_equal(gw_api_token_estimate(&r, 4), 5 + 300); /* prompt over it: as is */
	r.submit_flags &= ~PROTO_SUBMIT_F_FIT;
	assert_int_equal(gw_api_token_estimate(&r, 256), 5 + 300);
	/* n choices: the prompt once, n completions (each within the context) */
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"0123456789abcdef\",\"max_tokens\":300,\"n\":3}", &r);
	assert_int_equal(r.n, 3);
	assert_int_equal(gw_api_token_estimate(&r, 0), 5 + 3 * 300);
	assert_int_equal(gw_api_token_estimate(&r, 256), 256 + 2 * (256 - 5));
	/* a one-string array (LangChain) is that string; longer ones are refused */
	api_ok(P, "{\"model\":\"m\",\"prompt\":[\"Once\"]}", &r);
	assert_true(api_streq(r.text, "Once"));
	api_bad(P, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 400,
	    "prompt: expected a string or an array of one string, found an array of 2 elements", "prompt");
	api_bad(P, "{\"model\":\"m\",\"prompt\":[1]}", 400, "found an array of 1 elements or of token ids", "prompt");
	api_bad(P, "{\"model\":\"m\",\"prompt\":[\"\"]}", 400, "prompt: expected a non-empty string", "prompt");
	api_bad(P, "{\"model\":\"m\"}", 400, "prompt: expected a non-empty string, found nothing", "prompt");
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"best_of\":2}", 400, "best_of: expected 1 (best_of ranks", "best_of");
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"best_of\":3,\"n\":3}", 400, "best_of: expected 1", "best_of");
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", 400, "echo:", "echo");
	/* legacy logprobs: the number of alternatives, 0..5 */
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":3}", &r);
	assert_true(r.logprobs);
	assert_int_equal(r.top_logprobs, 3);
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":6}", 400, "logprobs: expected", "logprobs");
	api_ok(P, "{\"model\":\"m\",\"prompt\":\"x\",\"response_format\":{\"type\":\"json_object\"}}", &r);
	assert_int_equal(r.constraint_kind, PROTO_CONSTRAINT_JSON_OBJECT);
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":300}", 400, "n: expected an integer from 1 to 8", "n");
	api_bad(P, "{\"model\":\"m\",\"prompt\":\"x\",\"max_completion_tokens\":3,\"max_tokens\":99999}", 400, "max_tokens", "max_tokens");
}

/* ---- body-level checks -------------------------------------------------- */

static void test_body_checks(void **state)
{
	const enum gw_api_kind G = GW_API_OLLAMA_GENERATE;
	struct gw_api_request r;
	struct gw_api_error e;
	char *deep;

	(void)state;
	api_bad(G, "", 400, "body: expected a JSON object, found an empty body", NULL);
	api_bad(G, "{\"model\":", 400, "body: expected valid JSON, found an error at line 1", NULL);
	api_bad(G, "[1,2]", 400, "body: expected a JSON object, found an array", NULL);
	api_bad(G, "\"str\"", 400, "found a scalar", NULL);
	api_bad(G, "{\"model\":\"a\",\"model\":\"b\",\"prompt\":\"p\"}", 400, "duplicate", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"\xff\xfe\"}", 400, "body: expected valid UTF-8", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"\xc0\xaf\"}", 400, "body: expected valid UTF-8", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"a\\u0000b\"}", 400, "found \\u0000", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"num_predict\":99999999999999999999999}}", 400,
	    "body: expected valid JSON", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\",\"options\":{\"temperature\":1e999}}", 400,
	    "body: expected valid JSON", NULL);
	api_bad(G, "{\"model\":\"m\",\"prompt\":\"p\"} trailing", 400, "body: expected valid JSON", NULL);
	/* a raw NUL byte: measured length includes it */
	{
		static const char nul[] = "{\"model\":\"m\",\"prompt\":\"a\0b\"}";

		cm_arena_reset(A);
		assert_int_equal(gw_api_parse(G, nul, sizeof(nul) - 1, &L, A, &r, &e), CM_EINVAL);
		assert_int_equal(e.status, 400);
		assert_non_null(strstr(e.message, "found a NUL byte"));
	}
	/* an escaped backslash followed by u0000 is plain text, not a NUL */
	api_ok(G, "{\"model\":\"m\",\"prompt\":\"a\\\\u0000b\"}", &r);
	assert_true(api_streq(r.messages[0].content, "a\\u0000b"));
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
		api_ok(G, deep, &r);
		n = (size_t)sprintf(deep, "{\"model\":\"m\",\"prompt\":\"p\",\"x\":");
		for (int i = 0; i < 32; i++)
			deep[n++] = '[';
		for (int i = 0; i < 32; i++)
			deep[n++] = ']';
		sprintf(deep + n, "}");
		api_bad(G, deep, 400, "body: expected JSON nested at most 32 levels deep", NULL);
		/* a very deep document is refused by the scan, not by recursion */
		n = (size_t)sprintf(deep, "{\"x\":");
		for (int i = 0; i < 200000; i++)
			deep[n++] = '[';
		deep[n] = '\0';
		api_bad(G, deep, 400, "nested at most 32 levels", NULL);
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
	api_ok(GW_API_OPENAI_CHAT, plain, &a);
	assert_int_equal(gw_api_parse(GW_API_OPENAI_CHAT, spiked, sizeof(spiked) - 1, &L, a2, &b, &e), CM_OK);
	gw_api_to_submit(&a, &sa, &fa);
	gw_api_to_submit(&b, &sb, &fb);
	assert_int_equal(fa, fb);
	assert_memory_equal(&sa.sampling, &sb.sampling, sizeof(sa.sampling));
	assert_memory_equal(sa.cache_salt, sb.cache_salt, PROTO_DIGEST_LEN);
	assert_int_equal(sb.tenant_id.len, 0);
	assert_int_equal(sb.key_id.len, 0);
	assert_int_equal(sa.n_messages, sb.n_messages);
	assert_true(api_streq(sb.messages[0].content, "hi"));
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
	assert_true(api_streq(m, "llama3"));
	assert_int_equal(gw_api_parse_show("{\"name\":\"old\"}", 14, &L, A, &m, &e), CM_OK);
	assert_true(api_streq(m, "old"));
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
	api_bad(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]}",
	    400, "expected at most 1 messages, found 2", "messages");
	L.json_depth = 2;
	api_bad(GW_API_OLLAMA_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}",
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generate_fields),
		cmocka_unit_test(test_generate_refusals),
		cmocka_unit_test(test_chat_ollama),
		cmocka_unit_test(test_openai_chat),
		cmocka_unit_test(test_openai_completions),
		cmocka_unit_test(test_tools),
		cmocka_unit_test(test_body_checks),
		cmocka_unit_test(test_tenant_fields_ignored),
		cmocka_unit_test(test_show_and_limits),
	};

	return cmocka_run_group_tests_name("gateway_api", tests, api_setup, api_teardown);
}
