/*
 * region_evict.c - the resident budget of a space: its slots, and eviction by
 * CLOCK over them (docs/far-memory.md). A page's reference bit is set when it
 * is faulted in and when it is written after being write-protected (a
 * UFFDIO_WRITEPROTECT fault); the hand clears it and write-protects the page
 * again; a page found unreferenced is evicted: put to the pool if dirty (it is
 * write-protected, so its bytes hold still), then MADV_DONTNEED. Reads of a
 * resident page leave no trace (no accessed bit reaches user space), so for
 * reads the policy is FIFO by fault order. Every call holds s->lock.
 * Most eviction is the background evictor's (region_evictor.c), which keeps
 * free slots between two watermarks; a fault evicts here only when none is
 * left (counted: evicted_sync). A dirty victim goes into the compressed cache
 * when it shrinks (region_zcache.c: write-back, no put), else to the pool.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/region_int.h"

/* ---- slots -------------------------------------------------------------------- */

void rg_slot_release(struct rg_space *s, struct rg_region *g, size_t i)
{
	uint32_t n = g->slot[i];

	if (n == SLOT_NONE)
		return;
	s->slots[n].reg = NULL;
	s->slots[n].busy = 0;
	s->free[s->nfree++] = n;
	g->slot[i] = SLOT_NONE;
	s->st.resident_pages--;
}

void rg_slot_take(struct rg_space *s, struct rg_region *g, size_t i)
{
	uint32_t n;

	if (!s->nfree) {
		g->slot[i] = SLOT_NONE;
		s->st.over_budget++;
		return;
	}
	n = s->free[--s->nfree];
	s->slots[n].reg = g;
	s->slots[n].idx = (uint32_t)i;
	g->slot[i] = n;
	s->st.resident_pages++;
}

/* ---- eviction ----------------------------------------------------------------- */

void *rg_put_source(struct rg_space *s, struct rg_region *g, size_t i, uint8_t *b)
{
	void *addr = (void *)(g->base + i * RG_PAGE);

	if (!g->noread)
		return addr;
	if (s->memfd < 0)
		s->memfd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (s->memfd < 0 || pread(s->memfd, b, RG_PAGE, (off_t)(uintptr_t)addr) != RG_PAGE)
		return NULL;
	return b;
}

/*
 * Drop a victim (after its put). @return 0, or -errno when the kernel would
 * not drop it (an mlock'd page): then it stays, referenced.
 */
/* Page i of g is gone from memory: its state and slot. */
static void rg_dropped(struct rg_space *s, struct rg_region *g, size_t i)
{
	if (!(g->st[i] & PG_INPOOL))
		g->st[i] = 0; /* a clean page never put holds zeros: fresh again */
	else
		g->st[i] = PG_INPOOL;
	rg_slot_release(s, g, i);
	s->st.evicted++;
}

int rg_drop(struct rg_space *s, struct rg_region *g, size_t i)
{
	uintptr_t a = g->base + i * RG_PAGE;

	if (rg_madvise((void *)a, RG_PAGE, MADV_DONTNEED)) {
		g->st[i] |= PG_REF;
		s->st.evict_failed++;
		return -errno;
	}
	rg_dropped(s, g, i);
	return 0;
}

unsigned rg_drop_batch(struct rg_space *s, const uint32_t *v, unsigned n)
{
	struct iovec iov[RG_EVICT_BG];
	unsigned k, freed = 0;
	struct rg_slot *sl;
	ssize_t r = -1;

	if (s->pidfd >= 0 && n > 1 && n <= RG_EVICT_BG) {
		for (k = 0; k < n; k++) {
			sl = &s->slots[v[k]];
			iov[k].iov_base = (void *)(sl->reg->base + (uintptr_t)sl->idx * RG_PAGE);
			iov[k].iov_len = RG_PAGE;
		}
		r = syscall(SYS_process_madvise, s->pidfd, iov, (size_t)n, MADV_DONTNEED, 0u);
		if (r < 0 && (errno == ENOSYS || errno == EPERM || errno == EBADF)) {
			close(s->pidfd); /* not for us here: a page at a time from now on */
			s->pidfd = -1;
		}
	}
	for (k = 0; k < n; k++) {
		sl = &s->slots[v[k]];
		if (r == (ssize_t)n * RG_PAGE) {
			rg_dropped(s, sl->reg, sl->idx);
			s->st.evicted_batched++;
			freed++;
		} else if (!rg_drop(s, sl->reg, sl->idx)) { /* what failed, page by page */
			freed++;
		}
	}
	return freed;
}

unsigned rg_clock_pick(struct rg_space *s, uint32_t *v, unsigned want)
{
	unsigned n = 0, k;
	uint64_t scanned = 0, limit = 2ull * s->nslots + 1;
	struct rg_slot *sl;
	uint8_t *p;

	while (n < want && scanned++ < limit) {
		uint32_t h = s->hand;

		s->hand = (s->hand + 1) % s->nslots;
		sl = &s->slots[h];
		if (!sl->reg || sl->busy)
			continue;
		p = &sl->reg->st[sl->idx];
		for (k = 0; k < n && v[k] != h; k++)
			;
		if (k < n)
			continue; /* picked already (few pages resident) */
		if (*p & PG_REF) {
			*p &= (uint8_t)~PG_REF;
			if (!(*p & PG_WP) && !s->nowp &&
			    rg_wp(s, sl->reg->base + (uintptr_t)sl->idx * RG_PAGE, RG_PAGE, 1) == 0)
				*p |= PG_WP;
			continue;
		}
		if (!(*p & PG_WP)) {
			if (rg_wp(s, sl->reg->base + (uintptr_t)sl->idx * RG_PAGE, RG_PAGE, 1))
				continue;
			*p |= PG_WP;
		}
		v[n++] = h;
	}
	return n;
}

