/*
 * test_stop.c - worker/engine/stop.c: stop strings across token boundaries,
 * hold-back and release, overlapping prefixes, UTF-8 boundaries, limits,
 * and a randomised check that the result never depends on how the text is
 * split into tokens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/engine/stop.h"

static struct wk_stop *mk(const char *const *strs, size_t n)
{
	size_t lens[16] = { 0 };
	struct wk_stop *s = NULL;
	char err[200];

	for (size_t i = 0; i < n; i++)
		lens[i] = strlen(strs[i]);
	assert_int_equal(wk_stop_new(strs, lens, n, &s, err, sizeof(err)), CM_OK);
	return s;
}

/* Feeds pieces (NULL-terminated), collecting the emitted text; returns
 * whether a stop matched and writes each feed's emitted length to emits. */
static bool run(struct wk_stop *s, const char *const *pieces, char *out,
		size_t *emits)
{
	struct wk_stop_out o;
	size_t len = 0;
	bool matched = false;

	for (size_t i = 0; pieces[i]; i++) {
		assert_int_equal(wk_stop_feed(s, pieces[i], strlen(pieces[i]), &o),
				 CM_OK);
		memcpy(out + len, o.text, o.len);
		len += o.len;
		if (emits)
			emits[i] = o.len;
		matched = o.matched;
	}
	if (!matched) {
		wk_stop_flush(s, &o);
		memcpy(out + len, o.text, o.len);
		len += o.len;
	}
	out[len] = '\0';
	return matched;
}

static void test_split_across_three_tokens(void **state)
{
	const char *stops[] = { "</answer>" };
	const char *pieces[] = { "The result is 4.</", "ans", "wer>and more",
				 NULL };
	struct wk_stop *s = mk(stops, 1);
	char out[128];
	size_t emits[3];

	(void)state;
	assert_true(run(s, pieces, out, emits));
	assert_string_equal(out, "The result is 4.");
	assert_int_equal(emits[0], strlen("The result is 4.")); /* "</" held */
	assert_int_equal(emits[1], 0);
	assert_int_equal(emits[2], 0);
	/* after a match nothing more comes out */
	{
		struct wk_stop_out o;

		assert_int_equal(wk_stop_feed(s, "x", 1, &o), CM_OK);
		assert_int_equal(o.len, 0);
		assert_true(o.matched);
		wk_stop_flush(s, &o);
		assert_int_equal(o.len, 0);
	}
	wk_stop_free(s);
}

static void test_stop_at_start(void **state)
{
	const char *stops[] = { "User:" };
	const char *pieces[] = { "User", ": hi", NULL };
	const char *whole[] = { "User:", NULL };
	struct wk_stop *s = mk(stops, 1);
	char out[64];

	(void)state;
	assert_true(run(s, pieces, out, NULL));
	assert_string_equal(out, "");
	wk_stop_free(s);
	s = mk(stops, 1);
	assert_true(run(s, whole, out, NULL));
	assert_string_equal(out, "");
	wk_stop_free(s);
}

static void test_overlapping(void **state)
{
	const char *one[] = { "abab" };
	const char *two[] = { "abab", "aba c" };
	const char *p1[] = { "xaba", "abab", "y", NULL };
	const char *p2[] = { "xab", "a c", NULL };
	const char *p3[] = { "ab", "a", "b", "!", NULL };
	struct wk_stop *s;
	char out[64];
	size_t emits[4];

	(void)state;
	/* "xaba" + "abab": the partial "aba" fails on the next "a", falls
	 * back to "a" and matches "xaba|abab" -> the stop starts at offset 4 */
	s = mk(one, 1);
	assert_true(run(s, p1, out, emits));
	assert_string_equal(out, "xaba");
	assert_int_equal(emits[0], 1); /* "aba" could start "abab" */
	wk_stop_free(s);

	/* two stops sharing the prefix "aba": the second completes */
	s = mk(two, 2);
	assert_true(run(s, p2, out, NULL));
	assert_string_equal(out, "x");
	wk_stop_free(s);

	/* "abab" completes at the 4th byte of the stream */
	s = mk(two, 2);
	assert_true(run(s, p3, out, emits));
	assert_string_equal(out, "");
	assert_int_equal(emits[0] + emits[1] + emits[2], 0);
	wk_stop_free(s);
}

