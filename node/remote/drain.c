/*
 * drain.c - a draining holder hands every page it holds back to its owner
 * (P_RETURN), and the owner's side of that: placing the returned copy
 * elsewhere and moving its record.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/arena.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote/erasure.h"
#include "node/remote/remote_int.h"

/* ---- drain: hand every foreign page back to its owner ----------------------------------- */

/*
 * A draining node refuses new pages (and announces no free room), and sends
 * each page it holds to its owner (P_RETURN with the bytes). The owner places
 * it on another peer and moves its record there, then answers 0, and the page
 * is dropped here; an owner that no longer wants the copy answers -ENOENT and
 * it is dropped too. Anything else keeps the page for a later try.
 */

struct rdrain {
	struct remote *r;
	unsigned slot;
	bool give; /* a give back's, not a drain's */
	bool pers;
	size_t len; /* the page's bytes in the store */
};

/* Bytes the store will use once the pages in flight are handed back. */
static uint64_t drain_used_after(struct remote *r)
{
	struct foreign_stats fs;

	foreign_get_stats(r->fs, &fs);
	return fs.used > r->drain.inflight_bytes ? fs.used - r->drain.inflight_bytes : 0;
}

static void drain_ret_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			 const uint8_t *payload, size_t plen)
{
	struct rdrain *d = arg;
	struct remote *r = d->r;

	if (result == 0 || result == -ENOENT) {
		foreign_flush(r->fs, &r->drain.busy[d->slot]);
		if (result == 0)
			r->drain.returned++;
		else
			r->drain.orphans++; /* the owner does not want this copy (or it is bad) */
		if (d->give) {
			r->drain.given_pages++;
			r->drain.given_bytes += d->len;
		}
	} else if (result == -ENOSPC && d->give && !d->pers) {
		/* nobody has room for an ephemeral page: it may go (a miss later) */
		foreign_flush(r->fs, &r->drain.busy[d->slot]);
		r->drain.given_dropped++;
	} else if (result != -ECANCELED) {
		r->drain.failed++;
		r->drain.pause_until_ns = clock_now_ns() + DRAIN_RETRY_MS * 1000000ull;
	}
	r->drain.busy_used[d->slot] = false;
	r->drain.inflight--;
	r->drain.inflight_bytes -= d->len;
	free(d);
	/* the next pages at once, not at the next tick: as fast as the round trips go */
	if (result != -ECANCELED && !r->closing && ev_is_active(&r->drain.timer) &&
	    clock_now_ns() >= r->drain.pause_until_ns)
		ev_feed_event(r->loop, &r->drain.timer, EV_TIMER);
}

static bool key_eq(const struct foreign_key *a, const struct foreign_key *b)
{
	return a->owner == b->owner && a->incarnation == b->incarnation && a->pool == b->pool &&
	       a->oid[0] == b->oid[0] && a->oid[1] == b->oid[1] && a->oid[2] == b->oid[2] &&
	       a->index == b->index;
}

/* A page of the walk: hand it back unless in hand already. @return true to stop the walk. */
static bool drain_visit(void *arg, const struct foreign_key *k, bool pers, const void *data,
			size_t len, uint32_t checksum)
{
	struct remote *r = arg;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	struct rdrain *d;
	unsigned i, slot = DRAIN_INFLIGHT;

	for (i = 0; i < DRAIN_INFLIGHT; i++) {
		if (r->drain.busy_used[i] && key_eq(&r->drain.busy[i], k))
			return false;
		if (!r->drain.busy_used[i] && slot == DRAIN_INFLIGHT)
			slot = i;
	}
	if (slot == DRAIN_INFLIGHT)
		return true;
	d = malloc(sizeof(*d));
	if (!d)
		return true;
	*d = (struct rdrain){r, slot, !r->drain.on, pers, len};
	ramster__peer__page__init(&pg);
	pg.pool = k->pool;
	pg.oid0 = k->oid[0];
	pg.oid1 = k->oid[1];
	pg.oid2 = k->oid[2];
	pg.index = k->index;
	pg.flags = pers ? PAGE_PERSISTENT : 0;
	pg.checksum = checksum;
	m.op = RAMSTER__PEER__OP__P_RETURN;
	m.page = &pg;
	if (cluster_request(r->cl, k->owner, &m, data, len, r->timeout_ms, drain_ret_cb, d)) {
		free(d);
		r->drain.failed++;
		return false;
	}
	r->drain.busy[slot] = *k;
	r->drain.busy_used[slot] = true;
	r->drain.inflight++;
	r->drain.inflight_bytes += len;
	return r->drain.inflight >= DRAIN_INFLIGHT;
}

