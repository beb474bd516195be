/*
 * quant_low.c - the low-bit super-block types: reference quantise and
 * dequantise of one 256-value block of Q2_K, Q3_K and IQ4_XS (layouts in
 * quant.h), called by quant.c's row functions.
 *
 * Dequantisation is ggml's arithmetic, product for product (checked bit for
 * bit on blocks llama-quantize wrote, tests/worker/model/llamacpp/).  The
 * quantisers are our own: per sub-block a small search over the scale (and
 * for Q2_K the offset) by least squares, then the sub-block scales
 * quantised against the super-block scale, then every value re-rounded with
 * the scales it will be decoded with.  Pure functions, any thread.
 */
#include "worker/model/quant_low.h"

#include <math.h>
#include <string.h>

#include "worker/model/quant.h"

/* ==== Q2_K ================================================================ */

/*
 * One sub-block of n values as x ~ s * q - m, q in 0..qmax, s >= 0, m >= 0:
 * candidate inverse scales around qmax / (hi - lo); for each, the levels by
 * rounding, then s and m refitted by least squares (m clamped at 0, then s
 * alone); the pair of least squared error wins.
 */
static void fit_affine(const float *x, int n, int qmax, float *s_out, float *m_out)
{
	float lo = 0, hi = x[0], best = INFINITY;

	for (int i = 0; i < n; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	*s_out = 0;
	*m_out = -lo;
	if (hi <= lo)
		return;
	for (int step = -4; step <= 8; step++) {
		float is = ((float)qmax + 0.1f * (float)step) / (hi - lo);
		float sq = 0, sx = 0, sqq = 0, sqx = 0, s, m, err = 0;
		int q[32];

		if (is <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			q[i] = wk_clampi(wk_nearest((x[i] - lo) * is), 0, qmax);
			sq += (float)q[i];
			sx += x[i];
			sqq += (float)(q[i] * q[i]);
			sqx += (float)q[i] * x[i];
		}
		/* x = s q - m: normal equations of the two unknowns */
		float det = (float)n * sqq - sq * sq;
		if (det > 0) {
			s = ((float)n * sqx - sq * sx) / det;
			m = (sq * sqx - sqq * sx) / det;
		} else {
			s = 1.0f / is;
			m = -lo;
		}
		if (m < 0) {
			m = 0;
			s = sqq > 0 ? sqx / sqq : 0;
		}
		if (s < 0)
			s = 0;
		for (int i = 0; i < n; i++) {
			float e = s * (float)q[i] - m - x[i];

			err += e * e;
		}
		if (err < best) {
			best = err;
			*s_out = s;
			*m_out = m;
		}
	}
}

void wk_quant_q2_k(const float *x, uint8_t *b)
{
	float s[16], m[16], max_s = 0, max_m = 0;
	uint8_t *scales = b, *qs = b + 16;

	for (int j = 0; j < 16; j++) {
		fit_affine(x + 16 * j, 16, 3, &s[j], &m[j]);
		max_s = s[j] > max_s ? s[j] : max_s;
		max_m = m[j] > max_m ? m[j] : max_m;
	}
	wk_put_f16(b + 80, max_s / 15.0f);
	wk_put_f16(b + 82, max_m / 15.0f);
	float d = wk_get_f16(b + 80), dmin = wk_get_f16(b + 82);
	uint8_t L[256];

	for (int j = 0; j < 16; j++) {
		int sc = d > 0 ? wk_clampi(wk_nearest(s[j] / d), 0, 15) : 0;
		int mn = dmin > 0 ? wk_clampi(wk_nearest(m[j] / dmin), 0, 15) : 0;
		float dl = d * (float)sc, ml = dmin * (float)mn;
		float id = dl > 0 ? 1.0f / dl : 0;

		scales[j] = (uint8_t)(sc | (mn << 4));
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (uint8_t)wk_clampi(wk_nearest((x[16 * j + i] + ml) * id), 0, 3);
	}
	/* value 128h + 32k + l: bits 2k..2k+1 of qs[32h + l] */
	memset(qs, 0, 64);
	for (int h = 0; h < 2; h++)
		for (int k = 0; k < 4; k++)
			for (int l = 0; l < 32; l++)
				qs[32 * h + l] |= (uint8_t)(L[128 * h + 32 * k + l] << (2 * k));
}

void wk_dequant_q2_k(const uint8_t *b, float *y)
{
	const uint8_t *scales = b, *qs = b + 16;
	float d = wk_get_f16(b + 80), dmin = wk_get_f16(b + 82);

	for (int h = 0; h < 2; h++)
		for (int k = 0; k < 4; k++)
			for (int half = 0; half < 2; half++) {
				uint8_t sc = scales[8 * h + 2 * k + half];
				float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);

				for (int l = 0; l < 16; l++) {
					int q = (qs[32 * h + 16 * half + l] >> (2 * k)) & 3;

					y[128 * h + 32 * k + 16 * half + l] = dl * (float)q - ml;
				}
			}
}

/* ==== Q3_K ================================================================ */

/*
 * One sub-block of n values as x ~ s * q, q in -4..3: candidate scales
 * that put the value of largest magnitude at -4 or just inside, levels by
 * rounding, s refitted by least squares; least squared error wins.
 */
