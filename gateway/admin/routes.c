/*
 * routes.c - the admin API's route table (path pattern, method,
 * handler) and the request parsing shared by the handlers.
 *
 * A path matches a route when its segments match the pattern's literals;
 * its names are then validated (400 naming the field), then the method
 * (405 listing the methods the path takes).  Unknown paths are 404.
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

int gw_admin_key_id_ok(const char *s)
{
	return s && gw_key_id_check(s, strlen(s)) == CM_OK;
}

/* Splits "/admin/a/b/c" into segments (copied into buf). */
static int split_path(const char *path, char buf[256], char *seg[GW_ADMIN_PATH_SEGS_MAX])
{
	int n = 0;
	char *p, *save = NULL;

	if (strncmp(path, "/admin/", 7) != 0 || strlen(path + 7) >= 256)
		return -1;
	snprintf(buf, 256, "%s", path + 7);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (n == GW_ADMIN_PATH_SEGS_MAX)
			return -1;
		seg[n++] = p;
	}
	return n;
}

/* Value of `name` in a query string "a=1&b=2" (copied); 1 found, 0 not. */
int gw_admin_query_get(const char *q, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);

	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);

		if (len > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
			size_t vl = len - nl - 1;

			if (vl >= size)
				vl = size - 1;
			memcpy(out, q + nl + 1, vl);
			out[vl] = '\0';
			return 1;
		}
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* The request body as a JSON object; NULL with *err set (400). */
json_t *gw_admin_body_object(struct gw_request *req, int allow_empty, json_t **err)
{
	size_t len = 0;
	const uint8_t *b = gw_request_body(req, &len);
	json_error_t je;
	json_t *o;

	if (len == 0 && allow_empty)
		return json_object();
	o = json_loadb((const char *)b, len, JSON_REJECT_DUPLICATES, &je);
	if (!o || !json_is_object(o)) {
		*err = gw_admin_error_body("invalid_json", NULL, "expected a JSON object%s%s",
				  o ? "" : ": ", o ? "" : je.text);
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * Reads quota fields of `o` into q.  allow_null: null clears (PATCH).
 * allow_weight: tenants only.  Other members must be in `extra` (NULL
 * terminated).  NULL when fine, else the 400 body naming the field.
 */
json_t *gw_admin_parse_quotas(json_t *o, struct gw_gov_quotas *q, int allow_null,
			    int allow_weight, const char *const *extra)
{
	const char *k;
	json_t *v;

	memset(q, 0, sizeof(*q));
	json_object_foreach(o, k, v) {
		int f = gw_gov_field_by_name(k), known = 0;

		for (int i = 0; extra && extra[i]; i++)
			known |= strcmp(extra[i], k) == 0;
		if (known)
			continue;
		if (f < 0 || (f == GW_GOV_F_WEIGHT && !allow_weight))
			return gw_admin_error_body("unknown_field", k, "unknown field \"%.64s\"%s", k,
					  f == GW_GOV_F_WEIGHT ? ": weight applies to tenants only" : "");
		if (json_is_null(v) && allow_null && f != GW_GOV_F_WEIGHT) {
			q->clear[f] = 1;
			continue;
		}
		if (!json_is_integer(v) ||
		    !gw_gov_value_ok((enum gw_gov_field)f, (long long)json_integer_value(v)))
			return gw_admin_error_body("invalid_value", k,
					  "%s: expected an integer from %lld to %lld%s", k,
					  gw_gov_fields[f].min, gw_gov_fields[f].max,
					  allow_null && f != GW_GOV_F_WEIGHT ? " (or null for no limit)" : "");
		q->set[f] = 1;
		q->val[f] = (long long)json_integer_value(v);
	}
	return NULL;
}

/* An optional integer member in [min, max]; NULL when fine or absent. */
json_t *gw_admin_parse_seconds(json_t *o, const char *name, long long min, long long max,
			     long long *out)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return NULL;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return gw_admin_error_body("invalid_value", name,
				  "%s: expected an integer number of seconds from %lld to %lld",
				  name, min, max);
	*out = (long long)json_integer_value(v);
	return NULL;
}

json_t *gw_admin_only_members(json_t *o, const char *const *allowed)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		int ok = 0;

		for (int i = 0; allowed[i]; i++)
			ok |= strcmp(allowed[i], k) == 0;
		if (!ok)
			return gw_admin_error_body("unknown_field", k, "unknown field \"%.64s\"", k);
	}
	return NULL;
}

json_t *gw_admin_name_error(const char *field, const char *what)
{
	return gw_admin_error_body("invalid_name", field,
			  "%s: expected a %s name of 1 to %d characters: lower-case letters, "
			  "digits, '_', '.' or '-', starting with a letter or digit", field,
			  what, GW_GOV_NAME_MAX);
}

