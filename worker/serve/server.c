/*
 * server.c - the worker's life: setup (model, backend, KV cache,
 * scheduler, socket), the poll loop (connections, scheduler steps, STATS,
 * drain on SIGTERM), teardown, the embedding used by tests and fuzzers,
 * and `sluice-worker serve`.
 */
#include "worker/serve/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/limits.h"
#include "common/log.h"
#include "worker/cpu/expert_cache.h"
#include "worker/serve/backend_open.h"
#include "worker/text/tokenizer.h"

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int parse_allowed(struct wk_server *s, char *err, size_t err_len)
{
	const struct cm_cfg_strlist *l = &s->cfg->allowed_uids;

	s->n_allowed = l->n ? l->n : 1;
	s->allowed = cm_calloc(s->n_allowed, sizeof(uid_t));
	if (!s->allowed)
		return -1;
	if (l->n == 0) {
		s->allowed[0] = getuid();
		return 0;
	}
	for (size_t i = 0; i < l->n; i++) {
		char *end;
		unsigned long v = strtoul(l->items[i], &end, 10);
		struct passwd *pw;

		if (*l->items[i] && *end == '\0') {
			s->allowed[i] = (uid_t)v;
			continue;
		}
		pw = getpwnam(l->items[i]);
		if (!pw) {
			snprintf(err, err_len, "worker.allowed_uids[%zu]: expected a uid or a user name, found '%s'",
				 i, l->items[i]);
			return -1;
		}
		s->allowed[i] = pw->pw_uid;
	}
	return 0;
}

/*
 * The socket path may be taken only when nothing is there or a stale socket
 * of a previous run is: a regular file (or anything else) is never removed,
 * and a socket another process still listens on (a second worker on the
 * same path) is not taken over (issue 13, finding 17).
 */
static int socket_path_free(const char *path, const struct sockaddr_un *sa, char *err,
			    size_t err_len)
{
	struct stat sb;
	int probe, live;

	if (lstat(path, &sb) != 0)
		return errno == ENOENT ? 0 : (snprintf(err, err_len, "worker.socket '%s': %s", path,
						       strerror(errno)), -1);
	if (!S_ISSOCK(sb.st_mode)) {
		snprintf(err, err_len, "worker.socket '%s': exists and is not a socket; "
			 "refusing to replace it", path);
		return -1;
	}
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -1;
	}
	live = connect(probe, (const struct sockaddr *)sa, sizeof(*sa)) == 0 || errno != ECONNREFUSED;
	close(probe);
	if (live) {
		snprintf(err, err_len, "worker.socket '%s': another process listens on it "
			 "(a second worker with the same socket?); refusing to take it over", path);
		return -1;
	}
	unlink(path); /* a stale socket from a previous run */
	return 0;
}

static int listen_socket(struct wk_server *s, char *err, size_t err_len)
{
	struct sockaddr_un sa;
	int fd;
	mode_t mode = s->cfg->socket_mode == WK_CFG_SOCKET_0660 ? 0660 : 0600;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(s->cfg->socket) >= sizeof(sa.sun_path)) {
		snprintf(err, err_len, "worker.socket: expected a path shorter than %zu bytes",
			 sizeof(sa.sun_path));
		return -1;
	}
	strcpy(sa.sun_path, s->cfg->socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -1;
	}
	if (socket_path_free(s->cfg->socket, &sa, err, err_len) != 0) {
		close(fd);
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(s->cfg->socket, mode) != 0 || listen(fd, 64) != 0) {
		snprintf(err, err_len, "worker.socket '%s': %s", s->cfg->socket, strerror(errno));
		close(fd);
		return -1;
	}
	if (s->cfg->socket_group && s->cfg->socket_group[0]) {
		struct group *gr = getgrnam(s->cfg->socket_group);

		if (!gr || chown(s->cfg->socket, (uid_t)-1, gr->gr_gid) != 0) {
			snprintf(err, err_len, "worker.socket_group '%s': %s", s->cfg->socket_group,
				 gr ? strerror(errno) : "no such group");
			close(fd);
			return -1;
		}
	}
	s->listen_fd = fd;
	return 0;
}

/* The engine build (version+commit when built from git) and the device
 * with the CUDA stack's versions: what HELLO, worker_ready and every
 * request's log line carry. */
