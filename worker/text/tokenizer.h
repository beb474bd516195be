/*
 * tokenizer.h - text <-> token ids for the model families Sluice serves.
 *
 * Three algorithms, chosen by tokenizer.ggml.model:
 *  - "llama": SentencePiece-style BPE over token scores (spaces become
 *    U+2581 "▁", a dummy "▁" is prepended, highest-score adjacent pairs are
 *    merged, characters without a token fall back to <0xNN> byte tokens);
 *  - "gpt2": byte-level BPE: a pre-tokenizer chosen by tokenizer.ggml.pre
 *    splits the text into words, each word's bytes are mapped to printable
 *    code points (the GPT-2 byte-to-unicode table) and merged by the rank
 *    of tokenizer.ggml.merges;
 *  - "bert": WordPiece (BERT's uncased basic tokenizer: accents dropped,
 *    lowercase, punctuation split, then the longest "▁word" / continuation
 *    pieces; [CLS] and [SEP] around).
 * docs/tokenizers.md describes the algorithms and the policies below.
 *
 * Special tokens: CONTROL tokens (and UNKNOWN) are recognised in the text
 * ONLY with WK_TOK_PARSE_SPECIAL (template text).  User content is encoded
 * without it: a user typing "<|eot_id|>" gets those characters.  Like the
 * reference tokenizers, USER_DEFINED tokens (added vocabulary such as runs
 * of spaces) are always matched as whole strings, except those that end
 * generation (wk_tok_is_eog), which are treated as control tokens.
 *
 * Invalid UTF-8 input is not an error: every byte that does not start a
 * valid sequence is replaced by U+FFFD before encoding.
 *
 * Ownership and threads: struct wk_tok copies everything it needs from the
 * GGUF (which may be closed afterwards) and is read-only after
 * construction: share it between threads freely.  struct wk_detok is per
 * sequence (one thread at a time).
 */
#ifndef SLUICE_WORKER_TEXT_TOKENIZER_H
#define SLUICE_WORKER_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/status.h"

struct wk_gguf;
struct wk_tok;

/* Token types as stored in tokenizer.ggml.token_type. */
enum wk_tok_type {
	WK_TOK_T_NORMAL = 1,
	WK_TOK_T_UNKNOWN = 2,
	WK_TOK_T_CONTROL = 3,
	WK_TOK_T_USER_DEFINED = 4,
	WK_TOK_T_UNUSED = 5,
	WK_TOK_T_BYTE = 6,
};

/* Hard caps checked at load. */
#define WK_TOK_MAX_VOCAB (1u << 20)          /* tokens */
#define WK_TOK_MAX_TOKEN_BYTES 4096u         /* bytes of one token text */
#define WK_TOK_MAX_MERGES (4u << 20)         /* merge rules */
#define WK_TOK_MAX_TEXT_BYTES (64u << 20)    /* all token texts together */

/*
 * In-memory vocabulary description (tests, fuzzers, and the GGUF loader
 * itself).  Strings need not be NUL-terminated when the matching length
 * array is given.  Nothing is retained after the constructor returns.
 */
struct wk_tok_vocab {
	const char *model;          /* "llama", "gpt2" or "bert" */
	const char *pre;            /* tokenizer.ggml.pre; NULL = "default" */
	const char *name;           /* general.name; NULL when absent */
	size_t n_tokens;
	const char *const *tokens;
	const size_t *token_lens;   /* NULL: strlen */
	const float *scores;        /* NULL: all 0 (needed for "llama") */
	const int32_t *types;       /* NULL: all NORMAL */
	size_t n_merges;
	const char *const *merges;  /* "left right" */
	const size_t *merge_lens;   /* NULL: strlen */
	/* special ids, -1 when absent */
	int64_t bos, eos, eot, eom, unk, pad;
	/* -1: the family default (llama.cpp's); 0 or 1: as given */
	int add_bos, add_eos, add_space_prefix;
};

/* Fills v with "absent" for every optional field. */
void wk_tok_vocab_init(struct wk_tok_vocab *v);

/*
 * Builds a tokenizer from `v`, validating it: ids in range, byte tokens
 * "<0xNN>" well-formed, sizes within the caps, a known model and
 * pre-tokenizer.  Merges whose halves are not tokens are ignored and
 * counted (wk_tok_n_ignored_merges).  Errors are written to err.
 */
enum cm_status wk_tok_new_from_vocab(const struct wk_tok_vocab *v, struct wk_tok **out,
				     char *err, size_t err_len) CM_WUR;
/* Same from the tokenizer.ggml.* keys of a GGUF; `g` may be closed afterwards. */
enum cm_status wk_tok_new_from_gguf(const struct wk_gguf *g, struct wk_tok **out,
				    char *err, size_t err_len) CM_WUR;
void wk_tok_free(struct wk_tok *tok);

/* ---- encoding ---- */
enum wk_tok_flags {
	/* add BOS where the model's metadata asks for it (add_bos_token) */
	WK_TOK_ADD_BOS = 1u << 0,
	/* recognise CONTROL/UNKNOWN tokens written in the text */
	WK_TOK_PARSE_SPECIAL = 1u << 1,
	/* SPM only: do not prepend the dummy "▁" (continuation segments) */
	WK_TOK_NO_DUMMY_PREFIX = 1u << 2,
	/* add EOS where the model's metadata asks for it (add_eos_token) */
	WK_TOK_ADD_EOS = 1u << 3,
};

