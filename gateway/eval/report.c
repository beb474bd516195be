/*
 * report.c - what an eval run says (eval.h): each case against the
 * baseline's case of the same id (same tokens, where they first part and
 * the text around that point on both sides, the change in mean
 * log-probability), then the run's summary held to its gates.  Pure
 * functions over the runner's JSON.
 */
#include "gateway/eval/eval.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

const json_t *gw_eval_baseline_case(const json_t *baseline, const char *id)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(baseline, "cases"), i, c) {
		const char *cid = json_string_value(json_object_get(c, "id"));

		if (cid && strcmp(cid, id) == 0)
			return c;
	}
	return NULL;
}

/* Byte offset of token k in a case (its text's length past the end). */
static size_t offset_of(const json_t *c, size_t k)
{
	const json_t *o = json_array_get(json_object_get(c, "offsets"), k);
	size_t n = json_string_length(json_object_get(c, "text"));

	if (!json_is_integer(o) || json_integer_value(o) < 0 || (size_t)json_integer_value(o) > n)
		return n;
	return (size_t)json_integer_value(o);
}

/* The text of case c within GW_EVAL_AROUND_BYTES of byte `at`, cut at
 * UTF-8 character boundaries, with "|" where the tokens part. */
static json_t *around(const json_t *c, size_t at)
{
	const char *t = json_string_value(json_object_get(c, "text"));
	size_t n = json_string_length(json_object_get(c, "text"));
	size_t lo = at > GW_EVAL_AROUND_BYTES ? at - GW_EVAL_AROUND_BYTES : 0;
	size_t hi = at + GW_EVAL_AROUND_BYTES < n ? at + GW_EVAL_AROUND_BYTES : n;
	char buf[4 * GW_EVAL_AROUND_BYTES + 8];
	size_t k = 0;

	if (!t)
		return json_string("");
	while (at > 0 && at < n && ((unsigned char)t[at] & 0xC0) == 0x80) /* a crafted offset */
		at--;
	lo = at > GW_EVAL_AROUND_BYTES ? at - GW_EVAL_AROUND_BYTES : 0;
	hi = at + GW_EVAL_AROUND_BYTES < n ? at + GW_EVAL_AROUND_BYTES : n;
	while (lo < at && ((unsigned char)t[lo] & 0xC0) == 0x80)
		lo++;
	while (hi > at && hi < n && ((unsigned char)t[hi] & 0xC0) == 0x80)
		hi--;
	memcpy(buf, t + lo, at - lo);
	k = at - lo;
	buf[k++] = '|';
	memcpy(buf + k, t + at, hi - at);
	k += hi - at;
	return json_stringn(buf, k);
}

