/*
 * kern_x86_kq512.h - the Q6_K tile of the AVX-512 build (included by
 * kern_x86.h when KX_512): 64 values per 512-bit maddubs/vpdpwssd, i.e.
 * half the integer instructions of the 256-bit tile.  (Q4_K/Q5_K measured
 * faster in the 256-bit form, which both builds share.)
 *
 * The float part is the same as in the 256-bit tiles: the 16 int32 lanes
 * are folded to 8 (low half + high half), which yields exactly the 8
 * integers the 256-bit form produces, and then the same 8-lane float
 * accumulation.  Every tile shape of this build uses these functions, so
 * batch invariance holds as described in kern_x86.h.
 */

/* word index pattern: 128-bit lane g of a zmm selects word base + g */
KX_INLINE __m512i kx_lane_words(int base)
{
	return _mm512_add_epi16(_mm512_set1_epi16((short)base),
				_mm512_set_epi64(0x0003000300030003ll, 0x0003000300030003ll,
						 0x0002000200020002ll, 0x0002000200020002ll,
						 0x0001000100010001ll, 0x0001000100010001ll, 0, 0));
}

/* 16 lanes to the 8 of the 256-bit form: lane l + lane l+8 */
KX_INLINE __m256i kx_fold512(__m512i v)
{
	return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/*
 * Q6_K, 64 consecutive values at a time (half h, pair m of quarters):
 * ql bytes 64h..64h+63 give the low 4 bits (low nibbles for m = 0, high
 * for m = 1), qh bytes 32h..32h+31 (in both 256-bit halves) the top 2.
 */
KX_INLINE void kx_q6_k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	const int nb = g->cols / 256;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int16_t *xs[KX_MT];
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[i][j] = _mm256_setzero_ps();
	}
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		const uint8_t *xr = g->x + (size_t)(t + j) * g->x_stride;
		xq[j] = (const int8_t *)xr;
		xd[j] = (const float *)(xr + g->cols);
		xs[j] = (const int16_t *)(xr + g->cols + 4 * (size_t)nb);
	}
	const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
	const __m512i sh0 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
	const __m512i sh1 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
	for (int b = 0; b < nb; b++) {
		__m512i scz[KX_MR], iacc[KX_MR][KX_MT];
		__m256i sc16[KX_MR];
		float d[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 210 * (size_t)b;
			if (T == 1)
				kx_prefetch_block(blk, 210);
			d[i] = kx_f16(blk + 208);
			sc16[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
			scz[i] = _mm512_castsi256_si512(sc16[i]);
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm512_setzero_si512();
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			KX_UNROLL
			for (int m = 0; m < 2; m++) {
				__m512i q[KX_MR], s[KX_MR];
				const __m512i idx = kx_lane_words(8 * h + 4 * m);
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					const uint8_t *blk = w[i] + 210 * (size_t)b;
					__m512i l = _mm512_loadu_si512(blk + 64 * h);
					__m512i hb = _mm512_broadcast_i64x4(kx_load256(blk + 128 + 32 * h));
					__m512i lo, up;
					if (m == 0) {
						lo = _mm512_and_si512(l, m4);
						up = _mm512_and_si512(_mm512_sllv_epi16(hb, sh0), m30);
					} else {
						lo = _mm512_and_si512(_mm512_srli_epi16(l, 4), m4);
						up = _mm512_and_si512(_mm512_srlv_epi16(hb, sh1), m30);
					}
					q[i] = _mm512_or_si512(lo, up);
					s[i] = _mm512_permutexvar_epi16(idx, scz[i]);
				}
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					__m512i xv = _mm512_loadu_si512(xq[j] + 256 * (size_t)b + 128 * h + 64 * m);
					KX_UNROLL
					for (int i = 0; i < R; i++)
						iacc[i][j] = _mm512_dpwssd_epi32(iacc[i][j], _mm512_maddubs_epi16(q[i], xv), s[i]);
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			__m256i bs = kx_load256(xs[j] + 16 * (size_t)b);
			float dx = xd[j][b];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				__m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16[i], bs), 5);
				__m256i id = _mm256_sub_epi32(kx_fold512(iacc[i][j]), corr);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_set1_ps(d[i] * dx), acc[i][j]);
			}
		}
	}
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_hsum8(acc[i][j]);
}
