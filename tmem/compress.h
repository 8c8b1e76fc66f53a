/*
 * compress.h - page compression for the local tier: LZO1X-1 (liblzo2) or
 * LZ4 (liblz4), the zero-page test and the poor-compression policy.
 *
 * Work memory is per thread (thread-local, allocated on first use), so every
 * function here may be called from any thread without a lock.
 */
#ifndef RAMSTER_COMPRESS_H
#define RAMSTER_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COMPRESS_PAGE_SIZE 4096
/* Worst-case LZO1X output for one page: size for compress_page's dst
 * (LZ4's bound, 4096 + 4096/255 + 16, is smaller). */
#define COMPRESS_BOUND (COMPRESS_PAGE_SIZE + COMPRESS_PAGE_SIZE / 16 + 64 + 3)

/* The compressors; a node's tier uses one for all its pages (config key compressor). */
enum compress_algo { COMPRESS_LZO = 0, COMPRESS_LZ4 = 1 };

/* Call once before any other function. @return 0, or -EINVAL if liblzo2 fails its init. */
int compress_init(void);

/* @return true if all 4096 bytes of page are zero. */
bool compress_page_is_zero(const void *page);

/*
 * Compress one 4096-byte page into dst (COMPRESS_BOUND bytes).
 * @return the compressed length (> 0), or -EIO on an LZO failure.
 */
int compress_page(const void *page, void *dst);

/*
 * Decompress src (exactly len bytes) into one 4096-byte page.
 * @return 0, or -EIO if the data is corrupt or does not give exactly one page.
 */
int compress_unpage(const void *src, size_t len, void *page);

/* @return true for a known compressor. */
bool compress_algo_ok(enum compress_algo algo);

/* @return the name ("lzo", "lz4"). */
const char *compress_algo_name(enum compress_algo algo);

/* @return 0 with *algo set from "lzo" or "lz4", or -EINVAL. */
int compress_algo_parse(const char *name, enum compress_algo *algo);

/* compress_page / compress_unpage with the given compressor. */
int compress_page_algo(enum compress_algo algo, const void *page, void *dst);
int compress_unpage_algo(enum compress_algo algo, const void *src, size_t len, void *page);

/* Thresholds of the poor-compression policy, in bytes of compressed size. */
struct compress_policy {
	unsigned pers_max;      /* persistent: refuse above this (default 7/8 page) */
	unsigned pers_mean_max; /* persistent: refuse above this while ... */
	unsigned pers_mean_limit; /* ... the mean persistent size is above this (5/8, 5/8) */
	unsigned eph_max;       /* ephemeral: refuse above this (what one buddy holds) */
};

/* Fill p with the defaults above; eph_max is buddy_max (the zbud limit). */
void compress_policy_default(struct compress_policy *p, unsigned buddy_max);

/*
 * Whether a compressed page of len bytes is too poor to keep.
 * mean_pers: the current mean compressed size of stored persistent pages
 * (0 when none). @return true to refuse.
 */
bool compress_policy_refuse(const struct compress_policy *p, bool persistent, unsigned len,
			    unsigned mean_pers);

#endif /* RAMSTER_COMPRESS_H */
