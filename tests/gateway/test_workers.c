/*
 * test_workers.c - gateway/workers.c against a stand-in worker on a Unix
 * socket (tests/gateway/fake_worker.h), both on the test's event loop.
 *
 *  - after HELLO, PONG and STATS the worker is ready, with the HELLO's
 *    fields and cap = min(max_seqs, max_inflight);
 *  - a request gets its TOKENs and one DONE; the in-flight count and the
 *    routing counters follow;
 *  - at cap the next SUBMIT is refused (CM_ELIMIT);
 *  - CANCEL reaches the worker with its reason, no callback follows, and
 *    the slot stays counted until the worker's DONE;
 *  - a dropped connection ends every attached request with
 *    GW_WORKERS_E_LOST once, and the worker is ready again after it
 *    reconnects; an operator drain stops placements.
 */
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
#include <event2/event.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/limits.h"
#include "gateway/workers.h"
#include "tests/gateway/fake_worker.h"

#define WT_DEADLINE_MS 10000

static struct event_base *base;
static struct gw_workers *ws;
static struct fake_worker fk;
static char sock_path[108];

/* ---- the gateway side ---------------------------------------------------- */

struct wt_req {
	int tokens, done, errors;
	uint16_t code;
	struct proto_done d;
};

static void on_tokens(void *arg, const struct proto_tokens *t)
{
	((struct wt_req *)arg)->tokens += (int)t->n;
}

static void on_done(void *arg, const struct proto_done *d)
{
	struct wt_req *r = arg;

	r->done++;
	r->d = *d;
}

static void on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct wt_req *r = arg;

	(void)msg;
	(void)len;
	r->errors++;
	r->code = code;
}

static const struct gw_request_ops ops = { .on_tokens = on_tokens, .on_done = on_done,
					   .on_error = on_error };

static int wt_until(int (*cond)(void *), void *arg)
{
	int64_t end = cm_mono_ns() + WT_DEADLINE_MS * 1000000LL;

	while (!cond(arg)) {
		struct timeval tv = { 0, 5000 };

		if (cm_mono_ns() > end)
			return -1;
		event_base_loopexit(base, &tv);
		event_base_dispatch(base);
	}
	return 0;
}

static int wt_ready(void *arg)
{
	(void)arg;
	return gw_workers_can_take(ws, 0);
}

static int wt_finished(void *arg)
{
	struct wt_req *r = arg;

	return r->done + r->errors > 0;
}

static int wt_submits(void *arg)
{
	return fk.submits >= *(int *)arg;
}

static int wt_cancels(void *arg)
{
	return fk.cancels >= *(int *)arg;
}

static int wt_inflight_zero(void *arg)
{
	struct gw_worker_info wi;

	(void)arg;
	gw_workers_info(ws, 0, &wi);
	return wi.inflight == 0;
}

static struct proto_submit wt_submit(void)
{
	struct proto_submit s;

	memset(&s, 0, sizeof(s));
	s.tenant_id = (struct proto_str){ "t", 1 };
	s.key_id = (struct proto_str){ "k", 1 };
	s.model = (struct proto_str){ "tiny", 4 };
	s.max_tokens = 4;
	s.sampling.top_p = 1.0f;
	s.sampling.repeat_penalty = 1.0f;
	s.prompt_kind = PROTO_PROMPT_TEXT;
	s.text = (struct proto_str){ "hi", 2 };
	s.template_name = (struct proto_str){ "", 0 };
	return s;
}

static int setup(void **state)
{
	struct gw_worker_spec spec = { "w0", sock_path, "tiny" };
	const struct gw_workers_config wc = { 3, 200, 60000, 0, 0 };

	(void)state;
	snprintf(sock_path, sizeof(sock_path), "/tmp/sluice-test-workers-%ld.sock", (long)getpid());
	base = event_base_new();
	if (!base || fake_worker_start(&fk, base, sock_path) != 0)
		return -1;
	return gw_workers_new(base, &spec, 1, &wc, &ws) == CM_OK ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	gw_workers_free(ws);
	fake_worker_stop(&fk);
	event_base_free(base);
	return 0;
}

