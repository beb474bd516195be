/*
 * matmul.h - the CPU matrix product Y = X . W^T for every weight type.
 *
 *   W  [rows][cols] weight rows in GGUF layout (dims[0] = cols), any type
 *      with wk_qtype_supported(); cols a multiple of the type's block size
 *   X  [n][cols]    float32 activations of n tokens
 *   Y  [n][rows]    float32
 *
 * Quantised weights: X is quantised once per call to 8-bit activations
 * (blocks of 32 for Q4_0/Q8_0, of 256 for the K-quants) and the dot
 * products are integer; float weights use float32 FMA on exact products,
 * except BF16 weights on avx512bf16, where X is rounded once per call to
 * BF16 (nearest even) and the products go through vdpbf16ps: twice the
 * arithmetic rate, at BF16 activation precision (relative error of each
 * x at most 2^-8).
 * Rows are split into ranges (multiples of 64, about 4 per thread) that
 * the pool threads claim in turn.
 *
 * Batch invariance: for one build on one machine with one ISA, Y[t][r]
 * depends only on W row r and X row t, bit for bit: not on n, on the other
 * rows of X, on the thread count or on timing.  Different ISAs (scalar,
 * avx2, avx512, avx512bf16) may give different bits.
 *
 * The ISA is the best the CPU supports unless SLUICE_CPU_ISA=scalar|avx2|
 * avx512|avx512bf16 asks for one (an unavailable request falls back to the
 * default); avx512bf16 counts as the best only on AMD, where vdpbf16ps is
 * faster than FMA on converted weights (matmul.c, wk_cpu_bf16dp_pays).
 *
 * Threads: a struct wk_cpu_mm is used by one thread at a time (it owns the
 * activation scratch); it borrows the pool.
 */
#ifndef SLUICE_WORKER_CPU_MATMUL_H
#define SLUICE_WORKER_CPU_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/cpu/pool.h"

enum wk_cpu_isa {
	WK_CPU_ISA_SCALAR = 0,
	WK_CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
	WK_CPU_ISA_AVX512 = 2, /* AVX-512 F/BW/VL/VNNI + the above */
	/* avx512 + AVX512_BF16: BF16 weights take BF16 activations and
	 * vdpbf16ps (as llama.cpp and the GPUs compute them) */
	WK_CPU_ISA_AVX512BF16 = 3,
	WK_CPU_ISA_COUNT_ = 4,
};

/* Largest activation scratch one wk_cpu_mm may hold (bytes). */
#define WK_CPU_MM_SCRATCH_MAX ((size_t)1 << 30)

const char *wk_cpu_isa_name(enum wk_cpu_isa isa);
/* 1 when this CPU (and this build) can run isa. */
int wk_cpu_isa_available(enum wk_cpu_isa isa);
/* The best available ISA (avx512bf16 only on AMD), or the one
 * SLUICE_CPU_ISA names if available. */
enum wk_cpu_isa wk_cpu_isa_default(void);
/*
 * Which AVX-512 16-row kernels prefetch their packed strips for one token
 * in software (KX_PF_R16 ahead into L1) rather than leave the stream to
 * the hardware prefetchers, a set of WK_CPU_PF_*: the 256-value types
 * (K-quants, IQ4_XS) everywhere but on AMD family 19h (Zen 3, Zen 4); the
 * 32-value types (Q4_0 .. Q8_0, IQ4_NL) on no AMD CPU (Zen 5 streamed
 * them faster without, Zen 4 never had it; an Intel Xeon 1.35x slower
 * without); into L2 (WK_CPU_PF_L2) and, nearer, into L1 as well
 * (WK_CPU_PF_NEAR) on CPUs other than AMD (docs/engine-cpu.md).
 * SLUICE_CPU_PREFETCH=on|off|l2 overrides (all types, where this CPU puts
 * them / none / all into L2 only, without the near lines).  The values
 * are the same either way; only the speed differs.
 */
#define WK_CPU_PF_K 1  /* the 256-value types' strips */
#define WK_CPU_PF_32 2 /* the 32-value types' strips */
#define WK_CPU_PF_ALL (WK_CPU_PF_K | WK_CPU_PF_32)
#define WK_CPU_PF_L2 4 /* into L2 4 KiB ahead, not L1 2 KiB (and the AVX2 strips) */
#define WK_CPU_PF_NEAR 8 /* with WK_CPU_PF_L2: also into L1 512 bytes ahead */
int wk_cpu_strip_prefetch_default(void);

struct wk_cpu_mm;

