/*
 * schema.c - JSON Schema to grammar rules (schema.h): per schema node one
 * named rule (memoised by node, so $ref recursion is a rule reference),
 * the JSON value pieces (strings with their escapes, numbers and integer
 * ranges, objects with ordered properties, arrays with counts), and the
 * merge of allOf.
 *
 * Pure computation, any thread; recursion is bounded by opts.max_depth.
 */
#include "worker/grammar/schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/grammar/regex.h"

struct memo {
	const json_t *node;
	uint32_t rule;
};

struct sc {
	struct wk_gram_b *b;
	const json_t *root;
	struct wk_schema_opts o;
	char *err;
	size_t err_len;
	enum cm_status st;
	char path[512];
	uint32_t depth;
	uint32_t r_ws, r_any, r_str, r_num, r_int, r_jchar; /* +1, made on first use */
	struct memo *memo;
	size_t n_memo, cap_memo;
	json_t *owned; /* merged schemas live here */
};

static struct wk_gx *sc_fail(struct sc *c, enum cm_status st, const char *fmt, const char *a)
{
	if (c->st == CM_OK) {
		char m[256];
		snprintf(m, sizeof(m), fmt, a);
		c->st = cm_fail(c->err, c->err_len, st, "%s at %s", m, c->path[0] ? c->path : "/");
	}
	return NULL;
}

static struct wk_gx *sc_oom(struct sc *c)
{
	if (c->st == CM_OK)
		c->st = cm_fail(c->err, c->err_len, wk_gram_b_broken(c->b) ? CM_ELIMIT : CM_ENOMEM,
				"schema: grammar too large or out of memory");
	return NULL;
}

/* ---- characters as JSON string content -------------------------------------- */

static int cmp_pair(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Normalised (and complemented) code point ranges; returns pairs. */
static size_t cp_ranges(const uint32_t *in, size_t n, int neg, uint32_t *out, size_t cap)
{
	uint32_t *t = cm_malloc((n + 1) * 2 * sizeof(uint32_t));
	if (!t)
		return SIZE_MAX;
	if (n)
		memcpy(t, in, n * 2 * sizeof(uint32_t));
	qsort(t, n, 2 * sizeof(uint32_t), cmp_pair);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && t[2 * i] <= t[2 * m - 1] + 1) {
			if (t[2 * i + 1] > t[2 * m - 1])
				t[2 * m - 1] = t[2 * i + 1];
			continue;
		}
		t[2 * m] = t[2 * i], t[2 * m + 1] = t[2 * i + 1], m++;
	}
	size_t k = 0;
	if (!neg) {
		for (size_t i = 0; i < m && k < cap; i++)
			out[2 * k] = t[2 * i], out[2 * k + 1] = t[2 * i + 1], k++;
	} else {
		uint32_t next = 0;
		for (size_t i = 0; i < m && k < cap; i++) {
			if (t[2 * i] > next)
				out[2 * k] = next, out[2 * k + 1] = t[2 * i] - 1, k++;
			next = t[2 * i + 1] + 1;
		}
		if (next <= 0x10FFFF && k < cap)
			out[2 * k] = next, out[2 * k + 1] = 0x10FFFF, k++;
	}
	cm_free(t);
	return k;
}

static int in_ranges(const uint32_t *r, size_t n, uint32_t c)
{
	for (size_t i = 0; i < n; i++)
		if (c >= r[2 * i] && c <= r[2 * i + 1])
			return 1;
	return 0;
}

/* wk_regex_class_fn: code points written as JSON string content. */
static struct wk_gx *json_class(void *ctx, struct wk_gram_b *b, const uint32_t *ranges, size_t n,
				int negated)
{
	(void)ctx;
	uint32_t r[2 * 600];
	size_t m = cp_ranges(ranges, n, negated, r, 598);
	if (m == SIZE_MAX)
		return NULL;
	/* raw: the class minus controls, '"' and '\' */
	uint32_t raw[2 * 610];
	size_t k = 0;
	for (size_t i = 0; i < m; i++) {
		uint32_t lo = r[2 * i], hi = r[2 * i + 1];
		if (hi < 0x20)
			continue;
		if (lo < 0x20)
			lo = 0x20;
		/* cut out 0x22 and 0x5C */
		uint32_t cuts[2] = { 0x22, 0x5C };
		for (int q = 0; q < 2 && lo <= hi; q++) {
			if (cuts[q] >= lo && cuts[q] <= hi) {
				if (cuts[q] > lo)
					raw[2 * k] = lo, raw[2 * k + 1] = cuts[q] - 1, k++;
				lo = cuts[q] + 1;
			}
		}
		if (lo <= hi)
			raw[2 * k] = lo, raw[2 * k + 1] = hi, k++;
	}
	struct wk_gx *alts[40];
	size_t na = 0;
	if (k)
		alts[na++] = wk_gx_class(b, raw, k, 0);
	static const char *const shorts[] = { ['"'] = "\\\"", ['\\'] = "\\\\", ['\n'] = "\\n",
					      ['\t'] = "\\t", ['\r'] = "\\r", ['\b'] = "\\b",
					      ['\f'] = "\\f", ['/'] = "\\/" };
	for (uint32_t c = 0; c < 0x60 && na < 38; c++) {
		if (!in_ranges(r, m, c))
			continue;
		if (c < sizeof(shorts) / sizeof(shorts[0]) && shorts[c]) {
			alts[na++] = wk_gx_str(b, shorts[c]);
		} else if (c < 0x20) {
			char e[8];
			snprintf(e, sizeof(e), "\\u00%02x", c);
			/* lower or upper hex digits */
			struct wk_gx *h[6];
			h[0] = wk_gx_lit(b, e, 4);
			for (int q = 4; q < 6; q++) {
				uint32_t lo = (uint32_t)e[q], up = lo >= 'a' ? lo - 32 : lo;
				uint32_t rr[4] = { lo, lo, up, up };
				h[q - 3] = wk_gx_class(b, rr, 2, 0);
			}
			alts[na++] = wk_gx_seq(b, h, 3);
		}
	}
	return wk_gx_alt(b, alts, na);
}

/* ---- shared rules ------------------------------------------------------------------ */

static uint32_t sc_rule(struct sc *c, uint32_t *slot, const char *name, struct wk_gx *(*make)(struct sc *))
{
	if (*slot)
		return *slot - 1;
	uint32_t r = wk_gram_rule(c->b, name, 1);
	if (r == UINT32_MAX)
		return r;
	*slot = r + 1;
	struct wk_gx *body = make(c);
	if (!body)
		return UINT32_MAX;
	wk_gram_set_body(c->b, r, body);
	return r;
}

static struct wk_gx *mk_ws(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	if (c->o.compact)
		return wk_gx_empty(b);
	uint32_t sp[4] = { ' ', ' ', '\t', '\t' };
	return wk_gx_opt(b, wk_gx_alt2(b, wk_gx_str(b, " "),
				       wk_gx_seq2(b, wk_gx_str(b, "\n"),
						  wk_gx_rep(b, wk_gx_class(b, sp, 2, 0), 0, 20))));
}

static struct wk_gx *ws(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_ws, "ws", mk_ws);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

