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

static int inst_node(struct gl *g, const struct wk_gx *x, struct frag *f, int depth);

/* x instantiated into f; on failure f holds nothing (freed) */
static int inst(struct gl *g, const struct wk_gx *x, struct frag *f, int depth)
{
	int rc = inst_node(g, x, f, depth);
	if (rc || g->bad) {
		frag_free(f);
		f->none = 1;
		return -1;
	}
	return 0;
}

static int inst_node(struct gl *g, const struct wk_gx *x, struct frag *f, int depth)
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

/* ---- the product of the patterns with the counter ------------------------ */

#define PROD_MAX 4

struct prod {
	struct wk_gram_b *b;
	struct gl g[PROD_MAX];
	struct frag f[PROD_MAX];
	size_t k;
	uint32_t lo, hi;          /* hi WK_GRAM_INF: counts saturate at lo */
	uint32_t mod;             /* > 0: the decimal digits read, modulo mod, must end 0 */
	/* states: tuples (position of each pattern, count, remainder), hashed */
	uint32_t *tup;            /* [n_states * (k + 2)] */
	uint32_t *rule;           /* [n_states] */
	uint32_t *slot, cap;      /* open addressing: state + 1 */
	uint32_t n_states;
	wk_regex_class_fn atom;
	void *ctx;
};

static uint32_t tup_hash(const uint32_t *t, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ t[i]) * 16777619u;
	return h;
}

/* The rule of state t (made and queued on first sight), UINT32_MAX past a limit. */
static uint32_t state_rule(struct prod *P, const uint32_t *t)
{
	size_t w = P->k + 2;
	uint32_t h = tup_hash(t, w) & (P->cap - 1);
	for (;; h = (h + 1) & (P->cap - 1)) {
		uint32_t s = P->slot[h];
		if (!s)
			break;
		if (!memcmp(P->tup + (size_t)(s - 1) * w, t, w * sizeof(uint32_t)))
			return P->rule[s - 1];
	}
	if (P->n_states >= LEN_MAX_STATES)
		return UINT32_MAX;
	uint32_t r = wk_gram_rule(P->b, "", 0);
	if (r == UINT32_MAX)
		return UINT32_MAX;
	memcpy(P->tup + (size_t)P->n_states * w, t, w * sizeof(uint32_t));
	P->rule[P->n_states] = r;
	P->slot[h] = ++P->n_states;
	return r;
}

static void pos_ranges(const struct pos *p, uint32_t one[2], const uint32_t **r, uint32_t *n)
{
	if (p->cls) {
		*r = p->cls->u.ranges;
		*n = p->cls->n;
	} else {
		one[0] = p->lo;
		one[1] = p->hi;
		*r = one;
		*n = 1;
	}
}

/* out = a & b (range lists), returns pairs; out has room for na + nb */
static uint32_t meet(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb, uint32_t *out)
{
	uint32_t i = 0, j = 0, m = 0;
	while (i < na && j < nb) {
		uint32_t lo = a[2 * i] > b[2 * j] ? a[2 * i] : b[2 * j];
		uint32_t hi = a[2 * i + 1] < b[2 * j + 1] ? a[2 * i + 1] : b[2 * j + 1];
		if (lo <= hi) {
			out[2 * m] = lo;
			out[2 * m + 1] = hi;
			m++;
		}
		if (a[2 * i + 1] < b[2 * j + 1])
			i++;
		else
			j++;
	}
	return m;
}

static const struct ilist *next_of(const struct prod *P, size_t i, uint32_t p)
{
	return p == P->g[i].n ? &P->f[i].first : &P->g[i].p[p].follow;
}

static int final_of(const struct prod *P, size_t i, uint32_t p)
{
	if (p == P->g[i].n)
		return P->f[i].nullable;
	for (uint32_t j = 0; j < P->f[i].last.n; j++)
		if (P->f[i].last.v[j] == p)
			return 1;
	return 0;
}

/*
 * The transitions of state `from` whose first i patterns moved to to[0..i)
 * on the code points r[0..nr): extends with each next position of pattern
 * i whose atom meets them, and at i == k adds "atom, then the state".
 */
