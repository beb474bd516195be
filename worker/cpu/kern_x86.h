/*
 * kern_x86.h - x86 SIMD kernels, written once and compiled twice:
 *   kern_avx2.c   (-mavx2 -mfma -mf16c)             KX_512 0: ymm, maddubs
 *   kern_avx512.c (+ avx512f/bw/vl/vnni)            KX_512 1: zmm float math,
 *                                                    vpdpbusd / vpdpwssd; its
 *                                                    own 16-row integer
 *                                                    kernels (kern_x86_*512.h)
 * Each build defines KX_512 and KX_TABLE before including this file.
 *
 * Structure: one tile function per weight type computes an R x T block of
 * outputs (R weight rows x T tokens); it is always inlined with constant R
 * and T, and a driver walks the row range in tiles.  Each weight block is
 * unpacked once per tile and reused for the T tokens, which is where the
 * prefill speed comes from.  In the AVX-512 build the integer types have
 * 16-row kernels instead (16 rows in the lanes of one vector, see
 * kern_avx512_q8.h, kern_avx512_q5.h and kern_avx512_kq.h), walked by
 * KX_ROWS16_DRIVER; in the AVX2 build Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 have
 * one (kern_avx2_s16.h).
 *
 * Batch invariance: the operations that produce one output element do not
 * depend on R, T, the tile position, n or the thread: per block an exact
 * integer dot product (identical however it is computed), converted to
 * float and folded into one vector accumulator per element with the same
 * FMA sequence, then one fixed horizontal sum.  Integer paths give the same
 * integers in both builds; float results of the two builds may differ
 * (vector width changes the summation order).
 */
#include <immintrin.h>
#include <string.h>

#include "worker/cpu/actq.h"
#include "worker/cpu/internal.h"
#include "worker/cpu/matmul.h"

#define KX_INLINE static inline __attribute__((always_inline))
#define KX_UNROLL _Pragma("GCC unroll 8")
#define KX_MR 8 /* largest tile, rows */
#define KX_MT 4 /* largest tile, tokens */
#define KX_MT2 8 /* largest token tile of the 16-row Q8_0 tile (KX_512) */
#define KX_FMT 6 /* largest token tile of the float tiles */

/*
 * Decode (T == 1) streams weights from memory; software prefetch KX_PF
 * bytes ahead on every row keeps enough misses in flight for the integer
 * kernels, whose work per byte would otherwise fill the reorder window.
 * So does the first token tile (t == 0) of a few tokens, which reads its
 * rows from memory too and works longer on each block (AVX2 Q6_K 8192 x
 * 2048, 4 tokens, one thread: 33 -> 116 GFLOP/s, 8 tokens 57 -> 113; the
 * later tiles find the rows in cache).
 */
#ifndef KX_PF
#define KX_PF 6144
#endif
/*
 * A packed strip (pack.h) is one stream.  The AVX2 strips prefetch it
 * always; the AVX-512 K-quant and IQ4_XS kernels (WK_CPU_PF_K) and
 * 32-value kernels (Q4_0 .. Q8_0, IQ4_NL; WK_CPU_PF_32) where g->strip_pf
 * says (wk_cpu_strip_prefetch_default): KX_PF_R16 ahead into L1
 * (kx_pf_r16), or KX_PF_R16_L2 ahead into L2 where it says WK_CPU_PF_L2.
 * On Zen 5 the hardware prefetchers keep up with the 32-value kernels'
 * pace: bench-engine decode, 2 threads, 1b files, alternating builds in
 * one sitting (2026-12-05): Q4_0 +4 to +9 % and Q8_0 +2 to +17 % without
 * it, Q4_K_M -14 %.  8 KiB ahead, or into L2 16-32 KiB ahead beside or
 * instead of it, streamed the same or slower.  On Zen 4 (AMD family 19h)
 * the K-quant strips too streamed faster without it (2026-12-06: Q4_K
 * 5632 x 2048 one token, two threads, 45 -> 53 GB/s beside a 60-62 GB/s
 * probe).  On an Intel Xeon (2026-12-07) the 32-value strips need it: 1b
 * Q4_0 decode 27.6 -> 38.6 tok/s (82-85 % of the paired passes); into L2
 * 4 KiB ahead 41.5-42.3 (87-89 %), into L1 4 KiB ahead 84-87 %, 1 KiB
 * 76-77 %, into L2 8 or 16 KiB 86-88 %.  Into L2 4 KiB ahead also took
 * Q4_K_M from 84-85 to 88-89 % there, and AVX2 Q4_0 from 79-80 to 84-85;
 * with the near lines into L1 as well (WK_CPU_PF_NEAR, KX_PF_R16_NEAR)
 * more again.
 */
#ifndef KX_PF_R16
#define KX_PF_R16 2048
#endif
#ifndef KX_PF_R16_L2
#define KX_PF_R16_L2 4096
#endif
/*
 * With KX_PF_R16_L2 (WK_CPU_PF_NEAR), every line also KX_PF_R16_NEAR ahead
 * into L1.  On the Intel Xeon (2026-12-07, one packed product of one token
 * over 768 MB of copies, then one pass of the bandwidth probe's loops, 15
 * rounds, the share of the passes, builds alternating): two threads, Q4_K
 * 5632 x 2048 82-89 % -> 93-101 % (256 B: 96-98, 1 KiB: 93-97, 2 KiB:
 * 93-94), Q5_K 83-85 -> 92-94, Q6_K 91-93 -> 95-104, Q4_0 86-90 -> 91-96,
 * Q8_0 97-99 -> 101-102; one thread Q4_K 88-89 -> 95.  The L2 lines alone
 * leave the kernel's loads missing L1 between its arithmetic; the probe
 * loop, which does none, reads as fast without.
 */
#ifndef KX_PF_R16_NEAR
#define KX_PF_R16_NEAR 512
#endif
KX_INLINE void kx_pf_r16(const uint8_t *p)
{
	_mm_prefetch((const char *)(p + KX_PF_R16), _MM_HINT_T0);
}
/* Block b of the strip at row r of a rows16 copy (wk_cpu_r16_offset); for
 * one panel, r * w_stride + 16 * b * bb. */
KX_INLINE const uint8_t *kx_r16_block(const struct wk_cpu_gemm *g, int r, int b, size_t bb,
				      const int LPB, int nb)
{
	return g->w + wk_cpu_r16_offset(g->panel_bytes, r, b, bb, LPB, nb);
}
/* log2 of a full panel's blocks of the 32-value types (KIND 5: Q8_0; the
 * 256-value types are never in panels) */
#define KX_LPB32(KIND) (WK_CPU_PANEL_LOG2((KIND) == 5 ? WK_Q_Q8_0 : WK_Q_Q4_0) - 5)
/*
 * The same for a kernel's loop over blocks from a panel's start: block b's
 * address, from kx_r16_block at each panel's first block and else one
 * block past the previous one (*next, which it advances).
 */
KX_INLINE const uint8_t *kx_r16_next(const struct wk_cpu_gemm *g, const uint8_t **next, int r,
				     int b, size_t bb, const int LPB, int nb)
{
	const uint8_t *pk = (b & ((1 << LPB) - 1)) == 0 ? kx_r16_block(g, r, b, bb, LPB, nb) : *next;
	*next = pk + 16 * bb;
	return pk;
}
/*
 * A 16-row kernel's block b (off = b x bb bytes into a GGUF row) of the
 * strip at row r (strip: g->w + r x w_stride), in its loop over the
 * blocks: in a copy of one panel (PACKED 1) 16 x off from the strip's
 * start, in a copy in panels (PACKED 2) kx_r16_next's; NULL for the
 * mapped rows (PACKED 0).
 */
KX_INLINE const uint8_t *kx_strip_block(const struct wk_cpu_gemm *g, const uint8_t *strip,
					const uint8_t **next, int r, int b, size_t off, size_t bb,
					const int LPB, int nb, const int PACKED)
{
	if (PACKED == 2)
		return kx_r16_next(g, next, r, b, bb, LPB, nb);
	return PACKED ? strip + 16 * off : NULL;
}
/*
 * The blocks a 16-row kernel sums: [g->b0, g->b1) in a one-token panel
 * walk of a copy (KX_PANEL_WALK), else all of them.  The kernels take
 * PACKED 2 for a copy in panels and 1 for a copy of one panel, whose code
 * is the strip walk's without any of this (its loop measured 8 % slower
 * from memory with the panel arithmetic in it, the same in L2).
 */
KX_INLINE int kx_b_lo(const struct wk_cpu_gemm *g, const int PACKED)
{
	return PACKED == 2 ? g->b0 : 0;
}
KX_INLINE int kx_b_hi(const struct wk_cpu_gemm *g, int nb, const int PACKED)
{
	return PACKED == 2 && g->b1 ? g->b1 : nb;
}
/*
 * The one-token walk of a rows16 copy wider than one panel: runs of
 * KX_PANEL_STRIPS strips, each run panel by panel (one stream a panel,
 * the activation's panel in L1 throughout), every strip's accumulators
 * left in carry between panels (32 floats a strip).  Each row still sums
 * its blocks in order from 0 into the same accumulators, so the values are
 * the strip-by-strip walk's, bit for bit.  KERNEL(g, r, nr, t, T, pf, ...)
 * with pf non-NULL (the packed kernels' own prefetch).
 */
