/*
 * test_routing.c - many workers: one gateway, three
 * real sluice-workers on the tiny generated model, a private redis-server,
 * sluicectl for keys and drain, curl as the client (plain HTTP on
 * loopback).
 *
 *  - affinity: requests of one tenant sharing a long prefix all land on one
 *    worker (>= 95 %, per-worker placement counters in /metrics) and report
 *    cached prompt tokens; the same text from another tenant gets none;
 *  - bounded load: with every worker paused (SIGSTOP) a flood of one
 *    tenant's requests with one prefix stays within ceil(c x mean) per
 *    worker, and every request then finishes;
 *  - failover: a worker SIGKILLed while one request streams from it (it
 *    ends with an error line and no done) and others wait on the paused
 *    workers (none has streamed: every one is re-dispatched and succeeds);
 *    the worker restarted on the same socket is used again;
 *  - drain: `sluicectl worker drain` -> no new placements on that worker,
 *    its request in flight finishes without error; an unknown worker exits
 *    2, a wrong admin token exits 7; restarting the drained worker
 *    re-admits it (placements resume).
 * The workers are paused with SIGSTOP where a request must stay in flight;
 * PING and STATS deadlines are long so a paused worker stays ready.
 * Synchronisation is by polling with deadlines, never by sleeping.
 */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/clock.h"
#include "tests/integration/harness.h"

#define DEADLINE_MS 60000
#define NW 3
#define LOAD_FACTOR 1.25
#define CAP 4

static struct h_proc redis, workers[NW], gateway;
static char dir[512], redis_sock[600], pepper[600], creds[600];
static char wsock[NW][600], wcfg[NW][2048];
static int port, admin_port;
static char key_a[64], key_b[64];
static char prefix[2048];

/* Writes the request body of a generate call with prompt prefix+tail. */
static void body_file(const char *path, const char *tail, int stream, int predict)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "{\"model\":\"tiny\",\"prompt\":\"%s %s\",\"stream\":%s,"
		"\"options\":{\"num_predict\":%d,\"temperature\":0}}",
		prefix, tail, stream ? "true" : "false", predict);
	fclose(f);
}

/* Synchronous non-streaming generate; returns the HTTP code, *cached. */
static int generate(const char *key, const char *tail, long *cached)
{
	static int seq;
	char bodyf[700], outf[700], cmd[4096];
	int st, code;
	char *o, *b;
	size_t len;

	seq++;
	snprintf(bodyf, sizeof(bodyf), "%s/sync%d.json", dir, seq);
	snprintf(outf, sizeof(outf), "%s/sync%d.out", dir, seq);
	body_file(bodyf, tail, 0, 2);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS --max-time 60 -o %s -w '%%{http_code}' -H 'Authorization: Bearer %s' "
		 "-H 'Content-Type: application/json' --data-binary @%s "
		 "'http://127.0.0.1:%d/api/generate'", outf, key, bodyf, port);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	code = atoi(o);
	free(o);
	b = h_read_file(outf, &len);
	if (cached)
		*cached = -1;
	if (b && code == 200 && cached) {
		json_error_t e;
		json_t *j = json_loads(b, JSON_ALLOW_NUL, &e);
		json_t *s = j ? json_object_get(j, "sluice") : NULL;

		if (s)
			*cached = (long)json_integer_value(json_object_get(s, "cached_prompt_tokens"));
		json_decref(j);
	}
	if (code != 200)
		fprintf(stderr, "generate: HTTP %d: %.300s\n", code, b ? b : "");
	free(b);
	return code;
}

/* A background streaming request: curl writes the stream and the code. */
struct bg {
	struct h_proc p;
	char out[700], code[700];
};

