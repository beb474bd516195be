/*
 * server.h - the gateway's HTTPS listener: libevent + OpenSSL, HTTP/1.1
 * keep-alive, limits and timeouts, one handler callback per request.
 *
 * Owns: the listening socket, the current TLS context, every client
 * connection and its memory.  Runs entirely on the event_base given at
 * creation; nothing here blocks except gw_server_reload_tls(), which reads
 * the two certificate files (operator action on SIGHUP, a few KiB).
 *
 * Connection lifecycle:
 *   accept -> (TLS handshake) -> read a request (gateway/http/http.c) ->
 *   handler(req) -> response (full, or chunked stream) -> next request on
 *   the same connection (keep-alive) or flush + close.
 * Timeouts are deadlines, not inactivity timers, so a client that trickles
 * one byte at a time (slowloris) is cut off when the deadline passes:
 *   header_timeout_ms  from accept (covers the TLS handshake) or from the
 *                      first byte of a later request to the end of headers;
 *   body_timeout_ms    from the end of headers to the end of the body;
 *   idle_timeout_ms    between requests on a kept-alive connection.
 *   write_timeout_ms   while response bytes wait to be sent, the longest
 *                      time without any of them being taken by the client:
 *                      past it the connection is closed (a client that
 *                      stops reading cannot hold a connection and its
 *                      request forever).
 * Pipelining: the next pipelined request is parsed only once the previous
 * response has been sent; input that reaches the read limit meanwhile, or
 * while a request is in the handler's hands, makes the connection close
 * after the response in progress (what arrives is discarded).
 * No deadline runs while the handler owns a request (the dispatcher and its
 * queues have their own).  A timed-out connection is closed without a reply.
 * A client that closes or half-closes its side while the handler owns its
 * request is treated as gone: on_close runs (the dispatcher cancels).
 *
 * Limits: at `connections` open connections a new one takes the place of
 * the oldest connection that never carried an authenticated request
 * (gw_request_mark_trusted), taken from the peer address holding the most
 * connections (stats.evicted_connections): a flood of idle or half-open
 * connections recycles itself and cannot lock others out.  Only when every
 * open connection is trusted is the new one accepted and closed at once
 * (stats.rejected_connections).  `connections_per_peer` (0: none) bounds
 * one address the same way.  At most
 * `out_bytes` bytes of response are buffered per connection: a stream write
 * that would exceed it fails with CM_ELIMIT and the connection is closed
 * (a client that does not read cannot make the gateway hold its reply).
 *
 * TLS: TLS 1.3 preferred, 1.2 minimum, AEAD-only ECDHE cipher list for 1.2,
 * no renegotiation, no compression, ALPN "http/1.1".  A reload builds a new
 * SSL_CTX for new connections; each live connection's SSL holds a reference
 * on the context it was created with (OpenSSL refcounts SSL_CTX), so the old
 * one stays alive until its last connection closes.  A failed reload keeps
 * the old context.  Plain HTTP is only accepted when `plain_http` is set AND
 * the listen address is loopback (127.0.0.0/8, ::1).
 *
 * Config keys (documented in docs/api.md, defaults from common/limits.h):
 *   listen_addr, port, tls_cert_file, tls_key_file, plain_http,
 *   limits.header_bytes, limits.body_bytes, limits.headers,
 *   limits.connections, limits.output_bytes, timeouts.header_ms,
 *   timeouts.body_ms, timeouts.idle_ms.
 */
#ifndef SLUICE_GATEWAY_HTTP_SERVER_H
#define SLUICE_GATEWAY_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/status.h"
#include "gateway/http/http.h"

struct event_base;

#define GW_SERVER_OUT_BYTES_DEFAULT (1024 * 1024)
#define GW_SERVER_LINGER_MS 2000 /* reading and discarding after a final reply */