static void test_ready_after_hello(void **state)
{
	struct gw_worker_info wi;

	(void)state;
	assert_int_equal(wt_until(wt_ready, NULL), 0);
	gw_workers_info(ws, 0, &wi);
	assert_true(wi.connected && wi.hello_ok && wi.ready);
	assert_string_equal(wi.not_ready_reason, "");
	assert_int_equal(wi.cap, 3); /* min(max_seqs 4, max_inflight 3) */
	assert_int_equal(wi.hello.kv_blocks_total, 64);
	assert_true(gw_workers_knows_model(ws, "tiny", 4));
	assert_false(gw_workers_knows_model(ws, "other", 5));
}

static void test_request_tokens_done(void **state)
{
	struct proto_submit s = wt_submit();
	struct wt_req r;
	struct gw_worker_info wi;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(gw_workers_submit(ws, 0, 100, 0, &s, &ops, &r), CM_OK);
	assert_int_equal(wt_until(wt_finished, &r), 0);
	assert_int_equal(r.tokens, 2);
	assert_int_equal(r.done, 1);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.d.prompt_tokens, 5);
	gw_workers_info(ws, 0, &wi);
	assert_int_equal(wi.inflight, 0);
	assert_int_equal(wi.placed, 1);
	assert_int_equal(wi.prompt_tokens, 5);
	assert_int_equal(wi.cached_tokens, 2);
}

static void test_cap_and_cancel(void **state)
{
	struct proto_submit s = wt_submit();
	struct wt_req r[4];
	struct gw_worker_info wi;
	int want;

	(void)state;
	memset(r, 0, sizeof(r));
	fk.hold = 1;
	fk.n_held = 0;
	want = fk.submits + 3;
	for (int i = 0; i < 3; i++)
		assert_int_equal(gw_workers_submit(ws, 0, 200 + (uint64_t)i, 0, &s, &ops, &r[i]), CM_OK);
	assert_int_equal(gw_workers_submit(ws, 0, 203, 0, &s, &ops, &r[3]), CM_ELIMIT);
	assert_int_equal(wt_until(wt_submits, &want), 0);
	assert_false(gw_workers_can_take(ws, 0));

	/* cancel one: the worker hears it, the caller hears nothing more */
	want = fk.cancels + 1;
	gw_workers_cancel(ws, 0, 200, PROTO_CANCEL_REVOKED);
	assert_int_equal(wt_until(wt_cancels, &want), 0);
	assert_int_equal(fk.last_cancel_reason, PROTO_CANCEL_REVOKED);
	gw_workers_info(ws, 0, &wi);
	assert_int_equal(wi.inflight, 3); /* counted until the worker's DONE */
	fake_worker_done(&fk, 200, PROTO_FINISH_CANCELLED);
	fake_worker_done(&fk, 201, PROTO_FINISH_STOP);
	fake_worker_done(&fk, 202, PROTO_FINISH_STOP);
	fk.hold = 0;
	assert_int_equal(wt_until(wt_inflight_zero, NULL), 0);
	assert_int_equal(r[0].done + r[0].errors, 0);
	assert_int_equal(r[1].done, 1);
	assert_int_equal(r[2].done, 1);
	assert_int_equal(r[3].done + r[3].errors, 0);
}

/* Slots held for later requests (the choices of an `n` > 1 request):
 * nothing else takes them, their holder submits into them. */
