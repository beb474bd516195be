/*
 * msg_eq.c - deep comparison of proto messages (see msg_eq.h).
 */
#include "tests/proto/msg_eq.h"

#include <string.h>

static int str_eq(struct proto_str a, struct proto_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static int f32_eq(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static const char *hello_diff(const struct proto_hello *a,
			      const struct proto_hello *b)
{
	if (a->proto_version != b->proto_version)
		return "hello.proto_version";
	if (!str_eq(a->worker_name, b->worker_name))
		return "hello.worker_name";
	if (!str_eq(a->model_name, b->model_name))
		return "hello.model_name";
	if (memcmp(a->model_sha256, b->model_sha256, PROTO_DIGEST_LEN))
		return "hello.model_sha256";
	if (a->context_len != b->context_len)
		return "hello.context_len";
	if (a->vocab_size != b->vocab_size)
		return "hello.vocab_size";
	if (a->max_seqs != b->max_seqs)
		return "hello.max_seqs";
	if (a->kv_blocks_total != b->kv_blocks_total)
		return "hello.kv_blocks_total";
	if (a->kv_block_tokens != b->kv_block_tokens)
		return "hello.kv_block_tokens";
	if (!str_eq(a->backend, b->backend))
		return "hello.backend";
	if (!str_eq(a->device, b->device))
		return "hello.device";
	if (!str_eq(a->engine_version, b->engine_version))
		return "hello.engine_version";
	if (a->model_bytes != b->model_bytes)
		return "hello.model_bytes";
	if (a->model_mtime_s != b->model_mtime_s)
		return "hello.model_mtime_s";
	if (!str_eq(a->architecture, b->architecture))
		return "hello.architecture";
	if (a->parameter_count != b->parameter_count)
		return "hello.parameter_count";
	if (!str_eq(a->file_type, b->file_type))
		return "hello.file_type";
	if (a->embedding_dim != b->embedding_dim)
		return "hello.embedding_dim";
	if (a->generates != b->generates)
		return "hello.generates";
	return NULL;
}

static const char *sampling_diff(const struct proto_sampling *a,
				 const struct proto_sampling *b)
{
	if (!f32_eq(a->temperature, b->temperature))
		return "sampling.temperature";
	if (a->top_k != b->top_k)
		return "sampling.top_k";
	if (!f32_eq(a->top_p, b->top_p))
		return "sampling.top_p";
	if (!f32_eq(a->min_p, b->min_p))
		return "sampling.min_p";
	if (!f32_eq(a->repeat_penalty, b->repeat_penalty))
		return "sampling.repeat_penalty";
	if (a->repeat_last_n != b->repeat_last_n)
		return "sampling.repeat_last_n";
	if (!f32_eq(a->presence_penalty, b->presence_penalty))
		return "sampling.presence_penalty";
	if (!f32_eq(a->frequency_penalty, b->frequency_penalty))
		return "sampling.frequency_penalty";
	if (a->seed != b->seed)
		return "sampling.seed";
	return NULL;
}

static const char *submit_diff(const struct proto_submit *a,
			       const struct proto_submit *b)
{
	const char *d;

	if (!str_eq(a->tenant_id, b->tenant_id))
		return "submit.tenant_id";
	if (memcmp(a->cache_salt, b->cache_salt, PROTO_DIGEST_LEN))
		return "submit.cache_salt";
	if (!str_eq(a->key_id, b->key_id))
		return "submit.key_id";
	if (!str_eq(a->model, b->model))
		return "submit.model";
	if (a->klass != b->klass)
		return "submit.klass";
	if (a->max_tokens != b->max_tokens)
		return "submit.max_tokens";
	if (a->max_prompt_tokens != b->max_prompt_tokens)
		return "submit.max_prompt_tokens";
	d = sampling_diff(&a->sampling, &b->sampling);
	if (d)
		return d;
	if (a->n_stop != b->n_stop)
		return "submit.n_stop";
	for (uint32_t i = 0; i < a->n_stop; i++)
		if (!str_eq(a->stop[i], b->stop[i]))
			return "submit.stop[i]";
	if (a->prompt_kind != b->prompt_kind)
		return "submit.prompt_kind";
	if (!str_eq(a->text, b->text))
		return "submit.text";
	if (a->n_messages != b->n_messages)
		return "submit.n_messages";
	for (uint32_t i = 0; i < a->n_messages; i++) {
		if (!str_eq(a->messages[i].role, b->messages[i].role))
			return "submit.messages[i].role";
		if (!str_eq(a->messages[i].content, b->messages[i].content))
			return "submit.messages[i].content";
		if (!str_eq(a->messages[i].tool_calls, b->messages[i].tool_calls))
			return "submit.messages[i].tool_calls";
		if (!str_eq(a->messages[i].tool_call_id, b->messages[i].tool_call_id))
			return "submit.messages[i].tool_call_id";
	}
	if (!str_eq(a->template_name, b->template_name))
		return "submit.template_name";
	if (a->constraint_kind != b->constraint_kind)
		return "submit.constraint_kind";
	if (!str_eq(a->constraint, b->constraint))
		return "submit.constraint";
	if (a->top_logprobs != b->top_logprobs)
		return "submit.top_logprobs";
	if (!str_eq(a->tools, b->tools))
		return "submit.tools";
	if (a->tool_choice != b->tool_choice || !str_eq(a->tool_name, b->tool_name))
		return "submit.tool_choice";
	if (a->parallel_tool_calls != b->parallel_tool_calls)
		return "submit.parallel_tool_calls";
	if (a->think != b->think)
		return "submit.think";
	return NULL;
}

static const char *tokens_diff(const struct proto_tokens *a,
			       const struct proto_tokens *b)
{
	if (a->n != b->n)
		return "tokens.n";
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->tok[i].id != b->tok[i].id)
			return "tokens.tok[i].id";
		if (!f32_eq(a->tok[i].logprob, b->tok[i].logprob))
			return "tokens.tok[i].logprob";
		if (!str_eq(a->tok[i].text, b->tok[i].text))
			return "tokens.tok[i].text";
		if (!str_eq(a->tok[i].piece, b->tok[i].piece))
			return "tokens.tok[i].piece";
		if (a->tok[i].n_top != b->tok[i].n_top)
			return "tokens.tok[i].n_top";
		if (a->tok[i].channel != b->tok[i].channel)
			return "tokens.tok[i].channel";
		for (uint32_t j = 0; j < a->tok[i].n_top; j++)
			if (a->tok[i].top[j].id != b->tok[i].top[j].id ||
			    !f32_eq(a->tok[i].top[j].logprob, b->tok[i].top[j].logprob) ||
			    !str_eq(a->tok[i].top[j].piece, b->tok[i].top[j].piece))
				return "tokens.tok[i].top[j]";
	}
	return NULL;
}

