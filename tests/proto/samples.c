/*
 * samples.c - sample messages of every proto type (see samples.h).
 */
#include "tests/proto/samples.h"

#include <string.h>

const uint16_t tp_types[] = {
	PROTO_HELLO,  PROTO_PING,   PROTO_PONG,  PROTO_DRAIN, PROTO_ERROR,
	PROTO_SUBMIT, PROTO_CANCEL, PROTO_TOKEN, PROTO_DONE,  PROTO_STATS,
	PROTO_EMBED,  PROTO_EMBEDDING,
};
const int tp_n_types = (int)(sizeof(tp_types) / sizeof(tp_types[0]));

struct proto_str tp_str(const char *s)
{
	struct proto_str r = { s, (uint32_t)strlen(s) };

	return r;
}

static struct proto_str sample_stop[3];
static struct proto_message sample_messages[4];
static struct proto_token sample_tokens[4];
static const struct proto_top sample_top[3] = {
	{ 15043, -0.125f, { "Hello", 5 } }, { 10994, -2.25f, { "\xe4\xb8", 2 } }, { 2, -3.0f, { NULL, 0 } } };

static void sample_hello(struct proto_hello *h)
{
	h->proto_version = PROTO_VERSION;
	h->worker_name = tp_str("worker-0");
	h->model_name = tp_str("tinyllama-1.1b-chat-v1.0.Q4_K_M");
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		h->model_sha256[i] = (uint8_t)(0xA0 + i);
	h->context_len = 2048;
	h->vocab_size = 32000;
	h->max_seqs = 64;
	h->kv_blocks_total = 4096;
	h->kv_block_tokens = 16;
	h->backend = tp_str("cuda");
	h->device = tp_str("NVIDIA H200 \xe2\x80\x94 141 GB");
	h->engine_version = tp_str("0.1.0");
	h->model_bytes = 668788096ull;
	h->model_mtime_s = -1; /* before 1970: the field is signed */
	h->architecture = tp_str("llama");
	h->parameter_count = 1100048384ull;
	h->file_type = tp_str("Q4_K_M");
	h->embedding_dim = 2048;
	h->generates = 1;
}

static const uint32_t sample_ids[3] = { 101, 7592, UINT32_MAX };
static struct proto_embed_input sample_inputs[3];
static const float sample_values[4] = { 0.5f, -0.5f, 0.5f, -0.5f };

static void sample_embed(struct proto_embed *e)
{
	e->tenant_id = tp_str("team-\xce\xb1");
	e->key_id = tp_str("k7Qz");
	e->model = tp_str("all-minilm");
	e->klass = PROTO_CLASS_BATCH;
	e->dimensions = 256;
	sample_inputs[0] = (struct proto_embed_input){ PROTO_INPUT_TEXT, tp_str("h\xc3\xa9llo"), 0, NULL };
	sample_inputs[1] = (struct proto_embed_input){ PROTO_INPUT_TOKENS, tp_str(""), 3, sample_ids };
	sample_inputs[2] = (struct proto_embed_input){ PROTO_INPUT_TEXT, tp_str(""), 0, NULL };
	e->n_inputs = 3;
	e->inputs = sample_inputs;
}

static void sample_submit(struct proto_submit *s)
{
	s->tenant_id = tp_str("team-\xce\xb1");
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		s->cache_salt[i] = (uint8_t)(0x10 + 3 * i);
	s->key_id = tp_str("k7Qz");
	s->model = tp_str("tinyllama");
	s->klass = PROTO_CLASS_BATCH;
	s->max_tokens = 128;
	s->max_prompt_tokens = 1900;
	s->sampling.temperature = 0.7f;
	s->sampling.top_k = 40;
	s->sampling.top_p = 0.9f;
	s->sampling.min_p = 0.05f;
	s->sampling.repeat_penalty = 1.1f;
	s->sampling.repeat_last_n = 64;
	s->sampling.presence_penalty = 0.25f;
	s->sampling.frequency_penalty = -0.5f;
	s->sampling.seed = 0x123456789ABCDEF0ull;
	sample_stop[0] = tp_str("\n\n");
	sample_stop[1] = tp_str("</s>");
	sample_stop[2] = tp_str("");
	s->n_stop = 3;
	s->stop = sample_stop;
	s->prompt_kind = PROTO_PROMPT_CHAT;
	s->text = tp_str("");
	sample_messages[0].role = tp_str("system");
	sample_messages[0].content = tp_str("You are terse.");
	sample_messages[1].role = tp_str("user");
	sample_messages[1].content = tp_str("h\xc3\xa9llo \xf0\x9f\x91\x8b");
	sample_messages[2].role = tp_str("assistant");
	sample_messages[2].content = tp_str("");
	sample_messages[2].tool_calls = tp_str("[{\"id\":\"c1\",\"name\":\"f\",\"arguments\":{}}]");
	sample_messages[3].role = tp_str("tool");
	sample_messages[3].content = tp_str("42");
	sample_messages[3].tool_call_id = tp_str("c1");
	s->n_messages = 4;
	s->messages = sample_messages;
	s->template_name = tp_str("chatml");
	s->constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
	s->constraint = tp_str("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}");
	s->top_logprobs = 5;
	s->tools = tp_str("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]");
	s->tool_choice = PROTO_TOOLS_NAMED;
	s->tool_name = tp_str("f");
	s->parallel_tool_calls = 1;
	s->think = PROTO_THINK_OFF;
}

