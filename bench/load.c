/*
 * load.c - bench/load: N concurrent streaming clients across M tenants,
 * against the gateway (HTTPS, Ollama /api/generate raw, NDJSON stream) and,
 * for the side-by-side, straight against a worker (proto/ over its Unix
 * socket: the same prompt, sampling and lengths, with the worker told to
 * ignore EOS so that both produce exactly --max-tokens tokens).
 *
 * Each client is a closed loop: one request at a time, --requests of them.
 * Measured per request: TTFT (request written -> first token received),
 * inter-token latency (between tokens as received), end-to-end; reported
 * as p50/p95/p99 per concurrency, with requests/s, tokens/s and errors by
 * status.  Output: a table on stdout, --json FILE, and with gnuplot
 * installed --png FILE (latency against concurrency).
 *
 * One thread, one libevent loop.  Gateway clients keep one TLS connection
 * each (keep-alive; connecting is not timed).  Worker clients share one
 * connection (workers accept few connections), multiplexed by request id.
 * The certificate is not verified (a benchmark against a test gateway).
 *
 *   load --gateway 127.0.0.1:8443 --keys keys.txt --socket /run/w.sock \
 *        --model tiny --concurrency 1,8,32 --requests 20 --prompt-bytes 64 \
 *        --max-tokens 32 --json out.json --png out.png
 * keys.txt holds one API key per line, one per tenant (M = lines).
 * --prefixes N: shared-prefix workload, each prompt is one of N prefixes
 * ("system prompt k: " + the --prompt-bytes text) plus a unique tail; the
 * gateway runs report the prefix hit rate (cached_prompt_tokens over
 * prompt_eval_count of the final objects).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "proto/proto.h"

#define MAX_CLIENTS 1024
#define MAX_KEYS 64
#define TEXT_ONLY 0xFFFFFFFFu

struct samples {
	double *v;
	size_t n, cap;
};

struct run {
	const char *mode;
	int conc;
	struct samples ttft, itl, e2e;
	uint64_t ok, tokens;
	uint64_t prompt_tok, cached_tok; /* gateway: from the final object */
	int errors[600];
	double wall_s;
};

enum hstate { H_IDLE, H_HEAD, H_SIZE, H_DATA, H_TRAIL, H_BODY };

struct client {
	int idx;
	struct bufferevent *bev;
	int done_reqs;
	int64_t sent_ns, last_ns;
	int got_first;
	uint32_t tokens;
	/* gateway (HTTP) */
	enum hstate hs;
	int status;
	size_t left;
	int chunked;
	/* worker */
	uint64_t rid;
};

static struct {
	const char *gw_host;
	int gw_port;
	const char *sock;
	const char *model;
	char *keys[MAX_KEYS];
	int n_keys;
	int concs[16];
	int n_conc;
	int requests;
	int prompt_bytes;
	int prefixes;          /* > 0: shared-prefix workload */
	int max_tokens;
	const char *json, *png;
} opt = { .model = "tiny", .requests = 20, .prompt_bytes = 64, .max_tokens = 32 };

static struct event_base *base;
static SSL_CTX *ssl_ctx;
static struct run *cur;
static struct client clients[MAX_CLIENTS];
static int n_clients, n_finished, n_connected;
static char *prompt;
/* worker mode: one shared connection */
static struct bufferevent *wbev;
static struct proto_decoder *wdec;
static uint64_t next_rid = 1;

