/*
 * dequant.cu - wk_cuda_dequant_selfcheck(): the device decoders of
 * dequant.cuh, compiled for the host, against the reference dequantiser
 * (worker/model/quant.c) on random rows of every weight type.  Needs no GPU, so
 * it runs in CI where the rest of the CUDA tests skip.
 */
#include "worker/cuda/dequant.cuh"

#include <stdio.h>

#include "worker/cuda/backend.h"

#define WK_CU_SELF_N 1024

template <int T>
static enum cm_status wk_cu_selfcheck_type(uint32_t seed, char *err, size_t len)
{
	constexpr int N = wk_cu_unit<T>::N;
	static float x[WK_CU_SELF_N], ref[WK_CU_SELF_N];
	static uint8_t q[WK_CU_SELF_N * 4 + 64];
	uint32_t s = seed;

	for (int i = 0; i < WK_CU_SELF_N; i++) {
		s = s * 1664525u + 1013904223u;
		/* a spread of magnitudes, both signs, and some exact zeros */
		x[i] = (i % 97 == 0) ? 0.0f
				     : ((float)(s >> 8) / 16777216.0f - 0.5f) * (float)(1 + (i % 7));
	}
	wk_quantize_row(T, x, q, WK_CU_SELF_N);
	wk_dequantize_row(T, q, ref, WK_CU_SELF_N);
	for (uint32_t u = 0; u < WK_CU_SELF_N / N; u++) {
		float w[N];

		wk_cu_unit<T>::get(q, u, w);
		for (int i = 0; i < N; i++)
			if (memcmp(&w[i], &ref[u * N + i], sizeof(float)) != 0) {
				snprintf(err, len, "cuda dequant %s: value %u decodes to %.9g, "
					 "the reference gives %.9g", wk_qtype_name(T),
					 u * N + i, w[i], ref[u * N + i]);
				return CM_EINTERNAL;
			}
	}
	return CM_OK;
}

extern "C" enum cm_status wk_cuda_dequant_selfcheck(char *err, size_t len)
{
	static const uint32_t types[] = { WK_Q_F32, WK_Q_F16, WK_Q_BF16, WK_Q_Q8_0,
					  WK_Q_Q4_0, WK_Q_Q4_1, WK_Q_Q5_0, WK_Q_Q5_1, WK_Q_IQ4_NL,
					  WK_Q_Q4_K, WK_Q_Q5_K, WK_Q_Q6_K, WK_Q_Q2_K, WK_Q_Q3_K,
					  WK_Q_IQ4_XS };

	if (len > 0)
		err[0] = '\0';
	for (uint32_t seed = 1; seed <= 3; seed++)
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			enum cm_status st = CM_OK;

			WK_CU_DISPATCH(types[i], (st = wk_cu_selfcheck_type<WT>(seed * 7919u, err, len)));
			if (st != CM_OK)
				return st;
		}
	return CM_OK;
}
