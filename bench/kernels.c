/*
 * kernels.c - bench-kernels: memory read bandwidth and the CPU matmul
 * kernels on TinyLlama-sized weights.
 *
 *   bench-kernels [--threads N] [--isa scalar|avx2|avx512|avx512bf16] [--types F16,Q8_0,...]
 *                 [--reps N] [--gemm-n N]
 *
 * Prints one header line (CPU model, ISA, threads), the measured read
 * bandwidth with 1 and N threads (bench/bwprobe.c: pinned threads, a buffer
 * of at least 1 GiB and 8x the last-level cache, three loops, best of 5),
 * then per type and shape: GEMV (n = 1) streaming many copies of the
 * weight so that it comes from memory, as GB/s of weight bytes and as a
 * fraction of the N-thread bandwidth; and GEMM (n = --gemm-n, default 128)
 * as GFLOP/s.  Each figure is the median of --reps runs (default 5).
 * Shapes: 5632x2048 (FFN up/gate: rows x cols) and 2048x5632 (FFN down).
 * --pass runs instead every matmul of a TinyLlama-1.1B-shaped model
 * (22 layers + output) for F16, Q8_0 or a Q4_K_M-like mix: decode (n = 1)
 * tokens/s against the bandwidth bound, and prefill (n = --gemm-n) tok/s,
 * counting matmuls only (no attention, norms or sampling).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>

#include "common/clock.h"
#include "bench/bwprobe.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/pool.h"
#include "worker/model/quant.h"

#define GEMV_SET_BYTES ((size_t)768 << 20) /* weights streamed per GEMV pass */

/* Process CPU seconds (user + system), to show how much of the machine a
 * run really got when others share it. */
static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static int g_threads = 1;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void cpu_model(char *out, size_t cap)
{
	snprintf(out, cap, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f == NULL)
		return;
	char line[512];
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			if (c) {
				c += 2;
				c[strcspn(c, "\n")] = 0;
				snprintf(out, cap, "%s", c);
			}
			break;
		}
	fclose(f);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* The weights and activations one shape is measured on. */
struct shape_set {
	uint32_t type;
	int rows, cols, copies, gemm_n, reps;
	size_t wbytes;        /* one copy */
	const uint8_t *w;     /* copies of the matrix, one after another */
	const float *x;
	float *y;
	double *t;            /* [reps] */
};

/* Times a GEMV pass over all copies and a GEMM on the first with mm, and
 * prints the line (tag after it); -1 when a product fails. */
static int measure(struct wk_cpu_mm *mm, const struct shape_set *s, double bw, const char *tag)
{
	/* GEMV: one pass over all copies per rep */
	for (int rep = -1; rep < s->reps; rep++) {
		int64_t t0 = cm_mono_ns();
		for (int c = 0; c < s->copies; c++)
			if (wk_cpu_matmul(mm, s->type, s->w + s->wbytes * (size_t)c, s->rows, s->cols, s->x,
					  1, s->y) != CM_OK)
				return -1;
		if (rep >= 0)
			s->t[rep] = (double)(cm_mono_ns() - t0) / 1e9 / s->copies;
	}
	double gemv = median(s->t, s->reps);
	double gbs = (double)s->wbytes / gemv / 1e9;

	/* GEMM */
	for (int rep = -1; rep < s->reps; rep++) {
		int64_t t0 = cm_mono_ns();
		if (wk_cpu_matmul(mm, s->type, s->w, s->rows, s->cols, s->x, s->gemm_n, s->y) != CM_OK)
			return -1;
		if (rep >= 0)
			s->t[rep] = (double)(cm_mono_ns() - t0) / 1e9;
	}
	double gemm = median(s->t, s->reps);
	double gflops = 2.0 * s->rows * s->cols * s->gemm_n / gemm / 1e9;
	printf("%-5s %5dx%-5d  gemv %7.3f ms %6.2f GB/s (%3.0f%% of bw)   gemm(n=%d) %8.2f ms %7.1f GFLOP/s%s\n",
	       wk_qtype_name(s->type), s->rows, s->cols, gemv * 1e3, gbs, 100 * gbs / bw, s->gemm_n,
	       gemm * 1e3, gflops, tag);
	fflush(stdout);
	return 0;
}

