/*
 * test_decoder.c - proto/decoder.c and the decoder's validation: streams
 * fed byte by byte, in random pieces (fixed seed) and all at once; one test
 * per malformed-input case asserting its specific proto_error; a failed
 * decoder staying failed; the feed cap; allocation failure.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "common/limits.h"
#include "proto/proto.h"
#include "tests/proto/msg_eq.h"
#include "tests/proto/samples.h"

#define MAXF 131072u /* decoder max_frame in these tests */

/* ==== helpers ========================================================= */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x;
}

/* `rounds` copies of every sample, encoded back to back into *s. */
static void sample_stream(struct cm_buf *s, int rounds)
{
	struct proto_msg m;

	cm_buf_init(s, 1 << 24);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < tp_n_types; i++) {
			tp_sample(tp_types[i], &m);
			assert_int_equal(proto_encode(s, &m, MAXF), CM_OK);
		}
	}
}

/* Drains d, comparing each message with the next expected sample. */
static void drain_expect(struct proto_decoder *d, int *seen)
{
	struct proto_msg got, want;
	enum cm_status st;
	const char *diff;

	while ((st = proto_decoder_next(d, &got)) == CM_OK) {
		tp_sample(tp_types[*seen % tp_n_types], &want);
		diff = tp_msg_diff(&want, &got);
		if (diff)
			fail_msg("frame %d (%s): field %s differs", *seen,
				 proto_type_str((enum proto_type)want.type), diff);
		(*seen)++;
	}
	assert_int_equal(st, CM_AGAIN);
	assert_int_equal(proto_decoder_error(d), PROTO_ERR_NONE);
}

/* Writes a 24-byte header. */
static void put_header(struct cm_buf *b, uint32_t magic, uint16_t version,
		       uint16_t type, uint32_t flags, uint32_t payload_len,
		       uint64_t request_id)
{
	assert_int_equal(cm_buf_put_u32(b, magic), CM_OK);
	assert_int_equal(cm_buf_put_u16(b, version), CM_OK);
	assert_int_equal(cm_buf_put_u16(b, type), CM_OK);
	assert_int_equal(cm_buf_put_u32(b, flags), CM_OK);
	assert_int_equal(cm_buf_put_u32(b, payload_len), CM_OK);
	assert_int_equal(cm_buf_put_u64(b, request_id), CM_OK);
}

/* A frame with a correct header (length included) around payload p. */
static void raw_frame(struct cm_buf *out, uint16_t type, uint32_t flags,
		      uint64_t id, const struct cm_buf *p)
{
	cm_buf_init(out, 1 << 20);
	put_header(out, PROTO_MAGIC, PROTO_VERSION, type, flags,
		   (uint32_t)cm_buf_len(p), id);
	assert_int_equal(cm_buf_append(out, cm_buf_data(p), cm_buf_len(p)), CM_OK);
}

/*
 * Feeds `len` bytes of `bytes` (after, optionally, one valid PING frame),
 * expects the PING to come out first, then CM_EPROTO with `want`; then
 * checks that the decoder stays failed.
 */
static void expect_error(const void *bytes, size_t len, enum proto_error want)
{
	struct proto_decoder *d = proto_decoder_new(MAXF);
	struct cm_buf ping;
	struct proto_msg m;
	enum cm_status st;

	assert_non_null(d);
	cm_buf_init(&ping, 64);
	tp_sample(PROTO_PING, &m);
	assert_int_equal(proto_encode(&ping, &m, MAXF), CM_OK);
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&ping), cm_buf_len(&ping)),
			 CM_OK);
	assert_int_equal(proto_decoder_feed(d, bytes, len), CM_OK);
	/* frames before the bad one are still delivered */
	assert_int_equal(proto_decoder_next(d, &m), CM_OK);
	assert_int_equal(m.type, PROTO_PING);
	st = proto_decoder_next(d, &m);
	if (st != CM_EPROTO || proto_decoder_error(d) != want)
		fail_msg("expected CM_EPROTO \"%s\", got %s \"%s\"",
			 proto_error_str(want), cm_status_str(st),
			 proto_error_str(proto_decoder_error(d)));
	assert_int_equal(m.type, 0);
	/* failed for good */
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&ping), cm_buf_len(&ping)),
			 CM_EPROTO);
	assert_int_equal(proto_decoder_next(d, &m), CM_EPROTO);
	assert_int_equal(proto_decoder_error(d), want);
	cm_buf_deinit(&ping);
	proto_decoder_free(d);
}

