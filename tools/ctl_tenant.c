/*
 * ctl_tenant.c - `sluicectl tenant ...` and `sluicectl client ...`.
 *
 * Every write is one of the shared governance scripts of gateway/gov/records.h
 * (the admin API runs the same ones): existence check + write + index
 * update + announcement on the revocation channel in one script, so two
 * admins racing on one name get one success and one conflict, and a
 * gateway never sees a message before the state it announces.  Each
 * write is followed by an audit record (gateway/gov/audit.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "tools/ctl_internal.h"

/* Prints the outcome of a governance write, maps it to an exit code and
 * an audit result. */
static int gov_outcome(enum gw_gov_result res, const char *kind, const char *what,
		       const char *parent_kind, const char *parent,
		       enum gw_audit_result *ar)
{
	switch (res) {
	case GW_GOV_DONE:
	case GW_GOV_ALREADY:
		*ar = GW_AUDIT_OK;
		return CTL_EXIT_OK;
	case GW_GOV_EXISTS:
		fprintf(stderr, "sluicectl: %s \"%s\" already exists\n", kind, what);
		*ar = GW_AUDIT_CONFLICT;
		return CTL_EXIT_CONFLICT;
	case GW_GOV_PARENT_MISSING:
		fprintf(stderr, "sluicectl: no %s \"%s\"\n", parent_kind, parent);
		*ar = GW_AUDIT_NOT_FOUND;
		return CTL_EXIT_NOTFOUND;
	case GW_GOV_NOTFOUND:
	case GW_GOV_REVOKED:
		break;
	}
	fprintf(stderr, "sluicectl: no %s \"%s\"\n", kind, what);
	*ar = GW_AUDIT_NOT_FOUND;
	return CTL_EXIT_NOTFOUND;
}

/* Runs `cmd`, audits it, returns the exit code. */
static int run_gov(struct ctl *ctl, struct gw_redis_cmd *cmd, enum gw_audit_action action,
		   const char *kind, const char *what, const char *parent_kind,
		   const char *parent)
{
	enum gw_audit_result ar = GW_AUDIT_ERROR;
	enum gw_gov_result res;
	redisReply *r;
	int rc, arc;

	r = ctl_gov(ctl, cmd);
	if (!r) {
		/* The write may or may not have happened: record the attempt. */
		(void)ctl_audit(ctl, action, what, GW_AUDIT_ERROR);
		return CTL_EXIT_REDIS;
	}
	if (gw_gov_parse(cmd, r, &res) != CM_OK) {
		fprintf(stderr, "sluicectl: unexpected reply from Redis\n");
		freeReplyObject(r);
		(void)ctl_audit(ctl, action, what, GW_AUDIT_ERROR);
		return CTL_EXIT_REDIS;
	}
	freeReplyObject(r);
	rc = gov_outcome(res, kind, what, parent_kind, parent, &ar);
	arc = ctl_audit(ctl, action, what, ar);
	return rc != CTL_EXIT_OK ? rc : arc;
}

/* ---- tenant create ------------------------------------------------------- */

static int tenant_create(struct ctl *ctl, int argc, char **argv)
{
	struct gw_gov_quotas q;
	struct gw_redis_cmd *cmd = NULL;
	const char *name = NULL;
	char salt_hex[2 * 32 + 1];
	uint8_t salt[32];
	int rc = CTL_EXIT_USAGE;

	memset(salt_hex, 0, sizeof(salt_hex));
	rc = ctl_create_args(argc, argv, "tenant create", "a NAME", &q, &name);
	if (rc != 0)
		return rc;
	if (!ctl_name_ok("tenant", name))
		return CTL_EXIT_INVALID;
	/* The cache salt is made here, from the CSPRNG, and never accepted
	 * from anyone. */
	if (cm_random_bytes(salt, sizeof(salt)) != CM_OK) {
		fprintf(stderr, "sluicectl: the random generator failed\n");
		return CTL_EXIT_REDIS;
	}
	cm_hex_encode(salt, sizeof(salt), salt_hex);
	cm_wipe(salt, sizeof(salt));

	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		goto out;
	if (gw_gov_cmd_tenant_create(cmd, ctl->ns, name, &q, salt_hex,
				     ctl_now_s()) != CM_OK) {
		fprintf(stderr, "sluicectl: tenant create: invalid arguments\n");
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	rc = run_gov(ctl, cmd, GW_AUDIT_TENANT_CREATE, "tenant", name, NULL, NULL);
	if (rc != CTL_EXIT_OK)
		goto out;
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(name));
		json_object_set_new(o, "created", json_true());
		ctl_print_json(o);
	} else {
		printf("tenant %s created\n", name);
	}
