/*
 * region_int.h - what the files of far memory regions share (docs/far-memory.md):
 * the tunables, a page's state byte, the region, slot and space structs, and
 * the calls one file makes into another. region.c holds the regions and their
 * edits and the public API, region_fault.c the space and its fault thread,
 * region_evict.c the resident budget and eviction, region_evictor.c the
 * background evictor thread, region_zcache.c the compressed cache,
 * region_fork.c fork.
 * Nothing here is exported (lib/ramster.map keeps rg_* local).
 *
 * A space (struct rg_space) is one userfaultfd, one fault thread, one
 * connection and one private persistent pool, and a resident budget of
 * nslots pages shared by its regions. Every page of a region has a state byte
 * (PG_*) and, while resident, a slot.
 *
 * Lock rule: s->lock guards everything of a space but its connection; the
 * fault thread holds it while it serves a fault (network round trips
 * included). Whoever holds it must never touch region memory (the fault
 * would wait for the lock): the threads read pages only for puts, and those
 * are present. s->io guards the connection: taken with s->lock held, or
 * (the evictor's put of a batch) alone; never take s->lock holding s->io.
 * Order: s->lock, then s->io.
 *
 * Invariants: PG_PRESENT <=> the page has a slot (or SLOT_NONE while fork
 * holds it in); an unreferenced present page is write-protected; PG_INPOOL:
 * the page's copy is the compressed cache's entry when it has one (write-back:
 * the pool's is then stale or absent), else the pool's; a !PG_DIRTY present
 * page == that copy when PG_INPOOL, == zeros otherwise.
 */
#ifndef RAMSTER_LIB_REGION_INT_H
#define RAMSTER_LIB_REGION_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/internal.h"
#include "ramster.h"

/* ---- tunables ---------------------------------------------------------------- */

#define RG_PAGE	       4096u
#define RG_BATCH       128u /* pages one fault brings in at most (fault + prefetch) */
#define RG_EVICT_BATCH 32u  /* victims gathered per eviction round trip (in a fault) */
#define RG_EVICT_BG    64u  /* victims per put round trip of the background evictor */
#define RG_WM_START    5u   /* the evictor starts when less than this % of slots is free */
#define RG_WM_STOP     10u  /* ... and stops when this % is free */
#define RG_RA_MIN      8u   /* first prefetch of a sequential run */
#define RG_MIN_BUDGET  (2 * RG_BATCH)
#define RG_STREAMS     8u /* sequential runs followed at once (a merge reads two, writes one) */
#define RG_SPIN_US                                                                                 \
	0u /* the fault thread polls this long after a fault (0: off, measured slower)             \
	    */
#define RG_WINDOW 4096u /* read-fetched pages per write-protect decision */

#define RG_ZC_BOUND (RG_PAGE * 3 / 4) /* the compressed cache keeps pages that shrink to this */
#define RG_ZC_SHARE 4u /* its default cap: the budget / this (RAMSTER_FAR_ZCACHE_MB) */
#define RG_ZC_WB_MAX                                                                               \
	(4u * RG_EVICT_BG) /* write-back queue past which a fault puts a batch itself */

/* ---- structures -------------------------------------------------------------- */

enum {
	PG_PRESENT = 1u << 0, /* a real page is mapped (has a slot) */
	PG_ZEROMAP = 1u << 1, /* the zero page is mapped, write-protected (no slot) */
	PG_INPOOL = 1u << 2,  /* the pool holds a copy (current unless PG_DIRTY) */
	PG_DIRTY = 1u << 3,   /* written since the last put (present pages) */
	PG_REF = 1u << 4,     /* CLOCK reference bit */
	PG_WP = 1u << 5,      /* write-protected now */
	PG_FORK = 1u << 6,    /* brought in for fork, no slot; dropped after */
	PG_POISON = 1u << 7,  /* lost: mapped as a poison marker (SIGBUS) */
};

#define SLOT_NONE UINT32_MAX

/* A pool object: regions split by a partial munmap share one. */
struct rg_obj {
	struct ramster_oid oid;
	unsigned refs;
};

struct rg_region {
	uintptr_t base;
	size_t npages;
	uint32_t first; /* pool index of page 0 */
	struct rg_obj *obj;
	uint8_t *st;	/* PG_* per page */
	uint32_t *slot; /* per page, SLOT_NONE when not resident */
	int noread;	/* some pages may lack PROT_READ: read them via /proc/self/mem */
};

struct rg_slot {
	struct rg_region *reg; /* NULL: free */
	uint32_t idx;
	uint32_t busy; /* in the evictor's batch in flight (cleared when released) */
};

