/*
 * test_toolcall.c - worker/text/toolcall.c: each family's tool calls and
 * thinking, from transcripts written after the families' own
 * documentation, fed whole, split in two at every byte and one byte at a
 * time (all give the same events); text that is no call comes back as
 * content byte for byte; the bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/text/toolcall.h"

/* The events as one string: C[text] R[text] T[name args #id], adjacent
 * texts of one kind merged (how they are split is the feed's business). */
struct log {
	char s[1 << 16];
	size_t n;
	int last;             /* kind of the text being merged, -1 none */
};

static void put(struct log *l, const char *s, size_t n)
{
	assert_true(l->n + n < sizeof(l->s));
	memcpy(l->s + l->n, s, n);
	l->n += n;
	l->s[l->n] = '\0';
}

static enum cm_status on_event(void *ctx, const struct wk_tc_event *e)
{
	struct log *l = ctx;
	char tmp[4096];

	if (e->kind == WK_TC_CALL) {
		if (l->last >= 0)
			put(l, "]", 1);
		l->last = -1;
		snprintf(tmp, sizeof(tmp), "T[%s %s%s%s]", e->name, e->args, e->id ? " #" : "",
			 e->id ? e->id : "");
		put(l, tmp, strlen(tmp));
		return CM_OK;
	}
	assert_true(e->len > 0);
	if (l->last != (int)e->kind) {
		if (l->last >= 0)
			put(l, "]", 1);
		put(l, e->kind == WK_TC_CONTENT ? "C[" : "R[", 2);
		l->last = (int)e->kind;
	}
	put(l, e->text, e->len);
	return CM_OK;
}

static void finish_log(struct log *l)
{
	if (l->last >= 0)
		put(l, "]", 1);
	l->last = -1;
}

/* Feeds `text` in pieces at the offsets cuts[0..n) and finishes. */
static void run_cuts(const struct wk_tc_config *cfg, const char *text, const size_t *cuts,
		     size_t n_cuts, struct log *l, unsigned *calls)
{
	struct wk_tc *p;
	size_t at = 0, len = strlen(text);

	memset(l, 0, sizeof(*l));
	l->last = -1;
	assert_int_equal(wk_tc_new(cfg, &p), CM_OK);
	for (size_t i = 0; i <= n_cuts; i++) {
		size_t to = i < n_cuts ? cuts[i] : len;

		assert_int_equal(wk_tc_feed(p, text + at, to - at, on_event, l), CM_OK);
		at = to;
	}
	assert_int_equal(wk_tc_finish(p, on_event, l), CM_OK);
	finish_log(l);
	*calls = wk_tc_calls(p);
	wk_tc_free(p);
}

/* Whole, every split in two, byte by byte: each gives `want`. */
static void check(enum wk_tc_family f, int think, int think_open, const char *text,
		  const char *want)
{
	const struct wk_tc_config cfg = { f, think, think_open };
	static struct log l;
	size_t len = strlen(text);
	size_t *cuts = calloc(len + 1, sizeof(*cuts));
	unsigned calls, calls_whole;

	assert_non_null(cuts);
	run_cuts(&cfg, text, NULL, 0, &l, &calls_whole);
	if (strcmp(l.s, want) != 0)
		fail_msg("%s whole:\n  got  %s\n  want %s", wk_tc_family_name(f), l.s, want);
	for (size_t k = 1; k < len; k++) {
		cuts[0] = k;
		run_cuts(&cfg, text, cuts, 1, &l, &calls);
		if (strcmp(l.s, want) != 0)
			fail_msg("%s split at %zu:\n  got  %s\n  want %s", wk_tc_family_name(f), k, l.s,
				 want);
		assert_int_equal(calls, calls_whole);
	}
	for (size_t k = 0; k + 1 < len; k++)
		cuts[k] = k + 1;
	run_cuts(&cfg, text, cuts, len ? len - 1 : 0, &l, &calls);
	if (strcmp(l.s, want) != 0)
		fail_msg("%s byte by byte:\n  got  %s\n  want %s", wk_tc_family_name(f), l.s, want);
	free(cuts);
}

