/*
 * dequant.cuh - device-side decoding of weight rows, shared by the GEMV,
 * the dequantise-to-BF16 (GEMM path) and the embedding kernels.
 *
 * A row is read in "units": 8 values (16 bytes) of F16/BF16, 4 values
 * (16 bytes) of F32, and 32 values for quantised types (one Q8_0, Q4_0,
 * Q4_1, Q5_0 or Q5_1 block, or one 32-value sub-block of a Q2_K, Q3_K,
 * IQ4_XS, Q4_K, Q5_K or Q6_K super-block).
 * Decoding follows worker/model/quant.c (the reference) value for value: the
 * same scale products in float, in the same order.  On the host the result
 * is bit-identical to wk_dequantize_row() (wk_cuda_dequant_selfcheck()
 * checks it without a GPU); on the device nvcc may contract a product and
 * a subtraction into one FMA, a last-bit difference.
 * Header-only (__host__ __device__ inline); T is the ggml type id.
 */
#ifndef SLUICE_WORKER_CUDA_DEQUANT_CUH
#define SLUICE_WORKER_CUDA_DEQUANT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "worker/model/quant.h"
}

#define WK_CU_HD __host__ __device__ __forceinline__

template <int T> struct wk_cu_unit;

WK_CU_HD float wk_cu_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
	return __uint_as_float(u);
#else
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
#endif
}

WK_CU_HD float wk_cu_half_f32(uint16_t h)
{
#ifdef __CUDA_ARCH__
	return __half2float(__ushort_as_half(h));
#else
	return wk_f16_to_f32(h);
#endif
}

/* a 16-byte load: through the read-only cache on the device */
WK_CU_HD uint4 wk_cu_ld16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
	return __ldg((const uint4 *)p);
#else
	uint4 v;

	memcpy(&v, p, sizeof(v));
	return v;
#endif
}

WK_CU_HD float wk_cu_h2f(const uint8_t *p)
{
	return wk_cu_half_f32((uint16_t)(p[0] | (p[1] << 8)));
}

/* 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (scales s[12]). */
WK_CU_HD void wk_cu_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

template <> struct wk_cu_unit<WK_Q_F32> {
	static constexpr int N = 4;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		uint4 v = wk_cu_ld16(row + (uint64_t)u * 16);
		w[0] = wk_cu_bits_f32(v.x); w[1] = wk_cu_bits_f32(v.y);
		w[2] = wk_cu_bits_f32(v.z); w[3] = wk_cu_bits_f32(v.w);
	}
};

template <> struct wk_cu_unit<WK_Q_F16> {
	static constexpr int N = 8;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		uint4 v = wk_cu_ld16(row + (uint64_t)u * 16);
		const uint32_t p[4] = { v.x, v.y, v.z, v.w };
		for (int i = 0; i < 4; i++) {
			w[2 * i] = wk_cu_half_f32((uint16_t)(p[i] & 0xffffu));
			w[2 * i + 1] = wk_cu_half_f32((uint16_t)(p[i] >> 16));
		}
	}
};

