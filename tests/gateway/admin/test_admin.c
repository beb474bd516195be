/*
 * test_admin.c - gateway/admin/admin.c behind the real gw_server (plain HTTP on
 * 127.0.0.1:0) with a private redis-server, driven by curl: credentials
 * (401/403), tenant/client create and patch, validation errors naming the
 * field, key issue (shown once, never listed, never stored), revoke and
 * its message on the revocation channel, rotation, usage, worker drain,
 * the audit chain afterwards, identical Redis state to sluicectl, and
 * SO_PEERCRED checks.
 *
 * The server and the hiredis async context run on one libevent loop in a
 * thread; the test thread drives curl and checks Redis synchronously.
 * Skips (77) without redis-server or curl.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/clock.h"
#include "gateway/admin/admin.h"
#include "gateway/gov/audit.h"
#include "gateway/http/server.h"
#include "gateway/gov/usage.h"
#include "tests/gateway/redis_fixture.h"

#define TOKEN "tok-0123456789abcdef0123456789abcdef-admin"

static struct redis_fixture fx;
static redisContext *rc;
static struct event_base *base;
static redisAsyncContext *ac;
static struct gw_server *srv;
static struct gw_admin *adm;
static pthread_t loop_thread;
static uint16_t port;
static char dir[64];
static char drained[64];

static int sh(const char *fmt, ...) CM_PRINTF(1, 2);
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc2;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc2 = system(cmd);
	return WIFEXITED(rc2) ? WEXITSTATUS(rc2) : -1;
}

/* Runs on the loop thread. */
static enum cm_status drain_cb(const char *name, void *arg)
{
	(void)arg;
	if (strcmp(name, "w0") != 0)
		return CM_ENOTFOUND;
	snprintf(drained, sizeof(drained), "%s", name);
	return CM_OK;
}

static void *loop_main(void *arg)
{
	(void)arg;
	event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	fclose(f);
	return chmod(path, 0600);
}

