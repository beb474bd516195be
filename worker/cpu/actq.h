/*
 * actq.h - activation quantisers, included by every kernel build so that
 * each ISA file gets its own (auto-vectorised) copy.  The arithmetic is the
 * same in all copies: max |x| by integer compare of the bit patterns,
 * d = amax / 127, q = round-to-nearest-even(x * (127 / amax)) through the
 * 1.5 * 2^23 trick, so the result is deterministic per row whatever the
 * batch.  Layouts are described in internal.h.
 */
#ifndef SLUICE_WORKER_CPU_ACTQ_H
#define SLUICE_WORKER_CPU_ACTQ_H

#include <string.h>

#include "worker/cpu/internal.h"

static inline float wk_actq_amax(const float *x, int n)
{
	uint32_t m = 0;
	for (int i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &x[i], 4);
		u &= 0x7fffffffu;
		m = u > m ? u : m;
	}
	float f;
	memcpy(&f, &m, 4);
	return f;
}

/* Quantises n values with multiplier id into q; returns the sum of q. */
static inline int wk_actq_block(const float *x, float id, int8_t *q, int n)
{
	int sum = 0;
	for (int i = 0; i < n; i++) {
		float v = x[i] * id + 12582912.0f; /* 1.5 * 2^23: rounds to int */
		int32_t b;
		memcpy(&b, &v, 4);
		int qi = b - 0x4B400000;
		/* a NaN or infinite activation (a broken model) must not
		 * overflow the sum (issue 13, finding 16): what is not in
		 * [-127, 127] here was not a finite x */
		qi = qi > 127 ? 127 : qi < -127 ? -127 : qi;
		q[i] = (int8_t)qi;
		sum += qi;
	}
	return sum;
}

static void wk_actq_q8_32(const float *x, uint8_t *dst, int cols)
{
	int nb = cols / 32;
	int8_t *qs = (int8_t *)dst;
	float *d = (float *)(dst + cols);
	int32_t *s = (int32_t *)(dst + cols + 4 * (size_t)nb);
	for (int b = 0; b < nb; b++) {
		float amax = wk_actq_amax(x + 32 * b, 32);
		float id = amax > 0 ? 127.0f / amax : 0.0f;
		d[b] = amax / 127.0f;
		s[b] = wk_actq_block(x + 32 * b, id, qs + 32 * b, 32);
	}
}

static void wk_actq_q8_256(const float *x, uint8_t *dst, int cols)
{
	int nb = cols / 256;
	int8_t *qs = (int8_t *)dst;
	float *d = (float *)(dst + cols);
	int16_t *bs = (int16_t *)(dst + cols + 4 * (size_t)nb);
	for (int b = 0; b < nb; b++) {
		float amax = wk_actq_amax(x + 256 * b, 256);
		float id = amax > 0 ? 127.0f / amax : 0.0f;
		d[b] = amax / 127.0f;
		for (int k = 0; k < 16; k++)
			bs[16 * b + k] = (int16_t)wk_actq_block(x + 256 * b + 16 * k, id,
								qs + 256 * b + 16 * k, 16);
	}
}

#endif
