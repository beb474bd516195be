/*
 * sampler.c - per-sequence token sampling (see sampler.h for the contract).
 *
 * Owns: struct wk_sampler (parameters, penalty ring, RNG state) and
 * struct wk_sampler_ws (vocabulary-sized scratch).  Single-threaded per
 * object.
 *
 * Candidate order: "better" is (logit desc, id asc), a total order, so the
 * set kept by top-k and top-p is always a best-first prefix whatever
 * algorithm found it (heap, quickselect, buckets).  The draw itself walks
 * the survivors in ascending token id, so it needs no sorted list.
 *
 * Portability of the draw: compiled with -ffp-contract=off (see
 * worker/CMakeLists.txt): no fused multiply-add may change a rounding.
 * All probabilities come from wk_sampler_exp(), a polynomial in IEEE basic
 * operations; sums are in double in a fixed order.
 */
#include "worker/engine/sampler.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/crypto.h"

/* The draw is only portable where double arithmetic is plain IEEE-754
 * binary64 (no x87 excess precision). */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "worker/engine/sampler.c needs FLT_EVAL_METHOD == 0 (SSE2, NEON, ...)"
#endif

/* Up to this k, top-k uses a bounded heap (one compare per rejected
 * token); above it, quickselect. */
#define SEL_HEAP_MAX 1024u
/* Up to this many candidates, top-p sorts them; above, it buckets. */
#define TOPP_SORT_MAX 512u
/* top-p buckets: logit distance below the max, NB_BUCKETS over
 * [0, BUCKET_SPAN); everything further lands in the last bucket. */
#define NB_BUCKETS 4096u
#define BUCKET_SPAN 32.0

struct wk_sampler_ws {
	uint32_t n_vocab;
	float *w;        /* [n_vocab] penalised, sanitised logits */
	double *e;       /* [n_vocab] exp((w - max) / T) of candidates */
	uint32_t *cand;  /* [n_vocab] candidate ids */
	uint32_t *tmp;   /* [n_vocab] selection / sort scratch */
	uint32_t *count; /* [n_vocab] window counts, all zero between calls */
	double *bmass;   /* [NB_BUCKETS] */
	uint32_t *bcnt;  /* [NB_BUCKETS] */
};

struct wk_sampler {
	struct wk_sampler_params p;
	uint32_t n_vocab;
	uint64_t seed;
	uint64_t rng[4];   /* xoshiro256** state */
	bool penalties;    /* any penalty active with a window */
	uint32_t *ring;    /* [p.repeat_last_n] last accepted tokens */
	uint32_t ring_len; /* tokens in the ring (<= repeat_last_n) */
	uint32_t ring_pos; /* next write position */
};

/* ==== portable exp ================================================= */

/*
 * exp() of two lanes at once (GCC/Clang vector extensions: each lane does
 * exactly the scalar IEEE operations, so results do not depend on the
 * vector width the compiler picks).  Lanes below -708 (e^-708 < 1e-307)
 * give 0; NaN lanes are not expected (callers sanitise).
 */
typedef double v2d __attribute__((vector_size(16)));
typedef int64_t v2i __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));
typedef int32_t v4s __attribute__((vector_size(16)));
typedef float v4f __attribute__((vector_size(16)));

