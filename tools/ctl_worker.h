/*
 * ctl_worker.h - sluicectl's worker commands (drain) over the gateway's
 * admin API (tools/ctl_worker.c).  Thread: main thread only.
 */
#ifndef SLUICE_TOOLS_CTL_WORKER_H
#define SLUICE_TOOLS_CTL_WORKER_H

#include <stdio.h>

/* 1 when the first command word is "worker". */
int ctl_worker_handles(int argc, char **argv);
/* Runs the command; exit code (docs/sluicectl.md). */
int ctl_worker_main(int argc, char **argv);
void ctl_worker_usage(FILE *out);

#endif
