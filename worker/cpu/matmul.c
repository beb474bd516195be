/*
 * matmul.c - ISA selection and the matmul driver (see matmul.h): checks the
 * arguments, quantises the activations (in parallel over tokens), then runs
 * the chosen ISA's kernel over ranges of output rows (multiples of 64)
 * claimed by the pool threads; decode and small batches in 16-row units
 * taken from the ends of per-thread ranges (wk_cpu_mm_run_balanced).
 * The per-element arithmetic lives in the kernel files (kern_*.c).
 */
#include "worker/cpu/matmul.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "worker/cpu/internal.h"
#include "worker/cpu/pack.h"
#include "worker/model/quant.h"

struct wk_cpu_mm_job {
	const struct wk_cpu_kernels *k;
	struct wk_cpu_gemm g;
	wk_cpu_gemm_fn fn;
	int rows;
	int chunk_rows; /* output rows per task */
	/* activation quantisation */
	wk_cpu_actq_fn actq;
	const float *xf;
};

/*
 * A decode run (and a small batch's) is cut into strips of 16 rows
 * (units), numbered across its products; each thread owns a contiguous
 * range of them and takes pieces from its front, and a thread whose range is empty takes pieces from the
 * back of the fullest other one.  front << 32 | back in one word, moved by
 * CAS, so that a unit is taken exactly once.  Padded to a cache line of
 * its own.
 */
#define WK_CPU_MM_BAL_THREADS 64
struct wk_cpu_mm_range {
	_Atomic uint64_t fb;
	char pad[56];
};

struct wk_cpu_mm {
	struct wk_pool *pool;     /* borrowed */
	enum wk_cpu_isa isa;
	const struct wk_cpu_kernels *k;
	void *scratch_raw;        /* cm_malloc'd */
	uint8_t *scratch;         /* activation rows, 64-byte aligned in scratch_raw */
	size_t scratch_bytes;     /* usable bytes at scratch */
	struct wk_cpu_mm_job *jobs; /* [WK_CPU_MM_MAX_OPS]: the current call's */
	struct wk_cpu_packs *packs; /* rows16 copies (wk_cpu_mm_pack), or NULL */
	int first[WK_CPU_MM_MAX_OPS + 1]; /* first chunk task of each job */
	int aq_first[WK_CPU_MM_MAX_OPS + 1]; /* first activation row task of each job */
	struct wk_cpu_mm_range range[WK_CPU_MM_BAL_THREADS]; /* a balanced run's */
};


/* ---- ISA -------------------------------------------------------------- */

const char *wk_cpu_isa_name(enum wk_cpu_isa isa)
{
	switch (isa) {
	case WK_CPU_ISA_SCALAR: return "scalar";
	case WK_CPU_ISA_AVX2: return "avx2";
	case WK_CPU_ISA_AVX512: return "avx512";
	case WK_CPU_ISA_AVX512BF16: return "avx512bf16";
	default: return "?";
	}
}

int wk_cpu_isa_available(enum wk_cpu_isa isa)
{
	switch (isa) {
	case WK_CPU_ISA_SCALAR:
		return 1;
#if defined(__x86_64__)
	case WK_CPU_ISA_AVX2: {
		/* F16C through cpuid (leaf 1, ecx bit 29): clang 14's
		 * __builtin_cpu_supports does not know "f16c" */
		unsigned a, b, c, d;

		__builtin_cpu_init();
		if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)))
			return 0;
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	case WK_CPU_ISA_AVX512:
		__builtin_cpu_init();
		return wk_cpu_isa_available(WK_CPU_ISA_AVX2) &&
		       __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
	case WK_CPU_ISA_AVX512BF16: {
		/* AVX512_BF16: cpuid leaf 7 subleaf 1, eax bit 5 (and the OS
		 * saves the zmm state, which the avx512f check includes) */
		unsigned a, b, c, d;

		if (!wk_cpu_isa_available(WK_CPU_ISA_AVX512) ||
		    !__get_cpuid_count(7, 1, &a, &b, &c, &d))
			return 0;
		return (a >> 5) & 1;
	}
#endif
	default:
		return 0;
	}
}

