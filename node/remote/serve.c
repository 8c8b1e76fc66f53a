/*
 * serve.c - serving peers: their puts, gets and flushes on the foreign store,
 * returns and drains they ask of us, the echo of a ping (and our own pings),
 * and the foreign store's chunks registered for their one-sided reads.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/arena.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote/remote_int.h"

/* ---- ping: a diagnostic round trip through a peer ---------------------------------------------- */

struct rping {
	void *back;
	remote_get_fn cb;
	void *arg;
};

static void ping_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		    size_t plen)
{
	struct rping *p = arg;

	if (result == 0 && plen != 4096)
		result = -EIO;
	if (result == 0)
		memcpy(p->back, payload, plen);
	p->cb(p->arg, result);
	free(p);
}

void remote_ping(struct remote *r, uint32_t node, const void *page, void *back, remote_get_fn cb,
		 void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	struct rping *p = malloc(sizeof(*p));
	int rc;

	if (!p) {
		cb(arg, -ENOMEM);
		return;
	}
	*p = (struct rping){ back, cb, arg };
	r->pings++;
	m.op = RAMSTER__PEER__OP__P_ECHO;
	rc = cluster_request(r->cl, node, &m, page, 4096, r->timeout_ms, ping_cb, p);
	if (rc) {
		free(p);
		cb(arg, rc);
	}
}

/* ---- serving peers (the foreign store) ------------------------------------------------------ */

static void key_of(struct foreign_key *k, uint32_t node, uint64_t session,
		   const Ramster__Peer__Page *pg)
{
	memset(k, 0, sizeof(*k));
	k->owner = node;
	k->incarnation = session;
	k->pool = pg->pool;
	k->oid[0] = pg->oid0;
	k->oid[1] = pg->oid1;
	k->oid[2] = pg->oid2;
	k->index = pg->index;
}

