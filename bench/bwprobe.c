/*
 * bwprobe.c - the memory read bandwidth probe of the benchmarks (see
 * bwprobe.h).
 */
#include "bench/bwprobe.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "common/alloc.h"
#include "common/clock.h"
#include "worker/cpu/pool.h"

typedef uint64_t v8u64 __attribute__((vector_size(64), aligned(64)));

struct bw_shared {
	pthread_barrier_t start, end;
	const v8u64 *buf;
	size_t n_vec;          /* vectors in the buffer */
	int threads;
	int loop;              /* the loop of this round; -1: stop */
};

struct bw_thread {
	struct bw_shared *sh;
	int idx;
	uint64_t sink;
	pthread_t th;
};

/* the widest loads the CPU has (decode's kernels use them too), eight
 * independent streams in flight per thread */
#if defined(__x86_64__)
#define BW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define BW_CLONES
#endif

BW_CLONES static uint64_t loop_plain(const v8u64 *p, size_t n)
{
	v8u64 a[8] = { { 0 } };

	for (size_t i = 0; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			a[k] += p[i + (size_t)k];
	for (int k = 1; k < 8; k++)
		a[0] += a[k];
	return a[0][0] + a[0][7];
}

/*
 * Every line prefetched into L2 (prefetcht1) 4 KiB ahead.  It prefetched
 * two lines of every eight, 2 KiB ahead, before 2026-12-07: on an Intel
 * Xeon (Sapphire Rapids class, KVM, 2 vCPUs) that loop read 19-22 GB/s
 * on two threads beside the plain loop's 22-29, and decode ran at 101-115 %
 * of the passes beside it; every line into L2 read 31-33 against the plain
 * loop's 24-29 in the same minutes (into L1 2 KiB ahead 28-33, one
 * thread 15.0-15.6 against 13.7-14.0).
 */
BW_CLONES static uint64_t loop_prefetch(const v8u64 *p, size_t n)
{
	v8u64 a[8] = { { 0 } };

	for (size_t i = 0; i + 8 <= n; i += 8) {
		for (int k = 0; k < 8; k++)
			__builtin_prefetch(p + i + 64 + (size_t)k, 0, 2); /* 4 KiB ahead */
		for (int k = 0; k < 8; k++)
			a[k] += p[i + (size_t)k];
	}
	for (int k = 1; k < 8; k++)
		a[0] += a[k];
	return a[0][0] + a[0][7];
}

#if defined(__x86_64__)
__attribute__((target("sse4.1")))
static uint64_t loop_nontemporal(const v8u64 *p, size_t n)
{
	__m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
	const __m128i *q = (const __m128i *)p;

	/* movntdqa: non-temporal on write-combining memory, a plain load
	 * with a streaming hint on ordinary memory */
	for (size_t i = 0; i + 4 <= 4 * n; i += 4) {
		a = _mm_add_epi64(a, _mm_stream_load_si128((__m128i *)(q + i)));
		b = _mm_add_epi64(b, _mm_stream_load_si128((__m128i *)(q + i + 1)));
		c = _mm_add_epi64(c, _mm_stream_load_si128((__m128i *)(q + i + 2)));
		d = _mm_add_epi64(d, _mm_stream_load_si128((__m128i *)(q + i + 3)));
	}
	a = _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d));
	return (uint64_t)_mm_cvtsi128_si64(a);
}
#else
static uint64_t loop_nontemporal(const v8u64 *p, size_t n)
{
	return loop_plain(p, n);
}
#endif

static uint64_t run_loop(int loop, const v8u64 *p, size_t n)
{
	return loop == BW_PLAIN ? loop_plain(p, n)
	       : loop == BW_PREFETCH ? loop_prefetch(p, n)
				     : loop_nontemporal(p, n);
}

static void *bw_worker(void *arg)
{
	struct bw_thread *t = arg;
	struct bw_shared *sh = t->sh;
	size_t per = sh->n_vec / (size_t)sh->threads;
	const v8u64 *p = sh->buf + per * (size_t)t->idx;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->idx % CPU_SETSIZE, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
	for (;;) {
		pthread_barrier_wait(&sh->start);
		if (sh->loop < 0)
			return NULL;
		t->sink += run_loop(sh->loop, p, per);
		pthread_barrier_wait(&sh->end);
	}
}

static size_t llc_bytes(void)
{
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);

	return l3 > 0 ? (size_t)l3 : l2 > 0 ? (size_t)l2 : (size_t)32 << 20;
}

const char *bw_loop_name(int loop)
{
	static const char *const n[] = { "plain", "prefetch", "non-temporal" };

	return loop >= 0 && loop < BW_N_LOOPS ? n[loop] : "?";
}

