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

#if defined(__AVX2__) && !defined(__AVX512F__)
/*
 * wo_expf on 8 lanes, for the AVX2 build (GCC does not vectorise the
 * scalar form there; the AVX-512 build does): the same operations in the
 * same order, separate multiplies and adds as the scalar code (C17 mode
 * does not contract them), the clamps, the NaN and the underflow to 0 as
 * blends: the same bits as wo_expf in every lane (test_ops).  Softmax,
 * SwiGLU and GeGLU take it: the scalar exp was 4.4 ns an element against
 * 1.4 in the AVX-512 build.  Soft-capping takes its tanh.
 */
#define WO_EXP8 1
static inline __m256 wo_exp8(__m256 x)
{
	const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
	const __m256 big = _mm256_set1_ps(12582912.0f);
	const __m256 m_lo = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	const __m256 m_hi = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
	const __m256 m_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
	__m256 xc = _mm256_blendv_ps(_mm256_blendv_ps(x, hi, m_hi), lo, m_lo);
	__m256 t = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)), big);
	__m256i ni = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B400000));
	__m256 fn = _mm256_sub_ps(t, big);
	__m256 r = _mm256_sub_ps(xc, _mm256_mul_ps(fn, _mm256_set1_ps(0.693359375f)));
	r = _mm256_sub_ps(r, _mm256_mul_ps(fn, _mm256_set1_ps(-2.12194440e-4f)));
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
	__m256 y = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r),
				 _mm256_set1_ps(1.0f));
	__m256i sb = _mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23);
	y = _mm256_mul_ps(y, _mm256_castsi256_ps(sb));
	y = _mm256_blendv_ps(y, _mm256_setzero_ps(), m_lo);
	return _mm256_blendv_ps(y, x, m_nan);
}

/* wo_gelu1 on 8 lanes (the same operations) */
static inline __m256 wo_gelu8(__m256 g)
{
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 c = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), g), g), g);
	__m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_add_ps(g, c));
	__m256 e = wo_exp8(_mm256_mul_ps(_mm256_set1_ps(2.0f), u));
	__m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
	return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), g), _mm256_add_ps(one, t));
}

/* wo_tanh on 8 lanes (the same operations; the series or the exp form by
 * a blend, the sign put back by its bit) */
static inline __m256 wo_tanh8(__m256 u)
{
	const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
	__m256 a = _mm256_andnot_ps(sign, u), a2 = _mm256_mul_ps(a, a);
	__m256 q = _mm256_add_ps(_mm256_mul_ps(a2, _mm256_set1_ps(0.0218694885f)),
				 _mm256_set1_ps(-0.0539682540f));
	q = _mm256_add_ps(_mm256_mul_ps(a2, q), _mm256_set1_ps(0.133333333f));
	q = _mm256_add_ps(_mm256_mul_ps(a2, q), _mm256_set1_ps(-0.333333333f));
	__m256 sr = _mm256_add_ps(a, _mm256_mul_ps(_mm256_mul_ps(a, a2), q));
	__m256 e = wo_exp8(_mm256_mul_ps(_mm256_set1_ps(2.0f), a));
	e = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
	__m256 v = _mm256_blendv_ps(e, sr, _mm256_cmp_ps(a, _mm256_set1_ps(0.25f), _CMP_LT_OQ));
	return _mm256_or_ps(_mm256_andnot_ps(sign, v), _mm256_and_ps(sign, u));
}
#else
#define WO_EXP8 0
#endif

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
	int i = 0;
#if WO_EXP8
	const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i);
		__m256 e = wo_exp8(_mm256_xor_ps(g, sign));
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)),
							_mm256_loadu_ps(up + i)));
	}
#endif
	for (; i < n; i++) {
		float g = gate[i];
		out[i] = g / (1.0f + wo_expf(-g)) * up[i];
	}
}

/* The maximum of x (n >= 1) in WO_L lanes, which the compiler makes vector
 * max instructions (x > m ? x : m is exactly what they compute): the
 * maximum of numbers does not depend on the order it is taken in.  A
 * one-lane loop was half of attention's softmax. */
