/*
 * server.c - HTTPS listener, connections, timeouts and the response API
 * (see server.h for the contract).
 *
 * Each connection is a `struct conn` with a bufferevent (OpenSSL or plain
 * socket), an HTTP parser, one deadline timer, one "process" event used to
 * defer work out of handler calls, and an arena for request-scoped memory
 * (the gw_request, extra response headers, whatever the handler allocates)
 * that is reset after every response and freed at close.
 *
 * Invariants:
 *   - a conn is freed only from an event callback (never inside a
 *     gw_request_* call), so a handler can never see its conn vanish under
 *     it; gw_request_* calls that must close the connection set `kill` and
 *     activate the process event;
 *   - at most one request per connection is in the handler's hands
 *     (state HANDLING); pipelined bytes wait in the input buffer, whose size
 *     is bounded by the read high-watermark;
 *   - on_close is called at most once, and only for a request whose
 *     response is unfinished.
 */
#include "gateway/http/server.h"

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

#define SRV_MAX_EXTRA_HEADERS 16
#define SRV_READ_SLACK (64 * 1024)     /* input buffered beyond the header cap */
#define SRV_ARENA_CHUNK (8 * 1024)
#define SRV_ACCEPT_PAUSE_MS 100        /* after EMFILE and friends */

/* TLS 1.2 suites: ECDHE + AEAD only.  TLS 1.3 keeps OpenSSL's defaults. */
#define SRV_TLS12_CIPHERS                                          \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"    \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"    \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

enum conn_state {
	CS_HANDSHAKE = 0, /* TLS handshake running */
	CS_READING,       /* reading a request */
	CS_HANDLING,      /* the handler owns the request */
	CS_CLOSING,       /* flushing the last response */
	CS_LINGER,        /* response sent, write side shut: discarding input */
};

enum timer_kind { T_NONE = 0, T_HEADER, T_BODY, T_IDLE, T_LINGER };

enum resp_state { RS_NEW = 0, RS_STREAMING, RS_DONE };

struct conn;

struct gw_request {
	struct conn *c;
	const struct gw_http_request *http;
	uint64_t id;
	int64_t start_ns;
	gw_close_fn on_close;
	void *close_arg;
	struct gw_http_out_header hdrs[SRV_MAX_EXTRA_HEADERS];
	size_t n_hdrs;
	enum resp_state rstate;
	int keep_alive;
	int head_only;
	int chunked;      /* streaming with chunked encoding */
};

struct conn {
	struct gw_server *srv;
	struct conn *prev, *next;
	struct bufferevent *bev;
	int tls;
	struct gw_http_parser *parser;
	struct cm_arena *arena;
	struct event *timer;
	enum timer_kind tkind;
	struct event *process_ev;
	enum conn_state state;
	struct gw_request *req;
	struct cm_buf wbuf;        /* response heads */
	int64_t first_byte_ns;
	int sent_continue;
	int kill;                  /* close at the next process event */
	int freeing;
	char peer[INET6_ADDRSTRLEN];
};

struct gw_server {
	struct event_base *base;
	struct gw_server_config cfg;
	char *listen_addr;
	char *cert_file;
	char *key_file;
	struct evconnlistener *listener;
	struct event *accept_pause;
	struct event *sighup_ev;
	SSL_CTX *ssl_ctx;          /* for new connections; live SSLs hold refs */
	gw_handler_fn handler;
	void *ctx;
	gw_error_fn err_fn;
	void *err_ctx;
	struct gw_http_limits hlim;
	size_t arena_cap;
	struct conn *conns;
	struct gw_server_stats st;
	uint64_t next_req_id;
	uint16_t port;
};

static void seterr(char *err, size_t len, const char *fmt, ...) CM_PRINTF(3, 4);

static void seterr(char *err, size_t len, const char *fmt, ...)
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
}

/* ---- TLS context ---------------------------------------------------- */

static void ssl_errstr(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", r ? r : "unknown OpenSSL error");
	ERR_clear_error();
}

