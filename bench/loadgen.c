/*
 * loadgen.c - closed- and open-loop streaming load against a gateway (see
 * loadgen.h).  One libevent loop; one keep-alive connection per closed-loop
 * user, a pool of them for open-loop arrivals.
 */
#include "bench/loadgen.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/clock.h"

#define LG_BODY_MAX 65536

enum lg_hstate { LG_IDLE, LG_HEAD, LG_SIZE, LG_DATA, LG_TRAIL, LG_BODY };

struct lg_ctx;

struct lg_conn {
	struct lg_ctx *x;
	struct bufferevent *bev;
	int user;              /* closed-loop user (1) or open-loop pool (0) */
	int user_batch;        /* a batch-flood user */
	int connected, busy, pending; /* pending: a request waits for the connection */
	/* the request in flight */
	int klass, measured;
	int64_t t0, first_ns, last_ns;
	uint32_t tokens;
	uint64_t prompt_tok, cached_tok;
	enum lg_hstate hs;
	int status, chunked;
	size_t left;
	struct lg_conn *next_idle;
};

struct lg_ctx {
	const struct lg_target *t;
	const struct lg_workload *w;
	const struct lg_level *lv;
	struct lg_result *r;
	struct event_base *base;
	SSL_CTX *ssl;
	struct sockaddr_storage sa;
	socklen_t sa_len;
	uint64_t rng;
	struct lg_conn **conns;
	int n_conns, cap_conns, n_settled, started;
	struct lg_conn *idle;
	int64_t start_ns, warm_ns, end_ns, next_arrival;
	int64_t last_done;     /* the end of the last measured request */
	uint64_t arrivals, issued;
	int stopping, inflight;
	struct event *arrive_ev, *tick_ev, *end_ev;
	char *body;
};

/* ---- samples ---------------------------------------------------------- */

static void lg_add(struct lg_samples *s, double v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		double *nv = realloc(s->v, cap * sizeof(double));

		if (!nv)
			return; /* a sample lost rather than the run */
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
}

