/*
 * ctl_usage.c - `sluicectl usage [TENANT[/CLIENT]] [--from DAY] [--to DAY]
 * [--format table|csv|json]`: the usage counters of gateway/gov/usage.h, one
 * row per tenant (or client) and UTC day that saw requests.
 *
 * No target: one row per tenant and day.  TENANT: the tenant's row (client
 * "*") and one per client, per day.  TENANT/CLIENT: that client per day.
 * The table folds the error classes into 4xx, 5xx and cancelled; CSV and
 * JSON carry every counter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "gateway/gov/usage.h"
#include "tools/ctl_internal.h"

#define RANGE_MAX_DAYS 400

enum fmt { FMT_TABLE, FMT_CSV, FMT_JSON };

struct out {
	enum fmt fmt;
	struct ctl_table *table;
	json_t *rows;
	long long n;
};

/* Reads one day hash and emits its row when it saw requests. */
static int emit(struct ctl *ctl, struct out *o, const char *day, const char *tenant,
		const char *client)
{
	struct gw_usage_counts c;
	const int64_t *v = c.v;
	enum cm_status st;

	st = gw_usage_read_sync(ctl->rc, ctl->ns, tenant, client, day, &c);
	if (st != CM_OK) {
		fprintf(stderr, "sluicectl: reading usage of %s%s%s on %s failed (%s)\n",
			tenant, client ? "/" : "", client ? client : "", day,
			cm_status_str(st));
		return CTL_EXIT_REDIS;
	}
	if (v[GW_USAGE_F_REQUESTS] == 0)
		return CTL_EXIT_OK;
	o->n++;
	if (o->fmt == FMT_JSON) {
		json_t *r = json_object();

		json_object_set_new(r, "day", json_string(day));
		json_object_set_new(r, "tenant", json_string(tenant));
		json_object_set_new(r, "client", client ? json_string(client) : json_null());
		for (int f = 0; f < GW_USAGE_F_COUNT; f++)
			json_object_set_new(r, gw_usage_field_name((enum gw_usage_field)f),
					    json_integer(v[f]));
		json_array_append_new(o->rows, r);
	} else if (o->fmt == FMT_CSV) {
		printf("%s,%s,%s", day, tenant, client ? client : "*");
		for (int f = 0; f < GW_USAGE_F_COUNT; f++)
			printf(",%lld", (long long)v[f]);
		printf("\n");
	} else {
		char num[7][24];
		const char *cells[10];

		snprintf(num[0], 24, "%lld", (long long)v[GW_USAGE_F_REQUESTS]);
		snprintf(num[1], 24, "%lld", (long long)v[GW_USAGE_F_PROMPT_TOKENS]);
		snprintf(num[2], 24, "%lld", (long long)v[GW_USAGE_F_CACHED_PROMPT_TOKENS]);
		snprintf(num[3], 24, "%lld", (long long)v[GW_USAGE_F_COMPLETION_TOKENS]);
		snprintf(num[4], 24, "%lld", (long long)(v[GW_USAGE_F_ERRORS_AUTH] +
			 v[GW_USAGE_F_ERRORS_QUOTA] + v[GW_USAGE_F_ERRORS_BAD_REQUEST]));
		snprintf(num[5], 24, "%lld", (long long)(v[GW_USAGE_F_ERRORS_OVERLOADED] +
			 v[GW_USAGE_F_ERRORS_WORKER] + v[GW_USAGE_F_ERRORS_INTERNAL]));
		snprintf(num[6], 24, "%lld", (long long)v[GW_USAGE_F_ERRORS_CANCELLED]);
		cells[0] = day;
		cells[1] = tenant;
		cells[2] = client ? client : "*";
		for (int i = 0; i < 7; i++)
			cells[3 + i] = num[i];
		if (ctl_table_add(o->table, cells) != 0)
			return CTL_EXIT_REDIS;
	}
	return CTL_EXIT_OK;
}

/* The tenant's own row and, with `clients`, one per client. */
static int emit_tenant(struct ctl *ctl, struct out *o, const char *day,
		       const char *tenant, int clients)
{
	char key[CTL_KEYNAME_MAX];
	redisReply *r = NULL;
	const char **v;
	size_t n;
	int rc = emit(ctl, o, day, tenant, NULL);

	if (rc != CTL_EXIT_OK || !clients)
		return rc;
	ctl_key(ctl, key, "tenant", tenant, "clients");
	v = ctl_members_sorted(ctl, key, &r, &n);
	if (!v)
		rc = CTL_EXIT_REDIS;
	for (size_t i = 0; v && i < n && rc == CTL_EXIT_OK; i++)
		if (gw_gov_name_ok(v[i]))
			rc = emit(ctl, o, day, tenant, v[i]);
	cm_free(v);
	if (r)
		freeReplyObject(r);
	return rc;
}

