/*
 * test_quota.c - gateway/gov/quota.c and the quota Lua scripts, run by a real
 * redis-server on a private Unix socket: RPM burst and retry-after, TPM
 * reserve and reconcile, concurrency leases (release, renew, expiry
 * recovery), daily budget, client overrides, all-or-nothing admission,
 * EVALSHA -> EVAL fallback, argument validation, reply parsing, and the
 * async calls on a libevent loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "gateway/gov/quota.h"
#include "gateway/redis/cmd.h"
#include "gateway/redis/lua.h"
#include "tests/gateway/redis_fixture.h"

static struct redis_fixture fx;
static redisContext *rc;

static int group_setup(void **state)
{
	struct timeval tv = {5, 0};

	(void)state;
	if (redis_fixture_start(&fx) != 0)
		return -1;
	rc = redisConnectUnixWithTimeout(fx.sock, tv);
	if (!rc || rc->err)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (rc)
		redisFree(rc);
	redis_fixture_stop(&fx);
	return 0;
}

static int flush(void **state)
{
	redisReply *r = redisCommand(rc, "FLUSHALL");

	(void)state;
	if (!r)
		return -1;
	freeReplyObject(r);
	return 0;
}

static struct gw_quota_subject subject(const char *tenant, const char *client)
{
	struct gw_quota_subject s;

	memset(&s, 0, sizeof(s));
	s.ns = "t:";
	s.tenant = tenant;
	s.client = client;
	return s;
}

static struct gw_quota_verdict admit(const struct gw_quota_subject *s,
				     int64_t tokens, const char *lease, int64_t ttl)
{
	struct gw_quota_verdict v;

	assert_int_equal(gw_quota_admit_sync(rc, s, tokens, lease, ttl, &v), CM_OK);
	return v;
}

static int64_t finish(const struct gw_quota_subject *s, int64_t est,
		      int64_t actual, const char *lease)
{
	int64_t released = -1;

	assert_int_equal(gw_quota_finish_sync(rc, s, est, actual, lease, &released),
			 CM_OK);
	return released;
}

/* Text of a Redis value (string type) or "" when absent. */
static void get_str(const char *key, char *out, size_t size)
{
	redisReply *r = redisCommand(rc, "GET %s", key);

	assert_non_null(r);
	out[0] = '\0';
	if (r->type == REDIS_REPLY_STRING)
		snprintf(out, size, "%s", r->str);
	freeReplyObject(r);
}

static long long int_cmd(const char *fmt, const char *key)
{
	redisReply *r = redisCommand(rc, fmt, key);
	long long v;

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	v = r->integer;
	freeReplyObject(r);
	return v;
}

static void qkey(char *out, const struct gw_quota_subject *s, int client,
		 enum gw_quota_key_kind k)
{
	assert_int_equal(gw_quota_key(out, GW_QUOTA_ARG_BYTES, s->ns, s->tenant,
				      client ? s->client : NULL, k), CM_OK);
}

