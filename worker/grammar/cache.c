/*
 * cache.c - the LRU of compiled constraints (cache.h): a doubly linked
 * list in recency order, a linear-probe-free lookup by hash over the list
 * (entries are few: worker.grammar_cache_entries), reference counts.
 *
 * Owns: the entries and everything they compiled.  Scheduler thread.
 */
#include "worker/grammar/cache.h"

#include <jansson.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "worker/grammar/gbnf.h"

struct wk_gentry {
	struct wk_gentry *prev, *next; /* most recent first */
	uint64_t hash;
	enum wk_gkind kind;
	char *text;
	size_t len;
	uint32_t refs;
	struct wk_gram *g;
	struct wk_gm *m;
	struct wk_mask *k;
};

struct wk_gcache {
	const struct wk_vtrie *trie;
	struct wk_mask_pool *pool;
	struct wk_gcache_limits lim;
	struct wk_gentry *head, *tail;
	uint32_t n;
};

void wk_gcache_limits_default(struct wk_gcache_limits *lim)
{
	lim->max_entries = 64;
	lim->mask_cache_bytes = 64u << 20;
	lim->warm_ns = 20 * 1000000ll;
	wk_schema_opts_default(&lim->schema);
	wk_gram_limits_default(&lim->gram);
	wk_gm_limits_default(&lim->matcher);
}

struct wk_gcache *wk_gcache_new(const struct wk_vtrie *trie, struct wk_mask_pool *pool,
				const struct wk_gcache_limits *lim)
{
	struct wk_gcache *c = cm_calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->trie = trie;
	c->pool = pool;
	if (lim)
		c->lim = *lim;
	else
		wk_gcache_limits_default(&c->lim);
	return c;
}

static void entry_free(struct wk_gentry *e)
{
	if (!e)
		return;
	wk_mask_free(e->k);
	wk_gm_free(e->m);
	wk_gram_free(e->g);
	cm_free(e->text);
	cm_free(e);
}

static void unlink_entry(struct wk_gcache *c, struct wk_gentry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
	c->n--;
}

static void push_front(struct wk_gcache *c, struct wk_gentry *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
	c->n++;
}

void wk_gcache_free(struct wk_gcache *c)
{
	if (!c)
		return;
	while (c->head) {
		struct wk_gentry *e = c->head;
		unlink_entry(c, e);
		entry_free(e);
	}
	cm_free(c);
}

/*
 * WK_GKIND_TOOLS: {"prefix", "sep", "suffix": strings, "max": calls,
 * "schema": one call's schema} -> prefix call (sep call){0,max-1} suffix:
 * the family's syntax around calls that keep their schema
 * (docs/tools.md).
 */
static enum cm_status compile_tools(struct wk_gram_b *b, const char *text, size_t len,
				    const struct wk_schema_opts *o, uint32_t *root, char *err,
				    size_t err_len)
{
	json_t *v = json_loadb(text, len, 0, NULL);
	json_t *schema = json_object_get(v, "schema");
	const char *pre = json_string_value(json_object_get(v, "prefix"));
	const char *sep = json_string_value(json_object_get(v, "sep"));
	const char *suf = json_string_value(json_object_get(v, "suffix"));
	json_int_t max = json_integer_value(json_object_get(v, "max"));
	uint32_t call = 0, r;
	enum cm_status st;
	struct wk_gx *kids[4];

	if (!json_is_object(schema) || !pre || !sep || !suf || max < 1 || max > 64) {
		json_decref(v);
		return cm_fail(err, err_len, CM_EINVAL, "tools: not a tool-call constraint");
	}
	st = wk_schema_compile(b, schema, o, &call, err, err_len);
	if (st == CM_OK) {
		r = wk_gram_rule(b, "tool_calls", 1);
		kids[0] = wk_gx_str(b, pre);
		kids[1] = wk_gx_ref(b, call);
		kids[2] = wk_gx_rep(b, wk_gx_seq2(b, wk_gx_str(b, sep), wk_gx_ref(b, call)), 0,
				    (uint32_t)max - 1);
		kids[3] = wk_gx_str(b, suf);
		wk_gram_set_body(b, r, wk_gx_seq(b, kids, 4));
		*root = r;
		if (wk_gram_b_broken(b))
			st = cm_fail(err, err_len, CM_ELIMIT, "tools: the grammar is over its limits");
	}
	json_decref(v);
	return st;
}