static void add(struct samples *s, double v)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof(double));
		if (!s->v)
			abort();
	}
	s->v[s->n++] = v;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(struct samples *s, double p)
{
	size_t i;

	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof(double), cmpd);
	i = (size_t)(p / 100.0 * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

static void on_token(struct client *c, uint32_t n)
{
	int64_t now = cm_mono_ns();

	if (!n)
		return;
	if (!c->got_first) {
		add(&cur->ttft, (double)(now - c->sent_ns) / 1e6);
		c->got_first = 1;
	} else {
		add(&cur->itl, (double)(now - c->last_ns) / 1e6);
	}
	/* several tokens in one read: the rest arrived together (ITL 0) */
	for (uint32_t i = 1; i < n; i++)
		add(&cur->itl, 0);
	c->last_ns = now;
	c->tokens += n;
}

static void send_request(struct client *c);

static void finish_request(struct client *c, int status)
{
	if (status == 200) {
		cur->ok++;
		cur->tokens += c->tokens;
		add(&cur->e2e, (double)(cm_mono_ns() - c->sent_ns) / 1e6);
	} else {
		cur->errors[status > 0 && status < 600 ? status : 0]++;
	}
	c->done_reqs++;
	if (c->done_reqs < opt.requests) {
		send_request(c);
	} else if (++n_finished == n_clients) {
		event_base_loopexit(base, NULL);
	}
}

/* ---- gateway clients ------------------------------------------------- */

static void http_send(struct client *c)
{
	const char *key = opt.keys[c->idx % opt.n_keys];
	char body[8192], head[48] = "", tail[48] = "";
	int n;

	/* shared-prefix workload: one of --prefixes system prompts, then a
	 * unique tail; the prefix is picked by request so every client
	 * spreads over all of them */
	if (opt.prefixes > 0) {
		snprintf(head, sizeof(head), "system prompt %d: ",
			 (c->idx * 7 + c->done_reqs) % opt.prefixes);
		snprintf(tail, sizeof(tail), " request %d-%d", c->idx, c->done_reqs);
	}
	n = snprintf(body, sizeof(body),
		     "{\"model\":\"%s\",\"prompt\":\"%s%s%s\",\"raw\":true,\"stream\":true,"
		     "\"options\":{\"num_predict\":%d,\"temperature\":0.8,\"top_k\":40,"
		     "\"top_p\":0.9,\"repeat_penalty\":1.1,\"repeat_last_n\":64}}",
		     opt.model, head, prompt, tail, opt.max_tokens);
	c->hs = H_HEAD;
	c->got_first = 0;
	c->tokens = 0;
	c->sent_ns = cm_mono_ns();
	evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "POST /api/generate HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
			    "Content-Type: application/json\r\nX-Sluice-Ignore-EOS: 1\r\n"
			    "Content-Length: %d\r\n\r\n%s", opt.gw_host, key, n, body);
}

static uint32_t count_tokens(const char *p, size_t n)
{
	uint32_t k = 0;
	const char *e = p + n;

	while (p < e && (p = memmem(p, (size_t)(e - p), "\"done\":false", 12)) != NULL) {
		k++;
		p += 12;
	}
	return k;
}

static void http_read(struct bufferevent *bev, void *arg)
{
	struct client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	for (;;) {
		if (c->hs == H_HEAD) {
			struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
			char *h, *cl;

			if (p.pos < 0)
				return;
			h = malloc((size_t)p.pos + 5);
			evbuffer_remove(in, h, (size_t)p.pos + 4);
			h[p.pos + 4] = '\0';
			c->status = atoi(h + 9);
			c->chunked = strcasestr(h, "transfer-encoding: chunked") != NULL;
			cl = strcasestr(h, "content-length:");
			c->left = cl ? strtoul(cl + 15, NULL, 10) : 0;
			free(h);
			c->hs = c->chunked ? H_SIZE : H_BODY;
		} else if (c->hs == H_BODY) {
			size_t have = evbuffer_get_length(in);
			size_t take = have < c->left ? have : c->left;

			evbuffer_drain(in, take);
			c->left -= take;
			if (c->left)
				return;
			c->hs = H_IDLE;
			finish_request(c, c->status == 200 ? 599 : c->status);
			return;
		} else if (c->hs == H_SIZE) {
			size_t len;
			char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);

			if (!line)
				return;
			c->left = strtoul(line, NULL, 16);
			free(line);
			c->hs = c->left ? H_DATA : H_TRAIL;
		} else if (c->hs == H_DATA) {
			unsigned char *d;

			if (evbuffer_get_length(in) < c->left + 2)
				return;
			d = evbuffer_pullup(in, (ev_ssize_t)c->left);
			on_token(c, count_tokens((const char *)d, c->left));
			{
				const char *e = (const char *)d, *pe, *ce;

				pe = memmem(e, c->left, "\"prompt_eval_count\":", 20);
				ce = memmem(e, c->left, "\"cached_prompt_tokens\":", 23);
				if (pe && ce) {
					cur->prompt_tok += strtoull(pe + 20, NULL, 10);
					cur->cached_tok += strtoull(ce + 23, NULL, 10);
				}
			}
			evbuffer_drain(in, c->left + 2);
			c->hs = H_SIZE;
		} else if (c->hs == H_TRAIL) {
			size_t len;
			char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);

			if (!line)
				return;
			free(line);
			c->hs = H_IDLE;
			finish_request(c, c->status);
			return;
		} else {
			return;
		}
	}
}

