/*
 * region_evictor.c - a space's background evictor (docs/far-memory.md): a
 * thread that keeps free slots in reserve, as kswapd does, so that a fault
 * pays only for its get. It wakes when the free slots fall under wm_start
 * (rg_room kicks it), evicts in batches of RG_EVICT_BG until wm_stop are
 * free, and sleeps on ev_cv otherwise: an idle space costs no CPU.
 *
 * A batch: under s->lock, CLOCK picks victims (write-protected); clean ones
 * are dropped at once, dirty ones copied to the batch buffer and their slots
 * marked busy (no other eviction touches them). Then, s->io held and s->lock
 * released, one putv. Then, under s->lock again, a victim whose slot is still
 * busy and still write-protected (not written meanwhile: a write-protect
 * fault clears PG_WP before the write) is clean and dropped; a written one
 * stays, dirty. A slot released meanwhile (unmap, discard) lost its busy mark.
 * With the compressed cache (region_zcache.c), the dirty victims are first
 * compressed without the lock, and those that shrink go into the cache, not
 * to the pool (write-back): only the rest are put. Between batches, the
 * evictor puts the cache's write-back queue (entries pushed out by younger
 * ones), RG_EVICT_BG at a time, without s->lock.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/region_int.h"

/* Whether to evict now (watermarks, with hysteresis). s->lock held. */
static int rg_evictor_due(struct rg_space *s)
{
	if (s->nfree < s->wm_start)
		s->ev_on = 1;
	else if (s->nfree >= s->wm_stop)
		s->ev_on = 0;
	return s->ev_on;
}

/*
 * Into the cache, no put (write-back): the dirty victims m of the batch, compressed without
 * s->lock. Called and returns with s->lock held. @return how many stay to be put (compacted
 * to the front of the batch); *freed grows by the slots freed.
 */
static unsigned rg_evictor_absorb(struct rg_space *s, unsigned m, unsigned *freed)
{
	struct rg_bg *b = s->bg;
	unsigned k, np = 0, ndrop = 0;
	uint32_t drop[RG_EVICT_BG];
	struct rg_slot *sl;
	uint8_t *p;

	pthread_mutex_unlock(&s->lock);
	for (k = 0; k < m; k++)
		b->zlen[k] = rg_zc_compress(b->iov[k].page, b->zbuf + (size_t)k * RG_ZC_BOUND);
	pthread_mutex_lock(&s->lock);
	for (k = 0; k < m; k++) {
		sl = &s->slots[b->victims[k]];
		if (!sl->busy)
			continue; /* released meanwhile: its state is someone else's */
		p = &sl->reg->st[sl->idx];
		if (!(*p & PG_WP)) {
			sl->busy = 0; /* written meanwhile: it stays, dirty */
			continue;
		}
		if (b->zlen[k] && rg_zc_store(s, rg_zc_key(&b->iov[k].oid, b->iov[k].index),
					      b->zbuf + (size_t)k * RG_ZC_BOUND, b->zlen[k]) == 0) {
			sl->busy = 0;
			s->st.zcache_absorbed++;
			*p = (uint8_t)((*p & ~PG_DIRTY) | PG_INPOOL);
			drop[ndrop++] = b->victims[k];
			continue;
		}
		b->victims[np] = b->victims[k];
		b->iov[np++] = b->iov[k]; /* its page stays where it is in b->buf */
	}
	*freed += rg_drop_batch(s, drop, ndrop);
	return np;
}

