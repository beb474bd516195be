/*
 * main.c - sluice-gateway: the HTTPS edge (TLS, API keys, quotas, queues,
 * fair dispatch to the workers).
 *
 * `sluice-gateway --config FILE` loads the `gateway` section
 * (gateway/settings.c), reads the pepper, and builds on one event_base:
 * the worker connections (workers.c), Redis auth (gov/auth.c), the queue
 * (queue.c), metrics (metrics.c) and the admin listener (admin/listener.c),
 * the dispatcher (dispatch.c) and the public HTTPS listener (http/server.c).  SIGPIPE is
 * ignored, SIGHUP reloads the certificate, SIGTERM/SIGINT stop: the
 * listener closes, requests still running are cancelled on their workers
 * and answered 503, and the process exits 0.
 * Thread: main thread only; only main() exits.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/log.h"
#include "common/status.h"
#include "gateway/admin/admin.h"
#include "gateway/gov/apikey.h"
#include "gateway/gov/auth.h"
#include "gateway/dispatch.h"
#include "gateway/eval/eval.h"
#include "gateway/admin/listener.h"
#include "gateway/api/endpoints.h"
#include "gateway/metrics.h"
#include "gateway/queue.h"
#include "gateway/rollout.h"
#include "gateway/http/server.h"
#include "gateway/settings.h"
#include "gateway/workers.h"

#ifdef SLUICE_GIT_COMMIT
#define GW_VERSION SLUICE_VERSION " (" SLUICE_GIT_COMMIT ")"
#else
#define GW_VERSION SLUICE_VERSION
#endif

/*
 * Every configuration section this binary reads, in file order; modules add
 * theirs here.  `config-doc` renders them (docs/configuration.md is checked
 * against it by tests/run.sh), `check-config` validates a file against them.
 */
static const struct cm_cfg_section *const gw_sections[] = {
	&gw_settings_section,
	NULL,
};

static size_t gw_n_sections(void)
{
	size_t n = 0;

	while (gw_sections[n])
		n++;
	return n;
}

static int gw_config_doc(void)
{
	struct cm_buf out;
	enum cm_status st = CM_OK;

	cm_buf_init(&out, 1024 * 1024);
	for (size_t i = 0; st == CM_OK && gw_sections[i]; i++)
		st = cm_cfg_doc_markdown(gw_sections[i], &out);
	if (st == CM_OK && gw_n_sections() == 0)
		st = cm_buf_append_str(&out, "_No configuration keys yet._\n");
	if (st == CM_OK)
		fwrite(cm_buf_data(&out), 1, cm_buf_len(&out), stdout);
	else
		fprintf(stderr, "sluice-gateway: rendering the configuration doc: %s\n",
			cm_status_str(st));
	cm_buf_deinit(&out);
	return st == CM_OK ? 0 : 1;
}

static int gw_check_config(const char *path)
{
	char err[1024];
	enum cm_status st;

	st = cm_cfg_check_file(path, gw_sections, gw_n_sections(), err,
			       sizeof(err));
	if (st != CM_OK) {
		fprintf(stderr, "sluice-gateway: %s\n", err);
		return 1;
	}
	printf("%s: ok\n", path);
	return 0;
}

static void gw_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-gateway --config FILE | COMMAND [ARG] | --version | --help\n"
		"\n"
		"The Sluice gateway: serves the Ollama- and OpenAI-compatible\n"
		"APIs over HTTPS and dispatches to sluice-worker processes\n"
		"(docs/gateway.md).\n"
		"\n"
		"  --config FILE\n"
		"              run the gateway with this configuration\n"
		"  --version   print version and git commit\n"
		"  check-config FILE\n"
		"              validate a configuration file and exit\n"
		"  config-doc  print the configuration keys as Markdown\n"
		"  -h, --help  print this help\n");
}

static void stop_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	cm_logf(CM_LOG_INFO, "stopping", "signal %d", (int)sig);
	event_base_loopbreak(arg);
}

/* The admin API's view of the gateway: drain goes to the workers, Redis
 * is the auth module's command connection (refreshed per request, since
 * auth replaces it when it reconnects). */
struct gw_admin_glue {
	struct gw_admin *admin;
	struct gw_redis *redis;
	struct gw_workers *ws;
};

static enum cm_status admin_drain(const char *name, void *arg)
{
	struct gw_admin_glue *g = arg;

