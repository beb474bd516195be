/*
 * slo_limit.h - an adaptive concurrency limit for one worker, held to
 * latency targets (docs/gateway.md#slo-admission): additive increase,
 * multiplicative decrease on the p95 of time to first token and of
 * inter-token latency over a window of finished requests.
 *
 * After every `window` observations (or, with window_ns, once a window
 * is that old and holds GW_SLO_MIN_SAMPLES: at a few requests per second
 * a count alone decides too rarely to follow the load): when either p95
 * (nearest rank, but never a window's single largest sample: in a small
 * window that would be one slow prompt deciding) is over its target
 * the limit is multiplied by `decrease`, or by target / p95 of the worse
 * one when that is lower (a gradient step, never below 0.5: far over
 * the target, the limit falls in a few windows rather than many), at
 * least `min_limit`; when both
 * hold and the limit was reached during the window (the worker was
 * saturated: the limit, not the load, bounded it), it grows by
 * `increase` up to the ceiling (the static cap).  A limit that was never
 * reached is left alone: there is no evidence that more would hold.
 *
 * Owns its fixed sample buffers (allocated by gw_slo_limit_init, freed by
 * gw_slo_limit_deinit).  One thread (the gateway loop).
 */
#ifndef SLUICE_GATEWAY_SLO_LIMIT_H
#define SLUICE_GATEWAY_SLO_LIMIT_H

#include <stdint.h>

#include "common/status.h"

/* The controller's constants (gateway.slo.*). */
struct gw_slo_cfg {
	int64_t ttft_p95_ns;   /* target: time to first token, p95 */
	int64_t itl_p95_ns;    /* target: inter-token latency, p95 (0: none) */
	uint32_t window;       /* observations per decision */
	int64_t window_ns;     /* or this long, with GW_SLO_MIN_SAMPLES (0: count only) */
	double decrease;       /* multiplier when a target is missed, 0 < x < 1 */
	uint32_t increase;     /* added when both hold and the limit was reached */
	uint32_t min_limit;    /* the limit never goes below it (>= 1) */
};

/* The fewest first tokens a window closed by time decides on. */
#define GW_SLO_MIN_SAMPLES 8

struct gw_slo_limit {
	struct gw_slo_cfg cfg;
	uint32_t ceiling;      /* the static cap */
	double limit;          /* current limit (whole requests: floor) */
	int64_t *ttft, *itl;   /* this window's samples */
	uint32_t n;            /* samples in the window */
	int64_t window_start;  /* the window's first observation (ns) */
	int64_t changed_ns;    /* when the limit last changed (0: never) */
	int64_t decreased_ns;  /* when it last went down (0: never) */
	int saturated;         /* the limit was reached during the window */
	uint32_t n_itl;        /* ITL samples in the window (at most `window`) */
	uint32_t n_itl_now;    /* of them, from requests placed under the limit in force */
	uint64_t decisions, decreases, increases;
	int64_t last_ttft_p95, last_itl_p95;
};

/* Starts at the ceiling.  CM_EINVAL for a window of 0, decrease outside
 * (0, 1), min_limit 0 or a ceiling below it; CM_ENOMEM. */
enum cm_status gw_slo_limit_init(struct gw_slo_limit *l, const struct gw_slo_cfg *cfg,
				 uint32_t ceiling) CM_WUR;
void gw_slo_limit_deinit(struct gw_slo_limit *l);
/* A new static cap (a worker's HELLO); the limit is kept within it. */
void gw_slo_limit_set_ceiling(struct gw_slo_limit *l, uint32_t ceiling);

/*
 * One finished request: its TTFT and mean inter-token latency (ns; itl
 * < 0 when it had fewer than two tokens), and whether the worker's
 * requests in flight had reached the limit when it was placed.  Returns
 * 1 when this observation closed a window (the limit may have changed).
 */
int gw_slo_limit_observe(struct gw_slo_limit *l, int64_t now_ns, int64_t ttft_ns, int64_t itl_ns,
			 int saturated);

/*
 * One request's mean inter-token latency (its time per output token),
 * known at its end, for the window in progress (beyond `window` of them
 * in one window, the rest are dropped).  The dispatcher observes TTFT at
 * the first token (itl_ns -1 above) and this at the end.
 */
void gw_slo_limit_itl(struct gw_slo_limit *l, int64_t itl_ns);
/* The same for a request placed at `placed_ns`: only one placed after the
 * limit last changed is evidence that the limit in force holds its ITL
 * target, and an increase needs such evidence when an ITL target is set
 * (TTFT is known within a window, ITL only at a generation's end: without
 * this, windows of first tokens alone kept raising the limit while the
 * slow generations it caused had not ended yet). */
void gw_slo_limit_itl_at(struct gw_slo_limit *l, int64_t itl_ns, int64_t placed_ns);

/*
 * 1 when a request placed at `placed_ns` is evidence for the limit in
 * force: it was placed after the limit last went down.  The dispatcher
 * feeds only those: a request placed under an older, higher limit still
 * reports the latency of that limit, and counting it again would cut the
 * limit again and again for one overload (the lag of long generations);
 * one placed under a lower limit is optimistic, so its miss is a miss.
 */
int gw_slo_limit_current(const struct gw_slo_limit *l, int64_t placed_ns);

/* The current limit: floor(limit), in [min_limit, ceiling]. */
uint32_t gw_slo_limit_get(const struct gw_slo_limit *l);

#endif
