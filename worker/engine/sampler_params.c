/*
 * sampler_params.c - the sampling parameters: Ollama's defaults and the
 * domain of each (see sampler.h); split from sampler.c, which samples.
 */
#include "worker/engine/sampler.h"

#include <math.h>
#include <string.h>

#include "common/status.h"

void wk_sampler_params_default(struct wk_sampler_params *p)
{
	memset(p, 0, sizeof(*p));
	p->temperature = 0.8f;
	p->top_k = 40;
	p->top_p = 0.9f;
	p->min_p = 0.0f;
	p->repeat_penalty = 1.1f;
	p->repeat_last_n = 64;
	p->presence_penalty = 0.0f;
	p->frequency_penalty = 0.0f;
	p->has_seed = false;
}

enum cm_status wk_sampler_params_validate(const struct wk_sampler_params *p,
					  uint32_t n_vocab, char *err,
					  size_t err_len)
{
	if (n_vocab == 0)
		return cm_fail(err, err_len, CM_EINVAL,
			    "n_vocab: expected at least 1 token, found 0");
	if (!isfinite(p->temperature) || p->temperature < 0.0f ||
	    p->temperature > WK_SAMPLER_TEMPERATURE_MAX)
		return cm_fail(err, err_len, CM_EINVAL,
			    "temperature: expected a value in [0, %g], found %g",
			    (double)WK_SAMPLER_TEMPERATURE_MAX,
			    (double)p->temperature);
	if (p->top_k > n_vocab)
		return cm_fail(err, err_len, CM_EINVAL,
			    "top_k: expected 0 (off) to the vocabulary size %u, found %u",
			    n_vocab, p->top_k);
	if (!isfinite(p->top_p) || !(p->top_p > 0.0f) || p->top_p > 1.0f)
		return cm_fail(err, err_len, CM_EINVAL,
			    "top_p: expected a value in (0, 1], found %g",
			    (double)p->top_p);
	if (!isfinite(p->min_p) || p->min_p < 0.0f || p->min_p > 1.0f)
		return cm_fail(err, err_len, CM_EINVAL,
			    "min_p: expected a value in [0, 1], found %g",
			    (double)p->min_p);
	if (!isfinite(p->repeat_penalty) || !(p->repeat_penalty > 0.0f) ||
	    p->repeat_penalty > WK_SAMPLER_REPEAT_PENALTY_MAX)
		return cm_fail(err, err_len, CM_EINVAL,
			    "repeat_penalty: expected a value in (0, %g], found %g",
			    (double)WK_SAMPLER_REPEAT_PENALTY_MAX,
			    (double)p->repeat_penalty);
	if (p->repeat_last_n > WK_SAMPLER_REPEAT_LAST_N_MAX)
		return cm_fail(err, err_len, CM_EINVAL,
			    "repeat_last_n: expected 0 to %u tokens, found %u",
			    WK_SAMPLER_REPEAT_LAST_N_MAX, p->repeat_last_n);
	if (!isfinite(p->presence_penalty) ||
	    fabsf(p->presence_penalty) > WK_SAMPLER_PENALTY_ABS_MAX)
		return cm_fail(err, err_len, CM_EINVAL,
			    "presence_penalty: expected a value in [-%g, %g], found %g",
			    (double)WK_SAMPLER_PENALTY_ABS_MAX,
			    (double)WK_SAMPLER_PENALTY_ABS_MAX,
			    (double)p->presence_penalty);
	if (!isfinite(p->frequency_penalty) ||
	    fabsf(p->frequency_penalty) > WK_SAMPLER_PENALTY_ABS_MAX)
		return cm_fail(err, err_len, CM_EINVAL,
			    "frequency_penalty: expected a value in [-%g, %g], found %g",
			    (double)WK_SAMPLER_PENALTY_ABS_MAX,
			    (double)WK_SAMPLER_PENALTY_ABS_MAX,
			    (double)p->frequency_penalty);
	return CM_OK;
}

