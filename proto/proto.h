/*
 * proto.h - the versioned binary protocol between sluice-gateway and
 * sluice-worker over Unix stream sockets.  docs/protocol.md is the byte-
 * level specification; this header is its C face.
 *
 * Frame = 24-byte header + payload, all integers little-endian:
 *
 *   off size field
 *    0   4   magic        0x31504C53 ("SLP1" as bytes 'S' 'L' 'P' '1')
 *    4   2   version      PROTO_VERSION
 *    6   2   type         enum proto_type
 *    8   4   flags        per-type flags, unknown bits must be 0
 *   12   4   payload_len  bytes after the header, <= the decoder's maximum
 *   16   8   request_id   0 = connection-wide
 *
 * Payload: the message's typed fields in the order documented for that
 * type, each primitive little-endian:
 *   u8 u16 u32 u64 i64, f32 (IEEE-754 bits as u32),
 *   bytes32  32 raw bytes (digests, salts),
 *   str      u32 length + that many bytes of valid UTF-8 (no NUL added),
 *   blob     u32 length + that many bytes, any (version 3: token pieces),
 *   list     u32 count + count elements (count checked against the bytes
 *            left before anything is allocated).
 * A payload must be consumed exactly: bytes left over are an error.
 *
 * Message types are grouped in ranges (as tmux does): 1-15 connection
 * control, 16-31 requests gateway -> worker, 32-47 results worker ->
 * gateway, 48-63 observation.
 *
 * Decoded messages borrow: every string and array in a struct proto_msg
 * points into the decoder's frame buffer and stays valid until the next
 * proto_decoder_next() or proto_decoder_free().
 */
#ifndef SLUICE_PROTO_PROTO_H
#define SLUICE_PROTO_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"

#define PROTO_MAGIC 0x31504C53u
#define PROTO_VERSION 6
#define PROTO_HEADER_LEN 24
#define PROTO_DIGEST_LEN 32

enum proto_type {
	/* 1-15: connection control */
	PROTO_HELLO = 1,  /* worker -> gateway, first frame on a connection */
	PROTO_PING = 2,   /* gateway -> worker: health check */
	PROTO_PONG = 3,   /* worker -> gateway: result of a real short generation */
	PROTO_DRAIN = 4,  /* gateway -> worker: stop admitting new requests */
	PROTO_ERROR = 5,  /* either way: request or connection error */
	/* 16-31: requests, gateway -> worker */
	PROTO_SUBMIT = 16,
	PROTO_CANCEL = 17,
	PROTO_EMBED = 18,      /* version 6: embed inputs (no generation) */
	/* 32-47: results, worker -> gateway */
	PROTO_TOKEN = 32,
	PROTO_DONE = 33,
	PROTO_EMBEDDING = 34,  /* version 6: one input's vector */
	/* 48-63: observation */
	PROTO_STATS = 48, /* worker -> gateway, every second */
};

/* Why the decoder refused input: each a distinct, tested error. */
enum proto_error {
	PROTO_ERR_NONE = 0,
	PROTO_ERR_MAGIC,          /* header magic is not PROTO_MAGIC */
	PROTO_ERR_VERSION,        /* header version is not PROTO_VERSION */
	PROTO_ERR_TYPE,           /* unknown message type */
	PROTO_ERR_FLAGS,          /* flag bits not defined for the type */
	PROTO_ERR_TOO_LONG,       /* payload_len above the decoder maximum */
	PROTO_ERR_FIELD_OVERRUN,  /* a field runs past the end of the payload */
	PROTO_ERR_COUNT_OVERRUN,  /* a list count larger than the bytes left */
	PROTO_ERR_COUNT_LIMIT,    /* a list count above its hard limit */
	PROTO_ERR_UTF8,           /* a str field is not valid UTF-8 */
	PROTO_ERR_TRAILING,       /* bytes left after the last field */
	PROTO_ERR_VALUE,          /* a field value outside its domain (enum, NaN) */
};

const char *proto_error_str(enum proto_error e);
const char *proto_type_str(enum proto_type t);
/* "json_object", "json_schema", "grammar" ("none" for 0): logs and metrics. */
const char *proto_constraint_str(uint8_t kind);

/* A borrowed byte string (UTF-8 validated for str fields). */
struct proto_str {
	const char *ptr;
	uint32_t len;
};

