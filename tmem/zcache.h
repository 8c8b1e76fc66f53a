/*
 * zcache.h - the local tier: tmem's data side on compressed frames.
 *
 * A put is compressed (LZO1X-1, or LZ4: compressor) and stored by the
 * allocator the config names (zdense, the default, or zbud: tmem/zalloc.h);
 * a zero-filled page takes no frame; a poorly compressible page is refused,
 * except in a TMEM_KEEP_ALL pool (NBD exports) with zdense: there it is kept
 * raw, 4096 bytes in a frame of its own (the huge class; a stored length of
 * 4096 means raw, locally and in a remote descriptor, as no compressed page
 * is stored above 4032 bytes).
 * Within the budget (local_mb) a put takes space in a frame with room or a
 * free one; when none is left, it eats the least recently used ephemeral
 * frame (a zdense block: all its pages are evicted). Persistent data
 * is never evicted: with no ephemeral frame left, the put is refused.
 *
 * The descriptor (pampd) of a page is one 64-bit word, encoded here only.
 */
#ifndef RAMSTER_ZCACHE_H
#define RAMSTER_ZCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmem/compress.h"
#include "tmem/replica.h"
#include "tmem/tmem.h"
#include "tmem/zalloc.h"

struct tmem_crashtab;

/*
 * A tier that a crash leaves readable (docs/warm-restart.md, "A crash"): its
 * frames and block records in two files the caller made (zdense_create_shared:
 * the dense allocator only), and tmem's crash table, mapped (tmem_set_crashtab).
 * tmem/crashload.h reads what they hold after the process died.
 */
struct zcache_crash {
	int mem_fd, blk_fd;
	struct tmem_crashtab *tab;
};

struct zcache_config {
	uint64_t local_mb;          /* budget of compressed frames, MiB (> 0) */
	/* Poor-compression thresholds as fractions of a page, in 1/1024ths;
	 * 0 means the default (896 = 7/8, 640 = 5/8, 640 = 5/8). */
	unsigned pers_max_frac;
	unsigned pers_mean_max_frac;
	unsigned pers_mean_limit_frac;
	enum zalloc_kind allocator;     /* ZALLOC_DENSE (0, the default) or ZALLOC_ZBUD */
	enum compress_algo compressor;  /* COMPRESS_LZO (0, the default) or COMPRESS_LZ4 */
	const struct zcache_crash *crash; /* NULL: anonymous memory, nothing outlives the process */
};

struct zcache;

/* @return the tier, or NULL with errno set. */
struct zcache *zcache_create(const struct zcache_config *cfg);

/* Destroy the tier, its tmem handle space and every frame. NULL ok. */
void zcache_destroy(struct zcache *z);

/* The handle space whose data lives in this tier: call tmem_* on it. */
struct tmem *zcache_tmem(struct zcache *z);

/* Counters of the tier. */
struct zcache_stats {
	uint64_t zero_pages;         /* pages stored as zero-filled (no frame) now */
	uint64_t zero_puts;          /* puts of zero-filled pages */
	uint64_t raw_pages;          /* pages kept raw (huge class, keep-all pools) now */
	uint64_t raw_puts;           /* puts stored raw */
	uint64_t stored_pages;       /* compressed pages in frames now */
	uint64_t compressed_bytes;   /* their compressed bytes */
	uint64_t refused_poor;       /* puts refused: poorly compressible */
	uint64_t refused_nospace;    /* puts refused: no room (persistent data fills the tier) */
	uint64_t evicted_over_share; /* frames evicted out of LRU order for an over-share owner */
	uint64_t refused_meta;       /* of those, where the bookkeeping's charge took the rest */
	uint64_t refused_error;      /* puts refused: compressor failure */
	uint64_t evicted_frames;     /* ephemeral frames eaten to make room */
	uint64_t evicted_pages;      /* ephemeral pages lost with them */
	uint64_t evict_busy;         /* eviction attempts that met a busy bucket */
	uint64_t decompress_errors;  /* gets whose data did not decompress (-EIO) */
	uint64_t frames;             /* frames in use */
	uint64_t frames_eph;
	uint64_t frames_pers;
	uint64_t zombies;
	uint64_t frames_touched;     /* frames faulted in and kept: the tier's frame RAM */
	uint64_t budget_frames;      /* local_mb in frames (the elastic tier's budget now) */
	uint64_t capacity_frames;    /* the most the budget may be (local_mb, or local_max_mb) */
	uint64_t trimmed_frames;     /* frames whose memory zcache_trim gave back */
	uint64_t meta_bytes;         /* bookkeeping RAM of zbud and tmem together */
	uint64_t bad_handles;        /* zbud releases of bad handles (a bug if not 0) */
	uint64_t remote_pages;       /* pages whose copy is on a peer now */
	uint64_t remotified;         /* pages moved to peers */
	uint64_t remotify_stale;     /* pages changed while in flight (remote copy flushed) */
	uint64_t repatriated;        /* remote pages fetched back for a get */
	uint64_t brought_home;       /* of those, stored locally again */
	uint64_t checksum_errors;    /* remote pages whose bytes failed the checksum */
	uint64_t remote_lost;        /* gets of pages on a dead peer */
	uint64_t replica_records;    /* pages with several copies (replica table) */
	uint64_t replica_bytes;      /* the table's RAM (in meta_bytes too) */
};
void zcache_get_stats(struct zcache *z, struct zcache_stats *s);

