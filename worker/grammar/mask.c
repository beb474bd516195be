/*
 * mask.c - the vocabulary trie and the token mask (mask.h): the per
 * local-state cache of context-independent tokens and of remainders, and
 * the run-time walk of the remainders from the real context.
 *
 * Owns: the trie's arrays (immutable once built), the mask cache and its
 * scratch.  One thread per struct wk_mask.
 */
#include "worker/grammar/mask.h"

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "worker/grammar/internal.h"
#include "worker/text/tokenizer.h"

struct wk_vtrie {
	size_t n_vocab;
	uint32_t n_nodes;
	uint8_t *byte;
	uint16_t *depth;
	uint32_t *skip;  /* first node after the subtree */
	uint32_t *tok0, *ntok;
	uint32_t *ft;    /* [n_nodes + 1]: toks index of the first token at or after the node */
	uint64_t (*sub)[4]; /* bytes that occur below the node */
	int32_t *toks;   /* ids in piece order */
	uint8_t *blob;
	uint32_t *poff, *plen; /* per id; plen 0: never allowed */
	uint8_t *eog;
	int32_t *eog_ids;
	uint32_t n_eog;
	uint32_t max_depth;
};

static _Thread_local const struct wk_vtrie *sort_trie;

static int cmp_piece(const void *a, const void *b)
{
	const struct wk_vtrie *t = sort_trie;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	uint32_t lx = t->plen[x], ly = t->plen[y];
	int c = memcmp(t->blob + t->poff[x], t->blob + t->poff[y], lx < ly ? lx : ly);
	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return x < y ? -1 : x > y;
}

static enum cm_status trie_index(struct wk_vtrie *t)
{
	size_t n_ok = 0, max_nodes = 1;
	for (size_t i = 0; i < t->n_vocab; i++)
		if (t->plen[i]) {
			n_ok++;
			max_nodes += t->plen[i];
			if (t->plen[i] > t->max_depth)
				t->max_depth = t->plen[i];
		}
	if (max_nodes > UINT32_MAX || t->max_depth > UINT16_MAX)
		return CM_ELIMIT;
	t->toks = cm_calloc(n_ok + 1, sizeof(int32_t));
	uint32_t *path = cm_calloc(t->max_depth + 2, sizeof(uint32_t));
	t->byte = cm_calloc(max_nodes, 1);
	t->depth = cm_calloc(max_nodes, sizeof(uint16_t));
	t->skip = cm_calloc(max_nodes, sizeof(uint32_t));
	t->tok0 = cm_calloc(max_nodes, sizeof(uint32_t));
	t->ntok = cm_calloc(max_nodes, sizeof(uint32_t));
	if (!t->toks || !path || !t->byte || !t->depth || !t->skip || !t->tok0 || !t->ntok) {
		cm_free(path);
		return CM_ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < t->n_vocab; i++)
		if (t->plen[i])
			t->toks[k++] = (int32_t)i;
	sort_trie = t;
	qsort(t->toks, n_ok, sizeof(int32_t), cmp_piece);
	uint32_t nn = 1, cur = 0;
	path[0] = 0;
	const uint8_t *prev = NULL;
	uint32_t prev_len = 0;
	for (size_t j = 0; j < n_ok; j++) {
		int32_t id = t->toks[j];
		const uint8_t *p = t->blob + t->poff[id];
		uint32_t len = t->plen[id], l = 0;
		while (prev && l < len && l < prev_len && p[l] == prev[l])
			l++;
		for (uint32_t d = cur; d > l; d--)
			t->skip[path[d]] = nn;
		for (uint32_t d = l + 1; d <= len; d++) {
			t->byte[nn] = p[d - 1];
			t->depth[nn] = (uint16_t)d;
			path[d] = nn++;
		}
		cur = len;
		uint32_t node = path[len];
		if (t->ntok[node] == 0)
			t->tok0[node] = (uint32_t)j;
		t->ntok[node]++;
		prev = p;
		prev_len = len;
	}
	for (uint32_t d = cur; d > 0; d--)
		t->skip[path[d]] = nn;
	t->skip[0] = nn;
	t->n_nodes = nn;
	cm_free(path);
	/* per node: the first token of its subtree, and the bytes below it */
	t->ft = cm_calloc((size_t)nn + 1, sizeof(uint32_t));
	t->sub = cm_calloc((size_t)nn + 1, sizeof(*t->sub));
	uint32_t *parent = cm_calloc((size_t)nn + 1, sizeof(uint32_t)), *stack = cm_calloc(t->max_depth + 2, sizeof(uint32_t));
	if (!t->ft || !t->sub || !parent || !stack) {
		cm_free(parent);
		cm_free(stack);
		return CM_ENOMEM;
	}
	for (uint32_t i = 1; i < nn; i++) {
		stack[t->depth[i]] = i;
		parent[i] = stack[t->depth[i] - 1];
	}
	t->ft[nn] = (uint32_t)n_ok;
	for (uint32_t i = nn; i-- > 0;)
		t->ft[i] = t->ntok[i] ? t->tok0[i] : t->ft[i + 1];
	for (uint32_t i = nn; i-- > 1;) {
		uint32_t p = parent[i];
		for (int w = 0; w < 4; w++)
			t->sub[p][w] |= t->sub[i][w];
		t->sub[p][t->byte[i] >> 6] |= 1ull << (t->byte[i] & 63);
	}
	cm_free(parent);
	cm_free(stack);
	return CM_OK;
}

