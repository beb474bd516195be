/*
 * quant.c - weight type table, half/bfloat16 conversions and the reference
 * (scalar) quantise/dequantise of one row for every type in quant.h.
 *
 * The block layouts are those of GGUF files written by llama.cpp (see the
 * comment in quant.h); this file is the executable description of them and
 * the ground truth the fast kernels in worker/cpu/ are tested against.
 * Quantisers are plain round-to-nearest with the scale chosen from the
 * block's range (no importance search): good enough for synthetic models
 * and for activations.  Pure functions, no state, any thread.
 */
#include "worker/model/quant.h"
#include "worker/model/quant_low.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* ---- type table ------------------------------------------------------ */

struct wk_qtype_info {
	const char *name;
	uint32_t block_elems; /* values per block */
	uint32_t block_bytes; /* bytes per block */
	int weight;           /* accepted as a weight type */
};

static const struct wk_qtype_info wk_qtypes[WK_Q_COUNT_] = {
	[WK_Q_F32] = { "F32", 1, 4, 1 },
	[WK_Q_F16] = { "F16", 1, 2, 1 },
	[WK_Q_Q4_0] = { "Q4_0", 32, 18, 1 },
	[WK_Q_Q4_1] = { "Q4_1", 32, 20, 1 },
	[WK_Q_Q5_0] = { "Q5_0", 32, 22, 1 },
	[WK_Q_Q5_1] = { "Q5_1", 32, 24, 1 },
	[WK_Q_IQ4_NL] = { "IQ4_NL", 32, 18, 1 },
	[WK_Q_Q8_0] = { "Q8_0", 32, 34, 1 },
	[WK_Q_Q2_K] = { "Q2_K", 256, 84, 1 },
	[WK_Q_Q3_K] = { "Q3_K", 256, 110, 1 },
	[WK_Q_IQ4_XS] = { "IQ4_XS", 256, 136, 1 },
	[WK_Q_Q4_K] = { "Q4_K", 256, 144, 1 },
	[WK_Q_Q5_K] = { "Q5_K", 256, 176, 1 },
	[WK_Q_Q6_K] = { "Q6_K", 256, 210, 1 },
	[WK_Q_Q8_K] = { "Q8_K", 256, 292, 0 },
	[WK_Q_BF16] = { "BF16", 1, 2, 1 },
};

static const struct wk_qtype_info *wk_qtype_info(uint32_t type)
{
	if (type >= WK_Q_COUNT_ || wk_qtypes[type].name == NULL)
		return NULL;
	return &wk_qtypes[type];
}

int wk_qtype_supported(uint32_t type)
{
	const struct wk_qtype_info *ti = wk_qtype_info(type);
	return ti != NULL && ti->weight;
}

const char *wk_qtype_name(uint32_t type)
{
	const struct wk_qtype_info *ti = wk_qtype_info(type);
	return ti ? ti->name : "?";
}

int wk_qtype_parse(const char *name)
{
	if (name == NULL)
		return -1;
	for (int t = 0; t < WK_Q_COUNT_; t++)
		if (wk_qtypes[t].name && strcasecmp(name, wk_qtypes[t].name) == 0)
			return t;
	return -1;
}

uint32_t wk_qtype_block_elems(uint32_t type)
{
	const struct wk_qtype_info *ti = wk_qtype_info(type);
	return ti ? ti->block_elems : 0;
}

uint32_t wk_qtype_block_bytes(uint32_t type)
{
	const struct wk_qtype_info *ti = wk_qtype_info(type);
	return ti ? ti->block_bytes : 0;
}

uint64_t wk_qtype_row_bytes(uint32_t type, uint64_t n)
{
	const struct wk_qtype_info *ti = wk_qtype_info(type);
	if (ti == NULL || n % ti->block_elems != 0)
		return 0;
	uint64_t blocks = n / ti->block_elems;
	if (blocks > UINT64_MAX / ti->block_bytes)
		return 0;
	return blocks * ti->block_bytes;
}

/* ---- half and bfloat16 ----------------------------------------------- */

static uint32_t wk_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

static float wk_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

