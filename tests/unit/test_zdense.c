/*
 * test_zdense.c - unit tests of the dense allocator: its size classes, data
 * round trips at every size, density, kinds kept apart, LRU order, zombies
 * (released pages kept readable, blocks freed or put back), the budget, frame
 * reuse, bad handles, figures and a threaded stress run.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmem/zdense.h"

/* Deterministic bytes for a (seed, len) pair, so any page can be checked. */
static void fill(unsigned char *buf, unsigned len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	unsigned i;

	for (i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
}

static uint64_t put(struct zdense *zd, bool pers, unsigned len, uint32_t seed)
{
	unsigned char buf[ZDENSE_MAX_LEN];
	struct zbud_ref ref = {seed, seed + 1};
	uint64_t h = UINT64_MAX;

	fill(buf, len, seed);
	assert_int_equal(zdense_store(zd, pers, buf, len, ref, &h), 0);
	return h;
}

static void check(struct zdense *zd, uint64_t h, unsigned len, uint32_t seed)
{
	unsigned char buf[ZDENSE_MAX_LEN];
	const void *p;
	unsigned got = 0;

	fill(buf, len, seed);
	p = zdense_data(zd, h, &got);
	assert_non_null(p);
	assert_int_equal(got, len);
	assert_memory_equal(p, buf, len);
}

static struct zalloc_stats stats(struct zdense *zd)
{
	struct zalloc_stats s;

	memset(&s, 0xa5, sizeof(s));
	zdense_get_stats(zd, &s);
	return s;
}

/* ---- arguments and classes ---------------------------------------------- */

static void test_bad_args(void **state)
{
	unsigned char buf[ZDENSE_MAX_LEN + 1] = {0};
	struct zdense *zd;
	uint64_t h;

	errno = 0;
	assert_null(zdense_create(0));
	assert_int_equal(errno, EINVAL);
	assert_null(zdense_create(ZDENSE_UNITS_LIMIT + 1));
	zdense_destroy(NULL);
	zd = zdense_create(4);
	assert_non_null(zd);
	assert_int_equal(zdense_store(zd, false, buf, 0, (struct zbud_ref){1, 2}, &h), -EINVAL);
	assert_int_equal(
	    zdense_store(zd, false, buf, ZDENSE_MAX_LEN + 1, (struct zbud_ref){1, 2}, &h), -EINVAL);
	assert_int_equal(stats(zd).objects, 0);
	zdense_destroy(zd);
}

/*
 * Every length has a class whose slot holds it and its header, whose block
 * fits its frames, and whose room a page (block / slots) is within 15 % of
 * the page's own bytes from 256 to 3072 bytes (the 10-byte header and the
 * 16-byte step dominate below; above, a block of at most four frames holds
 * too few pages to share out its tail: up to +25 %, as zsmalloc's).
 */
static void test_classes(void **state)
{
	struct zdense_class c;
	unsigned len, worst_pct = 0, worst_all = 0;

	assert_int_equal(zdense_class_of(0, &c), -EINVAL);
	assert_int_equal(zdense_class_of(ZDENSE_MAX_LEN + 1, &c), -EINVAL);
	for (len = 1; len <= ZDENSE_MAX_LEN; len++) {
		unsigned room;

		assert_int_equal(zdense_class_of(len, &c), 0);
		assert_true(c.slot >= len + ZDENSE_HDR);
		assert_true(c.frames >= 1 && c.frames <= ZDENSE_UNIT_FRAMES);
		assert_true(c.slots >= 1 && c.slots <= ZDENSE_SLOTS_MAX);
		assert_true(c.slots * c.slot <= c.frames * ZDENSE_FRAME_SIZE);
		room = c.frames * ZDENSE_FRAME_SIZE / c.slots;
		if (len >= 256 && len <= 3072 && (room - len) * 100 / len > worst_pct)
			worst_pct = (room - len) * 100 / len;
		if (len >= 256 && (room - len) * 100 / len > worst_all)
			worst_all = (room - len) * 100 / len;
	}
	print_message("worst room over bytes: 256..3072 +%u%%, 256..%u +%u%%\n", worst_pct,
		      ZDENSE_MAX_LEN, worst_all);
	assert_true(worst_pct <= 15);
}

/* ---- data --------------------------------------------------------------- */

static void test_round_trip_every_size(void **state)
{
	struct zdense *zd = zdense_create(4096);
	static uint64_t h[ZDENSE_MAX_LEN + 1];
	unsigned len;
	struct zalloc_stats s;
	uint64_t bytes = 0;

	for (len = 1; len <= ZDENSE_MAX_LEN; len += 7) {
		h[len] = put(zd, len & 1, len, len);
		bytes += len;
	}
	for (len = 1; len <= ZDENSE_MAX_LEN; len += 7)
		check(zd, h[len], len, len);
	s = stats(zd);
	assert_int_equal(s.bytes, bytes);
	assert_int_equal(s.objects, (ZDENSE_MAX_LEN - 1) / 7 + 1);
	for (len = 1; len <= ZDENSE_MAX_LEN; len += 7)
		zdense_release(zd, h[len]);
	s = stats(zd);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.bad_handles, 0);
	zdense_destroy(zd);
}

