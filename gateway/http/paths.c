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
	int prefix;         /* the path is a prefix; the rest is out->arg */
};

static const struct route_entry routes[] = {
	{ "/", GW_PATH_ROOT, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "root", 0 },
	{ "/api/generate", GW_PATH_OLLAMA_GENERATE, M(GW_HTTP_POST), "POST", "ollama_generate", 0 },
	{ "/api/chat", GW_PATH_OLLAMA_CHAT, M(GW_HTTP_POST), "POST", "ollama_chat", 0 },
	{ "/api/embed", GW_PATH_OLLAMA_EMBED, M(GW_HTTP_POST), "POST", "ollama_embed", 0 },
	{ "/api/embeddings", GW_PATH_OLLAMA_EMBEDDINGS, M(GW_HTTP_POST), "POST", "ollama_embeddings", 0 },
	{ "/api/tags", GW_PATH_OLLAMA_TAGS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_tags", 0 },
	{ "/api/show", GW_PATH_OLLAMA_SHOW, M(GW_HTTP_POST), "POST", "ollama_show", 0 },
	{ "/api/ps", GW_PATH_OLLAMA_PS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_ps", 0 },
	{ "/api/version", GW_PATH_OLLAMA_VERSION, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "ollama_version", 0 },
	{ "/api/pull", GW_PATH_MANAGE, 0, NULL, "manage", 0 },
	{ "/api/push", GW_PATH_MANAGE, 0, NULL, "manage", 0 },
	{ "/api/create", GW_PATH_MANAGE, 0, NULL, "manage", 0 },
	{ "/api/copy", GW_PATH_MANAGE, 0, NULL, "manage", 0 },
	{ "/api/delete", GW_PATH_MANAGE, 0, NULL, "manage", 0 },
	{ "/v1/chat/completions", GW_PATH_OPENAI_CHAT, M(GW_HTTP_POST), "POST", "openai_chat", 0 },
	{ "/v1/completions", GW_PATH_OPENAI_COMPLETIONS, M(GW_HTTP_POST), "POST", "openai_completions", 0 },
	{ "/v1/embeddings", GW_PATH_OPENAI_EMBEDDINGS, M(GW_HTTP_POST), "POST", "openai_embeddings", 0 },
	{ "/v1/models", GW_PATH_OPENAI_MODELS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "openai_models", 0 },
	{ "/v1/models/", GW_PATH_OPENAI_MODEL, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "openai_model", 1 },
	{ "/healthz", GW_PATH_HEALTHZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "healthz", 0 },
	{ "/readyz", GW_PATH_READYZ, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "readyz", 0 },
	{ "/metrics", GW_PATH_METRICS, M(GW_HTTP_GET) | M(GW_HTTP_HEAD), "GET, HEAD", "metrics", 0 },
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

		size_t n = strlen(e->path);

		if (e->prefix ? strncmp(path, e->path, n) != 0 || path[n] == '\0'
			      : strcmp(path, e->path) != 0)
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
		if (e->prefix)
			out->arg = path + n;
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
