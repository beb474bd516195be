/*
 * test_rollout.c - changing a model without surprises, through the whole
 * service: a private redis-server, three real sluice-workers serving the
 * name "tiny" (w0 the old build's file, serving; w1 the same file,
 * staged; w2 the same weights quantised otherwise (Q4_0 instead of Q8_0),
 * staged), the gateway over plain HTTP on loopback, sluicectl for every
 * step, curl-free HTTP clients in the test.
 *
 *  - eval and gates: a baseline recorded on w0; promotion of w1 refused
 *    before any eval; the replay on w1 matches 100 % (the determinism
 *    guarantee of one engine and model, checked case by case); the replay
 *    on w2 is reported with its first divergences and fails the strict
 *    gate (exit 8), and its promotion is refused; with loosened gates it
 *    passes; the inventory shows roles, digests and evals, and flags the
 *    digest mismatch of a canary on another file;
 *  - canary: at 25 % each of 100 tenants goes where its canary bucket
 *    says (computed here from its salt in Redis), every time, and about a
 *    quarter of them go to the canary;
 *  - promote and rollback under load: requests stream from several
 *    tenants while w1 is promoted and then rolled back; not one fails, new
 *    placements follow each step at once;
 *  - pinned runtime: the engine build the inventory shows is the one the
 *    worker logs; a worker pinned to it starts, pinned to another build or
 *    to a CUDA driver on the CPU backend it refuses, naming both;
 *  - the audit chain records every step (sluicectl audit list, verify).
 * Synchronisation by polling with deadlines, never by sleeping.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/crypto.h"
#include "gateway/rollout.h"
#include "tests/integration/harness.h"

#define DEADLINE_MS 120000
#define NW 3
#define N_TENANTS 100
#define LOAD_PROCS 6

static struct h_proc redis, workers[NW], gateway;
static char dir[512], redis_sock[600], pepper[600], creds[600], set_file[600], base_file[600];
static char wsock[NW][600];
static int port, admin_port;
static char keys[N_TENANTS][64];

static const char *const eval_set =
	"{\"cases\": [\n"
	" {\"id\": \"chat-1\", \"messages\": [{\"role\": \"user\", \"content\": \"Name three rivers.\"}],"
	"  \"max_tokens\": 24, \"temperature\": 0, \"expect\": {\"regex\": \".\", \"min_mean_logprob\": -60}},\n"
	" {\"id\": \"chat-2\", \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
	"  {\"role\": \"user\", \"content\": \"What is a lamp?\"}], \"max_tokens\": 24, \"temperature\": 0},\n"
	" {\"id\": \"text-1\", \"prompt\": \"garden lamp seven river table copper\", \"max_tokens\": 24,"
	"  \"temperature\": 0},\n"
	" {\"id\": \"text-2\", \"prompt\": \"north window stone\", \"max_tokens\": 24,"
	"  \"temperature\": 0, \"expect\": {\"contains\": \"\"}},\n"
	" {\"id\": \"seeded\", \"prompt\": \"once upon a time\", \"max_tokens\": 24,"
	"  \"temperature\": 0.9, \"seed\": 7},\n"
	" {\"id\": \"stop\", \"prompt\": \"copper table\", \"max_tokens\": 16, \"temperature\": 0,"
	"  \"stop\": [\"zzzz\"]}\n"
	"]}\n";

static char *ctl(int *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *ctl(int *rc, const char *fmt, ...)
{
	char args[1024], cmd[2048];
	va_list ap;
	int st;
	char *o;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s %s --admin 127.0.0.1:%d --admin-token-file %s 2>&1",
		 h_bin("tools/sluicectl"), args, admin_port, creds);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	*rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return o;
}

/* Runs sluicectl: asserts its exit code and, when `needle` is not NULL,
 * that its output says it. */
