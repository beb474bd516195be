/*
 * test_capacity.c - bench/capacity.c on synthetic levels: a level's
 * summary (percentiles, per-user tokens/s, goodput) and its verdict
 * (targets, errors, lost arrivals, too few answers), the knee rule (the
 * leading run of levels that hold: one that holds after a miss is noise),
 * and the report: capacity.json parses and names the knee, capacity.md
 * marks it, charts.gp draws it, and with gnuplot installed the PNGs are
 * real PNG files.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "bench/capacity.h"

static const struct cap_config cfg0 = {
	.ttft_target_ms = 500, .itl_target_ms = 100, .max_error_share = 0.01, .min_ok = 10,
};

static void push(struct lg_samples *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = realloc(s->v, s->cap * sizeof(double));
		assert_non_null(s->v);
	}
	s->v[s->n++] = v;
}

/* 100 requests: TTFT 1..100 x scale ms, every gap `gap` ms, 10 tokens */
static void synth(struct lg_result *r, double scale, double gap, unsigned errors)
{
	struct lg_class *k = &r->cls[0];

	memset(r, 0, sizeof(*r));
	for (int i = 1; i <= 100; i++) {
		push(&k->ttft, i * scale);
		push(&k->e2e, i * scale + 9 * gap);
		push(&k->req_itl, gap);
		for (int t = 0; t < 9; t++)
			push(&k->itl, gap);
	}
	k->ok = 100;
	k->status[200] = 100;
	k->status[503] = errors;
	k->tokens = 1000;
	k->met = 50;
	k->good_tokens = 500;
	k->prompt_tokens = 4000;
	r->window_s = 10;
}

static void test_point(void **state)
{
	struct lg_result r;
	struct cap_point p;

	(void)state;
	synth(&r, 5, 50, 0); /* TTFT p95 475 ms, gaps 50 ms */
	cap_point_from(&p, &r, &cfg0, 4, 0);
	assert_true(p.ttft[1] > 474 && p.ttft[1] < 481);
	assert_true(p.ttft[0] > 249 && p.ttft[0] < 256);
	assert_true(p.itl[1] == 50);
	assert_true(p.tpot[1] == 50);
	assert_true(p.tok_s == 100);
	assert_true(p.tok_s_user == 25);   /* 100 tok/s over 4 users */
	assert_true(p.goodput == 50);
	assert_true(p.req_s == 10);
	assert_true(p.prompt_tokens == 40);
	assert_true(p.pass);
	lg_result_free(&r);
	/* TTFT p95 950 ms: misses */
	synth(&r, 10, 50, 0);
	cap_point_from(&p, &r, &cfg0, 8, 0);
	assert_false(p.pass);
	lg_result_free(&r);
	/* TPOT over its target */
	synth(&r, 1, 150, 0);
	cap_point_from(&p, &r, &cfg0, 8, 0);
	assert_false(p.pass);
	lg_result_free(&r);
	/* 2 errors in 102: over 1 % */
	synth(&r, 1, 10, 2);
	cap_point_from(&p, &r, &cfg0, 8, 0);
	assert_int_equal(p.errors, 2);
	assert_false(p.pass);
	lg_result_free(&r);
	/* 1 in 101: within */
	synth(&r, 1, 10, 1);
	cap_point_from(&p, &r, &cfg0, 8, 0);
	assert_true(p.pass);
	lg_result_free(&r);
	/* open loop: arrivals lost for want of connections fail the level;
	 * per user by Little's law (10 req/s x mean e2e) */
	synth(&r, 1, 10, 0);
	r.lost = 1;
	cap_point_from(&p, &r, &cfg0, 0, 10);
	assert_false(p.pass);
	assert_true(p.tok_s_user > 0);
	lg_result_free(&r);
	/* too few answers to say anything */
	synth(&r, 1, 10, 0);
	r.cls[0].ok = 5;
	cap_point_from(&p, &r, &cfg0, 1, 0);
	assert_false(p.pass);
	lg_result_free(&r);
}