void gw_eval_compare(json_t *result, const json_t *base_case)
{
	const json_t *ta = json_object_get(result, "tokens");
	const json_t *tb = base_case ? json_object_get(base_case, "tokens") : NULL;
	size_t na = json_array_size(ta), nb = json_array_size(tb), k = 0;
	json_t *div;

	if (!base_case || !json_is_array(tb) || json_object_get(result, "error")) {
		json_object_set_new(result, "exact", json_false());
		json_object_set_new(result, "divergence", json_null());
		json_object_set_new(result, "logprob_delta", json_null());
		return;
	}
	while (k < na && k < nb &&
	       json_integer_value(json_array_get(ta, k)) == json_integer_value(json_array_get(tb, k)))
		k++;
	json_object_set_new(result, "exact", json_boolean(k == na && k == nb));
	if (k == na && k == nb) {
		div = json_null();
	} else {
		div = json_pack("{s:I,s:o,s:o}", "token", (json_int_t)k, "baseline",
				around(base_case, offset_of(base_case, k)), "this",
				around(result, offset_of(result, k)));
	}
	json_object_set_new(result, "divergence", div ? div : json_null());
	json_object_set_new(result, "logprob_delta",
			    json_real(json_number_value(json_object_get(result, "mean_logprob")) -
				      json_number_value(json_object_get(base_case, "mean_logprob"))));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-quantile (nearest rank) of v[0..n), sorted in place; 0 when n is 0. */
static double quantile(double *v, size_t n, double p)
{
	size_t r;

	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	r = (size_t)ceil(p * (double)n);
	return v[r ? r - 1 : 0];
}

struct tally {
	uint32_t n, errors, exact, checks, checks_failed;
	double drop_sum;
	uint32_t drops;
};

static void tally_case(struct tally *t, const json_t *c, double *lat, double *ttft)
{
	size_t i;
	json_t *ck;

	lat[t->n] = json_number_value(json_object_get(c, "latency_ms"));
	ttft[t->n] = json_number_value(json_object_get(c, "ttft_ms"));
	t->n++;
	t->errors += json_object_get(c, "error") != NULL;
	t->exact += json_is_true(json_object_get(c, "exact"));
	json_array_foreach(json_object_get(c, "checks"), i, ck) {
		t->checks++;
		t->checks_failed += !json_is_true(json_object_get(ck, "passed"));
	}
	if (json_is_number(json_object_get(c, "logprob_delta"))) {
		t->drop_sum -= json_number_value(json_object_get(c, "logprob_delta"));
		t->drops++;
	}
}

/* Fills v->passed and v->reason from the tallies and the gates. */
static void judge(const struct tally *t, struct gw_eval_verdict *v)
{
	const struct gw_eval_gates *g = &v->gates;

	v->passed = 0;
	if (t->n == 0)
		snprintf(v->reason, sizeof(v->reason), "the set has no cases");
	else if (t->errors)
		snprintf(v->reason, sizeof(v->reason), "%u of %u case(s) failed at the worker",
			 t->errors, t->n);
	else if (!v->have_baseline && g->min_exact_match > 0)
		snprintf(v->reason, sizeof(v->reason), "no baseline to match (the gate asks for "
			 "an exact match of %.2f)", g->min_exact_match);
	else if (v->have_baseline && v->exact_match < g->min_exact_match)
		snprintf(v->reason, sizeof(v->reason), "exact match %.3f below the gate's %.3f",
			 v->exact_match, g->min_exact_match);
	else if (v->check_pass >= 0 && v->check_pass < g->min_check_pass)
		snprintf(v->reason, sizeof(v->reason), "checks passed %.3f below the gate's %.3f",
			 v->check_pass, g->min_check_pass);
	else if (v->have_baseline && v->logprob_drop > g->max_logprob_drop)
		snprintf(v->reason, sizeof(v->reason), "mean log-probability dropped %.4f nats, "
			 "more than the gate's %.4f", v->logprob_drop, g->max_logprob_drop);
	else {
		v->passed = 1;
		v->reason[0] = '\0';
	}
}

json_t *gw_eval_summarise(const json_t *results, int have_baseline,
			  const struct gw_eval_gates *g, struct gw_eval_verdict *v)
{
	size_t n = json_array_size(results), i;
	double *lat = cm_calloc(n ? n : 1, sizeof(double));
	double *ttft = cm_calloc(n ? n : 1, sizeof(double));
	struct tally t;
	json_t *c, *out = NULL;

	memset(&t, 0, sizeof(t));
	memset(v, 0, sizeof(*v));
	if (!lat || !ttft)
		goto out;
	json_array_foreach(results, i, c)
		tally_case(&t, c, lat, ttft);
	v->cases = t.n;
	v->have_baseline = have_baseline;
	v->gates = *g;
	v->exact_match = have_baseline && t.n ? (double)t.exact / t.n : -1;
	v->check_pass = t.checks ? (double)(t.checks - t.checks_failed) / t.checks : -1;
	v->logprob_drop = t.drops ? t.drop_sum / t.drops : 0;
	judge(&t, v);
	out = json_pack("{s:i,s:i,s:o,s:o,s:f,s:i,s:i,s:{s:f,s:f,s:f},s:{s:f,s:f,s:f},s:b,s:s}",
			"cases", (int)t.n, "errors", (int)t.errors,
			"exact_match", v->exact_match < 0 ? json_null() : json_real(v->exact_match),
			"check_pass", v->check_pass < 0 ? json_null() : json_real(v->check_pass),
			"logprob_drop", v->logprob_drop, "checks", (int)t.checks,
			"checks_failed", (int)t.checks_failed,
			"latency_ms", "p50", quantile(lat, t.n, 0.5), "p95", quantile(lat, t.n, 0.95),
			"ttft_p50", quantile(ttft, t.n, 0.5),
			"gates", "min_exact_match", g->min_exact_match, "min_check_pass",
			g->min_check_pass, "max_logprob_drop", g->max_logprob_drop,
			"passed", v->passed, "reason", v->reason);
out:
	cm_free(lat);
	cm_free(ttft);
	return out;
}

const char *gw_eval_gates_parse(const json_t *o, struct gw_eval_gates *g, char *err,
				size_t err_len)
{
	const char *k;
	json_t *v;

	if (!o)
		return NULL;
	if (!json_is_object(o))
		return "gates: expected an object";
	json_object_foreach((json_t *)o, k, v) {
		double x = json_number_value(v);

		if (!json_is_number(v) || !isfinite(x) || x < 0) {
			snprintf(err, err_len, "gates.%s: expected a number >= 0", k);
			return err;
		}
		if (!strcmp(k, "min_exact_match") || !strcmp(k, "min_check_pass")) {
			if (x > 1) {
				snprintf(err, err_len, "gates.%s: expected a share from 0 to 1, found %g",
					 k, x);
				return err;
			}
			*(strcmp(k, "min_exact_match") == 0 ? &g->min_exact_match : &g->min_check_pass) = x;
		} else if (!strcmp(k, "max_logprob_drop")) {
			g->max_logprob_drop = x;
		} else {
			snprintf(err, err_len, "gates.%s: expected one of min_exact_match, "
				 "min_check_pass, max_logprob_drop", k);
			return err;
		}
	}
	return NULL;
}
