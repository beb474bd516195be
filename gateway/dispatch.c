/*
 * dispatch.c - request lifecycle: auth, parse, quota, queue, placement,
 * streaming, accounting and the request log line (see dispatch.h).
 */
#include "gateway/dispatch.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/event.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "gateway/gov/local_limit.h"
#include "gateway/gov/quota.h"
#include "gateway/placement.h"
#include "gateway/http/paths.h"
#include "gateway/gov/usage.h"

#define GW_TEXT_ONLY_ID 0xFFFFFFFFu
/* For calls whose failure changes nothing (best effort). */
#define GW_IGNORE(x) do { enum cm_status ign_ = (x); (void)ign_; } while (0)
#define GW_JOB_OUT_CAP (4u * 1024 * 1024)

enum gw_stage {
	GW_ST_AUTH = 0,
	GW_ST_QUOTA,
	GW_ST_QUEUED,
	GW_ST_RUNNING,
	GW_ST_ENDED,
};

struct gw_job {
	struct gw_dispatch *d;
	struct gw_request *req;     /* NULL once the client is gone or answered */
	uint64_t id;
	enum gw_path route;
	enum gw_api_style style;
	enum gw_stage stage;
	int refs;                   /* async calls that still hold the job */
	struct gw_api_request api;
	char model[GW_API_MODEL_NAME_MAX + 1];
	struct gw_auth_identity ident;
	int have_ident;
	struct gw_auth_lookup *lookup;
	int quota_used, quota_admitted;
	int local_admitted;         /* admitted by the outage fallback */
	struct event *renew_ev;     /* renews the concurrency lease every TTL/3 */
	struct event *quota_to_ev;  /* deadline of the quota admission in flight */
	int quota_pending;          /* an admission reply is awaited */
	int64_t estimate;
	char lease[64];
	struct gw_queue_item qi;
	int batch;
	int ignore_eos;             /* X-Sluice-Ignore-EOS: 1 (benchmarks, tests) */
	int retried;                /* re-dispatched once after a lost worker */
	long worker;                /* -1 none */
	struct gw_api_stream stream;
	int streaming;
	int write_failed;           /* the connection is closing */
	struct cm_buf text;         /* non-streamed reply text */
	struct cm_buf out;          /* render scratch */
	uint32_t tokens;
	int64_t start_ns, enq_ns, disp_ns, first_ns, last_ns;
	struct proto_done done;
	int have_done;
	int status;
	const char *outcome;        /* "ok", "cancelled", "error", ... */
	struct gw_job *anext, *aprev;
};

struct gw_dispatch {
	struct event_base *base;
	struct gw_dispatch_config cfg;
	struct gw_dispatch_deps dep;
	struct event *qtimer;
	struct gw_job *active;
	size_t n_active;
	int pumping;
	uint8_t lease_prefix[8];    /* this instance (usage request ids) */
	struct gw_usage_pending *upending; /* usage records not yet acknowledged */
	size_t n_upending;
	int closing;                /* gw_dispatch_free runs: refuse new requests */
	struct gw_local_limit *local;      /* quotas while Redis is unreachable */
	size_t rr_next;             /* route_round_robin cursor */
};

static void pump(struct gw_dispatch *d);
static void job_end(struct gw_job *j, int status, const char *outcome);

/* ---- job bookkeeping ------------------------------------------------ */

static void job_unref(struct gw_job *j)
{
	if (--j->refs > 0)
		return;
	cm_buf_deinit(&j->text);
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
static struct gw_request *job_take_req(struct gw_job *j)
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

static void respond_buf(struct gw_request *r, int status, struct cm_buf *b)
{
	respond_raw(r, status, GW_API_CT_JSON, cm_buf_data(b), cm_buf_len(b));
}

/* An error for a request without a job (or before one). */
static void respond_error_req(struct gw_request *r, enum gw_api_style style,
			      const struct gw_api_error *e, uint32_t retry_after)
{
	struct cm_buf b;
	char ra[16];

	cm_buf_init(&b, 64 * 1024);
	if (retry_after) {
		snprintf(ra, sizeof(ra), "%u", retry_after);
		GW_IGNORE(gw_request_add_header(r, "Retry-After", ra));
	}
	if (e->status == 401)
		GW_IGNORE(gw_request_add_header(r, "WWW-Authenticate", "Bearer"));
	if (gw_api_render_error(&b, style, e) == CM_OK)
		respond_buf(r, e->status, &b);
	else
		respond_raw(r, 500, "text/plain", "internal error\n", 15);
	cm_buf_deinit(&b);
}

/* Answers the job's client with an error (in the stream when it began). */
static void job_fail(struct gw_job *j, const struct gw_api_error *e,
		     uint32_t retry_after, const char *outcome)
{
	struct gw_request *r = job_take_req(j);

	if (r && j->streaming) {
		cm_buf_reset(&j->out);
		if (gw_api_render_stream_error(&j->out, &j->stream, e) == CM_OK &&
		    gw_request_stream_write(r, cm_buf_data(&j->out),
					    cm_buf_len(&j->out)) == CM_OK)
			GW_IGNORE(gw_request_stream_end(r));
	} else if (r) {
		respond_error_req(r, j->style, e, retry_after);
	}
	job_end(j, e->status, outcome);
}

static void job_failf(struct gw_job *j, int status, const char *outcome,
		      uint32_t retry_after, const char *msg)
{
	struct gw_api_error e;

	gw_api_error_set(&e, status, NULL, NULL, "%s", msg);
	job_fail(j, &e, retry_after, outcome);
}

/* ---- usage records (docs/usage.md) --------------------------------------
 * One record per finished request with an identity.  The request id is
 * "<instance hex>-<job id>" (unique across gateways and restarts), reused
 * on a retry so Redis counts it once.  A record whose write failed is
 * kept and retried (250 ms, doubling to 2 s) for GW_USAGE_TRIES tries, about
 * 20 minutes, so a Redis outage loses nothing; at most GW_USAGE_PENDING_MAX
 * records wait at once (older ones stay, new ones are dropped and logged).
 */
#define GW_USAGE_TRIES 600
#define GW_USAGE_RETRY_MS 250
#define GW_USAGE_RETRY_MAX_MS 2000
#define GW_USAGE_PENDING_MAX 65536
#define GW_USAGE_FLUSH_MS 2000      /* at shutdown */

struct gw_usage_pending {
	struct gw_dispatch *d;      /* NULL once the dispatcher is gone */
	struct event *retry_ev;
	int tries;
	int in_flight;
	char tenant[GW_KEY_NAME_MAX];
	char client[GW_KEY_NAME_MAX];
	char rid[GW_USAGE_REQUEST_ID_MAX + 1];
	struct gw_usage_record rec;
	struct gw_usage_pending *next, **pprev;
};

static void usage_pending_free(struct gw_usage_pending *u)
{
	if (u->pprev) {
		*u->pprev = u->next;
		if (u->next)
			u->next->pprev = u->pprev;
	}
	if (u->retry_ev)
		event_free(u->retry_ev);
	if (u->d)
		u->d->n_upending--;
	cm_free(u);
}

static void usage_send(struct gw_usage_pending *u);

static void usage_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	usage_send(arg);
}

