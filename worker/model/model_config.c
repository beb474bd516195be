/*
 * model_config.c - hyperparameters of the GGUF models the engine runs (the
 * architectures in model_config.h), mixtures of experts included; the
 * weight tensors are checked by model_tensors.c.
 *
 * Owns: the wk_mcfg and its layer array.  Everything else points into the
 * wk_gguf.  Load is one pass: architecture, keys (with defaults and
 * bounds), every tensor's presence, shape and type (model_tensors.c),
 * then the derived sizes.
 */
#include "worker/model/model_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "worker/model/internal.h"
#include "worker/model/quant.h"

enum cm_status wk_mcfg_fail(struct mcfg_load *l, enum cm_status st, const char *fmt, ...)
{
	va_list ap;

	if (l->err && l->err_len) {
		va_start(ap, fmt);
		vsnprintf(l->err, l->err_len, fmt, ap);
		va_end(ap);
	}
	return st;
}

uint64_t wk_mcfg_kv_bytes(uint32_t n_layers, uint32_t n_kv_heads, uint32_t head_dim_k,
			  uint32_t head_dim_v, uint32_t bytes_per_elem)
{
	uint64_t r = (uint64_t)head_dim_k + head_dim_v;

	if (__builtin_mul_overflow(r, (uint64_t)n_kv_heads, &r) ||
	    __builtin_mul_overflow(r, (uint64_t)n_layers, &r) ||
	    __builtin_mul_overflow(r, (uint64_t)bytes_per_elem, &r))
		return 0;
	return r;
}

/* ==== keys ========================================================== */

static const char *arch_key(struct mcfg_load *l, const char *suffix)
{
	snprintf(l->key, sizeof(l->key), "%s.%s", l->c->arch_name, suffix);
	return l->key;
}

/*
 * Unsigned integer key in [lo, hi].  Absent: *out = def when !required.
 */
static enum cm_status key_u32(struct mcfg_load *l, const char *key, int required,
			      uint32_t def, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	enum cm_status st = wk_gguf_get_u64(l->g, key, &v);

	if (st == CM_ENOTFOUND) {
		if (required)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': missing (required)", key);
		*out = def;
		return CM_OK;
	}
	if (st != CM_OK) {
		int64_t iv;

		if (wk_gguf_get_i64(l->g, key, &iv) == CM_OK)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an integer in [%u, %u], "
				    "found %lld", key, lo, hi, (long long)iv);
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an unsigned integer, found "
			    "value type %u", key,
			    (unsigned)wk_gguf_key_type(l->g, (uint64_t)wk_gguf_find_key(l->g, key)));
	}
	if (v < lo || v > hi)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an integer in [%u, %u], found %llu",
			    key, lo, hi, (unsigned long long)v);
	*out = (uint32_t)v;
	return CM_OK;
}

/* Float key, finite and in (lo, hi]; absent: def. */
static enum cm_status key_f32(struct mcfg_load *l, const char *key, float def, float lo,
			      float hi, float *out)
{
	float v;
	enum cm_status st = wk_gguf_get_f32(l->g, key, &v);

	if (st == CM_ENOTFOUND) {
		*out = def;
		return CM_OK;
	}
	if (st != CM_OK)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected a float (f32 or f64)", key);
	if (!isfinite(v) || v <= lo || v > hi)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected a finite value in (%g, %g], found %g",
			    key, (double)lo, (double)hi, (double)v);
	*out = v;
	return CM_OK;
}

/* Printable, bounded rendering of a file string for messages. */
static void printable(const struct wk_gguf_str *s, char *out, size_t out_len)
{
	size_t i, n = 0;

	for (i = 0; i < s->len && n + 5 < out_len; i++) {
		unsigned char ch = (unsigned char)s->ptr[i];

		if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\')
			out[n++] = (char)ch;
		else
			n += (size_t)snprintf(out + n, out_len - n, "\\x%02x", ch);
	}
	if (i < s->len && n + 4 <= out_len) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n < out_len ? n : out_len - 1] = '\0';
}