float wk_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;

	if (exp == 0x1f) /* inf / nan: keep the payload */
		return wk_bits_f32(sign | 0x7f800000u | (mant << 13));
	if (exp == 0) {
		if (mant == 0)
			return wk_bits_f32(sign);
		/* subnormal: value = mant * 2^-24, normalise */
		int e = -14;
		while ((mant & 0x400) == 0) {
			mant <<= 1;
			e--;
		}
		mant &= 0x3ff;
		return wk_bits_f32(sign | ((uint32_t)(e + 127) << 23) | (mant << 13));
	}
	return wk_bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Rounds q + rem/2^shift to nearest, ties to even. */
static uint32_t wk_round_shift(uint32_t m, int shift)
{
	uint32_t q = m >> shift;
	uint32_t rem = m & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	return q;
}

uint16_t wk_f32_to_f16(float f)
{
	uint32_t u = wk_f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	int exp = (int)((u >> 23) & 0xff);
	uint32_t mant = u & 0x7fffff;

	if (exp == 0xff) {
		if (mant == 0)
			return sign | 0x7c00;
		return sign | 0x7e00 | (uint16_t)(mant >> 13); /* quiet nan */
	}
	int e = exp - 127;
	if (e > 15)
		return sign | 0x7c00;
	if (e >= -14) {
		/* normal half; a carry out of the mantissa bumps the exponent
		 * and at the top turns into 0x7c00 (inf), both correct */
		uint32_t v = ((uint32_t)(e + 15) << 10) | (mant >> 13);
		uint32_t rem = mant & 0x1fff;
		if (rem > 0x1000 || (rem == 0x1000 && (v & 1)))
			v++;
		return sign | (uint16_t)v;
	}
	/* subnormal half: units of 2^-24; the f32 value is m * 2^(e-23) */
	if (exp == 0 || e < -25)
		return sign;
	uint32_t m = mant | 0x800000;
	int shift = -e - 1; /* 14 .. 24 */
	return sign | (uint16_t)wk_round_shift(m, shift);
}

float wk_bf16_to_f32(uint16_t h)
{
	return wk_bits_f32((uint32_t)h << 16);
}

uint16_t wk_f32_to_bf16(float f)
{
	uint32_t u = wk_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: keep it a quiet nan */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/*
 * Q4_K / Q5_K: 6-bit scales sc[8] and mins m[8] packed into 12 bytes.
 * Bytes 0..3: sc[0..3] low 6 bits, top 2 bits = sc[4..7] >> 4.
 * Bytes 4..7: m[0..3] low 6 bits, top 2 bits = m[4..7] >> 4.
 * Bytes 8..11: low nibble sc[4..7] & 15, high nibble m[4..7] & 15.
 */
static void wk_k4_pack_scales(uint8_t *s, const uint8_t *sc, const uint8_t *m)
{
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
		s[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
		s[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
	}
}

static void wk_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/* ---- Q4_0 / Q8_0 ------------------------------------------------------ */

static void wk_quant_q4_0(const float *x, uint8_t *b)
{
	/* the value of largest magnitude maps to -8, so the full range is used */
	float amax = 0, vmax = 0;
	for (int i = 0; i < 32; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			vmax = x[i];
		}
	float d = vmax / -8.0f;
	wk_put_f16(b, d);
	float dr = wk_get_f16(b);
	float id = dr != 0 ? 1.0f / dr : 0;
	for (int i = 0; i < 16; i++) {
		int q0 = wk_clampi(wk_nearest(x[i] * id) + 8, 0, 15);
		int q1 = wk_clampi(wk_nearest(x[i + 16] * id) + 8, 0, 15);
		b[2 + i] = (uint8_t)(q0 | (q1 << 4));
	}
}

static void wk_dequant_q4_0(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b);
	for (int i = 0; i < 16; i++) {
		y[i] = d * (float)((b[2 + i] & 15) - 8);
		y[i + 16] = d * (float)((b[2 + i] >> 4) - 8);
	}
}

static void wk_quant_q8_0(const float *x, uint8_t *b)
{
	float amax = 0;
	for (int i = 0; i < 32; i++)
		amax = fmaxf(amax, fabsf(x[i]));
	wk_put_f16(b, amax / 127.0f);
	float dr = wk_get_f16(b);
	float id = dr != 0 ? 1.0f / dr : 0;
	for (int i = 0; i < 32; i++)
		b[2 + i] = (uint8_t)(int8_t)wk_clampi(wk_nearest(x[i] * id), -127, 127);
}

static void wk_dequant_q8_0(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b);
	for (int i = 0; i < 32; i++)
		y[i] = d * (float)(int8_t)b[2 + i];
}