static void test_longest_at_same_end(void **state)
{
	/* "bc" and "abc" both end at the same byte: the longer one is cut */
	const char *stops[] = { "bc", "abc" };
	const char *pieces[] = { "xa", "bc", NULL };
	/* "bc" ends before "abcd" could: the first completion wins */
	const char *stops2[] = { "abcd", "bc" };
	const char *pieces2[] = { "a", "bcd", NULL };
	struct wk_stop *s;
	char out[32];

	(void)state;
	s = mk(stops, 2);
	assert_true(run(s, pieces, out, NULL));
	assert_string_equal(out, "x");
	wk_stop_free(s);
	s = mk(stops2, 2);
	assert_true(run(s, pieces2, out, NULL));
	assert_string_equal(out, "a");
	wk_stop_free(s);
}

static void test_prefix_then_diverges(void **state)
{
	const char *stops[] = { "</s>" };
	const char *pieces[] = { "a<", "/", "x b", "<", NULL };
	struct wk_stop *s = mk(stops, 1);
	char out[64];
	size_t emits[4];

	(void)state;
	assert_false(run(s, pieces, out, emits));
	assert_int_equal(emits[0], 1); /* "<" held */
	assert_int_equal(emits[1], 0); /* "</" held */
	assert_int_equal(emits[2], 5); /* "</x b" released */
	assert_int_equal(emits[3], 0); /* "<" held until the flush */
	assert_string_equal(out, "a</x b<");
	wk_stop_free(s);
}

static void test_utf8(void **state)
{
	/* stop "é!" (C3 A9 21) against "café" then "?": the held "é" is a
	 * whole character, never half of one */
	const char *stops[] = { "\xc3\xa9!" };
	const char *p1[] = { "caf\xc3\xa9", "?", NULL };
	/* a token ending inside a character: held until it completes */
	const char *p2[] = { "\xe2\x82", "\xac ok", NULL };
	/* a stop ending inside a character ("x" + the first two bytes of
	 * the euro sign): the partial match is held whole, then cut */
	const char *stops3[] = { "x\xe2\x82" };
	const char *p3[] = { "ax\xe2", "\x82\xac", NULL };
	struct wk_stop *s;
	char out[64];
	size_t emits[2];

	(void)state;
	s = mk(stops, 1);
	assert_false(run(s, p1, out, emits));
	assert_int_equal(emits[0], 3); /* "caf", "é" held */
	assert_int_equal(emits[1], 3); /* "é?" */
	assert_string_equal(out, "caf\xc3\xa9?");
	wk_stop_free(s);

	s = mk(NULL, 0);
	assert_false(run(s, p2, out, emits));
	assert_int_equal(emits[0], 0);
	assert_int_equal(emits[1], 6);
	assert_string_equal(out, "\xe2\x82\xac ok");
	wk_stop_free(s);

	/* partial match "x\xe2" held as one unit; then the stop matches */
	s = mk(stops3, 1);
	assert_true(run(s, p3, out, emits));
	assert_int_equal(emits[0], 1);
	assert_string_equal(out, "a");
	wk_stop_free(s);
}

static void test_no_stops_pass_through(void **state)
{
	const char *pieces[] = { "Hello", ", ", "world", "", "!", NULL };
	struct wk_stop *s = mk(NULL, 0);
	char out[64];
	size_t emits[5];

	(void)state;
	assert_false(run(s, pieces, out, emits));
	assert_int_equal(emits[0], 5);
	assert_int_equal(emits[1], 2);
	assert_int_equal(emits[2], 5);
	assert_int_equal(emits[3], 0);
	assert_int_equal(emits[4], 1);
	assert_string_equal(out, "Hello, world!");
	assert_int_equal(wk_stop_held(s), 0);
	wk_stop_free(s);
	wk_stop_free(NULL);
}

/* The outcome never depends on the token split. */
static void test_split_invariance(void **state)
{
	const char *stops[] = { "aab", "abaa", "ba\xc3\xa9", "zz" };
	uint64_t x = 5;

	(void)state;
	for (int iter = 0; iter < 3000; iter++) {
		char text[64], whole[80], split[80];
		const char *one[2] = { text, NULL };
		char *pieces[64];
		const char *pp[65];
		size_t n = 0, len = 0, np = 0;
		struct wk_stop *s;
		bool m1, m2;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		n = 1 + (x >> 40) % 20;
		for (size_t i = 0; i < n; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			switch ((x >> 33) % 4) {
			case 0: text[len++] = 'a'; break;
			case 1: text[len++] = 'b'; break;
			case 2: text[len++] = '\xc3'; text[len++] = '\xa9'; break;
			default: text[len++] = 'z'; break;
			}
		}
		text[len] = '\0';
		s = mk(stops, 4);
		m1 = run(s, one, whole, NULL);
		wk_stop_free(s);
		/* random byte split (may cut characters) */
		for (size_t i = 0; i < len;) {
			size_t k;

			x = x * 6364136223846793005ull + 1442695040888963407ull;
			k = 1 + (x >> 33) % 4;
			if (k > len - i)
				k = len - i;
			pieces[np] = strndup(text + i, k);
			pp[np] = pieces[np];
			np++;
			i += k;
		}
		pp[np] = NULL;
		s = mk(stops, 4);
		m2 = run(s, pp, split, NULL);
		wk_stop_free(s);
		for (size_t i = 0; i < np; i++)
			free(pieces[i]);
		assert_int_equal(m1, m2);
		assert_string_equal(whole, split);
	}
}