/* ---- the remote tier (used by the collective) --------------------------- */

/*
 * A remote page's holders: a struct replica_set (tmem/replica.h). One holder
 * fits in the descriptor; several live in the tier's replica table.
 */

struct zcache_remote_ops {
	/* Is node alive in this epoch (mod 256)? A page on a node that is not is lost. */
	bool (*alive)(void *arg, unsigned node, unsigned epoch);
	/* The page h held on node is no longer wanted: tell the node (asynchronously). */
	void (*flush_page)(void *arg, unsigned node, bool pers, const struct tmem_handle *h);
	/* The object h (index ignored) / the pool is gone: tell every node in nodes. */
	void (*flush_object)(void *arg, uint64_t nodes, bool pers, const struct tmem_handle *h);
	void (*flush_pool)(void *arg, uint64_t nodes, bool pers, uint32_t pool);
	/*
	 * Stripe pages (ec_layout = stripes), optional without them. The holder of
	 * data slot slot of stripe id into *s (n = 1, stripe and slot set, checksum
	 * the slot's seal version): 0; -ENOENT (no such stripe: lost or stale).
	 * Any thread, a bucket lock may be held.
	 */
	int (*stripe_holder)(void *arg, uint64_t id, unsigned slot, struct replica_set *s);
	/* Data slot slot of stripe id no longer holds a live page. Any thread, a
	 * bucket lock may be held. */
	void (*stripe_kill)(void *arg, uint64_t id, unsigned slot);
};

/* Attach the collective. Call before any page goes remote. */
void zcache_set_remote(struct zcache *z, const struct zcache_remote_ops *ops, void *arg);

/* Is pampd a remote descriptor (one holder or several)? */
bool zcache_pampd_is_remote(uint64_t pampd);
/* Whether pampd is a stripe page's (ec_layout = stripes): then its stripe's id and its slot. */
bool zcache_pampd_stripe(uint64_t pampd, uint64_t *id, unsigned *slot);

/*
 * The holders of remote descriptor pampd. @return 0 with *r filled;
 * -EINVAL (not remote); -ENOENT (its replica record changed or went away).
 */
int zcache_remote_holders(struct zcache *z, uint64_t pampd, struct replica_set *r);

/*
 * The copy of h's page on node from is now on node to (placed in epoch): if
 * h still has descriptor expect, point it there. *now (may be NULL) gets the
 * new descriptor. @return 0; -ENOENT (the page changed or from holds no copy:
 * the copy on to is stale, flush it); -EEXIST (to holds one already); -EINVAL.
 */
int zcache_remote_move(struct zcache *z, const struct tmem_handle *h, uint64_t expect,
		       unsigned from, unsigned to, unsigned epoch, uint64_t *now);

/* The replica table (to walk it: re-replication). */
struct replica_table *zcache_replicas(struct zcache *z);

/* The descriptor of a page whose holders are replica record id. */
uint64_t zcache_replica_pampd(uint64_t id);

/*
 * Remote pages are sealed by the caller (node/remote/seal.h): the checksum of a
 * remote descriptor or replica record is the seal's version, not adler32,
 * and zcache_repatriate_finish takes bytes whose seal the caller opened.
 * Set before the first remote page.
 */
void zcache_set_sealed(struct zcache *z, bool sealed);

/* The checksum of compressed bytes, as remote descriptors and peers carry it. */
uint32_t zcache_checksum(const void *data, size_t len);

/* Frames in use, in percent of the budget (what the remotify watermarks watch). */
unsigned zcache_usage_pct(struct zcache *z);

/* Frames above which a repatriated persistent page is not brought home. Any
 * thread, at any time (a relaxed atomic: a get in flight sees the old or new). */
void zcache_set_home_limit(struct zcache *z, uint64_t frames);
/* The same for a compaction's gets (ZCACHE_FIN_COMPACT): a higher limit. */
void zcache_set_compact_limit(struct zcache *z, uint64_t frames);

/*
 * local_mb = auto (node/elastic/): the tier's budget now, 1..the frames it
 * was made with. Nothing stored is dropped: above the new budget, puts make
 * room (eviction, remotify) or are refused. The bring-home limit keeps its
 * share of the budget. Any thread.
 */
void zcache_set_budget(struct zcache *z, uint64_t frames);
uint64_t zcache_capacity_frames(struct zcache *z);

/*
 * Give the memory of free frames back to the kernel while more frames than
 * the budget are faulted in, at most max frames a call (zdense; zbud keeps
 * its frames). @return frames given back. Any thread.
 */
uint64_t zcache_trim(struct zcache *z, uint64_t max);

