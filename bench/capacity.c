/*
 * capacity.c - the knee search and its report (see capacity.h).
 *
 * Ramp: closed-loop levels 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, ...
 * up to max_concurrency; it ends after two failing levels (the second
 * draws the curve past the knee) or when a p95 is over three times its
 * target.  Rates: open-loop Poisson arrivals at 0.25, 0.4, 0.55, 0.7,
 * 0.85, 1.0, 1.15, 1.3, 1.5, 1.75, 2, 2.5 and 3 times the knee's answered
 * requests per second (random arrivals bunch up, and open-loop requests
 * never wait for each other: the rate that holds a p95 may be under or
 * over the closed loop's throughput), ending the same way.  The knee is the last level of the leading run that holds
 * both targets with at most max_error_share errors: a level that holds
 * after one that failed is noise, not capacity.
 */
#include "bench/capacity.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static const int cap_levels[] = { 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256 };
static const double cap_factors[] = { 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.15, 1.3, 1.5, 1.75,
				       2.0, 2.5, 3.0 };

void cap_point_from(struct cap_point *p, struct lg_result *r, const struct cap_config *cfg,
		    int concurrency, double rate)
{
	struct lg_class *k = &r->cls[0];
	unsigned long long measured = 0;
	double e2e_mean_s;

	memset(p, 0, sizeof(*p));
	p->concurrency = concurrency;
	p->rate = rate;
	p->ttft[0] = lg_pct(&k->ttft, 50);
	p->ttft[1] = lg_pct(&k->ttft, 95);
	p->ttft[2] = lg_pct(&k->ttft, 99);
	p->tpot[0] = lg_pct(&k->req_itl, 50);
	p->tpot[1] = lg_pct(&k->req_itl, 95);
	p->tpot[2] = lg_pct(&k->req_itl, 99);
	p->itl[0] = lg_pct(&k->itl, 50);
	p->itl[1] = lg_pct(&k->itl, 95);
	p->itl[2] = lg_pct(&k->itl, 99);
	p->e2e_p50 = lg_pct(&k->e2e, 50);
	p->e2e_p95 = lg_pct(&k->e2e, 95);
	e2e_mean_s = lg_mean(&k->e2e) / 1e3;
	for (int s = 0; s < LG_STATUS_MAX; s++)
		measured += k->status[s];
	p->ok = k->ok;
	p->errors = measured - k->ok;
	if (r->window_s > 0) {
		p->tok_s = (double)k->tokens / r->window_s;
		p->req_s = (double)k->ok / r->window_s;
		p->goodput = (double)k->good_tokens / r->window_s;
	}
	/* per user: over the users (closed loop) or the mean in flight,
	 * Little's law (open loop) */
	if (concurrency > 0)
		p->tok_s_user = p->tok_s / concurrency;
	else if (p->req_s * e2e_mean_s > 0)
		p->tok_s_user = p->tok_s / (p->req_s * e2e_mean_s);
	p->met_share = measured ? (double)k->met / (double)measured : 0;
	p->prompt_tokens = k->ok ? (double)k->prompt_tokens / (double)k->ok : 0;
	p->pass = p->ok >= cfg->min_ok && p->ttft[1] <= cfg->ttft_target_ms &&
		  (cfg->itl_target_ms <= 0 || p->tpot[1] <= cfg->itl_target_ms) &&
		  (double)p->errors <= cfg->max_error_share * (double)(measured ? measured : 1) &&
		  r->lost == 0;
}

int cap_knee(const struct cap_point *p, size_t n)
{
	int k = -1;

	for (size_t i = 0; i < n && p[i].pass; i++)
		k = (int)i;
	return k;
}

/* ---- the search ------------------------------------------------------- */

/* a line rewritten every second on a terminal; every 10 s into a log */
static void cap_progress(void *ctx, const char *line)
{
	static int tty = -1, n;

	(void)ctx;
	if (tty < 0)
		tty = isatty(2);
	if (tty)
		fprintf(stderr, "\r\033[K[capacity] %s", line);
	else if (++n % 10 == 0)
		fprintf(stderr, "[capacity] %s\n", line);
	fflush(stderr);
}