enum wk_cpu_isa wk_cpu_isa_default(void)
{
	const char *env = getenv("SLUICE_CPU_ISA");
	if (env != NULL)
		for (int i = 0; i < WK_CPU_ISA_COUNT_; i++)
			if (strcasecmp(env, wk_cpu_isa_name((enum wk_cpu_isa)i)) == 0 &&
			    wk_cpu_isa_available((enum wk_cpu_isa)i))
				return (enum wk_cpu_isa)i;
	for (int i = WK_CPU_ISA_COUNT_ - 1; i > 0; i--)
		if (wk_cpu_isa_available((enum wk_cpu_isa)i))
			return (enum wk_cpu_isa)i;
	return WK_CPU_ISA_SCALAR;
}

static const struct wk_cpu_kernels *wk_cpu_kernels_of(enum wk_cpu_isa isa)
{
	switch (isa) {
#if defined(__x86_64__)
	case WK_CPU_ISA_AVX2: return &wk_cpu_kernels_avx2;
	case WK_CPU_ISA_AVX512: return &wk_cpu_kernels_avx512;
	case WK_CPU_ISA_AVX512BF16: return &wk_cpu_kernels_avx512bf16;
#endif
	default: return &wk_cpu_kernels_scalar;
	}
}

/* ---- activation formats ----------------------------------------------- */

enum wk_cpu_act wk_cpu_act_of(const struct wk_cpu_kernels *k, uint32_t wtype)
{
	switch (wtype) {
	case WK_Q_BF16:
		return k->actq_bf16 ? WK_CPU_ACT_BF16 : WK_CPU_ACT_F32;
	case WK_Q_Q4_0:
	case WK_Q_Q4_1:
	case WK_Q_Q5_0:
	case WK_Q_Q5_1:
	case WK_Q_IQ4_NL:
	case WK_Q_Q8_0:
		return WK_CPU_ACT_Q8_32;
	case WK_Q_Q2_K:
	case WK_Q_Q3_K:
	case WK_Q_IQ4_XS:
	case WK_Q_Q4_K:
	case WK_Q_Q5_K:
	case WK_Q_Q6_K:
		return WK_CPU_ACT_Q8_256;
	default:
		return WK_CPU_ACT_F32;
	}
}

size_t wk_cpu_act_row_bytes(enum wk_cpu_act act, int cols)
{
	size_t c = (size_t)cols, b;
	switch (act) {
	case WK_CPU_ACT_Q8_32: b = c + 8 * (c / 32); break;
	case WK_CPU_ACT_Q8_256: b = c + 4 * (c / 256) + 2 * (c / 16); break;
	case WK_CPU_ACT_BF16: b = 2 * c; break;
	default: b = 4 * c; break;
	}
	return (b + 63) & ~(size_t)63;
}

/* ---- context ---------------------------------------------------------- */

enum cm_status wk_cpu_mm_new(struct wk_pool *pool, struct wk_cpu_mm **out)
{
	struct wk_cpu_mm *mm = cm_calloc(1, sizeof *mm);
	*out = NULL;
	if (mm == NULL)
		return CM_ENOMEM;
	mm->jobs = cm_calloc(WK_CPU_MM_MAX_OPS, sizeof(*mm->jobs));
	if (mm->jobs == NULL) {
		cm_free(mm);
		return CM_ENOMEM;
	}
	mm->pool = pool;
	mm->isa = wk_cpu_isa_default();
	mm->k = wk_cpu_kernels_of(mm->isa);
	*out = mm;
	return CM_OK;
}

void wk_cpu_mm_free(struct wk_cpu_mm *mm)
{
	if (mm == NULL)
		return;
	cm_free(mm->scratch_raw);
	cm_free(mm->jobs);
	wk_cpu_packs_free(mm->packs);
	cm_free(mm);
}

enum cm_status wk_cpu_mm_set_isa(struct wk_cpu_mm *mm, enum wk_cpu_isa isa)
{
	if (!wk_cpu_isa_available(isa))
		return CM_EUNSUPPORTED;
	mm->isa = isa;
	mm->k = wk_cpu_kernels_of(isa);
	return CM_OK;
}

enum wk_cpu_isa wk_cpu_mm_isa(const struct wk_cpu_mm *mm)
{
	return mm->isa;
}

