/*
 * codec.c - encoding and one-shot decoding of proto frames.
 *
 * The byte layout is specified in docs/protocol.md and summarised in
 * proto.h; each message's payload is its struct's fields, in the order they
 * appear in proto.h, written as the primitives listed there (the per-type
 * layouts are repeated above each enc_/dec_ pair below).
 *
 * Owns nothing: the encoder appends to the caller's capped cm_buf and puts
 * it back as it was on any failure; the decoder reads a caller buffer and
 * materialises arrays in the caller's scratch cm_buf.  Pure functions, any
 * thread.
 *
 * Invariants:
 *  - the decoder never reads outside frame[0..len): every read goes through
 *    proto_rd_take(), which checks the bytes left first;
 *  - a list count is checked against the bytes left (count x smallest
 *    element) and then against its hard limit before any allocation;
 *  - encoder and decoder apply the same value checks (check_values()), so a
 *    message that decodes also encodes, and encoding is canonical:
 *    encode(decode(frame)) reproduces the frame's bytes.
 */
#include "proto/proto.h"

#include <math.h>
#include <string.h>

#include "common/limits.h"
#include "common/utf8.h"
#include "proto/internal.h"

/* ==== checks shared by encoder and decoder ============================= */

static int type_known(uint32_t t)
{
	switch (t) {
	case PROTO_HELLO:
	case PROTO_PING:
	case PROTO_PONG:
	case PROTO_DRAIN:
	case PROTO_ERROR:
	case PROTO_SUBMIT:
	case PROTO_CANCEL:
	case PROTO_EMBED:
	case PROTO_TOKEN:
	case PROTO_DONE:
	case PROTO_EMBEDDING:
	case PROTO_STATS:
		return 1;
	}
	return 0;
}

/* Flag bits defined for a type; every other bit must be 0. */
static uint32_t type_flags(uint32_t t)
{
	return t == PROTO_SUBMIT ? PROTO_SUBMIT_FLAGS_ALL
	       : t == PROTO_EMBED ? PROTO_EMBED_FLAGS_ALL : 0;
}

enum proto_error proto_header_parse(const uint8_t *h, uint32_t max_frame,
				    struct proto_header *out)
{
	out->magic = cm_le32(h);
	out->version = cm_le16(h + 4);
	out->type = cm_le16(h + 6);
	out->flags = cm_le32(h + 8);
	out->payload_len = cm_le32(h + 12);
	out->request_id = cm_le64(h + 16);
	if (out->magic != PROTO_MAGIC)
		return PROTO_ERR_MAGIC;
	if (out->version != PROTO_VERSION)
		return PROTO_ERR_VERSION;
	if (!type_known(out->type))
		return PROTO_ERR_TYPE;
	if (out->flags & ~type_flags(out->type))
		return PROTO_ERR_FLAGS;
	if (out->payload_len > max_frame)
		return PROTO_ERR_TOO_LONG;
	return PROTO_ERR_NONE;
}

/*
 * Per-request messages carry their request id (never 0); connection-level
 * ones carry 0; ERROR may be either.
 */
static int request_id_ok(uint32_t type, uint64_t id)
{
	switch (type) {
	case PROTO_SUBMIT:
	case PROTO_CANCEL:
	case PROTO_EMBED:
	case PROTO_TOKEN:
	case PROTO_DONE:
	case PROTO_EMBEDDING:
		return id != 0;
	case PROTO_ERROR:
		return 1;
	default:
		return id == 0;
	}
}

static int sampling_ok(const struct proto_sampling *s)
{
	return isfinite(s->temperature) && isfinite(s->top_p) &&
	       isfinite(s->min_p) && isfinite(s->repeat_penalty) &&
	       isfinite(s->presence_penalty) && isfinite(s->frequency_penalty);
}

/*
 * Domain checks of a complete message (enums, booleans, floats, request
 * id).  Counts above their hard limit (which the decoder refuses earlier
 * with PROTO_ERR_COUNT_LIMIT) are reported as PROTO_ERR_COUNT_LIMIT too.
 */
