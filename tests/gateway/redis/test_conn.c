/*
 * test_conn.c - the gateway's Redis connections (gateway/redis/conn.c)
 * against a real redis-server with `requirepass`: AUTH from a password
 * file before any command and before the subscription; a wrong password
 * never counts as up and is logged without the password; an ACL user; the
 * password file's and the user's bad values refused with their key named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "common/clock.h"
#include "common/log.h"
#include "gateway/redis/conn.h"
#include "tests/gateway/redis_fixture.h"

#define PASSWORD "correct horse battery staple"

static struct redis_fixture fx;
static struct event_base *base;
static char dir[] = "/tmp/sluice-redisconn-XXXXXX";
static char url[256], good[300], wrong[300], logpath[300];
static int log_fd = -1;

struct seen {
	int subs;
	int msgs;
	char last[64];
	int set_ok;
};

static void write_file(const char *path, const char *data, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(data, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* Turns the loop until cond(arg) holds or `ms` pass; 1 when it held. */
static int loop_until(int (*cond)(void *), void *arg, int ms)
{
	int64_t end = cm_mono_ns() + ms * CM_NS_PER_MS;

	while (!cond(arg)) {
		struct timeval tv = { 0, 10000 };

		if (cm_mono_ns() > end)
			return 0;
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return 1;
}

static int is_up(void *arg)
{
	return gw_redis_up(arg);
}

static int subscribed(void *arg)
{
	return ((struct seen *)arg)->subs > 0;
}

static int got_msg(void *arg)
{
	return ((struct seen *)arg)->msgs > 0;
}

static int got_set(void *arg)
{
	return ((struct seen *)arg)->set_ok != 0;
}

static void on_msg(void *ctx, const char *p, size_t n)
{
	struct seen *s = ctx;

	snprintf(s->last, sizeof(s->last), "%.*s", (int)n, p);
	s->msgs++;
}

static void on_sub(void *ctx)
{
	((struct seen *)ctx)->subs++;
}

static void on_set(redisAsyncContext *ac, void *reply, void *priv)
{
	const redisReply *r = reply;

	(void)ac;
	((struct seen *)priv)->set_ok = r && r->type == REDIS_REPLY_STATUS ? 1 : -1;
}

/* A synchronous client logged in as `user` (NULL: default) with `pw`. */
static redisContext *sync_client(const char *user, const char *pw)
{
	redisContext *c = redisConnectUnix(fx.sock);
	redisReply *r;

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	r = user ? redisCommand(c, "AUTH %s %s", user, pw) : redisCommand(c, "AUTH %s", pw);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
	return c;
}

static int setup(void **state)
{
	(void)state;
	if (!redis_fixture_available())
		exit(77);
	if (!mkdtemp(dir) || redis_fixture_start_auth(&fx, PASSWORD) != 0)
		return -1;
	snprintf(url, sizeof(url), "unix://%s", fx.sock);
	snprintf(good, sizeof(good), "%s/good", dir);
	snprintf(wrong, sizeof(wrong), "%s/wrong", dir);
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	write_file(good, PASSWORD "\n", 0600);
	write_file(wrong, "not the password\n", 0600);
	/* the log goes to a file the tests read */
	log_fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (log_fd < 0)
		return -1;
	cm_log_setup(CM_LOG_INFO, log_fd, "test");
	base = event_base_new();
	return base ? 0 : -1;
}

static int teardown(void **state)
{
	char p[400];

	(void)state;
	event_base_free(base);
	redis_fixture_stop(&fx);
	close(log_fd);
	cm_log_setup(CM_LOG_INFO, 2, "test");
	for (const char *const *n = (const char *const[]){ "good", "wrong", "log", "open", "empty",
							     NULL }; *n; n++) {
		snprintf(p, sizeof(p), "%s/%s", dir, *n);
		unlink(p);
	}
	rmdir(dir);
	return 0;
}

static char *read_log(void)
{
	static char buf[65536];
	FILE *f = fopen(logpath, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void test_auth_then_commands_and_subscription(void **state)
{
	struct gw_redis *r = NULL;
	struct seen s = { 0 };
	redisContext *c;
	redisReply *rep;
	char err[512];

	(void)state;
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = good }, &r, err, sizeof(err)), CM_OK);
	assert_int_equal(gw_redis_subscribe(r, "conn-test", on_msg, on_sub, NULL, &s), CM_OK);
	assert_true(loop_until(is_up, r, 10000));
	assert_true(loop_until(subscribed, &s, 10000));
	/* a command on the logged-in connection */
	assert_int_equal(redisAsyncCommand(gw_redis_async(r), on_set, &s, "SET conn-test 1"),
			 REDIS_OK);
	assert_true(loop_until(got_set, &s, 10000));
	assert_int_equal(s.set_ok, 1);
	/* a message published by another client arrives */
	c = sync_client(NULL, PASSWORD);
	rep = redisCommand(c, "PUBLISH conn-test hello");
	assert_non_null(rep);
	assert_int_equal(rep->integer, 1);
	freeReplyObject(rep);
	redisFree(c);
	assert_true(loop_until(got_msg, &s, 10000));
	assert_string_equal(s.last, "hello");
	gw_redis_free(r);
}

