/*
 * zcache_remote.c - the tier's half of the remote tier (zcache.h, "the remote
 * tier"): frames taken for remotify and their pages committed to remote
 * descriptors, a remote get settled (brought home or not), a copy moved.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/zcache_int.h"

/*
 * Name victim v's pages in o after the first base. Taken under the
 * allocator's lock: a put that releases a page now leaves the zombie's bytes
 * alone (the commit then finds it stale).
 */
static void out_fill(struct zcache *z, struct zcache_out *o, const struct zalloc_victim *v,
		     unsigned base)
{
	unsigned i, flags;

	for (i = 0; i < v->n; i++) {
		struct zcache_out_page *p = &o->p[base + i];

		p->ref = (struct tmem_ref){ v->ref[i].objno, v->ref[i].index };
		p->handle = v->handle[i];
		p->data = v->data[i];
		p->len = v->len[i];
		p->checksum = p->data && !z->sealed ? zcache_checksum(p->data, p->len) : 0;
		p->resolved = p->data && tmem_ref_resolve(z->tmem, p->ref, &p->h, &flags) == 0;
		p->pers = p->resolved && (flags & TMEM_PERSISTENT);
	}
}

int zcache_remotify_take_more(struct zcache *z, struct zcache_out *o)
{
	struct zalloc_victim v;

	if (o->nmore == ZCACHE_OUT_UNITS - 1 || o->n >= ZCACHE_OUT_MAX)
		return -ENOSPC;
	if (z->za_ops->zombify_lru(z->za, o->pers, &v))
		return -ENOENT;
	if (o->n + v.n > ZCACHE_OUT_MAX) {
		z->za_ops->zombie_done(z->za, v.frame); /* back on the LRU, untouched */
		return -ENOSPC;
	}
	o->more[o->nmore++] = v.frame;
	o->frames += v.frames;
	out_fill(z, o, &v, o->n);
	o->n += v.n;
	return 0;
}

int zcache_remotify_take(struct zcache *z, bool pers, struct zcache_out *o)
{
	struct zalloc_victim v;

	if (z->za_ops->zombify_lru(z->za, pers, &v))
		return -ENOENT;
	o->frame = v.frame;
	o->nmore = 0;
	o->pers = pers;
	o->frames = v.frames;
	o->n = v.n;
	out_fill(z, o, &v, 0);
	return 0;
}

struct release_arg {
	struct zcache *z;
	uint64_t handle;
};

/* tmem_replace_then's then: a frame's page released under its bucket lock. */
static void release_then(void *arg)
{
	struct release_arg *a = arg;

	a->z->za_ops->release(a->z->za, a->handle);
}

int zcache_remotify_commit(struct zcache *z, struct zcache_out *o, unsigned i,
			   const struct replica_set *r)
{
	struct zcache_out_page *p = &o->p[i];
	uint64_t pampd, id = 0;
	int ret;

	if (r->stripe) {
		pampd = pampd_make_stripe(r->stripe, r->slot);
	} else if (r->n == 1 && !r->raddr[0]) {
		pampd = pampd_make_single(r->node[0], r->epoch[0], r->len, r->checksum);
	} else {
		ret = replica_add(z->replicas, &p->h, p->pers, r, &id);
		if (ret)
			return ret;
		pampd = PAMPD_REMOTE | id;
	}
	/* a tier that outlives a crash releases the frame's copy under the bucket
	 * lock, with the swap: its loader must never find the copy live once the
	 * object may be gone (and its number reused); others after the lock */
	ret = tmem_replace_then(z->tmem, p->ref, PAMPD_MAKE_ZBUD(p->handle), pampd, false,
				z->crash ? release_then : NULL,
				&(struct release_arg){z, p->handle});
	if (ret) {
		if (id)
			replica_remove(z->replicas, id);
		CNT_INC(z->remotify_stale);
		return -ENOENT;
	}
	if (!z->crash)
		z->za_ops->release(z->za, p->handle);
	if (p->pers || zcache_is_raw(z, p->len))
		zcache_account(z, p->pers, p->len, -1);
	CNT_INC(z->remote_pages);
	CNT_INC(z->remotified);
	return 0;
}

void zcache_remotify_done(struct zcache *z, struct zcache_out *o)
{
	unsigned i;

	z->za_ops->zombie_done(z->za, o->frame);
	for (i = 0; i < o->nmore; i++)
		z->za_ops->zombie_done(z->za, o->more[i]);
}

struct home_ctx {
	struct zcache *z;
	uint64_t expect;
	unsigned flags; /* ZCACHE_FIN_* */
	int result;
	const void *cdata;
	size_t clen;
	bool home;
};

