/*
 * test_worker.c - a real sluice-worker process on a generated model,
 * driven over its Unix socket with proto/ frames.
 *
 *  - 32 concurrent requests of different lengths each produce exactly the
 *    tokens and final-logits digest of their solo run; afterwards every KV
 *    block is free (STATS);
 *  - the same long prefix twice from one tenant: the second reports the
 *    cached tokens of the prefix's full blocks; another tenant gets none;
 *  - more concurrent long requests than the KV cache holds: all complete
 *    with their solo output (preemption);
 *  - CANCEL mid-stream and a dropped connection free their blocks;
 *  - constrained requests (JSON Schema, JSON object, grammar) mixed into
 *    that batch change nothing of anyone's tokens; their text parses and
 *    keeps the schema, greedy and sampled; bad schemas and grammars get
 *    ERROR constraint naming what is wrong;
 *  - a thinking model: budgets, a schema and a forced call after the
 *    thinking, thinking off, in one batch: each request's solo output;
 *  - mixtures of experts (Mixtral's and qwen3moe's routing): 65 requests
 *    each alone, then together: the same tokens and final-logits digests;
 *  - bad input (too long, bad parameters, unknown template, malformed
 *    frame, disallowed uid) gets its error and the worker keeps serving.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/integration/harness.h"
#include "tests/integration/pclient.h"

#define TIMEOUT_MS 120000

static struct h_proc worker;
static char sock[512];

/* A connection to the worker on `path`, its HELLO read. */
static struct pc_conn *connect_at(const char *path)
{
	struct pc_conn *c = pc_connect(path, TIMEOUT_MS);
	struct pc_event ev;

	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	return c;
}

static struct pc_conn *connect_worker(void)
{
	return connect_at(sock);
}

/* Runs the given requests concurrently on one connection until all end. */
static void run_requests(struct pc_conn *c, struct proto_msg *msgs, uint32_t n,
			 struct pc_outcome *out)
{
	assert_int_equal(pc_run(c, msgs, n, out, TIMEOUT_MS), 0);
}

/* Waits for a STATS frame satisfying kv_blocks_used == want_used. */
static struct proto_stats wait_stats_used(struct pc_conn *c, uint32_t want_used)
{
	struct pc_event ev;

	for (int i = 0; i < 100; i++) {
		assert_int_equal(pc_next(c, &ev, 10000), 1);
		if (ev.type == PROTO_STATS && ev.stats.kv_blocks_used == want_used)
			return ev.stats;
	}
	fail_msg("kv_blocks_used never reached %u", want_used);
	return ev.stats;
}

static char prompts[40][600];

#define SCHEMA_PERSON "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"," \
	"\"maxLength\":12},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":99}}," \
	"\"required\":[\"name\",\"age\"],\"additionalProperties\":false}"
#define GRAMMAR_WORDS "root ::= word (\" \" word)*\nword ::= [a-z]{1,8}\n"

static void make_prompts(void)
{
	static const char *words[] = { "river", "stone", "lamp", "north", "quiet", "table",
				       "green", "seven", "window", "garden", "copper", "thread" };

	for (int i = 0; i < 40; i++) {
		size_t len = 0;

		for (int w = 0; w < 3 + i * 2 && len < 500; w++)
			len += (size_t)snprintf(prompts[i] + len, sizeof(prompts[i]) - len, "%s%s",
						w ? " " : "", words[(i * 7 + w * 5) % 12]);
	}
}

static void test_concurrent_equals_solo(void **state)
{
	enum { N = 32 };
	static struct proto_msg msgs[N];
	static struct proto_submit sbs[N];
	static struct pc_outcome solo[N], conc[N];
	struct pc_conn *c = connect_worker();

	(void)state;
	for (uint32_t i = 0; i < N; i++) {
		pc_submit_init(&msgs[i], &sbs[i], 1000 + i, prompts[i], 8 + i % 9, 1);
		msgs[i].flags |= PROTO_SUBMIT_F_DIGEST | PROTO_SUBMIT_F_IGNORE_EOS;
		/* every third is constrained, every fourth samples (seeded):
		 * the mask is the sequence's own, so neighbours change nothing */
		if (i % 3 == 1) {
			msgs[i].u.submit.constraint_kind = i % 2 ? PROTO_CONSTRAINT_JSON_SCHEMA
								 : PROTO_CONSTRAINT_GRAMMAR;
			msgs[i].u.submit.constraint.ptr = i % 2 ? SCHEMA_PERSON : GRAMMAR_WORDS;
			msgs[i].u.submit.constraint.len =
				(uint32_t)strlen(msgs[i].u.submit.constraint.ptr);
		}
		if (i % 4 == 2) {
			msgs[i].u.submit.sampling.temperature = 0.9f;
			msgs[i].u.submit.sampling.seed = 7 + i;
		}
	}
	for (uint32_t i = 0; i < N; i++) {
		run_requests(c, &msgs[i], 1, &solo[i]);
		assert_int_equal(solo[i].err, 0);
	}
	for (uint32_t i = 0; i < N; i++)
		msgs[i].request_id = 2000 + i;
	run_requests(c, msgs, N, conc);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(conc[i].err, 0);
		assert_int_equal(conc[i].done.finish, PROTO_FINISH_LENGTH);
		assert_int_equal(conc[i].n_ids, solo[i].n_ids);
		assert_int_equal(conc[i].done.gen_tokens, 8 + i % 9);
		assert_memory_equal(conc[i].ids, solo[i].ids, solo[i].n_ids * sizeof(uint32_t));
		assert_memory_equal(conc[i].done.logits_digest, solo[i].done.logits_digest, 32);
	}
	wait_stats_used(c, 0);
	pc_close(c);
}

