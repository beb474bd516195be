/*
 * server.c - the worker's event loop: Unix socket, peer checks, proto/
 * frames, and the glue between requests and the scheduler (see server.h).
 *
 * Owns: the model, the backend, the KV block manager, the scheduler, the
 * connections (each with a proto decoder, a capped output buffer and its
 * requests) and the latency histograms reported in STATS.
 * Invariant: a request belongs to exactly one connection and, until its
 * DONE/ERROR, to exactly one scheduler sequence; closing a connection
 * cancels its requests, which frees their KV blocks at once.
 */
#include "worker/serve/server.h"

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
#include "common/buf.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/log.h"
#include "proto/proto.h"
#include "worker/engine/backend.h"
#include "worker/cpu/backend.h"
#ifdef SLUICE_HAVE_CUDA
#include "worker/cuda/backend.h"
#endif
#include "worker/engine/gen.h"
#include "worker/engine/kv.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"
#include "worker/engine/sampler.h"
#include "worker/engine/sched.h"
#include "worker/text/tokenizer.h"

/* ---- configuration ---------------------------------------------------- */

static const char *const mode_choices[] = { "0600", "0660" };
static const char *const backend_choices[] = { "auto", "cpu", "cuda" };
static const char *const kv_type_choices[] = { "F16", "F32" };
static const char *const level_choices[] = { "debug", "info", "warn", "error" };

static const struct cm_cfg_key wk_server_keys[] = {
	CM_CFG_STRING(struct wk_server_cfg, name, "worker-0", 64,
		      "Name of this worker in HELLO, logs and `sluicectl worker drain`."),
	CM_CFG_STRING(struct wk_server_cfg, model, NULL, 4096,
		      "Path of the GGUF model file (required)."),
	CM_CFG_STRING(struct wk_server_cfg, model_name, NULL, 128,
		      "Model name clients ask for; default: the file name without `.gguf`."),
	CM_CFG_STRING(struct wk_server_cfg, model_sha256, NULL, 64,
		      "Pinned SHA-256 (hex) of the model file: checked before serving, a mismatch refuses to start."),
	CM_CFG_STRING(struct wk_server_cfg, socket, NULL, 107,
		      "Path of the Unix stream socket to listen on (required)."),
	CM_CFG_ENUM(struct wk_server_cfg, socket_mode, 0, mode_choices,
		    "Permissions of the socket file."),
	CM_CFG_STRING(struct wk_server_cfg, socket_group, NULL, 64,
		      "Group owning the socket file (with mode 0660)."),
	CM_CFG_STRLIST(struct wk_server_cfg, allowed_uids, NULL, 64, 32,
		       "Peer uids (numbers or user names) allowed to connect, checked with SO_PEERCRED; default: the worker's own uid."),
	CM_CFG_ENUM(struct wk_server_cfg, backend, 0, backend_choices,
		    "Compute backend; `auto` picks CUDA when built and a device is present."),
	CM_CFG_INT(struct wk_server_cfg, device, 0, 0, 64, "GPU index for the CUDA backend."),
	CM_CFG_INT(struct wk_server_cfg, threads, 0, 0, 1024,
		   "Compute threads of the CPU backend; 0 = every online CPU."),
	CM_CFG_SIZE(struct wk_server_cfg, kv_cache_bytes, 0, 0, (int64_t)1 << 50,
		    "Bytes of KV cache; 0 = `kv_cache_fraction` of the free memory."),
	CM_CFG_DOUBLE(struct wk_server_cfg, kv_cache_fraction, 0.25, 0.01, 0.95,
		      "Fraction of free memory (RAM, or device memory after the weights) given to the KV cache when `kv_cache_bytes` is 0."),
	CM_CFG_ENUM(struct wk_server_cfg, kv_type, 0, kv_type_choices,
		    "Element type of the KV cache."),
	CM_CFG_INT(struct wk_server_cfg, block_tokens, CM_LIM_KV_BLOCK_TOKENS, 4, 256,
		   "Tokens per KV block (prefix-cache granularity)."),
	CM_CFG_INT(struct wk_server_cfg, max_running, CM_LIM_MAX_RUNNING_SEQS, 1, 4096,
		   "Sequences in the running batch."),
	CM_CFG_INT(struct wk_server_cfg, step_tokens, CM_LIM_STEP_TOKEN_BUDGET, 1, 65536,
		   "Token budget of one scheduler step (decode tokens first, then prefill chunks)."),
	CM_CFG_INT(struct wk_server_cfg, max_waiting, 1024, 1, 1000000,
		   "Requests waiting for admission; beyond, SUBMIT gets ERROR overloaded."),
	CM_CFG_INT(struct wk_server_cfg, context, 0, 0, 1 << 24,
		   "Context length served; 0 = the model's training context (capped by the KV cache)."),
	CM_CFG_STRING(struct wk_server_cfg, chat_template, NULL, 32,
		      "Chat template family overriding the model's own (llama3, llama2, mistral, chatml, phi3, gemma, zephyr)."),
	CM_CFG_INT(struct wk_server_cfg, max_connections, CM_LIM_WORKER_CONNECTIONS, 1, 1024,
		   "Gateway connections accepted at once."),
	CM_CFG_DURATION(struct wk_server_cfg, stats_interval_ms, 1000, 50, 60000,
			"Interval between STATS frames."),
	CM_CFG_DURATION(struct wk_server_cfg, drain_timeout_ms, 30000, 0, 3600000,
			"On SIGTERM, how long running requests may finish before they are cancelled."),
	CM_CFG_ENUM(struct wk_server_cfg, log_level, 1, level_choices, "Minimum log level."),
};

