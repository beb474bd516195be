/*
 * backend_open.h - the one place that knows which backends this build
 * has: it picks one for the configuration (auto: CUDA when built and a
 * device is present, else CPU), sizes the KV cache for it and creates it
 * through its ops.  An encoder (an embedding model) gets no KV cache
 * (2 blocks the scheduler never uses) and, on auto, the cpu backend, the
 * one that runs encoders.  The only #ifdef for CUDA in the worker is in
 * backend_open.c.
 */
#ifndef SLUICE_WORKER_SERVE_BACKEND_OPEN_H
#define SLUICE_WORKER_SERVE_BACKEND_OPEN_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/engine/backend.h"
#include "worker/model/model.h"
#include "worker/serve/config.h"

/* What the caller asks for (from the `worker` section). */
struct wk_backend_want {
	enum wk_cfg_backend kind;
	int device;               /* CUDA device index */
	int threads;              /* CPU threads; <= 0: every online CPU */
	enum wk_cfg_kv_type kv_type;
	uint32_t block_tokens;
	uint64_t kv_bytes;        /* 0: kv_fraction of the free memory */
	double kv_fraction;       /* of device memory after the weights, or MemAvailable */
	bool cpu_repack;          /* CPU: copy the dense matrices into huge pages (rows16 or plain) */
	const char *cpu_expert_cache; /* CPU: directory of the experts' cache file; NULL: none */
};

/* The KV budget the backend was created with (logged at start). */
struct wk_kv_plan {
	uint64_t bytes_per_token;
	uint64_t bytes_per_block;
	uint64_t n_blocks;        /* 2 .. 2^24 */
};

/* The ops this build and machine would use for `kind`; NULL when absent. */
const struct wk_backend_ops *wk_backend_pick(enum wk_cfg_backend kind);

/*
 * Picks, sizes and creates the backend for `m`.  CM_OK: *out and *plan
 * set.  Otherwise a message naming the configuration key in err.
 */
enum cm_status wk_backend_open(const struct wk_backend_want *w, const struct wk_model *m,
			       struct wk_kv_plan *plan, struct wk_backend **out, char *err,
			       size_t err_len) CM_WUR;

/*
 * `sluice-worker probe`: looks for a CUDA device, runs a kernel, creates a
 * cuBLAS handle; desc says what was found.  CM_ENOTFOUND: no device;
 * CM_EUNSUPPORTED: CUDA is not in this build.
 */
enum cm_status wk_backend_probe(char *desc, size_t len) CM_WUR;

/* The backends compiled in, "cpu" or "cpu,cuda" (for --version). */
const char *wk_backend_names(void);

#endif
