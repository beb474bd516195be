/*
 * test_model_config.c - model hyperparameters and tensor checks (wk_mcfg)
 * on crafted in-memory models: every architecture's keys and tensors, the
 * mixture-of-experts views, an encoder (bert; the CPU backend refuses to
 * generate with it), and every way a file is refused.  The models
 * `sluice-model synth` writes are checked in test_model_tool.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/model/gguf.h"
#include "tools/gguf_write.h"
#include "worker/model/model_config.h"
#include "worker/model/model.h"
#include "worker/cpu/backend.h"
#include "worker/engine/backend.h"
#include "worker/model/quant.h"

/* ---- crafted models: embd 32, 4 heads (dim 8), 2 kv heads, ff 64, vocab 40 ---- */

#define E 32
#define FF 64
#define V 40
#define NL 2

struct mopts {
	const char *arch;      /* default "llama" */
	const char *drop;      /* tensor to leave out */
	const char *widen;     /* tensor whose last dim is doubled */
	const char *skip_key;  /* {arch}.suffix to leave out */
	int qwen_bias;         /* add q/k/v biases */
	int norm_f16;          /* norms in F16 */
	int rope_freqs;        /* add rope_freqs.weight */
	uint32_t bos;          /* bos_token_id (default 1) */
	uint32_t n_scores;     /* scores entries (default n_tokens) */
	uint32_t kv_heads;     /* default 2 */
	uint32_t n_tokens;     /* default V */
	const char *nan_in;    /* F32 tensor whose value 3 is NaN (inf with inf_not_nan) */
	int inf_not_nan;
	uint32_t experts;      /* a mixture of experts (0: dense) ... */
	uint32_t experts_used; /* ... expert_used_count (0: not written) */
	uint32_t gating;       /* expert_gating_func (0: not written) */
	uint32_t shared;       /* expert_shared_count (0: not written) */
	int fused;             /* ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps */
};

static void addt(struct wk_gguf_writer *w, const struct mopts *o, const char *name,
		 uint32_t n_dims, uint64_t d0, uint64_t d1)
{
	uint64_t dims[2] = { d0, d1 };
	uint32_t type = WK_Q_F32;

	if (o->drop && strcmp(o->drop, name) == 0)
		return;
	if (o->widen && strcmp(o->widen, name) == 0)
		dims[n_dims - 1] *= 2;
	if (o->norm_f16 && strstr(name, "norm"))
		type = WK_Q_F16;
	if (o->nan_in && strcmp(o->nan_in, name) == 0) {
		size_t n = (size_t)(dims[0] * (n_dims > 1 ? dims[1] : 1));
		float *v = calloc(n, sizeof(float));

		assert_non_null(v);
		v[3] = o->inf_not_nan ? INFINITY : NAN;
		assert_int_equal(wk_gguf_writer_add_tensor_raw(w, name, WK_Q_F32, n_dims, dims, v,
							       n * 4), CM_OK);
		free(v);
		return;
	}
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, name, type, n_dims, dims, NULL,
						       dims[0] * (n_dims > 1 ? dims[1] : 1) *
							       (type == WK_Q_F32 ? 4 : 2)),
			 CM_OK);
}

/* a 3-D expert tensor [d0, d1, experts], F32 */
static void addt3(struct wk_gguf_writer *w, const struct mopts *o, const char *name,
		  uint64_t d0, uint64_t d1)
{
	uint64_t dims[3] = { d0, d1, o->experts };

	if (o->drop && strcmp(o->drop, name) == 0)
		return;
	if (o->widen && strcmp(o->widen, name) == 0)
		dims[2] *= 2;
	assert_int_equal(wk_gguf_writer_add_tensor_raw(w, name, WK_Q_F32, 3, dims, NULL,
						       dims[0] * dims[1] * dims[2] * 4), CM_OK);
}

