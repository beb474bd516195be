/*
 * kern_scalar.c - portable C kernels: the fallback on CPUs without AVX2
 * and on other architectures.  Same contract as the SIMD builds (see
 * internal.h): every output element is one dot product accumulated in a
 * fixed order (integer sum per block, then one float accumulator over the
 * blocks in order), so results are identical for any batch or thread count.
 * The scalar build of the ops (ops_impl.h) is instantiated at the end.
 */
#include <string.h>

#include "worker/cpu/actq.h"
#include "worker/cpu/internal.h"

static float ks_f16(const uint8_t *p)
{
	return wk_f16_to_f32((uint16_t)(p[0] | (p[1] << 8)));
}

/* The dot product of one weight row w and one token's activation row xr
 * (in the type's format); arg: what a kernel shared by types needs. */
typedef float (*ks_dot_fn)(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
			   uint32_t arg);

/* Y[t][r] = dot(row r, token t) for r in [r0, r1) and every token: the
 * walk all the scalar kernels share. */
static void ks_walk(const struct wk_cpu_gemm *g, int r0, int r1, ks_dot_fn dot, uint32_t arg)
{
	for (int r = r0; r < r1; r++)
		for (int t = 0; t < g->n; t++)
			g->y[(size_t)t * g->y_stride + r] =
				dot(g, g->w + (size_t)r * g->w_stride, g->x + (size_t)t * g->x_stride, arg);
}

/* ---- float weights ---------------------------------------------------- */

static float ks_dot_f32(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                uint32_t arg)
{
	(void)arg;
	const float *wf = (const float *)w;
	const float *x = (const float *)xr;
	float acc = 0;
	for (int k = 0; k < g->cols; k++)
		acc += wf[k] * x[k];
	return acc;
}

static float ks_dot_f16(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                uint32_t arg)
{
	(void)arg;
	const float *x = (const float *)xr;
	float acc = 0;
	for (int k = 0; k < g->cols; k++)
		acc += ks_f16(w + 2 * k) * x[k];
	return acc;
}

static float ks_dot_bf16(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	const float *x = (const float *)xr;
	float acc = 0;
	for (int k = 0; k < g->cols; k++)
		acc += wk_bf16_to_f32((uint16_t)(w[2 * k] | (w[2 * k + 1] << 8))) * x[k];
	return acc;
}

/* ---- Q4_0 / Q8_0 x Q8_32 --------------------------------------------- */

static float ks_dot_q4_0(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 32;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 18 * b;
		int s = 0;
		for (int i = 0; i < 16; i++) {
			s += ((blk[2 + i] & 15) - 8) * xq[32 * b + i];
			s += ((blk[2 + i] >> 4) - 8) * xq[32 * b + 16 + i];
		}
		acc += (float)s * (ks_f16(blk) * xd[b]);
	}
	return acc;
}

/*
 * Q4_1, Q5_0, Q5_1: levels q (0..15 or 0..31) of 32 values; per block the
 * integer dot s = sum q * xq, then acc += s * (d * xd) and, for the types
 * with a minimum, acc += (m * xd) * sum(xq); Q5_0's -16 offset is folded
 * into s as -16 * sum(xq).
 */
static float ks_dot_q5(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	               uint32_t arg)
{
	const uint32_t type = arg;
	const int nb = g->cols / 32, has_m = type != WK_Q_Q5_0, five = type != WK_Q_Q4_1;
	const size_t bb = wk_qtype_block_bytes(type);
	const size_t qs_at = type == WK_Q_Q4_1 ? 4 : type == WK_Q_Q5_0 ? 6 : 8;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	const int32_t *xs = (const int32_t *)(xr + g->cols + 4 * (size_t)nb);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + bb * b, *qs = blk + qs_at;
		const uint8_t *qh = blk + (has_m ? 4 : 2);
		uint32_t h = five ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 |
					    (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24
				  : 0;
		int s = type == WK_Q_Q5_0 ? -16 * xs[b] : 0;
		for (int i = 0; i < 16; i++) {
			int q0 = (qs[i] & 15) | (int)(((h >> i) & 1) << 4);
			int q1 = (qs[i] >> 4) | (int)(((h >> (i + 16)) & 1) << 4);
			s += q0 * xq[32 * b + i] + q1 * xq[32 * b + 16 + i];
		}
		acc += (float)s * (ks_f16(blk) * xd[b]);
		if (has_m)
			acc += (ks_f16(blk + 2) * xd[b]) * (float)xs[b];
	}
	return acc;
}

/* IQ4_NL: the nibbles index the 16 levels; per block s = sum level * xq. */
static float ks_dot_iq4_nl(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                   uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 32;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 18 * b;
		int s = 0;
		for (int i = 0; i < 16; i++) {
			s += wk_iq4nl_levels[blk[2 + i] & 15] * xq[32 * b + i];
			s += wk_iq4nl_levels[blk[2 + i] >> 4] * xq[32 * b + 16 + i];
		}
		acc += (float)s * (ks_f16(blk) * xd[b]);
	}
	return acc;
}

