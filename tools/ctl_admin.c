/*
 * ctl_admin.c - the admin API client of sluicectl (see ctl_admin.h).
 *
 * Plain HTTP/1.1 to ADDR:PORT, "Authorization: Bearer TOKEN" (the token
 * read from a line "NAME TOKEN" of the gateway's credentials file, or the
 * bare token), "Connection: close", the answer read to EOF up to a cap.
 * The token is never printed and is wiped after use.
 */
#include "tools/ctl_admin.h"

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
#include "tools/ctl_internal.h"

/* Reads the token: last field of the first non-comment line. */
static int read_token(const char *path, char tok[CTL_ADMIN_TOKEN_MAX + 1])
{
	FILE *f = fopen(path, "r");
	char line[CTL_ADMIN_TOKEN_MAX + 128];
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
		if (last && strlen(last) <= CTL_ADMIN_TOKEN_MAX) {
			snprintf(tok, CTL_ADMIN_TOKEN_MAX + 1, "%s", last);
			rc = 0;
		}
		break;
	}
	cm_wipe(line, sizeof(line));
	fclose(f);
	if (rc != 0)
		fprintf(stderr, "sluicectl: --admin-token-file %s: expected a line \"NAME TOKEN\" "
			"or a token of at most %d characters, found none\n", path, CTL_ADMIN_TOKEN_MAX);
	return rc;
}

int ctl_admin_open(struct ctl_admin *a, int *argc, char **argv)
{
	const char *tok_file = getenv("SLUICE_ADMIN_TOKEN_FILE");
	int n = 0;

	memset(a, 0, sizeof(*a));
	a->addr = getenv("SLUICE_ADMIN");
	if (!a->addr || !*a->addr)
		a->addr = "127.0.0.1:9464";
	a->timeout_s = 10;
	for (int i = 0; i < *argc; i++) {
		if (strcmp(argv[i], "--admin") == 0 || strcmp(argv[i], "--admin-token-file") == 0) {
			if (i + 1 >= *argc) {
				fprintf(stderr, "sluicectl: %s expects a value\n", argv[i]);
				return CTL_EXIT_USAGE;
			}
			if (strcmp(argv[i], "--admin") == 0)
				a->addr = argv[++i];
			else
				tok_file = argv[++i];
			continue;
		}
		argv[n++] = argv[i];
	}
	*argc = n;
	if (!tok_file || !*tok_file) {
		fprintf(stderr, "sluicectl: this command needs --admin-token-file "
			"(or $SLUICE_ADMIN_TOKEN_FILE)\n");
		return CTL_EXIT_USAGE;
	}
	return read_token(tok_file, a->token) == 0 ? 0 : CTL_EXIT_INVALID;
}

void ctl_admin_close(struct ctl_admin *a)
{
	cm_wipe(a->token, sizeof(a->token));
}

static int dial(const char *addr, int timeout_s)
{
	char host[256], *port;
	struct addrinfo hints, *res = NULL;
	struct timeval tv = { timeout_s, 0 };
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

static int send_all(int fd, const char *p, size_t n)
{
	for (size_t off = 0; off < n;) {
		ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

int ctl_admin_call(const struct ctl_admin *a, const char *method, const char *path,
		   const char *body, size_t max, int *status, json_t **resp)
{
	size_t blen = body ? strlen(body) : 0, got = 0;
	char head[1024], *buf = NULL, *b;
	int fd = -1, n, rc = -1;

	*resp = NULL;
	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n", method, path, a->addr, a->token, blen);
	if (n < 0 || (size_t)n >= sizeof(head) || !(buf = cm_malloc(max + 1)))
		goto out;
	fd = dial(a->addr, a->timeout_s);
	if (fd < 0) {
		fprintf(stderr, "sluicectl: cannot reach the gateway's admin listener at %s "
			"(expected ADDR:PORT with a numeric address)\n", a->addr);
		goto out;
	}
	if (send_all(fd, head, (size_t)n) != 0 || (blen && send_all(fd, body, blen) != 0)) {
		fprintf(stderr, "sluicectl: sending to %s: %s\n", a->addr, strerror(errno));
		goto out;
	}
	while (got < max) {
		ssize_t r = recv(fd, buf + got, max - got, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			fprintf(stderr, "sluicectl: %s: no answer within %d s\n", a->addr, a->timeout_s);
			goto out;
		}
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	if (sscanf(buf, "HTTP/1.%*d %d", status) != 1) {
		fprintf(stderr, "sluicectl: %s: expected an HTTP response, found %zu byte(s) "
			"without a status line\n", a->addr, got);
		goto out;
	}
	b = strstr(buf, "\r\n\r\n");
	if (b)
		*resp = json_loadb(b + 4, got - (size_t)(b + 4 - buf), 0, NULL);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	cm_wipe(head, sizeof(head));
	cm_free(buf);
	return rc;
}

int ctl_admin_command_is(int argc, char **argv, const char *a, const char *b)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], a) == 0 || (b && strcmp(argv[i], b) == 0))
			return 1;
		if (strcmp(argv[i], "--admin") == 0 || strcmp(argv[i], "--admin-token-file") == 0)
			i++;
		else if (strncmp(argv[i], "--", 2) != 0)
			return 0;
	}
	return 0;
}

int ctl_admin_exit_code(int status)
{
	if (status >= 200 && status < 300)
		return CTL_EXIT_OK;
	if (status == 404)
		return CTL_EXIT_NOTFOUND;
	if (status == 409)
		return CTL_EXIT_CONFLICT;
	if (status == 401 || status == 403)
		return CTL_EXIT_REFUSED;
	if (status == 400)
		return CTL_EXIT_INVALID;
	return CTL_EXIT_UNAVAILABLE;
}

void ctl_admin_print_error(const char *what, int status, const json_t *resp)
{
	const char *m = json_string_value(json_object_get(json_object_get(resp, "error"), "message"));

	fprintf(stderr, "sluicectl: %s: HTTP %d: %s\n", what, status, m ? m : "(no message)");
}
