/*
 * request.c - the requests of a gateway connection: SUBMIT
 * (validated, tokenized, templated, admitted to the scheduler), CANCEL,
 * PING (a real one-token probe), DRAIN, and the scheduler callbacks that
 * stream TOKEN frames and end with DONE or ERROR.
 */
#include "worker/serve/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/log.h"
#include "worker/text/tokenizer.h"

static int32_t cb_sample(void *owner, struct wk_seq *q, const float *logits,
			 const int32_t *hist, uint32_t n_hist, float *logprob)
{
	struct wk_server *s = owner;
	struct wk_serve_req *r = wk_seq_owner_data(q);

	(void)hist;
	(void)n_hist;
	return wk_gen_sample(r->gen, s->ws, logits, logprob);
}

/* A token's bytes for logprobs: its text in the vocabulary trie (control
 * tokens, which have none there, are empty). */
static struct proto_str piece_of(const struct wk_server *s, int32_t tok)
{
	size_t len = 0;
	const uint8_t *p = s->vtrie ? wk_vtrie_piece(s->vtrie, tok, &len) : NULL;

	return (struct proto_str){ p ? (const char *)p : NULL, p ? (uint32_t)len : 0 };
}

static int cb_emit(void *owner, struct wk_seq *q, int32_t tok, float lp,
		   const float *logits)
{
	struct wk_server *s = owner;
	struct wk_serve_req *r = wk_seq_owner_data(q);
	const uint8_t *text;
	size_t len;
	int stop = wk_gen_push(r->gen, tok, logits, &text, &len);
	int64_t now = cm_mono_ns();
	struct proto_msg m;
	struct proto_token t;
	struct proto_top top[PROTO_TOP_LOGPROBS_MAX];

	if (wk_seq_n_generated(q) == 1)
		wk_serve_hist_add(s->ttft_hist, now - wk_seq_timing(q)->t_submit);
	else
		wk_serve_hist_add(s->itl_hist, now - r->t_last_token);
	r->t_last_token = now;
	r->last_token = tok;
	s->gen_tokens++;
	if (r->probe || !r->conn)
		return stop;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_TOKEN;
	m.request_id = r->id;
	memset(&t, 0, sizeof(t));
	t.id = (uint32_t)tok;
	t.logprob = lp;
	t.text.ptr = (const char *)text;
	t.text.len = (uint32_t)len;
	if (r->logprobs)
		t.piece = piece_of(s, tok);
	{
		/* the alternatives the generation kept (none unless asked) */
		const uint32_t *ids;
		const float *lps;
		uint32_t n = wk_gen_top(r->gen, &ids, &lps);

		for (uint32_t i = 0; i < n && i < PROTO_TOP_LOGPROBS_MAX; i++) {
			top[i].id = ids[i];
			top[i].logprob = lps[i];
			top[i].piece = piece_of(s, (int32_t)ids[i]);
		}
		t.n_top = (uint8_t)(n < PROTO_TOP_LOGPROBS_MAX ? n : PROTO_TOP_LOGPROBS_MAX);
		t.top = t.n_top ? top : NULL;
	}
	if (r->tc) {
		/* the text by channel: content, reasoning, tool calls */
		wk_serve_tools_emit(r, &t, text, len, 0);
		return stop;
	}
	m.u.tokens.n = 1;
	m.u.tokens.tok = &t;
	wk_serve_conn_send(r->conn, &m);
	return stop;
}

static void req_unlink(struct wk_serve_req *r)
{
	struct wk_serve_req **pp;

	if (!r->conn)
		return;
	for (pp = &r->conn->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			r->conn->n_reqs--;
			break;
		}
	}
	r->conn = NULL;
}

static void req_free(struct wk_server *s, struct wk_serve_req *r)
{
	if (!r)
		return;
	wk_gen_free(r->gen);
	if (r->gent)
		wk_gcache_put(s->gcache, r->gent);
	wk_tc_free(r->tc);
	cm_buf_deinit(&r->tc_text);
	cm_free(r);
}