static const char *done_diff(const struct proto_done *a,
			     const struct proto_done *b)
{
	if (a->finish != b->finish)
		return "done.finish";
	if (a->prompt_tokens != b->prompt_tokens)
		return "done.prompt_tokens";
	if (a->cached_tokens != b->cached_tokens)
		return "done.cached_tokens";
	if (a->gen_tokens != b->gen_tokens)
		return "done.gen_tokens";
	if (a->preemptions != b->preemptions)
		return "done.preemptions";
	if (a->load_ns != b->load_ns)
		return "done.load_ns";
	if (a->queue_ns != b->queue_ns)
		return "done.queue_ns";
	if (a->prefill_ns != b->prefill_ns)
		return "done.prefill_ns";
	if (a->decode_ns != b->decode_ns)
		return "done.decode_ns";
	if (a->ttft_ns != b->ttft_ns)
		return "done.ttft_ns";
	if (memcmp(a->logits_digest, b->logits_digest, PROTO_DIGEST_LEN))
		return "done.logits_digest";
	if (a->constraint_ns != b->constraint_ns)
		return "done.constraint_ns";
	if (a->reasoning_tokens != b->reasoning_tokens)
		return "done.reasoning_tokens";
	return NULL;
}

static const char *stats_diff(const struct proto_stats *a,
			      const struct proto_stats *b)
{
	if (a->queue_depth != b->queue_depth)
		return "stats.queue_depth";
	if (a->running != b->running)
		return "stats.running";
	if (a->step_batch != b->step_batch)
		return "stats.step_batch";
	if (a->kv_blocks_used != b->kv_blocks_used)
		return "stats.kv_blocks_used";
	if (a->kv_blocks_free != b->kv_blocks_free)
		return "stats.kv_blocks_free";
	if (a->kv_blocks_cached != b->kv_blocks_cached)
		return "stats.kv_blocks_cached";
	if (a->prefix_hit_tokens != b->prefix_hit_tokens)
		return "stats.prefix_hit_tokens";
	if (a->prompt_tokens != b->prompt_tokens)
		return "stats.prompt_tokens";
	if (a->gen_tokens != b->gen_tokens)
		return "stats.gen_tokens";
	if (!f32_eq(a->prefill_tps, b->prefill_tps))
		return "stats.prefill_tps";
	if (!f32_eq(a->decode_tps, b->decode_tps))
		return "stats.decode_tps";
	if (a->device_mem_used != b->device_mem_used)
		return "stats.device_mem_used";
	if (a->device_mem_total != b->device_mem_total)
		return "stats.device_mem_total";
	if (a->draining != b->draining)
		return "stats.draining";
	if (a->n_hist != b->n_hist)
		return "stats.n_hist";
	if (memcmp(a->ttft_hist, b->ttft_hist, sizeof(a->ttft_hist)))
		return "stats.ttft_hist";
	if (memcmp(a->itl_hist, b->itl_hist, sizeof(a->itl_hist)))
		return "stats.itl_hist";
	return NULL;
}

