/*
 * schema_value.c - the JSON value pieces of the schema compiler: string
 * content with JSON escapes (and patterns through regex.c), formats,
 * integer and number ranges written digit by digit, objects with their
 * properties in the schema's order, arrays with item counts and tuples,
 * and the "any JSON value" rule.
 *
 * Pure computation, any thread.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"
#include "worker/grammar/regex.h"
#include "worker/grammar/schema_internal.h"
#include "worker/grammar/length.h"

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
struct wk_gx *wk_schema_json_class(void *ctx, struct wk_gram_b *b, const uint32_t *ranges, size_t n,
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

struct wk_gx *wk_schema_ws(struct sc *c)
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

struct wk_gx *wk_schema_jchar(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_jchar, "char", mk_jchar);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

static struct wk_gx *mk_str(struct sc *c)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *k[3] = { wk_gx_str(b, "\""), wk_gx_rep(b, wk_schema_jchar(c), 0, WK_GRAM_INF), wk_gx_str(b, "\"") };
	return wk_gx_seq(b, k, 3);
}

struct wk_gx *wk_schema_any_string(struct sc *c)
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

struct wk_gx *wk_schema_any_value(struct sc *c)
{
	uint32_t r = sc_rule(c, &c->r_any, "value", mk_any);
	return r == UINT32_MAX ? NULL : wk_gx_ref(c->b, r);
}

/* "[" ws ( item ( ws "," ws item ){min-1,max-1} )? ws "]" */
static struct wk_gx *array_of(struct sc *c, struct wk_gx *item, uint32_t min, uint32_t max)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ wk_schema_ws(c), wk_gx_str(b, ","), wk_schema_ws(c) }, 3);
	struct wk_gx *body;
	if (max == 0) {
		body = wk_gx_empty(b);
	} else {
		uint32_t rmin = min ? min - 1 : 0, rmax = max == WK_GRAM_INF ? WK_GRAM_INF : max - 1;
		body = wk_gx_seq2(b, item, wk_gx_rep(b, wk_gx_seq2(b, sep, item), rmin, rmax));
		if (min == 0)
			body = wk_gx_opt(b, body);
	}
	struct wk_gx *k[5] = { wk_gx_str(b, "["), wk_schema_ws(c), body, wk_schema_ws(c), wk_gx_str(b, "]") };
	return wk_gx_seq(b, k, 5);
}

/* "{" ws ( kv ( ws "," ws kv )* )? ws "}" with kv = string ws ":" ws value */
static struct wk_gx *object_of(struct sc *c, struct wk_gx *key, struct wk_gx *value)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *kv = wk_gx_seq(b, (struct wk_gx *[]){ key, wk_schema_ws(c), wk_gx_str(b, ":"), wk_schema_ws(c), value }, 5);
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ wk_schema_ws(c), wk_gx_str(b, ","), wk_schema_ws(c) }, 3);
	struct wk_gx *body = wk_gx_opt(b, wk_gx_seq2(b, kv, wk_gx_rep(b, wk_gx_seq2(b, sep, kv), 0, WK_GRAM_INF)));
	struct wk_gx *k[5] = { wk_gx_str(b, "{"), wk_schema_ws(c), body, wk_schema_ws(c), wk_gx_str(b, "}") };
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
	struct wk_gx *k[7] = { object_of(c, wk_schema_any_string(c), v), array_of(c, v, 0, WK_GRAM_INF), wk_schema_any_string(c),
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
	uint64_t v;     /* integer part of the magnitude */
	char frac[24];  /* its fraction digits, no trailing zeros ("" = none) */
};

/* Digit strings S (after the '.') with 0.S >= 0.D (> when !incl); D != "". */
static struct wk_gx *frac_ge(struct wk_gram_b *b, const char *D, int incl)
{
	struct wk_gx *nz = wk_gx_seq(b, (struct wk_gx *[]){ digits(b, 0), wk_gx_cp(b, '1', '9'), digits(b, 0) }, 3);
	uint32_t d = (uint32_t)(uint8_t)D[0];
	struct wk_gx *above = d < '9' ? wk_gx_seq2(b, wk_gx_cp(b, d + 1, '9'), digits(b, 0)) : wk_gx_nothing(b);
	struct wk_gx *tail = D[1] ? frac_ge(b, D + 1, incl) : (incl ? digits(b, 0) : nz);
	return wk_gx_alt2(b, above, wk_gx_seq2(b, wk_gx_lit(b, D, 1), tail));
}

