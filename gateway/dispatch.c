/*
 * dispatch.c - request lifecycle: auth, parse, quota, queue, placement,
 * revocation, accounting and the request log line (see dispatch.h; what
 * the worker sends back: dispatch_results.c).
 */
#include "gateway/dispatch_internal.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/log.h"
#include "gateway/api/endpoints.h"
#include "gateway/http/cors.h"
#include "gateway/reqlog.h"
#include "gateway/gov/lease.h"
#include "gateway/gov/local_limit.h"
#include "gateway/gov/quota.h"
#include "gateway/placement.h"
#include "gateway/http/paths.h"
#include "gateway/gov/usage.h"
#include "gateway/gov/usage_queue.h"

/* ---- job bookkeeping ------------------------------------------------ */

static void job_unref(struct gw_job *j)
{
	if (--j->refs > 0)
		return;
	for (uint32_t i = 0; i < j->n_ch; i++) {
		cm_buf_deinit(&j->ch[i].text);
		gw_api_stream_deinit(&j->ch[i].stream);
	}
	cm_free(j->ch);
	gw_job_emb_free(j);
	cm_buf_deinit(&j->out);
	cm_wipe(&j->ident, sizeof(j->ident));
	cm_free(j);
}

static void active_add(struct gw_dispatch *d, struct gw_job *j)
{
	j->anext = d->active;
	if (d->active)
		d->active->aprev = j;
	d->active = j;
	d->n_active++;
}

static void active_del(struct gw_dispatch *d, struct gw_job *j)
{
	if (j->aprev)
		j->aprev->anext = j->anext;
	else if (d->active == j)
		d->active = j->anext;
	else
		return;
	if (j->anext)
		j->anext->aprev = j->aprev;
	j->anext = j->aprev = NULL;
	d->n_active--;
}

static struct gw_job *job_of_item(struct gw_queue_item *it)
{
	return (struct gw_job *)((char *)it - offsetof(struct gw_job, qi));
}

/* ---- responses ------------------------------------------------------ */

/* Takes the request for a final answer: no on_close may reach the job after. */
struct gw_request *gw_job_take_req(struct gw_job *j)
{
	struct gw_request *r = j->req;

	j->req = NULL;
	if (r)
		gw_request_on_close(r, NULL, NULL);
	return r;
}

static void respond_raw(struct gw_request *r, int status, const char *ct,
			const void *body, size_t len)
{
	if (gw_request_respond(r, status, ct, body, len) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "respond", "response not sent (client gone)");
}

void gw_respond_buf(struct gw_request *r, int status, struct cm_buf *b)
{
	respond_raw(r, status, GW_API_CT_JSON, cm_buf_data(b), cm_buf_len(b));
}

/* Answers the job's client with an error (in the stream when it began). */
void gw_job_fail(struct gw_job *j, const struct gw_api_error *e,
		 uint32_t retry_after, const char *outcome)
{
	struct gw_request *r = gw_job_take_req(j);

	if (r && j->streaming) {
		cm_buf_reset(&j->out);
		if (gw_api_render_stream_error(&j->out, &j->ch[0].stream, e) == CM_OK &&
		    gw_request_stream_write(r, cm_buf_data(&j->out),
					    cm_buf_len(&j->out)) == CM_OK)
			GW_IGNORE(gw_request_stream_end(r));
	} else if (r) {
		gw_api_respond_error(r, j->style, e, retry_after);
	}
	gw_job_end(j, e->status, outcome);
}

void gw_job_failf(struct gw_job *j, int status, const char *outcome,
		  uint32_t retry_after, const char *msg)
{
	struct gw_api_error e;

	gw_api_error_set(&e, status, NULL, NULL, "%s", msg);
	gw_job_fail(j, &e, retry_after, outcome);
}

/* ---- usage records (docs/usage.md, gateway/gov/usage_queue.h) -------- */

/* The request id is "<instance hex>-<job id>": unique across gateways and
 * restarts. */
static void usage_record(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_usage_record rec;
	char rid[GW_USAGE_REQUEST_ID_MAX + 1];

	if (!j->have_ident)
		return;
	memset(&rec, 0, sizeof(rec));
	gw_reqlog_gateway_id(d->lease_prefix, sizeof(d->lease_prefix), j->id, rid, sizeof(rid));
	rec.ns = d->cfg.ns;
	rec.tenant = j->ident.tenant;
	rec.client = j->ident.client;
	rec.request_id = rid;
	rec.end_unix_s = cm_wall_ns() / 1000000000LL;
	if (j->have_done) {
		rec.prompt_tokens = j->done.prompt_tokens;
		rec.cached_prompt_tokens = j->done.cached_tokens <= j->done.prompt_tokens
						   ? j->done.cached_tokens : j->done.prompt_tokens;
		rec.completion_tokens = j->done.gen_tokens;
	} else {
		/* what the client received: streamed tokens, nothing of an
		 * unstreamed reply that ended in an error */
		rec.completion_tokens = j->streaming ? j->tokens : 0;
	}
	rec.outcome = gw_usage_outcome_of(j->outcome, j->status);
	gw_usage_queue_push(d->usage, &rec);
}

