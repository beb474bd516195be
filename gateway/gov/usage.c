/*
 * usage.c - builds the usage record call, parses replies, reads counters
 * (see usage.h).  The script is usage_record.lua (gateway/redis/lua.h),
 * sent with the EVALSHA fallback of gateway/redis/cmd.h.
 */
#include "gateway/gov/usage.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "gateway/gov/reader.h"
#include "gateway/gov/records.h"
#include "gateway/redis/keys.h"

static const char *const field_names[GW_USAGE_F_COUNT] = {
	[GW_USAGE_F_REQUESTS] = "requests",
	[GW_USAGE_F_PROMPT_TOKENS] = "prompt_tokens",
	[GW_USAGE_F_CACHED_PROMPT_TOKENS] = "cached_prompt_tokens",
	[GW_USAGE_F_COMPLETION_TOKENS] = "completion_tokens",
	[GW_USAGE_F_ERRORS_AUTH] = "errors_auth",
	[GW_USAGE_F_ERRORS_QUOTA] = "errors_quota",
	[GW_USAGE_F_ERRORS_BAD_REQUEST] = "errors_bad_request",
	[GW_USAGE_F_ERRORS_OVERLOADED] = "errors_overloaded",
	[GW_USAGE_F_ERRORS_WORKER] = "errors_worker",
	[GW_USAGE_F_ERRORS_INTERNAL] = "errors_internal",
	[GW_USAGE_F_ERRORS_CANCELLED] = "errors_cancelled",
};

static const char *const outcome_names[GW_USAGE_OUTCOME_COUNT] = {
	[GW_USAGE_OK] = "ok",
	[GW_USAGE_AUTH] = "auth",
	[GW_USAGE_QUOTA] = "quota",
	[GW_USAGE_BAD_REQUEST] = "bad_request",
	[GW_USAGE_OVERLOADED] = "overloaded",
	[GW_USAGE_WORKER] = "worker",
	[GW_USAGE_INTERNAL] = "internal",
	[GW_USAGE_CANCELLED] = "cancelled",
};

const char *gw_usage_field_name(enum gw_usage_field f)
{
	return (unsigned)f < GW_USAGE_F_COUNT ? field_names[f] : NULL;
}

const char *gw_usage_outcome_name(enum gw_usage_outcome o)
{
	return (unsigned)o < GW_USAGE_OUTCOME_COUNT ? outcome_names[o] : NULL;
}

/* ---- days ------------------------------------------------------------------ */

/* Days since 1970-01-01 of a proleptic Gregorian date (civil calendar). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp + (mp < 10 ? 3 : -9);
	*y = yoe + era * 400 + (*m <= 2);
}

enum cm_status gw_usage_day(int64_t unix_s, char out[GW_USAGE_DAY_LEN + 1])
{
	int64_t y, m, d;

	if (unix_s < 0 || unix_s > 253402300799LL) /* 9999-12-31T23:59:59Z */
		return CM_EINVAL;
	civil_from_days(unix_s / 86400, &y, &m, &d);
	snprintf(out, GW_USAGE_DAY_LEN + 1, "%04" PRId64 "-%02" PRId64 "-%02" PRId64,
		 y, m, d);
	return CM_OK;
}

enum cm_status gw_usage_day_parse(const char *day, int64_t *unix_s)
{
	int64_t y = 0, m = 0, d = 0, yy, mm, dd;

	if (!day || strlen(day) != GW_USAGE_DAY_LEN || day[4] != '-' || day[7] != '-')
		return CM_EFORMAT;
	for (int i = 0; i < GW_USAGE_DAY_LEN; i++) {
		if (i == 4 || i == 7)
			continue;
		if (day[i] < '0' || day[i] > '9')
			return CM_EFORMAT;
	}
	for (int i = 0; i < 4; i++)
		y = y * 10 + (day[i] - '0');
	m = (day[5] - '0') * 10 + (day[6] - '0');
	d = (day[8] - '0') * 10 + (day[9] - '0');
	if (y < 1970 || m < 1 || m > 12 || d < 1 || d > 31)
		return CM_EFORMAT;
	/* Round trip rejects 2026-02-30 and the like. */
	civil_from_days(days_from_civil(y, m, d), &yy, &mm, &dd);
	if (yy != y || mm != m || dd != d)
		return CM_EFORMAT;
	*unix_s = days_from_civil(y, m, d) * 86400;
	return CM_OK;
}