#define KX_PANEL_STRIPS 64
#define KX_PANEL_WALK(g, r0, r1, BE, LPB, KERNEL, ...)                                            \
	do {                                                                                      \
		const int nb_ = (g)->cols / (BE), pb_ = 1 << (LPB);                               \
		struct wk_cpu_gemm h_ = *(g);                                                     \
		float carry_[KX_PANEL_STRIPS * 32];                                               \
		for (int s_ = (r0); s_ < (r1); s_ += 16 * KX_PANEL_STRIPS) {                      \
			const int e_ = (r1) - s_ < 16 * KX_PANEL_STRIPS ? (r1)                    \
									: s_ + 16 * KX_PANEL_STRIPS; \
			for (int b_ = 0; b_ < nb_; b_ += pb_) {                                   \
				h_.b0 = b_;                                                       \
				h_.b1 = nb_ - b_ < pb_ ? nb_ : b_ + pb_;                          \
				for (int r_ = s_; r_ < e_; r_ += 16) {                            \
					h_.carry = carry_ + 32 * ((r_ - s_) / 16);                \
					KERNEL(&h_, r_, e_ - r_ < 16 ? e_ - r_ : 16, 0, 1, h_.w,  \
					       __VA_ARGS__);                                      \
				}                                                                 \
			}                                                                         \
		}                                                                                 \
	} while (0)
/*
 * A 16-row kernel's prefetch for the block at off of its strip (the
 * strip's `bytes` = 16 x block bytes from pk), in the first token tile
 * (pf non-NULL): packed, its own stream when PF_PACKED (1: KX_PF_R16
 * ahead into L1; 2: KX_PF_R16_L2 ahead into L2; kx_pf_how); mapped, as
 * many bytes of the next strip (from pf) into L2, so that a strip's walk
 * fetches all of the next one.
 *
 * next (a packed copy, a tile of several tokens, pf non-NULL: there is a
 * next strip): the bytes from this block to the same block of the next
 * strip (kx_next_strip), which goes into L2 as for the mapped rows.  Such
 * a tile works a block 2-8 times as long as one token does, and the
 * hardware prefetchers alone left it waiting on memory: Q6_K 32000 x 1024
 * (the output matrix of a 1024-wide model, 27 MB, past L3), 8 tokens, one
 * thread, Zen 4: 141-163 GFLOP/s against 275 with the matrix in L3; with
 * the next strip in L2 243-245.  One token keeps the stream of its own
 * (PF_PACKED, g->strip_pf).
 */
KX_INLINE void kx_strip_prefetch(const uint8_t *pk, const uint8_t *pf, size_t off, size_t bytes,
				 const int PACKED, const int PF_PACKED, size_t next)
{
	if (pf == NULL || (PACKED && !PF_PACKED && !next))
		return;
	for (size_t l = 0; l < bytes; l += 64) {
		if (PACKED && next)
			_mm_prefetch((const char *)(pk + next + l), _MM_HINT_T1);
		else if (PACKED && PF_PACKED >= 2) {
			_mm_prefetch((const char *)(pk + KX_PF_R16_L2 + l), _MM_HINT_T1);
			if (PF_PACKED == 3)
				_mm_prefetch((const char *)(pk + KX_PF_R16_NEAR + l), _MM_HINT_T0);
		}
		else if (PACKED)
			kx_pf_r16(pk + l);
		else
			_mm_prefetch((const char *)(pf + 16 * off + l), _MM_HINT_T1);
	}
}
/* where a kernel that prefetches its packed strip for one token puts it:
 * kx_strip_prefetch's PF_PACKED, 2 (into L2) where g->strip_pf has
 * WK_CPU_PF_L2, 3 (into L2, and the near lines into L1) where it has
 * WK_CPU_PF_NEAR too, else 1 (into L1) */
KX_INLINE int kx_pf_how(const struct wk_cpu_gemm *g)
{
	if (!(g->strip_pf & WK_CPU_PF_L2))
		return 1;
	return g->strip_pf & WK_CPU_PF_NEAR ? 3 : 2;
}
/*
 * kx_strip_prefetch's next for a tile of T tokens at block b (bb bytes)
 * of a strip: 0 for one token or the mapped rows; in a copy of one panel
 * 16 rows on; in panels (1 << LPB blocks a full one, nb a row's) the
 * panel's 16 rows on (wk_cpu_r16_offset).
 */
KX_INLINE size_t kx_next_strip(const struct wk_cpu_gemm *g, int b, size_t bb, const int LPB, int nb,
			       const int T, const int PACKED)
{
	if (T == 1 || !PACKED)
		return 0;
	if (PACKED == 1)
		return 16 * g->w_stride;
	return 16 * bb * (size_t)wk_cpu_r16_panel_blocks(b, LPB, nb);
}
/*
 * Float decode prefetches its weights into L2 only (prefetcht1), KX_PF_FAR
 * bytes ahead, not into L1 KX_PF ahead as the integer kernels do.  A row
 * of F16 streamed beside a 22 KiB float activation row (5632 columns)
 * evicted it from L1 and fell to 14 GB/s a thread; into L2: 21-25 (Zen 4,
 * one thread; F32 15 -> 20-22).  From the huge-page copies (pack.h) the
 * same holds for 2048-column rows: F16 16 -> 27 GB/s one thread, 28-30 ->
 * 31-33 on two (F32 unchanged, AVX2 the same or better).
 */
#define KX_PF_FAR 32768
KX_INLINE void kx_prefetch_block(const uint8_t *blk, size_t bytes)
{
#if KX_PF > 0
	for (size_t o = 0; o < bytes; o += 64)
		_mm_prefetch((const char *)(blk + KX_PF + o), _MM_HINT_T0);
#else
	(void)blk;
	(void)bytes;
#endif
}

KX_INLINE float kx_f16(const uint8_t *p)
{
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}

KX_INLINE float kx_hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