static void expect_frame_error(const struct cm_buf *f, enum proto_error want)
{
	expect_error(cm_buf_data(f), cm_buf_len(f), want);
}

/*
 * A SUBMIT payload with empty strings, `n_stop` empty stop strings and no
 * messages; the listed fields are parameters so that each can be made bad.
 */
struct submit_opts {
	uint8_t klass;
	uint32_t max_tokens;
	float temperature;
	float top_p;
	uint32_t n_stop;        /* count written */
	uint32_t n_stop_bytes;  /* stop strings actually present */
	uint8_t prompt_kind;
	uint8_t constraint_kind;
	uint32_t constraint_len; /* bytes of "{}..." written */
	uint8_t top_logprobs;
	uint8_t tool_choice;     /* version 4 */
	uint32_t tool_name_len;  /* bytes of "f..." written */
	uint8_t think;
	uint8_t channel;         /* of token_frame's tokens (a global below) */
};

static const struct submit_opts submit_ok = {
	.klass = 0, .max_tokens = 16, .temperature = 0.0f, .top_p = 1.0f,
	.n_stop = 1, .n_stop_bytes = 1, .prompt_kind = 0,
};

static void submit_frame(struct cm_buf *f, const struct submit_opts *o)
{
	struct cm_buf p;
	uint32_t u;

	cm_buf_init(&p, 1 << 20);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* tenant_id "" */
	for (int i = 0; i < PROTO_DIGEST_LEN; i++)
		assert_int_equal(cm_buf_put_u8(&p, (uint8_t)i), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* key_id */
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* model */
	assert_int_equal(cm_buf_put_u8(&p, o->klass), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, o->max_tokens), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* max_prompt_tokens */
	memcpy(&u, &o->temperature, 4);
	assert_int_equal(cm_buf_put_u32(&p, u), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* top_k */
	memcpy(&u, &o->top_p, 4);
	assert_int_equal(cm_buf_put_u32(&p, u), CM_OK);
	for (int i = 0; i < 5; i++) /* min_p .. frequency_penalty: 0 */
		assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK);
	assert_int_equal(cm_buf_put_u64(&p, 0), CM_OK); /* seed */
	assert_int_equal(cm_buf_put_u32(&p, o->n_stop), CM_OK);
	for (uint32_t i = 0; i < o->n_stop_bytes; i++)
		assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK);
	assert_int_equal(cm_buf_put_u8(&p, o->prompt_kind), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 2), CM_OK); /* text "hi" */
	assert_int_equal(cm_buf_append(&p, "hi", 2), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* no messages */
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* template_name */
	assert_int_equal(cm_buf_put_u8(&p, o->constraint_kind), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, o->constraint_len), CM_OK);
	for (uint32_t i = 0; i < o->constraint_len; i++)
		assert_int_equal(cm_buf_put_u8(&p, '{'), CM_OK);
	assert_int_equal(cm_buf_put_u8(&p, o->top_logprobs), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* tools "" */
	assert_int_equal(cm_buf_put_u8(&p, o->tool_choice), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, o->tool_name_len), CM_OK);
	for (uint32_t i = 0; i < o->tool_name_len; i++)
		assert_int_equal(cm_buf_put_u8(&p, 'f'), CM_OK);
	assert_int_equal(cm_buf_put_u8(&p, 1), CM_OK); /* parallel_tool_calls */
	assert_int_equal(cm_buf_put_u8(&p, o->think), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK); /* think_budget (version 5) */
	raw_frame(f, PROTO_SUBMIT, 0, 9, &p);
	cm_buf_deinit(&p);
}

