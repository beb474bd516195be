/*
 * main.c - sluice-worker: one process per GPU (or CPU), serving the
 * gateway over a Unix socket (proto/).
 *
 * Subcommands: serve (the service), generate (one completion on the
 * terminal), tokenize (text on stdin to ids), config-doc (the config keys
 * as Markdown); --version names the compiled-in backends and --probe
 * checks the CUDA device.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/config.h"
#include "common/status.h"
#include "worker/cli.h"
#include "worker/server.h"
#ifdef SLUICE_HAVE_CUDA
#include "worker/cuda/probe.h"
#endif

#ifdef SLUICE_GIT_COMMIT
#define WK_VERSION SLUICE_VERSION " (" SLUICE_GIT_COMMIT ")"
#else
#define WK_VERSION SLUICE_VERSION
#endif

#ifdef SLUICE_HAVE_CUDA
#define WK_BACKENDS "cpu,cuda"
#else
#define WK_BACKENDS "cpu"
#endif

static void wk_usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-worker COMMAND [ARGS] | OPTION\n"
		"\n"
		"The Sluice worker: loads a model and serves generations to\n"
		"sluice-gateway over a Unix socket.\n"
		"\n"
		"  serve --config FILE       run the worker (see docs/worker.md)\n"
		"  generate --model PATH --prompt TEXT [...]\n"
		"                            one completion to stdout, timings to stderr\n"
		"  tokenize --model PATH [--add-special]\n"
		"                            token ids of stdin\n"
		"  config-doc                the configuration keys as Markdown\n"
		"\n"
		"  --version   print version, git commit and compiled backends\n"
		"  --probe     look for a CUDA device and create a cuBLAS handle\n"
		"              (exit 0: found, 3: no device, 1: error)\n"
		"  -h, --help  print this help\n");
}

static int wk_probe(void)
{
#ifdef SLUICE_HAVE_CUDA
	char desc[512];
	enum cm_status st = wk_cuda_probe(desc, sizeof(desc));

	printf("%s\n", desc);
	if (st == CM_ENOTFOUND)
		return 3;
	return st == CM_OK ? 0 : 1;
#else
	printf("cuda: not built (configure with nvcc present or "
	       "-DSLUICE_CUDA=ON)\n");
	return 3;
#endif
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("sluice-worker %s backends: %s\n", WK_VERSION,
		       WK_BACKENDS);
		return 0;
	}
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		wk_usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--probe") == 0)
		return wk_probe();
	if (argc >= 2 && strcmp(argv[1], "serve") == 0)
		return wk_cli_serve(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "generate") == 0)
		return wk_cli_generate(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "tokenize") == 0)
		return wk_cli_tokenize(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], "config-doc") == 0) {
		struct cm_buf b;
		int rc = 1;

		cm_buf_init(&b, 1 << 20);
		if (cm_cfg_doc_markdown(&wk_server_section, &b) == CM_OK) {
			fwrite(cm_buf_data(&b), 1, cm_buf_len(&b), stdout);
			rc = 0;
		}
		cm_buf_deinit(&b);
		return rc;
	}
	if (argc >= 2)
		fprintf(stderr, "sluice-worker: unknown option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-worker: expected an option\n");
	wk_usage(stderr);
	return 2;
}
