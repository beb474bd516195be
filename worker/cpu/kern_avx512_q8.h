/*
 * kern_avx512_q8.h - the Q4_0 / Q8_0 pair tile of the AVX-512 build
 * (included by kern_x86.h when KX_512) and the 16-row helpers every
 * 16-row kernel shares (pairs, transpose, reduction, store, lanes, dot
 * products).  Q4_0 and Q8_0 themselves take the 32-value 16-row kernel of
 * kern_avx512_q5.h; the pair tile below serves only rows too long for
 * 32-bit gather offsets.
 *
 * Pair tile: two blocks per 512-bit vpdpbusd, and the
 * per-block scales of 8 blocks fetched at once (one gather of the f16 d
 * fields, one load of the activation scales) and spread with permutes
 * instead of a scalar conversion and broadcast per block and row.
 *
 * Per output element: 16 float lanes, lanes 0-7 accumulate the even
 * blocks and 8-15 the odd ones (Q8_0; Q4_0 interleaves by 4), in block
 * order, then one fixed horizontal sum.  The integer block sums are exact
 * (the same integers as the 256-bit form); every tile shape of this build
 * uses this function, so batch invariance holds as kern_x86.h describes.
 */

KX_INLINE float kx_hsum16(__m512 v)
{
	__m256 s = _mm256_add_ps(_mm512_castps512_ps256(v),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	return kx_hsum8(s);
}

/* Lane -> block-of-the-pair index (0 or 1) pattern, plus the pair base p. */
KX_INLINE __m512i kx_pair_idx(int p, const int Q4)
{
	if (Q4)
		return _mm512_add_epi32(_mm512_set1_epi32(p),
					_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1));
	return _mm512_add_epi32(_mm512_set1_epi32(p),
				_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
}

KX_INLINE void kx_q8_32_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			     const int Q4)
{
	const int nb = g->cols / 32;
	const int bb = Q4 ? 18 : 34;
	__m512 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int32_t *xs[KX_MT];
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[i][j] = _mm512_setzero_ps();
	}
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i gidx = _mm256_setr_epi32(0, bb, 2 * bb, 3 * bb, 4 * bb, 5 * bb, 6 * bb, 7 * bb);
	const __m512i m4 = _mm512_set1_epi8(0x0f), m80 = _mm512_set1_epi8((char)0x80);
	for (int b8 = 0; b8 < nb; b8 += 8) {
		const int nblk = nb - b8 < 8 ? nb - b8 : 8;
		const __mmask8 km = (__mmask8)((1u << nblk) - 1);
		__m256 dw[KX_MR], dx[KX_MT];
		__m256i cr[KX_MT];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + (size_t)bb * b8;
			if (T == 1)
				kx_prefetch_block(blk, 8 * (size_t)bb);
			__m256i d16 = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), km, gidx,
								   (const int *)blk, 1);
			dw[i] = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(d16));
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			dx[j] = _mm256_maskz_loadu_ps(km, xd[j] + b8);
			__m256i s = _mm256_maskz_loadu_epi32(km, xs[j] + b8);
			/* Q4_0: -sum per lane (x 8 lanes = -8 sum); Q8_0: -16 sum (= -128 sum) */
			cr[j] = _mm256_sub_epi32(_mm256_setzero_si256(), Q4 ? s : _mm256_slli_epi32(s, 4));
		}
		/*
		 * d_w * d_x: decode multiplies once per 8 blocks and permutes per
		 * pair; tiles with several tokens permute d_w and d_x per pair and
		 * multiply (fewer live registers).  Permutes are exact, so both
		 * give the same products bit for bit.
		 */
		__m256 s8[KX_MR];
		if (T == 1) {
			KX_UNROLL
			for (int i = 0; i < R; i++)
				s8[i] = _mm256_mul_ps(dw[i], dx[0]);
		}
		KX_UNROLL
		for (int p = 0; p < 8; p += 2) {
			if (p >= nblk)
				break;
			const int two = p + 1 < nblk;
			const __m512i pidx = kx_pair_idx(p, Q4);
			__m512i q[KX_MR];
			__m512 sw[KX_MR];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				const uint8_t *b0 = w[i] + (size_t)bb * (b8 + p);
				if (Q4) {
					__m128i v0 = _mm_loadu_si128((const __m128i *)(b0 + 2));
					__m128i v1 = two ? _mm_loadu_si128((const __m128i *)(b0 + bb + 2))
							 : _mm_setzero_si128();
					__m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(v0), v1, 1);
					q[i] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v),
										   _mm256_srli_epi16(v, 4), 1), m4);
				} else {
					__m256i v0 = kx_load256(b0 + 2);
					__m256i v1 = two ? kx_load256(b0 + bb + 2) : _mm256_set1_epi8((char)0x80);
					q[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1), m80);
				}
				sw[i] = _mm512_permutexvar_ps(pidx, _mm512_castps256_ps512(T == 1 ? s8[i] : dw[i]));
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				const int8_t *x0 = xq[j] + 32 * (size_t)(b8 + p);
				__m512i xv = two ? _mm512_loadu_si512(x0) : _mm512_zextsi256_si512(kx_load256(x0));
				if (Q4) /* 128-bit lanes [x_p lo, x_p+1 lo, x_p hi, x_p+1 hi] */
					xv = _mm512_shuffle_i64x2(xv, xv, _MM_SHUFFLE(3, 1, 2, 0));
				__m512i corr = _mm512_permutexvar_epi32(pidx, _mm512_castsi256_si512(cr[j]));
				__m512 sx = T == 1 ? _mm512_setzero_ps()
						   : _mm512_permutexvar_ps(pidx, _mm512_castps256_ps512(dx[j]));
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					__m512i id = _mm512_dpbusd_epi32(corr, q[i], xv);
					__m512 sc = T == 1 ? sw[i] : _mm512_mul_ps(sw[i], sx);
					acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(id), sc, acc[i][j]);
				}
			}
		}
	}
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_hsum16(acc[i][j]);
}

