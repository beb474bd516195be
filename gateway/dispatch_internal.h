/*
 * dispatch_internal.h - what the files of the dispatcher share: the job
 * (one request from its arrival to its log line), the dispatcher, and the
 * calls that end a job.  dispatch.c owns the life cycle (auth, parse,
 * quota, queue, placement, revocation, the end of a request);
 * dispatch_results.c what a worker sends back for a job; dispatch_embed.c
 * the embedding requests' body, EMBED and answer.
 * Event-loop thread only.
 */
#ifndef SLUICE_GATEWAY_DISPATCH_INTERNAL_H
#define SLUICE_GATEWAY_DISPATCH_INTERNAL_H

#include "gateway/dispatch.h"

#include <event2/event.h>

#include "gateway/api/embed.h"
#include "gateway/api/endpoints.h"
#include "gateway/gov/lease.h"
#include "gateway/gov/local_limit.h"
#include "gateway/gov/usage_queue.h"
#include "gateway/queue.h"
#include "gateway/reqlog.h"
#include "gateway/workers.h"

#define GW_TEXT_ONLY_ID 0xFFFFFFFFu
/* Worker request id of choice i > 0: the job's id | i << this (job ids
 * count from 1 per gateway process and never reach it). */
#define GW_CHOICE_RID_SHIFT 48
/* For calls whose failure changes nothing (best effort). */
#define GW_IGNORE(x) do { enum cm_status ign_ = (x); (void)ign_; } while (0)
#define GW_JOB_OUT_CAP (4u * 1024 * 1024)
/* Bodies over context x this + the slack cannot hold a prompt that fits. */
#define GW_PROMPT_BYTES_PER_TOKEN_MAX 256u
#define GW_BODY_SLACK_BYTES (64u * 1024)

enum gw_stage {
	GW_ST_AUTH = 0,
	GW_ST_QUOTA,
	GW_ST_QUEUED,
	GW_ST_RUNNING,
	GW_ST_ENDED,
};

/*
 * One choice of a generation: one worker request.  A request has `n` of
 * them (OpenAI `n`; 1 everywhere else), all on one worker: choice 0 is
 * sent first, the others once its first token says the prompt is in the
 * worker's prefix cache, into slots reserved for them at placement; each
 * with its own seed (the request's + index) and request id.
 */
struct gw_choice {
	struct gw_job *j;
	uint32_t index;
	uint64_t rid;               /* its worker request id */
	int sent;                   /* SUBMIT accepted */
	int ended;                  /* DONE or ERROR came, or cancelled */
	struct gw_api_stream stream;
	struct cm_buf text;         /* non-streamed reply text */
	struct proto_done done;
	int have_done;
	uint32_t tokens;
	int64_t last_ns;            /* its latest token (inter-token latency) */
};

/* An embedding job's request and vectors (dispatch_embed.c). */
struct gw_job_emb {
	struct gw_api_embed req;
	uint32_t dim;               /* values per vector */
	float *vecs;                /* n_inputs x dim */
	uint8_t *got;               /* per input: its EMBEDDING came */
	uint32_t n_got;
};

struct gw_job {
	struct gw_dispatch *d;
	struct gw_request *req;     /* NULL once the client is gone or answered */
	uint64_t id;
	enum gw_path route;
	enum gw_api_style style;
	enum gw_stage stage;
	int refs;                   /* async calls that still hold the job */
	struct gw_api_request api;
	char model[GW_API_MODEL_NAME_MAX + 1];
	struct gw_auth_identity ident;
	int have_ident;
	int revoked;                /* revoked while its quota admission was in flight */
	uint32_t model_ctx;         /* the model's context at admission (estimate, DONE bounds) */
	char client_rid[GW_CLIENT_REQUEST_ID_MAX + 1]; /* the client's X-Request-Id, or "" */
	struct gw_auth_lookup *lookup;
	struct gw_lease lease;      /* quota admission, renewal, release */
	struct gw_queue_item qi;
	int batch;
	int ignore_eos;             /* X-Sluice-Ignore-EOS: 1 (benchmarks, tests) */
	int retried;                /* re-dispatched once after a lost worker */
	long worker;                /* -1 none */
	struct gw_choice *ch;       /* n_ch choices (0 before the body is parsed) */
	uint32_t n_ch;
	uint32_t n_done;            /* choices with their DONE */
	uint32_t n_reserved;        /* slots of `worker` held for choices not sent */
	int streaming;
	int write_failed;           /* the connection is closing */
	struct cm_buf out;          /* render scratch */
	uint32_t tokens;            /* generated tokens received, all choices */
	int64_t start_ns, enq_ns, disp_ns, first_ns;
	struct proto_done done;     /* the whole request's (choices summed) once all ended */
	int have_done;
	int status;
	const char *outcome;        /* "ok", "cancelled", "error", ... */
	struct gw_job *anext, *aprev;
	struct gw_job_emb *em;      /* an embedding request; NULL for generation */
	int slo_saturated;          /* its placement filled the worker to its SLO limit */
};

