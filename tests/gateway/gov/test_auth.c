/*
 * test_auth.c - gateway/gov/auth.c on the gateway's event loop against a
 * private redis-server (gateway/redis/conn.c carries the lookups and the
 * revocation subscription):
 *
 *  - no key, a malformed key, an unknown key id, a wrong secret: 401;
 *  - a valid key: 200 with its tenant, client, key id, weight, limits and
 *    the tenant's salt; then served from the cache;
 *  - a revocation published by the governance script reaches the cache and
 *    the revoke callback at once: the next check is 401 without waiting
 *    for the cache TTL; a disabled tenant is 401 too;
 *  - with Redis gone, a cached key keeps working and an uncached one is
 *    503 (the outage policy of docs/gateway.md).
 * Waits are loop turns bounded by a deadline, never sleeps.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "gateway/gov/auth.h"
#include "gateway/gov/records.h"
#include "gateway/redis/conn.h"
#include "tests/gateway/redis_fixture.h"

#define AT_DEADLINE_MS 10000

static struct redis_fixture fx;
static redisContext *rc;
static struct event_base *base;
static struct gw_redis *redis;
static struct gw_auth *auth;
static struct gw_key_pepper *pepper;

struct at_result {
	int called;
	int status;
	struct gw_auth_identity id;
};

static int revokes;
static char revoked_kind[16], revoked_target[160];

static void at_on_revoke(void *ctx, const char *kind, const char *target)
{
	(void)ctx;
	revokes++;
	snprintf(revoked_kind, sizeof(revoked_kind), "%s", kind);
	snprintf(revoked_target, sizeof(revoked_target), "%s", target);
}

/* Turns the loop until cond(arg) holds or the deadline passes. */
static int at_loop_until(int (*cond)(void *), void *arg)
{
	int64_t end = cm_mono_ns() + AT_DEADLINE_MS * 1000000LL;

	while (!cond(arg)) {
		struct timeval tv = { 0, 10000 };

		if (cm_mono_ns() > end)
			return -1;
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return 0;
}

static int at_redis_up(void *arg)
{
	(void)arg;
	return gw_redis_up(redis);
}

static int at_called(void *arg)
{
	return ((struct at_result *)arg)->called;
}

static int at_revoked(void *arg)
{
	return revokes >= *(int *)arg;
}

static void at_done(void *arg, int status, const struct gw_auth_identity *id)
{
	struct at_result *r = arg;

	r->called++;
	r->status = status;
	if (id)
		r->id = *id;
}

static struct at_result at_check(const char *authz)
{
	struct at_result r;
	struct gw_auth_lookup *h;

	memset(&r, 0, sizeof(r));
	gw_auth_check(auth, authz, at_done, &r, &h);
	assert_int_equal(at_loop_until(at_called, &r), 0);
	assert_int_equal(r.called, 1);
	return r;
}

static void at_gov(struct gw_redis_cmd *cmd)
{
	redisReply *r = gw_gov_send_sync(rc, cmd);
	enum gw_gov_result res;

	assert_non_null(r);
	assert_int_equal(gw_gov_parse(cmd, r, &res), CM_OK);
	assert_int_equal(res, GW_GOV_DONE);
	freeReplyObject(r);
}

/* A key for eng/bot; its id in id (may be NULL). */
static void at_issue(char key[GW_KEY_LEN + 1], char id[GW_KEY_ID_LEN + 1])
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	uint8_t mac[GW_KEY_HMAC_LEN];
	char hex[GW_KEY_HMAC_HEX_LEN + 1], kid[GW_KEY_ID_LEN + 1];

	assert_non_null(cmd);
	assert_int_equal(gw_key_generate(pepper, key, kid, mac), CM_OK);
	cm_hex_encode(mac, sizeof(mac), hex);
	assert_int_equal(gw_gov_cmd_key_issue(cmd, NULL, "eng", "bot", kid, hex, 1, 0), CM_OK);
	at_gov(cmd);
	if (id)
		snprintf(id, GW_KEY_ID_LEN + 1, "%s", kid);
	cm_free(cmd);
}