static enum cm_status trie_new(size_t n, struct wk_vtrie **out)
{
	struct wk_vtrie *t = cm_calloc(1, sizeof(*t));
	if (!t)
		return CM_ENOMEM;
	t->n_vocab = n;
	t->poff = cm_calloc(n + 1, sizeof(uint32_t));
	t->plen = cm_calloc(n + 1, sizeof(uint32_t));
	t->eog = cm_calloc(n + 1, 1);
	t->eog_ids = cm_calloc(n + 1, sizeof(int32_t));
	if (!t->poff || !t->plen || !t->eog || !t->eog_ids) {
		wk_vtrie_free(t);
		return CM_ENOMEM;
	}
	*out = t;
	return CM_OK;
}

enum cm_status wk_vtrie_new_pieces(size_t n, const char *const *pieces, const size_t *lens,
				   const uint8_t *eog, struct wk_vtrie **out)
{
	struct wk_vtrie *t = NULL;
	*out = NULL;
	if (n > INT32_MAX)
		return CM_ELIMIT;
	enum cm_status st = trie_new(n, &t);
	if (st != CM_OK)
		return st;
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		if (!(eog && eog[i]))
			total += lens[i];
	if (total > UINT32_MAX) {
		wk_vtrie_free(t);
		return CM_ELIMIT;
	}
	t->blob = cm_malloc(total + 1);
	if (!t->blob) {
		wk_vtrie_free(t);
		return CM_ENOMEM;
	}
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (eog && eog[i]) {
			t->eog[i] = 1;
			t->eog_ids[t->n_eog++] = (int32_t)i;
			continue;
		}
		memcpy(t->blob + off, pieces[i], lens[i]);
		t->poff[i] = (uint32_t)off;
		t->plen[i] = (uint32_t)lens[i];
		off += lens[i];
	}
	st = trie_index(t);
	if (st != CM_OK) {
		wk_vtrie_free(t);
		return st;
	}
	*out = t;
	return CM_OK;
}