/* Qwen2.5 function calling (qwen.readthedocs.io), Hermes 2 Pro, Qwen3. */
static void test_hermes(void **state)
{
	(void)state;
	check(WK_TC_HERMES, 0, 0,
	      "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": "
	      "\"San Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
	      "\"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", "
	      "\"date\": \"2024-10-01\"}}\n</tool_call>",
	      "T[get_current_temperature {\"location\":\"San Francisco, CA, USA\"}]"
	      "T[get_temperature_date {\"location\":\"San Francisco, CA, USA\",\"date\":\"2024-10-01\"}]");
	/* content before, between and after */
	check(WK_TC_HERMES, 0, 0,
	      "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone <3",
	      "C[Let me check.\n]T[f {}]C[Done <3]");
	/* Qwen3: thinking first, then the call */
	check(WK_TC_HERMES, 1, 0,
	      "<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n"
	      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
	      "R[\nThe user wants the weather in Paris. I should call get_weather.\n]"
	      "T[get_weather {\"city\":\"Paris\"}]");
	/* arguments written as a string holding the object */
	check(WK_TC_HERMES, 0, 0,
	      "<tool_call>{\"name\":\"x\",\"arguments\":\"{\\\"a\\\":1}\"}</tool_call>",
	      "T[x {\"a\":1}]");
	/* the closing tag never came, the call is complete: still a call */
	check(WK_TC_HERMES, 0, 0, "<tool_call>\n{\"name\": \"x\", \"arguments\": {\"q\": [1, 2]}}\n",
	      "T[x {\"q\":[1,2]}]");
	/* an argument holding the closing tag (a constrained tiny model wrote
	 * this in CI): the tag counts only outside the call's strings */
	check(WK_TC_HERMES, 0, 0,
	      "<tool_call>\n{ \"name\":\n \"get_weather\" , \"arguments\" : {\"city\" :\n   "
	      "\"</tool_call>\", \"days\" :7 }}\n</tool_call>",
	      "T[get_weather {\"city\":\"</tool_call>\",\"days\":7}]");
	check(WK_TC_HERMES, 0, 0,
	      "<tool_call>{\"name\":\"x\",\"arguments\":{\"s\":\"a\\\"</tool_call>\\\\\"}}"
	      "</tool_call> after",
	      "T[x {\"s\":\"a\\\"</tool_call>\\\\\"}]C[after]");
}

/* Llama 3.1-3.3 JSON tool calling (llama.com model cards, prompt formats). */
static void test_llama3(void **state)
{
	(void)state;
	check(WK_TC_LLAMA3, 0, 0,
	      "{\"name\": \"get_current_conditions\", \"parameters\": {\"location\": \"San Francisco, "
	      "CA\", \"unit\": \"Fahrenheit\"}}",
	      "T[get_current_conditions {\"location\":\"San Francisco, CA\",\"unit\":\"Fahrenheit\"}]");
	check(WK_TC_LLAMA3, 0, 0,
	      "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
	      "T[get_weather {\"city\":\"Paris\"}]");
	check(WK_TC_LLAMA3, 0, 0,
	      "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
	      "T[a {}]T[b {\"x\":1}]");
	/* JSON that is not a call, and plain text, are content as written */
	check(WK_TC_LLAMA3, 0, 0, "  {\"answer\": 42, \"s\": \"}{\"}", "C[  {\"answer\": 42, \"s\": \"}{\"}]");
	check(WK_TC_LLAMA3, 0, 0, "The weather is sunny {maybe}.", "C[The weather is sunny {maybe}.]");
	/* a call, then words: the words are content */
	check(WK_TC_LLAMA3, 0, 0, "{\"name\": \"a\", \"parameters\": {}} and more",
	      "T[a {}]C[and more]");
}

