/*
 * model_grammar.c - `sluice-model grammar --vocab MODEL.gguf FILE...`: the
 * structured-output engine measured on MaskBench files as they are
 * ({"schema", "tests": [{"valid", "data"}]}).
 *
 * Per file: the schema is compiled (JSON Schema -> grammar -> matcher);
 * each test instance is serialised as compact JSON, tokenized with the
 * model's tokenizer and fed token by token: at every step the full mask
 * over the vocabulary is computed (and timed) and the next token must be
 * in it; at the end an end-of-generation token must be.  One JSON line per
 * file on stdout, a summary object as the last line, and a table by folder
 * prefix (the name before "---" or before a trailing _N) on stderr.
 * One thread.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "tools/model_cli.h"
#include "worker/grammar/mask.h"
#include "worker/grammar/schema.h"
#include "worker/model/gguf.h"
#include "worker/text/tokenizer.h"

struct times {
	double *v;
	size_t n, cap;
};

static int times_add(struct times *t, double x)
{
	if (t->n == t->cap) {
		size_t c = t->cap ? 2 * t->cap : 4096;
		double *v = realloc(t->v, c * sizeof(*v));
		if (!v)
			return -1;
		t->v = v;
		t->cap = c;
	}
	t->v[t->n++] = x;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(struct times *t, double p)
{
	if (!t->n)
		return 0;
	size_t i = (size_t)(p * (double)(t->n - 1) + 0.5);
	return t->v[i];
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

struct group {
	char name[64];
	unsigned schemas, passing, compile_errors, valid_rejected, invalid_accepted;
};

struct run {
	struct wk_tok *tok;
	struct wk_vtrie *trie;
	struct wk_mask_pool *pool;
	struct times mask_us, compile_ms;
	unsigned schemas, passing, compile_errors, valid_rejected, invalid_accepted, inconsistent;
	struct group groups[64];
	size_t n_groups;
	int32_t *ids;
	size_t cap_ids;
	uint32_t *bits;
};

static struct group *group_of(struct run *r, const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char name[64];
	size_t n = 0;
	const char *dash = strstr(base, "---");
	if (dash) {
		n = (size_t)(dash - base);
	} else {
		const char *us = strrchr(base, '_');
		n = us ? (size_t)(us - base) : strlen(base);
	}
	if (n >= sizeof(name))
		n = sizeof(name) - 1;
	memcpy(name, base, n);
	name[n] = 0;
	for (size_t i = 0; i < r->n_groups; i++)
		if (!strcmp(r->groups[i].name, name))
			return &r->groups[i];
	if (r->n_groups == 64)
		return &r->groups[63];
	struct group *g = &r->groups[r->n_groups++];
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	return g;
}

/* -1: accepted; else the index of the first refused token (n: EOS refused). */
static long feed(struct run *r, struct wk_gm *m, struct wk_mask *k, const int32_t *ids, size_t n,
		 const char *path)
{
	int32_t s = wk_gm_start(m);
	for (size_t i = 0; i <= n; i++) {
		struct wk_mask_stats a, z;
		wk_mask_get_stats(k, &a);
		double t0 = now_us();
		if (wk_mask_fill(k, s, r->bits) != CM_OK)
			return (long)i;
		double t1 = now_us();
		wk_mask_get_stats(k, &z);
		if (getenv("SLUICE_GRAMMAR_SLOW") && t1 - t0 > 500)
			fprintf(stderr, "slow mask %.0f us: %s walks %llu groups %llu remainders %llu\n", t1 - t0, path,
				(unsigned long long)(z.walks - a.walks), (unsigned long long)(z.groups - a.groups),
				(unsigned long long)(z.remainders - a.remainders));
		if (times_add(&r->mask_us, t1 - t0))
			return (long)i;
		int32_t id = i < n ? ids[i] : -1;
		if (i == n) {
			int acc = wk_gm_accepting(m, s);
			return acc ? -1 : (long)n;
		}
		int in_mask = (r->bits[id >> 5] >> (id & 31)) & 1;
		int allowed = wk_mask_allows(k, s, id);
		if (in_mask != allowed)
			r->inconsistent++;
		if (!in_mask)
			return (long)i;
		s = wk_mask_advance(k, s, id);
		if (s < 0)
			return (long)i;
	}
	return -1;
}