static struct wk_gx *mk_jchar(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	uint32_t r[6] = { 0, 0x1F, '"', '"', '\\', '\\' };
	uint32_t hx[6] = { '0', '9', 'a', 'f', 'A', 'F' };
	struct wk_gx *hex = wk_gx_class(b, hx, 3, 0);
	struct wk_gx *esc = wk_gx_alt2(b, wk_gx_class(b, (const uint32_t[]){ '"', '"', '\\', '\\', '/', '/',
									 'b', 'b', 'f', 'f', 'n', 'n',
									 'r', 'r', 't', 't' }, 8, 0),
				       wk_gx_seq2(b, wk_gx_str(b, "u"), wk_gx_rep(b, hex, 4, 4)));
	return wk_gx_alt2(b, wk_gx_class(b, r, 3, 1), wk_gx_seq2(b, wk_gx_str(b, "\\"), esc));
}

static struct wk_gx *jchar(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_jchar, "char", mk_jchar);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

static struct wk_gx *mk_str(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *k[3] = { wk_gx_str(b, "\""), wk_gx_rep(b, jchar(c), 0, WK_GRAM_INF), wk_gx_str(b, "\"") };
	return wk_gx_seq(b, k, 3);
}

static struct wk_gx *any_string(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_str, "string", mk_str);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

static struct wk_gx *digits(struct wk_gram_b *b, uint32_t min)
{
	return wk_gx_rep(b, wk_gx_cp(b, '0', '9'), min, WK_GRAM_INF);
}

/* 0 | [1-9][0-9]* */
static struct wk_gx *uint_any(struct wk_gram_b *b)
{
	return wk_gx_alt2(b, wk_gx_str(b, "0"), wk_gx_seq2(b, wk_gx_cp(b, '1', '9'), digits(b, 0)));
}

static struct wk_gx *frac_any(struct wk_gram_b *b)
{
	return wk_gx_seq2(b, wk_gx_str(b, "."), digits(b, 1));
}

static struct wk_gx *mk_int(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	return wk_gx_seq2(b, wk_gx_opt(b, wk_gx_str(b, "-")), uint_any(b));
}

static struct wk_gx *mk_num(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *e = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_class(b, (const uint32_t[]){ 'e', 'e', 'E', 'E' }, 2, 0),
							    wk_gx_opt(b, wk_gx_class(b, (const uint32_t[]){ '+', '+', '-', '-' }, 2, 0)),
							    digits(b, 1) }, 3);
	struct wk_gx *k[4] = { wk_gx_opt(b, wk_gx_str(b, "-")), uint_any(b), wk_gx_opt(b, frac_any(b)), wk_gx_opt(b, e) };
	return wk_gx_seq(b, k, 4);
}

static struct wk_gx *mk_any(struct sc *c);

static struct wk_gx *any_value(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_any, "value", mk_any);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

/* "[" ws ( item ( ws "," ws item ){min-1,max-1} )? ws "]" */
static struct wk_gx *array_of(struct sc *c, struct wk_gx *item, uint32_t min, uint32_t max)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ ws(c), wk_gx_str(b, ","), ws(c) }, 3);
	struct wk_gx *body;
	if (max == 0) {
		body = wk_gx_empty(b);
	} else {
		uint32_t rmin = min ? min - 1 : 0, rmax = max == WK_GRAM_INF ? WK_GRAM_INF : max - 1;
		body = wk_gx_seq2(b, item, wk_gx_rep(b, wk_gx_seq2(b, sep, item), rmin, rmax));
		if (min == 0)
			body = wk_gx_opt(b, body);
	}
	struct wk_gx *k[5] = { wk_gx_str(b, "["), ws(c), body, ws(c), wk_gx_str(b, "]") };
	return wk_gx_seq(b, k, 5);
}

/* "{" ws ( kv ( ws "," ws kv )* )? ws "}" with kv = string ws ":" ws value */
static struct wk_gx *object_of(struct sc *c, struct wk_gx *key, struct wk_gx *value)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *kv = wk_gx_seq(b, (struct wk_gx *[]){ key, ws(c), wk_gx_str(b, ":"), ws(c), value }, 5);
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ ws(c), wk_gx_str(b, ","), ws(c) }, 3);
	struct wk_gx *body = wk_gx_opt(b, wk_gx_seq2(b, kv, wk_gx_rep(b, wk_gx_seq2(b, sep, kv), 0, WK_GRAM_INF)));
	struct wk_gx *k[5] = { wk_gx_str(b, "{"), ws(c), body, ws(c), wk_gx_str(b, "}") };
	return wk_gx_seq(b, k, 5);
}

static struct wk_gx *mk_any(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	uint32_t self = c->r_any - 1;
	uint32_t ri = sc_rule(c, &c->r_num, "number", mk_num);
	if (ri == UINT32_MAX)
		return NULL;
	struct wk_gx *v = wk_gx_ref(b, self);
	struct wk_gx *k[7] = { object_of(c, any_string(c), v), array_of(c, v, 0, WK_GRAM_INF), any_string(c),
			       wk_gx_ref(b, ri), wk_gx_str(b, "true"), wk_gx_str(b, "false"), wk_gx_str(b, "null") };
	return wk_gx_alt(b, k, 7);
}

/* ---- integer and number ranges ------------------------------------------------------ */

/* n-digit strings between A and B (equal length, leading zeros allowed). */
static struct wk_gx *fixed_range(struct wk_gram_b *b, const char *A, const char *B, size_t n)
{
	if (n == 0)
		return wk_gx_empty(b);
	if (memcmp(A, B, n) == 0)
		return wk_gx_lit(b, A, n);
	if (A[0] == B[0])
		return wk_gx_seq2(b, wk_gx_lit(b, A, 1), fixed_range(b, A + 1, B + 1, n - 1));
	int all0 = 1, all9 = 1;
	for (size_t i = 1; i < n; i++) {
		all0 &= A[i] == '0';
		all9 &= B[i] == '9';
	}
	char nines[24], zeros[24];
	memset(nines, '9', sizeof(nines));
	memset(zeros, '0', sizeof(zeros));
	struct wk_gx *k[3];
	size_t nk = 0;
	char lo = all0 ? A[0] : (char)(A[0] + 1), hi = all9 ? B[0] : (char)(B[0] - 1);
	if (!all0)
		k[nk++] = wk_gx_seq2(b, wk_gx_lit(b, A, 1), fixed_range(b, A + 1, nines, n - 1));
	if (lo <= hi)
		k[nk++] = wk_gx_seq2(b, wk_gx_cp(b, (uint32_t)lo, (uint32_t)hi),
				     wk_gx_rep(b, wk_gx_cp(b, '0', '9'), (uint32_t)(n - 1), (uint32_t)(n - 1)));
	if (!all9)
		k[nk++] = wk_gx_seq2(b, wk_gx_lit(b, B, 1), fixed_range(b, zeros, B + 1, n - 1));
	return wk_gx_alt(b, k, nk);
}

static int ndigits(uint64_t v)
{
	int d = 1;
	while (v >= 10)
		v /= 10, d++;
	return d;
}

