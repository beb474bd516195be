/*
 * metrics.c - counters, histograms, Prometheus text and the admin listener
 * (see metrics.h; names in docs/metrics.md).
 */
#include "gateway/metrics.h"

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
};

struct gw_metrics {
	struct gw_server *admin;
	gw_handler_fn admin_fn;
	void *admin_ctx;
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

struct depth_ctx {
	struct cm_buf *out;
	enum cm_status st;
};

static void depth_one(void *ctx, const char *tenant, size_t depth)
{
	struct depth_ctx *d = ctx;
	char esc[160];

	label_escape(esc, sizeof(esc), tenant);
	if (d->st == CM_OK)
		d->st = cm_buf_printf(d->out, "sluice_gateway_queue_depth{tenant=\"%s\"} %zu\n",
				      esc, depth);
}

#define P(...)                                                    \
	do {                                                      \
		if (st == CM_OK)                                  \
			st = cm_buf_printf(out, __VA_ARGS__);     \
	} while (0)

/* Routing per worker: drained, placements, prefix hits; load imbalance. */
static enum cm_status render_routing(struct gw_metrics *m, struct cm_buf *out,
				     char *esc, size_t esc_len)
{
	static const char *const c[] = {
		"sluice_worker_requests_placed_total",
		"Requests the gateway placed on the worker (its routing share), re-dispatches included.",
		"sluice_worker_prompt_tokens_total", "Prompt tokens of requests the worker finished (DONE).",
		"sluice_worker_prefix_hit_tokens_total",
		"Prompt tokens the worker served from its prefix cache (DONE cached_tokens).",
	};
	size_t n = gw_workers_count(m->ws), live = 0;
	uint64_t max = 0, sum = 0;
	enum cm_status st = CM_OK;
	struct gw_worker_info wi;

	st = cm_buf_printf(out, "# HELP sluice_worker_drained 1 while an operator drain holds the worker "
			    "(no new placements).\n# TYPE sluice_worker_drained gauge\n");
	for (size_t i = 0; st == CM_OK && i < n; i++) {
		gw_workers_info(m->ws, i, &wi);
		label_escape(esc, esc_len, wi.name);
		st = cm_buf_printf(out, "sluice_worker_drained{worker=\"%s\"} %d\n", esc, wi.drained);
		if (wi.hello_ok) {
			live++;
			sum += wi.inflight;
			if (wi.inflight > max)
				max = wi.inflight;
		}
	}
	for (size_t k = 0; st == CM_OK && k < sizeof(c) / sizeof(c[0]); k += 2) {
		st = cm_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", c[k], c[k + 1], c[k]);
		for (size_t i = 0; st == CM_OK && i < n; i++) {
			uint64_t v;

			gw_workers_info(m->ws, i, &wi);
			v = k == 0 ? wi.placed : k == 2 ? wi.prompt_tokens : wi.cached_tokens;
			label_escape(esc, esc_len, wi.name);
			st = cm_buf_printf(out, "%s{worker=\"%s\"} %llu\n", c[k], esc,
					    (unsigned long long)v);
		}
	}
	if (st == CM_OK)
		st = cm_buf_printf(out,
				    "# HELP sluice_gateway_worker_load_imbalance Max over mean of the in-flight "
				    "requests of the connected workers (1 = even; 0 when none runs).\n"
				    "# TYPE sluice_gateway_worker_load_imbalance gauge\n"
				    "sluice_gateway_worker_load_imbalance %.3f\n",
				    sum ? (double)max * (double)live / (double)sum : 0.0);
	return st;
}

enum cm_status gw_metrics_render(struct gw_metrics *m, struct cm_buf *out)
{
	enum cm_status st = CM_OK;
	char esc[160];