/* ---- Q4_1 / Q5_0 / Q5_1 ------------------------------------------------ */

/*
 * As llama.cpp's reference quantisers (what llama-quantize writes for
 * these types without an importance matrix): the scale from the block's
 * range unrounded, levels truncated after adding one half.
 */
static void wk_minmax32(const float *x, float *lo, float *hi)
{
	*lo = x[0];
	*hi = x[0];
	for (int i = 1; i < 32; i++) {
		*lo = x[i] < *lo ? x[i] : *lo;
		*hi = x[i] > *hi ? x[i] : *hi;
	}
}

static void wk_quant_q4_1(const float *x, uint8_t *b)
{
	float lo, hi;
	wk_minmax32(x, &lo, &hi);
	float d = (hi - lo) / 15.0f, id = d != 0 ? 1.0f / d : 0;
	wk_put_f16(b, d);
	wk_put_f16(b + 2, lo);
	for (int i = 0; i < 16; i++) {
		int q0 = (int)(int8_t)((x[i] - lo) * id + 0.5f);
		int q1 = (int)(int8_t)((x[i + 16] - lo) * id + 0.5f);
		q0 = q0 > 15 ? 15 : q0;
		q1 = q1 > 15 ? 15 : q1;
		b[4 + i] = (uint8_t)(q0 | (q1 << 4));
	}
}

static void wk_dequant_q4_1(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b), m = wk_get_f16(b + 2);
	for (int i = 0; i < 16; i++) {
		y[i] = (float)(b[4 + i] & 15) * d + m;
		y[i + 16] = (float)(b[4 + i] >> 4) * d + m;
	}
}

/* Levels 0..31 of 32 values into qh (the fifth bits) and qs. */
static void wk_put_q5(uint8_t *qh, uint8_t *qs, const int *q)
{
	uint32_t h = 0;
	for (int i = 0; i < 16; i++) {
		qs[i] = (uint8_t)((q[i] & 15) | ((q[i + 16] & 15) << 4));
		h |= (uint32_t)((q[i] >> 4) & 1) << i;
		h |= (uint32_t)((q[i + 16] >> 4) & 1) << (i + 16);
	}
	for (int k = 0; k < 4; k++)
		qh[k] = (uint8_t)(h >> (8 * k));
}

static void wk_get_q5(const uint8_t *qh, const uint8_t *qs, int *q)
{
	uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 |
		     (uint32_t)qh[3] << 24;
	for (int i = 0; i < 16; i++) {
		q[i] = (qs[i] & 15) | (int)(((h >> i) & 1) << 4);
		q[i + 16] = (qs[i] >> 4) | (int)(((h >> (i + 16)) & 1) << 4);
	}
}

static void wk_quant_q5_0(const float *x, uint8_t *b)
{
	float amax = 0, vmax = 0;
	int q[32];
	for (int i = 0; i < 32; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			vmax = x[i];
		}
	float d = vmax / -16.0f, id = d != 0 ? 1.0f / d : 0;
	wk_put_f16(b, d);
	for (int i = 0; i < 32; i++) {
		int v = (int)(int8_t)(x[i] * id + 16.5f);
		q[i] = v > 31 ? 31 : v;
	}
	wk_put_q5(b + 2, b + 6, q);
}

static void wk_dequant_q5_0(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b);
	int q[32];
	wk_get_q5(b + 2, b + 6, q);
	for (int i = 0; i < 32; i++)
		y[i] = (float)(q[i] - 16) * d;
}

