/*
 * repair.c - re-replication: copies that died with a holder made again on
 * another peer, at a bounded rate, on the loop.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/arena.h"
#include "node/remote/erasure.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote/remote_int.h"

/* ---- re-replication ------------------------------------------------------------------------- */

/*
 * A holder becoming unreachable (or gone) marks every replica record it held
 * a copy in as degraded (replica_mark_holder). The repair walk goes over the table at a bounded
 * pace, and for each degraded record copies the page from a live holder
 * (P_GET) to a new peer (P_PUT), then moves the record's dead slot there
 * (zcache_remote_move: only if the page is still the one read); an
 * unreachable holder's old copy is then flushed there (when it is back, from
 * the flush log): no surplus copy stays. A record whose copies are all on
 * unreachable holders waits for them. A record with no holder left is lost: counted and logged once, and its gets answer
 * -EIO. The walk ends when nothing is degraded and nothing is in flight.
 *
 * An erasure-coded page is mended the same way, one lost fragment at a time:
 * K fragments are fetched (fragments.c), the sealed page decoded and checked,
 * the lost slot's fragment made again and placed on a peer holding none of
 * the page. It is lost when fewer than K holders are left alive.
 */

struct rrepair {
	struct remote *r;
	unsigned slot;            /* in r->repair.busy */
	uint64_t id;
	struct tmem_handle h;
	bool pers;
	struct replica_set set;
	unsigned from;            /* the dead holder whose copy is made again */
	uint8_t order[REPLICA_MAX]; /* live holders to ask for the bytes, nearest first */
	unsigned n_order, next;
	uint64_t tried;           /* targets that failed */
	unsigned tries;
	uint32_t to;
	size_t len;
	uint8_t data[SEAL_BLOB_MAX]; /* the sealed copy, passed on as it is */
};

void repair_kick(struct remote *r)
{
	if (r->repair.on)
		return;
	r->repair.on = true;
	r->repair.cursor = 0;
	ev_timer_again(r->loop, &r->repair.timer);
}

static void repair_end(struct rrepair *p, bool mended)
{
	struct remote *r = p->r;

	r->repair.busy[p->slot] = 0;
	r->repair.inflight--;
	if (mended)
		r->repair.progress = true;
	else
		r->repair.failed++;
	free(p);
}

static void log_lost(const struct tmem_handle *h)
{
	log_warn("persistent page lost: every holder of its copies died (pool %u, object "
		 "%016llx.%016llx.%016llx, index %u): its gets answer -EIO",
		 h->pool, (unsigned long long)h->oid.w[0], (unsigned long long)h->oid.w[1],
		 (unsigned long long)h->oid.w[2], h->index);
}

static void repair_put(struct rrepair *p);

static void repair_put_cb(void *arg, int result, const Ramster__Peer__Msg *reply,
			  const uint8_t *payload, size_t plen)
{
	struct rrepair *p = arg;
	struct remote *r = p->r;
	struct replica_set now;
	uint64_t pampd;
	unsigned k, alive = 0;
	int rc;

	if (result == -ECANCELED) {
		repair_end(p, false);
		return;
	}
	if (result) {
		p->tried |= 1ull << (p->to - 1);
		repair_put(p);
		return;
	}
	rc = zcache_remote_move(r->z, &p->h, zcache_replica_pampd(p->id), p->from, p->to,
				cluster_epoch(r->cl, p->to) & 255, &pampd);
	if (rc) {
		/* the page changed or went away meanwhile: the new copy is stale */
		r->repair.stale++;
		remote_flush_queue(r, p->to, RAMSTER__PEER__OP__P_FLUSH, &p->h);
		repair_end(p, true);
		return;
	}
	r->repair.rereplicated++;
	for (k = 0; k < p->set.n; k++)
		if (p->set.node[k] == p->from && cluster_alive(r->cl, p->from, p->set.epoch[k])) {
			/* unreachable, not gone: its old copy is surplus now, trim it (when back) */
			r->copies_trimmed++;
			remote_flush_now(r, p->from, RAMSTER__PEER__OP__P_FLUSH, &p->h);
		}
	if (zcache_remote_holders(r->z, pampd, &now) == 0) {
		for (k = 0; k < now.n; k++)
			alive += cluster_reachable(r->cl, now.node[k], now.epoch[k]);
		if (alive == now.n)
			replica_set_state(zcache_replicas(r->z), pampd & ~3ull, 0);
	}
	repair_end(p, true);
}