static int cap_level(const struct lg_target *t, const struct lg_workload *w,
		     const struct cap_config *cfg, int conc, double rate, struct cap_point *p,
		     unsigned long long left, char *err, size_t err_len, int warm)
{
	char label[64];
	struct lg_result r;
	struct lg_level lv = {
		.concurrency = conc, .rate = rate, .batch_clients = cfg->batch_clients,
		.seconds = cfg->level_seconds, .warmup = cfg->warmup,
		.drain_seconds = cfg->drain_seconds, .max_requests = left,
		.min_requests = warm ? 0 : cfg->min_ok * 2, .max_seconds = 3 * cfg->level_seconds,
		.max_connections = 1024, .ttft_target_ms = cfg->ttft_target_ms,
		.itl_target_ms = cfg->itl_target_ms, .label = label,
		.progress = cap_progress,
	};

	if (warm)
		snprintf(label, sizeof(label), "warm-up, 1 user (not reported)");
	else if (conc)
		snprintf(label, sizeof(label), "concurrency %d", conc);
	else
		snprintf(label, sizeof(label), "rate %.2f/s", rate);
	if (lg_run(t, w, &lv, &r, err, err_len) != 0)
		return -1;
	cap_point_from(p, &r, cfg, conc, rate);
	fprintf(stderr, "%s[capacity] %s: p95 TTFT %.0f ms, p95 TPOT %.0f ms (every gap %.0f), "
		"%.1f tok/s, %llu ok, %llu errors: %s\n", isatty(2) ? "\r\033[K" : "", label,
		p->ttft[1], p->tpot[1], p->itl[1], p->tok_s, p->ok,
		p->errors, p->pass ? "holds" : "misses");
	lg_result_free(&r);
	return 0;
}

/* 1 when the search may run one more level */
static int cap_budget(const struct cap_config *cfg, int64_t t0, unsigned long long used,
		      struct cap_report *rep)
{
	double el = (double)(cm_mono_ns() - t0) / 1e9;

	if (el + cfg->level_seconds + 10 > cfg->max_seconds) {
		rep->stopped = "the time budget (--max-seconds)";
		return 0;
	}
	if (cfg->max_requests && used >= cfg->max_requests) {
		rep->stopped = "the request budget (--max-requests)";
		return 0;
	}
	return 1;
}

/* 1 when a ramp (or rate) phase has seen enough past its knee */
static int cap_past(const struct cap_point *p, size_t n, const struct cap_config *cfg)
{
	size_t fails = 0;

	for (size_t i = 0; i < n; i++)
		fails += !p[i].pass;
	if (fails >= 2)
		return 1;
	return n && (p[n - 1].ttft[1] > 3 * cfg->ttft_target_ms ||
		     (cfg->itl_target_ms > 0 && p[n - 1].tpot[1] > 3 * cfg->itl_target_ms));
}