static float wo_max(const float *x, int n)
{
	float mx = x[0];
	int i = 1;

	if (n >= 2 * WO_L) {
		float m[WO_L];

		for (int l = 0; l < WO_L; l++)
			m[l] = x[l];
		for (i = WO_L; i + WO_L <= n; i += WO_L)
			for (int l = 0; l < WO_L; l++)
				m[l] = x[i + l] > m[l] ? x[i + l] : m[l];
		mx = m[0];
		for (int l = 1; l < WO_L; l++)
			mx = m[l] > mx ? m[l] : mx;
	}
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	return mx;
}

static void wo_softmax(float *x, int n)
{
	if (n <= 0)
		return;
	float mx = wo_max(x, n);
	if (mx == -INFINITY) { /* everything masked: uniform zero */
		memset(x, 0, sizeof(float) * (size_t)n);
		return;
	}
	float acc[WO_L] = { 0 };
	int main = n - n % WO_L;
#if WO_EXP8 /* acc[0..7] and acc[8..15] as two vectors: the same sums */
	__m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), m = _mm256_set1_ps(mx);
	for (int i = 0; i < main; i += WO_L) {
		__m256 e0 = wo_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
		__m256 e1 = wo_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
		_mm256_storeu_ps(x + i, e0);
		_mm256_storeu_ps(x + i + 8, e1);
		a0 = _mm256_add_ps(a0, e0);
		a1 = _mm256_add_ps(a1, e1);
	}
	_mm256_storeu_ps(acc, a0);
	_mm256_storeu_ps(acc + 8, a1);
#else
	for (int i = 0; i < main; i += WO_L)
		for (int l = 0; l < WO_L; l++) {
			float e = wo_expf(x[i + l] - mx);
			x[i + l] = e;
			acc[l] += e;
		}
#endif
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
static inline float wo_gelu1(float g)
{
	float u = 0.7978845608028654f * (g + 0.044715f * g * g * g);
	float t = 1.0f - 2.0f / (wo_expf(2.0f * u) + 1.0f);
	return 0.5f * g * (1.0f + t);
}

static void wo_gelu(float *x, int n)
{
	int i = 0;
#if WO_EXP8
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, wo_gelu8(_mm256_loadu_ps(x + i)));
#endif
	for (; i < n; i++)
		x[i] = wo_gelu1(x[i]);
}

/* out = GELU(gate) * up (gemma's GeGLU); out may be gate */
static void wo_gelu_mul(float *out, const float *gate, const float *up, int n)
{
	int i = 0;
#if WO_EXP8
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, _mm256_mul_ps(wo_gelu8(_mm256_loadu_ps(gate + i)),
							_mm256_loadu_ps(up + i)));
#endif
	for (; i < n; i++)
		out[i] = wo_gelu1(gate[i]) * up[i];
}

/*
 * tanh(u): 1 - 2 / (e^(2|u|) + 1) on wo_expf from |u| = 0.25 (the
 * subtraction loses nothing there: the result is >= 0.24), below it the
 * odd series to u^9 (the next term is under 1e-8 of the result), the sign
 * put back last.  NaN in, NaN out; +-1 at the ends.
 */
static inline float wo_tanh(float u)
{
	float a = fabsf(u), a2 = a * a;
	float s = a + a * a2 * (-0.333333333f +
				a2 * (0.133333333f + a2 * (-0.0539682540f + a2 * 0.0218694885f)));
	float e = 1.0f - 2.0f / (wo_expf(2.0f * a) + 1.0f);
	return copysignf(a < 0.25f ? s : e, u);
}

/* x[i] *= s (attention's score scale: in a vector build, vector
 * multiplies, the same products) */
static void wo_scale(float *x, int n, float s)
{
	for (int i = 0; i < n; i++)
		x[i] *= s;
}

