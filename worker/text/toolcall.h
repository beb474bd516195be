/*
 * toolcall.h - the streaming parser of what a chat model writes: its
 * content, its reasoning (between thinking tags) and its tool calls, per
 * chat-template family, as the text arrives.
 *
 * Owns: the text held back (a partial marker, a call not yet complete) and
 * the parser's state.  Thread: one sequence, one thread at a time.
 *
 * The worker feeds the text each token releases, marker tokens included as
 * their text ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<think>").
 * Events come out in the order of the text: content, reasoning, and each
 * tool call once it is complete (name, arguments as compact JSON, the id
 * when the model wrote one).  Text that could still be the start of a
 * marker is held back, as the stop-string matcher holds back a partial
 * stop string; a call's text is held until it closes.  Text that fails to
 * parse as a call is content, byte for byte, markers included: never
 * dropped.
 *
 * Families (their own documentation's forms; docs/tools.md):
 *   HERMES   Qwen2.5, Qwen3, Hermes: <tool_call>\n{"name": ..., "arguments":
 *            {...}}\n</tool_call>, any number, anywhere in the content;
 *   LLAMA3   Llama 3.1-3.3 JSON calls: the message is {"name": ...,
 *            "parameters": {...}} (or "arguments"), optionally after
 *            <|python_tag|>, several separated by ';';
 *   MISTRAL  [TOOL_CALLS] then a JSON array of {"name", "arguments", "id"}
 *            (or one object); a message that begins with the array too
 *            (what a constrained call writes: the marker is a control
 *            token no grammar produces);
 *   JSON     the generic fallback for families without tool syntax: the
 *            message is {"tool_calls": [{"name", "arguments"}, ...]}.
 * In LLAMA3 and JSON a call is recognised only where the message begins
 * (after whitespace and thinking).  Arguments may be an object or a string
 * holding one (both are seen in the wild); anything else is content.
 *
 * Whitespace between calls and after the last goes (the template's
 * separators); what follows is content.
 *
 * Reasoning: with `think`, a message that begins with <think> (or, with
 * `think_open`, one whose prompt ended inside <think>: DeepSeek-R1
 * distills) is reasoning up to </think>; whitespace right after </think>
 * is dropped.
 *
 * Bounds: a call's text is at most WK_TC_CALL_MAX_BYTES (beyond, it is
 * content); a feed any size.
 */
#ifndef SLUICE_WORKER_TEXT_TOOLCALL_H
#define SLUICE_WORKER_TEXT_TOOLCALL_H

#include <stddef.h>

#include "common/status.h"

#define WK_TC_CALL_MAX_BYTES (1u << 20)

enum wk_tc_family {
	WK_TC_NONE = 0,     /* no tool calls (reasoning may still be split) */
	WK_TC_HERMES,
	WK_TC_LLAMA3,
	WK_TC_MISTRAL,
	WK_TC_JSON,
};

struct wk_tc_config {
	enum wk_tc_family family;
	int think;          /* split <think>...</think> off as reasoning */
	int think_open;     /* the output starts inside <think> */
};

enum wk_tc_kind {
	WK_TC_CONTENT = 0,
	WK_TC_REASONING,
	WK_TC_CALL,
};

struct wk_tc_event {
	enum wk_tc_kind kind;
	const char *text;   /* CONTENT, REASONING: the bytes */
	size_t len;
	const char *name;   /* CALL: the function's name (NUL-terminated) */
	const char *args;   /* CALL: compact JSON object (NUL-terminated) */
	const char *id;     /* CALL: the id the model wrote, or NULL */
};

/* Receives each event; a status other than CM_OK stops the feed and is
 * returned by it.  Event strings are valid during the call only. */
typedef enum cm_status (*wk_tc_emit_fn)(void *ctx, const struct wk_tc_event *e);

struct wk_tc;

enum cm_status wk_tc_new(const struct wk_tc_config *cfg, struct wk_tc **out) CM_WUR;
void wk_tc_free(struct wk_tc *p);

/* Feeds `len` bytes of output. */
enum cm_status wk_tc_feed(struct wk_tc *p, const char *text, size_t len,
			  wk_tc_emit_fn emit, void *ctx) CM_WUR;
/* The end of the output: what is held is resolved (a call whose closing
 * marker never came but whose JSON is complete is a call; anything else is
 * content, or reasoning inside thinking). */
enum cm_status wk_tc_finish(struct wk_tc *p, wk_tc_emit_fn emit, void *ctx) CM_WUR;

/* Calls emitted so far. */
unsigned wk_tc_calls(const struct wk_tc *p);
/* 1 while the text is inside thinking. */
int wk_tc_thinking(const struct wk_tc *p);

/* "hermes", "llama3", "mistral", "json", "none". */
const char *wk_tc_family_name(enum wk_tc_family f);

#endif
