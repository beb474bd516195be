/*
 * records.c - governance scripts and their calls, shared by sluicectl and the
 * admin API (see records.h).  Every write is one Lua script: existence check,
 * write, index update and announcement together, so two admins racing on
 * one name get one success and one conflict, and a gateway never sees a
 * message before the state it announces.
 */
#include "gateway/gov/records.h"

#include "gateway/redis/keys.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Bounds: large enough for any real deployment, small enough to catch a
 * slipped finger or a unit mistake (tokens vs bytes). */
const struct gw_gov_field_def gw_gov_fields[GW_GOV_F_COUNT] = {
	[GW_GOV_F_WEIGHT] = {"--weight", "weight", "WEIGHT", 1, 1000},
	[GW_GOV_F_RPM] = {"--rpm", "rpm", "RPM", 1, 1000000},
	[GW_GOV_F_TPM] = {"--tpm", "tpm", "TPM", 1, 1000000000LL},
	[GW_GOV_F_CONCURRENCY] = {"--concurrency", "concurrency", "CONC", 1, 100000},
	/* 0 is meaningful for the queue: refuse at once when busy. */
	[GW_GOV_F_QUEUE] = {"--queue", "queue", "QUEUE", 0, 100000},
	[GW_GOV_F_DAILY_TOKENS] = {"--daily-tokens", "daily_tokens", "DAILY", 1,
				   1000000000000LL},
	[GW_GOV_F_MAX_PROMPT] = {"--max-prompt-tokens", "max_prompt_tokens",
				 "MAX_PROMPT", 1, 1048576},
	[GW_GOV_F_MAX_OUTPUT] = {"--max-output-tokens", "max_output_tokens",
				 "MAX_OUTPUT", 1, 1048576},
	[GW_GOV_F_EMBED_RPM] = {"--embed-rpm", "embed_rpm", "EMBED_RPM", 1, 1000000},
	[GW_GOV_F_EMBED_TPM] = {"--embed-tpm", "embed_tpm", "EMBED_TPM", 1, 1000000000LL},
};

/* ---- scripts -------------------------------------------------------------- */

enum gov_op {
	OP_TENANT_CREATE = 1,
	OP_CLIENT_CREATE,
	OP_FLAG,
	OP_UPDATE,
	OP_KEY_ISSUE,
	OP_KEY_REVOKE,
	OP_KEY_SHORTEN,
};

/* ---- names and values --------------------------------------------------- */

int gw_gov_name_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, GW_GOV_NAME_MAX + 1);
	if (n == 0 || n > GW_GOV_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!(alnum || (i > 0 && (c == '_' || c == '.' || c == '-'))))
			return 0;
	}
	return 1;
}

