/*
 * test_matmul.c - worker/cpu/matmul.c and pool.c: every weight type on
 * every ISA this CPU has, against a double-precision reference built from
 * wk_dequantize_row; batch invariance bit for bit (n = 1, 2, 3, 5, 6, 7, 11 vs 64, one
 * vs two threads, other rows of X changed); argument refusals; the pool's
 * task claiming (each task exactly once, on a valid thread, over thousands
 * of back-to-back runs).
 *
 * Tolerance: float weights are exact after conversion, so only float32
 * accumulation error remains (1e-5 of sum |w x|).  Quantised weights see
 * the activations rounded to 8 bits: each x_k moves by at most
 * amax(block of k) / 254, so |y - ref| <= sum_k |w_k| * amax_k / 254 plus
 * the float error; the test checks that bound with 5% slack.  BF16
 * weights on avx512bf16 see x rounded to BF16: |y - ref| <= 2^-8 sum_k
 * |w_k x_k| plus the float error.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/alloc.h"
#include "worker/cpu/matmul.h"
#include "worker/cpu/pack.h"
#include "worker/cpu/pool.h"
#include "worker/model/quant.h"

static const uint32_t types[] = { WK_Q_F32, WK_Q_F16, WK_Q_BF16, WK_Q_Q4_0, WK_Q_Q4_1,
				  WK_Q_Q5_0, WK_Q_Q5_1, WK_Q_IQ4_NL, WK_Q_Q8_0, WK_Q_Q4_K, WK_Q_Q5_K,
				  WK_Q_Q6_K, WK_Q_Q2_K, WK_Q_Q3_K, WK_Q_IQ4_XS };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

struct fixture {
	struct wk_pool *pool1, *pool2;
	struct wk_cpu_mm *mm1, *mm2;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	if (f == NULL || wk_pool_new(1, &f->pool1) != CM_OK || wk_pool_new(2, &f->pool2) != CM_OK ||
	    wk_cpu_mm_new(f->pool1, &f->mm1) != CM_OK || wk_cpu_mm_new(f->pool2, &f->mm2) != CM_OK)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	wk_cpu_mm_free(f->mm1);
	wk_cpu_mm_free(f->mm2);
	wk_pool_free(f->pool1);
	wk_pool_free(f->pool2);
	free(f);
	return 0;
}

/* Random weights of `type`, quantised; returns malloc'd rows. */
static uint8_t *make_weights(uint32_t type, int rows, int cols)
{
	size_t rb = wk_qtype_row_bytes(type, (uint64_t)cols);
	uint8_t *w = malloc(rb * (size_t)rows);
	float *tmp = malloc(sizeof(float) * (size_t)cols);
	assert_non_null(w);
	assert_non_null(tmp);
	for (int r = 0; r < rows; r++) {
		for (int k = 0; k < cols; k++)
			tmp[k] = rnd() * (1.0f + (float)(r % 5)) + (r % 3 == 0 ? 0.3f : 0.0f);
		wk_quantize_row(type, tmp, w + rb * (size_t)r, (uint64_t)cols);
	}
	free(tmp);
	return w;
}

static void check_accuracy(struct wk_cpu_mm *mm, uint32_t type, int rows, int cols, int n)
{
	size_t rb = wk_qtype_row_bytes(type, (uint64_t)cols);
	uint8_t *w = make_weights(type, rows, cols);
	float *x = malloc(sizeof(float) * (size_t)n * cols);
	float *y = malloc(sizeof(float) * (size_t)n * rows);
	float *wf = malloc(sizeof(float) * (size_t)cols);
	assert_non_null(x);
	assert_non_null(y);
	assert_non_null(wf);
	for (int i = 0; i < n * cols; i++)
		x[i] = rnd() * (i % 17 == 0 ? 4.0f : 1.0f);
	assert_int_equal(wk_cpu_matmul(mm, type, w, rows, cols, x, n, y), CM_OK);
	int quant = type != WK_Q_F32 && type != WK_Q_F16 && type != WK_Q_BF16;
	int qb = (int)(wk_qtype_block_elems(type) == 32 ? 32 : 256);
	for (int r = 0; r < rows; r++) {
		wk_dequantize_row(type, w + rb * (size_t)r, wf, (uint64_t)cols);
		for (int t = 0; t < n; t++) {
			const float *xt = x + (size_t)t * cols;
			double ref = 0, mag = 0, qerr = 0;
			for (int k = 0; k < cols; k++) {
				ref += (double)wf[k] * xt[k];
				mag += fabs((double)wf[k] * xt[k]);
			}
			if (quant)
				for (int b = 0; b < cols / qb; b++) {
					double amax = 0, wsum = 0;
					for (int k = b * qb; k < (b + 1) * qb; k++) {
						amax = fmax(amax, fabs(xt[k]));
						wsum += fabs(wf[k]);
					}
					qerr += wsum * amax / 254.0;
				}
			if (type == WK_Q_BF16 && wk_cpu_mm_isa(mm) == WK_CPU_ISA_AVX512BF16)
				qerr = mag / 256.0; /* x rounded to BF16: |dx| <= 2^-8 |x| */
			double bound = qerr * 1.05 + 1e-5 * mag + 1e-30;
			double err = fabs((double)y[(size_t)t * rows + r] - ref);
			if (!(err <= bound))
				fail_msg("%s on %s: y[%d][%d] = %.9g, reference %.9g, error %g > bound %g",
					 wk_qtype_name(type), wk_cpu_isa_name(wk_cpu_mm_isa(mm)), t, r,
					 y[(size_t)t * rows + r], ref, err, bound);
		}
	}
	free(w);
	free(x);
	free(y);
	free(wf);
}

