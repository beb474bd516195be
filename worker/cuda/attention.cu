/*
 * attention.cu - see attention.cuh.
 */
#include "worker/cuda/attention.cuh"

#include <math.h>

#include "worker/cuda/check.cuh"

#define WK_CU_ATT_WARPS 4

/*
 * SPLIT = false: one block per (token, KV head) over positions 0..pos,
 * normalised output.  SPLIT = true: blockIdx.z = chunk c of
 * WK_CU_ATT_CHUNK positions; the block writes its unnormalised partial
 * state (max, sum, output) for wk_cu_att_merge_kernel.
 */
template <int DPL, int GRP, bool SPLIT>
__global__ void __launch_bounds__(WK_CU_ATT_WARPS * 32)
wk_cu_att_kernel(const float *q, const uint32_t *pos, const uint32_t *seq,
		 const uint32_t *tables, struct wk_cu_kvgeo g, const __half *kc,
		 const __half *vc, float *out, float *part, uint32_t nch)
{
	__shared__ float sm_m[WK_CU_ATT_WARPS][GRP];
	__shared__ float sm_l[WK_CU_ATT_WARPS][GRP];
	__shared__ float sm_o[WK_CU_ATT_WARPS][GRP][DPL * 32];
	uint32_t t = blockIdx.x, kvh = blockIdx.y, c = blockIdx.z;
	uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	uint32_t p = pos[t], hd = g.head_dim, qd = g.n_head * hd;
	const uint32_t *table = tables + (uint64_t)seq[t] * g.table_stride;
	const float scale = g.scale;
	float qr[GRP][DPL], acc[GRP][DPL], m[GRP], l[GRP];
	uint32_t j0, j1 = p, lo;

	if (p == WK_CU_POS_NONE) {
		if (!SPLIT)
			for (uint32_t i = threadIdx.x; i < GRP * hd; i += blockDim.x)
				out[(uint64_t)t * qd + (uint64_t)kvh * GRP * hd + i] = 0.0f;
		return;
	}
	/* a sliding window sees positions lo..p only */
	lo = g.n_swa && p >= g.n_swa ? p + 1 - g.n_swa : 0;
	j0 = lo;
	if (SPLIT) {
		j0 = c * WK_CU_ATT_CHUNK;
		if (j0 > p || j0 + WK_CU_ATT_CHUNK <= lo)
			return; /* outside the token's positions: the merge skips it */
		j1 = j0 + WK_CU_ATT_CHUNK - 1 < p ? j0 + WK_CU_ATT_CHUNK - 1 : p;
		j0 = j0 < lo ? lo : j0;
	}
	for (int h = 0; h < GRP; h++) {
		const float *qh = q + (uint64_t)t * qd + (uint64_t)(kvh * GRP + h) * hd + lane * DPL;

		for (int i = 0; i < DPL; i++) {
			qr[h][i] = qh[i];
			acc[h][i] = 0.0f;
		}
		m[h] = -INFINITY;
		l[h] = 0.0f;
	}
	for (uint32_t j = j0 + warp; j <= j1; j += WK_CU_ATT_WARPS) {
		uint64_t slot = (uint64_t)table[j / g.block_tokens] * g.block_tokens +
				j % g.block_tokens;
		const __half *kr = kc + slot * g.kv_dim + (uint64_t)kvh * hd + lane * DPL;
		const __half *vr = vc + slot * g.kv_dim + (uint64_t)kvh * hd + lane * DPL;
		float kf[DPL], vf[DPL];

		for (int i = 0; i < DPL; i++) {
			kf[i] = __half2float(kr[i]);
			vf[i] = __half2float(vr[i]);
		}
		for (int h = 0; h < GRP; h++) {
			float sdot = 0.0f, mn, corr, pj;

			for (int i = 0; i < DPL; i++)
				sdot = fmaf(qr[h][i], kf[i], sdot);
			for (int o = 16; o > 0; o >>= 1)
				sdot += __shfl_xor_sync(0xffffffffu, sdot, o);
			sdot *= scale;
			if (g.softcap > 0.0f) /* gemma2 */
				sdot = g.softcap * tanhf(sdot / g.softcap);
			mn = fmaxf(m[h], sdot);
			corr = expf(m[h] - mn);
			pj = expf(sdot - mn);
			l[h] = l[h] * corr + pj;
			for (int i = 0; i < DPL; i++)
				acc[h][i] = acc[h][i] * corr + pj * vf[i];
			m[h] = mn;
		}
	}
	for (int h = 0; h < GRP; h++) {
		if (lane == 0) {
			sm_m[warp][h] = m[h];
			sm_l[warp][h] = l[h];
		}
		for (int i = 0; i < DPL; i++)
			sm_o[warp][h][lane * DPL + i] = acc[h][i];
	}
	__syncthreads();
	/* merge the warps' states in the fixed order 0..WARPS-1 */
	for (uint32_t i = threadIdx.x; i < GRP * hd; i += blockDim.x) {
		uint32_t h = i / hd, d = i % hd, head = kvh * GRP + h;
		float mx = -INFINITY, ls = 0.0f, o = 0.0f;

		for (int w = 0; w < WK_CU_ATT_WARPS; w++)
			mx = fmaxf(mx, sm_m[w][h]);
		for (int w = 0; w < WK_CU_ATT_WARPS; w++) {
			float cw = sm_l[w][h] > 0.0f ? expf(sm_m[w][h] - mx) : 0.0f;

			ls += sm_l[w][h] * cw;
			o += sm_o[w][h][d] * cw;
		}
		if (!SPLIT) {
			out[(uint64_t)t * qd + (uint64_t)head * hd + d] = o / ls;
		} else {
			uint64_t pi = ((uint64_t)t * g.n_head + head) * nch + c;

			part[pi * (hd + 2) + 2 + d] = o;
			if (d == 0) {
				part[pi * (hd + 2)] = mx;
				part[pi * (hd + 2) + 1] = ls;
			}
		}
	}
}

