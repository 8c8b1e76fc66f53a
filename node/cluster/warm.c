/*
 * warm.c - what a warm restart carries of the cluster (cluster.h): this
 * node's incarnation and, per peer, the incarnation seen, the epochs each
 * side announced and the pages there. Kept, they make the restart a link
 * blip for the peers: the same incarnation comes back with the same epochs,
 * so every copy either side holds for the other stays valid
 * (docs/warm-restart.md).
 */
#include <errno.h>
#include <inttypes.h>

#include "node/clock.h"
#include "node/cluster/cluster_int.h"
#include "node/log.h"

uint64_t cluster_incarnation(const struct cluster *c)
{
	return c->incarnation;
}

size_t cluster_pending(const struct cluster *c)
{
	size_t i, n = 0;

	for (i = 0; i < c->n_peers; i++)
		n += c->peers[i].count;
	return n;
}

void cluster_foreach_pending(const struct cluster *c,
			     void (*fn)(void *ctx, uint32_t node, cluster_reply_fn cb, void *arg),
			     void *ctx)
{
	const struct cluster_req *q;
	size_t i;

	for (i = 0; i < c->n_peers; i++)
		for (q = c->peers[i].head; q; q = q->next)
			fn(ctx, c->peers[i].node.id, q->cb, q->arg);
}

size_t cluster_warm_get(const struct cluster *c, struct cluster_warm_peer *out, size_t max)
{
	size_t i, n = 0;

	for (i = 0; i < c->n_peers && n < max; i++) {
		const struct cluster_peer *p = &c->peers[i];

		if (cluster_peer(c, p->node.id) != p || !p->incarnation)
			continue; /* removed by a reload, or never seen: nothing of it to keep */
		out[n].id = p->node.id;
		out[n].incarnation = p->incarnation;
		out[n].epoch = p->epoch;
		out[n].their_epoch = p->their_epoch;
		out[n].pages_there = p->pages_there;
		n++;
	}
	return n;
}

int cluster_warm_set(struct cluster *c, uint64_t incarnation, const struct cluster_warm_peer *w,
		     size_t n)
{
	uint64_t now = clock_now_ns();
	size_t i;

	if (!incarnation)
		return -EINVAL;
	for (i = 0; i < c->n_peers; i++)
		if (c->peers[i].link || c->peers[i].state != PEER_NEW)
			return -EBUSY; /* only before the loop has run */
	log_notice("cluster %s: incarnation %016" PRIx64 " kept across the restart (was %016" PRIx64
		   " for a moment)",
		   c->name, incarnation, c->incarnation);
	c->incarnation = incarnation;
	for (i = 0; i < n; i++) {
		struct cluster_peer *p = cluster_peer(c, w[i].id);

		if (!p) {
			log_notice(
			    "restart: node %u is no longer in the cluster file: what we held "
			    "of each other is forgotten",
			    w[i].id);
			continue;
		}
		p->incarnation = w[i].incarnation;
		p->epoch = w[i].epoch;
		p->their_epoch = w[i].their_epoch;
		p->pages_there = w[i].pages_there;
		/* a link lost a moment ago, not a silence: requests wait for the next
		 * link, and the dead timer judges as for any link lost */
		p->state = PEER_DOWN;
		p->last_rx_ns = now;
		p->dead.repeat = c->dead_after_ms / 1000.0;
		ev_timer_again(c->loop, &p->dead);
		peer_publish(p);
	}
	return 0;
}
