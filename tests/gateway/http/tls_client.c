/*
 * tls_client.c - the blocking test clients of the listener tests (see
 * tls_client.h).
 */
#include "tests/gateway/http/tls_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/clock.h"

int tcli_curl(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[16384];
	va_list ap;
	FILE *f;
	size_t n = 0;
	int rc, k;

	k = snprintf(cmd, sizeof(cmd), "curl -sS --noproxy '*' --max-time 10 ");
	va_start(ap, fmt);
	vsnprintf(cmd + k, sizeof(cmd) - (size_t)k, fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	assert_non_null(f);
	if (out) {
		n = fread(out, 1, outlen - 1, f);
		out[n] = '\0';
	} else {
		char sink[4096];

		while (fread(sink, 1, sizeof(sink), f) > 0)
			;
	}
	rc = pclose(f);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

int tcli_tcp_connect(uint16_t p)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(p) };
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

int tcli_open(struct tcli *c, uint16_t port, const char *dir, const char *ca, int max_version)
{
	char path[128];

	memset(c, 0, sizeof(*c));
	c->fd = tcli_tcp_connect(port);
	c->ctx = SSL_CTX_new(TLS_client_method());
	snprintf(path, sizeof(path), "%s/%s.crt", dir, ca);
	assert_int_equal(SSL_CTX_load_verify_locations(c->ctx, path, NULL), 1);
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	if (max_version) {
		SSL_CTX_set_min_proto_version(c->ctx, 0);
		SSL_CTX_set_max_proto_version(c->ctx, max_version);
		SSL_CTX_set_security_level(c->ctx, 0);
	}
	c->ssl = SSL_new(c->ctx);
	X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), "127.0.0.1");
	SSL_set_fd(c->ssl, c->fd);
	SSL_clear_mode(c->ssl, SSL_MODE_AUTO_RETRY); /* tickets do not block reads */
	if (SSL_connect(c->ssl) != 1) {
		ERR_clear_error();
		return -1;
	}
	return 0;
}

int tcli_read(struct tcli *c, char *b, int n)
{
	int r = SSL_read(c->ssl, b, n);

	if (r > 0)
		return r;
	r = SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ ? 0 : -1;
	ERR_clear_error();
	return r;
}

void tcli_close(struct tcli *c)
{
	SSL_free(c->ssl);
	SSL_CTX_free(c->ctx);
	close(c->fd);
	ERR_clear_error();
}

void tcli_send(struct tcli *c, const char *s)
{
	assert_int_equal(SSL_write(c->ssl, s, (int)strlen(s)), (int)strlen(s));
}

int tcli_response(struct tcli *c, char *out, size_t outlen)
{
	size_t n = 0;
	char *end = NULL, *cl;
	long body = -1;

	while (n < outlen - 1) {
		int r = tcli_read(c, out + n, 1); /* byte-wise: never read past the response */

		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		n += (size_t)r;
		out[n] = '\0';
		if (!end && (end = strstr(out, "\r\n\r\n"))) {
			cl = strcasestr(out, "Content-Length:");
			body = cl ? atol(cl + 15) : 0;
		}
		if (end && (long)(n - (size_t)(end + 4 - out)) >= body)
			break;
	}
	return atoi(out + 9);
}

long tcli_wait_closed(long deadline_ms, int fd, struct tcli *c)
{
	int64_t t0 = cm_mono_ns();

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long waited = (long)((cm_mono_ns() - t0) / CM_NS_PER_MS);
		char b[256];
		int r;

		if (waited > deadline_ms)
			return -1;
		r = poll(&p, 1, (int)(deadline_ms - waited));
		if (r <= 0)
			continue;
		if (c) {
			r = tcli_read(c, b, sizeof(b));
			if (r == 0)
				continue;
		} else {
			r = (int)read(fd, b, sizeof(b));
		}
		if (r <= 0)
			return (long)((cm_mono_ns() - t0) / CM_NS_PER_MS);
	}
}