static const char *embed_diff(const struct proto_embed *a, const struct proto_embed *b)
{
	if (!str_eq(a->tenant_id, b->tenant_id) || !str_eq(a->key_id, b->key_id) ||
	    !str_eq(a->model, b->model))
		return "embed.ids";
	if (a->klass != b->klass || a->dimensions != b->dimensions)
		return "embed.klass/dimensions";
	if (a->n_inputs != b->n_inputs)
		return "embed.n_inputs";
	for (uint32_t i = 0; i < a->n_inputs; i++) {
		const struct proto_embed_input *x = &a->inputs[i], *y = &b->inputs[i];

		if (x->kind != y->kind || !str_eq(x->text, y->text) || x->n_tokens != y->n_tokens)
			return "embed.inputs";
		if (x->n_tokens && memcmp(x->tokens, y->tokens, x->n_tokens * sizeof(uint32_t)))
			return "embed.inputs.tokens";
	}
	return NULL;
}

static const char *embedding_diff(const struct proto_embedding *a,
				  const struct proto_embedding *b)
{
	if (a->index != b->index || a->n_tokens != b->n_tokens || a->truncated != b->truncated)
		return "embedding.index/n_tokens/truncated";
	if (a->n_values != b->n_values)
		return "embedding.n_values";
	for (uint32_t i = 0; i < a->n_values; i++)
		if (!f32_eq(a->values[i], b->values[i]))
			return "embedding.values";
	return NULL;
}

const char *tp_msg_diff(const struct proto_msg *a, const struct proto_msg *b)
{
	if (a->type != b->type)
		return "type";
	if (a->flags != b->flags)
		return "flags";
	if (a->request_id != b->request_id)
		return "request_id";
	switch (a->type) {
	case PROTO_HELLO:
		return hello_diff(&a->u.hello, &b->u.hello);
	case PROTO_SUBMIT:
		return submit_diff(&a->u.submit, &b->u.submit);
	case PROTO_TOKEN:
		return tokens_diff(&a->u.tokens, &b->u.tokens);
	case PROTO_DONE:
		return done_diff(&a->u.done, &b->u.done);
	case PROTO_STATS:
		return stats_diff(&a->u.stats, &b->u.stats);
	case PROTO_EMBED:
		return embed_diff(&a->u.embed, &b->u.embed);
	case PROTO_EMBEDDING:
		return embedding_diff(&a->u.embedding, &b->u.embedding);
	case PROTO_CANCEL:
		if (a->u.cancel.reason != b->u.cancel.reason)
			return "cancel.reason";
		return NULL;
	case PROTO_ERROR:
		if (a->u.error.code != b->u.error.code)
			return "error.code";
		if (!str_eq(a->u.error.message, b->u.error.message))
			return "error.message";
		return NULL;
	case PROTO_PING:
		if (a->u.ping.nonce != b->u.ping.nonce)
			return "ping.nonce";
		return NULL;
	case PROTO_PONG:
		if (a->u.pong.nonce != b->u.pong.nonce)
			return "pong.nonce";
		if (a->u.pong.ok != b->u.pong.ok)
			return "pong.ok";
		if (a->u.pong.tokens != b->u.pong.tokens)
			return "pong.tokens";
		if (a->u.pong.gen_ns != b->u.pong.gen_ns)
			return "pong.gen_ns";
		return NULL;
	case PROTO_DRAIN:
		if (a->u.drain.timeout_ms != b->u.drain.timeout_ms)
			return "drain.timeout_ms";
		return NULL;
	}
	return "unknown type";
}
