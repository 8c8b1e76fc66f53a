/*
 * map.c - per-object sparse index: a radix tree of 64-slot nodes.
 *
 * Invariants: a node's count is the number of its non-empty slots; no node
 * but the root is ever empty (deleting the last value of a node frees it and
 * walks up); height is 0 exactly when root is NULL.
 */
#include <errno.h>
#include <stdlib.h>

#include "tmem/map.h"

#define MAP_SHIFT 6
#define MAP_SLOTS (1u << MAP_SHIFT)
#define MAP_MASK (MAP_SLOTS - 1)
#define MAP_MAX_HEIGHT 6 /* 6 * 6 = 36 bits >= 32 */

union map_slot {
	struct map_node *child; /* inner levels */
	uint64_t val;           /* the leaf level */
};

struct map_node {
	uint32_t count;
	union map_slot slot[MAP_SLOTS];
};

size_t map_node_size(void)
{
	return sizeof(struct map_node);
}

/* The largest index a tree of height h covers. */
static uint64_t map_max_index(unsigned h)
{
	return h >= MAP_MAX_HEIGHT ? UINT32_MAX : (1ull << (h * MAP_SHIFT)) - 1;
}

static unsigned map_slot_of(uint32_t index, unsigned level)
{
	return (unsigned)(index >> (level * MAP_SHIFT)) & MAP_MASK;
}

uint64_t map_lookup(const struct tmem_map *m, uint32_t index)
{
	const struct map_node *n = m->root;
	unsigned level;

	if (!n || index > map_max_index(m->height))
		return 0;
	for (level = m->height - 1; level > 0; level--) {
		n = n->slot[map_slot_of(index, level)].child;
		if (!n)
			return 0;
	}
	return n->slot[map_slot_of(index, 0)].val;
}

int map_set(struct tmem_map *m, uint32_t index, uint64_t val, uint64_t *old, int *nodes_delta)
{
	struct map_node *n, *fresh[MAP_MAX_HEIGHT + MAP_MAX_HEIGHT];
	unsigned need = 0, nfresh = 0, level, h, i;

	*old = 0;
	*nodes_delta = 0;
	/* Count and allocate every node we may need first, so a failure leaves
	 * the map untouched. */
	for (h = m->height ? m->height : 1; index > map_max_index(h); h++)
		;
	if (!m->root) {
		need = h;                               /* a root and a path */
	} else if (h > m->height) {
		/* new roots above, and a fresh path below the top one: index's
		 * slot there is not 0, since index needs the new height */
		need = (h - m->height) + (h - 1);
	} else {
		n = m->root;
		for (level = h - 1; level > 0; level--) {
			n = n->slot[map_slot_of(index, level)].child;
			if (!n) {
				need = level;
				break;
			}
		}
	}
	for (i = 0; i < need; i++) {
		fresh[i] = calloc(1, sizeof(struct map_node));
		if (!fresh[i]) {
			while (i--)
				free(fresh[i]);
			return -ENOMEM;
		}
	}

	if (!m->root) {
		m->root = fresh[nfresh++];
		m->height = (uint8_t)h;
	}
	while (m->height < h) {
		n = fresh[nfresh++];
		n->slot[0].child = m->root;
		n->count = 1;
		m->root = n;
		m->height++;
	}
	n = m->root;
	for (level = m->height - 1; level > 0; level--) {
		union map_slot *s = &n->slot[map_slot_of(index, level)];

		if (!s->child) {
			s->child = fresh[nfresh++];
			n->count++;
		}
		n = s->child;
	}
	{
		union map_slot *s = &n->slot[map_slot_of(index, 0)];

		*old = s->val;
		if (!s->val)
			n->count++;
		s->val = val;
	}
	if (!*old)
		m->count++;
	*nodes_delta = (int)nfresh;
	/* Unused preallocations (only if the walk found nodes we counted as
	 * missing, which cannot happen) are returned. */
	for (i = nfresh; i < need; i++)
		free(fresh[i]);
	return 0;
}

uint64_t map_delete(struct tmem_map *m, uint32_t index, int *nodes_delta)
{
	struct map_node *path[MAP_MAX_HEIGHT];
	struct map_node *n = m->root;
	uint64_t val;
	unsigned level;

	*nodes_delta = 0;
	if (!n || index > map_max_index(m->height))
		return 0;
	for (level = m->height - 1; level > 0; level--) {
		path[level] = n;
		n = n->slot[map_slot_of(index, level)].child;
		if (!n)
			return 0;
	}
	path[0] = n;
	val = n->slot[map_slot_of(index, 0)].val;
	if (!val)
		return 0;
	n->slot[map_slot_of(index, 0)].val = 0;
	m->count--;
	/* Free emptied nodes bottom-up. */
	for (level = 0; level < m->height; level++) {
		n = path[level];
		if (level > 0) {
			n->slot[map_slot_of(index, level)].child = NULL;
		}
		if (--n->count > 0)
			break;
		free(n);
		(*nodes_delta)--;
		if (level == m->height - 1u) {
			m->root = NULL;
			m->height = 0;
			return val;
		}
	}
	/* Shrink: a root whose only child is slot 0 is not needed. */
	while (m->height > 1 && m->root->count == 1 && m->root->slot[0].child) {
		n = m->root;
		m->root = n->slot[0].child;
		m->height--;
		free(n);
		(*nodes_delta)--;
	}
	return val;
}

static size_t map_drain_node(struct map_node *n, unsigned level, uint32_t base,
			     void (*fn)(void *arg, uint32_t index, uint64_t val), void *arg)
{
	size_t freed = 1;
	unsigned i;

	for (i = 0; i < MAP_SLOTS; i++) {
		uint32_t index = base | ((uint32_t)i << (level * MAP_SHIFT));

		if (level == 0) {
			if (n->slot[i].val && fn)
				fn(arg, index, n->slot[i].val);
		} else if (n->slot[i].child) {
			freed += map_drain_node(n->slot[i].child, level - 1, index, fn, arg);
		}
	}
	free(n);
	return freed;
}

size_t map_drain(struct tmem_map *m, void (*fn)(void *arg, uint32_t index, uint64_t val),
		 void *arg)
{
	size_t freed = 0;

	if (m->root)
		freed = map_drain_node(m->root, m->height - 1u, 0, fn, arg);
	m->root = NULL;
	m->height = 0;
	m->count = 0;
	return freed;
}

static int map_walk_node(const struct map_node *n, unsigned level, uint32_t base,
			 int (*fn)(void *arg, uint32_t index, uint64_t val), void *arg)
{
	unsigned i;
	int rc = 0;

	for (i = 0; i < MAP_SLOTS && !rc; i++) {
		uint32_t index = base | ((uint32_t)i << (level * MAP_SHIFT));

		if (level == 0) {
			if (n->slot[i].val)
				rc = fn(arg, index, n->slot[i].val);
		} else if (n->slot[i].child) {
			rc = map_walk_node(n->slot[i].child, level - 1, index, fn, arg);
		}
	}
	return rc;
}

int map_walk(const struct tmem_map *m, int (*fn)(void *arg, uint32_t index, uint64_t val),
	     void *arg)
{
	return m->root ? map_walk_node(m->root, m->height - 1u, 0, fn, arg) : 0;
}
