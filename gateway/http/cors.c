/*
 * cors.c - CORS headers and preflight answers (see cors.h).
 */
#include "gateway/http/cors.h"

#include <string.h>
#include <strings.h>

#include "common/log.h"

static void cors_header(struct gw_request *req, const char *name, const char *value)
{
	if (gw_request_add_header(req, name, value) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "cors", "no room for %s", name);
}

/* A header list as browsers send it: names (token characters), commas,
 * spaces; bounded. */
static int header_list_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n <= GW_CORS_REQUEST_HEADERS_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_, ") == n;
}

int gw_cors_apply(struct gw_request *req, char *const *origins, size_t n)
{
	const char *o = gw_request_header(req, "Origin");
	const char *want;
	size_t i;

	if (!o || !o[0] || n == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (strcmp(origins[i], "*") == 0 || strcasecmp(origins[i], o) == 0)
			break;
	if (i == n)
		return 0;
	cors_header(req, "Access-Control-Allow-Origin", o);
	cors_header(req, "Vary", "Origin");
	if (gw_request_method(req) != GW_HTTP_OPTIONS ||
	    !gw_request_header(req, "Access-Control-Request-Method")) {
		cors_header(req, "Access-Control-Expose-Headers", "X-Request-Id, Retry-After");
		return 0;
	}
	cors_header(req, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
	want = gw_request_header(req, "Access-Control-Request-Headers");
	/* the SDKs send their own headers (x-stainless-*): the list asked for */
	cors_header(req, "Access-Control-Allow-Headers",
		    want && header_list_ok(want) ? want : "Authorization, Content-Type");
	cors_header(req, "Access-Control-Max-Age", "600");
	if (gw_request_respond(req, 204, "text/plain", "", 0) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "cors", "preflight answer not sent (client gone)");
	return 1;
}