KX_INLINE __m256i kx_load256(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* acc + dot(u8 a, i8 b) per 32-bit lane (groups of 4); b*a pairs must not
 * saturate int16 in the non-VNNI build (a <= 127 or |b| small enough). */
KX_INLINE __m256i kx_dpbusd(__m256i acc, __m256i a, __m256i b)
{
#if KX_512
	return _mm256_dpbusd_epi32(acc, a, b);
#else
	__m256i p = _mm256_maddubs_epi16(a, b);
	return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
#endif
}

/* acc + pairwise (i16 a * i16 b) per 32-bit lane. */
KX_INLINE __m256i kx_dpwssd(__m256i acc, __m256i a, __m256i b)
{
#if KX_512
	return _mm256_dpwssd_epi32(acc, a, b);
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/*
 * Tokens per group of a tile driver: as many activation rows as fit in
 * KX_XGROUP bytes (a multiple of the tile's TT, at least TT).  Every row
 * tile of a group reads the group's rows again; grouped, they stay in L2
 * instead of coming from L3 once per row tile.  BF16 GEMM 2048 x 5632
 * (n = 128, BF16 rows of 11 KiB, AVX512_BF16, two threads): 339-354 ->
 * 442-446 GFLOP/s; 256 KiB groups 420; the shorter rows and the other
 * types unchanged (2026-12-05).
 */
#define KX_XGROUP (512 * 1024)
KX_INLINE int kx_token_group(const struct wk_cpu_gemm *g, int tt)
{
	size_t n = KX_XGROUP / (g->x_stride ? g->x_stride : 1);
	n -= n % (size_t)tt;
	return n < (size_t)tt ? tt : n > (size_t)g->n ? g->n : (int)n;
}

/*
 * Walks rows [r0, r1) x tokens [0, n) in tiles of RT x TT, edges with 1,
 * tokens in groups (kx_token_group); decode (n == 1) one row at a time:
 * a single sequential stream per thread is what the memory system serves
 * best (on a Zen 4 host: 29-38 GB/s for one F16 row at a time against
 * 21-23 GB/s for four interleaved rows; the AVX2 Q4_K, Q6_K and Q8_0 GEMVs
 * 26-38 GB/s against 15-24), with the same arithmetic per element
 * whatever the tile or group.
 */
#define KX_DRIVER(name, tile, RT, TT)                                              \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)              \
	{                                                                          \
		if (g->n == 1) {                                                   \
			for (int r = r0; r < r1; r++)                              \
				tile(g, r, 0, 1, 1);                               \
			return;                                                    \
		}                                                                  \
		const int tg = kx_token_group(g, TT);                              \
		for (int t0 = 0; t0 < g->n; t0 += tg) {                            \
			const int t1 = g->n - t0 < tg ? g->n : t0 + tg;            \
			int r = r0;                                                \
			for (; r + (RT) <= r1; r += (RT)) {                        \
				int t = t0;                                        \
				for (; t + (TT) <= t1; t += (TT))                  \
					tile(g, r, t, RT, TT);                     \
				for (; t < t1; t++)                                \
					tile(g, r, t, RT, 1);                      \
			}                                                          \
			for (; r < r1; r++) {                                      \
				int t = t0;                                        \
				for (; t + (TT) <= t1; t += (TT))                  \
					tile(g, r, t, 1, TT);                      \
				for (; t < t1; t++)                                \
					tile(g, r, t, 1, 1);                       \
			}                                                          \
		}                                                                  \
	}

/* ==== float weights: F32, F16, BF16 x F32 activations ==================== */

#if KX_512
#define KX_FW 16
typedef __m512 kx_fvec;
#define kx_fzero() _mm512_setzero_ps()
#define kx_fmadd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define kx_fadd(a, b) _mm512_add_ps(a, b)
#define kx_fload(p) _mm512_loadu_ps(p)
#define kx_fload_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
/*
 * 16 BF16 as F32: one word permute under a zero mask puts value i in the
 * high word of lane i (vpermw, one uop on Intel) where vpmovzxwd and
 * vpslld took two on the ports the FMAs use; the same bits.  BF16 GEMM
 * n = 128, two threads, the Intel Xeon of 2026-12-07: 144-157 -> 162-209
 * GFLOP/s; decode 88-90 -> 91-93 % of the paired passes.
 */
KX_INLINE __m512 kx_fload_bf16_512(const uint8_t *p)
{
	const __m512i idx = _mm512_set_epi16(15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6,
					     0, 5, 0, 4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
	const __m512i v = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p));
	return _mm512_castsi512_ps(_mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx, v));
}
#define kx_fload_bf16(p, MEMSH) kx_fload_bf16_512(p)
KX_INLINE float kx_fhsum(__m512 v)
{
	__m256 s = _mm256_add_ps(_mm512_castps512_ps256(v),
				 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
	return kx_hsum8(s);
}
#else
#define KX_FW 8
typedef __m256 kx_fvec;
#define kx_fzero() _mm256_setzero_ps()
#define kx_fmadd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define kx_fadd(a, b) _mm256_add_ps(a, b)
#define kx_fload(p) _mm256_loadu_ps(p)
#define kx_fload_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
/*
 * 8 BF16 as F32: the 16 bytes in both halves (a load-port broadcast), one
 * byte shuffle puts value i in the high half of lane i, zeros below (was
 * vpmovzxwd and vpslld: AVX2 BF16 GEMM n = 128, one thread, 77-78 ->
 * 82-85 GFLOP/s, the same bits).
 */
KX_INLINE __m256 kx_fload_bf16(const uint8_t *p, const int MEMSH)
{
	static const uint8_t sh[32] __attribute__((aligned(32))) = {
		255, 255, 0, 1, 255, 255, 2,  3,  255, 255, 4,	5,  255, 255, 6,  7,
		255, 255, 8, 9, 255, 255, 10, 11, 255, 255, 12, 13, 255, 255, 14, 15
	};
	const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
	__m256i r;
	if (!MEMSH)
		return _mm256_castsi256_ps(_mm256_shuffle_epi8(v, _mm256_load_si256((const __m256i *)sh)));
	/* the mask read by the shuffle from memory: the 3 x 4 tile needs
	 * all 16 registers (GCC hoists a constant into one, and spills) */
	__asm__("vpshufb %2, %1, %0" : "=x"(r) : "x"(v), "m"(*(const __m256i *)sh));
	return _mm256_castsi256_ps(r);
}
#define kx_fhsum(v) kx_hsum8(v)
#endif

/*
 * WT: 0 f32, 1 f16, 2 bf16.  The last partial vector (cols % KX_FW) is
 * copied into zero-padded buffers and handled as one more full step.
 */
KX_INLINE kx_fvec kx_fw_load(const uint8_t *w, int k, const int WT, const int MEMSH)
{
	(void)MEMSH; /* AVX2 BF16: the shuffle's mask from memory (kx_fload_bf16) */
	if (WT == 0)
		return kx_fload((const float *)w + k);
	if (WT == 1)
		return kx_fload_f16(w + 2 * (size_t)k);
	return kx_fload_bf16(w + 2 * (size_t)k, MEMSH);
}

/*
 * Accumulators per output element: AVX2 keeps two, one for the columns
 * below the split kx_fsplit(cols) (about half of them, a multiple of
 * KX_FW) and one for the columns from it on (with the zero-padded partial
 * step), summed before the horizontal sum.  A one-row decode is one chain
 * of dependent FMAs: with 8 lanes it was bound by their latency (F16 GEMV
 * 30 GB/s on two threads with the matrix in L3, 60 with two chains;
 * interleaving two rows instead read the memory slower, 21 against 25
 * GB/s), so it runs the two halves side by side (kx_float_tile2).  A GEMM
 * tile needs only one half's accumulators at a time: the blocked walk's
 * column chunks end at the split (until 2026-12-07 the two took even and
 * odd steps, which kept both in every tile: 2 x 3 tiles, 12 accumulators,
 * at 68-70 % of the FMA pipes; by halves 3 x 4, below).  AVX-512 keeps one
 * (its chain moves 32 bytes of F16 per FMA); KX_FACC is the count.
 */
#ifndef KX_FACC
#if KX_512
#define KX_FACC 1
#else
#define KX_FACC 2
#endif
#endif

/* The first column of the second half (cols when there is one). */
KX_INLINE int kx_fsplit(int cols)
{
	return KX_FACC == 2 ? cols / (2 * KX_FW) * KX_FW : cols;
}

/* One step of KX_FW columns at k into acc (R rows x T tokens), and the
 * weights' prefetch into L2, KX_PF_FAR ahead.  For several tokens too: a
 * tile that reads its rows from memory (the first token tile of a block,
 * or all of a few tokens' product) otherwise waits on it (F16 8192 x
 * 2048, one thread, 8 tokens: 72 -> 90 GFLOP/s; 128 tokens unchanged). */
KX_INLINE void kx_float_step(const uint8_t *const *w, const float *const *x, int k, const int R,
			     const int T, const int WT, kx_fvec acc[KX_MR][KX_FMT])
{
	const size_t wsz = WT == 0 ? 4 : 2;
	kx_fvec wv[KX_MR];
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		if ((k * wsz) % 64 == 0)
			_mm_prefetch((const char *)(w[i] + wsz * (size_t)k + KX_PF_FAR), _MM_HINT_T1);
		wv[i] = kx_fw_load(w[i], k, WT, R * T >= 12);
	}
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		kx_fvec xv = kx_fload(x[j] + k);
#if !KX_512
		if (R > 1) /* x in a register, not loaded by each FMA: below */
			__asm__("" : "+x"(xv));
#endif
		KX_UNROLL
		for (int i = 0; i < R; i++)
			acc[i][j] = kx_fmadd(wv[i], xv, acc[i][j]);
	}
}

/* The output of element (i, j): its one accumulator (AVX-512), or its
 * two summed (AVX2; the second alone when the first half is empty, cols
 * < 16). */
KX_INLINE void kx_float_out(const struct wk_cpu_gemm *g, int r, int t, int i, int j, kx_fvec a0,
			    kx_fvec a1)
{
	kx_fvec sum = KX_FACC == 2 && kx_fsplit(g->cols) > 0 ? kx_fadd(a0, a1) : a1;
	g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_fhsum(sum);
}

/* The zero-padded partial step (cols % KX_FW columns at kmain) into acc. */
KX_INLINE void kx_float_part(const uint8_t *const *w, const float *const *x, int kmain, int rem,
			     const int R, const int T, const int WT, kx_fvec acc[KX_MR][KX_FMT])
{
	const size_t wsz = WT == 0 ? 4 : 2;
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		uint8_t wt[KX_FW * 4] = { 0 };
		memcpy(wt, w[i] + wsz * (size_t)kmain, wsz * (size_t)rem);
		kx_fvec wv = kx_fw_load(wt, 0, WT, 0);
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			float xt[KX_FW] = { 0 };
			memcpy(xt, x[j] + kmain, 4 * (size_t)rem);
			acc[i][j] = kx_fmadd(wv, kx_fload(xt), acc[i][j]);
		}
	}
}

/* The tile's weight rows r.. and token rows t... */
KX_INLINE void kx_float_rows(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			     const uint8_t *w[KX_MR], const float *x[KX_FMT])
{
	KX_UNROLL
	for (int i = 0; i < R; i++)
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
	KX_UNROLL
	for (int j = 0; j < T; j++)
		x[j] = (const float *)(g->x + (size_t)(t + j) * g->x_stride);
}

/* acc from sv's slot a (R x T x KX_FACC vectors), or zeros. */
KX_INLINE void kx_float_ld(kx_fvec acc[KX_MR][KX_FMT], const kx_fvec *sv, int a, int zero,
			   const int R, const int T)
{
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[i][j] = zero ? kx_fzero() : sv[(i * T + j) * KX_FACC + a];
}

/*
 * Columns [k0, k1) of an R x T tile, all in one half: k0 == 0 or the
 * split starts the accumulators at zero, else takes them from sv (R x T
 * x KX_FACC vectors, the previous chunk's, slot h for half h); k1 == cols
 * finishes the tile (the partial step, the sums, y), else leaves them in
 * sv.  k0 and (when k1 < cols) k1 are multiples of KX_FW, so every
 * element sees the same steps in the same accumulators whatever the
 * chunks: a chunked product is bit for bit the unchunked one (and the
 * two halves side by side, kx_float_tile2).
 */
KX_INLINE void kx_float_tile_k(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			       const int WT, int k0, int k1, kx_fvec *sv)
{
	const int cols = g->cols, kmain = cols - cols % KX_FW, kh = kx_fsplit(cols);
	const int kend = k1 < cols ? k1 : kmain, h = k0 >= kh, fresh = k0 == 0 || k0 == kh;
	kx_fvec acc[KX_MR][KX_FMT];
	const uint8_t *w[KX_MR];
	const float *x[KX_FMT];
	kx_float_rows(g, r, t, R, T, w, x);
	kx_float_ld(acc, sv, h, fresh, R, T);
	for (int k = k0; k + KX_FW <= kend; k += KX_FW)
		kx_float_step(w, x, k, R, T, WT, acc);
	if (k1 < cols) {
		KX_UNROLL
		for (int i = 0; i < R; i++)
			KX_UNROLL
			for (int j = 0; j < T; j++)
				sv[(i * T + j) * KX_FACC + h] = acc[i][j];
		return;
	}
	if (kmain < cols)
		kx_float_part(w, x, kmain, cols - kmain, R, T, WT, acc);
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			kx_float_out(g, r, t, i, j, KX_FACC == 2 ? sv[(i * T + j) * KX_FACC] : acc[i][j],
				     acc[i][j]);
}

