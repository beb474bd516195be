/*
 * gen.h - one generation's text pipeline, shared by the server and the
 * CLI: prompt encoding (raw text or chat messages through the model's
 * template), and per generated token: sampling, streaming detokenisation,
 * stop strings and end-of-generation tokens.
 *
 * Owns: the sampler, the stop matcher, the detokenizer state and a capped
 * text buffer.  One generation, one thread at a time.
 */
#ifndef SLUICE_WORKER_ENGINE_GEN_H
#define SLUICE_WORKER_ENGINE_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/text/chat.h"
#include "worker/engine/sampler.h"

struct wk_model;
struct wk_gen;
struct wk_sampler_ws;


/*
 * Encodes a prompt.  Raw text (n_msgs == 0): BOS first when add_bos and
 * the model wants one, no special tokens parsed.  Chat: the model's
 * template (or `tmpl_name`), special tokens only from the template.
 * *out is a cm_malloc'd array of *n_out tokens.  Errors name what was
 * wrong: unknown template, bad role, prompt over `max_tokens`.
 */
enum cm_status wk_prompt_encode(const struct wk_model *m, const char *text, size_t len,
				const struct wk_chat_msg *msgs, size_t n_msgs,
				const char *tmpl_name, int add_bos, uint32_t max_tokens,
				int32_t **out, uint32_t *n_out, char *err,
				size_t err_len) CM_WUR;
/* The same with tools (o NULL: none). */
enum cm_status wk_prompt_encode_opts(const struct wk_model *m, const char *text, size_t len,
				     const struct wk_chat_msg *msgs, size_t n_msgs,
				     const char *tmpl_name, const struct wk_chat_opts *o, int add_bos,
				     uint32_t max_tokens, int32_t **out, uint32_t *n_out, char *err,
				     size_t err_len) CM_WUR;
/* The chat template a request uses: `tmpl_name` when set, else the
 * model's; NULL with err set when there is none. */
const struct wk_chat_template *wk_prompt_template(const struct wk_model *m, const char *tmpl_name,
						char *err, size_t err_len);
/* 1 when the model's own template writes thinking tags (Qwen3, R1). */
int wk_prompt_thinks(const struct wk_model *m);
/* 1 when its generation prompt opens <think> (the answer starts inside
 * thinking: R1 distills, Qwen3 thinking models). */
int wk_prompt_opens_think(const struct wk_model *m);

struct wk_gen_params {
	struct wk_sampler_params sampling;
	const char *const *stop;  /* stop strings */
	const size_t *stop_lens;
	size_t n_stop;
	int ignore_eos;           /* keep going past end-of-generation tokens */
	int digest;               /* keep a SHA-256 of the last logits */
	/*
	 * Structured output (NULL: none): only tokens the mask allows from
	 * the current state are sampled (removed before penalties and top-k,
	 * so the draw does not depend on anything but this sequence), EOS
	 * only where the grammar accepts.  The mask (and its matcher) must
	 * outlive the generation; the state is the sequence's own.
	 */
	struct wk_mask *mask;
	int32_t mask_state;       /* where the output starts (wk_gm_start) */
	int exact_logprobs;       /* logprobs are read: always the full mask
				   * (greedy otherwise checks its argmax first) */
	uint32_t top_logprobs;    /* alternatives kept per token, <= WK_GEN_TOP_MAX */
	/*
	 * Thinking (docs/tools.md).  think_open: the prompt ended inside
	 * <think>, the output is thinking up to "</think>"; the mask applies
	 * from the first token after it (whitespace right after it skipped).
	 * think_detect: the output may open <think> itself (after
	 * whitespace); only the budget applies to it, never a mask.
	 * think_budget: tokens the thinking may take; then the generation
	 * writes "\n</think>" itself (and "\n\n" when unconstrained);
	 * UINT32_MAX: no budget.
	 */
	int think_open;
	int think_detect;
	uint32_t think_budget;
};

#define WK_GEN_NO_BUDGET UINT32_MAX

#define WK_GEN_TOP_MAX 20

enum cm_status wk_gen_new(const struct wk_model *m, const struct wk_gen_params *p,
			  struct wk_gen **out, char *err, size_t err_len) CM_WUR;
void wk_gen_free(struct wk_gen *g);

/* Feeds the prompt tokens to the penalty window. */
enum cm_status wk_gen_accept_prompt(struct wk_gen *g, const int32_t *toks,
				    uint32_t n) CM_WUR;

/* Samples the next token; returns it (or -1 on error: wk_gen_error says
 * why when it is the constraint's) and its logprob. */
int32_t wk_gen_sample(struct wk_gen *g, struct wk_sampler_ws *ws, const float *logits,
		      float *logprob);
/* Why the last wk_gen_sample failed when the constraint refused to go on
 * (no allowed token, the matcher's limit), else NULL. */
const char *wk_gen_error(const struct wk_gen *g);
/* The alternatives of the last sampled token (top_logprobs of them at
 * most, best first): returns how many. */
uint32_t wk_gen_top(const struct wk_gen *g, const uint32_t **ids, const float **lps);
/* 1 while the output is inside thinking (think_open / think_detect). */
int wk_gen_thinking(const struct wk_gen *g);
/* Tokens whose mask was computed in full (the rest: greedy argmax allowed). */
uint64_t wk_gen_masks(const struct wk_gen *g);

/*
 * A token was generated: *text and *len receive the bytes to stream now
 * (valid until the next call).  Returns 1 when generation must stop
 * (end-of-generation token, stop string), else 0.
 */
int wk_gen_push(struct wk_gen *g, int32_t tok, const float *logits,
		const uint8_t **text, size_t *len);
/* End of generation: the bytes still held back (if no stop matched). */
void wk_gen_finish(struct wk_gen *g, const uint8_t **text, size_t *len);

uint64_t wk_gen_seed(const struct wk_gen *g);
/* SHA-256 of the last logits pushed (zeros unless params.digest). */
const uint8_t *wk_gen_digest(const struct wk_gen *g);

#endif