static void ctl_expect(int want_rc, const char *needle, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ctl_expect(int want_rc, const char *needle, const char *fmt, ...)
{
	char args[1024];
	va_list ap;
	int rc;
	char *o;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	o = ctl(&rc, "%s", args);
	if (rc != want_rc || (needle && !strstr(o, needle)))
		fail_msg("sluicectl %s: expected exit %d%s%s, found %d: %s", args, want_rc,
			 needle ? " saying " : "", needle ? needle : "", rc, o);
	free(o);
}

static double wmetric(const char *name, int w)
{
	char s[128], *body = NULL;
	double v;

	assert_int_equal(h_http(admin_port, "GET", "/metrics", NULL, NULL, &body, 10000), 200);
	snprintf(s, sizeof(s), "%s{worker=\"w%d\"}", name, w);
	v = h_metric(body, s);
	free(body);
	return v;
}

static void placed(double out[NW])
{
	char s[128], *body = NULL;

	assert_int_equal(h_http(admin_port, "GET", "/metrics", NULL, NULL, &body, 10000), 200);
	for (int w = 0; w < NW; w++) {
		snprintf(s, sizeof(s), "sluice_worker_requests_placed_total{worker=\"w%d\"}", w);
		out[w] = h_metric(body, s);
	}
	free(body);
}

/* One chat request as tenant t: the HTTP status, and the worker that
 * took it (-1 when no placement counter moved). */
static int ask(int t, int *worker)
{
	double before[NW], after[NW];
	char *body = NULL;
	int code;

	placed(before);
	code = h_http(port, "POST", "/v1/chat/completions", keys[t],
		      "{\"model\": \"tiny\", \"max_tokens\": 4, \"messages\": "
		      "[{\"role\": \"user\", \"content\": \"hello there\"}]}", &body, DEADLINE_MS);
	free(body);
	placed(after);
	*worker = -1;
	for (int w = 0; w < NW; w++)
		if (after[w] > before[w])
			*worker = w;
	return code;
}

static void wait_ready(int w)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		if (wmetric("sluice_worker_ready", w) == 1)
			return;
		h_pause_ms(50);
	}
	fail_msg("worker w%d did not become ready", w);
}

/* ---- setup ------------------------------------------------------------- */

static int write_configs(const char *model_a, const char *model_b, char *gw_path, size_t len)
{
	const char *files[NW] = { model_a, model_a, model_b };
	char cfg[2048], name[8];
	FILE *f;

	for (int w = 0; w < NW; w++) {
		snprintf(wsock[w], sizeof(wsock[w]), "%s/w%d.sock", dir, w);
		snprintf(cfg, sizeof(cfg),
			 "{\"worker\": {\"name\": \"w%d\", \"model\": \"%s\", \"model_name\": \"tiny\","
			 " \"socket\": \"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\","
			 " \"max_running\": 8, \"stats_interval_ms\": 100}}", w, files[w], wsock[w]);
		snprintf(name, sizeof(name), "w%d", w);
		if (h_worker_start(&workers[w], name, cfg) != 0)
			return -1;
	}
	snprintf(gw_path, len, "%s/gateway.json", dir);
	f = fopen(gw_path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"gateway\": {\"listen_addr\": \"127.0.0.1\", \"port\": 0, \"plain_http\": true,"
		" \"admin_addr\": \"127.0.0.1\", \"admin_port\": 0, \"pepper_file\": \"%s\","
		" \"admin_credentials_file\": \"%s\", \"log_level\": \"info\","
		" \"workers\": [{\"name\": \"w0\", \"socket\": \"%s\", \"model\": \"tiny\"},"
		"   {\"name\": \"w1\", \"socket\": \"%s\", \"model\": \"tiny\", \"staged\": true},"
		"   {\"name\": \"w2\", \"socket\": \"%s\", \"model\": \"tiny\", \"staged\": true}],"
		" \"max_inflight_per_worker\": 8, \"ping_interval_ms\": \"60s\","
		" \"stats_timeout_ms\": \"120s\","
		" \"queue\": {\"tenant_max\": 64, \"global_max\": 1000, \"timeout_ms\": \"120s\"},"
		" \"redis\": {\"url\": \"unix://%s\", \"auth_cache_ttl_ms\": 2000}}}\n",
		pepper, creds, wsock[0], wsock[1], wsock[2], redis_sock);
	fclose(f);
	return 0;
}