static int moves(struct prod *P, const uint32_t *from, uint32_t *to, size_t i, const uint32_t *r,
		 uint32_t nr, struct wk_gx **body)
{
	if (i == P->k) {
		uint32_t c = from[P->k];
		to[P->k] = P->hi == WK_GRAM_INF && c + 1 > P->lo ? P->lo : c + 1;
		to[P->k + 1] = from[P->k + 1];
		uint32_t other[2 * 64 + 4]; /* r may point here below: same scope */
		if (P->mod) {
			/* each digit moves the remainder its own way; the rest
			 * (a sign) leaves it */
			static const uint32_t digit[2] = { '0', '9' };
			uint32_t dr[2 * 10 + 2], nd = meet(r, nr, digit, 1, dr), no = 0;
			for (uint32_t q = 0; q < nr && no < 64; q++) {
				uint32_t a = r[2 * q], z = r[2 * q + 1];
				if (a < '0')
					other[2 * no] = a, other[2 * no + 1] = z < '0' ? z : '0' - 1, no++;
				if (z > '9')
					other[2 * no] = a > '9' ? a : '9' + 1, other[2 * no + 1] = z, no++;
			}
			for (uint32_t q = 0; q < nd; q++)
				for (uint32_t dg = dr[2 * q]; dg <= dr[2 * q + 1]; dg++) {
					uint32_t one[2] = { dg, dg };
					to[P->k + 1] = (uint32_t)(((uint64_t)from[P->k + 1] * 10 + (dg - '0')) % P->mod);
					uint32_t rule = state_rule(P, to);
					if (rule == UINT32_MAX)
						return -1;
					*body = wk_gx_alt2(P->b, *body, wk_gx_seq2(P->b, P->atom(P->ctx, P->b, one, 1, 0),
										    wk_gx_ref(P->b, rule)));
				}
			if (!no)
				return *body ? 0 : -1;
			r = other;
			nr = no;
			to[P->k + 1] = from[P->k + 1];
		}
		uint32_t rule = state_rule(P, to);
		if (rule == UINT32_MAX)
			return -1;
		*body = wk_gx_alt2(P->b, *body, wk_gx_seq2(P->b, P->atom(P->ctx, P->b, r, nr, 0),
							    wk_gx_ref(P->b, rule)));
		return *body ? 0 : -1;
	}
	const struct ilist *nx = next_of(P, i, from[i]);
	for (uint32_t j = 0; j < nx->n; j++) {
		uint32_t one[2], nq, *m;
		const uint32_t *q;
		pos_ranges(&P->g[i].p[nx->v[j]], one, &q, &nq);
		if (i == 0) {
			m = cm_malloc(2 * (size_t)nq * sizeof(uint32_t));
			if (!m)
				return -1;
			memcpy(m, q, 2 * (size_t)nq * sizeof(uint32_t));
		} else {
			m = cm_malloc(2 * ((size_t)nr + nq) * sizeof(uint32_t));
			if (!m)
				return -1;
			nq = meet(r, nr, q, nq, m);
		}
		int rc = 0;
		if (nq) {
			to[i] = nx->v[j];
			rc = moves(P, from, to, i + 1, m, nq, body);
		}
		cm_free(m);
		if (rc)
			return -1;
	}
	return 0;
}

static int emit(struct prod *P, uint32_t si)
{
	size_t w = P->k + 2;
	uint32_t from[PROD_MAX + 2], to[PROD_MAX + 2];
	memcpy(from, P->tup + (size_t)si * w, w * sizeof(uint32_t));
	int accepting = from[P->k] >= P->lo && from[P->k + 1] == 0;
	for (size_t i = 0; i < P->k && accepting; i++)
		accepting = final_of(P, i, from[i]);
	struct wk_gx *body = wk_gx_nothing(P->b);
	if ((P->hi == WK_GRAM_INF || from[P->k] < P->hi) && moves(P, from, to, 0, NULL, 0, &body))
		return -1;
	if (accepting)
		body = wk_gx_alt2(P->b, body, wk_gx_empty(P->b));
	if (!body)
		return -1;
	wk_gram_set_body(P->b, P->rule[si], body);
	return 0;
}