static void test_prefix_cache_isolated_by_tenant(void **state)
{
	struct proto_msg m;
	struct proto_submit sb;
	struct pc_outcome a, b, other;
	struct pc_conn *c = connect_worker();
	const char *p = prompts[39];

	(void)state;
	pc_submit_init(&m, &sb, 3000, p, 4, 0x11);
	run_requests(c, &m, 1, &a);
	m.request_id = 3001;
	run_requests(c, &m, 1, &b);
	pc_submit_init(&m, &sb, 3002, p, 4, 0x22);
	run_requests(c, &m, 1, &other);
	assert_true(a.done.prompt_tokens > 32);
	assert_int_equal(b.done.cached_tokens, (b.done.prompt_tokens - 1) / 16 * 16);
	assert_true(b.done.cached_tokens >= 16);
	assert_int_equal(other.done.cached_tokens, 0);
	assert_memory_equal(a.ids, b.ids, a.n_ids * sizeof(uint32_t));
	assert_memory_equal(a.ids, other.ids, a.n_ids * sizeof(uint32_t));
	pc_close(c);
}

static void test_cancel_and_drop_free_blocks(void **state)
{
	struct proto_msg m, cm;
	struct proto_submit sb;
	struct pc_conn *c = connect_worker(), *d;
	struct pc_event ev;
	int got_token = 0, got_done = 0;

	(void)state;
	pc_submit_init(&m, &sb, 4000, prompts[4], 300, 3);
	m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	assert_int_equal(pc_send(c, &m), 0);
	while (!got_token) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		assert_int_not_equal(ev.type, PROTO_ERROR);
		got_token = ev.type == PROTO_TOKEN;
	}
	memset(&cm, 0, sizeof(cm));
	cm.type = PROTO_CANCEL;
	cm.request_id = 4000;
	assert_int_equal(pc_send(c, &cm), 0);
	while (!got_done) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		if (ev.type == PROTO_DONE) {
			got_done = 1;
			assert_int_equal(ev.done.finish, PROTO_FINISH_CANCELLED);
			assert_true(ev.done.gen_tokens < 300);
		}
	}
	wait_stats_used(c, 0);

	/* a gateway that vanishes mid-stream: its blocks are freed too */
	d = connect_worker();
	m.request_id = 4001;
	assert_int_equal(pc_send(d, &m), 0);
	got_token = 0;
	while (!got_token) {
		assert_int_equal(pc_next(d, &ev, TIMEOUT_MS), 1);
		assert_int_not_equal(ev.type, PROTO_ERROR);
		got_token = ev.type == PROTO_TOKEN;
	}
	pc_close(d);
	wait_stats_used(c, 0);
	pc_close(c);
}

static void test_bad_requests(void **state)
{
	struct proto_msg m;
	struct proto_submit sb;
	struct pc_outcome o;
	struct pc_conn *c = connect_worker(), *bad;
	struct pc_event ev;
	static char huge[20000];

	(void)state;
	/* prompt + max_tokens over the context */
	pc_submit_init(&m, &sb, 5000, prompts[1], 100000, 1);
	run_requests(c, &m, 1, &o);
	assert_int_equal(o.err, PROTO_E_TOO_LONG);
	memset(huge, 'a', sizeof(huge) - 1);
	for (size_t i = 0; i < sizeof(huge) - 1; i += 2)
		huge[i] = ' ';
	pc_submit_init(&m, &sb, 5001, huge, 4, 1);
	run_requests(c, &m, 1, &o);
	assert_int_equal(o.err, PROTO_E_TOO_LONG);
	/* invalid sampling parameter */
	pc_submit_init(&m, &sb, 5002, prompts[1], 4, 1);
	m.u.submit.sampling.top_p = 7;
	run_requests(c, &m, 1, &o);
	assert_int_equal(o.err, PROTO_E_BAD_REQUEST);
	/* unknown chat template */
	{
		struct proto_message msg = { { "user", 4 }, { "hi", 2 }, { NULL, 0 }, { NULL, 0 } };

		pc_submit_init(&m, &sb, 5003, "", 4, 1);
		m.u.submit.prompt_kind = PROTO_PROMPT_CHAT;
		m.u.submit.n_messages = 1;
		m.u.submit.messages = &msg;
		m.u.submit.template_name.ptr = "no-such-template";
		m.u.submit.template_name.len = 16;
		run_requests(c, &m, 1, &o);
		assert_int_equal(o.err, PROTO_E_NO_TEMPLATE);
	}
	/* a malformed frame closes that connection only */
	bad = connect_worker();
	assert_int_equal(pc_send_raw(bad, "GARBAGE-GARBAGE-GARBAGE-GARBAGE", 31), 0);
	for (;;) {
		int r = pc_next(bad, &ev, TIMEOUT_MS);

		assert_true(r != 0);
		if (r < 0)
			break;
		if (ev.type == PROTO_ERROR)
			assert_int_equal(ev.err_code, PROTO_E_PROTOCOL);
	}
	pc_close(bad);
	/* the first connection still works */
	pc_submit_init(&m, &sb, 5004, prompts[2], 3, 1);
	run_requests(c, &m, 1, &o);
	assert_int_equal(o.err, 0);
	assert_int_equal(o.done.gen_tokens, 3);
	pc_close(c);
}

