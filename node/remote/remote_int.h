/*
 * remote_int.h - private to the files of the node's remote side (remote.h):
 *
 *   remote.c      life cycle, the tier's remote ops, remote flushes, placing
 *                 a copy, peers coming and going, the counters;
 *   remotify.c    the remotify thread and the loop's half (frames to peers),
 *                 and the waits for room it ends;
 *   repatriate.c  gets of pages that live on peers;
 *   repair.c      re-replication after a holder died;
 *   drain.c       a draining holder hands pages back; the owner takes them;
 *   serve.c       serving peers from the foreign store, and ping;
 *   fragments.c   an erasure-coded page's fragments gathered (redundancy = ec K+M).
 *
 * Every sub-state below says who touches it: "loop only" (the event loop's
 * thread) or "shared, under X". The lock order is written once, in
 * docs/design.md ("Threads, locks and errors").
 */
#ifndef RAMSTER_NODE_REMOTE_INT_H
#define RAMSTER_NODE_REMOTE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <ev.h>

#include "common/util.h"
#include "node/remote/foreign.h"
#include "node/handoff.h"
#include "node/remote/remote.h"
#include "node/remote/seal.h"
#include "node/remote/stripe.h"

/* ---- tunables --------------------------------------------------------------- */

#define REMOTIFY_INFLIGHT 32      /* frames handed to the loop and not done */
#define REMOTIFY_IDLE_MS 5        /* how often an idle thread looks at the tier */
#define REMOTIFY_DOZE_LOOKS 20    /* idle looks with no change before the thread dozes */
#define REMOTIFY_DOZE_MS 1000     /* a dozing thread's look (a put wakes it sooner) */
#define REMOTIFY_BACKOFF_MS 50    /* pause after a frame found no peer */
#define GET_RETRY_MIN_MS 10       /* a get whose live holders all timed out asks again, */
#define GET_RETRY_MAX_MS 500      /* ... after a pause that doubles up to this */
#define STRIPE_TAKE_STRIPES 4     /* a persistent job takes frames for this many stripes (stripes) */
#define REMOTIFY_TRIES 3          /* peers tried for one page (plus one per extra copy) */
#define REPAIR_INFLIGHT 16        /* re-replications at once */
#define REPAIR_TICK_MS 10         /* the repair walk's pace */
#define REPAIR_WALK 4096          /* records looked at a tick, at most */
#define REPAIR_IDLE_MS 500        /* pause after a pass that could mend nothing */
#define DRAIN_INFLIGHT 128        /* pages handed back at once */
#define DRAIN_TICK_MS 10
#define DRAIN_RETRY_MS 200        /* pause after a page nobody could take */

/* ---- remotify (remotify.c) ----------------------------------------------------- */

struct rjob;

/* One page of a frame in flight. Loop only. */
struct rpage {
	struct rjob *job;
	unsigned i;
	uint32_t node;      /* the peer asked now */
	uint64_t tried;     /* peers that refused or failed */
	unsigned tries;
	unsigned want;      /* copies to place: replicas for a persistent page, else 1 */
	struct replica_set set; /* the copies acknowledged so far */
};

/*
 * ec_layout = stripes: up to K persistent pages of a frame coded together
 * (stripe.h), their M parity fragments made on the thread; placed slot by
 * slot on K+M distinct peers by the loop, the pages committed when all are.
 */
struct jstripe {
	struct rjob *job;
	unsigned pages;              /* data slots filled: 1..K, the rest empty */
	uint8_t page[ERASURE_MAX];   /* the job's page in each data slot */
	unsigned L;                  /* a parity fragment's bytes: the longest blob */
	uint8_t *parity;             /* M * L bytes, in the job's allocation */
	uint32_t version;            /* the newest of its pages' seal versions: its parity's */
	/* placing: loop only */
	uint64_t id;                 /* reserved in r->stripes: the holders' key */
	unsigned next;               /* the slot being placed */
	uint8_t node[ERASURE_MAX], epoch[ERASURE_MAX];
	uint64_t held, tried;        /* peers holding a slot; peers that failed this one */
	unsigned tries;
	uint32_t to;
};
#define RJOB_STRIPES_MAX (ZCACHE_OUT_MAX / 2) /* K >= 2 */

