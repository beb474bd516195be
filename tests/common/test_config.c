/*
 * test_config.c - the declarative configuration loader: defaults, every key
 * type, nested objects and lists, the text of every error message, file
 * loading limits, Markdown docs, and allocation-failure injection over the
 * cleanup paths (leaks are caught by the ASan build).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "common/config.h"
#include "common/limits.h"

/* ---- the tables under test ------------------------------------------- */

struct t_worker {
	char *socket;
	int64_t weight;
	struct cm_cfg_strlist tags;
};

struct t_limits {
	uint64_t body_bytes;
	int64_t header_timeout_ms;
};

struct t_gw {
	bool tls;
	int64_t port;
	double ratio;
	char *name;
	int policy;
	uint64_t cache_bytes;
	int64_t idle_ms;
	struct cm_cfg_strlist origins;
	struct cm_cfg_objlist workers;
	struct t_limits limits;
	char *pepper;
};

struct t_log {
	int level;
};

static const char *const t_tags_none[] = { NULL };

static const struct cm_cfg_key t_worker_keys[] = {
	{ .name = "socket", .type = CM_CFG_T_STRING,
	  .offset = offsetof(struct t_worker, socket),
	  .flags = CM_CFG_F_REQUIRED, .max_len = 108,
	  .doc = "Path of the worker's Unix socket." },
	CM_CFG_INT(struct t_worker, weight, 1, 1, 100, "Dispatch weight."),
	CM_CFG_STRLIST(struct t_worker, tags, t_tags_none, 4, 16, "Labels."),
};
static const struct cm_cfg_section t_worker_sec =
	CM_CFG_SECTION("worker", struct t_worker, t_worker_keys, "One worker.");

static const struct cm_cfg_key t_limits_keys[] = {
	CM_CFG_SIZE(struct t_limits, body_bytes, 4 << 20, 1024, 1073741824,
		    "Largest body."),
	CM_CFG_DURATION(struct t_limits, header_timeout_ms, 10000, 1, 600000,
			"Header | read timeout."),
};
static const struct cm_cfg_section t_limits_sec =
	CM_CFG_SECTION("limits", struct t_limits, t_limits_keys, "Limits.");

static const char *const t_policies[] = { "fifo", "drr", "lottery" };
static const char *const t_origins_def[] = { "a.example", "b.example", NULL };

static const struct cm_cfg_key t_gw_keys[] = {
	CM_CFG_BOOL(struct t_gw, tls, true, "Serve TLS."),
	CM_CFG_INT(struct t_gw, port, 8443, 1, 65535, "TCP port."),
	CM_CFG_DOUBLE(struct t_gw, ratio, 0.5, 0.0, 2.0, "A ratio."),
	CM_CFG_STRING(struct t_gw, name, "sluice", 8, "Instance name."),
	CM_CFG_ENUM(struct t_gw, policy, 1, t_policies, "Dispatch policy."),
	CM_CFG_SIZE(struct t_gw, cache_bytes, 512ll << 20, 0,
		    1ll << 40, "Cache size."),
	CM_CFG_DURATION(struct t_gw, idle_ms, 60000, 10, 3600000,
			"Idle timeout."),
	CM_CFG_STRLIST(struct t_gw, origins, t_origins_def, 3, 12,
		       "Allowed origins."),
	CM_CFG_OBJLIST(struct t_gw, workers, &t_worker_sec, 3, "Workers."),
	CM_CFG_OBJECT(struct t_gw, limits, &t_limits_sec, "HTTP limits."),
	{ .name = "pepper", .type = CM_CFG_T_STRING,
	  .offset = offsetof(struct t_gw, pepper), .flags = CM_CFG_F_SECRET,
	  .max_len = 64, .def_s = NULL, .doc = "HMAC pepper." },
};
static const struct cm_cfg_section t_gw_sec =
	CM_CFG_SECTION("gateway", struct t_gw, t_gw_keys, "The gateway.");

static const char *const t_levels[] = { "debug", "info", "warn" };
static const struct cm_cfg_key t_log_keys[] = {
	CM_CFG_ENUM(struct t_log, level, 1, t_levels, "Log level."),
};
static const struct cm_cfg_section t_log_sec =
	CM_CFG_SECTION("log", struct t_log, t_log_keys, "Logging.");

