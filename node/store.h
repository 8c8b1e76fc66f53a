/*
 * store.h - the one storage API of the node's frontends (the client socket,
 * the NBD exports, and any frontend to come): put, get and flush pages of
 * pools, whether the page lives in the local tier or on a peer.
 *
 * It hides what lies below: tmem descriptors, a page on a peer (-EREMOTE from
 * the tier becomes a remote get), a full tier (a persistent put waits for the
 * remotify thread to make room), and the node that has no collective (a page
 * once remote is then lost). A frontend is a protocol codec over this file.
 *
 * Loop only: every call runs on the event loop's thread, and every callback
 * runs there too, exactly once, possibly before the call that started it
 * returns (the caller must count it as pending before calling).
 *
 * Results: 0, -errno, or STORE_PENDING (the callback brings the result).
 */
#ifndef RAMSTER_NODE_STORE_H
#define RAMSTER_NODE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "tmem/tmem.h"

struct ev_loop;
struct zcache;
struct remote;
struct store;

/* The call goes on; its callback brings the result. */
#define STORE_PENDING 1

/*
 * The room-wait policy, the one every frontend gets: a persistent put that
 * finds the tier full (and a collective that could make room) waits for
 * remotify in steps of STORE_ROOM_STEP_MS, at most room_wait_ms (the cluster
 * file's, default STORE_DEFAULT_ROOM_WAIT_MS) without a page stored; a request whose put waited that long in vain refuses the rest
 * of its puts at once (a batch does not wait once a page).
 */
#define STORE_DEFAULT_ROOM_WAIT_MS 500 /* [cluster] room_wait_ms */
#define STORE_ROOM_STEP_MS 20

typedef void (*store_done_fn)(void *arg, int result);

/*
 * The state of one request's puts, embedded by the frontend (no allocation):
 * store_req_begin before its first put, store_req_cancel when the request is
 * dropped while a put waits (a closing connection). Private to store.c.
 */
struct store_req {
	struct store *s;
	void *room;          /* a wait for room in progress (remote's token) */
	uint64_t wait_start; /* ns, monotonic: when the current put began to wait; 0 none */
	bool waited;         /* some put of this request waited */
	bool waited_out;     /* a put waited in vain: the rest are refused at once */
	store_done_fn cb;
	void *arg;
	/* the put that waits */
	struct tmem_handle h;
	const void *page;
};

/*
 * The store over the tier z and the collective remote (NULL: a single node).
 * @return it, or NULL (ENOMEM).
 */
struct store *store_create(struct ev_loop *loop, struct zcache *z, struct remote *remote,
			   unsigned room_wait_ms);
void store_destroy(struct store *s);

/* The tier's handle space (pool tables and listings; never page data). */
struct tmem *store_tmem(struct store *s);

/* Is there a collective behind the tier? */
bool store_collective(const struct store *s);

/* Pools: see tmem_pool_new / tmem_pool_destroy / tmem_pool_info. */
int store_pool_new(struct store *s, unsigned flags);
int store_pool_destroy(struct store *s, uint32_t pool);
int store_pool_info(struct store *s, uint32_t pool, struct tmem_pool_info *info);

/* Before the first put of a request. */
void store_req_begin(struct store_req *q, store_done_fn cb, void *arg);

/* Drop the request's wait, if any: its callback will not run. */
void store_req_cancel(struct store_req *q);

/*
 * Put page as handle (pool, oid, index) for request q. @return 0 stored,
 * -errno refused (the handle's old page is gone too, as tmem_put says), or
 * STORE_PENDING: the tier is full and the put waits for room (the room-wait
 * policy above); q's callback then brings 0 or -errno, and page must stay
 * valid until it runs.
 */
int store_put(struct store *s, struct store_req *q, uint32_t pool, const struct tmem_oid *oid,
	      uint32_t index, const void *page);

/*
 * Get handle (pool, oid, index) into page. @return 0, -ENOENT (miss), -EIO
 * (lost), -errno, or STORE_PENDING: the page lives on a peer and cb(arg,
 * result) brings 0, -ENOENT or -EIO (within request_timeout_ms).
 */
int store_get(struct store *s, uint32_t pool, const struct tmem_oid *oid, uint32_t index,
	      void *page, store_done_fn cb, void *arg);

/* Flush one page / one object. @return 0 or -ENOENT (or -errno). */
int store_flush_page(struct store *s, uint32_t pool, const struct tmem_oid *oid, uint32_t index);
int store_flush_object(struct store *s, uint32_t pool, const struct tmem_oid *oid);

/* Does the handle's page live on a peer now? (listings: O(1) under its bucket) */
bool store_is_remote(struct store *s, const struct tmem_handle *h);

/* Counters ("store_..."), as stats_foreach's fn. */
void store_foreach_stat(const struct store *s,
			void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			void *arg);

#endif /* RAMSTER_NODE_STORE_H */
