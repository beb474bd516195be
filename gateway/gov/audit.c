/*
 * audit.c - audit records: the append call (audit_append.lua does the
 * hashing inside Redis), parsing, and the verification walk (which
 * recomputes every hash here with common/crypto.h).
 *
 * Owns nothing between calls; the async append allocates one pending
 * command, freed before its callback runs.
 */
#include "gateway/gov/audit.h"
#include "gateway/gov/reader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"


#define VERIFY_BATCH "500"

static const char *const action_names[GW_AUDIT_ACTION_COUNT] = {
	[GW_AUDIT_TENANT_CREATE] = "tenant.create",
	[GW_AUDIT_TENANT_SET] = "tenant.set",
	[GW_AUDIT_TENANT_DISABLE] = "tenant.disable",
	[GW_AUDIT_TENANT_ENABLE] = "tenant.enable",
	[GW_AUDIT_CLIENT_CREATE] = "client.create",
	[GW_AUDIT_CLIENT_SET] = "client.set",
	[GW_AUDIT_CLIENT_DISABLE] = "client.disable",
	[GW_AUDIT_CLIENT_ENABLE] = "client.enable",
	[GW_AUDIT_KEY_ISSUE] = "key.issue",
	[GW_AUDIT_KEY_REVOKE] = "key.revoke",
	[GW_AUDIT_KEY_ROTATE] = "key.rotate",
	[GW_AUDIT_WORKER_DRAIN] = "worker.drain",
	[GW_AUDIT_EVAL_RECORD] = "eval.record",
	[GW_AUDIT_EVAL_RUN] = "eval.run",
	[GW_AUDIT_MODEL_PROMOTE] = "model.promote",
	[GW_AUDIT_MODEL_ROLLBACK] = "model.rollback",
};

static const char *const result_names[GW_AUDIT_RESULT_COUNT] = {
	[GW_AUDIT_OK] = "ok",
	[GW_AUDIT_NOT_FOUND] = "not_found",
	[GW_AUDIT_CONFLICT] = "conflict",
	[GW_AUDIT_INVALID] = "invalid",
	[GW_AUDIT_ERROR] = "error",
	[GW_AUDIT_FAILED] = "failed",
	[GW_AUDIT_REFUSED] = "refused",
};

const char *gw_audit_action_name(enum gw_audit_action a)
{
	return (unsigned)a < GW_AUDIT_ACTION_COUNT ? action_names[a] : NULL;
}

const char *gw_audit_result_name(enum gw_audit_result r)
{
	return (unsigned)r < GW_AUDIT_RESULT_COUNT ? result_names[r] : NULL;
}

static int is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int gw_audit_actor_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, GW_AUDIT_ACTOR_MAX + 1);
	if (n == 0 || n > GW_AUDIT_ACTOR_MAX || !is_alnum(s[0]))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!is_alnum(s[i]) && !strchr("_.@:-", s[i]))
			return 0;
	return 1;
}

int gw_audit_target_ok(const char *s)
{
	size_t n;

	if (!s)
		return 0;
	n = strnlen(s, GW_AUDIT_TARGET_MAX + 1);
	if (n == 0 || n > GW_AUDIT_TARGET_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && !strchr("_.:/@>-", s[i]))
			return 0;
	return 1;
}