static int setup(void **state)
{
	char path[700], who[64];
	const char *a, *b;
	char *argv[4];

	(void)state;
	snprintf(dir, sizeof(dir), "%s", h_tmpdir());
	snprintf(redis_sock, sizeof(redis_sock), "%s/redis.sock", dir);
	snprintf(pepper, sizeof(pepper), "%s/pepper", dir);
	snprintf(creds, sizeof(creds), "%s/admin.creds", dir);
	snprintf(set_file, sizeof(set_file), "%s/set.json", dir);
	snprintf(base_file, sizeof(base_file), "%s/baseline.json", dir);
	h_ctl_setup(redis_sock, pepper);
	if (h_write_file(pepper, H_TEST_PEPPER, 0600) != 0 ||
	    h_write_file(creds, "ops tok-0123456789abcdef0123456789abcdef-rollout\n", 0600) != 0 ||
	    h_write_file(set_file, eval_set, 0600) != 0)
		return -1;
	if (h_redis_start(&redis, redis_sock, dir, DEADLINE_MS) != 0)
		return -1;
	a = h_model("tiny", "Q8_0", "llama");
	b = h_model("tiny", "Q4_0", "llama");
	if (!a || !b || write_configs(a, b, path, sizeof(path)) != 0)
		return -1;
	argv[0] = (char *)h_bin("gateway/sluice-gateway");
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = NULL;
	if (h_spawn(&gateway, "gateway", argv) != 0 ||
	    h_gateway_ports(&gateway, DEADLINE_MS, &port, &admin_port) != 0)
		return -1;
	for (int t = 0; t < N_TENANTS; t++) {
		h_ctl(NULL, 0, "tenant create t%03d --queue 64", t);
		h_ctl(NULL, 0, "client create t%03d/app", t);
		snprintf(who, sizeof(who), "t%03d/app", t);
		h_issue_key(who, keys[t], NULL);
	}
	for (int w = 0; w < NW; w++)
		wait_ready(w);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return h_stop_service(&gateway, workers, NW, &redis);
}

/* ---- (a) eval, gates, promotion refused and allowed ----------------------- */

static json_t *load(const char *path)
{
	json_t *j = json_load_file(path, 0, NULL);

	assert_non_null(j);
	return j;
}

static json_t *inventory_worker(const char *name)
{
	int rc;
	char *o = ctl(&rc, "model list --json");
	json_t *j = json_loads(o, 0, NULL), *w, *out = NULL;
	size_t i;

	assert_int_equal(rc, 0);
	assert_non_null(j);
	json_array_foreach(json_object_get(json_object_get(json_object_get(j, "models"), "tiny"),
					   "workers"), i, w)
		if (!strcmp(json_string_value(json_object_get(w, "name")), name))
			out = json_incref(w);
	json_decref(j);
	free(o);
	assert_non_null(out);
	return out;
}

/* /api/show's model_sha256 for "tiny" (static buffer). */
static const char *shown_sha(void)
{
	static char sha[80];
	char *body = NULL;
	json_t *j;

	assert_int_equal(h_http(port, "POST", "/api/show", keys[0], "{\"model\": \"tiny\"}", &body,
				DEADLINE_MS), 200);
	j = json_loads(body, 0, NULL);
	assert_non_null(j);
	snprintf(sha, sizeof(sha), "%s", json_string_value(json_object_get(json_object_get(j, "sluice"),
									  "model_sha256")) ?: "");
	json_decref(j);
	free(body);
	return sha;
}

/* A worker's file digest from the inventory (static buffer). */
static const char *worker_sha(const char *name)
{
	static char sha[80];
	json_t *w = inventory_worker(name);

	snprintf(sha, sizeof(sha), "%s", json_string_value(json_object_get(w, "model_sha256")));
	json_decref(w);
	return sha;
}

