/*
 * keys.h - the one naming scheme of Sluice's Redis keys and channels
 * (docs/data-model.md lists every key).
 *
 *   <ns><what>[:<name>[:<suffix>]]             records, indexes, channels:
 *                                              "sluice:tenant:acme",
 *                                              "sluice:tenant:acme:clients",
 *                                              "sluice:key:AbC...", "sluice:audit"
 *   <ns><area>:{<tenant>}[:c:<client>]:<leaf>  per-tenant counters in one
 *                                              cluster hash slot:
 *                                              "sluice:q:{acme}:rpm",
 *                                              "sluice:usage:{acme}:c:bot:2026-12-01"
 *
 * <ns> is the configured namespace ("sluice:" by default).  Names are
 * validated by their owners before they get here; these functions only
 * refuse what does not fit (CM_EINVAL).  Pure, any thread.
 */
#ifndef SLUICE_GATEWAY_REDIS_KEYS_H
#define SLUICE_GATEWAY_REDIS_KEYS_H

#include <stddef.h>

#include "common/status.h"

#define GW_REDIS_NS_DEFAULT "sluice:"
#define GW_REDIS_CHANNEL "revocations"   /* <ns>revocations: pub/sub */

/* "<ns><what>[:<name>[:<suffix>]]"; ns NULL = the default. */
enum cm_status gw_redis_key(char *out, size_t cap, const char *ns, const char *what,
			    const char *name, const char *suffix) CM_WUR;

/* "<ns><area>:{<tenant>}[:c:<client>]:<leaf>"; client NULL for the tenant's. */
enum cm_status gw_redis_tenant_key(char *out, size_t cap, const char *ns, const char *area,
				   const char *tenant, const char *client,
				   const char *leaf) CM_WUR;

#endif
