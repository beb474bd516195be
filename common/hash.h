/*
 * hash.h - the two non-cryptographic hashes Sluice uses for its tables:
 * FNV-1a over bytes (64-bit) and MurmurHash3's 64-bit finaliser (a
 * bijection with full avalanche, for integer keys).  Neither resists an
 * adversary: tables keyed by client input compare full keys and cap their
 * size.  Header-only, any thread.
 */
#ifndef SLUICE_COMMON_HASH_H
#define SLUICE_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define CM_FNV64_SEED 1469598103934665603ull

/* FNV-1a of p[0..n) continuing from h (start with CM_FNV64_SEED). */
static inline uint64_t cm_fnv64(uint64_t h, const void *p, size_t n)
{
	const uint8_t *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static inline uint64_t cm_fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

#endif
