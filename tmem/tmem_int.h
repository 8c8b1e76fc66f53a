/*
 * tmem_int.h - the handle space's structures, shared by tmem/tmem.c (pools,
 * objects, maps, the coherency rules) and tmem/tmem_owner.c (owners' shares
 * and the counters). Nothing outside tmem/ includes it.
 */
#ifndef RAMSTER_TMEM_INT_H
#define RAMSTER_TMEM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tmem/map.h"
#include "tmem/tmem.h"

/* ---- structures ---------------------------------------------------------- */

struct tmem_obj {
	struct tmem_obj *next; /* bucket chain */
	struct tmem_oid oid;
	uint32_t objno; /* index in the object table */
	uint32_t pin;	/* puts in progress: not freed while > 0 */
	uint64_t nodes; /* nodes its pages have named (ops->nodes), ever */
	struct tmem_map map;
	struct tmem_pool *pool;
};

struct tmem_bucket {
	pthread_mutex_t lock;
	struct tmem_obj **tab; /* chained hash of objects; NULL when empty */
	uint32_t mask;	       /* size - 1 */
	uint32_t n;	       /* objects */
};

struct tmem_pool {
	uint32_t id;
	unsigned flags;
	atomic_int refs;  /* the table's, plus one per call in progress */
	atomic_bool dead; /* destroyed: no new pages */
	atomic_uint_fast64_t objects;
	atomic_uint_fast64_t pages;
	atomic_uint_fast64_t remote; /* of pages, remote descriptors (ops->is_remote) */
	atomic_uint owner;	     /* tmem_pool_set_owner: whose pages these are (0: nobody) */
	atomic_bool incomplete;	     /* tmem_pool_set_incomplete: a miss is -EIO */
	uint64_t *nonlocal;	     /* its crash-table count; NULL: none, or ephemeral */
	struct tmem *t;
	struct tmem_bucket bucket[TMEM_BUCKETS];
};

/* A free object-table slot holds (next free << 1) | 1. */
#define OBJTAB_FREE(next) ((uintptr_t)(next) << 1 | 1u)
#define OBJTAB_IS_FREE(e) ((uintptr_t)(e)&1u)
#define OBJTAB_NEXT(e)	  ((uint32_t)((uintptr_t)(e) >> 1))
#define OBJTAB_NONE	  UINT32_MAX

struct tmem {
	const struct tmem_pamops *ops;
	void *ctx;

	pthread_mutex_t pool_lock; /* the pool table; held with no other lock */
	struct tmem_pool **pools;  /* TMEM_MAX_POOLS slots */
	uint32_t pool_hint;

	pthread_mutex_t obj_lock; /* the object table */
	uintptr_t *objtab;	  /* struct tmem_obj * or a free-list link */
	uint32_t objtab_size;
	uint32_t objtab_free; /* head of the free list, or OBJTAB_NONE */

	/* counters (relaxed atomics: each is exact, the set is not a snapshot) */
	atomic_uint_fast64_t puts, puts_dup, puts_failed, dup_put_flushes;
	atomic_uint_fast64_t gets, hits, misses, get_errors;
	atomic_uint_fast64_t flushes, flushed_pages, flush_objects;
	atomic_uint_fast64_t pools_created, pools_destroyed, pools_now;
	atomic_uint_fast64_t objects, pages, evicted_pages, remote_gets;
	atomic_int_fast64_t map_nodes, bucket_bytes;

	/* crash survival: the table (NULL: none; set before any pool) and its counters */
	struct tmem_crashtab *crash;
	uint32_t crash_objs; /* its objs_max */
	atomic_uint_fast64_t crash_untracked, gets_incomplete;

	/* owners (tmem_pool_set_owner): pages charged to each, and weights */
	struct {
		atomic_uint_fast64_t pages;
		atomic_uint_fast64_t remote; /* of pages, remote ones */
		atomic_uint weight;
	} owners[TMEM_OWNERS_MAX];
	atomic_uint owners_top; /* owner ids in use are below this */
};

#define CNT_ADD(c, v) atomic_fetch_add_explicit(&(c), (v), memory_order_relaxed)
#define CNT_SUB(c, v) atomic_fetch_sub_explicit(&(c), (v), memory_order_relaxed)
#define CNT_INC(c)    CNT_ADD(c, 1)
#define CNT_DEC(c)    CNT_SUB(c, 1)
#define CNT_GET(c)    atomic_load_explicit(&(c), memory_order_relaxed)

/* A reference to pool id (NULL: none), and its release (the last one frees it). */
struct tmem_pool *tmem_pool_ref(struct tmem *t, uint32_t id);
void tmem_pool_unref(struct tmem_pool *p);

/* ---- hashing (tmem.c and tmem_walk.c) ------------------------------------------------------------- */

static inline uint64_t oid_hash(const struct tmem_oid *oid)
{
	uint64_t h = oid->w[0] * 0x9e3779b97f4a7c15ull;

	h ^= (oid->w[1] + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
	h ^= (oid->w[2] + 0x94d049bb133111ebull) * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 31;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return h;
}

static inline bool oid_eq(const struct tmem_oid *a, const struct tmem_oid *b)
{
	return a->w[0] == b->w[0] && a->w[1] == b->w[1] && a->w[2] == b->w[2];
}

static inline struct tmem_bucket *pool_bucket(struct tmem_pool *p, const struct tmem_oid *oid)
{
	return &p->bucket[oid_hash(oid) % TMEM_BUCKETS];
}

/* Caller holds b->lock. */
static inline struct tmem_obj *obj_find(struct tmem_bucket *b, const struct tmem_oid *oid)
{
	struct tmem_obj *o;

	if (!b->tab)
		return NULL;
	for (o = b->tab[oid_hash(oid) & b->mask]; o; o = o->next)
		if (oid_eq(&o->oid, oid))
			return o;
	return NULL;
}

#endif /* RAMSTER_TMEM_INT_H */
