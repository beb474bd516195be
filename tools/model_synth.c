/*
 * model_synth.c - `sluice-model synth`: a model file with deterministic
 * random weights (same options and seed give the same bytes) and a
 * generated SentencePiece-style vocabulary, each tensor streamed to disk
 * as it is generated and quantised (two threads), so the 8b preset never
 * holds more than a few MiB of weights in memory.
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
#include "worker/model/gguf.h"
#include "tools/gguf_write.h"
#include "worker/model/model_config.h"
#include "worker/model/quant.h"
#include "tools/model_cli.h"
#include "tools/synth_vocab.h"


struct preset {
	const char *name;
	uint32_t embd, layers, heads, kv_heads, ff, vocab, ctx;
	float rope_base;
	int rope_freqs;
	const char *arch;  /* the architecture it implies without --arch (NULL: llama) */
	uint32_t head_dim; /* 0: embd / heads */
	uint32_t swa;      /* its window (0: the architecture's default) */
	const char *tmpl;  /* its chat template without --template (NULL: chatml) */
	uint32_t experts, experts_used; /* a mixture of experts (0: dense) */
	uint32_t ff_exp;   /* one expert's width (0: ff) */
};

static const struct preset presets[] = {
	/* tiny: every row length a multiple of 256 (K-quants); < 5 MB in F32 */
	{ "tiny", 256, 2, 4, 2, 256, 512, 512, 10000.0f, 0, NULL, 0, 0, NULL, 0, 0, 0 },
	/* TinyLlama-1.1B shape */
	{ "1b", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 0, NULL, 0, 0, NULL, 0, 0, 0 },
	/* Qwen3-1.7B shape (heads of 128, Qwen's 151936-token vocabulary) */
	{ "qwen3-1b", 2048, 28, 16, 8, 6144, 151936, 4096, 1000000.0f, 0, "qwen3", 0, 0, "qwen3", 0, 0, 0 },
	/* Gemma-3-1B shape: 4 heads of 256 over 1152, one KV head, a window of
	 * 512, Gemma's 262144-token vocabulary (no rope scaling at 1B) */
	{ "gemma3-1b", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0f, 0, "gemma3", 256, 512, "gemma", 0, 0, 0 },
	/* Phi-3-mini's layout at 1B (llama.cpp's phi3 "1B": 24 layers): heads of
	 * 64, no GQA, Phi-3's 32064-token vocabulary, a window of 2047 */
	{ "phi3-1b", 2048, 24, 32, 32, 5632, 32064, 4096, 10000.0f, 0, "phi3", 0, 2047, "phi3", 0, 0, 0 },
	/* Llama-3.1-8B shape */
	{ "8b", 4096, 32, 32, 8, 14336, 128256, 8192, 500000.0f, 1, NULL, 0, 0, NULL, 0, 0, 0 },
	/* mixtures of experts.  moe-tiny: tiny with 16 experts, 2 active
	 * (Mixtral's `llama` layout; --arch qwen3moe for Qwen's) */
	{ "moe-tiny", 256, 2, 4, 2, 256, 512, 512, 10000.0f, 0, NULL, 0, 0, NULL, 16, 2, 0 },
	/* encoders: bert-tiny; all-MiniLM-L6-v2's shape (384 wide, 6 layers,
	 * 12 heads, BERT's 30522-token WordPiece vocabulary) */
	{ "bert-tiny", 256, 2, 4, 4, 512, 512, 512, 10000.0f, 0, "bert", 0, 0, "none", 0, 0, 0 },
	{ "minilm", 384, 6, 12, 12, 1536, 30522, 512, 10000.0f, 0, "bert", 0, 0, "none", 0, 0, 0 },
	/* qwen3moe-tiny: tiny in Qwen3-MoE's routing, 64 experts, 8 active */
	{ "qwen3moe-tiny", 256, 2, 4, 2, 256, 512, 512, 1000000.0f, 0, "qwen3moe", 0, 0, "qwen3",
	  64, 8, 0 },
	/* Mixtral's layout at 1B: 16 experts of 1536 (a multiple of 256, as
	 * Mixtral's 14336: no fallback types), 2 active (1.3B parameters,
	 * 0.26B active per token) */
	{ "moe-1b", 1024, 16, 16, 4, 1536, 32000, 4096, 1000000.0f, 0, NULL, 0, 0, NULL, 16, 2, 0 },
	/* Qwen3-30B-A3B's layout at 1B: heads of 128, 64 experts of 512, 8
	 * active, Qwen's vocabulary (1.4B parameters, 0.49B active per token,
	 * 0.31B of them the embedding and output) */
	{ "qwen3moe-1b", 1024, 10, 16, 4, 3072, 151936, 4096, 1000000.0f, 0, "qwen3moe", 128, 0,
	  "qwen3", 64, 8, 512 },
};

enum synth_kind { K_MATRIX, K_NORM, K_BIAS, K_ROPE_FREQS, K_ROPE_LONG, K_ROPE_SHORT };

struct synth_tensor {
	char name[64];
	uint32_t type;
	uint32_t n_dims;
	uint64_t dims[3];  /* dims[2]: experts of a 3-D expert tensor, else 1 */
	enum synth_kind kind;
	float std;
	uint64_t seed;
};

struct synth {
	uint64_t seed;
	uint32_t n_rot;
	float rope_base;
	struct synth_tensor *t;
	uint32_t n_t;
	int n_threads;
};

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * Approximately normal(0, 1): the sum of four 16-bit uniforms (Irwin-Hall,
 * variance 4/12) rescaled, one 64-bit draw per value.
 */
static float approx_normal(uint64_t *s)
{
	uint64_t r = splitmix64(s);
	float sum = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) +
		    (float)((r >> 32) & 0xffff) + (float)(r >> 48);

	return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/* Llama 3.1 frequency factors (factor 8, low 1, high 4, original ctx 8192). */
