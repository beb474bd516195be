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

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "gateway/gov/reader.h"
#include "gateway/gov/records.h"
#include "gateway/redis/cmd.h"
#include "gateway/redis/keys.h"

#define GW_AUTH_CACHE_SLOTS 4096
/* A key's last_used is written at most this often per gateway. */
#define GW_AUTH_TOUCH_NS (60 * 1000000000LL)
/* Lookups started over after revocations, at most (then 503). */
#define GW_AUTH_MAX_RESTARTS 3

struct gw_auth_entry {
	int used;
	int refreshing;              /* a refresh-ahead lookup is in flight */
	int64_t expires_ns;          /* cache expiry (monotonic) */
	int64_t key_expires_s;       /* the key's own expiry, 0 never */
	int64_t touched_ns;          /* last_used last written (monotonic), 0 never */
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	struct gw_auth_identity id;
};

struct gw_auth {
	struct event_base *base;
	struct gw_auth_config cfg;
	char *ns;
	const struct gw_key_pepper *pepper;
	struct gw_redis *redis;     /* borrowed: commands and the subscription */
	struct gw_auth_entry *cache;
	gw_auth_revoke_fn revoke_fn;
	void *revoke_ctx;
	/* +1 at every revocation message and subscription change: a lookup
	 * that saw it change while its replies were in flight starts over */
	uint64_t gen;
	struct gw_auth_stats stats;
	int freeing;
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
	uint64_t gen;      /* a->gen when the key record was asked for */
	int restarts;      /* lookups started over after a revocation */
	struct event *timer;
	struct gw_key_record rec;
	char klass[16];
	struct gw_auth_identity id;
};

/* ---- small helpers -------------------------------------------------- */

static void touch_cb(void *arg, const redisReply *r)
{
	(void)arg;
	if (!r || r->type == REDIS_REPLY_ERROR)
		cm_logf(CM_LOG_DEBUG, "auth_touch", "last_used not written: %s",
			r ? r->str : "no connection");
}

/* The key's last_used (docs/data-model.md), at most once a minute per key
 * from this gateway; fire and forget, off the request's path. */
static void touch_last_used(struct gw_auth *a, struct gw_auth_entry *e)
{
	char name[GW_KEY_NAME_MAX + 64];
	struct gw_redis_cmd *cmd;
	int64_t now = cm_mono_ns();

	if ((e->touched_ns && now - e->touched_ns < GW_AUTH_TOUCH_NS) || !gw_redis_async(a->redis) ||
	    gw_key_record_name(name, sizeof(name), a->ns, e->id.key_id) != CM_OK)
		return;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd)
		return;
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_TOUCH, GW_REDIS_EVALSHA, 0);
	if (gw_redis_cmd_add(cmd, "1") != CM_OK || gw_redis_cmd_add(cmd, name) != CM_OK ||
	    gw_redis_cmd_add_i64(cmd, (int64_t)time(NULL)) != CM_OK) {
		cm_free(cmd);
		return;
	}
	if (gw_redis_send_async(gw_redis_async(a->redis), cmd, touch_cb, NULL) == CM_OK)
		e->touched_ns = now;
}

