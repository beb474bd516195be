/*
 * metrics.c - counters, histograms and their Prometheus text (see
 * metrics.h; names in docs/metrics.md).  Per-worker series come from one
 * table (mx_workers) of name, help, type and value.
 */
#include "gateway/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"

#define GW_M_BUCKETS 15
#define GW_M_STATUSES 24

/* Upper bounds in seconds (the last is +Inf). */
static const double gw_m_bounds[GW_M_BUCKETS] = {
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25, 0.5, 1, 2.5, 5, 10, 30,
};

struct gw_m_hist {
	uint64_t b[GW_M_BUCKETS + 1]; /* per bucket (not cumulative); last +Inf */
	uint64_t n;
	double sum_s;
};

struct gw_m_status {
	int status;
	uint64_t n;
};

struct gw_m_tenant {
	char name[GW_QUEUE_TENANT_NAME_MAX];
	struct gw_m_status st[GW_M_STATUSES];
	uint64_t prompt_tokens, gen_tokens;
	int64_t constraint_ns;
	uint64_t slo[2][GW_SLO_COUNT_]; /* [batch][outcome] */
};

struct gw_metrics {
	struct gw_workers *ws;
	struct gw_queue *q;
	struct gw_server *pub;
	struct gw_m_hist hist[GW_HIST_COUNT_];
	struct gw_m_tenant *tenants;
	size_t n_tenants;
};

static const char *const gw_hist_names[GW_HIST_COUNT_] = {
	"sluice_gateway_ttft_seconds",
	"sluice_gateway_inter_token_seconds",
	"sluice_gateway_queue_wait_seconds",
	"sluice_gateway_request_duration_seconds",
};
static const char *const gw_hist_help[GW_HIST_COUNT_] = {
	"Time from request received to first token sent.",
	"Time between two streamed tokens of one request.",
	"Time a request waited in the gateway queue.",
	"Time from request received to the last byte of the reply queued.",
};

static struct gw_m_tenant *tenant_get(struct gw_metrics *m, const char *name)
{
	if (!name || !*name)
		name = "_none";
	for (size_t i = 0; i < m->n_tenants; i++)
		if (strcmp(m->tenants[i].name, name) == 0)
			return &m->tenants[i];
	if (m->n_tenants == GW_METRICS_TENANTS_MAX)
		name = "_other";
	for (size_t i = 0; i < m->n_tenants; i++)
		if (strcmp(m->tenants[i].name, name) == 0)
			return &m->tenants[i];
	if (m->n_tenants > GW_METRICS_TENANTS_MAX)
		return NULL;
	struct gw_m_tenant *t = cm_reallocarray(m->tenants, m->n_tenants + 1, sizeof(*t));
	if (!t)
		return NULL;
	m->tenants = t;
	t = &m->tenants[m->n_tenants++];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	return t;
}

void gw_metrics_request(struct gw_metrics *m, const char *tenant, int status,
			uint64_t prompt_tokens, uint64_t gen_tokens)
{
	struct gw_m_tenant *t = tenant_get(m, tenant);

	if (!t)
		return;
	t->prompt_tokens += prompt_tokens;
	t->gen_tokens += gen_tokens;
	for (int i = 0; i < GW_M_STATUSES; i++) {
		if (t->st[i].status == status || t->st[i].status == 0) {
			t->st[i].status = status;
			t->st[i].n++;
			return;
		}
	}
}

void gw_metrics_constraint(struct gw_metrics *m, const char *tenant, int64_t ns)
{
	struct gw_m_tenant *t = ns > 0 ? tenant_get(m, tenant) : NULL;

	if (t && ns < INT64_MAX - t->constraint_ns)
		t->constraint_ns += ns;
}

void gw_metrics_slo(struct gw_metrics *m, const char *tenant, int batch, enum gw_metrics_slo o)
{
	struct gw_m_tenant *t = tenant_get(m, tenant);

	if (t && o < GW_SLO_COUNT_)
		t->slo[batch ? 1 : 0][o]++;
}

