/*
 * cli_generate.c - `sluice-worker generate`: one prompt, one completion,
 * through the same scheduler, backend and text pipeline as the server.
 *
 * stdout: only the completion text, streamed as it is produced.
 * stderr: Ollama-style counts and durations (load, prompt eval, eval,
 * tokens/s).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "worker/engine/backend.h"
#include "worker/serve/cli.h"
#include "worker/cpu/backend.h"
#include "worker/engine/gen.h"
#include "worker/engine/kv.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"
#include "worker/engine/sampler.h"
#include "worker/engine/sched.h"
#include "worker/text/tokenizer.h"

struct gen_run {
	struct wk_gen *gen;
	struct wk_sampler_ws *ws;
	enum wk_seq_end end;
	uint32_t n_prompt, n_gen, n_cached;
	struct wk_seq_timing tm;
};

static int32_t run_sample(void *owner, struct wk_seq *q, const float *logits,
			  const int32_t *hist, uint32_t n_hist, float *lp)
{
	struct gen_run *g = owner;

	(void)q; (void)hist; (void)n_hist;
	return wk_gen_sample(g->gen, g->ws, logits, lp);
}

static int run_emit(void *owner, struct wk_seq *q, int32_t tok, float lp, const float *logits)
{
	struct gen_run *g = owner;
	const uint8_t *text;
	size_t len;
	int stop = wk_gen_push(g->gen, tok, logits, &text, &len);

	(void)q; (void)lp;
	if (len) {
		fwrite(text, 1, len, stdout);
		fflush(stdout);
	}
	return stop;
}

static void run_done(void *owner, struct wk_seq *q, enum wk_seq_end end)
{
	struct gen_run *g = owner;

	g->end = end;
	g->n_prompt = wk_seq_n_prompt(q);
	g->n_gen = wk_seq_n_generated(q);
	g->n_cached = wk_seq_n_cached(q);
	g->tm = *wk_seq_timing(q);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sluice-worker generate --model PATH --prompt TEXT [--chat] [--system TEXT]\n"
		"         [--max-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]\n"
		"         [--repeat-penalty R] [--seed S] [--threads N] [--ctx N] [--template NAME]\n"
		"         [--ignore-eos]\n");
}

/* The command line, parsed. */
struct gen_args {
	const char *model_path, *prompt, *system, *tmpl;
	int chat, threads;
	uint32_t max_tokens, ctx;
	struct wk_gen_params gp;
};

/* 0 parsed, 1 --help printed, 2 a usage error (printed). */
static int gen_parse(int argc, char **argv, struct gen_args *a)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "prompt", required_argument, NULL, 'p' },
		{ "chat", no_argument, NULL, 'c' },
		{ "system", required_argument, NULL, 'S' },
		{ "max-tokens", required_argument, NULL, 'n' },
		{ "temperature", required_argument, NULL, 't' },
		{ "top-k", required_argument, NULL, 'k' },
		{ "top-p", required_argument, NULL, 'P' },
		{ "min-p", required_argument, NULL, 'M' },
		{ "repeat-penalty", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 'T' },
		{ "ctx", required_argument, NULL, 'C' },
		{ "template", required_argument, NULL, 'L' },
		{ "ignore-eos", no_argument, NULL, 'E' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	memset(a, 0, sizeof(*a));
	a->max_tokens = 128;
	wk_sampler_params_default(&a->gp.sampling);
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': a->model_path = optarg; break;
		case 'p': a->prompt = optarg; break;
		case 'c': a->chat = 1; break;
		case 'S': a->system = optarg; break;
		case 'n': a->max_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': a->gp.sampling.temperature = strtof(optarg, NULL); break;
		case 'k': a->gp.sampling.top_k = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'P': a->gp.sampling.top_p = strtof(optarg, NULL); break;
		case 'M': a->gp.sampling.min_p = strtof(optarg, NULL); break;
		case 'r': a->gp.sampling.repeat_penalty = strtof(optarg, NULL); break;
		case 's':
			a->gp.sampling.seed = strtoull(optarg, NULL, 10);
			a->gp.sampling.has_seed = true;
			break;
		case 'T': a->threads = atoi(optarg); break;
		case 'C': a->ctx = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'L': a->tmpl = optarg; break;
		case 'E': a->gp.ignore_eos = 1; break;
		case 'h': usage(stdout); return 1;
		default: usage(stderr); return 2;
		}
	}
	if (!a->model_path || !a->prompt || a->max_tokens == 0) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/* The prompt's tokens (chat template applied with --chat), at least one. */
static enum cm_status gen_prompt(const struct gen_args *a, const struct wk_model *m,
				 int32_t **toks, uint32_t *n_toks, char *err, size_t err_len)
{
	enum cm_status st;

	if (a->chat) {
		struct wk_chat_msg msgs[2] = { { 0 }, { 0 } };
		size_t n = 0;

		if (a->system) {
			msgs[n].role = "system";
			msgs[n].content = a->system;
			msgs[n].content_len = strlen(a->system);
			n++;
		}
		msgs[n].role = "user";
		msgs[n].content = a->prompt;
		msgs[n].content_len = strlen(a->prompt);
		n++;
		st = wk_prompt_encode(m, NULL, 0, msgs, n, a->tmpl, 1, a->ctx, toks, n_toks, err,
				      err_len);
	} else {
		st = wk_prompt_encode(m, a->prompt, strlen(a->prompt), NULL, 0, NULL, 1, a->ctx,
				      toks, n_toks, err, err_len);
	}
	if (st != CM_OK)
		return st;
	if (*n_toks == 0) {
		int32_t bos = wk_tok_bos(m->tok);

		if (bos < 0) {
			snprintf(err, err_len, "empty prompt and the model has no BOS token");
			return CM_EINVAL;
		}
		(*toks)[0] = bos; /* start from BOS alone, as llama.cpp does */
		*n_toks = 1;
	}
	if ((uint64_t)*n_toks + a->max_tokens > a->ctx) {
		snprintf(err, err_len, "prompt of %u tokens plus --max-tokens %u exceeds the context of %u tokens",
			 *n_toks, a->max_tokens, a->ctx);
		return CM_ELIMIT;
	}
	return CM_OK;
}

