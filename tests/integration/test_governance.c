/*
 * test_governance.c - governance across gateways with real processes:
 * a private redis-server on a Unix socket, TWO
 * sluice-gateways sharing it (plain HTTP on loopback), one sluice-worker on
 * the generated tiny model, keys made with sluicectl.
 *
 *  - the admin API answers on each gateway's admin listener;
 *  - usage: after requests spread over both gateways, `sluicectl usage
 *    --format json` equals the sum of the per-request counts the clients
 *    received (each request counted once);
 *  - usage with a gateway restarted (SIGTERM) in the middle of a load run:
 *    the tokens and successful requests counted equal what clients got;
 *  - revocation: 100 keys revoked with `sluicectl key revoke`; from
 *    sluicectl's exit to the first 401 on each gateway, polled with a tight
 *    request loop and a deadline: p99 <= 100 ms (p50/p99 printed);
 *  - a revocation ends the key's streams in flight on both gateways within
 *    100 ms of sluicectl's exit, and the worker frees their KV blocks;
 *  - an RPM limit of 20 with 50 concurrent clients over both gateways
 *    admits exactly 20; a concurrency cap of 2 holds across gateways, and
 *    the lease of a SIGKILLed gateway is recovered within the lease TTL;
 *  - Redis outage (stopped, then restarted from its dump): a cached key is
 *    served, an unknown key gets 503, a key revoked before the outage stays
 *    refused, a tenant's RPM falls back to this gateway's share (0.5 x 10),
 *    service resumes and the outage's usage is recorded when Redis returns;
 *  - no key secret is stored in Redis (every key and value scanned) or
 *    written to any log;
 *  - `sluicectl audit verify` passes, and fails once a record is deleted
 *    or one field of a record is edited (a copy of the log, with a control
 *    copy whose record is replaced unchanged and still verifies).
 * Synchronisation is by polling with deadlines, never by sleeping.
 */
#include <errno.h>
#include <glob.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/clock.h"
#include "gateway/gov/apikey.h"
#include "tests/integration/governance_fixture.h"

static void test_admin_api_mounted(void **state)
{
	(void)state;
	for (int i = 0; i < N_GW; i++) {
		char *body = NULL;

		assert_int_equal(gvt_http(gvt_admin_port[i], "GET", "/admin/tenants", NULL, NULL, NULL), 401);
		assert_int_equal(gvt_http(gvt_admin_port[i], "GET", "/admin/tenants", ADMIN_TOKEN, NULL,
				      &body), 200);
		assert_non_null(body);
		assert_non_null(strstr(body, "\"gov\""));
		free(body);
	}
}

/* ---- usage equals what the clients received ------------------------------ */

static void usage_sum(int64_t *prompt, int64_t *completion, int64_t *requests)
{
	char *o, cmd[2048];
	json_t *j, *row;
	json_error_t e;
	size_t i;
	int st;

	snprintf(cmd, sizeof(cmd), "%s --redis unix://%s usage gov --format json",
		 h_bin("tools/sluicectl"), gvt_redis_sock);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	assert_int_equal(st, 0);
	j = json_loads(o, 0, &e);
	if (!j)
		fprintf(stderr, "usage: not JSON: %.300s\n", o);
	assert_non_null(j);
	*prompt = *completion = *requests = 0;
	json_array_foreach(j, i, row) {
		if (!json_is_null(json_object_get(row, "client")))
			continue;
		*prompt += json_integer_value(json_object_get(row, "prompt_tokens"));
		*completion += json_integer_value(json_object_get(row, "completion_tokens"));
		*requests += json_integer_value(json_object_get(row, "requests"));
	}
	json_decref(j);
	free(o);
}

