/*
 * workers.c - proto/ client connections to the workers (see workers.h).
 * One struct wk_conn per configured worker, all on the gateway's loop.
 */
#include "gateway/workers.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"

#define GW_WK_BACKOFF_MIN_MS 100
#define GW_WK_BACKOFF_MAX_MS 5000
#define GW_WK_STR_MAX 256

struct gw_slot {
	uint64_t request_id;
	const struct gw_request_ops *ops; /* NULL: detached (cancelled) */
	void *arg;
	int used;
};

struct gw_wconn {
	struct gw_workers *ws;
	size_t index;
	char *name, *socket, *model;
	struct bufferevent *bev;
	struct proto_decoder *dec;
	struct event *retry_ev, *ping_ev;
	int64_t backoff_ms;
	int connected, hello_ok;
	/* HELLO copy with owned strings */
	struct proto_hello hello;
	char h_worker[GW_WK_STR_MAX], h_model[GW_WK_STR_MAX], h_backend[GW_WK_STR_MAX],
		h_device[GW_WK_STR_MAX], h_engine[GW_WK_STR_MAX], h_arch[GW_WK_STR_MAX],
		h_ftype[GW_WK_STR_MAX];
	struct proto_stats stats;
	int have_stats;
	int64_t stats_ns;
	int64_t rx_ns;          /* the last frame from the worker */
	uint64_t ping_nonce;
	int64_t ping_sent_ns;   /* 0: none outstanding */
	int64_t pong_ns;        /* last ok PONG */
	int pong_ok;
	uint64_t pings_ok, pings_failed, reconnects, stalls;
	struct gw_slot *slots;
	uint32_t n_slots;       /* capacity of the slot array */
	/* request id -> slot + 1 (0 empty), open addressing: a TOKEN or DONE
	 * finds its request without scanning the slots */
	uint32_t *rid_index;
	uint32_t index_mask;
	uint32_t inflight;
	uint32_t reserved;      /* slots held for requests not sent yet (gw_workers_reserve) */
	uint32_t cap;
	uint32_t slo_limit;       /* gateway.slo: the adaptive limit (0: none) */
	struct cm_buf out;
	int drained;            /* operator drain: no new placements */
	uint64_t placed, prompt_tokens, cached_tokens;
};

struct gw_workers {
	struct event_base *base;
	struct gw_workers_config cfg;
	struct gw_wconn *w;
	size_t n;
	gw_workers_capacity_fn cap_fn;
	void *cap_ctx;
	double batch_share;     /* gateway.slo.batch_share (0: no class limit) */
};

static void wc_connect(struct gw_wconn *c);

static void copy_str(char *dst, const struct proto_str *s, struct proto_str *out)
{
	size_t n = s->len < GW_WK_STR_MAX - 1 ? s->len : GW_WK_STR_MAX - 1;

	memcpy(dst, s->ptr, n);
	dst[n] = '\0';
	out->ptr = dst;
	out->len = (uint32_t)n;
}

static void notify_capacity(struct gw_workers *ws)
{
	if (ws->cap_fn)
		ws->cap_fn(ws->cap_ctx);
}

static uint32_t id_hash(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (uint32_t)id;
}

static void index_put(struct gw_wconn *c, uint32_t slot)
{
	uint32_t h = id_hash(c->slots[slot].request_id) & c->index_mask;

	while (c->rid_index[h])
		h = (h + 1) & c->index_mask;
	c->rid_index[h] = slot + 1;
}

/* The index position of request `id`, or UINT32_MAX. */
static uint32_t index_pos(const struct gw_wconn *c, uint64_t id)
{
	uint32_t h;

	if (!c->rid_index)
		return UINT32_MAX;
	for (h = id_hash(id) & c->index_mask; c->rid_index[h]; h = (h + 1) & c->index_mask) {
		const struct gw_slot *s = &c->slots[c->rid_index[h] - 1];

		if (s->used && s->request_id == id)
			return h;
	}
	return UINT32_MAX;
}

