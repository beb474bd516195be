/*
 * chat.h - built-in chat prompt formats for the common model families.
 *
 * Sluice never executes a model's tokenizer.chat_template (Jinja): the
 * template text is only searched for markers that identify its family,
 * and the prompt is rendered by our own code for that family:
 *
 *   family   marker(s) in tokenizer.chat_template
 *   llama3   <|start_header_id|>
 *   phi4     <|im_sep|>                         (chatml's tags + <|im_sep|>)
 *   granite  <|start_of_role|>                  (IBM Granite 3.x)
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
 * Roles: "system", "user", "assistant", "tool"; anything else is an
 * error.  A system message must come first; llama2 and mistral fold it
 * into the first user turn and need user/assistant to alternate from a
 * user turn (tool results and assistant tool calls aside); gemma folds it
 * into the first user turn.
 *
 * Tools (docs/tools.md): llama3, chatml (Qwen, Hermes) and mistral render
 * the tools, the assistant's tool calls and the tool results in their own
 * syntax; the other families in the generic JSON form, written into the
 * system text.  Tool JSON and calls are message text (no special tokens),
 * their markers template text.
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
	/* tool calling (docs/tools.md); NULL when absent */
	const char *tool_calls; /* assistant: JSON array of {"id", "name",
				 * "arguments": object} */
	size_t tool_calls_len;
	const char *tool_call_id; /* tool: the id of the call it answers */
	size_t tool_call_id_len;
};

/* What a rendering may add to the messages. */
struct wk_chat_opts {
	/* the tools the model may call: a JSON array of OpenAI tool objects
	 * {"type": "function", "function": {"name", "description",
	 * "parameters"}}; NULL: none */
	const char *tools;
	size_t tools_len;
	/* the no-thinking form of a thinking family (Qwen3's: an empty
	 * <think></think> opening the answer) */
	int no_think;
	/* the answer starts inside thinking: "<think>\n" opens it (the
	 * thinking form of R1 distills and Qwen3 thinking models) */
	int open_think;
};

/* Rendered prompt: segments point into the template table, the messages
 * or text the rendering wrote (tools, tool calls), which it owns. */
struct wk_chat_prompt {
	struct wk_tok_seg *segs; /* parse_special = 1: template text */
	size_t n, cap;
	char **own;
	size_t n_own, cap_own;
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
/*
 * 1 when the Jinja text's generation prompt opens thinking: after its
 * last add_generation_prompt it writes "<think>" that is not the empty
 * no-thinking block ("<think>\n\n</think>"): Qwen3 thinking models,
 * QwQ, DeepSeek-R1 distills.  Newlines count written or as "\n" escapes.
 */
int wk_chat_jinja_opens_think(const char *jinja, size_t len);
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
/* The same with tools (o NULL: none); a tools value that is not an array
 * of function tools is CM_EINVAL naming tools[i]. */
enum cm_status wk_chat_render_opts(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n,
				   int add_generation_prompt, const struct wk_chat_opts *o,
				   struct wk_chat_prompt *out, char *err, size_t err_len) CM_WUR;
/* The tool-call syntax the family's output uses (toolcall.h's family). */
int wk_chat_tool_family(const struct wk_chat_template *t);
void wk_chat_prompt_deinit(struct wk_chat_prompt *p);

/* The rendered prompt as one string appended to out (tests, inspection). */
enum cm_status wk_chat_render_text(const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n,
				   int add_generation_prompt, struct cm_buf *out,
				   char *err, size_t err_len) CM_WUR;
enum cm_status wk_chat_render_text_opts(const struct wk_chat_template *t,
					const struct wk_chat_msg *msgs, size_t n,
					int add_generation_prompt, const struct wk_chat_opts *o,
					struct cm_buf *out, char *err, size_t err_len) CM_WUR;

/*
 * Renders and tokenizes: BOS when the model asks for it, template text
 * with special tokens, contents without.  out/cap/n_out as wk_tok_encode
 * (CM_ELIMIT with *n_out = the needed count when cap is too small).
 */
enum cm_status wk_chat_encode(const struct wk_tok *tok, const struct wk_chat_template *t,
			      const struct wk_chat_msg *msgs, size_t n, int add_generation_prompt,
			      int32_t *out, size_t cap, size_t *n_out,
			      char *err, size_t err_len) CM_WUR;
enum cm_status wk_chat_encode_opts(const struct wk_tok *tok, const struct wk_chat_template *t,
				   const struct wk_chat_msg *msgs, size_t n,
				   int add_generation_prompt, const struct wk_chat_opts *o,
				   int32_t *out, size_t cap, size_t *n_out,
				   char *err, size_t err_len) CM_WUR;

#endif