const struct cm_cfg_section wk_server_section =
	CM_CFG_SECTION("worker", struct wk_server_cfg, wk_server_keys,
		       "The worker process: model, socket, KV cache and scheduler.");

/* ---- state --------------------------------------------------------------- */

struct conn;

struct req {
	struct req *next;        /* in conn->reqs */
	struct conn *conn;       /* NULL once the connection is gone */
	uint64_t id;
	struct wk_seq *seq;
	struct wk_gen *gen;
	int probe;
	uint64_t ping_nonce;
	int64_t t_last_token;
	int32_t last_token;
	uint8_t klass;
};

struct conn {
	int fd;
	uid_t uid;
	struct proto_decoder *dec;
	struct cm_buf out;
	struct req *reqs;
	uint32_t n_reqs;
	int dead;                /* close at the end of this iteration */
	int draining;            /* DRAIN received on this connection */
};

struct wk_server {
	const struct wk_server_cfg *cfg;
	struct wk_model *model;
	struct wk_backend *be;
	struct wk_kv *kv;
	struct wk_sched *sched;
	struct wk_sampler_ws *ws;
	uint32_t n_ctx;
	int listen_fd;
	struct conn **conns;
	uint32_t n_conns;
	uid_t *allowed;
	size_t n_allowed;
	int draining;
	int64_t drain_deadline;
	int64_t next_stats;
	uint64_t ttft_hist[PROTO_HIST_BUCKETS];
	uint64_t itl_hist[PROTO_HIST_BUCKETS];
	uint64_t gen_tokens, prompt_tokens;
	uint64_t last_prefill, last_decode;
	int64_t last_stats_t;
	char backend_name[16];
	char device[128];
	struct req *orphans;     /* requests whose connection closed mid-step */
};

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static void hist_add(uint64_t *h, int64_t ns)
{
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++) {
		if (ns <= proto_hist_bounds_ns[i] || i == PROTO_HIST_BUCKETS - 1) {
			h[i]++;
			return;
		}
	}
}

/* ---- output -------------------------------------------------------------- */

static void conn_send(struct conn *c, const struct proto_msg *m)
{
	enum cm_status st;

	if (!c || c->dead)
		return;
	st = proto_encode(&c->out, m, CM_LIM_PROTO_FRAME_BYTES);
	if (st != CM_OK) {
		/* a peer that does not read is a peer we drop */
		cm_logf(CM_LOG_WARN, "conn_dropped", "fd %d: cannot queue a %s frame (%s)",
			c->fd, proto_type_str((enum proto_type)m->type), cm_status_str(st));
		c->dead = 1;
	}
}

static void send_error(struct conn *c, uint64_t id, uint16_t code, const char *msg)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_ERROR;
	m.request_id = id;
	m.u.error.code = code;
	m.u.error.message.ptr = msg;
	m.u.error.message.len = (uint32_t)strlen(msg);
	conn_send(c, &m);
}

static void conn_flush(struct conn *c)
{
	while (!c->dead && cm_buf_len(&c->out) > 0) {
		ssize_t n = write(c->fd, cm_buf_data(&c->out), cm_buf_len(&c->out));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			c->dead = 1;
			return;
		}
		cm_buf_consume(&c->out, (size_t)n);
	}
}

/* ---- scheduler callbacks -------------------------------------------------- */

static int32_t cb_sample(void *owner, struct wk_seq *q, const float *logits,
			 const int32_t *hist, uint32_t n_hist, float *logprob)
{
	struct wk_server *s = owner;
	struct req *r = wk_seq_owner_data(q);

	(void)hist;
	(void)n_hist;
	return wk_gen_sample(r->gen, s->ws, logits, logprob);
}

static int cb_emit(void *owner, struct wk_seq *q, int32_t tok, float lp,
		   const float *logits)
{
	struct wk_server *s = owner;
	struct req *r = wk_seq_owner_data(q);
	const uint8_t *text;
	size_t len;
	int stop = wk_gen_push(r->gen, tok, logits, &text, &len);
	int64_t now = cm_mono_ns();
	struct proto_msg m;
	struct proto_token t;

	if (wk_seq_n_generated(q) == 1)
		hist_add(s->ttft_hist, now - wk_seq_timing(q)->t_submit);
	else
		hist_add(s->itl_hist, now - r->t_last_token);
	r->t_last_token = now;
	r->last_token = tok;
	s->gen_tokens++;
	if (r->probe || !r->conn)
		return stop;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_TOKEN;
	m.request_id = r->id;
	t.id = (uint32_t)tok;
	t.logprob = lp;
	t.text.ptr = (const char *)text;
	t.text.len = (uint32_t)len;
	m.u.tokens.n = 1;
	m.u.tokens.tok = &t;
	conn_send(r->conn, &m);
	return stop;
}