/*
 * Encodes text[0..len) into out[0..cap).  *n_out is the number of ids the
 * text needs; when it exceeds cap, out holds the first cap of them and the
 * call returns CM_ELIMIT.  CM_ENOMEM on allocation failure.
 */
enum cm_status wk_tok_encode(const struct wk_tok *tok, const char *text, size_t len,
			     unsigned flags, int32_t *out, size_t cap, size_t *n_out) CM_WUR;

/*
 * Byte-level BPE only (tests and tools): the pre-tokenizer's word
 * boundaries for valid UTF-8 text: ends[i] is the byte offset where word i
 * ends.  CM_ELIMIT when more than cap words, CM_EINVAL for SPM.
 */
enum cm_status wk_tok_pre_split(const struct wk_tok *tok, const char *text, size_t len,
				size_t *ends, size_t cap, size_t *n_words) CM_WUR;

/*
 * A text made of segments, for chat prompts: special tokens are recognised
 * only inside segments with parse_special set (template text), and only
 * when the whole token lies in such segments; user content segments are
 * plain text.  The segments are otherwise tokenized as ONE text (pieces
 * merge across segment boundaries, the SPM dummy prefix goes only at the
 * start and after special tokens), exactly as the whole string would be.
 */
struct wk_tok_seg {
	const char *text;
	size_t len;
	int parse_special;
};

/* As wk_tok_encode over the concatenated segments; WK_TOK_PARSE_SPECIAL is ignored. */
enum cm_status wk_tok_encode_segments(const struct wk_tok *tok, const struct wk_tok_seg *segs,
				      size_t n_segs, unsigned flags, int32_t *out, size_t cap,
				      size_t *n_out) CM_WUR;

/* ---- vocabulary ---- */
size_t wk_tok_n_vocab(const struct wk_tok *tok);
int32_t wk_tok_bos(const struct wk_tok *tok); /* -1 when none */
int32_t wk_tok_eos(const struct wk_tok *tok);
int32_t wk_tok_eot(const struct wk_tok *tok);
int wk_tok_add_bos(const struct wk_tok *tok); /* 1 when the model wants BOS */
/* 1 for ids that end generation: eos, eot, eom, <|im_end|>, <|end|> ... */
int wk_tok_is_eog(const struct wk_tok *tok, int32_t id);
int wk_tok_is_control(const struct wk_tok *tok, int32_t id);
enum wk_tok_type wk_tok_type(const struct wk_tok *tok, int32_t id);
/* Merges dropped at load because a half is not a token. */
size_t wk_tok_n_ignored_merges(const struct wk_tok *tok);
/* "spm" or "bpe", and the pre-tokenizer name in use. */
const char *wk_tok_model_name(const struct wk_tok *tok);
const char *wk_tok_pre_name(const struct wk_tok *tok);

/*
 * The bytes a token stands for: byte tokens give their byte, "▁" becomes a
 * space, byte-level BPE text is mapped back to bytes; CONTROL tokens give
 * their literal text (the detokenizer drops them).  NULL for an id out of
 * range.  Not NUL-terminated; valid while tok lives.
 */
const char *wk_tok_piece(const struct wk_tok *tok, int32_t id, size_t *len);
/* Exact id of the token whose text is `text` (any type), or -1. */
int32_t wk_tok_lookup(const struct wk_tok *tok, const char *text);

/* ---- streaming detokenizer ---- */
enum wk_detok_flags {
	/*
	 * Strip one leading space from the first text piece when the model
	 * adds a dummy prefix (SPM): use when decoding a sequence encoded
	 * from the start of a text (round trips).  Leave it off for
	 * completions, whose first piece legitimately starts with a space.
	 */
	WK_DETOK_STRIP_DUMMY_PREFIX = 1u << 0,
};

struct wk_detok {
	const struct wk_tok *tok;
	uint8_t pend[4];  /* an incomplete UTF-8 sequence carried over */
	uint8_t n_pend;
	uint8_t need;     /* total length of the pending sequence */
	uint8_t strip;    /* leading-space strip still to do */
};

void wk_detok_init(struct wk_detok *d, const struct wk_tok *tok, unsigned flags);
/*
 * Appends to `out` the text that token `id` completes: only whole UTF-8
 * characters; a character split across tokens is held back until its last
 * byte arrives.  Invalid sequences become U+FFFD, so `out` only ever
 * receives valid UTF-8.  Control tokens produce nothing.  CM_EINVAL for an
 * id out of range, CM_ELIMIT/CM_ENOMEM from the buffer.
 */
enum cm_status wk_detok_push(struct wk_detok *d, int32_t id, struct cm_buf *out) CM_WUR;
/* End of sequence: a held-back incomplete character becomes U+FFFD. */
enum cm_status wk_detok_flush(struct wk_detok *d, struct cm_buf *out) CM_WUR;

#endif