static void usage_failed(struct gw_usage_pending *u)
{
	int64_t ms = (int64_t)GW_USAGE_RETRY_MS << (u->tries < 4 ? u->tries - 1 : 3);
	struct timeval tv;

	if (ms > GW_USAGE_RETRY_MAX_MS)
		ms = GW_USAGE_RETRY_MAX_MS;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;

	if (!u->d || u->tries >= GW_USAGE_TRIES ||
	    (!u->retry_ev && !(u->retry_ev = evtimer_new(u->d->base, usage_retry_cb, u))) ||
	    evtimer_add(u->retry_ev, &tv) != 0) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %s: usage not recorded after "
			"%d tries", u->rid, u->tries);
		usage_pending_free(u);
	}
}

static void usage_done(void *arg, enum cm_status st, int counted)
{
	struct gw_usage_pending *u = arg;

	u->in_flight = 0;
	cm_logf(st == CM_OK || u->tries > 1 ? CM_LOG_DEBUG : CM_LOG_WARN, "usage_record",
		"request %s: %s (counted %d, try %d)", u->rid, cm_status_str(st), counted,
		u->tries);
	if (st == CM_OK)
		usage_pending_free(u);
	else
		usage_failed(u);
}

static void usage_send(struct gw_usage_pending *u)
{
	redisAsyncContext *ac = u->d ? gw_auth_redis(u->d->dep.auth) : NULL;

	u->tries++;
	if (ac && gw_usage_record_async(ac, &u->rec, usage_done, u) == CM_OK) {
		u->in_flight = 1;
		return;
	}
	usage_failed(u);
}

static enum gw_usage_outcome usage_outcome(const struct gw_job *j)
{
	const char *o = j->outcome ? j->outcome : "";

	if (strcmp(o, "ok") == 0)
		return GW_USAGE_OK;
	if (strcmp(o, "cancelled") == 0 || strcmp(o, "client_gone") == 0 ||
	    strcmp(o, "revoked") == 0)
		return GW_USAGE_CANCELLED;
	if (strcmp(o, "worker_error") == 0 && j->status != 503 && j->status >= 500)
		return GW_USAGE_WORKER;
	switch (j->status) {
	case 401:
	case 403: return GW_USAGE_AUTH;
	case 429: return GW_USAGE_QUOTA;
	case 500: return GW_USAGE_INTERNAL;
	case 503: return GW_USAGE_OVERLOADED;
	default: break;
	}
	if (j->status >= 400 && j->status < 500)
		return GW_USAGE_BAD_REQUEST;
	return j->status >= 500 ? GW_USAGE_WORKER : GW_USAGE_OK;
}

static void usage_record(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_usage_pending *u;
	char inst[2 * sizeof(d->lease_prefix) + 1];

	if (!j->have_ident)
		return;
	if (d->n_upending >= GW_USAGE_PENDING_MAX) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %llu: %zu usage records wait "
			"already", (unsigned long long)j->id, d->n_upending);
		return;
	}
	u = cm_calloc(1, sizeof(*u));
	if (!u) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %llu: out of memory",
			(unsigned long long)j->id);
		return;
	}
	u->d = d;
	snprintf(u->tenant, sizeof(u->tenant), "%s", j->ident.tenant);
	snprintf(u->client, sizeof(u->client), "%s", j->ident.client);
	cm_hex_encode(d->lease_prefix, sizeof(d->lease_prefix), inst);
	snprintf(u->rid, sizeof(u->rid), "%s-%llu", inst, (unsigned long long)j->id);
	u->rec.ns = d->cfg.ns;
	u->rec.tenant = u->tenant;
	u->rec.client = u->client;
	u->rec.request_id = u->rid;
	u->rec.end_unix_s = cm_wall_ns() / 1000000000LL;
	if (j->have_done) {
		u->rec.prompt_tokens = j->done.prompt_tokens;
		u->rec.cached_prompt_tokens = j->done.cached_tokens <= j->done.prompt_tokens
						      ? j->done.cached_tokens : j->done.prompt_tokens;
		u->rec.completion_tokens = j->done.gen_tokens;
	} else {
		/* what the client received: streamed tokens, nothing of an
		 * unstreamed reply that ended in an error */
		u->rec.completion_tokens = j->streaming ? j->tokens : 0;
	}
	u->rec.outcome = usage_outcome(j);
	u->next = d->upending;
	if (u->next)
		u->next->pprev = &u->next;
	u->pprev = &d->upending;
	d->upending = u;
	d->n_upending++;
	usage_send(u);
}

/* ---- the end of a request ------------------------------------------- */

static void quota_finish_done(void *arg, enum cm_status st,
			      const struct gw_quota_verdict *v, int64_t count)
{
	struct gw_job *j = arg;

	(void)v;
	(void)count;
	if (st != CM_OK)
		cm_logf(CM_LOG_WARN, "quota_finish", "request %llu: lease not released "
			"(expires by itself)", (unsigned long long)j->id);
	job_unref(j);
}

