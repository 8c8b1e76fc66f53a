/*
 * stripe.h - stripes of K pages: the owner's stripe table and the builder
 * that forms them (docs/erasure.md, "Next: stripes of K pages").
 *
 * A stripe is K data slots, each one whole sealed page (or empty: a short
 * stripe's slot, known zeros with no holder), and M parity fragments of L
 * bytes, L the longest blob; the blobs are padded with zeros to L for the
 * arithmetic only. A healthy read asks one holder for one blob; any K of the
 * K + M fragments give back any other. A page's death clears its live bit
 * and sends nothing (the parity still needs its bytes): its bytes are dead
 * until the whole stripe is flushed, when no live page is left.
 *
 * The table is thread-safe (one mutex). Lock order: a tmem bucket lock, then
 * this one. The builder is not: it is the remotify thread's own.
 */
#ifndef RAMSTER_NODE_STRIPE_H
#define RAMSTER_NODE_STRIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/remote/erasure.h"

#define STRIPE_DEGRADED 1u /* a slot's holder died and the slot was not moved yet */

/*
 * A stripe's record: slot j < k is data slot j (page j's blob, whole), slot
 * k + i is parity fragment i (L bytes).
 */
struct stripe_rec {
	unsigned k, m;		    /* the code: 2 <= k, 1 <= m, k + m <= ERASURE_MAX */
	uint8_t node[ERASURE_MAX];  /* slot's holder, 1..64, distinct; 0: an empty data slot */
	uint8_t epoch[ERASURE_MAX]; /* the owner's epoch for that node when placed (mod 256) */
	unsigned lens[ERASURE_MAX]; /* data slot j's blob, 1..ERASURE_STRIPE_FRAG_MAX; 0: empty */
	unsigned L;		    /* a parity fragment's bytes: the largest of lens */
	uint32_t version[ERASURE_MAX]; /* slot's seal version (seal.h; its low 32 bits) */
	uint32_t live;		    /* bit j: data slot j holds a live page */
	uint32_t gone;		    /* bit s: slot s's holder died, not moved yet (add ignores) */
	unsigned state;		    /* STRIPE_* (add ignores it) */
};

/* ---- the table ------------------------------------------------------------- */

struct stripe_table;

/*
 * A stripe id: bits 0..31 the stripe number (the entry's index + 1, never 0),
 * bits 32..55 the entry's generation, which grows on every add and remove, so
 * that an id kept past stripe_remove is stale (-ENOENT) even once the entry
 * is reused. Bits 56..63 are 0: room for a slot number beside it in a page's
 * 8-byte record. A number is reused, an id is not: the fragments' key on the
 * holders should name the whole id, lest a new stripe meet an old one's
 * fragments whose flush is still on its way.
 */
static inline uint32_t stripe_number(uint64_t id)
{
	return (uint32_t)id;
}

/* @return an empty table, or NULL (out of memory). */
struct stripe_table *stripe_table_create(void);
void stripe_table_destroy(struct stripe_table *t); /* NULL ok */

/*
 * Record the stripe r (its gone and state are ignored: a new stripe is
 * healthy). r->live names the data slots with a live page: at least one,
 * each a non-empty slot. @return 0 with *id set (never 0); -EINVAL (a bad
 * code, length, L not the largest length, a holder out of 1..64 or twice, a
 * holder for an empty slot or none for a full one, a bad live mask); -ENOMEM.
 */
int stripe_add(struct stripe_table *t, const struct stripe_rec *r, uint64_t *id);

/*
 * Take an id for a stripe not yet placed (its holders' key: the fragments
 * are placed under it before the stripe is known). A reserved id reads as
 * -ENOENT until stripe_fill; stripe_remove frees it. @return 0, -ENOMEM.
 */
int stripe_reserve(struct stripe_table *t, uint64_t *id);

/* Record r (as stripe_add checks it) under reserved id. @return 0, -ENOENT, -EINVAL. */
int stripe_fill(struct stripe_table *t, uint64_t id, const struct stripe_rec *r);

/*
 * Record r under id as it was (a warm restart's image), its gone slots with
 * it: the entry must be free. @return 0, -EEXIST (taken), -EINVAL, -ENOMEM.
 */
int stripe_restore(struct stripe_table *t, uint64_t id, const struct stripe_rec *r);

/* Copy stripe id's record into out. @return 0, -ENOENT (no such id, or stale). */
int stripe_read(struct stripe_table *t, uint64_t id, struct stripe_rec *out);

/*
 * Data slot slot's page died (flushed, or overwritten elsewhere): its live bit
 * is cleared and its bytes counted dead; nothing is sent. *empty (may be NULL)
 * is then true when no live page is left: the caller flushes the K + M
 * fragments and calls stripe_remove. @return 0, -ENOENT (stale id), -EINVAL
 * (slot is not a live data slot).
 */
int stripe_kill(struct stripe_table *t, uint64_t id, unsigned slot, bool *empty);

