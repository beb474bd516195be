/*
 * mask_pool.c - the mask cache shared across grammars (mask.h): the
 * canonical text of a local state (its structure, independent of where
 * its rules sit in a grammar) and a bounded map from that text to deep
 * copies of mask entries.
 *
 * Why: every JSON Schema grammar has the same string, number and value
 * pieces; walking the 100k-token trie for the string interior costs about
 * a millisecond, and without sharing every new grammar pays it again.
 * The key is the full text (compared, not only hashed), so a hash
 * collision cannot hand one grammar another's mask.
 *
 * Owns: the pool's entries and texts.  One thread.
 */
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"
#include "worker/grammar/internal.h"

#define FP_MAX_WORDS 8192u /* larger structures are not shared */
#define FP_MAX_RULES 512u

struct pool_item {
	uint64_t hash;
	uint32_t *text;
	size_t n_text;
	struct mk_entry e;
};

struct wk_mask_pool {
	size_t cap_bytes, used;
	struct pool_item *items;
	uint32_t n, cap;
	uint32_t *index, index_cap; /* item + 1 by hash */
};

static int fp_put(struct wk_mask_fpbuf *fp, uint32_t w)
{
	if (fp->n == fp->cap) {
		if (fp->cap >= FP_MAX_WORDS)
			return -1;
		size_t c = fp->cap ? 2 * fp->cap : 256;
		uint32_t *v = cm_reallocarray(fp->v, c, sizeof(uint32_t));
		if (!v)
			return -1;
		fp->v = v;
		fp->cap = c;
	}
	fp->v[fp->n++] = w;
	return 0;
}

#define FP_SLOTS (4 * FP_MAX_RULES) /* open addressing: rule + 1 -> canonical number */

struct fp_rules {
	uint32_t id[FP_MAX_RULES];   /* grammar rule of canonical number i */
	uint32_t dist[FP_MAX_RULES]; /* fewest bytes before the rule is entered */
	uint32_t n;
	uint32_t horizon;            /* the longest token: nothing farther matters */
	int pass;                    /* 0: distances, 1: text */
	uint32_t slot_rule[FP_SLOTS], slot_idx[FP_SLOTS];
	/* pass 0: rules whose distance dropped, to (re)visit */
	uint32_t queue[FP_MAX_RULES], q_head, q_len;
	uint8_t queued[FP_MAX_RULES];
};

static void fp_queue(struct fp_rules *r, uint32_t q)
{
	if (r->queued[q])
		return;
	r->queued[q] = 1;
	r->queue[(r->q_head + r->q_len++) % FP_MAX_RULES] = q;
}

/* The canonical number of `rule` reached after `dist` bytes (pass 0 lowers
 * distances and reports a change in *changed). */
static int canon(struct fp_rules *r, uint32_t rule, uint32_t dist, uint32_t *out, int *changed)
{
	uint32_t h = (rule * 2654435761u) % FP_SLOTS;
	for (; r->slot_rule[h]; h = (h + 1) % FP_SLOTS)
		if (r->slot_rule[h] == rule + 1) {
			uint32_t i = r->slot_idx[h];
			if (dist < r->dist[i]) {
				r->dist[i] = dist;
				*changed = 1;
				fp_queue(r, i);
			}
			*out = i;
			return 0;
		}
	if (r->n == FP_MAX_RULES || r->pass == 1)
		return -1;
	r->slot_rule[h] = rule + 1;
	r->slot_idx[h] = r->n;
	r->id[r->n] = rule;
	r->dist[r->n] = dist;
	r->queued[r->n] = 0;
	*changed = 1;
	fp_queue(r, r->n);
	*out = r->n++;
	return 0;
}

/*
 * The elements from pos to the end of its alternative, entered after
 * `dist` bytes.  What lies beyond the horizon (more bytes away than the
 * longest token) cannot change which tokens are allowed, so it is cut:
 * x{0,1000} at count 10 and at count 11 then read the same.
 */
