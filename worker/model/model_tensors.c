/*
 * model_tensors.c - the weight tensors of a model (see model_config.h):
 * each one's presence, shape and type for the architecture the keys named,
 * read as matrix views over the mapping (fused tensors as row views, 3-D
 * expert tensors as expert views), the vocabulary's size and per-token
 * arrays.  Called once by wk_mcfg_load (model_config.c) after the keys.
 *
 * Owns nothing: it fills the wk_mcfg that model_config.c owns (the layer
 * array is allocated here, freed by wk_mcfg_free).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "worker/model/internal.h"
#include "worker/model/quant.h"

/* ==== tensors ======================================================= */

static int shape_is(const struct wk_gguf_tensor *t, uint32_t n_dims, uint64_t d0,
		    uint64_t d1)
{
	return t->n_dims == n_dims && t->dims[0] == d0 && (n_dims < 2 || t->dims[1] == d1);
}

static void shape_str(const struct wk_gguf_tensor *t, char *out, size_t len)
{
	size_t n = 0;
	uint32_t d;

	n += (size_t)snprintf(out, len, "[");
	for (d = 0; d < t->n_dims && n < len; d++)
		n += (size_t)snprintf(out + n, len - n, "%s%llu", d ? ", " : "",
				      (unsigned long long)t->dims[d]);
	if (n < len)
		snprintf(out + n, len - n, "]");
}

/* A GGUF tensor viewed as a matrix (dims[0] columns); zeroed for NULL. */
static void mcfg_view(struct wk_tensor *t, const struct wk_gguf_tensor *g)
{
	memset(t, 0, sizeof(*t));
	if (!g)
		return;
	t->type = g->type;
	t->cols = g->dims[0];
	t->rows = g->n_dims > 1 ? g->dims[1] : 1;
	t->row_bytes = wk_qtype_row_bytes(g->type, t->cols);
	t->data = g->data;
	t->name = g->name;
}

/*
 * Finds tensor `name` with shape [d0] (n_dims 1) or [d0, d1] (n_dims 2).
 * f32_only: 1-D tensors (norms, biases) must be F32.  Absent and optional:
 * *out = NULL.
 */
static enum cm_status expect(struct mcfg_load *l, const char *name, int required,
			     uint32_t n_dims, uint64_t d0, uint64_t d1, int f32_only,
			     struct wk_tensor *out)
{
	const struct wk_gguf_tensor *t = wk_gguf_find_tensor(l->g, name);
	char found[96];

	mcfg_view(out, NULL);
	if (!t) {
		if (!required)
			return CM_OK;
		if (n_dims == 1)
			return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': missing (expected shape [%llu])",
				    name, (unsigned long long)d0);
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': missing (expected shape [%llu, %llu])",
			    name, (unsigned long long)d0, (unsigned long long)d1);
	}
	if (!shape_is(t, n_dims, d0, d1)) {
		shape_str(t, found, sizeof(found));
		if (n_dims == 1)
			return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': expected shape [%llu], found %s",
				    name, (unsigned long long)d0, found);
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': expected shape [%llu, %llu], found %s",
			    name, (unsigned long long)d0, (unsigned long long)d1, found);
	}
	if (f32_only && t->type != WK_Q_F32)
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': expected type F32, found %s", name,
			    wk_qtype_name(t->type));
	mcfg_view(out, t);
	if (f32_only) {
		/* norms and biases are small and scale everything: a NaN or an
		 * infinity there is a damaged file, refused here rather than
		 * spread through every activation (issue 13, finding 16) */
		const unsigned char *p = out->data;
		uint64_t n = out->rows * out->cols;

		for (uint64_t i = 0; i < n; i++) {
			float v;

			memcpy(&v, p + 4 * i, 4);
			if (!isfinite(v))
				return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': value %llu is %s, "
						 "expected a finite number (a damaged file?)", name,
						 (unsigned long long)i, isnan(v) ? "NaN" : "infinite");
		}
	}
	return CM_OK;
}

static const char *blk(struct mcfg_load *l, uint32_t i, const char *what)
{
	snprintf(l->tname, sizeof(l->tname), "blk.%u.%s", i, what);
	return l->tname;
}

