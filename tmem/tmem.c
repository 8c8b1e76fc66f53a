/*
 * tmem.c - the tmem handle space: pools, objects, per-object index maps, and
 * the coherency rules (get-get, put-put-get, destructive private ephemeral
 * gets). Page data is opaque here: the data side makes and frees descriptors.
 *
 * Lock order (see tmem.h): bucket lock -> object-table lock -> data side.
 * Objects live in exactly one bucket of their pool, are found by oid hash and
 * by node-wide object number (the object table), and are freed when their
 * map empties, unless a put in progress pins them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/crashtab.h"
#include "tmem/map.h"
#include "tmem/tmem.h"
#include "tmem/tmem_int.h"

/* The bucket this thread holds while it calls the data side's create(). */
static __thread struct tmem_bucket *held_bucket;

/* p's page count changes by n (either sign): the pool's, the space's, its owner's. */
#define POOL_PAGES_ADD(p, n)                                                                       \
	do {                                                                                       \
		unsigned own_ = atomic_load_explicit(&(p)->owner, memory_order_relaxed);           \
		CNT_ADD((p)->pages, (uint64_t)(n));                                                \
		CNT_ADD((p)->t->pages, (uint64_t)(n));                                             \
		if (own_)                                                                          \
			CNT_ADD((p)->t->owners[own_].pages, (uint64_t)(n));                        \
	} while (0)

/* p's remote page count changes by n (either sign): the pool's and its owner's. */
#define POOL_REMOTE_ADD(p, n)                                                                      \
	do {                                                                                       \
		unsigned own_ = atomic_load_explicit(&(p)->owner, memory_order_relaxed);           \
		CNT_ADD((p)->remote, (uint64_t)(n));                                               \
		if (own_)                                                                          \
			CNT_ADD((p)->t->owners[own_].remote, (uint64_t)(n));                       \
	} while (0)

/* 1 when pampd (non-zero) is a remote page, else 0. */
static int pampd_remote(const struct tmem *t, uint64_t pampd)
{
	return pampd && t->ops->is_remote && t->ops->is_remote(pampd);
}

/* 1 when pampd (non-zero) is a page with no slot in the local tier, else 0. */
static int pampd_nonlocal(const struct tmem *t, uint64_t pampd)
{
	return pampd && t->ops->in_tier && !t->ops->in_tier(pampd);
}

/* The crash table's count of p's pages outside the tier changes by n (either sign). */
static void nonlocal_add(struct tmem_pool *p, int64_t n)
{
	/* puts in two buckets of the pool race here */
	__atomic_fetch_add(p->nonlocal, (uint64_t)n, __ATOMIC_RELAXED);
}

/*
 * A descriptor old (0: none) became now (0: gone): the remote counts and the
 * crash table's nonlocal count (persistent pools, with a table) follow.
 */
static void desc_account(struct tmem_pool *p, uint64_t old, uint64_t now)
{
	int d = pampd_remote(p->t, now) - pampd_remote(p->t, old);

	if (d)
		POOL_REMOTE_ADD(p, (int64_t)d);
	if (p->nonlocal) {
		d = pampd_nonlocal(p->t, now) - pampd_nonlocal(p->t, old);
		if (d)
			nonlocal_add(p, d);
	}
}

/* ---- pools: table and references ----------------------------------------- */

struct tmem_pool *tmem_pool_ref(struct tmem *t, uint32_t id)
{
	struct tmem_pool *p = NULL;

	if (id >= TMEM_MAX_POOLS)
		return NULL;
	pthread_mutex_lock(&t->pool_lock);
	p = t->pools[id];
	/* a destroyed pool keeps its id until it is empty: not for new calls */
	if (p && !atomic_load(&p->dead))
		atomic_fetch_add(&p->refs, 1);
	else
		p = NULL;
	pthread_mutex_unlock(&t->pool_lock);
	return p;
}

