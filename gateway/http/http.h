/*
 * http.h - incremental HTTP/1.1 request parser and response writers.
 *
 * Owns: the bytes of one request at a time (header block and body, each in
 * a capped cm_buf).  No I/O, no libevent: the server feeds it what it reads
 * and copies what the writers produce into the connection.  Runs on the
 * gateway's event loop; not thread-safe.
 *
 * Parsing (RFC 9112, strict on purpose: the gateway is an edge that other
 * proxies may sit in front of, so anything ambiguous is refused):
 *   - request line `METHOD SP origin-form SP HTTP/1.x CRLF`; the target must
 *     start with '/' (or be `*` for OPTIONS); HTTP/1.0 and 1.1 only (505).
 *     Empty lines before the request line are skipped (RFC 9112 2.2).
 *   - lines end with CRLF; a bare LF or CR, a control byte, NUL, a space
 *     before the colon or an obsolete folded line (starting with SP/HTAB)
 *     is 400.  Header names compare case-insensitively.
 *   - the whole header block (request line, headers, final CRLF) is capped
 *     at limits.header_bytes and limits.max_headers: over either -> 431.
 *   - Content-Length: digits only; a second Content-Length header (even with
 *     the same value) -> 400; a value above limits.body_bytes -> 413, decided
 *     from the header alone BEFORE any body byte is read.
 *   - Transfer-Encoding: only exactly `chunked` is supported (anything else
 *     -> 501); chunked together with Content-Length -> 400 (smuggling);
 *     Transfer-Encoding in an HTTP/1.0 request -> 400.  Chunked bodies are
 *     de-chunked into the body buffer and the size cap is checked at every
 *     chunk-size line before the chunk's data is read -> 413.  Chunk
 *     extensions are skipped (bounded by the header cap); trailer fields are
 *     read, counted against the header cap, and discarded.
 *   - HTTP/1.1 requires exactly one Host header (400 otherwise); more than
 *     one Host is 400 in 1.0 too.  More than one Authorization is 400, and
 *     so is a NUL anywhere in the request line.
 *   - Expect: 100-continue sets `expect_continue` (the server answers
 *     `100 Continue` before reading the body); any other expectation -> 417.
 *   - keep-alive: HTTP/1.1 keeps the connection unless `Connection: close`;
 *     HTTP/1.0 closes unless `Connection: keep-alive`.
 *
 * Pipelining: gw_http_parser_feed() stops consuming at the end of one
 * request; the bytes after it stay with the caller until the response has
 * been written and gw_http_parser_reset() called.  One request at a time.
 *
 * Errors: once the parser fails it stays failed; gw_http_parser_error()
 * gives the status to answer with (400, 413, 417, 431, 501, 505) and a short
 * message that never quotes request bytes.  The connection must be closed
 * after the error response.
 */
#ifndef SLUICE_GATEWAY_HTTP_HTTP_H
#define SLUICE_GATEWAY_HTTP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"

#define GW_HTTP_MAX_HEADERS_DEFAULT 100

enum gw_http_method {
	GW_HTTP_OTHER = 0,
	GW_HTTP_GET,
	GW_HTTP_HEAD,
	GW_HTTP_POST,
	GW_HTTP_PUT,
	GW_HTTP_DELETE,
	GW_HTTP_OPTIONS,
	GW_HTTP_PATCH,
};

const char *gw_http_method_str(enum gw_http_method m);

struct gw_http_limits {
	size_t header_bytes;  /* request line + headers + CRLF (+ trailers) */
	size_t body_bytes;    /* decoded body */
	uint32_t max_headers; /* header fields per request */
};

struct gw_http_header {
	const char *name;  /* NUL-terminated, as sent (compare case-insensitively) */
	size_t name_len;
	const char *value; /* NUL-terminated, surrounding whitespace removed */
	size_t value_len;
};

/*
 * A parsed request.  Every pointer borrows from the parser and is valid
 * until gw_http_parser_reset() or gw_http_parser_free().
 */