static void sample_tokens_fill(struct proto_tokens *t)
{
	sample_tokens[0] = (struct proto_token){ 15043, -0.125f, tp_str("Hello"), tp_str("Hello"), 3, sample_top,
						 PROTO_CH_CONTENT };
	sample_tokens[1] = (struct proto_token){ 29892, -2.5f, tp_str(","), { "\xff,", 2 }, 0, NULL,
						 PROTO_CH_REASONING };
	sample_tokens[2] = (struct proto_token){ 31999, -7.75f, tp_str(""), tp_str(""), 1, sample_top + 2,
						 PROTO_CH_CONTENT };
	sample_tokens[3] = (struct proto_token){ UINT32_MAX, 0.0f,
						 tp_str("{\"name\":\"f\",\"arguments\":{\"a\":1}}"),
						 { NULL, 0 }, 0, NULL, PROTO_CH_TOOL_CALL };
	t->n = 4;
	t->tok = sample_tokens;
}

static void sample_done(struct proto_done *d)
{
	d->finish = PROTO_FINISH_LENGTH;
	d->prompt_tokens = 517;
	d->cached_tokens = 512;
	d->gen_tokens = 128;
	d->preemptions = 2;
	d->load_ns = 1;
	d->queue_ns = 2500000;
	d->prefill_ns = 31000000;
	d->decode_ns = INT64_C(4100000000);
	d->ttft_ns = 33500000;
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		d->logits_digest[i] = (uint8_t)(0xFF - i);
	d->constraint_ns = 2750000;
	d->reasoning_tokens = 100;
}

static void sample_stats(struct proto_stats *s)
{
	s->queue_depth = 3;
	s->running = 17;
	s->step_batch = 16;
	s->kv_blocks_used = 1200;
	s->kv_blocks_free = 2896;
	s->kv_blocks_cached = 300;
	s->prefix_hit_tokens = 123456789012ull;
	s->prompt_tokens = 987654321098ull;
	s->gen_tokens = 555555555555ull;
	s->prefill_tps = 12345.5f;
	s->decode_tps = 987.25f;
	s->device_mem_used = 120ull << 30;
	s->device_mem_total = 141ull << 30;
	s->draining = 1;
	s->n_hist = PROTO_HIST_BUCKETS;
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++) {
		s->ttft_hist[i] = 10u * (uint64_t)(i + 1);
		s->itl_hist[i] = 1000u + 7u * (uint64_t)i;
	}
}

void tp_sample(uint16_t t, struct proto_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = t;
	switch (t) {
	case PROTO_HELLO:
		sample_hello(&m->u.hello);
		break;
	case PROTO_PING:
		m->u.ping.nonce = 0xDEADBEEFCAFEF00Dull;
		break;
	case PROTO_PONG:
		m->u.pong.nonce = 0xDEADBEEFCAFEF00Dull;
		m->u.pong.ok = 1;
		m->u.pong.tokens = 4;
		m->u.pong.gen_ns = 18000000;
		break;
	case PROTO_DRAIN:
		m->u.drain.timeout_ms = 30000;
		break;
	case PROTO_ERROR:
		m->request_id = 77;
		m->u.error.code = PROTO_E_OVERLOADED;
		m->u.error.message = tp_str("64 sequences running, 0 KV blocks free");
		break;
	case PROTO_SUBMIT:
		m->flags = PROTO_SUBMIT_F_HAS_SEED | PROTO_SUBMIT_F_DIGEST;
		m->request_id = 0x0102030405060708ull;
		sample_submit(&m->u.submit);
		break;
	case PROTO_CANCEL:
		m->request_id = 0x0102030405060708ull;
		m->u.cancel.reason = PROTO_CANCEL_REVOKED;
		break;
	case PROTO_TOKEN:
		m->request_id = 42;
		sample_tokens_fill(&m->u.tokens);
		break;
	case PROTO_DONE:
		m->request_id = 42;
		sample_done(&m->u.done);
		break;
	case PROTO_STATS:
		sample_stats(&m->u.stats);
		break;
	case PROTO_EMBED:
		m->flags = PROTO_EMBED_F_TRUNCATE;
		m->request_id = 0x0102030405060709ull;
		sample_embed(&m->u.embed);
		break;
	case PROTO_EMBEDDING:
		m->request_id = 42;
		m->u.embedding.index = 2;
		m->u.embedding.n_tokens = 511;
		m->u.embedding.truncated = 1;
		m->u.embedding.n_values = 4;
		m->u.embedding.values = sample_values;
		break;
	}
}
