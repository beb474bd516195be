/*
 * fuzz_proto.c - libFuzzer target for the proto decoder and encoder.
 *
 * Input layout (so that the fuzzer controls how the stream is cut):
 *   byte 0        bits 0-3: k, the number of piece-size bytes that follow;
 *                 bits 4-5: the decoder's max_frame (65536, 4096, 256, or
 *                 CM_LIM_PROTO_FRAME_BYTES_HARD);
 *   bytes 1..k    piece sizes (byte + 1), used in turn, cycling;
 *                 k = 0 feeds max_frame + header bytes at a time (the
 *                 largest read the decoder takes after a drain);
 *   the rest      the byte stream, as read from a socket.
 *
 * Checks, beyond "no crash, no out-of-bounds read, no leak" (ASan/UBSan):
 *  1. every message the incremental decoder returns re-encodes (encoder and
 *     decoder accept the same messages), and decode(encode(msg)) == msg
 *     field by field;
 *  2. the re-encoded bytes equal the frame's bytes in the input (the
 *     encoding is canonical);
 *  3. encoding it into a buffer one byte too small (or with a payload bound
 *     one byte short) fails with CM_ELIMIT and leaves the buffer as it was;
 *  4. the incremental decoder fed in pieces and proto_decode_frame() walking
 *     the stream frame by frame agree on the frames and on the final error.
 * A failed check aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "proto/proto.h"
#include "tests/proto/msg_eq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SCRATCH_CAP (4u << 20)

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_proto: check failed: %s\n", what);
		abort();
	}
}

static const uint32_t max_frames[4] = {
	65536, 4096, 256, CM_LIM_PROTO_FRAME_BYTES_HARD,
};

struct run {
	uint32_t max_frame;
	struct cm_buf reenc;   /* every decoded message re-encoded, in order */
	struct cm_buf scratch; /* for decode(encode(msg)) */
	size_t frames;
	enum proto_error err;  /* PROTO_ERR_NONE: stream ended cleanly or mid-frame */
};

/*
 * The encoder's refusals: a frame of `len` bytes does not fit a buffer
 * capped at len - 1 (nor a payload bound one byte short), and a refused
 * encode leaves the buffer as it was.
 */
static void check_encode_limits(struct run *r, const struct proto_msg *m,
				size_t len)
{
	struct cm_buf b;
	enum cm_status st;

	cm_buf_init(&b, 3 + len - 1);
	check(cm_buf_append(&b, "pre", 3) == CM_OK, "prefix fits");
	st = proto_encode(&b, m, r->max_frame);
	check(st == CM_ELIMIT, "a frame over the buffer's cap is refused");
	check(cm_buf_len(&b) == 3 && memcmp(cm_buf_data(&b), "pre", 3) == 0,
	      "a refused encode leaves the buffer unchanged");
	if (len > PROTO_HEADER_LEN) {
		cm_buf_deinit(&b);
		cm_buf_init(&b, len);
		st = proto_encode(&b, m, (uint32_t)(len - PROTO_HEADER_LEN - 1));
		check(st == CM_ELIMIT && cm_buf_len(&b) == 0,
		      "a payload over max_frame is refused");
	}
	cm_buf_deinit(&b);
}

/* Checks 1 for one message and appends its encoding to r->reenc. */
static void check_message(struct run *r, const struct proto_msg *m)
{
	size_t start = cm_buf_len(&r->reenc);
	struct proto_msg back;
	enum proto_error err;
	enum cm_status st;
	const char *diff;

	st = proto_encode(&r->reenc, m, r->max_frame);
	check(st == CM_OK, "a decoded message re-encodes");
	st = proto_decode_frame(cm_buf_data(&r->reenc) + start,
				cm_buf_len(&r->reenc) - start, r->max_frame, &back,
				&r->scratch, &err);
	check(st == CM_OK && err == PROTO_ERR_NONE, "decode(encode(msg)) succeeds");
	diff = tp_msg_diff(m, &back);
	if (diff)
		fprintf(stderr, "fuzz_proto: field %s differs\n", diff);
	check(diff == NULL, "decode(encode(msg)) == msg");
	check_encode_limits(r, m, cm_buf_len(&r->reenc) - start);
	r->frames++;
}

