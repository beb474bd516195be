/*
 * quota.h - per-tenant and per-client quotas enforced by Redis Lua scripts.
 *
 * Limits (docs/quotas.md has the arithmetic):
 *   rpm           requests per minute, GCRA, burst = rpm;
 *   tpm           tokens per minute (prompt + completion), GCRA weighted by
 *                 the token estimate, reconciled with the real count at the
 *                 end of the request;
 *   concurrency   concurrent requests, as leases (sorted set of lease ids
 *                 scored by expiry in ms) that expire if a gateway dies;
 *   daily_tokens  tokens per UTC day;
 *   embed_rpm, embed_tpm  requests and tokens per minute of embedding
 *                 requests alone (as rpm and tpm), on top of the above:
 *                 an embedding request counts against all of them.
 * The tenant limits bind all clients of the tenant together; the client
 * limits (overrides) bind one client alone.  One admission script call
 * checks both scopes atomically against Redis's clock and consumes
 * nothing unless every limit admits the request.
 *
 * This module builds the script calls (into a gateway/redis/cmd.h
 * command, which owns copies of every argument) and parses their replies,
 * so that the same code serves the gateway (gw_quota_*_async on its event
 * loop) and synchronous tools (gw_quota_*_sync); both send with the
 * EVALSHA -> NOSCRIPT -> EVAL fallback of gateway/redis/cmd.h.
 *
 * The builders and parsers allocate nothing; the _async calls allocate one
 * command each.  Thread-safe (no shared state beyond the scripts' SHA-1s);
 * an async context belongs to the loop thread that drives it.
 */
#ifndef SLUICE_GATEWAY_GOV_QUOTA_H
#define SLUICE_GATEWAY_GOV_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/status.h"
#include "gateway/redis/cmd.h"

#define GW_QUOTA_NS_DEFAULT "sluice:"
/* Longest namespace, tenant or client name accepted in a key name. */
#define GW_QUOTA_NAME_MAX 64
#define GW_QUOTA_ARG_BYTES GW_REDIS_ARG_BYTES /* longest key */
/* Lease TTL bounds, ms. */
#define GW_QUOTA_LEASE_TTL_MIN_MS 50
#define GW_QUOTA_LEASE_TTL_MAX_MS (24LL * 3600 * 1000)
/* Largest limit or token count passed to the scripts (exact in a double). */
#define GW_QUOTA_VALUE_MAX 1000000000000000LL

enum gw_quota_limit {
	GW_QUOTA_LIMIT_NONE = 0,
	GW_QUOTA_LIMIT_RPM,
	GW_QUOTA_LIMIT_TPM,
	GW_QUOTA_LIMIT_CONCURRENCY,
	GW_QUOTA_LIMIT_DAILY_TOKENS,
	GW_QUOTA_LIMIT_EMBED_RPM,
	GW_QUOTA_LIMIT_EMBED_TPM,
};

enum gw_quota_scope {
	GW_QUOTA_SCOPE_NONE = 0,
	GW_QUOTA_SCOPE_TENANT,
	GW_QUOTA_SCOPE_CLIENT,
};

/* One scope's limits; 0 means "no limit of this kind". */
struct gw_quota_limits {
	int64_t rpm;          /* requests per minute */
	int64_t tpm;          /* tokens per minute */
	int64_t concurrency;  /* requests in flight */
	int64_t daily_tokens; /* tokens per UTC day */
	int64_t embed_rpm;    /* embedding requests per minute */
	int64_t embed_tpm;    /* embedding tokens per minute */
};

/* Who is asking, and the limits that apply (from the tenant/client hashes). */
struct gw_quota_subject {
	const char *ns;     /* key namespace, e.g. "sluice:"; NULL = default */
	const char *tenant; /* validated tenant name */
	const char *client; /* validated client name */
	struct gw_quota_limits tenant_limits;
	struct gw_quota_limits client_limits;
	int embedding;      /* an embedding request: embed_rpm/embed_tpm apply */
};

struct gw_quota_verdict {
	int allowed;               /* 1 admitted (everything consumed), 0 refused */
	enum gw_quota_scope scope; /* which scope refused (NONE when allowed) */
	enum gw_quota_limit limit; /* which limit refused (NONE when allowed) */
	int64_t retry_after_ms;    /* >= 1 when refused; -1: the request alone
				    * exceeds the limit, retrying cannot help */
	int64_t now_ms;            /* Redis's clock at the decision, Unix ms */
};

/* A ready-to-send command: argv/argvlen point into this struct or into
 * static script text. */

/* Key kinds of gw_quota_key(). */
enum gw_quota_key_kind {
	GW_QUOTA_KEY_RPM = 0,
	GW_QUOTA_KEY_TPM,
	GW_QUOTA_KEY_CONCURRENCY,
	GW_QUOTA_KEY_DAILY,
	GW_QUOTA_KEY_EMBED_RPM,
	GW_QUOTA_KEY_EMBED_TPM,
};

/*
 * Writes the Redis key of one quota counter:
 *   tenant scope (client NULL): <ns>q:{<tenant>}:<kind>
 *   client scope:               <ns>q:{<tenant>}:c:<client>:<kind>
 * with kind rpm, tpm, conc, daily, erpm or etpm.  The {tenant} hash tag keeps every key
 * of one admission in one Redis Cluster slot.  CM_EINVAL when a name is
 * empty or too long, or the result does not fit in `size`.
 */
