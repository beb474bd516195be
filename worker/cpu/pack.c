/*
 * pack.c - the copies of weight matrices (pack.h), rows16 or plain: the
 * packers, and a small open-addressing table from the original's address
 * to its copy, owned by one wk_cpu_mm.
 */
#include "worker/cpu/pack.h"

#include <string.h>

#include "common/alloc.h"
#include "worker/model/model_config.h"
#include "worker/cpu/internal.h"
#include "worker/cpu/pool.h"
#include "worker/model/quant.h"

/*
 * A block of each type as segments of the GGUF block, in their order in
 * the copy: `len` bytes from `at`, in units of `unit` (2: f16 scales, 4:
 * everything else); a segment becomes len / unit runs of 16 x unit bytes,
 * run k holding unit k of rows 0..15.  bias: the bytes are stored ^ 0x80.
 */
struct pack_seg {
	uint16_t at, len;
	uint8_t unit, bias;
};

struct pack_fmt {
	uint32_t type;
	uint16_t block_bytes;
	uint8_t n_seg;
	struct pack_seg seg[4];
	/* Q5_0/Q5_1: the 4 qh bytes at qh_at become, after the segments before
	 * qs_seg, 8 masks of 64 bits (mask k < 4: bit 4l + i = the fifth bit of
	 * row l's value 4k + i; mask 4 + k: of value 16 + 4k + i) */
	uint8_t qh_at, qs_seg;
	/* when set, the segments are of this rewrite of the GGUF block */
	void (*remap)(const uint8_t *blk, uint8_t *out);
};

/*
 * Q6_K's block rewritten as planes (pack.h): per half h, the 6-bit values
 * v of runs 0, 1 and 3 (values 128h + 32r + l) whole in bytes A, B, C, and
 * run 2's three bit pairs in their top bits; then the scales, then d.
 */
