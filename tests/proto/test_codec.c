/*
 * test_codec.c - proto/codec.c: round trip of every message type (every
 * field compared), empty strings, maximum counts, the exact bytes of a
 * frame, canonical re-encoding, and the encoder's refusals (over the cap,
 * over max_frame, invalid UTF-8, invalid values, allocation failure).
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

#define BIG (CM_LIM_PROTO_FRAME_BYTES_HARD + PROTO_HEADER_LEN)

/* Encodes m, decodes it back into *out and asserts equality; returns the
 * frame length.  `frame` and `scratch` stay alive for *out. */
static size_t round_trip(const struct proto_msg *m, struct cm_buf *frame,
			 struct cm_buf *scratch, struct proto_msg *out)
{
	enum proto_error err = PROTO_ERR_VALUE;
	const char *diff;

	cm_buf_reset(frame);
	assert_int_equal(proto_encode(frame, m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	assert_true(cm_buf_len(frame) >= PROTO_HEADER_LEN);
	assert_int_equal(proto_decode_frame(cm_buf_data(frame), cm_buf_len(frame),
					    CM_LIM_PROTO_FRAME_BYTES, out, scratch,
					    &err),
			 CM_OK);
	assert_int_equal(err, PROTO_ERR_NONE);
	diff = tp_msg_diff(m, out);
	if (diff)
		fail_msg("type %s: field %s differs after a round trip",
			 proto_type_str((enum proto_type)m->type), diff);
	return cm_buf_len(frame);
}

static void test_round_trip_every_type(void **state)
{
	struct cm_buf frame, scratch, again;
	struct proto_msg m, out;

	(void)state;
	cm_buf_init(&frame, BIG);
	cm_buf_init(&scratch, 1 << 20);
	cm_buf_init(&again, BIG);
	for (int i = 0; i < tp_n_types; i++) {
		size_t len;
		const uint8_t *f;

		tp_sample(tp_types[i], &m);
		len = round_trip(&m, &frame, &scratch, &out);
		f = cm_buf_data(&frame);
		/* header: magic bytes, version, type, flags, length, id */
		assert_memory_equal(f, "SLP1", 4);
		assert_int_equal(f[4] | f[5] << 8, PROTO_VERSION);
		assert_int_equal(f[6] | f[7] << 8, tp_types[i]);
		assert_int_equal(cm_le32(f + 8), m.flags);
		assert_int_equal(cm_le32(f + 12), len - PROTO_HEADER_LEN);
		assert_true(cm_le64(f + 16) == m.request_id);
		/* canonical: re-encoding the decoded message gives the same bytes */
		cm_buf_reset(&again);
		assert_int_equal(proto_encode(&again, &out, CM_LIM_PROTO_FRAME_BYTES),
				 CM_OK);
		assert_int_equal(cm_buf_len(&again), len);
		assert_memory_equal(cm_buf_data(&again), f, len);
	}
	cm_buf_deinit(&frame);
	cm_buf_deinit(&scratch);
	cm_buf_deinit(&again);
}

/* The exact bytes of two small frames: the layout of docs/protocol.md. */
static void test_exact_bytes(void **state)
{
	static const uint8_t ping[] = {
		'S', 'L', 'P', '1', 6, 0, 2, 0, 0, 0, 0, 0, 8, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, /* request id 0 */
		0x0D, 0xF0, 0xFE, 0xCA, 0xEF, 0xBE, 0xAD, 0xDE, /* nonce */
	};
	static const uint8_t error[] = {
		'S', 'L', 'P', '1', 6, 0, 5, 0, 0, 0, 0, 0, 9, 0, 0, 0,
		0x2A, 0, 0, 0, 0, 0, 0, 0, /* request id 42 */
		6, 0,                      /* code PROTO_E_PROTOCOL */
		3, 0, 0, 0, 'b', 'a', 'd',  /* str "bad" */
	};
	struct cm_buf b;
	struct proto_msg m;

	(void)state;
	cm_buf_init(&b, 256);
	tp_sample(PROTO_PING, &m);
	assert_int_equal(proto_encode(&b, &m, 1024), CM_OK);
	assert_int_equal(cm_buf_len(&b), sizeof(ping));
	assert_memory_equal(cm_buf_data(&b), ping, sizeof(ping));

	cm_buf_reset(&b);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_ERROR;
	m.request_id = 42;
	m.u.error.code = PROTO_E_PROTOCOL;
	m.u.error.message = tp_str("bad");
	assert_int_equal(proto_encode(&b, &m, 1024), CM_OK);
	assert_int_equal(cm_buf_len(&b), sizeof(error));
	assert_memory_equal(cm_buf_data(&b), error, sizeof(error));
	cm_buf_deinit(&b);
}

/*
 * EMBED and EMBEDDING (version 6): the exact bytes of a small EMBEDDING,
 * and every value the encoder refuses (the decoder applies the same
 * checks): no inputs, an unknown input kind, a text input with ids, a
 * token input without ids or with text, dimensions over the hard limit,
 * a vector with no values, a NaN or an infinity, truncated not 0/1.
 */
static void test_embed_messages(void **state)
{
	static const uint8_t embedding[] = {
		'S', 'L', 'P', '1', 6, 0, 34, 0, 0, 0, 0, 0, 21, 0, 0, 0,
		7, 0, 0, 0, 0, 0, 0, 0,       /* request id 7 */
		1, 0, 0, 0, 5, 0, 0, 0, 0,    /* index 1, 5 tokens, not truncated */
		2, 0, 0, 0,                   /* 2 values */
		0, 0, 0x80, 0x3F, 0, 0, 0, 0, /* 1.0f, 0.0f */
	};
	static const float one_zero[2] = { 1.0f, 0.0f };
	uint32_t ids[1] = { 5 };
	struct proto_embed_input in;
	struct cm_buf b;
	struct proto_msg m;

	(void)state;
	cm_buf_init(&b, 4096);
	memset(&m, 0, sizeof(m));
	m.type = PROTO_EMBEDDING;
	m.request_id = 7;
	m.u.embedding = (struct proto_embedding){ 1, 5, 0, 2, one_zero };
	assert_int_equal(proto_encode(&b, &m, 1024), CM_OK);
	assert_int_equal(cm_buf_len(&b), sizeof(embedding));
	assert_memory_equal(cm_buf_data(&b), embedding, sizeof(embedding));
	cm_buf_reset(&b);
	m.u.embedding.n_values = 0;
	assert_int_equal(proto_encode(&b, &m, 1024), CM_EINVAL);
	m.u.embedding = (struct proto_embedding){ 1, 5, 2, 2, one_zero };
	assert_int_equal(proto_encode(&b, &m, 1024), CM_EINVAL);
	{
		float bad[2] = { NAN, 0 }, inf[2] = { INFINITY, 0 };

		m.u.embedding = (struct proto_embedding){ 1, 5, 0, 2, bad };
		assert_int_equal(proto_encode(&b, &m, 1024), CM_EINVAL);
		m.u.embedding.values = inf;
		assert_int_equal(proto_encode(&b, &m, 1024), CM_EINVAL);
	}
	m.u.embedding = (struct proto_embedding){ 1, 5, 0, 2, one_zero };
	m.request_id = 0;
	assert_int_equal(proto_encode(&b, &m, 1024), CM_EINVAL);

	tp_sample(PROTO_EMBED, &m);
	assert_int_equal(proto_encode(&b, &m, 4096), CM_OK);
	cm_buf_reset(&b);
	m.u.embed.n_inputs = 0;
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	m.u.embed.n_inputs = 1;
	m.u.embed.inputs = &in;
	in = (struct proto_embed_input){ 2, tp_str("x"), 0, NULL };
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	in = (struct proto_embed_input){ PROTO_INPUT_TEXT, tp_str("x"), 1, ids };
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	in = (struct proto_embed_input){ PROTO_INPUT_TOKENS, tp_str(""), 0, NULL };
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	in = (struct proto_embed_input){ PROTO_INPUT_TOKENS, tp_str("x"), 1, ids };
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	in = (struct proto_embed_input){ PROTO_INPUT_TOKENS, tp_str(""), 1, ids };
	assert_int_equal(proto_encode(&b, &m, 4096), CM_OK);
	cm_buf_reset(&b);
	m.u.embed.dimensions = CM_LIM_PROTO_EMBED_DIM_HARD + 1;
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	m.u.embed.dimensions = 0;
	m.flags = PROTO_EMBED_FLAGS_ALL + 1;
	assert_int_equal(proto_encode(&b, &m, 4096), CM_EINVAL);
	assert_int_equal(cm_buf_len(&b), 0);
	cm_buf_deinit(&b);
}

/* Several frames appended to one buffer decode one by one at their offsets. */
static void test_encode_appends(void **state)
{
	struct cm_buf b, scratch;
	struct proto_msg m, out;
	size_t off = 0;

	(void)state;
	cm_buf_init(&b, BIG);
	cm_buf_init(&scratch, 1 << 20);
	for (int i = 0; i < tp_n_types; i++) {
		tp_sample(tp_types[i], &m);
		assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	}
	for (int i = 0; i < tp_n_types; i++) {
		const uint8_t *f = cm_buf_data(&b) + off;
		size_t len = PROTO_HEADER_LEN + cm_le32(f + 12);

		tp_sample(tp_types[i], &m);
		assert_int_equal(proto_decode_frame(f, len, CM_LIM_PROTO_FRAME_BYTES,
						    &out, &scratch, NULL),
				 CM_OK);
		assert_null(tp_msg_diff(&m, &out));
		off += len;
	}
	assert_int_equal(off, cm_buf_len(&b));
	cm_buf_deinit(&b);
	cm_buf_deinit(&scratch);
}

static void test_empty_strings(void **state)
{
	struct cm_buf frame, scratch;
	struct proto_msg m, out;
	struct proto_str empty = { NULL, 0 };
	struct proto_str stop[2] = { { NULL, 0 }, { "", 0 } };
	struct proto_message msgs[1] = { { { NULL, 0 }, { NULL, 0 }, { NULL, 0 }, { NULL, 0 } } };
	struct proto_token tok[1] = { { 7, -1.0f, { NULL, 0 }, { NULL, 0 }, 0, NULL, 0 } };

	(void)state;
	cm_buf_init(&frame, BIG);
	cm_buf_init(&scratch, 1 << 20);

	tp_sample(PROTO_HELLO, &m);
	m.u.hello.worker_name = empty;
	m.u.hello.model_name = empty;
	m.u.hello.backend = empty;
	m.u.hello.device = empty;
	m.u.hello.engine_version = empty;
	m.u.hello.architecture = empty;
	m.u.hello.file_type = empty;
	round_trip(&m, &frame, &scratch, &out);
	assert_int_equal(out.u.hello.device.len, 0);
	assert_non_null(out.u.hello.device.ptr);

	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.tenant_id = empty;
	m.u.submit.key_id = empty;
	m.u.submit.model = empty;
	m.u.submit.text = empty;
	m.u.submit.template_name = empty;
	m.u.submit.constraint = empty;
	m.u.submit.tools = empty;
	m.u.submit.tool_name = empty;
	m.u.submit.tool_choice = PROTO_TOOLS_AUTO;
	m.u.submit.n_stop = 2;
	m.u.submit.stop = stop;
	m.u.submit.n_messages = 1;
	m.u.submit.messages = msgs;
	round_trip(&m, &frame, &scratch, &out);
	/* 24 header + 4+32+4+4 +1+4+4 + 9 sampling fields (40) + 4+2*4 +1+4
	 * + 4+1*16 + 4 + (version 3) 1+4+1 + (version 4) 4+1+4+1+1 + (version 5) 4 */
	assert_int_equal(cm_buf_len(&frame), 24 + 44 + 9 + 40 + 12 + 5 + 20 + 4 + 6 + 11 + 4);

	/* no stop strings, no messages: the arrays come back NULL */
	m.u.submit.n_stop = 0;
	m.u.submit.stop = NULL;
	m.u.submit.n_messages = 0;
	m.u.submit.messages = NULL;
	m.u.submit.prompt_kind = PROTO_PROMPT_TEXT;
	round_trip(&m, &frame, &scratch, &out);
	assert_null(out.u.submit.stop);
	assert_null(out.u.submit.messages);

	tp_sample(PROTO_TOKEN, &m);
	m.u.tokens.n = 1;
	m.u.tokens.tok = tok;
	round_trip(&m, &frame, &scratch, &out);

	tp_sample(PROTO_ERROR, &m);
	m.u.error.message = empty;
	m.request_id = 0; /* connection-wide */
	round_trip(&m, &frame, &scratch, &out);
	cm_buf_deinit(&frame);
	cm_buf_deinit(&scratch);
}

static void test_max_counts(void **state)
{
	struct cm_buf frame, scratch;
	struct proto_msg m, out;
	struct proto_str *stop;
	struct proto_message *msgs;
	struct proto_token *tok;
	char text[16];

	(void)state;
	cm_buf_init(&frame, BIG);
	cm_buf_init(&scratch, 4 << 20);
	stop = calloc(CM_LIM_PROTO_STOP_STRINGS_HARD + 1, sizeof(*stop));
	msgs = calloc(CM_LIM_PROTO_MESSAGES_HARD + 1, sizeof(*msgs));
	tok = calloc(CM_LIM_PROTO_TOKENS_PER_FRAME_HARD + 1, sizeof(*tok));
	assert_non_null(stop);
	assert_non_null(msgs);
	assert_non_null(tok);
	for (int i = 0; i <= CM_LIM_PROTO_STOP_STRINGS_HARD; i++)
		stop[i] = tp_str(i % 2 ? "###" : "\xc3\xa9");
	for (int i = 0; i <= CM_LIM_PROTO_MESSAGES_HARD; i++) {
		msgs[i].role = tp_str(i % 2 ? "assistant" : "user");
		msgs[i].content = tp_str(i % 3 ? "turn" : "");
	}
	memcpy(text, "tok", 4);
	for (int i = 0; i <= CM_LIM_PROTO_TOKENS_PER_FRAME_HARD; i++) {
		tok[i].id = (uint32_t)i * 7u;
		tok[i].logprob = -(float)i / 16.0f;
		tok[i].text = (struct proto_str){ text, (uint32_t)(i % 4) };
	}

	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.n_stop = CM_LIM_PROTO_STOP_STRINGS_HARD;
	m.u.submit.stop = stop;
	m.u.submit.n_messages = CM_LIM_PROTO_MESSAGES_HARD;
	m.u.submit.messages = msgs;
	round_trip(&m, &frame, &scratch, &out);
	assert_int_equal(out.u.submit.n_stop, CM_LIM_PROTO_STOP_STRINGS_HARD);
	assert_int_equal(out.u.submit.n_messages, CM_LIM_PROTO_MESSAGES_HARD);

	tp_sample(PROTO_TOKEN, &m);
	m.u.tokens.n = CM_LIM_PROTO_TOKENS_PER_FRAME_HARD;
	m.u.tokens.tok = tok;
	round_trip(&m, &frame, &scratch, &out);
	assert_int_equal(out.u.tokens.n, CM_LIM_PROTO_TOKENS_PER_FRAME_HARD);
	assert_int_equal(out.u.tokens.tok[4095].id, 4095 * 7);

	/* one over each limit: the encoder refuses and writes nothing */
	cm_buf_reset(&frame);
	m.u.tokens.n = CM_LIM_PROTO_TOKENS_PER_FRAME_HARD + 1;
	assert_int_equal(proto_encode(&frame, &m, CM_LIM_PROTO_FRAME_BYTES),
			 CM_EINVAL);
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.n_stop = CM_LIM_PROTO_STOP_STRINGS_HARD + 1;
	m.u.submit.stop = stop;
	assert_int_equal(proto_encode(&frame, &m, CM_LIM_PROTO_FRAME_BYTES),
			 CM_EINVAL);
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.n_messages = CM_LIM_PROTO_MESSAGES_HARD + 1;
	m.u.submit.messages = msgs;
	assert_int_equal(proto_encode(&frame, &m, CM_LIM_PROTO_FRAME_BYTES),
			 CM_EINVAL);
	assert_int_equal(cm_buf_len(&frame), 0);
	free(stop);
	free(msgs);
	free(tok);
	cm_buf_deinit(&frame);
	cm_buf_deinit(&scratch);
}

/* The buffer's cap and max_frame: CM_ELIMIT and `out` exactly as it was. */
static void test_encode_over_cap(void **state)
{
	struct cm_buf b;
	struct proto_msg m;
	size_t full;
	char *big;

	(void)state;
	tp_sample(PROTO_SUBMIT, &m);
	cm_buf_init(&b, BIG);
	assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	full = cm_buf_len(&b);
	cm_buf_deinit(&b);

	/* a buffer holding "prefix" and room for one byte less than the frame */
	cm_buf_init(&b, 6 + full - 1);
	assert_int_equal(cm_buf_append(&b, "prefix", 6), CM_OK);
	assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 6);
	assert_memory_equal(cm_buf_data(&b), "prefix", 6);
	cm_buf_deinit(&b);

	/* exactly enough room */
	cm_buf_init(&b, 6 + full);
	assert_int_equal(cm_buf_append(&b, "prefix", 6), CM_OK);
	assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);
	assert_int_equal(cm_buf_len(&b), 6 + full);

