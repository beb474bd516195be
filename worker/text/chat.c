/*
 * chat.c - built-in chat prompt formats (see chat.h).
 *
 * Each family is a small renderer that emits segments: literal template
 * text from this file (special tokens allowed) and slices of the message
 * contents (plain text).  Nothing from the model's Jinja template is
 * interpreted; it is only searched for identifying markers.
 */
#include "worker/text/chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/alloc.h"
#include "common/limits.h"
#include "worker/text/toolcall.h"

enum chat_family {
	CHAT_LLAMA3,
	CHAT_LLAMA2,
	CHAT_MISTRAL,
	CHAT_CHATML,
	CHAT_PHI3,
	CHAT_PHI4,
	CHAT_GRANITE,
	CHAT_GEMMA,
	CHAT_ZEPHYR,
	CHAT_PLAIN,
};

struct wk_chat_template {
	enum chat_family family;
	const char *name;
};

static const struct wk_chat_template chat_templates[] = {
	{ CHAT_LLAMA3, "llama3" },
	{ CHAT_LLAMA2, "llama2" },
	{ CHAT_MISTRAL, "mistral" },
	{ CHAT_CHATML, "chatml" },
	{ CHAT_PHI3, "phi3" },
	{ CHAT_PHI4, "phi4" },
	{ CHAT_GRANITE, "granite" },
	{ CHAT_GEMMA, "gemma" },
	{ CHAT_ZEPHYR, "zephyr" },
	{ CHAT_PLAIN, "plain" },
};
#define N_TEMPLATES (sizeof(chat_templates) / sizeof(chat_templates[0]))

static const char chat_names[] =
	"llama3, llama2, mistral, chatml, phi3, phi4, granite, gemma, zephyr, plain";

enum chat_role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL };
#define N_ROLES 4

static const char *const role_names[] = { "system", "user", "assistant", "tool" };

const char *wk_chat_template_names(void)
{
	return chat_names;
}

const char *wk_chat_template_name(const struct wk_chat_template *t)
{
	return t->name;
}

const struct wk_chat_template *wk_chat_template_by_name(const char *name, char *err,
							size_t err_len)
{
	for (size_t i = 0; name && i < N_TEMPLATES; i++)
		if (strcmp(chat_templates[i].name, name) == 0)
			return &chat_templates[i];
	if (err_len)
		snprintf(err, err_len, "unknown chat template \"%.64s\": expected one of %s",
			 name ? name : "(null)", chat_names);
	return NULL;
}

static int has(const char *s, size_t len, const char *needle)
{
	return memmem(s, len, needle, strlen(needle)) != NULL;
}

/* <|user|> / <|assistant|> tags, written out or built from the role name. */
static int role_tags(const char *j, size_t len)
{
	return has(j, len, "<|user|>") || has(j, len, "<|assistant|>") ||
	       has(j, len, "'<|' + message['role'] + '|>") ||
	       has(j, len, "\"<|\" + message[\"role\"] + \"|>");
}

const struct wk_chat_template *wk_chat_template_detect(const char *j, size_t len)
{
	enum chat_family f;

	if (!j)
		return NULL;
	if (has(j, len, "<|start_header_id|>"))
		f = CHAT_LLAMA3;
	else if (has(j, len, "<|im_sep|>"))
		f = CHAT_PHI4; /* chatml's tags, <|im_sep|> after the role */
	else if (has(j, len, "<|start_of_role|>"))
		f = CHAT_GRANITE;
	else if (has(j, len, "<|im_start|>"))
		f = CHAT_CHATML;
	else if (has(j, len, "<start_of_turn>"))
		f = CHAT_GEMMA;
	else if (has(j, len, "<|end|>") && role_tags(j, len))
		f = CHAT_PHI3;
	else if (role_tags(j, len) && (has(j, len, "</s>") || has(j, len, "eos_token")))
		f = CHAT_ZEPHYR;
	else if (has(j, len, "[INST]"))
		f = has(j, len, "<<SYS>>") ? CHAT_LLAMA2 : CHAT_MISTRAL;
	else
		return NULL;
	for (size_t i = 0; i < N_TEMPLATES; i++)
		if (chat_templates[i].family == f)
			return &chat_templates[i];
	return NULL;
}

/* ---- segments ---- */

