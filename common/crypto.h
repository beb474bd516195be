/*
 * crypto.h - hashing, MACs and randomness through OpenSSL's libcrypto.
 *
 * Nothing here keeps state between calls; all functions are thread-safe.
 * Secrets passed in are not copied; callers wipe their own copies with
 * cm_wipe() when done.
 */
#ifndef SLUICE_COMMON_CRYPTO_H
#define SLUICE_COMMON_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define CM_SHA256_LEN 32
#define CM_SHA256_HEX_LEN 64

void cm_sha256(const void *data, size_t len, uint8_t out[CM_SHA256_LEN]);
/* HMAC-SHA256(key, data). */
void cm_hmac_sha256(const void *key, size_t key_len, const void *data,
		    size_t len, uint8_t out[CM_SHA256_LEN]);

/* Incremental SHA-256 (e.g. of a model file read in pieces). */
struct cm_sha256_ctx;
struct cm_sha256_ctx *cm_sha256_new(void);
void cm_sha256_update(struct cm_sha256_ctx *c, const void *data, size_t len);
/* Writes the digest and frees the context. */
void cm_sha256_final(struct cm_sha256_ctx *c, uint8_t out[CM_SHA256_LEN]);
/* SHA-256 of a whole file; CM_EIO / CM_ENOTFOUND / CM_ENOMEM. */
enum cm_status cm_sha256_file(const char *path, uint8_t out[CM_SHA256_LEN]) CM_WUR;

/* Cryptographically secure random bytes (RAND_bytes). */
enum cm_status cm_random_bytes(void *out, size_t len) CM_WUR;

/* Constant-time equality of two equal-length byte strings: 1 equal, 0 not. */
int cm_ct_equal(const void *a, const void *b, size_t len);

/* Zeroes memory in a way the compiler cannot drop. */
void cm_wipe(void *p, size_t len);

/* Lower-case hex; `out` holds 2*len+1 bytes. */
void cm_hex_encode(const uint8_t *in, size_t len, char *out);
/* Parses exactly 2*len hex digits; CM_EFORMAT otherwise. */
enum cm_status cm_hex_decode(const char *hex, size_t hex_len, uint8_t *out,
			     size_t len) CM_WUR;

#endif
