/*
 * zcache_fixture.h - what test_zcache.c (the local tier) and
 * test_zcache_remote.c (the remote tier) share: the allocator and compressor
 * of this run, a page that compresses to a chosen size, a tier of a given
 * size, and the main that runs a group of cases with each allocator (zdense,
 * zbud) and compressor (LZO, LZ4 on zdense). Included once per test program
 * (its definitions are static), after <cmocka.h>.
 */
#ifndef RAMSTER_TESTS_ZCACHE_FIXTURE_H
#define RAMSTER_TESTS_ZCACHE_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tmem/compress.h"
#include "tmem/zcache.h"

#define PAGE 4096

/* The allocator and compressor of this run (zcache_fixture_main runs the group for each). */
static enum zalloc_kind alloc_kind;
static enum compress_algo algo;

/* A page that LZO compresses to roughly `noise` bytes: noise random bytes
 * (from seed) followed by zeros. */
static void mkpage(unsigned char *p, uint32_t seed, unsigned noise)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	unsigned i;

	memset(p, 0, PAGE);
	for (i = 0; i < noise; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)x;
	}
	p[PAGE - 1] = (unsigned char)(seed | 1); /* never all zero */
}

static struct zcache *mk(uint64_t mb)
{
	struct zcache_config c = {.local_mb = mb, .allocator = alloc_kind, .compressor = algo};
	struct zcache *z = zcache_create(&c);

	assert_non_null(z);
	return z;
}

/* run(group) once with each allocator and compressor: the failures, summed. */
static int zcache_fixture_main(const char *name, int (*run)(const char *group))
{
	static const struct {
		const char *what;
		enum zalloc_kind k;
		enum compress_algo a;
	} runs[] = {{"zdense, lzo", ZALLOC_DENSE, COMPRESS_LZO},
		    {"zbud, lzo", ZALLOC_ZBUD, COMPRESS_LZO},
		    {"zdense, lz4", ZALLOC_DENSE, COMPRESS_LZ4}};
	char group[96];
	int failed = 0;
	size_t i;

	for (i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		alloc_kind = runs[i].k;
		algo = runs[i].a;
		snprintf(group, sizeof(group), "%s (%s)", name, runs[i].what);
		failed += run(group);
	}
	return failed;
}

#endif