static void test_keys_and_names(void **state)
{
	char k[GW_QUOTA_ARG_BYTES];
	char longname[GW_QUOTA_NAME_MAX + 2];

	(void)state;
	assert_int_equal(gw_quota_key(k, sizeof(k), NULL, "eng", NULL,
				      GW_QUOTA_KEY_RPM), CM_OK);
	assert_string_equal(k, "sluice:q:{eng}:rpm");
	assert_int_equal(gw_quota_key(k, sizeof(k), "x:", "eng", "ci-bot",
				      GW_QUOTA_KEY_CONCURRENCY), CM_OK);
	assert_string_equal(k, "x:q:{eng}:c:ci-bot:conc");
	assert_int_equal(gw_quota_key(k, sizeof(k), NULL, "e{g", NULL,
				      GW_QUOTA_KEY_RPM), CM_EINVAL);
	assert_int_equal(gw_quota_key(k, sizeof(k), NULL, "", NULL,
				      GW_QUOTA_KEY_RPM), CM_EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(gw_quota_key(k, sizeof(k), NULL, longname, NULL,
				      GW_QUOTA_KEY_RPM), CM_EINVAL);
	assert_int_equal(gw_quota_key(k, 8, NULL, "eng", NULL, GW_QUOTA_KEY_RPM),
			 CM_EINVAL);
	assert_string_equal(gw_quota_limit_name(GW_QUOTA_LIMIT_DAILY_TOKENS),
			    "daily_tokens");
	assert_string_equal(gw_quota_scope_name(GW_QUOTA_SCOPE_CLIENT), "client");
	assert_int_equal(strlen(gw_lua_sha1(GW_LUA_QUOTA_ADMIT)), 40);
	assert_string_not_equal(gw_lua_sha1(GW_LUA_QUOTA_ADMIT),
				gw_lua_sha1(GW_LUA_QUOTA_FINISH));
	assert_null(gw_lua_text(GW_LUA_COUNT));
}

static void test_bad_arguments(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_redis_cmd cmd;

	(void)state;
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, -1, "L", 1000), CM_EINVAL);
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, "", 1000), CM_EINVAL);
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, NULL, 1000), CM_EINVAL);
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, "L", 0), CM_EINVAL);
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, GW_QUOTA_VALUE_MAX + 1, "L",
					    1000), CM_EINVAL);
	s.tenant_limits.rpm = -5;
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, "L", 1000), CM_EINVAL);
	s.tenant_limits.rpm = 5;
	s.client = NULL;
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, "L", 1000), CM_EINVAL);
	s.client = "bot";
	assert_int_equal(gw_quota_cmd_admit(&cmd, 0, &s, 1, "L", 1000), CM_OK);
	/* EVALSHA <sha> 12 keys*12 limits*12 tokens lease ttl */
	assert_int_equal(cmd.argc, 2 + 1 + 12 + 12 + 3);
	assert_string_equal(cmd.argv[0], "EVALSHA");
	assert_string_equal(cmd.argv[1], gw_lua_sha1(GW_LUA_QUOTA_ADMIT));
	assert_string_equal(cmd.argv[3], "t:q:{eng}:rpm");
	assert_string_equal(cmd.argv[7], "t:q:{eng}:erpm");
	assert_string_equal(cmd.argv[9], "t:q:{eng}:c:bot:rpm");
	assert_string_equal(cmd.argv[15], "5");
	assert_string_equal(cmd.argv[19], "0"); /* embed_rpm: not an embedding request */
	gw_redis_cmd_use_eval(&cmd);
	assert_string_equal(cmd.argv[0], "EVAL");
	assert_string_equal(cmd.argv[1], gw_lua_text(GW_LUA_QUOTA_ADMIT));
}

