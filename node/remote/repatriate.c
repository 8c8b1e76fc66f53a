/*
 * repatriate.c - gets of pages that live on peers: the live holders are
 * asked nearest first (one-sided RDMA READ where the holder named a key on
 * the current link, else P_GET), each within request_timeout_ms / holders;
 * an unreachable holder is asked last (the request waits for its link). The
 * answer's seal is opened against our descriptor (seal.h: this page, this
 * version, these bytes; a copy that fails asks the next holder) and the page
 * settled in the tier.
 *
 * Unreachable is not lost (issue 20): a persistent get whose holders all
 * failed, some of them only by a timeout or a full queue (a lost link, a
 * storm of link resets, a pause, a partition), asks them again after a pause
 * (GET_RETRY_MIN_MS doubling to GET_RETRY_MAX_MS), from the descriptor as it
 * is then, for as long as one of them is alive (the same epoch: not
 * restarted, its lease not expired). A persistent get answers -EIO only when
 * every copy is gone or refused (a bad seal, a holder that lost it). Gets are
 * idempotent (a persistent get never deletes), so asking again is safe. An
 * ephemeral get is not retried: a miss is a right answer for it, and faster.
 *
 * An erasure-coded page (redundancy = ec K+M) is had from K of its holders at
 * once (fragments.c); the same rules hold, with "every copy gone" read as
 * "fewer than K fragments left".
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

/* ---- repatriate ------------------------------------------------------------------------------ */

/*
 * The slots of s whose holders are alive, nearest (smallest heartbeat round
 * trip; a lost link last) first, into order. @return how many.
 */
unsigned remote_holders_by_rtt(struct remote *r, const struct replica_set *s,
			       uint8_t order[REPLICA_MAX])
{
	double rtt[REPLICA_MAX];
	unsigned k, j, n = 0;

	for (k = 0; k < s->n; k++) {
		double t;

		if (!cluster_alive(r->cl, s->node[k], s->epoch[k]))
			continue;
		t = cluster_rtt_us(r->cl, s->node[k]);
		/* a holder whose link is down now is asked after those linked, an
		 * unreachable one last: a request to either waits for a link */
		if (!cluster_linked(r->cl, s->node[k], s->epoch[k]))
			t += cluster_reachable(r->cl, s->node[k], s->epoch[k]) ? 1e9 : 2e9;
		for (j = n; j > 0 && rtt[j - 1] > t; j--) {
			order[j] = order[j - 1];
			rtt[j] = rtt[j - 1];
		}
		order[j] = (uint8_t)k;
		rtt[j] = t;
		n++;
	}
	return n;
}

/* A remote persistent page of h's object was read: its object is hot (remote_hot_objects). */
static void note_hot(struct remote *r, const struct tmem_handle *h)
{
	unsigned k;

	for (k = 0; k < r->hot_n; k++)
		if (r->hot[k].pool == h->pool && !memcmp(&r->hot[k].oid, &h->oid, sizeof(h->oid)))
			return; /* already there */
	if (r->hot_n == REMOTE_HOT_MAX) {
		memmove(&r->hot[0], &r->hot[1], sizeof(r->hot[0]) * (REMOTE_HOT_MAX - 1));
		r->hot_n--;
	}
	r->hot[r->hot_n].pool = h->pool;
	r->hot[r->hot_n++].oid = h->oid;
}