static void quota_subject(const struct gw_job *j, struct gw_quota_subject *s)
{
	memset(s, 0, sizeof(*s));
	s->ns = j->d->cfg.ns;
	s->tenant = j->ident.tenant;
	s->client = j->ident.client;
	s->tenant_limits = j->ident.tenant_limits;
	s->client_limits = j->ident.client_limits;
}

static void log_request(struct gw_job *j)
{
	struct cm_log_rec r;
	struct gw_worker_info wi;
	char sha[2 * PROTO_DIGEST_LEN + 1] = "";
	int64_t now = cm_mono_ns();

	if (!cm_log_enabled(CM_LOG_INFO))
		return;
	memset(&wi, 0, sizeof(wi));
	if (j->worker >= 0) {
		gw_workers_info(j->d->dep.workers, (size_t)j->worker, &wi);
		if (wi.hello_ok)
			cm_hex_encode(wi.hello.model_sha256, PROTO_DIGEST_LEN, sha);
	}
	cm_log_begin(&r, CM_LOG_INFO, "request");
	cm_log_u64(&r, "request_id", j->id);
	cm_log_str(&r, "route", gw_path_name(j->route));
	cm_log_i64(&r, "status", j->status);
	cm_log_str(&r, "outcome", j->outcome ? j->outcome : "");
	if (j->have_ident) {
		cm_log_str(&r, "tenant", j->ident.tenant);
		cm_log_str(&r, "client", j->ident.client);
		cm_log_str(&r, "key_id", j->ident.key_id);
	}
	cm_log_str(&r, "class", j->batch ? "batch" : "interactive");
	if (j->model[0])
		cm_log_str(&r, "model", j->model);
	if (j->worker >= 0) {
		cm_log_str(&r, "worker", wi.name);
		if (wi.hello_ok) {
			cm_log_str(&r, "model_sha256", sha);
			cm_log_str(&r, "engine_version", wi.hello.engine_version.ptr);
			cm_log_str(&r, "backend", wi.hello.backend.ptr);
			cm_log_str(&r, "device", wi.hello.device.ptr);
		}
	}
	if (j->model[0]) {
		const struct proto_sampling *s = &j->api.sampling;

		cm_log_f64(&r, "temperature", s->temperature);
		cm_log_u64(&r, "top_k", s->top_k);
		cm_log_f64(&r, "top_p", s->top_p);
		cm_log_f64(&r, "min_p", s->min_p);
		cm_log_f64(&r, "repeat_penalty", s->repeat_penalty);
		cm_log_u64(&r, "repeat_last_n", s->repeat_last_n);
		cm_log_f64(&r, "presence_penalty", s->presence_penalty);
		cm_log_f64(&r, "frequency_penalty", s->frequency_penalty);
		if (j->api.submit_flags & PROTO_SUBMIT_F_HAS_SEED)
			cm_log_u64(&r, "seed", s->seed);
		cm_log_u64(&r, "max_tokens", j->api.max_tokens);
		cm_log_u64(&r, "n_stop", j->api.n_stop);
		cm_log_bool(&r, "stream", j->api.stream);
	}
	cm_log_u64(&r, "tokens_streamed", j->tokens);
	if (j->have_done) {
		cm_log_u64(&r, "prompt_tokens", j->done.prompt_tokens);
		cm_log_u64(&r, "cached_tokens", j->done.cached_tokens);
		cm_log_u64(&r, "gen_tokens", j->done.gen_tokens);
		cm_log_u64(&r, "preemptions", j->done.preemptions);
		cm_log_u64(&r, "finish", j->done.finish);
		cm_log_i64(&r, "worker_queue_ns", j->done.queue_ns);
		cm_log_i64(&r, "prefill_ns", j->done.prefill_ns);
		cm_log_i64(&r, "decode_ns", j->done.decode_ns);
		cm_log_i64(&r, "worker_ttft_ns", j->done.ttft_ns);
	}
	if (j->enq_ns) {
		/* received -> queued: auth, parse, quota admission */
		cm_log_i64(&r, "admit_ns", j->enq_ns - j->start_ns);
		cm_log_i64(&r, "queue_ns", (j->disp_ns ? j->disp_ns : now) - j->enq_ns);
	}
	if (j->disp_ns && j->first_ns)
		cm_log_i64(&r, "dispatch_to_first_token_ns", j->first_ns - j->disp_ns);
	if (j->first_ns)
		cm_log_i64(&r, "ttft_ns", j->first_ns - j->start_ns);
	cm_log_i64(&r, "total_ns", now - j->start_ns);
	cm_log_end(&r);
}

static void job_end(struct gw_job *j, int status, const char *outcome)
{
	struct gw_dispatch *d = j->d;

	if (j->stage == GW_ST_ENDED)
		return;
	if (j->stage == GW_ST_QUEUED)
		gw_queue_remove(d->dep.queue, &j->qi);
	if (j->stage == GW_ST_AUTH && j->lookup) {
		gw_auth_abandon(j->lookup);
		j->lookup = NULL;
	}
	j->stage = GW_ST_ENDED;
	if (j->renew_ev) {
		event_free(j->renew_ev);
		j->renew_ev = NULL;
	}
	if (j->quota_to_ev) {
		event_free(j->quota_to_ev);
		j->quota_to_ev = NULL;
	}
	j->status = status;
	j->outcome = outcome;
	active_del(d, j);
	if (j->req) {
		/* the caller did not answer: never leave a client hanging */
		respond_raw(job_take_req(j), 500, "text/plain", "internal error\n", 15);
	}
	log_request(j);
	usage_record(j);
	if (d->dep.metrics) {
		gw_metrics_request(d->dep.metrics, j->have_ident ? j->ident.tenant : "",
				   status, j->have_done ? j->done.prompt_tokens : 0,
				   j->have_done ? j->done.gen_tokens : j->tokens);
		gw_metrics_observe(d->dep.metrics, GW_HIST_E2E, cm_mono_ns() - j->start_ns);
	}
	if (j->local_admitted) {
		struct gw_quota_subject s;

		j->local_admitted = 0;
		quota_subject(j, &s);
		gw_local_limit_finish(d->local, &s);
	}
	if (j->quota_admitted) {
		struct gw_quota_subject s;
		redisAsyncContext *ac = gw_auth_redis(d->dep.auth);
		int64_t actual = j->have_done ? (int64_t)j->done.prompt_tokens + j->done.gen_tokens
					       : (int64_t)j->tokens;

		j->quota_admitted = 0;
		quota_subject(j, &s);
		if (ac && gw_quota_finish_async(ac, &s, j->estimate, actual, j->lease,
						quota_finish_done, j) == CM_OK)
			j->refs++;
	}
	job_unref(j);
}

