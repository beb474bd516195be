/*
 * test_ops.c - worker/cpu/ops.c on every ISA this CPU has: expf accuracy,
 * RMS norm, softmax (incl. masked entries), SwiGLU, add, F16 dot / axpy /
 * conversion (the hardware conversion must agree with quant.c's), and
 * rotary embedding in both pairings with frequency factors, all against
 * double-precision references; the attention ops against the per-pair
 * dot / axpy calls, bit for bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "worker/cpu/ops.h"
#include "worker/model/quant.h"

static uint64_t rng = 0x1234567887654321ull;
static float rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void close_rel(double got, double want, double tol, const char *what, int i)
{
	double err = fabs(got - want);
	if (!(err <= tol * fabs(want) + 1e-30))
		fail_msg("%s on %s, index %d: got %.9g want %.9g (tol %g)", what,
			 wk_cpu_isa_name(wk_cpu_ops_isa()), i, got, want, tol);
}

static void each_isa(void (*fn)(void))
{
	for (int isa = 0; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (wk_cpu_ops_set_isa((enum wk_cpu_isa)isa) != CM_OK)
			continue;
		fn();
	}
}

static void check_expf(void)
{
	for (int i = 0; i <= 200000; i++) {
		float x = -90.0f + 179.0f * (float)i / 200000.0f;
		float got = wk_cpu_expf(x);
		if (x < -87.3f)
			assert_true(got == 0.0f);
		else if (x <= 88.3f)
			close_rel(got, exp((double)x), 4e-7, "expf", i);
	}
	assert_true(wk_cpu_expf(0.0f) == 1.0f);
	assert_true(wk_cpu_expf(-INFINITY) == 0.0f);
}

static void check_norm_softmax(void)
{
	enum { N = 2048 + 13 };
	static float x[N], w[N], out[N];
	for (int i = 0; i < N; i++) {
		x[i] = rnd() * 3;
		w[i] = 1 + rnd() * 0.5f;
	}
	double ss = 0;
	for (int i = 0; i < N; i++)
		ss += (double)x[i] * x[i];
	double scale = 1.0 / sqrt(ss / N + 1e-5);
	wk_cpu_rmsnorm(out, x, w, N, 1e-5f);
	for (int i = 0; i < N; i++)
		close_rel(out[i], x[i] * scale * w[i], 2e-6, "rmsnorm", i);
	memcpy(out, x, sizeof x);
	wk_cpu_rmsnorm(out, out, w, N, 1e-5f); /* in place */
	for (int i = 0; i < N; i++)
		close_rel(out[i], x[i] * scale * w[i], 2e-6, "rmsnorm in place", i);

	/* softmax with some masked entries */
	for (int n = 1; n < 300; n += 37) {
		for (int i = 0; i < n; i++)
			out[i] = (i % 5 == 3) ? -INFINITY : x[i] * 4;
		double mx = -INFINITY, sum = 0;
		for (int i = 0; i < n; i++)
			mx = fmax(mx, out[i]);
		for (int i = 0; i < n; i++)
			sum += exp((double)out[i] - mx);
		double want[300];
		for (int i = 0; i < n; i++)
			want[i] = exp((double)out[i] - mx) / sum;
		wk_cpu_softmax(out, n);
		for (int i = 0; i < n; i++) {
			if (i % 5 == 3)
				assert_true(out[i] == 0.0f);
			else
				close_rel(out[i], want[i], 2e-6, "softmax", i);
		}
	}
	for (int i = 0; i < 4; i++)
		out[i] = -INFINITY;
	wk_cpu_softmax(out, 4);
	for (int i = 0; i < 4; i++)
		assert_true(out[i] == 0.0f);
	/* the maximum wherever it is (vector lanes, the tail): one entry of 300
	 * overflows e^x unless the softmax subtracts exactly it */
	for (int n = 1; n < 100; n += 7)
		for (int at = 0; at < n; at += 3) {
			for (int i = 0; i < n; i++)
				out[i] = x[i];
			out[at] = 300;
			wk_cpu_softmax(out, n);
			assert_true(out[at] > 0.999f && out[at] <= 1.0f);
		}
	/* scale: each product rounded once, as the scalar product */
	memcpy(out, x, sizeof x);
	wk_cpu_scale(out, N - 2, 0.125f * 1.1f);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == (i < N - 2 ? x[i] * (0.125f * 1.1f) : x[i]));

	/* SwiGLU and add */
	static float g[N], u[N];
	for (int i = 0; i < N; i++) {
		g[i] = rnd() * 12;
		u[i] = rnd();
	}
	wk_cpu_silu_mul(out, g, u, N);
	for (int i = 0; i < N; i++)
		close_rel(out[i], (double)g[i] / (1 + exp(-(double)g[i])) * u[i], 2e-6, "silu_mul", i);
	memcpy(out, g, sizeof g);
	wk_cpu_add(out, u, N);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == g[i] + u[i]);
}