/*
 * Whole rows of an R x T tile.  AVX2: both halves side by side, a step
 * of each in turn (two chains an element, two streams a row), the second
 * half's one more full step and the partial step after.
 */
KX_INLINE void kx_float_tile2(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			      const int WT, kx_fvec *sv)
{
	if (KX_FACC == 1) {
		kx_float_tile_k(g, r, t, R, T, WT, 0, g->cols, sv);
		return;
	}
	const int cols = g->cols, kmain = cols - cols % KX_FW, kh = kx_fsplit(cols);
	kx_fvec acc[2][KX_MR][KX_FMT];
	const uint8_t *w[KX_MR];
	const float *x[KX_FMT];
	kx_float_rows(g, r, t, R, T, w, x);
	kx_float_ld(acc[0], NULL, 0, 1, R, T);
	kx_float_ld(acc[1], NULL, 1, 1, R, T);
	int k = 0;
	for (; k < kh; k += KX_FW) {
		kx_float_step(w, x, k, R, T, WT, acc[0]);
		kx_float_step(w, x, kh + k, R, T, WT, acc[1]);
	}
	for (k += kh; k < kmain; k += KX_FW)
		kx_float_step(w, x, k, R, T, WT, acc[1]);
	if (kmain < cols)
		kx_float_part(w, x, kmain, cols - kmain, R, T, WT, acc[1]);
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			kx_float_out(g, r, t, i, j, acc[0][i][j], acc[1][i][j]);
}

/*
 * The float GEMM (n > 1), by blocks: a block of rows (KX_FBLOCK bytes of
 * weights, at most KX_FMB rows) stays in L2 while every token tile passes
 * over it, each tile in column chunks of KX_FKC, the block's row tiles
 * one after another on a chunk, so that the tile's tokens' chunk (6 x 4
 * KiB) is read from L1 by every row tile; the accumulators wait in kx_fsv
 * between chunks.  By chunk and by block every element still sees the
 * same steps in the same accumulators (kx_float_tile_k), so the values
 * are those of one pass.  Token groups over full rows (the integer
 * drivers' KX_DRIVER) fed the 8 x 3 tile from L2 on every step: F16 GEMM
 * 2048 x 5632 and 5632 x 2048, n = 128, two threads, Zen 5: 270-306 ->
 * 300-361 GFLOP/s, the engine's 1b F16 prefill 134 -> 152-154 tok/s
 * (2026-12-06).  In this order the 4 x 6 tile (24 accumulators, 4
 * conversions a step) is the fastest: it reached 209 GFLOP/s of the
 * core's 214 with its data in L1, 8 x 3 (which spills) 172.  BF16 x BF16
 * (vdpbf16ps, kx_gemm_bf16dp) goes by blocks only for rows over 4 KiB and
 * 64 tokens or more (below).
 */
#define KX_FKC 1024
#define KX_FBLOCK (512 * 1024)
#define KX_FMB 64
static _Thread_local kx_fvec kx_fsv[KX_FMB * KX_FMT * KX_FACC];

/* Rows of a block: KX_FBLOCK bytes of them, at most KX_FMB, a multiple
 * of the row tile rt (at least one tile). */
KX_INLINE int kx_block_rows(const struct wk_cpu_gemm *g, int rt)
{
	const int mb = (int)(KX_FBLOCK / g->w_stride);
	return mb > KX_FMB ? KX_FMB : mb < rt ? rt : mb - mb % rt;
}

/* A tile of R rows and nt (1..KX_FMT) tokens, nt as a constant. */
KX_INLINE void kx_float_tile_nt(const struct wk_cpu_gemm *g, int r, int t, const int R, int nt,
				const int WT, int k0, int k1, kx_fvec *sv)
{
	switch (nt) {
	case 1: kx_float_tile_k(g, r, t, R, 1, WT, k0, k1, sv); break;
	case 2: kx_float_tile_k(g, r, t, R, 2, WT, k0, k1, sv); break;
	case 3: kx_float_tile_k(g, r, t, R, 3, WT, k0, k1, sv); break;
	case 4: kx_float_tile_k(g, r, t, R, 4, WT, k0, k1, sv); break;
	case 5: kx_float_tile_k(g, r, t, R, 5, WT, k0, k1, sv); break;
	default: kx_float_tile_k(g, r, t, R, 6, WT, k0, k1, sv); break;
	}
}

/* Whole rows of a tile of R rows and nt (1..KX_FMT) tokens. */
KX_INLINE void kx_float_tile2_nt(const struct wk_cpu_gemm *g, int r, const int R, int nt,
				 const int WT)
{
	switch (nt) {
	case 1: kx_float_tile2(g, r, 0, R, 1, WT, kx_fsv); break;
	case 2: kx_float_tile2(g, r, 0, R, 2, WT, kx_fsv); break;
	case 3: kx_float_tile2(g, r, 0, R, 3, WT, kx_fsv); break;
	case 4: kx_float_tile2(g, r, 0, R, 4, WT, kx_fsv); break;
	case 5: kx_float_tile2(g, r, 0, R, 5, WT, kx_fsv); break;
	default: kx_float_tile2(g, r, 0, R, 6, WT, kx_fsv); break;
	}
}

/*
 * Rows [r0, r1): up to TS tokens in whole-row tiles of RS x n, more by
 * blocks in tiles of RT x TT (TT <= KX_FMT), edges narrower.
 */
KX_INLINE void kx_float_gemm(const struct wk_cpu_gemm *g, int r0, int r1, const int WT,
			     const int RT, const int TT, const int RS, const int TS)
{
	const int cols = g->cols, kc = KX_FKC, kh = kx_fsplit(cols);
	if (g->n == 1) {
		for (int r = r0; r < r1; r++)
			kx_float_tile2(g, r, 0, 1, 1, WT, kx_fsv);
		return;
	}
	/*
	 * One token tile (a few streams' decode step): no block is read
	 * twice, so row tile by row tile over whole rows, each a stream the
	 * prefetch runs ahead of; by blocks and chunks the tile jumped from
	 * row to row every 2 KiB.  F16 8192 x 2048 from memory, one thread,
	 * with the prefetch: 2 tokens 48 -> 68 GFLOP/s, 4 tokens 75 -> 103.
	 */
	if (g->n <= TS) {
		int r = r0;
		for (; r + RS <= r1; r += RS)
			kx_float_tile2_nt(g, r, RS, g->n, WT);
		for (; r < r1; r++)
			kx_float_tile2_nt(g, r, 1, g->n, WT);
		return;
	}
	const int mb = kx_block_rows(g, RT);
	for (int rb = r0; rb < r1; rb += mb) {
		const int rbe = r1 - rb > mb ? rb + mb : r1;
		for (int t = 0; t < g->n; t += TT) {
			const int nt = g->n - t < TT ? g->n - t : TT;
			for (int k0 = 0, k1; k0 < cols; k0 = k1) { /* chunks end at kh */
				const int he = k0 < kh ? kh : cols;
				k1 = he - k0 > kc ? k0 + kc : he;
				kx_fvec *sv = kx_fsv;
				int r = rb;
				for (; r + RT <= rbe; r += RT, sv += RT * nt * KX_FACC)
					kx_float_tile_nt(g, r, t, RT, nt, WT, k0, k1, sv);
				for (; r < rbe; r++, sv += nt * KX_FACC)
					kx_float_tile_nt(g, r, t, 1, nt, WT, k0, k1, sv);
			}
		}
	}
}

#if KX_512
#define KX_FRT 4
#define KX_FTT 6
#define KX_FRS 4
#define KX_FTS 6
#else
/*
 * By blocks 3 x 4: one half's 12 accumulators, 3 weights and x, the 16
 * ymm (BF16's shuffle mask read from memory, kx_fload_bf16).  Left to
 * itself GCC folds each x load into every row's FMA (vfmadd231ps mem):
 * the tiles ran at 47-48 % of the two FMA pipes (2 x 3, even and odd
 * steps: F16 GEMM 2048 x 5632 and 5632 x 2048, n = 128, one thread, Zen
 * 4: 54 GFLOP/s of 117); with x held in a register (the empty asm in
 * kx_float_step) F16 54 -> 84, BF16 55 -> 77, F32 51 -> 70 GFLOP/s, the
 * same bits.  By halves, 3 x 4 (2026-12-07): F16 79-82 -> 91-96, BF16
 * 78-82 -> 84-86, F32 66-67 -> 78-80; 2 x 6 (GCC spills the token
 * pointers) 82-88, 4 x 3 (17 registers) 49.  Whole rows (up to 3 tokens,
 * both halves at once): 2 x 3 x 2 accumulators.
 */
#define KX_FRT 3
#define KX_FTT 4
#define KX_FRS 2
#define KX_FTS 3
#endif
static void kx_gemm_f32(const struct wk_cpu_gemm *g, int r0, int r1)
{
	kx_float_gemm(g, r0, r1, 0, KX_FRT, KX_FTT, KX_FRS, KX_FTS);
}
static void kx_gemm_f16(const struct wk_cpu_gemm *g, int r0, int r1)
{
	kx_float_gemm(g, r0, r1, 1, KX_FRT, KX_FTT, KX_FRS, KX_FTS);
}
static void kx_gemm_bf16(const struct wk_cpu_gemm *g, int r0, int r1)
{
	kx_float_gemm(g, r0, r1, 2, KX_FRT, KX_FTT, KX_FRS, KX_FTS);
}