static void get_finish(struct rget *g, int result, const uint8_t *payload, size_t plen)
{
	struct remote *r = g->r;
	bool home = false;
	unsigned k;
	int res;

	res = zcache_repatriate_finish(r->z, &g->h, g->pampd, &g->set,
				       (g->destructive ? ZCACHE_FIN_DESTRUCTIVE : 0) |
					   (g->compact ? ZCACHE_FIN_COMPACT : 0),
				       result, payload, plen, g->page, &home);
	/* a stripe page brought home was killed in its stripe (zcache): nothing to flush */
	for (k = 0; home && !g->set.stripe && k < g->set.n; k++)
		remote_flush_queue(r, g->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &g->h);
	/* an ephemeral page that could not be had is forgotten here (a miss): its
	 * copy on a holder that timed out (unreachable) must not stay there */
	for (k = 0; res && !g->pers && result == -ETIMEDOUT && k < g->set.n; k++)
		if (cluster_alive(r->cl, g->set.node[k], g->set.epoch[k]))
			remote_flush_now(r, g->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &g->h);
	if (res == 0) {
		r->get_hits++;
		if (g->pers && !g->background)
			note_hot(r, &g->h);
	}
	else if (g->pers)
		r->get_lost++;
	else
		r->get_misses++;
	if (res && !g->pers)
		res = -ENOENT; /* an ephemeral page that cannot be had is a miss */
	tmem_note_get(r->t, res);
	g->cb(g->arg, res);
	free(g);
}

static void get_ask(struct rget *g);
static bool get_retry_later(struct rget *g);

/* A holder's failure that may pass: no answer in time, or no room to ask now. */
static bool get_transient(int err)
{
	return err == -ETIMEDOUT || err == -EAGAIN || err == -ENOMEM || err == -ENOBUFS;
}

static void get_unlink(struct rget *g)
{
	struct remote *r = g->r;

	ev_timer_stop(r->loop, &g->retry);
	if (g->rprev)
		g->rprev->rnext = g->rnext;
	else
		r->retrying = g->rnext;
	if (g->rnext)
		g->rnext->rprev = g->rprev;
	g->rprev = g->rnext = NULL;
}

/* The retry pause ended: look the page up again (it may have come home, been
 * flushed or moved meanwhile) and ask its holders as they are now. */
static void get_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct rget *g = container_of(w, struct rget, retry);
	struct remote *r = g->r;
	uint64_t pampd = g->pampd;
	int rc;

	(void)loop;
	(void)revents;
	get_unlink(g);
	r->get_retries++;
	rc = tmem_get_ex(r->t, g->h.pool, &g->h.oid, g->h.index, g->page, &pampd);
	if (rc != -EREMOTE) {
		/* here now (0), or flushed meanwhile (-ENOENT): tmem counted it */
		if (rc == 0)
			r->get_hits++;
		g->cb(g->arg, rc);
		free(g);
		return;
	}
	if (zcache_remote_holders(r->z, pampd, &g->set)) {
		g->transient = true; /* changed under us: the next round looks again */
		if (!get_retry_later(g))
			get_finish(g, -EIO, NULL, 0);
		return;
	}
	g->pampd = pampd;
	g->n_order = remote_holders_by_rtt(r, &g->set, g->order);
	g->next = 0;
	g->failed = 0;
	g->transient = false;
	g->by_message = false;
	g->degraded = false;
	get_ask(g);
}

/*
 * Every holder was asked and none answered: if some failed only for now and a
 * holder of the page is still alive, ask again after a pause. @return true if
 * the get waits for that (and the caller must not touch g), false to finish.
 */
static bool get_retry_later(struct rget *g)
{
	struct remote *r = g->r;
	unsigned k, ms;
	bool alive = false;

	if (!g->pers || !g->transient || r->closing)
		return false;
	if (g->set.stripe) {
		struct replica_set now;

		/* K of its stripe's slots still held (stripe_op_holder says so) */
		alive = zcache_remote_holders(r->z, g->pampd, &now) == 0;
	}
	for (k = 0; k < g->set.n && !alive; k++)
		alive = cluster_alive(r->cl, g->set.node[k], g->set.epoch[k]);
	if (!alive)
		return false; /* every holder is gone: the page is */
	ms = GET_RETRY_MIN_MS << (g->retries < 6 ? g->retries : 6);
	if (ms > GET_RETRY_MAX_MS)
		ms = GET_RETRY_MAX_MS;
	g->retries++;
	ev_timer_init(&g->retry, get_retry_cb, ms / 1000.0, 0);
	ev_timer_start(r->loop, &g->retry);
	g->rprev = NULL;
	g->rnext = r->retrying;
	if (g->rnext)
		g->rnext->rprev = g;
	r->retrying = g;
	return true;
}

