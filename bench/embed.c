/*
 * embed.c - bench-embed: embedding throughput of any OpenAI-compatible
 * POST /v1/embeddings over plain HTTP/1.1 (the Sluice gateway with
 * plain_http, llama.cpp's llama-server --embeddings): the same client and
 * the same load against both (bench/embed.sh runs them side by side).
 *
 * Load: for each input length L (tokens) and batch B (inputs per
 * request), C closed-loop clients (threads, one keep-alive connection
 * each) send requests of B inputs, each L token ids drawn from
 * [1000, vocab) (the same ids for both servers: --seed), encoding_format
 * float, for --seconds (at least --min-requests per client).  Token ids
 * leave tokenization out, so both servers embed exactly L tokens per
 * input.  Printed per cell: requests, embeddings/s, tokens/s, request
 * latency p50/p95 (ms), errors; the first request of each client is a
 * warm-up and not counted.
 *
 *   bench-embed --url http://127.0.0.1:8080 [--key KEY] --model minilm \
 *     --lens 32,128,512 --batches 1,16,64 --concurrency 1 --seconds 5 \
 *     --vocab 30522 [--label NAME]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"

#define MAX_CELLS 16
#define MAX_CONC 64

struct opts {
	char host[64];
	int port;
	const char *key, *model, *label;
	uint32_t lens[MAX_CELLS], batches[MAX_CELLS];
	int n_lens, n_batches, conc, min_requests;
	double seconds;
	uint32_t vocab;
	uint64_t seed;
};

struct client {
	const struct opts *o;
	uint32_t len, batch;
	int idx;
	double *lat;       /* ms per counted request */
	size_t n_lat, cap;
	uint64_t errors;
	char *body;
	size_t body_len;
};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int parse_list(const char *s, uint32_t *out, int cap)
{
	int n = 0;

	while (*s && n < cap) {
		char *end;

		out[n++] = (uint32_t)strtoul(s, &end, 10);
		s = *end == ',' ? end + 1 : end;
		if (end == s && *s)
			return -1;
	}
	return n;
}

/* The JSON body of one request: B inputs of L random ids. */
static char *make_body(const struct opts *o, uint32_t len, uint32_t batch, int idx, size_t *n)
{
	size_t cap = 128 + strlen(o->model) + (size_t)batch * len * 7 + batch * 4;
	char *b = malloc(cap), *p = b;
	uint64_t s = o->seed * 2654435761u + (uint64_t)idx * 97 + len * 31 + batch + 1;

	if (!b)
		return NULL;
	p += sprintf(p, "{\"model\":\"%s\",\"encoding_format\":\"float\",\"input\":[", o->model);
	for (uint32_t i = 0; i < batch; i++) {
		*p++ = i ? ',' : '[';
		if (i)
			*p++ = '[';
		for (uint32_t t = 0; t < len; t++)
			p += sprintf(p, "%s%u", t ? "," : "",
				     1000 + (uint32_t)(rng_next(&s) % (o->vocab - 1000)));
		*p++ = ']';
	}
	p += sprintf(p, "]}");
	*n = (size_t)(p - b);
	return b;
}

static int connect_to(const struct opts *o)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)o->port);
	inet_pton(AF_INET, o->host, &sa.sin_addr);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads one response (Content-Length framed); its status, or -1. */
