/*
 * test_encoder.c - the CPU encoder (worker/cpu/encoder.h) against a
 * double-precision reference written here from BERT's definition, on
 * bert-tiny models made by the real `sluice-model synth` (F32 and Q8_0):
 * the embedding of several inputs (one token, a sentence with [CLS] and
 * [SEP], 40 tokens), by cosine similarity and relative L2 of the unit
 * vectors (F32: 1e-5; Q8_0, whose activations the matmul rounds to 8 bits:
 * cosine >= 0.999); the vector is a unit vector; mean and CLS pooling; the
 * same input gives the same bits on 1 and 2 threads; refusals; and the
 * vectors llama.cpp computes on the same files and prompts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/cpu/backend.h"
#include "worker/cpu/encoder.h"
#include "worker/engine/backend.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/pool.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"
#include "worker/text/tokenizer.h"

#define TMPDIR_PREFIX "sluice-enc"
#include "tests/worker/tmpdir.h"

static struct wk_model *load_arch(const char *arch, const char *type)
{
	const char *bd = getenv("SLUICE_BUILD_DIR");
	char path[512], cmd[1024], err[256];
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };

	snprintf(path, sizeof(path), "%s/%s-%s.gguf", tmpdir, arch, type);
	if (access(path, R_OK) != 0) {
		snprintf(cmd, sizeof(cmd), "%s/tools/sluice-model synth --preset bert-tiny --arch %s "
			 "--type %s --seed 3 -o %s", bd ? bd : ".", arch, type, path);
		assert_int_equal(system(cmd), 0);
	}
	if (wk_model_load(path, &mo, &m, err, sizeof(err)) != CM_OK)
		fail_msg("load %s: %s", path, err);
	return m;
}

static struct wk_model *load(const char *type)
{
	return load_arch("bert", type);
}

static double *deq(const struct wk_tensor *t, uint64_t row)
{
	float *f = malloc(t->cols * sizeof(float));
	double *d = malloc(t->cols * sizeof(double));

	wk_dequantize_row(t->type, (const uint8_t *)t->data + row * t->row_bytes, f, t->cols);
	for (uint64_t i = 0; i < t->cols; i++)
		d[i] = f[i];
	free(f);
	return d;
}

/* y (rows) = W x + b */
static void ref_mv(const struct wk_tensor *w, const struct wk_tensor *b, const double *x,
		   double *y)
{
	double *bias = deq(b, 0);

	for (uint64_t r = 0; r < w->rows; r++) {
		double *row = deq(w, r), acc = 0;

		for (uint64_t c = 0; c < w->cols; c++)
			acc += row[c] * x[c];
		y[r] = acc + bias[r];
		free(row);
	}
	free(bias);
}

static void ref_ln(double *x, const struct wk_tensor *w, const struct wk_tensor *b, uint32_t n,
		   double eps)
{
	double mean = 0, var = 0, *g = deq(w, 0), *bb = deq(b, 0);

	for (uint32_t i = 0; i < n; i++)
		mean += x[i];
	mean /= n;
	for (uint32_t i = 0; i < n; i++)
		var += (x[i] - mean) * (x[i] - mean);
	var /= n;
	for (uint32_t i = 0; i < n; i++)
		x[i] = (x[i] - mean) / sqrt(var + eps) * g[i] + bb[i];
	free(g);
	free(bb);
}

