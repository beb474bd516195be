/*
 * test_model_tool.c - `sluice-model` (synth, inspect, plan, import) run as a
 * process: the files synth writes load with the expected configuration
 * (every preset, type, architecture and the mixtures of experts), inspect
 * and plan print numbers checked against hand computation, import
 * reproduces the shipped model.  Skips when SLUICE_BUILD_DIR (set by
 * ctest) is absent.
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
#include "worker/cpu/matmul.h"
#include "worker/model/gguf.h"
#include "tools/gguf_write.h"
#include "worker/model/model_config.h"
#include "worker/model/model.h"
#include "worker/text/tokenizer.h"

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

/* the MoE presets and options of synth, inspect and plan on them, and the
 * combinations synth refuses */
static void test_synth_moe(void **state)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	const char *path;
	char a[1024], out[8192];

	(void)state;
	NEED_TOOL();
	path = synth_cfg("moe.gguf", "--preset moe-tiny --arch qwen3moe --experts 8 --experts-used 3 "
			 "--type Q8_0", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_QWEN3MOE);
	assert_int_equal(c->hp.n_expert, 8);
	assert_int_equal(c->hp.n_expert_used, 3);
	assert_int_equal(c->layers[0].ffn_gate_inp.type, WK_Q_F32); /* as llama-quantize leaves it */
	assert_int_equal(c->layers[0].exp_down.type, WK_Q_Q8_0);
	assert_non_null(c->layers[0].q_norm.data);
	snprintf(a, sizeof(a), "inspect '%s'", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "experts: 8 per layer, 3 active per token, 256 wide"));
	assert_int_equal(field(out, "active parameters: "), c->n_params_active);
	assert_int_equal(field(out, "active weight bytes: "), c->active_weight_bytes);
	snprintf(a, sizeof(a), "plan '%s' --memory 1GiB --context 512", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "experts: 3 of 8 active"));
	{
		/* expert-cache writes the file a CPU worker would (Q8_0 has
		 * strip kernels on AVX2 and AVX-512), then finds it up to date;
		 * a directory it cannot create is an error */
		long long planned = field(out, "expert cache: ");
		int strips = strcmp(wk_cpu_isa_name(wk_cpu_isa_default()), "scalar") != 0;

		snprintf(a, sizeof(a), "expert-cache '%s' --dir '%s/xc' --threads 2", path, tmpdir);
		assert_int_equal(run_tool(a, out, sizeof(out)), 0);
		assert_non_null(strstr(out, strips ? ", written" : "nothing to write"));
		if (strstr(out, "(avx512")) { /* plan counts for AVX-512 */
			const char *b = strstr(out, ".experts ");

			assert_non_null(b);
			assert_int_equal(strtoll(b + strlen(".experts "), NULL, 10), planned);
		}
		assert_int_equal(run_tool(a, out, sizeof(out)), 0);
		assert_non_null(strstr(out, strips ? ", up to date" : "nothing to write"));
		snprintf(a, sizeof(a), "expert-cache '%s' --dir '%s/moe.gguf/xc'", path, tmpdir);
		assert_int_equal(run_tool(a, out, sizeof(out)), 1);
		assert_non_null(strstr(out, "cannot create the directory"));
		assert_int_equal(run_tool("expert-cache", out, sizeof(out)), 2);
	}
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* Mixtral's fused gate|up experts load as views of one tensor */
	synth_cfg("moe2.gguf", "--preset moe-tiny --fuse-experts", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_LLAMA);
	assert_int_equal(c->layers[1].exp_gate.expert_stride, 2ull * 256 * 256 * 4);
	assert_ptr_equal(c->layers[1].exp_up.data,
			 (const uint8_t *)c->layers[1].exp_gate.data + 256ull * 256 * 4);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	/* qwen2moe: biases, top-k not renormalised, the shared expert and its gate */
	synth_cfg("moe3.gguf", "--preset moe-tiny --arch qwen2moe --type Q8_0", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_QWEN2MOE);
	assert_false(c->hp.expert_norm);
	assert_int_equal(c->hp.n_ff_shexp, 256);
	assert_non_null(c->layers[1].bq.data);
	assert_non_null(c->layers[1].shexp_gate_inp.data);
	assert_int_equal(c->layers[1].shexp_gate_inp.type, WK_Q_F32);
	assert_int_equal(c->layers[1].shexp_down.type, WK_Q_Q8_0);
	assert_int_equal(c->layers[1].shexp_down.rows, 256);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	snprintf(a, sizeof(a), "synth --preset tiny --arch qwen3moe -o '%s/x.gguf'", tmpdir);
	assert_int_equal(run_tool(a, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "--arch qwen3moe needs experts"));
	snprintf(a, sizeof(a), "synth --preset moe-tiny --arch gemma2 -o '%s/x.gguf'", tmpdir);
	assert_int_equal(run_tool(a, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "expected --arch llama (Mixtral), qwen2moe or qwen3moe, "
				"found 'gemma2'"));
	snprintf(a, sizeof(a), "synth --preset moe-tiny --experts 4 --experts-used 5 -o '%s/x.gguf'",
		 tmpdir);
	assert_int_equal(run_tool(a, out, sizeof(out)), 2);
	assert_non_null(strstr(out, "--experts-used 5 is more than the 4 experts"));
}

