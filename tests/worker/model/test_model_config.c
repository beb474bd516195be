/*
 * test_model_config.c - model hyperparameters and tensor checks (wk_mcfg),
 * on crafted in-memory models and on files written by `sluice-model synth`
 * (whose inspect/plan numbers are checked against hand computation).
 * The synth tests skip when SLUICE_BUILD_DIR (set by ctest) is absent.
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
		T("ffn_gate.weight", 2, E, FF);
		T("ffn_up.weight", 2, E, FF);
		T("ffn_down.weight", 2, FF, E);
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
			  "llama, qwen2, qwen3, granite, phi3, gemma2, gemma3)");
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

static char tool[1024];
static char tmpdir[256];

static int setup_tool(void **state)
{
	const char *bd = getenv("SLUICE_BUILD_DIR");

	(void)state;
	if (!bd)
		return 0;
	snprintf(tool, sizeof(tool), "%s/tools/sluice-model", bd);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/sluice-test-mcfg-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	return 0;
}

static int teardown_tool(void **state)
{
	char cmd[600];

	(void)state;
	if (tmpdir[0] && strstr(tmpdir, "/tmp/sluice-test-mcfg-")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* Runs the tool; returns its exit status, output in out. */
static int run_tool(const char *args, char *out, size_t out_len)
{
	char cmd[4096];
	FILE *p;
	size_t n = 0;
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", tool, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (out) {
		n = fread(out, 1, out_len - 1, p);
		out[n] = '\0';
	} else {
		char junk[4096];

		while (fread(junk, 1, sizeof(junk), p) > 0)
			;
	}
	rc = pclose(p);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const char *synth(const char *file, const char *args)
{
	static char path[512];
	char a[1024];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
	snprintf(a, sizeof(a), "synth %s -o '%s'", args, path);
	assert_int_equal(run_tool(a, NULL, 0), 0);
	return path;
}

#define NEED_TOOL() do { if (!tool[0]) skip(); } while (0)

/* The config of a model synthesized with args into file: *g and *c for
 * the caller to free; returns the file's path (synth's buffer). */
static const char *synth_cfg(const char *file, const char *args, struct wk_gguf **g,
			     struct wk_mcfg **c)
{
	char err[512];
	const char *path = synth(file, args);

