/*
 * embed.c - the worker's embedding requests (EMBED): admission
 * (tokenizing every input, the context check or truncation), the queue,
 * and the embedding step that packs inputs of several requests into one
 * backend call by token budget, answers each input with an EMBEDDING and
 * each finished request with DONE.
 *
 * Owns the queue of EMBED requests (s->emb_head .. emb_tail), each one's
 * token ids, and the step's scratch.  Nothing is kept after a step: an
 * encoder has no KV cache, so an input is embedded in the step that takes
 * it, whole.
 *
 * Fairness: a step takes one input from each queued request in turn
 * (round robin over the requests, in arrival order) while the budget
 * (worker.embed_step_tokens) lasts; the first input always fits.  So a
 * request of 2000 inputs does not hold back one of a single input by more
 * than a step.  The step runs between generation steps when the worker
 * does both.
 *
 * Batch invariance: each vector depends only on its input (the backend's
 * embed contract), never on what shares the step.
 */
#include "worker/serve/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/text/tokenizer.h"

/* Most inputs one step takes (the backend's pool tasks bound it too). */
#define EMB_STEP_INPUTS_MAX 1024u

struct wk_serve_emb {
	struct wk_serve_emb *next;
	struct wk_serve_conn *conn;
	uint64_t id;
	uint32_t dimensions;       /* 0: the model's */
	uint32_t n_inputs, next_input, n_done;
	uint32_t *off, *len;       /* input i: tokens[off[i] .. off[i] + len[i]) */
	uint8_t *truncated;
	int32_t *tokens;
	uint64_t n_tokens;
	int64_t t_submit, t_first_step, t_first_out, step_ns;
	int in_step;               /* has an input in the step that runs */
};

/* The step's picks: (request, input), round robin over the requests. */
struct emb_pick {
	struct wk_serve_emb *e;
	uint32_t input;
};

int wk_serve_embeds(const struct wk_server *s)
{
	return s->be->ops->embed && (!s->model->hp.causal || s->model->hp.pooling != WK_POOL_NONE);
}

/*
 * A decoder's inputs need KV blocks for the step (given back after it):
 * the picks' blocks into s->emb_blocks; the picks that do not fit are put
 * back into their requests (they run in a later step).  The number of
 * picks kept (0: none fits now).
 */
static uint32_t emb_blocks(struct wk_server *s, struct emb_pick *pk, uint32_t n,
			   uint64_t *n_tok)
{
	uint32_t bt = wk_kv_block_tokens(s->kv), kept = 0;
	uint64_t need = 0;

	s->emb_n_blocks = 0;
	for (uint32_t i = 0; i < n; i++)
		need += (pk[i].e->len[pk[i].input] + bt - 1) / bt;
	if (need > s->emb_blocks_cap) {
		/* out of memory: as many picks as the old array holds */
		uint32_t *p = cm_realloc(s->emb_blocks, need * sizeof(uint32_t));

		if (p) {
			s->emb_blocks = p;
			s->emb_blocks_cap = need;
		}
	}
	for (; kept < n; kept++) {
		uint32_t nb = (pk[kept].e->len[pk[kept].input] + bt - 1) / bt, got = 0;

		if (s->emb_n_blocks + nb > s->emb_blocks_cap)
			break;
		while (got < nb && wk_kv_alloc(s->kv, &s->emb_blocks[s->emb_n_blocks + got]) == CM_OK)
			got++;
		if (got < nb) {
			while (got)
				wk_kv_unref(s->kv, s->emb_blocks[s->emb_n_blocks + --got]);
			break;
		}
		s->emb_n_blocks += nb;
	}
	for (uint32_t i = n; i-- > kept;) {
		pk[i].e->next_input--;
		*n_tok -= pk[i].e->len[pk[i].input];
	}
	return kept;
}

uint32_t wk_serve_emb_waiting(const struct wk_server *s)
{
	uint32_t n = 0;

	for (const struct wk_serve_emb *e = s->emb_head; e; e = e->next)
		n++;
	return n;
}

