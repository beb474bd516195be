/*
 * local_limit.c - per-gateway fallback quotas while Redis is unreachable
 * (see local_limit.h).  A linear-probing table keyed by "tenant" or
 * "tenant/client"; an entry with nothing in flight and a GCRA state in the
 * past carries no information and may be taken by another subject.
 */
#include "gateway/gov/local_limit.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gateway/gov/apikey.h"

#define LL_MIN_NS 60000000000LL /* one minute */

struct ll_entry {
	char name[2 * GW_KEY_NAME_MAX + 2]; /* "" = free */
	int64_t tat_ns;   /* GCRA theoretical arrival time */
	int64_t inflight;
};

struct gw_local_limit {
	double fraction;
	struct ll_entry e[GW_LOCAL_LIMIT_ENTRIES];
};

enum cm_status gw_local_limit_new(double fraction, struct gw_local_limit **out)
{
	*out = NULL;
	if (!(fraction > 0 && fraction <= 1))
		return CM_EINVAL;
	*out = cm_calloc(1, sizeof(**out));
	if (!*out)
		return CM_ENOMEM;
	(*out)->fraction = fraction;
	return CM_OK;
}

void gw_local_limit_free(struct gw_local_limit *ll)
{
	cm_free(ll);
}

int64_t gw_local_limit_scaled(const struct gw_local_limit *ll, int64_t global)
{
	int64_t v;

	if (global <= 0)
		return 0;
	v = (int64_t)((double)global * ll->fraction);
	return v < 1 ? 1 : v;
}

static uint32_t hash_name(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The entry of `name`, creating it (reusing an idle one other than
 * `keep`); NULL when full. */
static struct ll_entry *find(struct gw_local_limit *ll, const char *name, int64_t now_ns,
			     const struct ll_entry *keep)
{
	uint32_t h = hash_name(name) % GW_LOCAL_LIMIT_ENTRIES;
	struct ll_entry *idle = NULL;

	for (uint32_t i = 0; i < GW_LOCAL_LIMIT_ENTRIES; i++) {
		struct ll_entry *e = &ll->e[(h + i) % GW_LOCAL_LIMIT_ENTRIES];

		if (strcmp(e->name, name) == 0)
			return e;
		if (!idle && e != keep &&
		    (!e->name[0] || (e->inflight == 0 && e->tat_ns <= now_ns)))
			idle = e;
		if (!e->name[0])
			break;
	}
	if (!idle)
		return NULL;
	memset(idle, 0, sizeof(*idle));
	snprintf(idle->name, sizeof(idle->name), "%s", name);
	return idle;
}

/* 0 when the scope admits one more request now, else the wait in ms. */
static int64_t check(const struct gw_local_limit *ll, const struct ll_entry *e,
		     const struct gw_quota_limits *l, int64_t now_ns,
		     enum gw_quota_limit *which)
{
	int64_t rpm = gw_local_limit_scaled(ll, l->rpm);
	int64_t conc = gw_local_limit_scaled(ll, l->concurrency);

	if (conc && e->inflight >= conc) {
		*which = GW_QUOTA_LIMIT_CONCURRENCY;
		return 1000;
	}
	if (rpm) {
		int64_t t = LL_MIN_NS / rpm;
		int64_t tau = LL_MIN_NS - t; /* a burst of rpm requests */
		int64_t tat = e->tat_ns > now_ns ? e->tat_ns : now_ns;

		if (tat - now_ns > tau) {
			*which = GW_QUOTA_LIMIT_RPM;
			return (tat - now_ns - tau) / 1000000 + 1;
		}
	}
	return 0;
}

static void consume(const struct gw_local_limit *ll, struct ll_entry *e,
		    const struct gw_quota_limits *l, int64_t now_ns)
{
	int64_t rpm = gw_local_limit_scaled(ll, l->rpm);

	e->inflight++;
	if (rpm)
		e->tat_ns = (e->tat_ns > now_ns ? e->tat_ns : now_ns) + LL_MIN_NS / rpm;
}

void gw_local_limit_admit(struct gw_local_limit *ll, const struct gw_quota_subject *s,
			  int64_t now_ns, struct gw_quota_verdict *v)
{
	char cname[2 * GW_KEY_NAME_MAX + 2];
	struct ll_entry *te, *ce;
	enum gw_quota_limit which = GW_QUOTA_LIMIT_NONE;
	int64_t wait;

	memset(v, 0, sizeof(*v));
	snprintf(cname, sizeof(cname), "%s/%s", s->tenant, s->client);
	te = find(ll, s->tenant, now_ns, NULL);
	ce = te ? find(ll, cname, now_ns, te) : NULL;
	if (!te || !ce) {
		/* full of busy subjects: refuse rather than forget a limit */
		v->scope = GW_QUOTA_SCOPE_TENANT;
		v->limit = GW_QUOTA_LIMIT_CONCURRENCY;
		v->retry_after_ms = 1000;
		return;
	}
	wait = check(ll, te, &s->tenant_limits, now_ns, &which);
	if (wait) {
		v->scope = GW_QUOTA_SCOPE_TENANT;
	} else {
		wait = check(ll, ce, &s->client_limits, now_ns, &which);
		v->scope = wait ? GW_QUOTA_SCOPE_CLIENT : GW_QUOTA_SCOPE_NONE;
	}
	if (wait) {
		v->limit = which;
		v->retry_after_ms = wait;
		return;
	}
	consume(ll, te, &s->tenant_limits, now_ns);
	consume(ll, ce, &s->client_limits, now_ns);
	v->allowed = 1;
}

void gw_local_limit_finish(struct gw_local_limit *ll, const struct gw_quota_subject *s)
{
	char cname[2 * GW_KEY_NAME_MAX + 2];
	struct ll_entry *e;

	snprintf(cname, sizeof(cname), "%s/%s", s->tenant, s->client);
	/* an entry with requests in flight is never reused, so it is found */
	for (int k = 0; k < 2; k++) {
		const char *name = k == 0 ? s->tenant : cname;
		uint32_t h = hash_name(name) % GW_LOCAL_LIMIT_ENTRIES;

		for (uint32_t i = 0; i < GW_LOCAL_LIMIT_ENTRIES; i++) {
			e = &ll->e[(h + i) % GW_LOCAL_LIMIT_ENTRIES];
			if (strcmp(e->name, name) == 0) {
				if (e->inflight > 0)
					e->inflight--;
				break;
			}
			if (!e->name[0])
				break;
		}
	}
}