/* The channel token_frame writes (version 4). */
static uint8_t token_channel;

/* A TOKEN frame declaring `n` tokens, with `present` of them written. */
static void token_frame(struct cm_buf *f, uint32_t n, uint32_t present)
{
	struct cm_buf p;

	cm_buf_init(&p, 1 << 20);
	assert_int_equal(cm_buf_put_u32(&p, n), CM_OK);
	for (uint32_t i = 0; i < present; i++) {
		assert_int_equal(cm_buf_put_u32(&p, i), CM_OK);   /* id */
		assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK);   /* logprob 0 */
		assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK);   /* text "" */
		assert_int_equal(cm_buf_put_u32(&p, 0), CM_OK);   /* piece "" */
		assert_int_equal(cm_buf_put_u8(&p, 0), CM_OK);    /* no alternatives */
		assert_int_equal(cm_buf_put_u8(&p, token_channel), CM_OK);
	}
	raw_frame(f, PROTO_TOKEN, 0, 3, &p);
	cm_buf_deinit(&p);
}

/* An ERROR frame: code, then a str whose length field and bytes are given. */
static void error_frame(struct cm_buf *f, uint16_t code, uint32_t str_len,
			const char *bytes, size_t n)
{
	struct cm_buf p;

	cm_buf_init(&p, 1 << 20);
	assert_int_equal(cm_buf_put_u16(&p, code), CM_OK);
	assert_int_equal(cm_buf_put_u32(&p, str_len), CM_OK);
	assert_int_equal(cm_buf_append(&p, bytes, n), CM_OK);
	raw_frame(f, PROTO_ERROR, 0, 0, &p);
	cm_buf_deinit(&p);
}

/* ==== well-formed streams ============================================== */

static void test_byte_by_byte(void **state)
{
	struct proto_decoder *d = proto_decoder_new(MAXF);
	struct cm_buf s;
	int seen = 0;

	(void)state;
	sample_stream(&s, 3);
	for (size_t i = 0; i < cm_buf_len(&s); i++) {
		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s) + i, 1), CM_OK);
		drain_expect(d, &seen);
	}
	assert_int_equal(seen, 3 * tp_n_types);
	cm_buf_deinit(&s);
	proto_decoder_free(d);
}

static void test_random_splits(void **state)
{
	struct cm_buf s;

	(void)state;
	sample_stream(&s, 5);
	rng_state = 0x5EED5EED12345678ull;
	for (int iter = 0; iter < 200; iter++) {
		struct proto_decoder *d = proto_decoder_new(MAXF);
		size_t off = 0, len = cm_buf_len(&s);
		int seen = 0;

		assert_non_null(d);
		while (off < len) {
			/* mostly small pieces, sometimes large ones */
			size_t piece = rng() % 8 == 0 ? rng() % 2000 : rng() % 40;

			if (piece > len - off)
				piece = len - off;
			assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s) + off,
							    piece),
					 CM_OK);
			off += piece;
			drain_expect(d, &seen);
		}
		assert_int_equal(seen, 5 * tp_n_types);
		proto_decoder_free(d);
	}
	cm_buf_deinit(&s);
}

static void test_many_frames_in_one_feed(void **state)
{
	struct proto_decoder *d = proto_decoder_new(MAXF);
	struct cm_buf s;
	int seen = 0;

	(void)state;
	sample_stream(&s, 20);
	assert_true(cm_buf_len(&s) < 2 * (MAXF + PROTO_HEADER_LEN));
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s), cm_buf_len(&s)),
			 CM_OK);
	drain_expect(d, &seen);
	assert_int_equal(seen, 20 * tp_n_types);
	/* and once more on the same decoder */
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s), cm_buf_len(&s)),
			 CM_OK);
	drain_expect(d, &seen);
	assert_int_equal(seen, 40 * tp_n_types);
	cm_buf_deinit(&s);
	proto_decoder_free(d);
}

