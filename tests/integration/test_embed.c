/*
 * test_embed.c - a real sluice-worker serving an embedding model (a
 * bert-tiny made by the real `sluice-model synth`, F32, WordPiece
 * vocabulary), driven over its socket with EMBED: HELLO says it embeds
 * and does not generate; every input gets one unit vector and the request
 * one DONE with the tokens counted; a vector does not depend on the other
 * inputs of its request nor on the requests it shares steps with (bit for
 * bit); truncation cuts to the context and equals the cut input;
 * refusals (too long, an id outside the vocabulary, dimensions, SUBMIT to
 * an embedding model, a duplicate id) each a clear ERROR while the worker
 * keeps serving; CANCEL; PING runs a real embedding.  A second worker on
 * a decoder embedder (qwen2 with last pooling) serves both: EMBED beside a
 * running generation, the vectors the same bits as alone, the generation
 * undisturbed, no KV block kept after the embedding steps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/integration/harness.h"
#include "tests/integration/pclient.h"

static struct h_proc worker;
static char sock[512];
static uint32_t dim, ctx;

static int setup(void **state)
{
	const char *model = h_model("bert-tiny", "F32", "bert");

	(void)state;
	if (!model)
		return -1;
	return h_worker_start_model(&worker, "emb", model,
				    "\"threads\": 2, \"embed_step_tokens\": 600", sock,
				    sizeof(sock));
}

static int teardown(void **state)
{
	(void)state;
	h_stop(&worker, 10000);
	h_cleanup();
	return 0;
}

static struct pc_conn *connect_worker(void)
{
	struct pc_conn *c = pc_connect(sock, 30000);
	struct pc_event ev;

	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, 30000), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	dim = ev.hello_embedding_dim;
	ctx = ev.hello_ctx;
	assert_int_equal(ev.hello_generates, 0);
	return c;
}

static void embed_init(struct proto_msg *m, uint64_t id, struct proto_embed_input *in, uint32_t n)
{
	memset(m, 0, sizeof(*m));
	m->type = PROTO_EMBED;
	m->request_id = id;
	m->u.embed.tenant_id = (struct proto_str){ "t1", 2 };
	m->u.embed.n_inputs = n;
	m->u.embed.inputs = in;
}

static struct proto_embed_input text_in(const char *t)
{
	return (struct proto_embed_input){ PROTO_INPUT_TEXT, { t, (uint32_t)strlen(t) }, 0, NULL };
}

/* What came back for several EMBED requests sent at once. */
struct emb_out {
	float v[8][PC_EMB_MAX];
	uint32_t tokens[8];
	uint8_t truncated[8];
	uint32_t got;
	struct proto_done done;
	int finished;
	uint16_t err;
	char err_msg[256];
};

/* Reads until each of the n requests (ids first_id..) has its DONE/ERROR. */
static void collect(struct pc_conn *c, uint64_t first_id, uint32_t n, struct emb_out *out)
{
	uint32_t ended = 0;
	struct pc_event ev;

	memset(out, 0, n * sizeof(*out));
	while (ended < n) {
		struct emb_out *o;

		assert_int_equal(pc_next(c, &ev, 30000), 1);
		if (ev.type == PROTO_STATS || ev.type == PROTO_PONG)
			continue;
		assert_true(ev.request_id >= first_id && ev.request_id < first_id + n);
		o = &out[ev.request_id - first_id];
		assert_int_equal(o->finished, 0);
		if (ev.type == PROTO_EMBEDDING) {
			assert_true(ev.emb_index < 8);
			assert_int_equal(ev.emb_n, dim);
			memcpy(o->v[ev.emb_index], ev.emb, dim * sizeof(float));
			o->tokens[ev.emb_index] = ev.emb_tokens;
			o->truncated[ev.emb_index] = ev.emb_truncated;
			o->got++;
		} else if (ev.type == PROTO_DONE) {
			o->done = ev.done;
			o->finished = 1;
			ended++;
		} else {
			assert_int_equal(ev.type, PROTO_ERROR);
			o->err = ev.err_code;
			snprintf(o->err_msg, sizeof(o->err_msg), "%s", ev.err_msg);
			o->finished = 1;
			ended++;
		}
	}
}

static double norm(const float *v, uint32_t n)
{
	double s = 0;

	for (uint32_t i = 0; i < n; i++)
		s += (double)v[i] * v[i];
	return sqrt(s);
}

