/*
 * kern_avx512_kq.h - the K-quant kernels of the AVX-512 build (included
 * by kern_x86.h when KX_512): the 16-row kernels for Q4_K, Q5_K, Q6_K,
 * Q2_K and Q3_K (kx_q45_k_impl, kx_q6_k_impl, kx_q23_k_impl, later
 * in this file; kern_x86.h and kern_x86_low.h build the drivers), which
 * every matrix of those types takes, and the 4 x 4
 * Q6_K tile below, kept (like the 256-bit Q4_K/Q5_K tile of kern_x86.h)
 * for rows too long for 32-bit gather offsets.
 *
 * Q6_K tile: 64 values per 512-bit maddubs/vpdpwssd.  Its float part is
 * the same as in the 256-bit tiles: the 16 int32 lanes are folded to 8
 * (low half + high half), which yields exactly the 8 integers the 256-bit
 * form produces, and then the same 8-lane float accumulation.
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
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
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
	kx_tile8_end(g, r, t, R, T, acc);
}

/*
 * Run n (0..7) of a Q5_K strip block's copy at position group k, from its
 * five planes (pack.h; they start at pl, 64-byte runs in the order of
 * wk_cpu_q5k_plane_unit: P0 and P1 alternating, then P2 and P3, then P4,
 * the order the chunks first read them, so a block streams in address
 * order; later chunks read again from L1; planes one after another, chunk 0
 * reading P0 and P1 side by side, streamed 9 GB/s from memory on one
 * thread against 23 for the old layout and 24-26 for this one): runs 0-4
 * whole in the low 5 bits of P0..P4; run 5 from P0's top 3 bits and P1's
 * top 2, run 6 from P2's and P3's, run 7 from P4's top 3 and bit 5 of P1
 * and of P3.  The word shifts pull bits in from the neighbouring byte;
 * the masks and selects drop them.  About 19 ops for 8 runs, where the
 * nibbles and the fifth bits took ~30.
 */
KX_INLINE __m512i kx_q5k_plane_run(const uint8_t *pl, const int n, int k)
{
	const __m512i m1f = _mm512_set1_epi8(0x1f), m07 = _mm512_set1_epi8(0x07),
		      m18 = _mm512_set1_epi8(0x18);
#define KX_P5(p) _mm512_loadu_si512(pl + 64 * wk_cpu_q5k_plane_unit(p, k))
	if (n < 5)
		return _mm512_and_si512(KX_P5(n), m1f);
	if (n < 7) { /* P0|P2 bits 5-7 -> 0-2, P1|P3 bits 6-7 -> 3-4 */
		const int a = n == 5 ? 0 : 2;
		const __m512i lo3 = _mm512_srli_epi16(KX_P5(a), 5);
		const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi16(KX_P5(a + 1), 3), m18);
		return _mm512_ternarylogic_epi32(lo3, hi2, m07, 0xE4); /* m07 ? lo3 : hi2 */
	}
	const __m512i lo3 = _mm512_srli_epi16(KX_P5(4), 5);
	const __m512i b3 = _mm512_srli_epi16(KX_P5(1), 2), b4 = _mm512_srli_epi16(KX_P5(3), 1);
	const __m512i hi2 = _mm512_and_si512(
		_mm512_ternarylogic_epi32(b3, b4, _mm512_set1_epi8(0x08), 0xE4), m18);
#undef KX_P5
	return _mm512_ternarylogic_epi32(lo3, hi2, m07, 0xE4);
}

/*
 * Q4_K and Q5_K with 16 weight rows in the lanes (the scheme of
 * kx_q32_impl in kern_avx512_q5.h).  Per block of 256: one gather
 * brings d and dmin of the 16 rows, three bring their 12 scale bytes,
 * which are unpacked in the lanes into 8 six-bit scales and 8 mins per
 * row; Q5_K's 32 bytes of fifth bits are transposed once per block and
 * OR-ed into the nibbles as bit 4 (mapped rows; the copies hold the
 * 5-bit values in planes).  Each 32-byte chunk of
 * quants (low nibbles: sub-block 2c, high: 2c + 1) is transposed once per
 * tile; a token then takes 8 vpdpbusd per sub-block with its activation
 * bytes broadcast (the nibbles are already unsigned, no offset), one
 * multiply by the sub-block scale, and 4 vpdpwssd for the mins against
 * the activation sums of 32 (pairs of them).
 *
 * Per output element and block: isum = sum_s sc_s * dot_s and msum =
 * sum_s m_s * xsum_s, exact integers, then acc = fma(float(isum),
 * d * d_x, acc) and acc = fnmadd(float(msum), dmin * d_x, acc), in block
 * order from 0; no horizontal sum.  Every tile and token count takes this
 * sequence, which is the batch invariance of kern_x86.h.  Lanes hold rows
 * in the order P of kx_rows16_transpose.
 */
