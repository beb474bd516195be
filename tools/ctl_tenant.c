/*
 * ctl_tenant.c - `sluicectl tenant ...` and `sluicectl client ...`.
 *
 * Creates and updates are single Lua scripts (existence check + write + index update)
 * so that two admins racing on one name get one success and one conflict.
 * Disabling a tenant or client, and changing quotas, publish on the
 * revocation channel in the same script, so a gateway never sees the new
 * state without the message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "tools/ctl_internal.h"

static const char tenant_create_lua[] =
	"if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end\n"
	"redis.call('HSET', KEYS[1], unpack(ARGV, 2))\n"
	"redis.call('SADD', KEYS[2], ARGV[1])\n"
	"return 1\n";

static const char client_create_lua[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end\n"
	"if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end\n"
	"redis.call('HSET', KEYS[2], unpack(ARGV, 2))\n"
	"redis.call('SADD', KEYS[3], ARGV[1])\n"
	"return 1\n";

/* Sets or clears `disabled` on a tenant or client hash and announces it. */
static const char flag_lua[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end\n"
	"redis.call('HSET', KEYS[1], 'disabled', ARGV[1])\n"
	"redis.call('PUBLISH', ARGV[2], ARGV[3])\n"
	"return 1\n";

/*
 * Updates quota fields of an existing tenant or client hash and announces
 * it.  ARGV[1] channel, ARGV[2] message, ARGV[3] number of field/value
 * pairs n, then n pairs, then the fields to delete.
 */
static const char update_lua[] =
	"if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end\n"
	"local n = tonumber(ARGV[3])\n"
	"for i = 0, n - 1 do\n"
	"  redis.call('HSET', KEYS[1], ARGV[4 + 2 * i], ARGV[5 + 2 * i])\n"
	"end\n"
	"for i = 4 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end\n"
	"redis.call('PUBLISH', ARGV[1], ARGV[2])\n"
	"return 1\n";

#define MAX_PAIRS 16

/* Field/value pairs for HSET, with the numbers kept in `num`. */
struct pairs {
	int n;
	const char *argv[2 * MAX_PAIRS + 1];
	char num[MAX_PAIRS][24];
};

static void pairs_add(struct pairs *p, const char *field, const char *value)
{
	p->argv[p->n++] = field;
	p->argv[p->n++] = value;
}

static void pairs_add_ll(struct pairs *p, const char *field, long long v)
{
	char *s = p->num[p->n / 2];

	snprintf(s, 24, "%lld", v);
	pairs_add(p, field, s);
}

static void pairs_add_quotas(struct pairs *p, const struct ctl_quota_args *q)
{
	for (int f = 0; f < CTL_F_COUNT; f++)
		if (q->set[f])
			pairs_add_ll(p, ctl_fields[f].field, q->val[f]);
}

/* Adds the quota fields of a HGETALL reply to a JSON object (numbers). */
static void json_quotas(json_t *o, const redisReply *h)
{
	for (int f = 0; f < CTL_F_COUNT; f++) {
		const char *v = ctl_hash_get(h, ctl_fields[f].field);

		json_object_set_new(o, ctl_fields[f].field,
				    v ? json_integer(strtoll(v, NULL, 10)) : json_null());
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* SMEMBERS, sorted in place (the reply keeps owning the strings). */
static const char **sorted_members(struct ctl *ctl, const char *key,
				   redisReply **reply, size_t *n)
{
	const char **names;

	*n = 0;
	*reply = ctl_cmd(ctl, "SMEMBERS %s", key);
	if (!*reply || (*reply)->type != REDIS_REPLY_ARRAY)
		return NULL;
	names = cm_calloc((*reply)->elements + 1, sizeof(*names));
	if (!names)
		return NULL;
	for (size_t i = 0; i < (*reply)->elements; i++)
		if ((*reply)->element[i]->type == REDIS_REPLY_STRING)
			names[(*n)++] = (*reply)->element[i]->str;
	qsort(names, *n, sizeof(*names), cmp_str);
	return names;
}

/* ---- tenant create ------------------------------------------------------- */

static int tenant_create(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_quota_args q;
	struct pairs p;
	const char *name = NULL, *keys[2];
	char tkey[CTL_KEYNAME_MAX], index[CTL_KEYNAME_MAX];
	char salt_hex[2 * 32 + 1];
	uint8_t salt[32];
	redisReply *r;
	int rc = CTL_EXIT_USAGE;

	memset(&q, 0, sizeof(q));
	memset(&p, 0, sizeof(p));
	for (int i = 0; i < argc; i++) {
		int got = ctl_quota_opt(argc, argv, &i, &q, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (argv[i][0] == '-' || name) {
			fprintf(stderr, "sluicectl: tenant create: unexpected \"%s\"\n",
				argv[i]);
			return CTL_EXIT_USAGE;
		}
		name = argv[i];
	}
	if (!name) {
		fprintf(stderr, "sluicectl: tenant create: expected a NAME\n");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_name_ok("tenant", name))
		return CTL_EXIT_INVALID;
	if (!q.set[CTL_F_WEIGHT]) {
		q.set[CTL_F_WEIGHT] = 1;
		q.val[CTL_F_WEIGHT] = 1;
	}
	/* The cache salt is made here, from the CSPRNG, and never accepted
	 * from anyone. */
	if (cm_random_bytes(salt, sizeof(salt)) != CM_OK) {
		fprintf(stderr, "sluicectl: the random generator failed\n");
		return CTL_EXIT_REDIS;
	}
	cm_hex_encode(salt, sizeof(salt), salt_hex);
	cm_wipe(salt, sizeof(salt));

	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		goto out;
	ctl_key(ctl, tkey, "tenant", name, NULL);
	ctl_key(ctl, index, "tenants", NULL, NULL);
	p.argv[p.n++] = name;
	pairs_add(&p, "name", name);
	pairs_add(&p, "salt", salt_hex);
	pairs_add_ll(&p, "created", ctl_now_s());
	pairs_add(&p, "disabled", "0");
	pairs_add_quotas(&p, &q);
	keys[0] = tkey;
	keys[1] = index;
	r = ctl_eval(ctl, tenant_create_lua, 2, keys, p.n, p.argv);
	if (!r) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		fprintf(stderr, "sluicectl: tenant \"%s\" already exists\n", name);
		rc = CTL_EXIT_CONFLICT;
	} else if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(name));
		json_object_set_new(o, "created", json_true());
		ctl_print_json(o);
	} else {
		printf("tenant %s created\n", name);
	}
	freeReplyObject(r);
out:
	cm_wipe(salt_hex, sizeof(salt_hex));
	return rc;
}

/* ---- tenant list / show --------------------------------------------------- */

static void quota_cells(const redisReply *h, const char **cells)
{
	for (int f = 0; f < CTL_F_COUNT; f++)
		cells[f] = ctl_hash_get(h, ctl_fields[f].field);
}

static int tenant_list(struct ctl *ctl, int argc, char **argv)
{
	static const char *const head[] = {"NAME", "WEIGHT", "RPM", "TPM", "CONC",
					   "QUEUE", "DAILY", "MAX_PROMPT",
					   "MAX_OUTPUT", "CLIENTS", "DISABLED",
					   "CREATED"};
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
	names = sorted_members(ctl, key, &members, &n);
	if (!names) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	t = ctl->json ? NULL : ctl_table_new(12, head);
	arr = ctl->json ? json_array() : NULL;
	if (!t && !arr) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		char ck[CTL_KEYNAME_MAX], created[32], nclients[24];
		redisReply *h, *sc;
		const char *cells[12];

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
		const char *cr = ctl_hash_get(h, "created");
		ctl_fmt_time(cr ? strtoll(cr, NULL, 10) : 0, created);
		const char *dis = ctl_hash_get(h, "disabled");
		int disabled = dis && strcmp(dis, "1") == 0;
		if (arr) {
			json_t *o = json_object();

			json_object_set_new(o, "name", json_string(names[i]));
			json_quotas(o, h);
			json_object_set_new(o, "clients", json_integer(sc->integer));
			json_object_set_new(o, "disabled", json_boolean(disabled));
			json_object_set_new(o, "created", json_string(created));
			json_array_append_new(arr, o);
		} else {
			cells[0] = names[i];
			quota_cells(h, cells + 1);
			cells[9] = nclients;
			cells[10] = disabled ? "yes" : "no";
			cells[11] = created;
			if (ctl_table_add(t, cells) != 0)
				rc = CTL_EXIT_REDIS;
		}
		freeReplyObject(h);
		freeReplyObject(sc);
		if (rc != CTL_EXIT_OK)
			goto out;
	}
	if (arr) {
		ctl_print_json(arr);
		arr = NULL;
	} else {
		ctl_table_print(t);
	}
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
					   "MAX_OUTPUT", "CREATED"};
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
	names = sorted_members(ctl, key, &members, &n);
	if (!names) {
		rc = CTL_EXIT_REDIS;
		goto out;
	}
	const char *cr = ctl_hash_get(h, "created");
	ctl_fmt_time(cr ? strtoll(cr, NULL, 10) : 0, created);
	const char *dis = ctl_hash_get(h, "disabled");
	if (ctl->json) {
		o = json_object();
		clients = json_array();
		json_object_set_new(o, "name", json_string(argv[0]));
		json_quotas(o, h);
		json_object_set_new(o, "disabled", json_boolean(dis && !strcmp(dis, "1")));
		json_object_set_new(o, "created", json_string(created));
	} else {
		printf("tenant:   %s\n", argv[0]);
		printf("created:  %s\n", created);
		printf("disabled: %s\n", dis && !strcmp(dis, "1") ? "yes" : "no");
		for (int f = 0; f < CTL_F_COUNT; f++) {
			const char *v = ctl_hash_get(h, ctl_fields[f].field);

			printf("%-18s %s\n", ctl_fields[f].field, v ? v : "unlimited");
		}
		printf("cache salt: %s (never shown)\n",
		       ctl_hash_get(h, "salt") ? "set" : "MISSING");
		printf("\n");
		t = ctl_table_new(11, head);
		if (!t) {
			rc = CTL_EXIT_REDIS;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char full[2 * CTL_NAME_MAX + 2], kk[CTL_KEYNAME_MAX], ccreated[32], nkeys[24];
		redisReply *ch, *kc;
		const char *cells[11];

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
		const char *ccr = ctl_hash_get(ch, "created");
		const char *cdis = ctl_hash_get(ch, "disabled");
		int cdisabled = cdis && !strcmp(cdis, "1");

		ctl_fmt_time(ccr ? strtoll(ccr, NULL, 10) : 0, ccreated);
		snprintf(nkeys, sizeof(nkeys), "%lld", kc->integer);
		if (clients) {
			json_t *c = json_object();

			json_object_set_new(c, "name", json_string(names[i]));
			json_object_set_new(c, "disabled", json_boolean(cdisabled));
			json_object_set_new(c, "keys", json_integer(kc->integer));
			json_quotas(c, ch);
			json_object_del(c, "weight");
			json_object_set_new(c, "created", json_string(ccreated));
			json_array_append_new(clients, c);
		} else {
			cells[0] = names[i];
			cells[1] = cdisabled ? "yes" : "no";
			cells[2] = nkeys;
			for (int f = CTL_F_RPM; f < CTL_F_COUNT; f++)
				cells[2 + f] = ctl_hash_get(ch, ctl_fields[f].field);
			cells[10] = ccreated;
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

/* ---- tenant/client set, tenant disable/enable ----------------------------- */

/* Index of a quota field by name ("rpm"), or -1. */
static int field_by_name(const char *name)
{
	for (int f = 0; f < CTL_F_COUNT; f++)
		if (strcmp(ctl_fields[f].field, name) == 0)
			return f;
	return -1;
}

/*
 * `tenant set NAME opts` / `client set T/C opts`: quota options set fields,
 * `--clear FIELD` removes one (no limit).  `is_client` forbids --weight.
 */
static int update_cmd(struct ctl *ctl, int argc, char **argv, int is_client)
{
	const char *kind = is_client ? "client" : "tenant";
	const char *target = NULL, *keys[1], *args[3 + 2 * CTL_F_COUNT + CTL_F_COUNT];
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	char key[CTL_KEYNAME_MAX], chan[CTL_KEYNAME_MAX], msg[CTL_KEYNAME_MAX], npairs[8];
	int clear[CTL_F_COUNT] = {0};
	struct ctl_quota_args q;
	struct pairs p;
	redisReply *r;
	int rc = CTL_EXIT_USAGE, nargs = 0, nset = 0, nclear = 0;

	memset(&q, 0, sizeof(q));
	memset(&p, 0, sizeof(p));
	for (int i = 0; i < argc; i++) {
		int got = ctl_quota_opt(argc, argv, &i, &q, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (strcmp(argv[i], "--clear") == 0) {
			int f = i + 1 < argc ? field_by_name(argv[i + 1]) : -1;

			if (f < 0 || f == CTL_F_WEIGHT) {
				fprintf(stderr,
					"sluicectl: --clear: expected one of rpm, tpm, concurrency, "
					"queue, daily_tokens, max_prompt_tokens, max_output_tokens\n");
				return CTL_EXIT_USAGE;
			}
			clear[f] = 1;
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
	if (is_client && q.set[CTL_F_WEIGHT]) {
		fprintf(stderr, "sluicectl: client set: --weight applies to tenants only\n");
		return CTL_EXIT_USAGE;
	}
	for (int f = 0; f < CTL_F_COUNT; f++) {
		if (q.set[f] && clear[f]) {
			fprintf(stderr, "sluicectl: %s given with --clear %s\n",
				ctl_fields[f].option, ctl_fields[f].field);
			return CTL_EXIT_USAGE;
		}
		nset += q.set[f];
		nclear += clear[f];
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
		snprintf(full, sizeof(full), "%s", target);
	}
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl_key(ctl, key, kind, full, NULL);
	ctl_channel(ctl, chan);
	snprintf(msg, sizeof(msg), "update %s %s", kind, full);
	snprintf(npairs, sizeof(npairs), "%d", nset);
	pairs_add_quotas(&p, &q);
	args[nargs++] = chan;
	args[nargs++] = msg;
	args[nargs++] = npairs;
	for (int i = 0; i < p.n; i++)
		args[nargs++] = p.argv[i];
	for (int f = 0; f < CTL_F_COUNT; f++)
		if (clear[f])
			args[nargs++] = ctl_fields[f].field;
	keys[0] = key;
	r = ctl_eval(ctl, update_lua, 1, keys, nargs, args);
	if (!r)
		return CTL_EXIT_REDIS;
	if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		fprintf(stderr, "sluicectl: no %s \"%s\"\n", kind, full);
		rc = CTL_EXIT_NOTFOUND;
	} else if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, kind, json_string(full));
		json_object_set_new(o, "updated", json_true());
		ctl_print_json(o);
	} else {
		printf("%s %s updated\n", kind, full);
	}
	freeReplyObject(r);
	return rc;
}

static int tenant_flag(struct ctl *ctl, int argc, char **argv, int disable)
{
	char key[CTL_KEYNAME_MAX], chan[CTL_KEYNAME_MAX], msg[CTL_KEYNAME_MAX];
	const char *keys[1], *args[3];
	redisReply *r;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "sluicectl: tenant %s: expected one NAME\n",
			disable ? "disable" : "enable");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_name_ok("tenant", argv[0]))
		return CTL_EXIT_INVALID;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	ctl_key(ctl, key, "tenant", argv[0], NULL);
	ctl_channel(ctl, chan);
	snprintf(msg, sizeof(msg), "%s tenant %s", disable ? "disable" : "enable", argv[0]);
	keys[0] = key;
	args[0] = disable ? "1" : "0";
	args[1] = chan;
	args[2] = msg;
	r = ctl_eval(ctl, flag_lua, 1, keys, 3, args);
	if (!r)
		return CTL_EXIT_REDIS;
	if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		fprintf(stderr, "sluicectl: no tenant \"%s\"\n", argv[0]);
		rc = CTL_EXIT_NOTFOUND;
	} else if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(argv[0]));
		json_object_set_new(o, "disabled", json_boolean(disable));
		ctl_print_json(o);
	} else {
		printf("tenant %s %s\n", argv[0], disable ? "disabled" : "enabled");
	}
	freeReplyObject(r);
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
		return tenant_flag(ctl, argc - 1, argv + 1, 1);
	if (argc >= 1 && strcmp(argv[0], "enable") == 0)
		return tenant_flag(ctl, argc - 1, argv + 1, 0);
	fprintf(stderr,
		"sluicectl: tenant: expected create, list, show, set, disable or enable\n");
	return CTL_EXIT_USAGE;
}

