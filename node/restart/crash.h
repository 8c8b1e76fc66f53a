/*
 * crash.h - what a crash leaves, and the start that takes it back
 * (docs/warm-restart.md, "A crash"; config key crash_dir).
 *
 * With crash_dir set, the node keeps in files there (tmpfs: memory that
 * outlives the process, not the machine):
 *   tier.mem, tier.blk  the tier's frames and block records (a shared zdense);
 *   objects             tmem's crash table (object numbers, pools' flags and
 *                       their pages outside the tier);
 *   pools.a, pools.b    the pool directory (tokens, owners, modes), rewritten
 *                       whole, in turn, at each pool made or gone, each a
 *                       checked image with a sequence number;
 *   state               what made them (layouts, local_mb, compressor) and
 *                       whether the process stopped cleanly;
 *   lock                flock'd while a process uses the directory.
 * A start that finds state not clean (a crash: the lock was free) renames
 * the tier's files to *.old, makes fresh ones, and, once the tier and the
 * pool directory exist, loads what the old ones hold (crash_keep_load): the
 * directory's newest good image, then the pages crashload vouches for,
 * through the snapshot loader; pools that lost pages are marked incomplete.
 * A clean stop empties the files and says so in state. NBD exports and the
 * collective's records are not kept across a crash (the node is a new
 * incarnation; its exports start empty).
 *
 * Loop thread only.
 */
#ifndef RAMSTER_CRASH_H
#define RAMSTER_CRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmem/compress.h"
#include "tmem/zcache.h"

struct pools;
struct users;
struct restart_stats;
struct crash_keep;

/*
 * Take dir (absolute; made 0700 if missing, refused if another uid owns it
 * or group or others may enter it; one process at a time: -EBUSY) for a
 * tier of local_mb in compressor algo, and find a crash's files if the last
 * process left some. @return the keeper, or NULL with err set.
 */
struct crash_keep *crash_keep_open(const char *dir, uint64_t local_mb, enum compress_algo algo,
				   struct restart_stats *st, char *err, size_t errlen);

/*
 * Fresh, empty files for a tier (truncating what this process made before:
 * call it before each zcache_create that uses them). @return what
 * zcache_config.crash takes, or NULL with errno set.
 */
const struct zcache_crash *crash_keep_fresh(struct crash_keep *ck);

/*
 * Write the pool directory's image now (pools_set_on_change calls it at
 * each change). Errors are logged and counted; the node goes on.
 */
void crash_keep_pools_changed(void *ck, const struct pools *p);

/*
 * Load a crash's files into the new tier z and directory p (empty, made
 * with crash_keep_fresh's files), then drop them. Figures go in st's crash
 * fields. @return 0 (nothing to load, or loaded: what could not be is
 * counted), or -errno when the tier must start cold (logged).
 */
int crash_keep_load(struct crash_keep *ck, struct zcache *z, struct pools *p, struct users *u,
		    struct restart_stats *st);

/*
 * A planned restart's image holds the pages now: say the stop is clean, so
 * that the next start does not take the files for a crash's. NULL ok.
 */
void crash_keep_mark_clean(struct crash_keep *ck);

/*
 * Close: with clean, the files are emptied (their memory given back) and
 * state says the stop was clean, so the next start finds nothing to load.
 * Without (a failed start), they are left as they are. NULL ok.
 */
void crash_keep_close(struct crash_keep *ck, bool clean);

#endif /* RAMSTER_CRASH_H */