/* Digit strings S with 0.S <= 0.D (< when !incl); D != "". */
static struct wk_gx *frac_le(struct wk_gram_b *b, const char *D, int incl)
{
	uint32_t d = (uint32_t)(uint8_t)D[0];
	struct wk_gx *below = d > '0' ? wk_gx_seq2(b, wk_gx_cp(b, '0', d - 1), digits(b, 0)) : wk_gx_nothing(b);
	struct wk_gx *tail = D[1] ? wk_gx_opt(b, frac_le(b, D + 1, incl))
				  : (incl ? wk_gx_rep(b, wk_gx_str(b, "0"), 0, WK_GRAM_INF) : wk_gx_nothing(b));
	return wk_gx_alt2(b, below, wk_gx_seq2(b, wk_gx_lit(b, D, 1), tail));
}

/* Non-empty digit strings S with 0.L <(=) 0.S <(=) 0.H, where 0.L < 0.H
 * (L may be "", H is not). */
static struct wk_gx *frac_between(struct wk_gram_b *b, const char *L, int li, const char *H, int hi)
{
	struct wk_gx *nz = wk_gx_seq(b, (struct wk_gx *[]){ digits(b, 0), wk_gx_cp(b, '1', '9'), digits(b, 0) }, 3);
	uint32_t l0 = L[0] ? (uint32_t)(uint8_t)L[0] : '0', h0 = (uint32_t)(uint8_t)H[0];
	const char *lr = L[0] ? L + 1 : L, *hr = H + 1;
	if (l0 == h0)
		return wk_gx_seq2(b, wk_gx_lit(b, H, 1), frac_between(b, lr, li, hr, hi));
	/* first digit l0: the rest >= lr; between: anything; h0: the rest <= hr */
	struct wk_gx *ge_rest = lr[0] ? frac_ge(b, lr, li) : (li ? digits(b, 0) : nz);
	struct wk_gx *le_rest = hr[0] ? wk_gx_opt(b, frac_le(b, hr, hi))
				      : (hi ? wk_gx_rep(b, wk_gx_str(b, "0"), 0, WK_GRAM_INF) : wk_gx_nothing(b));
	char lc = (char)l0, hc = (char)h0;
	struct wk_gx *k[3] = {
		wk_gx_seq2(b, wk_gx_lit(b, &lc, 1), ge_rest),
		l0 + 1 <= h0 - 1 ? wk_gx_seq2(b, wk_gx_cp(b, l0 + 1, h0 - 1), digits(b, 0)) : wk_gx_nothing(b),
		wk_gx_seq2(b, wk_gx_lit(b, &hc, 1), le_rest),
	};
	return wk_gx_alt(b, k, 3);
}

/* lo <=> hi as decimals. */
static int bound_cmp(const struct bound *x, const struct bound *y)
{
	if (x->v != y->v)
		return x->v < y->v ? -1 : 1;
	int c = strcmp(x->frac, y->frac);
	return c < 0 ? -1 : c > 0;
}

