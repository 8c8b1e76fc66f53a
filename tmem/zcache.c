/*
 * zcache.c - the local tier: tmem's data side on LZO-compressed zbud frames.
 *
 * A descriptor (pampd) is one 64-bit word: the low 2 bits say what it is
 * (a zbud buddy, a zero-filled page; the collective adds remote pages), the
 * high 32 bits carry the zbud handle. Eviction eats the least recently used
 * ephemeral frame through tmem_replace() with trylock, so it never waits on
 * a bucket while the put that needs the room holds its own (tmem.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/compress.h"
#include "tmem/zbud.h"
#include "tmem/zcache.h"

/* ---- descriptors ---------------------------------------------------------- */

enum pampd_kind { PAMPD_ZBUD = 1, PAMPD_ZERO = 2 };

#define PAMPD_KIND(p) ((unsigned)((p)&3u))
#define PAMPD_HANDLE(p) ((uint32_t)((p) >> 32))
#define PAMPD_MAKE_ZBUD(h) (((uint64_t)(h) << 32) | PAMPD_ZBUD)
#define PAMPD_MAKE_ZERO ((uint64_t)PAMPD_ZERO)

/* Victims tried by one put before it is refused for want of room. */
#define EVICT_TRIES 16

/* ---- structures ------------------------------------------------------------ */

struct zcache {
	struct tmem *tmem;
	struct zbud *zbud;
	struct compress_policy policy;
	uint64_t budget_frames;

	atomic_uint_fast64_t pers_pages;  /* compressed persistent pages ... */
	atomic_uint_fast64_t pers_bytes;  /* ... and their bytes: the policy's mean */
	atomic_uint_fast64_t zero_pages, zero_puts;
	atomic_uint_fast64_t refused_poor, refused_nospace, refused_error;
	atomic_uint_fast64_t evicted_frames, evicted_pages, evict_busy;
	atomic_uint_fast64_t decompress_errors;
};

#define CNT_ADD(c, v) atomic_fetch_add_explicit(&(c), (v), memory_order_relaxed)
#define CNT_SUB(c, v) atomic_fetch_sub_explicit(&(c), (v), memory_order_relaxed)
#define CNT_INC(c) CNT_ADD(c, 1)
#define CNT_GET(c) atomic_load_explicit(&(c), memory_order_relaxed)

/* Where a put compresses to; one per thread. */
static __thread unsigned char zcache_cbuf[COMPRESS_BOUND];

/* ---- eviction ---------------------------------------------------------------- */

/*
 * Eat the least recently used ephemeral frame: evict its pages from tmem and
 * free it. @return 0 when a frame was freed; -ENOSPC when none could be.
 */
static int zcache_evict_one(struct zcache *z)
{
	struct zbud_victim v;
	unsigned tries, i;

	for (tries = 0; tries < EVICT_TRIES; tries++) {
		bool all = true;

		if (zbud_zombify_lru(z->zbud, false, &v))
			return -ENOSPC;
		for (i = 0; i < v.n; i++) {
			struct tmem_ref ref = { v.ref[i].objno, v.ref[i].index };
			int r = tmem_replace(z->tmem, ref, PAMPD_MAKE_ZBUD(v.handle[i]), 0, true);

			if (r == 0) {
				zbud_release(z->zbud, v.handle[i]);
				CNT_INC(z->evicted_pages);
			} else if (r == -EBUSY) {
				all = false;
				CNT_INC(z->evict_busy);
			}
			/* -ENOENT: the owner flushed it meanwhile and released it. */
		}
		zbud_zombie_done(z->zbud, v.frame);
		if (all) {
			CNT_INC(z->evicted_frames);
			return 0;
		}
	}
	return -ENOSPC;
}

/* ---- the data side (tmem_pamops) ------------------------------------------------ */