/* One zombie frame handed from the thread to the loop (through r->jobs). */
struct rjob {
	struct handoff_item item; /* first */
	struct remote *r;
	struct zcache_out out;
	struct rpage pg[ZCACHE_OUT_MAX]; /* a zbud frame has 2, a zdense block up to 128 */
	/* the pages sealed for their holders (seal.h), on the thread: one allocation */
	uint8_t *blobs;
	uint8_t *blob[ZCACHE_OUT_MAX];
	uint16_t blen[ZCACHE_OUT_MAX];
	/* redundancy = ec K+M: a persistent page's K+M fragments of flen bytes, one
	 * after the other (erasure.h), in the same allocation; NULL: whole copies */
	uint8_t *frags[ZCACHE_OUT_MAX];
	uint16_t flen[ZCACHE_OUT_MAX];
	uint32_t version[ZCACHE_OUT_MAX];
	/* ec_layout = stripes: page i is in stripe stripe_of[i] - 1 (0: none) */
	uint8_t stripe_of[ZCACHE_OUT_MAX];
	struct jstripe st[RJOB_STRIPES_MAX];
	unsigned nst;
	unsigned pending;   /* pages not finished */
	bool placed;        /* at least one page moved */
};

/* A wait for room (remote_wait_room). Loop only. */
struct room_wait {
	ev_timer timer;     /* first: the watcher leads the struct */
	struct room_wait *prev, *next;
	struct remote *r;
	void (*cb)(void *arg);
	void *arg;
	bool firing;        /* taken off the list by room_wake_all */
	bool cancelled;     /* cancelled while firing: skipped, freed there */
};

/* The remotify thread's control. Shared, under lock. */
struct remotify_ctl {
	pthread_t thread;
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* on CLOCK_MONOTONIC */
	bool stop;
	unsigned inflight;          /* frames queued or in flight */
	uint64_t backoff_until_ns;  /* no peer could take a page: pause */
	uint64_t frames_taken;
	uint64_t dozes, kicks;      /* times the thread dozed; puts that woke it */
	atomic_bool dozing;         /* read without th.lock by remote_note_put */
};

/* ---- remote flushes (remote.c) ---------------------------------------------------- */

/* A remote flush to send (and resend until acked or the holder is dead). */
struct rflush {
	struct handoff_item item; /* first */
	struct remote *r;
	uint32_t node;
	int op;             /* P_FLUSH, P_FLUSH_OBJECT, P_FLUSH_POOL */
	struct tmem_handle h;
	uint64_t horizon;   /* P_FLUSH: copies sealed up to this version (seal_horizon at issue) */
	unsigned attempts;
};

/*
 * The flushes owed to one holder while it is unreachable (remote.c): sent in
 * order when it comes back with the same incarnation, forgotten when its
 * copies are gone (restart, lease). Loop only. Longer than FLOG_MAX: the
 * holder's copies are given up (its lease ends early): better than a leak
 * nobody could find.
 */
#define FLOG_MAX (1u << 20)
struct flog {
	struct rflush *head, *tail;
	uint64_t n;
};

/* What this node knows of each peer as an owner of pages held here. Loop only. */
struct owner_lease {
	uint64_t last_ns;       /* its last put or get here (give back: least recent first) */
	uint64_t session;       /* the session its pages are held under (on_peer_up) */
	uint64_t down_since_ns; /* unreachable since (clock_now_ns); 0 when not */
	uint64_t dropped;       /* a session whose pages we dropped on our own; 0 none */
};

/* ---- repatriate (repatriate.c) ------------------------------------------------------ */

