/*
 * crypto.c - SHA-256, HMAC-SHA256, random bytes and constant-time compare
 * over OpenSSL 3's libcrypto.
 */
#include "common/crypto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/alloc.h"

struct cm_sha256_ctx {
	EVP_MD_CTX *md;
};

void cm_sha256(const void *data, size_t len, uint8_t out[CM_SHA256_LEN])
{
	unsigned int n = CM_SHA256_LEN;

	EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

void cm_hmac_sha256(const void *key, size_t key_len, const void *data,
		    size_t len, uint8_t out[CM_SHA256_LEN])
{
	unsigned int n = CM_SHA256_LEN;

	HMAC(EVP_sha256(), key, (int)key_len, data, len, out, &n);
}

struct cm_sha256_ctx *cm_sha256_new(void)
{
	struct cm_sha256_ctx *c = cm_calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->md = EVP_MD_CTX_new();
	if (!c->md || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c->md);
		cm_free(c);
		return NULL;
	}
	return c;
}

void cm_sha256_update(struct cm_sha256_ctx *c, const void *data, size_t len)
{
	EVP_DigestUpdate(c->md, data, len);
}

void cm_sha256_final(struct cm_sha256_ctx *c, uint8_t out[CM_SHA256_LEN])
{
	unsigned int n = CM_SHA256_LEN;

	EVP_DigestFinal_ex(c->md, out, &n);
	EVP_MD_CTX_free(c->md);
	cm_free(c);
}

enum cm_status cm_sha256_file(const char *path, uint8_t out[CM_SHA256_LEN])
{
	enum cm_status st = CM_OK;
	struct cm_sha256_ctx *c = NULL;
	FILE *f = NULL;
	unsigned char *chunk = NULL;
	size_t n;

	{
		/* O_NONBLOCK: a FIFO is refused, not waited on */
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat sb;

		if (fd < 0) {
			st = errno == ENOENT ? CM_ENOTFOUND : CM_EIO;
			goto out;
		}
		if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || !(f = fdopen(fd, "rb"))) {
			close(fd);
			st = CM_EFORMAT;
			goto out;
		}
	}
	chunk = cm_malloc(1 << 20);
	c = cm_sha256_new();
	if (!chunk || !c) {
		st = CM_ENOMEM;
		goto out;
	}
	while ((n = fread(chunk, 1, 1 << 20, f)) > 0)
		cm_sha256_update(c, chunk, n);
	if (ferror(f)) {
		st = CM_EIO;
		goto out;
	}
	cm_sha256_final(c, out);
	c = NULL;
out:
	if (c) {
		uint8_t junk[CM_SHA256_LEN];

		cm_sha256_final(c, junk);
	}
	cm_free(chunk);
	if (f)
		fclose(f);
	return st;
}

enum cm_status cm_random_bytes(void *out, size_t len)
{
	if (len > (size_t)0x7fffffff)
		return CM_EINVAL;
	return RAND_bytes(out, (int)len) == 1 ? CM_OK : CM_EIO;
}

int cm_ct_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

void cm_wipe(void *p, size_t len)
{
	OPENSSL_cleanse(p, len);
}

void cm_hex_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

enum cm_status cm_hex_decode(const char *hex, size_t hex_len, uint8_t *out,
			     size_t len)
{
	if (hex_len != 2 * len)
		return CM_EFORMAT;
	for (size_t i = 0; i < len; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return CM_EFORMAT;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return CM_OK;
}
