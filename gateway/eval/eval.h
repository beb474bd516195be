/*
 * eval.h - eval replay (docs/operations.md): an operator's set of cases
 * run on one worker, compared with a baseline recorded earlier, checked,
 * and held to gates; the verdict is what `model promote` asks for.
 *
 * A set is {"cases": [case, ...]}; a case is an OpenAI request body
 * (chat when it has "messages", completions when it has "prompt"; "model"
 * and "stream" are the gateway's) plus "id" (unique in the set, a name of
 * [A-Za-z0-9_.:-]{1,64}) and an optional "expect" object of checks:
 *   "equals": TEXT, "contains": TEXT, "regex": POSIX ERE,
 *   "json_schema": SCHEMA (the output must be a JSON document valid
 *   against it, checks.c lists the keywords), "min_mean_logprob": NATS
 *   (a score: the mean log-probability of the output's tokens).
 * Eval prompts and outputs are never logged and never written to Redis;
 * they live in the operator's files and in the admin responses.
 *
 * Three parts:
 *   checks.c  the "expect" checks, the JSON Schema validator included;
 *   report.c  comparison with a baseline (exact tokens, first divergence,
 *             log-probability change), the summary and the gates;
 *   run.c     the runner on the gateway's loop: one case at a time on the
 *             named worker, whatever its role, with its own request ids.
 * All on the gateway's loop; checks.c and report.c are pure.
 */
#ifndef SLUICE_GATEWAY_EVAL_EVAL_H
#define SLUICE_GATEWAY_EVAL_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/status.h"
#include "gateway/api/api.h"
#include "gateway/rollout.h"
#include "gateway/workers.h"

#define GW_EVAL_ID_MAX 64
#define GW_EVAL_SCHEMA_DEPTH 32     /* nesting the validator follows */
#define GW_EVAL_SCHEMA_STEPS 100000 /* schemas visited for one document */
#define GW_EVAL_PATTERN_MAX 1024    /* bytes of a pattern or regex check */
#define GW_EVAL_AROUND_BYTES 40     /* text shown each side of a divergence */

/* ---- checks.c -------------------------------------------------------- */

/* NULL when `expect` (may be NULL) is a valid checks object, else a
 * message naming the member (static or in err). */
const char *gw_eval_expect_validate(const json_t *expect, char *err, size_t err_len);
/*
 * Runs the checks of `expect` on an output: a new array of
 * {"check": NAME, "passed": BOOL, "detail": TEXT}; *failed the number
 * that did not pass.  NULL on allocation failure.
 */
json_t *gw_eval_checks_run(const json_t *expect, const char *text, size_t len,
			   double mean_logprob, uint32_t *failed);
/* regcomp (REG_EXTENDED | REG_NOSUB) of an ECMA-style pattern translated to
 * POSIX (\d \w \s and negations); `re` is a regex_t.  0, or -1 when it
 * does not translate or compile. */
int gw_eval_regcomp(void *re, const char *pat);
/* JSON Schema validation of `doc`: 1 valid, 0 not (why in err), -1 the
 * schema uses a keyword the validator does not know how to assert. */
int gw_eval_schema_valid(const json_t *schema, const json_t *doc, char *err, size_t err_len);

/* ---- report.c -------------------------------------------------------- */

/*
 * Compares one case's result (the runner's object: "tokens", "text",
 * "offsets", "mean_logprob") with the baseline's case of the same id
 * (NULL: none) and adds "exact", "divergence" ({"token", "baseline",
 * "this"} or null) and "logprob_delta" to it.
 */
void gw_eval_compare(json_t *result, const json_t *base_case);
/* The baseline's case of `id`, NULL when it has none. */
const json_t *gw_eval_baseline_case(const json_t *baseline, const char *id);
/*
 * The summary of a run ("cases", "exact_match", "check_pass",
 * "mean_logprob_delta", "logprob_drop", latency percentiles, "gates",
 * "passed", "reason") from its results; fills *v (not stamped with the
 * worker: gw_rollout_set_verdict does that).
 */
json_t *gw_eval_summarise(const json_t *results, int have_baseline,
			  const struct gw_eval_gates *g, struct gw_eval_verdict *v);
/* Reads "gates" overrides of `o` (may be NULL) over *g; NULL when fine,
 * else the message. */
const char *gw_eval_gates_parse(const json_t *o, struct gw_eval_gates *g, char *err,
				size_t err_len);

/* ---- run.c ----------------------------------------------------------- */

struct gw_eval;

struct gw_eval_config {
	uint32_t max_cases;        /* rollout.eval_max_cases */
	int64_t case_timeout_ms;   /* rollout.eval_case_timeout_ms */
	struct gw_eval_gates gates; /* rollout.gate_* */
	struct gw_api_limits limits; /* the public API's, for the cases */
};

/*
 * Called once per started run: HTTP status and the response body (owned
 * by the callee).  The verdict is already recorded on the worker when
 * the run completed.
 */
typedef void (*gw_eval_done_fn)(void *arg, int status, json_t *body, int passed);

enum cm_status gw_eval_new(struct event_base *base, struct gw_workers *ws,
			   struct gw_rollout *ro, const struct gw_eval_config *cfg,
			   struct gw_eval **out) CM_WUR;
/* Ends every run (done with 503 "the gateway is stopping"), then frees. */
void gw_eval_free(struct gw_eval *ev);

/*
 * Starts a run on worker `name` of the request `req` ({"set": SET,
 * "baseline": B (optional), "gates": {...} (optional)}; borrowed).
 * CM_OK: done follows exactly once.  Else *status and *err (a new admin
 * error body) say why, and done is not called.
 */
enum cm_status gw_eval_start(struct gw_eval *ev, const char *name, const json_t *req,
			     gw_eval_done_fn done, void *arg, int *status, json_t **err);

#endif