static void http_event(struct bufferevent *bev, short what, void *arg)
{
	struct client *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		if (++n_connected == n_clients) {
			cur->wall_s = (double)cm_mono_ns();
			for (int i = 0; i < n_clients; i++)
				send_request(&clients[i]);
		}
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		fprintf(stderr, "load: client %d: connection %s\n", c->idx,
			(what & BEV_EVENT_EOF) ? "closed" : "failed");
		cur->errors[0] += opt.requests - c->done_reqs;
		c->done_reqs = opt.requests;
		bufferevent_free(c->bev);
		c->bev = NULL;
		if (++n_finished == n_clients)
			event_base_loopexit(base, NULL);
	}
}

static int http_connect(struct client *c)
{
	struct sockaddr_in sa;
	SSL *ssl = SSL_new(ssl_ctx);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)opt.gw_port);
	if (inet_pton(AF_INET, opt.gw_host, &sa.sin_addr) != 1 || !ssl)
		return -1;
	c->bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
						BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev)
		return -1;
	bufferevent_setcb(c->bev, http_read, NULL, http_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	return bufferevent_socket_connect(c->bev, (struct sockaddr *)&sa, sizeof(sa));
}

/* ---- worker clients (one shared connection) ------------------------- */

static void proto_send(struct client *c)
{
	struct proto_msg m;
	struct cm_buf b;
	char tenant[32];

	memset(&m, 0, sizeof(m));
	snprintf(tenant, sizeof(tenant), "bench-t%d", c->idx % (opt.n_keys ? opt.n_keys : 1));
	m.type = PROTO_SUBMIT;
	m.flags = PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_IGNORE_EOS;
	m.request_id = c->rid = next_rid++;
	m.u.submit.tenant_id.ptr = tenant;
	m.u.submit.tenant_id.len = (uint32_t)strlen(tenant);
	memset(m.u.submit.cache_salt, c->idx % (opt.n_keys ? opt.n_keys : 1) + 1, PROTO_DIGEST_LEN);
	m.u.submit.key_id.ptr = "bench";
	m.u.submit.key_id.len = 5;
	m.u.submit.model.ptr = opt.model;
	m.u.submit.model.len = (uint32_t)strlen(opt.model);
	m.u.submit.max_tokens = (uint32_t)opt.max_tokens;
	m.u.submit.sampling.temperature = 0.8f;
	m.u.submit.sampling.top_k = 40;
	m.u.submit.sampling.top_p = 0.9f;
	m.u.submit.sampling.repeat_penalty = 1.1f;
	m.u.submit.sampling.repeat_last_n = 64;
	m.u.submit.prompt_kind = PROTO_PROMPT_TEXT;
	m.u.submit.text.ptr = prompt;
	m.u.submit.text.len = (uint32_t)strlen(prompt);
	c->got_first = 0;
	c->tokens = 0;
	cm_buf_init(&b, 1 << 20);
	if (proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES) != CM_OK) {
		fprintf(stderr, "load: SUBMIT does not encode\n");
		exit(1);
	}
	c->sent_ns = cm_mono_ns();
	bufferevent_write(wbev, cm_buf_data(&b), cm_buf_len(&b));
	cm_buf_deinit(&b);
}

static struct client *by_rid(uint64_t rid)
{
	for (int i = 0; i < n_clients; i++)
		if (clients[i].rid == rid)
			return &clients[i];
	return NULL;
}

