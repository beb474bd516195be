/*
 * conn.c - the command and subscription connections with reconnect
 * backoff (see conn.h).
 */
#include "gateway/redis/conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libevent.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/secret.h"

#define GW_REDIS_CHANNEL_MAX 128
#define GW_REDIS_MESSAGE_MAX 4096

/* One of the two connections. */
struct rconn {
	struct gw_redis *r;
	redisAsyncContext *ac;
	int up;
	struct event *retry;
	int64_t backoff_ms;
};

struct gw_redis {
	struct event_base *base;
	char url[GW_REDIS_URL_MAX + 1];
	char host[256];
	int port;
	int unix_sock;
	int freeing;
	int auth;                                 /* AUTH before anything else */
	char user[GW_REDIS_USER_MAX + 1];
	uint8_t pass[GW_REDIS_PASSWORD_MAX];
	size_t pass_len;
	struct rconn cmd, sub;
	char channel[GW_REDIS_CHANNEL_MAX];
	/* liveness: a PING in flight since ping_sent_ns; stalled when it is
	 * older than timeout_ns */
	struct event *ping_ev;
	int64_t timeout_ns;
	int64_t ping_sent_ns;       /* 0: none in flight */
	int stalled;
	gw_redis_msg_fn on_msg;
	gw_redis_sub_fn on_sub, on_lost;
	void *ctx;
};

static void rd_cmd_connect(struct gw_redis *r);
static void rd_sub_connect(struct gw_redis *r);
static void rd_sub_msg(redisAsyncContext *ac, void *reply, void *priv);

static void rd_cmd_up(struct rconn *c)
{
	c->up = 1;
	c->backoff_ms = GW_REDIS_RECONNECT_MIN_MS;
	cm_logf(CM_LOG_INFO, "redis_connected", "%s", c->r->url);
}

static void rd_subscribe(struct gw_redis *r)
{
	if (redisAsyncCommand(r->sub.ac, rd_sub_msg, r, "SUBSCRIBE %s", r->channel) != REDIS_OK)
		cm_logf(CM_LOG_WARN, "redis_subscribe", "%s: SUBSCRIBE not sent", r->url);
}

/* AUTH's answer: the command connection is up, the subscription is sent,
 * or (refused) the connection is closed and retried. */
static void rd_auth_reply(redisAsyncContext *ac, void *reply, void *priv)
{
	struct rconn *c = priv;
	const redisReply *m = reply;

	if (!m)
		return; /* the connection is going away */
	if (m->type == REDIS_REPLY_ERROR) {
		/* Redis's words ("WRONGPASS ..."); the password is never echoed */
		cm_logf(CM_LOG_ERROR, "redis_auth_failed", "%s: %.200s", c->r->url, m->str);
		redisAsyncDisconnect(ac);
		return;
	}
	if (c == &c->r->cmd)
		rd_cmd_up(c);
	else
		rd_subscribe(c->r);
}

static int rd_send_auth(struct gw_redis *r, redisAsyncContext *ac, struct rconn *c)
{
	if (r->user[0])
		return redisAsyncCommand(ac, rd_auth_reply, c, "AUTH %s %b", r->user, r->pass,
					 r->pass_len);
	return redisAsyncCommand(ac, rd_auth_reply, c, "AUTH %b", r->pass, r->pass_len);
}

static redisAsyncContext *rd_open(struct gw_redis *r, struct rconn *c)
{
	redisAsyncContext *ac = r->unix_sock ? redisAsyncConnectUnix(r->host)
					     : redisAsyncConnect(r->host, r->port);

	if (!ac)
		return NULL;
	if (ac->err) {
		cm_logf(CM_LOG_WARN, "redis_connect", "%s: %s", r->url, ac->errstr);
		redisAsyncFree(ac);
		return NULL;
	}
	ac->data = c;
	if (redisLibeventAttach(ac, r->base) != REDIS_OK) {
		redisAsyncFree(ac);
		return NULL;
	}
	if (r->auth && rd_send_auth(r, ac, c) != REDIS_OK) {
		redisAsyncFree(ac);
		return NULL;
	}
	return ac;
}

static void rd_retry_later(struct rconn *c)
{
	struct timeval tv = { (time_t)(c->backoff_ms / 1000),
			      (suseconds_t)(c->backoff_ms % 1000) * 1000 };

	if (c->r->freeing)
		return;
	evtimer_add(c->retry, &tv);
	c->backoff_ms = c->backoff_ms * 2 > GW_REDIS_RECONNECT_MAX_MS ? GW_REDIS_RECONNECT_MAX_MS
								    : c->backoff_ms * 2;
}

/* ---- liveness ------------------------------------------------------------------ */

static void rd_pong(redisAsyncContext *ac, void *reply, void *priv)
{
	struct gw_redis *r = priv;

	(void)ac;
	(void)reply; /* NULL when the connection went: no longer in flight either */
	if (r->stalled && reply)
		cm_logf(CM_LOG_INFO, "redis_answers", "%s: answers again", r->url);
	r->ping_sent_ns = 0;
	if (reply)
		r->stalled = 0;
}

