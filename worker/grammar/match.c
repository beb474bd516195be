/*
 * match.c - the pushdown matcher (match.h): hash-consed frames, interned
 * states, expansion of a position into the stacks whose top reads a byte,
 * and the per-(state, byte) transition cache.
 *
 * Expansion follows calls and returns without consuming input; a
 * (position, parent) pair seen twice in one expansion is skipped, which is
 * what makes nullable cycles (x?)* finite.  Left recursion is refused when
 * the grammar is built, so expansion always terminates.
 *
 * Owns: every table of struct wk_gm.  One thread at a time.
 */
#include "worker/grammar/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/hash.h"

void wk_gm_limits_default(struct wk_gm_limits *lim)
{
	lim->max_states = 1u << 20;
	lim->max_nodes = 4u << 20;
	lim->trans_bytes = 256u << 20;
}

static int grow32(uint32_t **p, uint32_t *cap, uint32_t need)
{
	if (need <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 1024;
	while (c < need)
		c *= 2;
	uint32_t *q = cm_reallocarray(*p, c, sizeof(uint32_t));
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

/* ---- frames ----------------------------------------------------------- */

static int node_rehash(struct wk_gm *m, uint32_t cap)
{
	uint32_t *h = cm_calloc(cap, sizeof(uint32_t));
	if (!h)
		return -1;
	for (uint32_t id = 0; id < m->n_nodes; id++) {
		uint64_t k = cm_fmix64(((uint64_t)m->node_pos[id] << 32) | m->node_parent[id]);
		uint32_t i = (uint32_t)k & (cap - 1);
		while (h[i])
			i = (i + 1) & (cap - 1);
		h[i] = id + 1;
	}
	cm_free(m->node_hash);
	m->node_hash = h;
	m->node_hash_cap = cap;
	return 0;
}

uint32_t wk_gm_node(struct wk_gm *m, uint32_t pos, uint32_t parent)
{
	if (2 * (m->n_nodes + 1) > m->node_hash_cap &&
	    node_rehash(m, m->node_hash_cap ? 2 * m->node_hash_cap : 4096))
		goto fail;
	uint64_t k = cm_fmix64(((uint64_t)pos << 32) | parent);
	uint32_t i = (uint32_t)k & (m->node_hash_cap - 1);
	for (; m->node_hash[i]; i = (i + 1) & (m->node_hash_cap - 1)) {
		uint32_t id = m->node_hash[i] - 1;
		if (m->node_pos[id] == pos && m->node_parent[id] == parent)
			return id;
	}
	if (m->n_nodes >= m->lim.max_nodes)
		goto fail;
	uint32_t cap = m->cap_nodes;
	if (grow32(&m->node_pos, &cap, m->n_nodes + 1))
		goto fail;
	cap = m->cap_nodes;
	if (grow32(&m->node_parent, &cap, m->n_nodes + 1))
		goto fail;
	m->cap_nodes = cap;
	m->node_pos[m->n_nodes] = pos;
	m->node_parent[m->n_nodes] = parent;
	m->node_hash[i] = m->n_nodes + 1;
	return m->n_nodes++;
fail:
	return UINT32_MAX;
}

/* ---- states ------------------------------------------------------------ */

static uint64_t state_key(const uint32_t *tops, uint32_t n, uint8_t flags)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ flags;
	for (uint32_t i = 0; i < n; i++)
		h = cm_fmix64(h ^ tops[i]) + i;
	return h;
}

static int state_rehash(struct wk_gm *m, uint32_t cap)
{
	uint32_t *h = cm_calloc(cap, sizeof(uint32_t));
	if (!h)
		return -1;
	for (uint32_t id = 0; id < m->n_states; id++) {
		uint64_t k = state_key(m->pool + m->st_off[id], m->st_n[id], m->st_flags[id]);
		uint32_t i = (uint32_t)k & (cap - 1);
		while (h[i])
			i = (i + 1) & (cap - 1);
		h[i] = id + 1;
	}
	cm_free(m->st_hash);
	m->st_hash = h;
	m->st_hash_cap = cap;
	return 0;
}

static void sort_u32(uint32_t *a, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = a[i], j = i;
		for (; j > 0 && a[j - 1] > v; j--)
			a[j] = a[j - 1];
		a[j] = v;
	}
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

int32_t wk_gm_state(struct wk_gm *m, uint32_t *tops, uint32_t n, uint8_t flags)
{
	if (n < 32)
		sort_u32(tops, n);
	else
		qsort(tops, n, sizeof(*tops), cmp_u32);
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (k == 0 || tops[k - 1] != tops[i])
			tops[k++] = tops[i];
	n = k;
	if (2 * (m->n_states + 1) > m->st_hash_cap &&
	    state_rehash(m, m->st_hash_cap ? 2 * m->st_hash_cap : 4096))
		goto fail;
	uint64_t key = state_key(tops, n, flags);
	uint32_t i = (uint32_t)key & (m->st_hash_cap - 1);
	for (; m->st_hash[i]; i = (i + 1) & (m->st_hash_cap - 1)) {
		uint32_t id = m->st_hash[i] - 1;
		if (m->st_n[id] == n && m->st_flags[id] == flags &&
		    (n == 0 || memcmp(m->pool + m->st_off[id], tops, n * sizeof(*tops)) == 0))
			return (int32_t)id;
	}
	if (m->n_states >= m->lim.max_states)
		goto fail;
	if (m->n_states == m->cap_states) {
		uint32_t c = m->cap_states ? 2 * m->cap_states : 1024;
		uint32_t *off = cm_reallocarray(m->st_off, c, sizeof(uint32_t));
		if (off)
			m->st_off = off;
		uint32_t *nn = cm_reallocarray(m->st_n, c, sizeof(uint32_t));
		if (nn)
			m->st_n = nn;
		uint8_t *fl = cm_realloc(m->st_flags, c);
		if (fl)
			m->st_flags = fl;
		int32_t **tr = cm_reallocarray(m->st_trans, c, sizeof(*tr));
		if (tr)
			m->st_trans = tr;
		if (!off || !nn || !fl || !tr)
			goto fail;
		m->cap_states = c;
	}
	if (m->n_pool + n > m->cap_pool) {
		size_t c = m->cap_pool ? 2 * m->cap_pool : 4096;
		while (c < m->n_pool + n)
			c *= 2;
		if (c > UINT32_MAX)
			goto fail;
		uint32_t *p = cm_reallocarray(m->pool, c, sizeof(uint32_t));
		if (!p)
			goto fail;
		m->pool = p;
		m->cap_pool = c;
	}
	uint32_t id = m->n_states++;
	m->st_off[id] = (uint32_t)m->n_pool;
	m->st_n[id] = n;
	m->st_flags[id] = flags;
	m->st_trans[id] = NULL;
	if (n)
		memcpy(m->pool + m->n_pool, tops, n * sizeof(*tops));
	m->n_pool += n;
	m->st_hash[i] = id + 1;
	return (int32_t)id;
fail:
	return WK_GM_ERROR;
}

/* ---- expansion ------------------------------------------------------------ */

static int seen_rehash(struct wk_gm *m, uint32_t cap)
{
	uint64_t *s = cm_calloc(cap, sizeof(uint64_t));
	uint32_t *gen = cm_calloc(cap, sizeof(uint32_t));
	if (!s || !gen) {
		cm_free(s);
		cm_free(gen);
		return -1;
	}
	for (uint32_t i = 0; i < m->seen_cap; i++) {
		if (m->seen_gen[i] != m->gen)
			continue;
		uint32_t j = (uint32_t)cm_fmix64(m->seen[i]) & (cap - 1);
		while (gen[j] == m->gen)
			j = (j + 1) & (cap - 1);
		s[j] = m->seen[i];
		gen[j] = m->gen;
	}
	cm_free(m->seen);
	cm_free(m->seen_gen);
	m->seen = s;
	m->seen_gen = gen;
	m->seen_cap = cap;
	return 0;
}

struct ex {
	uint32_t n_seen, n_work;
};

static void ex_begin(struct wk_gm *m, struct ex *x)
{
	m->n_tops = 0;
	m->flags = 0;
	if (++m->gen == 0) {
		memset(m->seen_gen, 0, m->seen_cap * sizeof(uint32_t));
		m->gen = 1;
	}
	x->n_seen = 0;
	x->n_work = 0;
}

static int ex_push(struct wk_gm *m, struct ex *x, uint32_t pos, uint32_t parent)
{
	uint32_t cap = m->cap_work;
	if (grow32(&m->work, &cap, 2 * (x->n_work + 1)))
		return -1;
	m->cap_work = cap;
	m->work[2 * x->n_work] = pos;
	m->work[2 * x->n_work + 1] = parent;
	x->n_work++;
	return 0;
}

/* 1 when (pos, parent) is new in this expansion, 0 when seen, -1 on error. */
static int ex_seen(struct wk_gm *m, struct ex *x, uint32_t pos, uint32_t parent)
{
	if (2 * (x->n_seen + 1) > m->seen_cap && seen_rehash(m, m->seen_cap ? 2 * m->seen_cap : 1024))
		return -1;
	uint64_t key = ((uint64_t)pos << 32) | parent;
	uint32_t i = (uint32_t)cm_fmix64(key) & (m->seen_cap - 1);
	for (; m->seen_gen[i] == m->gen; i = (i + 1) & (m->seen_cap - 1))
		if (m->seen[i] == key)
			return 0;
	m->seen[i] = key;
	m->seen_gen[i] = m->gen;
	x->n_seen++;
	return 1;
}

static int ex_run(struct wk_gm *m, struct ex *x)
{
	const struct wk_gram *g = m->g;
	while (x->n_work) {
		x->n_work--;
		uint32_t pos = m->work[2 * x->n_work], par = m->work[2 * x->n_work + 1];
		int fresh = ex_seen(m, x, pos, par);
		if (fresh < 0)
			return -1;
		if (!fresh)
			continue;
		struct wk_gram_elem e = g->elems[pos];
		if (e.op == WK_GRAM_END) {
			if (par == WK_GM_NONE)
				m->flags |= WK_GM_F_ACCEPT;
			else if (par == WK_GM_BOTTOM)
				m->flags |= WK_GM_F_POP;
			else if (ex_push(m, x, m->node_pos[par], m->node_parent[par]))
				return -1;
		} else if (e.op == WK_GRAM_BYTES) {
			uint32_t id = wk_gm_node(m, pos, par);
			uint32_t cap = m->cap_tops;
			if (id == UINT32_MAX || grow32(&m->tops, &cap, m->n_tops + 1))
				return -1;
			m->cap_tops = cap;
			m->tops[m->n_tops++] = id;
		} else {
			uint32_t r = e.arg, ret = pos + 1;
			uint32_t np = par;
			if (g->elems[ret].op != WK_GRAM_END && (np = wk_gm_node(m, ret, par)) == UINT32_MAX)
				return -1;
			for (uint32_t a = g->rule_alt0[r]; a < g->rule_alt0[r] + g->rule_nalt[r]; a++)
				if (g->alt_live[a] && ex_push(m, x, g->alts[a], np))
					return -1;
		}
	}
	return 0;
}

static int32_t ex_state(struct wk_gm *m)
{
	if (m->n_tops == 0 && m->flags == 0)
		return WK_GM_DEAD;
	return wk_gm_state(m, m->tops, m->n_tops, m->flags);
}

int32_t wk_gm_enter(struct wk_gm *m, uint32_t pos, uint32_t parent)
{
	struct ex x;
	ex_begin(m, &x);
	if (ex_push(m, &x, pos, parent) || ex_run(m, &x))
		return WK_GM_ERROR;
	return ex_state(m);
}

int32_t wk_gm_enter_rule(struct wk_gm *m, uint32_t rule, uint32_t parent)
{
	const struct wk_gram *g = m->g;
	struct ex x;
	ex_begin(m, &x);
	for (uint32_t a = g->rule_alt0[rule]; a < g->rule_alt0[rule] + g->rule_nalt[rule]; a++)
		if (g->alt_live[a] && ex_push(m, &x, g->alts[a], parent))
			return WK_GM_ERROR;
	if (ex_run(m, &x))
		return WK_GM_ERROR;
	return ex_state(m);
}

/* ---- public ---------------------------------------------------------------- */

struct wk_gm *wk_gm_new(const struct wk_gram *g, const struct wk_gm_limits *lim)
{
	struct wk_gm *m = cm_calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->g = g;
	if (lim)
		m->lim = *lim;
	else
		wk_gm_limits_default(&m->lim);
	m->start = WK_GM_ERROR;
	/* node 0 = NONE, node 1 = BOTTOM: never looked up by (pos, parent) */
	uint32_t cap = 0;
	if (grow32(&m->node_pos, &cap, 2) || (cap = 0, grow32(&m->node_parent, &cap, 2)))
		goto fail;
	m->cap_nodes = cap;
	m->node_pos[0] = m->node_pos[1] = UINT32_MAX;
	m->node_parent[0] = m->node_parent[1] = UINT32_MAX;
	m->n_nodes = 2;
	if (node_rehash(m, 4096) || seen_rehash(m, 1024))
		goto fail;
	/* the start: the root rule on the empty stack */
	m->start = wk_gm_enter_rule(m, g->root, WK_GM_NONE);
	if (m->start < 0)
		goto fail;
	return m;
fail:
	wk_gm_free(m);
	return NULL;
}

static void drop_trans(struct wk_gm *m)
{
	for (uint32_t i = 0; i < m->n_states; i++) {
		cm_free(m->st_trans[i]);
		m->st_trans[i] = NULL;
	}
	m->trans_bytes = 0;
}

void wk_gm_free(struct wk_gm *m)
{
	if (!m)
		return;
	if (m->st_trans)
		drop_trans(m);
	cm_free(m->st_trans);
	cm_free(m->node_pos);
	cm_free(m->node_parent);
	cm_free(m->node_hash);
	cm_free(m->st_off);
	cm_free(m->st_n);
	cm_free(m->st_flags);
	cm_free(m->st_hash);
	cm_free(m->pool);
	cm_free(m->tops);
	cm_free(m->work);
	cm_free(m->seen);
	cm_free(m->seen_gen);
	cm_free(m);
}

const struct wk_gram *wk_gm_grammar(const struct wk_gm *m)
{
	return m->g;
}

int32_t wk_gm_start(struct wk_gm *m)
{
	return m->start;
}

int32_t wk_gm_step(struct wk_gm *m, int32_t s, uint8_t byte)
{
	if (s < 0)
		return s;
	int32_t *t = m->st_trans[s];
	if (t && t[byte])
		return t[byte] > 0 ? t[byte] - 1 : WK_GM_DEAD;
	const struct wk_gram *g = m->g;
	struct ex x;
	ex_begin(m, &x);
	uint32_t off = m->st_off[s], n = m->st_n[s];
	for (uint32_t i = 0; i < n; i++) {
		uint32_t top = m->pool[off + i];
		uint32_t pos = m->node_pos[top];
		if (wk_gram_set_has(g->sets[g->elems[pos].arg], byte) &&
		    ex_push(m, &x, pos + 1, m->node_parent[top]))
			return WK_GM_ERROR;
	}
	if (ex_run(m, &x))
		return WK_GM_ERROR;
	int32_t r = ex_state(m);
	if (r == WK_GM_ERROR)
		return r;
	if (!m->st_trans[s]) {
		if (m->trans_bytes + 256 * sizeof(int32_t) > m->lim.trans_bytes)
			drop_trans(m);
		m->st_trans[s] = cm_calloc(256, sizeof(int32_t));
		if (!m->st_trans[s])
			return r; /* uncached, still right */
		m->trans_bytes += 256 * sizeof(int32_t);
	}
	m->st_trans[s][byte] = r >= 0 ? r + 1 : -1;
	return r;
}

int32_t wk_gm_steps(struct wk_gm *m, int32_t s, const void *bytes, size_t len)
{
	const uint8_t *p = bytes;
	for (size_t i = 0; i < len && s >= 0; i++)
		s = wk_gm_step(m, s, p[i]);
	return s;
}

int wk_gm_accepting(const struct wk_gm *m, int32_t s)
{
	return s >= 0 && (m->st_flags[s] & WK_GM_F_ACCEPT);
}

uint32_t wk_gm_n_states(const struct wk_gm *m)
{
	return m->n_states;
}

uint32_t wk_gm_n_nodes(const struct wk_gm *m)
{
	return m->n_nodes;
}
