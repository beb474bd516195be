/*
 * main.c - sluice-gateway: the HTTPS edge (TLS, API keys, quotas, queues,
 * fair dispatch to the workers).
 *
 * At this stage it only reports its version and exposes its configuration
 * table (`config-doc`, `check-config`); the issues that follow add the
 * listener and their options here and keep --help true.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/status.h"

#ifdef SLUICE_GIT_COMMIT
#define GW_VERSION SLUICE_VERSION " (" SLUICE_GIT_COMMIT ")"
#else
#define GW_VERSION SLUICE_VERSION
#endif

/*
 * Every configuration section this binary reads, in file order; modules add
 * theirs here.  `config-doc` renders them (docs/configuration.md is checked
 * against it by tests/run.sh), `check-config` validates a file against them.
 */
static const struct cm_cfg_section *const gw_sections[] = {
	NULL,
};

static size_t gw_n_sections(void)
{
	size_t n = 0;

	while (gw_sections[n])
		n++;
	return n;
}

static int gw_config_doc(void)
{
	struct cm_buf out;
	enum cm_status st = CM_OK;

	cm_buf_init(&out, 1024 * 1024);
	for (size_t i = 0; st == CM_OK && gw_sections[i]; i++)
		st = cm_cfg_doc_markdown(gw_sections[i], &out);
	if (st == CM_OK && gw_n_sections() == 0)
		st = cm_buf_append_str(&out, "_No configuration keys yet._\n");
	if (st == CM_OK)
		fwrite(cm_buf_data(&out), 1, cm_buf_len(&out), stdout);
	else
		fprintf(stderr, "sluice-gateway: rendering the configuration doc: %s\n",
			cm_status_str(st));
	cm_buf_deinit(&out);
	return st == CM_OK ? 0 : 1;
}

static int gw_check_config(const char *path)
{
	char err[1024];
	enum cm_status st;

	st = cm_cfg_check_file(path, gw_sections, gw_n_sections(), err,
			       sizeof(err));
	if (st != CM_OK) {
		fprintf(stderr, "sluice-gateway: %s\n", err);
		return 1;
	}
	printf("%s: ok\n", path);
	return 0;
}

static void gw_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-gateway COMMAND [ARG] | --version | --help\n"
		"\n"
		"The Sluice gateway: serves the Ollama- and OpenAI-compatible\n"
		"APIs over HTTPS and dispatches to sluice-worker processes.\n"
		"The service is not there yet; this build reports its version.\n"
		"\n"
		"  --version   print version and git commit\n"
		"  check-config FILE\n"
		"              validate a configuration file and exit\n"
		"  config-doc  print the configuration keys as Markdown\n"
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
	if (argc == 2 && strcmp(argv[1], "config-doc") == 0)
		return gw_config_doc();
	if (argc == 3 && strcmp(argv[1], "check-config") == 0)
		return gw_check_config(argv[2]);
	if (argc >= 2)
		fprintf(stderr, "sluice-gateway: unknown command or option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-gateway: expected a command or option\n");
	gw_usage(stderr);
	return 2;
}