int cap_search(const struct lg_target *t, const struct lg_workload *w,
	       const struct cap_config *cfg, struct cap_report *rep, char *err, size_t err_len)
{
	int64_t t0 = cm_mono_ns();
	unsigned long long used = 0;
	double base;

	memset(rep, 0, sizeof(*rep));
	*err = '\0';
	rep->knee = rep->knee_rate = -1;
	rep->stopped = "the rates past the knee";
	/* the first requests meet a cold model (pages of weights not yet
	 * read): one user for the warm-up, not measured */
	{
		struct cap_point warm;

		if (cap_level(t, w, cfg, 1, 0, &warm, 0, err, err_len, 1) != 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(cap_levels) / sizeof(cap_levels[0]); i++) {
		struct cap_point *p = &rep->ramp[rep->n_ramp];

		if (cap_levels[i] > cfg->max_concurrency) {
			rep->stopped = "--max-concurrency";
			break;
		}
		if (!cap_budget(cfg, t0, used, rep))
			break;
		if (cap_level(t, w, cfg, cap_levels[i], 0, p,
			      cfg->max_requests ? cfg->max_requests - used : 0, err, err_len, 0) != 0)
			break;
		used += p->ok + p->errors;
		rep->n_ramp++;
		if (cap_past(rep->ramp, rep->n_ramp, cfg))
			break;
	}
	if (rep->n_ramp == 0) {
		if (!*err)
			snprintf(err, err_len, "no level could run within the budget");
		return -1;
	}
	rep->knee = cap_knee(rep->ramp, rep->n_ramp);
	if (rep->knee < 0) {
		rep->stopped = "not even one request at a time holds the targets";
		return 0;
	}
	base = rep->ramp[rep->knee].req_s;
	for (size_t i = 0; i < sizeof(cap_factors) / sizeof(cap_factors[0]) && base > 0; i++) {
		struct cap_point *p = &rep->rates[rep->n_rates];

		if (!cap_budget(cfg, t0, used, rep))
			break;
		if (cap_level(t, w, cfg, 0, base * cap_factors[i], p,
			      cfg->max_requests ? cfg->max_requests - used : 0, err, err_len, 0) != 0)
			break;
		used += p->ok + p->errors;
		rep->n_rates++;
		if (cap_past(rep->rates, rep->n_rates, cfg))
			break;
	}
	rep->knee_rate = cap_knee(rep->rates, rep->n_rates);
	return 0;
}

/* ---- the report ------------------------------------------------------- */

static void cap_json_points(FILE *f, const char *name, const struct cap_point *p, size_t n)
{
	fprintf(f, "  \"%s\": [\n", name);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "    {\"concurrency\": %d, \"rate\": %.4f, \"ttft_ms\": {\"p50\": %.1f, "
			"\"p95\": %.1f, \"p99\": %.1f}, \"tpot_ms\": {\"p50\": %.1f, \"p95\": %.1f, "
			"\"p99\": %.1f}, \"itl_ms\": {\"p50\": %.1f, \"p95\": %.1f, "
			"\"p99\": %.1f}, \"e2e_ms\": {\"p50\": %.1f, \"p95\": %.1f}, \"tokens_per_s\": "
			"%.2f, \"tokens_per_s_per_user\": %.2f, \"requests_per_s\": %.3f, "
			"\"goodput_tokens_per_s\": %.2f, \"met_share\": %.4f, \"prompt_tokens_mean\": "
			"%.1f, \"ok\": %llu, \"errors\": %llu, \"holds\": %s}%s\n",
			p[i].concurrency, p[i].rate, p[i].ttft[0], p[i].ttft[1], p[i].ttft[2],
			p[i].tpot[0], p[i].tpot[1], p[i].tpot[2], p[i].itl[0], p[i].itl[1], p[i].itl[2], p[i].e2e_p50, p[i].e2e_p95, p[i].tok_s,
			p[i].tok_s_user, p[i].req_s, p[i].goodput, p[i].met_share, p[i].prompt_tokens,
			p[i].ok, p[i].errors, p[i].pass ? "true" : "false", i + 1 < n ? "," : "");
	fprintf(f, "  ],\n");
}

static int cap_json(const struct cap_config *cfg, const struct cap_report *rep, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "{\n  \"targets\": {\"ttft_p95_ms\": %.0f, \"itl_p95_ms\": %.0f},\n",
		cfg->ttft_target_ms, cfg->itl_target_ms);
	fprintf(f, "  \"workload\": \"%s\",\n", cfg->describe ? cfg->describe : "");
	cap_json_points(f, "concurrency_ramp", rep->ramp, rep->n_ramp);
	cap_json_points(f, "arrival_rates", rep->rates, rep->n_rates);
	fprintf(f, "  \"knee_concurrency\": %d,\n  \"knee_rate\": %.4f,\n  \"stopped_at\": \"%s\"\n}\n",
		rep->knee >= 0 ? rep->ramp[rep->knee].concurrency : 0,
		rep->knee_rate >= 0 ? rep->rates[rep->knee_rate].rate : 0, rep->stopped);
	return fclose(f) == 0 ? 0 : -1;
}