static void emb_free(struct wk_serve_emb *e)
{
	if (!e)
		return;
	cm_free(e->off);
	cm_free(e->len);
	cm_free(e->truncated);
	cm_free(e->tokens);
	cm_free(e);
}

static void emb_unlink(struct wk_server *s, struct wk_serve_emb *e)
{
	struct wk_serve_emb **pp = &s->emb_head, *prev = NULL;

	while (*pp && *pp != e) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = e->next;
	if (s->emb_tail == e)
		s->emb_tail = prev;
}

static struct wk_serve_emb *emb_find(struct wk_server *s, const struct wk_serve_conn *c,
				     uint64_t id)
{
	for (struct wk_serve_emb *e = s->emb_head; e; e = e->next)
		if (e->conn == c && e->id == id)
			return e;
	return NULL;
}

static void send_done(struct wk_serve_emb *e, uint8_t finish)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_DONE;
	m.request_id = e->id;
	m.u.done.finish = finish;
	m.u.done.prompt_tokens = (uint32_t)(e->n_tokens > UINT32_MAX ? UINT32_MAX : e->n_tokens);
	m.u.done.queue_ns = (e->t_first_step ? e->t_first_step : cm_mono_ns()) - e->t_submit;
	m.u.done.prefill_ns = e->step_ns;
	m.u.done.ttft_ns = e->t_first_out ? e->t_first_out - e->t_submit : 0;
	wk_serve_conn_send(e->conn, &m);
}

/*
 * Tokens of input i into e->tokens at e->n_tokens (grown as needed):
 * text with the model's own [CLS]/[SEP] (its add_bos/add_eos), ids as
 * they come.  Over the context: cut to it with TRUNCATE (the closing
 * token kept when the tokenizer adds one), else *code TOO_LONG.
 */
static enum cm_status emb_tokens(struct wk_server *s, struct wk_serve_emb *e, uint64_t *cap,
				 const struct proto_embed_input *in, uint32_t i, int truncate,
				 uint16_t *code, char *err, size_t err_len)
{
	uint32_t ctx = s->n_ctx, nv = s->model->hp.n_vocab;
	size_t need = in->kind == PROTO_INPUT_TOKENS ? in->n_tokens : (size_t)in->text.len + 8, n = 0;
	int32_t *t;
	enum cm_status st;

	if (e->n_tokens + need > *cap) {
		uint64_t nc = (*cap ? *cap : 256) * 2;
		int32_t *p;

		while (nc < e->n_tokens + need)
			nc *= 2;
		p = cm_realloc(e->tokens, nc * sizeof(int32_t));
		if (!p)
			return CM_ENOMEM;
		e->tokens = p;
		*cap = nc;
	}
	t = e->tokens + e->n_tokens;
	if (in->kind == PROTO_INPUT_TOKENS) {
		for (uint32_t k = 0; k < in->n_tokens; k++) {
			if (in->tokens[k] >= nv) {
				snprintf(err, err_len, "input %u: token id %u is outside the vocabulary "
					 "(%u tokens)", i, in->tokens[k], nv);
				return CM_EINVAL;
			}
			t[k] = (int32_t)in->tokens[k];
		}
		n = in->n_tokens;
	} else {
		st = wk_tok_encode(s->model->tok, in->text.ptr, in->text.len,
				   WK_TOK_ADD_BOS | WK_TOK_ADD_EOS, t, need, &n);
		if (st != CM_OK) {
			snprintf(err, err_len, "input %u: the text does not tokenize (%s)", i,
				 cm_status_str(st));
			return st == CM_ENOMEM ? st : CM_EINVAL;
		}
	}
	if (n == 0) {
		snprintf(err, err_len, "input %u: no tokens (the model adds none to an empty text)", i);
		return CM_EINVAL;
	}
	e->truncated[i] = 0;
	if (n > ctx) {
		if (!truncate) {
			*code = PROTO_E_TOO_LONG;
			snprintf(err, err_len, "input %u: %zu tokens, over the model's context of %u "
				 "tokens", i, n, ctx);
			return CM_EINVAL;
		}
		if (in->kind == PROTO_INPUT_TEXT && wk_tok_eos(s->model->tok) >= 0 &&
		    t[n - 1] == wk_tok_eos(s->model->tok))
			t[ctx - 1] = t[n - 1];
		n = ctx;
		e->truncated[i] = 1;
	}
	e->off[i] = (uint32_t)e->n_tokens;
	e->len[i] = (uint32_t)n;
	e->n_tokens += n;
	return CM_OK;
}

