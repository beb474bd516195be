/*
 * config_msg.c - the configuration loader's messages: each names the key
 * by its path ("gateway.workers[2].socket"), says what was expected and
 * what was found (string values quoted, escaped and truncated), and
 * suggests the nearest known name for an unknown one.
 */
#include "common/config_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/limits.h"

void cm_cfg_err(struct cfg_ctx *c, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (!c->err || c->errlen == 0)
		return;
	if (c->origin)
		n = snprintf(c->err, c->errlen, "%s: ", c->origin);
	if (n < 0 || (size_t)n >= c->errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* Appends printable, escaped, truncated text of s[len] to out[n]. */
void cm_cfg_quote(const char *s, size_t len, char *out, size_t n)
{
	size_t o = 0, i;

	if (n < 8) {
		if (n)
			out[0] = '\0';
		return;
	}
	out[o++] = '"';
	for (i = 0; i < len && i < CFG_SHOW_BYTES && o + 6 < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, n - o, "\\x%02x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	if (i < len && o + 5 < n) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o++] = '"';
	out[o] = '\0';
}

/* Shortest round-tripping text, always recognisable as a real ("5.0"). */
void cm_cfg_fmt_double(double d, char *out, size_t n)
{
	snprintf(out, n, "%.15g", d);
	if (strtod(out, NULL) != d)
		snprintf(out, n, "%.17g", d);
	if (!strpbrk(out, ".eni") && strlen(out) + 3 <= n)
		strcat(out, ".0");
}

/* Describes a found JSON value: `5`, `"abc"`, `true`, `an array`, ... */
void cm_cfg_describe(const json_t *v, unsigned flags, char *out, size_t n)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
		snprintf(out, n, "null");
		break;
	case JSON_TRUE:
		snprintf(out, n, "true");
		break;
	case JSON_FALSE:
		snprintf(out, n, "false");
		break;
	case JSON_INTEGER:
		if (flags & CM_CFG_F_SECRET)
			snprintf(out, n, "a number (secret, not shown)");
		else
			snprintf(out, n, "%" JSON_INTEGER_FORMAT,
				 json_integer_value(v));
		break;
	case JSON_REAL:
		if (flags & CM_CFG_F_SECRET)
			snprintf(out, n, "a number (secret, not shown)");
		else
			cm_cfg_fmt_double(json_real_value(v), out, n);
		break;
	case JSON_STRING:
		if (flags & CM_CFG_F_SECRET)
			snprintf(out, n, "a string (secret, not shown)");
		else
			cm_cfg_quote(json_string_value(v), json_string_length(v),
				  out, n);
		break;
	case JSON_ARRAY:
		snprintf(out, n, "an array of %zu elements", json_array_size(v));
		break;
	case JSON_OBJECT:
	default:
		snprintf(out, n, "an object");
		break;
	}
}

/* "1GiB", "4MiB", "1000" */
void cm_cfg_fmt_size(uint64_t v, char *out, size_t n)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = -1;

	while (v != 0 && v % 1024 == 0 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(out, n, "%" PRIu64, v);
	else
		snprintf(out, n, "%" PRIu64 "%s", v, units[u]);
}

/* "10s", "2m", "1h", "250ms" */
void cm_cfg_fmt_duration(int64_t ms, char *out, size_t n)
{
	if (ms != 0 && ms % 3600000 == 0)
		snprintf(out, n, "%" PRId64 "h", ms / 3600000);
	else if (ms != 0 && ms % 60000 == 0)
		snprintf(out, n, "%" PRId64 "m", ms / 60000);
	else if (ms != 0 && ms % 1000 == 0)
		snprintf(out, n, "%" PRId64 "s", ms / 1000);
	else
		snprintf(out, n, "%" PRId64 "ms", ms);
}

/* Writes the "expected ..." phrase of a key (without the found part). */
void cm_cfg_expected(const struct cm_cfg_key *k, char *out, size_t n)
{
	char lo[32], hi[32];
	size_t o;

	switch (k->type) {
	case CM_CFG_T_BOOL:
		snprintf(out, n, "true or false");
		break;
	case CM_CFG_T_INT:
		snprintf(out, n, "an integer in [%" PRId64 ", %" PRId64 "]",
			 k->min_i, k->max_i);
		break;
	case CM_CFG_T_DOUBLE:
		cm_cfg_fmt_double(k->min_d, lo, sizeof(lo));
		cm_cfg_fmt_double(k->max_d, hi, sizeof(hi));
		snprintf(out, n, "a number in [%s, %s]", lo, hi);
		break;
	case CM_CFG_T_STRING:
		snprintf(out, n, "a string of at most %zu bytes", k->max_len);
		break;
	case CM_CFG_T_ENUM:
		o = (size_t)snprintf(out, n, "one of");
		for (size_t i = 0; i < k->n_choices && o < n; i++)
			o += (size_t)snprintf(out + o, n - o, "%s \"%s\"",
					      i ? "," : "", k->choices[i]);
		break;
	case CM_CFG_T_SIZE:
		cm_cfg_fmt_size((uint64_t)k->min_i, lo, sizeof(lo));
		cm_cfg_fmt_size((uint64_t)k->max_i, hi, sizeof(hi));
		snprintf(out, n, "a size in [%s, %s]", lo, hi);
		break;
	case CM_CFG_T_DURATION:
		cm_cfg_fmt_duration(k->min_i, lo, sizeof(lo));
		cm_cfg_fmt_duration(k->max_i, hi, sizeof(hi));
		snprintf(out, n, "a duration in [%s, %s]", lo, hi);
		break;
	case CM_CFG_T_STRLIST:
		snprintf(out, n, "an array of at most %zu strings", k->max_count);
		break;
	case CM_CFG_T_OBJLIST:
		snprintf(out, n, "an array of at most %zu objects", k->max_count);
		break;
	case CM_CFG_T_OBJECT:
	default:
		snprintf(out, n, "an object");
		break;
	}
}

/* "<path>: expected <k's expectation>, found <v>" */
void cm_cfg_err_value(struct cfg_ctx *c, const struct cm_cfg_key *k,
			  const json_t *v)
{
	char exp[512], found[96];

	cm_cfg_expected(k, exp, sizeof(exp));
	cm_cfg_describe(v, k->flags, found, sizeof(found));
	cm_cfg_err(c, "%s: expected %s, found %s", c->path, exp, found);
}

/* ===================================================================
 * Key paths ("gateway.workers[2].socket")
 * =================================================================== */

/* Appends to the path; returns the previous length for cm_cfg_path_pop. */
size_t cm_cfg_path_push(struct cfg_ctx *c, const char *fmt, ...)
{
	size_t old = c->plen;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(c->path + c->plen, sizeof(c->path) - c->plen, fmt, ap);
	va_end(ap);
	if (n > 0)
		c->plen += (size_t)n;
	if (c->plen >= sizeof(c->path))
		c->plen = sizeof(c->path) - 1;
	return old;
}

void cm_cfg_path_pop(struct cfg_ctx *c, size_t old)
{
	c->plen = old;
	c->path[old] = '\0';
}

/* ===================================================================
 * Suggestions for unknown names
 * =================================================================== */

static size_t cfg_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	size_t row[CFG_SUGGEST_MAX + 1];

	if (la > CFG_SUGGEST_MAX || lb > CFG_SUGGEST_MAX)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/*
 * Keeps `cand` in *best when it is closer to `s` than *best_d and close
 * enough to be a typo (at most a third of the length, at most 3 edits).
 */
void cm_cfg_consider(const char *s, const char *cand, const char **best,
			 size_t *best_d)
{
	size_t limit = strlen(cand) / 3 + 1;
	size_t d = cfg_edit_distance(s, cand);

	if (limit > 3)
		limit = 3;
	if (d <= limit && d < *best_d) {
		*best = cand;
		*best_d = d;
	}
}

/* Writes ' (did you mean "x"?)' or "" into out[n]. */
void cm_cfg_fmt_suggestion(const char *best, char *out, size_t n)
{
	if (best)
		snprintf(out, n, " (did you mean \"%s\"?)", best);
	else if (n)
		out[0] = '\0';
}