#if KX_512
/* ==== BF16 weights x BF16 activations: vdpbf16ps (AVX512_BF16) ========== */

/*
 * Per output element one 16-lane accumulator; each step of 32 k adds, per
 * lane, the two products of its pair (w[2l] x[2l] + w[2l+1] x[2l+1], exact
 * products, as vdpbf16ps defines) in k order; the last partial step loads
 * zeros past cols; one fixed horizontal sum.  Every tile shape runs this
 * sequence, so batch invariance holds.  Only in the avx512bf16 table.
 */
#define KX_BF16DP __attribute__((target("avx512bf16")))

/*
 * One step of 32 k: full steps load plainly, the last partial one under a
 * mask (zeros past cols).  Masked loads on every step (the mask chosen
 * per step) cost the tile 10-20 %: BF16 GEMM, one thread, Zen 4, 5632 x
 * 2048 n = 128 174 -> 200 GFLOP/s, 2048 x 5632 154 -> 168, one token 48
 * -> 58-61 (2026-12-07); the same bits.
 */
KX_INLINE KX_BF16DP void kx_bf16dp_step(const uint8_t *const *w, const uint8_t *const *x, int k,
					 const int R, const int T, __mmask32 m, const int MASKED,
					 __m512 acc[KX_MR][KX_MT])
{
	__m512i wv[KX_MR];
	KX_UNROLL
	for (int i = 0; i < R; i++)
		wv[i] = MASKED ? _mm512_maskz_loadu_epi16(m, w[i] + 2 * (size_t)k)
			       : _mm512_loadu_si512(w[i] + 2 * (size_t)k);
	KX_UNROLL
	for (int j = 0; j < T; j++) {
		__m512i xv = MASKED ? _mm512_maskz_loadu_epi16(m, x[j] + 2 * (size_t)k)
				    : _mm512_loadu_si512(x[j] + 2 * (size_t)k);
		KX_UNROLL
		for (int i = 0; i < R; i++)
			acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)wv[i], (__m512bh)xv);
	}
}

/*
 * Columns [k0, k1) of an R x T tile: k0 == 0 starts the accumulators at
 * zero, else takes them from sv (R x T vectors, the previous chunk's);
 * k1 == cols finishes the tile (the partial step, the sums, y), else
 * leaves them in sv.  k0 and (when k1 < cols) k1 are multiples of 32, so
 * a chunked product is bit for bit the unchunked one.  pf: the rows come
 * from memory (the first token tile of a row tile or block, or decode).
 */
KX_INLINE KX_BF16DP void kx_bf16dp_tile_k(const struct wk_cpu_gemm *g, int r, int t, const int R,
					   const int T, int k0, int k1, __m512 *sv, int pf)
{
	const int cols = g->cols;
	__m512 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const uint8_t *x[KX_MT];
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[i][j] = k0 ? sv[i * T + j] : _mm512_setzero_ps();
	}
	KX_UNROLL
	for (int j = 0; j < T; j++)
		x[j] = g->x + (size_t)(t + j) * g->x_stride;
	int k = k0;
	for (; k + 32 <= k1; k += 32) {
		KX_UNROLL
		for (int i = 0; i < R; i++)
			if (pf)
				_mm_prefetch((const char *)(w[i] + 2 * (size_t)k + KX_PF_FAR), _MM_HINT_T1);
		kx_bf16dp_step(w, x, k, R, T, ~(__mmask32)0, 0, acc);
	}
	if (k1 < cols) {
		KX_UNROLL
		for (int i = 0; i < R; i++)
			KX_UNROLL
			for (int j = 0; j < T; j++)
				sv[i * T + j] = acc[i][j];
		return;
	}
	if (k < cols)
		kx_bf16dp_step(w, x, k, R, T, ((__mmask32)1 << (cols - k)) - 1, 1, acc);
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_fhsum(acc[i][j]);
}

/* the first token tile of a row tile reads the rows from memory: one
 * token 13-20 -> 59-64 GB/s on two threads (Zen 4) with the prefetch */
KX_INLINE KX_BF16DP void kx_bf16dp_tile(const struct wk_cpu_gemm *g, int r, int t, const int R,
					 const int T)
{
	kx_bf16dp_tile_k(g, r, t, R, T, 0, g->cols, NULL, T == 1 || t == 0);
}

/* 4 x 4 tiles: at twice the FMA rate the 8 x 3 float tile's registers
 * spill; 4 x 4 measured 260-325 GFLOP/s against 8 x 3's 220 (5632 x 2048,
 * n = 128, 2 threads, Zen 4) and the same on 2048 x 5632 */
KX_BF16DP KX_DRIVER(kx_gemm_bf16dp_rows, kx_bf16dp_tile, 4, 4)

/*
 * Long rows (a 4-row tile over 16 KiB) by blocks and chunks, as the
 * float GEMM (kx_float_gemm): a block of rows (KX_FBLOCK bytes) stays in
 * L2 while every 4-token tile passes over it in chunks of KX_BKC
 * columns, the block's row tiles one after the other on a chunk, so the
 * tokens' chunk (4 x 2 KiB) is read from L1 by all of them and only the
 * weights come from L2; the accumulators wait in kx_bsv between chunks.
 * Measured against the rows (2048 x 5632, Zen 4, 2026-12-07): one thread
 * n = 128 173-175 -> 192-193 GFLOP/s; two threads n = 128 381-389 ->
 * 378-387, n = 16 and 32 3-4 % slower (so from KX_BMIN_N tokens on); the
 * engine's 1b BF16 prefill (128 tokens), alternating three times, 186.5
 * / 183.9 / 188.7 -> 189.2 / 186.2 / 193.5 tok/s.  The same bits.
 */
#define KX_BKC 1024
#define KX_BMIN_N 64
static _Thread_local __m512 kx_bsv[KX_FMB * KX_MT];

KX_INLINE KX_BF16DP void kx_bf16dp_tile_nt(const struct wk_cpu_gemm *g, int r, int t, const int R,
					    int nt, int k0, int k1, __m512 *sv, int pf)
{
	switch (nt) {
	case 1: kx_bf16dp_tile_k(g, r, t, R, 1, k0, k1, sv, pf); break;
	case 2: kx_bf16dp_tile_k(g, r, t, R, 2, k0, k1, sv, pf); break;
	case 3: kx_bf16dp_tile_k(g, r, t, R, 3, k0, k1, sv, pf); break;
	default: kx_bf16dp_tile_k(g, r, t, R, 4, k0, k1, sv, pf); break;
	}
}

static KX_BF16DP void kx_gemm_bf16dp(const struct wk_cpu_gemm *g, int r0, int r1)
{
	const int cols = g->cols;
	if (g->n < KX_BMIN_N || (size_t)cols * 2 * 4 <= 16384) {
		kx_gemm_bf16dp_rows(g, r0, r1);
		return;
	}
	const int mb = kx_block_rows(g, 4);
	for (int rb = r0; rb < r1; rb += mb) {
		const int rbe = r1 - rb > mb ? rb + mb : r1;
		for (int t = 0; t < g->n; t += 4) {
			const int nt = g->n - t < 4 ? g->n - t : 4;
			for (int k0 = 0; k0 < cols; k0 += KX_BKC) {
				const int k1 = cols - k0 > KX_BKC ? k0 + KX_BKC : cols;
				__m512 *sv = kx_bsv;
				int r = rb;
				for (; r + 4 <= rbe; r += 4, sv += 4 * nt)
					kx_bf16dp_tile_nt(g, r, t, 4, nt, k0, k1, sv, t == 0);
				for (; r < rbe; r++, sv += nt)
					kx_bf16dp_tile_nt(g, r, t, 1, nt, k0, k1, sv, t == 0);
			}
		}
	}
}

/* x rounded to BF16, nearest even: quant.c's BF16 row quantiser. */
static void kx_actq_bf16(const float *x, uint8_t *dst, int cols)
{
	wk_quantize_row(WK_Q_BF16, x, dst, (uint64_t)cols);
}
#endif

/* ==== Q4_0 / Q8_0 x Q8_32 ================================================ */

/*
 * Both builds run Q4_0 and Q8_0 in 16-row kernels (AVX-512:
 * kern_avx512_q5.h, AVX2: kern_avx2_s16.h); the AVX-512 build keeps its
 * 4 x 4 tile (kx_q8_32_tile, kern_avx512_q8.h) for rows too long for
 * 32-bit gather offsets.  Per block of 32 an exact integer dot product:
 * Q4_0 dot(q, x) - 8 * sum(x), q the unsigned nibbles; Q8_0, VNNI:
 * dot(w ^ 0x80, x) - 128 * sum(x), AVX2: maddubs(|w|, sign(x, w)) (no
 * int16 saturation: |w| <= 128, |x| <= 127).  The same integers.
 */
/* The three arrays of token row t in the Q8_32 activation format (internal.h). */
KX_INLINE void kx_act_q8_32(const struct wk_cpu_gemm *g, int t, const int8_t **q, const float **d,
			    const int32_t **sum)
{
	const uint8_t *xr = g->x + (size_t)t * g->x_stride;
	*q = (const int8_t *)xr;
	*d = (const float *)(xr + g->cols);
	*sum = (const int32_t *)(xr + g->cols + 4 * (size_t)(g->cols / 32));
}

