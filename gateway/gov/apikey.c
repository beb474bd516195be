/*
 * apikey.c - API key format, generation, parsing and HMAC verification.
 *
 * See apikey.h for the format.  Owns nothing but the pepper object; every
 * function may run on any thread.  Secrets only live in caller buffers and
 * in stack temporaries wiped before return.
 */
#include "gateway/gov/apikey.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/secret.h"
#include "gateway/redis/keys.h"
#include "gateway/gov/reader.h"

static const char b62_digits[] =
	"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

struct gw_key_pepper {
	size_t len;
	uint8_t bytes[GW_KEY_PEPPER_MAX];
};

/* ---- CRC-32 (reflected, polynomial 0xEDB88320) ------------------------ */

uint32_t gw_key_crc32(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t crc = 0xFFFFFFFFu;

	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
	}
	return crc ^ 0xFFFFFFFFu;
}

static void crc_encode(uint32_t crc, char out[GW_KEY_CRC_LEN])
{
	/* 62^6 > 2^32, so six digits always suffice. */
	for (int i = GW_KEY_CRC_LEN - 1; i >= 0; i--) {
		out[i] = b62_digits[crc % 62];
		crc /= 62;
	}
}

static int is_b62(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
	       (c >= 'a' && c <= 'z');
}

/* ---- pepper ------------------------------------------------------------ */

enum cm_status gw_key_pepper_from_bytes(const void *bytes, size_t len,
					struct gw_key_pepper **out)
{
	struct gw_key_pepper *p;

	*out = NULL;
	if (len < GW_KEY_PEPPER_MIN || len > GW_KEY_PEPPER_MAX)
		return CM_EINVAL;
	p = cm_malloc(sizeof(*p));
	if (!p)
		return CM_ENOMEM;
	memcpy(p->bytes, bytes, len);
	p->len = len;
	*out = p;
	return CM_OK;
}

void gw_key_pepper_free(struct gw_key_pepper *p)
{
	if (!p)
		return;
	cm_wipe(p, sizeof(*p));
	cm_free(p);
}

enum cm_status gw_key_pepper_load(const char *path, struct gw_key_pepper **out,
				  char *err, size_t errlen)
{
	uint8_t buf[GW_KEY_PEPPER_MAX];
	enum cm_status st;
	size_t len = 0;

	*out = NULL;
	st = cm_secret_read(path, "pepper file", buf, sizeof(buf), &len, err, errlen);
	if (st != CM_OK)
		return st;
	if (len < GW_KEY_PEPPER_MIN) {
		snprintf(err, errlen, "pepper file %s: expected %d to %d bytes, found %zu", path,
			 GW_KEY_PEPPER_MIN, GW_KEY_PEPPER_MAX, len);
		st = CM_EFORMAT;
		goto out;
	}
	st = gw_key_pepper_from_bytes(buf, len, out);
	if (st != CM_OK)
		snprintf(err, errlen, "pepper file %s: %s", path, cm_status_str(st));
out:
	cm_wipe(buf, sizeof(buf));
	return st;
}

/* ---- generation -------------------------------------------------------- */

/*
 * Fills out[n] with uniform base62 characters: bytes >= 248 (= 4 * 62) are
 * rejected so that `byte % 62` is unbiased.
 */
static enum cm_status random_b62(char *out, size_t n)
{
	enum cm_status st = CM_OK;
	uint8_t pool[64];
	size_t have = 0, used = 0;

	for (size_t i = 0; i < n;) {
		if (used == have) {
			st = cm_random_bytes(pool, sizeof(pool));
			if (st != CM_OK)
				goto out;
			have = sizeof(pool);
			used = 0;
		}
		uint8_t b = pool[used++];

		if (b >= 248)
			continue;
		out[i++] = b62_digits[b % 62];
	}
out:
	cm_wipe(pool, sizeof(pool));
	return st;
}

void gw_key_hmac(const struct gw_key_pepper *pepper,
		 const struct gw_key_parts *parts, uint8_t out[GW_KEY_HMAC_LEN])
{
	char msg[GW_KEY_ID_LEN + GW_KEY_SECRET_LEN];

	memcpy(msg, parts->id, GW_KEY_ID_LEN);
	memcpy(msg + GW_KEY_ID_LEN, parts->secret, GW_KEY_SECRET_LEN);
	cm_hmac_sha256(pepper->bytes, pepper->len, msg, sizeof(msg), out);
	cm_wipe(msg, sizeof(msg));
}

enum cm_status gw_key_generate(const struct gw_key_pepper *pepper,
			       char key_out[GW_KEY_LEN + 1],
			       char id_out[GW_KEY_ID_LEN + 1],
			       uint8_t hmac_out[GW_KEY_HMAC_LEN])
{
	enum cm_status st;
	struct gw_key_parts parts;
	char *p = key_out;

	memset(&parts, 0, sizeof(parts));
	st = random_b62(parts.id, GW_KEY_ID_LEN);
	if (st == CM_OK)
		st = random_b62(parts.secret, GW_KEY_SECRET_LEN);
	if (st != CM_OK)
		goto out;
	memcpy(p, GW_KEY_PREFIX, GW_KEY_PREFIX_LEN);
	p += GW_KEY_PREFIX_LEN;
	memcpy(p, parts.id, GW_KEY_ID_LEN);
	p += GW_KEY_ID_LEN;
	*p++ = '_';
	memcpy(p, parts.secret, GW_KEY_SECRET_LEN);
	p += GW_KEY_SECRET_LEN;
	crc_encode(gw_key_crc32(key_out, (size_t)(p - key_out)), p);
	p += GW_KEY_CRC_LEN;
	*p = '\0';
	memcpy(id_out, parts.id, GW_KEY_ID_LEN + 1);
	gw_key_hmac(pepper, &parts, hmac_out);
out:
	gw_key_wipe(&parts);
	return st;
}

