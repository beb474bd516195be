/*
 * keys.c - Redis key and channel names (see keys.h).
 */
#include "gateway/redis/keys.h"

#include <stdio.h>

enum cm_status gw_redis_key(char *out, size_t cap, const char *ns, const char *what,
			    const char *name, const char *suffix)
{
	int n;

	if (!ns)
		ns = GW_REDIS_NS_DEFAULT;
	n = snprintf(out, cap, "%s%s%s%s%s%s", ns, what, name ? ":" : "", name ? name : "",
		     suffix ? ":" : "", suffix ? suffix : "");
	return n < 0 || (size_t)n >= cap ? CM_EINVAL : CM_OK;
}

enum cm_status gw_redis_tenant_key(char *out, size_t cap, const char *ns, const char *area,
				   const char *tenant, const char *client, const char *leaf)
{
	int n;

	if (!ns)
		ns = GW_REDIS_NS_DEFAULT;
	if (client)
		n = snprintf(out, cap, "%s%s:{%s}:c:%s:%s", ns, area, tenant, client, leaf);
	else
		n = snprintf(out, cap, "%s%s:{%s}:%s", ns, area, tenant, leaf);
	return n < 0 || (size_t)n >= cap ? CM_EINVAL : CM_OK;
}