static void test_eval_gates(void **state)
{
	char run_out[700], *o;
	json_t *j, *c, *w;
	size_t i;
	int rc, diverged = 0;

	(void)state;
	snprintf(run_out, sizeof(run_out), "%s/run.json", dir);
	/* the baseline, on the serving worker */
	o = ctl(&rc, "eval record --model tiny --set %s --out %s", set_file, base_file);
	if (rc != 0)
		fprintf(stderr, "%s\n", o);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(o, "not judged (a recording)"));
	free(o);
	j = load(base_file);
	assert_string_equal(json_string_value(json_object_get(j, "worker")), "w0");
	assert_int_equal(json_array_size(json_object_get(j, "cases")), 6);
	json_array_foreach(json_object_get(j, "cases"), i, c) {
		assert_null(json_object_get(c, "error"));
		assert_true(json_array_size(json_object_get(c, "tokens")) > 0);
		assert_int_equal(strlen(json_string_value(json_object_get(c, "logits_digest"))), 64);
	}
	json_decref(j);
	/* no eval on w1 yet: promotion refused (409 -> exit 3) */
	ctl_expect(3, "no eval has run", "model promote tiny --worker w1");
	/* same file, same engine: every case identical */
	o = ctl(&rc, "eval run --worker w1 --set %s --baseline %s", set_file, base_file);
	if (rc != 0)
		fprintf(stderr, "%s\n", o);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(o, "exact match rate 1.000"));
	assert_non_null(strstr(o, "PASSED"));
	free(o);
	/* another quantisation: divergences reported, the strict gate fails */
	ctl_expect(8, NULL, "eval run --worker w2 --set %s --baseline %s --json --out %s", set_file,
		base_file, run_out);
	j = load(run_out);
	assert_false(json_is_true(json_object_get(json_object_get(j, "summary"), "passed")));
	assert_true(json_number_value(json_object_get(json_object_get(j, "summary"),
						      "exact_match")) < 1.0);
	json_array_foreach(json_object_get(j, "cases"), i, c) {
		json_t *d = json_object_get(c, "divergence");

		if (!json_is_object(d))
			continue;
		diverged++;
		assert_true(json_is_integer(json_object_get(d, "token")));
		assert_non_null(strchr(json_string_value(json_object_get(d, "baseline")), '|'));
		assert_non_null(strchr(json_string_value(json_object_get(d, "this")), '|'));
	}
	assert_true(diverged > 0);
	json_decref(j);
	o = ctl(&rc, "eval run --worker w2 --set %s --baseline %s", set_file, base_file);
	assert_int_equal(rc, 8);
	assert_non_null(strstr(o, "baseline: "));
	assert_non_null(strstr(o, "FAILED: exact match"));
	free(o);
	ctl_expect(3, "failed its gates", "model promote tiny --worker w2");
	/* the inventory: roles, digests, evals */
	w = inventory_worker("w2");
	assert_string_equal(json_string_value(json_object_get(w, "role")), "staged");
	assert_false(json_is_true(json_object_get(json_object_get(w, "last_eval"), "passed")));
	json_decref(w);
	w = inventory_worker("w1");
	assert_true(json_is_true(json_object_get(json_object_get(w, "last_eval"), "passed")));
	json_decref(w);
	/* gates loosened by the operator: it passes, and may go out as a canary;
	 * the canary on another file is a digest mismatch */
	ctl_expect(0, NULL, "eval run --worker w2 --set %s --baseline %s --gate exact=0 --gate logprob=100",
		set_file, base_file);
	ctl_expect(0, NULL, "model promote tiny --worker w2 --canary 10");
	o = ctl(&rc, "model list");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(o, "DIGEST MISMATCH"));
	assert_non_null(strstr(o, "canary 10%"));
	free(o);
	ctl_expect(0, "rolled back (canary)", "model rollback tiny");
	w = inventory_worker("w2");
	assert_string_equal(json_string_value(json_object_get(w, "role")), "staged");
	json_decref(w);
	/* promoted whole, w2 is what /api/show describes (w0, previous, is
	 * listed first but takes no traffic); rolled back, w0 again */
	ctl_expect(0, NULL, "model promote tiny --worker w2");
	assert_string_equal(shown_sha(), worker_sha("w2"));
	ctl_expect(0, "rolled back (previous)", "model rollback tiny");
	assert_string_equal(shown_sha(), worker_sha("w0"));
	/* bad requests: refused with the admin API's error, nothing changes */
	ctl_expect(2, NULL, "model promote tiny --worker nosuch");
	ctl_expect(5, NULL, "model promote tiny --worker w1 --canary 0");
	ctl_expect(2, NULL, "model rollback tiny");
}

/* ---- bad requests: the admin API's own error, nothing changes ------------- */

#define ADMIN_TOKEN "tok-0123456789abcdef0123456789abcdef-rollout"

/* POSTs body to the admin path: the status; *type the error type (static). */
static int admin_post(const char *path, const char *body, char *type, size_t len)
{
	char *resp = NULL;
	int code = h_http(admin_port, "POST", path, ADMIN_TOKEN, body, &resp, DEADLINE_MS);
	json_t *j = resp ? json_loads(resp, 0, NULL) : NULL;

	snprintf(type, len, "%s", j ? json_string_value(json_object_get(json_object_get(j, "error"),
								       "type")) ?: "" : "");
	json_decref(j);
	free(resp);
	return code;
}

