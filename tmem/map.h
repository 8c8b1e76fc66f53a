/*
 * map.h - the sparse index of one tmem object: 32-bit index -> 64-bit value.
 *
 * A radix tree of 64-slot nodes whose height grows with the largest index
 * (a dense run of 64 pages costs one 520-byte leaf: about 8 bytes a page).
 * Value 0 means "absent". Not thread-safe: the owner's bucket lock guards it.
 */
#ifndef RAMSTER_MAP_H
#define RAMSTER_MAP_H

#include <stddef.h>
#include <stdint.h>

struct map_node;

struct tmem_map {
	struct map_node *root;
	uint32_t count;  /* values held */
	uint8_t height;  /* 0: empty; h levels cover indexes < 64^h */
};

/* Bytes of one tree node (for memory accounting). */
size_t map_node_size(void);

/* @return the value at index, or 0. */
uint64_t map_lookup(const struct tmem_map *m, uint32_t index);

/*
 * Set index to val (non-zero); *old gets the value it replaces (0 if none).
 * *nodes_delta gets the count of nodes allocated. @return 0 or -ENOMEM (then
 * the map is unchanged).
 */
int map_set(struct tmem_map *m, uint32_t index, uint64_t val, uint64_t *old, int *nodes_delta);

/*
 * Remove index. @return the value removed, or 0. *nodes_delta gets minus the
 * count of nodes freed.
 */
uint64_t map_delete(struct tmem_map *m, uint32_t index, int *nodes_delta);

/*
 * Call fn(arg, index, value) for every value in index order, then free every
 * node (the map is left empty). @return the count of nodes freed.
 */
size_t map_drain(struct tmem_map *m, void (*fn)(void *arg, uint32_t index, uint64_t val),
		 void *arg);

/*
 * Call fn(arg, index, value) for every value in index order, the map left as
 * it is; a non-zero return of fn stops the walk. @return that value, or 0.
 */
int map_walk(const struct tmem_map *m, int (*fn)(void *arg, uint32_t index, uint64_t val),
	     void *arg);

#endif /* RAMSTER_MAP_H */
