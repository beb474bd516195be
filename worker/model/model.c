/*
 * model.c - loading a model: GGUF mapping, SHA-256 pin, hyperparameters and
 * weight views (from worker/model/model_config.h), tokenizer and chat template.
 *
 * Owns everything in struct wk_model; immutable after wk_model_load().
 */
#include "worker/model/model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "worker/text/chat.h"
#include "worker/model/gguf.h"
#include "worker/model/quant.h"
#include "worker/text/tokenizer.h"

static enum cm_status build_weights(struct wk_model *m, uint32_t n_ctx, char *err,
				    size_t err_len)
{
	const struct wk_mcfg *c = m->cfg;
	struct wk_hparams *hp = &m->hp;

	if (c->hp.head_dim != c->hp.head_dim_v) {
		snprintf(err, err_len, "attention: expected key_length == value_length, found %u and %u",
			 c->hp.head_dim, c->hp.head_dim_v);
		return CM_EUNSUPPORTED;
	}
	if (c->hp.rope_scaling == WK_ROPE_SCALING_YARN) {
		snprintf(err, err_len, "rope scaling 'yarn' is not supported (supported: none, linear, rope_freqs)");
		return CM_EUNSUPPORTED;
	}
	if (c->hp.rope_dim > c->hp.head_dim || c->hp.rope_dim % 2) {
		snprintf(err, err_len, "rope.dimension_count: expected an even value <= head dim %u, found %u",
			 c->hp.head_dim, c->hp.rope_dim);
		return CM_EFORMAT;
	}
	*hp = c->hp;
	if (c->rope_long) {
		uint32_t orig = hp->rope_orig_ctx ? hp->rope_orig_ctx : hp->n_ctx_train;
		uint32_t served = n_ctx ? n_ctx : hp->n_ctx_train;

		hp->rope_freqs = served > orig ? c->rope_long : c->rope_short;
	}

	m->tok_embd = c->tok_embd;
	m->output_norm = c->output_norm;
	m->output = c->output;
	m->layers = c->layers; /* the config's views: freed with it */
	m->weight_bytes = c->weight_bytes;
	m->n_params = c->n_params;
	return CM_OK;
}

/*
 * The name llama.cpp gives general.file_type (enum llama_ftype), e.g. 15 =
 * Q4_K_M; else, the type of layer 0's query weights ("Q8_0").
 */
static void file_type_name(const struct wk_model *m, char *out, size_t len)
{
	static const char *const names[] = {
		[0] = "F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0",
		[9] = "Q5_1", [10] = "Q2_K", [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L",
		[14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",
		[19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS", [23] = "IQ3_XXS",
		[24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S", [27] = "IQ3_M", [28] = "IQ2_S",
		[29] = "IQ2_M", [30] = "IQ4_XS", [31] = "IQ1_M", [32] = "BF16", [36] = "TQ1_0",
		[37] = "TQ2_0",
	};
	uint32_t ft;

	if (wk_gguf_get_u32(m->gguf, "general.file_type", &ft) == CM_OK &&
	    ft < sizeof(names) / sizeof(names[0]) && names[ft]) {
		snprintf(out, len, "%s", names[ft]);
		return;
	}
	snprintf(out, len, "%s", m->hp.n_layer > 0 ? wk_qtype_name(m->layers[0].wq.type) : "");
}

static void file_stem(const char *path, char *out, size_t len)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 5 && strcmp(base + n - 5, ".gguf") == 0)
		n -= 5;
	snprintf(out, len, "%.*s", (int)n, base);
}

enum cm_status wk_model_load(const char *path, const struct wk_model_opts *opts,
			     struct wk_model **out, char *err, size_t err_len)
{
	struct wk_model *m = NULL;
	struct wk_gguf_str name;
	enum cm_status st;
	struct stat sb;

	err[0] = '\0';
	m = cm_calloc(1, sizeof(*m));
	if (!m) {
		st = CM_ENOMEM;
		goto out;
	}
	if (opts && (opts->sha256_hex || opts->compute_sha256)) {
		char hex[CM_SHA256_HEX_LEN + 1];

		st = cm_sha256_file(path, m->sha256);
		if (st != CM_OK) {
			snprintf(err, err_len, "model '%s': cannot read it to check its sha256 (%s)",
				 path, cm_status_str(st));
			goto out;
		}
		m->has_sha256 = 1;
		cm_hex_encode(m->sha256, 32, hex);
		if (opts->sha256_hex && strcasecmp(opts->sha256_hex, hex) != 0) {
			snprintf(err, err_len,
				 "model '%s': sha256 mismatch: the config pins %.64s, the file has %s",
				 path, opts->sha256_hex, hex);
			st = CM_EPERM;
			goto out;
		}
	}
	st = wk_gguf_open(path, &m->gguf, err, err_len);
	if (st != CM_OK)
		goto out;
	st = wk_mcfg_load(m->gguf, &m->cfg, err, err_len);
	if (st != CM_OK)
		goto out;
	st = build_weights(m, opts ? opts->n_ctx : 0, err, err_len);
	if (st != CM_OK)
		goto out;
	st = wk_tok_new_from_gguf(m->gguf, &m->tok, err, err_len);
	if (st != CM_OK)
		goto out;
	if (opts && opts->chat_template && opts->chat_template[0]) {
		m->chat = wk_chat_template_by_name(opts->chat_template, err, err_len);
		if (!m->chat) {
			st = CM_EINVAL;
			goto out;
		}
	} else if (m->cfg->has_chat_template) {
		m->chat = wk_chat_template_detect(m->cfg->chat_template.ptr,
						  m->cfg->chat_template.len);
	} else {
		/* a base model: the messages as plain text, as Ollama does */
		m->chat = wk_chat_template_by_name("plain", NULL, 0);
	}
	m->file_bytes = wk_gguf_file_size(m->gguf);
	if (stat(path, &sb) == 0) {
		m->mtime_s = (int64_t)sb.st_mtim.tv_sec;
		m->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
		m->file_dev = (uint64_t)sb.st_dev;
		m->file_ino = (uint64_t)sb.st_ino;
		m->file_mode = (uint32_t)(sb.st_mode & 07777);
	}
	if (realpath(path, m->real_path) == NULL)
		snprintf(m->real_path, sizeof(m->real_path), "%s", path);
	file_type_name(m, m->file_type, sizeof(m->file_type));
	if (wk_gguf_get_str(m->gguf, "general.name", &name) == CM_OK && name.len > 0)
		snprintf(m->name, sizeof(m->name), "%.*s", (int)(name.len < 127 ? name.len : 127),
			 name.ptr);
	else
		file_stem(path, m->name, sizeof(m->name));
	*out = m;
	m = NULL;
out:
	wk_model_free(m);
	return st;
}

void wk_model_free(struct wk_model *m)
{
	if (!m)
		return;
	wk_tok_free(m->tok);
	wk_mcfg_free(m->cfg);
	wk_gguf_close(m->gguf);
	cm_free(m);
}

uint64_t wk_model_kv_bytes_per_token(const struct wk_hparams *hp, uint32_t elem_bytes)
{
	return 2ull * hp->n_layer * hp->n_head_kv * hp->head_dim * elem_bytes;
}