/* ---- worker results -------------------------------------------------- */

static int start_stream(struct gw_job *j)
{
	if (j->streaming)
		return 0;
	if (gw_request_stream_start(j->req, 200, gw_api_content_type(&j->api)) != CM_OK)
		return -1;
	j->streaming = 1;
	return 0;
}

static void on_tokens(void *arg, const struct proto_tokens *t)
{
	struct gw_job *j = arg;
	int64_t now = cm_mono_ns();
	struct gw_metrics *m = j->d->dep.metrics;

	if (!j->req || j->write_failed)
		return;
	cm_buf_reset(&j->out);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct proto_token *tk = &t->tok[i];

		if (tk->id != GW_TEXT_ONLY_ID) {
			if (!j->first_ns) {
				j->first_ns = now;
				if (m)
					gw_metrics_observe(m, GW_HIST_TTFT, now - j->start_ns);
			} else if (m) {
				gw_metrics_observe(m, GW_HIST_ITL, now - j->last_ns);
			}
			j->last_ns = now;
			j->tokens++;
		} else if (tk->text.len == 0) {
			continue;
		}
		if (j->api.stream) {
			if (gw_api_render_chunk(&j->out, &j->stream, tk->text.ptr, tk->text.len) != CM_OK)
				goto overflow;
		} else if (cm_buf_append(&j->text, tk->text.ptr, tk->text.len) != CM_OK) {
			goto overflow;
		}
	}
	if (j->api.stream && cm_buf_len(&j->out)) {
		if (start_stream(j) != 0 ||
		    gw_request_stream_write(j->req, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK) {
			/* the connection is closing: on_close follows (and
			 * cancels); stop writing until then */
			j->write_failed = 1;
		}
	}
	return;
overflow:
	gw_workers_cancel(j->d->dep.workers, (size_t)j->worker, j->id, PROTO_CANCEL_TIMEOUT);
	job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
}

static void on_done(void *arg, const struct proto_done *dn)
{
	struct gw_job *j = arg;
	struct gw_api_result res;
	int64_t now = cm_mono_ns();

	j->done = *dn;
	j->have_done = 1;
	if (!j->req || j->write_failed) {
		(void)job_take_req(j);
		job_end(j, 499, "client_gone");
		return;
	}
	memset(&res, 0, sizeof(res));
	gw_api_result_from_done(&res, dn);
	res.total_ns = now - j->start_ns;
	res.ttft_ns = j->first_ns ? j->first_ns - j->start_ns : 0;
	res.queue_ns = (j->disp_ns - j->enq_ns) + dn->queue_ns;
	cm_buf_reset(&j->out);
	if (j->api.stream) {
		struct gw_request *r;

		if (gw_api_render_final(&j->out, &j->stream, &res) != CM_OK ||
		    start_stream(j) != 0) {
			job_failf(j, 500, "render", 0, "internal error");
			return;
		}
		r = job_take_req(j);
		if (gw_request_stream_write(r, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK ||
		    gw_request_stream_end(r) != CM_OK) {
			job_end(j, 499, "client_gone");
			return;
		}
	} else {
		if (gw_api_render_full(&j->out, &j->stream, (const char *)cm_buf_data(&j->text),
				       cm_buf_len(&j->text), &res) != CM_OK) {
			job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
			return;
		}
		respond_buf(job_take_req(j), 200, &j->out);
	}
	job_end(j, 200, dn->finish == PROTO_FINISH_CANCELLED ? "cancelled" : "ok");
}

static void on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct gw_job *j = arg;
	int status;
	const char *text;

	(void)msg;
	(void)len;
	if (code == GW_WORKERS_E_LOST && j->req && !j->first_ns && !j->retried) {
		/* nothing reached the client yet: back to the head of its
		 * queue, once, for another worker (or this one, reconnected) */
		cm_logf(CM_LOG_WARN, "redispatch", "request %llu: worker connection lost "
			"before the first token; queued again", (unsigned long long)j->id);
		j->retried = 1;
		j->worker = -1;
		j->stage = GW_ST_QUEUED;
		gw_queue_unpop(j->d->dep.queue, &j->qi);
		pump(j->d);
		return;
	}
	switch (code) {
	case PROTO_E_BAD_REQUEST: status = 400; text = "invalid request parameters"; break;
	case PROTO_E_TOO_LONG: status = 400; text = "the prompt and max tokens exceed the model's context"; break;
	case PROTO_E_NO_TEMPLATE: status = 400; text = "the model has no chat template for these messages"; break;
	case PROTO_E_OVERLOADED: status = 503; text = "the worker is overloaded; retry later"; break;
	case PROTO_E_DRAINING: status = 503; text = "the worker is draining; retry later"; break;
	default: status = 502; text = "the model worker failed to complete the request"; break;
	}
	cm_logf(CM_LOG_WARN, "worker_request_error", "request %llu: worker code %u: %.*s",
		(unsigned long long)j->id, code, (int)(len > 200 ? 200 : len), msg ? msg : "");
	if (!j->req) {
		job_end(j, 499, "client_gone");
		return;
	}
	job_failf(j, status, "worker_error", status == 503 ? 1 : 0, text);
}

static const struct gw_request_ops gw_job_ops = { on_tokens, on_done, on_error };

