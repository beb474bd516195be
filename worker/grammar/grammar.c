/*
 * grammar.c - the grammar builder (expressions in an arena) and its
 * lowering to the byte-level form of grammar.h, with the checks a matcher
 * relies on (defined rules, no left recursion, live alternatives).
 *
 * Owns: the builder's arena and rule table; the lowered grammar's arrays.
 * Pure computation, any thread (one builder per thread).
 */
#include "worker/grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/arena.h"
#include "common/hash.h"
#include "worker/grammar/internal.h"

struct gb_rule {
	char *name;
	int named;
	struct wk_gx *body;
};

struct wk_gram_b {
	struct wk_gram_limits lim;
	struct cm_arena *arena;
	struct gb_rule *rules;
	uint32_t n_rules, cap_rules;
	int broken;
	struct wk_gx empty_node, nothing_node;
};

void wk_gram_limits_default(struct wk_gram_limits *lim)
{
	lim->max_rules = 100000;
	lim->max_elems = 2000000;
	lim->arena_bytes = 256u << 20;
}

struct wk_gram_b *wk_gram_b_new(const struct wk_gram_limits *lim)
{
	struct wk_gram_b *b = cm_calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	if (lim)
		b->lim = *lim;
	else
		wk_gram_limits_default(&b->lim);
	b->arena = cm_arena_new(64u << 10, b->lim.arena_bytes);
	if (!b->arena) {
		cm_free(b);
		return NULL;
	}
	b->empty_node.kind = GX_EMPTY;
	b->nothing_node.kind = GX_NOTHING;
	return b;
}

void wk_gram_b_free(struct wk_gram_b *b)
{
	if (!b)
		return;
	cm_arena_free(b->arena);
	cm_free(b->rules);
	cm_free(b);
}

int wk_gram_b_broken(const struct wk_gram_b *b)
{
	return b->broken;
}

static void *gb_alloc(struct wk_gram_b *b, size_t n)
{
	void *p = b->broken ? NULL : cm_arena_calloc(b->arena, 1, n);
	if (!p)
		b->broken = 1;
	return p;
}

uint32_t wk_gram_rule(struct wk_gram_b *b, const char *name, int named)
{
	if (b->broken)
		return UINT32_MAX;
	if (b->n_rules >= b->lim.max_rules) {
		b->broken = 1;
		return UINT32_MAX;
	}
	if (b->n_rules == b->cap_rules) {
		uint32_t cap = b->cap_rules ? b->cap_rules * 2 : 64;
		struct gb_rule *r = cm_reallocarray(b->rules, cap, sizeof(*r));
		if (!r) {
			b->broken = 1;
			return UINT32_MAX;
		}
		b->rules = r;
		b->cap_rules = cap;
	}
	char *nm = cm_arena_strndup(b->arena, name, strlen(name));
	if (!nm) {
		b->broken = 1;
		return UINT32_MAX;
	}
	b->rules[b->n_rules] = (struct gb_rule){ .name = nm, .named = named, .body = NULL };
	return b->n_rules++;
}

void wk_gram_set_body(struct wk_gram_b *b, uint32_t rule, struct wk_gx *body)
{
	if (b->broken || rule >= b->n_rules || !body) {
		b->broken = 1;
		return;
	}
	b->rules[rule].body = body;
}

uint32_t wk_gram_find_rule(const struct wk_gram_b *b, const char *name)
{
	for (uint32_t i = 0; i < b->n_rules; i++)
		if (b->rules[i].named && strcmp(b->rules[i].name, name) == 0)
			return i;
	return UINT32_MAX;
}

uint32_t wk_gram_n_rules(const struct wk_gram_b *b)
{
	return b->n_rules;
}

int wk_gram_has_body(const struct wk_gram_b *b, uint32_t rule)
{
	return rule < b->n_rules && b->rules[rule].body != NULL;
}

const char *wk_gram_rule_name(const struct wk_gram_b *b, uint32_t rule)
{
	return rule < b->n_rules ? b->rules[rule].name : "";
}

