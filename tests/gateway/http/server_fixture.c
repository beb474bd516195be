/*
 * server_fixture.c - the TLS server test_server.c drives: the server on
 * 127.0.0.1:0 with its event loop on a second thread, a certificate made
 * by the `openssl` CLI in a temporary directory, the test handler's paths
 * (/hello, /echo, /stream, /big, /hang, /flood), counters the loop thread
 * bumps and the test thread waits on, and running code on the loop thread
 * (see server_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "gateway/api/api.h"
#include "gateway/http/server.h"
#include "tests/gateway/http/server_fixture.h"
#include "tests/gateway/http/tls_client.h"


char dir[64];
struct event_base *base;
pthread_t loop_thread;
struct gw_server *srv;     /* TLS, the main server under test */
uint16_t port;

/* counters written on the loop thread, read by the test thread */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
int n_closed;              /* on_close calls */
int n_overflow;            /* stream writes refused with CM_ELIMIT */
int n_handler_errors;      /* gw_request_* failures seen by the handler */

void bump(int *counter)
{
	pthread_mutex_lock(&mu);
	(*counter)++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

int read_counter(int *counter)
{
	int v;

	pthread_mutex_lock(&mu);
	v = *counter;
	pthread_mutex_unlock(&mu);
	return v;
}

/* Waits until *counter >= target or the deadline passes; returns the value. */
int wait_counter(int *counter, int target)
{
	struct timespec ts;
	int v;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += DEADLINE_MS / 1000;
	pthread_mutex_lock(&mu);
	while (*counter < target)
		if (pthread_cond_timedwait(&cv, &mu, &ts) == ETIMEDOUT)
			break;
	v = *counter;
	pthread_mutex_unlock(&mu);
	return v;
}

/* ---- running code on the loop thread ----------------------------------- */

struct loop_call {
	void (*fn)(void *);
	void *arg;
	int done;
};

static void loop_call_cb(evutil_socket_t fd, short what, void *p)
{
	struct loop_call *c = p;

	c->fn(c->arg);
	pthread_mutex_lock(&mu);
	c->done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

void on_loop(void (*fn)(void *), void *arg)
{
	struct loop_call c = { fn, arg, 0 };
	struct timeval now = { 0, 0 };
	struct timespec ts;

	assert_int_equal(event_base_once(base, -1, EV_TIMEOUT, loop_call_cb, &c, &now), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&mu);
	while (!c.done)
		if (pthread_cond_timedwait(&cv, &mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&mu);
	assert_true(c.done);
}

struct stats_arg {
	struct gw_server *s;
	struct gw_server_stats st;
};

static void stats_fn(void *p)
{
	struct stats_arg *a = p;

	gw_server_get_stats(a->s, &a->st);
}

struct gw_server_stats stats_of(struct gw_server *s)
{
	struct stats_arg a = { .s = s };

	on_loop(stats_fn, &a);
	return a.st;
}

/* ---- the handler --------------------------------------------------------- */

struct stream_state {
	struct gw_request *req;
	struct event *timer;
	int left;
	int n;
};

static void stream_free(struct stream_state *ss)
{
	event_free(ss->timer);
	free(ss);
}

static void stream_closed(struct gw_request *req, void *arg)
{
	stream_free(arg);
	bump(&n_closed);
}

static void stream_tick(evutil_socket_t fd, short what, void *arg)
{
	struct stream_state *ss = arg;
	struct timeval tv = { 0, 5000 };
	char line[32];
	int n = snprintf(line, sizeof(line), "chunk %d\n", ss->n++);

	if (gw_request_stream_write(ss->req, line, (size_t)n) != CM_OK)
		return; /* on_close follows */
	if (--ss->left > 0) {
		evtimer_add(ss->timer, &tv);
		return;
	}
	if (gw_request_stream_end(ss->req) != CM_OK)
		return;
	stream_free(ss);
}

static void hang_closed(struct gw_request *req, void *arg)
{
	bump(&n_closed);
}

void handler(struct gw_request *req, void *ctx)
{
	const char *path = gw_request_path(req);
	const struct gw_http_request *h = gw_request_http(req);
	char buf[128];
	size_t len;
	enum cm_status st;

	if (strcmp(path, "/hello") == 0) {
		st = gw_request_respond(req, 200, "text/plain", "hello\n", 6);
	} else if (strcmp(path, "/trust") == 0) {
		gw_request_mark_trusted(req); /* as the dispatcher does after authentication */
		st = gw_request_respond(req, 200, "text/plain", "trusted\n", 8);
	} else if (strcmp(path, "/echo") == 0) {
		gw_request_body(req, &len);
		snprintf(buf, sizeof(buf), "len=%zu id=%d", len, gw_request_id(req) > 0);
		st = gw_request_add_header(req, "X-Test", "1");
		if (st == CM_OK)
			st = gw_request_respond(req, 200, "text/plain", buf, strlen(buf));
	} else if (strcmp(path, "/stream") == 0) {
		struct stream_state *ss = calloc(1, sizeof(*ss));
		struct timeval tv = { 0, 0 };

		ss->req = req;
		ss->left = atoi(h->query[0] ? h->query : "5");
		ss->timer = evtimer_new(base, stream_tick, ss);
		gw_request_on_close(req, stream_closed, ss);
		st = gw_request_stream_start(req, 200, "application/x-ndjson");
		evtimer_add(ss->timer, &tv);
	} else if (strcmp(path, "/big") == 0) {
		static char big[60 * 1024];

		memset(big, 'b', sizeof(big));
		st = gw_request_respond(req, 200, "text/plain", big, sizeof(big));
		if (st == CM_ECLOSED)
			st = CM_OK; /* a client that does not read: closed */
	} else if (strcmp(path, "/hang") == 0) {
		gw_request_on_close(req, hang_closed, NULL);
		st = CM_OK;
	} else if (strcmp(path, "/flood") == 0) {
		static char kib[1024];

		memset(kib, 'f', sizeof(kib));
		gw_request_on_close(req, hang_closed, NULL);
		st = gw_request_stream_start(req, 200, "text/plain");
		for (int i = 0; st == CM_OK && i < 100000; i++)
			st = gw_request_stream_write(req, kib, sizeof(kib));
		if (st == CM_ELIMIT)
			bump(&n_overflow);
		st = CM_OK;
	} else {
		struct gw_api_error e;
		struct cm_buf b;

		cm_buf_init(&b, 4096);
		gw_api_error_set(&e, 404, NULL, NULL, "no such path");
		st = gw_api_render_error(&b, gw_paths_style(path), &e);
		if (st == CM_OK)
			st = gw_request_respond(req, 404, GW_API_CT_JSON,
						cm_buf_data(&b), cm_buf_len(&b));
		cm_buf_deinit(&b);
	}
	/* no cmocka assert here: this runs on the loop thread */
	if (st != CM_OK)
		bump(&n_handler_errors);
}

/* ---- setup ---------------------------------------------------------------- */

int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void make_cert(const char *name)
{
	assert_int_equal(sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
			    "-nodes -keyout %s/%s.key -out %s/%s.crt -days 2 -subj /CN=localhost "
			    "-addext subjectAltName=IP:127.0.0.1,DNS:localhost >/dev/null 2>&1",
			    dir, name, dir, name), 0);
}

void install_cert(const char *name)
{
	assert_int_equal(sh("cp %s/%s.crt %s/cert.pem && cp %s/%s.key %s/key.pem",
			    dir, name, dir, dir, name, dir), 0);
}

void test_config(struct gw_server_config *c)
{
	static char cert[128], key[128];

	gw_server_config_defaults(c);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	c->listen_addr = "127.0.0.1";
	c->port = 0;
	c->cert_file = cert;
	c->key_file = key;
	c->header_bytes = 4096;
	c->body_bytes = 64 * 1024;
	c->connections = 64;
	c->out_bytes = 64 * 1024;
	c->header_timeout_ms = HEADER_TIMEOUT_MS;
	c->body_timeout_ms = BODY_TIMEOUT_MS;
	c->idle_timeout_ms = IDLE_TIMEOUT_MS;
	c->write_timeout_ms = WRITE_TIMEOUT_MS;
}

static void *loop_main(void *arg)
{
	event_base_loop(base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

int group_setup(void **state)
{
	struct gw_server_config c;
	char err[512];

	if (sh("command -v openssl >/dev/null && command -v curl >/dev/null") != 0) {
		fprintf(stderr, "openssl or curl missing: skipping\n");
		exit(77);
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/sluice-gwsrv-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	make_cert("a");
	make_cert("b");
	install_cert("a");
	evthread_use_pthreads();
	base = event_base_new();
	test_config(&c);
	if (gw_server_new(base, &c, handler, NULL, &srv, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "server: %s\n", err);
		return -1;
	}
	gw_server_set_error_renderer(srv, gw_api_http_error, NULL);
	if (gw_server_watch_sighup(srv) != CM_OK)
		return -1;
	port = gw_server_port(srv);
	if (port == 0)
		return -1;
	return pthread_create(&loop_thread, NULL, loop_main, NULL);
}

void free_server_fn(void *p)
{
	gw_server_free(p);
}

int group_teardown(void **state)
{
	on_loop(free_server_fn, srv);
	event_base_loopbreak(base);
	pthread_join(loop_thread, NULL);
	/* the callbacks a freed bufferevent still had queued (deferred ones
	 * hold a reference on it) run now: event_base_free would drop them and
	 * leak the bufferevent (LeakSanitizer, one run in many under load) */
	event_base_loop(base, EVLOOP_NONBLOCK);
	event_base_free(base);
	sh("rm -rf %s", dir);
	return 0;
}

/* ---- the key check before the body (a stand-in for the dispatcher's) ---- */

int n_head_cancels;

struct head_pending {
	struct gw_head *h;
	int cancelled;
};

static void head_later(evutil_socket_t fd, short what, void *arg)
{
	struct head_pending *p = arg;

	(void)fd;
	(void)what;
	if (!p->cancelled) {
		*gw_head_user(p->h) = NULL;
		gw_head_verdict(p->h, 1, 0, NULL);
	}
	free(p);
}

void head_check(struct gw_head *h, void *ctx)
{
	const char *a = gw_head_header(h, "Authorization");
	struct head_pending *p;

	(void)ctx;
	if (a && strcmp(a, "Bearer good") == 0) {
		/* answered later, as a Redis lookup is */
		p = calloc(1, sizeof(*p));
		p->h = h;
		*gw_head_user(h) = p;
		event_base_once(base, -1, EV_TIMEOUT, head_later, p, &(struct timeval){ 0, 1000 });
		return;
	}
	if (a && strcmp(a, "Bearer hang") == 0)
		return; /* never answers: only a close ends it */
	gw_head_verdict(h, 0, 401, "invalid or missing API key");
}

void head_cancel(struct gw_head *h, void *ctx)
{
	struct head_pending *p = *gw_head_user(h);

	(void)ctx;
	if (p)
		p->cancelled = 1;
	bump(&n_head_cancels);
}

