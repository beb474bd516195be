/*
 * ctl_key.c - `sluicectl key issue|list|rotate|revoke`.
 *
 * `key issue` (and `key rotate`) is the only place a key's secret exists outside the client:
 * it is generated here, printed once, and wiped; Redis receives the key id
 * and HMAC-SHA256(pepper, id || secret) only.  `key revoke` sets the flag
 * and publishes on the revocation channel in one script.  The scripts are
 * those of gateway/gov/records.h (shared with the admin API); every write is
 * followed by an audit record.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "gateway/gov/apikey.h"
#include "tools/ctl_internal.h"

#define EXPIRES_MAX_S (3650LL * 86400)

/* "90d", "12h", "30m", "45s" -> seconds in [1, 3650 days]. */
static int parse_duration(const char *s, long long *out)
{
	size_t n = strlen(s);
	long long mult, v;
	char num[24];

	if (n < 2 || n > sizeof(num))
		return -1;
	switch (s[n - 1]) {
	case 's': mult = 1; break;
	case 'm': mult = 60; break;
	case 'h': mult = 3600; break;
	case 'd': mult = 86400; break;
	default: return -1;
	}
	memcpy(num, s, n - 1);
	num[n - 1] = '\0';
	if (ctl_parse_ll(num, 1, EXPIRES_MAX_S, &v) != 0 || v > EXPIRES_MAX_S / mult)
		return -1;
	*out = v * mult;
	return 0;
}

/* What a rotation adds to the output of `key issue`. */
struct rotation {
	const char *old_id;
	long long old_expires; /* Unix s */
};

static enum cm_status load_pepper(struct ctl *ctl, const char *cmd,
				  struct gw_key_pepper **pepper, int *rc)
{
	char err[512];

	if (!ctl->pepper_file) {
		fprintf(stderr,
			"sluicectl: %s needs the gateway's pepper: --pepper-file PATH "
			"or SLUICE_PEPPER_FILE\n", cmd);
		*rc = CTL_EXIT_USAGE;
		return CM_EINVAL;
	}
	if (gw_key_pepper_load(ctl->pepper_file, pepper, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluicectl: %s\n", err);
		*rc = CTL_EXIT_INVALID;
		return CM_EINVAL;
	}
	return CM_OK;
}

/*
 * Generates a key for client t/c, stores its record and prints it once.
 * Connected `ctl` and validated names; returns an exit code.
 */
static int issue_and_print(struct ctl *ctl, const struct gw_key_pepper *pepper,
			   const char *t, const char *c, long long expires_in,
			   const struct rotation *rot)
{
	struct gw_redis_cmd *cmd = NULL;
	char full[2 * CTL_NAME_MAX + 2], audit_target[2 * GW_KEY_ID_LEN + 2 * CTL_NAME_MAX + 8];
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1];
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	char expires_txt[32], old_txt[32];
	uint8_t mac[GW_KEY_HMAC_LEN];
	long long now;
	redisReply *r = NULL;
	int rc = CTL_EXIT_OK, audit_rc = CTL_EXIT_OK, done = 0;

