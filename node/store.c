/*
 * store.c - the frontends' storage API (store.h): the tier, a page on a
 * peer, a full tier, and the node without a collective, behind one call each.
 *
 * Loop only, like everything it calls on the remote side.
 */
#include "node/store.h"

#include <errno.h>
#include <stdlib.h>

#include "node/clock.h"
#include "node/remote/remote.h"
#include "tmem/zcache.h"

struct store {
	struct ev_loop *loop;
	struct zcache *z;
	struct tmem *t;
	struct remote *remote; /* NULL: a single node */
	uint64_t room_wait_ns; /* a put waits this long without progress, at most */
	/* counters: the loop writes them */
	uint64_t room_waits;   /* puts that waited for remotify to make room */
	uint64_t room_refused; /* ... and were refused all the same */
	uint64_t remote_gets;  /* gets of pages on peers started */
	uint64_t lost_nocollective; /* remote pages met with no collective */
};

struct store *store_create(struct ev_loop *loop, struct zcache *z, struct remote *remote,
			   unsigned room_wait_ms)
{
	struct store *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->loop = loop;
	s->z = z;
	s->t = zcache_tmem(z);
	s->remote = remote;
	s->room_wait_ns = (uint64_t)(room_wait_ms ? room_wait_ms : STORE_DEFAULT_ROOM_WAIT_MS) *
			  1000000u;
	return s;
}

void store_destroy(struct store *s)
{
	free(s);
}

struct tmem *store_tmem(struct store *s)
{
	return s->t;
}

bool store_collective(const struct store *s)
{
	return s->remote != NULL;
}

int store_pool_new(struct store *s, unsigned flags)
{
	return tmem_pool_new(s->t, flags);
}

int store_pool_destroy(struct store *s, uint32_t pool)
{
	return tmem_pool_destroy(s->t, pool);
}

int store_pool_info(struct store *s, uint32_t pool, struct tmem_pool_info *info)
{
	return tmem_pool_info(s->t, pool, info);
}

/* ---- puts and the room-wait policy ------------------------------------------------ */

void store_req_begin(struct store_req *q, store_done_fn cb, void *arg)
{
	*q = (struct store_req){.cb = cb, .arg = arg};
}

void store_req_cancel(struct store_req *q)
{
	if (q->room && q->s)
		remote_wait_cancel(q->s->remote, q->room);
	q->room = NULL;
}

static int put_try(struct store *s, struct store_req *q);

static void put_room(void *arg)
{
	struct store_req *q = arg;
	int rc;

	q->room = NULL;
	rc = put_try(q->s, q);
	if (rc != STORE_PENDING)
		q->cb(q->arg, rc);
}

/* One try of q's put; waits (STORE_PENDING) within the policy. */
static int put_try(struct store *s, struct store_req *q)
{
	int rc = tmem_put(s->t, q->h.pool, &q->h.oid, q->h.index, q->page);
	struct tmem_pool_info info = {0};
	uint64_t now;

	if (s->remote && (!rc || rc == -ENOSPC))
		remote_note_put(s->remote); /* the tier grew, or is full: remotify looks */
	if (rc != -ENOSPC || !s->remote || q->waited_out) {
		if (!rc)
			q->wait_start = 0; /* progress: the next put has its own budget */
		return rc;
	}
	if (tmem_pool_info(s->t, q->h.pool, &info) || !(info.flags & TMEM_PERSISTENT))
		return rc; /* an ephemeral put is refused, never waits */
	now = clock_now_ns();
	if (!q->wait_start) {
		q->wait_start = now;
		q->waited = true;
		s->room_waits++;
	}
	if (now - q->wait_start < s->room_wait_ns) {
		q->room = remote_wait_room(s->remote, STORE_ROOM_STEP_MS, put_room, q);
		return STORE_PENDING;
	}
	q->waited_out = true;
	q->wait_start = 0;
	s->room_refused++;
	return rc;
}

int store_put(struct store *s, struct store_req *q, uint32_t pool, const struct tmem_oid *oid,
	      uint32_t index, const void *page)
{
	q->s = s;
	q->h = (struct tmem_handle){pool, *oid, index};
	q->page = page;
	return put_try(s, q);
}

/* ---- gets ------------------------------------------------------------------------ */

int store_get(struct store *s, uint32_t pool, const struct tmem_oid *oid, uint32_t index,
	      void *page, store_done_fn cb, void *arg)
{
	struct tmem_pool_info info = {0};
	uint64_t pampd = 0;
	bool pers;
	int rc = tmem_get_ex(s->t, pool, oid, index, page, &pampd);

	if (rc != -EREMOTE)
		return rc;
	(void)tmem_pool_info(s->t, pool, &info);
	pers = info.flags & TMEM_PERSISTENT;
	if (!s->remote) { /* no collective any more: the page is lost */
		s->lost_nocollective++;
		return pers ? -EIO : -ENOENT;
	}
	s->remote_gets++;
	remote_get(s->remote, &(struct tmem_handle){pool, *oid, index}, pers,
		   info.flags & (TMEM_PERSISTENT | TMEM_SHARED) ? 0 : REMOTE_GET_DESTRUCTIVE, pampd,
		   page, cb, arg);
	return STORE_PENDING;
}

/* ---- flushes and listings ----------------------------------------------------------- */

int store_flush_page(struct store *s, uint32_t pool, const struct tmem_oid *oid, uint32_t index)
{
	return tmem_flush_page(s->t, pool, oid, index);
}

int store_flush_object(struct store *s, uint32_t pool, const struct tmem_oid *oid)
{
	return tmem_flush_object(s->t, pool, oid);
}

static int is_remote_fn(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	*(bool *)arg = *pampd && zcache_pampd_is_remote(*pampd);
	return 0;
}

bool store_is_remote(struct store *s, const struct tmem_handle *h)
{
	bool remote = false;

	(void)tmem_update(s->t, h, is_remote_fn, &remote);
	return remote;
}

void store_foreach_stat(const struct store *s,
			void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			void *arg)
{
	fn(arg, "store_room_waits", s->room_waits,
	   "persistent puts that waited for remotify to make room (any frontend)");
	fn(arg, "store_room_refused", s->room_refused, "of those, refused all the same");
	fn(arg, "store_remote_gets", s->remote_gets, "gets of pages on peers started (any frontend)");
	fn(arg, "store_lost_nocollective", s->lost_nocollective,
	   "remote pages met by a node that has no collective any more");
}
