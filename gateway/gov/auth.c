/*
 * auth.c - API key checks on the loop with hiredis async, the auth cache
 * and the revocation subscription (see auth.h).
 */
#include "gateway/gov/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"

#define GW_AUTH_CACHE_SLOTS 4096
#define GW_AUTH_RECONNECT_MIN_MS 100
#define GW_AUTH_RECONNECT_MAX_MS 5000
#define GW_AUTH_CHANNEL "revocations"

struct gw_auth_entry {
	int used;
	int refreshing;              /* a refresh-ahead lookup is in flight */
	int64_t expires_ns;          /* cache expiry (monotonic) */
	int64_t key_expires_s;       /* the key's own expiry, 0 never */
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	struct gw_auth_identity id;
};

struct gw_auth {
	struct event_base *base;
	struct gw_auth_config cfg;
	char *url, *ns;
	const struct gw_key_pepper *pepper;
	redisAsyncContext *cmd, *sub;
	int cmd_up, sub_up;
	struct event *cmd_retry, *sub_retry;
	int64_t cmd_backoff, sub_backoff;
	struct gw_auth_entry *cache;
	gw_auth_revoke_fn revoke_fn;
	void *revoke_ctx;
	struct gw_auth_stats stats;
	int freeing;
	char host[256];
	int port;
	int unix_sock;
};

struct gw_auth_lookup {
	struct gw_auth *a;
	struct gw_key_parts parts;
	gw_auth_done_fn done;
	void *arg;
	int abandoned;     /* done must not be called */
	int refresh;       /* refresh-ahead of a cache entry: no caller */
	int finished;      /* done was called */
	int outstanding;   /* Redis replies still to come */
	struct event *timer;
	struct gw_key_record rec;
	char klass[16];
	struct gw_auth_identity id;
};

static void cmd_connect(struct gw_auth *a);
static void sub_connect(struct gw_auth *a);

/* ---- small helpers -------------------------------------------------- */

static uint32_t slot_of(const char *key_id)
{
	uint32_t h = 2166136261u;

	for (const char *p = key_id; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % GW_AUTH_CACHE_SLOTS;
}

static const char *hash_get(const redisReply *r, const char *field)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return NULL;
	for (size_t i = 0; i + 1 < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];

		if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
		    strcmp(k->str, field) == 0)
			return v->str;
	}
	return NULL;
}

static int64_t num_or(const char *s, int64_t def)
{
	char *end;
	long long v;

	if (!s || !*s)
		return def;
	v = strtoll(s, &end, 10);
	return *end ? def : v;
}

static void cache_flush(struct gw_auth *a)
{
	for (size_t i = 0; i < GW_AUTH_CACHE_SLOTS; i++) {
		cm_wipe(&a->cache[i], sizeof(a->cache[i]));
	}
	a->stats.flushes++;
}

static void cache_drop(struct gw_auth *a, const char *kind, const char *target)
{
	for (size_t i = 0; i < GW_AUTH_CACHE_SLOTS; i++) {
		struct gw_auth_entry *e = &a->cache[i];
		char tc[2 * GW_KEY_NAME_MAX + 2];
		int hit;

		if (!e->used)
			continue;
		snprintf(tc, sizeof(tc), "%s/%s", e->id.tenant, e->id.client);
		hit = (strcmp(kind, "key") == 0 && strcmp(e->id.key_id, target) == 0) ||
		      (strcmp(kind, "client") == 0 && strcmp(tc, target) == 0) ||
		      (strcmp(kind, "tenant") == 0 && strcmp(e->id.tenant, target) == 0);
		if (hit)
			cm_wipe(e, sizeof(*e));
	}
}

static struct timeval ms_tv(int64_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	return tv;
}

/* ---- lookups ------------------------------------------------------- */

static void lookup_free_if_idle(struct gw_auth_lookup *l)
{
	if (l->outstanding > 0 || !(l->finished || l->abandoned))
		return;
	if (l->timer)
		event_free(l->timer);
	gw_key_wipe(&l->parts);
	cm_wipe(&l->id, sizeof(l->id));
	cm_free(l);
}

