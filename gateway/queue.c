/*
 * queue.c - bounded per-tenant FIFOs with weighted deficit round robin and
 * strict interactive-over-batch priority (see queue.h).
 */
#include "gateway/queue.h"

#include <math.h>
#include <string.h>

#include "common/alloc.h"

#define GW_Q_CLASSES 2
#define GW_Q_EWMA_ALPHA 0.2

struct gw_q_fifo {
	struct gw_queue_item *head, *tail;
	size_t n;
};

struct gw_queue_tenant {
	char name[GW_QUEUE_TENANT_NAME_MAX];
	uint32_t weight;
	uint32_t max;            /* UINT32_MAX: config default */
	struct gw_q_fifo fifo[GW_Q_CLASSES];
	double deficit[GW_Q_CLASSES];
	/* ring of tenants with items, per class */
	struct gw_queue_tenant *rprev[GW_Q_CLASSES], *rnext[GW_Q_CLASSES];
	int in_ring[GW_Q_CLASSES];
};

struct gw_queue {
	struct gw_queue_config cfg;
	struct gw_queue_tenant **tenants;
	size_t n_tenants, cap_tenants;
	struct gw_queue_tenant *cursor[GW_Q_CLASSES];
	size_t depth;
	size_t class_depth[GW_Q_CLASSES];
	int64_t timeout_ns[GW_Q_CLASSES];
	int64_t last_pop_ns;
	double interval_ewma_ns; /* 0: not measured */
	/* before the last pop: an unpop (no worker could take it) was no
	 * dispatch, and puts the drain estimate back */
	int64_t prev_last_pop_ns;
	double prev_interval_ewma_ns;
};

enum cm_status gw_queue_new(const struct gw_queue_config *cfg, struct gw_queue **out)
{
	struct gw_queue *q = cm_calloc(1, sizeof(*q));

	*out = NULL;
	if (!q)
		return CM_ENOMEM;
	q->cfg = *cfg;
	q->timeout_ns[0] = q->timeout_ns[1] = cfg->timeout_ns;
	*out = q;
	return CM_OK;
}

void gw_queue_free(struct gw_queue *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n_tenants; i++)
		cm_free(q->tenants[i]);
	cm_free(q->tenants);
	cm_free(q);
}

static struct gw_queue_tenant *tenant_find(const struct gw_queue *q, const char *name)
{
	for (size_t i = 0; i < q->n_tenants; i++)
		if (strcmp(q->tenants[i]->name, name) == 0)
			return q->tenants[i];
	return NULL;
}

static struct gw_queue_tenant *tenant_get(struct gw_queue *q, const char *name)
{
	struct gw_queue_tenant *t = tenant_find(q, name);

	if (t)
		return t;
	if (q->n_tenants == q->cap_tenants) {
		size_t nc = q->cap_tenants ? q->cap_tenants * 2 : 16;
		struct gw_queue_tenant **nt = cm_reallocarray(q->tenants, nc, sizeof(*nt));

		if (!nt)
			return NULL;
		q->tenants = nt;
		q->cap_tenants = nc;
	}
	t = cm_calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	strncpy(t->name, name, sizeof(t->name) - 1);
	t->weight = 1;
	t->max = UINT32_MAX;
	q->tenants[q->n_tenants++] = t;
	return t;
}

static size_t tenant_items(const struct gw_queue_tenant *t)
{
	return t->fifo[0].n + t->fifo[1].n;
}

static void ring_insert(struct gw_queue *q, struct gw_queue_tenant *t, int k)
{
	struct gw_queue_tenant *cur = q->cursor[k];

	t->in_ring[k] = 1;
	t->deficit[k] = 0;
	if (!cur) {
		t->rprev[k] = t->rnext[k] = t;
		q->cursor[k] = t;
		t->deficit[k] = t->weight; /* the round starts here */
		return;
	}
	/* just before the cursor: the end of the current round */
	t->rnext[k] = cur;
	t->rprev[k] = cur->rprev[k];
	cur->rprev[k]->rnext[k] = t;
	cur->rprev[k] = t;
}