static void cap_md_rows(FILE *f, const struct cap_point *p, size_t n, int knee)
{
	fprintf(f, "| level | TTFT p50 / p95 / p99 (ms) | TPOT p50 / p95 / p99 (ms) | every gap p95 / "
		"p99 (ms) | e2e p50 / p95 (ms) | tokens/s | tokens/s per user | req/s | goodput tok/s "
		"| within target | ok / errors | holds |\n"
		"|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < n; i++) {
		char lvl[48];

		if (p[i].concurrency)
			snprintf(lvl, sizeof(lvl), "%d users", p[i].concurrency);
		else
			snprintf(lvl, sizeof(lvl), "%.2f req/s", p[i].rate);
		fprintf(f, "| %s%s | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.0f / %.0f | %.0f / %.0f "
			"| %.1f | %.2f | %.2f | %.1f | %.0f %% | %llu / %llu | %s |\n",
			(int)i == knee ? "**knee** " : "", lvl, p[i].ttft[0], p[i].ttft[1], p[i].ttft[2],
			p[i].tpot[0], p[i].tpot[1], p[i].tpot[2], p[i].itl[1], p[i].itl[2], p[i].e2e_p50, p[i].e2e_p95, p[i].tok_s, p[i].tok_s_user,
			p[i].req_s, p[i].goodput, p[i].met_share * 100, p[i].ok, p[i].errors,
			p[i].pass ? "yes" : "no");
	}
}

static int cap_md(const struct cap_config *cfg, const struct cap_report *rep, const char *path,
		  int charts)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "Targets: p95 TTFT <= %.0f ms, p95 inter-token latency (each request's mean "
		"gap, TPOT) <= %.0f ms. %s\n\n", cfg->ttft_target_ms,
		cfg->itl_target_ms, cfg->describe ? cfg->describe : "");
	if (rep->knee >= 0)
		fprintf(f, "Knee: **%d concurrent users** (%.2f req/s, %.1f tokens/s)",
			rep->ramp[rep->knee].concurrency, rep->ramp[rep->knee].req_s,
			rep->ramp[rep->knee].tok_s);
	else
		fprintf(f, "Knee: none (one user at a time misses a target)");
	if (rep->knee_rate >= 0)
		fprintf(f, "; open loop, the targets hold up to **%.2f req/s** of Poisson arrivals",
			rep->rates[rep->knee_rate].rate);
	fprintf(f, ". Stopped at %s.\n\nClosed loop (each user sends its next request when "
		"the last one ended):\n\n", rep->stopped);
	cap_md_rows(f, rep->ramp, rep->n_ramp, rep->knee);
	if (rep->n_rates) {
		fprintf(f, "\nOpen loop (Poisson arrivals; TTFT from the arrival):\n\n");
		cap_md_rows(f, rep->rates, rep->n_rates, rep->knee_rate);
	}
	if (charts)
		fprintf(f, "\n![TTFT](ttft.png)\n![ITL](itl.png)\n![throughput](throughput.png)\n"
			"![rates](rates.png)\n");
	return fclose(f) == 0 ? 0 : -1;
}

static int cap_dat(const struct cap_point *p, size_t n, const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "# x ttft50 ttft95 ttft99 tpot50 tpot95 tpot99 tok_s tok_s_user goodput "
		"gap95\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%g %.2f %.2f %.2f %.2f %.2f %.2f %.3f %.3f %.3f %.2f\n",
			p[i].concurrency ? (double)p[i].concurrency : p[i].rate, p[i].ttft[0],
			p[i].ttft[1], p[i].ttft[2], p[i].tpot[0], p[i].tpot[1], p[i].tpot[2], p[i].tok_s,
			p[i].tok_s_user, p[i].goodput, p[i].itl[1]);
	return fclose(f) == 0 ? 0 : -1;
}

/* One latency chart: p50/p95/p99 of columns c..c+2 with the target and
 * the knee drawn. */
static void cap_gp_latency(FILE *f, const char *png, const char *what, int col, double target,
			   double knee, const char *xlabel, const char *dat)
{
	fprintf(f, "set output '%s'\nset title '%s against %s'\nset xlabel '%s'\n"
		"set ylabel 'ms'\nunset arrow\n", png, what, xlabel, xlabel);
	if (knee > 0)
		fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb 'black'\n"
			"set label 1 'knee' at %g, graph 0.95 offset 0.5,0\n", knee, knee, knee);
	else
		fprintf(f, "unset label 1\n");
	fprintf(f, "plot '%s' using 1:%d with linespoints title 'p50', '' using 1:%d with "
		"linespoints title 'p95', '' using 1:%d with linespoints title 'p99', %g with lines "
		"dt 3 lw 2 title 'p95 target'\n", dat, col, col + 1, col + 2, target);
}

