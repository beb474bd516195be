/*
 * quota.c - builds the quota script calls and parses their replies.
 *
 * Owns nothing; every command is built into caller storage (struct
 * gw_redis_cmd) so that the async gateway can keep it until the reply
 * arrives and resend it as EVAL after a NOSCRIPT error.  The argument
 * layout matches the KEYS/ARGV contract written at the top of each
 * gateway/gov/quota_*.lua file.
 */
#include "gateway/gov/quota.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gateway/gov/reader.h"
#include "gateway/redis/cmd.h"
#include "gateway/redis/keys.h"

#define LEASE_ID_MAX 128

static const char *const key_kind_suffix[] = {
	[GW_QUOTA_KEY_RPM] = "rpm",
	[GW_QUOTA_KEY_TPM] = "tpm",
	[GW_QUOTA_KEY_CONCURRENCY] = "conc",
	[GW_QUOTA_KEY_DAILY] = "daily",
	[GW_QUOTA_KEY_EMBED_RPM] = "erpm",
	[GW_QUOTA_KEY_EMBED_TPM] = "etpm",
};

const char *gw_quota_limit_name(enum gw_quota_limit l)
{
	switch (l) {
	case GW_QUOTA_LIMIT_RPM: return "rpm";
	case GW_QUOTA_LIMIT_TPM: return "tpm";
	case GW_QUOTA_LIMIT_CONCURRENCY: return "concurrency";
	case GW_QUOTA_LIMIT_DAILY_TOKENS: return "daily_tokens";
	case GW_QUOTA_LIMIT_EMBED_RPM: return "embed_rpm";
	case GW_QUOTA_LIMIT_EMBED_TPM: return "embed_tpm";
	case GW_QUOTA_LIMIT_NONE: break;
	}
	return "none";
}

const char *gw_quota_scope_name(enum gw_quota_scope s)
{
	switch (s) {
	case GW_QUOTA_SCOPE_TENANT: return "tenant";
	case GW_QUOTA_SCOPE_CLIENT: return "client";
	case GW_QUOTA_SCOPE_NONE: break;
	}
	return "none";
}

static int name_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, GW_QUOTA_NAME_MAX + 1);
	if (n == 0 || n > GW_QUOTA_NAME_MAX)
		return 0;
	/* Braces would break the cluster hash tag; controls have no business
	 * in a key name. */
	for (size_t i = 0; i < n; i++)
		if (s[i] == '{' || s[i] == '}' || (unsigned char)s[i] < 0x20 ||
		    s[i] == 0x7f)
			return 0;
	return 1;
}

enum cm_status gw_quota_key(char *out, size_t size, const char *ns,
			    const char *tenant, const char *client,
			    enum gw_quota_key_kind kind)
{
	if (!ns)
		ns = GW_QUOTA_NS_DEFAULT;
	if (strnlen(ns, GW_QUOTA_NAME_MAX + 1) > GW_QUOTA_NAME_MAX ||
	    !name_ok(tenant) || (client && !name_ok(client)) ||
	    (unsigned)kind > GW_QUOTA_KEY_EMBED_TPM)
		return CM_EINVAL;
	return gw_redis_tenant_key(out, size, ns, "q", tenant, client, key_kind_suffix[kind]);
}

/* ---- building ----------------------------------------------------------- */

static enum cm_status cmd_add_i64(struct gw_redis_cmd *cmd, int64_t v)
{
	char num[24];

	if (v < 0 || v > GW_QUOTA_VALUE_MAX)
		return CM_EINVAL;
	snprintf(num, sizeof(num), "%" PRId64, v);
	return gw_redis_cmd_add(cmd, num);
}

static enum cm_status cmd_add_key(struct gw_redis_cmd *cmd,
				  const struct gw_quota_subject *subj,
				  const char *client, enum gw_quota_key_kind kind)
{
	char key[GW_QUOTA_ARG_BYTES];
	enum cm_status st;

	st = gw_quota_key(key, sizeof(key), subj->ns, subj->tenant, client, kind);
	if (st != CM_OK)
		return st;
	return gw_redis_cmd_add(cmd, key);
}