static enum proto_error check_values(const struct proto_msg *m)
{
	if (!request_id_ok(m->type, m->request_id))
		return PROTO_ERR_VALUE;
	switch (m->type) {
	case PROTO_SUBMIT: {
		const struct proto_submit *s = &m->u.submit;

		if (s->n_stop > CM_LIM_PROTO_STOP_STRINGS_HARD ||
		    s->n_messages > CM_LIM_PROTO_MESSAGES_HARD)
			return PROTO_ERR_COUNT_LIMIT;
		if (s->klass > PROTO_CLASS_BATCH ||
		    s->prompt_kind > PROTO_PROMPT_CHAT || s->max_tokens == 0 ||
		    !sampling_ok(&s->sampling) ||
		    s->constraint_kind > PROTO_CONSTRAINT_GRAMMAR ||
		    (s->constraint_kind == PROTO_CONSTRAINT_NONE && s->constraint.len) ||
		    s->top_logprobs > PROTO_TOP_LOGPROBS_MAX ||
		    s->tool_choice > PROTO_TOOLS_NAMED ||
		    (s->tool_choice == PROTO_TOOLS_NAMED) != (s->tool_name.len > 0) ||
		    s->parallel_tool_calls > 1 || s->think > PROTO_THINK_OFF)
			return PROTO_ERR_VALUE;
		break;
	}
	case PROTO_EMBED:
		return proto_embed_check(&m->u.embed);
	case PROTO_EMBEDDING:
		return proto_embedding_check(&m->u.embedding);
	case PROTO_HELLO:
		if (m->u.hello.generates > 1)
			return PROTO_ERR_VALUE;
		break;
	case PROTO_CANCEL:
		if (m->u.cancel.reason > PROTO_CANCEL_SHUTDOWN)
			return PROTO_ERR_VALUE;
		break;
	case PROTO_TOKEN:
		if (m->u.tokens.n > CM_LIM_PROTO_TOKENS_PER_FRAME_HARD)
			return PROTO_ERR_COUNT_LIMIT;
		if (m->u.tokens.n == 0)
			return PROTO_ERR_VALUE;
		for (uint32_t i = 0; m->u.tokens.tok && i < m->u.tokens.n; i++)
			if (m->u.tokens.tok[i].n_top > PROTO_TOP_LOGPROBS_MAX ||
			    m->u.tokens.tok[i].channel > PROTO_CH_TOOL_CALL)
				return PROTO_ERR_VALUE;
		break;
	case PROTO_DONE:
		if (m->u.done.finish > PROTO_FINISH_CANCELLED)
			return PROTO_ERR_VALUE;
		break;
	case PROTO_ERROR:
		if (m->u.error.code < PROTO_E_BAD_REQUEST ||
		    m->u.error.code > PROTO_E_CONSTRAINT)
			return PROTO_ERR_VALUE;
		break;
	case PROTO_STATS:
		if (m->u.stats.draining > 1 ||
		    m->u.stats.n_hist != PROTO_HIST_BUCKETS)
			return PROTO_ERR_VALUE;
		break;
	case PROTO_PONG:
		if (m->u.pong.ok > 1)
			return PROTO_ERR_VALUE;
		break;
	default:
		break;
	}
	return PROTO_ERR_NONE;
}

/* ==== HELLO ============================================================
 * u16 proto_version, str worker_name, str model_name,
 * bytes32 model_sha256, u32 context_len, u32 vocab_size, u32 max_seqs,
 * u32 kv_blocks_total, u32 kv_block_tokens, str backend, str device,
 * str engine_version, u64 model_bytes, i64 model_mtime_s, str architecture,
 * u64 parameter_count, str file_type,
 * (version 6) u32 embedding_dim, u8 generates
 */