/* Unsigned decimal text with value y: lo <(=) y <(=) hi (lo.has always). */
static struct wk_gx *nonneg(struct wk_gram_b *b, struct bound lo, struct bound hi, int is_int)
{
	struct wk_gx *fany = is_int ? wk_gx_empty(b) : wk_gx_opt(b, frac_any(b));
	struct wk_gx *fzero = is_int ? wk_gx_empty(b)
				     : wk_gx_opt(b, wk_gx_seq2(b, wk_gx_str(b, "."), wk_gx_rep(b, wk_gx_str(b, "0"), 1, WK_GRAM_INF)));
	struct wk_gx *fnz = is_int ? wk_gx_nothing(b)
				   : wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "."), digits(b, 0), wk_gx_cp(b, '1', '9'), digits(b, 0) }, 4);
	char s[24];
	if (hi.has) {
		int c = bound_cmp(&lo, &hi);
		if (c > 0 || (c == 0 && !(lo.incl && hi.incl)))
			return wk_gx_nothing(b);
		if (c == 0) { /* exactly one value */
			snprintf(s, sizeof(s), "%llu", (unsigned long long)lo.v);
			if (!lo.frac[0])
				return wk_gx_seq2(b, wk_gx_str(b, s), fzero);
			if (is_int)
				return wk_gx_nothing(b);
			return wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, s), wk_gx_str(b, "."), wk_gx_str(b, lo.frac),
								 wk_gx_rep(b, wk_gx_str(b, "0"), 0, WK_GRAM_INF) }, 4);
		}
		if (lo.v == hi.v) { /* one integer part, the fraction between */
			snprintf(s, sizeof(s), "%llu", (unsigned long long)lo.v);
			struct wk_gx *none = !lo.frac[0] && lo.incl ? wk_gx_empty(b) : wk_gx_nothing(b);
			if (is_int)
				return wk_gx_seq2(b, wk_gx_str(b, s), none);
			struct wk_gx *fr = wk_gx_seq2(b, wk_gx_str(b, "."), frac_between(b, lo.frac, lo.incl, hi.frac, hi.incl));
			return wk_gx_seq2(b, wk_gx_str(b, s), wk_gx_alt2(b, none, fr));
		}
	}
	snprintf(s, sizeof(s), "%llu", (unsigned long long)lo.v);
	struct wk_gx *lo_frac = !lo.frac[0] ? (lo.incl ? fany : fnz)
					    : wk_gx_seq2(b, wk_gx_str(b, "."), frac_ge(b, lo.frac, lo.incl));
	struct wk_gx *at_lo = wk_gx_seq2(b, wk_gx_str(b, s), lo_frac);
	struct wk_gx *mid = wk_gx_nothing(b);
	if (lo.v < UINT64_MAX && (!hi.has || (hi.v >= 1 && lo.v + 1 <= hi.v - 1)))
		mid = wk_gx_seq2(b, uint_range(b, lo.v + 1, hi.has ? hi.v - 1 : 0, hi.has), fany);
	struct wk_gx *at_hi = wk_gx_nothing(b);
	if (hi.has) {
		snprintf(s, sizeof(s), "%llu", (unsigned long long)hi.v);
		if (!hi.frac[0])
			at_hi = hi.incl ? wk_gx_seq2(b, wk_gx_str(b, s), fzero) : wk_gx_nothing(b);
		else
			at_hi = wk_gx_seq2(b, wk_gx_str(b, s),
					   wk_gx_opt(b, wk_gx_seq2(b, wk_gx_str(b, "."), frac_le(b, hi.frac, hi.incl))));
	}
	return wk_gx_alt(b, (struct wk_gx *[]){ at_lo, mid, at_hi }, 3);
}

/* |x| as a bound: the shortest fixed-point decimal that reads back as x;
 * 0 when it needs more than 15 integer or 20 fraction digits (refused). */
static int mkbound(double x, int incl, struct bound *o)
{
	x = fabs(x);
	memset(o, 0, sizeof(*o));
	o->has = 1;
	o->incl = incl;
	char t[64];
	if (!isfinite(x) || x >= 1e15)
		return 0;
	int p = 0;
	for (; p <= 20; p++) {
		snprintf(t, sizeof(t), "%.*f", p, x);
		if (strtod(t, NULL) == x)
			break;
	}
	if (p > 20)
		return 0;
	char *dot = strchr(t, '.');
	if (dot) {
		*dot = 0;
		snprintf(o->frac, sizeof(o->frac), "%s", dot + 1);
		size_t n = strlen(o->frac);
		while (n && o->frac[n - 1] == '0')
			o->frac[--n] = 0;
	}
	if (strlen(t) > 15)
		return 0;
	o->v = strtoull(t, NULL, 10);
	return 1;
}