/*
 * PACKED: w in pack.h's rows16 layout (a strip's block: the 16 rows' d|dmin
 * words, their three scale words, then Q4_K's 32 qs runs or Q5_K's 40
 * runs of five planes (kx_q5k_plane_run); 64 bytes each, lane l = row
 * r + l): the gathers and transposes become loads, the sequence per
 * element stays the same, and so do the values.
 */
KX_INLINE void kx_q45_k_impl(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			     const uint8_t *pf, const int Q5, const int PACKED)
{
	const int nb = g->cols / 256;
	const size_t bb = Q5 ? 176 : 144, qs0 = Q5 ? 48 : 16;
	const uint8_t *w[16];
	__m512i goff, perm;
	kx_rows16_lanes(g, r, nr, T, 0, PACKED, w, &goff, &perm);
	const uint8_t *strip = g->w + (size_t)r * g->w_stride;
	const int8_t *xq[KX_MT2];
	const float *xd[KX_MT2];
	const int16_t *xs[KX_MT2];
	__m512 acc[KX_MT2];
	kx_tile_begin256(g, t, T, xq, xd, xs, acc);
	const __m512i m4 = _mm512_set1_epi8(0x0f), m3f = _mm512_set1_epi8(0x3f),
		      m30 = _mm512_set1_epi8(0x30), mff = _mm512_set1_epi32(0xff),
		      mf0 = _mm512_set1_epi8((char)0xf0);
	/*
	 * Q4_K's high nibbles stay in place (q & 0xf0: 16 times the level, no
	 * shift a run) and the low runs' scales are taken 16 times, so isum
	 * is 16 times the sum above (< 2^29: 8 x 63 x 32 x 15 x 128 x 16) and
	 * one shift a token a block gives it exactly.  One thread, packed
	 * Q4_K 5632 x 2048 from memory: 27.2-27.3 -> 28.4-29.1 GB/s
	 * (88-90 -> 93 % of the paired pass), 55.6 -> 56.8 in L2; same bits.
	 */
	const int Q4H = !Q5;
	for (int b = 0; b < nb; b++) {
		const size_t off = bb * (size_t)b;
		const uint8_t *pk = PACKED ? strip + 16 * off : NULL;
		kx_strip_prefetch(pk, pf, off, 16 * bb, PACKED, kx_pf_how(g), kx_next_strip(g, b, bb, 0, nb, T, PACKED));
		__m512i dd, s0, s1, s2;
		if (PACKED) {
			dd = _mm512_loadu_si512(pk);
			s0 = _mm512_loadu_si512(pk + 64);
			s1 = _mm512_loadu_si512(pk + 128);
			s2 = _mm512_loadu_si512(pk + 192);
		} else {
			__m512i hd[4];
			kx_rows16_heads(w, off, hd);
			dd = hd[0];
			s0 = hd[1];
			s1 = hd[2];
			s2 = hd[3];
		}
		const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
		const __m512 dmw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
		/* bytes: scales 0-3, 4-7; mins 0-3, 4-7 (get_scale_min_k4, in lanes) */
		const __m512i scb[2] = {
			_mm512_and_si512(s0, m3f),
			_mm512_or_si512(_mm512_and_si512(s2, m4), _mm512_and_si512(_mm512_srli_epi32(s0, 2), m30)),
		};
		const __m512i mnb[2] = {
			_mm512_and_si512(s1, m3f),
			_mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(s2, 4), m4),
					_mm512_and_si512(_mm512_srli_epi32(s1, 2), m30)),
		};
		/*
		 * mins: msum = sum_s m_s S_s, S_s the sum of sub-block s's 32
		 * activations (bsum 2s + bsum 2s+1, |S_s| <= 4096: int16), as four
		 * vpdpwssd of the pairs (m_2p, m_2p+1), zero-extended from the
		 * scale bytes by one byte shuffle each, against (S_2p, S_2p+1) of
		 * the token; the same integer as pairing each m_s with the two
		 * bsums (8 vpdpwssd, 32 ops a block to build the pairs).  One
		 * thread, packed Q4_K 2048 x 2048 in L2: 56.7 -> 60-62 GB/s.
		 */
		__m512i isum[KX_MT2];
		__m512 mf[KX_MT2];
		{
			const __m512i i01 = _mm512_set4_epi32((int)0xff0dff0c, (int)0xff09ff08,
							      (int)0xff05ff04, (int)0xff01ff00);
			const __m512i i23 = _mm512_set4_epi32((int)0xff0fff0e, (int)0xff0bff0a,
							      (int)0xff07ff06, (int)0xff03ff02);
			const __m512i mp[4] = {
				_mm512_shuffle_epi8(mnb[0], i01), /* (m0, m1) */
				_mm512_shuffle_epi8(mnb[0], i23), /* (m2, m3) */
				_mm512_shuffle_epi8(mnb[1], i01), /* (m4, m5) */
				_mm512_shuffle_epi8(mnb[1], i23), /* (m6, m7) */
			};
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				const __m256i s8 = _mm256_madd_epi16(kx_load256(xs[j] + 16 * (size_t)b),
								     _mm256_set1_epi16(1));
				int32_t sp[8]; /* (S0,S1) (S2,S3), twice, (S4,S5) (S6,S7), twice */
				_mm256_storeu_si256((__m256i *)sp, _mm256_packs_epi32(s8, s8));
				__m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp[0],
								 _mm512_set1_epi32(sp[0]));
				ms = _mm512_dpwssd_epi32(ms, mp[1], _mm512_set1_epi32(sp[1]));
				ms = _mm512_dpwssd_epi32(ms, mp[2], _mm512_set1_epi32(sp[4]));
				ms = _mm512_dpwssd_epi32(ms, mp[3], _mm512_set1_epi32(sp[5]));
				mf[j] = _mm512_cvtepi32_ps(ms);
				isum[j] = _mm512_setzero_si512();
			}
		}
		__m512i th[8]; /* mapped Q5_K: the fifth bits, bit 2c / 2c+1 for chunk c */
		if (Q5 && !PACKED) {
			__m512i a[8];
			kx_rows16_pairs(w, off + 16, a);
			kx_rows16_transpose(a, th);
		}
		KX_UNROLL
		for (int c = 0; c < 4; c++) {
			__m512i a[8], q[8];
			if (PACKED && !Q5) {
				KX_UNROLL
				for (int k = 0; k < 8; k++)
					q[k] = _mm512_loadu_si512(pk + 256 + 512 * c + 64 * k);
			} else if (!PACKED) {
				kx_rows16_pairs(w, off + qs0 + 32 * (size_t)c, a);
				kx_rows16_transpose(a, q);
			}
			/* the scales of runs 2c, 2c + 1: bytes 2 (c % 2), 2 (c % 2) + 1 of each
			 * lane, zero-extended; Q4_K by one byte shuffle each (a shift and
			 * a mask before: Q4_K 2048 x 2048 in L2 +2-3 %), Q5_K by shifts
			 * and masks (shuffled, it measured 2 % slower) */
			__m512i sc0, sc1;
			if (Q4H) {
				const int bs = 2 * (c % 2);
				const __m512i i0 = _mm512_set4_epi32(
					(int)(0xffffff0c + bs), (int)(0xffffff08 + bs), (int)(0xffffff04 + bs),
					(int)(0xffffff00 + bs));
				sc0 = _mm512_shuffle_epi8(scb[c / 2], i0);
				sc1 = _mm512_shuffle_epi8(scb[c / 2], _mm512_add_epi32(i0, _mm512_set1_epi32(1)));
			} else {
				sc0 = _mm512_and_si512(_mm512_srli_epi32(scb[c / 2], 16 * (c % 2)), mff);
				sc1 = _mm512_and_si512(_mm512_srli_epi32(scb[c / 2], 16 * (c % 2) + 8), mff);
			}
			__m512i ql[8], qh[8];
			if (Q4H)
				sc0 = _mm512_slli_epi32(sc0, 4);
			KX_UNROLL
			for (int k = 0; k < 8; k++) {
				if (Q5 && PACKED) { /* the planes: runs 2c, 2c + 1 */
					ql[k] = kx_q5k_plane_run(pk + 256, 2 * c, k);
					qh[k] = kx_q5k_plane_run(pk + 256, 2 * c + 1, k);
					continue;
				}
				ql[k] = _mm512_and_si512(q[k], m4);
				qh[k] = Q4H ? _mm512_and_si512(q[k], mf0)
					    : _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4);
				if (Q5) { /* bit 2c (low run), 2c + 1 (high run) to bit 4 */
					const __m512i m10 = _mm512_set1_epi8(0x10);
					__m512i b0 = c < 3 ? _mm512_slli_epi16(th[k], 4 - 2 * c) : _mm512_srli_epi16(th[k], 2);
					__m512i b1 = c < 2 ? _mm512_slli_epi16(th[k], 3 - 2 * c)
							   : _mm512_srli_epi16(th[k], 2 * c - 3);
					ql[k] = _mm512_or_si512(ql[k], _mm512_and_si512(b0, m10));
					qh[k] = _mm512_or_si512(qh[k], _mm512_and_si512(b1, m10));
				}
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				const int8_t *x0 = xq[j] + 256 * (size_t)b + 64 * c;
				__m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
				KX_UNROLL
				for (int k = 0; k < 8; k++) {
					lo = _mm512_dpbusd_epi32(lo, ql[k], kx_bcast32(x0 + 4 * k));
					hi = _mm512_dpbusd_epi32(hi, qh[k], kx_bcast32(x0 + 32 + 4 * k));
				}
				isum[j] = _mm512_add_epi32(isum[j], _mm512_add_epi32(_mm512_mullo_epi32(lo, sc0),
										     _mm512_mullo_epi32(hi, sc1)));
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const __m512 dx = _mm512_set1_ps(xd[j][b]);
			if (Q4H)
				isum[j] = _mm512_srai_epi32(isum[j], 4);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(dw, dx), acc[j]);
			acc[j] = _mm512_fnmadd_ps(mf[j], _mm512_mul_ps(dmw, dx), acc[j]);
		}
	}
	kx_rows16_store(g, r, nr, t, T, perm, acc);
}

