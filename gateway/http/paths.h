/*
 * paths.h - the gateway's path/method table.
 *
 * Maps (method, path) to a route: an exact path match (no trailing-slash or
 * case folding; the query string is not part of the path), then a method
 * check.  Unknown path -> 404; known path, wrong method -> 405 with the
 * Allow header value.  GET routes also answer HEAD.  The model-management
 * paths (/api/pull, push, create, copy, delete) match any method and route
 * to GW_PATH_MANAGE, which the gateway answers 403.
 *
 * Also says which API's error format a path uses (/v1/... OpenAI, the rest
 * Ollama's).  Pure functions over a static table; any thread.
 */
#ifndef SLUICE_GATEWAY_HTTP_PATHS_H
#define SLUICE_GATEWAY_HTTP_PATHS_H

#include "gateway/http/http.h"

enum gw_path {
	GW_PATH_NONE = 0,
	GW_PATH_ROOT,              /* GET /  ("Ollama is running") */
	GW_PATH_OLLAMA_GENERATE,   /* POST /api/generate */
	GW_PATH_OLLAMA_CHAT,       /* POST /api/chat */
	GW_PATH_OLLAMA_TAGS,       /* GET /api/tags */
	GW_PATH_OLLAMA_SHOW,       /* POST /api/show */
	GW_PATH_OLLAMA_PS,         /* GET /api/ps */
	GW_PATH_OLLAMA_VERSION,    /* GET /api/version */
	GW_PATH_MANAGE,            /* any /api/{pull,push,create,copy,delete} */
	GW_PATH_OPENAI_CHAT,       /* POST /v1/chat/completions */
	GW_PATH_OPENAI_COMPLETIONS,/* POST /v1/completions */
	GW_PATH_OPENAI_MODELS,     /* GET /v1/models */
	GW_PATH_OPENAI_MODEL,      /* GET /v1/models/{id} */
	GW_PATH_OPENAI_EMBEDDINGS, /* POST /v1/embeddings */
	GW_PATH_OLLAMA_EMBED,      /* POST /api/embed */
	GW_PATH_OLLAMA_EMBEDDINGS, /* POST /api/embeddings (legacy) */
	GW_PATH_HEALTHZ,           /* GET /healthz */
	GW_PATH_READYZ,            /* GET /readyz */
	GW_PATH_METRICS,           /* GET /metrics (admin listener only) */
	GW_PATH_COUNT_,
};

enum gw_api_style {
	GW_STYLE_OLLAMA = 0, /* {"error":"..."} */
	GW_STYLE_OPENAI = 1, /* {"error":{"message","type","param","code"}} */
};

struct gw_path_match {
	enum gw_path route;       /* GW_PATH_NONE unless status is 0 */
	int status;                /* 0 matched, 404 unknown path, 405 wrong method */
	const char *allow;         /* for 405: the Allow header value */
	const char *manage_op;     /* GW_PATH_MANAGE: "pull", "push", ... */
	const char *arg;           /* GW_PATH_OPENAI_MODEL: the id (rest of the path) */
	enum gw_api_style style;   /* error format for this path */
};

void gw_paths_match(enum gw_http_method method, const char *path,
		     struct gw_path_match *out);

/* Error format for a path (NULL: Ollama's). */
enum gw_api_style gw_paths_style(const char *path);

/* Stable short name for logs and metric labels ("ollama_generate", ...). */
const char *gw_path_name(enum gw_path r);

#endif
