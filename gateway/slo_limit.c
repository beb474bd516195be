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

/* The window is full: one decision. */
static void decide(struct gw_slo_limit *l, uint32_t n_itl)
{
	int64_t t = p95(l->ttft, l->n), i = p95(l->itl, n_itl);
	int missed = t > l->cfg.ttft_p95_ns || (l->cfg.itl_p95_ns > 0 && n_itl > 0 &&
						i > l->cfg.itl_p95_ns);

	l->decisions++;
	l->last_ttft_p95 = t;
	l->last_itl_p95 = i;
	if (missed) {
		l->limit *= l->cfg.decrease;
		if (l->limit < l->cfg.min_limit)
			l->limit = l->cfg.min_limit;
		l->decreases++;
	} else if (l->saturated && l->limit < l->ceiling) {
		l->limit += l->cfg.increase;
		if (l->limit > l->ceiling)
			l->limit = l->ceiling;
		l->increases++;
	}
	l->n = 0;
	l->saturated = 0;
}

int gw_slo_limit_observe(struct gw_slo_limit *l, int64_t ttft_ns, int64_t itl_ns, int saturated)
{
	uint32_t n_itl = 0;

	if (!l->ttft)
		return 0;
	l->ttft[l->n] = ttft_ns;
	/* requests without an inter-token gap keep -1 (left out of that p95) */
	l->itl[l->n] = itl_ns;
	l->n++;
	l->saturated |= saturated;
	if (l->n < l->cfg.window)
		return 0;
	for (uint32_t k = 0; k < l->n; k++)
		if (l->itl[k] >= 0)
			l->itl[n_itl++] = l->itl[k];
	decide(l, n_itl);
	return 1;
}

uint32_t gw_slo_limit_get(const struct gw_slo_limit *l)
{
	uint32_t v = (uint32_t)l->limit;

	return v < l->cfg.min_limit ? l->cfg.min_limit : v > l->ceiling ? l->ceiling : v;
}
