/*
 * internal.h - what the files of the gateway's HTTP listener share: the
 * server, its connections and the request handed to a handler.  Nothing
 * outside gateway/http/ includes it.
 *
 * server.c   the listener's life: configuration checks, new, free
 * tls.c      the TLS context and its reload on SIGHUP
 * conn.c     connections: accept, TLS handshake, parsing, timeouts, close
 * request.c  the request API a handler answers through (gw_request_*)
 *
 * Each connection is a `struct gw_conn` with a bufferevent (OpenSSL or plain
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
 *     is bounded by the read high-watermark; more than that (while a request
 *     is handled or its response is still being sent) closes the
 *     connection after the response in progress;
 *   - on_close is called at most once, and only for a request whose
 *     response is unfinished.
 */
#ifndef SLUICE_GATEWAY_HTTP_INTERNAL_H
#define SLUICE_GATEWAY_HTTP_INTERNAL_H

#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "common/arena.h"
#include "common/buf.h"
#include "gateway/http/http.h"
#include "gateway/http/server.h"

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

struct gw_conn;

struct gw_request {
	struct gw_conn *c;
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

struct gw_conn {
	struct gw_server *srv;
	struct gw_conn *prev, *next;
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
	int wait_drain;            /* the next pipelined request waits for the output */
	int discard_input;         /* pipelined past the read limit: close after this response */
	int trusted;               /* carried an authenticated request: never evicted */
	size_t body_held;          /* body bytes counted in srv->untrusted_body */
	struct gw_head {
		struct gw_conn *c;
		void *user;        /* the check's own state */
		int pending;       /* reading waits for the verdict */
		int done;          /* this request's head was checked */
	} head;
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
	gw_head_fn head_check, head_cancel;
	void *head_ctx;
	struct gw_http_limits hlim;
	size_t arena_cap;
	struct gw_conn *conns;
	size_t untrusted_body;     /* body bytes buffered on untrusted connections */
	struct gw_server_stats st;
	uint64_t next_req_id;
	uint16_t port;
};

/* conn.c: the listener callbacks. */
void gw_srv_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg);
void gw_srv_accept_error_cb(struct evconnlistener *l, void *arg);
void gw_srv_accept_resume_cb(evutil_socket_t fd, short what, void *arg);
/* conn.c: the body bytes of a connection counted (or, once it is trusted or
 * its request is over, released) against limits.preauth_body_bytes. */
void gw_srv_body_account(struct gw_conn *c);
void gw_srv_body_release(struct gw_conn *c);
/* conn.c: a connection's end (only from an event callback), a deferred close,
 * the end of a response, and the bytes still queued to the client. */
void gw_srv_conn_free(struct gw_conn *c);
void gw_srv_conn_kill_later(struct gw_conn *c);
void gw_srv_finish_request(struct gw_conn *c);
size_t gw_srv_out_pending(const struct gw_conn *c);
/* Formats into err[len] (nothing when err is NULL). */
void gw_srv_seterr(char *err, size_t len, const char *fmt, ...) CM_PRINTF(3, 4);
/* tls.c: a server context for cert and key (TLS 1.2 minimum, ALPN http/1.1). */
SSL_CTX *gw_srv_tls_ctx_new(const char *cert, const char *key, char *err,
			    size_t err_len);

#endif