/* A bound from the schema (a number; draft 4 boolean exclusives read by the caller). */
static int read_bound(struct sc *c, const json_t *s, const char *key, double *v, int *has)
{
	const json_t *x = json_object_get(s, key);
	*has = 0;
	if (!x)
		return 0;
	if (json_is_boolean(x) && (!strcmp(key, "exclusiveMinimum") || !strcmp(key, "exclusiveMaximum")))
		return 0; /* draft 4 flags, read by the caller */
	if (!json_is_number(x)) {
		wk_schema_fail(c, CM_EINVAL, "'%s': expected a number", key);
		return -1;
	}
	*v = json_number_value(x);
	*has = 1;
	return 0;
}

/* d when m is 10^-d (1, 0.1, 0.01 ... 1e-15), else -1. */
static int decimal_step(double m)
{
	double p = 1;
	for (int d = 0; d <= 15; d++, p *= 10)
		if (fabs(m * p - 1) < 1e-9)
			return d;
	return -1;
}

static struct wk_gx *number_body(struct sc *c, const json_t *s, int is_int, int shared);

/*
 * multipleOf: for integers, any 10^-d (and so 1) says nothing; for numbers,
 * 10^-d means at most d fraction digits that are not zeros (decimal, as
 * validators read "10.99" with multipleOf 0.01), written without exponent:
 * the number's grammar in product with that pattern; an integer step k
 * (up to 1000): integers whose digits, read modulo k, end at 0 (numbers
 * are then written as integers).  Other steps are refused.
 */
struct wk_gx *wk_schema_number(struct sc *c, const json_t *s, int is_int)
{
	const json_t *mo = json_object_get(s, "multipleOf");
	if (!mo)
		return number_body(c, s, is_int, 1);
	if (!json_is_number(mo) || !(json_number_value(mo) > 0))
		return wk_schema_fail(c, CM_EINVAL, "%s", "'multipleOf': expected a number above 0");
	double m = json_number_value(mo);
	int d = decimal_step(m);
	if (is_int && (d >= 0 || m == 1))
		return number_body(c, s, is_int, 1);
	if (d < 0 && m == floor(m) && m <= 1000) {
		/* an integer step k: integers (numbers written as integers)
		 * whose digits read modulo k end at 0 */
		struct wk_gx *body = number_body(c, s, is_int, 0), *rx = NULL, *out = NULL;
		char e[256];
		static const char int_re[] = "^-?(0|[1-9][0-9]*)$";
		if (!body)
			return NULL;
		enum cm_status st = wk_regex_compile(c->b, int_re, strlen(int_re), wk_regex_plain_class, NULL, &rx, e, sizeof(e));
		if (st == CM_OK)
			st = wk_gx_product_mod(c->b, (const struct wk_gx *const[]){ body, rx }, 2, 0, WK_GRAM_INF,
					       (uint32_t)m, wk_regex_plain_class, NULL, &out, e, sizeof(e));
		if (st != CM_OK)
			return wk_schema_fail(c, st == CM_ELIMIT ? CM_EUNSUPPORTED : st, "%s", e);
		return out;
	}
	if (d < 0)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s", "unsupported keyword 'multipleOf'");
	struct wk_gx *body = number_body(c, s, is_int, 0), *rx = NULL, *out = NULL;
	if (!body)
		return NULL;
	char re[64], e[256];
	snprintf(re, sizeof(re), "^-?(0|[1-9][0-9]*)(\\.[0-9]{0,%d}0*)?$", d);
	enum cm_status st = wk_regex_compile(c->b, re, strlen(re), wk_regex_plain_class, NULL, &rx, e, sizeof(e));
	if (st == CM_OK)
		st = wk_gx_product(c->b, (const struct wk_gx *const[]){ body, rx }, 2, 0, WK_GRAM_INF,
				   wk_regex_plain_class, NULL, &out, e, sizeof(e));
	if (st != CM_OK)
		return wk_schema_fail(c, st == CM_ELIMIT ? CM_EUNSUPPORTED : st, "%s", e);
	return out;
}

/* The number or integer of s's bounds; `shared`: the unbounded ones as
 * the compile's shared rule (else their own expression). */
