/*
 * test_dispatch.c - gateway/dispatch.c, the request lifecycle, in one
 * process: the real listener (plain HTTP on 127.0.0.1:0), auth and quotas
 * against a private redis-server, the queue, metrics and the worker
 * connections to a stand-in worker (tests/gateway/fake_worker.h), all on
 * one event loop in a second thread; curl is the client.
 *
 *  - Ollama and OpenAI generations, whole and streamed, carry the worker's
 *    tokens and counts in each dialect's shape;
 *  - refusals in the dialect's own error format: no key 401, unknown
 *    model 404, a role the worker does not render 400 naming the field,
 *    model management 403, an error from the worker;
 *  - the fixed endpoints answer from the workers' HELLO: /api/tags,
 *    /v1/models, /readyz;
 *  - OpenAI n: the choices' worker requests, their order, their slots.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "gateway/dispatch.h"
#include "gateway/gov/records.h"
#include "gateway/redis/conn.h"
#include "tests/gateway/fake_worker.h"
#include "tests/gateway/http/tls_client.h"
#include "tests/gateway/redis_fixture.h"

#define DT_DEADLINE_MS 10000

static struct redis_fixture fx;
static struct event_base *base;
static pthread_t loop_thread;
static struct fake_worker fk;
static struct gw_redis *redis;
static struct gw_auth *auth;
static struct gw_key_pepper *pepper;
static struct gw_workers *ws;
static struct gw_queue *q;
static struct gw_metrics *metrics;
static struct gw_dispatch *disp;
static struct gw_server *srv;
static uint16_t port;
static char key[GW_KEY_LEN + 1], key_solo[GW_KEY_LEN + 1], sock_path[108];
static char cors_app[] = "https://app.example";
static char *const cors_origins[] = { cors_app };

static void *dt_loop_main(void *arg)
{
	(void)arg;
	event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

static void dt_gov(redisContext *rc, struct gw_redis_cmd *cmd)
{
	redisReply *r = gw_gov_send_sync(rc, cmd);
	enum gw_gov_result res;

	assert_non_null(r);
	assert_int_equal(gw_gov_parse(cmd, r, &res), CM_OK);
	assert_int_equal(res, GW_GOV_DONE);
	freeReplyObject(r);
}

/* A tenant, one client and a key for it in Redis, as sluicectl makes them;
 * the key into key_out. */
static void dt_tenant(redisContext *rc, struct gw_redis_cmd *cmd, const char *tenant,
		      const char *salt, const struct gw_gov_quotas *tq, const char *client,
		      const struct gw_gov_quotas *cq, char *key_out)
{
	uint8_t mac[GW_KEY_HMAC_LEN];
	char hex[GW_KEY_HMAC_HEX_LEN + 1], kid[GW_KEY_ID_LEN + 1];

	assert_int_equal(gw_gov_cmd_tenant_create(cmd, NULL, tenant, tq, salt, 1), CM_OK);
	dt_gov(rc, cmd);
	assert_int_equal(gw_gov_cmd_client_create(cmd, NULL, tenant, client, cq, 1), CM_OK);
	dt_gov(rc, cmd);
	assert_int_equal(gw_key_generate(pepper, key_out, kid, mac), CM_OK);
	cm_hex_encode(mac, sizeof(mac), hex);
	assert_int_equal(gw_gov_cmd_key_issue(cmd, NULL, tenant, client, kid, hex, 1, 0), CM_OK);
	dt_gov(rc, cmd);
}

/* The tenants of the tests, with their clients and keys. */
static int dt_governance(void)
{
	struct timeval tv = { 5, 0 };
	redisContext *rc = redisConnectUnixWithTimeout(fx.sock, tv);
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	struct gw_gov_quotas qz, none, solo;

	if (!rc || rc->err || !cmd)
		return -1;
	memset(&qz, 0, sizeof(qz));
	/* 1000 tokens a minute: a request with no max_tokens reserves its
	 * prompt plus the fixture's limits.max_output_tokens (256), not the
	 * 4096 default (which could never pass), and gives back what it did
	 * not use */
	qz.set[GW_GOV_F_TPM] = 1;
	qz.val[GW_GOV_F_TPM] = 1000;
	dt_tenant(rc, cmd, "eng", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
		  &qz, "bot", &qz, key);
	/* a tenant with queue 0: no waiting */
	memset(&none, 0, sizeof(none));
	memset(&solo, 0, sizeof(solo));
	solo.set[GW_GOV_F_QUEUE] = 1;
	solo.val[GW_GOV_F_QUEUE] = 0;
	dt_tenant(rc, cmd, "solo", "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100",
		  &solo, "app", &none, key_solo);
	cm_free(cmd);
	redisFree(rc);
	return 0;
}

