/*
 * unicode.c - lookups over the generated tables (see unicode.h).
 */
#include "worker/text/unicode.h"

#include <stddef.h>

/*
 * The index of the entry of t (n entries of `stride` bytes, each starting
 * with uint32_t lo, hi, sorted and disjoint) that holds cp; -1 when none.
 */
static long uc_search(const void *t, size_t n, size_t stride, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const uint32_t *e = (const uint32_t *)((const char *)t + mid * stride);

		if (cp < e[0])
			hi = mid;
		else if (cp > e[1])
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

_Static_assert(offsetof(struct wk_uc_range, lo) == 0 && offsetof(struct wk_uc_range, hi) == 4,
	       "uc_search reads lo, hi first");
_Static_assert(offsetof(struct wk_uc_map, lo) == 0 && offsetof(struct wk_uc_map, hi) == 4,
	       "uc_search reads lo, hi first");

static const struct wk_uc_range *uc_find(const struct wk_uc_range *t, size_t n, uint32_t cp)
{
	long i = uc_search(t, n, sizeof(*t), cp);

	return i < 0 ? NULL : &t[i];
}

enum wk_uc_class wk_uc_class(uint32_t cp)
{
	const struct wk_uc_range *r = uc_find(wk_uc_cat_ranges, wk_uc_n_cat_ranges, cp);

	return r ? (enum wk_uc_class)r->cls : WK_UC_C;
}

int wk_uc_is_space(uint32_t cp)
{
	if (cp < 0x80)
		return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
	return uc_find(wk_uc_ws_ranges, wk_uc_n_ws_ranges, cp) != NULL;
}

int wk_uc_is_control(uint32_t cp)
{
	if (cp < 0x80)
		return cp < 0x20 || cp == 0x7F;
	return uc_find(wk_uc_ctl_ranges, wk_uc_n_ctl_ranges, cp) != NULL;
}

static uint32_t uc_map(const struct wk_uc_map *t, size_t n, uint32_t cp)
{
	long i = uc_search(t, n, sizeof(*t), cp);

	return i < 0 ? cp : t[i].to;
}

uint32_t wk_uc_nfd_first(uint32_t cp)
{
	return cp < 0x80 ? cp : uc_map(wk_uc_nfd_map, wk_uc_n_nfd_map, cp);
}

uint32_t wk_uc_tolower(uint32_t cp)
{
	if (cp < 0x80)
		return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
	return uc_map(wk_uc_lower_map, wk_uc_n_lower_map, cp);
}
