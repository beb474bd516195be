/*
 * placement.h - tenant-isolated prefix-affinity placement of requests on
 * workers: a keyed routing key, weighted rendezvous hashing and a load bound.
 *
 * Pure functions: no I/O, no allocation, no global state; callable from the
 * gateway's event loop (cost: one pass over the workers, a few
 * nanoseconds each, plus two HMAC-SHA256 for the key).
 *
 * Routing key: K = HMAC-SHA256(HMAC-SHA256(salt, "sluice-route-v1"),
 * prompt[0..min(len, prefix_bytes))), where salt is the tenant's cache salt
 * derived by the server.  Without the salt nobody can compute or aim at
 * another tenant's key, and two tenants with the same text get unrelated
 * keys (docs/routing.md).
 *
 * Placement: every eligible worker (healthy, not draining, weight > 0) gets
 * a score from (K, worker name) only: u = hash64(K, name) mapped into (0, 1),
 * score = -weight / ln(u) (weighted rendezvous; with equal weights it is the
 * plain highest-random-weight order).  Walking the workers by descending
 * score, the first whose load after taking the request stays within the
 * bound wins:
 *     load + 1 <= ceil(c * (total + 1) * weight / sum_weights)
 * (total = in-flight requests on the eligible workers; with equal weights
 * ceil(c * (total + 1) / n)).  For c >= 1 some worker is always within
 * the bound (the bounds sum to at least total + 1); should none be, the
 * least loaded relative to its weight wins.  c == 0 disables the bound
 * (plain rendezvous).
 *
 * Adding or removing a worker moves only the keys whose top worker changes:
 * those of the removed worker, or those the new worker now tops.
 */
#ifndef SLUICE_GATEWAY_PLACEMENT_H
#define SLUICE_GATEWAY_PLACEMENT_H

#include "gateway/api/api.h"
#include "gateway/rollout.h"
#include "gateway/workers.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#define GW_PLACE_KEY_LEN 32
#define GW_PLACE_PREFIX_BYTES_DEFAULT 1024 /* prompt bytes in the key */
#define GW_PLACE_LOAD_FACTOR_DEFAULT 1.25  /* c */
#define GW_PLACE_LOAD_FACTOR_MAX 100.0

struct gw_place_key {
	uint8_t b[GW_PLACE_KEY_LEN];
};

struct gw_place_worker {
	const char *name;  /* stable identity: the score depends on it only */
	double weight;     /* relative capacity, > 0; 0 = never chosen */
	uint32_t load;     /* requests in flight (queued + running) */
	bool healthy;
	bool draining;
};

struct gw_place_pick {
	size_t index;      /* into the worker array */
	bool spilled;      /* the top-scored worker was over the bound */
	bool fallback;     /* every worker was over the bound: least loaded */
};

/*
 * Routing key of a prompt for the tenant whose cache salt is
 * salt[0..salt_len): keyed by the salt, over the first prefix_bytes bytes of
 * the canonical prompt (all of it when shorter).  Never call it with a salt
 * that is not the authenticated tenant's.
 */
void gw_place_key(const uint8_t *salt, size_t salt_len, const void *prompt,
		  size_t prompt_len, size_t prefix_bytes,
		  struct gw_place_key *out);

/*
 * The same in two steps, for callers that keep the tenant's routing
 * sub-key (HMAC-SHA256(salt, "sluice-route-v1")) in the tenant record:
 * gw_place_key == gw_place_key_sub(gw_place_subkey(salt), ...).  The
 * sub-key is as secret as the salt.
 */
void gw_place_subkey(const uint8_t *salt, size_t salt_len,
		     uint8_t sub[GW_PLACE_KEY_LEN]);
void gw_place_key_sub(const uint8_t sub[GW_PLACE_KEY_LEN], const void *prompt,
		      size_t prompt_len, size_t prefix_bytes,
		      struct gw_place_key *out);

/*
 * Chooses a worker among w[0..n) for `key` with load factor c (0 = no bound,
 * else in [1, GW_PLACE_LOAD_FACTOR_MAX]).  CM_ENOTFOUND when no worker is
 * eligible, CM_EINVAL for a c outside its domain, a weight that is negative
 * or not finite, or a NULL name.
 */
enum cm_status gw_place_choose(const struct gw_place_key *key,
			       const struct gw_place_worker *w, size_t n,
			       double c, struct gw_place_pick *out) CM_WUR;

/* The rendezvous score of one worker for a key (tests, metrics). */
double gw_place_score(const struct gw_place_key *key, const char *name,
		      double weight);

/* ---- placing one request among the gateway's workers ------------------- */

struct gw_place_policy {
	size_t prefix_bytes;   /* route.prefix_bytes: prompt bytes in the key */
	double load_factor;    /* route.load_factor */
	int round_robin;       /* route.policy round_robin */
	int batch;             /* batch work: held to the workers' batch share */
	const struct gw_rollout *rollout; /* roles and canary (NULL: every worker serves) */
};

/*
 * Index of the worker for a request of `model` from the tenant of `salt`:
 * among the workers that can take `need` requests now (the choices of an
 * `n` > 1 request go to one worker, to share its prefix cache) and serve
 * that model, the one the prompt prefix's key picks (or the next in round
 * robin, *rr the cursor).  -1 when none can take it.  At most 256 workers
 * are considered.  With a rollout, only the workers whose role takes the
 * tenant's traffic: the canaries when the tenant's canary bucket is below
 * the model's canary share and a canary is ready, else the serving ones.
 */
long gw_place_request(struct gw_workers *w, const struct gw_place_policy *p,
		      const char *model, const uint8_t *salt, size_t salt_len,
		      const struct gw_api_request *r, uint32_t need, size_t *rr);

#endif
