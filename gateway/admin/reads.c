/*
 * reads.c - admin reads: tenants, one tenant with its clients, a
 * client, its keys, usage by day, the audit log.  Staged: names first
 * (SMEMBERS), then one HGETALL per name, pipelined on one connection.
 */
#include "gateway/admin/internal.h"

#include "gateway/gov/reader.h"

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

static void read_stage(struct adm_op *op);
static void usage_row(struct adm_op *op, const redisReply *r, size_t idx);

/* Fields never shown by a read. */
static const char *const hide_tenant[] = {"salt", NULL};
static const char *const hide_key[] = {"hmac", NULL};

/* Keeps the valid names of an SMEMBERS reply, sorted. */
static int rd_key_id_ok(const char *s)
{
	return gw_admin_key_id_ok(s);
}

static int rd_name_ok(const char *s)
{
	return gw_gov_name_ok(s);
}

/* The valid names of an SMEMBERS reply, sorted, copied into op->names. */
static int take_names(struct adm_op *op, const redisReply *r, int key_ids)
{
	size_t n = 0;
	const char **v = gw_gov_sorted_members(r, key_ids ? rd_key_id_ok : rd_name_ok, &n);

	if (!v)
		return -1;
	op->names = cm_calloc(n + 1, sizeof(*op->names));
	for (size_t i = 0; op->names && i < n; i++) {
		op->names[i] = cm_strdup(v[i]);
		if (!op->names[i])
			break;
		op->nnames++;
	}
	cm_free(v);
	return op->names && op->nnames == n ? 0 : -1;
}
static void on_read_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct adm_op *op = privdata;
	redisReply *r = reply;
	size_t idx = (size_t)op->recv++;

	(void)ac;
	op->pending--;
	if (!r || r->type == REDIS_REPLY_ERROR)
		op->failed = 1;
	if (!op->failed) {
		switch (op->rk) {
		case READ_TENANTS:
		case READ_KEYS:
			if (op->stage == 0) {
				if (take_names(op, r, op->rk == READ_KEYS) != 0)
					op->failed = 1;
			} else if (r->elements > 0) {
				json_t *o = gw_gov_record_json(r, op->rk == READ_KEYS ? hide_key : hide_tenant);

				if (op->rk == READ_KEYS) {
					int64_t exp = json_integer_value(json_object_get(o, "expires"));
					const char *st = "active";

					if (json_is_true(json_object_get(o, "revoked")))
						st = "revoked";
					else if (exp > 0 && exp <= cm_wall_ns() / CM_NS_PER_S)
						st = "expired";
					json_object_set_new(o, "status", json_string(st));
				}
				json_array_append_new(op->arr, o);
			}
			break;
		case READ_TENANT:
			if (op->stage == 0 && idx == 0) {
				if (r->elements == 0) {
					op->status = 404;
				} else {
					json_decref(op->body);
					op->body = gw_gov_record_json(r, hide_tenant);
				}
			} else if (op->stage == 0) {
				if (take_names(op, r, 0) != 0)
					op->failed = 1;
			} else if (r->elements > 0) {
				json_array_append_new(op->arr, gw_gov_record_json(r, hide_tenant));
			}
			break;
		case READ_CLIENT:
			if (r->elements == 0) {
				op->status = 404;
			} else {
				json_decref(op->body);
				op->body = gw_gov_record_json(r, hide_tenant);
			}
			break;
		case READ_USAGE:
			if (op->stage == 0) {
				if (take_names(op, r, 0) != 0)
					op->failed = 1;
			} else {
				usage_row(op, r, idx);
			}
			break;
		case READ_AUDIT:
			for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
				struct gw_audit_entry e;
				json_t *o;

				if (gw_audit_parse_entry(r->element[i], &e) != CM_OK) {
					o = json_pack("{s:s}", "malformed", "see sluicectl audit verify");
				} else {
					o = json_pack("{s:s,s:I,s:I,s:s,s:s,s:s,s:s,s:s,s:s}",
						      "id", e.id, "seq", (json_int_t)e.seq,
						      "time_us", (json_int_t)e.time_us, "actor", e.actor,
						      "action", e.action, "target", e.target,
						      "result", e.result, "prev", e.prev, "hash", e.hash);
				}
				json_array_append_new(op->arr, o);
			}
			break;
		}
	}
	if (op->pending > 0)
		return;
	if (op->failed) {
		gw_admin_op_finish(op, 503, gw_admin_redis_down());
		return;
	}
	op->stage++;
	read_stage(op);
}