/* ---- placement and the queue ---------------------------------------- */

/* Canonical prompt prefix for the routing key. */
static void prompt_prefix(const struct gw_job *j, struct cm_buf *b, size_t max)
{
	if (j->api.prompt_kind == PROTO_PROMPT_TEXT) {
		size_t n = j->api.text.len < max ? j->api.text.len : max;

		GW_IGNORE(cm_buf_append(b, j->api.text.ptr, n));
		return;
	}
	for (uint32_t i = 0; i < j->api.n_messages && cm_buf_len(b) < max; i++) {
		const struct proto_message *m = &j->api.messages[i];
		size_t room = max - cm_buf_len(b);

		GW_IGNORE(cm_buf_append(b, m->role.ptr, m->role.len < room ? m->role.len : room));
		GW_IGNORE(cm_buf_append(b, "\n", 1));
		room = max > cm_buf_len(b) ? max - cm_buf_len(b) : 0;
		GW_IGNORE(cm_buf_append(b, m->content.ptr, m->content.len < room ? m->content.len : room));
		GW_IGNORE(cm_buf_append(b, "\n", 1));
	}
}

/* Index of the worker for the job, or -1 when none can take it now. */
static long place(struct gw_dispatch *d, struct gw_job *j)
{
	size_t n = gw_workers_count(d->dep.workers), k = 0;
	struct gw_place_worker rw[256];
	size_t idx[256];
	struct gw_worker_info wi;
	struct gw_place_key key;
	struct gw_place_pick pick;
	struct cm_buf pre;
	size_t mlen = strlen(j->model);

	for (size_t i = 0; i < n && k < 256; i++) {
		if (!gw_workers_can_take(d->dep.workers, i))
			continue;
		gw_workers_info(d->dep.workers, i, &wi);
		if (wi.hello.model_name.len != mlen ||
		    memcmp(wi.hello.model_name.ptr, j->model, mlen) != 0)
			continue;
		rw[k].name = wi.name;
		rw[k].weight = 1;
		rw[k].load = wi.inflight;
		rw[k].healthy = true;
		rw[k].draining = false;
		idx[k++] = i;
	}
	if (k == 0)
		return -1;
	if (k == 1)
		return (long)idx[0];
	if (d->cfg.route_round_robin)
		return (long)idx[d->rr_next++ % k];
	cm_buf_init(&pre, d->cfg.route_prefix_bytes + 64);
	prompt_prefix(j, &pre, d->cfg.route_prefix_bytes);
	gw_place_key(j->ident.salt, sizeof(j->ident.salt), cm_buf_data(&pre), cm_buf_len(&pre),
		     d->cfg.route_prefix_bytes, &key);
	cm_buf_deinit(&pre);
	if (gw_place_choose(&key, rw, k, d->cfg.route_load_factor, &pick) != CM_OK)
		return (long)idx[0];
	return (long)idx[pick.index];
}

static int submit(struct gw_dispatch *d, struct gw_job *j, long w)
{
	struct proto_submit s;
	uint32_t flags;
	enum cm_status st;

	gw_api_to_submit(&j->api, &s, &flags);
	if (j->ignore_eos)
		flags |= PROTO_SUBMIT_F_IGNORE_EOS;
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
	st = gw_workers_submit(d->dep.workers, (size_t)w, j->id, flags, &s, &gw_job_ops, j);
	cm_wipe(s.cache_salt, sizeof(s.cache_salt));
	if (st != CM_OK)
		return -1;
	j->worker = w;
	j->stage = GW_ST_RUNNING;
	j->disp_ns = cm_mono_ns();
	if (d->dep.metrics)
		gw_metrics_observe(d->dep.metrics, GW_HIST_QUEUE, j->disp_ns - j->enq_ns);
	return 0;
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

static void pump(struct gw_dispatch *d)
{
	struct gw_queue_item *it;

	if (d->pumping)
		return;
	d->pumping = 1;
	while ((it = gw_queue_pop(d->dep.queue, cm_mono_ns())) != NULL) {
		struct gw_job *j = job_of_item(it);
		long w = place(d, j);

		if (w < 0 || submit(d, j, w) != 0) {
			gw_queue_unpop(d->dep.queue, it);
			break;
		}
	}
	d->pumping = 0;
	arm_qtimer(d);
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
		job_failf(j, 503, "queue_timeout",
			  gw_queue_retry_after_s(d->dep.queue, gw_queue_depth(d->dep.queue) + 1),
			  "the request waited too long in the queue; retry later");
	}
	pump(d);
}

static void capacity_cb(void *ctx)
{
	pump(ctx);
}

static void enqueue(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	enum gw_queue_verdict v;
	int64_t now = cm_mono_ns();

	j->enq_ns = now;
	if (gw_queue_push(d->dep.queue, j->ident.tenant, j->ident.weight, j->ident.queue_max,
			  j->batch ? GW_QUEUE_BATCH : GW_QUEUE_INTERACTIVE, &j->qi, now, &v) != CM_OK) {
		job_failf(j, 503, "no_memory", 1, "the gateway is out of memory; retry later");
		return;
	}
	if (v == GW_QUEUE_TENANT_FULL) {
		job_failf(j, 429, "tenant_queue_full",
			  gw_queue_retry_after_s(d->dep.queue,
						 gw_queue_tenant_depth(d->dep.queue, j->ident.tenant) + 1),
			  "too many requests queued for this tenant; retry later");
		return;
	}
	if (v == GW_QUEUE_GLOBAL_FULL) {
		job_failf(j, 503, "global_queue_full",
			  gw_queue_retry_after_s(d->dep.queue, gw_queue_depth(d->dep.queue) + 1),
			  "the service is at capacity; retry later");
		return;
	}
	j->stage = GW_ST_QUEUED;
	pump(d);
}

/* ---- quota ----------------------------------------------------------- */