/* Decimal integers in [lo, hi] without leading zeros; has_hi 0: no bound. */
static struct wk_gx *uint_range(struct wk_gram_b *b, uint64_t lo, uint64_t hi, int has_hi)
{
	if (has_hi && lo > hi)
		return wk_gx_nothing(b);
	int d0 = ndigits(lo), d1 = has_hi ? ndigits(hi) : d0;
	struct wk_gx *alt = wk_gx_nothing(b);
	uint64_t p = 1;
	for (int i = 1; i < d0; i++)
		p *= 10;
	for (int d = d0; d <= d1; d++, p *= 10) {
		uint64_t a = d == 1 ? 0 : p, top = d >= 20 ? UINT64_MAX : p * 10 - 1;
		if (a < lo)
			a = lo;
		if (has_hi && top > hi)
			top = hi;
		if (a > top)
			continue;
		char A[64], B[64];
		snprintf(A, sizeof(A), "%0*llu", d & 31, (unsigned long long)a);
		snprintf(B, sizeof(B), "%0*llu", d & 31, (unsigned long long)top);
		alt = wk_gx_alt2(b, alt, fixed_range(b, A, B, (size_t)d));
		if (d >= 20)
			break;
	}
	if (!has_hi && d0 < 20)
		alt = wk_gx_alt2(b, alt, wk_gx_seq2(b, wk_gx_cp(b, '1', '9'), digits(b, (uint32_t)d0)));
	return alt;
}

struct bound {
	int has;
	int incl;
	uint64_t v; /* magnitude */
};

/* Unsigned decimal text with value y: lo <(=) y <(=) hi (lo.has always). */
static struct wk_gx *nonneg(struct wk_gram_b *b, struct bound lo, struct bound hi, int is_int)
{
	struct wk_gx *fany = is_int ? wk_gx_empty(b) : wk_gx_opt(b, frac_any(b));
	struct wk_gx *fzero = is_int ? wk_gx_empty(b)
				     : wk_gx_opt(b, wk_gx_seq2(b, wk_gx_str(b, "."), wk_gx_rep(b, wk_gx_str(b, "0"), 1, WK_GRAM_INF)));
	struct wk_gx *fnz = is_int ? wk_gx_nothing(b)
				   : wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "."), digits(b, 0), wk_gx_cp(b, '1', '9'), digits(b, 0) }, 4);
	char s[24];
	if (hi.has && (lo.v > hi.v || (lo.v == hi.v && !(lo.incl && hi.incl))))
		return wk_gx_nothing(b);
	if (hi.has && lo.v == hi.v) {
		snprintf(s, sizeof(s), "%llu", (unsigned long long)lo.v);
		return wk_gx_seq2(b, wk_gx_str(b, s), fzero);
	}
	snprintf(s, sizeof(s), "%llu", (unsigned long long)lo.v);
	struct wk_gx *at_lo = wk_gx_seq2(b, wk_gx_str(b, s), lo.incl ? fany : fnz);
	struct wk_gx *mid = wk_gx_nothing(b);
	if (lo.v < UINT64_MAX && (!hi.has || lo.v + 1 <= hi.v - 1 + (hi.v == 0)))
		if (!hi.has || (hi.v >= 1 && lo.v + 1 <= hi.v - 1))
			mid = wk_gx_seq2(b, uint_range(b, lo.v + 1, hi.has ? hi.v - 1 : 0, hi.has), fany);
	struct wk_gx *at_hi = wk_gx_nothing(b);
	if (hi.has && hi.incl) {
		snprintf(s, sizeof(s), "%llu", (unsigned long long)hi.v);
		at_hi = wk_gx_seq2(b, wk_gx_str(b, s), fzero);
	}
	return wk_gx_alt(b, (struct wk_gx *[]){ at_lo, mid, at_hi }, 3);
}

/* A bound from the schema: integer-valued within 2^53, or refused. */
static int read_bound(struct sc *c, const json_t *s, const char *key, double *v, int *has)
{
	const json_t *x = json_object_get(s, key);
	*has = 0;
	if (!x)
		return 0;
	if (json_is_boolean(x) && (!strcmp(key, "exclusiveMinimum") || !strcmp(key, "exclusiveMaximum")))
		return 0; /* draft 4 flags, read by the caller */
	if (!json_is_number(x)) {
		sc_fail(c, CM_EINVAL, "'%s': expected a number", key);
		return -1;
	}
	*v = json_number_value(x);
	*has = 1;
	return 0;
}

static struct wk_gx *number_range(struct sc *c, const json_t *s, int is_int)
{
	struct wk_gram_b *b = c->b;
	double mn = 0, mx = 0, xmn = 0, xmx = 0;
	int hmn, hmx, hxmn, hxmx;
	if (read_bound(c, s, "minimum", &mn, &hmn) || read_bound(c, s, "maximum", &mx, &hmx) ||
	    read_bound(c, s, "exclusiveMinimum", &xmn, &hxmn) || read_bound(c, s, "exclusiveMaximum", &xmx, &hxmx))
		return NULL;
	/* draft 4: exclusiveMinimum: true makes minimum exclusive */
	int lo_incl = 1, hi_incl = 1;
	if (json_is_true(json_object_get(s, "exclusiveMinimum")))
		lo_incl = 0;
	if (json_is_true(json_object_get(s, "exclusiveMaximum")))
		hi_incl = 0;
	if (hxmn && (!hmn || xmn >= mn))
		mn = xmn, hmn = 1, lo_incl = 0;
	if (hxmx && (!hmx || xmx <= mx))
		mx = xmx, hmx = 1, hi_incl = 0;
	if (!hmn && !hmx) {
		uint32_t r = is_int ? sc_rule(c, &c->r_int, "integer", mk_int) : sc_rule(c, &c->r_num, "number", mk_num);
		return r == UINT32_MAX ? NULL : wk_gx_ref(b, r);
	}
	/* integers: a fractional bound rounds inward */
	if (is_int) {
		if (hmn && mn != floor(mn))
			mn = ceil(mn), lo_incl = 1;
		if (hmx && mx != floor(mx))
			mx = floor(mx), hi_incl = 1;
	}
	const double lim = 9007199254740992.0;
	if ((hmn && (mn != floor(mn) || fabs(mn) > lim)) || (hmx && (mx != floor(mx) || fabs(mx) > lim)))
		return sc_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: a number bound that is not an integer (minimum/maximum)");
	struct wk_gx *pos = wk_gx_nothing(b), *neg = wk_gx_nothing(b);
	/* x >= 0 */
	if (!hmx || mx >= 0) {
		struct bound lo = { 1, 1, 0 }, hi = { hmx, hi_incl, hmx ? (uint64_t)mx : 0 };
		if (hmn && mn >= 0)
			lo = (struct bound){ 1, lo_incl, (uint64_t)mn };
		if (hmx && mx == 0 && !hi_incl)
			hi = (struct bound){ 1, 0, 0 };
		pos = nonneg(b, lo, hi, is_int);
	}
	/* x < 0, written "-" y with y > 0 */
	if (!hmn || mn < 0) {
		struct bound lo = { 1, 0, 0 }, hi = { hmn, lo_incl, hmn ? (uint64_t)(-mn) : 0 };
		if (hmx && mx < 0)
			lo = (struct bound){ 1, hi_incl, (uint64_t)(-mx) };
		neg = wk_gx_seq2(b, wk_gx_str(b, "-"), nonneg(b, lo, hi, is_int));
	}
	return wk_gx_alt2(b, pos, neg);
}

