/*
 * admin.c - the admin API handlers (see admin.h).
 *
 * Each request that needs Redis becomes one struct adm_op, allocated here
 * and freed when its last Redis reply has arrived and the response was
 * sent (or the client went away).  Commands of one op are pipelined on the
 * single async connection, so their replies arrive in the order sent and
 * op->recv counts them.  Mutations are a short list of steps (a governance
 * script each), each followed by its audit record; the response is sent
 * after the last audit record was written.
 *
 * Loop: the server's event_base, which also drives the hiredis context.
 * Invariant: no call here blocks; file reads happen only in gw_admin_new().
 */
#include "gateway/admin/admin.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "gateway/gov/apikey.h"
#include "gateway/gov/audit.h"
#include "gateway/gov/records.h"
#include "gateway/gov/usage.h"

#define CRED_FILE_MAX (64 * 1024)
#define PATH_SEGS_MAX 5
#define ROTATE_OVERLAP_DEFAULT_S 86400
#define ISSUE_ATTEMPTS 3
#define STEPS_MAX 2

struct adm_cred {
	char name[GW_AUDIT_ACTOR_MAX + 1];
	uint8_t digest[CM_SHA256_LEN]; /* SHA-256 of the token */
};

struct gw_admin {
	char ns[GW_GOV_NS_MAX + 1];
	redisAsyncContext *ac;
	struct adm_cred creds[GW_ADMIN_CREDENTIALS_MAX];
	size_t ncreds;
	uint32_t uids[GW_ADMIN_UIDS_MAX];
	size_t nuids;
	struct gw_key_pepper *pepper;
	gw_admin_drain_fn drain;
	void *drain_arg;
	struct gw_admin_stats stats;
};

/* ---- setup ------------------------------------------------------------------ */

static enum cm_status load_credentials(struct gw_admin *a, const char *path,
				       char *err, size_t errlen)
{
	struct stat sb;
	char *buf = NULL, *line, *save = NULL;
	enum cm_status st = CM_OK;
	ssize_t n;
	int fd, lineno = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		snprintf(err, errlen, "admin.credentials_file %s: cannot open (%s)", path,
			 strerror(errno));
		return errno == ENOENT ? CM_ENOTFOUND : CM_EIO;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "admin.credentials_file %s: expected a regular file", path);
		st = CM_EFORMAT;
		goto out;
	}
	if (sb.st_mode & 077) {
		snprintf(err, errlen, "admin.credentials_file %s: expected no group or other "
			 "permissions, found mode %03o (chmod 600)", path,
			 (unsigned)(sb.st_mode & 0777));
		st = CM_EPERM;
		goto out;
	}
	if (sb.st_size > CRED_FILE_MAX) {
		snprintf(err, errlen, "admin.credentials_file %s: expected at most %d bytes",
			 path, CRED_FILE_MAX);
		st = CM_EFORMAT;
		goto out;
	}
	buf = cm_malloc((size_t)sb.st_size + 1);
	if (!buf) {
		st = CM_ENOMEM;
		goto out;
	}
	n = read(fd, buf, (size_t)sb.st_size);
	if (n != sb.st_size) {
		snprintf(err, errlen, "admin.credentials_file %s: short read", path);
		st = CM_EIO;
		goto out;
	}
	buf[n] = '\0';
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *name, *token, *extra, *s2 = NULL;
		size_t tl;

		lineno++;
		line[strcspn(line, "\r")] = '\0';
		name = strtok_r(line, " \t", &s2);
		if (!name || name[0] == '#')
			continue;
		token = strtok_r(NULL, " \t", &s2);
		extra = strtok_r(NULL, " \t", &s2);
		tl = token ? strlen(token) : 0;
		if (!gw_audit_actor_ok(name) || !token || extra ||
		    tl < GW_ADMIN_TOKEN_MIN || tl > GW_ADMIN_TOKEN_MAX) {
			snprintf(err, errlen, "admin.credentials_file %s line %d: expected "
				 "\"NAME TOKEN\" with a name of [A-Za-z0-9_.@:-] and a token "
				 "of %d to %d characters", path, lineno, GW_ADMIN_TOKEN_MIN,
				 GW_ADMIN_TOKEN_MAX);
			st = CM_EFORMAT;
			goto out;
		}
		for (size_t i = 0; i < tl; i++) {
			if ((unsigned char)token[i] <= 0x20 || (unsigned char)token[i] >= 0x7f) {
				snprintf(err, errlen, "admin.credentials_file %s line %d: the "
					 "token has a non-printable character", path, lineno);
				st = CM_EFORMAT;
				goto out;
			}
		}
		if (a->ncreds == GW_ADMIN_CREDENTIALS_MAX) {
			snprintf(err, errlen, "admin.credentials_file %s: expected at most %d "
				 "credentials", path, GW_ADMIN_CREDENTIALS_MAX);
			st = CM_ELIMIT;
			goto out;
		}
		snprintf(a->creds[a->ncreds].name, sizeof(a->creds[0].name), "%s", name);
		cm_sha256(token, tl, a->creds[a->ncreds].digest);
		a->ncreds++;
	}
out:
	if (buf) {
		cm_wipe(buf, (size_t)sb.st_size + 1);
		cm_free(buf);
	}
	close(fd);
	return st;
}

enum cm_status gw_admin_new(const struct gw_admin_config *cfg, redisAsyncContext *ac,
			    struct gw_admin **out, char *err, size_t errlen)
{
	struct gw_admin *a;
	enum cm_status st = CM_OK;

	*out = NULL;
	if (cfg->ns && !gw_gov_ns_ok(cfg->ns)) {
		snprintf(err, errlen, "redis.namespace: expected 1 to %d characters of "
			 "[a-z0-9_.:-]", GW_GOV_NS_MAX);
		return CM_EINVAL;
	}
	if (cfg->n_allowed_uids > GW_ADMIN_UIDS_MAX) {
		snprintf(err, errlen, "admin.allowed_uids: expected at most %d, found %zu",
			 GW_ADMIN_UIDS_MAX, cfg->n_allowed_uids);
		return CM_EINVAL;
	}
	a = cm_calloc(1, sizeof(*a));
	if (!a)
		return CM_ENOMEM;
	snprintf(a->ns, sizeof(a->ns), "%s", cfg->ns ? cfg->ns : GW_GOV_NS_DEFAULT);
	a->ac = ac;
	a->drain = cfg->drain;
	a->drain_arg = cfg->drain_arg;
	for (size_t i = 0; i < cfg->n_allowed_uids; i++)
		a->uids[a->nuids++] = cfg->allowed_uids[i];
	if (cfg->credentials_file)
		st = load_credentials(a, cfg->credentials_file, err, errlen);
	if (st == CM_OK && cfg->pepper_file)
		st = gw_key_pepper_load(cfg->pepper_file, &a->pepper, err, errlen);
	if (st != CM_OK) {
		gw_admin_free(a);
		return st;
	}
	*out = a;
	return CM_OK;
}