static void cb_done(void *owner, struct wk_seq *q, enum wk_seq_end end)
{
	struct wk_server *s = owner;
	struct wk_serve_req *r = wk_seq_owner_data(q);
	const struct wk_seq_timing *tm = wk_seq_timing(q);
	struct proto_msg m;

	s->prompt_tokens += wk_seq_n_prompt(q);
	if (r->probe) {
		memset(&m, 0, sizeof(m));
		m.type = PROTO_PONG;
		m.u.pong.nonce = r->ping_nonce;
		m.u.pong.ok = wk_seq_n_generated(q) > 0 && end != WK_END_ERROR;
		m.u.pong.tokens = wk_seq_n_generated(q);
		m.u.pong.gen_ns = tm->t_end - tm->t_submit;
		wk_serve_conn_send(r->conn, &m);
	} else if (r->conn && end == WK_END_ERROR && r->gen && wk_gen_error(r->gen)) {
		wk_serve_send_error(r->conn, r->id, PROTO_E_CONSTRAINT, wk_gen_error(r->gen));
	} else if (r->conn && end == WK_END_ERROR) {
		wk_serve_send_error(r->conn, r->id, PROTO_E_INTERNAL, "engine failure during generation");
	} else if (r->conn) {
		const uint8_t *text;
		size_t len;

		if (end != WK_END_CANCELLED && r->tc) {
			wk_gen_finish(r->gen, &text, &len);
			wk_serve_tools_emit(r, NULL, text, len, 1);
		} else if (end != WK_END_CANCELLED) {
			wk_gen_finish(r->gen, &text, &len);
			if (len > 0) {
				/* held-back text: a text-only entry (id 0xFFFFFFFF) */
				struct proto_token t = { UINT32_MAX, 0.0f, { (const char *)text, (uint32_t)len },
							 { NULL, 0 }, 0, NULL, PROTO_CH_CONTENT };

				memset(&m, 0, sizeof(m));
				m.type = PROTO_TOKEN;
				m.request_id = r->id;
				m.u.tokens.n = 1;
				m.u.tokens.tok = &t;
				wk_serve_conn_send(r->conn, &m);
			}
		}
		memset(&m, 0, sizeof(m));
		m.type = PROTO_DONE;
		m.request_id = r->id;
		m.u.done.finish = end == WK_END_STOP ? PROTO_FINISH_STOP
				  : end == WK_END_LENGTH ? PROTO_FINISH_LENGTH
							 : PROTO_FINISH_CANCELLED;
		m.u.done.prompt_tokens = wk_seq_n_prompt(q);
		m.u.done.cached_tokens = wk_seq_n_cached(q);
		m.u.done.gen_tokens = wk_seq_n_generated(q);
		m.u.done.preemptions = wk_seq_preemptions(q);
		m.u.done.load_ns = 0;
		m.u.done.queue_ns = tm->t_admit ? tm->t_admit - tm->t_submit : tm->t_end - tm->t_submit;
		m.u.done.prefill_ns = tm->prefill_ns;
		m.u.done.decode_ns = tm->decode_ns;
		m.u.done.ttft_ns = tm->t_first_token ? tm->t_first_token - tm->t_submit : 0;
		memcpy(m.u.done.logits_digest, wk_gen_digest(r->gen), 32);
		m.u.done.constraint_ns = r->constraint_ns;
		m.u.done.reasoning_tokens = r->reasoning_tokens;
		wk_serve_conn_send(r->conn, &m);
	}
	{
		struct cm_log_rec lr;

		cm_log_begin(&lr, CM_LOG_INFO, "request_done");
		cm_log_u64(&lr, "request_id", r->id);
		cm_log_bool(&lr, "probe", r->probe);
		cm_log_str(&lr, "end", end == WK_END_STOP ? "stop" : end == WK_END_LENGTH ? "length"
				       : end == WK_END_CANCELLED ? "cancelled" : "error");
		cm_log_u64(&lr, "prompt_tokens", wk_seq_n_prompt(q));
		cm_log_u64(&lr, "cached_tokens", wk_seq_n_cached(q));
		cm_log_u64(&lr, "gen_tokens", wk_seq_n_generated(q));
		cm_log_u64(&lr, "preemptions", wk_seq_preemptions(q));
		cm_log_i64(&lr, "ttft_ns", tm->t_first_token ? tm->t_first_token - tm->t_submit : -1);
		cm_log_i64(&lr, "total_ns", tm->t_end - tm->t_submit);
		cm_log_u64(&lr, "seed", r->gen ? wk_gen_seed(r->gen) : 0);
		if (r->gent) {
			cm_log_i64(&lr, "constraint_ns", r->constraint_ns);
			cm_log_u64(&lr, "constraint_masks", wk_gen_masks(r->gen));
		}
		cm_log_end(&lr);
	}
	req_unlink(r);
	req_free(s, r);
}

