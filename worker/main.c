/*
 * main.c - sluice-worker: one process per GPU (or CPU), serving the
 * gateway over a Unix socket (proto/).
 *
 * At this stage the worker only reports what it is built with: --version
 * names the compiled-in backends and --probe checks the CUDA device.  The
 * service itself (model loading, scheduler, socket) is added by the issues
 * that follow; each adds its option here and keeps --help true.
 * Thread: main thread only; only main() exits.
 */
#include <stdio.h>
#include <string.h>

#include "common/status.h"
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
		"usage: sluice-worker [OPTION]\n"
		"\n"
		"The Sluice worker: loads a model and serves generations to\n"
		"sluice-gateway over a Unix socket.  The service is not there\n"
		"yet; this build reports what it contains.\n"
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
	if (argc >= 2)
		fprintf(stderr, "sluice-worker: unknown option \"%s\"\n",
			argv[1]);
	else
		fprintf(stderr, "sluice-worker: expected an option\n");
	wk_usage(stderr);
	return 2;
}