/* the reference embedding of toks[0..n) into out[embd] */
static void ref_encode(const struct wk_model *m, const int32_t *toks, uint32_t n, double *out)
{
	const struct wk_hparams *hp = &m->hp;
	const struct wk_mcfg *c = m->cfg;
	uint32_t e = hp->n_embd, hd = hp->head_dim, f = hp->n_ff;
	double *x = calloc((size_t)n * e, sizeof(double)), *q = calloc((size_t)n * e, sizeof(double));
	double *k = calloc((size_t)n * e, sizeof(double)), *v = calloc((size_t)n * e, sizeof(double));
	double *a = calloc((size_t)n * e, sizeof(double)), *h = calloc((size_t)n * f, sizeof(double));
	double *o = calloc(e, sizeof(double)), *sc = calloc(n, sizeof(double)), norm = 0;

	for (uint32_t t = 0; t < n; t++) {
		double *te = deq(&m->tok_embd, (uint64_t)toks[t]), *ty = deq(&c->tok_types, 0);
		double *pe = deq(&c->pos_embd, t);

		for (uint32_t i = 0; i < e; i++)
			x[(size_t)t * e + i] = te[i] + ty[i] + pe[i];
		ref_ln(x + (size_t)t * e, &c->embd_norm, &c->embd_norm_b, e, hp->norm_eps);
		free(te); free(ty); free(pe);
	}
	for (uint32_t l = 0; l < hp->n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];

		for (uint32_t t = 0; t < n; t++) {
			ref_mv(&L->wq, &L->bq, x + (size_t)t * e, q + (size_t)t * e);
			ref_mv(&L->wk, &L->bk, x + (size_t)t * e, k + (size_t)t * e);
			ref_mv(&L->wv, &L->bv, x + (size_t)t * e, v + (size_t)t * e);
		}
		for (uint32_t hh = 0; hh < hp->n_head; hh++)
			for (uint32_t i = 0; i < n; i++) {
				double mx = -INFINITY, sum = 0;

				for (uint32_t j = 0; j < n; j++) {
					double d = 0;

					for (uint32_t cc = 0; cc < hd; cc++)
						d += q[(size_t)i * e + hh * hd + cc] * k[(size_t)j * e + hh * hd + cc];
					sc[j] = d / sqrt((double)hd);
					mx = sc[j] > mx ? sc[j] : mx;
				}
				for (uint32_t j = 0; j < n; j++)
					sum += sc[j] = exp(sc[j] - mx);
				for (uint32_t cc = 0; cc < hd; cc++) {
					double acc = 0;

					for (uint32_t j = 0; j < n; j++)
						acc += sc[j] / sum * v[(size_t)j * e + hh * hd + cc];
					a[(size_t)i * e + hh * hd + cc] = acc;
				}
			}
		for (uint32_t t = 0; t < n; t++) {
			double *xt = x + (size_t)t * e, *ht = h + (size_t)t * f;

			ref_mv(&L->wo, &L->bo, a + (size_t)t * e, o);
			for (uint32_t i = 0; i < e; i++)
				xt[i] += o[i];
			ref_ln(xt, &L->ln_attn, &L->ln_attn_b, e, hp->norm_eps);
			ref_mv(&L->w_up, &L->b_up, xt, ht);
			for (uint32_t i = 0; i < f; i++) /* GELU, tanh form */
				ht[i] = 0.5 * ht[i] * (1 + tanh(0.7978845608028654 *
							      (ht[i] + 0.044715 * ht[i] * ht[i] * ht[i])));
			ref_mv(&L->w_down, &L->b_down, ht, o);
			for (uint32_t i = 0; i < e; i++)
				xt[i] += o[i];
			ref_ln(xt, &L->ln_out, &L->ln_out_b, e, hp->norm_eps);
		}
	}
	memset(out, 0, e * sizeof(double));
	for (uint32_t t = 0; t < n; t++)
		if (hp->pooling == WK_POOL_MEAN || (hp->pooling == WK_POOL_CLS && t == 0) ||
		    (hp->pooling == WK_POOL_LAST && t == n - 1))
			for (uint32_t i = 0; i < e; i++)
				out[i] += x[(size_t)t * e + i] / (hp->pooling == WK_POOL_MEAN ? n : 1);
	for (uint32_t i = 0; i < e; i++)
		norm += out[i] * out[i];
	for (uint32_t i = 0; i < e; i++)
		out[i] /= sqrt(norm);
	free(x); free(q); free(k); free(v); free(a); free(h); free(o); free(sc);
}

/* cosine of the engine's vector and the reference's; *l2 their relative L2 */
static double compare(const float *got, const double *ref, uint32_t e, double *l2)
{
	double dot = 0, ng = 0, nr = 0, d = 0;

	for (uint32_t i = 0; i < e; i++) {
		dot += got[i] * ref[i];
		ng += (double)got[i] * got[i];
		nr += ref[i] * ref[i];
		d += (got[i] - ref[i]) * (got[i] - ref[i]);
	}
	*l2 = sqrt(d / nr);
	assert_true(fabs(sqrt(ng) - 1.0) < 1e-5); /* a unit vector */
	return dot / sqrt(ng * nr);
}

