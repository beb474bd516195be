/*
 * grammar_check.c - what a lowered grammar must satisfy before a matcher
 * runs it (grammar.h): live alternatives (every call can complete), the
 * nullable rules and the fewest bytes each rule matches (for the mask
 * cache's horizon), and no left recursion (a cycle of calls before any
 * byte that pushes frames; cycles of tail calls are harmless).
 *
 * Pure computation over a struct wk_gram being built, any thread.
 */
#include <string.h>

#include "common/alloc.h"
#include "worker/grammar/internal.h"

/* ---- checks ---------------------------------------------------------------- */

/* Live alternatives: every call in them reaches a rule that can complete. */
static void mark_live(struct wk_gram *g, uint8_t *rule_ok)
{
	memset(g->alt_live, 0, g->n_alts);
	memset(rule_ok, 0, g->n_rules);
	for (int changed = 1; changed;) {
		changed = 0;
		for (uint32_t r = 0; r < g->n_rules; r++) {
			for (uint32_t a = g->rule_alt0[r]; a < g->rule_alt0[r] + g->rule_nalt[r]; a++) {
				if (g->alt_live[a])
					continue;
				int ok = 1;
				for (uint32_t e = g->alts[a]; g->elems[e].op != WK_GRAM_END; e++)
					if (g->elems[e].op == WK_GRAM_RULE && !rule_ok[g->elems[e].arg]) {
						ok = 0;
						break;
					}
				if (ok) {
					g->alt_live[a] = 1;
					rule_ok[r] = 1;
					changed = 1;
				}
			}
		}
	}
}

#define MINLEN_CAP (1u << 30)

/* Fewest bytes each rule matches (Bellman-Ford style, live alternatives). */
static void mark_minlen(struct wk_gram *g)
{
	for (uint32_t r = 0; r < g->n_rules; r++)
		g->rule_minlen[r] = MINLEN_CAP;
	for (int changed = 1; changed;) {
		changed = 0;
		for (uint32_t r = 0; r < g->n_rules; r++) {
			for (uint32_t a = g->rule_alt0[r]; a < g->rule_alt0[r] + g->rule_nalt[r]; a++) {
				if (!g->alt_live[a])
					continue;
				uint64_t len = 0;
				for (uint32_t e = g->alts[a]; g->elems[e].op != WK_GRAM_END && len < MINLEN_CAP; e++)
					len += g->elems[e].op == WK_GRAM_BYTES ? 1 : g->rule_minlen[g->elems[e].arg];
				if (len < g->rule_minlen[r]) {
					g->rule_minlen[r] = (uint32_t)len;
					changed = 1;
				}
			}
		}
	}
}

static void mark_nullable(const struct wk_gram *g, uint8_t *nul)
{
	memset(nul, 0, g->n_rules);
	for (int changed = 1; changed;) {
		changed = 0;
		for (uint32_t r = 0; r < g->n_rules; r++) {
			if (nul[r])
				continue;
			for (uint32_t a = g->rule_alt0[r]; a < g->rule_alt0[r] + g->rule_nalt[r]; a++) {
				if (!g->alt_live[a])
					continue;
				int ok = 1;
				for (uint32_t e = g->alts[a]; g->elems[e].op != WK_GRAM_END; e++)
					if (g->elems[e].op == WK_GRAM_BYTES || !nul[g->elems[e].arg]) {
						ok = 0;
						break;
					}
				if (ok) {
					nul[r] = 1;
					changed = 1;
					break;
				}
			}
		}
	}
}

/*
 * Edges "r may call s before matching any byte", then strongly connected
 * components (Tarjan, iterative).  A cycle made only of tail calls is
 * harmless (the matcher reuses the frame: (x?)* and the like); a cycle
 * with a call that pushes a frame would grow the stack forever: that is
 * left recursion.
 */