static void runtime_describe(struct wk_server *s, const struct wk_backend_info *bi)
{
#ifdef SLUICE_GIT_COMMIT
	snprintf(s->engine, sizeof(s->engine), "%s+%s", SLUICE_VERSION, SLUICE_GIT_COMMIT);
#else
	snprintf(s->engine, sizeof(s->engine), "%s", SLUICE_VERSION);
#endif
	if (bi->cuda_driver)
		snprintf(s->device, sizeof(s->device), "%.100s (driver %d.%d, runtime %d.%d, cuBLAS "
			 "%d.%d.%d)", bi->device, bi->cuda_driver / 1000, bi->cuda_driver % 1000 / 10,
			 bi->cuda_runtime / 1000, bi->cuda_runtime % 1000 / 10, bi->cublas / 10000,
			 bi->cublas / 100 % 100, bi->cublas % 100);
	else
		snprintf(s->device, sizeof(s->device), "%s", bi->device);
}

/* worker.pin_*: 0, or -1 with err naming the key, expected and found. */
static int runtime_check(const struct wk_server_cfg *c, const char *engine,
			 const struct wk_backend_info *bi, char *err, size_t err_len)
{
	const struct {
		const char *key;
		int64_t want;
		int found;
	} pins[] = {
		{ "pin_cuda_driver", c->pin_cuda_driver, bi->cuda_driver },
		{ "pin_cuda_runtime", c->pin_cuda_runtime, bi->cuda_runtime },
		{ "pin_cublas", c->pin_cublas, bi->cublas },
	};

	if (c->pin_engine_version && strcmp(c->pin_engine_version, engine) != 0) {
		snprintf(err, err_len, "worker.pin_engine_version: expected engine %s, found %s",
			 c->pin_engine_version, engine);
		return -1;
	}
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		if (!pins[i].want || pins[i].want == pins[i].found)
			continue;
		if (!pins[i].found)
			snprintf(err, err_len, "worker.%s: expected %lld, found no CUDA (backend %s)",
				 pins[i].key, (long long)pins[i].want, bi->name);
		else
			snprintf(err, err_len, "worker.%s: expected %lld, found %d", pins[i].key,
				 (long long)pins[i].want, pins[i].found);
		return -1;
	}
	return 0;
}

/* The start-up line: what the model, the KV budget and the backend are. */
static void log_ready(const struct wk_server *s, const struct wk_kv_plan *kp, int64_t t0)
{
	struct cm_log_rec lr;
	uint32_t bt = (uint32_t)s->cfg->block_tokens;
	char hex[65];

	cm_hex_encode(s->model->sha256, 32, hex);
	cm_log_begin(&lr, CM_LOG_INFO, "worker_ready");
	cm_log_str(&lr, "worker", s->cfg->name);
	cm_log_str(&lr, "model", s->cfg->model_name);
	cm_log_str(&lr, "model_sha256", hex);
	cm_log_u64(&lr, "params", s->model->n_params);
	cm_log_u64(&lr, "weight_bytes", s->model->weight_bytes);
	/* a mixture of experts: what one token reads (= weight_bytes when dense) */
	cm_log_u64(&lr, "experts", s->model->hp.n_expert);
	cm_log_u64(&lr, "experts_used", s->model->hp.n_expert_used);
	cm_log_u64(&lr, "active_weight_bytes", s->model->cfg->active_weight_bytes);
	/* CPU: the matrices also held repacked for the strip kernels */
	cm_log_u64(&lr, "repacked_bytes", s->repacked_bytes);
	/* CPU, a mixture: the experts' cache file (expert_cache.h) */
	cm_log_u64(&lr, "expert_cache_bytes", s->expert_cache_bytes);
	cm_log_bool(&lr, "expert_cache_built", s->expert_cache_built);
	cm_log_u64(&lr, "kv_bytes_per_token", kp->bytes_per_token);
	cm_log_u64(&lr, "kv_blocks", kp->n_blocks);
	cm_log_u64(&lr, "kv_block_tokens", bt);
	cm_log_u64(&lr, "kv_bytes", kp->n_blocks * kp->bytes_per_block);
	cm_log_u64(&lr, "context", s->n_ctx);
	{
		/* a model windowed in every layer keeps at most its window (and a
		 * step) per sequence */
		uint32_t w = wk_kv_window(&s->model->hp);
		uint64_t kept = w && w + s->cfg->step_tokens + 2ull * bt < s->n_ctx
					? w + s->cfg->step_tokens + 2ull * bt : s->n_ctx;

		cm_log_u64(&lr, "full_context_seqs", kp->n_blocks * bt / kept);
		cm_log_u64(&lr, "kv_window", w);
	}
	cm_log_u64(&lr, "max_running", (uint64_t)s->cfg->max_running);
	cm_log_str(&lr, "backend", s->backend_name);
	cm_log_str(&lr, "device", s->device);
	cm_log_str(&lr, "engine_version", s->engine);
	cm_log_i64(&lr, "load_ns", cm_mono_ns() - t0);
	cm_log_end(&lr);
}

