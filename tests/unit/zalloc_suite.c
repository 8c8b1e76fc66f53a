/*
 * zalloc_suite.c - what zbud and zdense both promise through struct
 * zalloc_ops: arguments refused, data round trips at every size and at
 * random, bad handles counted and ignored, the budget, threads. What only
 * one of them promises (placement, classes, density, its own figures) stays
 * in test_zbud.c and test_zdense.c.
 *
 * Linked into both test programs (the Makefile), not a program of its own.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/zalloc_suite.h"

#define PAGE_MAX 4096 /* the largest page either stores (zdense's raw page) */

static const struct zalloc_ops *ops;

void zalloc_suite_use(const struct zalloc_ops *o)
{
	ops = o;
}

/* ---- pages -------------------------------------------------------------------- */

void zalloc_suite_fill(unsigned char *buf, unsigned len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	unsigned i;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
}

uint64_t zalloc_suite_put(void *a, bool pers, unsigned len, uint32_t seed)
{
	unsigned char buf[PAGE_MAX];
	struct zbud_ref ref = {seed, seed + 1};
	uint64_t h = UINT64_MAX;

	zalloc_suite_fill(buf, len, seed);
	assert_int_equal(ops->store(a, pers, buf, len, ref, &h), 0);
	return h;
}

void zalloc_suite_check(void *a, uint64_t h, unsigned len, uint32_t seed)
{
	unsigned char buf[PAGE_MAX];
	const void *p;
	unsigned got = 0;

	zalloc_suite_fill(buf, len, seed);
	p = ops->data(a, h, &got);
	assert_non_null(p);
	assert_int_equal(got, len);
	assert_memory_equal(p, buf, len);
}

struct zalloc_stats zalloc_suite_stats(void *a)
{
	struct zalloc_stats s;

	memset(&s, 0xa5, sizeof(s));
	ops->get_stats(a, &s);
	return s;
}

/* ---- arguments ---------------------------------------------------------------- */

static void test_bad_args(void **state)
{
	unsigned char buf[PAGE_MAX] = {0};
	struct zbud_ref ref = {1, 2};
	uint64_t h = 77;
	int pers;
	void *a;

	errno = 0;
	assert_null(ops->create(0));
	assert_int_equal(errno, EINVAL);
	ops->destroy(NULL);
	a = ops->create(4);
	assert_non_null(a);
	for (pers = 0; pers < 2; pers++) {
		assert_int_equal(ops->store(a, pers, buf, 0, ref, &h), -EINVAL);
		if (ops->max_len + 1 != ops->huge_len)
			assert_int_equal(ops->store(a, pers, buf, ops->max_len + 1, ref, &h),
					 -EINVAL);
		if (!ops->huge_len) /* no raw pages: a whole frame's worth is too long */
			assert_int_equal(ops->store(a, pers, buf, PAGE_MAX, ref, &h), -EINVAL);
	}
	assert_int_equal(h, 77); /* set on success only */
	assert_int_equal(zalloc_suite_stats(a).objects, 0);
	assert_int_equal(zalloc_suite_stats(a).frames, 0);
	/* the edges themselves are taken */
	assert_int_equal(ops->store(a, true, buf, ops->max_len, ref, &h), 0);
	assert_int_equal(ops->store(a, true, buf, 1, ref, &h), 0);
	assert_int_equal(zalloc_suite_stats(a).objects, 2);
	ops->destroy(a);
}

/* ---- data --------------------------------------------------------------------- */

static void test_round_trip_every_size(void **state)
{
	void *a = ops->create(4096);
	static uint64_t h[PAGE_MAX + 1];
	unsigned len;
	struct zalloc_stats s;
	uint64_t bytes = 0;

	for (len = 1; len <= ops->max_len; len += 7) {
		h[len] = zalloc_suite_put(a, len & 1, len, len);
		bytes += len;
	}
	for (len = 1; len <= ops->max_len; len += 7)
		zalloc_suite_check(a, h[len], len, len);
	s = zalloc_suite_stats(a);
	assert_int_equal(s.bytes, bytes);
	assert_int_equal(s.objects, (ops->max_len - 1) / 7 + 1);
	for (len = 1; len <= ops->max_len; len += 7)
		ops->release(a, h[len]);
	s = zalloc_suite_stats(a);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.bad_handles, 0);
	ops->destroy(a);
}

#define RT_N 3000