static void refresh_finished(struct gw_auth *a, const char *key_id, int status)
{
	struct gw_auth_entry *e = &a->cache[slot_of(key_id)];

	if (!e->used || strcmp(e->id.key_id, key_id) != 0)
		return;
	e->refreshing = 0;
	if (status == 401)
		cm_wipe(e, sizeof(*e)); /* revoked, disabled, gone: drop it now */
}

static void lookup_finish(struct gw_auth_lookup *l, int status)
{
	if (l->finished)
		return;
	l->finished = 1;
	if (l->refresh) {
		if (l->timer)
			evtimer_del(l->timer);
		gw_key_wipe(&l->parts);
		refresh_finished(l->a, l->id.key_id, status);
		return;
	}
	if (l->timer)
		evtimer_del(l->timer);
	gw_key_wipe(&l->parts);
	if (status == 401)
		l->a->stats.refused++;
	else if (status == 503)
		l->a->stats.unavailable++;
	if (!l->abandoned)
		l->done(l->arg, status, status == 200 ? &l->id : NULL);
}

static void refuse(struct gw_auth_lookup *l, const char *why)
{
	cm_logf(CM_LOG_INFO, "auth_refused", "key %s: %s", l->id.key_id[0] ? l->id.key_id : "-", why);
	lookup_finish(l, 401);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_auth_lookup *l = arg;

	(void)fd;
	(void)what;
	cm_logf(CM_LOG_WARN, "auth_timeout", "key %s: Redis did not answer in %lld ms",
		l->id.key_id, (long long)l->a->cfg.timeout_ms);
	lookup_finish(l, 503);
	lookup_free_if_idle(l);
}

/* Tenant and client records are both in: decide. */
static void lookup_decide(struct gw_auth_lookup *l, const redisReply *tr,
			  const redisReply *cr)
{
	struct gw_auth *a = l->a;
	struct gw_auth_identity *id = &l->id;
	const char *salt, *s;
	int64_t tp, cp;

	if (!tr || tr->type != REDIS_REPLY_ARRAY || !cr || cr->type != REDIS_REPLY_ARRAY) {
		lookup_finish(l, 503);
		return;
	}
	if (tr->elements == 0)
		return refuse(l, "tenant record missing");
	if (cr->elements == 0)
		return refuse(l, "client record missing");
	if (num_or(hash_get(tr, "disabled"), 0))
		return refuse(l, "tenant disabled");
	if (num_or(hash_get(cr, "disabled"), 0))
		return refuse(l, "client disabled");
	salt = hash_get(tr, "salt");
	if (!salt || strlen(salt) != 64 || cm_hex_decode(salt, 64, id->salt, 32) != CM_OK) {
		cm_logf(CM_LOG_ERROR, "auth_tenant", "tenant %s: salt missing or malformed",
			id->tenant);
		lookup_finish(l, 503);
		return;
	}
	if (gw_quota_limits_parse(tr, &id->tenant_limits) != CM_OK ||
	    gw_quota_limits_parse(cr, &id->client_limits) != CM_OK) {
		cm_logf(CM_LOG_ERROR, "auth_tenant", "tenant %s: malformed quota field", id->tenant);
		lookup_finish(l, 503);
		return;
	}
	id->weight = (uint32_t)num_or(hash_get(tr, "weight"), 1);
	if (id->weight < 1 || id->weight > 1000)
		id->weight = 1;
	id->queue_max = UINT32_MAX;
	s = hash_get(cr, "queue");
	if (!s)
		s = hash_get(tr, "queue");
	if (s)
		id->queue_max = (uint32_t)num_or(s, UINT32_MAX);
	tp = num_or(hash_get(tr, "max_prompt_tokens"), 0);
	cp = num_or(hash_get(cr, "max_prompt_tokens"), 0);
	id->max_prompt_tokens = tp && cp ? (tp < cp ? tp : cp) : (tp ? tp : cp);
	tp = num_or(hash_get(tr, "max_output_tokens"), 0);
	cp = num_or(hash_get(cr, "max_output_tokens"), 0);
	id->max_output_tokens = tp && cp ? (tp < cp ? tp : cp) : (tp ? tp : cp);
	id->batch = strcmp(l->klass, "batch") == 0;
	if (a->cfg.cache_ttl_ms > 0) {
		struct gw_auth_entry *e = &a->cache[slot_of(id->key_id)];

		cm_wipe(e, sizeof(*e));
		e->used = 1;
		e->expires_ns = cm_mono_ns() + a->cfg.cache_ttl_ms * 1000000LL;
		e->key_expires_s = l->rec.expires;
		memcpy(e->hmac_hex, l->rec.hmac_hex, sizeof(e->hmac_hex));
		e->id = *id;
	}
	lookup_finish(l, 200);
}

