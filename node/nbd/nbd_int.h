/*
 * nbd_int.h - private to the files of the NBD frontend (nbd.h):
 *
 *   nbd.c               connections (buffers, sending), listeners, the server;
 *   nbd_handshake.c     the fixed newstyle handshake (options, export choice);
 *   nbd_export.c        an export: its pages through the store, the present /
 *                       in-backing / dirty bitmaps, the backing file, FLUSH;
 *   nbd_transmission.c  the transmission phase: requests, READ, WRITE, TRIM,
 *                       WRITE_ZEROES, replies.
 *   nbd_tls.c           TLS (STARTTLS): credentials, a connection's session
 *                       and its records (nbd_tls.h).
 *   nbd_restart.c       the exports across a warm restart (their bitmaps);
 *   nbd_handover.c      the connections across a re-execution (their sockets).
 *
 *   nbd_io.c            backing-file syncs off the loop (a worker thread).
 *
 * Loop only: all of it runs on the event loop's thread, but nbd_io.c's
 * worker, which touches only its jobs' fd and result.
 */
#ifndef RAMSTER_NODE_NBD_INT_H
#define RAMSTER_NODE_NBD_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/un.h>

#include <ev.h>

#include "common/sock.h"
#include "node/closed.h"
#include "node/config.h"
#include "node/handoff.h"
#include "node/nbd/nbd.h"
#include "node/nbd/nbd_tls.h"
#include "node/store.h"

/* ---- the protocol (the NBD project's doc/proto.md) ------------------------------ */

#define NBD_MAGIC	       0x4e42444d41474943ull /* "NBDMAGIC" */
#define NBD_IHAVEOPT	       0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_REP_MAGIC	       0x0003e889045565a9ull
#define NBD_REQUEST_MAGIC      0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

/* handshake flags (server) and client flags */
#define NBD_FLAG_FIXED_NEWSTYLE	  (1u << 0)
#define NBD_FLAG_NO_ZEROES	  (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES	  (1u << 1)

/* options */
#define NBD_OPT_EXPORT_NAME	 1u
#define NBD_OPT_ABORT		 2u
#define NBD_OPT_LIST		 3u
#define NBD_OPT_STARTTLS	 5u
#define NBD_OPT_INFO		 6u
#define NBD_OPT_GO		 7u
#define NBD_OPT_STRUCTURED_REPLY 8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT 10u

/* option replies */
#define NBD_REP_ACK	    1u
#define NBD_REP_SERVER	    2u
#define NBD_REP_INFO	    3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_ERR_UNSUP   ((1u << 31) + 1)
#define NBD_REP_ERR_INVALID ((1u << 31) + 3)
#define NBD_REP_ERR_TLS_REQD ((1u << 31) + 5)
#define NBD_REP_ERR_UNKNOWN ((1u << 31) + 6)

/* information types */
#define NBD_INFO_EXPORT	    0u
#define NBD_INFO_NAME	    1u
#define NBD_INFO_BLOCK_SIZE 3u

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS	   (1u << 0)
#define NBD_FLAG_SEND_FLUSH	   (1u << 2)
#define NBD_FLAG_SEND_FUA	   (1u << 3)
#define NBD_FLAG_SEND_TRIM	   (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_CAN_MULTI_CONN	   (1u << 8)

/* command flags */
#define NBD_CMD_FLAG_FUA     (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)

/* structured replies */
#define NBD_REPLY_FLAG_DONE	    (1u << 0)
#define NBD_REPLY_TYPE_NONE	    0u
#define NBD_REPLY_TYPE_OFFSET_DATA  1u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR	    ((1u << 15) + 1)
#define NBD_SREPLY_HDR		    20u
#define NBD_STATE_HOLE		    (1u << 0)
#define NBD_STATE_ZERO		    (1u << 1)
#define NBD_META_ALLOCATION	    "base:allocation"
#define NBD_META_ALLOCATION_ID	    1u
#define NBD_EXTENTS_MAX		    1024u /* descriptors in one BLOCK_STATUS reply */

