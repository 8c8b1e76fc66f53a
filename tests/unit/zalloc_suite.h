/*
 * zalloc_suite.h - the unit cases every pageframe allocator must pass, run
 * over struct zalloc_ops (tmem/zalloc.h), and the page helpers they share
 * with the allocator-specific tests (test_zbud.c, test_zdense.c).
 *
 * The helpers call one allocator at a time, the one of zalloc_suite_use()
 * (cmocka runs cases one after another); they assert with cmocka.
 */
#ifndef RAMSTER_ZALLOC_SUITE_H
#define RAMSTER_ZALLOC_SUITE_H

#include <stdbool.h>
#include <stdint.h>

#include "tmem/zalloc.h"

/* The allocator the helpers below call, until the next call. */
void zalloc_suite_use(const struct zalloc_ops *ops);

/* Fill buf with len bytes that are a function of seed, so any page can be checked. */
void zalloc_suite_fill(unsigned char *buf, unsigned len, uint32_t seed);

/*
 * Store len bytes of seed (back-reference {seed, seed + 1}); assert it is
 * taken. @return the handle.
 */
uint64_t zalloc_suite_put(void *a, bool pers, unsigned len, uint32_t seed);

/* Assert handle h reads back len bytes of seed. */
void zalloc_suite_check(void *a, uint64_t h, unsigned len, uint32_t seed);

/* The allocator's figures (every field overwritten: a field left out shows). */
struct zalloc_stats zalloc_suite_stats(void *a);

/*
 * Run the shared cases on ops as a cmocka group named "zalloc NAME".
 * @return the number of failed cases (cmocka_run_group_tests's).
 */
int zalloc_suite_run(const struct zalloc_ops *ops);

#endif /* RAMSTER_ZALLOC_SUITE_H */
