/*
 * kern_x86_low.h - the x86 tiles of the low-bit super-block types Q2_K,
 * Q3_K and IQ4_XS against Q8_256 activations; included by kern_x86.h after
 * its helpers, so it is compiled in both the AVX2 and the AVX-512 build
 * (where all three take 16-row kernels, IQ4_XS from kern_avx512_q5.h, Q2_K
 * and Q3_K from kern_avx512_kq.h; their tiles only rows too long for them).
 *
 * Same contract as the other tiles: per block an exact integer dot product
 * (maddubs into int16 pairs that cannot saturate: |q| <= 7 or |level| <=
 * 127 against |x| <= 127, then sub-block scales by madd / vpdpwssd), one
 * float accumulator per output with a fixed FMA sequence, one horizontal
 * sum: identical for any tile, batch or thread.
 */

/* the 16 words of w16 in both lanes as words 8h..8h+7, then word 2k of that
 * half in the low lane and word 2k + 1 in the high lane */
KX_INLINE __m256i kx_sub_scales(__m256i w16, int h, int k)
{
	__m256i sh = h ? _mm256_permute4x64_epi64(w16, 0xEE) : _mm256_permute4x64_epi64(w16, 0x44);
	return _mm256_shuffle_epi8(sh, kx_word_bcast_mask(2 * k, 2 * k + 1));
}

/*
 * Q2_K: value 128h + 32k + l is bits 2k..2k+1 of qs[32h + l], scale
 * sc[8h + 2k + (l >= 16)] (low nibble) and min (high nibble): a block gives
 * d*dx*sum_j sc_j*dot_j - dmin*dx*sum_j m_j*bsum_j.
 */
KX_INLINE void kx_q2_k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	const int nb = g->cols / 256;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int16_t *xs[KX_MT];
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m128i m4 = _mm_set1_epi8(0x0f);
	const __m256i m3 = _mm256_set1_epi8(0x03);
	for (int b = 0; b < nb; b++) {
		__m256i sc[KX_MR], mn[KX_MR], iacc[KX_MR][KX_MT];
		float d[KX_MR], dmin[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 84 * (size_t)b;
			if (T == 1 || t == 0)
				kx_prefetch_block(blk, 84);
			__m128i s = _mm_loadu_si128((const __m128i *)blk);
			sc[i] = _mm256_cvtepu8_epi16(_mm_and_si128(s, m4));
			mn[i] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4));
			d[i] = kx_f16(blk + 80);
			dmin[i] = kx_f16(blk + 82);
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm256_setzero_si256();
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			__m256i q[KX_MR];
			KX_UNROLL
			for (int i = 0; i < R; i++)
				q[i] = kx_load256(w[i] + 84 * (size_t)b + 16 + 32 * h);
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				__m256i qk[KX_MR], s[KX_MR];
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					qk[i] = _mm256_and_si256(_mm256_srli_epi16(q[i], 2 * k), m3);
					s[i] = kx_sub_scales(sc[i], h, k);
				}
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					__m256i xv = kx_load256(xq[j] + 256 * (size_t)b + 128 * h + 32 * k);
					KX_UNROLL
					for (int i = 0; i < R; i++)
						iacc[i][j] = kx_dpwssd(iacc[i][j], _mm256_maddubs_epi16(qk[i], xv), s[i]);
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			__m256i bs = kx_load256(xs[j] + 16 * (size_t)b);
			float dx = xd[j][b];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				__m256i im = _mm256_madd_epi16(mn[i], bs);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[i][j]),
							    _mm256_set1_ps(d[i] * dx), acc[i][j]);
				acc[i][j] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im),
							     _mm256_set1_ps(dmin[i] * dx), acc[i][j]);
			}
		}
	}
	kx_tile8_end(g, r, t, R, T, acc);
}

/* Q3_K's 16 six-bit scales (12 bytes at s) as words, offset 32 removed */
KX_INLINE __m256i kx_q3_scales(const uint8_t *s)
{
	uint32_t a[3], o[4];
	memcpy(a, s, 12);
	o[0] = (a[0] & 0x0f0f0f0fu) | ((a[2] & 0x03030303u) << 4);
	o[1] = (a[1] & 0x0f0f0f0fu) | (((a[2] >> 2) & 0x03030303u) << 4);
	o[2] = ((a[0] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 4) & 0x03030303u) << 4);
	o[3] = ((a[1] >> 4) & 0x0f0f0f0fu) | (((a[2] >> 6) & 0x03030303u) << 4);
	__m128i v = _mm_setr_epi32((int)o[0], (int)o[1], (int)o[2], (int)o[3]);
	return _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
}

/*
 * Q3_K: q3 = low two bits (as Q2_K) | hmask bit 4h + k << 2, value
 * sc_j * (q3 - 4): the dot uses q3 (unsigned) and the offset is folded in
 * once per block as 4 * sum_j sc_j * bsum_j.
 */
