/*
 * model_config.h - model hyperparameters and weight tensors of a GGUF file.
 *
 * wk_mcfg_load() reads `general.architecture` and the `{arch}.*` keys,
 * checks them against bounds, and checks that every weight tensor the
 * architecture needs is present with the right shape and a usable type.
 * The result is plain data the engine reads directly, the one description
 * of the model: the hyperparameters (struct wk_hparams) and every weight
 * as a matrix view over the mapped file (struct wk_tensor, struct
 * wk_layer), which struct wk_model and the backends use as they are (a
 * device backend uploads those views into its memory), plus derived sizes.
 *
 * Supported architectures: `llama` (Llama 2/3/3.1, Mistral, TinyLlama,
 * SmolLM; GQA; tied embeddings when output.weight is absent; Llama 3.1 rope
 * scaling through the rope_freqs.weight tensor or {arch}.rope.scaling.*),
 * `qwen2` (as llama, plus Q/K/V biases), `qwen3` (qwen2 without biases,
 * RMSNorm per head on Q and K), `granite` (llama with an embedding,
 * a residual, an attention and a logit scale, all four keys required) and
 * `phi3` (Phi-3, Phi-4: fused QKV and gate|up tensors read as views,
 * NEOX rope, LongRoPE factors, a sliding window) and `gemma2` (embedding
 * times sqrt(embd), GELU gate, norms after attention and FFN, attention and
 * final logit soft-capping, a window on even layers, NEOX rope) and
 * `gemma3` (gemma2's layout plus per-head Q/K norms, the window on five
 * layers of every six, the local layers on rope base 10000 unscaled, no
 * soft-capping), `qwen3moe` (qwen3 with a mixture of experts in every FFN:
 * a router ffn_gate_inp and 3-D ffn_{gate,up,down}_exps tensors, or a fused
 * ffn_gate_up_exps) and Mixtral (`llama` with {arch}.expert_count and the
 * same tensors) and `qwen2moe` (qwen2's attention with experts whose top-k
 * weights are not renormalised, plus a shared expert gated per token by
 * sigmoid(h . ffn_gate_inp_shexp)).  Experts are softmax-gated
 * (expert_gating_func 1 or absent; sigmoid gating and an
 * expert_shared_count other than 0 are refused by name).
 * `bert` is an encoder (bidirectional attention, absolute positions,
 * LayerNorms with biases, GELU FFN, pooling): it embeds, it does not
 * generate, and has no output projection.
 * Anything else is refused by name.
 *
 * Shapes are written innermost first, as in GGUF: a matrix [n_in, n_out]
 * maps an n_in vector to an n_out vector.  Norm, bias and rope_freqs
 * tensors must be F32.
 *
 * Ownership: the views and the chat template point into the struct
 * wk_gguf, which must outlive the config; the config owns the layer
 * array.  Immutable after load.
 */
#ifndef SLUICE_WORKER_MODEL_MODEL_CONFIG_H
#define SLUICE_WORKER_MODEL_MODEL_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/gguf.h"

enum wk_arch {
	WK_ARCH_LLAMA = 0,
	WK_ARCH_QWEN2 = 1,
	WK_ARCH_QWEN3 = 2,  /* qwen2 without biases, RMSNorm per head on Q and K */
	WK_ARCH_GRANITE = 3, /* llama with four scales (IBM Granite 3.x dense) */
	WK_ARCH_PHI3 = 4,    /* fused QKV and gate|up, NEOX rope, LongRoPE, sliding window */
	WK_ARCH_GEMMA2 = 5,  /* GELU, sandwich norms, soft-capping, window on even layers */
	WK_ARCH_GEMMA3 = 6,  /* gemma2 + QK norm, 5 local : 1 global layers, two rope bases,
			      * no soft-capping */
	WK_ARCH_QWEN3MOE = 7, /* qwen3 with a mixture of experts in every FFN */
	WK_ARCH_QWEN2MOE = 8, /* qwen2 with experts and a gated shared expert */
	WK_ARCH_BERT = 9,     /* an encoder (all-MiniLM, bge, e5): embeddings only */
	WK_ARCH_NOMIC_BERT = 10, /* an encoder with RoPE, SwiGLU, fused QKV, no biases
				  * (nomic-embed-text) */
};

