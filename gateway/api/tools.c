/*
 * tools.c - tool calling and thinking in the request bodies of both
 * dialects (docs/tools.md): `tools` (checked and written as the compact
 * array the worker renders), `tool_choice` and `parallel_tool_calls`
 * (OpenAI), the assistant's `tool_calls` and the `tool` messages in the
 * history (normalized to the worker's form), Ollama's `think` and OpenAI's
 * `chat_template_kwargs.enable_thinking`.
 */
#include "gateway/api/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"

/* A function name: 1..64 of [A-Za-z0-9_-] (OpenAI's rule). */
static int name_ok(const char *s, size_t n)
{
	if (n == 0 || n > GW_API_TOOL_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

/* A compact JSON text of v copied into the arena. */
static enum cm_status dump_to(struct cm_arena *a, const json_t *v, struct proto_str *out,
			      struct gw_api_error *err)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	size_t n;

	if (!t)
		return gw_api_oom(err);
	n = strlen(t);
	out->ptr = cm_arena_strndup(a, t, n);
	out->len = (uint32_t)n;
	free(t);
	return out->ptr ? CM_OK : gw_api_oom(err);
}

/* tools[i]: {"type": "function", "function": {"name", "description",
 * "parameters", "strict"}}; appended to `list` as the worker renders it. */
static enum cm_status one_tool(json_t *t, size_t i, json_t *list, struct gw_api_error *err)
{
	char f[96];
	json_t *type = json_object_get(t, "type"), *fn, *name, *desc, *params, *strict, *o, *fo;

	snprintf(f, sizeof(f), "tools[%zu]", i);
	if (!json_is_object(t))
		return gw_api_bad(err, f, "an object {\"type\": \"function\", \"function\": {...}}", t);
	snprintf(f, sizeof(f), "tools[%zu].type", i);
	if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
		return gw_api_bad(err, f, "\"function\"", type);
	snprintf(f, sizeof(f), "tools[%zu].function", i);
	fn = gw_api_field(t, "function");
	if (!json_is_object(fn))
		return gw_api_bad(err, f, "an object with name and parameters", fn);
	name = gw_api_field(fn, "name");
	snprintf(f, sizeof(f), "tools[%zu].function.name", i);
	if (!json_is_string(name) || !name_ok(json_string_value(name), json_string_length(name)))
		return gw_api_bad(err, f, "a name of 1 to 64 letters, digits, '_' or '-'", name);
	desc = gw_api_field(fn, "description");
	snprintf(f, sizeof(f), "tools[%zu].function.description", i);
	if (desc && !json_is_string(desc))
		return gw_api_bad(err, f, "a string", desc);
	params = gw_api_field(fn, "parameters");
	snprintf(f, sizeof(f), "tools[%zu].function.parameters", i);
	if (params && !json_is_object(params))
		return gw_api_bad(err, f, "a JSON Schema object", params);
	strict = gw_api_field(fn, "strict");
	snprintf(f, sizeof(f), "tools[%zu].function.strict", i);
	if (strict && !json_is_boolean(strict))
		return gw_api_bad(err, f, "true or false", strict);
	for (size_t k = 0; k < json_array_size(list); k++) {
		const char *other = json_string_value(json_object_get(
			json_object_get(json_array_get(list, k), "function"), "name"));

		if (strcmp(other, json_string_value(name)) == 0) {
			snprintf(f, sizeof(f), "tools[%zu].function.name", i);
			gw_api_error_set(err, 400, f, NULL, "%s: expected a name no other tool has, "
					 "found the name of tools[%zu]", f, k);
			return CM_EINVAL;
		}
	}
	o = json_object();
	fo = json_object();
	if (!o || !fo) {
		json_decref(o);
		json_decref(fo);
		return gw_api_oom(err);
	}
	json_object_set(fo, "name", name);
	if (desc)
		json_object_set(fo, "description", desc);
	if (params)
		json_object_set(fo, "parameters", params);
	json_object_set_new(o, "type", json_string("function"));
	json_object_set_new(o, "function", fo);
	json_array_append_new(list, o);
	return CM_OK;
}

/* tool_choice (OpenAI's; a Sluice extension in Ollama's): "none", "auto",
 * "required", or {"type": "function", "function": {"name"}} naming one of
 * the tools. */
static enum cm_status tool_choice(const json_t *root, const json_t *list, struct cm_arena *a,
				  struct gw_api_request *r, struct gw_api_error *err)
{
	json_t *c = gw_api_field(root, "tool_choice"), *name;
	static const char exp[] = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", "
				  "\"function\": {\"name\"}}";

	r->tool_choice = PROTO_TOOLS_AUTO;
	if (!c)
		return CM_OK;
	if (json_is_string(c)) {
		const char *s = json_string_value(c);

		if (strcmp(s, "none") == 0)
			r->tool_choice = PROTO_TOOLS_NONE;
		else if (strcmp(s, "auto") == 0)
			r->tool_choice = PROTO_TOOLS_AUTO;
		else if (strcmp(s, "required") == 0)
			r->tool_choice = PROTO_TOOLS_REQUIRED;
		else
			return gw_api_bad(err, "tool_choice", exp, c);
	} else if (json_is_object(c)) {
		name = json_object_get(gw_api_field(c, "function"), "name");
		if (!json_is_string(name))
			return gw_api_bad(err, "tool_choice.function.name", "a string", name);
		r->tool_choice = PROTO_TOOLS_NAMED;
		for (size_t k = 0; k < json_array_size(list); k++)
			if (strcmp(json_string_value(json_object_get(json_object_get(json_array_get(list, k),
									       "function"), "name")),
				   json_string_value(name)) == 0)
				return gw_api_copy_str(a, name, &r->tool_name, err);
		gw_api_error_set(err, 400, "tool_choice.function.name", NULL,
				 "tool_choice.function.name: expected the name of one of the tools, "
				 "found one that none has");
		return CM_EINVAL;
	} else {
		return gw_api_bad(err, "tool_choice", exp, c);
	}
	if (r->tool_choice >= PROTO_TOOLS_REQUIRED && json_array_size(list) == 0) {
		gw_api_error_set(err, 400, "tool_choice", NULL,
				 "tool_choice: expected tools to choose from, found none");
		return CM_EINVAL;
	}
	return CM_OK;
}

enum cm_status gw_api_tools(const json_t *root, const struct gw_api_limits *lim,
			    struct cm_arena *a, struct gw_api_request *r, struct gw_api_error *err)
{
	json_t *tools = gw_api_field(root, "tools"), *list, *t;
	enum cm_status st = CM_OK;
	size_t i;
	int par = 1;

	if (tools && !json_is_array(tools))
		return gw_api_bad(err, "tools", "an array of tools", tools);
	if (json_array_size(tools) > lim->tools) {
		gw_api_error_set(err, 400, "tools", NULL, "tools: expected at most %u tools "
				 "(limits.tools), found %zu", lim->tools, json_array_size(tools));
		return CM_EINVAL;
	}
	list = json_array();
	if (!list)
		return gw_api_oom(err);
	json_array_foreach(tools, i, t) {
		st = one_tool(t, i, list, err);
		if (st != CM_OK)
			goto out;
	}
	/* Ollama has neither: Sluice takes them there too (an extension) */
	st = tool_choice(root, list, a, r, err);
	if (st == CM_OK)
		st = gw_api_get_bool(root, "parallel_tool_calls", "parallel_tool_calls", &par, err);
	if (st != CM_OK)
		goto out;
	r->parallel_tool_calls = par != 0;
	if (json_array_size(list) > 0) {
		st = dump_to(a, list, &r->tools, err);
		if (st == CM_OK && r->tools.len > lim->tools_bytes) {
			gw_api_error_set(err, 400, "tools", NULL, "tools: expected at most %u bytes of "
					 "tools as compact JSON (limits.tools_bytes), found %u",
					 lim->tools_bytes, r->tools.len);
			st = CM_EINVAL;
		}
	} else if (r->tool_choice == PROTO_TOOLS_AUTO) {
		r->tool_choice = PROTO_TOOLS_NONE; /* nothing to call */
	}
	if (st == CM_OK && r->tool_choice >= PROTO_TOOLS_REQUIRED && r->constraint_kind) {
		gw_api_error_set(err, 400, "tool_choice", NULL, "tool_choice: a forced tool call and "
				 "%s cannot both constrain the answer", r->constraint_param);
		st = CM_EINVAL;
	}
out:
	json_decref(list);
	return st;
}

static enum cm_status think_switch(const json_t *root, struct gw_api_request *r,
				   struct gw_api_error *err)
{
	json_t *kw = gw_api_field(root, "chat_template_kwargs");
	int on = 0;
	enum cm_status st;

	if (r->style == GW_STYLE_OLLAMA) {
		json_t *t = gw_api_field(root, "think");

		if (!t)
			return CM_OK;
		if (!json_is_boolean(t))
			return gw_api_bad(err, "think", "true or false", t);
		r->think = json_is_true(t) ? PROTO_THINK_ON : PROTO_THINK_OFF;
		return CM_OK;
	}
	if (!kw)
		return CM_OK;
	if (!json_is_object(kw))
		return gw_api_bad(err, "chat_template_kwargs", "an object", kw);
	if (!gw_api_field(kw, "enable_thinking"))
		return CM_OK;
	st = gw_api_get_bool(kw, "enable_thinking", "chat_template_kwargs.enable_thinking", &on, err);
	if (st == CM_OK)
		r->think = on ? PROTO_THINK_ON : PROTO_THINK_OFF;
	return st;
}

enum cm_status gw_api_think(const json_t *root, const struct gw_api_limits *lim,
			    struct gw_api_request *r, struct gw_api_error *err)
{
	json_int_t budget = 0;
	int given = 0;
	enum cm_status st;

	r->think = PROTO_THINK_DEFAULT;
	r->think_budget = lim->thinking_token_budget;
	st = think_switch(root, r, err);
	if (st == CM_OK)
		st = gw_api_get_int(root, "thinking_token_budget", "thinking_token_budget", 0,
				    CM_LIM_THINKING_TOKEN_BUDGET_MAX, &budget, &given, err);
	if (st != CM_OK || !given)
		return st;
	/* no tokens to think: the family's no-thinking form */
	if (budget == 0 && r->think == PROTO_THINK_ON) {
		gw_api_error_set(err, 400, "thinking_token_budget", NULL, "thinking_token_budget: 0 "
				 "turns thinking off, and the request asks for it to be on");
		return CM_EINVAL;
	}
	if (budget == 0)
		r->think = PROTO_THINK_OFF;
	r->think_budget = (uint32_t)budget;
	return CM_OK;
}

/*
 * An assistant message's tool_calls, normalized to [{"id", "name",
 * "arguments": object}]: OpenAI's {"id", "type", "function": {"name",
 * "arguments": a string holding an object}} or Ollama's {"function":
 * {"name", "arguments": object}}.
 */
static enum cm_status message_calls(json_t *calls, size_t i, enum gw_api_style style,
				    struct cm_arena *a, struct proto_message *pm,
				    struct gw_api_error *err)
{
	json_t *list = json_array(), *c;
	size_t k;
	char f[96];
	enum cm_status st = CM_OK;

	if (!list)
		return gw_api_oom(err);
	json_array_foreach(calls, k, c) {
		json_t *fn = gw_api_field(c, "function"), *name = json_object_get(fn, "name");
		json_t *args = json_object_get(fn, "arguments"), *id = gw_api_field(c, "id"), *o;

		snprintf(f, sizeof(f), "messages[%zu].tool_calls[%zu].function.name", i, k);
		if (!json_is_string(name) || !name_ok(json_string_value(name), json_string_length(name))) {
			st = gw_api_bad(err, f, "a function name", name);
			break;
		}
		snprintf(f, sizeof(f), "messages[%zu].tool_calls[%zu].function.arguments", i, k);
		if (json_is_string(args))
			args = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
		else if (!args && style == GW_STYLE_OLLAMA)
			args = json_object();
		else
			args = json_incref(args);
		if (!json_is_object(args)) {
			json_decref(args);
			st = gw_api_bad(err, f, style == GW_STYLE_OPENAI ? "a string holding a JSON object"
									 : "an object", json_object_get(fn, "arguments"));
			break;
		}
		snprintf(f, sizeof(f), "messages[%zu].tool_calls[%zu].id", i, k);
		if (id && !json_is_string(id)) {
			json_decref(args);
			st = gw_api_bad(err, f, "a string", id);
			break;
		}
		if (style == GW_STYLE_OPENAI && !id) {
			json_decref(args);
			st = gw_api_bad(err, f, "the call's id", id);
			break;
		}
		o = json_pack("{s:s, s:O, s:o}", "id", id ? json_string_value(id) : "", "name", name,
			      "arguments", args);
		if (!o) {
			st = gw_api_oom(err);
			break;
		}
		json_array_append_new(list, o);
	}
	if (st == CM_OK && json_array_size(list) > 0)
		st = dump_to(a, list, &pm->tool_calls, err);
	json_decref(list);
	return st;
}

enum cm_status gw_api_message_tools(json_t *m, size_t i, struct cm_arena *a,
				    struct gw_api_request *r, struct gw_api_error *err)
{
	struct proto_message *pm = &r->messages[i];
	json_t *calls = gw_api_field(m, "tool_calls"), *id = gw_api_field(m, "tool_call_id");
	char f[64];

	if (calls) {
		snprintf(f, sizeof(f), "messages[%zu].tool_calls", i);
		if (strcmp(pm->role.ptr, "assistant") != 0)
			return gw_api_bad(err, f, "no tool calls outside assistant messages", calls);
		if (!json_is_array(calls))
			return gw_api_bad(err, f, "an array of tool calls", calls);
		if (json_array_size(calls) > 0) {
			enum cm_status st = message_calls(calls, i, r->style, a, pm, err);

			if (st != CM_OK)
				return st;
		}
	}
	if (strcmp(pm->role.ptr, "tool") != 0)
		return CM_OK;
	snprintf(f, sizeof(f), "messages[%zu].tool_call_id", i);
	if (id && !json_is_string(id))
		return gw_api_bad(err, f, "a string", id);
	if (!id) {
		if (r->style == GW_STYLE_OPENAI)
			return gw_api_bad(err, f, "the id of the call this answers", id);
		return CM_OK; /* Ollama: results follow their calls in order */
	}
	/* the id of a call an earlier assistant message made */
	for (size_t k = i; k-- > 0;) {
		const struct proto_message *prev = &r->messages[k];
		json_t *list;
		size_t c;
		json_t *e;

		if (!prev->tool_calls.len)
			continue;
		list = json_loadb(prev->tool_calls.ptr, prev->tool_calls.len, 0, NULL);
		json_array_foreach(list, c, e)
			if (strcmp(json_string_value(json_object_get(e, "id")), json_string_value(id)) == 0) {
				json_decref(list);
				return gw_api_copy_str(a, id, &pm->tool_call_id, err);
			}
		json_decref(list);
	}
	gw_api_error_set(err, 400, f, NULL, "%s: expected the id of a tool call of an earlier "
			 "assistant message, found one that none has", f);
	return CM_EINVAL;
}
