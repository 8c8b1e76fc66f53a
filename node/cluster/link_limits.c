/*
 * link_limits.c - how many inbound peer links may wait unauthenticated
 * (issue 14): at most peer_unauth_max in all and peer_unauth_per_addr from
 * one source address; more are closed at accept, counted
 * (cluster_unauth_refused). Together with the handshake deadline
 * (link_new: min(max(100 ms, dead_after_ms), peer_handshake_timeout_ms) for
 * inbound links) this bounds what strangers can make the node hold before
 * proving the cluster key. Loop thread only.
 */
#include <string.h>

#include "node/cluster/cluster_int.h"
#include "node/log.h"

/* The host part of "HOST:PORT" (tconn_peer's form): its length. */
static size_t link_host_len(const char *addr)
{
	const char *colon = strrchr(addr, ':');

	return colon ? (size_t)(colon - addr) : strlen(addr);
}

bool link_admit(struct cluster *c, struct tconn *conn)
{
	const char *addr = tconn_peer(conn);
	size_t hlen = link_host_len(addr);
	const struct cluster_link *l;
	uint32_t all = 0, same = 0;

	for (l = c->links; l; l = l->next) {
		if (l->outbound || l->state == LINK_UP)
			continue;
		all++;
		if (link_host_len(l->addr) == hlen && !memcmp(l->addr, addr, hlen))
			same++;
	}
	if (all < c->unauth_max && same < c->unauth_per_addr)
		return true;
	c->st.unauth_refused++;
	if (ev_now(c->loop) - c->unauth_warned >= 10.0) {
		log_warn("peer link %s refused: %u unauthenticated links waiting (%u from it; "
			 "limits %u and %u per address)",
			 addr, all, same, c->unauth_max, c->unauth_per_addr);
		c->unauth_warned = ev_now(c->loop);
	}
	return false;
}