static int group_setup(void **state)
{
	struct gw_server_config c;
	struct gw_admin_config ac_cfg;
	struct timeval tv = {5, 0};
	char path[2][128], err[512];
	uint32_t uid = (uint32_t)getuid();

	(void)state;
	if (sh("command -v curl >/dev/null") != 0) {
		fprintf(stderr, "curl missing: skipping\n");
		exit(77);
	}
	signal(SIGPIPE, SIG_IGN);
	if (redis_fixture_start(&fx) != 0)
		return -1;
	rc = redisConnectUnixWithTimeout(fx.sock, tv);
	if (!rc || rc->err)
		return -1;
	snprintf(dir, sizeof(dir), "/tmp/sluice-admin-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path[0], sizeof(path[0]), "%s/creds", dir);
	snprintf(path[1], sizeof(path[1]), "%s/pepper", dir);
	if (write_file(path[0], "# admin credentials\nroot-admin " TOKEN "\n") != 0 ||
	    write_file(path[1], "0123456789abcdef0123456789abcdef0123456789\n") != 0)
		return -1;
	evthread_use_pthreads();
	base = event_base_new();
	ac = redisAsyncConnectUnix(fx.sock);
	if (!ac || ac->err || redisLibeventAttach(ac, base) != REDIS_OK)
		return -1;
	memset(&ac_cfg, 0, sizeof(ac_cfg));
	ac_cfg.credentials_file = path[0];
	ac_cfg.pepper_file = path[1];
	ac_cfg.allowed_uids = &uid;
	ac_cfg.n_allowed_uids = 1;
	ac_cfg.drain = drain_cb;
	if (gw_admin_new(&ac_cfg, ac, &adm, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "admin: %s\n", err);
		return -1;
	}
	gw_server_config_defaults(&c);
	c.listen_addr = "127.0.0.1";
	c.port = 0;
	c.plain_http = 1;
	if (gw_server_new(base, &c, gw_admin_handle, adm, &srv, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "server: %s\n", err);
		return -1;
	}
	port = gw_server_port(srv);
	return pthread_create(&loop_thread, NULL, loop_main, NULL);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	gw_server_free(srv);
	redisAsyncFree(ac);
	gw_admin_free(adm);
	event_base_loopbreak(base);
}

static int group_teardown(void **state)
{
	(void)state;
	event_base_once(base, -1, EV_TIMEOUT, stop_cb, NULL, NULL);
	pthread_join(loop_thread, NULL);
	/* the callbacks a freed bufferevent still had queued (deferred ones
	 * hold a reference on it) run now: event_base_free would drop them and
	 * leak the bufferevent (LeakSanitizer, one run in many under load) */
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	if (rc)
		redisFree(rc);
	redis_fixture_stop(&fx);
	sh("rm -rf %s", dir);
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

struct resp {
	int status;
	json_t *body;
	char raw[16384];
};

/*
 * curl METHOD /path [json body], with the admin token unless auth is
 * given ("" = no Authorization header).  Fills r (caller json_decrefs).
 */
static void call(struct resp *r, const char *auth, const char *method,
		 const char *path, const char *body)
{
	char cmd[8192], hdr[256] = "";
	FILE *f;
	size_t n;
	char *nl;

	if (!auth)
		auth = TOKEN;
	if (auth[0])
		snprintf(hdr, sizeof(hdr), "-H 'Authorization: Bearer %s'", auth);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS --noproxy '*' --max-time 10 -X %s %s %s%s%s "
		 "-w '\\n%%{http_code}' 'http://127.0.0.1:%u%s'", method, hdr,
		 body ? "-H 'Content-Type: application/json' --data-binary '" : "",
		 body ? body : "", body ? "'" : "", port, path);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(r->raw, 1, sizeof(r->raw) - 1, f);
	r->raw[n] = '\0';
	assert_int_equal(pclose(f), 0);
	nl = strrchr(r->raw, '\n');
	assert_non_null(nl);
	r->status = atoi(nl + 1);
	*nl = '\0';
	r->body = json_loads(r->raw, 0, NULL);
	if (!r->body)
		fprintf(stderr, "not JSON (%d): %s\n", r->status, r->raw);
	assert_non_null(r->body);
}

static void expect_status(const char *method, const char *path, const char *body,
			  int status, const char *field)
{
	struct resp r;

	call(&r, NULL, method, path, body);
	if (r.status != status)
		fprintf(stderr, "%s %s %s -> %d %s\n", method, path, body ? body : "",
			r.status, r.raw);
	assert_int_equal(r.status, status);
	if (field) {
		const char *f = json_string_value(json_object_get(json_object_get(r.body,
								  "error"), "field"));

		assert_non_null(f);
		assert_string_equal(f, field);
		/* The message names the field too. */
		assert_non_null(strstr(json_string_value(json_object_get(
			json_object_get(r.body, "error"), "message")), field));
	}
	json_decref(r.body);
}

static char *hget(const char *key, const char *field)
{
	static char v[256];
	redisReply *x = redisCommand(rc, "HGET %s %s", key, field);

	assert_non_null(x);
	v[0] = '\0';
	if (x->type == REDIS_REPLY_STRING)
		snprintf(v, sizeof(v), "%s", x->str);
	freeReplyObject(x);
	return v;
}

/* Every key name and value in Redis, concatenated (secrets must be absent). */
static char *dump_redis(void)
{
	size_t cap = 1 << 20, len = 0;
	char *out = calloc(1, cap);
	redisReply *keys = redisCommand(rc, "KEYS *");

	assert_non_null(out);
	assert_non_null(keys);
	for (size_t i = 0; i < keys->elements; i++) {
		const char *k = keys->element[i]->str;
		redisReply *t = redisCommand(rc, "TYPE %s", k), *v = NULL;

		len += (size_t)snprintf(out + len, cap - len, "%s\n", k);
		if (strcmp(t->str, "hash") == 0)
			v = redisCommand(rc, "HGETALL %s", k);
		else if (strcmp(t->str, "set") == 0)
			v = redisCommand(rc, "SMEMBERS %s", k);
		else if (strcmp(t->str, "string") == 0)
			v = redisCommand(rc, "GET %s", k);
		else if (strcmp(t->str, "stream") == 0)
			v = redisCommand(rc, "XRANGE %s - +", k);
		for (size_t j = 0; v && v->type == REDIS_REPLY_ARRAY && j < v->elements; j++) {
			const redisReply *e = v->element[j];

			if (e->type == REDIS_REPLY_STRING)
				len += (size_t)snprintf(out + len, cap - len, "%s\n", e->str);
			for (size_t m = 0; e->type == REDIS_REPLY_ARRAY && m < e->elements; m++) {
				const redisReply *g = e->element[m];

				for (size_t q = 0; g->type == REDIS_REPLY_ARRAY && q < g->elements; q++)
					len += (size_t)snprintf(out + len, cap - len, "%s\n",
								g->element[q]->str);
			}
		}
		if (v && v->type == REDIS_REPLY_STRING)
			len += (size_t)snprintf(out + len, cap - len, "%s\n", v->str);
		if (v)
			freeReplyObject(v);
		freeReplyObject(t);
		assert_true(len < cap - 4096);
	}
	freeReplyObject(keys);
	return out;
}

/* ---- tests --------------------------------------------------------------------- */

static void test_auth(void **state)
{
	struct resp r;

	(void)state;
	call(&r, "", "GET", "/admin/tenants", NULL);
	assert_int_equal(r.status, 401);
	json_decref(r.body);
	call(&r, "wrong-token-wrong-token-wrong-token-x", "GET", "/admin/tenants", NULL);
	assert_int_equal(r.status, 403);
	json_decref(r.body);
	call(&r, TOKEN "x", "POST", "/admin/tenants", "{\"name\":\"sneaky\"}");
	assert_int_equal(r.status, 403);
	json_decref(r.body);
	/* Nothing was written by the refused calls. */
	redisReply *x = redisCommand(rc, "EXISTS sluice:tenant:sneaky");
	assert_int_equal(x->integer, 0);
	freeReplyObject(x);
	call(&r, NULL, "GET", "/admin/nothing-here", NULL);
	assert_int_equal(r.status, 404);
	json_decref(r.body);
	call(&r, NULL, "DELETE", "/admin/tenants", NULL);
	assert_int_equal(r.status, 405);
	json_decref(r.body);
}

static void test_validation(void **state)
{
	(void)state;
	expect_status("POST", "/admin/tenants", "{\"name\":\"Eng\"}", 400, "name");
	expect_status("POST", "/admin/tenants", "{\"name\":\"a/b\"}", 400, "name");
	expect_status("POST", "/admin/tenants", "{\"name\":\"a\\tb\"}", 400, "name");
	expect_status("POST", "/admin/tenants", "{\"name\":\"..\"}", 400, "name");
	expect_status("POST", "/admin/tenants", "{\"rpm\":5}", 400, "name");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"rpm\":0}", 400, "rpm");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"tpm\":-5}", 400, "tpm");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"daily_tokens\":99999999999999}",
		      400, "daily_tokens");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"rpm\":\"60\"}", 400, "rpm");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"rpm\":1.5}", 400, "rpm");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"weight\":0}", 400, "weight");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"rpm\":null}", 400, "rpm");
	expect_status("POST", "/admin/tenants", "{\"name\":\"x\",\"bogus\":1}", 400, "bogus");
	expect_status("POST", "/admin/tenants", "{\"name\":", 400, NULL);
	expect_status("POST", "/admin/tenants", "[1,2]", 400, NULL);
	expect_status("GET", "/admin/tenants/Bad%20Name", NULL, 400, "tenant");
	expect_status("GET", "/admin/usage?from=2026-02-30", NULL, 400, "from");
	expect_status("GET", "/admin/audit?count=0", NULL, 400, "count");
	expect_status("POST", "/admin/keys/slk_notakey/revoke", NULL, 400, "key_id");
	redisReply *x = redisCommand(rc, "EXISTS sluice:tenant:x");
	assert_int_equal(x->integer, 0);
	freeReplyObject(x);
}