/* x = c tanh(x / c) (gemma2's soft-capping of scores and logits) */
static void wo_softcap(float *x, int n, float c)
{
	int i = 0;
#if WO_EXP8
	const __m256 cv = _mm256_set1_ps(c);
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(cv, wo_tanh8(_mm256_div_ps(_mm256_loadu_ps(x + i), cv))));
#endif
	for (; i < n; i++)
		x[i] = c * wo_tanh(x[i] / c);
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

/*
 * Attention of nh query heads over n cached positions of one KV head
 * (grouped-query attention).  Row j of k / v is at row_stride bytes times
 * j, its hd elements first (halves when f16, else floats).  Scores:
 * s[h * s_stride + j] = dot(k_j, q_h), bit for bit dot_f16 / dot_f32 of
 * the pair.  Values: out_h (hd floats at out + h * hd) += w[h * w_stride +
 * j] * v_j for j in order, bit for bit axpy_f16 / axpy_f32 per position.
 * The generic forms below are those calls; the AVX-512 and AVX2 builds
 * have faster ones for hd a multiple of 16 up to WO_ATT_MAXD (the same
 * values).
 */
static void wo_att_scores_each(const uint8_t *k, size_t row_stride, int f16, int n, const float *q,
			       int nh, int hd, float *s, size_t s_stride)
{
	for (int j = 0; j < n; j++) {
		const uint8_t *kr = k + (size_t)j * row_stride;

		for (int h = 0; h < nh; h++)
			s[(size_t)h * s_stride + (size_t)j] =
				f16 ? wo_dot_f16((const uint16_t *)kr, q + (size_t)h * (size_t)hd, hd)
				    : wo_dot_f32((const float *)kr, q + (size_t)h * (size_t)hd, hd);
	}
}

static void wo_att_values_each(float *out, int nh, int hd, const uint8_t *v, size_t row_stride,
			       int f16, int n, const float *w, size_t w_stride)
{
	for (int j = 0; j < n; j++) {
		const uint8_t *vr = v + (size_t)j * row_stride;

		for (int h = 0; h < nh; h++) {
			float a = w[(size_t)h * w_stride + (size_t)j];

			if (f16)
				wo_axpy_f16(out + (size_t)h * (size_t)hd, a, (const uint16_t *)vr, hd);
			else
				wo_axpy_f32(out + (size_t)h * (size_t)hd, a, (const float *)vr, hd);
		}
	}
}

#if defined(__AVX512F__)
#define WO_VW 16
#define wo_vstore(p, v) _mm512_store_ps(p, v)
#define wo_vzero() _mm512_setzero_ps()
#define wo_vload_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define wo_vloadu(p) _mm512_loadu_ps(p)
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define WO_VW 8
#define wo_vstore(p, v) _mm256_store_ps(p, v)
#define wo_vzero() _mm256_setzero_ps()
#define wo_vload_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define wo_vloadu(p) _mm256_loadu_ps(p)
#endif

#if defined(WO_VW)
#define WO_ATT_MAXD 256
/*
 * Heads up to which the vector attention (AVX-512, AVX2) reads K and V
 * straight from the cache instead of converting 16 rows into a buffer
 * once for all the heads: for one head the copy is a third of the work (phi3-1b, one head
 * a group, decode at 1024 positions: values +4-6 %, scores +1-1.5 % more;
 * a micro-benchmark of one 64-wide head over 1124 positions from memory,
 * one thread: scores 24-25 -> 28-29 GB/s, values 27 -> 30).
 */
#define WO_ATT_DIRECT_HEADS 2
#define WO_UNROLL16 _Pragma("GCC unroll 16")
#define WO_UNROLL8 _Pragma("GCC unroll 8")

/* Rows 0 .. m - 1 of k (m <= 16) as floats into f (16 rows of hd, a
 * multiple of WO_VW, the rows past m zero): converted once for all the
 * heads of a group. */