static float fit_symmetric(const float *x, int n, int qlo, int qhi)
{
	float amax = 0, vmax = 0, best = INFINITY, best_s = 0;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			vmax = x[i];
		}
	if (amax == 0)
		return 0;
	for (int step = 0; step <= 8; step++) {
		/* vmax at qlo (or at qlo + 1 / 2 ... as the step grows) */
		float is = ((float)qlo + 0.125f * (float)step) / vmax;
		float sqq = 0, sqx = 0, s, err = 0;
		int q[32];

		for (int i = 0; i < n; i++) {
			q[i] = wk_clampi(wk_nearest(x[i] * is), qlo, qhi);
			sqq += (float)(q[i] * q[i]);
			sqx += (float)q[i] * x[i];
		}
		s = sqq > 0 ? sqx / sqq : 0;
		for (int i = 0; i < n; i++) {
			float e = s * (float)q[i] - x[i];

			err += e * e;
		}
		if (err < best) {
			best = err;
			best_s = s;
		}
	}
	return best_s;
}

/* The 16 six-bit scales (0..63, offset 32) into 12 bytes, ggml's layout:
 * scale j has its low nibble in byte j (j < 8, low nibble) or j - 8 (high
 * nibble), and its top two bits at bit 2 * (j / 4) of byte 8 + j % 4. */
static void q3_pack_scales(uint8_t *s, const int *sc)
{
	memset(s, 0, 12);
	for (int j = 0; j < 16; j++) {
		int lo = sc[j] & 15, hi = (sc[j] >> 4) & 3;

		if (j < 8)
			s[j] |= (uint8_t)lo;
		else
			s[j - 8] |= (uint8_t)(lo << 4);
		s[8 + j % 4] |= (uint8_t)(hi << (2 * (j / 4)));
	}
}

void wk_quant_q3_k(const float *x, uint8_t *b)
{
	float s[16], big = 0;
	int sc[16];
	uint8_t *hmask = b, *qs = b + 32;

	for (int j = 0; j < 16; j++) {
		s[j] = fit_symmetric(x + 16 * j, 16, -4, 3);
		if (fabsf(s[j]) > fabsf(big))
			big = s[j];
	}
	/* the sub-block scale of largest magnitude maps to -32 */
	wk_put_f16(b + 108, big / -32.0f);
	float d = wk_get_f16(b + 108);
	float id = d != 0 ? 1.0f / d : 0;

	for (int j = 0; j < 16; j++)
		sc[j] = wk_clampi(wk_nearest(s[j] * id), -32, 31) + 32;
	q3_pack_scales(b + 96, sc);
	memset(hmask, 0, 32);
	memset(qs, 0, 64);
	for (int i = 0; i < 256; i++) {
		int h = i / 128, k = (i % 128) / 32, l = i % 32;
		float dl = d * (float)(sc[i / 16] - 32);
		int q = dl != 0 ? wk_clampi(wk_nearest(x[i] / dl), -4, 3) : 0;

		/* stored q + 4 in 0..7: low two bits in qs, the third in hmask */
		qs[32 * h + l] |= (uint8_t)(((q + 4) & 3) << (2 * k));
		hmask[l] |= (uint8_t)((((q + 4) >> 2) & 1) << (4 * h + k));
	}
}

void wk_dequant_q3_k(const uint8_t *b, float *y)
{
	const uint8_t *hmask = b, *qs = b + 32;
	float d = wk_get_f16(b + 108);

	for (int h = 0; h < 2; h++)
		for (int k = 0; k < 4; k++)
			for (int half = 0; half < 2; half++) {
				float dl = d * (float)wk_q3_k_scale(b + 96, 8 * h + 2 * k + half);

				for (int l = 16 * half; l < 16 * half + 16; l++) {
					int q = (qs[32 * h + l] >> (2 * k)) & 3;

					if (!((hmask[l] >> (4 * h + k)) & 1))
						q -= 4;
					y[128 * h + 32 * k + l] = dl * (float)q;
				}
			}
}

/* ==== IQ4_XS ============================================================== */

void wk_quant_iq4_xs(const float *x, uint8_t *b)
{
	float s[8], big = 0;
	uint16_t sh = 0;
	uint8_t *sl = b + 4, *qs = b + 8;

	for (int j = 0; j < 8; j++) {
		int lv[32];

		s[j] = wk_iq4nl_fit(x + 32 * j, lv);
		if (fabsf(s[j]) > fabsf(big))
			big = s[j];
	}
	wk_put_f16(b, big / -32.0f);
	float d = wk_get_f16(b);
	float id = d != 0 ? 1.0f / d : 0;

	memset(sl, 0, 4);
	for (int j = 0; j < 8; j++) {
		int ls = wk_clampi(wk_nearest(s[j] * id), -32, 31) + 32;
		float dl = d * (float)(ls - 32);
		float il = dl != 0 ? 1.0f / dl : 0;

		sl[j / 2] |= (uint8_t)((ls & 15) << (4 * (j % 2)));
		sh |= (uint16_t)(((ls >> 4) & 3) << (2 * j));
		for (int i = 0; i < 16; i++) {
			int q0 = wk_iq4nl_nearest(x[32 * j + i] * il);
			int q1 = wk_iq4nl_nearest(x[32 * j + 16 + i] * il);

			qs[16 * j + i] = (uint8_t)(q0 | (q1 << 4));
		}
	}
	b[2] = (uint8_t)sh;
	b[3] = (uint8_t)(sh >> 8);
}

void wk_dequant_iq4_xs(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b);
	const uint8_t *qs = b + 8;

	for (int j = 0; j < 8; j++) {
		float dl = d * (float)wk_iq4_xs_scale(b, j);

		for (int i = 0; i < 16; i++) {
			y[32 * j + i] = dl * (float)wk_iq4nl_levels[qs[16 * j + i] & 15];
			y[32 * j + 16 + i] = dl * (float)wk_iq4nl_levels[qs[16 * j + i] >> 4];
		}
	}
}
