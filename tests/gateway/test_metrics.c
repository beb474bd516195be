/*
 * test_metrics.c - gateway/metrics.c: the Prometheus text rendered from
 * real sources (a queue, two configured workers, a plain-HTTP listener on
 * 127.0.0.1:0) against docs/metrics.md, so that the page cannot go stale:
 * every series rendered is documented with its type, every series the
 * page lists is rendered; counters and histograms move as they are fed.
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

#include "common/buf.h"
#include "gateway/http/server.h"
#include "gateway/metrics.h"
#include "gateway/queue.h"
#include "gateway/workers.h"

#define MX_TEXT_MAX (4u * 1024 * 1024)

static struct event_base *base;
static struct gw_metrics *m;
static struct gw_queue *q;
static struct gw_workers *ws;
static struct gw_server *srv;
static char *doc;

static void no_handler(struct gw_request *r, void *ctx)
{
	(void)ctx;
	if (gw_request_respond(r, 404, "text/plain", "", 0) != CM_OK)
		fail_msg("respond failed");
}

static char *read_doc(void)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char path[1024];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/docs/metrics.md", src ? src : ".");
	f = fopen(path, "r");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static int setup(void **state)
{
	const struct gw_worker_spec specs[2] = {
		{ "w-a", "/nonexistent/sluice-test-a.sock", NULL },
		{ "w-b", "/nonexistent/sluice-test-b.sock", NULL },
	};
	const struct gw_workers_config wc = { 0, 60000, 60000, 0, 0 };
	const struct gw_queue_config qc = { 16, 64, 1000000000LL };
	struct gw_server_config sc;
	char err[256];

	(void)state;
	doc = read_doc();
	if (!doc)
		return -1;
	base = event_base_new();
	gw_server_config_defaults(&sc);
	sc.plain_http = 1;
	sc.port = 0;
	if (!base || gw_metrics_new(&m) != CM_OK || gw_queue_new(&qc, &q) != CM_OK ||
	    gw_workers_new(base, specs, 2, &wc, &ws) != CM_OK ||
	    gw_server_new(base, &sc, no_handler, NULL, &srv, err, sizeof(err)) != CM_OK)
		return -1;
	gw_metrics_set_sources(m, ws, q, srv);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	gw_metrics_free(m);
	gw_server_free(srv);
	gw_workers_free(ws);
	gw_queue_free(q);
	event_base_free(base);
	free(doc);
	return 0;
}

static char *render(void)
{
	struct cm_buf b;
	char *s;

	cm_buf_init(&b, MX_TEXT_MAX);
	assert_int_equal(gw_metrics_render(m, &b), CM_OK);
	s = strndup((const char *)cm_buf_data(&b), cm_buf_len(&b));
	cm_buf_deinit(&b);
	assert_non_null(s);
	return s;
}

/* The documented type of `name`: the cell after its name in a table row,
 * "histogram" for the rows of the histogram table, NULL when absent. */
static const char *doc_type(const char *name, char *out, size_t n)
{
	char needle[160];
	const char *p, *hist;

	snprintf(needle, sizeof(needle), "| `%s` |", name);
	p = strstr(doc, needle);
	if (!p)
		return NULL;
	hist = strstr(doc, "## Latency histograms");
	if (hist && p > hist && p < strstr(hist, "\n## Queues")) {
		snprintf(out, n, "histogram");
		return out;
	}
	p += strlen(needle);
	while (*p == ' ')
		p++;
	snprintf(out, n, "%.*s", (int)strcspn(p, " |"), p);
	return out;
}

static void test_rendered_series_are_documented(void **state)
{
	char *text = render(), *line, *save = NULL, type[32];
	int n = 0;

	(void)state;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], rtype[32];

		if (sscanf(line, "# TYPE %127s %31s", name, rtype) != 2)
			continue;
		n++;
		if (!doc_type(name, type, sizeof(type)))
			fail_msg("%s is rendered but not in docs/metrics.md", name);
		if (strcmp(type, rtype) != 0)
			fail_msg("%s: rendered as %s, documented as %s", name, rtype, type);
	}
	assert_true(n >= 25);
	free(text);
}

static void test_documented_series_are_rendered(void **state)
{
	char *text = render();
	const char *p = doc;
	int n = 0;

	(void)state;
	while ((p = strstr(p, "| `sluice_")) != NULL) {
		char name[128], want[160];

		p += 3;
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(p, "`"), p);
		snprintf(want, sizeof(want), "# TYPE %s ", name);
		if (!strstr(text, want))
			fail_msg("docs/metrics.md lists %s, which is not rendered", name);
		n++;
	}
	assert_true(n >= 25);
	free(text);
}

static void test_counters_move(void **state)
{
	char *text;

	(void)state;
	gw_metrics_request(m, "acme", 200, 11, 7);
	gw_metrics_request(m, "acme", 200, 1, 1);
	gw_metrics_request(m, "", 401, 0, 0);
	gw_metrics_observe(m, GW_HIST_TTFT, 3000000);      /* 3 ms */
	gw_metrics_observe(m, GW_HIST_TTFT, 40000000000LL); /* 40 s: +Inf only */
	text = render();
	assert_non_null(strstr(text, "sluice_gateway_requests_total{tenant=\"acme\",status=\"200\"} 2\n"));
	assert_non_null(strstr(text, "sluice_gateway_requests_total{tenant=\"_none\",status=\"401\"} 1\n"));
	assert_non_null(strstr(text, "sluice_gateway_prompt_tokens_total{tenant=\"acme\"} 12\n"));
	assert_non_null(strstr(text, "sluice_gateway_completion_tokens_total{tenant=\"acme\"} 8\n"));
	assert_non_null(strstr(text, "sluice_gateway_ttft_seconds_bucket{le=\"0.0025\"} 0\n"));
	assert_non_null(strstr(text, "sluice_gateway_ttft_seconds_bucket{le=\"0.005\"} 1\n"));
	assert_non_null(strstr(text, "sluice_gateway_ttft_seconds_bucket{le=\"30\"} 1\n"));
	assert_non_null(strstr(text, "sluice_gateway_ttft_seconds_bucket{le=\"+Inf\"} 2\n"));
	assert_non_null(strstr(text, "sluice_gateway_ttft_seconds_count 2\n"));
	/* the workers exist but never connected: not ready, no STATS series */
	assert_non_null(strstr(text, "sluice_worker_ready{worker=\"w-a\"} 0\n"));
	assert_non_null(strstr(text, "sluice_worker_ready{worker=\"w-b\"} 0\n"));
	assert_null(strstr(text, "sluice_worker_kv_blocks_used{"));
	assert_non_null(strstr(text, "sluice_worker_requests_placed_total{worker=\"w-a\"} 0\n"));
	assert_non_null(strstr(text, "sluice_gateway_worker_load_imbalance 0.000\n"));
	assert_non_null(strstr(text, "sluice_gateway_connections_open 0\n"));
	free(text);
}

static void test_render_cap(void **state)
{
	struct cm_buf b;

	(void)state;
	cm_buf_init(&b, 256); /* far too small: an error, not a truncated text */
	assert_int_not_equal(gw_metrics_render(m, &b), CM_OK);
	cm_buf_deinit(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rendered_series_are_documented),
		cmocka_unit_test(test_documented_series_are_rendered),
		cmocka_unit_test(test_counters_move),
		cmocka_unit_test(test_render_cap),
	};

	return cmocka_run_group_tests_name("gateway_metrics", tests, setup, teardown);
}