static int seg_add(struct wk_chat_prompt *p, const char *s, size_t len, int special)
{
	if (len == 0)
		return 0;
	if (p->n == p->cap) {
		size_t nc = p->cap ? p->cap * 2 : 32;
		struct wk_tok_seg *ns = cm_reallocarray(p->segs, nc, sizeof(*ns));

		if (!ns)
			return -1;
		p->segs = ns;
		p->cap = nc;
	}
	p->segs[p->n++] = (struct wk_tok_seg){ s, len, special };
	return 0;
}

static int tmpl(struct wk_chat_prompt *p, const char *s)
{
	return seg_add(p, s, strlen(s), 1);
}

static int text(struct wk_chat_prompt *p, const struct wk_chat_msg *m, int trim)
{
	const char *s = m->content ? m->content : "";
	size_t len = m->content ? m->content_len : 0;

	if (trim) {
		while (len && (*s == ' ' || (*s >= 9 && *s <= 13))) {
			s++;
			len--;
		}
		while (len && (s[len - 1] == ' ' || (s[len - 1] >= 9 && s[len - 1] <= 13)))
			len--;
	}
	return seg_add(p, s, len, 0);
}

/* Keeps text the rendering wrote (malloc'd; taken, freed on failure)
 * until the prompt is freed. */
static int own_keep(struct wk_chat_prompt *p, char *s)
{
	if (!s)
		return -1;
	if (p->n_own == p->cap_own) {
		size_t nc = p->cap_own ? p->cap_own * 2 : 8;
		char **no = cm_reallocarray(p->own, nc, sizeof(*no));

		if (!no) {
			free(s);
			return -1;
		}
		p->own = no;
		p->cap_own = nc;
	}
	p->own[p->n_own++] = s;
	return 0;
}

/* The same as a message-text segment (never parsed for special tokens). */
static int own_text(struct wk_chat_prompt *p, char *s)
{
	return own_keep(p, s) || seg_add(p, s, strlen(s), 0);
}

void wk_chat_prompt_deinit(struct wk_chat_prompt *p)
{
	for (size_t i = 0; i < p->n_own; i++)
		free(p->own[i]);
	cm_free(p->own);
	cm_free(p->segs);
	memset(p, 0, sizeof(*p));
}

/* ---- validation ---- */

/* Families without a system turn: a system message's text opens the next
 * user turn instead. */
static int folds_system(const struct wk_chat_template *t)
{
	return t->family == CHAT_LLAMA2 || t->family == CHAT_MISTRAL || t->family == CHAT_GEMMA;
}

/*
 * Roles known; turns alternating where the family needs it; a system
 * message anywhere (rendered in place, or folded into the next user turn
 * where the family has no system turn, so one after the last user turn is
 * refused there).
 */
static enum cm_status check_roles(const struct wk_chat_template *t, const struct wk_chat_msg *m,
				  size_t n, enum chat_role *roles, char *err, size_t err_len)
{
	int alternate = t->family == CHAT_LLAMA2 || t->family == CHAT_MISTRAL;
	size_t turn = 0, pending_sys = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		size_t r;

		for (r = 0; r < N_ROLES; r++)
			if (m[i].role && strcmp(m[i].role, role_names[r]) == 0)
				break;
		if (r == N_ROLES) {
			snprintf(err, err_len, "messages[%zu].role: unknown role \"%.32s\" "
				 "(expected system, user, assistant or tool)", i, m[i].role ? m[i].role : "");
			return CM_EINVAL;
		}
		roles[i] = (enum chat_role)r;
		if (roles[i] == ROLE_SYSTEM) {
			if (pending_sys == SIZE_MAX)
				pending_sys = i;
			continue;
		}
		/* tool results and the calls they answer are outside the
		 * user/assistant alternation (as in Mistral's own template) */
		if (roles[i] == ROLE_TOOL || (roles[i] == ROLE_ASSISTANT && m[i].tool_calls))
			continue;
		if (roles[i] == ROLE_USER)
			pending_sys = SIZE_MAX;
		if (alternate && roles[i] != (turn % 2 == 0 ? ROLE_USER : ROLE_ASSISTANT)) {
			snprintf(err, err_len, "messages[%zu].role: the %s template needs user and assistant "
				 "turns to alternate, starting with user; found %s", i, t->name,
				 role_names[roles[i]]);
			return CM_EINVAL;
		}
		turn++;
	}
	if (pending_sys != SIZE_MAX && folds_system(t)) {
		snprintf(err, err_len, "messages[%zu].role: the %s template has no system turn and puts a "
			 "system message into the next user turn; found none after it",
			 pending_sys, t->name);
		return CM_EINVAL;
	}
	return CM_OK;
}