/* commands */
#define NBD_CMD_READ	     0u
#define NBD_CMD_WRITE	     1u
#define NBD_CMD_DISC	     2u
#define NBD_CMD_FLUSH	     3u
#define NBD_CMD_TRIM	     4u
#define NBD_CMD_CACHE	     5u /* not offered */
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_BLOCK_STATUS 7u
#define NBD_CMDS	     8u

/* error values */
#define NBD_EIO	   5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u

#define NBD_HANDSHAKE_FLAGS (NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES)
#define NBD_TRANSMIT_FLAGS                                                                         \
	(NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |       \
	 NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN)

#define NBD_OPT_HDR	 16u
#define NBD_REQ_HDR	 28u
#define NBD_REPLY_HDR	 16u
#define NBD_OPT_MAX	 (64u * 1024) /* longest option data taken */
#define NBD_BLOCK_MIN	 512u
#define NBD_PAGE	 4096u
#define NBD_PAYLOAD_MAX	 (32u * 1024 * 1024) /* maximum block size advertised */
#define NBD_OBJ_SHIFT	 20                  /* 2^20 pages an object */
#define NBD_OBJ_PAGES	 (1ull << NBD_OBJ_SHIFT)

/* ---- tunables ------------------------------------------------------------------ */

#define NBD_IN_MIN	  (256u * 1024) /* input buffer to start with */
#define NBD_OUT_HIGH	  (4u * 1024 * 1024) /* stop running requests above this unsent */
#define NBD_FLUSH_BATCH	  256u          /* pages a FLUSH fetches at a time */
#define NBD_SLICE_PAGES	  1024u         /* pages a request works in one turn of the loop */
#define NBD_ACCEPT_BURST  64

/* ---- structures ---------------------------------------------------------------- */

struct nbd_conn;
struct nbd_export;

/* Backing-file I/O run off the loop (nbd_io.c): an fdatasync of fd. */
/*
 * One operation on an export's backing file, run by the worker. Every
 * operation on a file goes through the worker's one FIFO queue, so the file
 * sees them in the order the loop submitted them: a read after a write
 * reads it, a FLUSH's copy of a block never lands after a newer write.
 */
enum nbd_op_kind {
	NBD_OP_READ,   /* pread one block into page (past the end: zeros) */
	NBD_OP_STORE,  /* pwrite a page the tier refused: the file alone holds it */
	NBD_OP_BEHIND, /* pwrite a page the tier keeps too (FLUSH, FUA write-behind) */
	NBD_OP_PUNCH,  /* punch count blocks from block on */
};

struct nbd_op {
	uint8_t kind;
	int result;             /* 0 or -errno, set by the worker */
	uint64_t block, count;
	uint8_t *page;          /* READ: where it lands; writes: what goes (stable until done) */
	struct nbd_slot *slot;  /* READ: its slot (result copied there) */
};

struct nbd_job {
	struct handoff_item it; /* first */
	struct nbd_job *next;   /* in the worker's queue */
	int fd;
	int result;             /* 0 or -errno, set by the worker (a sync: its fdatasync) */
	void (*done)(struct nbd_job *j); /* on the loop */
	struct nbd_export *e;
	size_t n_ops;           /* 0: an fdatasync; else ops[] (struct nbd_file_job) */
	struct nbd_op *ops;
};

/* A connection's batch of file operations, one job (nbd_file_op, nbd_file_submit). */
struct nbd_file_job {
	struct nbd_job j;
	struct nbd_conn *c;
	size_t cap;
	struct nbd_op op[];
};

struct nbd_io {
	bool started, stop;
	pthread_t thread;
	pthread_mutex_t lock; /* a leaf: guards head, tail, stop */
	pthread_cond_t cond;
	struct nbd_job *head, **tail;
	struct handoff done;  /* finished jobs, to the loop */
};