static void test_vectors_and_invariance(void **state)
{
	struct pc_conn *c = connect_worker();
	struct proto_embed_input three[3] = { text_in("hello world"), text_in(""),
					      text_in("The quick brown fox jumps over the lazy dog.") };
	struct proto_embed_input one[1] = { text_in("The quick brown fox jumps over the lazy dog.") };
	struct proto_msg m[3];
	static struct emb_out out[3], solo[1];

	(void)state;
	assert_true(dim > 0 && dim <= PC_EMB_MAX);
	/* three inputs of one request, and alone */
	embed_init(&m[0], 10, three, 3);
	assert_int_equal(pc_send(c, &m[0]), 0);
	collect(c, 10, 1, out);
	assert_int_equal(out[0].err, 0);
	assert_int_equal(out[0].got, 3);
	assert_int_equal(out[0].done.finish, PROTO_FINISH_STOP);
	assert_int_equal(out[0].done.gen_tokens, 0);
	assert_int_equal(out[0].done.prompt_tokens,
			 out[0].tokens[0] + out[0].tokens[1] + out[0].tokens[2]);
	assert_int_equal(out[0].tokens[1], 2); /* "" is [CLS] [SEP] */
	assert_true(out[0].tokens[2] > out[0].tokens[0]);
	for (int i = 0; i < 3; i++)
		assert_true(fabs(norm(out[0].v[i], dim) - 1.0) < 1e-5);
	assert_memory_not_equal(out[0].v[0], out[0].v[2], dim * sizeof(float));
	embed_init(&m[0], 20, one, 1);
	assert_int_equal(pc_send(c, &m[0]), 0);
	collect(c, 20, 1, solo);
	assert_memory_equal(solo[0].v[0], out[0].v[2], dim * sizeof(float));
	/* three requests at once share steps: each vector the same bits */
	for (int r = 0; r < 3; r++)
		embed_init(&m[r], 30 + (uint64_t)r, r == 1 ? one : three, r == 1 ? 1 : 3);
	for (int r = 0; r < 3; r++)
		assert_int_equal(pc_send(c, &m[r]), 0);
	collect(c, 30, 3, out);
	for (int r = 0; r < 3; r++)
		assert_int_equal(out[r].err, 0);
	assert_memory_equal(out[1].v[0], solo[0].v[0], dim * sizeof(float));
	assert_memory_equal(out[0].v[2], solo[0].v[0], dim * sizeof(float));
	assert_memory_equal(out[2].v[0], out[0].v[0], dim * sizeof(float));
	pc_close(c);
}

static void test_truncation_and_refusals(void **state)
{
	struct pc_conn *c = connect_worker();
	static uint32_t ids[700];
	struct proto_embed_input in[2];
	struct proto_msg m;
	static struct emb_out o[2];

	(void)state;
	for (uint32_t i = 0; i < 700; i++)
		ids[i] = 5 + i % 200;
	/* over the context: refused, naming the input and both lengths */
	in[0] = text_in("short");
	in[1] = (struct proto_embed_input){ PROTO_INPUT_TOKENS, { "", 0 }, ctx + 10, ids };
	embed_init(&m, 40, in, 2);
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 40, 1, o);
	assert_int_equal(o[0].err, PROTO_E_TOO_LONG);
	assert_int_equal(o[0].got, 0);
	assert_non_null(strstr(o[0].err_msg, "input 1:"));
	assert_non_null(strstr(o[0].err_msg, "over the model's context"));
	/* with TRUNCATE: cut to the context, the same vector as the cut ids */
	m.flags = PROTO_EMBED_F_TRUNCATE;
	m.request_id = 41;
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 41, 1, o);
	assert_int_equal(o[0].err, 0);
	assert_int_equal(o[0].tokens[1], ctx);
	assert_int_equal(o[0].truncated[1], 1);
	assert_int_equal(o[0].truncated[0], 0);
	in[0] = (struct proto_embed_input){ PROTO_INPUT_TOKENS, { "", 0 }, ctx, ids };
	embed_init(&m, 42, in, 1);
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 42, 1, o + 1);
	assert_memory_equal(o[1].v[0], o[0].v[1], dim * sizeof(float));
	/* an id outside the vocabulary */
	ids[3] = 1u << 30;
	in[0] = (struct proto_embed_input){ PROTO_INPUT_TOKENS, { "", 0 }, 5, ids };
	embed_init(&m, 43, in, 1);
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 43, 1, o);
	assert_int_equal(o[0].err, PROTO_E_BAD_REQUEST);
	assert_non_null(strstr(o[0].err_msg, "input 0: token id 1073741824 is outside the vocabulary"));
	ids[3] = 8;
	/* dimensions: the model's own length is fine, fewer refused (not
	 * trained for it), more refused */
	in[0] = text_in("abc");
	embed_init(&m, 44, in, 1);
	m.u.embed.dimensions = dim;
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 44, 1, o);
	assert_int_equal(o[0].err, 0);
	m.request_id = 45;
	m.u.embed.dimensions = dim / 2;
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 45, 1, o);
	assert_int_equal(o[0].err, PROTO_E_BAD_REQUEST);
	assert_non_null(strstr(o[0].err_msg, "not trained for shortened vectors"));
	m.request_id = 46;
	m.u.embed.dimensions = dim + 1;
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 46, 1, o);
	assert_int_equal(o[0].err, PROTO_E_BAD_REQUEST);
	/* a generation request to an embedding model */
	{
		struct proto_msg sm;

		memset(&sm, 0, sizeof(sm));
		sm.type = PROTO_SUBMIT;
		sm.request_id = 47;
		sm.u.submit.max_tokens = 4;
		sm.u.submit.sampling.top_p = 1;
		sm.u.submit.sampling.repeat_penalty = 1;
		sm.u.submit.text = (struct proto_str){ "hi", 2 };
		assert_int_equal(pc_send(c, &sm), 0);
		collect(c, 47, 1, o);
		assert_int_equal(o[0].err, PROTO_E_BAD_REQUEST);
		assert_non_null(strstr(o[0].err_msg, "is an embedding model: it does not generate"));
	}
	/* the worker still serves */
	embed_init(&m, 48, in, 1);
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 48, 1, o);
	assert_int_equal(o[0].err, 0);
	assert_int_equal(o[0].got, 1);
	pc_close(c);
}