void gw_metrics_observe(struct gw_metrics *m, enum gw_metrics_hist h, int64_t ns)
{
	struct gw_m_hist *x = &m->hist[h];
	double s = (double)ns / 1e9;
	int i = 0;

	while (i < GW_M_BUCKETS && s > gw_m_bounds[i])
		i++;
	x->b[i]++;
	x->n++;
	x->sum_s += s;
}

static void label_escape(char *out, size_t size, const char *in)
{
	size_t o = 0;

	for (; *in && o + 3 < size; in++) {
		if (*in == '"' || *in == '\\') {
			out[o++] = '\\';
			out[o++] = *in;
		} else if (*in == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *in;
		}
	}
	out[o] = '\0';
}

/* ---- rendering --------------------------------------------------------------- */

/*
 * The text is appended with cm_buf_printf into a capped buffer; a render
 * goes on after a failed append only to return its status (every later
 * append is skipped by mx_put).
 */
struct mx_out {
	struct cm_buf *b;
	enum cm_status st;
};

static void mx_put(struct mx_out *o, const char *fmt, ...) CM_PRINTF(2, 3);

static void mx_put(struct mx_out *o, const char *fmt, ...)
{
	va_list ap;

	if (o->st != CM_OK)
		return;
	va_start(ap, fmt);
	o->st = cm_buf_vprintf(o->b, fmt, ap);
	va_end(ap);
}