int gw_gov_ns_ok(const char *ns)
{
	size_t n;

	if (!ns)
		return 0;
	n = strnlen(ns, GW_GOV_NS_MAX + 1);
	if (n == 0 || n > GW_GOV_NS_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = ns[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-' || c == '.' || c == ':'))
			return 0;
	}
	return 1;
}

int gw_gov_field_by_name(const char *name)
{
	for (int f = 0; f < GW_GOV_F_COUNT; f++)
		if (strcmp(gw_gov_fields[f].field, name) == 0)
			return f;
	return -1;
}

int gw_gov_value_ok(enum gw_gov_field f, long long v)
{
	if ((unsigned)f >= GW_GOV_F_COUNT)
		return 0;
	return v >= gw_gov_fields[f].min && v <= gw_gov_fields[f].max;
}

enum cm_status gw_gov_key(char out[GW_GOV_KEYNAME_MAX], const char *ns,
			  const char *what, const char *name, const char *suffix)
{
	if (!ns)
		ns = GW_GOV_NS_DEFAULT;
	return gw_redis_key(out, GW_GOV_KEYNAME_MAX, ns, what, name, suffix);
}

enum cm_status gw_gov_channel(char out[GW_GOV_KEYNAME_MAX], const char *ns)
{
	return gw_gov_key(out, ns, GW_REDIS_CHANNEL, NULL, NULL);
}

/* ---- building ------------------------------------------------------------ */

static enum cm_status cmd_add_key(struct gw_redis_cmd *cmd, const char *ns,
				  const char *what, const char *name,
				  const char *suffix)
{
	char key[GW_GOV_KEYNAME_MAX];
	enum cm_status st = gw_gov_key(key, ns, what, name, suffix);

	return st == CM_OK ? gw_redis_cmd_add(cmd, key) : st;
}

static enum cm_status quotas_ok(const struct gw_gov_quotas *q, int allow_weight)
{
	if (!q)
		return CM_OK;
	for (int f = 0; f < GW_GOV_F_COUNT; f++) {
		if (q->set[f] && !gw_gov_value_ok((enum gw_gov_field)f, q->val[f]))
			return CM_EINVAL;
		if (q->set[f] && q->clear[f])
			return CM_EINVAL;
		if (f == GW_GOV_F_WEIGHT && !allow_weight && (q->set[f] || q->clear[f]))
			return CM_EINVAL;
		if (f == GW_GOV_F_WEIGHT && q->clear[f])
			return CM_EINVAL; /* a tenant always has a weight */
	}
	return CM_OK;
}

static enum cm_status cmd_add_quotas(struct gw_redis_cmd *cmd,
				     const struct gw_gov_quotas *q)
{
	enum cm_status st = CM_OK;

	for (int f = 0; q && f < GW_GOV_F_COUNT && st == CM_OK; f++)
		if (q->set[f])
			st = gw_redis_cmd_add_pair_i64(cmd, gw_gov_fields[f].field, q->val[f]);
	return st;
}

static int ns_valid(const char *ns)
{
	return !ns || gw_gov_ns_ok(ns);
}

enum cm_status gw_gov_cmd_tenant_create(struct gw_redis_cmd *cmd, const char *ns,
					const char *name,
					const struct gw_gov_quotas *q,
					const char *salt_hex, int64_t created_s)
{
	enum cm_status st;

	if (!ns_valid(ns) || !gw_gov_name_ok(name) || quotas_ok(q, 1) != CM_OK ||
	    !salt_hex || strlen(salt_hex) != 64)
		return CM_EINVAL;
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_TENANT_CREATE, GW_REDIS_EVAL, OP_TENANT_CREATE);
	st = gw_redis_cmd_add(cmd, "2");
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "tenant", name, NULL);
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "tenants", NULL, NULL);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, name);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "name", name);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "salt", salt_hex);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair_i64(cmd, "created", created_s);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "disabled", "0");
	if (st == CM_OK && !(q && q->set[GW_GOV_F_WEIGHT]))
		st = gw_redis_cmd_add_pair(cmd, "weight", "1");
	if (st == CM_OK)
		st = cmd_add_quotas(cmd, q);
	return st;
}

enum cm_status gw_gov_cmd_client_create(struct gw_redis_cmd *cmd, const char *ns,
					const char *tenant, const char *client,
					const struct gw_gov_quotas *q,
					int64_t created_s)
{
	char full[2 * GW_GOV_NAME_MAX + 2];
	enum cm_status st;

	if (!ns_valid(ns) || !gw_gov_name_ok(tenant) || !gw_gov_name_ok(client) ||
	    quotas_ok(q, 0) != CM_OK)
		return CM_EINVAL;
	snprintf(full, sizeof(full), "%s/%s", tenant, client);
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_CLIENT_CREATE, GW_REDIS_EVAL, OP_CLIENT_CREATE);
	st = gw_redis_cmd_add(cmd, "3");
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "tenant", tenant, NULL);
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "client", full, NULL);
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "tenant", tenant, "clients");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, client);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "tenant", tenant);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "name", client);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "disabled", "0");
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair_i64(cmd, "created", created_s);
	if (st == CM_OK)
		st = cmd_add_quotas(cmd, q);
	return st;
}

/* Record key and "<kind> <target>" for a tenant (client NULL) or client. */
static enum cm_status target_of(const char *ns, const char *tenant,
				const char *client, char key[GW_GOV_KEYNAME_MAX],
				char what[2 * GW_GOV_NAME_MAX + 16])
{
	char full[2 * GW_GOV_NAME_MAX + 2];

	if (!ns_valid(ns) || !gw_gov_name_ok(tenant) ||
	    (client && !gw_gov_name_ok(client)))
		return CM_EINVAL;
	if (client) {
		snprintf(full, sizeof(full), "%s/%s", tenant, client);
		snprintf(what, 2 * GW_GOV_NAME_MAX + 16, "client %s", full);
		return gw_gov_key(key, ns, "client", full, NULL);
	}
	snprintf(what, 2 * GW_GOV_NAME_MAX + 16, "tenant %s", tenant);
	return gw_gov_key(key, ns, "tenant", tenant, NULL);
}

