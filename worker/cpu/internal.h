/*
 * internal.h - shared inside worker/cpu/ only: the kernel table each ISA
 * build fills in, the GEMM argument block, and the activation row formats.
 *
 * Activation formats (one row per token, row stride a multiple of 64):
 *   WK_CPU_ACT_F32   float[cols]                         (F32, F16, BF16 weights)
 *   WK_CPU_ACT_Q8_32 i8 qs[cols] | f32 d[cols/32] | i32 s[cols/32]
 *                    (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q8_0 weights; x = d * q;
 *                    s = sum of the 32 qs)
 *   WK_CPU_ACT_Q8_256 i8 qs[cols] | f32 d[cols/256] | i16 bsums[cols/16]
 *                    (Q2_K, Q3_K, IQ4_XS, Q4_K, Q5_K, Q6_K weights; the Q8_K
 *                    format split into arrays)
 *   WK_CPU_ACT_BF16  bf16[cols], nearest even (BF16 weights where the
 *                    kernel table has actq_bf16: avx512bf16)
 * qs are in -127..127.
 */
#ifndef SLUICE_WORKER_CPU_INTERNAL_H
#define SLUICE_WORKER_CPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "worker/model/quant.h"

enum wk_cpu_act {
	WK_CPU_ACT_F32 = 0,
	WK_CPU_ACT_Q8_32 = 1,
	WK_CPU_ACT_Q8_256 = 2,
	WK_CPU_ACT_BF16 = 3,
};

/* Y[t][r] = sum_k W[r][k] * X[t][k] for r in [r0, r1), t in [0, n). */
struct wk_cpu_gemm {
	int cols;
	int rows;           /* the matrix's: a mapped strip walk prefetches the
			     * next strip up to here, past the end of its range */
	const uint8_t *w;   /* weight rows, GGUF layout (or rows16: gemm_r16) */
	size_t w_stride;    /* bytes per weight row */
	const uint8_t *x;   /* activation rows in the type's format */
	size_t x_stride;    /* bytes per activation row */
	int n;              /* tokens */
	float *y;
	size_t y_stride;    /* floats per output row */
	/* rows16 copies (gemm_r16) wider than one panel (pack.h): the bytes
	 * of one full panel of every strip; 0 for one panel */
	size_t panel_bytes;
	/* which rows16 kernels prefetch their strip in software for one
	 * token, WK_CPU_PF_* (wk_cpu_mm_set_strip_prefetch); a tile of
	 * several fetches the next strip whatever this says */
	int strip_pf;
	/* set only by the r16 drivers' one-token panel walk on their copy of
	 * the block: blocks [b0, b1) of the strip (b1 0: to the end), and
	 * where the strip's accumulators wait between panels (acc in 0-15,
	 * the Q4_1/Q5_1 minimum terms in 16-31; NULL outside the walk) */
	int b0, b1;
	float *carry;
};

/*
 * A rows16 copy's columns in panels (pack.h) of 1 << WK_CPU_PANEL_LOG2(t)
 * columns for weight type t: a one-token product walks panel by panel
 * over a run of strips, so that the activation row's panel stays in L1
 * while the weights stream.  2048 columns, 1024 for Q8_0 (a strip of
 * 16 x 2048 Q8_0 values is 34 KB, near L1's 48).  The types of 256-value
 * blocks (K-quants, IQ4_XS), whose kernels prefetch their own strip, are
 * never in panels (2^31 columns: more than a row has): in panels a Q6_K
 * 2048 x 5632 product of one token read 21-22 GB/s from memory on two
 * threads, strip by strip 32-33 (docs/engine-cpu.md).
 */
#define WK_CPU_PANEL_LOG2(t)                                                                  \
	((t) == WK_Q_Q2_K || (t) == WK_Q_Q3_K || (t) == WK_Q_Q4_K || (t) == WK_Q_Q5_K ||       \
			 (t) == WK_Q_Q6_K || (t) == WK_Q_IQ4_XS                                \
		 ? 31                                                                          \
	 : (t) == WK_Q_Q8_0 ? 10                                                               \
			    : 11)

/* The blocks of the panel that holds block b (the last one may be short). */
static inline int wk_cpu_r16_panel_blocks(int b, int lpb, int nb)
{
	const int rest = nb - ((b >> lpb) << lpb);

	return rest < (1 << lpb) ? rest : 1 << lpb;
}

/*
 * Where block b of the strip at row r (a multiple of 16) lies in a rows16
 * copy, in bytes from its start (pack.h's panels): bb the block's bytes,
 * 1 << lpb blocks a full panel, nb the row's blocks, panel_bytes one full
 * panel's (0 for one panel).  The packers write and the kernels read by it.
 */
static inline size_t wk_cpu_r16_offset(size_t panel_bytes, int r, int b, size_t bb, int lpb, int nb)
{
	const int p = b >> lpb;
	const size_t nbp = (size_t)wk_cpu_r16_panel_blocks(b, lpb, nb);

	return (size_t)p * panel_bytes + ((size_t)r * nbp + 16 * (size_t)(b - (p << lpb))) * bb;
}

/*
 * The 4-byte unit (0..39) of a Q5_K row block's planes (pack.h) that holds
 * bytes 4u..4u+3 of plane p: P0 and P1 alternate, then P2 and P3, then P4,
 * the order the 16-row kernel first reads them; in a rows16 copy unit i
 * is run i of the planes.  The packer writes and the kernel reads by it.
 */
static inline int wk_cpu_q5k_plane_unit(int p, int u)
{
	return p < 4 ? 16 * (p / 2) + 2 * u + p % 2 : 32 + u;
}

typedef void (*wk_cpu_gemm_fn)(const struct wk_cpu_gemm *g, int r0, int r1);
typedef void (*wk_cpu_actq_fn)(const float *x, uint8_t *dst, int cols);

struct wk_cpu_kernels {
	const char *name;
	wk_cpu_gemm_fn gemm[WK_Q_COUNT_];
	/* the same products with w in pack.h's rows16 layout (w_stride still
	 * the GGUF row's bytes; a range starts at a multiple of 16), where
	 * the build has them (AVX-512: every integer type), else NULL */
	wk_cpu_gemm_fn gemm_r16[WK_Q_COUNT_];
	wk_cpu_actq_fn actq_q8_32;
	wk_cpu_actq_fn actq_q8_256;
	wk_cpu_actq_fn actq_bf16; /* NULL: BF16 weights take F32 activations */
};

extern const struct wk_cpu_kernels wk_cpu_kernels_scalar;
#if defined(__x86_64__)
extern const struct wk_cpu_kernels wk_cpu_kernels_avx2;
extern const struct wk_cpu_kernels wk_cpu_kernels_avx512;
extern const struct wk_cpu_kernels wk_cpu_kernels_avx512bf16;
#endif

/* Activation format for a weight type, and its bytes per row. */
enum wk_cpu_act wk_cpu_act_of(const struct wk_cpu_kernels *k, uint32_t wtype);
size_t wk_cpu_act_row_bytes(enum wk_cpu_act act, int cols);

#endif