/* ---- the end of a request ------------------------------------------- */

static void quota_subject(const struct gw_job *j, struct gw_quota_subject *s)
{
	memset(s, 0, sizeof(*s));
	s->ns = j->d->cfg.ns;
	s->tenant = j->ident.tenant;
	s->client = j->ident.client;
	s->tenant_limits = j->ident.tenant_limits;
	s->client_limits = j->ident.client_limits;
	s->embedding = j->em != NULL;
}

static void log_request(struct gw_job *j)
{
	struct gw_worker_info wi;
	const struct gw_reqlog line = {
		.id = j->id,
		.client_request_id = j->client_rid,
		.route = j->route,
		.status = j->status,
		.outcome = j->outcome,
		.ident = j->have_ident ? &j->ident : NULL,
		.batch = j->batch,
		.model = j->model,
		.worker = j->worker >= 0 ? &wi : NULL,
		.api = &j->api,
		.tokens = j->tokens,
		.done = j->have_done ? &j->done : NULL,
		.start_ns = j->start_ns,
		.enq_ns = j->enq_ns,
		.disp_ns = j->disp_ns,
		.first_ns = j->first_ns,
		.embed_inputs = j->em ? j->em->req.n_inputs : 0,
		.embed_dimensions = j->em ? j->em->req.dimensions : 0,
		.embed_base64 = j->em ? j->em->req.base64 : 0,
	};

	if (!cm_log_enabled(CM_LOG_INFO))
		return;
	memset(&wi, 0, sizeof(wi));
	if (j->worker >= 0)
		gw_workers_info(j->d->dep.workers, (size_t)j->worker, &wi);
	gw_reqlog_write(&line);
}

void gw_job_end(struct gw_job *j, int status, const char *outcome)
{
	struct gw_dispatch *d = j->d;

	if (j->stage == GW_ST_ENDED)
		return;
	if (j->stage == GW_ST_RUNNING)
		gw_job_cancel_all(j, PROTO_CANCEL_TIMEOUT); /* no callback may outlive the job */
	if (j->stage == GW_ST_QUEUED)
		gw_queue_remove(d->dep.queue, &j->qi);
	if (j->stage == GW_ST_AUTH && j->lookup) {
		gw_auth_abandon(j->lookup);
		j->lookup = NULL;
	}
	j->stage = GW_ST_ENDED;
	j->status = status;
	j->outcome = outcome;
	active_del(d, j);
	if (j->n_reserved) {
		/* choices never sent: their slots go to the queue */
		gw_workers_unreserve(d->dep.workers, (size_t)j->worker, j->n_reserved);
		j->n_reserved = 0;
		gw_dispatch_pump_soon(d);
	}
	if (j->req) {
		/* the caller did not answer: never leave a client hanging */
		respond_raw(gw_job_take_req(j), 500, "text/plain", "internal error\n", 15);
	}
	log_request(j);
	gw_dispatch_slo_ended(j);
	usage_record(j);
	if (d->dep.metrics) {
		gw_metrics_request(d->dep.metrics, j->have_ident ? j->ident.tenant : "",
				   status, j->have_done ? j->done.prompt_tokens : 0,
				   j->have_done ? j->done.gen_tokens : j->tokens);
		gw_metrics_observe(d->dep.metrics, GW_HIST_E2E, cm_mono_ns() - j->start_ns);
		if (j->have_done)
			gw_metrics_constraint(d->dep.metrics, j->have_ident ? j->ident.tenant : "",
					      j->done.constraint_ns);
	}
	gw_lease_end(&j->lease, j->have_done ? (int64_t)j->done.prompt_tokens + j->done.gen_tokens
					     : (int64_t)j->tokens);
	job_unref(j);
}

/* ---- placement and the queue ---------------------------------------- */

/* Index of the worker for the job, or -1 when none can take it now. */
static long place(struct gw_dispatch *d, struct gw_job *j)
{
	const struct gw_place_policy pol = {
		.prefix_bytes = d->cfg.route_prefix_bytes,
		.load_factor = d->cfg.route_load_factor,
		.round_robin = d->cfg.route_round_robin,
		.batch = j->batch,
		.rollout = d->dep.rollout,
	};

	return gw_place_request(d->dep.workers, &pol, j->model, j->ident.salt,
				sizeof(j->ident.salt), &j->api, j->n_ch, &d->rr_next);
}

enum cm_status gw_job_submit_choice(struct gw_job *j, struct gw_choice *c)
{
	struct gw_dispatch *d = j->d;
	struct proto_submit s;
	uint32_t flags;
	enum cm_status st;

