/*
 * server.c - the gateway's HTTP(S) listener: configuration defaults and
 * checks, the listener's life, and its counters (see server.h for the
 * contract; internal.h for the invariants).
 */
#include "gateway/http/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"

void gw_srv_seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

void gw_server_config_defaults(struct gw_server_config *c)
{
	memset(c, 0, sizeof(*c));
	c->listen_addr = "127.0.0.1";
	c->port = 8443;
	c->cert_file = NULL;
	c->key_file = NULL;
	c->plain_http = 0;
	c->header_bytes = CM_LIM_HTTP_HEADER_BYTES;
	c->body_bytes = CM_LIM_HTTP_BODY_BYTES;
	c->max_headers = GW_HTTP_MAX_HEADERS_DEFAULT;
	c->connections = CM_LIM_HTTP_CONNECTIONS;
	c->out_bytes = GW_SERVER_OUT_BYTES_DEFAULT;
	c->header_timeout_ms = CM_LIM_HTTP_HEADER_TIMEOUT_MS;
	c->body_timeout_ms = CM_LIM_HTTP_BODY_TIMEOUT_MS;
	c->idle_timeout_ms = CM_LIM_HTTP_IDLE_TIMEOUT_MS;
	c->write_timeout_ms = CM_LIM_HTTP_WRITE_TIMEOUT_MS;
	c->preauth_body_bytes = CM_LIM_HTTP_PREAUTH_BODY_BYTES;
	c->unauth_body_bytes = CM_LIM_HTTP_UNAUTH_BODY_BYTES;
}

/* ---- server lifecycle ----------------------------------------------- */

static int addr_is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		return (ntohl(a->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
			return 1;
		if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
			return a->sin6_addr.s6_addr[12] == 127;
	}
	return 0;
}

static int range_ok(const char *key, unsigned long long val,
		    unsigned long long lo, unsigned long long hi, char *err,
		    size_t err_len)
{
	if (val >= lo && val <= hi)
		return 1;
	gw_srv_seterr(err, err_len, "%s: expected %llu..%llu, found %llu", key, lo, hi, val);
	return 0;
}

static enum cm_status check_config(const struct gw_server_config *c, char *err,
				   size_t err_len)
{
	if (!range_ok("limits.header_bytes", c->header_bytes, 1024, 1024 * 1024, err, err_len) ||
	    !range_ok("limits.body_bytes", c->body_bytes, 1024, 1024ull * 1024 * 1024, err, err_len) ||
	    !range_ok("limits.headers", c->max_headers, 8, 10000, err, err_len) ||
	    !range_ok("limits.connections", c->connections, 1, 1000000, err, err_len) ||
	    !range_ok("limits.output_bytes", c->out_bytes, 4096, 1024ull * 1024 * 1024, err, err_len) ||
	    !range_ok("timeouts.header_ms", c->header_timeout_ms, 10, 3600000, err, err_len) ||
	    !range_ok("timeouts.body_ms", c->body_timeout_ms, 10, 3600000, err, err_len) ||
	    !range_ok("timeouts.idle_ms", c->idle_timeout_ms, 10, 3600000, err, err_len))
		return CM_EINVAL;
	if (!c->listen_addr || !c->listen_addr[0]) {
		gw_srv_seterr(err, err_len, "listen_addr: expected a numeric IP address, found nothing");
		return CM_EINVAL;
	}
	if (!c->plain_http && (!c->cert_file || !c->key_file)) {
		gw_srv_seterr(err, err_len,
		       "tls_cert_file and tls_key_file: expected PEM file paths (or plain_http on loopback), found %s",
		       !c->cert_file ? "no tls_cert_file" : "no tls_key_file");
		return CM_EINVAL;
	}
	return CM_OK;
}

enum cm_status gw_server_new(struct event_base *base,
			     const struct gw_server_config *cfg,
			     gw_handler_fn handler, void *ctx,
			     struct gw_server **out, char *err, size_t err_len)
{
	struct gw_server *s = NULL;
	struct sockaddr_storage ss;
	socklen_t sslen;
	enum cm_status st;