static void test_parse_replies(void **state)
{
	redisReply e0 = {.type = REDIS_REPLY_INTEGER, .integer = 0};
	redisReply e1 = {.type = REDIS_REPLY_STRING, .str = "tenant", .len = 6};
	redisReply e2 = {.type = REDIS_REPLY_STRING, .str = "tpm", .len = 3};
	redisReply e3 = {.type = REDIS_REPLY_INTEGER, .integer = 1500};
	redisReply e4 = {.type = REDIS_REPLY_INTEGER, .integer = 42};
	redisReply *el[5] = {&e0, &e1, &e2, &e3, &e4};
	redisReply arr = {.type = REDIS_REPLY_ARRAY, .elements = 5, .element = el};
	redisReply err = {.type = REDIS_REPLY_ERROR, .str = "NOSCRIPT No matching script",
			  .len = 27};
	struct gw_quota_verdict v;
	int64_t n;

	(void)state;
	assert_int_equal(gw_quota_parse_admit(&arr, &v), CM_OK);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_TPM);
	assert_int_equal(v.retry_after_ms, 1500);
	assert_int_equal(v.now_ms, 42);
	e2.str = "bogus";
	e2.len = 5;
	assert_int_equal(gw_quota_parse_admit(&arr, &v), CM_EPROTO);
	e2.str = "rpm";
	e2.len = 3;
	e3.integer = 0; /* a refusal must say when to retry */
	assert_int_equal(gw_quota_parse_admit(&arr, &v), CM_EPROTO);
	e3.integer = 10;
	arr.elements = 4;
	assert_int_equal(gw_quota_parse_admit(&arr, &v), CM_EPROTO);
	assert_int_equal(gw_quota_parse_admit(&err, &v), CM_EPROTO);
	assert_int_equal(gw_quota_parse_admit(NULL, &v), CM_EPROTO);
	assert_int_equal(gw_redis_reply_is_noscript(&err), 1);
	assert_int_equal(gw_redis_reply_is_noscript(&e0), 0);
	assert_int_equal(gw_quota_parse_finish(&e0, &n), CM_EPROTO);
	assert_int_equal(gw_quota_parse_renew(&e3, &n), CM_OK);
	assert_int_equal(n, 10);
}

/* RPM N admits exactly N in a burst, then refuses until the next slot. */
static void test_rpm_burst(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_quota_verdict v;
	char lease[32];

	(void)state;
	s.tenant_limits.rpm = 5; /* one slot every 12 s */
	for (int i = 0; i < 5; i++) {
		snprintf(lease, sizeof(lease), "r%d", i);
		v = admit(&s, 0, lease, 1000);
		assert_int_equal(v.allowed, 1);
	}
	for (int i = 0; i < 3; i++) {
		v = admit(&s, 0, "r-over", 1000);
		assert_int_equal(v.allowed, 0);
		assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
		assert_int_equal(v.limit, GW_QUOTA_LIMIT_RPM);
		/* The next slot frees 12 s after the first admission. */
		assert_true(v.retry_after_ms > 10000);
		assert_true(v.retry_after_ms <= 12000);
	}
	/* A larger limit: exactly N again (integer GCRA arithmetic). */
	s.tenant = "big";
	s.tenant_limits.rpm = 7;
	int admitted = 0;
	for (int i = 0; i < 20; i++) {
		v = admit(&s, 0, "x", 1000);
		admitted += v.allowed;
	}
	assert_int_equal(admitted, 7);
}

/* Several processes (gateways) racing on one limit: exactly N admitted. */
static void test_rpm_parallel(void **state)
{
	enum { PROCS = 4, TRIES = 40, LIMIT = 37 };
	pid_t pids[PROCS];
	int fds[PROCS][2], total = 0;

	(void)state;
	for (int p = 0; p < PROCS; p++) {
		assert_int_equal(pipe(fds[p]), 0);
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			struct timeval tv = {5, 0};
			redisContext *c = redisConnectUnixWithTimeout(fx.sock, tv);
			struct gw_quota_subject s = subject("race", "bot");
			struct gw_quota_verdict v;
			char lease[32];
			int n = 0;

			s.tenant_limits.rpm = LIMIT;
			for (int i = 0; c && !c->err && i < TRIES; i++) {
				snprintf(lease, sizeof(lease), "p%d-%d", p, i);
				if (gw_quota_admit_sync(c, &s, 0, lease, 1000, &v) != CM_OK) {
					n = -1000;
					break;
				}
				n += v.allowed;
			}
			if (write(fds[p][1], &n, sizeof(n)) != sizeof(n))
				_exit(2);
			_exit(0);
		}
		close(fds[p][1]);
	}
	for (int p = 0; p < PROCS; p++) {
		int n = 0, status = 0;

		assert_int_equal(read(fds[p][0], &n, sizeof(n)), sizeof(n));
		close(fds[p][0]);
		assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		assert_true(n >= 0);
		total += n;
	}
	assert_int_equal(total, LIMIT);
}