/* One get of a remote page. Loop only. */
struct rget {
	struct remote *r;
	struct tmem_handle h;
	bool pers, destructive;
	bool background; /* REMOTE_GET_BACKGROUND */
	bool compact;    /* REMOTE_GET_COMPACT: home below the compact limit */
	uint64_t pampd;
	struct replica_set set;      /* the holders when the get began */
	uint8_t order[REPLICA_MAX];  /* slots of the live holders to ask, nearest first */
	unsigned n_order, next;
	bool by_message;             /* a one-sided read failed: ask the same holder again */
	bool degraded;               /* a stripe page: its holder failed, made from K others */
	unsigned attempt_ms;         /* each asked within this */
	int failed;                  /* why a holder was passed over */
	bool transient;              /* a live holder failed in a way that passes (a timeout) */
	unsigned retries;            /* rounds asked again (get_retry) */
	ev_timer retry;              /* the wait before the next round */
	struct rget *rprev, *rnext;  /* on r->retrying while retry runs */
	void *page;
	remote_get_fn cb;
	void *arg;
	uint8_t plain[SEAL_PAGE_MAX]; /* the copy opened (seal_open) */
};

/* ---- re-replication (repair.c): loop only ------------------------------------------- */

struct remote_repair {
	ev_timer timer;
	bool on;
	unsigned rate;                     /* re-replications a second, at most */
	uint32_t cursor;
	unsigned inflight;
	uint64_t busy[REPAIR_INFLIGHT];    /* ids being mended */
	double tokens;
	bool progress;                     /* this pass mended something */
	bool blocked;                      /* no peer could take a copy: pause */
	uint64_t rereplicated, failed, stale, lost, passes, waits;
	uint64_t fragments;                /* of the rereplicated, fragments made again (ec) */
	uint64_t ec_started;               /* stripe slots whose making again began */
	uint64_t sbusy[REPAIR_INFLIGHT];   /* stripe slots being made again: id | (slot + 1) << 56 */
};

/* ---- compaction of stripes (compact.c): loop only ----------------------------------------- */

#define COMPACT_BATCH 64 /* pages read home a tick, at most (one batch in flight) */

struct remote_compact {
	ev_timer timer;
	bool on;                 /* compact_start ran (the node has stripes) */
	struct tmem_cursor cursor;
	unsigned n, inflight;
	struct {
		struct tmem_handle h;
		uint64_t pampd;
	} batch[COMPACT_BATCH];
	uint64_t asked, read, failed, passes, skipped_full;
};

/* ---- drain (drain.c): loop only ------------------------------------------------------- */

struct remote_drain {
	ev_timer timer;
	bool on;
	uint64_t pause_until_ns; /* a hand-back failed: wait before the next (clock_now_ns) */
	unsigned inflight;
	struct foreign_key busy[DRAIN_INFLIGHT];
	bool busy_used[DRAIN_INFLIGHT];
	uint64_t returned, orphans, failed, refused;
	uint64_t returns_served, returns_refused; /* the owner's side */
	uint64_t returns_home;                    /* of those served, taken into our tier */
	uint64_t returns_fragments;               /* fragments handed back: made again here */
	/* give back (an elastic donation shrinking): hand pages back until the store
	 * uses at most give_to bytes (UINT64_MAX: not giving back) */
	uint64_t give_to;
	uint64_t inflight_bytes;
	uint64_t given_pages, given_bytes, give_rounds;
	uint64_t given_dropped; /* ephemeral pages nobody had room for: dropped (a miss) */
	/* the pages to hand back, found by one walk and taken in order (a walk per
	 * answer would cost the whole store each time) */
	struct foreign_key *queue;
	size_t q_n, q_head, q_cap;
};

/* ---- the remote side ------------------------------------------------------------------ */

