/*
 * test_eval.c - gateway/eval/checks.c and report.c: the JSON Schema
 * validator (hand cases, then every schema and instance of
 * ../shared/testdata/maskbench it decides, against the instances' own
 * verdicts), the "expect" checks, the comparison with a baseline (exact
 * tokens, first divergence and the text around it, log-probability
 * change), the summary and the gates.
 */
#include <dirent.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "gateway/eval/eval.h"

static json_t *J(const char *s)
{
	json_error_t e;
	json_t *j = json_loads(s, JSON_DECODE_ANY, &e);

	if (!j)
		fail_msg("bad JSON in the test: %s: %s", s, e.text);
	return j;
}

/* 1 valid, 0 not, -1 refused. */
static int valid(const char *schema, const char *doc)
{
	json_t *s = J(schema), *d = J(doc);
	char err[200];
	int rc = gw_eval_schema_valid(s, d, err, sizeof(err));

	json_decref(s);
	json_decref(d);
	return rc;
}

static void test_schema_hand(void **state)
{
	const char *obj = "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", "
			  "\"minimum\": 1, \"maximum\": 9}, \"b\": {\"type\": \"string\", \"pattern\": "
			  "\"^\\\\d{3}-[a-z]+$\"}}, \"required\": [\"a\"], \"additionalProperties\": false}";

	(void)state;
	assert_int_equal(valid(obj, "{\"a\": 3, \"b\": \"123-ab\"}"), 1);
	assert_int_equal(valid(obj, "{\"a\": 3.0}"), 0); /* 3.0 is a number, not an integer */
	assert_int_equal(valid(obj, "{\"b\": \"123-ab\"}"), 0);            /* required */
	assert_int_equal(valid(obj, "{\"a\": 10}"), 0);                    /* maximum */
	assert_int_equal(valid(obj, "{\"a\": 2.5}"), 0);                   /* integer */
	assert_int_equal(valid(obj, "{\"a\": 1, \"c\": 1}"), 0);           /* additional */
	assert_int_equal(valid(obj, "{\"a\": 1, \"b\": \"12-ab\"}"), 0);   /* pattern */
	assert_int_equal(valid(obj, "[1]"), 0);                            /* type */
	assert_int_equal(valid("{\"enum\": [1, \"x\", null]}", "null"), 1);
	assert_int_equal(valid("{\"enum\": [1, \"x\", null]}", "2"), 0);
	assert_int_equal(valid("{\"const\": {\"k\": [1]}}", "{\"k\": [1]}"), 1);
	assert_int_equal(valid("{\"type\": \"array\", \"items\": {\"type\": \"number\"}, "
			       "\"minItems\": 2, \"uniqueItems\": true}", "[1, 2.5]"), 1);
	assert_int_equal(valid("{\"type\": \"array\", \"items\": {\"type\": \"number\"}, "
			       "\"minItems\": 2, \"uniqueItems\": true}", "[1, 1]"), 0);
	assert_int_equal(valid("{\"prefixItems\": [{\"type\": \"string\"}], \"items\": false}",
			       "[\"a\", 1]"), 0);
	assert_int_equal(valid("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}",
			       "1.5"), 1);
	assert_int_equal(valid("{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}",
			       "1"), 0);
	assert_int_equal(valid("{\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 5}]}", "3"), 0);
	assert_int_equal(valid("{\"not\": {\"type\": \"string\"}}", "3"), 1);
	assert_int_equal(valid("{\"maxLength\": 2}", "\"\\u00e9\\u00e9\""), 1); /* code points */
	assert_int_equal(valid("{\"maxLength\": 2}", "\"abc\""), 0);
	assert_int_equal(valid("{\"$defs\": {\"n\": {\"type\": \"integer\"}}, \"type\": \"object\","
			       " \"properties\": {\"x\": {\"$ref\": \"#/$defs/n\"}}}", "{\"x\": \"s\"}"), 0);
	assert_int_equal(valid("{\"multipleOf\": 0.5}", "1.5"), 1);
	assert_int_equal(valid("{\"multipleOf\": 0.5}", "1.2"), 0);
	assert_int_equal(valid("false", "1"), 0);
	/* keywords asserting what the validator does not know: refused, not ignored */
	assert_int_equal(valid("{\"if\": {\"type\": \"string\"}, \"then\": {\"minLength\": 2}}",
			       "\"a\""), -1);
	assert_int_equal(valid("{\"$ref\": \"http://example.com/s.json\"}", "1"), -1);
	assert_int_equal(valid("{\"pattern\": \"(?=a)b\"}", "\"b\""), -1);
	/* a $ref cycle under anyOf would visit 2^32 schemas: stopped, refused */
	assert_int_equal(valid("{\"anyOf\": [{\"$ref\": \"#\"}, {\"$ref\": \"#\"}]}", "1"), -1);
}

