/*
 * tmpdir.h - a test program's private temporary directory, for the worker
 * tests that write generated models: `tmpdir` holds its path, and
 * tmpdir_setup / tmpdir_teardown are the cmocka group setup (mkdtemp of
 * /tmp/<TMPDIR_PREFIX>-XXXXXX) and teardown (rm -rf).  Define
 * TMPDIR_PREFIX before including it.
 */
#ifndef SLUICE_TESTS_WORKER_TMPDIR_H
#define SLUICE_TESTS_WORKER_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>

#ifndef TMPDIR_PREFIX
#error "define TMPDIR_PREFIX before including tests/worker/tmpdir.h"
#endif

static char tmpdir[256];

static int tmpdir_setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/%s-XXXXXX", TMPDIR_PREFIX);
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int tmpdir_teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
