/*
 * slo_limit.c - the adaptive concurrency limit of one worker (see
 * slo_limit.h): windows of observations, their p95s, additive increase
 * and multiplicative decrease.
 */
#include "gateway/slo_limit.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* p95 of n samples (sorted in place): the smallest value at or above 95%
 * of them (nearest rank) */
static int64_t p95(int64_t *v, uint32_t n)
{
	uint32_t rank;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	rank = (uint32_t)((95ull * n + 99) / 100);
	/* below 20 samples the nearest rank is the maximum: one slow prompt
	 * would decide; never the single largest, then (the second) */
	if (n >= 2 && rank == n)
		rank = n - 1;
	return v[rank ? rank - 1 : 0];
}

enum cm_status gw_slo_limit_init(struct gw_slo_limit *l, const struct gw_slo_cfg *cfg,
				 uint32_t ceiling)
{
	memset(l, 0, sizeof(*l));
	if (cfg->window == 0 || !(cfg->decrease > 0 && cfg->decrease < 1) || cfg->min_limit == 0 ||
	    ceiling < cfg->min_limit)
		return CM_EINVAL;
	l->cfg = *cfg;
	l->ceiling = ceiling;
	l->limit = ceiling;
	l->ttft = cm_calloc(cfg->window, sizeof(int64_t));
	l->itl = cm_calloc(cfg->window, sizeof(int64_t));
	if (!l->ttft || !l->itl) {
		gw_slo_limit_deinit(l);
		return CM_ENOMEM;
	}
	return CM_OK;
}

void gw_slo_limit_deinit(struct gw_slo_limit *l)
{
	cm_free(l->ttft);
	cm_free(l->itl);
	l->ttft = l->itl = NULL;
}

void gw_slo_limit_set_ceiling(struct gw_slo_limit *l, uint32_t ceiling)
{
	l->ceiling = ceiling < l->cfg.min_limit ? l->cfg.min_limit : ceiling;
	if (l->limit > l->ceiling)
		l->limit = l->ceiling;
}

void gw_slo_limit_itl_at(struct gw_slo_limit *l, int64_t itl_ns, int64_t placed_ns)
{
	if (l->itl && itl_ns >= 0 && l->n_itl < l->cfg.window) {
		l->itl[l->n_itl++] = itl_ns;
		l->n_itl_now += l->changed_ns == 0 || placed_ns >= l->changed_ns;
	}
}

void gw_slo_limit_itl(struct gw_slo_limit *l, int64_t itl_ns)
{
	gw_slo_limit_itl_at(l, itl_ns, INT64_MAX);
}

/* the factor f, lowered to target / measured when that is lower */
static double gradient(double f, int64_t target, int64_t measured)
{
	return measured > target && (double)target / (double)measured < f
		? (double)target / (double)measured : f;
}

/* The window is full: one decision. */
static void decide(struct gw_slo_limit *l, int64_t now_ns)
{
	uint32_t before = gw_slo_limit_get(l);
	int64_t t = p95(l->ttft, l->n), i = p95(l->itl, l->n_itl);
	int have_itl = l->n_itl > 0;
	int missed = t > l->cfg.ttft_p95_ns || (l->cfg.itl_p95_ns > 0 && have_itl &&
						i > l->cfg.itl_p95_ns);
	double f = l->cfg.decrease;

	l->decisions++;
	l->last_ttft_p95 = t;
	l->last_itl_p95 = i;
	if (missed) {
		/* gradient: the worse ratio of target to measured, in [0.5, decrease] */
		f = gradient(f, l->cfg.ttft_p95_ns, t);
		if (l->cfg.itl_p95_ns > 0 && have_itl)
			f = gradient(f, l->cfg.itl_p95_ns, i);
		if (f < 0.5)
			f = 0.5;
		l->limit *= f;
		if (l->limit < l->cfg.min_limit)
			l->limit = l->cfg.min_limit;
		l->decreases++;
	} else if (l->saturated && l->limit < l->ceiling &&
		   (l->cfg.itl_p95_ns == 0 || l->n_itl_now > 0)) {
		l->limit += l->cfg.increase;
		if (l->limit > l->ceiling)
			l->limit = l->ceiling;
		l->increases++;
	}
	l->n = 0;
	l->saturated = 0;
	l->n_itl = 0;
	l->n_itl_now = 0;
	if (gw_slo_limit_get(l) != before)
		l->changed_ns = now_ns;
	if (gw_slo_limit_get(l) < before)
		l->decreased_ns = now_ns;
}

int gw_slo_limit_current(const struct gw_slo_limit *l, int64_t placed_ns)
{
	return l->decreased_ns == 0 || placed_ns >= l->decreased_ns;
}

int gw_slo_limit_observe(struct gw_slo_limit *l, int64_t now_ns, int64_t ttft_ns, int64_t itl_ns,
			 int saturated)
{
	if (!l->ttft)
		return 0;
	if (l->n == 0)
		l->window_start = now_ns;
	l->ttft[l->n++] = ttft_ns;
	/* requests without an inter-token gap (-1) are left out of that p95 */
	gw_slo_limit_itl(l, itl_ns);
	l->saturated |= saturated;
	if (l->n < l->cfg.window &&
	    !(l->cfg.window_ns > 0 && l->n >= GW_SLO_MIN_SAMPLES &&
	      now_ns - l->window_start >= l->cfg.window_ns))
		return 0;
	decide(l, now_ns);
	return 1;
}

uint32_t gw_slo_limit_get(const struct gw_slo_limit *l)
{
	uint32_t v = (uint32_t)l->limit;

	return v < l->cfg.min_limit ? l->cfg.min_limit : v > l->ceiling ? l->ceiling : v;
}
