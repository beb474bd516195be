/*
 * sluicectl.c - the admin command line: tenants, clients, keys, quotas,
 * usage, worker drain and audit-log verification, through Redis and the
 * gateway's admin socket.
 *
 * At this stage it only reports its version; the issues that follow add
 * their subcommands here and keep --help true.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

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
		"Administers a Sluice deployment.  No commands exist yet.\n"
		"\n"
		"  --version   print version and git commit\n"
		"  -h, --help  print this help\n");
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
	if (argc >= 2)
		fprintf(stderr, "sluicectl: unknown command \"%s\"\n", argv[1]);
	else
		fprintf(stderr, "sluicectl: expected a command\n");
	ctl_usage(stderr);
	return 2;
}