static void enc_hello(struct proto_wr *w, const struct proto_hello *h)
{
	proto_wr_u16(w, h->proto_version);
	proto_wr_str(w, h->worker_name);
	proto_wr_str(w, h->model_name);
	proto_wr_digest(w, h->model_sha256);
	proto_wr_u32(w, h->context_len);
	proto_wr_u32(w, h->vocab_size);
	proto_wr_u32(w, h->max_seqs);
	proto_wr_u32(w, h->kv_blocks_total);
	proto_wr_u32(w, h->kv_block_tokens);
	proto_wr_str(w, h->backend);
	proto_wr_str(w, h->device);
	proto_wr_str(w, h->engine_version);
	proto_wr_u64(w, h->model_bytes);
	proto_wr_i64(w, h->model_mtime_s);
	proto_wr_str(w, h->architecture);
	proto_wr_u64(w, h->parameter_count);
	proto_wr_str(w, h->file_type);
	proto_wr_u32(w, h->embedding_dim);
	proto_wr_u8(w, h->generates);
}

static void dec_hello(struct proto_rd *r, struct proto_hello *h)
{
	h->proto_version = proto_rd_u16(r);
	proto_rd_str(r, &h->worker_name);
	proto_rd_str(r, &h->model_name);
	proto_rd_digest(r, h->model_sha256);
	h->context_len = proto_rd_u32(r);
	h->vocab_size = proto_rd_u32(r);
	h->max_seqs = proto_rd_u32(r);
	h->kv_blocks_total = proto_rd_u32(r);
	h->kv_block_tokens = proto_rd_u32(r);
	proto_rd_str(r, &h->backend);
	proto_rd_str(r, &h->device);
	proto_rd_str(r, &h->engine_version);
	h->model_bytes = proto_rd_u64(r);
	h->model_mtime_s = proto_rd_i64(r);
	proto_rd_str(r, &h->architecture);
	h->parameter_count = proto_rd_u64(r);
	proto_rd_str(r, &h->file_type);
	h->embedding_dim = proto_rd_u32(r);
	h->generates = proto_rd_u8(r);
}

/* ==== SUBMIT ===========================================================
 * str tenant_id, bytes32 cache_salt, str key_id, str model, u8 klass,
 * u32 max_tokens, u32 max_prompt_tokens,
 * sampling: f32 temperature, u32 top_k, f32 top_p, f32 min_p,
 *           f32 repeat_penalty, u32 repeat_last_n, f32 presence_penalty,
 *           f32 frequency_penalty, u64 seed,
 * list<str> stop (u32 n_stop + n_stop str; min 4 bytes each),
 * u8 prompt_kind, str text,
 * list<message> messages (u32 n_messages + per message: str role,
 *           str content, (version 4) str tool_calls, str tool_call_id;
 *           min 16 bytes each),
 * str template_name,
 * (version 3) u8 constraint_kind, str constraint, u8 top_logprobs,
 * (version 4) str tools, u8 tool_choice, str tool_name,
 *           u8 parallel_tool_calls, u8 think,
 * (version 5) u32 think_budget
 */
static void enc_sampling(struct proto_wr *w, const struct proto_sampling *s)
{
	proto_wr_f32(w, s->temperature);
	proto_wr_u32(w, s->top_k);
	proto_wr_f32(w, s->top_p);
	proto_wr_f32(w, s->min_p);
	proto_wr_f32(w, s->repeat_penalty);
	proto_wr_u32(w, s->repeat_last_n);
	proto_wr_f32(w, s->presence_penalty);
	proto_wr_f32(w, s->frequency_penalty);
	proto_wr_u64(w, s->seed);
}

static void dec_sampling(struct proto_rd *r, struct proto_sampling *s)
{
	s->temperature = proto_rd_f32(r);
	s->top_k = proto_rd_u32(r);
	s->top_p = proto_rd_f32(r);
	s->min_p = proto_rd_f32(r);
	s->repeat_penalty = proto_rd_f32(r);
	s->repeat_last_n = proto_rd_u32(r);
	s->presence_penalty = proto_rd_f32(r);
	s->frequency_penalty = proto_rd_f32(r);
	s->seed = proto_rd_u64(r);
}