static const struct cm_cfg_section *const t_secs[] = { &t_gw_sec, &t_log_sec };

struct t_both {
	struct t_gw gw;
	struct t_log log;
};

static enum cm_status load(struct t_both *b, const char *json, char *err,
			   size_t errlen)
{
	void *const structs[] = { &b->gw, &b->log };

	return cm_cfg_load_string(json, strlen(json), t_secs, structs, 2, err,
				  errlen);
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

/* Both structs zeroed (the padding of t_both itself is not ours). */
static bool both_zero(const struct t_both *b)
{
	return all_zero(&b->gw, sizeof(b->gw)) &&
	       all_zero(&b->log, sizeof(b->log));
}

static void free_both(struct t_both *b)
{
	cm_cfg_free(&t_gw_sec, &b->gw);
	cm_cfg_free(&t_log_sec, &b->log);
	assert_true(both_zero(b));
}

/* ---- defaults and types ---------------------------------------------- */

static void test_defaults(void **state)
{
	struct t_gw g;

	(void)state;
	memset(&g, 0xAB, sizeof(g));
	assert_int_equal(cm_cfg_defaults(&t_gw_sec, &g), CM_OK);
	assert_true(g.tls);
	assert_int_equal(g.port, 8443);
	assert_true(g.ratio == 0.5);
	assert_string_equal(g.name, "sluice");
	assert_int_equal(g.policy, 1);
	assert_int_equal(g.cache_bytes, 512ull << 20);
	assert_int_equal(g.idle_ms, 60000);
	assert_int_equal(g.origins.n, 2);
	assert_string_equal(g.origins.items[0], "a.example");
	assert_string_equal(g.origins.items[1], "b.example");
	assert_int_equal(g.workers.n, 0);
	assert_null(g.workers.items);
	assert_int_equal(g.limits.body_bytes, 4 << 20);
	assert_int_equal(g.limits.header_timeout_ms, 10000);
	assert_null(g.pepper);
	cm_cfg_free(&t_gw_sec, &g);
	assert_true(all_zero(&g, sizeof(g)));
	cm_cfg_free(&t_gw_sec, NULL);
	cm_cfg_free(NULL, &g);
}

static void test_empty_file_gives_defaults(void **state)
{
	struct t_both b;
	char err[256];

	(void)state;
	assert_int_equal(load(&b, "{}", err, sizeof(err)), CM_OK);
	assert_string_equal(err, "");
	assert_int_equal(b.gw.port, 8443);
	assert_int_equal(b.log.level, 1);
	free_both(&b);
	assert_int_equal(load(&b, "{\"gateway\": {}}", err, sizeof(err)),
			 CM_OK);
	assert_int_equal(b.gw.port, 8443);
	free_both(&b);
}

static void test_every_type(void **state)
{
	struct t_both b;
	char err[256];
	const char *json =
		"{\n"
		" \"log\": {\"level\": \"warn\"},\n"
		" \"gateway\": {\n"
		"  \"tls\": false, \"port\": 65535, \"ratio\": 2,\n"
		"  \"name\": \"edge-01\", \"policy\": \"lottery\",\n"
		"  \"cache_bytes\": \"2GiB\", \"idle_ms\": \"2m\",\n"
		"  \"origins\": [\"x.test\"],\n"
		"  \"workers\": [\n"
		"    {\"socket\": \"/run/w0.sock\"},\n"
		"    {\"socket\": \"/run/w1.sock\", \"weight\": 7,\n"
		"     \"tags\": [\"gpu\", \"h200\"]}\n"
		"  ],\n"
		"  \"limits\": {\"body_bytes\": 2048, \"header_timeout_ms\": "
		"\"500ms\"},\n"
		"  \"pepper\": \"s3cret\"\n"
		" }\n"
		"}\n";
	struct t_worker *w;

	(void)state;
	assert_int_equal(load(&b, json, err, sizeof(err)), CM_OK);
	assert_false(b.gw.tls);
	assert_int_equal(b.gw.port, 65535);
	assert_true(b.gw.ratio == 2.0);
	assert_string_equal(b.gw.name, "edge-01");
	assert_int_equal(b.gw.policy, 2);
	assert_int_equal(b.gw.cache_bytes, 2ull << 30);
	assert_int_equal(b.gw.idle_ms, 120000);
	assert_int_equal(b.gw.origins.n, 1);
	assert_string_equal(b.gw.origins.items[0], "x.test");
	assert_int_equal(b.gw.workers.n, 2);
	w = b.gw.workers.items;
	assert_string_equal(w[0].socket, "/run/w0.sock");
	assert_int_equal(w[0].weight, 1); /* default inside a list element */
	assert_int_equal(w[0].tags.n, 0);
	assert_string_equal(w[1].socket, "/run/w1.sock");
	assert_int_equal(w[1].weight, 7);
	assert_int_equal(w[1].tags.n, 2);
	assert_string_equal(w[1].tags.items[1], "h200");
	assert_int_equal(b.gw.limits.body_bytes, 2048);
	assert_int_equal(b.gw.limits.header_timeout_ms, 500);
	assert_string_equal(b.gw.pepper, "s3cret");
	assert_int_equal(b.log.level, 2);
	free_both(&b);
}

static void test_empty_lists_replace_defaults(void **state)
{
	struct t_both b;
	char err[256];

	(void)state;
	assert_int_equal(load(&b, "{\"gateway\": {\"origins\": [], "
				  "\"workers\": []}}", err, sizeof(err)),
			 CM_OK);
	assert_int_equal(b.gw.origins.n, 0);
	assert_int_equal(b.gw.workers.n, 0);
	free_both(&b);
}

static void test_parse_size_and_duration(void **state)
{
	uint64_t sz;
	int64_t ms;

	(void)state;
	assert_int_equal(cm_cfg_parse_size("512MiB", &sz), CM_OK);
	assert_int_equal(sz, 512ull << 20);
	assert_int_equal(cm_cfg_parse_size("2GiB", &sz), CM_OK);
	assert_int_equal(sz, 2ull << 30);
	assert_int_equal(cm_cfg_parse_size("64KB", &sz), CM_OK);
	assert_int_equal(sz, 64000);
	assert_int_equal(cm_cfg_parse_size("3TB", &sz), CM_OK);
	assert_int_equal(sz, 3000000000000ull);
	assert_int_equal(cm_cfg_parse_size("1TiB", &sz), CM_OK);
	assert_int_equal(sz, 1ull << 40);
	assert_int_equal(cm_cfg_parse_size("17", &sz), CM_OK);
	assert_int_equal(sz, 17);
	assert_int_equal(cm_cfg_parse_size("17B", &sz), CM_OK);
	assert_int_equal(sz, 17);
	assert_int_equal(cm_cfg_parse_size("1.5GiB", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("-1", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("GiB", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("5 MiB", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("5mib", &sz), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("18446744073709551615", &sz), CM_OK);
	assert_int_equal(cm_cfg_parse_size("18446744073709551616", &sz),
			 CM_EINVAL);
	assert_int_equal(cm_cfg_parse_size("16777216TiB", &sz), CM_EINVAL);

	assert_int_equal(cm_cfg_parse_duration("500ms", &ms), CM_OK);
	assert_int_equal(ms, 500);
	assert_int_equal(cm_cfg_parse_duration("10s", &ms), CM_OK);
	assert_int_equal(ms, 10000);
	assert_int_equal(cm_cfg_parse_duration("2m", &ms), CM_OK);
	assert_int_equal(ms, 120000);
	assert_int_equal(cm_cfg_parse_duration("1h", &ms), CM_OK);
	assert_int_equal(ms, 3600000);
	assert_int_equal(cm_cfg_parse_duration("250", &ms), CM_OK);
	assert_int_equal(ms, 250);
	assert_int_equal(cm_cfg_parse_duration("1d", &ms), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_duration("1.5s", &ms), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_duration("s", &ms), CM_EINVAL);
	assert_int_equal(cm_cfg_parse_duration("9223372036854775807", &ms),
			 CM_OK);
	assert_int_equal(cm_cfg_parse_duration("9223372036854775807s", &ms),
			 CM_EINVAL);
}

/* ---- error messages --------------------------------------------------- */

struct t_case {
	const char *json;
	enum cm_status st;
	const char *msg;
};

static const struct t_case t_cases[] = {
	/* types */
	{ "{\"gateway\": {\"tls\": 1}}", CM_EINVAL,
	  "gateway.tls: expected true or false, found 1" },
	{ "{\"gateway\": {\"port\": 5.0}}", CM_EINVAL,
	  "gateway.port: expected an integer in [1, 65535], found 5.0" },
	{ "{\"gateway\": {\"port\": \"80\"}}", CM_EINVAL,
	  "gateway.port: expected an integer in [1, 65535], found \"80\"" },
	{ "{\"gateway\": {\"port\": 0}}", CM_EINVAL,
	  "gateway.port: expected an integer in [1, 65535], found 0" },
	{ "{\"gateway\": {\"port\": 65536}}", CM_EINVAL,
	  "gateway.port: expected an integer in [1, 65535], found 65536" },
	{ "{\"gateway\": {\"ratio\": 2.5}}", CM_EINVAL,
	  "gateway.ratio: expected a number in [0.0, 2.0], found 2.5" },
	{ "{\"gateway\": {\"ratio\": \"1\"}}", CM_EINVAL,
	  "gateway.ratio: expected a number in [0.0, 2.0], found \"1\"" },
	{ "{\"gateway\": {\"name\": true}}", CM_EINVAL,
	  "gateway.name: expected a string of at most 8 bytes, found true" },
	{ "{\"gateway\": {\"name\": \"ninechars\"}}", CM_EINVAL,
	  "gateway.name: expected a string of at most 8 bytes, found a string "
	  "of 9 bytes" },
	{ "{\"gateway\": {\"name\": null}}", CM_EINVAL,
	  "gateway.name: expected a string of at most 8 bytes, found null" },
	{ "{\"gateway\": {\"policy\": \"random\"}}", CM_EINVAL,
	  "gateway.policy: expected one of \"fifo\", \"drr\", \"lottery\", "
	  "found \"random\"" },
	{ "{\"gateway\": {\"policy\": 1}}", CM_EINVAL,
	  "gateway.policy: expected one of \"fifo\", \"drr\", \"lottery\", "
	  "found 1" },
	{ "{\"gateway\": {\"cache_bytes\": \"2TiB\"}}", CM_EINVAL,
	  "gateway.cache_bytes: expected a size in [0, 1TiB], found \"2TiB\"" },
	{ "{\"gateway\": {\"cache_bytes\": -1}}", CM_EINVAL,
	  "gateway.cache_bytes: expected a size in [0, 1TiB], found -1" },
	{ "{\"gateway\": {\"cache_bytes\": \"1.5GiB\"}}", CM_EINVAL,
	  "gateway.cache_bytes: expected a size in [0, 1TiB] (an integer number "
	  "of bytes or a string like \"512MiB\"), found \"1.5GiB\"" },
	{ "{\"gateway\": {\"cache_bytes\": [1]}}", CM_EINVAL,
	  "gateway.cache_bytes: expected a size in [0, 1TiB] (an integer number "
	  "of bytes or a string like \"512MiB\"), found an array of 1 elements" },
	{ "{\"gateway\": {\"idle_ms\": \"2d\"}}", CM_EINVAL,
	  "gateway.idle_ms: expected a duration in [10ms, 1h] (integer "
	  "milliseconds or a string like \"500ms\", \"10s\", \"2m\"), found "
	  "\"2d\"" },
	{ "{\"gateway\": {\"idle_ms\": \"2h\"}}", CM_EINVAL,
	  "gateway.idle_ms: expected a duration in [10ms, 1h], found \"2h\"" },
	{ "{\"gateway\": {\"idle_ms\": 5}}", CM_EINVAL,
	  "gateway.idle_ms: expected a duration in [10ms, 1h], found 5" },
	/* lists */
	{ "{\"gateway\": {\"origins\": \"x\"}}", CM_EINVAL,
	  "gateway.origins: expected an array of at most 3 strings, found "
	  "\"x\"" },
	{ "{\"gateway\": {\"origins\": [\"a\", \"b\", \"c\", \"d\"]}}",
	  CM_EINVAL,
	  "gateway.origins: expected an array of at most 3 strings, found 4" },
	{ "{\"gateway\": {\"origins\": [\"a\", 7]}}", CM_EINVAL,
	  "gateway.origins[1]: expected a string of at most 12 bytes, found 7" },
	{ "{\"gateway\": {\"origins\": [\"much-too-long.example\"]}}",
	  CM_EINVAL,
	  "gateway.origins[0]: expected a string of at most 12 bytes, found a "
	  "string of 21 bytes" },
	{ "{\"gateway\": {\"workers\": {}}}", CM_EINVAL,
	  "gateway.workers: expected an array of at most 3 objects, found an "
	  "object" },
	{ "{\"gateway\": {\"workers\": [{\"socket\":\"a\"}, {\"socket\":\"b\"}, "
	  "{\"socket\":\"c\"}, {\"socket\":\"d\"}]}}", CM_EINVAL,
	  "gateway.workers: expected an array of at most 3 objects, found 4" },
	{ "{\"gateway\": {\"workers\": [{\"socket\": \"a\"}, \"b\"]}}",
	  CM_EINVAL, "gateway.workers[1]: expected an object, found \"b\"" },
	{ "{\"gateway\": {\"workers\": [{\"socket\": \"a\"}, {\"socket\": "
	  "\"b\"}, {\"socket\": true}]}}", CM_EINVAL,
	  "gateway.workers[2].socket: expected a string of at most 108 bytes, "
	  "found true" },
	{ "{\"gateway\": {\"workers\": [{\"socket\": \"a\", \"tags\": "
	  "[\"x\", false]}]}}", CM_EINVAL,
	  "gateway.workers[0].tags[1]: expected a string of at most 16 bytes, "
	  "found false" },
	{ "{\"gateway\": {\"workers\": [{\"weight\": 3}]}}", CM_EINVAL,
	  "gateway.workers[0].socket: required key is missing" },
	{ "{\"gateway\": {\"workers\": [{\"socket\": \"a\", \"wieght\": 3}]}}",
	  CM_EINVAL,
	  "unknown key \"wieght\" in \"gateway.workers[0]\" (did you mean "
	  "\"weight\"?)" },
	/* nested object */
	{ "{\"gateway\": {\"limits\": {\"body_bytes\": 5}}}", CM_EINVAL,
	  "gateway.limits.body_bytes: expected a size in [1KiB, 1GiB], found 5" },
	{ "{\"gateway\": {\"limits\": []}}", CM_EINVAL,
	  "gateway.limits: expected an object, found an array of 0 elements" },
	{ "{\"gateway\": {\"limits\": {\"bodybytes\": 5}}}", CM_EINVAL,
	  "unknown key \"bodybytes\" in \"gateway.limits\" (did you mean "
	  "\"body_bytes\"?)" },
	/* unknown names */
	{ "{\"gateway\": {\"prot\": 1}}", CM_EINVAL,
	  "unknown key \"prot\" in section \"gateway\" (did you mean "
	  "\"port\"?)" },
	{ "{\"gateway\": {\"completely_different\": 1}}", CM_EINVAL,
	  "unknown key \"completely_different\" in section \"gateway\"" },
	{ "{\"gatewya\": {}}", CM_EINVAL,
	  "unknown section \"gatewya\" (did you mean \"gateway\"?)" },
	{ "{\"redis\": {}}", CM_EINVAL, "unknown section \"redis\"" },
	{ "{\"gateway\": 5}", CM_EINVAL,
	  "gateway: expected an object, found 5" },
	{ "[1, 2]", CM_EINVAL,
	  "expected a JSON object whose members are sections, found an array "
	  "of 2 elements" },
	/* secrets are never echoed */
	{ "{\"gateway\": {\"pepper\": 12345}}", CM_EINVAL,
	  "gateway.pepper: expected a string of at most 64 bytes, found a "
	  "number (secret, not shown)" },
	/* JSON syntax and duplicates */
	{ "{\"gateway\": {\"port\": 1, \"port\": 2}}", CM_EFORMAT,
	  "JSON syntax error at line 1, column 30: duplicate object key near "
	  "'\"port\"'" },
	{ "{\n  \"gateway\": {\n    \"port\": 80,\n  }\n}", CM_EFORMAT,
	  "JSON syntax error at line 4, column 3: string or '}' expected near "
	  "'}'" },
	{ "", CM_EFORMAT,
	  "JSON syntax error at line 1, column 0: '[' or '{' expected near end "
	  "of file" },
	{ "{} {}", CM_EFORMAT,
	  "JSON syntax error at line 1, column 4: end of file expected near "
	  "'{'" },
	/* values that look like the name of an escape are quoted safely */
	{ "{\"gateway\": {\"name\": 1, \"\\\"\\n\": 2}}", CM_EINVAL,
	  "gateway.name: expected a string of at most 8 bytes, found 1" },
	{ "{\"gateway\": {\"x\\\"\\n\": 2}}", CM_EINVAL,
	  "unknown key \"x\\\"\\x0a\" in section \"gateway\"" },
};

static void test_error_messages(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(t_cases) / sizeof(t_cases[0]); i++) {
		struct t_both b;
		char err[512];
		enum cm_status st;

		memset(&b, 0x5A, sizeof(b));
		st = load(&b, t_cases[i].json, err, sizeof(err));
		if (st != t_cases[i].st || strcmp(err, t_cases[i].msg) != 0)
			print_error("case %zu: %s\n  got %d \"%s\"\n", i,
				    t_cases[i].json, st, err);
		assert_int_equal(st, t_cases[i].st);
		assert_string_equal(err, t_cases[i].msg);
		/* a failed load leaves nothing to free */
		assert_true(both_zero(&b));
	}
}

static void test_long_values_are_truncated(void **state)
{
	struct t_both b;
	char err[512];
	char json[512];

	(void)state;
	snprintf(json, sizeof(json), "{\"gateway\": {\"port\": \"%0200d\"}}", 7);
	assert_int_equal(load(&b, json, err, sizeof(err)), CM_EINVAL);
	assert_string_equal(err,
			    "gateway.port: expected an integer in [1, 65535], "
			    "found \"0000000000000000000000000000000000000000...\"");
	/* a tiny error buffer is truncated, never overrun */
	assert_int_equal(load(&b, json, err, 10), CM_EINVAL);
	assert_string_equal(err, "gateway.p");
	assert_int_equal(load(&b, json, NULL, 0), CM_EINVAL);
}

/* ---- files ------------------------------------------------------------ */

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void test_load_file(void **state)
{
	char path[] = "/tmp/sluice-test-config-XXXXXX";
	struct t_both b;
	void *const structs[] = { &b.gw, &b.log };
	char err[512], want[600];
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);

	write_file(path, "{\"gateway\": {\"port\": 9000}}", 27);
	assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
					  sizeof(err)), CM_OK);
	assert_int_equal(b.gw.port, 9000);
	free_both(&b);

	write_file(path, "{\"gateway\": {\"port\": 0}}", 24);
	assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
					  sizeof(err)), CM_EINVAL);
	snprintf(want, sizeof(want), "%s: gateway.port: expected an integer in "
		 "[1, 65535], found 0", path);
	assert_string_equal(err, want);

	write_file(path, "{\n\"gateway\": {\"port\": 0,}}", 26);
	assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
					  sizeof(err)), CM_EFORMAT);
	snprintf(want, sizeof(want), "%s:2:23: JSON syntax error: string or "
		 "'}' expected near '}'", path);
	assert_string_equal(err, want);

	/* exactly at the cap is fine (whitespace after the object), one more
	 * byte is refused */
	{
		size_t cap = CM_LIM_CONFIG_FILE_BYTES;
		char *big = malloc(cap + 1);

		assert_non_null(big);
		memset(big, ' ', cap + 1);
		memcpy(big, "{}", 2);
		write_file(path, big, cap);
		assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
						  sizeof(err)), CM_OK);
		free_both(&b);
		write_file(path, big, cap + 1);
		assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
						  sizeof(err)), CM_ELIMIT);
		snprintf(want, sizeof(want), "%s: file is larger than the "
			 "1048576-byte limit", path);
		assert_string_equal(err, want);
		assert_true(both_zero(&b));
		assert_int_equal(cm_cfg_load_string(big, cap + 1, t_secs,
						    structs, 2, err,
						    sizeof(err)), CM_ELIMIT);
		assert_string_equal(err, "configuration is 1048577 bytes, over "
			"the 1048576-byte limit");
		free(big);
	}

	/* a FIFO is refused at once, not waited on (issue 13, finding 17) */
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	alarm(10);
	assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
					  sizeof(err)), CM_EFORMAT);
	alarm(0);
	snprintf(want, sizeof(want), "%s: expected a regular file", path);
	assert_string_equal(err, want);

	unlink(path);
	assert_int_equal(cm_cfg_load_file(path, t_secs, structs, 2, err,
					  sizeof(err)), CM_ENOTFOUND);
	snprintf(want, sizeof(want), "%s: cannot open: No such file or "
		 "directory", path);
	assert_string_equal(err, want);
	assert_true(both_zero(&b));
}

