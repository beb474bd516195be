/*
 * gateway_fixture.h - the whole service of test_gateway.c: a private
 * redis-server on a Unix socket, one sluice-worker on a generated tiny
 * model, sluice-gateway with a certificate made by the test (openssl CLI),
 * keys made with sluicectl; curl as the client.  gwt_setup / gwt_teardown
 * are the cmocka group fixtures.  Tests only.
 */
#ifndef SLUICE_TESTS_INTEGRATION_GATEWAY_FIXTURE_H
#define SLUICE_TESTS_INTEGRATION_GATEWAY_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

#include "tests/integration/harness.h"

#define DEADLINE_MS 60000

extern struct h_proc gwt_redis, gwt_worker, gwt_gateway;
extern char gwt_dir[512], gwt_redis_sock[600], gwt_worker_sock[600], gwt_cert[600], gwt_pepper[600];
extern int gwt_port, gwt_admin_port;
extern char gwt_worker_cfg[2048];
extern char gwt_key_a[64], gwt_key_b[64], gwt_key_night[64], gwt_key_small[64];
/* The worker's model, set before gwt_setup: a file (NULL: the generated
 * tiny Q8_0 model) and the name it is served as ("tiny"). */
extern const char *gwt_model_file;
extern const char *gwt_model_name;
/* gateway.max_inflight_per_worker (1: the queueing tests of test_gateway.c;
 * OpenAI `n` needs as many) */
extern unsigned gwt_max_inflight;
/* worker.context (0: the model's) */
extern unsigned gwt_context;
/* worker.chat_template (NULL: the model's own) */
extern const char *gwt_chat_template;
/* gateway limits.thinking_token_budget (0: none) */
extern unsigned gwt_thinking_budget;
/* more members of the gateway object, each after a comma (default "") */
extern const char *gwt_gateway_extra;

struct gwt_resp {
	int code;
	char *body;
	char *headers;
};

void gwt_resp_free(struct gwt_resp *r);
void gwt_req(struct gwt_resp *r, const char *path, const char *key, const char *data,
		size_t data_len, const char *extra);
json_t *gwt_parse(const char *s);
const char *gwt_ollama_error(json_t *j);
const char *gwt_openai_error(json_t *j);
/* POSTs an OpenAI chat body as key A and asserts it was served as much as
 * fits: 200, finish stop or length, prompt + completion under 4096 tokens
 * (the tiny model's context is smaller than the default limit). */
void gwt_assert_fits(const char *body);
char *gwt_metrics(void);
/* Polls /metrics until `series` equals `value` (at_least: reaches it), or
 * the deadline; 0, or -1. */
int gwt_wait_metric(const char *series, double value, int at_least);
/* Occurrences of `needle` in the file at `path` now; polls until there
 * are `count` of them (gwt_wait_log: one), or the deadline: 0, or -1. */
int gwt_log_count(const char *path, const char *needle);
int gwt_wait_log(const char *path, const char *needle);
int gwt_wait_log_count(const char *path, const char *needle, int count);
int gwt_wait_port_line(void);
int gwt_wait_ready(void);
void gwt_assert_served(void);
int gwt_start_redis(void);
/*
 * The official npm clients (tests/clients/) installed with `npm ci` from
 * the committed lock file into <build>/<folder>, then `node compat.mjs`
 * run there with `env` (extra VAR=value words) against this stack as key
 * A: its output (malloc'd; the caller asserts on it).  Skips the test when
 * node or npm is absent.
 */
char *gwt_run_clients(const char *folder, const char *env, const char *model, int *status);
/*
 * Starts `curl -N` streaming `body` to `path` as `key` (NULL: key A;
 * X-Sluice-Ignore-EOS) and returns at once: the pid; *fd the read end of
 * its output (the caller closes it).
 */
pid_t gwt_stream_start(const char *path, const char *key, const char *body, int *fd);
/*
 * Starts `curl -N` streaming `body` to `path` as `key` (NULL: key A; X-Sluice-Ignore-EOS,
 * so it runs until killed or its limit) and returns once its first bytes
 * arrived: the generation is under way.  The pid; *fd the read end of its
 * output (the caller closes it); the first bytes in first[0..*n) when
 * `first` is not NULL.
 */
pid_t gwt_stream_begun(const char *path, const char *key, const char *body, int *fd, char *first,
		       size_t cap, size_t *n);
/* The shipped model (models/stories260K) as the fixture's model, under
 * `name`; -1 without SLUICE_SOURCE_DIR. */
int gwt_use_stories(char *file, size_t file_len, const char *name);
int gwt_setup(void **state);
int gwt_teardown(void **state);

#endif
