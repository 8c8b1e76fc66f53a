/*
 * tmem.h - the tmem handle space: pools, objects and the coherency rules.
 *
 * A pool is ephemeral or persistent, private or shared; an object is named by
 * a 192-bit oid within its pool; a page by a 32-bit index within its object.
 * tmem keeps, for every stored page, one opaque non-zero 64-bit descriptor
 * ("pampd") that the data side (struct tmem_pamops, the local tier) makes and
 * frees. tmem enforces get-get and put-put-get coherency and the destructive
 * get of private ephemeral pools; it never looks at page bytes.
 *
 * Locking, in the one order every path takes them:
 *   1. a pool's bucket lock (one of TMEM_BUCKETS per pool, by oid hash);
 *   2. the object-table lock (objno -> object);
 *   3. the data side's own locks (zbud's mutex).
 * The pool table has its own lock, never held with any other; pools are
 * reference counted. A data-side callback that needs another handle's bucket
 * (eviction) must use tmem_replace() with trylock; the bucket the calling
 * thread already holds is recognised and not locked twice.
 */
#ifndef RAMSTER_TMEM_H
#define RAMSTER_TMEM_H

#include <stdbool.h>
#include <stdint.h>

#define TMEM_PAGE_SIZE 4096
#define TMEM_BUCKETS 256
#define TMEM_MAX_POOLS 65536

enum { TMEM_PERSISTENT = 1u << 0, TMEM_SHARED = 1u << 1 };

struct tmem_oid {
	uint64_t w[3];
};

/* Names a page from the data side: the object's node-wide number and the index. */
struct tmem_ref {
	uint32_t objno;
	uint32_t index;
};

/* The data side. Every callback is called with the handle's bucket lock held. */
struct tmem_pamops {
	/*
	 * Keep a copy of page for the handle named by ref. @return 0 with
	 * *pampd set (non-zero), or -errno to refuse (-E2BIG, -ENOSPC, ...).
	 */
	int (*create)(void *ctx, bool pers, const void *page, struct tmem_ref ref, uint64_t *pampd);
	/* Copy the page behind pampd into page. @return 0 or -errno (-EIO lost). */
	int (*get_data)(void *ctx, bool pers, uint64_t pampd, void *page);
	/* Release what pampd holds. */
	void (*free)(void *ctx, bool pers, uint64_t pampd);
};

struct tmem;

/* @return a handle space using ops/ctx for data, or NULL with errno set. */
struct tmem *tmem_create(const struct tmem_pamops *ops, void *ctx);

/* Destroy every pool (freeing their data) and the handle space. NULL ok. */
void tmem_destroy(struct tmem *t);

/* @return a new pool id (>= 0) with flags TMEM_PERSISTENT/TMEM_SHARED, or -errno. */
int tmem_pool_new(struct tmem *t, unsigned flags);

/* Flush every page of the pool and free it. @return 0 or -ENOENT. */
int tmem_pool_destroy(struct tmem *t, uint32_t pool);

/*
 * Put a page. A refused duplicate put flushes the old page (put-put-get).
 * @return 0 stored; -errno refused (-E2BIG, -ENOSPC, ...) or -ENOENT (no pool).
 */
int tmem_put(struct tmem *t, uint32_t pool, const struct tmem_oid *oid, uint32_t index,
	     const void *page);

/*
 * Get a page; destructive in a private ephemeral pool.
 * @return 0 filled; -ENOENT absent (or no pool); -EIO lost.
 */
int tmem_get(struct tmem *t, uint32_t pool, const struct tmem_oid *oid, uint32_t index,
	     void *page);

/* @return 0 flushed; -ENOENT nothing there. */
int tmem_flush_page(struct tmem *t, uint32_t pool, const struct tmem_oid *oid, uint32_t index);

/* @return 0 flushed; -ENOENT no such object. */
int tmem_flush_object(struct tmem *t, uint32_t pool, const struct tmem_oid *oid);

/*
 * For the data side (eviction, remotify): if the page named by ref still has
 * descriptor expect, give it descriptor with (0: remove the page; the caller
 * frees expect's data itself). trylock: fail with -EBUSY rather than wait for
 * the bucket (a bucket this thread holds is not waited for).
 * @return 0 done; -ENOENT the page changed or is gone; -EBUSY contended.
 */
int tmem_replace(struct tmem *t, struct tmem_ref ref, uint64_t expect, uint64_t with, bool trylock);

/* One pool, for listings. */
struct tmem_pool_info {
	uint32_t id;
	unsigned flags;
	uint64_t objects;
	uint64_t pages;
};

/* @return 0 with *info filled, or -ENOENT. */
int tmem_pool_info(struct tmem *t, uint32_t pool, struct tmem_pool_info *info);

/* Counters of the handle space. */
struct tmem_stats {
	uint64_t puts;           /* put calls */
	uint64_t puts_dup;       /* puts that replaced a page */
	uint64_t puts_failed;    /* puts refused by the data side */
	uint64_t dup_put_flushes;/* refused duplicate puts that flushed the old page */
	uint64_t gets;           /* get calls */
	uint64_t hits;           /* gets that filled the page */
	uint64_t misses;         /* gets that found nothing */
	uint64_t get_errors;     /* gets whose data was lost (-EIO) */
	uint64_t flushes;        /* flush-page calls */
	uint64_t flushed_pages;  /* pages removed by flush page/object/pool */
	uint64_t flush_objects;  /* flush-object calls */
	uint64_t pools_created;
	uint64_t pools_destroyed;
	uint64_t pools;          /* pools now */
	uint64_t objects;        /* objects now */
	uint64_t pages;          /* pages now (descriptors held) */
	uint64_t evicted_pages;  /* pages removed through tmem_replace */
	uint64_t meta_bytes;     /* RAM of pool, object and index bookkeeping now */
};
void tmem_get_stats(struct tmem *t, struct tmem_stats *s);

#endif /* RAMSTER_TMEM_H */
