/*
 * utf8.c - strict UTF-8 (see utf8.h).
 */
#include "common/utf8.h"

#include <string.h>

int cm_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp)
{
	uint32_t c;
	int n;

	*cp = 0xFFFD;
	if (len == 0)
		return 0;
	c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		c &= 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		c &= 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		c &= 0x07;
	} else {
		return 0;
	}
	if (len < (size_t)n)
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && c < 0x800) || (n == 4 && c < 0x10000) || c > 0x10FFFF ||
	    (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return n;
}

int cm_utf8_valid(const void *sv, size_t len)
{
	const uint8_t *s = sv;
	size_t i = 0;
	uint32_t cp;

	while (i < len) {
		int n;

		if (s[i] < 0x80) {
			i++;
			continue;
		}
		n = cm_utf8_decode(s + i, len - i, &cp);
		if (n == 0)
			return 0;
		i += (size_t)n;
	}
	return 1;
}

int cm_utf8_encode(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xC0 | (cp >> 6));
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp >= 0xD800 && cp <= 0xDFFF)
		return 0;
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | (cp >> 12));
		out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	if (cp <= 0x10FFFF) {
		out[0] = (uint8_t)(0xF0 | (cp >> 18));
		out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
		out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		out[3] = (uint8_t)(0x80 | (cp & 0x3F));
		return 4;
	}
	return 0;
}

size_t cm_utf8_complete_prefix(const uint8_t *s, size_t len)
{
	/* look back at most 3 bytes for the start of a trailing sequence */
	for (size_t back = 1; back <= 3 && back <= len; back++) {
		uint8_t c = s[len - back];
		size_t need;

		if ((c & 0xC0) == 0x80)
			continue; /* continuation byte: keep looking */
		if (c >= 0xC2 && c <= 0xDF)
			need = 2;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 3;
		else if (c >= 0xF0 && c <= 0xF4)
			need = 4;
		else
			return len; /* ASCII or invalid lead: complete */
		if (back < need) {
			uint32_t cp;
			/* only hold back when what we have is a valid start */
			uint8_t tmp[4] = { 0x80, 0x80, 0x80, 0x80 };

			memcpy(tmp, s + len - back, back);
			/* pad with the smallest continuation that keeps it valid */
			if (need >= 3 && back == 1) {
				tmp[1] = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
			}
			if (cm_utf8_decode(tmp, need, &cp) == 0)
				return len;
			return len - back;
		}
		return len;
	}
	return len;
}

int cm_utf8_has_nul(const void *s, size_t len)
{
	return memchr(s, 0, len) != NULL;
}