static int lg_cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double lg_pct(struct lg_samples *s, double p)
{
	size_t i;

	if (!s->n)
		return 0;
	qsort(s->v, s->n, sizeof(double), lg_cmpd);
	i = (size_t)(p / 100.0 * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

double lg_mean(const struct lg_samples *s)
{
	double sum = 0;

	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i];
	return s->n ? sum / (double)s->n : 0;
}

void lg_result_free(struct lg_result *r)
{
	for (int k = 0; k < 2; k++) {
		free(r->cls[k].ttft.v);
		free(r->cls[k].itl.v);
		free(r->cls[k].e2e.v);
		free(r->cls[k].req_itl.v);
	}
	memset(r, 0, sizeof(*r));
}

/* ---- the workload ----------------------------------------------------- */

static uint64_t lg_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

static double lg_unit(uint64_t *s)
{
	return (double)(lg_rand(s) >> 11) / 9007199254740992.0;
}

static uint32_t lg_between(uint64_t *s, uint32_t lo, uint32_t hi)
{
	return hi <= lo ? lo : lo + (uint32_t)(lg_rand(s) % (uint64_t)(hi - lo + 1));
}

static const char *const lg_words[32] = {
	"river", "stone", "cloud", "green", "house", "light", "water", "table",
	"music", "paper", "garden", "window", "silver", "mountain", "forest", "bread",
	"winter", "summer", "letter", "market", "station", "bridge", "candle", "orange",
	"pencil", "island", "engine", "planet", "harbor", "meadow", "thunder", "violet",
};

static size_t lg_words_into(char *b, size_t at, size_t cap, uint64_t *s, uint32_t n)
{
	for (uint32_t i = 0; i < n && at + 16 < cap; i++)
		at += (size_t)snprintf(b + at, cap - at, "%s ", lg_words[lg_rand(s) % 32]);
	return at;
}

/* The request's body into x->body; its length. */
static size_t lg_body(struct lg_ctx *x, uint32_t *want)
{
	const struct lg_workload *w = x->w;
	size_t n;
	uint32_t words = lg_between(&x->rng, w->prompt_words_min, w->prompt_words_max);

	*want = lg_between(&x->rng, w->output_min, w->output_max);
	n = (size_t)snprintf(x->body, LG_BODY_MAX, "{\"model\":\"%s\",\"prompt\":\"", x->t->model);
	if (w->prefixes && lg_unit(&x->rng) < w->shared_prefix) {
		/* one of the shared prefixes: the same words for the same k */
		uint64_t ps = 0x9e3779b97f4a7c15ULL ^ (w->seed + lg_rand(&x->rng) % w->prefixes + 1);

		n = lg_words_into(x->body, n, LG_BODY_MAX - 256, &ps, w->prefix_words);
	}
	/* a unique start of the request's own part: no two share more */
	n += (size_t)snprintf(x->body + n, LG_BODY_MAX - n, "note %llu: ",
			      (unsigned long long)x->issued);
	n = lg_words_into(x->body, n, LG_BODY_MAX - 256, &x->rng, words);
	n += (size_t)snprintf(x->body + n, LG_BODY_MAX - n,
			      "\",\"raw\":true,\"stream\":true,\"options\":{\"num_predict\":%u,"
			      "\"temperature\":0.8,\"seed\":%llu}}",
			      *want, (unsigned long long)(x->w->seed + x->issued));
	return n;
}

/* ---- requests --------------------------------------------------------- */

static void lg_connect(struct lg_conn *c);
static void lg_maybe_done(struct lg_ctx *x);

static void lg_send(struct lg_conn *c, int64_t t0)
{
	struct lg_ctx *x = c->x;
	uint32_t want;
	size_t n;
	int batch = c->user_batch || (x->w->batch_share > 0 && lg_unit(&x->rng) < x->w->batch_share);

	c->klass = batch ? 1 : 0;
	c->t0 = t0;
	c->measured = t0 >= x->warm_ns && t0 < x->end_ns;
	c->first_ns = c->last_ns = 0;
	c->tokens = 0;
	c->prompt_tok = c->cached_tok = 0;
	c->hs = LG_HEAD;
	c->busy = 1;
	x->inflight++;
	x->issued++;
	if (c->measured)
		x->r->cls[c->klass].started++;
	if (!c->connected) {
		c->pending = 1; /* sent once connected; t0 keeps the arrival */
		if (!c->bev)
			lg_connect(c);
		return;
	}
	n = lg_body(x, &want);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "POST /api/generate HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
			    "Content-Type: application/json\r\nX-Sluice-Ignore-EOS: 1\r\n%s"
			    "Content-Length: %zu\r\n\r\n", x->t->host, x->t->key,
			    batch ? "X-Sluice-Class: batch\r\n" : "", n);
	evbuffer_add(bufferevent_get_output(c->bev), x->body, n);
}

static void lg_on_tokens(struct lg_conn *c, uint32_t n)
{
	struct lg_ctx *x = c->x;
	struct lg_class *k = &x->r->cls[c->klass];
	int64_t now = cm_mono_ns();

	if (!n)
		return;
	if (c->measured) {
		if (!c->first_ns)
			lg_add(&k->ttft, (double)(now - c->t0) / 1e6);
		else
			lg_add(&k->itl, (double)(now - c->last_ns) / 1e6);
		/* several in one read arrived together */
		for (uint32_t i = 1; i < n; i++)
			lg_add(&k->itl, 0);
	}
	if (!c->first_ns)
		c->first_ns = now;
	c->last_ns = now;
	c->tokens += n;
}

