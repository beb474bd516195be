/*
 * quota.c - builds the quota script calls and parses their replies.
 *
 * Owns nothing; every command is built into caller storage (struct
 * gw_quota_cmd) so that the async gateway can keep it until the reply
 * arrives and resend it as EVAL after a NOSCRIPT error.  The argument
 * layout matches the KEYS/ARGV contract written at the top of each
 * gateway/quota_*.lua file.
 */
#include "gateway/gov/quota.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gateway/gov/quota_lua.h"

#define LEASE_ID_MAX 128

static const char *const key_kind_suffix[] = {
	[GW_QUOTA_KEY_RPM] = "rpm",
	[GW_QUOTA_KEY_TPM] = "tpm",
	[GW_QUOTA_KEY_CONCURRENCY] = "conc",
	[GW_QUOTA_KEY_DAILY] = "daily",
};

const char *gw_quota_limit_name(enum gw_quota_limit l)
{
	switch (l) {
	case GW_QUOTA_LIMIT_RPM: return "rpm";
	case GW_QUOTA_LIMIT_TPM: return "tpm";
	case GW_QUOTA_LIMIT_CONCURRENCY: return "concurrency";
	case GW_QUOTA_LIMIT_DAILY_TOKENS: return "daily_tokens";
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
	int n;

	if (!ns)
		ns = GW_QUOTA_NS_DEFAULT;
	if (strnlen(ns, GW_QUOTA_NAME_MAX + 1) > GW_QUOTA_NAME_MAX ||
	    !name_ok(tenant) || (client && !name_ok(client)) ||
	    (unsigned)kind > GW_QUOTA_KEY_DAILY)
		return CM_EINVAL;
	if (client)
		n = snprintf(out, size, "%sq:{%s}:c:%s:%s", ns, tenant, client,
			     key_kind_suffix[kind]);
	else
		n = snprintf(out, size, "%sq:{%s}:%s", ns, tenant,
			     key_kind_suffix[kind]);
	if (n < 0 || (size_t)n >= size)
		return CM_EINVAL;
	return CM_OK;
}

/* ---- building ----------------------------------------------------------- */

static void cmd_start(struct gw_quota_cmd *cmd, int use_eval,
		      enum gw_quota_lua_script script)
{
	cmd->argc = 0;
	cmd->script = (int)script;
	if (use_eval) {
		cmd->argv[0] = "EVAL";
		cmd->argv[1] = gw_quota_lua_text(script);
	} else {
		cmd->argv[0] = "EVALSHA";
		cmd->argv[1] = gw_quota_lua_sha1(script);
	}
	cmd->argvlen[0] = strlen(cmd->argv[0]);
	cmd->argvlen[1] = strlen(cmd->argv[1]);
	cmd->argc = 2;
}

/* Appends one argument copied into the command's own storage. */
static enum cm_status cmd_add(struct gw_quota_cmd *cmd, const char *s)
{
	size_t n = strnlen(s, GW_QUOTA_ARG_BYTES);

	if (cmd->argc >= GW_QUOTA_MAX_ARGS || n >= GW_QUOTA_ARG_BYTES)
		return CM_EINVAL;
	memcpy(cmd->store[cmd->argc], s, n + 1);
	cmd->argv[cmd->argc] = cmd->store[cmd->argc];
	cmd->argvlen[cmd->argc] = n;
	cmd->argc++;
	return CM_OK;
}

static enum cm_status cmd_add_i64(struct gw_quota_cmd *cmd, int64_t v)
{
	char num[24];

	if (v < 0 || v > GW_QUOTA_VALUE_MAX)
		return CM_EINVAL;
	snprintf(num, sizeof(num), "%" PRId64, v);
	return cmd_add(cmd, num);
}

static enum cm_status cmd_add_key(struct gw_quota_cmd *cmd,
				  const struct gw_quota_subject *subj,
				  const char *client, enum gw_quota_key_kind kind)
{
	char key[GW_QUOTA_ARG_BYTES];
	enum cm_status st;

	st = gw_quota_key(key, sizeof(key), subj->ns, subj->tenant, client, kind);
	if (st != CM_OK)
		return st;
	return cmd_add(cmd, key);
}

/* numkeys 8, KEYS[1..8], ARGV[1..8] (the limits of both scopes). */
static enum cm_status cmd_add_keys_limits(struct gw_quota_cmd *cmd,
					  const struct gw_quota_subject *subj)
{
	const struct gw_quota_limits *lim[2] = {&subj->tenant_limits,
						&subj->client_limits};
	const char *who[2] = {NULL, subj->client};
	enum cm_status st;

	if (!subj->client)
		return CM_EINVAL;
	st = cmd_add(cmd, "8");
	for (int s = 0; s < 2 && st == CM_OK; s++)
		for (int k = GW_QUOTA_KEY_RPM; k <= GW_QUOTA_KEY_DAILY && st == CM_OK; k++)
			st = cmd_add_key(cmd, subj, who[s], (enum gw_quota_key_kind)k);
	for (int s = 0; s < 2 && st == CM_OK; s++) {
		st = cmd_add_i64(cmd, lim[s]->rpm);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->tpm);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->concurrency);
		if (st == CM_OK)
			st = cmd_add_i64(cmd, lim[s]->daily_tokens);
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

enum cm_status gw_quota_cmd_admit(struct gw_quota_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  int64_t tokens, const char *lease_id,
				  int64_t lease_ttl_ms)
{
	enum cm_status st;

	if (!lease_ok(lease_id) || !ttl_ok(lease_ttl_ms))
		return CM_EINVAL;
	cmd_start(cmd, use_eval, GW_QUOTA_LUA_ADMIT);
	st = cmd_add_keys_limits(cmd, subj);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, tokens);
	if (st == CM_OK)
		st = cmd_add(cmd, lease_id);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, lease_ttl_ms);
	return st;
}