static void wk_quant_q5_1(const float *x, uint8_t *b)
{
	float lo, hi;
	int q[32];
	wk_minmax32(x, &lo, &hi);
	float d = (hi - lo) / 31.0f, id = d != 0 ? 1.0f / d : 0;
	wk_put_f16(b, d);
	wk_put_f16(b + 2, lo);
	/* no clamp, as llama.cpp's: a level that rounds up to 32 keeps its
	 * low five bits (0) */
	for (int i = 0; i < 32; i++)
		q[i] = (int)(uint8_t)((x[i] - lo) * id + 0.5f);
	wk_put_q5(b + 4, b + 8, q);
}

static void wk_dequant_q5_1(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b), m = wk_get_f16(b + 2);
	int q[32];
	wk_get_q5(b + 4, b + 8, q);
	for (int i = 0; i < 32; i++)
		y[i] = (float)q[i] * d + m;
}

/* ---- IQ4_NL --------------------------------------------------------------- */

const int8_t wk_iq4nl_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				     1,    13,   25,  38,  53,  69,  89,  113 };

int wk_iq4nl_nearest(float v)
{
	int best = 0;
	float be = fabsf(v - (float)wk_iq4nl_levels[0]);
	for (int k = 1; k < 16; k++) {
		float e = fabsf(v - (float)wk_iq4nl_levels[k]);
		if (e < be) {
			be = e;
			best = k;
		}
	}
	return best;
}

/*
 * Our own (not llama.cpp's search): the value of largest magnitude maps to
 * level -127, every value to its nearest level, then the scale is refitted
 * by least squares weighted by x^2 (the large values matter most).
 */
float wk_iq4nl_fit(const float *x, int *l)
{
	float amax = 0, vmax = 0, sqx = 0, sqq = 0;
	for (int i = 0; i < 32; i++)
		if (fabsf(x[i]) > amax) {
			amax = fabsf(x[i]);
			vmax = x[i];
		}
	if (amax == 0) {
		memset(l, 0, 32 * sizeof(*l));
		return 0;
	}
	float id = -127.0f / vmax;
	for (int i = 0; i < 32; i++) {
		float q;
		l[i] = wk_iq4nl_nearest(x[i] * id);
		q = (float)wk_iq4nl_levels[l[i]];
		sqx += x[i] * x[i] * q * x[i];
		sqq += x[i] * x[i] * q * q;
	}
	return sqq > 0 ? sqx / sqq : vmax / -127.0f;
}

static void wk_quant_iq4_nl(const float *x, uint8_t *b)
{
	int l[32];
	float d = wk_iq4nl_fit(x, l);

	memset(b, 0, 18);
	if (d == 0)
		return;
	wk_put_f16(b, d);
	for (int i = 0; i < 16; i++)
		b[2 + i] = (uint8_t)(l[i] | (l[i + 16] << 4));
}

static void wk_dequant_iq4_nl(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b);
	for (int i = 0; i < 16; i++) {
		y[i] = d * (float)wk_iq4nl_levels[b[2 + i] & 15];
		y[i + 16] = d * (float)wk_iq4nl_levels[b[2 + i] >> 4];
	}
}

/* ---- Q4_K / Q5_K ------------------------------------------------------ */

/*
 * Shared by Q4_K (qmax 15) and Q5_K (qmax 31): per sub-block of 32 the
 * range [min(0, lo), hi] is mapped to 0..qmax; sub-block scales and mins
 * are then quantised to 6 bits against the super-block d and dmin.
 * Writes d, dmin, scales[12] at b and the integer levels to L[256].
 */