static void prod_free(struct prod *P)
{
	for (size_t i = 0; i < P->k; i++) {
		frag_free(&P->f[i]);
		for (uint32_t j = 0; j < P->g[i].n; j++)
			il_free(&P->g[i].p[j].follow);
		cm_free(P->g[i].p);
	}
	cm_free(P->tup);
	cm_free(P->rule);
	cm_free(P->slot);
}

enum cm_status wk_gx_product(struct wk_gram_b *b, const struct wk_gx *const *xs, size_t k,
			     uint32_t lo, uint32_t hi, wk_regex_class_fn atom, void *ctx,
			     struct wk_gx **out, char *err, size_t err_len)
{
	return wk_gx_product_mod(b, xs, k, lo, hi, 0, atom, ctx, out, err, err_len);
}

enum cm_status wk_gx_product_mod(struct wk_gram_b *b, const struct wk_gx *const *xs, size_t k,
				 uint32_t lo, uint32_t hi, uint32_t mod, wk_regex_class_fn atom,
				 void *ctx, struct wk_gx **out, char *err, size_t err_len)
{
	struct prod P;
	enum cm_status st = CM_OK;

	memset(&P, 0, sizeof(P));
	*out = NULL;
	if (k == 0 || k > PROD_MAX)
		return cm_fail(err, err_len, CM_EUNSUPPORTED, "patterns: 1 to %d at once", PROD_MAX);
	if (hi != WK_GRAM_INF && hi < lo) {
		*out = wk_gx_nothing(b);
		return CM_OK;
	}
	P.b = b;
	P.k = k;
	P.lo = lo;
	P.hi = hi;
	P.mod = mod;
	P.atom = atom;
	P.ctx = ctx;
	for (size_t i = 0; i < k; i++) {
		if (inst(&P.g[i], xs[i], &P.f[i], 0) || P.g[i].bad) {
			const char *why = P.g[i].why;
			st = cm_fail(err, err_len, why && strstr(why, "memory") ? CM_ENOMEM : CM_ELIMIT,
				     "%s", why ? why : "pattern: out of memory");
			P.k = i + 1;
			goto out;
		}
		if (P.f[i].none) {
			*out = wk_gx_nothing(b);
			goto out;
		}
	}
	P.cap = 2 * LEN_MAX_STATES;
	P.tup = cm_calloc((size_t)LEN_MAX_STATES * (k + 2), sizeof(uint32_t));
	P.rule = cm_calloc(LEN_MAX_STATES, sizeof(uint32_t));
	P.slot = cm_calloc(P.cap, sizeof(uint32_t));
	if (!P.tup || !P.rule || !P.slot) {
		st = cm_fail(err, err_len, CM_ENOMEM, "%s", "out of memory");
		goto out;
	}
	uint32_t start[PROD_MAX + 2];
	for (size_t i = 0; i < k; i++)
		start[i] = P.g[i].n;
	start[k] = 0;
	start[k + 1] = 0;
	uint32_t root = state_rule(&P, start);
	for (uint32_t si = 0; root != UINT32_MAX && si < P.n_states; si++)
		if (emit(&P, si))
			root = UINT32_MAX;
	if (root == UINT32_MAX) {
		st = cm_fail(err, err_len, CM_ELIMIT, "patterns%s: more than %u states",
			     lo || hi != WK_GRAM_INF ? " with minLength/maxLength" : "", LEN_MAX_STATES);
		goto out;
	}
	*out = wk_gx_ref(b, root);
	if (!*out)
		st = cm_fail(err, err_len, CM_ENOMEM, "%s", "out of memory");
out:
	prod_free(&P);
	return st;
}

enum cm_status wk_gx_length(struct wk_gram_b *b, const struct wk_gx *x, uint32_t lo, uint32_t hi,
			    wk_regex_class_fn atom, void *ctx, struct wk_gx **out, char *err,
			    size_t err_len)
{
	return wk_gx_product(b, &x, 1, lo, hi, atom, ctx, out, err, err_len);
}

/* ---- every name but the listed ones, as a pattern ------------------------- */

struct names {
	uint32_t **cps;
	size_t *lens;
	wk_regex_class_fn atom;
	void *ctx;
	struct wk_gx *rest;
};