/* ---- expressions -------------------------------------------------------- */

struct wk_gx *wk_gx_empty(struct wk_gram_b *b)
{
	return b->broken ? NULL : &b->empty_node;
}

struct wk_gx *wk_gx_nothing(struct wk_gram_b *b)
{
	return b->broken ? NULL : &b->nothing_node;
}

int wk_gx_is_nothing(const struct wk_gx *x)
{
	return x && x->kind == GX_NOTHING;
}

static struct wk_gx *gx_new(struct wk_gram_b *b, uint8_t kind)
{
	struct wk_gx *x = gb_alloc(b, sizeof(*x));
	if (x)
		x->kind = kind;
	return x;
}

struct wk_gx *wk_gx_lit(struct wk_gram_b *b, const void *bytes, size_t len)
{
	if (len == 0)
		return wk_gx_empty(b);
	if (len > UINT32_MAX) {
		b->broken = 1;
		return NULL;
	}
	struct wk_gx *x = gx_new(b, GX_LIT);
	if (!x || !(x->u.lit = gb_alloc(b, len)))
		return NULL;
	memcpy(x->u.lit, bytes, len);
	x->n = (uint32_t)len;
	return x;
}

struct wk_gx *wk_gx_str(struct wk_gram_b *b, const char *s)
{
	return wk_gx_lit(b, s, strlen(s));
}

static int cmp_pair(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorted, merged, clipped to Unicode scalar values. */
static size_t class_normalise(uint32_t *r, size_t n)
{
	qsort(r, n, 2 * sizeof(uint32_t), cmp_pair);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t lo = r[2 * i], hi = r[2 * i + 1];
		if (hi > 0x10FFFF)
			hi = 0x10FFFF;
		if (lo > hi)
			continue;
		if (m && lo <= r[2 * m - 1] + 1) {
			if (hi > r[2 * m - 1])
				r[2 * m - 1] = hi;
			continue;
		}
		r[2 * m] = lo;
		r[2 * m + 1] = hi;
		m++;
	}
	return m;
}

struct wk_gx *wk_gx_class(struct wk_gram_b *b, const uint32_t *ranges, size_t n, int negated)
{
	if (b->broken)
		return NULL;
	/* room for the complement and for the surrogate cut */
	uint32_t *r = gb_alloc(b, (2 * n + 4) * 2 * sizeof(uint32_t));
	if (!r)
		return NULL;
	if (n)
		memcpy(r, ranges, n * 2 * sizeof(uint32_t));
	size_t m = n ? class_normalise(r, n) : 0;
	if (negated) {
		uint32_t *c = gb_alloc(b, (m + 2) * 2 * sizeof(uint32_t));
		if (!c)
			return NULL;
		size_t k = 0;
		uint32_t next = 0;
		for (size_t i = 0; i < m; i++) {
			if (r[2 * i] > next) {
				c[2 * k] = next;
				c[2 * k + 1] = r[2 * i] - 1;
				k++;
			}
			next = r[2 * i + 1] + 1;
		}
		if (next <= 0x10FFFF) {
			c[2 * k] = next;
			c[2 * k + 1] = 0x10FFFF;
			k++;
		}
		memcpy(r, c, k * 2 * sizeof(uint32_t));
		m = k;
	}
	/* cut out the surrogates D800..DFFF */
	size_t k = 0;
	uint32_t *o = gb_alloc(b, (m + 1) * 2 * sizeof(uint32_t));
	if (!o)
		return NULL;
	for (size_t i = 0; i < m; i++) {
		uint32_t lo = r[2 * i], hi = r[2 * i + 1];
		if (hi < 0xD800 || lo > 0xDFFF) {
			o[2 * k] = lo, o[2 * k + 1] = hi, k++;
			continue;
		}
		if (lo < 0xD800)
			o[2 * k] = lo, o[2 * k + 1] = 0xD7FF, k++;
		if (hi > 0xDFFF)
			o[2 * k] = 0xE000, o[2 * k + 1] = hi, k++;
	}
	if (k == 0)
		return wk_gx_nothing(b);
	struct wk_gx *x = gx_new(b, GX_CLASS);
	if (!x)
		return NULL;
	x->u.ranges = o;
	x->n = (uint32_t)k;
	return x;
}