struct wk_pool *wk_cpu_mm_pool(const struct wk_cpu_mm *mm)
{
	return mm->pool;
}

int wk_cpu_mm_can_pack(const struct wk_cpu_mm *mm, uint32_t wtype)
{
	if (wtype >= WK_Q_COUNT_ || !wk_qtype_supported(wtype) || mm->k->gemm[wtype] == NULL)
		return 0;
	return mm->k->gemm_r16[wtype] != NULL && wk_cpu_pack_supported(wtype) ? 2 : 1;
}

size_t wk_cpu_mm_pack_bytes(const struct wk_cpu_mm *mm, uint32_t wtype, int rows, int cols)
{
	switch (wk_cpu_mm_can_pack(mm, wtype)) {
	case 2:
		return wk_cpu_pack_bytes(wtype, rows, cols);
	case 1:
		return wk_cpu_pack_plain_bytes(wtype, rows, cols);
	default:
		return 0;
	}
}

enum cm_status wk_cpu_mm_pack(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			      int cols)
{
	enum cm_status st;
	int how = wk_cpu_mm_can_pack(mm, wtype);

	if (how == 0)
		return CM_OK;
	if (w == NULL || rows <= 0 || cols <= 0 || cols % (int)wk_qtype_block_elems(wtype) != 0)
		return CM_EINVAL;
	if (mm->packs == NULL && (st = wk_cpu_packs_new(&mm->packs)) != CM_OK)
		return st;
	return wk_cpu_packs_add(mm->packs, mm->pool, wtype, w, rows, cols, how == 1);
}

size_t wk_cpu_mm_packed_bytes(const struct wk_cpu_mm *mm)
{
	return wk_cpu_packs_bytes(mm->packs);
}

static enum cm_status wk_cpu_mm_reserve(struct wk_cpu_mm *mm, size_t bytes)
{
	if (bytes <= mm->scratch_bytes)
		return CM_OK;
	if (bytes > WK_CPU_MM_SCRATCH_MAX)
		return CM_ELIMIT;
	size_t sz = (bytes + 4095) & ~(size_t)4095;
	void *p = cm_malloc(sz + 64);
	if (p == NULL)
		return CM_ENOMEM;
	cm_free(mm->scratch_raw);
	mm->scratch_raw = p;
	mm->scratch = (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63);
	mm->scratch_bytes = sz;
	return CM_OK;
}

/* ---- parallel work ---------------------------------------------------- */


static void wk_cpu_mm_actq_task(void *ctx, int task, int thread)
{
	struct wk_cpu_mm_job *j = ctx;
	(void)thread;
	j->actq(j->xf + (size_t)task * j->g.cols, (uint8_t *)j->g.x + (size_t)task * j->g.x_stride,
		j->g.cols);
}

/*
 * Rows per GEMM task: about 4 tasks per thread (few claims, yet a thread
 * that the OS deschedules holds back at most a quarter of its share), a
 * multiple of 64 (every tile height divides it), at most 1024.
 */
static int wk_cpu_mm_chunk_rows(int rows, int threads)
{
	int c = (rows / (4 * threads) + 63) & ~63;
	return c < 64 ? 64 : c > 1024 ? 1024 : c;
}

static void wk_cpu_mm_gemm_task(void *ctx, int task, int thread)
{
	struct wk_cpu_mm_job *j = ctx;
	(void)thread;
	int r0 = task * j->chunk_rows, r1 = r0 + j->chunk_rows;
	if (r1 > j->rows)
		r1 = j->rows;
	j->fn(&j->g, r0, r1);
}

/* Checks one product; CM_OK when its kernel can run it. */
static enum cm_status wk_cpu_mm_check(const struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *op)
{
	if (!wk_qtype_supported(op->wtype) || mm->k->gemm[op->wtype] == NULL)
		return CM_EUNSUPPORTED;
	if (op->rows <= 0 || op->cols <= 0 || op->n <= 0 ||
	    op->cols % (int)wk_qtype_block_elems(op->wtype) != 0)
		return CM_EINVAL;
	return CM_OK;
}