static int dt_build(void)
{
	static const char pep[] = "a pepper of at least thirty-two bytes for the test";
	const struct gw_worker_spec spec = { "w0", sock_path, NULL };
	const struct gw_workers_config wc = { 4, 200, 60000, 0, 0 };
	/* tenant_max 0: a tenant without its own queue waits for nothing, it is
	 * dispatched at once or refused (issue 13, finding 8: it was locked out
	 * even on an idle gateway); every request below is dispatched at once */
	const struct gw_queue_config qc = { 0, 64, 5000000000LL };
	const struct gw_auth_config ac = { "sluice:", 2000, 60000 };
	struct gw_dispatch_config dc;
	struct gw_dispatch_deps dd;
	struct gw_server_config sc;
	char url[200], err[256];

	if (gw_key_pepper_from_bytes(pep, sizeof(pep) - 1, &pepper) != CM_OK ||
	    dt_governance() != 0 || fake_worker_start(&fk, base, sock_path) != 0)
		return -1;
	/* 40000 tokens: a 9 MiB prompt is under the size bound (40000 x 256 +
	 * 64 KiB, 9.8 MiB), so the frame limit is what refuses it
	 * (test_prompt_over_frame_is_413); a 16 MiB body is over it */
	fk.hello_context = 40000;
	snprintf(url, sizeof(url), "unix://%s", fx.sock);
	memset(&dc, 0, sizeof(dc));
	gw_api_limits_defaults(&dc.limits);
	/* the stand-in's context is 40000 (below): requests without a limit
	 * are estimated at this, not 4096, so that the tenants' TPM lasts */
	dc.limits.max_output_tokens = 256;
	dc.route_prefix_bytes = 1024;
	dc.route_load_factor = 1.25;
	dc.ns = "sluice:";
	dc.lease_ttl_ms = 60000;
	dc.out_bytes = 1024 * 1024;
	dc.cors_origins = cors_origins;
	dc.n_cors_origins = 1;
	gw_server_config_defaults(&sc);
	sc.plain_http = 1;
	sc.port = 0;
	sc.body_bytes = 16u * 1024 * 1024; /* above a worker frame (8 MiB) */
	if (gw_redis_new(base, &(struct gw_redis_opts){ .url = url }, &redis, err, sizeof(err)) != CM_OK ||
	    gw_auth_new(base, &ac, pepper, redis, &auth, err, sizeof(err)) != CM_OK ||
	    gw_workers_new(base, &spec, 1, &wc, &ws) != CM_OK || gw_queue_new(&qc, &q) != CM_OK ||
	    gw_metrics_new(&metrics) != CM_OK)
		return -1;
	dd = (struct gw_dispatch_deps){ ws, q, auth, metrics, redis, NULL };
	if (gw_dispatch_new(base, &dc, &dd, &disp) != CM_OK ||
	    gw_server_new(base, &sc, gw_dispatch_handle, disp, &srv, err, sizeof(err)) != CM_OK)
		return -1;
	gw_server_set_error_renderer(srv, gw_api_http_error, NULL);
	gw_server_set_head_check(srv, gw_dispatch_head_check, gw_dispatch_head_cancel, disp);
	port = gw_server_port(srv);
	return 0;
}

/* curl, with the status code on the last line of out. */
static int dt_curl(char *out, size_t n, const char *auth_key, const char *path,
		   const char *body)
{
	char hdr[GW_KEY_LEN + 64] = "";

	if (auth_key)
		snprintf(hdr, sizeof(hdr), "-H 'Authorization: Bearer %s'", auth_key);
	return tcli_curl(out, n, "-s %s %s%s%s -w '\\n%%{http_code}' http://127.0.0.1:%u%s",
			 hdr, body ? "-H 'Content-Type: application/json' --data-raw '" : "",
			 body ? body : "", body ? "'" : "", port, path);
}

