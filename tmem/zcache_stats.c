/*
 * zcache_stats.c - the tier's counters by name (zcache_foreach_stat): tmem's,
 * the crash table's and the tier's own, with the help line `ramsterctl stats`
 * and the metrics endpoint show. Only zcache.h's and tmem.h's public calls.
 */
#include <stdint.h>

#include "tmem/tmem.h"
#include "tmem/zcache.h"

void zcache_foreach_stat(struct zcache *z,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg)
{
	struct zcache_stats s;
	struct tmem_stats t;

	tmem_get_stats(zcache_tmem(z), &t);
	zcache_get_stats(z, &s);
#define T(f, h) fn(arg, "tmem_" #f, t.f, h)
	T(puts, "put calls");
	T(puts_dup, "puts that replaced a page (duplicate puts)");
	T(puts_failed, "puts refused (any reason; see tier_refused_*)");
	T(dup_put_flushes, "refused duplicate puts that flushed the old page");
	T(gets, "get calls");
	T(hits, "gets that returned a page");
	T(misses, "gets that found nothing");
	T(get_errors, "gets whose page was lost (-EIO)");
	T(flushes, "flush-page calls");
	T(flush_objects, "flush-object calls");
	T(flushed_pages, "pages removed by flushes and pool destroys");
	T(pools, "pools now");
	T(pools_created, "pools created");
	T(pools_destroyed, "pools destroyed");
	T(objects, "objects now");
	T(pages, "pages held now");
	T(remote_gets, "gets that went to a peer");
#undef T
	{
		struct tmem_crash_stats c;

		tmem_get_crash_stats(zcache_tmem(z), &c);
		fn(arg, "tmem_gets_incomplete", c.gets_incomplete,
		   "of get_errors, misses in a pool a crash left incomplete (the page may be lost)");
		fn(arg, "tmem_crash_untracked_objects", c.untracked_objects,
		   "objects past the crash table's size: their pages cannot survive a crash");
	}
#define Z(f, h) fn(arg, "tier_" #f, s.f, h)
	Z(stored_pages, "compressed pages in frames now");
	Z(compressed_bytes, "their compressed bytes");
	Z(zero_pages, "zero-filled pages held now (no frame)");
	Z(zero_puts, "puts of zero-filled pages");
	Z(raw_pages, "incompressible pages kept raw, a frame each (keep-all pools) now");
	Z(raw_puts, "puts stored raw (keep-all pools: NBD exports)");
	Z(refused_poor, "puts refused: poorly compressible");
	Z(refused_nospace, "puts refused: no room left");
	Z(refused_meta, "of those, refused as the bookkeeping (charged to the budget) took the rest");
	Z(refused_error, "puts refused: compressor error");
	Z(evicted_frames, "ephemeral frames eaten to make room");
	Z(evicted_pages, "ephemeral pages evicted with them");
	Z(evict_busy, "eviction attempts that met a busy bucket");
	Z(evicted_over_share, "frames evicted out of LRU order: their owner was over its weighted share");
	Z(decompress_errors, "pages that failed to decompress (-EIO)");
	Z(frames, "frames in use");
	Z(frames_eph, "frames holding ephemeral pages");
	Z(frames_pers, "frames holding persistent pages");
	Z(zombies, "frames (zbud) or blocks (dense) held as zombies");
	Z(frames_touched, "frames faulted in and kept (in use or free for reuse): the tier's RAM");
	Z(budget_frames, "the budget (local_mb, or the elastic tier's now) in frames");
	Z(capacity_frames, "the most the budget may be (local_mb, or local_max_mb) in frames");
	Z(trimmed_frames, "free frames whose memory was given back to the kernel (elastic tier)");
	Z(meta_bytes, "bookkeeping RAM beyond the frames");
	Z(replica_records, "pages with several copies on peers (replica table records)");
	Z(replica_bytes, "RAM of the replica table");
	Z(bad_handles, "allocator releases of bad handles (a bug if not 0)");
	Z(remote_pages, "pages whose copy is on a peer now");
	Z(remotified, "pages moved to peers (remotify)");
	Z(remotify_stale, "pages changed while being remotified (remote copy flushed)");
	Z(repatriated, "remote pages fetched back for a get (repatriate)");
	Z(brought_home, "repatriated persistent pages stored locally again");
	Z(checksum_errors, "remote pages that failed their checksum (-EIO)");
	Z(remote_lost, "gets of pages whose holder is dead or lost them");
#undef Z
}
