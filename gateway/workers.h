/*
 * workers.h - the gateway's connections to its sluice-worker processes.
 *
 * Owns: one non-blocking proto/ connection (libevent bufferevent on a Unix
 * socket) per configured worker, its HELLO, its latest STATS, its PING
 * state and its table of requests in flight.  Runs on the gateway's
 * event_base; nothing blocks.
 *
 * Lifecycle of a connection: connect -> HELLO (protocol version and, when
 * configured, model name checked; else closed and retried) -> PING at once
 * and every ping_interval -> SUBMIT/CANCEL out, TOKEN/DONE/ERROR/STATS/PONG
 * in.  A closed or failed connection is retried with exponential backoff
 * (100 ms doubling to 5 s).
 *
 * Ready (for /readyz and for placement): connected, HELLO accepted, the
 * last PONG said ok and is younger than 3 ping intervals (or, before the
 * first PONG, none is overdue), a STATS is younger than stats_timeout and
 * the worker is not draining (its own DRAIN) nor drained by an operator
 * (gw_workers_drain: until that connection closes; the worker's next
 * HELLO re-admits it).
 *
 * Requests: request ids are chosen by the caller, unique per gateway
 * process.  At most `cap` requests are in flight per worker: cap =
 * min(HELLO max_seqs, max_inflight_per_worker) (0 = max_seqs).  Results
 * are routed to the callbacks given at submit by request id.  A cancelled
 * request stays counted (detached) until the worker's DONE/ERROR for it,
 * so the in-flight count matches what the worker runs.  When a connection
 * drops, every attached request gets on_error(GW_WORKERS_E_LOST, "worker
 * connection lost") once.
 *
 * Invariant: each attached request gets exactly one of on_done / on_error
 * (after any number of on_tokens), unless gw_workers_cancel() detached it.
 */
#ifndef SLUICE_GATEWAY_WORKERS_H
#define SLUICE_GATEWAY_WORKERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "proto/proto.h"

struct event_base;
struct gw_workers;

/* on_error code for a dropped connection (not a proto_errcode). */
#define GW_WORKERS_E_LOST 0

struct gw_worker_spec {
	const char *name;   /* copied */
	const char *socket; /* copied */
	const char *model;  /* expected model (NULL: any), copied */
};

struct gw_workers_config {
	uint32_t max_inflight;   /* 0 = HELLO max_seqs */
	int64_t ping_interval_ms;
	int64_t stats_timeout_ms;
	uint32_t max_frame;      /* decoder maximum */
	int64_t stall_ms;        /* nothing received this long with requests in flight: dropped; 0 off */
};

struct gw_request_ops {
	void (*on_tokens)(void *arg, const struct proto_tokens *t);
	/* EMBEDDING of an EMBED (NULL for SUBMIT requests: ignored) */
	void (*on_embedding)(void *arg, const struct proto_embedding *e);
	void (*on_done)(void *arg, const struct proto_done *d);
	void (*on_error)(void *arg, uint16_t code, const char *msg, size_t len);
};

/* A snapshot of one worker (strings valid until the next loop turn). */
struct gw_worker_info {
	const char *name;
	const char *socket;
	int connected;
	int hello_ok;
	int ready;
	const char *not_ready_reason; /* "" when ready */
	struct proto_hello hello;      /* valid when hello_ok */
	int have_stats;
	struct proto_stats stats;      /* latest (histogram arrays included) */
	uint32_t inflight;
	uint32_t reserved;             /* slots held by gw_workers_reserve */
	uint32_t cap;
	uint32_t slo_limit;            /* the SLO limit (0: none) */
	uint64_t pings_ok, pings_failed, reconnects;
	uint64_t stalls;           /* dropped for sending nothing with requests in flight */
	int drained;                   /* gw_workers_drain on this connection */
	uint64_t placed;               /* SUBMITs accepted, since start */
	uint64_t prompt_tokens;        /* from DONE, since start */
	uint64_t cached_tokens;        /* DONE cached_tokens (prefix hits) */
};

/* Called when capacity may have appeared (slot freed, worker became ready). */
typedef void (*gw_workers_capacity_fn)(void *ctx);

enum cm_status gw_workers_new(struct event_base *base,
			      const struct gw_worker_spec *specs, size_t n,
			      const struct gw_workers_config *cfg,
			      struct gw_workers **out) CM_WUR;
/* Detaches every request (no callbacks) and closes all connections. */
void gw_workers_free(struct gw_workers *ws);

