/*
 * tools.c - tool calls and thinking in the worker (docs/tools.md): a
 * request's parser of the family's output (worker/text/toolcall.h), the
 * constraint that forces a call (tool_choice required or named: the tools'
 * schemas in the family's call syntax, compiled through the constraint
 * cache), and the TOKEN entries that carry each token's text by channel.
 *
 * Thread: the scheduler thread.
 */
#include "worker/serve/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/alloc.h"
#include "common/log.h"
#include "worker/engine/gen.h"
#include "worker/text/chat.h"

/* Calls one answer may hold with parallel_tool_calls (a bound of the
 * forcing grammar; the parser takes any number). */
#define TOOLS_PARALLEL_MAX 8
/* The texts one token's entries carry (a call is at most WK_TC_CALL_MAX_BYTES) */
#define TOOLS_TEXT_MAX (8u << 20)

/* ---- the forcing constraint --------------------------------------------- */

/* How a family writes its calls around the call objects. */
struct call_syntax {
	const char *prefix, *sep, *suffix, *args_key;
};

static struct call_syntax syntax_of(int family)
{
	switch (family) {
	case WK_TC_HERMES:
		return (struct call_syntax){ "<tool_call>\n", "\n</tool_call>\n<tool_call>\n",
					     "\n</tool_call>", "arguments" };
	case WK_TC_LLAMA3: return (struct call_syntax){ "", "; ", "", "parameters" };
	case WK_TC_MISTRAL: return (struct call_syntax){ "[", ", ", "]", "arguments" };
	default: return (struct call_syntax){ "{\"tool_calls\": [", ", ", "]}", "arguments" };
	}
}

/*
 * The WK_GKIND_TOOLS text for a request whose tool_choice forces a call:
 * one call is {"name": <a tool's name>, "<args key>": <its parameters>},
 * of any tool (required) or of the named one.  malloc'd; NULL with err.
 */
static char *forcing_text(int family, const struct proto_submit *sb, char *err, size_t err_len)
{
	struct call_syntax cs = syntax_of(family);
	json_t *tools = json_loadb(sb->tools.ptr, sb->tools.len, 0, NULL), *alts = json_array();
	json_t *t, *schema = NULL, *spec = NULL;
	size_t i;
	char *out = NULL;

	if (!json_is_array(tools) || !alts) {
		snprintf(err, err_len, "tools: expected a JSON array of tools");
		goto out;
	}
	json_array_foreach(tools, i, t) {
		json_t *f = json_object_get(t, "function"), *params, *one, *dflt = NULL;
		const char *name = json_string_value(json_object_get(f, "name"));

		if (!name)
			continue;
		if (sb->tool_choice == PROTO_TOOLS_NAMED &&
		    (strlen(name) != sb->tool_name.len || memcmp(name, sb->tool_name.ptr, sb->tool_name.len)))
			continue;
		params = json_object_get(f, "parameters");
		if (!json_is_object(params))
			params = dflt = json_pack("{s:s}", "type", "object");
		one = json_pack("{s:s, s:{s:{s:s}, s:O}, s:[s, s], s:b}", "type", "object", "properties",
				"name", "const", name, cs.args_key, params, "required", "name",
				cs.args_key, "additionalProperties", 0);
		json_decref(dflt);
		if (!one)
			goto nomem;
		json_array_append_new(alts, one);
	}
	if (json_array_size(alts) == 0) {
		snprintf(err, err_len, "tool_choice: no tool named '%.*s' among the tools",
			 (int)(sb->tool_name.len > 64 ? 64 : sb->tool_name.len), sb->tool_name.ptr);
		goto out;
	}
	schema = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0))
					    : json_pack("{s:O}", "anyOf", alts);
	spec = json_pack("{s:s, s:s, s:s, s:i, s:O}", "prefix", cs.prefix, "sep", cs.sep, "suffix",
			 cs.suffix, "max", sb->parallel_tool_calls ? TOOLS_PARALLEL_MAX : 1, "schema",
			 schema);
	out = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	if (!out)
		goto nomem;
	goto out;
nomem:
	snprintf(err, err_len, "worker out of memory");
out:
	json_decref(spec);
	json_decref(schema);
	json_decref(alts);
	json_decref(tools);
	return out;
}

void wk_serve_think_mode(const struct wk_server *s, const struct proto_submit *sb,
			 struct wk_think_mode *out)
{
	int chat = sb->prompt_kind == PROTO_PROMPT_CHAT;
	int thinks = chat && wk_prompt_thinks(s->model);
	int forced = sb->tools.len > 0 && (sb->tool_choice == PROTO_TOOLS_REQUIRED ||
					   sb->tool_choice == PROTO_TOOLS_NAMED);

	memset(out, 0, sizeof(*out));
	out->on = chat && sb->think != PROTO_THINK_OFF && (sb->think == PROTO_THINK_ON || thinks);
	out->off_form = thinks && sb->think == PROTO_THINK_OFF;
	out->open = out->on && thinks &&
		    (wk_prompt_opens_think(s->model) || forced ||
		     sb->constraint_kind != PROTO_CONSTRAINT_NONE);
	out->detect = out->on && !out->open;
}

enum cm_status wk_serve_tools_setup(struct wk_server *s, const struct proto_submit *sb,
				    struct wk_serve_req *r, char *err, size_t err_len)
{
	const struct wk_chat_template *t;
	struct wk_tc_config cfg;
	struct wk_think_mode tm;
	int tools = sb->tools.len > 0 && sb->tool_choice != PROTO_TOOLS_NONE &&
		    sb->prompt_kind == PROTO_PROMPT_CHAT;
	enum cm_status st;