static void quota_renew_done(void *arg, enum cm_status st,
			     const struct gw_quota_verdict *v, int64_t held)
{
	struct gw_job *j = arg;

	(void)v;
	if (st == CM_OK && held == 0 && j->stage != GW_ST_ENDED)
		cm_logf(CM_LOG_WARN, "quota_lease_lost", "request %llu: concurrency lease "
			"had expired before its renewal", (unsigned long long)j->id);
	job_unref(j);
}

static void arm_renew(struct gw_job *j)
{
	int64_t ms = j->d->cfg.lease_ttl_ms / 3;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (j->renew_ev)
		evtimer_add(j->renew_ev, &tv);
}

static void renew_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_job *j = arg;
	struct gw_quota_subject s;
	redisAsyncContext *ac = gw_auth_redis(j->d->dep.auth);

	(void)fd;
	(void)what;
	if (j->stage == GW_ST_ENDED || !j->quota_admitted)
		return;
	quota_subject(j, &s);
	if (ac && gw_quota_renew_async(ac, &s, j->lease, j->d->cfg.lease_ttl_ms,
				       quota_renew_done, j) == CM_OK)
		j->refs++;
	arm_renew(j);
}

static int limits_set(const struct gw_quota_limits *l)
{
	return l->rpm || l->tpm || l->concurrency || l->daily_tokens;
}

static void quota_admit_done(void *arg, enum cm_status st,
			     const struct gw_quota_verdict *v, int64_t count)
{
	struct gw_job *j = arg;

	(void)count;
	j->quota_pending = 0;
	if (j->quota_to_ev) {
		event_free(j->quota_to_ev);
		j->quota_to_ev = NULL;
	}
	if (st == CM_OK && v->allowed)
		j->quota_admitted = 1;
	if (j->stage != GW_ST_QUOTA || !j->req) {
		if (j->stage == GW_ST_QUOTA) {
			job_end(j, 499, "client_gone"); /* releases the lease */
		} else if (j->quota_admitted) {
			/* ended while the admission was in flight: give it back */
			struct gw_quota_subject s;
			redisAsyncContext *ac = gw_auth_redis(j->d->dep.auth);

			j->quota_admitted = 0;
			quota_subject(j, &s);
			if (ac && gw_quota_finish_async(ac, &s, j->estimate, 0, j->lease,
							quota_finish_done, j) == CM_OK)
				j->refs++;
		}
		job_unref(j);
		return;
	}
	if (st != CM_OK) {
		job_failf(j, 503, "quota_unavailable", 1, "quota service unavailable; retry later");
	} else if (!v->allowed) {
		struct gw_api_error e;
		uint32_t ra = v->retry_after_ms < 0 ? 0
			: (uint32_t)((v->retry_after_ms + 999) / 1000);

		gw_api_error_set(&e, 429, NULL, "rate_limit_exceeded",
				 "quota exceeded: %s %s%s", gw_quota_scope_name(v->scope),
				 gw_quota_limit_name(v->limit),
				 v->retry_after_ms < 0 ? " (the request alone exceeds the limit)" : "");
		job_fail(j, &e, ra ? ra : (v->retry_after_ms < 0 ? 0 : 1), "quota");
	} else {
		if (limits_set(&j->ident.tenant_limits) || limits_set(&j->ident.client_limits)) {
			j->renew_ev = evtimer_new(j->d->base, renew_cb, j);
			arm_renew(j);
		}
		enqueue(j);
	}
	job_unref(j);
}

/*
 * A Redis that answers slowly: the admission's deadline passes first, the
 * client gets 503 at once, and the late reply (if any) gives back what it
 * admitted (quota_admit_done's "ended while in flight" path).
 */
static void quota_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_job *j = arg;

	(void)fd;
	(void)what;
	if (j->quota_pending && j->stage == GW_ST_QUOTA)
		job_failf(j, 503, "quota_timeout", 1, "quota service did not answer in time; retry later");
}

static void quota_then_queue(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_quota_subject s;
	redisAsyncContext *ac;
	uint8_t rnd[8];

	if (!limits_set(&j->ident.tenant_limits) && !limits_set(&j->ident.client_limits)) {
		enqueue(j);
		return;
	}
	ac = gw_auth_redis(d->dep.auth);
	if (!ac) {
		/* Redis outage: this gateway's share of the limits (docs/gateway.md) */
		struct gw_quota_verdict v;

		quota_subject(j, &s);
		gw_local_limit_admit(d->local, &s, cm_mono_ns(), &v);
		if (!v.allowed) {
			struct gw_api_error e;

			gw_api_error_set(&e, 429, NULL, "rate_limit_exceeded",
					 "quota exceeded: %s %s", gw_quota_scope_name(v.scope),
					 gw_quota_limit_name(v.limit));
			job_fail(j, &e, (uint32_t)((v.retry_after_ms + 999) / 1000), "quota");
			return;
		}
		j->local_admitted = 1;
		enqueue(j);
		return;
	}
	if (cm_random_bytes(rnd, sizeof(rnd)) != CM_OK)
		memset(rnd, 0, sizeof(rnd));
	snprintf(j->lease, sizeof(j->lease), "%02x%02x%02x%02x%02x%02x%02x%02x-%llu",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7],
		 (unsigned long long)j->id);
	/* estimate: ~4 bytes per prompt token, plus every token it may produce */
	{
		uint64_t bytes = j->api.text.len;

		for (uint32_t i = 0; i < j->api.n_messages; i++)
			bytes += j->api.messages[i].content.len + 8;
		j->estimate = (int64_t)(bytes / 4 + 1 + j->api.max_tokens);
	}
	quota_subject(j, &s);
	j->stage = GW_ST_QUOTA;
	if (gw_quota_admit_async(ac, &s, j->estimate, j->lease, d->cfg.lease_ttl_ms,
				 quota_admit_done, j) != CM_OK) {
		job_failf(j, 503, "quota_unavailable", 1, "quota service unavailable; retry later");
		return;
	}
	j->refs++;
	j->quota_pending = 1;
	j->quota_to_ev = evtimer_new(d->base, quota_timeout_cb, j);
	if (j->quota_to_ev) {
		int64_t ms = d->cfg.quota_timeout_ms > 0 ? d->cfg.quota_timeout_ms : 1000;
		struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

		evtimer_add(j->quota_to_ev, &tv);
	}
}