static int setup(void **state)
{
	static const char pep[] = "a pepper of at least thirty-two bytes for the test";
	const struct gw_auth_config ac = { "sluice:", 2000, 60000 };
	struct gw_redis_cmd *cmd;
	struct gw_gov_quotas q;
	char url[200], err[256];
	struct timeval tv = { 5, 0 };

	(void)state;
	signal(SIGPIPE, SIG_IGN); /* as the gateway: a closed Redis socket is an error, not a signal */
	if (!redis_fixture_available()) {
		fprintf(stderr, "redis-server not found in PATH: skipping\n");
		exit(77);
	}
	if (redis_fixture_start(&fx) != 0)
		return -1;
	rc = redisConnectUnixWithTimeout(fx.sock, tv);
	cmd = cm_malloc(sizeof(*cmd));
	base = event_base_new();
	if (!rc || rc->err || !cmd || !base ||
	    gw_key_pepper_from_bytes(pep, sizeof(pep) - 1, &pepper) != CM_OK)
		return -1;
	memset(&q, 0, sizeof(q));
	q.set[GW_GOV_F_WEIGHT] = 1;
	q.val[GW_GOV_F_WEIGHT] = 7;
	q.set[GW_GOV_F_RPM] = 1;
	q.val[GW_GOV_F_RPM] = 600;
	assert_int_equal(gw_gov_cmd_tenant_create(cmd, NULL, "eng", &q,
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 1), CM_OK);
	at_gov(cmd);
	memset(&q, 0, sizeof(q));
	assert_int_equal(gw_gov_cmd_client_create(cmd, NULL, "eng", "bot", &q, 1), CM_OK);
	at_gov(cmd);
	cm_free(cmd);
	snprintf(url, sizeof(url), "unix://%s", fx.sock);
	if (gw_redis_new(base, &(struct gw_redis_opts){ .url = url }, &redis, err, sizeof(err)) != CM_OK ||
	    gw_auth_new(base, &ac, pepper, redis, &auth, err, sizeof(err)) != CM_OK)
		return -1;
	gw_auth_set_revoke_cb(auth, at_on_revoke, NULL);
	return at_loop_until(at_redis_up, NULL);
}

static int teardown(void **state)
{
	(void)state;
	gw_redis_free(redis);
	gw_auth_free(auth);
	event_base_free(base);
	if (rc)
		redisFree(rc);
	gw_key_pepper_free(pepper);
	redis_fixture_stop(&fx);
	return 0;
}

static void test_refusals(void **state)
{
	char key[GW_KEY_LEN + 1], bad[GW_KEY_LEN + 16], other[GW_KEY_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	char kid[GW_KEY_ID_LEN + 1];

	(void)state;
	assert_int_equal(at_check(NULL).status, 401);
	assert_int_equal(at_check("Basic dXNlcjpwYXNz").status, 401);
	assert_int_equal(at_check("Bearer slk_not-a-key").status, 401);
	/* well-formed, never issued */
	assert_int_equal(gw_key_generate(pepper, other, kid, mac), CM_OK);
	snprintf(bad, sizeof(bad), "Bearer %s", other);
	assert_int_equal(at_check(bad).status, 401);
	/* a real id with another key's secret fails the checksum or the HMAC */
	at_issue(key, NULL);
	memcpy(other + GW_KEY_PREFIX_LEN, key + GW_KEY_PREFIX_LEN, GW_KEY_ID_LEN);
	snprintf(bad, sizeof(bad), "Bearer %s", other);
	assert_int_equal(at_check(bad).status, 401);
}

static void test_valid_key_then_cache(void **state)
{
	char key[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1], hdr[GW_KEY_LEN + 16];
	struct gw_auth_stats s0, s1;
	struct at_result r;

	(void)state;
	at_issue(key, kid);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	r = at_check(hdr);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.id.tenant, "eng");
	assert_string_equal(r.id.client, "bot");
	assert_string_equal(r.id.key_id, kid);
	assert_int_equal(r.id.weight, 7);
	assert_int_equal(r.id.tenant_limits.rpm, 600);
	assert_int_equal(r.id.salt[0], 0x00);
	assert_int_equal(r.id.salt[31], 0xff);
	gw_auth_get_stats(auth, &s0);
	r = at_check(hdr);
	assert_int_equal(r.status, 200);
	gw_auth_get_stats(auth, &s1);
	assert_int_equal(s1.cache_hits, s0.cache_hits + 1);
}

/* `key` with its secret's first character changed and the checksum
 * recomputed: well-formed, the right id, the wrong secret. */
