/*
 * test_quant.c - worker/model/quant.c: type table, half/bfloat16 conversions
 * (edge cases and exhaustive round trips), quantise/dequantise round-trip
 * error bounds per type, and one hand-built block per layout whose
 * dequantised values are checked against the documented formula.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/model/quant.h"

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

/* xorshift; deterministic data, roughly normal by summing uniforms */
static uint64_t rng_state = 88172645463325252ull;
static float rnd_uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}
static float rnd_normal(void)
{
	return (rnd_uniform() + rnd_uniform() + rnd_uniform() + rnd_uniform()) * 0.8f;
}

static void test_table(void **state)
{
	(void)state;
	assert_int_equal(wk_qtype_block_elems(WK_Q_Q4_K), 256);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q4_0), 18);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q8_0), 34);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q4_K), 144);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q5_K), 176);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q6_K), 210);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q8_K), 292);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_BF16), 2);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_F32, 10), 40);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q4_0, 64), 36);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q4_0, 48), 0);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q6_K, 2048), 8 * 210);
	/* 4 and 5 (Q4_2, Q4_3) left ggml long ago: no file has them */
	assert_int_equal(wk_qtype_row_bytes(4, 32), 0);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q4_1, 64), 40);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q5_0, 64), 44);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q5_1, 64), 48);
	assert_int_equal(wk_qtype_row_bytes(999, 32), 0);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_F32, UINT64_MAX / 2), 0);
	assert_int_equal(wk_qtype_block_elems(5), 0);
	assert_int_equal(wk_qtype_block_elems(WK_Q_Q5_1), 32);
	assert_int_equal(wk_qtype_parse("q5_0"), WK_Q_Q5_0);
	assert_string_equal(wk_qtype_name(WK_Q_Q5_K), "Q5_K");
	assert_string_equal(wk_qtype_name(31), "?");
	assert_string_equal(wk_qtype_name(UINT32_MAX), "?");
	assert_int_equal(wk_qtype_parse("q4_k"), WK_Q_Q4_K);
	assert_int_equal(wk_qtype_parse("BF16"), WK_Q_BF16);
	assert_int_equal(wk_qtype_parse("Q3_K"), WK_Q_Q3_K);
	assert_int_equal(wk_qtype_parse("IQ2_XXS"), -1);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q2_K), 84);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_Q3_K), 110);
	assert_int_equal(wk_qtype_block_bytes(WK_Q_IQ4_XS), 136);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_IQ4_XS, 512), 272);
	assert_int_equal(wk_qtype_row_bytes(WK_Q_Q3_K, 96), 0);
	assert_true(wk_qtype_supported(WK_Q_Q2_K));
	assert_true(wk_qtype_supported(WK_Q_IQ4_XS));
	assert_int_equal(wk_qtype_parse(NULL), -1);
	assert_true(wk_qtype_supported(WK_Q_Q6_K));
	assert_true(wk_qtype_supported(WK_Q_BF16));
	assert_false(wk_qtype_supported(WK_Q_Q8_K));
	assert_false(wk_qtype_supported(4));
	assert_true(wk_qtype_supported(WK_Q_Q4_1));
	assert_false(wk_qtype_supported(1000));
}