/*
 * The 16-row helpers (the 32-value kernel, kx_q32_impl, is in
 * kern_avx512_q5.h; the K-quants' in kern_avx512_kq.h).  Q8_0 with weight
 * rows in the lanes: 16 rows per vector.  For each block
 * the 16 rows' 32 quants are transposed in registers into 8 vectors (lane
 * l, vector k = bytes 4k..4k+3 of row P(l)), so that one vpdpbusd with the
 * token's 4 bytes broadcast advances 16 rows at once, and a block costs a
 * token 8 dot products, one conversion, one multiply and one FMA for 16
 * outputs (the pair tile above spends a conversion, multiply and FMA per
 * output and pair of blocks).  The transpose is paid once per block and
 * tile of T tokens.
 *
 * Per output element: the exact integer dot product of the block, minus
 * 128 x the activation sum (the weights are biased to unsigned), converted
 * to float and folded as acc = fma(dot, d_w * d_x, acc) in block order,
 * from 0; no horizontal sum.  That sequence is the same for every tile
 * height, token count, tile position and thread, which is the batch
 * invariance of kern_x86.h.
 *
 * Lanes hold rows in the order P = 0-3, 8-11, 4-7, 12-15 (what the
 * in-lane transpose yields); P is its own inverse, so one permute puts the
 * sums back in row order before the store.  Rows past the matrix (nr < 16)
 * repeat the last row and are not stored.
 */
/* 32 bytes at offset off of the 16 rows w[]: a[i] = row i | row i + 8 */
KX_INLINE void kx_rows16_pairs(const uint8_t *const w[16], size_t off, __m512i a[8])
{
	KX_UNROLL
	for (int i = 0; i < 8; i++)
		a[i] = _mm512_inserti64x4(_mm512_castsi256_si512(kx_load256(w[i] + off)),
					  kx_load256(w[i + 8] + off), 1);
}