/* ---- fixed endpoints --------------------------------------------------- */

/* The models of the ready workers (deduplicated by name). */
static size_t ready_models(struct gw_dispatch *d, struct gw_api_model *m, size_t max,
			   struct gw_worker_info *wi)
{
	size_t n = gw_workers_count(d->dep.workers), k = 0;

	for (size_t i = 0; i < n && k < max; i++) {
		int dup = 0;

		gw_workers_info(d->dep.workers, i, &wi[k]);
		if (!wi[k].ready)
			continue;
		for (size_t x = 0; x < k; x++)
			dup |= strcmp(m[x].name, wi[k].hello.model_name.ptr) == 0;
		if (dup)
			continue;
		memset(&m[k], 0, sizeof(m[k]));
		m[k].name = wi[k].hello.model_name.ptr;
		m[k].architecture = "llama";
		m[k].family = "llama";
		m[k].parameter_size = "";
		m[k].quantization = "";
		memcpy(m[k].sha256, wi[k].hello.model_sha256, PROTO_DIGEST_LEN);
		m[k].context_len = wi[k].hello.context_len;
		m[k].vram_bytes = wi[k].have_stats ? wi[k].stats.device_mem_used : 0;
		k++;
	}
	return k;
}

static void answer_models(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_api_model m[64];
	struct gw_worker_info wi[64];
	size_t n = ready_models(d, m, 64, wi);
	struct cm_buf b;
	enum cm_status st = CM_OK;
	struct proto_str want;
	struct gw_api_error e;

	cm_buf_init(&b, 1024 * 1024);
	switch (j->route) {
	case GW_PATH_OLLAMA_TAGS: st = gw_api_render_tags(&b, m, n); break;
	case GW_PATH_OLLAMA_PS: st = gw_api_render_ps(&b, m, n); break;
	case GW_PATH_OPENAI_MODELS: st = gw_api_render_models(&b, m, n); break;
	default: {
		size_t len;
		const uint8_t *body = gw_request_body(j->req, &len);
		size_t i;
		struct gw_api_limits lim = d->cfg.limits;

		if (gw_api_parse_show(body, len, &lim, gw_request_arena(j->req), &want, &e) != CM_OK) {
			cm_buf_deinit(&b);
			job_fail(j, &e, 0, "bad_request");
			return;
		}
		for (i = 0; i < n; i++)
			if (strlen(m[i].name) == want.len && memcmp(m[i].name, want.ptr, want.len) == 0)
				break;
		if (i == n) {
			cm_buf_deinit(&b);
			gw_api_error_model_not_found(&e, want.ptr, want.len);
			job_fail(j, &e, 0, "unknown_model");
			return;
		}
		st = gw_api_render_show(&b, &m[i]);
	}
	}
	if (st == CM_OK) {
		respond_buf(job_take_req(j), 200, &b);
		job_end(j, 200, "ok");
	} else {
		job_failf(j, 500, "render", 0, "internal error");
	}
	cm_buf_deinit(&b);
}

