/*
 * batch.c - the checks of a forward step's batch that every backend makes
 * (see backend.h, wk_batch_check).  Pure; any thread.
 */
#include "worker/engine/backend.h"

enum cm_status wk_batch_check(const struct wk_batch *b, uint32_t n_vocab,
			      uint32_t block_tokens, uint32_t n_blocks, uint32_t *max_pos)
{
	uint32_t mp = 0;

	for (uint32_t t = 0; t < b->n_tokens; t++) {
		const struct wk_batch_seq *s;

		if (b->tokens[t] < 0 || (uint32_t)b->tokens[t] >= n_vocab || b->seq[t] >= b->n_seqs)
			return CM_EINVAL;
		s = &b->seqs[b->seq[t]];
		if (b->pos[t] / block_tokens >= s->n_blocks)
			return CM_EINVAL;
		for (uint32_t i = 0; i <= b->pos[t] / block_tokens; i++)
			if (s->blocks[i] >= n_blocks)
				return CM_EINVAL;
		if (b->pos[t] > mp)
			mp = b->pos[t];
	}
	for (uint32_t o = 0; o < b->n_out; o++)
		if (b->out[o] >= b->n_tokens)
			return CM_EINVAL;
	if (max_pos)
		*max_pos = mp;
	return CM_OK;
}
