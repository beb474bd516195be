/*
 * internal.h - what the files of worker/serve/ share: the server, its
 * gateway connections and their requests, and the functions each file
 * lends the others.  Nothing outside worker/serve/ includes it.
 *
 * server.c        setup, teardown, the poll loop, embedding, the serve CLI
 * conn.c          connections: accept, peer check, frames in and out, STATS
 * request.c       SUBMIT, CANCEL, PING, DRAIN and the scheduler callbacks
 * embed.c         EMBED: admission, the queue, the embedding step
 * config.c        the `worker` configuration section
 * backend_open.c  backend choice, KV sizing and creation
 *
 * Thread: the scheduler thread only (the loop, the callbacks).
 * Invariant: a request belongs to exactly one connection and, until its
 * DONE/ERROR, to exactly one scheduler sequence; closing a connection
 * cancels its requests, which frees their KV blocks at once.
 */
#ifndef SLUICE_WORKER_SERVE_INTERNAL_H
#define SLUICE_WORKER_SERVE_INTERNAL_H

#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "proto/proto.h"
#include "worker/engine/backend.h"
#include "worker/engine/gen.h"
#include "worker/engine/kv.h"
#include "worker/engine/sampler.h"
#include "worker/engine/sched.h"
#include "worker/grammar/cache.h"
#include "worker/model/model.h"
#include "worker/serve/server.h"
#include "worker/text/toolcall.h"

struct wk_serve_conn;

struct wk_serve_req {
	struct wk_serve_req *next;        /* in conn->reqs */
	struct wk_serve_conn *conn;       /* NULL once the connection is gone */
	uint64_t id;
	struct wk_seq *seq;
	struct wk_gen *gen;
	int probe;
	uint64_t ping_nonce;
	int64_t t_last_token;
	int32_t last_token;
	uint8_t klass;
	struct wk_gentry *gent;           /* the compiled constraint (NULL: none) */
	int64_t constraint_ns;            /* its compile time (0: cached, none) */
	uint8_t logprobs;                 /* F_LOGPROBS: pieces in TOKEN */
	struct wk_tc *tc;                 /* tools or thinking: the output's parser (NULL: none) */
	struct cm_buf tc_text;            /* its entries' texts for one token (reused) */
	uint32_t reasoning_tokens;        /* generated while thinking */
};

struct wk_serve_conn {
	int fd;
	uid_t uid;
	struct proto_decoder *dec;
	struct cm_buf out;
	struct wk_serve_req *reqs;
	uint32_t n_reqs;
	int dead;                /* close at the end of this iteration */
	int draining;            /* DRAIN received on this connection */
};

struct wk_server {
	const struct wk_server_cfg *cfg;
	struct wk_model *model;
	struct wk_backend *be;
	struct wk_kv *kv;
	struct wk_sched *sched;
	struct wk_sampler_ws *ws;
	uint32_t n_ctx;
	uint32_t max_piece_bytes;   /* the longest token's text: bytes per token at most */
	int listen_fd;
	struct wk_serve_conn **conns;
	uint32_t n_conns;
	uid_t *allowed;
	size_t n_allowed;
	int draining;
	int64_t drain_deadline;
	int64_t next_stats;
	uint64_t ttft_hist[PROTO_HIST_BUCKETS];
	uint64_t itl_hist[PROTO_HIST_BUCKETS];
	uint64_t gen_tokens, prompt_tokens;
	uint64_t last_prefill, last_decode;
	int64_t last_stats_t;
	char backend_name[16];
	char device[192];               /* the backend's, with the CUDA versions */
	uint64_t repacked_bytes;        /* CPU: weight copies in its kernels' layout */
	uint64_t expert_cache_bytes;    /* CPU: the experts' cache file mapped (0: none) */
	int expert_cache_built;         /* ... written by this start */
	char engine[80];                /* the engine build: version+commit */
	struct wk_serve_req *orphans;     /* requests whose connection closed mid-step */
	/* structured outputs: the vocabulary's trie, the masks shared by
	 * every constraint, the compiled constraints (docs/structured-outputs.md) */
	struct wk_vtrie *vtrie;
	struct wk_mask_pool *mpool;
	struct wk_gcache *gcache;
	/* embeddings (embed.c): the EMBED queue and the step's scratch */
	struct wk_serve_emb *emb_head, *emb_tail;
	struct emb_pick *emb_picks;
	uint32_t *emb_lens;
	int32_t *emb_tok;
	uint64_t emb_tok_cap;
	float *emb_out;
	uint64_t emb_out_cap;
	uint64_t emb_steps, emb_step_tokens;
	uint32_t *emb_blocks;             /* a decoder's step: the picks' KV blocks */
	uint64_t emb_blocks_cap;
	uint32_t emb_n_blocks;
};

/* ---- conn.c ------------------------------------------------------------------ */

void wk_serve_hist_add(uint64_t *h, int64_t ns);
void wk_serve_conn_send(struct wk_serve_conn *c, const struct proto_msg *m);
void wk_serve_send_error(struct wk_serve_conn *c, uint64_t id, uint16_t code, const char *msg);
void wk_serve_conn_flush(struct wk_serve_conn *c);
void wk_serve_handle_msg(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m);
struct wk_serve_conn *wk_serve_conn_new(struct wk_server *s, int fd, uid_t uid);
void wk_serve_accept_conn(struct wk_server *s);
void wk_serve_conn_close(struct wk_server *s, uint32_t idx);
void wk_serve_conn_input(struct wk_server *s, struct wk_serve_conn *c, const void *data, size_t n);
void wk_serve_conn_read(struct wk_server *s, struct wk_serve_conn *c);
void wk_serve_send_stats(struct wk_server *s, int64_t now);
int wk_serve_conn_index(const struct wk_server *s, int fd);

