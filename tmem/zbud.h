/*
 * zbud.h - the pageframe allocator of the local tier.
 *
 * Each 4096-byte frame holds at most two compressed pages ("buddies"): the
 * first at the start of the frame, the second at its end, both in 64-byte
 * chunks. Frames with one buddy sit on unbuddied lists indexed by their free
 * chunks; a store fills the fullest unbuddied frame that fits, else takes a
 * free frame within the budget. Frames of ephemeral and persistent pages are
 * kept apart, each kind on its own LRU list (least recently stored first).
 *
 * A zombie is a frame taken off its lists by zbud_zombify_lru(): nothing new
 * is stored in it and its memory (and so every buddy's bytes) stays readable
 * until its holder calls zbud_zombie_done(), even if buddies are released in
 * between. Eviction and the remotify thread work on zombies.
 *
 * Locking: one mutex inside guards every list and counter; each function
 * takes it. zbud_data() takes no lock: the caller must own the buddy (it is
 * referenced from an entry it has locked) or hold the zombie.
 */
#ifndef RAMSTER_ZBUD_H
#define RAMSTER_ZBUD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZBUD_FRAME_SIZE 4096
#define ZBUD_CHUNK_SIZE 64
#define ZBUD_NCHUNKS (ZBUD_FRAME_SIZE / ZBUD_CHUNK_SIZE)
/* The largest buddy: a frame less one chunk, so two buddies can always pair. */
#define ZBUD_BUDDY_MAX (ZBUD_FRAME_SIZE - ZBUD_CHUNK_SIZE)

/*
 * A buddy is named by a handle: (frame number << 1) | buddy (0 first, 1 last).
 * Frame numbers are below the max_frames given to zbud_create().
 */
#define ZBUD_HANDLE(frame, buddy) (((uint32_t)(frame) << 1) | (uint32_t)(buddy))
#define ZBUD_HANDLE_FRAME(h) ((uint32_t)(h) >> 1)
#define ZBUD_HANDLE_BUDDY(h) ((unsigned)(h) & 1u)

/* The owner's back-reference, stored with each buddy; opaque to zbud. */
struct zbud_ref {
	uint32_t objno;
	uint32_t index;
};

struct zbud;

/*
 * Make an allocator of at most max_frames frames (address space is reserved
 * at once, memory is touched only when a frame is first used).
 * @return the allocator, or NULL with errno set.
 */
struct zbud *zbud_create(uint32_t max_frames);

/* Free the allocator and every frame. NULL ok. No other call may be running. */
void zbud_destroy(struct zbud *zb);

/*
 * Store len bytes (1..ZBUD_BUDDY_MAX) of data as a new buddy of the given
 * kind with back-reference ref, and move its frame to the tail of its kind's
 * LRU. @return 0 with *handle set; -ENOSPC when no unbuddied frame fits and
 * no free frame is left within the budget; -EINVAL on a bad len.
 */
int zbud_store(struct zbud *zb, bool pers, const void *data, unsigned len, struct zbud_ref ref,
	       uint32_t *handle);

/* The bytes of a live buddy (or of a zombie's buddy), and their length. */
const void *zbud_data(const struct zbud *zb, uint32_t handle, unsigned *len);

/*
 * Release a buddy. A frame left empty returns to the free list, unless it is
 * a zombie: then it is freed by zbud_zombie_done().
 */
void zbud_release(struct zbud *zb, uint32_t handle);

/* What zbud_zombify_lru() took. */
struct zbud_victim {
	uint32_t frame;
	unsigned n;                 /* live buddies: 1 or 2 */
	uint32_t handle[2];         /* their handles */
	struct zbud_ref ref[2];     /* and back-references */
	unsigned len[2];            /* and lengths */
	const void *data[2];        /* and bytes (kept until zbud_zombie_done) */
};

/*
 * Take the least recently used frame of a kind off every list as a zombie.
 * @return 0 with *v filled; -ENOENT when that LRU list is empty.
 */
int zbud_zombify_lru(struct zbud *zb, bool pers, struct zbud_victim *v);

/*
 * The first k frames of a kind's LRU (least recent first), each with the
 * back-reference of one live buddy, for a caller choosing a victim among
 * them (zcache's weighted eviction). @return how many were filled.
 */
unsigned zbud_lru_peek(struct zbud *zb, bool pers, unsigned k, uint32_t *frames,
		       struct zbud_ref *refs);

/* Move frame (in use, of that kind, on its LRU) to the LRU's tail. @return 0, or -ENOENT. */
int zbud_lru_requeue(struct zbud *zb, bool pers, uint32_t frame);

/*
 * zbud_zombify_lru for a given frame, if it is still in use, of that kind,
 * on its LRU and not a zombie. @return 0, or -ENOENT.
 */
int zbud_zombify_frame(struct zbud *zb, bool pers, uint32_t frame, struct zbud_victim *v);

/*
 * End a zombie: a frame whose buddies were all released is freed; one with a
 * live buddy goes back on its lists (at the LRU tail).
 */
void zbud_zombie_done(struct zbud *zb, uint32_t frame);

/* Figures, for stats. */
struct zbud_stats {
	uint64_t frames;        /* frames in use, zombies included */
	uint64_t frames_eph;    /* of those, holding ephemeral pages */
	uint64_t frames_pers;   /* of those, holding persistent pages */
	uint64_t zombies;       /* frames held as zombies now */
	uint64_t frames_touched;/* frames ever used: faulted in and kept (free ones too) */
	uint64_t buddied;       /* frames with two buddies */
	uint64_t buddies;       /* live buddies (stored compressed pages) */
	uint64_t bytes;         /* compressed bytes in live buddies */
	uint64_t max_frames;    /* the budget */
	uint64_t meta_bytes;    /* RAM the allocator uses for bookkeeping now */
	uint64_t bad_handles;   /* releases of bad or dead handles, ignored (a bug) */
};
void zbud_get_stats(struct zbud *zb, struct zbud_stats *s);

/*
 * The budget now: frames are refused past it (at most what zbud_create was
 * given); what is stored stays. The stats' max_frames is this limit. zbud
 * gives no memory back (its free frames stay faulted in): zdense does.
 */
void zbud_set_limit(struct zbud *zb, uint32_t frames);

#endif /* RAMSTER_ZBUD_H */
