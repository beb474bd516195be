/*
 * regex.c - ECMAScript pattern to grammar expression (regex.h): a
 * recursive-descent parser over the pattern's code points.
 *
 * Pure computation, any thread.  Recursion depth is bounded by the
 * group nesting limit (REGEX_MAX_DEPTH).
 */
#include "worker/grammar/regex.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

#define REGEX_MAX_DEPTH 64
#define REGEX_MAX_RANGES 512
#define REGEX_MAX_REPEAT 10000

struct rx {
	struct wk_gram_b *b;
	const uint32_t *cp;
	size_t n, i;
	int depth;
	wk_regex_class_fn cls;
	void *ctx;
	char *err;
	size_t err_len;
	enum cm_status st;
};

static struct wk_gx *rx_fail(struct rx *r, const char *what)
{
	if (r->st == CM_OK)
		r->st = cm_fail(r->err, r->err_len, CM_EINVAL, "pattern: %s at offset %zu", what, r->i);
	return NULL;
}

static const uint32_t R_DIGIT[] = { '0', '9' };
static const uint32_t R_WORD[] = { '0', '9', 'A', 'Z', '_', '_', 'a', 'z' };
static const uint32_t R_SPACE[] = { 9, 13, ' ', ' ', 0xA0, 0xA0, 0x1680, 0x1680, 0x2000, 0x200A,
				    0x2028, 0x2029, 0x202F, 0x202F, 0x205F, 0x205F, 0x3000, 0x3000,
				    0xFEFF, 0xFEFF };
static const uint32_t R_DOT_NOT[] = { '\n', '\n', '\r', '\r', 0x2028, 0x2029 };

struct rset {
	uint32_t r[2 * REGEX_MAX_RANGES];
	size_t n;
	int overflow;
};

static void rs_add(struct rset *s, uint32_t lo, uint32_t hi)
{
	if (s->n >= REGEX_MAX_RANGES) {
		s->overflow = 1;
		return;
	}
	s->r[2 * s->n] = lo;
	s->r[2 * s->n + 1] = hi;
	s->n++;
}

static void rs_add_list(struct rset *s, const uint32_t *r, size_t pairs)
{
	for (size_t i = 0; i < pairs; i++)
		rs_add(s, r[2 * i], r[2 * i + 1]);
}

/* Complement of a list within 0..10FFFF (for \D \W \S inside classes). */
static void rs_add_negated(struct rset *s, const uint32_t *r, size_t pairs)
{
	uint32_t next = 0;
	for (size_t i = 0; i < pairs; i++) {
		if (r[2 * i] > next)
			rs_add(s, next, r[2 * i] - 1);
		next = r[2 * i + 1] + 1;
	}
	rs_add(s, next, 0x10FFFF);
}

static int hexval(uint32_t c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	if (c >= 'a' && c <= 'f')
		return (int)(c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (int)(c - 'A' + 10);
	return -1;
}

static int rx_hex(struct rx *r, int digits, uint32_t *out)
{
	uint32_t v = 0;
	for (int k = 0; k < digits; k++) {
		if (r->i >= r->n || hexval(r->cp[r->i]) < 0)
			return -1;
		v = v * 16 + (uint32_t)hexval(r->cp[r->i++]);
	}
	*out = v;
	return 0;
}

/*
 * One escape after '\': a single code point (*cp) or a class added to s
 * (returns 1).  0 for a code point, -1 on error.
 */
static int rx_escape(struct rx *r, struct rset *s, uint32_t *cp)
{
	if (r->i >= r->n) {
		rx_fail(r, "'\\' at the end");
		return -1;
	}
	uint32_t c = r->cp[r->i++];
	switch (c) {
	case 'd': rs_add_list(s, R_DIGIT, 1); return 1;
	case 'D': rs_add_negated(s, R_DIGIT, 1); return 1;
	case 'w': rs_add_list(s, R_WORD, 4); return 1;
	case 'W': rs_add_negated(s, R_WORD, 4); return 1;
	case 's': rs_add_list(s, R_SPACE, 10); return 1;
	case 'S': rs_add_negated(s, R_SPACE, 10); return 1;
	case 'n': *cp = '\n'; return 0;
	case 't': *cp = '\t'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 'f': *cp = '\f'; return 0;
	case 'v': *cp = '\v'; return 0;
	case '0': *cp = 0; return 0;
	case 'x':
		if (rx_hex(r, 2, cp)) {
			rx_fail(r, "expected two hex digits after \\x");
			return -1;
		}
		return 0;
	case 'u':
		if (r->i < r->n && r->cp[r->i] == '{') {
			r->i++;
			uint32_t v = 0;
			int nd = 0;
			while (r->i < r->n && hexval(r->cp[r->i]) >= 0 && nd < 6)
				v = v * 16 + (uint32_t)hexval(r->cp[r->i++]), nd++;
			if (!nd || r->i >= r->n || r->cp[r->i] != '}' || v > 0x10FFFF) {
				rx_fail(r, "bad \\u{...} escape");
				return -1;
			}
			r->i++;
			*cp = v;
			return 0;
		}
		if (rx_hex(r, 4, cp)) {
			rx_fail(r, "expected four hex digits after \\u");
			return -1;
		}
		return 0;
	case 'b':
	case 'B':
		rx_fail(r, "word boundaries (\\b, \\B) are not supported");
		return -1;
	case 'c':
	case 'k':
	case 'p':
	case 'P':
		rx_fail(r, "this escape (\\c, \\k, \\p, \\P) is not supported");
		return -1;
	default:
		if (c >= '1' && c <= '9') {
			rx_fail(r, "backreferences are not supported");
			return -1;
		}
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
			rx_fail(r, "unknown escape");
			return -1;
		}
		*cp = c; /* escaped punctuation, itself */
		return 0;
	}
}