static int alpn_select(SSL *ssl, const unsigned char **out,
		       unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel = NULL;
	unsigned char sel_len = 0;

	if (SSL_select_next_proto(&sel, &sel_len, h11, sizeof(h11) - 1, in,
				  inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	*outlen = sel_len;
	return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *tls_ctx_new(const char *cert, const char *key, char *err,
			    size_t err_len)
{
	SSL_CTX *ctx;
	char why[256];

	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		ssl_errstr(why, sizeof(why));
		seterr(err, err_len, "cannot create a TLS context: %s", why);
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_cipher_list(ctx, SRV_TLS12_CIPHERS)) {
		ssl_errstr(why, sizeof(why));
		seterr(err, err_len, "cannot configure TLS: %s", why);
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE |
					 SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		ssl_errstr(why, sizeof(why));
		seterr(err, err_len,
		       "tls_cert_file: cannot load a PEM certificate chain from '%s': %s",
		       cert, why);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
			ERR_clear_error();
			seterr(err, err_len,
			       "tls_key_file: the key in '%s' does not match the certificate in '%s'",
			       key, cert);
			goto fail;
		}
		ssl_errstr(why, sizeof(why));
		seterr(err, err_len,
		       "tls_key_file: cannot load a PEM private key from '%s': %s",
		       key, why);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		seterr(err, err_len,
		       "tls_key_file: the key in '%s' does not match the certificate in '%s'",
		       key, cert);
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

enum cm_status gw_server_reload_tls(struct gw_server *s, char *err,
				    size_t err_len)
{
	SSL_CTX *ctx;

	if (s->cfg.plain_http) {
		seterr(err, err_len, "plain_http is set: no certificate to reload");
		return CM_EINVAL;
	}
	ctx = tls_ctx_new(s->cert_file, s->key_file, err, err_len);
	if (!ctx)
		return CM_EIO;
	/* live connections keep their reference on the old context */
	SSL_CTX_free(s->ssl_ctx);
	s->ssl_ctx = ctx;
	s->st.tls_reloads++;
	return CM_OK;
}

static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct gw_server *s = arg;
	char err[512];

	if (gw_server_reload_tls(s, err, sizeof(err)) == CM_OK)
		cm_logf(CM_LOG_INFO, "tls_reload", "certificate reloaded");
	else
		cm_logf(CM_LOG_ERROR, "tls_reload",
			"reload failed, keeping the old certificate: %s", err);
}

enum cm_status gw_server_watch_sighup(struct gw_server *s)
{
	if (s->sighup_ev)
		return CM_OK;
	s->sighup_ev = evsignal_new(s->base, SIGHUP, sighup_cb, s);
	if (!s->sighup_ev)
		return CM_ENOMEM;
	if (evsignal_add(s->sighup_ev, NULL) != 0) {
		event_free(s->sighup_ev);
		s->sighup_ev = NULL;
		return CM_EIO;
	}
	return CM_OK;
}

/* ---- connection plumbing ------------------------------------------- */

static void set_timer(struct conn *c, enum timer_kind k, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	c->tkind = k;
	if (k == T_NONE) {
		evtimer_del(c->timer);
		return;
	}
	evtimer_add(c->timer, &tv);
}

static size_t out_pending(const struct conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev));
}

static void conn_free(struct conn *c)
{
	struct gw_server *s = c->srv;
	struct gw_request *r = c->req;

	c->freeing = 1;
	if (r && r->rstate != RS_DONE) {
		s->st.client_gone++;
		if (r->on_close)
			r->on_close(r, r->close_arg);
	}
	c->req = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	event_free(c->timer);
	event_free(c->process_ev);
	bufferevent_free(c->bev); /* closes the socket and frees the SSL */
	gw_http_parser_free(c->parser);
	cm_arena_free(c->arena);
	cm_buf_deinit(&c->wbuf);
	cm_free(c);
	s->st.active--;
}

static void conn_kill_later(struct conn *c)
{
	c->kill = 1;
	event_active(c->process_ev, EV_TIMEOUT, 0);
}

/* After the final response is flushed: shut the write side, then linger. */
static void begin_linger(struct conn *c)
{
	c->state = CS_LINGER;
	if (c->tls) {
		SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

		if (ssl) {
			SSL_shutdown(ssl); /* close_notify; the reply is complete */
			ERR_clear_error();
		}
	} else {
		shutdown(bufferevent_getfd(c->bev), SHUT_WR);
	}
	set_timer(c, T_LINGER, GW_SERVER_LINGER_MS);
}

static enum cm_status default_error(int status, const char *message,
				    const char *path, struct cm_buf *body,
				    const char **content_type, void *ctx)
{
	*content_type = "application/json";
	return cm_buf_printf(body, "{\"error\":\"%s\"}", message);
}