enum cm_status wk_vtrie_new(const struct wk_tok *tok, struct wk_vtrie **out, char *err,
			    size_t err_len)
{
	size_t n = wk_tok_n_vocab(tok);
	const char **pieces = cm_calloc(n + 1, sizeof(char *));
	size_t *lens = cm_calloc(n + 1, sizeof(size_t));
	uint8_t *eog = cm_calloc(n + 1, 1);
	enum cm_status st = CM_ENOMEM;
	*out = NULL;
	if (!pieces || !lens || !eog)
		goto out;
	for (size_t i = 0; i < n; i++) {
		int32_t id = (int32_t)i;
		if (wk_tok_is_eog(tok, id)) {
			eog[i] = 1;
			continue;
		}
		enum wk_tok_type ty = wk_tok_type(tok, id);
		if (ty == WK_TOK_T_CONTROL || ty == WK_TOK_T_UNKNOWN || ty == WK_TOK_T_UNUSED)
			continue; /* lens[i] = 0: never allowed */
		size_t len = 0;
		const char *p = wk_tok_piece(tok, id, &len);
		pieces[i] = p ? p : "";
		lens[i] = p ? len : 0;
	}
	for (size_t i = 0; i < n; i++)
		if (!pieces[i])
			pieces[i] = "";
	st = wk_vtrie_new_pieces(n, pieces, lens, eog, out);
out:
	if (st != CM_OK)
		cm_fail(err, err_len, st, "building the token trie: %s", cm_status_str(st));
	cm_free(pieces);
	cm_free(lens);
	cm_free(eog);
	return st;
}

void wk_vtrie_free(struct wk_vtrie *t)
{
	if (!t)
		return;
	cm_free(t->byte);
	cm_free(t->depth);
	cm_free(t->skip);
	cm_free(t->tok0);
	cm_free(t->ntok);
	cm_free(t->ft);
	cm_free(t->sub);
	cm_free(t->toks);
	cm_free(t->blob);
	cm_free(t->poff);
	cm_free(t->plen);
	cm_free(t->eog);
	cm_free(t->eog_ids);
	cm_free(t);
}

size_t wk_vtrie_n_vocab(const struct wk_vtrie *t)
{
	return t->n_vocab;
}

size_t wk_vtrie_n_nodes(const struct wk_vtrie *t)
{
	return t->n_nodes;
}

const uint8_t *wk_vtrie_piece(const struct wk_vtrie *t, int32_t id, size_t *len)
{
	if (id < 0 || (size_t)id >= t->n_vocab || !t->plen[id]) {
		*len = 0;
		return NULL;
	}
	*len = t->plen[id];
	return t->blob + t->poff[id];
}

int wk_vtrie_is_eog(const struct wk_vtrie *t, int32_t id)
{
	return id >= 0 && (size_t)id < t->n_vocab && t->eog[id];
}

/* ---- the cache of local states -------------------------------------------- */

struct wk_mask {
	struct wk_gm *m;
	const struct wk_vtrie *t;
	size_t words, cap_bytes, used;
	struct mk_entry *ents;
	uint32_t n_ents, cap_ents;
	uint32_t *ehash, ehash_cap; /* entry + 1 by local state id */
	int32_t *st;                /* [max_depth + 1] walk states by depth */
	uint8_t *pop;               /* [max_depth + 1] */
	/* scratch */
	uint32_t *acc_bits; /* [words]: the walk's accepted tokens */
	uint32_t n_acc;
	int32_t *u_tok;
	uint16_t *u_k;
	uint32_t n_u, cap_u;
	uint32_t *tops, *base, cap_tops;
	/* per state: the bytes that lead back to it (self loops), lazily */
	uint64_t (*self)[4];
	uint8_t *self_done;
	uint32_t cap_self;
	struct wk_mask_stats stats;
	struct wk_mask_pool *pool; /* shared across grammars, or NULL */
	struct wk_mask_fpbuf fp;
};

void wk_mask_get_stats(const struct wk_mask *k, struct wk_mask_stats *out)
{
	*out = k->stats;
}

struct wk_mask *wk_mask_new(struct wk_gm *m, const struct wk_vtrie *t, size_t cache_bytes,
			     struct wk_mask_pool *pool)
{
	struct wk_mask *k = cm_calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->m = m;
	k->pool = pool;
	k->t = t;
	k->words = (t->n_vocab + 31) / 32;
	k->cap_bytes = cache_bytes;
	k->st = cm_calloc(t->max_depth + 2, sizeof(int32_t));
	k->pop = cm_calloc(t->max_depth + 2, 1);
	k->acc_bits = cm_calloc(k->words + 1, sizeof(uint32_t));
	if (!k->st || !k->pop || !k->acc_bits) {
		wk_mask_free(k);
		return NULL;
	}
	return k;
}

