/*
 * request.c - the request API a handler answers through: request
 * fields, extra headers, a whole response, or a stream (chunked), and the
 * on_close hook for a client that goes away.
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

/* ---- request API ---------------------------------------------------- */

const struct gw_http_request *gw_request_http(const struct gw_request *r)
{
	return r->http;
}

enum gw_http_method gw_request_method(const struct gw_request *r)
{
	return r->http->method;
}

const char *gw_request_path(const struct gw_request *r)
{
	return r->http->path;
}

const char *gw_request_header(const struct gw_request *r, const char *name)
{
	return gw_http_request_header(r->http, name);
}

const uint8_t *gw_request_body(const struct gw_request *r, size_t *len)
{
	*len = r->http->body_len;
	return r->http->body;
}

uint64_t gw_request_id(const struct gw_request *r)
{
	return r->id;
}

int64_t gw_request_start_ns(const struct gw_request *r)
{
	return r->start_ns;
}

struct cm_arena *gw_request_arena(struct gw_request *r)
{
	return r->c->arena;
}

const char *gw_request_peer(const struct gw_request *r)
{
	return r->c->peer;
}

void gw_request_mark_trusted(struct gw_request *r)
{
	gw_srv_body_release(r->c);
	r->c->trusted = 1;
}

void gw_request_on_close(struct gw_request *r, gw_close_fn fn, void *arg)
{
	r->on_close = fn;
	r->close_arg = arg;
}

size_t gw_request_out_pending(const struct gw_request *r)
{
	return gw_srv_out_pending(r->c);
}

static int req_gone(const struct gw_request *r)
{
	return r->c->freeing || r->c->kill || r->c->req != r;
}

enum cm_status gw_request_add_header(struct gw_request *r, const char *name,
				     const char *value)
{
	char *n, *v;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_NEW)
		return CM_EINVAL;
	if (r->n_hdrs >= SRV_MAX_EXTRA_HEADERS)
		return CM_ELIMIT;
	if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n") || !name[0])
		return CM_EINVAL;
	n = cm_arena_strndup(r->c->arena, name, strlen(name));
	v = cm_arena_strndup(r->c->arena, value, strlen(value));
	if (!n || !v)
		return CM_ENOMEM;
	r->hdrs[r->n_hdrs].name = n;
	r->hdrs[r->n_hdrs].value = v;
	r->n_hdrs++;
	return CM_OK;
}

static enum cm_status write_head(struct gw_request *r, int status,
				 const char *ctype, enum gw_http_body_mode mode,
				 uint64_t len)
{
	struct gw_conn *c = r->c;
	enum cm_status st;

	cm_buf_reset(&c->wbuf);
	st = gw_http_write_head(&c->wbuf, r->http->version_minor, status, ctype,
				mode, len, r->keep_alive, r->hdrs, r->n_hdrs);
	if (st != CM_OK)
		return st;
	if (bufferevent_write(c->bev, cm_buf_data(&c->wbuf), cm_buf_len(&c->wbuf)) != 0)
		return CM_ENOMEM;
	return CM_OK;
}

enum cm_status gw_request_respond(struct gw_request *r, int status,
				  const char *content_type, const void *body,
				  size_t len)
{
	struct gw_conn *c = r->c;
	enum cm_status st;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_NEW)
		return CM_EINVAL;
	if (len > c->srv->cfg.out_bytes)
		return CM_ELIMIT;
	if (gw_srv_out_pending(c) + len > c->srv->cfg.out_bytes) {
		/* the client is not reading what it was sent: give up on it */
		c->srv->st.output_overflows++;
		gw_srv_conn_kill_later(c);
		return CM_ECLOSED;
	}
	st = write_head(r, status, content_type, GW_HTTP_BODY_LENGTH, len);
	if (st != CM_OK)
		return st;
	if (!r->head_only && len &&
	    bufferevent_write(c->bev, body, len) != 0) {
		gw_srv_conn_kill_later(c);
		return CM_ENOMEM;
	}
	gw_srv_finish_request(c);
	return CM_OK;
}

enum cm_status gw_request_stream_start(struct gw_request *r, int status,
				       const char *content_type)
{
	enum cm_status st;
	enum gw_http_body_mode mode;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_NEW)
		return CM_EINVAL;
	if (r->http->version_minor >= 1) {
		mode = GW_HTTP_BODY_CHUNKED;
		r->chunked = 1;
	} else {
		mode = GW_HTTP_BODY_CLOSE;
		r->keep_alive = 0;
	}
	st = write_head(r, status, content_type, mode, 0);
	if (st != CM_OK)
		return st;
	r->rstate = RS_STREAMING;
	return CM_OK;
}

enum cm_status gw_request_stream_write(struct gw_request *r, const void *data,
				       size_t len)
{
	struct gw_conn *c = r->c;
	char hdr[24];
	int n;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_STREAMING)
		return CM_EINVAL;
	if (r->head_only || len == 0)
		return CM_OK;
	if (gw_srv_out_pending(c) + len + sizeof(hdr) + 2 > c->srv->cfg.out_bytes) {
		c->srv->st.output_overflows++;
		gw_srv_conn_kill_later(c);
		return CM_ELIMIT;
	}
	if (r->chunked) {
		n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
		if (bufferevent_write(c->bev, hdr, (size_t)n) != 0 ||
		    bufferevent_write(c->bev, data, len) != 0 ||
		    bufferevent_write(c->bev, "\r\n", 2) != 0) {
			gw_srv_conn_kill_later(c);
			return CM_ENOMEM;
		}
	} else if (bufferevent_write(c->bev, data, len) != 0) {
		gw_srv_conn_kill_later(c);
		return CM_ENOMEM;
	}
	return CM_OK;
}

enum cm_status gw_request_stream_end(struct gw_request *r)
{
	struct gw_conn *c = r->c;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_STREAMING)
		return CM_EINVAL;
	if (r->chunked && !r->head_only &&
	    bufferevent_write(c->bev, "0\r\n\r\n", 5) != 0) {
		gw_srv_conn_kill_later(c);
		return CM_ENOMEM;
	}
	gw_srv_finish_request(c);
	return CM_OK;
}
