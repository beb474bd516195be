/*
 * sampler.h - per-sequence token sampling: penalties, top-k, top-p, min-p,
 * temperature and a seeded, portable random draw.
 *
 * Owns: the sampling parameters of one sequence, its penalty window (ring of
 * the last repeat_last_n accepted tokens) and its random generator
 * (xoshiro256**, seeded through splitmix64).  The large per-vocabulary scratch
 * arrays live in a separate workspace (struct wk_sampler_ws) so that a
 * worker thread sampling many sequences one after another keeps one set of
 * them, not one per sequence.
 *
 * Thread: a sampler and a workspace are each used by one thread at a time;
 * nothing is shared between samplers.
 *
 * Semantics (llama.cpp / Ollama options; docs/sampling.md has the details):
 *   1. penalties over the window: for each distinct token t seen c > 0 times
 *      in the last repeat_last_n accepted tokens,
 *        l = l > 0 ? l / repeat_penalty : l * repeat_penalty
 *        l = l - c * frequency_penalty - presence_penalty
 *   2. temperature == 0: greedy argmax of the penalised logits, ties to the
 *      lowest token id.  Otherwise:
 *   3. top_k (0 = off): keep the k best by (logit desc, id asc);
 *   4. top_p (1 = off): keep the shortest best-first prefix whose
 *      probability (softmax at temperature 1 over what is left) reaches top_p;
 *   5. min_p (0 = off): keep tokens with p >= min_p * p_max;
 *   6. temperature: softmax of logit / temperature over the survivors;
 *   7. draw: u = next53() * 2^-53 in [0, 1); walk the survivors in ascending
 *      token id accumulating (in double) until the sum exceeds u * total.
 *
 * Determinism: the chosen token depends only on the logits, the
 * parameters, the accepted tokens and the seed.  Every operation on the
 * path to it is an IEEE-754 basic operation (float penalty arithmetic,
 * double subtraction / division / multiplication / addition, floor, ldexp)
 * in a fixed order; exp() is our own polynomial built from those operations
 * (not libm) and the file is compiled with -ffp-contract=off, so the same
 * inputs give the same token on any IEEE-754 machine.  The reported logprob
 * uses libm's log() and may differ in the last bits between C libraries.
 */
#ifndef SLUICE_WORKER_ENGINE_SAMPLER_H
#define SLUICE_WORKER_ENGINE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* Largest accepted repeat_last_n (tokens): the prompt and output caps. */
#define WK_SAMPLER_REPEAT_LAST_N_MAX 65536u
/* Bounds of the float parameters (inclusive unless noted). */
#define WK_SAMPLER_TEMPERATURE_MAX 100.0f
#define WK_SAMPLER_REPEAT_PENALTY_MAX 100.0f /* and > 0 */
#define WK_SAMPLER_PENALTY_ABS_MAX 100.0f    /* |presence|, |frequency| */

struct wk_sampler_params {
	float temperature;        /* [0, 100]; 0 = greedy */
	uint32_t top_k;           /* 0 = off; <= vocabulary size */
	float top_p;              /* (0, 1]; 1 = off */
	float min_p;              /* [0, 1]; 0 = off */
	float repeat_penalty;     /* (0, 100]; 1 = off */
	uint32_t repeat_last_n;   /* penalty window in tokens; 0 = no penalties */
	float presence_penalty;   /* [-100, 100]; 0 = off */
	float frequency_penalty;  /* [-100, 100]; 0 = off */
	uint64_t seed;            /* used when has_seed */
	bool has_seed;            /* false: seeded from cm_random_bytes */
	bool no_logprob;          /* nobody reads wk_sample.logprob: it is 0 and its pass
				   * over the vocabulary (the log partition) is skipped;
				   * the draw is the same */
};

/* Ollama's defaults: temperature 0.8, top_k 40, top_p 0.9, min_p 0,
 * repeat_penalty 1.1, repeat_last_n 64, no presence/frequency penalty, no
 * seed. */
void wk_sampler_params_default(struct wk_sampler_params *p);

