/*
 * quota_lua.c - access to the embedded quota scripts and their SHA-1s.
 *
 * The arrays gw_quota_lua_<name> are generated from the .lua files at build
 * time (quota_lua_gen.c).  SHA-1 is what Redis names scripts by; it is used
 * here only as that name, not for security.
 */
#include "gateway/gov/quota_lua.h"

#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/crypto.h"

extern const char gw_lua_src_quota_admit[];
extern const char gw_lua_src_quota_finish[];
extern const char gw_lua_src_quota_renew[];

static const char *const lua_text[GW_QUOTA_LUA_COUNT] = {
	[GW_QUOTA_LUA_ADMIT] = gw_lua_src_quota_admit,
	[GW_QUOTA_LUA_FINISH] = gw_lua_src_quota_finish,
	[GW_QUOTA_LUA_RENEW] = gw_lua_src_quota_renew,
};

static char lua_sha[GW_QUOTA_LUA_COUNT][41];
static pthread_once_t lua_sha_once = PTHREAD_ONCE_INIT;

static void lua_sha_compute(void)
{
	for (int i = 0; i < GW_QUOTA_LUA_COUNT; i++) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int n = 0;

		EVP_Digest(lua_text[i], strlen(lua_text[i]), md, &n, EVP_sha1(),
			   NULL);
		cm_hex_encode(md, 20, lua_sha[i]);
	}
}

const char *gw_quota_lua_text(enum gw_quota_lua_script s)
{
	if ((unsigned)s >= GW_QUOTA_LUA_COUNT)
		return NULL;
	return lua_text[s];
}

const char *gw_quota_lua_sha1(enum gw_quota_lua_script s)
{
	if ((unsigned)s >= GW_QUOTA_LUA_COUNT)
		return NULL;
	pthread_once(&lua_sha_once, lua_sha_compute);
	return lua_sha[s];
}