static void bg_start(struct bg *g, const char *name, const char *key, const char *tail)
{
	char bodyf[700], cmd[4096];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };

	snprintf(bodyf, sizeof(bodyf), "%s/%s.json", dir, name);
	snprintf(g->out, sizeof(g->out), "%s/%s.out", dir, name);
	snprintf(g->code, sizeof(g->code), "%s/%s.code", dir, name);
	body_file(bodyf, tail, 1, 4);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS -N --max-time 90 -o %s -w '%%{http_code}' -H 'Authorization: Bearer %s' "
		 "-H 'Content-Type: application/json' --data-binary @%s "
		 "'http://127.0.0.1:%d/api/generate' > %s.tmp && mv %s.tmp %s",
		 g->out, key, bodyf, port, g->code, g->code, g->code);
	assert_int_equal(h_spawn(&g->p, name, argv), 0);
}

/* A long streamed generation with a short prompt (EOS ignored). */
static void bg_start_long(struct bg *g, const char *name, const char *key)
{
	char bodyf[700], cmd[4096];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	FILE *f;

	snprintf(bodyf, sizeof(bodyf), "%s/%s.json", dir, name);
	snprintf(g->out, sizeof(g->out), "%s/%s.out", dir, name);
	snprintf(g->code, sizeof(g->code), "%s/%s.code", dir, name);
	f = fopen(bodyf, "w");
	assert_non_null(f);
	fprintf(f, "{\"model\":\"tiny\",\"prompt\":\"hi\",\"stream\":true,"
		"\"options\":{\"num_predict\":400,\"temperature\":0}}");
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS -N --max-time 90 -o %s -w '%%{http_code}' -H 'Authorization: Bearer %s' "
		 "-H 'X-Sluice-Ignore-EOS: 1' -H 'Content-Type: application/json' "
		 "--data-binary @%s 'http://127.0.0.1:%d/api/generate' > %s.tmp && mv %s.tmp %s",
		 g->out, key, bodyf, port, g->code, g->code, g->code);
	assert_int_equal(h_spawn(&g->p, name, argv), 0);
}

/* Waits for the request to end: 0 when HTTP 200 with a final done object
 * and no error line, -1 otherwise. */
static int bg_wait_ok(struct bg *g)
{
	int64_t end = h_now_ms() + DEADLINE_MS;
	char *code = NULL, *out;
	size_t len;
	int ok;

	while (h_now_ms() < end && !(code = h_read_file(g->code, &len)))
		h_pause_ms(20);
	assert_non_null(code);
	out = h_read_file(g->out, &len);
	ok = atoi(code) == 200 && out && strstr(out, "\"done\":true") &&
	     !strstr(out, "\"error\"");
	if (!ok)
		fprintf(stderr, "%s: HTTP %s: %.400s\n", g->out, code, out ? out : "");
	free(code);
	free(out);
	h_stop(&g->p, 5000);
	return ok ? 0 : -1;
}

static char *metrics(void)
{
	char cmd[256];
	int st;

	snprintf(cmd, sizeof(cmd), "curl -sS --max-time 10 http://127.0.0.1:%d/metrics", admin_port);
	char *m = h_run_capture(cmd, &st);

	assert_non_null(m);
	return m;
}

static double wmetric(const char *text, const char *name, int w)
{
	char s[128];

	snprintf(s, sizeof(s), "%s{worker=\"w%d\"}", name, w);
	return h_metric(text, s);
}

static void placed(double out[NW])
{
	char *m = metrics();

	for (int w = 0; w < NW; w++)
		out[w] = wmetric(m, "sluice_worker_requests_placed_total", w);
	free(m);
}

/* Polls until the sum of the workers' in-flight requests is `want`. */
static void wait_inflight_sum(int want, double inflight[NW])
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		char *m = metrics();
		double sum = 0;

		for (int w = 0; w < NW; w++) {
			inflight[w] = wmetric(m, "sluice_worker_inflight", w);
			sum += inflight[w];
		}
		free(m);
		if ((int)sum == want)
			return;
		h_pause_ms(20);
	}
	fail_msg("in-flight requests did not reach %d", want);
}

