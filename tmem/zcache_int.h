/*
 * zcache_int.h - private to the tier's files: zcache.c (descriptors, puts,
 * gets, eviction, life cycle) and zcache_remote.c (the remote tier's half:
 * remotify take and commit, repatriate, moves). The descriptor format and
 * struct zcache are written once, here.
 */
#ifndef RAMSTER_TMEM_ZCACHE_INT_H
#define RAMSTER_TMEM_ZCACHE_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tmem/compress.h"
#include "tmem/replica.h"
#include "tmem/zalloc.h"
#include "tmem/zcache.h"

/* ---- descriptors ---------------------------------------------------------- */

enum pampd_kind { PAMPD_ZBUD = 1, PAMPD_ZERO = 2, PAMPD_REMOTE = 3 };

/*
 * ZBUD:   bits 2..63 the allocator's handle (zbud or zdense).
 * REMOTE: bit 29 clear: one holder: bits 2..7 node - 1, 8..15 epoch,
 *         16..28 compressed length, 32..63 checksum (adler32 of the bytes; when
 *         sealed, zcache_set_sealed: the low 32 bits of the owner's seal version,
 *         node/remote/seal.h, and the caller has opened the seal before repatriate_finish);
 *         bit 29 set: several holders: the rest is a replica table id;
 *         bit 30 set (29 clear): data slot bits 2..4 of the stripe whose id
 *         (node/remote/stripe.h) is bits 32..63 (number) and 5..28 (generation).
 */
#define PAMPD_KIND(p) ((unsigned)((p)&3u))
#define PAMPD_HANDLE(p) ((p) >> 2)
#define PAMPD_MAKE_ZBUD(h) (((uint64_t)(h) << 2) | PAMPD_ZBUD)
#define PAMPD_MAKE_ZERO ((uint64_t)PAMPD_ZERO)
#define PAMPD_REC_BIT (1ull << 29)
#define PAMPD_IS_REC(p) (PAMPD_KIND(p) == PAMPD_REMOTE && ((p)&PAMPD_REC_BIT))
#define PAMPD_REC_ID(p) ((p) & ~3ull)
#define PAMPD_STRIPE_BIT (1ull << 30)
#define PAMPD_IS_STRIPE(p) \
	(PAMPD_KIND(p) == PAMPD_REMOTE && !((p)&PAMPD_REC_BIT) && ((p)&PAMPD_STRIPE_BIT))
#define PAMPD_STRIPE_SLOT(p) ((unsigned)(((p) >> 2) & 7))
#define PAMPD_STRIPE_ID(p) (((p) >> 32) | (((p) >> 5) & 0xffffffull) << 32)

/* Victims tried by one put before it is refused for want of room. */
#define EVICT_TRIES 16

/* ---- structures ------------------------------------------------------------ */

struct zcache {
	struct tmem *tmem;
	bool crash;                       /* zcache_config.crash: the tier outlives a crash */
	void *za;                         /* the allocator (zbud or zdense) */
	const struct zalloc_ops *za_ops;
	enum compress_algo algo;
	struct compress_policy policy;
	atomic_uint_fast64_t budget_frames; /* local_mb, or the elastic tier's budget now */
	uint64_t capacity_frames;           /* what the allocator was made with: the most */
	atomic_uint_fast64_t trimmed_frames; /* frames whose memory zcache_trim gave back */

	atomic_uint_fast64_t pers_pages;  /* compressed persistent pages ... */
	atomic_uint_fast64_t pers_bytes;  /* ... and their bytes: the policy's mean */
	atomic_uint_fast64_t zero_pages, zero_puts;
	atomic_uint_fast64_t raw_pages, raw_puts; /* pages kept raw (huge class) */
	atomic_uint_fast64_t refused_poor, refused_nospace, refused_error, refused_meta;
	atomic_uint_fast64_t evicted_frames, evicted_pages, evict_busy, evicted_over_share;
	atomic_uint_fast64_t decompress_errors;
	atomic_uint_fast64_t remote_pages, remotified, remotify_stale, repatriated, brought_home;
	atomic_uint_fast64_t checksum_errors, remote_lost;

	struct replica_table *replicas;         /* holders of pages with several copies */
	const struct zcache_remote_ops *remote; /* the collective, or NULL */
	void *remote_arg;
	atomic_uint_fast64_t home_limit;        /* frames; bring pages home below it (any thread) */
	atomic_uint_fast64_t compact_limit;     /* the same for a stripe's compaction */
	bool sealed;                            /* checksum fields hold seal versions (set before
						 * the remotify thread starts, read-only after) */
};

#define CNT_ADD(c, v) atomic_fetch_add_explicit(&(c), (v), memory_order_relaxed)
#define CNT_SUB(c, v) atomic_fetch_sub_explicit(&(c), (v), memory_order_relaxed)
#define CNT_INC(c) CNT_ADD(c, 1)
#define CNT_GET(c) atomic_load_explicit(&(c), memory_order_relaxed)

/* ---- remote descriptors ------------------------------------------------------ */

static inline uint64_t pampd_make_single(unsigned node, unsigned epoch, unsigned len, uint32_t checksum)
{
	return PAMPD_REMOTE | (uint64_t)((node - 1) & 63) << 2 | (uint64_t)(epoch & 255) << 8 |
	       (uint64_t)(len & 8191) << 16 | (uint64_t)checksum << 32;
}

static inline uint64_t pampd_make_stripe(uint64_t id, unsigned slot)
{
	return PAMPD_REMOTE | PAMPD_STRIPE_BIT | (uint64_t)(slot & 7) << 2 |
	       ((id >> 32) & 0xffffffull) << 5 | (uint64_t)(uint32_t)id << 32;
}

/* zcache.c */
/* Is this stored length a raw page (the allocator's huge class)? */
bool zcache_is_raw(const struct zcache *z, unsigned len);
/* Bring a stored page (compressed, raw, or the zero mark) back into page. @return 0 or -EIO. */
int zcache_unpage(const struct zcache *z, const void *data, size_t len, void *page);
/* A persistent page of len stored bytes comes (+1) or goes (-1): the policy's mean, raw counts. */
void zcache_account(struct zcache *z, bool pers, unsigned len, int dir);

#endif /* RAMSTER_TMEM_ZCACHE_INT_H */
