/*
 * matmul.c - ISA selection and the matmul driver (see matmul.h): checks the
 * arguments, quantises the activations (in parallel over tokens), then runs
 * the chosen ISA's kernel over ranges of output rows (multiples of 64)
 * claimed by the pool threads.
 * The per-element arithmetic lives in the kernel files (kern_*.c).
 */
#include "worker/cpu/matmul.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/alloc.h"
#include "worker/cpu/internal.h"
#include "worker/model/quant.h"

struct wk_cpu_mm {
	struct wk_pool *pool;     /* borrowed */
	enum wk_cpu_isa isa;
	const struct wk_cpu_kernels *k;
	void *scratch_raw;        /* cm_malloc'd */
	uint8_t *scratch;         /* activation rows, 64-byte aligned in scratch_raw */
	size_t scratch_bytes;     /* usable bytes at scratch */
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

enum cm_status wk_cpu_matmul(struct wk_cpu_mm *mm, uint32_t wtype, const void *w, int rows,
			     int cols, const float *x, int n, float *y)
{
	enum cm_status st;
	if (!wk_qtype_supported(wtype) || mm->k->gemm[wtype] == NULL)
		return CM_EUNSUPPORTED;
	if (rows <= 0 || cols <= 0 || n <= 0 || cols % (int)wk_qtype_block_elems(wtype) != 0)
		return CM_EINVAL;

	struct wk_cpu_mm_job j = { 0 };
	j.k = mm->k;
	j.fn = mm->k->gemm[wtype];
	j.rows = rows;
	j.g.cols = cols;
	j.g.w = w;
	j.g.w_stride = (size_t)wk_qtype_row_bytes(wtype, (uint64_t)cols);
	j.g.n = n;
	j.g.y = y;
	j.g.y_stride = (size_t)rows;
	int threads = mm->pool ? wk_pool_threads(mm->pool) : 1;

	enum wk_cpu_act act = wk_cpu_act_of(mm->k, wtype);
	if (act == WK_CPU_ACT_F32) {
		j.g.x = (const uint8_t *)x;
		j.g.x_stride = 4 * (size_t)cols;
	} else {
		size_t rb = wk_cpu_act_row_bytes(act, cols);
		if ((size_t)n > WK_CPU_MM_SCRATCH_MAX / rb)
			return CM_ELIMIT;
		st = wk_cpu_mm_reserve(mm, rb * (size_t)n);
		if (st != CM_OK)
			return st;
		j.g.x = mm->scratch;
		j.g.x_stride = rb;
		j.actq = act == WK_CPU_ACT_Q8_32    ? mm->k->actq_q8_32
			 : act == WK_CPU_ACT_Q8_256 ? mm->k->actq_q8_256
						    : mm->k->actq_bf16;
		j.xf = x;
		if (threads > 1 && n > 1)
			wk_pool_run(mm->pool, wk_cpu_mm_actq_task, &j, n);
		else
			for (int t = 0; t < n; t++)
				wk_cpu_mm_actq_task(&j, t, 0);
	}

	/* Each task owns a fixed range of output rows: which thread runs it
	 * does not change any value. */
	j.chunk_rows = wk_cpu_mm_chunk_rows(rows, threads);
	int n_chunks = (rows + j.chunk_rows - 1) / j.chunk_rows;
	if (threads > 1 && n_chunks > 1)
		wk_pool_run(mm->pool, wk_cpu_mm_gemm_task, &j, n_chunks);
	else
		for (int c = 0; c < n_chunks; c++)
			wk_cpu_mm_gemm_task(&j, c, 0);
	return CM_OK;
}