static void rd_ping_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_redis *r = arg;
	struct timeval tv = { GW_REDIS_PING_MS / 1000, (GW_REDIS_PING_MS % 1000) * 1000 };
	int64_t now = cm_mono_ns();

	(void)fd;
	(void)what;
	if (r->ping_sent_ns && now - r->ping_sent_ns > r->timeout_ns && !r->stalled) {
		r->stalled = 1;
		cm_logf(CM_LOG_WARN, "redis_stalled", "%s: PING unanswered for %lld ms",
			r->url, (long long)((now - r->ping_sent_ns) / 1000000));
	}
	if (!r->ping_sent_ns && r->cmd.up &&
	    redisAsyncCommand(r->cmd.ac, rd_pong, r, "PING") == REDIS_OK)
		r->ping_sent_ns = now;
	if (!r->freeing)
		evtimer_add(r->ping_ev, &tv);
}

/* ---- the command connection ------------------------------------------------ */

static void rd_cmd_connected(const redisAsyncContext *ac, int status)
{
	struct rconn *c = ac->data;

	if (status != REDIS_OK) {
		cm_logf(CM_LOG_WARN, "redis_connect", "%s: %s", c->r->url, ac->errstr);
		c->ac = NULL;
		c->up = 0;
		rd_retry_later(c);
		return;
	}
	if (!c->r->auth)
		rd_cmd_up(c);
}

static void rd_cmd_disconnected(const redisAsyncContext *ac, int status)
{
	struct rconn *c = ac->data;

	c->ac = NULL;
	c->up = 0;
	if (c->r->freeing)
		return;
	cm_logf(CM_LOG_WARN, "redis_disconnected", "%s: %s", c->r->url,
		status == REDIS_OK ? "closed" : ac->errstr);
	rd_retry_later(c);
}

static void rd_cmd_connect(struct gw_redis *r)
{
	r->cmd.ac = rd_open(r, &r->cmd);
	if (!r->cmd.ac) {
		rd_retry_later(&r->cmd);
		return;
	}
	redisAsyncSetConnectCallback(r->cmd.ac, rd_cmd_connected);
	redisAsyncSetDisconnectCallback(r->cmd.ac, rd_cmd_disconnected);
}

/* ---- the subscription ---------------------------------------------------------- */

static void rd_sub_msg(redisAsyncContext *ac, void *reply, void *priv)
{
	struct gw_redis *r = priv;
	const redisReply *m = reply, *p;

	(void)ac;
	if (!m || m->type != REDIS_REPLY_ARRAY || m->elements < 3 ||
	    m->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (strcmp(m->element[0]->str, "subscribe") == 0) {
		r->sub.up = 1;
		r->sub.backoff_ms = GW_REDIS_RECONNECT_MIN_MS;
		if (r->on_sub)
			r->on_sub(r->ctx);
		return;
	}
	if (strcmp(m->element[0]->str, "message") != 0)
		return;
	p = m->element[2];
	if (p->type == REDIS_REPLY_STRING && p->len <= GW_REDIS_MESSAGE_MAX && r->on_msg)
		r->on_msg(r->ctx, p->str, p->len);
}

static void rd_sub_connected(const redisAsyncContext *ac, int status)
{
	struct rconn *c = ac->data;

	if (status != REDIS_OK) {
		c->ac = NULL;
		c->up = 0;
		rd_retry_later(c);
	}
}

static void rd_sub_disconnected(const redisAsyncContext *ac, int status)
{
	struct rconn *c = ac->data;
	struct gw_redis *r = c->r;

	(void)status;
	c->ac = NULL;
	c->up = 0;
	if (r->freeing)
		return;
	if (r->on_lost)
		r->on_lost(r->ctx);
	rd_retry_later(c);
}

static void rd_sub_connect(struct gw_redis *r)
{
	if (!r->channel[0])
		return;
	r->sub.ac = rd_open(r, &r->sub);
	if (!r->sub.ac) {
		rd_retry_later(&r->sub);
		return;
	}
	redisAsyncSetConnectCallback(r->sub.ac, rd_sub_connected);
	redisAsyncSetDisconnectCallback(r->sub.ac, rd_sub_disconnected);
	if (!r->auth)
		rd_subscribe(r);
}

static void rd_cmd_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rd_cmd_connect(arg);
}

static void rd_sub_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rd_sub_connect(arg);
}

/* ---- life cycle ------------------------------------------------------------------ */

