/*
 * api_fixture.c - what the gateway/api tests share: an arena and the
 * default limits, parsing helpers, and the check of a refusal rendered in
 * the API's own error format (see api_fixture.h).
 */
#include "tests/gateway/api/api_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/arena.h"
#include "common/buf.h"
#include "gateway/api/api.h"

struct cm_arena *A;
struct gw_api_limits L;

int api_setup(void **state)
{
	(void)state;
	A = cm_arena_new(4096, 16 * 1024 * 1024);
	gw_api_limits_defaults(&L);
	return A ? 0 : -1;
}

int api_teardown(void **state)
{
	(void)state;
	cm_arena_free(A);
	return 0;
}

enum cm_status api_parse(enum gw_api_kind k, const char *json,
			    struct gw_api_request *r, struct gw_api_error *e)
{
	cm_arena_reset(A);
	return gw_api_parse(k, json, strlen(json), &L, A, r, e);
}

void api_ok(enum gw_api_kind k, const char *json, struct gw_api_request *r)
{
	struct gw_api_error e;

	if (api_parse(k, json, r, &e) != CM_OK)
		fail_msg("refused %s: %s", json, e.message);
}

int api_streq(struct proto_str s, const char *c)
{
	return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

json_t *api_load(const struct cm_buf *b)
{
	json_error_t je;
	json_t *j = json_loadb((const char *)cm_buf_data(b), cm_buf_len(b), 0, &je);

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, (const char *)cm_buf_data(b));
	return j;
}

/* Asserts a refusal, its message, and its rendering in the API's format. */
void api_bad(enum gw_api_kind k, const char *json, int status,
		const char *msg_part, const char *param)
{
	struct gw_api_request r;
	struct gw_api_error e;
	enum cm_status st = api_parse(k, json, &r, &e);
	enum gw_api_style style = (k == GW_API_OPENAI_CHAT || k == GW_API_OPENAI_COMPLETIONS)
					  ? GW_STYLE_OPENAI
					  : GW_STYLE_OLLAMA;
	struct cm_buf b;
	json_t *j, *err;

	if (st == CM_OK)
		fail_msg("accepted %s", json);
	if (e.status != status)
		fail_msg("%s: expected status %d, got %d (%s)", json, status, e.status, e.message);
	if (!strstr(e.message, msg_part))
		fail_msg("%s: message '%s' lacks '%s'", json, e.message, msg_part);
	if (param && strcmp(e.param, param) != 0)
		fail_msg("%s: param '%s', expected '%s'", json, e.param, param);
	cm_buf_init(&b, 8192);
	assert_int_equal(gw_api_render_error(&b, style, &e), CM_OK);
	j = api_load(&b);
	err = json_object_get(j, "error");
	if (style == GW_STYLE_OLLAMA) {
		assert_true(json_is_string(err));
		assert_string_equal(json_string_value(err), e.message);
		assert_int_equal(json_object_size(j), 1);
	} else {
		assert_true(json_is_object(err));
		assert_string_equal(json_string_value(json_object_get(err, "message")), e.message);
		assert_string_equal(json_string_value(json_object_get(err, "type")),
				    status >= 500 ? "server_error" : "invalid_request_error");
		if (param && param[0])
			assert_string_equal(json_string_value(json_object_get(err, "param")), param);
		assert_non_null(json_object_get(err, "code"));
	}
	json_decref(j);
	cm_buf_deinit(&b);
}