static void answer_readyz(struct gw_dispatch *d, struct gw_request *r)
{
	size_t n = gw_workers_count(d->dep.workers);
	struct gw_worker_info wi;
	char body[512];

	for (size_t i = 0; i < n; i++) {
		gw_workers_info(d->dep.workers, i, &wi);
		if (!wi.ready) {
			int len = snprintf(body, sizeof(body),
					   "{\"status\":\"not ready\",\"worker\":\"%s\",\"reason\":\"%s\"}\n",
					   wi.name, wi.not_ready_reason);
			respond_raw(r, 503, GW_API_CT_JSON, body, (size_t)len);
			return;
		}
	}
	if (n == 0 || !gw_auth_redis_ok(d->dep.auth)) {
		const char *msg = n == 0 ? "{\"status\":\"not ready\",\"reason\":\"no workers\"}\n"
					 : "{\"status\":\"not ready\",\"reason\":\"redis unavailable\"}\n";
		respond_raw(r, 503, GW_API_CT_JSON, msg, strlen(msg));
		return;
	}
	respond_raw(r, 200, GW_API_CT_JSON, "{\"status\":\"ready\"}\n", 19);
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

static void start_generation(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_api_error e;
	size_t len;
	const uint8_t *body = gw_request_body(j->req, &len);
	const char *cls;
	size_t mlen;

	if (gw_api_parse(kind_of(j->route), body, len, &d->cfg.limits,
			 gw_request_arena(j->req), &j->api, &e) != CM_OK) {
		job_fail(j, &e, 0, "bad_request");
		return;
	}
	mlen = j->api.model.len < GW_API_MODEL_NAME_MAX ? j->api.model.len : GW_API_MODEL_NAME_MAX;
	memcpy(j->model, j->api.model.ptr, mlen);
	j->model[mlen] = '\0';
	if (!gw_workers_knows_model(d->dep.workers, j->api.model.ptr, j->api.model.len)) {
		gw_api_error_model_not_found(&e, j->api.model.ptr, j->api.model.len);
		j->model[0] = '\0';
		job_fail(j, &e, 0, "unknown_model");
		return;
	}
	if (j->ident.max_output_tokens > 0 && j->api.max_tokens > j->ident.max_output_tokens) {
		if (j->api.max_tokens_given) {
			gw_api_error_set(&e, 400, j->style == GW_STYLE_OPENAI ? "max_tokens" : "num_predict",
					 NULL, "max tokens: expected at most %lld (the tenant's limit), found %u",
					 (long long)j->ident.max_output_tokens, j->api.max_tokens);
			job_fail(j, &e, 0, "bad_request");
			return;
		}
		j->api.max_tokens = (uint32_t)j->ident.max_output_tokens;
	}
	cls = gw_request_header(j->req, "X-Sluice-Class");
	if (cls) {
		if (strcasecmp(cls, "batch") == 0) {
			j->batch = 1;
		} else if (strcasecmp(cls, "interactive") == 0) {
			j->batch = 0;
		} else {
			gw_api_error_set(&e, 400, NULL, NULL,
					 "X-Sluice-Class: expected \"interactive\" or \"batch\"");
			job_fail(j, &e, 0, "bad_request");
			return;
		}
	} else {
		j->batch = j->ident.batch;
	}
	cls = gw_request_header(j->req, "X-Sluice-Ignore-EOS");
	j->ignore_eos = cls && (strcmp(cls, "1") == 0 || strcasecmp(cls, "true") == 0);
	gw_api_stream_init(&j->stream, &j->api, j->id, cm_wall_ns());
	quota_then_queue(j);
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
		job_fail(j, &e, status == 503 ? 1 : 0, status == 401 ? "unauthorized" : "auth_unavailable");
		return;
	}
	j->ident = *id;
	j->have_ident = 1;
	j->stage = GW_ST_QUOTA;
	switch (j->route) {
	case GW_PATH_OLLAMA_TAGS:
	case GW_PATH_OLLAMA_PS:
	case GW_PATH_OPENAI_MODELS:
	case GW_PATH_OLLAMA_SHOW:
		answer_models(j);
		return;
	default:
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
		job_end(j, 499, "client_gone");
		break;
	case GW_ST_QUOTA:
		/* the admission callback ends it (and releases the lease) */
		break;
	case GW_ST_RUNNING:
		gw_workers_cancel(j->d->dep.workers, (size_t)j->worker, j->id,
				  PROTO_CANCEL_CLIENT_GONE);
		job_end(j, 499, "client_gone");
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

	if (d->closing) {
		/* gw_dispatch_free is flushing usage records */
		respond_raw(req, 503, "text/plain", "shutting down\n", 14);
		return;
	}
	gw_paths_match(gw_request_method(req), gw_request_path(req), &m);
	if (m.status == 404 || m.route == GW_PATH_METRICS) {
		gw_api_error_set(&e, 404, NULL, NULL, "no such endpoint");
		respond_error_req(req, m.style, &e, 0);
		return;
	}
	if (m.status == 405) {
		GW_IGNORE(gw_request_add_header(req, "Allow", m.allow));
		gw_api_error_set(&e, 405, NULL, NULL, "method not allowed");
		respond_error_req(req, m.style, &e, 0);
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
			respond_buf(req, m.route == GW_PATH_MANAGE ? 403 : 200, &b);
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
	j->route = m.route;
	j->style = m.style;
	j->stage = GW_ST_AUTH;
	j->refs = 1;
	j->worker = -1;
	j->start_ns = gw_request_start_ns(req);
	cm_buf_init(&j->text, d->cfg.out_bytes);
	cm_buf_init(&j->out, GW_JOB_OUT_CAP);
	active_add(d, j);
	gw_request_on_close(req, on_client_close, j);
	j->refs++; /* held across the auth call */
	gw_auth_check(d->dep.auth, gw_request_header(req, "Authorization"), auth_done, j, &lookup);
	if (j->stage == GW_ST_AUTH)
		j->lookup = lookup;
	job_unref(j);
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
		if (!j->have_ident || (j->stage != GW_ST_RUNNING && j->stage != GW_ST_QUEUED))
			continue;
		snprintf(tc, sizeof(tc), "%s/%s", j->ident.tenant, j->ident.client);
		hit = (strcmp(kind, "key") == 0 && strcmp(j->ident.key_id, target) == 0) ||
		      (strcmp(kind, "client") == 0 && strcmp(tc, target) == 0) ||
		      (strcmp(kind, "tenant") == 0 && strcmp(j->ident.tenant, target) == 0);
		if (!hit)
			continue;
		if (j->stage == GW_ST_RUNNING)
			gw_workers_cancel(d->dep.workers, (size_t)j->worker, j->id,
					  PROTO_CANCEL_REVOKED);
		/* safe: `next` is not freed by ending `j` */
		job_failf(j, 401, "revoked", 0, "invalid or missing API key");
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
	    gw_local_limit_new(cfg->outage_quota_fraction > 0 ? cfg->outage_quota_fraction : 1.0,
			       &d->local) != CM_OK) {
		event_free(d->qtimer);
		cm_free(d);
		return CM_EINVAL;
	}
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
			gw_workers_cancel(d->dep.workers, (size_t)j->worker, j->id,
					  PROTO_CANCEL_SHUTDOWN);
		j->quota_admitted = 0; /* leases expire by themselves */
		job_failf(j, 503, "shutdown", 1, "the gateway is shutting down");
	}
	/* give the usage records of the requests just ended (and any still
	 * waiting) up to GW_USAGE_FLUSH_MS to reach Redis: the loop runs
	 * again, new requests are refused meanwhile */
	d->closing = 1;
	{
		int64_t until = cm_mono_ns() + GW_USAGE_FLUSH_MS * 1000000LL;

		while (d->upending && gw_auth_redis(d->dep.auth) && cm_mono_ns() < until) {
			struct timeval tv = { 0, 20000 };

			event_base_loopexit(d->base, &tv);
			event_base_dispatch(d->base);
		}
	}
	/* records still unacknowledged: their replies (or the context's
	 * teardown) free them; waiting retries are dropped */
	while (d->upending) {
		struct gw_usage_pending *u = d->upending;

		d->upending = u->next;
		if (u->next)
			u->next->pprev = &d->upending;
		u->pprev = NULL;
		u->next = NULL;
		u->d = NULL;
		if (!u->in_flight) {
			cm_logf(CM_LOG_WARN, "usage_lost", "request %s: usage not recorded "
				"(shutdown)", u->rid);
			usage_pending_free(u);
		}
	}
	gw_workers_set_capacity_cb(d->dep.workers, NULL, NULL);
	gw_auth_set_revoke_cb(d->dep.auth, NULL, NULL);
	gw_local_limit_free(d->local);
	event_free(d->qtimer);
	cm_free(d);
}

size_t gw_dispatch_active(const struct gw_dispatch *d)
{
	return d->n_active;
}