static int setup(struct wk_server *s, int do_listen, char *err, size_t err_len)
{
	struct wk_model_opts mo = { 0 };
	uint32_t bt = (uint32_t)s->cfg->block_tokens;
	struct wk_backend_want bw = {
		.kind = (enum wk_cfg_backend)s->cfg->backend,
		.device = (int)s->cfg->device,
		.threads = (int)s->cfg->threads,
		.kv_type = (enum wk_cfg_kv_type)s->cfg->kv_type,
		.block_tokens = bt,
		.kv_bytes = s->cfg->kv_cache_bytes,
		.kv_fraction = s->cfg->kv_cache_fraction,
		.cpu_repack = s->cfg->cpu_repack,
	};
	struct wk_kv_plan kp;
	struct wk_sched_config sc;
	char xdir[4096]; /* the experts' cache directory, while the backend is made */
	int64_t t0 = cm_mono_ns();
	struct wk_backend_info bi;

	mo.sha256_hex = s->cfg->model_sha256;
	mo.compute_sha256 = 1;
	mo.chat_template = s->cfg->chat_template;
	mo.n_ctx = (uint32_t)s->cfg->context;
	if (wk_model_load(s->cfg->model, &mo, &s->model, err, err_len) != CM_OK)
		return -1;
	if (!s->cfg->model_sha256)
		cm_logf(CM_LOG_WARN, "model_unpinned",
			"worker.model_sha256 is not set: pin the digest to refuse a swapped file");
	if (s->model->hp.n_expert && s->cfg->expert_cache && s->cfg->cpu_repack) {
		if (wk_cpu_xcache_dir(s->cfg->expert_cache_dir, xdir, sizeof(xdir)) == 0)
			bw.cpu_expert_cache = xdir;
		else
			cm_logf(CM_LOG_WARN, "expert_cache_unavailable",
				"none of CACHE_DIRECTORY, XDG_CACHE_HOME, HOME is set: set worker.expert_cache_dir");
	}
	if (wk_backend_open(&bw, s->model, &kp, &s->be, err, err_len) != CM_OK)
		return -1;
	s->n_ctx = s->cfg->context ? (uint32_t)s->cfg->context : s->model->hp.n_ctx_train;
	/* no token covers more input than its own text: a prompt of more
	 * bytes than n tokens' worth cannot fit n tokens */
	s->max_piece_bytes = 1;
	for (size_t i = 0; i < wk_tok_n_vocab(s->model->tok); i++) {
		size_t pl = 0;

		if (wk_tok_piece(s->model->tok, (int32_t)i, &pl) && pl > s->max_piece_bytes)
			s->max_piece_bytes = (uint32_t)pl;
	}
	/* an encoder keeps no KV: its context is its positions */
	if (s->model->hp.causal && s->n_ctx > kp.n_blocks * bt)
		s->n_ctx = (uint32_t)(kp.n_blocks * bt);
	if (!s->model->hp.causal && s->n_ctx > s->model->hp.n_ctx_train)
		s->n_ctx = s->model->hp.n_ctx_train;
	s->be->ops->info(s->be, &bi);
	snprintf(s->backend_name, sizeof(s->backend_name), "%s", bi.name);
	s->repacked_bytes = bi.repacked_bytes;
	s->expert_cache_bytes = bi.expert_cache_bytes;
	s->expert_cache_built = bi.expert_cache_built;
	if (bi.expert_cache_error[0])
		cm_logf(CM_LOG_WARN, "expert_cache_unavailable",
			"%s; the experts are read from the model file", bi.expert_cache_error);
	else if (bi.expert_cache_built)
		cm_logf(CM_LOG_INFO, "expert_cache_written", "%s: %.2f GiB in %.2f s",
			bi.expert_cache_path, bi.expert_cache_bytes / 1073741824.0,
			bi.expert_cache_build_ns / 1e9);
	runtime_describe(s, &bi);
	if (runtime_check(s->cfg, s->engine, &bi, err, err_len) != 0)
		return -1;
	s->kv = wk_kv_new((uint32_t)kp.n_blocks, bt);
	s->ws = wk_sampler_ws_new(s->model->hp.n_vocab);
	sc.max_running = (uint32_t)s->cfg->max_running;
	sc.step_tokens = (uint32_t)s->cfg->step_tokens;
	sc.n_ctx = s->n_ctx;
	sc.n_vocab = s->model->hp.n_vocab;
	sc.kv_window = wk_kv_window(&s->model->hp);
	if (!s->kv || !s->ws ||
	    !(s->sched = wk_sched_new(&sc, s->be, s->kv, &wk_serve_sched_cb, s))) {
		snprintf(err, err_len, "out of memory setting up the scheduler");
		return -1;
	}
	if (wk_serve_grammar_setup(s, err, err_len) != CM_OK)
		return -1;
	if (wk_serve_embed_setup(s) != CM_OK) {
		snprintf(err, err_len, "out of memory setting up embeddings");
		return -1;
	}
	s->conns = cm_calloc((size_t)s->cfg->max_connections, sizeof(*s->conns));
	if (!s->conns || parse_allowed(s, err, err_len) != 0)
		return -1;
	log_ready(s, &kp, t0);
	return do_listen ? listen_socket(s, err, err_len) : 0;
}