static float ks_dot_q8_0(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 32;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 34 * b;
		int s = 0;
		for (int i = 0; i < 32; i++)
			s += (int8_t)blk[2 + i] * xq[32 * b + i];
		acc += (float)s * (ks_f16(blk) * xd[b]);
	}
	return acc;
}

/* ---- K-quants x Q8_256 ------------------------------------------------ */

static void ks_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63;
		*m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
		*m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
	}
}

/*
 * Q4_K and Q5_K share the math: value = d*sc_j*q - dmin*m_j, so a block
 * contributes d*dx*sum_j sc_j*dot_j - dmin*dx*sum_j m_j*xsum_j.
 */
static float ks_dot_q45_k(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                  uint32_t arg)
{
	const int five = (int)arg;
	int nb = g->cols / 256;
	size_t bb = five ? 176 : 144;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	const int16_t *bs = (const int16_t *)(xr + g->cols + 4 * (size_t)nb);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + bb * b;
		const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
		const int8_t *x = xq + 256 * b;
		int isum = 0, imin = 0;
		for (int c = 0; c < 4; c++) {
			int sc0, m0, sc1, m1, s0 = 0, s1 = 0;
			ks_k4_scale_min(blk + 4, 2 * c, &sc0, &m0);
			ks_k4_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
			for (int l = 0; l < 32; l++) {
				int lo = qs[32 * c + l] & 15, hi = qs[32 * c + l] >> 4;
				if (five) {
					lo |= ((qh[l] >> (2 * c)) & 1) << 4;
					hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
				}
				s0 += lo * x[64 * c + l];
				s1 += hi * x[64 * c + 32 + l];
			}
			isum += sc0 * s0 + sc1 * s1;
			imin += m0 * (bs[16 * b + 4 * c] + bs[16 * b + 4 * c + 1]) +
				m1 * (bs[16 * b + 4 * c + 2] + bs[16 * b + 4 * c + 3]);
		}
		acc += (float)isum * (ks_f16(blk) * xd[b]);
		acc -= (float)imin * (ks_f16(blk + 2) * xd[b]);
	}
	return acc;
}

static float ks_dot_q6_k(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 256;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 210 * (size_t)b;
		const int8_t *sc = (const int8_t *)(blk + 192);
		const int8_t *x = xq + 256 * b;
		int isum = 0;
		for (int h = 0; h < 2; h++) {
			const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
			for (int k = 0; k < 4; k++) {
				int s0 = 0, s1 = 0;
				for (int l = 0; l < 32; l++) {
					int lb = ql[32 * (k & 1) + l];
					int q = (k >= 2 ? lb >> 4 : lb & 15) |
						(((qh[l] >> (2 * k)) & 3) << 4);
					int v = (q - 32) * x[128 * h + 32 * k + l];
					if (l < 16)
						s0 += v;
					else
						s1 += v;
				}
				isum += sc[8 * h + 2 * k] * s0 + sc[8 * h + 2 * k + 1] * s1;
			}
		}
		acc += (float)isum * (ks_f16(blk + 208) * xd[b]);
	}
	return acc;
}

/*
 * Q2_K: value = d*sc_j*q - dmin*m_j over 16-value sub-blocks j, so a block
 * contributes d*dx*sum_j sc_j*dot_j - dmin*dx*sum_j m_j*bsum_j.
 */
static float ks_dot_q2_k(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 256;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	const int16_t *bs = (const int16_t *)(xr + g->cols + 4 * (size_t)nb);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 84 * (size_t)b, *qs = blk + 16;
		const int8_t *x = xq + 256 * b;
		int isum = 0, imin = 0;
		for (int j = 0; j < 16; j++) {
			int h = j / 8, k = (j % 8) / 2, o = 16 * (j % 2), s = 0;
			for (int l = 0; l < 16; l++)
				s += ((qs[32 * h + o + l] >> (2 * k)) & 3) *
				     x[128 * h + 32 * k + o + l];
			isum += (blk[j] & 15) * s;
			imin += (blk[j] >> 4) * bs[16 * b + j];
		}
		acc += (float)isum * (ks_f16(blk + 80) * xd[b]);
		acc -= (float)imin * (ks_f16(blk + 82) * xd[b]);
	}
	return acc;
}

/* Q3_K: value = d*sc_j*(q3 - 4): a block contributes
 * d*dx*sum_j sc_j*(dot_j(q3) - 4*bsum_j). */