	gw_api_to_submit(&j->api, &s, &flags);
	if (j->ignore_eos)
		flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	/* choice i: the request's seed + i (choice 0 replays the same
	 * request with n = 1); without a seed each draws its own */
	s.sampling.seed += c->index;
	s.tenant_id.ptr = j->ident.tenant;
	s.tenant_id.len = (uint32_t)strlen(j->ident.tenant);
	memcpy(s.cache_salt, j->ident.salt, PROTO_DIGEST_LEN);
	s.key_id.ptr = j->ident.key_id;
	s.key_id.len = (uint32_t)strlen(j->ident.key_id);
	s.klass = j->batch ? PROTO_CLASS_BATCH : PROTO_CLASS_INTERACTIVE;
	s.max_prompt_tokens = d->cfg.max_prompt_tokens;
	if (j->ident.max_prompt_tokens &&
	    (s.max_prompt_tokens == 0 || (uint64_t)j->ident.max_prompt_tokens < s.max_prompt_tokens))
		s.max_prompt_tokens = (uint32_t)j->ident.max_prompt_tokens;
	st = gw_workers_submit(d->dep.workers, (size_t)j->worker, c->rid, flags, &s,
			       &gw_job_ops, c);
	cm_wipe(s.cache_salt, sizeof(s.cache_salt));
	if (st == CM_OK)
		c->sent = 1;
	return st;
}

static int submit(struct gw_dispatch *d, struct gw_job *j, long w)
{
	enum cm_status st;

	j->worker = w;
	st = j->em ? gw_job_submit_embed(j) : gw_job_submit_choice(j, &j->ch[0]);
	if (st == CM_EINVAL) {
		/* it will never encode: it fails alone, the queue goes on */
		j->worker = -1;
		j->stage = GW_ST_QUOTA; /* popped: not queued any more */
		gw_job_failf(j, 413, "too_large", 0, "request too large for a worker");
		return 1;
	}
	if (st != CM_OK) {
		j->worker = -1;
		return -1;
	}
	/* the other choices follow choice 0's first token, on this worker
	 * (placement saw room for all of them) */
	if (j->n_ch > 1 && gw_workers_reserve(d->dep.workers, (size_t)w, j->n_ch - 1) == CM_OK)
		j->n_reserved = j->n_ch - 1;
	j->stage = GW_ST_RUNNING;
	j->disp_ns = cm_mono_ns();
	gw_dispatch_slo_placed(j);
	if (d->dep.metrics)
		gw_metrics_observe(d->dep.metrics, GW_HIST_QUEUE, j->disp_ns - j->enq_ns);
	return 0;
}

void gw_job_cancel_all(struct gw_job *j, enum proto_cancel_reason reason)
{
	struct gw_dispatch *d = j->d;

	for (uint32_t i = 0; i < j->n_ch; i++) {
		struct gw_choice *c = &j->ch[i];

		if (c->sent && !c->ended)
			gw_workers_cancel(d->dep.workers, (size_t)j->worker, c->rid, reason);
		c->ended = 1;
	}
	if (j->n_reserved) {
		gw_workers_unreserve(d->dep.workers, (size_t)j->worker, j->n_reserved);
		j->n_reserved = 0;
		gw_dispatch_pump_soon(d);
	}
}

static void arm_qtimer(struct gw_dispatch *d)
{
	int64_t left = gw_queue_next_expiry_ns(d->dep.queue, cm_mono_ns());
	struct timeval tv;

	evtimer_del(d->qtimer);
	if (left == INT64_MAX)
		return;
	left += 1000000; /* 1 ms late rather than early */
	tv.tv_sec = left / 1000000000;
	tv.tv_usec = (left % 1000000000) / 1000;
	evtimer_add(d->qtimer, &tv);
}

void gw_dispatch_pump(struct gw_dispatch *d)
{
	struct gw_queue_item *it;

	if (d->pumping)
		return;
	d->pumping = 1;
	while ((it = gw_queue_pop(d->dep.queue, cm_mono_ns())) != NULL) {
		struct gw_job *j = job_of_item(it);
		long w = gw_dispatch_slo_hold(j) ? -1 : place(d, j);

		int rc = w < 0 ? -1 : submit(d, j, w);

		if (rc > 0)
			continue; /* failed by itself */
		if (rc < 0) {
			gw_queue_unpop(d->dep.queue, it);
			break;
		}
	}
	d->pumping = 0;
	arm_qtimer(d);
}

void gw_dispatch_pump_soon(struct gw_dispatch *d)
{
	/* qtimer_cb pumps after failing what expired */
	event_active(d->qtimer, EV_TIMEOUT, 0);
}