/* numkeys 12, KEYS[1..12], ARGV[1..12] (the six limits of both scopes;
 * embed_rpm and embed_tpm 0 unless the request embeds). */
static enum cm_status cmd_add_keys_limits(struct gw_redis_cmd *cmd,
					  const struct gw_quota_subject *subj)
{
	const struct gw_quota_limits *lim[2] = {&subj->tenant_limits,
						&subj->client_limits};
	const char *who[2] = {NULL, subj->client};
	enum cm_status st;

	if (!subj->client)
		return CM_EINVAL;
	st = gw_redis_cmd_add(cmd, "12");
	for (int s = 0; s < 2 && st == CM_OK; s++)
		for (int k = GW_QUOTA_KEY_RPM; k <= GW_QUOTA_KEY_EMBED_TPM && st == CM_OK; k++)
			st = cmd_add_key(cmd, subj, who[s], (enum gw_quota_key_kind)k);
	for (int s = 0; s < 2 && st == CM_OK; s++) {
		st = cmd_add_i64(cmd, lim[s]->rpm);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->tpm);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->concurrency);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->daily_tokens);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, subj->embedding ? lim[s]->embed_rpm : 0);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, subj->embedding ? lim[s]->embed_tpm : 0);
	}
	return st;
}

static int lease_ok(const char *lease_id)
{
	size_t n;

	if (!lease_id)
		return 0;
	n = strnlen(lease_id, LEASE_ID_MAX + 1);
	return n > 0 && n <= LEASE_ID_MAX;
}

static int ttl_ok(int64_t ttl_ms)
{
	return ttl_ms >= GW_QUOTA_LEASE_TTL_MIN_MS &&
	       ttl_ms <= GW_QUOTA_LEASE_TTL_MAX_MS;
}

enum cm_status gw_quota_cmd_admit(struct gw_redis_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  int64_t tokens, const char *lease_id,
				  int64_t lease_ttl_ms)
{
	enum cm_status st;

	if (!lease_ok(lease_id) || !ttl_ok(lease_ttl_ms))
		return CM_EINVAL;
	gw_redis_cmd_script(cmd, GW_LUA_QUOTA_ADMIT, use_eval ? GW_REDIS_EVAL : GW_REDIS_EVALSHA, 0);
	st = cmd_add_keys_limits(cmd, subj);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, tokens);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, lease_id);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, lease_ttl_ms);
	return st;
}

enum cm_status gw_quota_cmd_finish(struct gw_redis_cmd *cmd, int use_eval,
				   const struct gw_quota_subject *subj,
				   int64_t estimate, int64_t actual,
				   const char *lease_id)
{
	enum cm_status st;

	if (!lease_ok(lease_id))
		return CM_EINVAL;
	gw_redis_cmd_script(cmd, GW_LUA_QUOTA_FINISH, use_eval ? GW_REDIS_EVAL : GW_REDIS_EVALSHA, 0);
	st = cmd_add_keys_limits(cmd, subj);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, estimate);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, actual);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, lease_id);
	return st;
}

enum cm_status gw_quota_cmd_renew(struct gw_redis_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  const char *lease_id, int64_t lease_ttl_ms)
{
	enum cm_status st;

	if (!lease_ok(lease_id) || !ttl_ok(lease_ttl_ms) || !subj->client)
		return CM_EINVAL;
	gw_redis_cmd_script(cmd, GW_LUA_QUOTA_RENEW, use_eval ? GW_REDIS_EVAL : GW_REDIS_EVALSHA, 0);
	st = gw_redis_cmd_add(cmd, "2");
	if (st == CM_OK)
		st = cmd_add_key(cmd, subj, NULL, GW_QUOTA_KEY_CONCURRENCY);
	if (st == CM_OK)
		st = cmd_add_key(cmd, subj, subj->client, GW_QUOTA_KEY_CONCURRENCY);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, lease_id);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, lease_ttl_ms);
	return st;
}

/* ---- parsing ------------------------------------------------------------ */

static int reply_int(const redisReply *r, int64_t *out)
{
	if (!r || r->type != REDIS_REPLY_INTEGER)
		return 0;
	*out = r->integer;
	return 1;
}

