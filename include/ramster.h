/*
 * ramster.h - the client API of ramster, a peer-to-peer memory pool.
 *
 * A client talks to the node daemon (ramsterd) over a Unix socket and hands
 * it pages through the tmem interface: pools (ephemeral or persistent,
 * private or shared), and put / get / flush on handles (pool, 192-bit object
 * id, 32-bit index). Every call is synchronous. A handle (ramster *) is one
 * connection and must not be used by two threads at once.
 *
 * Errors are negative errno values. tmem may refuse any put: the caller keeps
 * its data. Persistent pages are kept until flushed; ephemeral ones may vanish.
 */
#ifndef RAMSTER_H
#define RAMSTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RAMSTER_PAGE_SIZE 4096
/* The most pages one putv/getv round trip carries; longer vectors are split. */
#define RAMSTER_BATCH_MAX 256

struct ramster_oid {
	uint64_t w[3];
};

typedef struct ramster ramster; /* one connection; use one per thread */

/* Pool flags: the client protocol's bits (WIRE_POOL_* in the source tree's proto/wire.h). */
enum { RAMSTER_PERSISTENT = 1u << 0, RAMSTER_SHARED = 1u << 1 };

/*
 * A shared pool's permission bits, OR-ed into ramster_pool_new's flags:
 * RAMSTER_SHARED | RAMSTER_POOL_MODE(0660). Like a file's: the creating uid,
 * its gid, others; 4 lets a class get, 2 put and flush, either join. Without
 * it a new shared pool is 0600 (its uid alone). An existing pool keeps the
 * mode it was made with. docs/operations.md, "Users and limits".
 */
#define RAMSTER_POOL_MODE(m) (((unsigned)(m) & 0777u) << 8)

/*
 * Connect to a node. socket_path NULL: $RAMSTER_SOCKET, else the default
 * (/run/ramster/ramsterd.sock). @return a handle, or NULL with errno set.
 */
ramster *ramster_open(const char *socket_path);

/* Close the connection; the node frees this client's private pools. NULL ok. */
void ramster_close(ramster *r);

/*
 * Reconnecting. When a call finds its connection broken (the node closed it,
 * restarted, or the socket was shut down), the handle dials the same socket
 * again, 10 ms apart doubling to 500 ms, for up to ms milliseconds (default
 * $RAMSTER_RECONNECT_MS, else 30000; 0: never, a broken connection fails the
 * call as it did before), attaches every pool it made again (the node keeps
 * them for its reattach_grace_ms) and sends the call again: the caller sees a
 * delay, not an error, and keeps its pool ids. A pool the node no longer has
 * (a restart without its pages, the grace ran out) is stale: its calls return
 * -ESTALE, and ramster_pool_destroy forgets it. @return 0, or -EINVAL.
 */
int ramster_set_reconnect_ms(ramster *r, uint32_t ms);

/* Times r's connection was dialled again and its pools attached. 0 for NULL. */
uint64_t ramster_reconnects(const ramster *r);

/* The connection's socket (for poll, or a test that cuts it), or -ENOTCONN / -EINVAL. */
int ramster_fileno(const ramster *r);

/*
 * Create a pool. flags: RAMSTER_PERSISTENT and/or RAMSTER_SHARED. uuid is
 * given iff RAMSTER_SHARED: every client naming the same uuid (and the same
 * flags) reaches the same pool. @return pool id >= 0, or -errno.
 */
int ramster_pool_new(ramster *r, unsigned flags, const unsigned char uuid[16]);

/*
 * Destroy a pool: a private pool is flushed and freed; a shared pool is
 * released by this client and freed when its last client releases it.
 * @return 0, or -errno (-ENOENT: no such pool of this client).
 */
int ramster_pool_destroy(ramster *r, int pool);

/* @return 0 stored; < 0 refused or failed (-ENOSPC, -E2BIG, ...). */
int ramster_put(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index,
		const void *page);

/* @return 0 filled; -ENOENT absent; -EIO lost; other -errno. */
int ramster_get(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index, void *page);

/* @return 0 flushed; -ENOENT nothing there. */
int ramster_flush(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index);

/* @return 0 flushed; -ENOENT no such object. */
int ramster_flush_object(ramster *r, int pool, const struct ramster_oid *oid);

struct ramster_iov {
	struct ramster_oid oid;
	uint32_t index;
	void *page;
	int result;
};

/*
 * Batches, RAMSTER_BATCH_MAX pages a round trip. Each v[i].result is what
 * the single call would return. @return the count that succeeded, or -errno
 * if the batch failed as a whole: then the results are undefined, and for a
 * vector longer than RAMSTER_BATCH_MAX the round trips before the failing
 * one may have taken effect (puts stored, private ephemeral gets consumed).
 */
int ramster_putv(ramster *r, int pool, struct ramster_iov *v, size_t n);
int ramster_getv(ramster *r, int pool, struct ramster_iov *v, size_t n);