static inline void wo_att_rows(float *f, const uint8_t *k, size_t row_stride, int f16, int m, int hd)
{
	for (int j = 0; j < 16; j++) {
		const uint8_t *r = k + (size_t)j * row_stride;

		for (int c = 0; c < hd; c += WO_VW)
			wo_vstore(f + j * hd + c, j >= m ? wo_vzero()
						  : f16  ? wo_vload_f16(r + 2 * (size_t)c)
							 : wo_vloadu((const float *)r + c));
	}
}
#endif

#if defined(__AVX512F__)

/*
 * Sixteen wo_combine reductions at once: lane L of the result is the
 * combine of v[L]'s 16 lanes, with the same additions in the same order
 * (l + l+8, then +4, +2, +1), done on whole vectors by shuffles.  The
 * tree leaves lane 4k + m with input slot 4m + k, so slot 4a + b is given
 * v[4b + a].
 */
static inline __attribute__((always_inline)) __m512 wo_combine16(const __m512 *v)
{
	static const int slot[16] = { 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15 };
	__m512 s[8], t[4], u[2];

	WO_UNROLL16
	for (int p = 0; p < 8; p++) {
		__m512 x = v[slot[2 * p]], y = v[slot[2 * p + 1]];
		s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
				     _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
	}
	WO_UNROLL16
	for (int p = 0; p < 4; p++)
		t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
				     _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
	WO_UNROLL16
	for (int p = 0; p < 2; p++)
		u[p] = _mm512_add_ps(_mm512_shuffle_ps(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
				     _mm512_shuffle_ps(t[2 * p], t[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
	return _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
			     _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* One head's scores over the m (<= 16) converted rows of kf: 16
 * independent chains (lane l of a chain takes elements l, l+16, ... as
 * dot_f16: fused multiply-adds; dot_f32's vectorised loop rounds the
 * product and the sum apart), then wo_combine16. */
static inline __attribute__((always_inline)) void
wo_att_head_scores(const float *kf, int m, const float *qh, int hd, float *s, const int F16)
{
	__m512 acc[16];

	WO_UNROLL16
	for (int j = 0; j < 16; j++)
		acc[j] = _mm512_setzero_ps();
	for (int c = 0; c < hd; c += 16) {
		__m512 qv = _mm512_loadu_ps(qh + c);

		WO_UNROLL16
		for (int j = 0; j < 16; j++)
			acc[j] = F16 ? _mm512_fmadd_ps(_mm512_load_ps(kf + j * hd + c), qv, acc[j])
				     : _mm512_add_ps(acc[j], _mm512_mul_ps(_mm512_load_ps(kf + j * hd + c), qv));
	}
	_mm512_mask_storeu_ps(s, (__mmask16)((1u << m) - 1u), wo_combine16(acc));
}

/*
 * wo_att_head_scores for a group of at most WO_ATT_DIRECT_HEADS, on the
 * m rows in the cache itself: each row's chain (lane l: elements l, l+16,
 * ... as dot_f16 / dot_f32) in a loop over the rows that stays a loop, its
 * 16 lanes parked in `part`, then wo_combine16: the same operations in the
 * same order, so the same scores.  The loop matters: unrolled over the
 * rows (each load its own instruction, met once a call) the hardware's
 * stride prefetch never trained and the scores streamed 14 GB/s from
 * memory against 25 through the converted copy; as a loop 28-29.
 */
static inline __attribute__((always_inline)) void
wo_att_head_scores_rows(const uint8_t *k, size_t row_stride, int m, const float *qh, int hd,
			float *s, const int F16)
{
	_Alignas(64) float part[16 * 16];
	__m512 acc[16];

#pragma GCC unroll 1
	for (int j = 0; j < m; j++) {
		const uint8_t *r = k + (size_t)j * row_stride;
		__m512 a = _mm512_setzero_ps();

		for (int c = 0; c < hd; c += 16) {
			__m512 qv = _mm512_loadu_ps(qh + c);

			a = F16 ? _mm512_fmadd_ps(wo_vload_f16(r + 2 * (size_t)c), qv, a)
				: _mm512_add_ps(a, _mm512_mul_ps(wo_vloadu((const float *)r + c), qv));
		}
		_mm512_store_ps(part + 16 * j, a);
	}
	WO_UNROLL16
	for (int j = 0; j < 16; j++)
		acc[j] = j < m ? _mm512_load_ps(part + 16 * j) : _mm512_setzero_ps();
	_mm512_mask_storeu_ps(s, (__mmask16)((1u << m) - 1u), wo_combine16(acc));
}

/* Values for NV = hd / 16 vectors a head: HB heads at a time keep their
 * outputs in registers over 16 positions converted once for all heads,
 * or (DIRECT, a group of at most WO_ATT_DIRECT_HEADS) each position's
 * row read from the cache where it is used: the same products in the
 * same order, so the same values. */
static inline __attribute__((always_inline)) void
wo_att_values_nv(float *out, int nh, const uint8_t *v, size_t row_stride, int n, const float *w,
		 size_t w_stride, const int NV, const int F16, const int DIRECT)
{
	enum { MAXACC = 16 };
	const int hd = 16 * NV, HB = MAXACC / NV;
	_Alignas(64) float vf[16 * WO_ATT_MAXD];

	for (int j0 = 0; j0 < n; j0 += 16) {
		const int m = n - j0 < 16 ? n - j0 : 16;
		const uint8_t *vr = v + (size_t)j0 * row_stride;

		if (!DIRECT)
			wo_att_rows(vf, vr, row_stride, F16, m, hd);
		for (int h0 = 0; h0 < nh; h0 += HB) {
			const int hb = nh - h0 < HB ? nh - h0 : HB;
			__m512 acc[MAXACC];

			WO_UNROLL16
			for (int i = 0; i < MAXACC; i++)
				acc[i] = i < hb * NV ? _mm512_loadu_ps(out + (size_t)(h0 + i / NV) * (size_t)hd +
								       16 * (i % NV))
						     : _mm512_setzero_ps();
			for (int j = 0; j < m; j++)
				WO_UNROLL16
				for (int i = 0; i < MAXACC; i++)
					if (i < hb * NV) {
						__m512 a = _mm512_set1_ps(
							w[(size_t)(h0 + i / NV) * w_stride + (size_t)(j0 + j)]);
						const uint8_t *r = vr + (size_t)j * row_stride;
						__m512 x = !DIRECT ? _mm512_load_ps(vf + j * hd + 16 * (i % NV))
							   : F16 ? wo_vload_f16(r + 32 * (size_t)(i % NV))
								 : wo_vloadu((const float *)r + 16 * (i % NV));

						acc[i] = F16 ? _mm512_fmadd_ps(a, x, acc[i])
							     : _mm512_add_ps(acc[i], _mm512_mul_ps(a, x));
					}
			WO_UNROLL16
			for (int i = 0; i < MAXACC; i++)
				if (i < hb * NV)
					_mm512_storeu_ps(out + (size_t)(h0 + i / NV) * (size_t)hd +
								 16 * (i % NV),
							 acc[i]);
		}
	}
}

static void wo_att_values(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int f16,
			  int n, const float *w, size_t w_stride)
{
	const int direct = nh <= WO_ATT_DIRECT_HEADS;
#define WO_ATT_V(NV)                                                                        \
	case 16 * (NV):                                                                     \
		if (f16 && direct)                                                          \
			wo_att_values_nv(out, nh, v, row_stride, n, w, w_stride, NV, 1, 1); \
		else if (f16)                                                               \
			wo_att_values_nv(out, nh, v, row_stride, n, w, w_stride, NV, 1, 0); \
		else if (direct)                                                            \
			wo_att_values_nv(out, nh, v, row_stride, n, w, w_stride, NV, 0, 1); \
		else                                                                        \
			wo_att_values_nv(out, nh, v, row_stride, n, w, w_stride, NV, 0, 0); \
		break;
	switch (hd) { /* the head sizes of the families loaded (64 .. 256) */
		WO_ATT_V(4)
		WO_ATT_V(5)
		WO_ATT_V(6)
		WO_ATT_V(8)
		WO_ATT_V(16)
	default: wo_att_values_each(out, nh, hd, v, row_stride, f16, n, w, w_stride); break;
	}
#undef WO_ATT_V
}
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

/*
 * Four wo_combine reductions at once, for dot_f16's AVX2 form (two 8-lane
 * chains, a of lanes 0-7, b of lanes 8-15): v_p = a_p + b_p is the first
 * step (l + l+8); then l + l+4, +2, +1 on whole vectors; returns the four
 * sums in order.
 */
static inline __attribute__((always_inline)) __m128 wo_combine4(__m256 v0, __m256 v1, __m256 v2,
								__m256 v3)
{
	__m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(v0, v1, 0x20),
				   _mm256_permute2f128_ps(v0, v1, 0x31));
	__m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(v2, v3, 0x20),
				   _mm256_permute2f128_ps(v2, v3, 0x31));
	__m256 t = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
				 _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
	__m256 u = _mm256_add_ps(_mm256_shuffle_ps(t, t, _MM_SHUFFLE(2, 0, 2, 0)),
				 _mm256_shuffle_ps(t, t, _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm_unpacklo_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* One head's scores over the m (<= 16) converted rows of kf, 4 positions
 * at a time: per position the two chains of dot_f16 / dot_f32, then
 * wo_combine4. */
static inline __attribute__((always_inline)) void
wo_att_head_scores(const float *kf, int m, const float *qh, int hd, float *s, const int F16)
{
	for (int p0 = 0; p0 < m; p0 += 4) {
		__m256 a[4], b[4];

		WO_UNROLL8
		for (int p = 0; p < 4; p++)
			a[p] = b[p] = _mm256_setzero_ps();
		for (int c = 0; c < hd; c += 16) {
			__m256 q0 = _mm256_loadu_ps(qh + c), q1 = _mm256_loadu_ps(qh + c + 8);

			WO_UNROLL8
			for (int p = 0; p < 4; p++) {
				const float *kr = kf + (p0 + p) * hd + c;

				a[p] = F16 ? _mm256_fmadd_ps(_mm256_load_ps(kr), q0, a[p])
					   : _mm256_add_ps(a[p], _mm256_mul_ps(_mm256_load_ps(kr), q0));
				b[p] = F16 ? _mm256_fmadd_ps(_mm256_load_ps(kr + 8), q1, b[p])
					   : _mm256_add_ps(b[p], _mm256_mul_ps(_mm256_load_ps(kr + 8), q1));
			}
		}
		_Alignas(16) float r[4];
		_mm_store_ps(r, wo_combine4(_mm256_add_ps(a[0], b[0]), _mm256_add_ps(a[1], b[1]),
					    _mm256_add_ps(a[2], b[2]), _mm256_add_ps(a[3], b[3])));
		memcpy(s + p0, r, sizeof(float) * (size_t)(m - p0 < 4 ? m - p0 : 4));
	}
}

/* wo_att_head_scores on the m rows in the cache itself, as the AVX-512
 * form: a loop over the rows (the stride prefetch trains on it), each
 * row's a + b parked, then wo_combine4 four at a time; the same
 * operations, so the same scores. */
static inline __attribute__((always_inline)) void
wo_att_head_scores_rows(const uint8_t *k, size_t row_stride, int m, const float *qh, int hd,
			float *s, const int F16)
{
	_Alignas(32) float part[16 * 8];

#pragma GCC unroll 1
	for (int j = 0; j < m; j++) {
		const uint8_t *r = k + (size_t)j * row_stride;
		__m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();

		for (int c = 0; c < hd; c += 16) {
			__m256 q0 = _mm256_loadu_ps(qh + c), q1 = _mm256_loadu_ps(qh + c + 8);
			__m256 k0 = F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 2 * (size_t)c)))
					: _mm256_loadu_ps((const float *)r + c);
			__m256 k1 = F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 2 * (size_t)c + 16)))
					: _mm256_loadu_ps((const float *)r + c + 8);

			a = F16 ? _mm256_fmadd_ps(k0, q0, a) : _mm256_add_ps(a, _mm256_mul_ps(k0, q0));
			b = F16 ? _mm256_fmadd_ps(k1, q1, b) : _mm256_add_ps(b, _mm256_mul_ps(k1, q1));
		}
		_mm256_store_ps(part + 8 * j, _mm256_add_ps(a, b));
	}
	for (int j = m; j < ((m + 3) & ~3); j++)
		_mm256_store_ps(part + 8 * j, _mm256_setzero_ps());
	for (int p0 = 0; p0 < m; p0 += 4) {
		_Alignas(16) float r[4];

		_mm_store_ps(r, wo_combine4(_mm256_load_ps(part + 8 * p0), _mm256_load_ps(part + 8 * p0 + 8),
					    _mm256_load_ps(part + 8 * p0 + 16),
					    _mm256_load_ps(part + 8 * p0 + 24)));
		memcpy(s + p0, r, sizeof(float) * (size_t)(m - p0 < 4 ? m - p0 : 4));
	}
}

