/*
 * pretok.c - the pre-tokenizers of the byte-level BPE families:
 * hand-written matchers over code points that give the same splits as the
 * regular expressions the reference tokenizers use (leftmost match,
 * alternatives tried in order, greedy quantifiers, lookahead and `$`
 * bounded by the current chunk, text between matches kept as its own
 * word).  No regex engine is involved.  See pretok.h.
 */
#include "worker/text/pretok.h"

#include <string.h>

#include "worker/text/unicode.h"

static const struct wk_tok_pre tok_pres[] = {
	{ "default", { "default", NULL }, 4,
	  { WK_TOK_PAT_DEFAULT_PUNCT, WK_TOK_PAT_GPT2, WK_TOK_PAT_NUMS, WK_TOK_PAT_DIGITS3 }, 0, 0 },
	{ "llama3", { "llama3", "llama-v3", "llama-bpe", "falcon3", NULL }, 1,
	  { WK_TOK_PAT_LLAMA3 }, 1, 1 },
	{ "dbrx", { "dbrx", "smaug-bpe", NULL }, 1, { WK_TOK_PAT_LLAMA3 }, 0, 0 },
	{ "deepseek-llm", { "deepseek-llm", NULL }, 6,
	  { WK_TOK_PAT_NEWLINE, WK_TOK_PAT_DSL_LETTERS, WK_TOK_PAT_DSL_PUNCT,
	    WK_TOK_PAT_WS_END, WK_TOK_PAT_CJK, WK_TOK_PAT_NUMS }, 0, 0 },
	{ "deepseek-coder", { "deepseek-coder", NULL }, 5,
	  { WK_TOK_PAT_NEWLINE, WK_TOK_PAT_DSC_LETTERS, WK_TOK_PAT_DSC_PUNCT,
	    WK_TOK_PAT_CJK, WK_TOK_PAT_NUM1 }, 0, 0 },
	{ "falcon", { "falcon", NULL }, 3,
	  { WK_TOK_PAT_FALCON_PUNCT, WK_TOK_PAT_GPT2, WK_TOK_PAT_DIGITS3 }, 0, 0 },
	{ "gpt-2", { "gpt-2", "gpt2", "mpt", "phi-2", "olmo", "jais", NULL }, 1, { WK_TOK_PAT_GPT2 }, 0, 0 },
	{ "starcoder", { "starcoder", "refact", "command-r", "smollm", "codeshell",
			 "exaone", "minerva-7b", NULL }, 2, { WK_TOK_PAT_NUM1, WK_TOK_PAT_GPT2 }, 0, 0 },
	{ "qwen2", { "qwen2", "stablelm2", NULL }, 1, { WK_TOK_PAT_QWEN2 }, 0, 0 },
	{ "tekken", { "tekken", NULL }, 1, { WK_TOK_PAT_TEKKEN }, 1, 1 },
};
#define N_PRES (sizeof(tok_pres) / sizeof(tok_pres[0]))

struct cp_range {
	uint32_t lo, hi;
};