static void addk(struct wk_gguf_writer *w, const struct mopts *o, const char *suffix,
		 uint32_t v)
{
	char key[96];

	if (o->skip_key && strcmp(o->skip_key, suffix) == 0)
		return;
	snprintf(key, sizeof(key), "%s.%s", o->arch ? o->arch : "llama", suffix);
	assert_int_equal(wk_gguf_writer_add_u32(w, key, v), CM_OK);
}

static void addf(struct wk_gguf_writer *w, const struct mopts *o, const char *suffix, float v)
{
	char key[96];

	if (o->skip_key && strcmp(o->skip_key, suffix) == 0)
		return;
	snprintf(key, sizeof(key), "%s.%s", o->arch ? o->arch : "llama", suffix);
	assert_int_equal(wk_gguf_writer_add_f32(w, key, v), CM_OK);
}

static uint8_t *build_model(const struct mopts *o, size_t *len)
{
	struct wk_gguf_writer *w = NULL;
	uint32_t kvh = o->kv_heads ? o->kv_heads : 2, ntok = o->n_tokens ? o->n_tokens : V;
	const char **toks = calloc(ntok, sizeof(*toks));
	char name[64];
	uint8_t *buf = NULL;

	assert_non_null(toks);
	for (uint32_t i = 0; i < ntok; i++)
		toks[i] = "t";
	assert_int_equal(wk_gguf_writer_new(&w), CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "general.architecture",
						o->arch ? o->arch : "llama"), CM_OK);
	addk(w, o, "block_count", NL);
	addk(w, o, "embedding_length", E);
	addk(w, o, "feed_forward_length", FF);
	addk(w, o, "attention.head_count", 4);
	addk(w, o, "attention.head_count_kv", kvh);
	addk(w, o, "context_length", 128);
	if (o->arch && strcmp(o->arch, "granite") == 0) {
		addf(w, o, "embedding_scale", 12.0f);
		addf(w, o, "residual_scale", 0.22f);
		addf(w, o, "attention.scale", 0.015625f);
		addf(w, o, "logit_scale", 8.0f);
	}
	if (o->experts) {
		addk(w, o, "expert_count", o->experts);
		if (o->experts_used)
			addk(w, o, "expert_used_count", o->experts_used);
		if (o->gating)
			addk(w, o, "expert_gating_func", o->gating);
		if (o->shared)
			addk(w, o, "expert_shared_count", o->shared);
	}
	assert_int_equal(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, ntok),
			 CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama"), CM_OK);
	{
		uint32_t ns = o->n_scores ? o->n_scores : ntok;
		float *sc = calloc(ns, sizeof(float));

		assert_non_null(sc);
		assert_int_equal(wk_gguf_writer_add_arr(w, "tokenizer.ggml.scores", WK_GGUF_F32,
							sc, ns), CM_OK);
		free(sc);
	}
	assert_int_equal(wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id",
						o->bos ? o->bos : 1), CM_OK);
	addt(w, o, "token_embd.weight", 2, E, V);
	if (o->rope_freqs)
		addt(w, o, "rope_freqs.weight", 1, 4, 1);
	for (int l = 0; l < NL; l++) {
#define T(what, nd, d0, d1) snprintf(name, sizeof(name), "blk.%d.%s", l, what); \
		addt(w, o, name, nd, d0, d1)
		T("attn_norm.weight", 1, E, 1);
		T("attn_q.weight", 2, E, 32);
		T("attn_k.weight", 2, E, 8 * kvh);
		T("attn_v.weight", 2, E, 8 * kvh);
		if (o->qwen_bias) {
			T("attn_q.bias", 1, 32, 1);
			T("attn_k.bias", 1, 8 * kvh, 1);
			T("attn_v.bias", 1, 8 * kvh, 1);
		}
		T("attn_output.weight", 2, 32, E);
		T("ffn_norm.weight", 1, E, 1);
		if (o->experts) {
			T("ffn_gate_inp.weight", 2, E, o->experts);
			if (o->fused) {
				snprintf(name, sizeof(name), "blk.%d.ffn_gate_up_exps.weight", l);
				addt3(w, o, name, E, 2 * FF);
			} else {
				snprintf(name, sizeof(name), "blk.%d.ffn_gate_exps.weight", l);
				addt3(w, o, name, E, FF);
				snprintf(name, sizeof(name), "blk.%d.ffn_up_exps.weight", l);
				addt3(w, o, name, E, FF);
			}
			snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.weight", l);
			addt3(w, o, name, FF, E);
		} else {
			T("ffn_gate.weight", 2, E, FF);
			T("ffn_up.weight", 2, E, FF);
			T("ffn_down.weight", 2, FF, E);
		}
#undef T
	}
	addt(w, o, "output_norm.weight", 1, E, 1);
	addt(w, o, "output.weight", 2, E, V);
	assert_int_equal(wk_gguf_writer_write_mem(w, &buf, len), CM_OK);
	wk_gguf_writer_free(w);
	free(toks);
	return buf;
}