	assert_int_equal(wk_gguf_open(path, g, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_mcfg_load(*g, c, err, sizeof(err)), CM_OK);
	return path;
}

static uint64_t field(const char *out, const char *name)
{
	const char *p = strstr(out, name);

	if (!p)
		fail_msg("no '%s' in output:\n%s", name, out);
	return strtoull(p + strlen(name), NULL, 10);
}

static void test_synth_tiny(void **state)
{
	const char *path;
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	struct wk_gguf_str s, s2;
	enum wk_gguf_vtype et;
	uint64_t count, u;
	int b;
	char err[512];
	float scores[512];
	int32_t types[512];

	(void)state;
	NEED_TOOL();
	path = synth("tiny.gguf", "--preset tiny");
	assert_int_equal(wk_gguf_open(path, &g, err, sizeof(err)), CM_OK);
	assert_true(wk_gguf_file_size(g) < 5u * 1000 * 1000);
	assert_int_equal(wk_mcfg_load(g, &c, err, sizeof(err)), CM_OK);
	assert_int_equal(c->hp.n_layer, 2);
	assert_int_equal(c->hp.n_embd, 256);
	assert_int_equal(c->hp.n_head, 4);
	assert_int_equal(c->hp.n_head_kv, 2);
	assert_int_equal(c->hp.head_dim, 64);
	assert_int_equal(c->hp.n_ff, 256);
	assert_int_equal(c->hp.n_vocab, 512);
	assert_int_equal(c->hp.n_ctx_train, 512);
	assert_int_equal(c->kv_bytes_per_token, 1024);
	assert_int_equal(c->n_params, 1049856);
	assert_int_equal(c->weight_bytes, 4 * 1049856);
	assert_int_equal(c->has_chat_template, 1);
	assert_non_null(memmem(c->chat_template.ptr, c->chat_template.len, "<|im_start|>", 12));

	/* the generated SentencePiece-style vocabulary */
	assert_int_equal(wk_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &count), CM_OK);
	assert_int_equal(count, 512);
	/* array data may be unaligned in the mapping: copy it out */
	assert_non_null(wk_gguf_arr_data(g, "tokenizer.ggml.scores"));
	assert_non_null(wk_gguf_arr_data(g, "tokenizer.ggml.token_type"));
	memcpy(scores, wk_gguf_arr_data(g, "tokenizer.ggml.scores"), sizeof(scores));
	memcpy(types, wk_gguf_arr_data(g, "tokenizer.ggml.token_type"), sizeof(types));
	assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", 0, &s), CM_OK);
	assert_memory_equal(s.ptr, "<unk>", 5);
	assert_int_equal(types[0], 2);
	assert_int_equal(types[1], 3);
	assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", 3, &s), CM_OK);
	assert_int_equal(s.len, 6);
	assert_memory_equal(s.ptr, "<0x00>", 6);
	assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", 258, &s), CM_OK);
	assert_memory_equal(s.ptr, "<0xFF>", 6);
	assert_int_equal(types[258], 6);
	assert_int_equal(types[259], 1);
	for (uint64_t i = 260; i < 510; i++) {
		assert_int_equal(types[i], 1);
		assert_true(scores[i] < scores[i - 1]);
	}
	assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", 510, &s), CM_OK);
	assert_int_equal(s.len, 12);
	assert_memory_equal(s.ptr, "<|im_start|>", 12);
	assert_int_equal(types[510], 3);
	assert_int_equal(types[511], 3);
	assert_int_equal(wk_gguf_get_u64(g, "tokenizer.ggml.eot_token_id", &u), CM_OK);
	assert_int_equal(u, 511);
	assert_int_equal(wk_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u), CM_OK);
	assert_int_equal(u, 1);
	assert_int_equal(wk_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b), CM_OK);
	assert_int_equal(b, 1);
	/* all tokens distinct */
	for (uint64_t i = 0; i < count; i++) {
		assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s), CM_OK);
		for (uint64_t j = i + 1; j < count; j++) {
			assert_int_equal(wk_gguf_arr_str(g, "tokenizer.ggml.tokens", j, &s2), CM_OK);
			assert_false(s.len == s2.len && memcmp(s.ptr, s2.ptr, s.len) == 0);
		}
	}
	wk_mcfg_free(c);
	wk_gguf_close(g);
}