static void qtimer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_dispatch *d = arg;
	struct gw_queue_item *it;

	(void)fd;
	(void)what;
	while ((it = gw_queue_pop_expired(d->dep.queue, cm_mono_ns())) != NULL) {
		struct gw_job *j = job_of_item(it);

		j->stage = GW_ST_QUOTA; /* no longer queued */
		gw_job_failf(j, 503, "queue_timeout",
			  gw_queue_retry_after_s(d->dep.queue, gw_queue_depth(d->dep.queue) + 1),
			  "the request waited too long in the queue; retry later");
	}
	gw_dispatch_pump(d);
}

static void capacity_cb(void *ctx)
{
	gw_dispatch_pump(ctx);
}

static void enqueue(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	enum gw_queue_verdict v;
	int64_t now = cm_mono_ns();
	/* a tenant queue of 0 (its own, or queue.tenant_max for tenants
	 * without one): no waiting, dispatched now or refused */
	int no_wait = j->ident.queue_max == 0 ||
		      (j->ident.queue_max == UINT32_MAX &&
		       gw_queue_default_tenant_max(d->dep.queue) == 0);

	j->enq_ns = now;
	if (gw_queue_push(d->dep.queue, j->ident.tenant, j->ident.weight,
			  no_wait ? 1 : j->ident.queue_max,
			  j->batch ? GW_QUEUE_BATCH : GW_QUEUE_INTERACTIVE, &j->qi, now, &v) != CM_OK) {
		gw_job_failf(j, 503, "no_memory", 1, "the gateway is out of memory; retry later");
		return;
	}
	if (v == GW_QUEUE_TENANT_FULL) {
		gw_job_failf(j, 429, "tenant_queue_full",
			  gw_queue_retry_after_s(d->dep.queue,
						 gw_queue_tenant_depth(d->dep.queue, j->ident.tenant) + 1),
			  "too many requests queued for this tenant; retry later");
		return;
	}
	if (v == GW_QUEUE_GLOBAL_FULL) {
		gw_job_failf(j, 503, "global_queue_full",
			  gw_queue_retry_after_s(d->dep.queue, gw_queue_depth(d->dep.queue) + 1),
			  "the service is at capacity; retry later");
		return;
	}
	j->stage = GW_ST_QUEUED;
	j->refs++; /* gw_dispatch_pump may end the job */
	gw_dispatch_pump(d);
	if (no_wait && j->stage == GW_ST_QUEUED) {
		gw_queue_remove(d->dep.queue, &j->qi);
		j->stage = GW_ST_QUOTA; /* no longer queued */
		gw_job_failf(j, 429, "tenant_queue_full", 1,
			  "no worker can take this request now and this tenant's queue is 0 "
			  "(no waiting); retry later");
	} else if (j->stage == GW_ST_QUEUED) {
		gw_dispatch_slo_queued(j);
	}
	job_unref(j);
}

/* ---- quota (gateway/gov/lease.h) ------------------------------------- */

static void lease_hold(void *owner)
{
	((struct gw_job *)owner)->refs++;
}

static void lease_drop(void *owner)
{
	job_unref(owner);
}

static void quota_refused(struct gw_job *j, const struct gw_quota_verdict *v)
{
	struct gw_api_error e;
	uint32_t ra = v->retry_after_ms < 0 ? 0 : (uint32_t)((v->retry_after_ms + 999) / 1000);

	gw_api_error_set(&e, 429, NULL, "rate_limit_exceeded",
			 "quota exceeded: %s %s%s", gw_quota_scope_name(v->scope),
			 gw_quota_limit_name(v->limit),
			 v->retry_after_ms < 0 ? " (the request alone exceeds the limit)" : "");
	gw_job_fail(j, &e, ra ? ra : (v->retry_after_ms < 0 ? 0 : 1), "quota");
}

static void lease_decided(void *owner, enum cm_status st, const struct gw_quota_verdict *v)
{
	struct gw_job *j = owner;

	if (j->stage != GW_ST_QUOTA || !j->req) {
		if (j->stage == GW_ST_QUOTA)
			gw_job_end(j, 499, "client_gone"); /* releases the lease */
		else
			gw_lease_end(&j->lease, 0); /* ended meanwhile: give it back */
		return;
	}
	if (j->revoked) {
		gw_job_failf(j, 401, "revoked", 0, "invalid or missing API key");
	} else if (st == CM_ETIMEDOUT) {
		gw_job_failf(j, 503, "quota_timeout", 1, "quota service did not answer in time; retry later");
	} else if (st != CM_OK) {
		gw_job_failf(j, 503, "quota_unavailable", 1, "quota service unavailable; retry later");
	} else if (!v->allowed) {
		quota_refused(j, v);
	} else {
		gw_lease_keep(&j->lease);
		enqueue(j);
	}
}

static const struct gw_lease_owner lease_owner = {
	.hold = lease_hold,
	.drop = lease_drop,
	.decided = lease_decided,
};