void gw_workers_set_capacity_cb(struct gw_workers *ws, gw_workers_capacity_fn fn,
				void *ctx);

size_t gw_workers_count(const struct gw_workers *ws);
void gw_workers_info(const struct gw_workers *ws, size_t i,
		     struct gw_worker_info *out);
/* Worker i's SLO limit (gateway/dispatch_slo.c): its cap becomes
 * min(static cap, limit); 0 removes it. */
void gw_workers_set_limit(struct gw_workers *ws, size_t i, uint32_t limit);
/* 1 when worker i is ready and has room for one more request (k more). */
int gw_workers_can_take(const struct gw_workers *ws, size_t i);
int gw_workers_can_take_n(const struct gw_workers *ws, size_t i, uint32_t k);
/* Batch work may fill `share` of each worker's cap in force (at least one
 * slot; 0 or 1: all of it), so interactive work that arrives finds room
 * (gateway.slo.batch_share).  The requests in flight of both classes
 * count. */
void gw_workers_set_batch_share(struct gw_workers *ws, double share);
/* gw_workers_can_take_n, held to the batch share when `batch`. */
int gw_workers_can_take_class(const struct gw_workers *ws, size_t i, uint32_t k, int batch);

/*
 * Holds k slots of worker i for requests its caller sends later (the
 * further choices of an `n` > 1 request, sent once the first has filled the
 * prefix cache): nothing else is placed in them.  CM_ELIMIT when the worker
 * has not that room.  The caller gives each slot back with
 * gw_workers_unreserve, before it submits into it or when it will not;
 * reservations outlive a dropped connection (their holders give them back
 * when their requests fail).
 */
enum cm_status gw_workers_reserve(struct gw_workers *ws, size_t i, uint32_t k) CM_WUR;
void gw_workers_unreserve(struct gw_workers *ws, size_t i, uint32_t k);
/* The largest request capacity (cap) of the connected workers serving
 * `model`; 0 when none does. */
uint32_t gw_workers_model_cap(const struct gw_workers *ws, const char *model, size_t len);
/* 1 when some connected worker (HELLO accepted) serves `model`. */
int gw_workers_knows_model(const struct gw_workers *ws, const char *model,
			   size_t len);
/* The largest context (tokens) of all connected workers; 0 when none. */
uint32_t gw_workers_max_context(const struct gw_workers *ws);
/* The largest context (tokens) of the connected workers serving `model`;
 * 0 when none does. */
uint32_t gw_workers_model_context(const struct gw_workers *ws, const char *model,
				  size_t len);

/*
 * Operator drain of the worker named `name`: no new placements, requests
 * in flight finish.  Lasts until the current connection closes (a restart
 * re-admits the worker after its HELLO); set while disconnected it applies
 * to the next connection.  CM_ENOTFOUND for an unknown name.
 */
enum cm_status gw_workers_drain(struct gw_workers *ws, const char *name) CM_WUR;

/*
 * Sends SUBMIT for `request_id` to worker i (msg flags `flags`).  CM_ELIMIT
 * when the worker is full, CM_ECLOSED when not ready, CM_EINVAL when the
 * message does not encode.  On CM_OK exactly one of on_done/on_error
 * follows unless cancelled.
 */
enum cm_status gw_workers_submit(struct gw_workers *ws, size_t i,
				 uint64_t request_id, uint32_t flags,
				 const struct proto_submit *s,
				 const struct gw_request_ops *ops, void *arg) CM_WUR;

/* The same with EMBED (flags PROTO_EMBED_F_*): EMBEDDING frames go to
 * ops->on_embedding, then on_done or on_error. */
enum cm_status gw_workers_embed(struct gw_workers *ws, size_t i, uint64_t request_id,
				uint32_t flags, const struct proto_embed *e,
				const struct gw_request_ops *ops, void *arg) CM_WUR;

/*
 * What the connected workers serving `model` do: *embedding_dim the
 * largest HELLO embedding_dim (0: none embeds), *generates 1 when one of
 * them generates.  0 when no connected worker serves it.
 */
int gw_workers_model_does(const struct gw_workers *ws, const char *model, size_t len,
			  uint32_t *embedding_dim, int *generates);

/* Sends CANCEL and detaches the callbacks (none is called afterwards). */
void gw_workers_cancel(struct gw_workers *ws, size_t i, uint64_t request_id,
		       enum proto_cancel_reason reason);

#endif