struct nbd_export {
	struct nbd *srv;
	unsigned number; /* oid word 0 */
	char name[CONFIG_NAME_MAX];
	char backing[CONFIG_PATH_MAX];
	uint64_t size, blocks;
	uint32_t pool;
	bool has_pool;
	int fd;               /* backing file, or -1 */
	uint64_t *present;    /* 1: the block may be in tmem */
	uint64_t *in_backing; /* 1: the file alone holds the block (backing only) */
	uint64_t *dirty;      /* 1: tmem holds data the file may lack (backing only) */
	uint64_t *unsynced;   /* 1: written to the file since the last good sync (backing only) */
	uint64_t *lost;       /* 1: a failed sync lost what the file alone held (backing only) */
	uint64_t lost_blocks; /* bits set in lost: FLUSH and FUA fail while > 0 */
	bool sync_failed;     /* the last sync failed (an episode, logged once) */
	uint64_t *syncing;    /* unsynced as the running sync began (backing only) */
	struct nbd_job sync_job;         /* the running sync, off the loop */
	struct nbd_conn *sync_conn;      /* whose sync runs now (NULL: none) */
	struct nbd_conn *sync_q, **sync_tail; /* syncs waiting for it, in order */
	uint64_t backing_pages;          /* bits set in in_backing */
	struct nbd_conn *flusher;        /* the connection whose FLUSH runs now */
	struct nbd_conn *flush_q, **flush_tail; /* FLUSHes waiting for it, in order */
	uint64_t clients;                /* connections attached now */
	uint64_t requests;               /* requests served */
	uint64_t errors;                 /* error replies */
	bool full;                       /* writes fail with ENOSPC now (an episode) */
};

struct nbd_stats {
	uint64_t conns;           /* connections open now */
	uint64_t conns_total;     /* accepted since start */
	uint64_t accept_errors;   /* failed accepts */
	uint64_t bad_handshakes;  /* connections closed for a handshake violation */
	uint64_t bad_requests;    /* connections closed for a request that broke the stream */
	uint64_t io_errors;       /* connections closed on a socket error */
	uint64_t oom_closes;      /* connections closed for want of memory */
	uint64_t requests[NBD_CMDS]; /* requests by command */
	uint64_t invalid;         /* requests answered EINVAL/ENOSPC by validation */
	uint64_t errors;          /* error replies of any kind */
	uint64_t bytes_read;      /* READ bytes answered */
	uint64_t bytes_written;   /* WRITE bytes taken */
	uint64_t zero_pages;      /* pages written as zeros: dropped, read back as zeros */
	uint64_t put_refused;     /* pages the tier refused */
	uint64_t refused_lost;    /* of those, failed writes (no backing) */
	uint64_t nospace;         /* page writes failed ENOSPC: tier, collective, backing full */
	uint64_t nospace_episodes; /* times an export became full (each logged once) */
	uint64_t backing_writes;  /* pages written to backing files */
	uint64_t backing_reads;   /* pages read from backing files */
	uint64_t backing_errors;  /* backing file I/O errors */
	uint64_t remote_gets;     /* pages fetched from peers */
	uint64_t remote_waits;    /* requests that waited on the collective */
	uint64_t room_waits;      /* writes that waited for remotify to make room */
	uint64_t room_refused;    /* ... and were refused all the same */
	uint64_t flush_pages;     /* pages written behind by FLUSH and FUA */
	uint64_t flush_waits;     /* FLUSHes that waited for another connection's */
	uint64_t syncs;           /* fdatasync calls */
	uint64_t yields;          /* times a long request let the loop run others */
	uint64_t sync_failures;   /* of those, failed (the FLUSH or FUA answered EIO) */
	uint64_t sync_waits;      /* syncs that waited for another one of their export */
	uint64_t sync_lost;       /* blocks a failed sync lost (the file alone held them) */
	uint64_t adopted;         /* connections taken over from the process before a re-exec */
	uint64_t adopt_refused;   /* ... handed over but closed (their export changed or gone) */
};

struct nbd_listener {
	ev_io io; /* first */
	struct nbd *srv;
	int fd;
	bool is_unix;
	struct sock_unix sock; /* is_unix: the socket file made, to unlink only ours */
};