static void test_cancel_and_ping(void **state)
{
	struct pc_conn *c = connect_worker();
	struct proto_embed_input in[8];
	struct proto_msg m, cm, pm;
	static struct emb_out o[2];
	struct pc_event ev;
	int got_pong = 0;

	(void)state;
	for (int i = 0; i < 8; i++)
		in[i] = text_in("a sentence of a few words to embed, again and again and again");
	/* EMBED then CANCEL in one write: the worker reads both before any
	 * step, so the request ends cancelled with no vector */
	embed_init(&m, 50, in, 8);
	memset(&cm, 0, sizeof(cm));
	cm.type = PROTO_CANCEL;
	cm.request_id = 50;
	{
		struct cm_buf b;

		cm_buf_init(&b, 1 << 20);
		assert_int_equal(proto_encode(&b, &m, 1 << 20), CM_OK);
		assert_int_equal(proto_encode(&b, &cm, 1 << 20), CM_OK);
		assert_int_equal(pc_send_raw(c, cm_buf_data(&b), cm_buf_len(&b)), 0);
		cm_buf_deinit(&b);
	}
	collect(c, 50, 1, o);
	if (o[0].err)
		fail_msg("%u: %s", o[0].err, o[0].err_msg);
	assert_int_equal(o[0].done.finish, PROTO_FINISH_CANCELLED);
	assert_int_equal(o[0].got, 0);
	/* a CANCEL for an id that ended: unknown */
	assert_int_equal(pc_send(c, &cm), 0);
	collect(c, 50, 1, o);
	assert_int_equal(o[0].err, PROTO_E_UNKNOWN_REQUEST);
	/* PING: a real embedding */
	memset(&pm, 0, sizeof(pm));
	pm.type = PROTO_PING;
	pm.u.ping.nonce = 77;
	assert_int_equal(pc_send(c, &pm), 0);
	while (!got_pong) {
		assert_int_equal(pc_next(c, &ev, 30000), 1);
		if (ev.type == PROTO_PONG) {
			assert_int_equal(ev.pong.nonce, 77);
			assert_int_equal(ev.pong.ok, 1);
			got_pong = 1;
		}
	}
	pc_close(c);
}

/* worker.embed_truncatable: `dimensions` gives the first values of the
 * full vector, renormalised to unit length */
static void test_shortened_vectors(void **state)
{
	struct h_proc w3;
	char sock3[512];
	struct pc_conn *c;
	struct pc_event ev;
	struct proto_embed_input in[1] = { text_in("hello world") };
	struct proto_msg m;
	static struct emb_out full[1], short8[1];
	double s = 0;

	(void)state;
	assert_int_equal(h_worker_start_model(&w3, "trunc", h_model("bert-tiny", "F32", "bert"),
					      "\"threads\": 1, \"embed_truncatable\": true", sock3,
					      sizeof(sock3)), 0);
	c = pc_connect(sock3, 30000);
	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, 30000), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	embed_init(&m, 80, in, 1);
	assert_int_equal(pc_send(c, &m), 0);
	collect(c, 80, 1, full);
	m.request_id = 81;
	m.u.embed.dimensions = 8;
	assert_int_equal(pc_send(c, &m), 0);
	{
		/* collect() expects dim values: read this one by hand */
		int done = 0;

		while (!done) {
			assert_int_equal(pc_next(c, &ev, 30000), 1);
			if (ev.type == PROTO_EMBEDDING) {
				assert_int_equal(ev.emb_n, 8);
				memcpy(short8[0].v[0], ev.emb, 8 * sizeof(float));
			}
			done = ev.type == PROTO_DONE;
			assert_true(ev.type != PROTO_ERROR);
		}
	}
	for (int i = 0; i < 8; i++)
		s += (double)full[0].v[0][i] * full[0].v[0][i];
	s = sqrt(s);
	for (int i = 0; i < 8; i++)
		assert_true(fabs(short8[0].v[0][i] - full[0].v[0][i] / s) < 1e-6);
	assert_true(fabs(norm(short8[0].v[0], 8) - 1.0) < 1e-6);
	pc_close(c);
	h_stop(&w3, 10000);
}

