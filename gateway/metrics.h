/*
 * metrics.h - the gateway's Prometheus metrics.
 *
 * Owns the counters and histograms the dispatcher feeds; renders them,
 * with the workers' latest STATS, the queue depths and the public
 * listener's connection counters read at scrape time.  The admin listener
 * (gateway/admin/listener.h) serves the text at GET /metrics.  Runs on the
 * gateway's loop.
 *
 * Metric names and labels: docs/metrics.md (keep both in one commit).
 * Label values are tenant names (validated [a-z0-9_.-]) and worker names
 * from the config, escaped anyway.  The tenant table is bounded
 * (GW_METRICS_TENANTS_MAX; beyond, tenants are counted under "_other").
 */
#ifndef SLUICE_GATEWAY_METRICS_H
#define SLUICE_GATEWAY_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "gateway/queue.h"
#include "gateway/http/server.h"
#include "gateway/workers.h"

#define GW_METRICS_TENANTS_MAX 1024

struct event_base;
struct gw_metrics;

enum gw_metrics_hist {
	GW_HIST_TTFT = 0,   /* request received -> first token sent */
	GW_HIST_ITL,        /* between streamed tokens */
	GW_HIST_QUEUE,      /* time in the gateway queue */
	GW_HIST_E2E,        /* request received -> last byte queued */
	GW_HIST_COUNT_,
};

enum cm_status gw_metrics_new(struct gw_metrics **out) CM_WUR;
void gw_metrics_free(struct gw_metrics *m);

/* Sources read at scrape time (either may be NULL). */
void gw_metrics_set_sources(struct gw_metrics *m, struct gw_workers *ws,
			    struct gw_queue *q, struct gw_server *public_server);

/* ---- feeding ---------------------------------------------------------- */
void gw_metrics_request(struct gw_metrics *m, const char *tenant, int status,
			uint64_t prompt_tokens, uint64_t gen_tokens);
void gw_metrics_observe(struct gw_metrics *m, enum gw_metrics_hist h, int64_t ns);
/* Worker time spent compiling a request's constraint (DONE constraint_ns). */
void gw_metrics_constraint(struct gw_metrics *m, const char *tenant, int64_t ns);
/* SLO attainment: one generation request of `tenant` (batch or
 * interactive) that met both targets, missed one, or was refused for
 * capacity (queue full, queue timeout, slo_overload). */
enum gw_metrics_slo { GW_SLO_MET = 0, GW_SLO_MISSED, GW_SLO_REFUSED, GW_SLO_COUNT_ };
void gw_metrics_slo(struct gw_metrics *m, const char *tenant, int batch, enum gw_metrics_slo o);
/* Rejections before a tenant is known (401, 404 ...): tenant "". */

/* Appends the Prometheus text exposition to `out`. */
enum cm_status gw_metrics_render(struct gw_metrics *m, struct cm_buf *out) CM_WUR;

#endif