/* pool is borrowed and must outlive the wk_cpu_mm. */
enum cm_status wk_cpu_mm_new(struct wk_pool *pool, struct wk_cpu_mm **out) CM_WUR;
void wk_cpu_mm_free(struct wk_cpu_mm *mm);
/* CM_EUNSUPPORTED when the CPU lacks isa. */
enum cm_status wk_cpu_mm_set_isa(struct wk_cpu_mm *mm, enum wk_cpu_isa isa) CM_WUR;
enum wk_cpu_isa wk_cpu_mm_isa(const struct wk_cpu_mm *mm);
/* The strip prefetch of mm's products (wk_cpu_strip_prefetch_default at
 * wk_cpu_mm_new): a set of WK_CPU_PF_*, 0 none. */
void wk_cpu_mm_set_strip_prefetch(struct wk_cpu_mm *mm, int which);
int wk_cpu_mm_strip_prefetch(const struct wk_cpu_mm *mm);
struct wk_pool *wk_cpu_mm_pool(const struct wk_cpu_mm *mm);

/*
 * Keeps a copy of W (wtype, rows x cols at w) in huge-page memory
 * (alloc.h): repacked for this ISA's 16-row strip kernels (pack.h) when it
 * has them for wtype (AVX-512: every integer type; AVX2: Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0), else the
 * rows as they are (the float types; the other types on AVX2).  Later
 * products on the same w, type and shape read the copy (a rows16 Q6_K: of more than one token)
 * and give bit for bit the same y.  Does nothing (CM_OK) for a type the
 * ISA does not multiply; a product after wk_cpu_mm_set_isa to an ISA
 * without strip kernels reads w for a rows16 copy.  w must stay valid and
 * unchanged while the wk_cpu_mm lives.  CM_EINVAL for bad shapes,
 * CM_ENOMEM.
 */
enum cm_status wk_cpu_mm_pack(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			      int cols) CM_WUR;
/*
 * Reads a rows16 copy of w that the caller holds (wk_cpu_pack_rows16's
 * bytes at data, valid and unchanged while mm lives) instead of w, as
 * wk_cpu_mm_pack's copies are read.  CM_EINVAL when the ISA has no strip
 * kernel for wtype (wk_cpu_mm_can_pack not 2) or the shape is bad.
 */
enum cm_status wk_cpu_mm_pack_view(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
				   int cols, const uint8_t *data) CM_WUR;
/* What wk_cpu_mm_pack would keep of a matrix of wtype on the current ISA:
 * 2 a rows16 copy, 1 a plain copy, 0 nothing. */
int wk_cpu_mm_can_pack(const struct wk_cpu_mm *mm, uint32_t wtype);
/* The bytes of that copy of a (rows, cols) matrix (0: none). */
size_t wk_cpu_mm_pack_bytes(const struct wk_cpu_mm *mm, uint32_t wtype, int rows, int cols);
/* Bytes held in repacked copies. */
size_t wk_cpu_mm_packed_bytes(const struct wk_cpu_mm *mm);

/*
 * y[t*rows + r] = sum_k W[r][k] * x[t*cols + k].  x and y must not
 * overlap.  Refuses (CM_EUNSUPPORTED) types without a kernel, (CM_EINVAL)
 * cols not a multiple of the block size or non-positive sizes, (CM_ENOMEM /
 * CM_ELIMIT) when the activation scratch cannot grow.
 */
enum cm_status wk_cpu_matmul(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			     int cols, const float *x, int n, float *y) CM_WUR;

/* One product of a wk_cpu_matmul_multi call: y = x W^T as wk_cpu_matmul. */
struct wk_cpu_mm_op {
	uint32_t wtype;
	const void *w;
	int rows, cols;
	const float *x;
	int n;
	float *y;
};

/* Most products one wk_cpu_matmul_multi call takes. */
#define WK_CPU_MM_MAX_OPS 1024

/*
 * Several independent products in one parallel run: the rows of all of
 * them are shared out in one run (matmul.c), so the threads meet once
 * instead of once per product (a mixture of experts' chosen experts; Q, K and V).
 * Consecutive ops on the same x (same pointer, n, cols and activation
 * format) quantise it once.  Every y is bit for bit what wk_cpu_matmul
 * gives.  No y may overlap any x or another y.  Errors as wk_cpu_matmul,
 * checked for every op before any runs; CM_EINVAL for n_ops outside
 * 1..WK_CPU_MM_MAX_OPS.
 */
enum cm_status wk_cpu_matmul_multi(struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *ops,
				   int n_ops) CM_WUR;

#endif