/* The constrained text of one request: it parses, and keeps the schema. */
static void assert_person(const struct pc_outcome *o)
{
	json_error_t je;
	json_t *j, *name, *age;

	assert_int_equal(o->err, 0);
	assert_int_equal(o->done.finish, PROTO_FINISH_STOP);
	j = json_loadb(o->text, o->text_len, 0, &je);
	if (!j)
		fail_msg("not JSON (%s): %.*s", je.text, (int)o->text_len, o->text);
	assert_true(json_is_object(j));
	assert_int_equal(json_object_size(j), 2);
	name = json_object_get(j, "name");
	age = json_object_get(j, "age");
	assert_true(json_is_string(name));
	assert_true(json_string_length(name) <= 12 * 4);
	assert_true(json_is_integer(age));
	assert_true(json_integer_value(age) >= 0 && json_integer_value(age) <= 99);
	json_decref(j);
}

static void submit_constraint(struct proto_msg *m, struct proto_submit *sb, uint64_t id,
			      uint8_t kind, const char *text, uint32_t max_tokens)
{
	pc_submit_init(m, sb, id, prompts[3], max_tokens, 1);
	m->u.submit.constraint_kind = kind;
	m->u.submit.constraint.ptr = text;
	m->u.submit.constraint.len = (uint32_t)strlen(text);
}

static void test_constrained_output(void **state)
{
	static const char *bad[][2] = {
		{ "{\"type\":", "not JSON" },
		{ "{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{\"maxLength\":3}}}}",
		  "/properties/a" },
		{ "{\"type\":\"integer\",\"minimum\":5,\"maximum\":1}", "unsatisfiable" },
		{ "[1,2]", "schema" },
	};
	struct proto_msg m;
	struct proto_submit sb;
	struct pc_outcome o;
	struct pc_conn *c = connect_worker();
	int stopped = 0;

	(void)state;
	/* greedy and sampled: text that parses and keeps the schema */
	submit_constraint(&m, &sb, 7000, PROTO_CONSTRAINT_JSON_SCHEMA, SCHEMA_PERSON, 400);
	run_requests(c, &m, 1, &o);
	assert_person(&o);
	assert_true(o.done.constraint_ns >= 0);
	for (uint32_t seed = 0; seed < 4; seed++) {
		submit_constraint(&m, &sb, 7001 + seed, PROTO_CONSTRAINT_JSON_SCHEMA, SCHEMA_PERSON,
				  400);
		m.u.submit.sampling.temperature = 1.0f;
		m.u.submit.sampling.seed = seed;
		run_requests(c, &m, 1, &o);
		assert_person(&o);
	}
	/* any JSON object: when it ends it parses */
	for (uint32_t seed = 0; seed < 4; seed++) {
		json_t *j;

		submit_constraint(&m, &sb, 7010 + seed, PROTO_CONSTRAINT_JSON_OBJECT, "", 300);
		m.u.submit.sampling.temperature = 0.7f;
		m.u.submit.sampling.seed = seed;
		run_requests(c, &m, 1, &o);
		assert_int_equal(o.err, 0);
		if (o.done.finish != PROTO_FINISH_STOP)
			continue;
		stopped++;
		j = json_loadb(o.text, o.text_len, 0, NULL);
		if (!j || !json_is_object(j))
			fail_msg("not a JSON object: %.*s", (int)o.text_len, o.text);
		json_decref(j);
	}
	assert_true(stopped > 0);
	/* a grammar: lower-case words of 1 to 8 letters, one space apart */
	submit_constraint(&m, &sb, 7020, PROTO_CONSTRAINT_GRAMMAR, GRAMMAR_WORDS, 40);
	m.u.submit.sampling.temperature = 1.0f;
	run_requests(c, &m, 1, &o);
	assert_int_equal(o.err, 0);
	assert_true(o.text_len > 0);
	for (size_t i = 0, run = 0; i < o.text_len; i++) {
		if (o.text[i] == ' ') {
			assert_true(run > 0);
			run = 0;
			continue;
		}
		assert_true(o.text[i] >= 'a' && o.text[i] <= 'z');
		assert_true(++run <= 8);
	}
	/* refusals: ERROR constraint before any token, saying what is wrong */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pc_event ev;

		submit_constraint(&m, &sb, 7030 + i, PROTO_CONSTRAINT_JSON_SCHEMA, bad[i][0], 10);
		assert_int_equal(pc_send(c, &m), 0);
		do
			assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		while (ev.type == PROTO_STATS);
		assert_int_equal(ev.type, PROTO_ERROR);
		assert_int_equal(ev.err_code, PROTO_E_CONSTRAINT);
		if (!strstr(ev.err_msg, bad[i][1]))
			fail_msg("schema %zu: expected '%s' in \"%s\"", i, bad[i][1], ev.err_msg);
	}
	{
		struct pc_event ev;

		submit_constraint(&m, &sb, 7040, PROTO_CONSTRAINT_GRAMMAR, "root ::= \"a\" |\nfoo ::= [", 10);
		assert_int_equal(pc_send(c, &m), 0);
		do
			assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		while (ev.type == PROTO_STATS);
		assert_int_equal(ev.err_code, PROTO_E_CONSTRAINT);
		assert_non_null(strstr(ev.err_msg, "line 2"));
	}
	/* and the worker serves on */
	submit_constraint(&m, &sb, 7050, PROTO_CONSTRAINT_JSON_SCHEMA, SCHEMA_PERSON, 400);
	run_requests(c, &m, 1, &o);
	assert_person(&o);
	wait_stats_used(c, 0);
	pc_close(c);
}