	return gw_workers_drain(g->ws, name);
}

static void admin_handle(struct gw_request *req, void *arg)
{
	struct gw_admin_glue *g = arg;

	gw_admin_set_redis(g->admin, gw_redis_async(g->redis));
	gw_admin_handle(req, g->admin);
}

/* /readyz on the admin listener: the reasons (docs/operations.md). */
static void admin_readyz(struct gw_request *req, void *arg)
{
	struct gw_admin_glue *g = arg;
	char body[512];
	size_t len;
	int status = gw_api_answer_readyz(g->ws, gw_redis_up(g->redis), 1, body, sizeof(body), &len);

	if (gw_request_respond(req, status, "application/json", body, len) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "admin_respond", "response not sent");
}

/* Everything the gateway process builds, in the order it builds them. */
struct gw_parts {
	struct gw_settings set;
	struct event_base *base;
	struct gw_key_pepper *pepper;
	struct gw_workers *ws;
	struct gw_redis *redis;
	struct gw_auth *auth;
	struct gw_queue *q;
	struct gw_metrics *metrics;
	struct gw_admin_listener *listener;
	struct gw_admin_glue glue;
	struct gw_dispatch *disp;
	struct gw_server *srv;
	struct event *ev_term, *ev_int;
	struct gw_worker_spec *specs;
	char (*names)[24];
	struct gw_rollout *rollout;
	struct gw_eval *eval;
};

/* The workers' roles (staged ones from the configuration) and the eval
 * runner (docs/operations.md). */
static enum cm_status parts_rollout(struct gw_parts *p)
{
	const struct gw_settings *set = &p->set;
	const struct gw_settings_worker *w = set->workers.items;
	struct gw_eval_config ec = {
		.max_cases = (uint32_t)set->rollout.eval_max_cases,
		.case_timeout_ms = set->rollout.eval_case_timeout_ms,
		.gates = {
			.min_exact_match = set->rollout.gate_exact_match,
			.min_check_pass = set->rollout.gate_check_pass,
			.max_logprob_drop = set->rollout.gate_logprob_drop,
		},
	};
	uint8_t *staged = cm_calloc(set->workers.n ? set->workers.n : 1, 1);
	enum cm_status st;

	if (!staged)
		return CM_ENOMEM;
	for (size_t i = 0; i < set->workers.n; i++)
		staged[i] = w[i].staged;
	st = gw_rollout_new(p->ws, staged, &p->rollout);
	cm_free(staged);
	if (st != CM_OK)
		return st;
	gw_settings_api_limits(set, &ec.limits);
	return gw_eval_new(p->base, p->ws, p->rollout, &ec, &p->eval);
}

/* The worker connections, Redis auth and the queue. */
static enum cm_status parts_backends(struct gw_parts *p, char *err, size_t err_len)
{
	const struct gw_settings *set = &p->set;
	const struct gw_settings_worker *w = set->workers.items;
	struct gw_workers_config wc = {
		.max_inflight = (uint32_t)set->max_inflight_per_worker,
		.ping_interval_ms = set->ping_interval_ms,
		.stats_timeout_ms = set->stats_timeout_ms,
		.stall_ms = set->worker_stall_ms,
	};
	struct gw_auth_config ac = {
		.ns = set->redis.ns,
		.timeout_ms = set->redis.timeout_ms,
		.cache_ttl_ms = set->redis.auth_cache_ttl_ms,
	};
	struct gw_queue_config qc = {
		.tenant_max = (uint32_t)set->queue.tenant_max,
		.global_max = (uint32_t)set->queue.global_max,
		.timeout_ns = set->queue.timeout_ms * 1000000LL,
	};

	p->specs = cm_calloc(set->workers.n, sizeof(*p->specs));
	p->names = cm_calloc(set->workers.n, sizeof(*p->names));
	if (!p->specs || !p->names)
		return CM_ENOMEM;
	for (size_t i = 0; i < set->workers.n; i++) {
		snprintf(p->names[i], sizeof(p->names[i]), "w%zu", i);
		p->specs[i].name = w[i].name ? w[i].name : p->names[i];
		p->specs[i].socket = w[i].socket;
		p->specs[i].model = w[i].model;
	}
	if (gw_workers_new(p->base, p->specs, set->workers.n, &wc, &p->ws) != CM_OK)
		return CM_ENOMEM;
	if (parts_rollout(p) != CM_OK)
		return CM_ENOMEM;
	if (gw_redis_new(p->base, &(struct gw_redis_opts){ .url = set->redis.url,
				.user = set->redis.user, .password_file = set->redis.password_file,
				.timeout_ms = set->redis.timeout_ms },
			 &p->redis, err, err_len) != CM_OK)
		return CM_EINVAL;
	if (gw_auth_new(p->base, &ac, p->pepper, p->redis, &p->auth, err, err_len) != CM_OK)
		return CM_EINVAL;
	return gw_queue_new(&qc, &p->q);
}

