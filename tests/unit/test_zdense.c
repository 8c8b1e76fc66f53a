/*
 * test_zdense.c - unit tests of the dense allocator: its size classes,
 * density, kinds kept apart, LRU order, zombies (released pages kept
 * readable, blocks freed or put back), raw pages, frame reuse, bad handles;
 * then the cases every allocator passes (zalloc_suite.c: arguments, data
 * round trips at every size, the budget, a threaded stress run, ...).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/zalloc_suite.h"
#include "tmem/zdense.h"

/* The shared page helpers (zalloc_suite.c). */
static uint64_t put(struct zdense *zd, bool pers, unsigned len, uint32_t seed)
{
	return zalloc_suite_put(zd, pers, len, seed);
}

static void check(struct zdense *zd, uint64_t h, unsigned len, uint32_t seed)
{
	zalloc_suite_check(zd, h, len, seed);
}

static struct zalloc_stats stats(struct zdense *zd)
{
	return zalloc_suite_stats(zd);
}

/* ---- arguments and classes ---------------------------------------------- */

/* More units than a handle can name (the rest of the arguments: zalloc_suite.c). */
static void test_create_too_large(void **state)
{
	assert_null(zdense_create(ZDENSE_UNITS_LIMIT + 1));
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

/* ---- density ---------------------------------------------------------- */

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

/*
 * The huge class: a raw 4096-byte page fills one frame (no header: its
 * back-reference is in the block's metadata), is the unit of the LRU and of
 * zombies like any block, and counts against the budget.
 */
static void test_huge(void **state)
{
	struct zdense *zd = zdense_create(4);
	static struct zalloc_victim v;
	struct zdense_class c;
	struct zalloc_stats s;
	unsigned char buf[ZDENSE_HUGE_LEN];
	uint64_t h[4], x;
	unsigned i;

	assert_int_equal(zdense_class_of(ZDENSE_HUGE_LEN, &c), 0);
	assert_int_equal(c.slot, ZDENSE_HUGE_LEN);
	assert_int_equal(c.frames, 1);
	assert_int_equal(c.slots, 1);
	assert_int_equal(zdense_class_of(ZDENSE_HUGE_LEN - 1, &c), -EINVAL);
	for (i = 0; i < 4; i++)
		h[i] = put(zd, true, ZDENSE_HUGE_LEN, 40 + i);
	zalloc_suite_fill(buf, ZDENSE_HUGE_LEN, 99);
	assert_int_equal(zdense_store(zd, true, buf, ZDENSE_HUGE_LEN, (struct zbud_ref){1, 2}, &x),
			 -ENOSPC);
	s = stats(zd);
	assert_int_equal(s.frames, 4);
	assert_int_equal(s.frames_pers, 4);
	assert_int_equal(s.objects, 4);
	assert_int_equal(s.bytes, 4 * ZDENSE_HUGE_LEN);
	for (i = 0; i < 4; i++)
		check(zd, h[i], ZDENSE_HUGE_LEN, 40 + i);
	/* the oldest first, with its back-reference and length */
	assert_int_equal(zdense_zombify_lru(zd, true, &v), 0);
	assert_int_equal(v.n, 1);
	assert_int_equal(v.frames, 1);
	assert_int_equal(v.handle[0], h[0]);
	assert_int_equal(v.ref[0].objno, 40);
	assert_int_equal(v.ref[0].index, 41);
	assert_int_equal(v.len[0], ZDENSE_HUGE_LEN);
	zdense_release(zd, h[0]);
	check(zd, h[0], ZDENSE_HUGE_LEN, 40); /* a zombie keeps its bytes */
	zdense_release(zd, h[0]);             /* twice: bad */
	assert_int_equal(stats(zd).bad_handles, 1);
	zdense_zombie_done(zd, v.frame);
	assert_int_equal(stats(zd).frames, 3);
	/* a live zombie goes back to the LRU's tail */
	assert_int_equal(zdense_zombify_lru(zd, true, &v), 0);
	assert_int_equal(v.handle[0], h[1]);
	zdense_zombie_done(zd, v.frame);
	assert_int_equal(zdense_zombify_lru(zd, true, &v), 0);
	assert_int_equal(v.handle[0], h[2]);
	zdense_zombie_done(zd, v.frame);
	check(zd, h[1], ZDENSE_HUGE_LEN, 41);
	/* the freed frame takes a compressed page's block as well */
	x = put(zd, true, 1000, 7);
	check(zd, x, 1000, 7);
	zdense_release(zd, x);
	for (i = 1; i < 4; i++)
		zdense_release(zd, h[i]);
	s = stats(zd);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.bad_handles, 1);
	zdense_destroy(zd);
}