static struct wk_gx *rx_class(struct rx *r)
{
	struct rset s = { .n = 0 };
	int neg = 0;
	if (r->i < r->n && r->cp[r->i] == '^') {
		neg = 1;
		r->i++;
	}
	int first = 1;
	while (1) {
		if (r->i >= r->n)
			return rx_fail(r, "unterminated character class");
		uint32_t c = r->cp[r->i];
		if (c == ']' && !first) {
			r->i++;
			break;
		}
		if (c == ']' && first) { /* "[]" matches nothing, "[^]" anything */
			r->i++;
			if (neg)
				rs_add(&s, 0, 0x10FFFF);
			neg = 0;
			break;
		}
		first = 0;
		r->i++;
		uint32_t lo;
		if (c == '\\') {
			int k = rx_escape(r, &s, &lo);
			if (k < 0)
				return NULL;
			if (k == 1)
				continue;
		} else {
			lo = c;
		}
		if (r->i + 1 < r->n && r->cp[r->i] == '-' && r->cp[r->i + 1] != ']') {
			r->i++;
			uint32_t hi = r->cp[r->i++];
			if (hi == '\\') {
				struct rset tmp = { .n = 0 };
				int k = rx_escape(r, &tmp, &hi);
				if (k < 0)
					return NULL;
				if (k == 1) { /* [a-\d]: '-' is literal */
					rs_add(&s, lo, lo);
					rs_add(&s, '-', '-');
					rs_add_list(&s, tmp.r, tmp.n);
					continue;
				}
			}
			if (hi < lo)
				return rx_fail(r, "class range out of order");
			rs_add(&s, lo, hi);
		} else {
			rs_add(&s, lo, lo);
		}
	}
	if (s.overflow)
		return rx_fail(r, "character class too large");
	return r->cls(r->ctx, r->b, s.r, s.n, neg);
}

static struct wk_gx *rx_alt(struct rx *r, int top);

static int rx_number(struct rx *r, uint32_t *v)
{
	size_t i0 = r->i;
	uint64_t x = 0;
	while (r->i < r->n && r->cp[r->i] >= '0' && r->cp[r->i] <= '9') {
		x = x * 10 + (r->cp[r->i++] - '0');
		if (x > REGEX_MAX_REPEAT)
			x = REGEX_MAX_REPEAT + 1;
	}
	*v = (uint32_t)x;
	return r->i > i0 ? 0 : -1;
}

/* {n}, {n,}, {n,m} after an atom; 0 when not a quantifier (literal '{'). */
static int rx_braces(struct rx *r, uint32_t *min, uint32_t *max)
{
	size_t save = r->i;
	r->i++;
	if (rx_number(r, min)) {
		r->i = save;
		return 0;
	}
	*max = *min;
	if (r->i < r->n && r->cp[r->i] == ',') {
		r->i++;
		*max = WK_GRAM_INF;
		if (r->i < r->n && r->cp[r->i] != '}' && rx_number(r, max)) {
			r->i = save;
			return 0;
		}
	}
	if (r->i >= r->n || r->cp[r->i] != '}') {
		r->i = save;
		return 0;
	}
	r->i++;
	return 1;
}

