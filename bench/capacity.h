/*
 * capacity.h - `sluice-bench capacity`: find the knee, the highest
 * concurrency (closed loop) and then the highest arrival rate (open loop)
 * at which both p95 latency targets hold (TTFT, and the inter-token
 * latency as each request's mean gap: vLLM's TPOT; the p95 over every gap
 * is reported beside it), and report it: capacity.json,
 * capacity.md (a Markdown table) and, with gnuplot installed, PNG charts
 * (p50/p95/p99 TTFT and ITL against concurrency with the targets and the
 * knee drawn, tokens/s and tokens/s per user against concurrency, p95
 * against the arrival rate).  docs/capacity.md.
 *
 * The search runs levels through bench/loadgen.h; the summary of a level
 * (cap_point), the knee rule and the report writers are pure so that
 * tests/bench/test_capacity.c checks them on synthetic points.
 */
#ifndef SLUICE_BENCH_CAPACITY_H
#define SLUICE_BENCH_CAPACITY_H

#include <stddef.h>

#include "bench/loadgen.h"

#define CAP_POINTS_MAX 64

/* One measured level. */
struct cap_point {
	int concurrency;       /* closed loop (0 in the rate phase) */
	double rate;           /* open loop: arrivals per second (0 in the ramp) */
	double ttft[3];        /* p50, p95, p99 (ms), interactive */
	double tpot[3];        /* of each request's mean inter-token gap: the ITL target's */
	double itl[3];         /* of every gap (prefill chunks of arrivals show here) */
	double e2e_p50, e2e_p95;
	double tok_s;          /* tokens/s of the measured answers */
	double tok_s_user;     /* tok_s / concurrency (closed) or / mean in flight */
	double req_s;          /* requests answered per second */
	double goodput;        /* tokens/s of requests that met both targets */
	double met_share;      /* of the requests measured */
	double prompt_tokens;  /* mean per request (the worker's count) */
	unsigned long long ok, errors;
	int pass;
};

struct cap_config {
	double ttft_target_ms, itl_target_ms;
	double level_seconds, warmup, drain_seconds;
	double max_seconds;        /* the whole search */
	unsigned long long max_requests; /* the whole search (0: none) */
	int max_concurrency;
	double max_error_share;    /* a level with more errors fails (default 0.01) */
	unsigned long long min_ok; /* a level with fewer answers fails; a level
				    * runs on (up to 3 x level_seconds) until
				    * twice this many started */
	int batch_clients;         /* a batch flood beside every level */
	const char *out_dir;
	const char *describe;      /* workload, model, machine: into the report */
};

struct cap_report {
	struct cap_point ramp[CAP_POINTS_MAX], rates[CAP_POINTS_MAX];
	size_t n_ramp, n_rates;
	int knee;                  /* index into ramp, -1: not even 1 held */
	int knee_rate;             /* index into rates, -1 */
	const char *stopped;       /* why the search ended */
};

/* A level's summary; pass by the targets and bounds of cfg. */
void cap_point_from(struct cap_point *p, struct lg_result *r, const struct cap_config *cfg,
		    int concurrency, double rate);
/* The knee: the last point of the leading run of passing points (-1). */
int cap_knee(const struct cap_point *p, size_t n);

/* Runs the search; 0, or -1 with err (nothing could be measured). */
int cap_search(const struct lg_target *t, const struct lg_workload *w,
	       const struct cap_config *cfg, struct cap_report *rep, char *err, size_t err_len);

/* capacity.json, capacity.md, the gnuplot data and script, and the PNGs
 * when gnuplot is found (*charts set to 1).  0, or -1 with err. */
int cap_write(const struct cap_config *cfg, const struct cap_report *rep, int *charts,
	      char *err, size_t err_len);

#endif
