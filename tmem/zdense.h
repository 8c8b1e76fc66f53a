/*
 * zdense.h - the dense pageframe allocator of the local tier.
 *
 * Compressed pages are stored in fixed-size slots of size classes (16-byte
 * steps, each slot carrying a 10-byte header: the exact length and the
 * owner's back-reference). A class's slots live in blocks of 1..4 contiguous
 * 4096-byte frames, the count chosen per class to waste the least tail room
 * (as zsmalloc chooses its zspage order); a slot may straddle two frames of
 * its block, which is one contiguous run of memory. Nothing ever moves: a
 * handle names a block and a slot for the page's life.
 *
 * A block is the unit of the LRU (one per kind, ephemeral and persistent,
 * least recently stored first), of eviction and of remotify: zdense_zombify_lru()
 * takes a whole block with its N live pages, exactly as zbud takes a frame
 * with its two. A zombie's bytes stay readable, even of pages released
 * meanwhile, until zdense_zombie_done().
 *
 * Blocks are carved from units of ZDENSE_UNIT_FRAMES frames of one NORESERVE
 * mapping; a block of k frames uses (and faults in) the first k. Free units
 * are kept by how many of their frames were faulted in, so a block reuses
 * faulted memory first: frames are faulted once, then reused.
 *
 * Locking: one mutex inside guards every list and counter; each function
 * takes it. zdense_data() takes no lock (the caller owns the page or holds
 * the zombie), as zbud_data().
 */
#ifndef RAMSTER_ZDENSE_H
#define RAMSTER_ZDENSE_H

#include <stdbool.h>
#include <stdint.h>

#include "tmem/zalloc.h"
#include "tmem/zbud.h"

#define ZDENSE_FRAME_SIZE  4096
#define ZDENSE_UNIT_FRAMES 4		     /* the largest block, in frames */
#define ZDENSE_STEP	   16		     /* class granularity, bytes */
#define ZDENSE_HDR	   10		     /* per-slot header: length + back-reference */
#define ZDENSE_SLOTS_MAX   ZALLOC_VICTIM_MAX /* slots of one block, at most (7 bits) */
/* The largest page: as zbud's, so both refuse the same pages. */
#define ZDENSE_MAX_LEN ZBUD_BUDDY_MAX
/*
 * The huge class: a page that does not compress is stored raw, its 4096 bytes
 * filling one frame (zram's huge class); a length of exactly 4096 means raw,
 * as no compressed page is stored above ZDENSE_MAX_LEN.
 */
#define ZDENSE_HUGE_LEN ZDENSE_FRAME_SIZE
/* Blocks are numbered in 31 bits (a handle is block << 7 | slot: 38 bits). */
#define ZDENSE_UNITS_LIMIT (UINT32_MAX >> 1)

struct zdense;

/* @return an allocator of at most max_frames frames (1..2^31-1), or NULL with errno set. */
struct zdense *zdense_create(uint32_t max_frames);

/*
 * The same, its frames and block records in two files the caller made
 * (memfds or files on tmpfs), mapped shared and cut to their sizes (what
 * they held is dropped). Every store is ordered so that, should the process
 * die at any instruction, zdense_scan() of the files finds exactly the pages
 * stored and not released, each whole (docs/warm-restart.md, "A crash").
 * Frames given back are punched out of the file (MADV_REMOVE).
 */
struct zdense *zdense_create_shared(uint32_t max_frames, int mem_fd, int blk_fd);
/* The two files' sizes for max_frames. @return 0 or -EINVAL. */
int zdense_file_sizes(uint32_t max_frames, uint64_t *mem_len, uint64_t *blk_len);
/*
 * An id of the files' layout (size classes, block record, header): a process
 * must scan files only of its own id; the caller keeps it beside the files.
 */
uint64_t zdense_layout_id(void);