out:
	if (cmd)
		cm_wipe(cmd, sizeof(*cmd)); /* holds the salt */
	cm_free(cmd);
	cm_wipe(salt_hex, sizeof(salt_hex));
	return rc;
}

/* ---- tenant list / show --------------------------------------------------- */

static void quota_cells(const redisReply *h, const char **cells)
{
	for (int f = 0; f < GW_GOV_F_COUNT; f++)
		cells[f] = gw_gov_hash_get(h, gw_gov_fields[f].field);
}

static int tenant_list(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"NAME", "WEIGHT", "RPM", "TPM", "CONC",
					   "QUEUE", "DAILY", "MAX_PROMPT",
					   "MAX_OUTPUT", "EMBED_RPM", "EMBED_TPM",
					   "CLIENTS", "DISABLED", "CREATED"};
	char key[CTL_KEYNAME_MAX];
	redisReply *members = NULL;
	const char **names = NULL;
	struct ctl_table *t = NULL;
	json_t *arr = NULL;
	size_t n = 0;
	int rc;

	if (argc != 0) {
		fprintf(stderr, "sluicectl: tenant list takes no arguments\n");
		return CTL_EXIT_USAGE;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl_key(ctl, key, "tenants", NULL, NULL);
	names = ctl_members_sorted(ctl, key, &members, &n);
	if (!names) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	t = ctl->json ? NULL : ctl_table_new(14, head);
	arr = ctl->json ? json_array() : NULL;
	if (!t && !arr) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char ck[CTL_KEYNAME_MAX], created[32], nclients[24];
		redisReply *h, *sc;
		const char *cells[14];

		ctl_key(ctl, key, "tenant", names[i], NULL);
		ctl_key(ctl, ck, "tenant", names[i], "clients");
		h = ctl_cmd(ctl, "HGETALL %s", key);
		sc = ctl_cmd(ctl, "SCARD %s", ck);
		if (!h || !sc) {
			if (h)
				freeReplyObject(h);
			if (sc)
				freeReplyObject(sc);
			rc = CTL_EXIT_REDIS;
			goto out;
		}
		snprintf(nclients, sizeof(nclients), "%lld", sc->integer);
		const char *cr = gw_gov_hash_get(h, "created");
		ctl_fmt_time(cr ? strtoll(cr, NULL, 10) : 0, created);
		const char *dis = gw_gov_hash_get(h, "disabled");
		int disabled = dis && strcmp(dis, "1") == 0;
		if (arr) {
			json_t *o = json_object();

			json_object_set_new(o, "name", json_string(names[i]));
			gw_gov_quotas_json(o, h);
			json_object_set_new(o, "clients", json_integer(sc->integer));
			json_object_set_new(o, "disabled", json_boolean(disabled));
			json_object_set_new(o, "created", json_string(created));
			json_array_append_new(arr, o);
		} else {
			cells[0] = names[i];
			quota_cells(h, cells + 1);
			cells[1 + GW_GOV_F_COUNT] = nclients;
			cells[2 + GW_GOV_F_COUNT] = disabled ? "yes" : "no";
			cells[3 + GW_GOV_F_COUNT] = created;
			if (ctl_table_add(t, cells) != 0)
				rc = CTL_EXIT_REDIS;
		}
		freeReplyObject(h);
		freeReplyObject(sc);
		if (rc != CTL_EXIT_OK)
			goto out;
	}
	ctl_emit(&arr, t);
out:
	json_decref(arr);
	ctl_table_free(t);
	cm_free(names);
	if (members)
		freeReplyObject(members);
	return rc;
}