/* Why an EMBED cannot be taken (0: it can): draining, duplicate, full, model. */
static uint16_t emb_refusal(struct wk_server *s, struct wk_serve_conn *c,
			    const struct proto_msg *m, char *err, size_t err_len)
{
	const struct proto_embed *pe = &m->u.embed;
	uint32_t dim = s->model->hp.n_embd;

	if (wk_serve_term_seen(s) || c->draining) {
		snprintf(err, err_len, "worker is draining");
		return PROTO_E_DRAINING;
	}
	if (emb_find(s, c, m->request_id) || wk_serve_find_req(c, m->request_id)) {
		snprintf(err, err_len, "request id already in use on this connection");
		return PROTO_E_DUPLICATE;
	}
	if (wk_serve_model_other(s, pe->model, err, err_len))
		return PROTO_E_BAD_REQUEST;
	if (!wk_serve_embeds(s)) {
		snprintf(err, err_len, "model '%s' does not embed (a generation model without a "
			 "pooling type)", s->cfg->model_name);
		return PROTO_E_BAD_REQUEST;
	}
	if (pe->dimensions && pe->dimensions != dim &&
	    (!s->cfg->embed_truncatable || pe->dimensions > dim)) {
		if (pe->dimensions > dim)
			snprintf(err, err_len, "dimensions: expected at most %u (the model's vectors), "
				 "found %u", dim, pe->dimensions);
		else
			snprintf(err, err_len, "dimensions: model '%s' was not trained for shortened "
				 "vectors (worker.embed_truncatable); its vectors have %u values",
				 s->cfg->model_name, dim);
		return PROTO_E_BAD_REQUEST;
	}
	if (wk_serve_emb_waiting(s) >= (uint32_t)s->cfg->max_waiting) {
		snprintf(err, err_len, "worker queue full (%u embedding requests waiting, max_waiting "
			 "%lld)", wk_serve_emb_waiting(s), (long long)s->cfg->max_waiting);
		return PROTO_E_OVERLOADED;
	}
	return 0;
}

void wk_serve_handle_embed(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m)
{
	const struct proto_embed *pe = &m->u.embed;
	struct wk_serve_emb *e = NULL;
	char err[512] = "";
	uint16_t code;
	uint64_t cap = 0;
	enum cm_status st = CM_OK;

	code = emb_refusal(s, c, m, err, sizeof(err));
	if (code)
		goto fail;
	code = PROTO_E_BAD_REQUEST;
	e = cm_calloc(1, sizeof(*e));
	if (!e)
		goto nomem;
	e->conn = c;
	e->id = m->request_id;
	e->dimensions = pe->dimensions;
	e->n_inputs = pe->n_inputs;
	e->t_submit = cm_mono_ns();
	e->off = cm_calloc(pe->n_inputs, sizeof(uint32_t));
	e->len = cm_calloc(pe->n_inputs, sizeof(uint32_t));
	e->truncated = cm_calloc(pe->n_inputs, 1);
	if (!e->off || !e->len || !e->truncated)
		goto nomem;
	for (uint32_t i = 0; i < pe->n_inputs && st == CM_OK; i++)
		st = emb_tokens(s, e, &cap, &pe->inputs[i], i,
				(m->flags & PROTO_EMBED_F_TRUNCATE) != 0, &code, err, sizeof(err));
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK)
		goto fail;
	if (s->emb_tail)
		s->emb_tail->next = e;
	else
		s->emb_head = e;
	s->emb_tail = e;
	return;
nomem:
	code = PROTO_E_INTERNAL;
	snprintf(err, sizeof(err), "out of memory admitting the request");
