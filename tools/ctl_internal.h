/*
 * ctl_internal.h - shared by the sluicectl command modules (tools/ctl_*.c).
 *
 * sluicectl's governance commands talk to Redis synchronously (hiredis) with
 * the data model of docs/data-model.md.  Exit codes (docs/sluicectl.md):
 * 0 ok, 1 usage, 2 not found, 3 conflict, 4 Redis (or the gateway's admin
 * API) unavailable, 5 invalid value, 6 audit chain broken (`audit verify`),
 * 7 the admin API refused the token, 8 an eval run missed its gates.  Every mutating command
 * appends an audit record (gateway/gov/audit.h) after its write.  Commands print readable tables, or JSON with --json.  Messages go
 * to stderr and name what was expected and what was found; a key's secret
 * is printed once, by `key issue`, and nowhere else.
 *
 * Single-threaded: a command runs start to finish on the calling thread.
 */
#ifndef SLUICE_TOOLS_CTL_INTERNAL_H
#define SLUICE_TOOLS_CTL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <jansson.h>

#include "common/status.h"
#include "gateway/gov/audit.h"
#include "gateway/gov/reader.h"
#include "gateway/gov/records.h"

enum ctl_exit {
	CTL_EXIT_OK = 0,
	CTL_EXIT_USAGE = 1,
	CTL_EXIT_NOTFOUND = 2,
	CTL_EXIT_CONFLICT = 3,
	CTL_EXIT_REDIS = 4,
	CTL_EXIT_INVALID = 5,
	CTL_EXIT_AUDIT_BROKEN = 6,
	CTL_EXIT_REFUSED = 7,      /* the admin API refused the token (401/403) */
	CTL_EXIT_GATE = 8,         /* `eval run`: the run missed its gates */
	CTL_EXIT_UNAVAILABLE = CTL_EXIT_REDIS, /* the gateway's admin API: unreachable or 5xx */
};

#define CTL_NAME_MAX 63
#define CTL_NS_MAX 32
#define CTL_KEYNAME_MAX 256

/* Global options and the Redis connection of one sluicectl run. */
struct ctl {
	const char *redis_url;   /* unix:///path or redis://host[:port] */
	const char *pepper_file; /* for `key issue` */
	const char *redis_password_file; /* AUTH; NULL or "": none */
	const char *redis_user;  /* ACL user; NULL or "": default */
	const char *ns;          /* key namespace, "sluice:" by default */
	int json;                /* --json */
	const char *actor;       /* audit actor: --actor, else the OS user */
	redisContext *rc;        /* NULL until ctl_connect() */
};

/* ---- ctl_redis.c ---- */

/* Connects to ctl->redis_url; CTL_EXIT_REDIS (message printed) on failure. */
int ctl_connect(struct ctl *ctl);
void ctl_disconnect(struct ctl *ctl);
/*
 * Runs a command built from argv; returns the reply (caller frees) or NULL
 * after printing a message (connection lost, or an error reply).
 */
redisReply *ctl_cmd_argv(struct ctl *ctl, int argc, const char **argv);
/* printf-style command (hiredis's %s/%b formats). */
redisReply *ctl_cmd(struct ctl *ctl, const char *fmt, ...);
/* Runs a governance command (gateway/gov/records.h); reply or NULL after a message. */
redisReply *ctl_gov(struct ctl *ctl, struct gw_redis_cmd *cmd);
/*
 * Appends an audit record for a mutating command (actor = ctl->actor).
 * Returns CTL_EXIT_OK, or CTL_EXIT_REDIS after a message saying the action
 * was done but could not be recorded.
 */
int ctl_audit(struct ctl *ctl, enum gw_audit_action action, const char *target,
	      enum gw_audit_result result);
/* Runs a Lua script with EVAL: numkeys keys then args (all C strings). */
redisReply *ctl_eval(struct ctl *ctl, const char *script, int nkeys,
		     const char **keys, int nargs, const char **args);

/* "<ns><what>" or "<ns><what>:<name>" built into out[CTL_KEYNAME_MAX]. */
void ctl_key(const struct ctl *ctl, char out[CTL_KEYNAME_MAX], const char *what,
	     const char *name, const char *suffix);
/* The revocation channel name. */
void ctl_channel(const struct ctl *ctl, char out[CTL_KEYNAME_MAX]);

/* [a-z0-9][a-z0-9_.-]{0,62}; prints a message naming `what` when not. */
int ctl_name_ok(const char *what, const char *s);
/* Splits "TENANT/CLIENT" into two validated names (copied into t and c). */
int ctl_split_client(const char *arg, char t[CTL_NAME_MAX + 1],
		     char c[CTL_NAME_MAX + 1]);
/*
 * Parses quota options from args[*i] (and its value); returns 1 when the
 * option was one of gw_gov_fields (*i advanced past the value), 0 when not a
 * quota option, -1 after printing a message on a bad or missing value
 * (CTL_EXIT_INVALID or CTL_EXIT_USAGE in *exit_code).
 */
int ctl_quota_opt(int argc, char **argv, int *i, struct gw_gov_quotas *q,
		  int *exit_code);
/* Strict decimal parse into [min, max]; 0 on success. */
int ctl_parse_ll(const char *s, long long min, long long max, long long *out);

/* Seconds since the Unix epoch, from this machine's clock. */
long long ctl_now_s(void);
/* "2026-11-30T20:01:02Z", or "-" for 0. */
void ctl_fmt_time(long long unix_s, char out[32]);

/* SMEMBERS of `key`, sorted (gateway/gov/reader.h: pointers into *reply,
 * which the caller frees; the array with cm_free).  NULL on failure. */
const char **ctl_members_sorted(struct ctl *ctl, const char *key, redisReply **reply,
				size_t *n);

/* Prints a JSON value on stdout (indent 2) and frees it. */
void ctl_print_json(json_t *v);

/* A simple text table: fixed columns, rows added as strings. */
struct ctl_table;
struct ctl_table *ctl_table_new(int ncols, const char *const *headings);
/* Adds a row of ncols strings (copied); 0 ok, -1 out of memory. */
int ctl_table_add(struct ctl_table *t, const char *const *cells);
void ctl_table_print(struct ctl_table *t);
void ctl_table_free(struct ctl_table *t);
/* Prints *arr (--json; taken: *arr becomes NULL) when it is set, else the table. */
void ctl_emit(json_t **arr, struct ctl_table *t);
/*
 * Whether the tenant t (c "") or the client t/c exists: CTL_EXIT_OK,
 * CTL_EXIT_NOTFOUND after a message naming it, or CTL_EXIT_REDIS.
 */
int ctl_target_exists(struct ctl *ctl, const char *t, const char *c);
/*
 * Parses the quota options and exactly one positional argument of
 * `sluicectl <cmd>` (`expected` names it in the message): 0 with *pos
 * set, or the exit code after a message.
 */
int ctl_create_args(int argc, char **argv, const char *cmd, const char *expected,
		    struct gw_gov_quotas *q, const char **pos);

/* ---- command groups (each returns an exit code) ---- */
int ctl_tenant_cmd(struct ctl *ctl, int argc, char **argv);
int ctl_client_cmd(struct ctl *ctl, int argc, char **argv);
int ctl_key_cmd(struct ctl *ctl, int argc, char **argv);
int ctl_audit_cmd(struct ctl *ctl, int argc, char **argv);
int ctl_usage_cmd(struct ctl *ctl, int argc, char **argv);

#endif
