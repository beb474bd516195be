/*
 * settings.h - the `gateway` configuration section of sluice-gateway: the
 * public listener, limits and timeouts, the admin listener, the workers,
 * queues, Redis and the auth cache (docs/gateway.md, docs/configuration.md).
 *
 * Owns: struct gw_settings, filled by common/config.c from the table in
 * settings.c; cm_cfg_free(&gw_settings_section, s) releases it.
 * Also converts the settings into the structs of server.h and api.h.
 * Load at start on the main thread; read-only afterwards.
 */
#ifndef SLUICE_GATEWAY_SETTINGS_H
#define SLUICE_GATEWAY_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "gateway/api/api.h"
#include "gateway/http/server.h"

struct gw_settings_limits {
	uint64_t header_bytes;
	uint64_t body_bytes;
	uint64_t preauth_body_bytes;
	uint64_t unauthenticated_body_bytes;
	int64_t headers;
	int64_t connections;
	int64_t connections_per_peer;
	uint64_t output_bytes;
	int64_t json_depth;
	int64_t messages;
	int64_t stop_strings;
	int64_t stop_string_bytes;
	int64_t max_output_tokens;
	int64_t max_prompt_tokens;
	uint64_t constraint_bytes;
	int64_t choices;
	int64_t embed_inputs;
	int64_t tools;
	uint64_t tools_bytes;
	int64_t thinking_token_budget;
	int max_tokens_over_context; /* 0 clamp, 1 strict */
};

struct gw_settings_timeouts {
	int64_t header_ms;
	int64_t body_ms;
	int64_t idle_ms;
	int64_t write_ms;
};

struct gw_settings_worker {
	char *name;    /* stable name (routing identity, metrics, readyz) */
	char *socket;  /* Unix socket path */
	char *model;   /* expected model name (NULL: whatever HELLO says) */
	bool staged;   /* starts staged: no client traffic (gateway/rollout.h) */
};

/* gateway.rollout: eval replay and its default gates (gateway/eval/eval.h) */
struct gw_settings_rollout {
	int64_t eval_max_cases;
	int64_t eval_case_timeout_ms;
	double gate_exact_match;
	double gate_check_pass;
	double gate_logprob_drop; /* nats */
};

struct gw_settings_queue {
	int64_t tenant_max;
	int64_t global_max;
	int64_t timeout_ms;
};

/* gateway.slo: SLO admission (gateway/slo_limit.h) */
struct gw_settings_slo {
	bool enabled;
	int64_t ttft_p95_ms;
	int64_t itl_p95_ms;
	int64_t window;
	int64_t window_ms;
	double decrease;
	int64_t increase;
	int64_t min_limit;
	int64_t queue_wait_ms;
	double batch_share;
	double setpoint;
};

struct gw_settings_redis {
	char *url;             /* unix:///path or redis://host:port */
	char *ns;              /* key namespace */
	char *password_file;   /* AUTH; NULL: none */
	char *user;            /* ACL user; NULL: default */
	int64_t timeout_ms;
	int64_t auth_cache_ttl_ms;
	int64_t lease_ttl_ms;  /* concurrency lease, renewed every third */
	double outage_quota_fraction; /* local share of quotas during an outage */
};

/* route.policy (an index into its choices). */
enum gw_place_policy { GW_PLACE_POLICY_AFFINITY = 0, GW_PLACE_POLICY_ROUND_ROBIN = 1 };

struct gw_settings {
	char *listen_addr;
	int64_t port;
	char *tls_cert_file;
	char *tls_key_file;
	bool plain_http;
	char *admin_addr;
	int64_t admin_port;
	char *admin_credentials_file;
	char *pepper_file;
	int log_level;          /* index into debug/info/warn/error */
	struct cm_cfg_strlist cors_origins; /* browser origins allowed (CORS); none: off */
	struct gw_settings_limits limits;
	struct gw_settings_timeouts timeouts;
	struct cm_cfg_objlist workers; /* struct gw_settings_worker */
	int64_t max_inflight_per_worker;
	int64_t ping_interval_ms;
	int64_t stats_timeout_ms;
	int64_t worker_stall_ms;
	int64_t route_prefix_bytes;
	double route_load_factor;
	int route_policy;       /* enum gw_place_policy */
	struct gw_settings_queue queue;
	struct gw_settings_slo slo;
	struct gw_settings_rollout rollout;
	struct gw_settings_redis redis;
};

extern const struct cm_cfg_section gw_settings_section;

/* The server.h config of the public listener (strings borrowed). */
void gw_settings_server(const struct gw_settings *s, struct gw_server_config *out);
/* The api.h limits. */
void gw_settings_api_limits(const struct gw_settings *s, struct gw_api_limits *out);
/* Cross-key checks the table cannot express (e.g. TLS files unless
 * plain_http); CM_EINVAL with a message naming the key. */
enum cm_status gw_settings_check(const struct gw_settings *s, char *err,
				 size_t err_len) CM_WUR;

#endif