/* Sends an error response produced by the server itself, then closes. */
static void send_error_and_close(struct conn *c, int status, const char *msg)
{
	struct gw_server *s = c->srv;
	const struct gw_http_request *head = gw_http_parser_head(c->parser);
	const char *ctype = "application/json";
	const char *path = head ? head->path : NULL;
	int minor = head ? head->version_minor : 1;
	struct cm_buf body;
	enum cm_status st;

	cm_buf_init(&body, 4096);
	st = s->err_fn ? s->err_fn(status, msg, path, &body, &ctype, s->err_ctx)
		       : default_error(status, msg, path, &body, &ctype, NULL);
	if (st != CM_OK) {
		cm_buf_reset(&body);
		ctype = NULL;
	}
	cm_buf_reset(&c->wbuf);
	if (gw_http_write_head(&c->wbuf, minor, status, ctype, GW_HTTP_BODY_LENGTH,
			       cm_buf_len(&body), 0, NULL, 0) == CM_OK) {
		bufferevent_write(c->bev, cm_buf_data(&c->wbuf), cm_buf_len(&c->wbuf));
		bufferevent_write(c->bev, cm_buf_data(&body), cm_buf_len(&body));
	}
	cm_buf_deinit(&body);
	c->state = CS_CLOSING;
	set_timer(c, T_LINGER, GW_SERVER_LINGER_MS);
	if (out_pending(c) == 0)
		begin_linger(c);
}

static void dispatch(struct conn *c)
{
	struct gw_server *s = c->srv;
	struct gw_request *r;

	r = cm_arena_calloc(c->arena, 1, sizeof(*r));
	if (!r) {
		send_error_and_close(c, 500, "out of memory");
		return;
	}
	r->c = c;
	r->http = gw_http_parser_request(c->parser);
	r->id = ++s->next_req_id;
	r->start_ns = c->first_byte_ns;
	r->keep_alive = r->http->keep_alive;
	r->head_only = r->http->method == GW_HTTP_HEAD;
	c->req = r;
	c->state = CS_HANDLING;
	set_timer(c, T_NONE, 0);
	s->st.requests++;
	s->handler(r, s->ctx);
	if (c->req == r && r->rstate == RS_NEW && !r->on_close) {
		cm_logf(CM_LOG_ERROR, "http_handler",
			"handler returned without a response or an on_close callback");
		if (gw_request_respond(r, 500, "application/json",
				       "{\"error\":\"internal error\"}", 26) != CM_OK)
			conn_kill_later(c);
	}
}

/* Reads as much of the next request as is buffered. */
static void conn_process(struct conn *c)
{
	struct gw_server *s = c->srv;
	struct evbuffer *in = bufferevent_get_input(c->bev);

	while (c->state == CS_READING && evbuffer_get_length(in) > 0) {
		struct evbuffer_iovec v;
		enum gw_http_phase before = gw_http_parser_phase(c->parser);
		enum gw_http_phase after;
		size_t used = 0;
		enum cm_status st;

		if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
			break;
		st = gw_http_parser_feed(c->parser, v.iov_base, v.iov_len, &used);
		evbuffer_drain(in, used);
		after = gw_http_parser_phase(c->parser);
		if (before == GW_HTTP_PHASE_IDLE && after != GW_HTTP_PHASE_IDLE) {
			c->first_byte_ns = cm_mono_ns();
			if (c->tkind == T_IDLE)
				set_timer(c, T_HEADER, s->cfg.header_timeout_ms);
		}
		if (after == GW_HTTP_PHASE_BODY && c->tkind != T_BODY) {
			const struct gw_http_request *h = gw_http_parser_head(c->parser);

			set_timer(c, T_BODY, s->cfg.body_timeout_ms);
			if (h && h->expect_continue && !c->sent_continue) {
				static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

				c->sent_continue = 1;
				bufferevent_write(c->bev, cont, sizeof(cont) - 1);
			}
		}
		if (st == CM_OK) {
			dispatch(c);
			return;
		}
		if (st == CM_EPROTO) {
			const char *msg;
			int code = gw_http_parser_error(c->parser, &msg);

			s->st.http_errors++;
			send_error_and_close(c, code ? code : 400, msg);
			return;
		}
		if (st != CM_AGAIN) {
			send_error_and_close(c, 500, "out of memory");
			return;
		}
	}
}

