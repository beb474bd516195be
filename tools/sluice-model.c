/*
 * sluice-model.c - inspect, plan capacity for, hash and synthesise GGUF
 * models, and write a mixture's expert cache file ahead of a worker.
 *
 *   sluice-model inspect PATH [--sha]
 *   sluice-model plan PATH --memory BYTES --context N [--reserve BYTES] [--cpu-repack]
 *   sluice-model sha256 PATH
 *   sluice-model expert-cache PATH [--dir DIR] [--threads N]
 *   sluice-model synth --preset tiny|1b|qwen3-1b|gemma3-1b|phi3-1b|8b|moe-tiny|qwen3moe-tiny|moe-1b|qwen3moe-1b|bert-tiny|minilm
 *                      [--type T] [--arch llama|qwen2|qwen2moe|qwen3|qwen3moe|granite|phi3|gemma2|gemma3|bert|nomic-bert] [--swa N]
 *                      [--seed N] [--vocab N] [--ctx N] [--embd N] [--ffn N] [--layers N] [--head-dim N] [--pooling none|mean|cls|last]
 *                      [--experts N] [--experts-used K] [--fuse-experts]
 *                      [--template NAME]
 *                      [--rope-freqs] -o PATH
 *   sluice-model import llama2c CHECKPOINT --vocab TOKENIZER -o PATH
 *
 * synth writes deterministic random weights (same options and seed give
 * the same bytes) and a generated SentencePiece-style vocabulary, streaming
 * each tensor to disk as it is generated and quantised (two threads), so
 * the 8b preset never holds more than a few MiB of weights in memory.
 * The capacity formula of `plan` is documented in docs/models.md.
 *
 * Single-threaded apart from the synth worker threads; exits 0 on success,
 * 1 on error, 2 on usage errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "worker/cpu/expert_cache.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/pool.h"
#include "worker/cpu/pack.h"
#include "worker/engine/sched.h"
#include "worker/model/gguf.h"
#include "tools/gguf_write.h"
#include "worker/model/model.h"
#include "worker/model/model_config.h"
#include "worker/model/quant.h"
#include "worker/text/chat.h"
#include "tools/model_cli.h"


void model_usage(FILE *f)
{
	fputs("model_usage:\n"
	      "  sluice-model inspect PATH [--sha]\n"
	      "  sluice-model plan PATH --memory BYTES --context N [--reserve BYTES] [--cpu-repack]\n"
	      "  sluice-model sha256 PATH\n"
	      "  sluice-model expert-cache PATH [--dir DIR] [--threads N]\n"
	      "  sluice-model synth --preset tiny|1b|qwen3-1b|gemma3-1b|phi3-1b|8b|moe-tiny|qwen3moe-tiny|moe-1b|qwen3moe-1b|bert-tiny|minilm\n"
	      "                     [--type F32|F16|BF16|Q8_0|Q4_0|"
	      "Q4_1|Q5_0|Q5_1|IQ4_NL|IQ4_XS|Q2_K|Q3_K|Q3_K_M|Q4_K|Q4_K_M|Q5_K|Q5_K_M|Q6_K]\n"
	      "                     [--arch llama|qwen2|qwen2moe|qwen3|qwen3moe|granite|phi3|gemma2|gemma3|bert|nomic-bert] [--swa N] [--seed N] [--vocab N] [--ctx N]\n"
	      "                     [--embd N] [--ffn N] [--layers N] [--head-dim N] [--pooling none|mean|cls|last]\n"
	      "                     [--experts N] [--experts-used K] [--fuse-experts]\n"
	      "                     [--template chatml|llama3|llama2|mistral|zephyr|phi3|phi4|"
	      "granite|gemma|qwen3|qwen3-thinking|none]\n"
	      "                     [--rope-freqs] -o PATH\n"
	      "  sluice-model import llama2c CHECKPOINT --vocab TOKENIZER -o PATH\n"
	      "  sluice-model grammar --vocab MODEL.gguf MASKBENCH.json...\n"
	      "BYTES accepts suffixes: KiB MiB GiB TiB (also K M G T), KB MB GB TB "
	      "(powers of 1000).\n", f);
}

/* ==== shared helpers ================================================ */