/* Metrics, the admin listener and the admin API mounted on it. */
static enum cm_status parts_admin(struct gw_parts *p, char *err, size_t err_len)
{
	const struct gw_settings *set = &p->set;
	struct gw_admin_listener_config lc = {
		.addr = set->admin_addr,
		.port = (uint16_t)set->admin_port,
	};
	struct gw_admin_config ac = {
		.ns = set->redis.ns,
		.credentials_file = set->admin_credentials_file,
		.pepper_file = set->pepper_file,
		.drain = admin_drain,
		.drain_arg = &p->glue,
		.rollout = p->rollout,
		.eval = p->eval,
	};
	char e[768];

	if (gw_metrics_new(&p->metrics) != CM_OK)
		return CM_ENOMEM;
	if (gw_admin_listener_new(p->base, &lc, p->metrics, &p->listener, e, sizeof(e)) != CM_OK) {
		snprintf(err, err_len, "admin listener: %s", e);
		return CM_EINVAL;
	}
	p->glue.redis = p->redis;
	p->glue.ws = p->ws;
	if (gw_admin_new(&ac, gw_redis_async(p->redis), &p->glue.admin, e, sizeof(e)) != CM_OK) {
		snprintf(err, err_len, "admin API: %s", e);
		return CM_EINVAL;
	}
	gw_admin_listener_mount(p->listener, admin_handle, &p->glue);
	gw_admin_listener_set_ready(p->listener, admin_readyz, &p->glue);
	return CM_OK;
}

/* The dispatcher and the public listener in front of it. */
static enum cm_status parts_public(struct gw_parts *p, char *err, size_t err_len)
{
	const struct gw_settings *set = &p->set;
	struct gw_dispatch_config dc;
	struct gw_dispatch_deps dd = { p->ws, p->q, p->auth, p->metrics, p->redis, p->rollout };
	struct gw_server_config sc;

	memset(&dc, 0, sizeof(dc));
	gw_settings_api_limits(set, &dc.limits);
	dc.max_prompt_tokens = (uint32_t)set->limits.max_prompt_tokens;
	dc.route_prefix_bytes = (size_t)set->route_prefix_bytes;
	dc.route_load_factor = set->route_load_factor;
	dc.route_round_robin = set->route_policy == GW_PLACE_POLICY_ROUND_ROBIN;
	dc.ns = set->redis.ns;
	dc.lease_ttl_ms = set->redis.lease_ttl_ms; /* renewed every third */
	dc.quota_timeout_ms = set->redis.timeout_ms;
	dc.out_bytes = set->limits.output_bytes;
	dc.outage_quota_fraction = set->redis.outage_quota_fraction;
	dc.cors_origins = set->cors_origins.items;
	dc.n_cors_origins = set->cors_origins.n;
	dc.slo_enabled = set->slo.enabled;
	dc.slo = (struct gw_slo_cfg){
		.ttft_p95_ns = set->slo.ttft_p95_ms * CM_NS_PER_MS,
		.itl_p95_ns = set->slo.itl_p95_ms * CM_NS_PER_MS,
		.window = (uint32_t)set->slo.window,
		.window_ns = set->slo.window_ms * CM_NS_PER_MS,
		.decrease = set->slo.decrease,
		.increase = (uint32_t)set->slo.increase,
		.min_limit = (uint32_t)set->slo.min_limit,
	};
	dc.slo_queue_wait_ns = set->slo.queue_wait_ms * CM_NS_PER_MS;
	dc.slo_batch_share = set->slo.batch_share;
	dc.slo_setpoint = set->slo.setpoint;
	if (gw_dispatch_new(p->base, &dc, &dd, &p->disp) != CM_OK)
		return CM_ENOMEM;
	gw_settings_server(set, &sc);
	if (gw_server_new(p->base, &sc, gw_dispatch_handle, p->disp, &p->srv, err,
			  err_len) != CM_OK)
		return CM_EINVAL;
	gw_server_set_error_renderer(p->srv, gw_api_http_error, NULL);
	gw_server_set_head_check(p->srv, gw_dispatch_head_check, gw_dispatch_head_cancel, p->disp);
	if (!set->plain_http && gw_server_watch_sighup(p->srv) != CM_OK)
		return CM_EIO;
	gw_metrics_set_sources(p->metrics, p->ws, p->q, p->srv);
	p->ev_term = evsignal_new(p->base, SIGTERM, stop_cb, p->base);
	p->ev_int = evsignal_new(p->base, SIGINT, stop_cb, p->base);
	if (!p->ev_term || !p->ev_int || evsignal_add(p->ev_term, NULL) != 0 ||
	    evsignal_add(p->ev_int, NULL) != 0)
		return CM_EIO;
	return CM_OK;
}

