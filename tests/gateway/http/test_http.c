/*
 * test_http.c - gateway/http/http.c: the request parser (every byte split,
 * limits and their statuses, keep-alive rules, pipelining, chunked bodies)
 * and the response writers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "gateway/http/http.h"

static const struct gw_http_limits lim_default = {
	.header_bytes = 1024, .body_bytes = 256, .max_headers = 16,
};

/* Feeds `len` bytes in pieces of `step` (0 = all at once). */
static enum cm_status feed_steps(struct gw_http_parser *p, const char *data,
				 size_t len, size_t step, size_t *total_used)
{
	size_t off = 0;
	enum cm_status st = CM_AGAIN;

	*total_used = 0;
	if (step == 0)
		step = len ? len : 1;
	while (off < len) {
		size_t n = len - off < step ? len - off : step;
		size_t used = 0;

		st = gw_http_parser_feed(p, data + off, n, &used);
		assert_true(used <= n);
		off += used;
		*total_used = off;
		if (st != CM_AGAIN)
			return st;
		assert_int_equal(used, n);
	}
	return st;
}

/* Parses `req` whole, expecting an error status. */
static int error_status(const struct gw_http_limits *lim, const char *req,
			size_t *used_out)
{
	struct gw_http_parser *p = gw_http_parser_new(lim);
	size_t used;
	enum cm_status st;
	int code;

	assert_non_null(p);
	st = feed_steps(p, req, strlen(req), 0, &used);
	code = st == CM_EPROTO ? gw_http_parser_error(p, NULL) : (st == CM_OK ? 200 : 0);
	if (used_out)
		*used_out = used;
	gw_http_parser_free(p);
	return code;
}

static void test_simple_get(void **state)
{
	static const char req[] = "GET /api/tags?x=1 HTTP/1.1\r\nHost: a\r\n"
				  "X-Thing:   spaced value  \r\nACCEPT: */*\r\n\r\n";
	struct gw_http_parser *p = gw_http_parser_new(&lim_default);
	const struct gw_http_request *r;
	size_t used;

	(void)state;
	assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_IDLE);
	assert_int_equal(gw_http_parser_feed(p, req, sizeof(req) - 1, &used), CM_OK);
	assert_int_equal(used, sizeof(req) - 1);
	r = gw_http_parser_request(p);
	assert_non_null(r);
	assert_int_equal(r->method, GW_HTTP_GET);
	assert_string_equal(r->method_str, "GET");
	assert_string_equal(r->path, "/api/tags");
	assert_int_equal(r->path_len, 9);
	assert_string_equal(r->query, "x=1");
	assert_string_equal(r->target, "/api/tags?x=1");
	assert_int_equal(r->version_minor, 1);
	assert_true(r->keep_alive);
	assert_int_equal(r->n_headers, 3);
	assert_string_equal(gw_http_request_header(r, "x-thing"), "spaced value");
	assert_string_equal(gw_http_request_header(r, "Accept"), "*/*");
	assert_null(gw_http_request_header(r, "Content-Length"));
	assert_int_equal(r->body_len, 0);
	/* complete: further feeds consume nothing */
	assert_int_equal(gw_http_parser_feed(p, "x", 1, &used), CM_OK);
	assert_int_equal(used, 0);
	gw_http_parser_free(p);
}

struct split_case {
	const char *req;
	const char *body;     /* expected decoded body */
	int keep_alive;
	int chunked;
};

