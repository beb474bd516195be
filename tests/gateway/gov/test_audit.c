/*
 * test_audit.c - gateway/gov/audit.c and audit_append.lua against a private
 * redis-server: the chain built in Redis verifies in C (SHA-256 computed
 * by the script equals common/crypto.h's, across block boundaries),
 * charsets refused in C and in the script, concurrent async writers form
 * one chain, and verification names the first bad record after a record
 * is deleted, altered (re-added with a changed field), reordered, or the
 * tail is cut.
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
#include "gateway/gov/audit.h"
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
	return 0;
}

static void append(const char *actor, enum gw_audit_action a, const char *target,
		   struct gw_audit_entry *out)
{
	assert_int_equal(gw_audit_append_sync(rc, "t:", actor, a, target, GW_AUDIT_OK,
					      out), CM_OK);
}

/* Appends n records; ids[i] receives record i+1's stream id. */
static void build_chain(int n, char ids[][GW_AUDIT_ID_MAX])
{
	char target[32];

	for (int i = 0; i < n; i++) {
		struct gw_audit_entry e;

		snprintf(target, sizeof(target), "eng/bot-%d", i);
		append("alice", GW_AUDIT_CLIENT_CREATE, target, &e);
		assert_int_equal(e.seq, i + 1);
		if (ids)
			memcpy(ids[i], e.id, GW_AUDIT_ID_MAX);
	}
}

static struct gw_audit_verify verify(void)
{
	struct gw_audit_verify v;

	assert_int_equal(gw_audit_verify_sync(rc, "t:", &v), CM_OK);
	return v;
}

/* Reads the record with stream id `id`. */
static void read_entry(const char *id, struct gw_audit_entry *e)
{
	redisReply *r = redisCommand(rc, "XRANGE t:audit %s %s", id, id);

	assert_non_null(r);
	assert_int_equal(r->elements, 1);
	assert_int_equal(gw_audit_parse_entry(r->element[0], e), CM_OK);
	freeReplyObject(r);
}

/* XADDs a record with the given fields at the end of the stream. */
static void readd(const struct gw_audit_entry *e)
{
	redisReply *r = redisCommand(rc,
		"XADD t:audit * seq %lld prev %s actor %s action %s target %s "
		"time %lld result %s hash %s", (long long)e->seq, e->prev, e->actor,
		e->action, e->target, (long long)e->time_us, e->result, e->hash);

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	freeReplyObject(r);
}

static void xdel(const char *id)
{
	redisReply *r = redisCommand(rc, "XDEL t:audit %s", id);

	assert_non_null(r);
	assert_int_equal(r->integer, 1);
	freeReplyObject(r);
}

static void test_names_and_validation(void **state)
{
	struct gw_redis_cmd cmd;
	char long_target[GW_AUDIT_TARGET_MAX + 2];

	(void)state;
	assert_string_equal(gw_audit_action_name(GW_AUDIT_KEY_ROTATE), "key.rotate");
	assert_null(gw_audit_action_name(GW_AUDIT_ACTION_COUNT));
	assert_string_equal(gw_audit_result_name(GW_AUDIT_NOT_FOUND), "not_found");
	assert_true(gw_audit_actor_ok("alice"));
	assert_true(gw_audit_actor_ok("uid:1000"));
	assert_true(gw_audit_actor_ok("ops-bot@host.example"));
	assert_false(gw_audit_actor_ok(""));
	assert_false(gw_audit_actor_ok("-alice"));
	assert_false(gw_audit_actor_ok("alice bob"));
	assert_false(gw_audit_actor_ok("alice\n"));
	assert_true(gw_audit_target_ok("eng/ci-bot"));
	assert_true(gw_audit_target_ok("AbCdEf012345>XyZ987654321"));
	assert_false(gw_audit_target_ok("tell me a story"));
	assert_false(gw_audit_target_ok("{\"prompt\":1}"));
	memset(long_target, 'a', sizeof(long_target) - 1);
	long_target[sizeof(long_target) - 1] = '\0';
	assert_false(gw_audit_target_ok(long_target));
	assert_int_equal(gw_audit_cmd_append(&cmd, NULL, "alice", GW_AUDIT_KEY_ISSUE,
					     "eng/bot", GW_AUDIT_OK), CM_OK);
	assert_int_equal(gw_audit_cmd_append(&cmd, NULL, "alice", GW_AUDIT_ACTION_COUNT,
					     "eng/bot", GW_AUDIT_OK), CM_EINVAL);
	assert_int_equal(gw_audit_cmd_append(&cmd, NULL, "alice", GW_AUDIT_KEY_ISSUE,
					     "hello world", GW_AUDIT_OK), CM_EINVAL);
	assert_int_equal(gw_audit_cmd_append(&cmd, "BAD NS", "alice", GW_AUDIT_KEY_ISSUE,
					     "eng", GW_AUDIT_OK), CM_EINVAL);
}