int bw_probe(int threads, int reps, struct bw_result *out)
{
	struct bw_shared sh;
	struct bw_thread *t;
	size_t bytes = (size_t)1 << 30;
	v8u64 *buf;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (threads < 1)
		threads = 1;
	if (reps < 1)
		reps = 1;
	if (bytes < 8 * llc_bytes())
		bytes = 8 * llc_bytes();
	bytes -= bytes % ((size_t)threads * 256);
	buf = cm_huge_alloc(bytes); /* as the repacked weights (alloc.h) */
	t = calloc((size_t)threads, sizeof(*t));
	if (!buf || !t)
		goto out;
	memset(buf, 1, bytes); /* faulted in, not zero pages */
	sh.buf = buf;
	sh.n_vec = bytes / sizeof(v8u64);
	sh.threads = threads;
	pthread_barrier_init(&sh.start, NULL, (unsigned)threads + 1);
	pthread_barrier_init(&sh.end, NULL, (unsigned)threads + 1);
	for (int i = 0; i < threads; i++) {
		t[i].sh = &sh;
		t[i].idx = i;
		pthread_create(&t[i].th, NULL, bw_worker, &t[i]);
	}
	out->bytes = bytes;
	out->threads = threads;
	out->reps = reps;
	for (int loop = 0; loop < BW_N_LOOPS; loop++) {
		out->worst[loop] = 1e300;
		for (int r = 0; r < reps + 1; r++) { /* the first is a warm-up */
			int64_t t0;
			double bw;

			sh.loop = loop;
			pthread_barrier_wait(&sh.start);
			t0 = cm_mono_ns();
			pthread_barrier_wait(&sh.end);
			bw = (double)bytes / ((double)(cm_mono_ns() - t0) / 1e9);
			if (r == 0)
				continue;
			if (bw > out->best[loop])
				out->best[loop] = bw;
			if (bw < out->worst[loop])
				out->worst[loop] = bw;
		}
		if (out->best[loop] > out->bound) {
			out->bound = out->best[loop];
			out->bound_loop = loop;
		}
	}
	sh.loop = -1;
	pthread_barrier_wait(&sh.start);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i].th, NULL);
	pthread_barrier_destroy(&sh.start);
	pthread_barrier_destroy(&sh.end);
	rc = 0;
out:
	cm_huge_free(buf, bytes);
	free(t);
	return rc;
}

struct bw_pacer {
	v8u64 *buf;
	size_t bytes;          /* of buf */
	size_t slice_vec;      /* vectors a pass reads: threads x per_task */
	size_t n_slices;       /* buf holds n_slices slices */
	size_t next;           /* the slice the next pass reads */
	int threads;
	int loop;              /* of the pass in progress */
	const v8u64 *base;     /* its slice */
	uint64_t *sink;        /* one a task, so no loop is optimised away */
};

int bw_pacer_new(size_t pass_bytes, int threads, struct bw_pacer **out)
{
	struct bw_pacer *p = calloc(1, sizeof(*p));
	size_t want = (size_t)1 << 30, unit;

	*out = NULL;
	if (!p)
		return -1;
	if (threads < 1)
		threads = 1;
	/* each task reads whole groups of eight vectors (the loops' step) */
	unit = (size_t)threads * 8;
	p->threads = threads;
	p->slice_vec = (pass_bytes / sizeof(v8u64) + unit - 1) / unit * unit;
	if (p->slice_vec == 0)
		p->slice_vec = unit;
	if (want < 8 * llc_bytes())
		want = 8 * llc_bytes();
	p->n_slices = (want + p->slice_vec * sizeof(v8u64) - 1) / (p->slice_vec * sizeof(v8u64));
	p->bytes = p->n_slices * p->slice_vec * sizeof(v8u64);
	p->buf = cm_huge_alloc(p->bytes);
	p->sink = calloc((size_t)threads, sizeof(uint64_t));
	if (!p->buf || !p->sink) {
		bw_pacer_free(p);
		return -1;
	}
	memset(p->buf, 1, p->bytes); /* faulted in, not zero pages */
	*out = p;
	return 0;
}

static void bw_pacer_task(void *ctx, int task, int thread)
{
	struct bw_pacer *p = ctx;
	size_t per = p->slice_vec / (size_t)p->threads;

	(void)thread;
	p->sink[task] += run_loop(p->loop, p->base + per * (size_t)task, per);
}

double bw_pacer_pass(struct bw_pacer *p, struct wk_pool *pool)
{
	double best = 0;

	for (int l = 0; l < BW_N_LOOPS; l++) {
		int64_t t0;
		double bw;

		p->loop = l;
		p->base = p->buf + p->next * p->slice_vec;
		p->next = (p->next + 1) % p->n_slices;
		t0 = cm_mono_ns();
		wk_pool_run(pool, bw_pacer_task, p, p->threads);
		bw = (double)(p->slice_vec * sizeof(v8u64)) / ((double)(cm_mono_ns() - t0) / 1e9);
		if (bw > best)
			best = bw;
	}
	return best;
}

size_t bw_pacer_pass_bytes(const struct bw_pacer *p)
{
	return p->slice_vec * sizeof(v8u64);
}

void bw_pacer_free(struct bw_pacer *p)
{
	if (!p)
		return;
	cm_huge_free(p->buf, p->bytes);
	free(p->sink);
	free(p);
}
