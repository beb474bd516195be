/*
 * usage.h - usage accounting per tenant and client per UTC day.
 *
 * At the end of every request (DONE, cancel with what was produced, or an
 * error) the gateway records one gw_usage_record.  One Lua script
 * (gateway/gov/usage_record.lua) adds it to two hashes, the tenant's and the
 * client's for that day, and sets a marker for the request id in the same
 * call: a write retried with the same request id (after a timeout, or by a
 * restarted gateway replaying what it had not yet seen acknowledged) is
 * counted once.  Record before acknowledging (docs/usage.md).
 *
 * Keys (docs/data-model.md), {tenant} being the Redis Cluster hash tag:
 *   <ns>usage:{<tenant>}:<YYYY-MM-DD>             hash, kept 400 days
 *   <ns>usage:{<tenant>}:c:<client>:<YYYY-MM-DD>  hash, kept 400 days
 *   <ns>usage:{<tenant>}:done:<request id>        marker, kept 2 days
 * Hash fields: the names of enum gw_usage_field (gw_usage_field_name).
 *
 * The day is the UTC day of rec->end_unix_s (the gateway's clock when the
 * request ended), computed here, so a retry counts to the same day as the
 * first attempt.
 *
 * Builders and parsers allocate nothing; async calls allocate one command.
 * Thread-safe; an async context belongs to the loop that drives it.
 */
#ifndef SLUICE_GATEWAY_GOV_USAGE_H
#define SLUICE_GATEWAY_GOV_USAGE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/status.h"
#include "gateway/redis/cmd.h"

#define GW_USAGE_REQUEST_ID_MAX 64
#define GW_USAGE_MARKER_TTL_S (2 * 86400)
#define GW_USAGE_HASH_TTL_S (400LL * 86400)
#define GW_USAGE_DAY_LEN 10 /* "YYYY-MM-DD" */
#define GW_USAGE_KEY_MAX 256
/* Largest token count accepted in one record. */
#define GW_USAGE_TOKENS_MAX 100000000LL

/* How a request ended: OK, or the class of its error. */
enum gw_usage_outcome {
	GW_USAGE_OK = 0,
	GW_USAGE_AUTH,        /* 401/403 after the key was attributed */
	GW_USAGE_QUOTA,       /* 429 over a quota or a full queue */
	GW_USAGE_BAD_REQUEST, /* other 4xx */
	GW_USAGE_OVERLOADED,  /* 503: no capacity, Redis down */
	GW_USAGE_WORKER,      /* 502/5xx: the worker failed */
	GW_USAGE_INTERNAL,    /* 500: a gateway bug */
	GW_USAGE_CANCELLED,   /* client went away, or key revoked mid-stream */
	GW_USAGE_OUTCOME_COUNT
};

/* The counters of a usage hash, in this order. */
enum gw_usage_field {
	GW_USAGE_F_REQUESTS = 0,
	GW_USAGE_F_PROMPT_TOKENS,
	GW_USAGE_F_CACHED_PROMPT_TOKENS,
	GW_USAGE_F_COMPLETION_TOKENS,
	GW_USAGE_F_ERRORS_AUTH,
	GW_USAGE_F_ERRORS_QUOTA,
	GW_USAGE_F_ERRORS_BAD_REQUEST,
	GW_USAGE_F_ERRORS_OVERLOADED,
	GW_USAGE_F_ERRORS_WORKER,
	GW_USAGE_F_ERRORS_INTERNAL,
	GW_USAGE_F_ERRORS_CANCELLED,
	GW_USAGE_F_COUNT
};

struct gw_usage_record {
	const char *ns;         /* key namespace; NULL = "sluice:" */
	const char *tenant;     /* validated names */
	const char *client;
	const char *request_id; /* [A-Za-z0-9_.:-]{1,64}, unique across
				 * gateways and restarts, same on a retry */
	int64_t end_unix_s;     /* when the request ended (picks the day) */
	int64_t prompt_tokens;
	int64_t cached_prompt_tokens; /* <= prompt_tokens */
	int64_t completion_tokens;
	enum gw_usage_outcome outcome;
};

struct gw_usage_counts {
	int64_t v[GW_USAGE_F_COUNT];
};

/* "requests", "prompt_tokens", ..., "errors_cancelled"; NULL if out of range. */
const char *gw_usage_field_name(enum gw_usage_field f);
/* "ok", "auth", "quota", "bad_request", ...; NULL if out of range. */
const char *gw_usage_outcome_name(enum gw_usage_outcome o);

/* The outcome a request's log outcome ("ok", "cancelled", "worker_error",
 * ...) and HTTP status count under. */
enum gw_usage_outcome gw_usage_outcome_of(const char *outcome, int status);

/* "YYYY-MM-DD" of a Unix time (UTC).  CM_EINVAL when negative. */
enum cm_status gw_usage_day(int64_t unix_s, char out[GW_USAGE_DAY_LEN + 1]) CM_WUR;
/* Parses "YYYY-MM-DD" (a real calendar date) into the Unix time of its
 * midnight UTC; CM_EFORMAT otherwise. */
enum cm_status gw_usage_day_parse(const char *day, int64_t *unix_s) CM_WUR;

/* The day hash of a tenant (client NULL) or client; CM_EINVAL on a bad name. */
enum cm_status gw_usage_key(char out[GW_USAGE_KEY_MAX], const char *ns,
			    const char *tenant, const char *client,
			    const char *day) CM_WUR;


/*
 * Builds the record call.  CM_EINVAL on a bad name or request id, a
 * negative or too large count, cached > prompt, an unknown outcome.
 */
enum cm_status gw_usage_cmd_record(struct gw_redis_cmd *cmd, int use_eval,
				   const struct gw_usage_record *rec) CM_WUR;
/* Reply: *counted = 1 (added) or 0 (this request id was already counted). */
enum cm_status gw_usage_parse_record(const redisReply *r, int *counted) CM_WUR;

/* Adds the fields of a HGETALL reply to `acc` (unknown fields ignored);
 * CM_EPROTO on a bad shape, CM_EFORMAT on a non-number. */
enum cm_status gw_usage_counts_add(struct gw_usage_counts *acc,
				   const redisReply *hgetall) CM_WUR;

/* Synchronous (tools, tests; never on the gateway loop). */
enum cm_status gw_usage_record_sync(redisContext *c,
				    const struct gw_usage_record *rec,
				    int *counted) CM_WUR;
/* Reads one day hash (tenant when client is NULL) into `out` (zeroed first). */
enum cm_status gw_usage_read_sync(redisContext *c, const char *ns,
				  const char *tenant, const char *client,
				  const char *day, struct gw_usage_counts *out) CM_WUR;

/*
 * On the gateway's loop: sends EVALSHA (EVAL after NOSCRIPT) and calls
 * `done` exactly once with CM_OK and `counted`, or CM_EIO / CM_EPROTO.
 * Not called when this returns an error.  Acknowledge (or forget the
 * record) only after `done` reported CM_OK; on an error keep the record
 * and retry it with the same request id.
 */
typedef void (*gw_usage_done_fn)(void *arg, enum cm_status st, int counted);
enum cm_status gw_usage_record_async(redisAsyncContext *ac,
				     const struct gw_usage_record *rec,
				     gw_usage_done_fn done, void *arg) CM_WUR;

#endif