static enum cm_status rd_parse_url(struct gw_redis *r, const char *u, char *err, size_t err_len)
{
	if (strlen(u) > GW_REDIS_URL_MAX)
		goto bad;
	snprintf(r->url, sizeof(r->url), "%s", u);
	if (strncmp(u, "unix://", 7) == 0 && u[7] == '/' && strlen(u + 7) < sizeof(r->host)) {
		r->unix_sock = 1;
		snprintf(r->host, sizeof(r->host), "%s", u + 7);
		return CM_OK;
	}
	if (strncmp(u, "redis://", 8) == 0) {
		const char *h = u + 8, *colon = strrchr(h, ':');
		size_t hl = colon ? (size_t)(colon - h) : strlen(h);

		if (hl > 0 && hl < sizeof(r->host)) {
			memcpy(r->host, h, hl);
			r->host[hl] = '\0';
			r->port = colon ? atoi(colon + 1) : 6379;
			if (r->port > 0 && r->port < 65536)
				return CM_OK;
		}
	}
bad:
	snprintf(err, err_len, "gateway.redis.url: expected unix:///path or redis://host[:port], "
		 "found \"%.100s\"", u);
	return CM_EINVAL;
}

static enum cm_status rd_load_auth(struct gw_redis *r, const struct gw_redis_opts *o, char *err,
				   size_t err_len)
{
	enum cm_status st;

	if (o->user && (!*o->user || strlen(o->user) > GW_REDIS_USER_MAX ||
			strpbrk(o->user, " \t\r\n"))) {
		snprintf(err, err_len, "gateway.redis.user: expected a name of 1 to %d bytes "
			 "without spaces, found %zu bytes", GW_REDIS_USER_MAX, strlen(o->user));
		return CM_EINVAL;
	}
	if (!o->password_file) {
		if (o->user) {
			snprintf(err, err_len, "gateway.redis.user: expected with "
				 "gateway.redis.password_file, found without");
			return CM_EINVAL;
		}
		return CM_OK;
	}
	st = cm_secret_read(o->password_file, "gateway.redis.password_file", r->pass,
			    sizeof(r->pass), &r->pass_len, err, err_len);
	if (st != CM_OK)
		return st;
	if (r->pass_len == 0) {
		snprintf(err, err_len, "gateway.redis.password_file %s: expected a password, "
			 "found an empty file", o->password_file);
		return CM_EINVAL;
	}
	if (o->user)
		snprintf(r->user, sizeof(r->user), "%s", o->user);
	r->auth = 1;
	return CM_OK;
}

enum cm_status gw_redis_new(struct event_base *base, const struct gw_redis_opts *o,
			    struct gw_redis **out, char *err, size_t err_len)
{
	struct gw_redis *r = cm_calloc(1, sizeof(*r));
	enum cm_status st;

	*out = NULL;
	if (!r)
		return CM_ENOMEM;
	r->base = base;
	r->cmd.r = r->sub.r = r;
	r->cmd.backoff_ms = r->sub.backoff_ms = GW_REDIS_RECONNECT_MIN_MS;
	r->cmd.retry = evtimer_new(base, rd_cmd_retry_cb, r);
	r->sub.retry = evtimer_new(base, rd_sub_retry_cb, r);
	r->ping_ev = evtimer_new(base, rd_ping_cb, r);
	r->timeout_ns = (o->timeout_ms > 0 ? o->timeout_ms : 1000) * 1000000LL;
	if (!r->cmd.retry || !r->sub.retry || !r->ping_ev) {
		gw_redis_free(r);
		return CM_ENOMEM;
	}
	st = rd_parse_url(r, o->url ? o->url : "", err, err_len);
	if (st == CM_OK)
		st = rd_load_auth(r, o, err, err_len);
	if (st != CM_OK) {
		gw_redis_free(r);
		return st;
	}
	rd_cmd_connect(r);
	rd_ping_cb(-1, 0, r);
	*out = r;
	return CM_OK;
}

enum cm_status gw_redis_subscribe(struct gw_redis *r, const char *channel,
				  gw_redis_msg_fn on_msg, gw_redis_sub_fn on_sub,
				  gw_redis_sub_fn on_lost, void *ctx)
{
	if (r->channel[0] || !channel || !*channel || strlen(channel) >= sizeof(r->channel))
		return CM_EINVAL;
	snprintf(r->channel, sizeof(r->channel), "%s", channel);
	r->on_msg = on_msg;
	r->on_sub = on_sub;
	r->on_lost = on_lost;
	r->ctx = ctx;
	rd_sub_connect(r);
	return CM_OK;
}

void gw_redis_free(struct gw_redis *r)
{
	if (!r)
		return;
	r->freeing = 1;
	if (r->cmd.ac)
		redisAsyncFree(r->cmd.ac);
	if (r->sub.ac)
		redisAsyncFree(r->sub.ac);
	if (r->cmd.retry)
		event_free(r->cmd.retry);
	if (r->sub.retry)
		event_free(r->sub.retry);
	if (r->ping_ev)
		event_free(r->ping_ev);
	cm_wipe(r->pass, sizeof(r->pass));
	cm_free(r);
}

redisAsyncContext *gw_redis_async(struct gw_redis *r)
{
	return r && r->cmd.up ? r->cmd.ac : NULL;
}

int gw_redis_up(const struct gw_redis *r)
{
	return r && r->cmd.up && r->sub.up && !r->stalled;
}
