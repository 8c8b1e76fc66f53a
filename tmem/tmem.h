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
 *   3. the data side's own locks (the allocator's mutex: zdense or zbud; the replica table's mutex;
 *      the stripe table's, through zcache's stripe ops; never two at once).
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

/*
 * Pool flags. TMEM_KEEP_ALL (with TMEM_PERSISTENT; the NBD exports' pools):
 * the data side keeps every page it has room for, a page that does not
 * compress stored raw, rather than refusing it as poorly compressible.
 */
enum { TMEM_PERSISTENT = 1u << 0, TMEM_SHARED = 1u << 1, TMEM_KEEP_ALL = 1u << 2 };

struct tmem_oid {
	uint64_t w[3];
};

/* Names a page from the data side: the object's node-wide number and the index. */
struct tmem_ref {
	uint32_t objno;
	uint32_t index;
};

/* Names a page by its handle: node-wide pool id, oid, index. */
struct tmem_handle {
	uint32_t pool;
	struct tmem_oid oid;
	uint32_t index;
};

/* The data side. Every callback is called with the handle's bucket lock held. */
struct tmem_pamops {
	/*
	 * Keep a copy of page for the handle named by ref, in a pool of these
	 * flags (TMEM_PERSISTENT, TMEM_KEEP_ALL, ...). @return 0 with *pampd
	 * set (non-zero), or -errno to refuse (-E2BIG, -ENOSPC, ...).
	 */
	int (*create)(void *ctx, unsigned flags, const void *page, struct tmem_ref ref,
		      uint64_t *pampd);
	/*
	 * Copy the page behind pampd into page. @return 0 or -errno (-EIO lost);
	 * -EREMOTE when the page lives elsewhere (see tmem_get_ex).
	 */
	int (*get_data)(void *ctx, bool pers, uint64_t pampd, void *page);
	/*
	 * Release what pampd holds for handle h. bulk: the whole object or pool
	 * goes, and flush_object / flush_pool follow for the nodes it named.
	 */
	void (*free)(void *ctx, bool pers, uint64_t pampd, const struct tmem_handle *h, bool bulk);
	/* Optional: the set of nodes (bit n-1 for node n) a descriptor involves. */
	uint64_t (*nodes)(void *ctx, uint64_t pampd);
	/*
	 * Optional: whether a descriptor is a page whose copy lives elsewhere
	 * (a remote page); from its bits alone, no lock. Feeds the pools' and
	 * owners' remote counts (tmem_pool_info, tmem_owner_remote).
	 */
	bool (*is_remote)(uint64_t pampd);
	/*
	 * Optional: whether a descriptor's page bytes are in a slot of the
	 * local tier; from its bits alone, no lock. Feeds the crash table's
	 * nonlocal counts (tmem_set_crashtab): without it nothing counts.
	 */
	bool (*in_tier)(uint64_t pampd);
	/* Optional: after the bulk frees of an object whose pages named nodes (non-zero). */
	void (*flush_object)(void *ctx, bool pers, const struct tmem_handle *h, uint64_t nodes);
	/* Optional: after the bulk frees of a destroyed pool whose pages named nodes (non-zero). */
	void (*flush_pool)(void *ctx, bool pers, uint32_t pool, uint64_t nodes);
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

/*
 * tmem_get for callers that can wait: when the page lives elsewhere, @return
 * -EREMOTE with *pampd set and nothing changed (no destructive get, no hit or
 * miss counted): the caller fetches it and finishes with tmem_update and
 * tmem_note_get. With pampd NULL, -EREMOTE is returned the same way.
 */
int tmem_get_ex(struct tmem *t, uint32_t pool, const struct tmem_oid *oid, uint32_t index,
		void *page, uint64_t *pampd);

/* Count the outcome of a get finished outside tmem_get (0, -ENOENT, -EIO). */
void tmem_note_get(struct tmem *t, int result);

/*
 * Run fn under the handle's bucket lock with the page's descriptor (0 when
 * absent; ref.objno is then UINT32_MAX). fn may set *pampd: to a new non-zero
 * value (replacing a present page; the old one is NOT freed: fn owns that),
 * or to 0 (removing it, again without free). fn runs as the data side does:
 * it may evict through tmem_replace. @return fn's result, or -ENOENT when
 * there is no such pool.
 */
int tmem_update(struct tmem *t, const struct tmem_handle *h,
		int (*fn)(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd), void *arg);

/*
 * Name the page behind ref: its handle and its pool's flags.
 * @return 0, or -ENOENT when the object is gone.
 */
int tmem_ref_resolve(struct tmem *t, struct tmem_ref ref, struct tmem_handle *h, unsigned *flags);

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

/*
 * The same, calling then(arg) under the bucket lock when it succeeds: the
 * caller frees expect's data there, so that no instant exists at which the
 * descriptor is with and expect's slot is still live (a crash's loader
 * would find a slot whose object may be freed and its number reused).
 */
int tmem_replace_then(struct tmem *t, struct tmem_ref ref, uint64_t expect, uint64_t with,
		      bool trylock, void (*then)(void *arg), void *arg);

/* One pool, for listings. */
struct tmem_pool_info {
	uint32_t id;
	unsigned flags;
	uint64_t objects;
	uint64_t pages;
	uint64_t remote;  /* of those, pages whose copy is elsewhere (ops->is_remote) */
	unsigned owner;   /* tmem_pool_set_owner (0: nobody) */
	unsigned weight;  /* the owner's weight (0: no owner) */
	bool incomplete;  /* tmem_pool_set_incomplete (not in flags: those are the pool's make) */
};

/* @return 0 with *info filled, or -ENOENT. */
int tmem_pool_info(struct tmem *t, uint32_t pool, struct tmem_pool_info *info);

/*
 * Snapshots (tmem/snapshot.c). A pool of flags at a given id: @return id,
 * -EEXIST when taken, -EINVAL.
 */
int tmem_pool_new_at(struct tmem *t, uint32_t id, unsigned flags);

/*
 * A put whose descriptor the caller makes: make(arg, pool flags, NULL, ref,
 * &pampd) is called with the bucket lock held, as the data side's create.
 * @return as tmem_put.
 */
int tmem_put_desc(struct tmem *t, uint32_t id, const struct tmem_oid *oid, uint32_t index,
		  int (*make)(void *arg, unsigned flags, const void *page, struct tmem_ref ref,
			      uint64_t *pampd),
		  void *arg);

/*
 * A walk in steps, while the space is in use: each call visits the pages of
 * at most max_slots object-table slots from *cursor on (page_fn with that
 * bucket's lock held: it must not call tmem; a non-zero return stops the
 * step after the slot) and moves the cursor past them. Objects added or
 * moved meanwhile may be seen twice or not at all: for background work
 * (bringing pages home), not for a snapshot. @return 1 when the cursor came
 * back to the start (a whole pass), else 0.
 */
struct tmem_cursor {
	uint32_t pool, bucket, slot;
};
int tmem_scan(struct tmem *t, struct tmem_cursor *cursor, unsigned max_slots,
	      int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd),
	      void *arg);

