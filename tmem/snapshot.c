/*
 * snapshot.c - the tier's contents as records, and back (snapshot.h).
 *
 * PAGE record: a head of 40 bytes + 2n (u32 pool, u64 oid[3], u32 index,
 * u8 kind, u8 n holders, u16 len, u32 checksum or seal version, then n node
 * ids and n epochs for a remote page), then a local page's len stored bytes.
 */
#include <errno.h>
#include <string.h>

#include "common/util.h"
#include "tmem/snapshot.h"

#define PAGE_HEAD 40

/* ---- save ------------------------------------------------------------------------ */

struct save_ctx {
	struct zcache *z;
	snapshot_emit_fn emit;
	void *arg;
	struct snapshot_stats *st;
};

static int save_pool(void *arg, const struct tmem_pool_info *info)
{
	struct save_ctx *s = arg;
	uint8_t rec[16];

	put_le32(rec, info->id);
	put_le32(rec + 4, info->flags);
	put_le32(rec + 8, info->owner);
	put_le32(rec + 12, info->weight);
	s->st->pools++;
	return s->emit(s->arg, SNAPSHOT_TAG_POOL, rec, sizeof(rec), NULL, 0);
}

static int save_page(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd)
{
	struct save_ctx *s = arg;
	struct zcache_page_image pi;
	uint8_t head[PAGE_HEAD + 2 * REPLICA_MAX];
	size_t hlen = PAGE_HEAD;
	unsigned k;
	int rc;

	(void)pers;
	rc = zcache_page_export(s->z, pampd, &pi);
	if (rc)
		return rc;
	put_le32(head, h->pool);
	put_le64(head + 4, h->oid.w[0]);
	put_le64(head + 12, h->oid.w[1]);
	put_le64(head + 20, h->oid.w[2]);
	put_le32(head + 28, h->index);
	head[32] = (uint8_t)pi.kind;
	head[33] = 0;
	head[34] = head[35] = 0;
	put_le32(head + 36, 0);
	switch (pi.kind) {
	case ZCACHE_IMG_ZERO:
		s->st->pages_zero++;
		break;
	case ZCACHE_IMG_LOCAL:
		head[34] = (uint8_t)pi.len;
		head[35] = (uint8_t)(pi.len >> 8);
		s->st->pages_local++;
		s->st->bytes_local += pi.len;
		break;
	case ZCACHE_IMG_REMOTE:
		/* n (1..8) in the low bits, an erasure code's data fragments (0: copies) above */
		head[33] = (uint8_t)(pi.set.n | pi.set.ec_k << 4);
		head[34] = (uint8_t)pi.set.len;
		head[35] = (uint8_t)(pi.set.len >> 8);
		put_le32(head + 36, pi.set.checksum);
		for (k = 0; k < pi.set.n; k++) {
			head[PAGE_HEAD + k] = pi.set.node[k];
			head[PAGE_HEAD + pi.set.n + k] = pi.set.epoch[k];
		}
		hlen += 2 * (size_t)pi.set.n;
		s->st->pages_remote++;
		break;
	case ZCACHE_IMG_STRIPE:
		/* the data slot, and the stripe's id after the head */
		head[33] = (uint8_t)pi.set.slot;
		put_le64(head + PAGE_HEAD, pi.set.stripe);
		hlen += 8;
		s->st->pages_remote++;
		break;
	}
	return s->emit(s->arg, SNAPSHOT_TAG_PAGE, head, hlen,
		       pi.kind == ZCACHE_IMG_LOCAL ? pi.bytes : NULL,
		       pi.kind == ZCACHE_IMG_LOCAL ? pi.len : 0);
}

int snapshot_save(struct zcache *z, snapshot_emit_fn emit, void *arg, struct snapshot_stats *st)
{
	struct save_ctx s = {z, emit, arg, st};
	uint8_t rec[8];
	int rc;

	memset(st, 0, sizeof(*st));
	put_le32(rec, SNAPSHOT_VERSION);
	put_le32(rec + 4, (uint32_t)zcache_algo(z));
	rc = emit(arg, SNAPSHOT_TAG_TIER, rec, sizeof(rec), NULL, 0);
	if (rc)
		return rc;
	return tmem_walk(zcache_tmem(z), save_pool, save_page, &s);
}

/* ---- load ------------------------------------------------------------------------ */

void snapshot_loader_init(struct snapshot_loader *l, struct zcache *z)
{
	memset(l, 0, sizeof(*l));
	l->z = z;
	l->pool = -1;
}

struct make_ctx {
	struct zcache *z;
	const struct tmem_handle *h;
	const struct zcache_page_image *pi;
};

static int make_pampd(void *arg, unsigned flags, const void *page, struct tmem_ref ref,
		      uint64_t *pampd)
{
	struct make_ctx *m = arg;

	(void)page;
	return zcache_page_import(m->z, m->h, flags & TMEM_PERSISTENT, m->pi, ref, pampd);
}

