/*
 * cluster.h - membership of the collective: one authenticated link per peer,
 * heartbeats, death and rebirth of peers, and requests to peers with replies.
 *
 * Links: the node with the lower id dials, the other accepts; one link per
 * pair. Handshake both ways (HELLO then AUTH) proves the cluster secret with
 * HMAC-SHA-256 over both nonces; nothing else is accepted before. A peer
 * silent for dead_after_ms is unreachable: nothing new goes there, but nothing
 * it holds is forgotten. Each node keeps, per peer, an epoch: it grows only
 * when the peer's copies are really gone: it restarted (new incarnation), it
 * stayed unreachable past orphan_after_ms (its lease expired), or it said it
 * dropped our pages. Pages held under an older epoch are gone. Runs on the
 * loop's thread only, except cluster_alive, cluster_reachable and cluster_linked
 * (any thread).
 */
#ifndef RAMSTER_CLUSTER_H
#define RAMSTER_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/config.h"
#include "proto/peerwire.h"
#include "transport/transport.h"

struct ev_loop;
struct cluster;

#define CLUSTER_KEY_LEN 32

/* What a request's callback gets: the reply (result 0 or the peer's -errno),
 * or -ETIMEDOUT, -EHOSTDOWN (the peer restarted or its lease expired: what it
 * held for us is gone), -ECANCELED (shutdown). */
typedef void (*cluster_reply_fn)(void *arg, int result, const Ramster__Peer__Msg *reply,
				 const uint8_t *payload, size_t plen);

struct cluster_handlers {
	/*
	 * A request (P_PUT, P_GET, P_FLUSH, P_FLUSH_OBJECT, P_FLUSH_POOL) from an
	 * authenticated peer. session names the owner's pages: its incarnation
	 * plus the epoch it announced for us. Answer with cluster_reply (now or
	 * later; a reply after the link went away is dropped).
	 */
	void (*on_request)(void *arg, uint32_t node, uint64_t session, const Ramster__Peer__Msg *m,
			   const uint8_t *payload, size_t plen);
	/* A peer's link is up and authenticated. session as above: pages held
	 * for this peer under any other session are stale. */
	void (*on_peer_up)(void *arg, uint32_t node, uint64_t session);
	/* A peer's copies are gone: it restarted (new incarnation), its lease
	 * expired (unreachable past orphan_after_ms) or it dropped our pages. */
	void (*on_peer_down)(void *arg, uint32_t node, const char *why);
	/* A peer is silent past dead_after_ms: unreachable, nothing forgotten. */
	void (*on_peer_unreachable)(void *arg, uint32_t node);
	/* The session (cluster.h on_request) of node's pages this node dropped
	 * on its own (their lease expired, or room was needed), 0 if none: sent
	 * in heartbeats so that node forgets them too. */
	uint64_t (*dropped_session)(void *arg, uint32_t node);
	/* Bytes this node can still take for peers, and its total donation. */
	void (*donate)(void *arg, uint64_t *free_bytes, uint64_t *total_bytes);
	/* Pages this node holds for node (sent in heartbeats). */
	uint64_t (*foreign_pages)(void *arg, uint32_t node);
};

/*
 * Start the collective for node self of cfg on loop: listen on self's
 * address, dial the peers with higher ids (with backoff), heartbeat.
 * @return the cluster, or NULL with errno set and a reason in err.
 */
struct cluster *cluster_create(struct ev_loop *loop, const struct config *cfg,
			       const struct config_node *self, const uint8_t key[CLUSTER_KEY_LEN],
			       const struct cluster_handlers *h, void *arg, char *err, size_t errlen);

/*
 * A node added to the cluster file (a reload, node/reload.c): from now on it
 * is a peer like the others (dialed if its id is higher than ours, accepted
 * otherwise). @return 0, -EEXIST (its id is a peer already), -EINVAL, -ENOSPC.
 */
int cluster_add_node(struct cluster *c, const struct config_node *node);

/*
 * A node removed from the cluster file (a reload): refused with -EBUSY while
 * it holds pages of ours (its last heartbeat said so: drain it first);
 * otherwise its link goes, pending requests fail (-EHOSTDOWN), on_peer_down
 * runs ("removed": the pages we held for it are dropped) and it is no peer
 * any more: never dialed, its hellos refused. @return 0, -EBUSY, -ENOENT.
 */
int cluster_remove_node(struct cluster *c, uint32_t id);

/* Fail every pending request (-ECANCELED), close every link, free. NULL ok. */
void cluster_destroy(struct cluster *c);

/*
 * Read the cluster key from the secret file: exactly what 'ramsterctl genkey'
 * writes (64 hex digits, a 256-bit key, and a newline). @return 0, or -errno
 * with err set (missing, unreadable, group/world readable, anything but the
 * key format: -EINVAL; a key of one repeated byte: -EKEYREJECTED).
 */
int cluster_load_key(const char *path, uint8_t key[CLUSTER_KEY_LEN], char *err, size_t errlen);

/*
 * Send request m (its op and fields set; seq is assigned here) with an
 * optional payload to node. If the link is down (the peer unreachable too),
 * the request waits for the link, within its timeout, and is sent then;
 * requests unanswered when a link drops are sent again on the next link. cb
 * is called exactly once. @return 0, or -errno (no such peer, or a peer never
 * seen yet: then cb is not called).
 */
int cluster_request(struct cluster *c, uint32_t node, Ramster__Peer__Msg *m, const void *payload,
		    size_t plen, unsigned timeout_ms, cluster_reply_fn cb, void *arg);

/* Answer request seq of node. page/payload may be NULL/0. @return 0 or -errno. */
int cluster_reply(struct cluster *c, uint32_t node, uint64_t seq, int result,
		  const Ramster__Peer__Page *page, const void *payload, size_t plen);