/* Drains the decoder; returns 0 once it has failed. */
static int drain(struct run *r, struct proto_decoder *d)
{
	struct proto_msg m;
	enum cm_status st;

	while ((st = proto_decoder_next(d, &m)) == CM_OK)
		check_message(r, &m);
	if (st == CM_EPROTO) {
		r->err = proto_decoder_error(d);
		check(r->err != PROTO_ERR_NONE, "CM_EPROTO comes with an error");
		return 0;
	}
	check(st == CM_AGAIN, "next() answers OK, AGAIN or EPROTO");
	return 1;
}

/* The incremental decoder, fed in the pieces the input asks for. */
static void run_incremental(struct run *r, const uint8_t *sizes, size_t k,
			    const uint8_t *s, size_t len)
{
	struct proto_decoder *d = proto_decoder_new(r->max_frame);
	size_t off = 0, i = 0;

	check(d != NULL, "decoder allocated");
	while (off < len) {
		/* k = 0: reads of the largest size the decoder promises to take */
		size_t piece = k ? (size_t)sizes[i++ % k] + 1
				 : (size_t)r->max_frame + PROTO_HEADER_LEN;
		enum cm_status st;

		if (piece > len - off)
			piece = len - off;
		st = proto_decoder_feed(d, s + off, piece);
		check(st == CM_OK, "a feed after a drain is accepted");
		off += piece;
		if (!drain(r, d))
			break;
	}
	if (len == 0)
		(void)drain(r, d);
	proto_decoder_free(d);
}

/*
 * The same stream walked with proto_decode_frame(); compares frame i's
 * bytes with the i-th re-encoded message of the incremental run (check 2)
 * and the final errors (check 4).
 */
static void run_oneshot(const struct run *a, const uint8_t *s, size_t len)
{
	struct cm_buf scratch;
	struct proto_msg m;
	const uint8_t *re = cm_buf_data(&a->reenc);
	size_t re_left = cm_buf_len(&a->reenc);
	size_t off = 0, frames = 0;
	enum proto_error err = PROTO_ERR_NONE;

	cm_buf_init(&scratch, SCRATCH_CAP);
	while (len - off >= PROTO_HEADER_LEN) {
		uint64_t flen = PROTO_HEADER_LEN + (uint64_t)cm_le32(s + off + 12);
		size_t avail = len - off;
		size_t n = flen < avail ? (size_t)flen : avail;
		enum cm_status st;

		st = proto_decode_frame(s + off, n, a->max_frame, &m, &scratch, &err);
		if (st == CM_EPROTO && flen > avail &&
		    err == PROTO_ERR_FIELD_OVERRUN) {
			err = PROTO_ERR_NONE; /* incomplete: the decoder waits */
			break;
		}
		if (st == CM_EPROTO)
			break;
		check(st == CM_OK, "decode_frame answers OK or EPROTO");
		check(flen <= re_left && memcmp(re, s + off, (size_t)flen) == 0,
		      "re-encoding reproduces the frame's bytes");
		re += flen;
		re_left -= (size_t)flen;
		off += (size_t)flen;
		frames++;
	}
	if (err != a->err)
		fprintf(stderr, "fuzz_proto: one-shot \"%s\", incremental \"%s\"\n",
			proto_error_str(err), proto_error_str(a->err));
	check(err == a->err, "both decoders end with the same error");
	check(frames == a->frames && re_left == 0,
	      "both decoders return the same frames");
	cm_buf_deinit(&scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run r;
	size_t k;

	if (size < 1)
		return 0;
	k = data[0] & 0x0F;
	if (size < 1 + k)
		return 0;
	memset(&r, 0, sizeof(r));
	r.max_frame = max_frames[(data[0] >> 4) & 3];
	cm_buf_init(&r.reenc, 4 * (size_t)CM_LIM_PROTO_FRAME_BYTES_HARD);
	cm_buf_init(&r.scratch, SCRATCH_CAP);
	run_incremental(&r, data + 1, k, data + 1 + k, size - 1 - k);
	run_oneshot(&r, data + 1 + k, size - 1 - k);
	cm_buf_deinit(&r.reenc);
	cm_buf_deinit(&r.scratch);
	return 0;
}