static void wk_quant_kq(const float *x, uint8_t *b, int qmax, uint8_t *L)
{
	float scale[8], mins[8], max_scale = 0, max_min = 0;
	for (int j = 0; j < 8; j++) {
		float lo = 0, hi = x[32 * j];
		for (int i = 0; i < 32; i++) {
			lo = fminf(lo, x[32 * j + i]);
			hi = fmaxf(hi, x[32 * j + i]);
		}
		if (hi < lo)
			hi = lo;
		scale[j] = (hi - lo) / (float)qmax;
		mins[j] = -lo;
		max_scale = fmaxf(max_scale, scale[j]);
		max_min = fmaxf(max_min, mins[j]);
	}
	wk_put_f16(b, max_scale / 63.0f);
	wk_put_f16(b + 2, max_min / 63.0f);
	float d = wk_get_f16(b), dmin = wk_get_f16(b + 2);
	uint8_t sc[8], m[8];
	for (int j = 0; j < 8; j++) {
		/* round the scale up so that the top of the range still fits */
		sc[j] = (uint8_t)(d > 0 ? wk_clampi((int)ceilf(scale[j] / d - 0.01f), 0, 63) : 0);
		m[j] = (uint8_t)(dmin > 0 ? wk_clampi(wk_nearest(mins[j] / dmin), 0, 63) : 0);
	}
	wk_k4_pack_scales(b + 4, sc, m);
	for (int j = 0; j < 8; j++) {
		float ds = d * sc[j], dm = dmin * m[j];
		float id = ds != 0 ? 1.0f / ds : 0;
		for (int i = 0; i < 32; i++)
			L[32 * j + i] = (uint8_t)wk_clampi(wk_nearest((x[32 * j + i] + dm) * id), 0, qmax);
	}
}