/* 1000 pages of 845 bytes (real memory's LZO mean) take ~ their bytes in frames. */
static void test_density(void **state)
{
	struct zdense *zd = zdense_create(1024);
	static uint64_t h[1000];
	struct zalloc_stats s;
	uint32_t i;

	for (i = 0; i < 1000; i++)
		h[i] = put(zd, false, 845, i);
	s = stats(zd);
	print_message("845-byte pages: %.2f a frame, %u frames\n", 1000.0 / (double)s.frames,
		      (unsigned)s.frames);
	/* zbud would take 500 frames; the bytes alone are 207 frames */
	assert_true(s.frames <= 225);
	assert_true(s.frames_touched == s.frames);
	assert_true(s.meta_bytes / 1000 <= 16);
	for (i = 0; i < 1000; i++)
		check(zd, h[i], 845, i);
	zdense_destroy(zd);
}

/* ---- kinds, LRU, zombies -------------------------------------------------- */

static void test_kinds_apart_and_lru(void **state)
{
	struct zdense *zd = zdense_create(64);
	static struct zalloc_victim v;
	uint64_t a, b, c, d;

	a = put(zd, false, 1000, 1);
	b = put(zd, true, 1000, 2);
	c = put(zd, false, 3000, 3); /* another class: another block */
	d = put(zd, false, 1000, 4); /* a's block again: it is now the most recent */
	assert_int_equal(zdense_zombify_lru(zd, true, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.handle[0], b);
	assert_int_equal(v.ref[0].objno, 2);
	assert_int_equal(v.ref[0].index, 3);
	assert_int_equal(v.len[0], 1000);
	zdense_zombie_done(zd, v.frame);
	/* least recent ephemeral block: c's (a's was touched again by d) */
	assert_int_equal(zdense_zombify_lru(zd, false, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.handle[0], c);
	zdense_zombie_done(zd, v.frame);
	assert_int_equal(zdense_zombify_lru(zd, false, &v), 0);
	assert_int_equal(v.n, 2);
	assert_true((v.handle[0] == a && v.handle[1] == d) ||
		    (v.handle[0] == d && v.handle[1] == a));
	zdense_zombie_done(zd, v.frame);
	check(zd, a, 1000, 1);
	check(zd, d, 1000, 4);
	zdense_destroy(zd);
}

static void test_zombie_keeps_bytes(void **state)
{
	struct zdense *zd = zdense_create(64);
	static struct zalloc_victim v;
	struct zalloc_stats s;
	uint64_t h[10], again;
	unsigned i;

	for (i = 0; i < 10; i++)
		h[i] = put(zd, false, 300, i);
	assert_int_equal(zdense_zombify_lru(zd, false, &v), 0);
	assert_int_equal(v.n, 10);
	assert_int_equal(stats(zd).zombies, 1);
	/* a store meanwhile does not go into the zombie */
	again = put(zd, false, 300, 99);
	assert_true(again >> 7 != v.frame);
	/* released pages of a zombie stay readable until it is done */
	for (i = 0; i < 10; i += 2)
		zdense_release(zd, h[i]);
	for (i = 0; i < 10; i++)
		check(zd, h[i], 300, i);
	zdense_release(zd, h[0]); /* twice: bad */
	s = stats(zd);
	assert_int_equal(s.bad_handles, 1);
	assert_int_equal(s.objects, 6);
	zdense_zombie_done(zd, v.frame);
	/* the block is back with its live pages, and its free slots take stores */
	for (i = 1; i < 10; i += 2)
		check(zd, h[i], 300, i);
	zdense_release(zd, again);
	for (i = 0; i < 5; i++)
		assert_int_equal(put(zd, false, 300, 200 + i) >> 7, v.frame);
	/* all released in a zombie: done frees it */
	assert_int_equal(zdense_zombify_lru(zd, false, &v), 0);
	for (i = 0; i < v.n; i++)
		zdense_release(zd, v.handle[i]);
	zdense_zombie_done(zd, v.frame);
	s = stats(zd);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.zombies, 0);
	assert_int_equal(s.objects, 0);
	zdense_zombie_done(zd, v.frame); /* no longer a zombie: bad */
	assert_int_equal(stats(zd).bad_handles, 2);
	assert_int_equal(zdense_zombify_lru(zd, false, &v), -ENOENT);
	zdense_destroy(zd);
}

static void test_bad_handles(void **state)
{
	struct zdense *zd = zdense_create(8);
	uint64_t h = put(zd, false, 100, 1);
	unsigned len = 7;

	zdense_release(zd, h + 1);	     /* a slot never handed out */
	zdense_release(zd, (200u << 7) | 3); /* a block past the top */
	zdense_release(zd, UINT64_MAX);
	assert_int_equal(stats(zd).bad_handles, 3);
	assert_null(zdense_data(zd, UINT64_MAX, &len));
	assert_int_equal(len, 0);
	zdense_release(zd, h);
	zdense_release(zd, h);
	assert_int_equal(stats(zd).bad_handles, 4);
	assert_null(zdense_data(zd, h, &len));
	zdense_destroy(zd);
}

/* ---- the budget and frame reuse ------------------------------------------- */

static void test_budget(void **state)
{
	struct zdense *zd = zdense_create(16);
	unsigned char buf[ZDENSE_MAX_LEN];
	static uint64_t h[4096];
	struct zalloc_stats s;
	unsigned n = 0, i;

	memset(buf, 1, sizeof(buf));
	while (zdense_store(zd, true, buf, 2000, (struct zbud_ref){1, n}, &h[n]) == 0)
		n++;
	s = stats(zd);
	assert_true(s.frames <= 16);
	assert_true(n >= 30); /* two a frame, less a partial block */
	/* a smaller class still fits where frames remain, then nothing does */
	for (i = 0;
	     i < 4096 && zdense_store(zd, false, buf, 100, (struct zbud_ref){2, i}, &h[n + 0]) == 0;
	     i++)
		;
	assert_true(stats(zd).frames <= 16);
	assert_int_equal(zdense_store(zd, true, buf, 2000, (struct zbud_ref){1, 0}, &h[n]),
			 -ENOSPC);
	/* releasing a whole block's pages makes room again */
	for (i = 0; i < n; i++)
		zdense_release(zd, h[i]);
	assert_int_equal(zdense_store(zd, true, buf, 2000, (struct zbud_ref){1, 0}, &h[0]), 0);
	zdense_destroy(zd);
}

/* Frames are faulted once: emptying and refilling takes no new memory. */
static void test_frames_reused(void **state)
{
	struct zdense *zd = zdense_create(2048);
	static uint64_t h[3000];
	uint64_t touched = 0;
	unsigned round, i;

	for (round = 0; round < 4; round++) {
		struct zalloc_stats s;

		for (i = 0; i < 3000; i++)
			h[i] = put(zd, i & 1, 100 + (i * 37) % 3000, i);
		s = stats(zd);
		if (round == 0)
			touched = s.frames_touched;
		assert_int_equal(s.frames_touched, touched);
		for (i = 0; i < 3000; i++)
			zdense_release(zd, h[(i * 7) % 3000]);
		s = stats(zd);
		assert_int_equal(s.frames, 0);
		assert_int_equal(s.frames_touched, touched); /* kept for reuse */
	}
	zdense_destroy(zd);
}

/* ---- threads ----------------------------------------------------------------- */

struct worker {
	struct zdense *zd;
	unsigned id;
	unsigned errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t h[64];
	uint32_t seed[64];
	unsigned len[64], i, k;
	uint32_t x = w->id * 7919 + 1;

	memset(len, 0, sizeof(len));
	for (i = 0; i < 20000; i++) {
		x = x * 1103515245u + 12345u;
		k = (x >> 8) % 64;
		if (len[k]) {
			unsigned char buf[ZDENSE_MAX_LEN];
			unsigned got;
			const void *p = zdense_data(w->zd, h[k], &got);

			fill(buf, len[k], seed[k]);
			if (!p || got != len[k] || memcmp(p, buf, got))
				w->errors++;
			zdense_release(w->zd, h[k]);
			len[k] = 0;
		} else {
			unsigned char buf[ZDENSE_MAX_LEN];

			len[k] = 1 + (x >> 4) % ZDENSE_MAX_LEN;
			seed[k] = x;
			fill(buf, len[k], seed[k]);
			if (zdense_store(w->zd, w->id & 1, buf, len[k], (struct zbud_ref){w->id, k},
					 &h[k]))
				len[k] = 0; /* full: fine */
		}
	}
	for (k = 0; k < 64; k++)
		if (len[k])
			zdense_release(w->zd, h[k]);
	return NULL;
}

static void test_threads(void **state)
{
	struct zdense *zd = zdense_create(512);
	struct worker w[4];
	pthread_t th[4];
	struct zalloc_stats s;
	unsigned i;

	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){zd, i, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	s = stats(zd);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.bad_handles, 0);
	zdense_destroy(zd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_args),
	    cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_round_trip_every_size),
	    cmocka_unit_test(test_density),
	    cmocka_unit_test(test_kinds_apart_and_lru),
	    cmocka_unit_test(test_zombie_keeps_bytes),
	    cmocka_unit_test(test_bad_handles),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_frames_reused),
	    cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests_name("zdense", tests, NULL, NULL);
}