static void enc_submit(struct proto_wr *w, const struct proto_submit *s)
{
	proto_wr_str(w, s->tenant_id);
	proto_wr_digest(w, s->cache_salt);
	proto_wr_str(w, s->key_id);
	proto_wr_str(w, s->model);
	proto_wr_u8(w, s->klass);
	proto_wr_u32(w, s->max_tokens);
	proto_wr_u32(w, s->max_prompt_tokens);
	enc_sampling(w, &s->sampling);
	if (s->n_stop && !s->stop && w->st == CM_OK)
		w->st = CM_EINVAL;
	proto_wr_u32(w, s->n_stop);
	for (uint32_t i = 0; i < s->n_stop && w->st == CM_OK; i++)
		proto_wr_str(w, s->stop[i]);
	proto_wr_u8(w, s->prompt_kind);
	proto_wr_str(w, s->text);
	if (s->n_messages && !s->messages && w->st == CM_OK)
		w->st = CM_EINVAL;
	proto_wr_u32(w, s->n_messages);
	for (uint32_t i = 0; i < s->n_messages && w->st == CM_OK; i++) {
		proto_wr_str(w, s->messages[i].role);
		proto_wr_str(w, s->messages[i].content);
		proto_wr_str(w, s->messages[i].tool_calls);
		proto_wr_str(w, s->messages[i].tool_call_id);
	}
	proto_wr_str(w, s->template_name);
	proto_wr_u8(w, s->constraint_kind);
	proto_wr_str(w, s->constraint);
	proto_wr_u8(w, s->top_logprobs);
	proto_wr_str(w, s->tools);
	proto_wr_u8(w, s->tool_choice);
	proto_wr_str(w, s->tool_name);
	proto_wr_u8(w, s->parallel_tool_calls);
	proto_wr_u8(w, s->think);
	proto_wr_u32(w, s->think_budget);
}

static enum cm_status dec_submit(struct proto_rd *r, struct proto_submit *s,
				 struct cm_buf *scratch)
{
	size_t stop_off = 0, msg_off = 0;
	enum cm_status st;

	proto_rd_str(r, &s->tenant_id);
	proto_rd_digest(r, s->cache_salt);
	proto_rd_str(r, &s->key_id);
	proto_rd_str(r, &s->model);
	s->klass = proto_rd_u8(r);
	s->max_tokens = proto_rd_u32(r);
	s->max_prompt_tokens = proto_rd_u32(r);
	dec_sampling(r, &s->sampling);

	s->n_stop = proto_rd_count(r, 4, CM_LIM_PROTO_STOP_STRINGS_HARD);
	if (r->err != PROTO_ERR_NONE)
		return CM_OK;
	if (s->n_stop) {
		struct proto_str *stop;

		st = proto_scratch_alloc(scratch, s->n_stop * sizeof(*stop), &stop_off);
		if (st != CM_OK)
			return st;
		stop = (struct proto_str *)(cm_buf_data(scratch) + stop_off);
		for (uint32_t i = 0; i < s->n_stop; i++)
			proto_rd_str(r, &stop[i]);
	}

	s->prompt_kind = proto_rd_u8(r);
	proto_rd_str(r, &s->text);

	s->n_messages = proto_rd_count(r, 16, CM_LIM_PROTO_MESSAGES_HARD);
	if (r->err != PROTO_ERR_NONE)
		return CM_OK;
	if (s->n_messages) {
		struct proto_message *msgs;

		st = proto_scratch_alloc(scratch, s->n_messages * sizeof(*msgs), &msg_off);
		if (st != CM_OK)
			return st;
		msgs = (struct proto_message *)(cm_buf_data(scratch) + msg_off);
		for (uint32_t i = 0; i < s->n_messages; i++) {
			proto_rd_str(r, &msgs[i].role);
			proto_rd_str(r, &msgs[i].content);
			proto_rd_str(r, &msgs[i].tool_calls);
			proto_rd_str(r, &msgs[i].tool_call_id);
		}
	}
	proto_rd_str(r, &s->template_name);
	s->constraint_kind = proto_rd_u8(r);
	proto_rd_str(r, &s->constraint);
	s->top_logprobs = proto_rd_u8(r);
	proto_rd_str(r, &s->tools);
	s->tool_choice = proto_rd_u8(r);
	proto_rd_str(r, &s->tool_name);
	s->parallel_tool_calls = proto_rd_u8(r);
	s->think = proto_rd_u8(r);
	s->think_budget = proto_rd_u32(r);

