/*
 * length.c - a pattern intersected with a length range: the strings of
 * L(x) with lo..hi code points (JSON Schema's pattern or format together
 * with minLength / maxLength), exactly.
 *
 * x is a pattern's expression (regex.c with a class function that makes
 * plain CLASS nodes: one code point each; LIT nodes count their code
 * points).  Its position automaton (Glushkov: one position per atom,
 * bounded repetitions unrolled) is walked in product with a counter of
 * code points (0..hi, or saturating at lo when hi is unbounded); every
 * reachable (position, count) becomes a rule "the atom, then what may
 * follow", accepting where the position ends the pattern and the count is
 * in range.  Each atom is written through the caller's class function
 * (JSON escapes for a string's inside).  Bounded by positions and states:
 * beyond, CM_ELIMIT with a message.
 *
 * Owns nothing after the call: the tables are freed, the rules live in
 * the builder.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/utf8.h"
#include "worker/grammar/internal.h"
#include "worker/grammar/length.h"

#define LEN_MAX_POSITIONS 4096u
#define LEN_MAX_STATES 65536u

struct ilist {
	uint32_t *v;
	uint32_t n, cap;
};

struct pos {
	uint32_t lo, hi;          /* a one-code-point LIT atom: [cp, cp] */
	const struct wk_gx *cls;  /* a CLASS atom, else NULL */
	struct ilist follow;
};

struct gl {
	struct pos *p;
	uint32_t n, cap;
	int bad;                  /* memory, a limit, or a node kind not supported */
	const char *why;
};

/* first, last, nullable and "empty language" of an instantiated node */
struct frag {
	struct ilist first, last;
	int nullable;
	int none;
};

static void il_free(struct ilist *l)
{
	cm_free(l->v);
	memset(l, 0, sizeof(*l));
}

static int il_add(struct gl *g, struct ilist *l, uint32_t x)
{
	if (l->n == l->cap) {
		uint32_t nc = l->cap ? 2 * l->cap : 4;
		uint32_t *nv = cm_realloc(l->v, (size_t)nc * sizeof(uint32_t));
		if (!nv) {
			g->bad = 1;
			g->why = "out of memory";
			return -1;
		}
		l->v = nv;
		l->cap = nc;
	}
	l->v[l->n++] = x;
	return 0;
}

static int il_cat(struct gl *g, struct ilist *to, const struct ilist *from)
{
	for (uint32_t i = 0; i < from->n; i++)
		if (il_add(g, to, from->v[i]))
			return -1;
	return 0;
}

static void frag_free(struct frag *f)
{
	il_free(&f->first);
	il_free(&f->last);
}

static int new_pos(struct gl *g, uint32_t lo, uint32_t hi, const struct wk_gx *cls, uint32_t *out)
{
	if (g->n >= LEN_MAX_POSITIONS) {
		g->bad = 1;
		g->why = "pattern with minLength/maxLength: more than 4096 positions";
		return -1;
	}
	if (g->n == g->cap) {
		uint32_t nc = g->cap ? 2 * g->cap : 16;
		struct pos *np = cm_realloc(g->p, (size_t)nc * sizeof(*np));
		if (!np) {
			g->bad = 1;
			g->why = "out of memory";
			return -1;
		}
		g->p = np;
		g->cap = nc;
	}
	memset(&g->p[g->n], 0, sizeof(g->p[g->n]));
	g->p[g->n].lo = lo;
	g->p[g->n].hi = hi;
	g->p[g->n].cls = cls;
	*out = g->n++;
	return 0;
}

/* follow(p) += first(b) for every p in last(a) */
static int link(struct gl *g, const struct ilist *last, const struct ilist *first)
{
	for (uint32_t i = 0; i < last->n; i++)
		if (il_cat(g, &g->p[last->v[i]].follow, first))
			return -1;
	return 0;
}

static int inst(struct gl *g, const struct wk_gx *x, struct frag *f, int depth);

/* a then b, into a (b freed) */
static int seq_into(struct gl *g, struct frag *a, struct frag *b)
{
	int rc = 0;
	if (a->none || b->none) {
		frag_free(a);
		a->none = 1;
		a->nullable = 0;
		goto out;
	}
	if (link(g, &a->last, &b->first))
		rc = -1;
	if (!rc && a->nullable)
		rc = il_cat(g, &a->first, &b->first);
	if (!rc) {
		if (!b->nullable)
			il_free(&a->last);
		rc = il_cat(g, &a->last, &b->last);
	}
	a->nullable = a->nullable && b->nullable;
out:
	frag_free(b);
	return rc;
}