/* Tenants and clients: create, conflicts, list (no salt), read. */
static void flow_tenants(void)
{
	struct resp r;

	call(&r, NULL, "POST", "/admin/tenants",
	     "{\"name\":\"eng\",\"rpm\":600,\"concurrency\":8,\"weight\":3}");
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	expect_status("POST", "/admin/tenants", "{\"name\":\"eng\"}", 409, NULL);
	assert_string_equal(hget("sluice:tenant:eng", "rpm"), "600");
	assert_string_equal(hget("sluice:tenant:eng", "weight"), "3");
	assert_int_equal(strlen(hget("sluice:tenant:eng", "salt")), 64);

	call(&r, NULL, "GET", "/admin/tenants", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "tenants")), 1);
	assert_null(strstr(r.raw, "salt"));
	json_decref(r.body);

	call(&r, NULL, "POST", "/admin/tenants/eng/clients", "{\"name\":\"ci-bot\",\"rpm\":10}");
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	expect_status("POST", "/admin/tenants/nobody/clients", "{\"name\":\"x\"}", 404, NULL);
	expect_status("POST", "/admin/tenants/eng/clients", "{\"name\":\"x\",\"weight\":2}",
		      400, "weight");
	call(&r, NULL, "GET", "/admin/tenants/eng", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "clients")), 1);
	assert_int_equal(json_integer_value(json_object_get(r.body, "rpm")), 600);
	json_decref(r.body);
	expect_status("GET", "/admin/tenants/nobody", NULL, 404, NULL);
}