	/* every array is allocated: the scratch no longer moves */
	if (s->n_stop)
		s->stop = (const struct proto_str *)(cm_buf_data(scratch) + stop_off);
	if (s->n_messages)
		s->messages = (const struct proto_message *)(cm_buf_data(scratch) +
							     msg_off);
	return CM_OK;
}

/* ==== CANCEL ===========================================================
 * u8 reason
 */

/* ==== TOKEN ============================================================
 * list<token> (u32 n + per token: u32 id, f32 logprob, str text,
 *              blob piece, u8 n_top + n_top x (u32 id, f32 logprob,
 *              blob piece), (version 4) u8 channel; min 18 bytes each,
 *              12 per alternative)
 */
static void enc_tokens(struct proto_wr *w, const struct proto_tokens *t)
{
	if (t->n && !t->tok && w->st == CM_OK)
		w->st = CM_EINVAL;
	proto_wr_u32(w, t->n);
	for (uint32_t i = 0; i < t->n && w->st == CM_OK; i++) {
		const struct proto_token *k = &t->tok[i];

		if (k->n_top && !k->top && w->st == CM_OK)
			w->st = CM_EINVAL;
		proto_wr_u32(w, k->id);
		proto_wr_f32(w, k->logprob);
		proto_wr_str(w, k->text);
		proto_wr_blob(w, k->piece);
		proto_wr_u8(w, k->n_top);
		for (uint32_t j = 0; j < k->n_top && w->st == CM_OK; j++) {
			proto_wr_u32(w, k->top[j].id);
			proto_wr_f32(w, k->top[j].logprob);
			proto_wr_blob(w, k->top[j].piece);
		}
		proto_wr_u8(w, k->channel);
	}
}

static enum cm_status dec_tokens(struct proto_rd *r, struct proto_tokens *t,
				 struct cm_buf *scratch)
{
	struct proto_token *tok;
	size_t off, n_top = 0, top_off = 0, top_cap;
	enum cm_status st;

	t->n = proto_rd_count(r, 18, CM_LIM_PROTO_TOKENS_PER_FRAME_HARD);
	if (r->err != PROTO_ERR_NONE || t->n == 0)
		return CM_OK;
	/* the alternatives of every token in one array after the tokens:
	 * each takes 12 payload bytes at least, so there are at most
	 * left / 12 of them (checked per token before any is read) */
	top_cap = r->left / 12;
	if (top_cap > (size_t)t->n * PROTO_TOP_LOGPROBS_MAX)
		top_cap = (size_t)t->n * PROTO_TOP_LOGPROBS_MAX;
	st = proto_scratch_alloc(scratch, t->n * sizeof(*tok) + top_cap * sizeof(struct proto_top), &off);
	if (st != CM_OK)
		return st;
	top_off = off + t->n * sizeof(*tok);
	tok = (struct proto_token *)(cm_buf_data(scratch) + off);
	for (uint32_t i = 0; i < t->n && r->err == PROTO_ERR_NONE; i++) {
		struct proto_top *top = (struct proto_top *)(cm_buf_data(scratch) + top_off) + n_top;

		tok[i].id = proto_rd_u32(r);
		tok[i].logprob = proto_rd_f32(r);
		proto_rd_str(r, &tok[i].text);
		proto_rd_blob(r, &tok[i].piece);
		tok[i].n_top = proto_rd_u8(r);
		tok[i].top = NULL;
		if (tok[i].n_top > PROTO_TOP_LOGPROBS_MAX) {
			r->err = PROTO_ERR_VALUE;
			break;
		}
		if (n_top + tok[i].n_top > top_cap) {
			r->err = PROTO_ERR_FIELD_OVERRUN;
			break;
		}
		if (tok[i].n_top)
			tok[i].top = top;
		for (uint32_t j = 0; j < tok[i].n_top; j++) {
			top[j].id = proto_rd_u32(r);
			top[j].logprob = proto_rd_f32(r);
			proto_rd_blob(r, &top[j].piece);
		}
		n_top += tok[i].n_top;
		tok[i].channel = proto_rd_u8(r);
	}
	t->tok = tok;
	return CM_OK;
}

