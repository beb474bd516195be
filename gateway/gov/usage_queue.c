/*
 * usage_queue.c - usage records retried until Redis acknowledges them
 * (see usage_queue.h).  A doubly linked list of pending records; each has
 * its retry timer and at most one write in flight.
 */
#include "gateway/gov/usage_queue.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "gateway/gov/auth.h"

struct gw_usage_pending {
	struct gw_usage_queue *q;   /* NULL once the queue is gone */
	struct event *retry_ev;
	int tries;
	int in_flight;
	char tenant[GW_KEY_NAME_MAX];
	char client[GW_KEY_NAME_MAX];
	char rid[GW_USAGE_REQUEST_ID_MAX + 1];
	struct gw_usage_record rec;
	struct gw_usage_pending *next, **pprev;
};

struct gw_usage_queue {
	struct event_base *base;
	struct gw_redis *redis;
	struct gw_usage_pending *head;
	size_t n;
};

static void uq_pending_free(struct gw_usage_pending *u)
{
	if (u->pprev) {
		*u->pprev = u->next;
		if (u->next)
			u->next->pprev = u->pprev;
	}
	if (u->retry_ev)
		event_free(u->retry_ev);
	if (u->q)
		u->q->n--;
	cm_free(u);
}

static void uq_send(struct gw_usage_pending *u);

static void uq_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	uq_send(arg);
}

static void uq_failed(struct gw_usage_pending *u)
{
	int64_t ms = (int64_t)GW_USAGE_RETRY_MS << (u->tries < 4 ? u->tries - 1 : 3);
	struct timeval tv;

	if (ms > GW_USAGE_RETRY_MAX_MS)
		ms = GW_USAGE_RETRY_MAX_MS;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;

	if (!u->q || u->tries >= GW_USAGE_TRIES ||
	    (!u->retry_ev && !(u->retry_ev = evtimer_new(u->q->base, uq_retry_cb, u))) ||
	    evtimer_add(u->retry_ev, &tv) != 0) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %s: usage not recorded after "
			"%d tries", u->rid, u->tries);
		uq_pending_free(u);
	}
}

static void uq_done(void *arg, enum cm_status st, int counted)
{
	struct gw_usage_pending *u = arg;

	u->in_flight = 0;
	cm_logf(st == CM_OK || u->tries > 1 ? CM_LOG_DEBUG : CM_LOG_WARN, "usage_record",
		"request %s: %s (counted %d, try %d)", u->rid, cm_status_str(st), counted,
		u->tries);
	if (st == CM_OK)
		uq_pending_free(u);
	else
		uq_failed(u);
}

static void uq_send(struct gw_usage_pending *u)
{
	redisAsyncContext *ac = u->q ? gw_redis_async(u->q->redis) : NULL;

	u->tries++;
	if (ac && gw_usage_record_async(ac, &u->rec, uq_done, u) == CM_OK) {
		u->in_flight = 1;
		return;
	}
	uq_failed(u);
}

enum cm_status gw_usage_queue_new(struct event_base *base, struct gw_redis *redis,
				  struct gw_usage_queue **out)
{
	struct gw_usage_queue *q = cm_calloc(1, sizeof(*q));

	*out = NULL;
	if (!q)
		return CM_ENOMEM;
	q->base = base;
	q->redis = redis;
	*out = q;
	return CM_OK;
}

void gw_usage_queue_push(struct gw_usage_queue *q, const struct gw_usage_record *rec)
{
	struct gw_usage_pending *u;

	if (q->n >= GW_USAGE_PENDING_MAX) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %s: %zu usage records wait "
			"already", rec->request_id, q->n);
		return;
	}
	u = cm_calloc(1, sizeof(*u));
	if (!u) {
		cm_logf(CM_LOG_WARN, "usage_lost", "request %s: out of memory",
			rec->request_id);
		return;
	}
	u->q = q;
	u->rec = *rec;
	snprintf(u->tenant, sizeof(u->tenant), "%s", rec->tenant);
	snprintf(u->client, sizeof(u->client), "%s", rec->client);
	snprintf(u->rid, sizeof(u->rid), "%s", rec->request_id);
	u->rec.tenant = u->tenant;
	u->rec.client = u->client;
	u->rec.request_id = u->rid;
	u->next = q->head;
	if (u->next)
		u->next->pprev = &u->next;
	u->pprev = &q->head;
	q->head = u;
	q->n++;
	uq_send(u);
}

size_t gw_usage_queue_pending(const struct gw_usage_queue *q)
{
	return q->n;
}

void gw_usage_queue_free(struct gw_usage_queue *q)
{
	int64_t until;

	if (!q)
		return;
	until = cm_mono_ns() + GW_USAGE_FLUSH_MS * 1000000LL;
	while (q->head && gw_redis_async(q->redis) && cm_mono_ns() < until) {
		struct timeval tv = { 0, 20000 };

		event_base_loopexit(q->base, &tv);
		event_base_dispatch(q->base);
	}
	/* records still unacknowledged: their replies (or the context's
	 * teardown) free them; waiting retries are dropped */
	while (q->head) {
		struct gw_usage_pending *u = q->head;

		q->head = u->next;
		if (u->next)
			u->next->pprev = &q->head;
		u->pprev = NULL;
		u->next = NULL;
		u->q = NULL;
		if (!u->in_flight) {
			cm_logf(CM_LOG_WARN, "usage_lost", "request %s: usage not recorded "
				"(shutdown)", u->rid);
			uq_pending_free(u);
		}
	}
	cm_free(q);
}