static void test_limits_and_errors(void **state)
{
	const char *stops[WK_STOP_MAX_STRINGS + 1];
	size_t lens[WK_STOP_MAX_STRINGS + 1];
	static char big[WK_STOP_MAX_BYTES + 2];
	static uint8_t feed[WK_STOP_FEED_MAX_BYTES + 1];
	struct wk_stop *s = (struct wk_stop *)1;
	struct wk_stop_out o;
	char err[200];

	(void)state;
	for (size_t i = 0; i <= WK_STOP_MAX_STRINGS; i++) {
		stops[i] = "x";
		lens[i] = 1;
	}
	assert_int_equal(wk_stop_new(stops, lens, WK_STOP_MAX_STRINGS + 1, &s,
				     err, sizeof(err)), CM_EINVAL);
	assert_null(s);
	assert_non_null(strstr(err, "at most 64"));
	lens[2] = 0;
	assert_int_equal(wk_stop_new(stops, lens, 3, &s, err, sizeof(err)),
			 CM_EINVAL);
	assert_non_null(strstr(err, "stop[2]"));
	memset(big, 'y', sizeof(big) - 1);
	stops[0] = big;
	lens[0] = WK_STOP_MAX_BYTES + 1;
	assert_int_equal(wk_stop_new(stops, lens, 1, &s, err, sizeof(err)),
			 CM_EINVAL);
	assert_non_null(strstr(err, "found 257"));

	/* the longest allowed stop, fed byte by byte, matches */
	lens[0] = WK_STOP_MAX_BYTES;
	assert_int_equal(wk_stop_new(stops, lens, 1, &s, err, sizeof(err)), CM_OK);
	for (size_t i = 0; i < WK_STOP_MAX_BYTES - 1; i++) {
		assert_int_equal(wk_stop_feed(s, "y", 1, &o), CM_OK);
		assert_int_equal(o.len, 0);
	}
	assert_int_equal(wk_stop_held(s), WK_STOP_MAX_BYTES - 1);
	assert_int_equal(wk_stop_feed(s, feed, sizeof(feed), &o), CM_ELIMIT);
	assert_int_equal(wk_stop_feed(s, "yz", 2, &o), CM_OK);
	assert_true(o.matched);
	assert_int_equal(o.len, 0);
	wk_stop_free(s);

	/* a large feed (over the initial buffer) passes through */
	s = mk(NULL, 0);
	memset(feed, 'q', sizeof(feed));
	assert_int_equal(wk_stop_feed(s, feed, WK_STOP_FEED_MAX_BYTES, &o), CM_OK);
	assert_int_equal(o.len, WK_STOP_FEED_MAX_BYTES);
	wk_stop_free(s);

	/* allocation failures at every step of creation */
	stops[0] = "abc";
	stops[1] = "de";
	lens[0] = 3;
	lens[1] = 2;
	for (long n = 0; n < 12; n++) {
		enum cm_status st;

		s = NULL;
		cm_alloc_fail_after(n);
		st = wk_stop_new(stops, lens, 2, &s, err, sizeof(err));
		cm_alloc_fail_reset();
		if (st == CM_OK) {
			assert_true(n >= 8);
			wk_stop_free(s);
			break;
		}
		assert_int_equal(st, CM_ENOMEM);
		assert_null(s);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_across_three_tokens),
		cmocka_unit_test(test_stop_at_start),
		cmocka_unit_test(test_overlapping),
		cmocka_unit_test(test_longest_at_same_end),
		cmocka_unit_test(test_prefix_then_diverges),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_no_stops_pass_through),
		cmocka_unit_test(test_split_invariance),
		cmocka_unit_test(test_limits_and_errors),
	};

	return cmocka_run_group_tests_name("worker/stop", tests, NULL, NULL);
}
