/*
 * test_gateway.c - the whole service with real processes: a private
 * redis-server on a Unix socket, a sluice-worker on a generated tiny model,
 * sluice-gateway with a certificate made here (openssl CLI), keys made with
 * sluicectl, and curl as the client (issue 5, "Done when").
 *
 *  - every endpoint, streaming and not, parses as its API says; Ollama
 *    eval_count equals the tokens streamed and the durations are present;
 *  - bad input (401 missing/malformed/unknown/revoked key, 431, 413, 400s,
 *    404 unknown model, 403 model management, slowloris, garbage instead of
 *    a ClientHello) gets its status and format while a well-behaved client
 *    keeps being served;
 *  - a full tenant queue answers 429 with Retry-After while another tenant
 *    is served; 64 queued batch requests and one interactive: the
 *    interactive one is dispatched first;
 *  - a client that disconnects mid-stream frees its KV blocks (worker
 *    STATS through /metrics);
 *  - a worker killed mid-stream: the stream ends with an error event,
 *    /readyz names the worker, service resumes when it is back;
 *  - a revoked key is refused on the next request, and a revocation stops
 *    that key's stream in flight; a quota over its limit is a 429 naming it;
 *  - a canary sent in prompts is in no log file and nowhere in Redis;
 *  - the quickstart script ends with a curl that returns text.
 * Synchronisation is by polling with deadlines, never by sleeping.
 * The gateway runs with max_inflight_per_worker = 1 so that queueing is
 * deterministic.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
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
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/clock.h"
#include "gateway/gov/apikey.h"
#include "harness.h"

#define CANARY "CANARY-b7e1f03c-never-log-me"
#define DEADLINE_MS 60000

static struct h_proc redis, worker, gateway;
static char dir[512], redis_sock[600], worker_sock[600], cert[600], pepper[600];
static int port, admin_port;
static char worker_cfg[2048];
static char key_a[64], key_b[64], key_night[64], key_small[64];

/* ---- helpers --------------------------------------------------------- */

static void ctl(char *out, size_t size, const char *fmt, ...)
{
	char args[512], cmd[2048];
	va_list ap;
	int st;
	char *o;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "%s --redis unix://%s --pepper-file %s %s 2>&1",
		 h_bin("tools/sluicectl"), redis_sock, pepper, args);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	if (st != 0)
		fprintf(stderr, "sluicectl %s: %s\n", args, o);
	assert_int_equal(st, 0);
	if (out)
		snprintf(out, size, "%s", o);
	free(o);
}

static void issue_key(const char *who, char out[64])
{
	char o[2048], *p;

	ctl(o, sizeof(o), "key issue %s", who);
	p = strstr(o, "key:     ");
	assert_non_null(p);
	p += 9;
	snprintf(out, 64, "%.*s", (int)strcspn(p, "\n"), p);
	assert_int_equal(strlen(out), GW_KEY_LEN);
}

struct resp {
	int code;
	char *body;
	char *headers;
};

static void resp_free(struct resp *r)
{
	free(r->body);
	free(r->headers);
	memset(r, 0, sizeof(*r));
}

/* curl against the gateway; body from `data` (NULL: GET) written to a file. */
static void req(struct resp *r, const char *path, const char *key, const char *data,
		size_t data_len, const char *extra)
{
	static int seq;
	char bodyf[700], hdrf[700], dataf[700], cmd[16384], auth[128] = "";
	int st;
	char *o;
	size_t len;

	seq++;
	snprintf(bodyf, sizeof(bodyf), "%s/resp%d.body", dir, seq);
	snprintf(hdrf, sizeof(hdrf), "%s/resp%d.hdr", dir, seq);
	snprintf(dataf, sizeof(dataf), "%s/req%d.data", dir, seq);
	if (data) {
		FILE *f = fopen(dataf, "wb");

		assert_non_null(f);
		fwrite(data, 1, data_len ? data_len : strlen(data), f);
		fclose(f);
	}
	if (key)
		snprintf(auth, sizeof(auth), "-H 'Authorization: Bearer %s'", key);
	snprintf(cmd, sizeof(cmd),
		 "curl -sS --max-time 60 --cacert %s -o %s -D %s -w '%%{http_code}' %s "
		 "%s%s%s %s 'https://127.0.0.1:%d%s'",
		 cert, bodyf, hdrf, auth, data ? "--data-binary @" : "", data ? dataf : "",
		 data ? " -H 'Content-Type: application/json'" : "", extra ? extra : "", port, path);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	r->code = atoi(o);
	free(o);
	r->body = h_read_file(bodyf, &len);
	if (!r->body)
		r->body = calloc(1, 1);
	r->headers = h_read_file(hdrf, &len);
	if (!r->headers)
		r->headers = calloc(1, 1);
}

static json_t *parse(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_ALLOW_NUL, &e); /* models may emit NUL */

	if (!j)
		fprintf(stderr, "not JSON (%s): %.300s\n", e.text, s);
	assert_non_null(j);
	return j;
}

static const char *ollama_error(json_t *j)
{
	json_t *e = json_object_get(j, "error");

	assert_true(json_is_string(e));
	return json_string_value(e);
}

static const char *openai_error(json_t *j)
{
	json_t *e = json_object_get(j, "error");

	assert_true(json_is_object(e));
	assert_true(json_is_string(json_object_get(e, "message")));
	assert_true(json_is_string(json_object_get(e, "type")));
	return json_string_value(json_object_get(e, "message"));
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

/* Value of one sample line "name{labels} value" (or -1). */
static double metric(const char *text, const char *series)
{
	const char *p = text;
	size_t n = strlen(series);

	while ((p = strstr(p, series)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return atof(p + n + 1);
		p += n;
	}
	return -1;
}

static int wait_port_line(void)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		size_t len;
		char *log = h_read_file(gateway.log, &len);
		char *p = log ? strstr(log, "sluice-gateway listening port=") : NULL;

		if (p && sscanf(p, "sluice-gateway listening port=%d admin_port=%d", &port,
				&admin_port) == 2) {
			free(log);
			return 0;
		}
		free(log);
		if (!h_alive(&gateway))
			return -1;
		h_pause_ms(20);
	}
	return -1;
}