/* rows [r0, r0 + n) of a matrix, as a matrix of its own (fused tensors) */
static void row_view(const struct wk_tensor *whole, uint64_t r0, uint64_t n, struct wk_tensor *out)
{
	*out = *whole;
	out->rows = n;
	out->data = (const uint8_t *)whole->data + r0 * whole->row_bytes;
}

/*
 * A 3-D expert tensor [d0, d1, n_expert]: the view is expert 0's (d1, d0)
 * matrix, each next expert d1 rows further.
 */
static enum cm_status expect_experts(struct mcfg_load *l, const char *name, uint64_t d0,
				     uint64_t d1, struct wk_tensor *out)
{
	const struct wk_gguf_tensor *t = wk_gguf_find_tensor(l->g, name);
	uint64_t n = l->c->hp.n_expert;
	char found[96];

	mcfg_view(out, NULL);
	if (!t)
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': missing (expected shape [%llu, %llu, "
				 "%llu])", name, (unsigned long long)d0, (unsigned long long)d1,
				 (unsigned long long)n);
	if (t->n_dims != 3 || t->dims[0] != d0 || t->dims[1] != d1 || t->dims[2] != n) {
		shape_str(t, found, sizeof(found));
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': expected shape [%llu, %llu, %llu], "
				 "found %s", name, (unsigned long long)d0, (unsigned long long)d1,
				 (unsigned long long)n, found);
	}
	mcfg_view(out, t);
	out->rows = d1;
	out->expert_stride = d1 * out->row_bytes;
	return CM_OK;
}

/*
 * The FFN of a mixture of experts: the router and the experts' gate, up
 * (apart, or fused as ffn_gate_up_exps with each expert's gate rows first)
 * and down matrices.
 */
static enum cm_status read_experts(struct mcfg_load *l, uint32_t i, struct wk_layer *ly)
{
	const struct wk_hparams *hp = &l->c->hp;
	uint64_t e = hp->n_embd, f = hp->n_ff_exp;
	enum cm_status st;

	st = expect(l, blk(l, i, "ffn_gate_inp.weight"), 1, 2, e, hp->n_expert, 0,
		    &ly->ffn_gate_inp);
	if (st == CM_OK && wk_gguf_find_tensor(l->g, blk(l, i, "ffn_gate_up_exps.weight"))) {
		st = expect_experts(l, l->tname, e, 2 * f, &ly->exp_gate);
		if (st != CM_OK) /* the views stay empty: no arithmetic on them */
			return st;
		ly->exp_gate.rows = f;
		ly->exp_up = ly->exp_gate;
		ly->exp_up.data = (const uint8_t *)ly->exp_gate.data + f * ly->exp_gate.row_bytes;
	} else {
		if (st == CM_OK)
			st = expect_experts(l, blk(l, i, "ffn_gate_exps.weight"), e, f, &ly->exp_gate);
		if (st == CM_OK)
			st = expect_experts(l, blk(l, i, "ffn_up_exps.weight"), e, f, &ly->exp_up);
	}
	if (st == CM_OK)
		st = expect_experts(l, blk(l, i, "ffn_down_exps.weight"), f, e, &ly->exp_down);
	if (st != CM_OK || !hp->n_ff_shexp)
		return st;
	/* qwen2moe's shared expert and its per-token gate */
	st = expect(l, blk(l, i, "ffn_gate_inp_shexp.weight"), 1, 1, e, 0, 1, &ly->shexp_gate_inp);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "ffn_gate_shexp.weight"), 1, 2, e, hp->n_ff_shexp, 0,
			    &ly->shexp_gate);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "ffn_up_shexp.weight"), 1, 2, e, hp->n_ff_shexp, 0,
			    &ly->shexp_up);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "ffn_down_shexp.weight"), 1, 2, hp->n_ff_shexp, e, 0,
			    &ly->shexp_down);
	return st;
}