/*
 * Q4_0: the 16 nibble bytes at offset off of the 16 rows, unpacked to the
 * 32 values in element order (low nibbles 0-15, high 16-31) in the layout
 * of kx_rows16_pairs: two loads broadcast into 128-bit lanes, one shift
 * per lane pair and a mask.
 */
KX_INLINE void kx_rows16_pairs_q4(const uint8_t *const w[16], size_t off, __m512i a[8])
{
	const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 0x40004, 0x40004, 0x40004, 0x40004, 0, 0, 0, 0,
					     0x40004, 0x40004, 0x40004, 0x40004);
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	KX_UNROLL
	for (int i = 0; i < 8; i++) {
		__m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(w[i] + off)));
		z = _mm512_mask_broadcast_i32x4(z, 0xFF00, _mm_loadu_si128((const __m128i *)(w[i + 8] + off)));
		a[i] = _mm512_and_si512(_mm512_srlv_epi16(z, sh), m4);
	}
}

/*
 * The 16 bytes at off of the 16 rows as four vectors of dwords in the lane
 * order P of kx_rows16_transpose (below): v[k], lane l = bytes 4k..4k+3 of
 * row P(l).  Four 128-bit loads a vector (rows k, 8 + k, 4 + k, 12 + k in
 * its 128-bit lanes) and a 4 x 4 transpose of dwords within the lanes:
 * what four gathers of one dword a row gave, at 16 loads and 8 unpacks
 * (the gathers cost a K-quant block as much as its quants' transposes).
 */
KX_INLINE void kx_rows16_heads(const uint8_t *const w[16], size_t off, __m512i v[4])
{
	__m512i z[4], t[4];
	KX_UNROLL
	for (int k = 0; k < 4; k++) {
		z[k] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w[k] + off)));
		z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(w[8 + k] + off)), 1);
		z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(w[4 + k] + off)), 2);
		z[k] = _mm512_inserti32x4(z[k], _mm_loadu_si128((const __m128i *)(w[12 + k] + off)), 3);
	}
	t[0] = _mm512_unpacklo_epi32(z[0], z[1]);
	t[1] = _mm512_unpackhi_epi32(z[0], z[1]);
	t[2] = _mm512_unpacklo_epi32(z[2], z[3]);
	t[3] = _mm512_unpackhi_epi32(z[2], z[3]);
	v[0] = _mm512_unpacklo_epi64(t[0], t[2]);
	v[1] = _mm512_unpackhi_epi64(t[0], t[2]);
	v[2] = _mm512_unpacklo_epi64(t[1], t[3]);
	v[3] = _mm512_unpackhi_epi64(t[1], t[3]);
}

/*
 * The pairs of kx_rows16_pairs transposed by 4-byte groups: q[k], lane l =
 * bytes 4k..4k+3 of row P(l), P = 0-3, 8-11, 4-7, 12-15.  24 shuffles.
 */
KX_INLINE void kx_rows16_transpose(const __m512i a[8], __m512i q[8])
{
	__m512i u[8], v[8];
	KX_UNROLL
	for (int i = 0; i < 8; i += 2) {
		u[i] = _mm512_unpacklo_epi32(a[i], a[i + 1]);
		u[i + 1] = _mm512_unpackhi_epi32(a[i], a[i + 1]);
	}
	KX_UNROLL
	for (int h = 0; h < 8; h += 4) {
		v[h + 0] = _mm512_unpacklo_epi64(u[h + 0], u[h + 2]);
		v[h + 1] = _mm512_unpackhi_epi64(u[h + 0], u[h + 2]);
		v[h + 2] = _mm512_unpacklo_epi64(u[h + 1], u[h + 3]);
		v[h + 3] = _mm512_unpackhi_epi64(u[h + 1], u[h + 3]);
	}
	KX_UNROLL
	for (int k = 0; k < 4; k++) {
		q[k] = _mm512_shuffle_i64x2(v[k], v[k + 4], _MM_SHUFFLE(2, 0, 2, 0));
		q[k + 4] = _mm512_shuffle_i64x2(v[k], v[k + 4], _MM_SHUFFLE(3, 1, 3, 1));
	}
}

