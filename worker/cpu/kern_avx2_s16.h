/*
 * kern_avx2_s16.h - the 16-row Q4_0 kernel of the AVX2 build, on the
 * mapped rows and on pack.h's rows16 copies.  Included by kern_x86.h when
 * !KX_512, which walks it with KX_S16_DRIVER.
 *
 * Rows in the lanes: a strip of 16 rows is two halves of 8 (lane l of
 * half h = row 8h + l).  Per block of 32 and half, vector k (k = 0..3)
 * holds bytes 4k..4k+3 of each row's 16 nibble bytes: their low nibbles
 * are values 4k..4k+3, their high nibbles 16+4k..16+4k+3.  The token's
 * matching 4 bytes are broadcast and maddubs multiplies (unsigned nibble x
 * signed byte, pairs summed into int16); the 8 products of a block are
 * added in int16 (|sum| <= 8 x 2 x 15 x 127 = 30480: no overflow) and
 * once by madd into int32.  That is the block's exact dot product of the
 * nibbles; minus 8 x sum(x), converted to float and folded as
 * acc = fma(idot, d_w * d_x, acc) in block order from 0, one lane per
 * row, no horizontal sum: the same sequence for every token tile, strip
 * position, thread and layout (packed = mapped bit for bit), and the
 * sequence of the AVX-512 build's kx_q32_impl for Q4_0.
 *
 * Cost per block, 8 rows and token: 8 broadcasts, 8 maddubs, 7 int16
 * adds, one madd, add, conversion, multiply and FMA (the 8-lane tile it
 * replaced spent a conversion, multiply and FMA per row, and decoded one
 * row at a time).  Packed rows: the vectors are loads (pack.c's rows16:
 * the 16 scales, then 4 runs of 64 bytes, run k lane l = bytes 4k..4k+3
 * of row l), one stream per strip.  Mapped rows: each half's 8 rows of 16
 * bytes are transposed in registers (4 inserts, 8 unpacks) and the 8
 * scales loaded one by one.
 */

/* Half h of a mapped strip: the 8 rows' nibble bytes of the block at off,
 * transposed into v[k] (lane l = bytes 4k..4k+3 of row l), and the scales. */
KX_INLINE void kx_q4_0_rows8(const uint8_t *const w[8], size_t off, __m256i v[4], __m256 *dw)
{
	__m256i a[4], u[4];
	KX_UNROLL
	for (int i = 0; i < 4; i++)
		a[i] = _mm256_inserti128_si256(
			_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w[i] + off + 2))),
			_mm_loadu_si128((const __m128i *)(w[i + 4] + off + 2)), 1);
	u[0] = _mm256_unpacklo_epi32(a[0], a[1]); /* rows 0 1 | 4 5, bytes 0-7 */
	u[1] = _mm256_unpackhi_epi32(a[0], a[1]); /* rows 0 1 | 4 5, bytes 8-15 */
	u[2] = _mm256_unpacklo_epi32(a[2], a[3]);
	u[3] = _mm256_unpackhi_epi32(a[2], a[3]);
	v[0] = _mm256_unpacklo_epi64(u[0], u[2]);
	v[1] = _mm256_unpackhi_epi64(u[0], u[2]);
	v[2] = _mm256_unpacklo_epi64(u[1], u[3]);
	v[3] = _mm256_unpackhi_epi64(u[1], u[3]);
	uint16_t h[8];
	KX_UNROLL
	for (int i = 0; i < 8; i++)
		memcpy(&h[i], w[i] + off, 2);
	*dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* The 4 bytes of q at p, in every 32-bit lane. */
KX_INLINE __m256i kx_bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return _mm256_set1_epi32(v);
}

/*
 * Rows [r, r + nr) (nr <= 16; past the matrix the last row repeats and is
 * not stored) x tokens [t, t + T).  pf: the next strip (mapped) or non-NULL
 * for the first token tile of a packed strip, which prefetches the stream.
 */