/* Owners by their last put or get here, least recent first (give back's order). */
static unsigned owners_by_age(struct remote *r, uint32_t *order)
{
	unsigned n = 0, i;

	for (uint32_t o = 1; o <= 64; o++) {
		if (!foreign_owner_pages(r->fs, o))
			continue;
		for (i = n; i > 0 && r->owner[order[i - 1]].last_ns > r->owner[o].last_ns; i--)
			order[i] = order[i - 1];
		order[i] = o;
		n++;
	}
	return n;
}

/* A walk's page: into the queue. @return true to stop (no memory). */
static bool queue_add(void *arg, const struct foreign_key *k, bool pers, const void *data,
		      size_t len, uint32_t checksum)
{
	struct remote *r = arg;
	struct remote_drain *d = &r->drain;

	if (d->q_n == d->q_cap) {
		size_t cap = d->q_cap ? 2 * d->q_cap : 1024;
		struct foreign_key *q = realloc(d->queue, cap * sizeof(*q));

		if (!q)
			return true;
		d->queue = q;
		d->q_cap = cap;
	}
	d->queue[d->q_n++] = *k;
	return false;
}

/* Hand back queued pages while there is room in flight. @return whether the queue is done. */
static bool queue_pump(struct remote *r)
{
	struct remote_drain *d = &r->drain;

	while (d->q_head < d->q_n && d->inflight < DRAIN_INFLIGHT) {
		const struct foreign_key *k = &d->queue[d->q_head++];
		const void *data;
		size_t len;
		uint32_t cs;
		bool pers;

		if (foreign_peek(r->fs, k, &data, &len, &cs, &pers))
			continue; /* gone meanwhile (flushed, or handed back) */
		if (drain_visit(r, k, pers, data, len, cs))
			break;
	}
	if (d->q_head < d->q_n)
		return false;
	d->q_n = d->q_head = 0;
	return true;
}

/*
 * Give back: the pages to hand back are those in evacuating arena chunks
 * (foreign_evacuate), so that their memory goes with them; more chunks are
 * marked, least recently active owner first, while the store would still use
 * more than give_to once those are empty.
 */
static void give_tick(struct remote *r, ev_timer *w)
{
	uint64_t after = drain_used_after(r), live, need;
	uint32_t order[64];
	unsigned i, n;
	size_t evac = foreign_evac_chunks(r->fs, &live);

	if (after <= r->drain.give_to && !evac) {
		if (!r->drain.inflight) {
			ev_timer_stop(r->loop, w); /* given back: nothing more to do */
			r->drain.q_n = r->drain.q_head = 0;
			log_info("give back done: the store uses %llu bytes, at most %llu",
				 (unsigned long long)after, (unsigned long long)r->drain.give_to);
		}
		return;
	}
	if (clock_now_ns() < r->drain.pause_until_ns)
		return;
	if (!queue_pump(r) || r->drain.inflight)
		return; /* the queue's pages first, and their answers */
	r->drain.give_rounds++;
	n = owners_by_age(r, order);
	need = after > r->drain.give_to ? after - r->drain.give_to : 0;
	for (i = 0; i < n && need > live; i++)
		live += foreign_evacuate(r->fs, order[i], need - live);
	for (i = 0; i < n; i++)
		if (foreign_walk_evacuating(r->fs, order[i], queue_add, r))
			break;
	queue_pump(r);
}

static void drain_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct remote *r = container_of(w, struct remote, drain.timer);

	if (!r->drain.on) {
		give_tick(r, w);
		return;
	}
	if (clock_now_ns() < r->drain.pause_until_ns)
		return;
	/* a drain: every page, one walk at a time */
	if (queue_pump(r) && !r->drain.inflight) {
		foreign_walk(r->fs, queue_add, r);
		queue_pump(r);
	}
}

void remote_give_back(struct remote *r, uint64_t used_max)
{
	uint64_t live;

	r->drain.give_to = used_max;
	if (r->drain.on || ev_is_active(&r->drain.timer) ||
	    (drain_used_after(r) <= used_max && !foreign_evac_chunks(r->fs, &live)))
		return;
	ev_timer_set(&r->drain.timer, 0, DRAIN_TICK_MS / 1000.0);
	ev_timer_start(r->loop, &r->drain.timer);
}