/* ==== DONE =============================================================
 * u8 finish, u32 prompt_tokens, u32 cached_tokens, u32 gen_tokens,
 * u32 preemptions, i64 load_ns, i64 queue_ns, i64 prefill_ns,
 * i64 decode_ns, i64 ttft_ns, bytes32 logits_digest,
 * (version 3) i64 constraint_ns, (version 4) u32 reasoning_tokens
 */
static void enc_done(struct proto_wr *w, const struct proto_done *d)
{
	proto_wr_u8(w, d->finish);
	proto_wr_u32(w, d->prompt_tokens);
	proto_wr_u32(w, d->cached_tokens);
	proto_wr_u32(w, d->gen_tokens);
	proto_wr_u32(w, d->preemptions);
	proto_wr_i64(w, d->load_ns);
	proto_wr_i64(w, d->queue_ns);
	proto_wr_i64(w, d->prefill_ns);
	proto_wr_i64(w, d->decode_ns);
	proto_wr_i64(w, d->ttft_ns);
	proto_wr_digest(w, d->logits_digest);
	proto_wr_i64(w, d->constraint_ns);
	proto_wr_u32(w, d->reasoning_tokens);
}

static void dec_done(struct proto_rd *r, struct proto_done *d)
{
	d->finish = proto_rd_u8(r);
	d->prompt_tokens = proto_rd_u32(r);
	d->cached_tokens = proto_rd_u32(r);
	d->gen_tokens = proto_rd_u32(r);
	d->preemptions = proto_rd_u32(r);
	d->load_ns = proto_rd_i64(r);
	d->queue_ns = proto_rd_i64(r);
	d->prefill_ns = proto_rd_i64(r);
	d->decode_ns = proto_rd_i64(r);
	d->ttft_ns = proto_rd_i64(r);
	proto_rd_digest(r, d->logits_digest);
	d->constraint_ns = proto_rd_i64(r);
	d->reasoning_tokens = proto_rd_u32(r);
}

/* ==== ERROR ============================================================
 * u16 code, str message
 */

/* ==== STATS ============================================================
 * u32 queue_depth, u32 running, u32 step_batch, u32 kv_blocks_used,
 * u32 kv_blocks_free, u32 kv_blocks_cached, u64 prefix_hit_tokens,
 * u64 prompt_tokens, u64 gen_tokens, f32 prefill_tps, f32 decode_tps,
 * u64 device_mem_used, u64 device_mem_total, u8 draining,
 * u32 n_hist (== PROTO_HIST_BUCKETS), u64 ttft_hist[n_hist],
 * u64 itl_hist[n_hist]
 */
static void enc_stats(struct proto_wr *w, const struct proto_stats *s)
{
	proto_wr_u32(w, s->queue_depth);
	proto_wr_u32(w, s->running);
	proto_wr_u32(w, s->step_batch);
	proto_wr_u32(w, s->kv_blocks_used);
	proto_wr_u32(w, s->kv_blocks_free);
	proto_wr_u32(w, s->kv_blocks_cached);
	proto_wr_u64(w, s->prefix_hit_tokens);
	proto_wr_u64(w, s->prompt_tokens);
	proto_wr_u64(w, s->gen_tokens);
	proto_wr_f32(w, s->prefill_tps);
	proto_wr_f32(w, s->decode_tps);
	proto_wr_u64(w, s->device_mem_used);
	proto_wr_u64(w, s->device_mem_total);
	proto_wr_u8(w, s->draining);
	proto_wr_u32(w, s->n_hist);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		proto_wr_u64(w, s->ttft_hist[i]);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		proto_wr_u64(w, s->itl_hist[i]);
}

