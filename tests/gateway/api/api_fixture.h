/*
 * api_fixture.h - helpers of the gateway/api tests (test_api.c,
 * test_render.c): a per-group arena A and limits L (api_setup and
 * api_teardown are the group fixtures), parse / accept / refuse helpers.
 * Tests only.
 */
#ifndef SLUICE_TESTS_GATEWAY_API_FIXTURE_H
#define SLUICE_TESTS_GATEWAY_API_FIXTURE_H

#include <jansson.h>

#include "common/arena.h"
#include "common/buf.h"
#include "gateway/api/api.h"

extern struct cm_arena *A;
extern struct gw_api_limits L;

int api_setup(void **state);
int api_teardown(void **state);
/* gw_api_parse of `json` into the arena (reset first). */
enum cm_status api_parse(enum gw_api_kind k, const char *json, struct gw_api_request *r,
			 struct gw_api_error *e);
/* Fails the test unless `json` is accepted. */
void api_ok(enum gw_api_kind k, const char *json, struct gw_api_request *r);
int api_streq(struct proto_str s, const char *c);
/* The buffer parsed as JSON; fails the test when it is not JSON. */
json_t *api_load(const struct cm_buf *b);
/* Asserts a refusal, its message, and its rendering in the API's format. */
void api_bad(enum gw_api_kind k, const char *json, int status, const char *msg_part,
	     const char *param);

#endif
