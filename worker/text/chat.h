/*
 * chat.h - built-in chat prompt formats for the common model families.
 *
 * Sluice never executes a model's tokenizer.chat_template (Jinja): the
 * template text is only searched for markers that identify its family,
 * and the prompt is rendered by our own code for that family:
 *
 *   family   marker(s) in tokenizer.chat_template
 *   llama3   <|start_header_id|>
 *   chatml   <|im_start|>                       (Qwen, SmolLM, ...)
 *   gemma    <start_of_turn>
 *   phi3     <|end|> and role tags (<|user|>, <|assistant|> or
 *            '<|' + message['role'] + '|>')
 *   zephyr   role tags and </s> or eos_token
 *   llama2   [INST] and <<SYS>>
 *   mistral  [INST] without <<SYS>>
 *
 * A configuration may name the family instead (wk_chat_template_by_name).
 *
 * Rendering produces segments: template text (whose markers are special
 * tokens, tokenized with special-token parsing) and message contents
 * (user text, tokenized WITHOUT it, so a user typing "<|im_end|>" gets
 * those characters).  The initial BOS is never part of the rendering:
 * wk_chat_encode adds it when the model's add_bos_token asks for it.
 *
 * Roles: "system", "user", "assistant"; anything else is an error.  A
 * system message must come first; llama2 and mistral fold it into the
 * first user turn and need user/assistant to alternate from a user turn;
 * gemma folds it into the first user turn.
 *
 * Stateless: the templates are constant tables; thread-safe.
 */
#ifndef SLUICE_WORKER_TEXT_CHAT_H
#define SLUICE_WORKER_TEXT_CHAT_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"
#include "worker/text/tokenizer.h"

struct wk_chat_template;

struct wk_chat_msg {
	const char *role;    /* NUL-terminated */
	const char *content; /* content_len bytes, need not be NUL-terminated */
	size_t content_len;
};

/* Rendered prompt: segments point into the template table or the messages. */
struct wk_chat_prompt {
	struct wk_tok_seg *segs; /* parse_special = 1: template text */
	size_t n, cap;
};

/*
 * The family named `name` ("llama3", "llama2", "mistral", "chatml",
 * "phi3", "gemma", "zephyr"); NULL for an unknown name, with a message
 * listing the known ones in err.
 */
const struct wk_chat_template *wk_chat_template_by_name(const char *name, char *err,
							size_t err_len);
/* The family whose markers the Jinja text contains; NULL when none. */
const struct wk_chat_template *wk_chat_template_detect(const char *jinja, size_t len);
const char *wk_chat_template_name(const struct wk_chat_template *t);
/* "llama3, llama2, ..." for messages. */
const char *wk_chat_template_names(void);

/*
 * Renders msgs[0..n) (at most CM_LIM_PROTO_MESSAGES_HARD) and, when
 * add_generation_prompt, the opening of the assistant's turn.  The prompt
 * refers to msgs' contents: keep them alive while it is used.  Errors
 * (role, order, count) are CM_EINVAL with a message naming the message
 * index.  Free with wk_chat_prompt_deinit().
 */
enum cm_status wk_chat_render(const struct wk_chat_template *t, const struct wk_chat_msg *msgs,
			      size_t n, int add_generation_prompt, struct wk_chat_prompt *out,
			      char *err, size_t err_len) CM_WUR;
void wk_chat_prompt_deinit(struct wk_chat_prompt *p);

/* The rendered prompt as one string appended to out (tests, inspection). */
enum cm_status wk_chat_render_text(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n,
				   int add_generation_prompt, struct cm_buf *out,
				   char *err, size_t err_len) CM_WUR;

/*
 * Renders and tokenizes: BOS when the model asks for it, template text
 * with special tokens, contents without.  out/cap/n_out as wk_tok_encode
 * (CM_ELIMIT with *n_out = the needed count when cap is too small).
 */
enum cm_status wk_chat_encode(const struct wk_tok *tok, const struct wk_chat_template *t,
			      const struct wk_chat_msg *msgs, size_t n, int add_generation_prompt,
			      int32_t *out, size_t cap, size_t *n_out,
			      char *err, size_t err_len) CM_WUR;

#endif
