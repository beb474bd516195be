/*
 * conn.c - the listener's connections: accept (bounded, paused on
 * EMFILE), TLS handshake, HTTP parsing, the header, body and idle timers,
 * handing one request at a time to the handler, and close with linger.
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

/* ---- connection plumbing ------------------------------------------- */

/*
 * Bodies are read before the request reaches the dispatcher (and its key
 * check): what connections that have not authenticated yet buffer is
 * counted together and bounded by limits.preauth_body_bytes (issue 13,
 * finding 2: 150 connections of 4 MiB bodies added 511 MiB).  Trusted
 * connections (an earlier request passed authentication) are not counted.
 */
void gw_srv_body_release(struct gw_conn *c)
{
	c->srv->untrusted_body -= c->body_held;
	c->body_held = 0;
}

void gw_srv_body_account(struct gw_conn *c)
{
	size_t now;

	if (c->trusted)
		return;
	now = gw_http_parser_body_bytes(c->parser);
	c->srv->untrusted_body += now - c->body_held;
	c->body_held = now;
}

static void set_timer(struct gw_conn *c, enum timer_kind k, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	c->tkind = k;
	if (k == T_NONE) {
		evtimer_del(c->timer);
		return;
	}
	evtimer_add(c->timer, &tv);
}

size_t gw_srv_out_pending(const struct gw_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev));
}

void gw_srv_conn_free(struct gw_conn *c)
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
	gw_srv_body_release(c);
	if (c->head.pending && s->head_cancel) {
		c->head.pending = 0;
		s->head_cancel(&c->head, s->head_ctx);
	}
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

void gw_srv_conn_kill_later(struct gw_conn *c)
{
	c->kill = 1;
	event_active(c->process_ev, EV_TIMEOUT, 0);
}

/* After the final response is flushed: shut the write side, then linger. */
static void begin_linger(struct gw_conn *c)
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
static void send_error_and_close(struct gw_conn *c, int status, const char *msg)
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
	if (gw_srv_out_pending(c) == 0)
		begin_linger(c);
}

static void conn_dispatch(struct gw_conn *c)
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
			gw_srv_conn_kill_later(c);
	}
}

/* Reading stops while the input is at the read limit and nothing consumes
 * it (a request in the handler's hands, a response still being sent):
 * otherwise a readable socket the bufferevent will not read wakes the loop
 * over and over. */
/*
 * Input at the read limit while nothing consumes it (a request in the
 * handler's hands, a response still being sent) is more pipelining than
 * any client needs: the connection takes no further request, closes after
 * the response in progress, and discards what arrives meanwhile.  Reading
 * goes on (so that a client that leaves is still noticed and its request
 * cancelled), and the loop never spins on input it will not read.
 */
static void pipeline_overflow(struct gw_conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);

	if (!c->discard_input &&
	    evbuffer_get_length(in) >= c->srv->cfg.header_bytes + SRV_READ_SLACK) {
		c->discard_input = 1;
		c->srv->st.pipeline_overflows++;
	}
	if (c->discard_input)
		evbuffer_drain(in, evbuffer_get_length(in));
}

/* `100 Continue`, once, when the request asked for it (Expect). */
static void send_continue(struct gw_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	const struct gw_http_request *h = gw_http_parser_head(c->parser);

	if (h && h->expect_continue && !c->sent_continue) {
		c->sent_continue = 1;
		bufferevent_write(c->bev, cont, sizeof(cont) - 1);
	}
}

/* A body this large on a connection not yet trusted waits for the key. */
static int head_check_needed(const struct gw_conn *c, const struct gw_http_request *h)
{
	const struct gw_server *s = c->srv;

	return s->head_check && !c->trusted && !c->head.done && h &&
	       (h->chunked || h->content_length > s->cfg.unauth_body_bytes);
}

static void head_check_start(struct gw_conn *c)
{
	struct gw_server *s = c->srv;

	c->head.c = c;
	c->head.user = NULL;
	c->head.pending = 1;
	c->head.done = 1;
	s->st.head_checks++;
	/* nothing is read meanwhile (bounded by the check's own deadline) */
	bufferevent_disable(c->bev, EV_READ);
	s->head_check(&c->head, s->head_ctx);
}

const char *gw_head_header(const struct gw_head *h, const char *name)
{
	const struct gw_http_request *r = gw_http_parser_head(h->c->parser);

	return r ? gw_http_request_header(r, name) : NULL;
}

