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
#include <string.h>

#include "common/alloc.h"
#include "common/limits.h"

enum chat_family {
	CHAT_LLAMA3,
	CHAT_LLAMA2,
	CHAT_MISTRAL,
	CHAT_CHATML,
	CHAT_PHI3,
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
	{ CHAT_GEMMA, "gemma" },
	{ CHAT_ZEPHYR, "zephyr" },
	{ CHAT_PLAIN, "plain" },
};
#define N_TEMPLATES (sizeof(chat_templates) / sizeof(chat_templates[0]))

static const char chat_names[] = "llama3, llama2, mistral, chatml, phi3, gemma, zephyr, plain";

enum chat_role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static const char *const role_names[] = { "system", "user", "assistant" };

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

void wk_chat_prompt_deinit(struct wk_chat_prompt *p)
{
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

		for (r = 0; r < 3; r++)
			if (m[i].role && strcmp(m[i].role, role_names[r]) == 0)
				break;
		if (r == 3) {
			snprintf(err, err_len, "messages[%zu].role: unknown role \"%.32s\" "
				 "(expected system, user or assistant)", i, m[i].role ? m[i].role : "");
			return CM_EINVAL;
		}
		roles[i] = (enum chat_role)r;
		if (roles[i] == ROLE_SYSTEM) {
			if (pending_sys == SIZE_MAX)
				pending_sys = i;
			continue;
		}
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

/*
 * Mistral Instruct: "[INST] {user} [/INST]{assistant}</s>[INST] ..."; a
 * system message is folded into the first user turn ("{system}\n\n{user}").
 */
static int render_mistral(struct wk_chat_prompt *p, const struct wk_chat_msg *m,
			  const enum chat_role *r, size_t n, int gen)
{
	size_t sys = SIZE_MAX;

	(void)gen;
	for (size_t i = 0; i < n; i++) {
		if (r[i] == ROLE_SYSTEM) {
			if (sys == SIZE_MAX)
				sys = i;
			continue;
		}
		if (r[i] == ROLE_ASSISTANT) {
			if (text(p, &m[i], 0) || tmpl(p, "</s>"))
				return -1;
			continue;
		}
		if (tmpl(p, "[INST] ") || fold_system(p, m, r, sys, i, 0))
			return -1;
		sys = SIZE_MAX;
		if (text(p, &m[i], 0) || tmpl(p, " [/INST]"))
			return -1;
	}
	return 0;
}

enum cm_status wk_chat_render(const struct wk_chat_template *t, const struct wk_chat_msg *msgs,
			      size_t n, int gen, struct wk_chat_prompt *out,
			      char *err, size_t err_len)
{
	enum chat_role *roles = NULL;
	enum cm_status st;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (err_len)
		err[0] = '\0';
	if (n > CM_LIM_PROTO_MESSAGES_HARD) {
		snprintf(err, err_len, "expected at most %u messages, found %zu",
			 (unsigned)CM_LIM_PROTO_MESSAGES_HARD, n);
		return CM_ELIMIT;
	}
	roles = cm_calloc(n ? n : 1, sizeof(*roles));
	if (!roles)
		return CM_ENOMEM;
	st = check_roles(t, msgs, n, roles, err, err_len);
	if (st != CM_OK)
		goto out;
	switch (t->family) {
	case CHAT_LLAMA3:
		rc = render_turns(out, msgs, roles, n, gen, llama3_hdr, "<|eot_id|>", 1);
		break;
	case CHAT_LLAMA2: rc = render_llama2(out, msgs, roles, n, gen); break;
	case CHAT_MISTRAL: rc = render_mistral(out, msgs, roles, n, gen); break;
	case CHAT_CHATML:
		rc = render_turns(out, msgs, roles, n, gen, chatml_hdr, "<|im_end|>\n", 0);
		break;
	case CHAT_PHI3:
		rc = render_turns(out, msgs, roles, n, gen, tag_hdr, "<|end|>\n", 0);
		break;
	case CHAT_GEMMA: rc = render_gemma(out, msgs, roles, n, gen); break;
	case CHAT_ZEPHYR:
		rc = render_turns(out, msgs, roles, n, gen, tag_hdr, "</s>\n", 0);
		break;
	case CHAT_PLAIN: rc = render_plain(out, msgs, roles, n, gen); break;
	}
	if (rc)
		st = CM_ENOMEM;
out:
	cm_free(roles);
	if (st != CM_OK)
		wk_chat_prompt_deinit(out);
	return st;
}

enum cm_status wk_chat_render_text(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n, int gen,
				   struct cm_buf *out, char *err, size_t err_len)
{
	struct wk_chat_prompt p;
	enum cm_status st = wk_chat_render(t, msgs, n, gen, &p, err, err_len);

	for (size_t i = 0; st == CM_OK && i < p.n; i++)
		st = cm_buf_append(out, p.segs[i].text, p.segs[i].len);
	wk_chat_prompt_deinit(&p);
	return st;
}

enum cm_status wk_chat_encode(const struct wk_tok *tok, const struct wk_chat_template *t,
			      const struct wk_chat_msg *msgs, size_t n, int gen,
			      int32_t *out, size_t cap, size_t *n_out, char *err, size_t err_len)
{
	struct wk_chat_prompt p;
	enum cm_status st = wk_chat_render(t, msgs, n, gen, &p, err, err_len);

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
