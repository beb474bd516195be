/*
 * gen_corpus_worker_conn.c - writes the seed corpus of fuzz_worker_conn
 * (corpus/worker_conn/): byte streams of well-formed gateway sessions
 * (SUBMIT text and chat, with grammar and schema constraints and logprobs,
 * tools and a forced call, thinking with budgets before a constraint,
 * CANCEL, PING, DRAIN, a bad SUBMIT; EMBED of text and ids, truncated
 * and shortened, cancelled), framed the way
 * the fuzzer reads them (a piece-length byte before each piece).
 *
 * Not part of the build; run by hand:
 *   cc -O1 -I. tests/fuzz/gen_corpus_worker_conn.c build/proto/libsluice_proto.a \
 *      build/common/libsluice_common.a -lcrypto -ljansson -lm -o /tmp/gen &&
 *   /tmp/gen tests/fuzz/corpus/worker_conn
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "proto/proto.h"

static struct cm_buf out;

/* appends a frame as pieces of at most 200 bytes, each after its length byte */
static void frame(const struct proto_msg *m)
{
	struct cm_buf f;
	size_t off = 0;

	cm_buf_init(&f, 1 << 20);
	if (proto_encode(&f, m, CM_LIM_PROTO_FRAME_BYTES) != CM_OK) {
		fprintf(stderr, "encode failed\n");
		exit(1);
	}
	while (off < cm_buf_len(&f)) {
		size_t n = cm_buf_len(&f) - off > 200 ? 200 : cm_buf_len(&f) - off;
		uint8_t len = (uint8_t)(n - 1);

		if (cm_buf_append(&out, &len, 1) != CM_OK ||
		    cm_buf_append(&out, cm_buf_data(&f) + off, n) != CM_OK)
			exit(1);
		off += n;
	}
	cm_buf_deinit(&f);
}

static void submit(uint64_t id, const char *text, uint32_t max_tokens, int chat, uint8_t salt)
{
	struct proto_msg m;
	struct proto_submit *s = &m.u.submit;
	static struct proto_message msgs[4] = {
		{ { "system", 6 }, { "be brief", 8 }, { NULL, 0 }, { NULL, 0 } },
		{ { "user", 4 }, { "hello <|im_end|> there", 22 }, { NULL, 0 }, { NULL, 0 } },
		{ { "assistant", 9 }, { "", 0 }, { "[{\"id\":\"a\",\"name\":\"f\",\"arguments\":{}}]", 38 },
		  { NULL, 0 } },
		{ { "tool", 4 }, { "7", 1 }, { NULL, 0 }, { "a", 1 } },
	};

	memset(&m, 0, sizeof(m));
	m.type = PROTO_SUBMIT;
	m.request_id = id;
	m.flags = PROTO_SUBMIT_F_ADD_BOS | PROTO_SUBMIT_F_HAS_SEED;
	s->tenant_id.ptr = "t";
	s->tenant_id.len = 1;
	memset(s->cache_salt, salt, 32);
	s->max_tokens = max_tokens;
	s->sampling.temperature = 0.7f;
	s->sampling.top_k = 40;
	s->sampling.top_p = 0.9f;
	s->sampling.repeat_penalty = 1.1f;
	s->sampling.repeat_last_n = 64;
	s->sampling.seed = id;
	if (chat == 2) {
		/* tools, a call and its result, a forced call (version 4) */
		s->prompt_kind = PROTO_PROMPT_CHAT;
		s->n_messages = 4;
		s->messages = msgs;
		s->tools.ptr = "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
			       "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}}}]";
		s->tools.len = (uint32_t)strlen(s->tools.ptr);
		s->tool_choice = id % 2 ? PROTO_TOOLS_REQUIRED : PROTO_TOOLS_AUTO;
		s->parallel_tool_calls = 1;
		s->think = PROTO_THINK_ON;
		s->think_budget = id % 2 ? 3 : 0; /* version 5 */
	} else if (chat) {
		s->prompt_kind = PROTO_PROMPT_CHAT;
		s->n_messages = 2;
		s->messages = msgs;
		/* structured output with logprobs (version 3) */
		s->constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
		s->constraint.ptr = "{\"type\":\"object\",\"properties\":{\"a\":{\"enum\":[1,\"x\"]}}}";
		s->constraint.len = (uint32_t)strlen(s->constraint.ptr);
		s->top_logprobs = 2;
		m.flags |= PROTO_SUBMIT_F_LOGPROBS;
		/* thinking first, then the constraint (the fuzzer's model thinks) */
		s->think = id % 2 ? PROTO_THINK_ON : PROTO_THINK_DEFAULT;
		s->think_budget = 2;
	} else {
		if (id % 2) {
			s->constraint_kind = PROTO_CONSTRAINT_GRAMMAR;
			s->constraint.ptr = "root ::= [a-z]+ (\" \" [a-z]+)*";
			s->constraint.len = (uint32_t)strlen(s->constraint.ptr);
		}
		s->prompt_kind = PROTO_PROMPT_TEXT;
		s->text.ptr = text;
		s->text.len = (uint32_t)strlen(text);
	}
	frame(&m);
}