/* The message in hand stays valid while more bytes are fed. */
static void test_message_survives_feed(void **state)
{
	struct proto_decoder *d = proto_decoder_new(MAXF);
	struct cm_buf s;
	struct proto_msg got, want;
	size_t first;

	(void)state;
	sample_stream(&s, 1);
	/* HELLO alone first */
	first = PROTO_HEADER_LEN + cm_le32(cm_buf_data(&s) + 12);
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s), first), CM_OK);
	assert_int_equal(proto_decoder_next(d, &got), CM_OK);
	/* enough bytes to move the input buffer */
	for (int i = 0; i < 20; i++)
		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s) + first,
						    cm_buf_len(&s) - first),
				 CM_OK);
	tp_sample(PROTO_HELLO, &want);
	assert_null(tp_msg_diff(&want, &got));
	cm_buf_deinit(&s);
	proto_decoder_free(d);
}

static void test_feed_cap(void **state)
{
	struct proto_decoder *d = proto_decoder_new(100);
	static uint8_t zeros[2 * (100 + PROTO_HEADER_LEN) + 1];
	struct proto_msg m;

	(void)state;
	/* over 2 x (max_frame + header) in one piece: refused, nothing taken */
	assert_int_equal(proto_decoder_feed(d, zeros, sizeof(zeros)), CM_ELIMIT);
	assert_int_equal(proto_decoder_next(d, &m), CM_AGAIN);
	assert_int_equal(proto_decoder_feed(d, zeros, sizeof(zeros) - 1), CM_OK);
	proto_decoder_free(d);
	proto_decoder_free(NULL);
}

static void test_alloc_failure(void **state)
{
	struct proto_decoder *d;
	struct cm_buf s;
	struct proto_msg m, want;
	enum cm_status st = CM_ENOMEM;

	(void)state;
	cm_alloc_fail_after(0);
	assert_null(proto_decoder_new(MAXF));
	cm_alloc_fail_reset();

	d = proto_decoder_new(MAXF);
	assert_non_null(d);
	sample_stream(&s, 1);
	cm_alloc_fail_after(0);
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s), cm_buf_len(&s)),
			 CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(proto_decoder_feed(d, cm_buf_data(&s), cm_buf_len(&s)),
			 CM_OK);
	/* every allocation in next() fails in turn; each retry loses nothing */
	for (int i = 0; i < tp_n_types; i++) {
		for (long k = 0; k < 4; k++) {
			cm_alloc_fail_after(k);
			st = proto_decoder_next(d, &m);
			cm_alloc_fail_reset();
			if (st == CM_OK)
				break;
			assert_int_equal(st, CM_ENOMEM);
		}
		assert_int_equal(st, CM_OK);
		tp_sample(tp_types[i], &want);
		assert_null(tp_msg_diff(&want, &m));
	}
	assert_int_equal(proto_decoder_next(d, &m), CM_AGAIN);
	cm_buf_deinit(&s);
	proto_decoder_free(d);
}

/* ==== malformed input: one test per error ============================= */

static void test_err_magic(void **state)
{
	struct cm_buf f;

	(void)state;
	cm_buf_init(&f, 64);
	/* only the header: refused before any payload arrives */
	put_header(&f, 0x31504C54u, PROTO_VERSION, PROTO_PING, 0, 8, 0);
	expect_frame_error(&f, PROTO_ERR_MAGIC);
	cm_buf_reset(&f);
	put_header(&f, 0x53504C31u, PROTO_VERSION, PROTO_PING, 0, 8, 0);
	expect_frame_error(&f, PROTO_ERR_MAGIC);
	cm_buf_deinit(&f);
}

static void test_err_version(void **state)
{
	struct cm_buf f;

	(void)state;
	cm_buf_init(&f, 64);
	put_header(&f, PROTO_MAGIC, PROTO_VERSION + 1, PROTO_PING, 0, 8, 0);
	expect_frame_error(&f, PROTO_ERR_VERSION);
	cm_buf_reset(&f);
	put_header(&f, PROTO_MAGIC, 0, PROTO_PING, 0, 8, 0);
	expect_frame_error(&f, PROTO_ERR_VERSION);
	cm_buf_deinit(&f);
}