void gw_job_admit(struct gw_job *j)
{
	struct gw_quota_subject s;
	struct gw_quota_verdict v;
	int now = 0;
	int64_t estimate;

	j->model_ctx = gw_workers_model_context(j->d->dep.workers, j->api.model.ptr,
						j->api.model.len);
	estimate = j->em ? gw_job_embed_estimate(j) : gw_api_token_estimate(&j->api, j->model_ctx);

	quota_subject(j, &s);
	if (!gw_lease_needed(&s)) {
		enqueue(j);
		return;
	}
	gw_lease_init(&j->lease, &j->d->lease_env, &lease_owner, j, j->id, &s);
	j->stage = GW_ST_QUOTA;
	if (gw_lease_admit(&j->lease, estimate, &v, &now) != CM_OK) {
		gw_job_failf(j, 503, "quota_unavailable", 1, "quota service unavailable; retry later");
		return;
	}
	if (!now)
		return; /* lease_decided */
	if (!v.allowed) {
		struct gw_api_error e;

		gw_api_error_set(&e, 429, NULL, "rate_limit_exceeded",
				 "quota exceeded: %s %s", gw_quota_scope_name(v.scope),
				 gw_quota_limit_name(v.limit));
		gw_job_fail(j, &e, (uint32_t)((v.retry_after_ms + 999) / 1000), "quota");
		return;
	}
	enqueue(j);
}

/* ---- fixed endpoints (gateway/api/endpoints.h) ------------------------ */

static void answer_models(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct cm_buf b;
	struct gw_api_error e;
	size_t len;
	const uint8_t *body = gw_request_body(j->req, &len);
	enum cm_status st;

	if (j->route == GW_PATH_OPENAI_MODEL) {
		/* the id is the rest of the path */
		body = (const uint8_t *)gw_request_path(j->req) + strlen("/v1/models/");
		len = strlen((const char *)body);
	}
	cm_buf_init(&b, 1024 * 1024);
	st = gw_api_answer_models(d->dep.workers, d->dep.rollout, j->route, body, len,
				  &d->cfg.limits, gw_request_arena(j->req), &b, &e);
	if (st == CM_OK) {
		gw_respond_buf(gw_job_take_req(j), 200, &b);
		gw_job_end(j, 200, "ok");
	} else if (st == CM_EINVAL || st == CM_ENOTFOUND) {
		gw_job_fail(j, &e, 0, st == CM_EINVAL ? "bad_request" : "unknown_model");
	} else {
		gw_job_failf(j, 500, "render", 0, "internal error");
	}
	cm_buf_deinit(&b);
}

static void answer_readyz(struct gw_dispatch *d, struct gw_request *r)
{
	char body[512];
	size_t len;
	int status = gw_api_answer_readyz(d->dep.workers, gw_redis_up(d->dep.redis), 0,
					  body, sizeof(body), &len);

	respond_raw(r, status, GW_API_CT_JSON, body, len);
}

/* ---- request entry ---------------------------------------------------- */

static enum gw_api_kind kind_of(enum gw_path r)
{
	switch (r) {
	case GW_PATH_OLLAMA_CHAT: return GW_API_OLLAMA_CHAT;
	case GW_PATH_OPENAI_CHAT: return GW_API_OPENAI_CHAT;
	case GW_PATH_OPENAI_COMPLETIONS: return GW_API_OPENAI_COMPLETIONS;
	default: return GW_API_OLLAMA_GENERATE;
	}
}

/* The request's choices: all on one worker, so `n` is at most what the
 * largest worker of the model runs at once.  A non-streamed reply holds
 * limits.output_bytes of text in all (each choice its share).  0, or -1
 * when the job was answered. */
static int choices_init(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	uint32_t n = j->api.n, cap = gw_workers_model_cap(d->dep.workers, j->api.model.ptr,
							  j->api.model.len);
	struct gw_api_error e;

	if (n > 1 && n > cap) {
		gw_api_error_set(&e, 400, "n", NULL, "n: expected at most %u (the requests one "
				 "worker of this model runs at once: the choices share its prefix "
				 "cache), found %u", cap, n);
		gw_job_fail(j, &e, 0, "bad_request");
		return -1;
	}
	j->ch = cm_calloc(n, sizeof(*j->ch));
	if (!j->ch) {
		gw_job_failf(j, 503, "no_memory", 1, "the gateway is out of memory; retry later");
		return -1;
	}
	j->n_ch = n;
	for (uint32_t i = 0; i < n; i++) {
		struct gw_choice *c = &j->ch[i];

		c->j = j;
		c->index = i;
		c->rid = i == 0 ? j->id : j->id | ((uint64_t)i << GW_CHOICE_RID_SHIFT);
		cm_buf_init(&c->text, d->cfg.out_bytes / n);
		if (i == 0)
			gw_api_stream_init(&c->stream, &j->api, j->id, cm_wall_ns());
		else
			gw_api_stream_init_choice(&c->stream, &j->ch[0].stream, i);
	}
	return 0;
}

