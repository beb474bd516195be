/*
 * admin.h - the admin API: HTTP handlers for /admin/... on the gateway's
 * ADMIN listener (loopback TCP or a Unix socket, never the public port).
 *
 * Endpoints (JSON in and out; docs/admin-api.md has every request and
 * response):
 *   GET   /admin/tenants                      list tenants
 *   POST  /admin/tenants                      create {name, weight, quotas}
 *   GET   /admin/tenants/{t}                  tenant, quotas and its clients
 *   PATCH /admin/tenants/{t}                  quotas (null clears), weight, disabled
 *   POST  /admin/tenants/{t}/clients          create {name, quotas}
 *   GET   /admin/clients/{t}/{c}              client record
 *   PATCH /admin/clients/{t}/{c}              overrides (null clears), disabled
 *   GET   /admin/clients/{t}/{c}/keys         key ids and states (never secrets)
 *   POST  /admin/clients/{t}/{c}/keys         issue {expires_in}: the key, ONCE
 *   POST  /admin/keys/{id}/revoke             revoke (published at once)
 *   POST  /admin/keys/{id}/rotate             {overlap, expires_in}: new key, ONCE
 *   GET   /admin/usage?tenant=&client=&from=&to=   usage counters per day
 *   GET   /admin/audit?after=&count=          audit records, oldest first
 *   POST  /admin/workers/{name}/drain         calls the gateway's drain callback
 *
 * Writes run the Lua scripts of gateway/gov/records.h, the very ones sluicectl
 * runs, so both produce identical Redis state and revocation messages.
 * Every mutation (refused ones that reached Redis included) appends an
 * audit record (gateway/gov/audit.h) before the response is sent; the actor
 * is the admin credential's name, or "uid:<n>" on a Unix socket.
 *
 * Authentication:
 *   - loopback TCP (gw_admin_handle): "Authorization: Bearer <token>",
 *     compared in constant time (SHA-256 of both, then cm_ct_equal) with
 *     every token of the credentials file; no header -> 401, a wrong
 *     token -> 403; a peer that is not a loopback address -> 403;
 *   - Unix socket: the listener calls gw_admin_peer_check(fd) once per
 *     accepted connection (SO_PEERCRED against the allowed uids) and
 *     closes the connection when it refuses, then hands each request to
 *     gw_admin_handle_peer() with the uid it got.
 *
 * Event loop: everything runs on the loop that drives `ac` and the
 * server; Redis is reached only through hiredis async (never blocking).
 * Files (credentials, pepper) are read once, by gw_admin_new(), before
 * the loop serves.  A request whose client goes away keeps its Redis
 * operation (and audit record) running and is then dropped silently.
 *
 * Lifecycle: gw_admin_new() -> handlers -> redisAsyncFree(ac) (fails the
 * pending operations, which then free themselves) -> gw_admin_free().
 */
#ifndef SLUICE_GATEWAY_ADMIN_ADMIN_H
#define SLUICE_GATEWAY_ADMIN_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>

#include "common/status.h"
#include "gateway/http/server.h"

#define GW_ADMIN_UIDS_MAX 32
#define GW_ADMIN_CREDENTIALS_MAX 32
#define GW_ADMIN_TOKEN_MIN 32  /* bytes */
#define GW_ADMIN_TOKEN_MAX 256
/* Largest usage query: days x (tenants + clients) hashes read. */
#define GW_ADMIN_USAGE_READS_MAX 4000
#define GW_ADMIN_AUDIT_COUNT_MAX 1000

struct gw_admin;
struct gw_rollout;
struct gw_eval;

/*
 * Starts draining worker `name` (the gateway's dispatcher).  CM_OK when
 * draining started or already runs, CM_ENOTFOUND for an unknown worker.
 * Called on the loop; must not block.
 */
typedef enum cm_status (*gw_admin_drain_fn)(const char *name, void *arg);

struct gw_admin_config {
	const char *ns;               /* key namespace; NULL = "sluice:" */
	/*
	 * Admin credentials for loopback TCP: one "NAME TOKEN" per line
	 * ('#' comments and blank lines ignored); NAME is the audit actor
	 * ([A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}), TOKEN 32..256 printable
	 * characters without spaces.  Mode must have no group/other bits.
	 * NULL: bearer authentication refuses everyone (Unix socket only).
	 */
	const char *credentials_file;
	const uint32_t *allowed_uids; /* Unix socket peers allowed */
	size_t n_allowed_uids;        /* <= GW_ADMIN_UIDS_MAX */
	/* The pepper (gateway/gov/apikey.h) for key issue and rotate; NULL:
	 * those endpoints answer 503. */
	const char *pepper_file;
	gw_admin_drain_fn drain;      /* NULL: drain answers 503 */
	void *drain_arg;
	/* The model change procedure (gateway/rollout.h, gateway/eval/eval.h);
	 * NULL: /admin/models and eval answer 503.  Not owned. */
	struct gw_rollout *rollout;
	struct gw_eval *eval;
};

/*
 * Reads the credentials and pepper files and keeps `ac` (not owned; may be
 * NULL: every Redis endpoint answers 503 until gw_admin_set_redis).
 * CM_EINVAL / CM_EPERM / CM_EFORMAT / CM_ENOTFOUND with a message in err
 * naming the file or key and what was found (never a token).
 */
enum cm_status gw_admin_new(const struct gw_admin_config *cfg,
			    redisAsyncContext *ac, struct gw_admin **out,
			    char *err, size_t errlen) CM_WUR;
/* Wipes the tokens and the pepper.  Free `ac` first (see above). */
void gw_admin_free(struct gw_admin *a);

/* Replaces the Redis context (after a reconnect); NULL = unavailable. */
void gw_admin_set_redis(struct gw_admin *a, redisAsyncContext *ac);

/* gw_handler_fn for the loopback TCP admin listener (bearer token);
 * `admin` is the struct gw_admin.  Answers 404 outside /admin/. */
void gw_admin_handle(struct gw_request *req, void *admin);

/* For a request on a Unix-socket admin listener whose peer `uid` passed
 * gw_admin_peer_check(); re-checks the uid (403 when not allowed). */
void gw_admin_handle_peer(struct gw_request *req, struct gw_admin *a,
			  uint32_t uid);

/*
 * SO_PEERCRED of a connected Unix socket: CM_OK with *uid when the peer's
 * uid is in allowed_uids, CM_EPERM when it is not, CM_EIO when the
 * credentials cannot be read.  Call once per accepted connection.
 */
enum cm_status gw_admin_peer_check(const struct gw_admin *a, int fd,
				   uint32_t *uid) CM_WUR;

/* Admin requests answered since start, by outcome (for /metrics). */
struct gw_admin_stats {
	uint64_t requests;
	uint64_t unauthorized; /* 401 + 403 */
	uint64_t mutations;    /* audit records appended */
	uint64_t audit_failures;
};
void gw_admin_get_stats(const struct gw_admin *a, struct gw_admin_stats *out);

#endif
