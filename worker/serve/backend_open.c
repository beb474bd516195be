/*
 * backend_open.c - backend choice, KV sizing and creation (see
 * backend_open.h).  SLUICE_HAVE_CUDA is defined for this file when the
 * CUDA backend is built (worker/CMakeLists.txt).
 */
#include "worker/serve/backend_open.h"

#include <stdio.h>
#include <unistd.h>

#include "worker/cpu/backend.h"
#include "worker/model/quant.h"
#ifdef SLUICE_HAVE_CUDA
#include "worker/cuda/backend.h"
#include "worker/cuda/probe.h"
#define WK_CUDA_OPS (&wk_cuda_backend_ops)
#define WK_BACKEND_NAMES "cpu,cuda"
#else
#define WK_CUDA_OPS ((const struct wk_backend_ops *)NULL)
#define WK_BACKEND_NAMES "cpu"
#endif

const char *wk_backend_names(void)
{
	return WK_BACKEND_NAMES;
}

const struct wk_backend_ops *wk_backend_pick(enum wk_cfg_backend kind)
{
	const struct wk_backend_ops *cuda = WK_CUDA_OPS;

	switch (kind) {
	case WK_CFG_BACKEND_CPU:
		return &wk_cpu_backend_ops;
	case WK_CFG_BACKEND_CUDA:
		return cuda;
	case WK_CFG_BACKEND_AUTO:
	default:
		/* cuda with a device present; cpu stays the fallback */
		if (cuda && cuda->device_count && cuda->device_count() > 0)
			return cuda;
		return &wk_cpu_backend_ops;
	}
}

static uint64_t bo_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}

/* KV bytes when the configuration leaves it to the free memory. */
static enum cm_status bo_kv_bytes(const struct wk_backend_ops *ops, const struct wk_backend_want *w,
				  const struct wk_model *m, struct wk_backend_params *p,
				  uint64_t per_block, uint64_t *bytes, char *err, size_t err_len)
{
	uint32_t nb = 0;

	*bytes = w->kv_bytes;
	if (*bytes)
		return CM_OK;
	if (!ops->kv_blocks_for) {
		/* the CPU backend's repacked copies come out of the same memory */
		uint64_t avail = bo_mem_available();
		uint64_t copies = ops == &wk_cpu_backend_ops && w->cpu_repack
					  ? wk_cpu_backend_repack_bytes(m) : 0;

		avail = avail > copies ? avail - copies : 0;
		*bytes = (uint64_t)((double)avail * w->kv_fraction);
		return CM_OK;
	}
	if (ops->kv_blocks_for(m, p, w->kv_fraction, &nb) != CM_OK) {
		snprintf(err, err_len, "worker.device %d: no such %s device", w->device, ops->name);
		return CM_ENOTFOUND;
	}
	*bytes = (uint64_t)nb * per_block;
	return CM_OK;
}

enum cm_status wk_backend_open(const struct wk_backend_want *w, const struct wk_model *m,
			       struct wk_kv_plan *plan, struct wk_backend **out, char *err,
			       size_t err_len)
{
	const struct wk_backend_ops *ops = wk_backend_pick(w->kind);
	struct wk_backend_params p = {
		.block_tokens = w->block_tokens,
		.n_threads = w->threads,
		.device = w->device,
		.kv_type = w->kv_type == WK_CFG_KV_F32 ? WK_Q_F32 : WK_Q_F16,
		.cpu_plain_weights = !w->cpu_repack,
		.cpu_expert_cache = w->cpu_expert_cache,
	};
	uint32_t elem = w->kv_type == WK_CFG_KV_F32 ? 4 : 2;
	uint64_t kv_bytes;
	enum cm_status st;

	*out = NULL;
	if (!ops) {
		snprintf(err, err_len, "worker.backend: 'cuda' is not available in this build");
		return CM_EUNSUPPORTED;
	}
	if (!m->hp.causal) {
		/* an encoder keeps no KV cache: it embeds each step's inputs and
		 * forgets them; the backend that runs encoders (cpu) when auto */
		if (w->kind == WK_CFG_BACKEND_AUTO && ops != &wk_cpu_backend_ops)
			ops = &wk_cpu_backend_ops;
		plan->bytes_per_token = 0;
		plan->bytes_per_block = 0;
		plan->n_blocks = 2;
		p.n_blocks = 2;
		if (p.n_threads <= 0)
			p.n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
		if (p.n_threads <= 0)
			p.n_threads = 1;
		return ops->create(m, &p, out, err, err_len);
	}
	plan->bytes_per_token = wk_model_kv_bytes_per_token(&m->hp, elem);
	plan->bytes_per_block = plan->bytes_per_token * w->block_tokens;
	st = bo_kv_bytes(ops, w, m, &p, plan->bytes_per_block, &kv_bytes, err, err_len);
	if (st != CM_OK)
		return st;
	plan->n_blocks = plan->bytes_per_block ? kv_bytes / plan->bytes_per_block : 0;
	if (plan->n_blocks < 2) {
		snprintf(err, err_len, "kv cache: %llu bytes hold fewer than 2 blocks of %llu bytes",
			 (unsigned long long)kv_bytes, (unsigned long long)plan->bytes_per_block);
		return CM_ELIMIT;
	}
	if (plan->n_blocks > (1u << 24))
		plan->n_blocks = 1u << 24;
	if (p.n_threads <= 0)
		p.n_threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (p.n_threads <= 0)
		p.n_threads = 1;
	p.n_blocks = (uint32_t)plan->n_blocks;
	return ops->create(m, &p, out, err, err_len);
}

enum cm_status wk_backend_probe(char *desc, size_t len)
{
#ifdef SLUICE_HAVE_CUDA
	return wk_cuda_probe(desc, len);
#else
	snprintf(desc, len, "cuda: not built (configure with nvcc present or -DSLUICE_CUDA=ON)");
	return CM_EUNSUPPORTED;
#endif
}