/* Lane orders of the 16-row kernels: P (transpose, its own inverse) and Q
 * (kx_rows16_reduce), with Q's inverse for the store. */
KX_INLINE __m512i kx_lane_p(void)
{
	return _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
}
KX_INLINE __m512i kx_lane_q(void)
{
	return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
}
KX_INLINE __m512i kx_lane_q_inv(void)
{
	return _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
}

/*
 * z[i]: lanes 0-7 partial sums of row i, 8-15 of row i + 8.  Returns the
 * 16 row totals in lane order Q (exact integer adds, 14 shuffles).
 */
KX_INLINE __m512i kx_rows16_reduce(const __m512i z[8])
{
	__m512i sm[4], uu[2];
	KX_UNROLL
	for (int m = 0; m < 4; m++) /* 128-bit lanes: rows 2m, 2m+8, 2m+1, 2m+9 */
		sm[m] = _mm512_add_epi32(_mm512_shuffle_i64x2(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
					 _mm512_shuffle_i64x2(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
	KX_UNROLL
	for (int m = 0; m < 2; m++) /* two rows per 128-bit lane */
		uu[m] = _mm512_add_epi32(_mm512_unpacklo_epi64(sm[2 * m], sm[2 * m + 1]),
					 _mm512_unpackhi_epi64(sm[2 * m], sm[2 * m + 1]));
	__m512 e0 = _mm512_castsi512_ps(uu[0]), e1 = _mm512_castsi512_ps(uu[1]);
	return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(e0, e1, _MM_SHUFFLE(2, 0, 2, 0))),
				_mm512_castps_si512(_mm512_shuffle_ps(e0, e1, _MM_SHUFFLE(3, 1, 3, 1))));
}

/* Row pointers of a strip of nr <= 16 rows from r; missing rows repeat the last. */
KX_INLINE void kx_rows16_ptrs(const struct wk_cpu_gemm *g, int r, int nr, const uint8_t *w[16])
{
	for (int i = 0; i < 16; i++)
		w[i] = g->w + (size_t)(r + (i < nr ? i : nr - 1)) * g->w_stride;
}

/* Byte offsets from row r of lane l's row (lane_row, clamped), for gathers. */
KX_INLINE __m512i kx_rows16_goff(const struct wk_cpu_gemm *g, int nr, __m512i lane_row)
{
	return _mm512_mullo_epi32(_mm512_min_epi32(lane_row, _mm512_set1_epi32(nr - 1)),
				  _mm512_set1_epi32((int)g->w_stride));
}

/*
 * A panel walk (KX_PANEL_WALK) of one token: a strip that does not start
 * at block 0 resumes its accumulators from g->carry (acc; accm where
 * given, the minimum terms), and one that stops before the row's last
 * block leaves them there (then 1: nothing to store yet).
 */
KX_INLINE void kx_carry_in(const struct wk_cpu_gemm *g, int b_lo, __m512 *acc, __m512 *accm)
{
	if (g->carry == NULL || b_lo == 0)
		return;
	acc[0] = _mm512_loadu_ps(g->carry);
	if (accm)
		accm[0] = _mm512_loadu_ps(g->carry + 16);
}
KX_INLINE int kx_carry_out(const struct wk_cpu_gemm *g, int b_hi, int nb, const __m512 *acc,
			   const __m512 *accm)
{
	if (g->carry == NULL || b_hi >= nb)
		return 0;
	_mm512_storeu_ps(g->carry, acc[0]);
	if (accm)
		_mm512_storeu_ps(g->carry + 16, accm[0]);
	return 1;
}

/* Stores the T tokens' 16-lane sums of rows r..r+nr-1; perm maps rows to lanes. */
KX_INLINE void kx_rows16_store(const struct wk_cpu_gemm *g, int r, int nr, int t, const int T, __m512i perm,
			       const __m512 *acc)
{
	const __mmask16 km = (__mmask16)((1u << nr) - 1);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		_mm512_mask_storeu_ps(g->y + (size_t)(t + j) * g->y_stride + r, km,
				      _mm512_permutexvar_ps(perm, acc[j]));
}

/* 4 bytes at p in every lane (a load-port broadcast, no shuffle uop) */
KX_INLINE __m512i kx_bcast32(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return _mm512_set1_epi32(v);
}

/* The T tokens' activation arrays from token t (Q8_32), zeroed accumulators. */
KX_INLINE void kx_tile_begin32(const struct wk_cpu_gemm *g, int t, const int T, const int8_t **xq,
			       const float **xd, const int32_t **xs, __m512 *acc)
{
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
		acc[j] = _mm512_setzero_ps();
	}
}