/* ---- HELLO ---------------------------------------------------------- */
struct proto_hello {
	uint16_t proto_version;     /* highest version the worker speaks */
	struct proto_str worker_name;
	struct proto_str model_name;
	uint8_t model_sha256[PROTO_DIGEST_LEN];
	uint32_t context_len;       /* tokens */
	uint32_t vocab_size;
	uint32_t max_seqs;          /* concurrent sequences the worker runs */
	uint32_t kv_blocks_total;
	uint32_t kv_block_tokens;   /* tokens per KV block */
	struct proto_str backend;   /* "cpu", "cuda" */
	struct proto_str device;    /* "Intel Xeon ... x2 threads", "NVIDIA H200" */
	struct proto_str engine_version;
	/* version 2: the model file, for /api/tags, /api/show and /v1/models */
	uint64_t model_bytes;       /* size of the GGUF file */
	int64_t model_mtime_s;      /* its modification time, Unix seconds */
	struct proto_str architecture; /* general.architecture: "llama", "qwen2" */
	uint64_t parameter_count;   /* elements of all tensors */
	struct proto_str file_type; /* "Q4_K_M", "F16", ... (general.file_type) */
	/* version 6: what the model does */
	uint32_t embedding_dim;     /* length of its vectors; 0: it does not embed */
	uint8_t generates;          /* 1: it generates (SUBMIT); 0: it only embeds */
};

/* ---- SUBMIT --------------------------------------------------------- */
enum proto_prompt_kind {
	PROTO_PROMPT_TEXT = 0, /* raw text, no template */
	PROTO_PROMPT_CHAT = 1, /* messages, rendered with the model's template */
};

enum proto_class {
	PROTO_CLASS_INTERACTIVE = 0,
	PROTO_CLASS_BATCH = 1,
};

/* SUBMIT flags (header flags field) */
#define PROTO_SUBMIT_F_HAS_SEED 0x1u      /* seed field is meaningful */
#define PROTO_SUBMIT_F_ADD_BOS 0x2u       /* TEXT: prepend BOS if the model has one */
#define PROTO_SUBMIT_F_DIGEST 0x4u        /* DONE carries a digest of the last logits */
#define PROTO_SUBMIT_F_IGNORE_EOS 0x8u    /* keep generating past EOS (benchmarks) */
#define PROTO_SUBMIT_F_FIT 0x10u          /* max_tokens is a cap: lowered to what the
					   * context leaves after the prompt */
#define PROTO_SUBMIT_F_LOGPROBS 0x20u     /* the client reads logprobs: TOKEN's logprob (and
					   * top) come from the distribution sampled, the
					   * constraint's mask applied (no shortcut) */
#define PROTO_SUBMIT_FLAGS_ALL 0x3Fu

/* What the output must match (version 3). */
enum proto_constraint {
	PROTO_CONSTRAINT_NONE = 0,
	PROTO_CONSTRAINT_JSON_OBJECT = 1, /* any JSON object (text empty) */
	PROTO_CONSTRAINT_JSON_SCHEMA = 2, /* text: a JSON Schema */
	PROTO_CONSTRAINT_GRAMMAR = 3,     /* text: a grammar (docs/structured-outputs.md) */
};
/* Most alternatives TOKEN carries per token (OpenAI's top_logprobs bound). */
#define PROTO_TOP_LOGPROBS_MAX 20

/*
 * Chat roles: the ones the worker's chat templates render.  The gateway
 * accepts exactly these (after an API's own aliases, such as OpenAI's
 * "developer" for system) so that it never passes a role the worker would
 * refuse; the worker checks them again with the same function.
 */
enum proto_role {
	PROTO_ROLE_SYSTEM = 0,
	PROTO_ROLE_USER = 1,
	PROTO_ROLE_ASSISTANT = 2,
	PROTO_ROLE_TOOL = 3,        /* version 4: a tool result */
	PROTO_ROLE_COUNT
};
#define PROTO_ROLE_LIST "system, user, assistant, tool"
extern const char *const proto_role_names[PROTO_ROLE_COUNT];
/* enum proto_role of a role name (exact, case-sensitive), -1 when none. */
int proto_role_parse(const char *s, size_t len);

struct proto_message {
	struct proto_str role;    /* one of proto_role_names */
	struct proto_str content;
	/* version 4 */
	struct proto_str tool_calls;   /* assistant: JSON array of {"id", "name",
					* "arguments": object}; "" none */
	struct proto_str tool_call_id; /* tool: the call it answers */
};