static int bench_shape(struct wk_cpu_mm *mm, uint32_t type, int rows, int cols, int reps,
		       int gemm_n, double bw)
{
	size_t rb = wk_qtype_row_bytes(type, (uint64_t)cols), wbytes = rb * (size_t)rows;
	int copies = (int)((GEMV_SET_BYTES + wbytes - 1) / wbytes);
	uint8_t *w = malloc(wbytes * (size_t)copies);
	float *x = malloc(sizeof(float) * (size_t)gemm_n * cols);
	float *y = malloc(sizeof(float) * (size_t)gemm_n * rows);
	float *tmp = malloc(sizeof(float) * (size_t)cols);
	double *t = malloc(sizeof(double) * (size_t)reps);
	struct wk_cpu_mm *pm = NULL;
	int rc = 1;
	if (!w || !x || !y || !tmp || !t) {
		fprintf(stderr, "bench-kernels: out of memory for %s %dx%d\n", wk_qtype_name(type), rows, cols);
		goto out;
	}
	for (int r = 0; r < rows; r++) {
		for (int k = 0; k < cols; k++)
			tmp[k] = rnd();
		wk_quantize_row(type, tmp, w + rb * (size_t)r, (uint64_t)cols);
	}
	for (int c = 1; c < copies; c++)
		memcpy(w + wbytes * (size_t)c, w, wbytes);
	for (int i = 0; i < gemm_n * cols; i++)
		x[i] = rnd();
	const struct shape_set set = { type, rows, cols, copies, gemm_n, reps, wbytes, w, x, y, t };
	if (measure(mm, &set, bw, "") != 0)
		goto out;
	/* the weights as the worker keeps them (wk_cpu_mm_pack): in huge
	 * pages, repacked for the 16-row strip kernels where the ISA has them
	 * ("packed"), else as they are ("copied"): a second line, the same
	 * measures */
	const int how = wk_cpu_mm_can_pack(mm, type);
	if (how) {
		if (wk_cpu_mm_new(wk_cpu_mm_pool(mm), &pm) != CM_OK ||
		    wk_cpu_mm_set_isa(pm, wk_cpu_mm_isa(mm)) != CM_OK)
			goto out;
		for (int c = 0; c < copies; c++)
			if (wk_cpu_mm_pack(pm, type, w + wbytes * (size_t)c, rows, cols) != CM_OK)
				goto out;
		if (measure(pm, &set, bw, how == 2 ? "  (packed)" : "  (copied)") != 0)
			goto out;
	}
	rc = 0;
out:
	wk_cpu_mm_free(pm);
	free(w);
	free(x);
	free(y);
	free(tmp);
	free(t);
	return rc;
}

/* ---- whole-model matmul pass (TinyLlama shape) ---------------------- */

struct pass_mat {
	uint32_t type;
	int rows, cols;
	uint8_t *w;
};

enum { PASS_LAYERS = 22, PASS_PER_LAYER = 7 };

/*
 * Matmul-only forward pass over a TinyLlama-1.1B-shaped model: per layer
 * q 2048x2048, k and v 256x2048, o 2048x2048, gate and up 5632x2048,
 * down 2048x5632, then the 32000x2048 output.  mix "Q4_K_M" follows
 * llama.cpp's recipe: Q4_K, with Q6_K for attn_v and ffn_down in the first
 * and last eighth of the layers and every third in between, and output.
 * Weights are quantised once per distinct shape and copied to every layer,
 * so each layer streams its own memory.
 */