void wk_mask_entry_clear(struct mk_entry *e)
{
	cm_free(e->acc);
	cm_free(e->bits);
	cm_free(e->u_tok);
	cm_free(e->u_k);
	cm_free(e->u_lcp);
}

static void cache_drop(struct wk_mask *k)
{
	for (uint32_t i = 0; i < k->n_ents; i++)
		wk_mask_entry_clear(&k->ents[i]);
	k->n_ents = 0;
	k->used = 0;
	if (k->ehash)
		memset(k->ehash, 0, k->ehash_cap * sizeof(uint32_t));
}

void wk_mask_free(struct wk_mask *k)
{
	if (!k)
		return;
	cache_drop(k);
	cm_free(k->ents);
	cm_free(k->ehash);
	cm_free(k->st);
	cm_free(k->pop);
	cm_free(k->acc_bits);
	cm_free(k->u_tok);
	cm_free(k->u_k);
	cm_free(k->tops);
	cm_free(k->base);
	cm_free(k->self);
	cm_free(k->self_done);
	cm_free(k->fp.v);
	cm_free(k);
}

size_t wk_mask_words(const struct wk_mask *k)
{
	return k->words;
}

static int push_u(struct wk_mask *k, int32_t id, uint32_t off)
{
	if (k->n_u == k->cap_u) {
		uint32_t c = k->cap_u ? 2 * k->cap_u : 1024;
		int32_t *a = cm_reallocarray(k->u_tok, c, sizeof(int32_t));
		if (a)
			k->u_tok = a;
		uint16_t *b = cm_reallocarray(k->u_k, c, sizeof(uint16_t));
		if (b)
			k->u_k = b;
		if (!a || !b)
			return -1;
		k->cap_u = c;
	}
	k->u_tok[k->n_u] = id;
	k->u_k[k->n_u] = (uint16_t)off;
	k->n_u++;
	return 0;
}

/* The self-loop bytes of state s (NULL on no memory or a limit). */
static const uint64_t *self_loops(struct wk_mask *k, int32_t s)
{
	struct wk_gm *m = k->m;
	if ((uint32_t)s >= k->cap_self) {
		uint32_t c = k->cap_self ? k->cap_self : 1024;
		while (c <= (uint32_t)s)
			c *= 2;
		uint64_t(*n)[4] = cm_reallocarray(k->self, c, sizeof(*n));
		if (n)
			k->self = n;
		uint8_t *d = cm_realloc(k->self_done, c);
		if (d) {
			memset(d + k->cap_self, 0, c - k->cap_self);
			k->self_done = d;
		}
		if (!n || !d)
			return NULL;
		k->cap_self = c;
	}
	if (!k->self_done[s]) {
		uint64_t *w = k->self[s];
		w[0] = w[1] = w[2] = w[3] = 0;
		for (unsigned b = 0; b < 256; b++) {
			int32_t ns = wk_gm_step_fast(m, s, (uint8_t)b);
			if (ns == WK_GM_ERROR)
				return NULL;
			if (ns == s)
				w[b >> 6] |= 1ull << (b & 63);
		}
		k->self_done[s] = 1;
	}
	return k->self[s];
}

/* Subtrees this large are checked for "every byte below loops back to the
 * same state" and then accepted whole, without walking them. */
#define MASK_BULK_NODES 256u

/* The walk of the whole trie from local state L: accepted tokens and
 * remainders into the scratch lists. */
