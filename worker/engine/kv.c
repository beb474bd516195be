/*
 * kv.c - KV block manager and prefix cache (see kv.h).
 *
 * Blocks live in one array.  The free list is a stack of ids; cached blocks
 * form a doubly linked LRU list threaded through the block array; the
 * prefix index is an open-addressing hash table (linear probing, tombstone-
 * free deletion by backward shift) keyed by the chain hash, sized to twice
 * the block count so it never fills.
 */
#include "worker/engine/kv.h"

#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"

enum { ST_FREE = 0, ST_USED = 1, ST_CACHED = 2 };

struct kv_block {
	uint32_t ref;
	uint8_t state;
	uint8_t registered;      /* has a prefix entry */
	uint32_t lru_prev, lru_next;
	uint8_t hash[WK_KV_HASH_LEN];
};

struct wk_kv {
	uint32_t n_blocks;
	uint32_t block_tokens;
	struct kv_block *blocks;
	uint32_t *free_stack;    /* [n_blocks] */
	uint32_t n_free;
	uint32_t lru_head, lru_tail; /* head = least recently used */
	uint32_t n_cached;
	uint32_t n_used;
	uint32_t *table;         /* [table_size] block id or WK_KV_NONE */
	uint32_t table_mask;
	uint64_t evictions, hits, lookups;
};

static uint32_t hash_slot(const struct wk_kv *kv, const uint8_t *h)
{
	uint32_t v;

	memcpy(&v, h, 4);
	return v & kv->table_mask;
}

struct wk_kv *wk_kv_new(uint32_t n_blocks, uint32_t block_tokens)
{
	struct wk_kv *kv = NULL;
	uint32_t size = 2;

	if (n_blocks == 0 || n_blocks > (1u << 30) || block_tokens == 0)
		return NULL;
	kv = cm_calloc(1, sizeof(*kv));
	if (!kv)
		return NULL;
	while (size < 2 * n_blocks)
		size <<= 1;
	kv->n_blocks = n_blocks;
	kv->block_tokens = block_tokens;
	kv->blocks = cm_calloc(n_blocks, sizeof(*kv->blocks));
	kv->free_stack = cm_calloc(n_blocks, sizeof(uint32_t));
	kv->table = cm_calloc(size, sizeof(uint32_t));
	if (!kv->blocks || !kv->free_stack || !kv->table) {
		wk_kv_free(kv);
		return NULL;
	}
	kv->table_mask = size - 1;
	for (uint32_t i = 0; i < size; i++)
		kv->table[i] = WK_KV_NONE;
	/* pop order: block 0 first */
	for (uint32_t i = 0; i < n_blocks; i++)
		kv->free_stack[i] = n_blocks - 1 - i;
	kv->n_free = n_blocks;
	kv->lru_head = kv->lru_tail = WK_KV_NONE;
	return kv;
}

void wk_kv_free(struct wk_kv *kv)
{
	if (!kv)
		return;
	cm_free(kv->blocks);
	cm_free(kv->free_stack);
	cm_free(kv->table);
	cm_free(kv);
}

uint32_t wk_kv_block_tokens(const struct wk_kv *kv)
{
	return kv->block_tokens;
}

uint32_t wk_kv_n_blocks(const struct wk_kv *kv)
{
	return kv->n_blocks;
}

uint32_t wk_kv_available(const struct wk_kv *kv)
{
	return kv->n_free + kv->n_cached;
}

void wk_kv_stats(const struct wk_kv *kv, struct wk_kv_stats *out)
{
	out->n_blocks = kv->n_blocks;
	out->free = kv->n_free;
	out->used = kv->n_used;
	out->cached = kv->n_cached;
	out->evictions = kv->evictions;
	out->hits = kv->hits;
	out->lookups = kv->lookups;
}

/* ---- LRU list ---- */
static void lru_unlink(struct wk_kv *kv, uint32_t id)
{
	struct kv_block *b = &kv->blocks[id];

	if (b->lru_prev != WK_KV_NONE)
		kv->blocks[b->lru_prev].lru_next = b->lru_next;
	else
		kv->lru_head = b->lru_next;
	if (b->lru_next != WK_KV_NONE)
		kv->blocks[b->lru_next].lru_prev = b->lru_prev;
	else
		kv->lru_tail = b->lru_prev;
	b->lru_prev = b->lru_next = WK_KV_NONE;
	kv->n_cached--;
}

static void lru_push_tail(struct wk_kv *kv, uint32_t id)
{
	struct kv_block *b = &kv->blocks[id];

	b->lru_prev = kv->lru_tail;
	b->lru_next = WK_KV_NONE;
	if (kv->lru_tail != WK_KV_NONE)
		kv->blocks[kv->lru_tail].lru_next = id;
	else
		kv->lru_head = id;
	kv->lru_tail = id;
	kv->n_cached++;
}

/* ---- prefix index ---- */
static uint32_t table_find(const struct wk_kv *kv, const uint8_t *h)
{
	uint32_t i = hash_slot(kv, h);

	while (kv->table[i] != WK_KV_NONE) {
		if (memcmp(kv->blocks[kv->table[i]].hash, h, WK_KV_HASH_LEN) == 0)
			return i;
		i = (i + 1) & kv->table_mask;
	}
	return WK_KV_NONE;
}

