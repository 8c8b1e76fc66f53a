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

/* Start the remotify thread (after a warm restart's records are loaded). @return 0 or -errno. */
int remote_start(struct remote *r);

/*
 * A warm restart (node/restart/restart.h, docs/warm-restart.md) keeps our
 * incarnation, seal key and version, what we know of each peer, the flushes
 * we owe and the pages we hold for others: to peers it is a link blip.
 *
 * remote_warm_check: whether it may (0), or -EBUSY with why (a drain runs).
 * remote_quiesce stops the remotify thread and re-replication; then the loop
 * runs until remote_quiet (nothing in flight but flushes owed), and
 * remote_save writes the records - or remote_resume starts both again.
 */
int remote_warm_check(struct remote *r, char *why, size_t len);
void remote_quiesce(struct remote *r);
bool remote_quiet(struct remote *r);
void remote_resume(struct remote *r);

enum {
	REMOTE_TAG_SELF = 0x5201,
	REMOTE_TAG_PEER = 0x5202,
	REMOTE_TAG_FLUSH = 0x5203,
	REMOTE_TAG_FOREIGN = 0x5204,
	REMOTE_TAG_STRIPE = 0x5205,
};

struct remote_restart_stats {
	uint64_t peers, flushes, foreign;
	uint64_t stripes;	  /* ec_layout = stripes: the stripes' records */
	uint64_t stripes_refused; /* load: records the table refused (their pages read as lost) */
	uint64_t foreign_refused; /* load: pages held for peers that found no room */
	uint64_t seal_refused;	  /* load: a key of another cipher (our remote pages lost) */
};

typedef int (*remote_emit_fn)(void *arg, uint16_t tag, const void *head, size_t head_len,
			      const void *body, size_t body_len);

/* Emit the records (remote_restart.c). @return 0 or emit's error. */
int remote_save(struct remote *r, remote_emit_fn emit, void *arg, struct remote_restart_stats *st);

/*
 * Whether a record can be loaded by node self (0 when it runs without a
 * collective): 0, -EBADMSG (malformed), -EPROTO (another node's).
 */
int remote_record_check(uint16_t tag, const uint8_t *p, size_t len, uint32_t self);

/* Loads the records into a remote made and not yet started, before the loop runs. */
struct remote_loader {
	struct remote *r;
	uint64_t incarnation;
	struct cluster_warm_peer w[CONFIG_NODES_MAX];
	size_t n;
	struct remote_restart_stats st;
};
void remote_loader_init(struct remote_loader *l, struct remote *r);
/* @return 0, or remote_record_check's error. */
int remote_load_record(struct remote_loader *l, uint16_t tag, const uint8_t *p, size_t len);
/* Apply what was loaded (the incarnation and peers). @return 0 or -EBUSY. */
int remote_load_end(struct remote_loader *l);

/* A finished remote get: 0 (page filled), -ENOENT (miss), -EIO (lost). */
typedef void (*remote_get_fn)(void *arg, int result);

/* remote_get's flags */
enum {
	REMOTE_GET_DESTRUCTIVE = 1, /* a private ephemeral pool's get: the holder drops the page */
	REMOTE_GET_BACKGROUND = 2,  /* the node's own read (bring_home): not a sign the object is hot */
	REMOTE_GET_COMPACT = 4,	    /* a stripe's compaction (compact.c): background, and the
				     * page comes home below the compact limit, not the home one */
};

/*
 * Fetch the remote page pampd (from tmem_get_ex's -EREMOTE) of handle h into
 * page (flags: REMOTE_GET_*). cb runs exactly once on the loop, within
 * request_timeout_ms (possibly before this returns).
 */
void remote_get(struct remote *r, const struct tmem_handle *h, bool pers, unsigned flags,
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

/*
 * Give back (an elastic donation shrinking, node/elastic/): hand pages back
 * to their owners, least recently active owner first, until the foreign
 * store uses at most used_max bytes. An owner places each elsewhere or takes
 * it home; a persistent page nobody has room for stays. UINT64_MAX: stop.
 * Progress is in the giveback_* stats.
 */
void remote_give_back(struct remote *r, uint64_t used_max);

/* The foreign store's budget, bytes (donate_mb; an elastic node's moves). */
void remote_set_donate(struct remote *r, uint64_t bytes);
/* Bytes the foreign store uses now (data and overhead, what the budget counts). */
uint64_t remote_donate_used(struct remote *r);

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

/*
 * For `ramsterctl status`: how a persistent page survives its holders
 * ("replicas 2", "ec 4+2"), and what this node lends ("128 MiB of 256,
 * auto" or "... fixed"). Loop only.
 */
void remote_status(struct remote *r, char *redundancy, size_t rlen, char *lending, size_t llen);

/*
 * The objects whose remote persistent pages were read lately, the most
 * recent first, at most max, into pools and oids; the list is emptied.
 * bring_home (node/elastic/home.c) takes their other pages first: a workload
 * that reads one page of an object reads its neighbours next. Loop only.
 * @return how many.
 */
unsigned remote_hot_objects(struct remote *r, uint32_t *pools, struct tmem_oid *oids,
			    unsigned max);

/* Counters of the remote side, the foreign store and the cluster. */
void remote_foreach_stat(struct remote *r,
			 void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			 void *arg);

#endif /* RAMSTER_NODE_REMOTE_H */