/* One line at exit: where the scheduler's time went (no request data). */
static void log_totals(const struct wk_server *s)
{
	struct cm_log_rec lr;
	struct wk_sched_stats ss;

	wk_sched_stats(s->sched, &ss);
	cm_log_begin(&lr, CM_LOG_INFO, "worker_totals");
	cm_log_str(&lr, "worker", s->cfg->name);
	cm_log_u64(&lr, "steps", ss.steps);
	cm_log_u64(&lr, "prefill_tokens", ss.prefill_tokens);
	cm_log_u64(&lr, "decode_tokens", ss.decode_tokens);
	cm_log_u64(&lr, "forward_ns", ss.forward_ns);
	cm_log_u64(&lr, "emit_ns", ss.emit_ns);
	cm_log_end(&lr);
}

static void teardown(struct wk_server *s)
{
	while (s->n_conns)
		wk_serve_conn_close(s, s->n_conns - 1);
	if (s->sched)
		log_totals(s);
	wk_sched_free(s->sched);
	wk_kv_free(s->kv);
	wk_sampler_ws_free(s->ws);
	wk_serve_grammar_teardown(s);
	wk_serve_embed_teardown(s);
	if (s->be)
		s->be->ops->destroy(s->be);
	wk_model_free(s->model);
	if (s->listen_fd > 0) {
		close(s->listen_fd);
		unlink(s->cfg->socket);
	}
	cm_free(s->conns);
	cm_free(s->allowed);
}

/* Nothing to run: no sequence in the scheduler, no EMBED queued. */
static int idle(const struct wk_server *s)
{
	return wk_sched_idle(s->sched) && !s->emb_head;
}

/* One turn of work: a generation step, then an embedding step. */
static void work(struct wk_server *s)
{
	if (!wk_sched_idle(s->sched)) {
		enum cm_status st = wk_sched_step(s->sched);

		if (st != CM_OK && st != CM_AGAIN)
			cm_logf(CM_LOG_ERROR, "step_failed", "%s", cm_status_str(st));
	}
	if (s->emb_head) {
		enum cm_status st = wk_serve_embed_step(s);

		(void)st; /* failed requests got their ERROR; logged there */
	}
}

/* SIGTERM seen: no new requests from now on, the running ones finish. */
static void term_check(struct wk_server *s, int64_t now)
{
	if (got_term && !s->draining) {
		s->draining = 1;
		s->drain_deadline = now + s->cfg->drain_timeout_ms * CM_NS_PER_MS;
		cm_logf(CM_LOG_INFO, "draining", "SIGTERM: no new requests; running ones finish");
	}
}

int wk_serve_term_seen(struct wk_server *s)
{
	term_check(s, cm_mono_ns());
	return s->draining;
}

