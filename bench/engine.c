/*
 * engine.c - `bench-engine`: prefill and decode speed of the CPU engine on
 * a GGUF model, beside the memory-bandwidth bound.
 *
 *   bench-engine --model PATH [--threads N] [--prompt 128] [--gen 64] [--reps 3]
 *                [--expert-cache DIR|off]
 *
 * A mixture's experts are read from the cache file a worker keeps
 * (worker.expert_cache_dir, worker/cpu/expert_cache.h; by default the
 * worker's default directory, built there when missing), or with `off` from the model's
 * mapping as the file has them.
 *
 * Prints one line per model: parameters, weight type mix, threads, ISA,
 * prefill tokens/s (one batch of --prompt tokens), decode tokens/s (batch
 * 1, --gen steps after the prompt), measured read bandwidth and the decode
 * bound = bandwidth / the bytes a step reads: the weights (of a mixture
 * of experts the active bytes, the chosen experts' and the rest) and the
 * KV cache of the positions attended to, and the fraction reached.  Medians of
 * --reps runs; the bandwidth probe runs after each repetition's decode and
 * each decode's share is taken against the probe beside it (the bound
 * printed is the best probe).  Then each repetition decodes its --gen
 * steps again, each step followed by one pass of every probe loop over as
 * many bytes as it read, on the backend's own pool (bw_pacer): decode's
 * share of the passes beside each step, median and spread over all steps,
 * is the share that holds the machine's minute-to-minute swings constant.
 * "cpu share" is the process's CPU time over wall time x
 * threads during the phase: the machine is shared, and a share well under
 * 100% means the figure is the neighbours' as much as ours.  The batch is driven straight through the backend (no
 * sampling, no text), so this measures the forward pass alone.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common/alloc.h"
#include "bench/bwprobe.h"
#include "common/clock.h"
#include "worker/engine/backend.h"
#include "worker/cpu/backend.h"
#include "worker/cpu/expert_cache.h"
#include "worker/cpu/matmul.h"
#include "worker/engine/kv.h"
#include "worker/model/model.h"
#include "worker/model/quant.h"

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* CPU seconds (user + system) of this process so far. */
static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void type_mix(const struct wk_model *m, char *out, size_t len)
{
	uint64_t bytes[WK_Q_COUNT_] = { 0 };
	size_t o = 0;

	for (uint32_t l = 0; l < m->hp.n_layer; l++) {
		const struct wk_layer *L = &m->layers[l];
		const struct wk_tensor *ts[] = { &L->wq, &L->wk, &L->wv, &L->wo,
						 &L->w_gate, &L->w_up, &L->w_down,
						 &L->exp_gate, &L->exp_up, &L->exp_down };
		/* an expert view is one expert's matrix: times the experts */
		uint64_t n_exp = m->hp.n_expert ? m->hp.n_expert : 1;

		for (size_t i = 0; i < 10; i++)
			if (ts[i]->data)
				bytes[ts[i]->type] += ts[i]->rows * ts[i]->row_bytes *
						      (ts[i]->expert_stride ? n_exp : 1);
	}
	bytes[m->output.type] += m->output.rows * m->output.row_bytes;
	out[0] = '\0';
	for (int t = 0; t < WK_Q_COUNT_; t++)
		if (bytes[t])
			o += (size_t)snprintf(out + o, len - o, "%s%s:%.0f%%", o ? "," : "",
					      wk_qtype_name((uint32_t)t),
					      100.0 * bytes[t] / (double)m->weight_bytes);
}

static double kv_step_bytes(const struct wk_hparams *hp, uint32_t p);

/*
 * The paired phase of a repetition: the decode steps again (the same
 * tokens at the same positions), each followed by one pass of every probe
 * loop over as many bytes as the step read, on the backend's own pool;
 * per step its bytes/s over the best pass's.
 */
struct pair_run {
	struct bw_pacer *pacer;
	double weights;          /* bytes a step reads besides the KV cache */
	const struct wk_hparams *hp;
	double *share, *step_s, *bw; /* appended, n of them */
	int n;
};

/* The decode step of token toks[p] at position p (batch b's one sequence). */
static enum cm_status decode_step(struct wk_backend *be, struct wk_batch *b, const int32_t *toks,
				  uint32_t p, float *logits)
{
	const uint32_t out_row = 0;

	b->tokens = toks + p;
	b->pos = &p;
	b->n_tokens = 1;
	b->out = &out_row;
	return be->ops->forward(be, b, logits);
}

/*
 * One repetition on a fresh backend: a prefill of n_prompt tokens, then
 * n_gen decode steps; tokens/s and cpu shares into the four outputs; then
 * the paired phase into *pr.  0, or -1 with a message on stderr.
 */