/* The background evictor's batch: copies of its victims, put without s->lock. */
struct rg_bg {
	uint32_t victims[RG_EVICT_BG];
	struct ramster_iov iov[RG_EVICT_BG];
	uint8_t *buf;		    /* RG_EVICT_BG pages */
	uint8_t *zbuf;		    /* RG_EVICT_BG compressed copies of RG_ZC_BOUND bytes */
	unsigned zlen[RG_EVICT_BG]; /* their lengths (0: not cached) */
};

struct rg_zcache;

struct rg_space {
	pthread_mutex_t lock;
	pthread_mutex_t io; /* the connection (lock rule above) */
	int uffd;
	int stopfd;
	int stopping; /* the fault thread is to stop (atomic: it reads it while spinning) */
	int has_poison;
	pthread_t thread;
	int thread_ok;
	int dead; /* a fork child's copy */
	ramster *conn;
	int pool;

	/* the background evictor (region_evictor.c) */
	pthread_t evictor;
	pthread_cond_t ev_cv; /* kicks it (with s->lock) */
	int evictor_ok, ev_stop, ev_on;
	uint32_t wm_start, wm_stop; /* free slots: it starts below the first, stops at the second */
	struct rg_bg *bg;
	struct rg_zcache *zc;	   /* the compressed cache, NULL: off */
	uint8_t zbuf[RG_ZC_BOUND]; /* a page compressed by a fault's own eviction */
	uint64_t next_oid;

	struct rg_region **regs; /* sorted by base, disjoint */
	size_t nregs, capregs;

	struct rg_slot *slots;
	uint32_t nslots, hand;
	uint32_t *free; /* stack of free slot numbers */
	uint32_t nfree;

	/* sequential runs: a fault in (last, next] continues one */
	struct rg_stream {
		uintptr_t last; /* its last faulting page */
		uintptr_t next; /* the page after what it brought in */
		unsigned ra;	/* pages prefetched on its last fault */
		uint64_t used;	/* for replacing the least recently used */
	} streams[RG_STREAMS];
	uint64_t stream_clock;

	/*
	 * Write-protect pays when fetched pages stay clean; when most are
	 * written anyway (RG_WINDOW decides), pages are fetched writable and
	 * dirty, and CLOCK ages them without protecting them again.
	 */
	int nowp;
	unsigned win_reads, win_wp, nowp_windows;

	uint8_t *buf; /* RG_BATCH pages: fetched pages, bounce buffers */
	struct ramster_iov iov[RG_BATCH];
	uint32_t victims[RG_EVICT_BATCH];
	int memfd; /* /proc/self/mem, opened when a noread page is evicted */
	int pidfd; /* this process, for process_madvise (-1: a page at a time) */

	struct ramster_region_stats st;
	uint64_t lat_hist[64]; /* missing-fault service ns, by log2 */
};

/* ---- the kernel's memory calls -------------------------------------------------
 * Straight syscalls: ramster-run's shim interposes the libc wrappers, and the
 * space must not re-enter itself through them (its lock is held here).
 */

static inline int rg_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

static inline int rg_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

/* ---- between the files ---------------------------------------------------------
 * Each with s->lock held.
 */

/* region.c: the region holding addr, or NULL. */
struct rg_region *rg_find(const struct rg_space *s, uintptr_t addr);

/* region.c: free g (out of s->regs, its slots released) and its share of the pool object. */
void rg_region_free(struct rg_space *s, struct rg_region *g);

/*
 * region_fault.c: install len bytes of pages from src at dst (UFFDIO_COPY), write-protected with
 * wp, waking the faulting threads with wake. @return 0 or -errno; *done (may be NULL) gets the
 * bytes installed.
 */
int rg_copy(struct rg_space *s, uintptr_t dst, const void *src, size_t len, int wp, int wake,
	    size_t *done);

/* region_fault.c: write-protect (on) or unprotect (and wake) [addr, addr+len). @return 0/-errno. */
int rg_wp(struct rg_space *s, uintptr_t addr, size_t len, int on);

/*
 * region_fault.c: the page at addr is lost: SIGBUS to whoever touches it (a poison marker, or
 * without one a signal to thread tid, 0: none, which is then woken).
 */
void rg_poison(struct rg_space *s, uintptr_t addr, uint32_t tid);

/* region_evict.c: give page i of g a slot (none free: SLOT_NONE, counted over_budget). */
void rg_slot_take(struct rg_space *s, struct rg_region *g, size_t i);

/* region_evict.c: free page i's slot, if it has one. Its state byte is the caller's. */
void rg_slot_release(struct rg_space *s, struct rg_region *g, size_t i);

