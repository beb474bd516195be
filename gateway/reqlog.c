/*
 * reqlog.c - the request log line and the request's id (X-Request-Id)
 * (see reqlog.h).
 */
#include "gateway/reqlog.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"

void gw_reqlog_write(const struct gw_reqlog *l)
{
	struct cm_log_rec r;
	const struct gw_worker_info *wi = l->worker;
	char sha[2 * PROTO_DIGEST_LEN + 1] = "";
	int64_t now = cm_mono_ns();

	if (!cm_log_enabled(CM_LOG_INFO))
		return;
	if (wi && wi->hello_ok)
		cm_hex_encode(wi->hello.model_sha256, PROTO_DIGEST_LEN, sha);
	cm_log_begin(&r, CM_LOG_INFO, "request");
	cm_log_u64(&r, "request_id", l->id);
	if (l->client_request_id && l->client_request_id[0])
		cm_log_str(&r, "client_request_id", l->client_request_id);
	cm_log_str(&r, "route", gw_path_name(l->route));
	cm_log_i64(&r, "status", l->status);
	cm_log_str(&r, "outcome", l->outcome ? l->outcome : "");
	if (l->ident) {
		cm_log_str(&r, "tenant", l->ident->tenant);
		cm_log_str(&r, "client", l->ident->client);
		cm_log_str(&r, "key_id", l->ident->key_id);
	}
	cm_log_str(&r, "class", l->batch ? "batch" : "interactive");
	if (l->model && l->model[0])
		cm_log_str(&r, "model", l->model);
	if (wi) {
		cm_log_str(&r, "worker", wi->name);
		if (wi->hello_ok) {
			cm_log_str(&r, "model_sha256", sha);
			cm_log_str(&r, "engine_version", wi->hello.engine_version.ptr);
			cm_log_str(&r, "backend", wi->hello.backend.ptr);
			cm_log_str(&r, "device", wi->hello.device.ptr);
		}
	}
	if (l->embed_inputs) {
		/* an embedding request: what it asked, never the inputs */
		cm_log_u64(&r, "inputs", l->embed_inputs);
		if (l->embed_dimensions)
			cm_log_u64(&r, "dimensions", l->embed_dimensions);
		cm_log_str(&r, "encoding", l->embed_base64 ? "base64" : "float");
	} else if (l->model && l->model[0]) {
		const struct proto_sampling *s = &l->api->sampling;

		cm_log_f64(&r, "temperature", s->temperature);
		cm_log_u64(&r, "top_k", s->top_k);
		cm_log_f64(&r, "top_p", s->top_p);
		cm_log_f64(&r, "min_p", s->min_p);
		cm_log_f64(&r, "repeat_penalty", s->repeat_penalty);
		cm_log_u64(&r, "repeat_last_n", s->repeat_last_n);
		cm_log_f64(&r, "presence_penalty", s->presence_penalty);
		cm_log_f64(&r, "frequency_penalty", s->frequency_penalty);
		if (l->api->submit_flags & PROTO_SUBMIT_F_HAS_SEED)
			cm_log_u64(&r, "seed", s->seed);
		cm_log_u64(&r, "max_tokens", l->api->max_tokens);
		if (l->api->n > 1)
			cm_log_u64(&r, "n", l->api->n);
		cm_log_u64(&r, "n_stop", l->api->n_stop);
		cm_log_bool(&r, "stream", l->api->stream);
		if (l->api->constraint_kind)
			cm_log_str(&r, "constraint", proto_constraint_str(l->api->constraint_kind));
		if (l->api->logprobs)
			cm_log_u64(&r, "top_logprobs", l->api->top_logprobs);
	}
	cm_log_u64(&r, "tokens_streamed", l->tokens);
	if (l->done) {
		cm_log_u64(&r, "prompt_tokens", l->done->prompt_tokens);
		cm_log_u64(&r, "cached_tokens", l->done->cached_tokens);
		cm_log_u64(&r, "gen_tokens", l->done->gen_tokens);
		if (l->done->constraint_ns > 0)
			cm_log_i64(&r, "constraint_ns", l->done->constraint_ns);
		cm_log_u64(&r, "preemptions", l->done->preemptions);
		cm_log_u64(&r, "finish", l->done->finish);
		cm_log_i64(&r, "worker_queue_ns", l->done->queue_ns);
		cm_log_i64(&r, "prefill_ns", l->done->prefill_ns);
		cm_log_i64(&r, "decode_ns", l->done->decode_ns);
		cm_log_i64(&r, "worker_ttft_ns", l->done->ttft_ns);
	}
	if (l->enq_ns) {
		/* received -> queued: auth, parse, quota admission */
		cm_log_i64(&r, "admit_ns", l->enq_ns - l->start_ns);
		cm_log_i64(&r, "queue_ns", (l->disp_ns ? l->disp_ns : now) - l->enq_ns);
	}
	if (l->disp_ns && l->first_ns)
		cm_log_i64(&r, "dispatch_to_first_token_ns", l->first_ns - l->disp_ns);
	if (l->first_ns)
		cm_log_i64(&r, "ttft_ns", l->first_ns - l->start_ns);
	cm_log_i64(&r, "total_ns", now - l->start_ns);
	cm_log_end(&r);
}

void gw_reqlog_gateway_id(const uint8_t *instance, size_t instance_len, uint64_t id,
			  char *out, size_t cap)
{
	char inst[2 * 32 + 1];

	if (instance_len > 32)
		instance_len = 32;
	cm_hex_encode(instance, instance_len, inst);
	snprintf(out, cap, "%s-%llu", inst, (unsigned long long)id);
}

void gw_reqlog_request_id(struct gw_request *req, const uint8_t *instance,
			  size_t instance_len, char client_rid[GW_CLIENT_REQUEST_ID_MAX + 1])
{
	const char *c = gw_request_header(req, "X-Request-Id");
	char rid[2 * 32 + 24];
	size_t n = c ? strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			      "0123456789._:-") : 0;

	client_rid[0] = '\0';
	if (c && n > 0 && c[n] == '\0' && n <= GW_CLIENT_REQUEST_ID_MAX) {
		memcpy(client_rid, c, n + 1);
		/* out of header room: the answer goes without it */
		if (gw_request_add_header(req, "X-Request-Id", client_rid) != CM_OK)
			cm_logf(CM_LOG_DEBUG, "request_id", "no room for X-Request-Id");
		return;
	}
	gw_reqlog_gateway_id(instance, instance_len, gw_request_id(req), rid, sizeof(rid));
	if (gw_request_add_header(req, "X-Request-Id", rid) != CM_OK)
		cm_logf(CM_LOG_DEBUG, "request_id", "no room for X-Request-Id");
}