void tmem_pool_unref(struct tmem_pool *p)
{
	unsigned i;

	if (atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	for (i = 0; i < TMEM_BUCKETS; i++) {
		pthread_mutex_destroy(&p->bucket[i].lock);
		free(p->bucket[i].tab);
	}
	free(p);
}

/* A new pool of flags at id, or at the first free id from the hint when at is -1. */
static int pool_new(struct tmem *t, unsigned flags, int64_t at)
{
	struct tmem_pool *p;
	uint32_t id = 0, i;
	unsigned b;

	if (flags & ~(unsigned)(TMEM_PERSISTENT | TMEM_SHARED | TMEM_KEEP_ALL))
		return -EINVAL;
	if (at >= TMEM_MAX_POOLS)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->flags = flags;
	p->t = t;
	atomic_init(&p->refs, 1);
	for (b = 0; b < TMEM_BUCKETS; b++)
		pthread_mutex_init(&p->bucket[b].lock, NULL);

	pthread_mutex_lock(&t->pool_lock);
	if (at >= 0) {
		id = (uint32_t)at;
		i = t->pools[id] ? TMEM_MAX_POOLS : 0;
	} else {
		for (i = 0; i < TMEM_MAX_POOLS; i++) {
			id = (t->pool_hint + i) % TMEM_MAX_POOLS;
			if (!t->pools[id])
				break;
		}
	}
	if (i == TMEM_MAX_POOLS) {
		pthread_mutex_unlock(&t->pool_lock);
		tmem_pool_unref(p);
		return at >= 0 ? -EEXIST : -ENOSPC;
	}
	p->id = id;
	if (t->crash) {
		/* the count starts from nothing, whatever the id held before */
		__atomic_store_n(&t->crash->nonlocal[id], 0, __ATOMIC_RELAXED);
		if (flags & TMEM_PERSISTENT)
			p->nonlocal = &t->crash->nonlocal[id];
		__atomic_store_n(&t->crash->pool_flags[id], flags | TMEM_CRASHTAB_POOL_LIVE,
				 __ATOMIC_RELEASE);
	}
	t->pools[id] = p;
	if (at < 0 || id + 1 > t->pool_hint)
		t->pool_hint = id + 1;
	pthread_mutex_unlock(&t->pool_lock);
	CNT_INC(t->pools_created);
	CNT_INC(t->pools_now);
	return (int)id;
}

int tmem_pool_new(struct tmem *t, unsigned flags)
{
	return pool_new(t, flags, -1);
}

int tmem_pool_new_at(struct tmem *t, uint32_t id, unsigned flags)
{
	return pool_new(t, flags, id);
}

/* ---- objects --------------------------------------------------------------- */

/* Double the bucket's table; caller holds b->lock. @return 0 or -ENOMEM. */
static int bucket_grow(struct tmem *t, struct tmem_bucket *b)
{
	uint32_t size = b->tab ? (b->mask + 1) * 2 : 4, i;
	struct tmem_obj **tab = calloc(size, sizeof(*tab));
	struct tmem_obj *o, *next;

	if (!tab)
		return -ENOMEM;
	for (i = 0; b->tab && i <= b->mask; i++) {
		for (o = b->tab[i]; o; o = next) {
			next = o->next;
			o->next = tab[oid_hash(&o->oid) & (size - 1)];
			tab[oid_hash(&o->oid) & (size - 1)] = o;
		}
	}
	CNT_ADD(t->bucket_bytes,
		(int64_t)(size - (b->tab ? b->mask + 1 : 0)) * (int64_t)sizeof(*tab));
	free(b->tab);
	b->tab = tab;
	b->mask = size - 1;
	return 0;
}

/* Take a free object number for o. @return 0 or -ENOMEM. */
static int objtab_alloc(struct tmem *t, struct tmem_obj *o)
{
	uint32_t no;

	pthread_mutex_lock(&t->obj_lock);
	if (t->objtab_free == OBJTAB_NONE) {
		uint32_t size = t->objtab_size ? t->objtab_size * 2 : 1024, i;
		uintptr_t *tab;

		if (size <= t->objtab_size || size > (UINT32_MAX >> 1))
			goto nomem;
		tab = realloc(t->objtab, (size_t)size * sizeof(*tab));
		if (!tab)
			goto nomem;
		for (i = t->objtab_size; i < size; i++)
			tab[i] = OBJTAB_FREE(i + 1 < size ? i + 1 : OBJTAB_NONE);
		t->objtab_free = t->objtab_size;
		t->objtab = tab;
		t->objtab_size = size;
	}
	no = t->objtab_free;
	t->objtab_free = OBJTAB_NEXT(t->objtab[no]);
	t->objtab[no] = (uintptr_t)o;
	/* obj_new named o before numbering it: the entry is whole before any slot names it */
	if (t->crash) {
		if (no < t->crash_objs)
			tmem_crashtab_obj_set(t->crash, no, o->pool->id, &o->oid);
		else
			CNT_INC(t->crash_untracked);
	}
	pthread_mutex_unlock(&t->obj_lock);
	o->objno = no;
	return 0;
nomem:
	pthread_mutex_unlock(&t->obj_lock);
	return -ENOMEM;
}

/* Create the object for oid in bucket b (locked). @return it, or NULL. */
static struct tmem_obj *obj_new(struct tmem_pool *p, struct tmem_bucket *b,
				const struct tmem_oid *oid)
{
	struct tmem *t = p->t;
	struct tmem_obj *o;
	uint32_t slot;

	if (b->n >= (b->tab ? b->mask + 1 : 0) && bucket_grow(t, b))
		return NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->oid = *oid;
	o->pool = p;
	if (objtab_alloc(t, o)) {
		free(o);
		return NULL;
	}
	slot = oid_hash(oid) & b->mask;
	o->next = b->tab[slot];
	b->tab[slot] = o;
	b->n++;
	CNT_INC(p->objects);
	CNT_INC(t->objects);
	return o;
}

/* Unlink and free an empty object; caller holds b->lock. */
static void obj_free(struct tmem_bucket *b, struct tmem_obj *o)
{
	struct tmem *t = o->pool->t;
	struct tmem_obj **pp = &b->tab[oid_hash(&o->oid) & b->mask];

	while (*pp != o)
		pp = &(*pp)->next;
	*pp = o->next;
	b->n--;
	pthread_mutex_lock(&t->obj_lock);
	/* cleared before the number can be reused: its last page left already */
	if (t->crash && o->objno < t->crash_objs)
		tmem_crashtab_obj_clear(t->crash, o->objno);
	t->objtab[o->objno] = OBJTAB_FREE(t->objtab_free);
	t->objtab_free = o->objno;
	pthread_mutex_unlock(&t->obj_lock);
	CNT_DEC(o->pool->objects);
	CNT_DEC(t->objects);
	free(o);
}

static void obj_free_if_empty(struct tmem_bucket *b, struct tmem_obj *o)
{
	if (o->map.count == 0 && o->pin == 0)
		obj_free(b, o);
}

static void nodes_account(struct tmem *t, int delta)
{
	if (delta)
		CNT_ADD(t->map_nodes, delta);
}

/* Remove index from o and free its data. @return 0, or -ENOENT if absent. */
static int obj_remove_page(struct tmem_obj *o, uint32_t index)
{
	struct tmem_pool *p = o->pool;
	struct tmem *t = p->t;
	uint64_t pampd;
	int delta;

	struct tmem_handle h = {p->id, o->oid, index};

	pampd = map_delete(&o->map, index, &delta);
	nodes_account(t, delta);
	if (!pampd)
		return -ENOENT;
	desc_account(p, pampd, 0);
	t->ops->free(t->ctx, p->flags & TMEM_PERSISTENT, pampd, &h, false);
	POOL_PAGES_ADD(p, -1);
	return 0;
}

struct drain_ctx {
	struct tmem_pool *pool;
	struct tmem_obj *obj;
	uint64_t n;
	uint64_t remote;
	uint64_t nonlocal; /* with a crash table: pages outside the tier */
};

static void drain_one(void *arg, uint32_t index, uint64_t pampd)
{
	struct drain_ctx *d = arg;
	struct tmem *t = d->pool->t;
	struct tmem_handle h = {d->pool->id, d->obj->oid, index};

	d->remote += pampd_remote(t, pampd);
	if (d->pool->nonlocal)
		d->nonlocal += pampd_nonlocal(t, pampd);
	t->ops->free(t->ctx, d->pool->flags & TMEM_PERSISTENT, pampd, &h, true);
	d->n++;
}

/*
 * Free every page of o and o itself; caller holds b->lock. The nodes its
 * pages named are added to *nodes; with tell, flush_object tells them now.
 * @return pages freed.
 */
static uint64_t obj_destroy(struct tmem_bucket *b, struct tmem_obj *o, bool tell, uint64_t *nodes)
{
	struct tmem_pool *p = o->pool;
	struct tmem *t = p->t;
	struct drain_ctx d = {.pool = p, .obj = o};
	size_t freed;

	freed = map_drain(&o->map, drain_one, &d);
	nodes_account(t, -(int)freed);
	POOL_PAGES_ADD(p, -(uint64_t)d.n);
	if (d.remote)
		POOL_REMOTE_ADD(p, -(uint64_t)d.remote);
	if (d.nonlocal)
		nonlocal_add(p, -(int64_t)d.nonlocal);
	if (tell && o->nodes && t->ops->flush_object) {
		struct tmem_handle h = {p->id, o->oid, 0};

		t->ops->flush_object(t->ctx, p->flags & TMEM_PERSISTENT, &h, o->nodes);
	}
	*nodes |= o->nodes;
	obj_free(b, o);
	return d.n;
}

static uint64_t pampd_nodes(struct tmem *t, uint64_t pampd)
{
	return t->ops->nodes ? t->ops->nodes(t->ctx, pampd) : 0;
}

/* ---- the handle space ------------------------------------------------------ */

struct tmem *tmem_create(const struct tmem_pamops *ops, void *ctx)
{
	struct tmem *t;

	if (!ops || !ops->create || !ops->get_data || !ops->free) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pools = calloc(TMEM_MAX_POOLS, sizeof(*t->pools));
	if (!t->pools) {
		free(t);
		return NULL;
	}
	t->ops = ops;
	t->ctx = ctx;
	t->objtab_free = OBJTAB_NONE;
	pthread_mutex_init(&t->pool_lock, NULL);
	pthread_mutex_init(&t->obj_lock, NULL);
	return t;
}

void tmem_destroy(struct tmem *t)
{
	uint32_t i;

	if (!t)
		return;
	for (i = 0; i < TMEM_MAX_POOLS; i++)
		if (t->pools[i])
			tmem_pool_destroy(t, i);
	pthread_mutex_destroy(&t->pool_lock);
	pthread_mutex_destroy(&t->obj_lock);
	free(t->objtab);
	free(t->pools);
	free(t);
}

int tmem_pool_destroy(struct tmem *t, uint32_t id)
{
	struct tmem_pool *p;
	uint64_t n = 0, nodes = 0;
	unsigned i;

	if (id >= TMEM_MAX_POOLS)
		return -ENOENT;
	pthread_mutex_lock(&t->pool_lock);
	p = t->pools[id];
	if (p && atomic_exchange(&p->dead, true))
		p = NULL; /* another destroy is emptying it */
	/* gone for a crash's loader before its first page goes */
	if (p && t->crash)
		__atomic_store_n(&t->crash->pool_flags[id], 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->pool_lock);
	if (!p)
		return -ENOENT;
	/* Calls already inside see dead under the bucket lock and back out. */
	for (i = 0; i < TMEM_BUCKETS; i++) {
		struct tmem_bucket *b = &p->bucket[i];
		uint32_t s;

		pthread_mutex_lock(&b->lock);
		for (s = 0; b->tab && s <= b->mask; s++)
			while (b->tab[s])
				n += obj_destroy(b, b->tab[s], false, &nodes);
		if (b->tab)
			CNT_SUB(t->bucket_bytes, (int64_t)(b->mask + 1) * (int64_t)sizeof(*b->tab));
		free(b->tab);
		b->tab = NULL;
		b->mask = 0;
		pthread_mutex_unlock(&b->lock);
	}
	if (nodes && t->ops->flush_pool)
		t->ops->flush_pool(t->ctx, p->flags & TMEM_PERSISTENT, p->id, nodes);
	/*
	 * Only now may a new pool take the id: the drain above counted down
	 * this pool's crash-table entry, and flush_pool named it by id.
	 */
	pthread_mutex_lock(&t->pool_lock);
	t->pools[id] = NULL;
	if (t->crash)
		__atomic_store_n(&t->crash->nonlocal[id], 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->pool_lock);
	CNT_ADD(t->flushed_pages, n);
	CNT_INC(t->pools_destroyed);
	CNT_DEC(t->pools_now);
	tmem_pool_unref(p);
	return 0;
}

/* A put whose descriptor comes from make(ctx, flags, page, ref, &pampd): the data side's create, or
 * tmem_put_desc's maker. */
static int put_common(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index,
		      int (*make)(void *ctx, unsigned flags, const void *page, struct tmem_ref ref,
				  uint64_t *pampd),
		      void *ctx, const void *page)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);
	bool pers;
	struct tmem_bucket *b;
	struct tmem_obj *o;
	uint64_t pampd = 0, old;
	int ret, delta;

	CNT_INC(t->puts);
	if (!p)
		return -ENOENT;
	pers = p->flags & TMEM_PERSISTENT;
	b = pool_bucket(p, oid);
	pthread_mutex_lock(&b->lock);
	if (atomic_load(&p->dead)) {
		ret = -ENOENT;
		goto unlock;
	}
	o = obj_find(b, oid);
	if (!o) {
		o = obj_new(p, b, oid);
		if (!o) {
			ret = -ENOMEM;
			goto unlock;
		}
	}
	/* The data side may evict pages, even of this object: pin it, and read
	 * the old descriptor only afterwards. */
	o->pin++;
	held_bucket = b;
	ret = make(ctx, p->flags, page, (struct tmem_ref){o->objno, index}, &pampd);
	held_bucket = NULL;
	o->pin--;
	if (ret == 0) {
		ret = map_set(&o->map, index, pampd, &old, &delta);
		nodes_account(t, delta);
		if (ret) {
			struct tmem_handle h = {p->id, *oid, index};

			t->ops->free(t->ctx, pers, pampd, &h, false);
			goto refused;
		}
		o->nodes |= pampd_nodes(t, pampd);
		desc_account(p, old, pampd);
		if (old) {
			struct tmem_handle h = {p->id, *oid, index};

			t->ops->free(t->ctx, pers, old, &h, false);
			CNT_INC(t->puts_dup);
		} else {
			POOL_PAGES_ADD(p, 1);
		}
		goto unlock;
	}
