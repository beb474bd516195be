/*
 * ops.h - the small vector operations of the forward pass besides matmul:
 * RMS norm, rotary embedding, softmax, scaling, SwiGLU, GELU (alone and gated),
 * soft-capping, residual add, the F16 dot / axpy used by attention over an
 * F16 KV cache and their F32 forms (the encoder's attention), and the
 * attention of one KV head's query group over a run of cached positions
 * (the decoder's: the same values as those dot / axpy calls, in fewer
 * instructions).
 *
 * Each has a scalar, an AVX2 and an AVX-512 build, picked once at run
 * time like the matmul kernels (SLUICE_CPU_ISA overrides).  Reductions use
 * 16 partial sums in a fixed pattern, so a result depends only on the
 * inputs (never on batch, thread or timing); builds may differ in the last
 * bits.  Pure functions on caller memory; any thread.
 */
#ifndef SLUICE_WORKER_CPU_OPS_H
#define SLUICE_WORKER_CPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "worker/cpu/matmul.h"

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]; out may be x. */
void wk_cpu_rmsnorm(float *out, const float *x, const float *w, int n, float eps);
/* y[i] += x[i]. */
void wk_cpu_add(float *y, const float *x, int n);
/* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g); out may alias. */
void wk_cpu_silu_mul(float *out, const float *gate, const float *up, int n);
/* In place; -inf entries become exactly 0. */
void wk_cpu_softmax(float *x, int n);
/* x[i] *= s: each product rounded once, the same bits in every build. */
void wk_cpu_scale(float *x, int n, float s);
/* sum a[i] * b[i], a in IEEE half. */
float wk_cpu_dot_f16(const uint16_t *a, const float *b, int n);
/* y[i] += alpha * x[i], x in IEEE half. */
void wk_cpu_axpy_f16(float *y, float alpha, const uint16_t *x, int n);
/* dst[i] = half(src[i]), round to nearest even. */
void wk_cpu_f32_to_f16(uint16_t *dst, const float *src, int n);
/* e^x to about 2 ulp; 0 below -87.3, e^88.3 above 88.3. */
float wk_cpu_expf(float x);
/* sum a[i] * b[i] (the fixed reduction pattern). */
float wk_cpu_dot_f32(const float *a, const float *b, int n);
/* y[i] += alpha * x[i]. */
void wk_cpu_axpy_f32(float *y, float alpha, const float *x, int n);
/*
 * Attention of nh query heads (q: nh rows of hd floats) over n cached
 * positions of one KV head: row j of k or v at k + j * row_stride bytes,
 * its first hd elements read (IEEE halves when f16, else floats).
 * Scores: s[h * s_stride + j] = dot(k_j, q_h), the same bits as
 * wk_cpu_dot_f16 / wk_cpu_dot_f32 of the pair.  Values: out[h * hd + d]
 * += w[h * w_stride + j] * v_j[d] over j in order, the same bits as
 * wk_cpu_axpy_f16 / wk_cpu_axpy_f32 per position.  The AVX-512 and AVX2
 * builds convert 16 rows once for all heads (a group of one or two heads
 * reads them in place) and reduce 16 (AVX2: 4) scores at a time.
 */
void wk_cpu_att_scores(const uint8_t *k, size_t row_stride, int f16, int n, const float *q, int nh,
		       int hd, float *s, size_t s_stride);
void wk_cpu_att_values(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int f16,
		       int n, const float *w, size_t w_stride);
/* In place: GELU in its tanh form (llama.cpp's ggml_gelu), tanh from
 * wk_cpu_expf; within 1e-6 of the libm form. */
void wk_cpu_gelu(float *x, int n);
/* out[i] = gelu(gate[i]) * up[i], GELU as wk_cpu_gelu (gemma's GeGLU);
 * out may alias gate. */
void wk_cpu_gelu_mul(float *out, const float *gate, const float *up, int n);
/* In place: x[i] = c * tanh(x[i] / c) (gemma2's soft-capping), tanh within
 * 1e-6 relative of libm's; NaN stays NaN. */
void wk_cpu_softcap(float *x, int n, float c);

/*
 * Rotary position embedding.  Pair i (0 <= i < n_rot/2) of a head turns
 * by pos * freq_scale * base^(-2i/n_rot) / freq_factors[i] radians
 * (freq_factors NULL means 1: Llama 3.1 ships them as `rope_freqs`).
 * normal style (llama): pairs (x[2i], x[2i+1]); neox style (qwen2):
 * pairs (x[i], x[i + n_rot/2]).  Dimensions past n_rot are left alone.
 */
struct wk_cpu_rope {
	int n_rot;                 /* rotated dims per head, even, <= head_dim */
	int neox;                  /* 1: neox pairing, 0: normal (interleaved) */
	float base;                /* rope_freq_base (theta), e.g. 10000 */
	float freq_scale;          /* 1 / linear scaling factor; 1 for none */
	const float *freq_factors; /* n_rot/2 divisors or NULL */
	float mscale;              /* multiplies cos and sin (LongRoPE's attention
				    * factor); 0 or 1: none */
};

/* cs[2i] = cos, cs[2i+1] = sin of pair i's angle at pos (n_rot floats). */
void wk_cpu_rope_sincos(const struct wk_cpu_rope *rope, int pos, float *cs);
/* Rotates n_heads heads of head_dim floats each, contiguous, in place. */
void wk_cpu_rope_apply(const struct wk_cpu_rope *rope, const float *cs, float *x, int n_heads,
		       int head_dim);

/* Forces the ISA of the ops (tests); CM_EUNSUPPORTED when unavailable. */
enum cm_status wk_cpu_ops_set_isa(enum wk_cpu_isa isa) CM_WUR;
enum wk_cpu_isa wk_cpu_ops_isa(void);

#endif
