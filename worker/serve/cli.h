/*
 * cli.h - the subcommands of sluice-worker, each a main()-like function.
 */
#ifndef SLUICE_WORKER_SERVE_CLI_H
#define SLUICE_WORKER_SERVE_CLI_H

int wk_cli_generate(int argc, char **argv);
int wk_cli_serve(int argc, char **argv);
int wk_cli_tokenize(int argc, char **argv);

#endif