static enum cm_status read_arch(struct mcfg_load *l)
{
	struct wk_gguf_str s;
	enum cm_status st = wk_gguf_get_str(l->g, "general.architecture", &s);
	char shown[80];

	if (st == CM_ENOTFOUND)
		return wk_mcfg_fail(l, CM_EFORMAT, "key 'general.architecture': missing (required)");
	if (st != CM_OK)
		return wk_mcfg_fail(l, CM_EFORMAT, "key 'general.architecture': expected a string");
	if (s.len == 5 && memcmp(s.ptr, "llama", 5) == 0) {
		l->c->hp.arch = WK_ARCH_LLAMA;
		l->c->arch_name = "llama";
	} else if (s.len == 5 && memcmp(s.ptr, "qwen2", 5) == 0) {
		l->c->hp.arch = WK_ARCH_QWEN2;
		l->c->arch_name = "qwen2";
		l->c->has_qkv_bias = 1;
	} else if (s.len == 5 && memcmp(s.ptr, "qwen3", 5) == 0) {
		l->c->hp.arch = WK_ARCH_QWEN3;
		l->c->arch_name = "qwen3";
		l->c->has_qk_norm = 1;
	} else if (s.len == 7 && memcmp(s.ptr, "granite", 7) == 0) {
		l->c->hp.arch = WK_ARCH_GRANITE;
		l->c->arch_name = "granite";
	} else if (s.len == 6 && memcmp(s.ptr, "gemma2", 6) == 0) {
		l->c->hp.arch = WK_ARCH_GEMMA2;
		l->c->arch_name = "gemma2";
	} else if (s.len == 6 && memcmp(s.ptr, "gemma3", 6) == 0) {
		l->c->hp.arch = WK_ARCH_GEMMA3;
		l->c->arch_name = "gemma3";
		l->c->has_qk_norm = 1;
	} else if (s.len == 8 && memcmp(s.ptr, "qwen3moe", 8) == 0) {
		l->c->hp.arch = WK_ARCH_QWEN3MOE;
		l->c->arch_name = "qwen3moe";
		l->c->has_qk_norm = 1;
	} else if (s.len == 8 && memcmp(s.ptr, "qwen2moe", 8) == 0) {
		l->c->hp.arch = WK_ARCH_QWEN2MOE;
		l->c->arch_name = "qwen2moe";
		l->c->has_qkv_bias = 1;
	} else if (s.len == 4 && memcmp(s.ptr, "bert", 4) == 0) {
		l->c->hp.arch = WK_ARCH_BERT;
		l->c->arch_name = "bert";
		l->c->has_qkv_bias = 1;
	} else if (s.len == 10 && memcmp(s.ptr, "nomic-bert", 10) == 0) {
		l->c->hp.arch = WK_ARCH_NOMIC_BERT;
		l->c->arch_name = "nomic-bert";
		l->c->fused_qkv = 1;
	} else if (s.len == 4 && memcmp(s.ptr, "phi3", 4) == 0) {
		l->c->hp.arch = WK_ARCH_PHI3;
		l->c->arch_name = "phi3";
		l->c->fused_gate_up = 1;
	} else {
		printable(&s, shown, sizeof(shown));
		return wk_mcfg_fail(l, CM_EUNSUPPORTED, "unsupported architecture '%s' (supported: "
			    "llama, qwen2, qwen2moe, qwen3, qwen3moe, granite, phi3, gemma2, gemma3, "
			    "bert, nomic-bert)", shown);
	}
	return CM_OK;
}

/* A float key that must be present (granite's scales). */
static enum cm_status key_f32_req(struct mcfg_load *l, const char *key, float lo, float hi,
				  float *out)
{
	if (wk_gguf_find_key(l->g, key) < 0)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': missing (required for %s)", key,
			    l->c->arch_name);
	return key_f32(l, key, 0.0f, lo, hi, out);
}

