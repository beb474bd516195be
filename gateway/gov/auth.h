/*
 * auth.h - API key authentication against Redis, asynchronously on the
 * gateway's event loop, with a short positive cache dropped at once by the
 * revocation channel.
 *
 * Owns: two hiredis async connections attached to the loop (commands, and
 * the `<ns>revocations` subscription), the auth cache and the lookups in
 * progress.  One thread (the loop); the loop never blocks.
 *
 * A check (gw_auth_check):
 *   1. `Authorization: Bearer <key>` must be present and the key must pass
 *      gw_key_parse() (format + checksum): else 401 with no Redis I/O;
 *   2. cache hit (entry younger than cache_ttl): the presented secret is
 *      verified against the cached HMAC in constant time;
 *   3. else HGETALL `<ns>key:<id>`, then HGETALL of the tenant and client
 *      records; the HMAC is verified in constant time (an unknown id does
 *      the same work), and the key must be neither revoked nor expired, its
 *      client and tenant not disabled, the tenant salt 64 hex digits;
 *   4. a positive result is cached under the key id.
 * Every refusal is the same 401 for the client ("invalid API key"); the log
 * says why with the key id only.  Redis unavailable or slower than
 * timeout_ms: 503.
 *
 * Revocation: messages `<action> <kind> <target>` on `<ns>revocations`
 * (docs/data-model.md) drop the matching cache entries at once; revoke /
 * disable actions also call the revoke callback (the dispatcher cancels the
 * requests in flight).  When the subscription is lost the whole cache is
 * flushed, and again when it is re-established.
 */
#ifndef SLUICE_GATEWAY_GOV_AUTH_H
#define SLUICE_GATEWAY_GOV_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/redis/conn.h"

#include "common/status.h"
#include "gateway/gov/apikey.h"
#include "gateway/gov/quota.h"

struct event_base;
struct gw_auth;
struct gw_auth_lookup;

struct gw_auth_config {
	const char *ns;           /* "sluice:" */
	int64_t timeout_ms;       /* per lookup */
	int64_t cache_ttl_ms;     /* 0: no cache */
};

/* Who a valid key belongs to and what applies to it. */
struct gw_auth_identity {
	char tenant[GW_KEY_NAME_MAX];
	char client[GW_KEY_NAME_MAX];
	char key_id[GW_KEY_ID_LEN + 1];
	uint8_t salt[32];           /* the tenant's cache salt (secret) */
	uint32_t weight;            /* 1..1000 */
	uint32_t queue_max;         /* UINT32_MAX: the config default */
	struct gw_quota_limits tenant_limits;
	struct gw_quota_limits client_limits;
	int64_t max_prompt_tokens;  /* 0: none (tighter of tenant and client) */
	int64_t max_output_tokens;  /* 0: none */
	int batch;                  /* key record `class` = batch */
};

/* status: 200 (identity valid during the call), 401, or 503. */
typedef void (*gw_auth_done_fn)(void *arg, int status,
				const struct gw_auth_identity *id);
/* kind "key" (target key id), "client" (tenant/client), "tenant". */
typedef void (*gw_auth_revoke_fn)(void *ctx, const char *kind, const char *target);

/*
 * `redis` (borrowed, outlives the auth) carries the lookups and the
 * revocation subscription, which gw_auth_new takes.  Free the auth after
 * gw_redis_free: the lookups still in flight end 503 then.
 */
enum cm_status gw_auth_new(struct event_base *base, const struct gw_auth_config *cfg,
			   const struct gw_key_pepper *pepper, struct gw_redis *redis,
			   struct gw_auth **out, char *err, size_t err_len) CM_WUR;
void gw_auth_free(struct gw_auth *a);

void gw_auth_set_revoke_cb(struct gw_auth *a, gw_auth_revoke_fn fn, void *ctx);

/*
 * Checks an Authorization header value (NULL when absent).  `done` is
 * called exactly once, possibly before this returns (malformed key, cache
 * hit), unless gw_auth_abandon(*handle) is called first.  *handle is NULL
 * when done has already been called.
 */
void gw_auth_check(struct gw_auth *a, const char *authorization,
		   gw_auth_done_fn done, void *arg, struct gw_auth_lookup **handle);
/* The caller lost interest: done will not be called. */
void gw_auth_abandon(struct gw_auth_lookup *l);


struct gw_auth_stats {
	uint64_t cache_hits, cache_misses, lookups, refused, unavailable,
		revocations, flushes, restarts, key_records;
};
void gw_auth_get_stats(const struct gw_auth *a, struct gw_auth_stats *out);

#endif