static int tenant_show(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"CLIENT", "DISABLED", "KEYS", "RPM", "TPM",
					   "CONC", "QUEUE", "DAILY", "MAX_PROMPT",
					   "MAX_OUTPUT", "EMBED_RPM", "EMBED_TPM", "CREATED"};
	char key[CTL_KEYNAME_MAX], created[32];
	redisReply *h = NULL, *members = NULL;
	const char **names = NULL;
	struct ctl_table *t = NULL;
	json_t *o = NULL, *clients = NULL;
	size_t n = 0;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "sluicectl: tenant show: expected one NAME\n");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_name_ok("tenant", argv[0]))
		return CTL_EXIT_INVALID;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl_key(ctl, key, "tenant", argv[0], NULL);
	h = ctl_cmd(ctl, "HGETALL %s", key);
	if (!h) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (h->elements == 0) {
		fprintf(stderr, "sluicectl: no tenant \"%s\"\n", argv[0]);
		rc = CTL_EXIT_NOTFOUND;
		goto out;
	}
	ctl_key(ctl, key, "tenant", argv[0], "clients");
	names = ctl_members_sorted(ctl, key, &members, &n);
	if (!names) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	const char *cr = gw_gov_hash_get(h, "created");
	ctl_fmt_time(cr ? strtoll(cr, NULL, 10) : 0, created);
	const char *dis = gw_gov_hash_get(h, "disabled");
	if (ctl->json) {
		o = json_object();
		clients = json_array();
		json_object_set_new(o, "name", json_string(argv[0]));
		gw_gov_quotas_json(o, h);
		json_object_set_new(o, "disabled", json_boolean(dis && !strcmp(dis, "1")));
		json_object_set_new(o, "created", json_string(created));
	} else {
		printf("tenant:   %s\n", argv[0]);
		printf("created:  %s\n", created);
		printf("disabled: %s\n", dis && !strcmp(dis, "1") ? "yes" : "no");
		for (int f = 0; f < GW_GOV_F_COUNT; f++) {
			const char *v = gw_gov_hash_get(h, gw_gov_fields[f].field);

			printf("%-18s %s\n", gw_gov_fields[f].field, v ? v : "unlimited");
		}
		printf("cache salt: %s (never shown)\n",
		       gw_gov_hash_get(h, "salt") ? "set" : "MISSING");
		printf("\n");
		t = ctl_table_new(13, head);
		if (!t) {
			rc = CTL_EXIT_REDIS;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char full[2 * CTL_NAME_MAX + 2], kk[CTL_KEYNAME_MAX], ccreated[32], nkeys[24];
		redisReply *ch, *kc;
		const char *cells[13];

		snprintf(full, sizeof(full), "%s/%s", argv[0], names[i]);
		ctl_key(ctl, key, "client", full, NULL);
		ctl_key(ctl, kk, "client", full, "keys");
		ch = ctl_cmd(ctl, "HGETALL %s", key);
		kc = ctl_cmd(ctl, "SCARD %s", kk);
		if (!ch || !kc) {
			if (ch)
				freeReplyObject(ch);
			if (kc)
				freeReplyObject(kc);
			rc = CTL_EXIT_REDIS;
			goto out;
		}
		const char *ccr = gw_gov_hash_get(ch, "created");
		const char *cdis = gw_gov_hash_get(ch, "disabled");
		int cdisabled = cdis && !strcmp(cdis, "1");

		ctl_fmt_time(ccr ? strtoll(ccr, NULL, 10) : 0, ccreated);
		snprintf(nkeys, sizeof(nkeys), "%lld", kc->integer);
		if (clients) {
			json_t *c = json_object();

			json_object_set_new(c, "name", json_string(names[i]));
			json_object_set_new(c, "disabled", json_boolean(cdisabled));
			json_object_set_new(c, "keys", json_integer(kc->integer));
			gw_gov_quotas_json(c, ch);
			json_object_del(c, "weight");
			json_object_set_new(c, "created", json_string(ccreated));
			json_array_append_new(clients, c);
		} else {
			cells[0] = names[i];
			cells[1] = cdisabled ? "yes" : "no";
			cells[2] = nkeys;
			for (int f = GW_GOV_F_RPM; f < GW_GOV_F_COUNT; f++)
				cells[2 + f] = gw_gov_hash_get(ch, gw_gov_fields[f].field);
			cells[2 + GW_GOV_F_COUNT] = ccreated;
			if (ctl_table_add(t, cells) != 0)
				rc = CTL_EXIT_REDIS;
		}
		freeReplyObject(ch);
		freeReplyObject(kc);
		if (rc != CTL_EXIT_OK)
			goto out;
	}
	if (o) {
		json_object_set_new(o, "clients", clients);
		clients = NULL;
		ctl_print_json(o);
		o = NULL;
	} else {
		ctl_table_print(t);
	}
out:
	json_decref(clients);
	json_decref(o);
	ctl_table_free(t);
	cm_free(names);
	if (members)
		freeReplyObject(members);
	if (h)
		freeReplyObject(h);
	return rc;
}

