/*
 * fixed.c - bodies of the fixed endpoints: /api/version, /api/tags,
 * /api/ps, /v1/models, /api/show.
 */
#include "gateway/api/internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/utf8.h"

/* ---- fixed endpoints --------------------------------------------------- */

enum cm_status gw_api_render_version(struct cm_buf *out)
{
	json_t *o = json_object();

	if (!o)
		return CM_ENOMEM;
	json_object_set_new(o, "version", json_string(GW_API_OLLAMA_COMPAT_VERSION));
	json_object_set_new(o, "sluice_version", json_string(SLUICE_VERSION));
	return gw_api_dump_json(out, o);
}

void gw_api_parameter_size(uint64_t n, char out[16])
{
	if (n >= 1000000000ull)
		snprintf(out, 16, "%.1fB", (double)n / 1e9);
	else if (n >= 1000000ull)
		snprintf(out, 16, "%.1fM", (double)n / 1e6);
	else if (n >= 1000ull)
		snprintf(out, 16, "%.1fK", (double)n / 1e3);
	else
		snprintf(out, 16, "%llu", (unsigned long long)n);
}

static json_t *model_details(const struct gw_api_model *m)
{
	json_t *d = json_object(), *fams = json_array();

	json_object_set_new(d, "parent_model", json_string(""));
	json_object_set_new(d, "format", json_string("gguf"));
	json_object_set_new(d, "family", gw_api_jstr(m->family));
	json_array_append_new(fams, gw_api_jstr(m->family));
	json_object_set_new(d, "families", fams);
	json_object_set_new(d, "parameter_size", gw_api_jstr(m->parameter_size));
	json_object_set_new(d, "quantization_level", gw_api_jstr(m->quantization));
	return d;
}

/* What the model does: "completion" (it generates), "embedding" (it embeds). */
static json_t *capabilities(const struct gw_api_model *m)
{
	json_t *caps = json_array();

	if (m->generates)
		json_array_append_new(caps, json_string("completion"));
	if (m->embedding_dim)
		json_array_append_new(caps, json_string("embedding"));
	return caps;
}

static json_t *model_entry(const struct gw_api_model *m)
{
	json_t *o = json_object();
	char ts[32], hex[2 * PROTO_DIGEST_LEN + 1], name[GW_API_MODEL_NAME_MAX + 8];

	cm_wall_iso8601(m->modified_wall_ns, ts);
	cm_hex_encode(m->sha256, PROTO_DIGEST_LEN, hex);
	/* Ollama names carry a tag; an untagged name is "<name>:latest" */
	if (strchr(m->name, ':'))
		snprintf(name, sizeof(name), "%s", m->name);
	else
		snprintf(name, sizeof(name), "%.*s:latest", GW_API_MODEL_NAME_MAX, m->name);
	json_object_set_new(o, "name", gw_api_jstr(name));
	json_object_set_new(o, "model", gw_api_jstr(name));
	json_object_set_new(o, "modified_at", gw_api_jstr(ts));
	json_object_set_new(o, "size", json_integer((json_int_t)m->size_bytes));
	json_object_set_new(o, "digest", gw_api_jstr(hex));
	json_object_set_new(o, "details", model_details(m));
	json_object_set_new(o, "capabilities", capabilities(m));
	return o;
}

/* An empty object and array for a list body; 0, or -1 (both released). */
static int fx_list_new(json_t **o, json_t **arr)
{
	*o = json_object();
	*arr = json_array();
	if (*o && *arr)
		return 0;
	json_decref(*o);
	json_decref(*arr);
	return -1;
}

static enum cm_status model_list(struct cm_buf *out, const struct gw_api_model *m,
				 size_t n, int ps)
{
	json_t *o, *arr;

	if (fx_list_new(&o, &arr) != 0)
		return CM_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *e = model_entry(&m[i]);

		if (ps) {
			/* models stay loaded until the operator stops the worker */
			json_object_set_new(e, "expires_at", json_string("2999-12-31T23:59:59Z"));
			json_object_set_new(e, "size_vram", json_integer((json_int_t)m[i].vram_bytes));
		}
		json_array_append_new(arr, e);
	}
	json_object_set_new(o, "models", arr);
	return gw_api_dump_json(out, o);
}

