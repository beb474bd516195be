/*
 * kern_avx2_s16.h - the 16-row kernel of the AVX2 build for Q4_0, Q4_1,
 * Q5_0, Q5_1 and Q8_0 (kx_q32_s16), on the mapped rows and on pack.h's rows16
 * copies.  Included by kern_x86.h when !KX_512, which walks it with
 * KX_S16_DRIVER.
 *
 * Rows in the lanes: a strip of 16 rows is two halves of 8 (lane l of
 * half h = row 8h + l).  Per block of 32 and half, vector k (k = 0..3)
 * holds bytes 4k..4k+3 of each row's 16 nibble bytes: their low nibbles
 * are values 4k..4k+3, their high nibbles 16+4k..16+4k+3 (Q5: the fifth
 * bits or'ed in as 0x10).  The token's matching 4 bytes are broadcast and
 * maddubs multiplies (unsigned level x signed byte, pairs summed into
 * int16); the products of a block are added in int16 (nibbles: all 8,
 * |sum| <= 8 x 2 x 15 x 127 = 30480; Q5: 4 at a time, 4 x 2 x 31 x 127 =
 * 31496: no overflow) and by madd into int32.  That is the block's exact
 * dot product of the unsigned levels; minus 8 (Q4_0) or 16 (Q5_0) x
 * sum(x), converted to float and folded as acc = fma(idot, d_w * d_x,
 * acc) in block order from 0, one lane per row, no horizontal sum; Q4_1
 * and Q5_1 also fold their minimum, accm = fma(m_w, d_x * sum(x), accm),
 * y = acc + accm.  The same sequence for every token tile, strip
 * position, thread and layout (packed = mapped bit for bit), and the
 * sequence of the AVX-512 build's kx_q32_impl: the two builds give the
 * same bits for these types.
 *
 * Cost per block, 8 rows and token: 8 broadcasts, 8 maddubs, 7 int16
 * adds, one or two madd, an add, conversion, multiply and FMA (the 8-lane
 * tiles they replaced spent a conversion, multiply and FMA per row, and
 * decoded one row at a time).  Packed rows: the vectors are loads
 * (pack.c's rows16: the scales run, Q5's eight 64-bit masks of fifth
 * bits, then 4 runs of 64 bytes, run k lane l = bytes 4k..4k+3 of row l),
 * one stream per strip.  Mapped rows: each half's 8 rows of 16 bytes are
 * transposed in registers (4 inserts, 8 unpacks), their scales and fifth
 * bits loaded one row at a time.
 *
 * Q8_0 (bytes, not nibbles): eight vectors of 4-byte groups, the copy's
 * bytes unbiased by one xor (mapped: two 16-byte transposes), and per
 * group maddubs(|w|, sign(x, w)) (|w| <= 128, a pair <= 32512) summed in
 * int32 by madd: the same integers.
 *
 * KIND: 0 Q4_0, 1 Q4_1, 2 Q5_0, 3 Q5_1, 5 Q8_0 (kx_q32_impl's numbering).
 */

/* 16 bytes at off of each of 8 mapped rows (nibbles, or half of Q8_0's
 * quants) transposed into v[k] (lane l = bytes 4k..4k+3 of row l). */
KX_INLINE void kx_rows8_nibbles(const uint8_t *const w[8], size_t off, __m256i v[4])
{
	__m256i a[4], u[4];
	KX_UNROLL
	for (int i = 0; i < 4; i++)
		a[i] = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w[i] + off))),
			_mm_loadu_si128((const __m128i *)(w[i + 4] + off)), 1);
	u[0] = _mm256_unpacklo_epi32(a[0], a[1]); /* rows 0 1 | 4 5, bytes 0-7 */
	u[1] = _mm256_unpackhi_epi32(a[0], a[1]); /* rows 0 1 | 4 5, bytes 8-15 */
	u[2] = _mm256_unpacklo_epi32(a[2], a[3]);
	u[3] = _mm256_unpackhi_epi32(a[2], a[3]);
	v[0] = _mm256_unpacklo_epi64(u[0], u[2]);
	v[1] = _mm256_unpackhi_epi64(u[0], u[2]);
	v[2] = _mm256_unpacklo_epi64(u[1], u[3]);
	v[3] = _mm256_unpackhi_epi64(u[1], u[3]);
}

/* The 8 f16 in the low (HI 0) or high (HI 1) half of each 32-bit lane. */
KX_INLINE __m256 kx_f16_of_lanes(__m256i v, const int HI)
{
	v = HI ? _mm256_srli_epi32(v, 16) : _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
	v = _mm256_packus_epi32(v, v); /* 0-3 0-3 | 4-7 4-7 */
	v = _mm256_permute4x64_epi64(v, 0x08);
	return _mm256_cvtph_ps(_mm256_castsi256_si128(v));
}

