/*
 * ctl_worker.c - `sluicectl worker drain NAME`: asks the gateway, through
 * its admin API on the loopback admin listener, to stop placing new
 * requests on a worker (requests in flight finish; docs/admin-api.md).
 *
 * Talks plain HTTP/1.1 to ADDR:PORT (--admin, $SLUICE_ADMIN, default
 * 127.0.0.1:9464) with "Authorization: Bearer TOKEN", the token read from
 * --admin-token-file / $SLUICE_ADMIN_TOKEN_FILE (a line "NAME TOKEN" of the
 * gateway's credentials file, or the bare token).  One blocking request,
 * 10 s socket timeouts, the answer capped at CTL_WK_RESPONSE_MAX.  The
 * token is never printed.  Thread: main thread only.
 */
#include "tools/ctl_worker.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/crypto.h"

#define CTL_WK_RESPONSE_MAX (64 * 1024)
#define CTL_WK_TOKEN_MAX 256
#define CTL_WK_NAME_MAX 64

enum {
	WK_EXIT_OK = 0,
	WK_EXIT_USAGE = 1,
	WK_EXIT_NOTFOUND = 2,
	WK_EXIT_UNAVAILABLE = 4,
	WK_EXIT_INVALID = 5,
	WK_EXIT_REFUSED = 7,
};

void ctl_worker_usage(FILE *out)
{
	fputs("  worker drain NAME [--admin ADDR:PORT] [--admin-token-file PATH]\n"
	      "                     stop new placements on worker NAME (in-flight\n"
	      "                     requests finish; its next HELLO re-admits it)\n"
	      "                     ADDR:PORT default $SLUICE_ADMIN or 127.0.0.1:9464,\n"
	      "                     PATH default $SLUICE_ADMIN_TOKEN_FILE\n",
	      out);
}

int ctl_worker_handles(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "worker") == 0)
			return 1;
		if (strcmp(argv[i], "--admin") == 0 || strcmp(argv[i], "--admin-token-file") == 0)
			i++;
		else if (strncmp(argv[i], "--", 2) != 0)
			return 0;
	}
	return 0;
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CTL_WK_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