/* Loads a crafted model; returns the status, message in err. */
static enum cm_status load(const struct mopts *o, struct wk_mcfg **c, char *err,
			   size_t err_len, uint8_t **buf, struct wk_gguf **g)
{
	size_t len;
	char gerr[256];

	*buf = build_model(o, &len);
	assert_int_equal(wk_gguf_open_mem(*buf, len, g, gerr, sizeof(gerr)), CM_OK);
	return wk_mcfg_load(*g, c, err, err_len);
}

static void expect_load_error(const struct mopts *o, enum cm_status want, const char *substr)
{
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512] = "";
	enum cm_status st = load(o, &c, err, sizeof(err), &buf, &g);

	if (st != want || !strstr(err, substr))
		fail_msg("expected status %d and \"%s\", got %d: \"%s\"", want, substr, st, err);
	assert_null(c);
	wk_gguf_close(g);
	cm_free(buf);
}

static void test_crafted_llama(void **state)
{
	struct mopts o = { 0 };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512];

	(void)state;
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_int_equal(c->hp.arch, WK_ARCH_LLAMA);
	assert_string_equal(c->arch_name, "llama");
	assert_int_equal(c->hp.n_layer, NL);
	assert_int_equal(c->hp.n_embd, E);
	assert_int_equal(c->hp.n_ff, FF);
	assert_int_equal(c->hp.n_head, 4);
	assert_int_equal(c->hp.n_head_kv, 2);
	assert_int_equal(c->hp.head_dim, 8);
	assert_int_equal(c->hp.head_dim_v, 8);
	assert_int_equal(c->hp.rope_dim, 8);
	assert_int_equal(c->hp.n_ctx_train, 128);
	assert_int_equal(c->hp.n_vocab, V);
	assert_true(c->hp.rope_base == 10000.0f);
	assert_true(c->hp.rms_eps == 1e-5f);
	assert_int_equal(c->hp.rope_scaling, WK_ROPE_SCALING_NONE);
	assert_int_equal(c->tied_embeddings, 0);
	assert_int_equal(c->has_qkv_bias, 0);
	assert_int_equal(c->has_chat_template, 0);
	assert_ptr_equal(c->output.data, wk_gguf_find_tensor(g, "output.weight")->data);
	assert_ptr_equal(c->layers[1].w_down.data, wk_gguf_find_tensor(g, "blk.1.ffn_down.weight")->data);
	assert_string_equal(c->layers[1].w_down.name, "blk.1.ffn_down.weight");
	assert_null(c->layers[0].bq.data);
	assert_null(c->hp.rope_freqs);
	/* 2 layers * 2 kv heads * (8 + 8) * 2 bytes */
	assert_int_equal(c->kv_bytes_per_token, 128);
	{
		uint64_t per_layer = E + E * 32 + 2 * E * 16 + 32 * E + E + 3 * E * FF;
		uint64_t n = 2ull * E * V + E + NL * per_layer;

		assert_int_equal(c->n_params, n);
		assert_int_equal(c->weight_bytes, 4 * n);
	}
	wk_mcfg_free(c);
	wk_mcfg_free(NULL);
	wk_gguf_close(g);
	cm_free(buf);
}