/* HGETALL tenant + HGETALL client arrive in one EVAL reply (one round trip). */
static void records_cb(redisAsyncContext *c, void *reply, void *priv)
{
	struct gw_auth_lookup *l = priv;
	redisReply *r = reply;

	(void)c;
	l->outstanding--;
	if (!l->finished && !l->abandoned) {
		if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
			lookup_finish(l, 503);
		else
			lookup_decide(l, r->element[0], r->element[1]);
	}
	lookup_free_if_idle(l);
}

static const char records_lua[] =
	"return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}";

static void key_cb(redisAsyncContext *c, void *reply, void *priv)
{
	struct gw_auth_lookup *l = priv;
	redisReply *r = reply;
	struct gw_auth *a = l->a;
	enum cm_status st;
	const char *klass;
	char tk[GW_KEY_NAME_MAX + 64], ck[2 * GW_KEY_NAME_MAX + 64];

	(void)c;
	l->outstanding--;
	if (l->finished || l->abandoned)
		goto out;
	if (!r || r->type == REDIS_REPLY_ERROR) {
		lookup_finish(l, 503);
		goto out;
	}
	st = gw_key_record_parse(r, &l->rec);
	if (st == CM_ENOTFOUND) {
		(void)gw_key_verify(a->pepper, &l->parts, "", 0);
		refuse(l, "unknown key id");
		goto out;
	}
	if (st != CM_OK) {
		(void)gw_key_verify(a->pepper, &l->parts, "", 0);
		refuse(l, "malformed key record");
		goto out;
	}
	if (!gw_key_verify(a->pepper, &l->parts, l->rec.hmac_hex, strlen(l->rec.hmac_hex))) {
		refuse(l, "secret mismatch");
		goto out;
	}
	if (!gw_key_record_usable(&l->rec, (int64_t)time(NULL))) {
		refuse(l, l->rec.revoked ? "key revoked" : "key expired");
		goto out;
	}
	klass = hash_get(r, "class");
	snprintf(l->klass, sizeof(l->klass), "%s", klass ? klass : "interactive");
	snprintf(l->id.tenant, sizeof(l->id.tenant), "%s", l->rec.tenant);
	snprintf(l->id.client, sizeof(l->id.client), "%s", l->rec.client);
	snprintf(tk, sizeof(tk), "%stenant:%s", a->ns, l->rec.tenant);
	snprintf(ck, sizeof(ck), "%sclient:%s/%s", a->ns, l->rec.tenant, l->rec.client);
	if (!a->cmd || redisAsyncCommand(a->cmd, records_cb, l, "EVAL %s 2 %s %s",
					 records_lua, tk, ck) != REDIS_OK) {
		lookup_finish(l, 503);
		goto out;
	}
	l->outstanding++;
out:
	lookup_free_if_idle(l);
}

/*
 * An entry past half its TTL that is still being used is re-read in the
 * background, so that active keys never pay a Redis round trip; the entry
 * is still only served while younger than the TTL, and a refresh that
 * finds the key refused drops it at once.
 */
static void refresh_ahead(struct gw_auth *a, const struct gw_key_parts *parts,
			  struct gw_auth_entry *e)
{
	struct gw_auth_lookup *l = cm_calloc(1, sizeof(*l));
	char name[GW_KEY_NAME_MAX + 64];
	struct timeval tv;

