/*
 * arena.h - per-request memory: many small allocations freed at once.
 *
 * An arena is a chain of chunks with a total cap set at creation.  Memory
 * handed out stays valid until cm_arena_reset() or cm_arena_free(); nothing
 * is freed individually.  Allocations are 16-byte aligned.  Not thread-safe:
 * one arena belongs to one request on one thread.
 */
#ifndef SLUICE_COMMON_ARENA_H
#define SLUICE_COMMON_ARENA_H

#include <stddef.h>

struct cm_arena;

/* `chunk` bytes per chunk (min 1 KiB), `cap` bytes in total. */
struct cm_arena *cm_arena_new(size_t chunk, size_t cap);
void cm_arena_free(struct cm_arena *a);
/* Releases every allocation but the first chunk. */
void cm_arena_reset(struct cm_arena *a);
/* NULL when the cap is reached or memory runs out. */
void *cm_arena_alloc(struct cm_arena *a, size_t size);
void *cm_arena_calloc(struct cm_arena *a, size_t n, size_t size);
char *cm_arena_strndup(struct cm_arena *a, const char *s, size_t n);
/* Bytes handed out so far (payload plus alignment). */
size_t cm_arena_used(const struct cm_arena *a);

#endif