/*
 * The sliding window: {arch}.attention.sliding_window when present (0: no
 * window).  phi3 files of Phi-3 mini / medium carry none: llama.cpp gives
 * them their released windows by shape (4k context, 32 or 40 layers: 2047;
 * 128k: 262144 for mini, 131072 for medium) and refuses a phi3 file with
 * neither, as this does.
 */
static enum cm_status read_swa(struct mcfg_load *l)
{
	struct wk_hparams *hp = &l->c->hp;
	const char *key = arch_key(l, "attention.sliding_window");
	int found = wk_gguf_find_key(l->g, key) >= 0;

	hp->n_swa = 0;
	hp->swa_pattern = 0;
	if (hp->arch == WK_ARCH_GEMMA2) {
		hp->n_swa = 4096; /* Gemma 2's, when the file does not say */
		hp->swa_pattern = 2;
	}
	if (hp->arch == WK_ARCH_GEMMA3) {
		/* five local layers, then a global one; the window is required */
		hp->swa_pattern = 6;
		if (!found)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': missing (required for gemma3)", key);
	}
	if (hp->arch == WK_ARCH_PHI3) {
		if ((hp->n_layer == 32 || hp->n_layer == 40) && hp->n_ctx_train == 4096)
			hp->n_swa = 2047;
		else if (hp->n_layer == 32 && hp->n_head_kv == 32 && hp->n_ctx_train == 131072)
			hp->n_swa = 262144;
		else if (hp->n_layer == 40 && hp->n_ctx_train == 131072)
			hp->n_swa = 131072;
		if (!found && hp->n_swa == 0)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': missing (required for phi3 "
				    "files of this shape)", key);
	}
	if (found)
		return key_u32(l, key, 0, 0, 0, WK_MCFG_MAX_CTX, &hp->n_swa);
	return CM_OK;
}

/*
 * gemma2: the embedding times sqrt(embd), the query scale llama.cpp gives
 * by size (46 layers, the 27B: 1/sqrt(embd / heads); else
 * 1/sqrt(head_dim)), soft-capping of the attention scores and the logits
 * (optional keys, Gemma 2's 50 and 30 when absent), GELU.
 */
static enum cm_status read_gemma2(struct mcfg_load *l)
{
	struct wk_hparams *hp = &l->c->hp;
	enum cm_status st;

	hp->embd_scale = sqrtf((float)hp->n_embd);
	if (hp->n_layer == (hp->arch == WK_ARCH_GEMMA3 ? 62u : 46u)) /* the 27B */
		hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
	hp->ffn_act = WK_FFN_GELU_TANH;
	if (hp->arch == WK_ARCH_GEMMA3) {
		hp->rope_base_swa = 10000.0f; /* the local layers' base, as Gemma 3's config */
		return CM_OK;          /* no soft-capping */
	}
	st = key_f32(l, arch_key(l, "attn_logit_softcapping"), 50.0f, 0.0f, 1e6f,
		     &hp->attn_softcap);
	if (st == CM_OK)
		st = key_f32(l, arch_key(l, "final_logit_softcapping"), 30.0f, 0.0f, 1e6f,
			     &hp->final_softcap);
	return st;
}

/* granite's four scales; 1 (and 1/sqrt(head_dim)) for the others */
static enum cm_status read_scales(struct mcfg_load *l)
{
	struct wk_hparams *hp = &l->c->hp;
	enum cm_status st;

	hp->embd_scale = 1.0f;
	hp->residual_scale = 1.0f;
	hp->logit_scale = 1.0f;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
	hp->attn_softcap = 0.0f;
	hp->final_softcap = 0.0f;
	hp->rope_base_swa = 0.0f;
	hp->ffn_act = WK_FFN_SILU;
	if (hp->arch == WK_ARCH_GEMMA2 || hp->arch == WK_ARCH_GEMMA3)
		return read_gemma2(l);
	if (hp->arch != WK_ARCH_GRANITE)
		return CM_OK;
	st = key_f32_req(l, arch_key(l, "embedding_scale"), 0.0f, 1e6f, &hp->embd_scale);
	if (st == CM_OK)
		st = key_f32_req(l, arch_key(l, "residual_scale"), 0.0f, 1e6f, &hp->residual_scale);
	if (st == CM_OK)
		st = key_f32_req(l, arch_key(l, "attention.scale"), 0.0f, 1e6f, &hp->attn_scale);
	if (st == CM_OK)
		st = key_f32_req(l, arch_key(l, "logit_scale"), 0.0f, 1e6f, &hp->logit_scale);
	return st;
}

