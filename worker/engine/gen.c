/*
 * gen.c - prompt encoding and the per-token text pipeline (see gen.h).
 */
#include "worker/engine/gen.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/crypto.h"
#include "worker/text/chat.h"
#include "worker/model/model.h"
#include "worker/engine/stop.h"
#include "worker/grammar/mask.h"
#include "worker/text/tokenizer.h"

struct wk_gen {
	const struct wk_model *m;
	struct wk_sampler *sampler;
	struct wk_stop *stop;
	struct wk_detok detok;
	struct cm_buf text;     /* bytes released by the detokenizer for one token */
	struct cm_buf fin;      /* what wk_gen_finish() releases */
	int ignore_eos;
	int digest;
	int stopped;
	uint8_t last_digest[32];
	struct wk_mask *mask;   /* NULL: unconstrained */
	int32_t state;
	int exact;
	int greedy;
	uint32_t *bits;         /* [mask words] */
	uint64_t n_masks;
	const char *err;        /* a constraint's refusal, static text */
	uint32_t top_k, n_top;
	uint32_t top_ids[WK_GEN_TOP_MAX];
	float top_lps[WK_GEN_TOP_MAX];
};

const struct wk_chat_template *wk_prompt_template(const struct wk_model *m, const char *tmpl_name,
						char *err, size_t err_len)
{
	const struct wk_chat_template *t = m->chat;

	if (tmpl_name && tmpl_name[0])
		return wk_chat_template_by_name(tmpl_name, err, err_len);
	if (!t)
		snprintf(err, err_len, "chat template: the model has none that is recognised; "
			 "set worker.chat_template");
	return t;
}

int wk_prompt_thinks(const struct wk_model *m)
{
	return m->cfg->has_chat_template &&
	       memmem(m->cfg->chat_template.ptr, m->cfg->chat_template.len, "<think>", 7) != NULL;
}

enum cm_status wk_prompt_encode_opts(const struct wk_model *m, const char *text, size_t len,
				     const struct wk_chat_msg *msgs, size_t n_msgs,
				     const char *tmpl_name, const struct wk_chat_opts *o, int add_bos,
				     uint32_t max_tokens, int32_t **out, uint32_t *n_out, char *err,
				     size_t err_len)
{
	int32_t *toks = NULL;
	size_t n = 0, cap = max_tokens ? max_tokens : 1;
	enum cm_status st;

	toks = cm_calloc(cap, sizeof(int32_t));
	if (!toks)
		return CM_ENOMEM;
	if (n_msgs == 0) {
		st = wk_tok_encode(m->tok, text, len, add_bos ? WK_TOK_ADD_BOS : 0, toks,
				   cap, &n);
	} else {
		const struct wk_chat_template *t = wk_prompt_template(m, tmpl_name, err, err_len);

		if (!t) {
			st = CM_ENOTFOUND;
			goto out;
		}
		st = wk_chat_encode_opts(m->tok, t, msgs, n_msgs, 1, o, toks, cap, &n, err, err_len);
	}
	if (st == CM_ELIMIT) {
		snprintf(err, err_len, "prompt is %zu tokens, over the limit of %u", n, max_tokens);
		goto out;
	}
	if (st != CM_OK) {
		if (!err[0])
			snprintf(err, err_len, "prompt: %s", cm_status_str(st));
		goto out;
	}
	*out = toks;
	*n_out = (uint32_t)n;
	toks = NULL;
out:
	cm_free(toks);
	return st;
}

enum cm_status wk_prompt_encode(const struct wk_model *m, const char *text, size_t len,
				const struct wk_chat_msg *msgs, size_t n_msgs,
				const char *tmpl_name, int add_bos, uint32_t max_tokens,
				int32_t **out, uint32_t *n_out, char *err, size_t err_len)
{
	return wk_prompt_encode_opts(m, text, len, msgs, n_msgs, tmpl_name, NULL, add_bos,
				     max_tokens, out, n_out, err, err_len);
}