static void test_usage_totals(void **state)
{
	int64_t want_p = 0, want_c = 0, p, c, n, end;
	const int N = 20;

	(void)state;
	for (int k = 0; k < N; k++) {
		char *body = NULL;
		json_t *j;
		json_error_t e;

		assert_int_equal(gvt_http(gvt_port[k % N_GW], "POST", "/api/generate", gvt_key_u,
				      "{\"model\":\"tiny\",\"prompt\":\"count me\",\"stream\":false,"
				      "\"options\":{\"num_predict\":4}}", &body), 200);
		j = json_loads(body, JSON_ALLOW_NUL, &e);
		assert_non_null(j);
		want_p += json_integer_value(json_object_get(j, "prompt_eval_count"));
		want_c += json_integer_value(json_object_get(j, "eval_count"));
		json_decref(j);
		free(body);
	}
	assert_true(want_c > 0);
	end = h_now_ms() + 10000;
	do {
		usage_sum(&p, &c, &n);
		if (n == N && p == want_p && c == want_c)
			break;
		h_pause_ms(20);
	} while (h_now_ms() < end);
	fprintf(stderr, "usage: requests %lld/%d prompt %lld/%lld completion %lld/%lld\n",
		(long long)n, N, (long long)p, (long long)want_p, (long long)c,
		(long long)want_c);
	if (n != N) {
		char cmd[2200];
		int st;
		char *o;

		snprintf(cmd, sizeof(cmd), "grep -h 'usage\\|request' %s %s | tail -3; "
			 "redis-cli -s %s --scan --pattern '*usage*' | head", gvt_gw[0].log, gvt_gw[1].log,
			 gvt_redis_sock);
		o = h_run_capture(cmd, &st);
		assert_non_null(o);
		fprintf(stderr, "gateway log lines about usage:\n%s\n", o);
		free(o);
	}
	assert_int_equal(n, N);
	assert_int_equal(p, want_p);
	assert_int_equal(c, want_c);
}

/* ---- revocation latency over both gateways -------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static char rev_keys[N_REVOKE][64];

static void test_revocation_latency(void **state)
{
	static int64_t lat[N_REVOKE * N_GW];
	char ids[N_REVOKE][32];
	size_t nl = 0;

	(void)state;
	for (int k = 0; k < N_REVOKE; k++)
		h_issue_key("rev/app", rev_keys[k], ids[k]);
	for (int k = 0; k < N_REVOKE; k++) {
		int64_t t0, end;
		int done[N_GW] = { 0 };
		int left = N_GW;

		/* warm: both gateways hold the key in their cache */
		for (int i = 0; i < N_GW; i++)
			assert_int_equal(gvt_http(gvt_port[i], "GET", "/v1/models", rev_keys[k], NULL, NULL),
					 200);
		h_ctl(NULL, 0, "key revoke %s", ids[k]);
		t0 = gvt_now_us();
		end = t0 + 5000000;
		while (left > 0 && gvt_now_us() < end) {
			for (int i = 0; i < N_GW; i++) {
				int code;

				if (done[i])
					continue;
				code = gvt_http(gvt_port[i], "GET", "/v1/models", rev_keys[k], NULL, NULL);
				if (code == 401) {
					done[i] = 1;
					left--;
					lat[nl++] = gvt_now_us() - t0;
				} else {
					assert_int_equal(code, 200);
				}
			}
		}
		assert_int_equal(left, 0);
	}
	qsort(lat, nl, sizeof(lat[0]), cmp_i64);
	fprintf(stderr, "revocation latency over %zu (revocation, gateway) pairs: "
		"p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", nl, lat[nl / 2] / 1000.0,
		lat[(nl * 99) / 100] / 1000.0, lat[nl - 1] / 1000.0);
	assert_true(lat[(nl * 99) / 100] <= 100000);
}

/* ---- a revocation ends streams in flight on both gateways ----------------- */

static int stream_open(int p, const char *key, const char *body)
{
	struct sockaddr_in sa;
	char head[1024];
	int fd = socket(AF_INET, SOCK_STREAM, 0), len;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)p);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	len = snprintf(head, sizeof(head),
		       "POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
		       "Authorization: Bearer %s\r\nX-Sluice-Ignore-EOS: 1\r\n"
		       "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
		       key, strlen(body), body);
	assert_int_equal(write(fd, head, (size_t)len), len);
	return fd;
}

static double admin_metric(int p, const char *series)
{
	char *body = NULL;
	double v = -1;

	if (gvt_http(p, "GET", "/metrics", NULL, NULL, &body) == 200 && body) {
		const char *q = body;
		size_t n = strlen(series);

		while ((q = strstr(q, series)) != NULL) {
			if ((q == body || q[-1] == '\n') && q[n] == ' ') {
				v = atof(q + n + 1);
				break;
			}
			q += n;
		}
	}
	free(body);
	return v;
}