/* PATCH of a tenant and a client: what Redis holds and what is announced. */
static void flow_patch(redisContext *sub)
{
	redisReply *m;
	struct resp r;

	/* PATCH: set, clear and disable in one call; two messages. */
	call(&r, NULL, "PATCH", "/admin/tenants/eng",
	     "{\"rpm\":1200,\"concurrency\":null,\"disabled\":true}");
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	assert_string_equal(hget("sluice:tenant:eng", "rpm"), "1200");
	assert_string_equal(hget("sluice:tenant:eng", "concurrency"), "");
	assert_string_equal(hget("sluice:tenant:eng", "disabled"), "1");
	assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
	assert_string_equal(m->element[2]->str, "update tenant eng");
	freeReplyObject(m);
	assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
	assert_string_equal(m->element[2]->str, "disable tenant eng");
	freeReplyObject(m);
	expect_status("PATCH", "/admin/tenants/eng", "{}", 400, NULL);
	expect_status("PATCH", "/admin/tenants/eng", "{\"disabled\":\"yes\"}", 400, "disabled");
	expect_status("PATCH", "/admin/tenants/eng", "{\"queue\":-1}", 400, "queue");
	expect_status("PATCH", "/admin/tenants/nobody", "{\"rpm\":5}", 404, NULL);
	call(&r, NULL, "PATCH", "/admin/clients/eng/ci-bot", "{\"disabled\":false,\"rpm\":null}");
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	assert_string_equal(hget("sluice:client:eng/ci-bot", "rpm"), "");
	assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
	assert_string_equal(m->element[2]->str, "update client eng/ci-bot");
	freeReplyObject(m);
	assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
	assert_string_equal(m->element[2]->str, "enable client eng/ci-bot");
	freeReplyObject(m);
}

/* Keys: issued once, never listed, revoked (announced), rotated; no secret
 * stored.  *kid is the revoked key's id. */