/* deepseek-llm's letter class (cased letters of the BMP and a few planes) */
static const struct cp_range dsl_letters[] = {
	{ 0x0041, 0x005A }, { 0x0061, 0x007A }, { 0x00B5, 0x00B5 }, { 0x00C0, 0x00D6 },
	{ 0x00D8, 0x00F6 }, { 0x00F8, 0x01BA }, { 0x01BC, 0x01BF }, { 0x01C4, 0x0293 },
	{ 0x0295, 0x02AF }, { 0x0370, 0x0373 }, { 0x0376, 0x0377 }, { 0x037B, 0x037D },
	{ 0x037F, 0x037F }, { 0x0386, 0x0386 }, { 0x0388, 0x038A }, { 0x038C, 0x038C },
	{ 0x038E, 0x03A1 }, { 0x03A3, 0x03F5 }, { 0x03F7, 0x0481 }, { 0x048A, 0x052F },
	{ 0x0531, 0x0556 }, { 0x10A0, 0x10C5 }, { 0x13A0, 0x13F5 }, { 0x13F8, 0x13FD },
	{ 0x1C90, 0x1CBA }, { 0x1CBD, 0x1CBF }, { 0x1D00, 0x1D2B }, { 0x1D6B, 0x1D77 },
	{ 0x1D79, 0x1D9A }, { 0x1E00, 0x1F15 }, { 0x1F18, 0x1F1D }, { 0x1F20, 0x1F45 },
	{ 0x1F48, 0x1F4D }, { 0x1F50, 0x1F57 }, { 0x1F59, 0x1F59 }, { 0x1F5B, 0x1F5B },
	{ 0x1F5D, 0x1F5D }, { 0x1F5F, 0x1F7D }, { 0x1F80, 0x1FB4 }, { 0x1FB6, 0x1FBC },
	{ 0x1FBE, 0x1FBE }, { 0x1FC2, 0x1FC4 }, { 0x1FC6, 0x1FCC }, { 0x1FD0, 0x1FD3 },
	{ 0x1FD6, 0x1FDB }, { 0x1FE0, 0x1FEC }, { 0x1FF2, 0x1FF4 }, { 0x1FF6, 0x1FFC },
	{ 0x2102, 0x2102 }, { 0x2107, 0x2107 }, { 0x210A, 0x2113 }, { 0x2115, 0x2115 },
	{ 0x2119, 0x211D }, { 0x2124, 0x2124 }, { 0x2126, 0x2126 }, { 0x2128, 0x2128 },
	{ 0x212A, 0x212D }, { 0x212F, 0x2134 }, { 0x2139, 0x2139 }, { 0x213C, 0x213F },
	{ 0x2145, 0x2149 }, { 0x214E, 0x214E }, { 0x2183, 0x2184 }, { 0x2C00, 0x2C7B },
	{ 0x2C7E, 0x2CE4 }, { 0x2CEB, 0x2CEE }, { 0x2CF2, 0x2CF3 }, { 0xA640, 0xA66D },
	{ 0xA680, 0xA69B }, { 0xA722, 0xA76F }, { 0xA771, 0xA787 }, { 0xA78B, 0xA78E },
	{ 0xAB70, 0xABBF }, { 0xFB00, 0xFB06 }, { 0xFB13, 0xFB17 }, { 0xFF21, 0xFF3A },
	{ 0xFF41, 0xFF5A }, { 0x10400, 0x1044F }, { 0x104B0, 0x104D3 }, { 0x104D8, 0x104FB },
	{ 0x10C80, 0x10CB2 }, { 0x10CC0, 0x10CF2 }, { 0x118A0, 0x118DF }, { 0x1E900, 0x1E943 },
};

/* deepseek-llm's punctuation class: !-/ :-~ ！-／ ：-～ ‘-‟ 　-。 */
static const struct cp_range dsl_punct[] = {
	{ 0x0021, 0x002F }, { 0x003A, 0x007E }, { 0x2018, 0x201F }, { 0x3000, 0x3002 },
	{ 0xFF01, 0xFF0F }, { 0xFF1A, 0xFF5E },
};

/* CJK, Korean and more: [一-龥ࠀ-一가-퟿] */
static const struct cp_range cjk[] = {
	{ 0x0800, 0x9FA5 }, { 0xAC00, 0xD7FF },
};

static int in_ranges(const struct cp_range *r, size_t n, uint32_t c)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (c < r[mid].lo)
			hi = mid;
		else if (c > r[mid].hi)
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

#define IN(tab, c) in_ranges((tab), sizeof(tab) / sizeof((tab)[0]), (c))

static inline int is_ws(uint32_t c) { return wk_uc_is_space(c); }
static inline int is_l(uint32_t c) { return wk_uc_is_letter(c); }
static inline int is_n(uint32_t c) { return wk_uc_is_number(c); }
static inline int is_other(uint32_t c) { return !is_ws(c) && !is_l(c) && !is_n(c); }
static inline int is_nl(uint32_t c) { return c == '\r' || c == '\n'; }

static int is_dsl_letter(uint32_t c) { return IN(dsl_letters, c); }
static int is_dsl_punct(uint32_t c) { return IN(dsl_punct, c); }
static int is_cjk(uint32_t c) { return IN(cjk, c); }
static int is_p(uint32_t c) { return wk_uc_is_punct(c); }

static int is_falcon_punct(uint32_t c)
{
	return is_p(c) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
	       c == '^' || c == '~' || c == '|' || c == '`';
}

static int is_default_punct(uint32_t c)
{
	return c != '`' && is_falcon_punct(c);
}

/* Length of the run of `pred` starting at pos. */
static size_t pretok_run(const uint32_t *c, size_t pos, size_t end, int (*pred)(uint32_t))
{
	size_t i = pos;

	while (i < end && pred(c[i]))
		i++;
	return i - pos;
}

/* \s?X+ */
static size_t opt_ws_run(const uint32_t *c, size_t pos, size_t end, int (*pred)(uint32_t))
{
	size_t k;

	if (is_ws(c[pos]) && pos + 1 < end) {
		k = pretok_run(c, pos + 1, end, pred);
		if (k)
			return k + 1;
	}
	return pretok_run(c, pos, end, pred);
}