static int wait_ready(void)
{
	int64_t end = h_now_ms() + DEADLINE_MS;
	struct resp r;

	while (h_now_ms() < end) {
		req(&r, "/readyz", NULL, NULL, 0, NULL);
		if (r.code == 200) {
			resp_free(&r);
			return 0;
		}
		resp_free(&r);
		h_pause_ms(50);
	}
	return -1;
}

static void assert_served(void)
{
	struct resp r;
	json_t *j;

	req(&r, "/api/generate", key_a,
	    "{\"model\":\"tiny\",\"prompt\":\"hello\",\"stream\":false,\"options\":{\"num_predict\":3}}",
	    0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_true(json_is_true(json_object_get(j, "done")));
	json_decref(j);
	resp_free(&r);
}

/* ---- setup ----------------------------------------------------------- */

static int start_redis(void)
{
	return h_redis_start(&redis, redis_sock, dir, DEADLINE_MS);
}

static int setup(void **state)
{
	char cmd[2048], path[700];
	const char *model;
	int rc;
	FILE *f;
	char *argv[4];

	(void)state;
	if (system("command -v openssl >/dev/null && command -v curl >/dev/null") != 0)
		return 77;
	snprintf(dir, sizeof(dir), "%s", h_tmpdir());
	snprintf(redis_sock, sizeof(redis_sock), "%s/redis.sock", dir);
	snprintf(worker_sock, sizeof(worker_sock), "%s/worker.sock", dir);
	snprintf(cert, sizeof(cert), "%s/tls.crt", dir);
	snprintf(pepper, sizeof(pepper), "%s/pepper", dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
		 "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 -keyout %s/tls.key "
		 "-out %s >/dev/null 2>&1", dir, cert);
	if (system(cmd) != 0)
		return -1;
	f = fopen(pepper, "w");
	if (!f)
		return -1;
	fprintf(f, "test-pepper-0123456789abcdef0123456789abcdef\n");
	fclose(f);
	chmod(pepper, 0600);
	rc = start_redis();
	if (rc != 0)
		return rc;
	model = h_model("tiny", "Q8_0", "llama");
	if (!model)
		return -1;
	snprintf(worker_cfg, sizeof(worker_cfg),
		 "{\"worker\": {\"name\": \"w0\", \"model\": \"%s\", \"model_name\": \"tiny\","
		 " \"socket\": \"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\","
		 " \"max_running\": 8, \"stats_interval_ms\": 100}}", model, worker_sock);
	if (h_worker_start(&worker, "worker", worker_cfg) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/gateway.json", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"gateway\": {\"listen_addr\": \"127.0.0.1\", \"port\": 0,"
		" \"tls_cert_file\": \"%s\", \"tls_key_file\": \"%s/tls.key\","
		" \"admin_addr\": \"127.0.0.1\", \"admin_port\": 0, \"pepper_file\": \"%s\","
		" \"log_level\": \"debug\","
		" \"limits\": {\"body_bytes\": \"64KiB\", \"header_bytes\": \"8KiB\","
		"   \"messages\": 8, \"stop_strings\": 4},"
		" \"timeouts\": {\"header_ms\": 1500, \"body_ms\": 1500},"
		" \"workers\": [{\"name\": \"w0\", \"socket\": \"%s\", \"model\": \"tiny\"}],"
		" \"max_inflight_per_worker\": 1, \"ping_interval_ms\": 500,"
		" \"stats_timeout_ms\": 3000,"
		" \"queue\": {\"tenant_max\": 8, \"global_max\": 200, \"timeout_ms\": \"60s\"},"
		" \"redis\": {\"url\": \"unix://%s\", \"auth_cache_ttl_ms\": 2000}}}\n",
		cert, dir, pepper, worker_sock, redis_sock);
	fclose(f);
	argv[0] = (char *)h_bin("gateway/sluice-gateway");
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = NULL;
	if (h_spawn(&gateway, "gateway", argv) != 0 || wait_port_line() != 0)
		return -1;
	ctl(NULL, 0, "tenant create alpha");
	ctl(NULL, 0, "client create alpha/app");
	ctl(NULL, 0, "tenant create beta");
	ctl(NULL, 0, "client create beta/app");
	ctl(NULL, 0, "tenant create night --queue 100");
	ctl(NULL, 0, "client create night/batch");
	ctl(NULL, 0, "tenant create small --queue 1");
	ctl(NULL, 0, "client create small/app");
	issue_key("alpha/app", key_a);
	issue_key("beta/app", key_b);
	issue_key("night/batch", key_night);
	issue_key("small/app", key_small);
	return wait_ready();
}

static int teardown(void **state)
{
	int rc;

	(void)state;
	/* a clean stop on SIGTERM (under ASan: no leak, no error report) */
	rc = h_stop(&gateway, 10000);
	h_stop(&worker, 10000);
	h_stop(&redis, 10000);
	if (rc != 0) {
		fprintf(stderr, "gateway exit status %d; log kept: %s\n", rc, gateway.log);
		return -1;
	}
	h_cleanup();
	return 0;
}

/* ---- every endpoint ---------------------------------------------------- */

static void test_fixed_endpoints(void **state)
{
	struct resp r;
	json_t *j, *a;

	(void)state;
	req(&r, "/healthz", NULL, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	req(&r, "/readyz", NULL, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	req(&r, "/metrics", NULL, NULL, 0, NULL); /* never on the public port */
	assert_int_equal(r.code, 404);
	resp_free(&r);
	req(&r, "/api/version", NULL, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_true(json_is_string(json_object_get(j, "version")));
	json_decref(j);
	resp_free(&r);

	req(&r, "/api/tags", key_a, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	a = json_object_get(j, "models");
	assert_int_equal(json_array_size(a), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "name")), "tiny");
	json_decref(j);
	resp_free(&r);
	req(&r, "/v1/models", key_a, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	a = json_object_get(j, "data");
	assert_int_equal(json_array_size(a), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "id")), "tiny");
	json_decref(j);
	resp_free(&r);
	req(&r, "/api/ps", key_a, NULL, 0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_int_equal(json_array_size(json_object_get(j, "models")), 1);
	json_decref(j);
	resp_free(&r);
	req(&r, "/api/show", key_a, "{\"model\":\"tiny\"}", 0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_true(json_is_object(j));
	json_decref(j);
	resp_free(&r);
	req(&r, "/api/show", key_a, "{\"model\":\"nope\"}", 0, NULL);
	assert_int_equal(r.code, 404);
	resp_free(&r);
}

/* NDJSON: every line an object; returns the number of done:false chunks
 * and the final object (caller decrefs). */
static json_t *ndjson(const char *body, int *chunks, const char *field, const char *sub)
{
	const char *p = body;
	json_t *last = NULL;

	*chunks = 0;
	while (*p) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n);
		json_t *j = parse(line);

		free(line);
		if (json_is_true(json_object_get(j, "done"))) {
			assert_null(last);
			last = j;
		} else {
			json_t *f = json_object_get(j, field);

			assert_null(last); /* nothing after the final line */
			if (sub)
				f = json_object_get(f, sub);
			assert_true(json_is_string(f));
			(*chunks)++;
			json_decref(j);
		}
		p += n;
		if (*p == '\n')
			p++;
	}
	assert_non_null(last);
	return last;
}

static void assert_ollama_final(json_t *f, int chunks)
{
	static const char *const durs[] = { "total_duration", "load_duration",
					    "prompt_eval_duration", "eval_duration" };

	for (size_t i = 0; i < 4; i++)
		assert_true(json_is_integer(json_object_get(f, durs[i])));
	assert_true(json_integer_value(json_object_get(f, "total_duration")) > 0);
	assert_true(json_integer_value(json_object_get(f, "prompt_eval_count")) > 0);
	assert_true(json_integer_value(json_object_get(f, "eval_duration")) > 0);
	/* eval_count == tokens streamed (one chunk per token; text held back
	 * by the worker until the end comes as at most one extra chunk) */
	assert_true(json_integer_value(json_object_get(f, "eval_count")) == chunks ||
		    json_integer_value(json_object_get(f, "eval_count")) + 1 == chunks);
	assert_true(json_is_string(json_object_get(f, "done_reason")));
}

static void test_ollama_generate_and_chat(void **state)
{
	struct resp r;
	json_t *f;
	int chunks;

	(void)state;
	req(&r, "/api/generate", key_a,
	    "{\"model\":\"tiny\",\"prompt\":\"tell me\",\"options\":{\"num_predict\":8,\"seed\":3}}",
	    0, NULL);
	assert_int_equal(r.code, 200);
	assert_non_null(strstr(r.headers, "application/x-ndjson"));
	f = ndjson(r.body, &chunks, "response", NULL);
	assert_ollama_final(f, chunks);
	assert_true(chunks >= 1);
	json_decref(f);
	resp_free(&r);

	req(&r, "/api/generate", key_a,
	    "{\"model\":\"tiny\",\"prompt\":\"tell me\",\"stream\":false,\"options\":{\"num_predict\":8}}",
	    0, NULL);
	assert_int_equal(r.code, 200);
	f = parse(r.body);
	assert_true(json_is_string(json_object_get(f, "response")));
	assert_true(json_is_true(json_object_get(f, "done")));
	assert_true(json_integer_value(json_object_get(f, "eval_count")) >= 1);
	assert_true(json_integer_value(json_object_get(f, "eval_count")) <= 8);
	json_decref(f);
	resp_free(&r);

	req(&r, "/api/chat", key_a,
	    "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	    "\"options\":{\"num_predict\":6}}", 0, NULL);
	assert_int_equal(r.code, 200);
	f = ndjson(r.body, &chunks, "message", "content");
	assert_ollama_final(f, chunks);
	json_decref(f);
	resp_free(&r);

	req(&r, "/api/chat", key_a,
	    "{\"model\":\"tiny\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	    "\"options\":{\"num_predict\":6}}", 0, NULL);
	assert_int_equal(r.code, 200);
	f = parse(r.body);
	assert_true(json_is_string(json_object_get(json_object_get(f, "message"), "content")));
	assert_true(json_is_integer(json_object_get(f, "prompt_eval_count")));
	json_decref(f);
	resp_free(&r);
}

/* SSE: counts content chunks, checks [DONE] ends it, returns the usage. */
static json_t *sse(const char *body, int *chunks, int chat)
{
	const char *p = body;
	json_t *usage = NULL;
	int done = 0;

	*chunks = 0;
	while (*p) {
		size_t n = strcspn(p, "\n");

		if (n > 0) {
			char *line = strndup(p, n);

			assert_false(done);
			assert_memory_equal(line, "data: ", 6);
			if (strcmp(line + 6, "[DONE]") == 0) {
				done = 1;
			} else {
				json_t *j = parse(line + 6);
				json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
				json_t *u = json_object_get(j, "usage");

				if (ch) {
					json_t *t = chat ? json_object_get(json_object_get(ch, "delta"), "content")
							 : json_object_get(ch, "text");

					if (json_is_string(t) && json_is_null(json_object_get(ch, "finish_reason")))
						(*chunks)++;
				}
				if (json_is_object(u))
					usage = json_incref(u);
				json_decref(j);
			}
			free(line);
		}
		p += n;
		if (*p == '\n')
			p++;
	}
	assert_true(done);
	return usage;
}

static void test_openai(void **state)
{
	struct resp r;
	json_t *j, *u;
	int chunks;

	(void)state;
	req(&r, "/v1/chat/completions", key_a,
	    "{\"model\":\"tiny\",\"stream\":true,\"stream_options\":{\"include_usage\":true},"
	    "\"max_tokens\":7,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 0, NULL);
	assert_int_equal(r.code, 200);
	assert_non_null(strstr(r.headers, "text/event-stream"));
	u = sse(r.body, &chunks, 1);
	assert_non_null(u);
	assert_true(json_integer_value(json_object_get(u, "completion_tokens")) >= 1);
	assert_true(json_integer_value(json_object_get(u, "prompt_tokens")) >= 1);
	assert_true(chunks >= 1);
	json_decref(u);
	resp_free(&r);

	req(&r, "/v1/chat/completions", key_a,
	    "{\"model\":\"tiny\",\"max_tokens\":7,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
	    0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_true(json_is_string(json_object_get(json_object_get(
		json_array_get(json_object_get(j, "choices"), 0), "message"), "content")));
	assert_true(json_integer_value(json_object_get(json_object_get(j, "usage"),
						       "completion_tokens")) >= 1);
	json_decref(j);
	resp_free(&r);

	req(&r, "/v1/completions", key_a,
	    "{\"model\":\"tiny\",\"prompt\":\"once\",\"max_tokens\":5,\"stream\":true}", 0, NULL);
	assert_int_equal(r.code, 200);
	u = sse(r.body, &chunks, 0);
	assert_null(u); /* no include_usage: no usage chunk */
	assert_true(chunks >= 1);
	resp_free(&r);

	req(&r, "/v1/completions", key_a, "{\"model\":\"tiny\",\"prompt\":\"once\",\"max_tokens\":5}",
	    0, NULL);
	assert_int_equal(r.code, 200);
	j = parse(r.body);
	assert_true(json_is_string(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
						   "text")));
	assert_true(json_is_object(json_object_get(j, "usage")));
	json_decref(j);
	resp_free(&r);
}

/* ---- bad input ----------------------------------------------------------- */

static void expect(const char *path, const char *key, const char *body, size_t len,
		   const char *extra, int code)
{
	struct resp r;
	json_t *j;
	const char *msg;

	req(&r, path, key, body, len, extra);
	if (r.code != code)
		fprintf(stderr, "%s %s: expected %d, got %d: %.300s\n", path,
			body ? body : "", code, r.code, r.body);
	assert_int_equal(r.code, code);
	j = parse(r.body);
	msg = strncmp(path, "/v1/", 4) == 0 ? openai_error(j) : ollama_error(j);
	/* never a path, a key or internal state */
	assert_null(strstr(msg, "/tmp"));
	assert_null(strstr(msg, "slk_"));
	assert_null(strstr(r.body, dir));
	if (key)
		assert_null(strstr(r.body, key));
	json_decref(j);
	resp_free(&r);
}

static void test_bad_keys(void **state)
{
	struct gw_key_pepper *pp;
	char unknown[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1], wrong[GW_KEY_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	const char *gen = "{\"model\":\"tiny\",\"prompt\":\"x\"}";

	(void)state;
	assert_int_equal(gw_key_pepper_from_bytes("another-pepper-0123456789abcdef0123", 35, &pp), CM_OK);
	assert_int_equal(gw_key_generate(pp, unknown, id, mac), CM_OK);
	gw_key_pepper_free(pp);
	expect("/api/generate", NULL, gen, 0, NULL, 401);
	expect("/v1/chat/completions", NULL, gen, 0, NULL, 401);
	expect("/api/generate", "slk_short", gen, 0, NULL, 401);
	expect("/api/generate", unknown, gen, 0, NULL, 401);
	expect("/v1/models", unknown, NULL, 0, NULL, 401);
	/* the right id with a wrong secret */
	memcpy(wrong, key_a, sizeof(wrong));
	wrong[20] = wrong[20] == 'a' ? 'b' : 'a';
	expect("/api/generate", wrong, gen, 0, NULL, 401);
	assert_served();
}

static void test_bad_requests(void **state)
{
	static const char nul_body[] = "{\"model\":\"tiny\",\"prompt\":\"a\0b\"}";
	char *big = malloc(100 * 1024);
	char hdr[10000 + 64];
	char chat9[2048], stop5[512];
	size_t o;

	(void)state;
	/* 413 before the body is read */
	memset(big, ' ', 100 * 1024);
	big[0] = '{';
	big[100 * 1024 - 1] = '}';
	expect("/api/generate", key_a, big, 100 * 1024, NULL, 413);
	free(big);
	/* 431 */
	o = (size_t)snprintf(hdr, sizeof(hdr), "-H 'X-Big: ");
	memset(hdr + o, 'a', 9000);
	snprintf(hdr + o + 9000, sizeof(hdr) - o - 9000, "'");
	expect("/api/generate", key_a, "{}", 0, hdr, 431);
	assert_served();
	/* 400s in each API's format */
	expect("/api/generate", key_a, "{\"model\":\"tiny\",", 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":5}", 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"model\":\"tiny\",\"prompt\":\"x\"}", 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":\"x\",\"options\":{\"num_predict\":-5}}", 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":\"x\",\"options\":{\"num_predict\":99999999999}}", 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":\"x\",\"options\":{\"temperature\":-1}}", 0, NULL, 400);
	expect("/v1/chat/completions", key_a, "{\"model\":\"tiny\",\"max_tokens\":-1,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL, 400);
	expect("/v1/chat/completions", key_a, "{\"model\":\"tiny\",\"top_p\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL, 400);
	expect("/v1/chat/completions", key_a, "{\"model\":\"tiny\",\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL, 400);
	expect("/v1/completions", key_a, "{\"model\":\"tiny\",\"prompt\":\"\xff\xfe\"}", 0, NULL, 400);
	expect("/v1/completions", key_a, nul_body, sizeof(nul_body) - 1, NULL, 400);
	expect("/v1/completions", key_a, "{\"model\":\"tiny\",\"prompt\":\"a\\u0000b\"}", 0, NULL, 400);
	o = (size_t)snprintf(chat9, sizeof(chat9), "{\"model\":\"tiny\",\"messages\":[");
	for (int i = 0; i < 9; i++)
		o += (size_t)snprintf(chat9 + o, sizeof(chat9) - o, "%s{\"role\":\"user\",\"content\":\"m\"}",
				      i ? "," : "");
	snprintf(chat9 + o, sizeof(chat9) - o, "]}");
	expect("/api/chat", key_a, chat9, 0, NULL, 400);
	snprintf(stop5, sizeof(stop5), "{\"model\":\"tiny\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}");
	expect("/v1/completions", key_a, stop5, 0, NULL, 400);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":\"x\"}", 0,
	       "-H 'X-Sluice-Class: urgent'", 400);
	/* 404 unknown model, 403 model management */
	expect("/api/generate", key_a, "{\"model\":\"gpt-9\",\"prompt\":\"x\"}", 0, NULL, 404);
	expect("/v1/chat/completions", key_a, "{\"model\":\"gpt-9\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL, 404);
	expect("/api/pull", key_a, "{\"model\":\"tiny\"}", 0, NULL, 403);
	expect("/api/delete", NULL, "{\"model\":\"tiny\"}", 0, "-X DELETE", 403);
	assert_served();
}

static int tcp_connect(void)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Reads until EOF/error; returns ms waited or -1 past the deadline. */
static int64_t wait_closed(int fd, int64_t deadline_ms)
{
	int64_t start = h_now_ms();
	char buf[512];

	while (h_now_ms() - start < deadline_ms) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, 100) > 0) {
			ssize_t n = read(fd, buf, sizeof(buf));

			if (n <= 0)
				return h_now_ms() - start;
		}
	}
	return -1;
}

static void test_slowloris_and_garbage_tls(void **state)
{
	int slow[4], garbage;
	int64_t t;

	(void)state;
	/* slow clients: a few bytes of a ClientHello, then nothing */
	for (int i = 0; i < 4; i++) {
		slow[i] = tcp_connect();
		assert_int_equal(write(slow[i], "\x16\x03\x01", 3), 3);
	}
	/* a well-behaved client is served meanwhile */
	assert_served();
	for (int i = 0; i < 4; i++) {
		t = wait_closed(slow[i], 10000);
		assert_true(t >= 0); /* closed by the header deadline (1.5 s) */
		close(slow[i]);
	}
	/* plain HTTP instead of a ClientHello */
	garbage = tcp_connect();
	assert_int_equal(write(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27), 27);
	assert_true(wait_closed(garbage, 10000) >= 0);
	close(garbage);
	garbage = tcp_connect();
	assert_int_equal(write(garbage, "\x00\x01\x02\x03garbage\xff\xfe", 13), 13);
	assert_true(wait_closed(garbage, 10000) >= 0);
	close(garbage);
	assert_served();
}

/* ---- queues ---------------------------------------------------------------- */

/* curl in the background, body to `out`; returns its pid. */
static pid_t bg_curl(const char *path, const char *key, const char *body,
		     const char *extra, const char *out)
{
	char cmd[4096];
	pid_t pid;

	snprintf(cmd, sizeof(cmd),
		 "curl -sS -N --max-time 120 --cacert %s -o %s -w '%%{http_code}' "
		 "-H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
		 "-H 'X-Sluice-Ignore-EOS: 1' "
		 "--data-binary '%s' %s 'https://127.0.0.1:%d%s' > %s.code 2>/dev/null",
		 cert, out, key, body, extra ? extra : "", port, path, out);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int bg_code(const char *out)
{
	char path[800];
	size_t len;
	char *c;
	int code;

	snprintf(path, sizeof(path), "%s.code", out);
	c = h_read_file(path, &len);
	code = c ? atoi(c) : -1;
	free(c);
	return code;
}

static void wait_pid(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* Polls /metrics until `series` reaches `value` (or the deadline). */
static int wait_metric(const char *series, double value, int at_least)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		char *m = metrics();
		double v = metric(m, series);

		free(m);
		if (at_least ? v >= value : v == value)
			return 0;
		h_pause_ms(10);
	}
	fprintf(stderr, "metric %s never reached %g\n", series, value);
	return -1;
}

static const char holder_body[] =
	"{\"model\":\"tiny\",\"prompt\":\"hold the worker\",\"options\":{\"num_predict\":440,"
	"\"temperature\":0}}";

static void test_tenant_queue_full_429(void **state)
{
	char out[4][700];
	pid_t holder, queued;
	struct resp r;
	json_t *j;

	(void)state;
	for (int i = 0; i < 4; i++)
		snprintf(out[i], sizeof(out[i]), "%s/q429-%d", dir, i);
	holder = bg_curl("/api/generate", key_a, holder_body, NULL, out[0]);
	assert_int_equal(wait_metric("sluice_worker_inflight{worker=\"w0\"}", 1, 0), 0);
	/* the worker is paused so that its one slot stays taken however fast
	 * the holder would otherwise finish */
	assert_int_equal(kill(worker.pid, SIGSTOP), 0);
	queued = bg_curl("/api/generate", key_small,
			 "{\"model\":\"tiny\",\"prompt\":\"q\",\"options\":{\"num_predict\":4}}",
			 NULL, out[1]);
	assert_int_equal(wait_metric("sluice_gateway_queue_depth{tenant=\"small\"}", 1, 0), 0);
	/* the tenant's one queue place is taken: 429 with Retry-After */
	req(&r, "/v1/completions", key_small, "{\"model\":\"tiny\",\"prompt\":\"q\",\"max_tokens\":4}",
	    0, NULL);
	assert_int_equal(r.code, 429);
	assert_non_null(strcasestr(r.headers, "\nRetry-After: "));
	j = parse(r.body);
	assert_non_null(strstr(openai_error(j), "queue"));
	json_decref(j);
	resp_free(&r);
	/* another tenant is still admitted and served */
	assert_int_equal(kill(worker.pid, SIGCONT), 0);
	req(&r, "/api/generate", key_b,
	    "{\"model\":\"tiny\",\"prompt\":\"b\",\"stream\":false,\"options\":{\"num_predict\":3}}", 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	wait_pid(holder);
	wait_pid(queued);
	assert_int_equal(bg_code(out[0]), 200);
	assert_int_equal(bg_code(out[1]), 200);
}

static void test_interactive_ahead_of_64_batch(void **state)
{
	enum { NB = 64 };
	static pid_t bpid[NB];
	char out[700], *log, *p, *probe_at = NULL, *first_batch = NULL;
	size_t len;
	pid_t probe, holder;
	int n_batch_lines = 0;

	(void)state;
	snprintf(out, sizeof(out), "%s/hold", dir);
	holder = bg_curl("/api/generate", key_a, holder_body, NULL, out);
	assert_int_equal(wait_metric("sluice_worker_inflight{worker=\"w0\"}", 1, 0), 0);
	/* the worker is paused: its one slot stays taken while the queue fills */
	assert_int_equal(kill(worker.pid, SIGSTOP), 0);
	for (int i = 0; i < NB; i++) {
		snprintf(out, sizeof(out), "%s/batch-%d", dir, i);
		bpid[i] = bg_curl("/api/generate", key_night,
				  "{\"model\":\"tiny\",\"prompt\":\"nightly job\",\"options\":{\"num_predict\":4}}",
				  "-H 'X-Sluice-Class: batch'", out);
	}
	assert_int_equal(wait_metric("sluice_gateway_queue_depth{tenant=\"night\"}", NB, 0), 0);
	snprintf(out, sizeof(out), "%s/probe", dir);
	probe = bg_curl("/api/generate", key_b,
			"{\"model\":\"tiny\",\"prompt\":\"chat\",\"options\":{\"num_predict\":4}}",
			NULL, out);
	assert_int_equal(wait_metric("sluice_gateway_queue_depth{tenant=\"beta\"}", 1, 0), 0);
	assert_int_equal(kill(worker.pid, SIGCONT), 0);
	wait_pid(probe);
	assert_int_equal(bg_code(out), 200);
	for (int i = 0; i < NB; i++)
		wait_pid(bpid[i]);
	wait_pid(holder);
	for (int i = 0; i < NB; i++) {
		snprintf(out, sizeof(out), "%s/batch-%d", dir, i);
		assert_int_equal(bg_code(out), 200);
	}
	/* with one request in flight per worker, completion order is dispatch
	 * order: the probe's log line comes before every batch line */
	log = h_read_file(gateway.log, &len);
	assert_non_null(log);
	for (p = log; (p = strstr(p, "\"event\":\"request\"")) != NULL; p++) {
		char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);

		if (memmem(p, n, "\"tenant\":\"night\"", 16) && memmem(p, n, "\"class\":\"batch\"", 15)) {
			n_batch_lines++;
			if (!first_batch)
				first_batch = p;
		}
		if (memmem(p, n, "\"tenant\":\"beta\"", 15) && memmem(p, n, "\"route\":\"ollama_generate\"", 25))
			probe_at = p; /* the last beta generate line is the probe */
	}
	assert_int_equal(n_batch_lines, NB);
	assert_non_null(probe_at);
	assert_true(probe_at < first_batch);
	free(log);
}

/* Polls a log file until it contains `needle` (or the deadline). */
static int wait_log(const char *path, const char *needle)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		size_t len;
		char *log = h_read_file(path, &len);
		int found = log && strstr(log, needle) != NULL;

		free(log);
		if (found)
			return 0;
		h_pause_ms(10);
	}
	fprintf(stderr, "%s never contained %s\n", path, needle);
	return -1;
}

static void test_disconnect_frees_blocks(void **state)
{
	int fds[2];
	pid_t pid;
	char cmd[2048], buf[256];
	ssize_t n;
	struct pollfd pfd;

	(void)state;
	assert_int_equal(wait_metric("sluice_worker_kv_blocks_used{worker=\"w0\"}", 0, 0), 0);
	assert_int_equal(pipe(fds), 0);
	snprintf(cmd, sizeof(cmd),
		 "exec curl -sS -N --cacert %s -H 'Authorization: Bearer %s' -H 'X-Sluice-Ignore-EOS: 1' "
		 "--data-binary '%s' 'https://127.0.0.1:%d/api/generate'", cert, key_a,
		 holder_body, port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
	n = read(fds[0], buf, sizeof(buf));
	assert_true(n > 0); /* the stream has begun */
	/* pause the worker so the generation cannot finish on its own before
	 * the client goes away: what frees its blocks must be the CANCEL */
	assert_int_equal(kill(worker.pid, SIGSTOP), 0);
	kill(pid, SIGKILL);
	wait_pid(pid);
	close(fds[0]);
	assert_int_equal(wait_metric("sluice_gateway_requests_total{tenant=\"alpha\",status=\"499\"}", 1, 1), 0);
	assert_int_equal(kill(worker.pid, SIGCONT), 0);
	/* CANCEL reached the worker: it ended the request as cancelled, and
	 * every block is free again */
	assert_int_equal(wait_log(worker.log, "\"end\":\"cancelled\""), 0);
	assert_int_equal(wait_metric("sluice_worker_kv_blocks_used{worker=\"w0\"}", 0, 0), 0);
	assert_int_equal(wait_metric("sluice_worker_inflight{worker=\"w0\"}", 0, 0), 0);
	assert_int_equal(wait_metric("sluice_gateway_requests_total{tenant=\"alpha\",status=\"499\"}", 1, 1), 0);
	assert_served();
}

static void test_worker_lost_mid_stream(void **state)
{
	int fds[2];
	pid_t pid;
	char cmd[2048], buf[65536];
	size_t got = 0;
	ssize_t n;
	struct pollfd pfd;
	int status;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	snprintf(cmd, sizeof(cmd),
		 "exec curl -sS -N --cacert %s -H 'Authorization: Bearer %s' -H 'X-Sluice-Ignore-EOS: 1' "
		 "--data-binary '%s' 'https://127.0.0.1:%d/api/generate'", cert, key_a,
		 holder_body, port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
	n = read(fds[0], buf, sizeof(buf) - 1);
	assert_true(n > 0); /* streaming */
	got = (size_t)n;
	assert_int_equal(kill(worker.pid, SIGKILL), 0);
	assert_int_equal(waitpid(worker.pid, &status, 0), worker.pid);
	/* the stream ends (curl exits) with an error line in Ollama's format */
	while (got < sizeof(buf) - 1 && (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fds[0]);
	wait_pid(pid);
	assert_non_null(strstr(buf, "{\"error\":"));
	assert_null(strstr(buf, "\"done\":true"));
	/* not ready while the worker is away, then back once it returns */
	{
		struct resp r;

		req(&r, "/readyz", NULL, NULL, 0, NULL);
		assert_int_equal(r.code, 503);
		assert_non_null(strstr(r.body, "w0"));
		resp_free(&r);
	}
	assert_int_equal(h_worker_start(&worker, "worker", worker_cfg), 0);
	assert_int_equal(wait_ready(), 0);
	assert_served();
}

/* ---- keys and secrets ---------------------------------------------------- */

static void test_revoked_key_refused(void **state)
{
	char key[64], id[GW_KEY_ID_LEN + 1];
	struct resp r;

	(void)state;
	issue_key("alpha/app", key);
	snprintf(id, sizeof(id), "%.*s", GW_KEY_ID_LEN, key + 4);
	req(&r, "/v1/models", key, NULL, 0, NULL);
	assert_int_equal(r.code, 200); /* now cached */
	resp_free(&r);
	ctl(NULL, 0, "key revoke %s", id);
	req(&r, "/v1/models", key, NULL, 0, NULL);
	assert_int_equal(r.code, 401);
	resp_free(&r);
	expect("/api/generate", key, "{\"model\":\"tiny\",\"prompt\":\"x\"}", 0, NULL, 401);
	assert_served();
}

static void test_quota_429_names_the_limit(void **state)
{
	char key[64];
	struct resp r;
	json_t *j;

	(void)state;
	ctl(NULL, 0, "tenant create metered --rpm 1");
	ctl(NULL, 0, "client create metered/app");
	issue_key("metered/app", key);
	req(&r, "/api/generate", key,
	    "{\"model\":\"tiny\",\"prompt\":\"q\",\"stream\":false,\"options\":{\"num_predict\":2}}", 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	req(&r, "/v1/completions", key, "{\"model\":\"tiny\",\"prompt\":\"q\",\"max_tokens\":2}", 0, NULL);
	assert_int_equal(r.code, 429);
	assert_non_null(strcasestr(r.headers, "\nRetry-After: "));
	j = parse(r.body);
	assert_non_null(strstr(openai_error(j), "tenant rpm"));
	json_decref(j);
	resp_free(&r);
	assert_served(); /* other tenants are not affected */
}

static void test_revocation_stops_a_stream(void **state)
{
	char key[64], id[GW_KEY_ID_LEN + 1], cmd[2048], buf[65536];
	int fds[2];
	pid_t pid;
	size_t got;
	ssize_t n;
	struct pollfd pfd;

	(void)state;
	issue_key("beta/app", key);
	snprintf(id, sizeof(id), "%.*s", GW_KEY_ID_LEN, key + 4);
	assert_int_equal(pipe(fds), 0);
	snprintf(cmd, sizeof(cmd),
		 "exec curl -sS -N --cacert %s -H 'Authorization: Bearer %s' -H 'X-Sluice-Ignore-EOS: 1' "
		 "--data-binary '%s' 'https://127.0.0.1:%d/api/generate'", cert, key,
		 holder_body, port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
	n = read(fds[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	got = (size_t)n;
	ctl(NULL, 0, "key revoke %s", id);
	while (got < sizeof(buf) - 1 && (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fds[0]);
	wait_pid(pid);
	/* the reply stops with an error, never reaching its end */
	assert_non_null(strstr(buf, "{\"error\":"));
	assert_null(strstr(buf, "\"done\":true"));
	/* and the worker's blocks are freed */
	assert_int_equal(wait_metric("sluice_worker_inflight{worker=\"w0\"}", 0, 0), 0);
	assert_int_equal(wait_metric("sluice_worker_kv_blocks_used{worker=\"w0\"}", 0, 0), 0);
}

static void scan_redis_for(const char *needle)
{
	redisContext *c = redisConnectUnix(redis_sock);
	redisReply *keys;

	assert_non_null(c);
	assert_int_equal(c->err, 0);
	keys = redisCommand(c, "KEYS *");
	assert_non_null(keys);
	assert_true(keys->elements > 0);
	for (size_t i = 0; i < keys->elements; i++) {
		const char *k = keys->element[i]->str;
		redisReply *t = redisCommand(c, "TYPE %s", k), *v = NULL;

		assert_null(strstr(k, needle));
		if (strcmp(t->str, "string") == 0)
			v = redisCommand(c, "GET %s", k);
		else if (strcmp(t->str, "hash") == 0)
			v = redisCommand(c, "HGETALL %s", k);
		else if (strcmp(t->str, "set") == 0)
			v = redisCommand(c, "SMEMBERS %s", k);
		else if (strcmp(t->str, "zset") == 0)
			v = redisCommand(c, "ZRANGE %s 0 -1", k);
		else if (strcmp(t->str, "list") == 0)
			v = redisCommand(c, "LRANGE %s 0 -1", k);
		else if (strcmp(t->str, "stream") == 0)
			v = redisCommand(c, "XRANGE %s - +", k);
		if (v) {
			if (v->type == REDIS_REPLY_STRING)
				assert_null(strstr(v->str, needle));
			for (size_t e = 0; v->type == REDIS_REPLY_ARRAY && e < v->elements; e++)
				if (v->element[e]->type == REDIS_REPLY_STRING)
					assert_null(memmem(v->element[e]->str, v->element[e]->len,
							   needle, strlen(needle)));
			freeReplyObject(v);
		}
		freeReplyObject(t);
	}
	freeReplyObject(keys);
	redisFree(c);
}

static void test_canary_never_logged_or_stored(void **state)
{
	struct resp r;
	static const char *const files[] = { "gateway.log", "worker.log", "redis.log" };

	(void)state;
	req(&r, "/api/generate", key_a,
	    "{\"model\":\"tiny\",\"prompt\":\"" CANARY "\",\"options\":{\"num_predict\":4}}", 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	req(&r, "/v1/chat/completions", key_b,
	    "{\"model\":\"tiny\",\"stream\":true,\"max_tokens\":4,\"messages\":[{\"role\":\"system\","
	    "\"content\":\"" CANARY "\"},{\"role\":\"user\",\"content\":\"" CANARY "\"}]}", 0, NULL);
	assert_int_equal(r.code, 200);
	resp_free(&r);
	expect("/api/generate", key_a, "{\"model\":\"" CANARY "\",\"prompt\":\"" CANARY "\"}", 0, NULL, 404);
	expect("/api/generate", key_a, "{\"model\":\"tiny\",\"prompt\":\"" CANARY "\",\"options\":{\"top_k\":-1}}", 0, NULL, 400);
	expect("/api/generate", NULL, "{\"model\":\"tiny\",\"prompt\":\"" CANARY "\"}", 0, NULL, 401);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[800];
		size_t len;
		char *text;

		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		text = h_read_file(path, &len);
		assert_non_null(text);
		assert_null(memmem(text, len, CANARY, strlen(CANARY)));
		/* and never a whole key */
		assert_null(memmem(text, len, key_a, strlen(key_a)));
		free(text);
	}
	scan_redis_for(CANARY);
}

/* ---- quickstart ---------------------------------------------------------- */

static int free_port(void)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), p;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	p = ntohs(sa.sin_port);
	close(fd);
	return p;
}

static void test_quickstart(void **state)
{
	char cmd[4096];
	const char *src = getenv("SLUICE_SOURCE_DIR"), *build = getenv("SLUICE_BUILD_DIR");
	char *out;
	int st;

	(void)state;
	if (!src || !build)
		skip();
	snprintf(cmd, sizeof(cmd),
		 "SLUICE_SKIP_DEPS=1 SLUICE_SKIP_BUILD=1 SLUICE_QUICKSTART_EXIT_AFTER_CHECK=1 "
		 "SLUICE_BUILD_DIR=%s SLUICE_QUICKSTART_DIR=%s/qs SLUICE_PORT=%d "
		 "SLUICE_ADMIN_PORT=%d timeout 150 %s/deploy/quickstart.sh 2>&1",
		 build, dir, free_port(), free_port(), src);
	out = h_run_capture(cmd, &st);
	assert_non_null(out);
	if (st != 0)
		fprintf(stderr, "%s\n", out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "==> check: /api/generate answered: {"));
	assert_non_null(strstr(out, "\"response\":"));
	assert_non_null(strstr(out, "/v1/chat/completions"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_endpoints),
		cmocka_unit_test(test_ollama_generate_and_chat),
		cmocka_unit_test(test_openai),
		cmocka_unit_test(test_bad_keys),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_slowloris_and_garbage_tls),
		cmocka_unit_test(test_tenant_queue_full_429),
		cmocka_unit_test(test_interactive_ahead_of_64_batch),
		cmocka_unit_test(test_disconnect_frees_blocks),
		cmocka_unit_test(test_worker_lost_mid_stream),
		cmocka_unit_test(test_revoked_key_refused),
		cmocka_unit_test(test_quota_429_names_the_limit),
		cmocka_unit_test(test_revocation_stops_a_stream),
		cmocka_unit_test(test_canary_never_logged_or_stored),
		cmocka_unit_test(test_quickstart),
	};

	return cmocka_run_group_tests_name("integration/gateway", tests, setup, teardown);
}