static void test_revocation_ends_streams(void **state)
{
	static const char body[] =
		"{\"model\":\"tiny\",\"prompt\":\"stream until revoked\","
		"\"options\":{\"num_predict\":440,\"temperature\":0}}";
	char key[64], id[32], buf[N_GW][65536];
	size_t got[N_GW] = { 0 };
	int fd[N_GW], open_n = N_GW;
	int64_t t0, end, ended_us[N_GW];

	(void)state;
	h_issue_key("gov/app", key, id);
	for (int i = 0; i < N_GW; i++) {
		struct pollfd pfd = { .events = POLLIN };
		ssize_t n;

		fd[i] = stream_open(gvt_port[i], key, body);
		pfd.fd = fd[i];
		/* the stream has started: its first bytes arrived */
		assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
		n = read(fd[i], buf[i], sizeof(buf[i]) - 1);
		assert_true(n > 0);
		got[i] = (size_t)n;
	}
	h_ctl(NULL, 0, "key revoke %s", id);
	t0 = gvt_now_us();
	end = t0 + 10000000;
	while (open_n > 0 && gvt_now_us() < end) {
		struct pollfd pfd[N_GW];

		for (int i = 0; i < N_GW; i++) {
			pfd[i].fd = fd[i];
			pfd[i].events = POLLIN;
		}
		assert_true(poll(pfd, N_GW, 1000) >= 0);
		for (int i = 0; i < N_GW; i++) {
			ssize_t n;

			if (fd[i] < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(fd[i], buf[i] + got[i], sizeof(buf[i]) - 1 - got[i]);
			if (n > 0 && got[i] + (size_t)n < sizeof(buf[i]) - 1) {
				got[i] += (size_t)n;
				continue;
			}
			ended_us[i] = gvt_now_us() - t0;
			close(fd[i]);
			fd[i] = -1;
			open_n--;
		}
	}
	assert_int_equal(open_n, 0);
	for (int i = 0; i < N_GW; i++) {
		buf[i][got[i]] = '\0';
		fprintf(stderr, "gateway %d: stream of the revoked key ended %.2f ms after "
			"sluicectl exited\n", i, ended_us[i] / 1000.0);
		assert_null(strstr(buf[i], "\"done\":true"));
		assert_non_null(strstr(buf[i], "{\"error\":"));
		assert_true(ended_us[i] <= 100000);
	}
	/* the worker's sequences and KV blocks are freed */
	end = h_now_ms() + 10000;
	while ((admin_metric(gvt_admin_port[0], "sluice_worker_inflight{worker=\"w0\"}") != 0 ||
		admin_metric(gvt_admin_port[0], "sluice_worker_kv_blocks_used{worker=\"w0\"}") != 0) &&
	       h_now_ms() < end)
		h_pause_ms(20);
	assert_true(admin_metric(gvt_admin_port[0], "sluice_worker_inflight{worker=\"w0\"}") == 0);
	assert_true(admin_metric(gvt_admin_port[0], "sluice_worker_kv_blocks_used{worker=\"w0\"}") == 0);
}

/* ---- usage across a gateway restart ---------------------------------------- */

struct load_arg {
	int idx;
	const char *key;
	int ok;
	int64_t prompt, completion;
};

static volatile int load_ports[N_GW];

static void *load_one(void *p)
{
	struct load_arg *a = p;

	for (int k = 0; k < 12; k++) {
		char *body = NULL;
		int code = gvt_http(load_ports[(a->idx + k) % N_GW], "POST", "/api/generate", a->key,
				"{\"model\":\"tiny\",\"prompt\":\"load run\",\"stream\":false,"
				"\"options\":{\"num_predict\":6}}", &body);

		if (code == 200 && body) {
			json_error_t e;
			json_t *j = json_loads(body, JSON_ALLOW_NUL, &e);

			if (j) {
				a->ok++;
				a->prompt += json_integer_value(json_object_get(j, "prompt_eval_count"));
				a->completion += json_integer_value(json_object_get(j, "eval_count"));
				json_decref(j);
			}
		}
		free(body);
	}
	return NULL;
}

static void usage_of(const char *tenant, int64_t *prompt, int64_t *completion, int64_t *ok)
{
	char *o, cmd[2048];
	json_t *j, *row;
	json_error_t e;
	size_t i;
	int st;

	snprintf(cmd, sizeof(cmd), "%s --redis unix://%s usage %s --format json",
		 h_bin("tools/sluicectl"), gvt_redis_sock, tenant);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	assert_int_equal(st, 0);
	j = json_loads(o, 0, &e);
	assert_non_null(j);
	*prompt = *completion = *ok = 0;
	json_array_foreach(j, i, row) {
		const char *f;
		json_t *v;

		if (!json_is_null(json_object_get(row, "client")))
			continue;
		*prompt += json_integer_value(json_object_get(row, "prompt_tokens"));
		*completion += json_integer_value(json_object_get(row, "completion_tokens"));
		json_object_foreach(row, f, v) {
			if (strcmp(f, "requests") == 0)
				*ok += json_integer_value(v);
			else if (strncmp(f, "errors_", 7) == 0)
				*ok -= json_integer_value(v);
		}
	}
	json_decref(j);
	free(o);
}

static void test_usage_across_restart(void **state)
{
	enum { THREADS = 6 };
	char key[64];
	pthread_t th[THREADS];
	struct load_arg a[THREADS];
	int ok = 0;
	int64_t want_p = 0, want_c = 0, p = 0, c = 0, n = 0, end;

	(void)state;
	h_ctl(NULL, 0, "tenant create load");
	h_ctl(NULL, 0, "client create load/app");
	h_issue_key("load/app", key, NULL);
	for (int i = 0; i < N_GW; i++)
		load_ports[i] = gvt_port[i];
	for (int i = 0; i < THREADS; i++) {
		memset(&a[i], 0, sizeof(a[i]));
		a[i].idx = i;
		a[i].key = key;
		assert_int_equal(pthread_create(&th[i], NULL, load_one, &a[i]), 0);
	}
	/* mid-run: gateway 1 stops (SIGTERM) and comes back on a new port */
	end = h_now_ms() + 30000;
	do {
		int64_t pp, cc, nn;

		usage_of("load", &pp, &cc, &nn);
		if (nn >= 10)
			break;
		h_pause_ms(20);
	} while (h_now_ms() < end);
	assert_int_equal(h_stop(&gvt_gw[1], 10000), 0);
	assert_int_equal(gvt_start_gateway(1), 0);
	load_ports[1] = gvt_port[1];
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		ok += a[i].ok;
		want_p += a[i].prompt;
		want_c += a[i].completion;
	}
	end = h_now_ms() + 10000;
	do {
		usage_of("load", &p, &c, &n);
		if (n == ok && p == want_p && c == want_c)
			break;
		h_pause_ms(20);
	} while (h_now_ms() < end);
	fprintf(stderr, "load with a gateway restart: %d answered 200 of %d; usage ok %lld, "
		"prompt %lld/%lld, completion %lld/%lld\n", ok, THREADS * 12, (long long)n,
		(long long)p, (long long)want_p, (long long)c, (long long)want_c);
	assert_true(ok > 0);
	assert_int_equal(n, ok);
	assert_int_equal(p, want_p);
	assert_int_equal(c, want_c);
}