/* The status (last line) and the body before it, parsed as JSON (NULL when it is not). */
static int dt_split(char *out, json_t **j)
{
	char *nl = strrchr(out, '\n');
	int code;

	assert_non_null(nl);
	code = atoi(nl + 1);
	*nl = '\0';
	*j = json_loads(out, JSON_DECODE_ANY, NULL);
	return code;
}

/* POSTs the n bytes at body (through a file: too large for a command
 * line) to /v1/completions with the default key; out as dt_curl's. */
static void dt_post_big(char *out, size_t outlen, const char *body, size_t n)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/sluice-test-dispatch-big-%ld.json", (long)getpid());
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(body, 1, n, f), n);
	fclose(f);
	tcli_curl(out, outlen, "-s -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
		  "--data-binary @%s -w '\\n%%{http_code}' http://127.0.0.1:%u/v1/completions",
		  key, path, port);
	unlink(path);
}

/* The refusal before did not stop the service: a small generation is 200. */
static void dt_still_serves(void)
{
	char out[8192];
	json_t *j;

	dt_curl(out, sizeof(out), key, "/api/generate",
		"{\"model\":\"tiny\",\"prompt\":\"hi\",\"stream\":false}");
	assert_int_equal(dt_split(out, &j), 200);
	json_decref(j);
}

static int setup(void **state)
{
	struct timeval tv = { 0, 20000 };
	int64_t end;
	char out[4096];
	json_t *j;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	if (!redis_fixture_available() || system("command -v curl >/dev/null") != 0) {
		fprintf(stderr, "redis-server or curl missing: skipping\n");
		exit(77);
	}
	snprintf(sock_path, sizeof(sock_path), "/tmp/sluice-test-dispatch-%ld.sock", (long)getpid());
	evthread_use_pthreads();
	base = event_base_new();
	if (!base || redis_fixture_start(&fx) != 0 || dt_build() != 0)
		return -1;
	/* the loop runs the worker connection and Redis up before the first request */
	end = cm_mono_ns() + DT_DEADLINE_MS * 1000000LL;
	while (!(gw_workers_can_take(ws, 0) && gw_redis_up(redis))) {
		if (cm_mono_ns() > end)
			return -1;
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	if (pthread_create(&loop_thread, NULL, dt_loop_main, NULL) != 0)
		return -1;
	/* the loop thread answers: /readyz says ready */
	dt_curl(out, sizeof(out), NULL, "/readyz", NULL);
	if (dt_split(out, &j) != 200)
		return -1;
	json_decref(j);
	return 0;
}

static void dt_free_on_loop(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	gw_dispatch_free(disp);
	gw_server_free(srv);
	gw_redis_free(redis);
	gw_auth_free(auth);
	gw_workers_free(ws);
	fake_worker_stop(&fk);
	event_base_loopbreak(base);
}

static int teardown(void **state)
{
	struct timeval now = { 0, 0 };

	(void)state;
	event_base_once(base, -1, EV_TIMEOUT, dt_free_on_loop, NULL, &now);
	pthread_join(loop_thread, NULL);
	/* the callbacks a freed bufferevent still had queued (deferred ones
	 * hold a reference on it) run now: event_base_free would drop them and
	 * leak the bufferevent (LeakSanitizer, one run in many under load) */
	event_base_loop(base, EVLOOP_NONBLOCK);
	gw_queue_free(q);
	gw_metrics_free(metrics);
	gw_key_pepper_free(pepper);
	event_base_free(base);
	redis_fixture_stop(&fx);
	return 0;
}

static void test_ollama_generate(void **state)
{
	char out[8192];
	json_t *j;

	(void)state;
	dt_curl(out, sizeof(out), key, "/api/generate",
		"{\"model\":\"tiny\",\"prompt\":\"hi\",\"stream\":false}");
	assert_int_equal(dt_split(out, &j), 200);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "response")), "ab");
	assert_true(json_is_true(json_object_get(j, "done")));
	assert_int_equal(json_integer_value(json_object_get(j, "eval_count")), 2);
	assert_int_equal(json_integer_value(json_object_get(j, "prompt_eval_count")), 5);
	json_decref(j);

	/* streamed: one NDJSON line per token, then the final one */
	dt_curl(out, sizeof(out), key, "/api/generate", "{\"model\":\"tiny\",\"prompt\":\"hi\"}");
	{
		char *nl = strrchr(out, '\n'), *line, *save = NULL;
		int lines = 0, done = 0;

		assert_non_null(nl);
		assert_int_equal(atoi(nl + 1), 200);
		*nl = '\0';
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			json_t *l = json_loads(line, 0, NULL);

			assert_non_null(l);
			lines++;
			done += json_is_true(json_object_get(l, "done"));
			json_decref(l);
		}
		assert_int_equal(lines, 3);
		assert_int_equal(done, 1);
	}
}