/* ---- maskbench: every instance the validator decides, against its verdict -- */

static void test_schema_maskbench(void **state)
{
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char dirp[1024], path[2048];
	size_t files = 0, decided = 0, refused = 0, skipped_format = 0;
	struct dirent *de;
	DIR *d;

	(void)state;
	snprintf(dirp, sizeof(dirp), "%s/../shared/testdata/maskbench", src ? src : ".");
	d = opendir(dirp);
	if (!d)
		skip();
	while ((de = readdir(d)) != NULL) {
		json_t *f, *schema, *t;
		size_t i;

		if (!strstr(de->d_name, ".json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dirp, de->d_name);
		f = json_load_file(path, 0, NULL);
		if (!f)
			continue;
		files++;
		schema = json_object_get(f, "schema");
		/* "format" is an annotation here: instances judged by it are not ours */
		{
			char *meta = json_dumps(json_object_get(f, "meta"), 0);
			int fmt = meta && strstr(meta, "format") != NULL;

			free(meta);
			if (fmt) {
				skipped_format++;
				json_decref(f);
				continue;
			}
		}
		json_array_foreach(json_object_get(f, "tests"), i, t) {
			char err[300];
			int rc = gw_eval_schema_valid(schema, json_object_get(t, "data"), err, sizeof(err));

			if (rc < 0) {
				refused++;
				continue;
			}
			decided++;
			if (rc != (json_is_true(json_object_get(t, "valid")) ? 1 : 0))
				fail_msg("%s: %s: the validator says %s (%s), the instance is marked %s",
					 de->d_name, json_string_value(json_object_get(t, "description")),
					 rc ? "valid" : "invalid", err,
					 json_is_true(json_object_get(t, "valid")) ? "valid" : "invalid");
		}
		json_decref(f);
	}
	closedir(d);
	printf("maskbench: %zu files, %zu instances decided, %zu refused (unsupported keyword "
	       "or pattern), %zu files with format skipped\n", files, decided, refused,
	       skipped_format);
	assert_true(files > 1000);
	assert_true(decided > 4 * refused);
}

/* ---- checks ------------------------------------------------------------- */

static void test_checks(void **state)
{
	char err[300];
	json_t *e = J("{\"equals\": \"{\\\"a\\\": 1}\", \"contains\": \"a\", \"regex\": \"^\\\\{\","
		      " \"json_schema\": {\"type\": \"object\", \"required\": [\"a\"]},"
		      " \"min_mean_logprob\": -2}");
	json_t *r, *c;
	uint32_t failed;
	size_t i;

	(void)state;
	assert_null(gw_eval_expect_validate(e, err, sizeof(err)));
	r = gw_eval_checks_run(e, "{\"a\": 1}", 8, -1.0, &failed);
	assert_int_equal(failed, 0);
	assert_int_equal(json_array_size(r), 5);
	json_decref(r);
	r = gw_eval_checks_run(e, "{\"b\": 1}", 8, -3.0, &failed);
	assert_int_equal(failed, 4); /* equals, contains, json_schema, min_mean_logprob */
	json_array_foreach(r, i, c)
		if (!strcmp(json_string_value(json_object_get(c, "check")), "regex"))
			assert_true(json_is_true(json_object_get(c, "passed")));
	json_decref(r);
	r = gw_eval_checks_run(e, "not json", 8, 0, &failed);
	assert_int_equal(failed, 4); /* all but min_mean_logprob */
	json_decref(r);
	json_decref(e);
	/* refused when the set is read: names the member */
	e = J("{\"startswith\": \"x\"}");
	assert_non_null(strstr(gw_eval_expect_validate(e, err, sizeof(err)), "expect.startswith"));
	json_decref(e);
	e = J("{\"regex\": \"(\"}");
	assert_non_null(strstr(gw_eval_expect_validate(e, err, sizeof(err)), "expect.regex"));
	json_decref(e);
	e = J("{\"min_mean_logprob\": 0.5}");
	assert_non_null(gw_eval_expect_validate(e, err, sizeof(err)));
	json_decref(e);
	e = J("{\"json_schema\": {\"if\": true}}");
	assert_non_null(strstr(gw_eval_expect_validate(e, err, sizeof(err)), "if"));
	json_decref(e);
	e = J("[1]");
	assert_non_null(gw_eval_expect_validate(e, err, sizeof(err)));
	json_decref(e);
}

static void test_regcomp_translation(void **state)
{
	regex_t re;

	(void)state;
	assert_int_equal(gw_eval_regcomp(&re, "^[\\w.-]+@\\d+\\s?$"), 0);
	assert_int_equal(regexec(&re, "a.b-c@42", 0, NULL, 0), 0);
	assert_int_equal(regexec(&re, "a b@42", 0, NULL, 0), REG_NOMATCH);
	regfree(&re);
	assert_int_equal(gw_eval_regcomp(&re, "^\\D+\\.$"), 0);
	assert_int_equal(regexec(&re, "ab.", 0, NULL, 0), 0);
	assert_int_equal(regexec(&re, "a1.", 0, NULL, 0), REG_NOMATCH);
	regfree(&re);
	assert_int_equal(gw_eval_regcomp(&re, "^[a-z\\.\\-_]+$"), 0); /* "\-" stays a dash */
	assert_int_equal(regexec(&re, "a-b_c.d", 0, NULL, 0), 0);
	assert_int_equal(regexec(&re, "a/b", 0, NULL, 0), REG_NOMATCH); /* no range .-_ */
	regfree(&re);
	assert_int_equal(gw_eval_regcomp(&re, "a+?"), -1);      /* lazy */
	assert_int_equal(gw_eval_regcomp(&re, "\\u00e9"), -1);  /* unicode escape */
}

/* ---- comparison, summary, gates ------------------------------------------ */

static json_t *result(const char *id, const char *tokens, const char *offsets, const char *text,
		      double lp)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), "{\"id\": \"%s\", \"tokens\": %s, \"offsets\": %s, \"text\": \"%s\","
		 " \"mean_logprob\": %g, \"latency_ms\": 10, \"ttft_ms\": 2, \"checks\": []}",
		 id, tokens, offsets, text, lp);
	return J(buf);
}