static void wk_quant_q4_k(const float *x, uint8_t *b)
{
	uint8_t L[256];
	wk_quant_kq(x, b, 15, L);
	uint8_t *qs = b + 16;
	/* 4 chunks of 64 values: 32 bytes, low nibbles first 32, high next 32 */
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

static void wk_dequant_q4_k(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b), dmin = wk_get_f16(b + 2);
	const uint8_t *qs = b + 16;
	for (int c = 0; c < 4; c++) {
		int sc0, m0, sc1, m1;
		wk_k4_scale_min(b + 4, 2 * c, &sc0, &m0);
		wk_k4_scale_min(b + 4, 2 * c + 1, &sc1, &m1);
		float d0 = d * (float)sc0, n0 = dmin * (float)m0;
		float d1 = d * (float)sc1, n1 = dmin * (float)m1;
		for (int l = 0; l < 32; l++) {
			y[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - n0;
			y[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - n1;
		}
	}
}

/* Q5_K: qh[l] bit 2c is the 5th bit of value 64c+l, bit 2c+1 of 64c+32+l. */
static void wk_quant_q5_k(const float *x, uint8_t *b)
{
	uint8_t L[256];
	wk_quant_kq(x, b, 31, L);
	uint8_t *qh = b + 16, *qs = b + 48;
	memset(qh, 0, 32);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
			qs[32 * c + l] = (uint8_t)((lo & 15) | ((hi & 15) << 4));
			qh[l] |= (uint8_t)(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
		}
}

static void wk_dequant_q5_k(const uint8_t *b, float *y)
{
	float d = wk_get_f16(b), dmin = wk_get_f16(b + 2);
	const uint8_t *qh = b + 16, *qs = b + 48;
	for (int c = 0; c < 4; c++) {
		int sc0, m0, sc1, m1;
		wk_k4_scale_min(b + 4, 2 * c, &sc0, &m0);
		wk_k4_scale_min(b + 4, 2 * c + 1, &sc1, &m1);
		float d0 = d * (float)sc0, n0 = dmin * (float)m0;
		float d1 = d * (float)sc1, n1 = dmin * (float)m1;
		for (int l = 0; l < 32; l++) {
			int lo = (qs[32 * c + l] & 15) | (((qh[l] >> (2 * c)) & 1) << 4);
			int hi = (qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4);
			y[64 * c + l] = d0 * (float)lo - n0;
			y[64 * c + 32 + l] = d1 * (float)hi - n1;
		}
	}
}

/* ---- Q6_K ------------------------------------------------------------- */

/*
 * Layout: ql[128] qh[64] scales[16] (i8) d (f16); value i = d * scales[i/16]
 * * (q - 32) with q 6 bits.  Per half h (128 values) and l < 32:
 *   q[128h+l]    = ql[64h+l] & 15      | (qh[32h+l] >> 0 & 3) << 4
 *   q[128h+32+l] = ql[64h+32+l] & 15   | (qh[32h+l] >> 2 & 3) << 4
 *   q[128h+64+l] = ql[64h+l] >> 4      | (qh[32h+l] >> 4 & 3) << 4
 *   q[128h+96+l] = ql[64h+32+l] >> 4   | (qh[32h+l] >> 6 & 3) << 4
 */
static void wk_quant_q6_k(const float *x, uint8_t *b)
{
	float scale[16], max_abs_scale = 0, max_scale = 0;
	for (int j = 0; j < 16; j++) {
		float amax = 0, vmax = 0;
		for (int i = 0; i < 16; i++)
			if (fabsf(x[16 * j + i]) > amax) {
				amax = fabsf(x[16 * j + i]);
				vmax = x[16 * j + i];
			}
		scale[j] = vmax / -32.0f; /* extreme value maps to -32 */
		if (fabsf(scale[j]) > max_abs_scale) {
			max_abs_scale = fabsf(scale[j]);
			max_scale = scale[j];
		}
	}
	uint8_t *ql = b, *qh = b + 128;
	int8_t *sc = (int8_t *)(b + 192);
	wk_put_f16(b + 208, max_scale / -128.0f);
	float d = wk_get_f16(b + 208);
	float id = d != 0 ? 1.0f / d : 0;
	uint8_t L[256];
	for (int j = 0; j < 16; j++) {
		int s = wk_clampi(wk_nearest(scale[j] * id), -128, 127);
		sc[j] = (int8_t)s;
		float ds = d * (float)s;
		float ids = ds != 0 ? 1.0f / ds : 0;
		for (int i = 0; i < 16; i++)
			L[16 * j + i] = (uint8_t)(wk_clampi(wk_nearest(x[16 * j + i] * ids), -32, 31) + 32);
	}
	memset(qh, 0, 64);
	for (int h = 0; h < 2; h++)
		for (int l = 0; l < 32; l++) {
			const uint8_t *q = L + 128 * h;
			ql[64 * h + l] = (uint8_t)((q[l] & 15) | ((q[64 + l] & 15) << 4));
			ql[64 * h + 32 + l] = (uint8_t)((q[32 + l] & 15) | ((q[96 + l] & 15) << 4));
			qh[32 * h + l] = (uint8_t)((q[l] >> 4) | ((q[32 + l] >> 4) << 2) |
						   ((q[64 + l] >> 4) << 4) | ((q[96 + l] >> 4) << 6));
		}
}

static void wk_dequant_q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	float d = wk_get_f16(b + 208);
	for (int h = 0; h < 2; h++)
		for (int l = 0; l < 32; l++) {
			int a = ql[64 * h + l], c = ql[64 * h + 32 + l], e = qh[32 * h + l];
			int q[4] = {
				((a & 15) | ((e & 3) << 4)) - 32,
				((c & 15) | (((e >> 2) & 3) << 4)) - 32,
				((a >> 4) | (((e >> 4) & 3) << 4)) - 32,
				((c >> 4) | (((e >> 6) & 3) << 4)) - 32,
			};
			for (int k = 0; k < 4; k++) {
				int i = 128 * h + 32 * k + l;
				y[i] = d * (float)sc[i / 16] * (float)q[k];
			}
		}
}

/* ---- Q8_K (activations) ----------------------------------------------- */

/* Layout: f32 d; i8 qs[256]; i16 bsums[16] (sum of each 16 qs). */
static void wk_quant_q8_k(const float *x, uint8_t *b)
{
	float amax = 0;
	for (int i = 0; i < 256; i++)
		amax = fmaxf(amax, fabsf(x[i]));
	float d = amax / 127.0f;
	float id = amax != 0 ? 127.0f / amax : 0;
	memcpy(b, &d, 4);
	int8_t *qs = (int8_t *)(b + 4);
	for (int i = 0; i < 256; i++)
		qs[i] = (int8_t)wk_clampi(wk_nearest(x[i] * id), -127, 127);
	for (int j = 0; j < 16; j++) {
		int s = 0;
		for (int i = 0; i < 16; i++)
			s += qs[16 * j + i];
		int16_t s16 = (int16_t)s;
		memcpy(b + 260 + 2 * j, &s16, 2);
	}
}

static void wk_dequant_q8_k(const uint8_t *b, float *y)
{
	float d;
	memcpy(&d, b, 4);
	const int8_t *qs = (const int8_t *)(b + 4);
	for (int i = 0; i < 256; i++)
		y[i] = d * (float)qs[i];
}

/* ---- rows -------------------------------------------------------------- */

void wk_quantize_row(uint32_t type, const float *x, void *dst, uint64_t n)
{
	uint8_t *p = dst;
	uint32_t be = wk_qtype_block_elems(type), bb = wk_qtype_block_bytes(type);
	if (be == 0 || n % be != 0)
		return;
	switch (type) {
	case WK_Q_F32:
		memcpy(dst, x, n * sizeof(float));
		return;
	case WK_Q_F16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = wk_f32_to_f16(x[i]);
			memcpy(p + 2 * i, &h, 2);
		}
		return;
	case WK_Q_BF16:
		for (uint64_t i = 0; i < n; i++) {
			uint16_t h = wk_f32_to_bf16(x[i]);
			memcpy(p + 2 * i, &h, 2);
		}
		return;
	default:
		break;
	}
	for (uint64_t k = 0; k < n / be; k++, x += be, p += bb) {
		switch (type) {
		case WK_Q_Q4_0: wk_quant_q4_0(x, p); break;
		case WK_Q_Q4_1: wk_quant_q4_1(x, p); break;
		case WK_Q_Q5_0: wk_quant_q5_0(x, p); break;
		case WK_Q_Q5_1: wk_quant_q5_1(x, p); break;
		case WK_Q_IQ4_NL: wk_quant_iq4_nl(x, p); break;
		case WK_Q_Q8_0: wk_quant_q8_0(x, p); break;
		case WK_Q_Q2_K: wk_quant_q2_k(x, p); break;
		case WK_Q_Q3_K: wk_quant_q3_k(x, p); break;
		case WK_Q_IQ4_XS: wk_quant_iq4_xs(x, p); break;
		case WK_Q_Q4_K: wk_quant_q4_k(x, p); break;
		case WK_Q_Q5_K: wk_quant_q5_k(x, p); break;
		case WK_Q_Q6_K: wk_quant_q6_k(x, p); break;
		case WK_Q_Q8_K: wk_quant_q8_k(x, p); break;
		default: return;
		}
	}
}