static void req_unlink(struct req *r)
{
	struct req **pp;

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

static void cb_done(void *owner, struct wk_seq *q, enum wk_seq_end end)
{
	struct wk_server *s = owner;
	struct req *r = wk_seq_owner_data(q);
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
		conn_send(r->conn, &m);
	} else if (r->conn && end == WK_END_ERROR) {
		send_error(r->conn, r->id, PROTO_E_INTERNAL, "engine failure during generation");
	} else if (r->conn) {
		const uint8_t *text;
		size_t len;

		if (end != WK_END_CANCELLED) {
			wk_gen_finish(r->gen, &text, &len);
			if (len > 0) {
				/* held-back text: a text-only entry (id 0xFFFFFFFF) */
				struct proto_token t = { UINT32_MAX, 0.0f, { (const char *)text, (uint32_t)len } };

				memset(&m, 0, sizeof(m));
				m.type = PROTO_TOKEN;
				m.request_id = r->id;
				m.u.tokens.n = 1;
				m.u.tokens.tok = &t;
				conn_send(r->conn, &m);
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
		conn_send(r->conn, &m);
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
		cm_log_end(&lr);
	}
	req_unlink(r);
	wk_gen_free(r->gen);
	cm_free(r);
}

/* ---- requests -------------------------------------------------------------------- */

static struct req *find_req(struct conn *c, uint64_t id)
{
	for (struct req *r = c->reqs; r; r = r->next)
		if (r->id == id && !r->probe)
			return r;
	return NULL;
}

static void sampling_from_proto(const struct proto_sampling *ps, uint32_t flags,
				struct wk_sampler_params *p)
{
	p->temperature = ps->temperature;
	p->top_k = ps->top_k;
	p->top_p = ps->top_p;
	p->min_p = ps->min_p;
	p->repeat_penalty = ps->repeat_penalty;
	p->repeat_last_n = ps->repeat_last_n;
	p->presence_penalty = ps->presence_penalty;
	p->frequency_penalty = ps->frequency_penalty;
	p->seed = ps->seed;
	p->has_seed = (flags & PROTO_SUBMIT_F_HAS_SEED) != 0;
}

static void handle_submit(struct wk_server *s, struct conn *c, const struct proto_msg *m)
{
	const struct proto_submit *sb = &m->u.submit;
	char err[512] = "";
	struct wk_chat_msg *msgs = NULL;
	const char **stops = NULL;
	size_t *stop_lens = NULL;
	int32_t *prompt = NULL;
	uint32_t n_prompt = 0, max_prompt;
	struct wk_gen_params gp;
	struct req *r = NULL;
	struct wk_seq_params sp;
	struct wk_sched_stats ss;
	enum cm_status st;
	uint16_t code = PROTO_E_BAD_REQUEST;

	if (s->draining || c->draining) {
		send_error(c, m->request_id, PROTO_E_DRAINING, "worker is draining");
		return;
	}
	if (find_req(c, m->request_id)) {
		send_error(c, m->request_id, PROTO_E_DUPLICATE, "request id already in use on this connection");
		return;
	}
	wk_sched_stats(s->sched, &ss);
	if (ss.waiting >= (uint32_t)s->cfg->max_waiting) {
		snprintf(err, sizeof(err), "worker queue full (%u waiting, max_waiting %lld)",
			 ss.waiting, (long long)s->cfg->max_waiting);
		send_error(c, m->request_id, PROTO_E_OVERLOADED, err);
		return;
	}
	if (sb->model.len && (strlen(s->cfg->model_name) != sb->model.len ||
			      memcmp(sb->model.ptr, s->cfg->model_name, sb->model.len) != 0)) {
		snprintf(err, sizeof(err), "model: this worker serves '%s', found '%.*s'",
			 s->cfg->model_name, (int)(sb->model.len > 64 ? 64 : sb->model.len),
			 sb->model.ptr);
		goto fail;
	}
	max_prompt = s->n_ctx;
	if (sb->max_prompt_tokens && sb->max_prompt_tokens < max_prompt)
		max_prompt = sb->max_prompt_tokens;
	if (sb->prompt_kind == PROTO_PROMPT_CHAT) {
		msgs = cm_calloc(sb->n_messages ? sb->n_messages : 1, sizeof(*msgs));
		if (!msgs)
			goto nomem;
		for (uint32_t i = 0; i < sb->n_messages; i++) {
			const struct proto_str *role = &sb->messages[i].role;
			int ri = proto_role_parse(role->ptr, role->len);

			msgs[i].role = ri >= 0 ? proto_role_names[ri] : NULL;
			if (!msgs[i].role) {
				snprintf(err, sizeof(err),
					 "messages[%u].role: expected one of " PROTO_ROLE_LIST ", found '%.*s'",
					 i, (int)(role->len > 32 ? 32 : role->len), role->ptr);
				goto fail;
			}
			msgs[i].content = sb->messages[i].content.ptr;
			msgs[i].content_len = sb->messages[i].content.len;
		}
		if (sb->n_messages == 0) {
			snprintf(err, sizeof(err), "messages: expected at least one message, found none");
			goto fail;
		}
	}
	st = wk_prompt_encode(s->model, sb->text.ptr, sb->text.len, msgs,
			      sb->prompt_kind == PROTO_PROMPT_CHAT ? sb->n_messages : 0,
			      sb->template_name.len ? sb->template_name.ptr : s->cfg->chat_template,
			      (m->flags & PROTO_SUBMIT_F_ADD_BOS) != 0, max_prompt + 1, &prompt,
			      &n_prompt, err, sizeof(err));
	if (st == CM_ELIMIT || (st == CM_OK && n_prompt > max_prompt)) {
		snprintf(err, sizeof(err), "prompt is over %u tokens, the limit for this request (context %u)",
			 max_prompt, s->n_ctx);
		code = PROTO_E_TOO_LONG;
		goto fail;
	}
	if (st == CM_ENOTFOUND) {
		code = PROTO_E_NO_TEMPLATE;
		goto fail;
	}
	if (st == CM_ENOMEM)
		goto nomem;
	if (st != CM_OK)
		goto fail;
	if (n_prompt == 0) {
		int32_t bos = wk_tok_bos(s->model->tok);

		if (bos < 0) {
			snprintf(err, sizeof(err), "prompt: empty, and the model has no BOS token to start from");
			goto fail;
		}
		prompt[0] = bos; /* generation starts from BOS alone */
		n_prompt = 1;
	}
	if ((uint64_t)n_prompt + sb->max_tokens > s->n_ctx) {
		snprintf(err, sizeof(err),
			 "prompt of %u tokens plus max_tokens %u exceeds the context of %u tokens",
			 n_prompt, sb->max_tokens, s->n_ctx);
		code = PROTO_E_TOO_LONG;
		goto fail;
	}
	memset(&gp, 0, sizeof(gp));
	sampling_from_proto(&sb->sampling, m->flags, &gp.sampling);
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
	sp.max_tokens = sb->max_tokens;
	sp.probe = 0;
	st = wk_sched_submit(s->sched, &sp, &r->seq);
	if (st == CM_ELIMIT) {
		snprintf(err, sizeof(err), "prompt of %u tokens plus max_tokens %u does not fit the KV cache",
			 n_prompt, sb->max_tokens);
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
	send_error(c, m->request_id, code, err[0] ? err : "invalid request");
out:
	if (r) {
		wk_gen_free(r->gen);
		cm_free(r);
	}
	cm_free(prompt);
	cm_free(msgs);
	cm_free(stops);
	cm_free(stop_lens);
}

static void handle_ping(struct wk_server *s, struct conn *c, const struct proto_msg *m)
{
	struct req *r = cm_calloc(1, sizeof(*r));
	struct wk_gen_params gp;
	struct wk_seq_params sp;
	uint8_t salt[32];
	int32_t tok;
	char err[256];

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
		conn_send(c, &pm);
	}
}

static void handle_msg(struct wk_server *s, struct conn *c, const struct proto_msg *m)
{
	struct req *r;

	switch (m->type) {
	case PROTO_SUBMIT:
		handle_submit(s, c, m);
		break;
	case PROTO_CANCEL:
		r = find_req(c, m->request_id);
		if (!r) {
			send_error(c, m->request_id, PROTO_E_UNKNOWN_REQUEST,
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
		send_error(c, m->request_id, PROTO_E_PROTOCOL, "unexpected message type from a gateway");
		c->dead = 1;
		break;
	}
}

/* ---- connections ------------------------------------------------------------------ */

static void send_hello(struct wk_server *s, struct conn *c)
{
	struct proto_msg m;
	struct proto_hello *h = &m.u.hello;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_HELLO;
	h->proto_version = PROTO_VERSION;
	h->worker_name.ptr = s->cfg->name;
	h->worker_name.len = (uint32_t)strlen(s->cfg->name);
	h->model_name.ptr = s->cfg->model_name;
	h->model_name.len = (uint32_t)strlen(s->cfg->model_name);
	memcpy(h->model_sha256, s->model->sha256, 32);
	h->context_len = s->n_ctx;
	h->vocab_size = s->model->hp.n_vocab;
	h->max_seqs = (uint32_t)s->cfg->max_running;
	h->kv_blocks_total = wk_kv_n_blocks(s->kv);
	h->kv_block_tokens = wk_kv_block_tokens(s->kv);
	h->backend.ptr = s->backend_name;
	h->backend.len = (uint32_t)strlen(s->backend_name);
	h->device.ptr = s->device;
	h->device.len = (uint32_t)strlen(s->device);
	h->engine_version.ptr = SLUICE_VERSION;
	h->engine_version.len = (uint32_t)strlen(SLUICE_VERSION);
	conn_send(c, &m);
}

static int uid_allowed(const struct wk_server *s, uid_t uid)
{
	for (size_t i = 0; i < s->n_allowed; i++)
		if (s->allowed[i] == uid)
			return 1;
	return 0;
}

/* Adopts a connected socket as a gateway connection and sends HELLO. */
static struct conn *conn_new(struct wk_server *s, int fd, uid_t uid)
{
	struct conn *c;

	if (s->n_conns >= (uint32_t)s->cfg->max_connections) {
		cm_logf(CM_LOG_WARN, "conn_refused", "max_connections (%lld) reached",
			(long long)s->cfg->max_connections);
		return NULL;
	}
	c = cm_calloc(1, sizeof(*c));
	if (!c || !(c->dec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES))) {
		cm_free(c);
		return NULL;
	}
	c->fd = fd;
	c->uid = uid;
	cm_buf_init(&c->out, CM_LIM_PROTO_SENDBUF_BYTES);
	s->conns[s->n_conns++] = c;
	cm_logf(CM_LOG_INFO, "conn_open", "fd %d uid %ld", fd, (long)uid);
	send_hello(s, c);
	return c;
}

static void accept_conn(struct wk_server *s)
{
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    !uid_allowed(s, cred.uid)) {
		cm_logf(CM_LOG_WARN, "peer_refused", "peer uid %ld is not in worker.allowed_uids",
			len == sizeof(cred) ? (long)cred.uid : -1L);
		close(fd);
		return;
	}
	if (!conn_new(s, fd, cred.uid))
		close(fd);
}

static void conn_close(struct wk_server *s, uint32_t idx)
{
	struct conn *c = s->conns[idx];

	/* cancel everything it owns: blocks are freed before the next step */
	while (c->reqs) {
		struct req *r = c->reqs;

		c->reqs = r->next;
		c->n_reqs--;
		r->conn = NULL;
		wk_sched_cancel(s->sched, r->seq);
	}
	cm_logf(CM_LOG_INFO, "conn_close", "fd %d", c->fd);
	close(c->fd);
	proto_decoder_free(c->dec);
	cm_buf_deinit(&c->out);
	cm_free(c);
	s->conns[idx] = s->conns[--s->n_conns];
}

/* Decodes and handles every complete frame in data[0..n). */
static void conn_input(struct wk_server *s, struct conn *c, const void *data, size_t n)
{
	struct proto_msg m;
	enum cm_status st;

	if (proto_decoder_feed(c->dec, data, n) != CM_OK) {
		c->dead = 1;
		return;
	}
	while ((st = proto_decoder_next(c->dec, &m)) == CM_OK) {
		handle_msg(s, c, &m);
		if (c->dead)
			return;
	}
	if (st != CM_AGAIN) {
		char msg[128];

		snprintf(msg, sizeof(msg), "malformed frame: %s",
			 proto_error_str(proto_decoder_error(c->dec)));
		cm_logf(CM_LOG_WARN, "proto_error", "fd %d: %s", c->fd, msg);
		send_error(c, 0, PROTO_E_PROTOCOL, msg);
		conn_flush(c);
		c->dead = 1;
	}
}

static void conn_read(struct wk_server *s, struct conn *c)
{
	uint8_t buf[65536];

	while (!c->dead) {
		ssize_t n = read(c->fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			c->dead = 1;
			return;
		}
		conn_input(s, c, buf, (size_t)n);
	}
}

/* ---- stats ---------------------------------------------------------------------- */

static void send_stats(struct wk_server *s, int64_t now)
{
	struct wk_sched_stats ss;
	struct wk_kv_stats ks;
	struct wk_backend_info bi;
	struct proto_msg m;
	struct proto_stats *p = &m.u.stats;
	double dt = (now - s->last_stats_t) / 1e9;

	wk_sched_stats(s->sched, &ss);
	wk_kv_stats(s->kv, &ks);
	s->be->ops->info(s->be, &bi);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_STATS;
	p->queue_depth = ss.waiting;
	p->running = ss.running;
	p->step_batch = ss.last_batch_seqs;
	p->kv_blocks_used = ks.used;
	p->kv_blocks_free = ks.free;
	p->kv_blocks_cached = ks.cached;
	p->prefix_hit_tokens = ss.prefix_hit_tokens;
	p->prompt_tokens = s->prompt_tokens;
	p->gen_tokens = s->gen_tokens;
	p->prefill_tps = dt > 0 ? (float)((ss.prefill_tokens - s->last_prefill) / dt) : 0;
	p->decode_tps = dt > 0 ? (float)((ss.decode_tokens - s->last_decode) / dt) : 0;
	p->device_mem_used = bi.mem_used;
	p->device_mem_total = bi.mem_total;
	p->draining = (uint8_t)s->draining;
	p->n_hist = PROTO_HIST_BUCKETS;
	memcpy(p->ttft_hist, s->ttft_hist, sizeof(s->ttft_hist));
	memcpy(p->itl_hist, s->itl_hist, sizeof(s->itl_hist));
	s->last_prefill = ss.prefill_tokens;
	s->last_decode = ss.decode_tokens;
	s->last_stats_t = now;
	for (uint32_t i = 0; i < s->n_conns; i++)
		conn_send(s->conns[i], &m);
}

/* ---- setup ------------------------------------------------------------------------ */

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

static int parse_allowed(struct wk_server *s, char *err, size_t err_len)
{
	const struct cm_cfg_strlist *l = &s->cfg->allowed_uids;

	s->n_allowed = l->n ? l->n : 1;
	s->allowed = cm_calloc(s->n_allowed, sizeof(uid_t));
	if (!s->allowed)
		return -1;
	if (l->n == 0) {
		s->allowed[0] = getuid();
		return 0;
	}
	for (size_t i = 0; i < l->n; i++) {
		char *end;
		unsigned long v = strtoul(l->items[i], &end, 10);
		struct passwd *pw;

		if (*l->items[i] && *end == '\0') {
			s->allowed[i] = (uid_t)v;
			continue;
		}
		pw = getpwnam(l->items[i]);
		if (!pw) {
			snprintf(err, err_len, "worker.allowed_uids[%zu]: expected a uid or a user name, found '%s'",
				 i, l->items[i]);
			return -1;
		}
		s->allowed[i] = pw->pw_uid;
	}
	return 0;
}

static int listen_socket(struct wk_server *s, char *err, size_t err_len)
{
	struct sockaddr_un sa;
	int fd;
	mode_t mode = s->cfg->socket_mode == 1 ? 0660 : 0600;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(s->cfg->socket) >= sizeof(sa.sun_path)) {
		snprintf(err, err_len, "worker.socket: expected a path shorter than %zu bytes",
			 sizeof(sa.sun_path));
		return -1;
	}
	strcpy(sa.sun_path, s->cfg->socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -1;
	}
	unlink(s->cfg->socket); /* a stale socket from a previous run */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(s->cfg->socket, mode) != 0 || listen(fd, 64) != 0) {
		snprintf(err, err_len, "worker.socket '%s': %s", s->cfg->socket, strerror(errno));
		close(fd);
		return -1;
	}
	if (s->cfg->socket_group && s->cfg->socket_group[0]) {
		struct group *gr = getgrnam(s->cfg->socket_group);

		if (!gr || chown(s->cfg->socket, (uid_t)-1, gr->gr_gid) != 0) {
			snprintf(err, err_len, "worker.socket_group '%s': %s", s->cfg->socket_group,
				 gr ? strerror(errno) : "no such group");
			close(fd);
			return -1;
		}
	}
	s->listen_fd = fd;
	return 0;
}

