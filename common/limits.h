/*
 * limits.h - the named defaults of every limit in Sluice, in one place.
 *
 * Each limit here is a default: the module that enforces it declares a
 * config key (see docs/configuration.md) whose default is this value and
 * whose bounds are stated in that module's config table.  Units are in the
 * names.  Built-in hard ceilings (not configurable) are marked HARD.
 */
#ifndef SLUICE_COMMON_LIMITS_H
#define SLUICE_COMMON_LIMITS_H

/* ---- proto/ ---- */
#define CM_LIM_PROTO_FRAME_BYTES_HARD (16u * 1024 * 1024) /* largest frame */
#define CM_LIM_PROTO_FRAME_BYTES (8u * 1024 * 1024)        /* default max */
#define CM_LIM_PROTO_STOP_STRINGS_HARD 64
#define CM_LIM_PROTO_MESSAGES_HARD 4096
#define CM_LIM_PROTO_TOKENS_PER_FRAME_HARD 4096
#define CM_LIM_PROTO_EMBED_INPUTS_HARD 4096    /* inputs of one EMBED */
#define CM_LIM_PROTO_EMBED_DIM_HARD 65536      /* values of one EMBEDDING */
#define CM_LIM_PROTO_STRING_BYTES_HARD CM_LIM_PROTO_FRAME_BYTES_HARD
#define CM_LIM_PROTO_SENDBUF_BYTES (64u * 1024 * 1024) /* queued to one peer */

/* ---- gateway: HTTP ---- */
#define CM_LIM_HTTP_HEADER_BYTES (16 * 1024)
#define CM_LIM_HTTP_BODY_BYTES (4 * 1024 * 1024)
#define CM_LIM_HTTP_PREAUTH_BODY_BYTES (256ull * 1024 * 1024) /* all unauthenticated bodies */
#define CM_LIM_HTTP_UNAUTH_BODY_BYTES (64 * 1024) /* larger: read after the key check */
#define CM_LIM_HTTP_CONNECTIONS 4096
#define CM_LIM_HTTP_HEADER_TIMEOUT_MS 10000
#define CM_LIM_HTTP_BODY_TIMEOUT_MS 30000
#define CM_LIM_HTTP_IDLE_TIMEOUT_MS 60000
#define CM_LIM_HTTP_WRITE_TIMEOUT_MS 30000

/* ---- gateway: request content ---- */
#define CM_LIM_JSON_DEPTH 32
#define CM_LIM_MESSAGES 256
#define CM_LIM_STOP_STRINGS 16
#define CM_LIM_STOP_STRING_BYTES 256
#define CM_LIM_MAX_OUTPUT_TOKENS 4096
#define CM_LIM_MAX_PROMPT_TOKENS 32768

/* ---- gateway: queues ---- */
#define CM_LIM_TENANT_QUEUE 64
#define CM_LIM_GLOBAL_QUEUE 1024
#define CM_LIM_QUEUE_TIMEOUT_MS 30000

/* ---- worker ---- */
#define CM_LIM_KV_BLOCK_TOKENS 16
#define CM_LIM_MAX_RUNNING_SEQS 64
/* worker.max_running's bound; what the gateway accepts in HELLO.max_seqs */
#define CM_LIM_MAX_RUNNING_SEQS_HARD 4096
#define CM_LIM_STEP_TOKEN_BUDGET 512
#define CM_LIM_EMBED_STEP_TOKENS 2048 /* worker.embed_step_tokens */
#define CM_LIM_EMBED_INPUTS 2048      /* gateway limits.embed_inputs (OpenAI's bound) */
#define CM_LIM_WORKER_CONNECTIONS 16

/* OpenAI `n`: choices of one request (limits.choices) */
#define CM_LIM_CHOICES 8
/* tools of one request and their bytes as compact JSON (limits.tools, limits.tools_bytes) */
#define CM_LIM_TOOLS 128
#define CM_LIM_TOOLS_BYTES (256u * 1024)
/* tokens of thinking when a request sets no thinking_token_budget
 * (limits.thinking_token_budget; 0 = none) */
#define CM_LIM_THINKING_TOKEN_BUDGET 0
#define CM_LIM_THINKING_TOKEN_BUDGET_MAX 1048576

/* structured outputs (worker.grammar_*, limits.constraint_bytes) */
#define CM_LIM_CONSTRAINT_BYTES (512 * 1024)      /* a schema or grammar text */
#define CM_LIM_GRAMMAR_CACHE_ENTRIES 64           /* compiled constraints per model */
#define CM_LIM_GRAMMAR_MASK_CACHE_BYTES (32u << 20) /* per compiled constraint */
#define CM_LIM_GRAMMAR_POOL_BYTES (256u << 20)    /* shared across constraints */
#define CM_LIM_GRAMMAR_WARM_MS 20
#define CM_LIM_GRAMMAR_MAX_RULES 100000
#define CM_LIM_GRAMMAR_MAX_ELEMS 2000000
#define CM_LIM_GRAMMAR_MAX_STATES (1 << 20)
#define CM_LIM_GRAMMAR_SCHEMA_DEPTH 64

/* ---- models ---- */
#define CM_LIM_GGUF_KV_PAIRS_HARD 65536
#define CM_LIM_GGUF_TENSORS_HARD 65536
#define CM_LIM_GGUF_STRING_BYTES_HARD (64u * 1024 * 1024)
#define CM_LIM_GGUF_ARRAY_ELEMS_HARD (16u * 1024 * 1024)
#define CM_LIM_GGUF_DIMS_HARD 4

/* ---- config file ---- */
#define CM_LIM_CONFIG_FILE_BYTES (1024 * 1024)

#endif