/* ---- strings ---------------------------------------------------------------------------- */

static const char *format_regex(const char *f)
{
	static const struct {
		const char *name, *re;
	} F[] = {
		{ "date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$" },
		{ "time", "^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
		{ "date-time", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
		{ "uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" },
		{ "email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$" },
		{ "uri", "^[A-Za-z][A-Za-z0-9+.-]*:[^\\x00-\\x20\"<>\\\\^`{|}]*$" },
		{ "ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$" },
		{ "hostname", "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$" },
	};
	for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++)
		if (!strcmp(F[i].name, f))
			return F[i].re;
	return NULL;
}

static int get_count(struct sc *c, const json_t *s, const char *key, uint32_t *v, uint32_t dflt)
{
	const json_t *x = json_object_get(s, key);
	*v = dflt;
	if (!x)
		return 0;
	double d = json_number_value(x);
	if (!json_is_number(x) || d < 0 || d != floor(d)) {
		sc_fail(c, CM_EINVAL, "'%s': expected a non-negative integer", key);
		return -1;
	}
	*v = d > 100000 ? 100000 : (uint32_t)d;
	return 0;
}

static struct wk_gx *string_of(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	uint32_t mn, mx;
	if (get_count(c, s, "minLength", &mn, 0) || get_count(c, s, "maxLength", &mx, WK_GRAM_INF))
		return NULL;
	const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
	const char *re = NULL;
	if (pat) {
		if (!json_is_string(pat))
			return sc_fail(c, CM_EINVAL, "%s", "'pattern': expected a string");
		re = json_string_value(pat);
	}
	if (fmt && json_is_string(fmt)) {
		const char *fr = format_regex(json_string_value(fmt));
		if (fr && re)
			return sc_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: 'format' together with 'pattern'");
		if (fr)
			re = fr;
	}
	struct wk_gx *body;
	if (re) {
		if (mn != 0 || mx != WK_GRAM_INF)
			return sc_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: 'pattern' or 'format' together with minLength/maxLength");
		char e[256];
		enum cm_status st = wk_regex_compile(b, re, strlen(re), json_class, NULL, &body, e, sizeof(e));
		if (st != CM_OK)
			return sc_fail(c, st == CM_EINVAL ? CM_EUNSUPPORTED : st, "%s", e);
	} else {
		if (mn == 0 && mx == WK_GRAM_INF)
			return any_string(c);
		body = wk_gx_rep(b, jchar(c), mn, mx);
	}
	return wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "\""), body, wk_gx_str(b, "\"") }, 3);
}

/* ---- canonical JSON text of a value (enum, const, property names) ---------------------- */

static struct wk_gx *literal_value(struct sc *c, const json_t *v)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
	if (!t)
		return sc_oom(c);
	struct wk_gx *x = wk_gx_str(c->b, t);
	free(t);
	return x;
}

static struct wk_gx *key_literal(struct sc *c, const char *k)
{
	json_t *s = json_string(k);
	if (!s)
		return sc_oom(c);
	struct wk_gx *x = literal_value(c, s);
	json_decref(s);
	return x;
}

/* ---- objects ------------------------------------------------------------------------------ */

static struct wk_gx *sc_node(struct sc *c, const json_t *s, const char *seg);

/* String content (and the closing quote) for names not in keys[lo..hi) that
 * share the first `depth` code points; keys are sorted code point arrays. */
struct keyset {
	uint32_t **cps;
	size_t *lens;
	size_t n;
};

static struct wk_gx *key_trie(struct sc *c, const struct keyset *ks, size_t lo, size_t hi, size_t depth)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *alt = wk_gx_nothing(b);
	int terminal = 0;
	uint32_t kids[2 * 256];
	size_t nk = 0;
	size_t i = lo;
	while (i < hi) {
		if (ks->lens[i] == depth) {
			terminal = 1;
			i++;
			continue;
		}
		uint32_t ch = ks->cps[i][depth];
		size_t j = i;
		while (j < hi && ks->lens[j] > depth && ks->cps[j][depth] == ch)
			j++;
		if (nk < 256) {
			kids[2 * nk] = kids[2 * nk + 1] = ch;
			nk++;
		} else {
			return sc_fail(c, CM_ELIMIT, "%s", "too many property names sharing a prefix");
		}
		uint32_t one[2] = { ch, ch };
		alt = wk_gx_alt2(b, alt, wk_gx_seq2(b, json_class(NULL, b, one, 1, 0), key_trie(c, ks, i, j, depth + 1)));
		i = j;
	}
	if (!terminal)
		alt = wk_gx_alt2(b, alt, wk_gx_str(b, "\""));
	struct wk_gx *free_rest = wk_gx_seq2(b, wk_gx_rep(b, jchar(c), 0, WK_GRAM_INF), wk_gx_str(b, "\""));
	return wk_gx_alt2(b, alt, wk_gx_seq2(b, json_class(NULL, b, kids, nk, 1), free_rest));
}

/* A property name (with quotes) that is none of names[0..n). */
static struct wk_gx *other_key(struct sc *c, const char *const *names, size_t n)
{
	if (n == 0)
		return any_string(c);
	struct keyset ks = { .n = n };
	ks.cps = cm_calloc(n, sizeof(*ks.cps));
	ks.lens = cm_calloc(n, sizeof(*ks.lens));
	struct wk_gx *x = NULL;
	if (!ks.cps || !ks.lens)
		goto out;
	/* code points of each name, then sort the names (selection by first
	 * differing code point: simple insertion sort, n is small) */
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(names[i]), m = 0;
		ks.cps[i] = cm_calloc(len + 1, sizeof(uint32_t));
		if (!ks.cps[i])
			goto out;
		for (size_t p = 0; p < len;) {
			uint32_t cp;
			int k = cm_utf8_decode((const uint8_t *)names[i] + p, len - p, &cp);
			if (k <= 0)
				k = 1;
			ks.cps[i][m++] = cp;
			p += (size_t)k;
		}
		ks.lens[i] = m;
	}
	for (size_t i = 1; i < n; i++) {
		for (size_t j = i; j > 0; j--) {
			size_t la = ks.lens[j - 1], lb = ks.lens[j], l = la < lb ? la : lb, q = 0;
			while (q < l && ks.cps[j - 1][q] == ks.cps[j][q])
				q++;
			int gt = q < l ? ks.cps[j - 1][q] > ks.cps[j][q] : la > lb;
			if (!gt)
				break;
			uint32_t *tc = ks.cps[j];
			ks.cps[j] = ks.cps[j - 1];
			ks.cps[j - 1] = tc;
			size_t tl = ks.lens[j];
			ks.lens[j] = ks.lens[j - 1];
			ks.lens[j - 1] = tl;
		}
	}
	x = wk_gx_seq2(c->b, wk_gx_str(c->b, "\""), key_trie(c, &ks, 0, n, 0));
out:
	if (ks.cps)
		for (size_t i = 0; i < n; i++)
			cm_free(ks.cps[i]);
	cm_free(ks.cps);
	cm_free(ks.lens);
	return x ? x : sc_oom(c);
}

struct prop {
	const char *name;
	const json_t *schema;
	int required;
};

