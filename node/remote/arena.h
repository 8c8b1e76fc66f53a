/*
 * arena.h - the memory of one owner's pages in the foreign store: chunks of
 * ARENA_CHUNK bytes, carved into blocks of 8-byte size classes (8, not 64:
 * a page's record and bytes waste 4 bytes on average, not 32, which is 4 %
 * of a real-memory page of ~850 bytes, and under ec 4+2 a fragment is ~500
 * bytes; the record's pointers need 8, RDMA reads need no alignment).
 *
 * 256 KiB chunks, not 1 MiB: each owner's newest chunk is partly cut, and
 * with an RDMA link it is registered (pinned) whole; a holder keeps one such
 * tail for every owner, so the tail is what a small holder wastes. More
 * chunks mean more memory regions on an RDMA device (4096 a GiB held), far
 * below a device's limit, and a finer give back (arena_evacuate).
 *
 * Chunks are mapped on their own; an evacuating chunk is unmapped when its
 * last block goes (arena_evacuate: an elastic node giving memory back).
 *
 * Why not malloc: a peer on an RDMA link reads its pages straight from this
 * node's memory (one-sided RDMA READ), which needs the memory registered with
 * the link, once, in large pieces. An arena's chunks are that memory: each is
 * announced (chunk_add) when made and withdrawn (chunk_del) before it is
 * freed, so whoever registered it can deregister it first.
 *
 * Used only from the event loop's thread: no locking.
 */
#ifndef RAMSTER_ARENA_H
#define RAMSTER_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARENA_CHUNK (1u << 18)
#define ARENA_ALIGN 8u
#define ARENA_BLOCK_MAX 8192u /* the largest block */

struct arena_hooks {
	/* A chunk was made / is about to be freed. arg and tag as given to arena_create. */
	void (*chunk_add)(void *arg, uint32_t tag, void *base, size_t len);
	void (*chunk_del)(void *arg, uint32_t tag, void *base, size_t len);
};

struct arena;

/* @return an empty arena (no chunk yet), or NULL. hooks may be NULL. */
struct arena *arena_create(const struct arena_hooks *hooks, void *arg, uint32_t tag);

/* Free every chunk (chunk_del each first) and the arena. NULL ok. */
void arena_destroy(struct arena *a);

/* @return a block of at least len (1..ARENA_BLOCK_MAX) bytes, 8-byte aligned, or NULL. */
void *arena_alloc(struct arena *a, size_t len);

/* Give back a block of arena_alloc(len) (the same len). */
void arena_free(struct arena *a, void *p, size_t len);

/*
 * Give memory back: mark chunks, the emptiest first, until their live blocks
 * add up to bytes (or every chunk is marked). A marked chunk takes no new
 * block and is unmapped (chunk_del first) when its last block is freed: the
 * caller frees the blocks arena_evacuating names (by moving them elsewhere).
 * @return the live bytes of the chunks marked.
 */
size_t arena_evacuate(struct arena *a, size_t bytes);
/* Whether block p lies in an evacuating chunk. */
bool arena_evacuating(const struct arena *a, const void *p);
/* Chunks evacuating now, and chunks unmapped so far (evacuated or destroyed). */
size_t arena_evac_chunks(const struct arena *a);
size_t arena_evac_live(const struct arena *a); /* live bytes still in them */
uint64_t arena_chunks_freed(const struct arena *a);

/* Call fn for every chunk (to register them all on a new link). */
void arena_foreach_chunk(const struct arena *a, void (*fn)(void *arg, void *base, size_t len),
			 void *arg);

/* Blocks in use, and chunks held. */
uint64_t arena_blocks(const struct arena *a);
uint64_t arena_chunks(const struct arena *a);

#endif /* RAMSTER_ARENA_H */