enum cm_status gw_quota_cmd_finish(struct gw_quota_cmd *cmd, int use_eval,
				   const struct gw_quota_subject *subj,
				   int64_t estimate, int64_t actual,
				   const char *lease_id)
{
	enum cm_status st;

	if (!lease_ok(lease_id))
		return CM_EINVAL;
	cmd_start(cmd, use_eval, GW_QUOTA_LUA_FINISH);
	st = cmd_add_keys_limits(cmd, subj);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, estimate);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, actual);
	if (st == CM_OK)
		st = cmd_add(cmd, lease_id);
	return st;
}

enum cm_status gw_quota_cmd_renew(struct gw_quota_cmd *cmd, int use_eval,
				  const struct gw_quota_subject *subj,
				  const char *lease_id, int64_t lease_ttl_ms)
{
	enum cm_status st;

	if (!lease_ok(lease_id) || !ttl_ok(lease_ttl_ms) || !subj->client)
		return CM_EINVAL;
	cmd_start(cmd, use_eval, GW_QUOTA_LUA_RENEW);
	st = cmd_add(cmd, "2");
	if (st == CM_OK)
		st = cmd_add_key(cmd, subj, NULL, GW_QUOTA_KEY_CONCURRENCY);
	if (st == CM_OK)
		st = cmd_add_key(cmd, subj, subj->client, GW_QUOTA_KEY_CONCURRENCY);
	if (st == CM_OK)
		st = cmd_add(cmd, lease_id);
	if (st == CM_OK)
		st = cmd_add_i64(cmd, lease_ttl_ms);
	return st;
}

void gw_quota_cmd_use_eval(struct gw_quota_cmd *cmd)
{
	cmd->argv[0] = "EVAL";
	cmd->argvlen[0] = 4;
	cmd->argv[1] = gw_quota_lua_text((enum gw_quota_lua_script)cmd->script);
	cmd->argvlen[1] = strlen(cmd->argv[1]);
}

/* ---- parsing ------------------------------------------------------------ */

int gw_quota_reply_is_noscript(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}

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
		GW_QUOTA_LIMIT_CONCURRENCY, GW_QUOTA_LIMIT_DAILY_TOKENS};
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
					    "daily_tokens"};
	int64_t *slots[] = {&out->rpm, &out->tpm, &out->concurrency,
			    &out->daily_tokens};

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
			if (v->len == 0 || v->len > 16)
				return CM_EFORMAT;
			for (size_t j = 0; j < v->len; j++) {
				if (v->str[j] < '0' || v->str[j] > '9')
					return CM_EFORMAT;
				x = x * 10 + (v->str[j] - '0');
			}
			if (x > GW_QUOTA_VALUE_MAX)
				return CM_EFORMAT;
			*slots[f] = x;
		}
	}
	return CM_OK;
}

/* ---- synchronous helpers ------------------------------------------------ */