/* Handles zdense could never have made (UINT64_MAX, twice-released: zalloc_suite.c). */
static void test_bad_handles(void **state)
{
	struct zdense *zd = zdense_create(8);
	uint64_t h = put(zd, false, 100, 1);

	zdense_release(zd, h + 1);	     /* a slot never handed out */
	zdense_release(zd, (200u << 7) | 3); /* a block past the top */
	assert_int_equal(stats(zd).bad_handles, 2);
	zdense_destroy(zd);
}

/* ---- frame reuse ------------------------------------------- */

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

/*
 * An elastic tier (local_mb = auto): a budget set below what is stored drops
 * nothing and takes no new block; trim gives the free units' memory back down
 * to the budget; the budget raised again stores again.
 */
static void test_limit_and_trim(void **state)
{
	struct zdense *zd = zdense_create(2048);
	static uint64_t h[3000];
	static unsigned char buf[4096];
	struct zalloc_stats s;
	uint64_t x, touched, n;
	unsigned i;
	int rc = 0;

	(void)state;
	for (i = 0; i < 3000; i++)
		h[i] = put(zd, i & 1, 100 + (i * 37) % 3000, i);
	s = stats(zd);
	touched = s.frames_touched;
	assert_true(s.frames > 64);
	zdense_set_limit(zd, 64);
	s = stats(zd);
	assert_int_equal(s.max_frames, 64);
	for (i = 0; i < 3000; i++)
		check(zd, h[i], 100 + (i * 37) % 3000, i);
	/* nothing free yet: nothing to give back */
	assert_int_equal(zdense_trim(zd, 64, UINT64_MAX), 0);
	for (i = 0; i < 3000; i++)
		zdense_release(zd, h[i]);
	/* a bounded call, then the rest */
	n = zdense_trim(zd, 64, 8);
	assert_true(n >= 8 && n < 16);
	n += zdense_trim(zd, 64, UINT64_MAX);
	s = stats(zd);
	assert_true(s.frames_touched <= 64);
	assert_int_equal(n, touched - s.frames_touched);
	/* under the budget: stores until refused, never past 64 frames */
	memset(buf, 7, sizeof(buf));
	for (i = 0; i < 10000 && rc == 0; i++)
		rc = zdense_store(zd, false, buf, 2000, (struct zbud_ref){1, i}, &x);
	assert_int_equal(rc, -ENOSPC);
	s = stats(zd);
	assert_true(s.frames <= 64);
	assert_true(s.frames >= 60);
	/* raised again: room again */
	zdense_set_limit(zd, 2048);
	assert_int_equal(zdense_store(zd, false, buf, 2000, (struct zbud_ref){2, 0}, &x), 0);
	zdense_destroy(zd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_create_too_large),
	    cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_density),
	    cmocka_unit_test(test_kinds_apart_and_lru),
	    cmocka_unit_test(test_zombie_keeps_bytes),
	    cmocka_unit_test(test_huge),
	    cmocka_unit_test(test_bad_handles),
	    cmocka_unit_test(test_frames_reused),
	    cmocka_unit_test(test_limit_and_trim),
	};

	const struct zalloc_ops *ops = zalloc_ops(ZALLOC_DENSE);
	int failed;

	zalloc_suite_use(ops);
	failed = cmocka_run_group_tests_name("zdense", tests, NULL, NULL);
	return failed + zalloc_suite_run(ops);
}