/*
 * Q6_K with 16 weight rows in the lanes.  Per half of a block, ql bytes
 * 64h..64h+31 (A), 64h+32..64h+63 (B) and qh bytes 32h..32h+31 (H) of the
 * 16 rows are transposed once per tile; the four runs of 32 values of the
 * half are then (A & 15 | H bits 0-1 << 4), (B & 15 | H bits 2-3 << 4),
 * (A >> 4 | H bits 4-5), (B >> 4 | H bits 6-7), unsigned 0..63.  A token
 * takes 4 vpdpbusd per group of 16 (one scale each), one multiply by the
 * group's scale, and the -32 offset once per block as 32 x sum_g sc_g x
 * bsum_g (8 vpdpwssd).
 *
 * Per output element and block: isum = sum_g sc_g * dot_g - 32 * sum_g
 * sc_g * bsum_g, an exact integer, then acc = fma(float(isum), d * d_x,
 * acc) in block order from 0; no horizontal sum.  Lanes hold rows in the
 * order P of kx_rows16_transpose.
 */
KX_INLINE __m512i kx_sext_byte(__m512i v, int k) /* signed byte k of each lane */
{
	return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * k), 24);
}

/*
 * The 6-bit values (0..63) of run `run` of a half block, byte for byte
 * from its ql bytes 0-31 (a), 32-63 (b) and qh bytes (h), in any layout.
 */