fail:
	emb_free(e);
	wk_serve_send_error(c, m->request_id, code, err);
}

int wk_serve_cancel_embed(struct wk_server *s, struct wk_serve_conn *c, uint64_t id)
{
	struct wk_serve_emb *e = emb_find(s, c, id);

	if (!e)
		return 0;
	emb_unlink(s, e);
	send_done(e, PROTO_FINISH_CANCELLED);
	emb_free(e);
	return 1;
}

void wk_serve_embed_cancel_all(struct wk_server *s)
{
	while (s->emb_head)
		wk_serve_cancel_embed(s, s->emb_head->conn, s->emb_head->id);
}

void wk_serve_embed_conn_gone(struct wk_server *s, const struct wk_serve_conn *c)
{
	struct wk_serve_emb *e = s->emb_head;

	while (e) {
		struct wk_serve_emb *nx = e->next;

		if (e->conn == c) {
			emb_unlink(s, e);
			emb_free(e);
		}
		e = nx;
	}
}

static uint32_t emb_pick(struct wk_server *s, struct emb_pick *pk, uint64_t *n_tok)
{
	uint64_t budget = (uint64_t)s->cfg->embed_step_tokens;
	uint32_t n = 0;
	int more = 1;

	*n_tok = 0;
	while (more && n < EMB_STEP_INPUTS_MAX) {
		more = 0;
		for (struct wk_serve_emb *e = s->emb_head; e && n < EMB_STEP_INPUTS_MAX; e = e->next) {
			uint32_t len;

			if (e->next_input >= e->n_inputs)
				continue;
			len = e->len[e->next_input];
			if (n > 0 && *n_tok + len > budget)
				continue;
			pk[n].e = e;
			pk[n++].input = e->next_input++;
			*n_tok += len;
			more = 1;
		}
	}
	return n;
}

/* The first `dim` values of v as a unit vector (dim < the model's). */
static void emb_shorten(float *v, uint32_t dim)
{
	double norm = 0;

	for (uint32_t i = 0; i < dim; i++)
		norm += (double)v[i] * v[i];
	norm = sqrt(norm);
	for (uint32_t i = 0; norm > 0 && i < dim; i++)
		v[i] = (float)(v[i] / norm);
}

static void emb_send(struct wk_server *s, struct wk_serve_emb *e, uint32_t input, float *v,
		     int64_t now)
{
	struct proto_msg m;
	uint32_t dim = e->dimensions ? e->dimensions : s->model->hp.n_embd;

	if (dim < s->model->hp.n_embd)
		emb_shorten(v, dim);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_EMBEDDING;
	m.request_id = e->id;
	m.u.embedding.index = input;
	m.u.embedding.n_tokens = e->len[input];
	m.u.embedding.truncated = e->truncated[input];
	m.u.embedding.n_values = dim;
	m.u.embedding.values = v;
	wk_serve_conn_send(e->conn, &m);
	if (!e->t_first_out)
		e->t_first_out = now;
	e->n_done++;
}

/* Ends the step's requests that have all their vectors, or all of them
 * when the step failed (ERROR internal: nothing more comes for them). */
static void emb_finish(struct wk_server *s, enum cm_status st)
{
	struct wk_serve_emb *e = s->emb_head;

	while (e) {
		struct wk_serve_emb *nx = e->next;
		int in = e->in_step;

		e->in_step = 0;
		if (in && (st != CM_OK || e->n_done == e->n_inputs)) {
			if (st == CM_OK) {
				send_done(e, PROTO_FINISH_STOP);
				s->prompt_tokens += e->n_tokens;
			} else {
				wk_serve_send_error(e->conn, e->id, PROTO_E_INTERNAL,
						    "the embedding step failed");
			}
			emb_unlink(s, e);
			emb_free(e);
		}
		e = nx;
	}
}

enum cm_status wk_serve_embed_step(struct wk_server *s)
{
	uint32_t e_dim = s->model->hp.n_embd, n;
	struct emb_pick *pk = s->emb_picks;
	uint64_t n_tok;
	int64_t t0 = cm_mono_ns(), t1;
	enum cm_status st = CM_OK;