static void test_compare(void **state)
{
	json_t *base = result("a", "[1, 2, 3, 4]", "[0, 3, 6, 9]", "onetwothreefour", -1.0);
	json_t *same = result("a", "[1, 2, 3, 4]", "[0, 3, 6, 9]", "onetwothreefour", -1.0);
	json_t *other = result("a", "[1, 2, 7, 8]", "[0, 3, 6, 8]", "onetwoXYZ", -1.5);
	json_t *shorter = result("a", "[1, 2]", "[0, 3]", "onetwo", -0.5);
	json_t *d;

	(void)state;
	gw_eval_compare(same, base);
	assert_true(json_is_true(json_object_get(same, "exact")));
	assert_true(json_is_null(json_object_get(same, "divergence")));
	assert_true(json_real_value(json_object_get(same, "logprob_delta")) == 0.0);
	gw_eval_compare(other, base);
	assert_false(json_is_true(json_object_get(other, "exact")));
	d = json_object_get(other, "divergence");
	assert_int_equal(json_integer_value(json_object_get(d, "token")), 2);
	assert_string_equal(json_string_value(json_object_get(d, "baseline")), "onetwo|threefour");
	assert_string_equal(json_string_value(json_object_get(d, "this")), "onetwo|XYZ");
	assert_true(json_real_value(json_object_get(other, "logprob_delta")) == -0.5);
	/* a prefix of the baseline diverges where it ends */
	gw_eval_compare(shorter, base);
	d = json_object_get(shorter, "divergence");
	assert_int_equal(json_integer_value(json_object_get(d, "token")), 2);
	assert_string_equal(json_string_value(json_object_get(d, "this")), "onetwo|");
	/* no baseline case: not exact, no divergence */
	json_decref(same);
	same = result("a", "[1]", "[0]", "x", 0);
	gw_eval_compare(same, NULL);
	assert_false(json_is_true(json_object_get(same, "exact")));
	json_decref(base);
	json_decref(same);
	json_decref(other);
	json_decref(shorter);
}

