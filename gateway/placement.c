/*
 * placement.c - prefix-affinity placement (see placement.h for the contract).
 *
 * Pure and allocation-free; safe on the event loop.  The per-worker hash is
 * not cryptographic: its input key is already a secret-keyed HMAC, so all
 * it has to do is spread (key, worker) pairs uniformly and independently,
 * which two rounds of a 64-bit finaliser over the key words and a hash of
 * the worker name do.
 */
#include "gateway/placement.h"

#include <math.h>
#include <string.h>

#include "common/buf.h"
#include "common/crypto.h"
#include "common/hash.h"

static const char route_label[] = "sluice-route-v1";

void gw_place_subkey(const uint8_t *salt, size_t salt_len,
		     uint8_t sub[GW_PLACE_KEY_LEN])
{
	/* a sub-key for routing only: the salt also seeds the worker's
	 * prefix-cache hash chain, and the two uses must not share outputs */
	cm_hmac_sha256(salt, salt_len, route_label, sizeof(route_label) - 1, sub);
}

void gw_place_key_sub(const uint8_t sub[GW_PLACE_KEY_LEN], const void *prompt,
		      size_t prompt_len, size_t prefix_bytes,
		      struct gw_place_key *out)
{
	size_t n = prompt_len < prefix_bytes ? prompt_len : prefix_bytes;

	cm_hmac_sha256(sub, GW_PLACE_KEY_LEN, n ? prompt : "", n, out->b);
}

void gw_place_key(const uint8_t *salt, size_t salt_len, const void *prompt,
		  size_t prompt_len, size_t prefix_bytes,
		  struct gw_place_key *out)
{
	uint8_t sub[GW_PLACE_KEY_LEN];

	gw_place_subkey(salt, salt_len, sub);
	gw_place_key_sub(sub, prompt, prompt_len, prefix_bytes, out);
	cm_wipe(sub, sizeof(sub));
}

/* ==== hashing ======================================================= */

static uint64_t name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return cm_fmix64(h);
}

static uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t pair_hash(const struct gw_place_key *key, const char *name)
{
	uint64_t k0 = load_le64(key->b), k1 = load_le64(key->b + 8);

	return cm_fmix64(k0 ^ cm_fmix64(name_hash(name) ^ k1));
}

/* u in (0, 1): 53 bits of the pair hash, centred in their interval. */
static double pair_unit(const struct gw_place_key *key, const char *name)
{
	return ((double)(pair_hash(key, name) >> 11) + 0.5) *
	       (1.0 / 9007199254740992.0);
}

double gw_place_score(const struct gw_place_key *key, const char *name,
		      double weight)
{
	return -weight / log(pair_unit(key, name));
}

/* ==== placement ===================================================== */

static bool eligible(const struct gw_place_worker *w)
{
	return w->healthy && !w->draining && w->weight > 0.0;
}

/* 1 when (score a, worker a) ranks before (score b, worker b). */
static int ranks_before(double sa, const struct gw_place_worker *a, size_t ia,
			double sb, const struct gw_place_worker *b, size_t ib)
{
	int c;

	if (sa != sb)
		return sa > sb;
	c = strcmp(a->name, b->name);
	if (c != 0)
		return c < 0;
	return ia < ib;
}

