/*
 * pool.h - compute thread pool for the CPU backend: a parallel-for with a
 * static partition.
 *
 * A pool of N threads counts the caller as thread 0 and owns N-1 workers.
 * wk_pool_run(pool, fn, ctx, n_tasks) calls fn(ctx, task, thread) for every
 * task in [0, n_tasks) and returns when all have finished.  Task k always
 * runs on thread k % N, in increasing order per thread, so results that
 * depend only on the task index never depend on timing.  Workers spin for a
 * short while after each run (dispatch costs a few hundred nanoseconds
 * while they are hot) and then sleep on a futex.
 *
 * Threads: wk_pool_run must be called from one thread at a time (the
 * thread that drives the forward pass); fn must not call wk_pool_run.
 */
#ifndef SLUICE_WORKER_CPU_POOL_H
#define SLUICE_WORKER_CPU_POOL_H

#include "common/status.h"

struct wk_pool;

/* fn(ctx, task, thread): thread in [0, N) identifies per-thread scratch. */
typedef void (*wk_pool_fn)(void *ctx, int task, int thread);

/* Starts n_threads - 1 workers (n_threads in 1..256). */
enum cm_status wk_pool_new(int n_threads, struct wk_pool **out) CM_WUR;
/* Stops and joins the workers; NULL is a no-op. */
void wk_pool_free(struct wk_pool *pool);
int wk_pool_threads(const struct wk_pool *pool);
/* Runs fn over n_tasks tasks (n_tasks >= 0); blocks until all are done. */
void wk_pool_run(struct wk_pool *pool, wk_pool_fn fn, void *ctx, int n_tasks);

#endif