/* The node stops: gets waiting to ask again end (-ECANCELED, their clients are going). */
void remote_gets_cancel(struct remote *r)
{
	while (r->retrying) {
		struct rget *g = r->retrying;

		get_unlink(g);
		get_finish(g, -ECANCELED, NULL, 0);
	}
}

static void get_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (result == 0 &&
	    seal_open(r->seal, &g->h, g->set.checksum, g->set.len, payload, plen, g->plain)) {
		/* another page, an old version or changed bytes: another holder may have it */
		r->seal_failures++;
		result = -EILSEQ;
	}
	if (result && get_transient(result))
		g->transient = true;
	if (result == 0 && g->set.stripe)
		r->ec_stripe_reads++;
	if (result && result != -ECANCELED &&
	    (g->next < g->n_order || (g->set.stripe && !g->degraded))) {
		r->get_fallovers++;
		get_ask(g);
		return;
	}
	if (result && result != -ECANCELED && get_retry_later(g))
		return;
	/* the last copy failed its seal: -EIO (zcache counts it lost), no byte of it used */
	get_finish(g, result, result ? NULL : g->plain, result ? 0 : g->set.len);
}

/* A one-sided read of the page finished (or failed: then ask the same holder by message). */
static void get_read_cb(void *arg, int err, const void *data, size_t len)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (!err && !seal_open(r->seal, &g->h, g->set.checksum, g->set.len, data, len, g->plain)) {
		r->rdma_reads++;
		get_finish(g, 0, g->plain, g->set.len);
		return;
	}
	/* a block reused since it was named (its seal names another page or version), or the
	 * link went: the copy may still be there; the message's answer is opened the same way */
	r->rdma_read_fallbacks++;
	if (r->closing) {
		get_finish(g, -ECANCELED, NULL, 0);
		return;
	}
	g->next--;
	g->by_message = true;
	get_ask(g);
}

/* An erasure-coded page's fragments came back as the page (fragments.c), or did not. */
static void get_frags_cb(void *arg, int result, bool transient, const uint8_t *blob, size_t blen,
			 const uint8_t *plain, size_t plen)
{
	struct rget *g = arg;

	(void)blob;
	(void)blen;
	if (result == 0) {
		get_finish(g, 0, plain, plen);
		return;
	}
	if (transient)
		g->transient = true;
	if (result != -ECANCELED && get_retry_later(g))
		return;
	get_finish(g, result, NULL, 0);
}

/* A stripe page's made blob: does its seal open (this page, this version)? */
static int get_stripe_verify(void *arg, const uint8_t *blob, size_t len)
{
	struct rget *g = arg;

	return seal_open(g->r->seal, &g->h, g->set.checksum, g->set.len, blob, len, g->plain);
}

/* A stripe page made from K other fragments (its holder failed), or not: settled as an
 * erasure-coded page's (get_stripe_verify opened it into g->plain). */
static void get_stripe_cb(void *arg, int result, bool transient, const uint8_t *blob, size_t len)
{
	struct rget *g = arg;

	if (result == 0)
		g->r->ec_stripe_degraded_reads++;
	get_frags_cb(g, result, transient, blob, len, g->plain, g->set.len);
}