KX_INLINE __m512i kx_q6_run(__m512i a, __m512i b, __m512i h, const int run)
{
	const __m512i src = run % 2 ? b : a;
	const __m512i lo4 = run < 2 ? src : _mm512_srli_epi16(src, 4);
	const __m512i up = run == 0   ? _mm512_slli_epi16(h, 4)
			   : run == 1 ? _mm512_slli_epi16(h, 2)
			   : run == 2 ? h
				      : _mm512_srli_epi16(h, 2);
	return _mm512_or_si512(_mm512_and_si512(lo4, _mm512_set1_epi8(0x0f)),
			       _mm512_and_si512(up, _mm512_set1_epi8(0x30)));
}

/*
 * The same from pack.h's planes of a half block (a, b, c): runs 0, 1 and
 * 3 under a mask; run 2 from the top bit pairs, each shifted into place
 * within 16-bit lanes (the bits a shift brings in from the next byte land
 * where the selects or the final mask drop them).
 */
KX_INLINE __m512i kx_q6_plane_run(__m512i a, __m512i b, __m512i c, const int run)
{
	const __m512i m3f = _mm512_set1_epi8(0x3f);
	if (run != 2)
		return _mm512_and_si512(run == 0 ? a : run == 1 ? b : c, m3f);
	/* 0xE4: the third operand selects the first where set, else the second */
	const __m512i u = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a, 6), _mm512_srli_epi16(b, 4),
						    _mm512_set1_epi8(0x03), 0xE4);
	return _mm512_and_si512(_mm512_ternarylogic_epi32(u, _mm512_srli_epi16(c, 2),
							  _mm512_set1_epi8(0x0f), 0xE4),
				m3f);
}