	if (!l)
		return;
	l->a = a;
	l->refresh = 1;
	l->parts = *parts;
	snprintf(l->id.key_id, sizeof(l->id.key_id), "%s", parts->id);
	if (gw_key_record_name(name, sizeof(name), a->ns, parts->id) != CM_OK ||
	    redisAsyncCommand(a->cmd, key_cb, l, "HGETALL %s", name) != REDIS_OK) {
		gw_key_wipe(&l->parts);
		cm_free(l);
		return;
	}
	e->refreshing = 1;
	l->outstanding++;
	l->timer = evtimer_new(a->base, timeout_cb, l);
	if (l->timer) {
		tv = ms_tv(a->cfg.timeout_ms);
		evtimer_add(l->timer, &tv);
	}
}

void gw_auth_check(struct gw_auth *a, const char *authz, gw_auth_done_fn done,
		   void *arg, struct gw_auth_lookup **handle)
{
	struct gw_auth_lookup *l;
	const char *key;
	struct gw_auth_entry *e;
	char name[GW_KEY_NAME_MAX + 64];
	struct timeval tv;

	*handle = NULL;
	l = cm_calloc(1, sizeof(*l));
	if (!l) {
		done(arg, 503, NULL);
		return;
	}
	l->a = a;
	l->done = done;
	l->arg = arg;
	if (!authz || strncasecmp(authz, "Bearer ", 7) != 0) {
		lookup_finish(l, 401);
		goto out;
	}
	key = authz + 7;
	while (*key == ' ')
		key++;
	if (gw_key_parse(key, strlen(key), &l->parts) != CM_OK) {
		lookup_finish(l, 401);
		goto out;
	}
	snprintf(l->id.key_id, sizeof(l->id.key_id), "%s", l->parts.id);
	a->stats.lookups++;
	e = &a->cache[slot_of(l->parts.id)];
	if (e->used && strcmp(e->id.key_id, l->parts.id) == 0 &&
	    cm_mono_ns() < e->expires_ns &&
	    (e->key_expires_s == 0 || e->key_expires_s > (int64_t)time(NULL))) {
		a->stats.cache_hits++;
		if (gw_key_verify(a->pepper, &l->parts, e->hmac_hex, strlen(e->hmac_hex))) {
			l->id = e->id;
			if (!e->refreshing && a->cmd_up &&
			    e->expires_ns - cm_mono_ns() < a->cfg.cache_ttl_ms * 500000LL)
				refresh_ahead(a, &l->parts, e);
			lookup_finish(l, 200);
		} else {
			refuse(l, "secret mismatch");
		}
		goto out;
	}
	a->stats.cache_misses++;
	if (!a->cmd || !a->cmd_up) {
		lookup_finish(l, 503);
		goto out;
	}
	if (gw_key_record_name(name, sizeof(name), a->ns, l->parts.id) != CM_OK ||
	    redisAsyncCommand(a->cmd, key_cb, l, "HGETALL %s", name) != REDIS_OK) {
		lookup_finish(l, 503);
		goto out;
	}
	l->outstanding++;
	l->timer = evtimer_new(a->base, timeout_cb, l);
	if (l->timer) {
		tv = ms_tv(a->cfg.timeout_ms);
		evtimer_add(l->timer, &tv);
	}
	*handle = l;
	return;
out:
	lookup_free_if_idle(l);
}

void gw_auth_abandon(struct gw_auth_lookup *l)
{
	if (!l)
		return;
	l->abandoned = 1;
	if (l->timer)
		evtimer_del(l->timer);
	lookup_free_if_idle(l);
}

/* ---- connections --------------------------------------------------- */

static redisAsyncContext *open_ctx(struct gw_auth *a)
{
	redisAsyncContext *c = a->unix_sock ? redisAsyncConnectUnix(a->host)
		: redisAsyncConnect(a->host, a->port);

	if (!c)
		return NULL;
	if (c->err) {
		cm_logf(CM_LOG_WARN, "redis_connect", "%s: %s", a->url, c->errstr);
		redisAsyncFree(c);
		return NULL;
	}
	c->data = a;
	if (redisLibeventAttach(c, a->base) != REDIS_OK) {
		redisAsyncFree(c);
		return NULL;
	}
	return c;
}