static json_t *method_error(const char *allowed)
{
	return gw_admin_error_body("method_not_allowed", NULL, "expected %s", allowed);
}

/* ---- the route table ---------------------------------------------------------- */

/* What a {name} segment of a pattern holds, validated before the handler. */
enum adm_param { ADM_LIT = 0, ADM_TENANT, ADM_CLIENT, ADM_KEY_ID, ADM_WORKER, ADM_MODEL };

/* A matched request: the op and the pattern's names in order. */
struct adm_args {
	struct adm_op *op;
	struct gw_request *req;
	const char *tenant, *client, *key_id, *worker, *model;
};

struct adm_route {
	const char *pattern;            /* "tenants/{tenant}/clients" */
	enum gw_http_method method;
	void (*fn)(const struct adm_args *x);
};

static void rt_tenants_list(const struct adm_args *x)
{
	gw_admin_start_read(x->op, READ_TENANTS);
}

static void rt_tenant_create(const struct adm_args *x)
{
	gw_admin_ep_create(x->op, x->req, NULL);
}

static void rt_tenant_get(const struct adm_args *x)
{
	snprintf(x->op->tenant, sizeof(x->op->tenant), "%s", x->tenant);
	gw_admin_start_read(x->op, READ_TENANT);
}

static void rt_tenant_patch(const struct adm_args *x)
{
	gw_admin_ep_patch(x->op, x->req, x->tenant, NULL);
}

static void rt_client_create(const struct adm_args *x)
{
	gw_admin_ep_create(x->op, x->req, x->tenant);
}

static void rt_client_op(const struct adm_args *x)
{
	snprintf(x->op->tenant, sizeof(x->op->tenant), "%s", x->tenant);
	snprintf(x->op->client, sizeof(x->op->client), "%s", x->client);
}

static void rt_client_get(const struct adm_args *x)
{
	rt_client_op(x);
	gw_admin_start_read(x->op, READ_CLIENT);
}

static void rt_client_patch(const struct adm_args *x)
{
	rt_client_op(x);
	gw_admin_ep_patch(x->op, x->req, x->tenant, x->client);
}

static void rt_keys_list(const struct adm_args *x)
{
	rt_client_op(x);
	gw_admin_start_read(x->op, READ_KEYS);
}

static void rt_key_issue(const struct adm_args *x)
{
	rt_client_op(x);
	gw_admin_ep_issue(x->op, x->req, x->tenant, x->client, NULL);
}

static void rt_key_revoke(const struct adm_args *x)
{
	gw_admin_ep_revoke(x->op, x->key_id);
}

static void rt_key_rotate(const struct adm_args *x)
{
	gw_admin_ep_issue(x->op, x->req, NULL, NULL, x->key_id);
}

static void rt_usage(const struct adm_args *x)
{
	gw_admin_ep_usage(x->op, gw_request_http(x->req)->query);
}

static void rt_audit(const struct adm_args *x)
{
	gw_admin_ep_audit(x->op, gw_request_http(x->req)->query);
}

static void rt_drain(const struct adm_args *x)
{
	gw_admin_ep_drain(x->op, x->worker);
}

static void rt_eval(const struct adm_args *x)
{
	gw_admin_ep_eval(x->op, x->req, x->worker);
}

static void rt_models(const struct adm_args *x)
{
	gw_admin_ep_models(x->op);
}

static void rt_promote(const struct adm_args *x)
{
	gw_admin_ep_promote(x->op, x->req, x->model);
}

static void rt_rollback(const struct adm_args *x)
{
	gw_admin_ep_rollback(x->op, x->model);
}

/* docs/admin-api.md lists these; a path's methods are named in this order. */
static const struct adm_route adm_routes[] = {
	{ "tenants", GW_HTTP_GET, rt_tenants_list },
	{ "tenants", GW_HTTP_POST, rt_tenant_create },
	{ "tenants/{tenant}", GW_HTTP_GET, rt_tenant_get },
	{ "tenants/{tenant}", GW_HTTP_PATCH, rt_tenant_patch },
	{ "tenants/{tenant}/clients", GW_HTTP_POST, rt_client_create },
	{ "clients/{tenant}/{client}", GW_HTTP_GET, rt_client_get },
	{ "clients/{tenant}/{client}", GW_HTTP_PATCH, rt_client_patch },
	{ "clients/{tenant}/{client}/keys", GW_HTTP_GET, rt_keys_list },
	{ "clients/{tenant}/{client}/keys", GW_HTTP_POST, rt_key_issue },
	{ "keys/{key_id}/revoke", GW_HTTP_POST, rt_key_revoke },
	{ "keys/{key_id}/rotate", GW_HTTP_POST, rt_key_rotate },
	{ "usage", GW_HTTP_GET, rt_usage },
	{ "audit", GW_HTTP_GET, rt_audit },
	{ "workers/{worker}/drain", GW_HTTP_POST, rt_drain },
	{ "workers/{worker}/eval", GW_HTTP_POST, rt_eval },
	{ "models", GW_HTTP_GET, rt_models },
	{ "models/{model}/promote", GW_HTTP_POST, rt_promote },
	{ "models/{model}/rollback", GW_HTTP_POST, rt_rollback },
};
#define ADM_N_ROUTES (sizeof(adm_routes) / sizeof(adm_routes[0]))