/* NC vectors of one head's output (o) over m rows rs bytes apart: of the
 * converted copy (floats), or (DIRECT) of the cache itself (halves when
 * F16, else floats). */
static inline __attribute__((always_inline)) void
wo_att_values_c(float *o, const uint8_t *rows, size_t rs, int m, const float *w, const int NC,
		const int F16, const int DIRECT)
{
	__m256 acc[8];

	WO_UNROLL8
	for (int c = 0; c < NC; c++)
		acc[c] = _mm256_loadu_ps(o + 8 * c);
	for (int j = 0; j < m; j++) {
		__m256 a = _mm256_set1_ps(w[j]);
		const uint8_t *r = rows + (size_t)j * rs;

		WO_UNROLL8
		for (int c = 0; c < NC; c++) {
			__m256 x = !DIRECT ? _mm256_load_ps((const float *)r + 8 * c)
				   : F16   ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(r + 16 * (size_t)c)))
					   : _mm256_loadu_ps((const float *)r + 8 * c);

			acc[c] = F16 ? _mm256_fmadd_ps(a, x, acc[c]) : _mm256_add_ps(acc[c], _mm256_mul_ps(a, x));
		}
	}
	WO_UNROLL8
	for (int c = 0; c < NC; c++)
		_mm256_storeu_ps(o + 8 * c, acc[c]);
}