struct gw_dispatch {
	struct event_base *base;
	struct gw_dispatch_config cfg;
	struct gw_dispatch_deps dep;
	struct event *qtimer;
	struct gw_job *active;
	size_t n_active;
	int pumping;
	uint8_t lease_prefix[8];    /* this instance (usage request ids) */
	struct gw_usage_queue *usage;      /* usage records not yet acknowledged */
	int closing;                /* gw_dispatch_free runs: refuse new requests */
	struct gw_local_limit *local;      /* quotas while Redis is unreachable */
	struct gw_lease_env lease_env;
	size_t rr_next;             /* route_round_robin cursor */
	struct gw_slo_limit *slo;   /* per worker, with gateway.slo enabled */
	size_t n_slo;
	int64_t slo_wait_ns;        /* interactive queue budget (slo.queue_wait_ms) */
	int64_t batch_hold_until;   /* no batch starts before (interactive refused) */
};

/* Ends the job: accounting, the request log line, the lease, the slot. */
void gw_job_end(struct gw_job *j, int status, const char *outcome);
/* Answers the job's client with an error (in the stream when it began), then ends it. */
void gw_job_fail(struct gw_job *j, const struct gw_api_error *e, uint32_t retry_after,
		 const char *outcome);
void gw_job_failf(struct gw_job *j, int status, const char *outcome, uint32_t retry_after,
		  const char *msg);
/* Takes the request for a final answer: no on_close may reach the job after. */
struct gw_request *gw_job_take_req(struct gw_job *j);
void gw_respond_buf(struct gw_request *r, int status, struct cm_buf *b);
/* Dispatches queued jobs while workers have room. */
void gw_dispatch_pump(struct gw_dispatch *d);
/* The same from the next loop turn (from code that must not see other
 * jobs end under it). */
void gw_dispatch_pump_soon(struct gw_dispatch *d);

/* CANCELs every choice in flight and gives back the job's reserved slots. */
void gw_job_cancel_all(struct gw_job *j, enum proto_cancel_reason reason);
/* Sends choice c (0: the first) to the job's worker: CM_OK, or what
 * gw_workers_submit said. */
enum cm_status gw_job_submit_choice(struct gw_job *j, struct gw_choice *c);

/* dispatch_results.c: TOKEN, DONE and ERROR of a job's worker. */
extern const struct gw_request_ops gw_job_ops;

/* X-Sluice-Class (or the key's default) into j->batch: 0, or -1 when the
 * job was answered 400. */
int gw_job_class(struct gw_job *j);
/* Quota admission (a lease), then the queue. */
void gw_job_admit(struct gw_job *j);

/* ---- dispatch_embed.c ---- */
/* 1 for /v1/embeddings, /api/embed, /api/embeddings. */
int gw_route_embeds(enum gw_path r);
/* After authentication: the body, the model's checks, then gw_job_admit. */
void gw_job_start_embed(struct gw_job *j);
/* The tokens the quota admission holds for the job's inputs. */
int64_t gw_job_embed_estimate(const struct gw_job *j);
/* Sends the job's EMBED to j->worker: CM_OK, or what gw_workers_embed said. */
enum cm_status gw_job_submit_embed(struct gw_job *j);
void gw_job_emb_free(struct gw_job *j);

/* ---- dispatch_slo.c ---- */
/* The per-worker controllers (none unless gateway.slo.enabled). */
enum cm_status gw_dispatch_slo_new(struct gw_dispatch *d) CM_WUR;
void gw_dispatch_slo_free(struct gw_dispatch *d);
/* After a queued job's first pump: an interactive job whose expected wait
 * (its place x the drain interval) exceeds gateway.slo.queue_wait_ms is
 * answered 503 slo_overload with Retry-After. */
void gw_dispatch_slo_queued(struct gw_job *j);
/* 1 when the popped job is batch work and interactive work was refused
 * for capacity within the last two queue budgets: the slot it would take
 * is the interactive work's (gateway.slo). */
int gw_dispatch_slo_hold(struct gw_job *j);
/* After a placement: whether it filled the worker to its limit. */
void gw_dispatch_slo_placed(struct gw_job *j);
/* An interactive generation's first token (its TTFT) feeds its worker's
 * controller; a new limit goes to the worker table. */
void gw_dispatch_slo_first(struct gw_job *j, int64_t now);
/* A job ended: SLO attainment (sluice_gateway_slo_requests_total); an
 * interactive generation's mean inter-token latency to the controller. */
void gw_dispatch_slo_ended(struct gw_job *j);
/* A generation request for a model whose workers only embed: answered
 * 400 (-1); 0 otherwise. */
int gw_job_embed_only(struct gw_job *j);

#endif
