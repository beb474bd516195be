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

int wk_cli_generate(int argc, char **argv)
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
	const char *model_path = NULL, *prompt = NULL, *system = NULL, *tmpl = NULL;
	int chat = 0, threads = 0, ignore_eos = 0, c;
	uint32_t max_tokens = 128, ctx = 0;
	struct wk_gen_params gp;
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };
	struct wk_backend *be = NULL;
	struct wk_kv *kv = NULL;
	struct wk_sched *sched = NULL;
	struct gen_run run;
	int32_t *toks = NULL;
	uint32_t n_toks = 0, bt = 16, n_blocks;
	char err[1024] = "";
	int rc = 1;
	int64_t t0;

	memset(&gp, 0, sizeof(gp));
	memset(&run, 0, sizeof(run));
	wk_sampler_params_default(&gp.sampling);
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model_path = optarg; break;
		case 'p': prompt = optarg; break;
		case 'c': chat = 1; break;
		case 'S': system = optarg; break;
		case 'n': max_tokens = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': gp.sampling.temperature = strtof(optarg, NULL); break;
		case 'k': gp.sampling.top_k = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'P': gp.sampling.top_p = strtof(optarg, NULL); break;
		case 'M': gp.sampling.min_p = strtof(optarg, NULL); break;
		case 'r': gp.sampling.repeat_penalty = strtof(optarg, NULL); break;
		case 's':
			gp.sampling.seed = strtoull(optarg, NULL, 10);
			gp.sampling.has_seed = true;
			break;
		case 'T': threads = atoi(optarg); break;
		case 'C': ctx = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'L': tmpl = optarg; break;
		case 'E': ignore_eos = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!model_path || !prompt || max_tokens == 0) {
		usage(stderr);
		return 2;
	}
	if (threads <= 0)
		threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	gp.ignore_eos = ignore_eos;
	t0 = cm_mono_ns();
	mo.chat_template = tmpl;
	if (wk_model_load(model_path, &mo, &m, err, sizeof(err)) != CM_OK)
		goto out;
	if (ctx == 0 || ctx > m->hp.n_ctx_train)
		ctx = m->hp.n_ctx_train;
	if (chat) {
		struct wk_chat_msg msgs[2];
		size_t n = 0;

		if (system) {
			msgs[n].role = "system";
			msgs[n].content = system;
			msgs[n].content_len = strlen(system);
			n++;
		}
		msgs[n].role = "user";
		msgs[n].content = prompt;
		msgs[n].content_len = strlen(prompt);
		n++;
		if (wk_prompt_encode(m, NULL, 0, msgs, n, tmpl, 1, ctx, &toks, &n_toks, err,
				     sizeof(err)) != CM_OK)
			goto out;
	} else if (wk_prompt_encode(m, prompt, strlen(prompt), NULL, 0, NULL, 1, ctx, &toks,
				    &n_toks, err, sizeof(err)) != CM_OK) {
		goto out;
	}
	if (n_toks == 0) {
		int32_t bos = wk_tok_bos(m->tok);

		if (bos < 0) {
			snprintf(err, sizeof(err), "empty prompt and the model has no BOS token");
			goto out;
		}
		toks[0] = bos; /* start from BOS alone, as llama.cpp does */
		n_toks = 1;
	}
	if ((uint64_t)n_toks + max_tokens > ctx) {
		snprintf(err, sizeof(err), "prompt of %u tokens plus --max-tokens %u exceeds the context of %u tokens",
			 n_toks, max_tokens, ctx);
		goto out;
	}
	n_blocks = (n_toks + max_tokens + bt - 1) / bt + 1;
	if (wk_cpu_backend_create(m, n_blocks, bt, threads, WK_Q_F16, &be, err, sizeof(err)) != CM_OK)
		goto out;
	kv = wk_kv_new(n_blocks, bt);
	run.ws = wk_sampler_ws_new(m->hp.n_vocab);
	if (!kv || !run.ws) {
		snprintf(err, sizeof(err), "out of memory");
		goto out;
	}
	if (wk_gen_new(m, &gp, &run.gen, err, sizeof(err)) != CM_OK ||
	    wk_gen_accept_prompt(run.gen, toks, n_toks) != CM_OK)
		goto out;
	{
		struct wk_sched_config sc = { 1, 512, ctx, m->hp.n_vocab };
		static const struct wk_sched_cb cbs = { run_sample, run_emit, run_done };
		uint8_t salt[32] = { 0 };
		struct wk_seq_params sp = { 1, NULL, salt, toks, n_toks, max_tokens, 0 };
		struct wk_seq *q;
		int64_t load_ns = cm_mono_ns() - t0;
		const uint8_t *text;
		size_t len;
		double pe, ev;

		sched = wk_sched_new(&sc, be, kv, &cbs, &run);
		if (!sched || wk_sched_submit(sched, &sp, &q) != CM_OK) {
			snprintf(err, sizeof(err), "cannot start the generation");
			goto out;
		}
		while (!wk_sched_idle(sched)) {
			enum cm_status st = wk_sched_step(sched);

			if (st != CM_OK && st != CM_AGAIN) {
				snprintf(err, sizeof(err), "forward pass failed: %s", cm_status_str(st));
				goto out;
			}
		}
		wk_gen_finish(run.gen, &text, &len);
		if (len)
			fwrite(text, 1, len, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		pe = run.tm.prefill_ns / 1e9;
		ev = run.tm.decode_ns / 1e9;
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
			load_ns / 1e9, run.n_prompt, pe, pe > 0 ? run.n_prompt / pe : 0.0,
			run.n_gen, ev, ev > 0 && run.n_gen > 1 ? (run.n_gen - 1) / ev : 0.0,
			(cm_mono_ns() - t0) / 1e9, (unsigned long long)wk_gen_seed(run.gen));
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