static float llama31_freq_factor(uint32_t i, uint32_t n_rot, float base)
{
	const double factor = 8.0, low = 1.0, high = 4.0, old_ctx = 8192.0;
	double freq = pow((double)base, -2.0 * i / (double)n_rot);
	double wavelen = 2.0 * M_PI / freq;

	if (wavelen < old_ctx / high)
		return 1.0f;
	if (wavelen > old_ctx / low)
		return (float)factor;
	double smooth = (old_ctx / wavelen - low) / (high - low);

	return (float)(1.0 / ((1.0 - smooth) / factor + smooth));
}

static void gen_row(const struct synth *sy, const struct synth_tensor *t, uint64_t row,
		    float *out)
{
	uint64_t n = t->dims[0], s = t->seed ^ (row * 0xd1b54a32d192ed03ull);

	(void)splitmix64(&s);
	for (uint64_t i = 0; i < n; i++) {
		switch (t->kind) {
		case K_MATRIX: out[i] = t->std * approx_normal(&s); break;
		case K_NORM: out[i] = 1.0f + 0.1f * approx_normal(&s); break;
		case K_BIAS: out[i] = 0.02f * approx_normal(&s); break;
		case K_ROPE_FREQS:
			out[i] = llama31_freq_factor((uint32_t)i, sy->n_rot, sy->rope_base);
			break;
		/* LongRoPE divisors rising with the dimension, as Phi-3's:
		 * long 1..8, short 1..1.2 */
		case K_ROPE_LONG:
			out[i] = 1.0f + 7.0f * (float)i / (float)(t->dims[0] > 1 ? t->dims[0] - 1 : 1);
			break;
		case K_ROPE_SHORT:
			out[i] = 1.0f + 0.2f * (float)i / (float)(t->dims[0] > 1 ? t->dims[0] - 1 : 1);
			break;
		}
	}
}

struct fill_job {
	const struct synth *sy;
	const struct synth_tensor *t;
	uint64_t row0, rows, row_bytes;
	float *f;
	uint8_t *q;
};

static void *fill_worker(void *arg)
{
	struct fill_job *j = arg;

	for (uint64_t r = 0; r < j->rows; r++) {
		float *f = j->f + r * j->t->dims[0];

		gen_row(j->sy, j->t, j->row0 + r, f);
		wk_quantize_row(j->t->type, f, j->q + r * j->row_bytes, j->t->dims[0]);
	}
	return NULL;
}

#define FILL_CHUNK_VALUES (1u << 20)

static enum cm_status synth_fill(void *ctx, struct wk_gguf_writer *w, uint64_t index)
{
	const struct synth *sy = ctx;
	const struct synth_tensor *t = &sy->t[index];
	uint64_t cols = t->dims[0], rows = (t->n_dims > 1 ? t->dims[1] : 1) * t->dims[2];
	uint64_t row_bytes = wk_qtype_row_bytes(t->type, cols);
	uint64_t chunk = FILL_CHUNK_VALUES / cols ? FILL_CHUNK_VALUES / cols : 1;
	enum cm_status st = CM_OK;
	float *f = cm_malloc(chunk * cols * sizeof(float));
	uint8_t *q = cm_malloc(chunk * row_bytes);

	if (!f || !q) {
		st = CM_ENOMEM;
		goto out;
	}
	for (uint64_t r0 = 0; r0 < rows && st == CM_OK; r0 += chunk) {
		uint64_t n = rows - r0 < chunk ? rows - r0 : chunk;
		struct fill_job jobs[2];
		pthread_t th;
		int threaded = sy->n_threads > 1 && n > 1;
		uint64_t half = threaded ? n / 2 : n;

		jobs[0] = (struct fill_job){ sy, t, r0, half, row_bytes, f, q };
		jobs[1] = (struct fill_job){ sy, t, r0 + half, n - half, row_bytes,
					     f + half * cols, q + half * row_bytes };
		if (threaded && pthread_create(&th, NULL, fill_worker, &jobs[1]) != 0)
			threaded = 0, jobs[0].rows = n;
		fill_worker(&jobs[0]);
		if (threaded)
			pthread_join(th, NULL);
		st = wk_gguf_writer_emit(w, q, (size_t)(n * row_bytes));
	}
out:
	cm_free(f);
	cm_free(q);
	return st;
}

/* llama-quantize's "more bits" layers: the first and last eighth and every
 * third layer between */
static int more_bits_layer(uint32_t layer, uint32_t n_layers)
{
	return layer < n_layers / 8 || layer >= 7 * n_layers / 8 ||
	       (layer - n_layers / 8) % 3 == 2;
}

/*
 * The K-quant mixes as llama-quantize composes them for a dense llama-like
 * model (one expert, not Falcon): a base type, attn_v, ffn_down and
 * attn_output by layer, output.weight Q6_K.
 *   Q3_K_M: attn_v Q5_K in layers 0-1 else Q4_K; ffn_down Q5_K in the first
 *           sixteenth else Q4_K; attn_output Q4_K.
 *   Q4_K_M: attn_v and ffn_down Q6_K in the more-bits layers.
 *   Q5_K_M: the same with Q5_K as the base.
 */
enum mix_tensor { MIX_V, MIX_DOWN, MIX_OUT_PROJ, MIX_OTHER };

struct mix {
	const char *name;
	uint32_t base;
	uint32_t file_type; /* llama.cpp's general.file_type */
};

static const struct mix mixes[] = {
	{ "Q3_K_M", WK_Q_Q3_K, 12 },
	{ "Q4_K_M", WK_Q_Q4_K, 15 },
	{ "Q5_K_M", WK_Q_Q5_K, 17 },
};

static const struct mix *find_mix(const char *name)
{
	for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); i++)
		if (strcasecmp(mixes[i].name, name) == 0)
			return &mixes[i];
	return NULL;
}

static uint32_t mix_type(const struct mix *m, enum mix_tensor what, uint32_t layer,
			 uint32_t n_layers)
{
	if (m->base == WK_Q_Q3_K) {
		if (what == MIX_V)
			return layer < 2 ? WK_Q_Q5_K : WK_Q_Q4_K;
		if (what == MIX_DOWN)
			return layer < n_layers / 16 ? WK_Q_Q5_K : WK_Q_Q4_K;
		if (what == MIX_OUT_PROJ)
			return WK_Q_Q4_K;
		return m->base;
	}
	if ((what == MIX_V || what == MIX_DOWN) && more_bits_layer(layer, n_layers))
		return WK_Q_Q6_K;
	return m->base;
}