struct wk_gx *wk_gx_cp(struct wk_gram_b *b, uint32_t lo, uint32_t hi)
{
	uint32_t r[2] = { lo, hi };
	return wk_gx_class(b, r, 1, 0);
}

struct wk_gx *wk_gx_bytes(struct wk_gram_b *b, const uint8_t set[32])
{
	int any = 0;
	for (int i = 0; i < 32; i++)
		any |= set[i];
	if (!any)
		return wk_gx_nothing(b);
	struct wk_gx *x = gx_new(b, GX_BYTES);
	if (!x || !(x->u.set = gb_alloc(b, 32)))
		return NULL;
	memcpy(x->u.set, set, 32);
	return x;
}

struct wk_gx *wk_gx_ref(struct wk_gram_b *b, uint32_t rule)
{
	if (rule >= b->n_rules) {
		b->broken = 1;
		return NULL;
	}
	struct wk_gx *x = gx_new(b, GX_REF);
	if (x)
		x->u.rule = rule;
	return x;
}

static struct wk_gx *gx_list(struct wk_gram_b *b, uint8_t kind, struct wk_gx *const *kids, size_t n)
{
	if (b->broken)
		return NULL;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (!kids[i])
			return NULL;
		if (kind == GX_SEQ && kids[i]->kind == GX_NOTHING)
			return wk_gx_nothing(b);
		if (kind == GX_SEQ && kids[i]->kind == GX_EMPTY)
			continue;
		if (kind == GX_ALT && kids[i]->kind == GX_NOTHING)
			continue;
		m++;
	}
	if (m == 0)
		return kind == GX_SEQ ? wk_gx_empty(b) : wk_gx_nothing(b);
	struct wk_gx *x = gx_new(b, kind);
	if (!x || !(x->u.kids = gb_alloc(b, m * sizeof(*x->u.kids))))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if ((kind == GX_SEQ && kids[i]->kind == GX_EMPTY) ||
		    (kind == GX_ALT && kids[i]->kind == GX_NOTHING))
			continue;
		x->u.kids[x->n++] = kids[i];
	}
	if (x->n == 1)
		return x->u.kids[0];
	return x;
}

struct wk_gx *wk_gx_seq(struct wk_gram_b *b, struct wk_gx *const *kids, size_t n)
{
	return gx_list(b, GX_SEQ, kids, n);
}

struct wk_gx *wk_gx_alt(struct wk_gram_b *b, struct wk_gx *const *kids, size_t n)
{
	return gx_list(b, GX_ALT, kids, n);
}

struct wk_gx *wk_gx_seq2(struct wk_gram_b *b, struct wk_gx *x, struct wk_gx *y)
{
	struct wk_gx *k[2] = { x, y };
	return wk_gx_seq(b, k, 2);
}

struct wk_gx *wk_gx_alt2(struct wk_gram_b *b, struct wk_gx *x, struct wk_gx *y)
{
	struct wk_gx *k[2] = { x, y };
	return wk_gx_alt(b, k, 2);
}

struct wk_gx *wk_gx_rep(struct wk_gram_b *b, struct wk_gx *x, uint32_t min, uint32_t max)
{
	if (!x || b->broken)
		return NULL;
	if (max < min)
		return wk_gx_nothing(b);
	if (max == 0 || x->kind == GX_EMPTY)
		return wk_gx_empty(b);
	if (x->kind == GX_NOTHING)
		return min == 0 ? wk_gx_empty(b) : wk_gx_nothing(b);
	if (min == 1 && max == 1)
		return x;
	struct wk_gx *r = gx_new(b, GX_REP);
	if (!r)
		return NULL;
	r->u.kid = x;
	r->min = min;
	r->max = max;
	return r;
}

