/*
 * rdma_internal.h - the RDMA transport's private structures and the calls
 * between its two halves (private to transport/rdma_*.c):
 *   rdma_cm.c    connection management: the rdma_cm event channel, listen,
 *                connect, accept, the connection's life and close, the ops;
 *   rdma_verbs.c the data path: verbs objects (PD, CQ, QP, MRs), receive and
 *                send slots with credits, CQ polling, one-sided reads.
 * Everything runs on the transport's loop thread (transport.h).
 *
 * Slot layout of a connection's slab: RDMA_RECV_N receive slots, then
 * RDMA_SEND_N send slots, each RDMA_SLOT_SIZE; a work request's wr_id is its
 * slot, and RDMA_RECV_N + RDMA_SEND_N + i for read slot i.
 */
#ifndef RAMSTER_RDMA_INTERNAL_H
#define RAMSTER_RDMA_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common/util.h"
#include "transport/frame.h"
#include "transport/transport.h"
#include "transport/transport_ops.h"

/* ---- tunables ------------------------------------------------------------ */

#define RDMA_RECV_N	      16   /* receives posted per connection (the peer's credits) */
#define RDMA_SEND_N	      16   /* send slots per connection */
#define RDMA_READ_N	      64   /* RDMA READs posted at once per connection (and their slots) */
#define RDMA_READ_DEPTH	      8	   /* of those, outstanding on the wire (the QP's rd_atomic) */
#define RDMA_CREDIT_BATCH     8	   /* owe this many credits and an explicit credit message goes */
#define RDMA_RESOLVE_MS	      2000 /* rdma_resolve_addr / rdma_resolve_route limits */
#define RDMA_BACKLOG	      64
#define RDMA_CM_EVENTS_PER_CB 32
#define RDMA_POLL_BATCH	      16
#define RDMA_POLL_MAX	      256 /* completions per wake-up, then other watchers get a turn */
#define RDMA_WIRE_HDR	      8	  /* kind, 3 reserved, credits (le32) - then the frame */
#define RDMA_SLOT_SIZE	      ((RDMA_WIRE_HDR + FRAME_READER_MAX + 63u) & ~63u) /* one largest frame */
#define RDMA_PRIV_MAGIC	      0x52534d52u /* "RMSR" as little-endian bytes */
#define RDMA_PRIV_VERSION     1
#define RDMA_PRIV_LEN	      8
#define RDMA_DEV_LEN	      32

#define RDMA_KIND_FRAME	 1
#define RDMA_KIND_CREDIT 2

/* ---- structures ------------------------------------------------------------ */

/* One frame waiting for a send slot and a credit. */
struct rframe {
	struct rframe *next;
	size_t len; /* bytes of frame (header, message, payload) in data */
	uint8_t data[];
};

/* A connection: state, references, peer, queued bytes in the base (transport_ops.h). */
struct rconn {
	struct tconn base; /* first */
	ev_io cqio;	   /* the completion channel */
	ev_timer kick;	   /* fed, never started: errors found outside the loop */
	struct rdma_cm_id *id;
	int announced; /* the user knows c: on_close is due at the end */
	int connected; /* ESTABLISHED came: rdma_disconnect at close */
	int counted_accepting; /* in its transport's accepting count */
	/* verbs, owned; torn down when the memory goes */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *slab; /* RDMA_RECV_N receive slots, then RDMA_SEND_N send slots */
	/* one-sided reads: ours in flight, and the regions the peer may read */
	struct ibv_mr *rd_mr;
	uint8_t *rd_slab; /* RDMA_READ_N slots of TCONN_READ_MAX */
	struct rread {
		tconn_read_fn cb;
		void *arg;
		size_t len;
		int busy;
	} reads[RDMA_READ_N];
	struct rregion {
		void *base;
		size_t len;
		struct ibv_mr *mr;
	} *regions;
	size_t n_regions, cap_regions;
	/* flow control */
	unsigned credits; /* sends we may post: receives the peer posted for us */
	unsigned owed;	  /* receives re-posted since we last told the peer */
	unsigned peer_recv_n;
	unsigned free_slots[RDMA_SEND_N];
	unsigned n_free;
	struct rframe *head, *tail;
	char device[RDMA_DEV_LEN];
};

/* The transport: loop, callbacks, connections, references in the base. */
/* Inbound connect requests accepted but not yet established: each pins a QP,
 * CQ and its slab (~2.9 MiB) before the peer has authenticated; more are
 * rejected (issue 14). Established ones are capped by node/cluster/link_limits.c. */
#define RDMA_ACCEPTING_MAX 8

struct rdma_transport {
	struct transport base; /* first; its refs also count every rconn not yet destroyed */
	unsigned accepting;    /* rconns with counted_accepting set */
	uint64_t refused_accepting; /* connect requests rejected over RDMA_ACCEPTING_MAX */
	ev_io cmio;	       /* the rdma_cm event channel */
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen_id;
};

static inline struct rconn *rconn_of(struct tconn *c)
{
	return container_of(c, struct rconn, base);
}

static inline const struct rconn *rconn_of_c(const struct tconn *c)
{
	return container_of(c, const struct rconn, base);
}

/* A failed verbs call that may not have set errno. */
static inline int rdma_errno(int fallback)
{
	return errno ? -errno : -fallback;
}

/* ---- rdma_cm.c ------------------------------------------------------------- */

/* Close c now (on_close if announced, then its reads fail); idempotent. */
void rconn_close(struct rconn *c, const char *reason);
/* Close with "what: strerror(err)" as the reason. */
void rconn_fail(struct rconn *c, const char *what, int err);

/* ---- rdma_verbs.c ------------------------------------------------------------ */

/*
 * Everything the connection needs on its device (c->id->verbs), receives
 * posted. @return 0 or -errno; a partial set-up goes with the connection.
 */
int rconn_setup(struct rconn *c);
/* Free the verbs objects in the order they depend on each other. */
void rconn_teardown(struct rconn *c);
/* Free the frames waiting for a slot. */
void rconn_drop_queue(struct rconn *c);
/* Every read in flight ends with -ECONNRESET (the connection is closed already). */
void rconn_fail_reads(struct rconn *c);
/*
 * Post queued frames while slots and credits last, then a credit message if
 * we owe many. Calls no callback. @return 0 or -errno of a failed post.
 */
int rconn_flush(struct rconn *c);
/* The completion channel's watcher. */
void rconn_cq_cb(struct ev_loop *loop, ev_io *w, int revents);
/* The data-path ops (transport_ops.h). */
int rconn_send(struct tconn *c, const void *msg, size_t len, const void *payload, size_t plen);
int rconn_mem_add(struct tconn *c, void *base, size_t len);
void rconn_mem_del(struct tconn *c, void *base);
int rconn_mem_key(const struct tconn *c, const void *addr, size_t len, uint32_t *rkey);
int rconn_read(struct tconn *c, uint64_t raddr, uint32_t rkey, size_t len, tconn_read_fn cb,
	       void *arg);

#endif /* RAMSTER_RDMA_INTERNAL_H */