enum cm_status gw_usage_key(char out[GW_USAGE_KEY_MAX], const char *ns,
			    const char *tenant, const char *client, const char *day)
{
	int64_t t;

	if (!ns)
		ns = GW_GOV_NS_DEFAULT;
	if (!gw_gov_ns_ok(ns) || !gw_gov_name_ok(tenant) ||
	    (client && !gw_gov_name_ok(client)) || gw_usage_day_parse(day, &t) != CM_OK)
		return CM_EINVAL;
	return gw_redis_tenant_key(out, GW_USAGE_KEY_MAX, ns, "usage", tenant, client, day);
}

/* ---- the record call -------------------------------------------------------- */

static int request_id_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, GW_USAGE_REQUEST_ID_MAX + 1);
	if (n == 0 || n > GW_USAGE_REQUEST_ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
		      c == '-'))
			return 0;
	}
	return 1;
}

static int tokens_ok(int64_t v)
{
	return v >= 0 && v <= GW_USAGE_TOKENS_MAX;
}

enum cm_status gw_usage_cmd_record(struct gw_redis_cmd *cmd, int use_eval,
				   const struct gw_usage_record *rec)
{
	char day[GW_USAGE_DAY_LEN + 1], key[GW_USAGE_KEY_MAX];
	char done[GW_USAGE_REQUEST_ID_MAX + 8];
	const char *ns = rec->ns ? rec->ns : GW_GOV_NS_DEFAULT;
	int64_t inc[GW_USAGE_F_COUNT];
	enum cm_status st;

	if (!request_id_ok(rec->request_id) || !tokens_ok(rec->prompt_tokens) ||
	    !tokens_ok(rec->cached_prompt_tokens) ||
	    !tokens_ok(rec->completion_tokens) ||
	    rec->cached_prompt_tokens > rec->prompt_tokens ||
	    (unsigned)rec->outcome >= GW_USAGE_OUTCOME_COUNT)
		return CM_EINVAL;
	st = gw_usage_day(rec->end_unix_s, day);
	if (st != CM_OK)
		return st;
	memset(inc, 0, sizeof(inc));
	inc[GW_USAGE_F_REQUESTS] = 1;
	inc[GW_USAGE_F_PROMPT_TOKENS] = rec->prompt_tokens;
	inc[GW_USAGE_F_CACHED_PROMPT_TOKENS] = rec->cached_prompt_tokens;
	inc[GW_USAGE_F_COMPLETION_TOKENS] = rec->completion_tokens;
	if (rec->outcome != GW_USAGE_OK)
		inc[GW_USAGE_F_ERRORS_AUTH + (int)rec->outcome - 1] = 1;

	gw_redis_cmd_script(cmd, GW_LUA_USAGE_RECORD, use_eval ? GW_REDIS_EVAL : GW_REDIS_EVALSHA, 0);
	st = gw_redis_cmd_add(cmd, "3");
	if (st == CM_OK)
		st = gw_usage_key(key, ns, rec->tenant, NULL, day);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key);
	if (st == CM_OK)
		st = gw_usage_key(key, ns, rec->tenant, rec->client, day);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key);
	if (st != CM_OK)
		return CM_EINVAL;
	snprintf(done, sizeof(done), "done:%s", rec->request_id);
	st = gw_redis_tenant_key(key, sizeof(key), ns, "usage", rec->tenant, NULL, done);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key);
	if (st == CM_OK)
		st = gw_redis_cmd_add_i64(cmd, GW_USAGE_MARKER_TTL_S);
	if (st == CM_OK)
		st = gw_redis_cmd_add_i64(cmd, GW_USAGE_HASH_TTL_S);
	for (int f = 0; f < GW_USAGE_F_COUNT && st == CM_OK; f++) {
		if (inc[f] == 0)
			continue;
		st = gw_redis_cmd_add(cmd, field_names[f]);
		if (st == CM_OK)
			st = gw_redis_cmd_add_i64(cmd, inc[f]);
	}
	return st;
}

enum cm_status gw_usage_parse_record(const redisReply *r, int *counted)
{
	if (!r || r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1))
		return CM_EPROTO;
	*counted = (int)r->integer;
	return CM_OK;
}

