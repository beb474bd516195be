/*
 * test_router.c - gateway/http/paths.c: every route, 404, 405 with Allow,
 * HEAD on GET routes, model management on any method, error style by path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/http/paths.h"

static void expect_route(enum gw_http_method m, const char *path,
			 enum gw_path route)
{
	struct gw_path_match r;

	gw_paths_match(m, path, &r);
	if (r.status != 0 || r.route != route)
		fail_msg("%s %s: expected route %d, got status %d route %d",
			 gw_http_method_str(m), path, route, r.status, r.route);
}

static void test_routes(void **state)
{
	(void)state;
	expect_route(GW_HTTP_GET, "/", GW_PATH_ROOT);
	expect_route(GW_HTTP_POST, "/api/generate", GW_PATH_OLLAMA_GENERATE);
	expect_route(GW_HTTP_POST, "/api/chat", GW_PATH_OLLAMA_CHAT);
	expect_route(GW_HTTP_GET, "/api/tags", GW_PATH_OLLAMA_TAGS);
	expect_route(GW_HTTP_HEAD, "/api/tags", GW_PATH_OLLAMA_TAGS);
	expect_route(GW_HTTP_POST, "/api/show", GW_PATH_OLLAMA_SHOW);
	expect_route(GW_HTTP_GET, "/api/ps", GW_PATH_OLLAMA_PS);
	expect_route(GW_HTTP_GET, "/api/version", GW_PATH_OLLAMA_VERSION);
	expect_route(GW_HTTP_POST, "/v1/chat/completions", GW_PATH_OPENAI_CHAT);
	expect_route(GW_HTTP_POST, "/v1/completions", GW_PATH_OPENAI_COMPLETIONS);
	expect_route(GW_HTTP_GET, "/v1/models", GW_PATH_OPENAI_MODELS);
	expect_route(GW_HTTP_GET, "/healthz", GW_PATH_HEALTHZ);
	expect_route(GW_HTTP_GET, "/readyz", GW_PATH_READYZ);
	expect_route(GW_HTTP_GET, "/metrics", GW_PATH_METRICS);
	assert_string_equal(gw_path_name(GW_PATH_OPENAI_CHAT), "openai_chat");
	/* /v1/models/{id}: the rest of the path is the id; nothing after the
	 * slash is not a model */
	{
		struct gw_path_match r;

		gw_paths_match(GW_HTTP_GET, "/v1/models/org/tiny:latest", &r);
		assert_int_equal(r.status, 0);
		assert_int_equal(r.route, GW_PATH_OPENAI_MODEL);
		assert_string_equal(r.arg, "org/tiny:latest");
		gw_paths_match(GW_HTTP_GET, "/v1/models/", &r);
		assert_int_equal(r.status, 404);
		gw_paths_match(GW_HTTP_POST, "/v1/models/tiny", &r);
		assert_int_equal(r.status, 405);
		assert_null(r.arg);
	}
	assert_string_equal(gw_path_name(GW_PATH_NONE), "none");
}

static void test_manage_any_method(void **state)
{
	const char *ops[] = { "pull", "push", "create", "copy", "delete" };
	enum gw_http_method ms[] = { GW_HTTP_POST, GW_HTTP_DELETE, GW_HTTP_GET, GW_HTTP_OTHER };

	(void)state;
	for (size_t i = 0; i < 5; i++) {
		char path[32];

		snprintf(path, sizeof(path), "/api/%s", ops[i]);
		for (size_t k = 0; k < 4; k++) {
			struct gw_path_match r;

			gw_paths_match(ms[k], path, &r);
			assert_int_equal(r.status, 0);
			assert_int_equal(r.route, GW_PATH_MANAGE);
			assert_string_equal(r.manage_op, ops[i]);
		}
	}
}

static void test_errors(void **state)
{
	struct gw_path_match r;

	(void)state;
	gw_paths_match(GW_HTTP_GET, "/api/generate", &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "POST");
	assert_int_equal(r.style, GW_STYLE_OLLAMA);
	gw_paths_match(GW_HTTP_POST, "/v1/models", &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET, HEAD");
	assert_int_equal(r.style, GW_STYLE_OPENAI);
	gw_paths_match(GW_HTTP_OTHER, "/api/chat", &r);
	assert_int_equal(r.status, 405);
	gw_paths_match(GW_HTTP_GET, "/api/nope", &r);
	assert_int_equal(r.status, 404);
	assert_int_equal(r.route, GW_PATH_NONE);
	gw_paths_match(GW_HTTP_POST, "/v1/audio/speech", &r);
	assert_int_equal(r.status, 404);
	assert_int_equal(r.style, GW_STYLE_OPENAI);
	/* the embedding endpoints: POST only */
	gw_paths_match(GW_HTTP_POST, "/v1/embeddings", &r);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.route, GW_PATH_OPENAI_EMBEDDINGS);
	assert_string_equal(gw_path_name(r.route), "openai_embeddings");
	gw_paths_match(GW_HTTP_POST, "/api/embed", &r);
	assert_int_equal(r.route, GW_PATH_OLLAMA_EMBED);
	assert_int_equal(r.style, GW_STYLE_OLLAMA);
	gw_paths_match(GW_HTTP_POST, "/api/embeddings", &r);
	assert_int_equal(r.route, GW_PATH_OLLAMA_EMBEDDINGS);
	gw_paths_match(GW_HTTP_GET, "/api/embed", &r);
	assert_int_equal(r.status, 405);
	/* exact match only */
	gw_paths_match(GW_HTTP_POST, "/api/generate/", &r);
	assert_int_equal(r.status, 404);
	gw_paths_match(GW_HTTP_POST, "/API/generate", &r);
	assert_int_equal(r.status, 404);
	gw_paths_match(GW_HTTP_GET, NULL, &r);
	assert_int_equal(r.status, 404);
	assert_int_equal(gw_paths_style("/v1/x"), GW_STYLE_OPENAI);
	assert_int_equal(gw_paths_style("/v1"), GW_STYLE_OLLAMA);
	assert_int_equal(gw_paths_style(NULL), GW_STYLE_OLLAMA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_manage_any_method),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests_name("gateway_paths", tests, NULL, NULL);
}
