/*
 * routing-sim.c - replays a synthetic multi-tenant trace against a fleet of
 * simulated workers under four placement policies and reports prefix-cache
 * hit rate, load imbalance and estimated time to first token.
 *
 * No model, no GPU, no I/O beyond stdout: a discrete-event simulation in
 * one thread.  The trace is a function of the seed and the parameters only,
 * and each worker count gets its own trace (arrival rate scales with the
 * fleet) shared by the four policies.
 *
 * Trace: T tenants with P system prompts each; a request picks its prompt by
 * a Zipf law over all T * P prompts (rank order shuffled by the seed), adds
 * a unique user part, and asks for some output tokens.  Arrivals are
 * Poisson at rate `load` * workers / E[uncached prefill time]; during bursts
 * (B of them, each 0.5 % of the trace) one random tenant floods at
 * (burst_factor - 1) times the base rate on top of it.
 *
 * Worker model: a FIFO prefill server (prefill_us per uncached prompt
 * token), then decode in a batch that does not slow down with its size
 * (decode_ms per output token); a request is in flight from dispatch to its
 * last token.  Prefix cache: LRU over (tenant, prompt) entries up to
 * kv_tokens tokens; a prompt found in the dispatched worker's cache costs
 * no prefill for its system part; a missed one is inserted (evicting least
 * recently used entries).  TTFT = prefill queue wait + uncached prefill.
 *
 * Policies: round robin, least loaded (fewest in flight), plain rendezvous
 * on the routing key (gw_place_choose with no bound) and bounded-load
 * rendezvous (gw_place_choose with c).  The routing key is the real one
 * (gw_place_key over the tenant's salt and the prompt text).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crypto.h"
#include "gateway/placement.h"

#define MAX_WORKER_COUNTS 16
#define MAX_WORKERS 4096
#define N_SAMPLES 2000 /* load-imbalance samples per run, evenly in time */

struct opts {
	unsigned workers[MAX_WORKER_COUNTS];
	unsigned n_workers;
	unsigned requests;
	unsigned tenants;
	unsigned prompts;        /* system prompts per tenant */
	double zipf_s;
	unsigned kv_tokens;      /* prefix-cache capacity per worker, tokens */
	unsigned prefix_min, prefix_max;  /* system prompt tokens */
	unsigned user_min, user_max;      /* unique prompt tokens */
	unsigned out_min, out_max;        /* output tokens */
	double prefill_us;       /* per uncached prompt token */
	double decode_ms;        /* per output token */
	double load;             /* offered prefill utilisation without cache */
	unsigned bursts;
	double burst_factor;
	double c;
	uint64_t seed;
	bool md;
};

enum policy { POL_RR, POL_LL, POL_CH, POL_OURS, POL_N };
static const char *const policy_name[POL_N] = {
	"round robin", "least loaded", "consistent hash", "bounded rendezvous",
};

struct req {
	double t;        /* arrival, s */
	uint32_t prefix; /* global prompt id: tenant * P + k */
	uint32_t user;   /* unique tokens */
	uint32_t out;    /* output tokens */
};

struct result {
	double hit_rate;
	double imb_mean, imb_p99;
	double ttft_p50, ttft_p95, ttft_p99; /* ms */
	double spill;    /* share of requests not on their top worker */
};

/* ==== randomness ==================================================== */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_unit(void) /* (0, 1) */
{
	return ((double)(rng_next() >> 11) + 0.5) / 9007199254740992.0;
}

static unsigned rng_range(unsigned lo, unsigned hi) /* [lo, hi] */
{
	return lo + (unsigned)(rng_next() % ((uint64_t)hi - lo + 1));
}

/* ==== per-worker LRU prefix cache =================================== */

struct cache {
	unsigned nw, np;
	int32_t *prev, *next;    /* [nw * np], -1 = none */
	uint8_t *in;             /* [nw * np] */
	int32_t *head, *tail;    /* [nw] MRU / LRU */
	uint64_t *used;          /* [nw] tokens */
	uint64_t cap;
	const uint32_t *len;     /* [np] prefix tokens */
};