/* Reads the token: last field of the first non-comment line. */
static int read_token(const char *path, char tok[CTL_WK_TOKEN_MAX + 1])
{
	FILE *f = fopen(path, "r");
	char line[CTL_WK_TOKEN_MAX + 128];
	int rc = -1;

	if (!f) {
		fprintf(stderr, "sluicectl: --admin-token-file %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *last = NULL, *save = NULL, *t;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		for (t = strtok_r(p, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
			last = t;
		if (last && strlen(last) <= CTL_WK_TOKEN_MAX) {
			snprintf(tok, CTL_WK_TOKEN_MAX + 1, "%s", last);
			rc = 0;
		}
		break;
	}
	cm_wipe(line, sizeof(line));
	fclose(f);
	if (rc != 0)
		fprintf(stderr, "sluicectl: --admin-token-file %s: expected a line \"NAME TOKEN\" "
			"or a token of at most %d characters, found none\n", path, CTL_WK_TOKEN_MAX);
	return rc;
}

static int dial(const char *addr)
{
	char host[256], *port;
	struct addrinfo hints, *res = NULL;
	struct timeval tv = { 10, 0 };
	int fd = -1;

	if (strlen(addr) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%s", addr);
	port = strrchr(host, ':');
	if (!port)
		return -1;
	*port++ = '\0';
	if (host[0] == '[') {
		size_t n = strlen(host);

		if (n < 2 || host[n - 1] != ']')
			return -1;
		host[n - 1] = '\0';
		memmove(host, host + 1, n - 1);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
			connect(fd, res->ai_addr, res->ai_addrlen) != 0)) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* POSTs `path`; *status and the body (NUL-terminated) on success. */
static int post(const char *addr, const char *path, const char *token, int *status,
		char *resp, size_t resp_len)
{
	char req[1024];
	size_t got = 0;
	int fd, n, rc = -1;

	n = snprintf(req, sizeof(req),
		     "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
		     "Content-Length: 0\r\nConnection: close\r\n\r\n", path, addr, token);
	if (n < 0 || (size_t)n >= sizeof(req))
		goto out;
	fd = dial(addr);
	if (fd < 0) {
		fprintf(stderr, "sluicectl: cannot reach the gateway's admin listener at %s "
			"(expected ADDR:PORT with a numeric address)\n", addr);
		goto out;
	}
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t w = send(fd, req + off, (size_t)n - off, MSG_NOSIGNAL);

		if (w <= 0) {
			close(fd);
			fprintf(stderr, "sluicectl: sending to %s: %s\n", addr, strerror(errno));
			goto out;
		}
		off += (size_t)w;
	}
	while (got + 1 < resp_len) {
		ssize_t r = recv(fd, resp + got, resp_len - 1 - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	resp[got] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", status) != 1) {
		fprintf(stderr, "sluicectl: %s: expected an HTTP response, found %zu byte(s) "
			"without a status line\n", addr, got);
		goto out;
	}
	rc = 0;
out:
	cm_wipe(req, sizeof(req));
	return rc;
}

int ctl_worker_main(int argc, char **argv)
{
	const char *addr = getenv("SLUICE_ADMIN");
	const char *tok_file = getenv("SLUICE_ADMIN_TOKEN_FILE");
	const char *pos[3] = { NULL, NULL, NULL };
	char token[CTL_WK_TOKEN_MAX + 1], path[160];
	char *resp = NULL, *body;
	int npos = 0, status = 0, rc = WK_EXIT_USAGE;

	if (!addr || !*addr)
		addr = "127.0.0.1:9464";
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--admin") == 0 || strcmp(argv[i], "--admin-token-file") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "sluicectl: %s expects a value\n", argv[i]);
				return WK_EXIT_USAGE;
			}
			if (strcmp(argv[i], "--admin") == 0)
				addr = argv[++i];
			else
				tok_file = argv[++i];
			continue;
		}
		if (npos == 3) {
			fprintf(stderr, "sluicectl: worker: unexpected argument \"%s\"\n", argv[i]);
			return WK_EXIT_USAGE;
		}
		pos[npos++] = argv[i];
	}
	if (npos != 3 || strcmp(pos[0], "worker") != 0 || strcmp(pos[1], "drain") != 0) {
		fprintf(stderr, "sluicectl: expected \"worker drain NAME\"\n");
		ctl_worker_usage(stderr);
		return WK_EXIT_USAGE;
	}
	if (!name_ok(pos[2])) {
		fprintf(stderr, "sluicectl: worker name: expected 1 to %d characters of "
			"[A-Za-z0-9_.-]\n", CTL_WK_NAME_MAX);
		return WK_EXIT_INVALID;
	}
	if (!tok_file || !*tok_file) {
		fprintf(stderr, "sluicectl: worker drain needs --admin-token-file "
			"(or $SLUICE_ADMIN_TOKEN_FILE)\n");
		return WK_EXIT_USAGE;
	}
	if (read_token(tok_file, token) != 0)
		return WK_EXIT_INVALID;
	resp = cm_malloc(CTL_WK_RESPONSE_MAX);
	if (!resp) {
		rc = WK_EXIT_UNAVAILABLE;
		goto out;
	}
	snprintf(path, sizeof(path), "/admin/workers/%s/drain", pos[2]);
	if (post(addr, path, token, &status, resp, CTL_WK_RESPONSE_MAX) != 0) {
		rc = WK_EXIT_UNAVAILABLE;
		goto out;
	}
	body = strstr(resp, "\r\n\r\n");
	body = body ? body + 4 : resp + strlen(resp);
	if (status >= 200 && status < 300) {
		printf("worker %s: draining (no new placements; in-flight requests finish)\n",
		       pos[2]);
		rc = WK_EXIT_OK;
	} else {
		fprintf(stderr, "sluicectl: worker drain %s: HTTP %d: %s\n", pos[2], status, body);
		rc = status == 404 ? WK_EXIT_NOTFOUND
			: (status == 401 || status == 403) ? WK_EXIT_REFUSED
			: status == 400 ? WK_EXIT_INVALID : WK_EXIT_UNAVAILABLE;
	}
out:
	cm_wipe(token, sizeof(token));
	cm_free(resp);
	return rc;
}
