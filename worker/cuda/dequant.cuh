/*
 * dequant.cuh - device-side decoding of weight rows, shared by the GEMV,
 * the dequantise-to-BF16 (GEMM path) and the embedding kernels.
 *
 * A row is read in "units": 8 values (16 bytes) of F16/BF16, 4 values
 * (16 bytes) of F32, and 32 values for quantised types (one Q8_0/Q4_0
 * block, or one 32-value sub-block of a Q4_K/Q5_K/Q6_K super-block).
 * Decoding follows worker/quant.c (the reference) value for value: the
 * same scale products in float, so a dequantised weight is bit-identical
 * to wk_dequantize_row().
 * Header-only (__device__ inline); T is the ggml type id (enum wk_qtype).
 */
#ifndef SLUICE_WORKER_CUDA_DEQUANT_CUH
#define SLUICE_WORKER_CUDA_DEQUANT_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "worker/quant.h"

template <int T> struct wk_cu_unit;

__device__ __forceinline__ float wk_cu_h2f(const uint8_t *p)
{
	return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

__device__ __forceinline__ float wk_cu_bf2f(uint16_t u)
{
	return __uint_as_float((uint32_t)u << 16);
}

/* 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (scales s[12]). */
__device__ __forceinline__ void wk_cu_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
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
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		float4 v = __ldg((const float4 *)row + u);
		w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w;
	}
};

template <> struct wk_cu_unit<WK_Q_F16> {
	static constexpr int N = 8;
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		uint4 v = __ldg((const uint4 *)row + u);
		const __half2 *h = (const __half2 *)&v;
		for (int i = 0; i < 4; i++) {
			float2 f = __half22float2(h[i]);
			w[2 * i] = f.x;
			w[2 * i + 1] = f.y;
		}
	}
};

template <> struct wk_cu_unit<WK_Q_BF16> {
	static constexpr int N = 8;
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
	{
		uint4 v = __ldg((const uint4 *)row + u);
		const uint32_t p[4] = { v.x, v.y, v.z, v.w };
		for (int i = 0; i < 4; i++) {
			w[2 * i] = __uint_as_float(p[i] << 16);
			w[2 * i + 1] = __uint_as_float(p[i] & 0xffff0000u);
		}
	}
};

template <> struct wk_cu_unit<WK_Q_Q8_0> {
	static constexpr int N = 32;
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
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
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
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

template <> struct wk_cu_unit<WK_Q_Q4_K> {
	static constexpr int N = 32;
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
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
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
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
	__device__ static __forceinline__ void get(const uint8_t *row, uint32_t u, float *w)
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

/* Calls F.template operator()<T>() for a runtime type; returns 0 for unsupported types. */
#define WK_CU_DISPATCH(type, BODY)                                           \
	switch (type) {                                                      \
	case WK_Q_F32: { constexpr int WT = WK_Q_F32; BODY; } break;         \
	case WK_Q_F16: { constexpr int WT = WK_Q_F16; BODY; } break;         \
	case WK_Q_BF16: { constexpr int WT = WK_Q_BF16; BODY; } break;       \
	case WK_Q_Q8_0: { constexpr int WT = WK_Q_Q8_0; BODY; } break;       \
	case WK_Q_Q4_0: { constexpr int WT = WK_Q_Q4_0; BODY; } break;       \
	case WK_Q_Q4_K: { constexpr int WT = WK_Q_Q4_K; BODY; } break;       \
	case WK_Q_Q5_K: { constexpr int WT = WK_Q_Q5_K; BODY; } break;       \
	case WK_Q_Q6_K: { constexpr int WT = WK_Q_Q6_K; BODY; } break;       \
	default: return CM_EUNSUPPORTED;                                     \
	}

#endif