static void dec_stats(struct proto_rd *r, struct proto_stats *s)
{
	s->queue_depth = proto_rd_u32(r);
	s->running = proto_rd_u32(r);
	s->step_batch = proto_rd_u32(r);
	s->kv_blocks_used = proto_rd_u32(r);
	s->kv_blocks_free = proto_rd_u32(r);
	s->kv_blocks_cached = proto_rd_u32(r);
	s->prefix_hit_tokens = proto_rd_u64(r);
	s->prompt_tokens = proto_rd_u64(r);
	s->gen_tokens = proto_rd_u64(r);
	s->prefill_tps = proto_rd_f32(r);
	s->decode_tps = proto_rd_f32(r);
	s->device_mem_used = proto_rd_u64(r);
	s->device_mem_total = proto_rd_u64(r);
	s->draining = proto_rd_u8(r);
	s->n_hist = proto_rd_u32(r);
	if (r->err == PROTO_ERR_NONE && s->n_hist != PROTO_HIST_BUCKETS) {
		/* the only layout of version 1; nothing after it can be read */
		r->err = PROTO_ERR_VALUE;
		return;
	}
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		s->ttft_hist[i] = proto_rd_u64(r);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		s->itl_hist[i] = proto_rd_u64(r);
}

/* ==== PING / PONG / DRAIN ==============================================
 * PING:  u64 nonce
 * PONG:  u64 nonce, u8 ok, u32 tokens, i64 gen_ns
 * DRAIN: u32 timeout_ms
 */

/* ==== frames =========================================================== */

static void enc_payload(struct proto_wr *w, const struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_HELLO:
		enc_hello(w, &m->u.hello);
		break;
	case PROTO_PING:
		proto_wr_u64(w, m->u.ping.nonce);
		break;
	case PROTO_PONG:
		proto_wr_u64(w, m->u.pong.nonce);
		proto_wr_u8(w, m->u.pong.ok);
		proto_wr_u32(w, m->u.pong.tokens);
		proto_wr_i64(w, m->u.pong.gen_ns);
		break;
	case PROTO_DRAIN:
		proto_wr_u32(w, m->u.drain.timeout_ms);
		break;
	case PROTO_ERROR:
		proto_wr_u16(w, m->u.error.code);
		proto_wr_str(w, m->u.error.message);
		break;
	case PROTO_SUBMIT:
		enc_submit(w, &m->u.submit);
		break;
	case PROTO_CANCEL:
		proto_wr_u8(w, m->u.cancel.reason);
		break;
	case PROTO_EMBED:
		proto_enc_embed(w, &m->u.embed);
		break;
	case PROTO_EMBEDDING:
		proto_enc_embedding(w, &m->u.embedding);
		break;
	case PROTO_TOKEN:
		enc_tokens(w, &m->u.tokens);
		break;
	case PROTO_DONE:
		enc_done(w, &m->u.done);
		break;
	case PROTO_STATS:
		enc_stats(w, &m->u.stats);
		break;
	}
}

static enum cm_status dec_payload(struct proto_rd *r, struct proto_msg *m,
				  struct cm_buf *scratch)
{
	switch (m->type) {
	case PROTO_HELLO:
		dec_hello(r, &m->u.hello);
		break;
	case PROTO_PING:
		m->u.ping.nonce = proto_rd_u64(r);
		break;
	case PROTO_PONG:
		m->u.pong.nonce = proto_rd_u64(r);
		m->u.pong.ok = proto_rd_u8(r);
		m->u.pong.tokens = proto_rd_u32(r);
		m->u.pong.gen_ns = proto_rd_i64(r);
		break;
	case PROTO_DRAIN:
		m->u.drain.timeout_ms = proto_rd_u32(r);
		break;
	case PROTO_ERROR:
		m->u.error.code = proto_rd_u16(r);
		proto_rd_str(r, &m->u.error.message);
		break;
	case PROTO_SUBMIT:
		return dec_submit(r, &m->u.submit, scratch);
	case PROTO_CANCEL:
		m->u.cancel.reason = proto_rd_u8(r);
		break;
	case PROTO_EMBED:
		return proto_dec_embed(r, &m->u.embed, scratch);
	case PROTO_EMBEDDING:
		return proto_dec_embedding(r, &m->u.embedding, scratch);
	case PROTO_TOKEN:
		return dec_tokens(r, &m->u.tokens, scratch);
	case PROTO_DONE:
		dec_done(r, &m->u.done);
		break;
	case PROTO_STATS:
		dec_stats(r, &m->u.stats);
		break;
	}
	return CM_OK;
}

