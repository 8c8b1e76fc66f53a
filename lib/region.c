/*
 * region.c - far memory regions: anonymous memory of which at most a budget is
 * resident, the rest in a persistent pool of the node, brought back on a touch
 * by userfaultfd (docs/far-memory.md). The structures, the lock rule and the
 * invariants are in region_int.h; the space and its faults are in
 * region_fault.c, eviction in region_evict.c, fork in region_fork.c.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/region_int.h"

/* a straight syscall, as rg_madvise (region_int.h) */
static void *rg_mremap(void *addr, size_t oldlen, size_t newlen, int flags)
{
	return (void *)syscall(SYS_mremap, addr, oldlen, newlen, flags, NULL);
}

/* ---- the table of regions (sorted by base, disjoint) -------------------------- */

/* @return the index of the first region ending above addr. */
static size_t rg_lower(const struct rg_space *s, uintptr_t addr)
{
	size_t lo = 0, hi = s->nregs, mid;

	while (lo < hi) {
		mid = (lo + hi) / 2;
		if (s->regs[mid]->base + s->regs[mid]->npages * RG_PAGE <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct rg_region *rg_find(const struct rg_space *s, uintptr_t addr)
{
	size_t i = rg_lower(s, addr);

	if (i < s->nregs && s->regs[i]->base <= addr)
		return s->regs[i];
	return NULL;
}

static int rg_insert(struct rg_space *s, struct rg_region *g)
{
	size_t i;

	if (s->nregs == s->capregs) {
		size_t cap = s->capregs ? 2 * s->capregs : 16;
		struct rg_region **n = realloc(s->regs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		s->regs = n;
		s->capregs = cap;
	}
	i = rg_lower(s, g->base);
	memmove(&s->regs[i + 1], &s->regs[i], (s->nregs - i) * sizeof(*s->regs));
	s->regs[i] = g;
	s->nregs++;
	return 0;
}

static void rg_remove(struct rg_space *s, struct rg_region *g)
{
	size_t i = rg_lower(s, g->base);

	if (i < s->nregs && s->regs[i] == g) {
		memmove(&s->regs[i], &s->regs[i + 1], (s->nregs - i - 1) * sizeof(*s->regs));
		s->nregs--;
	}
}

static void rg_obj_put(struct rg_space *s, struct rg_obj *o)
{
	if (--o->refs)
		return;
	if (!s->dead) {
		pthread_mutex_lock(&s->io);
		(void)ramster_flush_object(s->conn, s->pool, &o->oid);
		pthread_mutex_unlock(&s->io);
	}
	free(o);
}

void rg_region_free(struct rg_space *s, struct rg_region *g)
{
	rg_obj_put(s, g->obj);
	free(g->st);
	free(g->slot);
	free(g);
}

/* ---- edits: map, unmap, discard, grow, protect -------------------------------- */

int rg_map(struct rg_space *s, void *addr, size_t len)
{
	struct uffdio_register reg = {.range = {.start = (uintptr_t)addr, .len = len},
				      .mode =
					  UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP};
	struct rg_region *g;
	int err;

	if (!s || s->dead || !len || (len % RG_PAGE) || ((uintptr_t)addr % RG_PAGE) ||
	    len / RG_PAGE >= UINT32_MAX)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->base = (uintptr_t)addr;
	g->npages = len / RG_PAGE;
	g->st = calloc(g->npages, 1);
	g->slot = malloc(g->npages * sizeof(*g->slot));
	g->obj = calloc(1, sizeof(*g->obj));
	if (!g->st || !g->slot || !g->obj) {
		err = -ENOMEM;
		goto free_g;
	}
	memset(g->slot, 0xff, g->npages * sizeof(*g->slot));
	g->obj->refs = 1;
	/* no huge pages: a region is served page by page */
	(void)rg_madvise(addr, len, MADV_NOHUGEPAGE);
	if (ioctl(s->uffd, UFFDIO_REGISTER, &reg)) {
		err = -errno;
		goto free_g;
	}
	if ((reg.ioctls &
	     (1ull << _UFFDIO_COPY | 1ull << _UFFDIO_ZEROPAGE | 1ull << _UFFDIO_WRITEPROTECT)) !=
	    (1ull << _UFFDIO_COPY | 1ull << _UFFDIO_ZEROPAGE | 1ull << _UFFDIO_WRITEPROTECT)) {
		err = -ENOTSUP;
		goto unregister;
	}
	pthread_mutex_lock(&s->lock);
	g->obj->oid.w[0] = ++s->next_oid;
	err = rg_insert(s, g);
	pthread_mutex_unlock(&s->lock);
	if (err)
		goto unregister;
	return 0;

unregister:
	(void)ioctl(s->uffd, UFFDIO_UNREGISTER, &reg.range);
free_g:
	free(g->obj);
	free(g->st);
	free(g->slot);
	free(g);
	return err;
}

int rg_overlaps(struct rg_space *s, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	size_t i;
	int hit;

	if (!s || s->dead)
		return 0;
	pthread_mutex_lock(&s->lock);
	i = rg_lower(s, a);
	hit = i < s->nregs && s->regs[i]->base < a + len;
	pthread_mutex_unlock(&s->lock);
	return hit;
}

/* Point the slots of g's pages [from, to) at g, page i at index i - shift. */
static void rg_reslot(struct rg_space *s, struct rg_region *g, size_t from, size_t to)
{
	size_t i;

	for (i = from; i < to; i++)
		if (g->slot[i] != SLOT_NONE) {
			s->slots[g->slot[i]].reg = g;
			s->slots[g->slot[i]].idx = (uint32_t)i;
		}
}

/* Cut pages [pi, pj) out of g (whose slots are released). @return 0 or -ENOMEM. */
static int rg_cut(struct rg_space *s, struct rg_region *g, size_t pi, size_t pj)
{
	struct rg_region *t;
	size_t k, rest;

	for (k = pi; k < pj; k++) {
		rg_slot_release(s, g, k);
		if (g->st[k] & PG_INPOOL) /* the cache's copy goes with the page */
			rg_zc_drop(s, rg_zc_key(&g->obj->oid, g->first + (uint32_t)k));
	}
	if (pi == 0 && pj == g->npages) {
		rg_remove(s, g);
		rg_region_free(s, g);
		return 0;
	}
	if (pi == 0) { /* the head: the rest moves down */
		rest = g->npages - pj;
		memmove(g->st, g->st + pj, rest);
		memmove(g->slot, g->slot + pj, rest * sizeof(*g->slot));
		g->base += pj * RG_PAGE;
		g->first += (uint32_t)pj;
		g->npages = rest;
		rg_reslot(s, g, 0, rest);
		return 0;
	}
	if (pj == g->npages) { /* the tail */
		g->npages = pi;
		return 0;
	}
	/* the middle: the part after the hole becomes a region of its own */
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	rest = g->npages - pj;
	t->st = malloc(rest);
	t->slot = malloc(rest * sizeof(*t->slot));
	if (!t->st || !t->slot) {
		free(t->st);
		free(t->slot);
		free(t);
		return -ENOMEM;
	}
	memcpy(t->st, g->st + pj, rest);
	memcpy(t->slot, g->slot + pj, rest * sizeof(*t->slot));
	t->base = g->base + pj * RG_PAGE;
	t->npages = rest;
	t->first = g->first + (uint32_t)pj;
	t->obj = g->obj;
	t->obj->refs++;
	t->noread = g->noread;
	g->npages = pi;
	rg_reslot(s, t, 0, rest);
	if (rg_insert(s, t)) {
		/* no room in the table: forget the tail's pages (they stay plain memory) */
		for (k = 0; k < rest; k++)
			rg_slot_release(s, t, k);
		rg_region_free(s, t);
		return -ENOMEM;
	}
	return 0;
}

int rg_unmap(struct rg_space *s, void *addr, size_t len, int do_munmap)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(RG_PAGE - 1);
	uintptr_t b = ((uintptr_t)addr + len + RG_PAGE - 1) & ~(uintptr_t)(RG_PAGE - 1);
	int rc = 0;

	if (!s || s->dead)
		return do_munmap && rg_munmap(addr, len) ? -errno : 0;
	pthread_mutex_lock(&s->lock);
	for (;;) {
		size_t i = rg_lower(s, a);
		struct rg_region *g;
		uintptr_t lo, hi;

		if (i >= s->nregs || s->regs[i]->base >= b)
			break;
		g = s->regs[i];
		lo = a > g->base ? a : g->base;
		hi = b < g->base + g->npages * RG_PAGE ? b : g->base + g->npages * RG_PAGE;
		if (rg_cut(s, g, (lo - g->base) / RG_PAGE, (hi - g->base) / RG_PAGE))
			break;
		a = hi;
	}
	if (do_munmap && rg_munmap(addr, len))
		rc = -errno;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int rg_discard(struct rg_space *s, void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, b = a + len, x;
	struct rg_region *g;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	if (rg_madvise(addr, len, MADV_DONTNEED))
		rc = -errno;
	for (x = a & ~(uintptr_t)(RG_PAGE - 1); !rc && x < b; x += RG_PAGE) {
		size_t i;

		g = rg_find(s, x);
		if (!g)
			continue;
		i = (x - g->base) / RG_PAGE;
		rg_slot_release(s, g, i);
		if (g->st[i] & PG_INPOOL) /* the cache's copy goes too (never put after) */
			rg_zc_drop(s, rg_zc_key(&g->obj->oid, g->first + (uint32_t)i));
		g->st[i] = 0; /* reads zeros; the stale pool copy is never read again */
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int rg_grow(struct rg_space *s, void *addr, size_t oldlen, size_t newlen)
{
	uintptr_t end = (uintptr_t)addr + oldlen;
	struct rg_region *g;
	size_t n = newlen / RG_PAGE, old;
	uint8_t *st;
	uint32_t *sl;
	void *p;
	int rc = 0;

	if (newlen <= oldlen || newlen % RG_PAGE || oldlen % RG_PAGE)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	g = rg_find(s, end - 1);
	if (!g || g->base + g->npages * RG_PAGE != end || g->base > (uintptr_t)addr) {
		rc = -ENOENT;
		goto out;
	}
	old = g->npages;
	n = old + (newlen - oldlen) / RG_PAGE;
	if (g->first + n >= UINT32_MAX) {
		rc = -ENOMEM;
		goto out;
	}
	st = realloc(g->st, n);
	if (st)
		g->st = st;
	sl = realloc(g->slot, n * sizeof(*sl));
	if (sl)
		g->slot = sl;
	if (!st || !sl) {
		rc = -ENOMEM;
		goto out;
	}
	p = rg_mremap(addr, oldlen, newlen, 0);
	if (p == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	memset(g->st + old, 0, n - old);
	memset(g->slot + old, 0xff, (n - old) * sizeof(*sl));
	g->npages = n;
	/* a later mapping right after the region may have been merged: the kernel knows */
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void rg_noread(struct rg_space *s, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	size_t i;

	if (!s || s->dead)
		return;
	pthread_mutex_lock(&s->lock);
	for (i = rg_lower(s, a); i < s->nregs && s->regs[i]->base < a + len; i++)
		s->regs[i]->noread = 1;
	pthread_mutex_unlock(&s->lock);
}

/* ---- the public API: one space per region ------------------------------------- */

struct rg_public {
	void *addr;
	size_t len;
	const ramster *r;
	struct rg_space *s;
	struct rg_public *next;
};

static pthread_mutex_t rg_public_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rg_public *rg_public_list;
static pthread_once_t rg_public_once = PTHREAD_ONCE_INIT;

/* fork: every region's pages are brought in so that the child's copy is whole (rg_fork_prepare) */
static void rg_public_prepare(void)
{
	struct rg_public *e;

	pthread_mutex_lock(&rg_public_lock);
	for (e = rg_public_list; e; e = e->next)
		rg_fork_prepare(e->s);
}

static void rg_public_parent(void)
{
	struct rg_public *e;

	for (e = rg_public_list; e; e = e->next)
		rg_fork_parent(e->s);
	pthread_mutex_unlock(&rg_public_lock);
}

/* the child's regions are plain memory; ramster_region_unmap still unmaps them */
static void rg_public_child(void)
{
	struct rg_public *e;

	for (e = rg_public_list; e; e = e->next)
		rg_fork_child(e->s);
	pthread_mutex_unlock(&rg_public_lock);
}

static void rg_public_init(void)
{
	(void)pthread_atfork(rg_public_prepare, rg_public_parent, rg_public_child);
}

void *ramster_region_map(ramster *r, size_t bytes, size_t resident_bytes, int flags)
{
	struct rg_public *e;
	ramster *conn;
	size_t len;
	int err;

	if (!r || !bytes || flags || bytes > SIZE_MAX - RG_PAGE ||
	    resident_bytes < RG_MIN_BUDGET * RG_PAGE) {
		errno = EINVAL;
		return NULL;
	}
	len = (bytes + RG_PAGE - 1) & ~(size_t)(RG_PAGE - 1);
	pthread_once(&rg_public_once, rg_public_init);
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	conn = lib_ramster_reopen(r);
	if (!conn)
		goto free_e;
	e->s = rg_space_new(conn, resident_bytes);
	if (!e->s)
		goto free_e;
	e->addr = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (e->addr == MAP_FAILED)
		goto free_space;
	err = rg_map(e->s, e->addr, len);
	if (err) {
		rg_munmap(e->addr, len);
		errno = -err;
		goto free_space;
	}
	e->len = len;
	e->r = r;
	pthread_mutex_lock(&rg_public_lock);
	e->next = rg_public_list;
	rg_public_list = e;
	pthread_mutex_unlock(&rg_public_lock);
	return e->addr;

free_space:
	err = errno;
	rg_space_free(e->s);
	errno = err;
free_e:
	err = errno;
	free(e);
	errno = err;
	return NULL;
}

/* Find (and with take, unlink) r's region at addr. */
static struct rg_public *rg_public_find(const ramster *r, const void *addr, int take)
{
	struct rg_public **pp, *e = NULL;

	pthread_mutex_lock(&rg_public_lock);
	for (pp = &rg_public_list; *pp; pp = &(*pp)->next)
		if ((*pp)->addr == addr && (*pp)->r == r) {
			e = *pp;
			if (take)
				*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&rg_public_lock);
	return e;
}

int ramster_region_unmap(ramster *r, void *addr)
{
	struct rg_public *e;

	if (!r || !addr)
		return -EINVAL;
	e = rg_public_find(r, addr, 1);
	if (!e)
		return -ENOENT;
	rg_space_free(e->s);
	free(e);
	return 0;
}

int ramster_region_stats(ramster *r, void *addr, struct ramster_region_stats *st)
{
	struct rg_public *e;

	if (!r || !addr || !st)
		return -EINVAL;
	e = rg_public_find(r, addr, 0);
	if (!e)
		return -ENOENT;
	rg_stats(e->s, st);
	return 0;
}