/* ---- allocation failure ------------------------------------------------ */

static const char *t_full_json =
	"{\"gateway\": {\"name\": \"n\", \"origins\": [\"a\", \"b\"],"
	" \"pepper\": \"p\", \"workers\": [{\"socket\": \"s0\", \"tags\": "
	"[\"t\"]}, {\"socket\": \"s1\", \"tags\": [\"u\", \"v\"]}]},"
	" \"log\": {\"level\": \"debug\"}}";

static void test_alloc_failure_load(void **state)
{
	long n;

	(void)state;
	for (n = 0; n < 1000; n++) {
		struct t_both b;
		char err[256];
		enum cm_status st;

		memset(&b, 0x77, sizeof(b));
		cm_alloc_fail_after(n);
		st = load(&b, t_full_json, err, sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			assert_int_equal(cm_alloc_failed_count(), 0);
			assert_int_equal(b.gw.workers.n, 2);
			free_both(&b);
			break;
		}
		assert_int_equal(st, CM_ENOMEM);
		assert_true(cm_alloc_failed_count() > 0);
		assert_non_null(strstr(err, "out of memory"));
		assert_true(both_zero(&b));
	}
	/* there were allocations to fail, and the loop ended in success */
	assert_true(n > 10);
	assert_true(n < 1000);
}

