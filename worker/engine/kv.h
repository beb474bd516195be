/*
 * kv.h - the KV block manager: which KV-cache block is free, used by whom
 * (reference counts) and which full blocks the prefix cache remembers.
 *
 * The cache is n_blocks blocks of block_tokens tokens each.  Storage lives
 * in the backend (worker/engine/backend.h); this module only hands out block ids.
 * A block is in exactly one of three states:
 *   free     refcount 0, not in the prefix cache (on the free list);
 *   used     refcount > 0 (held by one or more sequences' block tables);
 *   cached   refcount 0 but registered in the prefix cache, kept on an LRU
 *            list and evicted (oldest first) when a block is needed and
 *            the free list is empty.
 *
 * Prefix cache: a full block is registered under a 32-byte chain hash
 *   h_0 = SHA-256("sluice-kv-v1" || tenant cache salt)
 *   h_i = SHA-256(h_{i-1} || token ids of block i as u32 LE)
 * so a block matches only the same tokens after the same prefix of the same
 * tenant: tenants never share blocks (the salt is secret and per tenant,
 * derived by the gateway; the worker never takes it from request text).
 *
 * Threading: owned by the scheduler thread; not thread-safe.
 */
#ifndef SLUICE_WORKER_ENGINE_KV_H
#define SLUICE_WORKER_ENGINE_KV_H

#include <stdint.h>

#include "common/status.h"

#define WK_KV_HASH_LEN 32
#define WK_KV_NONE UINT32_MAX

struct wk_kv;

struct wk_kv_stats {
	uint32_t n_blocks;
	uint32_t free;         /* on the free list */
	uint32_t used;         /* refcount > 0 */
	uint32_t cached;       /* refcount 0, kept for the prefix cache */
	uint64_t evictions;    /* cached blocks reclaimed, cumulative */
	uint64_t hits;         /* prefix lookups that matched, cumulative */
	uint64_t lookups;
};

struct wk_kv *wk_kv_new(uint32_t n_blocks, uint32_t block_tokens);
void wk_kv_free(struct wk_kv *kv);

uint32_t wk_kv_block_tokens(const struct wk_kv *kv);
uint32_t wk_kv_n_blocks(const struct wk_kv *kv);
/* Blocks obtainable now: free + cached (evictable). */
uint32_t wk_kv_available(const struct wk_kv *kv);
void wk_kv_stats(const struct wk_kv *kv, struct wk_kv_stats *out);

/*
 * Takes a block (refcount 1): from the free list, else by evicting the
 * least recently used cached block (whose prefix entry is dropped).
 * CM_ELIMIT when every block is used.
 */
enum cm_status wk_kv_alloc(struct wk_kv *kv, uint32_t *block) CM_WUR;
void wk_kv_ref(struct wk_kv *kv, uint32_t block);
/*
 * Drops one reference.  At 0 a block registered in the prefix cache becomes
 * cached (most recently used end of the LRU), otherwise free.
 */
void wk_kv_unref(struct wk_kv *kv, uint32_t block);
uint32_t wk_kv_refcount(const struct wk_kv *kv, uint32_t block);

/* ---- prefix cache ---- */
void wk_kv_chain_seed(const uint8_t salt[32], uint8_t out[WK_KV_HASH_LEN]);
void wk_kv_chain_next(const uint8_t prev[WK_KV_HASH_LEN], const int32_t *tokens,
		      uint32_t n, uint8_t out[WK_KV_HASH_LEN]);
/*
 * Finds the block registered under `hash` and takes a reference on it
 * (a cached block leaves the LRU).  WK_KV_NONE when absent.
 */
uint32_t wk_kv_lookup(struct wk_kv *kv, const uint8_t hash[WK_KV_HASH_LEN]);
/*
 * Registers a used, full block under `hash`.  If another block already has
 * that hash nothing changes (the caller keeps its own block) and CM_EEXIST
 * is returned.  A block can be registered once.
 */
enum cm_status wk_kv_register(struct wk_kv *kv, uint32_t block,
			      const uint8_t hash[WK_KV_HASH_LEN]) CM_WUR;
/* Drops every cached (unreferenced) block to the free list. */
void wk_kv_flush_cache(struct wk_kv *kv);

#endif
