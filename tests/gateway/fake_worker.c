/*
 * fake_worker.c - a stand-in sluice-worker for the gateway's unit tests
 * (see fake_worker.h).
 */
#include "tests/gateway/fake_worker.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/limits.h"

static void fk_send(struct fake_worker *fk, const struct proto_msg *m)
{
	struct cm_buf b;

	cm_buf_init(&b, CM_LIM_PROTO_FRAME_BYTES);
	assert_int_equal(proto_encode(&b, m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	assert_int_equal(write(fk->fd, cm_buf_data(&b), cm_buf_len(&b)), (ssize_t)cm_buf_len(&b));
	cm_buf_deinit(&b);
}

/* STATS: all 64 KV blocks free. */
static void fk_send_stats(struct fake_worker *fk)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_STATS;
	m.u.stats.kv_blocks_free = 64;
	m.u.stats.n_hist = PROTO_HIST_BUCKETS;
	fk_send(fk, &m);
}

static void fk_hello_and_stats(struct fake_worker *fk)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_HELLO;
	m.u.hello.proto_version = fk->hello_version ? fk->hello_version : PROTO_VERSION;
	m.u.hello.worker_name = (struct proto_str){ "fake", 4 };
	m.u.hello.model_name = (struct proto_str){ "tiny", 4 };
	m.u.hello.context_len = fk->hello_context ? fk->hello_context : 256;
	m.u.hello.vocab_size = 512;
	m.u.hello.generates = 1;
	m.u.hello.max_seqs = fk->hello_max_seqs ? fk->hello_max_seqs : 4;
	m.u.hello.kv_blocks_total = 64;
	m.u.hello.kv_block_tokens = 16;
	m.u.hello.backend = (struct proto_str){ "cpu", 3 };
	m.u.hello.device = (struct proto_str){ "test", 4 };
	m.u.hello.engine_version = (struct proto_str){ "0", 1 };
	m.u.hello.model_bytes = 1048576;
	m.u.hello.model_mtime_s = 1700000000;
	m.u.hello.architecture = (struct proto_str){ "llama", 5 };
	m.u.hello.parameter_count = 260000;
	m.u.hello.file_type = (struct proto_str){ "F32", 3 };
	fk_send(fk, &m);
	fk_send_stats(fk);
}

void fake_worker_done(struct fake_worker *fk, uint64_t id, uint8_t finish)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_DONE;
	m.request_id = id;
	m.u.done.finish = finish;
	m.u.done.prompt_tokens = 5;
	m.u.done.cached_tokens = 2;
	/* set from a test's thread while this one serves: atomic */
	m.u.done.gen_tokens = __atomic_load_n(&fk->done_gen_tokens, __ATOMIC_SEQ_CST);
	if (!m.u.done.gen_tokens)
		m.u.done.gen_tokens = 2;
	fk_send(fk, &m);
}

static void fk_answer(struct fake_worker *fk, const struct proto_msg *in)
{
	struct proto_token t[2] = { { 7, -0.5f, { "a", 1 }, { NULL, 0 }, 0, NULL, 0 },
				    { 8, -0.25f, { "b", 1 }, { NULL, 0 }, 0, NULL, 0 } };
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	if (fk->mute) {
		if (in->type == PROTO_SUBMIT)
			fk->submits++;
		return; /* stopped or stuck: nothing comes back */
	}
	switch (in->type) {
	case PROTO_PING:
		m.type = PROTO_PONG;
		m.u.pong.nonce = in->u.ping.nonce;
		m.u.pong.ok = 1;
		m.u.pong.tokens = 1;
		fk_send(fk, &m);
		fk_send_stats(fk);
		break;
	case PROTO_SUBMIT:
		fk->submits++;
		if (in->u.submit.text.len == 4 && (memcmp(in->u.submit.text.ptr, "fail", 4) == 0 ||
						    memcmp(in->u.submit.text.ptr, "long", 4) == 0)) {
			int fail = in->u.submit.text.ptr[0] == 'f';

			m.type = PROTO_ERROR;
			m.request_id = in->request_id;
			m.u.error.code = fail ? PROTO_E_BAD_REQUEST : PROTO_E_TOO_LONG;
			m.u.error.message = fail ? (struct proto_str){ FAKE_WORKER_REASON,
								   sizeof(FAKE_WORKER_REASON) - 1 }
						 : (struct proto_str){ FAKE_WORKER_TOO_LONG,
								   sizeof(FAKE_WORKER_TOO_LONG) - 1 };
			fk_send(fk, &m);
			break;
		}
		if (fk->hold) {
			if (fk->n_held < (int)(sizeof(fk->held) / sizeof(fk->held[0])))
				fk->held[fk->n_held++] = in->request_id;
			break;
		}
		m.type = PROTO_TOKEN;
		m.request_id = in->request_id;
		m.u.tokens.n = 2;
		m.u.tokens.tok = t;
		fk_send(fk, &m);
		fake_worker_done(fk, in->request_id, PROTO_FINISH_STOP);
		break;
	case PROTO_CANCEL:
		fk->cancels++;
		fk->last_cancel_reason = in->u.cancel.reason;
		break;
	default:
		break;
	}
}

void fake_worker_drop(struct fake_worker *fk)
{
	if (fk->cev)
		event_free(fk->cev);
	if (fk->fd >= 0)
		close(fk->fd);
	proto_decoder_free(fk->dec);
	fk->cev = NULL;
	fk->fd = -1;
	fk->dec = NULL;
}

static void fk_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_worker *fk = arg;
	uint8_t buf[65536];
	struct proto_msg m;
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n <= 0) {
		fake_worker_drop(fk);
		return;
	}
	assert_int_equal(proto_decoder_feed(fk->dec, buf, (size_t)n), CM_OK);
	while (proto_decoder_next(fk->dec, &m) == CM_OK)
		fk_answer(fk, &m);
}

static void fk_accept_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fake_worker *fk = arg;
	int c = accept(fd, NULL, NULL);

	(void)what;
	if (c < 0)
		return;
	fake_worker_drop(fk);
	fk->fd = c;
	fk->accepts++;
	fk->dec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES);
	fk->cev = event_new(fk->base, c, EV_READ | EV_PERSIST, fk_read_cb, fk);
	assert_non_null(fk->cev);
	event_add(fk->cev, NULL);
	fk_hello_and_stats(fk);
}

int fake_worker_start(struct fake_worker *fk, struct event_base *base, const char *path)
{
	struct sockaddr_un sa;

	memset(fk, 0, sizeof(*fk));
	fk->fd = -1;
	fk->base = base;
	snprintf(fk->path, sizeof(fk->path), "%s", path);
	unlink(path);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fk->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fk->lfd < 0 || bind(fk->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fk->lfd, 4) != 0)
		return -1;
	fk->lev = event_new(base, fk->lfd, EV_READ | EV_PERSIST, fk_accept_cb, fk);
	if (!fk->lev || event_add(fk->lev, NULL) != 0)
		return -1;
	return 0;
}

void fake_worker_stop(struct fake_worker *fk)
{
	fake_worker_drop(fk);
	if (fk->lev)
		event_free(fk->lev);
	if (fk->lfd >= 0)
		close(fk->lfd);
	unlink(fk->path);
}