static enum cm_status read_rope_scaling(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	struct wk_gguf_str s;
	enum cm_status st;
	float f;

	c->hp.rope_scaling = WK_ROPE_SCALING_NONE;
	c->hp.rope_scale_factor = 1.0f;
	st = key_f32(l, arch_key(l, "rope.scaling.factor"), 1.0f, 0.0f, 1024.0f,
		     &c->hp.rope_scale_factor);
	if (st != CM_OK)
		return st;
	st = key_u32(l, arch_key(l, "rope.scaling.original_context_length"), 0, 0, 1,
		     WK_MCFG_MAX_CTX, &c->hp.rope_orig_ctx);
	if (st != CM_OK)
		return st;
	st = wk_gguf_get_str(l->g, arch_key(l, "rope.scaling.type"), &s);
	if (st == CM_OK) {
		char shown[48];

		if (s.len == 4 && memcmp(s.ptr, "none", 4) == 0) {
			c->hp.rope_scaling = WK_ROPE_SCALING_NONE;
		} else if (s.len == 6 && memcmp(s.ptr, "linear", 6) == 0) {
			c->hp.rope_scaling = WK_ROPE_SCALING_LINEAR;
		} else if (s.len == 4 && memcmp(s.ptr, "yarn", 4) == 0) {
			c->hp.rope_scaling = WK_ROPE_SCALING_YARN;
		} else {
			printable(&s, shown, sizeof(shown));
			return wk_mcfg_fail(l, CM_EUNSUPPORTED, "key '%s': unsupported rope scaling "
				    "'%s' (supported: none, linear, yarn)", l->key, shown);
		}
	} else if (st != CM_ENOTFOUND) {
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected a string", l->key);
	}
	/* older files: {arch}.rope.scale_linear */
	st = key_f32(l, arch_key(l, "rope.scale_linear"), 0.0f, 0.0f, 1024.0f, &f);
	if (st != CM_OK)
		return st;
	if (f > 0.0f && c->hp.rope_scaling == WK_ROPE_SCALING_NONE) {
		c->hp.rope_scaling = WK_ROPE_SCALING_LINEAR;
		c->hp.rope_scale_factor = f;
	}
	return CM_OK;
}

int wk_mcfg_encoder_arch(enum wk_arch a)
{
	return a == WK_ARCH_BERT || a == WK_ARCH_NOMIC_BERT;
}

int wk_mcfg_moe_arch(enum wk_arch a)
{
	return a == WK_ARCH_QWEN3MOE || a == WK_ARCH_QWEN2MOE;
}

/*
 * The mixture of experts: {arch}.expert_count (absent or 0: a dense FFN;
 * required by qwen3moe and qwen2moe), qwen2moe's
 * .expert_shared_feed_forward_length (default n_ff), .expert_used_count (1..min(count, 64)),
 * .expert_feed_forward_length (one expert's width; n_ff when absent),
 * .expert_weights_norm (default true: Mixtral's and Qwen3-MoE's
 * norm_topk_prob; false for qwen2moe), .expert_weights_scale (default 1).  Softmax gating
 * only: .expert_gating_func 2 (sigmoid) and shared experts are refused.
 */
static enum cm_status read_moe(struct mcfg_load *l)
{
	struct wk_hparams *hp = &l->c->hp;
	uint32_t v;
	int b;
	enum cm_status st;