/*
 * The type a real quantizer gives a matrix whose rows (d0) are not a
 * multiple of the K-quants' 256, as llama.cpp's llama-quantize does:
 * Q2_K, Q3_K, IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0;
 * F16 when even 32 does not divide them.
 */
static uint32_t fit_type(uint32_t type, uint64_t d0)
{
	if (d0 % wk_qtype_block_elems(type) == 0)
		return type;
	switch (type) {
	case WK_Q_Q2_K: case WK_Q_Q3_K: case WK_Q_IQ4_XS: type = WK_Q_IQ4_NL; break;
	case WK_Q_Q4_K: type = WK_Q_Q5_0; break;
	case WK_Q_Q5_K: type = WK_Q_Q5_1; break;
	case WK_Q_Q6_K: type = WK_Q_Q8_0; break;
	default: break;
	}
	return d0 % wk_qtype_block_elems(type) == 0 ? type : WK_Q_F16;
}

static void add_synth_tensor(struct synth *sy, const char *name, uint32_t type,
			    uint32_t n_dims, uint64_t d0, uint64_t d1,
			    enum synth_kind kind)
{
	struct synth_tensor *t = &sy->t[sy->n_t++];

	if (kind == K_MATRIX)
		type = fit_type(type, d0);
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->type = type;
	t->n_dims = n_dims;
	t->dims[0] = d0;
	t->dims[1] = d1;
	t->dims[2] = 1;
	t->kind = kind;
	/* weights ~ normal(0, 1/sqrt(n_in)) (at least 0.02): unit-scale outputs */
	t->std = 1.0f / sqrtf((float)d0);
	if (t->std < 0.02f)
		t->std = 0.02f;
	t->seed = sy->seed ^ hash_bytes(name, strlen(name));
}

/* the general.architecture names, by enum wk_arch */
static const char *const arch_names[] = {
	[WK_ARCH_LLAMA] = "llama",     [WK_ARCH_QWEN2] = "qwen2",   [WK_ARCH_QWEN3] = "qwen3",
	[WK_ARCH_GRANITE] = "granite", [WK_ARCH_PHI3] = "phi3",     [WK_ARCH_GEMMA2] = "gemma2",
	[WK_ARCH_GEMMA3] = "gemma3",   [WK_ARCH_QWEN3MOE] = "qwen3moe",
	[WK_ARCH_QWEN2MOE] = "qwen2moe", [WK_ARCH_BERT] = "bert",
	[WK_ARCH_NOMIC_BERT] = "nomic-bert",
};

struct synth_opts {
	const struct preset *p;
	const char *type_name;
	/* qwen2, qwen3: NEOX rope, base 1e6, eps 1e-6; qwen2 Q/K/V biases,
	 * qwen3 per-head q/k norms.  granite: llama plus four scales.  phi3:
	 * fused QKV and gate|up, LongRoPE, a window.  gemma2: sandwich norms,
	 * tied output, soft-capping, a window; gemma3: gemma2's layout, QK
	 * norms, 5 local : 1 global, no caps. */
	enum wk_arch arch;
	uint32_t swa;           /* phi3's sliding window (0: the default 2047) */
	int pooling;            /* a decoder's pooling_type key (-1: none written) */
	uint64_t seed;
	uint32_t vocab, ctx;
	const struct template_def *td;
	int rope_freqs;
	uint32_t embd, ff;      /* 0: the preset's */
	uint32_t layers;        /* 0: the preset's */
	uint32_t head_dim;      /* 0: embd / heads; else written as attention.key_length */
	uint32_t experts, experts_used; /* 0: the preset's */
	uint32_t ff_exp;        /* one expert's width (resolved by synth_experts) */
	int fuse_experts;       /* ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps */
	const char *out;
};

static uint32_t file_type_id(const char *type_name)
{
	static const struct { const char *n; uint32_t id; } ft[] = {
		{ "F32", 0 }, { "F16", 1 }, { "Q4_0", 2 }, { "Q4_1", 3 }, { "Q8_0", 7 },
		{ "Q5_0", 8 }, { "Q5_1", 9 }, { "Q2_K", 10 }, { "Q3_K", 11 }, { "Q4_K", 14 },
		{ "IQ4_NL", 25 }, { "Q5_K", 16 }, { "Q6_K", 18 }, { "IQ4_XS", 30 }, { "BF16", 32 },
	};
	const struct mix *m = find_mix(type_name);

	if (m)
		return m->file_type;

	for (size_t i = 0; i < sizeof(ft) / sizeof(ft[0]); i++)
		if (strcasecmp(ft[i].n, type_name) == 0)
			return ft[i].id;
	return 0;
}

