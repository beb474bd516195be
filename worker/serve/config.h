/*
 * config.h - the worker's configuration (section `worker`): the struct a
 * config file loads into and its key table (config.c).  The choice keys
 * load as indices into their choice lists; the enums below name them.
 * docs/configuration.md is generated from the table.
 */
#ifndef SLUICE_WORKER_SERVE_CONFIG_H
#define SLUICE_WORKER_SERVE_CONFIG_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/status.h"

/* worker.socket_mode */
enum wk_cfg_socket_mode { WK_CFG_SOCKET_0600 = 0, WK_CFG_SOCKET_0660 = 1 };
/* worker.backend */
enum wk_cfg_backend { WK_CFG_BACKEND_AUTO = 0, WK_CFG_BACKEND_CPU = 1, WK_CFG_BACKEND_CUDA = 2 };
/* worker.kv_type */
enum wk_cfg_kv_type { WK_CFG_KV_F16 = 0, WK_CFG_KV_F32 = 1 };

struct wk_server_cfg {
	char *name;
	char *model;
	char *model_name;
	char *model_sha256;
	char *socket;
	int socket_mode;               /* enum wk_cfg_socket_mode */
	char *socket_group;
	struct cm_cfg_strlist allowed_uids;
	int backend;                   /* enum wk_cfg_backend */
	int64_t device;
	int64_t threads;               /* 0 = online CPUs */
	uint64_t kv_cache_bytes;       /* 0 = kv_cache_fraction of free memory */
	double kv_cache_fraction;
	int kv_type;                   /* enum wk_cfg_kv_type */
	int64_t block_tokens;
	int64_t max_running;
	int64_t step_tokens;
	int64_t embed_step_tokens;     /* token budget of one embedding step */
	bool embed_truncatable;        /* the model's vectors may be shortened (dimensions) */
	bool cpu_repack;               /* CPU: copies of the matrices (pack.h) */
	bool expert_cache;             /* CPU: the experts from their cache file (expert_cache.h) */
	char *expert_cache_dir;        /* its directory; NULL = the default (wk_cpu_xcache_dir) */
	int64_t max_waiting;
	int64_t context;               /* 0 = the model's training context */
	char *chat_template;
	int64_t max_connections;
	int64_t stats_interval_ms;
	int64_t drain_timeout_ms;
	/* pinned runtime (docs/operations.md): NULL / 0 = not pinned */
	char *pin_engine_version;      /* the engine build, as HELLO's engine_version */
	int64_t pin_cuda_driver;       /* cudaDriverGetVersion: 13000 = 13.0 */
	int64_t pin_cuda_runtime;      /* cudaRuntimeGetVersion */
	int64_t pin_cublas;            /* cuBLAS major*10000 + minor*100 + patch */
	uint64_t grammar_max_bytes;
	int64_t grammar_cache_entries;
	uint64_t grammar_mask_cache_bytes;
	uint64_t grammar_pool_bytes;
	int64_t grammar_warm_ms;
	int64_t grammar_max_rules;
	int64_t grammar_max_elems;
	int64_t grammar_max_states;
	int64_t grammar_schema_depth;
	int log_level;                 /* index into debug, info, warn, error */
};

extern const struct cm_cfg_section wk_server_section;

/*
 * Loads `path` into *cfg (caller storage; wk_server_cfg_deinit after) and
 * checks what the table cannot: model and socket given, model_sha256 of
 * 64 hex digits; model_name defaults to the file name without ".gguf".
 * CM_EINVAL (or CM_ENOMEM) with a message naming the key.
 */
enum cm_status wk_server_cfg_load(const char *path, struct wk_server_cfg *cfg, char *err,
				  size_t err_len) CM_WUR;
void wk_server_cfg_deinit(struct wk_server_cfg *cfg);

#endif
