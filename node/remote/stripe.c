/*
 * stripe.c - the owner's stripe table and the stripe builder (stripe.h).
 *
 * Entries live in chunks of SCHUNK, allocated as the table grows and never
 * moved or freed before the table; free entries are on a list (LIFO) through
 * their next field. An entry is 80 bytes whatever the code (48, and the seal
 * versions of its data slots). The counters of
 * stripe_stats are kept as the entries change: each change takes the
 * stripe's share out, changes it and puts it back (ent_account).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/stripe.h"

/* ---- the table ------------------------------------------------------------- */

#define SCHUNK_SHIFT 10
#define SCHUNK	     (1u << SCHUNK_SHIFT)
#define SINDEX_MAX   (1u << 30) /* stripes at most: far beyond any tier */
#define GEN_MASK     ((1u << 24) - 1)
#define NO_NEXT	     UINT32_MAX

struct ent {
	uint32_t gen;  /* bits 0..23 used; grows on add and remove */
	uint32_t next; /* when free: the next free entry's index, NO_NEXT none */
	uint16_t lens[ERASURE_MAX];
	uint16_t L;
	uint8_t used; /* ENT_* */
	uint8_t k, m;
	uint8_t live; /* data slots with a live page */
	uint8_t gone; /* slots whose holder died, not moved yet */
	uint8_t node[ERASURE_MAX];
	uint8_t epoch[ERASURE_MAX];
	uint32_t version[ERASURE_MAX]; /* each slot's seal version, as its put carried it */
};

enum { ENT_FREE = 0, ENT_STRIPE = 1, ENT_RESERVED = 2 };

_Static_assert(sizeof(struct ent) == 80, "a stripe's entry is 80 bytes");
_Static_assert(ERASURE_MAX <= 8, "the live and gone masks are 8 bits");
_Static_assert(ERASURE_STRIPE_FRAG_MAX <= UINT16_MAX, "lens are 16 bits");

struct stripe_table {
	pthread_mutex_t lock;
	struct ent **chunk;	/* chunk[i] holds entries i*SCHUNK .. */
	uint32_t nchunks;	/* allocated */
	uint32_t cap;		/* chunk pointer slots */
	uint32_t free_head;	/* NO_NEXT: none */
	struct stripe_stats st; /* but bytes, made by stripe_stats */
};

#define ENT(t, idx) (&(t)->chunk[(idx) >> SCHUNK_SHIFT][(idx) & (SCHUNK - 1)])

static uint64_t id_make(uint32_t idx, uint32_t gen)
{
	return ((uint64_t)(gen & GEN_MASK) << 32) | (idx + 1);
}

/* The entry id names, a stripe or reserved, or NULL; lock held. */
static struct ent *ent_taken(struct stripe_table *t, uint64_t id)
{
	uint32_t num = stripe_number(id), idx = num - 1;
	struct ent *e;

	if (!num || (id >> 56) || (idx >> SCHUNK_SHIFT) >= t->nchunks)
		return NULL;
	e = ENT(t, idx);
	if (e->used == ENT_FREE || e->gen != (uint32_t)((id >> 32) & GEN_MASK))
		return NULL;
	return e;
}

/* The stripe id names, or NULL; lock held. */
static struct ent *ent_of(struct stripe_table *t, uint64_t id)
{
	struct ent *e = ent_taken(t, id);

	return e && e->used == ENT_STRIPE ? e : NULL;
}

/* The data slots holding a blob, live or dead. */
static unsigned ent_full(const struct ent *e)
{
	unsigned j, full = 0;

	for (j = 0; j < e->k; j++)
		if (e->lens[j])
			full |= 1u << j;
	return full;
}

/* Add (sign 1) or take out (-1) e's share of the counters; lock held. */
static void ent_account(struct stripe_table *t, const struct ent *e, int sign)
{
	unsigned j, dead = ent_full(e) & ~e->live;
	uint64_t dead_bytes = 0;

	for (j = 0; j < e->k; j++)
		if (dead & (1u << j))
			dead_bytes += e->lens[j];
	t->st.stripes += (uint64_t)sign;
	t->st.live_pages += (uint64_t)(sign * __builtin_popcount(e->live));
	t->st.dead_pages += (uint64_t)(sign * __builtin_popcount(dead));
	t->st.dead_bytes += (uint64_t)sign * dead_bytes;
	t->st.parity_bytes += (uint64_t)sign * e->m * e->L;
	t->st.degraded += (uint64_t)(sign * (e->gone != 0));
	t->st.degraded_pages += (uint64_t)(sign * (e->gone ? __builtin_popcount(e->live) : 0));
}

