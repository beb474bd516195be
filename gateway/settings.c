/*
 * settings.c - the `gateway` configuration table (see settings.h).
 * Defaults come from common/limits.h; docs/configuration.md is generated
 * from this table (`sluice-gateway config-doc`).
 */
#include "gateway/settings.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "gateway/api/embed.h"
#include "gateway/http/http.h"

#define S struct gw_settings
#define L struct gw_settings_limits
#define T struct gw_settings_timeouts
#define W struct gw_settings_worker
#define Q struct gw_settings_queue
#define R struct gw_settings_redis

static const char *const gw_over_context[] = { "clamp", "strict" };

static const struct cm_cfg_key gw_limits_keys[] = {
	CM_CFG_SIZE(L, header_bytes, CM_LIM_HTTP_HEADER_BYTES, 1024, 1048576,
		    "Largest request line plus headers; over it: 431."),
	CM_CFG_SIZE(L, body_bytes, CM_LIM_HTTP_BODY_BYTES, 1024, 1073741824,
		    "Largest request body; over it: 413 before the body is read."),
	CM_CFG_SIZE(L, unauthenticated_body_bytes, CM_LIM_HTTP_UNAUTH_BODY_BYTES, 0, 1073741824,
		    "A larger request body (and any chunked one) on a connection that has not authenticated yet "
		    "is read only after its key is checked: a bad key gets its 401 before the body."),
	CM_CFG_SIZE(L, preauth_body_bytes, CM_LIM_HTTP_PREAUTH_BODY_BYTES, 0, 68719476736ULL,
		    "Request body bytes buffered by connections that have not authenticated yet, all "
		    "together (bodies are read before the key is checked); beyond: 503 and the connection "
		    "closed. Connections whose earlier request authenticated are not counted. 0: no limit."),
	CM_CFG_INT(L, headers, GW_HTTP_MAX_HEADERS_DEFAULT, 4, 1024,
		   "Most header lines in one request."),
	CM_CFG_INT(L, connections, CM_LIM_HTTP_CONNECTIONS, 1, 1000000,
		   "Open client connections. At the limit a new one takes the place of the oldest connection "
		   "that never carried an authenticated request, from the address holding the most; when all "
		   "are authenticated, new ones are closed at once."),
	CM_CFG_INT(L, connections_per_peer, 0, 0, 1000000,
		   "Open connections from one client address, evicted and refused the same way; 0: no limit "
		   "(behind a proxy or load balancer every client has its address)."),
	CM_CFG_SIZE(L, output_bytes, GW_SERVER_OUT_BYTES_DEFAULT, 65536, 1073741824,
		    "Response bytes buffered per connection for a client that does not read."),
	CM_CFG_INT(L, json_depth, CM_LIM_JSON_DEPTH, 2, 256, "Nesting depth of a request body."),
	CM_CFG_INT(L, messages, CM_LIM_MESSAGES, 1, CM_LIM_PROTO_MESSAGES_HARD,
		   "Messages in one chat request."),
	CM_CFG_INT(L, stop_strings, CM_LIM_STOP_STRINGS, 0, CM_LIM_PROTO_STOP_STRINGS_HARD,
		   "Stop strings in one request."),
	CM_CFG_INT(L, stop_string_bytes, CM_LIM_STOP_STRING_BYTES, 1, 4096,
		   "Bytes of one stop string."),
	CM_CFG_INT(L, max_output_tokens, CM_LIM_MAX_OUTPUT_TOKENS, 1, 1048576,
		   "Largest `num_predict`/`max_tokens`, and the default when a request sets none."),
	CM_CFG_SIZE(L, constraint_bytes, CM_LIM_CONSTRAINT_BYTES, 16, 64 << 20,
		    "Bytes of a structured-output constraint (a JSON Schema as compact JSON, or a grammar "
		    "text) in one request; beyond, 400."),
	CM_CFG_INT(L, choices, CM_LIM_CHOICES, 1, GW_API_CHOICES_MAX,
		   "Choices one OpenAI request may ask for (`n`); beyond, 400. All of a request's "
		   "choices run on one worker at once, so `n` is also at most its batch "
		   "(its `max_running`, or `gateway.max_inflight_per_worker` when lower)."),
	CM_CFG_INT(L, embed_inputs, CM_LIM_EMBED_INPUTS, 1, GW_API_EMBED_INPUTS_MAX,
		   "Inputs one embeddings request may carry (`input` as an array, /v1/embeddings and "
		   "/api/embed); beyond, 400."),
	CM_CFG_INT(L, tools, CM_LIM_TOOLS, 0, GW_API_TOOLS_MAX,
		   "Tools one request may offer the model (`tools`); beyond, 400. 0 refuses tools."),
	CM_CFG_SIZE(L, tools_bytes, CM_LIM_TOOLS_BYTES, 1024, GW_API_TOOLS_BYTES_MAX,
		    "Bytes of a request's tools as compact JSON; beyond, 400."),
	CM_CFG_INT(L, thinking_token_budget, CM_LIM_THINKING_TOKEN_BUDGET, 0,
		   CM_LIM_THINKING_TOKEN_BUDGET_MAX,
		   "Tokens a thinking model may spend thinking when a request sets no "
		   "`thinking_token_budget`: at the budget the worker writes `</think>` itself and the "
		   "answer follows (a constraint then applies). 0 = no budget (thinking ends when the "
		   "model ends it or at `max_tokens`)."),
	CM_CFG_ENUM(L, max_tokens_over_context, 0, gw_over_context,
		    "An explicit `max_tokens`/`num_predict` over what the model's context leaves "
		    "after the prompt: `clamp` lowers it to what fits (finish_reason `length`), "
		    "`strict` refuses it (400, `context_length_exceeded`). An omitted limit is "
		    "always as much as fits."),
	CM_CFG_INT(L, max_prompt_tokens, CM_LIM_MAX_PROMPT_TOKENS, 0, 16777216,
		   "Largest prompt in tokens (checked by the worker); a tenant's "
		   "`max_prompt_tokens` lowers it. 0 = the model's context."),
};
static const struct cm_cfg_section gw_limits_section =
	CM_CFG_SECTION("limits", L, gw_limits_keys, "Request limits.");

