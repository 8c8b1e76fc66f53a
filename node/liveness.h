/*
 * liveness.h - which peers are alive, and in which epoch, for any thread.
 *
 * The cluster's peer table belongs to the event loop. The tier asks "is this
 * holder alive in this epoch?" (zcache_remote_ops.alive) on whatever thread
 * runs a get, under a bucket lock: the loop, the remotify thread, an
 * in-process user. So the cluster publishes each peer's answer in one atomic
 * word as the peer's state or epoch changes (loop thread only), and
 * cluster_alive reads that word, never the table. One word a peer: alive and
 * epoch are read together, never half of one change and half of the next.
 * Header-only: two atomic accesses.
 */
#ifndef RAMSTER_NODE_LIVENESS_H
#define RAMSTER_NODE_LIVENESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "node/config.h"

#define LIVENESS_ALIVE 0x100u /* the word: this bit, and the epoch mod 256 below it */

struct liveness {
	_Atomic uint32_t word[CONFIG_NODES_MAX + 1]; /* by node id; 0: not alive (never up) */
};

/* Publish node's state: alive (up, or link lost but not declared dead) and
 * our epoch for it. Loop thread only (the one writer). */
static inline void liveness_publish(struct liveness *l, uint32_t node, bool alive, unsigned epoch)
{
	if (node == 0 || node > CONFIG_NODES_MAX)
		return;
	atomic_store_explicit(&l->word[node], (alive ? LIVENESS_ALIVE : 0) | (epoch & 255u),
			      memory_order_release);
}

/* Is node alive in epoch (mod 256)? Any thread, any lock held. */
static inline bool liveness_alive(const struct liveness *l, uint32_t node, unsigned epoch)
{
	uint32_t w;

	if (node == 0 || node > CONFIG_NODES_MAX)
		return false;
	w = atomic_load_explicit(&l->word[node], memory_order_acquire);
	return (w & LIVENESS_ALIVE) && (w & 255u) == epoch;
}

#endif /* RAMSTER_NODE_LIVENESS_H */