static int day_opt(const char *opt, const char *val, int64_t *out)
{
	if (gw_usage_day_parse(val, out) != CM_OK) {
		fprintf(stderr, "sluicectl: %s: expected a UTC day YYYY-MM-DD, found \"%s\"\n",
			opt, val);
		return -1;
	}
	return 0;
}

int ctl_usage_cmd(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"DAY", "TENANT", "CLIENT", "REQUESTS",
					   "PROMPT", "CACHED", "COMPLETION", "ERR_4XX",
					   "ERR_5XX", "CANCELLED"};
	const char *target = NULL;
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], key[CTL_KEYNAME_MAX];
	int64_t from = -1, to = -1, today;
	struct out o;
	redisReply *r = NULL;
	const char **tenants = NULL;
	size_t nt = 0;
	int rc;

	memset(&o, 0, sizeof(o));
	o.fmt = ctl->json ? FMT_JSON : FMT_TABLE;
	c[0] = '\0';
	for (int i = 0; i < argc; i++) {
		if ((strcmp(argv[i], "--from") == 0 || strcmp(argv[i], "--to") == 0) &&
		    i + 1 < argc) {
			if (day_opt(argv[i], argv[i + 1], argv[i][2] == 'f' ? &from : &to) != 0)
				return CTL_EXIT_INVALID;
			i++;
		} else if (strcmp(argv[i], "--format") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "table") == 0)
				o.fmt = FMT_TABLE;
			else if (strcmp(argv[i], "csv") == 0)
				o.fmt = FMT_CSV;
			else if (strcmp(argv[i], "json") == 0)
				o.fmt = FMT_JSON;
			else {
				fprintf(stderr, "sluicectl: --format: expected table, csv or "
					"json, found \"%s\"\n", argv[i]);
				return CTL_EXIT_USAGE;
			}
		} else if (argv[i][0] != '-' && !target) {
			target = argv[i];
		} else {
			fprintf(stderr, "sluicectl: usage: unexpected \"%s\"\n", argv[i]);
			return CTL_EXIT_USAGE;
		}
	}
	if (target) {
		if (strchr(target, '/')) {
			if (!ctl_split_client(target, t, c))
				return CTL_EXIT_INVALID;
		} else {
			if (!ctl_name_ok("tenant", target))
				return CTL_EXIT_INVALID;
			snprintf(t, sizeof(t), "%s", target);
		}
	}
	today = ctl_now_s() / 86400 * 86400;
	if (to < 0)
		to = from >= 0 && from > today ? from : today;
	if (from < 0)
		from = to;
	if (from > to) {
		fprintf(stderr, "sluicectl: usage: --from is after --to\n");
		return CTL_EXIT_INVALID;
	}
	if ((to - from) / 86400 + 1 > RANGE_MAX_DAYS) {
		fprintf(stderr, "sluicectl: usage: expected at most %d days, found %lld\n",
			RANGE_MAX_DAYS, (long long)((to - from) / 86400 + 1));
		return CTL_EXIT_INVALID;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	if (target) {
		rc = ctl_target_exists(ctl, t, c);
		if (rc != CTL_EXIT_OK)
			goto out;
	} else {
		ctl_key(ctl, key, "tenants", NULL, NULL);
		tenants = ctl_members_sorted(ctl, key, &r, &nt);
		if (!tenants) {
			rc = CTL_EXIT_REDIS;
			goto out;
		}
	}
	if (o.fmt == FMT_JSON)
		o.rows = json_array();
	else if (o.fmt == FMT_TABLE)
		o.table = ctl_table_new(10, head);
	if ((o.fmt == FMT_JSON && !o.rows) || (o.fmt == FMT_TABLE && !o.table)) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (o.fmt == FMT_CSV) {
		printf("day,tenant,client");
		for (int f = 0; f < GW_USAGE_F_COUNT; f++)
			printf(",%s", gw_usage_field_name((enum gw_usage_field)f));
		printf("\n");
	}
	for (int64_t d = from; d <= to && rc == CTL_EXIT_OK; d += 86400) {
		char day[GW_USAGE_DAY_LEN + 1];

		if (gw_usage_day(d, day) != CM_OK) {
			rc = CTL_EXIT_INVALID;
			break;
		}
		if (target && c[0])
			rc = emit(ctl, &o, day, t, c);
		else if (target)
			rc = emit_tenant(ctl, &o, day, t, 1);
		for (size_t i = 0; !target && i < nt && rc == CTL_EXIT_OK; i++)
			if (gw_gov_name_ok(tenants[i]))
				rc = emit_tenant(ctl, &o, day, tenants[i], 0);
	}
	if (rc != CTL_EXIT_OK)
		goto out;
	if (o.fmt == FMT_JSON) {
		ctl_print_json(o.rows);
		o.rows = NULL;
	} else if (o.fmt == FMT_TABLE) {
		if (o.n == 0)
			printf("no requests recorded in this range\n");
		else
			ctl_table_print(o.table);
	}
out:
	json_decref(o.rows);
	ctl_table_free(o.table);
	cm_free(tenants);
	if (r)
		freeReplyObject(r);
	return rc;
}