static int fp_rest(const struct wk_gram *g, uint32_t pos, uint32_t dist, struct fp_rules *r,
		   struct wk_mask_fpbuf *fp, int *changed)
{
	for (uint32_t e = pos; g->elems[e].op != WK_GRAM_END; e++) {
		if (dist > r->horizon)
			return r->pass ? fp_put(fp, 9) : 0;
		if (r->pass == 0) {
			if (g->elems[e].op == WK_GRAM_BYTES) {
				dist++;
			} else {
				uint32_t c;
				if (canon(r, g->elems[e].arg, dist, &c, changed))
					return -1;
				uint64_t d = (uint64_t)dist + g->rule_minlen[g->elems[e].arg];
				dist = d > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)d;
			}
			continue;
		}
		if (g->elems[e].op == WK_GRAM_BYTES) {
			dist++;
			uint32_t w[8];
			memcpy(w, g->sets[g->elems[e].arg], 32);
			if (fp_put(fp, 1))
				return -1;
			for (int i = 0; i < 8; i++)
				if (fp_put(fp, w[i]))
					return -1;
		} else {
			uint32_t c, arg = g->elems[e].arg;
			if (canon(r, arg, dist, &c, changed) || fp_put(fp, 2) || fp_put(fp, c))
				return -1;
			uint64_t d = (uint64_t)dist + g->rule_minlen[arg];
			dist = d > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)d;
		}
	}
	return r->pass ? fp_put(fp, 3) : 0;
}

/* One pass over the frames of `local` and the rules they reach. */
static int fp_pass(const struct wk_gm *m, int32_t local, struct fp_rules *r, struct wk_mask_fpbuf *fp,
		   int *changed)
{
	const struct wk_gram *g = m->g;
	uint32_t n = m->st_n[local];
	if (r->pass && (fp_put(fp, n) || fp_put(fp, m->st_flags[local])))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = m->pool[m->st_off[local] + i];
		for (; x != WK_GM_NONE && x != WK_GM_BOTTOM; x = m->node_parent[x])
			if (fp_rest(g, m->node_pos[x], 0, r, fp, changed) || (r->pass && fp_put(fp, 4)))
				return -1;
		if (r->pass && fp_put(fp, x == WK_GM_BOTTOM ? 5 : 6))
			return -1;
	}
	for (uint32_t q = 0; q < r->n; q++) {
		uint32_t rule = r->id[q];
		if (r->pass && fp_put(fp, 7))
			return -1;
		if (r->dist[q] > r->horizon)
			continue;
		for (uint32_t a = g->rule_alt0[rule]; a < g->rule_alt0[rule] + g->rule_nalt[rule]; a++)
			if (g->alt_live[a] &&
			    (fp_rest(g, g->alts[a], r->dist[q], r, fp, changed) || (r->pass && fp_put(fp, 8))))
				return -1;
	}
	return 0;
}

int wk_mask_fp(const struct wk_gm *m, int32_t local, uint32_t horizon, struct wk_mask_fpbuf *fp,
	       uint64_t *hash)
{
	static _Thread_local struct fp_rules r; /* ~40 KiB: not on the stack */
	const struct wk_gram *g = m->g;
	r.n = 0;
	r.horizon = horizon;
	r.q_head = r.q_len = 0;
	memset(r.slot_rule, 0, sizeof(r.slot_rule));
	fp->n = 0;
	/* distances: the frames first, then every rule whose distance dropped */
	r.pass = 0;
	int changed = 0;
	uint32_t n = m->st_n[local];
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t x = m->pool[m->st_off[local] + i]; x != WK_GM_NONE && x != WK_GM_BOTTOM; x = m->node_parent[x])
			if (fp_rest(g, m->node_pos[x], 0, &r, fp, &changed))
				return -1;
	while (r.q_len) {
		uint32_t q = r.queue[r.q_head];
		r.q_head = (r.q_head + 1) % FP_MAX_RULES;
		r.q_len--;
		r.queued[q] = 0;
		if (r.dist[q] > r.horizon)
			continue;
		uint32_t rule = r.id[q];
		for (uint32_t a = g->rule_alt0[rule]; a < g->rule_alt0[rule] + g->rule_nalt[rule]; a++)
			if (g->alt_live[a] && fp_rest(g, g->alts[a], r.dist[q], &r, fp, &changed))
				return -1;
	}
	r.pass = 1;
	if (fp_pass(m, local, &r, fp, &changed))
		return -1;
	*hash = cm_fnv64(CM_FNV64_SEED, fp->v, fp->n * sizeof(uint32_t));
	return 0;
}

struct wk_mask_pool *wk_mask_pool_new(size_t cap_bytes)
{
	struct wk_mask_pool *p = cm_calloc(1, sizeof(*p));
	if (p)
		p->cap_bytes = cap_bytes;
	return p;
}