static void test_synth_types_and_archs(void **state)
{
	static const char *const types[] = { "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0",
					     "Q5_1", "IQ4_NL", "Q4_K", "Q4_K_M", "Q5_K", "Q6_K",
					     "Q2_K", "Q3_K", "IQ4_XS", "Q3_K_M", "Q5_K_M" };
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	char err[512], a[128], out[8192];
	const char *path;
	uint64_t u;

	(void)state;
	NEED_TOOL();
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		snprintf(a, sizeof(a), "--preset tiny --type %s", types[i]);
		path = synth("t.gguf", a);
		assert_int_equal(wk_gguf_open(path, &g, err, sizeof(err)), CM_OK);
		assert_int_equal(wk_mcfg_load(g, &c, err, sizeof(err)), CM_OK);
		if (strcmp(types[i], "Q4_K_M") == 0 || strcmp(types[i], "Q5_K_M") == 0) {
			assert_int_equal(c->output.type, WK_Q_Q6_K);
			assert_int_equal(c->layers[0].wq.type, types[i][1] == '4' ? WK_Q_Q4_K : WK_Q_Q5_K);
			assert_int_equal(c->layers[1].w_down.type, WK_Q_Q6_K);
		} else if (strcmp(types[i], "Q3_K_M") == 0) {
			/* llama-quantize's Q3_K_M: attn_v Q5_K in layers 0-1,
			 * attn_output and ffn_down Q4_K, output Q6_K */
			assert_int_equal(c->output.type, WK_Q_Q6_K);
			assert_int_equal(c->layers[0].wq.type, WK_Q_Q3_K);
			assert_int_equal(c->layers[1].wv.type, WK_Q_Q5_K);
			assert_int_equal(c->layers[0].wo.type, WK_Q_Q4_K);
			assert_int_equal(c->layers[0].w_down.type, WK_Q_Q4_K);
			assert_int_equal(c->layers[0].w_up.type, WK_Q_Q3_K);
		} else {
			assert_string_equal(wk_qtype_name(c->layers[0].wq.type), types[i]);
		}
		assert_int_equal(c->layers[0].attn_norm.type, WK_Q_F32);
		wk_mcfg_free(c);
		wk_gguf_close(g);
	}
	/* 576 wide in Q4_K_M: rows of 576 take llama-quantize's fallbacks
	 * (Q4_K -> Q5_0, Q6_K -> Q8_0), rows of 1536 stay K-quants */
	synth_cfg("w.gguf", "--preset tiny --type Q4_K_M --embd 576 --ffn 1536", &g, &c);
	assert_int_equal(c->hp.n_embd, 576);
	assert_int_equal(c->layers[0].wq.type, WK_Q_Q5_0);
	assert_int_equal(c->layers[0].wv.type, WK_Q_Q5_0);
	assert_int_equal(c->layers[1].wv.type, WK_Q_Q8_0);  /* Q4_K_M's more bits */
	assert_int_equal(c->layers[0].w_down.type, WK_Q_Q4_K);
	assert_int_equal(c->layers[1].w_down.type, WK_Q_Q6_K);
	assert_int_equal(c->output.type, WK_Q_Q8_0);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* 576 wide in Q2_K: llama-quantize's fallback for the low-bit
	 * super-block types is IQ4_NL */
	synth_cfg("w2.gguf", "--preset tiny --type Q2_K --embd 576 --ffn 1536", &g, &c);
	assert_int_equal(c->layers[0].wq.type, WK_Q_IQ4_NL);
	assert_int_equal(c->layers[0].w_down.type, WK_Q_Q2_K);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* qwen3: per-head q/k norms of head_dim, no biases, NEOX rope */
	synth_cfg("q3.gguf", "--preset tiny --arch qwen3", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_QWEN3);
	assert_string_equal(c->arch_name, "qwen3");
	assert_non_null(c->layers[1].q_norm.data);
	assert_int_equal(c->layers[1].k_norm.cols, c->hp.head_dim);
	assert_null(c->layers[0].bq.data);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NEOX);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* qwen2 with the llama3 template: biases, bos = <|begin_of_text|> */
	synth_cfg("q.gguf", "--preset tiny --arch qwen2 --template llama3 --seed 7 --rope-freqs", &g,
		  &c);
	assert_int_equal(c->hp.arch, WK_ARCH_QWEN2);
	assert_non_null(c->layers[1].bv.data);
	assert_int_equal(c->hp.rope_scaling, WK_ROPE_SCALING_FREQS);
	assert_int_equal(wk_gguf_get_u64(g, "tokenizer.ggml.bos_token_id", &u), CM_OK);
	assert_int_equal(u, 508);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	snprintf(a, sizeof(a), "inspect '%s'", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "architecture: qwen2"));
	assert_non_null(strstr(out, "family guess: llama3"));
	/* bad options */
	assert_int_equal(run_tool("synth --preset huge -o /dev/null", NULL, 0), 2);
	assert_int_equal(run_tool("synth --preset tiny --type IQ2_XXS -o /dev/null", NULL, 0), 2);
	assert_int_equal(run_tool("synth --preset tiny --arch falcon -o /dev/null", NULL, 0), 2);
}

/*
 * phi3: the fused tensors read as row views, NEOX rope, the window and
 * LongRoPE's factors picked by the served context.
 */
static void test_phi3(void **state)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };
	const struct wk_gguf_tensor *qkv, *up;
	char err[512];
	const char *path;

	(void)state;
	NEED_TOOL();
	path = synth_cfg("phi3.gguf", "--preset tiny --arch phi3 --swa 9", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_PHI3);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NEOX);
	assert_int_equal(c->hp.n_swa, 9);
	assert_true(fabsf(c->hp.rope_attn_factor - sqrtf(1.0f + logf(2.0f) / logf(256.0f))) < 1e-6f);
	assert_true(c->fused_qkv && c->fused_gate_up);
	qkv = wk_gguf_find_tensor(g, "blk.1.attn_qkv.weight");
	up = wk_gguf_find_tensor(g, "blk.1.ffn_up.weight");
	assert_non_null(qkv);
	assert_non_null(up);
	assert_ptr_equal(c->layers[1].wq.data, qkv->data);
	assert_int_equal(c->layers[1].wq.rows, c->hp.n_head * c->hp.head_dim);
	assert_ptr_equal(c->layers[1].wk.data,
			 (const uint8_t *)qkv->data + c->layers[1].wq.rows * c->layers[1].wq.row_bytes);
	assert_ptr_equal(c->layers[1].wv.data,
			 (const uint8_t *)c->layers[1].wk.data +
				 c->layers[1].wk.rows * c->layers[1].wk.row_bytes);
	assert_ptr_equal(c->layers[1].w_gate.data, up->data);
	assert_ptr_equal(c->layers[1].w_up.data,
			 (const uint8_t *)up->data + (uint64_t)c->hp.n_ff * c->layers[1].w_gate.row_bytes);
	assert_non_null(c->rope_long);
	assert_non_null(c->rope_short);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* served context 512 (the training one) > original 256: long factors */
	assert_int_equal(wk_model_load(path, &mo, &m, err, sizeof(err)), CM_OK);
	assert_ptr_equal(m->hp.rope_freqs, m->cfg->rope_long);
	wk_model_free(m);
	/* 256 or less: short */
	mo.n_ctx = 256;
	assert_int_equal(wk_model_load(path, &mo, &m, err, sizeof(err)), CM_OK);
	assert_ptr_equal(m->hp.rope_freqs, m->cfg->rope_short);
	wk_model_free(m);
}

