/*
 * router.h - the gateway's path/method table.
 *
 * Maps (method, path) to a route: an exact path match (no trailing-slash or
 * case folding; the query string is not part of the path), then a method
 * check.  Unknown path -> 404; known path, wrong method -> 405 with the
 * Allow header value.  GET routes also answer HEAD.  The model-management
 * paths (/api/pull, push, create, copy, delete) match any method and route
 * to GW_ROUTE_MANAGE, which the gateway answers 403.
 *
 * Also says which API's error format a path uses (/v1/... OpenAI, the rest
 * Ollama's).  Pure functions over a static table; any thread.
 */
#ifndef SLUICE_GATEWAY_ROUTER_H
#define SLUICE_GATEWAY_ROUTER_H

#include "gateway/http.h"

enum gw_route {
	GW_ROUTE_NONE = 0,
	GW_ROUTE_ROOT,              /* GET /  ("Ollama is running") */
	GW_ROUTE_OLLAMA_GENERATE,   /* POST /api/generate */
	GW_ROUTE_OLLAMA_CHAT,       /* POST /api/chat */
	GW_ROUTE_OLLAMA_TAGS,       /* GET /api/tags */
	GW_ROUTE_OLLAMA_SHOW,       /* POST /api/show */
	GW_ROUTE_OLLAMA_PS,         /* GET /api/ps */
	GW_ROUTE_OLLAMA_VERSION,    /* GET /api/version */
	GW_ROUTE_MANAGE,            /* any /api/{pull,push,create,copy,delete} */
	GW_ROUTE_OPENAI_CHAT,       /* POST /v1/chat/completions */
	GW_ROUTE_OPENAI_COMPLETIONS,/* POST /v1/completions */
	GW_ROUTE_OPENAI_MODELS,     /* GET /v1/models */
	GW_ROUTE_HEALTHZ,           /* GET /healthz */
	GW_ROUTE_READYZ,            /* GET /readyz */
	GW_ROUTE_METRICS,           /* GET /metrics (admin listener only) */
	GW_ROUTE_COUNT_,
};

enum gw_api_style {
	GW_STYLE_OLLAMA = 0, /* {"error":"..."} */
	GW_STYLE_OPENAI = 1, /* {"error":{"message","type","param","code"}} */
};

struct gw_route_match {
	enum gw_route route;       /* GW_ROUTE_NONE unless status is 0 */
	int status;                /* 0 matched, 404 unknown path, 405 wrong method */
	const char *allow;         /* for 405: the Allow header value */
	const char *manage_op;     /* GW_ROUTE_MANAGE: "pull", "push", ... */
	enum gw_api_style style;   /* error format for this path */
};

void gw_router_match(enum gw_http_method method, const char *path,
		     struct gw_route_match *out);

/* Error format for a path (NULL: Ollama's). */
enum gw_api_style gw_router_style(const char *path);

/* Stable short name for logs and metric labels ("ollama_generate", ...). */
const char *gw_route_name(enum gw_route r);

#endif
