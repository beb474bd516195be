/*
 * writes.c - admin mutations: tenants and clients created or
 * patched, keys issued, rotated, revoked, workers drained.  Each step is one
 * governance script (gateway/gov/records.h) followed by its audit record;
 * the response goes after the last audit record was written.
 */
#include "gateway/admin/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"

static void run_step(struct adm_op *op);

static void on_audit(void *arg, enum cm_status st, const struct gw_audit_entry *e)
{
	struct adm_op *op = arg;

	(void)e;
	if (st != CM_OK) {
		op->a->stats.audit_failures++;
		/* The action happened: say so, and that it is not recorded. */
		if (op->body && json_is_object(op->body))
			json_object_set_new(op->body, "audit", json_string("failed"));
		gw_admin_op_finish(op, op->status, json_incref(op->body));
		return;
	}
	op->a->stats.mutations++;
	if (op->status < 300 && op->cur + 1 < op->nsteps) {
		op->cur++;
		run_step(op);
		return;
	}
	gw_admin_op_finish(op, op->status, json_incref(op->body));
}

/* Records the current step's outcome, then continues in on_audit. */
void gw_admin_audit(struct adm_op *op, enum gw_audit_action action, const char *target,
		    enum gw_audit_result res)
{
	if (!op->a->ac || gw_audit_append_async(op->a->ac, op->a->ns, op->actor, action,
						target, res, on_audit, op) != CM_OK)
		on_audit(op, CM_EIO, NULL);
}

static void set_error(struct adm_op *op, int status, json_t *body)
{
	op->status = status;
	json_decref(op->body);
	op->body = body;
}

/* Fills the body of a successful issue/rotate and wipes the local copy. */
static void issued_body(struct adm_op *op)
{
	json_t *o = json_object();

	json_object_set_new(o, "key_id", json_string(op->key_id));
	json_object_set_new(o, "key", json_string(op->key));
	json_object_set_new(o, "tenant", json_string(op->tenant));
	json_object_set_new(o, "client", json_string(op->client));
	json_object_set_new(o, "expires", op->expires_in ?
			    json_integer(cm_wall_ns() / CM_NS_PER_S + op->expires_in) :
			    json_null());
	if (op->old_id[0]) {
		json_object_set_new(o, "replaces", json_string(op->old_id));
		json_object_set_new(o, "replaced_expires", json_integer(op->old_expires));
	}
	cm_wipe(op->key, sizeof(op->key));
	set_error(op, op->old_id[0] ? 200 : 201, o);
}

/* Generates a key and (re)builds the issue step.  0, or -1 after set_error. */
static int build_issue(struct adm_op *op, struct adm_step *s)
{
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	int64_t now = cm_wall_ns() / CM_NS_PER_S;
	enum cm_status st;

	st = gw_key_generate(op->a->pepper, op->key, op->key_id, mac);
	if (st == CM_OK) {
		cm_hex_encode(mac, sizeof(mac), hmac_hex);
		st = gw_gov_cmd_key_issue(&s->cmd, op->a->ns, op->tenant, op->client,
					  op->key_id, hmac_hex, now,
					  op->expires_in ? now + op->expires_in : 0);
	}
	cm_wipe(mac, sizeof(mac));
	if (st != CM_OK) {
		set_error(op, 500, gw_admin_error_body("internal", NULL, "cannot generate a key"));
		return -1;
	}
	s->kind = STEP_ISSUE;
	return 0;
}

