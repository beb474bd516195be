/*
 * dispatch_embed.c - the embedding requests' part of a job's life
 * (docs/api.md#embeddings): the body read and checked against the
 * workers that serve the model, EMBED sent to the placed worker, its
 * EMBEDDING frames gathered into the job's vectors, and the answer
 * rendered at DONE.  Admission (keys, quotas, queue, placement), errors
 * and the end of the job are the generation path's (dispatch.c).
 *
 * Owns each embedding job's struct gw_job_emb: the parsed request (in
 * the request's arena) and the vectors (freed with the job).
 * Event-loop thread only.
 */
#include "gateway/dispatch_internal.h"

#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"
#include "gateway/http/paths.h"

static enum gw_api_embed_kind embed_kind_of(enum gw_path r)
{
	return r == GW_PATH_OPENAI_EMBEDDINGS ? GW_API_OPENAI_EMBEDDINGS
	       : r == GW_PATH_OLLAMA_EMBED    ? GW_API_OLLAMA_EMBED
					      : GW_API_OLLAMA_EMBEDDINGS;
}

int gw_route_embeds(enum gw_path r)
{
	return r == GW_PATH_OPENAI_EMBEDDINGS || r == GW_PATH_OLLAMA_EMBED ||
	       r == GW_PATH_OLLAMA_EMBEDDINGS;
}

void gw_job_emb_free(struct gw_job *j)
{
	if (!j->em)
		return;
	cm_free(j->em->vecs);
	cm_free(j->em->got);
	cm_free(j->em);
	j->em = NULL;
}

/* Nothing to embed (Ollama's empty input or prompt): the empty answer. */
static void answer_empty(struct gw_job *j)
{
	cm_buf_reset(&j->out);
	if (gw_api_render_embed(&j->out, &j->em->req, j->model, NULL, 0, 0,
				cm_mono_ns() - j->start_ns) != CM_OK) {
		gw_job_failf(j, 500, "render", 0, "internal error");
		return;
	}
	gw_respond_buf(gw_job_take_req(j), 200, &j->out);
	gw_job_end(j, 200, "ok");
}

/* The model's checks: served, embeds, dimensions, the EMBED fits a frame. */
static int embed_checks(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_job_emb *em = j->em;
	struct gw_api_error e;
	uint32_t dim = 0;
	int gen = 0;
	uint64_t bytes;

	if (!gw_workers_model_does(d->dep.workers, j->api.model.ptr, j->api.model.len, &dim,
				   &gen)) {
		gw_api_error_model_not_found(&e, j->api.model.ptr, j->api.model.len);
		j->model[0] = '\0';
		gw_job_fail(j, &e, 0, "unknown_model");
		return -1;
	}
	if (dim == 0) {
		gw_api_error_set(&e, 400, "model", "model_not_embedding", "model '%s' does not "
				 "embed: it is a generation model without a pooling type (use an "
				 "embedding model such as all-minilm or bge)", j->model);
		gw_job_fail(j, &e, 0, "bad_request");
		return -1;
	}
	if (em->req.dimensions > dim) {
		gw_api_error_set(&e, 400, "dimensions", NULL, "dimensions: expected at most %u "
				 "(the vectors of model '%s'), found %u", dim, j->model,
				 em->req.dimensions);
		gw_job_fail(j, &e, 0, "bad_request");
		return -1;
	}
	em->dim = em->req.dimensions ? em->req.dimensions : dim;
	bytes = em->req.text_bytes + 4 * em->req.token_ids + 16ull * em->req.n_inputs + 1024;
	if (bytes > CM_LIM_PROTO_FRAME_BYTES) {
		gw_api_error_set(&e, 413, "input", NULL, "request too large: the inputs take %llu "
				 "bytes, a worker accepts at most %u", (unsigned long long)bytes,
				 CM_LIM_PROTO_FRAME_BYTES);
		gw_job_fail(j, &e, 0, "too_large");
		return -1;
	}
	return 0;
}

void gw_job_start_embed(struct gw_job *j)
{
	struct gw_dispatch *d = j->d;
	struct gw_api_error e;
	size_t len, mlen;
	const uint8_t *body = gw_request_body(j->req, &len);
	struct gw_job_emb *em = cm_calloc(1, sizeof(*em));

	if (!em) {
		gw_job_failf(j, 503, "no_memory", 1, "the gateway is out of memory; retry later");
		return;
	}
	j->em = em;
	if (gw_api_parse_embed(embed_kind_of(j->route), body, len, &d->cfg.limits,
			       gw_request_arena(j->req), &em->req, &e) != CM_OK) {
		gw_job_fail(j, &e, 0, e.status == 500 ? "no_memory" : "bad_request");
		return;
	}
	j->api.model = em->req.model;
	j->api.model.len = (uint32_t)gw_api_model_resolve(d->dep.workers, j->api.model.ptr,
							  j->api.model.len);
	j->api.n = 1;
	j->api.max_tokens = 0; /* nothing generated: DONE's gen_tokens is bounded to 0 */
	mlen = j->api.model.len < GW_API_MODEL_NAME_MAX ? j->api.model.len : GW_API_MODEL_NAME_MAX;
	memcpy(j->model, j->api.model.ptr, mlen);
	j->model[mlen] = '\0';
	if (embed_checks(j) != 0)
		return;
	if (em->req.n_inputs == 0) {
		answer_empty(j);
		return;
	}
	em->vecs = cm_calloc((uint64_t)em->req.n_inputs * em->dim, sizeof(float));
	em->got = cm_calloc(em->req.n_inputs, 1);
	j->ch = cm_calloc(1, sizeof(*j->ch));
	if (!em->vecs || !em->got || !j->ch) {
		gw_job_failf(j, 503, "no_memory", 1, "the gateway is out of memory; retry later");
		return;
	}
	j->n_ch = 1;
	j->ch[0].j = j;
	j->ch[0].rid = j->id;
	if (gw_job_class(j) != 0)
		return;
	gw_job_admit(j);
}