int wk_serve_model_other(const struct wk_server *s, struct proto_str model, char *err,
			 size_t err_len)
{
	if (!model.len || (strlen(s->cfg->model_name) == model.len &&
			   memcmp(model.ptr, s->cfg->model_name, model.len) == 0))
		return 0;
	snprintf(err, err_len, "model: this worker serves '%s', found '%.*s'", s->cfg->model_name,
		 (int)(model.len > 64 ? 64 : model.len), model.ptr);
	return 1;
}

struct wk_serve_req *wk_serve_find_req(struct wk_serve_conn *c, uint64_t id)
{
	for (struct wk_serve_req *r = c->reqs; r; r = r->next)
		if (r->id == id && !r->probe)
			return r;
	return NULL;
}

static void sampling_from_proto(const struct proto_sampling *ps, uint32_t flags,
				uint32_t n_vocab, uint32_t n_ctx, struct wk_sampler_params *p)
{
	p->temperature = ps->temperature;
	/* the documented ranges (docs/api.md) in the sampler's (issue 13,
	 * finding 9): top_k at or above the vocabulary keeps every token (off);
	 * a repeat window beyond the context (repeat_last_n -1, "the whole
	 * context", arrives as UINT32_MAX) is the context, at most what the
	 * sampler looks back */
	p->top_k = ps->top_k >= n_vocab ? 0 : ps->top_k;
	p->top_p = ps->top_p;
	if (ps->top_p == 0.0f) {
		/* top_p 0: the smallest nucleus, the single most likely token
		 * (as llama.cpp and vLLM read it) */
		p->top_k = 1;
		p->top_p = 1.0f;
	}
	p->min_p = ps->min_p;
	p->repeat_penalty = ps->repeat_penalty;
	p->repeat_last_n = ps->repeat_last_n > n_ctx ? n_ctx : ps->repeat_last_n;
	if (p->repeat_last_n > WK_SAMPLER_REPEAT_LAST_N_MAX)
		p->repeat_last_n = WK_SAMPLER_REPEAT_LAST_N_MAX;
	p->presence_penalty = ps->presence_penalty;
	p->frequency_penalty = ps->frequency_penalty;
	p->seed = ps->seed;
	p->has_seed = (flags & PROTO_SUBMIT_F_HAS_SEED) != 0;
	/* the gateway reads a TOKEN's logprob only for a request that asked for
	 * logprobs (docs/protocol.md): skip its pass over the vocabulary */
	p->no_logprob = !(flags & PROTO_SUBMIT_F_LOGPROBS);
}

/* The chat messages of a SUBMIT with the worker's role names (proto/);
 * *out NULL for a TEXT prompt.  CM_EINVAL with err set, or CM_ENOMEM. */