static void retry_later(struct gw_auth *a, struct event *ev, int64_t *backoff)
{
	struct timeval tv = ms_tv(*backoff);

	if (a->freeing)
		return;
	evtimer_add(ev, &tv);
	*backoff = *backoff * 2 > GW_AUTH_RECONNECT_MAX_MS ? GW_AUTH_RECONNECT_MAX_MS
							     : *backoff * 2;
}

static void cmd_connected(const redisAsyncContext *c, int status)
{
	struct gw_auth *a = c->data;

	if (status != REDIS_OK) {
		cm_logf(CM_LOG_WARN, "redis_connect", "%s: %s", a->url, c->errstr);
		a->cmd = NULL;
		a->cmd_up = 0;
		retry_later(a, a->cmd_retry, &a->cmd_backoff);
		return;
	}
	a->cmd_up = 1;
	a->cmd_backoff = GW_AUTH_RECONNECT_MIN_MS;
	cm_logf(CM_LOG_INFO, "redis_connected", "%s", a->url);
}

static void cmd_disconnected(const redisAsyncContext *c, int status)
{
	struct gw_auth *a = c->data;

	a->cmd = NULL;
	a->cmd_up = 0;
	if (a->freeing)
		return;
	cm_logf(CM_LOG_WARN, "redis_disconnected", "%s: %s", a->url,
		status == REDIS_OK ? "closed" : c->errstr);
	retry_later(a, a->cmd_retry, &a->cmd_backoff);
}

static void cmd_connect(struct gw_auth *a)
{
	a->cmd = open_ctx(a);
	if (!a->cmd) {
		retry_later(a, a->cmd_retry, &a->cmd_backoff);
		return;
	}
	redisAsyncSetConnectCallback(a->cmd, cmd_connected);
	redisAsyncSetDisconnectCallback(a->cmd, cmd_disconnected);
}

static void sub_msg(redisAsyncContext *c, void *reply, void *priv)
{
	struct gw_auth *a = priv;
	redisReply *r = reply;
	char action[16], kind[16], target[2 * GW_KEY_NAME_MAX + 2];
	const redisReply *p;

	(void)c;
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING)
		return;
	if (strcmp(r->element[0]->str, "subscribe") == 0) {
		a->sub_up = 1;
		a->sub_backoff = GW_AUTH_RECONNECT_MIN_MS;
		cache_flush(a); /* anything published while we were away */
		return;
	}
	if (strcmp(r->element[0]->str, "message") != 0)
		return;
	p = r->element[2];
	if (p->type != REDIS_REPLY_STRING || p->len > 200 ||
	    sscanf(p->str, "%15s %15s %129s", action, kind, target) != 3)
		return;
	a->stats.revocations++;
	cache_drop(a, kind, target);
	if ((strcmp(action, "revoke") == 0 || strcmp(action, "disable") == 0) && a->revoke_fn)
		a->revoke_fn(a->revoke_ctx, kind, target);
}

static void sub_connected(const redisAsyncContext *c, int status)
{
	struct gw_auth *a = c->data;

	if (status != REDIS_OK) {
		a->sub = NULL;
		a->sub_up = 0;
		retry_later(a, a->sub_retry, &a->sub_backoff);
	}
}

static void sub_disconnected(const redisAsyncContext *c, int status)
{
	struct gw_auth *a = c->data;

	(void)status;
	a->sub = NULL;
	a->sub_up = 0;
	if (a->freeing)
		return;
	/* Redis outage policy (docs/gateway.md): cached keys keep working until
	 * their TTL; revocations seen so far already dropped their entries, and
	 * nothing is cached again until Redis answers; re-subscribing flushes. */
	cm_logf(CM_LOG_WARN, "redis_subscription_lost", "%s: cached keys expire "
		"within auth_cache_ttl_ms; unknown keys get 503", a->url);
	retry_later(a, a->sub_retry, &a->sub_backoff);
}