/* nbd_limits.c: connection count, handshake and idle deadlines (issue 14). */
struct nbd_limits {
	ev_timer sweep;
	uint32_t max_conns;
	ev_tstamp handshake_s, idle_s, warned;
	uint64_t refused, handshake_timeouts, idle_timeouts;
};

struct nbd {
	struct ev_loop *loop;
	struct store *store;
	struct nbd_listener lunix, ltcp;
	struct nbd_io io; /* the backing-file worker */
	size_t n_exports;
	struct nbd_export *exports;
	struct nbd_conn *conns;
	uint64_t next_id;
	struct nbd_stats st;
	struct nbd_limits lim;
	struct nbd_tls tls;
	bool quiescing; /* a warm restart: no request is started (nbd_handover.c) */
	char describe[CONFIG_PATH_MAX + CONFIG_NAME_MAX + 32];
};

/* A page being fetched for a waiting request. */
struct nbd_slot {
	struct nbd_conn *c;
	uint64_t block;
	uint8_t *page;   /* where the page lands */
	uint8_t *dst;    /* then [off, off+len) of it is copied here (NULL: no copy) */
	unsigned off, len;
	int result;
};

struct nbd_req {
	uint16_t flags, type;
	uint64_t cookie, offset;
	uint32_t len;
	const uint8_t *payload; /* WRITE: in the input buffer; NULL: zeros */
};

struct nbd_conn {
	ev_io io; /* first: the watcher's address is the connection's */
	struct nbd *srv;
	struct nbd_conn *next, *prev;
	uint64_t id;
	int fd;
	bool tcp;                  /* came in on nbd_listen (nbd_tls = require applies) */
	struct nbd_conn_tls tls;   /* phase NBD_TLS_PLAIN: no TLS (nbd_tls.h) */
	bool got_flags, no_zeroes, transmit;
	bool structured;           /* NBD_OPT_STRUCTURED_REPLY: every reply a chunk */
	struct nbd_export *meta;   /* base:allocation chosen for this export (SET_META_CONTEXT) */
	bool meta_alloc;           /* ... and valid for the export attached */
	ev_tstamp since, active; /* accepted; last socket event (nbd_limits.c) */
	bool closing; /* close once the output is sent (ABORT, DISC) */
	bool closed;  /* closed while remote gets were out: the last one frees it */
	struct nbd_export *exp;
	uint8_t *in; /* received: in[in_off..in_len) not yet taken */
	size_t in_off, in_len, in_cap, in_need;
	uint8_t *out; /* unsent: out[out_off..out_len) */
	size_t out_off, out_len, out_cap;

	/* the request that waits (busy) */
	bool busy;
	struct nbd_req req;
	int (*cont)(struct nbd_conn *c); /* runs when the wait ends: 0 answered, 1 waits, CONN_CLOSED */
	unsigned pending;                /* remote gets out, plus one while starting */
	int err;                         /* its first error, -errno */
	uint64_t cursor;                 /* WRITE: the next block to store; FLUSH: to look at */
	size_t reply_at;                 /* READ: its reply at out + reply_at (building) */
	unsigned reply_hdr;              /* READ: the bytes before its data (simple or chunk) */
	bool building;
	struct store_req put;            /* WRITE: the store's state of its puts (room waits) */
	uint8_t edge[2][NBD_PAGE];       /* head and tail pages of a partial write or read */
	struct nbd_slot *slots;
	size_t n_slots, slots_cap;
	uint8_t *scratch;                /* FLUSH: NBD_FLUSH_BATCH pages */
	struct nbd_conn *flush_next;     /* in the export's FLUSH queue */
	bool flush_queued;

	/* a long request yields the loop between slices (nbd_yield) */
	ev_timer yield;
	int (*yield_cont)(struct nbd_conn *c); /* resumes it: as cont */
	unsigned yield_extra;                  /* holds on pending beyond the yield's own */

	/* file operations being gathered for one job (nbd_file_op), not yet submitted */
	struct nbd_file_job *fj;

	/* a FLUSH's or FUA write's sync, off the loop (nbd_sync_start) */
	int (*sync_cont)(struct nbd_conn *c); /* runs when it is done: as cont */
	int sync_result;                      /* 0 or -EIO */
	struct nbd_conn *sync_next;           /* in the export's sync queue */
};