static const struct cm_cfg_key gw_timeouts_keys[] = {
	CM_CFG_DURATION(T, header_ms, CM_LIM_HTTP_HEADER_TIMEOUT_MS, 100, 600000,
			"Deadline from accept (TLS handshake included) or a request's first byte to the end of its headers."),
	CM_CFG_DURATION(T, body_ms, CM_LIM_HTTP_BODY_TIMEOUT_MS, 100, 600000,
			"Deadline from the end of the headers to the end of the body."),
	CM_CFG_DURATION(T, idle_ms, CM_LIM_HTTP_IDLE_TIMEOUT_MS, 100, 3600000,
			"Idle time allowed between requests on a kept-alive connection."),
	CM_CFG_DURATION(T, write_ms, CM_LIM_HTTP_WRITE_TIMEOUT_MS, 100, 3600000,
			"While response bytes wait to be sent, the longest time without the client taking any; "
			"then the connection is closed (and its request cancelled)."),
};
static const struct cm_cfg_section gw_timeouts_section =
	CM_CFG_SECTION("timeouts", T, gw_timeouts_keys, "Client timeouts (deadlines).");

static const struct cm_cfg_key gw_worker_keys[] = {
	CM_CFG_STRING(W, name, NULL, 64,
		      "Stable worker name: routing identity, metrics label, `/readyz` message. Default `w<index>`."),
	CM_CFG_STRING(W, socket, NULL, 107, "Unix socket of the worker (required)."),
	CM_CFG_STRING(W, model, NULL, 128,
		      "Model name the worker must report in HELLO; a mismatch keeps it out of service. Default: any."),
	CM_CFG_BOOL(W, staged, false,
		    "Start it staged: a hot replica that gets eval replays and health probes, no client "
		    "traffic, until `sluicectl model promote` (docs/operations.md)."),
};
static const struct cm_cfg_section gw_worker_section =
	CM_CFG_SECTION("workers[]", W, gw_worker_keys, "One sluice-worker.");

static const struct cm_cfg_key gw_queue_keys[] = {
	CM_CFG_INT(Q, tenant_max, CM_LIM_TENANT_QUEUE, 0, 1000000,
		   "Requests waiting per tenant (a tenant's `queue` field overrides it); beyond: 429. "
		   "0: no waiting (dispatched at once when a worker has room, else 429)."),
	CM_CFG_INT(Q, global_max, CM_LIM_GLOBAL_QUEUE, 1, 10000000,
		   "Requests waiting in all tenant queues together; beyond: 503."),
	CM_CFG_DURATION(Q, timeout_ms, CM_LIM_QUEUE_TIMEOUT_MS, 10, 3600000,
			"Longest wait in the queue; then 503 with Retry-After."),
};
static const struct cm_cfg_section gw_queue_section =
	CM_CFG_SECTION("queue", Q, gw_queue_keys, "Fair bounded queues.");