struct gw_server_config {
	const char *listen_addr;    /* numeric IPv4/IPv6 address (no DNS) */
	uint16_t port;              /* 0: pick a free port (tests) */
	const char *cert_file;      /* PEM chain, leaf first */
	const char *key_file;       /* PEM private key */
	int plain_http;             /* 1: no TLS (loopback only) */
	size_t header_bytes;        /* limits.header_bytes */
	size_t body_bytes;          /* limits.body_bytes */
	uint32_t max_headers;       /* limits.headers */
	uint32_t connections;       /* limits.connections */
	uint32_t connections_per_peer; /* limits.connections_per_peer; 0: none */
	size_t preauth_body_bytes;  /* limits.preauth_body_bytes: bodies on untrusted connections, all together */
	size_t unauth_body_bytes;   /* limits.unauthenticated_body_bytes: larger bodies wait for the key check */
	size_t out_bytes;           /* limits.output_bytes, per connection */
	uint32_t header_timeout_ms; /* timeouts.header_ms */
	uint32_t body_timeout_ms;   /* timeouts.body_ms */
	uint32_t idle_timeout_ms;   /* timeouts.idle_ms */
	uint32_t write_timeout_ms;  /* timeouts.write_ms: unsent output without progress */
};

/* Fills `c` with the defaults of common/limits.h (address 127.0.0.1:8443). */
void gw_server_config_defaults(struct gw_server_config *c);

struct gw_server;
struct gw_request;

/* Called on the loop for each complete request. */
typedef void (*gw_handler_fn)(struct gw_request *req, void *ctx);

/*
 * Called once when the connection of a request that has not finished its
 * response goes away (client disconnect, output overflow, server free).
 * `req` is freed when the callback returns; no gw_request_* call on it may
 * follow (responding from inside the callback returns CM_ECLOSED).
 */
typedef void (*gw_close_fn)(struct gw_request *req, void *arg);

/*
 * Renders the body of an error the server produces itself (parser errors,
 * handler failures) in the API's format for `path` (NULL when unknown).
 * Writes into `body` and sets *content_type (a static string).
 */
typedef enum cm_status (*gw_error_fn)(int status, const char *message,
				      const char *path, struct cm_buf *body,
				      const char **content_type, void *ctx);

struct gw_server_stats {
	uint64_t accepted;             /* connections accepted and kept */
	uint64_t active;               /* open now */
	uint64_t rejected_connections; /* over the limits with every connection trusted */
	uint64_t evicted_connections;  /* untrusted ones closed to make room */
	uint64_t preauth_overflows;    /* 503: unauthenticated bodies over preauth_body_bytes */
	uint64_t preauth_body_buffered; /* now: body bytes held by untrusted connections */
	uint64_t head_checks;          /* key checks before a body */
	uint64_t head_refused;         /* refused before the body was read */
	uint64_t tls_handshake_failures;
	uint64_t requests;             /* complete requests dispatched */
	uint64_t http_errors;          /* requests refused by the parser */
	uint64_t timeouts_header;
	uint64_t timeouts_body;
	uint64_t timeouts_idle;
	uint64_t timeouts_write;       /* unsent output made no progress for write_timeout_ms */
	uint64_t pipeline_overflows;   /* pipelined past the read limit: closed after the response */
	uint64_t output_overflows;     /* closed for exceeding out_bytes */
	uint64_t client_gone;          /* closed with a request unfinished */
	uint64_t tls_reloads;          /* successful reloads */
};

/*
 * Validates the config, loads the certificate (unless plain_http), binds and
 * listens.  On failure returns CM_EINVAL (config), CM_EIO (bind, files) or
 * CM_ENOMEM with a message in err naming the key and what was found.
 */
enum cm_status gw_server_new(struct event_base *base,
			     const struct gw_server_config *cfg,
			     gw_handler_fn handler, void *ctx,
			     struct gw_server **out, char *err,
			     size_t err_len) CM_WUR;

/* Closes the listener and every connection (on_close for unfinished requests). */
void gw_server_free(struct gw_server *s);

void gw_server_set_error_renderer(struct gw_server *s, gw_error_fn fn, void *ctx);