/*
 * The pages of one object (page_fn with its bucket's lock held: it must not
 * call tmem; a non-zero return stops the walk). @return 1 when stopped, 0
 * after the last page, -ENOENT (no such pool or object).
 */
int tmem_scan_object(struct tmem *t, uint32_t pool, const struct tmem_oid *oid,
		     int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers,
				    uint64_t pampd),
		     void *arg);

/*
 * Every pool (pool_fn, in id order; may be NULL) and every page of it
 * (page_fn, with that page's bucket lock held: it must not call tmem). A
 * non-zero return stops the walk and is returned. Nothing may change the
 * space meanwhile (a planned stop: every frontend and thread quiet).
 */
int tmem_walk(struct tmem *t, int (*pool_fn)(void *arg, const struct tmem_pool_info *info),
	      int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd),
	      void *arg);

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
	uint64_t remote_gets;    /* gets that found the page elsewhere (-EREMOTE) */
	uint64_t meta_bytes;     /* RAM of pool, object and index bookkeeping now */
};
void tmem_get_stats(struct tmem *t, struct tmem_stats *s);

/*
 * The bookkeeping that grows with use (pools, objects, index nodes, bucket
 * tables), from relaxed counters without a lock: what the tier charges to
 * its budget (zcache). Bytes.
 */
uint64_t tmem_meta_estimate(struct tmem *t);

/*
 * Owners and weights (issue 14): a pool may be charged to an owner
 * (1..TMEM_OWNERS_MAX-1; the node gives one per uid) with a weight. Owners
 * holding pages share the space by weight; eviction of ephemeral pages
 * (zcache) prefers an owner over its share among the least recently used
 * frames. Set once, on an empty pool: @return 0, -EINVAL (bad owner or
 * weight 0), -ENOENT (no pool), -EBUSY (has pages or an owner already).
 * The weight is the owner's (the latest set wins).
 */
#define TMEM_OWNERS_MAX 1024
int tmem_pool_set_owner(struct tmem *t, uint32_t pool, unsigned owner, unsigned weight);

/* A new weight for the owner (a reload): @return 0 or -EINVAL. */
int tmem_owner_set_weight(struct tmem *t, unsigned owner, unsigned weight);

/* Pages (every kind, local and remote descriptors) in the owner's pools. */
uint64_t tmem_owner_pages(struct tmem *t, unsigned owner);
/* Of those, the remote ones (ops->is_remote). */
uint64_t tmem_owner_remote(struct tmem *t, unsigned owner);

/*
 * Whether the page behind ref belongs to an owner holding more than its
 * weighted share of the pages of all owners holding pages. Takes the
 * object-table lock (order 2). false for an unowned pool or a stale ref.
 */
bool tmem_ref_over_share(struct tmem *t, struct tmem_ref ref);

/* Whether any owner holds more than its weighted share now. */
bool tmem_any_over_share(struct tmem *t);

/*
 * Crash survival (tmem/crashtab.h). Give tmem a crash table to keep up to
 * date: an entry per object number (below its objs_max) and a per-pool count
 * of persistent pages not in the tier (ops->in_tier). ct is the caller's
 * (a tmpfs mapping, made by tmem_crashtab_init over zeroed memory) and must
 * outlive t. Once, after tmem_create and before any pool exists.
 * @return 0; -EINVAL (NULL, or the header does not check out); -EBUSY (a
 * table is set already, or a pool exists).
 */
struct tmem_crashtab;
int tmem_set_crashtab(struct tmem *t, struct tmem_crashtab *ct);

/*
 * A persistent pool restored after a crash without some of its pages: a get
 * that finds nothing answers -EIO (counted in get_errors and gets_incomplete),
 * never -ENOENT, since the page may have been put and lost. Puts work as ever.
 * For the life of the pool. @return 0, -ENOENT (no pool), -EINVAL (ephemeral).
 */
int tmem_pool_set_incomplete(struct tmem *t, uint32_t pool);

/* Counters of crash survival (kept apart from tmem_stats: tmem_owner.c fills those). */
struct tmem_crash_stats {
	uint64_t untracked_objects; /* objects numbered past the table's objs_max: not recorded */
	uint64_t gets_incomplete;   /* of get_errors, misses in an incomplete pool (-EIO) */
};
void tmem_get_crash_stats(struct tmem *t, struct tmem_crash_stats *s);

#endif /* RAMSTER_TMEM_H */
