/*
 * router.c - static path/method table (see router.h).
 */
#include "gateway/router.h"

#include <string.h>

#define M(x) (1u << (x))

struct route_entry {
	const char *path;
	enum gw_route route;
	unsigned methods;   /* bit per enum gw_http_method; 0 = any */
	const char *allow;
	const char *name;
};

static const struct route_entry routes[] = {
	{ "/", GW_ROUTE_ROOT, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "root" },
	{ "/api/generate", GW_ROUTE_OLLAMA_GENERATE, M(GW_HTTP_POST), "POST", "ollama_generate" },
	{ "/api/chat", GW_ROUTE_OLLAMA_CHAT, M(GW_HTTP_POST), "POST", "ollama_chat" },
	{ "/api/tags", GW_ROUTE_OLLAMA_TAGS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_tags" },
	{ "/api/show", GW_ROUTE_OLLAMA_SHOW, M(GW_HTTP_POST), "POST", "ollama_show" },
	{ "/api/ps", GW_ROUTE_OLLAMA_PS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_ps" },
	{ "/api/version", GW_ROUTE_OLLAMA_VERSION, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_version" },
	{ "/api/pull", GW_ROUTE_MANAGE, 0, NULL, "manage" },
	{ "/api/push", GW_ROUTE_MANAGE, 0, NULL, "manage" },
	{ "/api/create", GW_ROUTE_MANAGE, 0, NULL, "manage" },
	{ "/api/copy", GW_ROUTE_MANAGE, 0, NULL, "manage" },
	{ "/api/delete", GW_ROUTE_MANAGE, 0, NULL, "manage" },
	{ "/v1/chat/completions", GW_ROUTE_OPENAI_CHAT, M(GW_HTTP_POST), "POST", "openai_chat" },
	{ "/v1/completions", GW_ROUTE_OPENAI_COMPLETIONS, M(GW_HTTP_POST), "POST", "openai_completions" },
	{ "/v1/models", GW_ROUTE_OPENAI_MODELS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "openai_models" },
	{ "/healthz", GW_ROUTE_HEALTHZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "healthz" },
	{ "/readyz", GW_ROUTE_READYZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "readyz" },
	{ "/metrics", GW_ROUTE_METRICS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "metrics" },
};

#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

enum gw_api_style gw_router_style(const char *path)
{
	if (path && strncmp(path, "/v1/", 4) == 0)
		return GW_STYLE_OPENAI;
	return GW_STYLE_OLLAMA;
}

void gw_router_match(enum gw_http_method method, const char *path,
		     struct gw_route_match *out)
{
	memset(out, 0, sizeof(*out));
	out->style = gw_router_style(path);
	out->status = 404;
	if (!path)
		return;
	for (size_t i = 0; i < N_ROUTES; i++) {
		const struct route_entry *e = &routes[i];

		if (strcmp(path, e->path) != 0)
			continue;
		if (e->methods && (method == GW_HTTP_OTHER ||
				   !(e->methods & M(method)))) {
			out->status = 405;
			out->allow = e->allow;
			return;
		}
		out->status = 0;
		out->route = e->route;
		if (e->route == GW_ROUTE_MANAGE)
			out->manage_op = e->path + strlen("/api/");
		return;
	}
}

const char *gw_route_name(enum gw_route r)
{
	if (r == GW_ROUTE_NONE)
		return "none";
	for (size_t i = 0; i < N_ROUTES; i++)
		if (routes[i].route == r)
			return routes[i].name;
	return "unknown";
}
