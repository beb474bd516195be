/*
 * quant_low.h - one 256-value block of Q2_K, Q3_K or IQ4_XS (layouts in
 * quant.h): reference quantise and dequantise, for quant.c's row
 * functions.  Nothing outside worker/model/ includes it.
 */
#ifndef SLUICE_WORKER_MODEL_QUANT_LOW_H
#define SLUICE_WORKER_MODEL_QUANT_LOW_H

#include <stdint.h>

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
