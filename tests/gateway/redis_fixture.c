/*
 * redis_fixture.c - private redis-server for tests (see redis_fixture.h).
 */
#include "tests/gateway/redis_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "common/clock.h"

int redis_fixture_available(void)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (!path)
		return 0;
	while (*path) {
		size_t n = strcspn(path, ":");

		if (n > 0 && n < sizeof(buf) - 16) {
			memcpy(buf, path, n);
			memcpy(buf + n, "/redis-server", 14);
			if (access(buf, X_OK) == 0)
				return 1;
		}
		path += n;
		if (*path == ':')
			path++;
	}
	return 0;
}

static int answers_ping(const char *sock)
{
	struct timeval tv = {0, 200000};
	redisContext *c = redisConnectUnixWithTimeout(sock, tv);
	redisReply *r;
	int ok = 0;

	if (!c)
		return 0;
	if (!c->err) {
		r = redisCommand(c, "PING");
		/* a server with requirepass answers NOAUTH: up as well */
		ok = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
			   (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
		if (r)
			freeReplyObject(r);
	}
	redisFree(c);
	return ok;
}

int redis_fixture_start(struct redis_fixture *f)
{
	return redis_fixture_start_auth(f, NULL);
}

int redis_fixture_start_auth(struct redis_fixture *f, const char *password)
{
	int64_t deadline;

	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/sluice-redis-XXXXXX");
	if (!mkdtemp(f->dir)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(f->sock, sizeof(f->sock), "%s/r.sock", f->dir);
	f->pid = fork();
	if (f->pid < 0) {
		perror("fork");
		return -1;
	}
	if (f->pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execlp("redis-server", "redis-server", "--port", "0",
		       "--unixsocket", f->sock, "--unixsocketperm", "700",
		       "--save", "", "--appendonly", "no", "--daemonize", "no",
		       "--dir", f->dir, password ? "--requirepass" : (char *)NULL,
		       password, (char *)NULL);
		_exit(127);
	}
	deadline = cm_mono_ns() + 10 * CM_NS_PER_S;
	while (cm_mono_ns() < deadline) {
		int status;
		struct timespec ts = {0, 5 * 1000 * 1000};

		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			fprintf(stderr, "redis-server exited before answering PING\n");
			f->pid = 0;
			return -1;
		}
		if (answers_ping(f->sock))
			return 0;
		nanosleep(&ts, NULL); /* poll interval, bounded by the deadline */
	}
	fprintf(stderr, "redis-server did not answer PING within 10 s\n");
	redis_fixture_stop(f);
	return -1;
}

void redis_fixture_stop(struct redis_fixture *f)
{
	DIR *d;
	struct dirent *e;
	char path[sizeof(((struct redis_fixture *)0)->dir) + 260];

	if (f->pid > 0) {
		kill(f->pid, SIGTERM);
		waitpid(f->pid, NULL, 0);
		f->pid = 0;
	}
	if (!f->dir[0])
		return;
	d = opendir(f->dir);
	if (d) {
		while ((e = readdir(d)) != NULL) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", f->dir, e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(f->dir);
	f->dir[0] = '\0';
}