static void test_wrong_password_never_up(void **state)
{
	struct gw_redis *r = NULL;
	struct seen s = { 0 };
	char err[512], *log;

	(void)state;
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = wrong }, &r, err, sizeof(err)), CM_OK);
	assert_int_equal(gw_redis_subscribe(r, "conn-test", on_msg, on_sub, NULL, &s), CM_OK);
	/* 1 s: several attempts (the backoff starts at 100 ms), none up */
	assert_false(loop_until(is_up, r, 1000));
	assert_null(gw_redis_async(r));
	assert_int_equal(s.subs, 0);
	gw_redis_free(r);
	log = read_log();
	assert_non_null(strstr(log, "redis_auth_failed"));
	assert_non_null(strstr(log, "WRONGPASS"));
	assert_null(strstr(log, "not the password"));
	assert_null(strstr(log, PASSWORD));
}

static void test_acl_user(void **state)
{
	struct gw_redis *r = NULL;
	struct seen s = { 0 };
	redisContext *c = sync_client(NULL, PASSWORD);
	redisReply *rep;
	char err[512], pw[300];

	(void)state;
	rep = redisCommand(c, "ACL SETUSER gw on >gw-password ~* &* +@all");
	assert_non_null(rep);
	assert_int_equal(rep->type, REDIS_REPLY_STATUS);
	freeReplyObject(rep);
	redisFree(c);
	snprintf(pw, sizeof(pw), "%s/open", dir);
	write_file(pw, "gw-password", 0400);
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url, .user = "gw",
				      .password_file = pw }, &r, err, sizeof(err)), CM_OK);
	assert_int_equal(gw_redis_subscribe(r, "conn-test", on_msg, on_sub, NULL, &s), CM_OK);
	assert_true(loop_until(is_up, r, 10000));
	assert_int_equal(s.subs, 1);
	gw_redis_free(r);
	/* the same password as the default user's: refused */
	memset(&s, 0, sizeof(s));
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = pw }, &r, err, sizeof(err)), CM_OK);
	assert_int_equal(gw_redis_subscribe(r, "conn-test", on_msg, on_sub, NULL, &s), CM_OK);
	assert_false(loop_until(is_up, r, 500));
	assert_null(gw_redis_async(r));
	gw_redis_free(r);
}

static void test_bad_settings(void **state)
{
	struct gw_redis *r = (struct gw_redis *)1;
	char err[512], p[300];

	(void)state;
	snprintf(p, sizeof(p), "%s/open", dir);
	write_file(p, PASSWORD, 0644);
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = p }, &r, err, sizeof(err)), CM_EPERM);
	assert_null(r);
	assert_non_null(strstr(err, "gateway.redis.password_file"));
	assert_non_null(strstr(err, "mode 0644"));
	assert_null(strstr(err, PASSWORD));
	snprintf(p, sizeof(p), "%s/empty", dir);
	write_file(p, "\n", 0600);
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = p }, &r, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "empty file"));
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url,
				      .password_file = "/nonexistent/pw" }, &r, err, sizeof(err)),
			 CM_ENOTFOUND);
	assert_non_null(strstr(err, "/nonexistent/pw"));
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url, .user = "gw" },
				      &r, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "gateway.redis.user: expected with gateway.redis.password_file"));
	assert_int_equal(gw_redis_new(base, &(struct gw_redis_opts){ .url = url, .user = "a b",
				      .password_file = good }, &r, err, sizeof(err)), CM_EINVAL);
	assert_non_null(strstr(err, "gateway.redis.user"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth_then_commands_and_subscription),
		cmocka_unit_test(test_wrong_password_never_up),
		cmocka_unit_test(test_acl_user),
		cmocka_unit_test(test_bad_settings),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
