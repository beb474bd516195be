/*
 * main.c - sluice-worker: one process per GPU (or CPU), serving the
 * gateway over a Unix socket (proto/).
 *
 * Commands: serve (the service), generate (one completion on the
 * terminal), tokenize (text on stdin to ids), probe (the CUDA device),
 * config-doc / check-config (the configuration table); --version names the
 * compiled-in backends.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/status.h"
#include "worker/serve/backend_open.h"
#include "worker/serve/cli.h"
#include "worker/serve/server.h"

/* The engine build, as HELLO's engine_version and worker.pin_engine_version */
#ifdef SLUICE_GIT_COMMIT
#define WK_VERSION SLUICE_VERSION "+" SLUICE_GIT_COMMIT
#else
#define WK_VERSION SLUICE_VERSION
#endif

/*
 * Every configuration section this binary reads, in file order; modules add
 * theirs here.  `config-doc` renders them (docs/configuration.md is checked
 * against it by tests/run.sh), `check-config` validates a file against them.
 */
static const struct cm_cfg_section *const wk_sections[] = {
	&wk_server_section,
	NULL,
};

static size_t wk_n_sections(void)
{
	size_t n = 0;

	while (wk_sections[n])
		n++;
	return n;
}

static int wk_config_doc(void)
{
	struct cm_buf out;
	enum cm_status st = CM_OK;

	cm_buf_init(&out, 1024 * 1024);
	for (size_t i = 0; st == CM_OK && wk_sections[i]; i++)
		st = cm_cfg_doc_markdown(wk_sections[i], &out);
	if (st == CM_OK && wk_n_sections() == 0)
		st = cm_buf_append_str(&out, "_No configuration keys yet._\n");
	if (st == CM_OK)
		fwrite(cm_buf_data(&out), 1, cm_buf_len(&out), stdout);
	else
		fprintf(stderr, "sluice-worker: rendering the configuration doc: %s\n",
			cm_status_str(st));
	cm_buf_deinit(&out);
	return st == CM_OK ? 0 : 1;
}

static int wk_check_config(const char *path)
{
	char err[1024];
	enum cm_status st;

	st = cm_cfg_check_file(path, wk_sections, wk_n_sections(), err,
			       sizeof(err));
	if (st != CM_OK) {
		fprintf(stderr, "sluice-worker: %s\n", err);
		return 1;
	}
	printf("%s: ok\n", path);
	return 0;
}

static void wk_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-worker COMMAND [ARG] | --version | --help\n"
		"\n"
		"The Sluice worker: loads a model and serves generations to\n"
		"sluice-gateway over a Unix socket.\n"
		"\n"
		"  serve --config FILE\n"
		"              run the worker (docs/worker.md)\n"
		"  generate --model PATH --prompt TEXT [--chat] [--max-tokens N] ...\n"
		"              one completion to stdout, timings to stderr\n"
		"  tokenize --model PATH [--add-special]\n"
		"              the token ids of stdin on one line\n"
		"  --version   print version, git commit and compiled backends\n"
		"  probe       look for a CUDA device, run a kernel, create a\n"
		"              cuBLAS handle\n"
		"              (exit 0: found, 3: no device, 1: error)\n"
		"  check-config FILE\n"
		"              validate a configuration file and exit\n"
		"  config-doc  print the configuration keys as Markdown\n"
		"  -h, --help  print this help\n");
}

static int wk_probe(void)
{
	char desc[512];
	enum cm_status st = wk_backend_probe(desc, sizeof(desc));

	printf("%s\n", desc);
	if (st == CM_ENOTFOUND || st == CM_EUNSUPPORTED)
		return 3;
	return st == CM_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sluice-worker %s backends: %s\n", WK_VERSION,
		       wk_backend_names());
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		wk_usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "probe") == 0)
		return wk_probe();
	if (argc >= 2 && strcmp(argv[1], "serve") == 0)
		return wk_cli_serve(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "generate") == 0)
		return wk_cli_generate(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "tokenize") == 0)
		return wk_cli_tokenize(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "config-doc") == 0)
		return wk_config_doc();
	if (argc == 3 && strcmp(argv[1], "check-config") == 0)
		return wk_check_config(argv[2]);
	if (argc >= 2)
		fprintf(stderr, "sluice-worker: unknown command or option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-worker: expected a command or option\n");
	wk_usage(stderr);
	return 2;
}
