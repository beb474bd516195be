/*
 * wire.c - the primitives every proto message is written with and read
 * from (see proto/internal.h): the sticky-status writer, the sticky-error
 * reader over one payload, and the scratch that decoded arrays live in.
 * Owns nothing; pure functions, any thread.
 */
#include "proto/internal.h"

#include <string.h>

#include "common/utf8.h"

/* ==== writer =========================================================== */


void proto_wr_bytes(struct proto_wr *w, const void *p, size_t n)
{
	if (w->st != CM_OK || n == 0)
		return;
	if (n > w->limit - cm_buf_len(w->b)) {
		w->st = CM_ELIMIT;
		return;
	}
	w->st = cm_buf_append(w->b, p, n);
}

void proto_wr_u8(struct proto_wr *w, uint8_t v)
{
	proto_wr_bytes(w, &v, 1);
}

void proto_wr_u16(struct proto_wr *w, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	proto_wr_bytes(w, p, 2);
}

void proto_wr_u32(struct proto_wr *w, uint32_t v)
{
	uint8_t p[4];

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	proto_wr_bytes(w, p, 4);
}

void proto_wr_u64(struct proto_wr *w, uint64_t v)
{
	uint8_t p[8];

	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	proto_wr_bytes(w, p, 8);
}

void proto_wr_i64(struct proto_wr *w, int64_t v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	proto_wr_u64(w, u);
}

void proto_wr_f32(struct proto_wr *w, float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	proto_wr_u32(w, u);
}

void proto_wr_digest(struct proto_wr *w, const uint8_t d[PROTO_DIGEST_LEN])
{
	proto_wr_bytes(w, d, PROTO_DIGEST_LEN);
}

/* str: u32 length + bytes; refuses a NULL pointer with a length and bad UTF-8. */
void proto_wr_str(struct proto_wr *w, struct proto_str s)
{
	const char *p = s.ptr ? s.ptr : "";

	if (w->st != CM_OK)
		return;
	if ((s.len && !s.ptr) || !cm_utf8_valid(p, s.len)) {
		w->st = CM_EINVAL;
		return;
	}
	proto_wr_u32(w, s.len);
	proto_wr_bytes(w, p, s.len);
}

/* blob: u32 length + raw bytes (a token's piece need not be UTF-8). */
void proto_wr_blob(struct proto_wr *w, struct proto_str s)
{
	if (w->st == CM_OK && s.len && !s.ptr)
		w->st = CM_EINVAL;
	proto_wr_u32(w, s.len);
	proto_wr_bytes(w, s.ptr, s.len);
}

/* ==== reader =========================================================== */


const uint8_t *proto_rd_take(struct proto_rd *r, size_t n)
{
	const uint8_t *q;

	if (r->err != PROTO_ERR_NONE)
		return NULL;
	if (n > r->left) {
		r->err = PROTO_ERR_FIELD_OVERRUN;
		return NULL;
	}
	q = r->p;
	r->p += n;
	r->left -= n;
	return q;
}

uint8_t proto_rd_u8(struct proto_rd *r)
{
	const uint8_t *q = proto_rd_take(r, 1);

	return q ? q[0] : 0;
}

uint16_t proto_rd_u16(struct proto_rd *r)
{
	const uint8_t *q = proto_rd_take(r, 2);

	return q ? cm_le16(q) : 0;
}

uint32_t proto_rd_u32(struct proto_rd *r)
{
	const uint8_t *q = proto_rd_take(r, 4);

	return q ? cm_le32(q) : 0;
}

uint64_t proto_rd_u64(struct proto_rd *r)
{
	const uint8_t *q = proto_rd_take(r, 8);

	return q ? cm_le64(q) : 0;
}

int64_t proto_rd_i64(struct proto_rd *r)
{
	uint64_t u = proto_rd_u64(r);
	int64_t v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

float proto_rd_f32(struct proto_rd *r)
{
	uint32_t u = proto_rd_u32(r);
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

void proto_rd_digest(struct proto_rd *r, uint8_t out[PROTO_DIGEST_LEN])
{
	const uint8_t *q = proto_rd_take(r, PROTO_DIGEST_LEN);

	if (q)
		memcpy(out, q, PROTO_DIGEST_LEN);
	else
		memset(out, 0, PROTO_DIGEST_LEN);
}

/* str: borrowed from the frame; an empty string points to a "". */
void proto_rd_str(struct proto_rd *r, struct proto_str *s)
{
	uint32_t n = proto_rd_u32(r);
	const uint8_t *q = proto_rd_take(r, n);

	s->ptr = "";
	s->len = 0;
	if (!q)
		return;
	if (!cm_utf8_valid(q, n)) {
		r->err = PROTO_ERR_UTF8;
		return;
	}
	if (n) {
		s->ptr = (const char *)q;
		s->len = n;
	}
}

void proto_rd_blob(struct proto_rd *r, struct proto_str *s)
{
	uint32_t n = proto_rd_u32(r);
	const uint8_t *q = proto_rd_take(r, n);

	s->ptr = "";
	s->len = 0;
	if (q && n) {
		s->ptr = (const char *)q;
		s->len = n;
	}
}

/*
 * list count: refused when count x min_elem (the smallest encoding of one
 * element) exceeds the bytes left, then when above `limit`.
 */
uint32_t proto_rd_count(struct proto_rd *r, size_t min_elem, uint32_t limit)
{
	uint32_t n = proto_rd_u32(r);

	if (r->err != PROTO_ERR_NONE)
		return 0;
	if ((uint64_t)n * min_elem > r->left) {
		r->err = PROTO_ERR_COUNT_OVERRUN;
		return 0;
	}
	if (n > limit) {
		r->err = PROTO_ERR_COUNT_LIMIT;
		return 0;
	}
	return n;
}


/*
 * Appends `bytes` zeroed bytes to scratch at an offset aligned for any
 * struct; returns the offset (pointers are formed only once all arrays of a
 * message are allocated, since a later append may move the buffer).
 */
enum cm_status proto_scratch_alloc(struct cm_buf *s, size_t bytes, size_t *off)
{
	size_t pad = (PROTO_SCRATCH_ALIGN - cm_buf_len(s) % PROTO_SCRATCH_ALIGN) % PROTO_SCRATCH_ALIGN;
	enum cm_status st = cm_buf_reserve(s, pad + bytes);

	if (st != CM_OK)
		return st;
	memset(cm_buf_tail(s), 0, pad + bytes);
	*off = cm_buf_len(s) + pad;
	cm_buf_commit(s, pad + bytes);
	return CM_OK;
}

