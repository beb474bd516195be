/*
 * embed.c - the EMBED and EMBEDDING messages (version 6): their payload
 * layouts, encoders, decoders and value checks.  codec.c calls these from
 * its per-type switches; the primitives are wire.c's.
 *
 * Owns nothing: decoded arrays (inputs, token ids, vector values) are
 * copied into the caller's scratch, aligned, since the frame's bytes are
 * little-endian and unaligned.
 */
#include "proto/internal.h"

#include <math.h>
#include <string.h>

/* ==== EMBED ============================================================
 * str tenant_id, str key_id, str model, u8 klass, u32 dimensions,
 * list<input> (u32 n_inputs + per input: u8 kind, str text,
 *              list<u32> tokens; min 9 bytes each)
 */
void proto_enc_embed(struct proto_wr *w, const struct proto_embed *e)
{
	if (e->n_inputs && !e->inputs && w->st == CM_OK)
		w->st = CM_EINVAL;
	proto_wr_str(w, e->tenant_id);
	proto_wr_str(w, e->key_id);
	proto_wr_str(w, e->model);
	proto_wr_u8(w, e->klass);
	proto_wr_u32(w, e->dimensions);
	proto_wr_u32(w, e->n_inputs);
	for (uint32_t i = 0; i < e->n_inputs && w->st == CM_OK; i++) {
		const struct proto_embed_input *in = &e->inputs[i];

		if (in->n_tokens && !in->tokens && w->st == CM_OK)
			w->st = CM_EINVAL;
		proto_wr_u8(w, in->kind);
		proto_wr_str(w, in->text);
		proto_wr_u32(w, in->n_tokens);
		for (uint32_t t = 0; t < in->n_tokens && w->st == CM_OK; t++)
			proto_wr_u32(w, in->tokens[t]);
	}
}

enum cm_status proto_dec_embed(struct proto_rd *r, struct proto_embed *e,
			       struct cm_buf *scratch)
{
	size_t in_off = 0, *tok_off = NULL;
	struct proto_embed_input *in;
	enum cm_status st;

	proto_rd_str(r, &e->tenant_id);
	proto_rd_str(r, &e->key_id);
	proto_rd_str(r, &e->model);
	e->klass = proto_rd_u8(r);
	e->dimensions = proto_rd_u32(r);
	e->n_inputs = proto_rd_count(r, 9, CM_LIM_PROTO_EMBED_INPUTS_HARD);
	if (r->err != PROTO_ERR_NONE || e->n_inputs == 0)
		return CM_OK;
	/* the inputs, then each one's ids: offsets first, pointers once the
	 * scratch no longer moves */
	st = proto_scratch_alloc(scratch, e->n_inputs * (sizeof(*in) + sizeof(size_t)), &in_off);
	if (st != CM_OK)
		return st;
	for (uint32_t i = 0; i < e->n_inputs && r->err == PROTO_ERR_NONE; i++) {
		struct proto_embed_input tmp = { 0 };
		size_t off = 0;

		tmp.kind = proto_rd_u8(r);
		proto_rd_str(r, &tmp.text);
		tmp.n_tokens = proto_rd_count(r, 4, UINT32_MAX);
		if (r->err != PROTO_ERR_NONE)
			break;
		if (tmp.n_tokens) {
			uint32_t *ids;

			st = proto_scratch_alloc(scratch, tmp.n_tokens * sizeof(uint32_t), &off);
			if (st != CM_OK)
				return st;
			ids = (uint32_t *)(cm_buf_data(scratch) + off);
			for (uint32_t t = 0; t < tmp.n_tokens; t++)
				ids[t] = proto_rd_u32(r);
		}
		in = (struct proto_embed_input *)(cm_buf_data(scratch) + in_off) + i;
		*in = tmp;
		tok_off = (size_t *)(cm_buf_data(scratch) + in_off + e->n_inputs * sizeof(*in));
		tok_off[i] = off;
	}
	in = (struct proto_embed_input *)(cm_buf_data(scratch) + in_off);
	tok_off = (size_t *)(cm_buf_data(scratch) + in_off + e->n_inputs * sizeof(*in));
	for (uint32_t i = 0; i < e->n_inputs && r->err == PROTO_ERR_NONE; i++)
		in[i].tokens = in[i].n_tokens ? (const uint32_t *)(cm_buf_data(scratch) + tok_off[i])
					      : NULL;
	e->inputs = in;
	return CM_OK;
}

enum proto_error proto_embed_check(const struct proto_embed *e)
{
	if (e->n_inputs > CM_LIM_PROTO_EMBED_INPUTS_HARD)
		return PROTO_ERR_COUNT_LIMIT;
	if (e->klass > PROTO_CLASS_BATCH || e->n_inputs == 0 ||
	    e->dimensions > CM_LIM_PROTO_EMBED_DIM_HARD)
		return PROTO_ERR_VALUE;
	for (uint32_t i = 0; e->inputs && i < e->n_inputs; i++) {
		const struct proto_embed_input *in = &e->inputs[i];

		/* a text input has no ids; a token input ids and no text */
		if (in->kind > PROTO_INPUT_TOKENS ||
		    (in->kind == PROTO_INPUT_TEXT && in->n_tokens) ||
		    (in->kind == PROTO_INPUT_TOKENS && (in->n_tokens == 0 || in->text.len)))
			return PROTO_ERR_VALUE;
	}
	return PROTO_ERR_NONE;
}

/* ==== EMBEDDING ========================================================
 * u32 index, u32 n_tokens, u8 truncated, list<f32> values
 */
void proto_enc_embedding(struct proto_wr *w, const struct proto_embedding *e)
{
	if (e->n_values && !e->values && w->st == CM_OK)
		w->st = CM_EINVAL;
	proto_wr_u32(w, e->index);
	proto_wr_u32(w, e->n_tokens);
	proto_wr_u8(w, e->truncated);
	proto_wr_u32(w, e->n_values);
	for (uint32_t i = 0; i < e->n_values && w->st == CM_OK; i++)
		proto_wr_f32(w, e->values[i]);
}

enum cm_status proto_dec_embedding(struct proto_rd *r, struct proto_embedding *e,
				   struct cm_buf *scratch)
{
	size_t off;
	float *v;
	enum cm_status st;

	e->index = proto_rd_u32(r);
	e->n_tokens = proto_rd_u32(r);
	e->truncated = proto_rd_u8(r);
	e->n_values = proto_rd_count(r, 4, CM_LIM_PROTO_EMBED_DIM_HARD);
	if (r->err != PROTO_ERR_NONE || e->n_values == 0)
		return CM_OK;
	st = proto_scratch_alloc(scratch, e->n_values * sizeof(float), &off);
	if (st != CM_OK)
		return st;
	v = (float *)(cm_buf_data(scratch) + off);
	for (uint32_t i = 0; i < e->n_values; i++)
		v[i] = proto_rd_f32(r);
	e->values = v;
	return CM_OK;
}

enum proto_error proto_embedding_check(const struct proto_embedding *e)
{
	if (e->n_values > CM_LIM_PROTO_EMBED_DIM_HARD)
		return PROTO_ERR_COUNT_LIMIT;
	if (e->n_values == 0 || e->truncated > 1)
		return PROTO_ERR_VALUE;
	for (uint32_t i = 0; e->values && i < e->n_values; i++)
		if (!isfinite(e->values[i]))
			return PROTO_ERR_VALUE;
	return PROTO_ERR_NONE;
}
