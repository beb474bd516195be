/*
 * dispatch_results.c - what a worker sends back for a job (TOKEN, DONE,
 * ERROR) for each choice of a job: streamed or collected text, time to
 * first token and inter-token latency, the choices after the first sent
 * once it has its first token, the final answer (the choices' counts
 * summed), a redispatch after a lost connection (see dispatch_internal.h).
 */
#include "gateway/dispatch_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "gateway/metrics.h"

/* ---- worker results -------------------------------------------------- */

static int start_stream(struct gw_job *j)
{
	if (j->streaming)
		return 0;
	if (gw_request_stream_start(j->req, 200, gw_api_content_type(&j->api)) != CM_OK)
		return -1;
	j->streaming = 1;
	return 0;
}

/*
 * The choices after the first go once the first has its first token: its
 * prompt is then in the worker's prefix cache, and theirs is served from
 * it (every full block of the prompt).  Into the slots reserved for them.
 */
static void send_followers(struct gw_job *j)
{
	struct gw_workers *ws = j->d->dep.workers;

	for (uint32_t i = 1; i < j->n_ch && j->stage == GW_ST_RUNNING; i++) {
		struct gw_choice *c = &j->ch[i];
		enum cm_status st;

		if (c->sent || c->ended)
			continue;
		if (j->n_reserved) {
			gw_workers_unreserve(ws, (size_t)j->worker, 1);
			j->n_reserved--;
		}
		st = gw_job_submit_choice(j, c);
		if (st != CM_OK) {
			cm_logf(CM_LOG_WARN, "choice_not_sent", "request %llu: choice %u not sent "
				"to its worker: %s", (unsigned long long)j->id, i, cm_status_str(st));
			gw_job_cancel_all(j, PROTO_CANCEL_TIMEOUT);
			gw_job_failf(j, st == CM_ECLOSED ? 503 : 500, "worker_error",
				     st == CM_ECLOSED ? 1 : 0, "a choice could not be sent to the worker");
			return;
		}
	}
}