static int setup(struct wk_server *s, int do_listen, char *err, size_t err_len)
{
	struct wk_model_opts mo = { 0 };
	uint32_t elem = s->cfg->kv_type == 1 ? 4 : 2;
	uint64_t per_tok, per_block, kv_bytes, n_blocks;
	uint32_t bt = (uint32_t)s->cfg->block_tokens;
	int threads = (int)s->cfg->threads;
	struct wk_sched_config sc;
	static const struct wk_sched_cb cbs = { cb_sample, cb_emit, cb_done };
	int64_t t0 = cm_mono_ns();
	struct wk_backend_info bi;
	enum cm_status st;
	int use_cuda = 0;

	mo.sha256_hex = s->cfg->model_sha256;
	mo.compute_sha256 = 1;
	mo.chat_template = s->cfg->chat_template;
	st = wk_model_load(s->cfg->model, &mo, &s->model, err, err_len);
	if (st != CM_OK)
		return -1;
	if (!s->cfg->model_sha256)
		cm_logf(CM_LOG_WARN, "model_unpinned",
			"worker.model_sha256 is not set: pin the digest to refuse a swapped file");
	per_tok = wk_model_kv_bytes_per_token(&s->model->hp, elem);
	per_block = per_tok * bt;
	kv_bytes = s->cfg->kv_cache_bytes;
	/* ---- backend selection (CUDA: issue 8) ---- */
#ifdef SLUICE_HAVE_CUDA
	/* cuda when asked, or auto with a device present; cpu stays the fallback of auto */
	if (s->cfg->backend == 2 || (s->cfg->backend == 0 && wk_cuda_device_count() > 0)) {
		if (elem != 2) {
			snprintf(err, err_len, "worker.kv_type: the cuda backend keeps F16 KV, found F32");
			return -1;
		}
		use_cuda = 1;
	}
	if (use_cuda && kv_bytes == 0) {
		uint32_t nb = 0;

		if (wk_cuda_kv_blocks_for((int)s->cfg->device, s->model, bt,
					  s->cfg->kv_cache_fraction, &nb) != CM_OK) {
			snprintf(err, err_len, "worker.device %lld: no such CUDA device",
				 (long long)s->cfg->device);
			return -1;
		}
		kv_bytes = (uint64_t)nb * per_block;
	}
#endif
	if (kv_bytes == 0)
		kv_bytes = (uint64_t)(mem_available() * s->cfg->kv_cache_fraction);
	n_blocks = per_block ? kv_bytes / per_block : 0;
	if (n_blocks < 2) {
		snprintf(err, err_len, "kv cache: %llu bytes hold fewer than 2 blocks of %llu bytes",
			 (unsigned long long)kv_bytes, (unsigned long long)per_block);
		return -1;
	}
	if (n_blocks > (1u << 24))
		n_blocks = 1u << 24;
	s->n_ctx = s->cfg->context ? (uint32_t)s->cfg->context : s->model->hp.n_ctx_train;
	if (s->n_ctx > n_blocks * bt)
		s->n_ctx = (uint32_t)(n_blocks * bt);
	if (threads <= 0)
		threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (threads <= 0)
		threads = 1;
#ifdef SLUICE_HAVE_CUDA
	if (use_cuda)
		st = wk_cuda_backend_create(s->model, (int)s->cfg->device, (uint32_t)n_blocks, bt,
					    &s->be, err, err_len);
	else
#else
	(void)use_cuda;
	if (s->cfg->backend == 2) {
		snprintf(err, err_len, "worker.backend: 'cuda' is not available in this build");
		return -1;
	}
#endif
	st = wk_cpu_backend_create(s->model, (uint32_t)n_blocks, bt, threads,
				   elem == 4 ? WK_Q_F32 : WK_Q_F16, &s->be, err, err_len);
	if (st != CM_OK)
		return -1;
	s->be->ops->info(s->be, &bi);
	snprintf(s->backend_name, sizeof(s->backend_name), "%s", bi.name);
	snprintf(s->device, sizeof(s->device), "%s", bi.device);
	s->kv = wk_kv_new((uint32_t)n_blocks, bt);
	s->ws = wk_sampler_ws_new(s->model->hp.n_vocab);
	sc.max_running = (uint32_t)s->cfg->max_running;
	sc.step_tokens = (uint32_t)s->cfg->step_tokens;
	sc.n_ctx = s->n_ctx;
	sc.n_vocab = s->model->hp.n_vocab;
	if (!s->kv || !s->ws ||
	    !(s->sched = wk_sched_new(&sc, s->be, s->kv, &cbs, s))) {
		snprintf(err, err_len, "out of memory setting up the scheduler");
		return -1;
	}
	s->conns = cm_calloc((size_t)s->cfg->max_connections, sizeof(*s->conns));
	if (!s->conns || parse_allowed(s, err, err_len) != 0)
		return -1;
	{
		struct cm_log_rec lr;
		char hex[65];

		cm_hex_encode(s->model->sha256, 32, hex);
		cm_log_begin(&lr, CM_LOG_INFO, "worker_ready");
		cm_log_str(&lr, "worker", s->cfg->name);
		cm_log_str(&lr, "model", s->cfg->model_name);
		cm_log_str(&lr, "model_sha256", hex);
		cm_log_u64(&lr, "params", s->model->n_params);
		cm_log_u64(&lr, "weight_bytes", s->model->weight_bytes);
		cm_log_u64(&lr, "kv_bytes_per_token", per_tok);
		cm_log_u64(&lr, "kv_blocks", n_blocks);
		cm_log_u64(&lr, "kv_block_tokens", bt);
		cm_log_u64(&lr, "kv_bytes", n_blocks * per_block);
		cm_log_u64(&lr, "context", s->n_ctx);
		cm_log_u64(&lr, "full_context_seqs", n_blocks * bt / s->n_ctx);
		cm_log_u64(&lr, "max_running", (uint64_t)s->cfg->max_running);
		cm_log_str(&lr, "backend", s->backend_name);
		cm_log_str(&lr, "device", s->device);
		cm_log_i64(&lr, "load_ns", cm_mono_ns() - t0);
		cm_log_end(&lr);
	}
	return do_listen ? listen_socket(s, err, err_len) : 0;
}