static void test_accuracy(void **state)
{
	struct fixture *f = *state;
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (!wk_cpu_isa_available((enum wk_cpu_isa)isa)) {
			printf("# skip ISA %s: not on this CPU\n", wk_cpu_isa_name((enum wk_cpu_isa)isa));
			continue;
		}
		assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)isa), CM_OK);
		for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
			check_accuracy(f->mm2, types[i], 37, 512, 5);
			check_accuracy(f->mm2, types[i], 3, 256, 1);
			if (wk_qtype_block_elems(types[i]) == 1) /* tails of the vector loops */
				check_accuracy(f->mm2, types[i], 21, 100, 6);
			if (wk_qtype_block_elems(types[i]) <= 32) /* 11 blocks: partial groups */
				check_accuracy(f->mm2, types[i], 19, 352, 9);
		}
	}
}

/* n random floats (rnd), never NULL. */
static float *rnd_floats(size_t n)
{
	float *x = malloc(sizeof(float) * n);
	assert_non_null(x);
	for (size_t i = 0; i < n; i++)
		x[i] = rnd();
	return x;
}

/* Y for tokens [t0, t0+n) of x computed with mm; copies into out. */
static void run(struct wk_cpu_mm *mm, uint32_t type, const uint8_t *w, int rows, int cols,
		const float *x, int t0, int n, float *out)
{
	assert_int_equal(wk_cpu_matmul(mm, type, w, rows, cols, x + (size_t)t0 * cols, n, out), CM_OK);
}

/*
 * Windows of 2, 3, 5, 6, 7 and 11 tokens at odd offsets of x's n, on mm_a
 * and mm_b in turn, against ya (all n tokens): every tile size of the
 * 16-row walks (8s, then the rest in one).  `what` names the case.
 */
static void check_windows(struct wk_cpu_mm *mm_a, struct wk_cpu_mm *mm_b, uint32_t type,
			  const uint8_t *w, int rows, int cols, const float *x, int n, const float *ya,
			  float *yb, const char *what)
{
	static const int win[] = { 2, 3, 5, 6, 7, 11 };

	for (size_t wi = 0; wi < sizeof win / sizeof win[0]; wi++) {
		const int m = win[wi];
		for (int t = (int)wi; t + m <= n; t += 9 + m) {
			run(wi % 2 ? mm_a : mm_b, type, w, rows, cols, x, t, m, yb);
			if (memcmp(ya + (size_t)t * rows, yb, sizeof(float) * m * rows) != 0)
				fail_msg("%s: tokens %d..%d differ between n=%d and n=%d", what, t,
					 t + m - 1, n, m);
		}
	}
}

static void batch_invariance(struct fixture *f, int cols, int only_small_blocks);

static void test_batch_invariance(void **state)
{
	struct fixture *f = *state;
	batch_invariance(f, 768, 0);
	batch_invariance(f, 352, 1); /* an odd number of 32-blocks */
	/* the float types' column chunks (kern_x86.h KX_FKC): two full, a
	 * ragged last one with a partial vector */
	batch_invariance(f, 2100, 2);
}

/* only_small_blocks: 1 the types of blocks <= 32, 2 the float types */
static void batch_invariance(struct fixture *f, int cols, int only_small_blocks)
{
	const int rows = 203, n = 64; /* several 64-row tasks, ragged last tile */
	float *x = malloc(sizeof(float) * n * cols), *x2 = malloc(sizeof(float) * n * cols);
	float *ya = malloc(sizeof(float) * n * rows), *yb = malloc(sizeof(float) * n * rows);
	assert_non_null(x);
	assert_non_null(x2);
	assert_non_null(ya);
	assert_non_null(yb);
	for (int i = 0; i < n * cols; i++)
		x[i] = rnd();
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
			continue;
		assert_int_equal(wk_cpu_mm_set_isa(f->mm1, (enum wk_cpu_isa)isa), CM_OK);
		assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)isa), CM_OK);
		for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
			uint32_t type = types[ti];
			if (only_small_blocks && wk_qtype_block_elems(type) > (only_small_blocks == 2 ? 1 : 32))
				continue;
			uint8_t *w = make_weights(type, rows, cols);
			/* n = 64 with two threads is the reference */
			run(f->mm2, type, w, rows, cols, x, 0, n, ya);
			/* one thread, same batch */
			run(f->mm1, type, w, rows, cols, x, 0, n, yb);
			assert_memory_equal(ya, yb, sizeof(float) * n * rows);
			/* every token alone, both thread counts */
			for (int t = 0; t < n; t++) {
				run(t % 2 ? f->mm1 : f->mm2, type, w, rows, cols, x, t, 1, yb);
				if (memcmp(ya + (size_t)t * rows, yb, sizeof(float) * rows) != 0)
					fail_msg("%s on %s: token %d differs between n=64 and n=1",
						 wk_qtype_name(type), wk_cpu_isa_name((enum wk_cpu_isa)isa), t);
			}
			char what[64];
			snprintf(what, sizeof what, "%s on %s", wk_qtype_name(type),
				 wk_cpu_isa_name((enum wk_cpu_isa)isa));
			check_windows(f->mm1, f->mm2, type, w, rows, cols, x, n, ya, yb, what);
			/* other rows of X changed: token 10 must not move */
			memcpy(x2, x, sizeof(float) * n * cols);
			for (int i = 0; i < n * cols; i++)
				if (i / cols != 10)
					x2[i] = rnd() * 3;
			run(f->mm2, type, w, rows, cols, x2, 0, n, yb);
			assert_memory_equal(ya + 10 * rows, yb + 10 * rows, sizeof(float) * rows);
			free(w);
		}
	}
	free(x);
	free(x2);
	free(ya);
	free(yb);
}