static void pool_drop(struct wk_mask_pool *p)
{
	for (uint32_t i = 0; i < p->n; i++) {
		cm_free(p->items[i].text);
		wk_mask_entry_clear(&p->items[i].e);
	}
	p->n = 0;
	p->used = 0;
	if (p->index)
		memset(p->index, 0, p->index_cap * sizeof(uint32_t));
}

void wk_mask_pool_free(struct wk_mask_pool *p)
{
	if (!p)
		return;
	pool_drop(p);
	cm_free(p->items);
	cm_free(p->index);
	cm_free(p);
}

static void *dup(const void *src, size_t n)
{
	void *d = cm_malloc(n ? n : 1);
	if (d && n)
		memcpy(d, src, n);
	return d;
}

/* Deep copy of an entry's arrays (`words` of the dense form). */
static int entry_copy(struct mk_entry *dst, const struct mk_entry *src, size_t words)
{
	*dst = *src;
	dst->acc = NULL;
	dst->bits = NULL;
	dst->u_tok = NULL;
	dst->u_k = NULL;
	dst->u_lcp = NULL;
	if (src->acc && !(dst->acc = dup(src->acc, (size_t)src->n_acc * sizeof(int32_t))))
		goto fail;
	if (src->bits && !(dst->bits = dup(src->bits, words * sizeof(uint32_t))))
		goto fail;
	if (src->n_u) {
		dst->u_tok = dup(src->u_tok, (size_t)src->n_u * sizeof(int32_t));
		dst->u_k = dup(src->u_k, (size_t)src->n_u * sizeof(uint16_t));
		dst->u_lcp = dup(src->u_lcp, (size_t)src->n_u * sizeof(uint16_t));
		if (!dst->u_tok || !dst->u_k || !dst->u_lcp)
			goto fail;
	}
	return 0;
fail:
	wk_mask_entry_clear(dst);
	return -1;
}

int wk_mask_pool_get(struct wk_mask_pool *p, uint64_t hash, const struct wk_mask_fpbuf *fp,
		     size_t words, struct mk_entry *out)
{
	if (!p->index_cap)
		return -1;
	for (uint32_t i = (uint32_t)hash & (p->index_cap - 1); p->index[i]; i = (i + 1) & (p->index_cap - 1)) {
		const struct pool_item *it = &p->items[p->index[i] - 1];
		if (it->hash == hash && it->n_text == fp->n &&
		    memcmp(it->text, fp->v, fp->n * sizeof(uint32_t)) == 0)
			return entry_copy(out, &it->e, words);
	}
	return -1;
}

void wk_mask_pool_put(struct wk_mask_pool *p, uint64_t hash, const struct wk_mask_fpbuf *fp,
		      size_t words, const struct mk_entry *e)
{
	size_t bytes = e->bytes + fp->n * sizeof(uint32_t) + sizeof(struct pool_item);
	if (bytes > p->cap_bytes)
		return;
	if (p->used + bytes > p->cap_bytes)
		pool_drop(p);
	if (p->n == p->cap) {
		uint32_t c = p->cap ? 2 * p->cap : 64;
		struct pool_item *n = cm_reallocarray(p->items, c, sizeof(*n));
		if (!n)
			return;
		p->items = n;
		p->cap = c;
	}
	if (2 * (p->n + 1) > p->index_cap) {
		uint32_t c = p->index_cap ? 2 * p->index_cap : 256;
		uint32_t *ix = cm_calloc(c, sizeof(uint32_t));
		if (!ix)
			return;
		for (uint32_t i = 0; i < p->n; i++) {
			uint32_t j = (uint32_t)p->items[i].hash & (c - 1);
			while (ix[j])
				j = (j + 1) & (c - 1);
			ix[j] = i + 1;
		}
		cm_free(p->index);
		p->index = ix;
		p->index_cap = c;
	}
	struct pool_item *it = &p->items[p->n];
	it->hash = hash;
	it->n_text = fp->n;
	it->text = dup(fp->v, fp->n * sizeof(uint32_t));
	if (!it->text)
		return;
	if (entry_copy(&it->e, e, words)) {
		cm_free(it->text);
		return;
	}
	uint32_t j = (uint32_t)hash & (p->index_cap - 1);
	while (p->index[j])
		j = (j + 1) & (p->index_cap - 1);
	p->index[j] = ++p->n;
	p->used += bytes;
}