static const char *xcache_dir; /* --expert-cache; NULL: off */

static int run_rep(const struct wk_model *m, int threads, int n_prompt, int n_gen, double *pf,
		   double *pf_share, double *dc, double *dc_share, struct pair_run *pr)
{
	const uint32_t bt = 16;
	const uint32_t n_blocks = (uint32_t)(n_prompt + n_gen + (int)bt) / bt + 1;
	struct wk_backend *be = NULL;
	uint32_t *blocks = calloc(n_blocks, sizeof(uint32_t));
	int32_t *toks = calloc((size_t)n_prompt + n_gen, sizeof(int32_t));
	uint32_t *pos = calloc((size_t)n_prompt, sizeof(uint32_t));
	uint32_t *seq = calloc((size_t)n_prompt, sizeof(uint32_t));
	float *logits = malloc((size_t)m->hp.n_vocab * sizeof(float));
	struct wk_batch_seq s;
	struct wk_batch b;
	uint32_t out_row;
	int64_t t0;
	double c0;
	char err[512] = "";
	int rc = -1;

	if (!blocks || !toks || !pos || !seq || !logits) {
		fprintf(stderr, "bench-engine: out of memory\n");
		goto out;
	}
	{
		struct wk_backend_params p = {
			.n_blocks = n_blocks, .block_tokens = bt, .n_threads = threads,
			.kv_type = WK_Q_F16, .cpu_expert_cache = xcache_dir,
		};
		struct wk_backend_info bi;

		if (wk_cpu_backend_ops.create(m, &p, &be, err, sizeof(err)) != CM_OK) {
			fprintf(stderr, "bench-engine: %s\n", err);
			goto out;
		}
		be->ops->info(be, &bi);
		if (bi.expert_cache_error[0])
			fprintf(stderr, "bench-engine: %s (the experts are read as the file has them)\n",
				bi.expert_cache_error);
		else if (bi.expert_cache_bytes && bi.expert_cache_built)
			fprintf(stderr, "bench-engine: wrote the expert cache %s (%.2f GiB in %.2f s)\n",
				bi.expert_cache_path, bi.expert_cache_bytes / 1073741824.0,
				bi.expert_cache_build_ns / 1e9);
	}
	for (uint32_t i = 0; i < n_blocks; i++)
		blocks[i] = i;
	for (int i = 0; i < n_prompt + n_gen; i++)
		toks[i] = (int32_t)((i * 7919 + 13) % m->hp.n_vocab);
	for (int i = 0; i < n_prompt; i++)
		pos[i] = (uint32_t)i;
	s.blocks = blocks;
	s.n_blocks = n_blocks;
	b.tokens = toks;
	b.pos = pos;
	b.seq = seq;
	b.n_seqs = 1;
	b.seqs = &s;
	b.n_tokens = (uint32_t)n_prompt;
	b.n_out = 1;
	out_row = (uint32_t)n_prompt - 1;
	b.out = &out_row;
	t0 = cm_mono_ns();
	c0 = cpu_seconds();
	if (be->ops->forward(be, &b, logits) != CM_OK)
		goto out;
	*pf = n_prompt / ((cm_mono_ns() - t0) / 1e9);
	*pf_share = (cpu_seconds() - c0) / ((cm_mono_ns() - t0) / 1e9) / threads;
	t0 = cm_mono_ns();
	c0 = cpu_seconds();
	for (int g = 0; g < n_gen; g++)
		if (decode_step(be, &b, toks, (uint32_t)(n_prompt + g), logits) != CM_OK)
			goto out;
	*dc = n_gen / ((cm_mono_ns() - t0) / 1e9);
	*dc_share = (cpu_seconds() - c0) / ((cm_mono_ns() - t0) / 1e9) / threads;
	for (int g = 0; g < n_gen; g++) {
		uint32_t p = (uint32_t)(n_prompt + g);
		double step, pass;

		t0 = cm_mono_ns();
		if (decode_step(be, &b, toks, p, logits) != CM_OK)
			goto out;
		step = (cm_mono_ns() - t0) / 1e9;
		pass = bw_pacer_pass(pr->pacer, wk_cpu_backend_pool(be));
		pr->step_s[pr->n] = step;
		pr->bw[pr->n] = pass;
		pr->share[pr->n] = (pr->weights + kv_step_bytes(pr->hp, p)) / step / pass;
		pr->n++;
	}
	rc = 0;
out:
	if (be)
		be->ops->destroy(be);
	free(blocks);
	free(toks);
	free(pos);
	free(seq);
	free(logits);
	return rc;
}

