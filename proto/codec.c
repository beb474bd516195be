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
 *    rd_take(), which checks the bytes left first;
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
	case PROTO_TOKEN:
	case PROTO_DONE:
	case PROTO_STATS:
		return 1;
	}
	return 0;
}

/* Flag bits defined for a type; every other bit must be 0. */
static uint32_t type_flags(uint32_t t)
{
	return t == PROTO_SUBMIT ? PROTO_SUBMIT_FLAGS_ALL : 0;
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
	case PROTO_TOKEN:
	case PROTO_DONE:
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

/* ==== writer =========================================================== */

/*
 * Sticky-status writer: after the first failure every write is a no-op, so
 * the encoders write their fields straight through and check once.
 * `limit` is the buffer length the frame may not exceed (max_frame).
 */
struct wr {
	struct cm_buf *b;
	size_t limit;
	enum cm_status st;
};

static void wr_bytes(struct wr *w, const void *p, size_t n)
{
	if (w->st != CM_OK || n == 0)
		return;
	if (n > w->limit - cm_buf_len(w->b)) {
		w->st = CM_ELIMIT;
		return;
	}
	w->st = cm_buf_append(w->b, p, n);
}

static void wr_u8(struct wr *w, uint8_t v)
{
	wr_bytes(w, &v, 1);
}

static void wr_u16(struct wr *w, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	wr_bytes(w, p, 2);
}

static void wr_u32(struct wr *w, uint32_t v)
{
	uint8_t p[4];

	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	wr_bytes(w, p, 4);
}

static void wr_u64(struct wr *w, uint64_t v)
{
	uint8_t p[8];

	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	wr_bytes(w, p, 8);
}

static void wr_i64(struct wr *w, int64_t v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	wr_u64(w, u);
}

static void wr_f32(struct wr *w, float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	wr_u32(w, u);
}

static void wr_digest(struct wr *w, const uint8_t d[PROTO_DIGEST_LEN])
{
	wr_bytes(w, d, PROTO_DIGEST_LEN);
}

/* str: u32 length + bytes; refuses a NULL pointer with a length and bad UTF-8. */
static void wr_str(struct wr *w, struct proto_str s)
{
	const char *p = s.ptr ? s.ptr : "";

	if (w->st != CM_OK)
		return;
	if ((s.len && !s.ptr) || !cm_utf8_valid(p, s.len)) {
		w->st = CM_EINVAL;
		return;
	}
	wr_u32(w, s.len);
	wr_bytes(w, p, s.len);
}

/* blob: u32 length + raw bytes (a token's piece need not be UTF-8). */
static void wr_blob(struct wr *w, struct proto_str s)
{
	if (w->st == CM_OK && s.len && !s.ptr)
		w->st = CM_EINVAL;
	wr_u32(w, s.len);
	wr_bytes(w, s.ptr, s.len);
}

/* ==== reader =========================================================== */

/*
 * Sticky-error reader over one payload: the first failure is kept in err,
 * later reads return zeros, so the decoders read their fields straight
 * through and check once (and before every allocation).
 */
struct rd {
	const uint8_t *p;
	size_t left;
	enum proto_error err;
};

static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *q;

	if (r->err != PROTO_ERR_NONE)
		return NULL;
	if (n > r->left) {
		r->err = PROTO_ERR_FIELD_OVERRUN;
		return NULL;
	}
	q = r->p;
	r->p += n;
	r->left -= n;
	return q;
}

static uint8_t rd_u8(struct rd *r)
{
	const uint8_t *q = rd_take(r, 1);

	return q ? q[0] : 0;
}

static uint16_t rd_u16(struct rd *r)
{
	const uint8_t *q = rd_take(r, 2);

	return q ? cm_le16(q) : 0;
}

static uint32_t rd_u32(struct rd *r)
{
	const uint8_t *q = rd_take(r, 4);

	return q ? cm_le32(q) : 0;
}

static uint64_t rd_u64(struct rd *r)
{
	const uint8_t *q = rd_take(r, 8);

	return q ? cm_le64(q) : 0;
}