static enum cm_status submit_messages(const struct proto_submit *sb, struct wk_chat_msg **out,
				      char *err, size_t err_len)
{
	struct wk_chat_msg *msgs;

	*out = NULL;
	if (sb->prompt_kind != PROTO_PROMPT_CHAT)
		return CM_OK;
	if (sb->n_messages == 0) {
		snprintf(err, err_len, "messages: expected at least one message, found none");
		return CM_EINVAL;
	}
	msgs = cm_calloc(sb->n_messages, sizeof(*msgs));
	if (!msgs)
		return CM_ENOMEM;
	for (uint32_t i = 0; i < sb->n_messages; i++) {
		const struct proto_str *role = &sb->messages[i].role;
		int ri = proto_role_parse(role->ptr, role->len);

		if (ri < 0) {
			snprintf(err, err_len,
				 "messages[%u].role: expected one of " PROTO_ROLE_LIST ", found '%.*s'",
				 i, (int)(role->len > 32 ? 32 : role->len), role->ptr);
			cm_free(msgs);
			return CM_EINVAL;
		}
		msgs[i].role = proto_role_names[ri];
		msgs[i].content = sb->messages[i].content.ptr;
		msgs[i].content_len = sb->messages[i].content.len;
		if (sb->messages[i].tool_calls.len) {
			msgs[i].tool_calls = sb->messages[i].tool_calls.ptr;
			msgs[i].tool_calls_len = sb->messages[i].tool_calls.len;
		}
		msgs[i].tool_call_id = sb->messages[i].tool_call_id.ptr;
		msgs[i].tool_call_id_len = sb->messages[i].tool_call_id.len;
	}
	*out = msgs;
	return CM_OK;
}

/*
 * Tokenizes the prompt (chat template applied) within the request's limit
 * and the context, and sets *max_tokens: the request's, or with
 * PROTO_SUBMIT_F_FIT what the context leaves after the prompt when that is
 * less.  On failure *code is the ERROR code and err says why.
 */
static enum cm_status submit_prompt(struct wk_server *s, const struct proto_msg *m,
				    int32_t **prompt, uint32_t *n_prompt, uint32_t *max_tokens,
				    uint16_t *code, char *err, size_t err_len)
{
	const struct proto_submit *sb = &m->u.submit;
	struct wk_chat_msg *msgs = NULL;
	uint32_t max_prompt = s->n_ctx;
	enum cm_status st;

	if (sb->max_prompt_tokens && sb->max_prompt_tokens < max_prompt)
		max_prompt = sb->max_prompt_tokens;
	/*
	 * Refused by its size before any tokenizing (issue 13, finding 6: a
	 * 4 MiB prompt took 0.45 s of the scheduler's only thread to be found
	 * too long, and other tenants waited): every token covers at most
	 * max_piece_bytes of input.
	 */
	{
		uint64_t bytes = sb->text.len;

		for (uint32_t i = 0; i < sb->n_messages; i++)
			bytes += sb->messages[i].content.len;
		if (bytes > (uint64_t)(max_prompt + 1) * s->max_piece_bytes) {
			snprintf(err, err_len, "prompt of %llu bytes is over %u tokens whatever it says "
				 "(no token is longer than %u bytes), the limit for this request "
				 "(context %u)", (unsigned long long)bytes, max_prompt,
				 s->max_piece_bytes, s->n_ctx);
			*code = PROTO_E_TOO_LONG;
			return CM_ELIMIT;
		}
	}
	st = submit_messages(sb, &msgs, err, err_len);
	if (st == CM_OK) {
		/* the tools are rendered unless the request said none */
		struct wk_chat_opts o = {
			.tools = sb->tool_choice != PROTO_TOOLS_NONE && sb->tools.len ? sb->tools.ptr : NULL,
			.tools_len = sb->tools.len,
		};
		struct wk_think_mode tm;

		wk_serve_think_mode(s, sb, &tm);
		o.no_think = tm.off_form;
		o.open_think = tm.open;

		st = wk_prompt_encode_opts(s->model, sb->text.ptr, sb->text.len, msgs,
					   sb->prompt_kind == PROTO_PROMPT_CHAT ? sb->n_messages : 0,
					   sb->template_name.len ? sb->template_name.ptr
								 : s->cfg->chat_template,
					   &o, (m->flags & PROTO_SUBMIT_F_ADD_BOS) != 0, max_prompt + 1,
					   prompt, n_prompt, err, err_len);
	}
	cm_free(msgs);
	if (st == CM_ELIMIT || (st == CM_OK && *n_prompt > max_prompt)) {
		snprintf(err, err_len, "prompt is over %u tokens, the limit for this request (context %u)",
			 max_prompt, s->n_ctx);
		*code = PROTO_E_TOO_LONG;
		return CM_ELIMIT;
	}
	if (st == CM_ENOTFOUND)
		*code = PROTO_E_NO_TEMPLATE;
	if (st != CM_OK)
		return st;
	if (*n_prompt == 0) {
		int32_t bos = wk_tok_bos(s->model->tok);

		if (bos < 0) {
			snprintf(err, err_len, "prompt: empty, and the model has no BOS token to start from");
			return CM_EINVAL;
		}
		(*prompt)[0] = bos; /* generation starts from BOS alone */
		*n_prompt = 1;
	}
	*max_tokens = sb->max_tokens;
	if ((uint64_t)*n_prompt + sb->max_tokens <= s->n_ctx)
		return CM_OK;
	if ((m->flags & PROTO_SUBMIT_F_FIT) && *n_prompt < s->n_ctx) {
		/* as much as fits: the context ends it with finish "length" */
		*max_tokens = s->n_ctx - *n_prompt;
		return CM_OK;
	}
	if (m->flags & PROTO_SUBMIT_F_FIT)
		snprintf(err, err_len,
			 "prompt of %u tokens fills the context of %u tokens: no room for a completion",
			 *n_prompt, s->n_ctx);
	else
		snprintf(err, err_len,
			 "prompt of %u tokens plus max_tokens %u exceeds the context of %u tokens",
			 *n_prompt, sb->max_tokens, s->n_ctx);
	*code = PROTO_E_TOO_LONG;
	return CM_ELIMIT;
}

