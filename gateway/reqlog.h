/*
 * reqlog.h - the one log line of a finished request ("request" event).
 *
 * Ids, counts, timings, sampling parameters and the serving worker's
 * model digest, engine, backend and device; never prompt or completion
 * text, never a key (the key id only).  docs/gateway.md lists the fields.
 * Any thread; formats only when INFO is enabled.
 */
#ifndef SLUICE_GATEWAY_REQLOG_H
#define SLUICE_GATEWAY_REQLOG_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/api/api.h"
#include "gateway/gov/auth.h"
#include "gateway/http/paths.h"
#include "gateway/http/server.h"
#include "gateway/workers.h"

/* What the line says; pointers are NULL when the request got that far. */
struct gw_reqlog {
	uint64_t id;
	const char *client_request_id;         /* the client's X-Request-Id, or "" */
	enum gw_path route;
	int status;
	const char *outcome;                   /* "ok", "cancelled", ... */
	const struct gw_auth_identity *ident;  /* tenant, client, key id */
	int batch;
	const char *model;                     /* "" before parsing */
	const struct gw_worker_info *worker;   /* the worker it ran on */
	const struct gw_api_request *api;      /* sampling, limits (model set) */
	uint32_t tokens;                       /* tokens streamed */
	const struct proto_done *done;         /* the worker's counts */
	uint32_t embed_inputs;                 /* an embedding request's inputs (0: generation) */
	uint32_t embed_dimensions;             /* its dimensions (0: the model's) */
	int embed_base64;                      /* its encoding_format base64 */
	int64_t start_ns, enq_ns, disp_ns, first_ns; /* cm_mono_ns(); 0 = not reached */
};

void gw_reqlog_write(const struct gw_reqlog *l);

/* Longest X-Request-Id a client may send and get echoed (docs/api.md). */
#define GW_CLIENT_REQUEST_ID_MAX 64

/* The gateway's id of request `id`: "<instance hex>-<id>", unique across
 * gateways and restarts (the usage record's request_id too). */
void gw_reqlog_gateway_id(const uint8_t *instance, size_t instance_len, uint64_t id,
			  char *out, size_t cap);

/*
 * Adds X-Request-Id to every answer of `req`: the client's own when
 * well-formed (1 to GW_CLIENT_REQUEST_ID_MAX of [A-Za-z0-9._:-], also
 * copied into client_rid), else the gateway's id (client_rid "").
 */
void gw_reqlog_request_id(struct gw_request *req, const uint8_t *instance,
			  size_t instance_len, char client_rid[GW_CLIENT_REQUEST_ID_MAX + 1]);

#endif