static enum cm_status read_layer(struct mcfg_load *l, uint32_t i)
{
	struct wk_mcfg *c = l->c;
	struct wk_layer *ly = &c->layers[i];
	uint64_t e = c->hp.n_embd, q = (uint64_t)c->hp.n_head * c->hp.head_dim;
	uint64_t k = (uint64_t)c->hp.n_head_kv * c->hp.head_dim;
	uint64_t v = (uint64_t)c->hp.n_head_kv * c->hp.head_dim_v;
	uint64_t o = (uint64_t)c->hp.n_head * c->hp.head_dim_v;
	int b = c->has_qkv_bias;
	enum cm_status st;

	st = expect(l, blk(l, i, "attn_norm.weight"), 1, 1, e, 0, 1, &ly->attn_norm);
	if (st == CM_OK && c->fused_qkv) {
		struct wk_tensor qkv;

		st = expect(l, blk(l, i, "attn_qkv.weight"), 1, 2, e, q + k + v, 0, &qkv);
		if (st == CM_OK) {
			row_view(&qkv, 0, q, &ly->wq);
			row_view(&qkv, q, k, &ly->wk);
			row_view(&qkv, q + k, v, &ly->wv);
		}
	} else {
		if (st == CM_OK)
			st = expect(l, blk(l, i, "attn_q.weight"), 1, 2, e, q, 0, &ly->wq);
		if (st == CM_OK)
			st = expect(l, blk(l, i, "attn_k.weight"), 1, 2, e, k, 0, &ly->wk);
		if (st == CM_OK)
			st = expect(l, blk(l, i, "attn_v.weight"), 1, 2, e, v, 0, &ly->wv);
	}
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_output.weight"), 1, 2, o, e, 0,
			    &ly->wo);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_q.bias"), b, 1, q, 0, 1, &ly->bq);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_k.bias"), b, 1, k, 0, 1, &ly->bk);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_v.bias"), b, 1, v, 0, 1, &ly->bv);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_q_norm.weight"), c->has_qk_norm, 1, c->hp.head_dim, 0, 1,
			    &ly->q_norm);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "attn_k_norm.weight"), c->has_qk_norm, 1, c->hp.head_dim, 0, 1,
			    &ly->k_norm);
	if (st == CM_OK)
		st = expect(l, blk(l, i, "ffn_norm.weight"), 1, 1, e, 0, 1, &ly->ffn_norm);
	if (st == CM_OK && c->hp.n_expert) {
		st = read_experts(l, i, ly);
	} else if (st == CM_OK && c->fused_gate_up) {
		struct wk_tensor gu;

		st = expect(l, blk(l, i, "ffn_up.weight"), 1, 2, e, 2ull * c->hp.n_ff, 0, &gu);
		if (st == CM_OK) {
			row_view(&gu, 0, c->hp.n_ff, &ly->w_gate);
			row_view(&gu, c->hp.n_ff, c->hp.n_ff, &ly->w_up);
		}
	} else {
		if (st == CM_OK)
			st = expect(l, blk(l, i, "ffn_gate.weight"), 1, 2, e, c->hp.n_ff, 0,
				    &ly->w_gate);
		if (st == CM_OK)
			st = expect(l, blk(l, i, "ffn_up.weight"), 1, 2, e, c->hp.n_ff, 0, &ly->w_up);
	}
	if (st == CM_OK && !c->hp.n_expert)
		st = expect(l, blk(l, i, "ffn_down.weight"), 1, 2, c->hp.n_ff, e, 0, &ly->w_down);
	if (st == CM_OK && (c->hp.arch == WK_ARCH_GEMMA2 || c->hp.arch == WK_ARCH_GEMMA3))
		st = expect(l, blk(l, i, "post_attention_norm.weight"), 1, 1, e, 0, 1,
			    &ly->attn_post_norm);
	if (st == CM_OK && (c->hp.arch == WK_ARCH_GEMMA2 || c->hp.arch == WK_ARCH_GEMMA3))
		st = expect(l, blk(l, i, "post_ffw_norm.weight"), 1, 1, e, 0, 1, &ly->ffn_post_norm);
	return st;
}

/*
 * Per-token arrays must have one entry per token with the expected element
 * type, and special token ids must be inside the vocabulary: the tokenizer
 * indexes with them.
 */
