/*
 * kern_avx512_r16.h - the kernels of the AVX-512 build for weights in the
 * rows16 layout of pack.h, Q4_0 and Q8_0 (the other types' sit beside
 * their 16-row kernels): a strip of 16 rows is one stream whose 512-bit
 * loads are already the transposed runs the 16-row kernels
 * of kern_avx512_q8.h build per block (24 shuffles, or for one token 8
 * dot products and a 14-shuffle reduction), and whose 16 scales are one
 * 256-bit load instead of a gather.  Included by kern_x86.h when KX_512.
 *
 * Per output element the same sequence as kx_q80_rows16: one exact
 * integer per block, isum = dot(q, x) - 8 (Q4_0) or 128 (Q8_0, biased at
 * packing) x sum(x), then acc = fma(float(isum), d_w * d_x, acc) in block
 * order from 0; so a packed matrix gives bit for bit the values of the
 * unpacked one, for every token count, tile and thread.  Lane l is row
 * r + l.
 */
KX_INLINE void kx_q80_r16(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			  const uint8_t *pf, const int Q4)
{
	const int nb = g->cols / 32;
	const size_t sb = 16 * (size_t)(Q4 ? 18 : 34); /* a block of the strip */
	const int corr = Q4 ? -8 : -128;
	const uint8_t *s = g->w + (size_t)r * g->w_stride; /* the strip of rows r..r+15 */
	const int8_t *xq[KX_MT2];
	const float *xd[KX_MT2];
	const int32_t *xs[KX_MT2];
	__m512 acc[KX_MT2];
	kx_tile_begin32(g, t, T, xq, xd, xs, acc);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	for (int b = 0; b < nb; b++) {
		const uint8_t *p = s + sb * (size_t)b;
		if (pf != NULL) /* the stream ahead (past the strip's end: the next) */
			for (size_t l = 0; l < sb; l += 64)
				_mm_prefetch((const char *)(p + KX_PF_R16 + l), _MM_HINT_T0);
		__m512i q[8];
		if (Q4) {
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				const __m512i v = _mm512_loadu_si512(p + 32 + 64 * k);
				q[k] = _mm512_and_si512(v, m4);
				q[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
			}
		} else {
			KX_UNROLL
			for (int k = 0; k < 8; k++)
				q[k] = _mm512_loadu_si512(p + 32 + 64 * k);
		}
		const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const int8_t *x0 = xq[j] + 32 * (size_t)b;
			const __m512i idot = kx_dot32(q, x0, _mm512_set1_epi32(corr * xs[j][b]));
			const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xd[j][b]));
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), sc, acc[j]);
		}
	}
	const __mmask16 km = (__mmask16)((1u << nr) - 1);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		_mm512_mask_storeu_ps(g->y + (size_t)(t + j) * g->y_stride + r, km, acc[j]);
}