/* A worker's DONE claiming 2^32-1 tokens is bounded by what the request
 * allowed (issue 13, finding 10: it locked a TPM-limited tenant out). */
static void test_worker_counts_bounded(void **state)
{
	char out[8192];
	json_t *j;

	(void)state;
	__atomic_store_n(&fk.done_gen_tokens, UINT32_MAX, __ATOMIC_SEQ_CST);
	dt_curl(out, sizeof(out), key, "/api/generate",
		"{\"model\":\"tiny\",\"prompt\":\"hi\",\"stream\":false,\"options\":{\"num_predict\":5}}");
	__atomic_store_n(&fk.done_gen_tokens, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(dt_split(out, &j), 200);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "eval_count")), 5);
	json_decref(j);
}

/*
 * Issue 13, finding 7: a prompt that cannot be encoded in a SUBMIT (9 MiB,
 * frame cap 8 MiB) went back to the head of the queue, stopped all
 * dispatch until its queue timeout, then got 503.  Now: 413 at admission,
 * naming the field, and the next request is served at once.
 */
static void test_prompt_over_frame_is_413(void **state)
{
	static const char pre[] = "{\"model\":\"tiny\",\"prompt\":\"", post[] = "\",\"stream\":false}";
	static char out[8192];
	size_t n = 9u * 1024 * 1024, pl = sizeof(pre) - 1, ql = sizeof(post) - 1;
	char *body = malloc(n + 128);
	json_t *j, *err;

	(void)state;
	assert_non_null(body);
	memcpy(body, pre, pl);
	memset(body + pl, 'a', n);
	memcpy(body + pl + n, post, ql);
	dt_post_big(out, sizeof(out), body, pl + n + ql);
	free(body);
	assert_int_equal(dt_split(out, &j), 413);
	assert_non_null(j);
	err = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(err, "param")), "prompt");
	assert_non_null(strstr(json_string_value(json_object_get(err, "message")), "too large"));
	json_decref(j);
	dt_still_serves(); /* dispatch goes on */
}

/*
 * Issue 13, finding 6 (gateway side): a body larger than any prompt that
 * could fit the largest context served is refused before its JSON is
 * parsed (4 MiB bodies parsed on the event loop delayed other tenants):
 * the stand-in's 40000-token context allows 9.8 MiB.
 */
static void test_body_over_context_refused_unparsed(void **state)
{
	static char out[8192];
	size_t n = 16u * 1024 * 1024 - 64;
	char *body = malloc(n);
	json_t *j, *err;

	(void)state;
	/* JSON that does not even parse: refused by its size first */
	assert_non_null(body);
	memset(body, '[', n);
	dt_post_big(out, sizeof(out), body, n);
	free(body);
	assert_int_equal(dt_split(out, &j), 413);
	assert_non_null(j);
	err = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(err, "code")), "context_length_exceeded");
	assert_non_null(strstr(json_string_value(json_object_get(err, "message")), "no prompt that long"));
	json_decref(j);
}

/*
 * Issue 13, finding 2: a large body with a key that does not exist is
 * refused (401, OpenAI's format) by the key check before the body, through
 * the real auth on the private Redis; the same body with a valid key is
 * served.
 */