	hp->n_expert = hp->n_expert_used = 0;
	hp->n_ff_exp = hp->n_ff;
	/* Qwen2-MoE keeps the top-k probabilities as they are (llama.cpp's
	 * qwen2moe, Hugging Face's norm_topk_prob false) */
	hp->expert_norm = hp->arch != WK_ARCH_QWEN2MOE;
	hp->expert_scale = 1.0f;
	hp->n_ff_shexp = 0;
	st = key_u32(l, arch_key(l, "expert_count"), wk_mcfg_moe_arch(hp->arch), 0,
		     wk_mcfg_moe_arch(hp->arch) ? 1 : 0, WK_MCFG_MAX_EXPERTS, &hp->n_expert);
	if (st != CM_OK || hp->n_expert == 0)
		return st;
	if (hp->arch == WK_ARCH_QWEN2MOE)
		st = key_u32(l, arch_key(l, "expert_shared_feed_forward_length"), 0, hp->n_ff, 1,
			     WK_MCFG_MAX_FF, &hp->n_ff_shexp);
	if (st != CM_OK)
		return st;
	st = key_u32(l, arch_key(l, "expert_used_count"), 1, 0, 1,
		     hp->n_expert < WK_MCFG_MAX_EXPERTS_USED ? hp->n_expert
							     : WK_MCFG_MAX_EXPERTS_USED,
		     &hp->n_expert_used);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "expert_feed_forward_length"), 0, hp->n_ff, 1,
			     WK_MCFG_MAX_FF, &hp->n_ff_exp);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "expert_shared_count"), 0, 0, 0, WK_MCFG_MAX_EXPERTS, &v);
	if (st == CM_OK && v != 0)
		return wk_mcfg_fail(l, CM_EUNSUPPORTED, "key '%s': %u shared experts (supported: 0, "
				 "as qwen3moe and Mixtral)", l->key, v);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "expert_gating_func"), 0, 1, 0, 3, &v);
	if (st == CM_OK && v > 1)
		return wk_mcfg_fail(l, CM_EUNSUPPORTED, "key '%s': gating function %u (%s) is not "
				 "supported (supported: 1, softmax)", l->key, v,
				 v == 2 ? "sigmoid" : "unknown");
	if (st == CM_OK)
		st = key_f32(l, arch_key(l, "expert_weights_scale"), 1.0f, 0.0f, 1e6f,
			     &hp->expert_scale);
	if (st != CM_OK)
		return st;
	st = wk_gguf_get_bool(l->g, arch_key(l, "expert_weights_norm"), &b);
	if (st == CM_OK)
		hp->expert_norm = b != 0;
	else if (st != CM_ENOTFOUND)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected a bool", l->key);
	return CM_OK;
}

/*
 * Encoders: {arch}.attention.causal (default true; bert false),
 * .attention.layer_norm_epsilon (bert's LayerNorms, default 1e-12) and
 * .pooling_type (0 none, 1 mean, 2 cls, 3 last; bert default mean).
 */
static enum cm_status read_encoder(struct mcfg_load *l)
{
	struct wk_hparams *hp = &l->c->hp;
	int bert = wk_mcfg_encoder_arch(hp->arch), b;
	uint32_t pool;
	enum cm_status st;

	hp->causal = !bert;
	hp->norm_eps = 1e-12f;
	st = wk_gguf_get_bool(l->g, arch_key(l, "attention.causal"), &b);
	if (st == CM_OK)
		hp->causal = b != 0;
	else if (st != CM_ENOTFOUND)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected a bool", l->key);
	if (bert && hp->causal)
		return wk_mcfg_fail(l, CM_EUNSUPPORTED, "key '%s': a causal %s is not supported",
				    l->key, l->c->arch_name);
	st = key_u32(l, arch_key(l, "pooling_type"), 0, bert ? WK_POOL_MEAN : WK_POOL_NONE, 0,
		     WK_POOL_LAST, &pool);
	if (st != CM_OK)
		return st;
	hp->pooling = (enum wk_pooling)pool;
	if (bert && pool == WK_POOL_NONE)
		return wk_mcfg_fail(l, CM_EUNSUPPORTED, "key '%s': bert without pooling (0) gives "
				    "no embedding (supported: 1 mean, 2 cls, 3 last)", l->key);
	return bert ? key_f32(l, arch_key(l, "attention.layer_norm_epsilon"), 1e-12f, 0.0f, 0.5f,
			      &hp->norm_eps)
		    : CM_OK;
}

