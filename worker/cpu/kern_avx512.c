/*
 * kern_avx512.c - the x86 kernels (kern_x86.h) built for AVX-512
 * (F, BW, VL, VNNI): 512-bit float math, and for every integer weight
 * type the 16-rows-in-the-lanes kernels
 * (kern_avx512_q8.h, kern_avx512_q5.h, kern_avx512_kq.h) with 512-bit
 * vpdpbusd/vpdpwssd.  Compiled with
 * per-file flags; only
 * called after a run-time CPU check.  Also the AVX-512 build of the ops
 * (ops_impl.h), and the avx512bf16 table: the same kernels but for BF16
 * weights, which take BF16 activations and vdpbf16ps (a function-level
 * target, called only where cpuid reports AVX512_BF16).
 */
#define KX_512 1
#define KX_TABLE wk_cpu_kernels_avx512
#include "worker/cpu/kern_x86.h"
#define WO_TABLE wk_cpu_ops_avx512
#include "worker/cpu/ops_impl.h"