/* ---- administration (used by ramsterctl) -------------------------------- */

/* One named figure. */
struct ramster_stat {
	char *name;
	uint64_t value;
};

/* One pool of the node, as `ramsterctl pools` shows it. */
struct ramster_pool_info {
	uint32_t id;            /* the node's pool id (not a client's) */
	unsigned flags;         /* RAMSTER_PERSISTENT | RAMSTER_SHARED */
	unsigned char uuid[16]; /* shared pools only */
	uint32_t clients;       /* clients holding it */
	uint64_t objects;
	uint64_t pages;
};

/* One line of the node's status, as text. */
struct ramster_kv {
	char *key;
	char *value;
};

/*
 * Read the node's counters. On success *out is an array of *n entries, freed
 * with ramster_stats_free. @return 0 or -errno.
 */
int ramster_stats(ramster *r, struct ramster_stat **out, size_t *n);
void ramster_stats_free(struct ramster_stat *s, size_t n);

/*
 * Read one counter of the node by name into *value (one round trip, nothing
 * to free). @return 0, -ENOENT if the node has no counter of that name (an
 * older or differently built daemon), or -errno.
 */
int ramster_stat(ramster *r, const char *name, uint64_t *value);

/*
 * Read the node's status (node name, version, pid, uptime, config, ...). On
 * success *out is an array of *n entries, freed with ramster_kv_free.
 * @return 0 or -errno.
 */
int ramster_status(ramster *r, struct ramster_kv **out, size_t *n);
void ramster_kv_free(struct ramster_kv *kv, size_t n);

/*
 * Ask the node to re-read its cluster file (as SIGHUP does): root or the
 * daemon's own user only. *out gets the node's lines "applied", "restart"
 * (changed keys that need a restart) and "error" (why nothing changed), freed
 * with ramster_kv_free, whatever the result. @return 0; -EPERM (not
 * privileged), -EINVAL (the file does not load), -ENOENT (the node runs
 * without a file), or another -errno (then *out is not set).
 */
int ramster_reload(ramster *r, struct ramster_kv **out, size_t *n);

/*
 * Ask the node for a warm restart (docs/warm-restart.md): root or the
 * daemon's own user only. @return 0 (the node re-executes now, keeping its
 * pages: this connection closes; with reconnecting on, r redials), -EBUSY
 * (it cannot be warm now: *out, when not NULL, gets an "error" line saying
 * why, freed with ramster_kv_free), -EPERM, or another -errno.
 */
int ramster_restart(ramster *r, struct ramster_kv **out, size_t *n);

/* List every pool of the node. *out freed with free(). @return 0 or -errno. */
int ramster_pools(ramster *r, struct ramster_pool_info **out, size_t *n);

/* One peer of the node's collective, as `ramsterctl peers` shows it. */
struct ramster_peer_info {
	uint32_t id;
	char name[64];
	char address[80];
	char state[16];         /* up, connecting, down, dead */
	char transport[16];     /* tcp, rdma, or - when not up */
	uint64_t incarnation;
	uint32_t epoch;
	double rtt_us;
	uint64_t donate_free, donate_total;
	uint64_t pages_lent;     /* pages of this node the peer holds */
	uint64_t pages_borrowed; /* pages of the peer this node holds */
	uint64_t ups, deaths;
	char device[32];         /* the link's RDMA device (rxe0, mlx5_0), or - */
};

/*
 * A diagnostic round trip carrying one page each way: to the node (node 0),
 * or through the node to its peer `node` and back over their link. back gets
 * the page as it returned. @return 0, or -errno (-EHOSTDOWN: no such live
 * peer; -ENOTSUP: the node is not in a collective).
 */
int ramster_ping(ramster *r, uint32_t node, const void *page, void *back);

/*
 * Drain a node (on = 1): it refuses new pages from its peers and hands every
 * page it holds for them back to their owners, who place them on other
 * peers; then it can stop without loss. on = 0 ends the drain. node 0 is the
 * node r is connected to; another id is relayed to that peer. Progress: the
 * drained node's drain_* stats. @return 0, or -errno (-ENOTCONN: not in a
 * collective; -EHOSTDOWN: no such live peer).
 */
int ramster_drain(ramster *r, uint32_t node, int on);

/* List the peers (none for a single node). *out freed with free(). @return 0 or -errno. */
int ramster_peers(ramster *r, struct ramster_peer_info **out, size_t *n);

/* One NBD export of the node, as `ramsterctl exports` shows it. */
struct ramster_export_info {
	char name[64];
	char backing[256];       /* the backing file, or "" */
	uint64_t size;           /* bytes */
	uint64_t pages_local;    /* pages in the local tier */
	uint64_t pages_remote;   /* pages whose copy is on a peer */
	uint64_t pages_backing;  /* blocks held by the backing file alone */
	uint64_t clients;        /* NBD connections attached now */
	uint64_t requests, errors;
};

