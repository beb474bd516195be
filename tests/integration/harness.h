/*
 * harness.h - real processes for integration tests: a private temp
 * directory, generated models (the real `sluice-model synth`), a worker
 * process started from a written config, and orderly shutdown.  Binaries
 * are found under $SLUICE_BUILD_DIR (set by ctest).
 */
#ifndef SLUICE_TESTS_HARNESS_H
#define SLUICE_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct h_proc {
	pid_t pid;
	char log[512];  /* stderr of the process */
};

/* Creates a fresh temp dir (returned path lives until h_cleanup). */
const char *h_tmpdir(void);
void h_cleanup(void);

/* Path of a built binary ("worker/sluice-worker"). */
const char *h_bin(const char *rel);

/* Generates (once per test process) a model; returns its path or NULL. */
const char *h_model(const char *preset, const char *type, const char *arch);
/* The same with `sluice-model synth --template tmpl` (NULL: its default). */
const char *h_model_template(const char *preset, const char *type, const char *arch,
			     const char *tmpl);

/*
 * Writes `config_json` to <tmp>/<name>.json and starts
 * `sluice-worker serve --config` on it.  0 on success.
 */
int h_worker_start(struct h_proc *p, const char *name, const char *config_json);
/* A worker named name serving model on <tmpdir>/<name>.sock (the path is
 * written to sock); extra: the other members of its "worker" object, e.g.
 * "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\"".  0 or -1. */
int h_worker_start_model(struct h_proc *p, const char *name, const char *model,
			 const char *extra, char *sock, size_t sock_len);
/* Spawns argv (NULL-terminated) with stderr to <tmp>/<name>.log. */
int h_spawn(struct h_proc *p, const char *name, char *const argv[]);
/* SIGTERM, wait up to timeout_ms, then SIGKILL; returns the exit status or -1. */
int h_stop(struct h_proc *p, int timeout_ms);
/* 1 when the process is still running. */
int h_alive(struct h_proc *p);
/*
 * kill(p->pid, sig), refused (-1, errno ESRCH) when the process is gone
 * (pid 0 after h_stop): kill(0, sig) would signal the whole process group,
 * the other tests ctest runs beside this one included (a SIGCONT there
 * resumed another test's paused worker).
 */
int h_signal(struct h_proc *p, int sig);
/*
 * A test's teardown: stops the gateway (SIGTERM: it must exit 0, under
 * ASan without a leak), then the n workers and Redis.  0 and the temp dir
 * removed, or -1 with the gateway's log kept and named on stderr.
 */
int h_stop_service(struct h_proc *gateway, struct h_proc *workers, size_t n,
		   struct h_proc *redis);
/*
 * Waits up to timeout_ms for a started sluice-gateway's log line
 * "sluice-gateway listening port=N admin_port=M" and reads both ports.
 * 0 when read, -1 when the gateway exited or the time ran out.
 */
int h_gateway_ports(struct h_proc *gw, int timeout_ms, int *port, int *admin_port);
/*
 * Starts a private redis-server (no TCP port, socket mode 0700, no
 * persistence, working directory `dir`) on the Unix socket `sock` and waits
 * up to timeout_ms until it accepts a connection.  0 when ready, 77 when
 * redis-server is not installed (skip), -1 on failure.
 */
int h_redis_start(struct h_proc *p, const char *sock, const char *dir, int timeout_ms);
/* Monotonic milliseconds. */
int64_t h_now_ms(void);
/* Yields ms milliseconds while a test polls a condition with a deadline
 * (never as synchronisation itself). */
void h_pause_ms(int ms);
/*
 * Runs a shell command and returns its stdout (at most 1 MiB, malloc'd,
 * NUL-terminated) with *status = pclose()'s; NULL when it cannot start.
 */
char *h_run_capture(const char *cmd, int *status);
/* Reads a whole file into a malloc'd NUL-terminated string. */
char *h_read_file(const char *path, size_t *len);
/* The pepper every integration fixture writes (mode 0600). */
#define H_TEST_PEPPER "test-pepper-0123456789abcdef0123456789abcdef\n"
/* Writes `text` to path with `mode` (a pepper, credentials); 0, or -1. */
int h_write_file(const char *path, const char *text, unsigned mode);
/* Value of one sample line "name{labels} value" of a /metrics text (or -1). */
double h_metric(const char *text, const char *series);

/* ---- sluicectl and HTTP clients ------------------------------------------- */

/* The Redis socket and pepper file every h_ctl call passes (copied). */
void h_ctl_setup(const char *redis_sock, const char *pepper_file);
/* Runs `sluicectl --redis ... --pepper-file ... ARGS 2>&1`; its output in
 * out[size] (out may be NULL); returns its exit status. */
int h_ctl_rc(char *out, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same, failing the running cmocka test unless it exits 0. */
void h_ctl(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* `sluicectl key issue WHO`: the key (and its id when id is not NULL). */
void h_issue_key(const char *who, char key[64], char id[32]);
/*
 * One HTTP/1.1 request over a fresh loopback connection to port p; returns
 * the status (-1 when the connection failed; with timeout_ms > 0, -2 when
 * no complete answer came within it) and the body in *body (malloc'd, may
 * be NULL).
 */
int h_http(int p, const char *method, const char *path, const char *auth,
	   const char *data, char **body, int timeout_ms);

#endif