static void test_large_body_key_checked_first(void **state)
{
	static char out[8192], body[70000]; /* over the 64 KiB that wait for the key */
	static const char pre[] = "{\"model\":\"tiny\",\"prompt\":\"";
	static const char post[] = "\",\"stream\":false,\"max_tokens\":2}";
	size_t n = sizeof(body) - sizeof(pre) - sizeof(post);
	char path[128], bogus[GW_KEY_LEN + 1], kid[GW_KEY_ID_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	FILE *f;
	json_t *j;

	(void)state;
	memcpy(body, pre, sizeof(pre) - 1);
	memset(body + sizeof(pre) - 1, 'a', n);
	memcpy(body + sizeof(pre) - 1 + n, post, sizeof(post));
	snprintf(path, sizeof(path), "/tmp/sluice-test-dispatch-key-%ld.json", (long)getpid());
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs(body, f);
	fclose(f);
	assert_int_equal(gw_key_generate(pepper, bogus, kid, mac), CM_OK); /* never stored */
	tcli_curl(out, sizeof(out), "-s -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
		  "--data-binary @%s -w '\\n%%{http_code}' http://127.0.0.1:%u/v1/completions",
		  bogus, path, port);
	assert_int_equal(dt_split(out, &j), 401);
	assert_non_null(j);
	/* as the request path answers a bad key: the SDKs' AuthenticationError */
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
			    "authentication_error");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			    "invalid_api_key");
	json_decref(j);
	tcli_curl(out, sizeof(out), "-s -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' "
		  "--data-binary @%s -w '\\n%%{http_code}' http://127.0.0.1:%u/v1/completions",
		  key_solo, path, port); /* a tenant without a TPM limit */
	unlink(path);
	assert_int_equal(dt_split(out, &j), 200);
	json_decref(j);
}

static void test_openai_chat(void **state)
{
	char out[8192];
	json_t *j, *msg;

	(void)state;
	dt_curl(out, sizeof(out), key, "/v1/chat/completions",
		"{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	assert_int_equal(dt_split(out, &j), 200);
	assert_non_null(j);
	msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
	assert_string_equal(json_string_value(json_object_get(msg, "content")), "ab");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "completion_tokens")), 2);
	json_decref(j);
}

/*
 * OpenAI n: n worker requests on one worker, the later ones only after the
 * first has a token (a first that fails sends no others), each choice by
 * its index, usage summed; n over the worker's batch (4) is 400; the slots
 * held for later choices come back (n = 4 runs again and again).
 */
static void test_openai_choices(void **state)
{
	char out[16384];
	json_t *j, *ch;
	int before, idx[2] = { 0, 0 }, fin = 0;

	(void)state;
	before = fk.submits;
	dt_curl(out, sizeof(out), key, "/v1/chat/completions",
		"{\"model\":\"tiny\",\"n\":3,\"seed\":4,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	assert_int_equal(dt_split(out, &j), 200);
	assert_int_equal(fk.submits - before, 3);
	assert_int_equal(json_array_size(json_object_get(j, "choices")), 3);
	for (size_t i = 0; i < 3; i++) {
		ch = json_array_get(json_object_get(j, "choices"), i);
		assert_int_equal(json_integer_value(json_object_get(ch, "index")), (json_int_t)i);
		assert_string_equal(json_string_value(json_object_get(json_object_get(ch, "message"),
								      "content")), "ab");
	}
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "completion_tokens")), 6);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "usage"),
							    "prompt_tokens")), 5);
	json_decref(j);
	/* streamed */
	dt_curl(out, sizeof(out), key, "/v1/completions",
		"{\"model\":\"tiny\",\"n\":2,\"stream\":true,\"prompt\":\"hi\"}");
	for (char *p = strstr(out, "data: {"); p; p = strstr(p + 1, "data: {")) {
		char *end = strstr(p, "\n\n");

		assert_non_null(end);
		*end = '\0';
		j = json_loads(p + 6, 0, NULL);
		*end = '\n';
		assert_non_null(j);
		ch = json_array_get(json_object_get(j, "choices"), 0);
		idx[json_integer_value(json_object_get(ch, "index")) == 1]++;
		fin += json_is_string(json_object_get(ch, "finish_reason"));
		json_decref(j);
	}
	assert_int_equal(idx[0], 3); /* "a", "b", the finish chunk */
	assert_int_equal(idx[1], 3);
	assert_int_equal(fin, 2);
	assert_non_null(strstr(out, "data: [DONE]"));
	/* the first choice fails: the others are never sent */
	before = fk.submits;
	dt_curl(out, sizeof(out), key, "/v1/completions", "{\"model\":\"tiny\",\"n\":3,\"prompt\":\"fail\"}");
	assert_int_equal(dt_split(out, &j), 400);
	json_decref(j);
	assert_int_equal(fk.submits - before, 1);
	/* over the worker's batch */
	dt_curl(out, sizeof(out), key, "/v1/completions", "{\"model\":\"tiny\",\"n\":5,\"prompt\":\"hi\"}");
	assert_int_equal(dt_split(out, &j), 400);
	assert_non_null(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			       "n: expected at most 4"));
	json_decref(j);
	for (int k = 0; k < 3; k++) {
		dt_curl(out, sizeof(out), key, "/v1/completions", "{\"model\":\"tiny\",\"n\":4,\"prompt\":\"hi\"}");
		assert_int_equal(dt_split(out, &j), 200);
		assert_int_equal(json_array_size(json_object_get(j, "choices")), 4);
		json_decref(j);
	}
	dt_still_serves();
}