/* TPM: the estimate is reserved, then corrected by the real count. */
static void test_tpm_reserve_reconcile(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_quota_verdict v;

	(void)state;
	s.tenant_limits.tpm = 1000; /* 60 ms per token */
	v = admit(&s, 600, "a", 1000);
	assert_int_equal(v.allowed, 1);
	v = admit(&s, 600, "b", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_TPM);
	/* 1200 tokens of a 1000-token minute: 200 * 60 ms to wait. */
	assert_true(v.retry_after_ms > 11000 && v.retry_after_ms <= 12000);
	/* An estimate larger than the whole limit can never pass. */
	v = admit(&s, 1001, "c", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.retry_after_ms, -1);
	/* The first request really used 100 tokens: 500 are given back. */
	finish(&s, 600, 100, "a");
	v = admit(&s, 600, "b", 1000);
	assert_int_equal(v.allowed, 1);
	/* ... and this one used 900, more than estimated: charged. */
	finish(&s, 600, 900, "b");
	v = admit(&s, 1, "d", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_TPM);
	assert_true(v.retry_after_ms >= 1);
}

/*
 * embed_rpm and embed_tpm bind embedding requests only (on top of rpm and
 * tpm, which bind every request): a generation request of the same tenant
 * is not held back by them; the embedding tokens are reconciled at finish
 * like tpm's; the limits read from the hash.
 */
static void test_embedding_limits(void **state)
{
	struct gw_quota_subject s = subject("emb", "app"), g;
	struct gw_quota_verdict v;
	redisReply *r;

	(void)state;
	s.tenant_limits.embed_rpm = 2;
	s.client_limits.embed_tpm = 1000;
	s.embedding = 1;
	g = s;
	g.embedding = 0;
	assert_int_equal(admit(&s, 10, "e1", 1000).allowed, 1);
	assert_int_equal(admit(&s, 10, "e2", 1000).allowed, 1);
	v = admit(&s, 10, "e3", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_EMBED_RPM);
	assert_string_equal(gw_quota_limit_name(v.limit), "embed_rpm");
	assert_true(v.retry_after_ms >= 1 && v.retry_after_ms <= 30000);
	/* generation: not an embedding request, admitted */
	for (int i = 0; i < 5; i++)
		assert_int_equal(admit(&g, 2000, "g", 1000).allowed, 1);
	/* embed_tpm of the client: 1000 tokens a minute */
	s.tenant_limits.embed_rpm = 0;
	v = admit(&s, 990, "e4", 1000);
	assert_int_equal(v.allowed, 0); /* 10 + 10 + 990 > 1000 */
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_CLIENT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_EMBED_TPM);
	/* the first two really used 1 token each: 18 given back */
	finish(&s, 10, 1, "e1");
	finish(&s, 10, 1, "e2");
	assert_int_equal(admit(&s, 990, "e4", 1000).allowed, 1);
	/* from the hash, as sluicectl writes them */
	r = redisCommand(rc, "HSET t:q-limits embed_rpm 7 embed_tpm 9000 rpm 3");
	freeReplyObject(r);
	r = redisCommand(rc, "HGETALL t:q-limits");
	{
		struct gw_quota_limits l;

		assert_int_equal(gw_quota_limits_parse(r, &l), CM_OK);
		assert_int_equal(l.embed_rpm, 7);
		assert_int_equal(l.embed_tpm, 9000);
		assert_int_equal(l.rpm, 3);
	}
	freeReplyObject(r);
}