static enum cm_status local_walk(struct wk_mask *k, int32_t L)
{
	const struct wk_vtrie *t = k->t;
	struct wk_gm *m = k->m;
	k->n_acc = 0;
	k->n_u = 0;
	memset(k->acc_bits, 0, k->words * sizeof(uint32_t));
	k->st[0] = L;
	k->pop[0] = 0;
	uint32_t i = 1;
	while (i < t->n_nodes) {
		uint32_t d = t->depth[i];
		int32_t ns = wk_gm_step_fast(m, k->st[d - 1], t->byte[i]);
		if (ns == WK_GM_ERROR)
			return CM_ELIMIT;
		if (ns == WK_GM_DEAD) {
			uint32_t end = t->skip[i];
			for (uint32_t pd = 1; pd < d; pd++) {
				if (!k->pop[pd])
					continue;
				for (uint32_t j = i; j < end; j++)
					for (uint32_t q = 0; q < t->ntok[j]; q++)
						if (push_u(k, t->toks[t->tok0[j] + q], pd))
							return CM_ENOMEM;
			}
			i = end;
			continue;
		}
		k->st[d] = ns;
		k->pop[d] = (m->st_flags[ns] & WK_GM_F_POP) != 0;
		/* a big subtree whose first byte already loops back: maybe all do
		 * (one step decides before the 256 of self_loops) */
		if (t->skip[i] - i > MASK_BULK_NODES && wk_gm_step_fast(m, ns, t->byte[i + 1]) == ns) {
			const uint64_t *self = self_loops(k, ns);
			const uint64_t *sub = t->sub[i];
			if (self && !(sub[0] & ~self[0]) && !(sub[1] & ~self[1]) && !(sub[2] & ~self[2]) &&
			    !(sub[3] & ~self[3])) {
				/* every token below stays in this state: all accepted */
				for (uint32_t q = t->ft[i]; q < t->ft[t->skip[i]]; q++) {
					uint32_t id = (uint32_t)t->toks[q];
					k->acc_bits[id >> 5] |= 1u << (id & 31);
				}
				k->n_acc += t->ft[t->skip[i]] - t->ft[i];
				k->stats.bulk++;
				i = t->skip[i];
				continue;
			}
		}
		for (uint32_t q = 0; q < t->ntok[i]; q++) {
			uint32_t id = (uint32_t)t->toks[t->tok0[i] + q];
			k->acc_bits[id >> 5] |= 1u << (id & 31);
			k->n_acc++;
		}
		i++;
	}
	return CM_OK;
}

static _Thread_local const struct wk_mask *sort_mask;

static int cmp_rem(const void *a, const void *b)
{
	const struct wk_mask *k = sort_mask;
	const struct wk_vtrie *t = k->t;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int32_t ix = k->u_tok[x], iy = k->u_tok[y];
	const uint8_t *px = t->blob + t->poff[ix] + k->u_k[x];
	const uint8_t *py = t->blob + t->poff[iy] + k->u_k[y];
	uint32_t lx = t->plen[ix] - k->u_k[x], ly = t->plen[iy] - k->u_k[y];
	int c = memcmp(px, py, lx < ly ? lx : ly);
	if (c)
		return c;
	return lx < ly ? -1 : lx > ly;
}