static struct wk_gx *number_body(struct sc *c, const json_t *s, int is_int, int shared)
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
	if (!hmn && !hmx && !shared)
		return is_int ? mk_int(c) : mk_num(c);
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
	struct wk_gx *pos = wk_gx_nothing(b), *neg = wk_gx_nothing(b);
	struct bound bmn, bmx;
	if ((hmn && !mkbound(mn, lo_incl, &bmn)) || (hmx && !mkbound(mx, hi_incl, &bmx)))
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: a number bound written with an exponent or beyond 15 digits");
	/* x >= 0 */
	if (!hmx || mx >= 0) {
		struct bound lo = { 1, 1, 0, "" }, hi = { 0, 0, 0, "" };
		if (hmx)
			hi = bmx;
		if (hmn && mn >= 0)
			lo = bmn;
		pos = nonneg(b, lo, hi, is_int);
	}
	/* x < 0, written "-" y with y > 0 */
	if (!hmn || mn < 0) {
		struct bound lo = { 1, 0, 0, "" }, hi = { 0, 0, 0, "" };
		if (hmn)
			hi = bmn;
		if (hmx && mx < 0)
			lo = bmx;
		neg = wk_gx_seq2(b, wk_gx_str(b, "-"), nonneg(b, lo, hi, is_int));
	}
	return wk_gx_alt2(b, pos, neg);
}

/* ---- strings ---------------------------------------------------------------------------- */

int wk_schema_format_asserts(const char *f)
{
	/* formats of the JSON Schema vocabulary that validators check; those
	 * without a pattern below are refused, other names are annotations */
	static const char *const F[] = { "date", "time", "date-time", "uuid", "email", "uri", "ipv4",
					 "hostname", "regex", "iri", "iri-reference", "uri-reference",
					 "idn-email", "idn-hostname", "ipv6", "json-pointer",
					 "relative-json-pointer", "uri-template", "duration" };
	for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++)
		if (!strcmp(F[i], f))
			return 1;
	return 0;
}