/* out[t][head] = merge of the token's chunks lo/CHUNK..pos/CHUNK, in that order */
__global__ void wk_cu_att_merge_kernel(const uint32_t *pos, struct wk_cu_kvgeo g,
				       const float *part, uint32_t nch, float *out)
{
	uint32_t t = blockIdx.x, head = blockIdx.y, hd = g.head_dim;
	uint32_t p = pos[t];
	uint64_t base = ((uint64_t)t * g.n_head + head) * nch;
	float *o = out + (uint64_t)t * g.n_head * hd + (uint64_t)head * hd;

	for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
		float mx = -INFINITY, ls = 0.0f, acc = 0.0f;
		uint32_t n, c0;

		if (p == WK_CU_POS_NONE) {
			o[d] = 0.0f;
			continue;
		}
		n = p / WK_CU_ATT_CHUNK + 1;
		c0 = g.n_swa && p >= g.n_swa ? (p + 1 - g.n_swa) / WK_CU_ATT_CHUNK : 0;
		for (uint32_t c = c0; c < n; c++)
			mx = fmaxf(mx, part[(base + c) * (hd + 2)]);
		for (uint32_t c = c0; c < n; c++) {
			const float *pc = part + (base + c) * (hd + 2);
			float w = expf(pc[0] - mx);

			ls += pc[1] * w;
			acc += pc[2 + d] * w;
		}
		o[d] = acc / ls;
	}
}

template <int DPL, bool SPLIT>
static enum cm_status wk_cu_att_group(uint32_t grp, dim3 grid, const float *q,
				      const uint32_t *pos, const uint32_t *seq,
				      const uint32_t *tables, const struct wk_cu_kvgeo *g,
				      const __half *kc, const __half *vc, float *out, float *part,
				      uint32_t nch, cudaStream_t s)
{
	switch (grp) {
#define WK_G(G) case G: wk_cu_att_kernel<DPL, G, SPLIT><<<grid, WK_CU_ATT_WARPS * 32, 0, s>>>( \
		q, pos, seq, tables, *g, kc, vc, out, part, nch); break;
	WK_G(1) WK_G(2) WK_G(4) WK_G(8)
#undef WK_G
	default:
		return CM_EUNSUPPORTED;
	}
	return CM_OK;
}

template <bool SPLIT>
static enum cm_status wk_cu_att_launch(const float *q, const uint32_t *pos, const uint32_t *seq,
				       const uint32_t *tables, const struct wk_cu_kvgeo *g,
				       const __half *kc, const __half *vc, float *out, float *part,
				       uint32_t nch, uint32_t n, cudaStream_t s)
{
	uint32_t grp = g->n_head / g->n_head_kv;
	dim3 grid(n, g->n_head_kv, SPLIT ? nch : 1);
	enum cm_status st;

	switch (g->head_dim) {
	case 32: st = wk_cu_att_group<1, SPLIT>(grp, grid, q, pos, seq, tables, g, kc, vc, out, part, nch, s); break;
	case 64: st = wk_cu_att_group<2, SPLIT>(grp, grid, q, pos, seq, tables, g, kc, vc, out, part, nch, s); break;
	case 96: st = wk_cu_att_group<3, SPLIT>(grp, grid, q, pos, seq, tables, g, kc, vc, out, part, nch, s); break;
	case 128: st = wk_cu_att_group<4, SPLIT>(grp, grid, q, pos, seq, tables, g, kc, vc, out, part, nch, s); break;
	case 256: st = wk_cu_att_group<8, SPLIT>(grp, grid, q, pos, seq, tables, g, kc, vc, out, part, nch, s); break;
	default: st = CM_EUNSUPPORTED; break;
	}
	if (st != CM_OK)
		return st;
	WK_CU_LAUNCH();
	return CM_OK;
}

enum cm_status wk_cu_attention(const float *q, const uint32_t *pos, const uint32_t *seq,
			       const uint32_t *tables, const struct wk_cu_kvgeo *g,
			       const __half *kc, const __half *vc, float *out, uint32_t n,
			       cudaStream_t s)
{
	if (n == 0)
		return CM_OK;
	return wk_cu_att_launch<false>(q, pos, seq, tables, g, kc, vc, out, NULL, 1, n, s);
}

uint32_t wk_cu_att_chunks(const struct wk_cu_kvgeo *g)
{
	uint64_t ctx = (uint64_t)g->table_stride * g->block_tokens;

	return (uint32_t)((ctx + WK_CU_ATT_CHUNK - 1) / WK_CU_ATT_CHUNK);
}

enum cm_status wk_cu_attention_split(const float *q, const uint32_t *pos, const uint32_t *seq,
				     const uint32_t *tables, const struct wk_cu_kvgeo *g,
				     const __half *kc, const __half *vc, float *out,
				     float *part, uint32_t n, cudaStream_t s)
{
	uint32_t nch = wk_cu_att_chunks(g);
	enum cm_status st;

	if (n == 0)
		return CM_OK;
	st = wk_cu_att_launch<true>(q, pos, seq, tables, g, kc, vc, out, part, nch, n, s);
	if (st != CM_OK)
		return st;
	wk_cu_att_merge_kernel<<<dim3(n, g->n_head), g->head_dim, 0, s>>>(pos, *g, part, nch, out);
	WK_CU_LAUNCH();
	return CM_OK;
}
