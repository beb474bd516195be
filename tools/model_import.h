/*
 * model_import.h - llama2.c checkpoints as GGUF (model_import.c): the
 * parser, over bytes in memory (a mapped checkpoint, a read tokenizer), and
 * the writer.  Used by `sluice-model import llama2c` and by fuzz_llama2c.
 */
#ifndef SLUICE_TOOLS_MODEL_IMPORT_H
#define SLUICE_TOOLS_MODEL_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define L2C_MAX_DIM 65536u
#define L2C_MAX_LAYERS 1024u
#define L2C_MAX_VOCAB 1048576u
#define L2C_MAX_SEQ 1048576u
#define L2C_MAX_PIECE 4096u

/* The llama2.c header, in file order. */
struct l2c_config {
	int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
};

/* One tensor of the output: where its floats are in the mapping. */
struct l2c_tensor {
	char name[48];
	uint32_t n_dims;
	uint64_t dims[2];  /* innermost first */
	const float *data;
};

struct model_l2c {
	const uint8_t *map;
	size_t map_len;
	struct l2c_config c;
	int tied;
	struct l2c_tensor *t;
	uint32_t n_t;
	/* the vocabulary */
	char **tok;
	float *score;
	int32_t *type;
	uint32_t n_tok;
};

/*
 * Checks and lays out a checkpoint (`ckpt`, borrowed: it must outlive *out)
 * and its tokenizer (`vocab`, copied); the paths only name them in errors.
 * On failure err says what was expected and what was found.
 */
enum cm_status model_l2c_parse(const uint8_t *ckpt, size_t ckpt_len, const char *ckpt_path,
			       const uint8_t *vocab, size_t vocab_len, const char *vocab_path,
			       struct model_l2c *out, char *err, size_t err_len) CM_WUR;
/* Writes the GGUF to `path` (general.name `name`). */
enum cm_status model_l2c_write(struct model_l2c *im, const char *name, const char *path,
			       char *err, size_t err_len) CM_WUR;
void model_l2c_deinit(struct model_l2c *im);

#endif
