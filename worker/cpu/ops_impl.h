/*
 * ops_impl.h - bodies of the ops in ops.h, included by kern_scalar.c,
 * kern_avx2.c and kern_avx512.c so that each ISA build gets its own copy
 * (plain loops shaped for the vectoriser, intrinsics only for half
 * conversion).  Defines the table WO_TABLE.
 *
 * Fixed reduction pattern: 16 partial accumulators, lane l takes elements
 * l, l+16, ... in order; lanes are combined pairwise (l with l+8, then +4,
 * +2, +1); the n % 16 tail is added last in order.
 */
#include <math.h>
#include <string.h>

#include "worker/cpu/ops_internal.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#define WO_L 16

static inline float wo_combine(float *acc)
{
	for (int w = WO_L / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	return acc[0];
}

static inline float wo_expf(float x)
{
	/* total on every bit pattern (issue 13, finding 16): NaN in, NaN out,
	 * and the exponent is assembled unsigned (no signed shift) */
	if (x != x)
		return x;
	float xc = x < -87.3f ? -87.3f : x > 88.3f ? 88.3f : x;
	float t = xc * 1.44269504f + 12582912.0f;
	int32_t tb;
	memcpy(&tb, &t, 4);
	int32_t ni = tb - 0x4B400000;
	float fn = t - 12582912.0f;
	float r = xc - fn * 0.693359375f;
	r = r - fn * -2.12194440e-4f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	float y = p * r * r + r + 1.0f;
	uint32_t sb = (uint32_t)(ni + 127) << 23;
	float s;
	memcpy(&s, &sb, 4);
	y = y * s;
	return x < -87.3f ? 0.0f : y;
}

static void wo_rmsnorm(float *out, const float *x, const float *w, int n, float eps)
{
	float acc[WO_L] = { 0 };
	int main = n - n % WO_L;
	for (int i = 0; i < main; i += WO_L)
		for (int l = 0; l < WO_L; l++)
			acc[l] += x[i + l] * x[i + l];
	float ss = wo_combine(acc);
	for (int i = main; i < n; i++)
		ss += x[i] * x[i];
	float scale = 1.0f / sqrtf(ss / (float)n + eps);
	for (int i = 0; i < n; i++)
		out[i] = (x[i] * scale) * w[i];
}

static void wo_add(float *y, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += x[i];
}

static void wo_silu_mul(float *out, const float *gate, const float *up, int n)
{
	for (int i = 0; i < n; i++) {
		float g = gate[i];
		out[i] = g / (1.0f + wo_expf(-g)) * up[i];
	}
}

static void wo_softmax(float *x, int n)
{
	if (n <= 0)
		return;
	float mx = x[0];
	for (int i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	if (mx == -INFINITY) { /* everything masked: uniform zero */
		memset(x, 0, sizeof(float) * (size_t)n);
		return;
	}
	float acc[WO_L] = { 0 };
	int main = n - n % WO_L;
	for (int i = 0; i < main; i += WO_L)
		for (int l = 0; l < WO_L; l++) {
			float e = wo_expf(x[i + l] - mx);
			x[i + l] = e;
			acc[l] += e;
		}
	float sum = wo_combine(acc);
	for (int i = main; i < n; i++) {
		x[i] = wo_expf(x[i] - mx);
		sum += x[i];
	}
	float inv = 1.0f / sum;
	for (int i = 0; i < n; i++)
		x[i] *= inv;
}

#if defined(__AVX512F__)
static float wo_dot_f16(const uint16_t *a, const float *b, int n)
{
	__m512 acc = _mm512_setzero_ps();
	int main = n - n % WO_L, i;
	for (i = 0; i < main; i += WO_L)
		acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i))),
				      _mm512_loadu_ps(b + i), acc);
	float l[WO_L];
	_mm512_storeu_ps(l, acc);
	float s = wo_combine(l);
	for (; i < n; i++)
		s += _cvtsh_ss(a[i]) * b[i];
	return s;
}