/* List the NBD exports (none when not configured). *out freed with free(). @return 0 or -errno. */
int ramster_exports(ramster *r, struct ramster_export_info **out, size_t *n);

/* ---- far memory regions (lib/region.c, docs/far-memory.md) ---------------- */

/*
 * A region is ordinary anonymous memory of which at most resident_bytes is
 * resident: colder pages go to a persistent pool of the region's own on r's
 * node and are dropped; touching one brings it back (userfaultfd). Pages
 * never written read as zeros and cost nothing. A page whose copy the node
 * lost (every copy gone) is not replaced by a wrong one: touching it raises
 * SIGBUS. The region has its own connection to r's node and its own
 * fault-handling thread; r stays the caller's. Needs userfaultfd with
 * write-protect (Linux >= 5.7; /dev/userfaultfd access or CAP_SYS_PTRACE).
 * flags must be 0. @return the region (page-aligned, bytes rounded up to
 * pages), or NULL with errno (EINVAL, ENOTSUP: no userfaultfd here, EPERM,
 * ENOMEM, or the connection's error).
 */
void *ramster_region_map(ramster *r, size_t bytes, size_t resident_bytes, int flags);

/* Unmap a region of r made by ramster_region_map; its pool is destroyed. @return 0 or -errno. */
int ramster_region_unmap(ramster *r, void *addr);

/* What a region (or ramster-run's whole program) did. */
struct ramster_region_stats {
	uint64_t budget_pages;	  /* the resident budget */
	uint64_t resident_pages;  /* pages in memory now (zero-page mappings not counted) */
	uint64_t pool_pages;	  /* pages whose current copy is in the pool */
	uint64_t faults;	  /* missing-page faults served */
	uint64_t faults_zero;	  /* ... of them by mapping zeros (never written) */
	uint64_t faults_wp;	  /* write-protect faults (first write after a fetch or a sweep) */
	uint64_t gets;		  /* pages fetched from the pool (prefetch included) */
	uint64_t prefetched;	  /* pages fetched ahead of a sequential run */
	uint64_t get_failed;	  /* fetches that failed: the page was poisoned (SIGBUS on touch) */
	uint64_t evicted;	  /* pages dropped from memory */
	uint64_t puts;		  /* pages written to the pool (dirty evictions) */
	uint64_t put_refused;	  /* puts the node refused: the page stayed resident */
	uint64_t over_budget;	  /* faults served with no page left to evict */
	uint64_t evict_failed;	  /* victims the kernel would not drop (mlock'd): they stayed */
	uint64_t fault_ns_p50;	  /* service time of a missing fault, thread side, median */
	uint64_t fault_ns_p99;	  /* ... 99th percentile (powers of two) */
	uint64_t evicted_bg;	  /* of evicted: by the background evictor (between watermarks) */
	uint64_t evicted_sync;	  /* of evicted: by a fault that found no free slot (it waited) */
	uint64_t faults_spun;	  /* faults the fault thread read while polling (no wake-up) */
	uint64_t zcache_cap_bytes; /* the compressed cache's bound, beside the budget (0: off) */
	uint64_t zcache_bytes;	   /* bytes it holds now (compressed pages and their headers) */
	uint64_t zcache_pages;	   /* pages it holds now (their only current copy: write-back) */
	uint64_t zcache_stored;	   /* pages stored in it (dirty evictions) */
	uint64_t zcache_hits;	   /* faulted pages served from it, no round trip (not in gets) */
	uint64_t zcache_absorbed;  /* dirty evictions kept in it with no put (of zcache_stored) */
	uint64_t zcache_written_back; /* its pages put when they left it (in puts) */
	uint64_t zcache_wb_sync;      /* ... of them, put by a fault (the evictor fell behind) */
	uint64_t evicted_batched;     /* of evicted: dropped by one process_madvise a batch (6.13+) */
};

/* Read a region's counters. @return 0 or -errno (-ENOENT: no such region of r). */
int ramster_region_stats(ramster *r, void *addr, struct ramster_region_stats *st);
/* One uid with connections or pools on the node, as `ramsterctl clients` shows it. */
struct ramster_client_info {
	uint32_t uid;
	uint32_t connections;
	uint32_t pools;          /* pools it owns */
	uint64_t pages;          /* pages in them, local and remote */
	uint64_t pages_remote;   /* of those, pages whose copy is on a peer */
	uint64_t bytes_in, bytes_out;
	uint64_t refusals;       /* connections and requests refused (limits, -EPERM, -EACCES, -EDQUOT) */
	uint64_t max_mb;         /* its quota (0: none) */
	uint32_t weight;
};

/*
 * List the node's uids: all of them for root and the daemon's uid, the
 * caller's own row for anyone else. *out freed with free(). @return 0 or -errno.
 */
int ramster_clients(ramster *r, struct ramster_client_info **out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* RAMSTER_H */