static void teardown(struct wk_server *s)
{
	while (s->n_conns)
		conn_close(s, s->n_conns - 1);
	wk_sched_free(s->sched);
	wk_kv_free(s->kv);
	wk_sampler_ws_free(s->ws);
	if (s->be)
		s->be->ops->destroy(s->be);
	wk_model_free(s->model);
	if (s->listen_fd > 0) {
		close(s->listen_fd);
		unlink(s->cfg->socket);
	}
	cm_free(s->conns);
	cm_free(s->allowed);
}

/* ---- the loop ------------------------------------------------------------------------ */

int wk_server_run(const struct wk_server_cfg *cfg)
{
	struct wk_server srv;
	struct wk_server *s = &srv;

	char err[1024] = "";
	struct pollfd *pfd = NULL;
	struct sigaction sa;
	int rc = 1;

	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->listen_fd = -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (setup(s, 1, err, sizeof(err)) != 0) {
		cm_logf(CM_LOG_ERROR, "worker_start_failed", "%s", err[0] ? err : "setup failed");
		fprintf(stderr, "sluice-worker: %s\n", err[0] ? err : "setup failed");
		goto out;
	}
	pfd = cm_calloc((size_t)cfg->max_connections + 1, sizeof(*pfd));
	if (!pfd)
		goto out;
	s->last_stats_t = cm_mono_ns();
	s->next_stats = s->last_stats_t + cfg->stats_interval_ms * CM_NS_PER_MS;
	for (;;) {
		int64_t now = cm_mono_ns();
		int timeout, n;
		uint32_t np = 0;

		if (got_term && !s->draining) {
			s->draining = 1;
			s->drain_deadline = now + cfg->drain_timeout_ms * CM_NS_PER_MS;
			cm_logf(CM_LOG_INFO, "draining", "SIGTERM: no new requests; running ones finish");
		}
		if (s->draining && !wk_sched_idle(s->sched) && now >= s->drain_deadline) {
			/* out of patience: what still runs ends DONE(cancelled) */
			cm_logf(CM_LOG_WARN, "drain_timeout", "cancelling what still runs");
			for (uint32_t i = 0; i < s->n_conns; i++) {
				while (s->conns[i]->reqs)
					wk_sched_cancel(s->sched, s->conns[i]->reqs->seq);
				conn_flush(s->conns[i]);
			}
		}
		if (s->draining && wk_sched_idle(s->sched))
			break;
		timeout = wk_sched_idle(s->sched)
				  ? (int)((s->next_stats - now) / CM_NS_PER_MS + 1)
				  : 0;
		if (timeout < 0)
			timeout = 0;
		pfd[np].fd = s->listen_fd;
		pfd[np++].events = s->draining ? 0 : POLLIN;
		for (uint32_t i = 0; i < s->n_conns; i++) {
			pfd[np].fd = s->conns[i]->fd;
			pfd[np++].events = POLLIN | (cm_buf_len(&s->conns[i]->out) ? POLLOUT : 0);
		}
		n = poll(pfd, np, timeout);
		if (n < 0 && errno != EINTR) {
			cm_logf(CM_LOG_ERROR, "poll_failed", "%s", strerror(errno));
			goto out;
		}
		if (n > 0) {
			uint32_t nc = s->n_conns;

			for (uint32_t i = 0; i < nc; i++) {
				if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
					conn_read(s, s->conns[i]);
			}
			if (pfd[0].revents & POLLIN)
				accept_conn(s);
		}
		for (uint32_t i = s->n_conns; i-- > 0;)
			if (s->conns[i]->dead)
				conn_close(s, i);
		if (!wk_sched_idle(s->sched)) {
			enum cm_status st = wk_sched_step(s->sched);

			if (st != CM_OK && st != CM_AGAIN)
				cm_logf(CM_LOG_ERROR, "step_failed", "%s", cm_status_str(st));
		}
		now = cm_mono_ns();
		if (now >= s->next_stats) {
			send_stats(s, now);
			s->next_stats = now + cfg->stats_interval_ms * CM_NS_PER_MS;
		}
		for (uint32_t i = 0; i < s->n_conns; i++)
			conn_flush(s->conns[i]);
		for (uint32_t i = s->n_conns; i-- > 0;)
			if (s->conns[i]->dead)
				conn_close(s, i);
	}
	cm_logf(CM_LOG_INFO, "worker_exit", "drained");
	rc = 0;
out:
	cm_free(pfd);
	teardown(s);
	return rc;
}