static void test_reserve(void **state)
{
	struct proto_submit s = wt_submit();
	struct wt_req r[3];
	struct gw_worker_info wi;
	int want;

	(void)state;
	memset(r, 0, sizeof(r));
	assert_int_equal(gw_workers_model_cap(ws, "tiny", 4), 3);
	assert_int_equal(gw_workers_model_cap(ws, "other", 5), 0);
	assert_true(gw_workers_can_take_n(ws, 0, 3));
	assert_false(gw_workers_can_take_n(ws, 0, 4));
	fk.hold = 1;
	fk.n_held = 0;
	want = fk.submits + 1;
	assert_int_equal(gw_workers_submit(ws, 0, 400, 0, &s, &ops, &r[0]), CM_OK);
	assert_int_equal(gw_workers_reserve(ws, 0, 3), CM_ELIMIT); /* 1 + 3 > cap 3 */
	assert_int_equal(gw_workers_reserve(ws, 0, 2), CM_OK);
	gw_workers_info(ws, 0, &wi);
	assert_int_equal(wi.reserved, 2);
	assert_false(gw_workers_can_take(ws, 0));
	assert_int_equal(gw_workers_submit(ws, 0, 401, 0, &s, &ops, &r[1]), CM_ELIMIT);
	gw_workers_unreserve(ws, 0, 1);
	assert_int_equal(gw_workers_submit(ws, 0, 401, 0, &s, &ops, &r[1]), CM_OK);
	assert_int_equal(gw_workers_submit(ws, 0, 402, 0, &s, &ops, &r[2]), CM_ELIMIT);
	/* batch share (gateway.slo.batch_share): 0.5 of the cap 3 is one
	 * slot, taken: batch waits while interactive still fits, and with an
	 * SLO limit of 1 the one slot each class may fill is the same */
	gw_workers_set_batch_share(ws, 0.5);
	gw_workers_unreserve(ws, 0, 1);
	assert_true(gw_workers_can_take_class(ws, 0, 1, 0));
	assert_false(gw_workers_can_take_class(ws, 0, 1, 1));
	gw_workers_set_batch_share(ws, 0.0);
	assert_true(gw_workers_can_take_class(ws, 0, 1, 1));
	gw_workers_set_limit(ws, 0, 1);
	assert_false(gw_workers_can_take_class(ws, 0, 1, 0));
	gw_workers_set_limit(ws, 0, 0);
	assert_int_equal(gw_workers_reserve(ws, 0, 1), CM_OK);
	gw_workers_unreserve(ws, 0, 5); /* more than held: down to 0 */
	gw_workers_info(ws, 0, &wi);
	assert_int_equal(wi.reserved, 0);
	assert_int_equal(gw_workers_submit(ws, 0, 402, 0, &s, &ops, &r[2]), CM_OK);
	want += 2;
	assert_int_equal(wt_until(wt_submits, &want), 0);
	for (uint64_t i = 0; i < 3; i++)
		fake_worker_done(&fk, 400 + i, PROTO_FINISH_STOP);
	fk.hold = 0;
	assert_int_equal(wt_until(wt_inflight_zero, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(r[i].done, 1);
}

static void test_lost_connection_and_drain(void **state)
{
	struct proto_submit s = wt_submit();
	struct wt_req r;
	struct gw_worker_info wi;
	int want, accepts = fk.accepts;

	(void)state;
	memset(&r, 0, sizeof(r));
	fk.hold = 1;
	want = fk.submits + 1;
	assert_int_equal(gw_workers_submit(ws, 0, 300, 0, &s, &ops, &r), CM_OK);
	assert_int_equal(wt_until(wt_submits, &want), 0);
	fake_worker_drop(&fk); /* the worker dies with the request running */
	assert_int_equal(wt_until(wt_finished, &r), 0);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.code, GW_WORKERS_E_LOST);
	assert_int_equal(r.done, 0);
	fk.hold = 0;
	assert_int_equal(wt_until(wt_ready, NULL), 0); /* reconnected, HELLO again */
	assert_true(fk.accepts > accepts);
	gw_workers_info(ws, 0, &wi);
	assert_true(wi.reconnects >= 1);
	assert_int_equal(r.errors, 1); /* once */

	assert_int_equal(gw_workers_drain(ws, "nobody"), CM_ENOTFOUND);
	assert_int_equal(gw_workers_drain(ws, "w0"), CM_OK);
	assert_false(gw_workers_can_take(ws, 0));
	gw_workers_info(ws, 0, &wi);
	assert_true(wi.drained);
}

/* ---- a hostile worker (issue 13, finding 10) ---------------------------- */

struct wt_other {
	struct fake_worker fk;
	struct gw_workers *ws;
	char path[108];
};

static int wt_other_start_stall(struct wt_other *o, const char *tag, int64_t ping_ms, int64_t stall_ms)
{
	struct gw_worker_spec spec = { "w1", o->path, "tiny" };
	/* cap: the worker's max_seqs */
	const struct gw_workers_config wc = { 0, ping_ms, 60000, 0, stall_ms };

	snprintf(o->path, sizeof(o->path), "/tmp/sluice-test-workers-%s-%ld.sock", tag, (long)getpid());
	return fake_worker_start(&o->fk, base, o->path) == 0 &&
	       gw_workers_new(base, &spec, 1, &wc, &o->ws) == CM_OK ? 0 : -1;
}

static int wt_other_start(struct wt_other *o, const char *tag)
{
	return wt_other_start_stall(o, tag, 200, 0);
}

static void wt_other_stop(struct wt_other *o)
{
	gw_workers_free(o->ws);
	fake_worker_stop(&o->fk);
}

static int wt_other_ready(void *arg)
{
	return gw_workers_can_take(((struct wt_other *)arg)->ws, 0);
}

static int wt_other_accepts(void *arg)
{
	return ((struct wt_other *)arg)->fk.accepts >= 2;
}

/* HELLO.max_seqs sized a zeroed slot array (20 M gave 619 MiB): bounded now. */
static void test_hostile_max_seqs_bounded(void **state)
{
	struct wt_other o;
	struct gw_worker_info wi;

	(void)state;
	memset(&o, 0, sizeof(o));
	assert_int_equal(wt_other_start(&o, "seqs"), 0);
	o.fk.hello_max_seqs = 20000000;
	assert_int_equal(wt_until(wt_other_ready, &o), 0);
	gw_workers_info(o.ws, 0, &wi);
	assert_int_equal(wi.cap, CM_LIM_MAX_RUNNING_SEQS_HARD);
	wt_other_stop(&o);
}

/* Another protocol version in HELLO is refused (was accepted when higher). */
static void test_hostile_version_refused(void **state)
{
	struct wt_other o;
	struct gw_worker_info wi;

	(void)state;
	memset(&o, 0, sizeof(o));
	assert_int_equal(wt_other_start(&o, "ver"), 0);
	o.fk.hello_version = PROTO_VERSION + 1;
	/* refused, closed, and tried again (the backoff's first step) */
	assert_int_equal(wt_until(wt_other_accepts, &o), 0);
	gw_workers_info(o.ws, 0, &wi);
	assert_false(wi.hello_ok);
	assert_false(gw_workers_can_take(o.ws, 0));
	wt_other_stop(&o);
}

struct wt_many {
	struct wt_req r[300];
	int n;
};

static int wt_many_done(void *arg)
{
	struct wt_many *m = arg;
	int d = 0;

	for (int i = 0; i < m->n; i++)
		d += m->r[i].done;
	return d == m->n;
}

static int wt_other_held(void *arg)
{
	struct wt_other *o = arg;

	return o->fk.n_held >= 300;
}

/*
 * Every TOKEN/DONE scanned all slots; the request-id index finds them. 300
 * requests in flight, answered in an order unlike the submission's: each
 * DONE reaches its own request, once (the index's deletions shift entries
 * back; a wrong shift loses or swaps requests).
 */
static void test_many_in_flight_found_by_id(void **state)
{
	static struct wt_many m;
	struct wt_other o;
	struct proto_submit s = wt_submit();
	struct gw_worker_info wi;

	(void)state;
	memset(&o, 0, sizeof(o));
	memset(&m, 0, sizeof(m));
	assert_int_equal(wt_other_start(&o, "many"), 0);
	o.fk.hello_max_seqs = 300;
	o.fk.hold = 1;
	assert_int_equal(wt_until(wt_other_ready, &o), 0);
	m.n = 300;
	for (int i = 0; i < m.n; i++)
		/* ids that collide in a small table: multiples of a power of two */
		assert_int_equal(gw_workers_submit(o.ws, 0, 1024u * (uint64_t)(i + 1), 0, &s, &ops,
						   &m.r[i]), CM_OK);
	assert_int_equal(wt_until(wt_other_held, &o), 0);
	/* answer every 7th first, then the rest backwards (the loop turns in
	 * between: the stand-in writes blocking) */
	for (int i = 0; i < m.n; i += 7) {
		fake_worker_done(&o.fk, o.fk.held[i], PROTO_FINISH_STOP);
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
	for (int i = m.n - 1; i >= 0; i--)
		if (i % 7) {
			fake_worker_done(&o.fk, o.fk.held[i], PROTO_FINISH_STOP);
			event_base_loop(base, EVLOOP_NONBLOCK);
		}
	assert_int_equal(wt_until(wt_many_done, &m), 0);
	for (int i = 0; i < m.n; i++) {
		assert_int_equal(m.r[i].done, 1);
		assert_int_equal(m.r[i].errors, 0);
	}
	gw_workers_info(o.ws, 0, &wi);
	assert_int_equal(wi.inflight, 0);
	/* a DONE for an id no longer in flight is ignored */
	fake_worker_done(&o.fk, 1024, PROTO_FINISH_STOP);
	assert_int_equal(wt_until(wt_other_ready, &o), 0);
	gw_workers_info(o.ws, 0, &wi);
	assert_int_equal(wi.inflight, 0);
	wt_other_stop(&o);
}

/*
 * Issue 13, finding 5: with the worker stopped, the stream already running
 * got no byte and no error for as long as it stayed stopped.  A worker that
 * sends nothing for worker_stall_ms with a request in flight is dropped:
 * the request ends with an error, the gateway reconnects.  One that answers
 * its PINGs while a long request runs is not.
 */
static void test_stalled_worker_dropped(void **state)
{
	struct wt_other o;
	struct proto_submit s = wt_submit();
	struct wt_req r;
	struct gw_worker_info wi;

	(void)state;
	memset(&o, 0, sizeof(o));
	memset(&r, 0, sizeof(r));
	assert_int_equal(wt_other_start_stall(&o, "stall", 100, 300), 0);
	o.fk.hold = 1;
	assert_int_equal(wt_until(wt_other_ready, &o), 0);
	/* alive: PONG and STATS keep coming while the request is held */
	assert_int_equal(gw_workers_submit(o.ws, 0, 77, 0, &s, &ops, &r), CM_OK);
	{
		int64_t end = cm_mono_ns() + 1000 * 1000000LL;

		while (cm_mono_ns() < end) { /* a measuring window: the loop runs */
			struct timeval tv = { 0, 20000 };

			event_base_loopexit(base, &tv);
			event_base_dispatch(base);
		}
	}
	assert_int_equal(r.errors, 0);
	gw_workers_info(o.ws, 0, &wi);
	assert_int_equal(wi.stalls, 0);
	assert_int_equal(wi.inflight, 1);
	/* stopped: nothing at all comes back */
	o.fk.mute = 1;
	assert_int_equal(wt_until(wt_finished, &r), 0);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.code, GW_WORKERS_E_LOST);
	gw_workers_info(o.ws, 0, &wi);
	assert_int_equal(wi.stalls, 1);
	assert_int_equal(wi.inflight, 0);
	/* resumed: reconnected and ready again */
	o.fk.mute = 0;
	assert_int_equal(wt_until(wt_other_ready, &o), 0);
	wt_other_stop(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ready_after_hello),
		cmocka_unit_test(test_request_tokens_done),
		cmocka_unit_test(test_cap_and_cancel),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_lost_connection_and_drain),
		cmocka_unit_test(test_hostile_max_seqs_bounded),
		cmocka_unit_test(test_hostile_version_refused),
		cmocka_unit_test(test_many_in_flight_found_by_id),
		cmocka_unit_test(test_stalled_worker_dropped),
	};

	return cmocka_run_group_tests_name("gateway_workers", tests, setup, teardown);
}
