/*
 * cors.h - CORS for browser clients of the public listener: off unless
 * the configuration names allowed origins (`gateway.cors_origins`).
 *
 * An allowed Origin gets Access-Control-Allow-Origin (the origin echoed,
 * with Vary: Origin) and the headers a script may read exposed; a
 * preflight (OPTIONS with Access-Control-Request-Method) from it is
 * answered here with 204, before authentication, as browsers send it
 * without credentials.  Any other origin gets no CORS header at all (the
 * browser then keeps the answer from the page).  Event-loop thread.
 */
#ifndef SLUICE_GATEWAY_HTTP_CORS_H
#define SLUICE_GATEWAY_HTTP_CORS_H

#include <stddef.h>

#include "gateway/http/server.h"

/* Longest Access-Control-Request-Headers list echoed in a preflight. */
#define GW_CORS_REQUEST_HEADERS_MAX 1024

/*
 * Adds the CORS headers to `req`'s answer when its Origin is one of
 * origins[0..n) (or one of them is "*"); 1 when `req` was a preflight and
 * has been answered, else 0 (the request goes on).
 */
int gw_cors_apply(struct gw_request *req, char *const *origins, size_t n);

#endif