static void start_generation(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_api_error e;
	size_t len;
	const uint8_t *body = gw_request_body(j->req, &len);
	const char *cls;
	size_t mlen, submit_bytes;
	uint32_t ctx = gw_workers_max_context(d->dep.workers);

	/*
	 * A body larger than any prompt that could fit the largest context
	 * served is refused before its JSON is parsed: parsing megabytes on
	 * the event loop delays every other client (issue 13, finding 6).
	 * No token covers GW_PROMPT_BYTES_PER_TOKEN_MAX bytes, however the
	 * client escapes its text.
	 */
	if (ctx && len > (uint64_t)ctx * GW_PROMPT_BYTES_PER_TOKEN_MAX + GW_BODY_SLACK_BYTES) {
		gw_api_error_set(&e, 413, j->route == GW_PATH_OLLAMA_CHAT ||
				 j->route == GW_PATH_OPENAI_CHAT ? "messages" : "prompt",
				 "context_length_exceeded", "request body of %zu bytes: no prompt that "
				 "long fits the largest context served (%u tokens)", len, ctx);
		gw_job_fail(j, &e, 0, "too_large");
		return;
	}
	if (gw_api_parse(kind_of(j->route), body, len, &d->cfg.limits,
			 gw_request_arena(j->req), &j->api, &e) != CM_OK) {
		gw_job_fail(j, &e, 0, "bad_request");
		return;
	}
	j->api.model.len = (uint32_t)gw_api_model_resolve(d->dep.workers, j->api.model.ptr,
							  j->api.model.len);
	mlen = j->api.model.len < GW_API_MODEL_NAME_MAX ? j->api.model.len : GW_API_MODEL_NAME_MAX;
	memcpy(j->model, j->api.model.ptr, mlen);
	j->model[mlen] = '\0';
	if (!gw_workers_knows_model(d->dep.workers, j->api.model.ptr, j->api.model.len)) {
		gw_api_error_model_not_found(&e, j->api.model.ptr, j->api.model.len);
		j->model[0] = '\0';
		gw_job_fail(j, &e, 0, "unknown_model");
		return;
	}
	if (gw_job_embed_only(j) != 0)
		return;
	submit_bytes = gw_api_submit_bytes(&j->api);
	if (submit_bytes > CM_LIM_PROTO_FRAME_BYTES) {
		/* issue 13, finding 7: it used to stall all dispatch until its
		 * queue timeout, then get 503 */
		gw_api_error_set(&e, 413, j->api.prompt_kind == PROTO_PROMPT_CHAT ? "messages" : "prompt",
				 NULL, "request too large: the prompt takes %zu bytes, a worker accepts "
				 "at most %u", submit_bytes, CM_LIM_PROTO_FRAME_BYTES);
		gw_job_fail(j, &e, 0, "too_large");
		return;
	}
	if (j->ident.max_output_tokens > 0 && j->api.max_tokens > j->ident.max_output_tokens) {
		if (j->api.max_tokens_given) {
			gw_api_error_set(&e, 400, j->style == GW_STYLE_OPENAI ? "max_tokens" : "num_predict",
					 NULL, "max tokens: expected at most %lld (the tenant's limit), found %u",
					 (long long)j->ident.max_output_tokens, j->api.max_tokens);
			gw_job_fail(j, &e, 0, "bad_request");
			return;
		}
		j->api.max_tokens = (uint32_t)j->ident.max_output_tokens;
	}
	if (gw_job_class(j) != 0)
		return;
	cls = gw_request_header(j->req, "X-Sluice-Ignore-EOS");
	j->ignore_eos = cls && (strcmp(cls, "1") == 0 || strcasecmp(cls, "true") == 0);
	if (choices_init(j) == 0)
		gw_job_admit(j);
}

static void auth_done(void *arg, int status, const struct gw_auth_identity *id)
{
	struct gw_job *j = arg;
	struct gw_api_error e;

	j->lookup = NULL;
	if (status != 200) {
		gw_api_error_set(&e, status, NULL, status == 401 ? "invalid_api_key" : NULL,
				 status == 401 ? "invalid or missing API key"
					       : "authentication is unavailable; retry later");
		j->stage = GW_ST_QUOTA; /* past auth: nothing to abandon */
		gw_job_fail(j, &e, status == 503 ? 1 : 0, status == 401 ? "unauthorized" : "auth_unavailable");
		return;
	}
	j->ident = *id;
	j->have_ident = 1;
	j->stage = GW_ST_QUOTA;
	if (j->req)
		gw_request_mark_trusted(j->req); /* never evicted for new connections */
	switch (j->route) {
	case GW_PATH_OLLAMA_TAGS:
	case GW_PATH_OLLAMA_PS:
	case GW_PATH_OPENAI_MODELS:
	case GW_PATH_OPENAI_MODEL:
	case GW_PATH_OLLAMA_SHOW:
		answer_models(j);
		return;
	default:
		if (gw_route_embeds(j->route))
			gw_job_start_embed(j);
		else
			start_generation(j);
	}
}