/* Removes position i, shifting back the entries that probed past it. */
static void index_del(struct gw_wconn *c, uint32_t i)
{
	uint32_t j = i, k;

	c->rid_index[i] = 0;
	for (;;) {
		j = (j + 1) & c->index_mask;
		if (!c->rid_index[j])
			return;
		k = id_hash(c->slots[c->rid_index[j] - 1].request_id) & c->index_mask;
		/* the entry at j may fill the hole at i unless its home k lies
		 * cyclically in (i, j] */
		if ((i <= j) ? (k <= i || k > j) : (k <= i && k > j)) {
			c->rid_index[i] = c->rid_index[j];
			c->rid_index[j] = 0;
			i = j;
		}
	}
}

static struct gw_slot *slot_find(struct gw_wconn *c, uint64_t id)
{
	uint32_t h = index_pos(c, id);

	return h == UINT32_MAX ? NULL : &c->slots[c->rid_index[h] - 1];
}

static void slot_release(struct gw_wconn *c, struct gw_slot *s)
{
	uint32_t h = index_pos(c, s->request_id);

	if (h != UINT32_MAX)
		index_del(c, h);
	s->used = 0;
	s->ops = NULL;
	s->arg = NULL;
	c->inflight--;
}

/* Fails every attached request and forgets the detached ones. */
static void fail_all(struct gw_wconn *c, const char *why)
{
	for (uint32_t i = 0; i < c->n_slots; i++) {
		struct gw_slot *s = &c->slots[i];
		const struct gw_request_ops *ops;
		void *arg;

		if (!s->used)
			continue;
		ops = s->ops;
		arg = s->arg;
		slot_release(c, s);
		if (ops)
			ops->on_error(arg, GW_WORKERS_E_LOST, why, strlen(why));
	}
}

static void schedule_retry(struct gw_wconn *c)
{
	struct timeval tv;

	tv.tv_sec = c->backoff_ms / 1000;
	tv.tv_usec = (c->backoff_ms % 1000) * 1000;
	evtimer_add(c->retry_ev, &tv);
	c->backoff_ms *= 2;
	if (c->backoff_ms > GW_WK_BACKOFF_MAX_MS)
		c->backoff_ms = GW_WK_BACKOFF_MAX_MS;
}

static void wc_close(struct gw_wconn *c, const char *why)
{
	int was = c->connected;

	/* A drain lasts for the connection it was set on: the worker's next
	 * HELLO (a restart or upgrade) re-admits it. */
	if (was)
		c->drained = 0;
	if (c->bev) {
		bufferevent_free(c->bev);
		c->bev = NULL;
	}
	if (c->dec) {
		proto_decoder_free(c->dec);
		c->dec = NULL;
	}
	evtimer_del(c->ping_ev);
	c->connected = 0;
	c->hello_ok = 0;
	c->have_stats = 0;
	c->ping_sent_ns = 0;
	c->pong_ok = 0;
	cm_buf_reset(&c->out);
	if (was)
		cm_logf(CM_LOG_WARN, "worker_disconnected", "worker %s (%s): %s",
			c->name, c->socket, why);
	fail_all(c, strncmp(why, "stalled", 7) == 0 ? "worker stalled" : "worker connection lost");
	schedule_retry(c);
}

static enum cm_status wc_send(struct gw_wconn *c, const struct proto_msg *m)
{
	enum cm_status st;

	cm_buf_reset(&c->out);
	st = proto_encode(&c->out, m, c->ws->cfg.max_frame);
	if (st != CM_OK)
		return st;
	if (bufferevent_write(c->bev, cm_buf_data(&c->out), cm_buf_len(&c->out)) != 0)
		return CM_EIO;
	return CM_OK;
}

static void send_ping(struct gw_wconn *c)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_PING;
	m.u.ping.nonce = ++c->ping_nonce;
	if (wc_send(c, &m) == CM_OK)
		c->ping_sent_ns = cm_mono_ns();
}

static void ping_cb(evutil_socket_t fd, short what, void *arg)
{
	struct gw_wconn *c = arg;
	struct timeval tv;

	(void)fd;
	(void)what;
	if (!c->hello_ok)
		return;
	/*
	 * A worker that sends nothing at all (no TOKEN, STATS or PONG) for
	 * worker_stall_ms while requests are in flight is stopped or stuck:
	 * its requests end with an error (in their streams) instead of
	 * waiting for as long as it stays so, and the connection is closed
	 * (the worker cancels them when it resumes; issue 13, finding 5).
	 */
	if (c->ws->cfg.stall_ms > 0 && c->inflight > 0 &&
	    cm_mono_ns() - c->rx_ns > c->ws->cfg.stall_ms * 1000000LL) {
		char why[96];

		snprintf(why, sizeof(why), "stalled: nothing received for %lld ms with %u requests "
			 "in flight", (long long)((cm_mono_ns() - c->rx_ns) / 1000000), c->inflight);
		c->stalls++;
		wc_close(c, why);
		return;
	}
	if (c->ping_sent_ns == 0)
		send_ping(c);
	tv.tv_sec = c->ws->cfg.ping_interval_ms / 1000;
	tv.tv_usec = (c->ws->cfg.ping_interval_ms % 1000) * 1000;
	evtimer_add(c->ping_ev, &tv);
}