static enum cm_status check_token_meta(struct mcfg_load *l)
{
	static const struct { const char *key; enum wk_gguf_vtype type; } arrs[] = {
		{ "tokenizer.ggml.scores", WK_GGUF_F32 },
		{ "tokenizer.ggml.token_type", WK_GGUF_I32 },
	};
	static const char *const ids[] = {
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.eot_token_id", "tokenizer.ggml.unknown_token_id",
	};
	enum wk_gguf_vtype et;
	uint64_t n, id;
	enum cm_status st;
	size_t i;

	for (i = 0; i < sizeof(arrs) / sizeof(arrs[0]); i++) {
		st = wk_gguf_get_arr(l->g, arrs[i].key, &et, &n);
		if (st == CM_ENOTFOUND)
			continue;
		if (st != CM_OK || et != arrs[i].type)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an array of %s", arrs[i].key,
				    arrs[i].type == WK_GGUF_F32 ? "f32" : "i32");
		if (n != l->c->hp.n_vocab)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': %llu entries, expected %u (one per "
				    "token)", arrs[i].key, (unsigned long long)n, l->c->hp.n_vocab);
	}
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		st = wk_gguf_get_u64(l->g, ids[i], &id);
		if (st == CM_ENOTFOUND)
			continue;
		if (st != CM_OK)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': expected an unsigned integer", ids[i]);
		if (id >= l->c->hp.n_vocab)
			return wk_mcfg_fail(l, CM_EFORMAT, "key '%s': token id %llu is out of range "
				    "(vocabulary of %u tokens)", ids[i], (unsigned long long)id,
				    l->c->hp.n_vocab);
	}
	return CM_OK;
}

static enum cm_status read_vocab(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	const struct wk_gguf_tensor *te = wk_gguf_find_tensor(l->g, "token_embd.weight");
	enum wk_gguf_vtype et;
	uint64_t n_tok = 0, n_vocab;
	enum cm_status st;
	int have_tokens = 0;
	char found[96];

	st = wk_gguf_get_arr(l->g, "tokenizer.ggml.tokens", &et, &n_tok);
	if (st == CM_OK) {
		if (et != WK_GGUF_STRING)
			return wk_mcfg_fail(l, CM_EFORMAT, "key 'tokenizer.ggml.tokens': expected an "
				    "array of strings");
		have_tokens = 1;
	} else if (st != CM_ENOTFOUND) {
		return wk_mcfg_fail(l, CM_EFORMAT, "key 'tokenizer.ggml.tokens': expected an array");
	}
	if (!te)
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor 'token_embd.weight': missing (expected "
			    "shape [%u, n_vocab])", c->hp.n_embd);
	if (te->n_dims != 2 || te->dims[0] != c->hp.n_embd) {
		shape_str(te, found, sizeof(found));
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor 'token_embd.weight': expected shape "
			    "[%u, n_vocab], found %s", c->hp.n_embd, found);
	}
	n_vocab = te->dims[1];
	if (have_tokens && n_tok != n_vocab)
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor 'token_embd.weight': %llu rows, but key "
			    "'tokenizer.ggml.tokens' has %llu tokens",
			    (unsigned long long)n_vocab, (unsigned long long)n_tok);
	if (n_vocab > WK_MCFG_MAX_VOCAB)
		return wk_mcfg_fail(l, CM_EFORMAT, "vocabulary of %llu tokens exceeds %u",
			    (unsigned long long)n_vocab, WK_MCFG_MAX_VOCAB);
	c->hp.n_vocab = (uint32_t)n_vocab;
	mcfg_view(&c->tok_embd, te);
	return check_token_meta(l);
}

/* A tensor an encoder layer must have: name, dims, F32 (norms, biases). */
struct enc_want {
	const char *name;
	uint32_t nd;
	uint64_t d0, d1;
	int f32;
	struct wk_tensor *t;
};

static enum cm_status expect_layer(struct mcfg_load *l, uint32_t i, const struct enc_want *w,
				   size_t n)
{
	enum cm_status st = CM_OK;

	for (size_t k = 0; k < n && st == CM_OK; k++)
		st = expect(l, blk(l, i, w[k].name), 1, w[k].nd, w[k].d0, w[k].d1, w[k].f32, w[k].t);
	return st;
}

