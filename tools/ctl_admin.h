/*
 * ctl_admin.h - sluicectl's client of the gateway's admin API: one
 * blocking plain HTTP/1.1 request to the loopback admin listener with the
 * bearer token of --admin-token-file (tools/ctl_admin.c).  Used by the
 * worker, model and eval commands.  Thread: main thread only.
 */
#ifndef SLUICE_TOOLS_CTL_ADMIN_H
#define SLUICE_TOOLS_CTL_ADMIN_H

#include <stddef.h>

#include <jansson.h>

#define CTL_ADMIN_TOKEN_MAX 256

/* Where the admin API is and how to authenticate (from options and env). */
struct ctl_admin {
	const char *addr;        /* ADDR:PORT, numeric */
	char token[CTL_ADMIN_TOKEN_MAX + 1];
	int timeout_s;           /* socket timeouts of one request */
};

/*
 * Takes --admin ADDR:PORT and --admin-token-file PATH out of argv (they may
 * appear anywhere; defaults $SLUICE_ADMIN or 127.0.0.1:9464 and
 * $SLUICE_ADMIN_TOKEN_FILE), reads the token, and leaves the other
 * arguments in argv[0..*argc).  0, or an exit code after a message.
 */
int ctl_admin_open(struct ctl_admin *a, int *argc, char **argv);
/* Wipes the token. */
void ctl_admin_close(struct ctl_admin *a);

/*
 * METHOD path with `body` (NULL: none) as JSON.  0 with *status and *resp
 * (the parsed JSON body, NULL when it is not JSON; the caller decrefs);
 * -1 after a message when the gateway cannot be reached or answered
 * something other than HTTP.  The response is read up to `max` bytes.
 */
int ctl_admin_call(const struct ctl_admin *a, const char *method, const char *path,
		   const char *body, size_t max, int *status, json_t **resp);

/* 1 when the first command word of argv (past --admin and
 * --admin-token-file with their values) is `a` or `b` (b may be NULL). */
int ctl_admin_command_is(int argc, char **argv, const char *a, const char *b);

/* The exit code of an HTTP status (docs/sluicectl.md). */
int ctl_admin_exit_code(int status);
/* Prints "sluicectl: WHAT: HTTP STATUS: MESSAGE" from an error body. */
void ctl_admin_print_error(const char *what, int status, const json_t *resp);

#endif