/*
 * Copied weights (wk_cpu_mm_pack: the rows16 layout of pack.h, or plain
 * rows where the ISA has no strip kernel for the type) give bit for bit the
 * values of the GGUF rows: every type on every ISA, ragged strips, token
 * counts 64 / 1 / 7, one and two threads; a rows16 copy under an ISA
 * without the kernels reads w; many matrices (the registry grows); bad
 * shapes refused; out of memory refused cleanly.
 */
/* A copy is found by its original's address, which must outlive the
 * wk_cpu_mm: each case packs into its own two. */
static int packed_case(struct fixture *f, enum wk_cpu_isa isa, uint32_t type, int rows, int cols,
		       const float *x, int n, float *ya, float *yb)
{
	struct wk_cpu_mm *p1, *p2;
	assert_int_equal(wk_cpu_mm_new(f->pool1, &p1), CM_OK);
	assert_int_equal(wk_cpu_mm_new(f->pool2, &p2), CM_OK);
	assert_int_equal(wk_cpu_mm_set_isa(p1, isa), CM_OK);
	assert_int_equal(wk_cpu_mm_set_isa(p2, isa), CM_OK);
	/* the strip prefetch changes no value: off in one, on in the other */
	wk_cpu_mm_set_strip_prefetch(p1, 0);
	wk_cpu_mm_set_strip_prefetch(p2, WK_CPU_PF_ALL | WK_CPU_PF_L2 | WK_CPU_PF_NEAR);
	assert_int_equal(wk_cpu_mm_strip_prefetch(p1), 0);
	assert_int_equal(wk_cpu_mm_strip_prefetch(p2), WK_CPU_PF_ALL | WK_CPU_PF_L2 | WK_CPU_PF_NEAR);
	uint8_t *w = make_weights(type, rows, cols);
	assert_non_null(w);
	run(f->mm2, type, w, rows, cols, x, 0, n, ya); /* unpacked, 2 threads */
	size_t before = wk_cpu_mm_packed_bytes(p1);
	int can = wk_cpu_mm_can_pack(p1, type);
	assert_int_equal(wk_cpu_mm_pack(p1, type, w, rows, cols), CM_OK);
	assert_int_equal(wk_cpu_mm_pack(p2, type, w, rows, cols), CM_OK);
	assert_int_equal(wk_cpu_mm_pack(p2, type, w, rows, cols), CM_OK); /* held: no second copy */
	if (can == 2)
		assert_true(wk_cpu_mm_packed_bytes(p1) >= before + wk_qtype_row_bytes(type, cols) * rows);
	else if (can == 1) /* plain: the rows */
		assert_int_equal(wk_cpu_mm_packed_bytes(p1), before + wk_qtype_row_bytes(type, cols) * rows);
	else
		assert_int_equal(wk_cpu_mm_packed_bytes(p1), before);
	assert_int_equal(wk_cpu_mm_packed_bytes(p1) - before, wk_cpu_mm_pack_bytes(p1, type, rows, cols));
	run(p2, type, w, rows, cols, x, 0, n, yb);
	if (memcmp(ya, yb, sizeof(float) * n * rows) != 0)
		fail_msg("%s %dx%d on %s: packed n=%d differs from unpacked", wk_qtype_name(type), rows,
			 cols, wk_cpu_isa_name(wk_cpu_mm_isa(p1)), n);
	run(p1, type, w, rows, cols, x, 0, n, yb);
	assert_memory_equal(ya, yb, sizeof(float) * n * rows);
	for (int t = 0; t < n; t++) {
		run(t % 2 ? p1 : p2, type, w, rows, cols, x, t, 1, yb);
		if (memcmp(ya + (size_t)t * rows, yb, sizeof(float) * rows) != 0)
			fail_msg("%s %dx%d: packed token %d alone differs", wk_qtype_name(type), rows, cols, t);
	}
	char what[64];
	snprintf(what, sizeof what, "%s %dx%d packed", wk_qtype_name(type), rows, cols);
	check_windows(p1, p2, type, w, rows, cols, x, n, ya, yb, what);
	/* a rows16 copy, switched to another ISA: read by that ISA's 16-row
	 * kernels where it has them (the layout is the same), else w (scalar
	 * has none): what that ISA computes from w, bit for bit */
	for (int i2 = 0; can == 2 && i2 < WK_CPU_ISA_COUNT_; i2++) {
		if (i2 == (int)isa || !wk_cpu_isa_available((enum wk_cpu_isa)i2))
			continue;
		assert_int_equal(wk_cpu_mm_set_isa(p1, (enum wk_cpu_isa)i2), CM_OK);
		assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)i2), CM_OK);
		if (i2 == WK_CPU_ISA_SCALAR)
			assert_int_equal(wk_cpu_mm_can_pack(p1, type), 1);
		run(f->mm2, type, w, rows, cols, x, 0, 3, ya);
		run(p1, type, w, rows, cols, x, 0, 3, yb);
		if (memcmp(ya, yb, sizeof(float) * 3 * rows) != 0)
			fail_msg("%s %dx%d packed on %s, run on %s: differs from unpacked", wk_qtype_name(type),
				 rows, cols, wk_cpu_isa_name(isa), wk_cpu_isa_name((enum wk_cpu_isa)i2));
	}
	assert_int_equal(wk_cpu_mm_set_isa(f->mm2, isa), CM_OK);
	wk_cpu_mm_free(p1);
	wk_cpu_mm_free(p2);
	free(w);
	return can;
}