static int64_t rd_i64(struct rd *r)
{
	uint64_t u = rd_u64(r);
	int64_t v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static float rd_f32(struct rd *r)
{
	uint32_t u = rd_u32(r);
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static void rd_digest(struct rd *r, uint8_t out[PROTO_DIGEST_LEN])
{
	const uint8_t *q = rd_take(r, PROTO_DIGEST_LEN);

	if (q)
		memcpy(out, q, PROTO_DIGEST_LEN);
	else
		memset(out, 0, PROTO_DIGEST_LEN);
}

/* str: borrowed from the frame; an empty string points to a static "". */
static void rd_str(struct rd *r, struct proto_str *s)
{
	uint32_t n = rd_u32(r);
	const uint8_t *q = rd_take(r, n);

	s->ptr = "";
	s->len = 0;
	if (!q)
		return;
	if (!cm_utf8_valid(q, n)) {
		r->err = PROTO_ERR_UTF8;
		return;
	}
	if (n) {
		s->ptr = (const char *)q;
		s->len = n;
	}
}

static void rd_blob(struct rd *r, struct proto_str *s)
{
	uint32_t n = rd_u32(r);
	const uint8_t *q = rd_take(r, n);

	s->ptr = "";
	s->len = 0;
	if (q && n) {
		s->ptr = (const char *)q;
		s->len = n;
	}
}

/*
 * list count: refused when count x min_elem (the smallest encoding of one
 * element) exceeds the bytes left, then when above `limit`.
 */
static uint32_t rd_count(struct rd *r, size_t min_elem, uint32_t limit)
{
	uint32_t n = rd_u32(r);

	if (r->err != PROTO_ERR_NONE)
		return 0;
	if ((uint64_t)n * min_elem > r->left) {
		r->err = PROTO_ERR_COUNT_OVERRUN;
		return 0;
	}
	if (n > limit) {
		r->err = PROTO_ERR_COUNT_LIMIT;
		return 0;
	}
	return n;
}

#define SCRATCH_ALIGN 16

/*
 * Appends `bytes` zeroed bytes to scratch at an offset aligned for any
 * struct; returns the offset (pointers are formed only once all arrays of a
 * message are allocated, since a later append may move the buffer).
 */
static enum cm_status scratch_alloc(struct cm_buf *s, size_t bytes, size_t *off)
{
	size_t pad = (SCRATCH_ALIGN - cm_buf_len(s) % SCRATCH_ALIGN) % SCRATCH_ALIGN;
	enum cm_status st = cm_buf_reserve(s, pad + bytes);

	if (st != CM_OK)
		return st;
	memset(cm_buf_tail(s), 0, pad + bytes);
	*off = cm_buf_len(s) + pad;
	cm_buf_commit(s, pad + bytes);
	return CM_OK;
}

/* ==== HELLO ============================================================
 * u16 proto_version, str worker_name, str model_name,
 * bytes32 model_sha256, u32 context_len, u32 vocab_size, u32 max_seqs,
 * u32 kv_blocks_total, u32 kv_block_tokens, str backend, str device,
 * str engine_version, u64 model_bytes, i64 model_mtime_s, str architecture,
 * u64 parameter_count, str file_type
 */
static void enc_hello(struct wr *w, const struct proto_hello *h)
{
	wr_u16(w, h->proto_version);
	wr_str(w, h->worker_name);
	wr_str(w, h->model_name);
	wr_digest(w, h->model_sha256);
	wr_u32(w, h->context_len);
	wr_u32(w, h->vocab_size);
	wr_u32(w, h->max_seqs);
	wr_u32(w, h->kv_blocks_total);
	wr_u32(w, h->kv_block_tokens);
	wr_str(w, h->backend);
	wr_str(w, h->device);
	wr_str(w, h->engine_version);
	wr_u64(w, h->model_bytes);
	wr_i64(w, h->model_mtime_s);
	wr_str(w, h->architecture);
	wr_u64(w, h->parameter_count);
	wr_str(w, h->file_type);
}

static void dec_hello(struct rd *r, struct proto_hello *h)
{
	h->proto_version = rd_u16(r);
	rd_str(r, &h->worker_name);
	rd_str(r, &h->model_name);
	rd_digest(r, h->model_sha256);
	h->context_len = rd_u32(r);
	h->vocab_size = rd_u32(r);
	h->max_seqs = rd_u32(r);
	h->kv_blocks_total = rd_u32(r);
	h->kv_block_tokens = rd_u32(r);
	rd_str(r, &h->backend);
	rd_str(r, &h->device);
	rd_str(r, &h->engine_version);
	h->model_bytes = rd_u64(r);
	h->model_mtime_s = rd_i64(r);
	rd_str(r, &h->architecture);
	h->parameter_count = rd_u64(r);
	rd_str(r, &h->file_type);
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
static void enc_sampling(struct wr *w, const struct proto_sampling *s)
{
	wr_f32(w, s->temperature);
	wr_u32(w, s->top_k);
	wr_f32(w, s->top_p);
	wr_f32(w, s->min_p);
	wr_f32(w, s->repeat_penalty);
	wr_u32(w, s->repeat_last_n);
	wr_f32(w, s->presence_penalty);
	wr_f32(w, s->frequency_penalty);
	wr_u64(w, s->seed);
}

static void dec_sampling(struct rd *r, struct proto_sampling *s)
{
	s->temperature = rd_f32(r);
	s->top_k = rd_u32(r);
	s->top_p = rd_f32(r);
	s->min_p = rd_f32(r);
	s->repeat_penalty = rd_f32(r);
	s->repeat_last_n = rd_u32(r);
	s->presence_penalty = rd_f32(r);
	s->frequency_penalty = rd_f32(r);
	s->seed = rd_u64(r);
}

static void enc_submit(struct wr *w, const struct proto_submit *s)
{
	wr_str(w, s->tenant_id);
	wr_digest(w, s->cache_salt);
	wr_str(w, s->key_id);
	wr_str(w, s->model);
	wr_u8(w, s->klass);
	wr_u32(w, s->max_tokens);
	wr_u32(w, s->max_prompt_tokens);
	enc_sampling(w, &s->sampling);
	if (s->n_stop && !s->stop && w->st == CM_OK)
		w->st = CM_EINVAL;
	wr_u32(w, s->n_stop);
	for (uint32_t i = 0; i < s->n_stop && w->st == CM_OK; i++)
		wr_str(w, s->stop[i]);
	wr_u8(w, s->prompt_kind);
	wr_str(w, s->text);
	if (s->n_messages && !s->messages && w->st == CM_OK)
		w->st = CM_EINVAL;
	wr_u32(w, s->n_messages);
	for (uint32_t i = 0; i < s->n_messages && w->st == CM_OK; i++) {
		wr_str(w, s->messages[i].role);
		wr_str(w, s->messages[i].content);
		wr_str(w, s->messages[i].tool_calls);
		wr_str(w, s->messages[i].tool_call_id);
	}
	wr_str(w, s->template_name);
	wr_u8(w, s->constraint_kind);
	wr_str(w, s->constraint);
	wr_u8(w, s->top_logprobs);
	wr_str(w, s->tools);
	wr_u8(w, s->tool_choice);
	wr_str(w, s->tool_name);
	wr_u8(w, s->parallel_tool_calls);
	wr_u8(w, s->think);
	wr_u32(w, s->think_budget);
}

static enum cm_status dec_submit(struct rd *r, struct proto_submit *s,
				 struct cm_buf *scratch)
{
	size_t stop_off = 0, msg_off = 0;
	enum cm_status st;

	rd_str(r, &s->tenant_id);
	rd_digest(r, s->cache_salt);
	rd_str(r, &s->key_id);
	rd_str(r, &s->model);
	s->klass = rd_u8(r);
	s->max_tokens = rd_u32(r);
	s->max_prompt_tokens = rd_u32(r);
	dec_sampling(r, &s->sampling);

	s->n_stop = rd_count(r, 4, CM_LIM_PROTO_STOP_STRINGS_HARD);
	if (r->err != PROTO_ERR_NONE)
		return CM_OK;
	if (s->n_stop) {
		struct proto_str *stop;

		st = scratch_alloc(scratch, s->n_stop * sizeof(*stop), &stop_off);
		if (st != CM_OK)
			return st;
		stop = (struct proto_str *)(cm_buf_data(scratch) + stop_off);
		for (uint32_t i = 0; i < s->n_stop; i++)
			rd_str(r, &stop[i]);
	}

	s->prompt_kind = rd_u8(r);
	rd_str(r, &s->text);

	s->n_messages = rd_count(r, 16, CM_LIM_PROTO_MESSAGES_HARD);
	if (r->err != PROTO_ERR_NONE)
		return CM_OK;
	if (s->n_messages) {
		struct proto_message *msgs;

		st = scratch_alloc(scratch, s->n_messages * sizeof(*msgs), &msg_off);
		if (st != CM_OK)
			return st;
		msgs = (struct proto_message *)(cm_buf_data(scratch) + msg_off);
		for (uint32_t i = 0; i < s->n_messages; i++) {
			rd_str(r, &msgs[i].role);
			rd_str(r, &msgs[i].content);
			rd_str(r, &msgs[i].tool_calls);
			rd_str(r, &msgs[i].tool_call_id);
		}
	}
	rd_str(r, &s->template_name);
	s->constraint_kind = rd_u8(r);
	rd_str(r, &s->constraint);
	s->top_logprobs = rd_u8(r);
	rd_str(r, &s->tools);
	s->tool_choice = rd_u8(r);
	rd_str(r, &s->tool_name);
	s->parallel_tool_calls = rd_u8(r);
	s->think = rd_u8(r);
	s->think_budget = rd_u32(r);

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
static void enc_tokens(struct wr *w, const struct proto_tokens *t)
{
	if (t->n && !t->tok && w->st == CM_OK)
		w->st = CM_EINVAL;
	wr_u32(w, t->n);
	for (uint32_t i = 0; i < t->n && w->st == CM_OK; i++) {
		const struct proto_token *k = &t->tok[i];

		if (k->n_top && !k->top && w->st == CM_OK)
			w->st = CM_EINVAL;
		wr_u32(w, k->id);
		wr_f32(w, k->logprob);
		wr_str(w, k->text);
		wr_blob(w, k->piece);
		wr_u8(w, k->n_top);
		for (uint32_t j = 0; j < k->n_top && w->st == CM_OK; j++) {
			wr_u32(w, k->top[j].id);
			wr_f32(w, k->top[j].logprob);
			wr_blob(w, k->top[j].piece);
		}
		wr_u8(w, k->channel);
	}
}

static enum cm_status dec_tokens(struct rd *r, struct proto_tokens *t,
				 struct cm_buf *scratch)
{
	struct proto_token *tok;
	size_t off, n_top = 0, top_off = 0, top_cap;
	enum cm_status st;

	t->n = rd_count(r, 18, CM_LIM_PROTO_TOKENS_PER_FRAME_HARD);
	if (r->err != PROTO_ERR_NONE || t->n == 0)
		return CM_OK;
	/* the alternatives of every token in one array after the tokens:
	 * each takes 12 payload bytes at least, so there are at most
	 * left / 12 of them (checked per token before any is read) */
	top_cap = r->left / 12;
	if (top_cap > (size_t)t->n * PROTO_TOP_LOGPROBS_MAX)
		top_cap = (size_t)t->n * PROTO_TOP_LOGPROBS_MAX;
	st = scratch_alloc(scratch, t->n * sizeof(*tok) + top_cap * sizeof(struct proto_top), &off);
	if (st != CM_OK)
		return st;
	top_off = off + t->n * sizeof(*tok);
	tok = (struct proto_token *)(cm_buf_data(scratch) + off);
	for (uint32_t i = 0; i < t->n && r->err == PROTO_ERR_NONE; i++) {
		struct proto_top *top = (struct proto_top *)(cm_buf_data(scratch) + top_off) + n_top;

		tok[i].id = rd_u32(r);
		tok[i].logprob = rd_f32(r);
		rd_str(r, &tok[i].text);
		rd_blob(r, &tok[i].piece);
		tok[i].n_top = rd_u8(r);
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
			top[j].id = rd_u32(r);
			top[j].logprob = rd_f32(r);
			rd_blob(r, &top[j].piece);
		}
		n_top += tok[i].n_top;
		tok[i].channel = rd_u8(r);
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
static void enc_done(struct wr *w, const struct proto_done *d)
{
	wr_u8(w, d->finish);
	wr_u32(w, d->prompt_tokens);
	wr_u32(w, d->cached_tokens);
	wr_u32(w, d->gen_tokens);
	wr_u32(w, d->preemptions);
	wr_i64(w, d->load_ns);
	wr_i64(w, d->queue_ns);
	wr_i64(w, d->prefill_ns);
	wr_i64(w, d->decode_ns);
	wr_i64(w, d->ttft_ns);
	wr_digest(w, d->logits_digest);
	wr_i64(w, d->constraint_ns);
	wr_u32(w, d->reasoning_tokens);
}

static void dec_done(struct rd *r, struct proto_done *d)
{
	d->finish = rd_u8(r);
	d->prompt_tokens = rd_u32(r);
	d->cached_tokens = rd_u32(r);
	d->gen_tokens = rd_u32(r);
	d->preemptions = rd_u32(r);
	d->load_ns = rd_i64(r);
	d->queue_ns = rd_i64(r);
	d->prefill_ns = rd_i64(r);
	d->decode_ns = rd_i64(r);
	d->ttft_ns = rd_i64(r);
	rd_digest(r, d->logits_digest);
	d->constraint_ns = rd_i64(r);
	d->reasoning_tokens = rd_u32(r);
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
static void enc_stats(struct wr *w, const struct proto_stats *s)
{
	wr_u32(w, s->queue_depth);
	wr_u32(w, s->running);
	wr_u32(w, s->step_batch);
	wr_u32(w, s->kv_blocks_used);
	wr_u32(w, s->kv_blocks_free);
	wr_u32(w, s->kv_blocks_cached);
	wr_u64(w, s->prefix_hit_tokens);
	wr_u64(w, s->prompt_tokens);
	wr_u64(w, s->gen_tokens);
	wr_f32(w, s->prefill_tps);
	wr_f32(w, s->decode_tps);
	wr_u64(w, s->device_mem_used);
	wr_u64(w, s->device_mem_total);
	wr_u8(w, s->draining);
	wr_u32(w, s->n_hist);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		wr_u64(w, s->ttft_hist[i]);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		wr_u64(w, s->itl_hist[i]);
}

static void dec_stats(struct rd *r, struct proto_stats *s)
{
	s->queue_depth = rd_u32(r);
	s->running = rd_u32(r);
	s->step_batch = rd_u32(r);
	s->kv_blocks_used = rd_u32(r);
	s->kv_blocks_free = rd_u32(r);
	s->kv_blocks_cached = rd_u32(r);
	s->prefix_hit_tokens = rd_u64(r);
	s->prompt_tokens = rd_u64(r);
	s->gen_tokens = rd_u64(r);
	s->prefill_tps = rd_f32(r);
	s->decode_tps = rd_f32(r);
	s->device_mem_used = rd_u64(r);
	s->device_mem_total = rd_u64(r);
	s->draining = rd_u8(r);
	s->n_hist = rd_u32(r);
	if (r->err == PROTO_ERR_NONE && s->n_hist != PROTO_HIST_BUCKETS) {
		/* the only layout of version 1; nothing after it can be read */
		r->err = PROTO_ERR_VALUE;
		return;
	}
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		s->ttft_hist[i] = rd_u64(r);
	for (int i = 0; i < PROTO_HIST_BUCKETS; i++)
		s->itl_hist[i] = rd_u64(r);
}

/* ==== PING / PONG / DRAIN ==============================================
 * PING:  u64 nonce
 * PONG:  u64 nonce, u8 ok, u32 tokens, i64 gen_ns
 * DRAIN: u32 timeout_ms
 */

/* ==== frames =========================================================== */

static void enc_payload(struct wr *w, const struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_HELLO:
		enc_hello(w, &m->u.hello);
		break;
	case PROTO_PING:
		wr_u64(w, m->u.ping.nonce);
		break;
	case PROTO_PONG:
		wr_u64(w, m->u.pong.nonce);
		wr_u8(w, m->u.pong.ok);
		wr_u32(w, m->u.pong.tokens);
		wr_i64(w, m->u.pong.gen_ns);
		break;
	case PROTO_DRAIN:
		wr_u32(w, m->u.drain.timeout_ms);
		break;
	case PROTO_ERROR:
		wr_u16(w, m->u.error.code);
		wr_str(w, m->u.error.message);
		break;
	case PROTO_SUBMIT:
		enc_submit(w, &m->u.submit);
		break;
	case PROTO_CANCEL:
		wr_u8(w, m->u.cancel.reason);
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

static enum cm_status dec_payload(struct rd *r, struct proto_msg *m,
				  struct cm_buf *scratch)
{
	switch (m->type) {
	case PROTO_HELLO:
		dec_hello(r, &m->u.hello);
		break;
	case PROTO_PING:
		m->u.ping.nonce = rd_u64(r);
		break;
	case PROTO_PONG:
		m->u.pong.nonce = rd_u64(r);
		m->u.pong.ok = rd_u8(r);
		m->u.pong.tokens = rd_u32(r);
		m->u.pong.gen_ns = rd_i64(r);
		break;
	case PROTO_DRAIN:
		m->u.drain.timeout_ms = rd_u32(r);
		break;
	case PROTO_ERROR:
		m->u.error.code = rd_u16(r);
		rd_str(r, &m->u.error.message);
		break;
	case PROTO_SUBMIT:
		return dec_submit(r, &m->u.submit, scratch);
	case PROTO_CANCEL:
		m->u.cancel.reason = rd_u8(r);
		break;
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
	struct wr w = { .b = out, .st = CM_OK };
	uint8_t *len_at;

	if (max_frame > CM_LIM_PROTO_FRAME_BYTES_HARD)
		max_frame = CM_LIM_PROTO_FRAME_BYTES_HARD;
	if (!type_known(msg->type) || (msg->flags & ~type_flags(msg->type)) ||
	    check_values(msg) != PROTO_ERR_NONE)
		return CM_EINVAL;
	w.limit = start + PROTO_HEADER_LEN + (size_t)max_frame;
	wr_u32(&w, PROTO_MAGIC);
	wr_u16(&w, PROTO_VERSION);
	wr_u16(&w, msg->type);
	wr_u32(&w, msg->flags);
	wr_u32(&w, 0); /* payload_len, patched below */
	wr_u64(&w, msg->request_id);
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
	struct rd r;
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
