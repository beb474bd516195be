/*
 * config.c - the `worker` configuration section: every key with its type,
 * default, bounds and doc string (docs/configuration.md is generated from
 * it), and the checks a loaded file must pass before the worker starts.
 */
#include "worker/serve/config.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/limits.h"

static const char *const mode_choices[] = { "0600", "0660" };
static const char *const backend_choices[] = { "auto", "cpu", "cuda" };
static const char *const kv_type_choices[] = { "F16", "F32" };
static const char *const level_choices[] = { "debug", "info", "warn", "error" };

static const struct cm_cfg_key wk_server_keys[] = {
	CM_CFG_STRING(struct wk_server_cfg, name, "worker-0", 64,
		      "Name of this worker in HELLO, logs and `sluicectl worker drain`."),
	CM_CFG_STRING(struct wk_server_cfg, model, NULL, 4096,
		      "Path of the GGUF model file (required)."),
	CM_CFG_STRING(struct wk_server_cfg, model_name, NULL, 128,
		      "Model name clients ask for; default: the file name without `.gguf`."),
	CM_CFG_STRING(struct wk_server_cfg, model_sha256, NULL, 64,
		      "Pinned SHA-256 (hex) of the model file: checked before serving, a mismatch refuses to start."),
	CM_CFG_STRING(struct wk_server_cfg, socket, NULL, 107,
		      "Path of the Unix stream socket to listen on (required)."),
	CM_CFG_ENUM(struct wk_server_cfg, socket_mode, 0, mode_choices,
		    "Permissions of the socket file."),
	CM_CFG_STRING(struct wk_server_cfg, socket_group, NULL, 64,
		      "Group owning the socket file (with mode 0660)."),
	CM_CFG_STRLIST(struct wk_server_cfg, allowed_uids, NULL, 64, 32,
		       "Peer uids (numbers or user names) allowed to connect, checked with SO_PEERCRED; default: the worker's own uid."),
	CM_CFG_ENUM(struct wk_server_cfg, backend, 0, backend_choices,
		    "Compute backend; `auto` picks CUDA when built and a device is present."),
	CM_CFG_INT(struct wk_server_cfg, device, 0, 0, 64, "GPU index for the CUDA backend."),
	CM_CFG_INT(struct wk_server_cfg, threads, 0, 0, 1024,
		   "Compute threads of the CPU backend; 0 = every online CPU; "
		   "more than 256 (`WK_POOL_MAX_THREADS`) run as 256."),
	CM_CFG_BOOL(struct wk_server_cfg, cpu_repack, true,
		    "CPU backend: keep a copy of every dense matrix in huge-page memory, in the layout its strip kernels read where it has them for the type (AVX-512: every integer type, AVX2: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; the same values read up to 1.6x faster), else as the file has it (F32/F16/BF16, the other types on AVX2; streamed 5-25 % faster than the mapped file's 4 KiB pages), at the cost of that much memory besides the mapped file (`repacked_bytes` in worker_ready); false reads the mapped file only."),
	CM_CFG_BOOL(struct wk_server_cfg, expert_cache, true,
		    "CPU backend, a mixture of experts (with `cpu_repack`): read the experts from a cache file that holds them in the strip kernels' layout (the same values; moe-1b decode 1.3x faster on AVX-512), mapped like the model file so that they stay page cache, read on demand and shared by the workers of the model. Written at the first start (a pass over the experts and a file of their size in `expert_cache_dir`) and reused while the model file's size, mtime, inode and permissions are the same; a start that cannot write it logs `expert_cache_unavailable` and reads the experts from the model file. false: always from the model file."),
	CM_CFG_STRING(struct wk_server_cfg, expert_cache_dir, NULL, 4000,
		      "Directory of the experts' cache files (`expert_cache`), created when absent; default `$CACHE_DIRECTORY/experts` (systemd's `CacheDirectory=`, as in deploy/systemd), else `$XDG_CACHE_HOME/sluice/experts`, else `$HOME/.cache/sluice/experts`."),
	CM_CFG_SIZE(struct wk_server_cfg, kv_cache_bytes, 0, 0, (int64_t)1 << 50,
		    "Bytes of KV cache; 0 = `kv_cache_fraction` of the free memory. The CPU backend allocates it in huge pages and writes every page when the worker starts (about 0.5 s a GiB on fresh memory of this project's VMs), so it is resident and committed from the start and no request pays its page faults."),
	CM_CFG_DOUBLE(struct wk_server_cfg, kv_cache_fraction, 0.25, 0.01, 0.95,
		      "Fraction of free memory (RAM less the CPU backend's repacked copies, or device memory after the weights) given to the KV cache when `kv_cache_bytes` is 0."),
	CM_CFG_ENUM(struct wk_server_cfg, kv_type, 0, kv_type_choices,
		    "Element type of the KV cache."),
	CM_CFG_INT(struct wk_server_cfg, block_tokens, CM_LIM_KV_BLOCK_TOKENS, 4, 256,
		   "Tokens per KV block (prefix-cache granularity)."),
	CM_CFG_INT(struct wk_server_cfg, max_running, CM_LIM_MAX_RUNNING_SEQS, 1, CM_LIM_MAX_RUNNING_SEQS_HARD,
		   "Sequences in the running batch."),
	CM_CFG_INT(struct wk_server_cfg, step_tokens, CM_LIM_STEP_TOKEN_BUDGET, 1, 65536,
		   "Token budget of one scheduler step (decode tokens first, then prefill chunks)."),
	CM_CFG_INT(struct wk_server_cfg, embed_step_tokens, CM_LIM_EMBED_STEP_TOKENS, 1, 1 << 20,
		   "Token budget of one embedding step: inputs of the queued EMBED requests, one per request in turn, until it is spent (the first always runs)."),
	CM_CFG_BOOL(struct wk_server_cfg, embed_truncatable, false,
		    "The embedding model was trained for shortened vectors (Matryoshka: nomic-embed-text v1.5, Qwen3-Embedding): requests may ask for fewer `dimensions`; otherwise only the model's own length is accepted."),
	CM_CFG_INT(struct wk_server_cfg, max_waiting, 1024, 1, 1000000,
		   "Requests waiting for admission; beyond, SUBMIT gets ERROR overloaded."),
	CM_CFG_INT(struct wk_server_cfg, context, 0, 0, 1 << 24,
		   "Context length served; 0 = the model's training context (capped by the KV cache)."),
	CM_CFG_STRING(struct wk_server_cfg, chat_template, NULL, 32,
		      "Chat template family overriding the model's own (llama3, llama2, mistral, chatml, phi3, phi4, granite, gemma, zephyr, plain)."),
	CM_CFG_INT(struct wk_server_cfg, max_connections, CM_LIM_WORKER_CONNECTIONS, 1, 1024,
		   "Gateway connections accepted at once."),
	CM_CFG_DURATION(struct wk_server_cfg, stats_interval_ms, 1000, 50, 60000,
			"Interval between STATS frames."),
	CM_CFG_DURATION(struct wk_server_cfg, drain_timeout_ms, 30000, 0, 3600000,
			"On SIGTERM, how long running requests may finish before they are cancelled."),
	CM_CFG_SIZE(struct wk_server_cfg, grammar_max_bytes, CM_LIM_CONSTRAINT_BYTES, 1, 64 << 20,
		    "Largest schema or grammar text a request may carry; beyond, ERROR constraint."),
	CM_CFG_INT(struct wk_server_cfg, grammar_cache_entries, CM_LIM_GRAMMAR_CACHE_ENTRIES, 1, 65536,
		   "Compiled constraints kept per model (LRU); when all are in use a new one is refused."),
	CM_CFG_SIZE(struct wk_server_cfg, grammar_mask_cache_bytes, CM_LIM_GRAMMAR_MASK_CACHE_BYTES,
		    1 << 16, (int64_t)1 << 36,
		    "Token masks cached per compiled constraint (dropped whole when full)."),
	CM_CFG_SIZE(struct wk_server_cfg, grammar_pool_bytes, CM_LIM_GRAMMAR_POOL_BYTES, 0, (int64_t)1 << 38,
		    "Token masks of grammar pieces shared by every constraint of the model (strings, numbers); 0 = no sharing."),
	CM_CFG_DURATION(struct wk_server_cfg, grammar_warm_ms, CM_LIM_GRAMMAR_WARM_MS, 0, 10000,
			"Time a compile may spend computing its first masks ahead of the first token."),
	CM_CFG_INT(struct wk_server_cfg, grammar_max_rules, CM_LIM_GRAMMAR_MAX_RULES, 16, 1 << 24,
		   "Rules of one compiled grammar; beyond, ERROR constraint."),
	CM_CFG_INT(struct wk_server_cfg, grammar_max_elems, CM_LIM_GRAMMAR_MAX_ELEMS, 64, 1 << 28,
		   "Elements of one compiled grammar (a bounded repetition counts its copies); beyond, ERROR constraint."),
	CM_CFG_INT(struct wk_server_cfg, grammar_max_states, CM_LIM_GRAMMAR_MAX_STATES, 1024, 1 << 26,
		   "Matcher states of one compiled constraint; a sequence that needs more ends with ERROR constraint."),
	CM_CFG_INT(struct wk_server_cfg, grammar_schema_depth, CM_LIM_GRAMMAR_SCHEMA_DEPTH, 2, 1024,
		   "Nesting of a JSON Schema (subschemas within subschemas); deeper is ERROR constraint."),
	CM_CFG_STRING(struct wk_server_cfg, pin_engine_version, NULL, 64,
		      "Pinned engine build (as `sluice-worker --version` prints it and HELLO's "
		      "engine_version, e.g. `0.1.0+abc1234`): another build refuses to start, naming both. Unset: any."),
	CM_CFG_INT(struct wk_server_cfg, pin_cuda_driver, 0, 0, 1000000,
		   "Pinned CUDA driver version as cudaDriverGetVersion reports it (13000 = 13.0); "
		   "another, or no CUDA backend, refuses to start. 0: any."),
	CM_CFG_INT(struct wk_server_cfg, pin_cuda_runtime, 0, 0, 1000000,
		   "Pinned CUDA runtime version (cudaRuntimeGetVersion, 13000 = 13.0). 0: any."),
	CM_CFG_INT(struct wk_server_cfg, pin_cublas, 0, 0, 100000000,
		   "Pinned cuBLAS version, major x 10000 + minor x 100 + patch (130100 = 13.1.0). 0: any."),
	CM_CFG_ENUM(struct wk_server_cfg, log_level, 1, level_choices, "Minimum log level."),
};

