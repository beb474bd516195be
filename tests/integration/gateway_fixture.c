/*
 * gateway_fixture.c - the processes and clients of the whole-service test
 * (test_gateway.c; see gateway_fixture.h).
 */
#include "tests/integration/gateway_fixture.h"

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
#include "tests/integration/harness.h"

#define DEADLINE_MS 60000

struct h_proc gwt_redis, gwt_worker, gwt_gateway;
char gwt_dir[512], gwt_redis_sock[600], gwt_worker_sock[600], gwt_cert[600], gwt_pepper[600];
int gwt_port, gwt_admin_port;
char gwt_worker_cfg[2048];
unsigned gwt_max_inflight = 1;
unsigned gwt_context = 0;
const char *gwt_chat_template;
unsigned gwt_thinking_budget;
const char *gwt_gateway_extra = "";
char gwt_key_a[64], gwt_key_b[64], gwt_key_night[64], gwt_key_small[64];
const char *gwt_model_file;
const char *gwt_model_name = "tiny";

/* ---- helpers --------------------------------------------------------- */


void gwt_resp_free(struct gwt_resp *r)
{
	free(r->body);
	free(r->headers);
	memset(r, 0, sizeof(*r));
}

/* curl against the gateway; body from `data` (NULL: GET) written to a file. */
void gwt_req(struct gwt_resp *r, const char *path, const char *key, const char *data,
		size_t data_len, const char *extra)
{
	static int seq;
	char bodyf[700], hdrf[700], dataf[700], cmd[16384], auth[128] = "";
	int st;
	char *o;
	size_t len;

	seq++;
	snprintf(bodyf, sizeof(bodyf), "%s/resp%d.body", gwt_dir, seq);
	snprintf(hdrf, sizeof(hdrf), "%s/resp%d.hdr", gwt_dir, seq);
	snprintf(dataf, sizeof(dataf), "%s/req%d.data", gwt_dir, seq);
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
		 gwt_cert, bodyf, hdrf, auth, data ? "--data-binary @" : "", data ? dataf : "",
		 data ? " -H 'Content-Type: application/json'" : "", extra ? extra : "", gwt_port, path);
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

json_t *gwt_parse(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_ALLOW_NUL, &e); /* models may emit NUL */

	if (!j)
		fprintf(stderr, "not JSON (%s): %.300s\n", e.text, s);
	assert_non_null(j);
	return j;
}

const char *gwt_ollama_error(json_t *j)
{
	json_t *e = json_object_get(j, "error");

	assert_true(json_is_string(e));
	return json_string_value(e);
}

const char *gwt_openai_error(json_t *j)
{
	json_t *e = json_object_get(j, "error");

	assert_true(json_is_object(e));
	assert_true(json_is_string(json_object_get(e, "message")));
	assert_true(json_is_string(json_object_get(e, "type")));
	return json_string_value(json_object_get(e, "message"));
}

void gwt_assert_fits(const char *body)
{
	struct gwt_resp r;
	const char *fr;
	json_int_t pt, ct;
	json_t *j;

	gwt_req(&r, "/v1/chat/completions", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	j = gwt_parse(r.body);
	fr = json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0),
					       "finish_reason"));
	assert_non_null(fr);
	assert_true(strcmp(fr, "stop") == 0 || strcmp(fr, "length") == 0);
	pt = json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens"));
	ct = json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens"));
	assert_true(pt >= 1 && ct >= 1 && pt + ct < 4096);
	json_decref(j);
	gwt_resp_free(&r);
}

char *gwt_metrics(void)
{
	char cmd[256];
	int st;

	snprintf(cmd, sizeof(cmd), "curl -sS --max-time 10 http://127.0.0.1:%d/metrics", gwt_admin_port);
	char *m = h_run_capture(cmd, &st);

	assert_non_null(m);
	return m;
}

int gwt_wait_port_line(void)
{
	return h_gateway_ports(&gwt_gateway, DEADLINE_MS, &gwt_port, &gwt_admin_port);
}

int gwt_wait_ready(void)
{
	int64_t end = h_now_ms() + DEADLINE_MS;
	struct gwt_resp r;

	while (h_now_ms() < end) {
		gwt_req(&r, "/readyz", NULL, NULL, 0, NULL);
		if (r.code == 200) {
			gwt_resp_free(&r);
			return 0;
		}
		gwt_resp_free(&r);
		h_pause_ms(50);
	}
	return -1;
}

int gwt_wait_metric(const char *series, double value, int at_least)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		char *m = gwt_metrics();
		double v = h_metric(m, series);

		free(m);
		if (at_least ? v >= value : v == value)
			return 0;
		h_pause_ms(10);
	}
	fprintf(stderr, "metric %s never reached %g\n", series, value);
	return -1;
}