/* Whether op i takes the same quantised activations as op i - 1. */
static int wk_cpu_mm_same_x(const struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *ops, int i)
{
	return i > 0 && ops[i].x == ops[i - 1].x && ops[i].n == ops[i - 1].n &&
	       ops[i].cols == ops[i - 1].cols &&
	       wk_cpu_act_of(mm->k, ops[i].wtype) == wk_cpu_act_of(mm->k, ops[i - 1].wtype);
}

/*
 * Rows per task of a decode run (every op n = 1; the same cut serves a
 * small batch's product, towards wk_cpu_mm_small_target): bandwidth-bound,
 * and on the hosts measured one thread nearly saturates the memory (a 2-vCPU Zen 4
 * VM: 32.8 GB/s with one thread, 35.1 with two), so what costs is each
 * task's start (a new stream for the prefetchers) more than the balance.
 * An op of b bytes is cut into ceil(b / target) tasks of equal rows (a
 * multiple of 16, the strip height, which every tile height divides),
 * target about the run's bytes over the threads: a matrix of a mixture of
 * experts' gate/up run is one task, a lone 0.6 MB projection two, and so
 * is a 64-expert router (64 rows: one task with a 64-row floor, 11 us a
 * layer with the other thread idle).
 */
static int wk_cpu_mm_decode_chunk_rows(size_t op_bytes, int rows, size_t target)
{
	/* ceil(op_bytes / target), an op within 1/64 over a multiple of the
	 * target (the run's bytes not divisible by the threads) not cut again */
	size_t pieces = (op_bytes - op_bytes / 64 + target - 1) / target;
	if (pieces == 0)
		pieces = 1;
	size_t want = ((size_t)rows + pieces - 1) / pieces;
	size_t c = (want + 15) & ~(size_t)15;

	return c < 16 ? 16 : c > (1u << 20) ? (1 << 20) : (int)c;
}

/*
 * The target of a decode run: its bytes over the threads, halved (up to
 * twice) while the tasks do not come to a multiple of the threads.  Three
 * equal products on two threads (phi3's fused QKV) were three tasks: one
 * thread read two while the other waited, and the run streamed 40.6 GB/s
 * against 52-54 for the step's other runs; as six tasks each thread reads
 * three.
 */
static size_t wk_cpu_mm_decode_target(const struct wk_cpu_mm_op *ops, int n_ops, int threads,
				      size_t run_bytes)
{
	size_t target = 1;

	for (int k = 1; k <= 4; k *= 2) {
		long tasks = 0;

		target = run_bytes / (size_t)threads / (size_t)k;
		if (target == 0)
			target = 1;
		for (int i = 0; i < n_ops; i++) {
			size_t ob = (size_t)wk_qtype_row_bytes(ops[i].wtype, (uint64_t)ops[i].cols) *
				    (size_t)ops[i].rows;
			int c = wk_cpu_mm_decode_chunk_rows(ob, ops[i].rows, target);
			tasks += (ops[i].rows + c - 1) / c;
		}
		if (threads == 1 || tasks % threads == 0)
			break;
	}
	return target;
}

/* Tokens up to which a product counts as a small batch (the 16-row
 * kernels' largest token tile). */
#define WK_CPU_MM_SMALL_N 8

/*
 * The target for the products of a run with at most WK_CPU_MM_SMALL_N
 * tokens (a mixture's experts in a serving step: dozens of products of a
 * few tokens each; a few streams' dense products): the run's bytes over
 * 4 tasks a thread.  The compute-bound split (wk_cpu_mm_chunk_rows, per
 * product) cut each 512-row expert into eight 64-row tasks, each a new
 * stream started cold: qwen3moe-1b's experts (512 x 1024 Q4_K, 112 a run)
 * took 1756 us at 2 tokens against 755 us at one (2026-12-06); by bytes,
 * one task an expert, 904 us.
 */
static size_t wk_cpu_mm_small_target(int threads, size_t run_bytes)
{
	size_t t = run_bytes / (4 * (size_t)threads);

	return t ? t : 1;
}

/* Sets up job j for op (activations at scratch offset *off, advanced);
 * tasks by bytes towards split_target, or the compute split for 0. */
