/*
 * arena.c - chunks carved into size-classed blocks (arena.h).
 *
 * A block of class k is (k + 1) * ARENA_ALIGN (8) bytes. A freed block goes on its class's
 * free list (linked through its first word) and is the next one that class
 * hands out; new blocks are cut from the newest chunk, and a chunk's tail too
 * short for a block is left unused.
 *
 * Chunks are mapped on their own (mmap, aligned to ARENA_CHUNK) and counted:
 * each knows the bytes of its live blocks. An evacuating chunk (arena_evacuate:
 * an elastic node giving memory back) takes no new block - its free blocks
 * leave the free lists, a block freed in it goes on none - and is unmapped
 * when its last block goes: giving back pages then gives back memory, which
 * freeing scattered blocks alone never would. An arena with no evacuating
 * chunk keeps its chunks until it is destroyed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "node/remote/arena.h"

#define ARENA_CLASSES (ARENA_BLOCK_MAX / ARENA_ALIGN)

struct arena_free {
	struct arena_free *next;
};

struct arena_chunk {
	char *base;
	size_t live; /* bytes of live blocks */
	bool evac;
};

struct arena {
	struct arena_hooks hooks;
	void *arg;
	uint32_t tag;
	struct arena_free *free[ARENA_CLASSES];
	struct arena_chunk *chunk; /* sorted by base */
	size_t n_chunks, cap;
	char *cut;   /* the chunk new blocks are cut from, or NULL */
	size_t used; /* bytes cut from it */
	uint64_t blocks;
	size_t n_evac; /* evacuating chunks */
	uint64_t chunks_freed;
};

static size_t arena_class(size_t len)
{
	return (len + ARENA_ALIGN - 1) / ARENA_ALIGN - 1;
}