static enum cm_status find_left_recursion(const struct wk_gram *g, const uint8_t *nul, int *found,
					  uint32_t *bad)
{
	enum cm_status st = CM_ENOMEM;
	uint32_t n = g->n_rules, n_edges = 0;
	uint32_t *e0 = cm_calloc(n + 1, sizeof(uint32_t)), *edges = NULL;
	uint8_t *tail = NULL;
	uint32_t *idx = cm_calloc(n + 1, sizeof(uint32_t)), *low = cm_calloc(n + 1, sizeof(uint32_t));
	uint32_t *comp = cm_calloc(n + 1, sizeof(uint32_t)), *stk = cm_calloc(n + 1, sizeof(uint32_t));
	uint32_t *cs = cm_calloc(n + 1, sizeof(uint32_t)), *cur = cm_calloc(n + 1, sizeof(uint32_t));
	uint8_t *on = cm_calloc(n + 1, 1);
	*found = 0;
	if (!e0 || !idx || !low || !comp || !stk || !cs || !cur || !on)
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		n_edges = 0;
		for (uint32_t r = 0; r < n; r++) {
			e0[r] = n_edges;
			for (uint32_t a = g->rule_alt0[r]; a < g->rule_alt0[r] + g->rule_nalt[r]; a++) {
				if (!g->alt_live[a])
					continue;
				for (uint32_t e = g->alts[a]; g->elems[e].op == WK_GRAM_RULE; e++) {
					if (pass) {
						edges[n_edges] = g->elems[e].arg;
						tail[n_edges] = g->elems[e + 1].op == WK_GRAM_END;
					}
					n_edges++;
					if (!nul[g->elems[e].arg])
						break;
				}
			}
		}
		e0[n] = n_edges;
		if (!pass && (!(edges = cm_calloc(n_edges + 1, sizeof(uint32_t))) ||
			      !(tail = cm_calloc(n_edges + 1, 1))))
			goto out;
	}
	uint32_t counter = 0, sp = 0, ncs = 0;
	for (uint32_t s0 = 0; s0 < n; s0++) {
		if (idx[s0])
			continue;
		cs[ncs] = s0;
		cur[ncs++] = e0[s0];
		idx[s0] = low[s0] = ++counter;
		stk[sp++] = s0;
		on[s0] = 1;
		while (ncs) {
			uint32_t v = cs[ncs - 1];
			if (cur[ncs - 1] < e0[v + 1]) {
				uint32_t w = edges[cur[ncs - 1]++];
				if (!idx[w]) {
					idx[w] = low[w] = ++counter;
					stk[sp++] = w;
					on[w] = 1;
					cs[ncs] = w;
					cur[ncs++] = e0[w];
				} else if (on[w] && idx[w] < low[v]) {
					low[v] = idx[w];
				}
				continue;
			}
			if (low[v] == idx[v]) {
				uint32_t w;
				do {
					w = stk[--sp];
					on[w] = 0;
					comp[w] = v + 1;
				} while (w != v);
			}
			ncs--;
			if (ncs && low[v] < low[cs[ncs - 1]])
				low[cs[ncs - 1]] = low[v];
		}
	}
	for (uint32_t r = 0; r < n && !*found; r++)
		for (uint32_t e = e0[r]; e < e0[r + 1]; e++)
			if (!tail[e] && comp[edges[e]] == comp[r]) {
				*found = 1;
				*bad = r;
				break;
			}
	st = CM_OK;
out:
	cm_free(e0);
	cm_free(edges);
	cm_free(tail);
	cm_free(idx);
	cm_free(low);
	cm_free(comp);
	cm_free(stk);
	cm_free(cs);
	cm_free(cur);
	cm_free(on);
	return st;
}

static const char *rule_label(const struct wk_gram *g, uint32_t r)
{
	return g->rule_names[r][0] ? g->rule_names[r] : "(a group or repetition)";
}

enum cm_status wk_gram_check(struct wk_gram *g, char *err, size_t err_len)
{
	enum cm_status st = CM_ENOMEM;
	uint8_t *ok = cm_malloc(g->n_rules + 1), *nul = cm_malloc(g->n_rules + 1);
	if (!ok || !nul) {
		cm_fail(err, err_len, CM_ENOMEM, "out of memory");
		goto out;
	}
	mark_live(g, ok);
	if (!ok[g->root]) {
		st = cm_fail(err, err_len, CM_EINVAL, "unsatisfiable: the grammar matches no string");
		goto out;
	}
	mark_nullable(g, nul);
	memcpy(g->rule_nullable, nul, g->n_rules);
	mark_minlen(g);
	uint32_t bad = 0;
	int found = 0;
	if (find_left_recursion(g, nul, &found, &bad) != CM_OK) {
		cm_fail(err, err_len, CM_ENOMEM, "out of memory");
		goto out;
	}
	if (found) {
		st = cm_fail(err, err_len, CM_EINVAL,
			     "left recursion: rule '%.100s' can call itself before matching any character",
			     rule_label(g, bad));
		goto out;
	}
	st = CM_OK;
out:
	cm_free(ok);
	cm_free(nul);
	return st;
}