static void test_bad_requests(void **state)
{
	static const struct {
		const char *path, *body;
		int status;
		const char *type;
	} bad[] = {
		{ "/admin/workers/w1/eval", "not json", 400, "invalid_json" },
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": []}}", 400, "invalid_value" },
		{ "/admin/workers/w1/eval", "{\"cases\": []}", 400, "unknown_field" },
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"prompt\": \"x\"}]}}", 400,
		  "invalid_value" }, /* no id */
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\"},"
		  " {\"id\": \"a\", \"prompt\": \"y\"}]}}", 400, "invalid_value" }, /* repeated id */
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\"}]}}", 400,
		  "invalid_value" }, /* neither messages nor prompt */
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\","
		  " \"temperature\": -1}]}}", 400, "invalid_value" }, /* the public API's check */
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\","
		  " \"expect\": {\"regex\": \"(\"}}]}}", 400, "invalid_value" },
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\","
		  " \"expect\": {\"json_schema\": {\"if\": {}}}}]}}", 400, "invalid_value" },
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\"}]},"
		  " \"baseline\": [1]}", 400, "invalid_value" },
		{ "/admin/workers/w1/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\"}]},"
		  " \"gates\": {\"min_exact_match\": 2}}", 400, "invalid_value" },
		{ "/admin/workers/nosuch/eval", "{\"set\": {\"cases\": [{\"id\": \"a\", \"prompt\": \"x\"}]}}",
		  404, "not_found" },
		{ "/admin/workers/W1!/eval", "{}", 400, "invalid_name" },
		{ "/admin/models/tiny/promote", "{}", 400, "invalid_name" },
		{ "/admin/models/tiny/promote", "{\"worker\": \"w1\", \"canary\": 101}", 400,
		  "invalid_value" },
		{ "/admin/models/tiny/promote", "{\"worker\": \"w1\", \"extra\": 1}", 400,
		  "unknown_field" },
		{ "/admin/models/.hidden/promote", "{\"worker\": \"w1\"}", 400, "invalid_name" },
		{ "/admin/models/tiny/promote", "{\"worker\": \"w0\"}", 400, "invalid_value" },
		{ "/admin/models/other/promote", "{\"worker\": \"w1\"}", 400, "invalid_value" },
	};
	char type[64];
	json_t *w;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int code = admin_post(bad[i].path, bad[i].body, type, sizeof(type));

		if (code != bad[i].status || strcmp(type, bad[i].type) != 0)
			fail_msg("%s %s: expected %d %s, found %d %s", bad[i].path, bad[i].body,
				 bad[i].status, bad[i].type, code, type);
	}
	/* a baseline of 6 MiB (above the public listener's 4 MiB bodies): taken */
	{
		size_t cap = 7u << 20, n = 0;
		char *big = malloc(cap), *resp = NULL;

		assert_non_null(big);
		n += (size_t)snprintf(big + n, cap - n, "{\"set\": {\"cases\": [{\"id\": \"a\", "
				      "\"prompt\": \"x\", \"max_tokens\": 2, \"temperature\": 0}]}, "
				      "\"gates\": {\"min_exact_match\": 0, \"max_logprob_drop\": 100}, "
				      "\"baseline\": {\"cases\": [");
		for (int i = 0; n < (6u << 20); i++)
			n += (size_t)snprintf(big + n, cap - n, "%s{\"id\": \"pad-%d\", \"tokens\": [1, 2, 3, 4, "
					      "5, 6, 7, 8], \"text\": \"padding padding padding\"}",
					      i ? ", " : "", i);
		snprintf(big + n, cap - n, "]}}");
		assert_int_equal(h_http(admin_port, "POST", "/admin/workers/w2/eval", ADMIN_TOKEN, big,
					&resp, DEADLINE_MS), 200);
		free(resp);
		free(big);
	}
	/* GET on a POST-only path: 405 */
	assert_int_equal(h_http(admin_port, "GET", "/admin/models/tiny/rollback", ADMIN_TOKEN, NULL,
				NULL, DEADLINE_MS), 405);
	/* nothing changed, and the service still serves */
	w = inventory_worker("w0");
	assert_string_equal(json_string_value(json_object_get(w, "role")), "serving");
	json_decref(w);
	{
		int worker;

		assert_int_equal(ask(0, &worker), 200);
		assert_int_equal(worker, 0);
	}
}

/* ---- (b) canary by tenant ------------------------------------------------ */