static void flow_keys(redisContext *sub, char kid[32])
{
	redisReply *m;
	struct resp r;
	char key[128], key2[128], kid2[32], path[256];
	const char *s;
	char *dump;

	/* Key issue: returned once, with the documented format. */
	call(&r, NULL, "POST", "/admin/clients/eng/ci-bot/keys", "{\"expires_in\":3600}");
	assert_int_equal(r.status, 201);
	s = json_string_value(json_object_get(r.body, "key"));
	assert_non_null(s);
	assert_int_equal(strlen(s), 55);
	assert_memory_equal(s, "slk_", 4);
	snprintf(key, sizeof(key), "%s", s);
	snprintf(kid, 32, "%s", json_string_value(json_object_get(r.body, "key_id")));
	assert_memory_equal(key + 4, kid, 12);
	json_decref(r.body);
	expect_status("POST", "/admin/clients/eng/nobody/keys", NULL, 404, NULL);
	expect_status("POST", "/admin/clients/eng/ci-bot/keys", "{\"expires_in\":0}", 400,
		      "expires_in");
	/* Never listed. */
	call(&r, NULL, "GET", "/admin/clients/eng/ci-bot/keys", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "keys")), 1);
	assert_non_null(strstr(r.raw, kid));
	assert_null(strstr(r.raw, key + 17));
	assert_null(strstr(r.raw, "hmac"));
	json_decref(r.body);

	/* Revoke: flagged, and the message reaches the subscriber. */
	snprintf(path, sizeof(path), "/admin/keys/%s/revoke", kid);
	call(&r, NULL, "POST", path, NULL);
	assert_int_equal(r.status, 200);
	json_decref(r.body);
	assert_string_equal(hget("sluice:key:", "x"), ""); /* sanity of hget */
	{
		char kk[64], want[64];

		snprintf(kk, sizeof(kk), "sluice:key:%s", kid);
		assert_string_equal(hget(kk, "revoked"), "1");
		assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
		snprintf(want, sizeof(want), "revoke key %s", kid);
		assert_string_equal(m->element[2]->str, want);
		freeReplyObject(m);
	}
	expect_status("POST", "/admin/keys/AAAAAAAAAAAA/revoke", NULL, 404, NULL);
	snprintf(path, sizeof(path), "/admin/keys/%s/rotate", kid);
	expect_status("POST", path, NULL, 409, NULL); /* revoked: cannot rotate */

	/* Rotation of a live key. */
	call(&r, NULL, "POST", "/admin/clients/eng/ci-bot/keys", NULL);
	assert_int_equal(r.status, 201);
	snprintf(kid2, sizeof(kid2), "%s", json_string_value(json_object_get(r.body, "key_id")));
	snprintf(key2, sizeof(key2), "%s", json_string_value(json_object_get(r.body, "key")));
	json_decref(r.body);
	snprintf(path, sizeof(path), "/admin/keys/%s/rotate", kid2);
	call(&r, NULL, "POST", path, "{\"overlap\":7200}");
	assert_int_equal(r.status, 200);
	assert_string_equal(json_string_value(json_object_get(r.body, "replaces")), kid2);
	assert_int_equal(strlen(json_string_value(json_object_get(r.body, "key"))), 55);
	json_decref(r.body);
	assert_int_equal(redisGetReply(sub, (void **)&m), REDIS_OK);
	assert_non_null(strstr(m->element[2]->str, "update key"));
	freeReplyObject(m);

	/* No secret anywhere in Redis. */
	dump = dump_redis();
	assert_null(strstr(dump, key + 17));
	assert_null(strstr(dump, key2 + 17));
	free(dump);
}

/* Drain, then the audit log: every mutation, by the credential's name. */
static void flow_drain_audit(const char *kid)
{
	struct resp r;

	/* Worker drain goes to the gateway's callback. */
	call(&r, NULL, "POST", "/admin/workers/w0/drain", NULL);
	assert_int_equal(r.status, 202);
	json_decref(r.body);
	assert_string_equal(drained, "w0");
	expect_status("POST", "/admin/workers/w9/drain", NULL, 404, NULL);

	/* The audit log has every mutation, by the credential's name, and
	 * the chain verifies. */
	call(&r, NULL, "GET", "/admin/audit?count=1000", NULL);
	assert_int_equal(r.status, 200);
	{
		json_t *recs = json_object_get(r.body, "records"), *e;
		size_t i;
		int revoke = 0, conflict = 0;

		assert_true(json_array_size(recs) >= 12);
		json_array_foreach(recs, i, e) {
			assert_string_equal(json_string_value(json_object_get(e, "actor")),
					    "root-admin");
			if (strcmp(json_string_value(json_object_get(e, "action")), "key.revoke") == 0 &&
			    strcmp(json_string_value(json_object_get(e, "target")), kid) == 0)
				revoke++;
			if (strcmp(json_string_value(json_object_get(e, "result")), "conflict") == 0)
				conflict++;
		}
		assert_int_equal(revoke, 1);
		assert_true(conflict >= 2); /* tenant exists; revoked key rotate */
	}
	json_decref(r.body);
	{
		struct gw_audit_verify v;

		assert_int_equal(gw_audit_verify_sync(rc, NULL, &v), CM_OK);
		assert_int_equal(v.intact, 1);
		assert_true(v.records >= 12);
	}
}