/* a or b, into a (b freed) */
static int alt_into(struct gl *g, struct frag *a, struct frag *b)
{
	int rc = 0;
	if (b->none)
		goto out;
	if (a->none) {
		*a = *b;
		return 0;
	}
	rc = il_cat(g, &a->first, &b->first);
	if (!rc)
		rc = il_cat(g, &a->last, &b->last);
	a->nullable |= b->nullable;
out:
	frag_free(b);
	return rc;
}

static int inst_rep(struct gl *g, const struct wk_gx *x, struct frag *f, int depth)
{
	uint32_t mn = x->min, mx = x->max;
	struct frag acc = { .nullable = 1 };
	/* min copies in sequence */
	for (uint32_t i = 0; i < mn && !g->bad; i++) {
		struct frag k = { 0 };
		if (inst(g, x->u.kid, &k, depth + 1) || seq_into(g, &acc, &k))
			break;
	}
	if (mx == WK_GRAM_INF && !g->bad) {
		struct frag k = { 0 };
		if (!inst(g, x->u.kid, &k, depth + 1) && !k.none) {
			link(g, &k.last, &k.first); /* star: loops back */
			k.nullable = 1;
		} else if (!g->bad) {
			frag_free(&k);
			k = (struct frag){ .nullable = 1 };
		}
		seq_into(g, &acc, &k);
	} else if (!g->bad && mx > mn) {
		/* (x (x (x)?)?)? nested, built from the innermost: follow sets stay linear */
		struct frag tail = { .nullable = 1 };
		for (uint32_t i = mx - mn; i-- > 0 && !g->bad;) {
			struct frag k = { 0 };
			if (inst(g, x->u.kid, &k, depth + 1))
				break;
			seq_into(g, &k, &tail);
			if (k.none)
				k = (struct frag){ .nullable = 1 };
			k.nullable = 1;
			tail = k;
		}
		seq_into(g, &acc, &tail);
	}
	*f = acc;
	return g->bad ? -1 : 0;
}

static int inst(struct gl *g, const struct wk_gx *x, struct frag *f, int depth)
{
	memset(f, 0, sizeof(*f));
	if (depth > 200) {
		g->bad = 1;
		g->why = "pattern with minLength/maxLength: nested too deeply";
		return -1;
	}
	switch (x->kind) {
	case GX_EMPTY:
		f->nullable = 1;
		return 0;
	case GX_NOTHING:
		f->none = 1;
		return 0;
	case GX_CLASS: {
		uint32_t p;
		if (new_pos(g, 0, 0, x, &p) || il_add(g, &f->first, p) || il_add(g, &f->last, p))
			return -1;
		return 0;
	}
	case GX_LIT: {
		f->nullable = 1;
		for (uint32_t i = 0; i < x->n;) {
			uint32_t cp, p;
			int k = cm_utf8_decode(x->u.lit + i, x->n - i, &cp);
			if (k <= 0) {
				g->bad = 1;
				g->why = "pattern with minLength/maxLength: a literal that is not UTF-8";
				return -1;
			}
			struct frag a = { 0 };
			if (new_pos(g, cp, cp, NULL, &p) || il_add(g, &a.first, p) || il_add(g, &a.last, p) ||
			    seq_into(g, f, &a))
				return -1;
			i += (uint32_t)k;
		}
		return 0;
	}
	case GX_SEQ:
		f->nullable = 1;
		for (uint32_t i = 0; i < x->n; i++) {
			struct frag k;
			if (inst(g, x->u.kids[i], &k, depth + 1) || seq_into(g, f, &k))
				return -1;
		}
		return 0;
	case GX_ALT:
		f->none = 1;
		for (uint32_t i = 0; i < x->n; i++) {
			struct frag k;
			if (inst(g, x->u.kids[i], &k, depth + 1) || alt_into(g, f, &k))
				return -1;
		}
		return 0;
	case GX_REP:
		return inst_rep(g, x, f, depth);
	default:
		g->bad = 1;
		g->why = "pattern with minLength/maxLength: an expression that is not a pattern's";
		return -1;
	}
}

/* ---- the product with the counter ---------------------------------------- */