	P("# HELP sluice_gateway_requests_total Requests answered, by tenant and HTTP status.\n"
	  "# TYPE sluice_gateway_requests_total counter\n");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		for (int j = 0; j < GW_M_STATUSES && m->tenants[i].st[j].status; j++)
			P("sluice_gateway_requests_total{tenant=\"%s\",status=\"%d\"} %llu\n", esc,
			  m->tenants[i].st[j].status, (unsigned long long)m->tenants[i].st[j].n);
	}
	P("# HELP sluice_gateway_prompt_tokens_total Prompt tokens (worker counts), by tenant.\n"
	  "# TYPE sluice_gateway_prompt_tokens_total counter\n");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		P("sluice_gateway_prompt_tokens_total{tenant=\"%s\"} %llu\n", esc,
		  (unsigned long long)m->tenants[i].prompt_tokens);
	}
	P("# HELP sluice_gateway_completion_tokens_total Generated tokens, by tenant.\n"
	  "# TYPE sluice_gateway_completion_tokens_total counter\n");
	for (size_t i = 0; i < m->n_tenants; i++) {
		label_escape(esc, sizeof(esc), m->tenants[i].name);
		P("sluice_gateway_completion_tokens_total{tenant=\"%s\"} %llu\n", esc,
		  (unsigned long long)m->tenants[i].gen_tokens);
	}
	for (int h = 0; h < GW_HIST_COUNT_; h++) {
		uint64_t cum = 0;

		P("# HELP %s %s\n# TYPE %s histogram\n", gw_hist_names[h], gw_hist_help[h],
		  gw_hist_names[h]);
		for (int i = 0; i < GW_M_BUCKETS; i++) {
			cum += m->hist[h].b[i];
			P("%s_bucket{le=\"%g\"} %llu\n", gw_hist_names[h], gw_m_bounds[i],
			  (unsigned long long)cum);
		}
		P("%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9f\n%s_count %llu\n", gw_hist_names[h],
		  (unsigned long long)m->hist[h].n, gw_hist_names[h], m->hist[h].sum_s,
		  gw_hist_names[h], (unsigned long long)m->hist[h].n);
	}
	if (m->q) {
		struct depth_ctx d = { out, CM_OK };

		P("# HELP sluice_gateway_queue_depth Requests waiting, by tenant.\n"
		  "# TYPE sluice_gateway_queue_depth gauge\n");
		if (st == CM_OK) {
			gw_queue_foreach_tenant(m->q, depth_one, &d);
			st = d.st;
		}
		P("# HELP sluice_gateway_queue_drain_rate Measured dispatches per second (EWMA).\n"
		  "# TYPE sluice_gateway_queue_drain_rate gauge\n"
		  "sluice_gateway_queue_drain_rate %.3f\n", gw_queue_drain_rate(m->q));
	}
	if (m->ws) {
		size_t n = gw_workers_count(m->ws);
		static const char *const g[] = {
			"sluice_worker_ready", "1 when the worker passes readiness (PING, STATS).",
			"sluice_worker_inflight", "Requests the gateway has running on the worker.",
			"sluice_worker_inflight_limit", "The gateway's in-flight cap for the worker.",
			"sluice_worker_kv_blocks_used", "KV blocks in use (worker STATS).",
			"sluice_worker_kv_blocks_free", "KV blocks free (worker STATS).",
			"sluice_worker_kv_blocks_cached", "KV blocks kept for the prefix cache (worker STATS).",
			"sluice_worker_kv_occupancy", "kv_blocks_used / (used + free).",
			"sluice_worker_queue_depth", "Requests waiting inside the worker (STATS).",
			"sluice_worker_running", "Sequences running on the worker (STATS).",
		};

		for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k += 2) {
			P("# HELP %s %s\n# TYPE %s gauge\n", g[k], g[k + 1], g[k]);
			for (size_t i = 0; i < n; i++) {
				struct gw_worker_info wi;
				double v = 0;
				uint64_t tot;

				gw_workers_info(m->ws, i, &wi);
				tot = (uint64_t)wi.stats.kv_blocks_used + wi.stats.kv_blocks_free;
				switch (k / 2) {
				case 0: v = wi.ready; break;
				case 1: v = wi.inflight; break;
				case 2: v = wi.cap; break;
				case 3: v = wi.stats.kv_blocks_used; break;
				case 4: v = wi.stats.kv_blocks_free; break;
				case 5: v = wi.stats.kv_blocks_cached; break;
				case 6: v = tot ? (double)wi.stats.kv_blocks_used / (double)tot : 0; break;
				case 7: v = wi.stats.queue_depth; break;
				default: v = wi.stats.running; break;
				}
				if (k / 2 >= 3 && !wi.have_stats)
					continue;
				label_escape(esc, sizeof(esc), wi.name);
				P("%s{worker=\"%s\"} %g\n", g[k], esc, v);
			}
		}
		if (st == CM_OK)
			st = render_routing(m, out, esc, sizeof(esc));
	}
	if (m->pub) {
		struct gw_server_stats s;

		gw_server_get_stats(m->pub, &s);
		P("# HELP sluice_gateway_connections_open Open client connections.\n"
		  "# TYPE sluice_gateway_connections_open gauge\n"
		  "sluice_gateway_connections_open %llu\n", (unsigned long long)s.active);
		P("# HELP sluice_gateway_connections_rejected_total Connections refused over limits.connections.\n"
		  "# TYPE sluice_gateway_connections_rejected_total counter\n"
		  "sluice_gateway_connections_rejected_total %llu\n",
		  (unsigned long long)s.rejected_connections);
		P("# HELP sluice_gateway_tls_handshake_failures_total Failed TLS handshakes.\n"
		  "# TYPE sluice_gateway_tls_handshake_failures_total counter\n"
		  "sluice_gateway_tls_handshake_failures_total %llu\n",
		  (unsigned long long)s.tls_handshake_failures);
		P("# HELP sluice_gateway_timeouts_total Connections closed by a client timeout.\n"
		  "# TYPE sluice_gateway_timeouts_total counter\n"
		  "sluice_gateway_timeouts_total{phase=\"header\"} %llu\n"
		  "sluice_gateway_timeouts_total{phase=\"body\"} %llu\n"
		  "sluice_gateway_timeouts_total{phase=\"idle\"} %llu\n",
		  (unsigned long long)s.timeouts_header, (unsigned long long)s.timeouts_body,
		  (unsigned long long)s.timeouts_idle);
		P("# HELP sluice_gateway_http_errors_total Requests refused by the HTTP parser.\n"
		  "# TYPE sluice_gateway_http_errors_total counter\n"
		  "sluice_gateway_http_errors_total %llu\n", (unsigned long long)s.http_errors);
	}
	return st;
}

