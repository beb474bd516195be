/*
 * dispatch_slo.c - SLO admission (docs/gateway.md#slo-admission): one
 * adaptive concurrency limit per worker (gateway/slo_limit.h), fed by the
 * first token and the mean inter-token latency of the interactive
 * generation requests placed there, and handed to the worker table as the worker's
 * current cap (never above its static cap).  When a worker is at its
 * limit, new work waits in the bounded queues, within the interactive
 * queue budget, or is refused early (503 slo_overload, Retry-After)
 * instead of every running request getting slower.  Batch work fills a
 * share of the limit.  Also: the request class (X-Sluice-Class) and the
 * SLO attainment counters.
 *
 * Owns the controllers (one per configured worker).  Event-loop thread.
 */
#include "gateway/dispatch_internal.h"

#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"

#include <string.h>
#include <strings.h>

int gw_job_class(struct gw_job *j)
{
	const char *cls = gw_request_header(j->req, "X-Sluice-Class");
	struct gw_api_error e;

	j->batch = cls ? strcasecmp(cls, "batch") == 0 : j->ident.batch;
	if (!cls || j->batch || strcasecmp(cls, "interactive") == 0)
		return 0;
	gw_api_error_set(&e, 400, NULL, NULL, "X-Sluice-Class: expected \"interactive\" or \"batch\"");
	gw_job_fail(j, &e, 0, "bad_request");
	return -1;
}

enum cm_status gw_dispatch_slo_new(struct gw_dispatch *d)
{
	size_t n = gw_workers_count(d->dep.workers);
	struct gw_slo_cfg wc = d->cfg.slo;

	if (!d->cfg.slo_enabled || n == 0)
		return CM_OK;
	d->slo_wait_ns = d->cfg.slo_queue_wait_ns ? d->cfg.slo_queue_wait_ns
						 : d->cfg.slo.ttft_p95_ns / 10;
	if (d->slo_wait_ns > d->cfg.slo.ttft_p95_ns * 3 / 4)
		d->slo_wait_ns = d->cfg.slo.ttft_p95_ns * 3 / 4;
	/* the TTFT target splits in two: the queue budget, held by admission,
	 * and the rest, from dispatch to the first token, held by the limit
	 * (fewer running requests prefill sooner; they do not wait less) */
	wc.ttft_p95_ns = d->cfg.slo.ttft_p95_ns - d->slo_wait_ns;
	/* the set point: the controller aims below the targets (its windows
	 * are small and ITL is known only at a generation's end, so the limit
	 * swings around its set point; the p95 of whole minutes must hold) */
	if (d->cfg.slo_setpoint > 0 && d->cfg.slo_setpoint < 1) {
		wc.ttft_p95_ns = (int64_t)((double)wc.ttft_p95_ns * d->cfg.slo_setpoint);
		wc.itl_p95_ns = (int64_t)((double)wc.itl_p95_ns * d->cfg.slo_setpoint);
	}
	/* an interactive request's wait is part of its TTFT: past the budget
	 * it is answered 503 with Retry-After rather than served late */
	if (d->slo_wait_ns < gw_queue_timeout(d->dep.queue, GW_QUEUE_INTERACTIVE))
		gw_queue_set_timeout(d->dep.queue, GW_QUEUE_INTERACTIVE, d->slo_wait_ns);
	gw_workers_set_batch_share(d->dep.workers, d->cfg.slo_batch_share);
	d->slo = cm_calloc(n, sizeof(*d->slo));
	if (!d->slo)
		return CM_ENOMEM;
	d->n_slo = n;
	for (size_t i = 0; i < n; i++) {
		/* the ceiling is the worker's static cap once its HELLO came;
		 * until then the hard bound */
		enum cm_status st = gw_slo_limit_init(&d->slo[i], &wc,
						      CM_LIM_MAX_RUNNING_SEQS_HARD);

		if (st != CM_OK)
			return st;
	}
	return CM_OK;
}

void gw_dispatch_slo_free(struct gw_dispatch *d)
{
	for (size_t i = 0; i < d->n_slo; i++)
		gw_slo_limit_deinit(&d->slo[i]);
	cm_free(d->slo);
	d->slo = NULL;
	d->n_slo = 0;
}

void gw_dispatch_slo_queued(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	size_t pos;
	int64_t est;

	if (!d->slo || j->batch || j->stage != GW_ST_QUEUED)
		return;
	/* its place among the interactive work waiting (the fair queue may
	 * serve a quiet tenant sooner: an upper bound) */
	pos = gw_queue_class_depth(d->dep.queue, GW_QUEUE_INTERACTIVE);
	est = gw_queue_wait_estimate_ns(d->dep.queue, pos);
	if (est < 0 || est <= d->slo_wait_ns)
		return;
	gw_queue_remove(d->dep.queue, &j->qi);
	j->stage = GW_ST_QUOTA; /* no longer queued */
	gw_job_failf(j, 503, "slo_overload", gw_queue_retry_after_s(d->dep.queue, pos),
		     "the service is at the limit that holds its latency targets; retry later");
}

