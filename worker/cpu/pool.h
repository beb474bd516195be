/*
 * pool.h - compute thread pool for the CPU backend: a parallel-for.
 *
 * A pool of N threads counts the caller as thread 0 and owns N-1 workers.
 * wk_pool_run(pool, fn, ctx, n_tasks) calls fn(ctx, task, thread) once for
 * every task in [0, n_tasks) and returns when all have finished.  Tasks
 * are claimed from a shared counter, so a thread the OS has descheduled
 * (the machine is shared) delays a run by at most the task it holds; the
 * caller never waits for a worker that has not started.  Which thread runs
 * which task therefore depends on timing: fn must make its result depend
 * on the task index only (the matmul does: each task owns a fixed range of
 * output rows), never on `thread`, which is for per-thread scratch.
 * Workers spin for a while after each run (dispatch then costs well under
 * a microsecond) and then sleep on a futex.
 *
 * Threads: wk_pool_run must be called from one thread at a time (the
 * thread that drives the forward pass); fn must not call wk_pool_run.
 */
#ifndef SLUICE_WORKER_CPU_POOL_H
#define SLUICE_WORKER_CPU_POOL_H

#include "common/status.h"

/* Most tasks one wk_pool_run accepts. */
#define WK_POOL_MAX_TASKS 65535

struct wk_pool;

/* fn(ctx, task, thread): thread in [0, N) identifies per-thread scratch. */
typedef void (*wk_pool_fn)(void *ctx, int task, int thread);

#define WK_POOL_MAX_THREADS 256

/* Starts n_threads - 1 workers (n_threads in 1..WK_POOL_MAX_THREADS). */
enum cm_status wk_pool_new(int n_threads, struct wk_pool **out) CM_WUR;
/* Stops and joins the workers; NULL is a no-op. */
void wk_pool_free(struct wk_pool *pool);
int wk_pool_threads(const struct wk_pool *pool);
/* Runs fn over n_tasks tasks (0 <= n_tasks <= WK_POOL_MAX_TASKS; more are
 * run in several rounds); blocks until all are done. */
void wk_pool_run(struct wk_pool *pool, wk_pool_fn fn, void *ctx, int n_tasks);

#endif
