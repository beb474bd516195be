/*
 * alloc.c - allocation wrappers with failure injection for tests.
 */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown = -1; /* <0: disarmed */
static atomic_long failed_count;

static int should_fail(void)
{
	long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);

	if (n < 0)
		return 0;
	if (n == 0) {
		atomic_fetch_add(&failed_count, 1);
		return 1;
	}
	atomic_fetch_sub(&fail_countdown, 1);
	return 0;
}

void *cm_malloc(size_t size)
{
	if (should_fail())
		return NULL;
	return malloc(size ? size : 1);
}

void *cm_calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	if (should_fail())
		return NULL;
	return calloc(n ? n : 1, size ? size : 1);
}

void *cm_realloc(void *p, size_t size)
{
	if (should_fail())
		return NULL;
	return realloc(p, size ? size : 1);
}

void *cm_reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return cm_realloc(p, n * size);
}

char *cm_strndup(const char *s, size_t n)
{
	char *d = cm_malloc(n + 1);

	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *cm_strdup(const char *s)
{
	return cm_strndup(s, strlen(s));
}

void cm_free(void *p)
{
	free(p);
}

void cm_alloc_fail_after(long n)
{
	atomic_store(&failed_count, 0);
	atomic_store(&fail_countdown, n);
}

void cm_alloc_fail_reset(void)
{
	atomic_store(&fail_countdown, -1);
}

long cm_alloc_failed_count(void)
{
	return atomic_load(&failed_count);
}
