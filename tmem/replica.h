/*
 * replica.h - the replica table: where the copies of a page kept on several
 * peers are.
 *
 * A remote descriptor (pampd) has room for one holder. A page with more
 * copies points instead at a record here: its handle, its holders (node and
 * the owner's epoch for that node when the copy was placed), the compressed
 * length and checksum. A record is named by an id (index and generation), so
 * a stale id never reaches a reused record: every change of the holders
 * gives the record a new id.
 *
 * Thread-safe (one mutex). Lock order: a tmem bucket lock, then this one.
 */
#ifndef RAMSTER_REPLICA_H
#define RAMSTER_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tmem/tmem.h"

#define REPLICA_MAX 8        /* holders a page may have: copies or fragments */
#define REPLICA_COPIES_MAX 4 /* full copies (replicas = N) */

/* The holders of a page. */
struct replica_set {
	unsigned n;                  /* 1..REPLICA_MAX */
	uint8_t node[REPLICA_MAX];   /* 1..64 */
	uint8_t epoch[REPLICA_MAX];  /* the owner's epoch for node (mod 256) */
	unsigned len;                /* compressed bytes, 1..4096 */
	uint32_t checksum;           /* adler32 of them */
	unsigned state;              /* REPLICA_* (read, walk; add ignores it) */
	/* 0: n full copies. Else the page is erasure-coded (node/remote/erasure.h):
	 * slot i holds fragment i, the first ec_k the data, the others parity;
	 * any ec_k of them give the sealed page back (2 <= ec_k < n) */
	unsigned ec_k;
	/* nonzero: the page is data slot `slot` of this stripe (ec_layout = stripes,
	 * node/remote/stripe.h), held whole by node[0] (n = 1) under the stripe's
	 * key; checksum is that slot's seal version. Never in the replica table. */
	uint64_t stripe;
	unsigned slot;
	/* where a holder on an rdma link keeps the bytes, for one-sided reads
	 * (raddr 0: unknown, ask with a message): its address and key, and the
	 * owner's generation of the link that named them */
	uint64_t raddr[REPLICA_MAX];
	uint32_t rkey[REPLICA_MAX];
	uint32_t lgen[REPLICA_MAX];
};

#define REPLICA_DEGRADED 1u /* a holder died: below its replica target */
#define REPLICA_LOST 2u     /* every holder died (counted and logged once) */

struct replica_table;

/* @return an empty table, or NULL (out of memory). */
struct replica_table *replica_create(void);
void replica_destroy(struct replica_table *t); /* NULL ok */

/*
 * Record the holders s of the page h (persistent or not).
 * @return 0 with *id set (never 0; low 2 bits clear, bit 29 set, so that it
 * can travel inside a descriptor); -EINVAL for a bad set; -ENOMEM.
 */
int replica_add(struct replica_table *t, const struct tmem_handle *h, bool pers,
		const struct replica_set *s, uint64_t *id);

/* Copy what record id says (h may be NULL). @return 0, -ENOENT (no such id, or stale). */
int replica_read(struct replica_table *t, uint64_t id, struct replica_set *s,
		 struct tmem_handle *h);

/* Forget record id. @return 0, -ENOENT. */
int replica_remove(struct replica_table *t, uint64_t id);

/*
 * The copy on node from is now on node to (epoch; its read address unknown):
 * the record gets a new id.
 * @return 0 with *newid set; -ENOENT (stale id, or from is not a holder);
 * -EEXIST (to is one already); -EINVAL.
 */
int replica_move(struct replica_table *t, uint64_t id, unsigned from, unsigned to, unsigned epoch,
		 uint64_t *newid);

/*
 * Node died: every record of two or more copies it holds one of is marked
 * REPLICA_DEGRADED (those not so already, nor lost). A record of one copy
 * (there for its read key) is left alone. @return records newly marked.
 */
uint64_t replica_mark_holder(struct replica_table *t, unsigned node);

/* Set record id's state (REPLICA_* bits). @return 0, -ENOENT. */
int replica_set_state(struct replica_table *t, uint64_t id, unsigned state);

/* Is id the form replica_add returns (not a check that it is live)? */
bool replica_is_id(uint64_t id);

/*
 * Walk at most max records from *cursor on (0 to start), calling fn with
 * each one's id, handle, persistence and set, without the table lock held
 * (the record may change meanwhile: use the id). *cursor is where to go on,
 * 0 once the walk has passed the end of the table. @return records visited.
 */
size_t replica_walk(struct replica_table *t, uint32_t *cursor, size_t max,
		    void (*fn)(void *arg, uint64_t id, const struct tmem_handle *h, bool pers,
			       const struct replica_set *s),
		    void *arg);

struct replica_usage {
	uint64_t records;   /* live records */
	uint64_t keyed;     /* of those, with one-sided read keys (in the side table) */
	uint64_t degraded;  /* of those, REPLICA_DEGRADED */
	uint64_t lost;      /* of those, REPLICA_LOST */
	uint64_t bytes;     /* RAM the table takes */
};
void replica_usage(struct replica_table *t, struct replica_usage *u);

#endif /* RAMSTER_REPLICA_H */
