/*
 * ops_internal.h - the ops table each ISA build fills in (worker/cpu/ only).
 */
#ifndef SLUICE_WORKER_CPU_OPS_INTERNAL_H
#define SLUICE_WORKER_CPU_OPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "worker/model/quant.h"

struct wk_cpu_ops {
	void (*rmsnorm)(float *out, const float *x, const float *w, int n, float eps);
	void (*add)(float *y, const float *x, int n);
	void (*silu_mul)(float *out, const float *gate, const float *up, int n);
	void (*softmax)(float *x, int n);
	void (*scale)(float *x, int n, float s);
	float (*dot_f16)(const uint16_t *a, const float *b, int n);
	void (*axpy_f16)(float *y, float alpha, const uint16_t *x, int n);
	void (*f32_to_f16)(uint16_t *dst, const float *src, int n);
	float (*expf)(float x);
	float (*dot_f32)(const float *a, const float *b, int n);
	void (*axpy_f32)(float *y, float alpha, const float *x, int n);
	void (*gelu)(float *x, int n);
	void (*gelu_mul)(float *out, const float *gate, const float *up, int n);
	void (*softcap)(float *x, int n, float c);
	void (*att_scores)(const uint8_t *k, size_t row_stride, int f16, int n, const float *q,
			   int nh, int hd, float *s, size_t s_stride);
	void (*att_values)(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int f16,
			   int n, const float *w, size_t w_stride);
};

extern const struct wk_cpu_ops wk_cpu_ops_scalar;
#if defined(__x86_64__)
extern const struct wk_cpu_ops wk_cpu_ops_avx2;
extern const struct wk_cpu_ops wk_cpu_ops_avx512;
#endif

#endif
