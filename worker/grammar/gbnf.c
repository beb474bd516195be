/*
 * gbnf.c - the grammar text format (gbnf.h): a recursive-descent parser
 * over bytes that builds expressions in a struct wk_gram_b.
 *
 * Pure computation, any thread.  Nesting of groups is bounded
 * (GBNF_MAX_DEPTH) so that recursion stays small whatever the input.
 */
#include "worker/grammar/gbnf.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/utf8.h"

#define GBNF_MAX_DEPTH 64
#define GBNF_MAX_NAME 128
#define GBNF_MAX_CLASS 256

struct gp {
	struct wk_gram_b *b;
	const char *s;
	size_t n, i;
	int depth;
	char *err;
	size_t err_len;
	enum cm_status st;
	/* first use of every rule, for "used but not defined" */
	size_t *used_at;
	uint32_t cap_used;
};

static void where(const struct gp *p, size_t at, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < at && i < p->n; i++) {
		if (p->s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((uint8_t)p->s[i] & 0xC0) != 0x80) {
			(*col)++;
		}
	}
}

static struct wk_gx *fail_at(struct gp *p, size_t at, const char *what)
{
	if (p->st == CM_OK) {
		size_t line, col;
		where(p, at, &line, &col);
		p->st = cm_fail(p->err, p->err_len, CM_EINVAL, "grammar: line %zu, column %zu: %s", line, col, what);
	}
	return NULL;
}

static struct wk_gx *oom(struct gp *p)
{
	if (p->st == CM_OK)
		p->st = cm_fail(p->err, p->err_len, CM_ELIMIT, "grammar: too large (rules, elements or memory)");
	return NULL;
}

static int at_end(const struct gp *p)
{
	return p->i >= p->n;
}

static int name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Spaces, newlines and comments. */
static void skip_space(struct gp *p)
{
	while (!at_end(p)) {
		char c = p->s[p->i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			p->i++;
		} else if (c == '#') {
			while (!at_end(p) && p->s[p->i] != '\n')
				p->i++;
		} else {
			break;
		}
	}
}

/* 1 when a rule definition `name ::=` starts at the current position. */
static int rule_starts(const struct gp *p)
{
	size_t i = p->i;
	while (i < p->n && name_char(p->s[i]))
		i++;
	if (i == p->i)
		return 0;
	while (i < p->n && (p->s[i] == ' ' || p->s[i] == '\t'))
		i++;
	return i + 3 <= p->n && memcmp(p->s + i, "::=", 3) == 0;
}

static int read_name(struct gp *p, char *out)
{
	size_t k = 0;
	while (!at_end(p) && name_char(p->s[p->i])) {
		if (k + 1 >= GBNF_MAX_NAME) {
			fail_at(p, p->i, "rule name longer than 127 characters");
			return -1;
		}
		out[k++] = p->s[p->i++];
	}
	out[k] = 0;
	return k ? 0 : -1;
}