/* The three arrays of token row t in the Q8_256 activation format. */
KX_INLINE void kx_act_q8_256(const struct wk_cpu_gemm *g, int t, const int8_t **q, const float **d,
			     const int16_t **bsums)
{
	const uint8_t *xr = g->x + (size_t)t * g->x_stride;
	*q = (const int8_t *)xr;
	*d = (const float *)(xr + g->cols);
	*bsums = (const int16_t *)(xr + g->cols + 4 * (size_t)(g->cols / 256));
}

/*
 * The frame of the 256-bit integer tiles: row pointers and zeroed
 * accumulators before the blocks, one fixed horizontal sum per element
 * and the store after them (the same for every R and T).
 */
KX_INLINE void kx_tile8_begin(const struct wk_cpu_gemm *g, int r, const int R, const int T,
			      const uint8_t *w[KX_MR], __m256 acc[KX_MR][KX_MT])
{
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
		KX_UNROLL
		for (int j = 0; j < T; j++)
			acc[i][j] = _mm256_setzero_ps();
	}
}

KX_INLINE void kx_tile8_end(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			    __m256 acc[KX_MR][KX_MT])
{
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_hsum8(acc[i][j]);
}

/*
 * The strip walk of the AVX-512 16-row kernels: rows [r0, r1) in strips
 * of 16; per strip, token tiles of 8, then one tile of all the tokens left
 * (1 to 7); the first tile of a strip prefetches the next strip where PF
 * says (pf NULL otherwise: the 256-value copies' PF is g->strip_pf for one
 * token and always for several, kx_strip_prefetch's next).  A kernel
 * reads, unpacks and (mapped rows) transposes its 16 rows once a tile, and that is most of its work for a
 * few tokens, so tiles of 8, 4, 2, 1 made 3 tokens as 2 + 1 cost more than
 * 4 (mapped Q4_K 1536 x 1024, one thread, in L2: 64 us against 56; a rows16
 * copy of Q6_K 2048 x 2048: 138 against 129) and 7 as 4 + 2 + 1 more than 8
 * (118 against 94).  The experts of a mixture see such counts at every
 * step (16 streams of a top-2 of 16: 2 tokens an expert on average), and
 * so do a few streams of a dense model.  Every token's values are the same
 * in any tile (the invariance above).
 *
 * KERNEL(g, r, nr, t, T, pf, ARG, PACKED) with T constant, ARG the
 * kernel's type variant, PACKED 0 for the mapped rows (KX_ROWS16_DRIVER),
 * 1 for pack.h's rows16 copies of one panel, 2 for copies in panels
 * (KX_R16_DRIVER, KX_R16_DRIVER256).  One function a tile size: each gets
 * its own register allocation (the eight tiles inlined into one driver
 * made Q4_K's 4-token tile 1.2x slower), and GCC aligns its loops to 64
 * bytes (without, mapped Q6_K's one-token tile ran 1.15x slower;
 * -falign-loops=64 for the whole file cost the float kernels 5 %).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define KX_TILE_ATTR __attribute__((noinline, optimize("align-loops=64")))
#else
#define KX_TILE_ATTR __attribute__((noinline))
#endif
#define KX_ROWS16_TILE_FN(name, T, KERNEL, ARG, PACKED)                                      \
	static KX_TILE_ATTR void name##_t##T(const struct wk_cpu_gemm *g, int r, int nr, int t, \
					     const uint8_t *pf)                                   \
	{                                                                                    \
		KERNEL(g, r, nr, t, T, pf, ARG, PACKED);                                     \
	}
#define KX_ROWS16_TILE_FNS(name, KERNEL, ARG, PACKED)     \
	KX_ROWS16_TILE_FN(name, 1, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 2, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 3, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 4, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 5, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 6, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 7, KERNEL, ARG, PACKED)   \
	KX_ROWS16_TILE_FN(name, 8, KERNEL, ARG, PACKED)
/* the walk over the tile functions of `name` (KX_ROWS16_TILE_FNS) */
#define KX_ROWS16_WALK(name, g, r0, r1, PF)                                                        \
	for (int r_ = (r0); r_ < (r1); r_ += 16) {                                                 \
		void (*const tile_[8])(const struct wk_cpu_gemm *, int, int, int, const uint8_t *) = { \
			name##_t1, name##_t2, name##_t3, name##_t4,                                \
			name##_t5, name##_t6, name##_t7, name##_t8,                                \
		};                                                                                 \
		const int nr_ = (r1) - r_ < 16 ? (r1) - r_ : 16;                                   \
		const uint8_t *pf_ = (PF) && r_ + 16 < (g)->rows                                   \
					     ? (g)->w + (size_t)(r_ + 16) * (g)->w_stride          \
					     : NULL;                                               \
		int t_ = 0;                                                                        \
		for (; t_ + 8 <= (g)->n; t_ += 8, pf_ = NULL)                                      \
			name##_t8(g, r_, nr_, t_, pf_);                                            \
		if (t_ < (g)->n)                                                                   \
			tile_[(g)->n - t_ - 1](g, r_, nr_, t_, pf_);                               \
	}

/*
 * A 16-row driver of mapped rows: the walk above, or PAIRS (the 4 x 4
 * tile driver) for the whole matrix when its rows are too long for 32-bit
 * gather offsets (over 2^27 bytes, never seen in a model): a choice by
 * shape only, so invariance across batches holds.
 */
#define KX_ROWS16_DRIVER(name, KERNEL, ARG, PAIRS)                          \
	KX_ROWS16_TILE_FNS(name, KERNEL, ARG, 0)                           \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)      \
	{                                                                  \
		if (g->w_stride > (size_t)INT32_MAX / 16) {                \
			PAIRS(g, r0, r1);                                  \
			return;                                            \
		}                                                          \
		KX_ROWS16_WALK(name, g, r0, r1, 1)                         \
	}

#if KX_512
#include "worker/cpu/kern_avx512_q8.h"

KX_INLINE void kx_q4_0_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q8_32_tile(g, r, t, R, T, 1);
}
KX_INLINE void kx_q8_0_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q8_32_tile(g, r, t, R, T, 0);
}

KX_DRIVER(kx_gemm_q4_0_pairs, kx_q4_0_tile, 4, 4)
KX_DRIVER(kx_gemm_q8_0_pairs, kx_q8_0_tile, 4, 4)

/* packed (rows16) matrices: strips of 16 from r0, which the matmul driver
 * keeps a multiple of 16; a copy in panels (the 32-value types, pack.h)
 * panel by panel for one token */
#define KX_R16_DRIVER(name, KERNEL, ARG)                                       \
	KX_ROWS16_TILE_FNS(name##_p1, KERNEL, ARG, 1)                          \
	KX_ROWS16_TILE_FNS(name##_p2, KERNEL, ARG, 2)                          \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)         \
	{                                                                      \
		if (!g->panel_bytes) {                                         \
			KX_ROWS16_WALK(name##_p1, g, r0, r1, 1)                \
		} else if (g->n == 1) {                                        \
			KX_PANEL_WALK(g, r0, r1, 32, KX_LPB32(ARG), KERNEL, ARG, 2); \
		} else {                                                       \
			KX_ROWS16_WALK(name##_p2, g, r0, r1, 1)                \
		}                                                              \
	}
/* the 256-value types: always one panel (internal.h), strip by strip,
 * prefetching the strip in software where g->strip_pf says */
#define KX_R16_DRIVER256(name, KERNEL, ARG)                                    \
	KX_ROWS16_TILE_FNS(name, KERNEL, ARG, 1)                               \
	static void name(const struct wk_cpu_gemm *g, int r0, int r1)         \
	{                                                                      \
		KX_ROWS16_WALK(name, g, r0, r1, ((g)->strip_pf & WK_CPU_PF_K) || (g)->n > 1) \
	}
#endif

/* ==== Q4_1 / Q5_0 / Q5_1 x Q8_32 ========================================= */

/*
 * The 256-bit tile of the AVX-512 build for rows too long for the 16-row
 * kernel of kern_avx512_q5.h (the AVX2 build runs these types in
 * kern_avx2_s16.h; kx_q5_high serves both): per block of
 * 32 the unsigned levels q
 * (nibbles, plus the fifth bits of qh expanded to 0x10 by byte compare)
 * in u8 lanes, an exact integer dot with the activations
 * (idot = dot(q, x), minus 16 * sum(x) for Q5_0, spread as -2 * sum per
 * lane), acc += float(idot) * (d * dx); the minimum of Q4_1/Q5_1 adds
 * (m * dx) * sum(x) to a scalar accumulator per output, added after the
 * horizontal sum.  KIND: 1 Q4_1, 2 Q5_0, 3 Q5_1.
 */
KX_INLINE __m256i kx_q5_high(const uint8_t *qh)
{
	uint32_t h;
	memcpy(&h, qh, 4);
	const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
					     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
	const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), sel);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

KX_INLINE void kx_q5x_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			   const int KIND)
{
	const int nb = g->cols / 32, has_m = KIND != 2, five = KIND != 1;
	const size_t bb = KIND == 1 ? 20 : KIND == 2 ? 22 : 24;
	const size_t qs_at = KIND == 1 ? 4 : KIND == 2 ? 6 : 8, qh_at = has_m ? 4 : 2;
	__m256 acc[KX_MR][KX_MT];
	float accm[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int32_t *xs[KX_MT];
	KX_UNROLL
	for (int i = 0; i < R; i++) {
		w[i] = g->w + (size_t)(r + i) * g->w_stride;
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			acc[i][j] = _mm256_setzero_ps();
			accm[i][j] = 0;
		}
	}
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	for (int b = 0; b < nb; b++) {
		__m256i wq[KX_MR];
		float wd[KX_MR], wm[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + bb * (size_t)b;
			if ((T == 1 || t == 0) && (b & 1) == 0)
				kx_prefetch_block(blk, 64);
			wd[i] = kx_f16(blk);
			wm[i] = has_m ? kx_f16(blk + 2) : 0.0f;
			__m128i v = _mm_loadu_si128((const __m128i *)(blk + qs_at));
			__m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v),
							       _mm_srli_epi16(v, 4), 1);
			wq[i] = _mm256_and_si256(both, m4);
			if (five)
				wq[i] = _mm256_or_si256(wq[i], kx_q5_high(blk + qh_at));
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			__m256i xv = kx_load256(xq[j] + 32 * (size_t)b);
			const float dx = xd[j][b];
			const __m256i corr = _mm256_set1_epi32(KIND == 2 ? -2 * xs[j][b] : 0);
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				__m256i id = kx_dpbusd(corr, wq[i], xv);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_set1_ps(wd[i] * dx), acc[i][j]);
				if (has_m)
					accm[i][j] += (wm[i] * dx) * (float)xs[j][b];
			}
		}
	}
	KX_UNROLL
	for (int i = 0; i < R; i++)
		KX_UNROLL
		for (int j = 0; j < T; j++)
			g->y[(size_t)(t + j) * g->y_stride + r + i] = kx_hsum8(acc[i][j]) + accm[i][j];
}

