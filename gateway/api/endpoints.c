/*
 * endpoints.c - /api/tags, /api/ps, /v1/models, /api/show and /readyz from
 * the workers' HELLO and STATS (see endpoints.h).
 */
#include "gateway/api/endpoints.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

/* The models of the ready workers (deduplicated by name): described by a
 * serving worker when one is ready (a staged replica may run another
 * file or build), by a staged one only when no serving one is. */
static size_t ep_ready_models(struct gw_workers *w, const struct gw_rollout *ro,
			      struct gw_api_model *m, size_t max, struct gw_worker_info *wi)
{
	size_t n = gw_workers_count(w), k = 0;

	for (size_t j = 0; j < 2 * n && k < max; j++) {
		size_t i = j % n;
		int dup = 0;

		gw_workers_info(w, i, &wi[k]);
		if (!wi[k].ready || gw_rollout_takes_traffic(ro, i) != (j < n))
			continue;
		for (size_t x = 0; x < k; x++)
			dup |= strcmp(m[x].name, wi[k].hello.model_name.ptr) == 0;
		if (dup)
			continue;
		memset(&m[k], 0, sizeof(m[k]));
		m[k].name = wi[k].hello.model_name.ptr;
		/* what the worker read from its GGUF file (HELLO, version 2) */
		m[k].architecture = wi[k].hello.architecture.ptr;
		m[k].family = wi[k].hello.architecture.ptr;
		m[k].parameter_count = wi[k].hello.parameter_count;
		gw_api_parameter_size(wi[k].hello.parameter_count, m[k].parameter_size);
		m[k].quantization = wi[k].hello.file_type.ptr;
		m[k].size_bytes = wi[k].hello.model_bytes;
		m[k].modified_wall_ns = wi[k].hello.model_mtime_s * CM_NS_PER_S;
		memcpy(m[k].sha256, wi[k].hello.model_sha256, PROTO_DIGEST_LEN);
		m[k].context_len = wi[k].hello.context_len;
		m[k].embedding_dim = wi[k].hello.embedding_dim;
		m[k].generates = wi[k].hello.generates;
		m[k].engine_version = wi[k].hello.engine_version.ptr;
		m[k].backend = wi[k].hello.backend.ptr;
		m[k].device = wi[k].hello.device.ptr;
		m[k].vram_bytes = wi[k].have_stats ? wi[k].stats.device_mem_used : 0;
		k++;
	}
	return k;
}

size_t gw_api_model_resolve(const struct gw_workers *w, const char *name, size_t len)
{
	static const char tag[] = ":latest";
	const size_t tl = sizeof(tag) - 1;

	if (len > tl && memcmp(name + len - tl, tag, tl) == 0 &&
	    !gw_workers_knows_model(w, name, len) && gw_workers_knows_model(w, name, len - tl))
		return len - tl;
	return len;
}

enum cm_status gw_api_answer_models(struct gw_workers *w, const struct gw_rollout *ro,
				    enum gw_path path,
				    const void *body, size_t len,
				    const struct gw_api_limits *lim, struct cm_arena *a,
				    struct cm_buf *out, struct gw_api_error *e)
{
	struct gw_api_model m[GW_API_MODELS_MAX];
	struct gw_worker_info wi[GW_API_MODELS_MAX];
	size_t n = ep_ready_models(w, ro, m, GW_API_MODELS_MAX, wi), i;
	struct proto_str want;
	enum cm_status st;

	switch (path) {
	case GW_PATH_OLLAMA_TAGS: return gw_api_render_tags(out, m, n);
	case GW_PATH_OLLAMA_PS: return gw_api_render_ps(out, m, n);
	case GW_PATH_OPENAI_MODELS: return gw_api_render_models(out, m, n);
	case GW_PATH_OPENAI_MODEL:
		want = (struct proto_str){ body, (uint32_t)(len > GW_API_MODEL_NAME_MAX ?
							     GW_API_MODEL_NAME_MAX : len) };
		break;
	default:
		st = gw_api_parse_show(body, len, lim, a, &want, e);
		if (st != CM_OK)
			return CM_EINVAL; /* *e says why (400, or 500 when out of memory) */
		break;
	}
	want.len = (uint32_t)gw_api_model_resolve(w, want.ptr, want.len);
	for (i = 0; i < n; i++)
		if (strlen(m[i].name) == want.len && memcmp(m[i].name, want.ptr, want.len) == 0)
			break;
	if (i == n) {
		gw_api_error_model_not_found(e, want.ptr, want.len);
		return CM_ENOTFOUND;
	}
	return path == GW_PATH_OPENAI_MODEL ? gw_api_render_model(out, &m[i])
					    : gw_api_render_show(out, &m[i]);
}

int gw_api_answer_readyz(struct gw_workers *w, int redis_ok, int detailed, char *body, size_t cap,
			 size_t *len)
{
	size_t n = gw_workers_count(w), i;
	struct gw_worker_info wi;
	int l, ready;

	/* the first worker that is not ready, if any (wi is then its info) */
	for (i = 0; i < n; i++) {
		gw_workers_info(w, i, &wi);
		if (!wi.ready)
			break;
	}
	ready = i == n && n > 0 && redis_ok;
	if (ready)
		l = snprintf(body, cap, "{\"status\":\"ready\"}\n");
	else if (!detailed)
		l = snprintf(body, cap, "{\"status\":\"not ready\"}\n");
	else if (i < n)
		l = snprintf(body, cap,
			     "{\"status\":\"not ready\",\"worker\":\"%s\",\"reason\":\"%s\"}\n",
			     wi.name, wi.not_ready_reason);
	else if (n == 0)
		l = snprintf(body, cap, "{\"status\":\"not ready\",\"reason\":\"no workers\"}\n");
	else
		l = snprintf(body, cap, "{\"status\":\"not ready\",\"reason\":\"redis unavailable\"}\n");
	*len = l < 0 ? 0 : ((size_t)l < cap ? (size_t)l : cap - 1);
	return ready ? 200 : 503;
}

static void ep_respond(struct gw_request *r, int status, const char *ct,
		       const void *body, size_t len)
{
	if (gw_request_respond(r, status, ct, body, len) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "respond", "response not sent (client gone)");
}

void gw_api_respond_error(struct gw_request *r, enum gw_api_style style,
			  const struct gw_api_error *e, uint32_t retry_after)
{
	struct cm_buf b;
	char ra[16];

	cm_buf_init(&b, 64 * 1024);
	/* a header that does not fit only loses itself: the answer still goes */
	if (retry_after) {
		snprintf(ra, sizeof(ra), "%u", retry_after);
		if (gw_request_add_header(r, "Retry-After", ra) != CM_OK)
			cm_logf(CM_LOG_DEBUG, "respond", "Retry-After not added");
	}
	if (e->status == 401 &&
	    gw_request_add_header(r, "WWW-Authenticate", "Bearer") != CM_OK)
		cm_logf(CM_LOG_DEBUG, "respond", "WWW-Authenticate not added");
	if (gw_api_render_error(&b, style, e) == CM_OK)
		ep_respond(r, e->status, GW_API_CT_JSON, cm_buf_data(&b), cm_buf_len(&b));
	else
		ep_respond(r, 500, "text/plain", "internal error\n", 15);
	cm_buf_deinit(&b);
}