/* Forget stripe id (its fragments flushed, or lost). @return 0, -ENOENT. */
int stripe_remove(struct stripe_table *t, uint64_t id);

/*
 * Slot slot's fragment was made again on node to (the owner's epoch for it):
 * the slot's gone bit is cleared, and the stripe's STRIPE_DEGRADED with the
 * last of them. The id stays. A dead page's slot moves too (the parity needs
 * its bytes). @return 0; -ENOENT (stale id); -EEXIST (to holds a slot of this
 * stripe already, slot's own included); -EINVAL (slot beyond k + m, or an
 * empty data slot; to out of 1..64).
 */
int stripe_move(struct stripe_table *t, uint64_t id, unsigned slot, unsigned to, unsigned epoch);

/*
 * Node died: each slot it holds is marked gone, and its stripe
 * STRIPE_DEGRADED. A stripe with more than m slots gone has lost its pages
 * (popcount(gone) > m: the caller counts and drops it). @return the stripes
 * in which a slot was newly marked (a second call for the same node: 0).
 */
unsigned stripe_node_gone(struct stripe_table *t, unsigned node);

/*
 * Call fn with each stripe's id and a copy of its record, made under the
 * lock; fn runs without it (it may call the table; the stripe may change or
 * go meanwhile: use the id). A stripe added during the walk may be missed.
 * @return 0 once every stripe was visited, or the first nonzero fn returned
 * (the walk stops there).
 */
int stripe_walk(struct stripe_table *t,
		int (*fn)(void *arg, uint64_t id, const struct stripe_rec *r), void *arg);

struct stripe_stats {
	uint64_t stripes;      /* in the table */
	uint64_t live_pages;   /* data slots with a live page */
	uint64_t dead_pages;   /* data slots whose page died, bytes kept for the parity */
	uint64_t dead_bytes;   /* those slots' blob bytes */
	uint64_t parity_bytes; /* m x L, summed over the stripes */
	uint64_t degraded;     /* stripes STRIPE_DEGRADED */
	uint64_t degraded_pages; /* their live pages */
	uint64_t bytes;	       /* RAM the table takes */
};
void stripe_stats(struct stripe_table *t, struct stripe_stats *s);

/*
 * Make data or parity slot want (< k + m) of the stripe r again from K of its
 * fragments: frag[i] is slot idx[i]'s (distinct, < k + m), a data slot's of
 * its own lens[] bytes (padded to L here, on the stack), a parity one's of L;
 * an empty data slot's may be NULL (all zeros). e is r's code (k and m
 * equal). out has room for r->L bytes; *out_len is set to lens[want] for a
 * data slot (the padding trimmed; 0 for an empty one), L for a parity one.
 * @return 0, -EINVAL (a bad index, record, code, or a NULL fragment for a
 * slot that is not an empty one).
 */
int stripe_rebuild_slot(const struct erasure *e, const struct stripe_rec *r, const uint8_t *idx,
			const uint8_t *const *frag, unsigned want, uint8_t *out, size_t *out_len);

/* ---- the builder ----------------------------------------------------------- */

struct stripe_builder;

/* A closed stripe's fragments (stripe_builder_close). */
struct stripe_frags {
	unsigned k, m;
	unsigned pages;			    /* data slots 0..pages-1 filled, the rest empty */
	unsigned L;			    /* each fragment's bytes: the longest blob */
	unsigned lens[ERASURE_MAX];	    /* data slot j's blob (j < k); 0: empty */
	const uint8_t *data[ERASURE_MAX];   /* j < k: L bytes, the blob then zeros */
	const uint8_t *parity[ERASURE_MAX]; /* i < m: L bytes */
};

/*
 * @return a builder for e's code (e outlives it), its K + M buffers of
 * ERASURE_STRIPE_FRAG_MAX allocated once; NULL (out of memory, no e).
 */
struct stripe_builder *stripe_builder_create(const struct erasure *e);
void stripe_builder_destroy(struct stripe_builder *b); /* NULL ok */

/*
 * Copy blob (len 1..ERASURE_STRIPE_FRAG_MAX bytes: a sealed page) into the
 * open stripe's next data slot. @return that slot (0..K-1); -EINVAL (a bad
 * len); -EBUSY (K slots taken: close the stripe first).
 */
int stripe_builder_add(struct stripe_builder *b, const void *blob, size_t len);

/* The blobs in the open stripe (0..K). */
unsigned stripe_builder_count(const struct stripe_builder *b);

/*
 * Close the open stripe (1..K blobs; the slots not filled are empty) and
 * encode its parity over the blobs padded with zeros to L. out's pointers are
 * the builder's buffers, valid until the next add or reset; the next add
 * opens a new stripe. @return 0, -ENOENT (no blob in the stripe).
 */
int stripe_builder_close(struct stripe_builder *b, struct stripe_frags *out);

/* Drop the open stripe's blobs (an add or close that came to nothing). */
void stripe_builder_reset(struct stripe_builder *b);

#endif /* RAMSTER_NODE_STRIPE_H */