void gw_admin_free(struct gw_admin *a)
{
	if (!a)
		return;
	gw_key_pepper_free(a->pepper);
	cm_wipe(a->creds, sizeof(a->creds));
	cm_free(a);
}

void gw_admin_set_redis(struct gw_admin *a, redisAsyncContext *ac)
{
	a->ac = ac;
}

void gw_admin_get_stats(const struct gw_admin *a, struct gw_admin_stats *out)
{
	*out = a->stats;
}

enum cm_status gw_admin_peer_check(const struct gw_admin *a, int fd, uint32_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    len != sizeof(cred))
		return CM_EIO;
	*uid = (uint32_t)cred.uid;
	for (size_t i = 0; i < a->nuids; i++)
		if (a->uids[i] == (uint32_t)cred.uid)
			return CM_OK;
	return CM_EPERM;
}

/* ---- responses -------------------------------------------------------------- */

static void respond_json(struct gw_admin *a, struct gw_request *req, int status,
			 json_t *body)
{
	char *s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);

	(void)a;
	json_decref(body);
	if (!req) {
		free(s);
		return;
	}
	if (gw_request_add_header(req, "Cache-Control", "no-store") != CM_OK) {
		/* Best effort: the body matters more than the header. */
	}
	if (!s) {
		static const char oom[] = "{\"error\":{\"type\":\"internal\","
					  "\"message\":\"out of memory\"}}";

		if (gw_request_respond(req, 500, "application/json", oom, sizeof(oom) - 1) != CM_OK) {
			/* the connection is going away */
		}
		return;
	}
	if (gw_request_respond(req, status, "application/json", s, strlen(s)) == CM_ELIMIT) {
		static const char big[] = "{\"error\":{\"type\":\"too_large\",\"message\":"
					  "\"the response exceeds the output limit; narrow the query\"}}";

		if (gw_request_respond(req, 500, "application/json", big, sizeof(big) - 1) != CM_OK) {
			/* the connection is going away */
		}
	}
	cm_wipe(s, strlen(s)); /* may hold a freshly issued key */
	free(s);
}

static json_t *error_body(const char *type, const char *field, const char *fmt, ...)
	CM_PRINTF(3, 4);

static json_t *error_body(const char *type, const char *field, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *e = json_object();

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_object_set_new(e, "type", json_string(type));
	json_object_set_new(e, "message", json_string(msg));
	if (field)
		json_object_set_new(e, "field", json_string(field));
	return json_pack("{s:o}", "error", e);
}

/* ---- request parsing -------------------------------------------------------- */

static int key_id_ok(const char *s)
{
	return s && gw_key_id_check(s, strlen(s)) == CM_OK;
}

/* Splits "/admin/a/b/c" into segments (copied into buf). */
static int split_path(const char *path, char buf[256], char *seg[PATH_SEGS_MAX])
{
	int n = 0;
	char *p, *save = NULL;

	if (strncmp(path, "/admin/", 7) != 0 || strlen(path + 7) >= 256)
		return -1;
	snprintf(buf, 256, "%s", path + 7);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (n == PATH_SEGS_MAX)
			return -1;
		seg[n++] = p;
	}
	return n;
}

/* Value of `name` in a query string "a=1&b=2" (copied); 1 found, 0 not. */
static int query_get(const char *q, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);

	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);

		if (len > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
			size_t vl = len - nl - 1;

			if (vl >= size)
				vl = size - 1;
			memcpy(out, q + nl + 1, vl);
			out[vl] = '\0';
			return 1;
		}
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* The request body as a JSON object; NULL with *err set (400). */
static json_t *body_object(struct gw_request *req, int allow_empty, json_t **err)
{
	size_t len = 0;
	const uint8_t *b = gw_request_body(req, &len);
	json_error_t je;
	json_t *o;

	if (len == 0 && allow_empty)
		return json_object();
	o = json_loadb((const char *)b, len, JSON_REJECT_DUPLICATES, &je);
	if (!o || !json_is_object(o)) {
		*err = error_body("invalid_json", NULL, "expected a JSON object%s%s",
				  o ? "" : ": ", o ? "" : je.text);
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * Reads quota fields of `o` into q.  allow_null: null clears (PATCH).
 * allow_weight: tenants only.  Other members must be in `extra` (NULL
 * terminated).  NULL when fine, else the 400 body naming the field.
 */
static json_t *parse_quotas(json_t *o, struct gw_gov_quotas *q, int allow_null,
			    int allow_weight, const char *const *extra)
{
	const char *k;
	json_t *v;

	memset(q, 0, sizeof(*q));
	json_object_foreach(o, k, v) {
		int f = gw_gov_field_by_name(k), known = 0;

		for (int i = 0; extra && extra[i]; i++)
			known |= strcmp(extra[i], k) == 0;
		if (known)
			continue;
		if (f < 0 || (f == GW_GOV_F_WEIGHT && !allow_weight))
			return error_body("unknown_field", k, "unknown field \"%.64s\"%s", k,
					  f == GW_GOV_F_WEIGHT ? ": weight applies to tenants only" : "");
		if (json_is_null(v) && allow_null && f != GW_GOV_F_WEIGHT) {
			q->clear[f] = 1;
			continue;
		}
		if (!json_is_integer(v) ||
		    !gw_gov_value_ok((enum gw_gov_field)f, (long long)json_integer_value(v)))
			return error_body("invalid_value", k,
					  "%s: expected an integer from %lld to %lld%s", k,
					  gw_gov_fields[f].min, gw_gov_fields[f].max,
					  allow_null && f != GW_GOV_F_WEIGHT ? " (or null for no limit)" : "");
		q->set[f] = 1;
		q->val[f] = (long long)json_integer_value(v);
	}
	return NULL;
}

/* An optional integer member in [min, max]; NULL when fine or absent. */
static json_t *parse_seconds(json_t *o, const char *name, long long min, long long max,
			     long long *out)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return NULL;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return error_body("invalid_value", name,
				  "%s: expected an integer number of seconds from %lld to %lld",
				  name, min, max);
	*out = (long long)json_integer_value(v);
	return NULL;
}

static json_t *only_members(json_t *o, const char *const *allowed)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		int ok = 0;

		for (int i = 0; allowed[i]; i++)
			ok |= strcmp(allowed[i], k) == 0;
		if (!ok)
			return error_body("unknown_field", k, "unknown field \"%.64s\"", k);
	}
	return NULL;
}