static void test_around_utf8(void **state)
{
	/* 30 three-byte characters then the divergence: 40 bytes back lands
	 * inside one, and the cut moves to the next character */
	char text[512], buf[1024];
	json_t *a, *b, *d;
	const char *s;
	size_t k = 0;

	(void)state;
	for (int i = 0; i < 30; i++)
		k += (size_t)snprintf(text + k, sizeof(text) - k, "\\u20ac");
	snprintf(buf, sizeof(buf), "{\"id\": \"u\", \"tokens\": [1, 2], \"offsets\": [0, 90], \"text\": "
		 "\"%sx\", \"mean_logprob\": 0}", text);
	a = J(buf);
	snprintf(buf, sizeof(buf), "{\"id\": \"u\", \"tokens\": [1, 3], \"offsets\": [0, 90], \"text\": "
		 "\"%sy\", \"mean_logprob\": 0}", text);
	b = J(buf);
	gw_eval_compare(a, b);
	d = json_object_get(a, "divergence");
	s = json_string_value(json_object_get(d, "this"));
	assert_non_null(s); /* valid UTF-8, or jansson would have refused it */
	assert_int_equal(strlen(s), 39 + 1 + 1); /* 13 characters, '|', 'x' */
	json_decref(a);
	json_decref(b);
}

static void test_summary_gates(void **state)
{
	struct gw_eval_gates g = { 1.0, 1.0, 0.05 };
	struct gw_eval_verdict v;
	json_t *rs = json_array(), *s, *c;
	char err[200];

	(void)state;
	c = result("a", "[1]", "[0]", "x", -1.0);
	json_object_set_new(c, "exact", json_true());
	json_object_set_new(c, "logprob_delta", json_real(0));
	json_array_append_new(rs, c);
	c = result("b", "[1]", "[0]", "x", -1.0);
	json_object_set_new(c, "exact", json_true());
	json_object_set_new(c, "logprob_delta", json_real(0));
	json_array_append_new(rs, c);
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_true(v.passed);
	assert_true(json_is_true(json_object_get(s, "passed")));
	assert_true(v.exact_match == 1.0);
	json_decref(s);
	/* one diverged case fails the strict gate, passes a loose one */
	json_object_set_new(json_array_get(rs, 1), "exact", json_false());
	json_object_set_new(json_array_get(rs, 1), "logprob_delta", json_real(-0.2));
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_false(v.passed);
	assert_non_null(strstr(v.reason, "exact match 0.500 below"));
	json_decref(s);
	g.min_exact_match = 0.5;
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_false(v.passed); /* the mean drop, 0.1 nats, is over 0.05 */
	assert_non_null(strstr(v.reason, "log-probability dropped"));
	json_decref(s);
	g.max_logprob_drop = 0.2;
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_true(v.passed);
	json_decref(s);
	/* a failed check, then a worker error */
	json_array_append_new(json_object_get(json_array_get(rs, 0), "checks"),
			      J("{\"check\": \"contains\", \"passed\": false}"));
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_false(v.passed);
	assert_non_null(strstr(v.reason, "checks passed 0.000"));
	json_decref(s);
	json_object_set_new(json_array_get(rs, 0), "error", json_string("worker error 4"));
	s = gw_eval_summarise(rs, 1, &g, &v);
	assert_non_null(strstr(v.reason, "failed at the worker"));
	json_decref(s);
	/* without a baseline the strict gate cannot pass */
	g.min_exact_match = 1.0;
	json_object_del(json_array_get(rs, 0), "error");
	json_array_clear(json_object_get(json_array_get(rs, 0), "checks"));
	s = gw_eval_summarise(rs, 0, &g, &v);
	assert_false(v.passed);
	assert_non_null(strstr(v.reason, "no baseline"));
	json_decref(s);
	json_decref(rs);
	/* gate overrides */
	c = J("{\"min_exact_match\": 0.9, \"max_logprob_drop\": 1}");
	assert_null(gw_eval_gates_parse(c, &g, err, sizeof(err)));
	assert_true(g.min_exact_match == 0.9 && g.max_logprob_drop == 1.0);
	json_decref(c);
	c = J("{\"min_exact_match\": 1.5}");
	assert_non_null(gw_eval_gates_parse(c, &g, err, sizeof(err)));
	json_decref(c);
	c = J("{\"exact\": 1}");
	assert_non_null(strstr(gw_eval_gates_parse(c, &g, err, sizeof(err)), "gates.exact"));
	json_decref(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_schema_hand),
		cmocka_unit_test(test_schema_maskbench),
		cmocka_unit_test(test_checks),
		cmocka_unit_test(test_regcomp_translation),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_around_utf8),
		cmocka_unit_test(test_summary_gates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