/* ---- tool calls ------------------------------------------------------------ */

/* short: the tiny model's context is 512 tokens of a small vocabulary */
#define TOOLS_WEATHER "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":" \
	"{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":10}," \
	"\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},\"required\":[\"city\",\"days\"]," \
	"\"additionalProperties\":false}}},{\"type\":\"function\",\"function\":{\"name\":\"get_time\"," \
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"zone\":{\"enum\":[\"utc\",\"cet\"]}}," \
	"\"required\":[\"zone\"],\"additionalProperties\":false}}}]"

static const struct proto_message tool_msgs[] = {
	{ { "user", 4 }, { "Weather?", 8 }, { NULL, 0 }, { NULL, 0 } },
};

static void submit_tools(struct proto_msg *m, struct proto_submit *sb, uint64_t id, uint8_t choice,
			 const char *name, int parallel, uint64_t seed)
{
	pc_submit_init(m, sb, id, "", 200, 1);
	m->u.submit.prompt_kind = PROTO_PROMPT_CHAT;
	m->u.submit.text = (struct proto_str){ "", 0 };
	m->u.submit.n_messages = 1;
	m->u.submit.messages = tool_msgs;
	m->u.submit.tools = (struct proto_str){ TOOLS_WEATHER, (uint32_t)strlen(TOOLS_WEATHER) };
	m->u.submit.tool_choice = choice;
	m->u.submit.tool_name = (struct proto_str){ name, name ? (uint32_t)strlen(name) : 0 };
	m->u.submit.parallel_tool_calls = (uint8_t)parallel;
	m->u.submit.sampling.temperature = 1.0f;
	m->u.submit.sampling.seed = seed;
	m->flags |= PROTO_SUBMIT_F_HAS_SEED;
}

/* Each line of o->calls is a call of a tool whose arguments keep its
 * schema; returns how many, and the name of the first in *first. */
static size_t assert_calls(const struct pc_outcome *o, const char **first)
{
	static char name0[64];
	size_t n = 0;
	const char *p = o->calls, *end = o->calls + o->calls_len;

	if (o->err)
		fail_msg("ERROR %u: %s", o->err, o->err_msg);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		json_t *c = json_loadb(p, (size_t)(nl - p), 0, NULL), *a;
		const char *name;

		if (!c)
			fail_msg("not a call: %.*s", (int)(nl - p), p);
		name = json_string_value(json_object_get(c, "name"));
		a = json_object_get(c, "arguments");
		assert_non_null(name);
		assert_true(json_is_object(a));
		if (strcmp(name, "get_weather") == 0) {
			json_t *city = json_object_get(a, "city"), *days = json_object_get(a, "days");

			assert_true(json_is_string(city));
			assert_true(json_is_integer(days));
			assert_true(json_integer_value(days) >= 1 && json_integer_value(days) <= 7);
			assert_int_equal(json_object_size(a), 2);
		} else {
			const char *zone = json_string_value(json_object_get(a, "zone"));

			assert_string_equal(name, "get_time");
			assert_non_null(zone);
			assert_true(strcmp(zone, "utc") == 0 || strcmp(zone, "cet") == 0);
		}
		if (n++ == 0)
			snprintf(name0, sizeof(name0), "%s", name);
		json_decref(c);
		p = nl + 1;
	}
	*first = name0;
	return n;
}

/*
 * tool_choice required or named: the output is a call (the model's family
 * has no tool syntax: the generic JSON form) whose arguments keep the
 * tool's schema, whatever the random model's weights; one call unless
 * parallel; a tool that does not exist is refused; calls in a batch with
 * other requests are each their solo tokens.
 */
