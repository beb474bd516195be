/*
 * serve.c - `bench-serve`: throughput and latency of `sluice-worker serve`
 * under N concurrent streams, driven over proto/ on its Unix socket.
 *
 *   bench-serve --model PATH [--threads 2] [--streams 1,4,16,64] [--gen 64]
 *               [--prompt-words 24] [--rounds 1] [--worker BIN]
 *               [--kv-bytes 512MiB] [--step-tokens 512] [--temperature 0]
 *               [--constraint json_object | json_schema:FILE | grammar:FILE]
 *               [--expert-cache DIR|off]
 *   bench-serve --socket PATH [...]          (a worker already running)
 *
 * Without --socket it writes a config into a temp directory, starts the
 * worker binary on it (stderr to <tmp>/worker.log) and stops it at the
 * end (--expert-cache: the worker's expert_cache_dir, or `off` for
 * expert_cache false; default the worker's own default).  For each
 * stream count N it opens one connection, keeps N requests
 * in flight (each stream submits --rounds requests one after the other,
 * greedy, --gen tokens with IGNORE_EOS, prompts of slightly different
 * lengths so no prefix is shared across streams), and prints: generated
 * tokens/s over the level's wall time (prefills included), the total
 * decode tokens/s of the steady state (tokens received while all N
 * streams are decoding: from the last stream's first token to the first
 * stream's end; needs --gen well above the prompt cost), per-request
 * inter-token latency p50/p95 (gaps between TOKEN frames divided by the
 * tokens they carry, after the first) and TTFT p50/p95 (SUBMIT sent to
 * first TOKEN received).  When it started the worker it also prints the
 * worker's cpu share over the level (its CPU time / wall x threads, from
 * /proc) and the wall-clock generated tokens/s scaled to a 100% share:
 * on a shared machine that estimate moves far less with the neighbours'
 * load than the raw figures (memory-bandwidth contention still shows).
 * --constraint makes every request structured (docs/structured-outputs.md):
 * run it beside an unconstrained run to see what the masks cost; with
 * --temperature above 0 every token computes its full mask (greedy checks
 * its argmax first).  Requests are seeded (pc_submit_init).
 * The header names model, quantisation, threads
 * and hardware.  Single client thread; the worker does all the compute.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "tests/integration/pclient.h"

#define MAX_STREAMS 256
#define MAX_LEVELS 16

struct opts {
	const char *model, *socket, *worker;
	int threads, gen, prompt_words, rounds;
	int streams[MAX_LEVELS], n_levels;
	const char *kv_bytes;
	const char *xcache; /* --expert-cache: a directory, "off", or NULL (the worker's default) */
	int step_tokens;
	float temperature;
	const char *constraint_arg;
	uint8_t constraint_kind;
	char *constraint;         /* the file's text */
};

struct stream {
	int round;           /* requests finished */
	uint64_t id;         /* request in flight */
	int64_t t_submit, t_last, t_first, t_done;
	int got_first;
	char prompt[4096];
};

struct samples {
	double *v;
	size_t n, cap;
};

static int push(struct samples *s, double x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		double *p = realloc(s->v, cap * sizeof(*p));

		if (!p)
			return -1;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(struct samples *s, double p)
{
	size_t i;

	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(double), cmp_double);
	i = (size_t)(p * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bench-serve (--model PATH | --socket PATH) [--threads N] "
		"[--streams 1,4,16,64] [--gen N] [--prompt-words N] [--rounds N] "
		"[--worker BIN] [--kv-bytes SIZE] [--step-tokens N] [--expert-cache DIR|off]\n");
}

static int parse_streams(const char *s, struct opts *o)
{
	char buf[256], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", s);
	o->n_levels = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int n = atoi(tok);

		if (n < 1 || n > MAX_STREAMS || o->n_levels == MAX_LEVELS)
			return -1;
		o->streams[o->n_levels++] = n;
	}
	return o->n_levels ? 0 : -1;
}