/* The tensor list, in llama.cpp's usual order. */
static void add_all_tensors(struct synth *sy, const struct synth_opts *o, const struct preset *p,
			    uint32_t head_dim, uint32_t mtype, const struct mix *mix)
{
	const int phi3 = o->arch == WK_ARCH_PHI3;
	const int gemma = o->arch == WK_ARCH_GEMMA2 || o->arch == WK_ARCH_GEMMA3;
	char name[64];
	uint32_t l;

	/* tensors, in llama.cpp's usual order */
	add_synth_tensor(sy, "token_embd.weight", mtype, 2, p->embd, o->vocab, K_MATRIX);
	if (o->rope_freqs)
		add_synth_tensor(sy, "rope_freqs.weight", WK_Q_F32, 1, head_dim / 2, 1,
				 K_ROPE_FREQS);
	if (phi3) {
		add_synth_tensor(sy, "rope_factors_long.weight", WK_Q_F32, 1, head_dim / 2, 1,
				 K_ROPE_LONG);
		add_synth_tensor(sy, "rope_factors_short.weight", WK_Q_F32, 1, head_dim / 2, 1,
				 K_ROPE_SHORT);
	}
	for (l = 0; l < p->layers; l++) {
		uint32_t vtype = mix ? mix_type(mix, MIX_V, l, p->layers) : mtype;
		uint32_t dtype = mix ? mix_type(mix, MIX_DOWN, l, p->layers) : mtype;
		uint32_t otype = mix ? mix_type(mix, MIX_OUT_PROJ, l, p->layers) : mtype;
		uint64_t q = (uint64_t)p->heads * head_dim, kv = (uint64_t)p->kv_heads * head_dim;

#define T(what, ty, nd, d0, d1, kind) \
		snprintf(name, sizeof(name), "blk.%u.%s", l, what); \
		add_synth_tensor(sy, name, ty, nd, d0, d1, kind)
		T("attn_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
		if (phi3) {
			/* llama-quantize gives the fused QKV one step more than the base */
			uint32_t qkvt = !mix ? mtype : mix->base == WK_Q_Q3_K ? WK_Q_Q4_K
					: mix->base == WK_Q_Q4_K ? WK_Q_Q5_K : WK_Q_Q6_K;

			T("attn_qkv.weight", qkvt, 2, p->embd, q + 2 * kv, K_MATRIX);
		} else {
			T("attn_q.weight", mtype, 2, p->embd, q, K_MATRIX);
			T("attn_k.weight", mtype, 2, p->embd, kv, K_MATRIX);
			T("attn_v.weight", vtype, 2, p->embd, kv, K_MATRIX);
		}
		if (o->arch == WK_ARCH_QWEN3 || o->arch == WK_ARCH_QWEN3MOE ||
		    o->arch == WK_ARCH_GEMMA3) {
			T("attn_q_norm.weight", WK_Q_F32, 1, head_dim, 1, K_NORM);
			T("attn_k_norm.weight", WK_Q_F32, 1, head_dim, 1, K_NORM);
		} else if (o->arch == WK_ARCH_QWEN2 || o->arch == WK_ARCH_QWEN2MOE) {
			T("attn_q.bias", WK_Q_F32, 1, q, 1, K_BIAS);
			T("attn_k.bias", WK_Q_F32, 1, kv, 1, K_BIAS);
			T("attn_v.bias", WK_Q_F32, 1, kv, 1, K_BIAS);
		}
		T("attn_output.weight", otype, 2, q, p->embd, K_MATRIX);
		T("ffn_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
		if (o->experts) {
			/* the router stays F32, as llama-quantize leaves it */
			T("ffn_gate_inp.weight", WK_Q_F32, 2, p->embd, o->experts, K_MATRIX);
			if (o->fuse_experts) {
				T("ffn_gate_up_exps.weight", mtype, 3, p->embd, 2ull * o->ff_exp, K_MATRIX);
				sy->t[sy->n_t - 1].dims[2] = o->experts;
			} else {
				T("ffn_gate_exps.weight", mtype, 3, p->embd, o->ff_exp, K_MATRIX);
				sy->t[sy->n_t - 1].dims[2] = o->experts;
				T("ffn_up_exps.weight", mtype, 3, p->embd, o->ff_exp, K_MATRIX);
				sy->t[sy->n_t - 1].dims[2] = o->experts;
			}
			T("ffn_down_exps.weight", dtype, 3, o->ff_exp, p->embd, K_MATRIX);
			sy->t[sy->n_t - 1].dims[2] = o->experts;
			if (o->arch == WK_ARCH_QWEN2MOE) { /* the shared expert, ff wide */
				T("ffn_gate_inp_shexp.weight", WK_Q_F32, 1, p->embd, 1, K_MATRIX);
				T("ffn_gate_shexp.weight", mtype, 2, p->embd, p->ff, K_MATRIX);
				T("ffn_up_shexp.weight", mtype, 2, p->embd, p->ff, K_MATRIX);
				T("ffn_down_shexp.weight", dtype, 2, p->ff, p->embd, K_MATRIX);
			}
		} else if (phi3) {
			T("ffn_up.weight", mtype, 2, p->embd, 2ull * p->ff, K_MATRIX);
		} else {
			T("ffn_gate.weight", mtype, 2, p->embd, p->ff, K_MATRIX);
			T("ffn_up.weight", mtype, 2, p->embd, p->ff, K_MATRIX);
		}
		if (!o->experts) {
			T("ffn_down.weight", dtype, 2, p->ff, p->embd, K_MATRIX);
		}
		if (gemma) {
			T("post_attention_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
			T("post_ffw_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
		}
#undef T
	}
	add_synth_tensor(sy, "output_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
	if (!gemma) /* gemma ties the output to the embedding */
		add_synth_tensor(sy, "output.weight", mix ? WK_Q_Q6_K : mtype, 2, p->embd,
				 o->vocab, K_MATRIX);

}

/* The tensors' data (generated as written) and the file; st: the keys' status. */
static enum cm_status synth_finish(struct wk_gguf_writer *w, struct synth *sy, enum cm_status st,
				   const char *out, char *err, size_t err_len)
{
	for (uint32_t i = 0; i < sy->n_t && st == CM_OK; i++) {
		const struct synth_tensor *t = &sy->t[i];

		st = wk_gguf_writer_add_tensor_fill(w, t->name, t->type, t->n_dims, t->dims,
						    synth_fill, sy);
	}
	if (st != CM_OK) {
		snprintf(err, err_len, "building the file failed: %s", cm_status_str(st));
		return st;
	}
	return wk_gguf_writer_write_file(w, out, err, err_len);
}

/*
 * An encoder (llama.cpp's tensor names): bert has token, token-type and
 * position embeddings with their LayerNorm, per layer Q/K/V and output with
 * biases, LayerNorms after attention and after the GELU FFN; nomic-bert no
 * position embeddings (RoPE, base 1000), a fused QKV, no biases and a
 * SwiGLU FFN.  A WordPiece vocabulary; mean pooling.
 */
static enum cm_status synth_write_bert(const struct synth_opts *o, const struct preset *p,
				       uint32_t mtype, char *err, size_t err_len)
{
	static const struct { const char *name; char shape; } per_layer[] = {
		{ "attn_q.weight", 'm' }, { "attn_q.bias", 'b' }, { "attn_k.weight", 'm' },
		{ "attn_k.bias", 'b' }, { "attn_v.weight", 'm' }, { "attn_v.bias", 'b' },
		{ "attn_output.weight", 'm' }, { "attn_output.bias", 'b' },
		{ "attn_output_norm.weight", 'n' }, { "attn_output_norm.bias", 'b' },
		{ "ffn_up.weight", 'u' }, { "ffn_up.bias", 'f' }, { "ffn_down.weight", 'd' },
		{ "ffn_down.bias", 'b' }, { "layer_output_norm.weight", 'n' },
		{ "layer_output_norm.bias", 'b' },
	}, nomic_layer[] = {
		{ "attn_qkv.weight", 'q' }, { "attn_output.weight", 'm' },
		{ "attn_output_norm.weight", 'n' }, { "attn_output_norm.bias", 'b' },
		{ "ffn_up.weight", 'u' }, { "ffn_gate.weight", 'u' }, { "ffn_down.weight", 'd' },
		{ "layer_output_norm.weight", 'n' }, { "layer_output_norm.bias", 'b' },
	};
	const int nomic = o->arch == WK_ARCH_NOMIC_BERT;
	const char *a = arch_names[o->arch];
	size_t n_per = nomic ? sizeof(nomic_layer) / sizeof(nomic_layer[0])
			     : sizeof(per_layer) / sizeof(per_layer[0]);
	struct wk_gguf_writer *w = NULL;
	struct synth sy = { .seed = o->seed * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull,
			    .n_threads = 2 };
	struct vocab v = { 0 };
	enum cm_status st = CM_ENOMEM;
	char name[64];

	sy.t = cm_calloc(8 + 16ull * p->layers, sizeof(*sy.t));
	if (!sy.t || build_vocab_wpm(&v, o->vocab) != 0) {
		snprintf(err, err_len, "cannot build a WordPiece vocabulary of %u tokens", o->vocab);
		goto out;
	}
	add_synth_tensor(&sy, "token_embd.weight", mtype, 2, p->embd, o->vocab, K_MATRIX);
	add_synth_tensor(&sy, "token_types.weight", WK_Q_F32, 2, p->embd, 2, K_MATRIX);
	if (!nomic)
		add_synth_tensor(&sy, "position_embd.weight", WK_Q_F32, 2, p->embd, o->ctx, K_MATRIX);
	add_synth_tensor(&sy, "token_embd_norm.weight", WK_Q_F32, 1, p->embd, 1, K_NORM);
	add_synth_tensor(&sy, "token_embd_norm.bias", WK_Q_F32, 1, p->embd, 1, K_BIAS);
	for (uint32_t l = 0; l < p->layers; l++)
		for (size_t k = 0; k < n_per; k++) {
			char s = nomic ? nomic_layer[k].shape : per_layer[k].shape;
			int mat = s == 'm' || s == 'u' || s == 'd' || s == 'q';

			snprintf(name, sizeof(name), "blk.%u.%s", l,
				 nomic ? nomic_layer[k].name : per_layer[k].name);
			add_synth_tensor(&sy, name, mat ? mtype : WK_Q_F32, mat ? 2 : 1,
					 s == 'd' || s == 'f' ? p->ff : p->embd,
					 s == 'm' || s == 'd' ? p->embd : s == 'u' ? p->ff
					 : s == 'q' ? 3 * p->embd : 1,
					 s == 'n' ? K_NORM : s == 'b' || s == 'f' ? K_BIAS : K_MATRIX);
		}
	st = wk_gguf_writer_new(&w);
#define CHK(call) do { if (st == CM_OK) st = (call); } while (0)
	CHK(wk_gguf_writer_add_str(w, "general.architecture", a));
	snprintf(name, sizeof(name), "sluice-synth-%s-%s", p->name, o->type_name);
	CHK(wk_gguf_writer_add_str(w, "general.name", name));
	CHK(wk_gguf_writer_add_u32(w, "general.file_type", file_type_id(o->type_name)));
	CHK(wk_gguf_writer_set_alignment(w, 32, 1));
#define KEY(k) (snprintf(name, sizeof(name), "%s." k, a), name)
	CHK(wk_gguf_writer_add_u32(w, KEY("context_length"), o->ctx));
	CHK(wk_gguf_writer_add_u32(w, KEY("embedding_length"), p->embd));
	CHK(wk_gguf_writer_add_u32(w, KEY("block_count"), p->layers));
	CHK(wk_gguf_writer_add_u32(w, KEY("feed_forward_length"), p->ff));
	CHK(wk_gguf_writer_add_u32(w, KEY("attention.head_count"), p->heads));
	CHK(wk_gguf_writer_add_f32(w, KEY("attention.layer_norm_epsilon"), 1e-12f));
	CHK(wk_gguf_writer_add_bool(w, KEY("attention.causal"), 0));
	CHK(wk_gguf_writer_add_u32(w, KEY("pooling_type"), WK_POOL_MEAN));
	if (nomic)
		CHK(wk_gguf_writer_add_f32(w, KEY("rope.freq_base"), 1000.0f));
#undef KEY
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2));
	CHK(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "bert"));
	CHK(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok,
				       v.len, v.n));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", WK_GGUF_I32, v.type, v.n));
	/* [PAD] [UNK] [CLS] [SEP] [MASK]; llama.cpp takes [CLS] from the BOS key */
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 1));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.cls_token_id", 2));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 2));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.seperator_token_id", 3));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.mask_token_id", 4));
#undef CHK
	st = synth_finish(w, &sy, st, o->out, err, err_len);