enum cm_status gw_usage_counts_add(struct gw_usage_counts *acc,
				   const redisReply *h)
{
	if (!h || h->type != REDIS_REPLY_ARRAY || h->elements % 2 != 0)
		return CM_EPROTO;
	for (size_t i = 0; i + 1 < h->elements; i += 2) {
		const redisReply *k = h->element[i], *v = h->element[i + 1];
		int64_t x = 0;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			return CM_EPROTO;
		for (int f = 0; f < GW_USAGE_F_COUNT; f++) {
			if (strcmp(k->str, field_names[f]) != 0)
				continue;
			if (gw_gov_decimal(v->str, v->len, &x) != 0)
				return CM_EFORMAT;
			acc->v[f] += x;
		}
	}
	return CM_OK;
}

/* ---- synchronous ------------------------------------------------------------ */

enum cm_status gw_usage_record_sync(redisContext *c,
				    const struct gw_usage_record *rec, int *counted)
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	redisReply *r = NULL;
	enum cm_status st;

	if (!cmd)
		return CM_ENOMEM;
	st = gw_usage_cmd_record(cmd, 0, rec);
	if (st == CM_OK) {
		r = gw_redis_send_sync(c, cmd);
		st = r ? gw_usage_parse_record(r, counted) : CM_EIO;
	}
	if (r)
		freeReplyObject(r);
	cm_free(cmd);
	return st;
}

enum cm_status gw_usage_read_sync(redisContext *c, const char *ns,
				  const char *tenant, const char *client,
				  const char *day, struct gw_usage_counts *out)
{
	char key[GW_USAGE_KEY_MAX];
	redisReply *r;
	enum cm_status st;

	memset(out, 0, sizeof(*out));
	st = gw_usage_key(key, ns, tenant, client, day);
	if (st != CM_OK)
		return st;
	r = redisCommand(c, "HGETALL %s", key);
	if (!r)
		return CM_EIO;
	st = gw_usage_counts_add(out, r);
	freeReplyObject(r);
	return st;
}

/* ---- asynchronous ------------------------------------------------------------ */

struct usage_pending {
	gw_usage_done_fn done;
	void *arg;
};

static void on_record_reply(void *privdata, const redisReply *r)
{
	struct usage_pending *p = privdata;
	gw_usage_done_fn done = p->done;
	void *arg = p->arg;
	enum cm_status st = CM_EIO;
	int counted = 0;

	if (r)
		st = gw_usage_parse_record(r, &counted);
	cm_free(p);
	done(arg, st, counted);
}

enum cm_status gw_usage_record_async(redisAsyncContext *ac,
				     const struct gw_usage_record *rec,
				     gw_usage_done_fn done, void *arg)
{
	struct usage_pending *p = cm_malloc(sizeof(*p));
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	enum cm_status st;

	if (!p || !cmd) {
		cm_free(p);
		cm_free(cmd);
		return CM_ENOMEM;
	}
	st = gw_usage_cmd_record(cmd, 0, rec);
	if (st != CM_OK) {
		cm_free(cmd);
		cm_free(p);
		return st;
	}
	p->done = done;
	p->arg = arg;
	st = gw_redis_send_async(ac, cmd, on_record_reply, p);
	if (st != CM_OK)
		cm_free(p);
	return st;
}

enum gw_usage_outcome gw_usage_outcome_of(const char *outcome, int status)
{
	const char *o = outcome ? outcome : "";

	if (strcmp(o, "ok") == 0)
		return GW_USAGE_OK;
	if (strcmp(o, "cancelled") == 0 || strcmp(o, "client_gone") == 0 ||
	    strcmp(o, "revoked") == 0)
		return GW_USAGE_CANCELLED;
	if (strcmp(o, "worker_error") == 0 && status != 503 && status >= 500)
		return GW_USAGE_WORKER;
	switch (status) {
	case 401:
	case 403: return GW_USAGE_AUTH;
	case 429: return GW_USAGE_QUOTA;
	case 500: return GW_USAGE_INTERNAL;
	case 503: return GW_USAGE_OVERLOADED;
	default: break;
	}
	if (status >= 400 && status < 500)
		return GW_USAGE_BAD_REQUEST;
	return status >= 500 ? GW_USAGE_WORKER : GW_USAGE_OK;
}