static enum cm_status read_keys(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	enum cm_status st;
	uint32_t def_hd;

	st = key_u32(l, arch_key(l, "block_count"), 1, 0, 1, WK_MCFG_MAX_LAYERS, &c->hp.n_layer);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "embedding_length"), 1, 0, 1, WK_MCFG_MAX_EMBD,
			     &c->hp.n_embd);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "feed_forward_length"), 1, 0, 1, WK_MCFG_MAX_FF,
			     &c->hp.n_ff);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "attention.head_count"), 1, 0, 1,
			     WK_MCFG_MAX_HEADS, &c->hp.n_head);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "attention.head_count_kv"), 0, c->hp.n_head, 1,
			     c->hp.n_head, &c->hp.n_head_kv);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "context_length"), 1, 0, 1, WK_MCFG_MAX_CTX,
			     &c->hp.n_ctx_train);
	if (st != CM_OK)
		return st;
	if (c->hp.n_head % c->hp.n_head_kv)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': head_count %u is not a multiple of "
			    "head_count_kv %u", arch_key(l, "attention.head_count_kv"),
			    c->hp.n_head, c->hp.n_head_kv);
	def_hd = c->hp.n_embd % c->hp.n_head == 0 ? c->hp.n_embd / c->hp.n_head : 0;
	st = key_u32(l, arch_key(l, "attention.key_length"), def_hd == 0, def_hd, 1,
		     WK_MCFG_MAX_HEAD_DIM, &c->hp.head_dim);
	if (st == CM_OK)
		st = key_u32(l, arch_key(l, "attention.value_length"), def_hd == 0, def_hd, 1,
			     WK_MCFG_MAX_HEAD_DIM, &c->hp.head_dim_v);
	if (st != CM_OK)
		return st;
	if (c->hp.head_dim > WK_MCFG_MAX_HEAD_DIM || c->hp.head_dim_v > WK_MCFG_MAX_HEAD_DIM)
		return wk_mcfg_fail(l, CM_EFORMAT, "head dim %u (embedding_length %u / head_count %u) "
			    "exceeds %u", c->hp.head_dim, c->hp.n_embd, c->hp.n_head,
			    WK_MCFG_MAX_HEAD_DIM);
	st = key_u32(l, arch_key(l, "rope.dimension_count"), 0, c->hp.head_dim, 2,
		     c->hp.head_dim, &c->hp.rope_dim);
	if (st != CM_OK)
		return st;
	if (c->hp.rope_dim % 2)
		return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an even rope dimension, found %u",
			    arch_key(l, "rope.dimension_count"), c->hp.rope_dim);
	st = key_f32(l, arch_key(l, "rope.freq_base"), 10000.0f, 0.0f, 1e12f,
		     &c->hp.rope_base);
	if (st == CM_OK)
		st = key_f32(l, arch_key(l, "attention.layer_norm_rms_epsilon"), 1e-5f, 0.0f,
			     0.5f, &c->hp.rms_eps);
	if (st == CM_OK)
		st = read_rope_scaling(l);
	if (st == CM_OK)
		st = read_scales(l);
	if (st == CM_OK)
		st = key_f32(l, arch_key(l, "rope.scaling.attn_factor"), 1.0f, 0.0f, 1024.0f,
			     &c->hp.rope_attn_factor);
	if (st == CM_OK)
		st = read_swa(l);
	if (st == CM_OK)
		st = read_moe(l);
	if (st == CM_OK)
		st = read_encoder(l);
	return st;
}