int remote_drain(struct remote *r, bool on)
{
	struct foreign_stats fs;

	foreign_get_stats(r->fs, &fs);
	if (on == r->drain.on)
		return 0;
	r->drain.on = on;
	if (on) {
		log_notice("draining: refusing new pages from peers, handing %llu held pages to "
			   "their owners",
			   (unsigned long long)fs.pages);
		ev_timer_stop(r->loop, &r->drain.timer); /* a give back's, maybe */
		r->drain.q_n = r->drain.q_head = 0;
		ev_timer_set(&r->drain.timer, 0, DRAIN_TICK_MS / 1000.0);
		ev_timer_start(r->loop, &r->drain.timer);
	} else {
		log_notice("drain ended: taking pages from peers again (%llu still held)",
			   (unsigned long long)fs.pages);
		ev_timer_stop(r->loop, &r->drain.timer);
		r->drain.q_n = r->drain.q_head = 0;
		remote_give_back(r, r->drain.give_to); /* a give back goes on */
	}
	return 0;
}

struct rdrain_peer {
	remote_get_fn cb;
	void *arg;
};

static void drain_peer_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rdrain_peer *d = arg;

	d->cb(d->arg, result);
	free(d);
}

void remote_drain_peer(struct remote *r, uint32_t node, bool on, remote_get_fn cb, void *arg)
{
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	struct rdrain_peer *d = malloc(sizeof(*d));
	uint8_t b = on;
	int rc;

	if (!d) {
		cb(arg, -ENOMEM);
		return;
	}
	*d = (struct rdrain_peer){cb, arg};
	m.op = RAMSTER__PEER__OP__P_DRAIN;
	rc = cluster_request(r->cl, node, &m, &b, 1, r->timeout_ms, drain_peer_cb, d);
	if (rc) {
		free(d);
		cb(arg, rc);
	}
}

/* ---- taking a copy back from a draining holder (the owner's side) ------------------------- */

struct rreturn {
	struct remote *r;
	uint32_t from; /* the draining holder */
	uint64_t seq;  /* its request */
	struct tmem_handle h;
	bool pers;
	uint64_t expect;  /* our descriptor of the page when it came */
	uint64_t exclude; /* its holders and the targets that failed */
	unsigned tries;
	uint32_t to;
	size_t len;	   /* of the sealed copy (of the fragment) */
	unsigned clen;	   /* the page's compressed bytes, as our descriptor keeps them */
	uint32_t checksum; /* the seal's version, as our descriptor keeps it */
	bool frag;	   /* a fragment (redundancy = ec K+M), made again here: plain is the page */
	uint8_t data[SEAL_BLOB_MAX];
	uint8_t plain[SEAL_PAGE_MAX];
};

struct peek {
	uint64_t pampd;
	bool pers;
};

static int peek_fn(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	struct peek *k = arg;

	k->pampd = *pampd;
	k->pers = pers;
	return 0;
}

/* Does our page h still name node's copy (alive), with these bytes? @return its descriptor or 0. */
static uint64_t names_copy(struct remote *r, const struct tmem_handle *h, uint32_t node,
			   unsigned len, uint32_t checksum, bool *pers)
{
	struct peek pk = {0, false};
	struct replica_set set;
	unsigned k;

	tmem_update(r->t, h, peek_fn, &pk);
	if (!pk.pampd || zcache_remote_holders(r->z, pk.pampd, &set) || set.len != len ||
	    set.checksum != checksum)
		return 0;
	if (pers)
		*pers = pk.pers;
	for (k = 0; k < set.n; k++)
		if (set.node[k] == node && cluster_alive(r->cl, node, set.epoch[k]))
			return pk.pampd;
	return 0;
}

static void return_end(struct rreturn *q, int result)
{
	struct remote *r = q->r;

	if (result)
		r->drain.returns_refused++;
	else
		r->drain.returns_served++;
	cluster_reply(r->cl, q->from, q->seq, result, NULL, NULL, 0);
	free(q);
}

static void return_put(struct rreturn *q);

