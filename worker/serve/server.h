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
#ifndef SLUICE_WORKER_SERVE_SERVER_H
#define SLUICE_WORKER_SERVE_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "worker/serve/config.h"
#include "common/status.h"


/* Runs the server until drained; returns the process exit code. */
int wk_server_run(const struct wk_server_cfg *cfg);

/*
 * Embedding for tests and fuzzers: the same server without the socket
 * listener and the poll loop.  Descriptors given to wk_server_adopt_fd()
 * (a socketpair end) belong to the server, which closes them; input is
 * handed over with wk_server_input()
 * (-1 when the connection was closed for a protocol error, as the real
 * loop would), and wk_server_step() runs one scheduler step and flushes
 * output (returns 1 while requests remain).
 */
struct wk_server;

enum cm_status wk_server_open(const struct wk_server_cfg *cfg, struct wk_server **out,
			      char *err, size_t err_len) CM_WUR;
void wk_server_close(struct wk_server *s);
enum cm_status wk_server_adopt_fd(struct wk_server *s, int fd) CM_WUR;
int wk_server_input(struct wk_server *s, int fd, const void *data, size_t n);
int wk_server_step(struct wk_server *s);
void wk_server_drop_fd(struct wk_server *s, int fd);
void wk_server_kv_usage(const struct wk_server *s, uint32_t *used, uint32_t *cached);
/* EMBED requests queued (tests, fuzzers). */
uint32_t wk_server_embed_waiting(const struct wk_server *s);

/* `sluice-worker serve --config FILE` */
int wk_cli_serve(int argc, char **argv);

#endif