static float ks_dot_q3_k(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                 uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 256;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	const int16_t *bs = (const int16_t *)(xr + g->cols + 4 * (size_t)nb);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 110 * (size_t)b, *hm = blk, *qs = blk + 32;
		const int8_t *x = xq + 256 * b;
		int isum = 0;
		for (int j = 0; j < 16; j++) {
			int h = j / 8, k = (j % 8) / 2, o = 16 * (j % 2), s = 0;
			for (int l = o; l < o + 16; l++) {
				int q = ((qs[32 * h + l] >> (2 * k)) & 3) |
					(((hm[l] >> (4 * h + k)) & 1) << 2);
				s += q * x[128 * h + 32 * k + l];
			}
			isum += wk_q3_k_scale(blk + 96, j) * (s - 4 * bs[16 * b + j]);
		}
		acc += (float)isum * (ks_f16(blk + 108) * xd[b]);
	}
	return acc;
}

/* IQ4_XS: value = d*(ls_j - 32)*levels[q] over 32-value sub-blocks. */
static float ks_dot_iq4_xs(const struct wk_cpu_gemm *g, const uint8_t *w, const uint8_t *xr,
	                   uint32_t arg)
{
	(void)arg;
	int nb = g->cols / 256;
	const int8_t *xq = (const int8_t *)xr;
	const float *xd = (const float *)(xr + g->cols);
	float acc = 0;
	for (int b = 0; b < nb; b++) {
		const uint8_t *blk = w + 136 * (size_t)b, *qs = blk + 8;
		const int8_t *x = xq + 256 * b;
		int isum = 0;
		for (int j = 0; j < 8; j++) {
			int s = 0;
			for (int l = 0; l < 16; l++)
				s += wk_iq4nl_levels[qs[16 * j + l] & 15] * x[32 * j + l] +
				     wk_iq4nl_levels[qs[16 * j + l] >> 4] * x[32 * j + 16 + l];
			isum += wk_iq4_xs_scale(blk, j) * s;
		}
		acc += (float)isum * (ks_f16(blk) * xd[b]);
	}
	return acc;
}

#define KS_GEMM(name, dot, arg)                                          \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)     \
	{                                                                 \
		ks_walk(g, r0, r1, dot, arg);                             \
	}

KS_GEMM(ks_gemm_f32, ks_dot_f32, 0)
KS_GEMM(ks_gemm_f16, ks_dot_f16, 0)
KS_GEMM(ks_gemm_bf16, ks_dot_bf16, 0)
KS_GEMM(ks_gemm_q4_0, ks_dot_q4_0, 0)
KS_GEMM(ks_gemm_q4_1, ks_dot_q5, WK_Q_Q4_1)
KS_GEMM(ks_gemm_q5_0, ks_dot_q5, WK_Q_Q5_0)
KS_GEMM(ks_gemm_q5_1, ks_dot_q5, WK_Q_Q5_1)
KS_GEMM(ks_gemm_iq4_nl, ks_dot_iq4_nl, 0)
KS_GEMM(ks_gemm_q8_0, ks_dot_q8_0, 0)
KS_GEMM(ks_gemm_q2_k, ks_dot_q2_k, 0)
KS_GEMM(ks_gemm_q3_k, ks_dot_q3_k, 0)
KS_GEMM(ks_gemm_iq4_xs, ks_dot_iq4_xs, 0)
KS_GEMM(ks_gemm_q4_k, ks_dot_q45_k, 0)
KS_GEMM(ks_gemm_q5_k, ks_dot_q45_k, 1)
KS_GEMM(ks_gemm_q6_k, ks_dot_q6_k, 0)

const struct wk_cpu_kernels wk_cpu_kernels_scalar = {
	.name = "scalar",
	.gemm = {
		[WK_Q_F32] = ks_gemm_f32,
		[WK_Q_F16] = ks_gemm_f16,
		[WK_Q_BF16] = ks_gemm_bf16,
		[WK_Q_Q4_0] = ks_gemm_q4_0,
		[WK_Q_Q4_1] = ks_gemm_q4_1,
		[WK_Q_Q5_0] = ks_gemm_q5_0,
		[WK_Q_Q5_1] = ks_gemm_q5_1,
		[WK_Q_IQ4_NL] = ks_gemm_iq4_nl,
		[WK_Q_Q8_0] = ks_gemm_q8_0,
		[WK_Q_Q2_K] = ks_gemm_q2_k,
		[WK_Q_Q3_K] = ks_gemm_q3_k,
		[WK_Q_IQ4_XS] = ks_gemm_iq4_xs,
		[WK_Q_Q4_K] = ks_gemm_q4_k,
		[WK_Q_Q5_K] = ks_gemm_q5_k,
		[WK_Q_Q6_K] = ks_gemm_q6_k,
	},
	.actq_q8_32 = wk_actq_q8_32,
	.actq_q8_256 = wk_actq_q8_256,
};

#define WO_TABLE wk_cpu_ops_scalar
#include "worker/cpu/ops_impl.h"
