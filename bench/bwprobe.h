/*
 * bwprobe.h - the memory read bandwidth decode can reach: the bound that
 * bench-engine and bench-kernels print beside decode speed (issue 18).
 *
 * Threads are started once, pinned to CPUs 0..n-1 (the decode pool's count),
 * released together by a barrier and timed from the release to the last
 * one's end, over a buffer of at least 1 GiB and 8x the last-level cache.
 * Three loops, each the best of `reps` repetitions: plain 64-byte vector
 * loads, the same with every line prefetched into L2 4 KiB ahead, and non-temporal
 * loads (movntdqa).  The bound is the best of all; the spread is the
 * slowest repetition of the best loop over its fastest.
 *
 * The paired probe (bw_pacer): the same three loops, one pass each over as
 * many bytes as a decode step reads, run on the decode's own compute pool
 * (its threads, its task claiming) between its steps.  The machine's
 * bandwidth moves by 2x within a minute on a shared VM; a step held to the
 * passes right after it (within ~100 ms) is held to the memory of that
 * moment, which a probe seconds away is not.
 */
#ifndef SLUICE_BENCH_BWPROBE_H
#define SLUICE_BENCH_BWPROBE_H

#include <stddef.h>

struct wk_pool;

enum { BW_PLAIN = 0, BW_PREFETCH, BW_NONTEMPORAL, BW_N_LOOPS };

struct bw_result {
	double best[BW_N_LOOPS];   /* bytes/s, best repetition of each loop */
	double worst[BW_N_LOOPS];  /* bytes/s, slowest repetition */
	double bound;              /* the best of best[] */
	int bound_loop;            /* which loop gave it */
	size_t bytes;              /* buffer size */
	int threads, reps;
};

/* 0, or -1 when the buffer or the threads cannot be had. */
int bw_probe(int threads, int reps, struct bw_result *out);
const char *bw_loop_name(int loop);

struct bw_pacer;

/* A buffer of at least 1 GiB and 8x the last-level cache (huge pages,
 * written once), read `pass_bytes` (rounded up to whole vectors a thread)
 * a pass by `threads` tasks.  0, or -1 when it cannot be had. */
int bw_pacer_new(size_t pass_bytes, int threads, struct bw_pacer **out);
/* One pass of every loop on `pool` (each over the next slice of the
 * buffer, so no pass reads what the one before left in the cache); the
 * best bytes/s. */
double bw_pacer_pass(struct bw_pacer *p, struct wk_pool *pool);
/* The bytes one pass of one loop reads. */
size_t bw_pacer_pass_bytes(const struct bw_pacer *p);
void bw_pacer_free(struct bw_pacer *p);

#endif