static void pack_q6_k_planes(const uint8_t *blk, uint8_t *out)
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
		uint8_t *a = out + 96 * h, *b = a + 32, *c = a + 64;

		for (int l = 0; l < 32; l++) {
			uint8_t v0 = (uint8_t)((ql[l] & 15) | (qh[l] & 3) << 4);
			uint8_t v1 = (uint8_t)((ql[l + 32] & 15) | (qh[l] >> 2 & 3) << 4);
			uint8_t v2 = (uint8_t)((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
			uint8_t v3 = (uint8_t)((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);

			a[l] = (uint8_t)(v0 | (v2 & 3) << 6);
			b[l] = (uint8_t)(v1 | (v2 >> 2 & 3) << 6);
			c[l] = (uint8_t)(v3 | (v2 >> 4 & 3) << 6);
		}
	}
	memcpy(out + 192, blk + 192, 18); /* scales, d */
}

/*
 * Q5_K's block rewritten as five planes (pack.h): with v_n the 5-bit
 * value 32n + l of the block (run n: the nibble of qs byte 32 (n / 2) + l,
 * low for even n, and bit n of qh byte l as bit 4), P0 = v0 | (v5 & 7) << 5,
 * P1 = v1 | (v7 >> 3 & 1) << 5 | (v5 >> 3) << 6, P2 = v2 | (v6 & 7) << 5,
 * P3 = v3 | (v7 >> 4) << 5 | (v6 >> 3) << 6, P4 = v4 | (v7 & 7) << 5, after
 * d|dmin and the scales, placed 4 bytes by 4 in the order of
 * wk_cpu_q5k_plane_unit (internal.h).
 */
static void pack_q5_k_planes(const uint8_t *blk, uint8_t *out)
{
	const uint8_t *qh = blk + 16, *qs = blk + 48;

	memcpy(out, blk, 16); /* d, dmin, scales */
	for (int l = 0; l < 32; l++) {
		uint8_t v[8];

		for (int n = 0; n < 8; n++)
			v[n] = (uint8_t)((qs[32 * (n / 2) + l] >> (4 * (n % 2)) & 15) |
					 (qh[l] >> n & 1) << 4);
		const uint8_t pv[5] = {
			(uint8_t)(v[0] | (v[5] & 7) << 5),
			(uint8_t)(v[1] | (v[7] >> 3 & 1) << 5 | (v[5] >> 3) << 6),
			(uint8_t)(v[2] | (v[6] & 7) << 5),
			(uint8_t)(v[3] | (v[7] >> 4) << 5 | (v[6] >> 3) << 6),
			(uint8_t)(v[4] | (v[7] & 7) << 5),
		};

		for (int p = 0; p < 5; p++)
			out[16 + 4 * wk_cpu_q5k_plane_unit(p, l / 4) + l % 4] = pv[p];
	}
}

static const struct pack_fmt pack_fmts[] = {
	{ WK_Q_Q4_0, 18, 2, { { 0, 2, 2, 0 }, { 2, 16, 4, 0 } }, 0, 0, NULL },
	{ WK_Q_Q8_0, 34, 2, { { 0, 2, 2, 0 }, { 2, 32, 4, 1 } }, 0, 0, NULL },
	{ WK_Q_IQ4_NL, 18, 2, { { 0, 2, 2, 0 }, { 2, 16, 4, 0 } }, 0, 0, NULL },
	/* d|m, qs */
	{ WK_Q_Q4_1, 20, 2, { { 0, 4, 4, 0 }, { 4, 16, 4, 0 } }, 0, 0, NULL },
	/* d, (qh masks), qs; d|m, (qh masks), qs */
	{ WK_Q_Q5_0, 22, 2, { { 0, 2, 2, 0 }, { 6, 16, 4, 0 } }, 2, 1, NULL },
	{ WK_Q_Q5_1, 24, 2, { { 0, 4, 4, 0 }, { 8, 16, 4, 0 } }, 4, 1, NULL },
	/* d|dmin, scales, qs */
	{ WK_Q_Q4_K, 144, 3, { { 0, 4, 4, 0 }, { 4, 12, 4, 0 }, { 16, 128, 4, 0 } }, 0, 0, NULL },
	/* d|dmin, scales, the planes (pack_q5_k_planes) */
	{ WK_Q_Q5_K, 176, 3, { { 0, 4, 4, 0 }, { 4, 12, 4, 0 }, { 16, 160, 4, 0 } }, 0, 0,
	  pack_q5_k_planes },
	/* Q2_K: d|dmin, scales, qs; Q3_K: d, scales, hmask, qs */
	{ WK_Q_Q2_K, 84, 3, { { 80, 4, 4, 0 }, { 0, 16, 4, 0 }, { 16, 64, 4, 0 } }, 0, 0, NULL },
	{ WK_Q_Q3_K, 110, 4, { { 108, 2, 2, 0 }, { 96, 12, 4, 0 }, { 0, 32, 4, 0 }, { 32, 64, 4, 0 } }, 0, 0, NULL },
	/* d|scales_h, scales_l, qs */
	{ WK_Q_IQ4_XS, 136, 3, { { 0, 4, 4, 0 }, { 4, 4, 4, 0 }, { 8, 128, 4, 0 } }, 0, 0, NULL },
	/* d, scales, the planes (pack_q6_k_planes) */
	{ WK_Q_Q6_K, 210, 3, { { 208, 2, 2, 0 }, { 192, 16, 4, 0 }, { 0, 192, 4, 0 } }, 0, 0,
	  pack_q6_k_planes },
};

static const struct pack_fmt *pack_fmt_of(uint32_t wtype)
{
	for (size_t i = 0; i < sizeof(pack_fmts) / sizeof(pack_fmts[0]); i++)
		if (pack_fmts[i].type == wtype)
			return &pack_fmts[i];
	return NULL;
}

int wk_cpu_pack_supported(uint32_t wtype)
{
	return pack_fmt_of(wtype) != NULL;
}

size_t wk_cpu_pack_bytes(uint32_t wtype, int rows, int cols)
{
	if (!wk_cpu_pack_supported(wtype) || rows <= 0 || cols <= 0)
		return 0;
	size_t strips = ((size_t)rows + 15) / 16;
	return strips * 16 * (size_t)wk_qtype_row_bytes(wtype, (uint64_t)cols);
}

size_t wk_cpu_pack_panel_bytes(uint32_t wtype, int rows, int cols)
{
	const int64_t panel_cols = (int64_t)1 << WK_CPU_PANEL_LOG2(wtype);

	/* a full panel is a copy of the matrix's first panel_cols columns */
	return cols <= panel_cols ? 0 : wk_cpu_pack_bytes(wtype, rows, panel_cols);
}

size_t wk_cpu_pack_plain_bytes(uint32_t wtype, int rows, int cols)
{
	if (!wk_qtype_supported(wtype) || rows <= 0 || cols <= 0)
		return 0;
	return (size_t)rows * (size_t)wk_qtype_row_bytes(wtype, (uint64_t)cols);
}

/* Strips [s0, s1) of the copy. */
static void pack_strips(uint32_t wtype, const void *w, int rows, int cols, uint8_t *dst, int s0,
			int s1)
{
	const struct pack_fmt *f = pack_fmt_of(wtype);
	const size_t rb = (size_t)wk_qtype_row_bytes(wtype, (uint64_t)cols);
	const size_t nb = (size_t)cols / wk_qtype_block_elems(wtype), bb = f->block_bytes;
	/* log2 of a full panel's blocks (block elements are a power of two) */
	const int lpb = WK_CPU_PANEL_LOG2(wtype) - __builtin_ctz((unsigned)wk_qtype_block_elems(wtype));
	const size_t panel = wk_cpu_pack_panel_bytes(wtype, rows, cols);
	const uint8_t *src = w;

	for (int s = s0; s < s1; s++)
		for (size_t b = 0; b < nb; b++) {
			uint8_t *o = dst + wk_cpu_r16_offset(panel, 16 * s, (int)b, bb, lpb, (int)nb);

			for (int l = 0; l < 16; l++) {
				int row = 16 * s + l < rows ? 16 * s + l : rows - 1;
				const uint8_t *blk = src + (size_t)row * rb + b * bb;
				uint8_t *so = o, tmp[256];

				if (f->remap) {
					f->remap(blk, tmp);
					blk = tmp;
				}

				for (int g = 0; g < f->n_seg; g++) {
					const struct pack_seg *sg = &f->seg[g];

					if (f->qh_at && g == f->qs_seg) { /* the fifth-bit masks */
						uint32_t qh;

						memcpy(&qh, blk + f->qh_at, 4);
						for (int m = 0; m < 8; m++) {
							uint32_t bits = (qh >> (m < 4 ? 4 * m : 16 + 4 * (m - 4))) & 15;
							uint8_t *mb = so + 8 * m + l / 2;

							*mb = (uint8_t)((*mb & (l % 2 ? 0x0f : 0xf0)) | bits << (4 * (l % 2)));
						}
						so += 64;
					}
					for (size_t k = 0; k < (size_t)(sg->len / sg->unit); k++) {
						uint8_t *q = so + 16 * sg->unit * k + sg->unit * (size_t)l;

						memcpy(q, blk + sg->at + sg->unit * k, sg->unit);
						if (sg->bias)
							for (int i = 0; i < sg->unit; i++)
								q[i] ^= 0x80;
					}
					so += 16 * (size_t)sg->len;
				}
			}
		}
}

void wk_cpu_pack_rows16(uint32_t wtype, const void *w, int rows, int cols, uint8_t *dst)
{
	pack_strips(wtype, w, rows, cols, dst, 0, (rows + 15) / 16);
}

/* One pool task: per strips (PACK_TASK_STRIPS, more when a matrix would
 * need over WK_POOL_MAX_TASKS tasks). */
#define PACK_TASK_STRIPS 64
struct pack_job {
	uint32_t wtype;
	const void *w;
	int rows, cols;
	uint8_t *dst;
	int per;
	int plain;
};

static void pack_task(void *ctx, int task, int thread)
{
	const struct pack_job *j = ctx;
	int ns = (j->rows + 15) / 16, s0 = task * j->per, s1 = ns - s0 > j->per ? s0 + j->per : ns;

	(void)thread;
	if (j->plain) { /* rows 16 s0 .. 16 s1 as they are */
		size_t rb = (size_t)wk_qtype_row_bytes(j->wtype, (uint64_t)j->cols);
		int r0 = 16 * s0, r1 = 16 * s1 < j->rows ? 16 * s1 : j->rows;
		memcpy(j->dst + rb * (size_t)r0, (const uint8_t *)j->w + rb * (size_t)r0,
		       rb * (size_t)(r1 - r0));
		return;
	}
	pack_strips(j->wtype, j->w, j->rows, j->cols, j->dst, s0, s1);
}

#define PACK_PER_LAYER 10

size_t wk_cpu_pack_candidates(const struct wk_hparams *hp)
{
	return (size_t)hp->n_layer * PACK_PER_LAYER + 1;
}

const struct wk_tensor *wk_cpu_pack_candidate(const struct wk_hparams *hp,
					      const struct wk_layer *layers,
					      const struct wk_tensor *output, size_t i)
{
	if (i >= wk_cpu_pack_candidates(hp))
		return NULL;
	if (i == (size_t)hp->n_layer * PACK_PER_LAYER)
		return output;
	const struct wk_layer *L = &layers[i / PACK_PER_LAYER];
	const struct wk_tensor *ts[PACK_PER_LAYER] = {
		&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
		&L->shexp_gate, &L->shexp_up, &L->shexp_down,
	};
	return ts[i % PACK_PER_LAYER];
}

int wk_cpu_pack_eligible(const struct wk_tensor *t)
{
	return t->data != NULL && t->expert_stride == 0 && t->rows > 0 && t->rows <= INT32_MAX &&
	       t->cols <= INT32_MAX && wk_qtype_supported(t->type) &&
	       t->cols % wk_qtype_block_elems(t->type) == 0;
}

struct wk_cpu_pack_entry {
	const void *w; /* NULL: empty slot */
	uint32_t wtype;
	int rows, cols;
	int plain; /* 1: the rows as they are; 0: rows16 */
	size_t bytes;
	uint8_t *data; /* cm_huge_alloc'd, or (view) held by the caller */
	int view;      /* 1: wk_cpu_packs_add_view's, not freed here */
};

struct wk_cpu_packs {
	struct wk_cpu_pack_entry *slots;
	size_t cap, used; /* cap a power of two, used <= cap / 2 */
	size_t bytes;
};

enum cm_status wk_cpu_packs_new(struct wk_cpu_packs **out)
{
	struct wk_cpu_packs *p = cm_calloc(1, sizeof(*p));

	*out = NULL;
	if (p == NULL)
		return CM_ENOMEM;
	p->cap = 64;
	p->slots = cm_calloc(p->cap, sizeof(*p->slots));
	if (p->slots == NULL) {
		cm_free(p);
		return CM_ENOMEM;
	}
	*out = p;
	return CM_OK;
}

void wk_cpu_packs_free(struct wk_cpu_packs *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->cap; i++)
		if (!p->slots[i].view)
			cm_huge_free(p->slots[i].data, p->slots[i].bytes);
	cm_free(p->slots);
	cm_free(p);
}