/* ---- operations -------------------------------------------------------------- */

enum step_kind { STEP_GOV = 0, STEP_SHORTEN, STEP_ISSUE };

struct adm_step {
	enum step_kind kind;
	struct gw_gov_cmd cmd;
	enum gw_audit_action action;
	char target[GW_AUDIT_TARGET_MAX + 1];
	const char *what; /* "tenant", "client", "key" for messages */
};

enum read_kind {
	READ_TENANTS = 1, /* SMEMBERS, then HGETALL each */
	READ_TENANT,      /* HGETALL + SMEMBERS, then HGETALL each client */
	READ_CLIENT,      /* HGETALL */
	READ_KEYS,        /* SMEMBERS, then HGETALL each key */
	READ_USAGE,       /* [SMEMBERS tenants], then HGETALL per day */
	READ_AUDIT,       /* XRANGE */
};

struct adm_op {
	struct gw_admin *a;
	struct gw_request *req; /* NULL once the client went away */
	char actor[GW_AUDIT_ACTOR_MAX + 1];
	int status;
	json_t *body;           /* response being built */
	/* mutations */
	struct adm_step steps[STEPS_MAX];
	int nsteps, cur;
	int attempts;           /* key id collisions retried */
	char tenant[GW_GOV_NAME_MAX + 1], client[GW_GOV_NAME_MAX + 1];
	char key_id[GW_KEY_ID_LEN + 1], old_id[GW_KEY_ID_LEN + 1];
	char key[GW_KEY_LEN + 1];
	long long expires_in, overlap; /* seconds */
	int64_t old_expires;
	/* reads */
	enum read_kind rk;
	int stage, pending, recv, failed;
	json_t *arr;            /* collected records */
	char **names;           /* names read in stage 1 (sorted) */
	size_t nnames;
	int64_t from, to;       /* usage range, Unix s at midnight */
	int with_clients;
	char after[GW_AUDIT_ID_MAX + 2];
	long long count;
};

static void op_free(struct adm_op *op)
{
	if (!op)
		return;
	json_decref(op->body);
	json_decref(op->arr);
	for (size_t i = 0; i < op->nnames; i++)
		cm_free(op->names[i]);
	cm_free(op->names);
	cm_wipe(op->key, sizeof(op->key));
	cm_free(op);
}

static void on_req_close(struct gw_request *req, void *arg)
{
	struct adm_op *op = arg;

	(void)req;
	op->req = NULL;
}

static struct adm_op *op_new(struct gw_admin *a, struct gw_request *req,
			     const char *actor)
{
	struct adm_op *op = cm_calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->a = a;
	op->req = req;
	snprintf(op->actor, sizeof(op->actor), "%s", actor);
	gw_request_on_close(req, on_req_close, op);
	return op;
}

/* Sends the response (if the client is still there) and frees the op. */
static void op_finish(struct adm_op *op, int status, json_t *body)
{
	if (op->req) {
		gw_request_on_close(op->req, NULL, NULL);
		respond_json(op->a, op->req, status, body);
	} else {
		json_decref(body);
	}
	op->req = NULL;
	op_free(op);
}

static json_t *redis_down(void)
{
	return error_body("unavailable", NULL, "Redis is unavailable; retry later");
}

/* ---- mutations: steps and their audit records ---------------------------------- */

static void run_step(struct adm_op *op);

static void on_audit(void *arg, enum cm_status st, const struct gw_audit_entry *e)
{
	struct adm_op *op = arg;

	(void)e;
	if (st != CM_OK) {
		op->a->stats.audit_failures++;
		/* The action happened: say so, and that it is not recorded. */
		if (op->body && json_is_object(op->body))
			json_object_set_new(op->body, "audit", json_string("failed"));
		op_finish(op, op->status, json_incref(op->body));
		return;
	}
	op->a->stats.mutations++;
	if (op->status < 300 && op->cur + 1 < op->nsteps) {
		op->cur++;
		run_step(op);
		return;
	}
	op_finish(op, op->status, json_incref(op->body));
}

/* Records the current step's outcome, then continues in on_audit. */
static void audit_step(struct adm_op *op, enum gw_audit_action action,
		       const char *target, enum gw_audit_result res)
{
	if (!op->a->ac || gw_audit_append_async(op->a->ac, op->a->ns, op->actor, action,
						target, res, on_audit, op) != CM_OK)
		on_audit(op, CM_EIO, NULL);
}

static void set_error(struct adm_op *op, int status, json_t *body)
{
	op->status = status;
	json_decref(op->body);
	op->body = body;
}

/* Fills the body of a successful issue/rotate and wipes the local copy. */
static void issued_body(struct adm_op *op)
{
	json_t *o = json_object();

	json_object_set_new(o, "key_id", json_string(op->key_id));
	json_object_set_new(o, "key", json_string(op->key));
	json_object_set_new(o, "tenant", json_string(op->tenant));
	json_object_set_new(o, "client", json_string(op->client));
	json_object_set_new(o, "expires", op->expires_in ?
			    json_integer(cm_wall_ns() / CM_NS_PER_S + op->expires_in) :
			    json_null());
	if (op->old_id[0]) {
		json_object_set_new(o, "replaces", json_string(op->old_id));
		json_object_set_new(o, "replaced_expires", json_integer(op->old_expires));
	}
	cm_wipe(op->key, sizeof(op->key));
	set_error(op, op->old_id[0] ? 200 : 201, o);
}