/* Called after a response is complete. */
static void finish_request(struct conn *c)
{
	struct gw_server *s = c->srv;
	struct gw_request *r = c->req;

	r->rstate = RS_DONE;
	c->req = NULL;
	if (!r->keep_alive) {
		c->state = CS_CLOSING;
		set_timer(c, T_LINGER, GW_SERVER_LINGER_MS);
		/* the write callback starts the linger once the reply is out */
		return;
	}
	gw_http_parser_reset(c->parser);
	cm_arena_reset(c->arena);
	c->sent_continue = 0;
	c->state = CS_READING;
	set_timer(c, T_IDLE, s->cfg.idle_timeout_ms);
	event_active(c->process_ev, EV_TIMEOUT, 0); /* pipelined bytes */
}

static void process_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	if (c->kill) {
		conn_free(c);
		return;
	}
	if (c->state == CS_READING)
		conn_process(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	switch (c->state) {
	case CS_HANDSHAKE:
		c->state = CS_READING;
		/* fall through */
	case CS_READING:
		conn_process(c);
		break;
	case CS_HANDLING:
		break; /* pipelined: waits (bounded by the read watermark) */
	case CS_CLOSING:
	case CS_LINGER:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/* a deferred callback may run after more output was queued: check */
	if (c->state == CS_CLOSING && out_pending(c) == 0)
		begin_linger(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		if (c->state == CS_HANDSHAKE)
			c->state = CS_READING;
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		if (c->state == CS_HANDSHAKE)
			c->srv->st.tls_handshake_failures++;
		if (c->tls)
			ERR_clear_error();
		conn_free(c);
	}
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	struct gw_server_stats *st = &c->srv->st;

	switch (c->tkind) {
	case T_HEADER:
		st->timeouts_header++;
		if (c->state == CS_HANDSHAKE)
			st->tls_handshake_failures++;
		break;
	case T_BODY:
		st->timeouts_body++;
		break;
	case T_IDLE:
		st->timeouts_idle++;
		break;
	case T_LINGER:
	case T_NONE:
		break;
	}
	conn_free(c);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct gw_server *s = arg;
	struct conn *c = NULL;
	SSL *ssl = NULL;
	int one = 1;

	if (s->st.active >= s->cfg.connections) {
		s->st.rejected_connections++;
		close(fd);
		return;
	}
	c = cm_calloc(1, sizeof(*c));
	if (!c)
		goto fail;
	c->srv = s;
	c->tls = !s->cfg.plain_http;
	cm_buf_init(&c->wbuf, s->cfg.header_bytes + 4096);
	c->arena = cm_arena_new(SRV_ARENA_CHUNK, s->arena_cap);
	c->parser = gw_http_parser_new(&s->hlim);
	c->timer = evtimer_new(s->base, timer_cb, c);
	c->process_ev = event_new(s->base, -1, 0, process_cb, c);
	if (!c->arena || !c->parser || !c->timer || !c->process_ev)
		goto fail;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, c->peer,
			  sizeof(c->peer));
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr,
			  c->peer, sizeof(c->peer));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (c->tls) {
		ssl = SSL_new(s->ssl_ctx); /* takes a reference on the context */
		if (!ssl)
			goto fail;
		c->bev = bufferevent_openssl_socket_new(
			s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
			BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		c->state = CS_HANDSHAKE;
	} else {
		c->bev = bufferevent_socket_new(
			s->base, fd, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
		c->state = CS_READING;
	}
	if (!c->bev)
		goto fail;
	ssl = NULL; /* owned by the bufferevent now */
	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	bufferevent_setwatermark(c->bev, EV_READ, 0,
				 s->cfg.header_bytes + SRV_READ_SLACK);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->st.active++;
	s->st.accepted++;
	set_timer(c, T_HEADER, s->cfg.header_timeout_ms);
	return;
fail:
	cm_logf(CM_LOG_ERROR, "http_accept", "out of memory setting up a connection");
	SSL_free(ssl);
	close(fd);
	if (c) {
		if (c->timer)
			event_free(c->timer);
		if (c->process_ev)
			event_free(c->process_ev);
		gw_http_parser_free(c->parser);
		cm_arena_free(c->arena);
		cm_buf_deinit(&c->wbuf);
		cm_free(c);
	}
}

static void accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_server *s = arg;

	evconnlistener_enable(s->listener);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct gw_server *s = arg;
	struct timeval tv = { 0, SRV_ACCEPT_PAUSE_MS * 1000 };
	int e = EVUTIL_SOCKET_ERROR();

	cm_logf(CM_LOG_WARN, "http_accept", "accept failed (%s), pausing %d ms",
		strerror(e), SRV_ACCEPT_PAUSE_MS);
	evconnlistener_disable(l);
	evtimer_add(s->accept_pause, &tv);
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
	seterr(err, err_len, "%s: expected %llu..%llu, found %llu", key, lo, hi, val);
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
		seterr(err, err_len, "listen_addr: expected a numeric IP address, found nothing");
		return CM_EINVAL;
	}
	if (!c->plain_http && (!c->cert_file || !c->key_file)) {
		seterr(err, err_len,
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
			seterr(err, err_len,
			       "listen_addr: expected a numeric IPv4 or IPv6 address, found '%s'",
			       cfg->listen_addr);
			return CM_EINVAL;
		}
	}
	if (cfg->plain_http && !addr_is_loopback(&ss)) {
		seterr(err, err_len,
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
		s->ssl_ctx = tls_ctx_new(s->cert_file, s->key_file, err, err_len);
		if (!s->ssl_ctx) {
			st = CM_EIO;
			goto fail;
		}
	}
	s->accept_pause = evtimer_new(base, accept_resume_cb, s);
	if (!s->accept_pause) {
		st = CM_ENOMEM;
		goto fail;
	}
	s->listener = evconnlistener_new_bind(
		base, accept_cb, s,
		LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
		-1, (struct sockaddr *)&ss, (int)sslen);
	if (!s->listener) {
		seterr(err, err_len, "listen_addr/port: cannot listen on %s port %u: %s",
		       cfg->listen_addr, (unsigned)cfg->port, strerror(errno));
		st = CM_EIO;
		goto fail;
	}
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
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
		conn_free(s->conns);
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
}

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

