/*
 * lua.c - the embedded scripts (lua_gen.c, generated) and their SHA-1s.
 * SHA-1 is what Redis names scripts by; it is used here only as that
 * name, not for security.
 */
#include "gateway/redis/lua.h"

#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/crypto.h"

extern const char gw_lua_src_quota_admit[];
extern const char gw_lua_src_quota_finish[];
extern const char gw_lua_src_quota_renew[];
extern const char gw_lua_src_usage_record[];
extern const char gw_lua_src_audit_append[];
extern const char gw_lua_src_auth_records[];
extern const char gw_lua_src_records_tenant_create[];
extern const char gw_lua_src_records_client_create[];
extern const char gw_lua_src_records_touch[];
extern const char gw_lua_src_records_flag[];
extern const char gw_lua_src_records_update[];
extern const char gw_lua_src_records_key_issue[];
extern const char gw_lua_src_records_key_revoke[];
extern const char gw_lua_src_records_key_shorten[];

static const struct {
	const char *name;
	const char *text;
} lua_scripts[GW_LUA_COUNT] = {
	[GW_LUA_QUOTA_ADMIT] = { "quota_admit", gw_lua_src_quota_admit },
	[GW_LUA_QUOTA_FINISH] = { "quota_finish", gw_lua_src_quota_finish },
	[GW_LUA_QUOTA_RENEW] = { "quota_renew", gw_lua_src_quota_renew },
	[GW_LUA_USAGE_RECORD] = { "usage_record", gw_lua_src_usage_record },
	[GW_LUA_AUDIT_APPEND] = { "audit_append", gw_lua_src_audit_append },
	[GW_LUA_AUTH_RECORDS] = { "auth_records", gw_lua_src_auth_records },
	[GW_LUA_RECORDS_TENANT_CREATE] = { "records_tenant_create",
					   gw_lua_src_records_tenant_create },
	[GW_LUA_RECORDS_CLIENT_CREATE] = { "records_client_create",
					   gw_lua_src_records_client_create },
	[GW_LUA_RECORDS_FLAG] = { "records_flag", gw_lua_src_records_flag },
	[GW_LUA_RECORDS_UPDATE] = { "records_update", gw_lua_src_records_update },
	[GW_LUA_RECORDS_KEY_ISSUE] = { "records_key_issue", gw_lua_src_records_key_issue },
	[GW_LUA_RECORDS_KEY_REVOKE] = { "records_key_revoke", gw_lua_src_records_key_revoke },
	[GW_LUA_RECORDS_KEY_SHORTEN] = { "records_key_shorten",
					 gw_lua_src_records_key_shorten },
	[GW_LUA_RECORDS_TOUCH] = { "records_touch", gw_lua_src_records_touch },
};

static char lua_sha[GW_LUA_COUNT][41];
static pthread_once_t lua_sha_once = PTHREAD_ONCE_INIT;

static void lua_sha_compute(void)
{
	for (int i = 0; i < GW_LUA_COUNT; i++) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int n = 0;

		EVP_Digest(lua_scripts[i].text, strlen(lua_scripts[i].text), md, &n,
			   EVP_sha1(), NULL);
		cm_hex_encode(md, 20, lua_sha[i]);
	}
}

const char *gw_lua_text(enum gw_lua_script s)
{
	return (unsigned)s < GW_LUA_COUNT ? lua_scripts[s].text : NULL;
}

const char *gw_lua_sha1(enum gw_lua_script s)
{
	if ((unsigned)s >= GW_LUA_COUNT)
		return NULL;
	pthread_once(&lua_sha_once, lua_sha_compute);
	return lua_sha[s];
}

const char *gw_lua_name(enum gw_lua_script s)
{
	return (unsigned)s < GW_LUA_COUNT ? lua_scripts[s].name : NULL;
}