static int on_hello(struct gw_wconn *c, const struct proto_hello *h)
{
	uint32_t cap;
	struct gw_slot *slots;

	/* no negotiation: gateway and workers are deployed together */
	if (h->proto_version != PROTO_VERSION) {
		cm_logf(CM_LOG_ERROR, "worker_refused", "worker %s: protocol version %u, "
			"expected %u", c->name, h->proto_version, PROTO_VERSION);
		return -1;
	}
	if (c->model && (h->model_name.len != strlen(c->model) ||
			 memcmp(h->model_name.ptr, c->model, h->model_name.len) != 0)) {
		cm_logf(CM_LOG_ERROR, "worker_refused", "worker %s: model \"%.*s\", "
			"expected \"%s\"", c->name, (int)(h->model_name.len > 128 ? 128 : h->model_name.len),
			h->model_name.ptr, c->model);
		return -1;
	}
	/* what the worker announces is bounded by what a worker may run */
	cap = h->max_seqs ? h->max_seqs : 1;
	if (cap > CM_LIM_MAX_RUNNING_SEQS_HARD) {
		cm_logf(CM_LOG_WARN, "worker_max_seqs", "worker %s: max_seqs %u, above %d: "
			"%d used", c->name, h->max_seqs, CM_LIM_MAX_RUNNING_SEQS_HARD,
			CM_LIM_MAX_RUNNING_SEQS_HARD);
		cap = CM_LIM_MAX_RUNNING_SEQS_HARD;
	}
	if (c->ws->cfg.max_inflight && c->ws->cfg.max_inflight < cap)
		cap = c->ws->cfg.max_inflight;
	if (cap > c->n_slots) {
		uint32_t isz = 1;
		uint32_t *rid_index;

		while (isz < 2 * cap)
			isz <<= 1;
		slots = cm_reallocarray(c->slots, cap, sizeof(*slots));
		if (!slots)
			return -1;
		c->slots = slots;
		memset(slots + c->n_slots, 0, (cap - c->n_slots) * sizeof(*slots));
		c->n_slots = cap;
		rid_index = cm_calloc(isz, sizeof(*rid_index));
		if (!rid_index)
			return -1;
		cm_free(c->rid_index);
		c->rid_index = rid_index;
		c->index_mask = isz - 1;
		for (uint32_t i = 0; i < c->n_slots; i++)
			if (c->slots[i].used)
				index_put(c, i);
	}
	c->cap = cap;
	c->hello = *h;
	copy_str(c->h_worker, &h->worker_name, &c->hello.worker_name);
	copy_str(c->h_model, &h->model_name, &c->hello.model_name);
	copy_str(c->h_backend, &h->backend, &c->hello.backend);
	copy_str(c->h_device, &h->device, &c->hello.device);
	copy_str(c->h_engine, &h->engine_version, &c->hello.engine_version);
	copy_str(c->h_arch, &h->architecture, &c->hello.architecture);
	copy_str(c->h_ftype, &h->file_type, &c->hello.file_type);
	c->hello_ok = 1;
	c->backoff_ms = GW_WK_BACKOFF_MIN_MS;
	c->stats_ns = cm_mono_ns(); /* grace period for the first STATS */
	cm_logf(CM_LOG_INFO, "worker_connected", "worker %s: model %s, backend %s, "
		"max_seqs %u, cap %u", c->name, c->h_model, c->h_backend, h->max_seqs, cap);
	ping_cb(-1, 0, c);
	return 0;
}

