/*
 * quant.h - weight types and their block formats, as in GGUF files.
 *
 * Type ids are the ggml ids used in GGUF tensor infos.  Quantised types
 * store a row as consecutive blocks of `wk_qtype_block_elems()` values:
 *
 *   Q4_0  32 values, 18 bytes: f16 d; u8 qs[16] (low nibbles = values 0..15,
 *         high nibbles = 16..31); x = d * (q - 8)
 *   Q4_1  32 values, 20 bytes: f16 d, m; u8 qs[16] (nibbles as Q4_0); x = d * q + m
 *   Q5_0  32 values, 22 bytes: f16 d; u8 qh[4] (bit j of the little-endian
 *         u32: the fifth bit of value j); u8 qs[16] (low four bits, as
 *         Q4_0); x = d * (q - 16)
 *   Q5_1  32 values, 24 bytes: f16 d, m; u8 qh[4]; u8 qs[16]; x = d * q + m
 *   IQ4_NL 32 values, 18 bytes: f16 d; u8 qs[16] (nibbles as Q4_0, each an
 *         index into the 16 non-linear levels wk_iq4nl_levels);
 *         x = d * levels[q]
 *   Q8_0  32 values, 34 bytes: f16 d; i8 qs[32]; x = d * q
 *   Q2_K 256 values, 84 bytes: u8 scales[16] (16 sub-blocks of 16: low
 *         nibble scale, high nibble min); u8 qs[64] (value 128h+32k+l: bits
 *         2k..2k+1 of qs[32h+l]); f16 d, dmin;
 *         x = d*sc*q - dmin*m
 *   Q3_K 256 values, 110 bytes: u8 hmask[32] (the third bit of value
 *         128h+32k+l: bit 4h+k of hmask[l]); u8 qs[64] (low two bits, as
 *         Q2_K); u8 scales[12] (16 six-bit scales, offset 32); f16 d;
 *         x = d*(sc-32)*(q-4)
 *   IQ4_XS 256 values, 136 bytes: f16 d; u16 scales_h (two high bits of
 *         each of 8 six-bit scales); u8 scales_l[4] (their low nibbles);
 *         u8 qs[128] (nibbles as IQ4_NL per 32); x = d*(ls-32)*levels[q]
 *   Q4_K 256 values, 144 bytes: f16 d, dmin; u8 scales[12] (8 sub-blocks of
 *         32, 6-bit scale and min each); u8 qs[128]
 *   Q5_K 256 values, 176 bytes: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
 *   Q6_K 256 values, 210 bytes: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
 *   Q8_K 256 values, 292 bytes: f32 d; i8 qs[256]; i16 bsums[16]
 *         (activations only, never in files we accept as weights)
 *
 * A row length must be a multiple of the block size of its type.
 * Reference (scalar) quantise/dequantise live here; the fast dot products
 * live in the CPU backend (worker/cpu/).
 */
#ifndef SLUICE_WORKER_MODEL_QUANT_H
#define SLUICE_WORKER_MODEL_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum wk_qtype {
	WK_Q_F32 = 0,
	WK_Q_F16 = 1,
	WK_Q_Q4_0 = 2,
	WK_Q_Q4_1 = 3,
	WK_Q_Q5_0 = 6,
	WK_Q_Q5_1 = 7,
	WK_Q_Q8_0 = 8,
	WK_Q_Q2_K = 10,
	WK_Q_Q3_K = 11,
	WK_Q_Q4_K = 12,
	WK_Q_Q5_K = 13,
	WK_Q_Q6_K = 14,
	WK_Q_Q8_K = 15,
	WK_Q_IQ4_NL = 20,
	WK_Q_IQ4_XS = 23,
	WK_Q_BF16 = 30,
	WK_Q_COUNT_ = 31, /* bound for tables indexed by id */
};

/* IQ4_NL's 16 levels (ggml's kvalues_iq4nl), ascending. */
extern const int8_t wk_iq4nl_levels[16];

/* Q3_K's six-bit scale j (0..15) from its 12 packed bytes s (low nibbles
 * in s[0..7], j >= 8 in their high halves; two high bits each in s[8..11]),
 * the offset 32 removed. */
static inline int wk_q3_k_scale(const uint8_t *s, int j)
{
	int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
	int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;

	return (lo | (hi << 4)) - 32;
}

/* IQ4_XS's six-bit scale j (0..7) of the block b (low nibbles from
 * scales_l, two high bits each from scales_h), the offset 32 removed. */
static inline int wk_iq4_xs_scale(const uint8_t *b, int j)
{
	int sh = b[2] | (b[3] << 8);

	return (((b[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4)) - 32;
}

/* 1 for the types this engine reads as weights (F32 F16 BF16 Q8_0 Q4_0 Q4_1
 * Q5_0 Q5_1 IQ4_NL IQ4_XS Q2_K Q3_K Q4_K Q5_K Q6_K). */
int wk_qtype_supported(uint32_t type);
/* "F32", "Q4_K", ...; "?" for unknown ids. */
const char *wk_qtype_name(uint32_t type);
/* Parses a name (case-insensitive); -1 when unknown. */
int wk_qtype_parse(const char *name);
/* Values per block (1 for float types); 0 for unknown ids. */
uint32_t wk_qtype_block_elems(uint32_t type);
/* Bytes per block; 0 for unknown ids. */
uint32_t wk_qtype_block_bytes(uint32_t type);
/*
 * Bytes of a row of n values; 0 when n is not a multiple of the block size
 * or the type is unknown.
 */
uint64_t wk_qtype_row_bytes(uint32_t type, uint64_t n);

/* IEEE half and bfloat16 conversions (round to nearest even). */
float wk_f16_to_f32(uint16_t h);
uint16_t wk_f32_to_f16(float f);
float wk_bf16_to_f32(uint16_t h);
uint16_t wk_f32_to_bf16(float f);

/*
 * Reference conversions of one row of n values (n a multiple of the block
 * size).  quantize writes wk_qtype_row_bytes(type, n) bytes.  Every
 * supported type, plus Q8_K for activations.
 */
void wk_quantize_row(uint32_t type, const float *x, void *dst, uint64_t n);
void wk_dequantize_row(uint32_t type, const void *src, float *y, uint64_t n);

#endif