/*
 * `tenant set NAME opts` / `client set T/C opts`: quota options set fields,
 * `--clear FIELD` removes one (no limit).  `is_client` forbids --weight.
 */
static int update_cmd(struct ctl *ctl, int argc, char **argv, int is_client)
{
	const char *kind = is_client ? "client" : "tenant";
	const char *target = NULL;
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	struct gw_gov_quotas q;
	struct gw_redis_cmd *cmd = NULL;
	int rc = CTL_EXIT_USAGE, nset = 0, nclear = 0;

	memset(&q, 0, sizeof(q));
	for (int i = 0; i < argc; i++) {
		int got = ctl_quota_opt(argc, argv, &i, &q, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (strcmp(argv[i], "--clear") == 0) {
			int f = i + 1 < argc ? gw_gov_field_by_name(argv[i + 1]) : -1;

			if (f < 0 || f == GW_GOV_F_WEIGHT) {
				fprintf(stderr,
					"sluicectl: --clear: expected one of rpm, tpm, concurrency, "
					"queue, daily_tokens, max_prompt_tokens, max_output_tokens, "
					"embed_rpm, embed_tpm\n");
				return CTL_EXIT_USAGE;
			}
			q.clear[f] = 1;
			i++;
			continue;
		}
		if (argv[i][0] == '-' || target) {
			fprintf(stderr, "sluicectl: %s set: unexpected \"%s\"\n", kind, argv[i]);
			return CTL_EXIT_USAGE;
		}
		target = argv[i];
	}
	if (!target) {
		fprintf(stderr, "sluicectl: %s set: expected %s\n", kind,
			is_client ? "TENANT/NAME" : "NAME");
		return CTL_EXIT_USAGE;
	}
	if (is_client && q.set[GW_GOV_F_WEIGHT]) {
		fprintf(stderr, "sluicectl: client set: --weight applies to tenants only\n");
		return CTL_EXIT_USAGE;
	}
	for (int f = 0; f < GW_GOV_F_COUNT; f++) {
		if (q.set[f] && q.clear[f]) {
			fprintf(stderr, "sluicectl: %s given with --clear %s\n",
				gw_gov_fields[f].option, gw_gov_fields[f].field);
			return CTL_EXIT_USAGE;
		}
		nset += q.set[f];
		nclear += q.clear[f];
	}
	if (nset + nclear == 0) {
		fprintf(stderr, "sluicectl: %s set: nothing to change\n", kind);
		return CTL_EXIT_USAGE;
	}
	if (is_client) {
		if (!ctl_split_client(target, t, c))
			return CTL_EXIT_INVALID;
		snprintf(full, sizeof(full), "%s/%s", t, c);
	} else {
		if (!ctl_name_ok("tenant", target))
			return CTL_EXIT_INVALID;
		snprintf(t, sizeof(t), "%s", target);
		snprintf(full, sizeof(full), "%s", target);
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd || gw_gov_cmd_update(cmd, ctl->ns, t, is_client ? c : NULL, &q) != CM_OK) {
		fprintf(stderr, "sluicectl: %s set: cannot build the update\n", kind);
		cm_free(cmd);
		return CTL_EXIT_INVALID;
	}
	rc = run_gov(ctl, cmd, is_client ? GW_AUDIT_CLIENT_SET : GW_AUDIT_TENANT_SET,
		     kind, full, NULL, NULL);
	cm_free(cmd);
	if (rc != CTL_EXIT_OK)
		return rc;
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, kind, json_string(full));
		json_object_set_new(o, "updated", json_true());
		ctl_print_json(o);
	} else {
		printf("%s %s updated\n", kind, full);
	}
	return rc;
}

