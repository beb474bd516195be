/*
 * model.h - a loaded model: hyperparameters, weight tensors (pointers into
 * the memory-mapped GGUF file), tokenizer and chat template.
 *
 * Immutable after wk_model_load(): shared read-only by the scheduler and
 * every backend thread.  Backends that keep weights elsewhere (GPU) copy
 * from these tensors at creation.
 *
 * Shapes follow GGUF: a 2-D weight has dims[0] = cols (the input length,
 * innermost) and dims[1] = rows (outputs); row r is the contiguous run of
 * `cols` values starting at byte r * row_bytes.  y = W x means
 * y[r] = dot(row r, x).
 */
#ifndef SLUICE_WORKER_MODEL_MODEL_H
#define SLUICE_WORKER_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/model/model_config.h"


struct wk_gguf;
struct wk_tok;
struct wk_chat_template;

struct wk_model_opts {
	const char *sha256_hex;      /* pinned digest: refuse on mismatch; NULL = none */
	int compute_sha256;          /* hash the file even when nothing is pinned */
	const char *chat_template;   /* override by family name; NULL = detect */
	uint32_t n_ctx;              /* the context that will be served (0: the training
				      * context): phi3's LongRoPE picks its long factors
				      * above rope.scaling.original_context_length, as
				      * llama.cpp does by its configured context */
};

struct wk_model {
	struct wk_hparams hp;        /* a copy of cfg->hp (worker/model/model_config.h) */
	struct wk_tensor tok_embd;   /* (vocab, embd): row t = embedding of token t */
	struct wk_tensor output_norm;
	struct wk_tensor output;     /* (vocab, embd); = tok_embd when tied */
	struct wk_layer *layers;     /* [n_layer], owned by cfg */
	struct wk_gguf *gguf;        /* owns the mapping */
	struct wk_mcfg *cfg;         /* validated hyperparameters and tensors */
	struct wk_tok *tok;
	const struct wk_chat_template *chat; /* NULL when the model has no known template */
	char name[128];              /* general.name or file stem */
	uint8_t sha256[32];          /* of the file, when computed */
	int has_sha256;
	uint64_t weight_bytes;
	uint64_t n_params;
	uint64_t file_bytes;         /* size of the GGUF file */
	int64_t mtime_s;             /* its modification time (Unix seconds) */
	/* the file's identity when loaded (the CPU backend's expert cache
	 * keys on it): device, inode, modification time in nanoseconds, and
	 * its absolute path (realpath; the path as given if that fails) */
	uint64_t file_dev, file_ino;
	uint32_t file_mode;          /* its permission bits */
	int64_t mtime_ns;
	char real_path[4096];
	char file_type[16];          /* "Q4_K_M", "F16": general.file_type, else the
				      * type of the first layer's attention weights */
};

/*
 * Opens, validates and (optionally) checks the SHA-256 of a GGUF model,
 * then builds its tokenizer and chat template.  Errors are written to err
 * ("model sha256 mismatch: config pins 1234..., file has abcd...").
 */
enum cm_status wk_model_load(const char *path, const struct wk_model_opts *opts,
			     struct wk_model **out, char *err, size_t err_len) CM_WUR;
void wk_model_free(struct wk_model *m);

/* KV bytes per token for an element size (2 for F16). */
uint64_t wk_model_kv_bytes_per_token(const struct wk_hparams *hp, uint32_t elem_bytes);

#endif
