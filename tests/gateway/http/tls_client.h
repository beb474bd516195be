/*
 * tls_client.h - blocking clients for the listener tests
 * (tests/gateway/http/test_server.c): curl in a subprocess, a raw TCP
 * socket, and an OpenSSL client that verifies the test's own CA.  Every
 * failure to set up fails the running cmocka test.  Tests only.
 */
#ifndef SLUICE_TESTS_GATEWAY_HTTP_TLS_CLIENT_H
#define SLUICE_TESTS_GATEWAY_HTTP_TLS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/ssl.h>

#include "common/status.h"

struct tcli {
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
};

/* Runs curl with the arguments; stdout into out (NULL: discarded).
 * Returns curl's exit code. */
int tcli_curl(char *out, size_t outlen, const char *fmt, ...) CM_PRINTF(3, 4);
/* A TCP connection to 127.0.0.1:port with a 10 s receive timeout. */
int tcli_tcp_connect(uint16_t port);
/* TLS client on port trusting <dir>/<ca>.crt; max_version 0 = any.  0 on success. */
int tcli_open(struct tcli *c, uint16_t port, const char *dir, const char *ca, int max_version);
/* SSL_read that tells "no application data yet" (tickets) from a close:
 * >0 bytes, 0 nothing yet, -1 closed or failed. */
int tcli_read(struct tcli *c, char *b, int n);
void tcli_close(struct tcli *c);
void tcli_send(struct tcli *c, const char *s);
/* Reads one response with a Content-Length body into out; returns status. */
int tcli_response(struct tcli *c, char *out, size_t outlen);
/* Waits until the peer closes fd (through c when TLS): ms waited, or -1
 * after deadline_ms. */
long tcli_wait_closed(long deadline_ms, int fd, struct tcli *c);

#endif
