/*
 * sluicectl.c - the admin command line: tenants, clients, keys, quotas,
 * usage, worker drain, model changes (eval, promote, rollback) and
 * audit-log verification, through Redis and the gateway's admin socket.
 *
 * The governance commands (tenant, client, key) live in tools/ctl_*.c
 * behind ctl_main(); exit codes are documented in docs/sluicectl.md.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#include "tools/ctl_main.h"
#include "tools/ctl_model.h"
#include "tools/ctl_worker.h"

#ifdef SLUICE_GIT_COMMIT
#define CTL_VERSION SLUICE_VERSION " (" SLUICE_GIT_COMMIT ")"
#else
#define CTL_VERSION SLUICE_VERSION
#endif

static void ctl_usage(FILE *f)
{
	fprintf(f,
		"usage: sluicectl [OPTION | COMMAND ...]\n"
		"\n"
		"Administers a Sluice deployment (see docs/sluicectl.md).\n"
		"\n"
		"  --version   print version and git commit\n"
		"  -h, --help  print this help\n"
		"\n");
	ctl_main_usage(f);
	fputs("\n", f);
	ctl_worker_usage(f);
	ctl_model_usage(f);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sluicectl %s\n", CTL_VERSION);
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		ctl_usage(stdout);
		return 0;
	}
	if (ctl_worker_handles(argc, argv))
		return ctl_worker_main(argc, argv);
	if (ctl_model_handles(argc, argv))
		return ctl_model_main(argc, argv);
	if (ctl_main_handles(argc, argv))
		return ctl_main(argc, argv);
	if (argc >= 2)
		fprintf(stderr, "sluicectl: unknown command \"%s\"\n", argv[1]);
	else
		fprintf(stderr, "sluicectl: expected a command\n");
	ctl_usage(stderr);
	return 1;
}
