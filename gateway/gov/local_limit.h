/*
 * local_limit.h - per-gateway fallback quotas, used only while Redis is
 * unreachable (docs/gateway.md, "Redis outage").
 *
 * Each tenant and each client gets `fraction` of its global RPM and
 * concurrency limits, at least 1 where the global limit is set: RPM as a
 * GCRA (one request every 60 s / local rpm, a burst of local rpm), and a
 * count of requests admitted here and not yet finished.  TPM and daily
 * tokens are not enforced locally (they need the shared counters).
 *
 * Owns a fixed table of GW_LOCAL_LIMIT_ENTRIES subjects (tenant, or
 * tenant/client); when it is full of subjects with requests in flight, a
 * new subject is refused (fail closed).  Idle entries are reused.
 * One thread (the gateway loop); allocates only in gw_local_limit_new().
 */
#ifndef SLUICE_GATEWAY_GOV_LOCAL_LIMIT_H
#define SLUICE_GATEWAY_GOV_LOCAL_LIMIT_H

#include <stdint.h>

#include "common/status.h"
#include "gateway/gov/quota.h"

#define GW_LOCAL_LIMIT_ENTRIES 4096

struct gw_local_limit;

/* fraction in (0, 1]: the share of every global limit one gateway gets. */
enum cm_status gw_local_limit_new(double fraction, struct gw_local_limit **out) CM_WUR;
void gw_local_limit_free(struct gw_local_limit *ll);

/* A limit scaled by the fraction: 0 stays 0 (none), else at least 1. */
int64_t gw_local_limit_scaled(const struct gw_local_limit *ll, int64_t global);

/*
 * Admits one request of `s` at monotonic time now_ns: checks the tenant's
 * and the client's local RPM and concurrency, and consumes both only when
 * every check passes.  v->allowed says the verdict; when refused, scope,
 * limit and retry_after_ms (>= 1) say why.  Call gw_local_limit_finish()
 * exactly once for every admitted request.
 */
void gw_local_limit_admit(struct gw_local_limit *ll, const struct gw_quota_subject *s,
			  int64_t now_ns, struct gw_quota_verdict *v);
void gw_local_limit_finish(struct gw_local_limit *ll, const struct gw_quota_subject *s);

#endif
