/*
 * redis_fixture.h - a private redis-server for tests.
 *
 * Starts `redis-server --port 0 --unixsocket <tmpdir>/r.sock` (no TCP, no
 * persistence) with fork/exec, waits until it answers PING on the socket
 * (polled, bounded by a deadline), and stops it and removes the directory
 * afterwards.  Tests skip (exit 77) when redis-server is not installed.
 */
#ifndef SLUICE_TESTS_REDIS_FIXTURE_H
#define SLUICE_TESTS_REDIS_FIXTURE_H

#include <sys/types.h>

struct redis_fixture {
	pid_t pid;
	char dir[64];
	char sock[128];
};

/* 1 when redis-server is found in PATH. */
int redis_fixture_available(void);
/* Starts the server; 0 on success, -1 with a message on stderr. */
int redis_fixture_start(struct redis_fixture *f);
/* The same with `--requirepass password` (NULL: none). */
int redis_fixture_start_auth(struct redis_fixture *f, const char *password);
void redis_fixture_stop(struct redis_fixture *f);

#endif