static void wait_worker_ready(int w)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		char *m = metrics();
		double r = wmetric(m, "sluice_worker_ready", w);

		free(m);
		if (r == 1)
			return;
		h_pause_ms(50);
	}
	fail_msg("worker w%d did not become ready", w);
}

/* ---- setup ----------------------------------------------------------- */

static int start_redis(void)
{
	return h_redis_start(&redis, redis_sock, dir, DEADLINE_MS);
}


static int setup(void **state)
{
	char path[700], name[16];
	const char *model;
	FILE *f;
	char *argv[4];
	int rc;
	size_t n = 0;

	(void)state;
	if (system("command -v curl >/dev/null") != 0)
		return 77;
	snprintf(dir, sizeof(dir), "%s", h_tmpdir());
	snprintf(redis_sock, sizeof(redis_sock), "%s/redis.sock", dir);
	snprintf(pepper, sizeof(pepper), "%s/pepper", dir);
	h_ctl_setup(redis_sock, pepper);
	snprintf(creds, sizeof(creds), "%s/admin.creds", dir);
	if (h_write_file(pepper, H_TEST_PEPPER, 0600) != 0 ||
	    h_write_file(creds, "# test operator\nops tok-0123456789abcdef0123456789abcdef-route\n",
			 0600) != 0)
		return -1;
	/* A shared prefix of many KV blocks (16 tokens each). */
	while (n + 48 < 320) {
		n += (size_t)snprintf(prefix + n, sizeof(prefix) - n,
				      "You are a careful assistant number %zu. ", n);
	}
	rc = start_redis();
	if (rc != 0)
		return rc;
	model = h_model("tiny", "Q8_0", "llama");
	if (!model)
		return -1;
	for (int w = 0; w < NW; w++) {
		snprintf(wsock[w], sizeof(wsock[w]), "%s/w%d.sock", dir, w);
		snprintf(wcfg[w], sizeof(wcfg[w]),
			 "{\"worker\": {\"name\": \"w%d\", \"model\": \"%s\", \"model_name\": \"tiny\","
			 " \"socket\": \"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\","
			 " \"max_running\": 8, \"stats_interval_ms\": 100}}", w, model, wsock[w]);
		snprintf(name, sizeof(name), "w%d", w);
		if (h_worker_start(&workers[w], name, wcfg[w]) != 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/gateway.json", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"gateway\": {\"listen_addr\": \"127.0.0.1\", \"port\": 0, \"plain_http\": true,"
		" \"admin_addr\": \"127.0.0.1\", \"admin_port\": 0, \"pepper_file\": \"%s\","
		" \"admin_credentials_file\": \"%s\", \"log_level\": \"info\","
		" \"workers\": [{\"name\": \"w0\", \"socket\": \"%s\", \"model\": \"tiny\"},"
		"   {\"name\": \"w1\", \"socket\": \"%s\", \"model\": \"tiny\"},"
		"   {\"name\": \"w2\", \"socket\": \"%s\", \"model\": \"tiny\"}],"
		" \"max_inflight_per_worker\": %d, \"ping_interval_ms\": \"60s\","
		" \"stats_timeout_ms\": \"120s\", \"route_prefix_bytes\": 256,"
		" \"route_load_factor\": %g,"
		" \"queue\": {\"tenant_max\": 32, \"global_max\": 200, \"timeout_ms\": \"60s\"},"
		" \"redis\": {\"url\": \"unix://%s\", \"auth_cache_ttl_ms\": 2000}}}\n",
		pepper, creds, wsock[0], wsock[1], wsock[2], CAP, LOAD_FACTOR, redis_sock);
	fclose(f);
	argv[0] = (char *)h_bin("gateway/sluice-gateway");
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = NULL;
	if (h_spawn(&gateway, "gateway", argv) != 0 || h_gateway_ports(&gateway, DEADLINE_MS, &port, &admin_port) != 0)
		return -1;
	h_ctl(NULL, 0, "tenant create alpha --queue 32");
	h_ctl(NULL, 0, "client create alpha/app");
	h_ctl(NULL, 0, "tenant create beta");
	h_ctl(NULL, 0, "client create beta/app");
	h_issue_key("alpha/app", key_a, NULL);
	h_issue_key("beta/app", key_b, NULL);
	for (int w = 0; w < NW; w++)
		wait_worker_ready(w);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int w = 0; w < NW; w++)
		h_signal(&workers[w], SIGCONT);
	return h_stop_service(&gateway, workers, NW, &redis);
}

