/*
 * test_server.c - worker/serve/ (server.c, conn.c, request.c) through a
 * socketpair: the real server state (model, KV cache, scheduler, text
 * pipeline) on a tiny generated model, one end of the pair adopted as a
 * gateway connection, the test speaking proto/ on the other end.
 *
 *  - HELLO first, with the model's name and the KV geometry;
 *  - a TEXT and a CHAT SUBMIT stream TOKEN frames and end with one DONE
 *    whose counts match what was streamed; greedy runs repeat exactly;
 *  - bad SUBMITs get ERROR with the worker's reason and code (role
 *    `tool`, another model, duplicate id, over the context), CANCEL of an
 *    unknown id gets UNKNOWN_REQUEST, and the connection keeps serving;
 *  - a CANCEL ends its request with DONE cancelled and frees its blocks;
 *  - a malformed frame gets ERROR protocol and the connection is dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/limits.h"
#include "common/log.h"
#include "proto/proto.h"
#include "worker/serve/server.h"

#define SV_MAX_FRAMES 4096

static struct wk_server *srv;
static struct wk_server_cfg cfg;
static char model_path[512];

/* What came back on the gateway end, decoded. */
struct sv_reply {
	int hello;
	uint32_t context_len;  /* from HELLO */
	int tokens;            /* TOKEN entries with an id */
	uint32_t ids[1024];
	int done;
	struct proto_done d;
	int errors;
	uint16_t code;
	char message[256];
};

static int setup(void **state)
{
	const char *bd = getenv("SLUICE_BUILD_DIR");
	char cmd[1400], err[1024];

	(void)state;
	if (!bd)
		return -1;
	cm_log_setup(CM_LOG_OFF, 2, "test");
	snprintf(model_path, sizeof(model_path), "/tmp/sluice-test-serve-%ld.gguf", (long)getpid());
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/sluice-model synth --preset tiny --type Q8_0 --seed 5 -o %s >/dev/null",
		 bd, model_path);
	if (system(cmd) != 0 || cm_cfg_defaults(&wk_server_section, &cfg) != CM_OK)
		return -1;
	free(cfg.model);
	cfg.model = strdup(model_path);
	free(cfg.model_name);
	cfg.model_name = strdup("tiny");
	cfg.threads = 1;
	cfg.kv_cache_bytes = 64 * 16 * 1024;
	cfg.max_running = 4;
	cfg.max_waiting = 8;
	return wk_server_open(&cfg, &srv, err, sizeof(err)) == CM_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	wk_server_close(srv);
	cm_cfg_free(&wk_server_section, &cfg);
	unlink(model_path);
	return 0;
}

/* A connection: the server's end adopted, the test's end returned. */
static int sv_connect(int *server_fd)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(wk_server_adopt_fd(srv, sv[0]), CM_OK);
	*server_fd = sv[0];
	return sv[1];
}