static inline __attribute__((always_inline)) v2d exp_v2(v2d x)
{
	/* fdlibm's split of ln 2: ln2_hi has zero low bits so kd * ln2_hi is
	 * exact for the |kd| < 1100 used here. */
	const v2d ln2_hi = { 6.93147180369123816490e-01, 6.93147180369123816490e-01 };
	const v2d ln2_lo = { 1.90821492927058770002e-10, 1.90821492927058770002e-10 };
	const v2d inv_ln2 = { 1.44269504088896338700e+00, 1.44269504088896338700e+00 };
	/* 1.5 * 2^52: adding it rounds to an integer (to nearest, the IEEE
	 * default mode) that then sits in the low mantissa bits */
	const v2d shift = { 6755399441055744.0, 6755399441055744.0 };
	const v2d lo = { -708.0, -708.0 };
	const v2i bias = { 1023, 1023 };
	v2i tiny = x < lo, bits;
	v2d t, kd, r, p;

	x = (v2d)(((v2i)x & ~tiny) | ((v2i)lo & tiny));
	t = x * inv_ln2 + shift;
	kd = t - shift;
	r = x - kd * ln2_hi;
	r = r - kd * ln2_lo;
	/* |r| <= 0.347: Taylor to degree 10 leaves < 3e-13 relative error,
	 * far below anything a probability cut-off can notice */
	p = r * (1.0 / 3628800.0) + 1.0 / 362880.0;
	p = p * r + 1.0 / 40320.0;
	p = p * r + 1.0 / 5040.0;
	p = p * r + 1.0 / 720.0;
	p = p * r + 1.0 / 120.0;
	p = p * r + 1.0 / 24.0;
	p = p * r + 1.0 / 6.0;
	p = p * r + 0.5;
	p = p * r + 1.0;
	p = p * r + 1.0;
	/* 2^k, k = kd in [-1021, 1023], from the low bits of t: a normal
	 * number, so the product is an exact scaling */
	bits = ((v2i)t + bias) << 52;
	p = p * (v2d)bits;
	return (v2d)((v2i)p & ~tiny);
}

double wk_sampler_exp(double x)
{
	v2d v = { x, x };

	if (!(x >= -708.0)) /* also NaN and -inf */
		return 0.0;
	if (x > 709.0)
		return HUGE_VAL;
	return exp_v2(v)[0];
}

/* e[i] = exp(((double)w[i] - max) / temp) for i in [0, n), vectorised. */
static void exp_all(const float *w, uint32_t n, float max, double temp,
		    double *e)
{
	const v2d m = { max, max }, d = { temp, temp };
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		v2f f, g;
		v2d x, y, xx, yy;

		memcpy(&f, w + i, sizeof(f));
		memcpy(&g, w + i + 2, sizeof(g));
		x = __builtin_convertvector(f, v2d);
		xx = __builtin_convertvector(g, v2d);
		if (temp != 1.0) { /* dividing by 1 changes nothing: skip it */
			x = (x - m) / d;
			xx = (xx - m) / d;
		} else {
			x = x - m;
			xx = xx - m;
		}
		y = exp_v2(x);
		yy = exp_v2(xx);
		memcpy(e + i, &y, sizeof(y));
		memcpy(e + i + 2, &yy, sizeof(yy));
	}
	for (; i < n; i++)
		e[i] = wk_sampler_exp(((double)w[i] - (double)max) / temp);
}