/*
 * PACKED: w in pack.h's rows16 layout (a strip's block: the 16 d, the 4
 * scale runs, the 24 runs of the planes A, B, C of each half; lane l = row
 * r + l), read by the transposed form for every token count (one token
 * too: one stream, and three of four values a mask away): loads instead of
 * gathers and transposes, the same values.
 */
KX_INLINE void kx_q6_k_impl(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			    const uint8_t *pf, int variant /* none */, const int PACKED)
{
	(void)variant;
	const int nb = g->cols / 256;
	const uint8_t *w[16];
	__m512i goff, perm;
	kx_rows16_lanes(g, r, nr, T, 1, PACKED, w, &goff, &perm);
	const int8_t *xq[KX_MT2];
	const float *xd[KX_MT2];
	const int16_t *xs[KX_MT2];
	__m512 acc[KX_MT2];
	kx_tile_begin256(g, t, T, xq, xd, xs, acc);
	for (int b = 0; b < nb; b++) {
		const size_t off = 210 * (size_t)b;
		const uint8_t *pk = PACKED ? g->w + (size_t)r * g->w_stride + 16 * off : NULL;
		kx_strip_prefetch(pk, pf, off, 16 * 210, PACKED, kx_pf_how(g), kx_next_strip(g, b, 210, 0, nb, T, PACKED));
		const uint8_t *base = g->w + (size_t)r * g->w_stride + off;
		__m512 dw;
		if (PACKED) {
			dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pk));
		} else {
			/* bytes 206..209: scales 14, 15 and d (the block ends at 210) */
			const __m512i dg = _mm512_i32gather_epi32(goff, (const int *)(base + 206), 1);
			dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dg, 16)));
		}
		if (T == 1 && !PACKED) {
			/*
			 * One token: no transposes.  Per pair of rows (i, i + 8),
			 * maddubs on the untransposed values and vpdpwssd with each
			 * lane's group scale (one permute of the two rows' 16 scales
			 * as words), the -32 offset through the bsums; then the lane
			 * partials are summed down to the same exact integers.
			 */
			const int8_t *xb = xq[0] + 256 * (size_t)b;
			const __m512i bsv = _mm512_broadcast_i64x4(kx_load256(xs[0] + 16 * (size_t)b));
			__m512i z[8];
			KX_UNROLL
			for (int i = 0; i < 8; i++) {
				__m256i s8 = _mm256_inserti128_si256(
					_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w[i] + off + 192))),
					_mm_loadu_si128((const __m128i *)(w[i + 8] + off + 192)), 1);
				const __m512i scw = _mm512_cvtepi8_epi16(s8); /* row i: words 0-15, row i+8: 16-31 */
				__m512i zi = _mm512_sub_epi32(_mm512_setzero_si512(),
							      _mm512_slli_epi32(_mm512_madd_epi16(scw, bsv), 5));
				KX_UNROLL
				for (int h = 0; h < 2; h++) {
					const uint8_t *p0 = w[i] + off, *p1 = w[i + 8] + off;
					__m512i ta = _mm512_inserti64x4(_mm512_castsi256_si512(kx_load256(p0 + 64 * h)),
									kx_load256(p1 + 64 * h), 1);
					__m512i tb = _mm512_inserti64x4(_mm512_castsi256_si512(kx_load256(p0 + 64 * h + 32)),
									kx_load256(p1 + 64 * h + 32), 1);
					__m512i th = _mm512_inserti64x4(_mm512_castsi256_si512(kx_load256(p0 + 128 + 32 * h)),
									kx_load256(p1 + 128 + 32 * h), 1);
					KX_UNROLL
					for (int run = 0; run < 4; run++) {
						__m512i q = kx_q6_run(ta, tb, th, run);
						__m512i xv = _mm512_broadcast_i64x4(kx_load256(xb + 128 * h + 32 * run));
						const int ga = 8 * h + 2 * run;
						const __m512i sidx = _mm512_inserti64x4(
							_mm512_castsi256_si512(_mm256_inserti128_si256(
								_mm256_castsi128_si256(_mm_set1_epi16((short)ga)),
								_mm_set1_epi16((short)(ga + 1)), 1)),
							_mm256_inserti128_si256(
								_mm256_castsi128_si256(_mm_set1_epi16((short)(16 + ga))),
								_mm_set1_epi16((short)(17 + ga)), 1),
							1);
						zi = _mm512_dpwssd_epi32(zi, _mm512_maddubs_epi16(q, xv),
									 _mm512_permutexvar_epi16(sidx, scw));
					}
				}
				z[i] = zi;
			}
			acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(kx_rows16_reduce(z)),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd[0][b])), acc[0]);
			continue;
		}
		__m512i sc[4], pr[8];
		if (!PACKED)
			kx_rows16_heads(w, off + 192, sc);
		KX_UNROLL
		for (int i = 0; i < 4; i++) {
			if (PACKED)
				sc[i] = _mm512_loadu_si512(pk + 32 + 64 * i);
			/* (sc 4i, sc 4i+1) and (sc 4i+2, sc 4i+3) as int16 pairs */
			__m512i lo = _mm512_srai_epi16(_mm512_slli_epi16(sc[i], 8), 8);
			__m512i hi = _mm512_srai_epi16(sc[i], 8);
			pr[2 * i] = _mm512_mask_blend_epi16(0xAAAAAAAAu, lo, _mm512_slli_epi32(hi, 16));
			pr[2 * i + 1] = _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(lo, 16), hi);
		}
		__m512i isum[KX_MT2];
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const int16_t *bs = xs[j] + 16 * (size_t)b;
			__m512i cs = _mm512_setzero_si512();
			KX_UNROLL
			for (int i = 0; i < 8; i++)
				cs = _mm512_dpwssd_epi32(cs, pr[i], kx_bcast32((const int8_t *)(bs + 2 * i)));
			isum[j] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(cs, 5));
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			__m512i ta[8], tb[8], th[8], a[8];
			if (PACKED) { /* the planes A, B, C of half h: runs 24h.. */
				KX_UNROLL
				for (int k = 0; k < 8; k++) {
					ta[k] = _mm512_loadu_si512(pk + 288 + 64 * (24 * h + k));
					tb[k] = _mm512_loadu_si512(pk + 288 + 64 * (24 * h + 8 + k));
					th[k] = _mm512_loadu_si512(pk + 288 + 64 * (24 * h + 16 + k));
				}
			} else {
				kx_rows16_pairs(w, off + 64 * (size_t)h, a);
				kx_rows16_transpose(a, ta);
				kx_rows16_pairs(w, off + 64 * (size_t)h + 32, a);
				kx_rows16_transpose(a, tb);
				kx_rows16_pairs(w, off + 128 + 32 * (size_t)h, a);
				kx_rows16_transpose(a, th);
			}
			KX_UNROLL
			for (int run = 0; run < 4; run++) {
				__m512i q[8];
				KX_UNROLL
				for (int k = 0; k < 8; k++)
					q[k] = PACKED ? kx_q6_plane_run(ta[k], tb[k], th[k], run)
						      : kx_q6_run(ta[k], tb[k], th[k], run);
				const int ga = 8 * h + 2 * run; /* groups ga (k < 4) and ga + 1 */
				const __m512i sca = kx_sext_byte(sc[ga / 4], ga % 4);
				const __m512i scb = kx_sext_byte(sc[ga / 4], ga % 4 + 1);
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					const int8_t *x0 = xq[j] + 256 * (size_t)b + 128 * h + 32 * run;
					isum[j] = _mm512_add_epi32(isum[j], kx_dot16x2(q, x0, sca, scb));
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd[j][b])), acc[j]);
	}
	kx_rows16_store(g, r, nr, t, T, perm, acc);
}

