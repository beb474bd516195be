/*
 * attention.cu - see attention.cuh.
 */
#include "worker/cuda/attention.cuh"

#include <math.h>

#include "worker/cuda/check.cuh"

#define WK_CU_ATT_WARPS 4

template <int DPL, int GRP>
__global__ void __launch_bounds__(WK_CU_ATT_WARPS * 32)
wk_cu_att_kernel(const float *q, const uint32_t *pos, const uint32_t *seq,
		 const uint32_t *tables, struct wk_cu_kvgeo g, const __half *kc,
		 const __half *vc, float *out)
{
	__shared__ float sm_m[WK_CU_ATT_WARPS][GRP];
	__shared__ float sm_l[WK_CU_ATT_WARPS][GRP];
	__shared__ float sm_o[WK_CU_ATT_WARPS][GRP][DPL * 32];
	uint32_t t = blockIdx.x, kvh = blockIdx.y;
	uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	uint32_t p = pos[t], hd = g.head_dim, qd = g.n_head * hd;
	const uint32_t *table = tables + (uint64_t)seq[t] * g.table_stride;
	const float scale = 1.0f / sqrtf((float)hd);
	float qr[GRP][DPL], acc[GRP][DPL], m[GRP], l[GRP];

	if (p == WK_CU_POS_NONE) {
		for (uint32_t i = threadIdx.x; i < GRP * hd; i += blockDim.x)
			out[(uint64_t)t * qd + (uint64_t)kvh * GRP * hd + i] = 0.0f;
		return;
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
	for (uint32_t j = warp; j <= p; j += WK_CU_ATT_WARPS) {
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
		uint32_t h = i / hd, d = i % hd;
		float mx = -INFINITY, ls = 0.0f, o = 0.0f;

		for (int w = 0; w < WK_CU_ATT_WARPS; w++)
			mx = fmaxf(mx, sm_m[w][h]);
		for (int w = 0; w < WK_CU_ATT_WARPS; w++) {
			float c = sm_l[w][h] > 0.0f ? expf(sm_m[w][h] - mx) : 0.0f;

			ls += sm_l[w][h] * c;
			o += sm_o[w][h][d] * c;
		}
		out[(uint64_t)t * qd + (uint64_t)(kvh * GRP + h) * hd + d] = o / ls;
	}
}

template <int DPL>
static enum cm_status wk_cu_att_group(uint32_t grp, dim3 grid, const float *q,
				      const uint32_t *pos, const uint32_t *seq,
				      const uint32_t *tables, const struct wk_cu_kvgeo *g,
				      const __half *kc, const __half *vc, float *out,
				      cudaStream_t s)
{
	switch (grp) {
#define WK_G(G) case G: wk_cu_att_kernel<DPL, G><<<grid, WK_CU_ATT_WARPS * 32, 0, s>>>( \
		q, pos, seq, tables, *g, kc, vc, out); break;
	WK_G(1) WK_G(2) WK_G(4) WK_G(8)
#undef WK_G
	default:
		return CM_EUNSUPPORTED;
	}
	return CM_OK;
}

enum cm_status wk_cu_attention(const float *q, const uint32_t *pos, const uint32_t *seq,
			       const uint32_t *tables, const struct wk_cu_kvgeo *g,
			       const __half *kc, const __half *vc, float *out, uint32_t n,
			       cudaStream_t s)
{
	uint32_t grp = g->n_head / g->n_head_kv;
	dim3 grid(n, g->n_head_kv);
	enum cm_status st;

	if (n == 0)
		return CM_OK;
	switch (g->head_dim) {
	case 32: st = wk_cu_att_group<1>(grp, grid, q, pos, seq, tables, g, kc, vc, out, s); break;
	case 64: st = wk_cu_att_group<2>(grp, grid, q, pos, seq, tables, g, kc, vc, out, s); break;
	case 128: st = wk_cu_att_group<4>(grp, grid, q, pos, seq, tables, g, kc, vc, out, s); break;
	case 256: st = wk_cu_att_group<8>(grp, grid, q, pos, seq, tables, g, kc, vc, out, s); break;
	default: st = CM_EUNSUPPORTED; break;
	}
	if (st != CM_OK)
		return st;
	WK_CU_LAUNCH();
	return CM_OK;
}