static void test_tool_calls(void **state)
{
	static struct proto_msg m[6];
	static struct proto_submit sb[6];
	static struct pc_outcome o[6], solo[6];
	struct h_proc tw;
	char sock4[600];
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	const char *name;

	(void)state;
	/* the tools and how to call them take more than the tiny model's
	 * 512 tokens (a small vocabulary): a worker serving 2048 */
	assert_int_equal(h_worker_start_model(&tw, "tools", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"64MiB\","
					      " \"context\": 2048, \"max_running\": 8",
					      sock4, sizeof(sock4)),
			 0);
	c = connect_at(sock4);
	for (uint64_t seed = 0; seed < 4; seed++) {
		submit_tools(&m[0], &sb[0], 7100 + seed, PROTO_TOOLS_REQUIRED, NULL, 0, seed);
		run_requests(c, &m[0], 1, &o[0]);
		if (o[0].done.finish != PROTO_FINISH_STOP)
			fail_msg("finish %u after %u tokens: calls [%.*s] text [%.*s]", o[0].done.finish,
				 o[0].done.gen_tokens, (int)o[0].calls_len, o[0].calls, (int)o[0].text_len,
				 o[0].text);
		assert_int_equal(assert_calls(&o[0], &name), 1);
		assert_int_equal(o[0].text_len, 0); /* all of it was the call */
	}
	submit_tools(&m[0], &sb[0], 7110, PROTO_TOOLS_NAMED, "get_time", 0, 3);
	run_requests(c, &m[0], 1, &o[0]);
	assert_int_equal(assert_calls(&o[0], &name), 1);
	assert_string_equal(name, "get_time");
	submit_tools(&m[0], &sb[0], 7111, PROTO_TOOLS_REQUIRED, NULL, 1, 5);
	run_requests(c, &m[0], 1, &o[0]);
	assert_true(assert_calls(&o[0], &name) >= 1);
	{
		struct pc_event ev;

		submit_tools(&m[0], &sb[0], 7112, PROTO_TOOLS_NAMED, "nope", 0, 1);
		assert_int_equal(pc_send(c, &m[0]), 0);
		do
			assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		while (ev.type == PROTO_STATS);
		assert_int_equal(ev.type, PROTO_ERROR);
		assert_int_equal(ev.err_code, PROTO_E_BAD_REQUEST);
		assert_non_null(strstr(ev.err_msg, "tool_choice: no tool named 'nope'"));
	}
	/* batch invariance: two forced calls, two schemas, two free texts,
	 * alone and then all at once */
	for (uint32_t i = 0; i < 6; i++) {
		if (i < 2)
			submit_tools(&m[i], &sb[i], 7120 + i, PROTO_TOOLS_REQUIRED, NULL, 1, 10 + i);
		else if (i < 4)
			submit_constraint(&m[i], &sb[i], 7120 + i, PROTO_CONSTRAINT_JSON_SCHEMA,
					  SCHEMA_PERSON, 120);
		else
			pc_submit_init(&m[i], &sb[i], 7120 + i, prompts[i], 40, 1);
		m[i].u.submit.sampling.temperature = 0.9f;
		m[i].u.submit.sampling.seed = 20 + i;
		m[i].flags |= PROTO_SUBMIT_F_HAS_SEED;
	}
	for (uint32_t i = 0; i < 6; i++)
		run_requests(c, &m[i], 1, &solo[i]);
	run_requests(c, m, 6, o);
	for (uint32_t i = 0; i < 6; i++) {
		assert_int_equal(o[i].err, 0);
		assert_int_equal(o[i].n_ids, solo[i].n_ids);
		assert_memory_equal(o[i].ids, solo[i].ids, o[i].n_ids * sizeof(o[i].ids[0]));
		assert_int_equal(o[i].calls_len, solo[i].calls_len);
		if (i < 2)
			assert_true(assert_calls(&o[i], &name) >= 1);
	}
	pc_close(c);
	assert_int_equal(h_stop(&tw, 30000), 0);
}

/*
 * A thinking model (Qwen3's thinking template on the random weights):
 * thinking with a budget before a schema and before a forced call, plain
 * thinking with and without a budget, thinking off under a schema, a raw
 * text prompt; each alone and then all in one batch: the same tokens,
 * reasoning, calls and text; the constraint holds after the thinking.
 */