static struct mk_entry *entry_get(struct wk_mask *k, int32_t L, enum cm_status *st)
{
	uint32_t h = (uint32_t)L * 2654435761u;
	if (k->ehash_cap) {
		for (uint32_t i = h & (k->ehash_cap - 1); k->ehash[i]; i = (i + 1) & (k->ehash_cap - 1))
			if (k->ents[k->ehash[i] - 1].local == L)
				return &k->ents[k->ehash[i] - 1];
	}
	struct mk_entry e = { .local = L };
	uint64_t fp = 0;
	int shared = k->pool && wk_mask_fp(k->m, L, k->t->max_depth, &k->fp, &fp) == 0;
	if (shared && wk_mask_pool_get(k->pool, fp, &k->fp, k->words, &e) == 0) {
		k->stats.shared++;
		e.local = L;
		*st = CM_ENOMEM;
		goto insert;
	}
	k->stats.walks++;
	*st = local_walk(k, L);
	if (*st != CM_OK)
		return NULL;
	e.n_acc = k->n_acc;
	e.n_u = k->n_u;
	*st = CM_ENOMEM;
	if ((size_t)k->n_acc * 32 < k->t->n_vocab) {
		e.acc = cm_malloc(((size_t)k->n_acc + 1) * sizeof(int32_t));
		if (!e.acc)
			goto fail;
		uint32_t q = 0;
		for (size_t w = 0; w < k->words && q < k->n_acc; w++)
			for (uint32_t v = k->acc_bits[w]; v; v &= v - 1)
				e.acc[q++] = (int32_t)(w * 32 + (size_t)__builtin_ctz(v));
		e.n_acc = q;
		e.bytes += (size_t)q * 4;
	} else {
		e.bits = cm_malloc(k->words * sizeof(uint32_t));
		if (!e.bits)
			goto fail;
		memcpy(e.bits, k->acc_bits, k->words * sizeof(uint32_t));
		e.bytes += k->words * 4;
	}
	if (k->n_u) {
		uint32_t *ord = cm_malloc((size_t)k->n_u * sizeof(uint32_t));
		e.u_tok = cm_malloc((size_t)k->n_u * sizeof(int32_t));
		e.u_k = cm_malloc((size_t)k->n_u * sizeof(uint16_t));
		e.u_lcp = cm_malloc((size_t)k->n_u * sizeof(uint16_t));
		if (!ord || !e.u_tok || !e.u_k || !e.u_lcp) {
			cm_free(ord);
			goto fail;
		}
		for (uint32_t i = 0; i < k->n_u; i++)
			ord[i] = i;
		sort_mask = k;
		qsort(ord, k->n_u, sizeof(uint32_t), cmp_rem);
		const struct wk_vtrie *t = k->t;
		const uint8_t *prev = NULL;
		uint32_t prev_len = 0;
		for (uint32_t i = 0; i < k->n_u; i++) {
			int32_t id = k->u_tok[ord[i]];
			uint16_t off = k->u_k[ord[i]];
			const uint8_t *p = t->blob + t->poff[id] + off;
			uint32_t len = t->plen[id] - off, l = 0;
			while (prev && l < len && l < prev_len && p[l] == prev[l])
				l++;
			e.u_tok[i] = id;
			e.u_k[i] = off;
			e.u_lcp[i] = (uint16_t)l;
			prev = p;
			prev_len = len;
		}
		cm_free(ord);
		e.bytes += (size_t)k->n_u * 8;
	}
	e.bytes += sizeof(e) + 8;
	if (shared)
		wk_mask_pool_put(k->pool, fp, &k->fp, k->words, &e);
insert:
	if (k->used + e.bytes > k->cap_bytes)
		cache_drop(k);
	if (k->n_ents == k->cap_ents) {
		uint32_t c = k->cap_ents ? 2 * k->cap_ents : 64;
		struct mk_entry *n = cm_reallocarray(k->ents, c, sizeof(*n));
		if (!n)
			goto fail;
		k->ents = n;
		k->cap_ents = c;
	}
	if (2 * (k->n_ents + 1) > k->ehash_cap) {
		uint32_t c = k->ehash_cap ? 2 * k->ehash_cap : 256;
		uint32_t *nh = cm_calloc(c, sizeof(uint32_t));
		if (!nh)
			goto fail;
		for (uint32_t i = 0; i < k->n_ents; i++) {
			uint32_t j = ((uint32_t)k->ents[i].local * 2654435761u) & (c - 1);
			while (nh[j])
				j = (j + 1) & (c - 1);
			nh[j] = i + 1;
		}
		cm_free(k->ehash);
		k->ehash = nh;
		k->ehash_cap = c;
	}
	uint32_t j = h & (k->ehash_cap - 1);
	while (k->ehash[j])
		j = (j + 1) & (k->ehash_cap - 1);
	k->ents[k->n_ents] = e;
	k->ehash[j] = ++k->n_ents;
	k->used += e.bytes;
	*st = CM_OK;
	return &k->ents[k->n_ents - 1];
fail:
	wk_mask_entry_clear(&e);
	return NULL;
}