static const char *format_regex(const char *f)
{
	static const struct {
		const char *name, *re;
	} F[] = {
		{ "date", "^([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)$" },
		{ "time", "^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
		{ "date-time", "^([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$" },
		{ "uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$" },
		{ "email", "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$" },
		{ "uri", "^[A-Za-z][A-Za-z0-9+.-]*:[^\\x00-\\x20\"<>\\\\^`{|}]*$" },
		{ "ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$" },
		{ "hostname", "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$" },
		/* hexadecimal groups (with one "::"); the forms ending in a
		 * dotted IPv4 address and zone ids are not written */
		{ "ipv6", "^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}|:((:[0-9a-fA-F]{1,4}){1,7}|:))$" },
	};
	for (size_t i = 0; i < sizeof(F) / sizeof(F[0]); i++)
		if (!strcmp(F[i].name, f))
			return F[i].re;
	return NULL;
}

int wk_schema_count(struct sc *c, const json_t *s, const char *key, uint32_t *v, uint32_t dflt)
{
	const json_t *x = json_object_get(s, key);
	*v = dflt;
	if (!x)
		return 0;
	double d = json_number_value(x);
	if (!json_is_number(x) || d < 0 || d != floor(d)) {
		wk_schema_fail(c, CM_EINVAL, "'%s': expected a non-negative integer", key);
		return -1;
	}
	*v = d > 100000 ? 100000 : (uint32_t)d;
	return 0;
}

/* The patterns a string must match: pattern, format's, and those an allOf
 * merge added ("$sluice_patterns"); n set, -1 after an error. */
static int string_patterns(struct sc *c, const json_t *s, const char **re, size_t *n)
{
	const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
	const json_t *more = json_object_get(s, "$sluice_patterns");
	*n = 0;
	if (pat) {
		if (!json_is_string(pat))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'pattern': expected a string"), -1;
		re[(*n)++] = json_string_value(pat);
	}
	for (size_t i = 0; i < json_array_size(more) && *n < 3; i++)
		if (json_is_string(json_array_get(more, i)))
			re[(*n)++] = json_string_value(json_array_get(more, i));
	if (json_array_size(more) > 2)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: more than three patterns at once"), -1;
	if (fmt && json_is_string(fmt)) {
		const char *fr = format_regex(json_string_value(fmt));
		if (wk_schema_format_asserts(json_string_value(fmt)) && !fr)
			return wk_schema_fail(c, CM_EUNSUPPORTED, "unsupported format '%s'", json_string_value(fmt)), -1;
		if (fr)
			re[(*n)++] = fr;
	}
	return 0;
}

struct wk_gx *wk_schema_string(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	uint32_t mn, mx;
	const char *re[4];
	size_t nre = 0;
	if (wk_schema_count(c, s, "minLength", &mn, 0) || wk_schema_count(c, s, "maxLength", &mx, WK_GRAM_INF) ||
	    string_patterns(c, s, re, &nre))
		return NULL;
	/* strings it may not be (a not of listed strings: schema_rewrite.c) */
	const json_t *nots = json_object_get(s, "$sluice_not_strings");
	size_t n_nots = json_array_size(nots);
	const char *not_names[64];
	if (n_nots > 64)
		return wk_schema_fail(c, CM_EUNSUPPORTED, "%s", "unsupported: more than 64 excluded strings");
	for (size_t i = 0; i < n_nots; i++) {
		if (!json_is_string(json_array_get(nots, i)))
			return wk_schema_fail(c, CM_EINVAL, "%s", "'$sluice_not_strings': expected strings");
		not_names[i] = json_string_value(json_array_get(nots, i));
	}
	if (!nre && !n_nots && mn == 0 && mx == WK_GRAM_INF)
		return wk_schema_any_string(c);
	/* one named rule per distinct constraint: equal constraints share it
	 * (and so share their cached masks) */
	char sig[96];
	size_t klen = 0;
	snprintf(sig, sizeof(sig), "%u,%u,", mn, mx);
	for (size_t i = 0; i < nre; i++)
		klen += strlen(re[i]) + 1;
	char *key = cm_malloc(strlen(sig) + klen + 1);
	if (!key)
		return wk_schema_oom(c);
	strcpy(key, sig);
	for (size_t i = 0; i < nre; i++) {
		strcat(key, re[i]);
		strcat(key, "\x01");
	}
	if (n_nots) {
		/* excluded strings: not shared (rare), the rule is this node's */
		key[0] = '\0';
	}
	json_t *hit = key[0] ? json_object_get(c->strings, key) : NULL;
	if (hit) {
		cm_free(key);
		return wk_gx_ref(b, (uint32_t)json_integer_value(hit));
	}
	uint32_t rule = wk_gram_rule(b, "string", 1);
	if (rule == UINT32_MAX || (key[0] && json_object_set_new(c->strings, key, json_integer(rule)))) {
		cm_free(key);
		return wk_schema_oom(c);
	}
	cm_free(key);
	struct wk_gx *body;
	if (n_nots || nre > 1 || (nre && (mn != 0 || mx != WK_GRAM_INF))) {
		/* the strings every pattern matches, of mn..mx code points: the
		 * patterns' automata in product with a counter (length.c),
		 * atoms JSON-escaped */
		char e[256];
		struct wk_gx *raw[4];
		size_t nraw = nre;
		enum cm_status st = CM_OK;
		for (size_t i = 0; i < nre && st == CM_OK; i++)
			st = wk_regex_compile(b, re[i], strlen(re[i]), wk_regex_plain_class, NULL, &raw[i], e, sizeof(e));
		if (st == CM_OK && n_nots && !(raw[nraw++] = wk_gx_other_names(b, not_names, n_nots, wk_regex_plain_class, NULL,
							       wk_gx_rep(b, wk_gx_class(b, NULL, 0, 1), 0, WK_GRAM_INF))))
			return wk_schema_oom(c);
		if (st == CM_OK)
			st = wk_gx_product(b, (const struct wk_gx *const *)raw, nraw, mn, mx,
					   wk_schema_json_class, NULL, &body, e, sizeof(e));
		if (st != CM_OK)
			return wk_schema_fail(c, st == CM_EINVAL || st == CM_ELIMIT ? CM_EUNSUPPORTED : st,
					      "%s", e);
	} else if (nre) {
		char e[256];
		enum cm_status st = wk_regex_compile(b, re[0], strlen(re[0]), wk_schema_json_class, NULL, &body, e, sizeof(e));
		if (st != CM_OK)
			return wk_schema_fail(c, st == CM_EINVAL ? CM_EUNSUPPORTED : st, "%s", e);
	} else {
		body = wk_gx_rep(b, wk_schema_jchar(c), mn, mx);
	}
	struct wk_gx *str = wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "\""), body, wk_gx_str(b, "\"") }, 3);
	if (!str)
		return wk_schema_oom(c);
	wk_gram_set_body(b, rule, str);
	return wk_gx_ref(b, rule);
}