static void check_f16(void)
{
	enum { N = 128 + 7 };
	uint16_t h[N], h2[N];
	float a[N], b[N], y[N];
	for (int i = 0; i < N; i++) {
		a[i] = rnd() * 10;
		b[i] = rnd();
		y[i] = rnd();
	}
	a[3] = 1e-6f;     /* subnormal half */
	a[4] = 70000.0f;  /* overflow to inf */
	a[5] = 1.0f + 0x1p-11f; /* tie */
	wk_cpu_f32_to_f16(h, a, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(h[i], wk_f32_to_f16(a[i]));
	a[4] = 7.0f;
	wk_cpu_f32_to_f16(h, a, N);
	double dot = 0, mag = 0;
	for (int i = 0; i < N; i++) {
		dot += (double)wk_f16_to_f32(h[i]) * b[i];
		mag += fabs((double)wk_f16_to_f32(h[i]) * b[i]);
	}
	float got = wk_cpu_dot_f16(h, b, N);
	assert_true(fabs(got - dot) <= 1e-6 * mag);
	for (int n = 0; n <= N; n += 9) {
		memcpy(h2, h, sizeof h);
		float yy[N];
		memcpy(yy, y, sizeof y);
		wk_cpu_axpy_f16(yy, 0.75f, h2, n);
		for (int i = 0; i < N; i++) {
			double want = i < n ? y[i] + 0.75 * wk_f16_to_f32(h[i]) : y[i];
			assert_true(fabs(yy[i] - want) <= 1e-6 * (fabs(want) + 1));
		}
	}
}

/* dot_f32, axpy_f32 against double; gelu against the libm tanh form
 * (1e-6 absolute, and exact saturation at the ends) */
static void check_f32_gelu(void)
{
	enum { N = 512 + 5 };
	float a[N], b[N], y[N], g[N];
	double dot = 0, mag = 0;

	for (int i = 0; i < N; i++) {
		a[i] = rnd() * 4;
		b[i] = rnd();
		y[i] = rnd();
		dot += (double)a[i] * b[i];
		mag += fabs((double)a[i] * b[i]);
	}
	for (int n = 0; n <= N; n += 47) {
		double d = 0;

		for (int i = 0; i < n; i++)
			d += (double)a[i] * b[i];
		assert_true(fabs(wk_cpu_dot_f32(a, b, n) - d) <= 1e-6 * (mag + 1));
	}
	assert_true(fabs(wk_cpu_dot_f32(a, b, N) - dot) <= 1e-6 * mag);
	memcpy(g, y, sizeof y);
	wk_cpu_axpy_f32(g, -1.5f, a, N - 3);
	for (int i = 0; i < N; i++)
		assert_true(g[i] == (i < N - 3 ? y[i] + -1.5f * a[i] : y[i]));
	for (int i = 0; i < N; i++)
		g[i] = (float)(i - N / 2) / 16.0f; /* -16 .. 16 */
	g[0] = -1000.0f;
	g[1] = 1000.0f;
	g[2] = 0.0f;
	memcpy(y, g, sizeof g);
	wk_cpu_gelu(g, N);
	for (int i = 0; i < N; i++) {
		double x = y[i], want = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));

		assert_true(fabs(g[i] - want) <= 1e-6 * (fabs(want) + 1));
	}
	assert_true(g[0] == 0.0f && g[1] == 1000.0f && g[2] == 0.0f);

	/* gated: the same GELU times up, bit for bit, in place or not */
	float up[N], out[N];
	for (int i = 0; i < N; i++)
		up[i] = rnd() * 3;
	wk_cpu_gelu_mul(out, y, up, N);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == g[i] * up[i]);
	memcpy(out, y, sizeof y);
	wk_cpu_gelu_mul(out, out, up, N);
	for (int i = 0; i < N; i++)
		assert_true(out[i] == g[i] * up[i]);
}