/* ---- client ---------------------------------------------------------------- */

static int client_create(struct ctl *ctl, int argc, char **argv)
{
	struct ctl_quota_args q;
	struct pairs p;
	const char *target = NULL, *keys[3];
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	char tkey[CTL_KEYNAME_MAX], ckey[CTL_KEYNAME_MAX], index[CTL_KEYNAME_MAX];
	redisReply *r;
	int rc = CTL_EXIT_USAGE;

	memset(&q, 0, sizeof(q));
	memset(&p, 0, sizeof(p));
	for (int i = 0; i < argc; i++) {
		int got = ctl_quota_opt(argc, argv, &i, &q, &rc);

		if (got < 0)
			return rc;
		if (got > 0)
			continue;
		if (argv[i][0] == '-' || target) {
			fprintf(stderr, "sluicectl: client create: unexpected \"%s\"\n",
				argv[i]);
			return CTL_EXIT_USAGE;
		}
		target = argv[i];
	}
	if (!target) {
		fprintf(stderr, "sluicectl: client create: expected TENANT/NAME\n");
		return CTL_EXIT_USAGE;
	}
	if (q.set[CTL_F_WEIGHT]) {
		fprintf(stderr, "sluicectl: client create: --weight applies to tenants only\n");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_split_client(target, t, c))
		return CTL_EXIT_INVALID;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	snprintf(full, sizeof(full), "%s/%s", t, c);
	ctl_key(ctl, tkey, "tenant", t, NULL);
	ctl_key(ctl, ckey, "client", full, NULL);
	ctl_key(ctl, index, "tenant", t, "clients");
	p.argv[p.n++] = c;
	pairs_add(&p, "tenant", t);
	pairs_add(&p, "name", c);
	pairs_add(&p, "disabled", "0");
	pairs_add_ll(&p, "created", ctl_now_s());
	pairs_add_quotas(&p, &q);
	keys[0] = tkey;
	keys[1] = ckey;
	keys[2] = index;
	r = ctl_eval(ctl, client_create_lua, 3, keys, p.n, p.argv);
	if (!r)
		return CTL_EXIT_REDIS;
	if (r->type == REDIS_REPLY_INTEGER && r->integer == -1) {
		fprintf(stderr, "sluicectl: no tenant \"%s\"\n", t);
		rc = CTL_EXIT_NOTFOUND;
	} else if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		fprintf(stderr, "sluicectl: client \"%s\" already exists\n", full);
		rc = CTL_EXIT_CONFLICT;
	} else if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(t));
		json_object_set_new(o, "client", json_string(c));
		json_object_set_new(o, "created", json_true());
		ctl_print_json(o);
	} else {
		printf("client %s created\n", full);
	}
	freeReplyObject(r);
	return rc;
}