KX_INLINE void kx_q4_1_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q5x_tile(g, r, t, R, T, 1);
}
KX_INLINE void kx_q5_0_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q5x_tile(g, r, t, R, T, 2);
}
KX_INLINE void kx_q5_1_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q5x_tile(g, r, t, R, T, 3);
}

/*
 * IQ4_NL: the nibbles become their signed levels by a byte shuffle of the
 * 16-entry table; then as Q8_0: VNNI dot(level ^ 0x80, x) - 128 * sum(x)
 * (-16 * sum per lane), AVX2 maddubs(|level|, sign(x, level)).
 */
KX_INLINE void kx_iq4nl_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	const int nb = g->cols / 32;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int32_t *xs[KX_MT];
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_32(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const __m256i lv = _mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)wk_iq4nl_levels));
	for (int b = 0; b < nb; b++) {
		__m256i wq[KX_MR];
		float wd[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 18 * (size_t)b;
			if ((T == 1 || t == 0) && (b & 1) == 0)
				kx_prefetch_block(blk, 64);
			wd[i] = kx_f16(blk);
			__m128i v = _mm_loadu_si128((const __m128i *)(blk + 2));
			__m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(v),
							       _mm_srli_epi16(v, 4), 1);
			wq[i] = _mm256_shuffle_epi8(lv, _mm256_and_si256(both, m4));
#if KX_512
			wq[i] = _mm256_xor_si256(wq[i], _mm256_set1_epi8((char)0x80));
#endif
		}
		KX_UNROLL
		for (int j = 0; j < T; j++) {
			__m256i xv = kx_load256(xq[j] + 32 * (size_t)b);
			const float dx = xd[j][b];
			KX_UNROLL
			for (int i = 0; i < R; i++) {
#if KX_512
				__m256i id = kx_dpbusd(_mm256_set1_epi32(-16 * xs[j][b]), wq[i], xv);
#else
				__m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq[i], wq[i]),
								 _mm256_sign_epi8(xv, wq[i]));
				__m256i id = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
#endif
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_set1_ps(wd[i] * dx), acc[i][j]);
			}
		}
	}
	kx_tile8_end(g, r, t, R, T, acc);
}

#if KX_512
#include "worker/cpu/kern_avx512_q5.h"
KX_ROWS16_DRIVER(kx_gemm_q4_0, kx_q32_impl, 0, kx_gemm_q4_0_pairs)
KX_ROWS16_DRIVER(kx_gemm_q8_0, kx_q32_impl, 5, kx_gemm_q8_0_pairs)
KX_R16_DRIVER(kx_gemm_q4_0_r16, kx_q32_impl, 0)
KX_R16_DRIVER(kx_gemm_q8_0_r16, kx_q32_impl, 5)
KX_DRIVER(kx_gemm_iq4_nl_pairs, kx_iq4nl_tile, 4, 4)
KX_DRIVER(kx_gemm_q4_1_pairs, kx_q4_1_tile, 4, 4)
KX_DRIVER(kx_gemm_q5_0_pairs, kx_q5_0_tile, 4, 4)
KX_DRIVER(kx_gemm_q5_1_pairs, kx_q5_1_tile, 4, 4)
KX_ROWS16_DRIVER(kx_gemm_q4_1, kx_q32_impl, 1, kx_gemm_q4_1_pairs)
KX_ROWS16_DRIVER(kx_gemm_q5_0, kx_q32_impl, 2, kx_gemm_q5_0_pairs)
KX_ROWS16_DRIVER(kx_gemm_q5_1, kx_q32_impl, 3, kx_gemm_q5_1_pairs)
KX_ROWS16_DRIVER(kx_gemm_iq4_nl, kx_q32_impl, 4, kx_gemm_iq4_nl_pairs)
KX_R16_DRIVER(kx_gemm_q4_1_r16, kx_q32_impl, 1)
KX_R16_DRIVER(kx_gemm_q5_0_r16, kx_q32_impl, 2)
KX_R16_DRIVER(kx_gemm_q5_1_r16, kx_q32_impl, 3)
KX_R16_DRIVER(kx_gemm_iq4_nl_r16, kx_q32_impl, 4)
#else
#include "worker/cpu/kern_avx2_s16.h"
KX_DRIVER(kx_gemm_iq4_nl, kx_iq4nl_tile, 2, 4)
#endif

/* ==== K-quants x Q8_256 ================================================== */

/* shuffle masks broadcasting int16 word k of each 128-bit lane */
KX_INLINE __m256i kx_word_bcast_mask(int lo, int hi)
{
	return _mm256_setr_epi8((char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
				(char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
				(char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
				(char)(2 * lo), (char)(2 * lo + 1), (char)(2 * lo), (char)(2 * lo + 1),
				(char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
				(char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
				(char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1),
				(char)(2 * hi), (char)(2 * hi + 1), (char)(2 * hi), (char)(2 * hi + 1));
}

/*
 * Q4_K / Q5_K scales: returns the 8 six-bit scales as int16 in both lanes
 * (for word broadcasts) and the 8 mins duplicated pairwise
 * (m0 m0 m1 m1 ... m7 m7) to multiply the 16 bsums of the block.
 */
KX_INLINE void kx_k4_scales(const uint8_t *s12, __m256i *sc, __m256i *mn)
{
	/* 16-byte load: the 12 scale bytes sit at offset 4 of a 144/176-byte
	 * block, so the 4 extra bytes are inside the block */
	__m128i v = _mm_loadu_si128((const __m128i *)s12); /* u0 u1 u2 - */
	__m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x3f)); /* sc0-3, m0-3 */
	__m128i u2 = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 2, 2, 2));
	__m128i t2 = _mm_and_si128(_mm_srlv_epi32(u2, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0f));
	__m128i t3 = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));
	__m128i hi = _mm_or_si128(t2, t3);                  /* sc4-7, m4-7 */
	__m128i all = _mm_unpacklo_epi32(lo, hi);           /* sc0-3 sc4-7 m0-3 m4-7 */
	__m128i s16 = _mm_cvtepu8_epi16(all);
	__m128i m16 = _mm_cvtepu8_epi16(_mm_srli_si128(all, 8));
	*sc = _mm256_broadcastsi128_si256(s16);
	*mn = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
}