static void proto_read(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	struct proto_msg m;
	size_t n;

	(void)arg;
	while ((n = evbuffer_get_length(in)) > 0) {
		unsigned char *p = evbuffer_pullup(in, (ev_ssize_t)n);

		if (proto_decoder_feed(wdec, p, n) != CM_OK)
			exit(1);
		evbuffer_drain(in, n);
	}
	for (;;) {
		enum cm_status st = proto_decoder_next(wdec, &m);
		struct client *c;

		if (st == CM_AGAIN)
			return;
		if (st != CM_OK) {
			fprintf(stderr, "load: worker sent a malformed frame\n");
			exit(1);
		}
		if (m.type == PROTO_HELLO) {
			cur->wall_s = (double)cm_mono_ns();
			for (int i = 0; i < n_clients; i++)
				send_request(&clients[i]);
			continue;
		}
		c = m.request_id ? by_rid(m.request_id) : NULL;
		if (!c)
			continue;
		if (m.type == PROTO_TOKEN) {
			uint32_t k = 0;

			for (uint32_t i = 0; i < m.u.tokens.n; i++)
				k += m.u.tokens.tok[i].id != TEXT_ONLY;
			on_token(c, k);
		} else if (m.type == PROTO_DONE) {
			finish_request(c, 200);
		} else if (m.type == PROTO_ERROR) {
			finish_request(c, 500 + m.u.error.code);
		}
	}
}

static void proto_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)arg;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		fprintf(stderr, "load: worker connection lost\n");
		exit(1);
	}
}

static void send_request(struct client *c)
{
	if (opt.sock && strcmp(cur->mode, "worker") == 0)
		proto_send(c);
	else
		http_send(c);
}

/* ---- runs ---------------------------------------------------------- */

static void run_one(struct run *r)
{
	memset(clients, 0, sizeof(clients));
	n_clients = r->conc;
	n_finished = n_connected = 0;
	cur = r;
	for (int i = 0; i < n_clients; i++)
		clients[i].idx = i;
	if (strcmp(r->mode, "worker") == 0) {
		struct sockaddr_un sa;

		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", opt.sock);
		wdec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES);
		wbev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
		bufferevent_setcb(wbev, proto_read, NULL, proto_event, NULL);
		bufferevent_enable(wbev, EV_READ | EV_WRITE);
		if (bufferevent_socket_connect(wbev, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			fprintf(stderr, "load: cannot connect to %s\n", opt.sock);
			exit(1);
		}
	} else {
		for (int i = 0; i < n_clients; i++)
			if (http_connect(&clients[i]) != 0) {
				fprintf(stderr, "load: cannot connect to %s:%d\n", opt.gw_host, opt.gw_port);
				exit(1);
			}
	}
	event_base_dispatch(base);
	r->wall_s = ((double)cm_mono_ns() - r->wall_s) / 1e9;
	if (wbev) {
		bufferevent_free(wbev);
		wbev = NULL;
		proto_decoder_free(wdec);
		wdec = NULL;
	}
	for (int i = 0; i < n_clients; i++)
		if (clients[i].bev)
			bufferevent_free(clients[i].bev);
}