/* 1 for the encoders (bert, nomic-bert): they embed, never generate. */
int wk_mcfg_encoder_arch(enum wk_arch a);

/* How an embedding is made of a sequence's final hidden states
 * ({arch}.pooling_type, llama.cpp's numbering). */
enum wk_pooling {
	WK_POOL_NONE = 0,
	WK_POOL_MEAN = 1,
	WK_POOL_CLS = 2,  /* the first token's ([CLS]) */
	WK_POOL_LAST = 3, /* the last token's (decoder embedders) */
};

enum wk_ffn_act {
	WK_FFN_SILU = 0,      /* silu(gate) * up (SwiGLU) */
	WK_FFN_GELU_TANH = 1, /* gelu_tanh(gate) * up (GeGLU, gemma) */
};

enum wk_rope_scaling {
	WK_ROPE_SCALING_NONE = 0,
	WK_ROPE_SCALING_LINEAR = 1,  /* positions divided by rope_scale_factor */
	WK_ROPE_SCALING_YARN = 2,
	WK_ROPE_SCALING_FREQS = 3,   /* per-dimension factors: rope_freqs.weight */
};

enum wk_rope_style {
	WK_ROPE_NORM = 0, /* rotate adjacent pairs (x[2i], x[2i+1]): llama GGUFs */
	WK_ROPE_NEOX = 1, /* rotate halves (x[i], x[i + d/2]): qwen2 */
};

/*
 * The model's hyperparameters: the one description the loader fills, the
 * engine and every backend read (struct wk_model.hp is a copy).
 */
struct wk_hparams {
	enum wk_arch arch;
	uint32_t n_layer;        /* {arch}.block_count */
	uint32_t n_embd;         /* {arch}.embedding_length */
	uint32_t n_ff;           /* {arch}.feed_forward_length */
	uint32_t n_head;         /* {arch}.attention.head_count */
	uint32_t n_head_kv;      /* .attention.head_count_kv (default n_head) */
	uint32_t head_dim;       /* .attention.key_length (default embd/heads) */
	uint32_t head_dim_v;     /* .attention.value_length (default embd/heads) */
	uint32_t n_vocab;        /* tokens count, = token_embd dims[1] */
	uint32_t n_ctx_train;    /* {arch}.context_length */
	uint32_t rope_dim;       /* .rope.dimension_count (default head_dim): rotated per head */
	float rope_base;         /* .rope.freq_base (default 10000) */
	enum wk_rope_scaling rope_scaling;
	float rope_scale_factor; /* .rope.scaling.factor (1 when absent) */
	uint32_t rope_orig_ctx;  /* .rope.scaling.original_context_length (0 absent) */
	float rope_pos_scale;    /* positions are multiplied by this (linear scaling) */
	float rms_eps;           /* .attention.layer_norm_rms_epsilon (default 1e-5) */
	enum wk_rope_style rope_style; /* NEOX for qwen2, NORM for llama */
	const float *rope_freqs; /* [rope_dim/2] divisors (rope_freqs.weight), or NULL */
	/* granite's scales (1 for the other architectures, and attn_scale
	 * 1/sqrt(head_dim)) */
	float embd_scale;        /* .embedding_scale: the token embedding is multiplied */
	float residual_scale;    /* .residual_scale: attention and FFN outputs multiplied
				  * before their residual add */
	float attn_scale;        /* .attention.scale: multiplies q.k (default 1/sqrt(head_dim)) */
	float logit_scale;       /* .logit_scale: the logits are divided by it */
	float rope_attn_factor;  /* .rope.scaling.attn_factor (default 1): multiplies the
				  * rotation's cos and sin (LongRoPE's magnitude scale) */
	uint32_t n_swa;          /* sliding window: a query sees the n_swa positions up to
				  * its own (0: the whole sequence) */
	uint32_t swa_pattern;    /* which layers have the window: 0 every layer; N >= 2
				  * layer l when l % N < N - 1 (gemma2: 2, even layers) */
	float rope_base_swa;     /* the rope base of the windowed layers (gemma3: 10000,
				  * without the linear scaling); 0: as the others */
	float attn_softcap;      /* scores become c * tanh(s / c) (0: none): gemma2 */
	float final_softcap;     /* the same on the logits (0: none): gemma2 */
	enum wk_ffn_act ffn_act;
	/* mixture of experts (0 experts: a dense FFN): Mixtral is `llama`
	 * with {arch}.expert_count, qwen3moe always has them */
	uint32_t n_expert;       /* .expert_count */
	uint32_t n_expert_used;  /* .expert_used_count: the top k a token is routed to */
	uint32_t n_ff_exp;       /* one expert's FFN width: .expert_feed_forward_length
				  * (qwen3moe), else n_ff */
	int expert_norm;         /* .expert_weights_norm (default 1): the top-k
				  * softmax weights renormalised to sum 1 */
	float expert_scale;      /* .expert_weights_scale (default 1): then multiplied */
	uint32_t n_ff_shexp;     /* the shared expert's width (qwen2moe:
				  * .expert_shared_feed_forward_length, default n_ff; 0: none) */
	/* encoders (bert) */
	int causal;              /* .attention.causal (default 1; bert 0) */
	float norm_eps;          /* .attention.layer_norm_epsilon: LayerNorm (bert, 1e-12) */
	enum wk_pooling pooling; /* .pooling_type (bert: default mean) */
	uint32_t n_token_types;  /* rows of token_types.weight (bert) */
};