int64_t gw_job_embed_estimate(const struct gw_job *j)
{
	return gw_api_embed_token_estimate(&j->em->req, j->model_ctx);
}

int gw_job_embed_only(struct gw_job *j)
{
	struct gw_api_error e;
	uint32_t dim;
	int gen;

	if (!gw_workers_model_does(j->d->dep.workers, j->api.model.ptr, j->api.model.len, &dim,
				   &gen) || gen)
		return 0;
	gw_api_error_set(&e, 400, "model", "model_not_generative", "model '%s' is an embedding "
			 "model: it does not generate (use %s)", j->model,
			 j->style == GW_STYLE_OPENAI ? "/v1/embeddings" : "/api/embed");
	gw_job_fail(j, &e, 0, "bad_request");
	return -1;
}

/* ---- the worker's answers ------------------------------------------- */

static void emb_on_embedding(void *arg, const struct proto_embedding *pe)
{
	struct gw_choice *c = arg;
	struct gw_job *j = c->j;
	struct gw_job_emb *em = j->em;

	/* nothing a worker says may write outside the request's vectors */
	if (pe->index >= em->req.n_inputs || pe->n_values != em->dim || em->got[pe->index]) {
		cm_logf(CM_LOG_WARN, "worker_embedding_refused", "request %llu: input %u of %u, "
			"%u values (expected %u)%s", (unsigned long long)j->id, pe->index,
			em->req.n_inputs, pe->n_values, em->dim,
			pe->index < em->req.n_inputs && em->got[pe->index] ? ", a second time" : "");
		return;
	}
	memcpy(em->vecs + (uint64_t)pe->index * em->dim, pe->values, em->dim * sizeof(float));
	em->got[pe->index] = 1;
	em->n_got++;
	if (!j->first_ns)
		j->first_ns = cm_mono_ns();
}

static void emb_on_done(void *arg, const struct proto_done *dn)
{
	struct gw_choice *c = arg;
	struct gw_job *j = c->j;
	struct gw_job_emb *em = j->em;
	uint64_t bound = (uint64_t)em->req.n_inputs * (j->model_ctx ? j->model_ctx : UINT32_MAX);

	c->done = *dn;
	/* the counts are bounded by what the inputs could take (issue 13,
	 * finding 10): nothing generated, nothing cached */
	if (c->done.prompt_tokens > bound)
		c->done.prompt_tokens = (uint32_t)bound;
	c->done.cached_tokens = 0;
	c->done.gen_tokens = 0;
	c->done.reasoning_tokens = 0;
	c->have_done = c->ended = 1;
	j->n_done = 1;
	j->done = c->done;
	j->have_done = 1;
	if (!j->req) {
		gw_job_end(j, 499, "client_gone");
		return;
	}
	if (dn->finish == PROTO_FINISH_CANCELLED || em->n_got != em->req.n_inputs) {
		gw_job_failf(j, 502, "worker_error", 0, dn->finish == PROTO_FINISH_CANCELLED
			     ? "the worker cancelled the request" : "the worker did not return a "
			     "vector for every input");
		return;
	}
	cm_buf_reset(&j->out);
	if (gw_api_render_embed(&j->out, &em->req, j->model, em->vecs, em->dim,
				j->done.prompt_tokens, cm_mono_ns() - j->start_ns) != CM_OK) {
		gw_job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
		return;
	}
	gw_respond_buf(gw_job_take_req(j), 200, &j->out);
	gw_job_end(j, 200, "ok");
}

static void emb_on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct gw_choice *c = arg;
	struct gw_job_emb *em = c->j->em;

	/* a re-dispatch after a lost worker starts the vectors over */
	memset(em->got, 0, em->req.n_inputs);
	em->n_got = 0;
	gw_job_ops.on_error(arg, code, msg, len);
}

static const struct gw_request_ops emb_ops = {
	.on_embedding = emb_on_embedding,
	.on_done = emb_on_done,
	.on_error = emb_on_error,
};

enum cm_status gw_job_submit_embed(struct gw_job *j)
{
	struct gw_api_embed *r = &j->em->req;
	struct proto_embed pe;
	enum cm_status st;

	memset(&pe, 0, sizeof(pe));
	pe.tenant_id.ptr = j->ident.tenant;
	pe.tenant_id.len = (uint32_t)strlen(j->ident.tenant);
	pe.key_id.ptr = j->ident.key_id;
	pe.key_id.len = (uint32_t)strlen(j->ident.key_id);
	pe.model = j->api.model;
	pe.klass = j->batch ? PROTO_CLASS_BATCH : PROTO_CLASS_INTERACTIVE;
	pe.dimensions = r->dimensions;
	pe.n_inputs = r->n_inputs;
	pe.inputs = r->inputs;
	st = gw_workers_embed(j->d->dep.workers, (size_t)j->worker, j->ch[0].rid,
			      r->truncate ? PROTO_EMBED_F_TRUNCATE : 0, &pe, &emb_ops, &j->ch[0]);
	if (st == CM_OK)
		j->ch[0].sent = 1;
	return st;
}