static void check_type(const char *type, double min_cos, double max_l2)
{
	struct wk_model *m = load(type);
	struct wk_pool *p1 = NULL, *p2 = NULL;
	struct wk_cpu_mm *mm1 = NULL, *mm2 = NULL;
	uint32_t e = m->hp.n_embd, V = m->hp.n_vocab;
	int32_t toks[40];
	float *got = malloc(e * sizeof(float)), *got2 = malloc(e * sizeof(float));
	double *ref = malloc(e * sizeof(double)), worst_cos = 1, worst_l2 = 0;
	static const uint32_t lens[] = { 1, 7, 40 };

	assert_int_equal(wk_pool_new(1, &p1), CM_OK);
	assert_int_equal(wk_pool_new(2, &p2), CM_OK);
	assert_int_equal(wk_cpu_mm_new(p1, &mm1), CM_OK);
	assert_int_equal(wk_cpu_mm_new(p2, &mm2), CM_OK);
	for (uint32_t i = 0; i < 40; i++)
		toks[i] = (int32_t)(i == 0 ? 2 : (i * 37 + 11) % V);
	toks[6] = 3; /* [CLS] ... [SEP] for the 7-token input */
	for (size_t c = 0; c < sizeof(lens) / sizeof(lens[0]); c++) {
		double l2, cs;

		assert_int_equal(wk_cpu_encode(mm2, m, toks, lens[c], got), CM_OK);
		assert_int_equal(wk_cpu_encode(mm1, m, toks, lens[c], got2), CM_OK);
		assert_memory_equal(got, got2, e * sizeof(float)); /* 1 and 2 threads */
		ref_encode(m, toks, lens[c], ref);
		cs = compare(got, ref, e, &l2);
		worst_cos = cs < worst_cos ? cs : worst_cos;
		worst_l2 = l2 > worst_l2 ? l2 : worst_l2;
	}
	printf("# bert-tiny %s: worst cosine %.9f, relative L2 %.3g (limits %.6f, %.3g)\n", type,
	       worst_cos, worst_l2, min_cos, max_l2);
	assert_true(worst_cos >= min_cos);
	assert_true(worst_l2 <= max_l2);
	/* refusals: no tokens, past the positions, an id outside the vocabulary */
	assert_int_equal(wk_cpu_encode(mm1, m, toks, 0, got), CM_EINVAL);
	toks[3] = (int32_t)V;
	assert_int_equal(wk_cpu_encode(mm1, m, toks, 4, got), CM_EINVAL);
	toks[3] = -1;
	assert_int_equal(wk_cpu_encode(mm1, m, toks, 4, got), CM_EINVAL);
	wk_cpu_mm_free(mm1);
	wk_cpu_mm_free(mm2);
	wk_pool_free(p1);
	wk_pool_free(p2);
	free(got);
	free(got2);
	free(ref);
	wk_model_free(m);
}

static void test_f32(void **s) { (void)s; check_type("F32", 0.99999, 1e-5); }
static void test_q8_0(void **s) { (void)s; check_type("Q8_0", 0.999, 5e-2); }

/* CLS pooling: the first position's state, against the reference */
static void test_cls_pooling(void **state)
{
	struct wk_model *m = load("F32");
	struct wk_pool *p = NULL;
	struct wk_cpu_mm *mm = NULL;
	int32_t toks[5] = { 2, 40, 41, 42, 3 };
	float got[256];
	double ref[256], l2;

	(void)state;
	assert_true(m->hp.n_embd <= 256);
	m->hp.pooling = WK_POOL_CLS;
	assert_int_equal(wk_pool_new(2, &p), CM_OK);
	assert_int_equal(wk_cpu_mm_new(p, &mm), CM_OK);
	assert_int_equal(wk_cpu_encode(mm, m, toks, 5, got), CM_OK);
	ref_encode(m, toks, 5, ref);
	assert_true(compare(got, ref, m->hp.n_embd, &l2) > 0.99999);
	assert_true(l2 < 1e-5);
	wk_cpu_mm_free(mm);
	wk_pool_free(p);
	wk_model_free(m);
}

/*
 * Batch invariance: three inputs of different lengths in one
 * wk_cpu_encode_batch give, each, the bits wk_cpu_encode gives for it
 * alone (bert and nomic-bert, whose RoPE positions restart per input; F32
 * and Q8_0, whose activation quantisation is per row), in either order;
 * a bad input anywhere refuses the whole batch.
 */