/* Status and bulk strings both compare as text. */
static int reply_is(const redisReply *r, const char *s)
{
	return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
	       r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
}

enum cm_status gw_quota_parse_admit(const redisReply *r,
				    struct gw_quota_verdict *out)
{
	static const enum gw_quota_limit limits[] = {
		GW_QUOTA_LIMIT_RPM, GW_QUOTA_LIMIT_TPM,
		GW_QUOTA_LIMIT_CONCURRENCY, GW_QUOTA_LIMIT_DAILY_TOKENS,
		GW_QUOTA_LIMIT_EMBED_RPM, GW_QUOTA_LIMIT_EMBED_TPM};
	int64_t allowed;

	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
	    !reply_int(r->element[0], &allowed) ||
	    !reply_int(r->element[3], &out->retry_after_ms) ||
	    !reply_int(r->element[4], &out->now_ms))
		return CM_EPROTO;
	if (allowed == 1) {
		out->allowed = 1;
		out->retry_after_ms = 0;
		return CM_OK;
	}
	if (allowed != 0)
		return CM_EPROTO;
	if (reply_is(r->element[1], "tenant"))
		out->scope = GW_QUOTA_SCOPE_TENANT;
	else if (reply_is(r->element[1], "client"))
		out->scope = GW_QUOTA_SCOPE_CLIENT;
	else
		return CM_EPROTO;
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
		if (reply_is(r->element[2], gw_quota_limit_name(limits[i])))
			out->limit = limits[i];
	if (out->limit == GW_QUOTA_LIMIT_NONE)
		return CM_EPROTO;
	if (out->retry_after_ms < 1 && out->retry_after_ms != -1)
		return CM_EPROTO;
	return CM_OK;
}

enum cm_status gw_quota_parse_finish(const redisReply *r, int64_t *released)
{
	int64_t now;

	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    !reply_int(r->element[0], released) || !reply_int(r->element[1], &now))
		return CM_EPROTO;
	return CM_OK;
}

enum cm_status gw_quota_parse_renew(const redisReply *r, int64_t *held)
{
	return reply_int(r, held) ? CM_OK : CM_EPROTO;
}

enum cm_status gw_quota_limits_parse(const redisReply *r,
				     struct gw_quota_limits *out)
{
	static const char *const names[] = {"rpm", "tpm", "concurrency",
					    "daily_tokens", "embed_rpm", "embed_tpm"};
	int64_t *slots[] = {&out->rpm, &out->tpm, &out->concurrency,
			    &out->daily_tokens, &out->embed_rpm, &out->embed_tpm};

	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
		return CM_EPROTO;
	for (size_t i = 0; i < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			return CM_EPROTO;
		for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
			int64_t x = 0;

			if (strcmp(k->str, names[f]) != 0)
				continue;
			if (v->len > 16 || gw_gov_decimal(v->str, v->len, &x) != 0 ||
			    x > GW_QUOTA_VALUE_MAX)
				return CM_EFORMAT;
			*slots[f] = x;
		}
	}
	return CM_OK;
}

/* ---- synchronous helpers ------------------------------------------------ */

/* Sends `cmd` (EVAL after NOSCRIPT).  The caller frees *reply. */
static enum cm_status send_sync(redisContext *c, struct gw_redis_cmd *cmd,
				redisReply **reply)
{
	*reply = gw_redis_send_sync(c, cmd);
	return *reply ? CM_OK : CM_EIO;
}

enum cm_status gw_quota_admit_sync(redisContext *c,
				   const struct gw_quota_subject *subj,
				   int64_t tokens, const char *lease_id,
				   int64_t lease_ttl_ms,
				   struct gw_quota_verdict *out)
{
	struct gw_redis_cmd cmd;
	redisReply *r = NULL;
	enum cm_status st;

	st = gw_quota_cmd_admit(&cmd, 0, subj, tokens, lease_id, lease_ttl_ms);
	if (st == CM_OK)
		st = send_sync(c, &cmd, &r);
	if (st == CM_OK)
		st = gw_quota_parse_admit(r, out);
	if (r)
		freeReplyObject(r);
	return st;
}

