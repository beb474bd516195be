/*
 * utf8.h - strict UTF-8 validation and decoding (RFC 3629).
 *
 * Rejects overlong forms, surrogates (U+D800..U+DFFF), code points above
 * U+10FFFF and truncated sequences.  NUL bytes are valid UTF-8; callers that
 * forbid them check separately (cm_utf8_has_nul).
 */
#ifndef SLUICE_COMMON_UTF8_H
#define SLUICE_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* 1 when s[0..len) is valid UTF-8, else 0. */
int cm_utf8_valid(const void *s, size_t len);

/*
 * Decodes one code point at s (len bytes available).  Returns the sequence
 * length (1..4) and stores the code point, or 0 for an invalid or truncated
 * sequence (cp set to U+FFFD).
 */
int cm_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp);

/* Encodes cp (<= U+10FFFF, not a surrogate) into out[4]; returns length or 0. */
int cm_utf8_encode(uint32_t cp, uint8_t out[4]);

/*
 * Length of the longest prefix of s[0..len) that does not end inside an
 * incomplete (but so far valid) multi-byte sequence: the bytes that can be
 * streamed now.  Invalid bytes count as complete (they are someone else's
 * problem to replace).
 */
size_t cm_utf8_complete_prefix(const uint8_t *s, size_t len);

/* 1 when s contains a NUL byte. */
int cm_utf8_has_nul(const void *s, size_t len);

#endif
