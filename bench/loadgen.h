/*
 * loadgen.h - the load generator under sluice-bench (bench/sluice_bench.c):
 * streaming Ollama /api/generate requests (raw prompt, X-Sluice-Ignore-EOS
 * so every request generates exactly its drawn length) to a gateway over
 * HTTPS or plain HTTP, in one of two shapes:
 *
 *   closed loop: `concurrency` users, each sends its next request when the
 *                previous one ended (TTFT from the request written);
 *   open loop:   Poisson arrivals at `rate` per second, each on an idle
 *                keep-alive connection or a new one (TTFT from the
 *                scheduled arrival, so a slow service cannot slow the
 *                arrivals down: no coordinated omission);
 *
 * plus, in either, `batch_clients` closed-loop users sending batch-class
 * requests (a batch flood), measured apart.
 *
 * A level runs `seconds` (longer, up to `max_seconds`, until
 * `min_requests` measured requests started); requests that start in its
 * first `warmup` seconds are not measured; then new requests stop and
 * those in flight run to their end (bounded by `drain_seconds`).  Measured per class:
 * TTFT, inter-token gap (every gap), end-to-end, each request's mean gap,
 * statuses, tokens of the measured requests, and of those that met both
 * targets (goodput); both over the window from the first measured start
 * to the last measured end (vLLM's benchmark convention).
 *
 * Owns its event loop, TLS context and connections for one lg_run call.
 * One thread.
 */
#ifndef SLUICE_BENCH_LOADGEN_H
#define SLUICE_BENCH_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

#define LG_STATUS_MAX 600

/* Where and what to send (strings borrowed). */
struct lg_target {
	const char *host;      /* as in the URL */
	int port;
	int tls;               /* https */
	const char *cacert;    /* verify against this CA file (NULL: system store) */
	int insecure;          /* do not verify the certificate */
	const char *key;       /* API key */
	const char *model;
};

/* The requests: uniform draws in [min, max]. */
struct lg_workload {
	uint32_t prompt_words_min, prompt_words_max;
	uint32_t output_min, output_max;      /* tokens generated */
	double shared_prefix;                 /* share of requests with a shared prefix */
	uint32_t prefixes;                    /* how many distinct shared prefixes */
	uint32_t prefix_words;                /* length of each */
	double batch_share;                   /* share of the main requests sent as batch */
	uint64_t seed;
};

struct lg_level {
	int concurrency;       /* > 0: closed loop */
	double rate;           /* > 0: open loop, arrivals per second */
	int batch_clients;     /* closed-loop batch users beside */
	double seconds, warmup, drain_seconds;
	/* the window is extended a second at a time until this many
	 * interactive requests started in it, up to max_seconds in all */
	uint64_t min_requests;
	double max_seconds;
	uint64_t max_requests; /* new requests stop after this many (0: none) */
	int max_connections;   /* open loop: beyond, an arrival is counted lost */
	double ttft_target_ms, itl_target_ms; /* for goodput */
	/* progress on stderr every second: label and a status callback */
	const char *label;
	void (*progress)(void *ctx, const char *line);
	void *progress_ctx;
};

struct lg_samples {
	double *v;
	size_t n, cap;
};

/* One class's measurements (index 0 interactive, 1 batch). */
struct lg_class {
	struct lg_samples ttft, itl, e2e, req_itl;   /* ms; req_itl: a request's mean gap */
	uint64_t started, ok, met;                    /* measured requests */
	uint64_t status[LG_STATUS_MAX];               /* 0: connection or protocol error */
	uint64_t tokens;                              /* of the measured answers */
	uint64_t good_tokens;                         /* of requests that met both targets */
	uint64_t prompt_tokens, cached_tokens;        /* from the final objects */
};

struct lg_result {
	struct lg_class cls[2];
	double window_s;       /* first measured start to last measured end */
	double wall_s;         /* the whole level, drain included */
	double offered_rate;   /* open loop: arrivals per second in the window */
	uint64_t lost;         /* open loop: arrivals with no connection left */
	uint64_t unfinished;   /* in flight when the drain deadline came */
};

/* p in [0, 100]; 0 when empty.  Sorts the samples. */
double lg_pct(struct lg_samples *s, double p);
double lg_mean(const struct lg_samples *s);
void lg_result_free(struct lg_result *r);

/* Runs one level; 0, or -1 with a message in err (nothing measured). */
int lg_run(const struct lg_target *t, const struct lg_workload *w, const struct lg_level *lv,
	   struct lg_result *out, char *err, size_t err_len);

#endif
