/*
 * kern_avx512.c - the x86 kernels (kern_x86.h) built for AVX-512
 * (F, BW, VL, VNNI): 512-bit float math, int8 dot products through
 * vpdpbusd/vpdpwssd on 256-bit vectors.  Compiled with per-file flags;
 * only called after a run-time CPU check.
 */
#define KX_512 1
#define KX_TABLE wk_cpu_kernels_avx512
#include "worker/cpu/kern_x86.h"
#define WO_TABLE wk_cpu_ops_avx512
#include "worker/cpu/ops_impl.h"
