/*
 * test_apikey.c - gateway/gov/apikey.c: key generation round trip, every
 * malformed variant, HMAC verification, pepper file checks, parsing of the
 * key record, and that the secret never leaks into any other produced
 * string.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/crypto.h"
#include "gateway/gov/apikey.h"

static struct gw_key_pepper *test_pepper(void)
{
	static const char bytes[] = "0123456789abcdef0123456789abcdef-test-pepper";
	struct gw_key_pepper *p = NULL;

	assert_int_equal(gw_key_pepper_from_bytes(bytes, sizeof(bytes) - 1, &p),
			 CM_OK);
	return p;
}

static void test_crc32_vector(void **state)
{
	(void)state;
	/* The standard check value of CRC-32/ISO-HDLC. */
	assert_int_equal(gw_key_crc32("123456789", 9), 0xCBF43926u);
	assert_int_equal(gw_key_crc32("", 0), 0);
}

static void test_round_trip(void **state)
{
	struct gw_key_pepper *p = test_pepper();
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN], mac2[GW_KEY_HMAC_LEN];
	char hex[GW_KEY_HMAC_HEX_LEN + 1];
	struct gw_key_parts parts;

	(void)state;
	for (int i = 0; i < 200; i++) {
		assert_int_equal(gw_key_generate(p, key, id, mac), CM_OK);
		assert_int_equal(strlen(key), GW_KEY_LEN);
		assert_int_equal(strlen(id), GW_KEY_ID_LEN);
		assert_memory_equal(key, "slk_", 4);
		assert_memory_equal(key + 4, id, GW_KEY_ID_LEN);
		assert_int_equal(gw_key_id_check(id, strlen(id)), CM_OK);
		assert_int_equal(gw_key_parse(key, strlen(key), &parts), CM_OK);
		assert_string_equal(parts.id, id);
		gw_key_hmac(p, &parts, mac2);
		assert_memory_equal(mac, mac2, sizeof(mac));
		cm_hex_encode(mac, sizeof(mac), hex);
		assert_int_equal(gw_key_verify(p, &parts, hex, strlen(hex)), 1);
		gw_key_wipe(&parts);
		for (size_t k = 0; k < sizeof(parts); k++)
			assert_int_equal(((unsigned char *)&parts)[k], 0);
	}
	gw_key_pepper_free(p);
}

static void test_keys_differ(void **state)
{
	struct gw_key_pepper *p = test_pepper();
	char k1[GW_KEY_LEN + 1], k2[GW_KEY_LEN + 1];
	char i1[GW_KEY_ID_LEN + 1], i2[GW_KEY_ID_LEN + 1];
	uint8_t m1[GW_KEY_HMAC_LEN], m2[GW_KEY_HMAC_LEN];

	(void)state;
	assert_int_equal(gw_key_generate(p, k1, i1, m1), CM_OK);
	assert_int_equal(gw_key_generate(p, k2, i2, m2), CM_OK);
	assert_string_not_equal(i1, i2);
	assert_memory_not_equal(k1 + 17, k2 + 17, GW_KEY_SECRET_LEN);
	assert_memory_not_equal(m1, m2, sizeof(m1));
	gw_key_pepper_free(p);
}

static void expect_bad(const char *s, size_t len)
{
	struct gw_key_parts parts;

	assert_int_equal(gw_key_parse(s, len, &parts), CM_EFORMAT);
	/* Nothing of the input is left behind on refusal. */
	assert_int_equal(parts.id[0], 0);
	assert_int_equal(parts.secret[0], 0);
}

