/*
 * ops.c - run-time dispatch of the ops in ops.h to the ISA builds
 * (ops_impl.h, compiled into kern_scalar.c / kern_avx2.c / kern_avx512.c)
 * and the rotary embedding, which is cheap enough to stay portable.
 * The table pointer is chosen once (atomic, first use) and may be forced
 * by tests with wk_cpu_ops_set_isa.
 */
#include "worker/cpu/ops.h"

#include <math.h>
#include <stdatomic.h>

#include "worker/cpu/ops_internal.h"

static _Atomic(const struct wk_cpu_ops *) wk_cpu_ops_cur;
static atomic_int wk_cpu_ops_cur_isa;

static const struct wk_cpu_ops *wk_cpu_ops_table(enum wk_cpu_isa isa)
{
	switch (isa) {
#if defined(__x86_64__)
	case WK_CPU_ISA_AVX2: return &wk_cpu_ops_avx2;
	case WK_CPU_ISA_AVX512:
	case WK_CPU_ISA_AVX512BF16: return &wk_cpu_ops_avx512;
#endif
	default: return &wk_cpu_ops_scalar;
	}
}

static const struct wk_cpu_ops *wk_cpu_ops_get(void)
{
	const struct wk_cpu_ops *o = atomic_load_explicit(&wk_cpu_ops_cur, memory_order_acquire);
	if (o == NULL) {
		enum wk_cpu_isa isa = wk_cpu_isa_default();
		atomic_store(&wk_cpu_ops_cur_isa, (int)isa);
		o = wk_cpu_ops_table(isa);
		atomic_store_explicit(&wk_cpu_ops_cur, o, memory_order_release);
	}
	return o;
}

enum cm_status wk_cpu_ops_set_isa(enum wk_cpu_isa isa)
{
	if (!wk_cpu_isa_available(isa))
		return CM_EUNSUPPORTED;
	atomic_store(&wk_cpu_ops_cur_isa, (int)isa);
	atomic_store(&wk_cpu_ops_cur, wk_cpu_ops_table(isa));
	return CM_OK;
}

enum wk_cpu_isa wk_cpu_ops_isa(void)
{
	(void)wk_cpu_ops_get();
	return (enum wk_cpu_isa)atomic_load(&wk_cpu_ops_cur_isa);
}

void wk_cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
	wk_cpu_ops_get()->rmsnorm(out, x, w, n, eps);
}

void wk_cpu_add(float *y, const float *x, int n)
{
	wk_cpu_ops_get()->add(y, x, n);
}

void wk_cpu_silu_mul(float *out, const float *gate, const float *up, int n)
{
	wk_cpu_ops_get()->silu_mul(out, gate, up, n);
}

void wk_cpu_softmax(float *x, int n)
{
	wk_cpu_ops_get()->softmax(x, n);
}

void wk_cpu_scale(float *x, int n, float s)
{
	wk_cpu_ops_get()->scale(x, n, s);
}

float wk_cpu_dot_f16(const uint16_t *a, const float *b, int n)
{
	return wk_cpu_ops_get()->dot_f16(a, b, n);
}

void wk_cpu_axpy_f16(float *y, float alpha, const uint16_t *x, int n)
{
	wk_cpu_ops_get()->axpy_f16(y, alpha, x, n);
}

void wk_cpu_f32_to_f16(uint16_t *dst, const float *src, int n)
{
	wk_cpu_ops_get()->f32_to_f16(dst, src, n);
}

float wk_cpu_expf(float x)
{
	return wk_cpu_ops_get()->expf(x);
}

float wk_cpu_dot_f32(const float *a, const float *b, int n)
{
	return wk_cpu_ops_get()->dot_f32(a, b, n);
}

void wk_cpu_axpy_f32(float *y, float alpha, const float *x, int n)
{
	wk_cpu_ops_get()->axpy_f32(y, alpha, x, n);
}

void wk_cpu_att_scores(const uint8_t *k, size_t row_stride, int f16, int n, const float *q, int nh,
		       int hd, float *s, size_t s_stride)
{
	wk_cpu_ops_get()->att_scores(k, row_stride, f16, n, q, nh, hd, s, s_stride);
}

void wk_cpu_att_values(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int f16,
		       int n, const float *w, size_t w_stride)
{
	wk_cpu_ops_get()->att_values(out, nh, hd, v, row_stride, f16, n, w, w_stride);
}

void wk_cpu_gelu(float *x, int n)
{
	wk_cpu_ops_get()->gelu(x, n);
}

void wk_cpu_gelu_mul(float *out, const float *gate, const float *up, int n)
{
	wk_cpu_ops_get()->gelu_mul(out, gate, up, n);
}

void wk_cpu_softcap(float *x, int n, float c)
{
	wk_cpu_ops_get()->softcap(x, n, c);
}

/* ---- rotary embedding ------------------------------------------------- */

void wk_cpu_rope_sincos(const struct wk_cpu_rope *rope, int pos, float *cs)
{
	int half = rope->n_rot / 2;
	double ms = rope->mscale > 0 ? (double)rope->mscale : 1.0;
	for (int i = 0; i < half; i++) {
		double inv = pow((double)rope->base, -2.0 * i / rope->n_rot);
		double theta = (double)pos * rope->freq_scale * inv;
		if (rope->freq_factors)
			theta /= rope->freq_factors[i];
		cs[2 * i] = (float)(cos(theta) * ms);
		cs[2 * i + 1] = (float)(sin(theta) * ms);
	}
}

void wk_cpu_rope_apply(const struct wk_cpu_rope *rope, const float *cs, float *x, int n_heads,
		       int head_dim)
{
	int half = rope->n_rot / 2;
	for (int h = 0; h < n_heads; h++) {
		float *v = x + (size_t)h * head_dim;
		for (int i = 0; i < half; i++) {
			int a = rope->neox ? i : 2 * i, b = rope->neox ? i + half : 2 * i + 1;
			float c = cs[2 * i], s = cs[2 * i + 1];
			float x0 = v[a], x1 = v[b];
			v[a] = x0 * c - x1 * s;
			v[b] = x0 * s + x1 * c;
		}
	}
}