/* Concurrency: a cap, release, renewal, and recovery of expired leases. */
static void test_concurrency_leases(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_quota_verdict v;
	char key[GW_QUOTA_ARG_BYTES];
	int64_t held = -1, start, deadline, recovered_ms = -1;

	(void)state;
	s.tenant_limits.concurrency = 2;
	assert_int_equal(admit(&s, 0, "L1", 60000).allowed, 1);
	assert_int_equal(admit(&s, 0, "L2", 60000).allowed, 1);
	v = admit(&s, 0, "L3", 60000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_CONCURRENCY);
	assert_true(v.retry_after_ms >= 1 && v.retry_after_ms <= 1000);
	/* Admitting a lease already held does not take a second slot. */
	assert_int_equal(admit(&s, 0, "L2", 60000).allowed, 1);
	qkey(key, &s, 0, GW_QUOTA_KEY_CONCURRENCY);
	assert_int_equal(int_cmd("ZCARD %s", key), 2);

	assert_int_equal(finish(&s, 0, 0, "L1"), 1);
	assert_int_equal(finish(&s, 0, 0, "L1"), 0); /* idempotent */
	assert_int_equal(admit(&s, 0, "L3", 60000).allowed, 1);
	assert_int_equal(finish(&s, 0, 0, "L2"), 1);
	assert_int_equal(finish(&s, 0, 0, "L3"), 1);

	/* A dead gateway's leases: short TTL, never released. */
	assert_int_equal(admit(&s, 0, "dead1", 200).allowed, 1);
	assert_int_equal(admit(&s, 0, "dead2", 200).allowed, 1);
	assert_int_equal(gw_quota_renew_sync(rc, &s, "dead1", 200, &held), CM_OK);
	assert_int_equal(held, 1);
	start = cm_mono_ns();
	deadline = start + 3 * CM_NS_PER_S;
	while (cm_mono_ns() < deadline) {
		struct timespec ts = {0, 10 * 1000 * 1000};

		v = admit(&s, 0, "alive", 60000);
		if (v.allowed) {
			recovered_ms = (cm_mono_ns() - start) / CM_NS_PER_MS;
			break;
		}
		assert_int_equal(v.limit, GW_QUOTA_LIMIT_CONCURRENCY);
		nanosleep(&ts, NULL); /* poll interval, bounded by the deadline */
	}
	assert_true(recovered_ms >= 0);
	/* Recovered within the lease TTL (plus polling and scheduling slack),
	 * and not before the first expiry. */
	assert_true(recovered_ms < 200 + 300);
	assert_true(recovered_ms >= 100);
	/* An expired lease cannot be renewed. */
	assert_int_equal(gw_quota_renew_sync(rc, &s, "dead2", 200, &held), CM_OK);
	assert_int_equal(held, 0);
}

static void test_daily_budget(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_quota_verdict v;
	int64_t to_midnight;

	(void)state;
	s.tenant_limits.daily_tokens = 1000;
	assert_int_equal(admit(&s, 400, "a", 1000).allowed, 1);
	assert_int_equal(admit(&s, 400, "b", 1000).allowed, 1);
	v = admit(&s, 400, "c", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_DAILY_TOKENS);
	to_midnight = 86400000 - v.now_ms % 86400000;
	assert_int_equal(v.retry_after_ms, to_midnight);
	v = admit(&s, 1001, "c", 1000);
	assert_int_equal(v.retry_after_ms, -1);
	/* Reconcile: "a" used only 100 tokens. */
	finish(&s, 400, 100, "a");
	assert_int_equal(admit(&s, 400, "c", 1000).allowed, 1);
	/* 900 used; 100 left. */
	assert_int_equal(admit(&s, 101, "d", 1000).allowed, 0);
	assert_int_equal(admit(&s, 100, "d", 1000).allowed, 1);
	/* Exhausted: even a tiny request is refused. */
	assert_int_equal(admit(&s, 1, "e", 1000).allowed, 0);
}