/* Tenant t's canary bucket, from its salt in Redis. */
static uint32_t bucket(int t)
{
	redisContext *c = redisConnectUnix(redis_sock);
	redisReply *r;
	uint8_t salt[32];
	uint32_t b;

	assert_non_null(c);
	r = redisCommand(c, "HGET sluice:tenant:t%03d salt", t);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_int_equal(cm_hex_decode(r->str, r->len, salt, sizeof(salt)), CM_OK);
	b = gw_rollout_bucket(salt, sizeof(salt), "tiny");
	freeReplyObject(r);
	redisFree(c);
	return b;
}

static void test_canary(void **state)
{
	int on_canary = 0, w, w2;

	(void)state;
	ctl_expect(0, NULL, "model promote tiny --worker w1 --canary 25");
	for (int t = 0; t < N_TENANTS; t++) {
		int want = bucket(t) < 25 ? 1 : 0;

		assert_int_equal(ask(t, &w), 200);
		assert_int_equal(w, want);
		on_canary += w == 1;
		if (t % 10 == 0) { /* the same tenant again: the same side */
			assert_int_equal(ask(t, &w2), 200);
			assert_int_equal(w2, w);
		}
	}
	/* about a quarter (binomial, 100 tenants: 10 to 40 is beyond 3.4 sd) */
	assert_true(on_canary >= 10 && on_canary <= 40);
	ctl_expect(0, NULL, "model rollback tiny");
	for (int t = 0; t < 10; t++) {
		assert_int_equal(ask(t, &w), 200);
		assert_int_equal(w, 0);
	}
}

/* ---- (c) promote and rollback under load ---------------------------------- */

static volatile sig_atomic_t load_stop;

static void load_on_term(int sig)
{
	(void)sig;
	load_stop = 1;
}

/* A child process: streamed requests in a row as tenant t until SIGTERM
 * (the one running then finishes); exits with the number that did not end
 * in 200 with a [DONE] and no error event (at most 100), or 101 when it
 * sent none. */
static pid_t load_start(int t)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	{
		char *body;
		int bad = 0, sent = 0;

		signal(SIGTERM, load_on_term);
		while (!load_stop) {
			body = NULL;
			if (h_http(port, "POST", "/v1/chat/completions", keys[t],
				   "{\"model\": \"tiny\", \"max_tokens\": 32, \"stream\": true, "
				   "\"messages\": [{\"role\": \"user\", \"content\": \"tell me more\"}]}",
				   &body, DEADLINE_MS) != 200 || !body || !strstr(body, "[DONE]") ||
			    strstr(body, "\"error\""))
				bad++;
			sent++;
			free(body);
		}
		_exit(sent == 0 ? 101 : bad > 100 ? 100 : bad);
	}
}

static void wait_placed_more(int w, double from)
{
	int64_t end = h_now_ms() + DEADLINE_MS;
	double p[NW];

	while (h_now_ms() < end) {
		placed(p);
		if (p[w] >= from + 2)
			return;
		h_pause_ms(10);
	}
	fail_msg("no new placement on w%d", w);
}

static void test_promote_rollback_under_load(void **state)
{
	pid_t pids[LOAD_PROCS];
	double p[NW], staged_before;
	int st;

	(void)state;
	staged_before = wmetric("sluice_worker_requests_placed_total", 2);
	for (int i = 0; i < LOAD_PROCS; i++)
		pids[i] = load_start(i);
	placed(p);
	wait_placed_more(0, p[0]); /* the load runs on w0 */
	ctl_expect(0, NULL, "model promote tiny --worker w1");
	placed(p);
	wait_placed_more(1, p[1]); /* new placements go to w1 at once */
	ctl_expect(0, "rolled back (previous)", "model rollback tiny");
	placed(p);
	wait_placed_more(0, p[0]); /* and back to w0 */
	for (int i = 0; i < LOAD_PROCS; i++)
		assert_int_equal(kill(pids[i], SIGTERM), 0);
	for (int i = 0; i < LOAD_PROCS; i++) {
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0); /* not one request failed */
	}
	/* the staged worker took none of it */
	assert_true(wmetric("sluice_worker_requests_placed_total", 2) == staged_before);
}

/* ---- (d) pinned runtime -------------------------------------------------- */

/* Polls a worker's log for `needle` until it appears or the worker exits;
 * 1 found, 0 not. */
