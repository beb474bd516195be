/*
 * alloc.c - allocation wrappers with failure injection for tests.
 */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void *cm_calloc_aligned(size_t n, size_t size)
{
	void *p = NULL;

	if (size && n > SIZE_MAX / size)
		return NULL;
	if (should_fail())
		return NULL;
	if (posix_memalign(&p, 64, n && size ? n * size : 1) != 0)
		return NULL;
	memset(p, 0, n && size ? n * size : 1);
	return p;
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

#define HUGE_PAGE ((size_t)2 << 20)

static size_t huge_round(size_t size)
{
	return size > SIZE_MAX - HUGE_PAGE ? 0 : (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void *cm_huge_alloc(size_t size)
{
	size_t len = huge_round(size ? size : 1);
	uint8_t *m, *p;

	if (len == 0 || len > SIZE_MAX - HUGE_PAGE || should_fail())
		return NULL;
	/* map one huge page more, then trim to a 2 MiB-aligned run */
	m = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	p = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	if (p + len < m + len + HUGE_PAGE)
		munmap(p + len, (size_t)(m + len + HUGE_PAGE - (p + len)));
#ifdef MADV_HUGEPAGE
	madvise(p, len, MADV_HUGEPAGE); /* advice: a kernel without THP ignores it */
#endif
	return p;
}

void cm_huge_free(void *p, size_t size)
{
	if (p != NULL)
		munmap(p, huge_round(size ? size : 1));
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