struct wk_gx *wk_gx_opt(struct wk_gram_b *b, struct wk_gx *x)
{
	return wk_gx_rep(b, x, 0, 1);
}

/* ---- lowering ------------------------------------------------------------ */

struct lw {
	struct wk_gram_b *b;
	struct wk_gram *g;
	uint32_t cap_elems, cap_sets, cap_alts, cap_rules;
	uint32_t *queue, n_queue, cap_queue, q_head;
	uint8_t *queued;  /* per builder rule */
	uint32_t *set_hash; /* open addressing over sets, index + 1 */
	uint32_t set_hash_cap;
	uint32_t nothing_rule; /* +1 */
	char *err;
	size_t err_len;
	enum cm_status st;
};

static int lw_fail(struct lw *L, enum cm_status st, const char *msg)
{
	if (L->st == CM_OK) {
		L->st = st;
		cm_fail(L->err, L->err_len, st, "%s", msg);
	}
	return -1;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	void *q = cm_reallocarray(*p, c, size);
	if (!q)
		return -1;
	*p = q;
	*cap = c;
	return 0;
}

static int lw_set(struct lw *L, const uint8_t set[32], uint32_t *idx)
{
	struct wk_gram *g = L->g;
	if (L->set_hash_cap < 2 * (g->n_sets + 1)) {
		uint32_t cap = L->set_hash_cap ? L->set_hash_cap * 2 : 1024;
		uint32_t *h = cm_calloc(cap, sizeof(*h));
		if (!h)
			return lw_fail(L, CM_ENOMEM, "out of memory");
		for (uint32_t i = 0; i < g->n_sets; i++) {
			uint32_t k = (uint32_t)cm_fnv64(CM_FNV64_SEED, g->sets[i], 32) & (cap - 1);
			while (h[k])
				k = (k + 1) & (cap - 1);
			h[k] = i + 1;
		}
		cm_free(L->set_hash);
		L->set_hash = h;
		L->set_hash_cap = cap;
	}
	uint32_t k = (uint32_t)cm_fnv64(CM_FNV64_SEED, set, 32) & (L->set_hash_cap - 1);
	while (L->set_hash[k]) {
		if (memcmp(g->sets[L->set_hash[k] - 1], set, 32) == 0) {
			*idx = L->set_hash[k] - 1;
			return 0;
		}
		k = (k + 1) & (L->set_hash_cap - 1);
	}
	if (grow((void **)&g->sets, &L->cap_sets, g->n_sets + 1, 32))
		return lw_fail(L, CM_ENOMEM, "out of memory");
	memcpy(g->sets[g->n_sets], set, 32);
	L->set_hash[k] = g->n_sets + 1;
	*idx = g->n_sets++;
	return 0;
}

static int lw_emit(struct lw *L, uint32_t op, uint32_t arg, uint32_t rule)
{
	struct wk_gram *g = L->g;
	if (g->n_elems >= L->b->lim.max_elems)
		return lw_fail(L, CM_ELIMIT, "grammar too large: more elements than worker.grammar_max_elems");
	if (g->n_elems + 1 > L->cap_elems) {
		uint32_t c1 = L->cap_elems, c2 = L->cap_elems;
		if (grow((void **)&g->elems, &c1, g->n_elems + 1, sizeof(*g->elems)) ||
		    grow((void **)&g->elem_rule, &c2, g->n_elems + 1, sizeof(*g->elem_rule)))
			return lw_fail(L, CM_ENOMEM, "out of memory");
		L->cap_elems = c1;
	}
	g->elems[g->n_elems] = (struct wk_gram_elem){ .op = op, .arg = arg };
	g->elem_rule[g->n_elems] = rule;
	g->n_elems++;
	return 0;
}

static int lw_byte_set(struct lw *L, const uint8_t set[32], uint32_t rule)
{
	uint32_t idx;
	if (lw_set(L, set, &idx))
		return -1;
	return lw_emit(L, WK_GRAM_BYTES, idx, rule);
}