static void test_f16(void **state)
{
	(void)state;
	assert_int_equal(wk_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(wk_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(wk_f32_to_f16(0.0f), 0x0000);
	assert_int_equal(wk_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(wk_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(wk_f32_to_f16(65519.0f), 0x7bff);
	assert_int_equal(wk_f32_to_f16(65520.0f), 0x7c00); /* rounds up to inf */
	assert_int_equal(wk_f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(wk_f32_to_f16(-INFINITY), 0xfc00);
	assert_int_equal(wk_f32_to_f16(INFINITY), 0x7c00);
	uint16_t hn = wk_f32_to_f16(NAN);
	assert_int_equal(hn & 0x7c00, 0x7c00);
	assert_true((hn & 0x3ff) != 0);
	/* ties to even in the normal range */
	assert_int_equal(wk_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
	assert_int_equal(wk_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
	assert_int_equal(wk_f32_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
	/* subnormals */
	assert_int_equal(wk_f32_to_f16(0x1p-14f), 0x0400);
	assert_int_equal(wk_f32_to_f16(0x1p-24f), 0x0001);
	assert_int_equal(wk_f32_to_f16(0x1p-25f), 0x0000);       /* tie to even */
	assert_int_equal(wk_f32_to_f16(0x1.8p-25f), 0x0001);
	assert_int_equal(wk_f32_to_f16(3 * 0x1p-25f), 0x0002);   /* 1.5 -> 2 */
	assert_int_equal(wk_f32_to_f16(5 * 0x1p-25f), 0x0002);   /* 2.5 -> 2 */
	assert_int_equal(wk_f32_to_f16(-0x1p-24f), 0x8001);
	assert_int_equal(wk_f32_to_f16(0x1p-30f), 0x0000);
	assert_int_equal(wk_f32_to_f16(bits_f32(1)), 0x0000);    /* f32 denormal */
	assert_int_equal(wk_f32_to_f16(0x1.ffcp-15f), 0x0400);   /* rounds up to normal */
	assert_true(wk_f16_to_f32(0x0001) == 0x1p-24f);
	assert_true(wk_f16_to_f32(0x03ff) == 0x3ffp-24f);
	assert_true(wk_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(isinf(wk_f16_to_f32(0xfc00)) && wk_f16_to_f32(0xfc00) < 0);
	assert_true(isnan(wk_f16_to_f32(0x7e00)));
	/* exhaustive: every half survives f16 -> f32 -> f16 (nan stays nan) */
	for (uint32_t h = 0; h < 65536; h++) {
		float f = wk_f16_to_f32((uint16_t)h);
		uint16_t back = wk_f32_to_f16(f);
		if (isnan(f))
			assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff) != 0);
		else
			assert_int_equal(back, h);
	}
	/* midpoints between neighbouring positive finite halves go to the even one */
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double a = wk_f16_to_f32((uint16_t)h), b = wk_f16_to_f32((uint16_t)(h + 1));
		float mid = (float)((a + b) / 2);
		uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
		assert_int_equal(wk_f32_to_f16(mid), want);
	}
}

static void test_bf16(void **state)
{
	(void)state;
	assert_int_equal(wk_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(wk_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);      /* tie, even */
	assert_int_equal(wk_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  /* tie, up */
	assert_int_equal(wk_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
	assert_int_equal(wk_f32_to_bf16(-INFINITY), 0xff80);
	assert_int_equal(wk_f32_to_bf16(3.4e38f), 0x7f80); /* rounds to inf */
	assert_int_equal(wk_f32_to_bf16(bits_f32(0x00010000)), 0x0001); /* subnormal */
	uint16_t n = wk_f32_to_bf16(bits_f32(0x7f800001)); /* signalling nan, low payload */
	assert_true((n & 0x7f80) == 0x7f80 && (n & 0x7f) != 0);
	assert_true(isnan(wk_bf16_to_f32(n)));
	assert_true(wk_bf16_to_f32(0xc040) == -3.0f);
	for (uint32_t h = 0; h < 65536; h++) {
		float f = wk_bf16_to_f32((uint16_t)h);
		if (!isnan(f))
			assert_int_equal(wk_f32_to_bf16(f), h);
	}
}

static double rel_err(const float *a, const float *b, int n)
{
	double num = 0, den = 0;
	for (int i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)a[i] * a[i];
	}
	return sqrt(num / den);
}

static void test_round_trip(void **state)
{
	(void)state;
	static const struct {
		uint32_t type;
		double bound;
	} cases[] = {
		{ WK_Q_F32, 0.0 },    { WK_Q_F16, 1e-3 },  { WK_Q_BF16, 5e-3 },
		{ WK_Q_Q8_0, 0.01 },  { WK_Q_Q4_0, 0.10 }, { WK_Q_Q4_K, 0.10 },
		{ WK_Q_Q5_K, 0.05 },  { WK_Q_Q6_K, 0.02 }, { WK_Q_Q8_K, 0.01 },
		{ WK_Q_Q4_1, 0.10 },  { WK_Q_Q5_0, 0.05 }, { WK_Q_Q5_1, 0.05 },
		{ WK_Q_IQ4_NL, 0.10 }, { WK_Q_IQ4_XS, 0.10 }, { WK_Q_Q3_K, 0.18 },
		{ WK_Q_Q2_K, 0.32 },
	};
	enum { N = 4096 };
	float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
	uint8_t *q = malloc(N * 4);
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(q);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		for (int shape = 0; shape < 3; shape++) {
			for (int i = 0; i < N; i++) {
				x[i] = rnd_normal();
				if (shape == 1)
					x[i] = x[i] * 0.01f + 0.02f; /* offset: tests the mins */
				if (shape == 2 && i % 97 == 0)
					x[i] *= 20; /* outliers */
			}
			memset(q, 0xa5, N * 4);
			wk_quantize_row(cases[c].type, x, q, N);
			wk_dequantize_row(cases[c].type, q, y, N);
			double e = rel_err(x, y, N);
			/* outliers inflate the per-block scales of 4-bit types */
			double bound = shape == 2 ? cases[c].bound * 3 : cases[c].bound;
			if (e > bound)
				fail_msg("%s shape %d: relative error %g, bound %g",
					 wk_qtype_name(cases[c].type), shape, e, bound);
		}
		/* an all-zero row round-trips exactly (no division by zero) */
		memset(x, 0, N * sizeof *x);
		wk_quantize_row(cases[c].type, x, q, N);
		wk_dequantize_row(cases[c].type, q, y, N);
		for (int i = 0; i < N; i++)
			assert_true(y[i] == 0.0f);
	}
	free(x);
	free(y);
	free(q);
}

static void test_known_q4_0_q8_0(void **state)
{
	(void)state;
	uint8_t b[34];
	float y[32];
	put16(b, 0x3800); /* d = 0.5 */
	for (int i = 0; i < 16; i++)
		b[2 + i] = (uint8_t)(i | ((15 - i) << 4));
	wk_dequantize_row(WK_Q_Q4_0, b, y, 32);
	for (int i = 0; i < 16; i++) {
		assert_true(y[i] == 0.5f * (float)(i - 8));
		assert_true(y[i + 16] == 0.5f * (float)(7 - i));
	}
	put16(b, 0x3400); /* d = 0.25 */
	for (int i = 0; i < 32; i++)
		b[2 + i] = (uint8_t)(int8_t)(i * 8 - 128);
	wk_dequantize_row(WK_Q_Q8_0, b, y, 32);
	for (int i = 0; i < 32; i++)
		assert_true(y[i] == 0.25f * (float)(i * 8 - 128));
}

/*
 * Q4_1, Q5_0, Q5_1 blocks written by hand from the format notes (GGUF's
 * block_q4_1 / block_q5_0 / block_q5_1): value i's fifth bit is bit i of
 * the little-endian qh word; x = q * d + m, Q5_0 (q - 16) * d.
 */
static void test_known_q4_1_q5(void **state)
{
	uint8_t b[24];
	float y[32];
	uint32_t h = 0xA5C3F00Fu;

	(void)state;
	put16(b, 0x3800);     /* d = 0.5 */
	put16(b + 2, 0xBC00); /* m = -1 */
	for (int i = 0; i < 16; i++)
		b[4 + i] = (uint8_t)(i | ((15 - i) << 4));
	wk_dequantize_row(WK_Q_Q4_1, b, y, 32);
	for (int i = 0; i < 16; i++) {
		assert_true(y[i] == 0.5f * (float)i - 1.0f);
		assert_true(y[i + 16] == 0.5f * (float)(15 - i) - 1.0f);
	}
	put16(b, 0x3400); /* d = 0.25 */
	for (int k = 0; k < 4; k++)
		b[2 + k] = (uint8_t)(h >> (8 * k));
	for (int i = 0; i < 16; i++)
		b[6 + i] = (uint8_t)(i | ((15 - i) << 4));
	wk_dequantize_row(WK_Q_Q5_0, b, y, 32);
	for (int i = 0; i < 16; i++) {
		int q0 = i | (int)((h >> i) & 1) << 4, q1 = (15 - i) | (int)((h >> (i + 16)) & 1) << 4;
		assert_true(y[i] == 0.25f * (float)(q0 - 16));
		assert_true(y[i + 16] == 0.25f * (float)(q1 - 16));
	}
	put16(b, 0x3C00);     /* d = 1 */
	put16(b + 2, 0x4000); /* m = 2 */
	for (int k = 0; k < 4; k++)
		b[4 + k] = (uint8_t)(h >> (8 * k));
	for (int i = 0; i < 16; i++)
		b[8 + i] = (uint8_t)((15 - i) | (i << 4));
	wk_dequantize_row(WK_Q_Q5_1, b, y, 32);
	for (int i = 0; i < 16; i++) {
		int q0 = (15 - i) | (int)((h >> i) & 1) << 4, q1 = i | (int)((h >> (i + 16)) & 1) << 4;
		assert_true(y[i] == (float)q0 + 2.0f);
		assert_true(y[i + 16] == (float)q1 + 2.0f);
	}
	/* the quantisers use every level: the block's extremes map to 0 and
	 * 15 / 31 (Q4_1, Q5_1) and to level 0 (Q5_0, the largest magnitude) */
	for (int i = 0; i < 32; i++)
		y[i] = (float)i - 10.0f;
	wk_quantize_row(WK_Q_Q5_1, y, b, 32);
	assert_int_equal(b[8] & 15, 0);
	assert_int_equal(b[8 + 15] >> 4, 15);
	assert_int_equal(b[7] >> 7, 1); /* value 31: fifth bit set */
	wk_quantize_row(WK_Q_Q5_0, y, b, 32);
	assert_int_equal(b[6 + 15] >> 4, 0); /* 21 is the largest magnitude: -16 * d */
	wk_quantize_row(WK_Q_Q4_1, y, b, 32);
	assert_int_equal(b[4] & 15, 0);
	assert_int_equal(b[4 + 15] >> 4, 15);
}

/* The whole of a file of the source tree ($SLUICE_SOURCE_DIR) into buf. */
static size_t read_fixture(const char *name, void *buf, size_t cap)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char path[1024];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/tests/worker/model/llamacpp/%s", src ? src : ".", name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

/*
 * Against llama.cpp (tests/worker/model/llamacpp/README.md says how the
 * bytes were made): our quantiser on the source floats writes exactly
 * llama-quantize's blocks, and our dequantiser on those blocks gives
 * exactly ggml's floats.
 */
static void test_llamacpp_blocks(void **state)
{
	/* same_quant: our quantiser is llama.cpp's reference one (IQ4_NL's,
	 * IQ4_XS's, Q2_K's and Q3_K's are searches of their own: only the
	 * decoding is compared, and our error against theirs) */
	static const struct { const char *file; uint32_t type; int same_quant; } cases[] = {
		{ "attn_q-q4_1.bin", WK_Q_Q4_1, 1 },
		{ "attn_q-q5_0.bin", WK_Q_Q5_0, 1 },
		{ "attn_q-q5_1.bin", WK_Q_Q5_1, 1 },
		{ "attn_q-iq4_nl.bin", WK_Q_IQ4_NL, 0 },
		{ "attn_q-q2_k.bin", WK_Q_Q2_K, 0 },
		{ "attn_q-q3_k.bin", WK_Q_Q3_K, 0 },
		{ "attn_q-iq4_xs.bin", WK_Q_IQ4_XS, 0 },
	};
	static float src[1024], ours[1024], ggml[1024];
	static uint8_t fix[8192], q[1024];

	(void)state;
	assert_int_equal(read_fixture("attn_q-f32.bin", src, sizeof(src)), sizeof(src));
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t rb = wk_qtype_row_bytes(cases[c].type, 1024);

		assert_int_equal(read_fixture(cases[c].file, fix, sizeof(fix)), rb + sizeof(ggml));
		memcpy(ggml, fix + rb, sizeof(ggml));
		wk_quantize_row(cases[c].type, src, q, 1024);
		for (size_t i = 0; cases[c].same_quant && i < rb; i++)
			if (q[i] != fix[i])
				fail_msg("%s: byte %zu is 0x%02x, llama-quantize wrote 0x%02x",
					 wk_qtype_name(cases[c].type), i, q[i], fix[i]);
		wk_dequantize_row(cases[c].type, fix, ours, 1024);
		for (int i = 0; i < 1024; i++)
			if (memcmp(&ours[i], &ggml[i], 4) != 0)
				fail_msg("%s: value %d is %.9g, ggml gives %.9g",
					 wk_qtype_name(cases[c].type), i, ours[i], ggml[i]);
		if (!cases[c].same_quant) {
			/* our own quantiser: not much worse than llama.cpp's search */
			double e_ours, e_theirs;

			wk_dequantize_row(cases[c].type, q, ours, 1024);
			e_ours = rel_err(src, ours, 1024);
			e_theirs = rel_err(src, ggml, 1024);
			printf("# %s: relative error ours %.4f, llama-quantize %.4f\n",
			       wk_qtype_name(cases[c].type), e_ours, e_theirs);
			assert_true(e_ours < 1.25 * e_theirs);
		}
	}
}

/* Q4_K / Q5_K 12-byte scale packing, written out from the format notes. */
static void pack_k4(uint8_t *s, const int *sc, const int *m)
{
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)((sc[j] & 0x3f) | ((sc[j + 4] & 0x30) << 2));
		s[4 + j] = (uint8_t)((m[j] & 0x3f) | ((m[j + 4] & 0x30) << 2));
		s[8 + j] = (uint8_t)((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
	}
}

static void test_known_q4_k_q5_k(void **state)
{
	(void)state;
	static const int sc[8] = { 1, 2, 62, 4, 17, 33, 49, 63 };
	static const int m[8] = { 0, 1, 2, 63, 20, 40, 60, 5 };
	uint8_t b[176];
	float y[256];
	put16(b, 0x3c00);     /* d = 1 */
	put16(b + 2, 0x3800); /* dmin = 0.5 */
	pack_k4(b + 4, sc, m);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			b[16 + 32 * c + l] = (uint8_t)((l % 16) | (((l + c) % 16) << 4));
	wk_dequantize_row(WK_Q_Q4_K, b, y, 256);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			assert_true(y[64 * c + l] == (float)(sc[2 * c] * (l % 16)) - 0.5f * (float)m[2 * c]);
			assert_true(y[64 * c + 32 + l] ==
				    (float)(sc[2 * c + 1] * ((l + c) % 16)) - 0.5f * (float)m[2 * c + 1]);
		}
	/* Q5_K: same header, qh[32] at 16, qs[128] at 48 */
	for (int l = 0; l < 32; l++)
		b[16 + l] = (uint8_t)(l * 37 + 11);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++)
			b[48 + 32 * c + l] = (uint8_t)((l % 16) | (((l + c) % 16) << 4));
	wk_dequantize_row(WK_Q_Q5_K, b, y, 256);
	for (int c = 0; c < 4; c++)
		for (int l = 0; l < 32; l++) {
			int qh = (uint8_t)(l * 37 + 11);
			int lo = (l % 16) + 16 * ((qh >> (2 * c)) & 1);
			int hi = ((l + c) % 16) + 16 * ((qh >> (2 * c + 1)) & 1);
			assert_true(y[64 * c + l] == (float)(sc[2 * c] * lo) - 0.5f * (float)m[2 * c]);
			assert_true(y[64 * c + 32 + l] == (float)(sc[2 * c + 1] * hi) - 0.5f * (float)m[2 * c + 1]);
		}
}

static void test_known_q6_k(void **state)
{
	(void)state;
	uint8_t b[210];
	float y[256];
	for (int i = 0; i < 128; i++)
		b[i] = (uint8_t)(i * 29 + 3);        /* ql */
	for (int i = 0; i < 64; i++)
		b[128 + i] = (uint8_t)(i * 53 + 7);  /* qh */
	for (int j = 0; j < 16; j++)
		b[192 + j] = (uint8_t)(int8_t)((j - 8) * 15);
	put16(b + 208, 0x3800); /* d = 0.5 */
	wk_dequantize_row(WK_Q_Q6_K, b, y, 256);
	for (int i = 0; i < 256; i++) {
		/* value i: half h, quarter k, lane l */
		int h = i / 128, k = (i % 128) / 32, l = i % 32;
		int qlb = b[64 * h + 32 * (k & 1) + l];
		int low = k >= 2 ? qlb >> 4 : qlb & 15;
		int high = (b[128 + 32 * h + l] >> (2 * k)) & 3;
		int q = (low | (high << 4)) - 32;
		float want = 0.5f * (float)((i / 16 - 8) * 15) * (float)q;
		if (y[i] != want)
			fail_msg("Q6_K value %d: got %g want %g", i, y[i], want);
	}
}

static void test_known_q8_k(void **state)
{
	(void)state;
	uint8_t b[292];
	float y[256], x[256];
	float d = 0.125f;
	memcpy(b, &d, 4);
	for (int i = 0; i < 256; i++)
		b[4 + i] = (uint8_t)(int8_t)(i - 128);
	wk_dequantize_row(WK_Q_Q8_K, b, y, 256);
	for (int i = 0; i < 256; i++)
		assert_true(y[i] == 0.125f * (float)(i - 128));
	/* quantise writes bsums = sum of each 16 quants */
	for (int i = 0; i < 256; i++)
		x[i] = rnd_normal();
	wk_quantize_row(WK_Q_Q8_K, x, b, 256);
	for (int j = 0; j < 16; j++) {
		int s = 0;
		for (int i = 0; i < 16; i++)
			s += (int8_t)b[4 + 16 * j + i];
		int16_t got;
		memcpy(&got, b + 260 + 2 * j, 2);
		assert_int_equal(got, s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_f16),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_known_q4_0_q8_0),
		cmocka_unit_test(test_known_q4_1_q5),
		cmocka_unit_test(test_llamacpp_blocks),
		cmocka_unit_test(test_known_q4_k_q5_k),
		cmocka_unit_test(test_known_q6_k),
		cmocka_unit_test(test_known_q8_k),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
