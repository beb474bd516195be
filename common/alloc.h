/*
 * alloc.h - the allocator every Sluice module uses.
 *
 * Thin wrappers over malloc/calloc/realloc/free with one addition: tests can
 * make the N-th allocation from now fail (cm_alloc_fail_after) so that every
 * cleanup path is walked.  Counting is per process and thread-safe; with no
 * injection armed the cost is one relaxed atomic load.
 * cm_calloc and cm_reallocarray check n * size for overflow.
 */
#ifndef SLUICE_COMMON_ALLOC_H
#define SLUICE_COMMON_ALLOC_H

#include <stddef.h>

void *cm_malloc(size_t size);
void *cm_calloc(size_t n, size_t size);
void *cm_realloc(void *p, size_t size);
void *cm_reallocarray(void *p, size_t n, size_t size);
/*
 * Zeroed like cm_calloc and aligned to 64 bytes (a cache line), freed with
 * cm_free: activation rows whose length is a multiple of 64 bytes then
 * start on a line, and no vector load of them straddles two (malloc gives
 * 16 bytes: GEMM n = 128, one thread, Zen 4, read such rows slower, AVX2
 * F16 by 3-8 %, BF16 by 11-14 %, AVX-512 F32 by up to 18 %).
 */
void *cm_calloc_aligned(size_t n, size_t size);
char *cm_strndup(const char *s, size_t n);
char *cm_strdup(const char *s);
void cm_free(void *p);

/*
 * Large read-mostly buffers (weight copies, the KV cache): anonymous memory
 * aligned to 2 MiB and advised for transparent huge pages where the kernel
 * offers them (madvise mode).  Streaming reads over 4 KiB pages miss the TLB
 * every page, and under a hypervisor each miss is a two-level walk: on a KVM
 * guest huge pages read 1.5-1.8x faster (docs/engine-cpu.md).  Zero-filled.
 * Freed with cm_huge_free and the same size; fails like cm_malloc in tests.
 */
void *cm_huge_alloc(size_t size);
void cm_huge_free(void *p, size_t size);

/*
 * Test hook: after `n` more successful allocations, every following one
 * fails until cm_alloc_fail_reset().  n < 0 disarms.
 */
void cm_alloc_fail_after(long n);
void cm_alloc_fail_reset(void);
/* How many allocations were refused since the last arm (tests). */
long cm_alloc_failed_count(void);

#endif