static int worker_says(struct h_proc *w, const char *needle)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		size_t len;
		char *log = h_read_file(w->log, &len);
		int found = log && strstr(log, needle) != NULL;

		free(log);
		if (found)
			return 1;
		if (!h_alive(w))
			break;
		h_pause_ms(20);
	}
	{
		size_t len;
		char *log = h_read_file(w->log, &len);
		int found = log && strstr(log, needle) != NULL;

		free(log);
		return found;
	}
}

static void test_pinned_runtime(void **state)
{
	json_t *w0 = inventory_worker("w0");
	const char *engine = json_string_value(json_object_get(w0, "engine_version"));
	const char *model = h_model("tiny", "Q8_0", "llama");
	char cfg[2048], sock[700], want[200];
	struct h_proc p;

	(void)state;
	assert_non_null(engine);
	assert_true(strlen(engine) > 0);
	/* the build the gateway sees is what the worker logs at start */
	snprintf(want, sizeof(want), "\"engine_version\":\"%s\"", engine);
	assert_true(worker_says(&workers[0], want));
	/* /api/show names the digest and the runtime that answer */
	{
		char *body = NULL;
		json_t *j, *sl;

		assert_int_equal(h_http(port, "POST", "/api/show", keys[0], "{\"model\": \"tiny\"}",
					&body, DEADLINE_MS), 200);
		j = json_loads(body, 0, NULL);
		assert_non_null(j);
		sl = json_object_get(j, "sluice");
		assert_string_equal(json_string_value(json_object_get(sl, "engine_version")), engine);
		assert_string_equal(json_string_value(json_object_get(sl, "model_sha256")),
				    json_string_value(json_object_get(w0, "model_sha256")));
		assert_string_equal(json_string_value(json_object_get(sl, "backend")), "cpu");
		json_decref(j);
		free(body);
	}
	/* pinned to it: starts */
	snprintf(sock, sizeof(sock), "%s/pin.sock", dir);
	snprintf(cfg, sizeof(cfg), "{\"worker\": {\"name\": \"pin\", \"model\": \"%s\", \"socket\": "
		 "\"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\", \"pin_engine_version\": "
		 "\"%s\"}}", model, sock, engine);
	assert_int_equal(h_worker_start(&p, "pin-ok", cfg), 0);
	assert_true(worker_says(&p, "worker_ready"));
	assert_int_equal(h_stop(&p, 10000), 0);
	/* another build: refuses to start, naming both */
	snprintf(cfg, sizeof(cfg), "{\"worker\": {\"name\": \"pin\", \"model\": \"%s\", \"socket\": "
		 "\"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\", \"pin_engine_version\": "
		 "\"0.0.1+0000000\"}}", model, sock);
	assert_int_equal(h_worker_start(&p, "pin-engine", cfg), 0);
	snprintf(want, sizeof(want), "worker.pin_engine_version: expected engine 0.0.1+0000000, "
		 "found %s", engine);
	assert_true(worker_says(&p, want));
	assert_false(worker_says(&p, "worker_ready"));
	h_stop(&p, 10000);
	/* a CUDA pin on a CPU worker: refuses too */
	snprintf(cfg, sizeof(cfg), "{\"worker\": {\"name\": \"pin\", \"model\": \"%s\", \"socket\": "
		 "\"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\", \"backend\": \"cpu\", "
		 "\"pin_cuda_driver\": 13000}}", model, sock);
	assert_int_equal(h_worker_start(&p, "pin-cuda", cfg), 0);
	assert_true(worker_says(&p, "worker.pin_cuda_driver: expected 13000, found no CUDA"));
	h_stop(&p, 10000);
	json_decref(w0);
}

/* ---- (e) the audit chain ---------------------------------------------------- */

static void test_audit(void **state)
{
	char out[65536];
	static const char *const want[] = {
		"eval.record", "eval.run", "model.promote", "model.rollback",
	};

	(void)state;
	h_ctl(out, sizeof(out), "audit list --count 1000");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_non_null(strstr(out, want[i]));
	assert_non_null(strstr(out, "worker:w2"));
	assert_non_null(strstr(out, "failed"));   /* w2's strict run */
	assert_non_null(strstr(out, "refused"));  /* its promotion */
	assert_non_null(strstr(out, "model:tiny/w1@25"));
	h_ctl(NULL, 0, "audit verify");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_eval_gates),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_canary),
		cmocka_unit_test(test_promote_rollback_under_load),
		cmocka_unit_test(test_pinned_runtime),
		cmocka_unit_test(test_audit),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