/* c tanh(x / c) against double tanh: 1e-6 relative (both sides of the
 * series' edge at |x / c| = 0.25), exact ends, NaN kept, signs kept */
static void check_softcap(void)
{
	enum { N = 1000 + 3 };
	static const float caps[] = { 30.0f, 50.0f, 1.0f };
	float x[N], v[N];

	for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
		float c = caps[k];

		for (int i = 0; i < N; i++) /* -4c .. 4c, dense near 0 */
			x[i] = (float)((i - N / 2) * fabs((double)(i - N / 2))) * 16.0f * c / (float)(N * N);
		x[0] = 1e30f;
		x[1] = -INFINITY;
		x[2] = NAN;
		x[3] = -0.0f;
		x[4] = 1e-30f;
		memcpy(v, x, sizeof x);
		wk_cpu_softcap(v, N, c);
		for (int i = 5; i < N; i++) {
			double want = c * tanh((double)x[i] / c);

			close_rel(v[i], want, 1e-6, "softcap", i);
			assert_true(v[i] == 0.0f || (v[i] < 0) == (x[i] < 0));
		}
		assert_true(v[0] == c && v[1] == -c && isnan(v[2]));
		assert_true(v[3] == 0.0f && signbit(v[3]) && v[4] > 0.0f);
	}
}

static void check_rope(void)
{
	enum { HD = 64, NH = 3 };
	float x[NH * HD], v[NH * HD], cs[HD], ff[HD / 2];
	for (int i = 0; i < HD / 2; i++)
		ff[i] = 1.0f + (float)i / 4.0f;
	for (int neox = 0; neox <= 1; neox++)
		for (int withff = 0; withff <= 1; withff++) {
			struct wk_cpu_rope r = { .n_rot = HD - 16, .neox = neox, .base = 500000.0f,
						 .freq_scale = 1.0f, .freq_factors = withff ? ff : NULL };
			for (int i = 0; i < NH * HD; i++)
				x[i] = v[i] = rnd();
			int pos = 1234;
			wk_cpu_rope_sincos(&r, pos, cs);
			wk_cpu_rope_apply(&r, cs, v, NH, HD);
			int half = r.n_rot / 2;
			for (int h = 0; h < NH; h++) {
				const float *in = x + h * HD;
				const float *out = v + h * HD;
				for (int i = 0; i < half; i++) {
					double th = pos * pow(500000.0, -2.0 * i / r.n_rot) / (withff ? ff[i] : 1.0);
					int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
					double w0 = in[a] * cos(th) - in[b] * sin(th);
					double w1 = in[a] * sin(th) + in[b] * cos(th);
					assert_true(fabs(out[a] - w0) < 1e-5 && fabs(out[b] - w1) < 1e-5);
				}
				for (int i = r.n_rot; i < HD; i++) /* past n_rot: untouched */
					assert_true(out[i] == in[i]);
			}
			/* position 0 is the identity */
			memcpy(v, x, sizeof x);
			wk_cpu_rope_sincos(&r, 0, cs);
			wk_cpu_rope_apply(&r, cs, v, NH, HD);
			assert_memory_equal(v, x, sizeof x);
		}
}

/*
 * Issue 13, finding 16: NaN reached a left shift of a negative value in
 * the exp bit trick (UBSan).  Every bit pattern is total now: NaN in, NaN
 * out; the infinities go to 0 and the clamp (the sanitizer build aborts on
 * any undefined behaviour here).
 */
static void check_expf_total(void)
{
	static const uint32_t bits[] = { 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
					 0x7f800000u, 0xff800000u, 0x00000001u, 0x80000001u };
	float x[64], v;

	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		memcpy(&v, &bits[i], 4);
		if (isnan(v))
			assert_true(isnan(wk_cpu_expf(v)));
		else
			assert_false(isnan(wk_cpu_expf(v)));
	}
	for (int i = 0; i < 64; i++)
		x[i] = i == 5 ? NAN : i == 9 ? INFINITY : (float)i;
	wk_cpu_softmax(x, 64); /* whatever it gives, no undefined behaviour */
}