void **gw_head_user(struct gw_head *h)
{
	return &h->user;
}

void gw_head_verdict(struct gw_head *h, int ok, int status, const char *message)
{
	struct gw_conn *c = h->c;

	if (!h->pending)
		return;
	h->pending = 0;
	if (!ok) {
		c->srv->st.head_refused++;
		send_error_and_close(c, status, message);
		return;
	}
	gw_srv_body_release(c);
	c->trusted = 1;
	send_continue(c);
	bufferevent_enable(c->bev, EV_READ);
	event_active(c->process_ev, EV_TIMEOUT, 0);
}

/* Reads as much of the next request as is buffered. */
static void conn_process(struct gw_conn *c)
{
	struct gw_server *s = c->srv;
	struct evbuffer *in = bufferevent_get_input(c->bev);

	if (c->wait_drain) {
		pipeline_overflow(c);
		return;
	}
	if (c->head.pending)
		return; /* reading is off until the verdict */
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
		gw_srv_body_account(c);
		if (s->cfg.preauth_body_bytes && s->untrusted_body > s->cfg.preauth_body_bytes) {
			s->st.preauth_overflows++;
			gw_srv_body_release(c);
			send_error_and_close(c, 503, "too many request bytes in flight; retry later");
			return;
		}
		after = gw_http_parser_phase(c->parser);
		if (before == GW_HTTP_PHASE_IDLE && after != GW_HTTP_PHASE_IDLE) {
			c->first_byte_ns = cm_mono_ns();
			if (c->tkind == T_IDLE)
				set_timer(c, T_HEADER, s->cfg.header_timeout_ms);
		}
		if (after == GW_HTTP_PHASE_BODY && c->tkind != T_BODY) {
			const struct gw_http_request *h = gw_http_parser_head(c->parser);

			set_timer(c, T_BODY, s->cfg.body_timeout_ms);
			if (head_check_needed(c, h)) {
				head_check_start(c);
				return;
			}
			send_continue(c);
		}
		if (st == CM_OK) {
			conn_dispatch(c);
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
void gw_srv_finish_request(struct gw_conn *c)
{
	struct gw_server *s = c->srv;
	struct gw_request *r = c->req;

	r->rstate = RS_DONE;
	c->req = NULL;
	gw_srv_body_release(c);
	if (!r->keep_alive || c->discard_input) {
		c->state = CS_CLOSING;
		set_timer(c, T_LINGER, GW_SERVER_LINGER_MS);
		/* the write callback starts the linger once the reply is out */
		return;
	}
	gw_srv_body_release(c);
	gw_http_parser_reset(c->parser);
	cm_arena_reset(c->arena);
	c->sent_continue = 0;
	c->head.done = 0;
	c->state = CS_READING;
	set_timer(c, T_IDLE, s->cfg.idle_timeout_ms);
	/* pipelined bytes: once this response is out (write_cb), so that a
	 * client that does not read cannot make us queue answer after answer */
	if (gw_srv_out_pending(c) > 0)
		c->wait_drain = 1;
	else
		event_active(c->process_ev, EV_TIMEOUT, 0);
}

static void process_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;

	if (c->kill) {
		gw_srv_conn_free(c);
		return;
	}
	if (c->state == CS_READING)
		conn_process(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct gw_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	switch (c->state) {
	case CS_HANDSHAKE:
		c->state = CS_READING;
		/* fall through */
	case CS_READING:
		conn_process(c);
		break;
	case CS_HANDLING:
		pipeline_overflow(c); /* pipelined: waits (bounded by the read limit) */
		break;
	case CS_CLOSING:
	case CS_LINGER:
		evbuffer_drain(in, evbuffer_get_length(in));
		break;
	}
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct gw_conn *c = arg;

	/* a deferred callback may run after more output was queued: check */
	if (c->state == CS_CLOSING && gw_srv_out_pending(c) == 0)
		begin_linger(c);
	if (c->wait_drain && gw_srv_out_pending(c) == 0) {
		c->wait_drain = 0;
		if (c->discard_input)
			begin_linger(c);
		else
			event_active(c->process_ev, EV_TIMEOUT, 0);
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_conn *c = arg;

	if (what & BEV_EVENT_CONNECTED) {
		if (c->state == CS_HANDSHAKE)
			c->state = CS_READING;
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
		if (c->state == CS_HANDSHAKE)
			c->srv->st.tls_handshake_failures++;
		if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_WRITING))
			c->srv->st.timeouts_write++;
		if (c->tls)
			ERR_clear_error();
		gw_srv_conn_free(c);
	}
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_conn *c = arg;
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
	gw_srv_conn_free(c);
}

/* A peer's address as the connection records it. */
static void peer_of(const struct sockaddr *sa, char out[INET6_ADDRSTRLEN])
{
	out[0] = '\0';
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, INET6_ADDRSTRLEN);
	else if (sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out,
			  INET6_ADDRSTRLEN);
}