/*
 * The answers still in the connections' buffers (a slow reader filled its
 * socket: the tail of a stream, a DONE, a refusal) are written out before
 * the exit, waiting for each peer to read, up to the drain deadline and at
 * most 5 s more: a drained worker must not drop the end of a response it
 * finished.
 */
static void flush_before_exit(struct wk_server *s, struct pollfd *pfd)
{
	int64_t end = cm_mono_ns() + 5000 * CM_NS_PER_MS;

	if (s->drain_deadline > end)
		end = s->drain_deadline;
	for (;;) {
		uint32_t np = 0;
		int64_t left;

		for (uint32_t i = 0; i < s->n_conns; i++) {
			struct wk_serve_conn *c = s->conns[i];

			wk_serve_conn_flush(c);
			if (!c->dead && cm_buf_len(&c->out) > 0) {
				pfd[np].fd = c->fd;
				pfd[np].events = POLLOUT;
				pfd[np++].revents = 0;
			}
		}
		left = (end - cm_mono_ns()) / CM_NS_PER_MS;
		if (np == 0 || left <= 0)
			return;
		if (poll(pfd, np, (int)left) < 0 && errno != EINTR)
			return;
	}
}

/*
 * Drained, before the exit: frames already waiting on the connections
 * are read (a SUBMIT gets its ERROR draining) and the answers flushed, so
 * that a request sent as the signal came is refused, not lost to a
 * closed connection.
 */