/* The chunk holding p. */
static struct arena_chunk *chunk_of(struct arena *a, const void *p)
{
	const char *base = (const char *)((uintptr_t)p & ~(uintptr_t)(ARENA_CHUNK - 1));
	size_t lo = 0, hi = a->n_chunks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (a->chunk[mid].base == base)
			return &a->chunk[mid];
		if (a->chunk[mid].base < base)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ARENA_CHUNK bytes aligned to ARENA_CHUNK, zeroed, or NULL. */
static void *chunk_map(void)
{
	size_t len = 2 * (size_t)ARENA_CHUNK;
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *c;

	if (m == MAP_FAILED)
		return NULL;
	c = (char *)(((uintptr_t)m + ARENA_CHUNK - 1) & ~(uintptr_t)(ARENA_CHUNK - 1));
	if (c > m)
		munmap(m, (size_t)(c - m));
	if (c + ARENA_CHUNK < m + len)
		munmap(c + ARENA_CHUNK, (size_t)(m + len - (c + ARENA_CHUNK)));
	return c;
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
	return a;
}

static void chunk_release(struct arena *a, size_t i)
{
	char *base = a->chunk[i].base;

	if (a->hooks.chunk_del)
		a->hooks.chunk_del(a->arg, a->tag, base, ARENA_CHUNK);
	munmap(base, ARENA_CHUNK);
	if (a->chunk[i].evac)
		a->n_evac--;
	if (a->cut == base) {
		a->cut = NULL;
		a->used = 0;
	}
	memmove(&a->chunk[i], &a->chunk[i + 1], (a->n_chunks - i - 1) * sizeof(a->chunk[0]));
	a->n_chunks--;
	a->chunks_freed++;
}

void arena_destroy(struct arena *a)
{
	if (!a)
		return;
	while (a->n_chunks)
		chunk_release(a, a->n_chunks - 1);
	free(a->chunk);
	free(a);
}

/* A new chunk to cut from. @return 0, or -ENOMEM. */
static int arena_grow(struct arena *a)
{
	size_t i;
	char *c;

	if (a->n_chunks == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 8;
		struct arena_chunk *n = realloc(a->chunk, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->chunk = n;
		a->cap = cap;
	}
	/* a fresh mapping is zeroed: no old heap bytes are readable (remote reads) */
	c = chunk_map();
	if (!c)
		return -ENOMEM;
	for (i = a->n_chunks; i > 0 && a->chunk[i - 1].base > c; i--)
		a->chunk[i] = a->chunk[i - 1];
	a->chunk[i] = (struct arena_chunk){c, 0, false};
	a->n_chunks++;
	a->cut = c;
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
		if ((!a->cut || a->used + size > ARENA_CHUNK) && arena_grow(a))
			return NULL;
		p = a->cut + a->used;
		a->used += size;
	}
	chunk_of(a, p)->live += size;
	a->blocks++;
	return p;
}

void arena_free(struct arena *a, void *p, size_t len)
{
	struct arena_free *f = p;
	struct arena_chunk *c;
	size_t k, size;

	if (!a || !p || len < 1 || len > ARENA_BLOCK_MAX)
		return;
	k = arena_class(len);
	size = (k + 1) * ARENA_ALIGN;
	c = chunk_of(a, p);
	if (!c)
		return; /* not ours: a caller's bug, not a crash */
	a->blocks--;
	c->live -= size;
	if (c->evac) {
		if (!c->live)
			chunk_release(a, (size_t)(c - a->chunk));
		return;
	}
	/* the owner may still read the chunk: a freed page's bytes go with it */
	memset((char *)p + sizeof(*f), 0, size - sizeof(*f));
	f->next = a->free[k];
	a->free[k] = f;
}

size_t arena_evacuate(struct arena *a, size_t bytes)
{
	size_t marked = 0, i, best, k;

	if (!a)
		return 0;
	while (marked < bytes) {
		/* the emptiest chunk not yet evacuating: the least to move for a chunk freed */
		best = a->n_chunks;
		for (i = 0; i < a->n_chunks; i++)
			if (!a->chunk[i].evac &&
			    (best == a->n_chunks || a->chunk[i].live < a->chunk[best].live))
				best = i;
		if (best == a->n_chunks)
			break;
		a->chunk[best].evac = true;
		a->n_evac++;
		marked += a->chunk[best].live;
		if (a->cut == a->chunk[best].base)
			a->cut = NULL; /* the next block is cut from a new chunk */
	}
	/* the evacuating chunks' free blocks leave the free lists (before any is unmapped) */
	for (k = 0; k < ARENA_CLASSES; k++) {
		struct arena_free **pp = &a->free[k];

		while (*pp) {
			struct arena_chunk *c = chunk_of(a, *pp);

			if (c && c->evac)
				*pp = (*pp)->next;
			else
				pp = &(*pp)->next;
		}
	}
	/* those with nothing in them go at once */
	for (i = a->n_chunks; i-- > 0;)
		if (a->chunk[i].evac && !a->chunk[i].live)
			chunk_release(a, i);
	return marked;
}

bool arena_evacuating(const struct arena *a, const void *p)
{
	struct arena_chunk *c;

	if (!a || !a->n_evac)
		return false;
	c = chunk_of((struct arena *)a, p);
	return c && c->evac;
}

size_t arena_evac_chunks(const struct arena *a)
{
	return a ? a->n_evac : 0;
}

size_t arena_evac_live(const struct arena *a)
{
	size_t i, live = 0;

	for (i = 0; a && a->n_evac && i < a->n_chunks; i++)
		if (a->chunk[i].evac)
			live += a->chunk[i].live;
	return live;
}

void arena_foreach_chunk(const struct arena *a, void (*fn)(void *arg, void *base, size_t len),
			 void *arg)
{
	size_t i;

	for (i = 0; a && i < a->n_chunks; i++)
		fn(arg, a->chunk[i].base, ARENA_CHUNK);
}

uint64_t arena_blocks(const struct arena *a)
{
	return a ? a->blocks : 0;
}

uint64_t arena_chunks(const struct arena *a)
{
	return a ? a->n_chunks : 0;
}

uint64_t arena_chunks_freed(const struct arena *a)
{
	return a ? a->chunks_freed : 0;
}