static int read_response(int fd, char **buf, size_t *cap)
{
	size_t n = 0, need = 0, hdr = 0;

	for (;;) {
		ssize_t r;

		if (n + 65536 > *cap) {
			*cap = (n + 65536) * 2;
			*buf = realloc(*buf, *cap);
			if (!*buf)
				return -1;
		}
		r = read(fd, *buf + n, *cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		(*buf)[n] = '\0';
		if (!hdr) {
			char *e = strstr(*buf, "\r\n\r\n"), *cl;

			if (!e)
				continue;
			hdr = (size_t)(e - *buf) + 4;
			cl = strcasestr(*buf, "\r\ncontent-length:");
			if (!cl || cl > e)
				return -1;
			need = hdr + strtoul(cl + 17, NULL, 10);
		}
		if (n >= need)
			return atoi(*buf + 9);
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	const struct opts *o = c->o;
	char head[1024], *resp = NULL;
	size_t rcap = 0;
	int fd = connect_to(o);
	int64_t end = 0;
	int done = 0;

	if (fd < 0) {
		c->errors++;
		return NULL;
	}
	snprintf(head, sizeof(head), "POST /v1/embeddings HTTP/1.1\r\nHost: %s\r\n%s%s%s"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n", o->host,
		 o->key ? "Authorization: Bearer " : "", o->key ? o->key : "", o->key ? "\r\n" : "",
		 c->body_len);
	for (int i = 0;; i++) {
		int64_t t0 = cm_mono_ns(), t1;
		int st;

		if (write_all(fd, head, strlen(head)) != 0 ||
		    write_all(fd, c->body, c->body_len) != 0 ||
		    (st = read_response(fd, &resp, &rcap)) < 0) {
			c->errors++;
			break;
		}
		t1 = cm_mono_ns();
		if (st != 200) {
			if (c->errors++ == 0)
				fprintf(stderr, "bench-embed: status %d: %.300s\n", st,
					strstr(resp, "\r\n\r\n") ? strstr(resp, "\r\n\r\n") + 4 : resp);
		}
		if (i == 0) { /* warm-up: not counted; the clock starts now */
			end = t1 + (int64_t)(o->seconds * 1e9);
			continue;
		}
		if (c->n_lat == c->cap) {
			c->cap = c->cap ? 2 * c->cap : 64;
			c->lat = realloc(c->lat, c->cap * sizeof(double));
		}
		c->lat[c->n_lat++] = (double)(t1 - t0) / 1e6;
		done++;
		if (t1 >= end && done >= o->min_requests)
			break;
	}
	free(resp);
	close(fd);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void run_cell(const struct opts *o, uint32_t len, uint32_t batch)
{
	struct client cl[MAX_CONC];
	pthread_t th[MAX_CONC];
	double *all = NULL, wall;
	size_t n = 0;
	uint64_t errors = 0;
	int64_t t0, t1;

	memset(cl, 0, sizeof(cl));
	for (int i = 0; i < o->conc; i++) {
		cl[i].o = o;
		cl[i].len = len;
		cl[i].batch = batch;
		cl[i].idx = i;
		cl[i].body = make_body(o, len, batch, i, &cl[i].body_len);
	}
	t0 = cm_mono_ns();
	for (int i = 0; i < o->conc; i++)
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	for (int i = 0; i < o->conc; i++)
		pthread_join(th[i], NULL);
	t1 = cm_mono_ns();
	for (int i = 0; i < o->conc; i++) {
		all = realloc(all, (n + cl[i].n_lat + 1) * sizeof(double));
		memcpy(all + n, cl[i].lat, cl[i].n_lat * sizeof(double));
		n += cl[i].n_lat;
		errors += cl[i].errors;
		free(cl[i].lat);
		free(cl[i].body);
	}
	/* throughput over the counted requests: the sum of their latencies
	 * per client is the time they took (closed loop, one at a time) */
	wall = 0;
	for (size_t i = 0; i < n; i++)
		wall += all[i];
	wall /= 1000.0 * o->conc;
	qsort(all, n, sizeof(double), cmp_d);
	printf("%-10s %5u %5u %4d %6zu %10.1f %11.0f %9.2f %9.2f %6llu %7.1f\n",
	       o->label ? o->label : "-", len, batch, o->conc, n,
	       wall > 0 ? (double)n * batch / wall : 0, wall > 0 ? (double)n * batch * len / wall : 0,
	       n ? all[n / 2] : 0, n ? all[(size_t)((double)(n - 1) * 0.95)] : 0,
	       (unsigned long long)errors, (double)(t1 - t0) / 1e9);
	fflush(stdout);
	free(all);
}

int main(int argc, char **argv)
{
	struct opts o = { .host = "127.0.0.1", .port = 0, .conc = 1, .min_requests = 3,
			  .seconds = 5, .vocab = 30522, .seed = 1, .model = "minilm" };

	o.n_lens = parse_list("32,128,512", o.lens, MAX_CELLS);
	o.n_batches = parse_list("1,16,64", o.batches, MAX_CELLS);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v) {
			fprintf(stderr, "bench-embed: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (strcmp(a, "--url") == 0) {
			if (sscanf(v, "http://%63[^:]:%d", o.host, &o.port) != 2) {
				fprintf(stderr, "bench-embed: --url: expected http://HOST:PORT\n");
				return 2;
			}
		} else if (strcmp(a, "--key") == 0) {
			o.key = v;
		} else if (strcmp(a, "--model") == 0) {
			o.model = v;
		} else if (strcmp(a, "--label") == 0) {
			o.label = v;
		} else if (strcmp(a, "--lens") == 0) {
			o.n_lens = parse_list(v, o.lens, MAX_CELLS);
		} else if (strcmp(a, "--batches") == 0) {
			o.n_batches = parse_list(v, o.batches, MAX_CELLS);
		} else if (strcmp(a, "--concurrency") == 0) {
			o.conc = atoi(v);
		} else if (strcmp(a, "--seconds") == 0) {
			o.seconds = atof(v);
		} else if (strcmp(a, "--min-requests") == 0) {
			o.min_requests = atoi(v);
		} else if (strcmp(a, "--vocab") == 0) {
			o.vocab = (uint32_t)strtoul(v, NULL, 10);
		} else if (strcmp(a, "--seed") == 0) {
			o.seed = strtoull(v, NULL, 10);
		} else {
			fprintf(stderr, "bench-embed: unknown option %s\n", a);
			return 2;
		}
	}
	if (!o.port || o.n_lens <= 0 || o.n_batches <= 0 || o.conc < 1 || o.conc > MAX_CONC ||
	    o.vocab <= 1000) {
		fprintf(stderr, "usage: bench-embed --url http://HOST:PORT [--key KEY] [--model M] "
			"[--lens 32,128,512] [--batches 1,16,64] [--concurrency C] [--seconds S] "
			"[--vocab V]\n");
		return 2;
	}
	printf("%-10s %5s %5s %4s %6s %10s %11s %9s %9s %6s %7s\n", "server", "len", "batch",
	       "conc", "reqs", "emb/s", "tok/s", "p50_ms", "p95_ms", "errors", "wall_s");
	for (int l = 0; l < o.n_lens; l++)
		for (int b = 0; b < o.n_batches; b++)
			run_cell(&o, o.lens[l], o.batches[b]);
	return 0;
}