/*
 * Is our session with node still in epoch (mod 256)? Pages it holds for us in
 * that epoch still exist: the peer is up, or its link is lost, or it is
 * unreachable (a request waits for the link, bounded by its timeout). Any
 * thread: lock-free (the loop publishes each change).
 */
bool cluster_alive(struct cluster *c, uint32_t node, unsigned epoch);

/* cluster_alive, and the peer not unreachable (up, or its link lost for less
 * than dead_after_ms): a request can be answered soon. Any thread. */
bool cluster_reachable(struct cluster *c, uint32_t node, unsigned epoch);

/* cluster_reachable, and its link up now: a request goes out at once instead of
 * waiting for a link (up to dead_after_ms for a holder that died). Any thread. */
bool cluster_linked(struct cluster *c, uint32_t node, unsigned epoch);

/* How long node has been silent, ms: 0 while its link is up. Loop only. */
uint64_t cluster_silent_ms(struct cluster *c, uint32_t node);

/* End an unreachable peer's lease now (as orphan_after_ms would): its copies
 * are gone, on_peer_down("lease expired"). Nothing if it is not unreachable. */
void cluster_forget(struct cluster *c, uint32_t node);

/* The smoothed heartbeat round trip to node, microseconds; larger than any
 * real one when its link is not up (so that such a peer is asked last). */
double cluster_rtt_us(struct cluster *c, uint32_t node);

/* Our current epoch for node (mod 256 where it is stored in descriptors). */
unsigned cluster_epoch(struct cluster *c, uint32_t node);

/*
 * Choose a target for need bytes among live peers not in exclude (bit n-1 for
 * node n), by the power of two choices on the free donated space of their
 * last heartbeats (less what we sent since). @return node id, or -ENOSPC.
 */
int cluster_pick(struct cluster *c, size_t need, uint64_t exclude);

/*
 * One-sided reads (rdma links). A holder lets the owner node read a region of
 * its memory over their current link (cluster_mem_add: registered on that
 * link alone, gone with it; cluster_mem_del before the memory is freed), and
 * names a page in it with cluster_mem_key: the key and the link's generation.
 * The owner reads with cluster_read, which refuses (-ESTALE) a key of another
 * link than the current one. Return -ENOTSUP where the link is not rdma.
 */
int cluster_mem_add(struct cluster *c, uint32_t node, void *base, size_t len);
void cluster_mem_del(struct cluster *c, uint32_t node, void *base);
int cluster_mem_key(struct cluster *c, uint32_t node, const void *addr, size_t len,
		    uint32_t *rkey, uint32_t *gen);
/* Our generation of node's current link (to keep with a key it named). */
uint32_t cluster_link_gen(struct cluster *c, uint32_t node);
/* cb as tconn_read's (transport.h). @return 0, -ESTALE, -EBUSY, -ENOTSUP, -ENOTCONN. */
int cluster_read(struct cluster *c, uint32_t node, uint32_t gen, uint64_t raddr, uint32_t rkey,
		 size_t len, tconn_read_fn cb, void *arg);

/* How many peers cluster_pick could choose from now (live, not excluded, with room). */
unsigned cluster_candidates(struct cluster *c, size_t need, uint64_t exclude);

/* This node's id. */
uint32_t cluster_self(const struct cluster *c);

struct cluster_peer_info {
	uint32_t id;
	char name[CONFIG_NAME_MAX];
	char address[CONFIG_NAME_MAX + 8];
	const char *state;          /* "up", "connecting", "down", "dead" */
	const char *transport;      /* "tcp" or "rdma" when up, else "-" */
	char device[32];            /* the link's RDMA device ("rxe0"), else "-" */
	uint64_t incarnation;       /* the peer's, 0 when never seen */
	unsigned epoch;             /* ours for it */
	double rtt_us;              /* smoothed heartbeat round trip */
	uint64_t donate_free;       /* from its last heartbeat */
	uint64_t donate_total;
	uint64_t pages_there;       /* pages it says it holds for us */
	uint64_t ups, deaths;       /* times it came up / was declared dead */
};

/*
 * A warm restart (node/restart/restart.h) keeps what peers know us by: our
 * incarnation and, per peer, its incarnation, our epoch for it, its for us
 * and the pages there. cluster_warm_get: fill out (up to max), @return how
 * many. cluster_warm_set: after cluster_create, before the loop first runs
 * (dials wait for it): @return 0, -EINVAL (incarnation 0), -EBUSY (a link
 * exists already). A peer no longer configured is skipped, logged.
 */
struct cluster_warm_peer {
	uint32_t id;
	uint64_t incarnation;
	uint32_t epoch, their_epoch;
	uint64_t pages_there;
};
uint64_t cluster_incarnation(const struct cluster *c);
size_t cluster_warm_get(const struct cluster *c, struct cluster_warm_peer *out, size_t max);
int cluster_warm_set(struct cluster *c, uint64_t incarnation, const struct cluster_warm_peer *w,
		     size_t n);

/* Requests waiting for their replies, over every peer. */
size_t cluster_pending(const struct cluster *c);

/* Call fn for every pending request (node, its callback and argument), oldest first per peer. */
void cluster_foreach_pending(const struct cluster *c,
			     void (*fn)(void *ctx, uint32_t node, cluster_reply_fn cb, void *arg),
			     void *ctx);

/* Fill out with up to max peers. @return the number of peers. */
size_t cluster_peers(struct cluster *c, struct cluster_peer_info *out, size_t max);

/* Counters: links, handshakes, auth failures, heartbeats, bad frames, requests, timeouts... */
void cluster_foreach_stat(struct cluster *c,
			  void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			  void *arg);

#endif /* RAMSTER_CLUSTER_H */