static void test_err_type(void **state)
{
	static const uint16_t bad[] = { 0, 6, 15, 19, 31, 35, 47, 49, 0xFFFF };
	struct cm_buf f;

	(void)state;
	cm_buf_init(&f, 64);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cm_buf_reset(&f);
		put_header(&f, PROTO_MAGIC, PROTO_VERSION, bad[i], 0, 0, 0);
		expect_frame_error(&f, PROTO_ERR_TYPE);
	}
	cm_buf_deinit(&f);
}

static void test_err_flags(void **state)
{
	struct cm_buf f;

	(void)state;
	cm_buf_init(&f, 64);
	put_header(&f, PROTO_MAGIC, PROTO_VERSION, PROTO_PING, 1, 8, 0);
	expect_frame_error(&f, PROTO_ERR_FLAGS);
	cm_buf_reset(&f);
	put_header(&f, PROTO_MAGIC, PROTO_VERSION, PROTO_SUBMIT,
		   PROTO_SUBMIT_FLAGS_ALL + 1, 8, 1);
	expect_frame_error(&f, PROTO_ERR_FLAGS);
	cm_buf_reset(&f);
	put_header(&f, PROTO_MAGIC, PROTO_VERSION, PROTO_TOKEN, 0x80000000u, 8, 1);
	expect_frame_error(&f, PROTO_ERR_FLAGS);
	cm_buf_deinit(&f);
}

static void test_err_too_long(void **state)
{
	struct cm_buf f;

	(void)state;
	cm_buf_init(&f, 64);
	/* header only: a 64 KiB + 1 payload is refused without waiting for it */
	put_header(&f, PROTO_MAGIC, PROTO_VERSION, PROTO_SUBMIT, 0, MAXF + 1, 1);
	expect_frame_error(&f, PROTO_ERR_TOO_LONG);
	cm_buf_reset(&f);
	put_header(&f, PROTO_MAGIC, PROTO_VERSION, PROTO_TOKEN, 0, UINT32_MAX, 1);
	expect_frame_error(&f, PROTO_ERR_TOO_LONG);
	cm_buf_deinit(&f);
}

static void test_err_field_overrun(void **state)
{
	struct cm_buf f, p;

	(void)state;
	/* the message str claims 10 bytes, the payload holds 3 */
	error_frame(&f, PROTO_E_INTERNAL, 10, "abc", 3);
	expect_frame_error(&f, PROTO_ERR_FIELD_OVERRUN);
	cm_buf_deinit(&f);
	/* a str length near 4 GiB */
	error_frame(&f, PROTO_E_INTERNAL, UINT32_MAX, "abc", 3);
	expect_frame_error(&f, PROTO_ERR_FIELD_OVERRUN);
	cm_buf_deinit(&f);
	/* a fixed field cut short: PING with 7 of its 8 bytes */
	cm_buf_init(&p, 16);
	assert_int_equal(cm_buf_append(&p, "1234567", 7), CM_OK);
	raw_frame(&f, PROTO_PING, 0, 0, &p);
	expect_frame_error(&f, PROTO_ERR_FIELD_OVERRUN);
	cm_buf_deinit(&f);
	cm_buf_deinit(&p);
}

static void test_err_count_overrun(void **state)
{
	struct cm_buf f;
	struct submit_opts o = submit_ok;

	(void)state;
	/* 10 tokens declared, 1 present */
	token_frame(&f, 10, 1);
	expect_frame_error(&f, PROTO_ERR_COUNT_OVERRUN);
	cm_buf_deinit(&f);
	/* a count of 4 billion: refused before any allocation */
	token_frame(&f, UINT32_MAX, 1);
	expect_frame_error(&f, PROTO_ERR_COUNT_OVERRUN);
	cm_buf_deinit(&f);
	/* stop strings: 40 declared, 2 present (then the rest of the payload) */
	o.n_stop = 40;
	o.n_stop_bytes = 2;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_COUNT_OVERRUN);
	cm_buf_deinit(&f);
}