static void wo_axpy_f16(float *y, float alpha, const uint16_t *x, int n)
{
	__m512 av = _mm512_set1_ps(alpha);
	int main = n - n % WO_L, i;
	for (i = 0; i < main; i += WO_L)
		_mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))),
							_mm512_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += alpha * _cvtsh_ss(x[i]);
}
#elif defined(__F16C__)
static float wo_dot_f16(const uint16_t *a, const float *b, int n)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
	int main = n - n % WO_L, i;
	for (i = 0; i < main; i += WO_L) {
		a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i))),
				     _mm256_loadu_ps(b + i), a0);
		a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8))),
				     _mm256_loadu_ps(b + i + 8), a1);
	}
	float l[WO_L];
	_mm256_storeu_ps(l, a0);
	_mm256_storeu_ps(l + 8, a1);
	float s = wo_combine(l);
	for (; i < n; i++)
		s += _cvtsh_ss(a[i]) * b[i];
	return s;
}

static void wo_axpy_f16(float *y, float alpha, const uint16_t *x, int n)
{
	__m256 av = _mm256_set1_ps(alpha);
	int main = n - n % 8, i;
	for (i = 0; i < main; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))),
							_mm256_loadu_ps(y + i)));
	for (; i < n; i++)
		y[i] += alpha * _cvtsh_ss(x[i]);
}
#else
static float wo_dot_f16(const uint16_t *a, const float *b, int n)
{
	float acc[WO_L] = { 0 };
	int main = n - n % WO_L;
	for (int i = 0; i < main; i += WO_L)
		for (int l = 0; l < WO_L; l++)
			acc[l] += wk_f16_to_f32(a[i + l]) * b[i + l];
	float s = wo_combine(acc);
	for (int i = main; i < n; i++)
		s += wk_f16_to_f32(a[i]) * b[i];
	return s;
}

static void wo_axpy_f16(float *y, float alpha, const uint16_t *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += alpha * wk_f16_to_f32(x[i]);
}
#endif

static float wo_dot_f32(const float *a, const float *b, int n)
{
	float acc[WO_L] = { 0 };
	int main = n - n % WO_L;
	for (int i = 0; i < main; i += WO_L)
		for (int l = 0; l < WO_L; l++)
			acc[l] += a[i + l] * b[i + l];
	float s = wo_combine(acc);
	for (int i = main; i < n; i++)
		s += a[i] * b[i];
	return s;
}

static void wo_axpy_f32(float *y, float alpha, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += alpha * x[i];
}

/* GELU, tanh form: 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), with
 * tanh(u) = 1 - 2 / (e^(2u) + 1) on wo_expf (saturates cleanly: e^(2u)
 * is 0 or huge at the ends) */
static void wo_gelu(float *x, int n)
{
	for (int i = 0; i < n; i++) {
		float g = x[i], u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
		float t = 1.0f - 2.0f / (wo_expf(2.0f * u) + 1.0f);
		x[i] = 0.5f * g * (1.0f + t);
	}
}

static void wo_f32_to_f16(uint16_t *dst, const float *src, int n)
{
	int i = 0;
#if defined(__F16C__)
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(dst + i),
				 _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
	for (; i < n; i++)
		dst[i] = wk_f32_to_f16(src[i]);
}

const struct wk_cpu_ops WO_TABLE = {
	.rmsnorm = wo_rmsnorm,
	.add = wo_add,
	.silu_mul = wo_silu_mul,
	.softmax = wo_softmax,
	.dot_f16 = wo_dot_f16,
	.axpy_f16 = wo_axpy_f16,
	.f32_to_f16 = wo_f32_to_f16,
	.expf = wo_expf,
	.dot_f32 = wo_dot_f32,
	.axpy_f32 = wo_axpy_f32,
	.gelu = wo_gelu,
};
