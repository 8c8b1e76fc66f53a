/*
 * replica.c - the replica table: records of pages kept on several peers.
 *
 * Records live in chunks of RCHUNK, allocated as the table grows and never
 * moved, so a walk can copy a record under the lock and call out without it.
 * Free records are on a list threaded through their handle's index. An id is
 * bit 29 (the mark that this descriptor names a record), the record's
 * generation in bits 2..28 and its index + 1 in bits 32..63; the generation
 * grows on every add and move, so an id held across a change is stale.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/replica.h"

#define RCHUNK_SHIFT 12
#define RCHUNK (1u << RCHUNK_SHIFT)
#define RINDEX_MAX (1u << 30) /* records at most (2^30 * 64 bytes: far beyond any tier) */
#define ID_MARK (1ull << 29)
#define GEN_MASK ((1u << 27) - 1)
#define NO_NEXT UINT32_MAX

struct rec {
	struct tmem_handle h;      /* when free: h.index links the free list */
	uint32_t gen;              /* bits 0..26 used; grows on add and move */
	uint32_t checksum;
	uint16_t len;
	uint8_t n;
	uint8_t live : 1, pers : 1, state : 2, ec_k : 3; /* ec_k < REPLICA_MAX */
	uint8_t node[REPLICA_MAX];
	uint8_t epoch[REPLICA_MAX];
	uint64_t raddr[REPLICA_MAX]; /* one-sided read addresses (replica.h) */
	uint32_t rkey[REPLICA_MAX];
	uint32_t lgen[REPLICA_MAX];
};

struct replica_table {
	pthread_mutex_t lock;
	struct rec **chunk;        /* chunks[i] holds records i*RCHUNK .. */
	uint32_t nchunks;          /* allocated */
	uint32_t cap;              /* chunk pointer slots */
	uint32_t free_head;        /* NO_NEXT: none */
	uint64_t live, degraded, lost;
};

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
	if ((idx >> RCHUNK_SHIFT) >= t->nchunks)
		return NULL;
	r = &t->chunk[idx >> RCHUNK_SHIFT][idx & (RCHUNK - 1)];
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

/* Add a chunk to the free list; lock held. @return 0, -ENOMEM. */
static int table_grow(struct replica_table *t)
{
	struct rec *c;
	uint32_t i, base = t->nchunks << RCHUNK_SHIFT;

	if (base >= RINDEX_MAX)
		return -ENOMEM;
	if (t->nchunks == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct rec **n = realloc(t->chunk, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->chunk = n;
		t->cap = cap;
	}
	c = calloc(RCHUNK, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (i = 0; i < RCHUNK; i++)
		c[i].h.index = i + 1 < RCHUNK ? base + i + 1 : t->free_head;
	t->chunk[t->nchunks++] = c;
	t->free_head = base;
	return 0;
}

struct replica_table *replica_create(void)
{
	struct replica_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->free_head = NO_NEXT;
	return t;
}

void replica_destroy(struct replica_table *t)
{
	uint32_t i;

	if (!t)
		return;
	for (i = 0; i < t->nchunks; i++)
		free(t->chunk[i]);
	free(t->chunk);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int replica_add(struct replica_table *t, const struct tmem_handle *h, bool pers,
		const struct replica_set *s, uint64_t *id)
{
	struct rec *r;
	uint32_t idx;

	if (!t || !h || !id || !set_valid(s))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	if (t->free_head == NO_NEXT && table_grow(t)) {
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	idx = t->free_head;
	r = &t->chunk[idx >> RCHUNK_SHIFT][idx & (RCHUNK - 1)];
	t->free_head = r->h.index;
	r->h = *h;
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
	memcpy(r->raddr, s->raddr, sizeof(r->raddr));
	memcpy(r->rkey, s->rkey, sizeof(r->rkey));
	memcpy(r->lgen, s->lgen, sizeof(r->lgen));
	t->live++;
	*id = id_make(idx, r->gen);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void rec_copy(const struct rec *r, struct replica_set *s)
{
	memset(s, 0, sizeof(*s));
	s->n = r->n;
	s->ec_k = r->ec_k;
	s->len = r->len;
	s->checksum = r->checksum;
	s->state = r->state;
	memcpy(s->node, r->node, sizeof(s->node));
	memcpy(s->epoch, r->epoch, sizeof(s->epoch));
	memcpy(s->raddr, r->raddr, sizeof(s->raddr));
	memcpy(s->rkey, r->rkey, sizeof(s->rkey));
	memcpy(s->lgen, r->lgen, sizeof(s->lgen));
}

int replica_read(struct replica_table *t, uint64_t id, struct replica_set *s,
		 struct tmem_handle *h)
{
	struct rec *r;

	pthread_mutex_lock(&t->lock);
	r = rec_of(t, id);
	if (r) {
		if (s)
			rec_copy(r, s);
		if (h)
			*h = r->h;
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
		r->h.index = t->free_head;
		t->free_head = (uint32_t)(id >> 32) - 1;
		t->live--;
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
	r->raddr[slot] = 0; /* the new copy is had by message */
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
	for (c = 0; c < t->nchunks; c++) {
		for (i = 0; i < RCHUNK; i++) {
			struct rec *r = &t->chunk[c][i];

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
		if ((idx >> RCHUNK_SHIFT) >= t->nchunks) {
			pthread_mutex_unlock(&t->lock);
			*cursor = 0;
			return seen;
		}
		r = &t->chunk[idx >> RCHUNK_SHIFT][idx & (RCHUNK - 1)];
		live = r->live;
		if (live) {
			rec_copy(r, &s);
			h = r->h;
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
	u->records = t->live;
	u->degraded = t->degraded;
	u->lost = t->lost;
	u->bytes = (uint64_t)t->nchunks * RCHUNK * sizeof(struct rec) + t->cap * sizeof(struct rec *);
	pthread_mutex_unlock(&t->lock);
}