/* Sends `cmd`; on NOSCRIPT resends it as EVAL.  The caller frees *reply. */
static enum cm_status send_sync(redisContext *c, struct gw_quota_cmd *cmd,
				redisReply **reply)
{
	redisReply *r;

	r = redisCommandArgv(c, cmd->argc, cmd->argv, cmd->argvlen);
	if (r && gw_quota_reply_is_noscript(r)) {
		freeReplyObject(r);
		gw_quota_cmd_use_eval(cmd);
		r = redisCommandArgv(c, cmd->argc, cmd->argv, cmd->argvlen);
	}
	*reply = r;
	return r ? CM_OK : CM_EIO;
}

enum cm_status gw_quota_admit_sync(redisContext *c,
				   const struct gw_quota_subject *subj,
				   int64_t tokens, const char *lease_id,
				   int64_t lease_ttl_ms,
				   struct gw_quota_verdict *out)
{
	struct gw_quota_cmd cmd;
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
	struct gw_quota_cmd cmd;
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
	struct gw_quota_cmd cmd;
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
	struct gw_quota_cmd cmd;
	gw_quota_done_fn done;
	void *arg;
	int retried; /* already resent as EVAL */
};

static void on_async_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct quota_pending *p = privdata;
	redisReply *r = reply;
	struct gw_quota_verdict v;
	enum cm_status st = CM_EIO;
	int64_t count = 0;
	int script = p->cmd.script;
	gw_quota_done_fn done = p->done;
	void *arg = p->arg;

	if (r && gw_quota_reply_is_noscript(r) && !p->retried) {
		p->retried = 1;
		gw_quota_cmd_use_eval(&p->cmd);
		if (redisAsyncCommandArgv(ac, on_async_reply, p, p->cmd.argc,
					  p->cmd.argv, p->cmd.argvlen) == REDIS_OK)
			return;
		r = NULL; /* could not resend: report a connection failure */
	}
	if (r) {
		if (script == GW_QUOTA_LUA_ADMIT)
			st = gw_quota_parse_admit(r, &v);
		else if (script == GW_QUOTA_LUA_FINISH)
			st = gw_quota_parse_finish(r, &count);
		else
			st = gw_quota_parse_renew(r, &count);
	}
	cm_free(p);
	done(arg, st, st == CM_OK && script == GW_QUOTA_LUA_ADMIT ? &v : NULL, count);
}

/* Takes `p` (freed on failure). */
static enum cm_status send_async(redisAsyncContext *ac, struct quota_pending *p)
{
	if (redisAsyncCommandArgv(ac, on_async_reply, p, p->cmd.argc, p->cmd.argv,
				  p->cmd.argvlen) != REDIS_OK) {
		cm_free(p);
		return CM_EIO;
	}
	return CM_OK;
}

static struct quota_pending *pending_new(gw_quota_done_fn done, void *arg)
{
	struct quota_pending *p = cm_malloc(sizeof(*p));

	if (!p)
		return NULL;
	p->done = done;
	p->arg = arg;
	p->retried = 0;
	return p;
}

enum cm_status gw_quota_admit_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    int64_t tokens, const char *lease_id,
				    int64_t lease_ttl_ms, gw_quota_done_fn done,
				    void *arg)
{
	struct quota_pending *p = pending_new(done, arg);
	enum cm_status st;

	if (!p)
		return CM_ENOMEM;
	st = gw_quota_cmd_admit(&p->cmd, 0, subj, tokens, lease_id, lease_ttl_ms);
	if (st != CM_OK) {
		cm_free(p);
		return st;
	}
	return send_async(ac, p);
}

enum cm_status gw_quota_finish_async(redisAsyncContext *ac,
				     const struct gw_quota_subject *subj,
				     int64_t estimate, int64_t actual,
				     const char *lease_id, gw_quota_done_fn done,
				     void *arg)
{
	struct quota_pending *p = pending_new(done, arg);
	enum cm_status st;

	if (!p)
		return CM_ENOMEM;
	st = gw_quota_cmd_finish(&p->cmd, 0, subj, estimate, actual, lease_id);
	if (st != CM_OK) {
		cm_free(p);
		return st;
	}
	return send_async(ac, p);
}

enum cm_status gw_quota_renew_async(redisAsyncContext *ac,
				    const struct gw_quota_subject *subj,
				    const char *lease_id, int64_t lease_ttl_ms,
				    gw_quota_done_fn done, void *arg)
{
	struct quota_pending *p = pending_new(done, arg);
	enum cm_status st;

	if (!p)
		return CM_ENOMEM;
	st = gw_quota_cmd_renew(&p->cmd, 0, subj, lease_id, lease_ttl_ms);
	if (st != CM_OK) {
		cm_free(p);
		return st;
	}
	return send_async(ac, p);
}