static inline __attribute__((always_inline)) void
wo_att_values_8(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int n,
		const float *w, size_t w_stride, const int F16, const int DIRECT)
{
	_Alignas(32) float vf[16 * WO_ATT_MAXD];
	/* the rows read: the cache's (DIRECT) or the converted copy's; the
	 * bytes of one of their elements */
	const size_t rs = DIRECT ? row_stride : sizeof(float) * (size_t)hd;
	const size_t de = DIRECT && F16 ? 2 : sizeof(float);

	for (int j0 = 0; j0 < n; j0 += 16) {
		const int m = n - j0 < 16 ? n - j0 : 16;
		const uint8_t *rows = DIRECT ? v + (size_t)j0 * row_stride : (const uint8_t *)vf;

		if (!DIRECT)
			wo_att_rows(vf, v + (size_t)j0 * row_stride, row_stride, F16, m, hd);
		for (int h = 0; h < nh; h++) {
			float *o = out + (size_t)h * (size_t)hd;
			const float *wh = w + (size_t)h * w_stride + (size_t)j0;
			int d = 0;

			for (; hd - d >= 64; d += 64)
				wo_att_values_c(o + d, rows + de * (size_t)d, rs, m, wh, 8, F16, DIRECT);
			if (hd - d >= 32) {
				wo_att_values_c(o + d, rows + de * (size_t)d, rs, m, wh, 4, F16, DIRECT);
				d += 32;
			}
			if (hd - d >= 16) {
				wo_att_values_c(o + d, rows + de * (size_t)d, rs, m, wh, 2, F16, DIRECT);
				d += 16;
			}
			if (hd - d >= 8)
				wo_att_values_c(o + d, rows + de * (size_t)d, rs, m, wh, 1, F16, DIRECT);
		}
	}
}