static void on_step_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct adm_op *op = privdata;
	struct adm_step *s = &op->steps[op->cur];
	redisReply *r = reply;
	enum gw_gov_result res;
	enum gw_audit_result ares = GW_AUDIT_OK;
	char target[GW_AUDIT_TARGET_MAX + 1];

	(void)ac;
	snprintf(target, sizeof(target), "%s", s->target);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		set_error(op, 503, gw_admin_redis_down());
		gw_admin_audit(op, s->action, target, GW_AUDIT_ERROR);
		return;
	}
	if (s->kind == STEP_SHORTEN) {
		struct gw_gov_shortened sh;

		if (gw_gov_parse_shorten(r, &sh) != CM_OK) {
			set_error(op, 500, gw_admin_error_body("internal", NULL, "unexpected reply from Redis"));
			gw_admin_audit(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		if (sh.result == GW_GOV_NOTFOUND) {
			set_error(op, 404, gw_admin_error_body("not_found", NULL, "no key \"%s\"", op->old_id));
			gw_admin_audit(op, s->action, target, GW_AUDIT_NOT_FOUND);
			return;
		}
		if (sh.result == GW_GOV_REVOKED) {
			set_error(op, 409, gw_admin_error_body("conflict", NULL, "key %s is revoked: issue "
						      "a new key for %s/%s instead", op->old_id,
						      sh.tenant, sh.client));
			gw_admin_audit(op, s->action, target, GW_AUDIT_CONFLICT);
			return;
		}
		snprintf(op->tenant, sizeof(op->tenant), "%s", sh.tenant);
		snprintf(op->client, sizeof(op->client), "%s", sh.client);
		op->old_expires = sh.expires_s;
		if (build_issue(op, s) != 0) {
			gw_admin_audit(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		run_step(op); /* the same step, now an issue */
		return;
	}
	if (gw_gov_parse(&s->cmd, r, &res) != CM_OK) {
		set_error(op, 500, gw_admin_error_body("internal", NULL, "unexpected reply from Redis"));
		gw_admin_audit(op, s->action, target, GW_AUDIT_ERROR);
		return;
	}
	if (s->kind == STEP_ISSUE && res == GW_GOV_EXISTS &&
	    ++op->attempts < GW_ADMIN_ISSUE_ATTEMPTS) {
		if (build_issue(op, s) != 0) {
			gw_admin_audit(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		run_step(op);
		return;
	}
	switch (res) {
	case GW_GOV_DONE:
	case GW_GOV_ALREADY:
		if (s->kind == STEP_ISSUE) {
			if (op->old_id[0])
				snprintf(target, sizeof(target), "%s>%s", op->old_id, op->key_id);
			else
				snprintf(target, sizeof(target), "%s/%s/%s", op->tenant,
					 op->client, op->key_id);
			issued_body(op);
		} else if (res == GW_GOV_ALREADY && op->body) {
			json_object_set_new(op->body, "already_revoked", json_true());
		}
		break;
	case GW_GOV_EXISTS:
		ares = GW_AUDIT_CONFLICT;
		set_error(op, 409, gw_admin_error_body("conflict", NULL, s->kind == STEP_ISSUE ?
					      "could not allocate a unique key id" :
					      "%s \"%s\" already exists", s->what, s->target));
		break;
	case GW_GOV_PARENT_MISSING:
		ares = GW_AUDIT_NOT_FOUND;
		if (s->kind == STEP_ISSUE)
			set_error(op, 404, gw_admin_error_body("not_found", NULL, "no client \"%s/%s\"",
						      op->tenant, op->client));
		else
			set_error(op, 404, gw_admin_error_body("not_found", NULL, "no tenant \"%s\"",
						      op->tenant));
		break;
	case GW_GOV_NOTFOUND:
	case GW_GOV_REVOKED:
		ares = GW_AUDIT_NOT_FOUND;
		set_error(op, 404, gw_admin_error_body("not_found", NULL, "no %s \"%s\"", s->what,
					      s->target));
		break;
	}
	gw_admin_audit(op, s->action, target, ares);
}

static void run_step(struct adm_op *op)
{
	struct adm_step *s = &op->steps[op->cur];

	if (!op->a->ac ||
	    redisAsyncCommandArgv(op->a->ac, on_step_reply, op, s->cmd.argc, s->cmd.argv,
				  s->cmd.argvlen) != REDIS_OK) {
		/* Nothing was sent: nothing to audit. */
		gw_admin_op_finish(op, 503, gw_admin_redis_down());
	}
}

static void start_steps(struct adm_op *op)
{
	op->cur = 0;
	run_step(op);
}

/* POST /admin/tenants and POST /admin/tenants/{t}/clients. */
void gw_admin_ep_create(struct adm_op *op, struct gw_request *req, const char *tenant)
{
	static const char *const extra[] = {"name", NULL};
	struct adm_step *s = &op->steps[0];
	struct gw_gov_quotas q;
	json_t *o, *err = NULL, *name;
	const char *n;
	int is_client = tenant != NULL;
	enum cm_status st;

	o = gw_admin_body_object(req, 0, &err);
	if (!o) {
		gw_admin_op_finish(op, 400, err);
		return;
	}
	err = gw_admin_parse_quotas(o, &q, 0, !is_client, extra);
	name = json_object_get(o, "name");
	n = json_string_value(name);
	if (!err && (!n || !gw_gov_name_ok(n)))
		err = gw_admin_name_error("name", is_client ? "client" : "tenant");
	if (err) {
		json_decref(o);
		gw_admin_op_finish(op, 400, err);
		return;
	}
	if (is_client) {
		snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
		snprintf(op->client, sizeof(op->client), "%s", n);
		snprintf(s->target, sizeof(s->target), "%s/%s", tenant, n);
		st = gw_gov_cmd_client_create(&s->cmd, op->a->ns, tenant, n, &q,
					      cm_wall_ns() / CM_NS_PER_S);
		s->action = GW_AUDIT_CLIENT_CREATE;
		s->what = "client";
		op->body = json_pack("{s:s,s:s}", "tenant", tenant, "client", n);
	} else {
		char salt_hex[CM_SHA256_HEX_LEN + 1];
		uint8_t salt[32];

		snprintf(op->tenant, sizeof(op->tenant), "%s", n);
		snprintf(s->target, sizeof(s->target), "%s", n);
		/* The cache salt comes from the CSPRNG, never from a request. */
		st = cm_random_bytes(salt, sizeof(salt));
		cm_hex_encode(salt, sizeof(salt), salt_hex);
		cm_wipe(salt, sizeof(salt));
		if (st == CM_OK)
			st = gw_gov_cmd_tenant_create(&s->cmd, op->a->ns, n, &q, salt_hex,
						      cm_wall_ns() / CM_NS_PER_S);
		cm_wipe(salt_hex, sizeof(salt_hex));
		s->action = GW_AUDIT_TENANT_CREATE;
		s->what = "tenant";
		op->body = json_pack("{s:s}", "tenant", n);
	}
	json_decref(o);
	if (st != CM_OK) {
		gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "cannot build the command"));
		return;
	}
	s->kind = STEP_GOV;
	op->status = 201;
	op->nsteps = 1;
	start_steps(op);
}

/* PATCH /admin/tenants/{t} and PATCH /admin/clients/{t}/{c}. */
void gw_admin_ep_patch(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client)
{
	static const char *const extra[] = {"disabled", NULL};
	struct gw_gov_quotas q;
	json_t *o, *err = NULL, *dis;
	int nq = 0;
	char target[2 * GW_GOV_NAME_MAX + 2];

	o = gw_admin_body_object(req, 0, &err);
	if (!o) {
		gw_admin_op_finish(op, 400, err);
		return;
	}
	err = gw_admin_parse_quotas(o, &q, 1, client == NULL, extra);
	dis = json_object_get(o, "disabled");
	if (!err && dis && !json_is_boolean(dis))
		err = gw_admin_error_body("invalid_value", "disabled", "disabled: expected true or false");
	for (int f = 0; f < GW_GOV_F_COUNT; f++)
		nq += q.set[f] + q.clear[f];
	if (!err && nq == 0 && !dis)
		err = gw_admin_error_body("invalid_value", NULL, "nothing to change: expected quota "
				 "fields%s or disabled", client ? "" : ", weight");
	if (err) {
		json_decref(o);
		gw_admin_op_finish(op, 400, err);
		return;
	}
	snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
	if (client) {
		snprintf(op->client, sizeof(op->client), "%s", client);
		snprintf(target, sizeof(target), "%s/%s", tenant, client);
	} else {
		snprintf(target, sizeof(target), "%s", tenant);
	}
	op->nsteps = 0;
	if (nq > 0) {
		struct adm_step *s = &op->steps[op->nsteps++];

		if (gw_gov_cmd_update(&s->cmd, op->a->ns, tenant, client, &q) != CM_OK)
			op->nsteps = -1;
		s->kind = STEP_GOV;
		s->action = client ? GW_AUDIT_CLIENT_SET : GW_AUDIT_TENANT_SET;
		s->what = client ? "client" : "tenant";
		snprintf(s->target, sizeof(s->target), "%s", target);
	}
	if (dis && op->nsteps >= 0) {
		struct adm_step *s = &op->steps[op->nsteps++];
		int d = json_is_true(dis);

		if (gw_gov_cmd_flag(&s->cmd, op->a->ns, tenant, client, d) != CM_OK)
			op->nsteps = -1;
		s->kind = STEP_GOV;
		s->action = client ? (d ? GW_AUDIT_CLIENT_DISABLE : GW_AUDIT_CLIENT_ENABLE)
				   : (d ? GW_AUDIT_TENANT_DISABLE : GW_AUDIT_TENANT_ENABLE);
		s->what = client ? "client" : "tenant";
		snprintf(s->target, sizeof(s->target), "%s", target);
	}
	json_decref(o);
	if (op->nsteps <= 0) {
		gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "cannot build the command"));
		return;
	}
	op->body = client ? json_pack("{s:s,s:s,s:b}", "tenant", tenant, "client", client,
				      "updated", 1)
			  : json_pack("{s:s,s:b}", "tenant", tenant, "updated", 1);
	op->status = 200;
	start_steps(op);
}

/* POST /admin/clients/{t}/{c}/keys and POST /admin/keys/{id}/rotate. */
void gw_admin_ep_issue(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client, const char *old_id)
{
	static const char *const issue_members[] = {"expires_in", NULL};
	static const char *const rotate_members[] = {"expires_in", "overlap", NULL};
	struct adm_step *s = &op->steps[0];
	json_t *o, *err = NULL;

	if (!op->a->pepper) {
		gw_admin_op_finish(op, 503, gw_admin_error_body("unavailable", NULL, "key issue is not configured "
					      "on this gateway (no pepper file)"));
		return;
	}
	o = gw_admin_body_object(req, 1, &err);
	if (!o) {
		gw_admin_op_finish(op, 400, err);
		return;
	}
	op->overlap = GW_ADMIN_ROTATE_OVERLAP_DEFAULT_S;
	err = gw_admin_only_members(o, old_id ? rotate_members : issue_members);
	if (!err)
		err = gw_admin_parse_seconds(o, "expires_in", 1, GW_GOV_DURATION_MAX_S, &op->expires_in);
	if (!err && old_id)
		err = gw_admin_parse_seconds(o, "overlap", 0, GW_GOV_DURATION_MAX_S, &op->overlap);
	json_decref(o);
	if (err) {
		gw_admin_op_finish(op, 400, err);
		return;
	}
	op->nsteps = 1;
	op->status = 201;
	if (old_id) {
		snprintf(op->old_id, sizeof(op->old_id), "%s", old_id);
		snprintf(s->target, sizeof(s->target), "%s", old_id);
		s->action = GW_AUDIT_KEY_ROTATE;
		s->what = "key";
		s->kind = STEP_SHORTEN;
		if (gw_gov_cmd_key_shorten(&s->cmd, op->a->ns, old_id,
					   cm_wall_ns() / CM_NS_PER_S + op->overlap) != CM_OK) {
			gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "cannot build the command"));
			return;
		}
	} else {
		snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
		snprintf(op->client, sizeof(op->client), "%s", client);
		snprintf(s->target, sizeof(s->target), "%s/%s", tenant, client);
		s->action = GW_AUDIT_KEY_ISSUE;
		s->what = "client";
		if (build_issue(op, s) != 0) {
			gw_admin_op_finish(op, op->status, json_incref(op->body));
			return;
		}
	}
	start_steps(op);
}