static void lg_finish(struct lg_conn *c, int status)
{
	struct lg_ctx *x = c->x;
	struct lg_class *k = &x->r->cls[c->klass];
	int64_t now = cm_mono_ns();

	if (c->measured) {
		x->last_done = now;
		k->status[status > 0 && status < LG_STATUS_MAX ? status : 0]++;
		if (status == 200 && c->first_ns) {
			double gap = c->tokens > 1
				? (double)(c->last_ns - c->first_ns) / 1e6 / (c->tokens - 1) : 0;
			double ttft = (double)(c->first_ns - c->t0) / 1e6;

			k->ok++;
			k->tokens += c->tokens;
			lg_add(&k->e2e, (double)(now - c->t0) / 1e6);
			if (c->tokens > 1)
				lg_add(&k->req_itl, gap);
			k->prompt_tokens += c->prompt_tok;
			k->cached_tokens += c->cached_tok;
			if (ttft <= x->lv->ttft_target_ms &&
			    (x->lv->itl_target_ms <= 0 || gap <= x->lv->itl_target_ms)) {
				k->met++;
				k->good_tokens += c->tokens;
			}
		}
	}
	c->busy = 0;
	c->hs = LG_IDLE;
	x->inflight--;
	if (c->user && !x->stopping && (!x->lv->max_requests || x->issued < x->lv->max_requests)) {
		lg_send(c, now);
		return;
	}
	if (!c->user && c->connected) {
		c->next_idle = x->idle;
		x->idle = c;
	}
	lg_maybe_done(x);
}

/* ---- HTTP ------------------------------------------------------------- */

static uint32_t lg_count_tokens(const char *p, size_t n)
{
	uint32_t k = 0;
	const char *e = p + n;

	while (p < e && (p = memmem(p, (size_t)(e - p), "\"done\":false", 12)) != NULL) {
		k++;
		p += 12;
	}
	return k;
}

static void lg_chunk(struct lg_conn *c, const char *d, size_t n)
{
	const char *pe, *ce;

	lg_on_tokens(c, c->status == 200 ? lg_count_tokens(d, n) : 0);
	pe = memmem(d, n, "\"prompt_eval_count\":", 20);
	ce = memmem(d, n, "\"cached_prompt_tokens\":", 23);
	if (pe)
		c->prompt_tok = strtoull(pe + 20, NULL, 10);
	if (ce)
		c->cached_tok = strtoull(ce + 23, NULL, 10);
}

/* One step of the response parser: 1 to go on, 0 when it needs bytes or
 * the response ended. */
static int lg_step(struct lg_conn *c, struct evbuffer *in)
{
	size_t len;
	char *line;

	switch (c->hs) {
	case LG_HEAD: {
		struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		char h[4096], *cl;
		size_t hn;

		if (p.pos < 0)
			return 0;
		hn = (size_t)p.pos + 4;
		if (hn >= sizeof(h)) {
			evbuffer_drain(in, hn);
			lg_finish(c, 0);
			return 0;
		}
		evbuffer_remove(in, h, hn);
		h[hn] = '\0';
		c->status = hn > 12 ? atoi(h + 9) : 0;
		c->chunked = strcasestr(h, "transfer-encoding: chunked") != NULL;
		cl = strcasestr(h, "content-length:");
		c->left = cl ? strtoul(cl + 15, NULL, 10) : 0;
		c->hs = c->chunked ? LG_SIZE : LG_BODY;
		return 1;
	}
	case LG_BODY: {
		size_t have = evbuffer_get_length(in), take = have < c->left ? have : c->left;

		evbuffer_drain(in, take);
		c->left -= take;
		if (c->left)
			return 0;
		lg_finish(c, c->status == 200 ? 0 : c->status); /* 200 must stream */
		return 0;
	}
	case LG_SIZE:
		line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
		if (!line)
			return 0;
		c->left = strtoul(line, NULL, 16);
		free(line);
		c->hs = c->left ? LG_DATA : LG_TRAIL;
		return 1;
	case LG_DATA: {
		unsigned char *d;

		if (evbuffer_get_length(in) < c->left + 2)
			return 0;
		d = evbuffer_pullup(in, (ev_ssize_t)c->left);
		lg_chunk(c, (const char *)d, c->left);
		evbuffer_drain(in, c->left + 2);
		c->hs = LG_SIZE;
		return 1;
	}
	case LG_TRAIL:
		line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
		if (!line)
			return 0;
		free(line);
		lg_finish(c, c->status);
		return 0;
	default:
		return 0;
	}
}

static void lg_read(struct bufferevent *bev, void *arg)
{
	struct lg_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	while (c->busy && lg_step(c, in))
		;
}

static void lg_start(struct lg_ctx *x);

