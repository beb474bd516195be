/*
 * test_usage.c - gateway/gov/usage.c and usage_record.lua against a private
 * redis-server: days and keys, idempotency per request id (a retried
 * write is counted once), day rollover at midnight UTC, error classes,
 * totals equal to the sum of records, validation, EVALSHA -> EVAL
 * fallback and the async call on a libevent loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "gateway/gov/usage.h"
#include "tests/gateway/redis_fixture.h"

static struct redis_fixture fx;
static redisContext *rc;

/* 2026-11-30T00:00:00Z */
#define DAY0 1795996800LL

static int group_setup(void **state)
{
	struct timeval tv = {5, 0};

	(void)state;
	if (redis_fixture_start(&fx) != 0)
		return -1;
	rc = redisConnectUnixWithTimeout(fx.sock, tv);
	return !rc || rc->err ? -1 : 0;
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
	r = redisCommand(rc, "SCRIPT FLUSH");
	if (r)
		freeReplyObject(r);
	return 0;
}

static struct gw_usage_record rec(const char *client, const char *id, int64_t t,
				  int64_t p, int64_t cached, int64_t c,
				  enum gw_usage_outcome o)
{
	struct gw_usage_record r;

	memset(&r, 0, sizeof(r));
	r.ns = "t:";
	r.tenant = "eng";
	r.client = client;
	r.request_id = id;
	r.end_unix_s = t;
	r.prompt_tokens = p;
	r.cached_prompt_tokens = cached;
	r.completion_tokens = c;
	r.outcome = o;
	return r;
}

static int record(const struct gw_usage_record *r)
{
	int counted = -1;

	assert_int_equal(gw_usage_record_sync(rc, r, &counted), CM_OK);
	return counted;
}

static struct gw_usage_counts read_day(const char *client, const char *day)
{
	struct gw_usage_counts c;

	assert_int_equal(gw_usage_read_sync(rc, "t:", "eng", client, day, &c), CM_OK);
	return c;
}

static void test_days(void **state)
{
	char day[GW_USAGE_DAY_LEN + 1], key[GW_USAGE_KEY_MAX];
	int64_t t;

	(void)state;
	assert_int_equal(gw_usage_day(DAY0, day), CM_OK);
	assert_string_equal(day, "2026-11-30");
	assert_int_equal(gw_usage_day(DAY0 - 1, day), CM_OK);
	assert_string_equal(day, "2026-11-29");
	assert_int_equal(gw_usage_day(0, day), CM_OK);
	assert_string_equal(day, "1970-01-01");
	assert_int_equal(gw_usage_day(951782400, day), CM_OK); /* leap day 2000 */
	assert_string_equal(day, "2000-02-29");
	assert_int_equal(gw_usage_day(-1, day), CM_EINVAL);
	assert_int_equal(gw_usage_day_parse("2026-11-30", &t), CM_OK);
	assert_int_equal(t, DAY0);
	assert_int_equal(gw_usage_day_parse("2000-02-29", &t), CM_OK);
	assert_int_equal(t, 951782400);
	assert_int_equal(gw_usage_day_parse("2026-02-29", &t), CM_EFORMAT);
	assert_int_equal(gw_usage_day_parse("2026-13-01", &t), CM_EFORMAT);
	assert_int_equal(gw_usage_day_parse("2026-1-01", &t), CM_EFORMAT);
	assert_int_equal(gw_usage_day_parse("2026/11/30", &t), CM_EFORMAT);
	assert_int_equal(gw_usage_key(key, "t:", "eng", NULL, "2026-11-30"), CM_OK);
	assert_string_equal(key, "t:usage:{eng}:2026-11-30");
	assert_int_equal(gw_usage_key(key, NULL, "eng", "bot", "2026-11-30"), CM_OK);
	assert_string_equal(key, "sluice:usage:{eng}:c:bot:2026-11-30");
	assert_int_equal(gw_usage_key(key, NULL, "Eng", NULL, "2026-11-30"), CM_EINVAL);
	assert_int_equal(gw_usage_key(key, NULL, "eng", "a/b", "2026-11-30"), CM_EINVAL);
	assert_int_equal(gw_usage_key(key, NULL, "eng", NULL, "yesterday"), CM_EINVAL);
}

