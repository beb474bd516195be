/*
 * pool.c - compute thread pool (see pool.h).
 *
 * Dispatch: the caller publishes fn/ctx/n_tasks, sets `pending` to the
 * number of workers and bumps the generation counter `gen`.  Workers wait
 * for `gen` to change (spinning first, then futex), run their share of the
 * tasks, and decrement `pending`; the last one wakes the caller if it went
 * to sleep.  Sleepers are counted so that a run with every worker spinning
 * makes no system call.  All shared fields are C11 atomics; the seq_cst
 * store of `gen` and load of `sleepers` pair with the workers' seq_cst
 * increment of `sleepers` before their futex check, so no wakeup is lost.
 */
#include "worker/cpu/pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/alloc.h"

/* spin iterations before sleeping (each a pause, ~10-40 ns) */
#define WK_POOL_SPIN 200000

struct wk_pool_worker {
	struct wk_pool *pool;
	int index; /* 1 .. n_threads-1 */
	pthread_t tid;
};

struct wk_pool {
	int n_threads;
	struct wk_pool_worker *workers; /* n_threads - 1 */
	wk_pool_fn fn;
	void *ctx;
	int n_tasks;
	_Alignas(64) atomic_uint gen;
	atomic_int sleepers;
	atomic_int stop;
	_Alignas(64) atomic_uint pending;
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

static void wk_pool_do_tasks(struct wk_pool *p, int thread)
{
	for (int k = thread; k < p->n_tasks; k += p->n_threads)
		p->fn(p->ctx, k, thread);
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
		wk_pool_do_tasks(p, w->index);
		if (atomic_fetch_sub(&p->pending, 1) == 1 &&
		    atomic_load(&p->caller_sleeping))
			wk_futex_wake(&p->pending, 1);
	}
	return NULL;
}

static void wk_pool_publish(struct wk_pool *p)
{
	atomic_store(&p->gen, atomic_load_explicit(&p->gen, memory_order_relaxed) + 1);
	if (atomic_load(&p->sleepers) > 0)
		wk_futex_wake(&p->gen, INT_MAX);
}

enum cm_status wk_pool_new(int n_threads, struct wk_pool **out)
{
	enum cm_status st = CM_OK;
	struct wk_pool *p = NULL;
	int started = 0;

	*out = NULL;
	if (n_threads < 1 || n_threads > 256)
		return CM_EINVAL;
	p = cm_calloc(1, sizeof *p);
	if (p == NULL)
		return CM_ENOMEM;
	p->n_threads = n_threads;
	atomic_init(&p->gen, 0);
	atomic_init(&p->sleepers, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->pending, 0);
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
		wk_pool_publish(p);
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

void wk_pool_run(struct wk_pool *p, wk_pool_fn fn, void *ctx, int n_tasks)
{
	if (n_tasks <= 0)
		return;
	if (p->n_threads == 1 || n_tasks == 1) {
		for (int k = 0; k < n_tasks; k++)
			fn(ctx, k, k % p->n_threads);
		return;
	}
	p->fn = fn;
	p->ctx = ctx;
	p->n_tasks = n_tasks;
	atomic_store_explicit(&p->pending, (unsigned)(p->n_threads - 1), memory_order_relaxed);
	wk_pool_publish(p);
	wk_pool_do_tasks(p, 0);

	int spins = 0;
	unsigned left;
	while ((left = atomic_load_explicit(&p->pending, memory_order_acquire)) != 0) {
		if (++spins < WK_POOL_SPIN) {
			wk_cpu_relax();
			continue;
		}
		atomic_store(&p->caller_sleeping, 1);
		left = atomic_load(&p->pending);
		if (left != 0)
			wk_futex_wait(&p->pending, left);
		atomic_store(&p->caller_sleeping, 0);
		spins = 0;
	}
}