enum cm_status gw_api_render_tags(struct cm_buf *out,
				  const struct gw_api_model *m, size_t n)
{
	return model_list(out, m, n, 0);
}

enum cm_status gw_api_render_ps(struct cm_buf *out,
				const struct gw_api_model *m, size_t n)
{
	return model_list(out, m, n, 1);
}

/* One OpenAI model object: id, object, created, owned_by. */
static json_t *openai_model(const struct gw_api_model *m)
{
	json_t *e = json_object();

	json_object_set_new(e, "id", gw_api_jstr(m->name));
	json_object_set_new(e, "object", json_string("model"));
	json_object_set_new(e, "created", json_integer(m->modified_wall_ns / CM_NS_PER_S));
	json_object_set_new(e, "owned_by", json_string("sluice"));
	json_object_set_new(e, "capabilities", capabilities(m));
	return e;
}

enum cm_status gw_api_render_model(struct cm_buf *out, const struct gw_api_model *m)
{
	return gw_api_dump_json(out, openai_model(m));
}

enum cm_status gw_api_render_models(struct cm_buf *out,
				    const struct gw_api_model *m, size_t n)
{
	json_t *o, *arr;

	if (fx_list_new(&o, &arr) != 0)
		return CM_ENOMEM;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, openai_model(&m[i]));
	json_object_set_new(o, "object", json_string("list"));
	json_object_set_new(o, "data", arr);
	return gw_api_dump_json(out, o);
}

enum cm_status gw_api_render_show(struct cm_buf *out, const struct gw_api_model *m)
{
	json_t *o = json_object(), *info = json_object(), *caps = capabilities(m);
	char key[96], ts[32];
	const char *arch = m->architecture ? m->architecture : "llama";

	if (!o || !info || !caps) {
		json_decref(o);
		json_decref(info);
		json_decref(caps);
		return CM_ENOMEM;
	}
	cm_wall_iso8601(m->modified_wall_ns, ts);
	/* no Modelfile, parameters or Go template exist: the worker's config does */
	json_object_set_new(o, "modelfile", json_string(""));
	json_object_set_new(o, "parameters", json_string(""));
	json_object_set_new(o, "template", json_string(""));
	json_object_set_new(o, "details", model_details(m));
	json_object_set_new(info, "general.architecture", gw_api_jstr(arch));
	snprintf(key, sizeof(key), "%.64s.context_length", arch);
	json_object_set_new(info, key, json_integer(m->context_len));
	json_object_set_new(info, "general.parameter_count",
			    json_integer((json_int_t)m->parameter_count));
	if (m->embedding_dim) {
		snprintf(key, sizeof(key), "%.64s.embedding_length", arch);
		json_object_set_new(info, key, json_integer(m->embedding_dim));
	}
	json_object_set_new(o, "model_info", info);
	{
		/* Sluice's own: the digest and the runtime that answer */
		char sha[2 * PROTO_DIGEST_LEN + 1];

		for (size_t i = 0; i < PROTO_DIGEST_LEN; i++)
			snprintf(sha + 2 * i, 3, "%02x", m->sha256[i]);
		json_object_set_new(o, "sluice", json_pack("{s:s,s:s,s:s,s:s}", "model_sha256", sha,
							   "engine_version", m->engine_version
							   ? m->engine_version : "", "backend",
							   m->backend ? m->backend : "", "device",
							   m->device ? m->device : ""));
	}
	json_object_set_new(o, "capabilities", caps);
	json_object_set_new(o, "modified_at", gw_api_jstr(ts));
	return gw_api_dump_json(out, o);
}
