/*
 * ctl_main.h - entry point of sluicectl's governance commands (tenants,
 * clients, keys) over Redis.  sluicectl's main() hands them its argv.
 */
#ifndef SLUICE_TOOLS_CTL_MAIN_H
#define SLUICE_TOOLS_CTL_MAIN_H

#include <stdio.h>

/*
 * Runs one command: argv[0] is the program name, then global options
 * (--redis URL, --pepper-file PATH, --namespace NS, --json, anywhere on the
 * line) and `tenant|client|key SUBCOMMAND ...`.  Returns the process exit
 * code (docs/sluicectl.md): 0 ok, 1 usage, 2 not found, 3 conflict,
 * 4 Redis unavailable, 5 invalid value.
 */
int ctl_main(int argc, char **argv);
/* 1 when argv[1..] names a command ctl_main handles (tenant, client, key). */
int ctl_main_handles(int argc, char **argv);
/* Writes the usage text of these commands. */
void ctl_main_usage(FILE *out);

#endif