/* bert-tiny: an encoder with a WordPiece vocabulary; inspect names it */
static void test_synth_bert(void **state)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	struct wk_tok *tok = NULL;
	const char *path;
	char a[1024], out[8192], err[256];
	int32_t ids[16];
	size_t n = 0;

	(void)state;
	NEED_TOOL();
	path = synth_cfg("bert.gguf", "--preset bert-tiny --type Q8_0", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_BERT);
	assert_false(c->hp.causal);
	assert_int_equal(c->hp.pooling, WK_POOL_MEAN);
	assert_int_equal(c->hp.n_token_types, 2);
	assert_int_equal(c->layers[1].w_up.type, WK_Q_Q8_0);
	assert_int_equal(c->layers[1].b_up.cols, 512);
	assert_null(c->output.data);
	/* its vocabulary is WordPiece: [CLS] hello [SEP] */
	assert_int_equal(wk_tok_new_from_gguf(g, &tok, err, sizeof(err)), CM_OK);
	assert_int_equal(wk_tok_encode(tok, "Hello", 5, WK_TOK_ADD_BOS | WK_TOK_ADD_EOS, ids, 16,
				       &n), CM_OK);
	assert_int_equal(n, 3);
	assert_int_equal(ids[0], 2);
	assert_int_equal(ids[2], 3);
	wk_tok_free(tok);
	wk_mcfg_free(c);
	wk_gguf_close(g);
	snprintf(a, sizeof(a), "inspect '%s'", path);
	assert_int_equal(run_tool(a, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "encoder: bidirectional attention, 2 token types, pooling mean"));
	/* nomic-bert: fused QKV seen as three views, SwiGLU, RoPE (neox,
	 * base 1000), no position embeddings and no biases */
	synth_cfg("nomic.gguf", "--preset bert-tiny --arch nomic-bert --type F32", &g, &c);
	assert_int_equal(c->hp.arch, WK_ARCH_NOMIC_BERT);
	assert_false(c->hp.causal);
	assert_int_equal(c->hp.rope_style, WK_ROPE_NEOX);
	assert_true(c->hp.rope_base == 1000.0f);
	assert_null(c->pos_embd.data);
	assert_null(c->layers[0].bq.data);
	assert_non_null(c->layers[0].w_gate.data);
	assert_int_equal(c->layers[0].wk.rows, 256);
	assert_ptr_equal((const uint8_t *)c->layers[0].wk.data,
			 (const uint8_t *)c->layers[0].wq.data + 256 * c->layers[0].wq.row_bytes);
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

	/* F32: no strip kernels, the dense matrices copied as they are: per
	 * layer q, o, gate, up, down 256 x 256, k and v 128 x 256; the
	 * 512 x 256 output */
	assert_int_equal(field(out, "cpu repack: "),
			 4ull * (2 * (5 * 256 * 256 + 2 * 128 * 256) + 512 * 256));

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
	/* --cpu-repack: the copies of the Q8_0 matrices (whole strips of 16
	 * rows) join the reserve; computed here from the shapes */
	{
		struct wk_gguf *qg = NULL;
		struct wk_mcfg *qc = NULL;
		const char *qp = synth_cfg("plan_q8.gguf", "--preset tiny --type Q8_0", &qg, &qc);
		uint64_t want = 0;

		for (uint32_t l = 0; l <= qc->hp.n_layer; l++) {
			const struct wk_layer *L = l < qc->hp.n_layer ? &qc->layers[l] : NULL;
			const struct wk_tensor *ts[7] = { L ? &L->wq : &qc->output, L ? &L->wk : NULL,
							  L ? &L->wv : NULL, L ? &L->wo : NULL,
							  L ? &L->w_gate : NULL, L ? &L->w_up : NULL,
							  L ? &L->w_down : NULL };
			for (int i = 0; i < 7; i++)
				if (ts[i] && ts[i]->type == WK_Q_Q8_0)
					want += (ts[i]->rows + 15) / 16 * 16 * (ts[i]->cols / 32 * 34);
		}
		assert_true(want > 0);
		snprintf(a, sizeof(a), "plan '%s' --memory 512MiB --context 512", qp);
		assert_int_equal(run_tool(a, out, sizeof(out)), 0);
		assert_int_equal(field(out, "cpu repack: "), want);
		uint64_t res = field(out, "reserve: "), seqs = field(out, "sequences: ");
		snprintf(a, sizeof(a), "plan '%s' --memory 512MiB --context 512 --cpu-repack", qp);
		assert_int_equal(run_tool(a, out, sizeof(out)), 0);
		assert_int_equal(field(out, "reserve: "), res + want);
		assert_int_equal(field(out, "sequences: "),
				 (mem - qc->weight_bytes - res - want) / (qc->kv_bytes_per_token * 512));
		assert_true(field(out, "sequences: ") < seqs);
		wk_mcfg_free(qc);
		wk_gguf_close(qg);
	}
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
		cmocka_unit_test(test_synth_tiny),
		cmocka_unit_test(test_synth_types_and_archs),
		cmocka_unit_test(test_synth_moe),
		cmocka_unit_test(test_synth_bert),
		cmocka_unit_test(test_phi3),
		cmocka_unit_test(test_gemma2),
		cmocka_unit_test(test_gemma3),
		cmocka_unit_test(test_synth_deterministic),
		cmocka_unit_test(test_inspect_and_plan),
		cmocka_unit_test(test_import_llama2c),
		cmocka_unit_test(test_import_reproduces_shipped_model),
	};

	return cmocka_run_group_tests_name("worker/model_tool", tests, setup_tool, teardown_tool);
}