static int zcache_create_pampd(void *ctx, bool pers, const void *page, struct tmem_ref ref,
			       uint64_t *pampd)
{
	struct zcache *z = ctx;
	uint64_t npers, mean = 0;
	uint32_t handle;
	unsigned tries;
	int len, ret;

	if (compress_page_is_zero(page)) {
		CNT_INC(z->zero_puts);
		CNT_INC(z->zero_pages);
		*pampd = PAMPD_MAKE_ZERO;
		return 0;
	}
	len = compress_page(page, zcache_cbuf);
	if (len <= 0) {
		CNT_INC(z->refused_error);
		return -EIO;
	}
	npers = CNT_GET(z->pers_pages);
	if (pers && npers)
		mean = CNT_GET(z->pers_bytes) / npers;
	if (compress_policy_refuse(&z->policy, pers, (unsigned)len, (unsigned)mean)) {
		CNT_INC(z->refused_poor);
		return -E2BIG;
	}
	for (tries = 0;; tries++) {
		ret = zbud_store(z->zbud, pers, zcache_cbuf, (unsigned)len,
				 (struct zbud_ref){ ref.objno, ref.index }, &handle);
		if (ret != -ENOSPC || tries == EVICT_TRIES)
			break;
		/* Both kinds may eat ephemeral frames; nothing evicts persistent data. */
		if (zcache_evict_one(z))
			break;
	}
	if (ret) {
		if (ret == -ENOSPC)
			CNT_INC(z->refused_nospace);
		else
			CNT_INC(z->refused_error);
		return ret;
	}
	if (pers) {
		CNT_INC(z->pers_pages);
		CNT_ADD(z->pers_bytes, (unsigned)len);
	}
	*pampd = PAMPD_MAKE_ZBUD(handle);
	return 0;
}

static int zcache_get_data(void *ctx, bool pers, uint64_t pampd, void *page)
{
	struct zcache *z = ctx;
	const void *data;
	unsigned len;

	switch (PAMPD_KIND(pampd)) {
	case PAMPD_ZERO:
		memset(page, 0, COMPRESS_PAGE_SIZE);
		return 0;
	case PAMPD_ZBUD:
		data = zbud_data(z->zbud, PAMPD_HANDLE(pampd), &len);
		if (!data || compress_unpage(data, len, page)) {
			CNT_INC(z->decompress_errors);
			return -EIO;
		}
		return 0;
	default:
		return -EIO;
	}
}

static void zcache_free_pampd(void *ctx, bool pers, uint64_t pampd)
{
	struct zcache *z = ctx;
	unsigned len = 0;

	switch (PAMPD_KIND(pampd)) {
	case PAMPD_ZERO:
		CNT_SUB(z->zero_pages, 1);
		break;
	case PAMPD_ZBUD:
		if (pers && zbud_data(z->zbud, PAMPD_HANDLE(pampd), &len)) {
			CNT_SUB(z->pers_pages, 1);
			CNT_SUB(z->pers_bytes, len);
		}
		zbud_release(z->zbud, PAMPD_HANDLE(pampd));
		break;
	default:
		break;
	}
}

static const struct tmem_pamops zcache_pamops = {
	.create = zcache_create_pampd,
	.get_data = zcache_get_data,
	.free = zcache_free_pampd,
};

/* ---- life cycle -------------------------------------------------------------------- */

static unsigned frac_bytes(unsigned frac, unsigned def)
{
	return (frac ? frac : def) * COMPRESS_PAGE_SIZE / 1024;
}

struct zcache *zcache_create(const struct zcache_config *cfg)
{
	struct zcache *z;
	uint64_t frames;

