/*
 * tmem_walk.c - tmem's walks of the handle space, for snapshots
 * (tmem/snapshot.c) and the restart image: one object's pages
 * (tmem_scan_object), a resumable scan in slices (tmem_scan), and the whole
 * space pool by pool (tmem_walk). Each takes the bucket locks as the handle
 * calls of tmem.c do (tmem_int.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tmem/map.h"
#include "tmem/tmem.h"
#include "tmem/tmem_int.h"

/* ---- the walk (snapshots: tmem/snapshot.c) ------------------------------------------ */

struct walk_ctx {
	struct tmem *t;
	const struct tmem_pool *p;
	const struct tmem_obj *o;
	int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd);
	void *arg;
};

static int walk_one(void *arg, uint32_t index, uint64_t pampd)
{
	struct walk_ctx *w = arg;
	struct tmem_handle h = {w->p->id, w->o->oid, index};

	return w->page_fn(w->arg, &h, w->p->flags & TMEM_PERSISTENT, pampd);
}

int tmem_scan_object(struct tmem *t, uint32_t id, const struct tmem_oid *oid,
		     int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers,
				    uint64_t pampd),
		     void *arg)
{
	struct walk_ctx w = {.t = t, .page_fn = page_fn, .arg = arg};
	struct tmem_pool *p = tmem_pool_ref(t, id);
	struct tmem_bucket *b;
	int rc = -ENOENT;

	if (!p)
		return -ENOENT;
	b = pool_bucket(p, oid);
	pthread_mutex_lock(&b->lock);
	w.p = p;
	w.o = atomic_load(&p->dead) ? NULL : obj_find(b, oid);
	if (w.o)
		rc = map_walk(&w.o->map, walk_one, &w) != 0;
	pthread_mutex_unlock(&b->lock);
	tmem_pool_unref(p);
	return rc;
}

int tmem_scan(struct tmem *t, struct tmem_cursor *c, unsigned max_slots,
	      int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd),
	      void *arg)
{
	struct walk_ctx w = {.t = t, .page_fn = page_fn, .arg = arg};
	unsigned seen = 0;
	int stop = 0;

	while (seen < max_slots && !stop) {
		struct tmem_pool *p = c->pool < TMEM_MAX_POOLS ? tmem_pool_ref(t, c->pool) : NULL;

		if (c->pool >= TMEM_MAX_POOLS) {
			*c = (struct tmem_cursor){0, 0, 0};
			return 1;
		}
		if (!p) {
			*c = (struct tmem_cursor){c->pool + 1, 0, 0};
			seen++;
			continue;
		}
		w.p = p;
		while (c->bucket < TMEM_BUCKETS && seen < max_slots && !stop) {
			struct tmem_bucket *bk = &p->bucket[c->bucket];

			pthread_mutex_lock(&bk->lock);
			while (bk->tab && c->slot <= bk->mask && seen < max_slots && !stop) {
				const struct tmem_obj *o;

				/* stopped: the rest of the slot waits for the next pass */
				for (o = bk->tab[c->slot]; o && !stop; o = o->next) {
					w.o = o;
					stop = map_walk(&o->map, walk_one, &w) != 0;
				}
				c->slot++;
				seen++;
			}
			if (!bk->tab || c->slot > bk->mask) {
				c->bucket++;
				c->slot = 0;
				seen++;
			}
			pthread_mutex_unlock(&bk->lock);
		}
		if (c->bucket >= TMEM_BUCKETS)
			*c = (struct tmem_cursor){c->pool + 1, 0, 0};
		tmem_pool_unref(p);
	}
	return 0;
}

int tmem_walk(struct tmem *t, int (*pool_fn)(void *arg, const struct tmem_pool_info *info),
	      int (*page_fn)(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd),
	      void *arg)
{
	struct walk_ctx w = {.t = t, .page_fn = page_fn, .arg = arg};
	struct tmem_pool_info info;
	uint32_t id, k;
	unsigned b;
	int rc = 0;

	for (id = 0; id < TMEM_MAX_POOLS && !rc; id++) {
		struct tmem_pool *p;

		if (tmem_pool_info(t, id, &info))
			continue;
		rc = pool_fn ? pool_fn(arg, &info) : 0;
		p = tmem_pool_ref(t, id);
		if (!p)
			continue;
		w.p = p;
		for (b = 0; b < TMEM_BUCKETS && !rc; b++) {
			struct tmem_bucket *bk = &p->bucket[b];

			pthread_mutex_lock(&bk->lock);
			for (k = 0; bk->tab && k <= bk->mask && !rc; k++) {
				const struct tmem_obj *o;

				for (o = bk->tab[k]; o && !rc; o = o->next) {
					w.o = o;
					rc = map_walk(&o->map, walk_one, &w);
				}
			}
			pthread_mutex_unlock(&bk->lock);
		}
		tmem_pool_unref(p);
	}
	return rc;
}