/* One frame taken for remotify: its live pages, readable until done. */
struct zcache_out_page {
	struct tmem_ref ref;
	struct tmem_handle h;   /* valid when resolved */
	bool resolved;          /* false: the object went away meanwhile */
	bool pers;
	uint64_t handle;        /* the allocator's handle */
	const void *data;       /* compressed bytes (in the zombie frame) */
	unsigned len;
	uint32_t checksum;
};
/* A taken frame (zbud) or block of frames (zdense) carries at most this many pages. */
#define ZCACHE_OUT_MAX ZALLOC_VICTIM_MAX
#define ZCACHE_OUT_UNITS 16 /* frames (or blocks) taken together at most */
struct zcache_out {
	uint32_t frame;
	uint32_t more[ZCACHE_OUT_UNITS - 1]; /* zcache_remotify_take_more's */
	unsigned nmore;
	bool pers;
	unsigned frames;        /* 4096-byte frames it frees when emptied */
	unsigned n;             /* pages in p[] */
	struct zcache_out_page p[ZCACHE_OUT_MAX];
};

/*
 * Take the least recently used frame of a kind as a zombie and name its pages.
 * @return 0, or -ENOENT when there is none.
 */
int zcache_remotify_take(struct zcache *z, bool pers, struct zcache_out *o);

/*
 * Page i of o is now held by the holders r (one, or several: a replica
 * record): point the handle there and free the local copy. @return 0;
 * -ENOENT when the page was changed or flushed meanwhile (the remote copies
 * are stale: the caller flushes them); -ENOMEM (the page stays local).
 */
int zcache_remotify_commit(struct zcache *z, struct zcache_out *o, unsigned i,
			   const struct replica_set *r);

/*
 * Take the next least recently used frame of o's kind into o too (its pages
 * after o's): stripes want K pages, and a frame may hold two. @return 0;
 * -ENOENT (none); -ENOSPC (o is full: ZCACHE_OUT_UNITS, or its pages would
 * not fit ZCACHE_OUT_MAX; a frame taken is put back).
 */
int zcache_remotify_take_more(struct zcache *z, struct zcache_out *o);

/* End the remotify of o: its frames are freed, or go back to the LRU. */
void zcache_remotify_done(struct zcache *z, struct zcache_out *o);

/*
 * Finish a get of a remote page: h had descriptor expect with holders r when
 * the get began and a holder answered result (0 with cdata/clen, or -errno).
 * Verifies the checksum, decompresses into page, and updates the handle: a
 * private ephemeral get (ZCACHE_FIN_DESTRUCTIVE) or a lost ephemeral page
 * removes it; a persistent page is brought home (stored locally) when the
 * tier is under its home limit (under its compact limit with
 * ZCACHE_FIN_COMPACT: node/remote/compact.c).
 * *home is set when it was (then the caller flushes every copy in r).
 * @return 0 filled; -ENOENT miss; -EIO lost or corrupt.
 */
enum {
	ZCACHE_FIN_DESTRUCTIVE = 1, /* the holder deleted the page as it answered */
	ZCACHE_FIN_COMPACT = 2,     /* a stripe's compaction: home below the compact limit */
};
int zcache_repatriate_finish(struct zcache *z, const struct tmem_handle *h, uint64_t expect,
			     const struct replica_set *r, unsigned flags, int result,
			     const void *cdata, size_t clen, void *page, bool *home);

/*
 * Call fn(arg, name, value, help) for every counter of the tier, tmem and
 * zbud, with stable names (as `ramsterctl stats` prints them).
 */
void zcache_foreach_stat(struct zcache *z,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

/* ---- snapshots (tmem/snapshot.c) ---- */

/* STRIPE: a stripe page (set.stripe and set.slot only: the rest is its stripe's record) */
enum { ZCACHE_IMG_ZERO = 1, ZCACHE_IMG_LOCAL = 2, ZCACHE_IMG_REMOTE = 3, ZCACHE_IMG_STRIPE = 4 };

/* A page as a snapshot carries it. */
struct zcache_page_image {
	unsigned kind;          /* ZCACHE_IMG_* */
	unsigned len;           /* LOCAL: its bytes as stored (compressed; 4096 raw) */
	const void *bytes;      /* LOCAL: valid while the tier is quiet */
	struct replica_set set; /* REMOTE: its holders */
};

/* The page behind pampd. @return 0, -EIO (a bad handle), -EINVAL. The tier must be quiet. */
int zcache_page_export(struct zcache *z, uint64_t pampd, struct zcache_page_image *pi);

/*
 * Store an exported page again for handle h (ref: tmem_put_desc's): local
 * bytes into a frame (evicting ephemeral frames as a put does), a remote
 * descriptor as it was (without one-sided read addresses). @return 0 with
 * *pampd set, -ENOSPC, -EINVAL for a record that cannot be (checked: it comes
 * from a file).
 */
int zcache_page_import(struct zcache *z, const struct tmem_handle *h, bool pers,
		       const struct zcache_page_image *pi, struct tmem_ref ref, uint64_t *pampd);

/* The compressor the tier's bytes are in. */
enum compress_algo zcache_algo(const struct zcache *z);

#endif /* RAMSTER_ZCACHE_H */
