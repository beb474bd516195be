/*
 * bwprobe.h - the memory read bandwidth decode can reach: the bound that
 * bench-engine and bench-kernels print beside decode speed (issue 18).
 *
 * Threads are started once, pinned to CPUs 0..n-1 (the decode pool's count),
 * released together by a barrier and timed from the release to the last
 * one's end, over a buffer of at least 1 GiB and 8x the last-level cache.
 * Three loops, each the best of `reps` repetitions: plain 64-byte vector
 * loads, the same with software prefetch 1 KiB ahead, and non-temporal
 * loads (movntdqa).  The bound is the best of all; the spread is the
 * slowest repetition of the best loop over its fastest.
 */
#ifndef SLUICE_BENCH_BWPROBE_H
#define SLUICE_BENCH_BWPROBE_H

#include <stddef.h>

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

#endif