static const struct split_case split_cases[] = {
	{ "POST /api/generate HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world",
	  "hello world", 1, 0 },
	{ "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
	  "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n",
	  "hello world", 1, 1 },
	{ "\r\nGET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "", 1, 0 },
	{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, Close\r\n\r\n", "", 0, 0 },
	{ "POST /x HTTP/1.1\r\nHost: h\r\ntransfer-encoding: CHUNKED\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
	  "0123456789", 1, 1 },
};

static void check_split_result(const struct gw_http_parser *p,
			       const struct split_case *c)
{
	const struct gw_http_request *r = gw_http_parser_request(p);

	assert_non_null(r);
	assert_int_equal(r->body_len, strlen(c->body));
	assert_memory_equal(r->body, c->body, r->body_len);
	assert_int_equal(r->body[r->body_len], '\0');
	assert_int_equal(r->keep_alive, c->keep_alive);
	assert_int_equal(r->chunked, c->chunked);
}

static void test_split_every_byte(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(split_cases) / sizeof(split_cases[0]); k++) {
		const struct split_case *c = &split_cases[k];
		size_t len = strlen(c->req);

		/* two pieces, split at every position */
		for (size_t cut = 0; cut <= len; cut++) {
			struct gw_http_parser *p = gw_http_parser_new(&lim_default);
			size_t u1 = 0, u2 = 0;
			enum cm_status st;

			st = gw_http_parser_feed(p, c->req, cut, &u1);
			if (cut < len) {
				assert_int_equal(st, CM_AGAIN);
				assert_int_equal(u1, cut);
				st = gw_http_parser_feed(p, c->req + cut, len - cut, &u2);
			}
			assert_int_equal(st, CM_OK);
			assert_int_equal(u1 + u2, len);
			check_split_result(p, c);
			gw_http_parser_free(p);
		}
		/* one byte at a time */
		{
			struct gw_http_parser *p = gw_http_parser_new(&lim_default);
			size_t used;

			assert_int_equal(feed_steps(p, c->req, len, 1, &used), CM_OK);
			assert_int_equal(used, len);
			check_split_result(p, c);
			gw_http_parser_free(p);
		}
	}
}

static void test_phases(void **state)
{
	struct gw_http_parser *p = gw_http_parser_new(&lim_default);
	static const char head[] = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n";
	size_t used;

	(void)state;
	assert_int_equal(gw_http_parser_feed(p, "P", 1, &used), CM_AGAIN);
	assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_HEADERS);
	assert_null(gw_http_parser_head(p));
	assert_int_equal(gw_http_parser_feed(p, head + 1, sizeof(head) - 2, &used), CM_AGAIN);
	assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_BODY);
	assert_non_null(gw_http_parser_head(p));
	assert_true(gw_http_parser_head(p)->expect_continue);
	assert_null(gw_http_parser_request(p));
	assert_int_equal(gw_http_parser_feed(p, "abcdEXTRA", 9, &used), CM_OK);
	assert_int_equal(used, 4);
	assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_DONE);
	gw_http_parser_free(p);
}

static void test_pipelining(void **state)
{
	static const char two[] =
		"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
		"GET /b HTTP/1.1\r\nHost: h\r\n\r\n"
		"GET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
	struct gw_http_parser *p = gw_http_parser_new(&lim_default);
	const char *d = two;
	size_t left = sizeof(two) - 1, used;
	const char *paths[] = { "/a", "/b", "/c" };

	(void)state;
	for (int i = 0; i < 3; i++) {
		assert_int_equal(gw_http_parser_feed(p, d, left, &used), CM_OK);
		assert_string_equal(gw_http_parser_request(p)->path, paths[i]);
		assert_int_equal(gw_http_parser_request(p)->keep_alive, i < 2);
		d += used;
		left -= used;
		gw_http_parser_reset(p);
		assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_IDLE);
	}
	assert_int_equal(left, 0);
	gw_http_parser_free(p);
}

static void test_keep_alive_rules(void **state)
{
	struct {
		const char *req;
		int keep;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n\r\n", 1 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n", 0 },
		{ "GET / HTTP/1.0\r\n\r\n", 0 },
		{ "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", 1 },
		{ "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", 0 },
		/* found by fuzz_http: leading spaces in a list element */
		{ "GET / HTTP/1.0\r\nConnection:   ,  keep-alive  ,\r\n\r\n", 1 },
		{ "GET / HTTP/1.1\r\nHost: h\r\nConnection: x,      close\r\n\r\n", 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gw_http_parser *p = gw_http_parser_new(&lim_default);
		size_t used;

		assert_int_equal(gw_http_parser_feed(p, cases[i].req,
						     strlen(cases[i].req), &used),
				 CM_OK);
		assert_int_equal(gw_http_parser_request(p)->keep_alive, cases[i].keep);
		gw_http_parser_free(p);
	}
}