static void test_tied_embeddings_and_rope(void **state)
{
	struct mopts o = { .drop = "output.weight", .rope_freqs = 1 };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512];

	(void)state;
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_int_equal(c->tied_embeddings, 1);
	assert_ptr_equal(c->output.data, c->tok_embd.data);
	assert_int_equal(c->hp.rope_scaling, WK_ROPE_SCALING_FREQS);
	assert_ptr_equal(c->hp.rope_freqs, wk_gguf_find_tensor(g, "rope_freqs.weight")->data);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);
}

static void test_granite_scales(void **state)
{
	struct mopts o = { .arch = "granite" };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512];

	(void)state;
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_int_equal(c->hp.arch, WK_ARCH_GRANITE);
	assert_string_equal(c->arch_name, "granite");
	assert_true(c->hp.embd_scale == 12.0f);
	assert_true(c->hp.residual_scale == 0.22f);
	assert_true(c->hp.attn_scale == 0.015625f);
	assert_true(c->hp.logit_scale == 8.0f);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NORM);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);
	/* llama: no scales, q.k by 1/sqrt(head_dim) */
	o = (struct mopts){ 0 };
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_true(c->hp.embd_scale == 1.0f && c->hp.logit_scale == 1.0f &&
		    c->hp.residual_scale == 1.0f);
	assert_true(c->hp.attn_scale == 1.0f / sqrtf((float)c->hp.head_dim));
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);
	/* each of the four is required */
	o = (struct mopts){ .arch = "granite", .skip_key = "residual_scale" };
	expect_load_error(&o, CM_EFORMAT, "key 'granite.residual_scale': missing");
}

static void test_qwen2_biases(void **state)
{
	struct mopts o = { .arch = "qwen2", .qwen_bias = 1 };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512];

	(void)state;
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_int_equal(c->hp.arch, WK_ARCH_QWEN2);
	assert_int_equal(c->has_qkv_bias, 1);
	assert_ptr_equal(c->layers[1].bk.data, wk_gguf_find_tensor(g, "blk.1.attn_k.bias")->data);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);

	o.qwen_bias = 0;
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.attn_q.bias': missing (expected shape [32])");
}