/* The script checks the charsets too: free text sent around the C
 * builder is refused by Redis and nothing is appended. */
static void test_script_refuses_text(void **state)
{
	struct gw_redis_cmd cmd;
	redisReply *r;

	(void)state;
	assert_int_equal(gw_audit_cmd_append(&cmd, "t:", "alice", GW_AUDIT_KEY_ISSUE,
					     "eng", GW_AUDIT_OK), CM_OK);
	cmd.argv[7] = "please summarise this confidential memo";
	cmd.argvlen[7] = strlen(cmd.argv[7]);
	r = redisCommandArgv(rc, cmd.argc, cmd.argv, cmd.argvlen);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ERROR);
	assert_non_null(strstr(r->str, "bad target"));
	freeReplyObject(r);
	r = redisCommand(rc, "EXISTS t:audit");
	assert_int_equal(r->integer, 0);
	freeReplyObject(r);
}

static void test_chain_verifies(void **state)
{
	struct gw_audit_entry e, first, back;
	struct gw_audit_verify v;
	char target[GW_AUDIT_TARGET_MAX + 1], want[CM_SHA256_HEX_LEN + 1];

	(void)state;
	/* Empty log: intact. */
	v = verify();
	assert_int_equal(v.intact, 1);
	assert_int_equal(v.records, 0);

	append("alice", GW_AUDIT_TENANT_CREATE, "eng", &first);
	assert_int_equal(first.seq, 1);
	/* A maximal target makes the hashed text span three SHA-256 blocks. */
	memset(target, 'x', GW_AUDIT_TARGET_MAX);
	target[GW_AUDIT_TARGET_MAX] = '\0';
	append("uid:1000", GW_AUDIT_KEY_REVOKE, target, &e);
	assert_int_equal(e.seq, 2);
	read_entry(first.id, &back);
	assert_string_equal(back.prev, "0000000000000000000000000000000000000000000000000000000000000000");
	assert_string_equal(back.actor, "alice");
	assert_string_equal(back.action, "tenant.create");
	assert_string_equal(back.result, "ok");
	assert_true(back.time_us > 1700000000LL * 1000000);
	gw_audit_hash(&back, want);
	assert_string_equal(want, back.hash);
	read_entry(e.id, &back);
	assert_string_equal(back.prev, first.hash);
	assert_string_equal(back.target, target);
	gw_audit_hash(&back, want);
	assert_string_equal(want, back.hash);
	/* Every length of target from 1 to the cap: the script's SHA-256 and
	 * OpenSSL's agree (padding at every offset in a block). */
	for (int n = 1; n <= 70; n++) {
		target[n] = '\0';
		append("bob", GW_AUDIT_CLIENT_SET, target, NULL);
		target[n] = 'x';
	}
	v = verify();
	assert_int_equal(v.intact, 1);
	assert_int_equal(v.records, 72);
}

static void test_removed_record(void **state)
{
	char ids[10][GW_AUDIT_ID_MAX];
	struct gw_audit_verify v;

	(void)state;
	build_chain(10, ids);
	assert_int_equal(verify().intact, 1);
	xdel(ids[4]); /* record 5 */
	v = verify();
	assert_int_equal(v.intact, 0);
	assert_string_equal(v.bad_id, ids[5]); /* the record after the hole */
	assert_int_equal(v.bad_seq, 6);
	assert_non_null(strstr(v.reason, "seq"));
}

static void test_altered_record(void **state)
{
	char ids[6][GW_AUDIT_ID_MAX];
	struct gw_audit_entry e;
	struct gw_audit_verify v;

	(void)state;
	build_chain(6, ids);
	/* Edit the middle record: delete it and re-add it with a changed
	 * actor (streams cannot be edited in place). */
	read_entry(ids[2], &e);
	xdel(ids[2]);
	strcpy(e.actor, "mallory");
	readd(&e);
	v = verify();
	assert_int_equal(v.intact, 0);
	assert_string_equal(v.bad_id, ids[3]);
}

static void test_altered_last_record(void **state)
{
	char ids[4][GW_AUDIT_ID_MAX];
	struct gw_audit_entry e;
	struct gw_audit_verify v;

	(void)state;
	build_chain(4, ids);
	/* The last record re-added with another target but its old seq, prev
	 * and hash: only the hash check can see it. */
	read_entry(ids[3], &e);
	xdel(ids[3]);
	strcpy(e.target, "eng/other");
	readd(&e);
	v = verify();
	assert_int_equal(v.intact, 0);
	assert_int_equal(v.bad_seq, 4);
	assert_non_null(strstr(v.reason, "hash does not match"));
}