static void test_alloc_failure_defaults_and_file(void **state)
{
	char path[] = "/tmp/sluice-test-config-XXXXXX";
	long n;
	int fd;

	(void)state;
	for (n = 0; n < 100; n++) {
		struct t_gw g;
		enum cm_status st;

		cm_alloc_fail_after(n);
		st = cm_cfg_defaults(&t_gw_sec, &g);
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			cm_cfg_free(&t_gw_sec, &g);
			break;
		}
		assert_int_equal(st, CM_ENOMEM);
		assert_true(all_zero(&g, sizeof(g)));
	}
	assert_true(n >= 3); /* name + origins array + 2 origin strings */

	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, t_full_json, strlen(t_full_json));
	for (n = 0; n < 1000; n++) {
		struct t_both b;
		void *const structs[] = { &b.gw, &b.log };
		char err[256];
		enum cm_status st;

		cm_alloc_fail_after(n);
		st = cm_cfg_load_file(path, t_secs, structs, 2, err,
				      sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			free_both(&b);
			break;
		}
		assert_int_equal(st, CM_ENOMEM);
		assert_true(both_zero(&b));
	}
	assert_true(n > 10 && n < 1000);
	unlink(path);
}

static void test_check_file(void **state)
{
	char path[] = "/tmp/sluice-test-config-XXXXXX";
	char err[512], want[600];
	long n;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, t_full_json, strlen(t_full_json));
	assert_int_equal(cm_cfg_check_file(path, t_secs, 2, err, sizeof(err)),
			 CM_OK);
	assert_string_equal(err, "");
	for (n = 0; n < 1000; n++) {
		enum cm_status st;

		cm_alloc_fail_after(n);
		st = cm_cfg_check_file(path, t_secs, 2, err, sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK)
			break;
		assert_int_equal(st, CM_ENOMEM);
		assert_non_null(strstr(err, "out of memory"));
	}
	assert_true(n > 3 && n < 1000);

	write_file(path, "{\"log\": {\"level\": \"loud\"}}", 26);
	assert_int_equal(cm_cfg_check_file(path, t_secs, 2, err, sizeof(err)),
			 CM_EINVAL);
	snprintf(want, sizeof(want), "%s: log.level: expected one of \"debug\", "
		 "\"info\", \"warn\", found \"loud\"", path);
	assert_string_equal(err, want);
	/* a binary with no sections yet accepts only an empty object */
	assert_int_equal(cm_cfg_check_file(path, t_secs, 0, err, sizeof(err)),
			 CM_EINVAL);
	snprintf(want, sizeof(want), "%s: unknown section \"log\"", path);
	assert_string_equal(err, want);
	unlink(path);
}