static void test_bad_models(void **state)
{
	struct mopts o;

	(void)state;
	o = (struct mopts){ .arch = "falcon" };
	expect_load_error(&o, CM_EUNSUPPORTED, "unsupported architecture 'falcon' (supported: "
			  "llama, qwen2, qwen2moe, qwen3, qwen3moe, granite, phi3, gemma2, gemma3, bert, nomic-bert)");
	/* gemma3 needs its window */
	o = (struct mopts){ .arch = "gemma3" };
	expect_load_error(&o, CM_EFORMAT, "key 'gemma3.attention.sliding_window': missing "
			  "(required for gemma3)");
	/* gemma2 needs its norms after attention and FFN */
	o = (struct mopts){ .arch = "gemma2" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.post_attention_norm.weight': missing "
			  "(expected shape [32])");
	/* a phi3 file of no released shape needs its window key */
	o = (struct mopts){ .arch = "phi3" };
	expect_load_error(&o, CM_EFORMAT, "key 'phi3.attention.sliding_window': missing (required "
			  "for phi3 files of this shape)");
	/* granite needs its four scales */
	o = (struct mopts){ .arch = "granite", .skip_key = "logit_scale" };
	expect_load_error(&o, CM_EFORMAT, "key 'granite.logit_scale': missing (required for granite)");
	/* qwen3 needs its per-head norms */
	o = (struct mopts){ .arch = "qwen3" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.attn_q_norm.weight': missing (expected shape [");
	o = (struct mopts){ .drop = "blk.1.ffn_up.weight" };
	expect_load_error(&o, CM_EFORMAT,
			  "tensor 'blk.1.ffn_up.weight': missing (expected shape [32, 64])");
	o = (struct mopts){ .widen = "blk.0.attn_k.weight" };
	expect_load_error(&o, CM_EFORMAT,
			  "tensor 'blk.0.attn_k.weight': expected shape [32, 16], found [32, 32]");
	o = (struct mopts){ .widen = "output_norm.weight" };
	expect_load_error(&o, CM_EFORMAT,
			  "tensor 'output_norm.weight': expected shape [32], found [64]");
	o = (struct mopts){ .drop = "token_embd.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'token_embd.weight': missing");
	o = (struct mopts){ .widen = "token_embd.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'token_embd.weight': 80 rows, but key "
			  "'tokenizer.ggml.tokens' has 40 tokens");
	o = (struct mopts){ .skip_key = "block_count" };
	expect_load_error(&o, CM_EFORMAT, "key 'llama.block_count': missing (required)");
	o = (struct mopts){ .kv_heads = 3 };
	expect_load_error(&o, CM_EFORMAT, "head_count 4 is not a multiple of head_count_kv 3");
	o = (struct mopts){ .kv_heads = 8 };
	expect_load_error(&o, CM_EFORMAT, "key 'llama.attention.head_count_kv': expected an "
			  "integer in [1, 4], found 8");
	o = (struct mopts){ .norm_f16 = 1 };
	expect_load_error(&o, CM_EFORMAT,
			  "tensor 'output_norm.weight': expected type F32, found F16");
	o = (struct mopts){ .bos = 40 };
	expect_load_error(&o, CM_EFORMAT, "key 'tokenizer.ggml.bos_token_id': token id 40 is "
			  "out of range (vocabulary of 40 tokens)");
	o = (struct mopts){ .n_scores = 39 };
	expect_load_error(&o, CM_EFORMAT, "key 'tokenizer.ggml.scores': 39 entries, expected 40");
	o = (struct mopts){ .n_tokens = 41 };
	expect_load_error(&o, CM_EFORMAT, "has 41 tokens");
	/* issue 13, finding 16: NaN or infinite norms reached undefined
	 * behaviour in the kernels; refused at load */
	o = (struct mopts){ .nan_in = "blk.0.attn_norm.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.attn_norm.weight': value 3 is NaN");
	o = (struct mopts){ .nan_in = "output_norm.weight", .inf_not_nan = 1 };
	expect_load_error(&o, CM_EFORMAT, "tensor 'output_norm.weight': value 3 is infinite");
}

/* Mixtral's layout (llama with experts): the keys, the 3-D views, what a
 * token reads; and every way such a file is refused */
static void test_moe_config(void **state)
{
	struct mopts o = { .experts = 4, .experts_used = 2 };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	uint8_t *buf = NULL;
	char err[512] = "";
	struct wk_tensor t1;

	(void)state;
	assert_int_equal(load(&o, &c, err, sizeof(err), &buf, &g), CM_OK);
	assert_int_equal(c->hp.n_expert, 4);
	assert_int_equal(c->hp.n_expert_used, 2);
	assert_int_equal(c->hp.n_ff_exp, FF);
	assert_true(c->hp.expert_norm && c->hp.expert_scale == 1.0f);
	assert_null(c->layers[0].w_gate.data);
	assert_int_equal(c->layers[1].exp_gate.rows, FF);
	assert_int_equal(c->layers[1].exp_gate.cols, E);
	assert_int_equal(c->layers[1].exp_down.rows, E);
	assert_int_equal(c->layers[1].exp_down.expert_stride, (uint64_t)E * FF * 4);
	t1 = wk_tensor_expert(&c->layers[1].exp_up, 3);
	assert_ptr_equal(t1.data, (const uint8_t *)c->layers[1].exp_up.data + 3ull * E * FF * 4);
	assert_int_equal(t1.expert_stride, 0);
	/* a token reads 2 of the 4 experts of each of the 3 matrices */
	assert_int_equal(c->weight_bytes - c->active_weight_bytes, NL * 3ull * 2 * E * FF * 4);
	assert_int_equal(c->n_params - c->n_params_active, NL * 3ull * 2 * E * FF);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);

	o = (struct mopts){ .experts = 4, .experts_used = 2, .gating = 2 };
	expect_load_error(&o, CM_EUNSUPPORTED, "key 'llama.expert_gating_func': gating function 2 "
			  "(sigmoid) is not supported (supported: 1, softmax)");
	o = (struct mopts){ .experts = 4, .experts_used = 2, .shared = 1 };
	expect_load_error(&o, CM_EUNSUPPORTED, "key 'llama.expert_shared_count': 1 shared experts");
	o = (struct mopts){ .experts = 4, .experts_used = 5 };
	expect_load_error(&o, CM_EFORMAT, "key 'llama.expert_used_count': expected an integer in "
			  "[1, 4], found 5");
	o = (struct mopts){ .experts = 4 };
	expect_load_error(&o, CM_EFORMAT, "key 'llama.expert_used_count': missing (required)");
	o = (struct mopts){ .experts = 4, .experts_used = 2, .drop = "blk.1.ffn_down_exps.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.1.ffn_down_exps.weight': missing (expected "
			  "shape [64, 32, 4])");
	o = (struct mopts){ .experts = 4, .experts_used = 2, .widen = "blk.0.ffn_up_exps.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.ffn_up_exps.weight': expected shape "
			  "[32, 64, 4], found [32, 64, 8]");
	o = (struct mopts){ .experts = 4, .experts_used = 2, .drop = "blk.0.ffn_gate_inp.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.0.ffn_gate_inp.weight': missing (expected "
			  "shape [32, 4])");
	/* a fused gate|up of the wrong shape: refused, and no view is made of
	 * it (fuzz_gguf found arithmetic on the empty view; UBSan flags it) */
	o = (struct mopts){ .experts = 4, .experts_used = 2, .fused = 1,
			    .widen = "blk.1.ffn_gate_up_exps.weight" };
	expect_load_error(&o, CM_EFORMAT, "tensor 'blk.1.ffn_gate_up_exps.weight': expected shape "
			  "[32, 128, 4], found [32, 128, 8]");
	/* qwen3moe always has experts */
	o = (struct mopts){ .arch = "qwen3moe" };
	expect_load_error(&o, CM_EFORMAT, "key 'qwen3moe.expert_count': missing (required)");
}

