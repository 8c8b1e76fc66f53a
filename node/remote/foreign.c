/*
 * foreign.c - the foreign store (foreign.h): pages held for peers.
 *
 * Three levels, each record owned by the one above: owner (fixed array by
 * node id) -> pool record (owner, incarnation, pool) -> object record (oid)
 * -> page. Pages and objects are also chained in hash tables for O(1)
 * lookup. A record exists only while it has a page below it, so the budget
 * charge of every record is bounded and flushes walk only what they remove.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "node/config.h"
#include "node/remote/arena.h"
#include "node/remote/foreign.h"

/* ---- tunables and charges --------------------------------------------- */

#define FOREIGN_PAGE_MAX 4160 /* a sealed page (node/remote/seal.h), opaque here */
#define FOREIGN_HTAB_MIN 64   /* buckets; a power of two */
_Static_assert(FOREIGN_PAGE_MAX < (1 << 15), "a page record keeps len in 15 bits");

/*
 * What the budget is charged. A page costs its bytes plus its header; each
 * hashed record (page, object) also pays for two bucket slots, since a
 * table holds between count / 2 and 2 * count buckets (grown above load 2,
 * shrunk below load 1/2). Object and pool records are charged while they exist so
 * that a peer cannot spend our memory on many one-byte objects. malloc's
 * own chunk headers are not counted.
 */
#define FOREIGN_SLOT_CHARGE (2 * sizeof(void *))
#define FOREIGN_OBJ_CHARGE  (sizeof(struct foreign_obj) + FOREIGN_SLOT_CHARGE)
#define FOREIGN_POOL_CHARGE (sizeof(struct foreign_pool))

/* ---- structures (lists: common/list.h, circular) ------------------------ */

/*
 * A hashed record's link. The hash is not kept in it: a page record is the
 * record the store holds most of (K+M of them a page under ec), and 8 bytes
 * of it are 1 % of the RAM a fragment costs. A table recomputes a node's hash
 * (hash_of) when it resizes or removes, a few multiplies.
 */
struct foreign_hnode {
	struct foreign_hnode *next; /* next in the bucket */
};

struct foreign_htab {
	struct foreign_hnode **b;
	size_t mask;  /* buckets - 1 */
	size_t count; /* nodes held */
	uint64_t (*hash_of)(const struct foreign_hnode *n);
};

struct foreign_pool {
	struct list_head owner_link; /* on owners[owner].pools */
	struct list_head objs;	     /* its objects, never empty while it exists */
	uint64_t incarnation;
	uint32_t owner;
	uint32_t pool;
};

struct foreign_obj {
	struct foreign_hnode hnode; /* in f->objs, by (owner, incarnation, pool, oid) */
	struct list_head pool_link; /* on pool->objs */
	struct list_head pages;	    /* its pages, never empty while it exists */
	struct foreign_pool *pool;
	uint64_t hash;		    /* hash_obj of its key; its pages' hashes derive from it */
	uint64_t oid[3];
};

struct foreign_page {
	struct foreign_hnode hnode; /* in f->pages, by the full key */
	struct list_head obj_link;  /* on obj->pages */
	struct foreign_obj *obj;
	uint32_t index;
	uint32_t checksum;
	uint16_t len : 15; /* <= FOREIGN_PAGE_MAX */
	uint16_t pers : 1;
	unsigned char data[]; /* len bytes, in the same allocation: the header is 42 bytes */
};

struct foreign_owner {
	struct list_head pools; /* its pool records, any incarnation */
	uint64_t pages;		/* pages held for it */
	struct arena *arena;	/* their memory; made with the first, freed after the last */
};

struct foreign {
	struct foreign_htab pages;
	struct foreign_htab objs;
	struct foreign_owner owners[CONFIG_NODES_MAX + 1]; /* by node id; [0] unused */
	uint64_t budget;
	uint64_t used;		/* bytes charged, see FOREIGN_*_CHARGE */
	uint64_t bytes;		/* page data held */
	uint64_t puts;		/* put calls with valid arguments */
	uint64_t gets;		/* get calls with valid arguments */
	uint64_t hits;		/* gets that found the page */
	uint64_t flushes;	/* pages removed by flush, flush_object, flush_pool */
	uint64_t refused_full;	/* puts refused with -ENOSPC */
	uint64_t dropped;	/* pages removed by drop_owner */
	uint64_t flushes_newer; /* flushes that kept a copy sealed after their horizon */
	struct arena_hooks hooks;
	void *hooks_arg;
};