static void test_err_count_limit(void **state)
{
	struct cm_buf f;
	struct submit_opts o = submit_ok;

	(void)state;
	/* all bytes present, but one over the hard limit */
	token_frame(&f, CM_LIM_PROTO_TOKENS_PER_FRAME_HARD + 1,
		    CM_LIM_PROTO_TOKENS_PER_FRAME_HARD + 1);
	expect_frame_error(&f, PROTO_ERR_COUNT_LIMIT);
	cm_buf_deinit(&f);
	o.n_stop = CM_LIM_PROTO_STOP_STRINGS_HARD + 1;
	o.n_stop_bytes = CM_LIM_PROTO_STOP_STRINGS_HARD + 1;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_COUNT_LIMIT);
	cm_buf_deinit(&f);
	/* at the limit it decodes */
	o.n_stop = o.n_stop_bytes = CM_LIM_PROTO_STOP_STRINGS_HARD;
	submit_frame(&f, &o);
	{
		struct proto_decoder *d = proto_decoder_new(MAXF);
		struct proto_msg m;

		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&f), cm_buf_len(&f)),
				 CM_OK);
		assert_int_equal(proto_decoder_next(d, &m), CM_OK);
		assert_int_equal(m.u.submit.n_stop, CM_LIM_PROTO_STOP_STRINGS_HARD);
		assert_int_equal(m.u.submit.text.len, 2);
		assert_memory_equal(m.u.submit.text.ptr, "hi", 2);
		proto_decoder_free(d);
	}
	cm_buf_deinit(&f);
}

static void test_err_utf8(void **state)
{
	static const char *bad[] = {
		"\xff", "\xc0\xaf", "a\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"\x80", "ok\xc3",
	};
	struct cm_buf f;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = strlen(bad[i]);

		error_frame(&f, PROTO_E_INTERNAL, (uint32_t)n, bad[i], n);
		expect_frame_error(&f, PROTO_ERR_UTF8);
		cm_buf_deinit(&f);
	}
	/* NUL is valid UTF-8 */
	error_frame(&f, PROTO_E_INTERNAL, 3, "a\0b", 3);
	{
		struct proto_decoder *d = proto_decoder_new(MAXF);
		struct proto_msg m;

		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&f), cm_buf_len(&f)),
				 CM_OK);
		assert_int_equal(proto_decoder_next(d, &m), CM_OK);
		assert_int_equal(m.u.error.message.len, 3);
		proto_decoder_free(d);
	}
	cm_buf_deinit(&f);
}

static void test_err_trailing(void **state)
{
	struct cm_buf f, p;

	(void)state;
	cm_buf_init(&p, 16);
	assert_int_equal(cm_buf_put_u64(&p, 1), CM_OK);
	assert_int_equal(cm_buf_put_u8(&p, 0), CM_OK); /* one byte too many */
	raw_frame(&f, PROTO_PING, 0, 0, &p);
	expect_frame_error(&f, PROTO_ERR_TRAILING);
	cm_buf_deinit(&f);
	/* a str that ends before the payload does */
	error_frame(&f, PROTO_E_INTERNAL, 2, "abc", 3);
	expect_frame_error(&f, PROTO_ERR_TRAILING);
	cm_buf_deinit(&f);
	cm_buf_deinit(&p);
}

/* A frame of `type` whose payload is the given bytes. */
static void small_frame(struct cm_buf *f, uint16_t type, uint64_t id,
			const uint8_t *bytes, size_t n)
{
	struct cm_buf p;

	cm_buf_init(&p, 1024);
	assert_int_equal(cm_buf_append(&p, bytes, n), CM_OK);
	raw_frame(f, type, 0, id, &p);
	cm_buf_deinit(&p);
}

/* Version 4's values: tool_choice, the name exactly with NAMED, think, a
 * TOKEN entry's channel. */