static void test_bad_records(void **state)
{
	struct gw_redis_cmd cmd;
	struct gw_usage_record r = rec("bot", "r1", DAY0, 10, 0, 5, GW_USAGE_OK);

	(void)state;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_OK);
	r.request_id = "";
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.request_id = "has space";
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.request_id = "r1";
	r.prompt_tokens = -1;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.prompt_tokens = 10;
	r.cached_prompt_tokens = 11;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.cached_prompt_tokens = 0;
	r.completion_tokens = GW_USAGE_TOKENS_MAX + 1;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.completion_tokens = 1;
	r.outcome = GW_USAGE_OUTCOME_COUNT;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.outcome = GW_USAGE_OK;
	r.tenant = "a:b";
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	r.tenant = "eng";
	r.end_unix_s = -5;
	assert_int_equal(gw_usage_cmd_record(&cmd, 0, &r), CM_EINVAL);
	assert_string_equal(gw_usage_field_name(GW_USAGE_F_ERRORS_CANCELLED),
			    "errors_cancelled");
	assert_null(gw_usage_field_name(GW_USAGE_F_COUNT));
	assert_string_equal(gw_usage_outcome_name(GW_USAGE_QUOTA), "quota");
}

static void test_idempotent(void **state)
{
	struct gw_usage_record r = rec("bot", "gw1-0001", DAY0 + 100, 30, 8, 12,
				       GW_USAGE_OK);
	struct gw_usage_counts c;

	(void)state;
	assert_int_equal(record(&r), 1);
	/* The same request id again (a retry after a restart): not counted,
	 * even with different numbers. */
	assert_int_equal(record(&r), 0);
	r.completion_tokens = 99;
	assert_int_equal(record(&r), 0);
	c = read_day("bot", "2026-11-30");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 1);
	assert_int_equal(c.v[GW_USAGE_F_PROMPT_TOKENS], 30);
	assert_int_equal(c.v[GW_USAGE_F_CACHED_PROMPT_TOKENS], 8);
	assert_int_equal(c.v[GW_USAGE_F_COMPLETION_TOKENS], 12);
	c = read_day(NULL, "2026-11-30");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 1);
	assert_int_equal(c.v[GW_USAGE_F_COMPLETION_TOKENS], 12);
	/* The marker has a TTL, the hashes a longer one. */
	redisReply *t = redisCommand(rc, "TTL t:usage:{eng}:done:gw1-0001");
	assert_non_null(t);
	assert_true(t->integer > 0 && t->integer <= GW_USAGE_MARKER_TTL_S);
	freeReplyObject(t);
	t = redisCommand(rc, "TTL t:usage:{eng}:c:bot:2026-11-30");
	assert_non_null(t);
	assert_true(t->integer > GW_USAGE_MARKER_TTL_S &&
		    t->integer <= GW_USAGE_HASH_TTL_S);
	freeReplyObject(t);
}

static void test_day_rollover(void **state)
{
	struct gw_usage_record a = rec("bot", "a", DAY0 - 1, 5, 0, 1, GW_USAGE_OK);
	struct gw_usage_record b = rec("bot", "b", DAY0, 7, 0, 2, GW_USAGE_OK);
	struct gw_usage_counts c;

	(void)state;
	assert_int_equal(record(&a), 1);
	assert_int_equal(record(&b), 1);
	/* A retry of `a` after midnight still belongs to its own day (the
	 * day is that of end_unix_s) and is not counted again. */
	assert_int_equal(record(&a), 0);
	c = read_day("bot", "2026-11-29");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 1);
	assert_int_equal(c.v[GW_USAGE_F_PROMPT_TOKENS], 5);
	c = read_day("bot", "2026-11-30");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 1);
	assert_int_equal(c.v[GW_USAGE_F_PROMPT_TOKENS], 7);
	c = read_day("bot", "2026-12-01");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 0);
}

/* Many records over two clients, two days and every outcome, with some
 * retried: each day's totals equal the sums of the distinct records. */