/* ---- the mask ----------------------------------------------------------------- */

/* The frame a top returns into: below its innermost named, non-nullable rule. */
static uint32_t base_of(const struct wk_gm *m, uint32_t top)
{
	const struct wk_gram *g = m->g;
	for (uint32_t x = top; x != WK_GM_NONE && x != WK_GM_BOTTOM; x = m->node_parent[x]) {
		uint32_t r = g->elem_rule[m->node_pos[x]];
		if (g->rule_named[r] && !g->rule_nullable[r])
			return m->node_parent[x];
	}
	return WK_GM_NONE;
}

/* `top` with `base` replaced by BOTTOM. */
static uint32_t rebase(struct wk_gm *m, uint32_t top, uint32_t base)
{
	uint32_t chain[256], n = 0;
	for (uint32_t x = top; x != base; x = m->node_parent[x]) {
		if (n == 256 || x == WK_GM_NONE)
			return top; /* too deep to share: keep it as is */
		chain[n++] = x;
	}
	uint32_t cur = WK_GM_BOTTOM;
	while (n--) {
		cur = wk_gm_node(m, m->node_pos[chain[n]], cur);
		if (cur == UINT32_MAX)
			return UINT32_MAX;
	}
	return cur;
}

static void set_bit(uint32_t *bits, int32_t id)
{
	bits[(uint32_t)id >> 5] |= 1u << ((uint32_t)id & 31);
}

static enum cm_status remainders(struct wk_mask *k, const struct mk_entry *e, int32_t C,
				 uint32_t *bits)
{
	const struct wk_vtrie *t = k->t;
	struct wk_gm *m = k->m;
	int32_t *st = k->st;
	st[0] = C;
	uint32_t alive = 0; /* bytes of the previous remainder walked */
	int died = 0;       /* ... and it died at byte `alive` */
	for (uint32_t i = 0; i < e->n_u; i++) {
		int32_t id = e->u_tok[i];
		const uint8_t *p = t->blob + t->poff[id] + e->u_k[i];
		uint32_t len = t->plen[id] - e->u_k[i];
		uint32_t l = e->u_lcp[i];
		if (died && l > alive)
			continue; /* shares the byte that killed the previous one */
		uint32_t q = l < alive ? l : alive;
		died = 0;
		k->stats.remainders++;
		for (; q < len; q++) {
			int32_t ns = wk_gm_step_fast(m, st[q], p[q]);
			if (ns == WK_GM_ERROR)
				return CM_ELIMIT;
			if (ns == WK_GM_DEAD) {
				died = 1;
				break;
			}
			st[q + 1] = ns;
		}
		alive = q;
		if (!died)
			set_bit(bits, id);
	}
	return CM_OK;
}

static int cmp_pair64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