/* A client override stricter than the tenant binds that client only. */
static void test_client_override(void **state)
{
	struct gw_quota_subject a = subject("eng", "intern");
	struct gw_quota_subject b = subject("eng", "ci");
	struct gw_quota_verdict v;
	int n = 0;

	(void)state;
	a.tenant_limits.rpm = b.tenant_limits.rpm = 10;
	a.client_limits.rpm = 3;
	for (int i = 0; i < 3; i++)
		assert_int_equal(admit(&a, 0, "x", 1000).allowed, 1);
	v = admit(&a, 0, "x", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_CLIENT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_RPM);
	assert_true(v.retry_after_ms > 15000 && v.retry_after_ms <= 20000);
	/* The other client still has the rest of the tenant's burst. */
	for (int i = 0; i < 20; i++)
		n += admit(&b, 0, "y", 1000).allowed;
	assert_int_equal(n, 7);
	v = admit(&b, 0, "y", 1000);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_TENANT);
}

/* A refused request consumes nothing, whichever limit refuses. */
static void test_all_or_nothing(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct gw_quota_verdict v;
	char rpm[GW_QUOTA_ARG_BYTES], tpm[GW_QUOTA_ARG_BYTES];
	char conc[GW_QUOTA_ARG_BYTES], cdaily[GW_QUOTA_ARG_BYTES];
	char before_rpm[64], before_tpm[64], after[64];

	(void)state;
	s.tenant_limits.rpm = 100;
	s.tenant_limits.tpm = 100000;
	s.tenant_limits.concurrency = 10;
	s.client_limits.daily_tokens = 500;
	qkey(rpm, &s, 0, GW_QUOTA_KEY_RPM);
	qkey(tpm, &s, 0, GW_QUOTA_KEY_TPM);
	qkey(conc, &s, 0, GW_QUOTA_KEY_CONCURRENCY);
	qkey(cdaily, &s, 1, GW_QUOTA_KEY_DAILY);

	/* Refused by the client's daily budget (too big): no key written. */
	v = admit(&s, 600, "big", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.scope, GW_QUOTA_SCOPE_CLIENT);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_DAILY_TOKENS);
	assert_int_equal(int_cmd("EXISTS %s", rpm), 0);
	assert_int_equal(int_cmd("EXISTS %s", tpm), 0);
	assert_int_equal(int_cmd("EXISTS %s", conc), 0);
	assert_int_equal(int_cmd("EXISTS %s", cdaily), 0);

	/* One admitted request, then one refused by the daily budget only. */
	assert_int_equal(admit(&s, 400, "ok", 1000).allowed, 1);
	get_str(rpm, before_rpm, sizeof(before_rpm));
	get_str(tpm, before_tpm, sizeof(before_tpm));
	assert_true(before_rpm[0] && before_tpm[0]);
	v = admit(&s, 200, "over", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_DAILY_TOKENS);
	get_str(rpm, after, sizeof(after));
	assert_string_equal(after, before_rpm);
	get_str(tpm, after, sizeof(after));
	assert_string_equal(after, before_tpm);
	assert_int_equal(int_cmd("ZCARD %s", conc), 1);
	assert_int_equal(int_cmd("EXISTS %s", conc), 1);

	/* Refused by concurrency: rpm, tpm and daily untouched. */
	s.tenant_limits.concurrency = 1;
	v = admit(&s, 10, "third", 1000);
	assert_int_equal(v.allowed, 0);
	assert_int_equal(v.limit, GW_QUOTA_LIMIT_CONCURRENCY);
	get_str(rpm, after, sizeof(after));
	assert_string_equal(after, before_rpm);
	get_str(tpm, after, sizeof(after));
	assert_string_equal(after, before_tpm);
	/* Daily used is still 400 of 500: 100 more fit once a slot frees. */
	assert_int_equal(finish(&s, 400, 400, "ok"), 1);
	assert_int_equal(admit(&s, 100, "third", 1000).allowed, 1);

	/* Two limits refuse: the answer names the one that frees last. */
	s.tenant_limits.concurrency = 0;
	s.tenant_limits.rpm = 1; /* next slot in about 60 s */
	v = admit(&s, 50, "fourth", 1000);
	assert_int_equal(v.allowed, 0);
	assert_true(v.retry_after_ms >= 1000);
	if (86400000 - v.now_ms % 86400000 > 5000)
		assert_int_equal(v.limit, GW_QUOTA_LIMIT_DAILY_TOKENS);
}