static void test_packed(void **state)
{
	struct fixture *f = *state;
	const int n = 64, cols = 4352;
	/* 2053 rows: 129 strips, packed by several pool tasks; 4352 and 2112
	 * columns: the 32-value types' copies in panels (pack.h), 3 (64 + 64
	 * + 8 blocks of 32) and 2 (64 + 2); the 256-value types' are one
	 * panel at any width (17 blocks of 256: a strip of 16 x 4352 Q6_K is
	 * 57 KB); 1040 rows: 65 strips, a panel walk of one token over two
	 * runs of strips on one thread */
	static const int shapes[][2] = { { 203, 768 }, { 16, 768 }, { 5, 352 }, { 131, 352 },
					 { 2053, 256 }, { 37, 4352 }, { 1040, 2112 } };
	float *x = malloc(sizeof(float) * n * cols);
	float *ya = malloc(sizeof(float) * n * 2053), *yb = malloc(sizeof(float) * n * 2053);
	assert_non_null(x);
	assert_non_null(ya);
	assert_non_null(yb);
	for (int i = 0; i < n * cols; i++)
		x[i] = rnd();
	int packed_any = 0;
	/* which copies are in panels: the 32-value types past 2048 columns
	 * (Q8_0 1024), never the 256-value ones */
	assert_int_not_equal(wk_cpu_pack_panel_bytes(WK_Q_Q4_0, 2048, 5632), 0);
	assert_int_not_equal(wk_cpu_pack_panel_bytes(WK_Q_Q8_0, 2048, 2048), 0);
	assert_int_equal(wk_cpu_pack_panel_bytes(WK_Q_Q4_0, 2048, 2048), 0);
	for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
		if (wk_qtype_block_elems(types[ti]) == 256)
			assert_int_equal(wk_cpu_pack_panel_bytes(types[ti], 2048, 65536), 0);
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
			continue;
		assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)isa), CM_OK);
		for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
			for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
				if (shapes[s][1] % (int)wk_qtype_block_elems(types[ti]) != 0)
					continue;
				packed_any |= packed_case(f, (enum wk_cpu_isa)isa, types[ti], shapes[s][0],
							  shapes[s][1], x, n, ya, yb);
			}
	}
	/* bad shapes; many matrices in one registry */
	struct wk_cpu_mm *p;
	assert_int_equal(wk_cpu_mm_new(f->pool2, &p), CM_OK);
	if (packed_any) {
		assert_int_equal(wk_cpu_mm_set_isa(p, wk_cpu_isa_default()), CM_OK);
		uint8_t *w = make_weights(WK_Q_Q8_0, 8 * 48, 64);
		size_t rb = wk_qtype_row_bytes(WK_Q_Q8_0, 64);
		assert_int_equal(wk_cpu_mm_pack(p, WK_Q_Q8_0, w, 0, 64), CM_EINVAL);
		assert_int_equal(wk_cpu_mm_pack(p, WK_Q_Q8_0, w, 8, 48), CM_EINVAL);
		assert_int_equal(wk_cpu_mm_pack(p, WK_Q_Q8_0, NULL, 8, 64), CM_EINVAL);
		assert_int_equal(wk_cpu_mm_set_isa(f->mm2, wk_cpu_mm_isa(p)), CM_OK);
		if (wk_cpu_mm_can_pack(p, WK_Q_Q8_0)) {
			for (int m = 0; m < 48; m++)
				assert_int_equal(wk_cpu_mm_pack(p, WK_Q_Q8_0, w + rb * 8 * (size_t)m, 8, 64), CM_OK);
			for (int m = 0; m < 48; m++) {
				run(f->mm2, WK_Q_Q8_0, w + rb * 8 * (size_t)m, 8, 64, x, 0, 2, ya);
				run(p, WK_Q_Q8_0, w + rb * 8 * (size_t)m, 8, 64, x, 0, 2, yb);
				assert_memory_equal(ya, yb, sizeof(float) * 2 * 8);
			}
			/* out of memory: refused, nothing held, the next try works */
			uint8_t *w2 = make_weights(WK_Q_Q4_0, 32, 64);
			size_t held = wk_cpu_mm_packed_bytes(p);
			cm_alloc_fail_after(0);
			enum cm_status st = wk_cpu_mm_pack(p, WK_Q_Q4_0, w2, 32, 64);
			cm_alloc_fail_reset();
			assert_int_equal(st, CM_ENOMEM);
			assert_int_equal(wk_cpu_mm_packed_bytes(p), held);
			assert_int_equal(wk_cpu_mm_pack(p, WK_Q_Q4_0, w2, 32, 64), CM_OK);
			assert_true(wk_cpu_mm_packed_bytes(p) > held);
			free(w2);
		}
		free(w);
	}
	wk_cpu_mm_free(p);
	free(x);
	free(ya);
	free(yb);
}