static void return_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rreturn *q = arg;
	struct remote *r = q->r;
	int rc;

	if (result == -ECANCELED) {
		free(q);
		return;
	}
	if (result) {
		q->exclude |= 1ull << (q->to - 1);
		return_put(q);
		return;
	}
	rc = zcache_remote_move(r->z, &q->h, q->expect, q->from, q->to,
				cluster_epoch(r->cl, q->to) & 255, NULL);
	if (rc == -ENOENT) {
		/* the record changed (another slot re-replicated, say): if it still
		 * names the draining copy, move it under the new descriptor */
		q->expect = names_copy(r, &q->h, q->from, q->clen, q->checksum, NULL);
		if (q->expect)
			rc = zcache_remote_move(r->z, &q->h, q->expect, q->from, q->to,
						cluster_epoch(r->cl, q->to) & 255, NULL);
	}
	if (rc) {
		/* the page changed meanwhile: neither copy is wanted */
		remote_flush_queue(r, q->to, RAMSTER__PEER__OP__P_FLUSH, &q->h);
		return_end(q, -ENOENT);
		return;
	}
	return_end(q, 0);
}

/*
 * No peer could take the copy: take the page into our own tier if it has room
 * (a repatriate that brings it home), so that the holder may let it go; else
 * -ENOSPC, and the holder keeps it.
 */
static void return_home(struct rreturn *q)
{
	struct remote *r = q->r;
	size_t clen = q->clen;
	uint8_t plain[SEAL_PAGE_MAX], page[4096];
	struct replica_set set;
	bool home = false;
	unsigned k;

	/* a fragment's page was opened when it was fetched whole */
	if (zcache_remote_holders(r->z, q->expect, &set) ||
	    (!q->frag && seal_open(r->seal, &q->h, q->checksum, clen, q->data, q->len, plain)) ||
	    zcache_repatriate_finish(r->z, &q->h, q->expect, &set, 0, 0,
				     q->frag ? q->plain : plain, clen, page, &home) ||
	    !home) {
		return_end(q, -ENOSPC);
		return;
	}
	/* the returning holder drops its copy on our answer; the others are flushed */
	for (k = 0; k < set.n; k++)
		if (set.node[k] != q->from)
			remote_flush_queue(r, set.node[k], RAMSTER__PEER__OP__P_FLUSH, &q->h);
	r->drain.returns_home++;
	return_end(q, 0);
}

static void return_put(struct rreturn *q)
{
	if (remote_copy_send(q->r, &q->h, q->pers, q->checksum, q->data, q->len, &q->exclude,
			     &q->tries, REMOTIFY_TRIES, &q->to, return_put_cb, q))
		return_home(q);
}

/* The page whose fragment came back was fetched whole (or not): make the fragment again. */
static void return_frags_got(void *arg, int result, bool transient, const uint8_t *blob,
			     size_t blen, const uint8_t *plain, size_t plen)
{
	struct rreturn *q = arg;
	struct remote *r = q->r;
	uint8_t frags[REPLICA_MAX * ERASURE_FRAG_MAX];
	struct replica_set set;
	unsigned k, slot = REPLICA_MAX;

	(void)transient;
	if (result == -ECANCELED) {
		free(q);
		return;
	}
	if (result || zcache_remote_holders(r->z, q->expect, &set)) {
		return_end(q, result ? -EAGAIN : -ENOENT); /* the holder keeps it for now */
		return;
	}
	for (k = 0; k < set.n; k++)
		if (set.node[k] == q->from)
			slot = k;
	if (slot == REPLICA_MAX) {
		return_end(q, -ENOENT);
		return;
	}
	erasure_encode(frag_codec(r, &set), blob, blen, frags);
	q->len = erasure_frag_len(set.ec_k, blen);
	memcpy(q->data, frags + slot * q->len, q->len);
	memcpy(q->plain, plain, plen);
	return_put(q);
}

/*
 * P_RETURN of a fragment (redundancy = ec K+M). A fragment has no seal of its
 * own, so its bytes are not taken on trust: the page is fetched from K
 * holders and checked whole, the returning holder's fragment made again from
 * it and placed as a copy is (or, nobody taking it, the page comes home).
 * @return false when h is not an erasure-coded page of ours (the copy path decides).
 */