static size_t slot_of(const void *w, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)w * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 32) & (cap - 1);
}

/* The slot holding w, or the empty slot where it would go. */
static struct wk_cpu_pack_entry *probe(struct wk_cpu_pack_entry *slots, size_t cap, const void *w)
{
	size_t i = slot_of(w, cap);

	while (slots[i].w != NULL && slots[i].w != w)
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static enum cm_status grow(struct wk_cpu_packs *p)
{
	size_t cap = p->cap * 2;
	struct wk_cpu_pack_entry *slots = cm_calloc(cap, sizeof(*slots));

	if (slots == NULL)
		return CM_ENOMEM;
	for (size_t i = 0; i < p->cap; i++)
		if (p->slots[i].w != NULL)
			*probe(slots, cap, p->slots[i].w) = p->slots[i];
	cm_free(p->slots);
	p->slots = slots;
	p->cap = cap;
	return CM_OK;
}

/*
 * The empty slot for w, the table grown first when it would be over half
 * full; *e NULL when w has a slot already (a copy of it, or another view
 * at this address: the first is kept).  CM_ENOMEM.
 */
static enum cm_status free_slot(struct wk_cpu_packs *p, const void *w,
				struct wk_cpu_pack_entry **e)
{
	enum cm_status st;

	*e = probe(p->slots, p->cap, w);
	if ((*e)->w != NULL) {
		*e = NULL;
		return CM_OK;
	}
	if (2 * (p->used + 1) > p->cap) {
		if ((st = grow(p)) != CM_OK)
			return st;
		*e = probe(p->slots, p->cap, w);
	}
	return CM_OK;
}

enum cm_status wk_cpu_packs_add(struct wk_cpu_packs *p, struct wk_pool *pool, uint32_t wtype,
				const void *w, int rows, int cols, int plain)
{
	size_t bytes = plain ? wk_cpu_pack_plain_bytes(wtype, rows, cols)
			     : wk_cpu_pack_bytes(wtype, rows, cols);
	struct wk_cpu_pack_entry *e;
	enum cm_status st;

	if (bytes == 0 || w == NULL || cols % (int)wk_qtype_block_elems(wtype) != 0)
		return CM_EUNSUPPORTED;
	if ((st = free_slot(p, w, &e)) != CM_OK || e == NULL)
		return st;
	uint8_t *data = cm_huge_alloc(bytes);
	if (data == NULL)
		return CM_ENOMEM;
	int ns = (rows + 15) / 16, per = PACK_TASK_STRIPS;
	if (ns / per >= WK_POOL_MAX_TASKS)
		per = ns / (WK_POOL_MAX_TASKS - 1) + 1;
	int tasks = (ns + per - 1) / per;
	struct pack_job job = { wtype, w, rows, cols, data, per, plain };
	if (pool != NULL && tasks > 1 && wk_pool_threads(pool) > 1)
		wk_pool_run(pool, pack_task, &job, tasks);
	else if (plain)
		memcpy(data, w, bytes);
	else
		wk_cpu_pack_rows16(wtype, w, rows, cols, data);
	*e = (struct wk_cpu_pack_entry){ w, wtype, rows, cols, plain, bytes, data, 0 };
	p->used++;
	p->bytes += bytes;
	return CM_OK;
}

enum cm_status wk_cpu_packs_add_view(struct wk_cpu_packs *p, uint32_t wtype, const void *w,
				     int rows, int cols, const uint8_t *data)
{
	struct wk_cpu_pack_entry *e;
	enum cm_status st;

	if (w == NULL || data == NULL || wk_cpu_pack_bytes(wtype, rows, cols) == 0)
		return CM_EINVAL;
	if ((st = free_slot(p, w, &e)) != CM_OK || e == NULL)
		return st;
	*e = (struct wk_cpu_pack_entry){
		.w = w, .wtype = wtype, .rows = rows, .cols = cols, .plain = 0,
		.bytes = wk_cpu_pack_bytes(wtype, rows, cols), .data = (uint8_t *)data, .view = 1,
	};
	p->used++;
	return CM_OK;
}

const uint8_t *wk_cpu_packs_find(const struct wk_cpu_packs *p, uint32_t wtype, const void *w,
				 int rows, int cols, int *plain)
{
	if (p == NULL || p->used == 0)
		return NULL;
	const struct wk_cpu_pack_entry *e = probe(p->slots, p->cap, w);

	if (e->w == NULL || e->wtype != wtype || e->rows != rows || e->cols != cols)
		return NULL;
	*plain = e->plain;
	return e->data;
}

size_t wk_cpu_packs_bytes(const struct wk_cpu_packs *p)
{
	return p ? p->bytes : 0;
}