/*
 * The tile drivers take the tokens in groups whose activation rows fit in
 * 512 KiB (kern_x86.h's kx_token_group): 130 tokens of 4096 columns are
 * five groups of float rows, two of Q8_32 or Q8_256 rows.  Each token of the batch gives what it gives alone, on
 * every ISA, for the types the tile drivers run.
 */
static void test_token_groups(void **state)
{
	struct fixture *f = *state;
	const int rows = 19, cols = 4096, n = 130;
	static const uint32_t tt[] = { WK_Q_F32, WK_Q_F16, WK_Q_BF16, WK_Q_Q8_0, WK_Q_Q4_K };
	float *x = rnd_floats((size_t)n * cols);
	float *ya = malloc(sizeof(float) * n * rows), *yb = malloc(sizeof(float) * rows);
	assert_non_null(ya);
	assert_non_null(yb);
	for (size_t ti = 0; ti < sizeof tt / sizeof tt[0]; ti++) {
		uint8_t *w = make_weights(tt[ti], rows, cols);
		assert_non_null(w);
		for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
			if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
				continue;
			assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)isa), CM_OK);
			run(f->mm2, tt[ti], w, rows, cols, x, 0, n, ya);
			for (int t = 0; t < n; t++) {
				run(f->mm2, tt[ti], w, rows, cols, x, t, 1, yb);
				if (memcmp(ya + (size_t)t * rows, yb, sizeof(float) * rows) != 0)
					fail_msg("%s on %s: token %d of %d differs from alone", wk_qtype_name(tt[ti]),
						 wk_cpu_isa_name((enum wk_cpu_isa)isa), t, n);
			}
		}
		free(w);
	}
	assert_int_equal(wk_cpu_mm_set_isa(f->mm2, wk_cpu_isa_default()), CM_OK);
	free(x);
	free(ya);
	free(yb);
}

/*
 * The 16-row kernels of Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 fold the same exact
 * block integers in the same float sequence in the AVX2 and AVX-512
 * builds (kern_avx2_s16.h): the two give the same bits, one token or
 * many, mapped or packed.
 */
static void test_q32_isas_agree(void **state)
{
	struct fixture *f = *state;
	const int rows = 203, cols = 352, n = 9;
	static const uint32_t tt[] = { WK_Q_Q4_0, WK_Q_Q4_1, WK_Q_Q5_0, WK_Q_Q5_1, WK_Q_Q8_0 };
	if (!wk_cpu_isa_available(WK_CPU_ISA_AVX512))
		skip();
	float *x = rnd_floats((size_t)n * cols);
	float *ya = malloc(sizeof(float) * n * rows), *yb = malloc(sizeof(float) * n * rows);
	assert_non_null(ya);
	assert_non_null(yb);
	for (size_t ti = 0; ti < sizeof tt / sizeof tt[0]; ti++) {
		uint8_t *w = make_weights(tt[ti], rows, cols);
		assert_non_null(w);
		for (int tokens = 1; tokens <= n; tokens += n - 1) {
			assert_int_equal(wk_cpu_mm_set_isa(f->mm2, WK_CPU_ISA_AVX2), CM_OK);
			run(f->mm2, tt[ti], w, rows, cols, x, 0, tokens, ya);
			assert_int_equal(wk_cpu_mm_set_isa(f->mm2, WK_CPU_ISA_AVX512), CM_OK);
			run(f->mm2, tt[ti], w, rows, cols, x, 0, tokens, yb);
			if (memcmp(ya, yb, sizeof(float) * (size_t)tokens * rows) != 0)
				fail_msg("%s, %d tokens: AVX2 and AVX-512 differ", wk_qtype_name(tt[ti]), tokens);
		}
		free(w);
	}
	assert_int_equal(wk_cpu_mm_set_isa(f->mm2, wk_cpu_isa_default()), CM_OK);
	free(x);
	free(ya);
	free(yb);
}

/*
 * Issue 13, finding 16: NaN or infinite activations (a broken model) made
 * the activation quantiser's sum overflow (UBSan).  Every type and ISA
 * takes them without undefined behaviour (the sanitizer build aborts on
 * it); the finite rows of the output stay finite.
 */