static bool rec_valid(const struct stripe_rec *r)
{
	unsigned j, s, full = 0, L = 0;
	uint64_t seen = 0;

	if (!r || r->k < 2 || r->m < 1 || r->k > ERASURE_MAX || r->m > ERASURE_MAX ||
	    r->k + r->m > ERASURE_MAX)
		return false;
	for (j = 0; j < r->k; j++) {
		if (r->lens[j] > ERASURE_STRIPE_FRAG_MAX)
			return false;
		if (r->lens[j])
			full |= 1u << j;
		if (r->lens[j] > L)
			L = r->lens[j];
	}
	if (!L || r->L != L || !r->live || (r->live & ~full))
		return false;
	for (s = 0; s < r->k + r->m; s++) {
		if (s < r->k && !r->lens[s]) {
			if (r->node[s])
				return false;
			continue;
		}
		if (r->node[s] < 1 || r->node[s] > 64 || (seen & (1ull << (r->node[s] - 1))))
			return false;
		seen |= 1ull << (r->node[s] - 1);
	}
	return true;
}

/* Add a chunk of SCHUNK entries to the free list; lock held. @return 0, -ENOMEM. */
static int table_grow(struct stripe_table *t)
{
	uint32_t i, base = t->nchunks << SCHUNK_SHIFT;
	struct ent *c;

	if (base >= SINDEX_MAX)
		return -ENOMEM;
	if (t->nchunks == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		struct ent **n = realloc(t->chunk, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->chunk = n;
		t->cap = cap;
	}
	c = calloc(SCHUNK, sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* in index order: the first taken are the lowest */
	for (i = 0; i < SCHUNK; i++)
		c[i].next = i + 1 < SCHUNK ? base + i + 1 : t->free_head;
	t->chunk[t->nchunks++] = c;
	t->free_head = base;
	return 0;
}

struct stripe_table *stripe_table_create(void)
{
	struct stripe_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->free_head = NO_NEXT;
	return t;
}

void stripe_table_destroy(struct stripe_table *t)
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

/* Take a free entry (growing the table); lock held. @return its index, or NO_NEXT. */
static uint32_t ent_take(struct stripe_table *t)
{
	uint32_t idx;
	struct ent *e;

	if (t->free_head == NO_NEXT && table_grow(t))
		return NO_NEXT;
	idx = t->free_head;
	e = ENT(t, idx);
	t->free_head = e->next;
	e->gen = (e->gen + 1) & GEN_MASK;
	e->next = NO_NEXT;
	e->used = ENT_RESERVED;
	return idx;
}

/* Fill entry e with r (valid) and count it; lock held. */
static void ent_fill(struct stripe_table *t, struct ent *e, const struct stripe_rec *r)
{
	unsigned j;

	e->used = ENT_STRIPE;
	e->k = (uint8_t)r->k;
	e->m = (uint8_t)r->m;
	e->L = (uint16_t)r->L;
	e->live = (uint8_t)r->live;
	e->gone = 0;
	memset(e->lens, 0, sizeof(e->lens));
	for (j = 0; j < r->k; j++)
		e->lens[j] = (uint16_t)r->lens[j];
	memcpy(e->node, r->node, sizeof(e->node));
	memcpy(e->epoch, r->epoch, sizeof(e->epoch));
	memcpy(e->version, r->version, sizeof(e->version));
	/* what lies beyond the code is not the stripe's */
	memset(e->node + r->k + r->m, 0, ERASURE_MAX - r->k - r->m);
	memset(e->epoch + r->k + r->m, 0, ERASURE_MAX - r->k - r->m);
	memset(e->version + r->k + r->m, 0, (ERASURE_MAX - r->k - r->m) * sizeof(e->version[0]));
	ent_account(t, e, 1);
}

int stripe_add(struct stripe_table *t, const struct stripe_rec *r, uint64_t *id)
{
	uint32_t idx;

	if (!t || !id || !rec_valid(r))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	idx = ent_take(t);
	if (idx == NO_NEXT) {
		pthread_mutex_unlock(&t->lock);
		return -ENOMEM;
	}
	ent_fill(t, ENT(t, idx), r);
	*id = id_make(idx, ENT(t, idx)->gen);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int stripe_reserve(struct stripe_table *t, uint64_t *id)
{
	uint32_t idx;

	if (!t || !id)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	idx = ent_take(t);
	if (idx != NO_NEXT)
		*id = id_make(idx, ENT(t, idx)->gen);
	pthread_mutex_unlock(&t->lock);
	return idx == NO_NEXT ? -ENOMEM : 0;
}

int stripe_fill(struct stripe_table *t, uint64_t id, const struct stripe_rec *r)
{
	struct ent *e;
	int ret = 0;

	if (!t || !rec_valid(r))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = ent_taken(t, id);
	if (!e || e->used != ENT_RESERVED)
		ret = -ENOENT;
	else
		ent_fill(t, e, r);
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int stripe_restore(struct stripe_table *t, uint64_t id, const struct stripe_rec *r)
{
	uint32_t num = stripe_number(id), idx = num - 1, gen = (uint32_t)(id >> 32), *link;
	struct ent *e;
	int ret = 0;

	if (!t || !num || (id >> 56) || idx >= SINDEX_MAX || !rec_valid(r))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	while ((idx >> SCHUNK_SHIFT) >= t->nchunks) {
		if (table_grow(t)) {
			ret = -ENOMEM;
			goto out;
		}
	}
	e = ENT(t, idx);
	if (e->used != ENT_FREE) {
		ret = -EEXIST;
		goto out;
	}
	/* off the free list (a restore is rare: a walk of the list is fine) */
	for (link = &t->free_head; *link != idx; link = &ENT(t, *link)->next)
		if (*link == NO_NEXT) {
			ret = -EINVAL; /* a free entry off the list: cannot be */
			goto out;
		}
	*link = e->next;
	e->next = NO_NEXT;
	e->gen = gen & GEN_MASK;
	ent_fill(t, e, r);
	if (r->gone) {
		/* slots whose holder had died, not yet made again when it was saved */
		unsigned s, gone = 0;

		for (s = 0; s < r->k + r->m; s++)
			if ((r->gone & (1u << s)) && e->node[s])
				gone |= 1u << s;
		ent_account(t, e, -1);
		e->gone = (uint8_t)gone;
		ent_account(t, e, 1);
	}
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

static void ent_copy(const struct ent *e, struct stripe_rec *r)
{
	unsigned j;

	memset(r, 0, sizeof(*r));
	r->k = e->k;
	r->m = e->m;
	memcpy(r->node, e->node, sizeof(r->node));
	memcpy(r->epoch, e->epoch, sizeof(r->epoch));
	for (j = 0; j < e->k; j++)
		r->lens[j] = e->lens[j];
	memcpy(r->version, e->version, sizeof(r->version));
	r->L = e->L;
	r->live = e->live;
	r->gone = e->gone;
	r->state = e->gone ? STRIPE_DEGRADED : 0;
}

int stripe_read(struct stripe_table *t, uint64_t id, struct stripe_rec *out)
{
	struct ent *e;

	pthread_mutex_lock(&t->lock);
	e = ent_of(t, id);
	if (e && out)
		ent_copy(e, out);
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOENT;
}

int stripe_kill(struct stripe_table *t, uint64_t id, unsigned slot, bool *empty)
{
	struct ent *e;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	e = ent_of(t, id);
	if (!e) {
		ret = -ENOENT;
		goto out;
	}
	if (slot >= e->k || !(e->live & (1u << slot))) {
		ret = -EINVAL;
		goto out;
	}
	ent_account(t, e, -1);
	e->live &= (uint8_t) ~(1u << slot);
	ent_account(t, e, 1);
	if (empty)
		*empty = !e->live;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

int stripe_remove(struct stripe_table *t, uint64_t id)
{
	struct ent *e;

	pthread_mutex_lock(&t->lock);
	e = ent_taken(t, id);
	if (e) {
		if (e->used == ENT_STRIPE)
			ent_account(t, e, -1);
		e->used = ENT_FREE;
		e->gen = (e->gen + 1) & GEN_MASK;
		e->next = t->free_head;
		t->free_head = stripe_number(id) - 1;
	}
	pthread_mutex_unlock(&t->lock);
	return e ? 0 : -ENOENT;
}

int stripe_move(struct stripe_table *t, uint64_t id, unsigned slot, unsigned to, unsigned epoch)
{
	struct ent *e;
	unsigned s;
	int ret = 0;

	if (to < 1 || to > 64)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	e = ent_of(t, id);
	if (!e) {
		ret = -ENOENT;
		goto out;
	}
	if (slot >= (unsigned)e->k + e->m || (slot < e->k && !e->lens[slot])) {
		ret = -EINVAL;
		goto out;
	}
	for (s = 0; s < (unsigned)e->k + e->m; s++) {
		if (e->node[s] == to) {
			ret = -EEXIST;
			goto out;
		}
	}
	ent_account(t, e, -1);
	e->node[slot] = (uint8_t)to;
	e->epoch[slot] = (uint8_t)epoch;
	e->gone &= (uint8_t) ~(1u << slot);
	ent_account(t, e, 1);
out:
	pthread_mutex_unlock(&t->lock);
	return ret;
}

unsigned stripe_node_gone(struct stripe_table *t, unsigned node)
{
	unsigned n = 0;
	uint32_t idx, s;

	if (node < 1 || node > 64)
		return 0;
	pthread_mutex_lock(&t->lock);
	for (idx = 0; idx < t->nchunks << SCHUNK_SHIFT; idx++) {
		struct ent *e = ENT(t, idx);
		unsigned gone = e->gone;

		if (e->used != ENT_STRIPE)
			continue;
		for (s = 0; s < (unsigned)e->k + e->m; s++)
			if (e->node[s] == node)
				gone |= 1u << s;
		if (gone == e->gone)
			continue;
		ent_account(t, e, -1);
		e->gone = (uint8_t)gone;
		ent_account(t, e, 1);
		n++;
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

int stripe_walk(struct stripe_table *t,
		int (*fn)(void *arg, uint64_t id, const struct stripe_rec *r), void *arg)
{
	struct stripe_rec r;
	uint32_t idx = 0;
	uint64_t id;
	int ret;

	for (;;) {
		struct ent *e = NULL;

		pthread_mutex_lock(&t->lock);
		for (; idx < t->nchunks << SCHUNK_SHIFT; idx++) {
			e = ENT(t, idx);
			if (e->used == ENT_STRIPE)
				break;
		}
		if (idx >= t->nchunks << SCHUNK_SHIFT) {
			pthread_mutex_unlock(&t->lock);
			return 0;
		}
		ent_copy(e, &r);
		id = id_make(idx, e->gen);
		pthread_mutex_unlock(&t->lock);
		ret = fn(arg, id, &r);
		if (ret)
			return ret;
		idx++;
	}
}

void stripe_stats(struct stripe_table *t, struct stripe_stats *s)
{
	pthread_mutex_lock(&t->lock);
	*s = t->st;
	s->bytes = sizeof(*t) + (uint64_t)t->cap * sizeof(*t->chunk) +
		   (uint64_t)t->nchunks * SCHUNK * sizeof(struct ent);
	pthread_mutex_unlock(&t->lock);
}

/* ---- a slot made again ------------------------------------------------------ */

static const uint8_t zeros[ERASURE_STRIPE_FRAG_MAX]; /* an empty data slot's fragment */

int stripe_rebuild_slot(const struct erasure *e, const struct stripe_rec *r, const uint8_t *idx,
			const uint8_t *const *frag, unsigned want, uint8_t *out, size_t *out_len)
{
	uint8_t pad[ERASURE_MAX - 1][ERASURE_STRIPE_FRAG_MAX]; /* k < ERASURE_MAX */
	const uint8_t *src[ERASURE_MAX];
	unsigned i, k, j, L, seen = 0;
	int rc;

	if (!e || !r || !idx || !frag || !out || !out_len)
		return -EINVAL;
	k = r->k;
	L = r->L;
	if (k != erasure_k(e) || r->m != erasure_m(e) || want >= k + r->m || !L ||
	    L > ERASURE_STRIPE_FRAG_MAX)
		return -EINVAL;
	for (j = 0; j < k; j++)
		if (r->lens[j] > L)
			return -EINVAL;
	for (i = 0; i < k; i++) {
		unsigned s = idx[i], flen;

		if (s >= k + r->m || (seen & (1u << s)))
			return -EINVAL;
		seen |= 1u << s;
		flen = s < k ? r->lens[s] : L;
		if (!frag[i]) {
			if (flen)
				return -EINVAL;
			src[i] = zeros;
		} else if (flen < L) {
			memcpy(pad[i], frag[i], flen);
			memset(pad[i] + flen, 0, L - flen);
			src[i] = pad[i];
		} else {
			src[i] = frag[i];
		}
	}
	if (want < k && !r->lens[want]) {
		*out_len = 0; /* known zeros */
		return 0;
	}
	rc = erasure_rebuild_frag(e, idx, src, L, want, out);
	if (rc)
		return rc;
	*out_len = want < k ? r->lens[want] : L;
	return 0;
}

/* ---- the builder ----------------------------------------------------------- */

struct stripe_builder {
	const struct erasure *e;
	unsigned k, m;
	unsigned count;		    /* blobs in the open stripe */
	unsigned lens[ERASURE_MAX]; /* theirs */
	uint8_t *buf[ERASURE_MAX];  /* slot s's: the k data, then the m parity */
	uint8_t mem[];		    /* (k + m) x ERASURE_STRIPE_FRAG_MAX */
};

struct stripe_builder *stripe_builder_create(const struct erasure *e)
{
	struct stripe_builder *b;
	unsigned k, m, s;

	if (!e)
		return NULL;
	k = erasure_k(e);
	m = erasure_m(e);
	b = calloc(1, sizeof(*b) + (size_t)(k + m) * ERASURE_STRIPE_FRAG_MAX);
	if (!b)
		return NULL;
	b->e = e;
	b->k = k;
	b->m = m;
	for (s = 0; s < k + m; s++)
		b->buf[s] = b->mem + (size_t)s * ERASURE_STRIPE_FRAG_MAX;
	return b;
}

void stripe_builder_destroy(struct stripe_builder *b)
{
	free(b);
}

int stripe_builder_add(struct stripe_builder *b, const void *blob, size_t len)
{
	if (!blob || !len || len > ERASURE_STRIPE_FRAG_MAX)
		return -EINVAL;
	if (b->count == b->k)
		return -EBUSY;
	memcpy(b->buf[b->count], blob, len);
	b->lens[b->count] = (unsigned)len;
	return (int)b->count++;
}

unsigned stripe_builder_count(const struct stripe_builder *b)
{
	return b->count;
}

int stripe_builder_close(struct stripe_builder *b, struct stripe_frags *out)
{
	unsigned j, i, L = 0;

	if (!b->count)
		return -ENOENT;
	for (j = b->count; j < b->k; j++)
		b->lens[j] = 0;
	for (j = 0; j < b->k; j++)
		if (b->lens[j] > L)
			L = b->lens[j];
	for (j = 0; j < b->k; j++)
		memset(b->buf[j] + b->lens[j], 0, L - b->lens[j]);
	erasure_encode_parity(b->e, (const uint8_t *const *)b->buf, L, b->buf + b->k);
	memset(out, 0, sizeof(*out));
	out->k = b->k;
	out->m = b->m;
	out->pages = b->count;
	out->L = L;
	for (j = 0; j < b->k; j++) {
		out->lens[j] = b->lens[j];
		out->data[j] = b->buf[j];
	}
	for (i = 0; i < b->m; i++)
		out->parity[i] = b->buf[b->k + i];
	b->count = 0; /* the next add opens a new stripe */
	return 0;
}

void stripe_builder_reset(struct stripe_builder *b)
{
	b->count = 0;
}