#define SL struct gw_settings_slo
static const struct cm_cfg_key gw_slo_keys[] = {
	CM_CFG_BOOL(SL, enabled, false,
		    "Adaptive per-worker concurrency limits held to the latency targets below "
		    "(docs/gateway.md#slo-admission); off: the static caps only."),
	CM_CFG_DURATION(SL, ttft_p95_ms, 1000, 1, 600000,
			"Target p95 time to first token of interactive requests."),
	CM_CFG_DURATION(SL, itl_p95_ms, 200, 0, 60000,
			"Target p95 inter-token latency (a request's mean gap); 0: none."),
	CM_CFG_INT(SL, window, 32, 1, 100000,
		   "First tokens of interactive requests per worker between two decisions."),
	CM_CFG_DURATION(SL, window_ms, 2000, 0, 600000,
			"Or a window this old with at least 8 first tokens decides (0: the count "
			"only); at a few requests per second a count alone decides too rarely."),
	CM_CFG_DOUBLE(SL, decrease, 0.8, 0.05, 0.99,
		      "Multiplier of the limit when a window's p95 misses a target."),
	CM_CFG_INT(SL, increase, 1, 1, 1000,
		   "Added to the limit when both targets hold and the limit was reached."),
	CM_CFG_INT(SL, min_limit, 1, 1, 4096, "The limit never goes below it."),
	CM_CFG_DURATION(SL, queue_wait_ms, 0, 0, 600000,
			"Longest queue wait of interactive work (503 slo_overload when the expected "
			"wait is longer, queue_timeout past it); 0: a tenth of ttft_p95_ms (at "
			"most three quarters). The adaptive limit holds the rest of the TTFT "
			"target from dispatch to the first token."),
	CM_CFG_DOUBLE(SL, setpoint, 0.85, 0.3, 1.0,
		      "Share of the targets the adaptive limit aims at (its windows are small and "
		      "ITL is known at a generation's end, so the limit swings around its set "
		      "point; the p95 over minutes must stay within the targets)."),
	CM_CFG_DOUBLE(SL, batch_share, 0.75, 0.0, 1.0,
		      "Share of each worker's limit that batch work may fill (at least one "
		      "request); the rest stays free for interactive work."),
};
static const struct cm_cfg_section gw_slo_section =
	CM_CFG_SECTION("slo", SL, gw_slo_keys, "SLO admission.");

#define RO struct gw_settings_rollout
static const struct cm_cfg_key gw_rollout_keys[] = {
	CM_CFG_INT(RO, eval_max_cases, 1000, 1, 100000, "Cases of one eval set at most."),
	CM_CFG_DURATION(RO, eval_case_timeout_ms, 120000, 100, 3600000,
			"Longest wait for one eval case (placement and generation); past it the case "
			"fails (and with it the run's gate)."),
	CM_CFG_DOUBLE(RO, gate_exact_match, 1.0, 0.0, 1.0,
		      "Default gate: share of cases whose tokens equal the baseline's (1: all; the "
		      "determinism guarantee of one engine and model). An eval run may set its own."),
	CM_CFG_DOUBLE(RO, gate_check_pass, 1.0, 0.0, 1.0,
		      "Default gate: share of the cases' checks (expect) that pass."),
	CM_CFG_DOUBLE(RO, gate_logprob_drop, 0.05, 0.0, 100.0,
		      "Default gate: largest drop (nats) of the mean log-probability of the outputs "
		      "against the baseline's, averaged over the cases."),
};
static const struct cm_cfg_section gw_rollout_section =
	CM_CFG_SECTION("rollout", RO, gw_rollout_keys, "Model changes: eval replay and gates.");