/*
 * The system messages among m[from..to) (none of them user turns), each
 * followed by "\n\n": how a family without a system turn opens the user
 * turn m[to] with them.  `from` SIZE_MAX: none.
 */
static int fold_system(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
		       const enum chat_role *r, size_t from, size_t to, int trim)
{
	for (size_t k = from; from != SIZE_MAX && k < to; k++)
		if (r[k] == ROLE_SYSTEM && (text(p, &m[k], trim) || tmpl(p, "\n\n")))
			return -1;
	return 0;
}

/* ---- families ---- */

/*
 * A base model's (no template in the file; Ollama's default "{{ .Prompt }}"):
 * the contents one after another, separated by a blank line, no roles, no
 * generation prompt: a single user message is the prompt as it is.
 */
static int render_plain(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			const enum chat_role *r, size_t n, int gen)
{
	(void)r;
	(void)gen;
	for (size_t i = 0; i < n; i++)
		if ((i > 0 && tmpl(p, "\n\n")) || text(p, &m[i], 0))
			return -1;
	return 0;
}

/*
 * The families with a turn per role: hdr[role] + content (trimmed when
 * `trim`) + `end` for each message, then the assistant header to prompt
 * generation.
 */
static int render_turns(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			const enum chat_role *r, size_t n, int gen, const char *const hdr[3],
			const char *end, int trim)
{
	for (size_t i = 0; i < n; i++)
		if (tmpl(p, hdr[r[i]]) || text(p, &m[i], trim) || tmpl(p, end))
			return -1;
	return gen ? tmpl(p, hdr[ROLE_ASSISTANT]) : 0;
}

static const char *const llama3_hdr[] = {
	"<|start_header_id|>system<|end_header_id|>\n\n",
	"<|start_header_id|>user<|end_header_id|>\n\n",
	"<|start_header_id|>assistant<|end_header_id|>\n\n",
};
static const char *const chatml_hdr[] = {
	"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n",
};
/* Phi-4: chatml's tags with <|im_sep|> after the role, no newlines */
static const char *const phi4_hdr[] = {
	"<|im_start|>system<|im_sep|>", "<|im_start|>user<|im_sep|>",
	"<|im_start|>assistant<|im_sep|>",
};
/* IBM Granite 3.x */
static const char *const granite_hdr[] = {
	"<|start_of_role|>system<|end_of_role|>", "<|start_of_role|>user<|end_of_role|>",
	"<|start_of_role|>assistant<|end_of_role|>",
};
/* phi3 and zephyr share the tags; their turns end differently */
static const char *const tag_hdr[] = { "<|system|>\n", "<|user|>\n", "<|assistant|>\n" };