static void wk_cpu_mm_job_init(struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *op,
			       struct wk_cpu_mm_job *j, int share_prev, size_t *off, int threads,
			       size_t split_target)
{
	enum wk_cpu_act act = wk_cpu_act_of(mm->k, op->wtype);

	int plain = 0;
	const uint8_t *copy =
		wk_cpu_packs_find(mm->packs, op->wtype, op->w, op->rows, op->cols, &plain);
	const uint8_t *packed = copy && !plain && mm->k->gemm_r16[op->wtype] ? copy : NULL;

	memset(j, 0, sizeof(*j));
	j->k = mm->k;
	j->fn = packed ? mm->k->gemm_r16[op->wtype] : mm->k->gemm[op->wtype];
	j->rows = op->rows;
	j->g.rows = op->rows;
	j->g.cols = op->cols;
	j->g.w = packed ? packed : copy && plain ? copy : op->w;
	j->g.w_stride = (size_t)wk_qtype_row_bytes(op->wtype, (uint64_t)op->cols);
	j->g.panel_bytes = packed ? wk_cpu_pack_panel_bytes(op->wtype, op->rows, op->cols) : 0;
	j->g.n = op->n;
	j->g.y = op->y;
	j->g.y_stride = (size_t)op->rows;
	j->chunk_rows = split_target ? wk_cpu_mm_decode_chunk_rows(j->g.w_stride * (size_t)op->rows,
								   op->rows, split_target)
				      : wk_cpu_mm_chunk_rows(op->rows, threads);
	if (act == WK_CPU_ACT_F32) {
		j->g.x = (const uint8_t *)op->x;
		j->g.x_stride = 4 * (size_t)op->cols;
		return;
	}
	if (share_prev) { /* the previous job's quantised rows */
		j->g.x = (j - 1)->g.x;
		j->g.x_stride = (j - 1)->g.x_stride;
		return;
	}
	j->g.x_stride = wk_cpu_act_row_bytes(act, op->cols);
	j->g.x = mm->scratch + *off;
	*off += j->g.x_stride * (size_t)op->n;
	j->actq = act == WK_CPU_ACT_Q8_32    ? mm->k->actq_q8_32
		  : act == WK_CPU_ACT_Q8_256 ? mm->k->actq_q8_256
					     : mm->k->actq_bf16;
	j->xf = op->x;
}

struct wk_cpu_mm_multi {
	struct wk_cpu_mm_job *jobs;
	const int *first;   /* [n_ops + 1] first task of each job (chunks or rows) */
	int n_ops;
};

/* The job whose tasks hold this one: the last with first <= task (jobs
 * without tasks share their first with the next job). */