int gwt_log_count(const char *path, const char *needle)
{
	size_t len;
	char *log = h_read_file(path, &len);
	int n = 0;

	for (const char *p = log ? strstr(log, needle) : NULL; p; p = strstr(p + 1, needle))
		n++;
	free(log);
	return n;
}

int gwt_wait_log(const char *path, const char *needle)
{
	return gwt_wait_log_count(path, needle, 1);
}

int gwt_wait_log_count(const char *path, const char *needle, int count)
{
	int64_t end = h_now_ms() + DEADLINE_MS;

	while (h_now_ms() < end) {
		if (gwt_log_count(path, needle) >= count)
			return 0;
		h_pause_ms(10);
	}
	fprintf(stderr, "%s never contained %s %d times\n", path, needle, count);
	return -1;
}

pid_t gwt_stream_start(const char *path, const char *key, const char *body, int *fd)
{
	char cmd[8192];
	int fds[2];
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	snprintf(cmd, sizeof(cmd),
		 "exec curl -sS -N --cacert %s -H 'Authorization: Bearer %s' -H 'X-Sluice-Ignore-EOS: 1' "
		 "-H 'Content-Type: application/json' --data-binary '%s' 'https://127.0.0.1:%d%s'",
		 gwt_cert, key ? key : gwt_key_a, body, gwt_port, path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	*fd = fds[0];
	return pid;
}

pid_t gwt_stream_begun(const char *path, const char *key, const char *body, int *fd, char *first,
		       size_t cap, size_t *n)
{
	char buf[4096];
	ssize_t got;
	struct pollfd pfd;
	pid_t pid = gwt_stream_start(path, key, body, fd);

	pfd.fd = *fd;
	pfd.events = POLLIN;
	assert_int_equal(poll(&pfd, 1, DEADLINE_MS), 1);
	got = first ? read(*fd, first, cap) : read(*fd, buf, sizeof(buf));
	assert_true(got > 0);
	if (n)
		*n = (size_t)got;
	return pid;
}

int gwt_use_stories(char *file, size_t file_len, const char *name)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");

	if (!src)
		return -1;
	snprintf(file, file_len, "%s/models/stories260K/stories260K.gguf", src);
	gwt_model_file = file;
	gwt_model_name = name;
	return 0;
}

void gwt_assert_served(void)
{
	struct gwt_resp r;
	char body[512];
	json_t *j;

	snprintf(body, sizeof(body), "{\"model\":\"%s\",\"prompt\":\"hello\",\"stream\":false,"
		 "\"options\":{\"num_predict\":3}}", gwt_model_name);
	gwt_req(&r, "/api/generate", gwt_key_a, body, 0, NULL);
	assert_int_equal(r.code, 200);
	j = gwt_parse(r.body);
	assert_true(json_is_true(json_object_get(j, "done")));
	json_decref(j);
	gwt_resp_free(&r);
}

/* ---- setup ----------------------------------------------------------- */

int gwt_start_redis(void)
{
	return h_redis_start(&gwt_redis, gwt_redis_sock, gwt_dir, DEADLINE_MS);
}

char *gwt_run_clients(const char *folder, const char *env, const char *model, int *status)
{
	const char *src = getenv("SLUICE_SOURCE_DIR"), *build = getenv("SLUICE_BUILD_DIR");
	char cmd[4096], dir[1024];
	char *out;
	int st;

	if (!src || !build || system("command -v node >/dev/null && command -v npm >/dev/null") != 0)
		skip();
	snprintf(dir, sizeof(dir), "%s/%s", build, folder);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p '%s' && cp '%s/tests/clients/package.json' '%s/tests/clients/package-lock.json' "
		 "'%s/tests/clients/compat.mjs' '%s'/ && "
		 "cd '%s' && npm ci --no-audit --no-fund --loglevel=error 2>&1", dir, src, src, src, dir, dir);
	out = h_run_capture(cmd, &st);
	if (st != 0)
		fprintf(stderr, "npm install failed:\n%s\n", out ? out : "");
	free(out);
	assert_int_equal(st, 0);
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && %s SLUICE_URL=https://127.0.0.1:%d SLUICE_KEY=%s SLUICE_MODEL=%s "
		 "NODE_EXTRA_CA_CERTS=%s timeout 180 node compat.mjs 2>&1",
		 dir, env, gwt_port, gwt_key_a, model, gwt_cert);
	out = h_run_capture(cmd, status);
	assert_non_null(out);
	fprintf(stderr, "%s", out);
	return out;
}