/* "24GiB", "512MiB", "1.5G", "1000000"; 0 on success. */
static int parse_bytes(const char *s, uint64_t *out)
{
	static const struct { const char *suf; double mul; } sufs[] = {
		{ "", 1 }, { "B", 1 },
		{ "K", 1024.0 }, { "KiB", 1024.0 }, { "KB", 1e3 },
		{ "M", 1048576.0 }, { "MiB", 1048576.0 }, { "MB", 1e6 },
		{ "G", 1073741824.0 }, { "GiB", 1073741824.0 }, { "GB", 1e9 },
		{ "T", 1099511627776.0 }, { "TiB", 1099511627776.0 }, { "TB", 1e12 },
	};
	char *end;
	double v;
	size_t i;

	errno = 0;
	if (!*s || *s == '-' || *s == '+')
		return -1;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0)
		return -1;
	for (i = 0; i < sizeof(sufs) / sizeof(sufs[0]); i++) {
		if (strcasecmp(end, sufs[i].suf) == 0) {
			double b = v * sufs[i].mul;

			if (b >= 18446744073709551616.0)
				return -1;
			*out = (uint64_t)b;
			return 0;
		}
	}
	return -1;
}

int model_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/* "1.23 GiB" style rendering. */
static const char *human(uint64_t b, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", b);
	else
		snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}