template <> struct wk_cu_unit<WK_Q_BF16> {
	static constexpr int N = 8;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		uint4 v = wk_cu_ld16(row + (uint64_t)u * 16);
		const uint32_t p[4] = { v.x, v.y, v.z, v.w };
		for (int i = 0; i < 4; i++) {
			w[2 * i] = wk_cu_bits_f32(p[i] << 16);
			w[2 * i + 1] = wk_cu_bits_f32(p[i] & 0xffff0000u);
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q8_0> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 34;
		const uint16_t *q16 = (const uint16_t *)(b + 2); /* 2-byte aligned */
		float d = wk_cu_h2f(b);
		for (int i = 0; i < 16; i++) {
			uint16_t v = q16[i];
			w[2 * i] = d * (float)(int8_t)(v & 0xff);
			w[2 * i + 1] = d * (float)(int8_t)(v >> 8);
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q4_0> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 18;
		const uint16_t *q16 = (const uint16_t *)(b + 2);
		float d = wk_cu_h2f(b);
		for (int i = 0; i < 8; i++) {
			uint16_t v = q16[i];
			int b0 = v & 0xff, b1 = v >> 8;
			w[2 * i] = d * (float)((b0 & 15) - 8);
			w[2 * i + 1] = d * (float)((b1 & 15) - 8);
			w[2 * i + 16] = d * (float)((b0 >> 4) - 8);
			w[2 * i + 17] = d * (float)((b1 >> 4) - 8);
		}
	}
};

/* Q4_1, Q5_0, Q5_1: unsigned levels (nibbles, the fifth bits from qh),
 * x = q * d + m (Q5_0: (q - 16) * d), as quant.c writes them. */
WK_CU_HD uint32_t wk_cu_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

template <> struct wk_cu_unit<WK_Q_Q4_1> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 20, *qs = b + 4;
		float d = wk_cu_h2f(b), m = wk_cu_h2f(b + 2);
		for (int i = 0; i < 16; i++) {
			w[i] = (float)(qs[i] & 15) * d + m;
			w[i + 16] = (float)(qs[i] >> 4) * d + m;
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q5_0> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 22, *qs = b + 6;
		uint32_t h = wk_cu_le32(b + 2);
		float d = wk_cu_h2f(b);
		for (int i = 0; i < 16; i++) {
			int q0 = (qs[i] & 15) | (int)(((h >> i) & 1) << 4);
			int q1 = (qs[i] >> 4) | (int)(((h >> (i + 16)) & 1) << 4);
			w[i] = (float)(q0 - 16) * d;
			w[i + 16] = (float)(q1 - 16) * d;
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q5_1> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 24, *qs = b + 8;
		uint32_t h = wk_cu_le32(b + 4);
		float d = wk_cu_h2f(b), m = wk_cu_h2f(b + 2);
		for (int i = 0; i < 16; i++) {
			int q0 = (qs[i] & 15) | (int)(((h >> i) & 1) << 4);
			int q1 = (qs[i] >> 4) | (int)(((h >> (i + 16)) & 1) << 4);
			w[i] = (float)q0 * d + m;
			w[i + 16] = (float)q1 * d + m;
		}
	}
};

/* 32 values of IQ4_NL's levels (quant.c's wk_iq4nl_levels) from the 16
 * nibble bytes qs, times d: an IQ4_NL block, or an IQ4_XS sub-block with
 * its scale applied */
WK_CU_HD void wk_cu_iq4_levels(const uint8_t *qs, float d, float *w)
{
	const int8_t lv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
				1, 13, 25, 38, 53, 69, 89, 113 };

	for (int i = 0; i < 16; i++) {
		w[i] = d * (float)lv[qs[i] & 15];
		w[i + 16] = d * (float)lv[qs[i] >> 4];
	}
}

template <> struct wk_cu_unit<WK_Q_IQ4_NL> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)u * 18;

		wk_cu_iq4_levels(b + 2, wk_cu_h2f(b), w);
	}
};

template <> struct wk_cu_unit<WK_Q_Q4_K> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 144;
		int j = (int)(u & 7), c = j >> 1, sc, m;
		const uint8_t *qs = b + 16 + 32 * c;
		float d = wk_cu_h2f(b), dmin = wk_cu_h2f(b + 2);

		wk_cu_k4_scale_min(b + 4, j, &sc, &m);
		float dd = d * (float)sc, nn = dmin * (float)m;
		int sh = (j & 1) * 4;
		for (int l = 0; l < 32; l++)
			w[l] = dd * (float)((qs[l] >> sh) & 15) - nn;
	}
};

template <> struct wk_cu_unit<WK_Q_Q5_K> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 176;
		int j = (int)(u & 7), c = j >> 1, sc, m;
		const uint8_t *qh = b + 16, *qs = b + 48 + 32 * c;
		float d = wk_cu_h2f(b), dmin = wk_cu_h2f(b + 2);

		wk_cu_k4_scale_min(b + 4, j, &sc, &m);
		float dd = d * (float)sc, nn = dmin * (float)m;
		int sh = (j & 1) * 4;
		for (int l = 0; l < 32; l++) {
			int q = ((qs[l] >> sh) & 15) | (((qh[l] >> j) & 1) << 4);
			w[l] = dd * (float)q - nn;
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q6_K> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 210;
		int j = (int)(u & 7), h = j >> 2, k = j & 3;
		const uint8_t *ql = b + 64 * h + 32 * (k & 1), *qh = b + 128 + 32 * h;
		const int8_t *sc = (const int8_t *)(b + 192);
		float d = wk_cu_h2f(b + 208);
		int lsh = (k >> 1) * 4, hsh = 2 * k;

		for (int l = 0; l < 32; l++) {
			int q = (((ql[l] >> lsh) & 15) | (((qh[l] >> hsh) & 3) << 4)) - 32;
			w[l] = d * (float)sc[8 * h + 2 * k + l / 16] * (float)q;
		}
	}
};