	/* max_frame bounds the payload: one byte short refuses, exact passes */
	cm_buf_reset(&b);
	assert_int_equal(cm_buf_append(&b, "prefix", 6), CM_OK);
	assert_int_equal(proto_encode(&b, &m, (uint32_t)(full - PROTO_HEADER_LEN - 1)),
			 CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 6);
	assert_int_equal(proto_encode(&b, &m, (uint32_t)(full - PROTO_HEADER_LEN)),
			 CM_OK);
	cm_buf_deinit(&b);

	/* a string larger than the hard frame maximum */
	big = malloc(CM_LIM_PROTO_FRAME_BYTES_HARD + 1);
	assert_non_null(big);
	memset(big, 'a', CM_LIM_PROTO_FRAME_BYTES_HARD + 1);
	tp_sample(PROTO_ERROR, &m);
	m.u.error.message.ptr = big;
	m.u.error.message.len = CM_LIM_PROTO_FRAME_BYTES_HARD + 1;
	cm_buf_init(&b, 2 * (size_t)BIG);
	assert_int_equal(proto_encode(&b, &m, UINT32_MAX), CM_ELIMIT);
	assert_int_equal(cm_buf_len(&b), 0);
	free(big);
	cm_buf_deinit(&b);
}

static void expect_einval(struct proto_msg *m, const char *what)
{
	struct cm_buf b;
	enum cm_status st;

	cm_buf_init(&b, BIG);
	assert_int_equal(cm_buf_append(&b, "keep", 4), CM_OK);
	st = proto_encode(&b, m, CM_LIM_PROTO_FRAME_BYTES);
	if (st != CM_EINVAL)
		fail_msg("%s: expected CM_EINVAL, got %s", what, cm_status_str(st));
	assert_int_equal(cm_buf_len(&b), 4);
	assert_memory_equal(cm_buf_data(&b), "keep", 4);
	cm_buf_deinit(&b);
}