static bool return_fragment(struct remote *r, uint32_t node, const Ramster__Peer__Msg *m,
			    const struct tmem_handle *h, size_t plen)
{
	struct peek pk = {0, false};
	struct replica_set set;
	struct rreturn *q;
	unsigned k, slot = REPLICA_MAX;

	tmem_update(r->t, h, peek_fn, &pk);
	if (!pk.pampd || zcache_remote_holders(r->z, pk.pampd, &set) || !set.ec_k)
		return false;
	for (k = 0; k < set.n; k++)
		if (set.node[k] == node && cluster_alive(r->cl, node, set.epoch[k]))
			slot = k;
	if (slot == REPLICA_MAX || plen != erasure_frag_len(set.ec_k, set.len + SEAL_OVERHEAD)) {
		r->drain.returns_refused++;
		cluster_reply(r->cl, node, m->seq, -ENOENT, NULL, NULL, 0);
		return true;
	}
	q = malloc(sizeof(*q));
	if (!q) {
		cluster_reply(r->cl, node, m->seq, -ENOMEM, NULL, NULL, 0);
		return true;
	}
	*q = (struct rreturn){.r = r,
			      .from = node,
			      .seq = m->seq,
			      .h = *h,
			      .pers = pk.pers,
			      .expect = pk.pampd,
			      .clen = set.len,
			      .checksum = set.checksum,
			      .frag = true};
	for (k = 0; k < set.n; k++)
		q->exclude |= 1ull << (set.node[k] - 1);
	r->drain.returns_fragments++;
	frag_fetch(r, h, pk.pers, &set, r->timeout_ms, return_frags_got, q);
	return true;
}

/* P_RETURN from node: place its copy of our page elsewhere, then answer. */
void drain_return_serve(struct remote *r, uint32_t node, const Ramster__Peer__Msg *m,
			const uint8_t *payload, size_t plen)
{
	struct tmem_handle h = {
	    m->page->pool, {{m->page->oid0, m->page->oid1, m->page->oid2}}, m->page->index};
	uint8_t plain[SEAL_PAGE_MAX];
	uint32_t checksum = 0;
	struct replica_set set;
	struct rreturn *q;
	uint64_t expect = 0;
	unsigned k;
	bool pers = false;

	if (h.pool == STRIPE_POOL) {
		stripe_return_serve(r, node, m->seq, &h);
		return;
	}
	if (return_fragment(r, node, m, &h, plen))
		return;
	/* the holder hands back the sealed copy as it got it: our seal says whether it is
	 * this page's current version (the version's low 32 bits lead the blob) */
	if (plen > SEAL_OVERHEAD) {
		checksum = (uint32_t)payload[0] | (uint32_t)payload[1] << 8 |
			   (uint32_t)payload[2] << 16 | (uint32_t)payload[3] << 24;
		expect = names_copy(r, &h, node, (unsigned)(plen - SEAL_OVERHEAD), checksum, &pers);
	}
	if (expect &&
	    seal_open(r->seal, &h, checksum, plen - SEAL_OVERHEAD, payload, plen, plain)) {
		r->seal_failures++;
		expect = 0;
	}
	if (!expect || zcache_remote_holders(r->z, expect, &set)) {
		/* not a copy we point at (stale, or bad bytes): it can go */
		r->drain.returns_refused++;
		cluster_reply(r->cl, node, m->seq, -ENOENT, NULL, NULL, 0);
		return;
	}
	q = malloc(sizeof(*q));
	if (!q) {
		cluster_reply(r->cl, node, m->seq, -ENOMEM, NULL, NULL, 0);
		return;
	}
	*q = (struct rreturn){.r = r,
			      .from = node,
			      .seq = m->seq,
			      .h = h,
			      .pers = pers,
			      .expect = expect,
			      .len = plen,
			      .clen = (unsigned)(plen - SEAL_OVERHEAD),
			      .checksum = checksum};
	for (k = 0; k < set.n; k++)
		q->exclude |= 1ull << (set.node[k] - 1); /* a slot of the record, dead or not */
	memcpy(q->data, payload, plen);
	return_put(q);
}

void drain_init(struct remote *r)
{
	ev_init(&r->drain.timer, drain_tick);
	r->drain.give_to = UINT64_MAX;
}

void drain_stop(struct remote *r)
{
	ev_timer_stop(r->loop, &r->drain.timer);
	free(r->drain.queue);
	r->drain.queue = NULL;
	r->drain.q_n = r->drain.q_head = r->drain.q_cap = 0;
}