static void test_nonfinite_activations(void **state)
{
	struct fixture *f = *state;
	int rows = 8, cols = 256;
	float *x = malloc(sizeof(float) * 2 * cols), *y = malloc(sizeof(float) * 2 * rows);

	(void)state;
	assert_non_null(x);
	assert_non_null(y);
	for (int i = 0; i < 2 * cols; i++)
		x[i] = rnd();
	for (int i = 0; i < cols; i += 7)
		x[i] = i % 2 ? NAN : (i % 3 ? INFINITY : -INFINITY); /* row 0 only */
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		uint8_t *w = make_weights(types[t], rows, cols);

		for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
			if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
				continue;
			assert_int_equal(wk_cpu_mm_set_isa(f->mm2, (enum wk_cpu_isa)isa), CM_OK);
			assert_int_equal(wk_cpu_matmul(f->mm2, types[t], w, rows, cols, x, 2, y), CM_OK);
			for (int r = 0; r < rows; r++)
				if (!isfinite(y[rows + r]))
					fail_msg("%s on %s: row 1 (finite input) gave %f", wk_qtype_name(types[t]),
						 wk_cpu_isa_name((enum wk_cpu_isa)isa), (double)y[rows + r]);
		}
		free(w);
	}
	free(x);
	free(y);
}

static void test_refusals(void **state)
{
	struct fixture *f = *state;
	float x[256] = { 0 }, y[4];
	uint8_t w[4 * 292] = { 0 };
	assert_int_equal(wk_cpu_matmul(f->mm2, WK_Q_Q8_K, w, 1, 256, x, 1, y), CM_EUNSUPPORTED);
	assert_int_equal(wk_cpu_matmul(f->mm2, 4, w, 1, 256, x, 1, y), CM_EUNSUPPORTED);
	assert_int_equal(wk_cpu_matmul(f->mm2, WK_Q_Q4_K, w, 1, 200, x, 1, y), CM_EINVAL);
	assert_int_equal(wk_cpu_matmul(f->mm2, WK_Q_Q4_0, w, 0, 32, x, 1, y), CM_EINVAL);
	assert_int_equal(wk_cpu_matmul(f->mm2, WK_Q_F32, w, 1, 32, x, 0, y), CM_EINVAL);
	assert_int_equal(wk_cpu_mm_set_isa(f->mm2, WK_CPU_ISA_COUNT_), CM_EUNSUPPORTED);
	assert_string_equal(wk_cpu_isa_name(WK_CPU_ISA_AVX2), "avx2");
	assert_true(wk_cpu_isa_available(WK_CPU_ISA_SCALAR));
}

/*
 * The default ISA: available, never below avx512 where that is; a name in
 * SLUICE_CPU_ISA picks that ISA where the CPU has it (avx512bf16 too,
 * which the default takes only on AMD), and an unknown name or one the
 * CPU lacks falls back to the default.
 */
static void test_isa_default(void **state)
{
	(void)state;
	const char *saved = getenv("SLUICE_CPU_ISA");
	char keep[32] = "";
	if (saved != NULL)
		snprintf(keep, sizeof keep, "%s", saved);
	unsetenv("SLUICE_CPU_ISA");
	const enum wk_cpu_isa def = wk_cpu_isa_default();
	assert_true(wk_cpu_isa_available(def));
	if (wk_cpu_isa_available(WK_CPU_ISA_AVX512))
		assert_true(def >= WK_CPU_ISA_AVX512);
	else if (wk_cpu_isa_available(WK_CPU_ISA_AVX2))
		assert_int_equal(def, WK_CPU_ISA_AVX2);
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		setenv("SLUICE_CPU_ISA", wk_cpu_isa_name((enum wk_cpu_isa)isa), 1);
		assert_int_equal(wk_cpu_isa_default(),
				 wk_cpu_isa_available((enum wk_cpu_isa)isa) ? (enum wk_cpu_isa)isa : def);
	}
	setenv("SLUICE_CPU_ISA", "avx1024", 1);
	assert_int_equal(wk_cpu_isa_default(), def);
	if (saved != NULL)
		setenv("SLUICE_CPU_ISA", keep, 1);
	else
		unsetenv("SLUICE_CPU_ISA");
}