static void wo_att_values(float *out, int nh, int hd, const uint8_t *v, size_t row_stride, int f16,
			  int n, const float *w, size_t w_stride)
{
	const int direct = nh <= WO_ATT_DIRECT_HEADS;

	if (hd % 8 != 0 || hd > WO_ATT_MAXD)
		wo_att_values_each(out, nh, hd, v, row_stride, f16, n, w, w_stride);
	else if (f16 && direct)
		wo_att_values_8(out, nh, hd, v, row_stride, n, w, w_stride, 1, 1);
	else if (f16)
		wo_att_values_8(out, nh, hd, v, row_stride, n, w, w_stride, 1, 0);
	else if (direct)
		wo_att_values_8(out, nh, hd, v, row_stride, n, w, w_stride, 0, 1);
	else
		wo_att_values_8(out, nh, hd, v, row_stride, n, w, w_stride, 0, 0);
}
#endif

#if defined(WO_VW)
/* Scores of 16 positions at a time: their rows converted once for all
 * heads, then each head's (wo_att_head_scores, per build). */
static inline __attribute__((always_inline)) void
wo_att_scores_v(const uint8_t *k, size_t row_stride, int n, const float *q, int nh, int hd,
		float *s, size_t s_stride, const int F16)
{
	_Alignas(64) float kf[16 * WO_ATT_MAXD];

	if (nh <= WO_ATT_DIRECT_HEADS) {
		for (int j0 = 0; j0 < n; j0 += 16) {
			const int m = n - j0 < 16 ? n - j0 : 16;

			for (int h = 0; h < nh; h++)
				wo_att_head_scores_rows(k + (size_t)j0 * row_stride, row_stride, m,
							q + (size_t)h * (size_t)hd, hd,
							s + (size_t)h * s_stride + (size_t)j0, F16);
		}
		return;
	}
	for (int j0 = 0; j0 < n; j0 += 16) {
		const int m = n - j0 < 16 ? n - j0 : 16;

		wo_att_rows(kf, k + (size_t)j0 * row_stride, row_stride, F16, m, hd);
		for (int h = 0; h < nh; h++)
			wo_att_head_scores(kf, m, q + (size_t)h * (size_t)hd, hd,
					   s + (size_t)h * s_stride + (size_t)j0, F16);
	}
}