enum cm_status wk_gen_new(const struct wk_model *m, const struct wk_gen_params *p,
			  struct wk_gen **out, char *err, size_t err_len)
{
	struct wk_gen *g = cm_calloc(1, sizeof(*g));
	enum cm_status st;

	if (!g)
		return CM_ENOMEM;
	g->m = m;
	g->ignore_eos = p->ignore_eos;
	g->digest = p->digest;
	cm_buf_init(&g->text, 64 * 1024);
	cm_buf_init(&g->fin, 64 * 1024);
	wk_detok_init(&g->detok, m->tok, 0);
	g->mask = p->mask;
	g->state = p->mask_state;
	g->exact = p->exact_logprobs;
	g->greedy = p->sampling.temperature == 0.0f;
	g->top_k = p->top_logprobs > WK_GEN_TOP_MAX ? WK_GEN_TOP_MAX : p->top_logprobs;
	if (g->mask) {
		if (wk_mask_words(g->mask) != ((size_t)m->hp.n_vocab + 31) / 32) {
			st = cm_fail(err, err_len, CM_EINVAL, "constraint: its vocabulary has %zu "
				     "tokens, the model %u", wk_mask_words(g->mask) * 32, m->hp.n_vocab);
			goto out;
		}
		g->bits = cm_calloc(wk_mask_words(g->mask), sizeof(uint32_t));
		if (!g->bits) {
			st = CM_ENOMEM;
			goto out;
		}
	}
	st = wk_sampler_new(&p->sampling, m->hp.n_vocab, &g->sampler, err, err_len);
	if (st != CM_OK)
		goto out;
	st = wk_stop_new(p->stop, p->stop_lens, p->n_stop, &g->stop, err, err_len);
	if (st != CM_OK)
		goto out;
	*out = g;
	g = NULL;
out:
	wk_gen_free(g);
	return st;
}

void wk_gen_free(struct wk_gen *g)
{
	if (!g)
		return;
	wk_sampler_free(g->sampler);
	wk_stop_free(g->stop);
	cm_buf_deinit(&g->text);
	cm_buf_deinit(&g->fin);
	cm_free(g->bits);
	cm_free(g);
}