struct remote {
	/* set at creation (a reload changes some: see each) */
	struct ev_loop *loop;
	struct zcache *z;
	struct tmem *t;
	struct cluster *cl;
	struct foreign *fs;
	uint32_t self;
	unsigned timeout_ms;
	unsigned high, low;         /* shared, under th.lock: a reload changes them */
	bool rem_eph, rem_pers;     /* shared, under th.lock: a reload changes them */
	unsigned replicas;          /* copies of a persistent page (loop only) */
	struct erasure *ec;         /* redundancy = ec K+M: persistent pages as fragments; else NULL */
	/* codecs of pages placed under another K+M (a warm restart across a change), loop only */
	struct erasure *codecs[REPLICA_MAX][REPLICA_MAX];
	unsigned ec_read_extra;     /* holders asked beyond K, the first K to answer used (loop only) */
	bool donate_auto;           /* donate_mb = auto: the elastic controller sets the budget */
	bool rdma_read;             /* use the read keys holders name (RAMSTER_RDMA_READ=0: no) */
	struct seal *seal;          /* our pages' key, this incarnation's (seal.h) */
	int holder_lie;             /* test only (RAMSTER_TEST_HOLDER_LIE): serve.c lies as a holder */
	struct holder_lie *lie;     /* its state (holder_lie.c), loop only */

	struct remotify_ctl th;     /* shared, under th.lock */
	struct handoff jobs;        /* the thread's frames to the loop (its own leaf lock) */
	struct handoff flushes;     /* flushes queued under bucket locks (its own leaf lock) */

	struct room_wait *waiters;  /* loop only */
	struct rget *retrying;      /* loop only: gets waiting to ask their holders again */
	struct flog flog[65];       /* loop only: per holder id */
	struct owner_lease owner[65]; /* loop only: per owner id */
	bool closing;               /* loop only: remote_destroy, no new requests from callbacks */

	/* counters: loop only */
	uint64_t frames_done, frames_partial;
	uint64_t pages_sent, pages_placed, pages_failed, retries, no_target, stale_flushes;
	uint64_t gets, get_hits, get_lost, get_misses, get_unreachable, get_retries;
	uint64_t flushes_sent, flush_retries;
	atomic_uint_fast64_t flushes_dropped; /* also bumped by flush_queue on any thread */
	uint64_t served_puts, served_puts_refused, served_gets,
	    served_get_misses, served_flushes;
	uint64_t owner_drops;
	uint64_t pings, served_echoes;
	uint64_t copies_placed, partial_flushes, get_fallovers;
	uint64_t rdma_reads, rdma_read_fallbacks, rdma_chunks, rdma_chunk_errors;
	uint64_t flushes_logged, flushes_replayed, flushes_forgotten, flush_log_overflows;
	uint64_t unanswered_puts_flushed, copies_trimmed;
	uint64_t orphans_expired, orphans_reclaimed, orphan_reclaims;
	uint64_t seal_failures;      /* copies whose seal did not open (another page, version, bytes) */
	uint64_t holder_lies;        /* test only: answers serve.c made up */
	uint64_t ec_gets, ec_degraded_reads, ec_fragments_got, ec_fragments_placed;
	uint64_t ec_fragments_late;  /* answers (or failures) after the page was read: dropped */
	uint64_t ec_fallback_copies; /* pages placed as M+1 copies: fewer than K+M peers live */
	/* ec_layout = stripes (stripe_io.c) */
	struct stripe_table *stripes;  /* the stripes placed (ec_layout = stripes, or kept by a warm
					* restart); NULL: none */
	struct stripe_builder *sb;     /* the remotify thread's own; set: ec_layout = stripes */
	uint64_t ec_stripes_placed, ec_stripes_failed, ec_stripe_pages;
	uint64_t ec_stripe_reads, ec_stripe_degraded_reads;
	uint64_t ec_stripe_slots_repaired, ec_stripe_pages_lost, ec_stripe_returns;
	atomic_uint_fast64_t ec_stripes_flushed; /* bumped by stripe_op_kill on any thread */