static void on_result(struct gw_wconn *c, const struct proto_msg *m)
{
	struct gw_slot *s = slot_find(c, m->request_id);
	const struct gw_request_ops *ops;
	void *arg;

	if (!s)
		return; /* unknown or already finished: ignore */
	ops = s->ops;
	arg = s->arg;
	if (m->type == PROTO_TOKEN) {
		if (ops)
			ops->on_tokens(arg, &m->u.tokens);
		return;
	}
	if (m->type == PROTO_EMBEDDING) {
		if (ops && ops->on_embedding)
			ops->on_embedding(arg, &m->u.embedding);
		return;
	}
	slot_release(c, s);
	if (m->type == PROTO_DONE) {
		c->prompt_tokens += m->u.done.prompt_tokens;
		c->cached_tokens += m->u.done.cached_tokens;
	}
	if (ops && m->type == PROTO_DONE)
		ops->on_done(arg, &m->u.done);
	else if (ops)
		ops->on_error(arg, m->u.error.code, m->u.error.message.ptr,
			      m->u.error.message.len);
	notify_capacity(c->ws);
}

/* Returns -1 when the connection must close. */
static int on_msg(struct gw_wconn *c, const struct proto_msg *m)
{
	c->rx_ns = cm_mono_ns();
	if (!c->hello_ok) {
		if (m->type != PROTO_HELLO)
			return -1;
		if (on_hello(c, &m->u.hello) != 0)
			return -1;
		notify_capacity(c->ws);
		return 0;
	}
	switch (m->type) {
	case PROTO_STATS:
		c->stats = m->u.stats;
		c->have_stats = 1;
		c->stats_ns = cm_mono_ns();
		return 0;
	case PROTO_PONG:
		if (m->u.pong.nonce != c->ping_nonce)
			return 0;
		c->ping_sent_ns = 0;
		c->pong_ok = m->u.pong.ok;
		if (m->u.pong.ok) {
			c->pong_ns = cm_mono_ns();
			c->pings_ok++;
			notify_capacity(c->ws);
		} else {
			c->pings_failed++;
		}
		return 0;
	case PROTO_TOKEN:
	case PROTO_DONE:
	case PROTO_EMBEDDING:
		on_result(c, m);
		return 0;
	case PROTO_ERROR:
		if (m->request_id == 0) {
			cm_logf(CM_LOG_WARN, "worker_error", "worker %s: code %u: %.*s", c->name,
				m->u.error.code, (int)(m->u.error.message.len > 200 ? 200 : m->u.error.message.len),
				m->u.error.message.ptr);
			return m->u.error.code == PROTO_E_PROTOCOL ? -1 : 0;
		}
		on_result(c, m);
		return 0;
	default:
		return 0; /* unexpected but harmless */
	}
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct gw_wconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct proto_msg m;
	enum cm_status st;

	while (evbuffer_get_length(in) > 0) {
		size_t n = evbuffer_get_contiguous_space(in);
		const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)n);

		if (proto_decoder_feed(c->dec, p, n) != CM_OK) {
			wc_close(c, "decoder buffer");
			return;
		}
		evbuffer_drain(in, n);
		for (;;) {
			st = proto_decoder_next(c->dec, &m);
			if (st == CM_AGAIN)
				break;
			if (st != CM_OK) {
				cm_logf(CM_LOG_ERROR, "worker_protocol", "worker %s: %s", c->name,
					proto_error_str(proto_decoder_error(c->dec)));
				wc_close(c, "malformed frame");
				return;
			}
			if (on_msg(c, &m) != 0) {
				wc_close(c, "refused");
				return;
			}
			if (!c->bev)
				return;
		}
	}
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct gw_wconn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED) {
		c->connected = 1;
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		char why[128];

		snprintf(why, sizeof(why), "%s", (what & BEV_EVENT_EOF) ? "closed by the worker"
			 : strerror(EVUTIL_SOCKET_ERROR()));
		wc_close(c, why);
	}
}

static void wc_connect(struct gw_wconn *c)
{
	struct sockaddr_un sa;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket);
	c->reconnects++;
	c->bev = bufferevent_socket_new(c->ws->base, -1, BEV_OPT_CLOSE_ON_FREE);
	c->dec = proto_decoder_new(c->ws->cfg.max_frame);
	if (!c->bev || !c->dec) {
		wc_close(c, "out of memory");
		return;
	}
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		/* libevent frees nothing here; close and retry later */
		if (c->bev) {
			bufferevent_free(c->bev);
			c->bev = NULL;
		}
		proto_decoder_free(c->dec);
		c->dec = NULL;
		schedule_retry(c);
	}
}