static void ring_remove(struct gw_queue *q, struct gw_queue_tenant *t, int k)
{
	if (!t->in_ring[k])
		return;
	t->in_ring[k] = 0;
	t->deficit[k] = 0;
	if (t->rnext[k] == t) {
		q->cursor[k] = NULL;
	} else {
		t->rprev[k]->rnext[k] = t->rnext[k];
		t->rnext[k]->rprev[k] = t->rprev[k];
		if (q->cursor[k] == t) {
			q->cursor[k] = t->rnext[k];
			q->cursor[k]->deficit[k] += q->cursor[k]->weight;
		}
	}
	t->rnext[k] = t->rprev[k] = NULL;
}

static void fifo_unlink(struct gw_q_fifo *f, struct gw_queue_item *it)
{
	if (it->prev)
		it->prev->next = it->next;
	else
		f->head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		f->tail = it->prev;
	it->prev = it->next = NULL;
	f->n--;
}

uint32_t gw_queue_default_tenant_max(const struct gw_queue *q)
{
	return q->cfg.tenant_max;
}

enum cm_status gw_queue_push(struct gw_queue *q, const char *tenant,
			     uint32_t weight, uint32_t tenant_max,
			     enum gw_queue_class klass, struct gw_queue_item *it,
			     int64_t now_ns, enum gw_queue_verdict *verdict)
{
	struct gw_queue_tenant *t = tenant_get(q, tenant);
	struct gw_q_fifo *f;
	uint32_t max;
	int k = klass == GW_QUEUE_BATCH ? 1 : 0;

	if (!t)
		return CM_ENOMEM;
	t->weight = weight < 1 ? 1 : weight > 1000 ? 1000 : weight;
	t->max = tenant_max;
	max = t->max == UINT32_MAX ? q->cfg.tenant_max : t->max;
	if (tenant_items(t) >= max) {
		*verdict = GW_QUEUE_TENANT_FULL;
		return CM_OK;
	}
	if (q->depth >= q->cfg.global_max) {
		*verdict = GW_QUEUE_GLOBAL_FULL;
		return CM_OK;
	}
	f = &t->fifo[k];
	it->tenant = t;
	it->klass = klass;
	it->enqueued_ns = now_ns;
	it->deadline_ns = now_ns + q->timeout_ns[k];
	it->queued = 1;
	it->next = NULL;
	it->prev = f->tail;
	if (f->tail)
		f->tail->next = it;
	else
		f->head = it;
	f->tail = it;
	f->n++;
	q->depth++;
	q->class_depth[k]++;
	if (!t->in_ring[k])
		ring_insert(q, t, k);
	*verdict = GW_QUEUE_OK;
	return CM_OK;
}

void gw_queue_unpop(struct gw_queue *q, struct gw_queue_item *it)
{
	struct gw_queue_tenant *t = it->tenant;
	int k = it->klass == GW_QUEUE_BATCH ? 1 : 0;
	struct gw_q_fifo *f = &t->fifo[k];

	it->queued = 1;
	it->prev = NULL;
	it->next = f->head;
	if (f->head)
		f->head->prev = it;
	else
		f->tail = it;
	f->head = it;
	f->n++;
	q->depth++;
	q->class_depth[k]++;
	q->last_pop_ns = q->prev_last_pop_ns;
	q->interval_ewma_ns = q->prev_interval_ewma_ns;
	if (!t->in_ring[k]) {
		ring_insert(q, t, k);
		q->cursor[k] = t;
	}
	t->deficit[k] += 1; /* give back the credit the pop took */
}

static void note_pop(struct gw_queue *q, int64_t now_ns)
{
	q->prev_last_pop_ns = q->last_pop_ns;
	q->prev_interval_ewma_ns = q->interval_ewma_ns;
	if (q->last_pop_ns) {
		double dt = (double)(now_ns - q->last_pop_ns);

		if (dt < 0)
			dt = 0;
		q->interval_ewma_ns = q->interval_ewma_ns == 0 ? dt
			: (1 - GW_Q_EWMA_ALPHA) * q->interval_ewma_ns + GW_Q_EWMA_ALPHA * dt;
		if (q->interval_ewma_ns == 0)
			q->interval_ewma_ns = 1; /* measured, just very fast */
	}
	q->last_pop_ns = now_ns;
}

