/*
 * arena.c - chunked bump allocator with a total cap (see arena.h).
 */
#include "common/arena.h"

#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

#define ARENA_ALIGN 16

struct arena_chunk {
	struct arena_chunk *next;
	size_t size; /* usable bytes in data[] */
	size_t used;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct cm_arena {
	struct arena_chunk *head; /* newest chunk first */
	size_t chunk;
	size_t cap;
	size_t total; /* bytes of all chunks' data */
	size_t used;
};

static struct arena_chunk *chunk_new(size_t size)
{
	struct arena_chunk *c = cm_malloc(sizeof(*c) + size);

	if (!c)
		return NULL;
	c->next = NULL;
	c->size = size;
	c->used = 0;
	return c;
}

struct cm_arena *cm_arena_new(size_t chunk, size_t cap)
{
	struct cm_arena *a = cm_calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->chunk = chunk < 1024 ? 1024 : chunk;
	a->cap = cap;
	return a;
}

void cm_arena_free(struct cm_arena *a)
{
	struct arena_chunk *c, *n;

	if (!a)
		return;
	for (c = a->head; c; c = n) {
		n = c->next;
		cm_free(c);
	}
	cm_free(a);
}

void cm_arena_reset(struct cm_arena *a)
{
	struct arena_chunk *c, *n;

	if (!a || !a->head)
		return;
	/* keep the oldest chunk (the last in the list) */
	for (c = a->head; c->next; c = n) {
		n = c->next;
		a->total -= c->size;
		cm_free(c);
	}
	c->used = 0;
	a->head = c;
	a->used = 0;
}

void *cm_arena_alloc(struct cm_arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	size_t need, csize;
	void *p;

	if (size > SIZE_MAX - ARENA_ALIGN)
		return NULL;
	need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (need > a->cap - a->used || a->used > a->cap)
		return NULL;
	if (!c || c->size - c->used < need) {
		csize = need > a->chunk ? need : a->chunk;
		c = chunk_new(csize);
		if (!c)
			return NULL;
		c->next = a->head;
		a->head = c;
		a->total += csize;
	}
	p = c->data + c->used;
	c->used += need;
	a->used += need;
	return p;
}

void *cm_arena_calloc(struct cm_arena *a, size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size)
		return NULL;
	p = cm_arena_alloc(a, n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

char *cm_arena_strndup(struct cm_arena *a, const char *s, size_t n)
{
	char *d = n < SIZE_MAX ? cm_arena_alloc(a, n + 1) : NULL;

	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

size_t cm_arena_used(const struct cm_arena *a)
{
	return a->used;
}
