/*
 * backend.h - the CUDA backend behind struct wk_backend_ops (see
 * worker/engine/backend.h), callable from C.
 *
 * Owns on its device: the weights (uploaded once at create, F16/BF16/F32
 * as stored, quantised types kept quantised), the KV cache (F16, per layer
 * K and V of [n_blocks][block_tokens][kv_dim]; the CPU backend keeps a
 * head's blocks together instead), the activation scratch, the step's
 * metadata buffers and the decode CUDA graphs.  docs/engine-cuda.md
 * describes the kernels, the memory budget, the graphs and where batch
 * invariance holds.
 * Thread: create on any thread; forward/copy_block on one thread at a time
 * (the scheduler's); each call makes the backend's device current.
 */
#ifndef SLUICE_WORKER_CUDA_BACKEND_H
#define SLUICE_WORKER_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/engine/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct wk_model;

/* The vtable; create() takes the device from wk_backend_params. */
extern const struct wk_backend_ops wk_cuda_backend_ops;

/* Devices visible to the runtime; 0 when there is no device or driver. */
int wk_cuda_device_count(void);

/*
 * How many KV blocks of block_tokens tokens fit on `device`: `fraction` of
 * the device memory that is free after the model's weights and the
 * backend's scratch reserve.  *out = 0 with CM_OK when nothing fits;
 * CM_ENOTFOUND without the device; CM_EIO on a CUDA error.
 */
enum cm_status wk_cuda_kv_blocks_for(int device, const struct wk_model *model,
				     uint32_t block_tokens, double fraction,
				     uint32_t *out) CM_WUR;

/*
 * Host-side check (no GPU needed) that the kernels' weight decoders
 * (dequant.cuh) give the reference dequantiser's values bit for bit, for
 * every weight type; CM_EINTERNAL with the first difference in err.
 */
enum cm_status wk_cuda_dequant_selfcheck(char *err, size_t len) CM_WUR;

/*
 * The decode matmul over host buffers (a test hook): W is rows x cols of
 * weight `type` (row_bytes a row), x n_tok x cols FP32, y n_tok x rows
 * FP32.  simt != 0 forces the SIMT kernel; else the backend's choice (the
 * tensor-core kernel for BF16, gemv_mma.cuh).  CM_EIO on a CUDA error.
 */
enum cm_status wk_cuda_gemv_host(int device, uint32_t type, const void *w, uint64_t rows,
				 uint64_t cols, uint64_t row_bytes, const float *x,
				 uint32_t n_tok, float *y, int simt) CM_WUR;

/* create() on a chosen device. */
enum cm_status wk_cuda_backend_create(const struct wk_model *model, int device,
				      uint32_t n_blocks, uint32_t block_tokens,
				      struct wk_backend **out, char *err,
				      size_t err_len) CM_WUR;

/*
 * A mixture of experts: the experts the last forward() routed the batch's
 * token `token` to in layer `layer` (n_expert_used ids, increasing);
 * waits for the step.  CM_ENOTFOUND for a dense model or out of range.
 */
enum cm_status wk_cuda_backend_routing(const struct wk_backend *be, uint32_t layer,
				       uint32_t token, uint32_t *ids) CM_WUR;

#ifdef __cplusplus
}
#endif

#endif