enum cm_status gw_gov_cmd_flag(struct gw_redis_cmd *cmd, const char *ns,
			       const char *tenant, const char *client, int disable)
{
	char key[GW_GOV_KEYNAME_MAX], chan[GW_GOV_KEYNAME_MAX];
	char what[2 * GW_GOV_NAME_MAX + 16], msg[2 * GW_GOV_NAME_MAX + 32];
	enum cm_status st;

	st = target_of(ns, tenant, client, key, what);
	if (st == CM_OK)
		st = gw_gov_channel(chan, ns);
	if (st != CM_OK)
		return st;
	snprintf(msg, sizeof(msg), "%s %s", disable ? "disable" : "enable", what);
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_FLAG, GW_REDIS_EVAL, OP_FLAG);
	st = gw_redis_cmd_add(cmd, "1");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, disable ? "1" : "0");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, chan);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, msg);
	return st;
}

enum cm_status gw_gov_cmd_update(struct gw_redis_cmd *cmd, const char *ns,
				 const char *tenant, const char *client,
				 const struct gw_gov_quotas *q)
{
	char key[GW_GOV_KEYNAME_MAX], chan[GW_GOV_KEYNAME_MAX];
	char what[2 * GW_GOV_NAME_MAX + 16], msg[2 * GW_GOV_NAME_MAX + 32];
	int nset = 0, nclear = 0;
	enum cm_status st;

	if (!q || quotas_ok(q, client == NULL) != CM_OK)
		return CM_EINVAL;
	for (int f = 0; f < GW_GOV_F_COUNT; f++) {
		nset += q->set[f] != 0;
		nclear += q->clear[f] != 0;
	}
	if (nset + nclear == 0)
		return CM_EINVAL;
	st = target_of(ns, tenant, client, key, what);
	if (st == CM_OK)
		st = gw_gov_channel(chan, ns);
	if (st != CM_OK)
		return st;
	snprintf(msg, sizeof(msg), "update %s", what);
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_UPDATE, GW_REDIS_EVAL, OP_UPDATE);
	st = gw_redis_cmd_add(cmd, "1");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, chan);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, msg);
	if (st == CM_OK)
		st = gw_redis_cmd_add_i64(cmd, nset);
	if (st == CM_OK)
		st = cmd_add_quotas(cmd, q);
	for (int f = 0; f < GW_GOV_F_COUNT && st == CM_OK; f++)
		if (q->clear[f])
			st = gw_redis_cmd_add(cmd, gw_gov_fields[f].field);
	return st;
}

static int key_id_ok(const char *id)
{
	size_t n;

	if (!id)
		return 0;
	n = strnlen(id, 65);
	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9')))
			return 0;
	}
	return 1;
}

enum cm_status gw_gov_cmd_key_issue(struct gw_redis_cmd *cmd, const char *ns,
				    const char *tenant, const char *client,
				    const char *key_id, const char *hmac_hex,
				    int64_t created_s, int64_t expires_s)
{
	char full[2 * GW_GOV_NAME_MAX + 2];
	enum cm_status st;

	if (!ns_valid(ns) || !gw_gov_name_ok(tenant) || !gw_gov_name_ok(client) ||
	    !key_id_ok(key_id) || !hmac_hex || strlen(hmac_hex) != 64 ||
	    expires_s < 0)
		return CM_EINVAL;
	snprintf(full, sizeof(full), "%s/%s", tenant, client);
	gw_redis_cmd_script(cmd, GW_LUA_RECORDS_KEY_ISSUE, GW_REDIS_EVAL, OP_KEY_ISSUE);
	st = gw_redis_cmd_add(cmd, "3");
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "client", full, NULL);
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "key", key_id, NULL);
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "client", full, "keys");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, key_id);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "id", key_id);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "tenant", tenant);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "client", client);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "hmac", hmac_hex);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair_i64(cmd, "created", created_s);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair_i64(cmd, "expires", expires_s);
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "revoked", "0");
	if (st == CM_OK)
		st = gw_redis_cmd_add_pair(cmd, "last_used", "0");
	return st;
}