static void cache_init(struct cache *c, unsigned nw, unsigned np,
		       uint64_t cap, const uint32_t *len)
{
	size_t n = (size_t)nw * np;

	c->nw = nw;
	c->np = np;
	c->cap = cap;
	c->len = len;
	c->prev = malloc(n * sizeof(*c->prev));
	c->next = malloc(n * sizeof(*c->next));
	c->in = calloc(n, 1);
	c->head = malloc(nw * sizeof(*c->head));
	c->tail = malloc(nw * sizeof(*c->tail));
	c->used = calloc(nw, sizeof(*c->used));
	if (!c->prev || !c->next || !c->in || !c->head || !c->tail || !c->used) {
		fprintf(stderr, "routing-sim: out of memory\n");
		exit(1);
	}
	for (unsigned w = 0; w < nw; w++)
		c->head[w] = c->tail[w] = -1;
}

static void cache_free(struct cache *c)
{
	free(c->prev);
	free(c->next);
	free(c->in);
	free(c->head);
	free(c->tail);
	free(c->used);
}

static void lru_unlink(struct cache *c, unsigned w, uint32_t p)
{
	size_t base = (size_t)w * c->np;
	int32_t pv = c->prev[base + p], nx = c->next[base + p];

	if (pv >= 0)
		c->next[base + pv] = nx;
	else
		c->head[w] = nx;
	if (nx >= 0)
		c->prev[base + nx] = pv;
	else
		c->tail[w] = pv;
}

static void lru_push_front(struct cache *c, unsigned w, uint32_t p)
{
	size_t base = (size_t)w * c->np;

	c->prev[base + p] = -1;
	c->next[base + p] = c->head[w];
	if (c->head[w] >= 0)
		c->prev[base + c->head[w]] = (int32_t)p;
	c->head[w] = (int32_t)p;
	if (c->tail[w] < 0)
		c->tail[w] = (int32_t)p;
}

/* 1 on a hit; on a miss inserts p (evicting LRU entries). */
static int cache_access(struct cache *c, unsigned w, uint32_t p)
{
	size_t base = (size_t)w * c->np;

	if (c->in[base + p]) {
		lru_unlink(c, w, p);
		lru_push_front(c, w, p);
		return 1;
	}
	if (c->len[p] > c->cap)
		return 0;
	while (c->used[w] + c->len[p] > c->cap) {
		int32_t v = c->tail[w];

		lru_unlink(c, w, (uint32_t)v);
		c->in[base + v] = 0;
		c->used[w] -= c->len[v];
	}
	lru_push_front(c, w, p);
	c->in[base + p] = 1;
	c->used[w] += c->len[p];
	return 0;
}

/* ==== completion heap =============================================== */

struct done_ev {
	double t;
	uint32_t w;
};

struct heap {
	struct done_ev *a;
	size_t n, cap;
};

