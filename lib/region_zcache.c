/*
 * region_zcache.c - a space's compressed cache (docs/far-memory.md): LZ4
 * copies of evicted dirty pages, so that a page that comes back soon is
 * decompressed here instead of fetched over the socket. Write-back: a dirty
 * page evicted into the cache is not put; its entry is the page's only current
 * copy (the pool's is stale or absent) until the entry leaves the cache. Bounded
 * by cap bytes (entries and their headers), oldest out first; a hit moves an
 * entry to the young end. An entry pushed out is queued for write-back (the
 * wb list, its bytes still counted, still found by a fault): the background
 * evictor puts the queue in batches (rg_zc_wb_take, then rg_zc_wb_done), a
 * fault only when the queue has grown past RG_ZC_WB_MAX. An entry is dropped
 * only when its page's copy changes (rewritten, discarded, unmapped) or once
 * its put succeeded. Keys are (object, index): the pool's own names, which
 * survive a region's split. Every call holds s->lock except rg_zc_compress.
 */
#include <errno.h>
#include <lz4.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lib/region_int.h"

struct rg_zent {
	struct rg_zent *hnext;	     /* hash chain */
	struct rg_zent *prev, *next; /* age list (head.next is the oldest) or wb list */
	uint64_t key;
	uint32_t len;
	uint8_t wb;	/* on the wb list: pushed out, to be put */
	uint8_t flight; /* ... and taken by a write-back whose put is in flight */
	uint8_t data[];
};

struct rg_zcache {
	struct rg_zent **tab;
	uint32_t mask;
	struct rg_zent head;   /* the age list */
	struct rg_zent wbhead; /* the write-back queue, oldest first */
	size_t bytes, cap;     /* bytes: both lists */
	size_t wbbytes;	       /* of bytes, on the wb list */
	unsigned nwb;	       /* entries on the wb list not in flight */
};

