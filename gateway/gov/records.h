/*
 * records.h - the governance writes shared by sluicectl and the admin API:
 * names, quota fields and their bounds, and the Lua scripts that create,
 * update, disable, issue, revoke and rotate (docs/data-model.md).
 *
 * Both front ends (tools/ctl_*.c, synchronous; gateway/admin/admin.c, hiredis
 * async on the gateway's loop) build their commands here, so they write
 * identical Redis state and publish identical messages on the revocation
 * channel.  Each builder fills a struct gw_redis_cmd (argv with its own
 * storage, EVAL + script text: admin writes are rare, so no EVALSHA) and
 * each parser reads the script's reply.
 *
 * Owns nothing; allocates nothing; thread-safe.
 */
#ifndef SLUICE_GATEWAY_GOV_RECORDS_H
#define SLUICE_GATEWAY_GOV_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common/status.h"
#include "gateway/redis/cmd.h"

#define GW_GOV_NAME_MAX 63      /* tenant and client names, without NUL */
#define GW_GOV_NS_MAX 32        /* key namespace */
#define GW_GOV_KEYNAME_MAX 256  /* any key or channel name, with NUL */
#define GW_GOV_NS_DEFAULT "sluice:"
/* Longest key lifetime and rotation overlap: 10 years, in seconds. */
#define GW_GOV_DURATION_MAX_S (3650LL * 86400)

/* The quota and weight fields a tenant or client hash may carry. */
enum gw_gov_field {
	GW_GOV_F_WEIGHT = 0,
	GW_GOV_F_RPM,
	GW_GOV_F_TPM,
	GW_GOV_F_CONCURRENCY,
	GW_GOV_F_QUEUE,
	GW_GOV_F_DAILY_TOKENS,
	GW_GOV_F_MAX_PROMPT,
	GW_GOV_F_MAX_OUTPUT,
	GW_GOV_F_EMBED_RPM,
	GW_GOV_F_EMBED_TPM,
	GW_GOV_F_COUNT
};

struct gw_gov_field_def {
	const char *option; /* sluicectl option, "--rpm" */
	const char *field;  /* Redis hash field and JSON member, "rpm" */
	const char *column; /* table heading, "RPM" */
	long long min, max; /* accepted range, inclusive */
};

extern const struct gw_gov_field_def gw_gov_fields[GW_GOV_F_COUNT];

/* Quota values to write: set[i] says val[i] is given, clear[i] removes it. */
struct gw_gov_quotas {
	int set[GW_GOV_F_COUNT];
	long long val[GW_GOV_F_COUNT];
	int clear[GW_GOV_F_COUNT];
};

/* A ready-to-send command (argv points into the struct or static text). */

/* Outcome of a governance script. */
enum gw_gov_result {
	GW_GOV_DONE = 0,        /* written (and announced) */
	GW_GOV_NOTFOUND,        /* the record does not exist */
	GW_GOV_PARENT_MISSING,  /* the tenant (client create) or client (key issue) is missing */
	GW_GOV_EXISTS,          /* create of an existing name / key id */
	GW_GOV_ALREADY,         /* revoke of a key that already was (re-announced) */
	GW_GOV_REVOKED,         /* rotate of a revoked key (nothing written) */
};

/* 1 when `s` matches [a-z0-9][a-z0-9_.-]{0,62}, else 0. */
int gw_gov_name_ok(const char *s);
/* 1 when `ns` is 1..32 characters of [a-z0-9_.:-]. */
int gw_gov_ns_ok(const char *ns);
/* Index of a field by its hash name ("rpm"), or -1. */
int gw_gov_field_by_name(const char *name);
/* 1 when v is within the field's bounds. */
int gw_gov_value_ok(enum gw_gov_field f, long long v);

/* "<ns><what>", "<ns><what>:<name>" or "<ns><what>:<name>:<suffix>". */
enum cm_status gw_gov_key(char out[GW_GOV_KEYNAME_MAX], const char *ns,
			  const char *what, const char *name,
			  const char *suffix) CM_WUR;