static void test_encode_refuses_invalid_utf8(void **state)
{
	static const char *bad[] = {
		"\xff", "\xc0\x80", "abc\xe2\x82", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	};
	struct proto_msg m;
	struct proto_str stop[2];
	struct proto_message msgs[1];
	struct proto_token tok[2];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tp_sample(PROTO_ERROR, &m);
		m.u.error.message = tp_str(bad[i]);
		expect_einval(&m, "error.message");

		tp_sample(PROTO_HELLO, &m);
		m.u.hello.engine_version = tp_str(bad[i]);
		expect_einval(&m, "hello.engine_version");
		tp_sample(PROTO_HELLO, &m);
		m.u.hello.file_type = tp_str(bad[i]);
		expect_einval(&m, "hello.file_type");

		tp_sample(PROTO_SUBMIT, &m);
		stop[0] = tp_str("ok");
		stop[1] = tp_str(bad[i]);
		m.u.submit.n_stop = 2;
		m.u.submit.stop = stop;
		expect_einval(&m, "submit.stop[1]");

		tp_sample(PROTO_SUBMIT, &m);
		msgs[0].role = tp_str("user");
		msgs[0].content = tp_str(bad[i]);
		m.u.submit.n_messages = 1;
		m.u.submit.messages = msgs;
		expect_einval(&m, "submit.messages[0].content");

		tp_sample(PROTO_TOKEN, &m);
		tok[0] = (struct proto_token){ 1, 0, tp_str("fine"), { NULL, 0 }, 0, NULL, 0 };
		tok[1] = (struct proto_token){ 2, 0, tp_str(bad[i]), { NULL, 0 }, 0, NULL, 0 };
		m.u.tokens.n = 2;
		m.u.tokens.tok = tok;
		expect_einval(&m, "tokens.tok[1].text");
	}
	/* a length with no bytes behind it */
	tp_sample(PROTO_ERROR, &m);
	m.u.error.message.ptr = NULL;
	m.u.error.message.len = 3;
	expect_einval(&m, "NULL str with a length");
	tp_sample(PROTO_TOKEN, &m);
	m.u.tokens.tok = NULL;
	expect_einval(&m, "NULL token array with a count");
}

