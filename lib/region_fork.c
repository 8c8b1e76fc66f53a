/*
 * region_fork.c - fork() and a space (docs/far-memory.md, "fork"): the
 * child's copy of the address space has no userfaultfd and no fault thread,
 * so every page that lives only in the pool (or in the compressed cache) is
 * brought in before the fork, and dropped again in the parent after it. The space's locks (s->lock
 * and s->io) are held across the fork, from rg_fork_prepare to rg_fork_parent or rg_fork_child.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/region_int.h"

void rg_fork_prepare(struct rg_space *s)
{
	size_t r, i, k, n;
	int rc;

	if (!s || s->dead)
		return;
	pthread_mutex_lock(&s->lock);
	pthread_mutex_lock(&s->io); /* no put of the evictor's in flight across the fork */
	for (r = 0; r < s->nregs; r++) {
		struct rg_region *g = s->regs[r];

		for (i = 0; i < g->npages; i += n) {
			unsigned ngets = 0;
			uint8_t hit[RG_BATCH];

			/* a run of pages that live only in the pool or the cache */
			for (n = 0;
			     n < RG_BATCH && i + n < g->npages &&
			     (g->st[i + n] & (PG_INPOOL | PG_PRESENT | PG_POISON)) == PG_INPOOL;
			     n++) {
				hit[n] =
				    (uint8_t)rg_zc_fetch(s, g, i + n, s->buf + n * RG_PAGE, &ngets);
			}
			if (!n) {
				n = 1;
				continue;
			}
			rc = ngets ? ramster_getv(s->conn, s->pool, s->iov, ngets) : 0;
			for (k = 0, ngets = 0; k < n; k++) {
				uintptr_t a = g->base + (i + k) * RG_PAGE;

				if (!hit[k] && (rc < 0 || s->iov[ngets++].result)) {
					rg_poison(s, a, 0);
					g->st[i + k] = PG_POISON | PG_INPOOL;
					s->st.get_failed++;
				} else if (rg_copy(s, a, s->buf + k * RG_PAGE, RG_PAGE, 1, 1,
						   NULL) == 0) {
					/* the cache's entry stays: the copy is dropped after the
					 * fork */
					g->st[i + k] = PG_INPOOL | PG_PRESENT | PG_WP | PG_FORK;
					g->slot[i + k] = SLOT_NONE;
					s->st.gets += !hit[k];
				}
			}
		}
	}
	/* held until rg_fork_parent / rg_fork_child */
}

void rg_fork_parent(struct rg_space *s)
{
	size_t r, i;

	if (!s || s->dead)
		return;
	for (r = 0; r < s->nregs; r++) {
		struct rg_region *g = s->regs[r];

		for (i = 0; i < g->npages; i++)
			if (g->st[i] & PG_FORK) {
				/* clean copies of the pool's: dropping them costs nothing */
				(void)rg_madvise((void *)(g->base + i * RG_PAGE), RG_PAGE,
						 MADV_DONTNEED);
				g->st[i] = PG_INPOOL;
			}
	}
	pthread_mutex_unlock(&s->io);
	pthread_mutex_unlock(&s->lock);
}

void rg_fork_child(struct rg_space *s)
{
	if (!s || s->dead)
		return;
	/* no thread, no registration survived fork: every page is in this copy */
	s->dead = 1;
	close(s->uffd);
	close(s->stopfd);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->pidfd >= 0)
		close(s->pidfd); /* the parent's, not this process's */
	s->uffd = s->stopfd = s->memfd = s->pidfd = -1;
	s->thread_ok = 0;
	s->evictor_ok = 0; /* not copied by fork; its condition variable is left alone */
	pthread_mutex_unlock(&s->io);
	pthread_mutex_unlock(&s->lock);
}