static void test_thinking_batch_invariance(void **state)
{
	static struct proto_msg m[6];
	static struct proto_submit sb[6];
	static struct pc_outcome o[6], solo[6];
	struct h_proc tw;
	char sock5[600];
	const char *model = h_model_template("tiny", "Q8_0", "llama", "qwen3-thinking");
	struct pc_conn *c;
	const char *name;

	(void)state;
	assert_non_null(model);
	assert_int_equal(h_worker_start_model(&tw, "thinking", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"64MiB\","
					      " \"context\": 2048, \"max_running\": 8",
					      sock5, sizeof(sock5)),
			 0);
	c = connect_at(sock5);
	for (uint32_t i = 0; i < 6; i++) {
		if (i == 1) {
			submit_tools(&m[i], &sb[i], 7200 + i, PROTO_TOOLS_REQUIRED, NULL, 0, 30 + i);
		} else {
			pc_submit_init(&m[i], &sb[i], 7200 + i, prompts[i], 160, 1);
			if (i != 5) {
				m[i].u.submit.prompt_kind = PROTO_PROMPT_CHAT;
				m[i].u.submit.text = (struct proto_str){ "", 0 };
				m[i].u.submit.n_messages = 1;
				m[i].u.submit.messages = tool_msgs;
			}
		}
		if (i == 0 || i == 4) {
			m[i].u.submit.constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
			m[i].u.submit.constraint = (struct proto_str){ SCHEMA_PERSON,
								       (uint32_t)strlen(SCHEMA_PERSON) };
		}
		m[i].u.submit.think_budget = i <= 1 ? 6 : i == 2 ? 10 : 0;
		m[i].u.submit.think = i == 4 ? PROTO_THINK_OFF : PROTO_THINK_DEFAULT;
		if (i == 3)
			m[i].u.submit.max_tokens = 30;
		/* the budget must bind: a random model may end by EOS while it
		 * thinks (it did after 5 tokens on an AVX-512 host), so EOS is
		 * ignored for the request that checks the budget */
		if (i == 2)
			m[i].flags |= PROTO_SUBMIT_F_IGNORE_EOS;
		m[i].u.submit.sampling.temperature = 0.9f;
		m[i].u.submit.sampling.seed = 40 + i;
		m[i].flags |= PROTO_SUBMIT_F_HAS_SEED;
	}
	for (uint32_t i = 0; i < 6; i++)
		run_requests(c, &m[i], 1, &solo[i]);
	run_requests(c, m, 6, o);
	for (uint32_t i = 0; i < 6; i++) {
		if (o[i].err)
			fail_msg("request %u: ERROR %u: %s", i, o[i].err, o[i].err_msg);
		assert_int_equal(o[i].n_ids, solo[i].n_ids);
		assert_memory_equal(o[i].ids, solo[i].ids, o[i].n_ids * sizeof(o[i].ids[0]));
		assert_int_equal(o[i].reasoning_len, solo[i].reasoning_len);
		assert_memory_equal(o[i].reasoning, solo[i].reasoning, o[i].reasoning_len);
		assert_int_equal(o[i].text_len, solo[i].text_len);
		assert_memory_equal(o[i].text, solo[i].text, o[i].text_len);
		assert_int_equal(o[i].calls_len, solo[i].calls_len);
	}
	/* thinking, then the person; thinking, then the call */
	assert_true(o[0].reasoning_len > 0);
	assert_int_equal(o[0].done.finish, PROTO_FINISH_STOP);
	assert_person(&o[0]);
	assert_true(o[1].reasoning_len > 0);
	assert_int_equal(assert_calls(&o[1], &name), 1);
	/* the budget's tokens and the close the worker wrote */
	if (o[2].done.reasoning_tokens < 10 || o[2].done.reasoning_tokens > 18)
		fail_msg("reasoning_tokens %u with a budget of 10", o[2].done.reasoning_tokens);
	assert_true(o[2].text_len > 0);
	/* thinking off: the schema from the first token, no reasoning */
	assert_int_equal(o[4].reasoning_len, 0);
	assert_int_equal(o[4].done.reasoning_tokens, 0);
	assert_person(&o[4]);
	/* a raw prompt has no thinking */
	assert_int_equal(o[5].reasoning_len, 0);
	pc_close(c);
	assert_int_equal(h_stop(&tw, 30000), 0);
}

/*
 * Mixtures of experts (Mixtral's layout, 16 experts 2 active; qwen3moe, 64
 * experts 8 active): each of 65 requests of different lengths, greedy or
 * seeded, alone and then among the 64 others, where tokens of one step
 * share experts: the same tokens and final-logits digest.
 */