/* Ask the next live holder in order; with none left the page is lost. */
static void get_ask(struct rget *g)
{
	struct remote *r = g->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	struct tmem_handle key;
	unsigned attempt;
	int rc;

	if (g->set.stripe && !g->degraded &&
	    (g->next >= g->n_order || !cluster_linked(r->cl, g->set.node[0], g->set.epoch[0]))) {
		/* its one holder failed, or has no link now (it may have died: a
		 * request would wait for its link up to dead_after_ms; the test on
		 * soft-RoCE waited 14 s): the other slots of its stripe make it */
		g->degraded = true;
		stripe_remake(r, g->set.stripe, g->set.slot, 0, r->timeout_ms, get_stripe_verify,
			      get_stripe_cb, g);
		return;
	}
	if (g->set.ec_k) {
		/* K fragments at once, each within the whole request timeout */
		frag_fetch(r, &g->h, g->pers, &g->set, r->timeout_ms, get_frags_cb, g);
		return;
	}
	while (g->next < g->n_order) {
		unsigned slot = g->order[g->next++];
		uint32_t node = g->set.node[slot];

		/* one-sided when the holder named where the bytes are on this very link */
		if (g->set.raddr[slot] && !g->destructive && !g->by_message &&
		    cluster_read(r->cl, node, g->set.lgen[slot], g->set.raddr[slot],
				 g->set.rkey[slot], g->set.len + SEAL_OVERHEAD, get_read_cb, g) == 0)
			return;
		g->by_message = false;
		attempt = g->attempt_ms;
		/* unreachable: the request waits for its link (pending.c), and a
		 * timeout asks again (get_retry) while the holder is alive */
		if (!g->retries && !cluster_reachable(r->cl, node, g->set.epoch[slot]))
			r->get_unreachable++;

		if (g->set.stripe)
			stripe_key(g->set.stripe, g->set.slot, &key); /* held under its stripe's key */
		remote_page_init(&pg, g->set.stripe ? &key : &g->h,
				 (g->pers ? PAGE_PERSISTENT : 0) | (g->destructive ? PAGE_DELETE : 0),
				 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		rc = cluster_request(r->cl, node, &m, NULL, 0, attempt, get_cb, g);
		if (rc == 0)
			return;
		if (get_transient(rc))
			g->transient = true;
		r->get_fallovers++;
	}
	if (g->set.stripe && !g->degraded) {
		get_ask(g); /* its holder could not be asked: made from the others */
		return;
	}
	if (get_retry_later(g))
		return;
	get_finish(g, g->failed ? g->failed : -EHOSTDOWN, NULL, 0);
}

void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, unsigned flags,
		uint64_t pampd, void *page, remote_get_fn cb, void *arg)
{
	struct rget *g = calloc(1, sizeof(*g));
	unsigned again;
	int rc;

	if (!g) {
		cb(arg, pers ? -EIO : -ENOENT);
		return;
	}
	for (again = 0; zcache_remote_holders(r->z, pampd, &g->set); again++) {
		/* another thread changed the page since tmem looked: look again */
		rc = tmem_get_ex(r->t, h->pool, &h->oid, h->index, page, &pampd);
		if (rc != -EREMOTE || again == 3) {
			free(g);
			cb(arg, rc == -EREMOTE ? -EIO : rc);
			return;
		}
	}
	g->r = r;
	g->h = *h;
	g->pers = pers;
	g->destructive = flags & REMOTE_GET_DESTRUCTIVE;
	g->background = flags & (REMOTE_GET_BACKGROUND | REMOTE_GET_COMPACT);
	g->compact = flags & REMOTE_GET_COMPACT;
	g->pampd = pampd;
	g->page = page;
	g->cb = cb;
	g->arg = arg;
	r->gets++;
	g->n_order = remote_holders_by_rtt(r, &g->set, g->order);
	/* all of them within the request timeout */
	/* split among the reachable holders: an unreachable one (asked last) gets
	 * what is left of its own silence's timeout, not a share of theirs */
	{
		unsigned k, reach = 0;

		for (k = 0; k < g->n_order; k++)
			reach += cluster_reachable(r->cl, g->set.node[g->order[k]],
						   g->set.epoch[g->order[k]]);
		if (!reach)
			reach = 1;
		g->attempt_ms = r->timeout_ms / reach;
	}
	if (g->attempt_ms < 20)
		g->attempt_ms = 20;
	get_ask(g);
}