/* Allocation failures are reported, not fatal, and leave the context usable. */
static void test_alloc_failures(void **state)
{
	(void)state;
	struct wk_pool *pool = NULL;
	struct wk_cpu_mm *mm = NULL;
	cm_alloc_fail_after(0);
	assert_int_equal(wk_pool_new(2, &pool), CM_ENOMEM);
	assert_null(pool);
	cm_alloc_fail_after(1); /* the pool struct, then the worker array fails */
	assert_int_equal(wk_pool_new(2, &pool), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(wk_pool_new(2, &pool), CM_OK);
	cm_alloc_fail_after(0);
	assert_int_equal(wk_cpu_mm_new(pool, &mm), CM_ENOMEM);
	cm_alloc_fail_reset();
	assert_int_equal(wk_cpu_mm_new(pool, &mm), CM_OK);

	enum { ROWS = 8, COLS = 256, N = 3 };
	uint8_t *w = make_weights(WK_Q_Q8_0, ROWS, COLS);
	float x[N * COLS], y[N * ROWS], y2[N * ROWS];
	for (int i = 0; i < N * COLS; i++)
		x[i] = rnd();
	cm_alloc_fail_after(0); /* the activation scratch cannot grow */
	assert_int_equal(wk_cpu_matmul(mm, WK_Q_Q8_0, w, ROWS, COLS, x, N, y), CM_ENOMEM);
	/* float weights need no scratch */
	uint8_t *wf = make_weights(WK_Q_F32, ROWS, COLS);
	assert_int_equal(wk_cpu_matmul(mm, WK_Q_F32, wf, ROWS, COLS, x, N, y), CM_OK);
	cm_alloc_fail_reset();
	assert_int_equal(wk_cpu_matmul(mm, WK_Q_Q8_0, w, ROWS, COLS, x, N, y), CM_OK);
	assert_int_equal(wk_cpu_matmul(mm, WK_Q_Q8_0, w, ROWS, COLS, x, N, y2), CM_OK);
	assert_memory_equal(y, y2, sizeof y);
	free(w);
	free(wf);
	wk_cpu_mm_free(mm);
	wk_pool_free(pool);
}

/*
 * wk_cpu_matmul_multi: products of mixed types, shapes and batch sizes (two
 * pairs sharing their x, as a mixture of experts' gate and up) in one run
 * give every y bit for bit as wk_cpu_matmul alone, on every ISA, 1 and 2
 * threads; a bad op refuses the whole call before anything runs.
 */
static void test_matmul_multi(void **state)
{
	struct fixture *f = *state;
	enum { COLS = 512, NOPS = 6 };
	static const uint32_t mtypes[NOPS] = { WK_Q_Q4_K, WK_Q_Q4_K, WK_Q_Q8_0, WK_Q_F16,
					      WK_Q_Q5_0, WK_Q_Q6_K };
	static const int rows[NOPS] = { 192, 192, 64, 320, 128, 576 };
	/* up to 8 tokens a product is cut by bytes, 12 by the compute split:
	 * both in one run; the F16 product quantises nothing (a job without
	 * activation rows between others) */
	static const int ns[NOPS] = { 3, 3, 1, 5, 1, 12 };
	struct wk_cpu_mm_op ops[NOPS];
	uint8_t *w[NOPS];
	float *x = malloc(sizeof(float) * 14 * COLS), *ya[NOPS], *yb[NOPS];

	assert_non_null(x);
	for (int i = 0; i < 14 * COLS; i++)
		x[i] = rnd();
	for (int i = 0; i < NOPS; i++) {
		w[i] = make_weights(mtypes[i], rows[i], COLS);
		ya[i] = malloc(sizeof(float) * (size_t)(ns[i] * rows[i]));
		yb[i] = malloc(sizeof(float) * (size_t)(ns[i] * rows[i]));
		assert_non_null(ya[i]);
		assert_non_null(yb[i]);
		/* ops 0 and 1 share x (quantised once); the others start elsewhere */
		ops[i] = (struct wk_cpu_mm_op){ mtypes[i], w[i], rows[i], COLS,
						x + (i < 2 ? 0 : (i % 3) * COLS), ns[i], yb[i] };
	}
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
			continue;
		for (int p = 0; p < 2; p++) {
			struct wk_cpu_mm *mm = p ? f->mm2 : f->mm1;

			assert_int_equal(wk_cpu_mm_set_isa(mm, (enum wk_cpu_isa)isa), CM_OK);
			for (int i = 0; i < NOPS; i++)
				assert_int_equal(wk_cpu_matmul(mm, mtypes[i], w[i], rows[i], COLS,
							       ops[i].x, ns[i], ya[i]), CM_OK);
			assert_int_equal(wk_cpu_matmul_multi(mm, ops, NOPS), CM_OK);
			for (int i = 0; i < NOPS; i++)
				assert_memory_equal(ya[i], yb[i], sizeof(float) * (size_t)(ns[i] * rows[i]));
		}
	}
	/* refusals: nothing written */
	memset(yb[0], 0, sizeof(float) * (size_t)(ns[0] * rows[0]));
	ops[4].cols = 500; /* Q5_0 needs multiples of 32 */
	assert_int_equal(wk_cpu_matmul_multi(f->mm2, ops, NOPS), CM_EINVAL);
	for (int i = 0; i < ns[0] * rows[0]; i++)
		assert_true(yb[0][i] == 0.0f);
	assert_int_equal(wk_cpu_matmul_multi(f->mm2, ops, 0), CM_EINVAL);
	assert_int_equal(wk_cpu_matmul_multi(f->mm2, ops, WK_CPU_MM_MAX_OPS + 1), CM_EINVAL);
	ops[4].cols = COLS;
	ops[4].wtype = WK_Q_Q8_K; /* no kernel: an activation format */
	assert_int_equal(wk_cpu_matmul_multi(f->mm2, ops, NOPS), CM_EUNSUPPORTED);
	for (int i = 0; i < NOPS; i++) {
		free(w[i]);
		free(ya[i]);
		free(yb[i]);
	}
	free(x);
}

/*
 * A run's rows are cut into 16-row units taken from the ends of per-thread
 * ranges (matmul.c): on 1, 2, 3 and 5 threads (more threads than this
 * machine's cores: ranges are finished by other threads than their
 * owners, some are empty) every output row is written, with the
 * one-thread values bit for bit, packed and mapped rows, ragged last
 * strips, products of unequal bytes in one run, 1, 3 and 12 tokens.
 */