refused:
	/* put-put-get: a refused duplicate put must not leave the old page. */
	CNT_INC(t->puts_failed);
	if (obj_remove_page(o, index) == 0)
		CNT_INC(t->dup_put_flushes);
	obj_free_if_empty(b, o);
unlock:
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	return ret;
}

int tmem_put(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index,
	     const void *page)
{
	return put_common(t, id, oid, index, t->ops->create, t->ctx, page);
}

int tmem_put_desc(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index,
		  int (*make)(void *arg, unsigned flags, const void *page, struct tmem_ref ref,
			      uint64_t *pampd),
		  void *arg)
{
	return put_common(t, id, oid, index, make, arg, NULL);
}

int tmem_get(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index, void *page)
{
	return tmem_get_ex(t, id, oid, index, page, NULL);
}

int tmem_get_ex(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index, void *page,
		uint64_t *remote)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);
	struct tmem_bucket *b;
	struct tmem_obj *o;
	uint64_t pampd = 0;
	bool pers, destructive;
	int ret = -ENOENT;

	CNT_INC(t->gets);
	if (!p) {
		CNT_INC(t->misses);
		return -ENOENT;
	}
	pers = p->flags & TMEM_PERSISTENT;
	destructive = !pers && !(p->flags & TMEM_SHARED);
	b = pool_bucket(p, oid);
	pthread_mutex_lock(&b->lock);
	o = atomic_load(&p->dead) ? NULL : obj_find(b, oid);
	if (o)
		pampd = map_lookup(&o->map, index);
	if (!pampd) {
		/* the page may have been put before a crash and lost in it */
		if (pers && atomic_load_explicit(&p->incomplete, memory_order_relaxed)) {
			CNT_INC(t->gets_incomplete);
			ret = -EIO;
		}
		goto unlock;
	}
	ret = t->ops->get_data(t->ctx, pers, pampd, page);
	if (ret == -EREMOTE) {
		if (remote)
			*remote = pampd;
		goto unlock;
	}
	if (ret && !pers)
		ret = -ENOENT; /* a lost ephemeral page is a miss */
	/* Destructive gets, and ephemeral pages found lost, leave no page behind
	 * (get-get: the next get fails too). A lost persistent page stays, so
	 * every later get reports -EIO rather than a miss. */
	if (destructive || (ret && !pers)) {
		obj_remove_page(o, index);
		obj_free_if_empty(b, o);
	}