static enum cm_status compile(struct wk_gcache *c, struct wk_gentry *e, char *err, size_t err_len)
{
	struct wk_gram_b *b = wk_gram_b_new(&c->lim.gram);
	uint32_t root = 0;
	enum cm_status st;
	if (!b)
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	if (e->kind == WK_GKIND_GBNF) {
		st = wk_gbnf_parse(b, e->text, e->len, &root, err, err_len);
	} else if (e->kind == WK_GKIND_TOOLS) {
		st = compile_tools(b, e->text, e->len, &c->lim.schema, &root, err, err_len);
	} else {
		json_error_t je;
		json_t *s = e->kind == WK_GKIND_JSON_OBJECT ? json_pack("{ss}", "type", "object")
							  : json_loadb(e->text, e->len, 0, &je);
		if (!s)
			st = e->kind == WK_GKIND_JSON_OBJECT
				     ? cm_fail(err, err_len, CM_ENOMEM, "out of memory")
				     : cm_fail(err, err_len, CM_EINVAL, "schema: not JSON (line %d, column %d: %s)",
					       je.line, je.column, je.text);
		else
			st = wk_schema_compile(b, s, &c->lim.schema, &root, err, err_len);
		json_decref(s);
	}
	if (st == CM_OK)
		st = wk_gram_build(b, root, &e->g, err, err_len);
	wk_gram_b_free(b);
	if (st != CM_OK)
		return st;
	if (!(e->m = wk_gm_new(e->g, &c->lim.matcher)) ||
	    !(e->k = wk_mask_new(e->m, c->trie, c->lim.mask_cache_bytes, c->pool)))
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	if (c->lim.warm_ns > 0 && wk_mask_warm(e->k, c->lim.warm_ns) != CM_OK)
		return cm_fail(err, err_len, CM_ELIMIT, "grammar: more states than worker.grammar_max_states while compiling");
	return CM_OK;
}

enum cm_status wk_gcache_get(struct wk_gcache *c, enum wk_gkind kind, const char *text, size_t len,
			     struct wk_gentry **out, int64_t *compile_ns, char *err, size_t err_len)
{
	*out = NULL;
	*compile_ns = 0;
	if (kind == WK_GKIND_JSON_OBJECT)
		text = "", len = 0;
	uint64_t h = cm_fnv64(cm_fnv64(CM_FNV64_SEED, &kind, sizeof(kind)), text, len);
	for (struct wk_gentry *e = c->head; e; e = e->next)
		if (e->hash == h && e->kind == kind && e->len == len && memcmp(e->text, text, len) == 0) {
			unlink_entry(c, e);
			push_front(c, e);
			e->refs++;
			*out = e;
			return CM_OK;
		}
	/* make room: the least recently used entry nobody holds */
	while (c->n >= c->lim.max_entries) {
		struct wk_gentry *v = c->tail;
		while (v && v->refs)
			v = v->prev;
		if (!v)
			return cm_fail(err, err_len, CM_ELIMIT,
				       "grammar: %u distinct constraints already in use (worker.grammar_cache_entries)",
				       c->lim.max_entries);
		unlink_entry(c, v);
		entry_free(v);
	}
	int64_t t0 = cm_mono_ns();
	struct wk_gentry *e = cm_calloc(1, sizeof(*e));
	if (!e || !(e->text = cm_malloc(len + 1))) {
		cm_free(e);
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	}
	if (len)
		memcpy(e->text, text, len);
	e->text[len] = 0;
	e->len = len;
	e->kind = kind;
	e->hash = h;
	enum cm_status st = compile(c, e, err, err_len);
	*compile_ns = cm_mono_ns() - t0;
	if (st != CM_OK) {
		entry_free(e);
		return st;
	}
	e->refs = 1;
	push_front(c, e);
	*out = e;
	return CM_OK;
}

void wk_gcache_put(struct wk_gcache *c, struct wk_gentry *e)
{
	(void)c;
	if (e && e->refs)
		e->refs--;
}

struct wk_gm *wk_gentry_matcher(struct wk_gentry *e)
{
	return e->m;
}

struct wk_mask *wk_gentry_mask(struct wk_gentry *e)
{
	return e->k;
}

uint32_t wk_gcache_size(const struct wk_gcache *c)
{
	return c->n;
}
