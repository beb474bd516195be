/*
 * conn.c - the worker's gateway connections: accept with the peer's
 * uid checked (SO_PEERCRED), HELLO, proto/ frames decoded and queued into a
 * capped output buffer, STATS and the latency histograms they carry.
 * A peer that sends a malformed frame or does not read is dropped.
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
#include "worker/text/tokenizer.h"

void wk_serve_hist_add(uint64_t *h, int64_t ns)
{
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++) {
		if (ns <= proto_hist_bounds_ns[i] || i == PROTO_HIST_BUCKETS - 1) {
			h[i]++;
			return;
		}
	}
}

void wk_serve_conn_send(struct wk_serve_conn *c, const struct proto_msg *m)
{
	enum cm_status st;

	if (!c || c->dead)
		return;
	st = proto_encode(&c->out, m, CM_LIM_PROTO_FRAME_BYTES);
	if (st != CM_OK) {
		/* a peer that does not read is a peer we drop */
		cm_logf(CM_LOG_WARN, "conn_dropped", "fd %d: cannot queue a %s frame (%s)",
			c->fd, proto_type_str((enum proto_type)m->type), cm_status_str(st));
		c->dead = 1;
	}
}

void wk_serve_send_error(struct wk_serve_conn *c, uint64_t id, uint16_t code, const char *msg)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_ERROR;
	m.request_id = id;
	m.u.error.code = code;
	m.u.error.message.ptr = msg;
	m.u.error.message.len = (uint32_t)strlen(msg);
	wk_serve_conn_send(c, &m);
}

/* After a read or write returned n: 1 to go on (bytes moved, or EINTR), 0
 * to wait for the socket (EAGAIN), -1 when the peer is gone (c dead). */
static int conn_io_go_on(struct wk_serve_conn *c, ssize_t n)
{
	if (n > 0 || (n < 0 && errno == EINTR))
		return 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	c->dead = 1;
	return -1;
}

void wk_serve_conn_flush(struct wk_serve_conn *c)
{
	while (!c->dead && cm_buf_len(&c->out) > 0) {
		ssize_t n = write(c->fd, cm_buf_data(&c->out), cm_buf_len(&c->out));

		if (conn_io_go_on(c, n) <= 0)
			return;
		if (n < 0)
			continue;
		cm_buf_consume(&c->out, (size_t)n);
	}
}

static void send_hello(struct wk_server *s, struct wk_serve_conn *c)
{
	struct proto_msg m;
	struct proto_hello *h = &m.u.hello;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_HELLO;
	h->proto_version = PROTO_VERSION;
	h->worker_name.ptr = s->cfg->name;
	h->worker_name.len = (uint32_t)strlen(s->cfg->name);
	h->model_name.ptr = s->cfg->model_name;
	h->model_name.len = (uint32_t)strlen(s->cfg->model_name);
	memcpy(h->model_sha256, s->model->sha256, 32);
	h->context_len = s->n_ctx;
	h->vocab_size = s->model->hp.n_vocab;
	h->max_seqs = (uint32_t)s->cfg->max_running;
	h->kv_blocks_total = wk_kv_n_blocks(s->kv);
	h->kv_block_tokens = wk_kv_block_tokens(s->kv);
	h->backend.ptr = s->backend_name;
	h->backend.len = (uint32_t)strlen(s->backend_name);
	h->device.ptr = s->device;
	h->device.len = (uint32_t)strlen(s->device);
	h->engine_version.ptr = s->engine;
	h->engine_version.len = (uint32_t)strlen(s->engine);
	h->model_bytes = s->model->file_bytes;
	h->model_mtime_s = s->model->mtime_s;
	h->architecture.ptr = s->model->cfg->arch_name;
	h->architecture.len = (uint32_t)strlen(s->model->cfg->arch_name);
	h->parameter_count = s->model->n_params;
	h->file_type.ptr = s->model->file_type;
	h->file_type.len = (uint32_t)strlen(s->model->file_type);
	h->embedding_dim = wk_serve_embeds(s) ? s->model->hp.n_embd : 0;
	h->generates = s->model->hp.causal ? 1 : 0;
	wk_serve_conn_send(c, &m);
}

static int uid_allowed(const struct wk_server *s, uid_t uid)
{
	for (size_t i = 0; i < s->n_allowed; i++)
		if (s->allowed[i] == uid)
			return 1;
	return 0;
}

/* Adopts a connected socket as a gateway connection and sends HELLO. */
struct wk_serve_conn *wk_serve_conn_new(struct wk_server *s, int fd, uid_t uid)
{
	struct wk_serve_conn *c;

	if (s->n_conns >= (uint32_t)s->cfg->max_connections) {
		cm_logf(CM_LOG_WARN, "conn_refused", "max_connections (%lld) reached",
			(long long)s->cfg->max_connections);
		return NULL;
	}
	c = cm_calloc(1, sizeof(*c));
	if (!c || !(c->dec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES))) {
		cm_free(c);
		return NULL;
	}
	c->fd = fd;
	c->uid = uid;
	cm_buf_init(&c->out, CM_LIM_PROTO_SENDBUF_BYTES);
	s->conns[s->n_conns++] = c;
	cm_logf(CM_LOG_INFO, "conn_open", "fd %d uid %ld", fd, (long)uid);
	send_hello(s, c);
	return c;
}

