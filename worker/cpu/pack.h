/*
 * pack.h - weights repacked for the 16-row strip kernels (AVX-512): the
 * layout, the packers, and the registry a wk_cpu_mm keeps of the copies,
 * rows16 or plain (matmul.h's wk_cpu_mm_pack is the public entry point).
 *
 * Layout "rows16" of a (rows, cols) matrix:
 * strips of 16 rows (the last one padded by repeating the last row), each
 * strip its blocks in order, each block (16 x the type's block bytes):
 *   Q4_0: f16 d[16] (row l's scale at 2l), then 4 runs of 64 bytes: run k,
 *         bytes 4l..4l+3 = row l's quant bytes 4k..4k+3 (the nibbles of
 *         values 4k..4k+3 low, 16+4k..16+4k+3 high)          16 x 18 bytes
 *   Q8_0: f16 d[16], then 8 runs of 64 bytes: run k, bytes 4l..4l+3 = row
 *         l's quants 4k..4k+3, each biased to unsigned (q ^ 0x80) 16 x 34
 *   IQ4_NL: as Q4_0                                               16 x 18
 *   Q4_1: the d|m words (4 bytes a row: one 64-byte run), 4 runs of
 *         nibbles as Q4_0                                         16 x 20
 *   Q5_0: f16 d[16], eight 64-bit masks of the fifth bits (mask k < 4:
 *         bit 4l + i = row l's bit of value 4k + i; mask 4 + k: of value
 *         16 + 4k + i: the byte order of the nibble runs), 4 nibble runs
 *                                                                 16 x 22
 *   Q5_1: the d|m words, the eight masks, 4 nibble runs           16 x 24
 *   Q4_K: the d|dmin words (4 bytes a row: one 64-byte run), the 12 scale
 *         bytes (3 runs), the 128 qs bytes (32 runs)             16 x 144
 *   Q5_K: the d|dmin words, the 12 scale bytes (3 runs), then the
 *         256 5-bit values v_n (value 32n + l of the row, n = 0..7) as
 *         five planes of 32 bytes: P0 = v_0 | (v_5 & 7) << 5, P1 = v_1 |
 *         (v_7 >> 3 & 1) << 5 | (v_5 >> 3) << 6, P2 = v_2 | (v_6 & 7) << 5,
 *         P3 = v_3 | (v_7 >> 4) << 5 | (v_6 >> 3) << 6, P4 = v_4 | (v_7 &
 *         7) << 5 (five values whole under a mask, three from the top
 *         bits), in runs: P0 and P1 alternating (run 2k: P0's bytes
 *         4k..4k+3, run 2k + 1: P1's), P2 and P3 the same, then P4's 8;
 *         the same 160 bytes as qh and qs                        16 x 176
 *   Q2_K: the d|dmin words, the 16 scale bytes (4 runs), the 64 qs bytes
 *         (16 runs)                                               16 x 84
 *   Q3_K: f16 d[16], the 12 scale bytes (3 runs), the 32 hmask bytes (8
 *         runs), the 64 qs bytes (16 runs)                        16 x 110
 *   IQ4_XS: the d|scales_h words, the scales_l words (one run each),
 *         the 128 qs bytes (32 runs)                              16 x 136
 *   Q6_K: f16 d[16], the 16 scale bytes (4 runs), then per half h of the
 *         block 3 planes of 32 bytes (8 runs each): with v_r the unsigned
 *         6-bit value 128h + 32r + l of the row, A = v_0 | (v_2 & 3) << 6,
 *         B = v_1 | (v_2 >> 2 & 3) << 6, C = v_3 | (v_2 >> 4) << 6: three
 *         values whole under a mask, the fourth from the top bits; the
 *         same 192 bytes as ql and qh                             16 x 210
 * So one 512-bit load is a run of 16 rows in the lanes, what the 16-row
 * kernels otherwise build with a transpose per block, and a strip is one
 * sequential stream.  The copy holds the same bytes as the matrix (plus
 * the padding of the last strip).
 *
 * Panels: a matrix of a 32-value type with more than
 * 1 << WK_CPU_PANEL_LOG2(type) (internal.h: 2048, Q8_0 1024) columns is
 * stored as panels of that many columns (the last one narrower; the
 * 256-value types are never in panels), panel
 * after panel, each holding every strip's blocks of its columns in strip
 * order: block b of the strip at row r (a multiple of 16) is at
 *   p * panel_bytes + (r * nbp + 16 * (b - p * pb)) * block bytes,
 * p = b / pb, pb the panel's blocks, nbp the blocks of panel p.  One panel
 * is the layout above.  A one-token product walks a run of strips panel by
 * panel (one stream a panel) so that the activation's panel stays in L1.
 */
