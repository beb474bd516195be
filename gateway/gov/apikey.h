/*
 * apikey.h - API key format, generation, parsing and HMAC verification.
 *
 * A key is 55 ASCII characters:
 *
 *     slk_<key id>_<secret><crc>
 *
 *   1. "slk_"     fixed prefix (what secret scanners look for);
 *   2. key id     12 base62 characters, random; public (logs, Redis key
 *                 names, sluicectl listings);
 *   3. "_"        separator;
 *   4. secret     32 base62 characters drawn uniformly from
 *                 cm_random_bytes (32 * log2(62) = 190.5 bits);
 *   5. crc        6 base62 characters, big-endian, zero-padded: the CRC-32
 *                 (IEEE 802.3, the zlib one) of the 49 bytes "slk_<id>_<secret>",
 *                 so that a scanner can tell a real leaked key from noise
 *                 without any I/O.
 *
 * base62 alphabet: 0-9 A-Z a-z.
 *
 * Redis stores only HMAC-SHA256(pepper, key id || secret) (hex) under the
 * key id; the key itself is shown once by gw_key_generate() and never stored
 * or logged.  gw_key_parse() checks format and checksum without I/O so that
 * malformed keys are refused before any Redis round trip.
 *
 * Stateless apart from the pepper object; every function is thread-safe.
 * Invariant: every stack copy of a secret is wiped (cm_wipe) before return.
 */
#ifndef SLUICE_GATEWAY_GOV_APIKEY_H
#define SLUICE_GATEWAY_GOV_APIKEY_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "common/crypto.h"
#include "common/status.h"

#define GW_KEY_PREFIX "slk_"
#define GW_KEY_PREFIX_LEN 4
#define GW_KEY_ID_LEN 12
#define GW_KEY_SECRET_LEN 32
#define GW_KEY_CRC_LEN 6
/* Whole key: prefix + id + '_' + secret + crc = 55 characters. */
#define GW_KEY_LEN (GW_KEY_PREFIX_LEN + GW_KEY_ID_LEN + 1 + GW_KEY_SECRET_LEN + GW_KEY_CRC_LEN)
#define GW_KEY_HMAC_LEN CM_SHA256_LEN
#define GW_KEY_HMAC_HEX_LEN CM_SHA256_HEX_LEN
/* Pepper bytes accepted from a file. */
#define GW_KEY_PEPPER_MIN 32
#define GW_KEY_PEPPER_MAX 4096

/* A key split into its parts; the secret must be wiped with gw_key_wipe(). */
struct gw_key_parts {
	char id[GW_KEY_ID_LEN + 1];
	char secret[GW_KEY_SECRET_LEN + 1];
};

/* The server pepper (opaque; its bytes are wiped by _free). */
struct gw_key_pepper;

/*
 * Reads the pepper from `path`: a regular file, owned by anyone, with no
 * group or other permission bits (mode & 077 == 0), holding
 * GW_KEY_PEPPER_MIN..GW_KEY_PEPPER_MAX bytes once one trailing "\n" or
 * "\r\n" is removed.  On failure writes a message for the operator into
 * err[errlen] (path, what was expected, what was found; never the bytes)
 * and returns CM_ENOTFOUND, CM_EPERM (permissions), CM_EFORMAT (size or
 * type), CM_EIO or CM_ENOMEM.
 */
enum cm_status gw_key_pepper_load(const char *path, struct gw_key_pepper **out,
				  char *err, size_t errlen) CM_WUR;
/* Pepper from bytes (tests, tools); len must be >= GW_KEY_PEPPER_MIN. */
enum cm_status gw_key_pepper_from_bytes(const void *bytes, size_t len,
					struct gw_key_pepper **out) CM_WUR;
void gw_key_pepper_free(struct gw_key_pepper *p);

/*
 * Generates a new key.  Writes the full key (shown once, NUL-terminated)
 * into key_out, its id into id_out and HMAC(pepper, id || secret) into
 * hmac_out.  CM_EIO when the random generator fails.
 */
enum cm_status gw_key_generate(const struct gw_key_pepper *pepper,
			       char key_out[GW_KEY_LEN + 1],
			       char id_out[GW_KEY_ID_LEN + 1],
			       uint8_t hmac_out[GW_KEY_HMAC_LEN]) CM_WUR;

/*
 * Checks the format and checksum of `len` bytes at `s` (no I/O, no
 * allocation; `s` need not be NUL-terminated).  CM_EFORMAT on a wrong
 * length, prefix, separator, character or checksum; on success fills
 * `out`.  The caller wipes `out` with gw_key_wipe() when done.
 */
enum cm_status gw_key_parse(const char *s, size_t len,
			    struct gw_key_parts *out) CM_WUR;

/* Validates a key id alone (12 base62 characters); CM_EFORMAT otherwise. */
enum cm_status gw_key_id_check(const char *id, size_t len) CM_WUR;

/* HMAC-SHA256(pepper, id || secret). */
void gw_key_hmac(const struct gw_key_pepper *pepper,
		 const struct gw_key_parts *parts, uint8_t out[GW_KEY_HMAC_LEN]);

/*
 * Constant-time check of `parts` against the stored HMAC.  `stored_hex`
 * is the hex string kept in Redis (`hex_len` bytes); a stored value of
 * the wrong length or not hex is treated as a mismatch after doing the
 * same work.  1 when the key matches, 0 otherwise.
 * For a key id that Redis does not know, call it with ("", 0): it does the
 * same HMAC and comparison, so an unknown id and a wrong secret take the
 * same time.
 */
int gw_key_verify(const struct gw_key_pepper *pepper,
		  const struct gw_key_parts *parts, const char *stored_hex,
		  size_t hex_len);

/* Wipes the secret held in `parts`. */
void gw_key_wipe(struct gw_key_parts *parts);

/* ---- the key record in Redis (docs/data-model.md) ---- */

#define GW_KEY_NAME_MAX 64 /* tenant and client names, with NUL */

/* Fields of `<ns>key:<key id>` that authentication needs. */
struct gw_key_record {
	char tenant[GW_KEY_NAME_MAX];
	char client[GW_KEY_NAME_MAX];
	char hmac_hex[GW_KEY_HMAC_HEX_LEN + 1];
	int64_t created;   /* Unix s */
	int64_t expires;   /* Unix s, 0 = never */
	int revoked;       /* 0 or 1 */
	int64_t last_used; /* Unix s, 0 = never */
};

/* Writes "<ns>key:<key id>" (ns NULL = "sluice:"); CM_EINVAL if it does
 * not fit or the id is malformed. */
enum cm_status gw_key_record_name(char *out, size_t size, const char *ns,
				  const char *key_id) CM_WUR;
/*
 * Parses the HGETALL reply of a key record.  CM_ENOTFOUND for an empty
 * reply (no such key), CM_EFORMAT when a required field (tenant, client,
 * hmac) is missing or a field is malformed, CM_EPROTO for a reply that is
 * not a flat array of strings.
 */
enum cm_status gw_key_record_parse(const redisReply *r,
				   struct gw_key_record *out) CM_WUR;
/* 1 when the record is neither revoked nor expired at `now_s`. */
int gw_key_record_usable(const struct gw_key_record *rec, int64_t now_s);

/* CRC-32 (IEEE) used for the checksum; exposed for tests and tools. */
uint32_t gw_key_crc32(const void *data, size_t len);

#endif