unlock:
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	if (ret == -EREMOTE)
		CNT_INC(t->remote_gets);
	else
		tmem_note_get(t, ret);
	return ret;
}

void tmem_note_get(struct tmem *t, int ret)
{
	if (ret == 0)
		CNT_INC(t->hits);
	else if (ret == -ENOENT)
		CNT_INC(t->misses);
	else
		CNT_INC(t->get_errors);
}

int tmem_update(struct tmem *t, const struct tmem_handle *h,
		int (*fn)(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd), void *arg)
{
	struct tmem_pool *p = tmem_pool_ref(t, h->pool);
	struct tmem_ref ref = {UINT32_MAX, h->index};
	struct tmem_bucket *b;
	struct tmem_obj *o;
	uint64_t pampd = 0, was;
	int ret, delta;

	if (!p)
		return -ENOENT;
	b = pool_bucket(p, &h->oid);
	pthread_mutex_lock(&b->lock);
	o = atomic_load(&p->dead) ? NULL : obj_find(b, &h->oid);
	if (o) {
		ref.objno = o->objno;
		pampd = map_lookup(&o->map, h->index);
		o->pin++;
	}
	was = pampd;
	held_bucket = b;
	ret = fn(arg, ref, p->flags & TMEM_PERSISTENT, &pampd);
	held_bucket = NULL;
	if (o)
		o->pin--;
	if (o && was && pampd != was) {
		/* eviction inside fn may have removed the page meanwhile */
		uint64_t cur = map_lookup(&o->map, h->index), old;

		if (cur && pampd) {
			map_set(&o->map, h->index, pampd, &old, &delta);
			nodes_account(t, delta);
			o->nodes |= pampd_nodes(t, pampd);
			desc_account(p, old, pampd);
		} else if (cur) {
			desc_account(p, cur, 0);
			map_delete(&o->map, h->index, &delta);
			nodes_account(t, delta);
			POOL_PAGES_ADD(p, -1);
		}
	}
	if (o)
		obj_free_if_empty(b, o);
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	return ret;
}