static struct wk_gx *object_schema(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	const json_t *props = json_object_get(s, "properties");
	const json_t *req = json_object_get(s, "required");
	const json_t *addl = json_object_get(s, "additionalProperties");
	if (props && !json_is_object(props))
		return sc_fail(c, CM_EINVAL, "%s", "'properties': expected an object");
	if (req && !json_is_array(req))
		return sc_fail(c, CM_EINVAL, "%s", "'required': expected an array");
	size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
	struct prop *p = cm_calloc(np + nr + 1, sizeof(*p));
	const char **names = cm_calloc(np + nr + 1, sizeof(char *));
	uint32_t *rules = NULL;
	struct wk_gx *out = NULL;
	size_t n = 0;
	if (!p || !names)
		goto oom;
	const char *key;
	json_t *val;
	if (props)
		json_object_foreach((json_t *)props, key, val) {
			p[n].name = key;
			p[n].schema = val;
			n++;
		}
	for (size_t i = 0; i < nr; i++) {
		const json_t *r = json_array_get(req, i);
		if (!json_is_string(r)) {
			sc_fail(c, CM_EINVAL, "%s", "'required': expected an array of strings");
			goto out;
		}
		size_t j = 0;
		while (j < n && strcmp(p[j].name, json_string_value(r)))
			j++;
		if (j == n) { /* required but not listed: its value follows additionalProperties */
			p[n].name = json_string_value(r);
			p[n].schema = addl ? addl : json_true();
			n++;
		}
		p[j].required = 1;
	}
	for (size_t i = 0; i < n; i++)
		names[i] = p[i].name;
	int extras = !json_is_false(addl);
	/* R(i, any) = rules[2 i + any] */
	rules = cm_calloc(2 * (n + 1), sizeof(uint32_t));
	if (!rules)
		goto oom;
	for (size_t i = 0; i < 2 * (n + 1); i++)
		if ((rules[i] = wk_gram_rule(b, "", 0)) == UINT32_MAX)
			goto oom;
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ ws(c), wk_gx_str(b, ","), ws(c) }, 3);
	struct wk_gx *xkv = NULL;
	if (extras) {
		struct wk_gx *xv = addl && !json_is_true(addl) ? sc_node(c, addl, "additionalProperties") : any_value(c);
		xkv = wk_gx_seq(b, (struct wk_gx *[]){ other_key(c, names, n), ws(c), wk_gx_str(b, ":"), ws(c), xv }, 5);
	}
	for (size_t i = n + 1; i-- > 0;) {
		for (int any = 0; any < 2; any++) {
			struct wk_gx *body;
			if (i == n) {
				if (!extras)
					body = wk_gx_empty(b);
				else if (any)
					body = wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 0, WK_GRAM_INF);
				else
					body = wk_gx_opt(b, wk_gx_seq2(b, xkv, wk_gx_rep(b, wk_gx_seq2(b, sep, xkv), 0, WK_GRAM_INF)));
			} else {
				char seg[300];
				snprintf(seg, sizeof(seg), "properties/%.250s", p[i].name);
				struct wk_gx *v = sc_node(c, p[i].schema, seg);
				if (!v)
					goto out;
				struct wk_gx *kv = wk_gx_seq(b, (struct wk_gx *[]){ key_literal(c, p[i].name), ws(c), wk_gx_str(b, ":"), ws(c), v }, 5);
				struct wk_gx *with = wk_gx_seq(b, (struct wk_gx *[]){ any ? sep : wk_gx_empty(b), kv, wk_gx_ref(b, rules[2 * (i + 1) + 1]) }, 3);
				body = p[i].required ? with : wk_gx_alt2(b, with, wk_gx_ref(b, rules[2 * (i + 1) + (size_t)any]));
			}
			if (!body)
				goto oom;
			wk_gram_set_body(b, rules[2 * i + (size_t)any], body);
		}
	}
	out = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "{"), ws(c), wk_gx_ref(b, rules[0]), ws(c), wk_gx_str(b, "}") }, 5);
	if (!out)
		goto oom;
	goto out;
oom:
	out = sc_oom(c);
out:
	cm_free(p);
	cm_free(names);
	cm_free(rules);
	return c->st == CM_OK ? out : NULL;
}

/* ---- arrays -------------------------------------------------------------------------------- */

static struct wk_gx *array_schema(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	uint32_t mn, mx;
	if (get_count(c, s, "minItems", &mn, 0) || get_count(c, s, "maxItems", &mx, WK_GRAM_INF))
		return NULL;
	const json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	const json_t *rest = NULL;
	if (json_is_array(items)) {
		prefix = items;
		rest = json_object_get(s, "additionalItems");
	} else {
		rest = items;
	}
	if (prefix && !json_is_array(prefix))
		return sc_fail(c, CM_EINVAL, "%s", "'prefixItems': expected an array");
	size_t k = prefix ? json_array_size(prefix) : 0;
	if (mx != WK_GRAM_INF && mn > mx)
		return wk_gx_nothing(b);
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ ws(c), wk_gx_str(b, ","), ws(c) }, 3);
	struct wk_gx *r = NULL;
	int rest_ok = !json_is_false(rest);
	if (rest_ok)
		r = rest && !json_is_true(rest) ? sc_node(c, rest, json_is_array(items) ? "additionalItems" : "items") : any_value(c);
	if (rest_ok && !r)
		return NULL;
	if (k == 0 && rest_ok)
		return array_of(c, r, mn, mx);
	/* the tail after j items, built from the end */
	struct wk_gx *tail;
	uint32_t rmin = mn > k ? mn - (uint32_t)k : 0;
	uint32_t rmax = mx == WK_GRAM_INF ? WK_GRAM_INF : (mx > k ? mx - (uint32_t)k : 0);
	if (!rest_ok || rmax == 0)
		tail = rmin ? wk_gx_nothing(b) : wk_gx_empty(b);
	else if (k == 0)
		tail = wk_gx_empty(b); /* handled above */
	else
		tail = wk_gx_rep(b, wk_gx_seq2(b, sep, r), rmin, rmax);
	for (size_t j = k; j-- > 0;) {
		if (mx != WK_GRAM_INF && j >= mx) {
			tail = wk_gx_empty(b);
			continue;
		}
		char seg[48];
		snprintf(seg, sizeof(seg), "prefixItems/%zu", j);
		struct wk_gx *e = sc_node(c, json_array_get(prefix, j), seg);
		if (!e)
			return NULL;
		struct wk_gx *step = wk_gx_seq(b, (struct wk_gx *[]){ j ? sep : wk_gx_empty(b), e, tail }, 3);
		tail = j < mn ? step : wk_gx_opt(b, step);
	}
	return wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "["), ws(c), tail, ws(c), wk_gx_str(b, "]") }, 5);
}

/* ---- keywords, references, combinators ------------------------------------------------------ */

/* Keywords that assert something and are not enforced: refused. */
static const char *const UNSUPPORTED[] = {
	"not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
	"contains", "minContains", "maxContains", "uniqueItems", "multipleOf", "propertyNames",
	"patternProperties", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
	"$recursiveRef", "minProperties", "maxProperties",
};