/* The same for the Q8_256 format. */
KX_INLINE void kx_tile_begin256(const struct wk_cpu_gemm *g, int t, const int T, const int8_t **xq,
				const float **xd, const int16_t **xs, __m512 *acc)
{
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
		acc[j] = _mm512_setzero_ps();
	}
}

/*
 * A 16-row kernel's lanes.  Mapped rows: row pointers w (missing rows
 * repeat the last), gather offsets goff for lane -> row order P (the
 * transpose's) or, for one token when Q1, Q (kx_rows16_reduce's), and
 * *perm, the row -> lane permutation of the store.  PACKED (pack.h's
 * rows16 copies): lane l is row r + l, nothing to point at or gather.
 */
KX_INLINE void kx_rows16_lanes(const struct wk_cpu_gemm *g, int r, int nr, const int T,
			       const int Q1, const int PACKED, const uint8_t *w[16], __m512i *goff,
			       __m512i *perm)
{
	if (PACKED) {
		*perm = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
		*goff = _mm512_setzero_si512();
		return;
	}
	const __m512i lane_row = Q1 && T == 1 ? kx_lane_q() : kx_lane_p();
	*perm = Q1 && T == 1 ? kx_lane_q_inv() : lane_row;
	kx_rows16_ptrs(g, r, nr, w);
	*goff = kx_rows16_goff(g, nr, lane_row);
}

/*
 * The exact integer dot product of 32 values per lane with one token's 32
 * activation bytes x0: q[k] holds values 4k..4k+3 of each lane's row
 * (unsigned), start is added (a block-sum correction).
 */
KX_INLINE __m512i kx_dot32(const __m512i q[8], const int8_t *x0, __m512i start)
{
	__m512i id0 = start, id1 = _mm512_setzero_si512();
	KX_UNROLL
	for (int k = 0; k < 8; k += 2) {
		id0 = _mm512_dpbusd_epi32(id0, q[k], kx_bcast32(x0 + 4 * k));
		id1 = _mm512_dpbusd_epi32(id1, q[k + 1], kx_bcast32(x0 + 4 * k + 4));
	}
	return _mm512_add_epi32(id0, id1);
}

/*
 * The same over two groups of 16 values (q[0..3] and q[4..7]), each
 * multiplied by its group's scale (sa, sb, per lane): the K-quants' runs.
 */
KX_INLINE __m512i kx_dot16x2(const __m512i q[8], const int8_t *x0, __m512i sa, __m512i sb)
{
	__m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
	KX_UNROLL
	for (int k = 0; k < 4; k++) {
		d0 = _mm512_dpbusd_epi32(d0, q[k], kx_bcast32(x0 + 4 * k));
		d1 = _mm512_dpbusd_epi32(d1, q[k + 4], kx_bcast32(x0 + 16 + 4 * k));
	}
	return _mm512_add_epi32(_mm512_mullo_epi32(d0, sa), _mm512_mullo_epi32(d1, sb));
}