/* The worker alpha's prefix prefers (where its requests went). */
static int home = -1;

/* ---- (a) affinity and tenant isolation --------------------------------- */

static void test_affinity(void **state)
{
	double before[NW], after[NW], total = 0, best = 0;
	long cached;
	char tail[32];
	int hits = 0;

	(void)state;
	placed(before);
	for (int i = 0; i < 20; i++) {
		snprintf(tail, sizeof(tail), "question %d?", i);
		assert_int_equal(generate(key_a, tail, &cached), 200);
		if (i > 0 && cached >= 16)
			hits++;
	}
	placed(after);
	for (int w = 0; w < NW; w++) {
		double d = after[w] - before[w];

		total += d;
		if (d > best) {
			best = d;
			home = w;
		}
	}
	fprintf(stderr, "affinity: placed %g/%g/%g, home w%d, %d/19 prefix hits\n",
		after[0] - before[0], after[1] - before[1], after[2] - before[2], home, hits);
	assert_true(total == 20);
	assert_true(best >= 0.95 * total);
	/* all but the first found the prefix (several 16-token blocks) cached */
	assert_true(hits >= 18);
	{
		char *m = metrics();

		assert_true(wmetric(m, "sluice_worker_prefix_hit_tokens_total", home) >= 18 * 16);
		free(m);
	}
	/* the same text from another tenant: no cached token, wherever it lands */
	assert_int_equal(generate(key_b, "question 1?", &cached), 200);
	assert_int_equal(cached, 0);
	/* and its own second request finds its own copy */
	assert_int_equal(generate(key_b, "question 2?", &cached), 200);
	assert_true(cached >= 16);
}

/* ---- (b) a flood stays within the load bound ----------------------------- */

static void test_bounded_flood(void **state)
{
	struct bg g[9];
	double inflight[NW], sum = 0, max = 0;
	char name[16], tail[32];

	(void)state;
	for (int w = 0; w < NW; w++)
		assert_int_equal(h_signal(&workers[w], SIGSTOP), 0);
	for (int i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "flood%d", i);
		snprintf(tail, sizeof(tail), "flood %d?", i);
		bg_start(&g[i], name, key_a, tail);
	}
	wait_inflight_sum(9, inflight);
	for (int w = 0; w < NW; w++) {
		sum += inflight[w];
		if (inflight[w] > max)
			max = inflight[w];
	}
	fprintf(stderr, "flood: in flight %g/%g/%g\n", inflight[0], inflight[1], inflight[2]);
	/* the hot prefix's worker is not pushed past ceil(c x mean) */
	assert_true(max <= __builtin_ceil(LOAD_FACTOR * sum / NW));
	for (int w = 0; w < NW; w++)
		assert_int_equal(h_signal(&workers[w], SIGCONT), 0);
	for (int i = 0; i < 9; i++)
		assert_int_equal(bg_wait_ok(&g[i]), 0);
}

/* ---- (d) drain ---------------------------------------------------------- */