static const uint8_t nbd_zero_page[NBD_PAGE];


/* ---- helpers ------------------------------------------------------------------- */

static inline void nbd_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nbd_be32(uint8_t *p, uint32_t v)
{
	nbd_be16(p, (uint16_t)(v >> 16));
	nbd_be16(p + 2, (uint16_t)v);
}

static inline void nbd_be64(uint8_t *p, uint64_t v)
{
	nbd_be32(p, (uint32_t)(v >> 32));
	nbd_be32(p + 4, (uint32_t)v);
}

static inline uint16_t nbd_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t nbd_get32(const uint8_t *p)
{
	return (uint32_t)nbd_get16(p) << 16 | nbd_get16(p + 2);
}

static inline uint64_t nbd_get64(const uint8_t *p)
{
	return (uint64_t)nbd_get32(p) << 32 | nbd_get32(p + 4);
}

static inline bool bit_test(const uint64_t *map, uint64_t b)
{
	return map[b >> 6] >> (b & 63) & 1;
}

static inline void bit_set(uint64_t *map, uint64_t b)
{
	map[b >> 6] |= 1ull << (b & 63);
}

static inline void bit_clear(uint64_t *map, uint64_t b)
{
	map[b >> 6] &= ~(1ull << (b & 63));
}

/* @return the first set bit >= from and < end, or end. */
static inline uint64_t bit_next(const uint64_t *map, uint64_t from, uint64_t end)
{
	uint64_t w;

	while (from < end) {
		w = map[from >> 6] >> (from & 63);
		if (w)
			return from + (uint64_t)__builtin_ctzll(w) < end
				   ? from + (uint64_t)__builtin_ctzll(w)
				   : end;
		from = (from | 63) + 1;
	}
	return end;
}

static inline struct tmem_oid nbd_oid(const struct nbd_export *e, uint64_t b)
{
	struct tmem_oid oid = {{e->number, b >> NBD_OBJ_SHIFT, 0}};

	return oid;
}

static inline uint32_t nbd_index(uint64_t b)
{
	return (uint32_t)(b & (NBD_OBJ_PAGES - 1));
}

/* The file alone holds b (false) no more. */
static inline void nbd_backing_drop(struct nbd_export *e, uint64_t b)
{
	if (e->in_backing && bit_test(e->in_backing, b)) {
		bit_clear(e->in_backing, b);
		e->backing_pages--;
	}
}

/* Make *buf hold at least need bytes, keeping its contents. @return 0 or -ENOMEM. */
static inline int nbd_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap * 2 : need;
	uint8_t *p;

	if (need <= *cap)
		return 0;
	if (n < need)
		n = need;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

static inline uint32_t nbd_errno(int err)
{
	switch (err) {
	case -EINVAL:
		return NBD_EINVAL;
	case -ENOSPC:
		return NBD_ENOSPC;
	case -ENOMEM:
		return NBD_ENOMEM;
	default:
		return NBD_EIO;
	}
}


/* nbd.c: connections, listeners, the server */
void nbd_conn_free(struct nbd_conn *c);
void nbd_close(struct nbd_conn *c, const char *why);
int nbd_violation(struct nbd_conn *c, uint64_t *counter, const char *why);
void nbd_watch(struct nbd_conn *c);
int nbd_send(struct nbd_conn *c);
uint8_t *nbd_out(struct nbd_conn *c, size_t len);

/* nbd_handshake.c: the fixed newstyle handshake */
int nbd_negotiate(struct nbd_conn *c);

