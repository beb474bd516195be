/*
 * cmd.c - Redis commands with their own storage, and their sending with
 * the EVALSHA/NOSCRIPT/EVAL fallback (see cmd.h).
 */
#include "gateway/redis/cmd.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

static void rc_set(struct gw_redis_cmd *c, int i, const char *s)
{
	c->argv[i] = s;
	c->argvlen[i] = strlen(s);
}

void gw_redis_cmd_script(struct gw_redis_cmd *c, enum gw_lua_script s,
			 enum gw_redis_call how, int op)
{
	c->script = (int)s;
	c->op = op;
	if (how == GW_REDIS_EVAL) {
		rc_set(c, 0, "EVAL");
		rc_set(c, 1, gw_lua_text(s));
	} else {
		rc_set(c, 0, "EVALSHA");
		rc_set(c, 1, gw_lua_sha1(s));
	}
	c->argc = 2;
}

void gw_redis_cmd_plain(struct gw_redis_cmd *c, const char *name)
{
	c->script = -1;
	c->op = 0;
	c->argc = 0;
	if (gw_redis_cmd_add(c, name) != CM_OK)
		c->argc = 0;
}

void gw_redis_cmd_use_eval(struct gw_redis_cmd *c)
{
	if (c->script < 0 || c->argc < 2)
		return;
	rc_set(c, 0, "EVAL");
	rc_set(c, 1, gw_lua_text((enum gw_lua_script)c->script));
}

enum cm_status gw_redis_cmd_add(struct gw_redis_cmd *c, const char *s)
{
	size_t n = strnlen(s, GW_REDIS_ARG_BYTES);

	if (c->argc >= GW_REDIS_CMD_ARGS || n >= GW_REDIS_ARG_BYTES)
		return CM_EINVAL;
	memcpy(c->store[c->argc], s, n + 1);
	c->argv[c->argc] = c->store[c->argc];
	c->argvlen[c->argc] = n;
	c->argc++;
	return CM_OK;
}

enum cm_status gw_redis_cmd_add_i64(struct gw_redis_cmd *c, int64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRId64, v);
	return gw_redis_cmd_add(c, num);
}

enum cm_status gw_redis_cmd_add_pair(struct gw_redis_cmd *c, const char *f, const char *v)
{
	enum cm_status st = gw_redis_cmd_add(c, f);

	return st == CM_OK ? gw_redis_cmd_add(c, v) : st;
}

enum cm_status gw_redis_cmd_add_pair_i64(struct gw_redis_cmd *c, const char *f, int64_t v)
{
	enum cm_status st = gw_redis_cmd_add(c, f);

	return st == CM_OK ? gw_redis_cmd_add_i64(c, v) : st;
}

int gw_redis_reply_is_noscript(const redisReply *r)
{
	return r && r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, "NOSCRIPT", 8) == 0;
}

/* ---- sending ------------------------------------------------------------------ */

struct rc_pending {
	struct gw_redis_cmd *c;
	gw_redis_reply_fn fn;
	void *arg;
	int retried; /* already resent as EVAL */
};

static void rc_on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct rc_pending *p = privdata;
	const redisReply *r = reply;

	if (r && gw_redis_reply_is_noscript(r) && !p->retried) {
		p->retried = 1;
		gw_redis_cmd_use_eval(p->c);
		if (redisAsyncCommandArgv(ac, rc_on_reply, p, p->c->argc, p->c->argv,
					  p->c->argvlen) == REDIS_OK)
			return;
		r = NULL; /* could not resend: report a connection failure */
	}
	p->fn(p->arg, r);
	cm_free(p->c);
	cm_free(p);
}

enum cm_status gw_redis_send_async(redisAsyncContext *ac, struct gw_redis_cmd *c,
				   gw_redis_reply_fn fn, void *arg)
{
	struct rc_pending *p = ac ? cm_malloc(sizeof(*p)) : NULL;

	if (!p) {
		cm_free(c);
		return ac ? CM_ENOMEM : CM_EIO;
	}
	p->c = c;
	p->fn = fn;
	p->arg = arg;
	p->retried = 0;
	if (redisAsyncCommandArgv(ac, rc_on_reply, p, c->argc, c->argv, c->argvlen) != REDIS_OK) {
		cm_free(c);
		cm_free(p);
		return CM_EIO;
	}
	return CM_OK;
}

redisReply *gw_redis_send_sync(redisContext *ctx, struct gw_redis_cmd *c)
{
	redisReply *r = redisCommandArgv(ctx, c->argc, c->argv, c->argvlen);

	if (gw_redis_reply_is_noscript(r)) {
		freeReplyObject(r);
		gw_redis_cmd_use_eval(c);
		r = redisCommandArgv(ctx, c->argc, c->argv, c->argvlen);
	}
	return r;
}
