/*
 * internal.h - what the files of gateway/admin/ share: the admin state,
 * one admin operation (struct adm_op) and the helpers each file lends the
 * others.  Nothing outside gateway/admin/ includes it.
 *
 * admin.c   setup, credentials, authentication, responses, op lifecycle
 * routes.c  the route table and request parsing
 * writes.c  mutations: governance steps and their audit records
 * reads.c   reads: tenants, clients, keys, usage, audit
 * models.c  the model inventory, promotion, rollback and eval runs
 *
 * Loop: the server's event_base, which also drives the hiredis context.
 * Invariant: no call blocks; file reads happen only in gw_admin_new().
 */
#ifndef SLUICE_GATEWAY_ADMIN_INTERNAL_H
#define SLUICE_GATEWAY_ADMIN_INTERNAL_H

#include <stdint.h>

#include <jansson.h>

#include "common/crypto.h"
#include "gateway/admin/admin.h"
#include "gateway/gov/apikey.h"
#include "gateway/gov/audit.h"
#include "gateway/gov/records.h"
#include "gateway/gov/usage.h"

#define GW_ADMIN_CRED_FILE_MAX (64 * 1024)
#define GW_ADMIN_PATH_SEGS_MAX 5
#define GW_ADMIN_ROTATE_OVERLAP_DEFAULT_S 86400
#define GW_ADMIN_ISSUE_ATTEMPTS 3
#define GW_ADMIN_STEPS_MAX 2
#define GW_ADMIN_MODEL_NAME_MAX 128 /* a model name in a path */

struct adm_cred {
	char name[GW_AUDIT_ACTOR_MAX + 1];
	uint8_t digest[CM_SHA256_LEN]; /* SHA-256 of the token */
};

struct gw_admin {
	char ns[GW_GOV_NS_MAX + 1];
	redisAsyncContext *ac;
	struct adm_cred creds[GW_ADMIN_CREDENTIALS_MAX];
	size_t ncreds;
	uint32_t uids[GW_ADMIN_UIDS_MAX];
	size_t nuids;
	struct gw_key_pepper *pepper;
	gw_admin_drain_fn drain;
	void *drain_arg;
	struct gw_rollout *rollout;
	struct gw_eval *eval;
	struct gw_admin_stats stats;
};

enum step_kind { STEP_GOV = 0, STEP_SHORTEN, STEP_ISSUE };

struct adm_step {
	enum step_kind kind;
	struct gw_redis_cmd cmd;
	enum gw_audit_action action;
	char target[GW_AUDIT_TARGET_MAX + 1];
	const char *what; /* "tenant", "client", "key" for messages */
};

enum read_kind {
	READ_TENANTS = 1, /* SMEMBERS, then HGETALL each */
	READ_TENANT,      /* HGETALL + SMEMBERS, then HGETALL each client */
	READ_CLIENT,      /* HGETALL */
	READ_KEYS,        /* SMEMBERS, then HGETALL each key */
	READ_USAGE,       /* [SMEMBERS tenants], then HGETALL per day */
	READ_AUDIT,       /* XRANGE */
};

/*
 * One admin request that needs Redis: allocated by gw_admin_op_new() and
 * freed when its last Redis reply has arrived and the response was sent
 * (or the client went away).  Commands of one op are pipelined on the
 * single async connection, so their replies arrive in the order sent and
 * `recv` counts them.
 */
struct adm_op {
	struct gw_admin *a;
	struct gw_request *req; /* NULL once the client went away */
	char actor[GW_AUDIT_ACTOR_MAX + 1];
	int status;
	json_t *body;           /* response being built */
	/* mutations */
	struct adm_step steps[GW_ADMIN_STEPS_MAX];
	int nsteps, cur;
	int attempts;           /* key id collisions retried */
	char tenant[GW_GOV_NAME_MAX + 1], client[GW_GOV_NAME_MAX + 1];
	char key_id[GW_KEY_ID_LEN + 1], old_id[GW_KEY_ID_LEN + 1];
	char key[GW_KEY_LEN + 1];
	long long expires_in, overlap; /* seconds */
	int64_t old_expires;
	/* reads */
	enum read_kind rk;
	int stage, pending, recv, failed;
	json_t *arr;            /* collected records */
	char **names;           /* names read in stage 1 (sorted) */
	size_t nnames;
	int64_t from, to;       /* usage range, Unix s at midnight */
	int with_clients;
	char after[GW_AUDIT_ID_MAX + 2];
	long long count;
};

void gw_admin_respond_json(struct gw_admin *a, struct gw_request *req, int status,
			 json_t *body);
json_t *gw_admin_error_body(const char *type, const char *field, const char *fmt, ...)
	CM_PRINTF(3, 4);
int gw_admin_key_id_ok(const char *s);
int gw_admin_query_get(const char *q, const char *name, char *out, size_t size);
json_t *gw_admin_body_object(struct gw_request *req, int allow_empty, json_t **err);
json_t *gw_admin_parse_quotas(json_t *o, struct gw_gov_quotas *q, int allow_null,
			    int allow_weight, const char *const *extra);
json_t *gw_admin_parse_seconds(json_t *o, const char *name, long long min, long long max,
			     long long *out);
json_t *gw_admin_only_members(json_t *o, const char *const *allowed);
struct adm_op *gw_admin_op_new(struct gw_admin *a, struct gw_request *req,
			     const char *actor);
void gw_admin_op_finish(struct adm_op *op, int status, json_t *body);
json_t *gw_admin_redis_down(void);
void gw_admin_start_read(struct adm_op *op, enum read_kind rk);
json_t *gw_admin_name_error(const char *field, const char *what);
void gw_admin_ep_create(struct adm_op *op, struct gw_request *req, const char *tenant);
void gw_admin_ep_patch(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client);
void gw_admin_ep_issue(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client, const char *old_id);
void gw_admin_ep_revoke(struct adm_op *op, const char *id);
void gw_admin_ep_drain(struct adm_op *op, const char *name);
/* Appends the audit record of op's action, then answers op->status with
 * op->body (adding "audit": "failed" when the append fails). */
void gw_admin_audit(struct adm_op *op, enum gw_audit_action action, const char *target,
		    enum gw_audit_result res);
/* models.c: the model change procedure (docs/operations.md) */
void gw_admin_ep_models(struct adm_op *op);
void gw_admin_ep_promote(struct adm_op *op, struct gw_request *req, const char *model);
void gw_admin_ep_rollback(struct adm_op *op, const char *model);
void gw_admin_ep_eval(struct adm_op *op, struct gw_request *req, const char *worker);
void gw_admin_ep_usage(struct adm_op *op, const char *query);
void gw_admin_ep_audit(struct adm_op *op, const char *query);


/* routes.c: routes an authenticated request (actor: who, for the audit log). */
void gw_admin_route(struct gw_admin *a, struct gw_request *req, const char *actor);

#endif
