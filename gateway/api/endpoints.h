/*
 * endpoints.h - the fixed endpoints that answer from the gateway's view of
 * its workers: /api/tags, /api/ps, /v1/models, /api/show and /readyz.
 *
 * Reads gw_workers (borrowed); renders through fixed.c.  Event-loop
 * thread; no I/O.
 */
#ifndef SLUICE_GATEWAY_API_ENDPOINTS_H
#define SLUICE_GATEWAY_API_ENDPOINTS_H

#include <stddef.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/status.h"
#include "gateway/api/api.h"
#include "gateway/http/paths.h"
#include "gateway/http/server.h"
#include "gateway/rollout.h"
#include "gateway/workers.h"

/* Models listed: the first GW_API_MODELS_MAX ready workers' models. */
#define GW_API_MODELS_MAX 64

/*
 * The length of `name` to look the model up by: Ollama treats "x" and
 * "x:latest" as one model, so "x:latest" is "x" when the workers serve
 * "x" and no "x:latest"; otherwise `len`.
 */
size_t gw_api_model_resolve(const struct gw_workers *w, const char *name, size_t len);

/*
 * The body of GET /api/tags, /api/ps, /v1/models, GET /v1/models/{id}
 * (`body` is the id), or POST /api/show (`body` is the request body,
 * parsed with `lim` into arena `a`), from the ready workers' models,
 * deduplicated by name and described by a worker that takes client
 * traffic when one is ready (ro NULL: any); a name is resolved by
 * gw_api_model_resolve().  CM_OK: *out holds it.
 * CM_EINVAL (bad show body) or CM_ENOTFOUND (unknown model): *e filled.
 * CM_ENOMEM: *out over its cap.
 */
enum cm_status gw_api_answer_models(struct gw_workers *w, const struct gw_rollout *ro,
				    enum gw_path path,
				    const void *body, size_t len,
				    const struct gw_api_limits *lim, struct cm_arena *a,
				    struct cm_buf *out, struct gw_api_error *e) CM_WUR;

/*
 * /readyz: 200 when every worker is ready and Redis answers, else 503.
 * `detailed` (the admin listener) names the first reason and the worker;
 * the public answer says only ready or not (who is not ready, and why, is
 * not for unauthenticated clients).  Writes the JSON body (NUL-terminated)
 * into body[cap] and its length into *len; returns the HTTP status.
 */
int gw_api_answer_readyz(struct gw_workers *w, int redis_ok, int detailed, char *body, size_t cap,
			 size_t *len);

/*
 * Answers `r` with `e` in the dialect's format (a 500 in plain text when
 * even that cannot be rendered), with Retry-After when retry_after > 0 and
 * WWW-Authenticate on 401.  A client already gone is logged at debug.
 */
void gw_api_respond_error(struct gw_request *r, enum gw_api_style style,
			  const struct gw_api_error *e, uint32_t retry_after);

#endif