/* The whole flow; later checks rely on earlier state. */
static void test_flow(void **state)
{
	struct timeval tv = {5, 0};
	redisContext *sub;
	redisReply *m;
	char kid[32];

	(void)state;
	/* A subscriber on the revocation channel. */
	sub = redisConnectUnixWithTimeout(fx.sock, tv);
	assert_non_null(sub);
	m = redisCommand(sub, "SUBSCRIBE sluice:revocations");
	assert_non_null(m);
	freeReplyObject(m);
	flow_tenants();
	flow_patch(sub);
	flow_keys(sub, kid);
	flow_drain_audit(kid);
	redisFree(sub);
}

static void test_usage(void **state)
{
	struct gw_usage_record u;
	struct resp r;
	int counted;
	char day[16], path[256];
	int64_t now = cm_wall_ns() / CM_NS_PER_S;

	(void)state;
	memset(&u, 0, sizeof(u));
	u.tenant = "eng";
	u.client = "ci-bot";
	u.end_unix_s = now;
	for (int i = 0; i < 3; i++) {
		char id[16];

		snprintf(id, sizeof(id), "u-%d", i);
		u.request_id = id;
		u.prompt_tokens = 10 + i;
		u.completion_tokens = 5;
		u.outcome = i == 2 ? GW_USAGE_QUOTA : GW_USAGE_OK;
		assert_int_equal(gw_usage_record_sync(rc, &u, &counted), CM_OK);
	}
	assert_int_equal(gw_usage_day(now, day), CM_OK);
	snprintf(path, sizeof(path), "/admin/usage?tenant=eng&client=ci-bot&from=%s&to=%s",
		 day, day);
	call(&r, NULL, "GET", path, NULL);
	assert_int_equal(r.status, 200);
	{
		json_t *rows = json_object_get(r.body, "rows");

		assert_int_equal(json_array_size(rows), 2); /* tenant and client */
		for (size_t i = 0; i < 2; i++) {
			json_t *row = json_array_get(rows, i);

			assert_int_equal(json_integer_value(json_object_get(row, "requests")), 3);
			assert_int_equal(json_integer_value(json_object_get(row, "prompt_tokens")), 33);
			assert_int_equal(json_integer_value(json_object_get(row, "errors_quota")), 1);
		}
	}
	json_decref(r.body);
	/* All tenants, default range (today). */
	call(&r, NULL, "GET", "/admin/usage", NULL);
	assert_int_equal(r.status, 200);
	assert_int_equal(json_array_size(json_object_get(r.body, "rows")), 1);
	json_decref(r.body);
	expect_status("GET", "/admin/usage?client=ci-bot", NULL, 400, "client");
	expect_status("GET", "/admin/usage?tenant=eng&from=2000-01-01&to=2026-01-01", NULL, 400,
		      "from");
}

/* sluicectl and the API write the same fields with the same values. */
static void test_same_state_as_sluicectl(void **state)
{
	const char *bd = getenv("SLUICE_BUILD_DIR");
	char ctl[512];
	redisReply *a, *b;
	struct resp r;

	(void)state;
	if (!bd) {
		skip();
		return;
	}
	snprintf(ctl, sizeof(ctl), "%s/tools/sluicectl", bd);
	if (access(ctl, X_OK) != 0) {
		skip();
		return;
	}
	assert_int_equal(sh("%s --redis unix://%s tenant create viactl --rpm 60 --tpm 5000 "
			    "--queue 0 >/dev/null", ctl, fx.sock), 0);
	call(&r, NULL, "POST", "/admin/tenants",
	     "{\"name\":\"viaapi\",\"rpm\":60,\"tpm\":5000,\"queue\":0}");
	assert_int_equal(r.status, 201);
	json_decref(r.body);
	a = redisCommand(rc, "HGETALL sluice:tenant:viactl");
	b = redisCommand(rc, "HGETALL sluice:tenant:viaapi");
	assert_int_equal(a->elements, b->elements);
	for (size_t i = 0; i < a->elements; i += 2) {
		const char *f = a->element[i]->str;
		char kb[64];

		if (strcmp(f, "salt") == 0 || strcmp(f, "created") == 0 || strcmp(f, "name") == 0)
			continue;
		snprintf(kb, sizeof(kb), "%s", hget("sluice:tenant:viaapi", f));
		assert_string_equal(a->element[i + 1]->str, kb);
	}
	freeReplyObject(a);
	freeReplyObject(b);
	a = redisCommand(rc, "SISMEMBER sluice:tenants viaapi");
	assert_int_equal(a->integer, 1);
	freeReplyObject(a);
	/* sluicectl's audit records join the same chain. */
	{
		struct gw_audit_verify v;

		assert_int_equal(gw_audit_verify_sync(rc, NULL, &v), CM_OK);
		assert_int_equal(v.intact, 1);
	}
}