static void sub_connect(struct gw_auth *a)
{
	char chan[96];

	a->sub = open_ctx(a);
	if (!a->sub) {
		retry_later(a, a->sub_retry, &a->sub_backoff);
		return;
	}
	redisAsyncSetConnectCallback(a->sub, sub_connected);
	redisAsyncSetDisconnectCallback(a->sub, sub_disconnected);
	snprintf(chan, sizeof(chan), "%s%s", a->ns, GW_AUTH_CHANNEL);
	if (redisAsyncCommand(a->sub, sub_msg, a, "SUBSCRIBE %s", chan) != REDIS_OK)
		cm_logf(CM_LOG_WARN, "redis_subscribe", "%s: SUBSCRIBE not sent", a->url);
}

static void cmd_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	cmd_connect(arg);
}

static void sub_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sub_connect(arg);
}

static enum cm_status parse_url(struct gw_auth *a, char *err, size_t err_len)
{
	const char *u = a->url;

	if (strncmp(u, "unix://", 7) == 0 && u[7] == '/' && strlen(u + 7) < sizeof(a->host)) {
		a->unix_sock = 1;
		snprintf(a->host, sizeof(a->host), "%s", u + 7);
		return CM_OK;
	}
	if (strncmp(u, "redis://", 8) == 0) {
		const char *h = u + 8, *colon = strrchr(h, ':');
		size_t hl = colon ? (size_t)(colon - h) : strlen(h);

		if (hl > 0 && hl < sizeof(a->host)) {
			memcpy(a->host, h, hl);
			a->host[hl] = '\0';
			a->port = colon ? atoi(colon + 1) : 6379;
			if (a->port > 0 && a->port < 65536)
				return CM_OK;
		}
	}
	snprintf(err, err_len, "gateway.redis.url: expected unix:///path or redis://host[:port], "
		 "found \"%.100s\"", u);
	return CM_EINVAL;
}

enum cm_status gw_auth_new(struct event_base *base, const struct gw_auth_config *cfg,
			   const struct gw_key_pepper *pepper, struct gw_auth **out,
			   char *err, size_t err_len)
{
	struct gw_auth *a = cm_calloc(1, sizeof(*a));
	enum cm_status st;

	*out = NULL;
	if (!a)
		return CM_ENOMEM;
	a->base = base;
	a->cfg = *cfg;
	a->pepper = pepper;
	a->url = cm_strdup(cfg->redis_url);
	a->ns = cm_strdup(cfg->ns ? cfg->ns : "sluice:");
	a->cache = cm_calloc(GW_AUTH_CACHE_SLOTS, sizeof(*a->cache));
	a->cmd_retry = evtimer_new(base, cmd_retry_cb, a);
	a->sub_retry = evtimer_new(base, sub_retry_cb, a);
	a->cmd_backoff = a->sub_backoff = GW_AUTH_RECONNECT_MIN_MS;
	if (!a->url || !a->ns || !a->cache || !a->cmd_retry || !a->sub_retry) {
		gw_auth_free(a);
		return CM_ENOMEM;
	}
	st = parse_url(a, err, err_len);
	if (st != CM_OK) {
		gw_auth_free(a);
		return st;
	}
	cmd_connect(a);
	sub_connect(a);
	*out = a;
	return CM_OK;
}

void gw_auth_free(struct gw_auth *a)
{
	if (!a)
		return;
	a->freeing = 1;
	if (a->cmd)
		redisAsyncFree(a->cmd);
	if (a->sub)
		redisAsyncFree(a->sub);
	if (a->cmd_retry)
		event_free(a->cmd_retry);
	if (a->sub_retry)
		event_free(a->sub_retry);
	if (a->cache) {
		cm_wipe(a->cache, GW_AUTH_CACHE_SLOTS * sizeof(*a->cache));
		cm_free(a->cache);
	}
	cm_free(a->url);
	cm_free(a->ns);
	cm_free(a);
}

void gw_auth_set_revoke_cb(struct gw_auth *a, gw_auth_revoke_fn fn, void *ctx)
{
	a->revoke_fn = fn;
	a->revoke_ctx = ctx;
}

redisAsyncContext *gw_auth_redis(struct gw_auth *a)
{
	return a->cmd_up ? a->cmd : NULL;
}

int gw_auth_redis_ok(const struct gw_auth *a)
{
	return a->cmd_up && a->sub_up;
}

void gw_auth_get_stats(const struct gw_auth *a, struct gw_auth_stats *out)
{
	*out = a->stats;
}
