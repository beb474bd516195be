/*
 * run.c - the eval runner (eval.h): a set's cases sent one at a time to
 * one named worker, whatever its role (a staged worker takes only these),
 * each with logprobs and the final-logits digest, collected into a case
 * result; then the comparison, the summary, the verdict on the worker.
 *
 * Owns the runs in progress (a list); each run owns its set, baseline and
 * results.  Request ids have the top bit set (the public listener's never
 * do), the tenant is "eval" with a cache salt made at start (an eval's
 * prefixes are cached apart from every tenant's), class batch.  A case
 * that cannot be placed (the worker full or not ready) is retried every
 * GW_EVAL_RETRY_MS until its deadline.  Gateway loop only.
 */
#include "gateway/eval/eval.h"

#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/crypto.h"

#define GW_EVAL_RETRY_MS 20
#define GW_EVAL_RID_BIT (1ULL << 63)
#define GW_EVAL_TEXT_MAX (4u << 20)
#define GW_EVAL_ARENA_CAP (8u << 20)

struct gw_eval_run {
	struct gw_eval *ev;
	struct gw_eval_run *next;
	size_t worker;
	uint64_t conn_gen;    /* the worker's connection when the run started */
	json_t *cases, *baseline, *results;
	struct gw_eval_gates gates;
	gw_eval_done_fn done;
	void *arg;
	/* the case in flight */
	size_t cur;
	struct cm_arena *arena;
	uint64_t rid;
	int inflight;
	int64_t start_ns, first_ns, deadline_ns;
	json_t *tokens, *offsets;
	struct cm_buf text;
	int text_short;       /* an append failed: the text is incomplete */
	double lp_sum;
	struct event *tick;   /* placement retry, the case deadline, the next case */
	int next_pending;
};

struct gw_eval {
	struct event_base *base;
	struct gw_workers *ws;
	struct gw_rollout *ro;
	struct gw_eval_config cfg;
	uint8_t salt[PROTO_DIGEST_LEN];
	uint64_t next_rid;
	struct gw_eval_run *runs;
};

static void run_step(struct gw_eval_run *r);

enum cm_status gw_eval_new(struct event_base *base, struct gw_workers *ws,
			   struct gw_rollout *ro, const struct gw_eval_config *cfg,
			   struct gw_eval **out)
{
	struct gw_eval *ev = cm_calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return CM_ENOMEM;
	if (cm_random_bytes(ev->salt, sizeof(ev->salt)) != CM_OK) {
		cm_free(ev);
		return CM_EIO;
	}
	ev->base = base;
	ev->ws = ws;
	ev->ro = ro;
	ev->cfg = *cfg;
	ev->next_rid = 1;
	*out = ev;
	return CM_OK;
}

