/*
 * ctl_main.c - sluicectl's governance commands: global options and dispatch.
 *
 * Global options may appear anywhere on the line; everything else is
 * handed to the command group in order.  Environment defaults:
 * SLUICE_REDIS, SLUICE_REDIS_PASSWORD_FILE, SLUICE_REDIS_USER,
 * SLUICE_PEPPER_FILE, SLUICE_NAMESPACE.  The audit actor is
 * --actor or the OS user running sluicectl.
 */
#include "tools/ctl_main.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/alloc.h"
#include "tools/ctl_internal.h"

void ctl_main_usage(FILE *out)
{
	fputs("usage: sluicectl [--redis URL] [--redis-password-file PATH] [--redis-user NAME]\n"
	      "                 [--pepper-file PATH] [--namespace NS] [--json] COMMAND ...\n"
	      "\n"
	      "  tenant create NAME [--weight W] [--rpm N] [--tpm N] [--concurrency N]\n"
	      "                     [--queue N] [--daily-tokens N]\n"
	      "                     [--max-prompt-tokens N] [--max-output-tokens N]\n"
	      "                     [--embed-rpm N] [--embed-tpm N]\n"
	      "  tenant list\n"
	      "  tenant show NAME\n"
	      "  tenant set NAME [quota options] [--clear FIELD]...\n"
	      "  tenant disable NAME, tenant enable NAME\n"
	      "  client create TENANT/NAME [quota options as for tenant create]\n"
	      "  client disable TENANT/NAME\n"
	      "  client enable TENANT/NAME\n"
	      "  client set TENANT/NAME [quota options] [--clear FIELD]...\n"
	      "  key issue TENANT/CLIENT [--expires-in 90d]   (prints the key once)\n"
	      "  key list [TENANT[/CLIENT]]\n"
	      "  key rotate KEYID [--overlap 24h] [--expires-in 90d] (prints the new key once)\n"
	      "  key revoke KEYID\n"
	      "  usage [TENANT[/CLIENT]] [--from DAY] [--to DAY] [--format table|csv|json]\n"
	      "                     DAY = YYYY-MM-DD (UTC); default: today\n"
	      "  audit list [--count N] [--after ID]\n"
	      "  audit verify       (exit 6 when the chain is broken)\n"
	      "\n"
	      "  --redis URL        unix:///path/to/redis.sock or redis://host[:port]\n"
	      "                     (default $SLUICE_REDIS or redis://127.0.0.1:6379)\n"
	      "  --redis-password-file PATH\n"
	      "                     AUTH with this file's content, mode 0600\n"
	      "                     (default $SLUICE_REDIS_PASSWORD_FILE; none: no AUTH)\n"
	      "  --redis-user NAME  Redis ACL user for AUTH (default $SLUICE_REDIS_USER)\n"
	      "  --pepper-file PATH the gateway's pepper, for key issue\n"
	      "                     (default $SLUICE_PEPPER_FILE)\n"
	      "  --namespace NS     Redis key prefix (default $SLUICE_NAMESPACE or sluice:)\n"
	      "  --json             machine-readable output\n"
	      "  --actor NAME       who is acting, for the audit log\n"
	      "                     (default: the OS user running sluicectl)\n"
	      "\n"
	      "exit codes: 0 ok, 1 usage, 2 not found, 3 conflict, 4 Redis unavailable,\n"
	      "            5 invalid value, 6 audit chain broken\n",
	      out);
}

/* The global options that take a value (ctl_main_handles skips it). */
static int value_option(const char *a)
{
	static const char *const opts[] = { "--redis", "--redis-password-file", "--redis-user",
					    "--pepper-file", "--namespace", "--actor" };

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (strcmp(a, opts[i]) == 0)
			return 1;
	return 0;
}

int ctl_main_handles(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "tenant") == 0 || strcmp(argv[i], "client") == 0 ||
		    strcmp(argv[i], "key") == 0 || strcmp(argv[i], "audit") == 0 ||
		    strcmp(argv[i], "usage") == 0)
			return 1;
		/* Skip the value of a global option. */
		if (value_option(argv[i]))
			i++;
		else if (strncmp(argv[i], "--", 2) != 0)
			return 0;
	}
	return 0;
}

static int ns_ok(const char *ns)
{
	return gw_gov_ns_ok(ns);
}

/* The OS user running sluicectl, or "uid:<n>" when its name does not fit
 * the audit actor charset. */
