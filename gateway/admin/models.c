/*
 * models.c - the admin endpoints of the model change procedure
 * (docs/operations.md, docs/admin-api.md): the inventory, eval runs on one
 * worker, promotion (whole or canary) and rollback.  The state is
 * gateway/rollout.c's, the runs gateway/eval/'s; each step here ends in
 * an audit record before the answer.  Eval prompts and outputs pass
 * through in the bodies only: nothing of them is logged or written to
 * Redis (the audit record names the worker and the result).
 */
#include "gateway/admin/internal.h"

#include <stdio.h>
#include <string.h>

#include "gateway/eval/eval.h"
#include "gateway/rollout.h"

static int models_wired(struct adm_op *op)
{
	if (op->a->rollout && op->a->eval)
		return 1;
	gw_admin_op_finish(op, 503, gw_admin_error_body("unavailable", NULL, "the model "
							"procedure is not available on this gateway"));
	return 0;
}

void gw_admin_ep_models(struct adm_op *op)
{
	json_t *inv;

	if (!models_wired(op))
		return;
	inv = gw_rollout_inventory(op->a->rollout);
	if (!inv) {
		gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "out of memory"));
		return;
	}
	gw_admin_op_finish(op, 200, inv);
}

/* The model's workers as in the inventory (a new array). */
static json_t *model_workers(struct gw_admin *a, const char *model)
{
	json_t *inv = gw_rollout_inventory(a->rollout);
	json_t *w = json_object_get(json_object_get(json_object_get(inv, "models"), model), "workers");

	w = w ? json_incref(w) : json_array();
	json_decref(inv);
	return w;
}

static enum gw_audit_result audit_result(enum cm_status st, int *status, const char **type)
{
	switch (st) {
	case CM_OK: *status = 200; *type = ""; return GW_AUDIT_OK;
	case CM_ENOTFOUND: *status = 404; *type = "not_found"; return GW_AUDIT_NOT_FOUND;
	case CM_EPERM: *status = 409; *type = "gate_failed"; return GW_AUDIT_REFUSED;
	case CM_ECLOSED: *status = 409; *type = "not_ready"; return GW_AUDIT_CONFLICT;
	default: *status = 400; *type = "invalid_value"; return GW_AUDIT_INVALID;
	}
}

void gw_admin_ep_promote(struct adm_op *op, struct gw_request *req, const char *model)
{
	static const char *const members[] = { "worker", "canary", NULL };
	char msg[400], target[GW_AUDIT_TARGET_MAX + 1];
	json_t *err = NULL, *o, *jw, *jc;
	const char *worker, *type;
	json_int_t pct = 100;
	enum gw_audit_result res;
	enum cm_status st;
	int status;

	if (!models_wired(op))
		return;
	o = gw_admin_body_object(req, 0, &err);
	if (o && !(err = gw_admin_only_members(o, members))) {
		jw = json_object_get(o, "worker");
		jc = json_object_get(o, "canary");
		if (!json_is_string(jw) || !gw_gov_name_ok(json_string_value(jw)))
			err = gw_admin_name_error("worker", "worker");
		else if (jc && (!json_is_integer(jc) || json_integer_value(jc) < 1 ||
				json_integer_value(jc) > 100))
			err = gw_admin_error_body("invalid_value", "canary", "canary: expected a "
						  "percentage from 1 to 100");
		else if (jc)
			pct = json_integer_value(jc);
	}
	if (err) {
		json_decref(o);
		gw_admin_op_finish(op, 400, err);
		return;
	}
	worker = json_string_value(json_object_get(o, "worker"));
	snprintf(target, sizeof(target), "model:%s/%s@%d", model, worker, (int)pct);
	st = gw_rollout_promote(op->a->rollout, model, worker, (uint32_t)pct, msg, sizeof(msg));
	res = audit_result(st, &status, &type);
	op->status = status;
	op->body = st == CM_OK
		? json_pack("{s:s,s:s,s:I,s:o}", "model", model, "worker", worker, "canary", pct,
			    "workers", model_workers(op->a, model))
		: gw_admin_error_body(type, NULL, "%s", msg);
	json_decref(o);
	op->nsteps = 1;
	gw_admin_audit(op, GW_AUDIT_MODEL_PROMOTE, target, res);
}

void gw_admin_ep_rollback(struct adm_op *op, const char *model)
{
	char msg[400], target[GW_AUDIT_TARGET_MAX + 1];
	const char *what = "", *type;
	enum gw_audit_result res;
	enum cm_status st;
	int status;

	if (!models_wired(op))
		return;
	snprintf(target, sizeof(target), "model:%s", model);
	st = gw_rollout_rollback(op->a->rollout, model, &what, msg, sizeof(msg));
	res = audit_result(st, &status, &type);
	op->status = status;
	op->body = st == CM_OK
		? json_pack("{s:s,s:s,s:o}", "model", model, "rolled_back", what, "workers",
			    model_workers(op->a, model))
		: gw_admin_error_body(type, NULL, "%s", msg);
	op->nsteps = 1;
	gw_admin_audit(op, GW_AUDIT_MODEL_ROLLBACK, target, res);
}

static void eval_done(void *arg, int status, json_t *body, int passed)
{
	struct adm_op *op = arg;
	int recorded = json_is_null(json_object_get(json_object_get(body, "summary"), "passed"));

	op->status = status;
	op->body = body;
	op->nsteps = 1;
	gw_admin_audit(op, recorded ? GW_AUDIT_EVAL_RECORD : GW_AUDIT_EVAL_RUN, op->client,
		       status != 200 ? GW_AUDIT_ERROR : recorded || passed ? GW_AUDIT_OK
		       : GW_AUDIT_FAILED);
}

void gw_admin_ep_eval(struct adm_op *op, struct gw_request *req, const char *worker)
{
	json_t *err = NULL, *o;
	int status = 0;

	if (!models_wired(op))
		return;
	o = gw_admin_body_object(req, 0, &err);
	if (!o) {
		gw_admin_op_finish(op, 400, err);
		return;
	}
	/* the audit target, kept in the op while the run goes on */
	snprintf(op->client, sizeof(op->client), "worker:%.56s", worker);
	if (gw_eval_start(op->a->eval, worker, o, eval_done, op, &status, &err) != CM_OK)
		gw_admin_op_finish(op, status, err);
	json_decref(o);
}
