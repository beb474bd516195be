/*
 * internal.h - the tokenizer's vocabulary (struct wk_tok) as the files of
 * the tokenizer share it: vocab.c builds it (vocab_gguf.c from a GGUF
 * file), encode.c turns text into ids, detok.c ids into text.  Nothing
 * outside worker/text/ includes it.
 *
 * Built once and read-only afterwards; encode allocates its scratch per
 * call, so one struct wk_tok serves any number of threads.
 */
#ifndef SLUICE_WORKER_TEXT_INTERNAL_H
#define SLUICE_WORKER_TEXT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "worker/text/pretok.h"
#include "worker/text/tokenizer.h"

#define TOK_A_EOG 0x01u
#define TOK_A_RSTRIP 0x02u
#define TOK_A_LSTRIP 0x04u

#define TOK_MAX_INPUT_BYTES (64u << 20)


struct tok_merge {
	uint32_t left, right; /* token ids */
	uint32_t rank1;       /* rank + 1; 0 = empty slot */
};

struct wk_tok {
	int is_bpe;
	int is_wpm;          /* WordPiece (tokenizer.ggml.model "bert") */
	uint32_t max_token_len; /* bytes of the longest token text (WordPiece's window) */
	const struct wk_tok_pre *pre;
	uint32_t n_vocab;
	char *text;          /* token texts back to back */
	uint32_t *text_off;  /* [n_vocab + 1] */
	char *piece;         /* decoded pieces back to back */
	uint32_t *piece_off; /* [n_vocab + 1] */
	float *scores;       /* [n_vocab] */
	uint8_t *types;      /* [n_vocab] enum wk_tok_type */
	uint8_t *attrs;      /* [n_vocab] TOK_A_* */
	uint32_t *map;       /* text hash -> id + 1; 0 empty */
	uint32_t map_mask;
	struct tok_merge *merges;
	uint32_t merge_mask;
	size_t n_ignored_merges;
	int32_t byte_tok[256]; /* <0xNN> token of each byte, -1 */
	int32_t *specials;     /* tokens matched as whole strings, longest first */
	size_t n_specials;
	int32_t bos, eos, eot, eom, unk, pad;
	int add_bos, add_eos, add_space_prefix;
};

/* The text of token `id` (not NUL-terminated) and its length. */
static inline const char *wk_tok_text(const struct wk_tok *t, uint32_t id, size_t *len)
{
	*len = t->text_off[id + 1] - t->text_off[id];
	return t->text + t->text_off[id];
}

/* The id of the token whose text is exactly s[0..n), -1 when none. */
int32_t wk_tok_find_exact(const struct wk_tok *t, const char *s, size_t n);
/* The same for the text of a normal token as the pre-tokenizer sees it. */
int32_t wk_tok_find_text(const struct wk_tok *t, const char *s, size_t n);
/* The rank of merging tokens l and r (BPE), -1 when they do not merge. */
int64_t wk_tok_merge_rank(const struct wk_tok *t, int32_t l, int32_t r);
/* The code point byte-level BPE writes for byte b. */
uint32_t wk_tok_bpe_byte_cp(uint8_t b);

#endif
