/*
 * snapshot.h - the tier's contents as records, and back again: what a planned
 * restart carries across the exec (docs/warm-restart.md).
 *
 * A snapshot is a TIER record (the format and the compressor the bytes are
 * in), then for every pool a POOL record followed by a PAGE record for each
 * of its pages: a zero page, a local page with its stored (compressed) bytes,
 * or a remote page with its holders, epochs, length and seal version. Records
 * are little-endian and position-free: nothing in them is an address, so the
 * loader rebuilds the index, the frames and the replica records from scratch
 * (a frame's back-reference names the new object). The container that
 * carries the records (a checked image: node/image.h) is not this file's
 * business: records go out through an emit callback and come back one at a
 * time, each checked before anything is built from it.
 *
 * A pool the loader finds made already (by the node's pool directory, whose
 * records come first) is taken as it is if it has the same flags and no
 * pages: its owner is then the directory's.
 *
 * Saving needs a quiet tier (no put, flush, eviction or remotify running:
 * tmem_walk); loading needs an empty one of the same allocator budget or
 * larger.
 */
#ifndef RAMSTER_SNAPSHOT_H
#define RAMSTER_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "tmem/zcache.h"

#define SNAPSHOT_VERSION 1

enum {
	SNAPSHOT_TAG_TIER = 0x5401, /* u32 version, u32 compressor */
	SNAPSHOT_TAG_POOL = 0x5402, /* u32 id, u32 flags, u32 owner, u32 weight */
	SNAPSHOT_TAG_PAGE = 0x5403, /* see snapshot.c */
};

/* What a save wrote or a load built. */
struct snapshot_stats {
	uint64_t pools;
	uint64_t pages_zero, pages_local, pages_remote;
	uint64_t bytes_local;	/* stored bytes of the local pages */
	uint64_t pages_refused; /* load: pages that found no room (ephemeral: a miss later) */
	uint64_t pers_refused;	/* load: of those, persistent ones (lost: counted, logged) */
};

/* Where records go: @return 0, or -errno to stop the save. */
typedef int (*snapshot_emit_fn)(void *arg, uint16_t tag, const void *head, size_t head_len,
				const void *body, size_t body_len);

/* Emit z's every pool and page. @return 0, or the first error (emit's, or -EIO). */
int snapshot_save(struct zcache *z, snapshot_emit_fn emit, void *arg, struct snapshot_stats *st);

/* Rebuilds a tier from records, in the order they were saved. */
struct snapshot_loader {
	struct zcache *z;
	struct snapshot_stats st;
	int tier_seen;	/* a TIER record of this format and compressor came first */
	int64_t pool;	/* the pool the next pages belong to (-1: none yet) */
	unsigned flags; /* its flags */
};

void snapshot_loader_init(struct snapshot_loader *l, struct zcache *z);

/*
 * Build what one record says. @return 0; -EBADMSG for a record that cannot
 * be (a bad length or field, a page before its pool, a record before TIER),
 * -EPROTO for another format or compressor; the caller then stops and starts
 * cold (what was built so far is the caller's to destroy with the tier).
 * A page that finds no room is counted (st.pages_refused), not an error.
 */
int snapshot_load_record(struct snapshot_loader *l, uint16_t tag, const uint8_t *p, size_t len);

#endif /* RAMSTER_SNAPSHOT_H */