KX_INLINE void kx_q45k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T,
			    const int Q5)
{
	const int nb = g->cols / 256;
	const size_t bb = Q5 ? 176 : 144;
	__m256 acc[KX_MR][KX_MT];
	const uint8_t *w[KX_MR];
	const int8_t *xq[KX_MT];
	const float *xd[KX_MT];
	const int16_t *xs[KX_MT];
	kx_tile8_begin(g, r, R, T, w, acc);
	KX_UNROLL
	for (int j = 0; j < T; j++)
		kx_act_q8_256(g, t + j, &xq[j], &xd[j], &xs[j]);
	const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
	for (int b = 0; b < nb; b++) {
		__m256i sc[KX_MR], mn[KX_MR], qh[KX_MR], iacc[KX_MR][KX_MT];
		float d[KX_MR], dmin[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + bb * (size_t)b;
			if (T == 1 || t == 0)
				kx_prefetch_block(blk, bb);
			d[i] = kx_f16(blk);
			dmin[i] = kx_f16(blk + 2);
			kx_k4_scales(blk + 4, &sc[i], &mn[i]);
			if (Q5)
				qh[i] = kx_load256(blk + 16);
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm256_setzero_si256();
		}
		KX_UNROLL
		for (int c = 0; c < 4; c++) {
			__m256i lo[KX_MR], hi[KX_MR], s0[KX_MR], s1[KX_MR];
			const __m256i mk0 = kx_word_bcast_mask(2 * c, 2 * c);
			const __m256i mk1 = kx_word_bcast_mask(2 * c + 1, 2 * c + 1);
			KX_UNROLL
			for (int i = 0; i < R; i++) {
				const uint8_t *qs = w[i] + bb * (size_t)b + (Q5 ? 48 : 16) + 32 * c;
				__m256i v = kx_load256(qs);
				lo[i] = _mm256_and_si256(v, m4);
				hi[i] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
				if (Q5) {
					__m256i h = _mm256_srli_epi16(qh[i], 2 * c);
					lo[i] = _mm256_or_si256(lo[i], _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
					hi[i] = _mm256_or_si256(hi[i], _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
				}
				s0[i] = _mm256_shuffle_epi8(sc[i], mk0);
				s1[i] = _mm256_shuffle_epi8(sc[i], mk1);
			}
			KX_UNROLL
			for (int j = 0; j < T; j++) {
				const int8_t *x = xq[j] + 256 * (size_t)b + 64 * c;
				__m256i x0 = kx_load256(x), x1 = kx_load256(x + 32);
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					iacc[i][j] = kx_dpwssd(iacc[i][j], _mm256_maddubs_epi16(lo[i], x0), s0[i]);
					iacc[i][j] = kx_dpwssd(iacc[i][j], _mm256_maddubs_epi16(hi[i], x1), s1[i]);
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

#if KX_512
#include "worker/cpu/kern_avx512_kq.h"
#endif

KX_INLINE void kx_q4_k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q45k_tile(g, r, t, R, T, 0);
}
KX_INLINE void kx_q5_k_tile(const struct wk_cpu_gemm *g, int r, int t, const int R, const int T)
{
	kx_q45k_tile(g, r, t, R, T, 1);
}

/*
 * Q6_K: per half h and quarter k, 32 six-bit values (q - 32 signed) with
 * scales sc[8h+2k] (first 16) and sc[8h+2k+1] (next 16).  The -32 offset
 * is folded in once per block as 32 * sum_g sc_g * bsum_g.
 */
#if !KX_512
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
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(0x03),
		      m30 = _mm256_set1_epi8(0x30);
	for (int b = 0; b < nb; b++) {
		__m256i sc16[KX_MR], iacc[KX_MR][KX_MT];
		float d[KX_MR];
		KX_UNROLL
		for (int i = 0; i < R; i++) {
			const uint8_t *blk = w[i] + 210 * (size_t)b;
			if (T == 1 || t == 0)
				kx_prefetch_block(blk, 210);
			d[i] = kx_f16(blk + 208);
			sc16[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
			KX_UNROLL
			for (int j = 0; j < T; j++)
				iacc[i][j] = _mm256_setzero_si256();
		}
		KX_UNROLL
		for (int h = 0; h < 2; h++) {
			KX_UNROLL
			for (int k = 0; k < 4; k++) {
				__m256i q[KX_MR], s[KX_MR];
				const __m256i mk = kx_word_bcast_mask(2 * k, 2 * k + 1);
				KX_UNROLL
				for (int i = 0; i < R; i++) {
					const uint8_t *blk = w[i] + 210 * (size_t)b;
					__m256i l = kx_load256(blk + 64 * h + 32 * (k & 1));
					__m256i hb = kx_load256(blk + 128 + 32 * h);
					__m256i lo, up;
					if (k < 2)
						lo = _mm256_and_si256(l, m4);
					else
						lo = _mm256_and_si256(_mm256_srli_epi16(l, 4), m4);
					if (k == 0)
						up = _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4);
					else if (k == 1)
						up = _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30);
					else if (k == 2)
						up = _mm256_and_si256(hb, m30);
					else
						up = _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30);
					q[i] = _mm256_or_si256(lo, up);
					__m256i sh = h ? _mm256_permute4x64_epi64(sc16[i], 0xEE)
						       : _mm256_permute4x64_epi64(sc16[i], 0x44);
					s[i] = _mm256_shuffle_epi8(sh, mk);
				}
				KX_UNROLL
				for (int j = 0; j < T; j++) {
					__m256i xv = kx_load256(xq[j] + 256 * (size_t)b + 128 * h + 32 * k);
					KX_UNROLL
					for (int i = 0; i < R; i++)
						iacc[i][j] = kx_dpwssd(iacc[i][j], _mm256_maddubs_epi16(q[i], xv), s[i]);
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
				__m256i id = _mm256_sub_epi32(iacc[i][j], corr);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(id),
							    _mm256_set1_ps(d[i] * dx), acc[i][j]);
			}
		}
	}
	kx_tile8_end(g, r, t, R, T, acc);
}

#endif /* !KX_512 */

#if KX_512
KX_DRIVER(kx_gemm_q4_k_pairs, kx_q4_k_tile, 4, 4)
KX_DRIVER(kx_gemm_q5_k_pairs, kx_q5_k_tile, 4, 4)
KX_DRIVER(kx_gemm_q6_k_pairs, kx_q6_k_tile, 4, 4)
KX_ROWS16_DRIVER(kx_gemm_q4_k, kx_q45_k_impl, 0, kx_gemm_q4_k_pairs)
KX_ROWS16_DRIVER(kx_gemm_q5_k, kx_q45_k_impl, 1, kx_gemm_q5_k_pairs)
KX_ROWS16_DRIVER(kx_gemm_q6_k, kx_q6_k_impl, 0, kx_gemm_q6_k_pairs)
KX_R16_DRIVER256(kx_gemm_q4_k_r16, kx_q45_k_impl, 0)
KX_R16_DRIVER256(kx_gemm_q5_k_r16, kx_q45_k_impl, 1)
KX_R16_DRIVER256(kx_gemm_q6_k_r16, kx_q6_k_impl, 0)
#else
KX_DRIVER(kx_gemm_q4_k, kx_q4_k_tile, 2, 4)
KX_DRIVER(kx_gemm_q5_k, kx_q5_k_tile, 2, 4)
KX_DRIVER(kx_gemm_q6_k, kx_q6_k_tile, 2, 4)
#endif

#include "worker/cpu/kern_x86_low.h"

#define KX_GEMMS(bf16)                             \
	{                                          \
		[WK_Q_F32] = kx_gemm_f32,          \
		[WK_Q_F16] = kx_gemm_f16,          \
		[WK_Q_BF16] = bf16,                \
		[WK_Q_Q4_0] = kx_gemm_q4_0,        \
		[WK_Q_Q4_1] = kx_gemm_q4_1,        \
		[WK_Q_Q5_0] = kx_gemm_q5_0,        \
		[WK_Q_Q5_1] = kx_gemm_q5_1,        \
		[WK_Q_IQ4_NL] = kx_gemm_iq4_nl,    \
		[WK_Q_Q8_0] = kx_gemm_q8_0,        \
		[WK_Q_Q2_K] = kx_gemm_q2_k,        \
		[WK_Q_Q3_K] = kx_gemm_q3_k,        \
		[WK_Q_IQ4_XS] = kx_gemm_iq4_xs,    \
		[WK_Q_Q4_K] = kx_gemm_q4_k,        \
		[WK_Q_Q5_K] = kx_gemm_q5_k,        \
		[WK_Q_Q6_K] = kx_gemm_q6_k,        \
	}

#if KX_512
#define KX_GEMMS_R16                                  \
	{                                             \
		[WK_Q_Q4_0] = kx_gemm_q4_0_r16,       \
		[WK_Q_Q8_0] = kx_gemm_q8_0_r16,       \
		[WK_Q_Q4_1] = kx_gemm_q4_1_r16,       \
		[WK_Q_Q5_0] = kx_gemm_q5_0_r16,       \
		[WK_Q_Q5_1] = kx_gemm_q5_1_r16,       \
		[WK_Q_IQ4_NL] = kx_gemm_iq4_nl_r16,   \
		[WK_Q_Q4_K] = kx_gemm_q4_k_r16,       \
		[WK_Q_Q5_K] = kx_gemm_q5_k_r16,       \
		[WK_Q_Q6_K] = kx_gemm_q6_k_r16,       \
		[WK_Q_IQ4_XS] = kx_gemm_iq4_xs_r16,   \
		[WK_Q_Q2_K] = kx_gemm_q2_k_r16,       \
		[WK_Q_Q3_K] = kx_gemm_q3_k_r16,       \
	}
#endif

const struct wk_cpu_kernels KX_TABLE = {
	.name = KX_512 ? "avx512" : "avx2",
	.gemm = KX_GEMMS(kx_gemm_bf16),
#if KX_512
	.gemm_r16 = KX_GEMMS_R16,
#else
	.gemm_r16 = { [WK_Q_Q4_0] = kx_gemm_q4_0_r16, [WK_Q_Q4_1] = kx_gemm_q4_1_r16,
		      [WK_Q_Q5_0] = kx_gemm_q5_0_r16, [WK_Q_Q5_1] = kx_gemm_q5_1_r16,
		      [WK_Q_Q8_0] = kx_gemm_q8_0_r16 },
#endif
	.actq_q8_32 = wk_actq_q8_32,
	.actq_q8_256 = wk_actq_q8_256,
};

#if KX_512
const struct wk_cpu_kernels wk_cpu_kernels_avx512bf16 = {
	.name = "avx512bf16",
	.gemm = KX_GEMMS(kx_gemm_bf16dp),
	.gemm_r16 = KX_GEMMS_R16,
	.actq_q8_32 = wk_actq_q8_32,
	.actq_q8_256 = wk_actq_q8_256,
	.actq_bf16 = kx_actq_bf16,
};
#endif