/* Random lengths (the edges first); half released and stored again; all released. */
static void test_round_trip_random(void **state)
{
	void *a = ops->create(RT_N);
	static uint64_t h[RT_N];
	static uint32_t seed[RT_N];
	static unsigned len[RT_N];
	unsigned r = 12345;
	uint64_t bytes = 0;
	int i;

	for (i = 0; i < RT_N; i++) {
		len[i] = i == 0	  ? 1
			 : i == 1 ? ops->max_len
				  : 1 + (unsigned)rand_r(&r) % ops->max_len;
		seed[i] = (uint32_t)i;
		h[i] = zalloc_suite_put(a, i & 1, len[i], seed[i]);
		bytes += len[i];
	}
	for (i = 0; i < RT_N; i++)
		zalloc_suite_check(a, h[i], len[i], seed[i]);
	assert_int_equal(zalloc_suite_stats(a).bytes, bytes);
	assert_int_equal(zalloc_suite_stats(a).objects, RT_N);
	for (i = 0; i < RT_N; i++) {
		if (rand_r(&r) & 1)
			continue;
		ops->release(a, h[i]);
		bytes -= len[i];
		len[i] = 1 + (unsigned)rand_r(&r) % ops->max_len;
		seed[i] = (uint32_t)i + RT_N;
		h[i] = zalloc_suite_put(a, i & 1, len[i], seed[i]);
		bytes += len[i];
	}
	for (i = 0; i < RT_N; i++)
		zalloc_suite_check(a, h[i], len[i], seed[i]);
	assert_int_equal(zalloc_suite_stats(a).bytes, bytes);
	for (i = 0; i < RT_N; i++)
		ops->release(a, h[i]);
	assert_int_equal(zalloc_suite_stats(a).frames, 0);
	assert_int_equal(zalloc_suite_stats(a).objects, 0);
	assert_int_equal(zalloc_suite_stats(a).bytes, 0);
	ops->destroy(a);
}

/* Handles of no page: each counted once, nothing else changes, no data. */
static void test_bad_handles(void **state)
{
	void *a = ops->create(8);
	uint64_t h = zalloc_suite_put(a, false, 100, 1);
	uint64_t bad = zalloc_suite_stats(a).bad_handles;
	unsigned len = 7;

	ops->release(a, UINT64_MAX);
	ops->zombie_done(a, UINT32_MAX);
	assert_int_equal(zalloc_suite_stats(a).bad_handles, bad + 2);
	assert_null(ops->data(a, UINT64_MAX, &len));
	assert_int_equal(len, 0);
	assert_int_equal(zalloc_suite_stats(a).objects, 1);
	zalloc_suite_check(a, h, 100, 1);
	ops->release(a, h);
	ops->release(a, h); /* twice */
	assert_int_equal(zalloc_suite_stats(a).bad_handles, bad + 3);
	assert_null(ops->data(a, h, &len));
	assert_int_equal(zalloc_suite_stats(a).frames, 0);
	ops->destroy(a);
}

/* ---- the budget --------------------------------------------------------------- */

static void test_budget(void **state)
{
	void *a = ops->create(16);
	unsigned char buf[PAGE_MAX];
	static uint64_t h[4096];
	struct zalloc_stats s;
	unsigned n = 0, i;

	memset(buf, 1, sizeof(buf));
	while (ops->store(a, true, buf, 2000, (struct zbud_ref){1, n}, &h[n]) == 0)
		n++;
	s = zalloc_suite_stats(a);
	assert_true(s.frames <= 16);
	assert_true(n >= 30); /* two a frame, less a partial block */
	/* a smaller class still fits where frames remain, then nothing does */
	for (i = 0; i < 4096 && ops->store(a, false, buf, 100, (struct zbud_ref){2, i}, &h[n]) == 0;
	     i++)
		;
	assert_true(zalloc_suite_stats(a).frames <= 16);
	assert_int_equal(ops->store(a, true, buf, 2000, (struct zbud_ref){1, 0}, &h[n]), -ENOSPC);
	/* releasing a whole block's pages makes room again */
	for (i = 0; i < n; i++)
		ops->release(a, h[i]);
	assert_int_equal(ops->store(a, true, buf, 2000, (struct zbud_ref){1, 0}, &h[0]), 0);
	ops->destroy(a);
}

/* ---- threads ------------------------------------------------------------------ */

struct worker {
	void *a;
	unsigned id;
	unsigned errors;
};