/* `tenant disable|enable NAME`, `client disable|enable T/C`. */
static int flag_cmd(struct ctl *ctl, int argc, char **argv, int is_client,
		    int disable)
{
	const char *kind = is_client ? "client" : "tenant";
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	struct gw_redis_cmd *cmd;
	enum gw_audit_action action;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "sluicectl: %s %s: expected one %s\n", kind,
			disable ? "disable" : "enable", is_client ? "TENANT/NAME" : "NAME");
		return CTL_EXIT_USAGE;
	}
	if (is_client) {
		if (!ctl_split_client(argv[0], t, c))
			return CTL_EXIT_INVALID;
		snprintf(full, sizeof(full), "%s/%s", t, c);
		action = disable ? GW_AUDIT_CLIENT_DISABLE : GW_AUDIT_CLIENT_ENABLE;
	} else {
		if (!ctl_name_ok("tenant", argv[0]))
			return CTL_EXIT_INVALID;
		snprintf(t, sizeof(t), "%s", argv[0]);
		snprintf(full, sizeof(full), "%s", argv[0]);
		action = disable ? GW_AUDIT_TENANT_DISABLE : GW_AUDIT_TENANT_ENABLE;
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd || gw_gov_cmd_flag(cmd, ctl->ns, t, is_client ? c : NULL, disable) != CM_OK) {
		fprintf(stderr, "sluicectl: %s: cannot build the command\n", kind);
		cm_free(cmd);
		return CTL_EXIT_INVALID;
	}
	rc = run_gov(ctl, cmd, action, kind, full, NULL, NULL);
	cm_free(cmd);
	if (rc != CTL_EXIT_OK)
		return rc;
	if (ctl->json) {
		json_t *o = json_object();

		if (is_client) {
			json_object_set_new(o, "tenant", json_string(t));
			json_object_set_new(o, "client", json_string(c));
		} else {
			json_object_set_new(o, "tenant", json_string(t));
		}
		json_object_set_new(o, "disabled", json_boolean(disable));
		ctl_print_json(o);
	} else {
		printf("%s %s %s\n", kind, full, disable ? "disabled" : "enabled");
	}
	return rc;
}

int ctl_tenant_cmd(struct ctl *ctl, int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "create") == 0)
		return tenant_create(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "list") == 0)
		return tenant_list(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "show") == 0)
		return tenant_show(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "set") == 0)
		return update_cmd(ctl, argc - 1, argv + 1, 0);
	if (argc >= 1 && strcmp(argv[0], "disable") == 0)
		return flag_cmd(ctl, argc - 1, argv + 1, 0, 1);
	if (argc >= 1 && strcmp(argv[0], "enable") == 0)
		return flag_cmd(ctl, argc - 1, argv + 1, 0, 0);
	fprintf(stderr,
		"sluicectl: tenant: expected create, list, show, set, disable or enable\n");
	return CTL_EXIT_USAGE;
}

/* ---- client ---------------------------------------------------------------- */

static int client_create(struct ctl *ctl, int argc, char **argv)
{
	struct gw_gov_quotas q;
	struct gw_redis_cmd *cmd;
	const char *target = NULL;
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	int rc = CTL_EXIT_USAGE;

	rc = ctl_create_args(argc, argv, "client create", "TENANT/NAME", &q, &target);
	if (rc != 0)
		return rc;
	if (q.set[GW_GOV_F_WEIGHT]) {
		fprintf(stderr, "sluicectl: client create: --weight applies to tenants only\n");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_split_client(target, t, c))
		return CTL_EXIT_INVALID;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	snprintf(full, sizeof(full), "%s/%s", t, c);
	cmd = cm_malloc(sizeof(*cmd));
	if (!cmd || gw_gov_cmd_client_create(cmd, ctl->ns, t, c, &q, ctl_now_s()) != CM_OK) {
		fprintf(stderr, "sluicectl: client create: cannot build the command\n");
		cm_free(cmd);
		return CTL_EXIT_INVALID;
	}
	rc = run_gov(ctl, cmd, GW_AUDIT_CLIENT_CREATE, "client", full, "tenant", t);
	cm_free(cmd);
	if (rc != CTL_EXIT_OK)
		return rc;
	if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(t));
		json_object_set_new(o, "client", json_string(c));
		json_object_set_new(o, "created", json_true());
		ctl_print_json(o);
	} else {
		printf("client %s created\n", full);
	}
	return rc;
}

int ctl_client_cmd(struct ctl *ctl, int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "create") == 0)
		return client_create(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "disable") == 0)
		return flag_cmd(ctl, argc - 1, argv + 1, 1, 1);
	if (argc >= 1 && strcmp(argv[0], "enable") == 0)
		return flag_cmd(ctl, argc - 1, argv + 1, 1, 0);
	if (argc >= 1 && strcmp(argv[0], "set") == 0)
		return update_cmd(ctl, argc - 1, argv + 1, 1);
	fprintf(stderr, "sluicectl: client: expected create, set, disable or enable\n");
	return CTL_EXIT_USAGE;
}