/* Common shape of revoke and shorten: KEYS key hash, ARGV n, chan, msg. */
static enum cm_status key_cmd(struct gw_redis_cmd *cmd, int op, enum gw_lua_script script,
			      const char *ns, const char *key_id, int64_t n,
			      const char *action)
{
	char chan[GW_GOV_KEYNAME_MAX], msg[96];
	enum cm_status st;

	if (!ns_valid(ns) || !key_id_ok(key_id) || n < 0)
		return CM_EINVAL;
	st = gw_gov_channel(chan, ns);
	if (st != CM_OK)
		return st;
	snprintf(msg, sizeof(msg), "%s key %s", action, key_id);
	gw_redis_cmd_script(cmd, script, GW_REDIS_EVAL, op);
	st = gw_redis_cmd_add(cmd, "1");
	if (st == CM_OK)
		st = cmd_add_key(cmd, ns, "key", key_id, NULL);
	if (st == CM_OK)
		st = gw_redis_cmd_add_i64(cmd, n);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, chan);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, msg);
	return st;
}

enum cm_status gw_gov_cmd_key_revoke(struct gw_redis_cmd *cmd, const char *ns,
				     const char *key_id, int64_t now_s)
{
	return key_cmd(cmd, OP_KEY_REVOKE, GW_LUA_RECORDS_KEY_REVOKE, ns, key_id, now_s,
		       "revoke");
}

enum cm_status gw_gov_cmd_key_shorten(struct gw_redis_cmd *cmd, const char *ns,
				      const char *key_id, int64_t until_s)
{
	return key_cmd(cmd, OP_KEY_SHORTEN, GW_LUA_RECORDS_KEY_SHORTEN, ns, key_id, until_s,
		       "update");
}

/* ---- replies ------------------------------------------------------------- */

enum cm_status gw_gov_parse(const struct gw_redis_cmd *cmd, const redisReply *r,
			    enum gw_gov_result *out)
{
	long long v;

	if (!r || r->type != REDIS_REPLY_INTEGER)
		return CM_EPROTO;
	v = r->integer;
	if (v == 1) {
		*out = GW_GOV_DONE;
		return CM_OK;
	}
	switch (cmd->op) {
	case OP_TENANT_CREATE:
		if (v != 0)
			return CM_EPROTO;
		*out = GW_GOV_EXISTS;
		return CM_OK;
	case OP_CLIENT_CREATE:
	case OP_KEY_ISSUE:
		if (v != 0 && v != -1)
			return CM_EPROTO;
		*out = v == 0 ? GW_GOV_EXISTS : GW_GOV_PARENT_MISSING;
		return CM_OK;
	case OP_FLAG:
	case OP_UPDATE:
		if (v != 0)
			return CM_EPROTO;
		*out = GW_GOV_NOTFOUND;
		return CM_OK;
	case OP_KEY_REVOKE:
		if (v != 0 && v != 2)
			return CM_EPROTO;
		*out = v == 0 ? GW_GOV_NOTFOUND : GW_GOV_ALREADY;
		return CM_OK;
	default:
		return CM_EPROTO;
	}
}

enum cm_status gw_gov_parse_shorten(const redisReply *r,
				    struct gw_gov_shortened *out)
{
	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[3]->type != REDIS_REPLY_INTEGER)
		return CM_EPROTO;
	switch (r->element[0]->integer) {
	case 0:
		out->result = GW_GOV_NOTFOUND;
		return CM_OK;
	case 1:
		out->result = GW_GOV_DONE;
		break;
	case 2:
		out->result = GW_GOV_REVOKED;
		break;
	default:
		return CM_EPROTO;
	}
	if (r->element[1]->type != REDIS_REPLY_STRING ||
	    r->element[2]->type != REDIS_REPLY_STRING ||
	    !gw_gov_name_ok(r->element[1]->str) || !gw_gov_name_ok(r->element[2]->str))
		return CM_EPROTO;
	snprintf(out->tenant, sizeof(out->tenant), "%s", r->element[1]->str);
	snprintf(out->client, sizeof(out->client), "%s", r->element[2]->str);
	out->expires_s = r->element[3]->integer;
	return CM_OK;
}

redisReply *gw_gov_send_sync(redisContext *c, struct gw_redis_cmd *cmd)
{
	return gw_redis_send_sync(c, cmd);
}