KX_INLINE void kx_q3_k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	const int nb = g->cols / 256;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int16_t *xs[KX_MT];
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i m3 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x01);
	for (int b = 0; b < nb; b++) {
		__m256i sc[KX_MR], hm[KX_MR], iacc[KX_MR][KX_MT];
		float d[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 110 * (size_t)b;
			if (T == 1 || t == 0)
				kx_prefetch_block(blk, 110);
			sc[i] = kx_q3_scales(blk + 96);
			hm[i] = kx_load256(blk);
			d[i] = kx_f16(blk + 108);
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm256_setzero_si256();
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			__m256i q[KX_MR];
			KX_UNROLL
			for (int i = 0; i < R; i++)
				q[i] = kx_load256(w[i] + 110 * (size_t)b + 32 + 32 * h);
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				__m256i qk[KX_MR], s[KX_MR];
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					__m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm[i], 4 * h + k), m1);
					qk[i] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q[i], 2 * k), m3),
								_mm256_slli_epi16(hb, 2));
					s[i] = kx_sub_scales(sc[i], h, k);
				}
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					__m256i xv = kx_load256(xq[j] + 256 * (size_t)b + 128 * h + 32 * k);
					KX_UNROLL
					for (int i = 0; i < R; i++)
						iacc[i][j] = kx_dpwssd(iacc[i][j], _mm256_maddubs_epi16(qk[i], xv), s[i]);
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			__m256i bs = kx_load256(xs[j] + 16 * (size_t)b);
			float dx = xd[j][b];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				__m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc[i], bs), 2);
				__m256i id = _mm256_sub_epi32(iacc[i][j], corr);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_set1_ps(d[i] * dx), acc[i][j]);
			}
		}
	}
	kx_tile8_end(g, r, t, R, T, acc);
}

/*
 * IQ4_XS: per 32-value sub-block a byte shuffle turns the nibbles into
 * IQ4_NL's levels; the signed dot by the sign trick (|level|, x * sign),
 * then the sub-block's scale ls - 32 by madd.
 */
KX_INLINE void kx_iq4_xs_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	const int nb = g->cols / 256;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int16_t *xs[KX_MT];
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i lv = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)wk_iq4nl_levels));
	for (int b = 0; b < nb; b++) {
		int ls[KX_MR][8];
		__m256i iacc[KX_MR][KX_MT];
		float d[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 136 * (size_t)b;
			if (T == 1 || t == 0)
				kx_prefetch_block(blk, 136);
			for (int s = 0; s < 8; s++)
				ls[i][s] = wk_iq4_xs_scale(blk, s);
			d[i] = kx_f16(blk);
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm256_setzero_si256();
		}
		KX_UNROLL
		for (int s = 0; s < 8; s++) {
			__m256i wq[KX_MR], sv[KX_MR];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				__m128i v = _mm_loadu_si128((const __m128i *)(w[i] + 136 * (size_t)b + 8 + 16 * s));
				__m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v),
								       _mm_srli_epi16(v, 4), 1);
				wq[i] = _mm256_shuffle_epi8(lv, _mm256_and_si256(both, m4));
				sv[i] = _mm256_set1_epi16((short)ls[i][s]);
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				__m256i xv = kx_load256(xq[j] + 256 * (size_t)b + 32 * s);
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq[i], wq[i]),
									 _mm256_sign_epi8(xv, wq[i]));
					iacc[i][j] = kx_dpwssd(iacc[i][j], p, sv[i]);
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			float dx = xd[j][b];
			KX_UNROLL
			for (int i = 0; i < R; i++)
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[i][j]),
							    _mm256_set1_ps(d[i] * dx), acc[i][j]);
		}
	}
	kx_tile8_end(g, r, t, R, T, acc);
}

#if KX_512
KX_DRIVER(kx_gemm_q2_k_pairs, kx_q2_k_tile, 4, 4)
KX_DRIVER(kx_gemm_q3_k_pairs, kx_q3_k_tile, 4, 4)
KX_ROWS16_DRIVER(kx_gemm_q2_k, kx_q23_k_impl, 0, kx_gemm_q2_k_pairs)
KX_ROWS16_DRIVER(kx_gemm_q3_k, kx_q23_k_impl, 1, kx_gemm_q3_k_pairs)
KX_R16_DRIVER256(kx_gemm_q2_k_r16, kx_q23_k_impl, 0)
KX_R16_DRIVER256(kx_gemm_q3_k_r16, kx_q23_k_impl, 1)
KX_DRIVER(kx_gemm_iq4_xs_pairs, kx_iq4_xs_tile, 4, 4)
KX_ROWS16_DRIVER(kx_gemm_iq4_xs, kx_iq4_xs_impl, 0, kx_gemm_iq4_xs_pairs)
KX_R16_DRIVER256(kx_gemm_iq4_xs_r16, kx_iq4_xs_impl, 0)
#else
KX_DRIVER(kx_gemm_q2_k, kx_q2_k_tile, 2, 4)
KX_DRIVER(kx_gemm_q3_k, kx_q3_k_tile, 2, 4)
KX_DRIVER(kx_gemm_iq4_xs, kx_iq4_xs_tile, 2, 4)
#endif