static void test_reordered_and_truncated(void **state)
{
	char ids[5][GW_AUDIT_ID_MAX];
	struct gw_audit_entry e3, e4;
	struct gw_audit_verify v;

	(void)state;
	build_chain(5, ids);
	/* Move record 3 after record 4 (both re-added, untouched). */
	read_entry(ids[2], &e3);
	read_entry(ids[3], &e4);
	xdel(ids[2]);
	xdel(ids[3]);
	xdel(ids[4]);
	readd(&e4);
	readd(&e3);
	v = verify();
	assert_int_equal(v.intact, 0);
	assert_int_equal(v.bad_seq, 4);

	/* A fresh chain whose last record is cut off: the head catches it. */
	assert_int_equal(flush(NULL), 0);
	build_chain(3, ids);
	xdel(ids[2]);
	v = verify();
	assert_int_equal(v.intact, 0);
	assert_string_equal(v.bad_id, "");
	assert_non_null(strstr(v.reason, "head"));
	/* And an appended record continues from the head, not the stream. */
}

struct async_res {
	int calls;
	enum cm_status st;
};

static void async_done(void *arg, enum cm_status st, const struct gw_audit_entry *e)
{
	struct async_res *r = arg;

	r->calls++;
	r->st = st;
	assert_true((st == CM_OK) == (e != NULL));
}

/* Two connections appending interleaved: one chain, seq 1..2n, intact. */
static void test_concurrent_async(void **state)
{
	struct event_base *base = event_base_new();
	redisAsyncContext *ac[2];
	struct async_res res[2][25];
	struct gw_audit_verify v;
	int64_t deadline;
	int done;

	(void)state;
	memset(res, 0, sizeof(res));
	for (int k = 0; k < 2; k++) {
		ac[k] = redisAsyncConnectUnix(fx.sock);
		assert_non_null(ac[k]);
		assert_int_equal(redisLibeventAttach(ac[k], base), REDIS_OK);
	}
	for (int i = 0; i < 25; i++)
		for (int k = 0; k < 2; k++)
			assert_int_equal(gw_audit_append_async(ac[k], "t:", k ? "bob" : "alice",
							       GW_AUDIT_KEY_ISSUE, "eng/bot",
							       GW_AUDIT_OK, async_done,
							       &res[k][i]), CM_OK);
	deadline = cm_mono_ns() + 5 * CM_NS_PER_S;
	do {
		event_base_loop(base, EVLOOP_ONCE);
		done = 0;
		for (int i = 0; i < 25; i++)
			done += res[0][i].calls + res[1][i].calls;
	} while (done < 50 && cm_mono_ns() < deadline);
	assert_int_equal(done, 50);
	for (int i = 0; i < 25; i++)
		assert_int_equal(res[0][i].st, CM_OK);
	v = verify();
	assert_int_equal(v.intact, 1);
	assert_int_equal(v.records, 50);
	/* Refused at once: bad target, no memory. */
	assert_int_equal(gw_audit_append_async(ac[0], "t:", "alice", GW_AUDIT_KEY_ISSUE,
					       "a b", GW_AUDIT_OK, async_done,
					       &res[0][0]), CM_EINVAL);
	cm_alloc_fail_after(0);
	assert_int_equal(gw_audit_append_async(ac[0], "t:", "alice", GW_AUDIT_KEY_ISSUE,
					       "eng", GW_AUDIT_OK, async_done,
					       &res[0][0]), CM_ENOMEM);
	cm_alloc_fail_reset();
	redisAsyncFree(ac[0]);
	redisAsyncFree(ac[1]);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_validation),
		cmocka_unit_test_setup(test_script_refuses_text, flush),
		cmocka_unit_test_setup(test_chain_verifies, flush),
		cmocka_unit_test_setup(test_removed_record, flush),
		cmocka_unit_test_setup(test_altered_record, flush),
		cmocka_unit_test_setup(test_altered_last_record, flush),
		cmocka_unit_test_setup(test_reordered_and_truncated, flush),
		cmocka_unit_test_setup(test_concurrent_async, flush),
	};

	if (!redis_fixture_available()) {
		fprintf(stderr, "redis-server not found in PATH: skipping\n");
		return 77;
	}
	return cmocka_run_group_tests_name("gateway/audit", tests, group_setup,
					   group_teardown);
}
