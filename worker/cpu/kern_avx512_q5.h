/*
 * kern_avx512_q5.h - the 16-row kernels of the AVX-512 build for every
 * 32-value block type (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q8_0: kx_q32_impl,
 * on the mapped rows and on pack.h's rows16 copies) and for IQ4_XS
 * (IQ4_NL's levels in blocks of 256 with six-bit sub-block scales; later
 * in this file).  Included by kern_x86.h when KX_512, after
 * kern_avx512_q8.h, whose transpose, reduction and store they share.
 *
 * Mapped rows, per block: the 16 rows' quants loaded in pairs of rows and,
 * for several tokens, transposed into 4-byte groups (24 shuffles), or for
 * one token dotted on the untransposed pairs and the lane partials summed
 * down (14 shuffles); one gather brings the 16 scales.  Packed rows: the
 * same vectors are loads (the scales one load, Q5's fifth bits eight
 * 64-bit masks already in the runs' byte order), the transposed form for
 * every token count, one stream per strip.
 *
 * Per block of 32 and row: the unsigned levels q (Q4_0/Q4_1/IQ4_NL/Q5
 * nibbles; Q5 adds 0x10 where the row's qh bit is set, by a byte-masked
 * add; IQ4_NL maps the nibble through its level table biased to unsigned;
 * Q8_0's bytes biased to unsigned), an exact integer dot product with the
 * activations, minus 8 (Q4_0), 16 (Q5_0) or 128 (IQ4_NL, Q8_0) x sum(x),
 * converted to float and folded as acc = fma(idot, d_w * d_x, acc); Q4_1
 * and Q5_1 also fold their minimum, accm = fma(m_w, d_x * sum(x), accm);
 * y = acc + accm.  Blocks in order from 0, no horizontal sum: the same
 * sequence for every tile height, token count, position, thread and
 * layout (kern_x86.h's batch invariance; packed = mapped bit for bit).
 *
 * KIND: 0 Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 4 IQ4_NL, 5 Q8_0.
 */

