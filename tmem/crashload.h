/*
 * crashload.h - what a crashed tier left, as a snapshot (docs/warm-restart.md,
 * "A crash").
 *
 * A node whose tier is shared (zdense_create_shared) and whose tmem keeps a
 * crash table (tmem/crashtab.h) leaves, when it is killed, two things in
 * files that outlive it: the frames with every page's stored bytes and
 * back-reference {objno, index}, and the table that turns an objno into
 * (pool, oid) and says, per pool, its flags and how many of its persistent
 * pages were not in the frames (zero pages, remote pages). crashload reads
 * them (read-only) and emits the records of a snapshot (tmem/snapshot.h):
 * TIER, then for each pool the table names a POOL record and a PAGE record
 * for each persistent page it can vouch for, so that the planned restart's
 * loader rebuilds the tier with every check it makes.
 *
 * What it vouches for: a live slot of a persistent block whose objno's
 * entry checks out, whose pool is alive and persistent, whose bytes
 * decompress to one page, and which is the only live slot of its handle; of
 * two live slots of one handle (a put that had stored its page and not yet
 * released the old one), the one outside a zombie is kept when the other is
 * in one (a zombie's pages are always the older), else both are dropped.
 * Ephemeral pages are dropped (tmem lets an ephemeral get miss). A pool that
 * lost a persistent page this way, or that had pages outside the frames, is
 * *incomplete*: the caller marks it so (tmem_pool_set_incomplete), and a get
 * that misses there answers -EIO, never "no such page".
 */
#ifndef RAMSTER_CRASHLOAD_H
#define RAMSTER_CRASHLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "tmem/compress.h"
#include "tmem/crashtab.h"
#include "tmem/snapshot.h"
#include "tmem/tmem.h"

/* The crashed tier's files, mapped read-only by the caller. */
struct crashload_files {
	const void *mem, *blk; /* zdense's frames and block records */
	uint64_t mem_len, blk_len;
	const struct tmem_crashtab *tab; /* tmem's crash table */
	size_t tab_len;
	enum compress_algo algo; /* the compressor the pages are in */
};

struct crashload_stats {
	uint64_t pools;		 /* pools emitted */
	uint64_t pools_incomplete;
	uint64_t pages;		 /* persistent pages emitted */
	uint64_t bytes;		 /* their stored bytes */
	uint64_t eph_dropped;	 /* ephemeral pages left behind */
	uint64_t no_object;	 /* slots whose objno's entry did not check out */
	uint64_t no_pool;	 /* slots of an object of a pool not alive or not persistent */
	uint64_t bad_bytes;	 /* pages that did not decompress to one page */
	uint64_t dup_dropped;	 /* slots dropped as one of two or more of a handle */
	uint64_t zombie_dropped; /* older copies left in a zombie */
	uint64_t bad_blocks, bad_slots; /* zdense_scan's bounds refusals */
};

/*
 * Emit the snapshot records of what f holds (see above); set bit id of
 * incomplete (TMEM_MAX_POOLS bits, zeroed by the caller) for each pool the
 * caller must mark incomplete once it is loaded. @return 0, -EINVAL for files
 * that are not a shared tier and crash table of this layout, -ENOMEM, or
 * emit's error.
 */
int crashload_emit(const struct crashload_files *f, snapshot_emit_fn emit, void *arg,
		   uint64_t *incomplete, struct crashload_stats *st);

#endif /* RAMSTER_CRASHLOAD_H */