static void table_remove_slot(struct wk_kv *kv, uint32_t i)
{
	uint32_t j = i;

	/* backward-shift deletion keeps probe chains intact */
	kv->table[i] = WK_KV_NONE;
	for (;;) {
		uint32_t k;

		j = (j + 1) & kv->table_mask;
		if (kv->table[j] == WK_KV_NONE)
			return;
		k = hash_slot(kv, kv->blocks[kv->table[j]].hash);
		/* move j to i when its home k is not cyclically in (i, j] */
		if ((i <= j) ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		kv->table[i] = kv->table[j];
		kv->table[j] = WK_KV_NONE;
		i = j;
	}
}

static void unregister(struct wk_kv *kv, uint32_t id)
{
	uint32_t slot;

	if (!kv->blocks[id].registered)
		return;
	slot = table_find(kv, kv->blocks[id].hash);
	if (slot != WK_KV_NONE && kv->table[slot] == id)
		table_remove_slot(kv, slot);
	kv->blocks[id].registered = 0;
}

enum cm_status wk_kv_alloc(struct wk_kv *kv, uint32_t *block)
{
	uint32_t id;

	if (kv->n_free > 0) {
		id = kv->free_stack[--kv->n_free];
	} else if (kv->lru_head != WK_KV_NONE) {
		id = kv->lru_head;
		lru_unlink(kv, id);
		unregister(kv, id);
		kv->evictions++;
	} else {
		return CM_ELIMIT;
	}
	kv->blocks[id].ref = 1;
	kv->blocks[id].state = ST_USED;
	kv->n_used++;
	*block = id;
	return CM_OK;
}

void wk_kv_ref(struct wk_kv *kv, uint32_t block)
{
	struct kv_block *b = &kv->blocks[block];

	if (b->state == ST_CACHED) {
		lru_unlink(kv, block);
		b->state = ST_USED;
		kv->n_used++;
	}
	b->ref++;
}

void wk_kv_unref(struct wk_kv *kv, uint32_t block)
{
	struct kv_block *b = &kv->blocks[block];

	if (b->ref == 0)
		return; /* double release: ignore rather than corrupt */
	if (--b->ref > 0)
		return;
	kv->n_used--;
	if (b->registered) {
		b->state = ST_CACHED;
		lru_push_tail(kv, block);
	} else {
		b->state = ST_FREE;
		kv->free_stack[kv->n_free++] = block;
	}
}

uint32_t wk_kv_refcount(const struct wk_kv *kv, uint32_t block)
{
	return kv->blocks[block].ref;
}

void wk_kv_chain_seed(const uint8_t salt[32], uint8_t out[WK_KV_HASH_LEN])
{
	uint8_t in[12 + 32];

	memcpy(in, "sluice-kv-v1", 12);
	memcpy(in + 12, salt, 32);
	cm_sha256(in, sizeof(in), out);
}

void wk_kv_chain_next(const uint8_t prev[WK_KV_HASH_LEN], const int32_t *tokens,
		      uint32_t n, uint8_t out[WK_KV_HASH_LEN])
{
	uint8_t in[WK_KV_HASH_LEN + 4 * 64];
	struct cm_sha256_ctx *c;

	if (n <= 64) {
		memcpy(in, prev, WK_KV_HASH_LEN);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t t = (uint32_t)tokens[i];

			in[WK_KV_HASH_LEN + 4 * i] = (uint8_t)t;
			in[WK_KV_HASH_LEN + 4 * i + 1] = (uint8_t)(t >> 8);
			in[WK_KV_HASH_LEN + 4 * i + 2] = (uint8_t)(t >> 16);
			in[WK_KV_HASH_LEN + 4 * i + 3] = (uint8_t)(t >> 24);
		}
		cm_sha256(in, WK_KV_HASH_LEN + 4 * n, out);
		return;
	}
	c = cm_sha256_new();
	if (!c) {
		/* cannot hash: produce a value no lookup can match */
		memset(out, 0, WK_KV_HASH_LEN);
		return;
	}
	cm_sha256_update(c, prev, WK_KV_HASH_LEN);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t le[4] = { (uint8_t)tokens[i], (uint8_t)(tokens[i] >> 8),
				  (uint8_t)(tokens[i] >> 16), (uint8_t)(tokens[i] >> 24) };

		cm_sha256_update(c, le, 4);
	}
	cm_sha256_final(c, out);
}

uint32_t wk_kv_lookup(struct wk_kv *kv, const uint8_t hash[WK_KV_HASH_LEN])
{
	uint32_t slot, id;

	kv->lookups++;
	slot = table_find(kv, hash);
	if (slot == WK_KV_NONE)
		return WK_KV_NONE;
	id = kv->table[slot];
	wk_kv_ref(kv, id);
	kv->hits++;
	return id;
}

enum cm_status wk_kv_register(struct wk_kv *kv, uint32_t block,
			      const uint8_t hash[WK_KV_HASH_LEN])
{
	struct kv_block *b = &kv->blocks[block];
	uint32_t i;

	if (b->state != ST_USED || b->registered)
		return CM_EINVAL;
	if (table_find(kv, hash) != WK_KV_NONE)
		return CM_EEXIST;
	memcpy(b->hash, hash, WK_KV_HASH_LEN);
	b->registered = 1;
	i = hash_slot(kv, hash);
	while (kv->table[i] != WK_KV_NONE)
		i = (i + 1) & kv->table_mask;
	kv->table[i] = block;
	return CM_OK;
}

void wk_kv_flush_cache(struct wk_kv *kv)
{
	while (kv->lru_head != WK_KV_NONE) {
		uint32_t id = kv->lru_head;

		lru_unlink(kv, id);
		unregister(kv, id);
		kv->blocks[id].state = ST_FREE;
		kv->free_stack[kv->n_free++] = id;
	}
}