int gwt_setup(void **state)
{
	char cmd[2048], path[700];
	const char *model;
	int rc;
	FILE *f;
	char *argv[4];

	(void)state;
	if (system("command -v openssl >/dev/null && command -v curl >/dev/null") != 0)
		return 77;
	snprintf(gwt_dir, sizeof(gwt_dir), "%s", h_tmpdir());
	snprintf(gwt_redis_sock, sizeof(gwt_redis_sock), "%s/redis.sock", gwt_dir);
	snprintf(gwt_worker_sock, sizeof(gwt_worker_sock), "%s/worker.sock", gwt_dir);
	snprintf(gwt_cert, sizeof(gwt_cert), "%s/tls.crt", gwt_dir);
	snprintf(gwt_pepper, sizeof(gwt_pepper), "%s/pepper", gwt_dir);
	h_ctl_setup(gwt_redis_sock, gwt_pepper);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
		 "-subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 -keyout %s/tls.key "
		 "-out %s >/dev/null 2>&1", gwt_dir, gwt_cert);
	if (system(cmd) != 0)
		return -1;
	if (h_write_file(gwt_pepper, H_TEST_PEPPER, 0600) != 0)
		return -1;
	rc = gwt_start_redis();
	if (rc != 0)
		return rc;
	model = gwt_model_file ? gwt_model_file : h_model("tiny", "Q8_0", "llama");
	if (!model)
		return -1;
	snprintf(gwt_worker_cfg, sizeof(gwt_worker_cfg),
		 "{\"worker\": {\"name\": \"w0\", \"model\": \"%s\", \"model_name\": \"%s\","
		 " \"socket\": \"%s\", \"threads\": 1, \"kv_cache_bytes\": \"16MiB\","
		 " \"max_running\": 8, \"stats_interval_ms\": 100, \"context\": %u%s%s%s}}", model,
		 gwt_model_name, gwt_worker_sock, gwt_context,
		 gwt_chat_template ? ", \"chat_template\": \"" : "",
		 gwt_chat_template ? gwt_chat_template : "", gwt_chat_template ? "\"" : "");
	if (h_worker_start(&gwt_worker, "worker", gwt_worker_cfg) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/gateway.json", gwt_dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"gateway\": {\"listen_addr\": \"127.0.0.1\", \"port\": 0,"
		" \"tls_cert_file\": \"%s\", \"tls_key_file\": \"%s/tls.key\","
		" \"admin_addr\": \"127.0.0.1\", \"admin_port\": 0, \"pepper_file\": \"%s\","
		" \"log_level\": \"debug\","
		" \"limits\": {\"body_bytes\": \"64KiB\", \"header_bytes\": \"8KiB\","
		"   \"messages\": 8, \"stop_strings\": 4, \"thinking_token_budget\": %u},"
		" \"timeouts\": {\"header_ms\": 1500, \"body_ms\": 1500},"
		" \"workers\": [{\"name\": \"w0\", \"socket\": \"%s\", \"model\": \"%s\"}],"
		/* the tests pause the worker (SIGSTOP) while they queue requests:
		 * with 64 curl processes starting on a loaded 2-core machine that
		 * can take seconds, and a worker that misses three PINGs or its
		 * STATS is not ready (new requests then fail instead of queueing) */
		" \"max_inflight_per_worker\": %u, \"ping_interval_ms\": 2000,"
		" \"stats_timeout_ms\": 20000,"
		" \"queue\": {\"tenant_max\": 8, \"global_max\": 200, \"timeout_ms\": \"60s\"},"
		" \"redis\": {\"url\": \"unix://%s\", \"auth_cache_ttl_ms\": 2000}%s}}\n",
		gwt_cert, gwt_dir, gwt_pepper, gwt_thinking_budget, gwt_worker_sock, gwt_model_name, gwt_max_inflight,
		gwt_redis_sock, gwt_gateway_extra);
	fclose(f);
	argv[0] = (char *)h_bin("gateway/sluice-gateway");
	argv[1] = "--config";
	argv[2] = path;
	argv[3] = NULL;
	if (h_spawn(&gwt_gateway, "gateway", argv) != 0 || gwt_wait_port_line() != 0)
		return -1;
	h_ctl(NULL, 0, "tenant create alpha");
	h_ctl(NULL, 0, "client create alpha/app");
	h_ctl(NULL, 0, "tenant create beta");
	h_ctl(NULL, 0, "client create beta/app");
	h_ctl(NULL, 0, "tenant create night --queue 100");
	h_ctl(NULL, 0, "client create night/batch");
	h_ctl(NULL, 0, "tenant create small --queue 1");
	h_ctl(NULL, 0, "client create small/app");
	h_issue_key("alpha/app", gwt_key_a, NULL);
	h_issue_key("beta/app", gwt_key_b, NULL);
	h_issue_key("night/batch", gwt_key_night, NULL);
	h_issue_key("small/app", gwt_key_small, NULL);
	return gwt_wait_ready();
}

int gwt_teardown(void **state)
{
	(void)state;
	/* a clean stop on SIGTERM (under ASan: no leak, no error report) */
	return h_stop_service(&gwt_gateway, &gwt_worker, 1, &gwt_redis);
}

/* ---- every endpoint ---------------------------------------------------- */