/* Sends one command of a read; counts it as pending. */
static int read_send(struct adm_op *op, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = op->a->ac ? redisvAsyncCommand(op->a->ac, on_read_reply, op, fmt, ap)
		       : REDIS_ERR;
	va_end(ap);
	if (rc != REDIS_OK) {
		op->failed = 1;
		return -1;
	}
	op->pending++;
	return 0;
}

static void usage_row(struct adm_op *op, const redisReply *r, size_t idx)
{
	struct gw_usage_counts c;
	/* Stage-1 commands: for each day, for each tenant (names or the one
	 * asked), the tenant hash then (with_clients) the client hash. */
	/* idx counts the replies of this stage, in the order sent. */
	size_t per_day = op->nnames * (op->with_clients ? 2u : 1u);
	size_t day_i = per_day ? idx / per_day : 0, rest = per_day ? idx % per_day : 0;
	size_t t_i = op->with_clients ? rest / 2 : rest;
	int is_client = op->with_clients && rest % 2 == 1;
	char day[GW_USAGE_DAY_LEN + 1];
	json_t *row;

	memset(&c, 0, sizeof(c));
	if (gw_usage_counts_add(&c, r) != CM_OK || c.v[GW_USAGE_F_REQUESTS] == 0 ||
	    gw_usage_day(op->from + (int64_t)day_i * 86400, day) != CM_OK)
		return;
	row = json_object();
	json_object_set_new(row, "day", json_string(day));
	json_object_set_new(row, "tenant", json_string(op->names[t_i]));
	json_object_set_new(row, "client", is_client ? json_string(op->client) : json_null());
	for (int f = 0; f < GW_USAGE_F_COUNT; f++)
		json_object_set_new(row, gw_usage_field_name((enum gw_usage_field)f),
				    json_integer(c.v[f]));
	json_array_append_new(op->arr, row);
}