/* ---- documentation ----------------------------------------------------- */

static void test_doc_markdown(void **state)
{
	struct cm_buf out;
	const char *md;

	(void)state;
	cm_buf_init(&out, 64 * 1024);
	assert_int_equal(cm_cfg_doc_markdown(&t_gw_sec, &out), CM_OK);
	md = (const char *)cm_buf_data(&out);
	assert_non_null(strstr(md, "### Section `gateway`\n\nThe gateway.\n\n"
				   "| Key | Type | Default | Bounds | "
				   "Description |\n"));
	assert_non_null(strstr(md, "| `tls` | bool | `true` |  | Serve TLS. |\n"));
	assert_non_null(strstr(md, "| `port` | integer | `8443` | 1 to 65535 | "
				   "TCP port. |\n"));
	assert_non_null(strstr(md, "| `ratio` | number | `0.5` | 0.0 to 2.0 |"));
	assert_non_null(strstr(md, "| `name` | string | `\"sluice\"` | at most "
				   "8 bytes |"));
	assert_non_null(strstr(md, "| `policy` | enum | `\"drr\"` | `\"fifo\"`, "
				   "`\"drr\"`, `\"lottery\"` |"));
	assert_non_null(strstr(md, "| `cache_bytes` | size | `512MiB` | 0 to "
				   "1TiB |"));
	assert_non_null(strstr(md, "| `idle_ms` | duration | `1m` | 10ms to 1h |"));
	assert_non_null(strstr(md, "| `origins` | list of strings | "
				   "`[\"a.example\", \"b.example\"]` | at most "
				   "3, each at most 12 bytes |"));
	assert_non_null(strstr(md, "| `workers` | list of objects | `[]` | at "
				   "most 3 | Workers. |\n"
				   "| `workers[].socket` | string | required |"));
	assert_non_null(strstr(md, "| `workers[].tags` | list of strings | `[]` |"));
	assert_non_null(strstr(md, "| `limits.body_bytes` | size | `4MiB` | "
				   "1KiB to 1GiB |"));
	/* '|' in a doc string is escaped so the table holds */
	assert_non_null(strstr(md, "| Header \\| read timeout. |"));
	assert_non_null(strstr(md, "| `pepper` | string | unset | at most 64 "
				   "bytes | HMAC pepper. |"));
	cm_buf_deinit(&out);

	/* a cap too small is reported, not overrun */
	cm_buf_init(&out, 100);
	assert_int_equal(cm_cfg_doc_markdown(&t_gw_sec, &out), CM_ELIMIT);
	cm_buf_deinit(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_empty_file_gives_defaults),
		cmocka_unit_test(test_every_type),
		cmocka_unit_test(test_empty_lists_replace_defaults),
		cmocka_unit_test(test_parse_size_and_duration),
		cmocka_unit_test(test_error_messages),
		cmocka_unit_test(test_long_values_are_truncated),
		cmocka_unit_test(test_load_file),
		cmocka_unit_test(test_alloc_failure_load),
		cmocka_unit_test(test_alloc_failure_defaults_and_file),
		cmocka_unit_test(test_check_file),
		cmocka_unit_test(test_doc_markdown),
	};

	return cmocka_run_group_tests_name("common/config", tests, NULL, NULL);
}