static int wk_cpu_mm_job_of(const struct wk_cpu_mm_multi *m, int task)
{
	int lo = 0, hi = m->n_ops - 1;

	while (lo < hi) {
		int mid = (lo + hi + 1) / 2;

		if (m->first[mid] <= task)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

static void wk_cpu_mm_multi_task(void *ctx, int task, int thread)
{
	const struct wk_cpu_mm_multi *m = ctx;
	int i = wk_cpu_mm_job_of(m, task);

	wk_cpu_mm_gemm_task(&m->jobs[i], task - m->first[i], thread);
}

/* One activation row of one job of the run (first: the jobs' aq_first). */
static void wk_cpu_mm_multi_actq_task(void *ctx, int task, int thread)
{
	const struct wk_cpu_mm_multi *m = ctx;
	int i = wk_cpu_mm_job_of(m, task);

	wk_cpu_mm_actq_task(&m->jobs[i], task - m->first[i], thread);
}

struct wk_cpu_mm_bal {
	struct wk_cpu_mm *mm;
	const struct wk_cpu_mm_multi *m;
	int threads;
};

/*
 * Takes a piece of a range: half of what is left (at least one unit), from
 * the front (its owner) or the back (another thread).  Returns the number
 * of units, 0 when the range is empty; *u0 the first.  Halves, not
 * quarters or eighths: each piece is a kernel call and a new start for the
 * prefetchers, and in the engine (decode steps alternating in one process)
 * quarters cost 0-4 % and eighths 4-8 % of the step against halves.
 */
static int wk_cpu_mm_take(struct wk_cpu_mm_range *r, int back, int *u0)
{
	uint64_t v = atomic_load_explicit(&r->fb, memory_order_relaxed);

	for (;;) {
		uint32_t f = (uint32_t)(v >> 32), b = (uint32_t)v;
		if (f >= b)
			return 0;
		uint32_t n = (b - f + 1) / 2;
		uint64_t nv = back ? ((uint64_t)f << 32 | (b - n)) : ((uint64_t)(f + n) << 32 | b);
		if (atomic_compare_exchange_weak_explicit(&r->fb, &v, nv, memory_order_relaxed,
							  memory_order_relaxed)) {
			*u0 = (int)(back ? b - n : f);
			return (int)n;
		}
	}
}

/* Units [u0, u0 + n) of the run: each job's rows among them, one call a job. */
static void wk_cpu_mm_units(const struct wk_cpu_mm_multi *m, int u0, int n)
{
	int u = u0, end = u0 + n;

	while (u < end) {
		int i = wk_cpu_mm_job_of(m, u);
		const struct wk_cpu_mm_job *j = &m->jobs[i];
		int last = m->first[i + 1] < end ? m->first[i + 1] : end;
		int r0 = (u - m->first[i]) * 16, r1 = (last - m->first[i]) * 16;

		j->fn(&j->g, r0, r1 < j->rows ? r1 : j->rows);
		u = last;
	}
}

static void wk_cpu_mm_bal_task(void *ctx, int k, int thread)
{
	const struct wk_cpu_mm_bal *bl = ctx;
	struct wk_cpu_mm_range *range = bl->mm->range;
	int u0, n;

	(void)thread;
	while ((n = wk_cpu_mm_take(&range[k], 0, &u0)) > 0)
		wk_cpu_mm_units(bl->m, u0, n);
	for (;;) {
		int victim = -1;
		uint32_t most = 0;

		for (int v = 0; v < bl->threads; v++) {
			uint64_t fb = atomic_load_explicit(&range[v].fb, memory_order_relaxed);
			uint32_t f = (uint32_t)(fb >> 32), b = (uint32_t)fb;
			if (b > f && b - f > most) {
				most = b - f;
				victim = v;
			}
		}
		if (victim < 0)
			return;
		if ((n = wk_cpu_mm_take(&range[victim], 1, &u0)) > 0)
			wk_cpu_mm_units(bl->m, u0, n);
	}
}

/*
 * A decode run (every product one token), or a small batch's (every
 * product at most WK_CPU_MM_SMALL_N tokens), on several threads: units of
 * 16 rows, the threads' ranges cut at equal shares of the run's bytes.  The
 * hosts measured here give their two threads unequal speeds, for seconds
 * at a time (one thread's tasks 20-60 % slower than the other's, either
 * way round), and a fixed split waits for the slower; pieces taken from
 * the ends let the faster one finish the other's range.  Which thread
 * computes a row changes none of its values.
 */
static void wk_cpu_mm_run_balanced(struct wk_cpu_mm *mm, struct wk_cpu_mm_multi *m, int threads,
				   size_t run_bytes)
{
	int n_units = m->first[m->n_ops], k = 0;
	size_t done = 0;
	uint32_t start = 0;

	for (int i = 0; i < m->n_ops && k < threads - 1; i++) {
		size_t ub = 16 * m->jobs[i].g.w_stride;

		for (int u = m->first[i]; u < m->first[i + 1] && k < threads - 1; u++) {
			done += ub;
			while (k < threads - 1 && done * (size_t)threads >= run_bytes * (size_t)(k + 1)) {
				atomic_store_explicit(&mm->range[k].fb,
						      (uint64_t)start << 32 | (uint32_t)(u + 1),
						      memory_order_relaxed);
				start = (uint32_t)(u + 1);
				k++;
			}
		}
	}
	for (; k < threads; k++) {
		atomic_store_explicit(&mm->range[k].fb,
				      (uint64_t)start << 32 | (k == threads - 1 ? (uint32_t)n_units : start),
				      memory_order_relaxed);
	}
	struct wk_cpu_mm_bal bl = { mm, m, threads };
	wk_pool_run(mm->pool, wk_cpu_mm_bal_task, &bl, threads);
}

enum cm_status wk_cpu_matmul_multi(struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *ops,
				   int n_ops)
{
	int threads = mm->pool ? wk_pool_threads(mm->pool) : 1, *first;
	size_t bytes = 0, off = 0, decode_bytes = 0;
	int decode = 1, small = 1;
	enum cm_status st;

	if (n_ops <= 0 || n_ops > WK_CPU_MM_MAX_OPS)
		return CM_EINVAL;
	for (int i = 0; i < n_ops; i++) {
		enum wk_cpu_act act;
		size_t rb;

		if ((st = wk_cpu_mm_check(mm, &ops[i])) != CM_OK)
			return st;
		decode_bytes += (size_t)wk_qtype_row_bytes(ops[i].wtype, (uint64_t)ops[i].cols) *
				(size_t)ops[i].rows;
		decode &= ops[i].n == 1;
		small &= ops[i].n <= WK_CPU_MM_SMALL_N;
		act = wk_cpu_act_of(mm->k, ops[i].wtype);
		if (act == WK_CPU_ACT_F32 || wk_cpu_mm_same_x(mm, ops, i))
			continue;
		rb = wk_cpu_act_row_bytes(act, ops[i].cols);
		if ((size_t)ops[i].n > WK_CPU_MM_SCRATCH_MAX / rb ||
		    bytes > WK_CPU_MM_SCRATCH_MAX - rb * (size_t)ops[i].n)
			return CM_ELIMIT;
		bytes += rb * (size_t)ops[i].n;
	}
	if ((st = wk_cpu_mm_reserve(mm, bytes)) != CM_OK)
		return st;
	/* a decode run: the bandwidth split; else small batches by bytes,
	 * about 4 tasks a thread over the run, the others compute-bound */
	/* decode and small batches: units from the ends of per-thread ranges */
	const int balanced = small && threads > 1 && threads <= WK_CPU_MM_BAL_THREADS;
	size_t decode_target = decode ? wk_cpu_mm_decode_target(ops, n_ops, threads, decode_bytes) : 0;
	size_t small_target = wk_cpu_mm_small_target(threads, decode_bytes);
	first = mm->first;
	first[0] = 0;
	mm->aq_first[0] = 0;
	for (int i = 0; i < n_ops; i++) {
		struct wk_cpu_mm_job *j = &mm->jobs[i];
		size_t split = decode ? decode_target : ops[i].n <= WK_CPU_MM_SMALL_N ? small_target : 0;

		wk_cpu_mm_job_init(mm, &ops[i], j, wk_cpu_mm_same_x(mm, ops, i), &off, threads, split);
		if (balanced)
			j->chunk_rows = 16; /* units of wk_cpu_mm_run_balanced */
		mm->aq_first[i + 1] = mm->aq_first[i] + (j->actq ? j->g.n : 0);
		first[i + 1] = first[i] + (j->rows + j->chunk_rows - 1) / j->chunk_rows;
	}
	/* Every job's activation rows quantised in one run (a mixture's
	 * experts are dozens of products of a few rows each: a run per
	 * product cost more than the products); decode's rows on this
	 * thread.  Each row is quantised alone: the same bytes either way. */
	struct wk_cpu_mm_multi aq = { mm->jobs, mm->aq_first, n_ops };
	if (threads > 1 && !decode && mm->aq_first[n_ops] > 1)
		wk_pool_run(mm->pool, wk_cpu_mm_multi_actq_task, &aq, mm->aq_first[n_ops]);
	else
		for (int t = 0; t < mm->aq_first[n_ops]; t++)
			wk_cpu_mm_multi_actq_task(&aq, t, 0);
	/* Each task owns a fixed range of one job's output rows: which thread
	 * runs it, and which other products share the run, change no value. */
	struct wk_cpu_mm_multi m = { mm->jobs, first, n_ops };
	if (balanced)
		wk_cpu_mm_run_balanced(mm, &m, threads, decode_bytes);
	else if (threads > 1 && first[n_ops] > 1)
		wk_pool_run(mm->pool, wk_cpu_mm_multi_task, &m, first[n_ops]);
	else
		for (int c = 0; c < first[n_ops]; c++)
			wk_cpu_mm_multi_task(&m, c, 0);
	return CM_OK;
}

enum cm_status wk_cpu_matmul(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			     int cols, const float *x, int n, float *y)
{
	struct wk_cpu_mm_op op = { wtype, w, rows, cols, x, n, y };

	return wk_cpu_matmul_multi(mm, &op, 1);
}
