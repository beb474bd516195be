/*
 * sluice_bench.c - `sluice-bench`, the operator's load tool (installed):
 *
 *   sluice-bench capacity --url URL --key KEY --model NAME [--cacert FILE |
 *       --insecure] --ttft-p95 MS --itl-p95 MS --out DIR [workload] [bounds]
 *     finds the knee (bench/capacity.h) and writes the report to DIR;
 *   sluice-bench run --url URL --key KEY --model NAME (--concurrency N |
 *       --rate R) [--batch-clients B] [--seconds S] [--json FILE] ...
 *     one level (closed or open loop), one table row per class, with
 *     goodput against the targets.
 *
 * Only loopback addresses unless the operator names the host with
 * --allow HOST: a load tool must not be pointed at someone else's service
 * by a typo.  The key may come from SLUICE_KEY instead of the command
 * line.  docs/capacity.md.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "bench/capacity.h"
#include "bench/loadgen.h"

#define SB_ALLOW_MAX 16

struct sb_opts {
	struct lg_target t;
	struct lg_workload w;
	struct cap_config cap;
	const char *url, *allow[SB_ALLOW_MAX];
	int n_allow;
	int concurrency, batch_clients;
	double rate, seconds;
	const char *json, *label;
	char host[256];
};

static void sb_usage(void)
{
	fprintf(stderr,
		"usage: sluice-bench capacity --url URL --key KEY --model NAME --ttft-p95 MS "
		"--itl-p95 MS --out DIR [options]\n"
		"       sluice-bench run --url URL --key KEY --model NAME (--concurrency N | --rate R) "
		"[options]\n"
		"  --cacert FILE | --insecure     verify the gateway against FILE / not at all\n"
		"  --allow HOST                   a non-loopback host the operator allows\n"
		"  --prompt-words MIN[:MAX]       prompt length (default 16:48 words)\n"
		"  --output-tokens MIN[:MAX]      tokens generated (default 32:64)\n"
		"  --shared-prefix F --prefixes N --prefix-words W   share of requests that start\n"
		"                                 with one of N shared prefixes of W words\n"
		"  --batch-share F                share of the requests sent as batch\n"
		"  --batch-clients N              closed-loop batch users beside (a batch flood)\n"
		"  --seed N                       the workload's draws\n"
		"  capacity: --level-seconds S (20) --warmup S (4) --drain-seconds S (60)\n"
		"            --max-seconds S (900) --max-requests N (100000) --max-concurrency N (64)\n"
		"            --min-requests N (10: fewer answers fail a level; a level runs on, up\n"
		"            to 3x its seconds, until twice as many started)\n"
		"  run:      --seconds S (30) --warmup S (5) --json FILE --label TEXT\n"
		"  SLUICE_KEY in the environment stands for --key.\n");
}

static int sb_range(const char *s, uint32_t *lo, uint32_t *hi)
{
	char *e;
	unsigned long a = strtoul(s, &e, 10), b = a;

	if (e == s)
		return -1;
	if (*e == ':') {
		const char *s2 = e + 1;

		b = strtoul(s2, &e, 10);
		if (e == s2)
			return -1;
	}
	if (*e || a > b || b > 100000)
		return -1;
	*lo = (uint32_t)a;
	*hi = (uint32_t)b;
	return 0;
}

static int sb_url(struct sb_opts *o)
{
	const char *p = o->url, *h, *e;
	size_t n;

	if (strncmp(p, "https://", 8) == 0) {
		o->t.tls = 1;
		o->t.port = 443;
		p += 8;
	} else if (strncmp(p, "http://", 7) == 0) {
		o->t.port = 80;
		p += 7;
	} else {
		fprintf(stderr, "sluice-bench: --url: expected https://HOST[:PORT] or http://..., "
			"found \"%s\"\n", o->url);
		return -1;
	}
	h = p;
	if (*h == '[') {
		e = strchr(h, ']');
		if (!e)
			return -1;
		h++;
		n = (size_t)(e - h);
		e++;
	} else {
		e = h + strcspn(h, ":/");
		n = (size_t)(e - h);
	}
	if (n == 0 || n >= sizeof(o->host))
		return -1;
	memcpy(o->host, h, n);
	o->host[n] = '\0';
	if (*e == ':')
		o->t.port = atoi(e + 1);
	if (o->t.port <= 0 || o->t.port > 65535)
		return -1;
	o->t.host = o->host;
	return 0;
}

/* 0 when every address of the host is loopback or the operator allowed it */
static int sb_allowed(const struct sb_opts *o)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL, *a;
	int ok = 1;

	for (int i = 0; i < o->n_allow; i++)
		if (strcasecmp(o->allow[i], o->host) == 0)
			return 0;
	if (getaddrinfo(o->host, NULL, &hints, &ai) != 0 || !ai) {
		fprintf(stderr, "sluice-bench: cannot resolve %s\n", o->host);
		return -1;
	}
	for (a = ai; a; a = a->ai_next) {
		if (a->ai_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)a->ai_addr;

			ok &= (ntohl(s->sin_addr.s_addr) >> 24) == 127;
		} else if (a->ai_family == AF_INET6) {
			const struct sockaddr_in6 *s = (const void *)a->ai_addr;

			ok &= IN6_IS_ADDR_LOOPBACK(&s->sin6_addr);
		}
	}
	freeaddrinfo(ai);
	if (!ok)
		fprintf(stderr, "sluice-bench: %s is not a loopback address: name it with --allow %s "
			"to load it\n", o->host, o->host);
	return ok ? 0 : -1;
}