/* ==== RNG: splitmix64 seeding xoshiro256** ========================== */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t xoshiro_next(uint64_t s[4])
{
	uint64_t result = rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_double(uint64_t s[4])
{
	return (double)(xoshiro_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ==== workspace ===================================================== */

struct wk_sampler_ws *wk_sampler_ws_new(uint32_t n_vocab)
{
	struct wk_sampler_ws *ws;

	if (n_vocab == 0)
		return NULL;
	ws = cm_calloc(1, sizeof(*ws));
	if (!ws)
		return NULL;
	ws->n_vocab = n_vocab;
	ws->w = cm_calloc(n_vocab, sizeof(*ws->w));
	ws->e = cm_calloc(n_vocab, sizeof(*ws->e));
	ws->cand = cm_calloc(n_vocab, sizeof(*ws->cand));
	ws->tmp = cm_calloc(n_vocab, sizeof(*ws->tmp));
	ws->count = cm_calloc(n_vocab, sizeof(*ws->count));
	ws->bmass = cm_calloc(NB_BUCKETS, sizeof(*ws->bmass));
	ws->bcnt = cm_calloc(NB_BUCKETS, sizeof(*ws->bcnt));
	if (!ws->w || !ws->e || !ws->cand || !ws->tmp || !ws->count ||
	    !ws->bmass || !ws->bcnt) {
		wk_sampler_ws_free(ws);
		return NULL;
	}
	return ws;
}

void wk_sampler_ws_free(struct wk_sampler_ws *ws)
{
	if (!ws)
		return;
	cm_free(ws->w);
	cm_free(ws->e);
	cm_free(ws->cand);
	cm_free(ws->tmp);
	cm_free(ws->count);
	cm_free(ws->bmass);
	cm_free(ws->bcnt);
	cm_free(ws);
}

/* ==== sampler lifecycle ============================================= */

enum cm_status wk_sampler_new(const struct wk_sampler_params *p,
			      uint32_t n_vocab, struct wk_sampler **out,
			      char *err, size_t err_len)
{
	struct wk_sampler *s = NULL;
	enum cm_status st;
	uint64_t x;

	*out = NULL;
	st = wk_sampler_params_validate(p, n_vocab, err, err_len);
	if (st != CM_OK)
		goto out;
	s = cm_calloc(1, sizeof(*s));
	if (!s) {
		st = CM_ENOMEM;
		goto out;
	}
	s->p = *p;
	s->n_vocab = n_vocab;
	s->penalties = p->repeat_last_n > 0 &&
		       (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f ||
			p->frequency_penalty != 0.0f);
	if (s->penalties) {
		s->ring = cm_calloc(p->repeat_last_n, sizeof(*s->ring));
		if (!s->ring) {
			st = CM_ENOMEM;
			goto out;
		}
	}
	if (p->has_seed) {
		s->seed = p->seed;
	} else {
		st = cm_random_bytes(&s->seed, sizeof(s->seed));
		if (st != CM_OK) {
			cm_fail(err, err_len, CM_EINVAL, "seed: no randomness available (%s)",
			     cm_status_str(st));
			goto out;
		}
	}
	x = s->seed;
	for (int i = 0; i < 4; i++)
		s->rng[i] = splitmix64(&x);
	*out = s;
	s = NULL;
	st = CM_OK;
out:
	wk_sampler_free(s);
	return st;
}

void wk_sampler_free(struct wk_sampler *s)
{
	if (!s)
		return;
	cm_free(s->ring);
	cm_free(s);
}

uint64_t wk_sampler_seed(const struct wk_sampler *s)
{
	return s->seed;
}

enum cm_status wk_sampler_accept(struct wk_sampler *s, uint32_t token)
{
	if (token >= s->n_vocab)
		return CM_EINVAL;
	if (!s->penalties)
		return CM_OK;
	s->ring[s->ring_pos] = token;
	s->ring_pos = (s->ring_pos + 1) % s->p.repeat_last_n;
	if (s->ring_len < s->p.repeat_last_n)
		s->ring_len++;
	return CM_OK;
}

void wk_sampler_reset_window(struct wk_sampler *s)
{
	s->ring_len = 0;
	s->ring_pos = 0;
}

/* ==== ordering, selection, sorting ================================== */

/* 1 when token a ranks before token b: higher logit, then lower id. */
static inline int better(const float *w, uint32_t a, uint32_t b)
{
	return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* Sift down in a heap whose root is the *worst* element. */
static void heap_sift_worst(const float *w, uint32_t *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < n && better(w, h[m], h[l]))
			m = l;
		if (r < n && better(w, h[m], h[r]))
			m = r;
		if (m == i)
			return;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Turns a worst-root heap of n into a best-first sorted array. */
static void heap_sort_best_first(const float *w, uint32_t *h, size_t n)
{
	/* Popping the worst to the end leaves the array ordered best-first. */
	while (n > 1) {
		uint32_t t = h[0];
		h[0] = h[n - 1];
		h[n - 1] = t;
		n--;
		heap_sift_worst(w, h, n, 0);
	}
}

/* Sorts a[0..n) best-first (heap sort: in place, no recursion). */
static void sort_best_first(const float *w, uint32_t *a, size_t n)
{
	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		heap_sift_worst(w, a, n, i);
	heap_sort_best_first(w, a, n);
}

/* Writes the k best of src[0..n) (or of 0..n-1 when src is NULL) into
 * dst[0..k), sorted best-first.  1 <= k <= n, k <= SEL_HEAP_MAX. */
static void select_heap(const float *w, const uint32_t *src, size_t n,
			size_t k, uint32_t *dst)
{
	size_t i;

	for (i = 0; i < k; i++)
		dst[i] = src ? src[i] : (uint32_t)i;
	for (i = k / 2; i-- > 0;)
		heap_sift_worst(w, dst, k, i);
	if (src) {
		for (i = k; i < n; i++) {
			if (better(w, src[i], dst[0])) {
				dst[0] = src[i];
				heap_sift_worst(w, dst, k, 0);
			}
		}
	} else {
		/* ids ascend, so a later id only wins with a strictly greater
		 * logit; most blocks of four lose to the root at once */
		float thr = w[dst[0]];
		v4f vt = { thr, thr, thr, thr };

		for (i = k; i < n; i++) {
			if (i % 4 == 0 && i + 4 <= n) {
				v4f f;
				v4s gt;

				memcpy(&f, w + i, sizeof(f));
				gt = f > vt;
				if (!(gt[0] | gt[1] | gt[2] | gt[3])) {
					i += 3;
					continue;
				}
			}
			if (w[i] > thr) {
				dst[0] = (uint32_t)i;
				heap_sift_worst(w, dst, k, 0);
				thr = w[dst[0]];
				vt = (v4f){ thr, thr, thr, thr };
			}
		}
	}
	heap_sort_best_first(w, dst, k);
}

/* Rearranges a[0..n) so that a[0..k) hold the k best (unordered) and
 * a[k-1] is the k-th best.  1 <= k <= n.  Quickselect, median of three;
 * elements are all distinct under `better`. */
static void select_quick(const float *w, uint32_t *a, size_t n, size_t k)
{
	size_t lo = 0, hi = n, want = k - 1;

	while (hi - lo > 16) {
		size_t mid = lo + (hi - lo) / 2, store;
		uint32_t x = a[lo], y = a[mid], z = a[hi - 1], piv, t;
		size_t pi;

		/* median of three by `better` */
		if (better(w, x, y) == better(w, y, z))
			pi = mid;
		else if (better(w, y, x) == better(w, x, z))
			pi = lo;
		else
			pi = hi - 1;
		piv = a[pi];
		a[pi] = a[hi - 1];
		a[hi - 1] = piv;
		store = lo;
		for (size_t i = lo; i < hi - 1; i++) {
			if (better(w, a[i], piv)) {
				t = a[i];
				a[i] = a[store];
				a[store] = t;
				store++;
			}
		}
		a[hi - 1] = a[store];
		a[store] = piv;
		if (store == want)
			return;
		if (store > want)
			hi = store;
		else
			lo = store + 1;
	}
	/* insertion sort of the small range that holds position `want` */
	for (size_t i = lo + 1; i < hi; i++) {
		uint32_t x = a[i];
		size_t j = i;

		while (j > lo && better(w, x, a[j - 1])) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = x;
	}
}

/* w = l with NaN -> -inf and +inf -> FLT_MAX. */
static void sanitize(const float *l, float *w, uint32_t n)
{
	const v4f big = { FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX };
	const v4f ninf = { -INFINITY, -INFINITY, -INFINITY, -INFINITY };
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		v4f f;
		v4s nan, over;

		memcpy(&f, l + i, sizeof(f));
		nan = f != f;
		over = f > big;
		f = (v4f)(((v4s)f & ~(nan | over)) | ((v4s)ninf & nan) |
			  ((v4s)big & over));
		memcpy(w + i, &f, sizeof(f));
	}
	for (; i < n; i++) {
		float x = l[i];

		w[i] = isnan(x) ? -INFINITY : x > FLT_MAX ? FLT_MAX : x;
	}
}

/* w[i] = -inf for every token whose bit in allow is clear. */
static void apply_mask(float *w, uint32_t n, const uint32_t *allow)
{
	for (uint32_t k = 0; k < (n + 31) / 32; k++) {
		uint32_t word = allow[k];

		if (word == UINT32_MAX)
			continue;
		for (uint32_t b = 0; b < 32 && k * 32 + b < n; b++)
			if (!(word >> b & 1u))
				w[k * 32 + b] = -INFINITY;
	}
}

/* Largest of w[0..n), n >= 1, no NaN. */
static float max_of(const float *w, uint32_t n)
{
	v4f m = { w[0], w[0], w[0], w[0] };
	float r;
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		v4f f;

		memcpy(&f, w + i, sizeof(f));
		m = (v4f)(((v4s)f & (f > m)) | ((v4s)m & ~(f > m)));
	}
	r = m[0] > m[1] ? m[0] : m[1];
	r = r > m[2] ? r : m[2];
	r = r > m[3] ? r : m[3];
	for (; i < n; i++)
		r = w[i] > r ? w[i] : r;
	return r;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* ==== the steps ===================================================== */

static void apply_penalties(const struct wk_sampler *s, struct wk_sampler_ws *ws)
{
	const float rp = s->p.repeat_penalty;
	const float fp = s->p.frequency_penalty;
	const float pp = s->p.presence_penalty;
	uint32_t *count = ws->count;
	float *w = ws->w;
	uint32_t i;

	for (i = 0; i < s->ring_len; i++)
		count[s->ring[i]]++;
	for (i = 0; i < s->ring_len; i++) {
		uint32_t t = s->ring[i];
		float l;

		if (count[t] == 0)
			continue; /* already applied */
		l = w[t];
		if (rp != 1.0f)
			l = l > 0.0f ? l / rp : l * rp;
		l = l - ((float)count[t] * fp + pp);
		w[t] = l;
		count[t] = 0;
	}
}

/*
 * Single-precision exp of four lanes for the reported logprob only (not on
 * the path of the draw): x <= 0, lanes below -87 give 0.  Same scheme as
 * exp_v2 with a degree-6 polynomial (relative error < 2e-7).
 */

static inline __attribute__((always_inline)) v4f expf_v4(v4f x)
{
	const v4f lo = { -87.0f, -87.0f, -87.0f, -87.0f };
	const v4f shift = { 12582912.0f, 12582912.0f, 12582912.0f, 12582912.0f };
	const v4s bias = { 127, 127, 127, 127 };
	v4s tiny = x < lo, bits;
	v4f t, kf, r, p;

	x = (v4f)(((v4s)x & ~tiny) | ((v4s)lo & tiny));
	t = x * 1.44269504f + shift;
	kf = t - shift;
	r = x - kf * 0.693359375f;
	r = r - kf * -2.12194440e-4f;
	p = r * (1.0f / 720.0f) + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	bits = ((v4s)t + bias) << 23;
	p = p * (v4f)bits;
	return (v4f)((v4s)p & ~tiny);
}

/* log of the sum over the whole vocabulary of exp((w - max) / T), for the
 * reported logprob: single-precision terms, double accumulation. */
static double log_partition(const float *w, uint32_t n, float max, double temp)
{
	const float inv = (float)(1.0 / temp);
	const v4f m = { max, max, max, max }, d = { inv, inv, inv, inv };
	v2d acc0 = { 0.0, 0.0 }, acc1 = { 0.0, 0.0 };
	double z;
	uint32_t i = 0;

	/* two independent chains per iteration: the polynomial is latency
	 * bound */
	for (; i + 8 <= n; i += 8) {
		v4f f, g, y, yy;

		memcpy(&f, w + i, sizeof(f));
		memcpy(&g, w + i + 4, sizeof(g));
		y = expf_v4((f - m) * d);
		yy = expf_v4((g - m) * d);
		y += yy;
		acc0 += __builtin_convertvector(
			__builtin_shufflevector(y, y, 0, 1), v2d);
		acc1 += __builtin_convertvector(
			__builtin_shufflevector(y, y, 2, 3), v2d);
	}
	z = (acc0[0] + acc0[1]) + (acc1[0] + acc1[1]);
	for (; i < n; i++)
		z += wk_sampler_exp(((double)w[i] - (double)max) / temp);
	return log(z);
}

/*
 * top-p over a list of n candidates with e[] filled and total mass z:
 * returns the last token of the shortest best-first prefix whose mass
 * reaches top_p * z.  `sorted`: list already best-first.  May reorder
 * list (when not sorted) and uses ws->tmp, bmass, bcnt.
 */
static uint32_t top_p_cut(struct wk_sampler_ws *ws, uint32_t *list, size_t n,
			  bool sorted, double z, double top_p, float max)
{
	const float *w = ws->w;
	const double *e = ws->e;
	double target = top_p * z, cum = 0.0;
	uint32_t *in;
	size_t b, nb = 0, i;

	if (!sorted && n <= TOPP_SORT_MAX) {
		sort_best_first(w, list, n);
		sorted = true;
	}
	if (sorted) {
		for (i = 0; i < n; i++) {
			cum += e[list[i]];
			if (cum >= target)
				return list[i];
		}
		return list[n - 1];
	}
	/* Buckets by distance below the max: bucket order is best-first
	 * order, and equal logits share a bucket. */
	memset(ws->bmass, 0, NB_BUCKETS * sizeof(*ws->bmass));
	memset(ws->bcnt, 0, NB_BUCKETS * sizeof(*ws->bcnt));
	for (i = 0; i < n; i++) {
		uint32_t t = list[i];
		double d = ((double)max - (double)w[t]) *
			   (NB_BUCKETS / BUCKET_SPAN);

		b = d < (double)(NB_BUCKETS - 1) ? (size_t)d : NB_BUCKETS - 1;
		ws->bmass[b] += e[t];
		ws->bcnt[b]++;
	}
	for (b = 0; b < NB_BUCKETS - 1; b++) {
		if (cum + ws->bmass[b] >= target)
			break;
		cum += ws->bmass[b];
	}
	/* gather bucket b, sort it, walk it from cum */
	in = ws->tmp;
	for (i = 0; i < n; i++) {
		uint32_t t = list[i];
		double d = ((double)max - (double)w[t]) *
			   (NB_BUCKETS / BUCKET_SPAN);
		size_t bt = d < (double)(NB_BUCKETS - 1) ? (size_t)d
							  : NB_BUCKETS - 1;

		if (bt == b)
			in[nb++] = t;
	}
	if (nb == 0) /* cannot happen: a bucket was chosen with mass */
		return list[0];
	sort_best_first(w, in, nb);
	for (i = 0; i < nb; i++) {
		cum += e[in[i]];
		if (cum >= target)
			return in[i];
	}
	return in[nb - 1];
}

/* The candidate list as the stages of one draw narrow it. */
struct smp_list {
	uint32_t *list;     /* token ids (ws->cand) */
	uint32_t n;         /* entries after top-k */
	uint32_t cut;       /* the worst token kept by top-k / top-p */
	uint32_t nsurv;     /* survivors, ascending id, after the cut and min-p */
	float max;          /* the largest logit */
	bool sorted;        /* list[0..n) is best first */
	bool have_e;        /* ws->e holds exp(w - max) for every candidate */
	bool have_cut;
	bool all;           /* nothing was cut: every token survives */
};

/* top-k: the list shrinks to the k best. */
static void smp_top_k(const struct wk_sampler_params *p, const float *w, uint32_t n_vocab,
		      struct smp_list *L)
{
	uint32_t i;

	L->n = n_vocab;
	if (p->top_k > 0 && p->top_k < n_vocab) {
		L->all = false;
		L->n = p->top_k;
		if (L->n <= SEL_HEAP_MAX) {
			select_heap(w, NULL, n_vocab, L->n, L->list);
			L->sorted = true;
		} else {
			for (i = 0; i < n_vocab; i++)
				L->list[i] = i;
			select_quick(w, L->list, n_vocab, L->n);
		}
		L->cut = L->list[L->n - 1]; /* the k-th best in both paths */
		L->have_cut = true;
	} else {
		for (i = 0; i < n_vocab; i++)
			L->list[i] = i;
	}
}

/* top-p over the list at temperature 1. */
static void smp_top_p(const struct wk_sampler_params *p, struct wk_sampler_ws *ws,
		      uint32_t n_vocab, struct smp_list *L)
{
	const float *w = ws->w;
	double *e = ws->e, z = 0.0;
	uint32_t i;

	if (p->top_p >= 1.0f)
		return;
	if (L->n == n_vocab) { /* the list is 0..n-1 */
		exp_all(w, L->n, L->max, 1.0, e);
		for (i = 0; i < L->n; i++)
			z += e[i];
	} else {
		for (i = 0; i < L->n; i++) {
			uint32_t t = L->list[i];

			e[t] = wk_sampler_exp((double)w[t] - (double)L->max);
			z += e[t];
		}
	}
	L->have_e = true;
	L->cut = top_p_cut(ws, L->list, L->n, L->sorted, z, (double)p->top_p, L->max);
	L->have_cut = true;
	L->all = false;
}

/* Survivors in ascending id: the prefix up to `cut`, then min-p. */
static void smp_survivors(const struct wk_sampler_params *p, struct wk_sampler_ws *ws,
			  uint32_t n_vocab, struct smp_list *L)
{
	const float *w = ws->w;
	double *e = ws->e;
	uint32_t *list = L->list, i;

	L->nsurv = 0;
	if (!L->have_cut) {
		/* list is 0..n_vocab-1 already in id order */
		L->nsurv = L->n;
	} else if (L->n <= 4096u) {
		for (i = 0; i < L->n; i++) {
			uint32_t t = list[i];

			if (t == L->cut || better(w, t, L->cut))
				list[L->nsurv++] = t;
		}
		qsort(list, L->nsurv, sizeof(*list), cmp_u32);
	} else {
		for (i = 0; i < n_vocab; i++)
			if (i == L->cut || better(w, i, L->cut))
				list[L->nsurv++] = i;
	}
	if (p->min_p > 0.0f) {
		uint32_t kept = 0;
		double mp = (double)p->min_p;

		if (!L->have_e && L->nsurv > n_vocab / 8) {
			exp_all(w, n_vocab, L->max, 1.0, e);
			L->have_e = true;
		}
		for (i = 0; i < L->nsurv; i++) {
			uint32_t t = list[i];
			double et = L->have_e ? e[t]
					      : wk_sampler_exp((double)w[t] - (double)L->max);

			if (et >= mp)
				list[kept++] = t;
		}
		if (kept != L->nsurv)
			L->all = false;
		L->nsurv = kept; /* the best token has e == 1 and always stays */
	}
}

/* Temperature, the draw and its log-probability. */
static void smp_draw(struct wk_sampler *s, struct wk_sampler_ws *ws, uint32_t n_vocab,
		     const struct smp_list *L, uint32_t best, struct wk_sample *out)
{
	const float *w = ws->w;
	double *e = ws->e, temp = s->p.temperature, z = 0.0, u, cum;
	const uint32_t *list = L->list;
	float max = L->max;
	uint32_t i, pick;
	bool full_t = false;

	if (L->nsurv > n_vocab / 8) {
		/* many survivors: the vectorised pass over everything is
		 * cheaper, gives the same values, and the logprob's sum */
		exp_all(w, n_vocab, max, temp, e);
		full_t = true;
		for (i = 0; i < L->nsurv; i++)
			z += e[list[i]];
	} else {
		for (i = 0; i < L->nsurv; i++) {
			uint32_t t = list[i];

			e[t] = wk_sampler_exp(((double)w[t] - (double)max) / temp);
			z += e[t];
		}
	}
	u = rng_double(s->rng) * z;
	cum = 0.0;
	pick = best;
	for (i = 0; i < L->nsurv; i++) {
		uint32_t t = list[i];

		if (e[t] > 0.0)
			pick = t; /* last token with mass: the rounding fallback */
		cum += e[t];
		if (cum > u)
			break;
	}
	out->token = pick;
	if (L->all && L->nsurv == n_vocab) {
		out->logprob = (float)(((double)w[pick] - (double)max) / temp -
				       log(z));
	} else if (full_t) {
		double zz[4] = { 0.0, 0.0, 0.0, 0.0 };

		for (i = 0; i + 4 <= n_vocab; i += 4) {
			zz[0] += e[i];
			zz[1] += e[i + 1];
			zz[2] += e[i + 2];
			zz[3] += e[i + 3];
		}
		for (; i < n_vocab; i++)
			zz[0] += e[i];
		out->logprob = (float)(((double)w[pick] - (double)max) / temp -
				       log((zz[0] + zz[1]) + (zz[2] + zz[3])));
	} else if (s->p.no_logprob) {
		out->logprob = 0.0f;
	} else
		out->logprob = (float)(((double)w[pick] - (double)max) / temp -
				       log_partition(w, n_vocab, max, temp));
}

enum cm_status wk_sampler_sample(struct wk_sampler *s,
				 struct wk_sampler_ws *ws,
				 const float *logits, uint32_t n_vocab,
				 struct wk_sample *out)
{
	return wk_sampler_sample_masked(s, ws, logits, n_vocab, NULL, out);
}

enum cm_status wk_sampler_top(const struct wk_sampler *s, const struct wk_sampler_ws *ws,
			      uint32_t k, uint32_t *ids, float *lps, uint32_t *n_out)
{
	const float *w = ws->w;
	double temp = s->p.temperature == 0.0f ? 1.0 : s->p.temperature, lz;
	uint32_t n;
	float max;

	*n_out = 0;
	if (s->n_vocab > ws->n_vocab || k == 0)
		return CM_OK;
	max = max_of(w, s->n_vocab);
	if (max == -INFINITY)
		return CM_EINVAL;
	/* the k best by (logit desc, id asc), as top-k selects them; the
	 * tokens a mask removed (-inf, last when sorted) are not among them */
	n = k < s->n_vocab ? k : s->n_vocab;
	if (n > SEL_HEAP_MAX)
		n = SEL_HEAP_MAX;
	select_heap(w, NULL, s->n_vocab, n, ids);
	while (n > 0 && w[ids[n - 1]] == -INFINITY)
		n--;
	lz = log_partition(w, s->n_vocab, max, temp);
	for (uint32_t i = 0; i < n; i++)
		lps[i] = (float)(((double)w[ids[i]] - (double)max) / temp - lz);
	*n_out = n;
	return CM_OK;
}

enum cm_status wk_sampler_sample_masked(struct wk_sampler *s, struct wk_sampler_ws *ws,
					const float *logits, uint32_t n_vocab,
					const uint32_t *allow, struct wk_sample *out)
{
	const struct wk_sampler_params *p = &s->p;
	float *w = ws->w, max;
	struct smp_list L;
	uint32_t best = 0;

	if (n_vocab != s->n_vocab || n_vocab > ws->n_vocab)
		return CM_EINVAL;

	/* copy: NaN -> -inf, +inf -> FLT_MAX so that w - max is never NaN */
	sanitize(logits, w, n_vocab);
	if (allow)
		apply_mask(w, n_vocab, allow);
	if (s->penalties)
		apply_penalties(s, ws);

	max = max_of(w, n_vocab);
	while (w[best] != max)
		best++;
	if (max == -INFINITY)
		return CM_EINVAL;

	if (p->temperature == 0.0) {
		out->token = best;
		out->logprob = p->no_logprob ? 0.0f
					     : (float)(0.0 - log_partition(w, n_vocab, max, 1.0));
		return CM_OK;
	}
	memset(&L, 0, sizeof(L));
	L.list = ws->cand;
	L.max = max;
	L.all = true;
	smp_top_k(p, w, n_vocab, &L);
	smp_top_p(p, ws, n_vocab, &L);
	smp_survivors(p, ws, n_vocab, &L);
	smp_draw(s, ws, n_vocab, &L, best, out);
	return CM_OK;
}
