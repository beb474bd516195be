/*
 * buf.c - capped growable byte buffer (see buf.h).
 */
#include "common/buf.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

void cm_buf_init(struct cm_buf *b, size_t cap)
{
	memset(b, 0, sizeof(*b));
	b->cap = cap;
}

void cm_buf_deinit(struct cm_buf *b)
{
	if (!b)
		return;
	cm_free(b->mem);
	b->mem = NULL;
	b->off = b->len = b->alloc = 0;
}

enum cm_status cm_buf_reserve(struct cm_buf *b, size_t n)
{
	size_t need, nalloc;
	uint8_t *m;

	if (n > b->cap - b->len)
		return CM_ELIMIT;
	need = b->len + n + 1; /* +1: trailing NUL */
	if (b->mem && b->off + need <= b->alloc)
		return CM_OK;
	if (b->mem && need <= b->alloc) {
		/* compact: move live data to the front */
		memmove(b->mem, b->mem + b->off, b->len);
		b->off = 0;
		b->mem[b->len] = '\0';
		return CM_OK;
	}
	nalloc = b->alloc ? b->alloc : 64;
	while (nalloc < need)
		nalloc = nalloc > SIZE_MAX / 2 ? need : nalloc * 2;
	if (nalloc > b->cap + 1 && need <= b->cap + 1)
		nalloc = b->cap + 1;
	if (b->off) {
		memmove(b->mem, b->mem + b->off, b->len);
		b->off = 0;
	}
	m = cm_realloc(b->mem, nalloc);
	if (!m)
		return CM_ENOMEM;
	b->mem = m;
	b->alloc = nalloc;
	b->mem[b->len] = '\0';
	return CM_OK;
}

void cm_buf_commit(struct cm_buf *b, size_t n)
{
	b->len += n;
	b->mem[b->off + b->len] = '\0';
}

enum cm_status cm_buf_append(struct cm_buf *b, const void *p, size_t n)
{
	enum cm_status st = cm_buf_reserve(b, n);

	if (st != CM_OK)
		return st;
	if (n)
		memcpy(cm_buf_tail(b), p, n);
	cm_buf_commit(b, n);
	return CM_OK;
}

enum cm_status cm_buf_append_str(struct cm_buf *b, const char *s)
{
	return cm_buf_append(b, s, strlen(s));
}

enum cm_status cm_buf_vprintf(struct cm_buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;
	enum cm_status st;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return CM_EINVAL;
	st = cm_buf_reserve(b, (size_t)n);
	if (st != CM_OK)
		return st;
	vsnprintf((char *)cm_buf_tail(b), (size_t)n + 1, fmt, ap);
	cm_buf_commit(b, (size_t)n);
	return CM_OK;
}

enum cm_status cm_buf_printf(struct cm_buf *b, const char *fmt, ...)
{
	va_list ap;
	enum cm_status st;

	va_start(ap, fmt);
	st = cm_buf_vprintf(b, fmt, ap);
	va_end(ap);
	return st;
}

enum cm_status cm_buf_put_u8(struct cm_buf *b, uint8_t v)
{
	return cm_buf_append(b, &v, 1);
}

enum cm_status cm_buf_put_u16(struct cm_buf *b, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	return cm_buf_append(b, p, 2);
}

enum cm_status cm_buf_put_u32(struct cm_buf *b, uint32_t v)
{
	uint8_t p[4];

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return cm_buf_append(b, p, 4);
}

enum cm_status cm_buf_put_u64(struct cm_buf *b, uint64_t v)
{
	uint8_t p[8];

	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return cm_buf_append(b, p, 8);
}

void cm_buf_consume(struct cm_buf *b, size_t n)
{
	if (n >= b->len) {
		cm_buf_reset(b);
		return;
	}
	b->off += n;
	b->len -= n;
}

void cm_buf_reset(struct cm_buf *b)
{
	b->off = 0;
	b->len = 0;
	if (b->mem)
		b->mem[0] = '\0';
}

void cm_buf_truncate(struct cm_buf *b, size_t n)
{
	if (n >= b->len)
		return;
	b->len = n;
	b->mem[b->off + n] = '\0';
}

char *cm_buf_take(struct cm_buf *b, size_t *len_out)
{
	char *s;

	if (!b->mem) {
		s = cm_strdup("");
		if (len_out)
			*len_out = 0;
		return s;
	}
	if (b->off) {
		memmove(b->mem, b->mem + b->off, b->len);
		b->mem[b->len] = '\0';
		b->off = 0;
	}
	s = (char *)b->mem;
	if (len_out)
		*len_out = b->len;
	b->mem = NULL;
	b->len = b->alloc = 0;
	return s;
}