	*out = NULL;
	st = check_config(cfg, err, err_len);
	if (st != CM_OK)
		return st;
	memset(&ss, 0, sizeof(ss));
	{
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

		if (inet_pton(AF_INET, cfg->listen_addr, &a4->sin_addr) == 1) {
			a4->sin_family = AF_INET;
			a4->sin_port = htons(cfg->port);
			sslen = sizeof(*a4);
		} else if (inet_pton(AF_INET6, cfg->listen_addr, &a6->sin6_addr) == 1) {
			a6->sin6_family = AF_INET6;
			a6->sin6_port = htons(cfg->port);
			sslen = sizeof(*a6);
		} else {
			gw_srv_seterr(err, err_len,
			       "listen_addr: expected a numeric IPv4 or IPv6 address, found '%s'",
			       cfg->listen_addr);
			return CM_EINVAL;
		}
	}
	if (cfg->plain_http && !addr_is_loopback(&ss)) {
		gw_srv_seterr(err, err_len,
		       "plain_http: only allowed when listen_addr is loopback (127.0.0.0/8 or ::1), found '%s'; configure tls_cert_file and tls_key_file",
		       cfg->listen_addr);
		return CM_EINVAL;
	}
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		return CM_ENOMEM;
	s->base = base;
	s->cfg = *cfg;
	s->handler = handler;
	s->ctx = ctx;
	s->listen_addr = cm_strdup(cfg->listen_addr);
	s->cert_file = cfg->cert_file ? cm_strdup(cfg->cert_file) : NULL;
	s->key_file = cfg->key_file ? cm_strdup(cfg->key_file) : NULL;
	if (!s->listen_addr || (cfg->cert_file && !s->cert_file) ||
	    (cfg->key_file && !s->key_file)) {
		st = CM_ENOMEM;
		goto fail;
	}
	s->cfg.listen_addr = s->listen_addr;
	s->cfg.cert_file = s->cert_file;
	s->cfg.key_file = s->key_file;
	s->hlim.header_bytes = cfg->header_bytes;
	s->hlim.body_bytes = cfg->body_bytes;
	s->hlim.max_headers = cfg->max_headers;
	/* the handler copies the body's strings into the arena */
	s->arena_cap = 2 * cfg->body_bytes + 256 * 1024;
	if (!cfg->plain_http) {
		s->ssl_ctx = gw_srv_tls_ctx_new(s->cert_file, s->key_file, err, err_len);
		if (!s->ssl_ctx) {
			st = CM_EIO;
			goto fail;
		}
	}
	s->accept_pause = evtimer_new(base, gw_srv_accept_resume_cb, s);
	if (!s->accept_pause) {
		st = CM_ENOMEM;
		goto fail;
	}
	s->listener = evconnlistener_new_bind(
		base, gw_srv_accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		-1, (struct sockaddr *)&ss, (int)sslen);
	if (!s->listener) {
		gw_srv_seterr(err, err_len, "listen_addr/port: cannot listen on %s port %u: %s",
		       cfg->listen_addr, (unsigned)cfg->port, strerror(errno));
		st = CM_EIO;
		goto fail;
	}
	evconnlistener_set_error_cb(s->listener, gw_srv_accept_error_cb);
	{
		struct sockaddr_storage bound;
		socklen_t blen = sizeof(bound);

		if (getsockname(evconnlistener_get_fd(s->listener),
				(struct sockaddr *)&bound, &blen) == 0)
			s->port = ntohs(bound.ss_family == AF_INET
						? ((struct sockaddr_in *)&bound)->sin_port
						: ((struct sockaddr_in6 *)&bound)->sin6_port);
	}
	*out = s;
	return CM_OK;
fail:
	gw_server_free(s);
	return st;
}

void gw_server_free(struct gw_server *s)
{
	if (!s)
		return;
	while (s->conns)
		gw_srv_conn_free(s->conns);
	if (s->listener)
		evconnlistener_free(s->listener);
	if (s->accept_pause)
		event_free(s->accept_pause);
	if (s->sighup_ev)
		event_free(s->sighup_ev);
	SSL_CTX_free(s->ssl_ctx);
	cm_free(s->listen_addr);
	cm_free(s->cert_file);
	cm_free(s->key_file);
	cm_free(s);
}

void gw_server_set_head_check(struct gw_server *s, gw_head_fn check, gw_head_fn cancel, void *ctx)
{
	s->head_check = check;
	s->head_cancel = cancel;
	s->head_ctx = ctx;
}

void gw_server_set_error_renderer(struct gw_server *s, gw_error_fn fn, void *ctx)
{
	s->err_fn = fn;
	s->err_ctx = ctx;
}

uint16_t gw_server_port(const struct gw_server *s)
{
	return s->port;
}

void gw_server_get_stats(const struct gw_server *s, struct gw_server_stats *out)
{
	*out = s->st;
	out->preauth_body_buffered = s->untrusted_body;
}
