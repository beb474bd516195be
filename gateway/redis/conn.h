/*
 * conn.h - the gateway's two Redis connections: one for commands (every
 * module that talks to Redis borrows it: auth, quota leases, usage,
 * admin) and one for the revocation subscription.
 *
 * Both are hiredis async contexts on the gateway's event loop.  They are
 * opened at once and reopened after a failure with a backoff from
 * GW_REDIS_RECONNECT_MIN_MS doubling to GW_REDIS_RECONNECT_MAX_MS; while
 * the command connection is down gw_redis_async() returns NULL and callers
 * answer as their outage policy says (docs/gateway.md).  Commands in
 * flight when a connection drops get a NULL reply.
 *
 * Event-loop thread only; never blocks.
 */
#ifndef SLUICE_GATEWAY_REDIS_CONN_H
#define SLUICE_GATEWAY_REDIS_CONN_H

#include <stddef.h>

#include <event2/event.h>
#include <hiredis/async.h>

#include "common/status.h"

#define GW_REDIS_RECONNECT_MIN_MS 100
#define GW_REDIS_RECONNECT_MAX_MS 5000
#define GW_REDIS_URL_MAX 255

struct gw_redis;

/* One published message (payload not NUL-terminated, at most 4 KiB). */
typedef void (*gw_redis_msg_fn)(void *ctx, const char *payload, size_t len);
/* The subscription is (again) in place, or was lost. */
typedef void (*gw_redis_sub_fn)(void *ctx);

/*
 * Parses `url` (unix:///path or redis://host[:port]) and starts both
 * connections.  CM_EINVAL with a message naming gateway.redis.url.
 */
enum cm_status gw_redis_new(struct event_base *base, const char *url, struct gw_redis **out,
			    char *err, size_t err_len) CM_WUR;
/* Closes both connections (commands in flight get NULL replies).  NULL: no-op. */
void gw_redis_free(struct gw_redis *r);

/*
 * Subscribes to `channel` (copied) on the second connection, now and after
 * every reconnection: on_sub runs at each confirmation (anything published
 * while unsubscribed was missed), on_msg for each message, on_lost when
 * the subscription drops.  One subscriber; CM_EINVAL for a second one.
 */
enum cm_status gw_redis_subscribe(struct gw_redis *r, const char *channel,
				  gw_redis_msg_fn on_msg, gw_redis_sub_fn on_sub,
				  gw_redis_sub_fn on_lost, void *ctx) CM_WUR;

/* The command connection, NULL while it is down. */
redisAsyncContext *gw_redis_async(struct gw_redis *r);
/* 1 when the command connection and the subscription are both up. */
int gw_redis_up(const struct gw_redis *r);

#endif