void gw_admin_ep_revoke(struct adm_op *op, const char *id)
{
	struct adm_step *s = &op->steps[0];

	if (gw_gov_cmd_key_revoke(&s->cmd, op->a->ns, id, cm_wall_ns() / CM_NS_PER_S) != CM_OK) {
		gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "cannot build the command"));
		return;
	}
	s->kind = STEP_GOV;
	s->action = GW_AUDIT_KEY_REVOKE;
	s->what = "key";
	snprintf(s->target, sizeof(s->target), "%s", id);
	op->body = json_pack("{s:s,s:b,s:b}", "key_id", id, "revoked", 1,
			     "already_revoked", 0);
	op->status = 200;
	op->nsteps = 1;
	start_steps(op);
}

void gw_admin_ep_drain(struct adm_op *op, const char *name)
{
	enum gw_audit_result res = GW_AUDIT_OK;
	enum cm_status st;
	char target[GW_AUDIT_TARGET_MAX + 1];

	if (!op->a->drain) {
		gw_admin_op_finish(op, 503, gw_admin_error_body("unavailable", NULL,
					      "worker drain is not available on this gateway"));
		return;
	}
	st = op->a->drain(name, op->a->drain_arg);
	snprintf(target, sizeof(target), "worker:%s", name);
	op->nsteps = 1;
	op->steps[0].action = GW_AUDIT_WORKER_DRAIN;
	if (st == CM_OK) {
		op->status = 202;
		op->body = json_pack("{s:s,s:b}", "worker", name, "draining", 1);
	} else if (st == CM_ENOTFOUND) {
		res = GW_AUDIT_NOT_FOUND;
		set_error(op, 404, gw_admin_error_body("not_found", NULL, "no worker \"%s\"", name));
	} else {
		res = GW_AUDIT_ERROR;
		set_error(op, 500, gw_admin_error_body("internal", NULL, "drain failed: %s",
					      cm_status_str(st)));
	}
	gw_admin_audit(op, GW_AUDIT_WORKER_DRAIN, target, res);
}