int tmem_ref_resolve(struct tmem *t, struct tmem_ref ref, struct tmem_handle *h, unsigned *flags)
{
	struct tmem_obj *o;
	uintptr_t e;

	pthread_mutex_lock(&t->obj_lock);
	e = ref.objno < t->objtab_size ? t->objtab[ref.objno] : 1;
	if (OBJTAB_IS_FREE(e)) {
		pthread_mutex_unlock(&t->obj_lock);
		return -ENOENT;
	}
	o = (struct tmem_obj *)e;
	h->pool = o->pool->id;
	h->oid = o->oid;
	h->index = ref.index;
	if (flags)
		*flags = o->pool->flags;
	pthread_mutex_unlock(&t->obj_lock);
	return 0;
}

int tmem_flush_page(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);
	struct tmem_bucket *b;
	struct tmem_obj *o;
	int ret = -ENOENT;

	CNT_INC(t->flushes);
	if (!p)
		return -ENOENT;
	b = pool_bucket(p, oid);
	pthread_mutex_lock(&b->lock);
	o = atomic_load(&p->dead) ? NULL : obj_find(b, oid);
	if (o) {
		ret = obj_remove_page(o, index);
		obj_free_if_empty(b, o);
	}
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	if (ret == 0)
		CNT_INC(t->flushed_pages);
	return ret;
}