/* A page zdense_scan() found live. */
struct zdense_found {
	struct zbud_ref ref; /* its back-reference, as stored: unchecked */
	const void *data;    /* its bytes, in the scanned mapping */
	unsigned len;	     /* 1..ZDENSE_MAX_LEN, or ZDENSE_HUGE_LEN (raw) */
	bool pers;	     /* of a persistent block */
	bool zombie;	     /* of a block being remotified at the time */
};

struct zdense_scan_stats {
	uint64_t blocks, pages, dead, bad_blocks, bad_slots;
};

/*
 * Call fn for every live page in the mapped files of a shared zdense whose
 * process is gone (read-only: nothing is written). Only what the store order
 * vouches for is reported: blocks in use, slots below their block's ninit
 * with a length in their class's bounds; dead and free slots are skipped;
 * anything out of bounds is counted, never read past the mappings. The
 * caller checks what a back-reference names and what the bytes decode to.
 * @return 0, -EINVAL for lengths that are not a zdense's, or fn's non-zero
 * return (which stops the scan).
 */
int zdense_scan(const void *mem, uint64_t mem_len, const void *blk, uint64_t blk_len,
		int (*fn)(void *arg, const struct zdense_found *f), void *arg,
		struct zdense_scan_stats *st);

/* Free the allocator and every frame. NULL ok. No other call may be running. */
void zdense_destroy(struct zdense *zd);

/*
 * Store len bytes (1..ZDENSE_MAX_LEN, or ZDENSE_HUGE_LEN: a raw page in a
 * frame of its own) as a new page of the given kind with
 * back-reference ref; its block moves to the tail of its kind's LRU.
 * @return 0 with *handle set; -ENOSPC when no block of its class has a free
 * slot and a new block would pass the budget; -EINVAL on a bad len.
 */
int zdense_store(struct zdense *zd, bool pers, const void *data, unsigned len, struct zbud_ref ref,
		 uint64_t *handle);

/* The bytes of a live page (or of a zombie's page), and their length; NULL if none. */
const void *zdense_data(const struct zdense *zd, uint64_t handle, unsigned *len);

/* Release a page; a bad or dead handle is ignored and counted. */
void zdense_release(struct zdense *zd, uint64_t handle);

/* Take the least recently used block of a kind as a zombie. @return 0 or -ENOENT. */
int zdense_zombify_lru(struct zdense *zd, bool pers, struct zalloc_victim *v);

/*
 * For weighted eviction (zcache, issue 14), as zbud's: the first k blocks of
 * a kind's LRU with one live page's back-reference each; zombify a given
 * block if still in use, of that kind, on its LRU and not a zombie; move one
 * to its LRU's tail. @return count / 0 or -ENOENT.
 */
unsigned zdense_lru_peek(struct zdense *zd, bool pers, unsigned k, uint32_t *blocks,
			 struct zbud_ref *refs);
int zdense_zombify_block(struct zdense *zd, bool pers, uint32_t b, struct zalloc_victim *v);
int zdense_lru_requeue(struct zdense *zd, bool pers, uint32_t b);

/* End a zombie (v->frame): freed when empty, else back on its lists. */
void zdense_zombie_done(struct zdense *zd, uint32_t block);

void zdense_get_stats(struct zdense *zd, struct zalloc_stats *s);

/*
 * The budget now: blocks are refused past frames (at least a block's worth,
 * at most what zdense_create was given); what is stored stays (the caller
 * makes room). The stats' max_frames is this limit.
 */
void zdense_set_limit(struct zdense *zd, uint32_t frames);

/*
 * Give the memory of free units back to the kernel while more than keep
 * frames are faulted in, at most max frames a call (the lock is held
 * meanwhile). @return frames given back.
 */
uint64_t zdense_trim(struct zdense *zd, uint64_t keep, uint64_t max);

/* A size class, for tests and benchmarks: slot bytes, frames a block, slots a block. */
struct zdense_class {
	unsigned slot, frames, slots;
};

/* @return the class a page of len bytes goes to (0 with *c unset for a bad len). */
int zdense_class_of(unsigned len, struct zdense_class *c);

#endif /* RAMSTER_ZDENSE_H */