static void on_client_close(struct gw_request *r, void *arg)
{
	struct gw_job *j = arg;

	(void)r;
	if (j->req != r)
		return;
	j->req = NULL;
	switch (j->stage) {
	case GW_ST_AUTH:
	case GW_ST_QUEUED:
		gw_job_end(j, 499, "client_gone");
		break;
	case GW_ST_QUOTA:
		/* the admission callback ends it (and releases the lease) */
		break;
	case GW_ST_RUNNING:
		gw_job_cancel_all(j, PROTO_CANCEL_CLIENT_GONE);
		gw_job_end(j, 499, "client_gone");
		break;
	default:
		break;
	}
}

void gw_dispatch_handle(struct gw_request *req, void *ctx)
{
	struct gw_dispatch *d = ctx;
	struct gw_path_match m;
	struct gw_api_error e;
	struct cm_buf b;
	struct gw_job *j;
	struct gw_auth_lookup *lookup;
	char client_rid[GW_CLIENT_REQUEST_ID_MAX + 1];

	gw_reqlog_request_id(req, d->lease_prefix, sizeof(d->lease_prefix), client_rid);
	if (gw_cors_apply(req, d->cfg.cors_origins, d->cfg.n_cors_origins))
		return; /* a preflight, answered */
	if (d->closing) {
		/* gw_dispatch_free is flushing usage records */
		respond_raw(req, 503, "text/plain", "shutting down\n", 14);
		return;
	}
	gw_paths_match(gw_request_method(req), gw_request_path(req), &m);
	if (m.status == 404 || m.route == GW_PATH_METRICS) {
		gw_api_error_set(&e, 404, NULL, NULL, "no such endpoint");
		gw_api_respond_error(req, m.style, &e, 0);
		return;
	}
	if (m.status == 405) {
		GW_IGNORE(gw_request_add_header(req, "Allow", m.allow));
		gw_api_error_set(&e, 405, NULL, NULL, "method not allowed");
		gw_api_respond_error(req, m.style, &e, 0);
		return;
	}
	switch (m.route) {
	case GW_PATH_ROOT:
		respond_raw(req, 200, "text/plain; charset=utf-8", "Ollama is running", 17);
		return;
	case GW_PATH_HEALTHZ:
		respond_raw(req, 200, GW_API_CT_JSON, "{\"status\":\"ok\"}\n", 16);
		return;
	case GW_PATH_READYZ:
		answer_readyz(d, req);
		return;
	case GW_PATH_OLLAMA_VERSION:
	case GW_PATH_MANAGE:
		cm_buf_init(&b, 4096);
		if (m.route == GW_PATH_MANAGE ? gw_api_render_manage_forbidden(&b, m.manage_op) == CM_OK
					       : gw_api_render_version(&b) == CM_OK)
			gw_respond_buf(req, m.route == GW_PATH_MANAGE ? 403 : 200, &b);
		else
			respond_raw(req, 500, "text/plain", "internal error\n", 15);
		cm_buf_deinit(&b);
		return;
	default:
		break;
	}
	j = cm_calloc(1, sizeof(*j));
	if (!j) {
		respond_raw(req, 503, "text/plain", "out of memory\n", 14);
		return;
	}
	j->d = d;
	j->req = req;
	j->id = gw_request_id(req);
	memcpy(j->client_rid, client_rid, sizeof(client_rid));
	j->route = m.route;
	j->style = m.style;
	j->stage = GW_ST_AUTH;
	j->refs = 1;
	j->worker = -1;
	j->start_ns = gw_request_start_ns(req);
	cm_buf_init(&j->out, GW_JOB_OUT_CAP);
	active_add(d, j);
	gw_request_on_close(req, on_client_close, j);
	j->refs++; /* held across the auth call */
	gw_auth_check(d->dep.auth, gw_request_header(req, "Authorization"), auth_done, j, &lookup);
	if (j->stage == GW_ST_AUTH)
		j->lookup = lookup;
	job_unref(j);
}

/* ---- the key check before a large body (gateway/http/server.h) --------- */

static void head_auth_done(void *arg, int status, const struct gw_auth_identity *id)
{
	struct gw_head *h = arg;

	(void)id;
	*gw_head_user(h) = NULL;
	if (status == 200)
		gw_head_verdict(h, 1, 0, NULL);
	else
		gw_head_verdict(h, 0, status, status == 401 ? "invalid or missing API key"
							  : "authentication is unavailable; retry later");
}