static struct wk_gx *names_trie(struct wk_gram_b *b, const struct names *ns, size_t lo, size_t hi,
				size_t depth)
{
	struct wk_gx *alt = wk_gx_nothing(b);
	uint32_t used[2 * 256];
	size_t nu = 0, i = lo;
	int terminal = 0;
	while (i < hi) {
		if (ns->lens[i] == depth) {
			terminal = 1;
			i++;
			continue;
		}
		uint32_t ch = ns->cps[i][depth], one[2] = { ch, ch };
		size_t j = i;
		while (j < hi && ns->lens[j] > depth && ns->cps[j][depth] == ch)
			j++;
		if (nu == 256)
			return NULL;
		used[2 * nu] = used[2 * nu + 1] = ch;
		nu++;
		alt = wk_gx_alt2(b, alt, wk_gx_seq2(b, ns->atom(ns->ctx, b, one, 1, 0),
						     names_trie(b, ns, i, j, depth + 1)));
		i = j;
	}
	/* the name may end here unless it is a listed one */
	if (!terminal)
		alt = wk_gx_alt2(b, alt, wk_gx_empty(b));
	/* a code point no listed name continues with: then anything */
	return wk_gx_alt2(b, alt, wk_gx_seq2(b, ns->atom(ns->ctx, b, used, nu, 1), ns->rest));
}

struct wk_gx *wk_gx_other_names(struct wk_gram_b *b, const char *const *names, size_t n,
				wk_regex_class_fn atom, void *ctx, struct wk_gx *rest)
{
	struct names ns = { cm_calloc(n + 1, sizeof(uint32_t *)), cm_calloc(n + 1, sizeof(size_t)),
			    atom, ctx, rest };
	struct wk_gx *x = NULL;
	if (!ns.cps || !ns.lens || !rest)
		goto out;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]), m = 0;
		if (!(ns.cps[i] = cm_calloc(len + 1, sizeof(uint32_t))))
			goto out;
		for (size_t q = 0; q < len;) {
			uint32_t cp;
			int k = cm_utf8_decode((const uint8_t *)names[i] + q, len - q, &cp);
			ns.cps[i][m++] = cp;
			q += (size_t)(k > 0 ? k : 1);
		}
		ns.lens[i] = m;
	}
	/* sorted by code points (insertion: few names) */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0; j--) {
			size_t la = ns.lens[j - 1], lb = ns.lens[j], l = la < lb ? la : lb, q = 0;
			while (q < l && ns.cps[j - 1][q] == ns.cps[j][q])
				q++;
			if (!(q < l ? ns.cps[j - 1][q] > ns.cps[j][q] : la > lb))
				break;
			uint32_t *tc = ns.cps[j];
			size_t tl = ns.lens[j];
			ns.cps[j] = ns.cps[j - 1];
			ns.lens[j] = ns.lens[j - 1];
			ns.cps[j - 1] = tc;
			ns.lens[j - 1] = tl;
		}
	x = names_trie(b, &ns, 0, n, 0);
out:
	for (size_t i = 0; ns.cps && i < n; i++)
		cm_free(ns.cps[i]);
	cm_free(ns.cps);
	cm_free(ns.lens);
	return x;
}

/* ---- do two patterns share a string? -------------------------------------- */

int wk_gx_disjoint(struct wk_gram_b *b, const struct wk_gx *x, const struct wk_gx *y)
{
	struct wk_gx *both = NULL;
	struct wk_gram *g = NULL;
	char err[160];
	uint32_t root;
	enum cm_status st;

	/* their product, as a grammar: empty exactly when no string is in both */
	st = wk_gx_product(b, (const struct wk_gx *const[]){ x, y }, 2, 0, WK_GRAM_INF,
			   wk_regex_plain_class, NULL, &both, err, sizeof(err));
	if (st != CM_OK || (root = wk_gram_rule(b, "both", 1)) == UINT32_MAX)
		return -1;
	wk_gram_set_body(b, root, both);
	st = wk_gram_build(b, root, &g, err, sizeof(err));
	wk_gram_free(g);
	if (st == CM_OK)
		return 0;
	return st == CM_EINVAL && strstr(err, "unsatisfiable") ? 1 : -1;
}
