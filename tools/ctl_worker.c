/*
 * ctl_worker.c - `sluicectl worker drain NAME`: asks the gateway, through
 * its admin API on the loopback admin listener, to stop placing new
 * requests on a worker (requests in flight finish; docs/admin-api.md).
 *
 * One request through tools/ctl_admin.c (--admin, --admin-token-file),
 * 10 s socket timeouts, the answer capped at CTL_WK_RESPONSE_MAX.
 * Thread: main thread only.
 */
#include "tools/ctl_worker.h"

#include <stdio.h>
#include <string.h>

#include "tools/ctl_admin.h"
#include "tools/ctl_internal.h"

#define CTL_WK_RESPONSE_MAX (64 * 1024)
#define CTL_WK_NAME_MAX 64

void ctl_worker_usage(FILE *out)
{
	fputs("  worker drain NAME [--admin ADDR:PORT] [--admin-token-file PATH]\n"
	      "                     stop new placements on worker NAME (in-flight\n"
	      "                     requests finish; its next HELLO re-admits it)\n"
	      "                     ADDR:PORT default $SLUICE_ADMIN or 127.0.0.1:9464,\n"
	      "                     PATH default $SLUICE_ADMIN_TOKEN_FILE\n",
	      out);
}

int ctl_worker_handles(int argc, char **argv)
{
	return ctl_admin_command_is(argc, argv, "worker", NULL);
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CTL_WK_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

int ctl_worker_main(int argc, char **argv)
{
	struct ctl_admin adm;
	char path[160];
	json_t *resp = NULL;
	int status = 0, rc;

	argc--;
	argv++;
	rc = ctl_admin_open(&adm, &argc, argv);
	if (rc != 0)
		return rc;
	rc = CTL_EXIT_USAGE;
	if (argc != 3 || strcmp(argv[0], "worker") != 0 || strcmp(argv[1], "drain") != 0) {
		fprintf(stderr, "sluicectl: expected \"worker drain NAME\"\n");
		ctl_worker_usage(stderr);
		goto out;
	}
	if (!name_ok(argv[2])) {
		fprintf(stderr, "sluicectl: worker name: expected 1 to %d characters of "
			"[A-Za-z0-9_.-]\n", CTL_WK_NAME_MAX);
		rc = CTL_EXIT_INVALID;
		goto out;
	}
	snprintf(path, sizeof(path), "/admin/workers/%s/drain", argv[2]);
	if (ctl_admin_call(&adm, "POST", path, NULL, CTL_WK_RESPONSE_MAX, &status, &resp) != 0) {
		rc = CTL_EXIT_UNAVAILABLE;
		goto out;
	}
	rc = ctl_admin_exit_code(status);
	if (rc == CTL_EXIT_OK)
		printf("worker %s: draining (no new placements; in-flight requests finish)\n",
		       argv[2]);
	else
		ctl_admin_print_error("worker drain", status, resp);
out:
	json_decref(resp);
	ctl_admin_close(&adm);
	return rc;
}