static void wo_att_scores(const uint8_t *k, size_t row_stride, int f16, int n, const float *q, int nh,
			  int hd, float *s, size_t s_stride)
{
	if (hd % 16 != 0 || hd > WO_ATT_MAXD)
		wo_att_scores_each(k, row_stride, f16, n, q, nh, hd, s, s_stride);
	else if (f16)
		wo_att_scores_v(k, row_stride, n, q, nh, hd, s, s_stride, 1);
	else
		wo_att_scores_v(k, row_stride, n, q, nh, hd, s, s_stride, 0);
}
#else
#define wo_att_scores wo_att_scores_each
#define wo_att_values wo_att_values_each
#endif

const struct wk_cpu_ops WO_TABLE = {
	.rmsnorm = wo_rmsnorm,
	.add = wo_add,
	.silu_mul = wo_silu_mul,
	.softmax = wo_softmax,
	.scale = wo_scale,
	.dot_f16 = wo_dot_f16,
	.axpy_f16 = wo_axpy_f16,
	.f32_to_f16 = wo_f32_to_f16,
	.expf = wo_expf,
	.dot_f32 = wo_dot_f32,
	.axpy_f32 = wo_axpy_f32,
	.gelu = wo_gelu,
	.gelu_mul = wo_gelu_mul,
	.softcap = wo_softcap,
	.att_scores = wo_att_scores,
	.att_values = wo_att_values,
};