/*
 * The attention ops against the per-pair calls they replace: scores equal
 * wk_cpu_dot_f16/_f32 bit for bit, values equal wk_cpu_axpy_f16/_f32 over
 * the positions in order, for head sizes with and without the AVX-512
 * fast forms (multiples of 16 up to 256; 40 and 272 take the generic
 * one), position counts around the 16-row chunk, 1 to 8 heads (1 and 2:
 * the AVX-512 and AVX2 forms read K and V in place, WO_ATT_DIRECT_HEADS), rows padded
 * past hd (the KV row holds every KV head).
 */
static void check_attention(void)
{
	static const int hds[] = { 16, 40, 64, 80, 96, 128, 256, 272 };
	static const int ns[] = { 1, 5, 16, 17, 40 };
	enum { MAXN = 40, MAXH = 8, MAXD = 272, PAD = 24 };
	static float q[MAXH * MAXD], s[MAXH * 48], w[MAXH * 48];
	static float out[MAXH * MAXD], out2[MAXH * MAXD];
	static uint8_t kv[MAXN * (MAXD + PAD) * 4];

	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
		q[i] = rnd();
	for (int f16 = 0; f16 <= 1; f16++)
		for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
			for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
				for (int nh = 1; nh <= MAXH; nh += nh < 2 ? 1 : 3) { /* 1, 2, 5, 8 */
					const int hd = hds[a], n = ns[b];
					const size_t rs = (size_t)(hd + PAD) * (f16 ? 2 : 4);

					for (int j = 0; j < n; j++)
						for (int d = 0; d < hd + PAD; d++) {
							float x = rnd() * 4;
							uint8_t *r = kv + (size_t)j * rs;
							if (f16)
								((uint16_t *)r)[d] = wk_f32_to_f16(x);
							else
								((float *)r)[d] = x;
						}
					wk_cpu_att_scores(kv, rs, f16, n, q, nh, hd, s, 48);
					for (int h = 0; h < nh; h++)
						for (int j = 0; j < n; j++) {
							const uint8_t *r = kv + (size_t)j * rs;
							float want = f16 ? wk_cpu_dot_f16((const uint16_t *)r, q + h * hd, hd)
									 : wk_cpu_dot_f32((const float *)r, q + h * hd, hd);
							if (memcmp(&want, &s[h * 48 + j], 4) != 0)
								fail_msg("att_scores %s f16 %d hd %d n %d nh %d: [%d][%d] %.9g want %.9g",
									 wk_cpu_isa_name(wk_cpu_ops_isa()), f16, hd, n, nh, h, j,
									 s[h * 48 + j], want);
							w[h * 48 + j] = rnd();
						}
					for (int i = 0; i < nh * hd; i++)
						out[i] = out2[i] = rnd();
					wk_cpu_att_values(out, nh, hd, kv, rs, f16, n, w, 48);
					for (int j = 0; j < n; j++)
						for (int h = 0; h < nh; h++) {
							const uint8_t *r = kv + (size_t)j * rs;
							if (f16)
								wk_cpu_axpy_f16(out2 + h * hd, w[h * 48 + j], (const uint16_t *)r, hd);
							else
								wk_cpu_axpy_f32(out2 + h * hd, w[h * 48 + j], (const float *)r, hd);
						}
					if (memcmp(out, out2, sizeof(float) * (size_t)(nh * hd)) != 0)
						fail_msg("att_values %s f16 %d hd %d n %d nh %d differ",
							 wk_cpu_isa_name(wk_cpu_ops_isa()), f16, hd, n, nh);
				}
}

/*
 * The exp-based ops (SwiGLU, GeGLU, softmax, soft-capping) give the same
 * bits on every ISA: each element goes
 * through the same operations (no contraction in C17 mode), whether the
 * build vectorises them or, in the AVX2 build, its 8-lane wo_exp8 does
 * (a lane's operation out of order, an FMA, or a wrong clamp fails it).
 * Lengths cover the vector bodies and their tails; values the clamps at
 * -87.3 / 88.3 (both signs: SwiGLU takes e^-g), NaN and the infinities.
 */