static enum adm_param rt_param(const char *pseg)
{
	if (strcmp(pseg, "{tenant}") == 0)
		return ADM_TENANT;
	if (strcmp(pseg, "{client}") == 0)
		return ADM_CLIENT;
	if (strcmp(pseg, "{key_id}") == 0)
		return ADM_KEY_ID;
	if (strcmp(pseg, "{worker}") == 0)
		return ADM_WORKER;
	if (strcmp(pseg, "{model}") == 0)
		return ADM_MODEL;
	return ADM_LIT;
}

/* 1 when seg[0..n) has the shape of `pattern`; the names go into *x. */
static int rt_match(const char *pattern, char *const *seg, int n, struct adm_args *x)
{
	char buf[128], *p, *save = NULL;
	int i = 0;

	snprintf(buf, sizeof(buf), "%s", pattern);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save), i++) {
		if (i >= n)
			return 0;
		switch (rt_param(p)) {
		case ADM_LIT:
			if (strcmp(p, seg[i]) != 0)
				return 0;
			break;
		case ADM_TENANT: x->tenant = seg[i]; break;
		case ADM_CLIENT: x->client = seg[i]; break;
		case ADM_KEY_ID: x->key_id = seg[i]; break;
		case ADM_WORKER: x->worker = seg[i]; break;
		case ADM_MODEL: x->model = seg[i]; break;
		}
	}
	return i == n;
}

/* A model name in a path: what the workers' configurations may name
 * ("llama3.2:1b"), as the audit target's charset allows. */
static int model_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= GW_ADMIN_MODEL_NAME_MAX && s[0] != '.' &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-") == n;
}

/* The 400 for the first invalid name of a matched path, NULL when all are valid. */
static json_t *rt_check_names(const struct adm_args *x)
{
	if (x->tenant && !gw_gov_name_ok(x->tenant))
		return gw_admin_name_error("tenant", "tenant");
	if (x->client && !gw_gov_name_ok(x->client))
		return gw_admin_name_error("client", "client");
	if (x->key_id && !gw_admin_key_id_ok(x->key_id))
		/* Never echo it: it may be a whole key pasted by mistake. */
		return gw_admin_error_body("invalid_name", "key_id",
					   "key_id: expected %d letters and digits (the part "
					   "after slk_)", GW_KEY_ID_LEN);
	if (x->worker && !gw_gov_name_ok(x->worker))
		return gw_admin_name_error("worker", "worker");
	if (x->model && !model_name_ok(x->model))
		return gw_admin_error_body("invalid_name", "model", "model: expected 1 to %d of "
					   "[A-Za-z0-9_.:-], not starting with a dot",
					   GW_ADMIN_MODEL_NAME_MAX);
	return NULL;
}

void gw_admin_route(struct gw_admin *a, struct gw_request *req, const char *actor)
{
	char buf[256], *seg[GW_ADMIN_PATH_SEGS_MAX];
	enum gw_http_method m = gw_request_method(req);
	char allow[64] = "";
	struct adm_args x;
	struct adm_op *op;
	json_t *bad;
	int n, shape = 0;

	op = gw_admin_op_new(a, req, actor);
	if (!op) {
		gw_admin_respond_json(a, req, 500, gw_admin_error_body("internal", NULL,
								       "out of memory"));
		return;
	}
	n = split_path(gw_request_path(req), buf, seg);
	for (size_t i = 0; n >= 1 && i < ADM_N_ROUTES; i++) {
		memset(&x, 0, sizeof(x));
		x.op = op;
		x.req = req;
		if (!rt_match(adm_routes[i].pattern, seg, n, &x))
			continue;
		if (!shape++ && (bad = rt_check_names(&x)) != NULL) {
			gw_admin_op_finish(op, 400, bad);
			return;
		}
		if (adm_routes[i].method == m) {
			adm_routes[i].fn(&x);
			return;
		}
		snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s",
			 allow[0] ? " or " : "", gw_http_method_str(adm_routes[i].method));
	}
	if (shape)
		gw_admin_op_finish(op, 405, method_error(allow));
	else
		gw_admin_op_finish(op, 404, gw_admin_error_body("not_found", NULL,
								"no such admin endpoint"));
}