static void test_encode_refuses_bad_values(void **state)
{
	struct proto_msg m;

	(void)state;
	tp_sample(PROTO_PING, &m);
	m.type = 99;
	expect_einval(&m, "unknown type");
	tp_sample(PROTO_PING, &m);
	m.flags = 1;
	expect_einval(&m, "PING flags");
	tp_sample(PROTO_SUBMIT, &m);
	m.flags = PROTO_SUBMIT_FLAGS_ALL + 1;
	expect_einval(&m, "SUBMIT undefined flag");
	tp_sample(PROTO_SUBMIT, &m);
	m.request_id = 0;
	expect_einval(&m, "SUBMIT request id 0");
	tp_sample(PROTO_STATS, &m);
	m.request_id = 5;
	expect_einval(&m, "STATS with a request id");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.klass = 2;
	expect_einval(&m, "klass");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.prompt_kind = 2;
	expect_einval(&m, "prompt_kind");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.max_tokens = 0;
	expect_einval(&m, "max_tokens 0");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.sampling.temperature = NAN;
	expect_einval(&m, "temperature NaN");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.sampling.frequency_penalty = -INFINITY;
	expect_einval(&m, "frequency_penalty -inf");
	tp_sample(PROTO_CANCEL, &m);
	m.u.cancel.reason = PROTO_CANCEL_SHUTDOWN + 1;
	expect_einval(&m, "cancel reason");
	tp_sample(PROTO_TOKEN, &m);
	m.u.tokens.n = 0;
	expect_einval(&m, "TOKEN with no token");
	{
		struct proto_top top[PROTO_TOP_LOGPROBS_MAX + 1];
		struct proto_token tk = { 1, 0.0f, { NULL, 0 }, { NULL, 0 }, PROTO_TOP_LOGPROBS_MAX + 1, top, 0 };

		memset(top, 0, sizeof(top));
		tp_sample(PROTO_TOKEN, &m);
		m.u.tokens.n = 1;
		m.u.tokens.tok = &tk;
		expect_einval(&m, "21 alternatives");
		tk.n_top = 2;
		tk.top = NULL;
		expect_einval(&m, "alternatives without an array");
	}
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.constraint_kind = PROTO_CONSTRAINT_GRAMMAR + 1;
	expect_einval(&m, "constraint kind");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.constraint_kind = PROTO_CONSTRAINT_NONE;
	expect_einval(&m, "constraint text without a kind");
	tp_sample(PROTO_SUBMIT, &m);
	m.u.submit.top_logprobs = PROTO_TOP_LOGPROBS_MAX + 1;
	expect_einval(&m, "top_logprobs");
	tp_sample(PROTO_DONE, &m);
	m.u.done.finish = 3;
	expect_einval(&m, "finish");
	tp_sample(PROTO_ERROR, &m);
	m.u.error.code = 0;
	expect_einval(&m, "error code 0");
	m.u.error.code = PROTO_E_CONSTRAINT + 1;
	expect_einval(&m, "error code 11");
	tp_sample(PROTO_STATS, &m);
	m.u.stats.n_hist = PROTO_HIST_BUCKETS - 1;
	expect_einval(&m, "n_hist");
	tp_sample(PROTO_STATS, &m);
	m.u.stats.draining = 2;
	expect_einval(&m, "draining");
	tp_sample(PROTO_PONG, &m);
	m.u.pong.ok = 2;
	expect_einval(&m, "pong ok");
}