static void test_exp_ops_isas_agree(void **state)
{
	(void)state;
	enum { N = 203 };
	static float g[N], u[N], want[5][N], got[N];
	for (int i = 0; i < N; i++) {
		g[i] = rnd() * (i % 3 == 0 ? 120.0f : 9.0f);
		u[i] = rnd();
	}
	g[5] = NAN;
	g[6] = INFINITY;
	g[7] = -INFINITY;
	g[8] = -87.3f;
	g[9] = 88.3f;
	g[10] = -0.0f;
	g[11] = 88.4f;
	g[12] = -87.4f;
	g[13] = -1e-30f;
	g[14] = -88.2f; /* SwiGLU takes e^-g: the upper clamp */
	g[15] = -88.3f;
	g[16] = -88.31f;
	assert_int_equal(wk_cpu_ops_set_isa(WK_CPU_ISA_SCALAR), CM_OK);
	wk_cpu_silu_mul(want[0], g, u, N);
	wk_cpu_gelu_mul(want[1], g, u, N);
	memcpy(want[2], g, sizeof g);
	want[2][5] = 0.0f; /* softmax of finite scores (one -inf: a masked entry) */
	want[2][6] = 3.0f;
	wk_cpu_softmax(want[2], N);
	for (int i = 0; i < N; i++)
		want[3][i] = wk_cpu_expf(g[i]);
	memcpy(want[4], g, sizeof g);
	wk_cpu_softcap(want[4], N, 30.0f); /* tanh: the series below 0.25, the exp form above */
	for (int isa = 1; isa < WK_CPU_ISA_COUNT_; isa++) {
		if (wk_cpu_ops_set_isa((enum wk_cpu_isa)isa) != CM_OK)
			continue;
		for (int n = N; n >= 1; n -= n > 40 ? 37 : 7) {
			wk_cpu_silu_mul(got, g, u, n);
			if (memcmp(got, want[0], sizeof(float) * (size_t)n) != 0)
				fail_msg("silu_mul on %s, n %d: not the scalar bits", wk_cpu_isa_name(isa), n);
			wk_cpu_gelu_mul(got, g, u, n);
			if (memcmp(got, want[1], sizeof(float) * (size_t)n) != 0)
				fail_msg("gelu_mul on %s, n %d: not the scalar bits", wk_cpu_isa_name(isa), n);
			memcpy(got, g, sizeof(float) * (size_t)n);
			wk_cpu_softcap(got, n, 30.0f);
			if (memcmp(got, want[4], sizeof(float) * (size_t)n) != 0)
				fail_msg("softcap on %s, n %d: not the scalar bits", wk_cpu_isa_name(isa), n);
		}
		memcpy(got, g, sizeof g);
		got[5] = 0.0f;
		got[6] = 3.0f;
		wk_cpu_softmax(got, N);
		if (memcmp(got, want[2], sizeof got) != 0)
			fail_msg("softmax on %s: not the scalar bits", wk_cpu_isa_name(isa));
		for (int i = 0; i < N; i++)
			if (memcmp(&want[3][i], &(float){ wk_cpu_expf(g[i]) }, 4) != 0)
				fail_msg("expf(%g) on %s: not the scalar bits", (double)g[i], wk_cpu_isa_name(isa));
	}
}

static void test_attention(void **state)
{
	(void)state;
	each_isa(check_attention);
}

static void test_expf(void **state)
{
	(void)state;
	each_isa(check_expf);
	each_isa(check_expf_total);
}

static void test_norm_softmax(void **state)
{
	(void)state;
	each_isa(check_norm_softmax);
}

static void test_f16(void **state)
{
	(void)state;
	each_isa(check_f16);
	each_isa(check_f32_gelu);
	each_isa(check_softcap);
}

static void test_rope(void **state)
{
	(void)state;
	each_isa(check_rope);
	assert_int_equal(wk_cpu_ops_set_isa(WK_CPU_ISA_COUNT_), CM_EUNSUPPORTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expf),
		cmocka_unit_test(test_norm_softmax),
		cmocka_unit_test(test_f16),
		cmocka_unit_test(test_rope),
		cmocka_unit_test(test_attention),
		cmocka_unit_test(test_exp_ops_isas_agree),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