static const struct cm_cfg_key gw_redis_keys[] = {
	CM_CFG_STRING(R, url, "redis://127.0.0.1:6379", 256,
		      "Redis: `unix:///path/redis.sock` or `redis://host:port`."),
	CM_CFG_STRING(R, ns, "sluice:", 32, "Key namespace (as sluicectl's `--namespace`)."),
	CM_CFG_STRING(R, password_file, NULL, 4096,
		      "File holding the Redis password, mode 0600: each connection sends AUTH first (Redis's "
		      "`requirepass` or an ACL user's password). Unset: no AUTH."),
	CM_CFG_STRING(R, user, NULL, 128,
		      "Redis ACL user for AUTH (with `password_file`). Unset: the default user."),
	CM_CFG_DURATION(R, timeout_ms, 1000, 10, 60000,
			"Deadline of one Redis call a request waits on (key lookup, quota admission); past it the request gets 503."),
	CM_CFG_DURATION(R, auth_cache_ttl_ms, 2000, 0, 60000,
			"How long a verified key stays cached (revocations drop entries at once)."),
	CM_CFG_DURATION(R, lease_ttl_ms, 60000, 300, 3600000,
			"Lifetime of a concurrency lease in Redis, renewed every third of it while the request lives; "
			"a crashed gateway's leases are recovered after it."),
	CM_CFG_DOUBLE(R, outage_quota_fraction, 0.5, 0.001, 1,
		      "While Redis is unreachable, this gateway enforces this share of every RPM and concurrency "
		      "limit by itself (set it to 1 / the number of gateways; docs/gateway.md, \"Redis outage\")."),
};
static const struct cm_cfg_section gw_redis_section =
	CM_CFG_SECTION("redis", R, gw_redis_keys, "Redis connection and auth cache.");

static const char *const gw_log_levels[] = { "debug", "info", "warn", "error" };

static const char *const gw_placement_policies[] = { "affinity", "round_robin" };

static const struct cm_cfg_key gw_keys[] = {
	CM_CFG_STRING(S, listen_addr, "127.0.0.1", 64, "Numeric address of the public HTTPS listener."),
	CM_CFG_INT(S, port, 8443, 0, 65535, "Port of the public listener (0: any free port)."),
	CM_CFG_STRING(S, tls_cert_file, NULL, 4096, "PEM certificate chain (reloaded on SIGHUP)."),
	CM_CFG_STRING(S, tls_key_file, NULL, 4096, "PEM private key (reloaded on SIGHUP)."),
	CM_CFG_BOOL(S, plain_http, false, "Serve plain HTTP (only accepted on a loopback address)."),
	CM_CFG_STRING(S, admin_addr, "127.0.0.1", 64,
		      "Loopback address of the admin listener (`/metrics`, `/admin/`); never the public one."),
	CM_CFG_INT(S, admin_port, 9464, 0, 65535, "Port of the admin listener (0: any free port)."),
	CM_CFG_STRING(S, admin_credentials_file, NULL, 4096,
		      "Admin API credentials, one `NAME TOKEN` per line, mode 0600 (docs/admin-api.md); "
		      "none: `/admin/` refuses every bearer token."),
	CM_CFG_STRING(S, pepper_file, NULL, 4096, "File holding the API key pepper, mode 0600 (required)."),
	CM_CFG_ENUM(S, log_level, 1, gw_log_levels, "Minimum log level."),
	CM_CFG_STRLIST(S, cors_origins, NULL, 64, 256,
		       "Browser origins allowed to call the API (CORS), e.g. `https://chat.example.com`; "
		       "`*` allows any. None (the default): no CORS headers, browsers cannot call it."),
	CM_CFG_OBJECT(S, limits, &gw_limits_section, "Request limits."),
	CM_CFG_OBJECT(S, timeouts, &gw_timeouts_section, "Client timeouts."),
	CM_CFG_OBJLIST(S, workers, &gw_worker_section, 256, "The workers to dispatch to."),
	CM_CFG_INT(S, max_inflight_per_worker, 0, 0, 100000,
		   "Requests running on one worker at once: min(this, the worker's max_seqs); 0 = max_seqs. "
		   "The knob that holds TTFT and inter-token latency at p95."),
	CM_CFG_DURATION(S, ping_interval_ms, 5000, 100, 600000,
			"Interval of PING (a real short generation) per worker; a worker whose PONG is late or failed is not ready."),
	CM_CFG_DURATION(S, stats_timeout_ms, 5000, 100, 600000,
			"A worker whose last STATS is older than this is not ready."),
	CM_CFG_DURATION(S, worker_stall_ms, 60000, 0, 3600000,
			"A worker that sends nothing (no token, STATS or PONG) this long while requests run on it "
			"is dropped: its requests end with an error (in their streams) and it is reconnected. "
			"Longer than one scheduler step on the slowest prompt; 0: never."),
	CM_CFG_INT(S, route_prefix_bytes, 1024, 1, 1048576, "Prompt bytes in the routing key."),
	CM_CFG_DOUBLE(S, route_load_factor, 1.25, 0, 100,
		      "Bounded-load factor c of the placement (0: plain rendezvous)."),
	CM_CFG_ENUM(S, route_policy, 0, gw_placement_policies,
		    "Placement: `affinity` (tenant-salted prefix key, bounded-load rendezvous) or "
		    "`round_robin` (ignores prefixes; for comparisons, docs/routing.md)."),
	CM_CFG_OBJECT(S, queue, &gw_queue_section, "Queues."),
	CM_CFG_OBJECT(S, slo, &gw_slo_section, "SLO admission: latency targets and the adaptive limits."),
	CM_CFG_OBJECT(S, rollout, &gw_rollout_section,
		      "Changing a model or an engine: eval replay, gates (docs/operations.md)."),
	CM_CFG_OBJECT(S, redis, &gw_redis_section, "Redis."),
};