/* Generates a key and (re)builds the issue step.  0, or -1 after set_error. */
static int build_issue(struct adm_op *op, struct adm_step *s)
{
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	int64_t now = cm_wall_ns() / CM_NS_PER_S;
	enum cm_status st;

	st = gw_key_generate(op->a->pepper, op->key, op->key_id, mac);
	if (st == CM_OK) {
		cm_hex_encode(mac, sizeof(mac), hmac_hex);
		st = gw_gov_cmd_key_issue(&s->cmd, op->a->ns, op->tenant, op->client,
					  op->key_id, hmac_hex, now,
					  op->expires_in ? now + op->expires_in : 0);
	}
	cm_wipe(mac, sizeof(mac));
	if (st != CM_OK) {
		set_error(op, 500, error_body("internal", NULL, "cannot generate a key"));
		return -1;
	}
	s->kind = STEP_ISSUE;
	return 0;
}

static void on_step_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct adm_op *op = privdata;
	struct adm_step *s = &op->steps[op->cur];
	redisReply *r = reply;
	enum gw_gov_result res;
	enum gw_audit_result ares = GW_AUDIT_OK;
	char target[GW_AUDIT_TARGET_MAX + 1];

	(void)ac;
	snprintf(target, sizeof(target), "%s", s->target);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		set_error(op, 503, redis_down());
		audit_step(op, s->action, target, GW_AUDIT_ERROR);
		return;
	}
	if (s->kind == STEP_SHORTEN) {
		struct gw_gov_shortened sh;

		if (gw_gov_parse_shorten(r, &sh) != CM_OK) {
			set_error(op, 500, error_body("internal", NULL, "unexpected reply from Redis"));
			audit_step(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		if (sh.result == GW_GOV_NOTFOUND) {
			set_error(op, 404, error_body("not_found", NULL, "no key \"%s\"", op->old_id));
			audit_step(op, s->action, target, GW_AUDIT_NOT_FOUND);
			return;
		}
		if (sh.result == GW_GOV_REVOKED) {
			set_error(op, 409, error_body("conflict", NULL, "key %s is revoked: issue "
						      "a new key for %s/%s instead", op->old_id,
						      sh.tenant, sh.client));
			audit_step(op, s->action, target, GW_AUDIT_CONFLICT);
			return;
		}
		snprintf(op->tenant, sizeof(op->tenant), "%s", sh.tenant);
		snprintf(op->client, sizeof(op->client), "%s", sh.client);
		op->old_expires = sh.expires_s;
		if (build_issue(op, s) != 0) {
			audit_step(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		run_step(op); /* the same step, now an issue */
		return;
	}
	if (gw_gov_parse(&s->cmd, r, &res) != CM_OK) {
		set_error(op, 500, error_body("internal", NULL, "unexpected reply from Redis"));
		audit_step(op, s->action, target, GW_AUDIT_ERROR);
		return;
	}
	if (s->kind == STEP_ISSUE && res == GW_GOV_EXISTS &&
	    ++op->attempts < ISSUE_ATTEMPTS) {
		if (build_issue(op, s) != 0) {
			audit_step(op, s->action, target, GW_AUDIT_ERROR);
			return;
		}
		run_step(op);
		return;
	}
	switch (res) {
	case GW_GOV_DONE:
	case GW_GOV_ALREADY:
		if (s->kind == STEP_ISSUE) {
			if (op->old_id[0])
				snprintf(target, sizeof(target), "%s>%s", op->old_id, op->key_id);
			else
				snprintf(target, sizeof(target), "%s/%s/%s", op->tenant,
					 op->client, op->key_id);
			issued_body(op);
		} else if (res == GW_GOV_ALREADY && op->body) {
			json_object_set_new(op->body, "already_revoked", json_true());
		}
		break;
	case GW_GOV_EXISTS:
		ares = GW_AUDIT_CONFLICT;
		set_error(op, 409, error_body("conflict", NULL, s->kind == STEP_ISSUE ?
					      "could not allocate a unique key id" :
					      "%s \"%s\" already exists", s->what, s->target));
		break;
	case GW_GOV_PARENT_MISSING:
		ares = GW_AUDIT_NOT_FOUND;
		if (s->kind == STEP_ISSUE)
			set_error(op, 404, error_body("not_found", NULL, "no client \"%s/%s\"",
						      op->tenant, op->client));
		else
			set_error(op, 404, error_body("not_found", NULL, "no tenant \"%s\"",
						      op->tenant));
		break;
	case GW_GOV_NOTFOUND:
	case GW_GOV_REVOKED:
		ares = GW_AUDIT_NOT_FOUND;
		set_error(op, 404, error_body("not_found", NULL, "no %s \"%s\"", s->what,
					      s->target));
		break;
	}
	audit_step(op, s->action, target, ares);
}

static void run_step(struct adm_op *op)
{
	struct adm_step *s = &op->steps[op->cur];

	if (!op->a->ac ||
	    redisAsyncCommandArgv(op->a->ac, on_step_reply, op, s->cmd.argc, s->cmd.argv,
				  s->cmd.argvlen) != REDIS_OK) {
		/* Nothing was sent: nothing to audit. */
		op_finish(op, 503, redis_down());
	}
}

static void start_steps(struct adm_op *op)
{
	op->cur = 0;
	run_step(op);
}

/* ---- reads ------------------------------------------------------------------------ */

static void read_stage(struct adm_op *op);

/* Record fields safe to show (never salt or hmac). */
static json_t *record_json(const redisReply *h, const char *const *skip)
{
	json_t *o = json_object();

	for (size_t i = 0; h && h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
		const redisReply *k = h->element[i], *v = h->element[i + 1];
		int f, hidden = 0;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		for (int j = 0; skip[j]; j++)
			hidden |= strcmp(k->str, skip[j]) == 0;
		if (hidden)
			continue;
		f = gw_gov_field_by_name(k->str);
		if (f >= 0 || strcmp(k->str, "created") == 0 || strcmp(k->str, "expires") == 0 ||
		    strcmp(k->str, "last_used") == 0 || strcmp(k->str, "revoked_at") == 0)
			json_object_set_new(o, k->str, json_integer(strtoll(v->str, NULL, 10)));
		else if (strcmp(k->str, "disabled") == 0 || strcmp(k->str, "revoked") == 0)
			json_object_set_new(o, k->str, json_boolean(strcmp(v->str, "1") == 0));
		else
			json_object_set_new(o, k->str, json_string(v->str));
	}
	return o;
}

static const char *const hide_tenant[] = {"salt", NULL};
static const char *const hide_key[] = {"hmac", NULL};

static int cmp_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Keeps the valid names of an SMEMBERS reply, sorted. */
static int take_names(struct adm_op *op, const redisReply *r, int key_ids)
{
	if (!r || r->type != REDIS_REPLY_ARRAY)
		return -1;
	op->names = cm_calloc(r->elements + 1, sizeof(*op->names));
	if (!op->names)
		return -1;
	for (size_t i = 0; i < r->elements; i++) {
		const redisReply *e = r->element[i];

		if (e->type != REDIS_REPLY_STRING ||
		    !(key_ids ? key_id_ok(e->str) : gw_gov_name_ok(e->str)))
			continue;
		op->names[op->nnames] = cm_strdup(e->str);
		if (!op->names[op->nnames])
			return -1;
		op->nnames++;
	}
	qsort(op->names, op->nnames, sizeof(*op->names), cmp_name);
	return 0;
}

static void usage_row(struct adm_op *op, const redisReply *r, size_t idx);

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
				json_t *o = record_json(r, op->rk == READ_KEYS ? hide_key : hide_tenant);

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
					op->body = record_json(r, hide_tenant);
				}
			} else if (op->stage == 0) {
				if (take_names(op, r, 0) != 0)
					op->failed = 1;
			} else if (r->elements > 0) {
				json_array_append_new(op->arr, record_json(r, hide_tenant));
			}
			break;
		case READ_CLIENT:
			if (r->elements == 0) {
				op->status = 404;
			} else {
				json_decref(op->body);
				op->body = record_json(r, hide_tenant);
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
		op_finish(op, 503, redis_down());
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
			op_finish(op, 200, json_pack("{s:O}", "tenants", op->arr));
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
			op_finish(op, 404, error_body("not_found", NULL, "no tenant \"%s\"",
						      op->tenant));
			return;
		} else {
			json_object_set(op->body, "clients", op->arr);
			op_finish(op, 200, json_incref(op->body));
			return;
		}
		break;
	case READ_CLIENT:
		if (op->stage == 0) {
			snprintf(full, sizeof(full), "%s/%s", op->tenant, op->client);
			if (gw_gov_key(key, op->a->ns, "client", full, NULL) == CM_OK)
				(void)read_send(op, "HGETALL %s", key);
		} else if (op->status == 404) {
			op_finish(op, 404, error_body("not_found", NULL, "no client \"%s/%s\"",
						      op->tenant, op->client));
			return;
		} else {
			op_finish(op, 200, json_incref(op->body));
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
			op_finish(op, 200, json_pack("{s:O}", "keys", op->arr));
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
				op_finish(op, 500, error_body("internal", NULL, "out of memory"));
				return;
			}
			op->nnames = 1;
			op->stage = 1;
		}
		if (op->stage == 1) {
			size_t days = (size_t)((op->to - op->from) / 86400 + 1);

			if (days * op->nnames * (op->with_clients ? 2u : 1u) >
			    GW_ADMIN_USAGE_READS_MAX) {
				op_finish(op, 400, error_body("invalid_value", "from",
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
			op_finish(op, 200, json_pack("{s:s,s:s,s:O}", "from", f, "to", t, "rows",
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
			op_finish(op, 200, json_pack("{s:O}", "records", op->arr));
			return;
		}
		break;
	}
	if (op->failed && op->pending == 0) {
		op_finish(op, 503, redis_down());
		return;
	}
	if (op->pending == 0) {
		/* Nothing to read in this stage (an empty listing). */
		op->stage++;
		read_stage(op);
	}
}

static void start_read(struct adm_op *op, enum read_kind rk)
{
	op->rk = rk;
	op->arr = json_array();
	if (!op->arr) {
		op_finish(op, 500, error_body("internal", NULL, "out of memory"));
		return;
	}
	read_stage(op);
}

/* ---- endpoints ----------------------------------------------------------------------- */

static json_t *name_error(const char *field, const char *what)
{
	return error_body("invalid_name", field,
			  "%s: expected a %s name of 1 to %d characters: lower-case letters, "
			  "digits, '_', '.' or '-', starting with a letter or digit", field,
			  what, GW_GOV_NAME_MAX);
}

/* POST /admin/tenants and POST /admin/tenants/{t}/clients. */
static void ep_create(struct adm_op *op, struct gw_request *req, const char *tenant)
{
	static const char *const extra[] = {"name", NULL};
	struct adm_step *s = &op->steps[0];
	struct gw_gov_quotas q;
	json_t *o, *err = NULL, *name;
	const char *n;
	int is_client = tenant != NULL;
	enum cm_status st;

	o = body_object(req, 0, &err);
	if (!o) {
		op_finish(op, 400, err);
		return;
	}
	err = parse_quotas(o, &q, 0, !is_client, extra);
	name = json_object_get(o, "name");
	n = json_string_value(name);
	if (!err && (!n || !gw_gov_name_ok(n)))
		err = name_error("name", is_client ? "client" : "tenant");
	if (err) {
		json_decref(o);
		op_finish(op, 400, err);
		return;
	}
	if (is_client) {
		snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
		snprintf(op->client, sizeof(op->client), "%s", n);
		snprintf(s->target, sizeof(s->target), "%s/%s", tenant, n);
		st = gw_gov_cmd_client_create(&s->cmd, op->a->ns, tenant, n, &q,
					      cm_wall_ns() / CM_NS_PER_S);
		s->action = GW_AUDIT_CLIENT_CREATE;
		s->what = "client";
		op->body = json_pack("{s:s,s:s}", "tenant", tenant, "client", n);
	} else {
		char salt_hex[CM_SHA256_HEX_LEN + 1];
		uint8_t salt[32];

		snprintf(op->tenant, sizeof(op->tenant), "%s", n);
		snprintf(s->target, sizeof(s->target), "%s", n);
		/* The cache salt comes from the CSPRNG, never from a request. */
		st = cm_random_bytes(salt, sizeof(salt));
		cm_hex_encode(salt, sizeof(salt), salt_hex);
		cm_wipe(salt, sizeof(salt));
		if (st == CM_OK)
			st = gw_gov_cmd_tenant_create(&s->cmd, op->a->ns, n, &q, salt_hex,
						      cm_wall_ns() / CM_NS_PER_S);
		cm_wipe(salt_hex, sizeof(salt_hex));
		s->action = GW_AUDIT_TENANT_CREATE;
		s->what = "tenant";
		op->body = json_pack("{s:s}", "tenant", n);
	}
	json_decref(o);
	if (st != CM_OK) {
		op_finish(op, 500, error_body("internal", NULL, "cannot build the command"));
		return;
	}
	s->kind = STEP_GOV;
	op->status = 201;
	op->nsteps = 1;
	start_steps(op);
}

/* PATCH /admin/tenants/{t} and PATCH /admin/clients/{t}/{c}. */
static void ep_patch(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client)
{
	static const char *const extra[] = {"disabled", NULL};
	struct gw_gov_quotas q;
	json_t *o, *err = NULL, *dis;
	int nq = 0;
	char target[2 * GW_GOV_NAME_MAX + 2];

	o = body_object(req, 0, &err);
	if (!o) {
		op_finish(op, 400, err);
		return;
	}
	err = parse_quotas(o, &q, 1, client == NULL, extra);
	dis = json_object_get(o, "disabled");
	if (!err && dis && !json_is_boolean(dis))
		err = error_body("invalid_value", "disabled", "disabled: expected true or false");
	for (int f = 0; f < GW_GOV_F_COUNT; f++)
		nq += q.set[f] + q.clear[f];
	if (!err && nq == 0 && !dis)
		err = error_body("invalid_value", NULL, "nothing to change: expected quota "
				 "fields%s or disabled", client ? "" : ", weight");
	if (err) {
		json_decref(o);
		op_finish(op, 400, err);
		return;
	}
	snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
	if (client) {
		snprintf(op->client, sizeof(op->client), "%s", client);
		snprintf(target, sizeof(target), "%s/%s", tenant, client);
	} else {
		snprintf(target, sizeof(target), "%s", tenant);
	}
	op->nsteps = 0;
	if (nq > 0) {
		struct adm_step *s = &op->steps[op->nsteps++];

		if (gw_gov_cmd_update(&s->cmd, op->a->ns, tenant, client, &q) != CM_OK)
			op->nsteps = -1;
		s->kind = STEP_GOV;
		s->action = client ? GW_AUDIT_CLIENT_SET : GW_AUDIT_TENANT_SET;
		s->what = client ? "client" : "tenant";
		snprintf(s->target, sizeof(s->target), "%s", target);
	}
	if (dis && op->nsteps >= 0) {
		struct adm_step *s = &op->steps[op->nsteps++];
		int d = json_is_true(dis);

		if (gw_gov_cmd_flag(&s->cmd, op->a->ns, tenant, client, d) != CM_OK)
			op->nsteps = -1;
		s->kind = STEP_GOV;
		s->action = client ? (d ? GW_AUDIT_CLIENT_DISABLE : GW_AUDIT_CLIENT_ENABLE)
				   : (d ? GW_AUDIT_TENANT_DISABLE : GW_AUDIT_TENANT_ENABLE);
		s->what = client ? "client" : "tenant";
		snprintf(s->target, sizeof(s->target), "%s", target);
	}
	json_decref(o);
	if (op->nsteps <= 0) {
		op_finish(op, 500, error_body("internal", NULL, "cannot build the command"));
		return;
	}
	op->body = client ? json_pack("{s:s,s:s,s:b}", "tenant", tenant, "client", client,
				      "updated", 1)
			  : json_pack("{s:s,s:b}", "tenant", tenant, "updated", 1);
	op->status = 200;
	start_steps(op);
}

/* POST /admin/clients/{t}/{c}/keys and POST /admin/keys/{id}/rotate. */
static void ep_issue(struct adm_op *op, struct gw_request *req, const char *tenant,
		     const char *client, const char *old_id)
{
	static const char *const issue_members[] = {"expires_in", NULL};
	static const char *const rotate_members[] = {"expires_in", "overlap", NULL};
	struct adm_step *s = &op->steps[0];
	json_t *o, *err = NULL;

	if (!op->a->pepper) {
		op_finish(op, 503, error_body("unavailable", NULL, "key issue is not configured "
					      "on this gateway (no pepper file)"));
		return;
	}
	o = body_object(req, 1, &err);
	if (!o) {
		op_finish(op, 400, err);
		return;
	}
	op->overlap = ROTATE_OVERLAP_DEFAULT_S;
	err = only_members(o, old_id ? rotate_members : issue_members);
	if (!err)
		err = parse_seconds(o, "expires_in", 1, GW_GOV_DURATION_MAX_S, &op->expires_in);
	if (!err && old_id)
		err = parse_seconds(o, "overlap", 0, GW_GOV_DURATION_MAX_S, &op->overlap);
	json_decref(o);
	if (err) {
		op_finish(op, 400, err);
		return;
	}
	op->nsteps = 1;
	op->status = 201;
	if (old_id) {
		snprintf(op->old_id, sizeof(op->old_id), "%s", old_id);
		snprintf(s->target, sizeof(s->target), "%s", old_id);
		s->action = GW_AUDIT_KEY_ROTATE;
		s->what = "key";
		s->kind = STEP_SHORTEN;
		if (gw_gov_cmd_key_shorten(&s->cmd, op->a->ns, old_id,
					   cm_wall_ns() / CM_NS_PER_S + op->overlap) != CM_OK) {
			op_finish(op, 500, error_body("internal", NULL, "cannot build the command"));
			return;
		}
	} else {
		snprintf(op->tenant, sizeof(op->tenant), "%s", tenant);
		snprintf(op->client, sizeof(op->client), "%s", client);
		snprintf(s->target, sizeof(s->target), "%s/%s", tenant, client);
		s->action = GW_AUDIT_KEY_ISSUE;
		s->what = "client";
		if (build_issue(op, s) != 0) {
			op_finish(op, op->status, json_incref(op->body));
			return;
		}
	}
	start_steps(op);
}

static void ep_revoke(struct adm_op *op, const char *id)
{
	struct adm_step *s = &op->steps[0];

	if (gw_gov_cmd_key_revoke(&s->cmd, op->a->ns, id, cm_wall_ns() / CM_NS_PER_S) != CM_OK) {
		op_finish(op, 500, error_body("internal", NULL, "cannot build the command"));
		return;
	}
	s->kind = STEP_GOV;
	s->action = GW_AUDIT_KEY_REVOKE;
	s->what = "key";
	snprintf(s->target, sizeof(s->target), "%s", id);
	op->body = json_pack("{s:s,s:b,s:b}", "key_id", id, "revoked", 1,
			     "already_revoked", 0);
	op->status = 200;
	op->nsteps = 1;
	start_steps(op);
}

static void ep_drain(struct adm_op *op, const char *name)
{
	enum gw_audit_result res = GW_AUDIT_OK;
	enum cm_status st;
	char target[GW_AUDIT_TARGET_MAX + 1];

	if (!op->a->drain) {
		op_finish(op, 503, error_body("unavailable", NULL,
					      "worker drain is not available on this gateway"));
		return;
	}
	st = op->a->drain(name, op->a->drain_arg);
	snprintf(target, sizeof(target), "worker:%s", name);
	op->nsteps = 1;
	op->steps[0].action = GW_AUDIT_WORKER_DRAIN;
	if (st == CM_OK) {
		op->status = 202;
		op->body = json_pack("{s:s,s:b}", "worker", name, "draining", 1);
	} else if (st == CM_ENOTFOUND) {
		res = GW_AUDIT_NOT_FOUND;
		set_error(op, 404, error_body("not_found", NULL, "no worker \"%s\"", name));
	} else {
		res = GW_AUDIT_ERROR;
		set_error(op, 500, error_body("internal", NULL, "drain failed: %s",
					      cm_status_str(st)));
	}
	audit_step(op, GW_AUDIT_WORKER_DRAIN, target, res);
}

static void ep_usage(struct adm_op *op, const char *query)
{
	char v[GW_GOV_NAME_MAX + 2]; /* a longer value is cut and then refused */
	int64_t today = cm_wall_ns() / CM_NS_PER_S / 86400 * 86400;

	op->from = op->to = -1;
	if (query_get(query, "tenant", v, sizeof(v)) && v[0]) {
		if (!gw_gov_name_ok(v)) {
			op_finish(op, 400, name_error("tenant", "tenant"));
			return;
		}
		memcpy(op->tenant, v, strlen(v) + 1); /* <= GW_GOV_NAME_MAX, checked */
	}
	if (query_get(query, "client", v, sizeof(v)) && v[0]) {
		if (!gw_gov_name_ok(v) || !op->tenant[0]) {
			op_finish(op, 400, op->tenant[0] ? name_error("client", "client") :
				  error_body("invalid_value", "client", "client: needs tenant"));
			return;
		}
		memcpy(op->client, v, strlen(v) + 1);
		op->with_clients = 1;
	}
	if (query_get(query, "from", v, sizeof(v)) && gw_usage_day_parse(v, &op->from) != CM_OK) {
		op_finish(op, 400, error_body("invalid_value", "from",
					      "from: expected a UTC day YYYY-MM-DD"));
		return;
	}
	if (query_get(query, "to", v, sizeof(v)) && gw_usage_day_parse(v, &op->to) != CM_OK) {
		op_finish(op, 400, error_body("invalid_value", "to",
					      "to: expected a UTC day YYYY-MM-DD"));
		return;
	}
	if (op->to < 0)
		op->to = op->from > today ? op->from : today;
	if (op->from < 0)
		op->from = op->to;
	if (op->from > op->to) {
		op_finish(op, 400, error_body("invalid_value", "from", "from is after to"));
		return;
	}
	start_read(op, READ_USAGE);
}

static void ep_audit(struct adm_op *op, const char *query)
{
	char v[GW_AUDIT_ID_MAX + 1];
	long long n = 100;

	snprintf(op->after, sizeof(op->after), "-");
	if (query_get(query, "count", v, sizeof(v))) {
		char *end;

		errno = 0;
		n = strtoll(v, &end, 10);
		if (errno || *end || v[0] < '0' || v[0] > '9' || n < 1 ||
		    n > GW_ADMIN_AUDIT_COUNT_MAX) {
			op_finish(op, 400, error_body("invalid_value", "count",
				  "count: expected 1 to %d", GW_ADMIN_AUDIT_COUNT_MAX));
			return;
		}
	}
	if (query_get(query, "after", v, sizeof(v))) {
		int ok = v[0] != '\0';

		for (size_t i = 0; v[i]; i++)
			ok &= (v[i] >= '0' && v[i] <= '9') || (v[i] == '-' && i > 0);
		if (!ok) {
			op_finish(op, 400, error_body("invalid_value", "after",
				  "after: expected a record id such as 1764532800000-0"));
			return;
		}
		snprintf(op->after, sizeof(op->after), "(%s", v);
	}
	op->count = n;
	start_read(op, READ_AUDIT);
}

static json_t *method_error(const char *allowed)
{
	return error_body("method_not_allowed", NULL, "expected %s", allowed);
}

/* Routes an authenticated request. */
static void dispatch(struct gw_admin *a, struct gw_request *req, const char *actor)
{
	char buf[256], *seg[PATH_SEGS_MAX];
	enum gw_http_method m = gw_request_method(req);
	const struct gw_http_request *hr = gw_request_http(req);
	struct adm_op *op;
	int n;

	op = op_new(a, req, actor);
	if (!op) {
		respond_json(a, req, 500, error_body("internal", NULL, "out of memory"));
		return;
	}
	n = split_path(gw_request_path(req), buf, seg);
	if (n < 1)
		goto not_found;
	if (strcmp(seg[0], "tenants") == 0) {
		if (n >= 2 && !gw_gov_name_ok(seg[1])) {
			op_finish(op, 400, name_error("tenant", "tenant"));
			return;
		}
		if (n == 1 && m == GW_HTTP_GET)
			start_read(op, READ_TENANTS);
		else if (n == 1 && m == GW_HTTP_POST)
			ep_create(op, req, NULL);
		else if (n == 1)
			op_finish(op, 405, method_error("GET or POST"));
		else if (n == 2 && m == GW_HTTP_GET) {
			snprintf(op->tenant, sizeof(op->tenant), "%s", seg[1]);
			start_read(op, READ_TENANT);
		} else if (n == 2 && m == GW_HTTP_PATCH)
			ep_patch(op, req, seg[1], NULL);
		else if (n == 2)
			op_finish(op, 405, method_error("GET or PATCH"));
		else if (n == 3 && strcmp(seg[2], "clients") == 0 && m == GW_HTTP_POST)
			ep_create(op, req, seg[1]);
		else if (n == 3 && strcmp(seg[2], "clients") == 0)
			op_finish(op, 405, method_error("POST"));
		else
			goto not_found;
		return;
	}
	if (strcmp(seg[0], "clients") == 0 && (n == 3 || n == 4)) {
		if (!gw_gov_name_ok(seg[1])) {
			op_finish(op, 400, name_error("tenant", "tenant"));
			return;
		}
		if (!gw_gov_name_ok(seg[2])) {
			op_finish(op, 400, name_error("client", "client"));
			return;
		}
		snprintf(op->tenant, sizeof(op->tenant), "%s", seg[1]);
		snprintf(op->client, sizeof(op->client), "%s", seg[2]);
		if (n == 3 && m == GW_HTTP_GET)
			start_read(op, READ_CLIENT);
		else if (n == 3 && m == GW_HTTP_PATCH)
			ep_patch(op, req, seg[1], seg[2]);
		else if (n == 3)
			op_finish(op, 405, method_error("GET or PATCH"));
		else if (strcmp(seg[3], "keys") != 0)
			goto not_found;
		else if (m == GW_HTTP_GET)
			start_read(op, READ_KEYS);
		else if (m == GW_HTTP_POST)
			ep_issue(op, req, seg[1], seg[2], NULL);
		else
			op_finish(op, 405, method_error("GET or POST"));
		return;
	}
	if (strcmp(seg[0], "keys") == 0 && n == 3) {
		if (!key_id_ok(seg[1])) {
			/* Never echo it: it may be a whole key pasted by mistake. */
			op_finish(op, 400, error_body("invalid_name", "key_id",
				  "key_id: expected %d letters and digits (the part after "
				  "slk_)", GW_KEY_ID_LEN));
			return;
		}
		if (strcmp(seg[2], "revoke") != 0 && strcmp(seg[2], "rotate") != 0)
			goto not_found;
		if (m != GW_HTTP_POST)
			op_finish(op, 405, method_error("POST"));
		else if (strcmp(seg[2], "revoke") == 0)
			ep_revoke(op, seg[1]);
		else
			ep_issue(op, req, NULL, NULL, seg[1]);
		return;
	}
	if (strcmp(seg[0], "usage") == 0 && n == 1) {
		if (m != GW_HTTP_GET)
			op_finish(op, 405, method_error("GET"));
		else
			ep_usage(op, hr->query);
		return;
	}
	if (strcmp(seg[0], "audit") == 0 && n == 1) {
		if (m != GW_HTTP_GET)
			op_finish(op, 405, method_error("GET"));
		else
			ep_audit(op, hr->query);
		return;
	}
	if (strcmp(seg[0], "workers") == 0 && n == 3 && strcmp(seg[2], "drain") == 0) {
		if (!gw_gov_name_ok(seg[1]))
			op_finish(op, 400, name_error("worker", "worker"));
		else if (m != GW_HTTP_POST)
			op_finish(op, 405, method_error("POST"));
		else
			ep_drain(op, seg[1]);
		return;
	}
not_found:
	op_finish(op, 404, error_body("not_found", NULL, "no such admin endpoint"));
}

/* ---- authentication --------------------------------------------------------------- */

static int peer_is_loopback(const char *peer)
{
	return peer && (strncmp(peer, "127.", 4) == 0 || strcmp(peer, "::1") == 0 ||
			strncmp(peer, "::ffff:127.", 11) == 0);
}

/* Index of the credential whose token matches, or -1; constant time in
 * the token and over all credentials. */
static int match_token(const struct gw_admin *a, const char *token, size_t len)
{
	uint8_t d[CM_SHA256_LEN];
	int found = -1;

	cm_sha256(token, len, d);
	for (size_t i = 0; i < a->ncreds; i++) {
		int eq = cm_ct_equal(d, a->creds[i].digest, sizeof(d));

		found = eq && found < 0 ? (int)i : found;
	}
	cm_wipe(d, sizeof(d));
	return found;
}

void gw_admin_handle(struct gw_request *req, void *admin)
{
	struct gw_admin *a = admin;
	const char *auth = gw_request_header(req, "Authorization");
	int who;

	a->stats.requests++;
	if (!peer_is_loopback(gw_request_peer(req))) {
		a->stats.unauthorized++;
		respond_json(a, req, 403, error_body("forbidden", NULL,
			     "the admin API answers loopback peers only"));
		return;
	}
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0 || auth[7] == '\0') {
		a->stats.unauthorized++;
		if (gw_request_add_header(req, "WWW-Authenticate",
					  "Bearer realm=\"sluice-admin\"") != CM_OK) {
			/* the 401 still says what is missing */
		}
		respond_json(a, req, 401, error_body("unauthorized", NULL,
			     "expected Authorization: Bearer <admin token>"));
		return;
	}
	who = match_token(a, auth + 7, strlen(auth + 7));
	if (who < 0) {
		a->stats.unauthorized++;
		respond_json(a, req, 403, error_body("forbidden", NULL,
			     "the admin token is not valid"));
		return;
	}
	dispatch(a, req, a->creds[who].name);
}

void gw_admin_handle_peer(struct gw_request *req, struct gw_admin *a, uint32_t uid)
{
	char actor[GW_AUDIT_ACTOR_MAX + 1];
	int ok = 0;

	a->stats.requests++;
	for (size_t i = 0; i < a->nuids; i++)
		ok |= a->uids[i] == uid;
	if (!ok) {
		a->stats.unauthorized++;
		respond_json(a, req, 403, error_body("forbidden", NULL,
			     "uid %" PRIu32 " is not an allowed admin", uid));
		return;
	}
	snprintf(actor, sizeof(actor), "uid:%" PRIu32, uid);
	dispatch(a, req, actor);
}