/* SUBMIT tool_choice (version 4; docs/tools.md) */
enum proto_tool_choice {
	PROTO_TOOLS_AUTO = 0,      /* the model decides (tools given) */
	PROTO_TOOLS_NONE = 1,      /* tools rendered, no call parsed or forced */
	PROTO_TOOLS_REQUIRED = 2,  /* at least one call, constrained from the first token */
	PROTO_TOOLS_NAMED = 3,     /* a call of tool_name, constrained */
};

/* SUBMIT think (version 4) */
enum proto_think {
	PROTO_THINK_DEFAULT = 0,   /* as the model does: split out when it thinks */
	PROTO_THINK_ON = 1,
	PROTO_THINK_OFF = 2,       /* the family's no-thinking form */
};

/* TOKEN channel (version 4): where the entry's text goes */
enum proto_channel {
	PROTO_CH_CONTENT = 0,
	PROTO_CH_REASONING = 1,
	PROTO_CH_TOOL_CALL = 2,    /* text: one complete call, JSON {"name",
				    * "arguments": object, "id" when the model
				    * wrote one} */
};

struct proto_sampling {
	float temperature;        /* 0 = greedy */
	uint32_t top_k;           /* 0 = off */
	float top_p;              /* 1 = off */
	float min_p;              /* 0 = off */
	float repeat_penalty;     /* 1 = off */
	uint32_t repeat_last_n;   /* window for the penalties, tokens */
	float presence_penalty;   /* 0 = off */
	float frequency_penalty;  /* 0 = off */
	uint64_t seed;            /* with PROTO_SUBMIT_F_HAS_SEED */
};

struct proto_submit {
	struct proto_str tenant_id;
	uint8_t cache_salt[PROTO_DIGEST_LEN]; /* derived by the gateway from the tenant */
	struct proto_str key_id;              /* for logs and revocation only */
	struct proto_str model;               /* model name requested */
	uint8_t klass;                        /* enum proto_class */
	uint32_t max_tokens;                  /* completion tokens, >= 1 */
	uint32_t max_prompt_tokens;           /* 0 = the model's context */
	struct proto_sampling sampling;
	uint32_t n_stop;
	const struct proto_str *stop;         /* n_stop stop strings */
	uint8_t prompt_kind;                  /* enum proto_prompt_kind */
	struct proto_str text;                /* TEXT */
	uint32_t n_messages;
	const struct proto_message *messages; /* CHAT */
	struct proto_str template_name;       /* "" = the model's own */
	/* version 3 */
	uint8_t constraint_kind;              /* enum proto_constraint */
	struct proto_str constraint;          /* the schema or grammar text */
	uint8_t top_logprobs;                 /* 0..PROTO_TOP_LOGPROBS_MAX per TOKEN */
	/* version 4 */
	struct proto_str tools;               /* JSON array of OpenAI tools; "" none */
	uint8_t tool_choice;                  /* enum proto_tool_choice */
	struct proto_str tool_name;           /* PROTO_TOOLS_NAMED */
	uint8_t parallel_tool_calls;          /* 1: several calls allowed */
	uint8_t think;                        /* enum proto_think */
	/* version 5 */
	uint32_t think_budget;                /* tokens of thinking before the
					       * worker closes it; 0 = none */
};

/* ---- EMBED (version 6) ---------------------------------------------
 * Inputs to embed, each answered by one EMBEDDING (in any order), then
 * one DONE (prompt_tokens: the tokens embedded, all inputs; gen_tokens 0)
 * or one ERROR for the whole request.
 */
#define PROTO_EMBED_F_TRUNCATE 0x1u  /* an input over the context is cut to it
				      * (else the request fails, E_TOO_LONG) */
#define PROTO_EMBED_FLAGS_ALL 0x1u

enum proto_input_kind {
	PROTO_INPUT_TEXT = 0,        /* text, tokenized by the worker */
	PROTO_INPUT_TOKENS = 1,      /* token ids, taken as they are */
};

struct proto_embed_input {
	uint8_t kind;                /* enum proto_input_kind */
	struct proto_str text;       /* TEXT */
	uint32_t n_tokens;           /* TOKENS: 1 .. */
	const uint32_t *tokens;
};

struct proto_embed {
	struct proto_str tenant_id;
	struct proto_str key_id;              /* for logs and revocation only */
	struct proto_str model;
	uint8_t klass;                        /* enum proto_class */
	uint32_t dimensions;                  /* 0: the model's; else the first
					       * `dimensions` values, renormalised */
	uint32_t n_inputs;                    /* 1 .. CM_LIM_PROTO_EMBED_INPUTS_HARD */
	const struct proto_embed_input *inputs;
};

