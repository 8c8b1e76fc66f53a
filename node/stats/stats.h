/*
 * stats.h - the node's own counters, and the walk over every counter of the
 * node (its own, the pool directory's and the local tier's) that the STATS
 * reply and `ramsterctl stats` show.
 *
 * The counters belong to the event loop thread: only it writes them.
 */
#ifndef RAMSTER_NODE_STATS_H
#define RAMSTER_NODE_STATS_H

#include <stdint.h>

#include "node/client/pools.h"
#include "tmem/zcache.h"

#define STATS_OPS 18 /* request ops are 1..17 (client.proto); 0 unused */

struct node_stats {
	uint64_t start_ns;	      /* CLOCK_MONOTONIC at start */
	uint64_t clients;	      /* connections open now */
	uint64_t clients_total;	      /* connections accepted since start */
	uint64_t connections_closed;  /* connections closed, for any reason */
	uint64_t bad_frames;	      /* frames that failed to decode (connection closed) */
	uint64_t frame_timeouts;      /* connections closed: a frame never finished arriving */
	uint64_t io_errors;	      /* connections closed on a read/write error */
	uint64_t oom_closes;	      /* connections closed for want of memory */
	uint64_t accept_errors;	      /* accept() failures (EMFILE, ...) */
	uint64_t write_waits;	      /* replies the socket took only in part */
	uint64_t requests[STATS_OPS]; /* requests by op */
	uint64_t remote_waits;	      /* requests that waited on the collective */
	uint64_t put_room_waits;      /* persistent puts that waited for remotify to make room */
	uint64_t put_room_refused;    /* ... and were refused all the same */
	uint64_t clients_refused;     /* connections refused: max_clients / per uid / no credentials */
	uint64_t perm_refused;        /* privileged requests from other uids (-EPERM) */
	uint64_t access_refused;      /* pools a uid may not reach (-EACCES) */
	uint64_t quota_refused;       /* pages and pools refused over a uid's quota (-EDQUOT) */
	uint64_t held_reads_paused;   /* times a held request stopped its connection's reading */
};

/* Zero s and start its clock. */
void stats_init(struct node_stats *s);

/* Seconds since stats_init. */
uint64_t stats_uptime_s(const struct node_stats *s);

/* @return the op's lower-case name ("put", "pool_new", ...), or "unknown". */
const char *stats_op_name(unsigned op);

/*
 * Call fn(arg, name, value, help) for every counter: the node's (names
 * "node_..."), then the tier's through zcache_foreach_stat. p and z may be
 * NULL (their counters are then left out).
 */
void stats_foreach(const struct node_stats *s, const struct pools *p, struct zcache *z,
		   void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
		   void *arg);

#endif /* RAMSTER_NODE_STATS_H */
