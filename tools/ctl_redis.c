/*
 * ctl_redis.c - sluicectl's Redis connection, key names, validation of
 * names and quota values, and output helpers (tables, JSON, times).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/secret.h"
#include "gateway/redis/conn.h"
#include "gateway/gov/reader.h"
#include "gateway/redis/keys.h"
#include "tools/ctl_internal.h"

/* ---- connection ---------------------------------------------------------- */

/* AUTH with --redis-password-file (and --redis-user) when given. */
static int ctl_auth(struct ctl *ctl)
{
	uint8_t pass[GW_REDIS_PASSWORD_MAX];
	const char *user = ctl->redis_user && *ctl->redis_user ? ctl->redis_user : NULL;
	char err[512];
	size_t len = 0;
	redisReply *r;
	int rc = CTL_EXIT_OK;

	if (!ctl->redis_password_file || !*ctl->redis_password_file) {
		if (!user)
			return CTL_EXIT_OK;
		fprintf(stderr, "sluicectl: --redis-user: expected with --redis-password-file, "
			"found without\n");
		rc = CTL_EXIT_USAGE;
		goto out;
	}
	if (cm_secret_read(ctl->redis_password_file, "--redis-password-file", pass, sizeof(pass),
			   &len, err, sizeof(err)) != CM_OK || len == 0) {
		fprintf(stderr, "sluicectl: %s\n", len == 0 && !err[0] ?
			"--redis-password-file: expected a password, found an empty file" : err);
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	r = user ? redisCommand(ctl->rc, "AUTH %s %b", user, pass, len)
		 : redisCommand(ctl->rc, "AUTH %b", pass, len);
	if (!r || r->type == REDIS_REPLY_ERROR) {
		/* Redis's words; the password is never echoed */
		fprintf(stderr, "sluicectl: Redis refused AUTH: %s\n",
			r ? r->str : ctl->rc->errstr);
		rc = CTL_EXIT_REDIS;
	}
	if (r)
		freeReplyObject(r);
out:
	cm_wipe(pass, sizeof(pass));
	if (rc != CTL_EXIT_OK)
		ctl_disconnect(ctl);
	return rc;
}

int ctl_connect(struct ctl *ctl)
{
	struct timeval tv = {2, 0};
	const char *url = ctl->redis_url;
	char host[256];
	long port = 6379;

	if (ctl->rc)
		return CTL_EXIT_OK;
	if (strncmp(url, "unix://", 7) == 0) {
		const char *path = url + 7;

		if (*path != '/') {
			fprintf(stderr,
				"sluicectl: --redis: expected unix:///absolute/path, found \"%s\"\n",
				url);
			return CTL_EXIT_USAGE;
		}
		ctl->rc = redisConnectUnixWithTimeout(path, tv);
	} else if (strncmp(url, "redis://", 8) == 0) {
		const char *h = url + 8, *colon = strrchr(h, ':');
		size_t hlen = colon ? (size_t)(colon - h) : strlen(h);

		if (hlen == 0 || hlen >= sizeof(host) || strchr(h, '/') ||
		    strchr(h, '@')) {
			fprintf(stderr,
				"sluicectl: --redis: expected redis://host[:port], found \"%s\"\n",
				url);
			return CTL_EXIT_USAGE;
		}
		memcpy(host, h, hlen);
		host[hlen] = '\0';
		if (colon) {
			long long p;

			if (ctl_parse_ll(colon + 1, 1, 65535, &p) != 0) {
				fprintf(stderr,
					"sluicectl: --redis: expected a port from 1 to 65535, found \"%s\"\n",
					colon + 1);
				return CTL_EXIT_USAGE;
			}
			port = (long)p;
		}
		ctl->rc = redisConnectWithTimeout(host, (int)port, tv);
	} else {
		fprintf(stderr,
			"sluicectl: --redis: expected unix:///path or redis://host[:port], found \"%s\"\n",
			url);
		return CTL_EXIT_USAGE;
	}
	if (!ctl->rc || ctl->rc->err) {
		fprintf(stderr, "sluicectl: cannot connect to Redis at %s: %s\n", url,
			ctl->rc ? ctl->rc->errstr : "out of memory");
		ctl_disconnect(ctl);
		return CTL_EXIT_REDIS;
	}
	tv.tv_sec = 5;
	if (redisSetTimeout(ctl->rc, tv) != REDIS_OK) {
		fprintf(stderr, "sluicectl: cannot set the Redis timeout\n");
		ctl_disconnect(ctl);
		return CTL_EXIT_REDIS;
	}
	return ctl_auth(ctl);
}

void ctl_disconnect(struct ctl *ctl)
{
	if (ctl->rc)
		redisFree(ctl->rc);
	ctl->rc = NULL;
}

static redisReply *check_reply(struct ctl *ctl, redisReply *r)
{
	if (!r) {
		fprintf(stderr, "sluicectl: Redis connection failed: %s\n",
			ctl->rc->errstr[0] ? ctl->rc->errstr : "no reply");
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		fprintf(stderr, "sluicectl: Redis error: %s\n", r->str);
		freeReplyObject(r);
		return NULL;
	}
	return r;
}

redisReply *ctl_cmd_argv(struct ctl *ctl, int argc, const char **argv)
{
	return check_reply(ctl, redisCommandArgv(ctl->rc, argc, argv, NULL));
}

redisReply *ctl_cmd(struct ctl *ctl, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(ctl->rc, fmt, ap);
	va_end(ap);
	return check_reply(ctl, r);
}

redisReply *ctl_gov(struct ctl *ctl, struct gw_redis_cmd *cmd)
{
	return check_reply(ctl, gw_gov_send_sync(ctl->rc, cmd));
}

int ctl_audit(struct ctl *ctl, enum gw_audit_action action, const char *target,
	      enum gw_audit_result result)
{
	enum cm_status st;

	st = gw_audit_append_sync(ctl->rc, ctl->ns, ctl->actor, action, target,
				  result, NULL);
	if (st != CM_OK) {
		fprintf(stderr,
			"sluicectl: %s %s was %s but its audit record could not be "
			"written (%s)\n", gw_audit_action_name(action), target,
			result == GW_AUDIT_OK ? "done" : "attempted", cm_status_str(st));
		return CTL_EXIT_REDIS;
	}
	return CTL_EXIT_OK;
}

redisReply *ctl_eval(struct ctl *ctl, const char *script, int nkeys,
		     const char **keys, int nargs, const char **args)
{
	const char *argv[64];
	char nk[16];
	int argc = 0;

	if (3 + nkeys + nargs > (int)(sizeof(argv) / sizeof(argv[0]))) {
		fprintf(stderr, "sluicectl: internal error: too many script arguments\n");
		return NULL;
	}
	snprintf(nk, sizeof(nk), "%d", nkeys);
	argv[argc++] = "EVAL";
	argv[argc++] = script;
	argv[argc++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[argc++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[argc++] = args[i];
	return ctl_cmd_argv(ctl, argc, argv);
}

/* ---- names --------------------------------------------------------------- */

void ctl_key(const struct ctl *ctl, char out[CTL_KEYNAME_MAX], const char *what,
	     const char *name, const char *suffix)
{
	/* a name too long for the buffer is cut; Redis then finds nothing */
	if (gw_redis_key(out, CTL_KEYNAME_MAX, ctl->ns, what, name, suffix) != CM_OK)
		out[CTL_KEYNAME_MAX - 1] = '\0';
}

void ctl_channel(const struct ctl *ctl, char out[CTL_KEYNAME_MAX])
{
	ctl_key(ctl, out, GW_REDIS_CHANNEL, NULL, NULL);
}

int ctl_name_ok(const char *what, const char *s)
{
	size_t n = strlen(s);
	int ok = n >= 1 && n <= CTL_NAME_MAX;

	for (size_t i = 0; ok && i < n; i++) {
		char c = s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		ok = alnum || (i > 0 && (c == '_' || c == '.' || c == '-'));
	}
	if (!ok) {
		/* Do not echo control characters back to the terminal. */
		int printable = 1;

		for (size_t i = 0; i < n; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				printable = 0;
		fprintf(stderr,
			"sluicectl: invalid %s name %s%s%s: expected 1 to %d characters, "
			"lower-case letters, digits, '_', '.' or '-', starting with a "
			"letter or digit\n",
			what, printable ? "\"" : "", printable ? s : "(with control characters)",
			printable ? "\"" : "", CTL_NAME_MAX);
	}
	return ok;
}

int ctl_split_client(const char *arg, char t[CTL_NAME_MAX + 1],
		     char c[CTL_NAME_MAX + 1])
{
	const char *slash = strchr(arg, '/');
	size_t tl;

	if (!slash) {
		fprintf(stderr,
			"sluicectl: expected TENANT/CLIENT, found \"%s\" (no '/')\n", arg);
		return 0;
	}
	tl = (size_t)(slash - arg);
	if (tl > CTL_NAME_MAX || strlen(slash + 1) > CTL_NAME_MAX) {
		fprintf(stderr, "sluicectl: expected TENANT/CLIENT with names of at most %d characters\n",
			CTL_NAME_MAX);
		return 0;
	}
	memcpy(t, arg, tl);
	t[tl] = '\0';
	strcpy(c, slash + 1);
	return ctl_name_ok("tenant", t) && ctl_name_ok("client", c);
}

/* ---- numbers ------------------------------------------------------------- */

int ctl_parse_ll(const char *s, long long min, long long max, long long *out)
{
	long long v;
	char *end;

	if (!s || !*s || !(*s >= '0' && *s <= '9'))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int ctl_quota_opt(int argc, char **argv, int *i, struct gw_gov_quotas *q,
		  int *exit_code)
{
	const char *opt = argv[*i];

	for (int f = 0; f < GW_GOV_F_COUNT; f++) {
		const struct gw_gov_field_def *d = &gw_gov_fields[f];

		if (strcmp(opt, d->option) != 0)
			continue;
		if (*i + 1 >= argc) {
			fprintf(stderr, "sluicectl: %s expects a value\n", opt);
			*exit_code = CTL_EXIT_USAGE;
			return -1;
		}
		(*i)++;
		if (ctl_parse_ll(argv[*i], d->min, d->max, &q->val[f]) != 0) {
			fprintf(stderr,
				"sluicectl: %s: expected an integer from %lld to %lld, "
				"found \"%s\"\n", opt, d->min, d->max, argv[*i]);
			*exit_code = CTL_EXIT_INVALID;
			return -1;
		}
		q->set[f] = 1;
		return 1;
	}
	return 0;
}

/* ---- time ---------------------------------------------------------------- */

long long ctl_now_s(void)
{
	return (long long)(cm_wall_ns() / CM_NS_PER_S);
}

void ctl_fmt_time(long long unix_s, char out[32])
{
	time_t t = (time_t)unix_s;
	struct tm tm;

	if (unix_s <= 0 || !gmtime_r(&t, &tm)) {
		strcpy(out, "-");
		return;
	}
	strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- replies and output --------------------------------------------------- */

const char **ctl_members_sorted(struct ctl *ctl, const char *key, redisReply **reply,
				size_t *n)
{
	*n = 0;
	*reply = ctl_cmd(ctl, "SMEMBERS %s", key);
	return gw_gov_sorted_members(*reply, NULL, n);
}
void ctl_print_json(json_t *v)
{
	char *s;

	if (!v)
		return;
	s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s) {
		puts(s);
		free(s);
	}
	json_decref(v);
}

#define CTL_TABLE_COLS 16

struct ctl_table {
	int ncols;
	const char *const *headings;
	size_t nrows, cap;
	char **cells; /* nrows * ncols, row-major */
};

struct ctl_table *ctl_table_new(int ncols, const char *const *headings)
{
	struct ctl_table *t;

	if (ncols < 1 || ncols > CTL_TABLE_COLS)
		return NULL;
	t = cm_calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->headings = headings;
	return t;
}

int ctl_table_add(struct ctl_table *t, const char *const *cells)
{
	if (t->nrows == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 16;
		char **n = cm_reallocarray(t->cells, cap * (size_t)t->ncols, sizeof(*n));

		if (!n)
			return -1;
		t->cells = n;
		t->cap = cap;
	}
	for (int c = 0; c < t->ncols; c++) {
		char *s = cm_strdup(cells[c] ? cells[c] : "-");

		if (!s) {
			for (int k = 0; k < c; k++)
				cm_free(t->cells[t->nrows * (size_t)t->ncols + (size_t)k]);
			return -1;
		}
		t->cells[t->nrows * (size_t)t->ncols + (size_t)c] = s;
	}
	t->nrows++;
	return 0;
}

void ctl_table_print(struct ctl_table *t)
{
	size_t w[CTL_TABLE_COLS];

	for (int c = 0; c < t->ncols; c++) {
		w[c] = strlen(t->headings[c]);
		for (size_t r = 0; r < t->nrows; r++) {
			size_t n = strlen(t->cells[r * (size_t)t->ncols + (size_t)c]);

			if (n > w[c])
				w[c] = n;
		}
	}
	for (int c = 0; c < t->ncols; c++)
		printf("%-*s%s", c + 1 < t->ncols ? (int)w[c] : 0, t->headings[c],
		       c + 1 < t->ncols ? "  " : "\n");
	for (size_t r = 0; r < t->nrows; r++)
		for (int c = 0; c < t->ncols; c++)
			printf("%-*s%s", c + 1 < t->ncols ? (int)w[c] : 0,
			       t->cells[r * (size_t)t->ncols + (size_t)c],
			       c + 1 < t->ncols ? "  " : "\n");
}

void ctl_table_free(struct ctl_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		cm_free(t->cells[i]);
	cm_free(t->cells);
	cm_free(t);
}

void ctl_emit(json_t **arr, struct ctl_table *t)
{
	if (*arr) {
		ctl_print_json(*arr);
		*arr = NULL;
	} else {
		ctl_table_print(t);
	}
}

int ctl_target_exists(struct ctl *ctl, const char *t, const char *c)
{
	char key[CTL_KEYNAME_MAX], full[2 * CTL_NAME_MAX + 2];
	redisReply *r;
	int rc = CTL_EXIT_OK;

	if (c[0]) {
		snprintf(full, sizeof(full), "%s/%s", t, c);
		ctl_key(ctl, key, "client", full, NULL);
	} else {
		ctl_key(ctl, key, "tenant", t, NULL);
	}
	r = ctl_cmd(ctl, "EXISTS %s", key);
	if (!r)
		return CTL_EXIT_REDIS;
	if (r->integer == 0) {
		fprintf(stderr, "sluicectl: no %s \"%s%s%s\"\n", c[0] ? "client" : "tenant",
			t, c[0] ? "/" : "", c);
		rc = CTL_EXIT_NOTFOUND;
	}
	freeReplyObject(r);
	return rc;
}

int ctl_create_args(int argc, char **argv, const char *cmd, const char *expected,
		    struct gw_gov_quotas *q, const char **pos)
{
	int rc = CTL_EXIT_USAGE;

	*pos = NULL;
	memset(q, 0, sizeof(*q));
	for (int i = 0; i < argc; i++) {
		int got = ctl_quota_opt(argc, argv, &i, q, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (argv[i][0] == '-' || *pos) {
			fprintf(stderr, "sluicectl: %s: unexpected \"%s\"\n", cmd, argv[i]);
			return CTL_EXIT_USAGE;
		}
		*pos = argv[i];
	}
	if (!*pos) {
		fprintf(stderr, "sluicectl: %s: expected %s\n", cmd, expected);
		return CTL_EXIT_USAGE;
	}
	return 0;
}