KX_INLINE void kx_q4_0_s16(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T,
			   const uint8_t *pf, const int PACKED)
{
	const int nb = g->cols / 32;
	const uint8_t *w[16];
	KX_UNROLL
	for (int i = 0; i < 16; i++)
		w[i] = g->w + (size_t)(r + (i < nr ? i : nr - 1)) * g->w_stride;
	const uint8_t *strip = g->w + (size_t)r * g->w_stride;
	const int8_t *xq[4];
	const float *xd[4];
	const int32_t *xs[4];
	__m256 acc[2][4];
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
		acc[0][j] = acc[1][j] = _mm256_setzero_ps();
	}
	const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
	for (int b = 0; b < nb; b++) {
		const size_t off = 18 * (size_t)b;
		const uint8_t *pk = strip + 16 * off; /* PACKED: this block of the strip */
		if (pf != NULL && PACKED) /* the stream ahead */
			for (size_t l = 0; l < 16 * 18; l += 64)
				kx_pf_r16(pk + l);
		else if (pf != NULL) /* the next strip, 16 x 18 bytes per block */
			for (size_t l = 0; l < 16 * 18; l += 64)
				_mm_prefetch((const char *)(pf + 16 * off + l), _MM_HINT_T1);
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			__m256i v[4];
			__m256 dw;
			if (PACKED) {
				KX_UNROLL
				for (int k = 0; k < 4; k++)
					v[k] = kx_load256(pk + 32 + 64 * k + 32 * h);
				dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pk + 16 * h)));
			} else {
				kx_q4_0_rows8(w + 8 * h, off, v, &dw);
			}
			__m256i s[4];
			KX_UNROLL
			for (int j = 0; j < T; j++)
				s[j] = _mm256_setzero_si256();
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				const __m256i lo = _mm256_and_si256(v[k], m4);
				const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v[k], 4), m4);
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					const int8_t *xb = xq[j] + 32 * (size_t)b + 4 * k;
					__m256i p = _mm256_add_epi16(
						_mm256_maddubs_epi16(lo, kx_bcast4(xb)),
						_mm256_maddubs_epi16(hi, kx_bcast4(xb + 16)));
					s[j] = _mm256_add_epi16(s[j], p);
				}
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				__m256i id = _mm256_add_epi32(_mm256_madd_epi16(s[j], ones),
							      _mm256_set1_epi32(-8 * xs[j][b]));
				acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_mul_ps(dw, _mm256_set1_ps(xd[j][b])),
							    acc[h][j]);
			}
		}
	}
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		float *y = g->y + (size_t)(t + j) * g->y_stride + r;
		if (nr == 16) {
			_mm256_storeu_ps(y, acc[0][j]);
			_mm256_storeu_ps(y + 8, acc[1][j]);
		} else {
			float tmp[16];
			_mm256_storeu_ps(tmp, acc[0][j]);
			_mm256_storeu_ps(tmp + 8, acc[1][j]);
			memcpy(y, tmp, sizeof(float) * (size_t)nr);
		}
	}
}

/*
 * Rows [r0, r1) in strips of 16, token tiles of 4, 2, 1; the first tile of
 * a strip prefetches (mapped: the next strip into L2; packed: its own
 * stream).  PACKED 0: the mapped rows; 1: rows16 copies, r0 a multiple of
 * 16 (the matmul driver's chunks are).
 */
#define KX_S16_DRIVER(name, KERNEL, PACKED)                                             \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)                   \
	{                                                                               \
		for (int r_ = r0; r_ < r1; r_ += 16) {                                  \
			const int nr_ = r1 - r_ < 16 ? r1 - r_ : 16;                    \
			const uint8_t *pf_ = NULL;                                      \
			if (PACKED)                                                     \
				pf_ = g->w;                                             \
			else if (r_ + 16 < r1)                                          \
				pf_ = g->w + (size_t)(r_ + 16) * g->w_stride;           \
			int t_ = 0;                                                     \
			for (; t_ + 4 <= g->n; t_ += 4, pf_ = NULL)                     \
				KERNEL(g, r_, nr_, t_, 4, pf_, PACKED);                 \
			if (t_ + 2 <= g->n) {                                           \
				KERNEL(g, r_, nr_, t_, 2, pf_, PACKED);                 \
				t_ += 2;                                                \
				pf_ = NULL;                                             \
			}                                                               \
			if (t_ < g->n)                                                  \
				KERNEL(g, r_, nr_, t_, 1, pf_, PACKED);                 \
		}                                                                       \
	}

KX_S16_DRIVER(kx_gemm_q4_0, kx_q4_0_s16, 0)
KX_S16_DRIVER(kx_gemm_q4_0_r16, kx_q4_0_s16, 1)