/* Mistral v3 tokenizer function calling (docs.mistral.ai). */
static void test_mistral(void **state)
{
	(void)state;
	check(WK_TC_MISTRAL, 0, 0,
	      "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\": {\"location\": "
	      "\"Paris, France\", \"format\": \"celsius\"}, \"id\": \"Vb5kq0Zxz\"}]",
	      "T[get_current_weather {\"location\":\"Paris, France\",\"format\":\"celsius\"} #Vb5kq0Zxz]");
	check(WK_TC_MISTRAL, 0, 0,
	      "Sure.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": true}}]",
	      "C[Sure.]T[a {}]T[b {\"k\":true}]");
	/* the array where the message begins (a constrained call) */
	check(WK_TC_MISTRAL, 0, 0, "[{\"name\": \"a\", \"arguments\": {\"k\": 1}}]", "T[a {\"k\":1}]");
	check(WK_TC_MISTRAL, 0, 0, "[1, 2] is a list", "C[[1, 2] is a list]");
	/* a marker followed by something else: content, marker included */
	check(WK_TC_MISTRAL, 0, 0, "[TOOL_CALLS] not json", "C[[TOOL_CALLS] not json]");
	check(WK_TC_MISTRAL, 0, 0, "[TOOL_CALLS][{\"name\": 5}]", "C[[TOOL_CALLS][{\"name\": 5}]]");
}

/* The generic fallback (docs/tools.md). */
static void test_json_fallback(void **state)
{
	(void)state;
	check(WK_TC_JSON, 0, 0, "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, "
	      "{\"name\": \"g\"}]}", "T[f {\"a\":1}]T[g {}]");
	check(WK_TC_JSON, 0, 0, "Hello there", "C[Hello there]");
	check(WK_TC_JSON, 0, 0, "{\"tool_calls\": []}", "C[{\"tool_calls\": []}]");
	check(WK_TC_JSON, 0, 0, "{\"content\": \"hi\"}", "C[{\"content\": \"hi\"}]");
}

/* What fails to parse is content, byte for byte; near-markers are text. */
static void test_not_calls(void **state)
{
	(void)state;
	check(WK_TC_HERMES, 0, 0,
	      "<tool_call>\n{\"name\": \"x\", \"arguments\": {oops}\n</tool_call> after",
	      "C[<tool_call>\n{\"name\": \"x\", \"arguments\": {oops}\n</tool_call> after]");
	check(WK_TC_HERMES, 0, 0, "<tool_call>\n{\"name\": ", "C[<tool_call>\n{\"name\": ]");
	/* no JSON value: a quote does not hide the closing tag */
	check(WK_TC_HERMES, 0, 0, "<tool_call>\"x</tool_call> after",
	      "C[<tool_call>\"x</tool_call> after]");
	/* an open string never closed: all of it is content at the end */
	check(WK_TC_HERMES, 0, 0, "<tool_call>{\"name\": \"x</tool_call> after",
	      "C[<tool_call>{\"name\": \"x</tool_call> after]");
	check(WK_TC_HERMES, 0, 0, "text <tool_c", "C[text <tool_c]");
	check(WK_TC_HERMES, 0, 0, "a <toolbox> b <tool_call", "C[a <toolbox> b <tool_call]");
	check(WK_TC_HERMES, 0, 0, "<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>",
	      "C[<tool_call>{\"name\":\"\",\"arguments\":{}}</tool_call>]");
	check(WK_TC_HERMES, 0, 0, "<tool_call>{\"name\":\"a\",\"arguments\":[1]}</tool_call>",
	      "C[<tool_call>{\"name\":\"a\",\"arguments\":[1]}</tool_call>]");
	check(WK_TC_HERMES, 0, 0, "<tool_call>{\"name\":\"a\",\"name\":\"b\"}</tool_call>",
	      "C[<tool_call>{\"name\":\"a\",\"name\":\"b\"}</tool_call>]");
	/* no family: everything is content */
	check(WK_TC_NONE, 0, 0, "<tool_call>{\"name\":\"a\"}</tool_call>",
	      "C[<tool_call>{\"name\":\"a\"}</tool_call>]");
}