static void check_moe_invariance(const char *preset, const char *arch, uint32_t experts,
				 uint32_t used)
{
	enum { N = 65 };
	static struct proto_msg msgs[N];
	static struct proto_submit sbs[N];
	static struct pc_outcome solo[N], conc[N];
	struct h_proc mw;
	char msock[600];
	const char *model = h_model(preset, "Q4_K_M", arch);
	struct pc_conn *c;

	assert_non_null(model);
	assert_int_equal(h_worker_start_model(&mw, preset, model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"64MiB\","
					      " \"max_running\": 64, \"step_tokens\": 512",
					      msock, sizeof(msock)),
			 0);
	c = connect_at(msock);
	{
		/* worker_ready (written before the socket is served) names the experts */
		char *log = h_read_file(mw.log, NULL), want[96];

		assert_non_null(log);
		snprintf(want, sizeof(want), "\"experts\":%u,\"experts_used\":%u,", experts, used);
		if (!strstr(log, want))
			fail_msg("no %s in the worker's log:\n%s", want, log);
		free(log);
	}
	for (uint32_t i = 0; i < N; i++) {
		pc_submit_init(&msgs[i], &sbs[i], 9000 + i, prompts[i % 40], 6 + i % 7, 1 + i % 3);
		msgs[i].flags |= PROTO_SUBMIT_F_DIGEST | PROTO_SUBMIT_F_IGNORE_EOS;
		if (i % 2) {
			msgs[i].u.submit.sampling.temperature = 0.8f;
			msgs[i].u.submit.sampling.seed = 90 + i;
			msgs[i].flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	for (uint32_t i = 0; i < N; i++) {
		run_requests(c, &msgs[i], 1, &solo[i]);
		assert_int_equal(solo[i].err, 0);
	}
	for (uint32_t i = 0; i < N; i++)
		msgs[i].request_id = 9500 + i;
	run_requests(c, msgs, N, conc);
	for (uint32_t i = 0; i < N; i++) {
		if (conc[i].err)
			fail_msg("%s request %u: ERROR %u: %s", preset, i, conc[i].err, conc[i].err_msg);
		assert_int_equal(conc[i].done.gen_tokens, 6 + i % 7);
		assert_int_equal(conc[i].n_ids, solo[i].n_ids);
		assert_memory_equal(conc[i].ids, solo[i].ids, solo[i].n_ids * sizeof(uint32_t));
		assert_memory_equal(conc[i].done.logits_digest, solo[i].done.logits_digest, 32);
	}
	pc_close(c);
	assert_int_equal(h_stop(&mw, 30000), 0);
}

static void test_moe_batch_invariance(void **state)
{
	(void)state;
	check_moe_invariance("moe-tiny", "llama", 16, 2);
	check_moe_invariance("qwen3moe-tiny", "qwen3moe", 64, 8);
}

/* The number after "key": in the worker's log, or -1. */
static long long log_number(const char *path, const char *key, int *avx512)
{
	char *log = h_read_file(path, NULL), *at;
	long long v = -1;

	assert_non_null(log);
	at = strstr(log, key);
	if (at)
		v = strtoll(at + strlen(key), NULL, 10);
	*avx512 = strstr(log, "(avx512") != NULL;
	free(log);
	return v;
}

/*
 * worker.cpu_repack: a worker with its Q4_0 matrices repacked and one
 * reading the mapped file give the same tokens and digests, alone and in a
 * batch; worker_ready's repacked_bytes is plan's (0 when off or no AVX-512).
 */
static void test_repacked_equals_mapped(void **state)
{
	enum { N = 12 };
	static struct proto_msg msgs[N];
	static struct proto_submit sbs[N];
	static struct pc_outcome on[N], off[N], solo;
	struct h_proc wp, wm;
	char sp[600], sm[600];
	const char *model = h_model("tiny", "Q4_0", "llama");
	int avx512;
	(void)state;

	assert_non_null(model);
	assert_int_equal(h_worker_start_model(&wp, "repack-on", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\"", sp, sizeof(sp)),
			 0);
	assert_int_equal(h_worker_start_model(&wm, "repack-off", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\", \"cpu_repack\": false",
					      sm, sizeof(sm)),
			 0);
	struct pc_conn *cp = connect_at(sp), *cm = connect_at(sm);
	long long bytes = log_number(wp.log, "\"repacked_bytes\":", &avx512);
	if (avx512 ? bytes <= 0 : bytes != 0)
		fail_msg("repacked_bytes %lld on a CPU %s AVX-512", bytes, avx512 ? "with" : "without");
	if (avx512) { /* what sluice-model plan counts for the same file */
		char cmd[1200];
		int st;

		snprintf(cmd, sizeof(cmd), "'%s' plan '%s' --memory 1GiB --context 512",
			 h_bin("tools/sluice-model"), model);
		char *out = h_run_capture(cmd, &st), *at = out ? strstr(out, "cpu repack: ") : NULL;
		assert_non_null(at);
		assert_int_equal(strtoll(at + strlen("cpu repack: "), NULL, 10), bytes);
		free(out);
	}
	assert_int_equal(log_number(wm.log, "\"repacked_bytes\":", &avx512), 0);
	for (uint32_t i = 0; i < N; i++) {
		pc_submit_init(&msgs[i], &sbs[i], 7000 + i, prompts[i], 5 + i % 6, 1);
		msgs[i].flags |= PROTO_SUBMIT_F_DIGEST | PROTO_SUBMIT_F_IGNORE_EOS;
		if (i % 2) {
			msgs[i].u.submit.sampling.temperature = 0.8f;
			msgs[i].u.submit.sampling.seed = 70 + i;
			msgs[i].flags |= PROTO_SUBMIT_F_HAS_SEED;
		}
	}
	run_requests(cp, msgs, N, on);
	run_requests(cm, msgs, N, off);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(on[i].err, 0);
		assert_int_equal(off[i].err, 0);
		assert_int_equal(on[i].n_ids, off[i].n_ids);
		assert_memory_equal(on[i].ids, off[i].ids, on[i].n_ids * sizeof(uint32_t));
		assert_memory_equal(on[i].done.logits_digest, off[i].done.logits_digest, 32);
	}
	run_requests(cp, &msgs[3], 1, &solo); /* alone on the repacked worker */
	assert_memory_equal(solo.done.logits_digest, on[3].done.logits_digest, 32);
	pc_close(cp);
	pc_close(cm);
	assert_int_equal(h_stop(&wp, 30000), 0);
	assert_int_equal(h_stop(&wm, 30000), 0);
}

static void test_ping_is_a_real_generation(void **state)
{
	struct pc_conn *c = connect_worker();
	struct proto_msg m;
	struct pc_event ev;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_PING;
	m.u.ping.nonce = 77;
	assert_int_equal(pc_send(c, &m), 0);
	for (;;) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		if (ev.type == PROTO_PONG)
			break;
	}
	assert_int_equal(ev.pong.nonce, 77);
	assert_int_equal(ev.pong.ok, 1);
	assert_int_equal(ev.pong.tokens, 1);
	pc_close(c);
}

