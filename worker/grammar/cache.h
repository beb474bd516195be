/*
 * cache.h - compiled constraints of one model, shared by the sequences
 * that use them: a bounded LRU keyed by (kind, text).
 *
 * An entry owns the lowered grammar, its matcher and its mask cache; the
 * matcher's state ids are what a sequence holds, so every sequence with
 * the same constraint shares one entry (and its cached masks).  Entries
 * are reference counted: wk_gcache_get() takes a reference, wk_gcache_put()
 * returns it; only unreferenced entries are evicted (least recently used
 * first).  When `max_entries` entries are all in use, a new constraint is
 * CM_ELIMIT (the request is refused, nothing running is disturbed).
 * Failed compiles are not cached.
 *
 * Threads: one cache per model on the worker's scheduler thread.
 */
#ifndef SLUICE_WORKER_GRAMMAR_CACHE_H
#define SLUICE_WORKER_GRAMMAR_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "worker/grammar/mask.h"
#include "worker/grammar/schema.h"

enum wk_gkind {
	WK_GKIND_SCHEMA = 1,      /* text: a JSON Schema */
	WK_GKIND_GBNF = 2,        /* text: the grammar text format (gbnf.h) */
	WK_GKIND_JSON_OBJECT = 3, /* any JSON object (text ignored) */
	WK_GKIND_TOOLS = 4,       /* text: {"prefix", "sep", "suffix", "max",
				   * "schema"}: tool calls in a family's syntax */
};

struct wk_gcache_limits {
	uint32_t max_entries;      /* distinct constraints kept (worker.grammar_cache_entries) */
	size_t mask_cache_bytes;   /* per entry (worker.grammar_mask_cache_bytes) */
	int64_t warm_ns;           /* compile-time warming budget (worker.grammar_warm_ms) */
	struct wk_schema_opts schema;
	struct wk_gram_limits gram;
	struct wk_gm_limits matcher;
};
void wk_gcache_limits_default(struct wk_gcache_limits *lim);

struct wk_gcache;
struct wk_gentry;

/* trie and pool (NULL: none) must outlive the cache. */
struct wk_gcache *wk_gcache_new(const struct wk_vtrie *trie, struct wk_mask_pool *pool,
				const struct wk_gcache_limits *lim);
/* Every entry must have been put back. */
void wk_gcache_free(struct wk_gcache *c);

/*
 * The entry for (kind, text), compiled on a miss (*compile_ns set: the
 * time it took, 0 on a hit).  Errors are the compiler's (CM_EINVAL,
 * CM_EUNSUPPORTED with the keyword and path, CM_ELIMIT), written to err.
 */
enum cm_status wk_gcache_get(struct wk_gcache *c, enum wk_gkind kind, const char *text, size_t len,
			     struct wk_gentry **out, int64_t *compile_ns, char *err,
			     size_t err_len) CM_WUR;
void wk_gcache_put(struct wk_gcache *c, struct wk_gentry *e);

struct wk_gm *wk_gentry_matcher(struct wk_gentry *e);
struct wk_mask *wk_gentry_mask(struct wk_gentry *e);
uint32_t wk_gcache_size(const struct wk_gcache *c);

#endif