/*
 * Bytes of K and V the decode step at position p reads (kv_step_bytes),
 * and their average over the --gen steps (kv_read_bytes: positions
 * n_prompt .. n_prompt + n_gen - 1): per layer the positions
 * its attention sees (a windowed layer's window, else all up to the
 * step's own), each n_head_kv x head_dim halves of K and as many of V
 * (the F16 cache run_rep creates).  Part of what a step must stream: for
 * phi3-1b (32 KV heads of 64, 24 layers) 192 KiB a position, 4 % of the
 * weights at 160 positions.
 */
static double kv_step_bytes(const struct wk_hparams *hp, uint32_t p)
{
	double sum = 0;

	for (uint32_t l = 0; l < hp->n_layer; l++) {
		uint32_t swa = wk_layer_swa(hp, l);
		uint32_t n = swa && p >= swa ? swa : p + 1;

		sum += (double)n * 2.0 * hp->n_head_kv * hp->head_dim * 2.0;
	}
	return sum;
}

static double kv_read_bytes(const struct wk_hparams *hp, int n_prompt, int n_gen)
{
	double sum = 0;

	for (int g = 0; g < n_gen; g++)
		sum += kv_step_bytes(hp, (uint32_t)(n_prompt + g));
	return sum / n_gen;
}

int main(int argc, char **argv)
{
	const char *path = NULL, *xdir_arg = NULL;
	char xdir_buf[4096];
	int threads = 2, n_prompt = 128, n_gen = 64, reps = 3;
	struct wk_model *m = NULL;
	struct wk_model_opts mo = { 0 };
	char err[512] = "", mix[128];
	double pf[16], dc[16], pf_share[16], dc_share[16], bwp[16], share[16], bw = 0;
	double load[3] = { -1, -1, -1 };
	struct bw_result bwr = { 0 }, bwr_r;
	struct utsname un;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--model") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--prompt") && i + 1 < argc)
			n_prompt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gen") && i + 1 < argc)
			n_gen = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--expert-cache") && i + 1 < argc)
			xdir_arg = argv[++i];
		else {
			fprintf(stderr, "usage: bench-engine --model PATH [--threads N] [--prompt N] [--gen N] [--reps N] [--expert-cache DIR|off]\n");
			return 2;
		}
	}
	if (!path || reps < 1 || reps > 16 || n_prompt < 1 || n_gen < 1) {
		fprintf(stderr, "usage: bench-engine --model PATH [--threads N] [--prompt N] [--gen N] [--reps N] [--expert-cache DIR|off]\n");
		return 2;
	}
	if (!(xdir_arg && strcmp(xdir_arg, "off") == 0) &&
	    wk_cpu_xcache_dir(xdir_arg, xdir_buf, sizeof(xdir_buf)) == 0)
		xcache_dir = xdir_buf;
	if (wk_model_load(path, &mo, &m, err, sizeof(err)) != CM_OK) {
		fprintf(stderr, "bench-engine: %s\n", err);
		return 1;
	}
	/* a decode step streams every weight but the embedding table (one
	 * row), unless the output projection is that table (tied); of a
	 * mixture of experts only the chosen experts (the active bytes); and
	 * the K and V of the positions it attends to */
	const double weights = (double)m->cfg->active_weight_bytes -
			       (m->output.data == m->tok_embd.data
					? 0.0
					: (double)m->tok_embd.rows * m->tok_embd.row_bytes);
	const double kv = kv_read_bytes(&m->hp, n_prompt, n_gen);
	const double streamed = weights + kv;
	struct pair_run pr = { .weights = weights, .hp = &m->hp };
	const size_t n_pairs = (size_t)reps * (size_t)n_gen;

	pr.share = calloc(n_pairs, sizeof(double));
	pr.step_s = calloc(n_pairs, sizeof(double));
	pr.bw = calloc(n_pairs, sizeof(double));
	if (!pr.share || !pr.step_s || !pr.bw ||
	    bw_pacer_new((size_t)streamed, threads, &pr.pacer) != 0) {
		fprintf(stderr, "bench-engine: the paired probe's buffer could not be had\n");
		goto fail;
	}
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	for (int r = 0; r < reps; r++) {
		if (run_rep(m, threads, n_prompt, n_gen, &pf[r], &pf_share[r], &dc[r], &dc_share[r],
			    &pr) != 0)
			goto fail;
		/* the probe right after this repetition's decode: the machine's
		 * bandwidth moves by 2x within minutes here, so each decode is
		 * held to the bandwidth measured beside it */
		if (bw_probe(threads, 5, &bwr_r) != 0) {
			fprintf(stderr, "bench-engine: the bandwidth probe could not run\n");
			goto fail;
		}
		bwp[r] = bwr_r.bound;
		share[r] = dc[r] * streamed / bwr_r.bound;
		if (bwr_r.bound > bw) {
			bw = bwr_r.bound;
			bwr = bwr_r;
		}
	}
	type_mix(m, mix, sizeof(mix));
	uname(&un);
	{
		double p = median(pf, reps), d = median(dc, reps);
		double bound = bw / streamed, over = 0;

		for (int r = 0; r < reps; r++)
			over = share[r] > over ? share[r] : over;

		printf("model=%s params=%.2fB weights=%.2fGiB types=%s threads=%d isa=%s host=%s/%ld-cpu\n",
		       m->name, m->n_params / 1e9, m->weight_bytes / 1073741824.0, mix, threads,
		       wk_cpu_isa_name(wk_cpu_isa_default()), un.machine,
		       sysconf(_SC_NPROCESSORS_ONLN));
		if (m->hp.n_expert)
			printf("experts: %u of %u active per token: %.3fB active parameters, "
			       "%.2f GB of active weights (the bound below is on these); "
			       "expert cache %s\n",
			       m->hp.n_expert_used, m->hp.n_expert, m->cfg->n_params_active / 1e9,
			       m->cfg->active_weight_bytes / 1e9, xcache_dir ? xcache_dir : "off");
		printf("load average %.2f (1 min) before the first repetition\n", load[0]);
		printf("prefill(%d tokens): %.1f tokens/s (cpu share %.0f%%)\n", n_prompt, p,
		       100.0 * median(pf_share, reps));
		printf("decode(batch 1, %d steps): %.2f tokens/s (cpu share %.0f%%, %.1f GB/s streamed)\n",
		       n_gen, d, 100.0 * median(dc_share, reps), d * streamed / 1e9);
		printf("read bandwidth (%d threads pinned, %.2f GiB, best of %d; worst/best per loop):",
		       bwr.threads, bwr.bytes / 1073741824.0, bwr.reps);
		for (int l = 0; l < BW_N_LOOPS; l++)
			printf(" %s %.1f GB/s (%.0f%%)", bw_loop_name(l), bwr.best[l] / 1e9,
			       100.0 * bwr.worst[l] / bwr.best[l]);
		printf("\n");
		printf("read bandwidth after each repetition's decode:");
		for (int r = 0; r < reps; r++)
			printf(" %.1f", bwp[r] / 1e9);
		printf(" GB/s; decode's share of it per repetition:");
		for (int r = 0; r < reps; r++)
			printf(" %.0f%%", 100.0 * share[r]);
		printf("\n");
		printf("read bandwidth: %.1f GB/s (%s, best of the repetitions) over %.3f GB per token (weights %.3f, KV cache %.3f at %.0f positions on average) -> decode bound %.2f tokens/s; decode reaches %.0f%% of it (median of the per-repetition shares %.0f%%)%s\n",
		       bw / 1e9, bw_loop_name(bwr.bound_loop), streamed / 1e9, weights / 1e9, kv / 1e9,
		       n_prompt + (n_gen + 1) / 2.0, bound, 100.0 * d / bound,
		       100.0 * median(share, reps),
		       over > 1.0 ? " (a repetition over 100 %: the probe is wrong)" : "");
		/* the paired probe: each step against the passes right after it */
		double bwm = median(pr.bw, pr.n), stepm = median(pr.step_s, pr.n);
		double sm = median(pr.share, pr.n); /* sorts pr.share for the percentiles */

		printf("paired probe (%d decode steps again, each followed by one pass of every loop over %.3f GB on the decode's own threads): decode %.2f tokens/s, bound %.2f tokens/s at %.1f GB/s (medians); decode's share of the passes beside each step: median %.0f%% (p10 %.0f%%, p90 %.0f%%, max %.0f%%)%s\n",
		       pr.n, bw_pacer_pass_bytes(pr.pacer) / 1e9, 1.0 / stepm, bwm / streamed,
		       bwm / 1e9, 100.0 * sm, 100.0 * pr.share[pr.n / 10],
		       100.0 * pr.share[pr.n - 1 - pr.n / 10], 100.0 * pr.share[pr.n - 1],
		       sm > 1.0 ? " (the median over 100 %: the probe is wrong)" : "");
	}
	rc = 0;
fail:
	bw_pacer_free(pr.pacer);
	free(pr.share);
	free(pr.step_s);
	free(pr.bw);
	wk_model_free(m);
	return rc;
}