enum cm_status wk_gen_accept_prompt(struct wk_gen *g, const int32_t *toks, uint32_t n)
{
	/* text that starts the sequence (the prompt is BOS alone or ends with
	 * it): SentencePiece's decoder drops the first piece's dummy-prefix
	 * space, " Once" -> "Once", as llama.cpp and llama2.c do */
	if (n > 0 && toks[n - 1] == wk_tok_bos(g->m->tok))
		wk_detok_init(&g->detok, g->m->tok, WK_DETOK_STRIP_DUMMY_PREFIX);
	for (uint32_t i = 0; i < n; i++) {
		enum cm_status st = wk_sampler_accept(g->sampler, (uint32_t)toks[i]);

		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

#define ERR_ROOM "constraint: the matcher ran out of room (worker.grammar_max_states); " \
		 "the output so far is incomplete"

/* The constrained draw: greedy without logprobs takes its argmax when the
 * grammar allows it (the masked argmax is then the same token), anything
 * else samples from the masked distribution. */
static enum cm_status sample_constrained(struct wk_gen *g, struct wk_sampler_ws *ws,
					 const float *logits, struct wk_sample *s)
{
	uint32_t n_vocab = g->m->hp.n_vocab;
	size_t words = wk_mask_words(g->mask);
	uint32_t any = 0;
	enum cm_status st;

	if (g->greedy && !g->exact && g->top_k == 0 &&
	    wk_sampler_sample(g->sampler, ws, logits, n_vocab, s) == CM_OK &&
	    wk_mask_allows(g->mask, g->state, (int32_t)s->token))
		return CM_OK;
	st = wk_mask_fill(g->mask, g->state, g->bits);
	if (st != CM_OK) {
		g->err = ERR_ROOM;
		return st;
	}
	g->n_masks++;
	for (size_t i = 0; i < words; i++)
		any |= g->bits[i];
	if (!any) {
		g->err = "constraint: no token can continue the output from here "
			 "(the grammar has no way forward)";
		return CM_EINVAL;
	}
	return wk_sampler_sample_masked(g->sampler, ws, logits, n_vocab, g->bits, s);
}

int32_t wk_gen_sample(struct wk_gen *g, struct wk_sampler_ws *ws, const float *logits,
		      float *logprob)
{
	struct wk_sample s;

	g->n_top = 0;
	if (g->mask) {
		int32_t next;

		if (sample_constrained(g, ws, logits, &s) != CM_OK)
			return -1;
		next = wk_mask_advance(g->mask, g->state, (int32_t)s.token);
		if (next < 0) {
			g->err = ERR_ROOM;
			return -1;
		}
		g->state = next;
	} else if (wk_sampler_sample(g->sampler, ws, logits, g->m->hp.n_vocab, &s) != CM_OK) {
		return -1;
	}
	if (g->top_k && wk_sampler_top(g->sampler, ws, g->top_k, g->top_ids, g->top_lps,
				       &g->n_top) != CM_OK)
		return -1;
	if (wk_sampler_accept(g->sampler, s.token) != CM_OK)
		return -1;
	*logprob = s.logprob;
	return (int32_t)s.token;
}

const char *wk_gen_error(const struct wk_gen *g)
{
	return g->err;
}

uint32_t wk_gen_top(const struct wk_gen *g, const uint32_t **ids, const float **lps)
{
	*ids = g->top_ids;
	*lps = g->top_lps;
	return g->n_top;
}

uint64_t wk_gen_masks(const struct wk_gen *g)
{
	return g->n_masks;
}

int wk_gen_push(struct wk_gen *g, int32_t tok, const float *logits,
		const uint8_t **text, size_t *len)
{
	struct wk_stop_out so = { NULL, 0, false };

	*text = NULL;
	*len = 0;
	if (g->digest && logits)
		cm_sha256(logits, (size_t)g->m->hp.n_vocab * sizeof(float), g->last_digest);
	if (g->stopped)
		return 1;
	if (!g->ignore_eos && wk_tok_is_eog(g->m->tok, tok)) {
		g->stopped = 1;
		return 1;
	}
	cm_buf_reset(&g->text);
	if (wk_detok_push(&g->detok, tok, &g->text) != CM_OK)
		return 1;
	if (wk_stop_feed(g->stop, cm_buf_data(&g->text), cm_buf_len(&g->text), &so) != CM_OK)
		return 1;
	*text = so.text;
	*len = so.len;
	if (so.matched)
		g->stopped = 1;
	return so.matched ? 1 : 0;
}

void wk_gen_finish(struct wk_gen *g, const uint8_t **text, size_t *len)
{
	struct wk_stop_out so = { NULL, 0, false };
	int ok = 1;

	*text = NULL;
	*len = 0;
	cm_buf_reset(&g->text);
	cm_buf_reset(&g->fin);
	/* an incomplete trailing character becomes U+FFFD and goes through
	 * the stop matcher like any text; then whatever is held back */
	if (wk_detok_flush(&g->detok, &g->text) == CM_OK && cm_buf_len(&g->text) > 0 &&
	    wk_stop_feed(g->stop, cm_buf_data(&g->text), cm_buf_len(&g->text), &so) == CM_OK)
		ok = cm_buf_append(&g->fin, so.text, so.len) == CM_OK;
	if (so.matched)
		goto done;
	wk_stop_flush(g->stop, &so);
	if (ok)
		ok = cm_buf_append(&g->fin, so.text, so.len) == CM_OK;
done:
	if (!ok)
		return;
	*text = cm_buf_data(&g->fin);
	*len = cm_buf_len(&g->fin);
}

uint64_t wk_gen_seed(const struct wk_gen *g)
{
	return wk_sampler_seed(g->sampler);
}

const uint8_t *wk_gen_digest(const struct wk_gen *g)
{
	return g->last_digest;
}