/*
 * Q2_K and Q3_K with 16 weight rows in the lanes (the transposed form of
 * kx_q45_k_impl for every token count).  A block's 256 values are 8 runs
 * of 32, run (h, k) = values 128h + 32k + l: the two bits 2k..2k+1 of qs
 * byte 32h + l (Q3_K: and bit 4h + k of hmask byte l as bit 2), groups of
 * 16 with their own scale (Q2_K: low nibble of scales[g], the high nibble
 * the min; Q3_K: six bits from 12 bytes, offset 32).  The qs half and
 * Q3_K's hmask are transposed once per tile; the scales and mins are
 * unpacked in the lanes from gathers.  A token takes 8 vpdpbusd per run,
 * one int32 multiply per group by its scale; Q3_K's -4 goes back once per
 * block as 4 x sum_g sc_g x bsum_g, Q2_K's mins as sum_g m_g x bsum_g
 * (8 vpdpwssd each).
 *
 * Per output element and block: isum = sum_g sc_g * dot_g (Q3_K: minus
 * 4 x sum_g sc_g * bsum_g), an exact integer, then acc = fma(float(isum),
 * d * d_x, acc), and for Q2_K acc = fnmadd(float(msum), dmin * d_x, acc),
 * in block order from 0; no horizontal sum.  Lanes hold rows in the order
 * P of kx_rows16_transpose.
 */