static void test_err_value_tools(void **state)
{
	static const struct { uint8_t choice; uint32_t name; uint8_t think; } bad[] = {
		{ PROTO_TOOLS_NAMED + 1, 0, 0 }, { PROTO_TOOLS_NAMED, 0, 0 },
		{ PROTO_TOOLS_REQUIRED, 1, 0 }, { PROTO_TOOLS_AUTO, 0, PROTO_THINK_OFF + 1 },
	};
	struct submit_opts o;
	struct cm_buf f;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = submit_ok;
		o.tool_choice = bad[i].choice;
		o.tool_name_len = bad[i].name;
		o.think = bad[i].think;
		submit_frame(&f, &o);
		expect_frame_error(&f, PROTO_ERR_VALUE);
		cm_buf_deinit(&f);
	}
	token_channel = PROTO_CH_TOOL_CALL + 1;
	token_frame(&f, 1, 1);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	token_channel = 0;
}

static void test_err_value(void **state)
{
	static const uint8_t cancel_bad[] = { 4 };
	static const uint8_t cancel_ok[] = { 3 };
	static const uint8_t pong_bad[] = { 1, 0, 0, 0, 0, 0, 0, 0, 2,
					    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	static const uint8_t token_zero[] = { 0, 0, 0, 0 };
	static const uint8_t error_code0[] = { 0, 0, 0, 0, 0, 0 };
	static const uint8_t error_code11[] = { 11, 0, 0, 0, 0, 0 };
	/* one token (id 1, logprob 0, text "") claiming 21 alternatives */
	static const uint8_t token_top21[] = { 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
					       0, 0, 0, 0, 0, 0, 0, 0, 21, 0 };
	/* one token claiming 2 alternatives with bytes for one */
	static const uint8_t token_top_short[] = { 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
						   0, 0, 0, 0, 0, 0, 0, 0, 2,
						   5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
	uint8_t done[1 + 16 + 40 + 32 + 8 + 4] = { 0 };
	uint8_t stats[24 + 24 + 8 + 16 + 1 + 4 + 2 * 16 * 8] = { 0 };
	struct cm_buf f;
	struct submit_opts o;

	(void)state;
	small_frame(&f, PROTO_CANCEL, 1, cancel_bad, sizeof(cancel_bad));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	/* the same CANCEL with reason 3 is fine, and with request id 0 is not */
	small_frame(&f, PROTO_CANCEL, 1, cancel_ok, sizeof(cancel_ok));
	{
		struct proto_decoder *d = proto_decoder_new(MAXF);
		struct proto_msg m;

		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&f), cm_buf_len(&f)),
				 CM_OK);
		assert_int_equal(proto_decoder_next(d, &m), CM_OK);
		assert_int_equal(m.u.cancel.reason, PROTO_CANCEL_SHUTDOWN);
		proto_decoder_free(d);
	}
	cm_buf_deinit(&f);
	small_frame(&f, PROTO_CANCEL, 0, cancel_ok, sizeof(cancel_ok));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);

	done[0] = 3; /* finish */
	small_frame(&f, PROTO_DONE, 1, done, sizeof(done));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);

	small_frame(&f, PROTO_ERROR, 0, error_code0, sizeof(error_code0));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	small_frame(&f, PROTO_ERROR, 0, error_code11, sizeof(error_code11));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	small_frame(&f, PROTO_TOKEN, 1, token_top21, sizeof(token_top21));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	small_frame(&f, PROTO_TOKEN, 1, token_top_short, sizeof(token_top_short));
	expect_frame_error(&f, PROTO_ERR_FIELD_OVERRUN);
	cm_buf_deinit(&f);

	small_frame(&f, PROTO_PONG, 0, pong_bad, sizeof(pong_bad));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	small_frame(&f, PROTO_TOKEN, 1, token_zero, sizeof(token_zero));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);

	/* STATS: n_hist 15 (offset 24+24+8+16+1), then draining 2 */
	stats[73] = 15;
	small_frame(&f, PROTO_STATS, 0, stats, sizeof(stats));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	stats[73] = PROTO_HIST_BUCKETS;
	stats[72] = 2;
	small_frame(&f, PROTO_STATS, 0, stats, sizeof(stats));
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);

	/* SUBMIT: each bad field alone */
	o = submit_ok;
	o.klass = 2;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.prompt_kind = 7;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.max_tokens = 0;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.temperature = NAN;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.top_p = INFINITY;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.constraint_kind = 4;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok; /* text without a kind */
	o.constraint_len = 2;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	o = submit_ok;
	o.top_logprobs = PROTO_TOP_LOGPROBS_MAX + 1;
	submit_frame(&f, &o);
	expect_frame_error(&f, PROTO_ERR_VALUE);
	cm_buf_deinit(&f);
	/* and submit_ok itself decodes */
	submit_frame(&f, &submit_ok);
	{
		struct proto_decoder *d = proto_decoder_new(MAXF);
		struct proto_msg m;

		assert_int_equal(proto_decoder_feed(d, cm_buf_data(&f), cm_buf_len(&f)),
				 CM_OK);
		assert_int_equal(proto_decoder_next(d, &m), CM_OK);
		assert_int_equal(m.u.submit.max_tokens, 16);
		proto_decoder_free(d);
	}
	cm_buf_deinit(&f);
}

