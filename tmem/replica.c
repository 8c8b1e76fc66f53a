/*
 * replica.c - the replica table: records of pages kept on several peers.
 *
 * Records live in chunks of RCHUNK, allocated as the table grows and never
 * moved, so a walk can copy a record under the lock and call out without it.
 * Free records are on a list threaded through their handle's index. An id is
 * bit 29 (the mark that this descriptor names a record), the record's
 * generation in bits 2..28 and its index + 1 in bits 32..63; the generation
 * grows on every add and move, so an id held across a change is stale.
 *
 * A record is 64 bytes. The one-sided read keys of its holders (raddr, rkey,
 * lgen: 128 bytes for 8 holders) are in a side table of the same shape,
 * named by the record's keys field (index + 1; 0: none), so that a record
 * whose holders named no key (every page over TCP; a page whose copies were
 * moved) costs 64 bytes, not 192.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/replica.h"

#define RCHUNK_SHIFT 12
#define RCHUNK	     (1u << RCHUNK_SHIFT)
#define RINDEX_MAX   (1u << 30) /* records (or keys) at most: far beyond any tier */
#define ID_MARK	     (1ull << 29)
#define GEN_MASK     ((1u << 27) - 1)
#define NO_NEXT	     UINT32_MAX

/* 64 bytes: the handle's fields without its padding, the holders, the keys' index. */
struct rec {
	struct tmem_oid oid;
	uint32_t pool;
	uint32_t index; /* when free: links the free list */
	uint32_t gen;	/* bits 0..26 used; grows on add and move */
	uint32_t checksum;
	uint16_t len;
	uint8_t n;
	uint8_t live : 1, pers : 1, state : 2, ec_k : 3; /* ec_k < REPLICA_MAX */
	uint8_t node[REPLICA_MAX];
	uint8_t epoch[REPLICA_MAX];
	uint32_t keys; /* its holders' read keys: index + 1 in the key table; 0: none */
};

/* One-sided read keys (replica.h); when free, lgen[0] links the free list. */
struct keys {
	uint64_t raddr[REPLICA_MAX];
	uint32_t rkey[REPLICA_MAX];
	uint32_t lgen[REPLICA_MAX];
};

/* Chunks of records or of keys, allocated as the table grows and never moved. */
struct chunks {
	size_t size;	    /* an entry's bytes */
	size_t link;	    /* where a free entry keeps the next free one's index (u32) */
	void **chunk;	    /* chunk[i] holds entries i*RCHUNK .. */
	uint32_t nchunks;   /* allocated */
	uint32_t cap;	    /* chunk pointer slots */
	uint32_t free_head; /* NO_NEXT: none */
	uint64_t live;
};

struct replica_table {
	pthread_mutex_t lock;
	struct chunks recs, keys;
	uint64_t degraded, lost;
};

_Static_assert(sizeof(struct rec) == 64, "a record is 64 bytes");

/* Entry idx of c (allocated). */
static void *chunks_at(const struct chunks *c, uint32_t idx)
{
	return (uint8_t *)c->chunk[idx >> RCHUNK_SHIFT] + (size_t)(idx & (RCHUNK - 1)) * c->size;
}

#define REC(t, idx)  ((struct rec *)chunks_at(&(t)->recs, idx))
#define KEYS(t, idx) ((struct keys *)chunks_at(&(t)->keys, idx))

static uint64_t id_make(uint32_t idx, uint32_t gen)
{
	return ((uint64_t)(idx + 1) << 32) | ID_MARK | ((uint64_t)(gen & GEN_MASK) << 2);
}

bool replica_is_id(uint64_t id)
{
	return (id & ID_MARK) && (id >> 32) != 0 && (id & 3) == 0 && !(id & (3ull << 30));
}

/* The live record id names, or NULL; lock held. */
static struct rec *rec_of(struct replica_table *t, uint64_t id)
{
	uint32_t idx;
	struct rec *r;

