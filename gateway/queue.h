/*
 * queue.h - the gateway's bounded fair queues: one FIFO per tenant and
 * class, a global bound, weighted deficit round robin across tenants.
 *
 * Owns: the tenant table (created on first use, kept while the process
 * lives; bounded by the number of tenants), the FIFOs (intrusive: the
 * caller owns each struct gw_queue_item and keeps it alive while queued)
 * and the drain-rate estimate.  Pure data structure: no I/O, no clock
 * reads (every call takes `now_ns`), one thread (the event loop).
 *
 * Dispatch order (gw_queue_pop):
 *   1. interactive before batch, always: batch items are only popped when
 *      no interactive item waits (batch fills the capacity left);
 *   2. within a class, weighted deficit round robin over the tenants that
 *      have items: when the round reaches a tenant it earns `weight`
 *      credits (one item costs one credit) and is served while it has
 *      credits and items; so over a busy period tenant shares converge to
 *      weight_i / sum(weights);
 *   3. FIFO within one tenant and class.
 * Bounds: an item is refused when its tenant already holds `tenant_max`
 * items (both classes; GW_QUEUE_TENANT_FULL -> 429) or the queue holds
 * `global_max` (GW_QUEUE_GLOBAL_FULL -> 503).
 * Drain rate: an EWMA (alpha 0.2) of the interval between pops; the
 * Retry-After estimate for a position is ceil(position / rate) seconds,
 * clamped to [1, 300]; 1 s per position before anything was measured.
 */
#ifndef SLUICE_GATEWAY_QUEUE_H
#define SLUICE_GATEWAY_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define GW_QUEUE_TENANT_NAME_MAX 64
#define GW_QUEUE_RETRY_MAX_S 300

enum gw_queue_class {
	GW_QUEUE_INTERACTIVE = 0,
	GW_QUEUE_BATCH = 1,
};

enum gw_queue_verdict {
	GW_QUEUE_OK = 0,
	GW_QUEUE_TENANT_FULL,
	GW_QUEUE_GLOBAL_FULL,
};

struct gw_queue_tenant;

/* Embedded in the caller's request; fields private to queue.c. */
struct gw_queue_item {
	struct gw_queue_item *prev, *next;
	struct gw_queue_tenant *tenant;
	enum gw_queue_class klass;
	int64_t enqueued_ns;
	int64_t deadline_ns;   /* enqueued_ns + its class's timeout */
	int queued;
};

struct gw_queue_config {
	uint32_t tenant_max;
	uint32_t global_max;
	int64_t timeout_ns;
};

struct gw_queue;

enum cm_status gw_queue_new(const struct gw_queue_config *cfg,
			    struct gw_queue **out) CM_WUR;
/* Items still queued are forgotten (not freed: the caller owns them). */
void gw_queue_free(struct gw_queue *q);

/*
 * Appends `it` to the FIFO of (tenant, klass).  `weight` (1..1000) and
 * `tenant_max` (UINT32_MAX = the config default) refresh the tenant's
 * values.  CM_ENOMEM when a new tenant cannot be allocated (*verdict
 * untouched); else CM_OK with *verdict saying whether it was queued.
 */
/* The configured tenant_max (what a tenant without its own queue gets). */
uint32_t gw_queue_default_tenant_max(const struct gw_queue *q);

enum cm_status gw_queue_push(struct gw_queue *q, const char *tenant,
			     uint32_t weight, uint32_t tenant_max,
			     enum gw_queue_class klass, struct gw_queue_item *it,
			     int64_t now_ns, enum gw_queue_verdict *verdict) CM_WUR;

/* Puts a popped item back at the head of its FIFO (no bound check). */
void gw_queue_unpop(struct gw_queue *q, struct gw_queue_item *it);

/* The next item by class and WDRR, or NULL; counts a dispatch at now_ns. */
struct gw_queue_item *gw_queue_pop(struct gw_queue *q, int64_t now_ns);

/* Removes a queued item (client gone); no-op when not queued. */
void gw_queue_remove(struct gw_queue *q, struct gw_queue_item *it);

/* The item past its deadline (enqueued + its class's timeout) that is
 * the most overdue (removed), or NULL. */
struct gw_queue_item *gw_queue_pop_expired(struct gw_queue *q, int64_t now_ns);

/* Nanoseconds until the next item times out (INT64_MAX when empty). */
int64_t gw_queue_next_expiry_ns(const struct gw_queue *q, int64_t now_ns);

size_t gw_queue_depth(const struct gw_queue *q);
size_t gw_queue_tenant_depth(const struct gw_queue *q, const char *tenant);

/* Retry-After seconds for a client that would be `position` items back. */
uint32_t gw_queue_retry_after_s(const struct gw_queue *q, size_t position);
/* Items of one class queued (all tenants). */
size_t gw_queue_class_depth(const struct gw_queue *q, enum gw_queue_class klass);
/* The timeout of items of `klass` pushed from now on (default: the
 * config's timeout_ns for both classes).  gateway.slo sets a shorter one
 * for interactive work: its wait is part of its time to first token. */
void gw_queue_set_timeout(struct gw_queue *q, enum gw_queue_class klass, int64_t ns);
int64_t gw_queue_timeout(const struct gw_queue *q, enum gw_queue_class klass);
/* The expected wait of the item `position` places from the front
 * (position x the measured interval between dispatches), -1 before two
 * dispatches were measured.  A pop put back (gw_queue_unpop) was no
 * dispatch: it leaves the estimate as it was. */
int64_t gw_queue_wait_estimate_ns(const struct gw_queue *q, size_t position);
/* Measured dispatches per second (0 before two pops). */
double gw_queue_drain_rate(const struct gw_queue *q);

/* Visits every tenant known: name and items queued (both classes). */
void gw_queue_foreach_tenant(const struct gw_queue *q,
			     void (*fn)(void *ctx, const char *tenant, size_t depth),
			     void *ctx);

#endif
