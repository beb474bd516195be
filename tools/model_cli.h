/*
 * model_cli.h - what the files of `sluice-model` share: sluice-model.c
 * (inspect, plan, sha256 and main), model_synth.c and synth_vocab.c
 * (synth), model_import.c (import llama2c) and model_grammar.c (grammar).
 */
#ifndef SLUICE_TOOLS_MODEL_CLI_H
#define SLUICE_TOOLS_MODEL_CLI_H

#include <stdint.h>
#include <stdio.h>

#define ERR_LEN 512

/* The usage text, on f. */
void model_usage(FILE *f);
/* A decimal integer in [0, max]; 0 on success, -1 otherwise. */
int model_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* `sluice-model synth ...` (argv after "synth"); the process exit code. */
int model_cmd_synth(int argc, char **argv);
/* `sluice-model import llama2c ...` (argv after "import"); the exit code. */
int model_cmd_import(int argc, char **argv);
/* `sluice-model grammar --vocab MODEL FILE...` (model_grammar.c); the exit code. */
int model_cmd_grammar(int argc, char **argv);

#endif