static void at_wrong_secret(const char *key, char out[GW_KEY_LEN + 1])
{
	static const char b62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	size_t body = GW_KEY_LEN - GW_KEY_CRC_LEN, sec = GW_KEY_PREFIX_LEN + GW_KEY_ID_LEN + 1;
	uint32_t crc;

	memcpy(out, key, GW_KEY_LEN + 1);
	out[sec] = out[sec] == 'a' ? 'b' : 'a';
	crc = gw_key_crc32(out, body);
	for (int i = GW_KEY_CRC_LEN - 1; i >= 0; i--) {
		out[body + (size_t)i] = b62[crc % 62];
		crc /= 62;
	}
	{
		struct gw_key_parts parts;

		assert_int_equal(gw_key_parse(out, GW_KEY_LEN, &parts), CM_OK);
		gw_key_wipe(&parts);
	}
}

/*
 * Issue 13, finding 12: a wrong secret was refused from the cache when
 * the key id was cached (in use) and after a Redis lookup when it was
 * not, 64 against 101 us: an outsider holding a key id learnt whether it
 * was live.  A wrong secret now takes the unknown id's path either way.
 */
static void test_wrong_secret_same_path_cached_or_not(void **state)
{
	char key[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1], hdr[GW_KEY_LEN + 16];
	char bad[GW_KEY_LEN + 1], other[GW_KEY_LEN + 1], okid[GW_KEY_ID_LEN + 1];
	struct gw_auth_stats s0, s1;

	(void)state;
	at_issue(key, kid);
	at_issue(other, okid); /* never used: not cached */
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	assert_int_equal(at_check(hdr).status, 200); /* cached now */
	/* the cached id with a wrong secret: a Redis lookup, then 401; the
	 * uncached id with a wrong secret: the same steps */
	for (int k = 0; k < 2; k++) {
		at_wrong_secret(k == 0 ? key : other, bad);
		snprintf(hdr, sizeof(hdr), "Bearer %s", bad);
		gw_auth_get_stats(auth, &s0);
		assert_int_equal(at_check(hdr).status, 401);
		gw_auth_get_stats(auth, &s1);
		assert_int_equal(s1.cache_hits, s0.cache_hits);
		assert_int_equal(s1.cache_misses, s0.cache_misses + 1);
		assert_int_equal(s1.key_records, s0.key_records + 1);
	}
	/* and the right secret is still served from the cache */
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	gw_auth_get_stats(auth, &s0);
	assert_int_equal(at_check(hdr).status, 200);
	gw_auth_get_stats(auth, &s1);
	assert_int_equal(s1.cache_hits, s0.cache_hits + 1);
}

/* 1 when the key record's last_used (at_touched_name) is not "0". */
static char at_touched_name[GW_KEY_NAME_MAX + 64];

static int at_touched(void *arg)
{
	redisReply *r = redisCommand(rc, "HGET %s last_used", at_touched_name);
	int ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "0") != 0 &&
		 atoll(r->str) > 1700000000LL;

	(void)arg;
	if (r)
		freeReplyObject(r);
	return ok;
}

/* A key's last_used is written when it authenticates (issued as "0"). */
static void test_last_used_written(void **state)
{
	char key[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1], hdr[GW_KEY_LEN + 16];

	(void)state;
	at_issue(key, kid);
	assert_int_equal(gw_key_record_name(at_touched_name, sizeof(at_touched_name), "sluice:",
					    kid), CM_OK);
	assert_int_equal(at_touched(NULL), 0);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	assert_int_equal(at_check(hdr).status, 200);
	assert_int_equal(at_loop_until(at_touched, NULL), 0);
}

static void test_revocation_is_immediate(void **state)
{
	char key[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1], hdr[GW_KEY_LEN + 16];
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	int want;

	(void)state;
	assert_non_null(cmd);
	at_issue(key, kid);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	assert_int_equal(at_check(hdr).status, 200); /* cached now */
	want = revokes + 1;
	assert_int_equal(gw_gov_cmd_key_revoke(cmd, NULL, kid, 2), CM_OK);
	at_gov(cmd);
	assert_int_equal(at_loop_until(at_revoked, &want), 0);
	assert_string_equal(revoked_kind, "key");
	assert_string_equal(revoked_target, kid);
	assert_int_equal(at_check(hdr).status, 401); /* well inside the 60 s TTL */

	/* a disabled tenant refuses its keys the same way */
	at_issue(key, kid);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	assert_int_equal(at_check(hdr).status, 200);
	want = revokes + 1;
	assert_int_equal(gw_gov_cmd_flag(cmd, NULL, "eng", NULL, 1), CM_OK);
	at_gov(cmd);
	assert_int_equal(at_loop_until(at_revoked, &want), 0);
	assert_int_equal(at_check(hdr).status, 401);
	assert_int_equal(gw_gov_cmd_flag(cmd, NULL, "eng", NULL, 0), CM_OK);
	at_gov(cmd);
	cm_free(cmd);
}

