/*
 * arena.c - chunks carved into size-classed blocks (arena.h).
 *
 * A block of class k is (k + 1) * ARENA_ALIGN (16) bytes. A freed block goes on its class's
 * free list (linked through its first word) and is the next one that class
 * hands out; new blocks are cut from the newest chunk, and a chunk's tail too
 * short for a block is left unused. Chunks are freed only with the arena: the
 * peak of an owner's pages stays reserved until its session ends, which is
 * when the foreign store drops all of them at once.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "node/remote/arena.h"

#define ARENA_CLASSES (ARENA_BLOCK_MAX / ARENA_ALIGN)

struct arena_free {
	struct arena_free *next;
};

struct arena {
	struct arena_hooks hooks;
	void *arg;
	uint32_t tag;
	struct arena_free *free[ARENA_CLASSES];
	void **chunk;       /* chunks made, oldest first */
	size_t n_chunks, cap;
	size_t used;        /* bytes cut from the newest chunk */
	uint64_t blocks;
};

static size_t arena_class(size_t len)
{
	return (len + ARENA_ALIGN - 1) / ARENA_ALIGN - 1;
}

struct arena *arena_create(const struct arena_hooks *hooks, void *arg, uint32_t tag)
{
	struct arena *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	if (hooks)
		a->hooks = *hooks;
	a->arg = arg;
	a->tag = tag;
	a->used = ARENA_CHUNK; /* no chunk yet: the first alloc makes one */
	return a;
}

void arena_destroy(struct arena *a)
{
	size_t i;

	if (!a)
		return;
	for (i = 0; i < a->n_chunks; i++) {
		if (a->hooks.chunk_del)
			a->hooks.chunk_del(a->arg, a->tag, a->chunk[i], ARENA_CHUNK);
		free(a->chunk[i]);
	}
	free(a->chunk);
	free(a);
}

/* A new chunk to cut from. @return 0, or -ENOMEM. */
static int arena_grow(struct arena *a)
{
	void *c;

	if (a->n_chunks == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 8;
		void **n = realloc(a->chunk, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->chunk = n;
		a->cap = cap;
	}
	if (posix_memalign(&c, 4096, ARENA_CHUNK))
		return -ENOMEM;
	/* registered for remote read below: no old heap bytes may be readable */
	memset(c, 0, ARENA_CHUNK);
	a->chunk[a->n_chunks++] = c;
	a->used = 0;
	if (a->hooks.chunk_add)
		a->hooks.chunk_add(a->arg, a->tag, c, ARENA_CHUNK);
	return 0;
}

void *arena_alloc(struct arena *a, size_t len)
{
	size_t k, size;
	void *p;

	if (!a || len < 1 || len > ARENA_BLOCK_MAX)
		return NULL;
	k = arena_class(len);
	size = (k + 1) * ARENA_ALIGN;
	if (a->free[k]) {
		p = a->free[k];
		a->free[k] = a->free[k]->next;
	} else {
		if (a->used + size > ARENA_CHUNK && arena_grow(a))
			return NULL;
		p = (char *)a->chunk[a->n_chunks - 1] + a->used;
		a->used += size;
	}
	a->blocks++;
	return p;
}

void arena_free(struct arena *a, void *p, size_t len)
{
	struct arena_free *f = p;
	size_t k;

	if (!a || !p || len < 1 || len > ARENA_BLOCK_MAX)
		return;
	k = arena_class(len);
	/* the owner may still read the chunk: a freed page's bytes go with it */
	memset((char *)p + sizeof(*f), 0, (k + 1) * ARENA_ALIGN - sizeof(*f));
	f->next = a->free[k];
	a->free[k] = f;
	a->blocks--;
}

void arena_foreach_chunk(const struct arena *a, void (*fn)(void *arg, void *base, size_t len),
			 void *arg)
{
	size_t i;

	for (i = 0; a && i < a->n_chunks; i++)
		fn(arg, a->chunk[i], ARENA_CHUNK);
}

uint64_t arena_blocks(const struct arena *a)
{
	return a ? a->blocks : 0;
}

uint64_t arena_chunks(const struct arena *a)
{
	return a ? a->n_chunks : 0;
}
