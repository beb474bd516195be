/*
 * quant_low.h - one 256-value block of Q2_K, Q3_K or IQ4_XS (layouts in
 * quant.h): reference quantise and dequantise, for quant.c's row
 * functions, and the block-packing helpers both files use.  Nothing
 * outside worker/model/ includes it.
 */
#ifndef SLUICE_WORKER_MODEL_QUANT_LOW_H
#define SLUICE_WORKER_MODEL_QUANT_LOW_H

#include <math.h>
#include <stdint.h>

#include "worker/model/quant.h"

/* Block-packing helpers of quant.c and quant_low.c: a little-endian half
 * at p, round to nearest (ties to even), clamp to [lo, hi]. */
static inline void wk_put_f16(uint8_t *p, float f)
{
	uint16_t h = wk_f32_to_f16(f);

	p[0] = (uint8_t)h;
	p[1] = (uint8_t)(h >> 8);
}

static inline float wk_get_f16(const uint8_t *p)
{
	return wk_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

static inline int wk_nearest(float x)
{
	return (int)lrintf(x);
}

static inline int wk_clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

void wk_quant_q2_k(const float *x, uint8_t *b);
void wk_dequant_q2_k(const uint8_t *b, float *y);
void wk_quant_q3_k(const float *x, uint8_t *b);
void wk_dequant_q3_k(const uint8_t *b, float *y);
void wk_quant_iq4_xs(const float *x, uint8_t *b);

/* IQ4_NL's quantiser, shared with IQ4_XS (quant.c): the index of the level
 * nearest v, and for 32 values their level indices (largest magnitude at
 * -127) and the scale refitted by least squares weighted by x^2 (0 for
 * all-zero values). */
int wk_iq4nl_nearest(float v);
float wk_iq4nl_fit(const float *x, int *l);
void wk_dequant_iq4_xs(const uint8_t *b, float *y);

#endif