static void test_malformed(void **state)
{
	struct gw_key_pepper *p = test_pepper();
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1], bad[2 * GW_KEY_LEN];
	uint8_t mac[GW_KEY_HMAC_LEN];
	const char *bad_chars = "_-+/=. \t\n\x01\x7f\xc3";

	(void)state;
	assert_int_equal(gw_key_generate(p, key, id, mac), CM_OK);

	expect_bad("", 0);
	expect_bad("slk_", 4);
	/* Every truncation and an extension by one character. */
	for (size_t n = 0; n < GW_KEY_LEN; n++)
		expect_bad(key, n);
	memcpy(bad, key, GW_KEY_LEN);
	bad[GW_KEY_LEN] = 'a';
	expect_bad(bad, GW_KEY_LEN + 1);
	/* Prefix variants. */
	const char *prefixes[] = {"SLK_", "slk-", "slx_", "sk__", "xlk_"};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		memcpy(bad, key, GW_KEY_LEN);
		memcpy(bad, prefixes[i], 4);
		expect_bad(bad, GW_KEY_LEN);
	}
	/* Separator replaced, and an extra underscore anywhere in id/secret. */
	for (size_t pos = 4; pos < GW_KEY_LEN; pos++) {
		for (const char *c = bad_chars; *c; c++) {
			memcpy(bad, key, GW_KEY_LEN);
			if (bad[pos] == *c)
				continue;
			bad[pos] = *c;
			expect_bad(bad, GW_KEY_LEN);
		}
	}
	/* Id shifted by an extra underscore: right total length, wrong layout. */
	memcpy(bad, key, GW_KEY_LEN);
	memmove(bad + 5, bad + 4, GW_KEY_LEN - 5);
	bad[4] = '_';
	expect_bad(bad, GW_KEY_LEN);
	/* A changed base62 character anywhere fails the checksum. */
	for (size_t pos = 4; pos < GW_KEY_LEN; pos++) {
		if (pos == 16)
			continue;
		memcpy(bad, key, GW_KEY_LEN);
		bad[pos] = bad[pos] == 'a' ? 'b' : 'a';
		expect_bad(bad, GW_KEY_LEN);
	}
	/* Swapped adjacent secret characters also fail the checksum. */
	memcpy(bad, key, GW_KEY_LEN);
	for (size_t pos = 17; pos + 1 < 17 + GW_KEY_SECRET_LEN; pos++) {
		if (bad[pos] != bad[pos + 1]) {
			char t = bad[pos];

			bad[pos] = bad[pos + 1];
			bad[pos + 1] = t;
			break;
		}
	}
	expect_bad(bad, GW_KEY_LEN);
	/* An embedded NUL. */
	memcpy(bad, key, GW_KEY_LEN);
	bad[30] = '\0';
	expect_bad(bad, GW_KEY_LEN);

	assert_int_equal(gw_key_id_check("abc", 3), CM_EFORMAT);
	assert_int_equal(gw_key_id_check("abcdefghijk_", 12), CM_EFORMAT);
	assert_int_equal(gw_key_id_check("abcdefghijkl", 12), CM_OK);
	gw_key_pepper_free(p);
}

static void test_verify_wrong(void **state)
{
	struct gw_key_pepper *p = test_pepper(), *other = NULL;
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1];
	char hex[GW_KEY_HMAC_HEX_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN];
	struct gw_key_parts parts;
	static const char other_bytes[] = "another pepper of at least thirty-two bytes";

	(void)state;
	assert_int_equal(gw_key_generate(p, key, id, mac), CM_OK);
	cm_hex_encode(mac, sizeof(mac), hex);
	assert_int_equal(gw_key_parse(key, GW_KEY_LEN, &parts), CM_OK);
	assert_int_equal(gw_key_verify(p, &parts, hex, GW_KEY_HMAC_HEX_LEN), 1);
	/* Wrong secret (same id). */
	parts.secret[0] = parts.secret[0] == 'Z' ? 'Y' : 'Z';
	assert_int_equal(gw_key_verify(p, &parts, hex, GW_KEY_HMAC_HEX_LEN), 0);
	parts.secret[0] = key[17];
	assert_int_equal(gw_key_verify(p, &parts, hex, GW_KEY_HMAC_HEX_LEN), 1);
	/* Wrong pepper. */
	assert_int_equal(gw_key_pepper_from_bytes(other_bytes, sizeof(other_bytes) - 1,
						  &other), CM_OK);
	assert_int_equal(gw_key_verify(other, &parts, hex, GW_KEY_HMAC_HEX_LEN), 0);
	/* Unusable stored values. */
	assert_int_equal(gw_key_verify(p, &parts, hex, GW_KEY_HMAC_HEX_LEN - 1), 0);
	assert_int_equal(gw_key_verify(p, &parts, "", 0), 0);
	hex[5] = 'x';
	assert_int_equal(gw_key_verify(p, &parts, hex, GW_KEY_HMAC_HEX_LEN), 0);
	gw_key_pepper_free(other);
	/* Short pepper refused. */
	assert_int_equal(gw_key_pepper_from_bytes("short", 5, &other), CM_EINVAL);
	assert_null(other);
	gw_key_wipe(&parts);
	gw_key_pepper_free(p);
	gw_key_pepper_free(NULL);
}

