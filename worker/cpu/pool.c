/*
 * pool.c - compute thread pool (see pool.h).
 *
 * One run: the caller writes fn/ctx, stores the claim word
 * (gen << 32 | n_tasks << 16 | next = 0), resets `done` and bumps `gen`.
 * Every thread (caller included) claims task indices by CAS on the claim
 * word, which fails once the generation moved on, so a late worker can
 * never take a task of a newer run by mistake; fn/ctx are read only after
 * a successful claim, when the run cannot have completed.  Each finished
 * task increments `done`; the caller returns when done == n_tasks.
 * Workers wait for `gen` to change (spin, then futex); sleepers are
 * counted so that a run with every worker spinning makes no system call.
 * The seq_cst store of `gen` and load of `sleepers` pair with the workers'
 * seq_cst increment of `sleepers` before their futex check (no lost
 * wakeup); the same pattern guards the caller's sleep on `done`.
 */
#include "worker/cpu/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/alloc.h"

/* spin iterations before sleeping (each a pause, tens of ns) */
#define WK_POOL_SPIN 100000

struct wk_pool_worker {
	struct wk_pool *pool;
	int index; /* 1 .. n_threads-1 */
	pthread_t tid;
};

struct wk_pool {
	int n_threads;
	struct wk_pool_worker *workers; /* n_threads - 1 */
	wk_pool_fn fn;                  /* valid while a run is incomplete */
	void *ctx;
	_Alignas(64) atomic_uint gen;
	atomic_int sleepers;
	atomic_int stop;
	_Alignas(64) _Atomic uint64_t claim; /* gen << 32 | n_tasks << 16 | next */
	_Alignas(64) atomic_uint done;
	atomic_int caller_sleeping;
};

static void wk_futex_wait(atomic_uint *addr, unsigned val)
{
	syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void wk_futex_wake(atomic_uint *addr, int n)
{
	syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void wk_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Claims and runs tasks of run `g` until none is left. */
static void wk_pool_work(struct wk_pool *p, unsigned g, int thread)
{
	for (;;) {
		uint64_t v = atomic_load_explicit(&p->claim, memory_order_acquire);
		unsigned next = (unsigned)(v & 0xffff), n = (unsigned)((v >> 16) & 0xffff);
		if ((unsigned)(v >> 32) != g || next >= n)
			return;
		if (!atomic_compare_exchange_weak_explicit(&p->claim, &v, v + 1, memory_order_acq_rel,
							   memory_order_acquire))
			continue;
		p->fn(p->ctx, (int)next, thread);
		if (atomic_fetch_add(&p->done, 1) + 1 == n && atomic_load(&p->caller_sleeping))
			wk_futex_wake(&p->done, 1);
	}
}

static void *wk_pool_main(void *arg)
{
	struct wk_pool_worker *w = arg;
	struct wk_pool *p = w->pool;
	unsigned seen = 0; /* gen starts at 0; a run may be published before we get here */

	for (;;) {
		unsigned g;
		int spins = 0;
		while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
			if (++spins < WK_POOL_SPIN) {
				wk_cpu_relax();
				continue;
			}
			atomic_fetch_add(&p->sleepers, 1);
			wk_futex_wait(&p->gen, seen);
			atomic_fetch_sub(&p->sleepers, 1);
			spins = 0;
		}
		seen = g;
		if (atomic_load_explicit(&p->stop, memory_order_acquire))
			break;
		wk_pool_work(p, g, w->index);
	}
	return NULL;
}

static void wk_pool_publish(struct wk_pool *p, unsigned g)
{
	atomic_store(&p->gen, g);
	if (atomic_load(&p->sleepers) > 0)
		wk_futex_wake(&p->gen, INT_MAX);
}

enum cm_status wk_pool_new(int n_threads, struct wk_pool **out)
{
	enum cm_status st = CM_OK;
	struct wk_pool *p = NULL;
	int started = 0;

	*out = NULL;
	if (n_threads < 1 || n_threads > WK_POOL_MAX_THREADS)
		return CM_EINVAL;
	p = cm_calloc(1, sizeof *p);
	if (p == NULL)
		return CM_ENOMEM;
	p->n_threads = n_threads;
	atomic_init(&p->gen, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->claim, 0);
	atomic_init(&p->done, 0);
	atomic_init(&p->caller_sleeping, 0);
	if (n_threads > 1) {
		p->workers = cm_calloc((size_t)n_threads - 1, sizeof *p->workers);
		if (p->workers == NULL) {
			st = CM_ENOMEM;
			goto out;
		}
	}
	for (; started < n_threads - 1; started++) {
		struct wk_pool_worker *w = &p->workers[started];
		w->pool = p;
		w->index = started + 1;
		if (pthread_create(&w->tid, NULL, wk_pool_main, w) != 0) {
			st = CM_EIO;
			goto out;
		}
	}
out:
	if (st != CM_OK) {
		p->n_threads = started + 1; /* join only what was started */
		wk_pool_free(p);
		return st;
	}
	*out = p;
	return CM_OK;
}

void wk_pool_free(struct wk_pool *p)
{
	if (p == NULL)
		return;
	if (p->n_threads > 1) {
		atomic_store(&p->stop, 1);
		wk_pool_publish(p, atomic_load(&p->gen) + 1);
		for (int i = 0; i < p->n_threads - 1; i++)
			pthread_join(p->workers[i].tid, NULL);
	}
	cm_free(p->workers);
	cm_free(p);
}

int wk_pool_threads(const struct wk_pool *p)
{
	return p->n_threads;
}

struct wk_pool_round {
	wk_pool_fn fn;
	void *ctx;
	int base;
};

static void wk_pool_round_task(void *ctx, int task, int thread)
{
	struct wk_pool_round *r = ctx;
	r->fn(r->ctx, r->base + task, thread);
}

void wk_pool_run(struct wk_pool *p, wk_pool_fn fn, void *ctx, int n_tasks)
{
	if (n_tasks <= 0)
		return;
	if (p->n_threads == 1 || n_tasks == 1) {
		for (int k = 0; k < n_tasks; k++)
			fn(ctx, k, 0);
		return;
	}
	if (n_tasks > WK_POOL_MAX_TASKS) {
		for (int base = 0; base < n_tasks; base += WK_POOL_MAX_TASKS) {
			struct wk_pool_round r = { fn, ctx, base };
			int n = n_tasks - base < WK_POOL_MAX_TASKS ? n_tasks - base : WK_POOL_MAX_TASKS;
			wk_pool_run(p, wk_pool_round_task, &r, n);
		}
		return;
	}
	unsigned g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
	p->fn = fn;
	p->ctx = ctx;
	atomic_store_explicit(&p->done, 0, memory_order_relaxed);
	atomic_store_explicit(&p->claim, ((uint64_t)g << 32) | ((uint64_t)n_tasks << 16),
			      memory_order_release);
	wk_pool_publish(p, g);
	wk_pool_work(p, g, 0);

	int spins = 0;
	unsigned d;
	while ((d = atomic_load_explicit(&p->done, memory_order_acquire)) != (unsigned)n_tasks) {
		if (++spins < WK_POOL_SPIN) {
			wk_cpu_relax();
			continue;
		}
		atomic_store(&p->caller_sleeping, 1);
		d = atomic_load(&p->done);
		if (d != (unsigned)n_tasks)
			wk_futex_wait(&p->done, d);
		atomic_store(&p->caller_sleeping, 0);
		spins = 0;
	}
}