static void test_drain(void **state)
{
	struct bg g;
	double inflight[NW], before[NW], after[NW];
	char cmd[2048], *o, *m;
	int st;

	(void)state;
	assert_true(home >= 0);
	assert_int_equal(h_signal(&workers[home], SIGSTOP), 0);
	bg_start(&g, "drain_inflight", key_a, "before the drain?");
	wait_inflight_sum(1, inflight);
	assert_int_equal((int)inflight[home], 1);
	snprintf(cmd, sizeof(cmd), "%s worker drain w%d --admin 127.0.0.1:%d "
		 "--admin-token-file %s 2>&1", h_bin("tools/sluicectl"), home, admin_port, creds);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	if (st != 0)
		fprintf(stderr, "sluicectl worker drain: %s\n", o);
	free(o);
	assert_int_equal(st, 0);
	/* an unknown worker: exit 2 */
	snprintf(cmd, sizeof(cmd), "%s worker drain nosuch --admin 127.0.0.1:%d "
		 "--admin-token-file %s 2>&1", h_bin("tools/sluicectl"), admin_port, creds);
	free(h_run_capture(cmd, &st));
	assert_int_equal(WEXITSTATUS(st), 2);
	/* a token the gateway does not know: refused, exit 7, nothing drained */
	{
		char bad[700];
		FILE *f;

		snprintf(bad, sizeof(bad), "%s/bad.token", dir);
		f = fopen(bad, "w");
		assert_non_null(f);
		fprintf(f, "not-the-token-0123456789abcdef0123456789\n");
		fclose(f);
		snprintf(cmd, sizeof(cmd), "%s worker drain w%d --admin 127.0.0.1:%d "
			 "--admin-token-file %s 2>&1", h_bin("tools/sluicectl"), (home + 1) % NW,
			 admin_port, bad);
		free(h_run_capture(cmd, &st));
		assert_int_equal(WEXITSTATUS(st), 7);
	}
	m = metrics();
	assert_true(wmetric(m, "sluice_worker_drained", home) == 1);
	assert_true(wmetric(m, "sluice_worker_drained", (home + 1) % NW) == 0);
	free(m);
	placed(before);
	for (int i = 0; i < 5; i++)
		assert_int_equal(generate(key_a, "while draining?", NULL), 200);
	placed(after);
	assert_true(after[home] == before[home]);
	assert_int_equal(h_signal(&workers[home], SIGCONT), 0);
	assert_int_equal(bg_wait_ok(&g), 0);
}

/* ---- (c) SIGKILL under load, restart ------------------------------------ */

/* A worker killed while one request streams from it and others wait on it:
 * the streaming one ends with an error event (no done), the waiting ones
 * are re-dispatched and succeed. */