/* ---- embedding for tests and fuzzers -------------------------------------------- */

enum cm_status wk_server_open(const struct wk_server_cfg *cfg, struct wk_server **out,
			      char *err, size_t err_len)
{
	struct wk_server *s = cm_calloc(1, sizeof(*s));

	if (!s)
		return CM_ENOMEM;
	s->cfg = cfg;
	s->listen_fd = -1;
	if (setup(s, 0, err, err_len) != 0) {
		teardown(s);
		cm_free(s);
		return CM_EINVAL;
	}
	*out = s;
	return CM_OK;
}

void wk_server_close(struct wk_server *s)
{
	if (!s)
		return;
	teardown(s);
	cm_free(s);
}

static int conn_index(const struct wk_server *s, int fd)
{
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->fd == fd)
			return (int)i;
	return -1;
}

enum cm_status wk_server_adopt_fd(struct wk_server *s, int fd)
{
	return conn_new(s, fd, getuid()) ? CM_OK : CM_ELIMIT;
}

int wk_server_input(struct wk_server *s, int fd, const void *data, size_t n)
{
	int i = conn_index(s, fd);

	if (i < 0)
		return -1;
	conn_input(s, s->conns[i], data, n);
	conn_flush(s->conns[i]);
	if (s->conns[i]->dead) {
		conn_close(s, (uint32_t)i);
		return -1;
	}
	return 0;
}