static void read_stage(struct adm_op *op)
{
	char key[GW_GOV_KEYNAME_MAX], full[2 * GW_GOV_NAME_MAX + 2];

	op->recv = 0;
	switch (op->rk) {
	case READ_TENANTS:
		if (op->stage == 0) {
			if (gw_gov_key(key, op->a->ns, "tenants", NULL, NULL) == CM_OK)
				(void)read_send(op, "SMEMBERS %s", key);
		} else if (op->stage == 1) {
			for (size_t i = 0; i < op->nnames && !op->failed; i++)
				if (gw_gov_key(key, op->a->ns, "tenant", op->names[i], NULL) == CM_OK)
					(void)read_send(op, "HGETALL %s", key);
		} else {
			gw_admin_op_finish(op, 200, json_pack("{s:O}", "tenants", op->arr));
			return;
		}
		break;
	case READ_TENANT:
		if (op->stage == 0) {
			if (gw_gov_key(key, op->a->ns, "tenant", op->tenant, NULL) == CM_OK)
				(void)read_send(op, "HGETALL %s", key);
			if (gw_gov_key(key, op->a->ns, "tenant", op->tenant, "clients") == CM_OK)
				(void)read_send(op, "SMEMBERS %s", key);
		} else if (op->stage == 1 && op->status != 404) {
			for (size_t i = 0; i < op->nnames && !op->failed; i++) {
				snprintf(full, sizeof(full), "%s/%s", op->tenant, op->names[i]);
				if (gw_gov_key(key, op->a->ns, "client", full, NULL) == CM_OK)
					(void)read_send(op, "HGETALL %s", key);
			}
		} else if (op->status == 404) {
			gw_admin_op_finish(op, 404, gw_admin_error_body("not_found", NULL, "no tenant \"%s\"",
						      op->tenant));
			return;
		} else {
			json_object_set(op->body, "clients", op->arr);
			gw_admin_op_finish(op, 200, json_incref(op->body));
			return;
		}
		break;
	case READ_CLIENT:
		if (op->stage == 0) {
			snprintf(full, sizeof(full), "%s/%s", op->tenant, op->client);
			if (gw_gov_key(key, op->a->ns, "client", full, NULL) == CM_OK)
				(void)read_send(op, "HGETALL %s", key);
		} else if (op->status == 404) {
			gw_admin_op_finish(op, 404, gw_admin_error_body("not_found", NULL, "no client \"%s/%s\"",
						      op->tenant, op->client));
			return;
		} else {
			gw_admin_op_finish(op, 200, json_incref(op->body));
			return;
		}
		break;
	case READ_KEYS:
		if (op->stage == 0) {
			snprintf(full, sizeof(full), "%s/%s", op->tenant, op->client);
			if (gw_gov_key(key, op->a->ns, "client", full, "keys") == CM_OK)
				(void)read_send(op, "SMEMBERS %s", key);
		} else if (op->stage == 1) {
			for (size_t i = 0; i < op->nnames && !op->failed; i++)
				if (gw_gov_key(key, op->a->ns, "key", op->names[i], NULL) == CM_OK)
					(void)read_send(op, "HGETALL %s", key);
		} else {
			gw_admin_op_finish(op, 200, json_pack("{s:O}", "keys", op->arr));
			return;
		}
		break;
	case READ_USAGE:
		if (op->stage == 0 && !op->tenant[0]) {
			if (gw_gov_key(key, op->a->ns, "tenants", NULL, NULL) == CM_OK)
				(void)read_send(op, "SMEMBERS %s", key);
			break;
		}
		if (op->stage == 0) {
			/* One tenant asked: no listing needed. */
			op->names = cm_calloc(1, sizeof(*op->names));
			if (!op->names || !(op->names[0] = cm_strdup(op->tenant))) {
				gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "out of memory"));
				return;
			}
			op->nnames = 1;
			op->stage = 1;
		}
		if (op->stage == 1) {
			size_t days = (size_t)((op->to - op->from) / 86400 + 1);

			if (days * op->nnames * (op->with_clients ? 2u : 1u) >
			    GW_ADMIN_USAGE_READS_MAX) {
				gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "from",
					  "from: the query would read more than %d counters: narrow "
					  "the range or name a tenant", GW_ADMIN_USAGE_READS_MAX));
				return;
			}
			for (size_t d = 0; d < days && !op->failed; d++) {
				char day[GW_USAGE_DAY_LEN + 1], ukey[GW_USAGE_KEY_MAX];

				if (gw_usage_day(op->from + (int64_t)d * 86400, day) != CM_OK)
					break;
				for (size_t i = 0; i < op->nnames && !op->failed; i++) {
					if (gw_usage_key(ukey, op->a->ns, op->names[i], NULL, day) == CM_OK)
						(void)read_send(op, "HGETALL %s", ukey);
					if (op->with_clients &&
					    gw_usage_key(ukey, op->a->ns, op->names[i], op->client,
							 day) == CM_OK)
						(void)read_send(op, "HGETALL %s", ukey);
				}
			}
		} else {
			char f[GW_USAGE_DAY_LEN + 1], t[GW_USAGE_DAY_LEN + 1];

			if (gw_usage_day(op->from, f) != CM_OK || gw_usage_day(op->to, t) != CM_OK)
				f[0] = t[0] = '\0';
			gw_admin_op_finish(op, 200, json_pack("{s:s,s:s,s:O}", "from", f, "to", t, "rows",
						     op->arr));
			return;
		}
		break;
	case READ_AUDIT:
		if (op->stage == 0) {
			if (gw_gov_key(key, op->a->ns, "audit", NULL, NULL) == CM_OK)
				(void)read_send(op, "XRANGE %s %s + COUNT %lld", key, op->after,
						op->count);
		} else {
			gw_admin_op_finish(op, 200, json_pack("{s:O}", "records", op->arr));
			return;
		}
		break;
	}
	if (op->failed && op->pending == 0) {
		gw_admin_op_finish(op, 503, gw_admin_redis_down());
		return;
	}
	if (op->pending == 0) {
		/* Nothing to read in this stage (an empty listing). */
		op->stage++;
		read_stage(op);
	}
}

