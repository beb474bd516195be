/*
 * quota_lua.h - the quota Lua scripts that Redis runs, and their SHA-1s.
 *
 * The scripts live in gateway/quota_{admit,finish,renew}.lua and are
 * compiled in at build time (quota_embed.cmake).  Their contracts (KEYS,
 * ARGV, reply) are written at the top of each .lua file and in
 * docs/quotas.md; gateway/gov/quota.h builds the calls and parses the replies.
 *
 * The SHA-1 of each script is computed once, on first use, under
 * pthread_once; afterwards every function is a table lookup, callable from
 * any thread.
 */
#ifndef SLUICE_GATEWAY_GOV_QUOTA_LUA_H
#define SLUICE_GATEWAY_GOV_QUOTA_LUA_H

enum gw_quota_lua_script {
	GW_QUOTA_LUA_ADMIT = 0,  /* check all limits, consume all or nothing */
	GW_QUOTA_LUA_FINISH = 1, /* release the lease, reconcile tokens */
	GW_QUOTA_LUA_RENEW = 2,  /* extend a lease */
	GW_QUOTA_LUA_COUNT
};

/* NUL-terminated Lua source of the script. */
const char *gw_quota_lua_text(enum gw_quota_lua_script s);
/* Its SHA-1 as 40 lower-case hex digits (what EVALSHA takes). */
const char *gw_quota_lua_sha1(enum gw_quota_lua_script s);

#endif