static void sv_send(int server_fd, const struct proto_msg *m)
{
	struct cm_buf b;

	cm_buf_init(&b, CM_LIM_PROTO_FRAME_BYTES);
	assert_int_equal(proto_encode(&b, m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	assert_int_equal(wk_server_input(srv, server_fd, cm_buf_data(&b), cm_buf_len(&b)), 0);
	cm_buf_deinit(&b);
}

/* Runs the scheduler until idle, then decodes everything the test end got. */
static void sv_collect(int fd, struct sv_reply *r)
{
	struct proto_decoder *dec = proto_decoder_new(CM_LIM_PROTO_FRAME_BYTES);
	uint8_t buf[65536];
	struct proto_msg m;
	ssize_t n;
	int steps = 0;

	assert_non_null(dec);
	/* a long reply fills the socket: read, then let the server go on */
	for (int got = 1; got;) {
		while (wk_server_step(srv) && steps++ < 100000)
			;
		got = 0;
		while ((n = read(fd, buf, sizeof(buf))) > 0) {
			assert_int_equal(proto_decoder_feed(dec, buf, (size_t)n), CM_OK);
			got = 1;
		}
	}
	while (proto_decoder_next(dec, &m) == CM_OK) {
		switch (m.type) {
		case PROTO_HELLO:
			r->hello++;
			r->context_len = m.u.hello.context_len;
			assert_memory_equal(m.u.hello.model_name.ptr, "tiny", 4);
			assert_true(m.u.hello.kv_blocks_total >= 2);
			break;
		case PROTO_TOKEN:
			for (uint32_t i = 0; i < m.u.tokens.n; i++)
				if (m.u.tokens.tok[i].id != UINT32_MAX && r->tokens < 1024)
					r->ids[r->tokens++] = m.u.tokens.tok[i].id;
			break;
		case PROTO_DONE:
			r->done++;
			r->d = m.u.done;
			break;
		case PROTO_ERROR:
			r->errors++;
			r->code = m.u.error.code;
			snprintf(r->message, sizeof(r->message), "%.*s",
				 (int)m.u.error.message.len, m.u.error.message.ptr);
			break;
		default:
			break;
		}
	}
	proto_decoder_free(dec);
}

static struct proto_msg sv_submit(uint64_t id, const char *text, uint32_t max_tokens)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = PROTO_SUBMIT;
	m.request_id = id;
	m.flags = PROTO_SUBMIT_F_ADD_BOS;
	m.u.submit.tenant_id = (struct proto_str){ "t", 1 };
	m.u.submit.key_id = (struct proto_str){ "k", 1 };
	m.u.submit.model = (struct proto_str){ "tiny", 4 };
	m.u.submit.max_tokens = max_tokens;
	m.u.submit.sampling.top_p = 1.0f;
	m.u.submit.sampling.repeat_penalty = 1.0f;
	m.u.submit.prompt_kind = PROTO_PROMPT_TEXT;
	m.u.submit.text = (struct proto_str){ text, (uint32_t)strlen(text) };
	m.u.submit.template_name = (struct proto_str){ "", 0 };
	return m;
}

static void test_hello_and_text(void **state)
{
	struct sv_reply a, b;
	struct proto_msg m = sv_submit(1, "Once upon a time", 12);
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	memset(&a, 0, sizeof(a));
	sv_send(sfd, &m);
	sv_collect(fd, &a);
	assert_int_equal(a.hello, 1);
	assert_int_equal(a.errors, 0);
	assert_int_equal(a.done, 1);
	assert_int_equal(a.d.gen_tokens, (uint32_t)a.tokens);
	assert_true(a.tokens >= 1 && a.tokens <= 12);
	assert_true(a.d.prompt_tokens >= 2);
	/* greedy: the same request gives the same tokens */
	memset(&b, 0, sizeof(b));
	m.request_id = 2;
	sv_send(sfd, &m);
	sv_collect(fd, &b);
	assert_int_equal(b.done, 1);
	assert_int_equal(b.tokens, a.tokens);
	assert_memory_equal(b.ids, a.ids, (size_t)a.tokens * sizeof(a.ids[0]));
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

static void test_chat_and_refusals(void **state)
{
	static const struct proto_message ok_msgs[] = {
		{ { "system", 6 }, { "Be brief.", 9 }, { NULL, 0 }, { NULL, 0 } },
		{ { "user", 4 }, { "Hello", 5 }, { NULL, 0 }, { NULL, 0 } },
	};
	static const struct proto_message tool_msgs[] = {
		{ { "robot", 5 }, { "{}", 2 }, { NULL, 0 }, { NULL, 0 } },
	};
	struct sv_reply r;
	struct proto_msg m = sv_submit(10, "x", 4);
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	m.u.submit.prompt_kind = PROTO_PROMPT_CHAT;
	m.u.submit.n_messages = 2;
	m.u.submit.messages = ok_msgs;
	m.u.submit.template_name = (struct proto_str){ "chatml", 6 };
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.done, 1);

	/* a role the worker does not render: the worker's own reason */
	m.request_id = 11;
	m.u.submit.n_messages = 1;
	m.u.submit.messages = tool_msgs;
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.code, PROTO_E_BAD_REQUEST);
	assert_non_null(strstr(r.message, "messages[0].role: expected one of system, user, assistant, tool"));

	/* another model */
	m = sv_submit(12, "x", 4);
	m.u.submit.model = (struct proto_str){ "other", 5 };
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.code, PROTO_E_BAD_REQUEST);
	assert_non_null(strstr(r.message, "this worker serves 'tiny'"));

	/* more than the context */
	m = sv_submit(13, "x", 1u << 30);
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.code, PROTO_E_TOO_LONG);

	/* CANCEL of nothing */
	memset(&m, 0, sizeof(m));
	m.type = PROTO_CANCEL;
	m.request_id = 999;
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.code, PROTO_E_UNKNOWN_REQUEST);

	/* still serving after all of that */
	m = sv_submit(14, "Once", 3);
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.done, 1);
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

