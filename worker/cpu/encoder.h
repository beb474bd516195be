/*
 * encoder.h - the encoder forward pass on the CPU (bert: all-MiniLM, bge,
 * e5): one input's embedding vector.
 *
 *   x = token_embd[t] + token_types[0] + position_embd[pos], LayerNorm
 *   each layer: a = softmax(q k^T / sqrt(head_dim)) v over every position
 *               (bidirectional), x = LayerNorm(x + a Wo^T + bo)
 *               x = LayerNorm(x + gelu(x Wup^T + bup) Wdown^T + bdown)
 *   pooled over the positions as hp.pooling says (mean, [CLS], last),
 *   then divided by its L2 norm.
 * Token type 0 ("sentence A") for every token, as llama.cpp.  GELU in
 * its tanh form (llama.cpp's ggml_gelu).
 *
 * Batch invariance: an input's vector depends only on its tokens, never
 * on the other inputs of a batch: the inputs' rows are stacked for the
 * projections (row-invariant, worker/cpu/matmul.h) and attention runs per
 * (input, head) task over that input's rows only.
 *
 * Threads: one call at a time per struct wk_cpu_mm (its scratch); the
 * model is read-only.  Scratch is allocated per call.
 */
#ifndef SLUICE_WORKER_CPU_ENCODER_H
#define SLUICE_WORKER_CPU_ENCODER_H

#include <stdint.h>

#include "common/status.h"
#include "worker/cpu/matmul.h"

struct wk_model;

/*
 * out[n_embd] = the embedding of tokens[0..n).  CM_EINVAL for a model
 * that is no encoder, n == 0, n above the model's context (positions) or a
 * token id outside the vocabulary; CM_ENOMEM; the matmul's errors.
 */
enum cm_status wk_cpu_encode(struct wk_cpu_mm *mm, const struct wk_model *m,
			     const int32_t *tokens, uint32_t n, float *out) CM_WUR;

struct wk_hparams;

/*
 * out[n_embd] = the final states x[0..n) (rows of n_embd) pooled as
 * hp->pooling says (mean; [CLS]: the first; last) and divided by the L2
 * norm (in double).  Shared by the encoder and the decoder embedders
 * (worker/cpu/backend.c).
 */
void wk_cpu_pool(const struct wk_hparams *hp, const float *x, uint32_t n, float *out);

/*
 * n_in inputs in one pass: input i is lens[i] tokens of `tokens` (the
 * inputs one after another), its vector out[i * n_embd ..].  Each vector
 * is bit for bit what wk_cpu_encode gives for that input alone.  CM_EINVAL
 * as wk_cpu_encode for any input, or n_in == 0, or n_in x heads above
 * WK_POOL_MAX_TASKS.
 */
enum cm_status wk_cpu_encode_batch(struct wk_cpu_mm *mm, const struct wk_model *m,
				   uint32_t n_in, const int32_t *tokens, const uint32_t *lens,
				   float *out) CM_WUR;

#endif