static int open_model(const char *path, struct wk_gguf **g, struct wk_mcfg **c)
{
	char err[ERR_LEN];

	if (wk_gguf_open(path, g, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-model: %s: %s\n", path, err);
		return -1;
	}
	if (c && wk_mcfg_load(*g, c, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-model: %s: %s\n", path, err);
		return -1;
	}
	return 0;
}

static int sha256_hex(const char *path, char hex[CM_SHA256_HEX_LEN + 1])
{
	uint8_t d[CM_SHA256_LEN];
	enum cm_status st = cm_sha256_file(path, d);

	if (st != CM_OK) {
		fprintf(stderr, "sluice-model: %s: cannot hash: %s\n", path, cm_status_str(st));
		return -1;
	}
	cm_hex_encode(d, sizeof(d), hex);
	return 0;
}

/* A first guess at the chat template family from markers in its text. */
static const char *template_family(const struct wk_gguf_str *t)
{
	const struct wk_chat_template *ct;

	if (!t->len)
		return "none";
	/* the worker's own detection (worker/text/chat.c) */
	ct = wk_chat_template_detect(t->ptr, (size_t)t->len);
	return ct ? wk_chat_template_name(ct) : "unknown";
}

/* ==== inspect ======================================================= */

/* What the worker does with a weight type (docs/engine-cpu.md, engine-cuda.md). */
static const char *type_path(uint32_t t)
{
	switch (t) {
	case WK_Q_F32: case WK_Q_F16:
		return "CPU: float kernels on F32 activations; CUDA: SIMT decode, cuBLASLt prefill in "
		       "the stored type";
	case WK_Q_BF16:
		return "CPU: float kernels on F32 activations; CUDA: tensor-core decode, cuBLASLt "
		       "BF16 prefill";
	case WK_Q_Q4_0: case WK_Q_Q4_1: case WK_Q_Q5_0: case WK_Q_Q5_1: case WK_Q_Q8_0:
		return "CPU: 8-bit activations per 32, 16-row kernels (AVX-512 and AVX2) on a rows16 "
		       "copy; CUDA: dequantised in the decode kernel, BF16 tiles for cuBLASLt prefill";
	case WK_Q_IQ4_NL:
		return "CPU: 8-bit activations per 32, the AVX-512 16-row kernel on a rows16 copy "
		       "(AVX2: a tile kernel); CUDA: dequantised in the decode kernel, BF16 tiles for "
		       "cuBLASLt prefill";
	case WK_Q_Q4_K: case WK_Q_Q5_K: case WK_Q_Q6_K: case WK_Q_Q2_K: case WK_Q_Q3_K:
	case WK_Q_IQ4_XS:
		return "CPU: 8-bit activations per 256, the AVX-512 16-row kernel on a rows16 copy "
		       "(AVX2: a tile kernel); CUDA: dequantised in the decode kernel, BF16 tiles for "
		       "cuBLASLt prefill";
	default:
		return "not a weight type";
	}
}

static int cmd_inspect(int argc, char **argv)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	const char *path = NULL;
	uint64_t count[WK_Q_COUNT_] = { 0 }, bytes[WK_Q_COUNT_] = { 0 }, i, n;
	int want_sha = 0, rc = 1, t;
	char h[32], hex[CM_SHA256_HEX_LEN + 1], err[ERR_LEN];

	for (int a = 0; a < argc; a++) {
		if (strcmp(argv[a], "--sha") == 0)
			want_sha = 1;
		else if (!path && argv[a][0] != '-')
			path = argv[a];
		else {
			model_usage(stderr);
			return 2;
		}
	}
	if (!path) {
		model_usage(stderr);
		return 2;
	}
	if (open_model(path, &g, NULL) != 0)
		goto out;
	n = wk_gguf_n_tensors(g);
	for (i = 0; i < n; i++) {
		const struct wk_gguf_tensor *ts = wk_gguf_tensor(g, i);

		count[ts->type]++;
		bytes[ts->type] += ts->n_bytes;
	}
	printf("file: %s\n", path);
	printf("gguf version: %u\n", wk_gguf_version(g));
	printf("file size: %" PRIu64 " bytes (%s)\n", wk_gguf_file_size(g),
	       human(wk_gguf_file_size(g), h, sizeof(h)));
	printf("metadata keys: %" PRIu64 "\n", wk_gguf_n_kv(g));
	printf("tensors: %" PRIu64 "\n", n);
	printf("tensor types:\n");
	for (t = 0; t < WK_Q_COUNT_; t++)
		if (count[t]) {
			uint64_t all = wk_gguf_file_size(g) ? wk_gguf_file_size(g) : 1;

			printf("  %-6s %6" PRIu64 " tensors %14" PRIu64 " bytes (%s, %.1f%% of the "
			       "file)\n", wk_qtype_name((uint32_t)t), count[t], bytes[t],
			       human(bytes[t], h, sizeof(h)), 100.0 * (double)bytes[t] / (double)all);
			printf("         %s\n", type_path((uint32_t)t));
		}
	if (wk_mcfg_load(g, &c, err, sizeof(err)) != CM_OK) {
		struct wk_gguf_str arch;

		if (wk_gguf_get_str(g, "general.architecture", &arch) == CM_OK)
			printf("architecture: %.*s (not loadable)\n",
			       (int)(arch.len > 64 ? 64 : arch.len), arch.ptr);
		fprintf(stderr, "sluice-model: %s: %s\n", path, err);
		goto out;
	}
	printf("architecture: %s\n", c->arch_name);
	printf("parameters: %" PRIu64 " (%.3f B)\n", c->n_params, (double)c->n_params / 1e9);
	printf("weight bytes: %" PRIu64 " (%s)\n", c->weight_bytes,
	       human(c->weight_bytes, h, sizeof(h)));
	if (c->hp.n_expert) {
		printf("experts: %u per layer, %u active per token, %u wide; softmax gating%s\n",
		       c->hp.n_expert, c->hp.n_expert_used, c->hp.n_ff_exp,
		       c->hp.expert_norm ? ", top-k weights renormalised" : "");
		printf("active parameters: %" PRIu64 " (%.3f B) of %" PRIu64 " per token\n",
		       c->n_params_active, (double)c->n_params_active / 1e9, c->n_params);
		printf("active weight bytes: %" PRIu64 " (%s) per token: the decode bandwidth "
		       "bound is these over the memory bandwidth\n", c->active_weight_bytes,
		       human(c->active_weight_bytes, h, sizeof(h)));
	}
	printf("context length: %u\n", c->hp.n_ctx_train);
	printf("vocabulary: %u tokens, tokenizer model '%.*s'\n", c->hp.n_vocab,
	       (int)(c->tokenizer_model.len > 64 ? 64 : c->tokenizer_model.len),
	       c->tokenizer_model.len ? c->tokenizer_model.ptr : "");
	printf("chat template: %s, family guess: %s\n",
	       c->has_chat_template ? "present" : "absent", template_family(&c->chat_template));
	printf("embedding: %u\n", c->hp.n_embd);
	if (c->hp.n_swa)
		printf("sliding window: %u tokens, %s\n", c->hp.n_swa,
		       c->hp.swa_pattern < 2 ? "every layer (KV behind it is released)"
		       : c->hp.swa_pattern == 2 ? "even layers" : "five layers of every six");
	if (c->hp.attn_softcap > 0 || c->hp.final_softcap > 0)
		printf("soft-capping: attention %g, logits %g\n", (double)c->hp.attn_softcap,
		       (double)c->hp.final_softcap);
	printf("layers: %u\n", c->hp.n_layer);
	printf("heads: %u\n", c->hp.n_head);
	printf("kv heads: %u\n", c->hp.n_head_kv);
	printf("head dim: %u\n", c->hp.head_dim);
	printf("feed forward: %u\n", c->hp.n_ff);
	printf("rope: freq base %g, dims %u, scaling %s\n", (double)c->hp.rope_base,
	       c->hp.rope_dim,
	       c->hp.rope_scaling == WK_ROPE_SCALING_FREQS ? "rope_freqs tensor" :
	       c->hp.rope_scaling == WK_ROPE_SCALING_LINEAR ? "linear" :
	       c->hp.rope_scaling == WK_ROPE_SCALING_YARN ? "yarn" : "none");
	printf("tied embeddings: %s\n", c->tied_embeddings ? "yes" : "no");
	if (wk_mcfg_encoder_arch(c->hp.arch))
		printf("encoder: bidirectional attention, %u token types, pooling %s, LayerNorm "
		       "epsilon %g; embeds, does not generate\n", c->hp.n_token_types,
		       c->hp.pooling == WK_POOL_MEAN ? "mean" : c->hp.pooling == WK_POOL_CLS ? "cls"
											: "last",
		       (double)c->hp.norm_eps);
	if (c->hp.causal && c->hp.pooling != WK_POOL_NONE)
		printf("embeddings: pooling %s of the final-norm states (a decoder embedder: it "
		       "embeds and generates)\n", c->hp.pooling == WK_POOL_MEAN ? "mean"
		       : c->hp.pooling == WK_POOL_CLS ? "cls" : "last");
	printf("kv bytes per token (F16): %" PRIu64 " (%s)\n", c->kv_bytes_per_token,
	       human(c->kv_bytes_per_token, h, sizeof(h)));
	if (want_sha) {
		if (sha256_hex(path, hex) != 0)
			goto out;
		printf("sha256: %s\n", hex);
	}
	rc = 0;
out:
	wk_mcfg_free(c);
	wk_gguf_close(g);
	return rc;
}

/* ==== plan ========================================================== */

#define PLAN_RUNTIME_RESERVE (64ull << 20)   /* process, allocator, buffers */

/*
 * Scratch estimate: activations of one step of CM_LIM_STEP_TOKEN_BUDGET
 * tokens (f32 residual, norm, q, attention out: 4 x embd; gate and up:
 * 2 x ff; experts: k x (2 x embd + 2 x expert ff)) plus f32 logits of
 * CM_LIM_MAX_RUNNING_SEQS sequences.
 */
static uint64_t plan_reserve(const struct wk_mcfg *c)
{
	/* a mixture of experts also groups each token's rows per chosen
	 * expert: k x (2 x embd + 2 x expert ff) */
	uint64_t moe = (uint64_t)c->hp.n_expert_used *
		       (2ull * c->hp.n_embd + 2ull * c->hp.n_ff_exp);

	return PLAN_RUNTIME_RESERVE +
	       4ull * CM_LIM_STEP_TOKEN_BUDGET * (4ull * c->hp.n_embd + 2ull * c->hp.n_ff + moe) +
	       4ull * CM_LIM_MAX_RUNNING_SEQS * c->hp.n_vocab;
}

/* Bytes of the copies a CPU worker with worker.cpu_repack keeps on an
 * AVX-512 host (worker/cpu/pack.h): its dense matrices, rows16 for the
 * types with strip kernels, plain for the others. */
static uint64_t plan_repacked(const struct wk_mcfg *c)
{
	uint64_t bytes = 0;

	for (size_t i = 0; i < wk_cpu_pack_candidates(&c->hp); i++) {
		const struct wk_tensor *t = wk_cpu_pack_candidate(&c->hp, c->layers, &c->output, i);

		if (wk_cpu_pack_eligible(t))
			bytes += wk_cpu_pack_supported(t->type)
					 ? wk_cpu_pack_bytes(t->type, (int)t->rows, (int)t->cols)
					 : wk_cpu_pack_plain_bytes(t->type, (int)t->rows, (int)t->cols);
	}
	return bytes;
}

static int cmd_plan(int argc, char **argv)
{
	struct wk_gguf *g = NULL;
	struct wk_mcfg *c = NULL;
	const char *path = NULL;
	uint64_t memory = 0, ctx = 0, reserve = 0, ctx_blocks, kv_seq, avail, seqs;
	int have_mem = 0, have_ctx = 0, have_res = 0, repack = 0, rc = 1;
	uint64_t repacked;
	char h[32];

	for (int a = 0; a < argc; a++) {
		if (strcmp(argv[a], "--memory") == 0 && a + 1 < argc) {
			if (parse_bytes(argv[++a], &memory) != 0) {
				fprintf(stderr, "sluice-model: --memory: expected a size like "
					"24GiB, 512MiB or 1000000, found '%s'\n", argv[a]);
				return 2;
			}
			have_mem = 1;
		} else if (strcmp(argv[a], "--reserve") == 0 && a + 1 < argc) {
			if (parse_bytes(argv[++a], &reserve) != 0) {
				fprintf(stderr, "sluice-model: --reserve: expected a size, found "
					"'%s'\n", argv[a]);
				return 2;
			}
			have_res = 1;
		} else if (strcmp(argv[a], "--context") == 0 && a + 1 < argc) {
			if (model_parse_u64(argv[++a], WK_MCFG_MAX_CTX, &ctx) != 0 || ctx == 0) {
				fprintf(stderr, "sluice-model: --context: expected 1..%u tokens, "
					"found '%s'\n", WK_MCFG_MAX_CTX, argv[a]);
				return 2;
			}
			have_ctx = 1;
		} else if (strcmp(argv[a], "--cpu-repack") == 0) {
			repack = 1;
		} else if (!path && argv[a][0] != '-') {
			path = argv[a];
		} else {
			model_usage(stderr);
			return 2;
		}
	}
	if (!path || !have_mem || !have_ctx) {
		model_usage(stderr);
		return 2;
	}
	if (open_model(path, &g, &c) != 0)
		goto out;
	if (!have_res)
		reserve = plan_reserve(c);
	repacked = plan_repacked(c);
	if (repack)
		reserve += repacked;
	ctx_blocks = (ctx + CM_LIM_KV_BLOCK_TOKENS - 1) / CM_LIM_KV_BLOCK_TOKENS;
	kv_seq = c->kv_bytes_per_token * ctx_blocks * CM_LIM_KV_BLOCK_TOKENS;
	if (wk_kv_window(&c->hp)) {
		/* windowed in every layer: the worker keeps the window and a step of
		 * blocks per sequence, whatever the context */
		uint64_t kept = wk_sched_window_blocks(wk_kv_window(&c->hp),
						       CM_LIM_STEP_TOKEN_BUDGET,
						       CM_LIM_KV_BLOCK_TOKENS);

		if (kept < ctx_blocks)
			kv_seq = c->kv_bytes_per_token * kept * CM_LIM_KV_BLOCK_TOKENS;
	}
	printf("model: %s (%s, %u layers, %u kv heads, head dim %u)\n", path, c->arch_name,
	       c->hp.n_layer, c->hp.n_head_kv, c->hp.head_dim);
	printf("memory: %" PRIu64 " bytes (%s)\n", memory, human(memory, h, sizeof(h)));
	printf("weights: %" PRIu64 " bytes (%s)\n", c->weight_bytes,
	       human(c->weight_bytes, h, sizeof(h)));
	if (c->hp.n_expert)
		printf("experts: %u of %u active: %" PRIu64 " of %" PRIu64 " parameters "
		       "(%" PRIu64 " bytes) read per token; all are resident\n",
		       c->hp.n_expert_used, c->hp.n_expert, c->n_params_active, c->n_params,
		       c->active_weight_bytes);
	printf("cpu repack: %" PRIu64 " bytes (%s) of copies on an AVX-512 CPU worker "
	       "(worker.cpu_repack)%s\n", repacked, human(repacked, h, sizeof(h)),
	       repack ? ", counted in the reserve" : ", not counted: --cpu-repack counts them");
	if (c->hp.n_expert) {
		uint64_t xc = wk_cpu_xcache_file_bytes(&c->hp, c->layers);

		printf("expert cache: %" PRIu64 " bytes (%s) on disk for an AVX-512 CPU worker "
		       "(worker.expert_cache_dir; page cache, not counted in the reserve)\n",
		       xc, human(xc, h, sizeof(h)));
	}
	printf("reserve: %" PRIu64 " bytes (%s)%s%s\n", reserve, human(reserve, h, sizeof(h)),
	       have_res ? " (--reserve)" : " (runtime 64 MiB + activations + logits)",
	       repack ? " + cpu repack" : "");
	printf("kv per token: %" PRIu64 " bytes (%s, F16)\n", c->kv_bytes_per_token,
	       human(c->kv_bytes_per_token, h, sizeof(h)));
	printf("context: %" PRIu64 " tokens (%" PRIu64 " blocks of %d)\n", ctx, ctx_blocks,
	       CM_LIM_KV_BLOCK_TOKENS);
	if (wk_kv_window(&c->hp))
		printf("sliding window: %u tokens in every layer (blocks behind it are released)\n",
		       wk_kv_window(&c->hp));
	printf("kv per sequence: %" PRIu64 " bytes (%s)\n", kv_seq, human(kv_seq, h, sizeof(h)));
	if (ctx > c->hp.n_ctx_train)
		printf("warning: context %" PRIu64 " exceeds the model's training context %u\n",
		       ctx, c->hp.n_ctx_train);
	if (memory < c->weight_bytes) {
		printf("sequences: 0\n");
		printf("does not fit: the weights alone (%" PRIu64 " bytes) exceed the memory "
		       "(%" PRIu64 " bytes)\n", c->weight_bytes, memory);
		rc = 0;
		goto out;
	}
	if (memory - c->weight_bytes < reserve) {
		printf("sequences: 0\n");
		printf("does not fit: weights and reserve need %" PRIu64 " bytes, memory is %"
		       PRIu64 "\n", c->weight_bytes + reserve, memory);
		rc = 0;
		goto out;
	}
	avail = memory - c->weight_bytes - reserve;
	seqs = kv_seq ? avail / kv_seq : 0;
	printf("kv budget: %" PRIu64 " bytes (%s)\n", avail, human(avail, h, sizeof(h)));
	printf("sequences: %" PRIu64 "\n", seqs);
	printf("kv tokens: %" PRIu64 "\n", c->kv_bytes_per_token ? avail / c->kv_bytes_per_token : 0);
	if (seqs == 0)
		printf("does not fit: one sequence of %" PRIu64 " tokens needs %" PRIu64
		       " bytes of KV, %" PRIu64 " are left\n", ctx, kv_seq, avail);
	rc = 0;
out:
	wk_mcfg_free(c);
	wk_gguf_close(g);
	return rc;
}

/* ==== expert-cache ================================================== */

/*
 * Writes (or checks) the experts' cache file a CPU worker on this host
 * would read (worker/cpu/expert_cache.h), so that its first start does not
 * pay for it: the same directory (--dir, else the worker's default), the
 * same ISA (SLUICE_CPU_ISA as the worker sees it), the model by the path
 * the worker opens.
 */
static int cmd_expert_cache(int argc, char **argv)
{
	const char *path = NULL, *dir = NULL;
	char dbuf[4096], err[1024] = "";
	int threads = 0, rc = 1;
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };
	struct wk_pool *pool = NULL;
	struct wk_cpu_mm *mm = NULL;
	struct wk_cpu_xcache *xc = NULL;
	struct wk_cpu_xcache_info info;

	for (int a = 0; a < argc; a++) {
		if (strcmp(argv[a], "--dir") == 0 && a + 1 < argc) {
			dir = argv[++a];
		} else if (strcmp(argv[a], "--threads") == 0 && a + 1 < argc) {
			threads = atoi(argv[++a]);
			if (threads < 1 || threads > WK_POOL_MAX_THREADS) {
				fprintf(stderr, "sluice-model: --threads: expected 1..%d, found '%s'\n",
					WK_POOL_MAX_THREADS, argv[a]);
				return 2;
			}
		} else if (!path && argv[a][0] != '-') {
			path = argv[a];
		} else {
			model_usage(stderr);
			return 2;
		}
	}
	if (!path) {
		model_usage(stderr);
		return 2;
	}
	if (wk_cpu_xcache_dir(dir, dbuf, sizeof(dbuf)) != 0) {
		fprintf(stderr, dir ? "sluice-model: --dir: too long\n"
				    : "sluice-model: none of CACHE_DIRECTORY, XDG_CACHE_HOME, HOME "
				      "is set: give --dir\n");
		return 2;
	}
	dir = dbuf;
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n < 1 ? 1 : n > WK_POOL_MAX_THREADS ? WK_POOL_MAX_THREADS : (int)n;
	}
	if (wk_model_load(path, &mo, &m, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-model: %s\n", err);
		goto out;
	}
	if (!m->hp.n_expert) {
		printf("expert cache: nothing to write: %s has no experts\n", path);
		rc = 0;
		goto out;
	}
	if (wk_pool_new(threads, &pool) != CM_OK || wk_cpu_mm_new(pool, &mm) != CM_OK) {
		fprintf(stderr, "sluice-model: out of memory\n");
		goto out;
	}
	if (wk_cpu_xcache_open(m, mm, dir, &xc, &info, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-model: %s\n", err);
		goto out;
	}
	if (!xc)
		printf("expert cache: nothing to write: no expert type of %s has strip kernels on %s\n",
		       path, wk_cpu_isa_name(wk_cpu_mm_isa(mm)));
	else
		printf("expert cache: %s %" PRIu64 " bytes (%d expert matrices, %s)%s\n", info.path,
		       info.bytes, info.matrices, wk_cpu_isa_name(wk_cpu_mm_isa(mm)),
		       info.built ? ", written" : ", up to date");
	rc = 0;
out:
	wk_cpu_mm_free(mm);
	wk_cpu_xcache_close(xc);
	wk_pool_free(pool);
	wk_model_free(m);
	return rc;
}

/* ==== sha256 ======================================================== */

static int cmd_sha256(int argc, char **argv)
{
	char hex[CM_SHA256_HEX_LEN + 1];

	if (argc != 1) {
		model_usage(stderr);
		return 2;
	}
	if (sha256_hex(argv[0], hex) != 0)
		return 1;
	printf("%s  %s\n", hex, argv[0]);
	return 0;
}


int main(int argc, char **argv)
{
	if (argc < 2) {
		model_usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "inspect") == 0)
		return cmd_inspect(argc - 2, argv + 2);
	if (strcmp(argv[1], "plan") == 0)
		return cmd_plan(argc - 2, argv + 2);
	if (strcmp(argv[1], "sha256") == 0)
		return cmd_sha256(argc - 2, argv + 2);
	if (strcmp(argv[1], "expert-cache") == 0)
		return cmd_expert_cache(argc - 2, argv + 2);
	if (strcmp(argv[1], "synth") == 0)
		return model_cmd_synth(argc - 2, argv + 2);
	if (strcmp(argv[1], "import") == 0)
		return model_cmd_import(argc - 2, argv + 2);
	if (strcmp(argv[1], "grammar") == 0)
		return model_cmd_grammar(argc - 2, argv + 2);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		model_usage(stdout);
		return 0;
	}
	fprintf(stderr, "sluice-model: unknown command '%s'\n", argv[1]);
	model_usage(stderr);
	return 2;
}