/* Why a SUBMIT cannot even be looked at now: draining, duplicate id, full
 * queue, another model.  0 when it can. */
static uint16_t submit_refusal(struct wk_server *s, struct wk_serve_conn *c,
			       const struct proto_msg *m, char *err, size_t err_len)
{
	const struct proto_submit *sb = &m->u.submit;
	struct wk_sched_stats ss;

	if (wk_serve_term_seen(s) || c->draining) {
		snprintf(err, err_len, "worker is draining");
		return PROTO_E_DRAINING;
	}
	if (wk_serve_find_req(c, m->request_id)) {
		snprintf(err, err_len, "request id already in use on this connection");
		return PROTO_E_DUPLICATE;
	}
	if (!s->model->hp.causal) {
		snprintf(err, err_len, "model '%s' is an embedding model: it does not generate "
			 "(/v1/embeddings, /api/embed)", s->cfg->model_name);
		return PROTO_E_BAD_REQUEST;
	}
	wk_sched_stats(s->sched, &ss);
	if (ss.waiting >= (uint32_t)s->cfg->max_waiting) {
		snprintf(err, err_len, "worker queue full (%u waiting, max_waiting %lld)",
			 ss.waiting, (long long)s->cfg->max_waiting);
		return PROTO_E_OVERLOADED;
	}
	if (wk_serve_model_other(s, sb->model, err, err_len))
		return PROTO_E_BAD_REQUEST;
	return 0;
}

