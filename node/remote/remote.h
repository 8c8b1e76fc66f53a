/*
 * remote.h - the node's side of the collective: the remotify thread that
 * pushes the local tier's least recently used frames to peers, repatriate
 * (gets of remote pages), remote flushes, and serving peers' pages from the
 * foreign store.
 *
 * Everything but the remotify thread runs on the event loop's thread; the
 * thread only takes zombie frames and hands them to the loop (a locked queue
 * and an ev_async), so it never touches a socket.
 */
#ifndef RAMSTER_NODE_REMOTE_H
#define RAMSTER_NODE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/cluster/cluster.h"
#include "node/config.h"
#include "tmem/zcache.h"

struct ev_loop;
struct remote;

/*
 * Join the collective of cfg as node self: start the cluster links, the
 * foreign store (self->donate_mb) and the remotify thread.
 * @return the remote side, or NULL with err set.
 */
struct remote *remote_create(struct ev_loop *loop, struct zcache *z, const struct config *cfg,
			     const struct config_node *self, char *err, size_t errlen);

/* Stop the thread, fail what is in flight, leave the collective. NULL ok. */
void remote_destroy(struct remote *r);

/*
 * A warm restart (node/restart/restart.h): whether it may keep every page
 * (0), or -EBUSY with why: pages on peers or held for them (the incarnation
 * and seal key are not carried over yet). remote_quiesce stops the remotify
 * thread so that the tier can be walked; only remote_destroy may follow.
 */
int remote_warm_check(struct remote *r, char *why, size_t len);
void remote_quiesce(struct remote *r);

/* A finished remote get: 0 (page filled), -ENOENT (miss), -EIO (lost). */
typedef void (*remote_get_fn)(void *arg, int result);

/*
 * Fetch the remote page pampd (from tmem_get_ex's -EREMOTE) of handle h into
 * page; destructive for a private ephemeral pool. cb runs exactly once on the
 * loop, within request_timeout_ms (possibly before this returns).
 */
void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, bool destructive,
		uint64_t pampd, void *page, remote_get_fn cb, void *arg);

/*
 * A diagnostic round trip: send the 4096-byte page to node, which echoes it
 * into back. cb(arg, 0 or -errno) runs once, on the loop (maybe before this
 * returns).
 */
void remote_ping(struct remote *r, uint32_t node, const void *page, void *back, remote_get_fn cb,
		 void *arg);

/*
 * Call cb once remotify has freed some room, or after ms milliseconds,
 * whichever comes first (a persistent put that found the tier full waits so).
 * @return a token for remote_wait_cancel.
 */
void *remote_wait_room(struct remote *r, unsigned ms, void (*cb)(void *arg), void *arg);

/*
 * A page was stored in the tier (store.c, after each put): wakes the remotify
 * thread if it dozes, so an idle node's thread can sleep. Any thread; one
 * atomic load unless the thread dozes.
 */
void remote_note_put(struct remote *r);
void remote_wait_cancel(struct remote *r, void *token);

/*
 * Drain (on) this node: refuse new pages from peers and hand every page held
 * for them back to its owner, who places it elsewhere; or end that (off).
 * Progress is in the drain_* stats. @return 0.
 */
int remote_drain(struct remote *r, bool on);

/* The same, relayed to peer node (P_DRAIN). cb(arg, 0 or -errno) runs once, on the loop. */
void remote_drain_peer(struct remote *r, uint32_t node, bool on, remote_get_fn cb, void *arg);

/*
 * A reload (node/reload.c): take cfg's run-time tunables - high and low
 * watermarks, replicas (for pages placed from now on), rereplicate_rate,
 * remotify_ephemeral/persistent, request_timeout_ms - and self's donate_mb.
 * Loop thread.
 */
void remote_set_tunables(struct remote *r, const struct config *cfg,
			 const struct config_node *self);

/* The cluster (for peers listings). */
struct cluster *remote_cluster(struct remote *r);

/* Pages this node holds for node (in its foreign store). */
uint64_t remote_pages_held_for(struct remote *r, uint32_t node);

/* Counters of the remote side, the foreign store and the cluster. */
void remote_foreach_stat(struct remote *r,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

#endif /* RAMSTER_NODE_REMOTE_H */
