/* TEMPORARY: replaced by branch tok's cli_tokenize.c. */
#include "worker/cli.h"
int wk_cli_tokenize(int argc, char **argv) { (void)argc; (void)argv; return 2; }