/* Ollama's --verbose figures, on stderr. */
static void gen_report(const struct gen_run *run, int64_t load_ns, int64_t t0)
{
	double pe = run->tm.prefill_ns / 1e9, ev = run->tm.decode_ns / 1e9;

	fprintf(stderr,
		"load duration:        %.3fs\n"
		"prompt eval count:    %u token(s)\n"
		"prompt eval duration: %.3fs\n"
		"prompt eval rate:     %.2f tokens/s\n"
		"eval count:           %u token(s)\n"
		"eval duration:        %.3fs\n"
		"eval rate:            %.2f tokens/s\n"
		"total duration:       %.3fs\n"
		"seed:                 %llu\n",
		load_ns / 1e9, run->n_prompt, pe, pe > 0 ? run->n_prompt / pe : 0.0,
		run->n_gen, ev, ev > 0 && run->n_gen > 1 ? (run->n_gen - 1) / ev : 0.0,
		(cm_mono_ns() - t0) / 1e9, (unsigned long long)wk_gen_seed(run->gen));
}

/* Runs the one sequence to its end, streaming its text to stdout. */
static enum cm_status gen_run_all(struct wk_sched *sched, struct gen_run *run, char *err,
				  size_t err_len)
{
	const uint8_t *text;
	size_t len;

	while (!wk_sched_idle(sched)) {
		enum cm_status st = wk_sched_step(sched);

		if (st != CM_OK && st != CM_AGAIN) {
			snprintf(err, err_len, "forward pass failed: %s", cm_status_str(st));
			return st;
		}
	}
	wk_gen_finish(run->gen, &text, &len);
	if (len)
		fwrite(text, 1, len, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	return CM_OK;
}

int wk_cli_generate(int argc, char **argv)
{
	static const struct wk_sched_cb cbs = { run_sample, run_emit, run_done };
	struct gen_args a;
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };
	struct wk_backend *be = NULL;
	struct wk_kv *kv = NULL;
	struct wk_sched *sched = NULL;
	struct gen_run run;
	int32_t *toks = NULL;
	uint32_t n_toks = 0, bt = 16, n_blocks;
	char err[1024] = "";
	int rc;
	int64_t t0;

	rc = gen_parse(argc, argv, &a);
	if (rc != 0)
		return rc == 1 ? 0 : 2;
	rc = 1;
	memset(&run, 0, sizeof(run));
	if (a.threads <= 0)
		a.threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	t0 = cm_mono_ns();
	mo.chat_template = a.tmpl;
	mo.n_ctx = (uint32_t)a.ctx;
	if (wk_model_load(a.model_path, &mo, &m, err, sizeof(err)) != CM_OK)
		goto out;
	if (a.ctx == 0 || a.ctx > m->hp.n_ctx_train)
		a.ctx = m->hp.n_ctx_train;
	if (gen_prompt(&a, m, &toks, &n_toks, err, sizeof(err)) != CM_OK)
		goto out;
	n_blocks = (n_toks + a.max_tokens + bt - 1) / bt + 1;
	if (wk_cpu_backend_create(m, n_blocks, bt, a.threads, WK_Q_F16, &be, err, sizeof(err)) != CM_OK)
		goto out;
	kv = wk_kv_new(n_blocks, bt);
	run.ws = wk_sampler_ws_new(m->hp.n_vocab);
	if (!kv || !run.ws) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	if (wk_gen_new(m, &a.gp, &run.gen, err, sizeof(err)) != CM_OK ||
	    wk_gen_accept_prompt(run.gen, toks, n_toks) != CM_OK)
		goto out;
	{
		struct wk_sched_config sc = { 1, 512, a.ctx, m->hp.n_vocab, wk_kv_window(&m->hp) };
		uint8_t salt[32] = { 0 };
		struct wk_seq_params sp = { 1, NULL, salt, toks, n_toks, a.max_tokens, 0 };
		struct wk_seq *q;
		int64_t load_ns = cm_mono_ns() - t0;

		sched = wk_sched_new(&sc, be, kv, &cbs, &run);
		if (!sched || wk_sched_submit(sched, &sp, &q) != CM_OK) {
			snprintf(err, sizeof(err), "cannot start the generation");
			goto out;
		}
		if (gen_run_all(sched, &run, err, sizeof(err)) != CM_OK)
			goto out;
		gen_report(&run, load_ns, t0);
	}
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "sluice-worker generate: %s\n", err[0] ? err : "failed");
	wk_sched_free(sched);
	wk_gen_free(run.gen);
	wk_sampler_ws_free(run.ws);
	wk_kv_free(kv);
	if (be)
		be->ops->destroy(be);
	cm_free(toks);
	wk_model_free(m);
	return rc;
}