/* Gemma has no system role: the system text opens the first user turn. */
static int render_gemma(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			const enum chat_role *r, size_t n, int gen)
{
	size_t sys = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		if (r[i] == ROLE_SYSTEM) {
			if (sys == SIZE_MAX)
				sys = i;
			continue;
		}
		if (tmpl(p, r[i] == ROLE_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n"))
			return -1;
		if (r[i] == ROLE_USER) {
			if (fold_system(p, m, r, sys, i, 1))
				return -1;
			sys = SIZE_MAX;
		}
		if (text(p, &m[i], 1) || tmpl(p, "<end_of_turn>\n"))
			return -1;
	}
	return gen ? tmpl(p, "<start_of_turn>model\n") : 0;
}

/*
 * Llama 2 chat: "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]
 * {assistant} </s><s>[INST] {user} [/INST]"; the first <s> is the BOS.
 */
static int render_llama2(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			 const enum chat_role *r, size_t n, int gen)
{
	size_t sys = SIZE_MAX, turn = 0;

	(void)gen; /* the prompt already ends with [/INST] */
	for (size_t i = 0; i < n; i++) {
		if (r[i] == ROLE_SYSTEM) {
			if (sys == SIZE_MAX)
				sys = i;
			continue;
		}
		if (r[i] == ROLE_ASSISTANT) {
			if (tmpl(p, " ") || text(p, &m[i], 1) || tmpl(p, " </s>"))
				return -1;
			continue;
		}
		if (turn++ > 0 && tmpl(p, "<s>"))
			return -1;
		if (tmpl(p, "[INST] "))
			return -1;
		if (sys != SIZE_MAX) {
			/* several system messages: one <<SYS>> block, joined by "\n\n" */
			int first = 1;

			if (tmpl(p, "<<SYS>>\n"))
				return -1;
			for (size_t k = sys; k < i; k++) {
				if (r[k] != ROLE_SYSTEM)
					continue;
				if ((!first && tmpl(p, "\n\n")) || text(p, &m[k], 1))
					return -1;
				first = 0;
			}
			if (tmpl(p, "\n<</SYS>>\n\n"))
				return -1;
			sys = SIZE_MAX;
		}
		if (text(p, &m[i], 1) || tmpl(p, " [/INST]"))
			return -1;
	}
	return 0;
}

/* ---- tools (docs/tools.md) ---- */

int wk_chat_tool_family(const struct wk_chat_template *t)
{
	switch (t->family) {
	case CHAT_LLAMA3: return WK_TC_LLAMA3;
	case CHAT_CHATML: return WK_TC_HERMES;
	case CHAT_MISTRAL: return WK_TC_MISTRAL;
	default: return WK_TC_JSON;
	}
}

/* A JSON value as text: `flags` of json_dumps (0: Python's json.dumps
 * separators, as the families' templates write it). */
static char *dump(const json_t *v, size_t flags)
{
	return json_dumps(v, flags | JSON_ENCODE_ANY);
}

/* The tools array, checked: each {"type": "function", "function":
 * {"name": string, ...}}.  *out NULL when there are none. */
static enum cm_status tools_parse(const struct wk_chat_opts *o, json_t **out, char *err,
				  size_t err_len)
{
	json_t *v;
	size_t i;
	json_t *t;

	*out = NULL;
	if (!o || !o->tools || o->tools_len == 0)
		return CM_OK;
	v = json_loadb(o->tools, o->tools_len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_array(v)) {
		json_decref(v);
		snprintf(err, err_len, "tools: expected a JSON array of tools");
		return CM_EINVAL;
	}
	json_array_foreach(v, i, t) {
		json_t *f = json_object_get(t, "function");

		if (!json_is_object(f) || !json_is_string(json_object_get(f, "name"))) {
			snprintf(err, err_len, "tools[%zu]: expected {\"type\": \"function\", \"function\": "
				 "{\"name\", ...}}", i);
			json_decref(v);
			return CM_EINVAL;
		}
	}
	if (json_array_size(v) == 0) {
		json_decref(v);
		return CM_OK;
	}
	*out = v;
	return CM_OK;
}

/* An assistant message's calls: [{"id", "name", "arguments": object}]. */
static enum cm_status calls_parse(const struct wk_chat_msg *m, size_t idx, json_t **out,
				  char *err, size_t err_len)
{
	json_t *v, *c;
	size_t i;

	*out = NULL;
	if (!m->tool_calls)
		return CM_OK;
	v = json_loadb(m->tool_calls, m->tool_calls_len, 0, NULL);
	if (!json_is_array(v))
		goto bad;
	json_array_foreach(v, i, c)
		if (!json_is_string(json_object_get(c, "name")) ||
		    !json_is_object(json_object_get(c, "arguments")))
			goto bad;
	*out = v;
	return CM_OK;
bad:
	json_decref(v);
	snprintf(err, err_len, "messages[%zu].tool_calls: expected an array of {\"id\", \"name\", "
		 "\"arguments\": object}", idx);
	return CM_EINVAL;
}

/* '{"name": "<name>", "<key>": <arguments>}' as the families write a call
 * (the name as it is, the arguments as JSON); `id` adds Mistral's id. */
static char *call_text(const json_t *c, const char *key, int with_id)
{
	char *args = dump(json_object_get(c, "arguments"), 0), *out = NULL;
	const char *name = json_string_value(json_object_get(c, "name"));
	const char *id = json_string_value(json_object_get(c, "id"));
	size_t n;

	if (!args)
		return NULL;
	n = strlen(name) + strlen(args) + strlen(key) + (id ? strlen(id) : 0) + 48;
	out = malloc(n);
	if (out) {
		if (with_id)
			snprintf(out, n, "{\"name\": \"%s\", \"%s\": %s, \"id\": \"%s\"}", name, key, args,
				 id ? id : "");
		else
			snprintf(out, n, "{\"name\": \"%s\", \"%s\": %s}", name, key, args);
	}
	free(args);
	return out;
}

/* Joins the rendering of each element of `list` with `sep` (malloc'd). */
static char *join(const json_t *list, const char *sep, char *(*one)(const json_t *, const void *),
		  const void *arg)
{
	struct cm_buf b;
	size_t i;
	json_t *e;
	char *out = NULL;

	cm_buf_init(&b, 64u << 20);
	json_array_foreach(list, i, e) {
		char *t = one(e, arg);

		if (!t || (i > 0 && cm_buf_append_str(&b, sep) != CM_OK) ||
		    cm_buf_append_str(&b, t) != CM_OK) {
			free(t);
			goto out;
		}
		free(t);
	}
	out = malloc(cm_buf_len(&b) + 1);
	if (out) {
		memcpy(out, cm_buf_data(&b), cm_buf_len(&b));
		out[cm_buf_len(&b)] = '\0';
	}
out:
	cm_buf_deinit(&b);
	return out;
}

static char *one_dump(const json_t *e, const void *flags)
{
	return dump(e, *(const size_t *)flags);
}

static char *one_call(const json_t *e, const void *key)
{
	return call_text(e, key, 0);
}

static char *one_mistral_call(const json_t *e, const void *key)
{
	return call_text(e, key, 1);
}

static const size_t F_PY = 0, F_INDENT4 = JSON_INDENT(4), F_COMPACT = JSON_COMPACT;

/* Qwen2.5 / Qwen3 / Hermes: the # Tools block of the system turn. */
static int chatml_tools(struct wk_chat_prompt *p, const json_t *tools)
{
	return tmpl(p, "# Tools\n\nYou may call one or more functions to assist with the user query."
		       "\n\nYou are provided with function signatures within <tools></tools> XML tags:"
		       "\n<tools>\n") ||
	       own_text(p, join(tools, "\n", one_dump, &F_PY)) ||
	       tmpl(p, "\n</tools>\n\nFor each function call, return a json object with function name "
		       "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
		       "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
}

/* chatml with tools, tool calls and tool results (Qwen2.5's template). */
static int render_chatml(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			 const enum chat_role *r, json_t *const *calls, size_t n, int gen,
			 const json_t *tools)
{
	size_t i = 0;

	if (tools) {
		if (tmpl(p, chatml_hdr[ROLE_SYSTEM]))
			return -1;
		if (n > 0 && r[0] == ROLE_SYSTEM) {
			if (text(p, &m[0], 0) || tmpl(p, "\n\n"))
				return -1;
			i = 1;
		}
		if (chatml_tools(p, tools) || tmpl(p, "<|im_end|>\n"))
			return -1;
	}
	for (; i < n; i++) {
		if (r[i] == ROLE_TOOL) {
			if ((i == 0 || r[i - 1] != ROLE_TOOL) && tmpl(p, "<|im_start|>user"))
				return -1;
			if (tmpl(p, "\n<tool_response>\n") || text(p, &m[i], 0) ||
			    tmpl(p, "\n</tool_response>"))
				return -1;
			if ((i + 1 == n || r[i + 1] != ROLE_TOOL) && tmpl(p, "<|im_end|>\n"))
				return -1;
			continue;
		}
		if (tmpl(p, chatml_hdr[r[i]]) || text(p, &m[i], 0))
			return -1;
		for (size_t k = 0; calls[i] && k < json_array_size(calls[i]); k++)
			if (((m[i].content_len > 0 || k > 0) && tmpl(p, "\n")) ||
			    tmpl(p, "<tool_call>\n") ||
			    own_text(p, call_text(json_array_get(calls[i], k), "arguments", 0)) ||
			    tmpl(p, "\n</tool_call>"))
				return -1;
		if (tmpl(p, "<|im_end|>\n"))
			return -1;
	}
	return gen ? tmpl(p, chatml_hdr[ROLE_ASSISTANT]) : 0;
}

/* Llama 3.1-3.3 with JSON tool calling: the tools open the first user
 * message, calls are the assistant's JSON, results come from ipython. */
static int render_llama3(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			 const enum chat_role *r, json_t *const *calls, size_t n, int gen,
			 const json_t *tools)
{
	int tools_done = tools == NULL;

	for (size_t i = 0; i < n; i++) {
		if (r[i] == ROLE_TOOL) {
			if (tmpl(p, "<|start_header_id|>ipython<|end_header_id|>\n\n") ||
			    text(p, &m[i], 1) || tmpl(p, "<|eot_id|>"))
				return -1;
			continue;
		}
		if (tmpl(p, llama3_hdr[r[i]]))
			return -1;
		if (r[i] == ROLE_USER && !tools_done) {
			tools_done = 1;
			if (tmpl(p, "Given the following functions, please respond with a JSON for a "
				    "function call with its proper arguments that best answers the given "
				    "prompt.\n\nRespond in the format {\"name\": function name, "
				    "\"parameters\": dictionary of argument name and its value}.Do not "
				    "use variables.\n\n") ||
			    own_text(p, join(tools, "\n\n", one_dump, &F_INDENT4)) || tmpl(p, "\n\n"))
				return -1;
		}
		if (text(p, &m[i], 1))
			return -1;
		if (calls[i] && own_text(p, join(calls[i], "; ", one_call, "parameters")))
			return -1;
		if (tmpl(p, "<|eot_id|>"))
			return -1;
	}
	return gen ? tmpl(p, llama3_hdr[ROLE_ASSISTANT]) : 0;
}

/* The generic JSON form for families without tool syntax: the tools and
 * how to call them in the system text, calls as that JSON, results as
 * user turns.  Writes the messages to render into *out (owned texts in p). */
static int generic_tools(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			 json_t *const *calls, size_t n, const json_t *tools,
			 struct wk_chat_msg **out, size_t *n_out)
{
	struct wk_chat_msg *w = cm_calloc(n + 1, sizeof(*w));
	size_t k = 0, i = 0;
	char *sys, *tl;
	size_t len;
	/* a first system message: the tools' text follows its own */
	int has_sys = n > 0 && strcmp(m[0].role, "system") == 0;

	if (!w)
		return -1;
	*out = w;
	if (tools) {
		tl = join(tools, "\n", one_dump, &F_COMPACT);
		if (!tl)
			return -1;
		len = strlen(tl) + 512 + (has_sys ? m[0].content_len : 0);
		sys = malloc(len);
		if (!sys) {
			free(tl);
			return -1;
		}
		snprintf(sys, len, "%.*s%sYou can call these tools (each a JSON object with its name, "
			 "description and parameters as a JSON Schema):\n%s\n\nTo call one or more of "
			 "them, answer with only this JSON: {\"tool_calls\": [{\"name\": \"<tool name>\", "
			 "\"arguments\": {<the arguments>}}]}. Otherwise answer normally.",
			 has_sys ? (int)m[0].content_len : 0, has_sys ? m[0].content : "",
			 has_sys ? "\n\n" : "", tl);
		free(tl);
		if (has_sys)
			i = 1;
		w[k].role = "system";
		w[k].content = sys;
		w[k].content_len = strlen(sys);
		k++;
		if (own_keep(p, sys))
			return -1;
	}
	for (; i < n; i++, k++) {
		w[k] = m[i];
		w[k].tool_calls = NULL;
		if (strcmp(m[i].role, "tool") == 0) {
			len = m[i].content_len + m[i].tool_call_id_len + 64;
			sys = malloc(len);
			if (own_keep(p, sys))
				return -1;
			snprintf(sys, len, "Tool result (call %.*s):\n%.*s", (int)m[i].tool_call_id_len,
				 m[i].tool_call_id ? m[i].tool_call_id : "", (int)m[i].content_len,
				 m[i].content ? m[i].content : "");
			w[k].role = "user";
			w[k].content = sys;
			w[k].content_len = strlen(sys);
		} else if (calls[i]) {
			json_t *o = json_object(), *list = json_array();
			size_t c;
			json_t *e;

			json_array_foreach(calls[i], c, e) {
				json_t *one = json_object();

				json_object_set(one, "name", json_object_get(e, "name"));
				json_object_set(one, "arguments", json_object_get(e, "arguments"));
				json_array_append_new(list, one);
			}
			json_object_set_new(o, "tool_calls", list);
			sys = dump(o, JSON_COMPACT);
			json_decref(o);
			if (own_keep(p, sys))
				return -1;
			w[k].content = sys;
			w[k].content_len = strlen(sys);
		}
	}
	*n_out = k;
	return 0;
}

/*
 * Mistral Instruct: "[INST] {user} [/INST]{assistant}</s>[INST] ..."; a
 * system message is folded into the first user turn ("{system}\n\n{user}").
 * With tools (v3 tokenizer's template): "[AVAILABLE_TOOLS] [...]
 * [/AVAILABLE_TOOLS]" before the last user turn, calls as "[TOOL_CALLS]
 * [{"name", "arguments", "id"}]</s>", results as "[TOOL_RESULTS]
 * {"content": ..., "call_id": "..."}[/TOOL_RESULTS]".
 */
static int render_mistral(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			  const enum chat_role *r, json_t *const *calls, size_t n, int gen,
			  const json_t *tools)
{
	size_t sys = SIZE_MAX, last_user = SIZE_MAX;

	(void)gen;
	for (size_t i = 0; i < n; i++)
		if (r[i] == ROLE_USER)
			last_user = i;
	for (size_t i = 0; i < n; i++) {
		if (r[i] == ROLE_SYSTEM) {
			if (sys == SIZE_MAX)
				sys = i;
			continue;
		}
		if (r[i] == ROLE_TOOL) {
			if (tmpl(p, "[TOOL_RESULTS] {\"content\": ") || text(p, &m[i], 0) ||
			    tmpl(p, ", \"call_id\": \"") ||
			    seg_add(p, m[i].tool_call_id ? m[i].tool_call_id : "", m[i].tool_call_id_len, 0) ||
			    tmpl(p, "\"}[/TOOL_RESULTS]"))
				return -1;
			continue;
		}
		if (r[i] == ROLE_ASSISTANT && calls[i]) {
			if (tmpl(p, "[TOOL_CALLS] [") ||
			    own_text(p, join(calls[i], ", ", one_mistral_call, "arguments")) ||
			    tmpl(p, "]</s>"))
				return -1;
			continue;
		}
		if (r[i] == ROLE_ASSISTANT) {
			if (text(p, &m[i], 0) || tmpl(p, "</s>"))
				return -1;
			continue;
		}
		if (tools && i == last_user &&
		    (tmpl(p, "[AVAILABLE_TOOLS] [") || own_text(p, join(tools, ", ", one_dump, &F_PY)) ||
		     tmpl(p, "][/AVAILABLE_TOOLS]")))
			return -1;
		if (tmpl(p, "[INST] ") || fold_system(p, m, r, sys, i, 0))
			return -1;
		sys = SIZE_MAX;
		if (text(p, &m[i], 0) || tmpl(p, " [/INST]"))
			return -1;
	}
	return 0;
}

enum cm_status wk_chat_render_opts(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n, int gen,
				   const struct wk_chat_opts *o, struct wk_chat_prompt *out,
				   char *err, size_t err_len)
{
	enum chat_role *roles = NULL;
	json_t **calls = NULL, *tools = NULL;
	struct wk_chat_msg *w = NULL;
	enum cm_status st;
	int rc = 0, tooling = 0;

	memset(out, 0, sizeof(*out));
	if (err_len)
		err[0] = '\0';
	if (n > CM_LIM_PROTO_MESSAGES_HARD) {
		snprintf(err, err_len, "expected at most %u messages, found %zu",
			 (unsigned)CM_LIM_PROTO_MESSAGES_HARD, n);
		return CM_ELIMIT;
	}
	roles = cm_calloc(n + 1, sizeof(*roles));
	calls = cm_calloc(n + 1, sizeof(*calls));
	st = roles && calls ? tools_parse(o, &tools, err, err_len) : CM_ENOMEM;
	for (size_t i = 0; st == CM_OK && i < n; i++) {
		st = calls_parse(&msgs[i], i, &calls[i], err, err_len);
		tooling |= calls[i] != NULL || (msgs[i].role && strcmp(msgs[i].role, "tool") == 0);
	}
	if (st != CM_OK)
		goto out;
	tooling |= tools != NULL;
	if (tooling && wk_chat_tool_family(t) == WK_TC_JSON) {
		/* no tool syntax: the generic form, as plain messages */
		size_t nw = 0;

		if (generic_tools(out, msgs, calls, n, tools, &w, &nw)) {
			st = CM_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			json_decref(calls[i]);
			calls[i] = NULL;
		}
		msgs = w;
		n = nw;
	}
	st = check_roles(t, msgs, n, roles, err, err_len);
	if (st != CM_OK)
		goto out;
	switch (t->family) {
	case CHAT_LLAMA3: rc = render_llama3(out, msgs, roles, calls, n, gen, tools); break;
	case CHAT_LLAMA2: rc = render_llama2(out, msgs, roles, n, gen); break;
	case CHAT_MISTRAL: rc = render_mistral(out, msgs, roles, calls, n, gen, tools); break;
	case CHAT_CHATML:
		rc = render_chatml(out, msgs, roles, calls, n, gen, tools);
		break;
	case CHAT_PHI3:
		rc = render_turns(out, msgs, roles, n, gen, tag_hdr, "<|end|>\n", 0);
		break;
	case CHAT_PHI4:
		rc = render_turns(out, msgs, roles, n, gen, phi4_hdr, "<|im_end|>", 0);
		break;
	case CHAT_GRANITE:
		rc = render_turns(out, msgs, roles, n, gen, granite_hdr, "<|end_of_text|>\n", 0);
		break;
	case CHAT_GEMMA: rc = render_gemma(out, msgs, roles, n, gen); break;
	case CHAT_ZEPHYR:
		rc = render_turns(out, msgs, roles, n, gen, tag_hdr, "</s>\n", 0);
		break;
	case CHAT_PLAIN: rc = render_plain(out, msgs, roles, n, gen); break;
	}
	/* thinking: the answer opens with an empty block (Qwen3's no-thinking
	 * form) or inside one (R1 distills, Qwen3 thinking models) */
	if (!rc && gen && o && o->no_think)
		rc = tmpl(out, "<think>\n\n</think>\n\n");
	else if (!rc && gen && o && o->open_think)
		rc = tmpl(out, "<think>\n");
	if (rc)
		st = CM_ENOMEM;
out:
	for (size_t i = 0; calls && i < n; i++)
		json_decref(calls[i]);
	json_decref(tools);
	cm_free(calls);
	cm_free(w);
	cm_free(roles);
	if (st != CM_OK)
		wk_chat_prompt_deinit(out);
	return st;
}

int wk_chat_jinja_opens_think(const char *jinja, size_t len)
{
	const char *p, *gen = NULL, *end = jinja + len;

	for (p = jinja; (p = memmem(p, (size_t)(end - p), "add_generation_prompt", 21)); p += 21)
		gen = p;
	for (p = gen; p && (p = memmem(p, (size_t)(end - p), "<think>", 7)); p += 7) {
		const char *q = p + 7;

		while (q < end && (*q == '\n' || (*q == '\\' && q + 1 < end && q[1] == 'n')))
			q += *q == '\n' ? 1 : 2;
		if ((size_t)(end - q) < 8 || memcmp(q, "</think>", 8) != 0)
			return 1;
	}
	return 0;
}

enum cm_status wk_chat_render(const struct wk_chat_template *t, const struct wk_chat_msg *msgs,
			      size_t n, int gen, struct wk_chat_prompt *out,
			      char *err, size_t err_len)
{
	return wk_chat_render_opts(t, msgs, n, gen, NULL, out, err, err_len);
}

enum cm_status wk_chat_render_text_opts(const struct wk_chat_template *t,
					const struct wk_chat_msg *msgs, size_t n, int gen,
					const struct wk_chat_opts *o, struct cm_buf *out,
					char *err, size_t err_len)
{
	struct wk_chat_prompt p;
	enum cm_status st = wk_chat_render_opts(t, msgs, n, gen, o, &p, err, err_len);

	for (size_t i = 0; st == CM_OK && i < p.n; i++)
		st = cm_buf_append(out, p.segs[i].text, p.segs[i].len);
	wk_chat_prompt_deinit(&p);
	return st;
}

enum cm_status wk_chat_render_text(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n, int gen,
				   struct cm_buf *out, char *err, size_t err_len)
{
	return wk_chat_render_text_opts(t, msgs, n, gen, NULL, out, err, err_len);
}

enum cm_status wk_chat_encode_opts(const struct wk_tok *tok, const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n, int gen,
				   const struct wk_chat_opts *o, int32_t *out, size_t cap,
				   size_t *n_out, char *err, size_t err_len)
{
	struct wk_chat_prompt p;
	enum cm_status st = wk_chat_render_opts(t, msgs, n, gen, o, &p, err, err_len);

	*n_out = 0;
	if (st != CM_OK)
		return st;
	st = wk_tok_encode_segments(tok, p.segs, p.n, WK_TOK_ADD_BOS, out, cap, n_out);
	if (st == CM_ELIMIT)
		snprintf(err, err_len, "the prompt needs %zu tokens, more than the %zu allowed",
			 *n_out, cap);
	wk_chat_prompt_deinit(&p);
	return st;
}

enum cm_status wk_chat_encode(const struct wk_tok *tok, const struct wk_chat_template *t,
			      const struct wk_chat_msg *msgs, size_t n, int gen,
			      int32_t *out, size_t cap, size_t *n_out, char *err, size_t err_len)
{
	return wk_chat_encode_opts(tok, t, msgs, n, gen, NULL, out, cap, n_out, err, err_len);
}