	memset(key, 0, sizeof(key));
	memset(mac, 0, sizeof(mac));
	snprintf(full, sizeof(full), "%s/%s", t, c);
	now = ctl_now_s();
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	/* A key id collision (71 random bits) is retried with a new key. */
	for (int attempt = 0; attempt < 3 && !done; attempt++) {
		enum gw_gov_result res;

		if (gw_key_generate(pepper, key, id, mac) != CM_OK) {
			fprintf(stderr, "sluicectl: the random generator failed\n");
			rc = CTL_EXIT_REDIS;
			goto out;
		}
		cm_hex_encode(mac, sizeof(mac), hmac_hex);
		if (gw_gov_cmd_key_issue(cmd, ctl->ns, t, c, id, hmac_hex, now,
					 expires_in ? now + expires_in : 0) != CM_OK) {
			fprintf(stderr, "sluicectl: key issue: cannot build the command\n");
			rc = CTL_EXIT_INVALID;
			goto out;
		}
		r = ctl_gov(ctl, cmd);
		if (!r || gw_gov_parse(cmd, r, &res) != CM_OK) {
			if (r)
				fprintf(stderr, "sluicectl: unexpected reply from Redis\n");
			(void)ctl_audit(ctl, GW_AUDIT_KEY_ISSUE, full, GW_AUDIT_ERROR);
			rc = CTL_EXIT_REDIS;
			goto out;
		}
		if (res == GW_GOV_PARENT_MISSING) {
			fprintf(stderr, "sluicectl: no client \"%s\"\n", full);
			(void)ctl_audit(ctl, rot ? GW_AUDIT_KEY_ROTATE : GW_AUDIT_KEY_ISSUE,
				       full, GW_AUDIT_NOT_FOUND);
			rc = CTL_EXIT_NOTFOUND;
			goto out;
		}
		done = res == GW_GOV_DONE;
		freeReplyObject(r);
		r = NULL;
	}
	if (!done) {
		fprintf(stderr, "sluicectl: could not allocate a unique key id\n");
		rc = CTL_EXIT_CONFLICT;
		goto out;
	}
	/* Audit before printing: a key that cannot be recorded is still
	 * printed (it exists), but the exit code says the record is missing. */
	if (rot)
		snprintf(audit_target, sizeof(audit_target), "%s>%s", rot->old_id, id);
	else
		snprintf(audit_target, sizeof(audit_target), "%s/%s", full, id);
	audit_rc = ctl_audit(ctl, rot ? GW_AUDIT_KEY_ROTATE : GW_AUDIT_KEY_ISSUE,
			     audit_target, GW_AUDIT_OK);
	ctl_fmt_time(expires_in ? now + expires_in : 0, expires_txt);
	if (rot)
		ctl_fmt_time(rot->old_expires, old_txt);
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "key_id", json_string(id));
		json_object_set_new(o, "key", json_string(key));
		json_object_set_new(o, "tenant", json_string(t));
		json_object_set_new(o, "client", json_string(c));
		json_object_set_new(o, "expires", expires_in ? json_string(expires_txt)
							  : json_null());
		if (rot) {
			json_object_set_new(o, "replaces", json_string(rot->old_id));
			json_object_set_new(o, "replaced_expires", json_string(old_txt));
		}
		ctl_print_json(o); /* jansson's copy is freed, not wiped */
	} else {
		printf("key id:  %s\n", id);
		printf("key:     %s\n", key);
		printf("client:  %s\n", full);
		printf("expires: %s\n", expires_in ? expires_txt : "never");
		if (rot)
			printf("replaces %s, which stops working at %s\n", rot->old_id,
			       old_txt);
		printf("This is the only time the key is shown: store it now.\n");
	}
	fflush(stdout);
	rc = audit_rc;
out:
	if (r)
		freeReplyObject(r);
	cm_free(cmd);
	cm_wipe(key, sizeof(key));
	cm_wipe(mac, sizeof(mac));
	return rc;
}

/* Parses "--NAME DURATION" at argv[*i]; 1 taken, 0 not this option, -1 bad. */
static int duration_opt(int argc, char **argv, int *i, const char *name,
			long long *out, int *rc)
{
	if (strcmp(argv[*i], name) != 0)
		return 0;
	if (*i + 1 >= argc) {
		fprintf(stderr, "sluicectl: %s expects a value\n", name);
		*rc = CTL_EXIT_USAGE;
		return -1;
	}
	(*i)++;
	if (parse_duration(argv[*i], out) != 0) {
		fprintf(stderr,
			"sluicectl: %s: expected a number and a unit s, m, h or d "
			"(at most 3650d), found \"%s\"\n", name, argv[*i]);
		*rc = CTL_EXIT_INVALID;
		return -1;
	}
	return 1;
}