static void run_free(struct gw_eval_run *r)
{
	struct gw_eval_run **p;

	for (p = &r->ev->runs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	if (r->inflight)
		gw_workers_cancel(r->ev->ws, r->worker, r->rid, PROTO_CANCEL_SHUTDOWN);
	if (r->tick)
		event_free(r->tick);
	cm_arena_free(r->arena);
	cm_buf_deinit(&r->text);
	json_decref(r->cases);
	json_decref(r->baseline);
	json_decref(r->results);
	json_decref(r->tokens);
	json_decref(r->offsets);
	cm_free(r);
}

void gw_eval_free(struct gw_eval *ev)
{
	if (!ev)
		return;
	while (ev->runs) {
		struct gw_eval_run *r = ev->runs;
		gw_eval_done_fn done = r->done;
		void *arg = r->arg;

		run_free(r);
		done(arg, 503, json_pack("{s:{s:s,s:s}}", "error", "type", "unavailable",
					 "message", "the gateway is stopping"), 0);
	}
	cm_free(ev);
}

/* ---- one case ---------------------------------------------------------- */

/* The case's OpenAI body: its members but id and expect, the model and
 * stream set by the gateway.  A new string (free()) or NULL. */
static char *case_body(const json_t *c, const char *model, size_t mlen)
{
	json_t *b = json_deep_copy(c);
	char *s;

	if (!b)
		return NULL;
	json_object_del(b, "id");
	json_object_del(b, "expect");
	json_object_set_new(b, "model", json_stringn(model, mlen));
	json_object_set_new(b, "stream", json_false());
	s = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	return s;
}

/* Parses case c for the worker's model into *api (strings in `arena`).
 * NULL when fine, else the message (in err). */
static const char *case_parse(const struct gw_eval *ev, size_t worker, const json_t *c,
			      struct cm_arena *arena, struct gw_api_request *api, char *err,
			      size_t err_len)
{
	struct gw_worker_info wi;
	struct gw_api_error ae;
	enum gw_api_kind kind;
	char *body;
	enum cm_status st;

	gw_workers_info(ev->ws, worker, &wi);
	if (json_object_get(c, "messages"))
		kind = GW_API_OPENAI_CHAT;
	else if (json_object_get(c, "prompt"))
		kind = GW_API_OPENAI_COMPLETIONS;
	else
		return "expected \"messages\" (chat) or \"prompt\" (completions)";
	if (json_object_get(c, "n") && json_integer_value(json_object_get(c, "n")) != 1)
		return "n: expected 1 (one output per case)";
	body = case_body(c, wi.hello_ok ? wi.hello.model_name.ptr : "", wi.hello_ok
			 ? wi.hello.model_name.len : 0);
	if (!body)
		return "out of memory";
	memset(&ae, 0, sizeof(ae));
	st = gw_api_parse(kind, body, strlen(body), &ev->cfg.limits, arena, api, &ae);
	free(body);
	if (st != CM_OK) {
		snprintf(err, err_len, "%s", ae.message);
		return err;
	}
	return NULL;
}

static void on_tokens(void *arg, const struct proto_tokens *t)
{
	struct gw_eval_run *r = arg;

	if (!r->first_ns)
		r->first_ns = cm_mono_ns();
	for (uint32_t i = 0; i < t->n; i++) {
		const struct proto_token *tk = &t->tok[i];

		json_array_append_new(r->offsets, json_integer((json_int_t)cm_buf_len(&r->text)));
		json_array_append_new(r->tokens, json_integer(tk->id));
		r->lp_sum += tk->logprob;
		/* text past GW_EVAL_TEXT_MAX is dropped (tokens still count) */
		if (cm_buf_len(&r->text) + tk->text.len <= GW_EVAL_TEXT_MAX &&
		    cm_buf_append(&r->text, tk->text.ptr, tk->text.len) != CM_OK)
			r->text_short = 1;
	}
}

/* Closes the case in flight with `res` (its tokens and text added). */
static void case_close(struct gw_eval_run *r, json_t *res)
{
	const json_t *c = json_array_get(r->cases, r->cur);
	const json_t *expect = json_object_get(c, "expect");
	size_t n = json_array_size(r->tokens);
	double mean = n ? r->lp_sum / (double)n : 0;
	int64_t now = cm_mono_ns();
	uint8_t sha[CM_SHA256_LEN];
	char hex[CM_SHA256_HEX_LEN + 1];
	struct cm_sha256_ctx *h = cm_sha256_new();
	uint32_t failed = 0;
	json_t *text, *checks;

	/* a NUL byte (a byte token) shows as '?': JSON readers refuse \u0000;
	 * the offsets stay byte offsets, the tokens are what is compared */
	for (size_t i = 0; i < cm_buf_len(&r->text); i++)
		if (cm_buf_data(&r->text)[i] == 0)
			cm_buf_data(&r->text)[i] = '?';
	text = json_stringn((const char *)cm_buf_data(&r->text), cm_buf_len(&r->text));
	for (size_t i = 0; h && i < n; i++) {
		uint8_t le[4];
		uint32_t id = (uint32_t)json_integer_value(json_array_get(r->tokens, i));

		le[0] = (uint8_t)id;
		le[1] = (uint8_t)(id >> 8);
		le[2] = (uint8_t)(id >> 16);
		le[3] = (uint8_t)(id >> 24);
		cm_sha256_update(h, le, 4);
	}
	if (h)
		cm_sha256_final(h, sha);
	cm_hex_encode(sha, sizeof(sha), hex);
	json_object_set(res, "id", json_object_get(c, "id"));
	json_object_set_new(res, "tokens", r->tokens);
	json_object_set_new(res, "offsets", r->offsets);
	r->tokens = r->offsets = NULL;
	json_object_set_new(res, "text", text ? text : json_string(""));
	json_object_set_new(res, "mean_logprob", json_real(mean));
	json_object_set_new(res, "output_sha256", json_string(hex));
	json_object_set_new(res, "latency_ms", json_real((double)(now - r->start_ns) / 1e6));
	json_object_set_new(res, "ttft_ms", json_real(r->first_ns
			    ? (double)(r->first_ns - r->start_ns) / 1e6 : 0));
	checks = gw_eval_checks_run(expect, (const char *)cm_buf_data(&r->text),
				    cm_buf_len(&r->text), mean, &failed);
	json_object_set_new(res, "checks", checks ? checks : json_array());
	if (r->baseline)
		gw_eval_compare(res, gw_eval_baseline_case(r->baseline,
				json_string_value(json_object_get(c, "id"))));
	json_array_append_new(r->results, res);
	r->inflight = 0;
	r->cur++;
	r->next_pending = 1;
	event_del(r->tick);
	event_active(r->tick, EV_TIMEOUT, 0);
}

static void on_done(void *arg, const struct proto_done *d)
{
	struct gw_eval_run *r = arg;
	char hex[CM_SHA256_HEX_LEN + 1];

	cm_hex_encode(d->logits_digest, sizeof(d->logits_digest), hex);
	case_close(r, json_pack("{s:s,s:i,s:i,s:s}", "finish",
				d->finish == PROTO_FINISH_STOP ? "stop"
				: d->finish == PROTO_FINISH_LENGTH ? "length" : "cancelled",
				"prompt_tokens", (int)d->prompt_tokens, "completion_tokens",
				(int)d->gen_tokens, "logits_digest", hex));
}

static void on_error(void *arg, uint16_t code, const char *msg, size_t len)
{
	struct gw_eval_run *r = arg;
	char m[200];

	snprintf(m, sizeof(m), "worker error %u: %.*s", (unsigned)code,
		 (int)(len < 150 ? len : 150), msg);
	case_close(r, json_pack("{s:s}", "error", m));
}

static const struct gw_request_ops run_ops = {
	.on_tokens = on_tokens,
	.on_done = on_done,
	.on_error = on_error,
};

/* Sends case r->cur: 1 sent, 0 not now (retry), -1 closed with an error. */
static int case_send(struct gw_eval_run *r)
{
	struct gw_eval *ev = r->ev;
	const json_t *c = json_array_get(r->cases, r->cur);
	struct gw_api_request api;
	struct proto_submit s;
	uint32_t flags = 0;
	char err[400];
	const char *why;
	enum cm_status st;

	{
		struct gw_worker_info wi;

		/* every case on one connection: a restarted worker may be another build */
		gw_workers_info(ev->ws, r->worker, &wi);
		if (!wi.connected || !wi.hello_ok || wi.reconnects != r->conn_gen) {
			case_close(r, json_pack("{s:s}", "error", "the worker's connection closed or "
						"changed during the run"));
			return -1;
		}
	}
	cm_arena_reset(r->arena);
	memset(&api, 0, sizeof(api));
	why = case_parse(ev, r->worker, c, r->arena, &api, err, sizeof(err));
	if (why) {
		case_close(r, json_pack("{s:s}", "error", why));
		return -1;
	}
	gw_api_to_submit(&api, &s, &flags);
	s.tenant_id = (struct proto_str){ "eval", 4 };
	s.key_id = (struct proto_str){ "eval", 4 };
	memcpy(s.cache_salt, ev->salt, sizeof(s.cache_salt));
	s.klass = PROTO_CLASS_BATCH;
	flags |= PROTO_SUBMIT_F_DIGEST | PROTO_SUBMIT_F_LOGPROBS;
	r->rid = GW_EVAL_RID_BIT | ev->next_rid++;
	st = gw_workers_submit(ev->ws, r->worker, r->rid, flags, &s, &run_ops, r);
	if (st == CM_ELIMIT || st == CM_ECLOSED)
		return 0;
	if (st != CM_OK) {
		case_close(r, json_pack("{s:s}", "error", "the case does not encode as a SUBMIT"));
		return -1;
	}
	r->inflight = 1;
	return 1;
}

/* Ends the run: summary, verdict, done; frees it. */
static void run_finish(struct gw_eval_run *r)
{
	struct gw_eval *ev = r->ev;
	struct gw_eval_verdict v;
	struct gw_worker_info wi;
	json_t *body, *summary = gw_eval_summarise(r->results, r->baseline != NULL, &r->gates, &v);
	json_t *set = json_pack("{s:O}", "cases", r->cases);
	char *canon = set ? json_dumps(set, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char sha[CM_SHA256_HEX_LEN + 1] = "", msha[CM_SHA256_HEX_LEN + 1] = "";
	gw_eval_done_fn done = r->done;
	void *arg = r->arg;
	uint8_t d[CM_SHA256_LEN];
	int passed = 0;

	if (canon) {
		cm_sha256(canon, strlen(canon), d);
		cm_hex_encode(d, sizeof(d), sha);
	}
	free(canon);
	json_decref(set);
	gw_workers_info(ev->ws, r->worker, &wi);
	if (wi.hello_ok)
		cm_hex_encode(wi.hello.model_sha256, sizeof(wi.hello.model_sha256), msha);
	v.time_s = cm_wall_ns() / CM_NS_PER_S;
	if (r->baseline) {
		gw_rollout_set_verdict(ev->ro, r->worker, &v);
		passed = v.passed;
	} else {
		json_object_set_new(summary, "passed", json_null());
		json_object_set_new(summary, "reason", json_string("a recording (no baseline): "
								   "not judged"));
	}
	body = json_pack("{s:s,s:s,s:s%,s:s,s:s%,s:s%,s:s%,s:s,s:O,s:o}",
			 "worker", wi.name, "role", gw_rollout_role_name(gw_rollout_role(ev->ro, r->worker)),
			 "model", wi.hello_ok ? wi.hello.model_name.ptr : "",
			 (size_t)(wi.hello_ok ? wi.hello.model_name.len : 0), "model_sha256", msha,
			 "engine_version", wi.hello_ok ? wi.hello.engine_version.ptr : "",
			 (size_t)(wi.hello_ok ? wi.hello.engine_version.len : 0),
			 "backend", wi.hello_ok ? wi.hello.backend.ptr : "",
			 (size_t)(wi.hello_ok ? wi.hello.backend.len : 0),
			 "device", wi.hello_ok ? wi.hello.device.ptr : "",
			 (size_t)(wi.hello_ok ? wi.hello.device.len : 0), "set_sha256", sha,
			 "cases", r->results, "summary", summary ? summary : json_object());
	run_free(r);
	done(arg, body ? 200 : 500, body ? body : json_pack("{s:{s:s,s:s}}", "error", "type",
							    "internal", "message", "out of memory"),
	     passed);
}

static void run_tick(evutil_socket_t fd, short what, void *arg)
{
	struct gw_eval_run *r = arg;
	char m[160];

	(void)fd;
	(void)what;
	if (r->inflight) { /* the case's deadline */
		gw_workers_cancel(r->ev->ws, r->worker, r->rid, PROTO_CANCEL_TIMEOUT);
		snprintf(m, sizeof(m), "no answer within rollout.eval_case_timeout_ms (%lld ms)",
			 (long long)r->ev->cfg.case_timeout_ms);
		case_close(r, json_pack("{s:s}", "error", m));
		return;
	}
	run_step(r);
}

/* Sends the next case, or retries it, or ends the run. */
static void run_step(struct gw_eval_run *r)
{
	const struct timeval retry = { 0, GW_EVAL_RETRY_MS * 1000 };
	int64_t now = cm_mono_ns();
	int rc;

	if (r->next_pending) {
		r->next_pending = 0;
		r->start_ns = now;
		r->first_ns = 0;
		r->lp_sum = 0;
		r->deadline_ns = now + r->ev->cfg.case_timeout_ms * CM_NS_PER_MS;
	}
	if (r->cur >= json_array_size(r->cases)) {
		run_finish(r);
		return;
	}
	if (!r->tokens)
		r->tokens = json_array();
	if (!r->offsets)
		r->offsets = json_array();
	cm_buf_reset(&r->text);
	rc = case_send(r);
	if (rc == 1) {
		int64_t left = r->deadline_ns - cm_mono_ns();
		struct timeval tv = { left > 0 ? left / CM_NS_PER_S : 0,
				      left > 0 ? (left % CM_NS_PER_S) / 1000 : 0 };

		evtimer_add(r->tick, &tv);
	} else if (rc == 0) {
		if (now >= r->deadline_ns) {
			case_close(r, json_pack("{s:s}", "error", "the worker had no room or was not "
						 "ready until the case's deadline"));
			return;
		}
		evtimer_add(r->tick, &retry);
	}
}

/* ---- starting a run ---------------------------------------------------- */

static enum cm_status refuse(int *status, json_t **err, int code, const char *type,
			     const char *msg)
{
	*status = code;
	*err = json_pack("{s:{s:s,s:s}}", "error", "type", type, "message", msg);
	return CM_EINVAL;
}

/* NULL when every case of `cases` is well formed for worker i, else the
 * message (naming the case) in err. */
static const char *cases_validate(const struct gw_eval *ev, size_t worker, const json_t *cases,
				  struct cm_arena *arena, char *err, size_t err_len)
{
	char why[400];
	const char *w;
	size_t i, j;
	json_t *c;

	if (!json_is_array(cases) || json_array_size(cases) == 0)
		return "set.cases: expected a non-empty array";
	if (json_array_size(cases) > ev->cfg.max_cases) {
		snprintf(err, err_len, "set.cases: expected at most %u cases "
			 "(rollout.eval_max_cases), found %zu", ev->cfg.max_cases,
			 json_array_size(cases));
		return err;
	}
	json_array_foreach(cases, i, c) {
		const char *id = json_string_value(json_object_get(c, "id"));
		struct gw_api_request api;

		if (!json_is_object(c) || !id || !*id || strlen(id) > GW_EVAL_ID_MAX ||
		    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-")
			    != strlen(id)) {
			snprintf(err, err_len, "set.cases[%zu].id: expected 1 to %d of "
				 "[A-Za-z0-9_.:-]", i, GW_EVAL_ID_MAX);
			return err;
		}
		for (j = 0; j < i; j++)
			if (!strcmp(id, json_string_value(json_object_get(json_array_get(cases, j), "id")))) {
				snprintf(err, err_len, "set.cases[%zu].id: \"%s\" repeats case %zu", i, id, j);
				return err;
			}
		if ((w = gw_eval_expect_validate(json_object_get(c, "expect"), why, sizeof(why))) ||
		    (cm_arena_reset(arena), w = case_parse(ev, worker, c, arena, &api, why, sizeof(why)))) {
			snprintf(err, err_len, "case \"%s\": %s", id, w);
			return err;
		}
	}
	return NULL;
}

enum cm_status gw_eval_start(struct gw_eval *ev, const char *name, const json_t *req,
			     gw_eval_done_fn done, void *arg, int *status, json_t **err)
{
	long i = gw_rollout_find(ev->ro, name);
	const json_t *set = json_object_get(req, "set"), *base = json_object_get(req, "baseline");
	struct gw_eval_gates g = ev->cfg.gates;
	struct gw_worker_info wi;
	struct gw_eval_run *r;
	char msg[600];
	const char *why, *k;
	json_t *v;

	json_object_foreach((json_t *)req, k, v)
		if (strcmp(k, "set") && strcmp(k, "baseline") && strcmp(k, "gates")) {
			snprintf(msg, sizeof(msg), "%s: expected one of set, baseline, gates", k);
			return refuse(status, err, 400, "unknown_field", msg);
		}
	if (i < 0) {
		snprintf(msg, sizeof(msg), "no worker \"%s\"", name);
		return refuse(status, err, 404, "not_found", msg);
	}
	gw_workers_info(ev->ws, (size_t)i, &wi);
	if (!wi.connected || !wi.hello_ok)
		return refuse(status, err, 503, "unavailable", "the worker is not connected");
	if (!json_is_object(set))
		return refuse(status, err, 400, "invalid_value", "set: expected an object with cases");
	if (base && (!json_is_object(base) || !json_is_array(json_object_get(base, "cases"))))
		return refuse(status, err, 400, "invalid_value",
			      "baseline: expected a recording (an object with cases)");
	if ((why = gw_eval_gates_parse(json_object_get(req, "gates"), &g, msg, sizeof(msg))))
		return refuse(status, err, 400, "invalid_value", why);
	r = cm_calloc(1, sizeof(*r));
	if (!r || !(r->arena = cm_arena_new(64 * 1024, GW_EVAL_ARENA_CAP))) {
		cm_free(r);
		return refuse(status, err, 500, "internal", "out of memory");
	}
	r->ev = ev;
	r->worker = (size_t)i;
	r->conn_gen = wi.reconnects;
	cm_buf_init(&r->text, GW_EVAL_TEXT_MAX);
	if ((why = cases_validate(ev, r->worker, json_object_get(set, "cases"), r->arena, msg,
				  sizeof(msg)))) {
		run_free(r);
		return refuse(status, err, 400, "invalid_value", why);
	}
	r->cases = json_incref(json_object_get(set, "cases"));
	r->baseline = base ? json_incref((json_t *)base) : NULL;
	r->results = json_array();
	r->gates = g;
	r->done = done;
	r->arg = arg;
	r->next_pending = 1;
	r->tick = evtimer_new(ev->base, run_tick, r);
	r->next = ev->runs;
	ev->runs = r;
	if (!r->results || !r->tick) {
		run_free(r);
		return refuse(status, err, 500, "internal", "out of memory");
	}
	event_active(r->tick, EV_TIMEOUT, 0);
	return CM_OK;
}