/* One layer of nomic-bert: fused QKV, output, SwiGLU FFN (no biases),
 * LayerNorms (weight, bias) after attention and after the FFN. */
static enum cm_status read_nomic_layer(struct mcfg_load *l, uint32_t i)
{
	struct wk_mcfg *c = l->c;
	struct wk_layer *ly = &c->layers[i];
	uint64_t e = c->hp.n_embd, f = c->hp.n_ff;
	uint64_t kv = (uint64_t)c->hp.n_head_kv * c->hp.head_dim;
	struct wk_tensor qkv;
	const struct enc_want want[] = {
		{ "attn_qkv.weight", 2, e, e + 2 * kv, 0, &qkv },
		{ "attn_output.weight", 2, e, e, 0, &ly->wo },
		{ "attn_output_norm.weight", 1, e, 0, 1, &ly->ln_attn },
		{ "attn_output_norm.bias", 1, e, 0, 1, &ly->ln_attn_b },
		{ "ffn_up.weight", 2, e, f, 0, &ly->w_up },
		{ "ffn_gate.weight", 2, e, f, 0, &ly->w_gate },
		{ "ffn_down.weight", 2, f, e, 0, &ly->w_down },
		{ "layer_output_norm.weight", 1, e, 0, 1, &ly->ln_out },
		{ "layer_output_norm.bias", 1, e, 0, 1, &ly->ln_out_b },
	};
	enum cm_status st = expect_layer(l, i, want, sizeof(want) / sizeof(want[0]));

	if (st == CM_OK) {
		row_view(&qkv, 0, e, &ly->wq);
		row_view(&qkv, e, kv, &ly->wk);
		row_view(&qkv, e + kv, kv, &ly->wv);
	}
	return st;
}

/* One layer of bert: Q/K/V and output with biases, LayerNorm (weight,
 * bias) after attention, the GELU FFN with biases, LayerNorm after it. */
static enum cm_status read_bert_layer(struct mcfg_load *l, uint32_t i)
{
	struct wk_mcfg *c = l->c;
	struct wk_layer *ly = &c->layers[i];
	uint64_t e = c->hp.n_embd, f = c->hp.n_ff;
	uint64_t kv = (uint64_t)c->hp.n_head_kv * c->hp.head_dim;
	const struct enc_want want[] = {
		{ "attn_q.weight", 2, e, e, 0, &ly->wq },
		{ "attn_q.bias", 1, e, 0, 1, &ly->bq },
		{ "attn_k.weight", 2, e, kv, 0, &ly->wk },
		{ "attn_k.bias", 1, kv, 0, 1, &ly->bk },
		{ "attn_v.weight", 2, e, kv, 0, &ly->wv },
		{ "attn_v.bias", 1, kv, 0, 1, &ly->bv },
		{ "attn_output.weight", 2, e, e, 0, &ly->wo },
		{ "attn_output.bias", 1, e, 0, 1, &ly->bo },
		{ "attn_output_norm.weight", 1, e, 0, 1, &ly->ln_attn },
		{ "attn_output_norm.bias", 1, e, 0, 1, &ly->ln_attn_b },
		{ "ffn_up.weight", 2, e, f, 0, &ly->w_up },
		{ "ffn_up.bias", 1, f, 0, 1, &ly->b_up },
		{ "ffn_down.weight", 2, f, e, 0, &ly->w_down },
		{ "ffn_down.bias", 1, e, 0, 1, &ly->b_down },
		{ "layer_output_norm.weight", 1, e, 0, 1, &ly->ln_out },
		{ "layer_output_norm.bias", 1, e, 0, 1, &ly->ln_out_b },
	};
	return expect_layer(l, i, want, sizeof(want) / sizeof(want[0]));
}

/* bert, nomic-bert: the embeddings' tensors (nomic-bert: no position
 * embeddings, RoPE instead), then every layer; no output head */