static struct wk_gx *rx_atom(struct rx *r, int top, int *anchor_end)
{
	uint32_t c = r->cp[r->i];
	struct rset s = { .n = 0 };
	uint32_t cp;
	switch (c) {
	case '(': {
		r->i++;
		if (r->i < r->n && r->cp[r->i] == '?') {
			if (r->i + 1 < r->n && r->cp[r->i + 1] == ':') {
				r->i += 2;
			} else if (r->i + 1 < r->n && r->cp[r->i + 1] == '<' && r->i + 2 < r->n &&
				   r->cp[r->i + 2] != '=' && r->cp[r->i + 2] != '!') {
				r->i += 2;
				while (r->i < r->n && r->cp[r->i] != '>')
					r->i++;
				if (r->i >= r->n)
					return rx_fail(r, "unterminated group name");
				r->i++;
			} else {
				return rx_fail(r, "lookaround assertions are not supported");
			}
		}
		if (++r->depth > REGEX_MAX_DEPTH)
			return rx_fail(r, "groups nested too deeply");
		struct wk_gx *x = rx_alt(r, 0);
		r->depth--;
		if (!x)
			return NULL;
		if (r->i >= r->n || r->cp[r->i] != ')')
			return rx_fail(r, "expected ')'");
		r->i++;
		return x;
	}
	case '[':
		r->i++;
		return rx_class(r);
	case '.':
		r->i++;
		return r->cls(r->ctx, r->b, R_DOT_NOT, 3, 1);
	case '\\': {
		r->i++;
		int k = rx_escape(r, &s, &cp);
		if (k < 0)
			return NULL;
		if (k == 1) {
			if (s.overflow)
				return rx_fail(r, "class too large");
			return r->cls(r->ctx, r->b, s.r, s.n, 0);
		}
		uint32_t one[2] = { cp, cp };
		return r->cls(r->ctx, r->b, one, 1, 0);
	}
	case '$':
		r->i++;
		if (top && (r->i >= r->n || r->cp[r->i] == '|')) {
			*anchor_end = 1;
			return wk_gx_empty(r->b);
		}
		return rx_fail(r, "'$' inside the pattern is not supported");
	case '^':
		return rx_fail(r, "'^' inside the pattern is not supported");
	case '*':
	case '+':
	case '?':
		return rx_fail(r, "nothing to repeat");
	default: {
		r->i++;
		uint32_t one[2] = { c, c };
		return r->cls(r->ctx, r->b, one, 1, 0);
	}
	}
}

static struct wk_gx *rx_seq(struct rx *r, int top, int *anchor_start, int *anchor_end)
{
	struct wk_gram_b *b = r->b;
	struct wk_gx *seq = wk_gx_empty(b);
	if (top && r->i < r->n && r->cp[r->i] == '^') {
		r->i++;
		*anchor_start = 1;
	}
	while (r->i < r->n && r->cp[r->i] != '|' && r->cp[r->i] != ')') {
		if (*anchor_end)
			return rx_fail(r, "text after '$'");
		struct wk_gx *a = rx_atom(r, top, anchor_end);
		if (!a)
			return NULL;
		/* one quantifier per atom, as ECMAScript has it ("a**", "a{2}+"
		 * and "e???" are syntax errors there): stacked ones would also
		 * nest repetitions whose ambiguity costs the matcher
		 * exponential work (fuzz_schema: 10 s for one mask) */
		for (int nq = 0;; nq++) {
			uint32_t min = 1, max = 1;
			if (r->i >= r->n)
				break;
			uint32_t q = r->cp[r->i];
			size_t at = r->i;
			if (q == '*')
				min = 0, max = WK_GRAM_INF, r->i++;
			else if (q == '+')
				min = 1, max = WK_GRAM_INF, r->i++;
			else if (q == '?')
				min = 0, max = 1, r->i++;
			else if (q == '{' && rx_braces(r, &min, &max))
				;
			else
				break;
			if (nq) {
				r->i = at;
				return rx_fail(r, "nothing to repeat: a quantifier after a quantifier");
			}
			if ((min > REGEX_MAX_REPEAT) || (max != WK_GRAM_INF && max > REGEX_MAX_REPEAT))
				return rx_fail(r, "repetition count too large");
			if (max < min)
				return rx_fail(r, "repetition {n,m} with m < n");
			if (r->i < r->n && r->cp[r->i] == '?')
				r->i++; /* lazy: same language */
			a = wk_gx_rep(b, a, min, max);
		}
		seq = wk_gx_seq2(b, seq, a);
		if (!seq)
			return rx_fail(r, "out of memory");
	}
	return seq;
}

static struct wk_gx *rx_alt(struct rx *r, int top)
{
	struct wk_gram_b *b = r->b;
	struct wk_gx *alt = wk_gx_nothing(b);
	for (;;) {
		int as = 0, ae = 0;
		struct wk_gx *s = rx_seq(r, top, &as, &ae);
		if (!s)
			return NULL;
		if (top) {
			struct wk_gx *any = wk_gx_rep(b, r->cls(r->ctx, b, NULL, 0, 1), 0, WK_GRAM_INF);
			if (!as)
				s = wk_gx_seq2(b, any, s);
			if (!ae)
				s = wk_gx_seq2(b, s, any);
		}
		alt = wk_gx_alt2(b, alt, s);
		if (!alt)
			return rx_fail(r, "out of memory");
		if (r->i < r->n && r->cp[r->i] == '|') {
			r->i++;
			continue;
		}
		return alt;
	}
}