/* nbd_export.c: an export's pages, bitmaps, backing file and FLUSH */
int nbd_fetch(struct nbd_conn *c, uint64_t b, uint8_t *page, struct nbd_slot *s);
void nbd_slots_settle(struct nbd_conn *c);
int nbd_slots_reserve(struct nbd_conn *c, size_t pages);
int nbd_stored(struct nbd_conn *c, uint64_t b, const uint8_t *page, int rc);
int nbd_store(struct nbd_conn *c, uint64_t b, const uint8_t *page);
void nbd_discard(struct nbd_export *e, uint64_t b);
void nbd_discard_backing(struct nbd_conn *c, uint64_t fb, uint64_t lb);
void nbd_write_fua(struct nbd_conn *c, uint64_t first, uint64_t last);
int nbd_flush_run(struct nbd_conn *c);
void nbd_flush_release(struct nbd_export *e);
int nbd_do_flush(struct nbd_conn *c);
/*
 * fdatasync the backing file off the loop, then run cont(c) with
 * c->sync_result (0, or -EIO: the sync failed, or blocks are lost). One sync
 * at a time an export; others wait in order. Holds c->pending meanwhile.
 * @return 1 (waiting).
 */
int nbd_sync_start(struct nbd_conn *c, int (*cont)(struct nbd_conn *c));

/* nbd_io.c: the backing-file worker */
int nbd_io_start(struct nbd *n);
void nbd_io_submit(struct nbd *n, struct nbd_job *j);
void nbd_io_stop(struct nbd *n);
/*
 * Gather one operation on c's export file for the next job (nothing runs
 * yet). @return 0, or -ENOMEM.
 */
int nbd_file_op(struct nbd_conn *c, enum nbd_op_kind kind, uint64_t block, uint64_t count,
		uint8_t *page, struct nbd_slot *slot);
/*
 * Submit what was gathered, as one job: c->pending counts it until it is
 * back on the loop, where each READ's result goes to its slot, the writes'
 * outcomes are settled (nbd_file_settle), and the request goes on as after
 * a remote get (c->cont when pending reaches 0). @return 1 submitted, 0
 * nothing gathered.
 */
int nbd_file_submit(struct nbd_conn *c);
/* nbd_export.c: the loop's side of a finished job's writes and punches */
void nbd_file_settle(struct nbd_conn *c, const struct nbd_op *op, size_t n);
/* nbd_export.c: c->pending dropped by one; at 0 the request goes on (c->cont) */
void nbd_pending_drop(struct nbd_conn *c);
int nbd_export_init(struct nbd *n, struct nbd_export *e, unsigned number,
			   const struct config_export *ce, char *err, size_t errlen);
void nbd_export_fini(struct nbd *n, struct nbd_export *e);

/* nbd_transmission.c: requests and replies */
int nbd_process(struct nbd_conn *c);
int nbd_reply(struct nbd_conn *c, uint64_t cookie, int err);
const uint8_t *nbd_write_page(struct nbd_conn *c, uint64_t b, uint64_t first);
bool nbd_discards(const struct nbd_req *r);
void nbd_room_cb(void *arg, int result);
void nbd_conn_new(struct nbd *n, int fd, bool tcp);
/* A connection on fd, listed, its input buffer at least in_min bytes; NULL (fd closed, counted). */
struct nbd_conn *nbd_conn_make(struct nbd *n, int fd, bool tcp, size_t in_min);
/* The socket took output: send more, or run what waited for the output to drain. */
void nbd_writable(struct nbd_conn *c);
/*
 * Let the loop run other connections, then resume the request with cont
 * (after a 0 s timer: the loop's pending I/O runs first). extra: holds on
 * c->pending the request keeps meanwhile, dropped if it is closed. @return 1.
 */
int nbd_yield(struct nbd_conn *c, int (*cont)(struct nbd_conn *c), unsigned extra);
/* Closing: stop a pending yield and drop its holds. */
void nbd_yield_cancel(struct nbd_conn *c);

/* nbd_limits.c */
void nbd_limits_start(struct nbd *n, const struct config_limits *lim);
void nbd_limits_stop(struct nbd *n);
/* @return true when fd may become a connection; else it is closed and counted. */
bool nbd_limits_admit(struct nbd *n, int fd);
void nbd_limits_foreach_stat(const struct nbd *n,
			     void (*fn)(void *arg, const char *name, uint64_t value, const char *help),
			     void *arg);

#endif /* RAMSTER_NODE_NBD_INT_H */
