/*
 * synth_vocab.h - the generated vocabulary and the chat templates of
 * `sluice-model synth` (synth_vocab.c), for model_synth.c.
 */
#ifndef SLUICE_TOOLS_SYNTH_VOCAB_H
#define SLUICE_TOOLS_SYNTH_VOCAB_H

#include <stddef.h>
#include <stdint.h>

struct template_def {
	const char *name;
	const char *text;          /* NULL: no tokenizer.chat_template */
	const char *const *controls; /* control tokens the template needs */
	const char *eot;           /* end-of-turn token or NULL */
	int bos_is_first_control;  /* bos = controls[0] (llama3) */
	const char *const *added;  /* added (user-defined) tokens, NULL: none */
};

/* The template called `name` (NULL: the default, chatml); NULL when unknown. */
const struct template_def *synth_template(const char *name);

struct vocab {
	uint32_t n, cap;
	char **tok;
	size_t *len;
	float *score;
	int32_t *type;
	uint32_t *set;    /* open addressing: index + 1 */
	uint32_t set_mask;
};

/* FNV-style hash of n bytes (tensor seeds, the vocabulary's set). */
uint64_t hash_bytes(const char *s, size_t n);
/*
 * n_vocab pieces: <unk> <s> </s>, the 256 byte tokens, word pieces (scores
 * descending), then td's control (and added) tokens at the end, as real
 * models have them; *bos, *eos, *eot (-1 when none) their ids.  0, or -1
 * when out of memory.
 */
int build_vocab(struct vocab *v, uint32_t n_vocab, const struct template_def *td,
		uint32_t *bos, uint32_t *eos, int64_t *eot);
/*
 * A WordPiece vocabulary (BERT's layout as llama.cpp's converter writes
 * it): [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0..4), then the same pieces as
 * build_vocab, word-initial ones with "\u2581", continuations bare.  0, or
 * -1 when out of memory.
 */
int build_vocab_wpm(struct vocab *v, uint32_t n_vocab);
void vocab_deinit(struct vocab *v);

#endif