struct wk_gx *wk_regex_plain_class(void *ctx, struct wk_gram_b *b, const uint32_t *ranges,
				   size_t n, int negated)
{
	(void)ctx;
	return wk_gx_class(b, ranges, n, negated);
}

/* The index after the group or class opening at i (its closing bracket
 * + 1), n when unbalanced; escapes and classes are skipped. */
static size_t group_end(const uint32_t *cp, size_t n, size_t i)
{
	int depth = 0;
	for (; i < n; i++) {
		if (cp[i] == '\\') {
			i++;
			continue;
		}
		if (cp[i] == '[') {
			for (i++; i < n && cp[i] != ']'; i++)
				if (cp[i] == '\\')
					i++;
			continue;
		}
		if (cp[i] == '(')
			depth++;
		else if (cp[i] == ')' && --depth == 0)
			return i + 1;
	}
	return n;
}

/*
 * Top-level alternatives written as one group each, "(^a$)|(?:^b)", are
 * the same pattern without the groups: "^a$|^b".  Unwrapped (recursively)
 * so that anchors at the start and end of an alternative are seen as the
 * anchors they are.  Lookarounds are left alone.  Returns the new length.
 */
static size_t unwrap_alts(const uint32_t *cp, size_t n, uint32_t *out, int depth)
{
	size_t o = 0, s = 0;
	while (s <= n) {
		size_t e = s;
		while (e < n && cp[e] != '|') {
			if (cp[e] == '(' || cp[e] == '[') {
				size_t g = cp[e] == '(' ? group_end(cp, n, e) : e;
				if (cp[e] == '[') {
					for (g = e + 1; g < n && cp[g] != ']'; g++)
						if (cp[g] == '\\')
							g++;
					g++;
				}
				e = g;
				continue;
			}
			e += cp[e] == '\\' ? 2 : 1;
		}
		if (e > n)
			e = n;
		size_t skip = 0;
		if (depth < 8 && e - s >= 2 && cp[s] == '(' && group_end(cp, n, s) == e) {
			if (e - s >= 3 && cp[s + 1] == '?' && cp[s + 2] == ':')
				skip = 3;
			else if (e - s >= 3 && cp[s + 1] == '?' && cp[s + 2] == '<' &&
				 !(e - s >= 4 && (cp[s + 3] == '=' || cp[s + 3] == '!'))) {
				size_t k = s + 3;
				while (k < e && cp[k] != '>')
					k++;
				skip = k < e ? k + 1 - s : 0;
			} else if (cp[s + 1] != '?')
				skip = 1;
		}
		if (o)
			out[o++] = '|';
		if (skip)
			o += unwrap_alts(cp + s + skip, e - 1 - (s + skip), out + o, depth + 1);
		else
			for (size_t i = s; i < e; i++)
				out[o++] = cp[i];
		s = e + 1;
	}
	return o;
}

enum cm_status wk_regex_compile(struct wk_gram_b *b, const char *re, size_t len,
				wk_regex_class_fn cls, void *ctx, struct wk_gx **out, char *err,
				size_t err_len)
{
	*out = NULL;
	if (len > 65536)
		return cm_fail(err, err_len, CM_ELIMIT, "pattern: longer than 65536 bytes");
	uint32_t *cp = cm_malloc((len + 1) * sizeof(uint32_t));
	if (!cp)
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	size_t n = 0, i = 0;
	while (i < len) {
		uint32_t c;
		int k = cm_utf8_decode((const uint8_t *)re + i, len - i, &c);
		if (k <= 0) {
			cm_free(cp);
			return cm_fail(err, err_len, CM_EINVAL, "pattern: invalid UTF-8 at byte %zu", i);
		}
		cp[n++] = c;
		i += (size_t)k;
	}
	/* unwrapping removes characters only (and adds no more '|' than it
	 * removes groups' parentheses): it fits in place of a copy */
	uint32_t *uw = cm_malloc((2 * n + 1) * sizeof(uint32_t));
	if (!uw) {
		cm_free(cp);
		return cm_fail(err, err_len, CM_ENOMEM, "out of memory");
	}
	n = unwrap_alts(cp, n, uw, 0);
	cm_free(cp);
	cp = uw;
	struct rx r = { .b = b, .cp = cp, .n = n, .cls = cls, .ctx = ctx, .err = err,
			.err_len = err_len, .st = CM_OK };
	struct wk_gx *x = rx_alt(&r, 1);
	if (x && r.i < r.n)
		x = rx_fail(&r, "unbalanced ')'");
	cm_free(cp);
	if (!x) {
		if (r.st == CM_OK)
			return cm_fail(err, err_len, CM_ENOMEM, "pattern: out of memory");
		return r.st;
	}
	*out = x;
	return CM_OK;
}