/* decode_frame on a buffer shorter than a header, or with extra bytes. */
static void test_decode_frame_bounds(void **state)
{
	struct cm_buf b, scratch;
	struct proto_msg m;
	enum proto_error err;

	(void)state;
	cm_buf_init(&b, 256);
	cm_buf_init(&scratch, 1024);
	tp_sample(PROTO_PING, &m);
	assert_int_equal(proto_encode(&b, &m, MAXF), CM_OK);
	for (size_t n = 0; n < cm_buf_len(&b); n++) {
		assert_int_equal(proto_decode_frame(cm_buf_data(&b), n, MAXF, &m,
						    &scratch, &err),
				 CM_EPROTO);
		assert_int_equal(err, PROTO_ERR_FIELD_OVERRUN);
	}
	assert_int_equal(cm_buf_put_u8(&b, 0), CM_OK);
	assert_int_equal(proto_decode_frame(cm_buf_data(&b), cm_buf_len(&b), MAXF,
					    &m, &scratch, &err),
			 CM_EPROTO);
	assert_int_equal(err, PROTO_ERR_TRAILING);
	/* max_frame is the payload bound: 8 passes, 7 is too long */
	assert_int_equal(proto_decode_frame(cm_buf_data(&b), cm_buf_len(&b) - 1, 8,
					    &m, &scratch, &err),
			 CM_OK);
	assert_int_equal(proto_decode_frame(cm_buf_data(&b), cm_buf_len(&b) - 1, 7,
					    &m, &scratch, &err),
			 CM_EPROTO);
	assert_int_equal(err, PROTO_ERR_TOO_LONG);
	cm_buf_deinit(&b);
	cm_buf_deinit(&scratch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_random_splits),
		cmocka_unit_test(test_many_frames_in_one_feed),
		cmocka_unit_test(test_message_survives_feed),
		cmocka_unit_test(test_feed_cap),
		cmocka_unit_test(test_alloc_failure),
		cmocka_unit_test(test_err_magic),
		cmocka_unit_test(test_err_version),
		cmocka_unit_test(test_err_type),
		cmocka_unit_test(test_err_flags),
		cmocka_unit_test(test_err_too_long),
		cmocka_unit_test(test_err_field_overrun),
		cmocka_unit_test(test_err_count_overrun),
		cmocka_unit_test(test_err_count_limit),
		cmocka_unit_test(test_err_utf8),
		cmocka_unit_test(test_err_trailing),
		cmocka_unit_test(test_err_value),
		cmocka_unit_test(test_err_value_tools),
		cmocka_unit_test(test_decode_frame_bounds),
	};

	return cmocka_run_group_tests_name("proto_decoder", tests, NULL, NULL);
}