int wk_server_step(struct wk_server *s)
{
	if (!wk_sched_idle(s->sched)) {
		enum cm_status st = wk_sched_step(s->sched);

		(void)st;
	}
	for (uint32_t i = 0; i < s->n_conns; i++)
		conn_flush(s->conns[i]);
	for (uint32_t i = s->n_conns; i-- > 0;)
		if (s->conns[i]->dead)
			conn_close(s, i);
	return !wk_sched_idle(s->sched);
}

void wk_server_drop_fd(struct wk_server *s, int fd)
{
	int i = conn_index(s, fd);

	if (i >= 0)
		conn_close(s, (uint32_t)i);
}

void wk_server_kv_usage(const struct wk_server *s, uint32_t *used, uint32_t *cached)
{
	struct wk_kv_stats ks;

	wk_kv_stats(s->kv, &ks);
	*used = ks.used;
	*cached = ks.cached;
}

/* ---- `sluice-worker serve --config FILE` ------------------------------------------ */

int wk_cli_serve(int argc, char **argv)
{
	struct wk_server_cfg cfg;
	const struct cm_cfg_section *secs[1] = { &wk_server_section };
	void *structs[1] = { &cfg };
	const char *path = NULL;
	char err[1024];
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strcmp(argv[i], "--help") == 0) {
			printf("usage: sluice-worker serve --config FILE\n");
			return 0;
		} else {
			fprintf(stderr, "sluice-worker serve: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: sluice-worker serve --config FILE\n");
		return 2;
	}
	if (cm_cfg_load_file(path, secs, structs, 1, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-worker: %s\n", err);
		return 2;
	}
	if (!cfg.model || !cfg.socket) {
		fprintf(stderr, "sluice-worker: %s: worker.%s: expected a path, found nothing\n", path,
			!cfg.model ? "model" : "socket");
		cm_cfg_free(&wk_server_section, &cfg);
		return 2;
	}
	if (cfg.model_sha256 && strlen(cfg.model_sha256) != 64) {
		fprintf(stderr, "sluice-worker: %s: worker.model_sha256: expected 64 hex digits, found %zu characters\n",
			path, strlen(cfg.model_sha256));
		cm_cfg_free(&wk_server_section, &cfg);
		return 2;
	}
	if (!cfg.model_name) {
		const char *base = strrchr(cfg.model, '/');
		size_t n;

		base = base ? base + 1 : cfg.model;
		n = strlen(base);
		if (n > 5 && strcmp(base + n - 5, ".gguf") == 0)
			n -= 5;
		cfg.model_name = cm_strndup(base, n);
		if (!cfg.model_name) {
			cm_cfg_free(&wk_server_section, &cfg);
			return 1;
		}
	}
	cm_log_setup((enum cm_log_level)cfg.log_level, 2, "worker");
	rc = wk_server_run(&cfg);
	cm_cfg_free(&wk_server_section, &cfg);
	return rc;
}