/* gemma2: the scales, caps and the window on even layers; tied output */
static void test_gemma2(void **state)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;

	(void)state;
	NEED_TOOL();
	synth_cfg("gemma2.gguf", "--preset tiny --arch gemma2 --layers 3", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_GEMMA2);
	assert_int_equal(c->hp.n_layer, 3);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NEOX);
	assert_int_equal(c->hp.ffn_act, WK_FFN_GELU_TANH);
	assert_true(c->hp.embd_scale == 16.0f);
	assert_true(c->hp.attn_softcap == 50.0f && c->hp.final_softcap == 30.0f);
	assert_true(c->hp.attn_scale == 1.0f / sqrtf((float)c->hp.head_dim));
	assert_int_equal(c->hp.n_swa, 4096);
	assert_int_equal(wk_layer_swa(&c->hp, 0), 4096);
	assert_int_equal(wk_layer_swa(&c->hp, 1), 0);
	assert_int_equal(wk_layer_swa(&c->hp, 2), 4096);
	assert_true(c->tied_embeddings);
	assert_non_null(c->layers[2].ffn_post_norm.data);
	wk_mcfg_free(c);
	wk_gguf_close(g);
}

/* gemma3: QK norms, the window on 5 layers of 6, two rope bases, no caps */
static void test_gemma3(void **state)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;

	(void)state;
	NEED_TOOL();
	synth_cfg("gemma3.gguf", "--preset tiny --arch gemma3 --layers 7", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_GEMMA3);
	assert_true(c->has_qk_norm);
	assert_non_null(c->layers[6].q_norm.data);
	assert_non_null(c->layers[6].attn_post_norm.data);
	assert_true(c->hp.attn_softcap == 0.0f && c->hp.final_softcap == 0.0f);
	assert_true(c->hp.rope_base == 1000000.0f && c->hp.rope_base_swa == 10000.0f);
	assert_true(c->hp.rope_pos_scale == 0.125f);
	assert_int_equal(c->hp.n_swa, 1024);
	for (uint32_t l = 0; l < 7; l++)
		assert_int_equal(wk_layer_swa(&c->hp, l), l == 5 ? 0 : 1024);
	assert_true(c->tied_embeddings);
	wk_mcfg_free(c);
	wk_gguf_close(g);
}

static void test_synth_deterministic(void **state)
{
	char a[1024], out1[256], out2[256], out3[256];

	(void)state;
	NEED_TOOL();
	snprintf(a, sizeof(a), "sha256 '%s'", synth("d1.gguf", "--preset tiny --seed 5 --type Q8_0"));
	assert_int_equal(run_tool(a, out1, sizeof(out1)), 0);
	snprintf(a, sizeof(a), "sha256 '%s'", synth("d1.gguf", "--preset tiny --seed 5 --type Q8_0"));
	assert_int_equal(run_tool(a, out2, sizeof(out2)), 0);
	snprintf(a, sizeof(a), "sha256 '%s'", synth("d1.gguf", "--preset tiny --seed 6 --type Q8_0"));
	assert_int_equal(run_tool(a, out3, sizeof(out3)), 0);
	assert_memory_equal(out1, out2, 64);
	assert_memory_not_equal(out1, out3, 64);
}

