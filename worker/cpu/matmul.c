/*
 * matmul.c - ISA selection and the matmul driver (see matmul.h): checks the
 * arguments, quantises the activations (in parallel over tokens), then runs
 * the chosen ISA's kernel over the output rows in 16-row units, taken
 * by the pool threads from the ends of per-thread ranges
 * (wk_cpu_mm_run_balanced).
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
	/* activation quantisation */
	wk_cpu_actq_fn actq;
	const float *xf;
};

/*
 * A run's output rows are cut into strips of 16 (units), numbered across
 * its products; each thread owns a contiguous range of them and takes
 * pieces from its front, and a thread whose range is empty takes pieces
 * from the back of the fullest other one.  front << 32 | back in one word,
 * moved by CAS, so that a unit is taken exactly once.  Padded to a cache
 * line of its own.
 */
struct wk_cpu_mm_range {
	_Atomic uint64_t fb;
	char pad[56];
};

struct wk_cpu_mm {
	struct wk_pool *pool;     /* borrowed */
	enum wk_cpu_isa isa;
	const struct wk_cpu_kernels *k;
	int strip_pf;             /* wk_cpu_mm_set_strip_prefetch */
	void *scratch_raw;        /* cm_malloc'd */
	uint8_t *scratch;         /* activation rows, 64-byte aligned in scratch_raw */
	size_t scratch_bytes;     /* usable bytes at scratch */
	struct wk_cpu_mm_job *jobs; /* [WK_CPU_MM_MAX_OPS]: the current call's */
	struct wk_cpu_packs *packs; /* rows16 copies (wk_cpu_mm_pack), or NULL */
	int first[WK_CPU_MM_MAX_OPS + 1]; /* first 16-row unit of each job */
	int aq_first[WK_CPU_MM_MAX_OPS + 1]; /* first activation row task of each job */
	struct wk_cpu_mm_range range[WK_POOL_MAX_THREADS]; /* the current run's */
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

/*
 * Whether BF16 weights are faster through vdpbf16ps (the avx512bf16
 * table) than converted to F32 for FMA (the avx512 table) on this CPU.
 * AMD: yes on Zen 4, BF16 GEMM 260-325 against 220 GFLOP/s (two
 * threads); other AMD CPUs are taken to be alike.  The Intel Xeon of
 * 2026-12-07 (Sapphire / Emerald Rapids class): no, vdpbf16ps issued
 * 0.55 a TSC tick against 2.3 FMAs (17.7 multiply-adds a tick against
 * 37.5), BF16 GEMM 132-148 against 148-184 GFLOP/s, the engine's 1b
 * BF16 prefill 67-76 against 85-103 tok/s (decode 3-5 % slower).  Other
 * CPUs with AVX512_BF16 are Intel's and are taken to be alike.
 */
static int wk_cpu_bf16dp_pays(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	return __builtin_cpu_is("amd");
#else
	return 0;
#endif
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
		if (wk_cpu_isa_available((enum wk_cpu_isa)i) &&
		    (i != WK_CPU_ISA_AVX512BF16 || wk_cpu_bf16dp_pays()))
			return (enum wk_cpu_isa)i;
	return WK_CPU_ISA_SCALAR;
}

int wk_cpu_strip_prefetch_default(void)
{
	const char *env = getenv("SLUICE_CPU_PREFETCH");

	int amd = 0, fam19h = 0;

#if defined(__x86_64__)
	__builtin_cpu_init();
	amd = __builtin_cpu_is("amd");
	fam19h = __builtin_cpu_is("amdfam19h");
#endif
	if (env != NULL && strcasecmp(env, "on") == 0)
		return WK_CPU_PF_ALL | (amd ? 0 : WK_CPU_PF_L2 | WK_CPU_PF_NEAR);
	if (env != NULL && strcasecmp(env, "off") == 0)
		return 0;
	if (env != NULL && strcasecmp(env, "l2") == 0)
		return WK_CPU_PF_ALL | WK_CPU_PF_L2;
	if (fam19h)
		return 0;
	if (amd)
		return WK_CPU_PF_K;
	return WK_CPU_PF_ALL | WK_CPU_PF_L2 | WK_CPU_PF_NEAR;
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
	mm->strip_pf = wk_cpu_strip_prefetch_default();
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

void wk_cpu_mm_set_strip_prefetch(struct wk_cpu_mm *mm, int which)
{
	mm->strip_pf = which & (WK_CPU_PF_ALL | WK_CPU_PF_L2 | WK_CPU_PF_NEAR);
}

int wk_cpu_mm_strip_prefetch(const struct wk_cpu_mm *mm)
{
	return mm->strip_pf;
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

enum cm_status wk_cpu_mm_pack_view(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
				   int cols, const uint8_t *data)
{
	enum cm_status st;

	if (wk_cpu_mm_can_pack(mm, wtype) != 2 || w == NULL || data == NULL || rows <= 0 ||
	    cols <= 0 || cols % (int)wk_qtype_block_elems(wtype) != 0)
		return CM_EINVAL;
	if (mm->packs == NULL && (st = wk_cpu_packs_new(&mm->packs)) != CM_OK)
		return st;
	return wk_cpu_packs_add_view(mm->packs, wtype, w, rows, cols, data);
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

/* Sets up job j for op (activations at scratch offset *off, advanced). */
static void wk_cpu_mm_job_init(struct wk_cpu_mm *mm, const struct wk_cpu_mm_op *op,
			       struct wk_cpu_mm_job *j, int share_prev, size_t *off)
{
	enum wk_cpu_act act = wk_cpu_act_of(mm->k, op->wtype);

	int plain = 0;
	const uint8_t *copy =
		wk_cpu_packs_find(mm->packs, op->wtype, op->w, op->rows, op->cols, &plain);
	const uint8_t *packed = copy && !plain && mm->k->gemm_r16[op->wtype] ? copy : NULL;

	memset(j, 0, sizeof(*j));
	j->k = mm->k;
	j->fn = packed ? mm->k->gemm_r16[op->wtype] : mm->k->gemm[op->wtype];
	j->g.rows = op->rows;
	j->g.cols = op->cols;
	j->g.w = packed ? packed : copy && plain ? copy : op->w;
	j->g.w_stride = (size_t)wk_qtype_row_bytes(op->wtype, (uint64_t)op->cols);
	j->g.panel_bytes = packed ? wk_cpu_pack_panel_bytes(op->wtype, op->rows, op->cols) : 0;
	j->g.strip_pf = mm->strip_pf;
	j->g.n = op->n;
	j->g.y = op->y;
	j->g.y_stride = (size_t)op->rows;
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
	const int *first;   /* [n_ops + 1] first unit (or activation row) of each job */
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

		j->fn(&j->g, r0, r1 < j->g.rows ? r1 : j->g.rows);
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
 * A run on several threads: units of 16 rows, the threads' ranges cut at
 * equal shares of the run's cost (a product's bytes times its tokens).
 * The hosts measured here give their two threads unequal speeds, for
 * seconds at a time (one thread's tasks 20-60 % slower than the other's,
 * either way round), and fixed tasks wait for the slower; pieces taken
 * from the ends let the faster one finish the other's range.  Which thread
 * computes a row changes none of its values.
 */
static void wk_cpu_mm_run_balanced(struct wk_cpu_mm *mm, struct wk_cpu_mm_multi *m, int threads)
{
	int n_units = m->first[m->n_ops], k = 0;
	double cost = 0, done = 0;
	uint32_t start = 0;

	for (int i = 0; i < m->n_ops; i++)
		cost += (double)m->jobs[i].g.w_stride * m->jobs[i].g.rows * m->jobs[i].g.n;
	for (int i = 0; i < m->n_ops && k < threads - 1; i++) {
		double uc = 16.0 * (double)m->jobs[i].g.w_stride * m->jobs[i].g.n;

		for (int u = m->first[i]; u < m->first[i + 1] && k < threads - 1; u++) {
			done += uc;
			while (k < threads - 1 && done * threads >= cost * (k + 1)) {
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
	size_t bytes = 0, off = 0;
	int decode = 1;
	enum cm_status st;

	if (n_ops <= 0 || n_ops > WK_CPU_MM_MAX_OPS)
		return CM_EINVAL;
	for (int i = 0; i < n_ops; i++) {
		enum wk_cpu_act act;
		size_t rb;

		if ((st = wk_cpu_mm_check(mm, &ops[i])) != CM_OK)
			return st;
		decode &= ops[i].n == 1;
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
	first = mm->first;
	first[0] = 0;
	mm->aq_first[0] = 0;
	for (int i = 0; i < n_ops; i++) {
		struct wk_cpu_mm_job *j = &mm->jobs[i];

		wk_cpu_mm_job_init(mm, &ops[i], j, wk_cpu_mm_same_x(mm, ops, i), &off);
		mm->aq_first[i + 1] = mm->aq_first[i] + (j->actq ? j->g.n : 0);
		first[i + 1] = first[i] + (j->g.rows + 15) / 16; /* units of 16 rows */
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
	/* Each kernel call computes whole output rows: which thread runs them,
	 * and which other products share the run, change no value. */
	struct wk_cpu_mm_multi m = { mm->jobs, first, n_ops };
	if (threads > 1 && first[n_ops] > 1)
		wk_cpu_mm_run_balanced(mm, &m, threads);
	else
		for (int i = 0; i < n_ops; i++)
			mm->jobs[i].fn(&mm->jobs[i].g, 0, mm->jobs[i].g.rows);
	return CM_OK;
}

enum cm_status wk_cpu_matmul(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			     int cols, const float *x, int n, float *y)
{
	struct wk_cpu_mm_op op = { wtype, w, rows, cols, x, n, y };

	return wk_cpu_matmul_multi(mm, &op, 1);
}