static int cap_gnuplot(const struct cap_config *cfg, const struct cap_report *rep,
		       const char *dir, int *charts)
{
	char path[4096];
	double knee = rep->knee >= 0 ? rep->ramp[rep->knee].concurrency : 0;
	double knee_r = rep->knee_rate >= 0 ? rep->rates[rep->knee_rate].rate : 0;
	FILE *f;
	int st;

	snprintf(path, sizeof(path), "%s/charts.gp", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "# gnuplot charts.gp (in this folder): the PNGs of capacity.md\n"
		"set terminal pngcairo size 900,540 noenhanced\nset grid\nset key top left\n"
		"set logscale x 2\n");
	cap_gp_latency(f, "ttft.png", "TTFT", 2, cfg->ttft_target_ms, knee, "concurrent users",
		       "ramp.dat");
	cap_gp_latency(f, "itl.png", "Inter-token latency (per-request mean gap, TPOT)", 5,
		       cfg->itl_target_ms, knee, "concurrent users", "ramp.dat");
	fprintf(f, "set output 'throughput.png'\nset title 'Throughput against concurrency'\n"
		"set ylabel 'tokens/s'\nset y2label 'tokens/s per user'\nset y2tics\n"
		"plot 'ramp.dat' using 1:8 with linespoints title 'tokens/s', '' using 1:10 with "
		"linespoints title 'goodput (within both targets)', '' using 1:9 axes x1y2 with "
		"linespoints title 'tokens/s per user (right)'\nunset y2tics\nunset y2label\n"
		"unset logscale x\n");
	if (rep->n_rates) {
		fprintf(f, "set output 'rates.png'\nset title 'p95 latency against the arrival rate'\n"
			"set xlabel 'requests/s (Poisson)'\nset ylabel 'ms'\nunset arrow\n");
		if (knee_r > 0)
			fprintf(f, "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2\n", knee_r,
				knee_r);
		fprintf(f, "plot 'rates.dat' using 1:3 with linespoints title 'TTFT p95', '' using 1:6 "
			"with linespoints title 'TPOT p95', %g with lines dt 3 title 'TTFT target', %g "
			"with lines dt 4 title 'TPOT target'\n", cfg->ttft_target_ms, cfg->itl_target_ms);
	}
	if (fclose(f) != 0)
		return -1;
	*charts = 0;
	snprintf(path, sizeof(path), "cd '%s' && gnuplot charts.gp 2>gnuplot.log", dir);
	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		fprintf(stderr, "[capacity] gnuplot not found: charts.gp written, no PNG\n");
		return 0;
	}
	st = system(path);
	*charts = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!*charts)
		fprintf(stderr, "[capacity] gnuplot failed (%s/gnuplot.log)\n", dir);
	return 0;
}

int cap_write(const struct cap_config *cfg, const struct cap_report *rep, int *charts,
	      char *err, size_t err_len)
{
	char path[4096];
	const char *dir = cfg->out_dir;

	*charts = 0;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		snprintf(err, err_len, "%s: %s", dir, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "%s/capacity.json", dir);
	if (cap_json(cfg, rep, path) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/ramp.dat", dir);
	if (cap_dat(rep->ramp, rep->n_ramp, path) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/rates.dat", dir);
	if (cap_dat(rep->rates, rep->n_rates, path) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/charts.gp", dir);
	if (cap_gnuplot(cfg, rep, dir, charts) != 0)
		goto fail;
	snprintf(path, sizeof(path), "%s/capacity.md", dir);
	if (cap_md(cfg, rep, path, *charts) != 0)
		goto fail;
	return 0;
fail:
	snprintf(err, err_len, "%s: cannot write: %s", path, strerror(errno));
	return -1;
}