static void retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	wc_connect(arg);
}

enum cm_status gw_workers_new(struct event_base *base,
			      const struct gw_worker_spec *specs, size_t n,
			      const struct gw_workers_config *cfg,
			      struct gw_workers **out)
{
	struct gw_workers *ws = cm_calloc(1, sizeof(*ws));

	*out = NULL;
	if (!ws)
		return CM_ENOMEM;
	ws->base = base;
	ws->cfg = *cfg;
	if (!ws->cfg.max_frame)
		ws->cfg.max_frame = CM_LIM_PROTO_FRAME_BYTES;
	ws->w = cm_calloc(n ? n : 1, sizeof(*ws->w));
	if (!ws->w) {
		cm_free(ws);
		return CM_ENOMEM;
	}
	ws->n = n;
	for (size_t i = 0; i < n; i++) {
		struct gw_wconn *c = &ws->w[i];

		c->ws = ws;
		c->index = i;
		c->name = cm_strdup(specs[i].name);
		c->socket = cm_strdup(specs[i].socket);
		c->model = specs[i].model ? cm_strdup(specs[i].model) : NULL;
		c->retry_ev = evtimer_new(base, retry_cb, c);
		c->ping_ev = evtimer_new(base, ping_cb, c);
		c->backoff_ms = GW_WK_BACKOFF_MIN_MS;
		cm_buf_init(&c->out, CM_LIM_PROTO_FRAME_BYTES_HARD + PROTO_HEADER_LEN);
		if (!c->name || !c->socket || (specs[i].model && !c->model) ||
		    !c->retry_ev || !c->ping_ev) {
			gw_workers_free(ws);
			return CM_ENOMEM;
		}
	}
	for (size_t i = 0; i < n; i++)
		wc_connect(&ws->w[i]);
	*out = ws;
	return CM_OK;
}

void gw_workers_free(struct gw_workers *ws)
{
	if (!ws)
		return;
	for (size_t i = 0; i < ws->n; i++) {
		struct gw_wconn *c = &ws->w[i];

		for (uint32_t j = 0; j < c->n_slots; j++)
			c->slots[j].ops = NULL;
		if (c->bev)
			bufferevent_free(c->bev);
		proto_decoder_free(c->dec);
		if (c->retry_ev)
			event_free(c->retry_ev);
		if (c->ping_ev)
			event_free(c->ping_ev);
		cm_buf_deinit(&c->out);
		cm_free(c->slots);
		cm_free(c->rid_index);
		cm_free(c->name);
		cm_free(c->socket);
		cm_free(c->model);
	}
	cm_free(ws->w);
	cm_free(ws);
}

void gw_workers_set_capacity_cb(struct gw_workers *ws, gw_workers_capacity_fn fn,
				void *ctx)
{
	ws->cap_fn = fn;
	ws->cap_ctx = ctx;
}

size_t gw_workers_count(const struct gw_workers *ws)
{
	return ws->n;
}

static const char *not_ready(const struct gw_workers *ws, const struct gw_wconn *c)
{
	int64_t now = cm_mono_ns();
	int64_t ping_ns = ws->cfg.ping_interval_ms * 1000000LL;

	if (!c->connected || !c->bev)
		return "not connected";
	if (!c->hello_ok)
		return "no HELLO";
	if (c->pong_ns == 0)
		return c->pings_failed ? "PING failed" : "no PONG yet";
	if (!c->pong_ok)
		return "PING failed";
	if (now - c->pong_ns > 3 * ping_ns)
		return "PONG overdue";
	if (now - c->stats_ns > ws->cfg.stats_timeout_ms * 1000000LL)
		return "STATS overdue";
	if (c->have_stats && c->stats.draining)
		return "draining";
	if (c->drained)
		return "drained";
	return "";
}

void gw_workers_info(const struct gw_workers *ws, size_t i,
		     struct gw_worker_info *o)
{
	const struct gw_wconn *c = &ws->w[i];