/* "<ns>revocations", the channel the scripts publish on. */
enum cm_status gw_gov_channel(char out[GW_GOV_KEYNAME_MAX], const char *ns) CM_WUR;

/*
 * Builders.  `ns` NULL means "sluice:".  Names must pass gw_gov_name_ok
 * and values gw_gov_value_ok, else CM_EINVAL (nothing to send).
 *
 * tenant_create: the record (name, salt, created, disabled 0, weight
 *   default 1, quotas) and the index entry.  salt_hex: 64 hex digits made
 *   by the caller from the CSPRNG.  Reply -> DONE or EXISTS.
 * client_create: the client record and the tenant's client index.
 *   Reply -> DONE, EXISTS or PARENT_MISSING.
 * flag: sets `disabled` on a tenant (client NULL) or client and publishes
 *   "disable|enable tenant|client <target>".  Reply -> DONE or NOTFOUND.
 * update: sets q->set fields and removes q->clear fields, publishes
 *   "update tenant|client <target>".  Reply -> DONE or NOTFOUND.
 * key_issue: the key record (id, tenant, client, hmac, created, expires,
 *   revoked 0, last_used 0) and the client's key index.  Reply -> DONE,
 *   EXISTS (key id collision: generate another) or PARENT_MISSING.
 * key_revoke: revoked 1, revoked_at now_s; publishes "revoke key <id>"
 *   (again when already revoked).  Reply -> DONE, ALREADY or NOTFOUND.
 * key_shorten (first half of a rotation): expires = min(expires, until_s)
 *   and publishes "update key <id>".  Reply -> DONE (with the owner and the
 *   new expiry), REVOKED or NOTFOUND.
 */
enum cm_status gw_gov_cmd_tenant_create(struct gw_redis_cmd *cmd, const char *ns,
					const char *name,
					const struct gw_gov_quotas *q,
					const char *salt_hex, int64_t created_s) CM_WUR;
enum cm_status gw_gov_cmd_client_create(struct gw_redis_cmd *cmd, const char *ns,
					const char *tenant, const char *client,
					const struct gw_gov_quotas *q,
					int64_t created_s) CM_WUR;
enum cm_status gw_gov_cmd_flag(struct gw_redis_cmd *cmd, const char *ns,
			       const char *tenant, const char *client,
			       int disable) CM_WUR;
enum cm_status gw_gov_cmd_update(struct gw_redis_cmd *cmd, const char *ns,
				 const char *tenant, const char *client,
				 const struct gw_gov_quotas *q) CM_WUR;
enum cm_status gw_gov_cmd_key_issue(struct gw_redis_cmd *cmd, const char *ns,
				    const char *tenant, const char *client,
				    const char *key_id, const char *hmac_hex,
				    int64_t created_s, int64_t expires_s) CM_WUR;
enum cm_status gw_gov_cmd_key_revoke(struct gw_redis_cmd *cmd, const char *ns,
				     const char *key_id, int64_t now_s) CM_WUR;
enum cm_status gw_gov_cmd_key_shorten(struct gw_redis_cmd *cmd, const char *ns,
				      const char *key_id, int64_t until_s) CM_WUR;

/* Result of the create/flag/update/issue/revoke script `cmd` ran;
 * CM_EPROTO on an error reply or any other shape. */
enum cm_status gw_gov_parse(const struct gw_redis_cmd *cmd, const redisReply *r,
			    enum gw_gov_result *out) CM_WUR;

/* What key_shorten returns. */
struct gw_gov_shortened {
	enum gw_gov_result result;
	char tenant[GW_GOV_NAME_MAX + 1];
	char client[GW_GOV_NAME_MAX + 1];
	int64_t expires_s; /* the old key's new expiry (DONE only) */
};
enum cm_status gw_gov_parse_shorten(const redisReply *r,
				    struct gw_gov_shortened *out) CM_WUR;

/* Sends a built command on a synchronous connection; NULL when it failed. */
redisReply *gw_gov_send_sync(redisContext *c, struct gw_redis_cmd *cmd);

#endif