/*
 * region_evict.c: make room for n more resident pages: wakes the evictor when
 * the free slots fall under its watermark, evicts here only when they are
 * too few. @return how many fit (>= 1 unless none could be freed).
 */
unsigned rg_room(struct rg_space *s, unsigned n);

/*
 * region_evict.c: pick up to want victims with CLOCK into v (slot numbers),
 * write-protected, none busy. @return how many.
 */
unsigned rg_clock_pick(struct rg_space *s, uint32_t *v, unsigned want);

/*
 * region_evict.c: copy of page i of g to put, into b when the page may be
 * unreadable. @return the bytes to put, or NULL.
 */
void *rg_put_source(struct rg_space *s, struct rg_region *g, size_t i, uint8_t *b);

/* region_evict.c: drop a victim (put or clean). @return 0 or -errno (it stays, referenced). */
int rg_drop(struct rg_space *s, struct rg_region *g, size_t i);

/*
 * region_evict.c: drop the victims in slots v[0..n), n <= RG_EVICT_BG, with one
 * process_madvise (one TLB shoot-down for the batch, not one a page; page by page where it
 * fails). @return how many were dropped.
 */
unsigned rg_drop_batch(struct rg_space *s, const uint32_t *v, unsigned n);

/* region_zcache.c: the cache's key of page i of g: the pool's name of it. */
static inline uint64_t rg_zc_key(const struct ramster_oid *oid, uint32_t index)
{
	return oid->w[0] << 32 | index;
}

/* region_zcache.c: make s's cache of cap bytes (0: none). @return 0 or -ENOMEM. */
int rg_zc_init(struct rg_space *s, size_t cap);

/* region_zcache.c: free the cache and every entry. */
void rg_zc_fini(struct rg_space *s);

/*
 * region_zcache.c: compress a page into dst (RG_ZC_BOUND bytes), no lock needed.
 * @return its length, 0 when it does not fit (not worth caching).
 */
unsigned rg_zc_compress(const void *page, void *dst);

/*
 * region_zcache.c: key's only current copy is now comp (len bytes; 0: not kept, the entry is
 * dropped); the oldest entries go to the write-back queue. @return 0 kept, or -errno (the page
 * must then be put).
 */
int rg_zc_store(struct rg_space *s, uint64_t key, const void *comp, unsigned len);

/* region_zcache.c: forget key (its page was rewritten, discarded or unmapped, or put). */
void rg_zc_drop(struct rg_space *s, uint64_t key);

/* region_zcache.c: whether the cache holds key (then it, not the pool, is the current copy). */
int rg_zc_has(const struct rg_space *s, uint64_t key);

/* region_zcache.c: entries queued for write-back and not yet taken. */
unsigned rg_zc_wb_queued(const struct rg_space *s);

/*
 * region_zcache.c: take up to max queued entries for write-back: each decompressed into buf
 * (max pages) and described in iov, marked in flight. @return how many.
 */
unsigned rg_zc_wb_take(struct rg_space *s, struct ramster_iov *iov, uint8_t *buf, unsigned max);

/*
 * region_zcache.c: the put of what rg_zc_wb_take took is done (rc, and each iov's result):
 * a put entry leaves the cache, a refused one stays (young again).
 */
void rg_zc_wb_done(struct rg_space *s, const struct ramster_iov *iov, unsigned n, int rc);

/* region_zcache.c: decompress key's page into page. @return 0 (a hit) or -ENOENT. */
int rg_zc_load(struct rg_space *s, uint64_t key, void *page);

/*
 * Page i of g into page: from the compressed cache when it holds it (@return 1), or else
 * queued as the next of s->iov's gets, *ngets bumped (@return 0). The fault path and fork
 * bring a pooled page in this way.
 */
static inline int rg_zc_fetch(struct rg_space *s, struct rg_region *g, size_t i, uint8_t *page,
			      unsigned *ngets)
{
	uint32_t index = g->first + (uint32_t)i;

	if (rg_zc_load(s, rg_zc_key(&g->obj->oid, index), page) == 0)
		return 1;
	s->iov[*ngets].oid = g->obj->oid;
	s->iov[*ngets].index = index;
	s->iov[*ngets].page = page;
	s->iov[*ngets].result = 0;
	(*ngets)++;
	return 0;
}

/* region_zcache.c: bytes the cache holds now (entries and headers). */
size_t rg_zc_bytes(const struct rg_space *s);

/* region_evictor.c: start the evictor thread. @return 0 or an errno. */
int rg_evictor_start(struct rg_space *s);

/* region_evictor.c: stop it and wait for it (no lock held). NULL-safe on a space without one. */
void rg_evictor_stop(struct rg_space *s);

#endif
