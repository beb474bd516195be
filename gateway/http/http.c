/*
 * http.c - incremental HTTP/1.1 request parser and response writers (see
 * http.h for the accepted grammar and the status of every refusal).
 *
 * The header block is accumulated in a capped buffer until CRLF CRLF, then
 * parsed in place (names and values NUL-terminated inside the buffer).  The
 * body goes to a second capped buffer; chunked bodies run through a small
 * byte state machine.  Nothing here allocates per byte: the header array is
 * sized once from limits.max_headers.
 */
#include "gateway/http/http.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"

#define HTTP_MAX_LEADING_EMPTY 4      /* CR/LF bytes skipped before a request */
#define HTTP_MAX_CHUNK_LINE 1024      /* chunk-size line incl. extensions */
#define HTTP_BODY_KEEP_ALLOC (64 * 1024) /* body memory kept between requests */

enum chunk_state {
	CH_SIZE = 0,
	CH_EXT,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER_START,
	CH_TRAILER,
	CH_TRAILER_LF,
	CH_END_LF,
};

struct gw_http_parser {
	struct gw_http_limits lim;
	enum gw_http_phase phase;
	struct cm_buf head;          /* raw header block, cap lim.header_bytes */
	unsigned crlf_state;         /* 0..3: progress through "\r\n\r\n" */
	unsigned leading;            /* empty-line bytes skipped */
	struct gw_http_header *hdrs; /* lim.max_headers entries */
	struct cm_buf body;          /* decoded body, cap lim.body_bytes */
	struct cm_buf path;          /* copy of the target's path when it has a query */
	struct gw_http_request req;
	int headers_done;
	int err_status;
	const char *err_msg;
	/* chunked decoding */
	enum chunk_state cstate;
	uint64_t chunk_left;
	unsigned chunk_digits;
	size_t line_len;
	size_t trailer_bytes;
};

/* ---- small helpers ------------------------------------------------- */

static const char *const method_names[] = {
	[GW_HTTP_OTHER] = "OTHER", [GW_HTTP_GET] = "GET",
	[GW_HTTP_HEAD] = "HEAD",   [GW_HTTP_POST] = "POST",
	[GW_HTTP_PUT] = "PUT",     [GW_HTTP_DELETE] = "DELETE",
	[GW_HTTP_OPTIONS] = "OPTIONS", [GW_HTTP_PATCH] = "PATCH",
};

const char *gw_http_method_str(enum gw_http_method m)
{
	if ((unsigned)m >= sizeof(method_names) / sizeof(method_names[0]))
		return "OTHER";
	return method_names[m];
}

static enum gw_http_method method_from(const char *s)
{
	for (unsigned i = 1; i < sizeof(method_names) / sizeof(method_names[0]); i++)
		if (strcmp(s, method_names[i]) == 0)
			return (enum gw_http_method)i;
	return GW_HTTP_OTHER;
}