/*
 * Checks every parameter against its domain for a vocabulary of n_vocab
 * tokens.  CM_EINVAL with a message naming the parameter, the expected range
 * and the value found ("top_p: expected a value in (0, 1], found 1.5") in
 * err (err_len bytes, may be 0).  NaN and infinities are refused everywhere.
 */
enum cm_status wk_sampler_params_validate(const struct wk_sampler_params *p,
					  uint32_t n_vocab, char *err,
					  size_t err_len) CM_WUR;

/* ---- workspace ------------------------------------------------------ */

/* Scratch for vocabularies of up to n_vocab tokens: about 24 bytes per
 * token (3 MiB for 128k).  One per sampling thread. */
struct wk_sampler_ws;

struct wk_sampler_ws *wk_sampler_ws_new(uint32_t n_vocab);
void wk_sampler_ws_free(struct wk_sampler_ws *ws);

/* ---- sampler -------------------------------------------------------- */

struct wk_sampler;

/*
 * Validates `p` (as wk_sampler_params_validate) and creates the state of one
 * sequence.  Without p->has_seed the seed is drawn from cm_random_bytes
 * (wk_sampler_seed tells which, for logs and replays).
 * CM_EINVAL (message in err), CM_ENOMEM, CM_EIO (no randomness).
 */
enum cm_status wk_sampler_new(const struct wk_sampler_params *p,
			      uint32_t n_vocab, struct wk_sampler **out,
			      char *err, size_t err_len) CM_WUR;
/* NULL is a no-op. */
void wk_sampler_free(struct wk_sampler *s);

/* The seed in use (given or drawn). */
uint64_t wk_sampler_seed(const struct wk_sampler *s);

/*
 * Records a token in the penalty window.  The worker accepts the prompt
 * tokens (as llama.cpp's server does) and then every sampled token.
 * CM_EINVAL when token >= n_vocab.
 */
enum cm_status wk_sampler_accept(struct wk_sampler *s, uint32_t token) CM_WUR;

/* Forgets the penalty window (the generator state is kept). */
void wk_sampler_reset_window(struct wk_sampler *s);

struct wk_sample {
	uint32_t token;
	/*
	 * Natural log of the token's probability under the *unfiltered*
	 * distribution softmax(penalised logits / temperature) over the whole
	 * vocabulary (temperature 1 when greedy): what the model thought of the
	 * token before top-k/top-p/min-p cut the tail.
	 */
	float logprob;
};

/*
 * Samples one token from logits[0..n_vocab) (not modified; NaN counts as
 * -inf).  Does not accept the token: call wk_sampler_accept with it.
 * CM_EINVAL when n_vocab differs from the sampler's, when the workspace is
 * smaller, or when every logit is -inf / NaN.
 */
enum cm_status wk_sampler_sample(struct wk_sampler *s,
				 struct wk_sampler_ws *ws,
				 const float *logits, uint32_t n_vocab,
				 struct wk_sample *out) CM_WUR;

/*
 * As wk_sampler_sample, with the tokens whose bit is clear in `allow`
 * (bit i & 31 of word i >> 5; NULL: every token) removed before anything
 * else (penalties, top-k ...): the draw and its logprob are those of the
 * masked distribution.  CM_EINVAL as above, also when nothing is allowed.
 */
enum cm_status wk_sampler_sample_masked(struct wk_sampler *s, struct wk_sampler_ws *ws,
					const float *logits, uint32_t n_vocab,
					const uint32_t *allow, struct wk_sample *out) CM_WUR;

/*
 * The k (<= ids' room) most likely tokens of the distribution the last
 * sample drew from (same workspace, nothing sampled in between): best
 * first by (logit, then lower id), with their logprobs as
 * wk_sample.logprob defines them; tokens the mask removed are never
 * among them.  *n_out may be below k when fewer tokens are possible.
 */
enum cm_status wk_sampler_top(const struct wk_sampler *s, const struct wk_sampler_ws *ws,
			      uint32_t k, uint32_t *ids, float *lps, uint32_t *n_out) CM_WUR;

/* The portable exp() used for every probability (exported for tests). */
double wk_sampler_exp(double x);

#endif