/* EMBED of n inputs (text, then ids), flags (TRUNCATE), dimensions */
static void embed(uint64_t id, uint32_t n, const char *text, uint32_t n_ids, uint32_t flags,
		  uint32_t dims)
{
	static uint32_t ids[600];
	struct proto_embed_input in[8];
	struct proto_msg m;

	for (uint32_t i = 0; i < 600; i++)
		ids[i] = 5 + i % 100;
	for (uint32_t i = 0; i < n && i < 8; i++)
		in[i] = i % 2 == 0 || !n_ids
				? (struct proto_embed_input){ PROTO_INPUT_TEXT,
							      { text, (uint32_t)strlen(text) }, 0, NULL }
				: (struct proto_embed_input){ PROTO_INPUT_TOKENS, { "", 0 }, n_ids, ids };
	memset(&m, 0, sizeof(m));
	m.type = PROTO_EMBED;
	m.flags = flags;
	m.request_id = id;
	m.u.embed.tenant_id = (struct proto_str){ "t", 1 };
	m.u.embed.model = (struct proto_str){ "tiny", 4 };
	m.u.embed.dimensions = dims;
	m.u.embed.n_inputs = n < 8 ? n : 8;
	m.u.embed.inputs = in;
	frame(&m);
}

static void simple(uint16_t type, uint64_t id)
{
	struct proto_msg m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.request_id = id;
	if (type == PROTO_PING)
		m.u.ping.nonce = 9;
	frame(&m);
}

static void save(const char *dir, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(cm_buf_data(&out), 1, cm_buf_len(&out), f) != cm_buf_len(&out)) {
		perror(path);
		exit(1);
	}
	fclose(f);
	cm_buf_reset(&out);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen DIR\n");
		return 2;
	}
	cm_buf_init(&out, 1 << 20);
	submit(1, "the quick brown fox", 8, 0, 1);
	save(argv[1], "submit_text");
	submit(1, "", 4, 1, 2);
	save(argv[1], "submit_chat");
	submit(1, "", 24, 2, 2);
	submit(2, "", 8, 2, 2);
	save(argv[1], "submit_tools");
	submit(1, "a long prompt that will be cancelled after a while", 50, 0, 3);
	simple(PROTO_CANCEL, 1);
	save(argv[1], "submit_cancel");
	submit(1, "shared prefix shared prefix shared prefix", 4, 0, 4);
	submit(2, "shared prefix shared prefix shared prefix", 4, 0, 4);
	submit(3, "shared prefix shared prefix shared prefix", 4, 0, 5);
	save(argv[1], "prefix_two_tenants");
	simple(PROTO_PING, 0);
	simple(PROTO_DRAIN, 0);
	submit(7, "after drain", 4, 0, 1);
	save(argv[1], "ping_drain");
	submit(1, "x", 100000, 0, 1);
	save(argv[1], "too_long");
	for (uint64_t i = 1; i <= 12; i++)
		submit(i, "many at once fill the queue and the cache", 20, (int)(i % 2), (uint8_t)i);
	save(argv[1], "many");
	embed(1, 3, "hello world", 4, 0, 0);
	embed(2, 1, "", 0, 0, 0);
	save(argv[1], "embed");
	embed(1, 2, "x", 600, PROTO_EMBED_F_TRUNCATE, 16);
	embed(2, 2, "x", 600, 0, 0);
	save(argv[1], "embed_truncate");
	embed(1, 8, "a sentence to embed, and another one", 30, 0, 0);
	simple(PROTO_CANCEL, 1);
	embed(2, 8, "a sentence to embed", 30, 0, 0);
	save(argv[1], "embed_cancel");
	cm_buf_deinit(&out);
	return 0;
}