	if (!replica_is_id(id))
		return NULL;
	idx = (uint32_t)(id >> 32) - 1;
	if ((idx >> RCHUNK_SHIFT) >= t->recs.nchunks)
		return NULL;
	r = REC(t, idx);
	if (!r->live || (r->gen & GEN_MASK) != (uint32_t)((id >> 2) & GEN_MASK))
		return NULL;
	return r;
}

static bool set_valid(const struct replica_set *s)
{
	unsigned i, j;

	if (!s || s->n < 1 || s->n > REPLICA_MAX || s->len < 1 || s->len > 4096)
		return false;
	if (s->ec_k && (s->ec_k < 2 || s->ec_k >= s->n))
		return false;
	for (i = 0; i < s->n; i++) {
		if (s->node[i] < 1 || s->node[i] > 64)
			return false;
		for (j = 0; j < i; j++)
			if (s->node[j] == s->node[i])
				return false;
	}
	return true;
}

/* Add a chunk of RCHUNK entries to c's free list; lock held. @return 0, -ENOMEM. */
static int chunks_grow(struct chunks *c)
{
	uint8_t *m;
	uint32_t i, base = c->nchunks << RCHUNK_SHIFT;

	if (base >= RINDEX_MAX)
		return -ENOMEM;
	if (c->nchunks == c->cap) {
		uint32_t cap = c->cap ? c->cap * 2 : 16;
		void **n = realloc(c->chunk, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->chunk = n;
		c->cap = cap;
	}
	m = calloc(RCHUNK, c->size);
	if (!m)
		return -ENOMEM;
	for (i = 0; i < RCHUNK; i++) {
		uint32_t next = i + 1 < RCHUNK ? base + i + 1 : c->free_head;

		memcpy(m + i * c->size + c->link, &next, sizeof(next));
	}
	c->chunk[c->nchunks++] = m;
	c->free_head = base;
	return 0;
}

/* Take a free entry of c (growing it); lock held. @return its index, or NO_NEXT. */
static uint32_t chunks_take(struct chunks *c)
{
	uint32_t idx;

	if (c->free_head == NO_NEXT && chunks_grow(c))
		return NO_NEXT;
	idx = c->free_head;
	memcpy(&c->free_head, (uint8_t *)chunks_at(c, idx) + c->link, sizeof(idx));
	c->live++;
	return idx;
}

/* Give entry idx back to c's free list; lock held. */
static void chunks_give(struct chunks *c, uint32_t idx)
{
	memcpy((uint8_t *)chunks_at(c, idx) + c->link, &c->free_head, sizeof(c->free_head));
	c->free_head = idx;
	c->live--;
}

static void chunks_free(struct chunks *c)
{
	uint32_t i;

	for (i = 0; i < c->nchunks; i++)
		free(c->chunk[i]);
	free(c->chunk);
}

/* Drop r's keys, if any; lock held. */
static void rec_keys_drop(struct replica_table *t, struct rec *r)
{
	if (r->keys) {
		chunks_give(&t->keys, r->keys - 1);
		r->keys = 0;
	}
}

struct replica_table *replica_create(void)
{
	struct replica_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->recs = (struct chunks){
	    .size = sizeof(struct rec), .link = offsetof(struct rec, index), .free_head = NO_NEXT};
	t->keys = (struct chunks){
	    .size = sizeof(struct keys), .link = offsetof(struct keys, lgen), .free_head = NO_NEXT};
	return t;
}

void replica_destroy(struct replica_table *t)
{
	if (!t)
		return;
	chunks_free(&t->recs);
	chunks_free(&t->keys);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int replica_add(struct replica_table *t, const struct tmem_handle *h, bool pers,
		const struct replica_set *s, uint64_t *id)
{
	struct rec *r;
	uint32_t idx, kidx = NO_NEXT;
	unsigned i;
	bool keyed = false;

	if (!t || !h || !id || !set_valid(s))
		return -EINVAL;
	for (i = 0; i < s->n; i++)
		keyed |= s->raddr[i] != 0;
	pthread_mutex_lock(&t->lock);
	if (keyed) {
		kidx = chunks_take(&t->keys);
		if (kidx == NO_NEXT) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
	}
	idx = chunks_take(&t->recs);
	if (idx == NO_NEXT) {
		if (keyed)
			chunks_give(&t->keys, kidx);
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	r = REC(t, idx);
	r->oid = h->oid;
	r->pool = h->pool;
	r->index = h->index;
	r->gen = (r->gen + 1) & GEN_MASK;
	r->checksum = s->checksum;
	r->len = (uint16_t)s->len;
	r->n = (uint8_t)s->n;
	r->ec_k = s->ec_k & 7;
	r->live = 1;
	r->pers = pers;
	r->state = 0;
	memcpy(r->node, s->node, sizeof(r->node));
	memcpy(r->epoch, s->epoch, sizeof(r->epoch));
	r->keys = 0;
	if (keyed) {
		struct keys *k = KEYS(t, kidx);

		memcpy(k->raddr, s->raddr, sizeof(k->raddr));
		memcpy(k->rkey, s->rkey, sizeof(k->rkey));
		memcpy(k->lgen, s->lgen, sizeof(k->lgen));
		r->keys = kidx + 1;
	}
	*id = id_make(idx, r->gen);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void rec_handle(const struct rec *r, struct tmem_handle *h)
{
	memset(h, 0, sizeof(*h));
	h->pool = r->pool;
	h->oid = r->oid;
	h->index = r->index;
}

static void rec_copy(const struct replica_table *t, const struct rec *r, struct replica_set *s)
{
	memset(s, 0, sizeof(*s));
	s->n = r->n;
	s->ec_k = r->ec_k;
	s->len = r->len;
	s->checksum = r->checksum;
	s->state = r->state;
	memcpy(s->node, r->node, sizeof(s->node));
	memcpy(s->epoch, r->epoch, sizeof(s->epoch));
	if (r->keys) {
		const struct keys *k = KEYS(t, r->keys - 1);

		memcpy(s->raddr, k->raddr, sizeof(s->raddr));
		memcpy(s->rkey, k->rkey, sizeof(s->rkey));
		memcpy(s->lgen, k->lgen, sizeof(s->lgen));
	}
}

int replica_read(struct replica_table *t, uint64_t id, struct replica_set *s, struct tmem_handle *h)
{
	struct rec *r;

	pthread_mutex_lock(&t->lock);
	r = rec_of(t, id);
	if (r) {
		if (s)
			rec_copy(t, r, s);
		if (h)
			rec_handle(r, h);
	}
	pthread_mutex_unlock(&t->lock);
	return r ? 0 : -ENOENT;
}

int replica_remove(struct replica_table *t, uint64_t id)
{
	struct rec *r;

	pthread_mutex_lock(&t->lock);
	r = rec_of(t, id);
	if (r) {
		t->degraded -= !!(r->state & REPLICA_DEGRADED);
		t->lost -= !!(r->state & REPLICA_LOST);
		r->live = 0;
		rec_keys_drop(t, r);
		chunks_give(&t->recs, (uint32_t)(id >> 32) - 1);
	}
	pthread_mutex_unlock(&t->lock);
	return r ? 0 : -ENOENT;
}

int replica_move(struct replica_table *t, uint64_t id, unsigned from, unsigned to, unsigned epoch,
		 uint64_t *newid)
{
	struct rec *r;
	unsigned i, slot = REPLICA_MAX;
	int ret = 0;

	if (to < 1 || to > 64 || !newid)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	r = rec_of(t, id);
	if (!r) {
		ret = -ENOENT;
		goto out;
	}
	for (i = 0; i < r->n; i++) {
		if (r->node[i] == to && to != from) {
			ret = -EEXIST;
			goto out;
		}
		if (r->node[i] == from)
			slot = i;
	}
	if (slot == REPLICA_MAX) {
		ret = -ENOENT;
		goto out;
	}
	r->node[slot] = (uint8_t)to;
	r->epoch[slot] = (uint8_t)epoch;
	if (r->keys) {
		struct keys *k = KEYS(t, r->keys - 1);
		bool any = false;

		k->raddr[slot] = 0; /* the new copy is had by message */
		for (i = 0; i < r->n; i++)
			any |= k->raddr[i] != 0;
		if (!any)
			rec_keys_drop(t, r);
	}
	r->gen = (r->gen + 1) & GEN_MASK;
	*newid = id_make((uint32_t)(id >> 32) - 1, r->gen);
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static void rec_state(struct replica_table *t, struct rec *r, unsigned state)
{
	t->degraded += !!(state & REPLICA_DEGRADED) - !!(r->state & REPLICA_DEGRADED);
	t->lost += !!(state & REPLICA_LOST) - !!(r->state & REPLICA_LOST);
	r->state = state & 3;
}

uint64_t replica_mark_holder(struct replica_table *t, unsigned node)
{
	uint64_t n = 0;
	uint32_t c, i, k;

	pthread_mutex_lock(&t->lock);
	for (c = 0; c < t->recs.nchunks; c++) {
		for (i = 0; i < RCHUNK; i++) {
			struct rec *r = REC(t, (c << RCHUNK_SHIFT) + i);

			/* one copy (kept in a record for its read key) is not replicated:
			 * nothing to mend, and its loss is counted where it is read */
			if (!r->live || r->state || r->n < 2)
				continue;
			for (k = 0; k < r->n; k++)
				if (r->node[k] == node)
					break;
			if (k < r->n) {
				rec_state(t, r, REPLICA_DEGRADED);
				n++;
			}
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

int replica_set_state(struct replica_table *t, uint64_t id, unsigned state)
{
	struct rec *r;

	pthread_mutex_lock(&t->lock);
	r = rec_of(t, id);
	if (r)
		rec_state(t, r, state);
	pthread_mutex_unlock(&t->lock);
	return r ? 0 : -ENOENT;
}

size_t replica_walk(struct replica_table *t, uint32_t *cursor, size_t max,
		    void (*fn)(void *arg, uint64_t id, const struct tmem_handle *h, bool pers,
			       const struct replica_set *s),
		    void *arg)
{
	size_t seen = 0;

	while (seen < max) {
		uint32_t idx = *cursor;
		struct replica_set s;
		struct tmem_handle h;
		uint64_t id;
		bool pers, live;
		struct rec *r;

		pthread_mutex_lock(&t->lock);
		if ((idx >> RCHUNK_SHIFT) >= t->recs.nchunks) {
			pthread_mutex_unlock(&t->lock);
			*cursor = 0;
			return seen;
		}
		r = REC(t, idx);
		live = r->live;
		if (live) {
			rec_copy(t, r, &s);
			rec_handle(r, &h);
			pers = r->pers;
			id = id_make(idx, r->gen);
		}
		pthread_mutex_unlock(&t->lock);
		*cursor = idx + 1;
		seen++;
		if (live)
			fn(arg, id, &h, pers, &s);
	}
	return seen;
}

void replica_usage(struct replica_table *t, struct replica_usage *u)
{
	pthread_mutex_lock(&t->lock);
	u->records = t->recs.live;
	u->keyed = t->keys.live;
	u->degraded = t->degraded;
	u->lost = t->lost;
	u->bytes =
	    (uint64_t)t->recs.nchunks * RCHUNK * sizeof(struct rec) + t->recs.cap * sizeof(void *) +
	    (uint64_t)t->keys.nchunks * RCHUNK * sizeof(struct keys) + t->keys.cap * sizeof(void *);
	pthread_mutex_unlock(&t->lock);
}
