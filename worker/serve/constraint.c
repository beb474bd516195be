/*
 * constraint.c - structured outputs in the worker process: the
 * vocabulary trie, the shared mask pool and the cache of compiled
 * constraints, built from the `worker.grammar_*` keys at start-up; and a
 * SUBMIT's constraint turned into a cache entry (compiled on a miss) with
 * its compile time, counted and logged.
 *
 * Thread: the scheduler thread (compiles run there, bounded by the
 * grammar limits; docs/structured-outputs.md).
 */
#include "worker/serve/internal.h"

#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "worker/grammar/mask.h"

enum cm_status wk_serve_grammar_setup(struct wk_server *s, char *err, size_t err_len)
{
	const struct wk_server_cfg *cfg = s->cfg;
	struct wk_gcache_limits lim;
	int64_t t0 = cm_mono_ns();
	enum cm_status st;

	st = wk_vtrie_new(s->model->tok, &s->vtrie, err, err_len);
	if (st != CM_OK)
		return st;
	if (cfg->grammar_pool_bytes) {
		s->mpool = wk_mask_pool_new((size_t)cfg->grammar_pool_bytes);
		if (!s->mpool)
			return cm_fail(err, err_len, CM_ENOMEM, "out of memory for the mask pool");
	}
	wk_gcache_limits_default(&lim);
	lim.max_entries = (uint32_t)cfg->grammar_cache_entries;
	lim.mask_cache_bytes = (size_t)cfg->grammar_mask_cache_bytes;
	lim.warm_ns = cfg->grammar_warm_ms * 1000000;
	lim.gram.max_rules = (uint32_t)cfg->grammar_max_rules;
	lim.gram.max_elems = (uint32_t)cfg->grammar_max_elems;
	lim.matcher.max_states = (uint32_t)cfg->grammar_max_states;
	lim.matcher.max_nodes = (uint32_t)cfg->grammar_max_states * 4;
	lim.schema.max_depth = (uint32_t)cfg->grammar_schema_depth;
	s->gcache = wk_gcache_new(s->vtrie, s->mpool, &lim);
	if (!s->gcache)
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory for the constraint cache");
	cm_logf(CM_LOG_INFO, "grammar_ready", "vocabulary trie of %zu nodes in %lld us",
		wk_vtrie_n_nodes(s->vtrie), (long long)((cm_mono_ns() - t0) / 1000));
	return CM_OK;
}

void wk_serve_grammar_teardown(struct wk_server *s)
{
	wk_gcache_free(s->gcache);
	wk_mask_pool_free(s->mpool);
	wk_vtrie_free(s->vtrie);
	s->gcache = NULL;
	s->mpool = NULL;
	s->vtrie = NULL;
}

static enum wk_gkind gkind_of(uint8_t k)
{
	switch (k) {
	case PROTO_CONSTRAINT_JSON_OBJECT: return WK_GKIND_JSON_OBJECT;
	case PROTO_CONSTRAINT_JSON_SCHEMA: return WK_GKIND_SCHEMA;
	default: return WK_GKIND_GBNF;
	}
}

enum cm_status wk_serve_constraint_get_text(struct wk_server *s, uint64_t id, int kind,
					    const char *label, const char *text, size_t len,
					    struct wk_gentry **out, int64_t *compile_ns, char *err,
					    size_t err_len)
{
	enum cm_status st;
	struct cm_log_rec lr;

	*out = NULL;
	*compile_ns = 0;
	if (!s->gcache)
		return cm_fail(err, err_len, CM_EUNSUPPORTED, "constraint: not available on this worker");
	if (len > s->cfg->grammar_max_bytes)
		return cm_fail(err, err_len, CM_ELIMIT,
			       "%s: %zu bytes, over the limit of %llu (worker.grammar_max_bytes)", label,
			       len, (unsigned long long)s->cfg->grammar_max_bytes);
	st = wk_gcache_get(s->gcache, (enum wk_gkind)kind, text ? text : "", len, out, compile_ns,
			   err, err_len);
	/* no text of the schema in the log: its kind, size and cost only */
	cm_log_begin(&lr, st == CM_OK ? CM_LOG_DEBUG : CM_LOG_INFO, "constraint");
	cm_log_u64(&lr, "request_id", id);
	cm_log_str(&lr, "kind", kind == WK_GKIND_TOOLS ? "tools" : kind == WK_GKIND_SCHEMA ? "json_schema"
				: kind == WK_GKIND_GBNF ? "grammar" : "json_object");
	cm_log_u64(&lr, "bytes", len);
	cm_log_bool(&lr, "cached", st == CM_OK && *compile_ns == 0);
	cm_log_i64(&lr, "compile_ns", *compile_ns);
	cm_log_str(&lr, "status", cm_status_str(st));
	cm_log_end(&lr);
	return st;
}

enum cm_status wk_serve_constraint_get(struct wk_server *s, uint64_t id,
				       const struct proto_submit *sb, struct wk_gentry **out,
				       int64_t *compile_ns, char *err, size_t err_len)
{
	*out = NULL;
	*compile_ns = 0;
	if (sb->constraint_kind == PROTO_CONSTRAINT_NONE)
		return CM_OK;
	if (sb->constraint_kind != PROTO_CONSTRAINT_JSON_OBJECT && sb->constraint.len == 0)
		return cm_fail(err, err_len, CM_EINVAL, "constraint: expected a %s, found nothing",
			       sb->constraint_kind == PROTO_CONSTRAINT_JSON_SCHEMA ? "schema" : "grammar");
	return wk_serve_constraint_get_text(s, id, gkind_of(sb->constraint_kind), "constraint",
					    sb->constraint.ptr, sb->constraint.len, out, compile_ns,
					    err, err_len);
}