enum cm_status gw_place_choose(const struct gw_place_key *key,
			       const struct gw_place_worker *w, size_t n,
			       double c, struct gw_place_pick *out)
{
	double total = 0.0, wsum = 0.0, w0 = -1.0;
	bool uniform = true;
	double best_s = 0.0, top_s = 0.0, fb_s = 0.0, fb_r = 0.0;
	size_t best = SIZE_MAX, top = SIZE_MAX, fb = SIZE_MAX, n_elig = 0;

	if (!isfinite(c) || (c != 0.0 && (c < 1.0 || c > GW_PLACE_LOAD_FACTOR_MAX)))
		return CM_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(w[i].weight) || w[i].weight < 0.0 || !w[i].name)
			return CM_EINVAL;
		if (!eligible(&w[i]))
			continue;
		n_elig++;
		total += w[i].load;
		wsum += w[i].weight;
		if (w0 < 0.0)
			w0 = w[i].weight;
		else if (w[i].weight != w0)
			uniform = false;
	}
	if (n_elig == 0)
		return CM_ENOTFOUND;

	/* One pass: the best-ranked worker within the bound is the first one
	 * the rendezvous order would accept. */
	for (size_t i = 0; i < n; i++) {
		double s, r;

		if (!eligible(&w[i]))
			continue;
		/* -w / ln(u) increases with u: with equal weights u alone
		 * ranks the same and spares the log() */
		s = uniform ? pair_unit(key, w[i].name)
			    : gw_place_score(key, w[i].name, w[i].weight);
		if (top == SIZE_MAX ||
		    ranks_before(s, &w[i], i, top_s, &w[top], top)) {
			top = i;
			top_s = s;
		}
		if (c != 0.0) {
			double bound = ceil(c * (total + 1.0) * w[i].weight / wsum);

			if ((double)w[i].load + 1.0 > bound) {
				r = ((double)w[i].load + 1.0) / w[i].weight;
				if (fb == SIZE_MAX || r < fb_r ||
				    (r == fb_r &&
				     ranks_before(s, &w[i], i, fb_s, &w[fb], fb))) {
					fb = i;
					fb_r = r;
					fb_s = s;
				}
				continue;
			}
		}
		if (best == SIZE_MAX ||
		    ranks_before(s, &w[i], i, best_s, &w[best], best)) {
			best = i;
			best_s = s;
		}
	}
	if (best != SIZE_MAX) {
		out->index = best;
		out->spilled = best != top;
		out->fallback = false;
	} else {
		out->index = fb;
		out->spilled = true;
		out->fallback = true;
	}
	return CM_OK;
}

/* ---- placing one request ---------------------------------------------------- */

/* For appends whose failure only shortens the key (the buffer's cap). */
static void place_append(struct cm_buf *b, const void *p, size_t n)
{
	enum cm_status st = cm_buf_append(b, p, n);

	(void)st;
}

/* Canonical prompt prefix for the routing key. */
static void place_prompt_prefix(const struct gw_api_request *r, struct cm_buf *b, size_t max)
{
	if (r->prompt_kind == PROTO_PROMPT_TEXT) {
		place_append(b, r->text.ptr, r->text.len < max ? r->text.len : max);
		return;
	}
	for (uint32_t i = 0; i < r->n_messages && cm_buf_len(b) < max; i++) {
		const struct proto_message *m = &r->messages[i];
		size_t room = max - cm_buf_len(b);

		place_append(b, m->role.ptr, m->role.len < room ? m->role.len : room);
		place_append(b, "\n", 1);
		room = max > cm_buf_len(b) ? max - cm_buf_len(b) : 0;
		place_append(b, m->content.ptr, m->content.len < room ? m->content.len : room);
		place_append(b, "\n", 1);
	}
}

long gw_place_request(struct gw_workers *w, const struct gw_place_policy *p,
		      const char *model, const uint8_t *salt, size_t salt_len,
		      const struct gw_api_request *r, uint32_t need, size_t *rr)
{
	size_t n = gw_workers_count(w), k = 0;
	struct gw_place_worker rw[256];
	size_t idx[256];
	struct gw_worker_info wi;
	struct gw_place_key key;
	struct gw_place_pick pick;
	struct cm_buf pre;
	size_t mlen = strlen(model);
	int canary = 0;

	if (p->rollout) {
		uint32_t pct;
		int ready;

		gw_rollout_canary(p->rollout, model, mlen, &pct, &ready);
		canary = pct && ready && gw_rollout_bucket(salt, salt_len, model) < pct;
	}
	for (size_t i = 0; i < n && k < 256; i++) {
		if (p->rollout && !gw_rollout_admits(p->rollout, i, canary))
			continue;
		if (!gw_workers_can_take_class(w, i, need, p->batch))
			continue;
		gw_workers_info(w, i, &wi);
		if (wi.hello.model_name.len != mlen ||
		    memcmp(wi.hello.model_name.ptr, model, mlen) != 0)
			continue;
		rw[k].name = wi.name;
		rw[k].weight = 1;
		rw[k].load = wi.inflight;
		rw[k].healthy = true;
		rw[k].draining = false;
		idx[k++] = i;
	}
	if (k == 0)
		return -1;
	if (k == 1)
		return (long)idx[0];
	if (p->round_robin)
		return (long)idx[(*rr)++ % k];
	cm_buf_init(&pre, p->prefix_bytes + 64);
	place_prompt_prefix(r, &pre, p->prefix_bytes);
	gw_place_key(salt, salt_len, cm_buf_data(&pre), cm_buf_len(&pre), p->prefix_bytes, &key);
	cm_buf_deinit(&pre);
	if (gw_place_choose(&key, rw, k, p->load_factor, &pick) != CM_OK)
		return (long)idx[0];
	return (long)idx[pick.index];
}
