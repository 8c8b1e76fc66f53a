/*
 * zcache.c - the local tier: tmem's data side on compressed frames (zdense or
 * zbud, through struct zalloc_ops; LZO1X-1 or LZ4).
 *
 * A descriptor (pampd) is one 64-bit word: the low 2 bits say what it is
 * (a page in a frame, a zero-filled page; the collective adds remote pages),
 * the rest carries the allocator's handle. Eviction eats the least recently used
 * ephemeral frame through tmem_replace() with trylock, so it never waits on
 * a bucket while the put that needs the room holds its own (tmem.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <lzo/lzoconf.h>

#include "tmem/compress.h"
#include "tmem/replica.h"
#include "tmem/zalloc.h"
#include "tmem/zcache.h"
#include "tmem/zcache_int.h"
#include "tmem/zdense.h"

/* ---- remote descriptors ------------------------------------------------------ */

int zcache_remote_holders(struct zcache *z, uint64_t pampd, struct replica_set *r)
{
	if (PAMPD_KIND(pampd) != PAMPD_REMOTE)
		return -EINVAL;
	if (PAMPD_IS_REC(pampd))
		return replica_read(z->replicas, PAMPD_REC_ID(pampd), r, NULL);
	if (PAMPD_IS_STRIPE(pampd)) {
		if (!z->remote || !z->remote->stripe_holder)
			return -ENOENT;
		return z->remote->stripe_holder(z->remote_arg, PAMPD_STRIPE_ID(pampd),
						PAMPD_STRIPE_SLOT(pampd), r);
	}
	memset(r, 0, sizeof(*r));
	r->n = 1;
	r->node[0] = (uint8_t)(((pampd >> 2) & 63) + 1);
	r->epoch[0] = (uint8_t)((pampd >> 8) & 255);
	r->len = (unsigned)((pampd >> 16) & 8191);
	r->checksum = (uint32_t)(pampd >> 32);
	return 0;
}

bool zcache_pampd_is_remote(uint64_t pampd)
{
	return PAMPD_KIND(pampd) == PAMPD_REMOTE;
}

bool zcache_pampd_stripe(uint64_t pampd, uint64_t *id, unsigned *slot)
{
	if (!PAMPD_IS_STRIPE(pampd))
		return false;
	*id = PAMPD_STRIPE_ID(pampd);
	*slot = PAMPD_STRIPE_SLOT(pampd);
	return true;
}

/* The crash table's test (tmem_pamops.in_tier): a zero or remote page has no slot. */
static bool zcache_pampd_in_tier(uint64_t pampd)
{
	return PAMPD_KIND(pampd) == PAMPD_ZBUD;
}

/* Does any holder of r still have its copy (alive in the epoch it was placed in)? */
static unsigned holders_alive(struct zcache *z, const struct replica_set *r)
{
	unsigned i, n = 0;

	if (r->stripe)
		return 1; /* stripe_holder answered: K of its slots can still be had */
	for (i = 0; z->remote && i < r->n; i++)
		n += z->remote->alive(z->remote_arg, r->node[i], r->epoch[i]);
	return n;
}

void zcache_set_sealed(struct zcache *z, bool sealed)
{
	z->sealed = sealed;
}

uint32_t zcache_checksum(const void *data, size_t len)
{
	return (uint32_t)lzo_adler32(1, data, (lzo_uint)len);
}

/* Where a put compresses to; one per thread. */
static __thread unsigned char zcache_cbuf[COMPRESS_BOUND];

/* Is this stored length a raw page (the allocator's huge class)? */
bool zcache_is_raw(const struct zcache *z, unsigned len)
{
	return z->za_ops->huge_len && len == z->za_ops->huge_len;
}

/*
 * A zero page of a persistent pool in a tier that outlives a crash: one byte
 * in a slot (no compressor makes a page of one byte), so that the crash's
 * loader finds it; a descriptor of its own kind would leave no trace.
 */
static const unsigned char zcache_zero_mark[1] = {0};
#define ZCACHE_ZERO_MARK_LEN 1

/* Bring a stored page (compressed, raw, or the zero mark) back into page. @return 0 or -EIO. */
int zcache_unpage(const struct zcache *z, const void *data, size_t len, void *page)
{
	if (len == ZCACHE_ZERO_MARK_LEN && !*(const unsigned char *)data) {
		memset(page, 0, COMPRESS_PAGE_SIZE);
		return 0;
	}
	if (zcache_is_raw(z, (unsigned)len)) {
		memcpy(page, data, COMPRESS_PAGE_SIZE);
		return 0;
	}
	return compress_unpage_algo(z->algo, data, len, page);
}