static size_t foreign_page_charge(size_t len)
{
	return sizeof(struct foreign_page) + len + FOREIGN_SLOT_CHARGE;
}

/* ---- hash tables -------------------------------------------------------- */

static uint64_t hash_mix(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 29);
}

/* splitmix64's finalizer: every input bit reaches the low (bucket) bits */
static uint64_t hash_final(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

static uint64_t hash_obj(const struct foreign_key *k)
{
	uint64_t h = hash_mix(0, k->owner);

	h = hash_mix(h, k->incarnation);
	h = hash_mix(h, k->pool);
	h = hash_mix(h, k->oid[0]);
	h = hash_mix(h, k->oid[1]);
	h = hash_mix(h, k->oid[2]);
	return hash_final(h);
}

static uint64_t hash_page(uint64_t obj_hash, uint32_t index)
{
	return hash_final(hash_mix(obj_hash, index));
}

static uint64_t obj_hash_of(const struct foreign_hnode *n)
{
	return container_of(n, struct foreign_obj, hnode)->hash;
}

static uint64_t page_hash_of(const struct foreign_hnode *n)
{
	const struct foreign_page *p = container_of(n, struct foreign_page, hnode);

	return hash_page(p->obj->hash, p->index);
}

/* @return 0, -ENOMEM. */
static int htab_init(struct foreign_htab *t, uint64_t (*hash_of)(const struct foreign_hnode *))
{
	t->b = calloc(FOREIGN_HTAB_MIN, sizeof(*t->b));
	if (!t->b)
		return -ENOMEM;
	t->mask = FOREIGN_HTAB_MIN - 1;
	t->count = 0;
	t->hash_of = hash_of;
	return 0;
}

/* Move every node to a table of size buckets; on no memory keep the old one. */
static void htab_resize(struct foreign_htab *t, size_t size)
{
	struct foreign_hnode **nb, *n, *next;
	size_t i;

	nb = calloc(size, sizeof(*nb));
	if (!nb)
		return; /* a fuller table is slower, not wrong */
	for (i = 0; i <= t->mask; i++) {
		for (n = t->b[i]; n; n = next) {
			size_t j = t->hash_of(n) & (size - 1);

			next = n->next;
			n->next = nb[j];
			nb[j] = n;
		}
	}
	free(t->b);
	t->b = nb;
	t->mask = size - 1;
}

static struct foreign_hnode *htab_first(const struct foreign_htab *t, uint64_t hash)
{
	return t->b[hash & t->mask];
}

static void htab_insert(struct foreign_htab *t, struct foreign_hnode *n, uint64_t hash)
{
	struct foreign_hnode **head;

	head = &t->b[hash & t->mask];
	n->next = *head;
	*head = n;
	if (++t->count > 2 * (t->mask + 1))
		htab_resize(t, (t->mask + 1) * 2);
}

/* n must be in t. */
static void htab_remove(struct foreign_htab *t, struct foreign_hnode *n)
{
	struct foreign_hnode **pp = &t->b[t->hash_of(n) & t->mask];

	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	n->next = NULL;
	if (--t->count < (t->mask + 1) / 2 && t->mask + 1 > FOREIGN_HTAB_MIN)
		htab_resize(t, (t->mask + 1) / 2);
}

/* ---- records ------------------------------------------------------------ */

static bool owner_valid(uint32_t owner)
{
	return owner >= 1 && owner <= CONFIG_NODES_MAX;
}

static struct foreign_pool *pool_find(struct foreign *f, uint32_t owner, uint64_t incarnation,
				      uint32_t pool)
{
	struct list_head *h = &f->owners[owner].pools, *l;
	struct foreign_pool *p;

	for (l = h->next; l != h; l = l->next) {
		p = container_of(l, struct foreign_pool, owner_link);
		if (p->incarnation == incarnation && p->pool == pool)
			return p;
	}
	return NULL;
}

static bool obj_match(const struct foreign_obj *o, const struct foreign_key *k)
{
	return o->oid[0] == k->oid[0] && o->oid[1] == k->oid[1] && o->oid[2] == k->oid[2] &&
	       o->pool->pool == k->pool && o->pool->incarnation == k->incarnation &&
	       o->pool->owner == k->owner;
}

static struct foreign_obj *obj_find(struct foreign *f, const struct foreign_key *k, uint64_t hash)
{
	struct foreign_hnode *n;
	struct foreign_obj *o;

	for (n = htab_first(&f->objs, hash); n; n = n->next) {
		o = container_of(n, struct foreign_obj, hnode);
		if (o->hash == hash && obj_match(o, k))
			return o;
	}
	return NULL;
}

static struct foreign_page *page_find(struct foreign *f, const struct foreign_key *k, uint64_t hash)
{
	struct foreign_hnode *n;
	struct foreign_page *p;

	for (n = htab_first(&f->pages, hash); n; n = n->next) {
		p = container_of(n, struct foreign_page, hnode);
		if (p->index == k->index && obj_match(p->obj, k))
			return p;
	}
	return NULL;
}

/* Unhash and free p; its object may be left empty (the caller's business). */
static void page_free(struct foreign *f, struct foreign_page *p)
{
	struct foreign_owner *ow = &f->owners[p->obj->pool->owner];

	htab_remove(&f->pages, &p->hnode);
	list_del(&p->obj_link);
	ow->pages--;
	f->bytes -= p->len;
	f->used -= foreign_page_charge(p->len);
	arena_free(ow->arena, p, offsetof(struct foreign_page, data) + p->len);
}

/* The owner has no page left: its memory goes (its chunks withdrawn first). */
static void owner_trim(struct foreign *f, uint32_t owner)
{
	struct foreign_owner *ow = &f->owners[owner];

	if (ow->pages || !ow->arena)
		return;
	arena_destroy(ow->arena);
	ow->arena = NULL;
}

/* Free an empty pool record. */
static void pool_free(struct foreign *f, struct foreign_pool *pool)
{
	list_del(&pool->owner_link);
	f->used -= FOREIGN_POOL_CHARGE;
	free(pool);
}

/* Free every page of o and o itself; its pool record may be left empty. @return pages. */
static uint64_t obj_drain(struct foreign *f, struct foreign_obj *o)
{
	uint64_t n = 0;

	while (!list_empty(&o->pages)) {
		page_free(f, container_of(o->pages.next, struct foreign_page, obj_link));
		n++;
	}
	htab_remove(&f->objs, &o->hnode);
	list_del(&o->pool_link);
	f->used -= FOREIGN_OBJ_CHARGE;
	free(o);
	return n;
}

/* Free every page of pool and every record below it, pool included. @return pages. */
static uint64_t pool_drain(struct foreign *f, struct foreign_pool *pool)
{
	uint64_t n = 0;

	while (!list_empty(&pool->objs))
		n += obj_drain(f, container_of(pool->objs.next, struct foreign_obj, pool_link));
	pool_free(f, pool);
	return n;
}

/* Remove one page and whatever records it leaves empty. */
static void page_remove(struct foreign *f, struct foreign_page *p)
{
	struct foreign_obj *o = p->obj;
	struct foreign_pool *pool = o->pool;

	uint32_t owner = pool->owner;

	page_free(f, p);
	if (list_empty(&o->pages)) {
		obj_drain(f, o);
		if (list_empty(&pool->objs))
			pool_free(f, pool);
	}
	owner_trim(f, owner);
}

/* ---- store and load ----------------------------------------------------- */

struct foreign *foreign_create(uint64_t budget)
{
	struct foreign *f;
	uint32_t i;

	f = calloc(1, sizeof(*f));
	if (!f)
		goto fail;
	if (htab_init(&f->pages, page_hash_of))
		goto free_f;
	if (htab_init(&f->objs, obj_hash_of))
		goto free_pages;
	for (i = 0; i <= CONFIG_NODES_MAX; i++)
		list_init(&f->owners[i].pools);
	f->budget = budget;
	return f;

free_pages:
	free(f->pages.b);
free_f:
	free(f);
fail:
	return NULL;
}

void foreign_destroy(struct foreign *f)
{
	struct list_head *h;
	uint32_t i;

	if (!f)
		return;
	for (i = 1; i <= CONFIG_NODES_MAX; i++) {
		h = &f->owners[i].pools;
		while (!list_empty(h))
			pool_drain(f, container_of(h->next, struct foreign_pool, owner_link));
		owner_trim(f, i);
	}
	free(f->objs.b);
	free(f->pages.b);
	free(f);
}

void foreign_set_budget(struct foreign *f, uint64_t budget)
{
	f->budget = budget;
}

void foreign_set_hooks(struct foreign *f, const struct arena_hooks *hooks, void *arg)
{
	f->hooks = *hooks;
	f->hooks_arg = arg;
}

void foreign_foreach_chunk(const struct foreign *f, uint32_t owner,
			   void (*fn)(void *arg, void *base, size_t len), void *arg)
{
	if (owner_valid(owner))
		arena_foreach_chunk(f->owners[owner].arena, fn, arg);
}

int foreign_put(struct foreign *f, const struct foreign_key *k, bool pers, const void *data,
		size_t len, uint32_t checksum)
{
	return foreign_put_at(f, k, pers, data, len, checksum, NULL);
}

int foreign_put_at(struct foreign *f, const struct foreign_key *k, bool pers, const void *data,
		   size_t len, uint32_t checksum, const void **stored)
{
	struct foreign_pool *pool = NULL, *new_pool = NULL;
	struct foreign_obj *o;
	struct foreign_page *p, *old;
	struct foreign_owner *ow;
	uint64_t ohash, phash, need;

	if (!owner_valid(k->owner) || len < 1 || len > FOREIGN_PAGE_MAX || !data)
		return -EINVAL;
	f->puts++;
	ohash = hash_obj(k);
	phash = hash_page(ohash, k->index);

	/*
	 * Replacing costs what removing then adding costs, records included, so
	 * remove first: whatever happens next, the old copy is never served again.
	 */
	old = page_find(f, k, phash);
	if (old)
		page_remove(f, old);

	need = foreign_page_charge(len);
	o = obj_find(f, k, ohash);
	if (!o) {
		need += FOREIGN_OBJ_CHARGE;
		pool = pool_find(f, k->owner, k->incarnation, k->pool);
		if (!pool)
			need += FOREIGN_POOL_CHARGE;
	}
	if (f->used + need > f->budget) {
		f->refused_full++;
		return -ENOSPC;
	}

	ow = &f->owners[k->owner];
	if (!ow->arena)
		ow->arena = arena_create(&f->hooks, f->hooks_arg, k->owner);
	p = arena_alloc(ow->arena, offsetof(struct foreign_page, data) + len);
	if (!p)
		goto nomem;
	if (!o) {
		if (!pool) {
			new_pool = malloc(sizeof(*new_pool));
			if (!new_pool)
				goto free_page;
			list_init(&new_pool->objs);
			new_pool->owner = k->owner;
			new_pool->incarnation = k->incarnation;
			new_pool->pool = k->pool;
			pool = new_pool;
		}
		o = malloc(sizeof(*o));
		if (!o)
			goto free_pool;
		list_init(&o->pages);
		o->pool = pool;
		o->hash = ohash;
		memcpy(o->oid, k->oid, sizeof(o->oid));
		if (new_pool)
			list_add_tail(&f->owners[k->owner].pools, &new_pool->owner_link);
		list_add_tail(&pool->objs, &o->pool_link);
		htab_insert(&f->objs, &o->hnode, ohash);
	}

	p->obj = o;
	p->index = k->index;
	p->checksum = checksum;
	p->len = len & 0x7fff;
	p->pers = pers;
	memcpy(p->data, data, len);
	list_add_tail(&o->pages, &p->obj_link);
	htab_insert(&f->pages, &p->hnode, phash);
	ow->pages++;
	f->bytes += len;
	f->used += need;
	if (stored)
		*stored = p->data;
	return 0;

free_pool:
	free(new_pool);
free_page:
	arena_free(ow->arena, p, offsetof(struct foreign_page, data) + len);
nomem:
	owner_trim(f, k->owner);
	return -ENOMEM;
}

int foreign_peek(struct foreign *f, const struct foreign_key *k, const void **data, size_t *len,
		 uint32_t *checksum, bool *pers)
{
	struct foreign_page *p;

	if (!owner_valid(k->owner))
		return -EINVAL;
	p = page_find(f, k, hash_page(hash_obj(k), k->index));
	if (!p)
		return -ENOENT;
	*data = p->data;
	*len = p->len;
	*checksum = p->checksum;
	*pers = p->pers;
	return 0;
}

int foreign_get(struct foreign *f, const struct foreign_key *k, const void **data, size_t *len,
		uint32_t *checksum)
{
	struct foreign_page *p;

	if (!owner_valid(k->owner))
		return -EINVAL;
	f->gets++;
	p = page_find(f, k, hash_page(hash_obj(k), k->index));
	if (!p)
		return -ENOENT;
	f->hits++;
	*data = p->data;
	*len = p->len;
	*checksum = p->checksum;
	return 0;
}

/* ---- flushes ------------------------------------------------------------ */

int foreign_flush(struct foreign *f, const struct foreign_key *k)
{
	return foreign_flush_upto(f, k, 0);
}

/*
 * Was the stored copy put after a flush issued at horizon (the owner's last
 * seal version then)? The owner says the copy's version in the put's checksum
 * field (its low 32 bits, never 0: seal.c), compared as serial numbers (the
 * two are far less than 2^31 seals apart); an owner that did not say (0)
 * sent a whole sealed copy, which starts with its version. A fragment of an
 * erasure-coded page does not, which is why the owner says it.
 */
static bool page_newer(const struct foreign_page *p, uint64_t horizon)
{
	uint64_t v = 0;
	unsigned i;

	if (p->checksum)
		return (int32_t)(p->checksum - (uint32_t)horizon) > 0;
	if (p->len < 8)
		return false; /* too short to be sealed */
	for (i = 0; i < 8; i++)
		v |= (uint64_t)p->data[i] << (8 * i);
	return v > horizon;
}

int foreign_flush_upto(struct foreign *f, const struct foreign_key *k, uint64_t horizon)
{
	struct foreign_page *p;

	if (!owner_valid(k->owner))
		return -EINVAL;
	p = page_find(f, k, hash_page(hash_obj(k), k->index));
	if (!p)
		return -ENOENT;
	if (horizon && page_newer(p, horizon)) {
		f->flushes_newer++;
		return -ESTALE;
	}
	page_remove(f, p);
	f->flushes++;
	return 0;
}

uint64_t foreign_flush_object(struct foreign *f, const struct foreign_key *k)
{
	struct foreign_pool *pool;
	struct foreign_obj *o;
	uint64_t n;

	if (!owner_valid(k->owner))
		return 0;
	o = obj_find(f, k, hash_obj(k));
	if (!o)
		return 0;
	pool = o->pool;
	n = obj_drain(f, o);
	if (list_empty(&pool->objs))
		pool_free(f, pool);
	owner_trim(f, k->owner);
	f->flushes += n;
	return n;
}

uint64_t foreign_flush_pool(struct foreign *f, uint32_t owner, uint64_t incarnation, uint32_t pool)
{
	struct foreign_pool *p;
	uint64_t n;

	if (!owner_valid(owner))
		return 0;
	p = pool_find(f, owner, incarnation, pool);
	if (!p)
		return 0;
	n = pool_drain(f, p);
	owner_trim(f, owner);
	f->flushes += n;
	return n;
}

uint64_t foreign_drop_owner(struct foreign *f, uint32_t owner, uint64_t keep)
{
	struct list_head *h, *l, *next;
	struct foreign_pool *p;
	uint64_t n = 0;

	if (!owner_valid(owner))
		return 0;
	h = &f->owners[owner].pools;
	for (l = h->next; l != h; l = next) {
		next = l->next;
		p = container_of(l, struct foreign_pool, owner_link);
		if (keep == 0 || p->incarnation != keep)
			n += pool_drain(f, p);
	}
	owner_trim(f, owner);
	f->dropped += n;
	return n;
}

static bool walk_owner(struct foreign *f, uint32_t owner, bool evac_only,
		       bool (*fn)(void *arg, const struct foreign_key *k, bool pers,
				  const void *data, size_t len, uint32_t checksum),
		       void *arg)
{
	struct arena *ar = f->owners[owner].arena;
	struct list_head *ph, *pl;

	ph = &f->owners[owner].pools;
	for (pl = ph->next; pl != ph; pl = pl->next) {
		struct foreign_pool *p = container_of(pl, struct foreign_pool, owner_link);
		struct list_head *l;

		for (l = p->objs.next; l != &p->objs; l = l->next) {
			struct foreign_obj *o = container_of(l, struct foreign_obj, pool_link);
			struct list_head *gl;

			for (gl = o->pages.next; gl != &o->pages; gl = gl->next) {
				struct foreign_page *g =
				    container_of(gl, struct foreign_page, obj_link);
				struct foreign_key k = {owner,
							p->incarnation,
							p->pool,
							{o->oid[0], o->oid[1], o->oid[2]},
							g->index};

				if (evac_only && !arena_evacuating(ar, g))
					continue;
				if (fn(arg, &k, g->pers, g->data, g->len, g->checksum))
					return true;
			}
		}
	}
	return false;
}

bool foreign_walk_owner(struct foreign *f, uint32_t owner,
			bool (*fn)(void *arg, const struct foreign_key *k, bool pers,
				   const void *data, size_t len, uint32_t checksum),
			void *arg)
{
	return owner_valid(owner) && walk_owner(f, owner, false, fn, arg);
}

bool foreign_walk_evacuating(struct foreign *f, uint32_t owner,
			     bool (*fn)(void *arg, const struct foreign_key *k, bool pers,
					const void *data, size_t len, uint32_t checksum),
			     void *arg)
{
	return owner_valid(owner) && arena_evac_chunks(f->owners[owner].arena) &&
	       walk_owner(f, owner, true, fn, arg);
}

uint64_t foreign_evacuate(struct foreign *f, uint32_t owner, uint64_t bytes)
{
	if (!owner_valid(owner) || !f->owners[owner].arena)
		return 0;
	return arena_evacuate(f->owners[owner].arena, bytes);
}

size_t foreign_evac_chunks(const struct foreign *f, uint64_t *live)
{
	size_t n = 0;

	*live = 0;
	for (uint32_t o = 1; o <= CONFIG_NODES_MAX; o++) {
		n += arena_evac_chunks(f->owners[o].arena);
		*live += arena_evac_live(f->owners[o].arena);
	}
	return n;
}

bool foreign_walk(struct foreign *f,
		  bool (*fn)(void *arg, const struct foreign_key *k, bool pers, const void *data,
			     size_t len, uint32_t checksum),
		  void *arg)
{
	uint32_t owner;

	for (owner = 1; owner <= CONFIG_NODES_MAX; owner++)
		if (foreign_walk_owner(f, owner, fn, arg))
			return true;
	return false;
}

/* ---- stats -------------------------------------------------------------- */

/*
 * What the store holds in RAM: every owner's arena chunks (page data, the page
 * records beside it, the 16-byte class rounding, freed blocks kept for reuse
 * and chunk tails), the two hash tables, and the object and pool records.
 */
static uint64_t foreign_ram(const struct foreign *f)
{
	uint64_t ram = sizeof(*f), pools = 0;
	const struct list_head *h, *l;
	size_t i;

	for (i = 1; i <= CONFIG_NODES_MAX; i++) {
		if (f->owners[i].arena)
			ram += arena_chunks(f->owners[i].arena) *
			       (uint64_t)(ARENA_CHUNK + sizeof(void *));
		h = &f->owners[i].pools;
		for (l = h->next; l && l != h; l = l->next)
			pools++;
	}
	ram += (f->pages.mask + 1 + f->objs.mask + 1) * sizeof(struct foreign_hnode *);
	ram += f->objs.count * sizeof(struct foreign_obj) + pools * sizeof(struct foreign_pool);
	return ram;
}

void foreign_get_stats(const struct foreign *f, struct foreign_stats *s)
{
	s->pages = f->pages.count;
	s->bytes = f->bytes;
	s->used = f->used;
	s->budget = f->budget;
	s->puts = f->puts;
	s->gets = f->gets;
	s->hits = f->hits;
	s->flushes = f->flushes;
	s->refused_full = f->refused_full;
	s->dropped = f->dropped;
	s->flushes_newer = f->flushes_newer;
	s->ram = foreign_ram(f);
}

uint64_t foreign_owner_pages(const struct foreign *f, uint32_t owner)
{
	return owner_valid(owner) ? f->owners[owner].pages : 0;
}