/* The window every layer has (the KV the scheduler must keep behind a
 * position), 0 when some layer sees the whole sequence. */
static inline uint32_t wk_kv_window(const struct wk_hparams *hp)
{
	return hp->swa_pattern < 2 ? hp->n_swa : 0;
}

/* The window of layer l (0: it sees the whole sequence). */
static inline uint32_t wk_layer_swa(const struct wk_hparams *hp, uint32_t l)
{
	if (hp->n_swa == 0)
		return 0;
	if (hp->swa_pattern >= 2 && l % hp->swa_pattern == hp->swa_pattern - 1)
		return 0;
	return hp->n_swa;
}

/* Bounds checked at load (inclusive). */
#define WK_MCFG_MAX_LAYERS 1024
#define WK_MCFG_MAX_EMBD 65536
#define WK_MCFG_MAX_HEADS 1024
#define WK_MCFG_MAX_HEAD_DIM 1024
#define WK_MCFG_MAX_FF (1u << 20)
#define WK_MCFG_MAX_CTX (1u << 24)
#define WK_MCFG_MAX_VOCAB (1u << 22)
#define WK_MCFG_MAX_EXPERTS 512
#define WK_MCFG_MAX_EXPERTS_USED 64

/* A weight tensor viewed as a matrix (vectors have rows = 1). */
struct wk_tensor {
	uint32_t type;      /* enum wk_qtype */
	uint64_t rows;
	uint64_t cols;
	uint64_t row_bytes;
	const void *data;   /* NULL when the tensor is absent (optional biases) */
	const char *name;
	/* a 3-D expert tensor: the view is expert 0's matrix and expert e's
	 * starts expert_stride bytes after expert e - 1's (0: not one) */
	uint64_t expert_stride;
};

/* Expert e's matrix of a 3-D expert tensor (wk_layer.exp_*). */
static inline struct wk_tensor wk_tensor_expert(const struct wk_tensor *t, uint32_t e)
{
	struct wk_tensor r = *t;

	r.data = (const uint8_t *)t->data + (uint64_t)e * t->expert_stride;
	r.expert_stride = 0;
	return r;
}