enum cm_status wk_mask_fill(struct wk_mask *k, int32_t state, uint32_t *bits)
{
	struct wk_gm *m = k->m;
	const struct wk_vtrie *t = k->t;
	memset(bits, 0, k->words * sizeof(uint32_t));
	if (state < 0)
		return CM_EINVAL;
	uint32_t n = m->st_n[state];
	if (n > k->cap_tops) {
		uint32_t *a = cm_reallocarray(k->tops, n, sizeof(uint32_t));
		if (a)
			k->tops = a;
		uint32_t *b = cm_reallocarray(k->base, n, 2 * sizeof(uint32_t));
		if (b)
			k->base = b;
		if (!a || !b)
			return CM_ENOMEM;
		k->cap_tops = n;
	}
	/* (base, top) pairs, sorted by base: one group per base */
	uint64_t *pairs = (uint64_t *)(void *)k->base;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t top = m->pool[m->st_off[state] + i];
		pairs[i] = ((uint64_t)base_of(m, top) << 32) | top;
	}
	if (n > 1)
		qsort(pairs, n, sizeof(uint64_t), cmp_pair64);
	for (uint32_t i = 0; i < n;) {
		uint32_t base = (uint32_t)(pairs[i] >> 32), g = 0;
		uint32_t j = i;
		for (; j < n && (uint32_t)(pairs[j] >> 32) == base; j++) {
			uint32_t top = (uint32_t)pairs[j];
			uint32_t rb = base == WK_GM_NONE ? top : rebase(m, top, base);
			if (rb == UINT32_MAX)
				return CM_ELIMIT;
			k->tops[g++] = rb;
		}
		i = j;
		int32_t L = wk_gm_state(m, k->tops, g, 0);
		k->stats.groups++;
		if (L < 0)
			return CM_ELIMIT;
		enum cm_status st = CM_OK;
		const struct mk_entry *e = entry_get(k, L, &st);
		if (!e)
			return st;
		if (e->bits) {
			for (size_t w = 0; w < k->words; w++)
				bits[w] |= e->bits[w];
		} else {
			for (uint32_t q = 0; q < e->n_acc; q++)
				set_bit(bits, e->acc[q]);
		}
		if (e->n_u && base != WK_GM_NONE) {
			int32_t C = wk_gm_enter(m, m->node_pos[base], m->node_parent[base]);
			if (C == WK_GM_ERROR)
				return CM_ELIMIT;
			if (C >= 0 && (st = remainders(k, e, C, bits)) != CM_OK)
				return st;
		}
	}
	if (m->st_flags[state] & WK_GM_F_ACCEPT)
		for (uint32_t q = 0; q < t->n_eog; q++)
			set_bit(bits, t->eog_ids[q]);
	return CM_OK;
}

enum cm_status wk_mask_warm(struct wk_mask *k, int64_t budget_ns)
{
	struct wk_gm *m = k->m;
	const struct wk_gram *g = m->g;
	int64_t end = cm_mono_ns() + budget_ns;
	enum cm_status st = CM_OK;
	for (uint32_t r = 0; r < g->n_rules && cm_mono_ns() < end; r++) {
		if (!g->rule_named[r] || g->rule_nullable[r] || !g->rule_nalt[r])
			continue;
		int32_t L0 = wk_gm_enter_rule(m, r, WK_GM_BOTTOM);
		if (L0 == WK_GM_ERROR)
			return CM_ELIMIT;
		if (L0 < 0 || !entry_get(k, L0, &st))
			return L0 < 0 ? CM_OK : st;
		for (unsigned b = 0; b < 256 && cm_mono_ns() < end; b++) {
			int32_t L1 = wk_gm_step(m, L0, (uint8_t)b);
			if (L1 == WK_GM_ERROR)
				return CM_ELIMIT;
			if (L1 >= 0 && m->st_n[L1] && !entry_get(k, L1, &st))
				return st;
		}
	}
	return CM_OK;
}

int wk_mask_allows(struct wk_mask *k, int32_t state, int32_t id)
{
	const struct wk_vtrie *t = k->t;
	if (state < 0 || id < 0 || (size_t)id >= t->n_vocab)
		return 0;
	if (t->eog[id])
		return wk_gm_accepting(k->m, state);
	if (!t->plen[id])
		return 0;
	return wk_gm_steps(k->m, state, t->blob + t->poff[id], t->plen[id]) >= 0;
}

int32_t wk_mask_advance(struct wk_mask *k, int32_t state, int32_t id)
{
	const struct wk_vtrie *t = k->t;
	if (state < 0 || id < 0 || (size_t)id >= t->n_vocab)
		return WK_GM_DEAD;
	if (t->eog[id])
		return wk_gm_accepting(k->m, state) ? state : WK_GM_DEAD;
	if (!t->plen[id])
		return WK_GM_DEAD;
	return wk_gm_steps(k->m, state, t->blob + t->poff[id], t->plen[id]);
}

int32_t wk_mask_advance_bytes(struct wk_mask *k, int32_t state, const void *bytes, size_t len)
{
	if (state < 0)
		return WK_GM_DEAD;
	return wk_gm_steps(k->m, state, bytes, len);
}