void serve_request(void *arg, uint32_t node, uint64_t session, const Ramster__Peer__Msg *m,
		       const uint8_t *payload, size_t plen)
{
	struct remote *r = arg;
	struct foreign_key k;
	const void *data;
	size_t len;
	uint32_t cs;
	int rc;

	if (m->op == RAMSTER__PEER__OP__P_ECHO) {
		/* a diagnostic round trip (ramster_ping): the bytes go back as they came */
		r->served_echoes++;
		cluster_reply(r->cl, node, m->seq, 0, NULL, payload, plen);
		return;
	}
	if (m->op == RAMSTER__PEER__OP__P_DRAIN) {
		/* peerwire let through exactly one byte */
		rc = payload[0] > 1 ? -EINVAL : remote_drain(r, payload[0] == 1);
		if (!rc)
			log_notice("drain %s at the request of node %u", payload[0] ? "asked" : "ended",
				   node);
		cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
		return;
	}
	key_of(&k, node, session, m->page);
	r->owner[node].last_ns = clock_now_ns(); /* give back: least recent owners first */
	switch (m->op) {
	case RAMSTER__PEER__OP__P_PUT:
		if (r->drain.on) {
			r->drain.refused++;
			rc = -ENOSPC;
		} else {
			/* opaque sealed bytes: the link's tag checked them in transit, the
			 * owner's seal checks them when they come back (no adler32 here) */
			rc = foreign_put_at(r->fs, &k, m->page->flags & PAGE_PERSISTENT, payload,
					    plen, m->page->checksum, &data);
			/* full: an unreachable owner's pages go first, the longest away first */
			while (rc == -ENOSPC && serve_reclaim_orphans(r, node))
				rc = foreign_put_at(r->fs, &k, m->page->flags & PAGE_PERSISTENT,
						    payload, plen, m->page->checksum, &data);
		}
		if (rc) {
			r->served_puts_refused++;
			cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
			break;
		}
		r->served_puts++;
		if (r->holder_lie)
			holder_lie_put(r, &k, payload, plen);
		{
			/* over rdma: tell the owner where the bytes are, for one-sided reads */
			Ramster__Peer__Page pg = RAMSTER__PEER__PAGE__INIT;
			uint32_t rkey, gen;

			if (cluster_mem_key(r->cl, node, data, plen, &rkey, &gen) == 0) {
				pg.raddr = (uint64_t)(uintptr_t)data;
				pg.rkey = rkey;
				cluster_reply(r->cl, node, m->seq, 0, &pg, NULL, 0);
				break;
			}
		}
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_GET: {
		Ramster__Peer__Page pg;

		rc = foreign_get(r->fs, &k, &data, &len, &cs);
		if (rc) {
			r->served_get_misses++;
			cluster_reply(r->cl, node, m->seq, rc, NULL, NULL, 0);
			break;
		}
		r->served_gets++;
		pg = *m->page;
		pg.base.unknown_fields = NULL;
		pg.base.n_unknown_fields = 0;
		pg.checksum = cs;
		if (r->holder_lie)
			data = holder_lie_get(r, &k, data, &len);
		cluster_reply(r->cl, node, m->seq, 0, &pg, data, len);
		if (m->page->flags & PAGE_DELETE)
			foreign_flush(r->fs, &k);
		break;
	}
	case RAMSTER__PEER__OP__P_FLUSH:
		r->served_flushes++;
		rc = foreign_flush_upto(r->fs, &k, m->page->horizon);
		cluster_reply(r->cl, node, m->seq, rc == -ESTALE ? 0 : rc, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_FLUSH_OBJECT:
		r->served_flushes++;
		foreign_flush_object(r->fs, &k);
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_FLUSH_POOL:
		r->served_flushes++;
		foreign_flush_pool(r->fs, node, session, m->page->pool);
		cluster_reply(r->cl, node, m->seq, 0, NULL, NULL, 0);
		break;
	case RAMSTER__PEER__OP__P_RETURN:
		drain_return_serve(r, node, m, payload, plen);
		break;

	default:
		cluster_reply(r->cl, node, m->seq, -EOPNOTSUPP, NULL, NULL, 0);
		break;
	}
}

/* ---- room: orphans first ------------------------------------------------------------------- */

uint64_t serve_reclaim_orphans(struct remote *r, uint32_t except)
{
	uint32_t n, oldest = 0;
	uint64_t dropped;
	struct owner_lease *o;

	for (n = 1; n <= 64; n++) {
		o = &r->owner[n];
		if (n == except || !o->down_since_ns || !foreign_owner_pages(r->fs, n))
			continue;
		if (!oldest || o->down_since_ns < r->owner[oldest].down_since_ns)
			oldest = n;
	}
	if (!oldest)
		return 0;
	o = &r->owner[oldest];
	dropped = foreign_drop_owner(r->fs, oldest, 0);
	r->orphans_reclaimed += dropped;
	r->orphan_reclaims++;
	if (o->session)
		o->dropped = o->session; /* it forgets them too, should it come back */
	log_notice("reclaimed %llu pages held for node %u, unreachable for %.1f s: node %u "
		   "needed the room",
		   (unsigned long long)dropped, oldest,
		   (double)(clock_now_ns() - o->down_since_ns) / 1e9, except);
	return dropped;
}

/* ---- the foreign store's memory, readable by its owner over rdma ---------------------------- */

static void chunk_add(void *arg, uint32_t owner, void *base, size_t len)
{
	struct remote *r = arg;
	int rc = cluster_mem_add(r->cl, owner, base, len);

	if (rc == 0)
		r->rdma_chunks++;
	else if (rc != -ENOTSUP)
		r->rdma_chunk_errors++;
}

static void chunk_del(void *arg, uint32_t owner, void *base, size_t len)
{
	struct remote *r = arg;

	cluster_mem_del(r->cl, owner, base);
}

const struct arena_hooks serve_arena_hooks = { chunk_add, chunk_del };

struct chunk_ctx {
	struct remote *r;
	uint32_t owner;
};

static void chunk_register(void *arg, void *base, size_t len)
{
	struct chunk_ctx *x = arg;

	chunk_add(x->r, x->owner, base, len);
}


void serve_register_chunks(struct remote *r, uint32_t owner)
{
	struct chunk_ctx x = {r, owner};

	foreign_foreach_chunk(r->fs, owner, chunk_register, &x);
}