out:
	wk_gguf_writer_free(w);
	vocab_deinit(&v);
	cm_free(sy.t);
	return st;
}

static enum cm_status synth_write(const struct synth_opts *o, char *err, size_t err_len)
{
	struct preset shape = *o->p;
	const struct preset *p = &shape;
	const char *arch = arch_names[o->arch];
	const int qwen = o->arch == WK_ARCH_QWEN2 || o->arch == WK_ARCH_QWEN3 ||
			 o->arch == WK_ARCH_QWEN3MOE || o->arch == WK_ARCH_QWEN2MOE;
	struct wk_gguf_writer *w = NULL;
	struct synth sy = { 0 };
	struct vocab v = { 0 };
	enum cm_status st;
	uint32_t bos, eos, head_dim = p->embd / p->heads, mtype;
	int64_t eot;
	const struct mix *mix = find_mix(o->type_name);
	char key[96], name[64];

	if (o->embd)
		shape.embd = o->embd;
	if (o->ff)
		shape.ff = o->ff;
	if (o->layers)
		shape.layers = o->layers;
	head_dim = o->head_dim ? o->head_dim : p->head_dim ? p->head_dim : p->embd / p->heads;
	mtype = mix ? mix->base : (uint32_t)wk_qtype_parse(o->type_name);
	if (wk_mcfg_encoder_arch(o->arch))
		return synth_write_bert(o, p, mtype, err, err_len);
	sy.seed = o->seed * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull;
	sy.n_rot = head_dim;
	sy.rope_base = qwen || o->arch == WK_ARCH_GEMMA3 ? 1000000.0f : p->rope_base;
	sy.n_threads = 2;
	sy.t = cm_calloc(8 + 16ull * p->layers, sizeof(*sy.t));
	if (!sy.t) {
		st = CM_ENOMEM;
		goto out;
	}
	if (build_vocab(&v, o->vocab, o->td, &bos, &eos, &eot) != 0) {
		snprintf(err, err_len, "cannot build a vocabulary of %u tokens", o->vocab);
		st = CM_EINVAL;
		goto out;
	}