/*
 * Free up to want slots with CLOCK, here (a fault found too few free).
 * @return slots freed (0: every resident page refused or none resident).
 */
static unsigned rg_evict(struct rg_space *s, unsigned want)
{
	unsigned n, k, nput = 0, freed = 0, ndrop;
	struct rg_slot *sl;
	uint8_t *p;
	int rc;

	if (want > RG_EVICT_BATCH)
		want = RG_EVICT_BATCH;
	n = rg_clock_pick(s, s->victims, want);
	/* the dirty ones into the cache (write-back, no put), or else to the pool, in one round
	 * trip */
	for (k = 0; k < n; k++) {
		void *src;

		sl = &s->slots[s->victims[k]];
		p = &sl->reg->st[sl->idx];
		if (!(*p & PG_DIRTY))
			continue;
		src = rg_put_source(s, sl->reg, sl->idx, s->buf + (size_t)nput * RG_PAGE);
		if (src && s->zc &&
		    rg_zc_store(s, rg_zc_key(&sl->reg->obj->oid, sl->reg->first + sl->idx), s->zbuf,
				rg_zc_compress(src, s->zbuf)) == 0) {
			s->st.zcache_absorbed++;
			*p = (uint8_t)((*p & ~PG_DIRTY) | PG_INPOOL);
			continue;
		}
		s->iov[nput].oid = sl->reg->obj->oid;
		s->iov[nput].index = sl->reg->first + sl->idx;
		s->iov[nput].page = src;
		s->iov[nput].result = src ? 0 : -EFAULT;
		nput++;
	}
	if (nput) {
		unsigned j = 0, m = 0;
		struct ramster_iov tmp[RG_EVICT_BATCH];

		/* send the readable ones; a page that cannot be read stays */
		for (k = 0; k < nput; k++)
			if (s->iov[k].page)
				tmp[m++] = s->iov[k];
		pthread_mutex_lock(&s->io);
		rc = m ? ramster_putv(s->conn, s->pool, tmp, m) : 0;
		pthread_mutex_unlock(&s->io);
		for (k = 0; k < nput; k++)
			if (s->iov[k].page)
				s->iov[k].result = rc < 0 ? rc : tmp[j++].result;
	}
	for (k = 0, nput = 0, ndrop = 0; k < n; k++) {
		sl = &s->slots[s->victims[k]];
		p = &sl->reg->st[sl->idx];
		if (*p & PG_DIRTY) {
			/* no older copy may stay in the cache: the page is newer, or now the pool's
			 */
			rg_zc_drop(s, rg_zc_key(&sl->reg->obj->oid, sl->reg->first + sl->idx));
			if (s->iov[nput].result) {
				nput++;
				s->st.put_refused++;
				*p |= PG_REF; /* keep it; try others first next time */
				continue;
			}
			nput++;
			s->st.puts++;
			*p = (uint8_t)((*p & ~PG_DIRTY) | PG_INPOOL);
		}
		s->victims[ndrop++] = s->victims[k];
	}
	freed = rg_drop_batch(s, s->victims, ndrop);
	s->st.evicted_sync += freed;
	return freed;
}

/*
 * Put a batch of the compressed cache's write-back queue here: the queue has
 * outgrown RG_ZC_WB_MAX (the evictor falls behind), and the cache must stay
 * near its bound. @return the entries taken (0: none queued).
 */
static unsigned rg_wb_sync(struct rg_space *s)
{
	unsigned n = rg_zc_wb_take(s, s->iov, s->buf, RG_EVICT_BATCH);
	int rc;

	if (!n)
		return 0;
	pthread_mutex_lock(&s->io);
	rc = ramster_putv(s->conn, s->pool, s->iov, n);
	pthread_mutex_unlock(&s->io);
	rg_zc_wb_done(s, s->iov, n, rc);
	s->st.zcache_wb_sync += n;
	return n;
}

/*
 * Make room for n more resident pages (s->buf is free: the callers fill it
 * after). @return how many fit (>= 1 unless none could be freed).
 */
unsigned rg_room(struct rg_space *s, unsigned n)
{
	/* a burst (a prefetch window's evictions) can queue more than one batch */
	while (rg_zc_wb_queued(s) > RG_ZC_WB_MAX && rg_wb_sync(s))
		;
	if (s->evictor_ok && !s->ev_on && s->nfree < s->wm_start + n) {
		s->ev_on = 1;
		pthread_cond_signal(&s->ev_cv);
	}
	while (s->nfree < n) {
		unsigned want = n - s->nfree;

		if (!rg_evict(s, want < RG_EVICT_BATCH ? RG_EVICT_BATCH : want))
			break;
	}
	return s->nfree < n ? s->nfree : n;
}
