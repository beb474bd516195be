/*
 * kern_avx2.c - the x86 kernels (kern_x86.h) built for AVX2 + FMA + F16C:
 * 256-bit float math, int8 dot products through maddubs/madd.  Compiled
 * with per-file flags; only called after a run-time CPU check.  Also the
 * AVX2 build of the ops (ops_impl.h).
 */
#define KX_512 0
#define KX_TABLE wk_cpu_kernels_avx2
#include "worker/cpu/kern_x86.h"
#define WO_TABLE wk_cpu_ops_avx2
#include "worker/cpu/ops_impl.h"
