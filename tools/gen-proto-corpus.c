/*
 * gen-proto-corpus.c - writes the seed corpus of tests/fuzz/fuzz_proto.c:
 * two valid frames of every message type (one typical, one minimal with
 * empty strings and zero values), a SUBMIT at the stop-string limit, and
 * two streams holding all of them, each file prefixed with the fuzzer's
 * control bytes (see fuzz_proto.c).
 *
 *   gen-proto-corpus DIR      (regenerates tests/fuzz/corpus/proto/)
 *
 * Deterministic: the same build writes the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/limits.h"
#include "proto/proto.h"

#define MAXF 65536u

static struct proto_str s_(const char *s)
{
	struct proto_str r = { s, (uint32_t)strlen(s) };

	return r;
}

static struct proto_str stop[2];
static struct proto_message chat[2];
static struct proto_token toks[3];
static const struct proto_top tops[2] = { { 9906, -0.5f, { "Hi", 2 } }, { 13347, -1.25f, { "\xe2", 1 } } };
static struct proto_str many_stop[CM_LIM_PROTO_STOP_STRINGS_HARD];
static const uint32_t emb_ids[2] = { 101, 102 };
static struct proto_embed_input emb_in[2];
static const float emb_vals[3] = { 0.6f, 0.8f, 0.0f };

/* variant 0: typical values; variant 1: minimal (empty strings, zeros). */
static void build(uint16_t type, int variant, struct proto_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	switch (type) {
	case PROTO_HELLO:
		m->u.hello.proto_version = PROTO_VERSION;
		if (variant)
			break;
		m->u.hello.worker_name = s_("w0");
		m->u.hello.model_name = s_("smol");
		memset(m->u.hello.model_sha256, 0x5A, PROTO_DIGEST_LEN);
		m->u.hello.context_len = 2048;
		m->u.hello.vocab_size = 49152;
		m->u.hello.max_seqs = 8;
		m->u.hello.kv_blocks_total = 512;
		m->u.hello.kv_block_tokens = 16;
		m->u.hello.backend = s_("cpu");
		m->u.hello.device = s_("x86-64 \xc3\x97 2");
		m->u.hello.engine_version = s_("0.1.0");
		m->u.hello.model_bytes = 1234567;
		m->u.hello.model_mtime_s = 1700000000;
		m->u.hello.architecture = s_("llama");
		m->u.hello.parameter_count = 135000000;
		m->u.hello.file_type = s_("Q8_0");
		m->u.hello.embedding_dim = 576;
		m->u.hello.generates = 1;
		break;
	case PROTO_EMBED:
		m->request_id = 2;
		emb_in[0] = (struct proto_embed_input){ PROTO_INPUT_TEXT, s_("hello"), 0, NULL };
		emb_in[1] = (struct proto_embed_input){ PROTO_INPUT_TOKENS, s_(""), 2, emb_ids };
		m->u.embed.n_inputs = variant ? 1 : 2;
		m->u.embed.inputs = emb_in;
		if (variant)
			break;
		m->flags = PROTO_EMBED_F_TRUNCATE;
		m->u.embed.tenant_id = s_("acme");
		m->u.embed.key_id = s_("k1");
		m->u.embed.model = s_("minilm");
		m->u.embed.dimensions = 2;
		break;
	case PROTO_EMBEDDING:
		m->request_id = 2;
		m->u.embedding.n_values = variant ? 1 : 3;
		m->u.embedding.values = emb_vals;
		m->u.embedding.index = variant ? 0 : 1;
		m->u.embedding.n_tokens = variant ? 0 : 7;
		break;
	case PROTO_PING:
		m->u.ping.nonce = variant ? 0 : 0x1122334455667788ull;
		break;
	case PROTO_PONG:
		m->u.pong.nonce = variant ? 0 : 0x1122334455667788ull;
		m->u.pong.ok = variant ? 0 : 1;
		m->u.pong.tokens = variant ? 0 : 2;
		m->u.pong.gen_ns = variant ? 0 : 5000000;
		break;
	case PROTO_DRAIN:
		m->u.drain.timeout_ms = variant ? 0 : 10000;
		break;
	case PROTO_ERROR:
		m->request_id = variant ? 0 : 9;
		m->u.error.code = variant ? PROTO_E_PROTOCOL : PROTO_E_TOO_LONG;
		m->u.error.message = variant ? s_("") : s_("prompt 4100 > context 4096");
		break;
	case PROTO_SUBMIT:
		m->request_id = 1;
		m->u.submit.max_tokens = 1;
		m->u.submit.sampling.top_p = 1.0f;
		m->u.submit.sampling.repeat_penalty = 1.0f;
		if (variant)
			break;
		m->flags = PROTO_SUBMIT_F_HAS_SEED | PROTO_SUBMIT_F_ADD_BOS;
		m->u.submit.tenant_id = s_("acme");
		memset(m->u.submit.cache_salt, 0xC3, PROTO_DIGEST_LEN);
		m->u.submit.key_id = s_("k1");
		m->u.submit.model = s_("smol");
		m->u.submit.klass = PROTO_CLASS_INTERACTIVE;
		m->u.submit.max_tokens = 64;
		m->u.submit.sampling.temperature = 0.8f;
		m->u.submit.sampling.top_k = 40;
		m->u.submit.sampling.top_p = 0.95f;
		m->u.submit.sampling.seed = 42;
		stop[0] = s_("\n");
		stop[1] = s_("User:");
		m->u.submit.n_stop = 2;
		m->u.submit.stop = stop;
		m->u.submit.prompt_kind = PROTO_PROMPT_CHAT;
		chat[0].role = s_("system");
		chat[0].content = s_("Be brief.");
		chat[1].role = s_("user");
		chat[1].content = s_("Gr\xc3\xbc\xc3\x9f dich");
		m->u.submit.n_messages = 2;
		m->u.submit.messages = chat;
		m->u.submit.constraint_kind = PROTO_CONSTRAINT_JSON_SCHEMA;
		m->u.submit.constraint = s_("{\"type\":\"string\"}");
		m->u.submit.top_logprobs = 2;
		break;
	case PROTO_CANCEL:
		m->request_id = 1;
		m->u.cancel.reason = variant ? PROTO_CANCEL_CLIENT_GONE
					     : PROTO_CANCEL_TIMEOUT;
		break;
	case PROTO_TOKEN:
		m->request_id = 1;
		toks[0] = (struct proto_token){ 9906, -0.5f, s_("Hi"), s_("Hi"), 2, tops, 0 };
		toks[1] = (struct proto_token){ 0, 0.0f, s_(""), s_(""), 0, NULL, 1 };
		toks[2] = (struct proto_token){ 30, -1.5f, s_("\xe2\x82\xac"), s_(""), 0, NULL, 2 };
		m->u.tokens.n = variant ? 1 : 3;
		m->u.tokens.tok = toks;
		break;
	case PROTO_DONE:
		m->request_id = 1;
		if (variant)
			break;
		m->u.done.finish = PROTO_FINISH_STOP;
		m->u.done.prompt_tokens = 20;
		m->u.done.cached_tokens = 16;
		m->u.done.gen_tokens = 5;
		m->u.done.queue_ns = 1000;
		m->u.done.prefill_ns = 2000000;
		m->u.done.decode_ns = 9000000;
		m->u.done.ttft_ns = 2100000;
		break;
	case PROTO_STATS:
		m->u.stats.n_hist = PROTO_HIST_BUCKETS;
		if (variant)
			break;
		m->u.stats.running = 2;
		m->u.stats.kv_blocks_used = 10;
		m->u.stats.kv_blocks_free = 502;
		m->u.stats.decode_tps = 40.5f;
		for (int i = 0; i < PROTO_HIST_BUCKETS; i++) {
			m->u.stats.ttft_hist[i] = (uint64_t)i;
			m->u.stats.itl_hist[i] = 2u * (uint64_t)i;
		}
		break;
	}
}