/* Parses one option at argv[*i]; 0, or -1 for an unknown or bad one. */
static int sb_opt(struct sb_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;

#define SB_ARG(name) (strcmp(a, name) == 0 && v && ++*i)
	if (strcmp(a, "--insecure") == 0)
		o->t.insecure = 1;
	else if (SB_ARG("--url"))
		o->url = v;
	else if (SB_ARG("--key"))
		o->t.key = v;
	else if (SB_ARG("--model"))
		o->t.model = v;
	else if (SB_ARG("--cacert"))
		o->t.cacert = v;
	else if (SB_ARG("--allow") && o->n_allow < SB_ALLOW_MAX)
		o->allow[o->n_allow++] = v;
	else if (SB_ARG("--prompt-words"))
		return sb_range(v, &o->w.prompt_words_min, &o->w.prompt_words_max);
	else if (SB_ARG("--output-tokens"))
		return sb_range(v, &o->w.output_min, &o->w.output_max);
	else if (SB_ARG("--shared-prefix"))
		o->w.shared_prefix = atof(v);
	else if (SB_ARG("--prefixes"))
		o->w.prefixes = (uint32_t)atoi(v);
	else if (SB_ARG("--prefix-words"))
		o->w.prefix_words = (uint32_t)atoi(v);
	else if (SB_ARG("--batch-share"))
		o->w.batch_share = atof(v);
	else if (SB_ARG("--batch-clients"))
		o->batch_clients = atoi(v);
	else if (SB_ARG("--seed"))
		o->w.seed = strtoull(v, NULL, 10);
	else if (SB_ARG("--ttft-p95"))
		o->cap.ttft_target_ms = atof(v);
	else if (SB_ARG("--itl-p95"))
		o->cap.itl_target_ms = atof(v);
	else if (SB_ARG("--level-seconds"))
		o->cap.level_seconds = atof(v);
	else if (SB_ARG("--warmup"))
		o->cap.warmup = atof(v);
	else if (SB_ARG("--drain-seconds"))
		o->cap.drain_seconds = atof(v);
	else if (SB_ARG("--max-seconds"))
		o->cap.max_seconds = atof(v);
	else if (SB_ARG("--max-requests"))
		o->cap.max_requests = strtoull(v, NULL, 10);
	else if (SB_ARG("--min-requests"))
		o->cap.min_ok = strtoull(v, NULL, 10);
	else if (SB_ARG("--max-concurrency"))
		o->cap.max_concurrency = atoi(v);
	else if (SB_ARG("--out"))
		o->cap.out_dir = v;
	else if (SB_ARG("--describe"))
		o->cap.describe = v;
	else if (SB_ARG("--concurrency"))
		o->concurrency = atoi(v);
	else if (SB_ARG("--rate"))
		o->rate = atof(v);
	else if (SB_ARG("--seconds"))
		o->seconds = atof(v);
	else if (SB_ARG("--json"))
		o->json = v;
	else if (SB_ARG("--label"))
		o->label = v;
	else
		return -1;
#undef SB_ARG
	return 0;
}