/* 1 when keyword k of s can be ignored although listed as unsupported. */
static int harmless(const json_t *s, const char *k, const json_t *v)
{
	if (!strcmp(k, "uniqueItems"))
		return json_is_false(v);
	if (!strcmp(k, "patternProperties") || !strcmp(k, "dependencies") || !strcmp(k, "dependentRequired") ||
	    !strcmp(k, "dependentSchemas"))
		return json_is_object(v) && json_object_size(v) == 0;
	if (!strcmp(k, "minProperties")) {
		const json_t *req = json_object_get(s, "required");
		return json_is_number(v) && json_number_value(v) <= (double)(req ? json_array_size(req) : 0);
	}
	if (!strcmp(k, "maxProperties")) {
		const json_t *pr = json_object_get(s, "properties");
		return json_is_number(v) && json_is_false(json_object_get(s, "additionalProperties")) &&
		       json_number_value(v) >= (double)(pr ? json_object_size(pr) : 0);
	}
	if (!strcmp(k, "multipleOf")) {
		const json_t *t = json_object_get(s, "type");
		return json_is_number(v) && json_number_value(v) == 1 && json_is_string(t) &&
		       !strcmp(json_string_value(t), "integer");
	}
	return 0;
}

static int check_keywords(struct sc *c, const json_t *s)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		for (size_t i = 0; i < sizeof(UNSUPPORTED) / sizeof(UNSUPPORTED[0]); i++)
			if (!strcmp(k, UNSUPPORTED[i]) && !harmless(s, k, v)) {
				sc_fail(c, CM_EUNSUPPORTED, "unsupported keyword '%s'", k);
				return -1;
			}
	}
	return 0;
}

/* "#", "#/a/b" (JSON Pointer, ~0 ~1 and %-escapes not decoded beyond ~). */
static const json_t *resolve_ref(struct sc *c, const char *ref)
{
	if (ref[0] != '#')
		return sc_fail(c, CM_EUNSUPPORTED, "unsupported $ref '%.200s': only local references (#...)", ref) ? NULL : NULL;
	const json_t *cur = c->root;
	const char *p = ref + 1;
	if (*p == 0)
		return cur;
	if (*p != '/')
		return sc_fail(c, CM_EUNSUPPORTED, "unsupported $ref '%.200s': expected a JSON Pointer", ref) ? NULL : NULL;
	while (*p == '/') {
		p++;
		char seg[256];
		size_t n = 0;
		while (*p && *p != '/' && n < sizeof(seg) - 1) {
			if (p[0] == '~' && p[1] == '0')
				seg[n++] = '~', p += 2;
			else if (p[0] == '~' && p[1] == '1')
				seg[n++] = '/', p += 2;
			else
				seg[n++] = *p++;
		}
		seg[n] = 0;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, seg);
		} else if (json_is_array(cur)) {
			char *end;
			unsigned long idx = strtoul(seg, &end, 10);
			cur = *end ? NULL : json_array_get(cur, idx);
		} else {
			cur = NULL;
		}
		if (!cur)
			return sc_fail(c, CM_EINVAL, "$ref '%.200s' points to nothing", ref) ? NULL : NULL;
	}
	return cur;
}

static int is_annotation(const char *k)
{
	static const char *const A[] = { "title", "description", "default", "examples", "example", "$schema",
					 "$id", "id", "$comment", "readOnly", "writeOnly", "deprecated",
					 "definitions", "$defs", "format", "contentEncoding", "contentMediaType" };
	for (size_t i = 0; i < sizeof(A) / sizeof(A[0]); i++)
		if (!strcmp(A[i], k))
			return 1;
	return 0;
}

/* Type bits: null 1, boolean 2, object 4, array 8, string 16, integer 32, number 64 (non-integer). */
#define T_ALL 127u

static unsigned type_bit(const char *t)
{
	static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer", "number" };
	for (unsigned i = 0; i < 7; i++)
		if (!strcmp(N[i], t))
			return i == 6 ? 96u : 1u << i;
	return 0;
}

static unsigned value_types(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL: return 1;
	case JSON_TRUE:
	case JSON_FALSE: return 2;
	case JSON_OBJECT: return 4;
	case JSON_ARRAY: return 8;
	case JSON_STRING: return 16;
	case JSON_INTEGER: return 32;
	case JSON_REAL: return json_real_value(v) == floor(json_real_value(v)) ? 32 : 64;
	}
	return 0;
}

/* The JSON types a schema can match (an over-approximation). */
static unsigned schema_types(struct sc *c, const json_t *s, int depth)
{
	if (json_is_false(s))
		return 0;
	if (!json_is_object(s) || depth > 32)
		return T_ALL;
	unsigned t = T_ALL;
	const json_t *ty = json_object_get(s, "type");
	if (json_is_string(ty))
		t = type_bit(json_string_value(ty));
	else if (json_is_array(ty)) {
		t = 0;
		for (size_t i = 0; i < json_array_size(ty); i++)
			if (json_is_string(json_array_get(ty, i)))
				t |= type_bit(json_string_value(json_array_get(ty, i)));
	}
	const json_t *en = json_object_get(s, "enum"), *co = json_object_get(s, "const");
	if (json_is_array(en)) {
		unsigned e = 0;
		for (size_t i = 0; i < json_array_size(en); i++)
			e |= value_types(json_array_get(en, i));
		t &= e;
	}
	if (co)
		t &= value_types(co);
	const json_t *ref = json_object_get(s, "$ref");
	if (json_is_string(ref) && json_string_value(ref)[0] == '#') {
		int save = c->st;
		const json_t *tg = resolve_ref(c, json_string_value(ref));
		c->st = save;
		if (tg)
			t &= schema_types(c, tg, depth + 1);
	}
	const json_t *any = json_object_get(s, "anyOf");
	if (!any)
		any = json_object_get(s, "oneOf");
	if (json_is_array(any)) {
		unsigned u = 0;
		for (size_t i = 0; i < json_array_size(any); i++)
			u |= schema_types(c, json_array_get(any, i), depth + 1);
		t &= u;
	}
	return t;
}

/* ---- allOf: merging schemas -------------------------------------------------------------------- */

static json_t *own(struct sc *c, json_t *v)
{
	if (v && json_array_append_new(c->owned, v) == 0)
		return v;
	return NULL;
}

static json_t *all_of2(struct sc *c, const json_t *a, const json_t *b)
{
	if (!a || json_is_true(a))
		return (json_t *)b;
	if (!b || json_is_true(b))
		return (json_t *)a;
	if (json_is_false(a) || json_is_false(b))
		return json_false();
	return own(c, json_pack("{s:[OO]}", "allOf", a, b));
}

static int merge_into(struct sc *c, json_t *acc, const json_t *s, int depth);