/* Turns the loop one event at a time until the auth has read `n` key
 * records (the records script is then sent, not yet answered). */
static void at_until_key_records(uint64_t n)
{
	struct gw_auth_stats s;
	int64_t end = cm_mono_ns() + AT_DEADLINE_MS * 1000000LL;

	for (;;) {
		gw_auth_get_stats(auth, &s);
		if (s.key_records >= n)
			return;
		assert_true(cm_mono_ns() < end);
		event_base_loop(base, EVLOOP_ONCE);
	}
}

/*
 * Issue 13, finding 4: a revocation between the key lookup and the tenant
 * and client records was missed and the stale "valid" cached (the revoked
 * key worked for about a second).  Now the records script reads the revoked
 * flag again, and a lookup that saw a revocation message start over.
 */
static void test_revocation_during_lookup(void **state)
{
	char key[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1], hdr[GW_KEY_LEN + 16];
	char other[GW_KEY_LEN + 1], okid[GW_KEY_ID_LEN + 1];
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	struct gw_auth_lookup *h;
	struct gw_auth_stats s0, s1;
	struct at_result r;
	int want;

	(void)state;
	assert_non_null(cmd);
	at_issue(key, kid);
	at_issue(other, okid);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	gw_auth_get_stats(auth, &s0);
	memset(&r, 0, sizeof(r));
	gw_auth_check(auth, hdr, at_done, &r, &h);
	at_until_key_records(s0.key_records + 1);
	assert_int_equal(r.called, 0);
	/* revoked now: after its key record was read, before the rest */
	assert_int_equal(gw_gov_cmd_key_revoke(cmd, NULL, kid, 2), CM_OK);
	at_gov(cmd);
	assert_int_equal(at_loop_until(at_called, &r), 0);
	assert_int_equal(r.status, 401);
	/* nothing stale was cached */
	assert_int_equal(at_check(hdr).status, 401);

	/* another key revoked during a lookup: the lookup starts over and the
	 * key it checks is still valid */
	want = revokes + 1;
	at_issue(key, kid);
	snprintf(hdr, sizeof(hdr), "Bearer %s", key);
	gw_auth_get_stats(auth, &s0);
	memset(&r, 0, sizeof(r));
	gw_auth_check(auth, hdr, at_done, &r, &h);
	at_until_key_records(s0.key_records + 1);
	assert_int_equal(gw_gov_cmd_key_revoke(cmd, NULL, okid, 2), CM_OK);
	at_gov(cmd);
	assert_int_equal(at_loop_until(at_revoked, &want), 0);
	assert_int_equal(at_loop_until(at_called, &r), 0);
	assert_int_equal(r.status, 200);
	gw_auth_get_stats(auth, &s1);
	assert_int_equal(s1.restarts, s0.restarts + 1);
	cm_free(cmd);
}

static void test_redis_outage(void **state)
{
	char cached[GW_KEY_LEN + 1], fresh[GW_KEY_LEN + 1];
	char h1[GW_KEY_LEN + 16], h2[GW_KEY_LEN + 16];

	(void)state;
	at_issue(cached, NULL);
	at_issue(fresh, NULL);
	snprintf(h1, sizeof(h1), "Bearer %s", cached);
	snprintf(h2, sizeof(h2), "Bearer %s", fresh);
	assert_int_equal(at_check(h1).status, 200);
	redisFree(rc);
	rc = NULL;
	redis_fixture_stop(&fx);
	assert_int_equal(at_check(h1).status, 200); /* cached: served */
	assert_int_equal(at_check(h2).status, 503); /* unknown here: no answer */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_valid_key_then_cache),
		cmocka_unit_test(test_last_used_written),
		cmocka_unit_test(test_revocation_is_immediate),
		cmocka_unit_test(test_revocation_during_lookup),
		cmocka_unit_test(test_wrong_secret_same_path_cached_or_not),
		cmocka_unit_test(test_redis_outage),
	};

	return cmocka_run_group_tests_name("gateway_auth", tests, setup, teardown);
}