/*
 * Mapped Q5: the fifth bits of values 4k + SH .. 4k + SH + 3 (SH 0 or 16)
 * of the 8 rows whose qh words are the lanes of qh, as 0x10 in byte i of
 * lane l where row l's value 4k + SH + i has it.
 */
KX_INLINE __m256i kx_fifth_lanes(__m256i qh, const int SHIFT)
{
	const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0,
					     0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
	const __m256i bit = _mm256_set1_epi32(0x08040201);
	__m256i v = _mm256_shuffle_epi8(_mm256_srli_epi32(qh, SHIFT), sel);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 4 bytes of q at p, in every 32-bit lane. */
KX_INLINE __m256i kx_bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return _mm256_set1_epi32(v);
}

/* The 32-bit word at p + off of each of the 8 rows, lane l = row l. */
KX_INLINE __m256i kx_rows8_u32(const uint8_t *const w[8], size_t off)
{
	uint32_t u[8];
	KX_UNROLL
	for (int i = 0; i < 8; i++)
		memcpy(&u[i], w[i] + off, 4);
	return _mm256_loadu_si256((const __m256i *)u);
}

/*
 * Rows [r, r + nr) (nr <= 16; past the matrix the last row repeats and is
 * not stored) x tokens [t, t + T).  pf: the next strip (mapped) or non-NULL
 * for the first token tile of a packed strip, which prefetches the stream.
 */