	add_all_tensors(&sy, o, p, head_dim, mtype, mix);

	st = wk_gguf_writer_new(&w);
	if (st != CM_OK)
		goto out;
#define K(suffix) (snprintf(key, sizeof(key), "%s.%s", arch, suffix), key)
#define CHK(call) do { if (st == CM_OK) st = (call); } while (0)
	CHK(wk_gguf_writer_add_str(w, "general.architecture", arch));
	snprintf(name, sizeof(name), "sluice-synth-%s-%s", p->name, o->type_name);
	CHK(wk_gguf_writer_add_str(w, "general.name", name));
	CHK(wk_gguf_writer_add_u32(w, "general.file_type", file_type_id(o->type_name)));
	CHK(wk_gguf_writer_add_u32(w, "general.quantization_version", 2));
	CHK(wk_gguf_writer_set_alignment(w, 32, 1));
	CHK(wk_gguf_writer_add_u32(w, K("context_length"), o->ctx));
	if (o->pooling >= 0) /* a decoder embedder (Qwen3-Embedding: last) */
		CHK(wk_gguf_writer_add_u32(w, K("pooling_type"), (uint32_t)o->pooling));
	CHK(wk_gguf_writer_add_u32(w, K("embedding_length"), p->embd));
	CHK(wk_gguf_writer_add_u32(w, K("block_count"), p->layers));
	CHK(wk_gguf_writer_add_u32(w, K("feed_forward_length"), p->ff));
	CHK(wk_gguf_writer_add_u32(w, K("attention.head_count"), p->heads));
	CHK(wk_gguf_writer_add_u32(w, K("attention.head_count_kv"), p->kv_heads));
	CHK(wk_gguf_writer_add_u32(w, K("rope.dimension_count"), head_dim));
	if (head_dim != p->embd / p->heads) {
		/* heads wider than embd / heads (Qwen3: 128 with a 1024 embedding
		 * and 16 heads) */
		CHK(wk_gguf_writer_add_u32(w, K("attention.key_length"), head_dim));
		CHK(wk_gguf_writer_add_u32(w, K("attention.value_length"), head_dim));
	}
	if (o->experts) {
		CHK(wk_gguf_writer_add_u32(w, K("expert_count"), o->experts));
		CHK(wk_gguf_writer_add_u32(w, K("expert_used_count"), o->experts_used));
		if (o->arch != WK_ARCH_LLAMA) /* Mixtral's experts are ff wide */
			CHK(wk_gguf_writer_add_u32(w, K("expert_feed_forward_length"), o->ff_exp));
		if (o->arch == WK_ARCH_QWEN2MOE)
			CHK(wk_gguf_writer_add_u32(w, K("expert_shared_feed_forward_length"), p->ff));
	}
	CHK(wk_gguf_writer_add_f32(w, K("rope.freq_base"), sy.rope_base));
	CHK(wk_gguf_writer_add_f32(w, K("attention.layer_norm_rms_epsilon"),
				   qwen || o->arch == WK_ARCH_GEMMA2 || o->arch == WK_ARCH_GEMMA3
					   ? 1e-6f : 1e-5f));
	if (o->arch == WK_ARCH_PHI3) {
		/* a Phi-3-128k-like LongRoPE: the long factors above half the
		 * training context, the magnitude scale its converter writes */
		uint32_t orig = o->ctx / 2 ? o->ctx / 2 : 1;

		CHK(wk_gguf_writer_add_u32(w, K("attention.sliding_window"), o->swa ? o->swa : 2047));
		CHK(wk_gguf_writer_add_u32(w, K("rope.scaling.original_context_length"), orig));
		CHK(wk_gguf_writer_add_f32(w, K("rope.scaling.attn_factor"),
					   orig > 1 ? sqrtf(1.0f + logf((float)o->ctx / (float)orig) /
							       logf((float)orig)) : 1.0f));
	}
	if (o->arch == WK_ARCH_GEMMA2) {
		/* Gemma 2's caps; the window on even layers */
		CHK(wk_gguf_writer_add_u32(w, K("attention.sliding_window"), o->swa ? o->swa : 4096));
		CHK(wk_gguf_writer_add_f32(w, K("attn_logit_softcapping"), 50.0f));
		CHK(wk_gguf_writer_add_f32(w, K("final_logit_softcapping"), 30.0f));
	}
	if (o->arch == WK_ARCH_GEMMA3) {
		/* Gemma 3 4B's: a window of 1024, the global layers' base 1e6 scaled
		 * linearly by 8 (the local layers' 10000 is the architecture's) */
		CHK(wk_gguf_writer_add_u32(w, K("attention.sliding_window"), o->swa ? o->swa : 1024));
		if (strcmp(p->name, "gemma3-1b") != 0) { /* Gemma 3 1B has no scaling */
			CHK(wk_gguf_writer_add_str(w, K("rope.scaling.type"), "linear"));
			CHK(wk_gguf_writer_add_f32(w, K("rope.scaling.factor"), 8.0f));
		}
	}
	if (o->arch == WK_ARCH_GRANITE) {
		/* Granite 3.0 2B's multipliers (embedding, residual, attention,
		 * logits scaling) */
		CHK(wk_gguf_writer_add_f32(w, K("embedding_scale"), 12.0f));
		CHK(wk_gguf_writer_add_f32(w, K("residual_scale"), 0.22f));
		CHK(wk_gguf_writer_add_f32(w, K("attention.scale"), 0.015625f));
		CHK(wk_gguf_writer_add_f32(w, K("logit_scale"), 8.0f));
	}
	CHK(wk_gguf_writer_add_u32(w, K("vocab_size"), o->vocab));
	CHK(wk_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama"));
	CHK(wk_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default"));
	CHK(wk_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok,
				       v.len, v.n));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.scores", WK_GGUF_F32, v.score, v.n));
	CHK(wk_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", WK_GGUF_I32, v.type, v.n));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", bos));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", eos));
	CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0));
	if (eot >= 0)
		CHK(wk_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)eot));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", 1));
	CHK(wk_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", 0));
	if (o->td->text)
		CHK(wk_gguf_writer_add_str(w, "tokenizer.chat_template", o->td->text));
#undef CHK
#undef K
	st = synth_finish(w, &sy, st, o->out, err, err_len);
out:
	wk_gguf_writer_free(w);
	vocab_deinit(&v);
	cm_free(sy.t);
	return st;
}