/* A persistent page of len stored bytes comes (+1) or goes (-1): the policy's mean, raw counts. */
void zcache_account(struct zcache *z, bool pers, unsigned len, int dir)
{
	if (zcache_is_raw(z, len)) {
		if (dir > 0)
			CNT_INC(z->raw_pages);
		else
			CNT_SUB(z->raw_pages, 1);
		return;
	}
	if (!pers)
		return;
	if (dir > 0) {
		CNT_INC(z->pers_pages);
		CNT_ADD(z->pers_bytes, len);
	} else {
		CNT_SUB(z->pers_pages, 1);
		CNT_SUB(z->pers_bytes, len);
	}
}

/* ---- eviction ---------------------------------------------------------------- */

/*
 * Weighted eviction (issue 14), allocator-neutral (a peek at the LRU's head,
 * zombify a given frame, requeue a frame): while some owner holds more than
 * its weighted share (tmem_any_over_share), the first of the EVICT_SCAN
 * least recently used ephemeral frames whose page is an over-share owner's
 * goes; a window without one goes to the LRU's tail (a second chance, as in
 * CLOCK) and the next is looked at, EVICT_ROUNDS windows at most. Otherwise,
 * and as a fallback, the least recently used. Granularity is the frame: a
 * frame whose two buddies have different owners is judged by its first.
 * @return 0 with *v taken, or -ENOSPC (no ephemeral frame).
 */
#define EVICT_SCAN   8
#define EVICT_ROUNDS 4

static int zcache_evict_pick(struct zcache *z, struct zalloc_victim *v)
{
	const struct zalloc_ops *ops = z->za_ops;
	uint32_t frames[EVICT_SCAN];
	struct zbud_ref refs[EVICT_SCAN];
	unsigned n, i, round;

	for (round = 0; ops->lru_peek && round < EVICT_ROUNDS && tmem_any_over_share(z->tmem);
	     round++) {
		n = ops->lru_peek(z->za, false, EVICT_SCAN, frames, refs);
		for (i = 0; i < n; i++) {
			struct tmem_ref ref = { refs[i].objno, refs[i].index };

			if (!tmem_ref_over_share(z->tmem, ref))
				continue;
			if (!ops->zombify_unit(z->za, false, frames[i], v)) {
				if (round || i)
					CNT_INC(z->evicted_over_share);
				return 0;
			}
			break; /* it changed meanwhile */
		}
		if (i < n || n < EVICT_SCAN)
			break;
		for (i = 0; i < n; i++)
			(void)ops->lru_requeue(z->za, false, frames[i]);
	}
	return ops->zombify_lru(z->za, false, v) ? -ENOSPC : 0;
}

/*
 * Eat an ephemeral frame (zcache_evict_pick): evict its pages from tmem and
 * free it. @return 0 when a frame was freed; -ENOSPC when none could be.
 */
static int zcache_evict_one(struct zcache *z)
{
	struct zalloc_victim v;
	unsigned tries, i;

	for (tries = 0; tries < EVICT_TRIES; tries++) {
		bool all = true;

		if (zcache_evict_pick(z, &v))
			return -ENOSPC;
		for (i = 0; i < v.n; i++) {
			struct tmem_ref ref = { v.ref[i].objno, v.ref[i].index };
			int r = tmem_replace(z->tmem, ref, PAMPD_MAKE_ZBUD(v.handle[i]), 0, true);

			if (r == 0) {
				z->za_ops->release(z->za, v.handle[i]);
				CNT_INC(z->evicted_pages);
			} else if (r == -EBUSY) {
				all = false;
				CNT_INC(z->evict_busy);
			}
			/* -ENOENT: the owner flushed it meanwhile and released it. */
		}
		z->za_ops->zombie_done(z->za, v.frame);
		if (all) {
			CNT_INC(z->evicted_frames);
			return 0;
		}
	}
	return -ENOSPC;
}

/*
 * The handle space's bookkeeping is charged to the budget (issue 14): the
 * first 1/ZCACHE_META_FREE of the budget is an allowance (below it the check
 * is skipped: it costs the allocator's lock); past it, a put needs frames in
 * use plus the bookkeeping beyond the allowance (in frames) within the
 * budget, and eats ephemeral frames to get there; failing that it is
 * refused. So the tier holds at most the budget plus the allowance (and one
 * put's own bookkeeping). Zero pages, which take no frame, are bounded too.
 * @return 0, or -ENOSPC.
 */