static void test_totals(void **state)
{
	struct gw_usage_counts want[2][3], got;
	const char *clients[2] = {"bot", "laptop"};
	const char *days[2] = {"2026-11-30", "2026-12-01"};
	char id[32];

	(void)state;
	memset(want, 0, sizeof(want));
	for (int i = 0; i < 400; i++) {
		int cl = i % 2, d = (i / 7) % 2;
		enum gw_usage_outcome o = (enum gw_usage_outcome)(i % GW_USAGE_OUTCOME_COUNT);
		struct gw_usage_record r;
		int64_t p = i % 50, cached = (i % 50) / 3, comp = (i * 7) % 40;

		snprintf(id, sizeof(id), "req-%d", i);
		r = rec(clients[cl], id, DAY0 + d * 86400 + (i * 97) % 86400, p, cached,
			comp, o);
		assert_int_equal(record(&r), 1);
		if (i % 5 == 0)
			assert_int_equal(record(&r), 0); /* retried */
		for (int s = 0; s < 2; s++) {
			struct gw_usage_counts *w = s == 0 ? &want[d][2] : &want[d][cl];

			w->v[GW_USAGE_F_REQUESTS]++;
			w->v[GW_USAGE_F_PROMPT_TOKENS] += p;
			w->v[GW_USAGE_F_CACHED_PROMPT_TOKENS] += cached;
			w->v[GW_USAGE_F_COMPLETION_TOKENS] += comp;
			if (o != GW_USAGE_OK)
				w->v[GW_USAGE_F_ERRORS_AUTH + (int)o - 1]++;
		}
	}
	for (int d = 0; d < 2; d++) {
		for (int s = 0; s < 3; s++) {
			got = read_day(s < 2 ? clients[s] : NULL, days[d]);
			for (int f = 0; f < GW_USAGE_F_COUNT; f++)
				assert_int_equal(got.v[f], want[d][s].v[f]);
		}
	}
	/* The two clients add up to the tenant. */
	for (int f = 0; f < GW_USAGE_F_COUNT; f++)
		assert_int_equal(want[0][0].v[f] + want[0][1].v[f], want[0][2].v[f]);
}

struct async_res {
	int calls;
	enum cm_status st;
	int counted;
};

static void async_done(void *arg, enum cm_status st, int counted)
{
	struct async_res *r = arg;

	r->calls++;
	r->st = st;
	r->counted = counted;
}

static void run_until(struct event_base *base, struct async_res *res)
{
	int64_t deadline = cm_mono_ns() + 5 * CM_NS_PER_S;

	while (res->calls == 0 && cm_mono_ns() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	assert_int_equal(res->calls, 1);
}

static void test_async(void **state)
{
	struct gw_usage_record r = rec("bot", "async-1", DAY0, 4, 0, 3, GW_USAGE_CANCELLED);
	struct event_base *base = event_base_new();
	struct async_res res[3];
	struct gw_usage_counts c;
	redisAsyncContext *ac;

	(void)state;
	memset(res, 0, sizeof(res));
	ac = redisAsyncConnectUnix(fx.sock);
	assert_non_null(ac);
	assert_int_equal(redisLibeventAttach(ac, base), REDIS_OK);
	/* The script is not loaded (flushed): NOSCRIPT -> EVAL. */
	assert_int_equal(gw_usage_record_async(ac, &r, async_done, &res[0]), CM_OK);
	run_until(base, &res[0]);
	assert_int_equal(res[0].st, CM_OK);
	assert_int_equal(res[0].counted, 1);
	assert_int_equal(gw_usage_record_async(ac, &r, async_done, &res[1]), CM_OK);
	run_until(base, &res[1]);
	assert_int_equal(res[1].st, CM_OK);
	assert_int_equal(res[1].counted, 0);
	c = read_day("bot", "2026-11-30");
	assert_int_equal(c.v[GW_USAGE_F_REQUESTS], 1);
	assert_int_equal(c.v[GW_USAGE_F_ERRORS_CANCELLED], 1);
	assert_int_equal(c.v[GW_USAGE_F_COMPLETION_TOKENS], 3);
	/* Refused at once, no callback. */
	r.request_id = NULL;
	assert_int_equal(gw_usage_record_async(ac, &r, async_done, &res[2]), CM_EINVAL);
	r.request_id = "async-2";
	cm_alloc_fail_after(0);
	assert_int_equal(gw_usage_record_async(ac, &r, async_done, &res[2]), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(res[2].calls, 0);
	/* Pending when the context goes away: CM_EIO, and the caller keeps the
	 * record for a retry. */
	assert_int_equal(gw_usage_record_async(ac, &r, async_done, &res[2]), CM_OK);
	redisAsyncFree(ac);
	assert_int_equal(res[2].calls, 1);
	assert_int_equal(res[2].st, CM_EIO);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_days),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test_setup(test_idempotent, flush),
		cmocka_unit_test_setup(test_day_rollover, flush),
		cmocka_unit_test_setup(test_totals, flush),
		cmocka_unit_test_setup(test_async, flush),
	};

	if (!redis_fixture_available()) {
		fprintf(stderr, "redis-server not found in PATH: skipping\n");
		return 77;
	}
	return cmocka_run_group_tests_name("gateway/usage", tests, group_setup,
					   group_teardown);
}