/* A decoder with a pooling type: generation and embeddings on one worker. */
static void test_decoder_embedder(void **state)
{
	char model[600], cmd[1400], dsock[512];
	struct h_proc w2;
	struct pc_conn *c;
	struct pc_event ev;
	struct proto_embed_input in[3] = { text_in("hello world"), text_in("a b c d e f g"),
					   text_in("x") };
	struct proto_msg m, sm;
	static struct emb_out alone[3], both[2];
	uint32_t saved_dim;
	int got_tokens = 0, sub_done = 0, emb_done = 0;

	(void)state;
	snprintf(model, sizeof(model), "%s/qwen2-last.gguf", h_tmpdir());
	snprintf(cmd, sizeof(cmd), "%s synth --preset tiny --arch qwen2 --type Q8_0 --seed 5 "
		 "--pooling last -o %s >/dev/null", h_bin("tools/sluice-model"), model);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(h_worker_start_model(&w2, "dec", model, "\"threads\": 2, "
					      "\"kv_cache_bytes\": \"8MiB\"", dsock, sizeof(dsock)), 0);
	c = pc_connect(dsock, 30000);
	assert_non_null(c);
	assert_int_equal(pc_next(c, &ev, 30000), 1);
	assert_int_equal(ev.type, PROTO_HELLO);
	assert_int_equal(ev.hello_generates, 1);
	assert_int_equal(ev.hello_embedding_dim, 256);
	saved_dim = dim;
	dim = 256;
	/* each input alone */
	for (uint32_t i = 0; i < 3; i++) {
		embed_init(&m, 60 + i, in + i, 1);
		assert_int_equal(pc_send(c, &m), 0);
		collect(c, 60 + i, 1, alone + i);
		assert_int_equal(alone[i].err, 0);
		assert_true(fabs(norm(alone[i].v[0], dim) - 1.0) < 1e-5);
	}
	/* a long generation, and the three inputs in one EMBED while it runs */
	memset(&sm, 0, sizeof(sm));
	sm.type = PROTO_SUBMIT;
	sm.request_id = 70;
	sm.flags = PROTO_SUBMIT_F_IGNORE_EOS;
	sm.u.submit.max_tokens = 40;
	sm.u.submit.sampling.top_p = 1;
	sm.u.submit.sampling.repeat_penalty = 1;
	sm.u.submit.text = (struct proto_str){ "once upon a time", 16 };
	assert_int_equal(pc_send(c, &sm), 0);
	embed_init(&m, 71, in, 3);
	assert_int_equal(pc_send(c, &m), 0);
	memset(both, 0, sizeof(both));
	while (!sub_done || !emb_done) {
		assert_int_equal(pc_next(c, &ev, 30000), 1);
		if (ev.type == PROTO_TOKEN && ev.request_id == 70) {
			got_tokens += (int)ev.n_ids;
		} else if (ev.type == PROTO_DONE && ev.request_id == 70) {
			assert_int_equal(ev.done.gen_tokens, 40);
			sub_done = 1;
		} else if (ev.type == PROTO_EMBEDDING && ev.request_id == 71) {
			assert_true(ev.emb_index < 3);
			assert_memory_equal(ev.emb, alone[ev.emb_index].v[0], dim * sizeof(float));
			both[0].got++;
		} else if (ev.type == PROTO_DONE && ev.request_id == 71) {
			assert_int_equal(both[0].got, 3);
			emb_done = 1;
		} else {
			assert_true(ev.type == PROTO_STATS || ev.type == PROTO_PONG);
		}
	}
	assert_true(got_tokens >= 40);
	/* the embedding steps kept no KV block: the next STATS shows only the
	 * generation's cached prefix, nothing in use */
	do {
		assert_int_equal(pc_next(c, &ev, 30000), 1);
	} while (ev.type != PROTO_STATS);
	assert_int_equal(ev.stats.kv_blocks_used, 0);
	dim = saved_dim;
	pc_close(c);
	h_stop(&w2, 10000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vectors_and_invariance),
		cmocka_unit_test(test_truncation_and_refusals),
		cmocka_unit_test(test_cancel_and_ping),
		cmocka_unit_test(test_decoder_embedder),
		cmocka_unit_test(test_shortened_vectors),
	};

	return cmocka_run_group_tests_name("it_embed", tests, setup, teardown);
}