static void job_on_tokens(void *arg, const struct proto_tokens *t)
{
	struct gw_choice *c = arg;
	struct gw_job *j = c->j;
	int64_t now = cm_mono_ns();
	struct gw_metrics *m = j->d->dep.metrics;

	if (!j->req || j->write_failed)
		return;
	cm_buf_reset(&j->out);
	for (uint32_t i = 0; i < t->n; i++) {
		const struct proto_token *tk = &t->tok[i];

		if (tk->id != GW_TEXT_ONLY_ID) {
			if (!j->first_ns) {
				j->first_ns = now;
				if (m)
					gw_metrics_observe(m, GW_HIST_TTFT, now - j->start_ns);
				gw_dispatch_slo_first(j, now);
			} else if (m && c->last_ns) {
				gw_metrics_observe(m, GW_HIST_ITL, now - c->last_ns);
			}
			c->last_ns = now;
			c->tokens++;
			j->tokens++;
		} else if (tk->text.len == 0) {
			continue;
		}
		if (j->api.stream) {
			if (gw_api_render_entry(&j->out, &c->stream, tk) != CM_OK)
				goto overflow;
		} else if (tk->channel != PROTO_CH_CONTENT) {
			enum cm_status st = gw_api_stream_collect(&c->stream, tk);

			/* a call entry that is no call stays text */
			if (st == CM_EINVAL)
				st = cm_buf_append(&c->text, tk->text.ptr, tk->text.len);
			if (st != CM_OK || gw_api_stream_add_logprobs(&c->stream, tk) != CM_OK)
				goto overflow;
		} else if (cm_buf_append(&c->text, tk->text.ptr, tk->text.len) != CM_OK ||
			   gw_api_stream_add_logprobs(&c->stream, tk) != CM_OK) {
			goto overflow;
		}
	}
	if (j->api.stream && cm_buf_len(&j->out)) {
		if (start_stream(j) != 0 ||
		    gw_request_stream_write(j->req, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK) {
			/* the connection is closing: on_close follows (and
			 * cancels); stop writing until then */
			j->write_failed = 1;
			return;
		}
	}
	if (c->index == 0 && c->last_ns)
		send_followers(j);
	return;
overflow:
	gw_job_cancel_all(j, PROTO_CANCEL_TIMEOUT);
	gw_job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
}

/*
 * The counts a worker reports are bounded by what the request allowed:
 * nothing it says may charge a tenant more than the request could cost
 * (issue 13, finding 10: one DONE claiming 2^32-1 tokens locked a TPM
 * limited tenant out for 60 days).
 */
static void done_bound(struct gw_job *j, struct proto_done *dn)
{
	uint32_t ctx = j->model_ctx;
	uint32_t gen_max = j->api.max_tokens;

	if (ctx && dn->prompt_tokens > ctx)
		dn->prompt_tokens = ctx;
	if (dn->cached_tokens > dn->prompt_tokens)
		dn->cached_tokens = dn->prompt_tokens;
	if (ctx && gen_max > ctx)
		gen_max = ctx;
	if (dn->gen_tokens > gen_max) {
		cm_logf(CM_LOG_WARN, "worker_count_bounded", "request %llu: worker said %u "
			"tokens, the request allowed %u", (unsigned long long)j->id,
			dn->gen_tokens, gen_max);
		dn->gen_tokens = gen_max;
	}
	if (dn->reasoning_tokens > dn->gen_tokens)
		dn->reasoning_tokens = dn->gen_tokens;
}

/*
 * The request's counts once every choice has ended: the prompt once (as
 * choice 0 counted it: the prompt the choices share), the completions and
 * the constraint time summed, the longest decode; finish "cancelled" when
 * any choice was.
 */
static void done_total(struct gw_job *j)
{
	j->done = j->ch[0].done;
	for (uint32_t i = 1; i < j->n_ch; i++) {
		const struct proto_done *dn = &j->ch[i].done;

		j->done.gen_tokens += dn->gen_tokens;
		j->done.reasoning_tokens += dn->reasoning_tokens;
		j->done.constraint_ns += dn->constraint_ns;
		j->done.preemptions += dn->preemptions;
		if (dn->decode_ns > j->done.decode_ns)
			j->done.decode_ns = dn->decode_ns;
		if (dn->finish == PROTO_FINISH_CANCELLED)
			j->done.finish = PROTO_FINISH_CANCELLED;
	}
	j->have_done = 1;
}

static void result_of(const struct gw_job *j, const struct proto_done *dn,
		      struct gw_api_result *res)
{
	gw_api_result_from_done(res, dn);
	res->total_ns = cm_mono_ns() - j->start_ns;
	res->ttft_ns = j->first_ns ? j->first_ns - j->start_ns : 0;
	res->queue_ns = (j->disp_ns - j->enq_ns) + dn->queue_ns;
}

/* The body of a non-streamed reply: one choice, or the n of them. */
static enum cm_status render_body(struct gw_job *j, const struct gw_api_result *res)
{
	struct gw_api_choice_text ct[GW_API_CHOICES_MAX];

	if (j->n_ch == 1)
		return gw_api_render_full(&j->out, &j->ch[0].stream,
					  (const char *)cm_buf_data(&j->ch[0].text),
					  cm_buf_len(&j->ch[0].text), res);
	for (uint32_t i = 0; i < j->n_ch; i++) {
		ct[i].stream = &j->ch[i].stream;
		ct[i].text = (const char *)cm_buf_data(&j->ch[i].text);
		ct[i].len = cm_buf_len(&j->ch[i].text);
		ct[i].finish = j->ch[i].done.finish;
	}
	return gw_api_render_full_choices(&j->out, ct, j->n_ch, res);
}

/* A streamed choice of several ended: its finish chunk.  0, or -1 when the
 * job ended. */
static int stream_choice_end(struct gw_job *j, struct gw_choice *c)
{
	struct gw_api_result res;

	result_of(j, &c->done, &res);
	cm_buf_reset(&j->out);
	if (gw_api_render_choice_end(&j->out, &c->stream, &res) != CM_OK || start_stream(j) != 0) {
		gw_job_cancel_all(j, PROTO_CANCEL_TIMEOUT);
		gw_job_failf(j, 500, "render", 0, "internal error");
		return -1;
	}
	if (gw_request_stream_write(j->req, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK)
		j->write_failed = 1; /* on_close follows */
	return 0;
}

/* Every choice ended: the rest of the answer, and the end of the job. */
static void job_finish(struct gw_job *j)
{
	struct gw_api_result res;
	enum cm_status st;

	done_total(j);
	result_of(j, &j->done, &res);
	cm_buf_reset(&j->out);
	if (j->api.stream) {
		struct gw_request *r;

		st = j->n_ch == 1 ? gw_api_render_final(&j->out, &j->ch[0].stream, &res)
				  : gw_api_render_stream_end(&j->out, &j->ch[0].stream, &res);
		if (st != CM_OK || start_stream(j) != 0) {
			gw_job_failf(j, 500, "render", 0, "internal error");
			return;
		}
		r = gw_job_take_req(j);
		if (gw_request_stream_write(r, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK ||
		    gw_request_stream_end(r) != CM_OK) {
			gw_job_end(j, 499, "client_gone");
			return;
		}
	} else {
		if (render_body(j, &res) != CM_OK) {
			gw_job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
			return;
		}
		gw_respond_buf(gw_job_take_req(j), 200, &j->out);
	}
	gw_job_end(j, 200, j->done.finish == PROTO_FINISH_CANCELLED ? "cancelled" : "ok");
}

static void job_on_done(void *arg, const struct proto_done *dn)
{
	struct gw_choice *c = arg;
	struct gw_job *j = c->j;

	c->done = *dn;
	done_bound(j, &c->done);
	c->have_done = 1;
	c->ended = 1;
	j->n_done++;
	if (!j->req || j->write_failed) {
		gw_job_cancel_all(j, PROTO_CANCEL_CLIENT_GONE);
		if (j->n_done == j->n_ch)
			done_total(j);
		(void)gw_job_take_req(j);
		gw_job_end(j, 499, "client_gone");
		return;
	}
	if (c->index == 0)
		send_followers(j); /* ended before any token */
	if (j->stage != GW_ST_RUNNING)
		return;
	if (j->n_ch > 1 && j->api.stream && stream_choice_end(j, c) != 0)
		return;
	if (j->n_done == j->n_ch)
		job_finish(j);
}

static void job_on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct gw_choice *c = arg;
	struct gw_job *j = c->j;
	struct gw_api_error e;

	c->ended = 1;
	if (code == GW_WORKERS_E_LOST && j->req && !j->first_ns && !j->retried &&
	    c->index == 0 && j->n_done == 0) {
		/* nothing reached the client yet (and no other choice was
		 * sent): back to the head of its queue, once, for another
		 * worker (or this one, reconnected) */
		cm_logf(CM_LOG_WARN, "redispatch", "request %llu: worker connection lost "
			"before the first token; queued again", (unsigned long long)j->id);
		if (j->n_reserved)
			gw_workers_unreserve(j->d->dep.workers, (size_t)j->worker, j->n_reserved);
		j->n_reserved = 0;
		c->sent = c->ended = 0;
		j->retried = 1;
		j->worker = -1;
		j->stage = GW_ST_QUEUED;
		gw_queue_unpop(j->d->dep.queue, &j->qi);
		gw_dispatch_pump(j->d);
		return;
	}
	cm_logf(CM_LOG_WARN, "worker_request_error", "request %llu: worker code %u: %.*s",
		(unsigned long long)j->id, code, (int)(len > 200 ? 200 : len), msg ? msg : "");
	/* one choice failed: the answer is incomplete, the others stop */
	gw_job_cancel_all(j, PROTO_CANCEL_TIMEOUT);
	if (!j->req) {
		gw_job_end(j, 499, "client_gone");
		return;
	}
	gw_api_error_from_worker(&e, code, msg, len);
	if (code == PROTO_E_CONSTRAINT && j->api.constraint_param) {
		/* the worker names what is wrong in the schema or grammar; the
		 * client is told which of its fields that was */
		char m[sizeof(e.message)];

		snprintf(m, sizeof(m), "%s", e.message);
		gw_api_error_set(&e, 400, j->api.constraint_param, NULL, "%s: %s",
				 j->api.constraint_param, m);
	}
	gw_job_fail(j, &e, e.status == 503 ? 1 : 0,
		    code == PROTO_E_CONSTRAINT ? "constraint_error" : "worker_error");
}

const struct gw_request_ops gw_job_ops = { .on_tokens = job_on_tokens, .on_done = job_on_done,
					   .on_error = job_on_error };