/* The secret (and the whole key) must not appear in the id or the HMAC. */
static void test_no_leak(void **state)
{
	struct gw_key_pepper *p = test_pepper();
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1], secret[GW_KEY_SECRET_LEN + 1];
	char hex[GW_KEY_HMAC_HEX_LEN + 1], err[512];
	uint8_t mac[GW_KEY_HMAC_LEN];
	struct gw_key_parts parts;

	(void)state;
	for (int i = 0; i < 50; i++) {
		assert_int_equal(gw_key_generate(p, key, id, mac), CM_OK);
		memcpy(secret, key + 17, GW_KEY_SECRET_LEN);
		secret[GW_KEY_SECRET_LEN] = '\0';
		cm_hex_encode(mac, sizeof(mac), hex);
		/* Any 8-character run of the secret. */
		for (size_t k = 0; k + 8 <= GW_KEY_SECRET_LEN; k++) {
			char run[9];

			memcpy(run, secret + k, 8);
			run[8] = '\0';
			assert_null(strstr(hex, run));
			assert_null(strstr(id, run));
		}
		assert_null(memmem(mac, sizeof(mac), secret, 8));
		/* A parse failure produces no string at all; a pepper error
		 * message names the path, never key material. */
		key[20] ^= 1;
		assert_int_equal(gw_key_parse(key, GW_KEY_LEN, &parts), CM_EFORMAT);
		assert_int_equal(gw_key_pepper_load("/nonexistent/pepper", &(struct gw_key_pepper *){NULL},
						    err, sizeof(err)), CM_ENOTFOUND);
		assert_null(strstr(err, secret));
	}
	gw_key_pepper_free(p);
}

static void write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_pepper_file(void **state)
{
	char dir[] = "/tmp/sluice-pepper-XXXXXX", path[256], err[512];
	struct gw_key_pepper *p = NULL, *q = NULL;
	char key[GW_KEY_LEN + 1], id[GW_KEY_ID_LEN + 1];
	uint8_t mac[GW_KEY_HMAC_LEN], mac2[GW_KEY_HMAC_LEN];
	struct gw_key_parts parts;
	static const char hex64[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	char big[GW_KEY_PEPPER_MAX + 10];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/pepper", dir);

	/* Good: 64 hex chars and a newline (openssl rand -hex 32 > file). */
	write_file(path, hex64, 64, 0600);
	assert_int_equal(gw_key_pepper_load(path, &p, err, sizeof(err)), CM_OK);
	write_file(path, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
		   65, 0400);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_OK);
	/* The trailing newline is not part of the pepper: same HMACs. */
	assert_int_equal(gw_key_generate(p, key, id, mac), CM_OK);
	assert_int_equal(gw_key_parse(key, GW_KEY_LEN, &parts), CM_OK);
	gw_key_hmac(q, &parts, mac2);
	assert_memory_equal(mac, mac2, sizeof(mac));
	gw_key_wipe(&parts);
	gw_key_pepper_free(q);
	q = NULL;

	/* Group-writable or world-readable: refused with a message naming the
	 * fix (group read is allowed for root's files only: test_common_misc) */
	write_file(path, hex64, 64, 0660);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_EPERM);
	assert_null(q);
	assert_non_null(strstr(err, "0660"));
	assert_non_null(strstr(err, "chmod 600"));
	write_file(path, hex64, 64, 0604);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_EPERM);
	assert_null(strstr(err, hex64)); /* never the bytes */

	/* Too short. */
	write_file(path, "0123456789abcdef0123456789abcde\n", 32, 0600);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_EFORMAT);
	assert_non_null(strstr(err, "found 31"));
	/* Too long. */
	memset(big, 'x', sizeof(big));
	write_file(path, big, sizeof(big), 0600);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_EFORMAT);
	/* A directory. */
	assert_int_equal(gw_key_pepper_load(dir, &q, err, sizeof(err)), CM_EFORMAT);
	/* Missing. */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(gw_key_pepper_load(path, &q, err, sizeof(err)), CM_ENOTFOUND);
	assert_non_null(strstr(err, path));
	assert_null(q);
	assert_int_equal(rmdir(dir), 0);
	gw_key_pepper_free(p);
}