	memset(o, 0, sizeof(*o));
	o->name = c->name;
	o->socket = c->socket;
	o->connected = c->connected;
	o->hello_ok = c->hello_ok;
	o->not_ready_reason = not_ready(ws, c);
	o->ready = o->not_ready_reason[0] == '\0';
	if (c->hello_ok)
		o->hello = c->hello;
	o->have_stats = c->have_stats;
	if (c->have_stats)
		o->stats = c->stats;
	o->inflight = c->inflight;
	o->reserved = c->reserved;
	o->cap = c->cap;
	o->slo_limit = c->slo_limit;
	o->pings_ok = c->pings_ok;
	o->pings_failed = c->pings_failed;
	o->reconnects = c->reconnects;
	o->stalls = c->stalls;
	o->drained = c->drained;
	o->placed = c->placed;
	o->prompt_tokens = c->prompt_tokens;
	o->cached_tokens = c->cached_tokens;
}

enum cm_status gw_workers_drain(struct gw_workers *ws, const char *name)
{
	for (size_t i = 0; i < ws->n; i++) {
		struct gw_wconn *c = &ws->w[i];

		if (strcmp(c->name, name) != 0)
			continue;
		if (!c->drained)
			cm_logf(CM_LOG_INFO, "worker_drain",
				"worker %s: no new placements, %u request(s) in flight finish",
				c->name, c->inflight);
		c->drained = 1;
		return CM_OK;
	}
	return CM_ENOTFOUND;
}

/* The static cap, lowered by an SLO limit. */
static uint32_t eff_cap(const struct gw_wconn *c)
{
	return c->slo_limit && c->slo_limit < c->cap ? c->slo_limit : c->cap;
}

/* What batch work may fill: batch_share of the cap in force, at least 1. */
static uint32_t batch_cap(const struct gw_workers *ws, const struct gw_wconn *c)
{
	uint32_t cap = eff_cap(c), b;

	if (ws->batch_share <= 0 || ws->batch_share >= 1)
		return cap;
	b = (uint32_t)((double)cap * ws->batch_share);
	return b < 1 ? 1 : b;
}

void gw_workers_set_batch_share(struct gw_workers *ws, double share)
{
	ws->batch_share = share;
}

/* ready, and k more requests fit under `cap` */
static int has_room(const struct gw_workers *ws, const struct gw_wconn *c, uint32_t k,
		    uint32_t cap)
{
	return not_ready(ws, c)[0] == '\0' && (uint64_t)c->inflight + c->reserved + k <= cap;
}

int gw_workers_can_take_class(const struct gw_workers *ws, size_t i, uint32_t k, int batch)
{
	const struct gw_wconn *c = &ws->w[i];

	return has_room(ws, c, k, batch ? batch_cap(ws, c) : eff_cap(c));
}

void gw_workers_set_limit(struct gw_workers *ws, size_t i, uint32_t limit)
{
	if (i < ws->n)
		ws->w[i].slo_limit = limit;
}

int gw_workers_can_take_n(const struct gw_workers *ws, size_t i, uint32_t k)
{
	return has_room(ws, &ws->w[i], k, eff_cap(&ws->w[i]));
}

int gw_workers_can_take(const struct gw_workers *ws, size_t i)
{
	return gw_workers_can_take_n(ws, i, 1);
}

enum cm_status gw_workers_reserve(struct gw_workers *ws, size_t i, uint32_t k)
{
	struct gw_wconn *c = &ws->w[i];

	if ((uint64_t)c->inflight + c->reserved + k > eff_cap(c))
		return CM_ELIMIT;
	c->reserved += k;
	return CM_OK;
}

void gw_workers_unreserve(struct gw_workers *ws, size_t i, uint32_t k)
{
	struct gw_wconn *c = &ws->w[i];

	c->reserved -= k < c->reserved ? k : c->reserved;
	if (k && ws->cap_fn)
		ws->cap_fn(ws->cap_ctx);
}

/* Index of the first connected worker serving `model` from `from` on; n
 * when none. */
static size_t model_worker(const struct gw_workers *ws, size_t from, const char *model,
			   size_t len)
{
	for (size_t i = from; i < ws->n; i++) {
		const struct gw_wconn *c = &ws->w[i];

		if (c->hello_ok && c->hello.model_name.len == len &&
		    memcmp(c->hello.model_name.ptr, model, len) == 0)
			return i;
	}
	return ws->n;
}

int gw_workers_knows_model(const struct gw_workers *ws, const char *model,
			   size_t len)
{
	return model_worker(ws, 0, model, len) < ws->n;
}