/* Thinking: Qwen3's <think>, a DeepSeek-R1 distill whose prompt opened it. */
static void test_thinking(void **state)
{
	(void)state;
	check(WK_TC_NONE, 1, 0, "<think>\nhmm, 2+2\n</think>\n\nIt is 4.", "R[\nhmm, 2+2\n]C[It is 4.]");
	check(WK_TC_NONE, 1, 1, "Okay, the user asks...</think>\n\nAnswer: yes",
	      "R[Okay, the user asks...]C[Answer: yes]");
	check(WK_TC_NONE, 1, 0, "<think>unfinished", "R[unfinished]");
	check(WK_TC_NONE, 1, 0, "  no thinking here </think>", "C[  no thinking here </think>]");
	check(WK_TC_NONE, 0, 0, "<think>x</think>y", "C[<think>x</think>y]");
	/* only where the message begins */
	check(WK_TC_NONE, 1, 0, "a<think>b</think>", "C[a<think>b</think>]");
	/* thinking, then a Llama-style call where the content begins */
	check(WK_TC_LLAMA3, 1, 0, "<think>call it</think> {\"name\":\"f\",\"parameters\":{}}",
	      "R[call it]T[f {}]");
	/* the end tag split at every byte (check) and a lone '<' in reasoning */
	check(WK_TC_NONE, 1, 1, "a < b </thin </think>c", "R[a < b </thin ]C[c]");
}

struct count_ctx {
	size_t content;
	unsigned calls;
	int seen;
	int stop_at;            /* the event that answers CM_ELIMIT (0: none) */
};

static enum cm_status count_event(void *ctx, const struct wk_tc_event *e)
{
	struct count_ctx *c = ctx;

	if (e->kind == WK_TC_CONTENT)
		c->content += e->len;
	else if (e->kind == WK_TC_CALL)
		c->calls++;
	return ++c->seen == c->stop_at ? CM_ELIMIT : CM_OK;
}

/* A call over WK_TC_CALL_MAX_BYTES is content, all of it; an emitter's
 * error stops the feed. */
static void test_bounds(void **state)
{
	static const char head[] = "<tool_call>{\"name\":\"a\",\"arguments\":{\"x\":\"";
	static const char two[] = "<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{\"name\":\"b\"}</tool_call>";
	const struct wk_tc_config cfg = { WK_TC_HERMES, 0, 0 };
	size_t big = WK_TC_CALL_MAX_BYTES + 100000;
	char *text = malloc(big);
	struct count_ctx c = { 0, 0, 0, 0 };
	struct wk_tc *p;

	(void)state;
	assert_non_null(text);
	memcpy(text, head, sizeof(head) - 1);
	memset(text + sizeof(head) - 1, 'z', big - (sizeof(head) - 1));
	assert_int_equal(wk_tc_new(&cfg, &p), CM_OK);
	assert_int_equal(wk_tc_feed(p, text, big, count_event, &c), CM_OK);
	assert_int_equal(wk_tc_finish(p, count_event, &c), CM_OK);
	assert_int_equal(c.content, big);
	assert_int_equal(c.calls, 0);
	wk_tc_free(p);
	free(text);

	memset(&c, 0, sizeof(c));
	c.stop_at = 1;
	assert_int_equal(wk_tc_new(&cfg, &p), CM_OK);
	assert_int_equal(wk_tc_feed(p, two, strlen(two), count_event, &c), CM_ELIMIT);
	assert_int_equal(c.seen, 1);
	wk_tc_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hermes),
		cmocka_unit_test(test_llama3),
		cmocka_unit_test(test_mistral),
		cmocka_unit_test(test_json_fallback),
		cmocka_unit_test(test_not_calls),
		cmocka_unit_test(test_thinking),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
