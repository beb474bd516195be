/*
 * probe.h - CUDA build and device probe for the worker.
 *
 * wk_cuda_probe() checks that the CUDA runtime finds a device and that
 * cuBLAS can create a handle on it, and describes what it found in one
 * line.  It is the smallest proof that the CUDA toolchain, the driver and
 * the libraries line up; the real backend (worker/cuda/ kernels behind
 * struct wk_backend_ops) comes later.
 * Thread: any; it touches the current thread's CUDA context (device 0).
 * Compiled by nvcc; callable from C.
 */
#ifndef SLUICE_WORKER_CUDA_PROBE_H
#define SLUICE_WORKER_CUDA_PROBE_H

#include <stddef.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Writes "cuda: N device(s); 0: <name>, sm_XY, <total> MiB (<free> MiB
 * free); cuBLAS <version>" into desc[len] (always NUL-terminated when
 * len > 0).  Returns CM_OK, CM_ENOTFOUND when there is no device or no
 * driver (desc says which), CM_EIO for any other CUDA or cuBLAS failure,
 * including a driver too old for the runtime or a kernel image missing for
 * the device's architecture (desc names the call and the error).
 */
enum cm_status wk_cuda_probe(char *desc, size_t len) CM_WUR;

#ifdef __cplusplus
}
#endif

#endif