/* A generation's mean gap between its tokens (choice 0), -1 below two. */
static int64_t job_itl_ns(const struct gw_job *j)
{
	if (!j->n_ch || j->ch[0].tokens < 2 || j->ch[0].last_ns <= j->first_ns)
		return -1;
	return (j->ch[0].last_ns - j->first_ns) / (j->ch[0].tokens - 1);
}

/* SLO attainment (sluice_gateway_slo_requests_total): every generation
 * request that ran, or was refused for capacity, against the targets. */
static void slo_account(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	enum gw_metrics_slo o;
	const char *oc = j->outcome ? j->outcome : "";

	if (j->em || !j->have_ident)
		return;
	if (j->status == 200 && j->first_ns) {
		int64_t ttft = j->first_ns - j->start_ns, itl = job_itl_ns(j);

		o = ttft <= d->cfg.slo.ttft_p95_ns &&
		    (!d->cfg.slo.itl_p95_ns || itl <= d->cfg.slo.itl_p95_ns)
			? GW_SLO_MET : GW_SLO_MISSED;
	} else if (strcmp(oc, "slo_overload") == 0 || strcmp(oc, "queue_timeout") == 0 ||
		   strcmp(oc, "global_queue_full") == 0 || strcmp(oc, "tenant_queue_full") == 0) {
		o = GW_SLO_REFUSED;
	} else {
		return;
	}
	if (d->dep.metrics)
		gw_metrics_slo(d->dep.metrics, j->ident.tenant, j->batch, o);
	/* interactive work refused for capacity: batch starts nothing for two
	 * queue budgets or a controller window, whichever is longer (under a
	 * sustained interactive overload there is no "rest" for batch to fill) */
	if (o == GW_SLO_REFUSED && !j->batch && d->slo &&
	    strcmp(oc, "tenant_queue_full") != 0) /* the tenant's bound, not the service's */
		d->batch_hold_until = cm_mono_ns() + (2 * d->slo_wait_ns > d->cfg.slo.window_ns
						      ? 2 * d->slo_wait_ns : d->cfg.slo.window_ns);
}

int gw_dispatch_slo_hold(struct gw_job *j)
{
	return j->batch && j->d->slo && cm_mono_ns() < j->d->batch_hold_until;
}

void gw_dispatch_slo_placed(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_worker_info wi;

	if (j->worker < 0 || (size_t)j->worker >= d->n_slo)
		return;
	gw_workers_info(d->dep.workers, (size_t)j->worker, &wi);
	/* saturated: this placement filled the worker up to its limit */
	j->slo_saturated = wi.inflight + wi.reserved >= gw_slo_limit_get(&d->slo[j->worker]);
}

static struct gw_slo_limit *slo_of(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;

	/* interactive generation on a worker */
	if (j->worker < 0 || (size_t)j->worker >= d->n_slo || j->em || j->batch)
		return NULL;
	return &d->slo[j->worker];
}

void gw_dispatch_slo_first(struct gw_job *j, int64_t now)
{
	struct gw_dispatch *d = j->d;
	struct gw_slo_limit *l = slo_of(j);
	struct gw_worker_info wi;

	if (!l)
		return;
	gw_workers_info(d->dep.workers, (size_t)j->worker, &wi);
	gw_slo_limit_set_ceiling(l, wi.cap ? wi.cap : 1);
	if (!gw_slo_limit_current(l, j->disp_ns))
		return; /* placed under an older limit */
	/* at the first token, not the end: a decision needs a window of
	 * first tokens, not of whole generations */
	if (gw_slo_limit_observe(l, now, now - j->disp_ns, -1, j->slo_saturated)) {
		gw_workers_set_limit(d->dep.workers, (size_t)j->worker, gw_slo_limit_get(l));
		cm_logf(CM_LOG_DEBUG, "slo_limit", "worker %s: limit %u (ttft p95 %lld ms, itl "
			"p95 %lld ms)", wi.name, gw_slo_limit_get(l),
			(long long)(l->last_ttft_p95 / 1000000), (long long)(l->last_itl_p95 / 1000000));
		gw_dispatch_pump_soon(d); /* a raised limit makes room */
	}
}

void gw_dispatch_slo_ended(struct gw_job *j)
{
	struct gw_slo_limit *l = j->status == 200 && j->first_ns ? slo_of(j) : NULL;

	slo_account(j);
	/* its time per output token, for the window in progress (-1, fewer
	 * than two tokens, is left out by gw_slo_limit_itl) */
	if (l && gw_slo_limit_current(l, j->disp_ns))
		gw_slo_limit_itl_at(l, job_itl_ns(j), j->disp_ns);
}