static void test_disallowed_uid(void **state)
{
	pid_t pid;
	int status;

	(void)state;
	if (getuid() != 0)
		skip(); /* cannot switch user: needs root */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct pc_conn *c;
		struct pc_event ev;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		c = pc_connect(sock, 5000);
		if (!c)
			_exit(0); /* refused at connect: also a refusal */
		/* no HELLO: the worker closes the connection at once */
		_exit(pc_next(c, &ev, 10000) == -1 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_preemption_under_kv_pressure(void **state)
{
	enum { N = 6 };
	static struct proto_msg msgs[N];
	static struct proto_submit sbs[N];
	static struct pc_outcome solo[N], conc[N];
	struct h_proc small;
	char extra[256];
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	struct pc_event ev;
	char sock2[600];
	uint32_t preempted = 0;

	(void)state;
	/* 24 blocks of 16 tokens (tiny model: 1 KiB of F16 KV per token):
	 * one or two of these sequences at a time, six are submitted */
	snprintf(extra, sizeof(extra),
		 "\"threads\": 2, \"kv_cache_bytes\": %d, \"max_running\": 8, \"step_tokens\": 64",
		 24 * 16 * 1024);
	assert_int_equal(h_worker_start_model(&small, "small", model, extra, sock2, sizeof(sock2)), 0);
	c = pc_connect(sock2, TIMEOUT_MS);
	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	for (uint32_t i = 0; i < N; i++) {
		pc_submit_init(&msgs[i], &sbs[i], 6000 + i, prompts[20 + i], 60, 5);
		msgs[i].flags |= PROTO_SUBMIT_F_IGNORE_EOS | PROTO_SUBMIT_F_DIGEST;
	}
	for (uint32_t i = 0; i < N; i++) {
		run_requests(c, &msgs[i], 1, &solo[i]);
		assert_int_equal(solo[i].err, 0);
	}
	for (uint32_t i = 0; i < N; i++)
		msgs[i].request_id = 7000 + i;
	run_requests(c, msgs, N, conc);
	for (uint32_t i = 0; i < N; i++) {
		assert_int_equal(conc[i].err, 0);
		assert_int_equal(conc[i].done.gen_tokens, 60);
		assert_memory_equal(conc[i].ids, solo[i].ids, solo[i].n_ids * sizeof(uint32_t));
		assert_memory_equal(conc[i].done.logits_digest, solo[i].done.logits_digest, 32);
		preempted += conc[i].done.preemptions;
	}
	printf("# %u preemptions across %d requests\n", preempted, N);
	assert_true(preempted > 0);
	pc_close(c);
	assert_int_equal(h_stop(&small, 30000), 0);
}

/*
 * Issue 13, finding 17: worker.socket naming a regular file deleted that
 * file; a second worker on a live socket path silently took it over.  Both
 * are refused now, with a message; the file is intact and the first worker
 * still serves.
 */
static void test_socket_path_guarded(void **state)
{
	char cfg[2048], path[600], file[600], cmd[1400], *out;
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	FILE *f;
	int st;

	(void)state;
	snprintf(file, sizeof(file), "%s/precious.txt", h_tmpdir());
	f = fopen(file, "w");
	assert_non_null(f);
	fputs("keep me\n", f);
	fclose(f);
	for (int k = 0; k < 2; k++) {
		const char *target = k == 0 ? file : sock;

		snprintf(path, sizeof(path), "%s/guard-%d.json", h_tmpdir(), k);
		snprintf(cfg, sizeof(cfg), "{\"worker\": {\"model\": \"%s\", \"socket\": \"%s\","
			 " \"threads\": 1, \"kv_cache_bytes\": \"4MiB\"}}", model, target);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(cfg, f);
		fclose(f);
		snprintf(cmd, sizeof(cmd), "timeout 60 %s serve --config %s 2>&1",
			 h_bin("worker/sluice-worker"), path);
		out = h_run_capture(cmd, &st);
		assert_non_null(out);
		assert_int_not_equal(st, 0);
		assert_non_null(strstr(out, k == 0 ? "is not a socket" : "another process listens"));
		free(out);
	}
	out = h_read_file(file, NULL);
	assert_non_null(out);
	assert_string_equal(out, "keep me\n");
	free(out);
	/* the first worker still owns its socket (its HELLO comes) */
	c = connect_worker();
	pc_close(c);
}

static int setup(void **state)
{
	const char *model;

	(void)state;
	make_prompts();
	model = h_model("tiny", "Q8_0", "llama");
	if (!model)
		return -1;
	return h_worker_start_model(&worker, "worker", model,
				    "\"threads\": 2, \"kv_cache_bytes\": \"64MiB\", \"max_running\": 32,"
				    " \"step_tokens\": 256, \"stats_interval_ms\": 100",
				    sock, sizeof(sock));
}

static int teardown(void **state)
{
	int rc;

	(void)state;
	rc = h_stop(&worker, 30000);
	if (rc != 0) {
		fprintf(stderr, "worker exit status %d; log: %s\n", rc, worker.log);
		return -1;
	}
	h_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ping_is_a_real_generation),
		cmocka_unit_test(test_concurrent_equals_solo),
		cmocka_unit_test(test_prefix_cache_isolated_by_tenant),
		cmocka_unit_test(test_cancel_and_drop_free_blocks),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_constrained_output),
		cmocka_unit_test(test_tool_calls),
		cmocka_unit_test(test_thinking_batch_invariance),
		cmocka_unit_test(test_moe_batch_invariance),
		cmocka_unit_test(test_repacked_equals_mapped),
		cmocka_unit_test(test_disallowed_uid),
		cmocka_unit_test(test_preemption_under_kv_pressure),
		cmocka_unit_test(test_socket_path_guarded),
	};

	return cmocka_run_group_tests_name("integration/worker", tests, setup, teardown);
}