#define ZCACHE_META_FREE 64

static int zcache_meta_room(struct zcache *z)
{
	uint64_t allow = z->budget_frames / ZCACHE_META_FREE;
	uint64_t meta = tmem_meta_estimate(z->tmem) / ZBUD_FRAME_SIZE;
	struct zalloc_stats zs;
	unsigned tries;

	if (meta <= allow)
		return 0;
	for (tries = 0; tries <= EVICT_TRIES; tries++) {
		z->za_ops->get_stats(z->za, &zs);
		if (zs.frames + (meta - allow) <= z->budget_frames)
			return 0;
		if (zcache_evict_one(z))
			break;
		meta = tmem_meta_estimate(z->tmem) / ZBUD_FRAME_SIZE;
		if (meta <= allow)
			return 0;
	}
	/* every such refusal is "no room"; refused_meta: the bookkeeping's share tipped it */
	CNT_INC(z->refused_nospace);
	if (zs.frames < z->budget_frames)
		CNT_INC(z->refused_meta);
	return -ENOSPC;
}

/* ---- the data side (tmem_pamops) ------------------------------------------------ */

/*
 * A page that the policy refuses, in a TMEM_KEEP_ALL pool with an allocator
 * that has a huge class, is kept all the same: compressed when it fits the
 * allocator and is refused only by the mean rule, else raw (4096 bytes in a
 * frame of its own, as zram's huge class; a page compressing above pers_max
 * saves too little to be worth decompressing).
 */