	if (!cfg || cfg->local_mb == 0 || cfg->local_mb > (1ull << 23) ||
	    cfg->pers_max_frac > 1024 || cfg->pers_mean_max_frac > 1024 ||
	    cfg->pers_mean_limit_frac > 1024) {
		errno = EINVAL;
		return NULL;
	}
	frames = cfg->local_mb * (1024 * 1024 / ZBUD_FRAME_SIZE);
	if (compress_init()) {
		errno = EINVAL;
		return NULL;
	}
	z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	z->budget_frames = frames;
	compress_policy_default(&z->policy, ZBUD_BUDDY_MAX);
	z->policy.pers_max = frac_bytes(cfg->pers_max_frac, 896);
	z->policy.pers_mean_max = frac_bytes(cfg->pers_mean_max_frac, 640);
	z->policy.pers_mean_limit = frac_bytes(cfg->pers_mean_limit_frac, 640);
	z->zbud = zbud_create((uint32_t)frames);
	if (!z->zbud)
		goto fail;
	z->tmem = tmem_create(&zcache_pamops, z);
	if (!z->tmem)
		goto fail_zbud;
	return z;

fail_zbud:
	zbud_destroy(z->zbud);
fail:
	free(z);
	return NULL;
}

void zcache_destroy(struct zcache *z)
{
	if (!z)
		return;
	tmem_destroy(z->tmem);
	zbud_destroy(z->zbud);
	free(z);
}

struct tmem *zcache_tmem(struct zcache *z)
{
	return z->tmem;
}

/* ---- stats ---------------------------------------------------------------------------- */

void zcache_get_stats(struct zcache *z, struct zcache_stats *s)
{
	struct zbud_stats zs;
	struct tmem_stats ts;

	zbud_get_stats(z->zbud, &zs);
	tmem_get_stats(z->tmem, &ts);
	s->zero_pages = CNT_GET(z->zero_pages);
	s->zero_puts = CNT_GET(z->zero_puts);
	s->stored_pages = zs.buddies;
	s->compressed_bytes = zs.bytes;
	s->refused_poor = CNT_GET(z->refused_poor);
	s->refused_nospace = CNT_GET(z->refused_nospace);
	s->refused_error = CNT_GET(z->refused_error);
	s->evicted_frames = CNT_GET(z->evicted_frames);
	s->evicted_pages = CNT_GET(z->evicted_pages);
	s->evict_busy = CNT_GET(z->evict_busy);
	s->decompress_errors = CNT_GET(z->decompress_errors);
	s->frames = zs.frames;
	s->frames_eph = zs.frames_eph;
	s->frames_pers = zs.frames_pers;
	s->zombies = zs.zombies;
	s->budget_frames = z->budget_frames;
	s->meta_bytes = zs.meta_bytes + ts.meta_bytes + sizeof(*z);
	s->bad_handles = zs.bad_handles;
}

void zcache_foreach_stat(struct zcache *z,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg)
{
	struct zcache_stats s;
	struct tmem_stats t;

	tmem_get_stats(z->tmem, &t);
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
#undef T
#define Z(f, h) fn(arg, "tier_" #f, s.f, h)
	Z(stored_pages, "compressed pages in frames now");
	Z(compressed_bytes, "their compressed bytes");
	Z(zero_pages, "zero-filled pages held now (no frame)");
	Z(zero_puts, "puts of zero-filled pages");
	Z(refused_poor, "puts refused: poorly compressible");
	Z(refused_nospace, "puts refused: no room left");
	Z(refused_error, "puts refused: compressor error");
	Z(evicted_frames, "ephemeral frames eaten to make room");
	Z(evicted_pages, "ephemeral pages evicted with them");
	Z(evict_busy, "eviction attempts that met a busy bucket");
	Z(decompress_errors, "pages that failed to decompress (-EIO)");
	Z(frames, "frames in use");
	Z(frames_eph, "frames holding ephemeral pages");
	Z(frames_pers, "frames holding persistent pages");
	Z(zombies, "frames held as zombies");
	Z(budget_frames, "the budget (local_mb) in frames");
	Z(meta_bytes, "bookkeeping RAM beyond the frames");
	Z(bad_handles, "zbud releases of bad handles (a bug if not 0)");
#undef Z
}