void gw_request_on_close(struct gw_request *r, gw_close_fn fn, void *arg)
{
	r->on_close = fn;
	r->close_arg = arg;
}

size_t gw_request_out_pending(const struct gw_request *r)
{
	return out_pending(r->c);
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
	struct conn *c = r->c;
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
	struct conn *c = r->c;
	enum cm_status st;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_NEW)
		return CM_EINVAL;
	if (out_pending(c) + len > c->srv->cfg.out_bytes)
		return CM_ELIMIT;
	st = write_head(r, status, content_type, GW_HTTP_BODY_LENGTH, len);
	if (st != CM_OK)
		return st;
	if (!r->head_only && len &&
	    bufferevent_write(c->bev, body, len) != 0) {
		conn_kill_later(c);
		return CM_ENOMEM;
	}
	finish_request(c);
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
	struct conn *c = r->c;
	char hdr[24];
	int n;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_STREAMING)
		return CM_EINVAL;
	if (r->head_only || len == 0)
		return CM_OK;
	if (out_pending(c) + len + sizeof(hdr) + 2 > c->srv->cfg.out_bytes) {
		c->srv->st.output_overflows++;
		conn_kill_later(c);
		return CM_ELIMIT;
	}
	if (r->chunked) {
		n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
		if (bufferevent_write(c->bev, hdr, (size_t)n) != 0 ||
		    bufferevent_write(c->bev, data, len) != 0 ||
		    bufferevent_write(c->bev, "\r\n", 2) != 0) {
			conn_kill_later(c);
			return CM_ENOMEM;
		}
	} else if (bufferevent_write(c->bev, data, len) != 0) {
		conn_kill_later(c);
		return CM_ENOMEM;
	}
	return CM_OK;
}

enum cm_status gw_request_stream_end(struct gw_request *r)
{
	struct conn *c = r->c;

	if (req_gone(r))
		return CM_ECLOSED;
	if (r->rstate != RS_STREAMING)
		return CM_EINVAL;
	if (r->chunked && !r->head_only &&
	    bufferevent_write(c->bev, "0\r\n\r\n", 5) != 0) {
		conn_kill_later(c);
		return CM_ENOMEM;
	}
	finish_request(c);
	return CM_OK;
}
