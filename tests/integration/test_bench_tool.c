/*
 * test_bench_tool.c - sluice-bench against the whole service
 * (gateway_fixture.h: redis, a worker on the tiny model, the gateway over
 * HTTPS with the test's certificate, verified with --cacert):
 *   - `run`: two closed-loop users for a few seconds, every request
 *     answered with its exact number of tokens, none failed, a JSON row;
 *     a batch user beside is measured apart;
 *   - `capacity` with generous targets, levels of 1 and 2 users and
 *     open-loop rates: the report names a knee, capacity.md marks it;
 *   - refusals before any load: a non-loopback address not named with
 *     --allow, a missing key, a bad range, a certificate it cannot verify.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <jansson.h>

#include "tests/integration/gateway_fixture.h"

static char bench[600];

static char *bench_out(const char *args, int *code)
{
	char cmd[4096];
	int st;
	char *o;

	snprintf(cmd, sizeof(cmd), "SLUICE_KEY=%s %s %s 2>&1", gwt_key_a, bench, args);
	o = h_run_capture(cmd, &st);
	assert_non_null(o);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return o;
}

/* Runs sluice-bench with args and asserts it refused them: exit 2 and a
 * message saying `needle`. */
static void bench_refused(const char *args, const char *needle)
{
	int code;
	char *o = bench_out(args, &code);

	assert_int_equal(code, 2);
	assert_non_null(strstr(o, needle));
	free(o);
}

static void test_run(void **state)
{
	char args[2048], path[700];
	int code;
	char *o;
	json_t *j;

	(void)state;
	snprintf(path, sizeof(path), "%s/run.json", gwt_dir);
	snprintf(args, sizeof(args), "run --url https://127.0.0.1:%d --cacert %s --model tiny "
		 "--concurrency 2 --batch-clients 1 --seconds 4 --warmup 1 --output-tokens 8:8 "
		 "--ttft-p95 60000 --itl-p95 60000 --json %s", gwt_port, gwt_cert, path);
	o = bench_out(args, &code);
	if (code != 0)
		fail_msg("sluice-bench run: %d\n%s", code, o);
	assert_non_null(strstr(o, "| 2 users | interactive |"));
	assert_non_null(strstr(o, "| 2 users | batch |"));
	assert_non_null(strstr(o, "lost 0, unfinished 0"));
	free(o);
	j = json_load_file(path, 0, NULL);
	assert_non_null(j);
	assert_true(json_integer_value(json_object_get(j, "ok")) >= 2);
	assert_int_equal(json_integer_value(json_object_get(j, "errors")), 0);
	/* generous targets: every request met them; 8 tokens each */
	assert_true(json_real_value(json_object_get(j, "met_share")) == 1.0);
	assert_true(json_real_value(json_object_get(j, "tokens_per_s")) > 0);
	json_decref(j);
}

static void test_capacity(void **state)
{
	char args[2048], path[700];
	int code;
	char *o;
	json_t *j, *ramp;

	(void)state;
	snprintf(args, sizeof(args), "capacity --url https://127.0.0.1:%d --cacert %s --model tiny "
		 "--output-tokens 4:8 --ttft-p95 60000 --itl-p95 60000 --level-seconds 2 --warmup 0.5 "
		 "--min-requests 2 --max-concurrency 2 --max-seconds 60 --out %s/cap", gwt_port,
		 gwt_cert, gwt_dir);
	o = bench_out(args, &code);
	if (code != 0)
		fail_msg("sluice-bench capacity: %d\n%s", code, o);
	assert_non_null(strstr(o, "knee: 2 concurrent users"));
	free(o);
	snprintf(path, sizeof(path), "%s/cap/capacity.json", gwt_dir);
	j = json_load_file(path, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "knee_concurrency")), 2);
	ramp = json_object_get(j, "concurrency_ramp");
	assert_int_equal(json_array_size(ramp), 2);
	assert_true(json_is_true(json_object_get(json_array_get(ramp, 1), "holds")));
	/* the rate phase ran around the knee's requests/s */
	assert_true(json_array_size(json_object_get(j, "arrival_rates")) >= 1);
	assert_true(json_real_value(json_object_get(j, "knee_rate")) > 0);
	json_decref(j);
	snprintf(path, sizeof(path), "%s/cap/capacity.md", gwt_dir);
	{
		FILE *f = fopen(path, "r");
		char buf[8192] = "";

		assert_non_null(f);
		(void)!fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		assert_non_null(strstr(buf, "| **knee** 2 users |"));
	}
}

static void test_refusals(void **state)
{
	char args[2048];
	int code;
	char *o;

	(void)state;
	/* not loopback, not allowed: refused before any connection */
	bench_refused("run --url https://192.0.2.1:8443 --insecure --model tiny --concurrency 1",
		      "192.0.2.1 is not a loopback address: name it with --allow");
	bench_refused("run --url ftp://127.0.0.1 --model tiny --concurrency 1",
		      "expected https://HOST[:PORT]");
	bench_refused("run --url https://127.0.0.1:1 --model tiny --concurrency 1 "
		      "--prompt-words 9:3", "bad or unknown option");
	bench_refused("capacity --url https://127.0.0.1:1 --model tiny --out /tmp/x",
		      "capacity needs --ttft-p95 MS, --itl-p95 MS and --out DIR");
	/* the system store does not know the test's CA: every request fails
	 * (status 0), nothing is measured as answered */
	snprintf(args, sizeof(args), "run --url https://127.0.0.1:%d --model tiny --concurrency 1 "
		 "--seconds 2 --warmup 0.5", gwt_port);
	o = bench_out(args, &code);
	assert_int_equal(code, 0);
	{
		const char *row = strstr(o, "| 1 users | interactive |");
		unsigned measured = 0, ok = 99;

		assert_non_null(row);
		assert_int_equal(sscanf(row, "| 1 users | interactive | %u | %u |", &measured, &ok), 2);
		assert_true(measured >= 1);
		assert_int_equal(ok, 0);
	}
	free(o);
}

static int setup(void **state)
{
	const char *bd = getenv("SLUICE_BUILD_DIR");

	snprintf(bench, sizeof(bench), "%s/bench/sluice-bench", bd ? bd : "build");
	return gwt_setup(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests_name("it_bench_tool", tests, setup, gwt_teardown);
}
