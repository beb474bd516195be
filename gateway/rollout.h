/*
 * rollout.h - which workers of a model take client traffic: the change
 * procedure of docs/operations.md ("Changing a model or an engine").
 *
 * Owns one role per configured worker (indexed as gateway/workers.h) and
 * each worker's last eval verdict.  Roles:
 *   serving   takes the model's client traffic;
 *   staged    a hot replica: connected, pinged, evaluated, no client
 *             traffic (gateway.workers[].staged, or rolled back);
 *   canary    takes the traffic of the tenants whose canary bucket is below
 *             its share (pct, 1..99);
 *   previous  retired by the last full promotion of its model, still
 *             loaded: the target of a rollback, no client traffic.
 * A worker's model is its HELLO's model name (a worker not connected has
 * none and belongs to no model's procedure).
 *
 * Promotion needs the worker's last eval verdict to have passed on its
 * current connection (same connection count, model digest and engine
 * version as when the eval ran): a restart, another file or another build
 * needs a new eval.  Role changes affect placement only: requests in
 * flight and queued ones are never failed by them.
 *
 * Runs on the gateway's loop; pure state, no I/O.
 */
#ifndef SLUICE_GATEWAY_ROLLOUT_H
#define SLUICE_GATEWAY_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/status.h"
#include "gateway/workers.h"

#define GW_ROLLOUT_REASON_MAX 200
#define GW_ROLLOUT_ENGINE_MAX 128

enum gw_role {
	GW_ROLE_SERVING = 0,
	GW_ROLE_STAGED,
	GW_ROLE_CANARY,
	GW_ROLE_PREVIOUS,
};

/* The gates an eval run was held to (fractions 0..1; nats). */
struct gw_eval_gates {
	double min_exact_match;   /* share of cases whose tokens equal the baseline's */
	double min_check_pass;    /* share of the cases' checks that pass */
	double max_logprob_drop;  /* baseline mean log-probability - this run's, per case mean */
};

/* The outcome of the last eval run on a worker. */
struct gw_eval_verdict {
	int passed;
	uint32_t cases;
	int have_baseline;
	double exact_match;       /* -1: no baseline */
	double check_pass;        /* -1: no checks */
	double logprob_drop;
	struct gw_eval_gates gates;
	int64_t time_s;           /* Unix seconds */
	char reason[GW_ROLLOUT_REASON_MAX]; /* the first gate missed ("" when passed) */
	/* what it ran on */
	uint64_t conn_gen;
	uint8_t model_sha256[PROTO_DIGEST_LEN];
	char engine_version[GW_ROLLOUT_ENGINE_MAX];
};

struct gw_rollout;

/* staged[i] != 0: worker i starts staged (NULL: all serving). */
enum cm_status gw_rollout_new(struct gw_workers *ws, const uint8_t *staged,
			      struct gw_rollout **out) CM_WUR;
void gw_rollout_free(struct gw_rollout *ro);

enum gw_role gw_rollout_role(const struct gw_rollout *ro, size_t i);
const char *gw_rollout_role_name(enum gw_role r);

/*
 * Tenant's canary bucket for `model`, 0..99: the first 8 bytes of
 * HMAC-SHA256(salt, "sluice-canary-v1" || model) mod 100.  Stable for a
 * tenant (its prefix cache stays on one side) and unrelated between
 * tenants; a share of p takes the tenants with bucket < p, so raising it
 * keeps the tenants already on the canary.
 */
uint32_t gw_rollout_bucket(const uint8_t *salt, size_t salt_len, const char *model);

/*
 * For placement: *pct the canary share of `model` (0: none), and whether
 * some canary worker of it is ready (a canary tenant goes to the serving
 * workers when none is).
 */
void gw_rollout_canary(const struct gw_rollout *ro, const char *model, size_t len,
		       uint32_t *pct, int *canary_ready);
/* 1 when worker i takes client traffic of a tenant on the canary side
 * (`canary` 1) or the stable side (0). */
int gw_rollout_admits(const struct gw_rollout *ro, size_t i, int canary);

/* 1 when worker i's role takes client traffic (serving or canary); 1 for
 * every worker when ro is NULL.  The model listings describe a model by
 * such a worker (a staged replica may run another file or build). */
int gw_rollout_takes_traffic(const struct gw_rollout *ro, size_t i);

/* Index of the worker named `name`, -1 when none is configured. */
long gw_rollout_find(const struct gw_rollout *ro, const char *name);

/* Records worker i's eval verdict, stamped with its current connection
 * (connection count, digest, engine version). */
void gw_rollout_set_verdict(struct gw_rollout *ro, size_t i, struct gw_eval_verdict *v);

/*
 * `sluicectl model promote`: worker `name` takes `pct` (1..100) of the
 * traffic of `model`.  100: it (and the model's canaries) become serving,
 * the serving ones previous (the former previous ones staged).  Below 100:
 * it becomes a canary with that share.  CM_ENOTFOUND (no such worker),
 * CM_EINVAL (pct, or the worker serves another model or is not
 * connected), CM_EPERM (its last eval did not pass on this connection),
 * CM_ECLOSED (not ready); msg says which and why.
 */
enum cm_status gw_rollout_promote(struct gw_rollout *ro, const char *model,
				  const char *name, uint32_t pct, char *msg,
				  size_t msg_len) CM_WUR;
/*
 * `sluicectl model rollback`: ends the model's canary (canaries staged),
 * else puts its previous workers back to serving and the serving ones
 * staged.  CM_ENOTFOUND when there is nothing to roll back to.  *what
 * "canary" or "previous".
 */
enum cm_status gw_rollout_rollback(struct gw_rollout *ro, const char *model,
				   const char **what, char *msg, size_t msg_len) CM_WUR;

/*
 * The inventory (GET /admin/models): per model name, its workers with role,
 * state, digest, engine, backend, device and last eval; "digest_mismatch"
 * when the workers that take its traffic differ in file digest or engine.
 * New reference; NULL on allocation failure.
 */
json_t *gw_rollout_inventory(const struct gw_rollout *ro);
/* One worker's entry as in the inventory. */
json_t *gw_rollout_worker_json(const struct gw_rollout *ro, size_t i);

#endif