static int bench_pass(struct wk_cpu_mm *mm, const char *mix, int reps, int gemm_n, double bw)
{
	static const int shapes[PASS_PER_LAYER][2] = {
		{ 2048, 2048 }, { 256, 2048 }, { 256, 2048 }, { 2048, 2048 },
		{ 5632, 2048 }, { 5632, 2048 }, { 2048, 5632 },
	};
	struct pass_mat m[PASS_LAYERS * PASS_PER_LAYER + 1];
	int nm = 0, rc = 1;
	int kq = strcmp(mix, "Q4_K_M") == 0;
	int base = kq ? WK_Q_Q4_K : wk_qtype_parse(mix);
	if (base < 0) {
		fprintf(stderr, "bench-kernels: unknown pass type %s\n", mix);
		return 1;
	}
	for (int l = 0; l < PASS_LAYERS; l++) {
		int more = l < PASS_LAYERS / 8 || l >= 7 * PASS_LAYERS / 8 ||
			   (l - PASS_LAYERS / 8) % 3 == 2;
		for (int k = 0; k < PASS_PER_LAYER; k++) {
			uint32_t t = (uint32_t)base;
			if (kq && more && (k == 2 || k == 6))
				t = WK_Q_Q6_K;
			m[nm++] = (struct pass_mat){ t, shapes[k][0], shapes[k][1], NULL };
		}
	}
	m[nm++] = (struct pass_mat){ kq ? WK_Q_Q6_K : (uint32_t)base, 32000, 2048, NULL };
	float *tmp = malloc(sizeof(float) * 5632);
	float *x = malloc(sizeof(float) * (size_t)gemm_n * 5632);
	float *y = malloc(sizeof(float) * (size_t)gemm_n * 32000);
	double *t = malloc(sizeof(double) * (size_t)reps);
	double bytes = 0;
	if (!tmp || !x || !y || !t)
		goto out;
	for (int i = 0; i < gemm_n * 5632; i++)
		x[i] = rnd();
	for (int i = 0; i < nm; i++) {
		size_t rb = wk_qtype_row_bytes(m[i].type, (uint64_t)m[i].cols);
		m[i].w = malloc(rb * (size_t)m[i].rows);
		if (m[i].w == NULL)
			goto out;
		bytes += (double)(rb * (size_t)m[i].rows);
		/* copy from an earlier matrix of the same type and shape */
		int src = -1;
		for (int k = 0; k < i && src < 0; k++)
			if (m[k].type == m[i].type && m[k].cols == m[i].cols && m[k].rows >= m[i].rows)
				src = k;
		if (src >= 0) {
			memcpy(m[i].w, m[src].w, rb * (size_t)m[i].rows);
			continue;
		}
		for (int r = 0; r < m[i].rows; r++) {
			if (r < 64 || i == nm - 1) { /* 64 distinct rows, then repeats */
				for (int k = 0; k < m[i].cols; k++)
					tmp[k] = rnd();
				if (r < 64 || r % 4096 == 0)
					wk_quantize_row(m[i].type, tmp, m[i].w + rb * (size_t)r, (uint64_t)m[i].cols);
				else
					memcpy(m[i].w + rb * (size_t)r, m[i].w + rb * (size_t)(r % 64), rb);
			} else {
				memcpy(m[i].w + rb * (size_t)r, m[i].w + rb * (size_t)(r % 64), rb);
			}
		}
	}
	for (int pass = 0; pass < 2; pass++) {
		int n = pass == 0 ? 1 : gemm_n;
		int nreps = pass == 0 ? reps : (reps < 3 ? reps : 3);
		double c0 = 0, w0 = 0;
		for (int rep = -1; rep < nreps; rep++) {
			if (rep == 0) {
				c0 = cpu_seconds();
				w0 = (double)cm_mono_ns() / 1e9;
			}
			int64_t t0 = cm_mono_ns();
			for (int i = 0; i < nm; i++)
				if (wk_cpu_matmul(mm, m[i].type, m[i].w, m[i].rows, m[i].cols, x, n, y) != CM_OK)
					goto out;
			if (rep >= 0)
				t[rep] = (double)(cm_mono_ns() - t0) / 1e9;
		}
		double share = (cpu_seconds() - c0) / ((double)cm_mono_ns() / 1e9 - w0) / g_threads;
		double s = median(t, nreps);
		printf("[cpu share %3.0f%%] ", 100 * share);
		if (pass == 0)
			printf("pass %-6s weights %.0f MB: decode (n=1) %7.2f ms/token = %6.2f tok/s, %5.2f GB/s "
			       "(%3.0f%% of bw; bound %.1f tok/s)\n",
			       mix, bytes / 1e6, s * 1e3, 1 / s, bytes / s / 1e9, 100 * bytes / s / 1e9 / bw,
			       bw * 1e9 / bytes);
		else
			printf("pass %-6s prefill (n=%d) %8.1f ms = %7.1f tok/s\n", mix, n, s * 1e3, n / s);
		fflush(stdout);
	}
	rc = 0;
out:
	for (int i = 0; i < nm; i++)
		free(m[i].w);
	free(tmp);
	free(x);
	free(y);
	free(t);
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench-kernels [--threads N] [--isa scalar|avx2|avx512|avx512bf16] "
			"[--types F16,Q8_0,...] [--reps N] [--gemm-n N] [--pass F16,Q8_0,Q4_K_M]\n");
}