struct prod {
	struct wk_gram_b *b;
	struct gl *g;
	uint32_t lo, hi;          /* hi WK_GRAM_INF: counts saturate at lo */
	uint32_t width;           /* counts kept per position */
	uint32_t *rule;           /* [(n + 1) * width]: rule + 1, 0 unmade */
	uint32_t *queue;
	uint32_t nq, n_states;
	wk_regex_class_fn atom;
	void *ctx;
};

/* the rule of (position p, count k); position g->n is the start */
static uint32_t state_rule(struct prod *P, uint32_t p, uint32_t k)
{
	uint32_t i = p * P->width + k;
	if (!P->rule[i]) {
		if (P->n_states >= LEN_MAX_STATES)
			return UINT32_MAX;
		uint32_t r = wk_gram_rule(P->b, "", 0);
		if (r == UINT32_MAX)
			return UINT32_MAX;
		P->rule[i] = r + 1;
		P->queue[P->nq++] = i;
		P->n_states++;
	}
	return P->rule[i] - 1;
}

static struct wk_gx *atom_of(struct prod *P, uint32_t q)
{
	const struct pos *p = &P->g->p[q];
	uint32_t r[2] = { p->lo, p->hi };
	return p->cls ? P->atom(P->ctx, P->b, p->cls->u.ranges, p->cls->n, 0)
		      : P->atom(P->ctx, P->b, r, 1, 0);
}

static int emit(struct prod *P, uint32_t i, const struct frag *top)
{
	uint32_t p = i / P->width, k = i % P->width, start = P->g->n;
	const struct ilist *next = p == start ? &top->first : &P->g->p[p].follow;
	int accepting = 0;
	struct wk_gx *body = wk_gx_nothing(P->b);
	if (p == start) {
		accepting = top->nullable && P->lo == 0;
	} else {
		for (uint32_t j = 0; j < top->last.n && !accepting; j++)
			accepting = top->last.v[j] == p;
		accepting = accepting && k >= P->lo;
	}
	if (P->hi == WK_GRAM_INF || k < P->hi) {
		uint32_t nk = P->hi == WK_GRAM_INF && k + 1 > P->lo ? P->lo : k + 1;
		for (uint32_t j = 0; j < next->n; j++) {
			uint32_t r = state_rule(P, next->v[j], nk);
			if (r == UINT32_MAX)
				return -1;
			body = wk_gx_alt2(P->b, body, wk_gx_seq2(P->b, atom_of(P, next->v[j]),
								 wk_gx_ref(P->b, r)));
		}
	}
	if (accepting)
		body = wk_gx_alt2(P->b, body, wk_gx_empty(P->b));
	if (!body)
		return -1;
	wk_gram_set_body(P->b, P->rule[i] - 1, body);
	return 0;
}

enum cm_status wk_gx_length(struct wk_gram_b *b, const struct wk_gx *x, uint32_t lo, uint32_t hi,
			    wk_regex_class_fn atom, void *ctx, struct wk_gx **out, char *err,
			    size_t err_len)
{
	struct gl g = { 0 };
	struct frag top = { 0 };
	struct prod P = { .b = b, .g = &g, .lo = lo, .hi = hi, .atom = atom, .ctx = ctx };
	enum cm_status st = CM_OK;

	*out = NULL;
	if (hi != WK_GRAM_INF && hi < lo) {
		*out = wk_gx_nothing(b);
		return CM_OK;
	}
	if (inst(&g, x, &top, 0) || g.bad) {
		st = cm_fail(err, err_len, g.why && strstr(g.why, "memory") ? CM_ENOMEM : CM_ELIMIT,
			     "%s", g.why ? g.why : "pattern with minLength/maxLength: out of memory");
		goto out;
	}
	if (top.none) {
		*out = wk_gx_nothing(b);
		goto out;
	}
	P.width = hi == WK_GRAM_INF ? lo + 1 : hi + 1;
	if ((uint64_t)(g.n + 1) * P.width > 16u * LEN_MAX_STATES) {
		st = cm_fail(err, err_len, CM_ELIMIT,
			     "pattern with minLength/maxLength: %u positions x %u lengths is too many",
			     g.n, P.width);
		goto out;
	}
	P.rule = cm_calloc((size_t)(g.n + 1) * P.width, sizeof(uint32_t));
	P.queue = cm_calloc(LEN_MAX_STATES + 1, sizeof(uint32_t));
	if (!P.rule || !P.queue) {
		st = cm_fail(err, err_len, CM_ENOMEM, "%s", "out of memory");
		goto out;
	}
	uint32_t root = state_rule(&P, g.n, 0);
	for (uint32_t qi = 0; root != UINT32_MAX && qi < P.nq; qi++)
		if (emit(&P, P.queue[qi], &top)) {
			root = UINT32_MAX;
			break;
		}
	if (root == UINT32_MAX) {
		st = cm_fail(err, err_len, CM_ELIMIT,
			     "pattern with minLength/maxLength: more than %u states", LEN_MAX_STATES);
		goto out;
	}
	*out = wk_gx_ref(b, root);
	if (!*out)
		st = cm_fail(err, err_len, CM_ENOMEM, "%s", "out of memory");
out:
	frag_free(&top);
	for (uint32_t i = 0; i < g.n; i++)
		il_free(&g.p[i].follow);
	cm_free(g.p);
	cm_free(P.rule);
	cm_free(P.queue);
	return st;
}