KX_INLINE void kx_q32_impl(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			   const uint8_t *pf, const int KIND, const int PACKED)
{
	const int nb = g->cols / 32;
	const int has_m = KIND == 1 || KIND == 3, five = KIND == 2 || KIND == 3, nib = KIND != 5;
	const size_t bb = KIND == 1 ? 20 : KIND == 2 ? 22 : KIND == 3 ? 24 : KIND == 5 ? 34 : 18;
	const size_t qs_at = KIND == 1 ? 4 : KIND == 2 ? 6 : KIND == 3 ? 8 : 2; /* mapped */
	const size_t qh_at = KIND == 3 ? 4 : 2;                                  /* mapped */
	const size_t pk_qs = (has_m ? 64 : 32) + (five ? 64 : 0);               /* packed */
	/* x the activation block sum */
	const int corr = KIND == 0 ? -8 : KIND == 2 ? -16 : KIND == 4 || KIND == 5 ? -128 : 0;
	const uint8_t *w[16];
	__m512i goff, perm;
	kx_rows16_lanes(g, r, nr, T, 1, PACKED, w, &goff, &perm);
	const uint8_t *strip = g->w + (size_t)r * g->w_stride;
	const int8_t *xq[KX_MT2];
	const float *xd[KX_MT2];
	const int32_t *xs[KX_MT2];
	__m512 acc[KX_MT2], accm[KX_MT2];
	kx_tile_begin32(g, t, T, xq, xd, xs, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		accm[j] = _mm512_setzero_ps();
	const int b_lo = kx_b_lo(g, PACKED), b_hi = kx_b_hi(g, nb, PACKED);
	const uint8_t *pk_next = NULL; /* PACKED 2: kx_r16_next */
	if (PACKED == 2 && T == 1)
		kx_carry_in(g, b_lo, acc, has_m ? accm : NULL);
	const __m512i m80 = _mm512_set1_epi8((char)0x80), c16 = _mm512_set1_epi8(0x10),
		      m4 = _mm512_set1_epi8(0x0f);
	/* IQ4_NL's levels biased to unsigned (level ^ 0x80 = level + 128) */
	const __m512i lv = _mm512_xor_si512(
		_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)wk_iq4nl_levels)), m80);
	for (int b = b_lo; b < b_hi; b++) {
		const size_t off = bb * (size_t)b;
		const uint8_t *pk = kx_strip_block(g, strip, &pk_next, r, b, off, bb,
								   KX_LPB32(KIND), nb, PACKED);
		kx_strip_prefetch(pk, pf, off, 16 * bb, PACKED,
				  g->strip_pf & WK_CPU_PF_32 ? kx_pf_how(g) : 0,
				  kx_next_strip(g, b, bb, KX_LPB32(KIND), nb, T, PACKED));
		__m512i a[8], q[8]; /* mapped: pairs of rows; the transposed runs */
		if (PACKED && nib) {
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				const __m512i v = _mm512_loadu_si512(pk + pk_qs + 64 * k);
				q[k] = _mm512_and_si512(v, m4);
				q[k + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
			}
		} else if (PACKED) { /* Q8_0, biased at packing */
			KX_UNROLL
			for (int k = 0; k < 8; k++)
				q[k] = _mm512_loadu_si512(pk + 32 + 64 * k);
		} else if (nib) {
			kx_rows16_pairs_q4(w, off + qs_at, a);
		} else {
			kx_rows16_pairs(w, off + 2, a);
			KX_UNROLL
			for (int i = 0; i < 8; i++)
				a[i] = _mm512_xor_si512(a[i], m80);
		}
		if (five && PACKED) {
			const uint8_t *mk = pk + (has_m ? 64 : 32);
			KX_UNROLL
			for (int k = 0; k < 8; k++) {
				uint64_t bits;
				memcpy(&bits, mk + 8 * k, 8);
				q[k] = _mm512_mask_add_epi8(q[k], _cvtu64_mask64(bits), q[k], c16);
			}
		} else if (five) {
			/* a[i] holds row i's 32 levels in bytes 0-31 and row
			 * i + 8's in 32-63: their qh words are the byte mask */
			KX_UNROLL
			for (int i = 0; i < 8; i++) {
				uint32_t h0, h1;
				memcpy(&h0, w[i] + off + qh_at, 4);
				memcpy(&h1, w[i + 8] + off + qh_at, 4);
				const __mmask64 k = _cvtu64_mask64((uint64_t)h0 | (uint64_t)h1 << 32);
				a[i] = _mm512_mask_add_epi8(a[i], k, a[i], c16);
			}
		} else if (KIND == 4) {
			KX_UNROLL
			for (int i = 0; i < 8; i++) {
				if (PACKED)
					q[i] = _mm512_shuffle_epi8(lv, q[i]);
				else
					a[i] = _mm512_shuffle_epi8(lv, a[i]);
			}
		}
		/* d (and m) of the 16 rows, in lane order */
		__m512 dw, mw = _mm512_setzero_ps();
		if (PACKED && !has_m) {
			dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)pk));
		} else {
			const __m512i dm = PACKED ? _mm512_loadu_si512(pk)
						  : _mm512_i32gather_epi32(goff, (const int *)(strip + off), 1);
			dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
			if (has_m)
				mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
		}
		if (T == 1 && !PACKED) {
			/* one token: the 16 rows' lane partials summed down (lane order Q) */
			const __m512i xx = _mm512_broadcast_i64x4(kx_load256(xq[0] + 32 * (size_t)b));
			__m512i z[8];
			KX_UNROLL
			for (int i = 0; i < 8; i++)
				z[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a[i], xx);
			__m512i id = _mm512_add_epi32(kx_rows16_reduce(z), _mm512_set1_epi32(corr * xs[0][b]));
			const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xd[0][b]));
			acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(id), sc, acc[0]);
			if (has_m)
				accm[0] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xd[0][b] * (float)xs[0][b]), accm[0]);
			continue;
		}
		if (!PACKED)
			kx_rows16_transpose(a, q);
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			const int8_t *x0 = xq[j] + 32 * (size_t)b;
			const __m512i idot = kx_dot32(q, x0, _mm512_set1_epi32(corr * xs[j][b]));
			const __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xd[j][b]));
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(idot), sc, acc[j]);
			if (has_m)
				accm[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xd[j][b] * (float)xs[j][b]), accm[j]);
		}
	}
	if (PACKED == 2 && T == 1 && kx_carry_out(g, b_hi, nb, acc, has_m ? accm : NULL))
		return;
	if (has_m) {
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[j] = _mm512_add_ps(acc[j], accm[j]);
	}
	kx_rows16_store(g, r, nr, t, T, perm, acc);
}


/*
 * IQ4_XS with 16 weight rows in the lanes: per block of 256 (136 bytes:
 * f16 d, u16 scales_h, u8 scales_l[4], 128 nibble bytes) two gathers bring
 * the 16 rows' d and scale bits, unpacked in the lanes into the eight
 * six-bit sub-block scales ls_s - 32.  Each sub-block of 32 is IQ4_NL's
 * unpack (nibbles through the level table biased to unsigned), one exact
 * dot with the activations per row (decode: on the untransposed pairs of
 * rows, the lane partials summed down; more tokens: transposed once per
 * tile), multiplied by ls_s in int32; the bias goes back once per block as
 * 128 x sum_s ls_s x (bsum_2s + bsum_2s+1) (8 vpdpwssd).
 *
 * Per output element and block: isum = sum_s ls_s * dot_s, an exact
 * integer, then acc = fma(float(isum), d * d_x, acc) in block order from
 * 0; no horizontal sum.
 */
