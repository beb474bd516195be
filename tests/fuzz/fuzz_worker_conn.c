/*
 * fuzz_worker_conn.c - drives a live worker's connection handler with
 * arbitrary bytes: the real server state (model, KV cache, scheduler,
 * text pipeline) of worker/serve/server.c without its socket listener.
 *
 * Each input is the byte stream of one gateway connection (a socketpair
 * end adopted by the server), delivered in pieces whose sizes come from
 * the input; between pieces the scheduler runs a few steps.  Then the
 * connection is dropped.  Checked: no crash or sanitizer report, and the
 * invariant that a vanished gateway leaves no KV block referenced and no
 * EMBED request queued.
 *
 * Every input goes to two servers: one generating, on a tiny generated
 * model ($SLUICE_FUZZ_MODEL, or made at start with the build's own
 * `sluice-model synth`, found next to this binary) with Qwen3's template:
 * a thinking model (thinking before constraints, budgets) whose family has
 * tool syntax; and one embedding, on a bert-tiny (WordPiece, encoder):
 * EMBED admission, truncation, the embedding steps.
 */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"
#include "worker/serve/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct wk_server *srv, *emb_srv;
static struct wk_server_cfg cfg, emb_cfg;
static char model_path[PATH_MAX], emb_path[PATH_MAX];

/* The embedding server's model: bert-tiny F32, made like the other. */
static int make_emb_model(const char *dir)
{
	char cmd[3 * PATH_MAX];

	snprintf(emb_path, sizeof(emb_path), "/tmp/sluice-fuzz-worker-bert-%ld.gguf", (long)getpid());
	snprintf(cmd, sizeof(cmd),
		 "%s/../../tools/sluice-model synth --preset bert-tiny --arch bert --type F32 "
		 "--seed 3 -o %s >/dev/null", dir, emb_path);
	return system(cmd) == 0 ? 0 : -1;
}

static int make_model(void)
{
	char exe[PATH_MAX], cmd[3 * PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *env = getenv("SLUICE_FUZZ_MODEL");

	if (n <= 0)
		return -1;
	exe[n] = '\0';
	dirname(exe); /* <build>/tests/fuzz: sluice-model is in ../../tools */
	if (make_emb_model(exe) != 0)
		return -1;
	if (env) {
		snprintf(model_path, sizeof(model_path), "%s", env);
		return 0;
	}
	/* <build>/tests/fuzz/fuzz_worker_conn -> <build>/tools/sluice-model */
	snprintf(model_path, sizeof(model_path), "/tmp/sluice-fuzz-worker-%ld.gguf", (long)getpid());
	snprintf(cmd, sizeof(cmd),
		 "%s/../../tools/sluice-model synth --preset tiny --type Q8_0 --seed 3 --template qwen3 "
		 "-o %s >/dev/null",
		 exe, model_path);
	return system(cmd) == 0 ? 0 : -1;
}

static void cleanup(void)
{
	wk_server_close(srv);
	wk_server_close(emb_srv);
	cm_cfg_free(&wk_server_section, &cfg);
	cm_cfg_free(&wk_server_section, &emb_cfg);
	unlink(emb_path);
	if (!getenv("SLUICE_FUZZ_MODEL"))
		unlink(model_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[1024];

	(void)argc;
	(void)argv;
	cm_log_setup(CM_LOG_OFF, 2, "fuzz");
	if (make_model() != 0 || cm_cfg_defaults(&wk_server_section, &cfg) != CM_OK) {
		fprintf(stderr, "fuzz_worker_conn: cannot prepare the model\n");
		exit(1);
	}
	free(cfg.model);
	cfg.model = strdup(model_path);
	free(cfg.model_name);
	cfg.model_name = strdup("tiny");
	free(cfg.socket);
	cfg.socket = strdup("/nonexistent/unused.sock");
	cfg.threads = 1;
	cfg.kv_cache_bytes = 64 * 16 * 1024; /* 64 blocks: pressure and preemption */
	cfg.max_running = 8;
	cfg.step_tokens = 64;
	cfg.max_waiting = 16;
	if (wk_server_open(&cfg, &srv, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "fuzz_worker_conn: %s\n", err);
		exit(1);
	}
	if (cm_cfg_defaults(&wk_server_section, &emb_cfg) != CM_OK)
		exit(1);
	free(emb_cfg.model);
	emb_cfg.model = strdup(emb_path);
	free(emb_cfg.model_name);
	emb_cfg.model_name = strdup("tiny");
	free(emb_cfg.socket);
	emb_cfg.socket = strdup("/nonexistent/unused.sock");
	emb_cfg.threads = 1;
	emb_cfg.max_waiting = 16;
	emb_cfg.embed_step_tokens = 96; /* several steps per request */
	emb_cfg.embed_truncatable = true;
	if (wk_server_open(&emb_cfg, &emb_srv, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "fuzz_worker_conn: %s\n", err);
		exit(1);
	}
	atexit(cleanup);
	return 0;
}

static void drain(int fd)
{
	uint8_t buf[65536];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static void one_server(struct wk_server *s, const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	one_server(srv, data, size);
	one_server(emb_srv, data, size);
	return 0;
}

static void one_server(struct wk_server *s, const uint8_t *data, size_t size)
{
	int sv[2];
	size_t off = 0;
	uint32_t used, cached;
	int open_conn = 1;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	if (wk_server_adopt_fd(s, sv[0]) != CM_OK) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	/* piece sizes: the first byte of each piece picks 1..256 bytes */
	while (off < size && open_conn) {
		size_t piece = (size_t)data[off++] + 1;
		int steps = 0;

		if (piece > size - off)
			piece = size - off;
		if (wk_server_input(s, sv[0], data + off, piece) < 0)
			open_conn = 0;
		off += piece;
		while (wk_server_step(s) && ++steps < 8)
			drain(sv[1]);
		drain(sv[1]);
	}
	if (open_conn)
		wk_server_drop_fd(s, sv[0]);
	close(sv[1]);
	wk_server_kv_usage(s, &used, &cached);
	if (used != 0) {
		fprintf(stderr, "fuzz_worker_conn: %u KV blocks still used after the peer left\n", used);
		__builtin_trap();
	}
	if (wk_server_embed_waiting(s) != 0) {
		fprintf(stderr, "fuzz_worker_conn: EMBED requests still queued after the peer left\n");
		__builtin_trap();
	}
}