/* Store, read back and release at random in 64 slots; a full budget is fine. */
static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t h[64];
	uint32_t seed[64];
	unsigned len[64], i, k;
	uint32_t x = w->id * 7919 + 1;

	memset(len, 0, sizeof(len));
	for (i = 0; i < 20000; i++) {
		unsigned char buf[PAGE_MAX];

		x = x * 1103515245u + 12345u;
		k = (x >> 8) % 64;
		if (len[k]) {
			unsigned got;
			const void *p = ops->data(w->a, h[k], &got);

			zalloc_suite_fill(buf, len[k], seed[k]);
			if (!p || got != len[k] || memcmp(p, buf, got))
				w->errors++;
			ops->release(w->a, h[k]);
			len[k] = 0;
		} else {
			len[k] = 1 + (x >> 4) % ops->max_len;
			seed[k] = x;
			zalloc_suite_fill(buf, len[k], seed[k]);
			if (ops->store(w->a, w->id & 1, buf, len[k], (struct zbud_ref){w->id, k},
				       &h[k]))
				len[k] = 0; /* full: fine */
		}
	}
	for (k = 0; k < 64; k++)
		if (len[k])
			ops->release(w->a, h[k]);
	return NULL;
}

static void test_threads(void **state)
{
	void *a = ops->create(512);
	struct worker w[4];
	pthread_t th[4];
	struct zalloc_stats s;
	unsigned i;

	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){a, i, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	s = zalloc_suite_stats(a);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.bad_handles, 0);
	ops->destroy(a);
}

/* ---- zombies ------------------------------------------------------------------ */

struct releaser {
	void *a;
	const struct zalloc_victim *v;
};

static void *releaser_main(void *arg)
{
	struct releaser *r = arg;
	unsigned i;

	for (i = 0; i < r->v->n; i++)
		ops->release(r->a, r->v->handle[i]);
	return NULL;
}

/*
 * A zombify hands out where each page's bytes are (remotify reads them with
 * no lock held), and a page released meanwhile (a put replacing it) leaves
 * those bytes as they were until zombie_done: one thread reads them while
 * another releases every page. Under ThreadSanitizer (make tsan) a release
 * that wrote where the taker reads is a report; so was a taker that asked
 * data() instead, which reads the header a release writes (zcache's remotify
 * did, until TSan caught it in CI: RAMSTER_ZOMBIE_DATA=1 reads that way, to
 * see the report).
 */
static void test_zombie_bytes(void **state)
{
	void *a = ops->create(64);
	unsigned lens[] = {100, 700, 1500, 2000, 33, 1200, 64, 900};
	unsigned char want[PAGE_MAX];
	struct zalloc_victim v;
	struct releaser r = {a, &v};
	struct zalloc_stats s;
	pthread_t th;
	unsigned i, k, round;

	(void)state;
	for (round = 0; round < 20; round++) {
		for (i = 0; i < 8; i++)
			(void)zalloc_suite_put(a, true, lens[i], 1000 * round + i);
		while (ops->zombify_lru(a, true, &v) == 0) {
			assert_true(v.n >= 1);
			/* each page's bytes where the zombify says, before any release */
			for (i = 0; i < v.n; i++) {
				assert_non_null(v.data[i]);
				zalloc_suite_fill(want, v.len[i], v.ref[i].objno);
				assert_memory_equal(v.data[i], want, v.len[i]);
			}
			assert_int_equal(pthread_create(&th, NULL, releaser_main, &r), 0);
			for (k = 0; k < 50; k++)
				for (i = 0; i < v.n; i++) {
					const void *p = v.data[i];

					if (getenv("RAMSTER_ZOMBIE_DATA"))
						(void)ops->data(a, v.handle[i],
								NULL); /* the old way */
					zalloc_suite_fill(want, v.len[i], v.ref[i].objno);
					assert_memory_equal(p, want, v.len[i]);
				}
			pthread_join(th, NULL);
			/* released, and still there until zombie_done */
			for (i = 0; i < v.n; i++) {
				zalloc_suite_fill(want, v.len[i], v.ref[i].objno);
				assert_memory_equal(v.data[i], want, v.len[i]);
			}
			ops->zombie_done(a, v.frame);
		}
	}
	s = zalloc_suite_stats(a);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.bad_handles, 0);
	ops->destroy(a);
}

int zalloc_suite_run(const struct zalloc_ops *o)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_round_trip_every_size),
	    cmocka_unit_test(test_round_trip_random),
	    cmocka_unit_test(test_bad_handles),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_zombie_bytes),
	};
	char name[64];

	zalloc_suite_use(o);
	snprintf(name, sizeof(name), "zalloc %s", o->name);
	return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