/* RFC 9110 tchar */
static int is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	    (c >= 'A' && c <= 'Z'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int is_value_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static enum cm_status http_fail(struct gw_http_parser *p, int status, const char *msg)
{
	p->phase = GW_HTTP_PHASE_ERROR;
	p->err_status = status;
	p->err_msg = msg;
	return CM_EPROTO;
}

/* Case-insensitive comparison of a token list element. */
static int token_eq(const char *s, size_t n, const char *tok)
{
	return strlen(tok) == n && strncasecmp(s, tok, n) == 0;
}

/* ---- lifecycle ----------------------------------------------------- */

struct gw_http_parser *gw_http_parser_new(const struct gw_http_limits *lim)
{
	struct gw_http_parser *p = cm_calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->lim = *lim;
	if (p->lim.max_headers == 0)
		p->lim.max_headers = GW_HTTP_MAX_HEADERS_DEFAULT;
	p->hdrs = cm_calloc(p->lim.max_headers, sizeof(*p->hdrs));
	if (!p->hdrs) {
		cm_free(p);
		return NULL;
	}
	cm_buf_init(&p->head, p->lim.header_bytes);
	cm_buf_init(&p->body, p->lim.body_bytes);
	cm_buf_init(&p->path, p->lim.header_bytes);
	return p;
}

void gw_http_parser_free(struct gw_http_parser *p)
{
	if (!p)
		return;
	cm_buf_deinit(&p->head);
	cm_buf_deinit(&p->body);
	cm_buf_deinit(&p->path);
	cm_free(p->hdrs);
	cm_free(p);
}

void gw_http_parser_reset(struct gw_http_parser *p)
{
	cm_buf_reset(&p->head);
	if (p->body.alloc > HTTP_BODY_KEEP_ALLOC)
		cm_buf_deinit(&p->body);
	else
		cm_buf_reset(&p->body);
	memset(&p->req, 0, sizeof(p->req));
	p->phase = GW_HTTP_PHASE_IDLE;
	p->crlf_state = 0;
	p->leading = 0;
	p->headers_done = 0;
	p->err_status = 0;
	p->err_msg = NULL;
	p->cstate = CH_SIZE;
	p->chunk_left = 0;
	p->chunk_digits = 0;
	p->line_len = 0;
	p->trailer_bytes = 0;
}

size_t gw_http_parser_body_bytes(const struct gw_http_parser *p)
{
	return cm_buf_len(&p->body);
}

enum gw_http_phase gw_http_parser_phase(const struct gw_http_parser *p)
{
	return p->phase;
}

int gw_http_parser_error(const struct gw_http_parser *p, const char **msg)
{
	if (msg)
		*msg = p->err_msg ? p->err_msg : "";
	return p->phase == GW_HTTP_PHASE_ERROR ? p->err_status : 0;
}

const struct gw_http_request *gw_http_parser_request(const struct gw_http_parser *p)
{
	return p->phase == GW_HTTP_PHASE_DONE ? &p->req : NULL;
}

const struct gw_http_request *gw_http_parser_head(const struct gw_http_parser *p)
{
	return p->headers_done ? &p->req : NULL;
}

const char *gw_http_request_header(const struct gw_http_request *r,
				   const char *name)
{
	for (uint32_t i = 0; i < r->n_headers; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

/* ---- header block -------------------------------------------------- */

/* Splits the next CRLF-terminated line off [*pos, end); NULL on bare CR/LF. */
static char *next_line(char **pos, char *end, size_t *len, int *bad)
{
	char *s = *pos, *q;

	*bad = 0;
	for (q = s; q < end; q++) {
		if (*q == '\r') {
			if (q + 1 >= end || q[1] != '\n') {
				*bad = 1;
				return NULL;
			}
			*q = '\0';
			*len = (size_t)(q - s);
			*pos = q + 2;
			return s;
		}
		if (*q == '\n') {
			*bad = 1;
			return NULL;
		}
	}
	*bad = 1;
	return NULL;
}

static enum cm_status parse_request_line(struct gw_http_parser *p, char *line,
					 size_t len)
{
	struct gw_http_request *r = &p->req;
	char *sp1, *sp2, *ver, *q;

	/* the version is compared as a C string: a NUL would hide what follows */
	if (memchr(line, '\0', len))
		return http_fail(p, 400, "malformed request line: NUL byte");
	sp1 = memchr(line, ' ', len);
	if (!sp1 || sp1 == line)
		return http_fail(p, 400, "malformed request line: expected METHOD SP target SP version");
	for (q = line; q < sp1; q++)
		if (!is_tchar((unsigned char)*q))
			return http_fail(p, 400, "malformed request line: method is not a token");
	*sp1 = '\0';
	sp2 = memchr(sp1 + 1, ' ', len - (size_t)(sp1 + 1 - line));
	if (!sp2 || sp2 == sp1 + 1)
		return http_fail(p, 400, "malformed request line: expected METHOD SP target SP version");
	for (q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f)
			return http_fail(p, 400, "malformed request line: invalid byte in the target");
	*sp2 = '\0';
	ver = sp2 + 1;
	r->method_str = line;
	r->method = method_from(line);
	r->target = sp1 + 1;
	r->target_len = (size_t)(sp2 - sp1 - 1);
	if (strcmp(ver, "HTTP/1.1") == 0) {
		r->version_minor = 1;
	} else if (strcmp(ver, "HTTP/1.0") == 0) {
		r->version_minor = 0;
	} else if (strncmp(ver, "HTTP/", 5) == 0 && ver[5] >= '0' && ver[5] <= '9' &&
		   ver[6] == '.' && ver[7] >= '0' && ver[7] <= '9' && ver[8] == '\0') {
		return http_fail(p, 505, "HTTP version not supported: expected HTTP/1.0 or HTTP/1.1");
	} else {
		return http_fail(p, 400, "malformed request line: expected HTTP/1.0 or HTTP/1.1 as version");
	}
	if (r->target[0] != '/' &&
	    !(r->method == GW_HTTP_OPTIONS && strcmp(r->target, "*") == 0))
		return http_fail(p, 400, "malformed request target: expected a path starting with '/'");
	return CM_OK;
}

static enum cm_status parse_content_length(struct gw_http_parser *p,
					   const char *v, uint64_t *out)
{
	uint64_t n = 0;

	if (!*v)
		return http_fail(p, 400, "invalid Content-Length: expected digits, found an empty value");
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return http_fail(p, 400, "invalid Content-Length: expected digits only");
		if (n > (UINT64_MAX - 9) / 10)
			return http_fail(p, 413, "Content-Length is larger than the body limit");
		n = n * 10 + (uint64_t)(*v - '0');
	}
	*out = n;
	return CM_OK;
}

/* Applies Connection, Content-Length, Transfer-Encoding, Host, Expect. */
static enum cm_status header_semantics(struct gw_http_parser *p)
{
	struct gw_http_request *r = &p->req;
	unsigned n_host = 0, n_cl = 0, n_te = 0, n_auth = 0;
	int conn_close = 0, conn_keep = 0;
	enum cm_status st;

	for (uint32_t i = 0; i < r->n_headers; i++) {
		const struct gw_http_header *h = &r->headers[i];

		if (strcasecmp(h->name, "host") == 0) {
			n_host++;
		} else if (strcasecmp(h->name, "authorization") == 0) {
			/* which one would count is ambiguous (proxies differ) */
			if (++n_auth > 1)
				return http_fail(p, 400, "more than one Authorization header");
		} else if (strcasecmp(h->name, "content-length") == 0) {
			if (++n_cl > 1)
				return http_fail(p, 400, "duplicate Content-Length header");
			st = parse_content_length(p, h->value, &r->content_length);
			if (st != CM_OK)
				return st;
			r->has_content_length = 1;
		} else if (strcasecmp(h->name, "transfer-encoding") == 0) {
			if (++n_te > 1)
				return http_fail(p, 501, "Transfer-Encoding not supported: expected one header with exactly 'chunked'");
			if (strcasecmp(h->value, "chunked") != 0)
				return http_fail(p, 501, "Transfer-Encoding not supported: expected 'chunked'");
			r->chunked = 1;
		} else if (strcasecmp(h->name, "connection") == 0) {
			const char *s = h->value;

			while (*s) {
				size_t n = strcspn(s, ",");
				const char *b = s, *e = s + n;

				while (b < e && (*b == ' ' || *b == '\t'))
					b++;
				while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
					e--;
				if (token_eq(b, (size_t)(e - b), "close"))
					conn_close = 1;
				else if (token_eq(b, (size_t)(e - b), "keep-alive"))
					conn_keep = 1;
				s += n;
				if (*s == ',')
					s++;
			}
		} else if (strcasecmp(h->name, "expect") == 0 && r->version_minor == 1) {
			if (strcasecmp(h->value, "100-continue") != 0)
				return http_fail(p, 417, "unsupported expectation: only '100-continue' is accepted");
			r->expect_continue = 1;
		}
	}
	if (n_host > 1)
		return http_fail(p, 400, "more than one Host header");
	if (r->version_minor == 1 && n_host == 0)
		return http_fail(p, 400, "missing Host header (required in HTTP/1.1)");
	if (r->chunked && r->has_content_length)
		return http_fail(p, 400, "both Content-Length and Transfer-Encoding given");
	if (r->chunked && r->version_minor == 0)
		return http_fail(p, 400, "Transfer-Encoding is not allowed in HTTP/1.0");
	if (conn_close)
		r->keep_alive = 0;
	else if (r->version_minor == 1)
		r->keep_alive = 1;
	else
		r->keep_alive = conn_keep;
	if (r->has_content_length && r->content_length > p->lim.body_bytes)
		return http_fail(p, 413, "request body is larger than the body limit");
	return CM_OK;
}

static enum cm_status parse_head(struct gw_http_parser *p)
{
	struct gw_http_request *r = &p->req;
	char *pos = (char *)cm_buf_data(&p->head);
	char *end = pos + cm_buf_len(&p->head);
	char *line, *q;
	size_t len;
	int bad;
	enum cm_status st;

	line = next_line(&pos, end, &len, &bad);
	if (!line)
		return http_fail(p, 400, "malformed request: lines must end with CRLF");
	st = parse_request_line(p, line, len);
	if (st != CM_OK)
		return st;
	r->headers = p->hdrs;
	for (;;) {
		struct gw_http_header *h;
		char *colon, *v, *ve;

		line = next_line(&pos, end, &len, &bad);
		if (!line)
			return http_fail(p, 400, "malformed header: lines must end with CRLF");
		if (len == 0)
			break;
		if (line[0] == ' ' || line[0] == '\t')
			return http_fail(p, 400, "obsolete line folding in headers is not accepted");
		colon = memchr(line, ':', len);
		if (!colon || colon == line)
			return http_fail(p, 400, "malformed header: expected name ':' value");
		for (q = line; q < colon; q++)
			if (!is_tchar((unsigned char)*q))
				return http_fail(p, 400, "malformed header: invalid character in the name (whitespace before ':'?)");
		for (q = colon + 1; q < line + len; q++)
			if (!is_value_char((unsigned char)*q))
				return http_fail(p, 400, "malformed header: control character in a value");
		if (r->n_headers >= p->lim.max_headers)
			return http_fail(p, 431, "too many header fields");
		*colon = '\0';
		v = colon + 1;
		ve = line + len;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		*ve = '\0';
		h = &p->hdrs[r->n_headers++];
		h->name = line;
		h->name_len = (size_t)(colon - line);
		h->value = v;
		h->value_len = (size_t)(ve - v);
	}
	/* split path and query */
	{
		char *t = (char *)r->target;
		char *qm = strchr(t, '?');

		r->path = t;
		if (qm) {
			/* the target stays intact (for logs); the path is a copy */
			size_t plen = (size_t)(qm - t);
			char *copy;

			cm_buf_reset(&p->path);
			if (cm_buf_append(&p->path, t, plen) != CM_OK)
				return http_fail(p, 431, "request header block is larger than the header limit");
			copy = (char *)cm_buf_data(&p->path);
			r->path = copy;
			r->path_len = plen;
			r->query = qm + 1;
		} else {
			r->path_len = r->target_len;
			r->query = "";
		}
	}
	st = header_semantics(p);
	p->headers_done = 1;
	return st;
}

/* ---- body ---------------------------------------------------------- */

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static enum cm_status body_append(struct gw_http_parser *p, const uint8_t *d,
				  size_t n)
{
	enum cm_status st = cm_buf_append(&p->body, d, n);

	if (st == CM_ELIMIT)
		return http_fail(p, 413, "request body is larger than the body limit");
	if (st != CM_OK)
		return st;
	return CM_OK;
}

static void finish(struct gw_http_parser *p)
{
	p->req.body = cm_buf_data(&p->body);
	p->req.body_len = cm_buf_len(&p->body);
	p->phase = GW_HTTP_PHASE_DONE;
}

/* Consumes chunked body bytes; *used says how many. */
static enum cm_status feed_chunked(struct gw_http_parser *p, const uint8_t *d,
				   size_t len, size_t *used)
{
	size_t i = 0;
	enum cm_status st;

	while (i < len) {
		unsigned char c = d[i];

		switch (p->cstate) {
		case CH_SIZE: {
			int v = hexval(c);

			if (v >= 0) {
				if (p->chunk_digits >= 15)
					return http_fail(p, 413, "chunk size is larger than the body limit");
				p->chunk_left = p->chunk_left * 16 + (uint64_t)v;
				p->chunk_digits++;
			} else if (p->chunk_digits && (c == ';' || c == ' ' || c == '\t')) {
				p->cstate = CH_EXT;
			} else if (p->chunk_digits && c == '\r') {
				p->cstate = CH_SIZE_LF;
			} else {
				return http_fail(p, 400, "malformed chunked body: expected a hex chunk size");
			}
			if (++p->line_len > HTTP_MAX_CHUNK_LINE)
				return http_fail(p, 400, "malformed chunked body: chunk-size line too long");
			i++;
			break;
		}
		case CH_EXT:
			if (c == '\r')
				p->cstate = CH_SIZE_LF;
			else if (!is_value_char(c))
				return http_fail(p, 400, "malformed chunked body: control character in a chunk extension");
			if (++p->line_len > HTTP_MAX_CHUNK_LINE)
				return http_fail(p, 400, "malformed chunked body: chunk-size line too long");
			i++;
			break;
		case CH_SIZE_LF:
			if (c != '\n')
				return http_fail(p, 400, "malformed chunked body: expected LF after CR");
			i++;
			p->line_len = 0;
			p->chunk_digits = 0;
			if (p->chunk_left == 0) {
				p->cstate = CH_TRAILER_START;
			} else {
				if (p->chunk_left > p->lim.body_bytes - cm_buf_len(&p->body))
					return http_fail(p, 413, "request body is larger than the body limit");
				p->cstate = CH_DATA;
			}
			break;
		case CH_DATA: {
			size_t n = len - i;

			if (n > p->chunk_left)
				n = (size_t)p->chunk_left;
			st = body_append(p, d + i, n);
			if (st != CM_OK)
				return st;
			p->chunk_left -= n;
			i += n;
			if (p->chunk_left == 0)
				p->cstate = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (c != '\r')
				return http_fail(p, 400, "malformed chunked body: expected CRLF after chunk data");
			p->cstate = CH_DATA_LF;
			i++;
			break;
		case CH_DATA_LF:
			if (c != '\n')
				return http_fail(p, 400, "malformed chunked body: expected CRLF after chunk data");
			p->cstate = CH_SIZE;
			i++;
			break;
		case CH_TRAILER_START:
			if (c == '\r') {
				p->cstate = CH_END_LF;
			} else if (c == ' ' || c == '\t') {
				return http_fail(p, 400, "obsolete line folding in trailers is not accepted");
			} else if (!is_value_char(c)) {
				return http_fail(p, 400, "malformed trailer: control character");
			} else {
				p->cstate = CH_TRAILER;
			}
			if (++p->trailer_bytes + cm_buf_len(&p->head) > p->lim.header_bytes)
				return http_fail(p, 431, "header block (with trailers) is larger than the header limit");
			i++;
			break;
		case CH_TRAILER:
			if (c == '\r')
				p->cstate = CH_TRAILER_LF;
			else if (!is_value_char(c))
				return http_fail(p, 400, "malformed trailer: control character");
			if (++p->trailer_bytes + cm_buf_len(&p->head) > p->lim.header_bytes)
				return http_fail(p, 431, "header block (with trailers) is larger than the header limit");
			i++;
			break;
		case CH_TRAILER_LF:
			if (c != '\n')
				return http_fail(p, 400, "malformed trailer: expected LF after CR");
			p->cstate = CH_TRAILER_START;
			i++;
			break;
		case CH_END_LF:
			if (c != '\n')
				return http_fail(p, 400, "malformed chunked body: expected CRLF at the end");
			i++;
			*used = i;
			finish(p);
			return CM_OK;
		}
	}
	*used = i;
	return CM_AGAIN;
}

/* ---- feed ---------------------------------------------------------- */

enum cm_status gw_http_parser_feed(struct gw_http_parser *p, const void *data,
				   size_t len, size_t *consumed)
{
	const uint8_t *d = data;
	size_t i = 0;
	enum cm_status st;

	*consumed = 0;
	if (p->phase == GW_HTTP_PHASE_DONE)
		return CM_OK;
	if (p->phase == GW_HTTP_PHASE_ERROR)
		return CM_EPROTO;

	if (p->phase == GW_HTTP_PHASE_IDLE || p->phase == GW_HTTP_PHASE_HEADERS) {
		/* skip empty lines before the request line */
		while (p->phase == GW_HTTP_PHASE_IDLE && i < len &&
		       (d[i] == '\r' || d[i] == '\n')) {
			if (++p->leading > HTTP_MAX_LEADING_EMPTY) {
				*consumed = i + 1;
				return http_fail(p, 400, "malformed request: expected a request line");
			}
			i++;
		}
		if (i < len)
			p->phase = GW_HTTP_PHASE_HEADERS;
		while (i < len && p->phase == GW_HTTP_PHASE_HEADERS) {
			/* find how much of the input belongs to the header block */
			size_t j = i;
			unsigned s = p->crlf_state;

			while (j < len && s < 4) {
				unsigned char c = d[j++];

				if (c == '\r') {
					s = (s == 2) ? 3 : 1;
				} else if (c == '\n') {
					if (s != 1 && s != 3) {
						*consumed = j;
						return http_fail(p, 400, "malformed request: lines must end with CRLF");
					}
					s++;
				} else {
					s = 0;
				}
			}
			st = cm_buf_append(&p->head, d + i, j - i);
			if (st != CM_OK) {
				*consumed = i;
				return st == CM_ELIMIT
					       ? http_fail(p, 431, "request header block is larger than the header limit")
					       : st;
			}
			i = j;
			p->crlf_state = s;
			if (s < 4)
				break;
			st = parse_head(p);
			if (st != CM_OK) {
				*consumed = i;
				return st;
			}
			p->phase = GW_HTTP_PHASE_BODY;
			if (!p->req.chunked && p->req.content_length == 0) {
				*consumed = i;
				finish(p);
				return CM_OK;
			}
			if (p->req.has_content_length) {
				st = cm_buf_reserve(&p->body, (size_t)p->req.content_length);
				if (st != CM_OK) {
					*consumed = i;
					return st == CM_ELIMIT ? http_fail(p, 413, "request body is larger than the body limit") : st;
				}
			}
		}
	}
	if (p->phase == GW_HTTP_PHASE_BODY && i < len) {
		if (p->req.chunked) {
			size_t used = 0;

			st = feed_chunked(p, d + i, len - i, &used);
			*consumed = i + used;
			return st;
		} else {
			size_t want = (size_t)p->req.content_length - cm_buf_len(&p->body);
			size_t n = len - i < want ? len - i : want;

			st = body_append(p, d + i, n);
			if (st != CM_OK) {
				*consumed = i;
				return st;
			}
			i += n;
			if (cm_buf_len(&p->body) == p->req.content_length) {
				*consumed = i;
				finish(p);
				return CM_OK;
			}
		}
	}
	*consumed = i;
	return CM_AGAIN;
}

/* ---- response writers ---------------------------------------------- */

const char *gw_http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 417: return "Expectation Failed";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}

static int has_crlf(const char *s)
{
	return strpbrk(s, "\r\n") != NULL;
}

enum cm_status gw_http_write_head(struct cm_buf *out, int version_minor,
				  int status, const char *content_type,
				  enum gw_http_body_mode mode,
				  uint64_t content_length, int keep_alive,
				  const struct gw_http_out_header *extra,
				  size_t n_extra)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st;

	if (status < 100 || status > 999 || (content_type && has_crlf(content_type)))
		return CM_EINVAL;
	for (size_t i = 0; i < n_extra; i++)
		if (has_crlf(extra[i].name) || has_crlf(extra[i].value) ||
		    !extra[i].name[0])
			return CM_EINVAL;
	if (mode == GW_HTTP_BODY_CHUNKED && version_minor == 0)
		return CM_EINVAL;
	if (mode == GW_HTTP_BODY_CLOSE)
		keep_alive = 0;
	st = cm_buf_printf(out, "HTTP/1.%d %d %s\r\n", version_minor ? 1 : 0,
			   status, gw_http_reason(status));
	if (st == CM_OK && content_type)
		st = cm_buf_printf(out, "Content-Type: %s\r\n", content_type);
	if (st == CM_OK && mode == GW_HTTP_BODY_LENGTH)
		st = cm_buf_printf(out, "Content-Length: %" PRIu64 "\r\n", content_length);
	if (st == CM_OK && mode == GW_HTTP_BODY_CHUNKED)
		st = cm_buf_append_str(out, "Transfer-Encoding: chunked\r\n");
	if (st == CM_OK && !keep_alive)
		st = cm_buf_append_str(out, "Connection: close\r\n");
	if (st == CM_OK && keep_alive && version_minor == 0)
		st = cm_buf_append_str(out, "Connection: keep-alive\r\n");
	for (size_t i = 0; st == CM_OK && i < n_extra; i++)
		st = cm_buf_printf(out, "%s: %s\r\n", extra[i].name, extra[i].value);
	if (st == CM_OK)
		st = cm_buf_append_str(out, "\r\n");
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

enum cm_status gw_http_write_chunk(struct cm_buf *out, const void *data,
				   size_t len)
{
	size_t mark = cm_buf_len(out);
	enum cm_status st;

	if (len == 0)
		return CM_OK;
	st = cm_buf_printf(out, "%zx\r\n", len);
	if (st == CM_OK)
		st = cm_buf_append(out, data, len);
	if (st == CM_OK)
		st = cm_buf_append(out, "\r\n", 2);
	if (st != CM_OK)
		cm_buf_truncate(out, mark);
	return st;
}

enum cm_status gw_http_write_last_chunk(struct cm_buf *out)
{
	return cm_buf_append(out, "0\r\n\r\n", 5);
}
