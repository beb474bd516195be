/*
 * audit.h - the append-only, hash-chained audit log of admin actions.
 *
 * Every admin action (sluicectl or the admin API) appends one record to
 * the Redis stream `<ns>audit` through gateway/gov/audit_append.lua, which
 * reads the chain head (`<ns>audit:head`), computes the record's SHA-256
 * in Redis and appends it atomically, so concurrent writers form a single
 * chain.  Record fields (docs/audit.md):
 *
 *   seq     1, 2, 3 ...
 *   prev    hash of the previous record (64 zeros for the first)
 *   actor   who: an OS user name, "uid:<n>" or an admin credential name
 *   action  one of the fixed list below ("tenant.create")
 *   target  what: a tenant, "tenant/client", a key id, "worker:<name>"
 *   time    Redis TIME, Unix microseconds
 *   result  "ok", "not_found", "conflict", "invalid", "error"
 *   hash    hex SHA-256 of
 *           "sluice-audit-v1\nseq=..\nprev=..\nactor=..\naction=..\n"
 *           "target=..\ntime=..\nresult=..\n"
 *
 * No field can hold request text: actor and target are restricted to
 * short names of a strict charset (checked here and again in the script),
 * action and result come from fixed lists.
 *
 * gw_audit_verify_sync() walks the whole stream and recomputes the chain;
 * it detects a removed, altered, inserted or reordered record, and a
 * truncated tail (through the head), not a chain rewritten from the
 * altered record on (see docs/audit.md).
 *
 * Thread-safe; the async call belongs to the loop driving its context.
 */
#ifndef SLUICE_GATEWAY_GOV_AUDIT_H
#define SLUICE_GATEWAY_GOV_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/crypto.h"
#include "common/status.h"
#include "gateway/gov/records.h"

#define GW_AUDIT_ACTOR_MAX 64
#define GW_AUDIT_TARGET_MAX 160
#define GW_AUDIT_ACTION_MAX 32
#define GW_AUDIT_RESULT_MAX 16
#define GW_AUDIT_ID_MAX 48 /* stream id "ms-seq" */

enum gw_audit_action {
	GW_AUDIT_TENANT_CREATE = 0,
	GW_AUDIT_TENANT_SET,
	GW_AUDIT_TENANT_DISABLE,
	GW_AUDIT_TENANT_ENABLE,
	GW_AUDIT_CLIENT_CREATE,
	GW_AUDIT_CLIENT_SET,
	GW_AUDIT_CLIENT_DISABLE,
	GW_AUDIT_CLIENT_ENABLE,
	GW_AUDIT_KEY_ISSUE,
	GW_AUDIT_KEY_REVOKE,
	GW_AUDIT_KEY_ROTATE,
	GW_AUDIT_WORKER_DRAIN,
	GW_AUDIT_EVAL_RECORD,
	GW_AUDIT_EVAL_RUN,
	GW_AUDIT_MODEL_PROMOTE,
	GW_AUDIT_MODEL_ROLLBACK,
	GW_AUDIT_ACTION_COUNT
};

enum gw_audit_result {
	GW_AUDIT_OK = 0,
	GW_AUDIT_NOT_FOUND,
	GW_AUDIT_CONFLICT,
	GW_AUDIT_INVALID,
	GW_AUDIT_ERROR,
	GW_AUDIT_FAILED,  /* an eval run that missed its gates */
	GW_AUDIT_REFUSED, /* a promotion refused (its worker's eval did not pass) */
	GW_AUDIT_RESULT_COUNT
};

/* "tenant.create" ...; NULL when out of range. */
const char *gw_audit_action_name(enum gw_audit_action a);
/* "ok", "not_found", "conflict", "invalid", "error", "failed", "refused"; NULL
 * when out of range. */
const char *gw_audit_result_name(enum gw_audit_result r);

/* [A-Za-z0-9][A-Za-z0-9_.@:-]{0,63} */
int gw_audit_actor_ok(const char *s);
/* [A-Za-z0-9_.:/@>-]{1,160} */
int gw_audit_target_ok(const char *s);

/* One record as read back from the stream. */
struct gw_audit_entry {
	char id[GW_AUDIT_ID_MAX];
	int64_t seq;
	char prev[CM_SHA256_HEX_LEN + 1];
	char actor[GW_AUDIT_ACTOR_MAX + 1];
	char action[GW_AUDIT_ACTION_MAX + 1];
	char target[GW_AUDIT_TARGET_MAX + 1];
	int64_t time_us;
	char result[GW_AUDIT_RESULT_MAX + 1];
	char hash[CM_SHA256_HEX_LEN + 1];
};

/*
 * Builds the append call (EVAL of audit_append.lua).  CM_EINVAL when the
 * actor or target fails its charset or an enum is out of range.
 */
enum cm_status gw_audit_cmd_append(struct gw_redis_cmd *cmd, const char *ns,
				   const char *actor, enum gw_audit_action action,
				   const char *target,
				   enum gw_audit_result result) CM_WUR;
/* Parses the append reply {id, seq, hash, time}; `out` may be NULL. */
enum cm_status gw_audit_parse_append(const redisReply *r,
				     struct gw_audit_entry *out) CM_WUR;

/* Appends synchronously (tools, tests); `out` may be NULL.  CM_EIO when the
 * connection fails, CM_EPROTO on an error reply. */
enum cm_status gw_audit_append_sync(redisContext *c, const char *ns,
				    const char *actor, enum gw_audit_action action,
				    const char *target, enum gw_audit_result result,
				    struct gw_audit_entry *out) CM_WUR;

/*
 * Appends on the gateway's loop.  `done` is called exactly once with CM_OK
 * (and the record), CM_EIO (connection lost / context freed) or CM_EPROTO;
 * not called when this returns an error.  One allocation per call.
 */
typedef void (*gw_audit_done_fn)(void *arg, enum cm_status st,
				 const struct gw_audit_entry *entry);
enum cm_status gw_audit_append_async(redisAsyncContext *ac, const char *ns,
				     const char *actor, enum gw_audit_action action,
				     const char *target, enum gw_audit_result result,
				     gw_audit_done_fn done, void *arg) CM_WUR;

/*
 * Parses one element of an XRANGE reply ([id, [field, value, ...]]).
 * CM_EFORMAT when a field is missing, too long or malformed.
 */
enum cm_status gw_audit_parse_entry(const redisReply *e,
				    struct gw_audit_entry *out) CM_WUR;

/* Recomputes a record's hash (hex) from its other fields. */
void gw_audit_hash(const struct gw_audit_entry *e,
		   char out[CM_SHA256_HEX_LEN + 1]);

/* Outcome of a verification walk. */
struct gw_audit_verify {
	int intact;                  /* 1 when every check passed */
	int64_t records;             /* records read */
	char bad_id[GW_AUDIT_ID_MAX];/* first bad record's stream id ("" = head) */
	int64_t bad_seq;             /* its seq field (0 when unreadable) */
	char reason[160];            /* what was expected and what was found */
	char head_hash[CM_SHA256_HEX_LEN + 1]; /* last record's hash */
};

/*
 * Walks the whole stream (XRANGE in batches of 500) and checks each
 * record: fields well-formed, seq = previous + 1, prev = previous hash,
 * hash = recomputed hash; then that the head matches the last record.
 * CM_OK when the walk completed (read out->intact), CM_EIO / CM_EPROTO
 * when Redis failed.  Never call on the gateway's loop.
 */
enum cm_status gw_audit_verify_sync(redisContext *c, const char *ns,
				    struct gw_audit_verify *out) CM_WUR;

#endif