static uint32_t lower_ascii(uint32_t c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's 't 're 've 'm 'll 'd, optionally case-insensitive. */
static size_t contraction(const uint32_t *c, size_t pos, size_t end, int icase)
{
	uint32_t a, b;

	if (c[pos] != '\'' || pos + 1 >= end)
		return 0;
	a = icase ? lower_ascii(c[pos + 1]) : c[pos + 1];
	if (a == 's' || a == 't' || a == 'm' || a == 'd')
		return 2;
	if (pos + 2 >= end)
		return 0;
	b = icase ? lower_ascii(c[pos + 2]) : c[pos + 2];
	if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
		return 3;
	return 0;
}

static size_t match_gpt2(const uint32_t *c, size_t pos, size_t end)
{
	size_t j = pos, k;

	if ((k = contraction(c, pos, end, 0)))
		return k;
	if (c[pos] == ' ' && pos + 1 < end)
		j = pos + 1;
	if (is_l(c[j]))
		return j - pos + pretok_run(c, j, end, is_l);
	if (is_n(c[j]))
		return j - pos + pretok_run(c, j, end, is_n);
	if (is_other(c[j]))
		return j - pos + pretok_run(c, j, end, is_other);
	/* \s+(?!\S) */
	k = pretok_run(c, pos, end, is_ws);
	if (k == 0)
		return 0;
	if (pos + k == end)
		return k;
	return k > 1 ? k - 1 : 0;
}

/* The whitespace alternatives llama3's regex and tekken end with:
 * \s*[\r\n]+ | \s+(?!\S) | \s+ */
static size_t match_ws_tail(const uint32_t *c, size_t pos, size_t end)
{
	size_t k = pretok_run(c, pos, end, is_ws);

	if (k == 0)
		return 0;
	/* \s*[\r\n]+ : up to and including the last newline of the run */
	for (size_t i = pos + k; i > pos; i--)
		if (is_nl(c[i - 1]))
			return i - pos;
	/* \s+(?!\S) then \s+ */
	if (pos + k == end || k == 1)
		return k;
	return k - 1;
}

static size_t match_llama3(const uint32_t *c, size_t pos, size_t end, size_t max_digits)
{
	uint32_t c0 = c[pos];
	size_t k, j;

	if ((k = contraction(c, pos, end, 1)))
		return k;
	/* [^\r\n\p{L}\p{N}]?\p{L}+ */
	if (is_l(c0))
		return pretok_run(c, pos, end, is_l);
	if (!is_nl(c0) && !is_n(c0) && pos + 1 < end && is_l(c[pos + 1]))
		return 1 + pretok_run(c, pos + 1, end, is_l);
	/* \p{N}{1,3} */
	if (is_n(c0)) {
		k = pretok_run(c, pos, end, is_n);
		return k < max_digits ? k : max_digits;
	}
	/*  ?[^\s\p{L}\p{N}]+[\r\n]* */
	j = (c0 == ' ' && pos + 1 < end) ? pos + 1 : pos;
	if (is_other(c[j])) {
		k = j + pretok_run(c, j, end, is_other);
		return k - pos + pretok_run(c, k, end, is_nl);
	}
	return match_ws_tail(c, pos, end);
}

/* tekken's two letter classes as llama.cpp approximates \p{Lu}\p{Lt}\p{Lm}\p{Lo}
 * and \p{Ll}\p{Lm}\p{Lo}: a letter that is not a-z, a letter that is not A-Z */
static int is_tk_upper(uint32_t c) { return is_l(c) && !(c >= 'a' && c <= 'z'); }
static int is_tk_lower(uint32_t c) { return is_l(c) && !(c >= 'A' && c <= 'Z'); }

/*
 * Mistral's tekken, in llama.cpp's form:
 *   [^\r\n\p{L}\p{N}]?U*W+ | [^\r\n\p{L}\p{N}]?U+W* | \p{N} | ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 * with U = a letter but a-z, W = a letter but A-Z.  In U*W+ the greedy U*
 * gives back characters until W+ can start: W+ starts at the last place
 * u' <= (the U run) whose character is a W (non-ASCII letters are both).
 */
static size_t match_tekken(const uint32_t *c, size_t pos, size_t end)
{
	uint32_t c0 = c[pos];
	size_t j = pos, k, u;

	/* the optional prefix: neither a newline, a letter nor a number */
	if (!is_nl(c0) && !is_l(c0) && !is_n(c0) && pos + 1 < end)
		j = pos + 1;
	if (is_l(c[j])) {
		u = pretok_run(c, j, end, is_tk_upper);
		/* U*W+: the largest u' <= u with a W at j + u' */
		for (size_t v = u + 1; v-- > 0;)
			if (j + v < end && is_tk_lower(c[j + v]))
				return j + v - pos + pretok_run(c, j + v, end, is_tk_lower);
		/* U+W*: u >= 1 here (c[j] is a letter, not a W, so a U) */
		return j + u - pos + pretok_run(c, j + u, end, is_tk_lower);
	}
	/* \p{N} */
	if (is_n(c0))
		return 1;
	/*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
	j = (c0 == ' ' && pos + 1 < end) ? pos + 1 : pos;
	if (is_other(c[j])) {
		k = j + pretok_run(c, j, end, is_other);
		while (k < end && (is_nl(c[k]) || c[k] == '/'))
			k++;
		return k - pos;
	}
	return match_ws_tail(c, pos, end);
}

/*
 * Match of pattern `p` at pos inside a chunk ending at `end`: its length,
 * or 0 with *skip = positions that cannot start a match either.
 */
static size_t pat_match(enum wk_tok_pat p, const uint32_t *c, size_t pos, size_t end, size_t *skip)
{
	uint32_t c0 = c[pos];
	size_t k;

	*skip = 1;
	switch (p) {
	case WK_TOK_PAT_GPT2:
		return match_gpt2(c, pos, end);
	case WK_TOK_PAT_LLAMA3:
		return match_llama3(c, pos, end, 3);
	case WK_TOK_PAT_QWEN2:
		return match_llama3(c, pos, end, 1);
	case WK_TOK_PAT_NEWLINE:
		return is_nl(c0) ? 1 : 0;
	case WK_TOK_PAT_DSL_LETTERS:
		return opt_ws_run(c, pos, end, is_dsl_letter);
	case WK_TOK_PAT_DSL_PUNCT:
		return opt_ws_run(c, pos, end, is_dsl_punct);
	case WK_TOK_PAT_WS_END:
		k = pretok_run(c, pos, end, is_ws);
		if (k && pos + k == end)
			return k;
		*skip = k ? k : 1;
		return 0;
	case WK_TOK_PAT_CJK:
		return pretok_run(c, pos, end, is_cjk);
	case WK_TOK_PAT_NUMS:
		return pretok_run(c, pos, end, is_n);
	case WK_TOK_PAT_NUM1:
		return is_n(c0) ? 1 : 0;
	case WK_TOK_PAT_DSC_LETTERS:
		return opt_ws_run(c, pos, end, is_l);
	case WK_TOK_PAT_DSC_PUNCT:
		return opt_ws_run(c, pos, end, is_p);
	case WK_TOK_PAT_FALCON_PUNCT:
		return pretok_run(c, pos, end, is_falcon_punct);
	case WK_TOK_PAT_DEFAULT_PUNCT:
		return pretok_run(c, pos, end, is_default_punct);
	case WK_TOK_PAT_TEKKEN:
		return match_tekken(c, pos, end);
	case WK_TOK_PAT_DIGITS3:
		if (pos + 3 <= end && c[pos] >= '0' && c[pos] <= '9' && c[pos + 1] >= '0' &&
		    c[pos + 1] <= '9' && c[pos + 2] >= '0' && c[pos + 2] <= '9')
			return 3;
		return 0;
	}
	return 0;
}


/*
 * One regex pass over every chunk, as a regex-split does: matches become
 * chunks and so does the text between them.  out has room for n_cps.
 */
size_t wk_tok_pre_pass(enum wk_tok_pat p, const uint32_t *c, const struct wk_tok_chunk *in, size_t n_in,
		       struct wk_tok_chunk *out)
{
	size_t n_out = 0;

	for (size_t i = 0; i < n_in; i++) {
		size_t end = (size_t)in[i].start + in[i].len, pos = in[i].start, gap = pos;

		while (pos < end) {
			size_t skip, m = pat_match(p, c, pos, end, &skip);

			if (m == 0) {
				pos += skip;
				continue;
			}
			if (gap < pos)
				out[n_out++] = (struct wk_tok_chunk){ (uint32_t)gap, (uint32_t)(pos - gap) };
			out[n_out++] = (struct wk_tok_chunk){ (uint32_t)pos, (uint32_t)m };
			pos += m;
			gap = pos;
		}
		if (gap < end)
			out[n_out++] = (struct wk_tok_chunk){ (uint32_t)gap, (uint32_t)(end - gap) };
	}
	return n_out;
}

const struct wk_tok_pre *wk_tok_pre_find(const char *name)
{
	for (size_t i = 0; i < N_PRES; i++)
		for (size_t j = 0; tok_pres[i].aliases[j]; j++)
			if (strcmp(tok_pres[i].aliases[j], name) == 0)
				return &tok_pres[i];
	return NULL;
}

const struct wk_tok_pre *wk_tok_pre_default(void)
{
	return &tok_pres[0];
}