void gw_dispatch_head_check(struct gw_head *h, void *ctx)
{
	struct gw_dispatch *d = ctx;
	struct gw_auth_lookup *lookup = NULL;

	gw_auth_check(d->dep.auth, gw_head_header(h, "Authorization"), head_auth_done, h, &lookup);
	/* a lookup still in flight (the verdict may already have come) */
	if (lookup)
		*gw_head_user(h) = lookup;
}

void gw_dispatch_head_cancel(struct gw_head *h, void *ctx)
{
	struct gw_auth_lookup *lookup = *gw_head_user(h);

	(void)ctx;
	*gw_head_user(h) = NULL;
	if (lookup)
		gw_auth_abandon(lookup);
}

/* ---- revocation ------------------------------------------------------- */

static void on_revoke(void *ctx, const char *kind, const char *target)
{
	struct gw_dispatch *d = ctx;
	struct gw_job *j = d->active, *next;

	for (; j; j = next) {
		char tc[2 * GW_KEY_NAME_MAX + 2];
		int hit;

		next = j->anext;
		if (!j->have_ident || j->stage == GW_ST_ENDED)
			continue;
		snprintf(tc, sizeof(tc), "%s/%s", j->ident.tenant, j->ident.client);
		hit = (strcmp(kind, "key") == 0 && strcmp(j->ident.key_id, target) == 0) ||
		      (strcmp(kind, "client") == 0 && strcmp(tc, target) == 0) ||
		      (strcmp(kind, "tenant") == 0 && strcmp(j->ident.tenant, target) == 0);
		if (!hit)
			continue;
		if (j->stage == GW_ST_QUOTA) {
			/* the admission callback owns the job: it refuses it */
			j->revoked = 1;
			continue;
		}
		if (j->stage == GW_ST_RUNNING)
			gw_job_cancel_all(j, PROTO_CANCEL_REVOKED);
		/* safe: `next` is not freed by ending `j` */
		gw_job_failf(j, 401, "revoked", 0, "invalid or missing API key");
	}
}

/* ---- life cycle -------------------------------------------------------- */

enum cm_status gw_dispatch_new(struct event_base *base,
			       const struct gw_dispatch_config *cfg,
			       const struct gw_dispatch_deps *deps,
			       struct gw_dispatch **out)
{
	struct gw_dispatch *d = cm_calloc(1, sizeof(*d));

	*out = NULL;
	if (!d)
		return CM_ENOMEM;
	d->base = base;
	d->cfg = *cfg;
	d->dep = *deps;
	d->qtimer = evtimer_new(base, qtimer_cb, d);
	if (!d->qtimer) {
		cm_free(d);
		return CM_ENOMEM;
	}
	if (cm_random_bytes(d->lease_prefix, sizeof(d->lease_prefix)) != CM_OK ||
	    gw_dispatch_slo_new(d) != CM_OK ||
	    gw_usage_queue_new(base, deps->redis, &d->usage) != CM_OK ||
	    gw_local_limit_new(cfg->outage_quota_fraction > 0 ? cfg->outage_quota_fraction : 1.0,
			       &d->local) != CM_OK) {
		gw_usage_queue_free(d->usage);
		gw_dispatch_slo_free(d);
		event_free(d->qtimer);
		cm_free(d);
		return CM_EINVAL;
	}
	d->lease_env = (struct gw_lease_env){
		.base = base,
		.redis = deps->redis,
		.local = d->local,
		.ttl_ms = cfg->lease_ttl_ms,
		.timeout_ms = cfg->quota_timeout_ms,
	};
	gw_workers_set_capacity_cb(d->dep.workers, capacity_cb, d);
	gw_auth_set_revoke_cb(d->dep.auth, on_revoke, d);
	*out = d;
	return CM_OK;
}

void gw_dispatch_free(struct gw_dispatch *d)
{
	if (!d)
		return;
	while (d->active) {
		struct gw_job *j = d->active;

		if (j->stage == GW_ST_RUNNING)
			gw_job_cancel_all(j, PROTO_CANCEL_SHUTDOWN);
		j->lease.admitted = 0; /* leases expire by themselves */
		gw_job_failf(j, 503, "shutdown", 1, "the gateway is shutting down");
	}
	/* usage records get up to GW_USAGE_FLUSH_MS to reach Redis: the loop
	 * runs again, new requests are refused meanwhile */
	d->closing = 1;
	gw_usage_queue_free(d->usage);
	gw_workers_set_capacity_cb(d->dep.workers, NULL, NULL);
	gw_auth_set_revoke_cb(d->dep.auth, NULL, NULL);
	gw_local_limit_free(d->local);
	gw_dispatch_slo_free(d);
	event_free(d->qtimer);
	cm_free(d);
}

size_t gw_dispatch_active(const struct gw_dispatch *d)
{
	return d->n_active;
}