static int write_file(const char *dir, const char *name, const uint8_t *ctl,
		      size_t nctl, const struct cm_buf *frames)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "gen-proto-corpus: cannot create %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	ok = fwrite(ctl, 1, nctl, f) == nctl &&
	     fwrite(cm_buf_data(frames), 1, cm_buf_len(frames), f) ==
		     cm_buf_len(frames);
	if (fclose(f) != 0 || !ok) {
		fprintf(stderr, "gen-proto-corpus: cannot write %s\n", path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const uint16_t types[] = {
		PROTO_HELLO,  PROTO_PING,   PROTO_PONG,  PROTO_DRAIN, PROTO_ERROR,
		PROTO_SUBMIT, PROTO_CANCEL, PROTO_TOKEN, PROTO_DONE,  PROTO_STATS,
		PROTO_EMBED,  PROTO_EMBEDDING,
	};
	/* whole frames at once / 3 cycling piece sizes (1, 7, 24), max 4096 */
	static const uint8_t ctl_one[] = { 0x00 };
	static const uint8_t ctl_split[] = { 0x13, 0, 6, 23 };
	static const uint8_t ctl_bytes[] = { 0x01, 0 }; /* byte by byte */
	struct cm_buf one, all;
	struct proto_msg m;
	char name[64];
	int rc = 1;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-proto-corpus DIR\n");
		return 2;
	}
	cm_buf_init(&one, MAXF + PROTO_HEADER_LEN);
	cm_buf_init(&all, 1 << 20);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		for (int v = 0; v < 2; v++) {
			build(types[i], v, &m);
			cm_buf_reset(&one);
			if (proto_encode(&one, &m, MAXF) != CM_OK ||
			    proto_encode(&all, &m, MAXF) != CM_OK) {
				fprintf(stderr, "gen-proto-corpus: %s variant %d does "
					"not encode\n",
					proto_type_str((enum proto_type)types[i]), v);
				goto out;
			}
			snprintf(name, sizeof(name), "%s-%d",
				 proto_type_str((enum proto_type)types[i]), v);
			for (char *c = name; *c; c++)
				*c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
			if (write_file(argv[1], name, v ? ctl_split : ctl_one,
				       v ? sizeof(ctl_split) : sizeof(ctl_one), &one))
				goto out;
		}
	}
	/* at the hard limit: one mutation away from PROTO_ERR_COUNT_LIMIT */
	build(PROTO_SUBMIT, 0, &m);
	for (int i = 0; i < CM_LIM_PROTO_STOP_STRINGS_HARD; i++)
		many_stop[i] = s_(i % 2 ? "x" : "");
	m.u.submit.n_stop = CM_LIM_PROTO_STOP_STRINGS_HARD;
	m.u.submit.stop = many_stop;
	cm_buf_reset(&one);
	if (proto_encode(&one, &m, MAXF) != CM_OK ||
	    proto_encode(&all, &m, MAXF) != CM_OK ||
	    write_file(argv[1], "submit-max-stops", ctl_one, sizeof(ctl_one), &one))
		goto out;
	if (write_file(argv[1], "stream-split", ctl_split, sizeof(ctl_split), &all) ||
	    write_file(argv[1], "stream-bytes", ctl_bytes, sizeof(ctl_bytes), &all))
		goto out;
	rc = 0;
out:
	cm_buf_deinit(&one);
	cm_buf_deinit(&all);
	return rc;
}