static void test_kill_streaming(void **state)
{
	struct bg s, wait[2];
	double inflight[NW];
	char *out, wname[16], name[16], tail[32];
	size_t len;
	int victim = -1, tries;

	(void)state;
	for (tries = 0; tries < 5 && victim < 0; tries++) {
		int64_t end = h_now_ms() + DEADLINE_MS;
		int streamed = 0;

		snprintf(name, sizeof(name), "stream%d", tries);
		bg_start_long(&s, name, key_b);
		/* the first token reached the client: pause every worker */
		while (h_now_ms() < end && !streamed) {
			out = h_read_file(s.out, &len);
			streamed = out && strstr(out, "\"response\"") != NULL;
			free(out);
			if (!streamed)
				h_pause_ms(2);
		}
		assert_true(streamed);
		for (int w = 0; w < NW; w++)
			assert_int_equal(h_signal(&workers[w], SIGSTOP), 0);
		out = h_read_file(s.out, &len);
		if (out && strstr(out, "\"done\":true")) {
			/* it finished before the pause: try again */
			free(out);
			for (int w = 0; w < NW; w++)
				h_signal(&workers[w], SIGCONT);
			assert_int_equal(bg_wait_ok(&s), 0);
			continue;
		}
		free(out);
		wait_inflight_sum(1, inflight);
		for (int w = 0; w < NW; w++)
			if (inflight[w] == 1)
				victim = w;
	}
	assert_true(victim >= 0);
	/* two more requests wait on the paused workers (none streams yet) */
	for (int i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "wait%d", i);
		snprintf(tail, sizeof(tail), "waiting %d?", i);
		bg_start(&wait[i], name, key_a, tail);
	}
	wait_inflight_sum(3, inflight);
	assert_int_equal(h_signal(&workers[victim], SIGKILL), 0);
	h_stop(&workers[victim], 5000);
	for (int w = 0; w < NW; w++)
		h_signal(&workers[w], SIGCONT);
	/* the streaming one: HTTP 200 (headers were sent), an error line, no done */
	{
		int64_t end = h_now_ms() + DEADLINE_MS;
		char *code = NULL;

		while (h_now_ms() < end && !(code = h_read_file(s.code, &len)))
			h_pause_ms(20);
		assert_non_null(code);
		out = h_read_file(s.out, &len);
		assert_non_null(out);
		assert_non_null(strstr(out, "\"error\""));
		assert_null(strstr(out, "\"done\":true"));
		free(out);
		free(code);
		h_stop(&s.p, 5000);
	}
	/* the survivors carry on */
	for (int i = 0; i < 2; i++)
		assert_int_equal(bg_wait_ok(&wait[i]), 0);
	snprintf(wname, sizeof(wname), "w%d", victim);
	assert_int_equal(h_worker_start(&workers[victim], wname, wcfg[victim]), 0);
	wait_worker_ready(victim);
}

static void test_kill_restart(void **state)
{
	struct bg g[3];
	double inflight[NW], before[NW], after[NW];
	char name[16], tail[32], wname[16];

	(void)state;
	assert_true(home >= 0);
	/* the drained worker comes back through a restart: kill it while
	 * requests wait on it (paused: none has streamed), restart it */
	assert_int_equal(h_signal(&workers[home], SIGSTOP), 0);
	for (int w = 0; w < NW; w++)
		if (w != home)
			assert_int_equal(h_signal(&workers[w], SIGSTOP), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "kill%d", i);
		snprintf(tail, sizeof(tail), "kill %d?", i);
		bg_start(&g[i], name, key_a, tail);
	}
	wait_inflight_sum(3, inflight);
	/* the drained worker got none of them */
	assert_int_equal((int)inflight[home], 0);
	/* kill a worker that holds requests that have not streamed */
	{
		int victim = -1;

		for (int w = 0; w < NW; w++)
			if (inflight[w] > 0 && victim < 0)
				victim = w;
		assert_true(victim >= 0);
		assert_int_equal(h_signal(&workers[victim], SIGKILL), 0);
		h_stop(&workers[victim], 5000);
		for (int w = 0; w < NW; w++)
			h_signal(&workers[w], SIGCONT);
		for (int i = 0; i < 3; i++)
			assert_int_equal(bg_wait_ok(&g[i]), 0);
		snprintf(wname, sizeof(wname), "w%d", victim);
		assert_int_equal(h_worker_start(&workers[victim], wname, wcfg[victim]), 0);
		wait_worker_ready(victim);
	}
	/* restart the drained home worker too: its HELLO re-admits it */
	assert_int_equal(h_signal(&workers[home], SIGKILL), 0);
	h_stop(&workers[home], 5000);
	snprintf(wname, sizeof(wname), "w%d", home);
	assert_int_equal(h_worker_start(&workers[home], wname, wcfg[home]), 0);
	wait_worker_ready(home);
	placed(before);
	for (int i = 0; i < 4; i++)
		assert_int_equal(generate(key_a, "after the restart?", NULL), 200);
	placed(after);
	assert_true(after[home] - before[home] >= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_affinity),
		cmocka_unit_test(test_bounded_flood),
		cmocka_unit_test(test_drain),
		cmocka_unit_test(test_kill_streaming),
		cmocka_unit_test(test_kill_restart),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