static void test_inspect_and_plan(void **state)
{
	const char *path;
	char a[1024], out[8192];
	/* hand computation for the tiny preset (see docs/models.md) */
	const uint64_t weights = 4ull * 1049856;
	const uint64_t kv_tok = 2ull * 2 * 2 * 64 * 2;   /* K+V, layers, kv heads, dim, F16 */
	const uint64_t reserve = (64ull << 20) + 4ull * 512 * (4 * 256 + 2 * 256) + 4ull * 64 * 512;
	const uint64_t mem = 512ull << 20;

	(void)state;
	NEED_TOOL();
	path = synth("p.gguf", "--preset tiny");
	snprintf(a, sizeof(a), "inspect '%s' --sha", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_int_equal(field(out, "kv bytes per token (F16): "), 1024);
	assert_int_equal(field(out, "parameters: "), 1049856);
	assert_int_equal(field(out, "context length: "), 512);
	assert_non_null(strstr(out, "family guess: chatml"));
	assert_non_null(strstr(out, "F32        21 tensors"));
	assert_non_null(strstr(out, "sha256: "));

	snprintf(a, sizeof(a), "plan '%s' --memory 512MiB --context 512", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_int_equal(field(out, "weights: "), weights);
	assert_int_equal(field(out, "kv per token: "), kv_tok);
	assert_int_equal(field(out, "reserve: "), reserve);
	assert_int_equal(field(out, "kv per sequence: "), kv_tok * 512);
	assert_int_equal(field(out, "sequences: "), (mem - weights - reserve) / (kv_tok * 512));
	assert_int_equal(field(out, "sequences: "), 881);

	/* context rounded up to whole KV blocks of 16 tokens */
	snprintf(a, sizeof(a), "plan '%s' --memory 100000000 --context 100 --reserve 1MiB", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_int_equal(field(out, "kv per sequence: "), kv_tok * 112);
	assert_int_equal(field(out, "sequences: "), (100000000 - weights - (1 << 20)) / (kv_tok * 112));

	snprintf(a, sizeof(a), "plan '%s' --memory 4MiB --context 512", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "does not fit: the weights alone"));
	snprintf(a, sizeof(a), "plan '%s' --memory 24GiB --context 512", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_int_equal(field(out, "memory: "), 24ull << 30);
	snprintf(a, sizeof(a), "plan '%s' --memory lots --context 512", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "--memory: expected a size"));
	assert_int_equal(run_tool("inspect /nonexistent.gguf", out, sizeof(out)), 1);
	assert_non_null(strstr(out, "cannot open"));
}

/* Writes a llama2.c checkpoint (header + `floats` float32) and a
 * tokenizer.bin of `n_tok` entries into tmpdir. */
static void l2c_files(const char *ckpt, const int32_t hdr[7], size_t floats,
		      const char *tokf, int n_tok)
{
	FILE *f = fopen(ckpt, "wb");
	int32_t maxlen = 8;

	assert_non_null(f);
	assert_int_equal(fwrite(hdr, 4, 7, f), 7);
	for (size_t i = 0; i < floats; i++) {
		float v = (float)((i * 7919) % 100) / 100.0f - 0.5f;

		assert_int_equal(fwrite(&v, 4, 1, f), 1);
	}
	fclose(f);
	f = fopen(tokf, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&maxlen, 4, 1, f), 1);
	for (int i = 0; i < n_tok; i++) {
		const char *const fixed[] = { "<unk>", "\n<s>\n", "\n</s>\n", "<0x41>", " a" };
		char piece[16];
		float score = (float)-i;
		int32_t len;

		snprintf(piece, sizeof(piece), "%s", i < 5 ? fixed[i] : "b");
		len = (int32_t)strlen(piece);
		assert_int_equal(fwrite(&score, 4, 1, f), 1);
		assert_int_equal(fwrite(&len, 4, 1, f), 1);
		assert_int_equal(fwrite(piece, 1, (size_t)len, f), (size_t)len);
	}
	fclose(f);
}

static void test_import_llama2c(void **state)
{
	/* dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 6 (tied), seq 16 */
	int32_t hdr[7] = { 8, 16, 1, 2, 1, 6, 16 };
	/* embd 6*8; norms 2*8; wq, wo 2*64; wk, wv 2*4*8; w1-3 3*16*8; final 8;
	 * rope tables 16*4/2*2 */
	const size_t floats = 48 + 16 + 128 + 64 + 384 + 8 + 64;
	char ckpt[600], tokf[600], out[600], a[2048], o[8192];
	struct wk_gguf *g;
	struct wk_mcfg *c;
	char err[512];

	(void)state;
	NEED_TOOL();
	snprintf(ckpt, sizeof(ckpt), "%s/l2c.bin", tmpdir);
	snprintf(tokf, sizeof(tokf), "%s/tok.bin", tmpdir);
	snprintf(out, sizeof(out), "%s/l2c.gguf", tmpdir);
	l2c_files(ckpt, hdr, floats, tokf, 6);
	snprintf(a, sizeof(a), "import llama2c '%s' --vocab '%s' -o '%s'", ckpt, tokf, out);
	assert_int_equal(run_tool(a, o, sizeof(o)), 0);
	assert_non_null(strstr(o, "tied classifier"));
	assert_int_equal(wk_gguf_open(out, &g, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_mcfg_load(g, &c, err, sizeof(err)), CM_OK);
	assert_int_equal(c->hp.n_layer, 1);
	assert_int_equal(c->hp.n_head_kv, 1);
	assert_int_equal(c->hp.n_ctx_train, 16);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NORM);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* untied: a classifier after the weights */
	hdr[5] = -6;
	l2c_files(ckpt, hdr, floats + 48, tokf, 6);
	assert_int_equal(run_tool(a, o, sizeof(o)), 0);
	assert_non_null(strstr(o, "untied classifier"));
	/* bad input: a message naming what was expected and found, exit 1 */
	l2c_files(ckpt, hdr, floats, tokf, 6); /* the classifier is missing */
	snprintf(a, sizeof(a), "import llama2c '%s' --vocab '%s' -o '%s' 2>&1", ckpt, tokf, out);
	assert_int_equal(run_tool(a, o, sizeof(o)), 1);
	assert_non_null(strstr(o, "untied classifier), found"));
	hdr[5] = 6;
	l2c_files(ckpt, hdr, floats, tokf, 5);
	assert_int_equal(run_tool(a, o, sizeof(o)), 1);
	assert_non_null(strstr(o, "expected 6 tokens"));
	hdr[4] = 3; /* kv heads not dividing heads */
	l2c_files(ckpt, hdr, floats, tokf, 6);
	assert_int_equal(run_tool(a, o, sizeof(o)), 1);
	assert_non_null(strstr(o, "expected a llama2.c header"));
	assert_int_equal(run_tool("import gguf x --vocab y -o z", NULL, 0), 2);
	assert_int_equal(run_tool("import llama2c x -o z", NULL, 0), 2);
}

/* With ../shared: the shipped model is exactly this conversion. */
static void test_import_reproduces_shipped_model(void **state)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char a[2048], o1[256], o2[256], out[600], shared[600];

	(void)state;
	NEED_TOOL();
	if (!src)
		skip();
	snprintf(shared, sizeof(shared), "%s/../shared/models/stories260K", src);
	if (access(shared, R_OK) != 0)
		skip();
	snprintf(out, sizeof(out), "%s/s260.gguf", tmpdir);
	snprintf(a, sizeof(a), "import llama2c '%s/stories260K.bin' --vocab '%s/tok512.bin' -o '%s'",
		 shared, shared, out);
	assert_int_equal(run_tool(a, NULL, 0), 0);
	snprintf(a, sizeof(a), "sha256 '%s'", out);
	assert_int_equal(run_tool(a, o1, sizeof(o1)), 0);
	snprintf(a, sizeof(a), "sha256 '%s/models/stories260K/stories260K.gguf'", src);
	assert_int_equal(run_tool(a, o2, sizeof(o2)), 0);
	assert_memory_equal(o1, o2, 64);
}

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
		cmocka_unit_test(test_synth_tiny),
		cmocka_unit_test(test_synth_types_and_archs),
		cmocka_unit_test(test_phi3),
		cmocka_unit_test(test_gemma2),
		cmocka_unit_test(test_gemma3),
		cmocka_unit_test(test_synth_deterministic),
		cmocka_unit_test(test_inspect_and_plan),
		cmocka_unit_test(test_import_llama2c),
		cmocka_unit_test(test_import_reproduces_shipped_model),
	};

	return cmocka_run_group_tests_name("worker/model_config", tests, setup_tool,
					   teardown_tool);
}