struct gw_http_request {
	enum gw_http_method method;
	const char *method_str;
	const char *target;      /* as sent: path [? query] */
	size_t target_len;
	const char *path;        /* the target up to '?', NUL-terminated */
	size_t path_len;
	const char *query;       /* after '?', NUL-terminated; "" when none */
	int version_minor;       /* 0: HTTP/1.0, 1: HTTP/1.1 */
	uint32_t n_headers;
	const struct gw_http_header *headers;
	int keep_alive;          /* the client allows another request after this */
	int chunked;             /* the body came with Transfer-Encoding: chunked */
	int expect_continue;
	int has_content_length;
	uint64_t content_length;
	const uint8_t *body;     /* NUL-terminated (not counted) */
	size_t body_len;
};

/* Where the parser stands; the server picks its timeout from this. */
enum gw_http_phase {
	GW_HTTP_PHASE_IDLE = 0,  /* no byte of a request yet */
	GW_HTTP_PHASE_HEADERS,   /* inside the request line / headers */
	GW_HTTP_PHASE_BODY,      /* headers complete, body incomplete */
	GW_HTTP_PHASE_DONE,      /* a complete request is available */
	GW_HTTP_PHASE_ERROR,
};

struct gw_http_parser;

/* NULL on allocation failure.  Limits are copied. */
struct gw_http_parser *gw_http_parser_new(const struct gw_http_limits *lim);
void gw_http_parser_free(struct gw_http_parser *p);

/*
 * Feeds `len` bytes; *consumed says how many were used (the rest belong to
 * the next request).  Returns CM_OK when a request is complete
 * (gw_http_parser_request()), CM_AGAIN when more bytes are needed (all were
 * consumed), CM_EPROTO when the request is refused (see
 * gw_http_parser_error()), CM_ENOMEM.  Once complete or failed, further
 * feeds consume nothing and return the same status.
 */
enum cm_status gw_http_parser_feed(struct gw_http_parser *p, const void *data,
				   size_t len, size_t *consumed) CM_WUR;

/* The complete request, NULL unless the last feed returned CM_OK. */
const struct gw_http_request *gw_http_parser_request(const struct gw_http_parser *p);

/* The request head once the headers are complete (phase BODY or DONE). */
const struct gw_http_request *gw_http_parser_head(const struct gw_http_parser *p);

enum gw_http_phase gw_http_parser_phase(const struct gw_http_parser *p);

/* Body bytes buffered so far for the current request. */
size_t gw_http_parser_body_bytes(const struct gw_http_parser *p);

/* Status code for a failed parse (0 when not failed), and its message. */
int gw_http_parser_error(const struct gw_http_parser *p, const char **msg);

/* Forgets the current request (keeps allocations) to parse the next one. */
void gw_http_parser_reset(struct gw_http_parser *p);

/* Case-insensitive lookup of the first header named `name`; NULL if absent. */
const char *gw_http_request_header(const struct gw_http_request *r,
				   const char *name);

/* ---- response writers ------------------------------------------------ */

/* "OK", "Not Found", ...; "Unknown" for codes not in the table. */
const char *gw_http_reason(int status);

enum gw_http_body_mode {
	GW_HTTP_BODY_LENGTH,   /* Content-Length: content_length */
	GW_HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked (HTTP/1.1 only) */
	GW_HTTP_BODY_CLOSE,    /* body ends when the connection closes (HTTP/1.0 stream) */
};

/* One extra response header; name and value must not contain CR or LF. */
struct gw_http_out_header {
	const char *name;
	const char *value;
};

/*
 * Appends a status line and headers, ending with the empty line:
 * `HTTP/1.<minor> status reason`, Date is not sent; Content-Type when
 * non-NULL; Content-Length or Transfer-Encoding per `mode`; `Connection:
 * close` when !keep_alive (or `Connection: keep-alive` for HTTP/1.0 when
 * kept); then `extra`.  CM_EINVAL when an extra header contains CR/LF,
 * CM_ELIMIT at the buffer's cap (the buffer is then left as it was).
 */
enum cm_status gw_http_write_head(struct cm_buf *out, int version_minor,
				  int status, const char *content_type,
				  enum gw_http_body_mode mode,
				  uint64_t content_length, int keep_alive,
				  const struct gw_http_out_header *extra,
				  size_t n_extra) CM_WUR;

/* Appends one chunk (`<hex len>\r\n data \r\n`); len 0 appends nothing. */
enum cm_status gw_http_write_chunk(struct cm_buf *out, const void *data,
				   size_t len) CM_WUR;

/* Appends the last chunk `0\r\n\r\n`. */
enum cm_status gw_http_write_last_chunk(struct cm_buf *out) CM_WUR;

#endif