static int load_pool(struct snapshot_loader *l, const uint8_t *p, size_t len)
{
	struct tmem *t = zcache_tmem(l->z);
	uint32_t id, flags, owner, weight;
	int rc;

	if (len != 16)
		return -EBADMSG;
	id = get_le32(p);
	flags = get_le32(p + 4);
	owner = get_le32(p + 8);
	weight = get_le32(p + 12);
	if (l->pool >= 0 && id <= (uint32_t)l->pool)
		return -EBADMSG; /* saved in id order: the same pool twice, or out of order */
	rc = tmem_pool_new_at(t, id, flags);
	if (rc == -EEXIST) {
		struct tmem_pool_info info;

		/* made already, empty, by its owner's directory (node/client/pools.c):
		 * its owner is that of this process */
		if (tmem_pool_info(t, id, &info) || info.flags != flags || info.pages)
			return -EBADMSG;
	} else if (rc < 0) {
		return -EBADMSG; /* a bad id or flags */
	} else if (owner && tmem_pool_set_owner(t, id, owner, weight)) {
		return -EBADMSG;
	}
	l->pool = id;
	l->flags = flags;
	l->st.pools++;
	return 0;
}

static int load_page(struct snapshot_loader *l, const uint8_t *p, size_t len)
{
	struct zcache_page_image pi;
	struct tmem_handle h;
	struct make_ctx m = {l->z, &h, &pi};
	unsigned n, plen, k, eck;
	size_t hlen;
	int rc;

	if (len < PAGE_HEAD || l->pool < 0 || get_le32(p) != (uint32_t)l->pool)
		return -EBADMSG;
	memset(&pi, 0, sizeof(pi));
	h.pool = get_le32(p);
	h.oid.w[0] = get_le64(p + 4);
	h.oid.w[1] = get_le64(p + 12);
	h.oid.w[2] = get_le64(p + 20);
	h.index = get_le32(p + 28);
	pi.kind = p[32];
	n = p[33] & 15;
	eck = p[33] >> 4;
	plen = (unsigned)p[34] | (unsigned)p[35] << 8;
	hlen = PAGE_HEAD + (pi.kind == ZCACHE_IMG_REMOTE ? 2 * (size_t)n : 0) +
	       (pi.kind == ZCACHE_IMG_STRIPE ? 8 : 0);
	switch (pi.kind) {
	case ZCACHE_IMG_ZERO:
		if (n || eck || plen || len != PAGE_HEAD)
			return -EBADMSG;
		break;
	case ZCACHE_IMG_LOCAL:
		if (n || eck || !plen || plen > 4096 || len != PAGE_HEAD + (size_t)plen)
			return -EBADMSG;
		pi.len = plen;
		pi.bytes = p + PAGE_HEAD;
		break;
	case ZCACHE_IMG_REMOTE:
		if (n < 1 || n > REPLICA_MAX || !plen || plen > 4096 || len != hlen ||
		    (eck && (eck < 2 || eck >= n)))
			return -EBADMSG;
		pi.set.n = n;
		pi.set.ec_k = eck;
		pi.set.len = plen;
		pi.set.checksum = get_le32(p + 36);
		for (k = 0; k < n; k++) {
			pi.set.node[k] = p[PAGE_HEAD + k];
			pi.set.epoch[k] = p[PAGE_HEAD + n + k];
			if (pi.set.node[k] < 1 || pi.set.node[k] > 64)
				return -EBADMSG;
		}
		break;
	case ZCACHE_IMG_STRIPE:
		if (p[33] >= 7 || plen || get_le32(p + 36) || len != hlen)
			return -EBADMSG;
		pi.set.slot = p[33];
		pi.set.stripe = get_le64(p + PAGE_HEAD);
		if (!(uint32_t)pi.set.stripe || (pi.set.stripe >> 56))
			return -EBADMSG;
		break;
	default:
		return -EBADMSG;
	}
	rc = tmem_put_desc(zcache_tmem(l->z), h.pool, &h.oid, h.index, make_pampd, &m);
	if (rc == -ENOSPC || rc == -ENOMEM) {
		l->st.pages_refused++;
		if (l->flags & TMEM_PERSISTENT)
			l->st.pers_refused++;
		return 0;
	}
	if (rc)
		return -EBADMSG;
	if (pi.kind == ZCACHE_IMG_ZERO)
		l->st.pages_zero++;
	else if (pi.kind == ZCACHE_IMG_LOCAL) {
		l->st.pages_local++;
		l->st.bytes_local += pi.len;
	} else {
		l->st.pages_remote++;
	}
	return 0;
}

int snapshot_load_record(struct snapshot_loader *l, uint16_t tag, const uint8_t *p, size_t len)
{
	switch (tag) {
	case SNAPSHOT_TAG_TIER:
		if (len != 8 || l->tier_seen)
			return -EBADMSG;
		if (get_le32(p) != SNAPSHOT_VERSION || get_le32(p + 4) != (uint32_t)zcache_algo(l->z))
			return -EPROTO;
		l->tier_seen = 1;
		return 0;
	case SNAPSHOT_TAG_POOL:
		return l->tier_seen ? load_pool(l, p, len) : -EBADMSG;
	case SNAPSHOT_TAG_PAGE:
		return l->tier_seen ? load_page(l, p, len) : -EBADMSG;
	}
	return -EBADMSG;
}
