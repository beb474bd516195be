/*
 * decoder.c - incremental proto decoder: turns a byte stream read from a
 * socket, in pieces of any size, into validated messages.
 *
 * Owns three capped buffers:
 *   in       bytes fed and not yet returned as frames (FIFO),
 *            cap 2 x (max_frame + PROTO_HEADER_LEN);
 *   frame    a copy of the frame last returned, cap max_frame + header:
 *            the message borrows from it, so feeding more bytes (which may
 *            move `in`) never invalidates the message in hand;
 *   scratch  the arrays of the message last returned (PROTO_SCRATCH_CAP).
 * Single-threaded: one decoder per connection, used by its loop only.
 *
 * Invariants:
 *  - the header of the frame at the front of `in` is checked as soon as its
 *    24 bytes are there, so a bad magic, version, type, flag set or a length
 *    above max_frame is refused before any payload is waited for; no
 *    incomplete frame therefore ever holds more than max_frame + header
 *    bytes of `in`;
 *  - with the caller draining next() until CM_AGAIN after each feed of at
 *    most max_frame + header bytes, `in` never exceeds its cap;
 *  - once failed (CM_EPROTO) the decoder stays failed: feed and next keep
 *    answering CM_EPROTO and proto_decoder_error() keeps the first error.
 */
#include "proto/proto.h"

#include <string.h>

#include "common/alloc.h"
#include "common/limits.h"
#include "proto/internal.h"

/* Buffers that grew past this are released once empty (one big frame must
 * not pin megabytes for the life of a connection). */
#define PROTO_DECODER_KEEP_BYTES (64u * 1024)

struct proto_decoder {
	uint32_t max_frame;     /* largest accepted payload, bytes */
	struct cm_buf in;
	struct cm_buf frame;
	struct cm_buf scratch;
	enum proto_error err;   /* first error; PROTO_ERR_NONE while healthy */
};

struct proto_decoder *proto_decoder_new(uint32_t max_frame)
{
	struct proto_decoder *d;
	size_t frame_cap;

	if (max_frame > CM_LIM_PROTO_FRAME_BYTES_HARD)
		max_frame = CM_LIM_PROTO_FRAME_BYTES_HARD;
	d = cm_calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	frame_cap = (size_t)max_frame + PROTO_HEADER_LEN;
	d->max_frame = max_frame;
	cm_buf_init(&d->in, 2 * frame_cap);
	cm_buf_init(&d->frame, frame_cap);
	cm_buf_init(&d->scratch, PROTO_SCRATCH_CAP);
	d->err = PROTO_ERR_NONE;
	return d;
}

void proto_decoder_free(struct proto_decoder *d)
{
	if (!d)
		return;
	cm_buf_deinit(&d->in);
	cm_buf_deinit(&d->frame);
	cm_buf_deinit(&d->scratch);
	cm_free(d);
}

enum proto_error proto_decoder_error(const struct proto_decoder *d)
{
	return d->err;
}

/*
 * Appends `len` bytes.  CM_EPROTO once failed; CM_ELIMIT (nothing taken)
 * when the buffered bytes would exceed 2 x (max_frame + header), which a
 * caller that drains next() after each read never hits; CM_ENOMEM.
 */
enum cm_status proto_decoder_feed(struct proto_decoder *d, const void *data,
				  size_t len)
{
	if (d->err != PROTO_ERR_NONE)
		return CM_EPROTO;
	if (len == 0)
		return CM_OK;
	return cm_buf_append(&d->in, data, len);
}

static enum cm_status decoder_fail(struct proto_decoder *d, enum proto_error e)
{
	d->err = e;
	cm_buf_deinit(&d->in);
	cm_buf_deinit(&d->frame);
	cm_buf_deinit(&d->scratch);
	return CM_EPROTO;
}

static void decoder_shrink(struct cm_buf *b)
{
	if (cm_buf_len(b) == 0 && b->alloc > PROTO_DECODER_KEEP_BYTES)
		cm_buf_deinit(b);
}

enum cm_status proto_decoder_next(struct proto_decoder *d, struct proto_msg *msg)
{
	struct proto_header h;
	enum proto_error e;
	enum cm_status st;
	size_t flen;

	memset(msg, 0, sizeof(*msg));
	if (d->err != PROTO_ERR_NONE)
		return CM_EPROTO;
	/* the message returned last is released here */
	cm_buf_reset(&d->frame);
	cm_buf_reset(&d->scratch);
	decoder_shrink(&d->frame);
	decoder_shrink(&d->scratch);
	if (cm_buf_len(&d->in) < PROTO_HEADER_LEN)
		return CM_AGAIN;
	e = proto_header_parse(cm_buf_data(&d->in), d->max_frame, &h);
	if (e != PROTO_ERR_NONE)
		return decoder_fail(d, e);
	flen = PROTO_HEADER_LEN + (size_t)h.payload_len;
	if (cm_buf_len(&d->in) < flen)
		return CM_AGAIN;

	st = cm_buf_append(&d->frame, cm_buf_data(&d->in), flen);
	if (st != CM_OK)
		return st;
	st = proto_decode_frame(cm_buf_data(&d->frame), flen, d->max_frame, msg,
				&d->scratch, &e);
	if (st == CM_EPROTO)
		return decoder_fail(d, e);
	if (st != CM_OK)
		return st; /* CM_ENOMEM: nothing consumed, next() may retry */
	cm_buf_consume(&d->in, flen);
	decoder_shrink(&d->in);
	return CM_OK;
}