enum cm_status gw_quota_key(char *out, size_t size, const char *ns,
			    const char *tenant, const char *client,
			    enum gw_quota_key_kind kind) CM_WUR;

/*
 * Builds the admission call for a request estimated at `tokens` tokens,
 * holding lease `lease_id` (unique per request, <= 128 bytes) for
 * `lease_ttl_ms`.  use_eval 0 builds EVALSHA, 1 builds EVAL.  CM_EINVAL on
 * a bad name, a negative or too large value or TTL.
 */
enum cm_status gw_quota_cmd_admit(struct gw_redis_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  int64_t tokens, const char *lease_id,
				  int64_t lease_ttl_ms) CM_WUR;
/*
 * Builds the end-of-request call: releases `lease_id` and corrects the
 * token counters by (actual - estimate).  Also used on cancel (actual =
 * tokens produced so far) and on failure before any token (actual 0).
 */
enum cm_status gw_quota_cmd_finish(struct gw_redis_cmd *cmd, int use_eval,
				   const struct gw_quota_subject *subj,
				   int64_t estimate, int64_t actual,
				   const char *lease_id) CM_WUR;
/* Builds the lease renewal call (long streams renew before the TTL). */
enum cm_status gw_quota_cmd_renew(struct gw_redis_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  const char *lease_id, int64_t lease_ttl_ms) CM_WUR;
/* Parses the admission reply; CM_EPROTO on any other shape or an error
 * reply (the caller logs it; the request is answered 503). */
enum cm_status gw_quota_parse_admit(const redisReply *r,
				    struct gw_quota_verdict *out) CM_WUR;
/* Parses the finish reply: how many lease entries were released. */
enum cm_status gw_quota_parse_finish(const redisReply *r,
				     int64_t *released) CM_WUR;
/* Parses the renew reply: how many lease entries were still held. */
enum cm_status gw_quota_parse_renew(const redisReply *r, int64_t *held) CM_WUR;

/*
 * Synchronous helpers for tools and tests: send EVALSHA, fall back to EVAL
 * on NOSCRIPT.  CM_EIO when the connection fails, CM_EPROTO on an
 * unexpected reply.  Never call these on the gateway's event loop.
 */
enum cm_status gw_quota_admit_sync(redisContext *c,
				   const struct gw_quota_subject *subj,
				   int64_t tokens, const char *lease_id,
				   int64_t lease_ttl_ms,
				   struct gw_quota_verdict *out) CM_WUR;
enum cm_status gw_quota_finish_sync(redisContext *c,
				    const struct gw_quota_subject *subj,
				    int64_t estimate, int64_t actual,
				    const char *lease_id, int64_t *released) CM_WUR;
enum cm_status gw_quota_renew_sync(redisContext *c,
				   const struct gw_quota_subject *subj,
				   const char *lease_id, int64_t lease_ttl_ms,
				   int64_t *held) CM_WUR;

/*
 * Asynchronous calls for the gateway's event loop (hiredis async; the
 * caller attaches the context to its loop).  Each sends EVALSHA, resends
 * as EVAL on NOSCRIPT, parses the reply and calls `done` exactly once:
 * with CM_OK and the verdict (admit) or the count (finish: leases
 * released; renew: leases held), or with CM_EIO (connection lost or
 * context freed: hiredis fails pending callbacks) / CM_EPROTO (unexpected
 * reply).  `verdict` is NULL except for admit and valid only during the
 * call.  When these functions return an error, `done` is never called.
 * One small allocation per call (the command), freed before `done` runs.
 */
typedef void (*gw_quota_done_fn)(void *arg, enum cm_status st,
				 const struct gw_quota_verdict *verdict,
				 int64_t count);

enum cm_status gw_quota_admit_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    int64_t tokens, const char *lease_id,
				    int64_t lease_ttl_ms, gw_quota_done_fn done,
				    void *arg) CM_WUR;
enum cm_status gw_quota_finish_async(redisAsyncContext *ac,
				     const struct gw_quota_subject *subj,
				     int64_t estimate, int64_t actual,
				     const char *lease_id, gw_quota_done_fn done,
				     void *arg) CM_WUR;
enum cm_status gw_quota_renew_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    const char *lease_id, int64_t lease_ttl_ms,
				    gw_quota_done_fn done, void *arg) CM_WUR;

/*
 * Reads the limits of a tenant or client from the HGETALL reply of its
 * hash (fields rpm, tpm, concurrency, daily_tokens; absent = 0, no
 * limit).  CM_EFORMAT when a present field is not a decimal in
 * [0, GW_QUOTA_VALUE_MAX], CM_EPROTO when the reply is not a flat array of
 * strings.  Other fields are ignored.
 */
enum cm_status gw_quota_limits_parse(const redisReply *hgetall,
				     struct gw_quota_limits *out) CM_WUR;

/* "rpm", "tpm", "concurrency", "daily_tokens", "none". */
const char *gw_quota_limit_name(enum gw_quota_limit l);
/* "tenant", "client", "none". */
const char *gw_quota_scope_name(enum gw_quota_scope s);

#endif