/* ---- do two patterns share a string? -------------------------------------- */

static int atoms_meet(const struct pos *a, const struct pos *b)
{
	uint32_t ra[2] = { a->lo, a->hi }, rb[2] = { b->lo, b->hi };
	const uint32_t *x = a->cls ? a->cls->u.ranges : ra, *y = b->cls ? b->cls->u.ranges : rb;
	uint32_t nx = a->cls ? a->cls->n : 1, ny = b->cls ? b->cls->n : 1, i = 0, j = 0;
	while (i < nx && j < ny) {
		if (x[2 * i + 1] < y[2 * j])
			i++;
		else if (y[2 * j + 1] < x[2 * i])
			j++;
		else
			return 1;
	}
	return 0;
}

static int is_last(const struct frag *f, uint32_t p)
{
	for (uint32_t i = 0; i < f->last.n; i++)
		if (f->last.v[i] == p)
			return 1;
	return 0;
}

int wk_gx_disjoint(const struct wk_gx *x, const struct wk_gx *y)
{
	struct gl g[2];
	struct frag f[2];
	uint8_t *seen = NULL;
	uint32_t *queue = NULL, nq = 0;
	int rc = -1;

	memset(g, 0, sizeof(g));
	memset(f, 0, sizeof(f));
	if (inst(&g[0], x, &f[0], 0) || g[0].bad || inst(&g[1], y, &f[1], 0) || g[1].bad)
		goto out;
	if (f[0].none || f[1].none) {
		rc = 1;
		goto out;
	}
	uint32_t w = g[1].n + 1; /* state (p, q) = p w + q; position n: the start */
	uint64_t cells = (uint64_t)(g[0].n + 1) * w;
	if (cells > (64u << 20))
		goto out;
	seen = cm_calloc((size_t)(cells + 7) / 8, 1);
	queue = cm_calloc(LEN_MAX_STATES, sizeof(uint32_t));
	if (!seen || !queue)
		goto out;
	uint32_t s0 = g[0].n * w + g[1].n;
	seen[s0 / 8] |= (uint8_t)(1u << (s0 % 8));
	queue[nq++] = s0;
	rc = 1;
	for (uint32_t qi = 0; qi < nq; qi++) {
		uint32_t p = queue[qi] / w, q = queue[qi] % w;
		int fin0 = p == g[0].n ? f[0].nullable : is_last(&f[0], p);
		int fin1 = q == g[1].n ? f[1].nullable : is_last(&f[1], q);
		if (fin0 && fin1) {
			rc = 0;
			break;
		}
		const struct ilist *n0 = p == g[0].n ? &f[0].first : &g[0].p[p].follow;
		const struct ilist *n1 = q == g[1].n ? &f[1].first : &g[1].p[q].follow;
		for (uint32_t i = 0; i < n0->n && rc; i++)
			for (uint32_t j = 0; j < n1->n; j++) {
				uint32_t a = n0->v[i], b = n1->v[j], s = a * w + b;
				if (seen[s / 8] & (1u << (s % 8)) || !atoms_meet(&g[0].p[a], &g[1].p[b]))
					continue;
				if (nq == LEN_MAX_STATES) {
					rc = -1;
					break;
				}
				seen[s / 8] |= (uint8_t)(1u << (s % 8));
				queue[nq++] = s;
			}
		if (rc < 0)
			break;
	}
out:
	for (int k = 0; k < 2; k++) {
		frag_free(&f[k]);
		for (uint32_t i = 0; i < g[k].n; i++)
			il_free(&g[k].p[i].follow);
		cm_free(g[k].p);
	}
	cm_free(seen);
	cm_free(queue);
	return rc;
}