/* ---- parsing and verification ------------------------------------------ */

enum cm_status gw_key_id_check(const char *id, size_t len)
{
	if (len != GW_KEY_ID_LEN)
		return CM_EFORMAT;
	for (size_t i = 0; i < len; i++)
		if (!is_b62((unsigned char)id[i]))
			return CM_EFORMAT;
	return CM_OK;
}

enum cm_status gw_key_parse(const char *s, size_t len, struct gw_key_parts *out)
{
	const size_t id_at = GW_KEY_PREFIX_LEN;
	const size_t sep_at = id_at + GW_KEY_ID_LEN;
	const size_t secret_at = sep_at + 1;
	const size_t crc_at = secret_at + GW_KEY_SECRET_LEN;
	char crc[GW_KEY_CRC_LEN];

	memset(out, 0, sizeof(*out));
	if (len != GW_KEY_LEN || memcmp(s, GW_KEY_PREFIX, GW_KEY_PREFIX_LEN) != 0 ||
	    s[sep_at] != '_')
		return CM_EFORMAT;
	for (size_t i = id_at; i < len; i++)
		if (i != sep_at && !is_b62((unsigned char)s[i]))
			return CM_EFORMAT;
	crc_encode(gw_key_crc32(s, crc_at), crc);
	if (memcmp(crc, s + crc_at, GW_KEY_CRC_LEN) != 0)
		return CM_EFORMAT;
	memcpy(out->id, s + id_at, GW_KEY_ID_LEN);
	memcpy(out->secret, s + secret_at, GW_KEY_SECRET_LEN);
	return CM_OK;
}

int gw_key_verify(const struct gw_key_pepper *pepper,
		  const struct gw_key_parts *parts, const char *stored_hex,
		  size_t hex_len)
{
	uint8_t mac[GW_KEY_HMAC_LEN], stored[GW_KEY_HMAC_LEN];
	int ok;

	gw_key_hmac(pepper, parts, mac);
	ok = hex_len == GW_KEY_HMAC_HEX_LEN &&
	     cm_hex_decode(stored_hex, hex_len, stored, sizeof(stored)) == CM_OK;
	if (!ok)
		memset(stored, 0, sizeof(stored));
	/* Compare even when the stored value is unusable: same work either way. */
	ok = cm_ct_equal(mac, stored, sizeof(mac)) & ok;
	cm_wipe(mac, sizeof(mac));
	return ok;
}

void gw_key_wipe(struct gw_key_parts *parts)
{
	cm_wipe(parts, sizeof(*parts));
}

/* ---- the key record ------------------------------------------------------ */

enum cm_status gw_key_record_name(char *out, size_t size, const char *ns,
				  const char *key_id)
{
	if (gw_key_id_check(key_id, strnlen(key_id, GW_KEY_ID_LEN + 1)) != CM_OK)
		return CM_EINVAL;
	return gw_redis_key(out, size, ns, "key", key_id, NULL);
}

static int copy_name(char dst[GW_KEY_NAME_MAX], const char *s, size_t len)
{
	if (len == 0 || len >= GW_KEY_NAME_MAX || memchr(s, '\0', len))
		return -1;
	memcpy(dst, s, len);
	dst[len] = '\0';
	return 0;
}

enum cm_status gw_key_record_parse(const redisReply *r, struct gw_key_record *out)
{
	int have_tenant = 0, have_client = 0, have_hmac = 0;

	memset(out, 0, sizeof(*out));
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
		return CM_EPROTO;
	if (r->elements == 0)
		return CM_ENOTFOUND;
	for (size_t i = 0; i < r->elements; i += 2) {
		const redisReply *k = r->element[i], *v = r->element[i + 1];
		int bad = 0;

		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			return CM_EPROTO;
		if (strcmp(k->str, "tenant") == 0) {
			bad = copy_name(out->tenant, v->str, v->len);
			have_tenant = !bad;
		} else if (strcmp(k->str, "client") == 0) {
			bad = copy_name(out->client, v->str, v->len);
			have_client = !bad;
		} else if (strcmp(k->str, "hmac") == 0) {
			bad = v->len != GW_KEY_HMAC_HEX_LEN;
			if (!bad) {
				memcpy(out->hmac_hex, v->str, v->len);
				out->hmac_hex[v->len] = '\0';
				have_hmac = 1;
			}
		} else if (strcmp(k->str, "created") == 0) {
			bad = gw_gov_decimal(v->str, v->len, &out->created);
		} else if (strcmp(k->str, "expires") == 0) {
			bad = gw_gov_decimal(v->str, v->len, &out->expires);
		} else if (strcmp(k->str, "last_used") == 0) {
			bad = gw_gov_decimal(v->str, v->len, &out->last_used);
		} else if (strcmp(k->str, "revoked") == 0) {
			bad = !(v->len == 1 && (v->str[0] == '0' || v->str[0] == '1'));
			out->revoked = !bad && v->str[0] == '1';
		}
		if (bad)
			return CM_EFORMAT;
	}
	if (!have_tenant || !have_client || !have_hmac)
		return CM_EFORMAT;
	return CM_OK;
}

int gw_key_record_usable(const struct gw_key_record *rec, int64_t now_s)
{
	return !rec->revoked && (rec->expires == 0 || rec->expires > now_s);
}
