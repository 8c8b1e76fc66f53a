/*
 * foreign.h - the foreign store: compressed pages this node holds for its
 * peers, keyed by (owner node, owner incarnation, pool, oid, index), kept as
 * received, within the donate_mb budget. Never remotified further.
 *
 * Used only from the event loop's thread: no locking.
 */
#ifndef RAMSTER_FOREIGN_H
#define RAMSTER_FOREIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct foreign_key {
	uint32_t owner;         /* the owner's node id */
	uint64_t incarnation;   /* the owner's incarnation */
	uint32_t pool;          /* the owner's node-wide pool id */
	uint64_t oid[3];
	uint32_t index;
};

struct foreign;
struct arena_hooks;

/* @return a store of at most budget bytes (data plus per-page overhead), or NULL. */
struct foreign *foreign_create(uint64_t budget);
void foreign_destroy(struct foreign *f); /* NULL ok */

/* Change the budget (a reload's donate_mb). Pages already held stay; below
 * the new budget they only stop new ones coming in. */
void foreign_set_budget(struct foreign *f, uint64_t budget);

/*
 * Keep len (1..4096) bytes of data with its checksum for key, replacing any
 * page already there. @return 0; -ENOSPC when the budget cannot take it (the
 * old page, if any, is then removed too: put-put-get); -EINVAL on a bad len,
 * owner or NULL data; -ENOMEM (the old page is removed then too).
 */
int foreign_put(struct foreign *f, const struct foreign_key *k, bool pers, const void *data,
		size_t len, uint32_t checksum);

/* foreign_put, and *stored (may be NULL) where the bytes now are (until the page goes). */
int foreign_put_at(struct foreign *f, const struct foreign_key *k, bool pers, const void *data,
		   size_t len, uint32_t checksum, const void **stored);

/*
 * Each owner's pages live in an arena of large chunks (node/remote/arena.h); hooks
 * hear of each chunk made and freed (tag: the owner), so that a link can
 * register them for one-sided reads. Set before the first put.
 */
void foreign_set_hooks(struct foreign *f, const struct arena_hooks *hooks, void *arg);

/* Call fn for every chunk of owner's arena. */
void foreign_foreach_chunk(const struct foreign *f, uint32_t owner,
			   void (*fn)(void *arg, void *base, size_t len), void *arg);

/*
 * Find key. @return 0 with *data (valid until the next call that changes the
 * store), *len, *checksum set; -ENOENT; -EINVAL for an owner outside 1..64.
 */
int foreign_get(struct foreign *f, const struct foreign_key *k, const void **data, size_t *len,
		uint32_t *checksum);

/* foreign_get without counting it (the store's own walks). */
int foreign_peek(struct foreign *f, const struct foreign_key *k, const void **data, size_t *len,
		 uint32_t *checksum, bool *pers);

/* @return 0 removed, -ENOENT. */
int foreign_flush(struct foreign *f, const struct foreign_key *k);

/*
 * Remove key's page only if it was sealed at or before version horizon (its
 * first 8 bytes, little-endian: seal.h); horizon 0 removes any. A flush that
 * took the long way (retried, or owed while the holder was unreachable) must
 * not remove a copy the owner put after issuing it. @return 0 removed,
 * -ENOENT, -ESTALE kept (sealed after horizon; counted).
 */
int foreign_flush_upto(struct foreign *f, const struct foreign_key *k, uint64_t horizon);

/* Remove every page of (owner, incarnation, pool, oid). @return pages removed. */
uint64_t foreign_flush_object(struct foreign *f, const struct foreign_key *k);

/* Remove every page of (owner, incarnation, pool). @return pages removed. */
uint64_t foreign_flush_pool(struct foreign *f, uint32_t owner, uint64_t incarnation, uint32_t pool);

/*
 * Remove every page of owner whose incarnation is not keep (keep 0: every
 * page of owner). @return pages removed.
 */
uint64_t foreign_drop_owner(struct foreign *f, uint32_t owner, uint64_t keep);

/*
 * Call fn for every page (owner by owner) until it returns true; fn must not
 * change the store. @return true if fn stopped the walk.
 */
bool foreign_walk(struct foreign *f,
		  bool (*fn)(void *arg, const struct foreign_key *k, bool pers, const void *data,
			     size_t len, uint32_t checksum),
		  void *arg);

/* The same for one owner's pages only. */
bool foreign_walk_owner(struct foreign *f, uint32_t owner,
			bool (*fn)(void *arg, const struct foreign_key *k, bool pers,
				   const void *data, size_t len, uint32_t checksum),
			void *arg);

/*
 * Give memory back (an elastic node shrinking): mark owner's emptiest arena
 * chunks, up to bytes of live pages, to be unmapped once their pages are
 * gone (arena_evacuate). @return the live bytes marked.
 */
uint64_t foreign_evacuate(struct foreign *f, uint32_t owner, uint64_t bytes);
/* Walk only owner's pages in evacuating chunks (those to move). */
bool foreign_walk_evacuating(struct foreign *f, uint32_t owner,
			     bool (*fn)(void *arg, const struct foreign_key *k, bool pers,
					const void *data, size_t len, uint32_t checksum),
			     void *arg);
/* Chunks evacuating now, over every owner; *live: the bytes still in them. */
size_t foreign_evac_chunks(const struct foreign *f, uint64_t *live);

struct foreign_stats {
	uint64_t pages;          /* pages held now */
	uint64_t bytes;          /* compressed bytes held */
	uint64_t used;           /* bytes charged to the budget (data + overhead) */
	uint64_t ram;            /* RAM it holds: arena chunks (data, page records, slack),
				  * hash tables, object and pool records */
	uint64_t budget;
	uint64_t puts, gets, hits, flushes, refused_full, dropped;
	uint64_t flushes_newer; /* flushes that found a copy sealed after them: kept */
};
void foreign_get_stats(const struct foreign *f, struct foreign_stats *s);

/* Pages held for one owner (any incarnation). */
uint64_t foreign_owner_pages(const struct foreign *f, uint32_t owner);

#endif /* RAMSTER_FOREIGN_H */
