/*
 * paths.c - static path/method table (see paths.h).
 */
#include "gateway/http/paths.h"

#include <string.h>

#define M(x) (1u << (x))

struct route_entry {
	const char *path;
	enum gw_path route;
	unsigned methods;   /* bit per enum gw_http_method; 0 = any */
	const char *allow;
	const char *name;
};

static const struct route_entry routes[] = {
	{ "/", GW_PATH_ROOT, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "root" },
	{ "/api/generate", GW_PATH_OLLAMA_GENERATE, M(GW_HTTP_POST), "POST", "ollama_generate" },
	{ "/api/chat", GW_PATH_OLLAMA_CHAT, M(GW_HTTP_POST), "POST", "ollama_chat" },
	{ "/api/tags", GW_PATH_OLLAMA_TAGS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_tags" },
	{ "/api/show", GW_PATH_OLLAMA_SHOW, M(GW_HTTP_POST), "POST", "ollama_show" },
	{ "/api/ps", GW_PATH_OLLAMA_PS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_ps" },
	{ "/api/version", GW_PATH_OLLAMA_VERSION, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_version" },
	{ "/api/pull", GW_PATH_MANAGE, 0, NULL, "manage" },
	{ "/api/push", GW_PATH_MANAGE, 0, NULL, "manage" },
	{ "/api/create", GW_PATH_MANAGE, 0, NULL, "manage" },
	{ "/api/copy", GW_PATH_MANAGE, 0, NULL, "manage" },
	{ "/api/delete", GW_PATH_MANAGE, 0, NULL, "manage" },
	{ "/v1/chat/completions", GW_PATH_OPENAI_CHAT, M(GW_HTTP_POST), "POST", "openai_chat" },
	{ "/v1/completions", GW_PATH_OPENAI_COMPLETIONS, M(GW_HTTP_POST), "POST", "openai_completions" },
	{ "/v1/models", GW_PATH_OPENAI_MODELS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "openai_models" },
	{ "/healthz", GW_PATH_HEALTHZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "healthz" },
	{ "/readyz", GW_PATH_READYZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "readyz" },
	{ "/metrics", GW_PATH_METRICS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "metrics" },
};

#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

enum gw_api_style gw_paths_style(const char *path)
{
	if (path && strncmp(path, "/v1/", 4) == 0)
		return GW_STYLE_OPENAI;
	return GW_STYLE_OLLAMA;
}

void gw_paths_match(enum gw_http_method method, const char *path,
		     struct gw_path_match *out)
{
	memset(out, 0, sizeof(*out));
	out->style = gw_paths_style(path);
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
		if (e->route == GW_PATH_MANAGE)
			out->manage_op = e->path + strlen("/api/");
		return;
	}
}

const char *gw_path_name(enum gw_path r)
{
	if (r == GW_PATH_NONE)
		return "none";
	for (size_t i = 0; i < N_ROUTES; i++)
		if (routes[i].route == r)
			return routes[i].name;
	return "unknown";
}