void wk_serve_accept_conn(struct wk_server *s)
{
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    !uid_allowed(s, cred.uid)) {
		cm_logf(CM_LOG_WARN, "peer_refused", "peer uid %ld is not in worker.allowed_uids",
			len == sizeof(cred) ? (long)cred.uid : -1L);
		close(fd);
		return;
	}
	if (!wk_serve_conn_new(s, fd, cred.uid))
		close(fd);
}

void wk_serve_conn_close(struct wk_server *s, uint32_t idx)
{
	struct wk_serve_conn *c = s->conns[idx];

	/* cancel everything it owns: blocks are freed before the next step */
	while (c->reqs) {
		struct wk_serve_req *r = c->reqs;

		c->reqs = r->next;
		c->n_reqs--;
		r->conn = NULL;
		wk_sched_cancel(s->sched, r->seq);
	}
	wk_serve_embed_conn_gone(s, c);
	cm_logf(CM_LOG_INFO, "conn_close", "fd %d", c->fd);
	close(c->fd);
	proto_decoder_free(c->dec);
	cm_buf_deinit(&c->out);
	cm_free(c);
	s->conns[idx] = s->conns[--s->n_conns];
}

/* Decodes and handles every complete frame in data[0..n). */
void wk_serve_conn_input(struct wk_server *s, struct wk_serve_conn *c, const void *data, size_t n)
{
	struct proto_msg m;
	enum cm_status st;

	if (proto_decoder_feed(c->dec, data, n) != CM_OK) {
		c->dead = 1;
		return;
	}
	while ((st = proto_decoder_next(c->dec, &m)) == CM_OK) {
		wk_serve_handle_msg(s, c, &m);
		if (c->dead)
			return;
	}
	if (st != CM_AGAIN) {
		char msg[128];

		snprintf(msg, sizeof(msg), "malformed frame: %s",
			 proto_error_str(proto_decoder_error(c->dec)));
		cm_logf(CM_LOG_WARN, "proto_error", "fd %d: %s", c->fd, msg);
		wk_serve_send_error(c, 0, PROTO_E_PROTOCOL, msg);
		wk_serve_conn_flush(c);
		c->dead = 1;
	}
}

void wk_serve_conn_read(struct wk_server *s, struct wk_serve_conn *c)
{
	uint8_t buf[65536];

	while (!c->dead) {
		ssize_t n = read(c->fd, buf, sizeof(buf));

		if (conn_io_go_on(c, n) <= 0)
			return;
		if (n < 0)
			continue;
		wk_serve_conn_input(s, c, buf, (size_t)n);
	}
}

void wk_serve_send_stats(struct wk_server *s, int64_t now)
{
	struct wk_sched_stats ss;
	struct wk_kv_stats ks;
	struct wk_backend_info bi;
	struct proto_msg m;
	struct proto_stats *p = &m.u.stats;
	double dt = (now - s->last_stats_t) / 1e9;

	wk_sched_stats(s->sched, &ss);
	wk_kv_stats(s->kv, &ks);
	s->be->ops->info(s->be, &bi);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_STATS;
	p->queue_depth = ss.waiting + wk_serve_emb_waiting(s);
	p->running = ss.running;
	p->step_batch = ss.last_batch_seqs;
	p->kv_blocks_used = ks.used;
	p->kv_blocks_free = ks.free;
	p->kv_blocks_cached = ks.cached;
	p->prefix_hit_tokens = ss.prefix_hit_tokens;
	p->prompt_tokens = s->prompt_tokens;
	p->gen_tokens = s->gen_tokens;
	p->prefill_tps = dt > 0 ? (float)((ss.prefill_tokens - s->last_prefill) / dt) : 0;
	p->decode_tps = dt > 0 ? (float)((ss.decode_tokens - s->last_decode) / dt) : 0;
	p->device_mem_used = bi.mem_used;
	p->device_mem_total = bi.mem_total;
	p->draining = (uint8_t)s->draining;
	p->n_hist = PROTO_HIST_BUCKETS;
	memcpy(p->ttft_hist, s->ttft_hist, sizeof(s->ttft_hist));
	memcpy(p->itl_hist, s->itl_hist, sizeof(s->itl_hist));
	s->last_prefill = ss.prefill_tokens;
	s->last_decode = ss.decode_tokens;
	s->last_stats_t = now;
	for (uint32_t i = 0; i < s->n_conns; i++)
		wk_serve_conn_send(s->conns[i], &m);
}

int wk_serve_conn_index(const struct wk_server *s, int fd)
{
	for (uint32_t i = 0; i < s->n_conns; i++)
		if (s->conns[i]->fd == fd)
			return (int)i;
	return -1;
}