static int hexdigits(struct gp *p, int n, uint32_t *v)
{
	*v = 0;
	for (int k = 0; k < n; k++) {
		if (at_end(p))
			return -1;
		char c = p->s[p->i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		*v = *v * 16 + (uint32_t)d;
		p->i++;
	}
	return 0;
}

/* One character of a literal or class (escapes decoded); -1 on error. */
static int read_char(struct gp *p, uint32_t *cp)
{
	size_t at = p->i;
	if (at_end(p)) {
		fail_at(p, at, "unexpected end of the grammar");
		return -1;
	}
	if (p->s[p->i] != '\\') {
		int k = cm_utf8_decode((const uint8_t *)p->s + p->i, p->n - p->i, cp);
		if (k <= 0) {
			fail_at(p, at, "invalid UTF-8");
			return -1;
		}
		p->i += (size_t)k;
		return 0;
	}
	p->i++;
	if (at_end(p)) {
		fail_at(p, at, "'\\' at the end");
		return -1;
	}
	char c = p->s[p->i++];
	switch (c) {
	case 'n': *cp = '\n'; return 0;
	case 'r': *cp = '\r'; return 0;
	case 't': *cp = '\t'; return 0;
	case '\\': case '"': case '[': case ']': case '-': case '^': case '\'':
		*cp = (uint32_t)(uint8_t)c;
		return 0;
	case 'x':
	case 'u':
	case 'U':
		if (hexdigits(p, c == 'x' ? 2 : c == 'u' ? 4 : 8, cp) || *cp > 0x10FFFF) {
			fail_at(p, at, "bad \\x, \\u or \\U escape (2, 4 or 8 hex digits)");
			return -1;
		}
		return 0;
	default:
		fail_at(p, at, "unknown escape");
		return -1;
	}
}

static struct wk_gx *literal(struct gp *p)
{
	size_t at = p->i++;
	uint8_t buf[4096];
	size_t k = 0;
	struct wk_gx *seq = wk_gx_empty(p->b);
	while (1) {
		if (at_end(p))
			return fail_at(p, at, "unterminated string literal");
		if (p->s[p->i] == '"') {
			p->i++;
			break;
		}
		uint32_t cp;
		if (read_char(p, &cp))
			return NULL;
		uint8_t u[4];
		int m = cm_utf8_encode(cp, u);
		if (m <= 0)
			return fail_at(p, at, "a surrogate code point in a literal");
		if (k + (size_t)m > sizeof(buf)) {
			seq = wk_gx_seq2(p->b, seq, wk_gx_lit(p->b, buf, k));
			k = 0;
		}
		memcpy(buf + k, u, (size_t)m);
		k += (size_t)m;
	}
	seq = wk_gx_seq2(p->b, seq, wk_gx_lit(p->b, buf, k));
	return seq ? seq : oom(p);
}

static struct wk_gx *char_class(struct gp *p)
{
	size_t at = p->i++;
	int neg = 0;
	if (!at_end(p) && p->s[p->i] == '^') {
		neg = 1;
		p->i++;
	}
	uint32_t r[2 * GBNF_MAX_CLASS];
	size_t n = 0;
	while (1) {
		if (at_end(p))
			return fail_at(p, at, "unterminated character class");
		if (p->s[p->i] == ']') {
			p->i++;
			break;
		}
		uint32_t lo, hi;
		if (read_char(p, &lo))
			return NULL;
		hi = lo;
		if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
			p->i++;
			if (read_char(p, &hi))
				return NULL;
			if (hi < lo)
				return fail_at(p, at, "class range out of order");
		}
		if (n == GBNF_MAX_CLASS)
			return fail_at(p, at, "character class with more than 256 ranges");
		r[2 * n] = lo;
		r[2 * n + 1] = hi;
		n++;
	}
	struct wk_gx *x = wk_gx_class(p->b, r, n, neg);
	return x ? x : oom(p);
}

static uint32_t rule_index(struct gp *p, const char *name, size_t at)
{
	uint32_t r = wk_gram_find_rule(p->b, name);
	if (r == UINT32_MAX)
		r = wk_gram_rule(p->b, name, 1);
	if (r == UINT32_MAX)
		return r;
	if (r >= p->cap_used) {
		uint32_t c = p->cap_used ? 2 * p->cap_used : 64;
		while (c <= r)
			c *= 2;
		size_t *u = cm_reallocarray(p->used_at, c, sizeof(size_t));
		if (!u)
			return UINT32_MAX;
		for (uint32_t i = p->cap_used; i < c; i++)
			u[i] = SIZE_MAX;
		p->used_at = u;
		p->cap_used = c;
	}
	if (p->used_at[r] == SIZE_MAX)
		p->used_at[r] = at;
	return r;
}

static struct wk_gx *alternatives(struct gp *p);

static int read_count(struct gp *p, uint32_t *v)
{
	size_t i0 = p->i;
	uint64_t x = 0;
	while (!at_end(p) && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
		x = x * 10 + (uint64_t)(p->s[p->i++] - '0');
		if (x > WK_GBNF_MAX_REPEAT)
			return -1;
	}
	*v = (uint32_t)x;
	return p->i > i0 ? 0 : -1;
}

static struct wk_gx *repeat(struct gp *p, struct wk_gx *x)
{
	while (x && !at_end(p)) {
		char c = p->s[p->i];
		uint32_t min, max;
		size_t at = p->i;
		if (c == '*')
			min = 0, max = WK_GRAM_INF;
		else if (c == '+')
			min = 1, max = WK_GRAM_INF;
		else if (c == '?')
			min = 0, max = 1;
		else if (c == '{') {
			p->i++;
			skip_space(p);
			if (read_count(p, &min))
				return fail_at(p, p->i, "expected a count (0 .. 100000) after '{'");
			skip_space(p);
			max = min;
			if (!at_end(p) && p->s[p->i] == ',') {
				p->i++;
				skip_space(p);
				max = WK_GRAM_INF;
				if (!at_end(p) && p->s[p->i] != '}' && read_count(p, &max))
					return fail_at(p, p->i, "expected a count (0 .. 100000) or '}'");
				skip_space(p);
			}
			if (at_end(p) || p->s[p->i] != '}')
				return fail_at(p, p->i, "expected '}'");
			if (max < min)
				return fail_at(p, at, "repetition {m,n} with n < m");
		} else {
			break;
		}
		p->i++;
		x = wk_gx_rep(p->b, x, min, max);
		if (!x)
			return oom(p);
		skip_space(p);
	}
	return x;
}

