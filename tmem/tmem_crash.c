/*
 * tmem_crash.c - the handle space's side of crash survival (tmem.h,
 * tmem/crashtab.h): the crash table tmem keeps up to date (its writes are in
 * tmem.c, where objects, pools and descriptors change), pools a crash left
 * incomplete, and their counters.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tmem/crashtab.h"
#include "tmem/tmem.h"
#include "tmem/tmem_int.h"

int tmem_set_crashtab(struct tmem *t, struct tmem_crashtab *ct)
{
	uint32_t i;
	int ret = 0;

	if (!ct || tmem_crashtab_valid(ct, tmem_crashtab_bytes(ct->objs_max)))
		return -EINVAL;
	pthread_mutex_lock(&t->pool_lock);
	for (i = 0; i < TMEM_MAX_POOLS && !t->pools[i]; i++)
		;
	if (t->crash || i < TMEM_MAX_POOLS) {
		ret = -EBUSY;
	} else {
		/* no pool, so no object and no call in progress reads these yet */
		t->crash = ct;
		t->crash_objs = ct->objs_max;
	}
	pthread_mutex_unlock(&t->pool_lock);
	return ret;
}

int tmem_pool_set_incomplete(struct tmem *t, uint32_t id)
{
	struct tmem_pool *p = tmem_pool_ref(t, id);
	int ret = 0;

	if (!p)
		return -ENOENT;
	if (p->flags & TMEM_PERSISTENT)
		atomic_store(&p->incomplete, true);
	else
		ret = -EINVAL; /* an ephemeral get may miss anyway */
	tmem_pool_unref(p);
	return ret;
}

void tmem_get_crash_stats(struct tmem *t, struct tmem_crash_stats *s)
{
	s->untracked_objects = CNT_GET(t->crash_untracked);
	s->gets_incomplete = CNT_GET(t->gets_incomplete);
}