static int sb_check(struct sb_opts *o, int capacity)
{
	const char *bad = NULL;

	if (!o->t.key)
		o->t.key = getenv("SLUICE_KEY");
	if (!o->url || !o->t.key || !o->t.model)
		bad = "--url, --key (or SLUICE_KEY) and --model are required";
	else if (capacity && (o->cap.ttft_target_ms <= 0 || o->cap.itl_target_ms <= 0 ||
			      !o->cap.out_dir))
		bad = "capacity needs --ttft-p95 MS, --itl-p95 MS and --out DIR";
	else if (!capacity && (o->concurrency > 0) == (o->rate > 0) && o->batch_clients <= 0)
		bad = "run needs one of --concurrency N or --rate R (or --batch-clients alone)";
	else if (o->w.shared_prefix < 0 || o->w.shared_prefix > 1 || o->w.batch_share < 0 ||
		 o->w.batch_share > 1)
		bad = "--shared-prefix and --batch-share: expected a share in [0, 1]";
	else if ((capacity ? o->cap.level_seconds : o->seconds) <= o->cap.warmup)
		bad = "the level must last longer than its warm-up";
	else if (o->concurrency < 0 || o->batch_clients < 0 || o->concurrency > 4096 ||
		 o->batch_clients > 4096 || o->cap.max_concurrency < 1)
		bad = "concurrency: expected 1..4096";
	if (bad) {
		fprintf(stderr, "sluice-bench: %s\n", bad);
		return -1;
	}
	if (sb_url(o) != 0) {
		fprintf(stderr, "sluice-bench: --url: cannot parse \"%s\"\n", o->url);
		return -1;
	}
	return sb_allowed(o);
}

static void sb_row(const char *label, const char *klass, struct lg_class *k, double window)
{
	unsigned long long n = 0, refused = 0;

	for (int s = 0; s < LG_STATUS_MAX; s++)
		n += k->status[s];
	refused = k->status[429] + k->status[503];
	printf("| %s | %s | %llu | %llu | %llu | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %.0f / %.0f "
	       "| %.1f | %.1f | %.0f %% |\n", label, klass, n, (unsigned long long)k->ok, refused,
	       lg_pct(&k->ttft, 50), lg_pct(&k->ttft, 95), lg_pct(&k->ttft, 99),
	       lg_pct(&k->req_itl, 50), lg_pct(&k->req_itl, 95), lg_pct(&k->req_itl, 99),
	       lg_pct(&k->itl, 95), lg_pct(&k->itl, 99), window > 0 ? (double)k->tokens / window : 0,
	       window > 0 ? (double)k->good_tokens / window : 0,
	       n ? 100.0 * (double)k->met / (double)n : 0);
}

static void sb_progress(void *ctx, const char *line)
{
	static int n;

	(void)ctx;
	if (isatty(2))
		fprintf(stderr, "\r\033[K[run] %s", line);
	else if (++n % 10 == 0)
		fprintf(stderr, "[run] %s\n", line);
	fflush(stderr);
}