static void print_stats(FILE *f, struct samples *s, const char *name, int json)
{
	double a = pct(s, 50), b = pct(s, 95), c = pct(s, 99);

	if (json)
		fprintf(f, "\"%s\":{\"p50\":%.3f,\"p95\":%.3f,\"p99\":%.3f,\"n\":%zu}", name, a, b, c, s->n);
	else
		fprintf(f, "  %-4s p50 %8.3f  p95 %8.3f  p99 %8.3f ms\n", name, a, b, c);
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			return -1;
		i++;
		if (strcmp(a, "--gateway") == 0) {
			static char host[64];
			const char *colon = strrchr(v, ':');

			if (!colon || colon - v >= (long)sizeof(host))
				return -1;
			snprintf(host, sizeof(host), "%.*s", (int)(colon - v), v);
			opt.gw_host = host;
			opt.gw_port = atoi(colon + 1);
		} else if (strcmp(a, "--socket") == 0) {
			opt.sock = v;
		} else if (strcmp(a, "--keys") == 0) {
			FILE *f = fopen(v, "r");
			char line[256];

			if (!f)
				return -1;
			while (opt.n_keys < MAX_KEYS && fgets(line, sizeof(line), f))
				if (line[0] && line[0] != '\n') {
					line[strcspn(line, "\r\n")] = '\0';
					opt.keys[opt.n_keys++] = strdup(line);
				}
			fclose(f);
		} else if (strcmp(a, "--model") == 0) {
			opt.model = v;
		} else if (strcmp(a, "--concurrency") == 0) {
			char *s = strdup(v), *t, *sp;

			for (t = strtok_r(s, ",", &sp); t && opt.n_conc < 16; t = strtok_r(NULL, ",", &sp))
				opt.concs[opt.n_conc++] = atoi(t);
			free(s);
		} else if (strcmp(a, "--requests") == 0) {
			opt.requests = atoi(v);
		} else if (strcmp(a, "--prompt-bytes") == 0) {
			opt.prompt_bytes = atoi(v);
		} else if (strcmp(a, "--prefixes") == 0) {
			opt.prefixes = atoi(v);
		} else if (strcmp(a, "--max-tokens") == 0) {
			opt.max_tokens = atoi(v);
		} else if (strcmp(a, "--json") == 0) {
			opt.json = v;
		} else if (strcmp(a, "--png") == 0) {
			opt.png = v;
		} else {
			return -1;
		}
	}
	if (!opt.n_conc)
		opt.concs[opt.n_conc++] = 1;
	for (int i = 0; i < opt.n_conc; i++)
		if (opt.concs[i] < 1 || opt.concs[i] > MAX_CLIENTS)
			return -1;
	if ((!opt.gw_host || !opt.n_keys) && !opt.sock)
		return -1;
	if (opt.requests < 1 || opt.max_tokens < 1 || opt.prompt_bytes < 1 || opt.prompt_bytes > 4000)
		return -1;
	return 0;
}

static void plot(struct run *runs, int n)
{
	char dat[512];
	FILE *f, *g;

	if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
		fprintf(stderr, "load: gnuplot not found, no PNG\n");
		return;
	}
	snprintf(dat, sizeof(dat), "%s.dat", opt.png);
	f = fopen(dat, "w");
	if (!f)
		return;
	for (int m = 0; m < 2; m++) {
		const char *mode = m ? "worker" : "gateway";

		fprintf(f, "# %s: concurrency ttft_p50 ttft_p99 itl_p50 itl_p99\n", mode);
		for (int i = 0; i < n; i++)
			if (strcmp(runs[i].mode, mode) == 0)
				fprintf(f, "%d %.3f %.3f %.3f %.3f\n", runs[i].conc, pct(&runs[i].ttft, 50),
					pct(&runs[i].ttft, 99), pct(&runs[i].itl, 50), pct(&runs[i].itl, 99));
		fprintf(f, "\n\n");
	}
	fclose(f);
	g = popen("gnuplot", "w");
	if (!g)
		return;
	fprintf(g, "set terminal png size 900,560\nset output '%s'\n"
		   "set title 'sluice bench/load: latency against concurrency (%s, %d tokens)'\n"
		   "set xlabel 'concurrent streams'\nset ylabel 'ms'\nset logscale x 2\n"
		   "set key left top\nset grid\n"
		   "plot '%s' index 0 using 1:3 with linespoints title 'gateway TTFT p99', "
		   "'%s' index 1 using 1:3 with linespoints title 'worker TTFT p99', "
		   "'%s' index 0 using 1:5 with linespoints title 'gateway ITL p99', "
		   "'%s' index 1 using 1:5 with linespoints title 'worker ITL p99'\n",
		opt.png, opt.model, opt.max_tokens, dat, dat, dat, dat);
	pclose(g);
}