/* ---- quotas across gateways ------------------------------------------------ */

struct burst_arg {
	int port;
	const char *key;
	int code;
};

static void *burst_one(void *p)
{
	struct burst_arg *a = p;

	a->code = gvt_http(a->port, "POST", "/api/generate", a->key,
		       "{\"model\":\"tiny\",\"prompt\":\"rpm\",\"stream\":false,"
		       "\"options\":{\"num_predict\":1}}", NULL);
	return NULL;
}

static void test_rpm_across_gateways(void **state)
{
	enum { CLIENTS = 50, RPM = 20 };
	char key[64];
	pthread_t th[CLIENTS];
	struct burst_arg a[CLIENTS];
	int ok = 0, limited = 0;

	(void)state;
	h_ctl(NULL, 0, "tenant create rpmt --rpm %d", RPM);
	h_ctl(NULL, 0, "client create rpmt/app");
	h_issue_key("rpmt/app", key, NULL);
	for (int i = 0; i < CLIENTS; i++) {
		a[i].port = gvt_port[i % N_GW];
		a[i].key = key;
		a[i].code = 0;
		assert_int_equal(pthread_create(&th[i], NULL, burst_one, &a[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++) {
		pthread_join(th[i], NULL);
		ok += a[i].code == 200;
		limited += a[i].code == 429;
	}
	fprintf(stderr, "rpm %d, %d concurrent clients over %d gateways: %d admitted, "
		"%d refused (429)\n", RPM, CLIENTS, N_GW, ok, limited);
	assert_int_equal(ok, RPM);
	assert_int_equal(limited, CLIENTS - RPM);
}

static void *hold_one(void *p)
{
	struct burst_arg *a = p;

	a->code = gvt_http(a->port, "POST", "/api/generate", a->key,
		       "{\"model\":\"tiny\",\"prompt\":\"hold\",\"stream\":false,"
		       "\"options\":{\"num_predict\":2}}", NULL);
	return NULL;
}

/* The most leases held in any concurrency set of tenant `t` (Redis). */
static long long leases_held(const char *t)
{
	redisContext *c = redisConnectUnix(gvt_redis_sock);
	redisReply *r, *z;
	long long best = 0;

	assert_non_null(c);
	r = redisCommand(c, "KEYS *%s*", t);
	assert_non_null(r);
	for (size_t i = 0; i < r->elements; i++) {
		z = redisCommand(c, "TYPE %s", r->element[i]->str);
		if (z && z->type == REDIS_REPLY_STATUS && strcmp(z->str, "zset") == 0) {
			freeReplyObject(z);
			z = redisCommand(c, "ZCARD %s", r->element[i]->str);
			if (z && z->integer > best)
				best = z->integer;
		}
		if (z)
			freeReplyObject(z);
	}
	freeReplyObject(r);
	redisFree(c);
	return best;
}

static void test_concurrency_across_gateways_and_crash(void **state)
{
	char key[64];
	pthread_t th[N_GW];
	struct burst_arg a[N_GW];
	int64_t end, t_kill, recovered_ms = -1;
	char *body = NULL;
	int code;

	(void)state;
	h_ctl(NULL, 0, "tenant create conct --concurrency 2");
	h_ctl(NULL, 0, "client create conct/app");
	h_issue_key("conct/app", key, NULL);
	/* the worker paused: admitted requests stay in flight */
	assert_int_equal(h_signal(&gvt_worker, SIGSTOP), 0);
	for (int i = 0; i < N_GW; i++) {
		a[i].port = gvt_port[i];
		a[i].key = key;
		a[i].code = 0;
		assert_int_equal(pthread_create(&th[i], NULL, hold_one, &a[i]), 0);
	}
	/* both slots taken (one per gateway): a third request is refused on
	 * either gateway */
	end = h_now_ms() + 10000;
	while (leases_held("conct") < 2 && h_now_ms() < end)
		h_pause_ms(5);
	assert_int_equal(leases_held("conct"), 2);
	for (int i = 0; i < N_GW; i++)
		assert_int_equal(h_http(gvt_port[i], "POST", "/api/generate", key,
					 "{\"model\":\"tiny\",\"prompt\":\"x\",\"stream\":false}",
					 NULL, 3000), 429);
	/* gateway 1 dies holding its lease: recovered within the lease TTL */
	assert_int_equal(h_signal(&gvt_gw[1], SIGKILL), 0);
	waitpid(gvt_gw[1].pid, NULL, 0);
	t_kill = h_now_ms();
	end = t_kill + 10000;
	while (h_now_ms() < end) {
		/* admitted = no answer (the worker is paused) */
		code = h_http(gvt_port[0], "POST", "/api/generate", key,
			       "{\"model\":\"tiny\",\"prompt\":\"y\",\"stream\":false,"
			       "\"options\":{\"num_predict\":1}}", &body, 200);
		if (code == -2) {
			recovered_ms = h_now_ms() - t_kill;
			break;
		}
		if (code != 429)
			fprintf(stderr, "expected 429 or no answer while the worker is paused, "
				"found %d after %lld ms: %s\n", code, (long long)(h_now_ms() - t_kill),
				body ? body : "");
		free(body);
		body = NULL;
		assert_int_equal(code, 429);
	}
	fprintf(stderr, "concurrency lease of a SIGKILLed gateway recovered after %lld ms "
		"(lease TTL 1500 ms)\n", (long long)recovered_ms);
	assert_true(recovered_ms >= 0 && recovered_ms <= 1500 + 500);
	assert_int_equal(h_signal(&gvt_worker, SIGCONT), 0);
	for (int i = 0; i < N_GW; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(a[0].code, 200);
	assert_int_equal(gvt_start_gateway(1), 0);
}

/* ---- Redis outage policy --------------------------------------------------- */

static const char gen_body[] =
	"{\"model\":\"tiny\",\"prompt\":\"outage\",\"stream\":false,\"options\":{\"num_predict\":2}}";

static void test_redis_outage(void **state)
{
	char fresh[64], revoked[64], revoked_id[32], metered[64], o[4096];
	int64_t p0, c0, n0, p, c, n, end;
	int served = 0, refused = 0, code;
	redisContext *rc;
	redisReply *r;

	(void)state;
	h_ctl(NULL, 0, "tenant create metered --rpm 10");
	h_ctl(NULL, 0, "client create metered/app");
	h_issue_key("metered/app", metered, NULL);
	h_issue_key("gov/app", fresh, NULL);
	h_issue_key("gov/app", revoked, revoked_id);
	/* cache key_u, the revoked key and the metered key on gateway 0 */
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", gvt_key_u, NULL, NULL), 200);
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", revoked, NULL, NULL), 200);
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", metered, NULL, NULL), 200);
	h_ctl(o, sizeof(o), "key revoke %s", revoked_id);
	end = h_now_ms() + 5000;
	while (gvt_http(gvt_port[0], "GET", "/v1/models", revoked, NULL, NULL) != 401 && h_now_ms() < end)
		;
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", revoked, NULL, NULL), 401);
	usage_sum(&p0, &c0, &n0);
	/* persist, then stop Redis (restarted below from the dump) */
	rc = redisConnectUnix(gvt_redis_sock);
	assert_non_null(rc);
	r = redisCommand(rc, "SAVE");
	assert_non_null(r);
	freeReplyObject(r);
	redisFree(rc);
	assert_int_equal(h_stop(&gvt_redis, 10000), 0);
	/* wait until the gateway has noticed (readyz names Redis) */
	end = h_now_ms() + 10000;
	while (gvt_http(gvt_port[0], "GET", "/readyz", NULL, NULL, NULL) == 200 && h_now_ms() < end)
		;
	assert_int_not_equal(gvt_http(gvt_port[0], "GET", "/readyz", NULL, NULL, NULL), 200);
	/* a cached key keeps working (auth_cache_ttl_ms is 5 s) */
	for (int k = 0; k < 3; k++)
		if (gvt_http(gvt_port[0], "POST", "/api/generate", gvt_key_u, gen_body, NULL) == 200)
			served++;
	assert_int_equal(served, 3);
	/* an unknown key: 503; a key revoked before the outage stays refused */
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", fresh, NULL, NULL), 503);
	code = gvt_http(gvt_port[0], "GET", "/v1/models", revoked, NULL, NULL);
	assert_true(code == 401 || code == 503);
	/* quotas: this gateway's share, 0.5 x 10 RPM = 5 */
	for (int k = 0; k < 8; k++) {
		code = gvt_http(gvt_port[0], "POST", "/api/generate", metered, gen_body, NULL);
		if (code == 200)
			served++;
		else if (code == 429)
			refused++;
	}
	fprintf(stderr, "outage: metered 8 requests: %d admitted, %d refused (429)\n",
		served - 3, refused);
	assert_int_equal(served - 3, 5);
	assert_int_equal(refused, 3);
	/* Redis returns: the gateways reconnect, unknown keys are looked up */
	assert_int_equal(gvt_start_redis(), 0);
	end = h_now_ms() + 20000;
	for (int g = 0; g < N_GW; g++) {
		/* each gateway reconnects on its own backoff */
		while ((code = gvt_http(gvt_port[g], "GET", "/v1/models", fresh, NULL, NULL)) != 200 &&
		       h_now_ms() < end)
			h_pause_ms(20);
		assert_int_equal(code, 200);
	}
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", revoked, NULL, NULL), 401);
	/* the outage's 3 requests of gov/app were recorded once Redis came back,
	 * with the 2 /v1/models just above */
	end = h_now_ms() + 20000;
	do {
		usage_sum(&p, &c, &n);
		if (n >= n0 + 5)
			break;
		h_pause_ms(50);
	} while (h_now_ms() < end);
	fprintf(stderr, "outage: gov requests %lld before, %lld after\n", (long long)n0,
		(long long)n);
	assert_int_equal(n, n0 + 5);
}

/* ---- no secret stored or logged ------------------------------------------- */

static int contains(const char *hay, size_t n, const char *needle)
{
	size_t m = strlen(needle);

	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return 1;
	return 0;
}

/* The secret part of a key: what follows its id (gateway/gov/apikey.h). */
static void check_blob(const char *what, const char *p, size_t n)
{
	const char *keys[N_REVOKE + 1];

	keys[0] = gvt_key_u;
	for (int k = 0; k < N_REVOKE; k++)
		keys[k + 1] = rev_keys[k];
	for (int k = 0; k <= N_REVOKE; k++) {
		if (!keys[k][0])
			continue;
		if (contains(p, n, keys[k])) {
			fprintf(stderr, "a key was found in %s\n", what);
			fail();
		}
	}
}

/*
 * A Redis that stops answering but keeps its connections open (SIGSTOP):
 * the quota admission's deadline (redis.timeout_ms, 1 s) answers 503, an
 * unknown key's lookup too, the event loop keeps serving meanwhile, and
 * service resumes when Redis answers again.
 */
static void test_redis_slow(void **state)
{
	char slow[64], fresh[64];
	int64_t t0, dt, end;
	int code;

	(void)state;
	h_ctl(NULL, 0, "tenant create slowt --rpm 1000");
	h_ctl(NULL, 0, "client create slowt/app");
	h_issue_key("slowt/app", slow, NULL);
	h_issue_key("slowt/app", fresh, NULL);
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", slow, NULL, NULL), 200);
	assert_int_equal(gvt_http(gvt_port[0], "POST", "/api/generate", slow, gen_body, NULL), 200);
	assert_int_equal(h_signal(&gvt_redis, SIGSTOP), 0);
	/* the key is cached; its quota admission waits on Redis: 503 at the deadline */
	t0 = h_now_ms();
	code = gvt_http(gvt_port[0], "POST", "/api/generate", slow, gen_body, NULL);
	dt = h_now_ms() - t0;
	fprintf(stderr, "slow redis: quota admission answered %d after %lld ms\n", code,
		(long long)dt);
	assert_int_equal(code, 503);
	assert_true(dt >= 900 && dt < 5000);
	/* an unknown key: its lookup has the same deadline */
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/v1/models", fresh, NULL, NULL), 503);
	/* the event loop never waited: health answers at once */
	t0 = h_now_ms();
	assert_int_equal(gvt_http(gvt_port[0], "GET", "/healthz", NULL, NULL, NULL), 200);
	assert_true(h_now_ms() - t0 < 500);
	/* and readiness says Redis does not answer (issue 13, finding 11: it
	 * stayed 200 while the connections were open): a PING unanswered for
	 * redis.timeout_ms */
	end = h_now_ms() + 10000;
	while ((code = gvt_http(gvt_port[0], "GET", "/readyz", NULL, NULL, NULL)) == 200 &&
	       h_now_ms() < end)
		h_pause_ms(20);
	assert_int_equal(code, 503);
	assert_int_equal(h_signal(&gvt_redis, SIGCONT), 0);
	end = h_now_ms() + 10000;
	while ((code = gvt_http(gvt_port[0], "GET", "/readyz", NULL, NULL, NULL)) != 200 &&
	       h_now_ms() < end)
		h_pause_ms(20);
	assert_int_equal(code, 200);
	end = h_now_ms() + 20000;
	while ((code = gvt_http(gvt_port[0], "POST", "/api/generate", slow, gen_body, NULL)) != 200 &&
	       h_now_ms() < end)
		h_pause_ms(20);
	assert_int_equal(code, 200);
	code = gvt_http(gvt_port[0], "GET", "/v1/models", fresh, NULL, NULL);
	if (code != 200)
		fprintf(stderr, "slow redis: the fresh key got %d once Redis answered\n", code);
	assert_int_equal(code, 200);
}

static void test_no_secret_stored_or_logged(void **state)
{
	redisContext *c = redisConnectUnix(gvt_redis_sock);
	redisReply *r, *v;
	size_t nk = 0;

	(void)state;
	assert_non_null(c);
	assert_int_equal(c->err, 0);
	r = redisCommand(c, "KEYS *");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	for (size_t i = 0; i < r->elements; i++) {
		const char *k = r->element[i]->str;

		check_blob("a Redis key name", k, r->element[i]->len);
		v = redisCommand(c, "DUMP %s", k);
		assert_non_null(v);
		if (v->type == REDIS_REPLY_STRING)
			check_blob("a Redis value", v->str, v->len);
		freeReplyObject(v);
		nk++;
	}
	freeReplyObject(r);
	redisFree(c);
	assert_true(nk > 0);
	{
		/* every log of every process started, restarted ones included */
		char pat[600];
		glob_t g;

		snprintf(pat, sizeof(pat), "%s/*.log", gvt_dir);
		assert_int_equal(glob(pat, 0, NULL, &g), 0);
		assert_true(g.gl_pathc >= 4);
		for (size_t i = 0; i < g.gl_pathc; i++) {
			size_t len;
			char *t = h_read_file(g.gl_pathv[i], &len);

			if (t)
				check_blob(g.gl_pathv[i], t, len);
			free(t);
		}
		globfree(&g);
	}
}

/* ---- the audit chain ----------------------------------------------------- */

static void test_audit_verify(void **state)
{
	redisContext *c;
	redisReply *r;
	char o[65536];

	(void)state;
	/* an admin API mutation joins sluicectl's records in the chain */
	assert_int_equal(gvt_http(gvt_admin_port[0], "POST", "/admin/tenants", ADMIN_TOKEN,
			      "{\"name\":\"viaadmin\"}", NULL), 201);
	h_ctl(o, sizeof(o), "audit verify");
	c = redisConnectUnix(gvt_redis_sock);
	assert_non_null(c);
	/*
	 * Editing: streams cannot be changed in place, so a copy of the log
	 * (namespaces "same:" and "edit:") gets its last record replaced by
	 * one with the same fields (control: still verifies) or with one field
	 * altered (must fail).
	 */
	for (int edit = 0; edit <= 1; edit++) {
		const char *ns = edit ? "edit:" : "same:";
		redisReply *last, *x;
		const char *argv[32];
		size_t argl[32], n = 0;

		x = redisCommand(c, "COPY sluice:audit %saudit", ns);
		assert_non_null(x);
		assert_int_equal(x->integer, 1);
		freeReplyObject(x);
		x = redisCommand(c, "COPY sluice:audit:head %saudit:head", ns);
		assert_non_null(x);
		freeReplyObject(x);
		last = redisCommand(c, "XREVRANGE %saudit + - COUNT 1", ns);
		assert_non_null(last);
		assert_int_equal(last->elements, 1);
		x = redisCommand(c, "XDEL %saudit %s", ns, last->element[0]->element[0]->str);
		assert_non_null(x);
		freeReplyObject(x);
		{
			static char sname[64];
			redisReply *f = last->element[0]->element[1];

			snprintf(sname, sizeof(sname), "%saudit", ns);
			argv[n] = "XADD";
			argl[n++] = 4;
			argv[n] = sname;
			argl[n++] = strlen(sname);
			argv[n] = "*";
			argl[n++] = 1;
			for (size_t i = 0; i + 1 < f->elements && n + 2 < 32; i += 2) {
				argv[n] = f->element[i]->str;
				argl[n++] = f->element[i]->len;
				if (edit && strcmp(f->element[i]->str, "result") == 0) {
					argv[n] = strcmp(f->element[i + 1]->str, "ok") == 0 ? "error"
											     : "ok";
					argl[n] = strlen(argv[n]);
					n++;
				} else {
					argv[n] = f->element[i + 1]->str;
					argl[n++] = f->element[i + 1]->len;
				}
			}
		}
		x = redisCommandArgv(c, (int)n, argv, argl);
		assert_non_null(x);
		assert_int_equal(x->type, REDIS_REPLY_STRING);
		freeReplyObject(x);
		freeReplyObject(last);
		if (edit)
			assert_int_not_equal(h_ctl_rc(o, sizeof(o), "--namespace %s audit verify", ns),
					     0);
		else
			assert_int_equal(h_ctl_rc(o, sizeof(o), "--namespace %s audit verify", ns), 0);
	}
	assert_non_null(c);
	r = redisCommand(c, "XRANGE sluice:audit - + COUNT 3");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	assert_true(r->elements == 3);
	{
		redisReply *d = redisCommand(c, "XDEL sluice:audit %s",
					     r->element[1]->element[0]->str);

		assert_non_null(d);
		assert_int_equal(d->integer, 1);
		freeReplyObject(d);
	}
	freeReplyObject(r);
	redisFree(c);
	assert_int_not_equal(h_ctl_rc(o, sizeof(o), "audit verify"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admin_api_mounted),
		cmocka_unit_test(test_usage_totals),
		cmocka_unit_test(test_revocation_latency),
		cmocka_unit_test(test_revocation_ends_streams),
		cmocka_unit_test(test_usage_across_restart),
		cmocka_unit_test(test_rpm_across_gateways),
		cmocka_unit_test(test_concurrency_across_gateways_and_crash),
		cmocka_unit_test(test_redis_outage),
		cmocka_unit_test(test_redis_slow),
		cmocka_unit_test(test_no_secret_stored_or_logged),
		cmocka_unit_test(test_audit_verify),
	};

	return cmocka_run_group_tests(tests, gvt_setup, gvt_teardown);
}