static void test_refusals_in_the_dialects_format(void **state)
{
	char out[8192];
	json_t *j;

	(void)state;
	dt_curl(out, sizeof(out), NULL, "/api/generate", "{\"model\":\"tiny\",\"prompt\":\"hi\"}");
	assert_int_equal(dt_split(out, &j), 401);
	assert_true(json_is_string(json_object_get(j, "error")));
	json_decref(j);
	dt_curl(out, sizeof(out), NULL, "/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"hi\"}");
	assert_int_equal(dt_split(out, &j), 401);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "type")),
			    "authentication_error");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/api/generate", "{\"model\":\"nope\",\"prompt\":\"hi\"}");
	assert_int_equal(dt_split(out, &j), 404);
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/chat/completions",
		"{\"model\":\"tiny\",\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}");
	assert_int_equal(dt_split(out, &j), 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")),
			    "messages[0].role");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/api/pull", "{\"model\":\"tiny\"}");
	assert_int_equal(dt_split(out, &j), 403);
	json_decref(j);
	/* the worker refuses: the client gets the worker's own words (not a
	 * generic text), the field it names, and the next request is served */
	dt_curl(out, sizeof(out), key, "/api/generate",
		"{\"model\":\"tiny\",\"prompt\":\"fail\",\"raw\":true,\"stream\":false}");
	assert_int_equal(dt_split(out, &j), 400);
	assert_string_equal(json_string_value(json_object_get(j, "error")), FAKE_WORKER_REASON);
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"fail\"}");
	assert_int_equal(dt_split(out, &j), 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			    FAKE_WORKER_REASON);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "param")),
			    "prompt");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/completions", "{\"model\":\"tiny\",\"prompt\":\"long\"}");
	assert_int_equal(dt_split(out, &j), 400);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			    "context_length_exceeded");
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			    FAKE_WORKER_TOO_LONG);
	json_decref(j);
	dt_still_serves();
}

static void test_fixed_endpoints(void **state)
{
	char out[8192];
	json_t *j;

	(void)state;
	dt_curl(out, sizeof(out), key, "/api/tags", NULL);
	assert_int_equal(dt_split(out, &j), 200);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(j, "models"), 0), "name")), "tiny:latest");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/models", NULL);
	assert_int_equal(dt_split(out, &j), 200);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(j, "data"), 0), "id")), "tiny");
	json_decref(j);
	/* one model by id; "x:latest" is "x", as in Ollama */
	dt_curl(out, sizeof(out), key, "/v1/models/tiny", NULL);
	assert_int_equal(dt_split(out, &j), 200);
	assert_string_equal(json_string_value(json_object_get(j, "id")), "tiny");
	assert_string_equal(json_string_value(json_object_get(j, "object")), "model");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/models/tiny:latest", NULL);
	assert_int_equal(dt_split(out, &j), 200);
	assert_string_equal(json_string_value(json_object_get(j, "id")), "tiny");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/v1/models/tiny:7b", NULL);
	assert_int_equal(dt_split(out, &j), 404);
	assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "code")),
			    "model_not_found");
	json_decref(j);
	dt_curl(out, sizeof(out), key, "/api/generate",
		"{\"model\":\"tiny:latest\",\"prompt\":\"hi\",\"stream\":false}");
	assert_int_equal(dt_split(out, &j), 200);
	json_decref(j);
	dt_curl(out, sizeof(out), NULL, "/readyz", NULL);
	assert_int_equal(dt_split(out, &j), 200);
	assert_string_equal(json_string_value(json_object_get(j, "status")), "ready");
	json_decref(j);
}

