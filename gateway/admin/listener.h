/*
 * listener.h - the admin listener: a second gw_server (plain HTTP, loopback
 * only: gateway/http/server.c refuses plain HTTP on any other address)
 * that serves GET /metrics from gw_metrics and hands every path under
 * /admin/ to a mounted handler (gateway/admin/admin.c).  It never listens
 * on the public port.  Runs on the gateway's loop.
 */
#ifndef SLUICE_GATEWAY_ADMIN_LISTENER_H
#define SLUICE_GATEWAY_ADMIN_LISTENER_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "gateway/http/server.h"
#include "gateway/metrics.h"

struct event_base;
struct gw_admin_listener;

struct gw_admin_listener_config {
	const char *addr;   /* loopback address */
	uint16_t port;      /* 0: any free port */
};

/* Listens at once; `m` (borrowed) is what /metrics renders. */
enum cm_status gw_admin_listener_new(struct event_base *base,
				     const struct gw_admin_listener_config *cfg,
				     struct gw_metrics *m,
				     struct gw_admin_listener **out, char *err,
				     size_t err_len) CM_WUR;
void gw_admin_listener_free(struct gw_admin_listener *l);

/*
 * The admin API hook: requests for paths starting with "/admin/" go to `fn`
 * (which must answer them, as any gw_handler_fn); without one they get 404.
 */
void gw_admin_listener_mount(struct gw_admin_listener *l, gw_handler_fn fn, void *ctx);
/* /readyz with its reasons (the public one says only ready or not). */
void gw_admin_listener_set_ready(struct gw_admin_listener *l, gw_handler_fn fn, void *ctx);

/* The port it listens on. */
uint16_t gw_admin_listener_port(const struct gw_admin_listener *l);

#endif