static int in_list(const char *s, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

/* ---- append -------------------------------------------------------------- */

enum cm_status gw_audit_cmd_append(struct gw_redis_cmd *cmd, const char *ns,
				   const char *actor, enum gw_audit_action action,
				   const char *target, enum gw_audit_result result)
{
	char stream[GW_GOV_KEYNAME_MAX], head[GW_GOV_KEYNAME_MAX];
	enum cm_status st;

	if ((ns && !gw_gov_ns_ok(ns)) || !gw_audit_actor_ok(actor) ||
	    !gw_audit_target_ok(target) || !gw_audit_action_name(action) ||
	    !gw_audit_result_name(result))
		return CM_EINVAL;
	st = gw_gov_key(stream, ns, "audit", NULL, NULL);
	if (st == CM_OK)
		st = gw_gov_key(head, ns, "audit", "head", NULL);
	if (st != CM_OK)
		return st;
	gw_redis_cmd_script(cmd, GW_LUA_AUDIT_APPEND, GW_REDIS_EVAL, 0);
	st = gw_redis_cmd_add(cmd, "2");
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, stream);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, head);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, actor);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, gw_audit_action_name(action));
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, target);
	if (st == CM_OK)
		st = gw_redis_cmd_add(cmd, gw_audit_result_name(result));
	return st;
}

static int copy_str(char *dst, size_t size, const redisReply *r)
{
	if (!r || r->type != REDIS_REPLY_STRING || r->len >= size)
		return -1;
	memcpy(dst, r->str, r->len);
	dst[r->len] = '\0';
	return 0;
}

enum cm_status gw_audit_parse_append(const redisReply *r, struct gw_audit_entry *out)
{
	struct gw_audit_entry e;

	memset(&e, 0, sizeof(e));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 4)
		return CM_EPROTO;
	for (int i = 0; i < 4; i++)
		if (r->element[i]->type != REDIS_REPLY_STRING)
			return CM_EPROTO;
	if (copy_str(e.id, sizeof(e.id), r->element[0]) != 0 ||
	    gw_gov_decimal(r->element[1]->str, r->element[1]->len, &e.seq) != 0 ||
	    copy_str(e.hash, sizeof(e.hash), r->element[2]) != 0 ||
	    gw_gov_decimal(r->element[3]->str, r->element[3]->len, &e.time_us) != 0)
		return CM_EPROTO;
	if (out)
		*out = e;
	return CM_OK;
}

enum cm_status gw_audit_append_sync(redisContext *c, const char *ns,
				    const char *actor, enum gw_audit_action action,
				    const char *target, enum gw_audit_result result,
				    struct gw_audit_entry *out)
{
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	redisReply *r = NULL;
	enum cm_status st;

	if (!cmd)
		return CM_ENOMEM;
	st = gw_audit_cmd_append(cmd, ns, actor, action, target, result);
	if (st == CM_OK) {
		r = gw_redis_send_sync(c, cmd);
		st = r ? gw_audit_parse_append(r, out) : CM_EIO;
	}
	if (r)
		freeReplyObject(r);
	cm_free(cmd);
	return st;
}

struct audit_pending {
	gw_audit_done_fn done;
	void *arg;
};

static void on_append_reply(void *privdata, const redisReply *r)
{
	struct audit_pending *p = privdata;
	gw_audit_done_fn done = p->done;
	void *arg = p->arg;
	struct gw_audit_entry e;
	enum cm_status st = CM_EIO;

	if (r)
		st = gw_audit_parse_append(r, &e);
	cm_free(p);
	done(arg, st, st == CM_OK ? &e : NULL);
}

enum cm_status gw_audit_append_async(redisAsyncContext *ac, const char *ns,
				     const char *actor, enum gw_audit_action action,
				     const char *target, enum gw_audit_result result,
				     gw_audit_done_fn done, void *arg)
{
	struct audit_pending *p = cm_malloc(sizeof(*p));
	struct gw_redis_cmd *cmd = cm_malloc(sizeof(*cmd));
	enum cm_status st;

	if (!p || !cmd) {
		cm_free(p);
		cm_free(cmd);
		return CM_ENOMEM;
	}
	st = gw_audit_cmd_append(cmd, ns, actor, action, target, result);
	if (st != CM_OK) {
		cm_free(cmd);
		cm_free(p);
		return st;
	}
	p->done = done;
	p->arg = arg;
	st = gw_redis_send_async(ac, cmd, on_append_reply, p);
	if (st != CM_OK)
		cm_free(p);
	return st;
}

/* ---- reading and verifying ------------------------------------------------ */