static void heap_push(struct heap *h, double t, uint32_t w)
{
	size_t i;

	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 1024;
		h->a = realloc(h->a, h->cap * sizeof(*h->a));
		if (!h->a) {
			fprintf(stderr, "routing-sim: out of memory\n");
			exit(1);
		}
	}
	i = h->n++;
	while (i > 0 && h->a[(i - 1) / 2].t > t) {
		h->a[i] = h->a[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->a[i] = (struct done_ev){ t, w };
}

static struct done_ev heap_pop(struct heap *h)
{
	struct done_ev top = h->a[0], last = h->a[--h->n];
	size_t i = 0;

	for (;;) {
		size_t l = 2 * i + 1, m;

		if (l >= h->n)
			break;
		m = l + 1 < h->n && h->a[l + 1].t < h->a[l].t ? l + 1 : l;
		if (h->a[m].t >= last.t)
			break;
		h->a[i] = h->a[m];
		i = m;
	}
	if (h->n > 0)
		h->a[i] = last;
	return top;
}

/* ==== trace ========================================================= */

struct trace {
	struct req *r;
	unsigned n;
	unsigned np;               /* prompts */
	uint32_t *plen;            /* [np] system prompt tokens */
	struct gw_place_key *key;  /* [np] */
	double duration;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void trace_build(const struct opts *o, unsigned workers, struct trace *tr)
{
	unsigned np = o->tenants * o->prompts;
	double *cdf = malloc(np * sizeof(*cdf));
	uint32_t *rank_to_prompt = malloc(np * sizeof(*rank_to_prompt));
	double *burst_start = malloc((o->bursts + 1) * sizeof(double));
	unsigned *burst_tenant = malloc((o->bursts + 1) * sizeof(unsigned));
	double sum = 0.0, mean_prefix = 0.0, mean_service, lambda, extra, t = 0.0;
	double burst_len;

	if (!cdf || !rank_to_prompt || !burst_start || !burst_tenant) {
		fprintf(stderr, "routing-sim: out of memory\n");
		exit(1);
	}
	rng_state = o->seed * 0x2545f4914f6cdd1dull + 1;
	tr->np = np;
	tr->n = o->requests;
	tr->r = malloc(o->requests * sizeof(*tr->r));
	tr->plen = malloc(np * sizeof(*tr->plen));
	tr->key = malloc(np * sizeof(*tr->key));
	if (!tr->r || !tr->plen || !tr->key) {
		fprintf(stderr, "routing-sim: out of memory\n");
		exit(1);
	}
	/* prompts: lengths, text and routing keys under each tenant's salt */
	for (unsigned p = 0; p < np; p++) {
		unsigned tenant = p / o->prompts;
		uint8_t salt[CM_SHA256_LEN];
		char seedtxt[64], text[160];
		int n;

		tr->plen[p] = rng_range(o->prefix_min, o->prefix_max);
		n = snprintf(seedtxt, sizeof(seedtxt), "salt/%" PRIu64 "/%u",
			     o->seed, tenant);
		cm_sha256(seedtxt, (size_t)n, salt);
		n = snprintf(text, sizeof(text),
			     "You are the assistant of team %u. Policy %u: be "
			     "concise, cite sources, never guess.", tenant,
			     p % o->prompts);
		gw_place_key(salt, sizeof(salt), text, (size_t)n,
			     GW_PLACE_PREFIX_BYTES_DEFAULT, &tr->key[p]);
		rank_to_prompt[p] = p;
	}
	/* popularity: Zipf over ranks, ranks shuffled over prompts */
	for (unsigned i = np; i > 1; i--) {
		unsigned j = (unsigned)(rng_next() % i);
		uint32_t x = rank_to_prompt[i - 1];

		rank_to_prompt[i - 1] = rank_to_prompt[j];
		rank_to_prompt[j] = x;
	}
	for (unsigned r = 0; r < np; r++) {
		sum += 1.0 / pow(r + 1.0, o->zipf_s);
		cdf[r] = sum;
	}
	for (unsigned r = 0; r < np; r++) {
		cdf[r] /= sum;
		mean_prefix += tr->plen[rank_to_prompt[r]] *
			       (cdf[r] - (r ? cdf[r - 1] : 0.0));
	}
	mean_service = (mean_prefix + (o->user_min + o->user_max) / 2.0) *
		       o->prefill_us * 1e-6;
	lambda = o->load * workers / mean_service;
	extra = (o->burst_factor - 1.0) * lambda;
	tr->duration = o->requests / lambda; /* before bursts: an estimate */
	burst_len = tr->duration * 0.005;
	for (unsigned b = 0; b < o->bursts; b++) {
		burst_start[b] = rng_unit() * tr->duration;
		burst_tenant[b] = (unsigned)(rng_next() % o->tenants);
	}
	/* sort bursts by start (insertion sort: few) */
	for (unsigned i = 1; i < o->bursts; i++) {
		for (unsigned j = i; j > 0 && burst_start[j] < burst_start[j - 1]; j--) {
			double ts = burst_start[j];
			unsigned tt = burst_tenant[j];

			burst_start[j] = burst_start[j - 1];
			burst_tenant[j] = burst_tenant[j - 1];
			burst_start[j - 1] = ts;
			burst_tenant[j - 1] = tt;
		}
	}
	for (unsigned i = 0, b = 0; i < o->requests; i++) {
		struct req *q = &tr->r[i];
		bool in_burst;
		double rate;

		while (b < o->bursts && t > burst_start[b] + burst_len)
			b++;
		in_burst = b < o->bursts && t >= burst_start[b];
		rate = lambda + (in_burst ? extra : 0.0);
		t += -log(rng_unit()) / rate;
		q->t = t;
		if (in_burst && rng_unit() * rate < extra) {
			q->prefix = burst_tenant[b] * o->prompts +
				    (unsigned)(rng_next() % o->prompts);
		} else {
			double u = rng_unit();
			unsigned lo = 0, hi = np - 1;

			while (lo < hi) {
				unsigned mid = (lo + hi) / 2;

				if (cdf[mid] < u)
					lo = mid + 1;
				else
					hi = mid;
			}
			q->prefix = rank_to_prompt[lo];
		}
		q->user = rng_range(o->user_min, o->user_max);
		q->out = rng_range(o->out_min, o->out_max);
	}
	tr->duration = t;
	free(cdf);
	free(rank_to_prompt);
	free(burst_start);
	free(burst_tenant);
}

static void trace_free(struct trace *tr)
{
	free(tr->r);
	free(tr->plen);
	free(tr->key);
}

/* ==== one run ======================================================= */

static double pct(const double *sorted, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0.0;
	i = (size_t)ceil(p * n) - 1;
	if (i >= n)
		i = n - 1;
	return sorted[i];
}

static void run(const struct opts *o, const struct trace *tr, unsigned nw,
		enum policy pol, struct result *res)
{
	struct gw_place_worker *w = calloc(nw, sizeof(*w));
	char (*names)[24] = calloc(nw, sizeof(*names));
	double *free_at = calloc(nw, sizeof(*free_at));
	double *ttft = malloc(tr->n * sizeof(*ttft));
	double *imb = malloc(N_SAMPLES * sizeof(*imb));
	struct heap h = { 0 };
	struct cache c;
	uint64_t prompt_tok = 0, cached_tok = 0, total_load = 0;
	unsigned rr = 0, n_imb = 0, spills = 0, sample = 0;
	double dt_sample = tr->duration / N_SAMPLES, imb_sum = 0.0;

	if (!w || !names || !free_at || !ttft || !imb) {
		fprintf(stderr, "routing-sim: out of memory\n");
		exit(1);
	}
	for (unsigned i = 0; i < nw; i++) {
		snprintf(names[i], sizeof(names[i]), "worker-%u", i);
		w[i] = (struct gw_place_worker){ .name = names[i], .weight = 1.0,
						 .healthy = true };
	}
	cache_init(&c, nw, tr->np, o->kv_tokens, tr->plen);

	for (unsigned i = 0; i < tr->n; i++) {
		const struct req *q = &tr->r[i];
		unsigned pick = 0, cached, plen = tr->plen[q->prefix];
		double start, done;

		/* samples of the in-flight spread, evenly spaced in time */
		while (sample < N_SAMPLES && (sample + 1) * dt_sample <= q->t) {
			double ts = (sample + 1) * dt_sample;
			unsigned mx = 0;

			while (h.n > 0 && h.a[0].t <= ts) {
				struct done_ev e = heap_pop(&h);

				w[e.w].load--;
				total_load--;
			}
			for (unsigned k = 0; k < nw; k++)
				mx = w[k].load > mx ? w[k].load : mx;
			if (total_load > 0)
				imb[n_imb++] = mx / ((double)total_load / nw);
			sample++;
		}
		while (h.n > 0 && h.a[0].t <= q->t) {
			struct done_ev e = heap_pop(&h);

			w[e.w].load--;
			total_load--;
		}

		switch (pol) {
		case POL_RR:
			pick = rr++ % nw;
			break;
		case POL_LL: {
			/* fewest in flight; ties go round robin */
			unsigned best = UINT32_MAX;

			for (unsigned k = 0; k < nw; k++) {
				unsigned j = (rr + k) % nw;

				if (w[j].load < best) {
					best = w[j].load;
					pick = j;
				}
			}
			rr = pick + 1;
			break;
		}
		case POL_CH:
		case POL_OURS: {
			struct gw_place_pick p;

			if (gw_place_choose(&tr->key[q->prefix], w, nw,
					    pol == POL_CH ? 0.0 : o->c, &p) != CM_OK) {
				fprintf(stderr, "routing-sim: no worker chosen\n");
				exit(1);
			}
			pick = (unsigned)p.index;
			spills += p.spilled;
			break;
		}
		default:
			break;
		}

		cached = cache_access(&c, pick, q->prefix) ? plen : 0;
		prompt_tok += plen + q->user;
		cached_tok += cached;
		start = q->t > free_at[pick] ? q->t : free_at[pick];
		free_at[pick] = start + (plen - cached + q->user) * o->prefill_us * 1e-6;
		ttft[i] = (free_at[pick] - q->t) * 1e3;
		done = free_at[pick] + q->out * o->decode_ms * 1e-3;
		heap_push(&h, done, pick);
		w[pick].load++;
		total_load++;
	}

	qsort(ttft, tr->n, sizeof(*ttft), cmp_double);
	for (unsigned k = 0; k < n_imb; k++)
		imb_sum += imb[k];
	qsort(imb, n_imb, sizeof(*imb), cmp_double);
	res->hit_rate = prompt_tok ? (double)cached_tok / prompt_tok : 0.0;
	res->imb_mean = n_imb ? imb_sum / n_imb : 0.0;
	res->imb_p99 = pct(imb, n_imb, 0.99);
	res->ttft_p50 = pct(ttft, tr->n, 0.50);
	res->ttft_p95 = pct(ttft, tr->n, 0.95);
	res->ttft_p99 = pct(ttft, tr->n, 0.99);
	res->spill = (double)spills / tr->n;
	cache_free(&c);
	free(h.a);
	free(w);
	free(names);
	free(free_at);
	free(ttft);
	free(imb);
}

/* ==== options ======================================================= */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: routing-sim [options]\n"
		"  --workers LIST        worker counts, 4..%u (default 8,64,512)\n"
		"  --requests N          requests per trace (default 200000)\n"
		"  --tenants N           tenants (default 256)\n"
		"  --prompts N           system prompts per tenant (default 4)\n"
		"  --zipf S              popularity exponent (default 1.0)\n"
		"  --kv-tokens N         prefix-cache tokens per worker (default 131072)\n"
		"  --prefix MIN,MAX      system prompt tokens (default 256,4096)\n"
		"  --user MIN,MAX        unique prompt tokens (default 16,512)\n"
		"  --output MIN,MAX      output tokens (default 16,512)\n"
		"  --prefill-us X        prefill cost per uncached token, us (default 100)\n"
		"  --decode-ms X         decode time per output token, ms (default 25)\n"
		"  --load X              offered prefill load without cache, 0..2 (default 0.7)\n"
		"  --bursts N            single-tenant bursts in the trace (default 20)\n"
		"  --burst-factor X      rate multiplier during a burst (default 2)\n"
		"  --c X                 load bound factor of the bounded policy (default 1.25)\n"
		"  --seed N              trace seed (default 1)\n"
		"  --format md|text      output format (default text)\n",
		MAX_WORKERS);
}