static void test_peer_check(void **state)
{
	int sv[2];
	uint32_t uid = 0;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(gw_admin_peer_check(adm, sv[0], &uid), CM_OK);
	assert_int_equal(uid, (uint32_t)getuid());
	close(sv[0]);
	close(sv[1]);
	/* Not a Unix socket: the credentials cannot be read. */
	assert_int_equal(gw_admin_peer_check(adm, 0 /* stdin */, &uid) == CM_OK, 0);
	/* An admin that allows another uid only: this peer is refused. */
	{
		struct gw_admin_config c;
		struct gw_admin *other = NULL;
		uint32_t someone = (uint32_t)getuid() + 4242;
		char err[256];

		memset(&c, 0, sizeof(c));
		c.allowed_uids = &someone;
		c.n_allowed_uids = 1;
		assert_int_equal(gw_admin_new(&c, NULL, &other, err, sizeof(err)), CM_OK);
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		assert_int_equal(gw_admin_peer_check(other, sv[0], &uid), CM_EPERM);
		assert_int_equal(uid, (uint32_t)getuid());
		close(sv[0]);
		close(sv[1]);
		gw_admin_free(other);
	}
}

static void test_bad_config(void **state)
{
	struct gw_admin_config c;
	struct gw_admin *a = NULL;
	char path[128], err[512];

	(void)state;
	memset(&c, 0, sizeof(c));
	snprintf(path, sizeof(path), "%s/loose", dir);
	assert_int_equal(write_file(path, "root " TOKEN "\n"), 0);
	assert_int_equal(chmod(path, 0644), 0);
	c.credentials_file = path;
	assert_int_equal(gw_admin_new(&c, NULL, &a, err, sizeof(err)), CM_EPERM);
	assert_non_null(strstr(err, "chmod 600"));
	assert_null(strstr(err, TOKEN));
	assert_int_equal(write_file(path, "root short\n"), 0);
	assert_int_equal(gw_admin_new(&c, NULL, &a, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "line 1"));
	c.ns = "BAD NS";
	assert_int_equal(gw_admin_new(&c, NULL, &a, err, sizeof(err)), CM_EINVAL);
	assert_null(a);
}

/* The audit append fails (the stream key has the wrong type): the write
 * is still reported, with "audit": "failed", and the chain is untouched. */
static void test_audit_failure(void **state)
{
	redisReply *x;
	struct resp r;
	struct gw_audit_verify v;

	(void)state;
	x = redisCommand(rc, "RENAME sluice:audit sluice:audit-saved");
	freeReplyObject(x);
	x = redisCommand(rc, "SET sluice:audit not-a-stream");
	freeReplyObject(x);
	call(&r, NULL, "POST", "/admin/tenants", "{\"name\":\"unaudited\"}");
	assert_int_equal(r.status, 201);
	assert_string_equal(json_string_value(json_object_get(r.body, "audit")), "failed");
	json_decref(r.body);
	x = redisCommand(rc, "EXISTS sluice:tenant:unaudited");
	assert_int_equal(x->integer, 1);
	freeReplyObject(x);
	x = redisCommand(rc, "DEL sluice:audit");
	freeReplyObject(x);
	x = redisCommand(rc, "RENAME sluice:audit-saved sluice:audit");
	freeReplyObject(x);
	assert_int_equal(gw_audit_verify_sync(rc, NULL, &v), CM_OK);
	assert_int_equal(v.intact, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_flow),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_same_state_as_sluicectl),
		cmocka_unit_test(test_peer_check),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_audit_failure),
	};

	if (!redis_fixture_available()) {
		fprintf(stderr, "redis-server not found in PATH: skipping\n");
		return 77;
	}
	return cmocka_run_group_tests_name("gateway/admin", tests, group_setup,
					   group_teardown);
}