/* acc (object) and s merged; -1 with c->st set when they cannot be. */
static int merge_key(struct sc *c, json_t *acc, const char *k, const json_t *v)
{
	json_t *old = json_object_get(acc, k);
	if (!old)
		return json_object_set(acc, k, (json_t *)v) ? (sc_oom(c), -1) : 0;
	if (json_equal(old, (json_t *)v))
		return 0;
	if (!strcmp(k, "type")) {
		unsigned a = 0, b = 0;
		json_t *tmp = own(c, json_pack("{sO}", "type", old)), *tmp2 = own(c, json_pack("{sO}", "type", v));
		if (!tmp || !tmp2)
			return sc_oom(c), -1;
		a = schema_types(c, tmp, 0);
		b = schema_types(c, tmp2, 0);
		unsigned t = a & b;
		json_t *arr = json_array();
		static const char *const N[] = { "null", "boolean", "object", "array", "string", "integer", "number" };
		if (!own(c, arr))
			return sc_oom(c), -1;
		if (t & 64)
			json_array_append_new(arr, json_string("number"));
		else if (t & 32)
			json_array_append_new(arr, json_string("integer"));
		for (unsigned i = 0; i < 5; i++)
			if (t & (1u << i))
				json_array_append_new(arr, json_string(N[i]));
		return json_object_set(acc, k, arr) ? (sc_oom(c), -1) : 0;
	}
	if (!strcmp(k, "required")) {
		json_t *u = own(c, json_deep_copy(old));
		if (!u || !json_is_array(v))
			return sc_oom(c), -1;
		for (size_t i = 0; i < json_array_size(v); i++) {
			int dup = 0;
			for (size_t j = 0; j < json_array_size(u); j++)
				dup |= json_equal(json_array_get(u, j), json_array_get(v, i));
			if (!dup)
				json_array_append(u, json_array_get(v, i));
		}
		return json_object_set(acc, k, u) ? (sc_oom(c), -1) : 0;
	}
	static const char *const MAXK[] = { "minimum", "exclusiveMinimum", "minLength", "minItems" };
	static const char *const MINK[] = { "maximum", "exclusiveMaximum", "maxLength", "maxItems" };
	for (int i = 0; i < 4; i++) {
		int is_max = !strcmp(k, MAXK[i]), is_min = !strcmp(k, MINK[i]);
		if ((is_max || is_min) && json_is_number(old) && json_is_number(v)) {
			double a = json_number_value(old), b = json_number_value(v);
			if ((is_max && b > a) || (is_min && b < a))
				return json_object_set(acc, k, (json_t *)v) ? (sc_oom(c), -1) : 0;
			return 0;
		}
	}
	if (!strcmp(k, "enum") && json_is_array(old) && json_is_array(v)) {
		json_t *e = own(c, json_array());
		if (!e)
			return sc_oom(c), -1;
		for (size_t i = 0; i < json_array_size(old); i++)
			for (size_t j = 0; j < json_array_size(v); j++)
				if (json_equal(json_array_get(old, i), json_array_get(v, j))) {
					json_array_append(e, json_array_get(old, i));
					break;
				}
		return json_object_set(acc, k, e) ? (sc_oom(c), -1) : 0;
	}
	if (!strcmp(k, "items") && json_is_object(old) && json_is_object(v)) {
		json_t *m = all_of2(c, old, v);
		return !m || json_object_set(acc, k, m) ? (sc_oom(c), -1) : 0;
	}
	if (is_annotation(k) && strcmp(k, "format"))
		return 0;
	sc_fail(c, CM_EUNSUPPORTED, "unsupported: allOf branches that disagree on '%s'", k);
	return -1;
}

/* properties and additionalProperties of two object schemas, exactly. */
static int merge_props(struct sc *c, json_t *acc, const json_t *s)
{
	const json_t *pa = json_object_get(acc, "properties"), *pb = json_object_get(s, "properties");
	const json_t *aa = json_object_get(acc, "additionalProperties"), *ab = json_object_get(s, "additionalProperties");
	if (!pb && !ab)
		return 0;
	json_t *props = own(c, json_object());
	if (!props)
		return sc_oom(c), -1;
	const char *k;
	json_t *v;
	if (pa)
		json_object_foreach((json_t *)pa, k, v) {
			const json_t *o = pb ? json_object_get(pb, k) : NULL;
			json_t *m = all_of2(c, v, o ? o : ab);
			if (!m || json_object_set(props, k, m))
				return sc_oom(c), -1;
		}
	if (pb)
		json_object_foreach((json_t *)pb, k, v) {
			if (pa && json_object_get(pa, k))
				continue;
			json_t *m = all_of2(c, aa, v);
			if (!m || json_object_set(props, k, m))
				return sc_oom(c), -1;
		}
	if (json_object_set(acc, "properties", props))
		return sc_oom(c), -1;
	if (aa || ab) {
		json_t *m = all_of2(c, aa, ab);
		if (!m || json_object_set(acc, "additionalProperties", m))
			return sc_oom(c), -1;
	}
	return 0;
}

static int merge_into(struct sc *c, json_t *acc, const json_t *s, int depth)
{
	if (depth > 32)
		return sc_fail(c, CM_EUNSUPPORTED, "%s", "allOf/$ref nested too deeply to merge"), -1;
	if (json_is_true(s))
		return 0;
	if (json_is_false(s)) {
		/* false: an empty enum, which matches nothing */
		return json_object_set_new(acc, "enum", json_array()) ? (sc_oom(c), -1) : 0;
	}
	if (!json_is_object(s))
		return sc_fail(c, CM_EINVAL, "%s", "expected a schema (an object or a boolean)"), -1;
	const json_t *ref = json_object_get(s, "$ref");
	if (ref) {
		if (!json_is_string(ref))
			return sc_fail(c, CM_EINVAL, "%s", "'$ref': expected a string"), -1;
		const json_t *t = resolve_ref(c, json_string_value(ref));
		if (!t || merge_into(c, acc, t, depth + 1) < 0)
			return -1;
	}
	const json_t *all = json_object_get(s, "allOf");
	if (all) {
		if (!json_is_array(all))
			return sc_fail(c, CM_EINVAL, "%s", "'allOf': expected an array"), -1;
		for (size_t i = 0; i < json_array_size(all); i++)
			if (merge_into(c, acc, json_array_get(all, i), depth + 1) < 0)
				return -1;
	}
	if (merge_props(c, acc, s))
		return -1;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		if (!strcmp(k, "$ref") || !strcmp(k, "allOf") || !strcmp(k, "properties") ||
		    !strcmp(k, "additionalProperties"))
			continue;
		if ((!strcmp(k, "anyOf") || !strcmp(k, "oneOf")) && json_object_get(acc, k)) {
			/* two lists of alternatives: their pairwise conjunctions */
			const json_t *A = json_object_get(acc, k);
			if (!json_is_array(v) || json_array_size(A) * json_array_size(v) > 256)
				return sc_fail(c, CM_EUNSUPPORTED, "unsupported: allOf of two large '%s' lists", k), -1;
			json_t *x = own(c, json_array());
			if (!x)
				return sc_oom(c), -1;
			for (size_t i = 0; i < json_array_size(A); i++)
				for (size_t j = 0; j < json_array_size(v); j++) {
					json_t *m = all_of2(c, json_array_get(A, i), json_array_get(v, j));
					if (!m || json_array_append(x, m))
						return sc_oom(c), -1;
				}
			if (json_object_set(acc, k, x))
				return sc_oom(c), -1;
			continue;
		}
		if (merge_key(c, acc, k, v))
			return -1;
	}
	return 0;
}

/* ---- one schema node ----------------------------------------------------------------------------- */

static struct wk_gx *sc_body(struct sc *c, const json_t *s);

static int has_assertions(const json_t *s, const char *skip1, const char *skip2)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)s, k, v) {
		(void)v;
		if (strcmp(k, skip1) && strcmp(k, skip2) && !is_annotation(k))
			return 1;
	}
	return 0;
}

