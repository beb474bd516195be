/*
 * ctl_model.h - sluicectl's model change commands: model list, promote,
 * rollback and eval record, run, over the gateway's admin API
 * (tools/ctl_model.c, docs/operations.md).  Thread: main thread only.
 */
#ifndef SLUICE_TOOLS_CTL_MODEL_H
#define SLUICE_TOOLS_CTL_MODEL_H

#include <stdio.h>

/* 1 when the first command word is "model" or "eval". */
int ctl_model_handles(int argc, char **argv);
/* Runs the command; exit code (docs/sluicectl.md). */
int ctl_model_main(int argc, char **argv);
void ctl_model_usage(FILE *out);

#endif
