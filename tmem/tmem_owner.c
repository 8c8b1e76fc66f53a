/*
 * tmem_owner.c - owners (uids) in the handle space: their pools, weights and
 * shares of the pages (who is over its share when the tier evicts), and the
 * space's counters (tmem.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tmem/tmem.h"
#include "tmem/tmem_int.h"

int tmem_pool_set_owner(struct tmem *t, uint32_t id, unsigned owner, unsigned weight)
{
	struct tmem_pool *p;
	unsigned top;

	if (!owner || owner >= TMEM_OWNERS_MAX || !weight)
		return -EINVAL;
	p = tmem_pool_ref(t, id);
	if (!p)
		return -ENOENT;
	if (CNT_GET(p->pages) || atomic_load(&p->owner)) {
		tmem_pool_unref(p);
		return -EBUSY;
	}
	atomic_store(&t->owners[owner].weight, weight);
	atomic_store(&p->owner, owner);
	top = atomic_load(&t->owners_top);
	while (top <= owner && !atomic_compare_exchange_weak(&t->owners_top, &top, owner + 1))
		;
	tmem_pool_unref(p);
	return 0;
}

int tmem_owner_set_weight(struct tmem *t, unsigned owner, unsigned weight)
{
	if (!owner || owner >= TMEM_OWNERS_MAX || !weight)
		return -EINVAL;
	atomic_store(&t->owners[owner].weight, weight);
	return 0;
}

uint64_t tmem_owner_pages(struct tmem *t, unsigned owner)
{
	return owner && owner < TMEM_OWNERS_MAX ? CNT_GET(t->owners[owner].pages) : 0;
}

uint64_t tmem_owner_remote(struct tmem *t, unsigned owner)
{
	return owner && owner < TMEM_OWNERS_MAX ? CNT_GET(t->owners[owner].remote) : 0;
}

/* Sums over the owners holding pages now. */
static void owners_sum(struct tmem *t, uint64_t *total, uint64_t *wsum)
{
	unsigned o, top = atomic_load(&t->owners_top);
	uint64_t pages;

	*total = *wsum = 0;
	for (o = 1; o < top; o++) {
		pages = CNT_GET(t->owners[o].pages);
		if (!pages)
			continue;
		*total += pages;
		*wsum += atomic_load_explicit(&t->owners[o].weight, memory_order_relaxed);
	}
}

/* Over its share by more than 1/16 (no churn between owners near their shares). */
static bool owner_over(struct tmem *t, unsigned o, uint64_t total, uint64_t wsum)
{
	return wsum &&
	       CNT_GET(t->owners[o].pages) * wsum * 16 >
		   total * atomic_load_explicit(&t->owners[o].weight, memory_order_relaxed) * 17;
}

bool tmem_any_over_share(struct tmem *t)
{
	unsigned o, top = atomic_load(&t->owners_top);
	uint64_t total, wsum;

	owners_sum(t, &total, &wsum);
	for (o = 1; o < top; o++)
		if (owner_over(t, o, total, wsum))
			return true;
	return false;
}

bool tmem_ref_over_share(struct tmem *t, struct tmem_ref ref)
{
	unsigned owner;
	uint64_t total, wsum;
	uintptr_t e;

	pthread_mutex_lock(&t->obj_lock);
	e = ref.objno < t->objtab_size ? t->objtab[ref.objno] : 1;
	owner = OBJTAB_IS_FREE(e) ? 0 : atomic_load(&((struct tmem_obj *)e)->pool->owner);
	pthread_mutex_unlock(&t->obj_lock);
	if (!owner)
		return false;
	/* the owners holding pages now share the space by weight */
	owners_sum(t, &total, &wsum);
	return owner_over(t, owner, total, wsum);
}

uint64_t tmem_meta_estimate(struct tmem *t)
{
	int64_t nodes = CNT_GET(t->map_nodes), bb = CNT_GET(t->bucket_bytes);

	return CNT_GET(t->pools_now) * sizeof(struct tmem_pool) +
	       CNT_GET(t->objects) * (sizeof(struct tmem_obj) + sizeof(*t->objtab)) +
	       (uint64_t)(nodes > 0 ? nodes : 0) * map_node_size() + (uint64_t)(bb > 0 ? bb : 0);
}

void tmem_get_stats(struct tmem *t, struct tmem_stats *s)
{
	int64_t nodes = CNT_GET(t->map_nodes), bb = CNT_GET(t->bucket_bytes);

	s->puts = CNT_GET(t->puts);
	s->puts_dup = CNT_GET(t->puts_dup);
	s->puts_failed = CNT_GET(t->puts_failed);
	s->dup_put_flushes = CNT_GET(t->dup_put_flushes);
	s->gets = CNT_GET(t->gets);
	s->hits = CNT_GET(t->hits);
	s->misses = CNT_GET(t->misses);
	s->get_errors = CNT_GET(t->get_errors);
	s->flushes = CNT_GET(t->flushes);
	s->flushed_pages = CNT_GET(t->flushed_pages);
	s->flush_objects = CNT_GET(t->flush_objects);
	s->pools_created = CNT_GET(t->pools_created);
	s->pools_destroyed = CNT_GET(t->pools_destroyed);
	s->pools = CNT_GET(t->pools_now);
	s->objects = CNT_GET(t->objects);
	s->pages = CNT_GET(t->pages);
	s->evicted_pages = CNT_GET(t->evicted_pages);
	s->remote_gets = CNT_GET(t->remote_gets);
	pthread_mutex_lock(&t->obj_lock);
	s->meta_bytes = (uint64_t)t->objtab_size * sizeof(*t->objtab);
	pthread_mutex_unlock(&t->obj_lock);
	s->meta_bytes +=
	    sizeof(*t) + TMEM_MAX_POOLS * sizeof(*t->pools) + s->pools * sizeof(struct tmem_pool) +
	    s->objects * sizeof(struct tmem_obj) +
	    (uint64_t)(nodes > 0 ? nodes : 0) * map_node_size() + (uint64_t)(bb > 0 ? bb : 0);
}
