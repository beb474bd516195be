/*
 * fuzz_http.c - libFuzzer target for gateway/http/http.c: the request parser fed
 * in pieces whose sizes come from the input, with pipelined requests.
 *
 * Input layout: byte 0 = piece size (1..256), byte 1 bit 0 = small limits;
 * the rest is the byte stream of one connection.
 * Invariants checked: consumed <= fed; a complete request has body_len
 * within the limit and a NUL after the body; a failed parser reports a
 * 4xx/5xx status and stays failed.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gw_http_limits lim = { .header_bytes = 8192, .body_bytes = 65536, .max_headers = 64 };
	struct gw_http_parser *p;
	size_t step, off = 0;

	if (size < 2)
		return 0;
	step = (size_t)data[0] + 1;
	if (data[1] & 1) {
		lim.header_bytes = 256;
		lim.body_bytes = 64;
		lim.max_headers = 4;
	}
	data += 2;
	size -= 2;
	p = gw_http_parser_new(&lim);
	if (!p)
		return 0;
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		size_t used = 0;
		enum cm_status st = gw_http_parser_feed(p, data + off, n, &used);

		if (used > n)
			abort();
		off += used;
		if (st == CM_OK) {
			const struct gw_http_request *r = gw_http_parser_request(p);

			if (!r || r->body_len > lim.body_bytes || r->body[r->body_len] != '\0' ||
			    r->path[r->path_len] != '\0' || (r->version_minor != 0 && r->version_minor != 1))
				abort();
			(void)gw_http_request_header(r, "host");
			gw_http_parser_reset(p);
		} else if (st == CM_EPROTO) {
			const char *msg;
			int code = gw_http_parser_error(p, &msg);

			if (code < 400 || code > 599 || !msg)
				abort();
			if (gw_http_parser_feed(p, "x", 1, &used) != CM_EPROTO || used != 0)
				abort();
			break;
		} else if (st != CM_AGAIN) {
			break;
		} else if (used != n) {
			abort();
		}
	}
	gw_http_parser_free(p);
	return 0;
}
