/*
 * kern_avx512.c - the x86 kernels (kern_x86.h) built for AVX-512
 * (F, BW, VL, VNNI): 512-bit float math, int8 dot products through
 * vpdpbusd/vpdpwssd (512-bit for Q4_0, Q8_0, Q6_K; 256-bit for Q4_K and
 * Q5_K, which measured faster so).  Compiled with per-file flags; only
 * called after a run-time CPU check.  Also the AVX-512 build of the ops
 * (ops_impl.h).
 */
#define KX_512 1
#define KX_TABLE wk_cpu_kernels_avx512
#include "worker/cpu/kern_x86.h"
#define WO_TABLE wk_cpu_ops_avx512
#include "worker/cpu/ops_impl.h"