/* Per-rule arrays sized to the builder's rule table (zero-filled). */
static int lw_sync(struct lw *L)
{
	uint32_t need = L->b->cap_rules, have = L->cap_rules;
	if (need <= have)
		return 0;
	struct wk_gram *g = L->g;
	uint8_t *q = cm_realloc(L->queued, need);
	if (q)
		L->queued = q;
	uint32_t *a0 = cm_reallocarray(g->rule_alt0, need, sizeof(uint32_t));
	if (a0)
		g->rule_alt0 = a0;
	uint32_t *na = cm_reallocarray(g->rule_nalt, need, sizeof(uint32_t));
	if (na)
		g->rule_nalt = na;
	if (!q || !a0 || !na)
		return lw_fail(L, CM_ENOMEM, "out of memory");
	memset(q + have, 0, need - have);
	memset(a0 + have, 0, (need - have) * sizeof(uint32_t));
	memset(na + have, 0, (need - have) * sizeof(uint32_t));
	L->cap_rules = need;
	return 0;
}

static int lw_enqueue(struct lw *L, uint32_t r)
{
	struct wk_gram_b *b = L->b;
	if (r >= b->n_rules)
		return lw_fail(L, CM_EINTERNAL, "rule index out of range");
	if (!b->rules[r].body) {
		char m[160];
		snprintf(m, sizeof(m), "rule '%.100s' is used but not defined", b->rules[r].name);
		return lw_fail(L, CM_EINVAL, m);
	}
	if (lw_sync(L))
		return -1;
	if (L->queued[r] == 2)
		return 0;
	L->queued[r] = 2;
	if (grow((void **)&L->queue, &L->cap_queue, L->n_queue + 1, sizeof(*L->queue)))
		return lw_fail(L, CM_ENOMEM, "out of memory");
	L->queue[L->n_queue++] = r;
	return 0;
}

/* A new builder rule with body `body`, queued for lowering. */
static int lw_anon(struct lw *L, struct wk_gx *body, uint32_t *rule)
{
	uint32_t r = wk_gram_rule(L->b, "", 0);
	if (r == UINT32_MAX)
		return lw_fail(L, L->b->n_rules >= L->b->lim.max_rules ? CM_ELIMIT : CM_ENOMEM,
			       L->b->n_rules >= L->b->lim.max_rules
				       ? "grammar too large: more rules than worker.grammar_max_rules"
				       : "out of memory");
	L->b->rules[r].body = body;
	*rule = r;
	return lw_enqueue(L, r);
}

/* UTF-8 byte sequences for code points [lo, hi] of one encoded length. */
static int utf8_len(uint32_t c)
{
	return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
}

static void utf8_put(uint32_t c, uint8_t *o)
{
	int n = utf8_len(c);
	if (n == 1) {
		o[0] = (uint8_t)c;
	} else if (n == 2) {
		o[0] = (uint8_t)(0xC0 | (c >> 6));
		o[1] = (uint8_t)(0x80 | (c & 0x3F));
	} else if (n == 3) {
		o[0] = (uint8_t)(0xE0 | (c >> 12));
		o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
		o[2] = (uint8_t)(0x80 | (c & 0x3F));
	} else {
		o[0] = (uint8_t)(0xF0 | (c >> 18));
		o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
		o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
		o[3] = (uint8_t)(0x80 | (c & 0x3F));
	}
}

struct seqs {
	uint8_t lo[64][4], hi[64][4], len[64];
	int n;
};