/* One batch. Called and returns with s->lock held; drops it for the put. @return slots freed. */
static unsigned rg_evictor_round(struct rg_space *s)
{
	struct rg_bg *b = s->bg;
	unsigned n, k, m = 0, freed = 0, ndrop = 0;
	uint32_t drop[RG_EVICT_BG];
	struct rg_slot *sl;
	uint8_t *p;
	int rc = 0;

	n = rg_clock_pick(s, b->victims, RG_EVICT_BG);
	for (k = 0; k < n; k++) {
		uint32_t h = b->victims[k];
		void *src;

		sl = &s->slots[h];
		p = &sl->reg->st[sl->idx];
		if (!(*p & PG_DIRTY)) {
			drop[ndrop++] = h; /* clean: dropped with the others below */
			continue;
		}
		src = rg_put_source(s, sl->reg, sl->idx, b->buf + (size_t)m * RG_PAGE);
		if (!src) {
			s->st.put_refused++;
			*p |= PG_REF;
			continue;
		}
		if (src != b->buf + (size_t)m * RG_PAGE)
			memcpy(b->buf + (size_t)m * RG_PAGE, src, RG_PAGE);
		b->iov[m].oid = sl->reg->obj->oid;
		b->iov[m].index = sl->reg->first + sl->idx;
		b->iov[m].page = b->buf + (size_t)m * RG_PAGE;
		b->iov[m].result = 0;
		sl->busy = 1;
		b->victims[m++] = h;
	}
	freed += rg_drop_batch(s, drop, ndrop);
	ndrop = 0;
	if (m && s->zc)
		m = rg_evictor_absorb(s, m, &freed);
	if (!m)
		goto out;
	/* the rest (incompressible, or no cache) put without s->lock: faults go on meanwhile (s->io
	 * first: flushes wait for it) */
	pthread_mutex_lock(&s->io);
	pthread_mutex_unlock(&s->lock);
	rc = ramster_putv(s->conn, s->pool, b->iov, m);
	pthread_mutex_unlock(&s->io);
	pthread_mutex_lock(&s->lock);
	for (k = 0; k < m; k++) {
		sl = &s->slots[b->victims[k]];
		if (!sl->busy)
			continue; /* released meanwhile: its state is someone else's */
		sl->busy = 0;
		p = &sl->reg->st[sl->idx];
		if (rc < 0 || b->iov[k].result) {
			s->st.put_refused++;
			*p |= PG_REF; /* keep it; try others first next time */
			continue;
		}
		/* the pool's copy is the current one: no older one may stay in the cache */
		rg_zc_drop(s, rg_zc_key(&b->iov[k].oid, b->iov[k].index));
		s->st.puts++;
		*p |= PG_INPOOL;
		if (!(*p & PG_WP))
			continue; /* written during the put: the pool's copy is stale, it stays
				     dirty */
		*p &= (uint8_t)~PG_DIRTY;
		drop[ndrop++] = b->victims[k];
	}
	freed += rg_drop_batch(s, drop, ndrop);
out:
	s->st.evicted_bg += freed;
	return freed;
}

/* Put a batch of the cache's write-back queue. Called and returns with s->lock held. */
static void rg_evictor_wb(struct rg_space *s)
{
	struct rg_bg *b = s->bg;
	unsigned n = rg_zc_wb_take(s, b->iov, b->buf, RG_EVICT_BG);
	int rc;

	if (!n)
		return;
	pthread_mutex_lock(&s->io);
	pthread_mutex_unlock(&s->lock);
	rc = ramster_putv(s->conn, s->pool, b->iov, n);
	pthread_mutex_unlock(&s->io);
	pthread_mutex_lock(&s->lock);
	rg_zc_wb_done(s, b->iov, n, rc);
}

static void *rg_evictor(void *arg)
{
	struct rg_space *s = arg;

	if (rg_thread_hook)
		rg_thread_hook();
	pthread_mutex_lock(&s->lock);
	while (!s->ev_stop) {
		if (rg_evictor_due(s)) {
			if (!rg_evictor_round(s))
				s->ev_on = 0; /* nothing would go: wait for the next kick */
		} else if (rg_zc_wb_queued(s)) {
			rg_evictor_wb(s); /* free slots first, then the cache's queue */
		} else {
			pthread_cond_wait(&s->ev_cv, &s->lock);
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int rg_evictor_start(struct rg_space *s)
{
	sigset_t all, old;
	int err;

	s->wm_start = (uint32_t)((uint64_t)s->nslots * RG_WM_START / 100);
	s->wm_stop = (uint32_t)((uint64_t)s->nslots * RG_WM_STOP / 100);
	s->bg = calloc(1, sizeof(*s->bg));
	if (!s->bg)
		return ENOMEM;
	s->bg->buf = aligned_alloc(RG_PAGE, (size_t)RG_EVICT_BG * RG_PAGE);
	s->bg->zbuf = malloc((size_t)RG_EVICT_BG * RG_ZC_BOUND);
	if (!s->bg->buf || !s->bg->zbuf) {
		err = ENOMEM;
		goto free_bg;
	}
	err = pthread_cond_init(&s->ev_cv, NULL);
	if (err)
		goto free_bg;
	/* the evictor takes no signal of the program's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->evictor, NULL, rg_evictor, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		goto destroy_cv;
	s->evictor_ok = 1;
	return 0;

destroy_cv:
	pthread_cond_destroy(&s->ev_cv);
free_bg:
	free(s->bg->zbuf);
	free(s->bg->buf);
	free(s->bg);
	s->bg = NULL;
	return err;
}

void rg_evictor_stop(struct rg_space *s)
{
	if (s->evictor_ok) {
		pthread_mutex_lock(&s->lock);
		s->ev_stop = 1;
		pthread_cond_signal(&s->ev_cv);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->evictor, NULL);
		s->evictor_ok = 0;
		pthread_cond_destroy(&s->ev_cv);
	}
	if (s->bg) {
		free(s->bg->zbuf);
		free(s->bg->buf);
		free(s->bg);
		s->bg = NULL;
	}
}
