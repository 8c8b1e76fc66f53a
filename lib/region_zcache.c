/*
 * region_zcache.c - a space's compressed cache (docs/far-memory.md): LZ4
 * copies of pages recently put to the pool, so that a page that comes back
 * soon is decompressed here instead of fetched over the socket. Write-through:
 * an entry is always the pool's current copy (stored after a put succeeded,
 * dropped when a put of its page failed or went through the fault path), so
 * dropping one costs nothing. Bounded by cap bytes (entries and their
 * headers), oldest out first; a hit moves an entry to the young end. Keys
 * are (object, index): the pool's own names, which survive a region's split.
 * Every call holds s->lock except rg_zc_compress.
 */
#include <errno.h>
#include <lz4.h>
#include <stdlib.h>
#include <string.h>

#include "lib/region_int.h"

struct rg_zent {
	struct rg_zent *hnext;	     /* hash chain */
	struct rg_zent *prev, *next; /* age list: head.next is the oldest */
	uint64_t key;
	uint32_t len;
	uint8_t data[];
};

struct rg_zcache {
	struct rg_zent **tab;
	uint32_t mask;
	struct rg_zent head;
	size_t bytes, cap;
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
	while (n < s->nslots * 2u && n < (1u << 24))
		n *= 2;
	z->tab = calloc(n, sizeof(*z->tab));
	if (!z->tab) {
		free(z);
		return -ENOMEM;
	}
	z->mask = n - 1;
	z->cap = cap;
	z->head.prev = z->head.next = &z->head;
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
	s->st.zcache_pages--;
	free(e);
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

void rg_zc_store(struct rg_space *s, uint64_t key, const void *comp, unsigned len)
{
	struct rg_zcache *z = s->zc;
	struct rg_zent *e, **b;

	if (!z)
		return;
	rg_zc_drop(s, key);
	if (!len || sizeof(*e) + len > z->cap)
		return;
	while (z->bytes + sizeof(*e) + len > z->cap && z->head.next != &z->head)
		rg_zc_remove(s, z->head.next);
	e = malloc(sizeof(*e) + len);
	if (!e)
		return;
	e->key = key;
	e->len = len;
	memcpy(e->data, comp, len);
	b = &z->tab[rg_zc_hash(key) & z->mask];
	e->hnext = *b;
	*b = e;
	e->next = &z->head;
	e->prev = z->head.prev;
	e->prev->next = e;
	z->head.prev = e;
	z->bytes += rg_zc_size(e);
	s->st.zcache_pages++;
	s->st.zcache_stored++;
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
	/* young again */
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->next = &s->zc->head;
	e->prev = s->zc->head.prev;
	e->prev->next = e;
	s->zc->head.prev = e;
	s->st.zcache_hits++;
	return 0;
}

size_t rg_zc_bytes(const struct rg_space *s)
{
	return s->zc ? s->zc->bytes : 0;
}