/* Frees what was built, in reverse order (running requests get 503). */
static void parts_close(struct gw_parts *p)
{
	if (p->ev_term)
		event_free(p->ev_term);
	if (p->ev_int)
		event_free(p->ev_int);
	gw_dispatch_free(p->disp);
	gw_eval_free(p->eval); /* its runs answer 503 while the admin listener lives */
	gw_server_free(p->srv);
	gw_admin_listener_free(p->listener);
	gw_metrics_free(p->metrics);
	gw_queue_free(p->q);
	gw_redis_free(p->redis); /* fails every pending Redis call first */
	gw_auth_free(p->auth);
	gw_admin_free(p->glue.admin);
	gw_rollout_free(p->rollout);
	gw_workers_free(p->ws);
	if (p->base)
		event_base_free(p->base);
	gw_key_pepper_free(p->pepper);
	cm_free(p->specs);
	cm_free(p->names);
	cm_cfg_free(&gw_settings_section, &p->set);
}

static int gw_run(const char *path)
{
	struct gw_parts p;
	void *structs[] = { &p.set };
	char err[1024] = "";
	int rc = 1;

	memset(&p, 0, sizeof(p));
	if (cm_cfg_load_file(path, gw_sections, structs, 1, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-gateway: %s\n", err);
		return 1;
	}
	cm_log_setup((enum cm_log_level)p.set.log_level, 2, "gateway");
	signal(SIGPIPE, SIG_IGN);
	if (gw_settings_check(&p.set, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-gateway: %s: %s\n", path, err);
		goto out;
	}
	if (gw_key_pepper_load(p.set.pepper_file, &p.pepper, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-gateway: %s\n", err);
		goto out;
	}
	p.base = event_base_new();
	if (!p.base)
		goto out;
	if (parts_backends(&p, err, sizeof(err)) != CM_OK ||
	    parts_admin(&p, err, sizeof(err)) != CM_OK ||
	    parts_public(&p, err, sizeof(err)) != CM_OK) {
		if (err[0])
			fprintf(stderr, "sluice-gateway: %s\n", err);
		goto out;
	}
	cm_logf(CM_LOG_INFO, "listening", "public %s:%u (%s), admin %s:%u, %zu worker(s)",
		p.set.listen_addr, gw_server_port(p.srv), p.set.plain_http ? "http" : "https",
		p.set.admin_addr, gw_admin_listener_port(p.listener), p.set.workers.n);
	/* a line for scripts and tests that start with port 0 */
	printf("sluice-gateway listening port=%u admin_port=%u\n", gw_server_port(p.srv),
	       gw_admin_listener_port(p.listener));
	fflush(stdout);
	event_base_dispatch(p.base);
	rc = 0;
out:
	if (rc != 0)
		cm_logf(CM_LOG_ERROR, "start_failed", "the gateway did not start");
	parts_close(&p);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--config") == 0)
		return gw_run(argv[2]);
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sluice-gateway %s\n", GW_VERSION);
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		gw_usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "config-doc") == 0)
		return gw_config_doc();
	if (argc == 3 && strcmp(argv[1], "check-config") == 0)
		return gw_check_config(argv[2]);
	if (argc >= 2)
		fprintf(stderr, "sluice-gateway: unknown command or option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-gateway: expected a command or option\n");
	gw_usage(stderr);
	return 2;
}