static void mx_head(struct mx_out *o, const char *name, const char *help, const char *type)
{
	mx_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Per-worker series, one table row each (docs/metrics.md). */
struct mx_worker_series {
	const char *name;
	const char *help;
	const char *type;       /* "gauge" or "counter" */
	int needs_stats;        /* only workers that sent STATS */
	double (*value)(const struct gw_worker_info *wi);
};

static double mx_ready(const struct gw_worker_info *wi) { return wi->ready; }
static double mx_inflight(const struct gw_worker_info *wi) { return wi->inflight; }
static double mx_cap(const struct gw_worker_info *wi) { return wi->cap; }
static double mx_kv_used(const struct gw_worker_info *wi) { return wi->stats.kv_blocks_used; }
static double mx_kv_free(const struct gw_worker_info *wi) { return wi->stats.kv_blocks_free; }
static double mx_kv_cached(const struct gw_worker_info *wi) { return wi->stats.kv_blocks_cached; }
static double mx_queue(const struct gw_worker_info *wi) { return wi->stats.queue_depth; }
static double mx_running(const struct gw_worker_info *wi) { return wi->stats.running; }
static double mx_drained(const struct gw_worker_info *wi) { return wi->drained; }
static double mx_placed(const struct gw_worker_info *wi) { return (double)wi->placed; }
static double mx_prompt(const struct gw_worker_info *wi) { return (double)wi->prompt_tokens; }
static double mx_cached(const struct gw_worker_info *wi) { return (double)wi->cached_tokens; }

static double mx_kv_occupancy(const struct gw_worker_info *wi)
{
	uint64_t tot = (uint64_t)wi->stats.kv_blocks_used + wi->stats.kv_blocks_free;

	return tot ? (double)wi->stats.kv_blocks_used / (double)tot : 0;
}

/* the SLO limit in force (gateway.slo), else the static cap */
static double mx_slo_limit(const struct gw_worker_info *wi)
{
	return wi->slo_limit && wi->slo_limit < wi->cap ? wi->slo_limit : wi->cap;
}

static const struct mx_worker_series mx_workers[] = {
	{ "sluice_worker_ready", "1 when the worker passes readiness (PING, STATS).",
	  "gauge", 0, mx_ready },
	{ "sluice_worker_inflight", "Requests the gateway has running on the worker.",
	  "gauge", 0, mx_inflight },
	{ "sluice_worker_inflight_limit", "The gateway's in-flight cap for the worker.",
	  "gauge", 0, mx_cap },
	{ "sluice_worker_slo_limit",
	  "The adaptive SLO concurrency limit in force for the worker (gateway.slo), else its cap.",
	  "gauge", 0, mx_slo_limit },
	{ "sluice_worker_kv_blocks_used", "KV blocks in use (worker STATS).",
	  "gauge", 1, mx_kv_used },
	{ "sluice_worker_kv_blocks_free", "KV blocks free (worker STATS).",
	  "gauge", 1, mx_kv_free },
	{ "sluice_worker_kv_blocks_cached", "KV blocks kept for the prefix cache (worker STATS).",
	  "gauge", 1, mx_kv_cached },
	{ "sluice_worker_kv_occupancy", "kv_blocks_used / (used + free).",
	  "gauge", 1, mx_kv_occupancy },
	{ "sluice_worker_queue_depth", "Requests waiting inside the worker (STATS).",
	  "gauge", 1, mx_queue },
	{ "sluice_worker_running", "Sequences running on the worker (STATS).",
	  "gauge", 1, mx_running },
	{ "sluice_worker_drained", "1 while an operator drain holds the worker (no new placements).",
	  "gauge", 0, mx_drained },
	{ "sluice_worker_requests_placed_total",
	  "Requests the gateway placed on the worker (its routing share), re-dispatches included.",
	  "counter", 0, mx_placed },
	{ "sluice_worker_prompt_tokens_total", "Prompt tokens of requests the worker finished (DONE).",
	  "counter", 0, mx_prompt },
	{ "sluice_worker_prefix_hit_tokens_total",
	  "Prompt tokens the worker served from its prefix cache (DONE cached_tokens).",
	  "counter", 0, mx_cached },
};

static void mx_render_workers(struct gw_workers *ws, struct mx_out *o)
{
	size_t n = gw_workers_count(ws), live = 0;
	uint64_t max = 0, sum = 0;
	struct gw_worker_info wi;
	char esc[160];

	for (size_t k = 0; k < sizeof(mx_workers) / sizeof(mx_workers[0]); k++) {
		const struct mx_worker_series *x = &mx_workers[k];

		mx_head(o, x->name, x->help, x->type);
		for (size_t i = 0; i < n; i++) {
			gw_workers_info(ws, i, &wi);
			if (x->needs_stats && !wi.have_stats)
				continue;
			label_escape(esc, sizeof(esc), wi.name);
			if (x->type[0] == 'c') /* counters are whole numbers */
				mx_put(o, "%s{worker=\"%s\"} %llu\n", x->name, esc,
				       (unsigned long long)x->value(&wi));
			else
				mx_put(o, "%s{worker=\"%s\"} %g\n", x->name, esc, x->value(&wi));
		}
	}
	for (size_t i = 0; i < n; i++) {
		gw_workers_info(ws, i, &wi);
		if (wi.hello_ok) {
			live++;
			sum += wi.inflight;
			if (wi.inflight > max)
				max = wi.inflight;
		}
	}
	mx_head(o, "sluice_gateway_worker_load_imbalance",
		"Max over mean of the in-flight requests of the connected workers (1 = even; 0 when none runs).",
		"gauge");
	mx_put(o, "sluice_gateway_worker_load_imbalance %.3f\n",
	       sum ? (double)max * (double)live / (double)sum : 0.0);
}

struct mx_depth_ctx {
	struct mx_out *o;
};

static void mx_depth_one(void *ctx, const char *tenant, size_t depth)
{
	struct mx_depth_ctx *d = ctx;
	char esc[160];

	label_escape(esc, sizeof(esc), tenant);
	mx_put(d->o, "sluice_gateway_queue_depth{tenant=\"%s\"} %zu\n", esc, depth);
}

static void mx_render_slo(const struct gw_metrics *m, struct mx_out *o)
{
	static const char *const outcome[GW_SLO_COUNT_] = { "met", "missed", "refused" };
	char esc[160];

	mx_head(o, "sluice_gateway_slo_requests_total",
		"Generation requests against the gateway.slo targets, by tenant, class and "
		"outcome (met, missed, refused for capacity).", "counter");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		for (int c = 0; c < 2; c++)
			for (int k = 0; k < GW_SLO_COUNT_; k++)
				if (m->tenants[i].slo[c][k])
					mx_put(o, "sluice_gateway_slo_requests_total{tenant=\"%s\","
					       "class=\"%s\",outcome=\"%s\"} %llu\n", esc,
					       c ? "batch" : "interactive", outcome[k],
					       (unsigned long long)m->tenants[i].slo[c][k]);
	}
}