/* Q2_K unit j of a block: h = j / 4, k = j % 4, values 128h + 32k + l */
template <> struct wk_cu_unit<WK_Q_Q2_K> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 84;
		int j = (int)(u & 7), h = j >> 2, k = j & 3;
		const uint8_t *qs = b + 16 + 32 * h;
		float d = wk_cu_h2f(b + 80), dmin = wk_cu_h2f(b + 82);

		for (int hf = 0; hf < 2; hf++) {
			int sc = b[8 * h + 2 * k + hf];
			float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);

			for (int l = 16 * hf; l < 16 * hf + 16; l++)
				w[l] = dl * (float)((qs[l] >> (2 * k)) & 3) - ml;
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q3_K> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 110;
		int j = (int)(u & 7), h = j >> 2, k = j & 3;
		const uint8_t *hm = b, *qs = b + 32 + 32 * h, *s = b + 96;
		float d = wk_cu_h2f(b + 108);

		for (int hf = 0; hf < 2; hf++) {
			int si = 8 * h + 2 * k + hf;
			int lo = si < 8 ? s[si] & 15 : s[si - 8] >> 4;
			int hi = (s[8 + si % 4] >> (2 * (si / 4))) & 3;
			float dl = d * (float)((lo | (hi << 4)) - 32);

			for (int l = 16 * hf; l < 16 * hf + 16; l++) {
				int q = ((qs[l] >> (2 * k)) & 3) - (((hm[l] >> (4 * h + k)) & 1) ? 0 : 4);

				w[l] = dl * (float)q;
			}
		}
	}
};

template <> struct wk_cu_unit<WK_Q_IQ4_XS> {
	static constexpr int N = 32;
	__host__ __device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		const uint8_t *b = row + (uint64_t)(u >> 3) * 136;
		int j = (int)(u & 7), sh = b[2] | (b[3] << 8);
		int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4);

		wk_cu_iq4_levels(b + 8 + 16 * j, wk_cu_h2f(b) * (float)(ls - 32), w);
	}
};

/* Calls F.template operator()<T>() for a runtime type; returns 0 for unsupported types. */
#define WK_CU_DISPATCH(type, BODY)                                           \
	switch (type) {                                                      \
	case WK_Q_F32: { constexpr int WT = WK_Q_F32; BODY; } break;         \
	case WK_Q_F16: { constexpr int WT = WK_Q_F16; BODY; } break;         \
	case WK_Q_BF16: { constexpr int WT = WK_Q_BF16; BODY; } break;       \
	case WK_Q_Q8_0: { constexpr int WT = WK_Q_Q8_0; BODY; } break;       \
	case WK_Q_Q4_0: { constexpr int WT = WK_Q_Q4_0; BODY; } break;       \
	case WK_Q_Q4_1: { constexpr int WT = WK_Q_Q4_1; BODY; } break;       \
	case WK_Q_Q5_0: { constexpr int WT = WK_Q_Q5_0; BODY; } break;       \
	case WK_Q_Q5_1: { constexpr int WT = WK_Q_Q5_1; BODY; } break;       \
	case WK_Q_IQ4_NL: { constexpr int WT = WK_Q_IQ4_NL; BODY; } break;   \
	case WK_Q_Q2_K: { constexpr int WT = WK_Q_Q2_K; BODY; } break;       \
	case WK_Q_Q3_K: { constexpr int WT = WK_Q_Q3_K; BODY; } break;       \
	case WK_Q_IQ4_XS: { constexpr int WT = WK_Q_IQ4_XS; BODY; } break;   \
	case WK_Q_Q4_K: { constexpr int WT = WK_Q_Q4_K; BODY; } break;       \
	case WK_Q_Q5_K: { constexpr int WT = WK_Q_Q5_K; BODY; } break;       \
	case WK_Q_Q6_K: { constexpr int WT = WK_Q_Q6_K; BODY; } break;       \
	default: return CM_EUNSUPPORTED;                                     \
	}

#endif