static enum cm_status read_misc(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	enum cm_status st;
	uint64_t i, n = wk_gguf_n_tensors(l->g);

	for (i = 0; i < n; i++) {
		const struct wk_gguf_tensor *t = wk_gguf_tensor(l->g, i);

		c->n_params += t->n_elems;
		c->weight_bytes += t->n_bytes;
	}
	c->active_weight_bytes = c->weight_bytes;
	c->n_params_active = c->n_params;
	for (i = 0; c->hp.n_expert && i < c->hp.n_layer; i++) {
		/* a token reads n_expert_used of each layer's n_expert experts */
		const struct wk_tensor *x[3] = { &c->layers[i].exp_gate, &c->layers[i].exp_up,
						 &c->layers[i].exp_down };

		for (int k = 0; k < 3; k++) {
			uint64_t unused = c->hp.n_expert - c->hp.n_expert_used;

			c->active_weight_bytes -= unused * x[k]->rows * x[k]->row_bytes;
			c->n_params_active -= unused * x[k]->rows * x[k]->cols;
		}
	}
	c->kv_bytes_per_token = wk_mcfg_kv_bytes(c->hp.n_layer, c->hp.n_head_kv, c->hp.head_dim,
						 c->hp.head_dim_v, 2);
	/* what the engine derives from the keys, once, here */
	c->hp.rope_pos_scale = c->hp.rope_scaling == WK_ROPE_SCALING_LINEAR &&
					       c->hp.rope_scale_factor > 0
				       ? 1.0f / c->hp.rope_scale_factor : 1.0f;
	c->hp.rope_style = c->hp.arch == WK_ARCH_QWEN2 || c->hp.arch == WK_ARCH_QWEN3 ||
					   c->hp.arch == WK_ARCH_PHI3 || c->hp.arch == WK_ARCH_GEMMA2 ||
					   c->hp.arch == WK_ARCH_GEMMA3 || wk_mcfg_moe_arch(c->hp.arch) ||
					   c->hp.arch == WK_ARCH_NOMIC_BERT
				   ? WK_ROPE_NEOX : WK_ROPE_NORM;
	st = wk_gguf_get_str(l->g, "tokenizer.chat_template", &c->chat_template);
	if (st == CM_OK) {
		c->has_chat_template = c->chat_template.len > 0;
	} else if (st == CM_ENOTFOUND) {
		c->chat_template.ptr = "";
		c->chat_template.len = 0;
	} else {
		return wk_mcfg_fail(l, CM_EFORMAT, "key 'tokenizer.chat_template': expected a string");
	}
	st = wk_gguf_get_str(l->g, "tokenizer.ggml.model", &c->tokenizer_model);
	if (st == CM_ENOTFOUND) {
		c->tokenizer_model.ptr = "";
		c->tokenizer_model.len = 0;
	} else if (st != CM_OK) {
		return wk_mcfg_fail(l, CM_EFORMAT, "key 'tokenizer.ggml.model': expected a string");
	}
	return CM_OK;
}

enum cm_status wk_mcfg_load(const struct wk_gguf *g, struct wk_mcfg **out, char *err,
			    size_t err_len)
{
	struct mcfg_load l = { .g = g, .err = err, .err_len = err_len };
	enum cm_status st;

	*out = NULL;
	if (err && err_len)
		err[0] = '\0';
	l.c = cm_calloc(1, sizeof(*l.c));
	if (!l.c)
		return wk_mcfg_fail(&l, CM_ENOMEM, "out of memory");
	st = read_arch(&l);
	if (st == CM_OK)
		st = read_keys(&l);
	if (st == CM_OK)
		st = wk_mcfg_read_tensors(&l);
	if (st == CM_OK)
		st = read_misc(&l);
	if (st != CM_OK) {
		wk_mcfg_free(l.c);
		return st;
	}
	*out = l.c;
	return CM_OK;
}

void wk_mcfg_free(struct wk_mcfg *c)
{
	if (!c)
		return;
	cm_free(c->layers);
	cm_free(c);
}
