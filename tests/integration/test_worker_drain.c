/*
 * test_worker_drain.c - a real sluice-worker on the tiny model draining on
 * SIGTERM: the running request finishes in full while new ones are refused
 * ERROR draining; a SUBMIT already waiting on an idle worker's socket is
 * answered, not lost; and the answers a slow reader has not taken yet are
 * written out before the exit.  Each test starts its own worker (they end
 * it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/integration/harness.h"
#include "tests/integration/pclient.h"

#define TIMEOUT_MS 120000
/* a prompt of nine words, as test_worker.c's prompts[3] */
#define DRAIN_PROMPT "garden lamp seven river table copper north window stone"

/*
 * SIGTERM while a 400-token request runs, a new request sent while the
 * worker is stopped: the running one finishes in full, the new one is
 * refused ERROR draining, then the worker exits 0.
 */
static void test_sigterm_drains(void **state)
{
	struct h_proc w;
	char sock3[600];
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	struct pc_event ev;
	struct proto_msg m;
	struct proto_submit sb;
	int got_token = 0, refused = 0, done = 0;
	uint32_t streamed = 0;

	(void)state;
	assert_int_equal(h_worker_start_model(&w, "drain", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\","
					      " \"drain_timeout_ms\": 60000",
					      sock3, sizeof(sock3)),
			 0);
	c = pc_connect(sock3, TIMEOUT_MS);
	assert_non_null(c);
	pc_submit_init(&m, &sb, 8000, DRAIN_PROMPT, 400, 1);
	m.flags |= PROTO_SUBMIT_F_IGNORE_EOS;
	assert_int_equal(pc_send(c, &m), 0);
	while (!got_token) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		assert_int_not_equal(ev.type, PROTO_ERROR);
		got_token = ev.type == PROTO_TOKEN;
	}
	streamed = 1;
	/* SIGTERM and a new request both arrive while the worker is stopped
	 * (the first generation cannot end meanwhile): when it resumes, the
	 * request is read after the signal and refused; the running one still
	 * finishes in full */
	assert_int_equal(h_signal(&w, SIGSTOP), 0);
	h_signal(&w, SIGTERM);
	pc_submit_init(&m, &sb, 8001, DRAIN_PROMPT, 4, 1);
	assert_int_equal(pc_send(c, &m), 0);
	assert_int_equal(h_signal(&w, SIGCONT), 0);
	while (!done || !refused) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		if (ev.type == PROTO_TOKEN && ev.request_id == 8000)
			streamed += ev.n_ids;
		if (ev.type == PROTO_ERROR && ev.request_id == 8001) {
			assert_int_equal(ev.err_code, PROTO_E_DRAINING);
			refused = 1;
		}
		if (ev.type == PROTO_DONE && ev.request_id == 8000) {
			assert_int_equal(ev.done.finish, PROTO_FINISH_LENGTH);
			assert_int_equal(ev.done.gen_tokens, 400);
			done = 1;
		}
	}
	assert_int_equal(streamed, 400);
	pc_close(c);
	/* then the worker exits 0 on its own */
	assert_int_equal(h_stop(&w, 30000), 0);
}

/*
 * A reader slower than the stream: the worker finishes six 400-token
 * answers with 20 alternatives a token (megabytes of TOKEN frames) while
 * the client reads nothing (its socket fills; the rest waits in the
 * worker's buffer), then drains on SIGTERM: the exit waits for the client,
 * which gets every token and every DONE (a drained worker dropped that
 * tail with the connection before).
 */
static void test_drain_flushes_slow_reader(void **state)
{
	struct h_proc w;
	char sock7[600];
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	struct pc_event ev;
	static struct proto_msg m[6];
	static struct proto_submit sb[6];
	uint32_t streamed[6] = { 0 };
	int64_t end;
	int done = 0;

	(void)state;
	assert_int_equal(h_worker_start_model(&w, "slow", model,
					      "\"threads\": 2, \"kv_cache_bytes\": \"16MiB\"", sock7,
					      sizeof(sock7)),
			 0);
	c = pc_connect(sock7, TIMEOUT_MS);
	assert_non_null(c);
	for (uint32_t i = 0; i < 6; i++) {
		pc_submit_init(&m[i], &sb[i], 8200 + i, DRAIN_PROMPT, 400, 1);
		m[i].flags |= PROTO_SUBMIT_F_IGNORE_EOS | PROTO_SUBMIT_F_LOGPROBS;
		m[i].u.submit.top_logprobs = 20;
		assert_int_equal(pc_send(c, &m[i]), 0);
	}
	/* nothing read until the worker says all six are done */
	end = h_now_ms() + TIMEOUT_MS;
	for (;;) {
		char *log = h_read_file(w.log, NULL), *p = log;
		int finished = 0;

		while (p && (p = strstr(p, "\"request_done\"")) != NULL) {
			finished++;
			p++;
		}
		free(log);
		if (finished == 6)
			break;
		assert_true(h_now_ms() < end);
		h_pause_ms(10);
	}
	assert_int_equal(h_signal(&w, SIGTERM), 0);
	while (done < 6) {
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
		if (ev.request_id < 8200 || ev.request_id >= 8206)
			continue;
		if (ev.type == PROTO_TOKEN)
			streamed[ev.request_id - 8200] += ev.n_ids;
		if (ev.type == PROTO_DONE) {
			assert_int_equal(ev.done.gen_tokens, 400);
			done++;
		}
	}
	for (int i = 0; i < 6; i++)
		assert_int_equal(streamed[i], 400);
	pc_close(c);
	assert_int_equal(h_stop(&w, 30000), 0);
}

/*
 * SIGTERM on an idle worker with a SUBMIT already on its socket (sent
 * while the worker was stopped, the signal pending): the worker answers
 * it ERROR draining before it exits 0, not with a closed connection (the
 * race test_sigterm_drains lost when its generation ended first).
 */
static void test_sigterm_idle_answers_pending(void **state)
{
	struct h_proc w;
	char sock6[600];
	const char *model = h_model("tiny", "Q8_0", "llama");
	struct pc_conn *c;
	struct pc_event ev;
	struct proto_msg m;
	struct proto_submit sb;

	(void)state;
	assert_int_equal(h_worker_start_model(&w, "idle", model,
					      "\"threads\": 1, \"kv_cache_bytes\": \"16MiB\"", sock6,
					      sizeof(sock6)),
			 0);
	c = pc_connect(sock6, TIMEOUT_MS);
	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	assert_int_equal(h_signal(&w, SIGSTOP), 0);
	h_signal(&w, SIGTERM);
	pc_submit_init(&m, &sb, 8100, DRAIN_PROMPT, 4, 1);
	assert_int_equal(pc_send(c, &m), 0);
	assert_int_equal(h_signal(&w, SIGCONT), 0);
	do
		assert_int_equal(pc_next(c, &ev, TIMEOUT_MS), 1);
	while (ev.type == PROTO_STATS);
	assert_int_equal(ev.type, PROTO_ERROR);
	assert_int_equal(ev.request_id, 8100);
	assert_int_equal(ev.err_code, PROTO_E_DRAINING);
	pc_close(c);
	assert_int_equal(h_stop(&w, 30000), 0);
}


static int teardown(void **state)
{
	(void)state;
	h_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigterm_drains),
		cmocka_unit_test(test_sigterm_idle_answers_pending),
		cmocka_unit_test(test_drain_flushes_slow_reader),
	};

	if (!h_model("tiny", "Q8_0", "llama"))
		return 77;
	return cmocka_run_group_tests_name("integration/worker-drain", tests, NULL, teardown);
}