static void test_batch_invariance(void **state)
{
	static const char *const types[] = { "F32", "Q8_0" };

	(void)state;
	for (int ti = 0; ti < 4; ti++) {
		struct wk_model *m = load_arch(ti < 2 ? "bert" : "nomic-bert", types[ti % 2]);
		struct wk_pool *p = NULL;
		struct wk_cpu_mm *mm = NULL;
		int32_t toks[64], rev[64];
		uint32_t lens[3] = { 1, 40, 7 }, rlens[3] = { 7, 40, 1 }, e = m->hp.n_embd;
		float alone[3][256], batch[3 * 256], rbatch[3 * 256];
		uint32_t off = 0;

		assert_true(e <= 256);
		for (int i = 0; i < 48; i++)
			toks[i] = 2 + (i * 37) % (int32_t)(m->hp.n_vocab - 2);
		assert_int_equal(wk_pool_new(2, &p), CM_OK);
		assert_int_equal(wk_cpu_mm_new(p, &mm), CM_OK);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(wk_cpu_encode(mm, m, toks + off, lens[i], alone[i]), CM_OK);
			off += lens[i];
		}
		assert_int_equal(wk_cpu_encode_batch(mm, m, 3, toks, lens, batch), CM_OK);
		memcpy(rev, toks + 41, 7 * sizeof(int32_t));
		memcpy(rev + 7, toks + 1, 40 * sizeof(int32_t));
		rev[47] = toks[0];
		assert_int_equal(wk_cpu_encode_batch(mm, m, 3, rev, rlens, rbatch), CM_OK);
		for (int i = 0; i < 3; i++) {
			assert_memory_equal(batch + i * e, alone[i], e * sizeof(float));
			assert_memory_equal(rbatch + (2 - i) * e, alone[i], e * sizeof(float));
		}
		toks[45] = (int32_t)m->hp.n_vocab;
		assert_int_equal(wk_cpu_encode_batch(mm, m, 3, toks, lens, batch), CM_EINVAL);
		lens[1] = 0;
		assert_int_equal(wk_cpu_encode_batch(mm, m, 3, toks, lens, batch), CM_EINVAL);
		wk_cpu_mm_free(mm);
		wk_pool_free(p);
		wk_model_free(m);
	}
}

/*
 * Against llama.cpp (c392e50's llama-embedding on the same synthesized
 * files, the prompts below, L2-normalised, mean pooling;
 * tests/worker/model/llamacpp/README.md): our WordPiece ids and encoder
 * give vectors of cosine >= 0.9999 (F32) and >= 0.999 (Q8_0) to its.
 */
static void vs_llamacpp(const char *arch, const char *fixture)
{
	static const char *const prompts[] = {
		"hello world", "The quick brown fox jumps over the lazy dog.",
		"Caf\xc3\xa9 na\xc3\xafve, state-of-the-art: 42!", "a",
	};
	static const char *const types[] = { "F32", "Q8_0" };
	const char *src = getenv("SLUICE_SOURCE_DIR");
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/worker/model/llamacpp/%s", src ? src : ".", fixture);
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	for (size_t ti = 0; ti < 2; ti++) {
		struct wk_model *m = load_arch(arch, types[ti]);
		struct wk_pool *p = NULL;
		struct wk_cpu_mm *mm = NULL;
		uint32_t e = m->hp.n_embd;
		double worst = 1;

		assert_int_equal(wk_pool_new(2, &p), CM_OK);
		assert_int_equal(wk_cpu_mm_new(p, &mm), CM_OK);
		for (size_t pi = 0; pi < sizeof(prompts) / sizeof(prompts[0]); pi++) {
			int32_t ids[128];
			size_t n = 0;
			float got[256];
			double ref[256], l2, cs;

			assert_true(e <= 256);
			for (uint32_t i = 0; i < e; i++)
				assert_int_equal(fscanf(f, "%lf", &ref[i]), 1);
			assert_int_equal(wk_tok_encode(m->tok, prompts[pi], strlen(prompts[pi]),
						       WK_TOK_ADD_BOS | WK_TOK_ADD_EOS, ids, 128, &n),
					 CM_OK);
			assert_int_equal(wk_cpu_encode(mm, m, ids, (uint32_t)n, got), CM_OK);
			cs = compare(got, ref, e, &l2);
			worst = cs < worst ? cs : worst;
		}
		printf("# %s (bert-tiny shape) %s vs llama.cpp: worst cosine %.9f\n", arch, types[ti],
		       worst);
		assert_true(worst >= (ti == 0 ? 0.9999 : 0.999));
		wk_cpu_mm_free(mm);
		wk_pool_free(p);
		wk_model_free(m);
	}
	fclose(f);
}

static void test_vs_llamacpp(void **state)
{
	(void)state;
	vs_llamacpp("bert", "bert-tiny-embeddings.txt");
	vs_llamacpp("nomic-bert", "nomic-tiny-embeddings.txt");
}

/*
 * Decoder embedders (a causal model with a pooling type: Qwen3-Embedding,
 * gte-Qwen2 pool the last token): the cpu backend's embed op on qwen2 with
 * last pooling and llama with mean pooling (tiny, synthesized with
 * --pooling), against llama.cpp's llama-embedding --pooling on the same
 * files and prompts (decoder-embeddings.txt): cosine >= 0.9999 (F32) /
 * 0.999 (Q8_0); the four prompts in one call give the bits each gets alone.
 */