static uint64_t rg_zc_hash(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

static size_t rg_zc_size(const struct rg_zent *e)
{
	return sizeof(*e) + e->len;
}

int rg_zc_init(struct rg_space *s, size_t cap)
{
	struct rg_zcache *z;
	uint32_t n = 1024;

	if (!cap)
		return 0;
	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	/* a bucket for every two slots, or for every 128 bytes of the cap (small entries) */
	while ((n < s->nslots * 2u || n < cap / 128) && n < (1u << 24))
		n *= 2;
	z->tab = calloc(n, sizeof(*z->tab));
	if (!z->tab) {
		free(z);
		return -ENOMEM;
	}
	z->mask = n - 1;
	z->cap = cap;
	z->head.prev = z->head.next = &z->head;
	z->wbhead.prev = z->wbhead.next = &z->wbhead;
	s->zc = z;
	s->st.zcache_cap_bytes = cap;
	return 0;
}

/* Unlink e from its chain and the age list, and free it. */
static void rg_zc_remove(struct rg_space *s, struct rg_zent *e)
{
	struct rg_zcache *z = s->zc;
	struct rg_zent **pp = &z->tab[rg_zc_hash(e->key) & z->mask];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->prev->next = e->next;
	e->next->prev = e->prev;
	z->bytes -= rg_zc_size(e);
	if (e->wb) {
		z->wbbytes -= rg_zc_size(e);
		z->nwb -= !e->flight;
	}
	s->st.zcache_pages--;
	free(e);
}

/* Link e at the young end of list h. */
static void rg_zc_link(struct rg_zent *h, struct rg_zent *e)
{
	e->next = h;
	e->prev = h->prev;
	e->prev->next = e;
	h->prev = e;
}

static void rg_zc_unlink(struct rg_zent *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static struct rg_zent *rg_zc_find(const struct rg_zcache *z, uint64_t key)
{
	struct rg_zent *e = z->tab[rg_zc_hash(key) & z->mask];

	while (e && e->key != key)
		e = e->hnext;
	return e;
}

void rg_zc_fini(struct rg_space *s)
{
	if (!s->zc)
		return;
	while (s->zc->head.next != &s->zc->head)
		rg_zc_remove(s, s->zc->head.next);
	while (s->zc->wbhead.next != &s->zc->wbhead)
		rg_zc_remove(s, s->zc->wbhead.next);
	free(s->zc->tab);
	free(s->zc);
	s->zc = NULL;
}

unsigned rg_zc_compress(const void *page, void *dst)
{
	/* a page that does not shrink by a quarter (does not fit) is not worth the memory */
	int n = LZ4_compress_default(page, dst, (int)RG_PAGE, (int)RG_ZC_BOUND);

	return n > 0 ? (unsigned)n : 0;
}

void rg_zc_drop(struct rg_space *s, uint64_t key)
{
	struct rg_zent *e;

	if (s->zc && (e = rg_zc_find(s->zc, key)))
		rg_zc_remove(s, e);
}

int rg_zc_store(struct rg_space *s, uint64_t key, const void *comp, unsigned len)
{
	struct rg_zcache *z = s->zc;
	struct rg_zent *e, **b;
	int queued = 0;

	if (!z)
		return -ENOENT;
	rg_zc_drop(s, key);
	if (!len || sizeof(*e) + len > z->cap)
		return -ENOENT;
	/* the oldest out: onto the write-back queue (still counted, still found) */
	while (z->bytes - z->wbbytes + sizeof(*e) + len > z->cap && z->head.next != &z->head) {
		e = z->head.next;
		rg_zc_unlink(e);
		e->wb = 1;
		rg_zc_link(&z->wbhead, e);
		z->wbbytes += rg_zc_size(e);
		z->nwb++;
		queued = 1;
	}
	e = malloc(sizeof(*e) + len);
	if (!e)
		return -ENOMEM;
	e->key = key;
	e->len = len;
	e->wb = e->flight = 0;
	memcpy(e->data, comp, len);
	b = &z->tab[rg_zc_hash(key) & z->mask];
	e->hnext = *b;
	*b = e;
	rg_zc_link(&z->head, e);
	z->bytes += rg_zc_size(e);
	s->st.zcache_pages++;
	s->st.zcache_stored++;
	if (queued && s->evictor_ok)
		pthread_cond_signal(&s->ev_cv); /* the evictor puts the queue */
	return 0;
}

int rg_zc_has(const struct rg_space *s, uint64_t key)
{
	return s->zc && rg_zc_find(s->zc, key);
}

unsigned rg_zc_wb_queued(const struct rg_space *s)
{
	return s->zc ? s->zc->nwb : 0;
}

unsigned rg_zc_wb_take(struct rg_space *s, struct ramster_iov *iov, uint8_t *buf, unsigned max)
{
	struct rg_zcache *z = s->zc;
	struct rg_zent *e;
	unsigned n = 0;

	if (!z)
		return 0;
	for (e = z->wbhead.next; e != &z->wbhead && n < max; e = e->next) {
		if (e->flight)
			continue;
		if (LZ4_decompress_safe((const char *)e->data, (char *)buf + (size_t)n * RG_PAGE,
					(int)e->len, (int)RG_PAGE) != (int)RG_PAGE)
			continue; /* cannot happen: our own bytes */
		e->flight = 1;
		z->nwb--;
		memset(&iov[n].oid, 0, sizeof(iov[n].oid));
		iov[n].oid.w[0] = e->key >> 32;
		iov[n].index = (uint32_t)e->key;
		iov[n].page = buf + (size_t)n * RG_PAGE;
		iov[n].result = 0;
		n++;
	}
	return n;
}

void rg_zc_wb_done(struct rg_space *s, const struct ramster_iov *iov, unsigned n, int rc)
{
	struct rg_zcache *z = s->zc;
	struct rg_zent *e;
	unsigned k;

	for (k = 0; k < n; k++) {
		e = z ? rg_zc_find(z, rg_zc_key(&iov[k].oid, iov[k].index)) : NULL;
		if (!e || !e->flight)
			continue; /* dropped or replaced meanwhile: the pool's copy is not read */
		if (rc >= 0 && !iov[k].result) {
			s->st.puts++;
			s->st.zcache_written_back++;
			rg_zc_remove(s, e); /* the pool's copy is current now */
			continue;
		}
		/* refused: it stays, the only copy, young again (tried later) */
		s->st.put_refused++;
		rg_zc_unlink(e);
		z->wbbytes -= rg_zc_size(e);
		e->wb = e->flight = 0;
		rg_zc_link(&z->head, e);
	}
}

int rg_zc_load(struct rg_space *s, uint64_t key, void *page)
{
	struct rg_zent *e;

	if (!s->zc || !(e = rg_zc_find(s->zc, key)))
		return -ENOENT;
	if (LZ4_decompress_safe((const char *)e->data, page, (int)e->len, (int)RG_PAGE) !=
	    (int)RG_PAGE) {
		rg_zc_remove(s, e); /* cannot happen: our own bytes */
		return -EIO;
	}
	/* young again (a queued one back from the queue; one in flight stays) */
	if (!e->flight) {
		rg_zc_unlink(e);
		if (e->wb) {
			s->zc->wbbytes -= rg_zc_size(e);
			s->zc->nwb--;
			e->wb = 0;
		}
		rg_zc_link(&s->zc->head, e);
	}
	s->st.zcache_hits++;
	return 0;
}

size_t rg_zc_bytes(const struct rg_space *s)
{
	return s->zc ? s->zc->bytes : 0;
}