static void test_knee(void **state)
{
	struct cap_point p[6];

	(void)state;
	memset(p, 0, sizeof(p));
	assert_int_equal(cap_knee(p, 0), -1);
	assert_int_equal(cap_knee(p, 3), -1);
	p[0].pass = p[1].pass = p[2].pass = 1;
	p[4].pass = 1; /* holds after a miss: noise */
	assert_int_equal(cap_knee(p, 6), 2);
	p[3].pass = 1;
	assert_int_equal(cap_knee(p, 6), 4);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 1 << 16);

	assert_non_null(f);
	assert_non_null(b);
	(void)!fread(b, 1, (1 << 16) - 1, f);
	fclose(f);
	return b;
}

static void test_report(void **state)
{
	char dir[] = "/tmp/sluice-capacity-XXXXXX", path[256], err[256], *s;
	struct cap_report *rep = calloc(1, sizeof(*rep));
	struct cap_config cfg = cfg0;
	json_t *j;
	int charts = -1;
	static const int conc[] = { 1, 2, 4, 8, 16 };

	(void)state;
	assert_non_null(rep);
	assert_non_null(mkdtemp(dir));
	cfg.out_dir = dir;
	cfg.describe = "synthetic";
	for (int i = 0; i < 5; i++) {
		struct cap_point *p = &rep->ramp[i];

		p->concurrency = conc[i];
		p->ttft[0] = 100.0 * conc[i];
		p->ttft[1] = 120.0 * conc[i];
		p->ttft[2] = 150.0 * conc[i];
		p->tpot[0] = p->tpot[1] = p->tpot[2] = 20.0 * conc[i];
		p->itl[1] = p->itl[2] = 40.0 * conc[i];
		p->tok_s = 30.0 * conc[i];
		p->tok_s_user = 30;
		p->req_s = conc[i];
		p->ok = 100;
		p->pass = p->ttft[1] <= cfg.ttft_target_ms && p->tpot[1] <= cfg.itl_target_ms;
	}
	rep->n_ramp = 5;
	rep->knee = cap_knee(rep->ramp, rep->n_ramp);
	assert_int_equal(rep->knee, 2); /* 4 users: 480 ms, 80 ms */
	rep->rates[0] = rep->ramp[2];
	rep->rates[0].concurrency = 0;
	rep->rates[0].rate = 3.5;
	rep->n_rates = 1;
	rep->knee_rate = 0;
	rep->stopped = "the rates past the knee";
	assert_int_equal(cap_write(&cfg, rep, &charts, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/capacity.json", dir);
	s = slurp(path);
	j = json_loads(s, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "knee_concurrency")), 4);
	assert_true(json_real_value(json_object_get(j, "knee_rate")) == 3.5);
	assert_int_equal(json_array_size(json_object_get(j, "concurrency_ramp")), 5);
	json_decref(j);
	free(s);
	snprintf(path, sizeof(path), "%s/capacity.md", dir);
	s = slurp(path);
	assert_non_null(strstr(s, "| **knee** 4 users | 400 / 480 / 600 |"));
	assert_non_null(strstr(s, "**4 concurrent users**"));
	free(s);
	snprintf(path, sizeof(path), "%s/charts.gp", dir);
	s = slurp(path);
	assert_non_null(strstr(s, "set arrow from 4, graph 0 to 4, graph 1"));
	assert_non_null(strstr(s, "500 with lines dt 3 lw 2 title 'p95 target'"));
	free(s);
	if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
		static const char *const png[] = { "ttft.png", "itl.png", "throughput.png", "rates.png" };

		assert_int_equal(charts, 1);
		for (int i = 0; i < 4; i++) {
			unsigned char magic[8] = { 0 };
			FILE *f;

			snprintf(path, sizeof(path), "%s/%s", dir, png[i]);
			f = fopen(path, "rb");
			assert_non_null(f);
			assert_int_equal(fread(magic, 1, 8, f), 8);
			fclose(f);
			assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
		}
	}
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	assert_int_equal(system(path), 0);
	free(rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_point),
		cmocka_unit_test(test_knee),
		cmocka_unit_test(test_report),
	};

	return cmocka_run_group_tests_name("bench/capacity", tests, NULL, NULL);
}
