/*
 * moe.h - the mixture-of-experts FFN of the CPU backend (qwen3moe, Mixtral):
 * routing, grouping a step's tokens by expert, each expert's SwiGLU over
 * its tokens at once, and the weighted sum back into each token's row.
 *
 * Routing (per token, from its own router logits only): softmax over the
 * n_expert logits, the top n_expert_used probabilities (ties: the lower
 * expert id first), renormalised to sum 1 when hp.expert_norm (Mixtral
 * and Qwen3-MoE), times hp.expert_scale.  qwen2moe then adds its shared
 * expert, gated per token by sigmoid(h . ffn_gate_inp_shexp).
 *
 * Batch invariance: each expert's matmuls run over the tokens routed to
 * it, and the matmul is row-invariant (worker/cpu/matmul.h), so a token's
 * expert outputs do not depend on which other tokens share the expert; a
 * token's output is the sum of its experts' weighted outputs added in
 * increasing expert id, starting from zero, whatever the batch.
 *
 * Weights are read in place from the mapping (wk_tensor_expert views):
 * a step reads only the experts some token chose.
 *
 * Ownership: struct wk_cpu_moe owns its scratch (grown to the largest
 * step); it borrows the matmul context.  One thread at a time.
 */
#ifndef SLUICE_WORKER_CPU_MOE_H
#define SLUICE_WORKER_CPU_MOE_H

#include <stdint.h>

#include "common/status.h"
#include "worker/cpu/matmul.h"
#include "worker/model/model_config.h"

struct wk_cpu_moe;

enum cm_status wk_cpu_moe_new(const struct wk_hparams *hp, struct wk_cpu_moe **out) CM_WUR;
void wk_cpu_moe_free(struct wk_cpu_moe *s);

/*
 * One token's routing: from logits[n_expert] (the router's output; left
 * unchanged), the n_expert_used chosen experts in increasing id order
 * (ids) and their weights (w).
 */
void wk_cpu_moe_route(const struct wk_hparams *hp, const float *logits, uint32_t *ids,
		      float *w);

/*
 * out (T, embd) = the experts' FFN of h (T, embd) for layer L.  out must
 * not overlap h.  ids (NULL: not wanted) receives each token's experts,
 * [T][n_expert_used].  Errors of the matmul (CM_ENOMEM, CM_EUNSUPPORTED)
 * are returned.
 */
enum cm_status wk_cpu_moe_ffn(struct wk_cpu_moe *s, struct wk_cpu_mm *mm,
			      const struct wk_layer *L, const float *h, uint32_t T,
			      float *out, uint32_t *ids) CM_WUR;

#endif