struct gw_queue_item *gw_queue_pop(struct gw_queue *q, int64_t now_ns)
{
	for (int k = 0; k < GW_Q_CLASSES; k++) {
		struct gw_queue_tenant *t = q->cursor[k];
		struct gw_queue_item *it;

		if (!t)
			continue;
		/* each step either serves or moves on with a refill, and a
		 * refill gives >= 1 credit, so this ends within one round */
		while (t->deficit[k] < 1) {
			t = t->rnext[k];
			t->deficit[k] += t->weight;
			q->cursor[k] = t;
		}
		it = t->fifo[k].head;
		fifo_unlink(&t->fifo[k], it);
		it->queued = 0;
		q->depth--;
		q->class_depth[k]--;
		t->deficit[k] -= 1;
		if (t->fifo[k].n == 0)
			ring_remove(q, t, k);
		note_pop(q, now_ns);
		return it;
	}
	return NULL;
}

void gw_queue_remove(struct gw_queue *q, struct gw_queue_item *it)
{
	int k;

	if (!it->queued)
		return;
	k = it->klass == GW_QUEUE_BATCH ? 1 : 0;
	fifo_unlink(&it->tenant->fifo[k], it);
	it->queued = 0;
	q->depth--;
	q->class_depth[k]--;
	if (it->tenant->fifo[k].n == 0)
		ring_remove(q, it->tenant, k);
}

static struct gw_queue_item *earliest(const struct gw_queue *q)
{
	struct gw_queue_item *best = NULL;

	for (size_t i = 0; i < q->n_tenants; i++)
		for (int k = 0; k < GW_Q_CLASSES; k++) {
			struct gw_queue_item *h = q->tenants[i]->fifo[k].head;

			/* FIFO: within a fifo deadlines grow (one timeout per
			 * class, changed only by gw_queue_set_timeout) */
			if (h && (!best || h->deadline_ns < best->deadline_ns))
				best = h;
		}
	return best;
}

struct gw_queue_item *gw_queue_pop_expired(struct gw_queue *q, int64_t now_ns)
{
	struct gw_queue_item *it = earliest(q);

	if (!it || now_ns < it->deadline_ns)
		return NULL;
	gw_queue_remove(q, it);
	return it;
}

int64_t gw_queue_next_expiry_ns(const struct gw_queue *q, int64_t now_ns)
{
	struct gw_queue_item *it = earliest(q);
	int64_t left;

	if (!it)
		return INT64_MAX;
	left = it->deadline_ns - now_ns;
	return left < 0 ? 0 : left;
}

size_t gw_queue_depth(const struct gw_queue *q)
{
	return q->depth;
}

size_t gw_queue_tenant_depth(const struct gw_queue *q, const char *tenant)
{
	const struct gw_queue_tenant *t = tenant_find(q, tenant);

	return t ? tenant_items(t) : 0;
}

size_t gw_queue_class_depth(const struct gw_queue *q, enum gw_queue_class klass)
{
	return q->class_depth[klass == GW_QUEUE_BATCH ? 1 : 0];
}

void gw_queue_set_timeout(struct gw_queue *q, enum gw_queue_class klass, int64_t ns)
{
	q->timeout_ns[klass == GW_QUEUE_BATCH ? 1 : 0] = ns;
}

int64_t gw_queue_timeout(const struct gw_queue *q, enum gw_queue_class klass)
{
	return q->timeout_ns[klass == GW_QUEUE_BATCH ? 1 : 0];
}

int64_t gw_queue_wait_estimate_ns(const struct gw_queue *q, size_t position)
{
	if (q->interval_ewma_ns <= 0)
		return -1;
	return (int64_t)((double)(position ? position : 1) * q->interval_ewma_ns);
}

double gw_queue_drain_rate(const struct gw_queue *q)
{
	return q->interval_ewma_ns > 0 ? 1e9 / q->interval_ewma_ns : 0;
}

uint32_t gw_queue_retry_after_s(const struct gw_queue *q, size_t position)
{
	double rate = gw_queue_drain_rate(q);
	double s;

	if (position == 0)
		position = 1;
	s = rate > 0 ? ceil((double)position / rate) : (double)position;
	if (s < 1)
		s = 1;
	if (s > GW_QUEUE_RETRY_MAX_S)
		s = GW_QUEUE_RETRY_MAX_S;
	return (uint32_t)s;
}

void gw_queue_foreach_tenant(const struct gw_queue *q,
			     void (*fn)(void *ctx, const char *tenant, size_t depth),
			     void *ctx)
{
	for (size_t i = 0; i < q->n_tenants; i++)
		fn(ctx, q->tenants[i]->name, tenant_items(q->tenants[i]));
}