static void test_alloc_failure(void **state)
{
	struct cm_buf b, scratch;
	struct proto_msg m, out;
	enum proto_error err;

	(void)state;
	tp_sample(PROTO_SUBMIT, &m);
	cm_buf_init(&b, BIG);
	cm_alloc_fail_after(0);
	assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(cm_buf_len(&b), 0);
	assert_int_equal(proto_encode(&b, &m, CM_LIM_PROTO_FRAME_BYTES), CM_OK);

	/* the scratch for the arrays cannot be allocated */
	cm_buf_init(&scratch, 1 << 20);
	cm_alloc_fail_after(0);
	assert_int_equal(proto_decode_frame(cm_buf_data(&b), cm_buf_len(&b),
					    CM_LIM_PROTO_FRAME_BYTES, &out,
					    &scratch, &err),
			 CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(err, PROTO_ERR_NONE);
	assert_int_equal(out.type, 0);

	/* a scratch too small for the arrays is a limit, not a protocol error */
	cm_buf_deinit(&scratch);
	cm_buf_init(&scratch, 8);
	assert_int_equal(proto_decode_frame(cm_buf_data(&b), cm_buf_len(&b),
					    CM_LIM_PROTO_FRAME_BYTES, &out,
					    &scratch, &err),
			 CM_ELIMIT);
	cm_buf_deinit(&scratch);
	cm_buf_deinit(&b);
}

static void test_names_and_bounds(void **state)
{
	(void)state;
	for (int e = PROTO_ERR_NONE; e <= PROTO_ERR_VALUE; e++) {
		for (int f = e + 1; f <= PROTO_ERR_VALUE; f++)
			assert_string_not_equal(proto_error_str((enum proto_error)e),
						proto_error_str((enum proto_error)f));
	}
	assert_string_equal(proto_error_str((enum proto_error)99),
			    "unknown proto error");
	for (int i = 0; i < tp_n_types; i++)
		assert_string_not_equal(proto_type_str((enum proto_type)tp_types[i]),
					"unknown");
	assert_string_equal(proto_type_str(PROTO_SUBMIT), "SUBMIT");
	assert_string_equal(proto_type_str((enum proto_type)6), "unknown");

	assert_true(proto_hist_bounds_ns[0] == INT64_C(1000000));
	assert_true(proto_hist_bounds_ns[PROTO_HIST_BUCKETS - 2] ==
		    INT64_C(30000000000));
	assert_true(proto_hist_bounds_ns[PROTO_HIST_BUCKETS - 1] == INT64_MAX);
	for (int i = 1; i < PROTO_HIST_BUCKETS; i++) {
		assert_true(proto_hist_bounds_ns[i] > proto_hist_bounds_ns[i - 1]);
		/* log-spaced: each step at most x2.5 */
		if (i < PROTO_HIST_BUCKETS - 1)
			assert_true(proto_hist_bounds_ns[i] * 2 <=
				    proto_hist_bounds_ns[i - 1] * 5);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_every_type),
		cmocka_unit_test(test_exact_bytes),
		cmocka_unit_test(test_embed_messages),
		cmocka_unit_test(test_encode_appends),
		cmocka_unit_test(test_empty_strings),
		cmocka_unit_test(test_max_counts),
		cmocka_unit_test(test_encode_over_cap),
		cmocka_unit_test(test_encode_refuses_invalid_utf8),
		cmocka_unit_test(test_encode_refuses_bad_values),
		cmocka_unit_test(test_alloc_failure),
		cmocka_unit_test(test_names_and_bounds),
	};

	return cmocka_run_group_tests_name("proto_codec", tests, NULL, NULL);
}