static void mx_render_tenants(const struct gw_metrics *m, struct mx_out *o)
{
	char esc[160];

	mx_head(o, "sluice_gateway_requests_total",
		"Requests answered, by tenant and HTTP status.", "counter");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		for (int j = 0; j < GW_M_STATUSES && m->tenants[i].st[j].status; j++)
			mx_put(o, "sluice_gateway_requests_total{tenant=\"%s\",status=\"%d\"} %llu\n",
			       esc, m->tenants[i].st[j].status,
			       (unsigned long long)m->tenants[i].st[j].n);
	}
	mx_head(o, "sluice_gateway_prompt_tokens_total",
		"Prompt tokens (worker counts), by tenant.", "counter");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		mx_put(o, "sluice_gateway_prompt_tokens_total{tenant=\"%s\"} %llu\n", esc,
		       (unsigned long long)m->tenants[i].prompt_tokens);
	}
	mx_head(o, "sluice_gateway_completion_tokens_total", "Generated tokens, by tenant.",
		"counter");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		mx_put(o, "sluice_gateway_completion_tokens_total{tenant=\"%s\"} %llu\n", esc,
		       (unsigned long long)m->tenants[i].gen_tokens);
	}
	mx_head(o, "sluice_gateway_constraint_compile_seconds_total",
		"Worker time compiling structured-output constraints (cache misses), by tenant.",
		"counter");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		mx_put(o, "sluice_gateway_constraint_compile_seconds_total{tenant=\"%s\"} %.6f\n", esc,
		       (double)m->tenants[i].constraint_ns / 1e9);
	}
	mx_render_slo(m, o);
}

static void mx_render_hists(const struct gw_metrics *m, struct mx_out *o)
{
	for (int h = 0; h < GW_HIST_COUNT_; h++) {
		const char *name = gw_hist_names[h];
		uint64_t cum = 0;

		mx_head(o, name, gw_hist_help[h], "histogram");
		for (int i = 0; i < GW_M_BUCKETS; i++) {
			cum += m->hist[h].b[i];
			mx_put(o, "%s_bucket{le=\"%g\"} %llu\n", name, gw_m_bounds[i],
			       (unsigned long long)cum);
		}
		mx_put(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", name,
		       (unsigned long long)m->hist[h].n, name, m->hist[h].sum_s, name,
		       (unsigned long long)m->hist[h].n);
	}
}