static struct wk_gx *sequence(struct gp *p)
{
	struct wk_gx *seq = wk_gx_empty(p->b);
	while (1) {
		skip_space(p);
		if (at_end(p) || rule_starts(p))
			break;
		char c = p->s[p->i];
		if (c == '|' || c == ')')
			break;
		size_t at = p->i;
		struct wk_gx *x;
		if (c == '"') {
			x = literal(p);
		} else if (c == '[') {
			x = char_class(p);
		} else if (c == '.') {
			p->i++;
			x = wk_gx_class(p->b, NULL, 0, 1);
		} else if (c == '(') {
			p->i++;
			if (++p->depth > GBNF_MAX_DEPTH)
				return fail_at(p, at, "groups nested deeper than 64");
			x = alternatives(p);
			p->depth--;
			if (!x)
				return NULL;
			skip_space(p);
			if (at_end(p) || p->s[p->i] != ')')
				return fail_at(p, at, "unclosed '('");
			p->i++;
		} else if (name_char(c)) {
			char name[GBNF_MAX_NAME];
			if (read_name(p, name))
				return NULL;
			uint32_t r = rule_index(p, name, at);
			if (r == UINT32_MAX)
				return oom(p);
			x = wk_gx_ref(p->b, r);
		} else {
			return fail_at(p, at, "expected a literal, a class, a rule name, '(' or '.'");
		}
		if (!x)
			return p->st == CM_OK ? oom(p) : NULL;
		skip_space(p);
		x = repeat(p, x);
		if (!x)
			return NULL;
		seq = wk_gx_seq2(p->b, seq, x);
		if (!seq)
			return oom(p);
	}
	return seq;
}

static struct wk_gx *alternatives(struct gp *p)
{
	struct wk_gx *alt = wk_gx_nothing(p->b);
	while (1) {
		struct wk_gx *s = sequence(p);
		if (!s)
			return NULL;
		alt = wk_gx_alt2(p->b, alt, s);
		if (!alt)
			return oom(p);
		skip_space(p);
		if (!at_end(p) && p->s[p->i] == '|') {
			p->i++;
			continue;
		}
		return alt;
	}
}

enum cm_status wk_gbnf_parse(struct wk_gram_b *b, const char *text, size_t len, uint32_t *root,
			     char *err, size_t err_len)
{
	struct gp p = { .b = b, .s = text, .n = len, .err = err, .err_len = err_len, .st = CM_OK };
	*root = UINT32_MAX;
	skip_space(&p);
	if (at_end(&p))
		fail_at(&p, 0, "empty grammar: expected 'root ::= ...'");
	while (p.st == CM_OK && !at_end(&p)) {
		size_t at = p.i;
		char name[GBNF_MAX_NAME];
		if (read_name(&p, name)) {
			if (p.st == CM_OK)
				fail_at(&p, at, "expected a rule name");
			break;
		}
		while (!at_end(&p) && (p.s[p.i] == ' ' || p.s[p.i] == '\t'))
			p.i++;
		if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3) != 0) {
			fail_at(&p, p.i, "expected '::='");
			break;
		}
		p.i += 3;
		uint32_t r = rule_index(&p, name, at);
		if (r == UINT32_MAX) {
			oom(&p);
			break;
		}
		if (wk_gram_has_body(b, r)) {
			fail_at(&p, at, "rule defined twice");
			break;
		}
		struct wk_gx *body = alternatives(&p);
		if (!body)
			break;
		skip_space(&p);
		if (!at_end(&p) && !rule_starts(&p)) {
			fail_at(&p, p.i, p.s[p.i] == ')' ? "')' without '('" : "expected a new rule 'name ::='");
			break;
		}
		wk_gram_set_body(b, r, body);
	}
	if (p.st == CM_OK) {
		uint32_t n = wk_gram_n_rules(b);
		for (uint32_t r = 0; r < n && p.st == CM_OK; r++)
			if (r < p.cap_used && p.used_at[r] != SIZE_MAX && !wk_gram_has_body(b, r)) {
				char m[200];
				snprintf(m, sizeof(m), "rule '%.100s' is used but not defined", wk_gram_rule_name(b, r));
				fail_at(&p, p.used_at[r], m);
			}
	}
	if (p.st == CM_OK) {
		*root = wk_gram_find_rule(b, "root");
		if (*root == UINT32_MAX || !wk_gram_has_body(b, *root))
			fail_at(&p, 0, "no 'root' rule: the grammar starts at 'root ::= ...'");
	}
	if (p.st == CM_OK && wk_gram_b_broken(b))
		oom(&p);
	cm_free(p.used_at);
	return p.st;
}