static int is_hex64(const char *s)
{
	if (strlen(s) != CM_SHA256_HEX_LEN)
		return 0;
	for (size_t i = 0; i < CM_SHA256_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

enum cm_status gw_audit_parse_entry(const redisReply *e, struct gw_audit_entry *out)
{
	const redisReply *f;
	unsigned seen = 0;

	memset(out, 0, sizeof(*out));
	if (!e || e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
	    copy_str(out->id, sizeof(out->id), e->element[0]) != 0)
		return CM_EFORMAT;
	f = e->element[1];
	if (f->type != REDIS_REPLY_ARRAY || f->elements % 2 != 0)
		return CM_EFORMAT;
	for (size_t i = 0; i + 1 < f->elements; i += 2) {
		const redisReply *k = f->element[i], *v = f->element[i + 1];
		int rc = -1;
		unsigned bit = 0;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			return CM_EFORMAT;
		if (strcmp(k->str, "seq") == 0) {
			rc = gw_gov_decimal(v->str, v->len, &out->seq);
			bit = 1;
		} else if (strcmp(k->str, "prev") == 0) {
			rc = copy_str(out->prev, sizeof(out->prev), v);
			bit = 2;
		} else if (strcmp(k->str, "actor") == 0) {
			rc = copy_str(out->actor, sizeof(out->actor), v);
			bit = 4;
		} else if (strcmp(k->str, "action") == 0) {
			rc = copy_str(out->action, sizeof(out->action), v);
			bit = 8;
		} else if (strcmp(k->str, "target") == 0) {
			rc = copy_str(out->target, sizeof(out->target), v);
			bit = 16;
		} else if (strcmp(k->str, "time") == 0) {
			rc = gw_gov_decimal(v->str, v->len, &out->time_us);
			bit = 32;
		} else if (strcmp(k->str, "result") == 0) {
			rc = copy_str(out->result, sizeof(out->result), v);
			bit = 64;
		} else if (strcmp(k->str, "hash") == 0) {
			rc = copy_str(out->hash, sizeof(out->hash), v);
			bit = 128;
		} else {
			return CM_EFORMAT; /* no other field may exist */
		}
		if (rc != 0 || (seen & bit))
			return CM_EFORMAT;
		seen |= bit;
	}
	if (seen != 255 || !is_hex64(out->prev) || !is_hex64(out->hash) ||
	    !gw_audit_actor_ok(out->actor) || !gw_audit_target_ok(out->target) ||
	    !in_list(out->action, action_names, GW_AUDIT_ACTION_COUNT) ||
	    !in_list(out->result, result_names, GW_AUDIT_RESULT_COUNT))
		return CM_EFORMAT;
	return CM_OK;
}

void gw_audit_hash(const struct gw_audit_entry *e, char out[CM_SHA256_HEX_LEN + 1])
{
	char enc[1024];
	uint8_t md[CM_SHA256_LEN];
	int n;

	n = snprintf(enc, sizeof(enc),
		     "sluice-audit-v1\nseq=%" PRId64 "\nprev=%s\nactor=%s\naction=%s\n"
		     "target=%s\ntime=%" PRId64 "\nresult=%s\n",
		     e->seq, e->prev, e->actor, e->action, e->target, e->time_us,
		     e->result);
	if (n < 0 || (size_t)n >= sizeof(enc))
		n = 0; /* cannot happen with the field caps; hashes "" */
	cm_sha256(enc, (size_t)n, md);
	cm_hex_encode(md, sizeof(md), out);
}

static void verify_fail(struct gw_audit_verify *v, const struct gw_audit_entry *e,
		 const char *id, const char *fmt, const char *a, const char *b)
{
	v->intact = 0;
	snprintf(v->bad_id, sizeof(v->bad_id), "%s", id);
	v->bad_seq = e ? e->seq : 0;
	snprintf(v->reason, sizeof(v->reason), fmt, a, b);
}

enum cm_status gw_audit_verify_sync(redisContext *c, const char *ns,
				    struct gw_audit_verify *v)
{
	char stream[GW_GOV_KEYNAME_MAX], headkey[GW_GOV_KEYNAME_MAX];
	char start[GW_AUDIT_ID_MAX + 1] = "-", prev[CM_SHA256_HEX_LEN + 1];
	int64_t seq = 0;
	redisReply *r = NULL, *h = NULL;
	enum cm_status st = CM_OK;

	memset(v, 0, sizeof(*v));
	v->intact = 1;
	memset(prev, '0', CM_SHA256_HEX_LEN);
	prev[CM_SHA256_HEX_LEN] = '\0';
	if ((ns && !gw_gov_ns_ok(ns)) ||
	    gw_gov_key(stream, ns, "audit", NULL, NULL) != CM_OK ||
	    gw_gov_key(headkey, ns, "audit", "head", NULL) != CM_OK)
		return CM_EINVAL;
	for (;;) {
		r = redisCommand(c, "XRANGE %s %s + COUNT " VERIFY_BATCH, stream, start);
		if (!r) {
			st = CM_EIO;
			goto out;
		}
		if (r->type != REDIS_REPLY_ARRAY) {
			st = CM_EPROTO;
			goto out;
		}
		for (size_t i = 0; i < r->elements; i++) {
			struct gw_audit_entry e;
			char want[CM_SHA256_HEX_LEN + 1], seqs[24];
			const redisReply *el = r->element[i];
			const char *id = el->type == REDIS_REPLY_ARRAY && el->elements > 0 &&
					 el->element[0]->type == REDIS_REPLY_STRING
						 ? el->element[0]->str : "?";

			v->records++;
			if (gw_audit_parse_entry(el, &e) != CM_OK) {
				verify_fail(v, NULL, id, "%s%sa field is missing, malformed or unexpected",
				     "", "");
				goto out;
			}
			if (e.seq != seq + 1) {
				char found[24];

				snprintf(seqs, sizeof(seqs), "%" PRId64, seq + 1);
				snprintf(found, sizeof(found), "%" PRId64, e.seq);
				verify_fail(v, &e, id, "expected seq %s, found %s (a record is missing "
				     "or out of order)", seqs, found);
				goto out;
			}
			if (strcmp(e.prev, prev) != 0) {
				verify_fail(v, &e, id, "prev does not match the hash of the record "
				     "before it%s%s (a record was removed, altered or moved)",
				     "", "");
				goto out;
			}
			gw_audit_hash(&e, want);
			if (strcmp(e.hash, want) != 0) {
				verify_fail(v, &e, id, "hash does not match the record's fields%s%s "
				     "(the record was altered)", "", "");
				goto out;
			}
			seq = e.seq;
			memcpy(prev, e.hash, sizeof(prev));
			snprintf(start, sizeof(start), "(%s", e.id);
		}
		if (r->elements == 0)
			break;
		freeReplyObject(r);
		r = NULL;
	}
	memcpy(v->head_hash, prev, sizeof(prev));
	h = redisCommand(c, "HMGET %s seq hash", headkey);
	if (!h) {
		st = CM_EIO;
		goto out;
	}
	if (h->type != REDIS_REPLY_ARRAY || h->elements != 2) {
		st = CM_EPROTO;
		goto out;
	}
	if (h->element[1]->type == REDIS_REPLY_STRING) {
		if (strcmp(h->element[1]->str, prev) != 0)
			verify_fail(v, NULL, "", "the head (%s) names a record that is not the "
			     "last one of the stream%s (records were removed from the end)",
			     "audit:head", "");
	} else if (seq != 0) {
		verify_fail(v, NULL, "", "the head (%s) is missing but the stream has "
		     "records%s", "audit:head", "");
	}
out:
	if (r)
		freeReplyObject(r);
	if (h)
		freeReplyObject(h);
	return st;
}
