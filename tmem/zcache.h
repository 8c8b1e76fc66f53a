/*
 * zcache.h - the local tier: tmem's data side on compressed zbud frames.
 *
 * A put is compressed (LZO1X-1); a zero-filled page takes no frame; a poorly
 * compressible page is refused. Within the budget (local_mb) a put takes
 * space in an unbuddied frame or a free one; when none is left, it eats the
 * least recently used ephemeral frame (evicting its pages). Persistent data
 * is never evicted: with no ephemeral frame left, the put is refused.
 *
 * The descriptor (pampd) of a page is one 64-bit word, encoded here only.
 */
#ifndef RAMSTER_ZCACHE_H
#define RAMSTER_ZCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "tmem/tmem.h"

struct zcache_config {
	uint64_t local_mb;          /* budget of compressed frames, MiB (> 0) */
	/* Poor-compression thresholds as fractions of a page, in 1/1024ths;
	 * 0 means the default (896 = 7/8, 640 = 5/8, 640 = 5/8). */
	unsigned pers_max_frac;
	unsigned pers_mean_max_frac;
	unsigned pers_mean_limit_frac;
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
	uint64_t stored_pages;       /* compressed pages in frames now */
	uint64_t compressed_bytes;   /* their compressed bytes */
	uint64_t refused_poor;       /* puts refused: poorly compressible */
	uint64_t refused_nospace;    /* puts refused: no room (persistent data fills the tier) */
	uint64_t refused_error;      /* puts refused: compressor failure */
	uint64_t evicted_frames;     /* ephemeral frames eaten to make room */
	uint64_t evicted_pages;      /* ephemeral pages lost with them */
	uint64_t evict_busy;         /* eviction attempts that met a busy bucket */
	uint64_t decompress_errors;  /* gets whose data did not decompress (-EIO) */
	uint64_t frames;             /* frames in use */
	uint64_t frames_eph;
	uint64_t frames_pers;
	uint64_t zombies;
	uint64_t budget_frames;      /* local_mb in frames */
	uint64_t meta_bytes;         /* bookkeeping RAM of zbud and tmem together */
	uint64_t bad_handles;        /* zbud releases of bad handles (a bug if not 0) */
};
void zcache_get_stats(struct zcache *z, struct zcache_stats *s);

/*
 * Call fn(arg, name, value, help) for every counter of the tier, tmem and
 * zbud, with stable names (as `ramsterctl stats` prints them).
 */
void zcache_foreach_stat(struct zcache *z,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

#endif /* RAMSTER_ZCACHE_H */