void wk_dequantize_row(uint32_t type, const void *src, float *y, uint64_t n)
{
	const uint8_t *p = src;
	uint32_t be = wk_qtype_block_elems(type), bb = wk_qtype_block_bytes(type);
	if (be == 0 || n % be != 0)
		return;
	switch (type) {
	case WK_Q_F32:
		memcpy(y, src, n * sizeof(float));
		return;
	case WK_Q_F16:
		for (uint64_t i = 0; i < n; i++)
			y[i] = wk_f16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		return;
	case WK_Q_BF16:
		for (uint64_t i = 0; i < n; i++)
			y[i] = wk_bf16_to_f32((uint16_t)(p[2 * i] | (p[2 * i + 1] << 8)));
		return;
	default:
		break;
	}
	for (uint64_t k = 0; k < n / be; k++, y += be, p += bb) {
		switch (type) {
		case WK_Q_Q4_0: wk_dequant_q4_0(p, y); break;
		case WK_Q_Q4_1: wk_dequant_q4_1(p, y); break;
		case WK_Q_Q5_0: wk_dequant_q5_0(p, y); break;
		case WK_Q_Q5_1: wk_dequant_q5_1(p, y); break;
		case WK_Q_IQ4_NL: wk_dequant_iq4_nl(p, y); break;
		case WK_Q_Q8_0: wk_dequant_q8_0(p, y); break;
		case WK_Q_Q2_K: wk_dequant_q2_k(p, y); break;
		case WK_Q_Q3_K: wk_dequant_q3_k(p, y); break;
		case WK_Q_IQ4_XS: wk_dequant_iq4_xs(p, y); break;
		case WK_Q_Q4_K: wk_dequant_q4_k(p, y); break;
		case WK_Q_Q5_K: wk_dequant_q5_k(p, y); break;
		case WK_Q_Q6_K: wk_dequant_q6_k(p, y); break;
		case WK_Q_Q8_K: wk_dequant_q8_k(p, y); break;
		default: return;
		}
	}
}