const struct cm_cfg_section gw_settings_section =
	CM_CFG_SECTION("gateway", S, gw_keys,
		       "The gateway: listeners, limits, workers, queues, Redis (docs/gateway.md).");

void gw_settings_server(const struct gw_settings *s, struct gw_server_config *c)
{
	gw_server_config_defaults(c);
	c->listen_addr = s->listen_addr;
	c->port = (uint16_t)s->port;
	c->cert_file = s->tls_cert_file;
	c->key_file = s->tls_key_file;
	c->plain_http = s->plain_http;
	c->header_bytes = s->limits.header_bytes;
	c->body_bytes = s->limits.body_bytes;
	c->preauth_body_bytes = (size_t)s->limits.preauth_body_bytes;
	c->unauth_body_bytes = (size_t)s->limits.unauthenticated_body_bytes;
	c->max_headers = (uint32_t)s->limits.headers;
	c->connections = (uint32_t)s->limits.connections;
	c->connections_per_peer = (uint32_t)s->limits.connections_per_peer;
	c->out_bytes = s->limits.output_bytes;
	c->header_timeout_ms = (uint32_t)s->timeouts.header_ms;
	c->body_timeout_ms = (uint32_t)s->timeouts.body_ms;
	c->idle_timeout_ms = (uint32_t)s->timeouts.idle_ms;
	c->write_timeout_ms = (uint32_t)s->timeouts.write_ms;
}

void gw_settings_api_limits(const struct gw_settings *s, struct gw_api_limits *l)
{
	gw_api_limits_defaults(l);
	l->json_depth = (uint32_t)s->limits.json_depth;
	l->messages = (uint32_t)s->limits.messages;
	l->stop_strings = (uint32_t)s->limits.stop_strings;
	l->stop_string_bytes = (uint32_t)s->limits.stop_string_bytes;
	l->max_output_tokens = (uint32_t)s->limits.max_output_tokens;
	l->constraint_bytes = (uint32_t)s->limits.constraint_bytes;
	l->choices = (uint32_t)s->limits.choices;
	l->embed_inputs = (uint32_t)s->limits.embed_inputs;
	l->tools = (uint32_t)s->limits.tools;
	l->tools_bytes = (uint32_t)s->limits.tools_bytes;
	l->thinking_token_budget = (uint32_t)s->limits.thinking_token_budget;
	l->max_tokens_strict = s->limits.max_tokens_over_context == 1;
}

enum cm_status gw_settings_check(const struct gw_settings *s, char *err,
				 size_t err_len)
{
	const struct gw_settings_worker *w = s->workers.items;

	if (!s->plain_http && (!s->tls_cert_file || !s->tls_key_file)) {
		snprintf(err, err_len, "gateway.tls_cert_file/tls_key_file: expected both "
			 "files (or plain_http on loopback), found %s missing",
			 s->tls_cert_file ? "the key" : "the certificate");
		return CM_EINVAL;
	}
	if (!s->pepper_file) {
		snprintf(err, err_len, "gateway.pepper_file: expected a file path, found none");
		return CM_EINVAL;
	}
	if (s->workers.n == 0) {
		snprintf(err, err_len, "gateway.workers: expected at least one worker, found none");
		return CM_EINVAL;
	}
	for (size_t i = 0; i < s->workers.n; i++) {
		if (!w[i].socket) {
			snprintf(err, err_len, "gateway.workers[%zu].socket: expected a path, found none", i);
			return CM_EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (w[i].name && w[j].name && strcmp(w[i].name, w[j].name) == 0) {
				snprintf(err, err_len, "gateway.workers[%zu].name: expected a unique name, "
					 "found \"%s\" twice", i, w[i].name);
				return CM_EINVAL;
			}
	}
	return CM_OK;
}
