/*
 * buf.h - growable byte buffer with a hard cap set at creation.
 *
 * Every buffer that grows with peer or client input is a cm_buf with a cap:
 * an append that would exceed the cap fails with CM_ELIMIT and leaves the
 * buffer unchanged.  The buffer keeps a read offset so that it can be used
 * as a FIFO (append at the end, consume from the front) without memmove on
 * every read; data is compacted lazily when space is needed.
 * Contents are always followed by a NUL byte (not counted in len) so that
 * text can be used as a C string.
 *
 * Layout: [consumed | data (len) | spare], cap bounds len.
 */
#ifndef SLUICE_COMMON_BUF_H
#define SLUICE_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct cm_buf {
	uint8_t *mem;   /* allocation, NULL until first append */
	size_t off;     /* bytes already consumed at the front */
	size_t len;     /* bytes of live data after off */
	size_t alloc;   /* bytes allocated */
	size_t cap;     /* maximum len; appends beyond fail with CM_ELIMIT */
};

/* Initialises caller storage; allocates nothing. */
void cm_buf_init(struct cm_buf *b, size_t cap);
void cm_buf_deinit(struct cm_buf *b);

static inline uint8_t *cm_buf_data(const struct cm_buf *b)
{
	return b->mem ? b->mem + b->off : (uint8_t *)"";
}

static inline size_t cm_buf_len(const struct cm_buf *b)
{
	return b->len;
}

/* Room before the cap. */
static inline size_t cm_buf_room(const struct cm_buf *b)
{
	return b->cap - b->len;
}

/* Makes room for `n` more bytes; CM_ELIMIT past the cap, CM_ENOMEM. */
enum cm_status cm_buf_reserve(struct cm_buf *b, size_t n) CM_WUR;
/* Pointer to the spare space after a successful reserve. */
static inline uint8_t *cm_buf_tail(struct cm_buf *b)
{
	return b->mem + b->off + b->len;
}
/* Declares `n` bytes written at cm_buf_tail(); n <= reserved. */
void cm_buf_commit(struct cm_buf *b, size_t n);

enum cm_status cm_buf_append(struct cm_buf *b, const void *p, size_t n) CM_WUR;
enum cm_status cm_buf_append_str(struct cm_buf *b, const char *s) CM_WUR;
enum cm_status cm_buf_printf(struct cm_buf *b, const char *fmt, ...)
	CM_PRINTF(2, 3) CM_WUR;
enum cm_status cm_buf_vprintf(struct cm_buf *b, const char *fmt, va_list ap) CM_WUR;

/* Little-endian fixed-width appends (the wire format of proto/). */
enum cm_status cm_buf_put_u8(struct cm_buf *b, uint8_t v) CM_WUR;
enum cm_status cm_buf_put_u16(struct cm_buf *b, uint16_t v) CM_WUR;
enum cm_status cm_buf_put_u32(struct cm_buf *b, uint32_t v) CM_WUR;
enum cm_status cm_buf_put_u64(struct cm_buf *b, uint64_t v) CM_WUR;

/* Drops `n` bytes from the front (n <= len). */
void cm_buf_consume(struct cm_buf *b, size_t n);
/* Empties the buffer, keeping the allocation. */
void cm_buf_reset(struct cm_buf *b);
/* Truncates the live data to `n` bytes (n <= len). */
void cm_buf_truncate(struct cm_buf *b, size_t n);
/*
 * Hands the data over as a NUL-terminated heap string the caller frees with
 * cm_free(); the buffer is left empty.  Returns NULL when empty-and-
 * unallocated allocation fails.
 */
char *cm_buf_take(struct cm_buf *b, size_t *len_out);

/* Little-endian loads, used by decoders over validated ranges. */
static inline uint16_t cm_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t cm_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
	       ((uint32_t)p[3] << 24);
}

static inline uint64_t cm_le64(const uint8_t *p)
{
	return (uint64_t)cm_le32(p) | ((uint64_t)cm_le32(p + 4) << 32);
}

#endif