static void default_actor(char out[GW_AUDIT_ACTOR_MAX + 1])
{
	uid_t uid = geteuid();
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res &&
	    gw_audit_actor_ok(res->pw_name)) {
		snprintf(out, GW_AUDIT_ACTOR_MAX + 1, "%s", res->pw_name);
		return;
	}
	snprintf(out, GW_AUDIT_ACTOR_MAX + 1, "uid:%lu", (unsigned long)uid);
}

int ctl_main(int argc, char **argv)
{
	struct ctl ctl;
	char actor[GW_AUDIT_ACTOR_MAX + 1];
	char **rest;
	int nrest = 0, rc = CTL_EXIT_USAGE;

	memset(&ctl, 0, sizeof(ctl));
	ctl.redis_url = getenv("SLUICE_REDIS");
	ctl.pepper_file = getenv("SLUICE_PEPPER_FILE");
	ctl.redis_password_file = getenv("SLUICE_REDIS_PASSWORD_FILE");
	ctl.redis_user = getenv("SLUICE_REDIS_USER");
	ctl.ns = getenv("SLUICE_NAMESPACE");
	if (!ctl.redis_url || !*ctl.redis_url)
		ctl.redis_url = "redis://127.0.0.1:6379";
	if (!ctl.ns || !*ctl.ns)
		ctl.ns = "sluice:";

	rest = cm_calloc((size_t)argc + 1, sizeof(*rest));
	if (!rest) {
		fprintf(stderr, "sluicectl: out of memory\n");
		return CTL_EXIT_REDIS;
	}
	for (int i = 1; i < argc; i++) {
		const char **slot = NULL;

		if (strcmp(argv[i], "--json") == 0) {
			ctl.json = 1;
			continue;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			ctl_main_usage(stdout);
			rc = CTL_EXIT_OK;
			goto out;
		}
		if (strcmp(argv[i], "--redis") == 0)
			slot = &ctl.redis_url;
		else if (strcmp(argv[i], "--pepper-file") == 0)
			slot = &ctl.pepper_file;
		else if (strcmp(argv[i], "--redis-password-file") == 0)
			slot = &ctl.redis_password_file;
		else if (strcmp(argv[i], "--redis-user") == 0)
			slot = &ctl.redis_user;
		else if (strcmp(argv[i], "--namespace") == 0)
			slot = &ctl.ns;
		else if (strcmp(argv[i], "--actor") == 0)
			slot = &ctl.actor;
		if (slot) {
			if (i + 1 >= argc) {
				fprintf(stderr, "sluicectl: %s expects a value\n", argv[i]);
				goto out;
			}
			*slot = argv[++i];
			continue;
		}
		rest[nrest++] = argv[i];
	}
	if (!ns_ok(ctl.ns)) {
		fprintf(stderr,
			"sluicectl: --namespace: expected 1 to %d characters of "
			"[a-z0-9_.:-], found \"%s\"\n", CTL_NS_MAX, ctl.ns);
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	if (ctl.actor && !gw_audit_actor_ok(ctl.actor)) {
		fprintf(stderr,
			"sluicectl: --actor: expected 1 to %d characters of "
			"[A-Za-z0-9_.@:-] starting with a letter or digit\n",
			GW_AUDIT_ACTOR_MAX);
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	if (!ctl.actor) {
		default_actor(actor);
		ctl.actor = actor;
	}
	if (nrest == 0) {
		ctl_main_usage(stderr);
		goto out;
	}
	if (strcmp(rest[0], "tenant") == 0)
		rc = ctl_tenant_cmd(&ctl, nrest - 1, rest + 1);
	else if (strcmp(rest[0], "client") == 0)
		rc = ctl_client_cmd(&ctl, nrest - 1, rest + 1);
	else if (strcmp(rest[0], "key") == 0)
		rc = ctl_key_cmd(&ctl, nrest - 1, rest + 1);
	else if (strcmp(rest[0], "audit") == 0)
		rc = ctl_audit_cmd(&ctl, nrest - 1, rest + 1);
	else if (strcmp(rest[0], "usage") == 0)
		rc = ctl_usage_cmd(&ctl, nrest - 1, rest + 1);
	else
		fprintf(stderr,
			"sluicectl: unknown command \"%s\": expected tenant, client, "
			"key, usage or audit (sluicectl --help)\n", rest[0]);
out:
	ctl_disconnect(&ctl);
	cm_free(rest);
	return rc;
}
