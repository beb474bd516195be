/*
 * cmd.h - one Redis command with its own argument storage, and sending it
 * with the EVALSHA -> NOSCRIPT -> EVAL fallback, asynchronously on the
 * gateway's loop or synchronously (sluicectl).
 *
 * Every module that talks to Redis (quota, usage, audit, records, auth)
 * builds its commands here: a script call starts with gw_redis_cmd_script
 * (EVALSHA by SHA-1, or EVAL with the text when the module asks for it),
 * then KEYS count, keys and ARGV are appended; each argument is copied
 * into the command (GW_REDIS_ARG_BYTES at most, GW_REDIS_CMD_ARGS in all),
 * so a command outlives the strings it was built from.  A script that
 * Redis does not know yet (NOSCRIPT: a restart, SCRIPT FLUSH) is sent
 * again once as EVAL: EVALSHA fails before running anything, so a write
 * is never applied twice.
 *
 * Owns nothing beyond the command; thread-safe (no shared state).
 */
#ifndef SLUICE_GATEWAY_REDIS_CMD_H
#define SLUICE_GATEWAY_REDIS_CMD_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "common/status.h"
#include "gateway/redis/lua.h"

#define GW_REDIS_CMD_ARGS 48
#define GW_REDIS_ARG_BYTES 256

struct gw_redis_cmd {
	int argc;
	const char *argv[GW_REDIS_CMD_ARGS];
	size_t argvlen[GW_REDIS_CMD_ARGS];
	int script;   /* enum gw_lua_script; -1 for a plain command */
	int op;       /* the builder's tag, read by its reply parser */
	char store[GW_REDIS_CMD_ARGS][GW_REDIS_ARG_BYTES];
};

enum gw_redis_call {
	GW_REDIS_EVALSHA = 0, /* by SHA-1 (hot paths: quota, usage) */
	GW_REDIS_EVAL = 1,    /* with the text (rare writes: records, audit) */
};

/* Starts a script call: argv = EVALSHA sha1 | EVAL text. */
void gw_redis_cmd_script(struct gw_redis_cmd *c, enum gw_lua_script s,
			 enum gw_redis_call how, int op);
/* Starts a plain command (name copied). */
void gw_redis_cmd_plain(struct gw_redis_cmd *c, const char *name);
/* Turns a script call into EVAL with the text (after NOSCRIPT). */
void gw_redis_cmd_use_eval(struct gw_redis_cmd *c);

/* Appends one argument; CM_EINVAL when it or the count is over the cap. */
enum cm_status gw_redis_cmd_add(struct gw_redis_cmd *c, const char *s) CM_WUR;
enum cm_status gw_redis_cmd_add_i64(struct gw_redis_cmd *c, int64_t v) CM_WUR;
/* A field and its value (hash pairs in ARGV). */
enum cm_status gw_redis_cmd_add_pair(struct gw_redis_cmd *c, const char *f,
				     const char *v) CM_WUR;
enum cm_status gw_redis_cmd_add_pair_i64(struct gw_redis_cmd *c, const char *f,
					 int64_t v) CM_WUR;

/* 1 when the reply is Redis' NOSCRIPT error. */
int gw_redis_reply_is_noscript(const redisReply *r);

/* A reply (NULL: the connection failed or closed before it came). */
typedef void (*gw_redis_reply_fn)(void *arg, const redisReply *r);

/*
 * Sends `c` on `ac` and calls fn(arg, reply) once, with the EVAL fallback
 * on NOSCRIPT.  Takes `c` (heap, cm_malloc): freed after fn returns, or
 * at once when the send fails (CM_EIO, fn not called).
 */
enum cm_status gw_redis_send_async(redisAsyncContext *ac, struct gw_redis_cmd *c,
				   gw_redis_reply_fn fn, void *arg) CM_WUR;

/* Sends `c` and waits, with the EVAL fallback; the caller frees the reply
 * (freeReplyObject).  NULL when the connection failed. */
redisReply *gw_redis_send_sync(redisContext *ctx, struct gw_redis_cmd *c);

#endif