static void answer_pending(struct wk_server *s, struct pollfd *pfd)
{
	for (uint32_t i = 0; i < s->n_conns; i++) {
		pfd[i].fd = s->conns[i]->fd;
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	if (s->n_conns > 0 && poll(pfd, s->n_conns, 0) > 0)
		for (uint32_t i = 0; i < s->n_conns; i++)
			if (pfd[i].revents & POLLIN)
				wk_serve_conn_read(s, s->conns[i]);
	flush_before_exit(s, pfd);
}

int wk_server_run(const struct wk_server_cfg *cfg)
{
	struct wk_server srv;
	struct wk_server *s = &srv;

	char err[1024] = "";
	struct pollfd *pfd = NULL;
	struct sigaction sa;
	int rc = 1;

	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->listen_fd = -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (setup(s, 1, err, sizeof(err)) != 0) {
		cm_logf(CM_LOG_ERROR, "worker_start_failed", "%s", err[0] ? err : "setup failed");
		fprintf(stderr, "sluice-worker: %s\n", err[0] ? err : "setup failed");
		goto out;
	}
	pfd = cm_calloc((size_t)cfg->max_connections + 1, sizeof(*pfd));
	if (!pfd)
		goto out;
	s->last_stats_t = cm_mono_ns();
	s->next_stats = s->last_stats_t + cfg->stats_interval_ms * CM_NS_PER_MS;
	for (;;) {
		int64_t now = cm_mono_ns();
		int timeout, n;
		uint32_t np = 0;

		term_check(s, now);
		if (s->draining && !idle(s) && now >= s->drain_deadline) {
			/* out of patience: what still runs ends DONE(cancelled) */
			cm_logf(CM_LOG_WARN, "drain_timeout", "cancelling what still runs");
			wk_serve_embed_cancel_all(s);
			for (uint32_t i = 0; i < s->n_conns; i++) {
				while (s->conns[i]->reqs)
					wk_sched_cancel(s->sched, s->conns[i]->reqs->seq);
				wk_serve_conn_flush(s->conns[i]);
			}
		}
		if (s->draining && idle(s)) {
			answer_pending(s, pfd);
			break;
		}
		timeout = idle(s)
				  ? (int)((s->next_stats - now) / CM_NS_PER_MS + 1)
				  : 0;
		if (timeout < 0)
			timeout = 0;
		pfd[np].fd = s->listen_fd;
		pfd[np++].events = s->draining ? 0 : POLLIN;
		for (uint32_t i = 0; i < s->n_conns; i++) {
			pfd[np].fd = s->conns[i]->fd;
			pfd[np++].events = POLLIN | (cm_buf_len(&s->conns[i]->out) ? POLLOUT : 0);
		}
		n = poll(pfd, np, timeout);
		if (n < 0 && errno != EINTR) {
			cm_logf(CM_LOG_ERROR, "poll_failed", "%s", strerror(errno));
			goto out;
		}
		/* what is read after SIGTERM arrived is refused, even in the
		 * iteration it arrived in */
		term_check(s, cm_mono_ns());
		if (n > 0) {
			uint32_t nc = s->n_conns;

			for (uint32_t i = 0; i < nc; i++) {
				if (pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
					wk_serve_conn_read(s, s->conns[i]);
			}
			if (pfd[0].revents & POLLIN)
				wk_serve_accept_conn(s);
		}
		for (uint32_t i = s->n_conns; i-- > 0;)
			if (s->conns[i]->dead)
				wk_serve_conn_close(s, i);
		work(s);
		now = cm_mono_ns();
		if (now >= s->next_stats) {
			wk_serve_send_stats(s, now);
			s->next_stats = now + cfg->stats_interval_ms * CM_NS_PER_MS;
		}
		for (uint32_t i = 0; i < s->n_conns; i++)
			wk_serve_conn_flush(s->conns[i]);
		for (uint32_t i = s->n_conns; i-- > 0;)
			if (s->conns[i]->dead)
				wk_serve_conn_close(s, i);
	}
	cm_logf(CM_LOG_INFO, "worker_exit", "drained");
	rc = 0;
out:
	cm_free(pfd);
	teardown(s);
	return rc;
}

enum cm_status wk_server_open(const struct wk_server_cfg *cfg, struct wk_server **out,
			      char *err, size_t err_len)
{
	struct wk_server *s = cm_calloc(1, sizeof(*s));

	if (!s)
		return CM_ENOMEM;
	s->cfg = cfg;
	s->listen_fd = -1;
	if (setup(s, 0, err, err_len) != 0) {
		teardown(s);
		cm_free(s);
		return CM_EINVAL;
	}
	*out = s;
	return CM_OK;
}

void wk_server_close(struct wk_server *s)
{
	if (!s)
		return;
	teardown(s);
	cm_free(s);
}

enum cm_status wk_server_adopt_fd(struct wk_server *s, int fd)
{
	return wk_serve_conn_new(s, fd, getuid()) ? CM_OK : CM_ELIMIT;
}

int wk_server_input(struct wk_server *s, int fd, const void *data, size_t n)
{
	int i = wk_serve_conn_index(s, fd);

	if (i < 0)
		return -1;
	wk_serve_conn_input(s, s->conns[i], data, n);
	wk_serve_conn_flush(s->conns[i]);
	if (s->conns[i]->dead) {
		wk_serve_conn_close(s, (uint32_t)i);
		return -1;
	}
	return 0;
}

int wk_server_step(struct wk_server *s)
{
	work(s);
	for (uint32_t i = 0; i < s->n_conns; i++)
		wk_serve_conn_flush(s->conns[i]);
	for (uint32_t i = s->n_conns; i-- > 0;)
		if (s->conns[i]->dead)
			wk_serve_conn_close(s, i);
	return !idle(s);
}

void wk_server_drop_fd(struct wk_server *s, int fd)
{
	int i = wk_serve_conn_index(s, fd);

	if (i >= 0)
		wk_serve_conn_close(s, (uint32_t)i);
}

void wk_server_kv_usage(const struct wk_server *s, uint32_t *used, uint32_t *cached)
{
	struct wk_kv_stats ks;

	wk_kv_stats(s->kv, &ks);
	*used = ks.used;
	*cached = ks.cached;
}

uint32_t wk_server_embed_waiting(const struct wk_server *s)
{
	return wk_serve_emb_waiting(s);
}

int wk_cli_serve(int argc, char **argv)
{
	struct wk_server_cfg cfg;
	const char *path = NULL;
	char err[1024];
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strcmp(argv[i], "--help") == 0) {
			printf("usage: sluice-worker serve --config FILE\n");
			return 0;
		} else {
			fprintf(stderr, "sluice-worker serve: unexpected argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!path) {
		fprintf(stderr, "usage: sluice-worker serve --config FILE\n");
		return 2;
	}
	switch (wk_server_cfg_load(path, &cfg, err, sizeof(err))) {
	case CM_OK: break;
	case CM_ENOMEM: return 1;
	default:
		fprintf(stderr, "sluice-worker: %s\n", err);
		return 2;
	}
	cm_log_setup((enum cm_log_level)cfg.log_level, 2, "worker");
	rc = wk_server_run(&cfg);
	wk_server_cfg_deinit(&cfg);
	return rc;
}
