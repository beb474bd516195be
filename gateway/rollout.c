/*
 * rollout.c - the roles of the workers and their eval verdicts (see
 * rollout.h).  One entry per configured worker; every question reads the
 * worker table's snapshot (gw_workers_info) for the model and readiness.
 */
#include "gateway/rollout.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"

#define GW_ROLLOUT_CANARY_TAG "sluice-canary-v1"

struct gw_ro_worker {
	enum gw_role role;
	uint32_t pct;             /* canary share, 1..99 (role canary) */
	int have_verdict;
	struct gw_eval_verdict v;
};

struct gw_rollout {
	struct gw_workers *ws;
	struct gw_ro_worker *w;
	size_t n;
};


enum cm_status gw_rollout_new(struct gw_workers *ws, const uint8_t *staged,
			      struct gw_rollout **out)
{
	struct gw_rollout *ro = cm_calloc(1, sizeof(*ro));
	size_t n = gw_workers_count(ws);

	*out = NULL;
	if (!ro)
		return CM_ENOMEM;
	ro->ws = ws;
	ro->n = n;
	ro->w = cm_calloc(n ? n : 1, sizeof(*ro->w));
	if (!ro->w) {
		cm_free(ro);
		return CM_ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		ro->w[i].role = staged && staged[i] ? GW_ROLE_STAGED : GW_ROLE_SERVING;
	*out = ro;
	return CM_OK;
}

void gw_rollout_free(struct gw_rollout *ro)
{
	if (!ro)
		return;
	cm_free(ro->w);
	cm_free(ro);
}

enum gw_role gw_rollout_role(const struct gw_rollout *ro, size_t i)
{
	return i < ro->n ? ro->w[i].role : GW_ROLE_STAGED;
}

const char *gw_rollout_role_name(enum gw_role r)
{
	switch (r) {
	case GW_ROLE_SERVING: return "serving";
	case GW_ROLE_STAGED: return "staged";
	case GW_ROLE_CANARY: return "canary";
	case GW_ROLE_PREVIOUS: return "previous";
	}
	return "unknown";
}

uint32_t gw_rollout_bucket(const uint8_t *salt, size_t salt_len, const char *model)
{
	uint8_t msg[GW_ROLLOUT_REASON_MAX + 32], mac[CM_SHA256_LEN];
	size_t tag = strlen(GW_ROLLOUT_CANARY_TAG), ml = strlen(model);
	uint64_t v = 0;

	if (ml > sizeof(msg) - tag)
		ml = sizeof(msg) - tag;
	memcpy(msg, GW_ROLLOUT_CANARY_TAG, tag);
	memcpy(msg + tag, model, ml);
	cm_hmac_sha256(salt, salt_len, msg, tag + ml, mac);
	for (int k = 0; k < 8; k++)
		v = v << 8 | mac[k];
	return (uint32_t)(v % 100);
}

/* 1 when worker i is connected with a HELLO naming model[0..len). */
static int serves(const struct gw_rollout *ro, size_t i, const char *model, size_t len,
		  struct gw_worker_info *wi)
{
	gw_workers_info(ro->ws, i, wi);
	return wi->connected && wi->hello_ok && wi->hello.model_name.len == len &&
	       memcmp(wi->hello.model_name.ptr, model, len) == 0;
}

void gw_rollout_canary(const struct gw_rollout *ro, const char *model, size_t len,
		       uint32_t *pct, int *canary_ready)
{
	struct gw_worker_info wi;

	*pct = 0;
	*canary_ready = 0;
	for (size_t i = 0; i < ro->n; i++) {
		if (ro->w[i].role != GW_ROLE_CANARY || !serves(ro, i, model, len, &wi))
			continue;
		if (ro->w[i].pct > *pct)
			*pct = ro->w[i].pct;
		if (wi.ready)
			*canary_ready = 1;
	}
}

int gw_rollout_takes_traffic(const struct gw_rollout *ro, size_t i)
{
	return !ro || i >= ro->n || ro->w[i].role == GW_ROLE_SERVING ||
	       ro->w[i].role == GW_ROLE_CANARY;
}

int gw_rollout_admits(const struct gw_rollout *ro, size_t i, int canary)
{
	if (i >= ro->n)
		return 0;
	return ro->w[i].role == (canary ? GW_ROLE_CANARY : GW_ROLE_SERVING);
}

long gw_rollout_find(const struct gw_rollout *ro, const char *name)
{
	struct gw_worker_info wi;

	for (size_t i = 0; i < ro->n; i++) {
		gw_workers_info(ro->ws, i, &wi);
		if (strcmp(wi.name, name) == 0)
			return (long)i;
	}
	return -1;
}

/* Copies worker i's current connection identity into v. */
static void stamp(const struct gw_rollout *ro, size_t i, struct gw_eval_verdict *v)
{
	struct gw_worker_info wi;

	gw_workers_info(ro->ws, i, &wi);
	v->conn_gen = wi.reconnects;
	memcpy(v->model_sha256, wi.hello.model_sha256, sizeof(v->model_sha256));
	snprintf(v->engine_version, sizeof(v->engine_version), "%.*s",
		 wi.hello_ok ? (int)wi.hello.engine_version.len : 0,
		 wi.hello_ok ? wi.hello.engine_version.ptr : "");
}

void gw_rollout_set_verdict(struct gw_rollout *ro, size_t i, struct gw_eval_verdict *v)
{
	if (i >= ro->n)
		return;
	stamp(ro, i, v);
	ro->w[i].v = *v;
	ro->w[i].have_verdict = 1;
}

/* 1 when worker i's verdict passed on the connection it has now; else
 * msg says why not. */
static int verdict_current(const struct gw_rollout *ro, size_t i, char *msg, size_t msg_len)
{
	const struct gw_ro_worker *e = &ro->w[i];
	struct gw_eval_verdict now;

	if (!e->have_verdict) {
		snprintf(msg, msg_len, "no eval has run on it since the gateway started "
			 "(sluicectl eval run --worker NAME)");
		return 0;
	}
	memset(&now, 0, sizeof(now));
	stamp(ro, i, &now);
	if (now.conn_gen != e->v.conn_gen ||
	    memcmp(now.model_sha256, e->v.model_sha256, sizeof(now.model_sha256)) != 0 ||
	    strcmp(now.engine_version, e->v.engine_version) != 0) {
		snprintf(msg, msg_len, "its last eval ran on another connection, model file or "
			 "engine (it reconnected since): run the eval again");
		return 0;
	}
	if (!e->v.passed) {
		snprintf(msg, msg_len, "its last eval failed its gates: %s", e->v.reason);
		return 0;
	}
	return 1;
}

enum cm_status gw_rollout_promote(struct gw_rollout *ro, const char *model,
				  const char *name, uint32_t pct, char *msg, size_t msg_len)
{
	long t = gw_rollout_find(ro, name);
	size_t len = strlen(model);
	struct gw_worker_info wi;
	char why[GW_ROLLOUT_REASON_MAX + 80];

	if (t < 0)
		return cm_fail(msg, msg_len, CM_ENOTFOUND, "no worker \"%s\"", name);
	if (pct < 1 || pct > 100)
		return cm_fail(msg, msg_len, CM_EINVAL, "canary: expected a share from 1 to 100, "
			       "found %u", pct);
	if (!serves(ro, (size_t)t, model, len, &wi))
		return cm_fail(msg, msg_len, CM_EINVAL, "worker \"%s\" does not serve \"%s\" on a "
			       "live connection (found %s)", name, model,
			       wi.hello_ok ? "another model" : "no HELLO");
	if (ro->w[t].role == GW_ROLE_SERVING)
		return cm_fail(msg, msg_len, CM_EINVAL, "worker \"%s\" already serves \"%s\"",
			       name, model);
	if (!verdict_current(ro, (size_t)t, why, sizeof(why)))
		return cm_fail(msg, msg_len, CM_EPERM, "promotion of \"%s\" refused: %s", name, why);
	if (!wi.ready)
		return cm_fail(msg, msg_len, CM_ECLOSED, "worker \"%s\" is not ready (%s)", name,
			       wi.not_ready_reason);
	if (pct < 100) {
		ro->w[t].role = GW_ROLE_CANARY;
		ro->w[t].pct = pct;
			return CM_OK;
	}
	for (size_t i = 0; i < ro->n; i++) {
		if ((long)i == t || !serves(ro, i, model, len, &wi))
			continue;
		if (ro->w[i].role == GW_ROLE_PREVIOUS)
			ro->w[i].role = GW_ROLE_STAGED;
		else if (ro->w[i].role == GW_ROLE_SERVING)
			ro->w[i].role = GW_ROLE_PREVIOUS;
		else if (ro->w[i].role == GW_ROLE_CANARY)
			ro->w[i].role = GW_ROLE_SERVING;
	}
	ro->w[t].role = GW_ROLE_SERVING;
	ro->w[t].pct = 0;
	return CM_OK;
}

enum cm_status gw_rollout_rollback(struct gw_rollout *ro, const char *model,
				   const char **what, char *msg, size_t msg_len)
{
	size_t len = strlen(model), canaries = 0, previous = 0;
	struct gw_worker_info wi;

	*what = "";
	for (size_t i = 0; i < ro->n; i++) {
		if (!serves(ro, i, model, len, &wi))
			continue;
		canaries += ro->w[i].role == GW_ROLE_CANARY;
		previous += ro->w[i].role == GW_ROLE_PREVIOUS;
	}
	if (!canaries && !previous)
		return cm_fail(msg, msg_len, CM_ENOTFOUND, "\"%s\" has no canary and no previous "
			       "workers connected to roll back to", model);
	for (size_t i = 0; i < ro->n; i++) {
		if (!serves(ro, i, model, len, &wi))
			continue;
		if (canaries) {
			if (ro->w[i].role == GW_ROLE_CANARY) {
				ro->w[i].role = GW_ROLE_STAGED;
				ro->w[i].pct = 0;
			}
		} else if (ro->w[i].role == GW_ROLE_SERVING) {
			ro->w[i].role = GW_ROLE_STAGED;
		} else if (ro->w[i].role == GW_ROLE_PREVIOUS) {
			ro->w[i].role = GW_ROLE_SERVING;
		}
	}
	*what = canaries ? "canary" : "previous";
	return CM_OK;
}

/* ---- inventory ------------------------------------------------------ */

static json_t *verdict_json(const struct gw_eval_verdict *v)
{
	char sha[CM_SHA256_HEX_LEN + 1];
	json_t *o;

	cm_hex_encode(v->model_sha256, sizeof(v->model_sha256), sha);
	o = json_pack("{s:b,s:i,s:I,s:s,s:s,s:{s:f,s:f,s:f}}", "passed", v->passed,
		      "cases", (int)v->cases, "time", (json_int_t)v->time_s, "reason", v->reason,
		      "model_sha256", sha, "gates", "min_exact_match", v->gates.min_exact_match,
		      "min_check_pass", v->gates.min_check_pass, "max_logprob_drop",
		      v->gates.max_logprob_drop);
	if (!o)
		return NULL;
	json_object_set_new(o, "exact_match", v->exact_match < 0 ? json_null()
			    : json_real(v->exact_match));
	json_object_set_new(o, "check_pass", v->check_pass < 0 ? json_null()
			    : json_real(v->check_pass));
	json_object_set_new(o, "logprob_drop", json_real(v->logprob_drop));
	return o;
}

static const char *worker_state(const struct gw_worker_info *wi)
{
	if (!wi->connected || !wi->hello_ok)
		return "disconnected";
	if (wi->drained || strcmp(wi->not_ready_reason, "draining") == 0)
		return "draining";
	return wi->ready ? "ready" : "not_ready";
}

json_t *gw_rollout_worker_json(const struct gw_rollout *ro, size_t i)
{
	struct gw_worker_info wi;
	const struct proto_hello *h = &wi.hello;
	char sha[CM_SHA256_HEX_LEN + 1] = "";
	json_t *o;

	gw_workers_info(ro->ws, i, &wi);
	if (wi.hello_ok)
		cm_hex_encode(h->model_sha256, sizeof(h->model_sha256), sha);
	o = json_pack("{s:s,s:s,s:s,s:s%,s:s%,s:s%,s:s%,s:s}", "name", wi.name, "role",
		      gw_rollout_role_name(ro->w[i].role), "state", worker_state(&wi),
		      "model", wi.hello_ok ? h->model_name.ptr : "",
		      (size_t)(wi.hello_ok ? h->model_name.len : 0),
		      "engine_version", wi.hello_ok ? h->engine_version.ptr : "",
		      (size_t)(wi.hello_ok ? h->engine_version.len : 0),
		      "backend", wi.hello_ok ? h->backend.ptr : "",
		      (size_t)(wi.hello_ok ? h->backend.len : 0),
		      "device", wi.hello_ok ? h->device.ptr : "",
		      (size_t)(wi.hello_ok ? h->device.len : 0), "model_sha256", sha);
	if (!o)
		return NULL;
	if (ro->w[i].role == GW_ROLE_CANARY)
		json_object_set_new(o, "canary_pct", json_integer(ro->w[i].pct));
	json_object_set_new(o, "last_eval", ro->w[i].have_verdict
			    ? verdict_json(&ro->w[i].v) : json_null());
	return o;
}

/* Adds worker i to its model's entry in `models` (created on first use). */
static int inventory_add(const struct gw_rollout *ro, size_t i, json_t *models)
{
	json_t *w = gw_rollout_worker_json(ro, i), *m, *ws;
	const char *name;

	if (!w)
		return -1;
	name = json_string_value(json_object_get(w, "model"));
	m = json_object_get(models, name && *name ? name : "");
	if (!m) {
		m = json_pack("{s:[],s:b}", "workers", "digest_mismatch", 0);
		if (!m || json_object_set_new(models, name && *name ? name : "", m) != 0) {
			json_decref(w);
			return -1;
		}
	}
	ws = json_object_get(m, "workers");
	return json_array_append_new(ws, w);
}

/* digest_mismatch: the serving and canary workers differ in file or engine. */
static void inventory_flag(json_t *m)
{
	const char *sha = NULL, *eng = NULL;
	size_t k;
	json_t *w;

	json_array_foreach(json_object_get(m, "workers"), k, w) {
		const char *role = json_string_value(json_object_get(w, "role"));
		const char *s = json_string_value(json_object_get(w, "model_sha256"));
		const char *e = json_string_value(json_object_get(w, "engine_version"));

		if (!role || (strcmp(role, "serving") != 0 && strcmp(role, "canary") != 0) ||
		    !s || !*s)
			continue;
		if (sha && (strcmp(sha, s) != 0 || strcmp(eng, e ? e : "") != 0))
			json_object_set_new(m, "digest_mismatch", json_true());
		if (!sha) {
			sha = s;
			eng = e ? e : "";
		}
	}
}

json_t *gw_rollout_inventory(const struct gw_rollout *ro)
{
	json_t *models = json_object(), *out, *m;
	const char *name;

	if (!models)
		return NULL;
	for (size_t i = 0; i < ro->n; i++) {
		if (inventory_add(ro, i, models) != 0) {
			json_decref(models);
			return NULL;
		}
	}
	json_object_foreach(models, name, m)
		inventory_flag(m);
	out = json_pack("{s:o}", "models", models);
	return out;
}