static int zcache_create_pampd(void *ctx, unsigned flags, const void *page, struct tmem_ref ref,
			       uint64_t *pampd)
{
	struct zcache *z = ctx;
	bool pers = flags & TMEM_PERSISTENT;
	bool keep = (flags & TMEM_KEEP_ALL) && z->za_ops->huge_len;
	uint64_t npers, mean = 0;
	uint64_t handle;
	const void *data = zcache_cbuf;
	unsigned tries;
	int len, ret;

	if (zcache_meta_room(z))
		return -ENOSPC;
	if (compress_page_is_zero(page)) {
		CNT_INC(z->zero_puts);
		if (!(z->crash && pers)) {
			CNT_INC(z->zero_pages);
			*pampd = PAMPD_MAKE_ZERO;
			return 0;
		}
		data = zcache_zero_mark;
		len = ZCACHE_ZERO_MARK_LEN;
		goto store;
	}
	len = compress_page_algo(z->algo, page, zcache_cbuf);
	if (len <= 0 && !keep) {
		CNT_INC(z->refused_error);
		return -EIO;
	}
	npers = CNT_GET(z->pers_pages);
	if (pers && npers)
		mean = CNT_GET(z->pers_bytes) / npers;
	if (len <= 0 || compress_policy_refuse(&z->policy, pers, (unsigned)len, (unsigned)mean) ||
	    (unsigned)len > z->za_ops->max_len) {
		if (!keep) {
			CNT_INC(z->refused_poor);
			return -E2BIG;
		}
		if (len <= 0 || (unsigned)len > z->policy.pers_max ||
		    (unsigned)len > z->za_ops->max_len) {
			data = page;
			len = (int)z->za_ops->huge_len;
			CNT_INC(z->raw_puts);
		}
	}
store:
	for (tries = 0;; tries++) {
		ret = z->za_ops->store(z->za, pers, data, (unsigned)len,
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
	zcache_account(z, pers, (unsigned)len, +1);
	*pampd = PAMPD_MAKE_ZBUD(handle);
	return 0;
}

/* ---- snapshots (tmem/snapshot.c) ------------------------------------------------- */

int zcache_page_export(struct zcache *z, uint64_t pampd, struct zcache_page_image *pi)
{
	memset(pi, 0, sizeof(*pi));
	switch (PAMPD_KIND(pampd)) {
	case PAMPD_ZERO:
		pi->kind = ZCACHE_IMG_ZERO;
		return 0;
	case PAMPD_ZBUD:
		pi->kind = ZCACHE_IMG_LOCAL;
		pi->bytes = z->za_ops->data(z->za, PAMPD_HANDLE(pampd), &pi->len);
		return pi->bytes ? 0 : -EIO;
	case PAMPD_REMOTE:
		if (PAMPD_IS_STRIPE(pampd)) {
			/* its stripe's record is saved by the collective (remote_save) */
			pi->kind = ZCACHE_IMG_STRIPE;
			pi->set.stripe = PAMPD_STRIPE_ID(pampd);
			pi->set.slot = PAMPD_STRIPE_SLOT(pampd);
			return 0;
		}
		pi->kind = ZCACHE_IMG_REMOTE;
		return zcache_remote_holders(z, pampd, &pi->set);
	}
	return -EINVAL;
}

int zcache_page_import(struct zcache *z, const struct tmem_handle *h, bool pers,
		       const struct zcache_page_image *pi, struct tmem_ref ref, uint64_t *pampd)
{
	struct replica_set set;
	uint64_t handle, id;
	unsigned tries, k;
	int ret;

	switch (pi->kind) {
	case ZCACHE_IMG_ZERO:
		CNT_INC(z->zero_pages);
		*pampd = PAMPD_MAKE_ZERO;
		return 0;
	case ZCACHE_IMG_LOCAL:
		if (!pi->bytes || !pi->len ||
		    (pi->len > z->za_ops->max_len &&
		     (!z->za_ops->huge_len || pi->len != z->za_ops->huge_len)))
			return -EINVAL;
		if (zcache_meta_room(z))
			return -ENOSPC;
		for (tries = 0;; tries++) {
			ret = z->za_ops->store(z->za, pers, pi->bytes, pi->len,
					       (struct zbud_ref){ ref.objno, ref.index }, &handle);
			if (ret != -ENOSPC || tries == EVICT_TRIES || zcache_evict_one(z))
				break;
		}
		if (ret)
			return ret;
		zcache_account(z, pers, pi->len, +1);
		*pampd = PAMPD_MAKE_ZBUD(handle);
		return 0;
	case ZCACHE_IMG_STRIPE:
		/* the stripe is loaded after the pages (the collective's records come last):
		 * only its form is checked here; a stripe that is not there reads as lost */
		if (pi->set.slot >= 7 || (pi->set.stripe >> 56) || !(uint32_t)pi->set.stripe)
			return -EINVAL;
		*pampd = pampd_make_stripe(pi->set.stripe, pi->set.slot);
		CNT_INC(z->remote_pages);
		return 0;
	case ZCACHE_IMG_REMOTE:
		set = pi->set;
		if (set.n < 1 || set.n > REPLICA_MAX || !set.len || set.len > COMPRESS_PAGE_SIZE)
			return -EINVAL;
		for (k = 0; k < set.n; k++) {
			if (set.node[k] < 1 || set.node[k] > 64)
				return -EINVAL;
			/* one-sided read addresses name a link of the old process */
			set.raddr[k] = 0;
			set.rkey[k] = 0;
			set.lgen[k] = 0;
		}
		if (set.n == 1) {
			*pampd = pampd_make_single(set.node[0], set.epoch[0], set.len, set.checksum);
		} else {
			ret = replica_add(z->replicas, h, pers, &set, &id);
			if (ret)
				return ret;
			*pampd = PAMPD_REMOTE | id;
		}
		CNT_INC(z->remote_pages);
		return 0;
	}
	return -EINVAL;
}

enum compress_algo zcache_algo(const struct zcache *z)
{
	return z->algo;
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
		data = z->za_ops->data(z->za, PAMPD_HANDLE(pampd), &len);
		if (!data || zcache_unpage(z, data, len, page)) {
			CNT_INC(z->decompress_errors);
			return -EIO;
		}
		return 0;
	case PAMPD_REMOTE: {
		struct replica_set r;

		if (zcache_remote_holders(z, pampd, &r) || !holders_alive(z, &r)) {
			CNT_INC(z->remote_lost);
			return -EIO;
		}
		return -EREMOTE;
	}
	default:
		return -EIO;
	}
}

static void zcache_free_pampd(void *ctx, bool pers, uint64_t pampd, const struct tmem_handle *h,
			      bool bulk)
{
	struct zcache *z = ctx;
	unsigned len = 0;

	switch (PAMPD_KIND(pampd)) {
	case PAMPD_ZERO:
		CNT_SUB(z->zero_pages, 1);
		break;
	case PAMPD_ZBUD:
		if (z->za_ops->data(z->za, PAMPD_HANDLE(pampd), &len))
			zcache_account(z, pers, len, -1);
		z->za_ops->release(z->za, PAMPD_HANDLE(pampd));
		break;
	case PAMPD_REMOTE: {
		struct replica_set r;
		unsigned i;

		CNT_SUB(z->remote_pages, 1);
		if (PAMPD_IS_STRIPE(pampd)) {
			/* its holder keeps the bytes for the parity until the stripe empties */
			if (z->remote && z->remote->stripe_kill)
				z->remote->stripe_kill(z->remote_arg, PAMPD_STRIPE_ID(pampd),
						       PAMPD_STRIPE_SLOT(pampd));
			break;
		}
		if (zcache_remote_holders(z, pampd, &r))
			break;
		if (PAMPD_IS_REC(pampd))
			replica_remove(z->replicas, PAMPD_REC_ID(pampd));
		for (i = 0; !bulk && z->remote && i < r.n; i++)
			z->remote->flush_page(z->remote_arg, r.node[i], pers, h);
		break;
	}
	default:
		break;
	}
}

static uint64_t zcache_pampd_nodes(void *ctx, uint64_t pampd)
{
	struct replica_set r;
	uint64_t nodes = 0;
	unsigned i;

	/* a stripe's holders keep it under its own key: an object's flush is not theirs */
	if (PAMPD_IS_STRIPE(pampd) || zcache_remote_holders(ctx, pampd, &r))
		return 0;
	for (i = 0; i < r.n; i++)
		nodes |= 1ull << (r.node[i] - 1);
	return nodes;
}

static void zcache_flush_object(void *ctx, bool pers, const struct tmem_handle *h, uint64_t nodes)
{
	struct zcache *z = ctx;

	if (z->remote)
		z->remote->flush_object(z->remote_arg, nodes, pers, h);
}

static void zcache_flush_pool(void *ctx, bool pers, uint32_t pool, uint64_t nodes)
{
	struct zcache *z = ctx;

	if (z->remote)
		z->remote->flush_pool(z->remote_arg, nodes, pers, pool);
}

static const struct tmem_pamops zcache_pamops = {
	.create = zcache_create_pampd,
	.get_data = zcache_get_data,
	.free = zcache_free_pampd,
	.nodes = zcache_pampd_nodes,
	.is_remote = zcache_pampd_is_remote,
	.in_tier = zcache_pampd_in_tier,
	.flush_object = zcache_flush_object,
	.flush_pool = zcache_flush_pool,
};

/* ---- the remote tier ------------------------------------------------------------------ */

void zcache_set_remote(struct zcache *z, const struct zcache_remote_ops *ops, void *arg)
{
	z->remote = ops;
	z->remote_arg = arg;
}

unsigned zcache_usage_pct(struct zcache *z)
{
	struct zalloc_stats zs;
	uint64_t allow = z->budget_frames / ZCACHE_META_FREE;
	uint64_t meta = tmem_meta_estimate(z->tmem) / ZBUD_FRAME_SIZE;

	z->za_ops->get_stats(z->za, &zs);
	/* the bookkeeping charged to the budget (zcache_meta_room) counts too:
	 * remotify must make room for it as for frames */
	if (meta > allow)
		zs.frames += meta - allow;
	return (unsigned)(zs.frames * 100 / (zs.max_frames ? zs.max_frames : 1));
}

void zcache_set_home_limit(struct zcache *z, uint64_t frames)
{
	atomic_store_explicit(&z->home_limit, frames, memory_order_relaxed);
}

void zcache_set_compact_limit(struct zcache *z, uint64_t frames)
{
	atomic_store_explicit(&z->compact_limit, frames, memory_order_relaxed);
}

void zcache_set_budget(struct zcache *z, uint64_t frames)
{
	uint64_t old = atomic_load(&z->budget_frames), home;

	if (frames < 1)
		frames = 1;
	if (frames > z->capacity_frames)
		frames = z->capacity_frames;
	z->za_ops->set_limit(z->za, (uint32_t)frames);
	atomic_store(&z->budget_frames, frames);
	/* bring home below the same share of the new budget */
	home = atomic_load_explicit(&z->home_limit, memory_order_relaxed);
	if (old)
		zcache_set_home_limit(z, (uint64_t)((double)home * (double)frames / (double)old));
	home = atomic_load_explicit(&z->compact_limit, memory_order_relaxed);
	if (old)
		zcache_set_compact_limit(z,
					 (uint64_t)((double)home * (double)frames / (double)old));
}

uint64_t zcache_capacity_frames(struct zcache *z)
{
	return z->capacity_frames;
}

uint64_t zcache_trim(struct zcache *z, uint64_t max)
{
	uint64_t n = z->za_ops->trim(z->za, atomic_load(&z->budget_frames), max);

	if (n)
		atomic_fetch_add(&z->trimmed_frames, n);
	return n;
}

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
	    cfg->pers_mean_limit_frac > 1024 || !zalloc_ops(cfg->allocator) ||
	    !compress_algo_ok(cfg->compressor) ||
	    (cfg->crash && (cfg->allocator != ZALLOC_DENSE || !cfg->crash->tab))) {
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
	z->capacity_frames = frames;
	z->za_ops = zalloc_ops(cfg->allocator);
	z->algo = cfg->compressor;
	compress_policy_default(&z->policy, z->za_ops->max_len);
	z->policy.pers_max = frac_bytes(cfg->pers_max_frac, 896);
	z->policy.pers_mean_max = frac_bytes(cfg->pers_mean_max_frac, 640);
	z->policy.pers_mean_limit = frac_bytes(cfg->pers_mean_limit_frac, 640);
	z->crash = cfg->crash != NULL;
	if (cfg->crash)
		z->za = zdense_create_shared((uint32_t)frames, cfg->crash->mem_fd,
					     cfg->crash->blk_fd);
	else
		z->za = z->za_ops->create((uint32_t)frames);
	if (!z->za)
		goto fail;
	atomic_init(&z->home_limit, frames * 8 / 10);
	atomic_init(&z->compact_limit, frames * 9 / 10);
	z->replicas = replica_create();
	if (!z->replicas)
		goto fail_zbud;
	z->tmem = tmem_create(&zcache_pamops, z);
	if (!z->tmem)
		goto fail_zbud;
	if (cfg->crash && tmem_set_crashtab(z->tmem, cfg->crash->tab)) {
		tmem_destroy(z->tmem);
		errno = EINVAL;
		goto fail_zbud;
	}
	return z;

fail_zbud:
	replica_destroy(z->replicas);
	z->za_ops->destroy(z->za);
fail:
	free(z);
	return NULL;
}