static void lg_event(struct bufferevent *bev, short what, void *arg)
{
	struct lg_conn *c = arg;
	struct lg_ctx *x = c->x;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		c->connected = 1;
		if (!x->started) {
			if (++x->n_settled == x->n_conns)
				lg_start(x);
			return;
		}
		if (c->pending) {
			c->pending = 0;
			x->inflight--;
			x->issued--;
			if (c->measured)
				x->r->cls[c->klass].started--;
			lg_send(c, c->t0);
		} else if (!c->user) {
			c->next_idle = x->idle;
			x->idle = c;
		}
		return;
	}
	if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)))
		return;
	/* gone: a request in flight is an error; the connection is opened
	 * again when next needed */
	if (x->idle == c) {
		x->idle = c->next_idle;
	} else {
		for (struct lg_conn *p = x->idle; p; p = p->next_idle)
			if (p->next_idle == c) {
				p->next_idle = c->next_idle;
				break;
			}
	}
	bufferevent_free(c->bev);
	c->bev = NULL;
	c->connected = 0;
	if (!x->started) {
		if (++x->n_settled == x->n_conns)
			lg_start(x);
		return;
	}
	if (c->busy) {
		c->pending = 0;
		lg_finish(c, 0); /* a user sends again: connects first */
	} else if (c->user && !x->stopping) {
		lg_connect(c);
	}
}

static void lg_connect(struct lg_conn *c)
{
	struct lg_ctx *x = c->x;
	struct timeval tmo = { 120, 0 };

	c->connected = 0;
	if (x->t->tls) {
		SSL *ssl = SSL_new(x->ssl);

		if (!ssl)
			goto fail;
		SSL_set_tlsext_host_name(ssl, x->t->host);
		if (!x->t->insecure)
			SSL_set1_host(ssl, x->t->host);
		c->bev = bufferevent_openssl_socket_new(x->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
							BEV_OPT_CLOSE_ON_FREE);
	} else {
		c->bev = bufferevent_socket_new(x->base, -1, BEV_OPT_CLOSE_ON_FREE);
	}
	if (!c->bev)
		goto fail;
	bufferevent_setcb(c->bev, lg_read, NULL, lg_event, c);
	bufferevent_set_timeouts(c->bev, &tmo, NULL);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&x->sa, (int)x->sa_len) == 0)
		return;
fail:
	/* reported through the event path on the next turn is not possible
	 * without a bufferevent: count it here */
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (!x->started) {
		++x->n_settled;
		return;
	}
	if (c->busy) {
		c->pending = 0;
		c->user = 0; /* do not loop on a failing connect */
		lg_finish(c, 0);
	}
}

/* ---- the level -------------------------------------------------------- */

static struct lg_conn *lg_conn_new(struct lg_ctx *x, int user, int batch)
{
	struct lg_conn *c;

	if (x->n_conns == x->cap_conns) {
		int cap = x->cap_conns ? x->cap_conns * 2 : 64;
		struct lg_conn **nc = realloc(x->conns, (size_t)cap * sizeof(*nc));

		if (!nc)
			return NULL;
		x->conns = nc;
		x->cap_conns = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->x = x;
	c->user = user;
	c->user_batch = batch;
	x->conns[x->n_conns++] = c;
	return c;
}

static void lg_maybe_done(struct lg_ctx *x)
{
	if (x->stopping && x->inflight == 0)
		event_base_loopexit(x->base, NULL);
}

static void lg_arm(struct event *ev, int64_t ns)
{
	struct timeval tv;

	if (ns < 0)
		ns = 0;
	tv.tv_sec = ns / 1000000000;
	tv.tv_usec = (ns % 1000000000) / 1000;
	evtimer_add(ev, &tv);
}

static void lg_arrive_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lg_ctx *x = arg;
	int64_t now = cm_mono_ns();

