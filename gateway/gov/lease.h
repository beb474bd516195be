/*
 * lease.h - one request's quota lease: admission, renewal, release.
 *
 * A request whose tenant or client has limits is admitted by the quota
 * scripts (gateway/gov/quota.h) under a lease id; while it runs, the
 * concurrency lease is renewed every TTL/3; at its end the lease is
 * released and the estimated tokens are reconciled with the exact count.
 * While Redis is unreachable, this gateway's share of the limits admits
 * instead (gateway/gov/local_limit.h).
 *
 * The owner (a dispatcher job) embeds a struct gw_lease (caller storage,
 * _init, then gw_lease_end exactly once before the owner goes, and again
 * after a late admission answer).  Every asynchronous call holds the owner
 * through owner->hold / owner->drop, so the owner outlives its replies.
 * Runs on the gateway's event loop; never blocks.
 */
#ifndef SLUICE_GATEWAY_GOV_LEASE_H
#define SLUICE_GATEWAY_GOV_LEASE_H

#include <stdint.h>

#include <event2/event.h>

#include "common/status.h"
#include "gateway/redis/conn.h"
#include "gateway/gov/local_limit.h"
#include "gateway/gov/quota.h"

#define GW_LEASE_ID_MAX 64

struct gw_lease_owner {
	void (*hold)(void *owner);  /* an asynchronous call now holds the owner */
	void (*drop)(void *owner);  /* ... and has finished with it */
	/*
	 * The admission's answer: CM_OK with *v (allowed or not), another
	 * status when Redis failed, CM_ETIMEDOUT (v NULL) when the deadline
	 * passed first.  A late answer after a deadline or after the owner
	 * ended comes too: the owner calls gw_lease_end(l, 0) to give back
	 * what it admitted.
	 */
	void (*decided)(void *owner, enum cm_status st, const struct gw_quota_verdict *v);
};

/* What every lease of a dispatcher shares (borrowed, outlives the leases). */
struct gw_lease_env {
	struct event_base *base;
	struct gw_redis *redis;         /* the command connection */
	struct gw_local_limit *local;   /* the outage fallback */
	int64_t ttl_ms;                 /* quota.lease_ttl_ms */
	int64_t timeout_ms;             /* redis.timeout_ms: admission deadline */
};

struct gw_lease {
	const struct gw_lease_env *env;
	const struct gw_lease_owner *ops;
	void *owner;
	uint64_t request_id;
	struct gw_quota_subject subj;   /* strings borrowed from the owner */
	char id[GW_LEASE_ID_MAX];
	int64_t estimate;               /* tokens consumed at admission */
	int admitted;                   /* Redis admitted: release at the end */
	int local_admitted;             /* the fallback admitted */
	int pending;                    /* an admission answer is awaited */
	int ended;
	struct event *renew_ev;
	struct event *timeout_ev;
};

void gw_lease_init(struct gw_lease *l, const struct gw_lease_env *env,
		   const struct gw_lease_owner *ops, void *owner,
		   uint64_t request_id, const struct gw_quota_subject *subj);

/* 1 when the subject has a limit that needs admission. */
int gw_lease_needed(const struct gw_quota_subject *s);

/*
 * Starts the admission of `estimate` tokens.  With Redis: CM_OK, the answer
 * comes through ops->decided; an error when the call could not be sent.
 * Without Redis: the fallback decides at once: CM_OK with *now filled and
 * *decided_now = 1 (a refusal carries its scope, limit, retry_after_ms).
 */
enum cm_status gw_lease_admit(struct gw_lease *l, int64_t estimate,
			      struct gw_quota_verdict *now, int *decided_now) CM_WUR;

/* After an allowed admission: renew the concurrency lease every TTL/3. */
void gw_lease_keep(struct gw_lease *l);

/*
 * The request ended with `actual` tokens (prompt + generated): timers
 * stop, and what was admitted is released and reconciled.  Callable
 * again (after a late answer admitted): it releases only what is held.
 */
void gw_lease_end(struct gw_lease *l, int64_t actual);

#endif