void zcache_destroy(struct zcache *z)
{
	if (!z)
		return;
	tmem_destroy(z->tmem);
	replica_destroy(z->replicas);
	z->za_ops->destroy(z->za);
	free(z);
}

struct tmem *zcache_tmem(struct zcache *z)
{
	return z->tmem;
}

/* ---- stats ---------------------------------------------------------------------------- */

void zcache_get_stats(struct zcache *z, struct zcache_stats *s)
{
	struct zalloc_stats zs;
	struct tmem_stats ts;

	z->za_ops->get_stats(z->za, &zs);
	tmem_get_stats(z->tmem, &ts);
	s->zero_pages = CNT_GET(z->zero_pages);
	s->zero_puts = CNT_GET(z->zero_puts);
	s->raw_pages = CNT_GET(z->raw_pages);
	s->raw_puts = CNT_GET(z->raw_puts);
	s->stored_pages = zs.objects;
	s->compressed_bytes = zs.bytes;
	s->refused_poor = CNT_GET(z->refused_poor);
	s->refused_nospace = CNT_GET(z->refused_nospace);
	s->refused_meta = CNT_GET(z->refused_meta);
	s->refused_error = CNT_GET(z->refused_error);
	s->evicted_frames = CNT_GET(z->evicted_frames);
	s->evicted_pages = CNT_GET(z->evicted_pages);
	s->evict_busy = CNT_GET(z->evict_busy);
	s->evicted_over_share = CNT_GET(z->evicted_over_share);
	s->decompress_errors = CNT_GET(z->decompress_errors);
	s->frames = zs.frames;
	s->frames_eph = zs.frames_eph;
	s->frames_pers = zs.frames_pers;
	s->zombies = zs.zombies;
	s->frames_touched = zs.frames_touched;
	s->budget_frames = z->budget_frames;
	s->capacity_frames = z->capacity_frames;
	s->trimmed_frames = CNT_GET(z->trimmed_frames);
	{
		struct replica_usage u;

		replica_usage(z->replicas, &u);
		s->replica_records = u.records;
		s->replica_bytes = u.bytes;
	}
	s->meta_bytes = zs.meta_bytes + ts.meta_bytes + sizeof(*z) + s->replica_bytes;
	s->bad_handles = zs.bad_handles;
	s->remote_pages = CNT_GET(z->remote_pages);
	s->remotified = CNT_GET(z->remotified);
	s->remotify_stale = CNT_GET(z->remotify_stale);
	s->repatriated = CNT_GET(z->repatriated);
	s->brought_home = CNT_GET(z->brought_home);
	s->checksum_errors = CNT_GET(z->checksum_errors);
	s->remote_lost = CNT_GET(z->remote_lost);
}
