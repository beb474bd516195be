/*
 * fuzz_eval.c - libFuzzer target for gateway/eval/ (checks.c, report.c):
 * what an operator's eval set and baseline feed them.
 *
 * Input layout: byte 0 selects the part, the rest is its input:
 *   0  JSON [schema, document]: the JSON Schema validator (and the
 *      json_schema check's validation of the schema);
 *   1  a pattern: its POSIX translation, matched against itself;
 *   2  JSON [result, baseline case, gates]: the comparison (crafted
 *      offsets, tokens, texts) and the summary under those gates;
 *   3  JSON [expect, text, mean logprob]: the checks.
 * Invariants: the validator answers -1, 0 or 1 with a terminated message;
 * a compared result and a summary dump as JSON that loads back; the checks
 * count at most as many failures as entries.
 */
#include <regex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/eval/eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void roundtrip(const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	json_t *back;

	if (!s)
		abort();
	back = json_loads(s, 0, NULL);
	if (!back)
		abort();
	json_decref(back);
	free(s);
}

static void fz_schema(const json_t *in)
{
	char err[256], why[256];
	json_t *expect;
	int rc;

	if (!json_is_array(in) || json_array_size(in) != 2)
		return;
	rc = gw_eval_schema_valid(json_array_get(in, 0), json_array_get(in, 1), err, sizeof(err));
	if (rc < -1 || rc > 1 || memchr(err, 0, sizeof(err)) == NULL)
		abort();
	expect = json_pack("{s:O}", "json_schema", json_array_get(in, 0));
	if (expect)
		(void)gw_eval_expect_validate(expect, why, sizeof(why));
	json_decref(expect);
}

static void fz_pattern(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);
	regex_t re;

	if (!s)
		return;
	memcpy(s, p, n);
	s[n] = '\0';
	if (gw_eval_regcomp(&re, s) == 0) {
		(void)regexec(&re, s, 0, NULL, 0);
		regfree(&re);
	}
	free(s);
}

static void fz_compare(const json_t *in)
{
	struct gw_eval_gates g = { 1.0, 1.0, 0.05 };
	struct gw_eval_verdict v;
	json_t *res, *rs, *sum;
	char err[200];

	if (!json_is_array(in) || !json_is_object(json_array_get(in, 0)))
		return;
	if (gw_eval_gates_parse(json_array_get(in, 2), &g, err, sizeof(err)))
		g = (struct gw_eval_gates){ 1.0, 1.0, 0.05 };
	res = json_deep_copy(json_array_get(in, 0));
	if (!res)
		return;
	gw_eval_compare(res, json_is_object(json_array_get(in, 1)) ? json_array_get(in, 1) : NULL);
	roundtrip(res);
	rs = json_array();
	json_array_append_new(rs, res);
	sum = gw_eval_summarise(rs, 1, &g, &v);
	if (sum)
		roundtrip(sum);
	json_decref(sum);
	json_decref(rs);
}

static void fz_checks(const json_t *in)
{
	const json_t *e = json_array_get(in, 0), *t = json_array_get(in, 1);
	char err[300];
	uint32_t failed = 0;
	json_t *r;

	if (!json_is_string(t) || gw_eval_expect_validate(e, err, sizeof(err)))
		return;
	r = gw_eval_checks_run(e, json_string_value(t), json_string_length(t),
			       json_number_value(json_array_get(in, 2)), &failed);
	if (r && failed > json_array_size(r))
		abort();
	if (r)
		roundtrip(r);
	json_decref(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *in;

	if (size < 1 || size > 65536)
		return 0;
	if (data[0] % 4 == 1) {
		fz_pattern(data + 1, size - 1);
		return 0;
	}
	/* depth bounded by the size (jansson recurses) */
	in = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
	if (!in)
		return 0;
	if (data[0] % 4 == 0)
		fz_schema(in);
	else if (data[0] % 4 == 2)
		fz_compare(in);
	else
		fz_checks(in);
	json_decref(in);
	return 0;
}