static void handle_submit(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m)
{
	const struct proto_submit *sb = &m->u.submit;
	char err[512] = "";
	const char **stops = NULL;
	size_t *stop_lens = NULL;
	int32_t *prompt = NULL;
	uint32_t n_prompt = 0, max_tokens = 0;
	struct wk_gen_params gp;
	struct wk_serve_req *r = NULL;
	struct wk_seq_params sp;
	enum cm_status st;
	uint16_t code;

	code = submit_refusal(s, c, m, err, sizeof(err));
	if (code != 0)
		goto fail;
	code = PROTO_E_BAD_REQUEST;
	st = submit_prompt(s, m, &prompt, &n_prompt, &max_tokens, &code, err, sizeof(err));
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK)
		goto fail;
	memset(&gp, 0, sizeof(gp));
	sampling_from_proto(&sb->sampling, m->flags, s->model->hp.n_vocab, s->n_ctx, &gp.sampling);
	if (sb->n_stop) {
		stops = cm_calloc(sb->n_stop, sizeof(*stops));
		stop_lens = cm_calloc(sb->n_stop, sizeof(*stop_lens));
		if (!stops || !stop_lens)
			goto nomem;
		for (uint32_t i = 0; i < sb->n_stop; i++) {
			stops[i] = sb->stop[i].ptr;
			stop_lens[i] = sb->stop[i].len;
		}
	}
	gp.stop = stops;
	gp.stop_lens = stop_lens;
	gp.n_stop = sb->n_stop;
	gp.ignore_eos = (m->flags & PROTO_SUBMIT_F_IGNORE_EOS) != 0;
	gp.digest = (m->flags & PROTO_SUBMIT_F_DIGEST) != 0;
	r = cm_calloc(1, sizeof(*r));
	if (!r)
		goto nomem;
	st = wk_serve_constraint_get(s, m->request_id, sb, &r->gent, &r->constraint_ns, err,
				     sizeof(err));
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK) {
		code = PROTO_E_CONSTRAINT;
		goto fail;
	}
	r->id = m->request_id;
	st = wk_serve_tools_setup(s, sb, r, err, sizeof(err));
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK) {
		code = st == CM_EINVAL && !r->gent && sb->tool_choice >= PROTO_TOOLS_REQUIRED &&
				       strncmp(err, "tool_choice", 11) == 0
			       ? PROTO_E_BAD_REQUEST : PROTO_E_CONSTRAINT;
		goto fail;
	}
	if (r->gent) {
		gp.mask = wk_gentry_mask(r->gent);
		gp.mask_state = wk_gm_start(wk_gentry_matcher(r->gent));
		if (gp.mask_state < 0) {
			snprintf(err, sizeof(err), "constraint: the matcher ran out of room at the start");
			code = PROTO_E_CONSTRAINT;
			goto fail;
		}
	}
	{
		struct wk_think_mode tm;

		wk_serve_think_mode(s, sb, &tm);
		gp.think_open = tm.open;
		gp.think_detect = tm.detect;
		gp.think_budget = tm.on && sb->think_budget ? sb->think_budget : WK_GEN_NO_BUDGET;
	}
	gp.exact_logprobs = (m->flags & PROTO_SUBMIT_F_LOGPROBS) != 0;
	gp.top_logprobs = sb->top_logprobs;
	r->logprobs = (m->flags & PROTO_SUBMIT_F_LOGPROBS) != 0;
	st = wk_gen_new(s->model, &gp, &r->gen, err, sizeof(err));
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK)
		goto fail;
	st = wk_gen_accept_prompt(r->gen, prompt, n_prompt);
	if (st != CM_OK)
		goto fail;
	r->id = m->request_id;
	r->conn = c;
	r->klass = sb->klass;
	sp.id = m->request_id;
	sp.owner_data = r;
	sp.salt = sb->cache_salt;
	sp.prompt = prompt;
	sp.n_prompt = n_prompt;
	sp.max_tokens = max_tokens;
	sp.probe = 0;
	st = wk_sched_submit(s->sched, &sp, &r->seq);
	if (st == CM_ELIMIT) {
		snprintf(err, sizeof(err), "prompt of %u tokens plus max_tokens %u does not fit the KV cache",
			 n_prompt, max_tokens);
		code = PROTO_E_TOO_LONG;
		goto fail;
	}
	if (st != CM_OK)
		goto nomem;
	r->next = c->reqs;
	c->reqs = r;
	c->n_reqs++;
	r = NULL;
	goto out;
nomem:
	snprintf(err, sizeof(err), "worker out of memory");
	code = PROTO_E_INTERNAL;
