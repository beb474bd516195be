/*
 * pclient.c - blocking proto/ client (see pclient.h).
 */
#include "tests/integration/pclient.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"

struct pc_conn {
	int fd;
	struct proto_decoder *dec;
	struct cm_buf out;
};

struct pc_conn *pc_connect(const char *path, int timeout_ms)
{
	int64_t deadline = cm_mono_ns() + (int64_t)timeout_ms * CM_NS_PER_MS;
	struct sockaddr_un sa;
	struct pc_conn *c;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
	for (;;) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			c = calloc(1, sizeof(*c));
			c->fd = fd;
			c->dec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES);
			cm_buf_init(&c->out, CM_LIM_PROTO_FRAME_BYTES_HARD);
			return c;
		}
		if (fd >= 0)
			close(fd);
		if (cm_mono_ns() > deadline)
			return NULL;
		/* the worker is still loading: wait on nothing but time, bounded */
		poll(NULL, 0, 20);
	}
}

void pc_close(struct pc_conn *c)
{
	if (!c)
		return;
	close(c->fd);
	proto_decoder_free(c->dec);
	cm_buf_deinit(&c->out);
	free(c);
}

int pc_fd(const struct pc_conn *c)
{
	return c->fd;
}

int pc_send_raw(struct pc_conn *c, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = write(c->fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int pc_send(struct pc_conn *c, const struct proto_msg *m)
{
	cm_buf_reset(&c->out);
	if (proto_encode(&c->out, m, CM_LIM_PROTO_FRAME_BYTES) != CM_OK)
		return -1;
	return pc_send_raw(c, cm_buf_data(&c->out), cm_buf_len(&c->out));
}

static void copy_event(struct pc_event *ev, const struct proto_msg *m)
{
	memset(ev, 0, sizeof(*ev));
	ev->type = m->type;
	ev->request_id = m->request_id;
	switch (m->type) {
	case PROTO_TOKEN:
		for (uint32_t i = 0; i < m->u.tokens.n; i++) {
			const struct proto_token *t = &m->u.tokens.tok[i];
			char *dst = t->channel == PROTO_CH_TOOL_CALL ? ev->calls
				    : t->channel == PROTO_CH_REASONING ? ev->reasoning : ev->text;
			uint32_t *len = t->channel == PROTO_CH_TOOL_CALL ? &ev->calls_len
					: t->channel == PROTO_CH_REASONING ? &ev->reasoning_len : &ev->text_len;
			uint32_t cap = t->channel == PROTO_CH_TOOL_CALL ? (uint32_t)sizeof(ev->calls)
				       : t->channel == PROTO_CH_REASONING ? (uint32_t)sizeof(ev->reasoning)
									  : (uint32_t)sizeof(ev->text);
			uint32_t room = cap - 2 - *len;
			uint32_t n = t->text.len < room ? t->text.len : room;

			memcpy(dst + *len, t->text.ptr, n);
			*len += n;
			if (t->channel == PROTO_CH_TOOL_CALL)
				dst[(*len)++] = '\n';
			if (t->id != UINT32_MAX && ev->n_ids < 64)
				ev->ids[ev->n_ids++] = t->id;
		}
		break;
	case PROTO_DONE:
		ev->done = m->u.done;
		break;
	case PROTO_ERROR:
		ev->err_code = m->u.error.code;
		snprintf(ev->err_msg, sizeof(ev->err_msg), "%.*s", (int)m->u.error.message.len,
			 m->u.error.message.ptr);
		break;
	case PROTO_STATS:
		ev->stats = m->u.stats;
		break;
	case PROTO_PONG:
		ev->pong = m->u.pong;
		break;
	case PROTO_HELLO:
		ev->hello_ctx = m->u.hello.context_len;
		ev->hello_vocab = m->u.hello.vocab_size;
		ev->hello_blocks = m->u.hello.kv_blocks_total;
		ev->hello_bt = m->u.hello.kv_block_tokens;
		snprintf(ev->hello_model, sizeof(ev->hello_model), "%.*s",
			 (int)m->u.hello.model_name.len, m->u.hello.model_name.ptr);
		ev->hello_embedding_dim = m->u.hello.embedding_dim;
		ev->hello_generates = m->u.hello.generates;
		break;
	case PROTO_EMBEDDING:
		ev->emb_index = m->u.embedding.index;
		ev->emb_tokens = m->u.embedding.n_tokens;
		ev->emb_truncated = m->u.embedding.truncated;
		ev->emb_n = m->u.embedding.n_values;
		memcpy(ev->emb, m->u.embedding.values,
		       (ev->emb_n < PC_EMB_MAX ? ev->emb_n : PC_EMB_MAX) * sizeof(float));
		break;
	default:
		break;
	}
}

int pc_next(struct pc_conn *c, struct pc_event *ev, int timeout_ms)
{
	int64_t deadline = cm_mono_ns() + (int64_t)timeout_ms * CM_NS_PER_MS;

	for (;;) {
		struct proto_msg m;
		enum cm_status st = proto_decoder_next(c->dec, &m);
		struct pollfd p = { c->fd, POLLIN, 0 };
		uint8_t buf[65536];
		int64_t left;
		ssize_t n;

		if (st == CM_OK) {
			copy_event(ev, &m);
			return 1;
		}
		if (st != CM_AGAIN)
			return -1;
		left = (deadline - cm_mono_ns()) / CM_NS_PER_MS;
		if (left <= 0)
			return 0;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		n = read(c->fd, buf, sizeof(buf));
		if (n <= 0)
			return -1;
		if (proto_decoder_feed(c->dec, buf, (size_t)n) != CM_OK)
			return -1;
	}
}

void pc_submit_init(struct proto_msg *m, struct proto_submit *sb, uint64_t id,
		    const char *text, uint32_t max_tokens, uint8_t salt_byte)
{
	memset(m, 0, sizeof(*m));
	memset(sb, 0, sizeof(*sb));
	m->type = PROTO_SUBMIT;
	m->request_id = id;
	m->flags = PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_HAS_SEED;
	sb->tenant_id.ptr = "t";
	sb->tenant_id.len = 1;
	memset(sb->cache_salt, salt_byte, sizeof(sb->cache_salt));
	sb->key_id.ptr = "k";
	sb->key_id.len = 1;
	sb->max_tokens = max_tokens;
	sb->sampling.temperature = 0;
	sb->sampling.top_p = 1;
	sb->sampling.repeat_penalty = 1;
	sb->sampling.repeat_last_n = 64;
	sb->sampling.seed = 42;
	sb->prompt_kind = PROTO_PROMPT_TEXT;
	sb->text.ptr = text;
	sb->text.len = (uint32_t)strlen(text);
	m->u.submit = *sb;
}

void pc_absorb(struct pc_outcome *o, const struct pc_event *ev)
{
	if (ev->type == PROTO_TOKEN) {
		if (o->calls_len + ev->calls_len < sizeof(o->calls)) {
			memcpy(o->calls + o->calls_len, ev->calls, ev->calls_len);
			o->calls_len += ev->calls_len;
		}
		if (o->reasoning_len + ev->reasoning_len < sizeof(o->reasoning)) {
			memcpy(o->reasoning + o->reasoning_len, ev->reasoning, ev->reasoning_len);
			o->reasoning_len += ev->reasoning_len;
		}
		for (uint32_t i = 0; i < ev->n_ids && o->n_ids < 512; i++)
			o->ids[o->n_ids++] = ev->ids[i];
		if (o->text_len + ev->text_len < sizeof(o->text)) {
			memcpy(o->text + o->text_len, ev->text, ev->text_len);
			o->text_len += ev->text_len;
		}
	} else if (ev->type == PROTO_DONE) {
		o->done = ev->done;
		o->finished = 1;
	} else if (ev->type == PROTO_ERROR) {
		o->err = ev->err_code;
		snprintf(o->err_msg, sizeof(o->err_msg), "%s", ev->err_msg);
		o->finished = 1;
	}
}


int pc_run(struct pc_conn *c, struct proto_msg *msgs, uint32_t n, struct pc_outcome *out,
	   int timeout_ms)
{
	uint32_t left = n;
	struct pc_event ev;

	memset(out, 0, n * sizeof(*out));
	for (uint32_t i = 0; i < n; i++)
		if (pc_send(c, &msgs[i]) != 0)
			return -1;
	while (left > 0) {
		if (pc_next(c, &ev, timeout_ms) != 1)
			return -1;
		if (ev.type == PROTO_STATS || ev.type == PROTO_HELLO)
			continue;
		if (ev.request_id < msgs[0].request_id || ev.request_id >= msgs[0].request_id + n)
			return -1;
		pc_absorb(&out[ev.request_id - msgs[0].request_id], &ev);
		if (ev.type == PROTO_DONE || ev.type == PROTO_ERROR)
			left--;
	}
	return 0;
}