/* A property name: a JSON string of the pattern's strings that are none
 * of names[0..n) (patternProperties beside listed names). */
struct wk_gx *wk_schema_pattern_key(struct sc *c, const char *re, const char *const *names, size_t n)
{
	struct wk_gram_b *b = c->b;
	struct wk_gx *raw[2], *body = NULL;
	char e[256];
	enum cm_status st = wk_regex_compile(b, re, strlen(re), wk_regex_plain_class, NULL, &raw[0], e, sizeof(e));
	if (st == CM_OK && !(raw[1] = wk_gx_other_names(b, names, n, wk_regex_plain_class, NULL,
							   wk_gx_rep(b, wk_gx_class(b, NULL, 0, 1), 0, WK_GRAM_INF))))
		return wk_schema_oom(c);
	if (st == CM_OK)
		st = wk_gx_product(b, (const struct wk_gx *const *)raw, 2, 0, WK_GRAM_INF,
				   wk_schema_json_class, NULL, &body, e, sizeof(e));
	if (st != CM_OK)
		return wk_schema_fail(c, st == CM_EINVAL || st == CM_ELIMIT ? CM_EUNSUPPORTED : st, "%s", e);
	return wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "\""), body, wk_gx_str(b, "\"") }, 3);
}

/* ---- canonical JSON text of a value (enum, const, property names) ---------------------- */

struct wk_gx *wk_schema_literal(struct sc *c, const json_t *v)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
	if (!t)
		return wk_schema_oom(c);
	struct wk_gx *x = wk_gx_str(c->b, t);
	free(t);
	return x;
}

struct wk_gx *wk_schema_key_literal(struct sc *c, const char *k)
{
	json_t *s = json_string(k);
	if (!s)
		return wk_schema_oom(c);
	struct wk_gx *x = wk_schema_literal(c, s);
	json_decref(s);
	return x;
}

/* ---- arrays -------------------------------------------------------------------------------- */

struct wk_gx *wk_schema_array(struct sc *c, const json_t *s)
{
	struct wk_gram_b *b = c->b;
	uint32_t mn, mx;
	if (wk_schema_count(c, s, "minItems", &mn, 0) || wk_schema_count(c, s, "maxItems", &mx, WK_GRAM_INF))
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
		return wk_schema_fail(c, CM_EINVAL, "%s", "'prefixItems': expected an array");
	size_t k = prefix ? json_array_size(prefix) : 0;
	if (mx != WK_GRAM_INF && mn > mx)
		return wk_gx_nothing(b);
	struct wk_gx *sep = wk_gx_seq(b, (struct wk_gx *[]){ wk_schema_ws(c), wk_gx_str(b, ","), wk_schema_ws(c) }, 3);
	struct wk_gx *r = NULL;
	int rest_ok = !json_is_false(rest);
	if (rest_ok)
		r = rest && !json_is_true(rest) ? wk_schema_node(c, rest, json_is_array(items) ? "additionalItems" : "items") : wk_schema_any_value(c);
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
		struct wk_gx *e = wk_schema_node(c, json_array_get(prefix, j), seg);
		if (!e)
			return NULL;
		struct wk_gx *step = wk_gx_seq(b, (struct wk_gx *[]){ j ? sep : wk_gx_empty(b), e, tail }, 3);
		tail = j < mn ? step : wk_gx_opt(b, step);
	}
	return wk_gx_seq(b, (struct wk_gx *[]){ wk_gx_str(b, "["), wk_schema_ws(c), tail, wk_schema_ws(c), wk_gx_str(b, "]") }, 5);
}