static enum cm_status read_bert(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	const struct wk_gguf_tensor *tt = wk_gguf_find_tensor(l->g, "token_types.weight");
	uint64_t e = c->hp.n_embd;
	enum cm_status st;

	if (!tt || tt->n_dims != 2 || tt->dims[0] != e || tt->dims[1] < 1 || tt->dims[1] > 16) {
		char found[96] = "missing";

		if (tt)
			shape_str(tt, found, sizeof(found));
		return wk_mcfg_fail(l, CM_EFORMAT, "tensor 'token_types.weight': expected shape "
				    "[%llu, 1..16], found %s", (unsigned long long)e, found);
	}
	c->hp.n_token_types = (uint32_t)tt->dims[1];
	st = expect(l, "token_types.weight", 1, 2, e, tt->dims[1], 0, &c->tok_types);
	if (st == CM_OK && c->hp.arch == WK_ARCH_BERT)
		st = expect(l, "position_embd.weight", 1, 2, e, c->hp.n_ctx_train, 0, &c->pos_embd);
	if (st == CM_OK)
		st = expect(l, "token_embd_norm.weight", 1, 1, e, 0, 1, &c->embd_norm);
	if (st == CM_OK)
		st = expect(l, "token_embd_norm.bias", 1, 1, e, 0, 1, &c->embd_norm_b);
	if (st != CM_OK)
		return st;
	c->layers = cm_calloc(c->hp.n_layer, sizeof(*c->layers));
	if (!c->layers)
		return wk_mcfg_fail(l, CM_ENOMEM, "out of memory for %u layers", c->hp.n_layer);
	for (uint32_t i = 0; i < c->hp.n_layer && st == CM_OK; i++)
		st = c->hp.arch == WK_ARCH_BERT ? read_bert_layer(l, i) : read_nomic_layer(l, i);
	return st;
}

enum cm_status wk_mcfg_read_tensors(struct mcfg_load *l)
{
	struct wk_mcfg *c = l->c;
	struct wk_tensor freqs;
	enum cm_status st;
	uint32_t i;

	st = read_vocab(l);
	if (st == CM_OK && wk_mcfg_encoder_arch(c->hp.arch))
		return read_bert(l);
	if (st == CM_OK)
		st = expect(l, "output_norm.weight", 1, 1, c->hp.n_embd, 0, 1, &c->output_norm);
	if (st == CM_OK)
		st = expect(l, "output.weight", 0, 2, c->hp.n_embd, c->hp.n_vocab, 0, &c->output);
	if (st != CM_OK)
		return st;
	if (!c->output.data) {
		c->output = c->tok_embd;
		c->tied_embeddings = 1;
	}
	st = expect(l, "rope_freqs.weight", 0, 1, c->hp.rope_dim / 2, 0, 1, &freqs);
	if (st != CM_OK)
		return st;
	if (freqs.data) {
		c->hp.rope_scaling = WK_ROPE_SCALING_FREQS;
		c->hp.rope_freqs = freqs.data;
	}
	if (c->hp.arch == WK_ARCH_PHI3) {
		struct wk_tensor lf, sf;

		/* fused QKV unless the file has the three apart (llama.cpp reads both) */
		c->fused_qkv = wk_gguf_find_tensor(l->g, "blk.0.attn_qkv.weight") != NULL;
		st = expect(l, "rope_factors_long.weight", 0, 1, c->hp.rope_dim / 2, 0, 1, &lf);
		if (st == CM_OK)
			st = expect(l, "rope_factors_short.weight", 0, 1, c->hp.rope_dim / 2, 0, 1, &sf);
		if (st != CM_OK)
			return st;
		if (!lf.data != !sf.data)
			return wk_mcfg_fail(l, CM_EFORMAT, "tensor '%s': missing (LongRoPE needs both "
				    "rope_factors_long.weight and rope_factors_short.weight)",
				    lf.data ? "rope_factors_short.weight" : "rope_factors_long.weight");
		if (lf.data) {
			c->rope_long = lf.data;
			c->rope_short = sf.data;
			c->hp.rope_scaling = WK_ROPE_SCALING_FREQS;
			c->hp.rope_freqs = c->rope_short;
		}
	}
	c->layers = cm_calloc(c->hp.n_layer, sizeof(*c->layers));
	if (!c->layers)
		return wk_mcfg_fail(l, CM_ENOMEM, "out of memory for %u layers", c->hp.n_layer);
	for (i = 0; i < c->hp.n_layer; i++) {
		st = read_layer(l, i);
		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