/* max_tokens as a cap (PROTO_SUBMIT_F_FIT): lowered to what the context
 * leaves after the prompt; without the flag the same request is refused. */
static void test_fit_to_context(void **state)
{
	struct sv_reply r;
	struct proto_msg m = sv_submit(40, "Once upon a time", 1u << 20);
	int sfd, fd = sv_connect(&sfd);
	uint32_t ctx;

	(void)state;
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.hello, 1);
	assert_true(r.context_len > 8);
	ctx = r.context_len;
	assert_int_equal(r.code, PROTO_E_TOO_LONG);
	assert_non_null(strstr(r.message, "exceeds the context"));

	m.request_id = 41;
	m.flags |= PROTO_SUBMIT_F_FIT | PROTO_SUBMIT_F_IGNORE_EOS;
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.d.finish, PROTO_FINISH_LENGTH);
	assert_true(r.d.prompt_tokens >= 2);
	assert_int_equal(r.d.prompt_tokens + r.d.gen_tokens, ctx);
	/* a limit that fits is kept as it is */
	m.request_id = 42;
	m.u.submit.max_tokens = 3;
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.d.gen_tokens, 3);
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

/* top_p 0 is the single most likely token: the same as greedy, whatever
 * the temperature and seed. */
static void test_top_p_zero(void **state)
{
	struct sv_reply g, z;
	struct proto_msg m = sv_submit(50, "Once upon a time", 10);
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	memset(&g, 0, sizeof(g));
	sv_send(sfd, &m);
	sv_collect(fd, &g);
	assert_int_equal(g.done, 1);
	m.request_id = 51;
	m.u.submit.sampling.temperature = 1.5f;
	m.u.submit.sampling.top_p = 0.0f;
	m.u.submit.sampling.seed = 7;
	m.flags |= PROTO_SUBMIT_F_HAS_SEED;
	memset(&z, 0, sizeof(z));
	sv_send(sfd, &m);
	sv_collect(fd, &z);
	assert_int_equal(z.errors, 0);
	assert_int_equal(z.done, 1);
	assert_int_equal(z.tokens, g.tokens);
	assert_memory_equal(z.ids, g.ids, (size_t)g.tokens * sizeof(g.ids[0]));
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

/* A base model (no chat template in the file): a chat request is served
 * with its messages as plain text, as Ollama serves such a model, and is
 * the same prompt as the text request of the same words. */
static void test_base_model_chat(void **state)
{
	static const struct proto_message msgs[] = { { { "user", 4 }, { "Once upon", 9 }, { NULL, 0 },
							   { NULL, 0 } } };
	struct wk_server *with_template = srv, *base = NULL;
	struct wk_server_cfg bcfg = cfg;
	struct sv_reply c, t;
	struct proto_msg m;
	char cmd[1400], path[600], err[1024];
	int sfd, fd;

	(void)state;
	snprintf(path, sizeof(path), "%s.base.gguf", model_path);
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/sluice-model synth --preset tiny --type Q8_0 --seed 5 --template none "
		 "-o %s >/dev/null", getenv("SLUICE_BUILD_DIR"), path);
	assert_int_equal(system(cmd), 0);
	bcfg.model = path;
	assert_int_equal(wk_server_open(&bcfg, &base, err, sizeof(err)), CM_OK);
	srv = base;
	fd = sv_connect(&sfd);
	m = sv_submit(60, "x", 6);
	m.u.submit.prompt_kind = PROTO_PROMPT_CHAT;
	m.u.submit.n_messages = 1;
	m.u.submit.messages = msgs;
	memset(&c, 0, sizeof(c));
	sv_send(sfd, &m);
	sv_collect(fd, &c);
	assert_int_equal(c.errors, 0);
	assert_int_equal(c.done, 1);
	m = sv_submit(61, "Once upon", 6);
	memset(&t, 0, sizeof(t));
	sv_send(sfd, &m);
	sv_collect(fd, &t);
	assert_int_equal(t.done, 1);
	assert_int_equal(c.d.prompt_tokens, t.d.prompt_tokens);
	assert_int_equal(c.tokens, t.tokens);
	assert_memory_equal(c.ids, t.ids, (size_t)t.tokens * sizeof(t.ids[0]));
	wk_server_drop_fd(srv, sfd);
	close(fd);
	srv = with_template;
	wk_server_close(base);
	unlink(path);
}

