/*
 * lease.c - quota leases of running requests (see lease.h): the admission
 * call and its deadline, the renewal timer, the release.
 */
#include "gateway/gov/lease.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"

void gw_lease_init(struct gw_lease *l, const struct gw_lease_env *env,
		   const struct gw_lease_owner *ops, void *owner,
		   uint64_t request_id, const struct gw_quota_subject *subj)
{
	memset(l, 0, sizeof(*l));
	l->env = env;
	l->ops = ops;
	l->owner = owner;
	l->request_id = request_id;
	l->subj = *subj;
}

static int lease_limits_set(const struct gw_quota_limits *q, int embedding)
{
	return q->rpm || q->tpm || q->concurrency || q->daily_tokens ||
	       (embedding && (q->embed_rpm || q->embed_tpm));
}

int gw_lease_needed(const struct gw_quota_subject *s)
{
	return lease_limits_set(&s->tenant_limits, s->embedding) ||
	       lease_limits_set(&s->client_limits, s->embedding);
}

static void lease_stop_timers(struct gw_lease *l)
{
	if (l->renew_ev) {
		event_free(l->renew_ev);
		l->renew_ev = NULL;
	}
	if (l->timeout_ev) {
		event_free(l->timeout_ev);
		l->timeout_ev = NULL;
	}
}

static void lease_admit_done(void *arg, enum cm_status st,
			     const struct gw_quota_verdict *v, int64_t count)
{
	struct gw_lease *l = arg;

	(void)count;
	l->pending = 0;
	if (l->timeout_ev) {
		event_free(l->timeout_ev);
		l->timeout_ev = NULL;
	}
	if (st == CM_OK && v->allowed)
		l->admitted = 1;
	l->ops->decided(l->owner, st, v);
	l->ops->drop(l->owner);
}

/*
 * A Redis that answers slowly: the deadline passes first, the owner is told
 * at once, and the late answer (if any) gives back what it admitted.
 */
static void lease_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_lease *l = arg;

	(void)fd;
	(void)what;
	if (l->pending && !l->ended)
		l->ops->decided(l->owner, CM_ETIMEDOUT, NULL);
}

enum cm_status gw_lease_admit(struct gw_lease *l, int64_t estimate,
			      struct gw_quota_verdict *now, int *decided_now)
{
	redisAsyncContext *ac = gw_redis_async(l->env->redis);
	uint8_t rnd[8];

	*decided_now = 0;
	l->estimate = estimate;
	if (!ac) {
		/* Redis outage: this gateway's share of the limits (docs/gateway.md) */
		gw_local_limit_admit(l->env->local, &l->subj, cm_mono_ns(), now);
		l->local_admitted = now->allowed;
		*decided_now = 1;
		return CM_OK;
	}
	if (cm_random_bytes(rnd, sizeof(rnd)) != CM_OK)
		memset(rnd, 0, sizeof(rnd));
	snprintf(l->id, sizeof(l->id), "%02x%02x%02x%02x%02x%02x%02x%02x-%llu",
		 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7],
		 (unsigned long long)l->request_id);
	if (gw_quota_admit_async(ac, &l->subj, estimate, l->id, l->env->ttl_ms,
				 lease_admit_done, l) != CM_OK)
		return CM_EIO;
	l->ops->hold(l->owner);
	l->pending = 1;
	l->timeout_ev = evtimer_new(l->env->base, lease_timeout_cb, l);
	if (l->timeout_ev) {
		int64_t ms = l->env->timeout_ms > 0 ? l->env->timeout_ms : 1000;
		struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

		evtimer_add(l->timeout_ev, &tv);
	}
	return CM_OK;
}

static void lease_renew_done(void *arg, enum cm_status st,
			     const struct gw_quota_verdict *v, int64_t held)
{
	struct gw_lease *l = arg;

	(void)v;
	if (st == CM_OK && held == 0 && !l->ended)
		cm_logf(CM_LOG_WARN, "quota_lease_lost", "request %llu: concurrency lease "
			"had expired before its renewal", (unsigned long long)l->request_id);
	l->ops->drop(l->owner);
}

static void lease_arm_renew(struct gw_lease *l)
{
	int64_t ms = l->env->ttl_ms / 3;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (l->renew_ev)
		evtimer_add(l->renew_ev, &tv);
}

static void lease_renew_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_lease *l = arg;
	redisAsyncContext *ac = gw_redis_async(l->env->redis);

	(void)fd;
	(void)what;
	if (l->ended || !l->admitted)
		return;
	if (ac && gw_quota_renew_async(ac, &l->subj, l->id, l->env->ttl_ms,
				       lease_renew_done, l) == CM_OK)
		l->ops->hold(l->owner);
	lease_arm_renew(l);
}

void gw_lease_keep(struct gw_lease *l)
{
	if (l->ended || l->renew_ev)
		return;
	l->renew_ev = evtimer_new(l->env->base, lease_renew_cb, l);
	lease_arm_renew(l);
}

static void lease_finish_done(void *arg, enum cm_status st,
			      const struct gw_quota_verdict *v, int64_t count)
{
	struct gw_lease *l = arg;

	(void)v;
	(void)count;
	if (st != CM_OK)
		cm_logf(CM_LOG_WARN, "quota_finish", "request %llu: lease not released "
			"(expires by itself)", (unsigned long long)l->request_id);
	l->ops->drop(l->owner);
}

void gw_lease_end(struct gw_lease *l, int64_t actual)
{
	l->ended = 1;
	lease_stop_timers(l);
	if (l->local_admitted) {
		l->local_admitted = 0;
		gw_local_limit_finish(l->env->local, &l->subj);
	}
	if (l->admitted) {
		redisAsyncContext *ac = gw_redis_async(l->env->redis);

		l->admitted = 0;
		if (ac && gw_quota_finish_async(ac, &l->subj, l->estimate, actual, l->id,
						lease_finish_done, l) == CM_OK)
			l->ops->hold(l->owner);
	}
}