	(void)fd;
	(void)what;
	while (!x->stopping && x->next_arrival <= now && x->next_arrival < x->end_ns) {
		struct lg_conn *c = x->idle;

		if (x->lv->max_requests && x->issued >= x->lv->max_requests)
			break;
		x->arrivals += x->next_arrival >= x->warm_ns;
		if (c) {
			x->idle = c->next_idle;
		} else if (x->n_conns < x->lv->max_connections) {
			c = lg_conn_new(x, 0, 0);
		}
		if (c)
			lg_send(c, x->next_arrival);
		else if (x->next_arrival >= x->warm_ns)
			x->r->lost++;
		x->next_arrival += (int64_t)(-log(1 - lg_unit(&x->rng)) / x->lv->rate * 1e9);
	}
	if (!x->stopping && x->next_arrival < x->end_ns)
		lg_arm(x->arrive_ev, x->next_arrival - now);
}

static void lg_end_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lg_ctx *x = arg;

	(void)fd;
	(void)what;
	if (!x->stopping && x->r->cls[0].started < x->lv->min_requests &&
	    (double)(x->end_ns + 1000000000 - x->start_ns) / 1e9 <= x->lv->max_seconds) {
		/* too few measured yet: one more second */
		x->end_ns += 1000000000;
		lg_arm(x->end_ev, 1000000000);
		if (x->lv->rate > 0 && !evtimer_pending(x->arrive_ev, NULL))
			lg_arm(x->arrive_ev, x->next_arrival - cm_mono_ns());
		return;
	}
	if (!x->stopping) {
		x->stopping = 1;
		evtimer_del(x->arrive_ev);
		lg_maybe_done(x);
		/* the drain's deadline */
		lg_arm(x->end_ev, (int64_t)(x->lv->drain_seconds * 1e9));
		return;
	}
	x->r->unfinished = (uint64_t)x->inflight;
	event_base_loopexit(x->base, NULL);
}

static void lg_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lg_ctx *x = arg;
	struct lg_class *k = &x->r->cls[0];
	char line[256];
	double el = (double)(cm_mono_ns() - x->start_ns) / 1e9;

	(void)fd;
	(void)what;
	if (x->lv->progress) {
		snprintf(line, sizeof(line), "%s: %4.0f/%.0f s%s, %llu answered, %d in flight, "
			 "p95 TTFT %.0f ms, p95 ITL %.0f ms", x->lv->label ? x->lv->label : "level",
			 el, x->lv->seconds, x->stopping ? " (draining)" : "",
			 (unsigned long long)k->ok, x->inflight, lg_pct(&k->ttft, 95),
			 lg_pct(&k->itl, 95));
		x->lv->progress(x->lv->progress_ctx, line);
	}
	lg_arm(x->tick_ev, 1000000000);
}

static void lg_start(struct lg_ctx *x)
{
	const struct lg_level *lv = x->lv;

	x->started = 1;
	x->start_ns = cm_mono_ns();
	x->warm_ns = x->start_ns + (int64_t)(lv->warmup * 1e9);
	x->end_ns = x->start_ns + (int64_t)(lv->seconds * 1e9);
	for (int i = 0; i < x->n_conns; i++) {
		struct lg_conn *c = x->conns[i];

		if (c->user) {
			lg_send(c, cm_mono_ns());
		} else if (c->connected) {
			c->next_idle = x->idle;
			x->idle = c;
		}
	}
	if (lv->rate > 0) {
		x->next_arrival = x->start_ns;
		lg_arm(x->arrive_ev, 0);
	}
	lg_arm(x->end_ev, x->end_ns - x->start_ns);
	lg_arm(x->tick_ev, 1000000000);
}