static void test_duplicate_and_cancel(void **state)
{
	struct sv_reply r;
	struct proto_msg m = sv_submit(20, "Once upon a time there was", 64), c;
	uint32_t used, cached;
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	sv_send(sfd, &m);
	sv_send(sfd, &m); /* the same id while the first still waits */
	memset(&c, 0, sizeof(c));
	c.type = PROTO_CANCEL;
	c.request_id = 20;
	sv_send(sfd, &c);
	memset(&r, 0, sizeof(r));
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.code, PROTO_E_DUPLICATE);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.d.finish, PROTO_FINISH_CANCELLED);
	wk_server_kv_usage(srv, &used, &cached);
	assert_int_equal(used, 0);
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

static void test_malformed_frame_drops_the_connection(void **state)
{
	static const uint8_t junk[64] = "this is not a proto frame at all, not even close....";
	struct sv_reply r;
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	assert_int_equal(wk_server_input(srv, sfd, junk, sizeof(junk)), -1);
	memset(&r, 0, sizeof(r));
	sv_collect(fd, &r);
	assert_int_equal(r.hello, 1);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.code, PROTO_E_PROTOCOL);
	assert_int_equal(read(fd, (uint8_t[1]){ 0 }, 1), 0); /* closed */
	close(fd);
}

/*
 * Issue 13, finding 6: the whole prompt was tokenized on the scheduler's
 * thread before being found too long (0.45 s for 4 MiB, other tenants
 * waited).  A prompt larger than the context's worth of the longest token
 * is refused by its size, without tokenizing (the message says bytes), and
 * one just under the bound is still tokenized and refused by its tokens.
 */
static void test_huge_prompt_refused_by_size(void **state)
{
	size_t n = 4u * 1024 * 1024;
	char *big = malloc(n + 1);
	struct sv_reply r;
	struct proto_msg m;
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	assert_non_null(big);
	memset(big, 'a', n);
	big[n] = '\0';
	m = sv_submit(60, big, 4);
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.code, PROTO_E_TOO_LONG);
	assert_non_null(strstr(r.message, "bytes is over"));
	/* the worker still serves */
	m = sv_submit(61, "Once", 3);
	memset(&r, 0, sizeof(r));
	sv_send(sfd, &m);
	sv_collect(fd, &r);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.done, 1);
	free(big);
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

/*
 * Issue 13, finding 9: values the API documents were refused by the worker's
 * sampler with a 400 that named no field: top_k above the vocabulary,
 * repeat_last_n -1 (the whole context, UINT32_MAX on the wire) and
 * 65537..1048576.  They are served now: top_k above the vocabulary is off,
 * a window beyond the context is the context.
 */
static void test_documented_sampling_values(void **state)
{
	static const uint32_t last_n[] = { UINT32_MAX, 65537, 1048576 };
	struct sv_reply r;
	struct proto_msg m;
	int sfd, fd = sv_connect(&sfd);

	(void)state;
	for (size_t i = 0; i < sizeof(last_n) / sizeof(last_n[0]); i++) {
		m = sv_submit(70 + i, "Once upon a time", 6);
		m.u.submit.sampling.top_k = 100000;
		m.u.submit.sampling.repeat_last_n = last_n[i];
		m.u.submit.sampling.temperature = 0.8f;
		memset(&r, 0, sizeof(r));
		sv_send(sfd, &m);
		sv_collect(fd, &r);
		if (r.errors)
			fail_msg("repeat_last_n %u, top_k 100000: %s", last_n[i], r.message);
		assert_int_equal(r.done, 1);
	}
	wk_server_drop_fd(srv, sfd);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello_and_text),
		cmocka_unit_test(test_chat_and_refusals),
		cmocka_unit_test(test_fit_to_context),
		cmocka_unit_test(test_huge_prompt_refused_by_size),
		cmocka_unit_test(test_top_p_zero),
		cmocka_unit_test(test_documented_sampling_values),
		cmocka_unit_test(test_base_model_chat),
		cmocka_unit_test(test_duplicate_and_cancel),
		cmocka_unit_test(test_malformed_frame_drops_the_connection),
	};

	return cmocka_run_group_tests_name("worker_serve", tests, setup, teardown);
}
