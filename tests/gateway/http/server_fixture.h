/*
 * server_fixture.h - what test_server.c shares with its fixture
 * (server_fixture.c): the server under test, its loop thread, the
 * counters the handler bumps, and helpers.  Test code only.
 */
#ifndef SLUICE_TESTS_GATEWAY_HTTP_SERVER_FIXTURE_H
#define SLUICE_TESTS_GATEWAY_HTTP_SERVER_FIXTURE_H

#include <pthread.h>
#include <stdint.h>

#include <event2/event.h>

#include "common/status.h"
#include "gateway/http/server.h"

#define HEADER_TIMEOUT_MS 1000 /* generous: curl starts slowly on a loaded machine */
#define IDLE_TIMEOUT_MS 1500
#define BODY_TIMEOUT_MS 1500
#define DEADLINE_MS 5000
#define WRITE_TIMEOUT_MS 800

extern char dir[64];                 /* certificates, logs, scratch */
extern struct event_base *base;
extern pthread_t loop_thread;
extern struct gw_server *srv;        /* TLS, the main server under test */
extern uint16_t port;
extern int n_closed;                 /* on_close calls */
extern int n_overflow;               /* stream writes refused with CM_ELIMIT */
extern int n_handler_errors;         /* gw_request_* failures seen by the handler */

void bump(int *counter);
int read_counter(int *counter);
/* Waits until *counter >= target or the deadline passes; returns the value. */
int wait_counter(int *counter, int target);
/* Runs fn(arg) on the loop thread and waits for it. */
void on_loop(void (*fn)(void *), void *arg);
struct gw_server_stats stats_of(struct gw_server *s);
/* The test handler (paths in server_fixture.c). */
void handler(struct gw_request *req, void *ctx);
/* system() of a formatted command; its exit status. */
int sh(const char *fmt, ...) CM_PRINTF(1, 2);
void make_cert(const char *name);
void install_cert(const char *name);
void test_config(struct gw_server_config *c);
/* A key check before the body: "Bearer good" passes (answered later),
 * "Bearer hang" never answers, anything else is 401; cancels counted. */
extern int n_head_cancels;
void head_check(struct gw_head *h, void *ctx);
void head_cancel(struct gw_head *h, void *ctx);
/* On the loop thread: gw_server_free(p). */
void free_server_fn(void *p);
int group_setup(void **state);
int group_teardown(void **state);

#endif