/* A fake HGETALL reply of field/value pairs. */
struct fake_hash {
	redisReply items[32];
	redisReply *ptrs[32];
	redisReply top;
};

static redisReply *fake_hash(struct fake_hash *h, const char *const *kv, size_t n)
{
	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < n; i++) {
		h->items[i].type = REDIS_REPLY_STRING;
		h->items[i].str = (char *)kv[i];
		h->items[i].len = strlen(kv[i]);
		h->ptrs[i] = &h->items[i];
	}
	h->top.type = REDIS_REPLY_ARRAY;
	h->top.elements = n;
	h->top.element = h->ptrs;
	return &h->top;
}

static void test_record(void **state)
{
	static const char hmac[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	const char *kv[] = {"id", "abcdefghijkl", "tenant", "eng", "client", "ci-bot",
			    "hmac", hmac, "created", "1700000000", "expires", "0",
			    "revoked", "0", "last_used", "0", "future_field", "x"};
	struct gw_key_record rec;
	struct fake_hash h;
	char name[128];

	(void)state;
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_OK);
	assert_string_equal(rec.tenant, "eng");
	assert_string_equal(rec.client, "ci-bot");
	assert_string_equal(rec.hmac_hex, hmac);
	assert_int_equal(rec.created, 1700000000);
	assert_int_equal(gw_key_record_usable(&rec, 1800000000), 1);
	kv[11] = "1750000000"; /* expires */
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_OK);
	assert_int_equal(gw_key_record_usable(&rec, 1749999999), 1);
	assert_int_equal(gw_key_record_usable(&rec, 1750000000), 0);
	kv[13] = "1"; /* revoked */
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_OK);
	assert_int_equal(gw_key_record_usable(&rec, 0), 0);
	kv[13] = "yes";
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_EFORMAT);
	kv[13] = "0";
	kv[11] = "-5";
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_EFORMAT);
	kv[11] = "0";
	kv[7] = "abc"; /* short hmac */
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 18), &rec), CM_EFORMAT);
	kv[7] = hmac;
	/* Missing client. */
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 4), &rec), CM_EFORMAT);
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 0), &rec), CM_ENOTFOUND);
	assert_int_equal(gw_key_record_parse(fake_hash(&h, kv, 3), &rec), CM_EPROTO);
	assert_int_equal(gw_key_record_parse(NULL, &rec), CM_EPROTO);

	assert_int_equal(gw_key_record_name(name, sizeof(name), NULL, "abcdefghijkl"),
			 CM_OK);
	assert_string_equal(name, "sluice:key:abcdefghijkl");
	assert_int_equal(gw_key_record_name(name, sizeof(name), "x:", "abc"), CM_EINVAL);
	assert_int_equal(gw_key_record_name(name, 10, NULL, "abcdefghijkl"), CM_EINVAL);
}

static void test_alloc_failure(void **state)
{
	struct gw_key_pepper *p = NULL;
	static const char bytes[] = "0123456789abcdef0123456789abcdef";

	(void)state;
	cm_alloc_fail_after(0);
	assert_int_equal(gw_key_pepper_from_bytes(bytes, 32, &p), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_null(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32_vector),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_keys_differ),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_verify_wrong),
		cmocka_unit_test(test_no_leak),
		cmocka_unit_test(test_pepper_file),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_alloc_failure),
	};

	return cmocka_run_group_tests_name("gateway/apikey", tests, NULL, NULL);
}
