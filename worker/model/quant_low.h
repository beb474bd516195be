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
void wk_dequant_iq4_xs(const uint8_t *b, float *y);

#endif