static void respond_text(struct gw_request *r, int status, const char *ct,
			 const char *body, size_t len)
{
	if (gw_request_respond(r, status, ct, body, len) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "admin_respond", "response not sent");
}

static void admin_handler(struct gw_request *r, void *ctx)
{
	struct gw_metrics *m = ctx;
	const char *path = gw_request_path(r);
	struct cm_buf b;

	if (strncmp(path, "/admin/", 7) == 0 && m->admin_fn) {
		m->admin_fn(r, m->admin_ctx);
		return;
	}
	if (strcmp(path, "/metrics") == 0 && (gw_request_method(r) == GW_HTTP_GET ||
					      gw_request_method(r) == GW_HTTP_HEAD)) {
		cm_buf_init(&b, 16 * 1024 * 1024);
		if (gw_metrics_render(m, &b) == CM_OK)
			respond_text(r, 200, "text/plain; version=0.0.4",
				     (const char *)cm_buf_data(&b), cm_buf_len(&b));
		else
			respond_text(r, 500, "text/plain", "metrics too large\n", 18);
		cm_buf_deinit(&b);
		return;
	}
	respond_text(r, 404, "text/plain", "not found\n", 10);
}

enum cm_status gw_metrics_new(struct event_base *base,
			      const struct gw_metrics_admin_config *admin,
			      struct gw_metrics **out, char *err, size_t err_len)
{
	struct gw_metrics *m = cm_calloc(1, sizeof(*m));
	struct gw_server_config sc;
	enum cm_status st;

	*out = NULL;
	if (!m)
		return CM_ENOMEM;
	if (admin) {
		gw_server_config_defaults(&sc);
		sc.listen_addr = admin->addr;
		sc.port = admin->port;
		sc.plain_http = 1;
		sc.connections = 64;
		sc.out_bytes = 16 * 1024 * 1024;
		st = gw_server_new(base, &sc, admin_handler, m, &m->admin, err, err_len);
		if (st != CM_OK) {
			cm_free(m);
			return st;
		}
	}
	*out = m;
	return CM_OK;
}

void gw_metrics_free(struct gw_metrics *m)
{
	if (!m)
		return;
	gw_server_free(m->admin);
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

void gw_metrics_mount_admin(struct gw_metrics *m, gw_handler_fn fn, void *ctx)
{
	m->admin_fn = fn;
	m->admin_ctx = ctx;
}

uint16_t gw_metrics_admin_port(const struct gw_metrics *m)
{
	return m->admin ? gw_server_port(m->admin) : 0;
}