	memset(&cfg, 0, sizeof(cfg));
	wk_serve_think_mode(s, sb, &tm);
	cfg.think = tm.on;
	cfg.think_open = tm.open;
	if (!tools && !cfg.think)
		return CM_OK;
	t = wk_prompt_template(s->model, sb->template_name.len ? sb->template_name.ptr
							       : s->cfg->chat_template, err, err_len);
	if (!t)
		return CM_ENOTFOUND;
	cfg.family = tools ? (enum wk_tc_family)wk_chat_tool_family(t) : WK_TC_NONE;
	if (tools && (sb->tool_choice == PROTO_TOOLS_REQUIRED || sb->tool_choice == PROTO_TOOLS_NAMED)) {
		char *text;

		if (sb->constraint_kind != PROTO_CONSTRAINT_NONE)
			return cm_fail(err, err_len, CM_EINVAL, "tool_choice: a forced call and a "
				       "response format cannot both constrain the output");
		text = forcing_text(cfg.family, sb, err, err_len);
		if (!text)
			return CM_EINVAL;
		st = wk_serve_constraint_get_text(s, r->id, WK_GKIND_TOOLS, "tools", text, strlen(text),
						  &r->gent, &r->constraint_ns, err, err_len);
		free(text);
		if (st != CM_OK)
			return st;
	}
	st = wk_tc_new(&cfg, &r->tc);
	cm_buf_init(&r->tc_text, TOOLS_TEXT_MAX);
	return st == CM_OK ? CM_OK : cm_fail(err, err_len, st, "worker out of memory");
}

/* ---- entries by channel --------------------------------------------------- */

#define TOOLS_ENTRIES_MAX 64

struct tc_out {
	struct cm_buf *text;    /* the request's, reused token after token */
	uint8_t ch[TOOLS_ENTRIES_MAX];
	size_t off[TOOLS_ENTRIES_MAX], len[TOOLS_ENTRIES_MAX];
	size_t n;
	int reasoning;
};

/* A call as the TOKEN carries it: {"name", "arguments", "id"}. */
static enum cm_status call_json(struct cm_buf *b, const struct wk_tc_event *e)
{
	json_t *args = json_loads(e->args, 0, NULL);
	json_t *o = args ? json_pack("{s:s, s:o}", "name", e->name, "arguments", args) : NULL;
	char *txt;
	enum cm_status st;

	if (o && e->id)
		json_object_set_new(o, "id", json_string(e->id));
	txt = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!txt)
		return CM_ENOMEM;
	st = cm_buf_append_str(b, txt);
	free(txt);
	return st;
}

static enum cm_status on_event(void *ctx, const struct wk_tc_event *e)
{
	struct tc_out *o = ctx;
	size_t at = cm_buf_len(o->text);
	uint8_t ch = e->kind == WK_TC_CALL ? PROTO_CH_TOOL_CALL
		     : e->kind == WK_TC_REASONING ? PROTO_CH_REASONING : PROTO_CH_CONTENT;
	enum cm_status st;

	o->reasoning |= e->kind == WK_TC_REASONING;
	/* texts of one channel in a row are one entry */
	if (ch != PROTO_CH_TOOL_CALL && o->n > 0 && o->ch[o->n - 1] == ch) {
		st = cm_buf_append(o->text, e->text, e->len);
		if (st == CM_OK)
			o->len[o->n - 1] += e->len;
		return st;
	}
	if (o->n == TOOLS_ENTRIES_MAX)
		return CM_ELIMIT;
	st = ch == PROTO_CH_TOOL_CALL ? call_json(o->text, e) : cm_buf_append(o->text, e->text, e->len);
	if (st != CM_OK)
		return st;
	o->ch[o->n] = ch;
	o->off[o->n] = at;
	o->len[o->n] = cm_buf_len(o->text) - at;
	o->n++;
	return CM_OK;
}

void wk_serve_tools_emit(struct wk_serve_req *r, const struct proto_token *first,
			 const uint8_t *text, size_t len, int final)
{
	struct tc_out o;
	struct proto_token e[TOOLS_ENTRIES_MAX];
	struct proto_msg m;
	enum cm_status st;
	size_t n;

	memset(&o, 0, sizeof(o));
	cm_buf_reset(&r->tc_text);
	o.text = &r->tc_text;
	st = wk_tc_feed(r->tc, (const char *)text, len, on_event, &o);
	if (st == CM_OK && final)
		st = wk_tc_finish(r->tc, on_event, &o);
	if (st != CM_OK)
		cm_logf(CM_LOG_WARN, "toolcall_parse", "request %llu: events lost: %s",
			(unsigned long long)r->id, cm_status_str(st));
	if (first && (o.reasoning || (o.n == 0 && wk_tc_thinking(r->tc))))
		r->reasoning_tokens++;
	n = o.n;
	for (size_t i = 0; i < n; i++) {
		e[i] = i == 0 && first ? *first : (struct proto_token){ .id = UINT32_MAX };
		e[i].text.ptr = (const char *)cm_buf_data(o.text) + o.off[i];
		e[i].text.len = (uint32_t)o.len[i];
		e[i].channel = o.ch[i];
	}
	if (n == 0 && first) {
		/* held back: the token goes with no text (its logprobs, its count) */
		e[0] = *first;
		e[0].text.ptr = NULL;
		e[0].text.len = 0;
		n = 1;
	}
	if (n > 0 && r->conn) {
		memset(&m, 0, sizeof(m));
		m.type = PROTO_TOKEN;
		m.request_id = r->id;
		m.u.tokens.n = (uint32_t)n;
		m.u.tokens.tok = e;
		wk_serve_conn_send(r->conn, &m);
	}
}