/* ---- server.c ---------------------------------------------------------------- */

/* 1 when the worker drains: SIGTERM seen (checked now: a frame read in
 * the same read() as the signal's arrival is refused too). */
int wk_serve_term_seen(struct wk_server *s);

/* ---- request.c --------------------------------------------------------------- */

/* The trie, pool and cache of compiled constraints from the config. */
enum cm_status wk_serve_grammar_setup(struct wk_server *s, char *err, size_t err_len) CM_WUR;
void wk_serve_grammar_teardown(struct wk_server *s);
/*
 * The compiled constraint of a SUBMIT (*out NULL when it has none), from
 * the cache or compiled now (*compile_ns).  Errors (message in err, for
 * ERROR constraint): too large, not JSON, unsupported keyword with its
 * path, grammar syntax with line and column, a limit, the cache full of
 * constraints in use.
 */
enum cm_status wk_serve_constraint_get(struct wk_server *s, uint64_t id,
				       const struct proto_submit *sb, struct wk_gentry **out,
				       int64_t *compile_ns, char *err, size_t err_len) CM_WUR;
/* The same for a text of `kind` (enum wk_gkind); `label` names it in errors. */
enum cm_status wk_serve_constraint_get_text(struct wk_server *s, uint64_t id, int kind,
					    const char *label, const char *text, size_t len,
					    struct wk_gentry **out, int64_t *compile_ns, char *err,
					    size_t err_len) CM_WUR;

/* 1 (with the message in err) when a request names a model other than
 * the worker's ("" names it). */
int wk_serve_model_other(const struct wk_server *s, struct proto_str model, char *err,
			 size_t err_len);
/* The request `id` of connection c (NULL: none, or a PING's probe). */
struct wk_serve_req *wk_serve_find_req(struct wk_serve_conn *c, uint64_t id);

/* ---- embed.c ----------------------------------------------------------------- */

struct wk_serve_emb;
struct emb_pick;

/* 1 when the model embeds on this backend (EMBED is served). */
int wk_serve_embeds(const struct wk_server *s);
/* EMBED requests queued or running. */
uint32_t wk_serve_emb_waiting(const struct wk_server *s);
/* An EMBED: queued, or refused with ERROR (draining, duplicate id, the
 * model does not embed, dimensions, an input's ids or length, full). */
void wk_serve_handle_embed(struct wk_server *s, struct wk_serve_conn *c, const struct proto_msg *m);
/* CANCEL of an EMBED: DONE cancelled; 0 when c has no EMBED `id`. */
int wk_serve_cancel_embed(struct wk_server *s, struct wk_serve_conn *c, uint64_t id);
/* Drain timeout: every EMBED ends DONE cancelled. */
void wk_serve_embed_cancel_all(struct wk_server *s);
/* The connection closes: its EMBED requests are dropped. */
void wk_serve_embed_conn_gone(struct wk_server *s, const struct wk_serve_conn *c);
/* One embedding step (nothing when the queue is empty); the backend's error. */
enum cm_status wk_serve_embed_step(struct wk_server *s) CM_WUR;
enum cm_status wk_serve_embed_setup(struct wk_server *s) CM_WUR;
void wk_serve_embed_teardown(struct wk_server *s);
/* PING of an embedding model: one real one-token embedding; 1 when it ran. */
int wk_serve_embed_probe(struct wk_server *s);

/* ---- tools.c ----------------------------------------------------------------- */

/*
 * How a SUBMIT thinks (docs/tools.md#thinking): `on` splits thinking off
 * as reasoning; `off_form` renders the family's no-thinking form; `open`
 * starts the answer inside <think> (the model's template opens it, or a
 * constraint waits for the end of thinking: Sluice opens it then, so that
 * the constraint's place is known); `detect` lets the model open it.
 */
struct wk_think_mode {
	int on, off_form, open, detect;
};
void wk_serve_think_mode(const struct wk_server *s, const struct proto_submit *sb,
			 struct wk_think_mode *out);

/*
 * A SUBMIT's tools and thinking: r->tc, the parser of the family's output,
 * when the request has tools (tool_choice not none) or the model thinks;
 * with tool_choice required or named, r->gent the constraint forcing a
 * call.  CM_EINVAL / CM_ENOTFOUND (template) with err; constraint errors
 * as wk_serve_constraint_get_text.
 */
enum cm_status wk_serve_tools_setup(struct wk_server *s, const struct proto_submit *sb,
				    struct wk_serve_req *r, char *err, size_t err_len) CM_WUR;
/*
 * Sends the text a token released (first: the token's entry; NULL for the
 * held-back text at the end, `final`) through the parser: one TOKEN frame
 * whose entries carry the text by channel (the token's own entry first,
 * text-only entries after it).
 */
void wk_serve_tools_emit(struct wk_serve_req *r, const struct proto_token *first,
			 const uint8_t *text, size_t len, int final);

/* The scheduler's callbacks (sample, emit, done); owner: the wk_server. */
extern const struct wk_sched_cb wk_serve_sched_cb;

#endif
