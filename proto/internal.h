/*
 * internal.h - what codec.c shares with decoder.c inside proto/ only.
 *
 * The wire primitives and the EMBED/EMBEDDING codec live in their own
 * files (wire.c, embed.c) and are declared here.  The frame header check is split out so that the incremental decoder can
 * refuse a bad header (magic, version, type, flags, length) as soon as its
 * 24 bytes have arrived, before waiting for a payload that may never come.
 */
#ifndef SLUICE_PROTO_INTERNAL_H
#define SLUICE_PROTO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#include "common/limits.h"
#include "proto/proto.h"

/* The header fields, host order. */
struct proto_header {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t flags;
	uint32_t payload_len;
	uint64_t request_id;
};

/*
 * Parses and checks the PROTO_HEADER_LEN bytes at `h`, in this order:
 * magic, version, type, flags allowed for the type, payload_len <=
 * max_frame.  Returns the first failure or PROTO_ERR_NONE; *out is filled
 * in every case.
 */
enum proto_error proto_header_parse(const uint8_t *h, uint32_t max_frame,
				    struct proto_header *out);

/*
 * Bytes of scratch that the largest legal frame of any type needs for its
 * arrays (with alignment padding): the decoder's scratch cap.
 */
#define PROTO_SCRATCH_CAP                                                    \
	(CM_LIM_PROTO_STOP_STRINGS_HARD * sizeof(struct proto_str) +          \
	 CM_LIM_PROTO_MESSAGES_HARD * sizeof(struct proto_message) +          \
	 CM_LIM_PROTO_TOKENS_PER_FRAME_HARD * sizeof(struct proto_token) +    \
	 CM_LIM_PROTO_EMBED_INPUTS_HARD * sizeof(struct proto_embed_input) +  \
	 CM_LIM_PROTO_FRAME_BYTES_HARD + 64)

/* ==== wire primitives (wire.c) ========================================= */

/*
 * Sticky-status writer: after the first failure every write is a no-op, so
 * the encoders write their fields straight through and check once.
 * `limit` is the buffer length the frame may not exceed (max_frame).
 */
struct proto_wr {
	struct cm_buf *b;
	size_t limit;
	enum cm_status st;
};
/*
 * Sticky-error reader over one payload: the first failure is kept in err,
 * later reads return zeros, so the decoders read their fields straight
 * through and check once (and before every allocation).
 */
struct proto_rd {
	const uint8_t *p;
	size_t left;
	enum proto_error err;
};

void proto_wr_bytes(struct proto_wr *w, const void *p, size_t n);
void proto_wr_u8(struct proto_wr *w, uint8_t v);
void proto_wr_u16(struct proto_wr *w, uint16_t v);
void proto_wr_u32(struct proto_wr *w, uint32_t v);
void proto_wr_u64(struct proto_wr *w, uint64_t v);
void proto_wr_i64(struct proto_wr *w, int64_t v);
void proto_wr_f32(struct proto_wr *w, float f);
void proto_wr_digest(struct proto_wr *w, const uint8_t d[PROTO_DIGEST_LEN]);
void proto_wr_str(struct proto_wr *w, struct proto_str s);
void proto_wr_blob(struct proto_wr *w, struct proto_str s);
const uint8_t *proto_rd_take(struct proto_rd *r, size_t n);
uint8_t proto_rd_u8(struct proto_rd *r);
uint16_t proto_rd_u16(struct proto_rd *r);
uint32_t proto_rd_u32(struct proto_rd *r);
uint64_t proto_rd_u64(struct proto_rd *r);
int64_t proto_rd_i64(struct proto_rd *r);
float proto_rd_f32(struct proto_rd *r);
void proto_rd_digest(struct proto_rd *r, uint8_t out[PROTO_DIGEST_LEN]);
void proto_rd_str(struct proto_rd *r, struct proto_str *s);
void proto_rd_blob(struct proto_rd *r, struct proto_str *s);
uint32_t proto_rd_count(struct proto_rd *r, size_t min_elem, uint32_t limit);
enum cm_status proto_scratch_alloc(struct cm_buf *s, size_t bytes, size_t *off);

/* Alignment of the arrays proto_scratch_alloc places. */
#define PROTO_SCRATCH_ALIGN 16

/* ==== EMBED and EMBEDDING (embed.c) ==================================== */

void proto_enc_embed(struct proto_wr *w, const struct proto_embed *e);
enum cm_status proto_dec_embed(struct proto_rd *r, struct proto_embed *e,
			       struct cm_buf *scratch) CM_WUR;
void proto_enc_embedding(struct proto_wr *w, const struct proto_embedding *e);
enum cm_status proto_dec_embedding(struct proto_rd *r, struct proto_embedding *e,
				   struct cm_buf *scratch) CM_WUR;
/* Domain checks of a whole EMBED / EMBEDDING (counts, kinds, NaN). */
enum proto_error proto_embed_check(const struct proto_embed *e);
enum proto_error proto_embedding_check(const struct proto_embedding *e);

#endif
