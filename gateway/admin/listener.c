/*
 * listener.c - the admin listener (see listener.h): /metrics, /readyz and /admin/.
 */
#include "gateway/admin/listener.h"

#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/log.h"

/* The largest /metrics text (a cap, not an allocation). */
#define GW_ADMIN_METRICS_MAX (16u * 1024 * 1024)
#define GW_ADMIN_BODY_MAX (32u * 1024 * 1024) /* an admin request's body */

struct gw_admin_listener {
	struct gw_server *srv;
	struct gw_metrics *m;
	gw_handler_fn admin_fn;
	void *admin_ctx;
	gw_handler_fn ready_fn;
	void *ready_ctx;
};

static void al_respond(struct gw_request *r, int status, const char *ct,
		       const char *body, size_t len)
{
	if (gw_request_respond(r, status, ct, body, len) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "admin_respond", "response not sent");
}

static void al_handle(struct gw_request *r, void *ctx)
{
	struct gw_admin_listener *l = ctx;
	const char *path = gw_request_path(r);
	struct cm_buf b;

	if (strncmp(path, "/admin/", 7) == 0 && l->admin_fn) {
		l->admin_fn(r, l->admin_ctx);
		return;
	}
	if (strcmp(path, "/readyz") == 0 && l->ready_fn) {
		l->ready_fn(r, l->ready_ctx);
		return;
	}
	if (strcmp(path, "/metrics") == 0 && (gw_request_method(r) == GW_HTTP_GET ||
					      gw_request_method(r) == GW_HTTP_HEAD)) {
		cm_buf_init(&b, GW_ADMIN_METRICS_MAX);
		if (gw_metrics_render(l->m, &b) == CM_OK)
			al_respond(r, 200, "text/plain; version=0.0.4",
				   (const char *)cm_buf_data(&b), cm_buf_len(&b));
		else
			al_respond(r, 500, "text/plain", "metrics too large\n", 18);
		cm_buf_deinit(&b);
		return;
	}
	al_respond(r, 404, "text/plain", "not found\n", 10);
}

enum cm_status gw_admin_listener_new(struct event_base *base,
				     const struct gw_admin_listener_config *cfg,
				     struct gw_metrics *m,
				     struct gw_admin_listener **out, char *err,
				     size_t err_len)
{
	struct gw_admin_listener *l = cm_calloc(1, sizeof(*l));
	struct gw_server_config sc;
	enum cm_status st;

	*out = NULL;
	if (!l)
		return CM_ENOMEM;
	l->m = m;
	gw_server_config_defaults(&sc);
	sc.listen_addr = cfg->addr;
	sc.port = cfg->port;
	sc.plain_http = 1;
	sc.connections = 64;
	sc.out_bytes = GW_ADMIN_METRICS_MAX;
	/* an eval request carries its set and a baseline recording */
	sc.body_bytes = GW_ADMIN_BODY_MAX;
	st = gw_server_new(base, &sc, al_handle, l, &l->srv, err, err_len);
	if (st != CM_OK) {
		cm_free(l);
		return st;
	}
	*out = l;
	return CM_OK;
}

void gw_admin_listener_free(struct gw_admin_listener *l)
{
	if (!l)
		return;
	gw_server_free(l->srv);
	cm_free(l);
}

void gw_admin_listener_mount(struct gw_admin_listener *l, gw_handler_fn fn, void *ctx)
{
	l->admin_fn = fn;
	l->admin_ctx = ctx;
}

void gw_admin_listener_set_ready(struct gw_admin_listener *l, gw_handler_fn fn, void *ctx)
{
	l->ready_fn = fn;
	l->ready_ctx = ctx;
}

uint16_t gw_admin_listener_port(const struct gw_admin_listener *l)
{
	return gw_server_port(l->srv);
}