static int key_issue(struct ctl *ctl, int argc, char **argv)
{
	const char *target = NULL;
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1];
	struct gw_key_pepper *pepper = NULL;
	long long expires_in = 0;
	int rc = CTL_EXIT_USAGE;

	for (int i = 0; i < argc; i++) {
		int got = duration_opt(argc, argv, &i, "--expires-in", &expires_in, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (argv[i][0] == '-' || target) {
			fprintf(stderr, "sluicectl: key issue: unexpected \"%s\"\n", argv[i]);
			return CTL_EXIT_USAGE;
		}
		target = argv[i];
	}
	if (!target) {
		fprintf(stderr, "sluicectl: key issue: expected TENANT/CLIENT\n");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_split_client(target, t, c))
		return CTL_EXIT_INVALID;
	if (load_pepper(ctl, "key issue", &pepper, &rc) != CM_OK)
		return rc;
	rc = ctl_connect(ctl);
	if (rc == CTL_EXIT_OK)
		rc = issue_and_print(ctl, pepper, t, c, expires_in, NULL);
	gw_key_pepper_free(pepper);
	return rc;
}

static int key_rotate(struct ctl *ctl, int argc, char **argv)
{
	const char *old = NULL;
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1];
	struct gw_redis_cmd *cmd = NULL;
	struct gw_gov_shortened sh;
	struct gw_key_pepper *pepper = NULL;
	long long overlap = 86400, expires_in = 0;
	struct rotation rot;
	redisReply *r = NULL;
	int rc = CTL_EXIT_USAGE;

	for (int i = 0; i < argc; i++) {
		int got = duration_opt(argc, argv, &i, "--overlap", &overlap, &rc);

		if (got == 0)
			got = duration_opt(argc, argv, &i, "--expires-in", &expires_in, &rc);
		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (argv[i][0] == '-' || old) {
			fprintf(stderr, "sluicectl: key rotate: unexpected \"%s\"\n", argv[i]);
			return CTL_EXIT_USAGE;
		}
		old = argv[i];
	}
	if (!old) {
		fprintf(stderr, "sluicectl: key rotate: expected a KEYID\n");
		return CTL_EXIT_USAGE;
	}
	if (gw_key_id_check(old, strlen(old)) != CM_OK) {
		fprintf(stderr,
			"sluicectl: key rotate: expected a key id of %d letters and digits "
			"(the part after slk_), found %zu characters\n",
			GW_KEY_ID_LEN, strlen(old));
		return CTL_EXIT_INVALID;
	}
	if (load_pepper(ctl, "key rotate", &pepper, &rc) != CM_OK)
		return rc;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		goto out;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd || gw_gov_cmd_key_shorten(cmd, ctl->ns, old, ctl_now_s() + overlap) != CM_OK) {
		fprintf(stderr, "sluicectl: key rotate: cannot build the command\n");
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	r = ctl_gov(ctl, cmd);
	if (!r || gw_gov_parse_shorten(r, &sh) != CM_OK) {
		if (r)
			fprintf(stderr, "sluicectl: unexpected reply from Redis\n");
		(void)ctl_audit(ctl, GW_AUDIT_KEY_ROTATE, old, GW_AUDIT_ERROR);
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (sh.result == GW_GOV_NOTFOUND) {
		fprintf(stderr, "sluicectl: no key \"%s\"\n", old);
		(void)ctl_audit(ctl, GW_AUDIT_KEY_ROTATE, old, GW_AUDIT_NOT_FOUND);
		rc = CTL_EXIT_NOTFOUND;
		goto out;
	}
	if (sh.result == GW_GOV_REVOKED) {
		fprintf(stderr,
			"sluicectl: key %s is revoked: issue a new key with "
			"`key issue %s/%s` instead\n", old, sh.tenant, sh.client);
		(void)ctl_audit(ctl, GW_AUDIT_KEY_ROTATE, old, GW_AUDIT_CONFLICT);
		rc = CTL_EXIT_CONFLICT;
		goto out;
	}
	snprintf(t, sizeof(t), "%s", sh.tenant);
	snprintf(c, sizeof(c), "%s", sh.client);
	rot.old_id = old;
	rot.old_expires = sh.expires_s;
	rc = issue_and_print(ctl, pepper, t, c, expires_in, &rot);
out:
	if (r)
		freeReplyObject(r);
	cm_free(cmd);
	gw_key_pepper_free(pepper);
	return rc;
}

/* ---- key list ------------------------------------------------------------ */

struct key_lister {
	struct ctl *ctl;
	struct ctl_table *table;
	json_t *arr;
	long long now;
};

/* Lists the keys of one client (names already validated). */
static int list_client(struct key_lister *l, const char *t, const char *c)
{
	char full[2 * CTL_NAME_MAX + 2], set[CTL_KEYNAME_MAX], kkey[CTL_KEYNAME_MAX];
	redisReply *ids = NULL;
	const char **v;
	size_t n;
	int rc = CTL_EXIT_OK;

	snprintf(full, sizeof(full), "%s/%s", t, c);
	ctl_key(l->ctl, set, "client", full, "keys");
	v = ctl_members_sorted(l->ctl, set, &ids, &n);
	if (!v) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	for (size_t i = 0; i < n && rc == CTL_EXIT_OK; i++) {
		char created[32], expires[32], last[32];
		const char *status, *cells[6];
		long long exp;
		redisReply *h;

		ctl_key(l->ctl, kkey, "key", v[i], NULL);
		h = ctl_cmd(l->ctl, "HGETALL %s", kkey);
		if (!h) {
			rc = CTL_EXIT_REDIS;
			break;
		}
		exp = gw_gov_hash_ll(h, "expires", 0);
		if (h->elements == 0)
			status = "missing";
		else if (gw_gov_hash_ll(h, "revoked", 0) == 1)
			status = "revoked";
		else if (exp > 0 && exp <= l->now)
			status = "expired";
		else
			status = "active";
		ctl_fmt_time(gw_gov_hash_ll(h, "created", 0), created);
		ctl_fmt_time(exp, expires);
		ctl_fmt_time(gw_gov_hash_ll(h, "last_used", 0), last);
		if (l->arr) {
			json_t *o = json_object();

			json_object_set_new(o, "key_id", json_string(v[i]));
			json_object_set_new(o, "tenant", json_string(t));
			json_object_set_new(o, "client", json_string(c));
			json_object_set_new(o, "status", json_string(status));
			json_object_set_new(o, "created", json_string(created));
			json_object_set_new(o, "expires", exp ? json_string(expires) : json_null());
			json_object_set_new(o, "last_used", json_string(last));
			json_array_append_new(l->arr, o);
		} else {
			cells[0] = v[i];
			cells[1] = full;
			cells[2] = status;
			cells[3] = created;
			cells[4] = exp ? expires : "never";
			cells[5] = last;
			if (ctl_table_add(l->table, cells) != 0)
				rc = CTL_EXIT_REDIS;
		}
		freeReplyObject(h);
	}
out:
	cm_free(v);
	if (ids)
		freeReplyObject(ids);
	return rc;
}

static int list_tenant(struct key_lister *l, const char *t)
{
	char set[CTL_KEYNAME_MAX];
	redisReply *names = NULL;
	const char **v;
	size_t n;
	int rc = CTL_EXIT_OK;

	ctl_key(l->ctl, set, "tenant", t, "clients");
	v = ctl_members_sorted(l->ctl, set, &names, &n);
	if (!v)
		rc = CTL_EXIT_REDIS;
	for (size_t i = 0; v && i < n && rc == CTL_EXIT_OK; i++)
		rc = list_client(l, t, v[i]);
	cm_free(v);
	if (names)
		freeReplyObject(names);
	return rc;
}

static int key_list(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"KEY_ID", "CLIENT", "STATUS", "CREATED",
					   "EXPIRES", "LAST_USED"};
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], key[CTL_KEYNAME_MAX];
	struct key_lister l;
	redisReply *r = NULL;
	const char **v = NULL;
	size_t n;
	int rc;

	memset(&l, 0, sizeof(l));
	if (argc > 1 || (argc == 1 && argv[0][0] == '-')) {
		fprintf(stderr, "sluicectl: key list: expected [TENANT[/CLIENT]]\n");
		return CTL_EXIT_USAGE;
	}
	if (argc == 1) {
		if (strchr(argv[0], '/')) {
			if (!ctl_split_client(argv[0], t, c))
				return CTL_EXIT_INVALID;
		} else {
			if (!ctl_name_ok("tenant", argv[0]))
				return CTL_EXIT_INVALID;
			snprintf(t, sizeof(t), "%s", argv[0]);
			c[0] = '\0';
		}
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	l.ctl = ctl;
	l.now = ctl_now_s();
	if (ctl->json)
		l.arr = json_array();
	else
		l.table = ctl_table_new(6, head);
	if (!l.arr && !l.table) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (argc == 1) {
		/* Name the missing tenant or client rather than print nothing. */
		rc = ctl_target_exists(ctl, t, c);
		if (rc != CTL_EXIT_OK)
			goto out;
		rc = c[0] ? list_client(&l, t, c) : list_tenant(&l, t);
	} else {
		ctl_key(ctl, key, "tenants", NULL, NULL);
		v = ctl_members_sorted(ctl, key, &r, &n);
		if (!v) {
			rc = CTL_EXIT_REDIS;
			goto out;
		}
		for (size_t i = 0; i < n && rc == CTL_EXIT_OK; i++)
			rc = list_tenant(&l, v[i]);
	}
	if (rc != CTL_EXIT_OK)
		goto out;
	if (l.arr) {
		ctl_print_json(l.arr);
		l.arr = NULL;
	} else {
		ctl_table_print(l.table);
	}
out:
	cm_free(v);
	if (r)
		freeReplyObject(r);
	json_decref(l.arr);
	ctl_table_free(l.table);
	return rc;
}