/* X-Request-Id on every answer: the client's when well-formed, else the
 * gateway's "<instance hex>-<n>". */
/* CORS: an allowed origin's preflight is answered before auth, its answers
 * carry the headers; another origin gets none. */
static void test_cors(void **state)
{
	char out[8192], cmd[640];

	(void)state;
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - -X OPTIONS -H 'Origin: https://app.example' "
		 "-H 'Access-Control-Request-Method: POST' "
		 "-H 'Access-Control-Request-Headers: authorization,content-type,x-stainless-os' "
		 "http://127.0.0.1:%u/v1/chat/completions", port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	assert_non_null(strstr(out, " 204"));
	assert_non_null(strcasestr(out, "\nAccess-Control-Allow-Origin: https://app.example\r\n"));
	assert_non_null(strcasestr(out, "\nAccess-Control-Allow-Headers: "
				   "authorization,content-type,x-stainless-os\r\n"));
	assert_non_null(strcasestr(out, "\nAccess-Control-Allow-Methods: "));
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - -H 'Origin: https://app.example' "
		 "-H 'Authorization: Bearer %s' http://127.0.0.1:%u/api/tags", key, port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	assert_non_null(strstr(out, " 200"));
	assert_non_null(strcasestr(out, "\nAccess-Control-Allow-Origin: https://app.example\r\n"));
	assert_non_null(strcasestr(out, "\nAccess-Control-Expose-Headers: X-Request-Id"));
	/* another origin: no CORS headers; its preflight is an ordinary 405 */
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - -X OPTIONS -H 'Origin: https://evil.example' "
		 "-H 'Access-Control-Request-Method: POST' http://127.0.0.1:%u/v1/chat/completions", port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	assert_non_null(strstr(out, " 405"));
	assert_null(strcasestr(out, "Access-Control-"));
}

/* A tenant queue of 0 means "no waiting": served when a worker can take
 * the request now (it was refused even with nothing queued). */
static void test_queue_zero_dispatches_now(void **state)
{
	char out[8192];
	json_t *j;

	(void)state;
	dt_curl(out, sizeof(out), key_solo, "/v1/chat/completions",
		"{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
	assert_int_equal(dt_split(out, &j), 200);
	json_decref(j);
}

static void test_request_id(void **state)
{
	char out[8192], cmd[512];
	const char *h;

	(void)state;
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - -H 'Authorization: Bearer %s' "
		 "-H 'X-Request-Id: trace-7.a:b' http://127.0.0.1:%u/api/tags", key, port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	assert_non_null(strcasestr(out, "\nX-Request-Id: trace-7.a:b\r\n"));
	/* malformed (a space, a '!'): the gateway's own id instead */
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - -H 'Authorization: Bearer %s' "
		 "-H 'X-Request-Id: bad id!' http://127.0.0.1:%u/api/tags", key, port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	h = strcasestr(out, "\nX-Request-Id: ");
	assert_non_null(h);
	h += strlen("\nX-Request-Id: ");
	assert_true(strspn(h, "0123456789abcdef") >= 8);
	assert_int_equal(h[strspn(h, "0123456789abcdef")], '-');
	assert_null(strstr(out, "bad id"));
	/* unknown path, no key: still there */
	snprintf(cmd, sizeof(cmd), "-s -o /dev/null -D - http://127.0.0.1:%u/nope", port);
	assert_int_equal(tcli_curl(out, sizeof(out), "%s", cmd), 0);
	assert_non_null(strstr(out, " 404"));
	assert_non_null(strcasestr(out, "\nX-Request-Id: "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ollama_generate),
		cmocka_unit_test(test_openai_chat),
		cmocka_unit_test(test_openai_choices),
		cmocka_unit_test(test_prompt_over_frame_is_413),
		cmocka_unit_test(test_body_over_context_refused_unparsed),
		cmocka_unit_test(test_large_body_key_checked_first),
cmocka_unit_test(test_worker_counts_bounded),
		cmocka_unit_test(test_refusals_in_the_dialects_format),
		cmocka_unit_test(test_fixed_endpoints),
		cmocka_unit_test(test_request_id),
		cmocka_unit_test(test_queue_zero_dispatches_now),
		cmocka_unit_test(test_cors),
	};

	return cmocka_run_group_tests_name("gateway_dispatch", tests, setup, teardown);
}