/* a bert (an encoder): embd 32, 2 heads, ff 64, ctx 16, 2 token types */
struct bopts {
	const char *drop;  /* tensor to leave out */
	int causal;        /* write attention.causal true */
	int pooling;       /* pooling_type to write (-1: none written) */
};

static uint8_t *build_bert(const struct bopts *o, size_t *len)
{
	static const char *const per_layer[][2] = {
		{ "attn_q.weight", "m" }, { "attn_q.bias", "v" }, { "attn_k.weight", "m" },
		{ "attn_k.bias", "v" }, { "attn_v.weight", "m" }, { "attn_v.bias", "v" },
		{ "attn_output.weight", "m" }, { "attn_output.bias", "v" },
		{ "attn_output_norm.weight", "v" }, { "attn_output_norm.bias", "v" },
		{ "ffn_up.weight", "u" }, { "ffn_up.bias", "f" }, { "ffn_down.weight", "d" },
		{ "ffn_down.bias", "v" }, { "layer_output_norm.weight", "v" },
		{ "layer_output_norm.bias", "v" },
	};
	struct wk_gguf_writer *w = NULL;
	const char *toks[V];
	struct mopts none = { 0 };
	char name[64];
	uint8_t *buf = NULL;

	for (uint32_t i = 0; i < V; i++)
		toks[i] = "t";
	none.drop = o->drop;
	assert_int_equal(wk_gguf_writer_new(&w), CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "general.architecture", "bert"), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "bert.block_count", NL), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "bert.embedding_length", E), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "bert.feed_forward_length", FF), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "bert.attention.head_count", 2), CM_OK);
	assert_int_equal(wk_gguf_writer_add_u32(w, "bert.context_length", 16), CM_OK);
	assert_int_equal(wk_gguf_writer_add_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f),
			 CM_OK);
	assert_int_equal(wk_gguf_writer_add_bool(w, "bert.attention.causal", o->causal), CM_OK);
	if (o->pooling >= 0)
		assert_int_equal(wk_gguf_writer_add_u32(w, "bert.pooling_type", (uint32_t)o->pooling),
				 CM_OK);
	assert_int_equal(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "bert"), CM_OK);
	assert_int_equal(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, V),
			 CM_OK);
	addt(w, &none, "token_embd.weight", 2, E, V);
	addt(w, &none, "token_types.weight", 2, E, 2);
	addt(w, &none, "position_embd.weight", 2, E, 16);
	addt(w, &none, "token_embd_norm.weight", 1, E, 1);
	addt(w, &none, "token_embd_norm.bias", 1, E, 1);
	for (int l = 0; l < NL; l++)
		for (size_t k = 0; k < sizeof(per_layer) / sizeof(per_layer[0]); k++) {
			char sh = per_layer[k][1][0];

			snprintf(name, sizeof(name), "blk.%d.%s", l, per_layer[k][0]);
			addt(w, &none, name, sh == 'v' || sh == 'f' ? 1 : 2,
			     sh == 'd' ? FF : sh == 'f' ? FF : E, sh == 'u' ? FF : sh == 'm' || sh == 'd' ? E : 1);
		}
	assert_int_equal(wk_gguf_writer_write_mem(w, &buf, len), CM_OK);
	wk_gguf_writer_free(w);
	return buf;
}