/*
 * The experts: --experts / --experts-used over the preset's; the width of
 * one expert; only llama (Mixtral) and qwen3moe carry them, and qwen3moe
 * always does.  2 after a message when they do not fit.
 */
static int synth_experts(struct synth_opts *o)
{
	if (!o->experts)
		o->experts = o->p->experts;
	if (!o->experts_used)
		o->experts_used = o->p->experts_used ? o->p->experts_used : 2;
	o->ff_exp = o->ff ? o->ff : o->p->ff_exp ? o->p->ff_exp : o->p->ff;
	if ((o->arch == WK_ARCH_QWEN3MOE || o->arch == WK_ARCH_QWEN2MOE) && !o->experts) {
		fprintf(stderr, "sluice-model: --arch %s needs experts: a moe preset or "
			"--experts N\n", arch_names[o->arch]);
		return 2;
	}
	if (o->experts && o->arch != WK_ARCH_LLAMA && o->arch != WK_ARCH_QWEN3MOE &&
	    o->arch != WK_ARCH_QWEN2MOE) {
		fprintf(stderr, "sluice-model: experts: expected --arch llama (Mixtral), qwen2moe "
			"or qwen3moe, found '%s'\n", arch_names[o->arch]);
		return 2;
	}
	if (o->experts && o->experts_used > o->experts) {
		fprintf(stderr, "sluice-model: --experts-used %u is more than the %u experts\n",
			o->experts_used, o->experts);
		return 2;
	}
	if (!o->experts)
		o->experts_used = 0;
	return 0;
}

/* --arch NAME into o->arch; 2 (after a message) for an unknown one */
static int set_arch(struct synth_opts *o, const char *val)
{
	for (size_t i = 0; i < sizeof(arch_names) / sizeof(arch_names[0]); i++)
		if (strcmp(val, arch_names[i]) == 0) {
			o->arch = (enum wk_arch)i;
			return 0;
		}
	fprintf(stderr, "sluice-model: --arch: expected llama, qwen2, qwen2moe, qwen3, qwen3moe, "
		"granite, phi3, gemma2, gemma3, bert or nomic-bert, found '%s'\n", val);
	return 2;
}

/*
 * The options that shape the model (--layers, --embd, --ffn, --experts,
 * --experts-used, --swa, --head-dim) into o: 0 when parsed, 1 when arg is
 * none of them, 2 after a message for a bad value.
 */
static int synth_shape_opt(struct synth_opts *o, const char *arg, const char *val)
{
	uint64_t v;

	if (strcmp(arg, "--layers") == 0) {
		if (model_parse_u64(val, WK_MCFG_MAX_LAYERS, &v) != 0 || v == 0) {
			fprintf(stderr, "sluice-model: --layers: expected 1..%u, found '%s'\n",
				WK_MCFG_MAX_LAYERS, val);
			return 2;
		}
		o->layers = (uint32_t)v;
	} else if (strcmp(arg, "--embd") == 0 || strcmp(arg, "--ffn") == 0) {
		/* a width a real model has (576: SmolLM2, 896: Qwen2.5-0.5B) */
		if (model_parse_u64(val, 65536, &v) != 0 || v == 0 || v % 32 != 0) {
			fprintf(stderr, "sluice-model: %s: expected a multiple of 32 up to "
				"65536, found '%s'\n", arg, val);
			return 2;
		}
		if (arg[2] == 'e')
			o->embd = (uint32_t)v;
		else
			o->ff = (uint32_t)v;
	} else if (strcmp(arg, "--experts") == 0 || strcmp(arg, "--experts-used") == 0) {
		uint32_t hi = arg[9] ? WK_MCFG_MAX_EXPERTS_USED : WK_MCFG_MAX_EXPERTS;

		if (model_parse_u64(val, hi, &v) != 0 || v == 0) {
			fprintf(stderr, "sluice-model: %s: expected 1..%u, found '%s'\n", arg,
				hi, val);
			return 2;
		}
		if (arg[9])
			o->experts_used = (uint32_t)v;
		else
			o->experts = (uint32_t)v;
	} else if (strcmp(arg, "--swa") == 0) {
		if (model_parse_u64(val, WK_MCFG_MAX_CTX, &v) != 0 || v == 0) {
			fprintf(stderr, "sluice-model: --swa: expected 1..%u, found '%s'\n",
				WK_MCFG_MAX_CTX, val);
			return 2;
		}
		o->swa = (uint32_t)v;
	} else if (strcmp(arg, "--pooling") == 0) {
		static const char *const names[] = { "none", "mean", "cls", "last" };

		o->pooling = -1;
		for (int i = 0; i < 4; i++)
			if (strcmp(val, names[i]) == 0)
				o->pooling = i;
		if (o->pooling < 0) {
			fprintf(stderr, "sluice-model: --pooling: expected none, mean, cls or last, "
				"found '%s'\n", val);
			return 2;
		}
	} else if (strcmp(arg, "--head-dim") == 0) {
		if (model_parse_u64(val, 512, &v) != 0 || v < 2 || v % 2 != 0) {
			fprintf(stderr, "sluice-model: --head-dim: expected an even number "
				"2..512, found '%s'\n", val);
			return 2;
		}
		o->head_dim = (uint32_t)v;
	} else {
		return 1;
	}
	return 0;
}