uint32_t gw_workers_max_context(const struct gw_workers *ws)
{
	uint32_t ctx = 0;

	for (size_t i = 0; i < ws->n; i++)
		if (ws->w[i].hello_ok && ws->w[i].hello.context_len > ctx)
			ctx = ws->w[i].hello.context_len;
	return ctx;
}

uint32_t gw_workers_model_context(const struct gw_workers *ws, const char *model,
				  size_t len)
{
	uint32_t ctx = 0;

	for (size_t i = model_worker(ws, 0, model, len); i < ws->n;
	     i = model_worker(ws, i + 1, model, len))
		if (ws->w[i].hello.context_len > ctx)
			ctx = ws->w[i].hello.context_len;
	return ctx;
}

uint32_t gw_workers_model_cap(const struct gw_workers *ws, const char *model, size_t len)
{
	uint32_t cap = 0;

	for (size_t i = model_worker(ws, 0, model, len); i < ws->n;
	     i = model_worker(ws, i + 1, model, len))
		if (ws->w[i].cap > cap)
			cap = ws->w[i].cap;
	return cap;
}

int gw_workers_model_does(const struct gw_workers *ws, const char *model, size_t len,
			  uint32_t *embedding_dim, int *generates)
{
	int any = 0;

	*embedding_dim = 0;
	*generates = 0;
	for (size_t i = model_worker(ws, 0, model, len); i < ws->n;
	     i = model_worker(ws, i + 1, model, len)) {
		any = 1;
		if (ws->w[i].hello.embedding_dim > *embedding_dim)
			*embedding_dim = ws->w[i].hello.embedding_dim;
		if (ws->w[i].hello.generates)
			*generates = 1;
	}
	return any;
}

/* Sends a request frame (SUBMIT, EMBED) into a free slot of worker i. */
static enum cm_status send_request(struct gw_workers *ws, size_t i, const struct proto_msg *m,
				   const struct gw_request_ops *ops, void *arg)
{
	struct gw_wconn *c = &ws->w[i];
	struct gw_slot *slot = NULL;
	enum cm_status st;

	if (!c->hello_ok || !c->bev)
		return CM_ECLOSED;
	if ((uint64_t)c->inflight + c->reserved >= c->cap)
		return CM_ELIMIT;
	for (uint32_t j = 0; j < c->n_slots; j++)
		if (!c->slots[j].used) {
			slot = &c->slots[j];
			break;
		}
	if (!slot)
		return CM_ELIMIT;
	st = wc_send(c, m);
	if (st != CM_OK)
		return st == CM_EIO ? CM_ECLOSED : st == CM_ENOMEM ? CM_ENOMEM : CM_EINVAL;
	slot->used = 1;
	slot->request_id = m->request_id;
	slot->ops = ops;
	slot->arg = arg;
	index_put(c, (uint32_t)(slot - c->slots));
	c->inflight++;
	c->placed++;
	return CM_OK;
}

enum cm_status gw_workers_submit(struct gw_workers *ws, size_t i,
				 uint64_t request_id, uint32_t flags,
				 const struct proto_submit *s,
				 const struct gw_request_ops *ops, void *arg)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_SUBMIT;
	m.flags = flags;
	m.request_id = request_id;
	m.u.submit = *s;
	return send_request(ws, i, &m, ops, arg);
}

enum cm_status gw_workers_embed(struct gw_workers *ws, size_t i, uint64_t request_id,
				uint32_t flags, const struct proto_embed *e,
				const struct gw_request_ops *ops, void *arg)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_EMBED;
	m.flags = flags;
	m.request_id = request_id;
	m.u.embed = *e;
	return send_request(ws, i, &m, ops, arg);
}

void gw_workers_cancel(struct gw_workers *ws, size_t i, uint64_t request_id,
		       enum proto_cancel_reason reason)
{
	struct gw_wconn *c = &ws->w[i];
	struct gw_slot *s = slot_find(c, request_id);
	struct proto_msg m;

	if (!s)
		return;
	s->ops = NULL;
	s->arg = NULL;
	if (!c->bev)
		return;
	memset(&m, 0, sizeof(m));
	m.type = PROTO_CANCEL;
	m.request_id = request_id;
	m.u.cancel.reason = (uint8_t)reason;
	if (wc_send(c, &m) != CM_OK)
		cm_logf(CM_LOG_WARN, "worker_cancel", "worker %s: CANCEL not sent", c->name);
}