fail:
	wk_serve_send_error(c, m->request_id, code, err[0] ? err : "invalid request");
out:
	req_free(s, r);
	cm_free(prompt);
	cm_free(stops);
	cm_free(stop_lens);
}

static void handle_ping(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m)
{
	struct wk_serve_req *r = cm_calloc(1, sizeof(*r));
	struct wk_gen_params gp;
	struct wk_seq_params sp;
	uint8_t salt[32];
	int32_t tok;
	char err[256];

	if (!s->model->hp.causal) {
		/* an embedding model: one real one-token embedding, now */
		int64_t t0 = cm_mono_ns();
		struct proto_msg pm;

		cm_free(r);
		memset(&pm, 0, sizeof(pm));
		pm.type = PROTO_PONG;
		pm.u.pong.nonce = m->u.ping.nonce;
		pm.u.pong.ok = (uint8_t)wk_serve_embed_probe(s);
		pm.u.pong.tokens = pm.u.pong.ok;
		pm.u.pong.gen_ns = cm_mono_ns() - t0;
		wk_serve_conn_send(c, &pm);
		return;
	}
	memset(&gp, 0, sizeof(gp));
	gp.sampling.temperature = 0;
	gp.sampling.top_p = 1;
	gp.sampling.repeat_penalty = 1;
	gp.sampling.has_seed = true;
	gp.ignore_eos = 1;
	if (!r || wk_gen_new(s->model, &gp, &r->gen, err, sizeof(err)) != CM_OK)
		goto fail;
	/* a probe gets its own random salt: it never shares cache with anyone */
	if (cm_random_bytes(salt, sizeof(salt)) != CM_OK)
		goto fail;
	tok = wk_tok_bos(s->model->tok);
	if (tok < 0)
		tok = 0;
	r->probe = 1;
	r->id = m->request_id;
	r->conn = c;
	r->ping_nonce = m->u.ping.nonce;
	sp.id = m->request_id;
	sp.owner_data = r;
	sp.salt = salt;
	sp.prompt = &tok;
	sp.n_prompt = 1;
	sp.max_tokens = 1;
	sp.probe = 1;
	if (wk_sched_submit(s->sched, &sp, &r->seq) != CM_OK)
		goto fail;
	r->next = c->reqs;
	c->reqs = r;
	c->n_reqs++;
	return;
fail:
	if (r) {
		wk_gen_free(r->gen);
		cm_free(r);
	}
	{
		struct proto_msg pm;

		memset(&pm, 0, sizeof(pm));
		pm.type = PROTO_PONG;
		pm.u.pong.nonce = m->u.ping.nonce;
		pm.u.pong.ok = 0;
		wk_serve_conn_send(c, &pm);
	}
}

void wk_serve_handle_msg(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m)
{
	struct wk_serve_req *r;

	switch (m->type) {
	case PROTO_SUBMIT:
		handle_submit(s, c, m);
		break;
	case PROTO_EMBED:
		wk_serve_handle_embed(s, c, m);
		break;
	case PROTO_CANCEL:
		r = wk_serve_find_req(c, m->request_id);
		if (!r && wk_serve_cancel_embed(s, c, m->request_id))
			break;
		if (!r) {
			wk_serve_send_error(c, m->request_id, PROTO_E_UNKNOWN_REQUEST,
				   "no running request with this id");
			break;
		}
		wk_sched_cancel(s->sched, r->seq); /* DONE(cancelled) is sent from cb_done */
		break;
	case PROTO_PING:
		handle_ping(s, c, m);
		break;
	case PROTO_DRAIN:
		c->draining = 1;
		cm_logf(CM_LOG_INFO, "drain", "fd %d: DRAIN received: no new requests on this connection", c->fd);
		break;
	default:
		wk_serve_send_error(c, m->request_id, PROTO_E_PROTOCOL, "unexpected message type from a gateway");
		c->dead = 1;
		break;
	}
}

const struct wk_sched_cb wk_serve_sched_cb = { cb_sample, cb_emit, cb_done };