static void one_file(struct run *r, const char *path)
{
	json_error_t je;
	json_t *doc = json_load_file(path, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
	struct group *g = group_of(r, path);
	struct wk_gram_b *b = NULL;
	struct wk_gram *gram = NULL;
	struct wk_gm *m = NULL;
	struct wk_mask *k = NULL;
	char err[512] = "";
	json_t *line = json_object();
	json_object_set_new(line, "file", json_string(path));
	r->schemas++;
	g->schemas++;
	if (!doc || !json_is_object(doc) || !json_object_get(doc, "schema")) {
		snprintf(err, sizeof(err), "not a MaskBench file: %s", doc ? "no \"schema\"" : je.text);
		goto compile_error;
	}
	double t0 = now_us();
	struct wk_gram_limits lim;
	wk_gram_limits_default(&lim);
	b = wk_gram_b_new(&lim);
	uint32_t root = 0;
	enum cm_status st = b ? wk_schema_compile(b, json_object_get(doc, "schema"), NULL, &root, err, sizeof(err))
			      : CM_ENOMEM;
	if (st == CM_OK)
		st = wk_gram_build(b, root, &gram, err, sizeof(err));
	if (st == CM_OK && !(m = wk_gm_new(gram, NULL)))
		st = cm_fail(err, sizeof(err), CM_ENOMEM, "matcher: out of memory");
	if (st == CM_OK && !(k = wk_mask_new(m, r->trie, 512u << 20, r->pool)))
		st = cm_fail(err, sizeof(err), CM_ENOMEM, "mask: out of memory");
	/* compile-time warming of the first walks (SLUICE_GRAMMAR_WARM_MS, default 20) */
	const char *wm = getenv("SLUICE_GRAMMAR_WARM_MS");
	long warm_ms = wm ? strtol(wm, NULL, 10) : 20;
	if (st == CM_OK && warm_ms > 0 && wk_mask_warm(k, (int64_t)warm_ms * 1000000) != CM_OK)
		st = cm_fail(err, sizeof(err), CM_ELIMIT, "mask: warming ran out of room");
	double compile_ms = (now_us() - t0) / 1e3;
	if (st != CM_OK)
		goto compile_error;
	times_add(&r->compile_ms, compile_ms);
	json_object_set_new(line, "compiled", json_true());
	json_object_set_new(line, "compile_ms", json_real(compile_ms));
	json_t *tests = json_object_get(doc, "tests"), *out_tests = json_array();
	int pass = 1;
	for (size_t i = 0; i < json_array_size(tests); i++) {
		json_t *t = json_array_get(tests, i);
		int valid = json_is_true(json_object_get(t, "valid"));
		char *text = json_dumps(json_object_get(t, "data"), JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
		size_t len = text ? strlen(text) : 0, n = 0;
		if (text && len + 16 > r->cap_ids) {
			free(r->ids);
			r->cap_ids = len + 16;
			r->ids = malloc(r->cap_ids * sizeof(int32_t));
		}
		long at = -2;
		if (text && r->ids && wk_tok_encode(r->tok, text, len, 0, r->ids, r->cap_ids, &n) == CM_OK)
			at = feed(r, m, k, r->ids, n, path);
		if (getenv("SLUICE_GRAMMAR_DEBUG") && at >= 0 && text) {
			size_t off = 0, pl = 0;
			for (long q = 0; q < at && (size_t)q < n; q++) {
				wk_vtrie_piece(r->trie, r->ids[q], &pl);
				off += pl;
			}
			fprintf(stderr, "%s: %s instance refused at byte %zu: [%.*s] | [%s]\n", path,
				valid ? "valid" : "invalid", off, (int)off, text, text + off);
		}
		free(text);
		json_t *o = json_object();
		json_object_set_new(o, "valid", json_boolean(valid));
		json_object_set_new(o, "accepted", json_boolean(at == -1));
		if (at >= 0)
			json_object_set_new(o, "rejected_at", json_integer(at));
		json_object_set_new(o, "tokens", json_integer((json_int_t)n));
		json_array_append_new(out_tests, o);
		if (valid && at != -1) {
			r->valid_rejected++;
			g->valid_rejected++;
			pass = 0;
		}
		if (!valid && at == -1) {
			r->invalid_accepted++;
			g->invalid_accepted++;
			pass = 0;
		}
	}
	json_object_set_new(line, "tests", out_tests);
	json_object_set_new(line, "passing", json_boolean(pass));
	json_object_set_new(line, "states", json_integer(wk_gm_n_states(m)));
	if (pass) {
		r->passing++;
		g->passing++;
	}
	goto out;
compile_error:
	r->compile_errors++;
	g->compile_errors++;
	json_object_set_new(line, "compiled", json_false());
	json_object_set_new(line, "error", json_string(err));
out: {
	char *s = json_dumps(line, JSON_COMPACT);
	if (s)
		puts(s);
	free(s);
}
	json_decref(line);
	json_decref(doc);
	wk_mask_free(k);
	wk_gm_free(m);
	wk_gram_free(gram);
	wk_gram_b_free(b);
}

int model_cmd_grammar(int argc, char **argv)
{
	const char *vocab = NULL;
	int first = 0;
	char err[ERR_LEN];
	if (argc >= 2 && !strcmp(argv[0], "--vocab")) {
		vocab = argv[1];
		first = 2;
	}
	if (!vocab || first >= argc) {
		model_usage(stderr);
		return 2;
	}
	struct run r;
	memset(&r, 0, sizeof(r));
	struct wk_gguf *gg = NULL;
	if (wk_gguf_open(vocab, &gg, err, sizeof(err)) != CM_OK ||
	    wk_tok_new_from_gguf(gg, &r.tok, err, sizeof(err)) != CM_OK ||
	    wk_vtrie_new(r.tok, &r.trie, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "sluice-model grammar: %s: %s\n", vocab, err);
		wk_gguf_close(gg);
		wk_tok_free(r.tok);
		return 1;
	}
	wk_gguf_close(gg);
	if (!getenv("SLUICE_GRAMMAR_NO_POOL"))
		r.pool = wk_mask_pool_new(512u << 20);
	r.bits = calloc((wk_vtrie_n_vocab(r.trie) + 31) / 32 + 1, sizeof(uint32_t));
	if (!r.bits)
		return 1;
	for (int i = first; i < argc; i++)
		one_file(&r, argv[i]);
	qsort(r.mask_us.v, r.mask_us.n, sizeof(double), cmp_d);
	qsort(r.compile_ms.v, r.compile_ms.n, sizeof(double), cmp_d);
	fprintf(stderr, "%-24s %8s %8s %8s %8s %8s\n", "prefix", "schemas", "passing", "compile", "valid-", "invalid+");
	for (size_t i = 0; i < r.n_groups; i++) {
		struct group *g = &r.groups[i];
		fprintf(stderr, "%-24s %8u %8u %8u %8u %8u\n", g->name, g->schemas, g->passing,
			g->compile_errors, g->valid_rejected, g->invalid_accepted);
	}
	fprintf(stderr, "%-24s %8u %8u %8u %8u %8u  (vocabulary %zu tokens, trie %zu nodes, %zu masks)\n", "all",
		r.schemas, r.passing, r.compile_errors, r.valid_rejected, r.invalid_accepted,
		wk_vtrie_n_vocab(r.trie), wk_vtrie_n_nodes(r.trie), r.mask_us.n);
	printf("{\"schemas\":%u,\"passing\":%u,\"compile_errors\":%u,\"valid_rejected\":%u,"
	       "\"invalid_accepted\":%u,\"mask_us_p50\":%.1f,\"mask_us_p95\":%.1f,\"mask_us_p99\":%.1f,"
	       "\"mask_us_max\":%.1f,\"compile_ms_p50\":%.2f,\"compile_ms_p99\":%.2f,\"masks\":%zu,"
	       "\"inconsistent\":%u}\n",
	       r.schemas, r.passing, r.compile_errors, r.valid_rejected, r.invalid_accepted,
	       pct(&r.mask_us, 0.5), pct(&r.mask_us, 0.95), pct(&r.mask_us, 0.99),
	       r.mask_us.n ? r.mask_us.v[r.mask_us.n - 1] : 0.0, pct(&r.compile_ms, 0.5),
	       pct(&r.compile_ms, 0.99), r.mask_us.n, r.inconsistent);
	free(r.mask_us.v);
	free(r.compile_ms.v);
	free(r.ids);
	free(r.bits);
	wk_mask_pool_free(r.pool);
	wk_vtrie_free(r.trie);
	wk_tok_free(r.tok);
	return 0;
}
