/*
 * admin.c - the admin API service (see admin.h): setup and credentials,
 * authentication, JSON responses and the life of one operation.
 *
 * Mutations are a short list of steps (a governance script each, writes.c),
 * each followed by its audit record; reads are staged Redis reads (reads.c);
 * routes.c maps a path and method to them.
 */
#include "gateway/admin/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"

static enum cm_status load_credentials(struct gw_admin *a, const char *path,
				       char *err, size_t errlen)
{
	struct stat sb;
	char *buf = NULL, *line, *save = NULL;
	enum cm_status st = CM_OK;
	ssize_t n;
	int fd, lineno = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO: refused below */
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
	if (sb.st_size > GW_ADMIN_CRED_FILE_MAX) {
		snprintf(err, errlen, "admin.credentials_file %s: expected at most %d bytes",
			 path, GW_ADMIN_CRED_FILE_MAX);
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
	a->rollout = cfg->rollout;
	a->eval = cfg->eval;
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

void gw_admin_respond_json(struct gw_admin *a, struct gw_request *req, int status,
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

json_t *gw_admin_error_body(const char *type, const char *field, const char *fmt, ...)
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

struct adm_op *gw_admin_op_new(struct gw_admin *a, struct gw_request *req,
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
void gw_admin_op_finish(struct adm_op *op, int status, json_t *body)
{
	if (op->req) {
		gw_request_on_close(op->req, NULL, NULL);
		gw_admin_respond_json(op->a, op->req, status, body);
	} else {
		json_decref(body);
	}
	op->req = NULL;
	op_free(op);
}

json_t *gw_admin_redis_down(void)
{
	return gw_admin_error_body("unavailable", NULL, "Redis is unavailable; retry later");
}

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
		gw_admin_respond_json(a, req, 403, gw_admin_error_body("forbidden", NULL,
			     "the admin API answers loopback peers only"));
		return;
	}
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0 || auth[7] == '\0') {
		a->stats.unauthorized++;
		if (gw_request_add_header(req, "WWW-Authenticate",
					  "Bearer realm=\"sluice-admin\"") != CM_OK) {
			/* the 401 still says what is missing */
		}
		gw_admin_respond_json(a, req, 401, gw_admin_error_body("unauthorized", NULL,
			     "expected Authorization: Bearer <admin token>"));
		return;
	}
	who = match_token(a, auth + 7, strlen(auth + 7));
	if (who < 0) {
		a->stats.unauthorized++;
		gw_admin_respond_json(a, req, 403, gw_admin_error_body("forbidden", NULL,
			     "the admin token is not valid"));
		return;
	}
	gw_admin_route(a, req, a->creds[who].name);
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
		gw_admin_respond_json(a, req, 403, gw_admin_error_body("forbidden", NULL,
			     "uid %" PRIu32 " is not an allowed admin", uid));
		return;
	}
	snprintf(actor, sizeof(actor), "uid:%" PRIu32, uid);
	gw_admin_route(a, req, actor);
}