const struct cm_cfg_section wk_server_section =
	CM_CFG_SECTION("worker", struct wk_server_cfg, wk_server_keys,
		       "The worker process: model, socket, KV cache and scheduler.");

enum cm_status wk_server_cfg_load(const char *path, struct wk_server_cfg *cfg, char *err,
				  size_t err_len)
{
	const struct cm_cfg_section *secs[1] = { &wk_server_section };
	void *structs[1] = { cfg };
	char lerr[1024];

	if (cm_cfg_load_file(path, secs, structs, 1, lerr, sizeof(lerr)) != CM_OK) {
		snprintf(err, err_len, "%s", lerr);
		return CM_EINVAL;
	}
	if (!cfg->model || !cfg->socket) {
		snprintf(err, err_len, "%s: worker.%s: expected a path, found nothing", path,
			 !cfg->model ? "model" : "socket");
		goto bad;
	}
	if (cfg->model_sha256 && strlen(cfg->model_sha256) != 64) {
		snprintf(err, err_len, "%s: worker.model_sha256: expected 64 hex digits, found %zu characters",
			 path, strlen(cfg->model_sha256));
		goto bad;
	}
	if (!cfg->model_name) {
		const char *base = strrchr(cfg->model, '/');
		size_t n;

		base = base ? base + 1 : cfg->model;
		n = strlen(base);
		if (n > 5 && strcmp(base + n - 5, ".gguf") == 0)
			n -= 5;
		cfg->model_name = cm_strndup(base, n);
		if (!cfg->model_name) {
			snprintf(err, err_len, "out of memory");
			wk_server_cfg_deinit(cfg);
			return CM_ENOMEM;
		}
	}
	return CM_OK;
bad:
	wk_server_cfg_deinit(cfg);
	return CM_EINVAL;
}

void wk_server_cfg_deinit(struct wk_server_cfg *cfg)
{
	cm_cfg_free(&wk_server_section, cfg);
}