int main(int argc, char **argv)
{
	int threads = 2, reps = 5, gemm_n = 128;
	const char *isa_name = NULL;
	char types_arg[256] = "F32,F16,BF16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K";
	char pass_arg[256] = "";
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--isa") == 0)
			isa_name = argv[++i];
		else if (i + 1 < argc && strcmp(argv[i], "--types") == 0)
			snprintf(types_arg, sizeof types_arg, "%s", argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--pass") == 0)
			snprintf(pass_arg, sizeof pass_arg, "%s", argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--reps") == 0)
			reps = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--gemm-n") == 0)
			gemm_n = atoi(argv[++i]);
		else {
			usage();
			return 2;
		}
	}
	if (threads < 1 || threads > 64 || reps < 1 || reps > 1000 || gemm_n < 1 || gemm_n > 4096) {
		usage();
		return 2;
	}
	g_threads = threads;
	struct wk_pool *pool = NULL;
	struct wk_cpu_mm *mm = NULL;
	if (wk_pool_new(threads, &pool) != CM_OK || wk_cpu_mm_new(pool, &mm) != CM_OK) {
		fprintf(stderr, "bench-kernels: cannot start %d threads\n", threads);
		return 1;
	}
	if (isa_name) {
		int found = 0;
		for (int i = 0; i < WK_CPU_ISA_COUNT_; i++)
			if (strcmp(isa_name, wk_cpu_isa_name((enum wk_cpu_isa)i)) == 0) {
				found = 1;
				if (wk_cpu_mm_set_isa(mm, (enum wk_cpu_isa)i) != CM_OK) {
					fprintf(stderr, "bench-kernels: ISA %s not available on this CPU\n", isa_name);
					return 1;
				}
			}
		if (!found) {
			usage();
			return 2;
		}
	}
	char model[256];
	cpu_model(model, sizeof model);
	printf("bench-kernels: cpu \"%s\", isa %s, threads %d, reps %d (medians)\n", model,
	       wk_cpu_isa_name(wk_cpu_mm_isa(mm)), threads, reps);

	struct bw_result r1, rn;
	if (bw_probe(1, 5, &r1) != 0 || bw_probe(threads, 5, &rn) != 0) {
		fprintf(stderr, "bench-kernels: the bandwidth probe could not run\n");
		return 1;
	}
	double bw1 = r1.bound / 1e9, bwn = rn.bound / 1e9;
	printf("read bandwidth (bench/bwprobe.c, best of 5, %.2f GiB): %.2f GB/s (1 thread, %s), %.2f GB/s (%d threads, %s; slowest repetition %.0f%% of it)\n",
	       rn.bytes / 1073741824.0, bw1, bw_loop_name(r1.bound_loop), bwn, threads,
	       bw_loop_name(rn.bound_loop), 100.0 * rn.worst[rn.bound_loop] / rn.best[rn.bound_loop]);

	char *save = NULL;
	if (pass_arg[0]) { /* whole-model passes instead of single shapes */
		for (char *tok = strtok_r(pass_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
			if (bench_pass(mm, tok, reps, gemm_n, bwn))
				return 1;
		types_arg[0] = 0;
	}
	for (char *tok = strtok_r(types_arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int type = wk_qtype_parse(tok);
		if (type < 0 || !wk_qtype_supported((uint32_t)type)) {
			fprintf(stderr, "bench-kernels: unknown weight type %s\n", tok);
			return 2;
		}
		if (bench_shape(mm, (uint32_t)type, 5632, 2048, reps, gemm_n, bwn) ||
		    bench_shape(mm, (uint32_t)type, 2048, 5632, reps, gemm_n, bwn))
			return 1;
	}
	wk_cpu_mm_free(mm);
	wk_pool_free(pool);
	return 0;
}