/*
 * PACKED: w in pack.h's rows16 layout (a strip's block: Q3_K's 16 d, its
 * 3 scale runs, 8 hmask runs and 16 qs runs; Q2_K's d|dmin words, 4
 * scale runs and 16 qs runs; lane l = row r + l): loads in place of the
 * gathers and transposes, the same values.
 */
KX_INLINE void kx_q23_k_impl(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			     const uint8_t *pf, const int Q3, const int PACKED)
{
	const int nb = g->cols / 256;
	const size_t bb = Q3 ? 110 : 84, qs0 = Q3 ? 32 : 16;
	const size_t pk_sc = Q3 ? 32 : 64, pk_qs = Q3 ? 736 : 320; /* PACKED offsets */
	const uint8_t *w[16];
	__m512i goff, perm;
	kx_rows16_lanes(g, r, nr, T, 0, PACKED, w, &goff, &perm);
	const int8_t *xq[KX_MT2];
	const float *xd[KX_MT2];
	const int16_t *xs[KX_MT2];
	__m512 acc[KX_MT2];
	kx_tile_begin256(g, t, T, xq, xd, xs, acc);
	const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4), mf = _mm512_set1_epi32(15),
		      mlo = _mm512_set1_epi32(0xffff);
	for (int b = 0; b < nb; b++) {
		const size_t off = bb * (size_t)b;
		const uint8_t *pk = PACKED ? g->w + (size_t)r * g->w_stride + 16 * off : NULL;
		kx_strip_prefetch(pk, pf, off, 16 * bb, PACKED, kx_pf_how(g), kx_next_strip(g, b, bb, 0, nb, T, PACKED));
		const uint8_t *base = g->w + (size_t)r * g->w_stride + off;
		/* Q3_K: bytes 106..109 are scales 10, 11 and d (the block ends at
		 * 110); Q2_K: bytes 80..83 are d and dmin */
		__m512i dg;
		if (PACKED && Q3) /* d alone: 16 f16, as the high halves below */
			dg = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)pk)), 16);
		else if (PACKED)
			dg = _mm512_loadu_si512(pk);
		else
			dg = _mm512_i32gather_epi32(goff, (const int *)(base + (Q3 ? 106 : 80)), 1);
		const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(Q3 ? _mm512_srli_epi32(dg, 16) : dg));
		const __m512 dmw = Q3 ? _mm512_setzero_ps()
				      : _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dg, 16)));
		__m512i sc[16], mn[16];
		if (Q3) {
			const __m512i s0 = PACKED ? _mm512_loadu_si512(pk + pk_sc)
						  : _mm512_i32gather_epi32(goff, (const int *)(base + 96), 1);
			const __m512i s1 = PACKED ? _mm512_loadu_si512(pk + pk_sc + 64)
						  : _mm512_i32gather_epi32(goff, (const int *)(base + 100), 1);
			const __m512i s2 = PACKED ? _mm512_loadu_si512(pk + pk_sc + 128)
						  : _mm512_i32gather_epi32(goff, (const int *)(base + 104), 1);
			KX_UNROLL
			for (int j = 0; j < 16; j++) {
				const int bj = j % 8;
				__m512i lo = _mm512_and_si512(
					_mm512_srli_epi32(bj < 4 ? s0 : s1, 8 * (bj % 4) + (j >= 8 ? 4 : 0)), mf);
				__m512i hi = _mm512_and_si512(_mm512_srli_epi32(s2, 8 * (j % 4) + 2 * (j / 4)),
							      _mm512_set1_epi32(3));
				sc[j] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)),
							 _mm512_set1_epi32(32));
			}
		} else {
			KX_UNROLL
			for (int q = 0; q < 4; q++) {
				const __m512i s = PACKED ? _mm512_loadu_si512(pk + pk_sc + 64 * q)
							 : _mm512_i32gather_epi32(goff, (const int *)(base + 4 * q), 1);
				KX_UNROLL
				for (int k = 0; k < 4; k++) {
					sc[4 * q + k] = _mm512_and_si512(_mm512_srli_epi32(s, 8 * k), mf);
					mn[4 * q + k] = _mm512_and_si512(_mm512_srli_epi32(s, 8 * k + 4), mf);
				}
			}
		}
		/* the offset (Q3_K) or the mins (Q2_K) against the bsums, per token */
		__m512i pr[8], isum[KX_MT2];
		__m512 msum[KX_MT2];
		KX_UNROLL
		for (int i = 0; i < 8; i++) {
			const __m512i *v = Q3 ? sc : mn;
			pr[i] = _mm512_or_si512(_mm512_and_si512(v[2 * i], mlo), _mm512_slli_epi32(v[2 * i + 1], 16));
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const int16_t *bs = xs[j] + 16 * (size_t)b;
			__m512i cs = _mm512_setzero_si512();
			KX_UNROLL
			for (int i = 0; i < 8; i++)
				cs = _mm512_dpwssd_epi32(cs, pr[i], kx_bcast32((const int8_t *)(bs + 2 * i)));
			if (Q3) {
				isum[j] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(cs, 2));
				msum[j] = _mm512_setzero_ps();
			} else {
				isum[j] = _mm512_setzero_si512();
				msum[j] = _mm512_cvtepi32_ps(cs);
			}
		}
		__m512i thm[8];
		if (Q3 && PACKED) {
			KX_UNROLL
			for (int k = 0; k < 8; k++)
				thm[k] = _mm512_loadu_si512(pk + 224 + 64 * k);
		} else if (Q3) {
			__m512i a[8];
			kx_rows16_pairs(w, off, a);
			kx_rows16_transpose(a, thm);
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			__m512i a[8], tq[8];
			if (PACKED) { /* qs bytes 32h + 4k: run 8h + k */
				KX_UNROLL
				for (int k = 0; k < 8; k++)
					tq[k] = _mm512_loadu_si512(pk + pk_qs + 64 * (8 * (size_t)h + k));
			} else {
				kx_rows16_pairs(w, off + qs0 + 32 * (size_t)h, a);
				kx_rows16_transpose(a, tq);
			}
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				__m512i q[8];
				const int hb = 4 * h + k; /* Q3_K: the hmask bit of the run, to bit 2 */
				KX_UNROLL
				for (int kk = 0; kk < 8; kk++) {
					q[kk] = _mm512_and_si512(_mm512_srli_epi16(tq[kk], 2 * k), m3);
					if (Q3) {
						__m512i hv = hb >= 2 ? _mm512_srli_epi16(thm[kk], hb - 2)
								     : _mm512_slli_epi16(thm[kk], 2 - hb);
						q[kk] = _mm512_or_si512(q[kk], _mm512_and_si512(hv, m4));
					}
				}
				const int ga = 8 * h + 2 * k; /* groups ga (kk < 4) and ga + 1 */
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					const int8_t *x0 = xq[j] + 256 * (size_t)b + 128 * h + 32 * k;
					isum[j] = _mm512_add_epi32(isum[j], kx_dot16x2(q, x0, sc[ga], sc[ga + 1]));
				}
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const __m512 dx = _mm512_set1_ps(xd[j][b]);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(dw, dx), acc[j]);
			if (!Q3)
				acc[j] = _mm512_fnmadd_ps(msum[j], _mm512_mul_ps(dmw, dx), acc[j]);
		}
	}
	kx_rows16_store(g, r, nr, t, T, perm, acc);
}
