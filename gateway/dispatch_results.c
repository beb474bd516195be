/*
 * dispatch_results.c - what a worker sends back for a job (TOKEN, DONE,
 * ERROR): streamed or collected text, time to first token and inter-token
 * latency, the final answer, a redispatch after a lost connection (see
 * dispatch_internal.h).
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

static void job_on_tokens(void *arg, const struct proto_tokens *t)
{
	struct gw_job *j = arg;
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
			} else if (m) {
				gw_metrics_observe(m, GW_HIST_ITL, now - j->last_ns);
			}
			j->last_ns = now;
			j->tokens++;
		} else if (tk->text.len == 0) {
			continue;
		}
		if (j->api.stream) {
			if (gw_api_render_chunk(&j->out, &j->stream, tk->text.ptr, tk->text.len,
						tk) != CM_OK)
				goto overflow;
		} else if (cm_buf_append(&j->text, tk->text.ptr, tk->text.len) != CM_OK ||
			   gw_api_stream_add_logprobs(&j->stream, tk) != CM_OK) {
			goto overflow;
		}
	}
	if (j->api.stream && cm_buf_len(&j->out)) {
		if (start_stream(j) != 0 ||
		    gw_request_stream_write(j->req, cm_buf_data(&j->out), cm_buf_len(&j->out)) != CM_OK) {
			/* the connection is closing: on_close follows (and
			 * cancels); stop writing until then */
			j->write_failed = 1;
		}
	}
	return;
overflow:
	gw_workers_cancel(j->d->dep.workers, (size_t)j->worker, j->id, PROTO_CANCEL_TIMEOUT);
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
}

static void job_on_done(void *arg, const struct proto_done *dn_in)
{
	struct gw_job *j = arg;
	struct gw_api_result res;
	int64_t now = cm_mono_ns();
	const struct proto_done *dn = &j->done;

	j->done = *dn_in;
	done_bound(j, &j->done);
	j->have_done = 1;
	if (!j->req || j->write_failed) {
		(void)gw_job_take_req(j);
		gw_job_end(j, 499, "client_gone");
		return;
	}
	memset(&res, 0, sizeof(res));
	gw_api_result_from_done(&res, dn);
	res.total_ns = now - j->start_ns;
	res.ttft_ns = j->first_ns ? j->first_ns - j->start_ns : 0;
	res.queue_ns = (j->disp_ns - j->enq_ns) + dn->queue_ns;
	cm_buf_reset(&j->out);
	if (j->api.stream) {
		struct gw_request *r;

		if (gw_api_render_final(&j->out, &j->stream, &res) != CM_OK ||
		    start_stream(j) != 0) {
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
		if (gw_api_render_full(&j->out, &j->stream, (const char *)cm_buf_data(&j->text),
				       cm_buf_len(&j->text), &res) != CM_OK) {
			gw_job_failf(j, 500, "too_large", 0, "the reply exceeded the gateway's output limit");
			return;
		}
		gw_respond_buf(gw_job_take_req(j), 200, &j->out);
	}
	gw_job_end(j, 200, dn->finish == PROTO_FINISH_CANCELLED ? "cancelled" : "ok");
}

static void job_on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct gw_job *j = arg;
	struct gw_api_error e;

	if (code == GW_WORKERS_E_LOST && j->req && !j->first_ns && !j->retried) {
		/* nothing reached the client yet: back to the head of its
		 * queue, once, for another worker (or this one, reconnected) */
		cm_logf(CM_LOG_WARN, "redispatch", "request %llu: worker connection lost "
			"before the first token; queued again", (unsigned long long)j->id);
		j->retried = 1;
		j->worker = -1;
		j->stage = GW_ST_QUEUED;
		gw_queue_unpop(j->d->dep.queue, &j->qi);
		gw_dispatch_pump(j->d);
		return;
	}
	cm_logf(CM_LOG_WARN, "worker_request_error", "request %llu: worker code %u: %.*s",
		(unsigned long long)j->id, code, (int)(len > 200 ? 200 : len), msg ? msg : "");
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

const struct gw_request_ops gw_job_ops = { job_on_tokens, job_on_done, job_on_error };