static void test_balanced_runs(void **state)
{
	(void)state;
	enum { NOPS = 5, ROUNDS = 100 };
	static const uint32_t mtypes[NOPS] = { WK_Q_Q4_K, WK_Q_Q8_0, WK_Q_F16, WK_Q_Q6_K, WK_Q_Q4_K };
	static const int rows[NOPS] = { 200, 16, 328, 1000, 8 };
	static const int cols[NOPS] = { 512, 256, 256, 768, 256 };
	static const int nthreads[4] = { 1, 2, 3, 5 };
	struct wk_cpu_mm_op ops[NOPS];
	uint8_t *w[NOPS];
	float *x = malloc(sizeof(float) * 12 * 768), *ref[NOPS], *y[NOPS];

	assert_non_null(x);
	for (int i = 0; i < 12 * 768; i++)
		x[i] = rnd();
	for (int i = 0; i < NOPS; i++) {
		w[i] = make_weights(mtypes[i], rows[i], cols[i]);
		ref[i] = malloc(sizeof(float) * 12 * (size_t)rows[i]);
		y[i] = malloc(sizeof(float) * 12 * (size_t)rows[i]);
		assert_non_null(ref[i]);
		assert_non_null(y[i]);
	}
	for (int c = 0; c < 3 * WK_CPU_ISA_COUNT_; c++) { /* 1, 3, then 12 tokens */
		const int n = c < WK_CPU_ISA_COUNT_ ? 1 : c < 2 * WK_CPU_ISA_COUNT_ ? 3 : 12,
			  isa = c % WK_CPU_ISA_COUNT_;

		if (!wk_cpu_isa_available((enum wk_cpu_isa)isa))
			continue;
		for (int packed = 0; packed < 2; packed++)
			for (int p = 0; p < 4; p++) {
				struct wk_pool *pool;
				struct wk_cpu_mm *mm;

				assert_int_equal(wk_pool_new(nthreads[p], &pool), CM_OK);
				assert_int_equal(wk_cpu_mm_new(pool, &mm), CM_OK);
				assert_int_equal(wk_cpu_mm_set_isa(mm, (enum wk_cpu_isa)isa), CM_OK);
				for (int i = 0; packed && i < NOPS; i++)
					if (wk_cpu_mm_can_pack(mm, mtypes[i]))
						assert_int_equal(wk_cpu_mm_pack(mm, mtypes[i], w[i], rows[i],
										cols[i]),
								 CM_OK);
				for (int i = 0; i < NOPS; i++)
					ops[i] = (struct wk_cpu_mm_op){ mtypes[i], w[i], rows[i], cols[i],
									x, n, y[i] };
				for (int round = 0; round < (p ? ROUNDS : 1); round++) {
					for (int i = 0; i < NOPS; i++)
						for (int r = 0; r < n * rows[i]; r++)
							y[i][r] = NAN;
					assert_int_equal(wk_cpu_matmul_multi(mm, ops, NOPS), CM_OK);
					for (int i = 0; i < NOPS; i++) {
						size_t yb = sizeof(float) * (size_t)(n * rows[i]);
						if (p == 0) {
							memcpy(ref[i], y[i], yb);
							for (int r = 0; r < n * rows[i]; r++)
								assert_false(isnan(ref[i][r]));
						} else if (memcmp(ref[i], y[i], yb))
							fail_msg("%s %d x %d, %d tokens, on %s, %d threads, "
								 "%s, round %d: not the one-thread values",
								 wk_qtype_name(mtypes[i]), rows[i], cols[i], n,
								 wk_cpu_isa_name((enum wk_cpu_isa)isa),
								 nthreads[p], packed ? "packed" : "mapped",
								 round);
					}
				}
				wk_cpu_mm_free(mm);
				wk_pool_free(pool);
			}
	}
	for (int i = 0; i < NOPS; i++) {
		free(w[i]);
		free(ref[i]);
		free(y[i]);
	}
	free(x);
}

struct pool_rec {
	atomic_int hits[100];
	int thread_of[100];
};

static void pool_task(void *ctx, int task, int thread)
{
	struct pool_rec *p = ctx;
	atomic_fetch_add(&p->hits[task], 1);
	p->thread_of[task] = thread;
}

static void test_pool(void **state)
{
	(void)state;
	for (int nt = 1; nt <= 3; nt++) {
		struct wk_pool *pool;
		assert_int_equal(wk_pool_new(nt, &pool), CM_OK);
		assert_int_equal(wk_pool_threads(pool), nt);
		for (int round = 0; round < 5000; round++) {
			struct pool_rec rec;
			memset(&rec, 0, sizeof rec);
			int n = 1 + round % 100;
			wk_pool_run(pool, pool_task, &rec, n);
			for (int k = 0; k < 100; k++) {
				assert_int_equal(atomic_load(&rec.hits[k]), k < n ? 1 : 0);
				if (k < n)
					assert_true(rec.thread_of[k] >= 0 && rec.thread_of[k] < nt);
			}
		}
		wk_pool_run(pool, pool_task, NULL, 0); /* no tasks: nothing runs */
		wk_pool_free(pool);
	}
	struct wk_pool *bad;
	assert_int_equal(wk_pool_new(0, &bad), CM_EINVAL);
	assert_null(bad);
	wk_pool_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_alloc_failures),
		cmocka_unit_test(test_isa_default),
		cmocka_unit_test_setup_teardown(test_accuracy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_invariance, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_matmul_multi, setup, teardown),
		cmocka_unit_test(test_balanced_runs),
		cmocka_unit_test_setup_teardown(test_nonfinite_activations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_q32_isas_agree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_groups, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