/* ---- EMBEDDING (version 6) ------------------------------------------ */
struct proto_embedding {
	uint32_t index;             /* the input's index in EMBED */
	uint32_t n_tokens;          /* tokens embedded (after any truncation) */
	uint8_t truncated;          /* 1: the input was cut to the context */
	uint32_t n_values;          /* 1 .. CM_LIM_PROTO_EMBED_DIM_HARD */
	const float *values;        /* finite, an L2 unit vector */
};

/* ---- CANCEL --------------------------------------------------------- */
enum proto_cancel_reason {
	PROTO_CANCEL_CLIENT_GONE = 0,
	PROTO_CANCEL_REVOKED = 1,
	PROTO_CANCEL_TIMEOUT = 2,
	PROTO_CANCEL_SHUTDOWN = 3,
};

struct proto_cancel {
	uint8_t reason; /* enum proto_cancel_reason */
};

/* ---- TOKEN ---------------------------------------------------------- */
struct proto_top {
	uint32_t id;
	float logprob;
	struct proto_str piece; /* the token's bytes (blob: need not be UTF-8) */
};

struct proto_token {
	uint32_t id;
	float logprob;          /* natural log of the sampled token's probability */
	struct proto_str text;  /* UTF-8 bytes released with this token (may be "") */
	/* version 3 */
	struct proto_str piece; /* the token's own bytes with F_LOGPROBS, else
				 * empty (blob: a byte token need not be UTF-8) */
	uint8_t n_top;          /* the most likely alternatives, best first,
				 * <= PROTO_TOP_LOGPROBS_MAX */
	const struct proto_top *top;
	/* version 4 */
	uint8_t channel;        /* enum proto_channel of `text` */
};

struct proto_tokens {
	uint32_t n;             /* 1 .. CM_LIM_PROTO_TOKENS_PER_FRAME_HARD */
	const struct proto_token *tok;
};

/* ---- DONE ----------------------------------------------------------- */
enum proto_finish {
	PROTO_FINISH_STOP = 0,      /* EOS/EOT or a stop string */
	PROTO_FINISH_LENGTH = 1,    /* max_tokens or context reached */
	PROTO_FINISH_CANCELLED = 2, /* CANCEL or peer gone */
};

struct proto_done {
	uint8_t finish;             /* enum proto_finish */
	uint32_t prompt_tokens;
	uint32_t cached_tokens;     /* prompt tokens served from the prefix cache */
	uint32_t gen_tokens;
	uint32_t preemptions;
	int64_t load_ns;
	int64_t queue_ns;
	int64_t prefill_ns;
	int64_t decode_ns;
	int64_t ttft_ns;            /* SUBMIT received -> first TOKEN sent */
	uint8_t logits_digest[PROTO_DIGEST_LEN]; /* zeros unless F_DIGEST */
	/* version 3 */
	int64_t constraint_ns;      /* compiling the constraint (0: none, or cached) */
	/* version 4 */
	uint32_t reasoning_tokens;  /* of gen_tokens, those generated while thinking */
};

/* ---- ERROR ---------------------------------------------------------- */
enum proto_errcode {
	PROTO_E_BAD_REQUEST = 1,    /* invalid parameters */
	PROTO_E_TOO_LONG = 2,       /* prompt (+ max_tokens) over the context */
	PROTO_E_NO_TEMPLATE = 3,    /* unknown chat template */
	PROTO_E_OVERLOADED = 4,     /* worker cannot take more */
	PROTO_E_DRAINING = 5,       /* worker is draining */
	PROTO_E_PROTOCOL = 6,       /* malformed frame; connection closes */
	PROTO_E_INTERNAL = 7,       /* engine failure */
	PROTO_E_UNKNOWN_REQUEST = 8,/* CANCEL for an id the worker does not know */
	PROTO_E_DUPLICATE = 9,      /* SUBMIT with a request id already running */
	PROTO_E_CONSTRAINT = 10,    /* the constraint does not compile (before any
				     * TOKEN), or it left no allowed token (after) */
};

struct proto_errmsg {
	uint16_t code;              /* enum proto_errcode */
	struct proto_str message;   /* for operators; never request text */
};

/* ---- STATS ---------------------------------------------------------- */
#define PROTO_HIST_BUCKETS 16 /* bounds documented in docs/protocol.md */