static int lg_resolve(struct lg_ctx *x, char *err, size_t err_len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	char port[16];
	int rc;

	snprintf(port, sizeof(port), "%d", x->t->port);
	rc = getaddrinfo(x->t->host, port, &hints, &ai);
	if (rc != 0 || !ai) {
		snprintf(err, err_len, "%s: %s", x->t->host, gai_strerror(rc));
		return -1;
	}
	memcpy(&x->sa, ai->ai_addr, ai->ai_addrlen);
	x->sa_len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static int lg_tls(struct lg_ctx *x, char *err, size_t err_len)
{
	x->ssl = SSL_CTX_new(TLS_client_method());
	if (!x->ssl) {
		snprintf(err, err_len, "TLS: no context");
		return -1;
	}
	if (x->t->insecure) {
		SSL_CTX_set_verify(x->ssl, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	if (x->t->cacert ? SSL_CTX_load_verify_locations(x->ssl, x->t->cacert, NULL) != 1
			 : SSL_CTX_set_default_verify_paths(x->ssl) != 1) {
		snprintf(err, err_len, "TLS: cannot load CA certificates from %s",
			 x->t->cacert ? x->t->cacert : "the system store");
		return -1;
	}
	SSL_CTX_set_verify(x->ssl, SSL_VERIFY_PEER, NULL);
	return 0;
}

static int lg_setup(struct lg_ctx *x, char *err, size_t err_len)
{
	const struct lg_level *lv = x->lv;
	int pool = 0;

	if (lg_resolve(x, err, err_len) != 0 || (x->t->tls && lg_tls(x, err, err_len) != 0))
		return -1;
	x->base = event_base_new();
	x->body = malloc(LG_BODY_MAX);
	if (!x->base || !x->body)
		goto oom;
	x->arrive_ev = evtimer_new(x->base, lg_arrive_cb, x);
	x->tick_ev = evtimer_new(x->base, lg_tick_cb, x);
	x->end_ev = evtimer_new(x->base, lg_end_cb, x);
	if (!x->arrive_ev || !x->tick_ev || !x->end_ev)
		goto oom;
	for (int i = 0; i < lv->concurrency; i++)
		if (!lg_conn_new(x, 1, 0))
			goto oom;
	for (int i = 0; i < lv->batch_clients; i++)
		if (!lg_conn_new(x, 1, 1))
			goto oom;
	if (lv->rate > 0) {
		/* connections for about two seconds of arrivals open before the
		 * clock starts; more are opened (and timed) as needed */
		pool = (int)ceil(lv->rate * 2) + 4;
		if (pool > lv->max_connections)
			pool = lv->max_connections;
	}
	for (int i = 0; i < pool; i++)
		if (!lg_conn_new(x, 0, 0))
			goto oom;
	if (x->n_conns == 0) {
		snprintf(err, err_len, "nothing to run: no concurrency, rate or batch clients");
		return -1;
	}
	for (int i = 0, n = x->n_conns; i < n; i++)
		lg_connect(x->conns[i]);
	return 0;
oom:
	snprintf(err, err_len, "out of memory");
	return -1;
}

int lg_run(const struct lg_target *t, const struct lg_workload *w, const struct lg_level *lv,
	   struct lg_result *out, char *err, size_t err_len)
{
	struct lg_ctx x = { .t = t, .w = w, .lv = lv, .r = out };
	int rc = -1;

	memset(out, 0, sizeof(*out));
	x.rng = w->seed * 0x2545F4914F6CDD1DULL + 0x9E3779B97F4A7C15ULL;
	if (lg_setup(&x, err, err_len) != 0)
		goto out;
	if (x.n_settled == x.n_conns && !x.started)
		lg_start(&x);
	event_base_dispatch(x.base);
	if (!x.started) {
		snprintf(err, err_len, "no connection to %s:%d", t->host, t->port);
		goto out;
	}
	{
		int64_t now = cm_mono_ns(), end = now < x.end_ns ? now : x.end_ns;

		/* arrivals over the window they came in; the answers over the
		 * time they took to come back */
		out->offered_rate = end > x.warm_ns ? (double)x.arrivals * 1e9 / (double)(end - x.warm_ns) : 0;
		if (x.last_done > end)
			end = x.last_done;
		out->window_s = (double)(end - x.warm_ns) / 1e9;
		out->wall_s = (double)(now - x.start_ns) / 1e9;
	}
	rc = 0;
out:
	for (int i = 0; i < x.n_conns; i++) {
		if (x.conns[i]->bev)
			bufferevent_free(x.conns[i]->bev);
		free(x.conns[i]);
	}
	free(x.conns);
	free(x.body);
	if (x.arrive_ev)
		event_free(x.arrive_ev);
	if (x.tick_ev)
		event_free(x.tick_ev);
	if (x.end_ev)
		event_free(x.end_ev);
	if (x.base)
		event_base_free(x.base);
	if (x.ssl)
		SSL_CTX_free(x.ssl);
	return rc;
}
