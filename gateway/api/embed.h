/*
 * embed.h - the embedding endpoints' bodies: OpenAI POST /v1/embeddings,
 * Ollama POST /api/embed and the legacy POST /api/embeddings
 * (docs/api.md#embeddings).
 *
 * Owns no state: parsing turns a body into a struct gw_api_embed whose
 * inputs live in the caller's arena; rendering appends the answer to a
 * caller's cm_buf.  Pure functions, any thread.
 *
 * Validation (400 with "<field>: expected <what>, found <what>"):
 *   OpenAI  input: a non-empty string, an array of 1..limits.embed_inputs
 *           non-empty strings, an array of token ids (one input) or an
 *           array of such arrays; encoding_format "float" (default) or
 *           "base64"; dimensions an integer >= 1; user ignored.  Inputs
 *           over the context are refused (OpenAI's behaviour).
 *   Ollama  /api/embed: input a string or an array of strings (may be
 *           empty: no vectors), truncate (default true), dimensions,
 *           options and keep_alive accepted; /api/embeddings: prompt a
 *           string (empty: an empty vector, as Ollama).
 */
#ifndef SLUICE_GATEWAY_API_EMBED_H
#define SLUICE_GATEWAY_API_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/buf.h"
#include "common/status.h"
#include "gateway/api/api.h"
#include "proto/proto.h"

/* limits.embed_inputs' bound: inputs of one request (OpenAI allows 2048) */
#define GW_API_EMBED_INPUTS_MAX CM_LIM_PROTO_EMBED_INPUTS_HARD

enum gw_api_embed_kind {
	GW_API_OPENAI_EMBEDDINGS = 0, /* POST /v1/embeddings */
	GW_API_OLLAMA_EMBED,          /* POST /api/embed */
	GW_API_OLLAMA_EMBEDDINGS,     /* POST /api/embeddings (legacy) */
};

struct gw_api_embed {
	enum gw_api_embed_kind kind;
	struct proto_str model;
	uint32_t n_inputs;                 /* 0 only for Ollama's empty input */
	struct proto_embed_input *inputs;  /* arena */
	int base64;                        /* OpenAI encoding_format "base64" */
	uint32_t dimensions;               /* 0: the model's */
	int truncate;                      /* cut inputs over the context */
	uint64_t text_bytes;               /* of all text inputs */
	uint64_t token_ids;                /* of all id inputs */
};

/*
 * Parses and validates `body` for `kind`.  CM_OK: *out filled; CM_EINVAL:
 * *err (400); CM_ENOMEM: *err (500).
 */
enum cm_status gw_api_parse_embed(enum gw_api_embed_kind kind, const void *body, size_t len,
				  const struct gw_api_limits *lim, struct cm_arena *arena,
				  struct gw_api_embed *out, struct gw_api_error *err) CM_WUR;

/* An upper bound of the tokens the inputs take (quota admission): each
 * text byte at most one token plus the model's two specials, capped by
 * the context per input. */
int64_t gw_api_embed_token_estimate(const struct gw_api_embed *r, uint32_t ctx);

/*
 * The answer: vectors[i * dim ..] of input i (n = r->n_inputs), the model
 * name, the tokens counted (usage.prompt_tokens, prompt_eval_count) and
 * total_ns (Ollama's total_duration).  CM_ELIMIT when out's cap is too
 * small, CM_ENOMEM.
 */
enum cm_status gw_api_render_embed(struct cm_buf *out, const struct gw_api_embed *r,
				   const char *model, const float *vectors, uint32_t dim,
				   uint32_t prompt_tokens, int64_t total_ns) CM_WUR;

#endif
