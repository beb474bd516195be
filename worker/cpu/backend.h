/*
 * backend.h - CPU-backend specific entry points beside the generic
 * wk_cpu_backend_ops (worker/engine/backend.h).
 */
#ifndef SLUICE_WORKER_CPU_BACKEND_H
#define SLUICE_WORKER_CPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

struct wk_model;
struct wk_backend;
struct wk_pool;

/*
 * Like wk_cpu_backend_ops.create with an explicit KV element type
 * (WK_Q_F16, the default, or WK_Q_F32 for reference checks).
 */
enum cm_status wk_cpu_backend_create(const struct wk_model *m, uint32_t n_blocks,
				     uint32_t block_tokens, int n_threads,
				     uint32_t kv_type, struct wk_backend **out,
				     char *err, size_t err_len) CM_WUR;

/*
 * Bytes of the repacked copies (worker/cpu/pack.h) a backend created for m
 * with repacking on would hold on this CPU: 0 where its ISA packs nothing.
 * The worker takes them off the free memory before sizing the KV cache.
 */
uint64_t wk_cpu_backend_repack_bytes(const struct wk_model *m);

/*
 * A mixture of experts: the experts the last forward() routed the batch's
 * token `token` to in layer `layer` (n_expert_used ids, increasing), for
 * checks against a reference and for inspection.  CM_ENOTFOUND for a dense
 * model, a layer or token outside the last step.
 */
enum cm_status wk_cpu_backend_routing(const struct wk_backend *be, uint32_t layer,
				      uint32_t token, uint32_t *ids) CM_WUR;

/*
 * The compute pool a CPU backend runs its forward passes on, for
 * bench-engine's bandwidth probe (bench/bwprobe.h), which reads memory on
 * the decode's own threads between its steps.  Borrowed: valid until the
 * backend is destroyed; never run on it during a forward().
 */
struct wk_pool *wk_cpu_backend_pool(const struct wk_backend *be);

#endif