/* Limits read from a tenant hash as sluicectl writes it. */
static void test_limits_from_hash(void **state)
{
	struct gw_quota_limits lim;
	redisReply *r;

	(void)state;
	r = redisCommand(rc, "HSET t:tenant:eng name eng weight 3 salt %s rpm 600 "
			 "daily_tokens 1000000 queue 0", "00ff");
	assert_non_null(r);
	freeReplyObject(r);
	r = redisCommand(rc, "HGETALL t:tenant:eng");
	assert_non_null(r);
	assert_int_equal(gw_quota_limits_parse(r, &lim), CM_OK);
	freeReplyObject(r);
	assert_int_equal(lim.rpm, 600);
	assert_int_equal(lim.tpm, 0);
	assert_int_equal(lim.concurrency, 0);
	assert_int_equal(lim.daily_tokens, 1000000);
	r = redisCommand(rc, "HSET t:tenant:eng tpm -1");
	freeReplyObject(r);
	r = redisCommand(rc, "HGETALL t:tenant:eng");
	assert_int_equal(gw_quota_limits_parse(r, &lim), CM_EFORMAT);
	freeReplyObject(r);
	r = redisCommand(rc, "HGETALL t:tenant:nobody");
	assert_int_equal(gw_quota_limits_parse(r, &lim), CM_OK); /* empty: none */
	assert_int_equal(lim.rpm, 0);
	freeReplyObject(r);
	r = redisCommand(rc, "PING");
	assert_int_equal(gw_quota_limits_parse(r, &lim), CM_EPROTO);
	freeReplyObject(r);
}

/* EVALSHA falls back to EVAL when Redis has forgotten the scripts. */
static void test_noscript_fallback(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	redisReply *r = redisCommand(rc, "SCRIPT FLUSH");

	(void)state;
	assert_non_null(r);
	freeReplyObject(r);
	s.tenant_limits.rpm = 2;
	assert_int_equal(admit(&s, 0, "a", 1000).allowed, 1);
	/* EVAL loaded it: the next EVALSHA succeeds directly. */
	r = redisCommand(rc, "SCRIPT EXISTS %s", gw_lua_sha1(GW_LUA_QUOTA_ADMIT));
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_int_equal(r->element[0]->integer, 1);
	freeReplyObject(r);
	assert_int_equal(admit(&s, 0, "b", 1000).allowed, 1);
	assert_int_equal(admit(&s, 0, "c", 1000).allowed, 0);
}

/* ---- async calls on a libevent loop ---- */

struct async_result {
	int calls;
	enum cm_status st;
	int have_verdict;
	struct gw_quota_verdict v;
	int64_t count;
};

static void async_done(void *arg, enum cm_status st,
		       const struct gw_quota_verdict *v, int64_t count)
{
	struct async_result *res = arg;

	res->calls++;
	res->st = st;
	res->have_verdict = v != NULL;
	if (v)
		res->v = *v;
	res->count = count;
}