/* Under the handle's bucket lock (tmem_update): settle the handle after a remote get. */
static int zcache_home_fn(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	struct home_ctx *c = arg;
	struct zcache *z = c->z;
	struct zalloc_stats zs;
	uint64_t handle;

	if (*pampd != c->expect)
		return 0; /* changed meanwhile: the new page is not ours to touch */
	if (c->result && !pers) {
		*pampd = 0; /* a lost ephemeral page stays a miss (get-get) */
		CNT_SUB(z->remote_pages, 1);
		return 0;
	}
	if (c->result)
		return 0; /* a lost persistent page keeps answering -EIO */
	if (c->flags & ZCACHE_FIN_DESTRUCTIVE) {
		*pampd = 0; /* the holder deleted it as it answered */
		CNT_SUB(z->remote_pages, 1);
		return 0;
	}
	z->za_ops->get_stats(z->za, &zs);
	if (!pers || zs.frames >= (c->flags & ZCACHE_FIN_COMPACT ? CNT_GET(z->compact_limit)
								   : CNT_GET(z->home_limit)))
		return 0;
	if (z->za_ops->store(z->za, pers, c->cdata, (unsigned)c->clen,
			     (struct zbud_ref){ ref.objno, ref.index }, &handle))
		return 0;
	if (PAMPD_IS_REC(*pampd))
		replica_remove(z->replicas, PAMPD_REC_ID(*pampd));
	if (PAMPD_IS_STRIPE(*pampd) && z->remote && z->remote->stripe_kill)
		z->remote->stripe_kill(z->remote_arg, PAMPD_STRIPE_ID(*pampd),
				       PAMPD_STRIPE_SLOT(*pampd));
	*pampd = PAMPD_MAKE_ZBUD(handle);
	zcache_account(z, pers, (unsigned)c->clen, +1);
	CNT_SUB(z->remote_pages, 1);
	CNT_INC(z->brought_home);
	c->home = true;
	return 0;
}

int zcache_repatriate_finish(struct zcache *z, const struct tmem_handle *h, uint64_t expect,
			     const struct replica_set *r, unsigned flags, int result,
			     const void *cdata, size_t clen, void *page, bool *home)
{
	struct home_ctx c = { z, expect, flags, 0, cdata, clen, false };

	*home = false;
	if (PAMPD_KIND(expect) != PAMPD_REMOTE || !r)
		return -EINVAL;
	if (result == 0) {
		if (clen != r->len || (!z->sealed && zcache_checksum(cdata, clen) != r->checksum)) {
			CNT_INC(z->checksum_errors);
			result = -EIO;
		} else if (zcache_unpage(z, cdata, clen, page)) {
			CNT_INC(z->decompress_errors);
			result = -EIO;
		}
	} else {
		CNT_INC(z->remote_lost);
		result = -EIO;
	}
	c.result = result;
	tmem_update(z->tmem, h, zcache_home_fn, &c);
	*home = c.home;
	if (result == 0)
		CNT_INC(z->repatriated);
	/* an ephemeral page that could not be had is a miss */
	return result;
}

struct move_ctx {
	struct zcache *z;
	uint64_t expect;
	unsigned from, to, epoch;
	uint64_t now;
	int ret;
};

/* Under the handle's bucket lock (tmem_update): the copy on from is now on to. */
static int zcache_move_fn(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	struct move_ctx *c = arg;
	struct replica_set r;
	uint64_t id;

	c->ret = -ENOENT;
	if (*pampd != c->expect || PAMPD_IS_STRIPE(*pampd) ||
	    zcache_remote_holders(c->z, *pampd, &r))
		return 0; /* changed meanwhile: the moved copy is stale (a stripe moves in its table) */
	if (!PAMPD_IS_REC(*pampd)) {
		if (r.node[0] != c->from)
			return 0;
		*pampd = pampd_make_single(c->to, c->epoch, r.len, r.checksum);
	} else {
		c->ret = replica_move(c->z->replicas, PAMPD_REC_ID(*pampd), c->from, c->to, c->epoch,
				      &id);
		if (c->ret)
			return 0;
		*pampd = PAMPD_REMOTE | id;
	}
	c->now = *pampd;
	c->ret = 0;
	return 0;
}

int zcache_remote_move(struct zcache *z, const struct tmem_handle *h, uint64_t expect,
		       unsigned from, unsigned to, unsigned epoch, uint64_t *now)
{
	struct move_ctx c = { z, expect, from, to, epoch, 0, -ENOENT };

	if (PAMPD_KIND(expect) != PAMPD_REMOTE || to < 1 || to > 64)
		return -EINVAL;
	tmem_update(z->tmem, h, zcache_move_fn, &c);
	if (c.ret == 0 && now)
		*now = c.now;
	return c.ret;
}

uint64_t zcache_replica_pampd(uint64_t id)
{
	return PAMPD_REMOTE | id;
}

struct replica_table *zcache_replicas(struct zcache *z)
{
	return z->replicas;
}