/* ---- key revoke ------------------------------------------------------------ */

static int key_revoke(struct ctl *ctl, int argc, char **argv)
{
	struct gw_redis_cmd *cmd;
	enum gw_gov_result res;
	enum gw_audit_result ar;
	redisReply *r;
	int rc, arc;

	if (argc != 1) {
		fprintf(stderr, "sluicectl: key revoke: expected one KEYID\n");
		return CTL_EXIT_USAGE;
	}
	if (gw_key_id_check(argv[0], strlen(argv[0])) != CM_OK) {
		/* A whole key pasted by mistake must not be echoed back. */
		fprintf(stderr,
			"sluicectl: key revoke: expected a key id of %d letters and digits "
			"(the part after slk_), found %zu characters\n",
			GW_KEY_ID_LEN, strlen(argv[0]));
		return CTL_EXIT_INVALID;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd || gw_gov_cmd_key_revoke(cmd, ctl->ns, argv[0], ctl_now_s()) != CM_OK) {
		fprintf(stderr, "sluicectl: key revoke: cannot build the command\n");
		cm_free(cmd);
		return CTL_EXIT_INVALID;
	}
	r = ctl_gov(ctl, cmd);
	if (!r || gw_gov_parse(cmd, r, &res) != CM_OK) {
		if (r) {
			fprintf(stderr, "sluicectl: unexpected reply from Redis\n");
			freeReplyObject(r);
		}
		cm_free(cmd);
		(void)ctl_audit(ctl, GW_AUDIT_KEY_REVOKE, argv[0], GW_AUDIT_ERROR);
		return CTL_EXIT_REDIS;
	}
	freeReplyObject(r);
	cm_free(cmd);
	ar = res == GW_GOV_NOTFOUND ? GW_AUDIT_NOT_FOUND : GW_AUDIT_OK;
	arc = ctl_audit(ctl, GW_AUDIT_KEY_REVOKE, argv[0], ar);
	if (res == GW_GOV_NOTFOUND) {
		fprintf(stderr, "sluicectl: no key \"%s\"\n", argv[0]);
		return CTL_EXIT_NOTFOUND;
	}
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "key_id", json_string(argv[0]));
		json_object_set_new(o, "revoked", json_true());
		json_object_set_new(o, "already_revoked", json_boolean(res == GW_GOV_ALREADY));
		ctl_print_json(o);
	} else {
		printf("key %s revoked%s\n", argv[0],
		       res == GW_GOV_ALREADY ? " (it already was; revocation re-announced)" : "");
	}
	return arc;
}

int ctl_key_cmd(struct ctl *ctl, int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "issue") == 0)
		return key_issue(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "list") == 0)
		return key_list(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "revoke") == 0)
		return key_revoke(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "rotate") == 0)
		return key_rotate(ctl, argc - 1, argv + 1);
	fprintf(stderr, "sluicectl: key: expected issue, list, rotate or revoke\n");
	return CTL_EXIT_USAGE;
}