enum cm_status proto_encode(struct cm_buf *out, const struct proto_msg *msg,
			    uint32_t max_frame)
{
	size_t start = cm_buf_len(out);
	struct proto_wr w = { .b = out, .st = CM_OK };
	uint8_t *len_at;

	if (max_frame > CM_LIM_PROTO_FRAME_BYTES_HARD)
		max_frame = CM_LIM_PROTO_FRAME_BYTES_HARD;
	if (!type_known(msg->type) || (msg->flags & ~type_flags(msg->type)) ||
	    check_values(msg) != PROTO_ERR_NONE)
		return CM_EINVAL;
	w.limit = start + PROTO_HEADER_LEN + (size_t)max_frame;
	proto_wr_u32(&w, PROTO_MAGIC);
	proto_wr_u16(&w, PROTO_VERSION);
	proto_wr_u16(&w, msg->type);
	proto_wr_u32(&w, msg->flags);
	proto_wr_u32(&w, 0); /* payload_len, patched below */
	proto_wr_u64(&w, msg->request_id);
	enc_payload(&w, msg);
	if (w.st != CM_OK) {
		cm_buf_truncate(out, start);
		return w.st;
	}
	len_at = cm_buf_data(out) + start + 12;
	{
		uint32_t plen = (uint32_t)(cm_buf_len(out) - start - PROTO_HEADER_LEN);

		for (int i = 0; i < 4; i++)
			len_at[i] = (uint8_t)(plen >> (8 * i));
	}
	return CM_OK;
}

enum cm_status proto_decode_frame(const uint8_t *frame, size_t len,
				  uint32_t max_frame, struct proto_msg *msg,
				  struct cm_buf *scratch, enum proto_error *err)
{
	struct proto_header h;
	struct proto_rd r;
	enum proto_error e = PROTO_ERR_NONE;
	enum cm_status st = CM_OK;

	memset(msg, 0, sizeof(*msg));
	cm_buf_reset(scratch);
	if (max_frame > CM_LIM_PROTO_FRAME_BYTES_HARD)
		max_frame = CM_LIM_PROTO_FRAME_BYTES_HARD;
	if (len < PROTO_HEADER_LEN) {
		e = PROTO_ERR_FIELD_OVERRUN;
		goto out;
	}
	e = proto_header_parse(frame, max_frame, &h);
	if (e != PROTO_ERR_NONE)
		goto out;
	if (h.payload_len > len - PROTO_HEADER_LEN) {
		e = PROTO_ERR_FIELD_OVERRUN;
		goto out;
	}
	if (h.payload_len < len - PROTO_HEADER_LEN) {
		e = PROTO_ERR_TRAILING;
		goto out;
	}
	msg->type = h.type;
	msg->flags = h.flags;
	msg->request_id = h.request_id;
	r.p = frame + PROTO_HEADER_LEN;
	r.left = h.payload_len;
	r.err = PROTO_ERR_NONE;
	st = dec_payload(&r, msg, scratch);
	if (st != CM_OK)
		goto out;
	e = r.err;
	if (e != PROTO_ERR_NONE)
		goto out;
	if (r.left) {
		e = PROTO_ERR_TRAILING;
		goto out;
	}
	e = check_values(msg);
out:
	if (st == CM_OK && e != PROTO_ERR_NONE)
		st = CM_EPROTO;
	if (st != CM_OK) {
		memset(msg, 0, sizeof(*msg));
		cm_buf_reset(scratch);
	}
	if (err)
		*err = e;
	return st;
}