static int client_flag(struct ctl *ctl, int argc, char **argv, int disable)
{
	char t[CTL_NAME_MAX + 1], c[CTL_NAME_MAX + 1], full[2 * CTL_NAME_MAX + 2];
	char ckey[CTL_KEYNAME_MAX], chan[CTL_KEYNAME_MAX], msg[CTL_KEYNAME_MAX];
	const char *keys[1], *args[3];
	redisReply *r;
	int rc;

	if (argc != 1) {
		fprintf(stderr, "sluicectl: client %s: expected one TENANT/NAME\n",
			disable ? "disable" : "enable");
		return CTL_EXIT_USAGE;
	}
	if (!ctl_split_client(argv[0], t, c))
		return CTL_EXIT_INVALID;
	rc = ctl_connect(ctl);
	if (rc != CTL_EXIT_OK)
		return rc;
	snprintf(full, sizeof(full), "%s/%s", t, c);
	ctl_key(ctl, ckey, "client", full, NULL);
	ctl_channel(ctl, chan);
	snprintf(msg, sizeof(msg), "%s client %s", disable ? "disable" : "enable", full);
	keys[0] = ckey;
	args[0] = disable ? "1" : "0";
	args[1] = chan;
	args[2] = msg;
	r = ctl_eval(ctl, flag_lua, 1, keys, 3, args);
	if (!r)
		return CTL_EXIT_REDIS;
	if (r->type == REDIS_REPLY_INTEGER && r->integer == 0) {
		fprintf(stderr, "sluicectl: no client \"%s\"\n", full);
		rc = CTL_EXIT_NOTFOUND;
	} else if (ctl->json) {
		json_t *o = json_object();

		json_object_set_new(o, "tenant", json_string(t));
		json_object_set_new(o, "client", json_string(c));
		json_object_set_new(o, "disabled", json_boolean(disable));
		ctl_print_json(o);
	} else {
		printf("client %s %s\n", full, disable ? "disabled" : "enabled");
	}
	freeReplyObject(r);
	return rc;
}

int ctl_client_cmd(struct ctl *ctl, int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "create") == 0)
		return client_create(ctl, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "disable") == 0)
		return client_flag(ctl, argc - 1, argv + 1, 1);
	if (argc >= 1 && strcmp(argv[0], "enable") == 0)
		return client_flag(ctl, argc - 1, argv + 1, 0);
	if (argc >= 1 && strcmp(argv[0], "set") == 0)
		return update_cmd(ctl, argc - 1, argv + 1, 1);
	fprintf(stderr, "sluicectl: client: expected create, set, disable or enable\n");
	return CTL_EXIT_USAGE;
}