static int parse_u(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

static int parse_d(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

static int parse_pair(const char *s, unsigned lo, unsigned hi, unsigned *a,
		      unsigned *b)
{
	char buf[64], *comma;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	comma = strchr(buf, ',');
	if (!comma)
		return -1;
	*comma = '\0';
	if (parse_u(buf, lo, hi, a) || parse_u(comma + 1, lo, hi, b) || *a > *b)
		return -1;
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){
		.workers = { 8, 64, 512 }, .n_workers = 3, .requests = 200000,
		.tenants = 256, .prompts = 4, .zipf_s = 1.0, .kv_tokens = 131072,
		.prefix_min = 256, .prefix_max = 4096, .user_min = 16,
		.user_max = 512, .out_min = 16, .out_max = 512,
		.prefill_us = 100.0, .decode_ms = 25.0, .load = 0.7,
		.bursts = 20, .burst_factor = 2.0, .c = 1.25, .seed = 1,
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!v) {
			fprintf(stderr, "routing-sim: %s: expected a value, found the end of the arguments\n", a);
			return -1;
		}
		i++;
		if (!strcmp(a, "--workers")) {
			char buf[256], *tok, *save = NULL;

			if (strlen(v) >= sizeof(buf)) {
				bad = 1;
			} else {
				strcpy(buf, v);
				o->n_workers = 0;
				for (tok = strtok_r(buf, ",", &save); tok && !bad;
				     tok = strtok_r(NULL, ",", &save)) {
					if (o->n_workers == MAX_WORKER_COUNTS ||
					    parse_u(tok, 4, MAX_WORKERS,
						    &o->workers[o->n_workers]))
						bad = 1;
					else
						o->n_workers++;
				}
				bad |= o->n_workers == 0;
			}
		} else if (!strcmp(a, "--requests")) {
			bad = parse_u(v, 1000, 100000000, &o->requests);
		} else if (!strcmp(a, "--tenants")) {
			bad = parse_u(v, 1, 100000, &o->tenants);
		} else if (!strcmp(a, "--prompts")) {
			bad = parse_u(v, 1, 1000, &o->prompts);
		} else if (!strcmp(a, "--zipf")) {
			bad = parse_d(v, 0.0, 5.0, &o->zipf_s);
		} else if (!strcmp(a, "--kv-tokens")) {
			bad = parse_u(v, 1, 1u << 30, &o->kv_tokens);
		} else if (!strcmp(a, "--prefix")) {
			bad = parse_pair(v, 1, 1u << 20, &o->prefix_min, &o->prefix_max);
		} else if (!strcmp(a, "--user")) {
			bad = parse_pair(v, 0, 1u << 20, &o->user_min, &o->user_max);
		} else if (!strcmp(a, "--output")) {
			bad = parse_pair(v, 1, 1u << 20, &o->out_min, &o->out_max);
		} else if (!strcmp(a, "--prefill-us")) {
			bad = parse_d(v, 0.001, 1e6, &o->prefill_us);
		} else if (!strcmp(a, "--decode-ms")) {
			bad = parse_d(v, 0.0, 1e6, &o->decode_ms);
		} else if (!strcmp(a, "--load")) {
			bad = parse_d(v, 0.01, 2.0, &o->load);
		} else if (!strcmp(a, "--bursts")) {
			bad = parse_u(v, 0, 1000, &o->bursts);
		} else if (!strcmp(a, "--burst-factor")) {
			bad = parse_d(v, 1.0, 100.0, &o->burst_factor);
		} else if (!strcmp(a, "--c")) {
			bad = parse_d(v, 1.0, GW_PLACE_LOAD_FACTOR_MAX, &o->c);
		} else if (!strcmp(a, "--seed")) {
			char *end;

			errno = 0;
			o->seed = strtoull(v, &end, 10);
			bad = errno || end == v || *end;
		} else if (!strcmp(a, "--format")) {
			if (!strcmp(v, "md"))
				o->md = true;
			else if (!strcmp(v, "text"))
				o->md = false;
			else
				bad = 1;
		} else {
			fprintf(stderr, "routing-sim: unknown option %s (see --help)\n", a);
			return -1;
		}
		if (bad) {
			fprintf(stderr, "routing-sim: %s: invalid value \"%s\" (see --help for the expected range)\n",
				a, v);
			return -1;
		}
	}
	if ((uint64_t)o->tenants * o->prompts > 1000000) {
		fprintf(stderr, "routing-sim: --tenants x --prompts: expected at most 1000000 prompts, found %llu\n",
			(unsigned long long)o->tenants * o->prompts);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct timespec t0, t1;

	if (parse_opts(argc, argv, &o))
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (o.md) {
		printf("Trace: seed %" PRIu64 ", %u requests per fleet size, %u tenants x %u system prompts "
		       "(Zipf s=%.2f), system prompt %u-%u tokens, user part %u-%u, output %u-%u; "
		       "offered load %.2f of uncached prefill capacity, %u single-tenant bursts at x%.1f; "
		       "per worker: %u cached-prefix tokens, prefill %.0f us/token, decode %.0f ms/token; c=%.2f.\n\n",
		       o.seed, o.requests, o.tenants, o.prompts, o.zipf_s,
		       o.prefix_min, o.prefix_max, o.user_min, o.user_max,
		       o.out_min, o.out_max, o.load, o.bursts, o.burst_factor,
		       o.kv_tokens, o.prefill_us, o.decode_ms, o.c);
		printf("| workers | policy | prefix hit rate | imbalance max/mean (avg) | imbalance p99 | TTFT p50 ms | TTFT p95 ms | TTFT p99 ms | spilled |\n");
		printf("|--------:|--------|----------------:|-------------------------:|--------------:|------------:|------------:|------------:|--------:|\n");
	}
	for (unsigned k = 0; k < o.n_workers; k++) {
		struct trace tr;

		trace_build(&o, o.workers[k], &tr);
		if (!o.md)
			printf("workers %u: %u requests over %.1f s simulated\n",
			       o.workers[k], tr.n, tr.duration);
		for (int p = 0; p < POL_N; p++) {
			struct result r;

			run(&o, &tr, o.workers[k], (enum policy)p, &r);
			if (o.md) {
				char sp[32] = "-";

				if (p == POL_OURS)
					snprintf(sp, sizeof(sp), "%.1f %%", 100.0 * r.spill);
				printf("| %u | %s | %.1f %% | %.2f | %.2f | %.0f | %.0f | %.0f | %s |\n",
				       o.workers[k], policy_name[p], 100.0 * r.hit_rate,
				       r.imb_mean, r.imb_p99, r.ttft_p50, r.ttft_p95,
				       r.ttft_p99, sp);
			}
			else
				printf("  %-19s hit %5.1f %%  imbalance avg %5.2f p99 %5.2f  "
				       "TTFT ms p50 %7.0f p95 %7.0f p99 %7.0f%s\n",
				       policy_name[p], 100.0 * r.hit_rate, r.imb_mean,
				       r.imb_p99, r.ttft_p50, r.ttft_p95, r.ttft_p99, "");
			if (p == POL_OURS && !o.md)
				printf("  %-19s %.1f %% of requests spilled past their top worker\n",
				       "", 100.0 * r.spill);
		}
		trace_free(&tr);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(stderr, "routing-sim: %.1f s\n",
		(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