KX_INLINE void kx_q32_s16(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			  const uint8_t *pf, const int KIND, const int PACKED)
{
	const int nb = g->cols / 32;
	const int has_m = KIND == 1 || KIND == 3, five = KIND == 2 || KIND == 3;
	const size_t bb = KIND == 1 ? 20 : KIND == 2 ? 22 : KIND == 3 ? 24 : KIND == 5 ? 34 : 18;
	const size_t qs_at = KIND == 1 ? 4 : KIND == 2 ? 6 : KIND == 3 ? 8 : 2; /* mapped */
	const size_t qh_at = KIND == 3 ? 4 : 2;                                  /* mapped */
	const size_t pk_qh = has_m ? 64 : 32, pk_qs = pk_qh + (five ? 64 : 0);  /* packed */
	const int corr = KIND == 0 ? -8 : KIND == 2 ? -16 : 0; /* x the activation block sum */
	const uint8_t *w[16];
	KX_UNROLL
	for (int i = 0; i < 16; i++)
		w[i] = g->w + (size_t)(r + (i < nr ? i : nr - 1)) * g->w_stride;
	const int8_t *xq[4];
	const float *xd[4];
	const int32_t *xs[4];
	__m256 acc[2][4], accm[2][4];
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
		acc[0][j] = acc[1][j] = accm[0][j] = accm[1][j] = _mm256_setzero_ps();
	}
	/* a one-token panel walk of a copy (KX_PANEL_WALK): blocks [b_lo, b_hi),
	 * the accumulators resumed from and left in g->carry between panels */
	const int b_lo = kx_b_lo(g, PACKED), b_hi = kx_b_hi(g, nb, PACKED);
	const uint8_t *pk_next = NULL; /* PACKED 2: kx_r16_next */
	if (PACKED == 2 && T == 1 && g->carry && b_lo > 0) {
		acc[0][0] = _mm256_loadu_ps(g->carry);
		acc[1][0] = _mm256_loadu_ps(g->carry + 8);
		accm[0][0] = _mm256_loadu_ps(g->carry + 16);
		accm[1][0] = _mm256_loadu_ps(g->carry + 24);
	}
	const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1),
		      m80 = _mm256_set1_epi8((char)0x80);
	for (int b = b_lo; b < b_hi; b++) {
		const size_t off = bb * (size_t)b;
		const uint8_t *pk = kx_strip_block(g, g->w + (size_t)r * g->w_stride, &pk_next,
								   r, b, off, bb, KX_LPB32(KIND), nb, PACKED);
		kx_strip_prefetch(pk, pf, off, 16 * bb, PACKED, kx_pf_how(g), 0);
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			const uint8_t *const *wh = w + 8 * h;
			__m256i v[8], qh = _mm256_setzero_si256();
			__m256 dw, mw = _mm256_setzero_ps();
			if (PACKED) {
				KX_UNROLL
				for (int k = 0; k < 8; k++) {
					if (k < 4 || KIND == 5)
						v[k] = kx_load256(pk + pk_qs + 64 * k + 32 * h);
					if (KIND == 5) /* stored biased to unsigned */
						v[k] = _mm256_xor_si256(v[k], m80);
				}
				if (has_m) {
					const __m256i dm = kx_load256(pk + 32 * h);
					dw = kx_f16_of_lanes(dm, 0);
					mw = kx_f16_of_lanes(dm, 1);
				} else {
					dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk + 16 * h)));
				}
			} else {
				kx_rows8_nibbles(wh, off + qs_at, v);
				if (KIND == 5)
					kx_rows8_nibbles(wh, off + qs_at + 16, v + 4);
				if (has_m) {
					const __m256i dm = kx_rows8_u32(wh, off);
					dw = kx_f16_of_lanes(dm, 0);
					mw = kx_f16_of_lanes(dm, 1);
				} else {
					uint16_t d16[8];
					KX_UNROLL
					for (int i = 0; i < 8; i++)
						memcpy(&d16[i], wh[i] + off, 2);
					dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d16));
				}
				if (five)
					qh = kx_rows8_u32(wh, off + qh_at);
			}
			__m256i s[2][4];
			KX_UNROLL
			for (int j = 0; j < T; j++)
				s[0][j] = s[1][j] = _mm256_setzero_si256();
			KX_UNROLL
			for (int k = 0; k < 8; k++) {
				if (KIND != 5)
					break;
				/* Q8_0: maddubs(|w|, sign(x, w)), |w| <= 128, pairs
				 * <= 32512; summed in int32 */
				const __m256i aw = _mm256_sign_epi8(v[k], v[k]);
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					const __m256i xb = kx_bcast4(xq[j] + 32 * (size_t)b + 4 * k);
					s[0][j] = _mm256_add_epi32(
						s[0][j], _mm256_madd_epi16(_mm256_maddubs_epi16(
										   aw, _mm256_sign_epi8(xb, v[k])),
									   ones));
				}
			}
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				if (KIND == 5)
					break;
				__m256i lo = _mm256_and_si256(v[k], m4);
				__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v[k], 4), m4);
				if (five && PACKED) { /* 32 mask bits: byte j gets bit j */
					lo = _mm256_or_si256(lo, kx_q5_high(pk + pk_qh + 8 * k + 4 * h));
					hi = _mm256_or_si256(hi, kx_q5_high(pk + pk_qh + 8 * (4 + k) + 4 * h));
				} else if (five) {
					lo = _mm256_or_si256(lo, kx_fifth_lanes(qh, 4 * k));
					hi = _mm256_or_si256(hi, kx_fifth_lanes(qh, 16 + 4 * k));
				}
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					const int8_t *xb = xq[j] + 32 * (size_t)b + 4 * k;
					__m256i p = _mm256_add_epi16(
						_mm256_maddubs_epi16(lo, kx_bcast4(xb)),
						_mm256_maddubs_epi16(hi, kx_bcast4(xb + 16)));
					const int a = five && k >= 2; /* Q5: 4 products per int16 sum */
					s[a][j] = _mm256_add_epi16(s[a][j], p);
				}
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				__m256i id = KIND == 5 ? s[0][j] : _mm256_madd_epi16(s[0][j], ones);
				if (five)
					id = _mm256_add_epi32(id, _mm256_madd_epi16(s[1][j], ones));
				if (corr)
					id = _mm256_add_epi32(id, _mm256_set1_epi32(corr * xs[j][b]));
				acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_mul_ps(dw, _mm256_set1_ps(xd[j][b])),
							    acc[h][j]);
				if (has_m)
					accm[h][j] = _mm256_fmadd_ps(mw, _mm256_set1_ps(xd[j][b] * (float)xs[j][b]),
								     accm[h][j]);
			}
		}
	}
	if (PACKED == 2 && T == 1 && g->carry && b_hi < nb) {
		_mm256_storeu_ps(g->carry, acc[0][0]);
		_mm256_storeu_ps(g->carry + 8, acc[1][0]);
		_mm256_storeu_ps(g->carry + 16, accm[0][0]);
		_mm256_storeu_ps(g->carry + 24, accm[1][0]);
		return;
	}
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		float *y = g->y + (size_t)(t + j) * g->y_stride + r;
		__m256 y0 = acc[0][j], y1 = acc[1][j];
		if (has_m) {
			y0 = _mm256_add_ps(y0, accm[0][j]);
			y1 = _mm256_add_ps(y1, accm[1][j]);
		}
		if (nr == 16) {
			_mm256_storeu_ps(y, y0);
			_mm256_storeu_ps(y + 8, y1);
		} else {
			float tmp[16];
			_mm256_storeu_ps(tmp, y0);
			_mm256_storeu_ps(tmp + 8, y1);
			memcpy(y, tmp, sizeof(float) * (size_t)nr);
		}
	}
}