struct wk_layer {
	struct wk_tensor attn_norm;            /* (embd) */
	struct wk_tensor wq, wk, wv;           /* (n_head*hd, embd), (n_kv*hd, embd) x2 */
	struct wk_tensor bq, bk, bv;           /* qwen2 biases, else data NULL */
	struct wk_tensor q_norm, k_norm;       /* qwen3: (hd) per-head RMSNorm weights
					        * before RoPE, else data NULL */
	struct wk_tensor wo;                   /* (embd, n_head*hd) */
	struct wk_tensor ffn_norm;             /* (embd) */
	struct wk_tensor w_gate, w_up;         /* (ff, embd) */
	struct wk_tensor w_down;               /* (embd, ff) */
	struct wk_tensor attn_post_norm;       /* gemma2: (embd) RMSNorm of the attention
						* output before its residual add, else data NULL */
	struct wk_tensor ffn_post_norm;        /* gemma2: the same for the FFN output */
	/* mixture of experts (hp.n_expert > 0; then w_gate/w_up/w_down are
	 * absent): the router and every expert's three matrices, mapped */
	struct wk_tensor ffn_gate_inp;         /* (n_expert, embd) router logits */
	struct wk_tensor exp_gate, exp_up;     /* per expert (n_ff_exp, embd) */
	struct wk_tensor exp_down;             /* per expert (embd, n_ff_exp) */
	/* qwen2moe's shared expert, added to the routed ones times
	 * sigmoid(h . shexp_gate_inp) (else data NULL) */
	struct wk_tensor shexp_gate_inp;       /* (embd) */
	struct wk_tensor shexp_gate, shexp_up; /* (n_ff_shexp, embd) */
	struct wk_tensor shexp_down;           /* (embd, n_ff_shexp) */
	/* bert: biases of the output and FFN projections, and the LayerNorms
	 * (weight, bias) after attention and after the FFN; w_up / w_down are
	 * the FFN (GELU, no gate) */
	struct wk_tensor bo, b_up, b_down;
	struct wk_tensor ln_attn, ln_attn_b, ln_out, ln_out_b;
};

struct wk_mcfg {
	const char *arch_name;        /* "llama", "qwen2" or "qwen3" (static) */
	struct wk_hparams hp;

	int tied_embeddings;          /* output.weight absent: output = token_embd */
	int has_qkv_bias;             /* qwen2 */
	int has_qk_norm;              /* qwen3 */
	int fused_qkv;                /* phi3: attn_qkv.weight split into wq, wk, wv views */
	int fused_gate_up;            /* phi3: ffn_up.weight [embd, 2 ff], gate rows first */
	/* phi3 LongRoPE: per-dimension divisors for a served context above
	 * rope_orig_ctx (long) and up to it (short); NULL when absent.
	 * hp.rope_freqs is short until the model picks (wk_model_load) */
	const float *rope_long, *rope_short;

	/* the weights, viewed as matrices over the mapped file: the one
	 * description struct wk_model and the backends use */
	struct wk_tensor tok_embd;    /* (vocab, embd): row t = embedding of token t */
	struct wk_tensor output_norm; /* (embd) F32 */
	struct wk_tensor output;      /* (vocab, embd); = tok_embd when tied */
	struct wk_layer *layers;      /* [hp.n_layer] */
	/* bert: token-type and position embeddings, the LayerNorm of the
	 * embeddings (else data NULL); no output_norm / output */
	struct wk_tensor tok_types, pos_embd, embd_norm, embd_norm_b;

	uint64_t n_params;            /* elements of all tensors in the file */
	uint64_t weight_bytes;        /* bytes of all tensor data in the file */
	uint64_t kv_bytes_per_token;  /* F16 K and V over all layers */
	/* what one token reads: every tensor but the unchosen experts
	 * (= weight_bytes for a dense model), and the parameters so counted */
	uint64_t active_weight_bytes;
	uint64_t n_params_active;

	int has_chat_template;
	struct wk_gguf_str chat_template; /* tokenizer.chat_template, len 0 if absent */
	struct wk_gguf_str tokenizer_model; /* tokenizer.ggml.model, len 0 if absent */
};

/*
 * Reads and validates the configuration.  On failure writes a message
 * naming the key or tensor with what was expected and found ("tensor
 * 'blk.0.attn_k.weight': expected shape [256, 128], found [256, 256]";
 * "unsupported architecture 'gemma2' (supported: llama, qwen2)").
 * CM_EUNSUPPORTED for an unsupported architecture, CM_EFORMAT otherwise.
 */
enum cm_status wk_mcfg_load(const struct wk_gguf *g, struct wk_mcfg **out,
			    char *err, size_t err_len) CM_WUR;
void wk_mcfg_free(struct wk_mcfg *c);

/*
 * KV cache bytes per token: n_layers * n_kv_heads * (head_dim_k +
 * head_dim_v) * bytes_per_elem (2 for F16).  The Llama-3.1-8B shape (32
 * layers, 8 KV heads, head dim 128) gives 131072.  0 on overflow.
 */
uint64_t wk_mcfg_kv_bytes(uint32_t n_layers, uint32_t n_kv_heads, uint32_t head_dim_k,
			  uint32_t head_dim_v, uint32_t bytes_per_elem);

#endif