	/* the objects of the last remote pages read (loop only): bring_home takes
	 * their other pages first (remote_hot_objects) */
#define REMOTE_HOT_MAX 64
	struct {
		uint32_t pool;
		struct tmem_oid oid;
	} hot[REMOTE_HOT_MAX];
	unsigned hot_n;

	struct remote_repair repair; /* loop only */
	struct remote_drain drain;   /* loop only */
	struct remote_compact compact; /* loop only */
};

/* ---- between the files (all loop only, unless said) ------------------------------------ */

/* remote.c */
void remote_page_init(Ramster__Peer__Page *pg, const struct tmem_handle *h, unsigned flags,
		      uint32_t checksum);
/* Queue a flush of h on node: any thread, any lock held (tmem's hooks). */
void remote_flush_queue(struct remote *r, uint32_t node, int op, const struct tmem_handle *h);
/* A flush owed to node (a warm restart's image): logged until node's next link. */
void remote_flog_add(struct remote *r, uint32_t node, int op, const struct tmem_handle *h,
		     uint64_t horizon);
/* Call fn for every flush owed: logged, or sent and not yet answered. */
void remote_flush_walk(struct remote *r, void (*fn)(void *ctx, const struct rflush *f), void *ctx);
/* Requests pending that are not flushes (puts, gets, returns...). */
size_t remote_pending_others(struct remote *r);
/* Send (or log, the holder being unreachable) a flush now: loop only. */
void remote_flush_now(struct remote *r, uint32_t node, int op, const struct tmem_handle *h);
/*
 * Send h's sealed page (blob, len bytes: seal.h; or a fragment of it) sealed as version
 * (its low 32 bits) to a peer not in *exclude (cluster_pick); a peer
 * that cannot be asked joins *exclude and the next is tried while *tries <
 * max. *to is the peer asked; cb(arg, ...) follows a request that went.
 * @return 0 sent, or -ENOSPC (no peer; counted as no_target).
 */
int remote_copy_send(struct remote *r, const struct tmem_handle *h, bool pers, uint32_t version,
		     const void *data, size_t len, uint64_t *exclude, unsigned *tries, unsigned max,
		     uint32_t *to, cluster_reply_fn cb, void *arg);

/* remotify.c */
void remotify_init(struct remote *r);  /* th's lock and cond, r->jobs (first thing made) */
int remotify_start(struct remote *r);  /* the thread; 0 or -errno (last thing made) */
void remotify_stop(struct remote *r);
void remotify_pause(struct remote *r); /* join the thread only (a warm restart's save) */  /* join it, put the frames queued back on the LRU */
void remotify_fini(struct remote *r);  /* end the waits for room; th's lock and cond */

/* repatriate.c: gets waiting to ask again end (-ECANCELED): remote_destroy */
void remote_gets_cancel(struct remote *r);
/* repatriate.c: the live holders of s, nearest first (heartbeat RTT) */
unsigned remote_holders_by_rtt(struct remote *r, const struct replica_set *s,
			       uint8_t order[REPLICA_MAX]);

/* repair.c */
void repair_init(struct remote *r, unsigned rate);
void repair_kick(struct remote *r);
void repair_stop(struct remote *r);

/* compact.c: the walk that reads the live pages of sparse stripes home (any node with
 * stripes: started by remote_start, stopped by remote_quiesce and remote_destroy) */
void compact_start(struct remote *r);
void compact_stop(struct remote *r);

/* drain.c */
void drain_init(struct remote *r);
void drain_stop(struct remote *r);
/* A draining peer hands us back a copy of our page (P_RETURN). */
void drain_return_serve(struct remote *r, uint32_t node, const Ramster__Peer__Msg *m,
			const uint8_t *payload, size_t plen);

/*
 * holder_lie.c: test only (RAMSTER_TEST_HOLDER_LIE). Linked into the test
 * daemon build/tests/ramsterd-lie alone, never into ramsterd (issue 21): here
 * the functions are weak, so in ramsterd their addresses are NULL and
 * remote_create refuses the variable.
 */
