/*
 * conn.h - the gateway's two Redis connections: one for commands (every
 * module that talks to Redis borrows it: auth, quota leases, usage,
 * admin) and one for the revocation subscription.
 *
 * Both are hiredis async contexts on the gateway's event loop, logged in
 * with AUTH when a password is configured.  They are
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
#define GW_REDIS_USER_MAX 128
#define GW_REDIS_PASSWORD_MAX 512
#define GW_REDIS_PING_MS 500

struct gw_redis;

/* One published message (payload not NUL-terminated, at most 4 KiB). */
typedef void (*gw_redis_msg_fn)(void *ctx, const char *payload, size_t len);
/* The subscription is (again) in place, or was lost. */
typedef void (*gw_redis_sub_fn)(void *ctx);

/* Where Redis is and how to log in. */
struct gw_redis_opts {
	const char *url;           /* unix:///path or redis://host[:port] */
	const char *user;          /* ACL user for AUTH; NULL: the default user */
	const char *password_file; /* AUTH with its content; NULL: no AUTH */
	int64_t timeout_ms;        /* a PING unanswered this long: not up (0: 1 s) */
};

/*
 * Parses the URL, reads the password file (cm_secret_read: mode 0600, at
 * most GW_REDIS_PASSWORD_MAX bytes) and starts both connections.  With a
 * password each connection sends AUTH first and counts as up only once
 * Redis accepted it; a refused AUTH is logged (redis_auth_failed, Redis's
 * words, never the password) and retried with the backoff.  CM_EINVAL /
 * the file's status, with a message naming the gateway.redis key.
 */
enum cm_status gw_redis_new(struct event_base *base, const struct gw_redis_opts *o,
			    struct gw_redis **out, char *err, size_t err_len) CM_WUR;
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
/*
 * 1 when the command connection and the subscription are both up and Redis
 * answers: the command connection sends PING every GW_REDIS_PING_MS, and
 * one unanswered for timeout_ms counts as down (a Redis that is stopped or
 * stuck keeps its connections open) until its answer comes.
 */
int gw_redis_up(const struct gw_redis *r);

#endif