int tmem_flush_object(struct tmem *t, uint32_t id, const struct tmem_oid *oid)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);
	struct tmem_bucket *b;
	struct tmem_obj *o;
	int ret = -ENOENT;

	CNT_INC(t->flush_objects);
	if (!p)
		return -ENOENT;
	b = pool_bucket(p, oid);
	pthread_mutex_lock(&b->lock);
	o = atomic_load(&p->dead) ? NULL : obj_find(b, oid);
	if (o && o->pin == 0) {
		uint64_t nodes = 0;

		CNT_ADD(t->flushed_pages, obj_destroy(b, o, true, &nodes));
		ret = 0;
	}
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	return ret;
}

int tmem_replace(struct tmem *t, struct tmem_ref ref, uint64_t expect, uint64_t with, bool trylock)
{
	return tmem_replace_then(t, ref, expect, with, trylock, NULL, NULL);
}

int tmem_replace_then(struct tmem *t, struct tmem_ref ref, uint64_t expect, uint64_t with,
		      bool trylock, void (*then)(void *arg), void *arg)
{
	struct tmem_pool *p;
	struct tmem_bucket *b;
	struct tmem_obj *o;
	struct tmem_oid oid;
	uintptr_t e;
	int ret = -ENOENT, delta;
	bool locked = false;

	pthread_mutex_lock(&t->obj_lock);
	e = ref.objno < t->objtab_size ? t->objtab[ref.objno] : 1;
	if (OBJTAB_IS_FREE(e)) {
		pthread_mutex_unlock(&t->obj_lock);
		return -ENOENT;
	}
	o = (struct tmem_obj *)e;
	p = o->pool;
	oid = o->oid;
	/* The object is in the table, so its pool is not freed yet. */
	atomic_fetch_add(&p->refs, 1);
	pthread_mutex_unlock(&t->obj_lock);

	b = pool_bucket(p, &oid);
	if (b != held_bucket) {
		if (trylock) {
			if (pthread_mutex_trylock(&b->lock)) {
				tmem_pool_unref(p);
				return -EBUSY;
			}
		} else {
			pthread_mutex_lock(&b->lock);
		}
		locked = true;
	}
	/* o may have been freed meanwhile: find it again, by name and number. */
	o = obj_find(b, &oid);
	if (!o || o->objno != ref.objno || map_lookup(&o->map, ref.index) != expect)
		goto out;
	if (with) {
		uint64_t old;

		ret = map_set(&o->map, ref.index, with, &old, &delta);
		nodes_account(t, delta);
		o->nodes |= pampd_nodes(t, with);
		if (!ret)
			desc_account(p, expect, with);
		if (!ret && then)
			then(arg);
	} else {
		desc_account(p, expect, 0);
		map_delete(&o->map, ref.index, &delta);
		nodes_account(t, delta);
		POOL_PAGES_ADD(p, -1);
		CNT_INC(t->evicted_pages);
		if (then)
			then(arg); /* before the object (and its number) may go */
		obj_free_if_empty(b, o);
		ret = 0;
	}
out:
	if (locked)
		pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	return ret;
}

int tmem_pool_info(struct tmem *t, uint32_t id, struct tmem_pool_info *info)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);

	if (!p)
		return -ENOENT;
	info->id = id;
	info->flags = p->flags;
	info->objects = CNT_GET(p->objects);
	info->pages = CNT_GET(p->pages);
	info->remote = CNT_GET(p->remote);
	info->owner = atomic_load(&p->owner);
	info->weight = info->owner ? atomic_load(&t->owners[info->owner].weight) : 0;
	info->incomplete = atomic_load(&p->incomplete);
	tmem_pool_unref(p);
	return 0;
}