static enum cm_status load_bert(const struct bopts *o, struct wk_mcfg **c, char *err,
				size_t err_len)
{
	size_t len;
	uint8_t *buf = build_bert(o, &len);
	struct wk_gguf *g = NULL;
	char gerr[256];
	enum cm_status st;

	assert_int_equal(wk_gguf_open_mem(buf, len, &g, gerr, sizeof(gerr)), CM_OK);
	st = wk_mcfg_load(g, c, err, err_len);
	if (st == CM_OK) { /* the views point into buf: check them before it goes */
		assert_int_equal((*c)->hp.n_token_types, 2);
		assert_int_equal((*c)->pos_embd.rows, 16);
		assert_non_null((*c)->layers[1].ln_out_b.data);
		assert_non_null((*c)->layers[0].b_up.data);
		assert_int_equal((*c)->layers[0].b_up.cols, FF);
		assert_null((*c)->output.data);
		wk_mcfg_free(*c);
		*c = NULL;
	}
	wk_gguf_close(g);
	cm_free(buf);
	return st;
}

/* bert: an encoder's keys and tensors load; what is refused, by name */
static void test_bert_config(void **state)
{
	struct bopts o = { NULL, 0, 2 };
	struct wk_mcfg *c = NULL;
	char err[512] = "";

	(void)state;
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_OK);
	o = (struct bopts){ NULL, 0, -1 }; /* mean pooling when the file says none */
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_OK);
	o = (struct bopts){ NULL, 1, 1 };
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_EUNSUPPORTED);
	assert_non_null(strstr(err, "key 'bert.attention.causal': a causal bert is not supported"));
	o = (struct bopts){ NULL, 0, 0 };
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_EUNSUPPORTED);
	assert_non_null(strstr(err, "bert without pooling (0) gives no embedding"));
	o = (struct bopts){ "blk.1.layer_output_norm.bias", 0, 1 };
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "tensor 'blk.1.layer_output_norm.bias': missing (expected shape "
				    "[32])"));
	{
		/* the cpu backend embeds with it and refuses to generate */
		size_t len;
		uint8_t *buf = build_bert(&(struct bopts){ NULL, 0, 1 }, &len);
		char path[] = "/tmp/sluice-bert-XXXXXX";
		int fd = mkstemp(path);
		struct wk_model *m = NULL;
		struct wk_model_opts mo = { 0 };
		struct wk_backend *be = NULL;

		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
		close(fd);
		cm_free(buf);
		assert_int_equal(wk_model_load(path, &mo, &m, err, sizeof(err)), CM_OK);
		assert_int_equal(wk_cpu_backend_create(m, 4, 16, 1, WK_Q_F16, &be, err, sizeof(err)),
				 CM_OK);
		{
			int32_t tok[2] = { 1, 2 };
			uint32_t pos[2] = { 0, 1 }, seq[2] = { 0, 0 }, blk[1] = { 0 }, lens[1] = { 2 };
			uint32_t outi[1] = { 1 };
			struct wk_batch_seq bs = { blk, 1 };
			struct wk_batch b = { 2, tok, pos, seq, 1, &bs, 1, outi };
			float logits[64 * 64], vec[64];

			assert_true(m->hp.n_vocab <= 64 * 64 && m->hp.n_embd <= 64);
			assert_int_equal(be->ops->forward(be, &b, logits), CM_EUNSUPPORTED);
			assert_int_equal(be->ops->embed(be, 1, tok, lens, NULL, vec), CM_OK);
		}
		be->ops->destroy(be);
		wk_model_free(m);
		unlink(path);
	}
	o = (struct bopts){ "token_types.weight", 0, 1 };
	assert_int_equal(load_bert(&o, &c, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "tensor 'token_types.weight': expected shape [32, 1..16], "
				    "found missing"));
}

