/*
 * main.c - sluice-gateway: the HTTPS edge (TLS, API keys, quotas, queues,
 * fair dispatch to the workers).
 *
 * At this stage it only reports its version; the issues that follow add
 * the listener and their options here and keep --help true.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#ifdef SLUICE_GIT_COMMIT
#define GW_VERSION SLUICE_VERSION " (" SLUICE_GIT_COMMIT ")"
#else
#define GW_VERSION SLUICE_VERSION
#endif

static void gw_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-gateway [OPTION]\n"
		"\n"
		"The Sluice gateway: serves the Ollama- and OpenAI-compatible\n"
		"APIs over HTTPS and dispatches to sluice-worker processes.\n"
		"The service is not there yet; this build reports its version.\n"
		"\n"
		"  --version   print version and git commit\n"
		"  -h, --help  print this help\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sluice-gateway %s\n", GW_VERSION);
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		gw_usage(stdout);
		return 0;
	}
	if (argc >= 2)
		fprintf(stderr, "sluice-gateway: unknown option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-gateway: expected an option\n");
	gw_usage(stderr);
	return 2;
}
