/*
 * zalloc.h - the local tier's choice of pageframe allocator.
 *
 * Two allocators store compressed pages in 4096-byte frames taken from one
 * budget, keep frames of ephemeral and persistent pages apart on LRU lists,
 * and hand whole frames out as zombies (eviction, remotify):
 *   - zbud (tmem/zbud.h): at most two pages a frame; the reference.
 *   - zdense (tmem/zdense.h): size classes, as many pages a frame (or a block
 *     of up to four frames) as their sizes allow; the default.
 * zcache (and tests, benchmarks) call them through struct zalloc_ops, so a
 * config key picks one and every path above works with both.
 */
#ifndef RAMSTER_ZALLOC_H
#define RAMSTER_ZALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "tmem/zbud.h"

enum zalloc_kind { ZALLOC_DENSE = 0, ZALLOC_ZBUD = 1 };

/* The most pages one zombie (a frame, or a block of frames) can carry. */
#define ZALLOC_VICTIM_MAX 128

/*
 * What a zombify took: the unit's live pages (handles, back-references,
 * lengths, and where their bytes are), read under the allocator's lock. A
 * zombie's bytes stay where they are, unchanged, until zombie_done, even for
 * a page released meanwhile; so the taker reads data[i] without the lock,
 * and never asks data() (which reads what a concurrent release writes).
 */
struct zalloc_victim {
	uint32_t frame;	 /* names the zombie for zombie_done */
	unsigned frames; /* 4096-byte frames it spans */
	unsigned n;	 /* live pages in it */
	uint64_t handle[ZALLOC_VICTIM_MAX];
	struct zbud_ref ref[ZALLOC_VICTIM_MAX];
	unsigned len[ZALLOC_VICTIM_MAX];
	const void *data[ZALLOC_VICTIM_MAX];
};

/* Figures of either allocator. */
struct zalloc_stats {
	uint64_t frames; /* frames in use, zombies included (the budget's count) */
	uint64_t frames_eph;
	uint64_t frames_pers;
	uint64_t frames_touched; /* frames whose memory was ever faulted in and is kept */
	uint64_t zombies;	 /* units (frames or blocks) held as zombies */
	uint64_t objects;	 /* live compressed pages */
	uint64_t bytes;		 /* their compressed bytes */
	uint64_t max_frames;	 /* the budget */
	uint64_t meta_bytes;	 /* bookkeeping RAM beyond the frames */
	uint64_t bad_handles;	 /* releases of bad or dead handles, ignored (a bug) */
};

/*
 * The calls, with zbud.h's contracts (see there), on either allocator. A
 * handle is below 2^62 (zbud's fit 32 bits, zdense's 38), so the tier's
 * descriptor carries it beside its two kind bits.
 */
struct zalloc_ops {
	const char *name;
	unsigned max_len; /* the largest compressed page it stores */
	/* Raw pages: 4096 (a whole frame each, zdense's huge class), or 0 when it has none. */
	unsigned huge_len;
	void *(*create)(uint32_t max_frames);
	void (*destroy)(void *a);
	int (*store)(void *a, bool pers, const void *data, unsigned len, struct zbud_ref ref,
		     uint64_t *handle);
	const void *(*data)(const void *a, uint64_t handle, unsigned *len);
	void (*release)(void *a, uint64_t handle);
	int (*zombify_lru)(void *a, bool pers, struct zalloc_victim *v);
	/* weighted eviction (issue 14): the first k units of a kind's LRU with one live
	 * page's back-reference each; zombify a given unit (-ENOENT if it changed);
	 * move a unit to its LRU's tail */
	unsigned (*lru_peek)(void *a, bool pers, unsigned k, uint32_t *units, struct zbud_ref *refs);
	int (*zombify_unit)(void *a, bool pers, uint32_t unit, struct zalloc_victim *v);
	int (*lru_requeue)(void *a, bool pers, uint32_t unit);
	void (*zombie_done)(void *a, uint32_t frame);
	void (*get_stats)(void *a, struct zalloc_stats *s);
	/* the budget now, below what create was given (an elastic tier), and the
	 * memory of free units given back while more than keep frames are faulted
	 * in, at most max frames a call (@return frames given back; zbud: 0) */
	void (*set_limit)(void *a, uint32_t frames);
	uint64_t (*trim)(void *a, uint64_t keep, uint64_t max);
};

/* @return the ops of an allocator, or NULL for an unknown kind. */
const struct zalloc_ops *zalloc_ops(enum zalloc_kind kind);

/* @return the kind named "dense" or "zbud" (0), or -EINVAL. */
int zalloc_parse(const char *name, enum zalloc_kind *kind);

#endif /* RAMSTER_ZALLOC_H */
