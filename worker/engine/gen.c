/*
 * gen.c - prompt encoding and the per-token text pipeline (see gen.h).
 */
#include "worker/engine/gen.h"

#include <math.h>
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
	/* thinking: where the output is, the mask it waits for, the budget */
	enum { TH_OUT, TH_PRE, TH_THINK } phase;
	struct wk_mask *held;   /* the mask that applies after </think> */
	uint32_t n_pre;         /* TH_PRE: bytes of "<think>" matched */
	uint32_t match;         /* bytes of "</think>" matched */
	uint32_t budget, n_think;
	uint32_t *no_eog;       /* with a held mask: every token but the end */
	int32_t forced[16];     /* the closing tokens the budget writes */
	uint32_t n_forced, i_forced;
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

int wk_prompt_opens_think(const struct wk_model *m)
{
	return m->cfg->has_chat_template &&
	       wk_chat_jinja_opens_think(m->cfg->chat_template.ptr, m->cfg->chat_template.len);
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
	g->budget = p->think_budget;
	g->phase = p->think_open ? TH_THINK : p->think_detect && !p->mask ? TH_PRE : TH_OUT;
	if (g->phase == TH_THINK) {
		g->held = g->mask; /* the constraint waits for the end of thinking */
		g->mask = NULL;
	}
	if (g->mask || g->held) {
		struct wk_mask *k = g->mask ? g->mask : g->held;

		if (wk_mask_words(k) != ((size_t)m->hp.n_vocab + 31) / 32) {
			st = cm_fail(err, err_len, CM_EINVAL, "constraint: its vocabulary has %zu "
				     "tokens, the model %u", wk_mask_words(k) * 32, m->hp.n_vocab);
			goto out;
		}
		g->bits = cm_calloc(wk_mask_words(k), sizeof(uint32_t));
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
	cm_free(g->no_eog);
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

/* The budget is spent: the tokens of "\n</think>" (and "\n\n" when
 * unconstrained), written by the generation instead of sampled. */
static void think_force(struct wk_gen *g)
{
	const char *close = g->held ? "\n</think>" : "\n</think>\n\n";
	size_t n = 0;

	if (wk_tok_encode(g->m->tok, close, strlen(close),
			  WK_TOK_PARSE_SPECIAL | WK_TOK_NO_DUMMY_PREFIX, g->forced,
			  sizeof(g->forced) / sizeof(g->forced[0]), &n) != CM_OK)
		n = 0;
	g->n_forced = (uint32_t)n;
	g->i_forced = 0;
}

/* The mask of every token but those that end generation. */
static enum cm_status think_no_eog(struct wk_gen *g)
{
	uint32_t n = g->m->hp.n_vocab;

	g->no_eog = cm_calloc((n + 31) / 32, sizeof(uint32_t));
	if (!g->no_eog)
		return CM_ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		if (!wk_tok_is_eog(g->m->tok, (int32_t)i))
			g->no_eog[i >> 5] |= 1u << (i & 31);
	return CM_OK;
}

/* A forced token's log-probability under the model's distribution. */
static float forced_logprob(const float *logits, uint32_t n, int32_t tok)
{
	float mx = -INFINITY;
	double sum = 0.0;

	for (uint32_t i = 0; i < n; i++)
		mx = logits[i] > mx ? logits[i] : mx;
	for (uint32_t i = 0; i < n; i++)
		sum += exp((double)(logits[i] - mx));
	return (float)((double)(logits[tok] - mx) - log(sum));
}

int32_t wk_gen_sample(struct wk_gen *g, struct wk_sampler_ws *ws, const float *logits,
		      float *logprob)
{
	struct wk_sample s;

	g->n_top = 0;
	if (g->phase == TH_THINK && g->budget != WK_GEN_NO_BUDGET && g->n_think >= g->budget &&
	    g->n_forced == 0)
		think_force(g);
	if (g->phase == TH_THINK)
		g->n_think++;
	if (g->i_forced < g->n_forced) {
		int32_t tok = g->forced[g->i_forced++];

		if (wk_sampler_accept(g->sampler, (uint32_t)tok) != CM_OK)
			return -1;
		*logprob = forced_logprob(logits, g->m->hp.n_vocab, tok);
		return tok;
	}
	if (g->held) {
		/* thinking before a constraint: it may not end the answer */
		if (!g->no_eog && think_no_eog(g) != CM_OK)
			return -1;
		if (wk_sampler_sample_masked(g->sampler, ws, logits, g->m->hp.n_vocab, g->no_eog,
					     &s) != CM_OK)
			return -1;
	} else if (g->mask) {
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

/* The bytes after "</think>" in the token that closed it go to the mask
 * (whitespace right after it aside); a byte it refuses fails the next
 * sample, as any constraint refusal.  The tokens after it go through the
 * mask as they are sampled. */
static void think_after(struct wk_gen *g, const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
		i++;
	if (i == n || !g->mask)
		return;
	g->state = wk_mask_advance_bytes(g->mask, g->state, p + i, n - i);
	if (g->state < 0)
		g->err = "constraint: the text after </think> does not begin the constrained output";
}

/* Follows the output's bytes through <think> ... </think>. */
static void think_track(struct wk_gen *g, const uint8_t *p, size_t n)
{
	static const char open[] = "<think>", close[] = "</think>";
	size_t i = 0;

	if (g->phase == TH_PRE) {
		for (; i < n && g->phase == TH_PRE; i++) {
			if (g->n_pre == 0 && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
				continue;
			if ((uint8_t)open[g->n_pre] != p[i]) {
				g->phase = TH_OUT;
				return;
			}
			if (++g->n_pre == sizeof(open) - 1)
				g->phase = TH_THINK;
		}
	}
	if (g->phase == TH_OUT)
		return;
	for (; i < n; i++) {
		if (p[i] == (uint8_t)close[g->match])
			g->match++;
		else
			g->match = p[i] == '<' ? 1 : 0;
		if (g->match == sizeof(close) - 1) {
			g->phase = TH_OUT;
			if (g->held) {
				g->mask = g->held;
				g->held = NULL;
			}
			think_after(g, p + i + 1, n - i - 1);
			return;
		}
	}
}

int wk_gen_thinking(const struct wk_gen *g)
{
	return g->phase == TH_THINK;
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
	if (g->phase != TH_OUT)
		think_track(g, cm_buf_data(&g->text), cm_buf_len(&g->text));
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
