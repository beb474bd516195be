/*
 * lua.h - every Lua script the gateway and sluicectl run in Redis.
 *
 * Each script is a .lua file beside the module that calls it
 * (the .lua files of gateway/gov/), compiled in at build time by one CMake helper
 * (gateway/redis/lua_embed.cmake) as gw_lua_src_<name>.  Their contracts
 * (KEYS, ARGV, reply) are written at the top of each file and in
 * docs/data-model.md and docs/quotas.md.
 *
 * The SHA-1 of each script (what EVALSHA names it by) is computed once, on
 * first use, under pthread_once; afterwards every function is a table
 * lookup, callable from any thread.
 */
#ifndef SLUICE_GATEWAY_REDIS_LUA_H
#define SLUICE_GATEWAY_REDIS_LUA_H

enum gw_lua_script {
	GW_LUA_QUOTA_ADMIT = 0,    /* check all limits, consume all or nothing */
	GW_LUA_QUOTA_FINISH,       /* release the lease, reconcile tokens */
	GW_LUA_QUOTA_RENEW,        /* extend a lease */
	GW_LUA_USAGE_RECORD,       /* count one finished request, once */
	GW_LUA_AUDIT_APPEND,       /* one hash-chained audit record */
	GW_LUA_AUTH_RECORDS,       /* a key's tenant and client records */
	GW_LUA_RECORDS_TENANT_CREATE,
	GW_LUA_RECORDS_CLIENT_CREATE,
	GW_LUA_RECORDS_FLAG,       /* disable / enable, announced */
	GW_LUA_RECORDS_UPDATE,     /* quota fields, announced */
	GW_LUA_RECORDS_KEY_ISSUE,
	GW_LUA_RECORDS_KEY_REVOKE,
	GW_LUA_RECORDS_KEY_SHORTEN,
	GW_LUA_RECORDS_TOUCH,      /* a key's last_used, if the key exists */
	GW_LUA_COUNT
};

/* NUL-terminated Lua source of the script; NULL out of range. */
const char *gw_lua_text(enum gw_lua_script s);
/* Its SHA-1 as 40 lower-case hex digits; NULL out of range. */
const char *gw_lua_sha1(enum gw_lua_script s);
/* The file's name without .lua ("quota_admit"); NULL out of range. */
const char *gw_lua_name(enum gw_lua_script s);

#endif