/*
 * The key check before the body: when a request's headers are complete on
 * a connection that has not authenticated yet and its body is larger than
 * `unauth_body_bytes` (chunked bodies always), `check` is called with the
 * request head and reading stops until it answers gw_head_verdict(): ok,
 * and the body is read (the connection is trusted from then on); refused,
 * and the error is answered before any body byte is read, then the
 * connection closed.  `cancel` is called instead when the connection goes
 * away while a check is pending (no verdict may follow).  Without a check
 * function bodies are read before the handler sees anything.
 */
struct gw_head;
typedef void (*gw_head_fn)(struct gw_head *h, void *ctx);
void gw_server_set_head_check(struct gw_server *s, gw_head_fn check, gw_head_fn cancel, void *ctx);
/* A header of the pending request (NULL when absent). */
const char *gw_head_header(const struct gw_head *h, const char *name);
/* The handler's slot for its own state of the check (e.g. a lookup). */
void **gw_head_user(struct gw_head *h);
/* ok != 0: read the body; else answer `status` with `message` and close. */
void gw_head_verdict(struct gw_head *h, int ok, int status, const char *message);

/* The bound port (useful with port 0). */
uint16_t gw_server_port(const struct gw_server *s);

/*
 * Reloads cert_file and key_file into a new TLS context for new
 * connections; existing connections keep theirs.  On failure the old
 * context stays in use and err says why.  CM_EINVAL with plain_http.
 */
enum cm_status gw_server_reload_tls(struct gw_server *s, char *err,
				    size_t err_len) CM_WUR;

/* Installs a SIGHUP event on the server's base that calls reload_tls. */
enum cm_status gw_server_watch_sighup(struct gw_server *s) CM_WUR;

void gw_server_get_stats(const struct gw_server *s, struct gw_server_stats *out);

/* ---- the request handed to the handler ------------------------------- */

/* Parsed view; valid until the response is finished or on_close returns. */
const struct gw_http_request *gw_request_http(const struct gw_request *r);
enum gw_http_method gw_request_method(const struct gw_request *r);
const char *gw_request_path(const struct gw_request *r);
const char *gw_request_header(const struct gw_request *r, const char *name);
const uint8_t *gw_request_body(const struct gw_request *r, size_t *len);
/* Server-unique request number (for logs and the proto request id). */
uint64_t gw_request_id(const struct gw_request *r);
/* Monotonic ns when the request's first byte was read. */
int64_t gw_request_start_ns(const struct gw_request *r);
/* Memory freed when the request ends (capped; see server.c). */
struct cm_arena *gw_request_arena(struct gw_request *r);
/* Peer address as text ("127.0.0.1"), for logs. */
const char *gw_request_peer(const struct gw_request *r);

void gw_request_on_close(struct gw_request *r, gw_close_fn fn, void *arg);

/* Adds a response header (copied); before respond/stream_start.  Max 16. */
/*
 * Marks the request's connection as trusted (it carried a request that
 * passed authentication): it is never evicted to make room for new
 * connections.
 */
void gw_request_mark_trusted(struct gw_request *r);

enum cm_status gw_request_add_header(struct gw_request *r, const char *name,
				     const char *value) CM_WUR;

/*
 * Sends a complete response.  The request is finished when this returns
 * CM_OK (do not touch `r` again).  CM_ELIMIT: the body is larger than
 * out_bytes (nothing sent; respond again with an error).  CM_ECLOSED: the
 * connection is going away (on_close follows or already ran).
 */
enum cm_status gw_request_respond(struct gw_request *r, int status,
				  const char *content_type, const void *body,
				  size_t len) CM_WUR;

/*
 * Starts a streamed response: chunked for HTTP/1.1, close-delimited for
 * HTTP/1.0.  Then stream_write any number of times and stream_end once
 * (which finishes the request).  A write over out_bytes returns CM_ELIMIT:
 * the connection is being closed and on_close will be called.
 */
enum cm_status gw_request_stream_start(struct gw_request *r, int status,
				       const char *content_type) CM_WUR;
enum cm_status gw_request_stream_write(struct gw_request *r, const void *data,
				       size_t len) CM_WUR;
enum cm_status gw_request_stream_end(struct gw_request *r) CM_WUR;

/* Response bytes buffered on the connection, not yet sent. */
size_t gw_request_out_pending(const struct gw_request *r);

#endif
