/*
 * test_slo.c - SLO admission through the whole service (gateway_fixture.h:
 * redis, a worker on the tiny model, the gateway, curl): with
 * gateway.slo enabled and a TTFT target no request can meet (1 ms for a
 * prompt of some 300 tokens), every
 * window of two finished interactive requests halves the worker's limit,
 * so /metrics shows sluice_worker_slo_limit falling from the static cap
 * (8) to the floor (1; 2 after a window that happened to meet it) and the
 * worker is fed one request at a time; every request is answered or
 * refused early with 429 by the tenant's bounded queue, none fails.
 * Batch requests (X-Sluice-Class: batch) do not feed the controller.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/integration/gateway_fixture.h"

static char body[4096];

static double limit_now(void)
{
	char *m = gwt_metrics();
	double v = h_metric(m, "sluice_worker_slo_limit{worker=\"w0\"}");

	free(m);
	return v;
}

static void test_limit_backs_off(void **state)
{
	struct gwt_resp r;

	(void)state;
	{
		/* a prompt of some 300 tokens: its prefill takes milliseconds */
		size_t n = (size_t)snprintf(body, sizeof(body), "{\"model\":\"tiny\",\"prompt\":\"");

		for (int i = 0; i < 140; i++)
			n += (size_t)snprintf(body + n, sizeof(body) - n, "a%d ", i % 10);
		snprintf(body + n, sizeof(body) - n, "\",\"raw\":true,\"stream\":false,"
			 "\"options\":{\"num_predict\":4}}");
	}
	assert_true(limit_now() == 8); /* the static cap (max_inflight 8) */
	/* batch work does not count */
	for (int i = 0; i < 4; i++) {
		gwt_req(&r, "/api/generate", gwt_key_a, body, strlen(body), "-H 'X-Sluice-Class: batch'");
		assert_int_equal(r.code, 200);
		gwt_resp_free(&r);
	}
	assert_true(limit_now() == 8);
	/* interactive: 16 requests at once, 4 rounds (their TTFT counts their
	 * wait in the queue too, so none meets 1 ms): 8 -> 4 -> 2 -> 1 */
	{
		char path[700], cmd[4096], *o;
		int st, ok = 0, busy = 0;
		FILE *f;

		snprintf(path, sizeof(path), "%s/slo-body.json", gwt_dir);
		f = fopen(path, "w");
		assert_non_null(f);
		fputs(body, f);
		fclose(f);
		for (int round = 0; round < 4; round++) {
			snprintf(cmd, sizeof(cmd),
				 "for i in $(seq 16); do curl -sS --max-time 60 --cacert %s -o /dev/null "
				 "-w '%%{http_code}\\n' -H 'Authorization: Bearer %s' --data-binary @%s "
				 "https://127.0.0.1:%d/api/generate & done; wait", gwt_cert, gwt_key_a,
				 path, gwt_port);
			o = h_run_capture(cmd, &st);
			assert_non_null(o);
			for (char *p = o; (p = strstr(p, "200")) != NULL; p += 3)
				ok++;
			for (char *p = o; (p = strstr(p, "429")) != NULL; p += 3)
				busy++;
			free(o);
		}
		/* answered, or refused early by the tenant's bounded queue (8) */
		assert_int_equal(ok + busy, 64);
		assert_true(ok >= 16);
	}
	/* the limit is updated as each request ends: read it now */
	{
		double lim = limit_now();

		if (lim > 2)
			fail_msg("the limit stayed at %g", lim);
	}
	/* still serving, at the limit */
	gwt_req(&r, "/api/generate", gwt_key_a, body, strlen(body), NULL);
	assert_int_equal(r.code, 200);
	gwt_resp_free(&r);
}

static int setup(void **state)
{
	gwt_max_inflight = 8;
	gwt_gateway_extra = ", \"slo\": {\"enabled\": true, \"ttft_p95_ms\": 1, \"itl_p95_ms\": 0,"
			    " \"window\": 2, \"decrease\": 0.5}";
	return gwt_setup(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit_backs_off),
	};

	return cmocka_run_group_tests_name("it_slo", tests, setup, gwt_teardown);
}