static void test_kv_bytes(void **state)
{
	(void)state;
	/* Llama-3.1-8B: 32 layers, 8 KV heads, head dim 128, F16 */
	assert_int_equal(wk_mcfg_kv_bytes(32, 8, 128, 128, 2), 131072);
	assert_int_equal(wk_mcfg_kv_bytes(32, 8, 128, 128, 2) * 8192, 1ull << 30);
	/* TinyLlama-1.1B: 22 layers, 4 KV heads, head dim 64 */
	assert_int_equal(wk_mcfg_kv_bytes(22, 4, 64, 64, 2), 22528);
	assert_int_equal(wk_mcfg_kv_bytes(UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, 2), 0);
}

static void test_alloc_failures(void **state)
{
	struct mopts o = { 0 };
	struct wk_mcfg *c = NULL;
	struct wk_gguf *g = NULL;
	size_t len;
	uint8_t *buf = build_model(&o, &len);
	char err[256];
	enum cm_status st = CM_ENOMEM;

	(void)state;
	assert_int_equal(wk_gguf_open_mem(buf, len, &g, err, sizeof(err)), CM_OK);
	for (long n = 0; n < 10 && st != CM_OK; n++) {
		cm_alloc_fail_after(n);
		st = wk_mcfg_load(g, &c, err, sizeof(err));
		cm_alloc_fail_reset();
		assert_true(st == CM_OK || st == CM_ENOMEM);
	}
	assert_int_equal(st, CM_OK);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	cm_free(buf);
}

/* ---- sluice-model synth / inspect / plan ---- */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crafted_llama),
		cmocka_unit_test(test_tied_embeddings_and_rope),
		cmocka_unit_test(test_granite_scales),
		cmocka_unit_test(test_qwen2_biases),
		cmocka_unit_test(test_bad_models),
		cmocka_unit_test(test_kv_bytes),
		cmocka_unit_test(test_alloc_failures),
		cmocka_unit_test(test_moe_config),
		cmocka_unit_test(test_bert_config),
	};

	return cmocka_run_group_tests_name("worker/model_config", tests, NULL, NULL);
}
