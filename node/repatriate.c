/*
 * repatriate.c - gets of pages that live on peers: the live holders are
 * asked nearest first (one-sided RDMA READ where the holder named a key on
 * the current link, else P_GET), each within request_timeout_ms / holders;
 * an unreachable holder is asked last, and a get whose only copy is there
 * waits for it (the request is sent when its link is back) up to
 * request_timeout_ms, then fails that call alone: the page is kept;
 * the answer is checked against our descriptor and settled in the tier.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/arena.h"
#include "node/clock.h"
#include "node/log.h"
#include "node/remote_int.h"

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

static void get_finish(struct rget *g, int result, const uint8_t *payload, size_t plen)
{
	struct remote *r = g->r;
	bool home = false;
	unsigned k;
	int res;

	res = zcache_repatriate_finish(r->z, &g->h, g->pampd, &g->set, g->destructive, result,
				       payload, plen, g->page, &home);
	for (k = 0; home && k < g->set.n; k++)
		remote_flush_queue(r, g->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &g->h);
	/* an ephemeral page that could not be had is forgotten here (a miss): its
	 * copy on a holder that timed out (unreachable) must not stay there */
	for (k = 0; res && !g->pers && result == -ETIMEDOUT && k < g->set.n; k++)
		if (cluster_alive(r->cl, g->set.node[k], g->set.epoch[k]))
			remote_flush_now(r, g->set.node[k], RAMSTER__PEER__OP__P_FLUSH, &g->h);
	if (res == 0)
		r->get_hits++;
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

static void get_cb(void *arg, int result, const Ramster__Peer__Msg *reply, const uint8_t *payload,
		   size_t plen)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (result == 0 && (plen != g->set.len || zcache_checksum(payload, plen) != g->set.checksum))
		result = -EILSEQ; /* a bad copy: another holder may have a good one */
	if (result && result != -ECANCELED && g->next < g->n_order) {
		r->get_fallovers++;
		get_ask(g);
		return;
	}
	if (result == -EILSEQ)
		result = 0; /* the last copy: zcache counts the checksum error */
	get_finish(g, result, payload, plen);
}

/* A one-sided read of the page finished (or failed: then ask the same holder by message). */
static void get_read_cb(void *arg, int err, const void *data, size_t len)
{
	struct rget *g = arg;
	struct remote *r = g->r;

	if (!err && len == g->set.len && zcache_checksum(data, len) == g->set.checksum) {
		r->rdma_reads++;
		get_finish(g, 0, data, len);
		return;
	}
	/* a block reused since it was named, or the link went: the copy may still be there */
	r->rdma_read_fallbacks++;
	if (r->closing) {
		get_finish(g, -ECANCELED, NULL, 0);
		return;
	}
	g->next--;
	g->by_message = true;
	get_ask(g);
}

/* Ask the next live holder in order; with none left the page is lost. */
static void get_ask(struct rget *g)
{
	struct remote *r = g->r;
	Ramster__Peer__Msg m = RAMSTER__PEER__MSG__INIT;
	Ramster__Peer__Page pg;
	unsigned attempt;

	while (g->next < g->n_order) {
		unsigned slot = g->order[g->next++];
		uint32_t node = g->set.node[slot];

		/* one-sided when the holder named where the bytes are on this very link */
		if (g->set.raddr[slot] && !g->destructive && !g->by_message &&
		    cluster_read(r->cl, node, g->set.lgen[slot], g->set.raddr[slot],
				 g->set.rkey[slot], g->set.len, get_read_cb, g) == 0)
			return;
		g->by_message = false;
		attempt = g->attempt_ms;
		if (!cluster_reachable(r->cl, node, g->set.epoch[slot])) {
			/* unreachable: wait for it at most request_timeout_ms from the
			 * start of its silence (a later get of its pages fails at once,
			 * that call alone: the page is kept for its return) */
			uint64_t silent = cluster_silent_ms(r->cl, node);

			if (silent >= r->timeout_ms) {
				r->get_unreachable++;
				g->failed = -ETIMEDOUT;
				continue;
			}
			if (attempt > r->timeout_ms - silent)
				attempt = (unsigned)(r->timeout_ms - silent);
		}

		remote_page_init(&pg, &g->h,
				 (g->pers ? PAGE_PERSISTENT : 0) | (g->destructive ? PAGE_DELETE : 0),
				 0);
		m.op = RAMSTER__PEER__OP__P_GET;
		m.page = &pg;
		if (cluster_request(r->cl, node, &m, NULL, 0, attempt, get_cb, g) == 0)
			return;
		r->get_fallovers++;
	}
	get_finish(g, g->failed ? g->failed : -EHOSTDOWN, NULL, 0);
}

void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, bool destructive,
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
	g->destructive = destructive;
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