static void test_decoder_pooling(void **state)
{
	static const char *const prompts[] = {
		"hello world", "The quick brown fox jumps over the lazy dog.",
		"Caf\xc3\xa9 na\xc3\xafve, state-of-the-art: 42!", "a",
	};
	static const char *const files[][3] = {
		{ "qwen2", "F32", "last" }, { "qwen2", "Q8_0", "last" },
		{ "llama", "F32", "mean" }, { "llama", "Q8_0", "mean" },
	};
	const char *src = getenv("SLUICE_SOURCE_DIR"), *bd = getenv("SLUICE_BUILD_DIR");
	char path[1024], cmd[2048], err[256];
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/tests/worker/model/llamacpp/decoder-embeddings.txt",
		 src ? src : ".");
	f = fopen(path, "r");
	if (!f)
		fail_msg("cannot open %s", path);
	for (size_t fi = 0; fi < 4; fi++) {
		struct wk_model *m = NULL;
		struct wk_model_opts mo = { 0 };
		struct wk_backend *be = NULL;
		int32_t ids[4][128], all[512];
		uint32_t lens[4], blocks[64];
		size_t n;
		static float got[4][256], batch[4 * 256];
		double ref[256], l2, worst = 1;
		uint32_t e, off = 0;

		snprintf(path, sizeof(path), "%s/demb-%s-%s.gguf", tmpdir, files[fi][0], files[fi][1]);
		snprintf(cmd, sizeof(cmd), "%s/tools/sluice-model synth --preset tiny --arch %s --type %s "
			 "--seed 3 --pooling %s -o %s >/dev/null", bd ? bd : ".", files[fi][0],
			 files[fi][1], files[fi][2], path);
		assert_int_equal(system(cmd), 0);
		if (wk_model_load(path, &mo, &m, err, sizeof(err)) != CM_OK)
			fail_msg("load %s: %s", path, err);
		e = m->hp.n_embd;
		assert_true(e <= 256);
		assert_int_equal(wk_cpu_backend_create(m, 64, 16, 2, WK_Q_F16, &be, err, sizeof(err)),
				 CM_OK);
		for (uint32_t i = 0; i < 64; i++)
			blocks[i] = i;
		for (size_t pi = 0; pi < 4; pi++) {
			assert_int_equal(wk_tok_encode(m->tok, prompts[pi], strlen(prompts[pi]),
						       WK_TOK_ADD_BOS | WK_TOK_ADD_EOS, ids[pi], 128,
						       &n), CM_OK);
			lens[pi] = (uint32_t)n;
			memcpy(all + off, ids[pi], n * sizeof(int32_t));
			off += (uint32_t)n;
			assert_int_equal(be->ops->embed(be, 1, ids[pi], &lens[pi], blocks, got[pi]),
					 CM_OK);
			for (uint32_t i = 0; i < e; i++)
				assert_int_equal(fscanf(f, "%lf", &ref[i]), 1);
			{
				double cs = compare(got[pi], ref, e, &l2);

				worst = cs < worst ? cs : worst;
			}
		}
		printf("# %s %s pooling %s vs llama.cpp: worst cosine %.9f\n", files[fi][0],
		       files[fi][1], files[fi][2], worst);
		assert_true(worst >= (fi % 2 == 0 ? 0.9999 : 0.999));
		/* all four in one call: each its own bits */
		assert_int_equal(be->ops->embed(be, 4, all, lens, blocks, batch), CM_OK);
		for (int pi = 0; pi < 4; pi++)
			assert_memory_equal(batch + pi * e, got[pi], e * sizeof(float));
		/* no blocks for a decoder, an empty input: refused */
		assert_int_equal(be->ops->embed(be, 1, all, lens, NULL, batch), CM_EINVAL);
		lens[0] = 0;
		assert_int_equal(be->ops->embed(be, 1, all, lens, blocks, batch), CM_EINVAL);
		be->ops->destroy(be);
		wk_model_free(m);
	}
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32),
		cmocka_unit_test(test_q8_0),
		cmocka_unit_test(test_cls_pooling),
		cmocka_unit_test(test_batch_invariance),
		cmocka_unit_test(test_decoder_pooling),
		cmocka_unit_test(test_vs_llamacpp),
	};

	return cmocka_run_group_tests_name("worker/encoder", tests, tmpdir_setup, tmpdir_teardown);
}