	if (!s->emb_head)
		return CM_OK;
	n = emb_pick(s, pk, &n_tok);
	if (n && s->model->hp.causal)
		n = emb_blocks(s, pk, n, &n_tok);
	if (n == 0)
		return CM_OK;
	for (uint32_t i = 0; i < n; i++) {
		struct wk_serve_emb *e = pk[i].e;

		if (!e->t_first_step)
			e->t_first_step = t0;
		e->in_step = 1;
	}
	if (n_tok > s->emb_tok_cap) {
		int32_t *p = cm_realloc(s->emb_tok, n_tok * sizeof(int32_t));

		if (!p) {
			st = CM_ENOMEM;
			goto out;
		}
		s->emb_tok = p;
		s->emb_tok_cap = n_tok;
	}
	if ((uint64_t)n * e_dim > s->emb_out_cap) {
		float *p = cm_realloc(s->emb_out, (uint64_t)n * e_dim * sizeof(float));

		if (!p) {
			st = CM_ENOMEM;
			goto out;
		}
		s->emb_out = p;
		s->emb_out_cap = (uint64_t)n * e_dim;
	}
	n_tok = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct wk_serve_emb *e = pk[i].e;

		memcpy(s->emb_tok + n_tok, e->tokens + e->off[pk[i].input],
		       e->len[pk[i].input] * sizeof(int32_t));
		s->emb_lens[i] = e->len[pk[i].input];
		n_tok += s->emb_lens[i];
	}
	st = s->be->ops->embed(s->be, n, s->emb_tok, s->emb_lens,
			       s->model->hp.causal ? s->emb_blocks : NULL, s->emb_out);
	t1 = cm_mono_ns();
	s->emb_steps++;
	s->emb_step_tokens += n_tok;
	for (struct wk_serve_emb *e = s->emb_head; e; e = e->next)
		if (e->in_step)
			e->step_ns += t1 - t0;
	for (uint32_t i = 0; st == CM_OK && i < n; i++)
		emb_send(s, pk[i].e, pk[i].input, s->emb_out + (uint64_t)i * e_dim, t1);
out:
	for (uint32_t i = 0; s->model->hp.causal && i < s->emb_n_blocks; i++)
		wk_kv_unref(s->kv, s->emb_blocks[i]);
	s->emb_n_blocks = 0;
	if (st != CM_OK)
		cm_logf(CM_LOG_ERROR, "embed_step_failed", "%u inputs, %llu tokens: %s", n,
			(unsigned long long)n_tok, cm_status_str(st));
	emb_finish(s, st);
	return st;
}

enum cm_status wk_serve_embed_setup(struct wk_server *s)
{
	s->emb_picks = cm_calloc(EMB_STEP_INPUTS_MAX, sizeof(struct emb_pick));
	s->emb_lens = cm_calloc(EMB_STEP_INPUTS_MAX, sizeof(uint32_t));
	return s->emb_picks && s->emb_lens ? CM_OK : CM_ENOMEM;
}

void wk_serve_embed_teardown(struct wk_server *s)
{
	while (s->emb_head) {
		struct wk_serve_emb *e = s->emb_head;

		s->emb_head = e->next;
		emb_free(e);
	}
	s->emb_tail = NULL;
	cm_free(s->emb_picks);
	cm_free(s->emb_lens);
	cm_free(s->emb_tok);
	cm_free(s->emb_out);
	cm_free(s->emb_blocks);
}

/* (an encoder's: a decoder's PING is a real generation, request.c) */
int wk_serve_embed_probe(struct wk_server *s)
{
	int32_t tok = wk_tok_bos(s->model->tok) >= 0 ? wk_tok_bos(s->model->tok) : 0;
	uint32_t len = 1;
	float *v = cm_malloc(s->model->hp.n_embd * sizeof(float));
	enum cm_status st = v ? s->be->ops->embed(s->be, 1, &tok, &len, NULL, v) : CM_ENOMEM;

	cm_free(v);
	return st == CM_OK;
}