/* Place the bytes on a peer that holds no live copy yet. */
static void repair_put(struct rrepair *p)
{
	struct remote *r = p->r;
	uint64_t exclude = p->tried;
	unsigned k;

	/* a dead holder that came back (empty, in a new epoch) is a fine target */
	for (k = 0; k < p->set.n; k++)
		if (cluster_alive(r->cl, p->set.node[k], p->set.epoch[k]))
			exclude |= 1ull << (p->set.node[k] - 1);
	if (remote_copy_send(r, &p->h, p->pers, p->set.checksum, p->data, p->len, &exclude,
			     &p->tries, REMOTIFY_TRIES, &p->to, repair_put_cb, p))
		repair_end(p, false);
}

static void repair_fetch(struct rrepair *p);

static void repair_got(void *arg, int result, const Ramster__Peer__Msg *reply,
		       const uint8_t *payload, size_t plen)
{
	struct rrepair *p = arg;
	uint8_t plain[SEAL_PAGE_MAX];

	if (result == -ECANCELED) {
		repair_end(p, false);
		return;
	}
	/* the sealed copy goes on as it is (it names the page, not its holder): open it to
	 * check it is this page's current version first */
	if (!result && seal_open(p->r->seal, &p->h, p->set.checksum, p->set.len, payload, plen,
				 plain)) {
		p->r->seal_failures++;
		result = -EILSEQ;
	}
	if (result) {
		repair_fetch(p); /* another live holder, if any */
		return;
	}
	memcpy(p->data, payload, plen);
	p->len = plen;
	repair_put(p);
}

/*
 * An erasure-coded page came back whole (fragments.c): its lost holder's
 * fragment is made again from the sealed blob and placed like a copy.
 */
static void repair_frags_got(void *arg, int result, bool transient, const uint8_t *blob,
			     size_t blen, const uint8_t *plain, size_t plen)
{
	struct rrepair *p = arg;
	struct remote *r = p->r;
	uint8_t frags[REPLICA_MAX * ERASURE_FRAG_MAX];
	unsigned k, slot = p->set.n;

	(void)transient;
	(void)plain;
	(void)plen;
	for (k = 0; k < p->set.n; k++)
		if (p->set.node[k] == p->from)
			slot = k;
	if (result || slot == p->set.n) {
		repair_end(p, false);
		return;
	}
	erasure_encode(frag_codec(r, &p->set), blob, blen, frags);
	p->len = erasure_frag_len(p->set.ec_k, blen);
	memcpy(p->data, frags + slot * p->len, p->len);
	r->repair.fragments++;
	repair_put(p);
}

