/*
 * internal.h - what codec.c shares with decoder.c inside proto/ only.
 *
 * The frame header check is split out so that the incremental decoder can
 * refuse a bad header (magic, version, type, flags, length) as soon as its
 * 24 bytes have arrived, before waiting for a payload that may never come.
 */
#ifndef SLUICE_PROTO_INTERNAL_H
#define SLUICE_PROTO_INTERNAL_H

#include <stdint.h>

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
	 CM_LIM_PROTO_TOKENS_PER_FRAME_HARD * sizeof(struct proto_token) + 64)

#endif
