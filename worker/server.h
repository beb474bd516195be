/*
 * server.h - `sluice-worker serve`: the worker process as a server.
 *
 * Loads the model (checking the pinned SHA-256 before anything is served),
 * sizes the KV cache, listens on a Unix stream socket (mode 0600 or 0660,
 * optional group), checks each peer's uid with SO_PEERCRED against an
 * allowed list, and speaks proto/ to any number of gateway connections
 * (up to max_connections): HELLO on connect; SUBMIT, CANCEL, PING, DRAIN
 * in; TOKEN, DONE, ERROR, PONG and STATS (every stats_interval) out.
 * Opens no network socket.
 *
 * Threading: one thread runs the event loop (poll) and the scheduler: each
 * iteration handles ready sockets, runs one scheduler step (the backend
 * parallelises inside it) and flushes output.  A cancelled request or a
 * closed connection leaves the batch before the next step.
 * SIGTERM/SIGINT drain: no new admissions, running requests finish (up to
 * drain_timeout), then the process exits 0.
 */
#ifndef SLUICE_WORKER_SERVER_H
#define SLUICE_WORKER_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/status.h"

struct wk_server_cfg {
	char *name;
	char *model;
	char *model_name;
	char *model_sha256;
	char *socket;
	int socket_mode;               /* index: 0 = "0600", 1 = "0660" */
	char *socket_group;
	struct cm_cfg_strlist allowed_uids;
	int backend;                   /* index: 0 auto, 1 cpu, 2 cuda */
	int64_t device;
	int64_t threads;               /* 0 = online CPUs */
	uint64_t kv_cache_bytes;       /* 0 = kv_cache_fraction of free memory */
	double kv_cache_fraction;
	int kv_type;                   /* index: 0 F16, 1 F32 */
	int64_t block_tokens;
	int64_t max_running;
	int64_t step_tokens;
	int64_t max_waiting;
	int64_t context;               /* 0 = the model's training context */
	char *chat_template;
	int64_t max_connections;
	int64_t stats_interval_ms;
	int64_t drain_timeout_ms;
	int log_level;                 /* index into debug, info, warn, error */
};

extern const struct cm_cfg_section wk_server_section;

/* Runs the server until drained; returns the process exit code. */
int wk_server_run(const struct wk_server_cfg *cfg);

/* `sluice-worker serve --config FILE` */
int wk_cli_serve(int argc, char **argv);

#endif