void gw_admin_start_read(struct adm_op *op, enum read_kind rk)
{
	op->rk = rk;
	op->arr = json_array();
	if (!op->arr) {
		gw_admin_op_finish(op, 500, gw_admin_error_body("internal", NULL, "out of memory"));
		return;
	}
	read_stage(op);
}

void gw_admin_ep_usage(struct adm_op *op, const char *query)
{
	char v[GW_GOV_NAME_MAX + 2]; /* a longer value is cut and then refused */
	int64_t today = cm_wall_ns() / CM_NS_PER_S / 86400 * 86400;

	op->from = op->to = -1;
	if (gw_admin_query_get(query, "tenant", v, sizeof(v)) && v[0]) {
		if (!gw_gov_name_ok(v)) {
			gw_admin_op_finish(op, 400, gw_admin_name_error("tenant", "tenant"));
			return;
		}
		memcpy(op->tenant, v, strlen(v) + 1); /* <= GW_GOV_NAME_MAX, checked */
	}
	if (gw_admin_query_get(query, "client", v, sizeof(v)) && v[0]) {
		if (!gw_gov_name_ok(v) || !op->tenant[0]) {
			gw_admin_op_finish(op, 400, op->tenant[0] ? gw_admin_name_error("client", "client") :
				  gw_admin_error_body("invalid_value", "client", "client: needs tenant"));
			return;
		}
		memcpy(op->client, v, strlen(v) + 1);
		op->with_clients = 1;
	}
	if (gw_admin_query_get(query, "from", v, sizeof(v)) && gw_usage_day_parse(v, &op->from) != CM_OK) {
		gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "from",
					      "from: expected a UTC day YYYY-MM-DD"));
		return;
	}
	if (gw_admin_query_get(query, "to", v, sizeof(v)) && gw_usage_day_parse(v, &op->to) != CM_OK) {
		gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "to",
					      "to: expected a UTC day YYYY-MM-DD"));
		return;
	}
	if (op->to < 0)
		op->to = op->from > today ? op->from : today;
	if (op->from < 0)
		op->from = op->to;
	if (op->from > op->to) {
		gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "from", "from is after to"));
		return;
	}
	gw_admin_start_read(op, READ_USAGE);
}

void gw_admin_ep_audit(struct adm_op *op, const char *query)
{
	char v[GW_AUDIT_ID_MAX + 1];
	long long n = 100;

	snprintf(op->after, sizeof(op->after), "-");
	if (gw_admin_query_get(query, "count", v, sizeof(v))) {
		char *end;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || *end || v[0] < '0' || v[0] > '9' || n < 1 ||
		    n > GW_ADMIN_AUDIT_COUNT_MAX) {
			gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "count",
				  "count: expected 1 to %d", GW_ADMIN_AUDIT_COUNT_MAX));
			return;
		}
	}
	if (gw_admin_query_get(query, "after", v, sizeof(v))) {
		int ok = v[0] != '\0';

		for (size_t i = 0; v[i]; i++)
			ok &= (v[i] >= '0' && v[i] <= '9') || (v[i] == '-' && i > 0);
		if (!ok) {
			gw_admin_op_finish(op, 400, gw_admin_error_body("invalid_value", "after",
				  "after: expected a record id such as 1764532800000-0"));
			return;
		}
		snprintf(op->after, sizeof(op->after), "(%s", v);
	}
	op->count = n;
	gw_admin_start_read(op, READ_AUDIT);
}