/* Runs the loop until `res` got its callback (bounded by a deadline). */
static void run_until(struct event_base *base, struct async_result *res)
{
	int64_t deadline = cm_mono_ns() + 5 * CM_NS_PER_S;

	while (res->calls == 0 && cm_mono_ns() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(res->calls, 1);
}

static void test_async(void **state)
{
	struct gw_quota_subject s = subject("eng", "bot");
	struct event_base *base = event_base_new();
	redisAsyncContext *ac;
	struct async_result res[4];
	redisReply *r;

	(void)state;
	memset(res, 0, sizeof(res));
	assert_non_null(base);
	/* Start without the scripts so that the NOSCRIPT path is taken. */
	r = redisCommand(rc, "SCRIPT FLUSH");
	assert_non_null(r);
	freeReplyObject(r);
	ac = redisAsyncConnectUnix(fx.sock);
	assert_non_null(ac);
	assert_int_equal(ac->err, 0);
	assert_int_equal(redisLibeventAttach(ac, base), REDIS_OK);
	s.tenant_limits.concurrency = 1;

	assert_int_equal(gw_quota_admit_async(ac, &s, 10, "A", 60000, async_done,
					      &res[0]), CM_OK);
	run_until(base, &res[0]);
	assert_int_equal(res[0].st, CM_OK);
	assert_int_equal(res[0].have_verdict, 1);
	assert_int_equal(res[0].v.allowed, 1);

	assert_int_equal(gw_quota_admit_async(ac, &s, 10, "B", 60000, async_done,
					      &res[1]), CM_OK);
	run_until(base, &res[1]);
	assert_int_equal(res[1].st, CM_OK);
	assert_int_equal(res[1].v.allowed, 0);
	assert_int_equal(res[1].v.limit, GW_QUOTA_LIMIT_CONCURRENCY);

	assert_int_equal(gw_quota_renew_async(ac, &s, "A", 60000, async_done,
					      &res[2]), CM_OK);
	run_until(base, &res[2]);
	assert_int_equal(res[2].st, CM_OK);
	assert_int_equal(res[2].count, 1);
	assert_int_equal(res[2].have_verdict, 0);

	assert_int_equal(gw_quota_finish_async(ac, &s, 10, 12, "A", async_done,
					       &res[3]), CM_OK);
	run_until(base, &res[3]);
	assert_int_equal(res[3].st, CM_OK);
	assert_int_equal(res[3].count, 1);

	/* Invalid arguments: refused at once, no callback. */
	memset(&res[0], 0, sizeof(res[0]));
	assert_int_equal(gw_quota_admit_async(ac, &s, -1, "C", 60000, async_done,
					      &res[0]), CM_EINVAL);
	/* No memory for the command: refused at once, no callback. */
	cm_alloc_fail_after(0);
	assert_int_equal(gw_quota_admit_async(ac, &s, 1, "C", 60000, async_done,
					      &res[0]), CM_ENOMEM);
	assert_int_equal(gw_quota_finish_async(ac, &s, 1, 1, "C", async_done,
					       &res[0]), CM_ENOMEM);
	assert_int_equal(gw_quota_renew_async(ac, &s, "C", 60000, async_done,
					      &res[0]), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(res[0].calls, 0);
	/* A pending call is failed with CM_EIO when the context goes away. */
	assert_int_equal(gw_quota_admit_async(ac, &s, 1, "C", 60000, async_done,
					      &res[0]), CM_OK);
	redisAsyncFree(ac);
	assert_int_equal(res[0].calls, 1);
	assert_int_equal(res[0].st, CM_EIO);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keys_and_names),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_parse_replies),
		cmocka_unit_test_setup(test_rpm_burst, flush),
		cmocka_unit_test_setup(test_rpm_parallel, flush),
		cmocka_unit_test_setup(test_tpm_reserve_reconcile, flush),
		cmocka_unit_test_setup(test_embedding_limits, flush),
		cmocka_unit_test_setup(test_concurrency_leases, flush),
		cmocka_unit_test_setup(test_daily_budget, flush),
		cmocka_unit_test_setup(test_client_override, flush),
		cmocka_unit_test_setup(test_all_or_nothing, flush),
		cmocka_unit_test_setup(test_limits_from_hash, flush),
		cmocka_unit_test_setup(test_noscript_fallback, flush),
		cmocka_unit_test_setup(test_async, flush),
	};

	if (!redis_fixture_available()) {
		fprintf(stderr, "redis-server not found in PATH: skipping\n");
		return 77;
	}
	return cmocka_run_group_tests_name("gateway/quota", tests, group_setup,
					   group_teardown);
}