/* Connection counters of the public listener. */
static void mx_render_server(struct gw_server *pub, struct mx_out *o)
{
	struct gw_server_stats s;

	gw_server_get_stats(pub, &s);
	mx_head(o, "sluice_gateway_connections_open", "Open client connections.", "gauge");
	mx_put(o, "sluice_gateway_connections_open %llu\n", (unsigned long long)s.active);
	mx_head(o, "sluice_gateway_connections_rejected_total",
		"Connections refused over limits.connections.", "counter");
	mx_put(o, "sluice_gateway_connections_rejected_total %llu\n",
	       (unsigned long long)s.rejected_connections);
	mx_head(o, "sluice_gateway_body_key_checks_total",
		"Key checks before a large body on a connection not yet authenticated.", "counter");
	mx_put(o, "sluice_gateway_body_key_checks_total{result=\"passed\"} %llu\n"
	       "sluice_gateway_body_key_checks_total{result=\"refused\"} %llu\n",
	       (unsigned long long)(s.head_checks - s.head_refused), (unsigned long long)s.head_refused);
	mx_head(o, "sluice_gateway_preauth_body_overflows_total",
		"Requests refused (503) because unauthenticated bodies held limits.preauth_body_bytes.",
		"counter");
	mx_put(o, "sluice_gateway_preauth_body_overflows_total %llu\n",
	       (unsigned long long)s.preauth_overflows);
	mx_head(o, "sluice_gateway_connections_evicted_total",
		"Unauthenticated connections closed to make room for new ones.", "counter");
	mx_put(o, "sluice_gateway_connections_evicted_total %llu\n",
	       (unsigned long long)s.evicted_connections);
	mx_head(o, "sluice_gateway_tls_handshake_failures_total", "Failed TLS handshakes.",
		"counter");
	mx_put(o, "sluice_gateway_tls_handshake_failures_total %llu\n",
	       (unsigned long long)s.tls_handshake_failures);
	mx_head(o, "sluice_gateway_timeouts_total", "Connections closed by a client timeout.",
		"counter");
	mx_put(o, "sluice_gateway_timeouts_total{phase=\"header\"} %llu\n"
	       "sluice_gateway_timeouts_total{phase=\"body\"} %llu\n"
	       "sluice_gateway_timeouts_total{phase=\"idle\"} %llu\n"
	       "sluice_gateway_timeouts_total{phase=\"write\"} %llu\n",
	       (unsigned long long)s.timeouts_header, (unsigned long long)s.timeouts_body,
	       (unsigned long long)s.timeouts_idle, (unsigned long long)s.timeouts_write);
	mx_head(o, "sluice_gateway_connections_overflowed_total",
		"Connections closed for a client that does not read or pipelines past the limits.",
		"counter");
	mx_put(o, "sluice_gateway_connections_overflowed_total{what=\"output\"} %llu\n"
	       "sluice_gateway_connections_overflowed_total{what=\"pipeline\"} %llu\n",
	       (unsigned long long)s.output_overflows, (unsigned long long)s.pipeline_overflows);
	mx_head(o, "sluice_gateway_http_errors_total", "Requests refused by the HTTP parser.",
		"counter");
	mx_put(o, "sluice_gateway_http_errors_total %llu\n", (unsigned long long)s.http_errors);
}

enum cm_status gw_metrics_render(struct gw_metrics *m, struct cm_buf *out)
{
	struct mx_out o = { out, CM_OK };

	mx_render_tenants(m, &o);
	mx_render_hists(m, &o);
	if (m->q) {
		struct mx_depth_ctx d = { &o };

		mx_head(&o, "sluice_gateway_queue_depth", "Requests waiting, by tenant.", "gauge");
		if (o.st == CM_OK)
			gw_queue_foreach_tenant(m->q, mx_depth_one, &d);
		mx_head(&o, "sluice_gateway_queue_drain_rate",
			"Measured dispatches per second (EWMA).", "gauge");
		mx_put(&o, "sluice_gateway_queue_drain_rate %.3f\n", gw_queue_drain_rate(m->q));
	}
	if (m->ws)
		mx_render_workers(m->ws, &o);
	if (m->pub)
		mx_render_server(m->pub, &o);
	return o.st;
}

/* ---- life cycle ------------------------------------------------------------- */

enum cm_status gw_metrics_new(struct gw_metrics **out)
{
	*out = cm_calloc(1, sizeof(**out));
	return *out ? CM_OK : CM_ENOMEM;
}

void gw_metrics_free(struct gw_metrics *m)
{
	if (!m)
		return;
	cm_free(m->tenants);
	cm_free(m);
}

void gw_metrics_set_sources(struct gw_metrics *m, struct gw_workers *ws,
			    struct gw_queue *q, struct gw_server *pub)
{
	m->ws = ws;
	m->q = q;
	m->pub = pub;
}