/* Ask the next live holder (nearest first) for the bytes. */
static void repair_fetch(struct rrepair *p)
{
	struct remote *r = p->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;

	if (p->set.ec_k) {
		if (p->next++) /* one fetch asks every holder it needs */
			repair_end(p, false);
		else
			frag_fetch(r, &p->h, p->pers, &p->set, r->timeout_ms, repair_frags_got, p);
		return;
	}
	while (p->next < p->n_order) {
		uint32_t node = p->set.node[p->order[p->next++]];

		remote_page_init(&pg, &p->h, p->pers ? PAGE_PERSISTENT : 0, 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		if (cluster_request(r->cl, node, &m, NULL, 0, r->timeout_ms, repair_got, p) == 0)
			return;
	}
	repair_end(p, false);
}

/* A record the walk met; start mending it if it is degraded and not in hand already. */
static void repair_visit(void *arg, uint64_t id, const struct tmem_handle *h, bool pers,
			 const struct replica_set *s)
{
	struct remote *r = arg;
	struct rrepair *p;
	unsigned k, slot = REPAIR_INFLIGHT, alive = 0, kept = 0, from = 0;

	if (!(s->state & REPLICA_DEGRADED))
		return;
	for (k = 0; k < REPAIR_INFLIGHT; k++) {
		if (r->repair.busy[k] >> 32 == id >> 32)
			return; /* this record (under an older id, maybe) is being mended */
		if (!r->repair.busy[k] && slot == REPAIR_INFLIGHT)
			slot = k;
	}
	for (k = 0; k < s->n; k++) {
		if (cluster_reachable(r->cl, s->node[k], s->epoch[k]))
			alive++;
		else if (!from)
			from = s->node[k];
		if (cluster_alive(r->cl, s->node[k], s->epoch[k]))
			kept++;
	}
	if (!from) {
		replica_set_state(zcache_replicas(r->z), id, 0); /* healed meanwhile */
		return;
	}
	if (!kept || (s->ec_k && kept < s->ec_k)) {
		/* no copy left, or fewer fragments than it takes to make the page */
		replica_set_state(zcache_replicas(r->z), id, REPLICA_LOST);
		r->repair.lost++;
		log_lost(h);
		return;
	}
	if (!alive || alive < s->ec_k)
		return; /* every copy (or too many fragments) on unreachable holders: nothing to copy
			 * from; they come back or expire */
	if (slot == REPAIR_INFLIGHT)
		return;
	{
		uint64_t live = 0;

		for (k = 0; k < s->n; k++)
			if (cluster_reachable(r->cl, s->node[k], s->epoch[k]))
				live |= 1ull << (s->node[k] - 1);
		if (!cluster_candidates(r->cl, s->len, live)) {
			/* no peer could take a copy now: wait (a peer coming up wakes us) */
			r->repair.blocked = true;
			return;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	*p = (struct rrepair){ .r = r, .slot = slot, .id = id, .h = *h, .pers = pers, .set = *s,
			       .from = from };
	p->n_order = remote_holders_by_rtt(r, s, p->order);
	r->repair.busy[slot] = id;
	r->repair.inflight++;
	r->repair.tokens -= 1;
	repair_fetch(p);
}

static void repair_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct remote *r = container_of(w, struct remote, repair.timer);
	struct replica_table *t = zcache_replicas(r->z);
	unsigned walked = 0, before;
	bool stripes_degraded = false;

	r->repair.tokens += r->repair.rate * (REPAIR_TICK_MS / 1000.0);
	if (r->repair.tokens > r->repair.rate / 10.0 + 1)
		r->repair.tokens = r->repair.rate / 10.0 + 1; /* no bursts after a pause */
	w->repeat = REPAIR_TICK_MS / 1000.0;
	r->repair.blocked = false;
	if (r->stripes && r->repair.tokens >= 1) {
		/* stripes' gone slots (stripe_io.c) share the rate and the slots in flight */
		before = r->repair.ec_started;
		stripes_degraded = stripe_repair_tick(r, (unsigned)r->repair.tokens);
		r->repair.tokens -= (double)(r->repair.ec_started - before);
	}
	while (r->repair.inflight < REPAIR_INFLIGHT && r->repair.tokens >= 1 &&
	       walked < REPAIR_WALK) {
		walked += (unsigned)replica_walk(t, &r->repair.cursor, 1, repair_visit, r);
		if (r->repair.blocked) {
			r->repair.waits++;
			w->repeat = REPAIR_IDLE_MS / 1000.0;
			break;
		}
		if (r->repair.cursor)
			continue;
		/* a pass is over */
		struct replica_usage u;

		r->repair.passes++;
		replica_usage(t, &u);
		if (!u.degraded && !r->repair.inflight && !stripes_degraded) {
			r->repair.on = false;
			ev_timer_stop(loop, w);
			return;
		}
		if (!r->repair.progress)
			w->repeat = REPAIR_IDLE_MS / 1000.0; /* nothing could be mended: wait */
		r->repair.progress = false;
		break;
	}
	ev_timer_again(loop, w);
}


void repair_init(struct remote *r, unsigned rate)
{
	r->repair.rate = rate;
	ev_init(&r->repair.timer, repair_tick);
	r->repair.timer.repeat = REPAIR_TICK_MS / 1000.0;
}

void repair_stop(struct remote *r)
{
	ev_timer_stop(r->loop, &r->repair.timer);
}