static void test_bad_requests(void **state)
{
	struct {
		const char *req;
		int status;
		const char *msg_part;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n", 400, "folding" },
		{ "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", 400, "folding" },
		{ "GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "name" },
		{ "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", 400, "expected name" },
		{ "GET / HTTP/1.1\nHost: h\r\n\r\n", 400, "CRLF" },
		{ "GET / HTTP/1.1\r\nHost: h\rX: y\r\n\r\n", 400, "CRLF" },
		{ "GET / HTTP/1.1\r\n\r\n", 400, "Host" },
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host" },
		{ "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "version" },
		{ "GET / FOO/1.1\r\nHost: h\r\n\r\n", 400, "version" },
		{ "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "request line" },
		{ "GET http://x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400, "target" },
		{ "G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "method" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400, "duplicate Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1x\r\n\r\n", 400, "Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", 400, "Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413, "body limit" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 257\r\n\r\n", 413, "body limit" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "Transfer-Encoding" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "Transfer-Encoding" },
		{ "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n", 417, "expectation" },
		{ "GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n", 400, "control" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nZ\r\n", 400, "hex" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", 400, "CRLF" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\rX", 400, "LF" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n101\r\n", 413, "body limit" },
		{ "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\n", 413, "body limit" },
		{ "\r\n\r\n\r\nGET / HTTP/1.1\r\n", 400, "request line" },
		{ "GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer a\r\nauthorization: Bearer b\r\n\r\n",
		  400, "more than one Authorization" },
	};
	/* NUL bytes: after the version, in the target, in a header (explicit lengths) */
	static const char nul_version[] = "GET /healthz HTTP/1.1\0junk\r\nHost: h\r\n\r\n";
	static const char nul_target[] = "GET /heal\0thz HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char nul_header[] = "GET / HTTP/1.1\r\nHost: h\0x\r\n\r\n";
	const struct { const char *req; size_t len; const char *msg_part; } nuls[] = {
		{ nul_version, sizeof(nul_version) - 1, "NUL" },
		{ nul_target, sizeof(nul_target) - 1, "NUL" },
		{ nul_header, sizeof(nul_header) - 1, "control" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gw_http_parser *p = gw_http_parser_new(&lim_default);
		const char *msg = NULL;
		size_t used;
		enum cm_status st;

		st = feed_steps(p, cases[i].req, strlen(cases[i].req), 0, &used);
		if (st != CM_EPROTO)
			fail_msg("case %zu (%s): expected a refusal", i, cases[i].req);
		if (gw_http_parser_error(p, &msg) != cases[i].status)
			fail_msg("case %zu: expected %d, got %d (%s)", i, cases[i].status,
				 gw_http_parser_error(p, NULL), msg);
		if (!strstr(msg, cases[i].msg_part))
			fail_msg("case %zu: message '%s' lacks '%s'", i, msg, cases[i].msg_part);
		/* stays failed */
		assert_int_equal(gw_http_parser_feed(p, "x", 1, &used), CM_EPROTO);
		assert_int_equal(gw_http_parser_phase(p), GW_HTTP_PHASE_ERROR);
		gw_http_parser_free(p);
	}
	for (size_t i = 0; i < sizeof(nuls) / sizeof(nuls[0]); i++) {
		struct gw_http_parser *p = gw_http_parser_new(&lim_default);
		const char *msg = NULL;
		size_t used;

		assert_int_equal(feed_steps(p, nuls[i].req, nuls[i].len, 0, &used), CM_EPROTO);
		assert_int_equal(gw_http_parser_error(p, &msg), 400);
		if (!strstr(msg, nuls[i].msg_part))
			fail_msg("NUL case %zu: message '%s' lacks '%s'", i, msg, nuls[i].msg_part);
		gw_http_parser_free(p);
	}
}

static void test_header_limits(void **state)
{
	struct gw_http_limits lim = lim_default;
	char big[2048];
	size_t used;
	int n;

	(void)state;
	/* one long header: 431 once the block passes the cap, before its end */
	n = snprintf(big, sizeof(big), "GET / HTTP/1.1\r\nHost: h\r\nX: ");
	memset(big + n, 'a', sizeof(big) - (size_t)n - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(error_status(&lim, big, &used), 431);
	assert_true(used <= lim.header_bytes);

	/* exactly at the cap is accepted, one more byte is not */
	{
		char req[1100];
		size_t base = strlen("GET / HTTP/1.1\r\nHost: h\r\nX: \r\n\r\n");
		size_t fill = lim.header_bytes - base;

		n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: h\r\nX: %0*d\r\n\r\n",
			     (int)fill, 0);
		assert_int_equal((size_t)n, lim.header_bytes);
		assert_int_equal(error_status(&lim, req, NULL), 200);
		n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: h\r\nX: %0*d\r\n\r\n",
			     (int)fill + 1, 0);
		assert_int_equal(error_status(&lim, req, NULL), 431);
	}

	/* too many header fields */
	{
		char req[1024];
		size_t off = (size_t)snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: h\r\n");

		for (int i = 0; i < 16; i++)
			off += (size_t)snprintf(req + off, sizeof(req) - off, "X%d: v\r\n", i);
		snprintf(req + off, sizeof(req) - off, "\r\n");
		assert_int_equal(error_status(&lim, req, NULL), 431);
	}
	/* trailers count against the header cap */
	{
		char req[1400];
		size_t off = (size_t)snprintf(req, sizeof(req),
			"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: ");

		memset(req + off, 'b', 1100);
		req[off + 1100] = '\0';
		assert_int_equal(error_status(&lim, req, NULL), 431);
	}
}

static void test_body_limit_before_body(void **state)
{
	static const char head[] = "POST /api/chat HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n";
	struct gw_http_parser *p = gw_http_parser_new(&lim_default);
	const struct gw_http_request *h;
	size_t used;

	(void)state;
	/* decided from the headers alone: no body byte fed */
	assert_int_equal(gw_http_parser_feed(p, head, sizeof(head) - 1, &used), CM_EPROTO);
	assert_int_equal(gw_http_parser_error(p, NULL), 413);
	assert_int_equal(used, sizeof(head) - 1);
	/* the head stays available for error rendering */
	h = gw_http_parser_head(p);
	assert_non_null(h);
	assert_string_equal(h->path, "/api/chat");
	gw_http_parser_free(p);

	/* chunked: refused at the size line that crosses the cap */
	p = gw_http_parser_new(&lim_default);
	{
		char req[600];
		size_t off = (size_t)snprintf(req, sizeof(req),
			"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n80\r\n");

		memset(req + off, 'a', 128);
		off += 128;
		off += (size_t)snprintf(req + off, sizeof(req) - off, "\r\n80\r\n");
		memset(req + off, 'b', 128);
		off += 128;
		off += (size_t)snprintf(req + off, sizeof(req) - off, "\r\n1\r\n");
		/* 128 + 128 = 256 is the cap: the third chunk is refused */
		assert_int_equal(feed_steps(p, req, off, 7, &used), CM_EPROTO);
		assert_int_equal(gw_http_parser_error(p, NULL), 413);
	}
	gw_http_parser_free(p);
}

static void test_reset_releases_big_body(void **state)
{
	struct gw_http_limits lim = { .header_bytes = 1024, .body_bytes = 1 << 20, .max_headers = 8 };
	struct gw_http_parser *p = gw_http_parser_new(&lim);
	char head[128];
	char *body = malloc(200000);
	size_t used;
	int n;

	(void)state;
	memset(body, 'z', 200000);
	n = snprintf(head, sizeof(head), "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 200000\r\n\r\n");
	assert_int_equal(gw_http_parser_feed(p, head, (size_t)n, &used), CM_AGAIN);
	assert_int_equal(gw_http_parser_feed(p, body, 200000, &used), CM_OK);
	assert_int_equal(gw_http_parser_request(p)->body_len, 200000);
	gw_http_parser_reset(p);
	n = snprintf(head, sizeof(head), "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok");
	assert_int_equal(gw_http_parser_feed(p, head, (size_t)n, &used), CM_OK);
	assert_memory_equal(gw_http_parser_request(p)->body, "ok", 2);
	gw_http_parser_free(p);
	free(body);
}

static void test_alloc_failures(void **state)
{
	(void)state;
	for (long k = 0; k < 3; k++) {
		struct gw_http_parser *p;

		cm_alloc_fail_after(k);
		p = gw_http_parser_new(&lim_default);
		cm_alloc_fail_reset();
		if (p) {
			size_t used;

			assert_int_equal(gw_http_parser_feed(p, "GET / HTTP/1.0\r\n\r\n", 18, &used), CM_OK);
			gw_http_parser_free(p);
		}
	}
	/* an allocation failure while buffering headers is reported, not a crash */
	{
		struct gw_http_parser *p = gw_http_parser_new(&lim_default);
		size_t used;

		cm_alloc_fail_after(0);
		assert_int_equal(gw_http_parser_feed(p, "GET / HTTP/1.0\r\n\r\n", 18, &used), CM_ENOMEM);
		cm_alloc_fail_reset();
		gw_http_parser_free(p);
	}
}

static void test_writers(void **state)
{
	struct cm_buf b;
	struct gw_http_out_header extra[] = { { "Retry-After", "3" } };
	struct gw_http_out_header evil[] = { { "X", "a\r\nSet-Cookie: x" } };

	(void)state;
	cm_buf_init(&b, 4096);
	assert_int_equal(gw_http_write_head(&b, 1, 429, "application/json",
					    GW_HTTP_BODY_LENGTH, 12, 1, extra, 1), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b),
			    "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\n"
			    "Content-Length: 12\r\nRetry-After: 3\r\n\r\n");
	cm_buf_reset(&b);
	assert_int_equal(gw_http_write_head(&b, 1, 200, "application/x-ndjson",
					    GW_HTTP_BODY_CHUNKED, 0, 0, NULL, 0), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b),
			    "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
			    "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	cm_buf_reset(&b);
	assert_int_equal(gw_http_write_head(&b, 0, 200, NULL, GW_HTTP_BODY_LENGTH, 0,
					    1, NULL, 0), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b),
			    "HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n");
	cm_buf_reset(&b);
	assert_int_equal(gw_http_write_head(&b, 0, 200, NULL, GW_HTTP_BODY_CLOSE, 0,
					    1, NULL, 0), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b),
			    "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\n");
	cm_buf_reset(&b);
	/* header injection and impossible modes are refused */
	assert_int_equal(gw_http_write_head(&b, 1, 200, NULL, GW_HTTP_BODY_LENGTH, 0,
					    1, evil, 1), CM_EINVAL);
	assert_int_equal(gw_http_write_head(&b, 0, 200, NULL, GW_HTTP_BODY_CHUNKED, 0,
					    1, NULL, 0), CM_EINVAL);
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(gw_http_write_chunk(&b, "hello", 5), CM_OK);
	assert_int_equal(gw_http_write_chunk(&b, "", 0), CM_OK);
	assert_int_equal(gw_http_write_chunk(&b, "0123456789abcdefg", 17), CM_OK);
	assert_int_equal(gw_http_write_last_chunk(&b), CM_OK);
	assert_string_equal((char *)cm_buf_data(&b),
			    "5\r\nhello\r\n11\r\n0123456789abcdefg\r\n0\r\n\r\n");
	cm_buf_deinit(&b);
	/* at the cap: refused, buffer unchanged */
	cm_buf_init(&b, 40);
	assert_int_equal(gw_http_write_head(&b, 1, 200, "text/plain",
					    GW_HTTP_BODY_LENGTH, 0, 1, NULL, 0), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 0);
	cm_buf_deinit(&b);
	assert_string_equal(gw_http_reason(431), "Request Header Fields Too Large");
	assert_string_equal(gw_http_reason(799), "Unknown");
	assert_string_equal(gw_http_method_str(GW_HTTP_DELETE), "DELETE");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_get),
		cmocka_unit_test(test_split_every_byte),
		cmocka_unit_test(test_phases),
		cmocka_unit_test(test_pipelining),
		cmocka_unit_test(test_keep_alive_rules),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_header_limits),
		cmocka_unit_test(test_body_limit_before_body),
		cmocka_unit_test(test_reset_releases_big_body),
		cmocka_unit_test(test_alloc_failures),
		cmocka_unit_test(test_writers),
	};

	return cmocka_run_group_tests_name("gateway_http", tests, NULL, NULL);
}