#ifndef SLUICE_WORKER_CPU_PACK_H
#define SLUICE_WORKER_CPU_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* 1 when wtype has a rows16 layout. */
int wk_cpu_pack_supported(uint32_t wtype);
/* Bytes of one full panel of the rows16 copy (every strip's blocks of
 * 1 << WK_CPU_PANEL_LOG2(wtype) columns); 0 when the matrix is one panel. */
size_t wk_cpu_pack_panel_bytes(uint32_t wtype, int rows, int cols);
/* Bytes of the rows16 copy of a (rows, cols) matrix (0: unsupported type). */
size_t wk_cpu_pack_bytes(uint32_t wtype, int rows, int cols);
/*
 * Bytes of a plain copy: the rows as they are, for a type or an ISA without
 * strip kernels (the float types; on AVX2 every type but Q4_0, Q4_1, Q5_0,
 * Q5_1 and Q8_0).  What it buys is
 * the memory: the registry's copies sit in huge pages (alloc.h), the
 * mapped file in 4 KiB pages; decode streams 5-25 % faster from them
 * (docs/engine-cpu.md).
 */
size_t wk_cpu_pack_plain_bytes(uint32_t wtype, int rows, int cols);
/* Writes the rows16 copy of w (GGUF rows) into dst (wk_cpu_pack_bytes). */
void wk_cpu_pack_rows16(uint32_t wtype, const void *w, int rows, int cols, uint8_t *dst);

/*
 * The matrices of a model the CPU backend packs: every layer's Q, K, V, O,
 * gate, up, down and shared expert's three, then the output (a mixture's
 * experts stay mapped).  Candidate i in [0, wk_cpu_pack_candidates) (its
 * data may be NULL: absent); wk_cpu_pack_eligible says whether its shape
 * can be copied (the type and ISA aside: wk_cpu_mm_can_pack).
 */
struct wk_hparams;
struct wk_layer;
struct wk_tensor;
size_t wk_cpu_pack_candidates(const struct wk_hparams *hp);
const struct wk_tensor *wk_cpu_pack_candidate(const struct wk_hparams *hp,
					      const struct wk_layer *layers,
					      const struct wk_tensor *output, size_t i);
int wk_cpu_pack_eligible(const struct wk_tensor *t);

/* The copies one wk_cpu_mm holds, found by the original's address. */
struct wk_cpu_packs;

enum cm_status wk_cpu_packs_new(struct wk_cpu_packs **out) CM_WUR;
void wk_cpu_packs_free(struct wk_cpu_packs *p);
/*
 * Copies w unless a copy of it (same address, type and shape) is held, on
 * the pool's threads when given: rows16 (plain 0) or plain (1).
 * CM_EUNSUPPORTED for rows16 of a type without the layout, CM_ENOMEM.
 */
struct wk_pool;
enum cm_status wk_cpu_packs_add(struct wk_cpu_packs *p, struct wk_pool *pool, uint32_t wtype,
				const void *w, int rows, int cols, int plain) CM_WUR;
/*
 * Registers a rows16 copy of w held elsewhere (data: wk_cpu_pack_bytes
 * bytes, e.g. a mapped expert cache file, expert_cache.h), which must stay
 * valid while p lives; p does not free it nor count it in
 * wk_cpu_packs_bytes.  A copy already held for w is kept.  CM_ENOMEM.
 */
enum cm_status wk_cpu_packs_add_view(struct wk_cpu_packs *p, uint32_t wtype, const void *w,
				     int rows, int cols, const uint8_t *data) CM_WUR;
/* The copy of w with this type and shape, or NULL; *plain its layout. */
const uint8_t *wk_cpu_packs_find(const struct wk_cpu_packs *p, uint32_t wtype, const void *w,
				 int rows, int cols, int *plain);
/* Bytes held in copies. */
size_t wk_cpu_packs_bytes(const struct wk_cpu_packs *p);

#endif