static void utf8_split(uint32_t lo, uint32_t hi, struct seqs *s)
{
	if (lo > hi || s->n >= 64)
		return;
	static const uint32_t bounds[] = { 0x7F, 0x7FF, 0xFFFF };
	for (int i = 0; i < 3; i++) {
		if (lo <= bounds[i] && hi > bounds[i]) {
			utf8_split(lo, bounds[i], s);
			utf8_split(bounds[i] + 1, hi, s);
			return;
		}
	}
	int n = utf8_len(lo);
	for (int i = 1; i < n; i++) {
		uint32_t m = (1u << (6 * i)) - 1;
		if ((lo & ~m) != (hi & ~m)) {
			if ((lo & m) != 0) {
				utf8_split(lo, lo | m, s);
				utf8_split((lo | m) + 1, hi, s);
				return;
			}
			if ((hi & m) != m) {
				utf8_split(lo, (hi & ~m) - 1, s);
				utf8_split(hi & ~m, hi, s);
				return;
			}
		}
	}
	utf8_put(lo, s->lo[s->n]);
	utf8_put(hi, s->hi[s->n]);
	s->len[s->n] = (uint8_t)n;
	s->n++;
}

static void set_range(uint8_t set[32], unsigned lo, unsigned hi)
{
	for (unsigned c = lo; c <= hi; c++)
		set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

static int lw_seq(struct lw *L, struct wk_gx *x, uint32_t rule);

/* A class over code points: one byte set when ASCII, else a rule. */
static int lw_class(struct lw *L, struct wk_gx *x, uint32_t rule)
{
	uint8_t set[32] = { 0 };
	if (x->u.ranges[2 * (x->n - 1) + 1] < 0x80) {
		for (uint32_t i = 0; i < x->n; i++)
			set_range(set, x->u.ranges[2 * i], x->u.ranges[2 * i + 1]);
		return lw_byte_set(L, set, rule);
	}
	if (!x->anon) {
		struct seqs s = { .n = 0 };
		for (uint32_t i = 0; i < x->n; i++)
			utf8_split(x->u.ranges[2 * i], x->u.ranges[2 * i + 1], &s);
		if (s.n >= 64)
			return lw_fail(L, CM_ELIMIT, "character class too complex");
		struct wk_gx *alts[64];
		for (int i = 0; i < s.n; i++) {
			struct wk_gx *parts[4];
			for (int j = 0; j < s.len[i]; j++) {
				uint8_t bs[32] = { 0 };
				set_range(bs, s.lo[i][j], s.hi[i][j]);
				parts[j] = wk_gx_bytes(L->b, bs);
			}
			alts[i] = wk_gx_seq(L->b, parts, s.len[i]);
		}
		struct wk_gx *body = wk_gx_alt(L->b, alts, (size_t)s.n);
		uint32_t r;
		if (!body)
			return lw_fail(L, CM_ENOMEM, "out of memory");
		if (lw_anon(L, body, &r))
			return -1;
		x->anon = r + 1;
	}
	return lw_emit(L, WK_GRAM_RULE, x->anon - 1, rule);
}

/* The rule standing for x (made once per node). */
static int lw_rule_for(struct lw *L, struct wk_gx *x, uint32_t *r)
{
	if (x->kind == GX_REF) {
		*r = x->u.rule;
		return lw_enqueue(L, *r);
	}
	if (!x->anon) {
		uint32_t a;
		if (lw_anon(L, x, &a))
			return -1;
		x->anon = a + 1;
	}
	*r = x->anon - 1;
	return 0;
}

static int is_small(const struct wk_gx *x)
{
	/* a class lowers to one element (a byte set, or a call of its own rule) */
	return x->kind == GX_BYTES || x->kind == GX_REF || (x->kind == GX_LIT && x->n <= 8) ||
	       x->kind == GX_CLASS;
}

static int lw_rep(struct lw *L, struct wk_gx *x, uint32_t rule)
{
	struct wk_gram_b *b = L->b;
	struct wk_gx *kid = x->u.kid;
	uint32_t kr = UINT32_MAX;
	if (!is_small(kid) && lw_rule_for(L, kid, &kr))
		return -1;
	struct wk_gx *k = kr == UINT32_MAX ? kid : wk_gx_ref(b, kr);
	if (!k)
		return lw_fail(L, CM_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < x->min; i++)
		if (lw_seq(L, k, rule))
			return -1;
	if (x->max == x->min)
		return 0;
	if (x->max == WK_GRAM_INF) {
		/* L ::= k L | e */
		uint32_t lr = wk_gram_rule(b, "", 0);
		if (lr == UINT32_MAX)
			return lw_fail(L, CM_ELIMIT, "grammar too large: more rules than worker.grammar_max_rules");
		struct wk_gx *body = wk_gx_alt2(b, wk_gx_seq2(b, k, wk_gx_ref(b, lr)), wk_gx_empty(b));
		if (!body)
			return lw_fail(L, CM_ENOMEM, "out of memory");
		b->rules[lr].body = body;
		if (lw_enqueue(L, lr))
			return -1;
		return lw_emit(L, WK_GRAM_RULE, lr, rule);
	}
	/* O_1 ::= k | e ; O_j ::= k O_{j-1} | e */
	uint32_t prev = UINT32_MAX;
	for (uint32_t j = 1; j <= x->max - x->min; j++) {
		struct wk_gx *tail = prev == UINT32_MAX ? k : wk_gx_seq2(b, k, wk_gx_ref(b, prev));
		struct wk_gx *body = wk_gx_alt2(b, tail, wk_gx_empty(b));
		if (!body)
			return lw_fail(L, CM_ENOMEM, "out of memory");
		if (lw_anon(L, body, &prev))
			return -1;
	}
	return lw_emit(L, WK_GRAM_RULE, prev, rule);
}

static int lw_seq(struct lw *L, struct wk_gx *x, uint32_t rule)
{
	uint32_t r;
	switch (x->kind) {
	case GX_EMPTY:
		return 0;
	case GX_NOTHING:
		if (!L->nothing_rule) {
			uint32_t nr = wk_gram_rule(L->b, "", 0);
			if (nr == UINT32_MAX)
				return lw_fail(L, CM_ELIMIT, "grammar too large");
			L->nothing_rule = nr + 1;
			/* a rule without alternatives: never live */
			L->b->rules[nr].body = &L->b->nothing_node;
			if (lw_enqueue(L, nr))
				return -1;
		}
		return lw_emit(L, WK_GRAM_RULE, L->nothing_rule - 1, rule);
	case GX_LIT:
		for (uint32_t i = 0; i < x->n; i++) {
			uint8_t set[32] = { 0 };
			set_range(set, x->u.lit[i], x->u.lit[i]);
			if (lw_byte_set(L, set, rule))
				return -1;
		}
		return 0;
	case GX_BYTES:
		return lw_byte_set(L, x->u.set, rule);
	case GX_CLASS:
		return lw_class(L, x, rule);
	case GX_REF:
		if (lw_enqueue(L, x->u.rule))
			return -1;
		return lw_emit(L, WK_GRAM_RULE, x->u.rule, rule);
	case GX_SEQ:
		for (uint32_t i = 0; i < x->n; i++)
			if (lw_seq(L, x->u.kids[i], rule))
				return -1;
		return 0;
	case GX_ALT:
		if (lw_rule_for(L, x, &r))
			return -1;
		return lw_emit(L, WK_GRAM_RULE, r, rule);
	case GX_REP:
		return lw_rep(L, x, rule);
	}
	return lw_fail(L, CM_EINTERNAL, "unknown expression");
}

static int lw_rule(struct lw *L, uint32_t r)
{
	struct wk_gram *g = L->g;
	struct wk_gx *body = L->b->rules[r].body;
	struct wk_gx *one[1] = { body };
	struct wk_gx **alts = one;
	uint32_t n = 1;
	if (body->kind == GX_ALT) {
		alts = body->u.kids;
		n = body->n;
	} else if (body->kind == GX_NOTHING) {
		n = 0;
	}
	g->rule_alt0[r] = g->n_alts;
	g->rule_nalt[r] = n;
	for (uint32_t i = 0; i < n; i++) {
		if (grow((void **)&g->alts, &L->cap_alts, g->n_alts + 1, sizeof(*g->alts)))
			return lw_fail(L, CM_ENOMEM, "out of memory");
		/* alternatives are contiguous: reserve them first */
		g->n_alts++;
	}
	for (uint32_t i = 0; i < n; i++) {
		g->alts[g->rule_alt0[r] + i] = g->n_elems;
		if (lw_seq(L, alts[i], r) || lw_emit(L, WK_GRAM_END, 0, r))
			return -1;
	}
	return 0;
}

enum cm_status wk_gram_build(struct wk_gram_b *b, uint32_t root, struct wk_gram **out,
			     char *err, size_t err_len)
{
	*out = NULL;
	if (b->broken)
		return cm_fail(err, err_len, b->n_rules >= b->lim.max_rules ? CM_ELIMIT : CM_ENOMEM,
			       b->n_rules >= b->lim.max_rules
				       ? "grammar too large: more rules than worker.grammar_max_rules"
				       : "out of memory (or grammar larger than its memory limit)");
	struct wk_gram *g = cm_calloc(1, sizeof(*g));
	if (!g)
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	struct lw L = { .b = b, .g = g, .err = err, .err_len = err_len, .st = CM_OK };
	enum cm_status st;
	if (lw_enqueue(&L, root) == 0) {
		while (L.q_head < L.n_queue && L.st == CM_OK)
			if (lw_rule(&L, L.queue[L.q_head++]))
				break;
	}
	if (L.st == CM_OK && b->broken)
		lw_fail(&L, CM_ELIMIT, "grammar too large (rules or memory)");
	if (L.st != CM_OK) {
		st = L.st;
		goto out;
	}
	g->n_rules = b->n_rules;
	g->root = root;
	g->alt_live = cm_calloc(g->n_alts + 1, 1);
	g->rule_named = cm_calloc(g->n_rules, 1);
	g->rule_nullable = cm_calloc(g->n_rules + 1, 1);
	g->rule_minlen = cm_calloc(g->n_rules + 1, sizeof(uint32_t));
	g->rule_names = cm_calloc(g->n_rules, sizeof(char *));
	if (!g->alt_live || !g->rule_named || !g->rule_nullable || !g->rule_minlen || !g->rule_names) {
		st = cm_fail(err, err_len, CM_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t r = 0; r < g->n_rules; r++) {
		g->rule_named[r] = (uint8_t)b->rules[r].named;
		g->rule_names[r] = cm_strdup(b->rules[r].name);
		if (!g->rule_names[r]) {
			st = cm_fail(err, err_len, CM_ENOMEM, "out of memory");
			goto out;
		}
	}
	st = wk_gram_check(g, err, err_len);
	if (st != CM_OK)
		goto out;
	uint64_t h = CM_FNV64_SEED;
	h = cm_fnv64(h, &g->root, sizeof(g->root));
	h = cm_fnv64(h, g->elems, g->n_elems * sizeof(*g->elems));
	h = cm_fnv64(h, g->sets, g->n_sets * 32u);
	h = cm_fnv64(h, g->alts, g->n_alts * sizeof(*g->alts));
	h = cm_fnv64(h, g->alt_live, g->n_alts);
	g->hash = h;
	*out = g;
	g = NULL;
out:
	cm_free(L.queue);
	cm_free(L.queued);
	cm_free(L.set_hash);
	wk_gram_free(g);
	return st;
}

void wk_gram_free(struct wk_gram *g)
{
	if (!g)
		return;
	if (g->rule_names)
		for (uint32_t r = 0; r < g->n_rules; r++)
			cm_free(g->rule_names[r]);
	cm_free(g->rule_names);
	cm_free(g->rule_named);
	cm_free(g->rule_nullable);
	cm_free(g->rule_minlen);
	cm_free(g->elems);
	cm_free(g->sets);
	cm_free(g->rule_alt0);
	cm_free(g->rule_nalt);
	cm_free(g->alts);
	cm_free(g->alt_live);
	cm_free(g->elem_rule);
	cm_free(g);
}
