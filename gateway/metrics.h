/*
 * metrics.h - the gateway's Prometheus metrics and its admin listener.
 *
 * Owns: the counters and histograms the dispatcher feeds, and a second
 * gw_server (plain HTTP, loopback only: server.c refuses plain HTTP on any
 * other address) that serves GET /metrics and hands every path under
 * /admin/ to a mounted handler (gateway/admin/admin.c, `gw_admin_*`, mounts
 * itself with gw_metrics_mount_admin()).  It never listens on the public
 * port.  Runs on the gateway's loop; rendering reads the workers' latest
 * STATS and the queue depths at scrape time.
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

struct gw_metrics_admin_config {
	const char *addr;   /* loopback address */
	uint16_t port;      /* 0: any free port */
};

/* Creates the metrics; with `admin` non-NULL also the admin listener. */
enum cm_status gw_metrics_new(struct event_base *base,
			      const struct gw_metrics_admin_config *admin,
			      struct gw_metrics **out, char *err,
			      size_t err_len) CM_WUR;
void gw_metrics_free(struct gw_metrics *m);

/* Sources read at scrape time (either may be NULL). */
void gw_metrics_set_sources(struct gw_metrics *m, struct gw_workers *ws,
			    struct gw_queue *q, struct gw_server *public_server);

/*
 * The admin API hook: requests for paths starting with "/admin/" on the
 * admin listener go to `fn` (which must answer them, as any gw_handler_fn);
 * without a handler they get 404.  The admin module (issue 6) calls this.
 */
void gw_metrics_mount_admin(struct gw_metrics *m, gw_handler_fn fn, void *ctx);

/* Port of the admin listener (0 when none). */
uint16_t gw_metrics_admin_port(const struct gw_metrics *m);

/* ---- feeding ---------------------------------------------------------- */
void gw_metrics_request(struct gw_metrics *m, const char *tenant, int status,
			uint64_t prompt_tokens, uint64_t gen_tokens);
void gw_metrics_observe(struct gw_metrics *m, enum gw_metrics_hist h, int64_t ns);
/* Rejections before a tenant is known (401, 404 ...): tenant "". */

/* Appends the Prometheus text exposition to `out`. */
enum cm_status gw_metrics_render(struct gw_metrics *m, struct cm_buf *out) CM_WUR;

#endif
