/*
 * usage_queue.h - the usage records of finished requests on their way to
 * Redis, retried until acknowledged (docs/usage.md).
 *
 * One record per finished request with an identity.  A record whose write
 * failed is kept and retried (250 ms, doubling to 2 s) for
 * GW_USAGE_TRIES tries, about 20 minutes, so a Redis outage loses nothing;
 * at most GW_USAGE_PENDING_MAX records wait at once (older ones stay, new
 * ones are dropped and logged).  The request id carried by a record is
 * reused on every retry, so Redis counts it once.
 *
 * Runs on the gateway's event loop; owns its records and their timers.
 * The Redis connection is borrowed (gateway/redis/conn.h) at each try.
 */
#ifndef SLUICE_GATEWAY_GOV_USAGE_QUEUE_H
#define SLUICE_GATEWAY_GOV_USAGE_QUEUE_H

#include <stddef.h>

#include <event2/event.h>

#include "common/status.h"
#include "gateway/redis/conn.h"
#include "gateway/gov/usage.h"

#define GW_USAGE_TRIES 600
#define GW_USAGE_RETRY_MS 250
#define GW_USAGE_RETRY_MAX_MS 2000
#define GW_USAGE_PENDING_MAX 65536
#define GW_USAGE_FLUSH_MS 2000      /* at shutdown */

struct gw_usage_queue;

enum cm_status gw_usage_queue_new(struct event_base *base, struct gw_redis *redis,
				  struct gw_usage_queue **out) CM_WUR;

/*
 * Copies `rec` (its tenant, client and request id strings too) and sends
 * it.  Refuses (logged "usage_lost") when GW_USAGE_PENDING_MAX records wait
 * or memory runs out.
 */
void gw_usage_queue_push(struct gw_usage_queue *q, const struct gw_usage_record *rec);

/* Records not yet acknowledged. */
size_t gw_usage_queue_pending(const struct gw_usage_queue *q);

/*
 * Gives the waiting records up to GW_USAGE_FLUSH_MS to reach Redis (runs
 * the loop meanwhile), then drops waiting retries (logged) and detaches
 * the writes in flight (their replies free them).  NULL is a no-op.
 */
void gw_usage_queue_free(struct gw_usage_queue *q);

#endif