static uint32_t slot_of(const char *key_id)
{
	uint32_t h = 2166136261u;

	for (const char *p = key_id; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % GW_AUTH_CACHE_SLOTS;
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

static enum cm_status auth_send_hgetall(struct gw_auth *a, const char *key_id,
					struct gw_auth_lookup *l);

/*
 * A revocation arrived while this lookup's replies were in flight: what
 * they said may predate it, so the lookup starts over from the key record
 * (Redis applied the revocation before publishing it).  0 when restarted;
 * -1 when it could not be (the caller answers 503).
 */
static int lookup_restart(struct gw_auth_lookup *l)
{
	struct gw_auth *a = l->a;

	if (++l->restarts > GW_AUTH_MAX_RESTARTS || !gw_redis_async(a->redis))
		return -1;
	a->stats.restarts++;
	memset(&l->rec, 0, sizeof(l->rec));
	l->gen = a->gen;
	if (auth_send_hgetall(a, l->parts.id, l) != CM_OK)
		return -1;
	l->outstanding++;
	return 0;
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
	if (l->gen != a->gen) {
		if (lookup_restart(l) != 0)
			lookup_finish(l, 503);
		return;
	}
	if (tr->elements == 0)
		return refuse(l, "tenant record missing");
	if (cr->elements == 0)
		return refuse(l, "client record missing");
	if (gw_gov_hash_ll(tr, "disabled", 0))
		return refuse(l, "tenant disabled");
	if (gw_gov_hash_ll(cr, "disabled", 0))
		return refuse(l, "client disabled");
	salt = gw_gov_hash_get(tr, "salt");
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
	id->weight = (uint32_t)gw_gov_hash_ll(tr, "weight", 1);
	if (id->weight < 1 || id->weight > 1000)
		id->weight = 1;
	id->queue_max = UINT32_MAX;
	s = gw_gov_hash_get(cr, "queue");
	if (!s)
		s = gw_gov_hash_get(tr, "queue");
	if (s)
		id->queue_max = (uint32_t)gw_gov_number(s, UINT32_MAX);
	tp = gw_gov_hash_ll(tr, "max_prompt_tokens", 0);
	cp = gw_gov_hash_ll(cr, "max_prompt_tokens", 0);
	id->max_prompt_tokens = tp && cp ? (tp < cp ? tp : cp) : (tp ? tp : cp);
	tp = gw_gov_hash_ll(tr, "max_output_tokens", 0);
	cp = gw_gov_hash_ll(cr, "max_output_tokens", 0);
	id->max_output_tokens = tp && cp ? (tp < cp ? tp : cp) : (tp ? tp : cp);
	id->batch = strcmp(l->klass, "batch") == 0;
	if (a->cfg.cache_ttl_ms > 0) {
		struct gw_auth_entry *e = &a->cache[slot_of(id->key_id)];
		int64_t touched = e->used && strcmp(e->id.key_id, id->key_id) == 0 ? e->touched_ns : 0;

		cm_wipe(e, sizeof(*e));
		e->used = 1;
		e->touched_ns = touched;
		e->expires_ns = cm_mono_ns() + a->cfg.cache_ttl_ms * 1000000LL;
		e->key_expires_s = l->rec.expires;
		memcpy(e->hmac_hex, l->rec.hmac_hex, sizeof(e->hmac_hex));
		e->id = *id;
		if (!l->refresh)
			touch_last_used(a, e);
	}
	lookup_finish(l, 200);
}

/* HGETALL tenant + HGETALL client + the key's revoked flag arrive in one
 * EVAL reply (one round trip). */
static void records_cb(void *priv, const redisReply *r)
{
	struct gw_auth_lookup *l = priv;

	l->outstanding--;
	if (!l->finished && !l->abandoned) {
		if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
		    r->element[2]->type != REDIS_REPLY_STRING)
			lookup_finish(l, 503);
		else if (strcmp(r->element[2]->str, "0") != 0)
			refuse(l, "key revoked");
		else
			lookup_decide(l, r->element[0], r->element[1]);
	}
	lookup_free_if_idle(l);
}

static void key_cb(void *priv, const redisReply *r)
{
	struct gw_auth_lookup *l = priv;
	struct gw_auth *a = l->a;
	enum cm_status st;
	const char *klass;
	char tk[GW_KEY_NAME_MAX + 64], ck[2 * GW_KEY_NAME_MAX + 64], kk[GW_KEY_NAME_MAX + 64];
	char full[2 * GW_KEY_NAME_MAX + 2];
	struct gw_redis_cmd *cmd;

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
	a->stats.key_records++;
	if (!gw_key_verify(a->pepper, &l->parts, l->rec.hmac_hex, strlen(l->rec.hmac_hex))) {
		refuse(l, "secret mismatch");
		goto out;
	}
	if (!gw_key_record_usable(&l->rec, (int64_t)time(NULL))) {
		refuse(l, l->rec.revoked ? "key revoked" : "key expired");
		goto out;
	}
	klass = gw_gov_hash_get(r, "class");
	snprintf(l->klass, sizeof(l->klass), "%s", klass ? klass : "interactive");
	snprintf(l->id.tenant, sizeof(l->id.tenant), "%s", l->rec.tenant);
	snprintf(l->id.client, sizeof(l->id.client), "%s", l->rec.client);
	snprintf(full, sizeof(full), "%s/%s", l->rec.tenant, l->rec.client);
	if (gw_redis_key(tk, sizeof(tk), a->ns, "tenant", l->rec.tenant, NULL) != CM_OK ||
	    gw_redis_key(ck, sizeof(ck), a->ns, "client", full, NULL) != CM_OK ||
	    !(cmd = cm_malloc(sizeof(*cmd)))) {
		lookup_finish(l, 503);
		goto out;
	}
	gw_redis_cmd_script(cmd, GW_LUA_AUTH_RECORDS, GW_REDIS_EVALSHA, 0);
	if (gw_redis_cmd_add(cmd, "3") != CM_OK || gw_redis_cmd_add(cmd, tk) != CM_OK ||
	    gw_redis_cmd_add(cmd, ck) != CM_OK || gw_key_record_name(kk, sizeof(kk), a->ns,
								 l->parts.id) != CM_OK ||
	    gw_redis_cmd_add(cmd, kk) != CM_OK) {
		cm_free(cmd);
		lookup_finish(l, 503);
		goto out;
	}
	if (gw_redis_send_async(gw_redis_async(a->redis), cmd, records_cb, l) != CM_OK) {
		lookup_finish(l, 503);
		goto out;
	}
	l->outstanding++;
out:
	lookup_free_if_idle(l);
}

/* HGETALL of a key's record; the reply goes to key_cb. */
static enum cm_status auth_send_hgetall(struct gw_auth *a, const char *key_id,
					struct gw_auth_lookup *l)
{
	char name[GW_KEY_NAME_MAX + 64];
	struct gw_redis_cmd *cmd;

	if (gw_key_record_name(name, sizeof(name), a->ns, key_id) != CM_OK)
		return CM_EINVAL;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd)
		return CM_ENOMEM;
	l->gen = a->gen;
	gw_redis_cmd_plain(cmd, "HGETALL");
	if (gw_redis_cmd_add(cmd, name) != CM_OK) {
		cm_free(cmd);
		return CM_EINVAL;
	}
	return gw_redis_send_async(gw_redis_async(a->redis), cmd, key_cb, l);
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
	struct timeval tv;

	if (!l)
		return;
	l->a = a;
	l->refresh = 1;
	l->parts = *parts;
	snprintf(l->id.key_id, sizeof(l->id.key_id), "%s", parts->id);
	if (auth_send_hgetall(a, parts->id, l) != CM_OK) {
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
	/*
	 * A cached id with the right secret answers at once.  A wrong secret
	 * does the work of an unknown id (the Redis lookup, then the refusal):
	 * how fast a refusal comes must not tell an outsider holding a key id
	 * whether that key is in use (issue 13, finding 12).
	 */
	if (e->used && strcmp(e->id.key_id, l->parts.id) == 0 &&
	    cm_mono_ns() < e->expires_ns &&
	    (e->key_expires_s == 0 || e->key_expires_s > (int64_t)time(NULL)) &&
	    gw_key_verify(a->pepper, &l->parts, e->hmac_hex, strlen(e->hmac_hex))) {
		a->stats.cache_hits++;
		l->id = e->id;
		touch_last_used(a, e);
		if (!e->refreshing && gw_redis_async(a->redis) &&
		    e->expires_ns - cm_mono_ns() < a->cfg.cache_ttl_ms * 500000LL)
			refresh_ahead(a, &l->parts, e);
		lookup_finish(l, 200);
		goto out;
	}
	a->stats.cache_misses++;
	if (!gw_redis_async(a->redis) || auth_send_hgetall(a, l->parts.id, l) != CM_OK) {
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

/* ---- the revocation subscription (gateway/redis/conn.h) ----------------- */

static void auth_sub_msg(void *ctx, const char *payload, size_t len)
{
	struct gw_auth *a = ctx;
	char msg[201], action[16], kind[16], target[2 * GW_KEY_NAME_MAX + 2];

	if (len > 200)
		return;
	memcpy(msg, payload, len);
	msg[len] = '\0';
	if (sscanf(msg, "%15s %15s %129s", action, kind, target) != 3)
		return;
	a->stats.revocations++;
	a->gen++;
	cache_drop(a, kind, target);
	if ((strcmp(action, "revoke") == 0 || strcmp(action, "disable") == 0) && a->revoke_fn)
		a->revoke_fn(a->revoke_ctx, kind, target);
}

static void auth_sub_ok(void *ctx)
{
	struct gw_auth *a = ctx;

	a->gen++;
	cache_flush(a); /* anything published while we were away */
}

static void auth_sub_lost(void *ctx)
{
	((struct gw_auth *)ctx)->gen++;
	/* Redis outage policy (docs/gateway.md): cached keys keep working until
	 * their TTL; revocations seen so far already dropped their entries, and
	 * nothing is cached again until Redis answers; re-subscribing flushes. */
	cm_logf(CM_LOG_WARN, "redis_subscription_lost", "cached keys expire "
		"within auth_cache_ttl_ms; unknown keys get 503");
}

enum cm_status gw_auth_new(struct event_base *base, const struct gw_auth_config *cfg,
			   const struct gw_key_pepper *pepper, struct gw_redis *redis,
			   struct gw_auth **out, char *err, size_t err_len)
{
	struct gw_auth *a = cm_calloc(1, sizeof(*a));
	char chan[GW_GOV_KEYNAME_MAX];

	*out = NULL;
	if (!a)
		return CM_ENOMEM;
	a->base = base;
	a->cfg = *cfg;
	a->pepper = pepper;
	a->redis = redis;
	a->ns = cm_strdup(cfg->ns ? cfg->ns : GW_REDIS_NS_DEFAULT);
	a->cache = cm_calloc(GW_AUTH_CACHE_SLOTS, sizeof(*a->cache));
	if (!a->ns || !a->cache) {
		gw_auth_free(a);
		return CM_ENOMEM;
	}
	if (gw_redis_key(chan, sizeof(chan), a->ns, GW_REDIS_CHANNEL, NULL, NULL) != CM_OK ||
	    gw_redis_subscribe(redis, chan, auth_sub_msg, auth_sub_ok, auth_sub_lost, a) != CM_OK) {
		snprintf(err, err_len, "gateway.redis.ns: cannot subscribe to the revocation channel");
		gw_auth_free(a);
		return CM_EINVAL;
	}
	*out = a;
	return CM_OK;
}

void gw_auth_free(struct gw_auth *a)
{
	if (!a)
		return;
	a->freeing = 1;
	if (a->cache) {
		cm_wipe(a->cache, GW_AUTH_CACHE_SLOTS * sizeof(*a->cache));
		cm_free(a->cache);
	}
	cm_free(a->ns);
	cm_free(a);
}

void gw_auth_set_revoke_cb(struct gw_auth *a, gw_auth_revoke_fn fn, void *ctx)
{
	a->revoke_fn = fn;
	a->revoke_ctx = ctx;
}

void gw_auth_get_stats(const struct gw_auth *a, struct gw_auth_stats *out)
{
	*out = a->stats;
}
