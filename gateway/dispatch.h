/*
 * dispatch.h - the request lifecycle of sluice-gateway: the handler the
 * public listener calls.
 *
 *   route -> auth (gateway/gov/auth.c, async) -> parse (api.c) -> quota admit
 *   (quota.c, async Lua) -> tenant queue (queue.c) -> placement among the
 *   ready workers serving the model (route.c, keyed by the tenant salt and
 *   the prompt prefix) -> SUBMIT (workers.c; an OpenAI request with `n`
 *   choices: one SUBMIT per choice on one worker, the later ones after the
 *   first's first token) -> each TOKEN frame becomes a stream chunk at
 *   once (NDJSON / SSE) or is collected for one body -> DONE -> final
 *   chunk with counts and durations -> quota finish with the worker's
 *   exact counts -> metrics -> one JSON log line.
 *
 * Owns: every request in progress (struct gw_job), the queue timer.  Runs
 * on the loop.  A client that goes away: a lookup in flight is abandoned,
 * a queued request leaves the queue, a running one is CANCELled on its
 * worker (the worker frees its KV blocks); the quota lease is released in
 * every case.  Revocation messages cancel the requests in flight of the
 * key, client or tenant.  The tenant's cache salt comes from the auth
 * record only; nothing in a request can set it.
 *
 * The log line (event "request") holds ids, tenant, client, key id, model,
 * model sha256, engine version, backend, device, sampling parameters and
 * seed, counts, durations and status; never prompt or completion text,
 * never a key.
 */
#ifndef SLUICE_GATEWAY_DISPATCH_H
#define SLUICE_GATEWAY_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "gateway/api/api.h"
#include "gateway/gov/auth.h"
#include "gateway/metrics.h"
#include "gateway/queue.h"
#include "gateway/http/server.h"
#include "gateway/slo_limit.h"
#include "gateway/workers.h"

struct event_base;
struct gw_dispatch;
struct gw_rollout;

struct gw_dispatch_config {
	struct gw_api_limits limits;
	uint32_t max_prompt_tokens;  /* 0: the model's context */
	size_t route_prefix_bytes;
	double route_load_factor;
	int route_round_robin;    /* 1: round robin over the ready workers */
	const char *ns;              /* Redis namespace for quota keys */
	int64_t lease_ttl_ms;        /* concurrency lease */
	int64_t quota_timeout_ms;    /* deadline of a quota admission in Redis; 0: 1000 */
	size_t out_bytes;            /* cap of a non-streamed reply */
	/* Share of every global quota this gateway enforces by itself while
	 * Redis is unreachable (gateway/gov/local_limit.h); 0: 1.0. */
	double outage_quota_fraction;
	/* gateway.cors_origins (borrowed; n 0: CORS off) */
	char *const *cors_origins;
	size_t n_cors_origins;
	/* gateway.slo: adaptive per-worker concurrency limits held to latency
	 * targets (gateway/slo_limit.h); enabled 0: the static caps only */
	int slo_enabled;
	struct gw_slo_cfg slo;      /* its targets also score attainment when off */
	int64_t slo_queue_wait_ns;  /* 0: a tenth of the TTFT target */
	double slo_setpoint;        /* share of the targets the limit aims at */
	double slo_batch_share;     /* of each worker's limit batch may fill */
};

struct gw_dispatch_deps {
	struct gw_workers *workers;
	struct gw_queue *queue;
	struct gw_auth *auth;
	struct gw_metrics *metrics;
	struct gw_redis *redis;     /* the command connection (quota, usage) */
	const struct gw_rollout *rollout; /* worker roles (NULL: every worker serves) */
};

enum cm_status gw_dispatch_new(struct event_base *base,
			       const struct gw_dispatch_config *cfg,
			       const struct gw_dispatch_deps *deps,
			       struct gw_dispatch **out) CM_WUR;
/* Cancels what runs (CANCEL shutdown) and frees every job. */
void gw_dispatch_free(struct gw_dispatch *d);

/* The gw_handler_fn of the public listener (ctx = the dispatcher). */
void gw_dispatch_handle(struct gw_request *req, void *ctx);

/*
 * The key check before a large body (gw_server_set_head_check): the
 * request's Authorization goes through the same auth as the request will
 * (a valid key is then cached, so the request itself costs no second
 * lookup); 401 or 503 before any body byte is read otherwise.
 */
void gw_dispatch_head_check(struct gw_head *h, void *ctx);
void gw_dispatch_head_cancel(struct gw_head *h, void *ctx);

/* Requests admitted and not finished. */
size_t gw_dispatch_active(const struct gw_dispatch *d);

#endif