static int sb_run(struct sb_opts *o)
{
	struct lg_result r;
	char err[256], label[64];
	struct lg_level lv = {
		.concurrency = o->concurrency, .rate = o->rate, .batch_clients = o->batch_clients,
		.seconds = o->seconds, .warmup = o->cap.warmup, .drain_seconds = o->cap.drain_seconds,
		.max_requests = o->cap.max_requests, .max_connections = 1024,
		.ttft_target_ms = o->cap.ttft_target_ms, .itl_target_ms = o->cap.itl_target_ms,
		.label = label, .progress = sb_progress,
	};

	if (o->label)
		snprintf(label, sizeof(label), "%s", o->label);
	else if (o->rate > 0)
		snprintf(label, sizeof(label), "%.2f req/s", o->rate);
	else
		snprintf(label, sizeof(label), "%d users", o->concurrency);
	if (lg_run(&o->t, &o->w, &lv, &r, err, sizeof(err)) != 0) {
		fprintf(stderr, "\nsluice-bench: %s\n", err);
		return 1;
	}
	if (isatty(2))
		fprintf(stderr, "\r\033[K");
	printf("| run | class | measured | ok | refused (429/503) | TTFT p50 / p95 / p99 (ms) | "
	       "TPOT p50 / p95 / p99 (ms) | every gap p95 / p99 (ms) | tokens/s | goodput tok/s | "
	       "within target |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
	sb_row(label, "interactive", &r.cls[0], r.window_s);
	if (o->batch_clients > 0 || o->w.batch_share > 0)
		sb_row(label, "batch", &r.cls[1], r.window_s);
	printf("window %.1f s, offered %.2f req/s, lost %llu, unfinished %llu\n", r.window_s,
	       r.offered_rate, (unsigned long long)r.lost, (unsigned long long)r.unfinished);
	if (o->json) {
		struct cap_point p;
		FILE *f = fopen(o->json, "w");

		cap_point_from(&p, &r, &o->cap, o->concurrency, o->rate);
		if (!f) {
			perror(o->json);
		} else {
			fprintf(f, "{\"label\": \"%s\", \"concurrency\": %d, \"rate\": %.3f, "
				"\"batch_clients\": %d, \"ttft_ms\": {\"p50\": %.1f, \"p95\": %.1f, "
				"\"p99\": %.1f}, \"tpot_ms\": {\"p50\": %.1f, \"p95\": %.1f, \"p99\": %.1f},"
				" \"itl_ms\": {\"p50\": %.1f, \"p95\": %.1f, \"p99\": %.1f},"
				" \"tokens_per_s\": %.2f, \"goodput_tokens_per_s\": %.2f, \"ok\": %llu, "
				"\"errors\": %llu, \"met_share\": %.4f}\n", label, o->concurrency, o->rate,
				o->batch_clients, p.ttft[0], p.ttft[1], p.ttft[2], p.tpot[0], p.tpot[1],
				p.tpot[2], p.itl[0], p.itl[1],
				p.itl[2], p.tok_s, p.goodput, p.ok, p.errors, p.met_share);
			fclose(f);
		}
	}
	lg_result_free(&r);
	return 0;
}

static int sb_capacity(struct sb_opts *o)
{
	struct cap_report *rep = calloc(1, sizeof(*rep));
	char err[256];
	int charts = 0, rc = 1;

	if (!rep)
		return 1;
	if (cap_search(&o->t, &o->w, &o->cap, rep, err, sizeof(err)) != 0) {
		fprintf(stderr, "\nsluice-bench: %s\n", err);
		goto out;
	}
	if (cap_write(&o->cap, rep, &charts, err, sizeof(err)) != 0) {
		fprintf(stderr, "sluice-bench: %s\n", err);
		goto out;
	}
	if (rep->knee >= 0)
		printf("knee: %d concurrent users (%.2f req/s, %.1f tokens/s)",
		       rep->ramp[rep->knee].concurrency, rep->ramp[rep->knee].req_s,
		       rep->ramp[rep->knee].tok_s);
	else
		printf("knee: none (one user at a time misses a target)");
	if (rep->knee_rate >= 0)
		printf("; open loop up to %.2f req/s", rep->rates[rep->knee_rate].rate);
	printf("\nreport: %s/capacity.md%s\n", o->cap.out_dir, charts ? " (with charts)" : "");
	rc = 0;
out:
	free(rep);
	return rc;
}

int main(int argc, char **argv)
{
	struct sb_opts o = {
		.w = { .prompt_words_min = 16, .prompt_words_max = 48, .output_min = 32,
		       .output_max = 64, .prefixes = 4, .prefix_words = 64, .seed = 1 },
		.cap = { .level_seconds = 20, .warmup = 4, .drain_seconds = 60, .max_seconds = 900,
			 .max_requests = 100000, .max_concurrency = 64, .max_error_share = 0.01,
			 .min_ok = 10 },
		.seconds = 30,
	};
	int capacity;

	if (argc < 2 || (strcmp(argv[1], "capacity") != 0 && strcmp(argv[1], "run") != 0)) {
		sb_usage();
		return 2;
	}
	capacity = strcmp(argv[1], "capacity") == 0;
	if (!capacity)
		o.cap.warmup = 5;
	for (int i = 2; i < argc; i++) {
		if (sb_opt(&o, argc, argv, &i) != 0) {
			fprintf(stderr, "sluice-bench: bad or unknown option \"%s\"\n", argv[i]);
			sb_usage();
			return 2;
		}
	}
	o.cap.batch_clients = o.batch_clients;
	if (sb_check(&o, capacity) != 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	return capacity ? sb_capacity(&o) : sb_run(&o);
}