/* json_object, json_schema:FILE or grammar:FILE. */
static int parse_constraint(const char *v, struct opts *o)
{
	const char *file = NULL;
	FILE *f;
	long n;

	o->constraint_arg = v;
	if (!strcmp(v, "json_object")) {
		o->constraint_kind = PROTO_CONSTRAINT_JSON_OBJECT;
		return 0;
	}
	if (!strncmp(v, "json_schema:", 12)) {
		o->constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
		file = v + 12;
	} else if (!strncmp(v, "grammar:", 8)) {
		o->constraint_kind = PROTO_CONSTRAINT_GRAMMAR;
		file = v + 8;
	} else {
		fprintf(stderr, "--constraint: expected json_object, json_schema:FILE or grammar:FILE, "
			"found '%s'\n", v);
		return -1;
	}
	f = fopen(file, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || n > (1 << 20) ||
	    fseek(f, 0, SEEK_SET) != 0 || !(o->constraint = calloc(1, (size_t)n + 1)) ||
	    fread(o->constraint, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "--constraint: cannot read '%s'\n", file);
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->threads = 2;
	o->gen = 64;
	o->prompt_words = 16;
	o->rounds = 1;
	o->kv_bytes = "512MiB";
	o->step_tokens = 512;
	parse_streams("1,4,16,64", o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			return -1;
		if (!strcmp(a, "--model"))
			o->model = v;
		else if (!strcmp(a, "--socket"))
			o->socket = v;
		else if (!strcmp(a, "--worker"))
			o->worker = v;
		else if (!strcmp(a, "--threads"))
			o->threads = atoi(v);
		else if (!strcmp(a, "--gen"))
			o->gen = atoi(v);
		else if (!strcmp(a, "--prompt-words"))
			o->prompt_words = atoi(v);
		else if (!strcmp(a, "--rounds"))
			o->rounds = atoi(v);
		else if (!strcmp(a, "--kv-bytes"))
			o->kv_bytes = v;
		else if (!strcmp(a, "--expert-cache"))
			o->xcache = v;
		else if (!strcmp(a, "--step-tokens"))
			o->step_tokens = atoi(v);
		else if (!strcmp(a, "--temperature"))
			o->temperature = (float)atof(v);
		else if (!strcmp(a, "--constraint")) {
			if (parse_constraint(v, o))
				return -1;
		}
		else if (!strcmp(a, "--streams")) {
			if (parse_streams(v, o))
				return -1;
		} else
			return -1;
		i++;
	}
	if (!o->model && !o->socket)
		return -1;
	if (o->threads < 1 || o->gen < 1 || o->prompt_words < 1 || o->prompt_words > 400 ||
	    o->rounds < 1 || o->step_tokens < 1)
		return -1;
	return 0;
}

/* ---- the worker process -------------------------------------------------- */

static char tmpdir[256];
static pid_t worker_pid = -1;

static int start_worker(const struct opts *o, const char *argv0, char *sock, size_t sock_len)
{
	char cfg[512], log[512], bin[1024], json[8192];
	FILE *f;
	int fd;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/bench-serve-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return -1;
	}
	if (o->worker) {
		snprintf(bin, sizeof(bin), "%s", o->worker);
	} else {
		/* <build>/bench/bench-serve -> <build>/worker/sluice-worker */
		const char *slash = strrchr(argv0, '/');
		int dir = slash ? (int)(slash - argv0) : 1;

		snprintf(bin, sizeof(bin), "%.*s/../worker/sluice-worker", dir,
			 slash ? argv0 : ".");
	}
	snprintf(sock, sock_len, "%s/worker.sock", tmpdir);
	snprintf(cfg, sizeof(cfg), "%s/worker.json", tmpdir);
	snprintf(log, sizeof(log), "%s/worker.log", tmpdir);
	snprintf(json, sizeof(json),
		 "{\"worker\": {\"model\": \"%s\", \"socket\": \"%s\", \"threads\": %d,"
		 " \"kv_cache_bytes\": \"%s\", \"max_running\": %d, \"step_tokens\": %d,"
		 " \"log_level\": \"warn\"%s%s%s}}\n",
		 o->model, sock, o->threads, o->kv_bytes, MAX_STREAMS, o->step_tokens,
		 !o->xcache ? "" : !strcmp(o->xcache, "off") ? ", \"expert_cache\": false"
							    : ", \"expert_cache_dir\": \"",
		 o->xcache && strcmp(o->xcache, "off") ? o->xcache : "",
		 o->xcache && strcmp(o->xcache, "off") ? "\"" : "");
	f = fopen(cfg, "w");
	if (!f || fputs(json, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "bench-serve: cannot write %s\n", cfg);
		return -1;
	}
	worker_pid = fork();
	if (worker_pid < 0)
		return -1;
	if (worker_pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
		execl(bin, bin, "serve", "--config", cfg, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	return 0;
}

static void stop_worker(void)
{
	int status;

	if (worker_pid <= 0)
		return;
	kill(worker_pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(worker_pid, &status, WNOHANG) == worker_pid)
			goto done;
		usleep(50000);
	}
	kill(worker_pid, SIGKILL);
	waitpid(worker_pid, &status, 0);
done:
	worker_pid = -1;
}

/* CPU seconds the worker has used (utime + stime); -1 when unknown. */
static double worker_cpu_seconds(void)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	size_t n;

	if (worker_pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)worker_pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- one level ------------------------------------------------------------ */

static const char *const words[] = {
	"river", "stone", "light", "paper", "cloud", "engine", "garden", "window",
	"silver", "market", "winter", "forest", "signal", "harbor", "planet", "copper",
};

static void make_prompt(struct stream *s, int stream_i, int round, int n_words)
{
	size_t len = 0;
	/* lengths differ a little per stream; the first word differs per
	 * stream and round, so no KV block is shared through the prefix cache */
	int n = n_words + stream_i % 8;

	len += (size_t)snprintf(s->prompt + len, sizeof(s->prompt) - len, "s%dr%d", stream_i, round);
	for (int i = 0; i < n && len + 16 < sizeof(s->prompt); i++)
		len += (size_t)snprintf(s->prompt + len, sizeof(s->prompt) - len, " %s",
					words[(stream_i * 7 + i * 3 + round) % 16]);
}

static int submit(struct pc_conn *c, struct stream *s, int stream_i, uint64_t id,
		  const struct opts *o)
{
	struct proto_msg m;
	struct proto_submit sb;

	make_prompt(s, stream_i, s->round, o->prompt_words);
	pc_submit_init(&m, &sb, id, s->prompt, (uint32_t)o->gen, (uint8_t)(stream_i + 1));
	m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	m.u.submit.sampling.temperature = o->temperature;
	m.u.submit.sampling.seed = id;
	m.u.submit.constraint_kind = o->constraint_kind;
	if (o->constraint) {
		m.u.submit.constraint.ptr = o->constraint;
		m.u.submit.constraint.len = (uint32_t)strlen(o->constraint);
	}
	s->id = id;
	s->got_first = 0;
	s->t_submit = cm_mono_ns();
	return pc_send(c, &m);
}

static int run_level(const char *sock, int n, const struct opts *o, uint64_t *next_id)
{
	struct stream *st = calloc((size_t)n, sizeof(*st));
	struct samples itl = { 0 }, ttft = { 0 };
	struct samples ev_t = { 0 }, ev_n = { 0 }; /* every TOKEN frame: time, tokens */
	struct pc_conn *c = pc_connect(sock, 120000);
	struct pc_event *ev = malloc(sizeof(*ev));
	uint64_t base = *next_id, gen = 0, prompt = 0;
	int active = n, rc = -1;
	int64_t t0, t1;
	double cpu0, cpu1;

	if (!st || !c || !ev) {
		fprintf(stderr, "bench-serve: cannot connect to %s\n", sock);
		goto out;
	}
	if (pc_next(c, ev, 120000) != 1 || ev->type != PROTO_HELLO) {
		fprintf(stderr, "bench-serve: no HELLO from the worker\n");
		goto out;
	}
	t0 = cm_mono_ns();
	cpu0 = worker_cpu_seconds();
	for (int i = 0; i < n; i++)
		if (submit(c, &st[i], i, base + (uint64_t)i * (uint64_t)o->rounds, o)) {
			fprintf(stderr, "bench-serve: send failed\n");
			goto out;
		}
	while (active > 0) {
		int r = pc_next(c, ev, 600000);
		int64_t now = cm_mono_ns();
		struct stream *s;
		uint64_t k;

		if (r != 1) {
			fprintf(stderr, "bench-serve: %s while %d streams were active\n",
				r == 0 ? "timeout" : "connection lost", active);
			goto out;
		}
		if (ev->type == PROTO_STATS || ev->type == PROTO_HELLO || ev->type == PROTO_PONG)
			continue;
		if (ev->request_id < base || ev->request_id >= base + (uint64_t)n * o->rounds) {
			fprintf(stderr, "bench-serve: frame for unknown request %llu\n",
				(unsigned long long)ev->request_id);
			goto out;
		}
		k = ev->request_id - base;
		s = &st[k / (uint64_t)o->rounds];
		if (ev->type == PROTO_TOKEN) {
			uint32_t nt = ev->n_ids ? ev->n_ids : 1;

			push(&ev_t, (double)now);
			push(&ev_n, (double)nt);
			if (!s->got_first) {
				push(&ttft, (double)(now - s->t_submit) / 1e6);
				s->got_first = 1;
				if (s->round == 0)
					s->t_first = now;
			} else {
				double gap = (double)(now - s->t_last) / 1e6 / nt;

				for (uint32_t i = 0; i < nt; i++)
					push(&itl, gap);
			}
			s->t_last = now;
		} else if (ev->type == PROTO_DONE) {
			gen += ev->done.gen_tokens;
			prompt += ev->done.prompt_tokens;
			s->round++;
			s->t_done = now;
			if (s->round < o->rounds) {
				if (submit(c, s, (int)(k / (uint64_t)o->rounds), s->id + 1, o))
					goto out;
			} else {
				active--;
			}
		} else if (ev->type == PROTO_ERROR) {
			fprintf(stderr, "bench-serve: request %llu: ERROR %u %s\n",
				(unsigned long long)ev->request_id, ev->err_code, ev->err_msg);
			goto out;
		}
	}
	t1 = cm_mono_ns();
	cpu1 = worker_cpu_seconds();
	{
		/* steady decode: from the moment every stream has its first token
		 * until the first stream finishes, all N are decoding together */
		int64_t w0 = 0, w1 = INT64_MAX;
		double toks = 0, steady = 0;

		for (int i = 0; i < n; i++) {
			w0 = st[i].t_first > w0 ? st[i].t_first : w0;
			w1 = st[i].t_done < w1 ? st[i].t_done : w1;
		}
		for (size_t i = 0; i < ev_t.n; i++)
			if (ev_t.v[i] > (double)w0 && ev_t.v[i] <= (double)w1)
				toks += ev_n.v[i];
		if (w1 > w0 && toks > 0)
			steady = toks / ((double)(w1 - w0) / 1e9);
		double share = cpu0 >= 0 && cpu1 >= 0
				       ? (cpu1 - cpu0) / ((double)(t1 - t0) / 1e9) / o->threads
				       : -1;

		printf("%7d %9llu %9llu %8.2f %10.2f %10.2f %8.1f %8.1f %9.1f %9.1f %6.0f%% %10.2f\n",
		       n, (unsigned long long)prompt, (unsigned long long)gen,
		       (double)(t1 - t0) / 1e9, (double)gen / ((double)(t1 - t0) / 1e9), steady,
		       pct(&itl, 0.5), pct(&itl, 0.95), pct(&ttft, 0.5), pct(&ttft, 0.95),
		       100.0 * share,
		       share > 0 ? (double)gen / ((double)(t1 - t0) / 1e9) / share : 0.0);
	}
	fflush(stdout);
	rc = 0;
out:
	*next_id = base + (uint64_t)n * o->rounds + 1;
	if (c)
		pc_close(c);
	free(ev);
	free(st);
	free(itl.v);
	free(ttft.v);
	free(ev_t.v);
	free(ev_n.v);
	return rc;
}

static void print_header(const struct opts *o, const char *sock, struct pc_conn *c)
{
	struct utsname u;
	char cpu[256] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");
	double load[3] = { 0 };
	struct pc_event *ev = malloc(sizeof(*ev));

	if (f) {
		char line[512];

		while (fgets(line, sizeof(line), f)) {
			char *p = strchr(line, ':');

			if (!strncmp(line, "model name", 10) && p) {
				snprintf(cpu, sizeof(cpu), "%s", p + 2);
				cpu[strcspn(cpu, "\n")] = '\0';
				break;
			}
		}
		fclose(f);
	}
	uname(&u);
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	printf("bench-serve: worker %s\n", o->socket ? o->socket : sock);
	if (ev && c && pc_next(c, ev, 120000) == 1 && ev->type == PROTO_HELLO)
		printf("model: %s  context %u  vocab %u  kv blocks %u x %u tokens\n",
		       ev->hello_model, ev->hello_ctx, ev->hello_vocab, ev->hello_blocks,
		       ev->hello_bt);
	if (o->model)
		printf("file: %s\n", o->model);
	printf("threads: %d  hardware: %s, %ld online CPUs, %s %s  load %.2f\n", o->threads,
	       cpu, sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.machine, load[0]);
	printf("per request: ~%d prompt words, %d generated tokens (ignore EOS, temperature %g), "
	       "%d round(s) per stream, constraint %s\n",
	       o->prompt_words, o->gen, (double)o->temperature, o->rounds,
	       o->constraint_arg ? o->constraint_arg : "none");
	printf("%7s %9s %9s %8s %10s %10s %8s %8s %9s %9s %7s %10s\n", "streams", "prompt",
	       "gen", "wall_s", "gen_tok/s", "decode", "itl_p50", "itl_p95", "ttft_p50",
	       "ttft_p95", "cpu", "gen_tok/s");
	printf("%7s %9s %9s %8s %10s %10s %8s %8s %9s %9s %7s %10s\n", "", "tokens", "tokens",
	       "", "(wall)", "tok/s", "ms", "ms", "ms", "ms", "share", "at 100%");
	free(ev);
}

int main(int argc, char **argv)
{
	struct opts o;
	char sock[512];
	struct pc_conn *c;
	uint64_t next_id = 1;
	int rc = 0;

	if (parse_args(argc, argv, &o)) {
		usage();
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (o.socket) {
		snprintf(sock, sizeof(sock), "%s", o.socket);
	} else if (start_worker(&o, argv[0], sock, sizeof(sock))) {
		return 1;
	}
	c = pc_connect(sock, 300000);
	if (!c) {
		fprintf(stderr, "bench-serve: worker did not come up on %s (log: %s/worker.log)\n",
			sock, tmpdir);
		stop_worker();
		return 1;
	}
	print_header(&o, sock, c);
	pc_close(c);
	for (int i = 0; i < o.n_levels && rc == 0; i++)
		rc = run_level(sock, o.streams[i], &o, &next_id) ? 1 : 0;
	stop_worker();
	if (rc)
		fprintf(stderr, "bench-serve: failed (worker log: %s/worker.log)\n", tmpdir);
	return rc;
}