int model_cmd_synth(int argc, char **argv)
{
	struct synth_opts o = { .type_name = "F32", .seed = 1, .td = synth_template(NULL),
				.pooling = -1 };
	uint64_t v;
	int have_vocab = 0, have_ctx = 0, have_arch = 0, have_tmpl = 0, ctl = 0, rc;
	char err[ERR_LEN];

	for (int a = 0; a < argc; a++) {
		const char *arg = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;

		if (strcmp(arg, "--rope-freqs") == 0) {
			o.rope_freqs = 1;
			continue;
		}
		if (strcmp(arg, "--fuse-experts") == 0) {
			o.fuse_experts = 1;
			continue;
		}
		if (!val) {
			model_usage(stderr);
			return 2;
		}
		a++;
		if (strcmp(arg, "--preset") == 0) {
			for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
				if (strcmp(val, presets[i].name) == 0)
					o.p = &presets[i];
			if (!o.p) {
				fprintf(stderr, "sluice-model: --preset: expected tiny, 1b, qwen3-1b, "
					"gemma3-1b, phi3-1b, 8b, moe-tiny, qwen3moe-tiny, moe-1b, "
					"qwen3moe-1b, bert-tiny or minilm, "
					"found '%s'\n", val);
				return 2;
			}
		} else if (strcmp(arg, "--type") == 0) {
			if (!find_mix(val) &&
			    (wk_qtype_parse(val) < 0 || !wk_qtype_supported((uint32_t)wk_qtype_parse(val)))) {
				fprintf(stderr, "sluice-model: --type: expected F32, F16, BF16, "
					"Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, "
					"Q3_K_M, Q4_K, Q4_K_M, Q5_K, Q5_K_M or Q6_K, found '%s'\n", val);
				return 2;
			}
			o.type_name = val;
		} else if (strcmp(arg, "--arch") == 0) {
			if (set_arch(&o, val) != 0)
				return 2;
			have_arch = 1;
		} else if (strcmp(arg, "--seed") == 0) {
			if (model_parse_u64(val, UINT64_MAX, &o.seed) != 0) {
				fprintf(stderr, "sluice-model: --seed: expected an integer, found "
					"'%s'\n", val);
				return 2;
			}
		} else if (strcmp(arg, "--vocab") == 0) {
			if (model_parse_u64(val, WK_MCFG_MAX_VOCAB, &v) != 0 || v < 300) {
				fprintf(stderr, "sluice-model: --vocab: expected 300..%u, found "
					"'%s'\n", WK_MCFG_MAX_VOCAB, val);
				return 2;
			}
			o.vocab = (uint32_t)v;
			have_vocab = 1;
		} else if ((rc = synth_shape_opt(&o, arg, val)) != 1) {
			if (rc != 0)
				return rc;
		} else if (strcmp(arg, "--ctx") == 0) {
			if (model_parse_u64(val, WK_MCFG_MAX_CTX, &v) != 0 || v == 0) {
				fprintf(stderr, "sluice-model: --ctx: expected 1..%u, found '%s'\n",
					WK_MCFG_MAX_CTX, val);
				return 2;
			}
			o.ctx = (uint32_t)v;
			have_ctx = 1;
		} else if (strcmp(arg, "--template") == 0) {
			o.td = synth_template(val);
			have_tmpl = 1;
			if (!o.td) {
				fprintf(stderr, "sluice-model: --template: expected chatml, llama3, "
					"llama2, mistral, zephyr, phi3, phi4, granite, gemma, qwen3, "
					"qwen3-thinking or none, found '%s'\n", val);
				return 2;
			}
		} else if (strcmp(arg, "-o") == 0) {
			o.out = val;
		} else {
			model_usage(stderr);
			return 2;
		}
	}
	if (!o.p || !o.out) {
		fprintf(stderr, "sluice-model: synth needs --preset and -o\n");
		model_usage(stderr);
		return 2;
	}
	if (!have_vocab)
		o.vocab = o.p->vocab;
	if (!have_ctx)
		o.ctx = o.p->ctx;
	if (o.p->rope_freqs)
		o.rope_freqs = 1;
	if (!have_arch && o.p->arch)
		(void)set_arch(&o, o.p->arch);
	if (!o.swa)
		o.swa = o.p->swa;
	if (!have_tmpl && o.p->tmpl)
		o.td = synth_template(o.p->tmpl);
	if (synth_experts(&o) != 0)
		return 2;
	while (o.td->controls[ctl])
		ctl++;
	if (o.vocab < 259u + (uint32_t)ctl + 32) {
		fprintf(stderr, "sluice-model: --vocab %u is too small for 259 base tokens, "
			"%d control tokens and 32 pieces\n", o.vocab, ctl);
		return 2;
	}
	if (synth_write(&o, err, sizeof(err)) != CM_OK) {
		struct stat sb;

		fprintf(stderr, "sluice-model: synth: %s\n", err);
		/* no half-written model left behind (but never unlink a device) */
		if (stat(o.out, &sb) == 0 && S_ISREG(sb.st_mode))
			unlink(o.out);
		return 1;
	}
	return 0;
}