/*
 * The widest token tile: Q4_0's copies' is 2, the others' 4 (measured on
 * copies only; a mapped tile transposes its rows once).  GEMM n = 128 (copies,
 * one thread, Zen 4, three alternations, best of 15): Q4_0 2048 x 5632 122-124
 * -> 139-141 GFLOP/s and 5632 x 2048 96-118 -> 133-134 with tiles of 2 (a
 * tile of 4's accumulators, sums, nibbles and constants spill 16 ymm);
 * Q4_1 about the same (114-120 / 108-114); Q5_0 (103-106 -> 90-94) and Q8_0
 * (113-116 -> 107-114) slower.
 */
#define KX_S16T(KIND, PACKED) ((KIND) == 0 && (PACKED) ? 2 : 4)

/*
 * Rows [r0, r1) in strips of 16, token tiles of KX_S16T (4, or 2), 2, 1, and for the
 * mapped rows 3 tokens in one tile: a mapped kernel transposes its rows
 * once a tile, so 3 tokens as 2 + 1 cost more (Q8_0 1536 x 1024, one
 * thread: 128 us against 110, as in kern_x86.h's KX_ROWS16_WALK); a
 * copy's 3 tokens cost less as 2 + 1 (Q4_0 2048 x 2048, in L2: 199-200
 * us against 210-214 for a 3-token tile).  The first tile of a strip
 * prefetches (mapped: the next strip into L2; packed: its own stream).
 * PACKED 0: the mapped rows; 1: rows16 copies, r0 a multiple of 16 (the
 * matmul driver's chunks are).
 */
#define KX_S16_STRIPS(g, r0, r1, KERNEL, KIND, PACKED)                                   \
	for (int r_ = (r0); r_ < (r1); r_ += 16) {                                       \
		const int nr_ = (r1) - r_ < 16 ? (r1) - r_ : 16;                         \
		const uint8_t *pf_ = NULL;                                               \
		if (PACKED)                                                              \
			pf_ = (g)->w;                                                    \
		else if (r_ + 16 < (r1))                                                 \
			pf_ = (g)->w + (size_t)(r_ + 16) * (g)->w_stride;                \
		int t_ = 0;                                                              \
		const int tt_ = KX_S16T(KIND, PACKED);                                   \
		for (; t_ + tt_ <= (g)->n; t_ += tt_, pf_ = NULL)                        \
			KERNEL(g, r_, nr_, t_, tt_, pf_, KIND, PACKED);                  \
		if (!(PACKED) && (g)->n - t_ == 3) {                                     \
			KERNEL(g, r_, nr_, t_, 3, pf_, KIND, PACKED);                    \
			t_ += 3;                                                         \
		}                                                                        \
		if (t_ + 2 <= (g)->n) {                                                  \
			KERNEL(g, r_, nr_, t_, 2, pf_, KIND, PACKED);                    \
			t_ += 2;                                                         \
			pf_ = NULL;                                                      \
		}                                                                        \
		if (t_ < (g)->n)                                                         \
			KERNEL(g, r_, nr_, t_, 1, pf_, KIND, PACKED);                    \
	}

/* PACKED copies in panels: the kernels' PACKED 2 (kern_x86.h, kx_b_lo) */
#define KX_S16_DRIVER(name, KERNEL, KIND, PACKED)                                       \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)                   \
	{                                                                               \
		if (!PACKED || !g->panel_bytes)                                         \
			KX_S16_STRIPS(g, r0, r1, KERNEL, KIND, PACKED)                  \
		else if (g->n == 1)                                                     \
			KX_PANEL_WALK(g, r0, r1, 32, KX_LPB32(KIND), KERNEL, KIND, 2);                  \
		else                                                                    \
			KX_S16_STRIPS(g, r0, r1, KERNEL, KIND, 2)                       \
	}

KX_S16_DRIVER(kx_gemm_q4_0, kx_q32_s16, 0, 0)
KX_S16_DRIVER(kx_gemm_q4_1, kx_q32_s16, 1, 0)
KX_S16_DRIVER(kx_gemm_q5_0, kx_q32_s16, 2, 0)
KX_S16_DRIVER(kx_gemm_q5_1, kx_q32_s16, 3, 0)
KX_S16_DRIVER(kx_gemm_q8_0, kx_q32_s16, 5, 0)
KX_S16_DRIVER(kx_gemm_q4_0_r16, kx_q32_s16, 0, 1)
KX_S16_DRIVER(kx_gemm_q4_1_r16, kx_q32_s16, 1, 1)
KX_S16_DRIVER(kx_gemm_q5_0_r16, kx_q32_s16, 2, 1)
KX_S16_DRIVER(kx_gemm_q5_1_r16, kx_q32_s16, 3, 1)
KX_S16_DRIVER(kx_gemm_q8_0_r16, kx_q32_s16, 5, 1)