/*
 * The untrusted connection to close to make room: with `peer`, that
 * peer's oldest; otherwise the oldest of the peer that holds the most
 * connections.  *n_peer counts `peer`'s connections.  NULL when every
 * candidate is trusted.  (The list is newest first; one pass, a small
 * table of the peers seen.)
 */
static struct gw_conn *eviction_victim(struct gw_server *s, const char *peer, uint32_t *n_peer)
{
	enum { SLOTS = 256 };
	struct { const char *peer; uint32_t n; struct gw_conn *oldest; } t[SLOTS];
	struct gw_conn *best = NULL;
	uint32_t best_n = 0, used = 0;

	*n_peer = 0;
	memset(t, 0, sizeof(t));
	for (struct gw_conn *c = s->conns; c; c = c->next) {
		uint32_t h = 2166136261u, k;

		if (strcmp(c->peer, peer) == 0)
			(*n_peer)++;
		if (peer[0] && strcmp(c->peer, peer) != 0)
			continue;
		for (const char *p = c->peer; *p; p++)
			h = (h ^ (uint8_t)*p) * 16777619u;
		for (k = h % SLOTS; t[k].peer && strcmp(t[k].peer, c->peer) != 0; k = (k + 1) % SLOTS)
			;
		if (!t[k].peer) {
			if (used == SLOTS - 1)
				continue; /* more distinct peers than slots: the rest are not counted */
			t[k].peer = c->peer;
			used++;
		}
		t[k].n++;
		/* a request in the handler's hands is not cut short */
		if (!c->trusted && !c->freeing && !c->kill && c->state != CS_HANDLING)
			t[k].oldest = c;
		if (t[k].oldest && t[k].n > best_n) {
			best_n = t[k].n;
			best = t[k].oldest;
		}
	}
	return best;
}

/*
 * Closes one untrusted connection (of `peer`, when `peer` holds `limit`
 * connections or more; else of the heaviest peer) to make room for a new
 * one.  0 when there is room now, -1 when every candidate is trusted.
 */
static int make_room(struct gw_server *s, const char *peer, uint32_t limit)
{
	uint32_t n_peer = 0;
	struct gw_conn *v = eviction_victim(s, peer, &n_peer);

	if (peer[0] && n_peer < limit)
		return 0; /* this address is under its own limit */
	if (!v)
		return -1;
	s->st.evicted_connections++;
	gw_srv_conn_free(v);
	return 0;
}

void gw_srv_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct gw_server *s = arg;
	struct gw_conn *c = NULL;
	SSL *ssl = NULL;
	int one = 1;
	char peer[INET6_ADDRSTRLEN];

	peer_of(sa, peer);
	/* room for it: first within its address's limit, then overall */
	if ((s->cfg.connections_per_peer && s->st.active >= s->cfg.connections_per_peer &&
	     make_room(s, peer, s->cfg.connections_per_peer) != 0) ||
	    (s->st.active >= s->cfg.connections && make_room(s, "", 0) != 0)) {
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
	memcpy(c->peer, peer, sizeof(c->peer));
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
	if (s->cfg.write_timeout_ms) {
		struct timeval wtv = { s->cfg.write_timeout_ms / 1000,
				       (s->cfg.write_timeout_ms % 1000) * 1000 };

		bufferevent_set_timeouts(c->bev, NULL, &wtv);
	}
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

void gw_srv_accept_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_server *s = arg;

	evconnlistener_enable(s->listener);
}

void gw_srv_accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct gw_server *s = arg;
	struct timeval tv = { 0, SRV_ACCEPT_PAUSE_MS * 1000 };
	int e = EVUTIL_SOCKET_ERROR();

	cm_logf(CM_LOG_WARN, "http_accept", "accept failed (%s), pausing %d ms",
		strerror(e), SRV_ACCEPT_PAUSE_MS);
	evconnlistener_disable(l);
	evtimer_add(s->accept_pause, &tv);
}
