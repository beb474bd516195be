/*
 * pretok.h - pre-tokenizers of the byte-level BPE families, shared
 * by worker/text/encode.c and worker/text/pretok.c only (internal).
 *
 * A pre-tokenizer is a list of patterns, each a hand-written matcher that
 * gives the same matches as one reference regex (see docs/tokenizers.md).
 * Constant tables and pure functions: thread-safe.
 */
#ifndef SLUICE_WORKER_TEXT_PRETOK_H
#define SLUICE_WORKER_TEXT_PRETOK_H

#include <stddef.h>
#include <stdint.h>

enum wk_tok_pat {
	WK_TOK_PAT_GPT2,          /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
	WK_TOK_PAT_LLAMA3,        /* (?i:'s..'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
	WK_TOK_PAT_QWEN2,         /* the same with \p{N} */
	WK_TOK_PAT_NEWLINE,       /* [\r\n] */
	WK_TOK_PAT_DSL_LETTERS,   /* \s?[A-Za-zµÀ-Ö...]+ (deepseek-llm cased letters) */
	WK_TOK_PAT_DSL_PUNCT,     /* \s?[!-/:-~！-／：-～‘-‟　-。]+ */
	WK_TOK_PAT_WS_END,        /* \s+$ */
	WK_TOK_PAT_CJK,           /* [一-龥ࠀ-一가-퟿]+ */
	WK_TOK_PAT_NUMS,          /* \p{N}+ */
	WK_TOK_PAT_NUM1,          /* \p{N} */
	WK_TOK_PAT_DSC_LETTERS,   /* \s?\p{L}+ */
	WK_TOK_PAT_DSC_PUNCT,     /* \s?\p{P}+ */
	WK_TOK_PAT_FALCON_PUNCT,  /* [\p{P}\$\+<=>\^~\|`]+ */
	WK_TOK_PAT_DEFAULT_PUNCT, /* [\p{P}\$\+<=>\^~\|]+ */
	WK_TOK_PAT_DIGITS3,       /* [0-9][0-9][0-9] */
	WK_TOK_PAT_TEKKEN,        /* Mistral's tekken, as llama.cpp applies it: letters
				   * not a-z then letters not A-Z (see pretok.c) */
};

#define WK_TOK_PRE_MAX_PATS 6

struct wk_tok_pre {
	const char *name;       /* canonical name */
	const char *aliases[8]; /* tokenizer.ggml.pre values, NULL-terminated */
	uint8_t n_pats;
	uint8_t pats[WK_TOK_PRE_MAX_PATS];
	uint8_t ignore_merges;  /* a word that is a token is taken whole */
	uint8_t add_bos;        /* default of add_bos_token */
};

struct wk_tok_chunk {
	uint32_t start, len; /* in code points */
};

/* The pre-tokenizer named by a tokenizer.ggml.pre value, or NULL. */
const struct wk_tok_pre *wk_tok_pre_find(const char *name);
/* The "default" pre-tokenizer. */
const struct wk_tok_pre *wk_tok_pre_default(void);

/*
 * One regex pass over every chunk of the code points c, as a regex split
 * does: matches become chunks and so does the text between them.  out has
 * room for as many chunks as there are code points.  Returns the count.
 */
size_t wk_tok_pre_pass(enum wk_tok_pat p, const uint32_t *c, const struct wk_tok_chunk *in,
		       size_t n_in, struct wk_tok_chunk *out);

#endif
