/*
 * tls.c - the listener's TLS context (TLS 1.3 preferred, 1.2 minimum with
 * ECDHE + AEAD suites, ALPN http/1.1) and its reload on SIGHUP: new
 * connections get the new certificate, live ones keep theirs.
 */
#include "gateway/http/internal.h"

#include <sys/stat.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/limits.h"
#include "common/log.h"

/* ---- TLS context ---------------------------------------------------- */

static void ssl_errstr(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;

	snprintf(buf, len, "%s", r ? r : "unknown OpenSSL error");
	ERR_clear_error();
}

static int alpn_select(SSL *ssl, const unsigned char **out,
		       unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char h11[] = "\x08http/1.1";
	unsigned char *sel = NULL;
	unsigned char sel_len = 0;

	if (SSL_select_next_proto(&sel, &sel_len, h11, sizeof(h11) - 1, in,
				  inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	*outlen = sel_len;
	return SSL_TLSEXT_ERR_OK;
}

/*
 * The certificate and key must be regular files (OpenSSL would wait on a
 * FIFO for ever); a key that every user may read is served, with a warning
 * (issue 13, finding 17: it started without a word).
 */
static int tls_files_ok(const char *cert, const char *key, char *err, size_t err_len)
{
	struct stat sb;

	if (stat(cert, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		gw_srv_seterr(err, err_len, "tls_cert_file '%s': expected a regular file", cert);
		return 0;
	}
	if (stat(key, &sb) != 0)
		return 1; /* OpenSSL says why */
	if (!S_ISREG(sb.st_mode)) {
		gw_srv_seterr(err, err_len, "tls_key_file '%s': expected a regular file", key);
		return 0;
	}
	if (sb.st_mode & 0007)
		cm_logf(CM_LOG_WARN, "tls_key_readable", "tls_key_file '%s' has mode %04o: every "
			"user of this machine can read the private key (chmod 600, or 640 with the "
			"gateway's group)", key, (unsigned)(sb.st_mode & 07777));
	return 1;
}

SSL_CTX *gw_srv_tls_ctx_new(const char *cert, const char *key, char *err,
			    size_t err_len)
{
	SSL_CTX *ctx;
	char why[256];

	if (!tls_files_ok(cert, key, err, err_len))
		return NULL;
	ERR_clear_error();
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		ssl_errstr(why, sizeof(why));
		gw_srv_seterr(err, err_len, "cannot create a TLS context: %s", why);
		return NULL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    !SSL_CTX_set_cipher_list(ctx, SRV_TLS12_CIPHERS)) {
		ssl_errstr(why, sizeof(why));
		gw_srv_seterr(err, err_len, "cannot configure TLS: %s", why);
		goto fail;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE |
					 SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		ssl_errstr(why, sizeof(why));
		gw_srv_seterr(err, err_len,
		       "tls_cert_file: cannot load a PEM certificate chain from '%s': %s",
		       cert, why);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
			ERR_clear_error();
			gw_srv_seterr(err, err_len,
			       "tls_key_file: the key in '%s' does not match the certificate in '%s'",
			       key, cert);
			goto fail;
		}
		ssl_errstr(why, sizeof(why));
		gw_srv_seterr(err, err_len,
		       "tls_key_file: cannot load a PEM private key from '%s': %s",
		       key, why);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		ERR_clear_error();
		gw_srv_seterr(err, err_len,
		       "tls_key_file: the key in '%s' does not match the certificate in '%s'",
		       key, cert);
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

enum cm_status gw_server_reload_tls(struct gw_server *s, char *err,
				    size_t err_len)
{
	SSL_CTX *ctx;

	if (s->cfg.plain_http) {
		gw_srv_seterr(err, err_len, "plain_http is set: no certificate to reload");
		return CM_EINVAL;
	}
	ctx = gw_srv_tls_ctx_new(s->cert_file, s->key_file, err, err_len);
	if (!ctx)
		return CM_EIO;
	/* live connections keep their reference on the old context */
	SSL_CTX_free(s->ssl_ctx);
	s->ssl_ctx = ctx;
	s->st.tls_reloads++;
	return CM_OK;
}

static void sighup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct gw_server *s = arg;
	char err[512];

	if (gw_server_reload_tls(s, err, sizeof(err)) == CM_OK)
		cm_logf(CM_LOG_INFO, "tls_reload", "certificate reloaded");
	else
		cm_logf(CM_LOG_ERROR, "tls_reload",
			"reload failed, keeping the old certificate: %s", err);
}

enum cm_status gw_server_watch_sighup(struct gw_server *s)
{
	if (s->sighup_ev)
		return CM_OK;
	s->sighup_ev = evsignal_new(s->base, SIGHUP, sighup_cb, s);
	if (!s->sighup_ev)
		return CM_ENOMEM;
	if (evsignal_add(s->sighup_ev, NULL) != 0) {
		event_free(s->sighup_ev);
		s->sighup_ev = NULL;
		return CM_EIO;
	}
	return CM_OK;
}