int main(int argc, char **argv)
{
	struct run runs[32];
	int n_runs = 0;
	FILE *jf = NULL;

	if (parse_args(argc, argv) != 0) {
		fprintf(stderr,
			"usage: load [--gateway HOST:PORT --keys FILE] [--socket WORKER_SOCK]\n"
			"            [--model NAME] [--concurrency 1,8,32] [--requests N]\n"
			"            [--prompt-bytes N] [--prefixes N] [--max-tokens N]\n"
			"            [--json FILE] [--png FILE]\n");
		return 2;
	}
	prompt = malloc((size_t)opt.prompt_bytes + 1);
	for (int i = 0; i < opt.prompt_bytes; i++)
		prompt[i] = "the quick brown fox jumps over a lazy dog "[i % 42];
	prompt[opt.prompt_bytes] = '\0';
	base = event_base_new();
	ssl_ctx = SSL_CTX_new(TLS_client_method());
	if (!base || !ssl_ctx)
		return 1;
	SSL_CTX_set_verify(ssl_ctx, SSL_VERIFY_NONE, NULL);
	memset(runs, 0, sizeof(runs));
	for (int i = 0; i < opt.n_conc; i++)
		for (int m = 0; m < 2; m++) {
			struct run *r = &runs[n_runs];

			if (m == 0 && (!opt.gw_host || !opt.n_keys))
				continue;
			if (m == 1 && !opt.sock)
				continue;
			r->mode = m ? "worker" : "gateway";
			r->conc = opt.concs[i];
			run_one(r);
			n_runs++;
			printf("%s, %d streams: %llu ok in %.2f s, %.1f req/s, %.0f tokens/s\n", r->mode,
			       r->conc, (unsigned long long)r->ok, r->wall_s, (double)r->ok / r->wall_s,
			       (double)r->tokens / r->wall_s);
			print_stats(stdout, &r->ttft, "ttft", 0);
			print_stats(stdout, &r->itl, "itl", 0);
			print_stats(stdout, &r->e2e, "e2e", 0);
			if (r->prompt_tok)
				printf("  prefix hit rate %.1f%% (%llu of %llu prompt tokens cached)\n",
				       100.0 * (double)r->cached_tok / (double)r->prompt_tok,
				       (unsigned long long)r->cached_tok,
				       (unsigned long long)r->prompt_tok);
			for (int s = 0; s < 600; s++)
				if (r->errors[s])
					printf("  errors: status %d x %d\n", s, r->errors[s]);
			fflush(stdout);
		}
	for (int i = 0; i + 1 < n_runs; i++)
		if (strcmp(runs[i].mode, "gateway") == 0 && strcmp(runs[i + 1].mode, "worker") == 0)
			printf("%d streams: gateway adds %.3f ms to TTFT p99, %.3f ms to TTFT p50\n",
			       runs[i].conc, pct(&runs[i].ttft, 99) - pct(&runs[i + 1].ttft, 99),
			       pct(&runs[i].ttft, 50) - pct(&runs[i + 1].ttft, 50));
	if (opt.json && (jf = fopen(opt.json, "w")) != NULL) {
		fprintf(jf, "{\"model\":\"%s\",\"prompt_bytes\":%d,\"max_tokens\":%d,\"requests_per_client\":%d,"
			    "\"tenants\":%d,\"runs\":[", opt.model, opt.prompt_bytes, opt.max_tokens,
			opt.requests, opt.n_keys);
		for (int i = 0; i < n_runs; i++) {
			struct run *r = &runs[i];
			int first = 1;

			fprintf(jf, "%s{\"mode\":\"%s\",\"concurrency\":%d,\"ok\":%llu,\"wall_s\":%.3f,"
				    "\"requests_per_s\":%.3f,\"tokens_per_s\":%.1f,", i ? "," : "", r->mode,
				r->conc, (unsigned long long)r->ok, r->wall_s, (double)r->ok / r->wall_s,
				(double)r->tokens / r->wall_s);
			print_stats(jf, &r->ttft, "ttft_ms", 1);
			fputc(',', jf);
			print_stats(jf, &r->itl, "itl_ms", 1);
			fputc(',', jf);
			print_stats(jf, &r->e2e, "e2e_ms", 1);
			fprintf(jf, ",\"prompt_tokens\":%llu,\"cached_prompt_tokens\":%llu",
				(unsigned long long)r->prompt_tok, (unsigned long long)r->cached_tok);
			fprintf(jf, ",\"errors\":{");
			for (int s = 0; s < 600; s++)
				if (r->errors[s]) {
					fprintf(jf, "%s\"%d\":%d", first ? "" : ",", s, r->errors[s]);
					first = 0;
				}
			fprintf(jf, "}}");
		}
		fprintf(jf, "]}\n");
		fclose(jf);
	}
	if (opt.png)
		plot(runs, n_runs);
	SSL_CTX_free(ssl_ctx);
	event_base_free(base);
	return 0;
}