static struct wk_gx *alternatives(struct sc *c, const json_t *s, const char *kw)
{
	struct wk_gram_b *b = c->b;
	const json_t *list = json_object_get(s, kw);
	if (!json_is_array(list))
		return sc_fail(c, CM_EINVAL, "'%s': expected an array", kw);
	size_t n = json_array_size(list);
	if (!strcmp(kw, "oneOf")) {
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				if (schema_types(c, json_array_get(list, i), 0) & schema_types(c, json_array_get(list, j), 0))
					return sc_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: oneOf whose branches can match the same type");
	}
	json_t *sib = NULL;
	if (has_assertions(s, kw, "")) {
		sib = own(c, json_deep_copy(s));
		if (!sib || json_object_del(sib, kw))
			return sc_oom(c);
	}
	struct wk_gx *alt = wk_gx_nothing(b);
	for (size_t i = 0; i < n; i++) {
		const json_t *br = json_array_get(list, i);
		if (sib) {
			json_t *m = own(c, json_object());
			if (!m || merge_into(c, m, sib, 0) < 0 || merge_into(c, m, br, 0) < 0)
				return c->st == CM_OK ? sc_oom(c) : NULL;
			br = m;
		}
		char seg[48];
		snprintf(seg, sizeof(seg), "%.8s/%zu", kw, i);
		struct wk_gx *x = sc_node(c, br, seg);
		if (!x)
			return NULL;
		alt = wk_gx_alt2(b, alt, x);
	}
	return alt ? alt : sc_oom(c);
}

static struct wk_gx *sc_body(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	if (json_is_true(s))
		return any_value(c);
	if (json_is_false(s))
		return wk_gx_nothing(b);
	if (!json_is_object(s))
		return sc_fail(c, CM_EINVAL, "%s", "expected a schema (an object or a boolean)");
	const json_t *ref = json_object_get(s, "$ref");
	if (json_object_get(s, "allOf") || (ref && has_assertions(s, "$ref", ""))) {
		json_t *m = own(c, json_object());
		if (!m || merge_into(c, m, s, 0) < 0)
			return c->st == CM_OK ? sc_oom(c) : NULL;
		return sc_body(c, m);
	}
	if (ref) {
		if (!json_is_string(ref))
			return sc_fail(c, CM_EINVAL, "%s", "'$ref': expected a string");
		const json_t *t = resolve_ref(c, json_string_value(ref));
		return t ? sc_node(c, t, "$ref") : NULL;
	}
	if (check_keywords(c, s))
		return NULL;
	if (json_object_get(s, "anyOf"))
		return alternatives(c, s, "anyOf");
	if (json_object_get(s, "oneOf"))
		return alternatives(c, s, "oneOf");
	unsigned types = T_ALL;
	const json_t *ty = json_object_get(s, "type");
	if (ty) {
		if (!json_is_string(ty) && !json_is_array(ty))
			return sc_fail(c, CM_EINVAL, "%s", "'type': expected a string or an array of strings");
		json_t *tmp = own(c, json_pack("{sO}", "type", ty));
		if (!tmp)
			return sc_oom(c);
		types = schema_types(c, tmp, 0);
	}
	const json_t *en = json_object_get(s, "enum"), *co = json_object_get(s, "const");
	if (en || co) {
		if (en && !json_is_array(en))
			return sc_fail(c, CM_EINVAL, "%s", "'enum': expected an array");
		struct wk_gx *alt = wk_gx_nothing(b);
		size_t n = co ? 1 : json_array_size(en);
		for (size_t i = 0; i < n; i++) {
			const json_t *v = co ? co : json_array_get(en, i);
			if (en && co && !json_equal((json_t *)v, json_array_get(en, i)))
				continue;
			unsigned vt = value_types(v);
			if (!(vt & types) && !(vt == 32 && (types & 64)))
				continue;
			alt = wk_gx_alt2(b, alt, literal_value(c, v));
		}
		return alt ? alt : sc_oom(c);
	}
	struct wk_gx *alt = wk_gx_nothing(b);
	if (types & 1)
		alt = wk_gx_alt2(b, alt, wk_gx_str(b, "null"));
	if (types & 2)
		alt = wk_gx_alt2(b, alt, wk_gx_alt2(b, wk_gx_str(b, "true"), wk_gx_str(b, "false")));
	if (types & 4)
		alt = wk_gx_alt2(b, alt, object_schema(c, s));
	if (types & 8)
		alt = wk_gx_alt2(b, alt, array_schema(c, s));
	if (types & 16)
		alt = wk_gx_alt2(b, alt, string_of(c, s));
	if (types & 96)
		alt = wk_gx_alt2(b, alt, number_range(c, s, !(types & 64)));
	if (c->st != CM_OK)
		return NULL;
	return alt ? alt : sc_oom(c);
}

static uint32_t sc_node_rule(struct sc *c, const json_t *s, const char *seg)
{
	for (size_t i = 0; i < c->n_memo; i++)
		if (c->memo[i].node == s)
			return c->memo[i].rule;
	if (c->depth >= c->o.max_depth) {
		sc_fail(c, CM_ELIMIT, "%s", "schema nested deeper than grammar.schema_depth");
		return UINT32_MAX;
	}
	if (c->n_memo == c->cap_memo) {
		size_t cap = c->cap_memo ? 2 * c->cap_memo : 64;
		struct memo *m = cm_reallocarray(c->memo, cap, sizeof(*m));
		if (!m) {
			sc_oom(c);
			return UINT32_MAX;
		}
		c->memo = m;
		c->cap_memo = cap;
	}
	uint32_t r = wk_gram_rule(c->b, seg[0] ? seg : "root", 1);
	if (r == UINT32_MAX) {
		sc_oom(c);
		return r;
	}
	c->memo[c->n_memo++] = (struct memo){ .node = s, .rule = r };
	size_t plen = strlen(c->path);
	snprintf(c->path + plen, sizeof(c->path) - plen, "%s%s", seg[0] ? "/" : "", seg);
	c->depth++;
	struct wk_gx *body = sc_body(c, s);
	c->depth--;
	c->path[plen] = 0;
	if (!body)
		return UINT32_MAX;
	wk_gram_set_body(c->b, r, body);
	return r;
}

static struct wk_gx *sc_node(struct sc *c, const json_t *s, const char *seg)
{
	uint32_t r = sc_node_rule(c, s, seg);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

void wk_schema_opts_default(struct wk_schema_opts *o)
{
	o->compact = 0;
	o->max_depth = 64;
}

enum cm_status wk_schema_compile(struct wk_gram_b *b, const json_t *schema,
				 const struct wk_schema_opts *o, uint32_t *root, char *err, size_t err_len)
{
	struct sc c = { .b = b, .root = schema, .err = err, .err_len = err_len, .st = CM_OK };
	if (o)
		c.o = *o;
	else
		wk_schema_opts_default(&c.o);
	c.owned = json_array();
	if (!c.owned)
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	*root = sc_node_rule(&c, schema, "");
	if (*root == UINT32_MAX && c.st == CM_OK)
		sc_oom(&c);
	if (c.st == CM_OK && wk_gram_b_broken(b))
		sc_oom(&c);
	json_decref(c.owned);
	cm_free(c.memo);
	return c.st;
}