/*
 * PACKED: w in pack.h's rows16 layout (a strip's block: the 16 rows' d |
 * scales_h words, their scales_l words, the 32 qs runs; lane l = row r +
 * l), read in the transposed form for every token count: the same values.
 */
KX_INLINE void kx_iq4_xs_impl(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
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
	const __m512i lv = _mm512_xor_si512(
		_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)wk_iq4nl_levels)),
		_mm512_set1_epi8((char)0x80));
	const __m512i m4 = _mm512_set1_epi32(0xf), m3 = _mm512_set1_epi32(3), c32 = _mm512_set1_epi32(32),
		      mlo = _mm512_set1_epi32(0xffff), n4 = _mm512_set1_epi8(0x0f);
	for (int b = 0; b < nb; b++) {
		const size_t off = 136 * (size_t)b;
		const uint8_t *pk = PACKED ? g->w + (size_t)r * g->w_stride + 16 * off : NULL;
		kx_strip_prefetch(pk, pf, off, 16 * 136, PACKED, kx_pf_how(g), kx_next_strip(g, b, 136, 0, nb, T, PACKED));
		const uint8_t *base = g->w + (size_t)r * g->w_stride + off;
		const __m512i dh = PACKED ? _mm512_loadu_si512(pk)
					  : _mm512_i32gather_epi32(goff, (const int *)base, 1);
		const __m512i sl = PACKED ? _mm512_loadu_si512(pk + 64)
					  : _mm512_i32gather_epi32(goff, (const int *)(base + 4), 1);
		const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh));
		const __m512i sh = _mm512_srli_epi32(dh, 16);
		__m512i ls[8], lsp[8];
		KX_UNROLL
		for (int s = 0; s < 8; s++) {
			__m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * s), m4);
			__m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * s), m3);
			ls[s] = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), c32);
			lsp[s] = _mm512_or_si512(_mm512_and_si512(ls[s], mlo), _mm512_slli_epi32(ls[s], 16));
		}
		__m512i isum[KX_MT2];
		KX_UNROLL
		for (int j = 0; j < T; j++) { /* -128 x sum_s ls_s x (sum of x over s) */
			const int16_t *bs = xs[j] + 16 * (size_t)b;
			__m512i ms = _mm512_setzero_si512();
			KX_UNROLL
			for (int s = 0; s < 8; s++)
				ms = _mm512_dpwssd_epi32(ms, lsp[s], kx_bcast32((const int8_t *)(bs + 2 * s)));
			isum[j] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(ms, 7));
		}
		for (int s = 0; s < 8; s++) {
			__m512i a[8], q[8];
			if (PACKED) { /* qs bytes 16s + 4k: run 4s + k */
				KX_UNROLL
				for (int k = 0; k < 4; k++) {
					const __m512i v = _mm512_loadu_si512(pk + 128 + 64 * (4 * (size_t)s + k));
					q[k] = _mm512_shuffle_epi8(lv, _mm512_and_si512(v, n4));
					q[k + 4] = _mm512_shuffle_epi8(lv, _mm512_and_si512(_mm512_srli_epi16(v, 4), n4));
				}
			} else {
				kx_rows16_pairs_q4(w, off + 8 + 16 * (size_t)s, a);
				KX_UNROLL
				for (int i = 0; i < 8; i++)
					a[i] = _mm512_shuffle_epi8(lv, a[i]);
			}
			if (T == 1 && !PACKED) {
				const __m512i xx = _mm512_broadcast_i64x4(
					kx_load256(xq[0] + 256 * (size_t)b + 32 * (size_t)s));
				__m512i z[8];
				KX_UNROLL
				for (int i = 0; i < 8; i++)
					z[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a[i], xx);
				isum[0] = _mm512_add_epi32(isum[0], _mm512_mullo_epi32(kx_rows16_reduce(z), ls[s]));
				continue;
			}
			if (!PACKED)
				kx_rows16_transpose(a, q);
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				const int8_t *x0 = xq[j] + 256 * (size_t)b + 32 * (size_t)s;
				const __m512i idot = kx_dot32(q, x0, _mm512_setzero_si512());
				isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(idot, ls[s]));
			}
		}
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]),
						 _mm512_mul_ps(dw, _mm512_set1_ps(xd[j][b])), acc[j]);
	}
	kx_rows16_store(g, r, nr, t, T, perm, acc);
}