#define HOLDER_LIE_WEAK __attribute__((weak))
HOLDER_LIE_WEAK void holder_lie_put(struct remote *r, const struct foreign_key *k,
				    const uint8_t *blob, size_t len);
HOLDER_LIE_WEAK const void *holder_lie_get(struct remote *r, const struct foreign_key *k, const void *data,
			   size_t *len);
HOLDER_LIE_WEAK void holder_lie_free(struct remote *r);

/*
 * fragments.c: gather K fragments of the erasure-coded page h (its holders
 * s, s->ec_k set), each asked within attempt_ms, and open the sealed page
 * they make. cb gets 0 with the blob (blen bytes) and the page's compressed
 * bytes (plain, s->len), or -errno (transient: a holder failed only for now;
 * -EIO: fewer than K holders alive; -EILSEQ: no K of them opened). Called
 * exactly once, possibly before frag_fetch returns.
 */
/* The codec of s's K+M (r->ec, or one made for it). @return it, or NULL (memory; not coded). */
struct erasure *frag_codec(struct remote *r, const struct replica_set *s);
typedef void (*frag_fetch_fn)(void *arg, int result, bool transient, const uint8_t *blob,
			      size_t blen, const uint8_t *plain, size_t plen);
void frag_fetch(struct remote *r, const struct tmem_handle *h, bool pers,
		const struct replica_set *s, unsigned attempt_ms, frag_fetch_fn cb, void *arg);

/*
 * stripe_io.c: stripes of K pages (ec_layout = stripes). STRIPE_POOL is the
 * pool of the holders' key of a stripe's fragments (stripe_key).
 */
#define STRIPE_POOL (UINT32_MAX - 1)
void stripe_key(uint64_t id, unsigned slot, struct tmem_handle *h);
int stripe_op_holder(void *arg, uint64_t id, unsigned slot, struct replica_set *s);
void stripe_op_kill(void *arg, uint64_t id, unsigned slot);
/*
 * Make slot want of stripe id again from K of its other fragments (asked of
 * every live holder but those in avoid, at once, each within attempt_ms).
 * verify (may be NULL) says whether made bytes are right (0: yes): a set of
 * K that makes bytes it refuses is passed over for another. cb gets 0 with
 * the bytes (a data slot's blob, a parity fragment), or -errno (transient:
 * a holder failed only for now; -EILSEQ: no set was right). Exactly once,
 * maybe before stripe_remake returns.
 */
typedef int (*stripe_verify_fn)(void *arg, const uint8_t *bytes, size_t len);
typedef void (*stripe_remake_fn)(void *arg, int result, bool transient, const uint8_t *bytes,
				 size_t len);
void stripe_remake(struct remote *r, uint64_t id, unsigned want, uint64_t avoid,
		   unsigned attempt_ms, stripe_verify_fn verify, stripe_remake_fn cb, void *arg);
/* A draining holder hands back fragment key of one of our stripes (P_RETURN): made again
 * from K others and placed elsewhere, then answered (0: placed; -ENOENT: not ours). */
void stripe_return_serve(struct remote *r, uint32_t node, uint64_t seq,
			 const struct tmem_handle *key);
/* The repair walk's turn for stripes: start at most budget slots. @return some are degraded. */
bool stripe_repair_tick(struct remote *r, unsigned budget);

/* serve.c */
extern const struct arena_hooks serve_arena_hooks;
void serve_request(void *arg, uint32_t node, uint64_t session, const Ramster__Peer__Msg *m,
		   const uint8_t *payload, size_t plen);
/*
 * The foreign store is full: drop the pages of the owner unreachable the
 * longest (not except), telling it by heartbeat. @return pages dropped, 0
 * when no owner is unreachable.
 */
uint64_t serve_reclaim_orphans(struct remote *r, uint32_t except);
/* Register owner's chunks on its (new) link. */
void serve_register_chunks(struct remote *r, uint32_t owner);

#endif /* RAMSTER_NODE_REMOTE_INT_H */