/*
 * Upper bounds (inclusive, ns) of the STATS histogram buckets, the same for
 * TTFT and inter-token latency: 1-2-5 steps from 1 ms to 30 s, and the last
 * bucket is INT64_MAX (+Inf).  Bucket i counts the observations <= bound i
 * since the worker started, so counts never decrease along i and the last
 * one is the total (Prometheus "le" buckets).
 */
extern const int64_t proto_hist_bounds_ns[PROTO_HIST_BUCKETS];

struct proto_stats {
	uint32_t queue_depth;
	uint32_t running;
	uint32_t step_batch;        /* sequences in the last step */
	uint32_t kv_blocks_used;
	uint32_t kv_blocks_free;
	uint32_t kv_blocks_cached;  /* unreferenced but kept for the prefix cache */
	uint64_t prefix_hit_tokens; /* cumulative */
	uint64_t prompt_tokens;     /* cumulative */
	uint64_t gen_tokens;        /* cumulative */
	float prefill_tps;          /* last interval */
	float decode_tps;           /* last interval */
	uint64_t device_mem_used;   /* bytes */
	uint64_t device_mem_total;  /* bytes */
	uint8_t draining;
	uint32_t n_hist;            /* PROTO_HIST_BUCKETS in version 1 */
	uint64_t ttft_hist[PROTO_HIST_BUCKETS]; /* cumulative counts */
	uint64_t itl_hist[PROTO_HIST_BUCKETS];
};

/* ---- PING / PONG / DRAIN ------------------------------------------- */
struct proto_ping {
	uint64_t nonce;
};

struct proto_pong {
	uint64_t nonce;
	uint8_t ok;                 /* 1: a real generation produced a token */
	uint32_t tokens;
	int64_t gen_ns;
};

struct proto_drain {
	uint32_t timeout_ms;        /* 0 = wait for running requests */
};

/* ---- one decoded (or to-be-encoded) message ------------------------ */
struct proto_msg {
	uint16_t type;              /* enum proto_type */
	uint32_t flags;
	uint64_t request_id;
	union {
		struct proto_hello hello;
		struct proto_submit submit;
		struct proto_embed embed;
		struct proto_embedding embedding;
		struct proto_cancel cancel;
		struct proto_tokens tokens;
		struct proto_done done;
		struct proto_errmsg error;
		struct proto_stats stats;
		struct proto_ping ping;
		struct proto_pong pong;
		struct proto_drain drain;
	} u;
};

/*
 * Appends one frame for `msg` to `out`.  Fails with CM_ELIMIT when the
 * frame's payload would exceed `max_frame` or the frame the buffer's cap
 * (out is left as it was), CM_EINVAL when a field is invalid (a str that is
 * not UTF-8, a count over its limit, any value the decoder would refuse).
 */
enum cm_status proto_encode(struct cm_buf *out, const struct proto_msg *msg,
			    uint32_t max_frame) CM_WUR;

/* ---- incremental decoder -------------------------------------------- */
struct proto_decoder;

/* max_frame: largest accepted payload, <= CM_LIM_PROTO_FRAME_BYTES_HARD. */
struct proto_decoder *proto_decoder_new(uint32_t max_frame);
void proto_decoder_free(struct proto_decoder *d);

/* Buffers bytes read from the socket, in pieces of any size. */
enum cm_status proto_decoder_feed(struct proto_decoder *d, const void *data,
				  size_t len) CM_WUR;

/*
 * Decodes the next complete frame: CM_OK with *msg filled, CM_AGAIN when
 * more bytes are needed, CM_EPROTO on malformed input (then
 * proto_decoder_error() says which; the decoder stays failed and the
 * connection must be closed), CM_ENOMEM.
 */
enum cm_status proto_decoder_next(struct proto_decoder *d,
				  struct proto_msg *msg) CM_WUR;
enum proto_error proto_decoder_error(const struct proto_decoder *d);

/*
 * Decodes exactly one frame from a complete buffer (header + payload).
 * `scratch` backs the borrowed arrays (it is reset first); the message
 * borrows from `frame` and `scratch`.  Used by the decoder and by tests.
 * CM_OK, CM_EPROTO with *err set (err may be NULL), CM_ENOMEM, CM_ELIMIT
 * when `scratch`'s cap is too small for the arrays.
 */
enum cm_status proto_decode_frame(const uint8_t *frame, size_t len,
				  uint32_t max_frame, struct proto_msg *msg,
				  struct cm_buf *scratch, enum proto_error *err) CM_WUR;

#endif