enum cm_status gw_quota_finish_sync(redisContext *c,
				    const struct gw_quota_subject *subj,
				    int64_t estimate, int64_t actual,
				    const char *lease_id, int64_t *released)
{
	struct gw_redis_cmd cmd;
	redisReply *r = NULL;
	enum cm_status st;

	st = gw_quota_cmd_finish(&cmd, 0, subj, estimate, actual, lease_id);
	if (st == CM_OK)
		st = send_sync(c, &cmd, &r);
	if (st == CM_OK)
		st = gw_quota_parse_finish(r, released);
	if (r)
		freeReplyObject(r);
	return st;
}

enum cm_status gw_quota_renew_sync(redisContext *c,
				   const struct gw_quota_subject *subj,
				   const char *lease_id, int64_t lease_ttl_ms,
				   int64_t *held)
{
	struct gw_redis_cmd cmd;
	redisReply *r = NULL;
	enum cm_status st;

	st = gw_quota_cmd_renew(&cmd, 0, subj, lease_id, lease_ttl_ms);
	if (st == CM_OK)
		st = send_sync(c, &cmd, &r);
	if (st == CM_OK)
		st = gw_quota_parse_renew(r, held);
	if (r)
		freeReplyObject(r);
	return st;
}

/* ---- asynchronous calls -------------------------------------------------- */

struct quota_pending {
	gw_quota_done_fn done;
	void *arg;
	int script;  /* enum gw_lua_script */
};

static void on_async_reply(void *privdata, const redisReply *r)
{
	struct quota_pending *p = privdata;
	struct gw_quota_verdict v;
	enum cm_status st = CM_EIO;
	int64_t count = 0;
	int script = p->script;
	gw_quota_done_fn done = p->done;
	void *arg = p->arg;

	if (r) {
		if (script == GW_LUA_QUOTA_ADMIT)
			st = gw_quota_parse_admit(r, &v);
		else if (script == GW_LUA_QUOTA_FINISH)
			st = gw_quota_parse_finish(r, &count);
		else
			st = gw_quota_parse_renew(r, &count);
	}
	cm_free(p);
	done(arg, st, st == CM_OK && script == GW_LUA_QUOTA_ADMIT ? &v : NULL, count);
}

/*
 * Sends `cmd` (heap), built with status `built`; both freed on any failure.
 * The reply goes to done(arg, ...).
 */
static enum cm_status quota_send(redisAsyncContext *ac, struct gw_redis_cmd *cmd,
				 enum cm_status built, gw_quota_done_fn done, void *arg)
{
	struct quota_pending *p;
	enum cm_status st;

	if (built != CM_OK) {
		cm_free(cmd);
		return built;
	}
	p = cm_malloc(sizeof(*p));
	if (!p) {
		cm_free(cmd);
		return CM_ENOMEM;
	}
	p->done = done;
	p->arg = arg;
	p->script = cmd->script;
	st = gw_redis_send_async(ac, cmd, on_async_reply, p);
	if (st != CM_OK)
		cm_free(p);
	return st;
}

enum cm_status gw_quota_admit_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    int64_t tokens, const char *lease_id,
				    int64_t lease_ttl_ms, gw_quota_done_fn done,
				    void *arg)
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));

	if (!cmd)
		return CM_ENOMEM;
	return quota_send(ac, cmd, gw_quota_cmd_admit(cmd, 0, subj, tokens, lease_id, lease_ttl_ms),
			  done, arg);
}

enum cm_status gw_quota_finish_async(redisAsyncContext *ac,
				     const struct gw_quota_subject *subj,
				     int64_t estimate, int64_t actual,
				     const char *lease_id, gw_quota_done_fn done,
				     void *arg)
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));

	if (!cmd)
		return CM_ENOMEM;
	return quota_send(ac, cmd, gw_quota_cmd_finish(cmd, 0, subj, estimate, actual, lease_id),
			  done, arg);
}

enum cm_status gw_quota_renew_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    const char *lease_id, int64_t lease_ttl_ms,
				    gw_quota_done_fn done, void *arg)
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));

	if (!cmd)
		return CM_ENOMEM;
	return quota_send(ac, cmd, gw_quota_cmd_renew(cmd, 0, subj, lease_id, lease_ttl_ms),
			  done, arg);
}
