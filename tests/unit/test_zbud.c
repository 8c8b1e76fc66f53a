/*
 * test_zbud.c - unit tests of the pageframe allocator: buddy placement, the
 * fullest-that-fits choice, kinds kept apart, LRU order, zombies, the budget,
 * bad handles, figures and a threaded stress run with an evictor; then the
 * cases every allocator passes (zalloc_suite.c: arguments, round trips, ...).
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

#include "tests/unit/zalloc_suite.h"
#include "tmem/zbud.h"

#define CH(n) ((n) * ZBUD_CHUNK_SIZE)   /* n chunks, in bytes */

/* The shared page helpers (zalloc_suite.c) on zbud's handles, which fit 32 bits. */
static uint32_t put(struct zbud *zb, bool pers, unsigned len, uint32_t seed)
{
	return (uint32_t)zalloc_suite_put(zb, pers, len, seed);
}

static void check(struct zbud *zb, uint32_t h, unsigned len, uint32_t seed)
{
	zalloc_suite_check(zb, h, len, seed);
}

static struct zbud_stats stats(struct zbud *zb)
{
	struct zbud_stats s;

	memset(&s, 0xa5, sizeof(s));
	zbud_get_stats(zb, &s);
	return s;
}

/* ---- arguments (the rest: zalloc_suite.c) ----------------------------- */

/* A whole frame is too long; the largest and the smallest page pair in one frame. */
static void test_store_edges(void **state)
{
	struct zbud *zb = zbud_create(4);
	unsigned char buf[ZBUD_FRAME_SIZE] = { 0 };
	struct zbud_ref ref = { 1, 2 };
	uint32_t h = 77;

	assert_non_null(zb);
	assert_int_equal(zbud_store(zb, true, buf, ZBUD_FRAME_SIZE, ref, &h), -EINVAL);
	assert_int_equal(h, 77);
	assert_int_equal(zbud_store(zb, true, buf, ZBUD_BUDDY_MAX, ref, &h), 0);
	assert_int_equal(zbud_store(zb, true, buf, 1, ref, &h), 0);
	assert_int_equal(stats(zb).frames, 1);
	zbud_destroy(zb);
}

/* ---- placement ---------------------------------------------------------- */

static void test_pair_offsets(void **state)
{
	struct zbud *zb = zbud_create(8);
	const unsigned char *p0, *p1;
	uint32_t h0, h1;
	unsigned len;

	h0 = put(zb, false, 100, 1);
	h1 = put(zb, false, 200, 2);
	assert_int_equal(ZBUD_HANDLE_FRAME(h0), ZBUD_HANDLE_FRAME(h1));
	assert_int_equal(ZBUD_HANDLE_BUDDY(h0), 0);
	assert_int_equal(ZBUD_HANDLE_BUDDY(h1), 1);
	p0 = zbud_data(zb, h0, &len);
	p1 = zbud_data(zb, h1, &len);
	assert_int_equal(len, 200);
	/* first at offset 0, last's chunks end flush with the frame end */
	assert_true(p1 + CH(4) == p0 + ZBUD_FRAME_SIZE);
	check(zb, h0, 100, 1);
	check(zb, h1, 200, 2);
	assert_int_equal(stats(zb).frames, 1);
	zbud_destroy(zb);
}

static void test_pair_largest(void **state)
{
	struct zbud *zb = zbud_create(8);
	const unsigned char *p0, *p1;
	uint32_t h0, h1, h2;

	h0 = put(zb, true, ZBUD_BUDDY_MAX, 1);
	h1 = put(zb, true, ZBUD_CHUNK_SIZE + 1, 2);  /* two chunks: does not fit */
	assert_int_not_equal(ZBUD_HANDLE_FRAME(h0), ZBUD_HANDLE_FRAME(h1));
	h2 = put(zb, true, ZBUD_CHUNK_SIZE, 3);      /* one chunk: fits */
	assert_int_equal(ZBUD_HANDLE_FRAME(h0), ZBUD_HANDLE_FRAME(h2));
	p0 = zbud_data(zb, h0, NULL);
	p1 = zbud_data(zb, h2, NULL);
	assert_true(p1 == p0 + ZBUD_BUDDY_MAX);
	check(zb, h0, ZBUD_BUDDY_MAX, 1);
	check(zb, h1, ZBUD_CHUNK_SIZE + 1, 2);
	check(zb, h2, ZBUD_CHUNK_SIZE, 3);
	zbud_destroy(zb);
}

static void test_fullest_that_fits(void **state)
{
	struct zbud *zb = zbud_create(8);
	uint32_t f10, f20, f30, h;

	f10 = ZBUD_HANDLE_FRAME(put(zb, false, CH(54), 1));   /* 10 chunks free */
	f20 = ZBUD_HANDLE_FRAME(put(zb, false, CH(44), 2));   /* 20 free */
	f30 = ZBUD_HANDLE_FRAME(put(zb, false, CH(34), 3));   /* 30 free */
	assert_int_not_equal(f10, f20);
	assert_int_not_equal(f20, f30);
	assert_int_not_equal(f10, f30);
	/* 15 chunks fit in the 20 and the 30: the fuller one is taken */
	h = put(zb, false, CH(14) + 1, 4);
	assert_int_equal(ZBUD_HANDLE_FRAME(h), f20);
	/* exactly 10 chunks: the 10 */
	h = put(zb, false, CH(10), 5);
	assert_int_equal(ZBUD_HANDLE_FRAME(h), f10);
	/* 31 chunks: nothing fits, a new frame */
	h = put(zb, false, CH(31), 6);
	assert_true(ZBUD_HANDLE_FRAME(h) != f10 && ZBUD_HANDLE_FRAME(h) != f20 &&
		    ZBUD_HANDLE_FRAME(h) != f30);
	assert_int_equal(stats(zb).frames, 4);
	assert_int_equal(stats(zb).buddied, 2);
	zbud_destroy(zb);
}

static void test_first_slot_refilled(void **state)
{
	struct zbud *zb = zbud_create(8);
	const unsigned char *base;
	uint32_t h0, h1, h2;

	h0 = put(zb, false, 300, 1);
	h1 = put(zb, false, 500, 2);
	base = zbud_data(zb, h0, NULL);
	zbud_release(zb, h0);
	assert_null(zbud_data(zb, h0, NULL));
	check(zb, h1, 500, 2);
	h2 = put(zb, false, 700, 3);
	assert_int_equal(h2, h0);                   /* same frame, first slot */
	assert_true(zbud_data(zb, h2, NULL) == base);
	check(zb, h1, 500, 2);
	check(zb, h2, 700, 3);
	assert_int_equal(stats(zb).frames, 1);
	zbud_destroy(zb);
}

static void test_kinds_apart(void **state)
{
	struct zbud *zb = zbud_create(8);
	uint32_t he, hp, he2, hp2;
	struct zbud_stats s;

	he = put(zb, false, 100, 1);
	hp = put(zb, true, 100, 2);
	assert_int_not_equal(ZBUD_HANDLE_FRAME(he), ZBUD_HANDLE_FRAME(hp));
	he2 = put(zb, false, 100, 3);
	hp2 = put(zb, true, 100, 4);
	assert_int_equal(ZBUD_HANDLE_FRAME(he), ZBUD_HANDLE_FRAME(he2));
	assert_int_equal(ZBUD_HANDLE_FRAME(hp), ZBUD_HANDLE_FRAME(hp2));
	s = stats(zb);
	assert_int_equal(s.frames, 2);
	assert_int_equal(s.frames_eph, 1);
	assert_int_equal(s.frames_pers, 1);
	zbud_destroy(zb);
}

static void test_frame_reuse(void **state)
{
	struct zbud *zb = zbud_create(8);
	uint64_t meta;
	uint32_t h, h2;

	h = put(zb, true, 3000, 1);
	put(zb, true, 3000, 2);
	meta = stats(zb).meta_bytes;
	zbud_release(zb, h);
	assert_int_equal(stats(zb).frames, 1);
	h2 = put(zb, false, 3000, 3);          /* freed frame reused, now eph */
	assert_int_equal(ZBUD_HANDLE_FRAME(h2), ZBUD_HANDLE_FRAME(h));
	assert_int_equal(stats(zb).meta_bytes, meta);
	assert_int_equal(stats(zb).frames_eph, 1);
	assert_int_equal(stats(zb).frames_pers, 1);
	zbud_destroy(zb);
}

/* ---- LRU ---------------------------------------------------------------- */

static void test_lru_order(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t a, b, c;

	a = put(zb, false, 3000, 1);
	b = put(zb, false, 3000, 2);
	c = put(zb, false, 3000, 3);
	assert_int_equal(zbud_zombify_lru(zb, true, &v), -ENOENT);
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(a));
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(b));
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(c));
	assert_int_equal(zbud_zombify_lru(zb, false, &v), -ENOENT);
	assert_int_equal(stats(zb).zombies, 3);
	zbud_destroy(zb);
}

static void test_lru_restore_to_tail(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t a, b, c, h;

	a = put(zb, true, CH(20), 1);           /* 44 chunks free */
	b = put(zb, true, CH(47), 2);           /* 17 free */
	c = put(zb, true, CH(47), 3);
	h = put(zb, true, CH(32), 4);           /* fits only a: a moves to the tail */
	assert_int_equal(ZBUD_HANDLE_FRAME(h), ZBUD_HANDLE_FRAME(a));
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(b));
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(c));
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(a));
	assert_int_equal(v.n, 2);
	assert_int_equal(zbud_zombify_lru(zb, true, &v), -ENOENT);
	zbud_destroy(zb);
}

static void test_lru_release_keeps_frame(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t a0, a1, b;

	a0 = put(zb, false, 1000, 1);
	a1 = put(zb, false, 1000, 2);
	b = put(zb, false, 3000, 3);
	assert_int_not_equal(ZBUD_HANDLE_FRAME(a0), ZBUD_HANDLE_FRAME(b));
	zbud_release(zb, a0);                   /* release does not refresh a */
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(a1));
	assert_int_equal(v.n, 1);
	assert_int_equal(v.handle[0], a1);
	zbud_destroy(zb);
}

/* ---- zombies ------------------------------------------------------------ */

static void test_zombie_victim(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t h0, h1;

	h0 = put(zb, true, 1234, 10);
	h1 = put(zb, true, 567, 20);
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(h0));
	assert_int_equal(v.n, 2);
	assert_int_equal(v.handle[0], h0);
	assert_int_equal(v.handle[1], h1);
	assert_int_equal(v.len[0], 1234);
	assert_int_equal(v.len[1], 567);
	assert_int_equal(v.ref[0].objno, 10);
	assert_int_equal(v.ref[0].index, 11);
	assert_int_equal(v.ref[1].objno, 20);
	assert_int_equal(v.ref[1].index, 21);
	zbud_destroy(zb);
}

static void test_zombie_data_survives_release(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	struct zbud_stats s;
	uint32_t h0, h1;

	h0 = put(zb, false, 1500, 1);
	h1 = put(zb, false, 2500, 2);
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	zbud_release(zb, h0);
	zbud_release(zb, h1);
	check(zb, h0, 1500, 1);
	check(zb, h1, 2500, 2);
	s = stats(zb);
	assert_int_equal(s.frames, 1);
	assert_int_equal(s.zombies, 1);
	assert_int_equal(s.buddies, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.buddied, 0);
	zbud_zombie_done(zb, v.frame);
	s = stats(zb);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.frames_eph, 0);
	assert_int_equal(s.zombies, 0);
	assert_null(zbud_data(zb, h0, NULL));
	assert_null(zbud_data(zb, h1, NULL));
	assert_int_equal(zbud_zombify_lru(zb, false, &v), -ENOENT);
	zbud_destroy(zb);
}

static void test_zombie_done_relists(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t h0, h1, h2, other;

	h0 = put(zb, false, CH(20), 1);
	h1 = put(zb, false, CH(20), 2);
	other = put(zb, false, CH(50), 3);      /* a younger frame */
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(h0));
	zbud_release(zb, h0);
	zbud_zombie_done(zb, v.frame);
	assert_int_equal(stats(zb).frames, 2);
	assert_int_equal(stats(zb).zombies, 0);
	check(zb, h1, CH(20), 2);
	/* back on the unbuddied list: 44 chunks free, a 30-chunk store lands there */
	h2 = put(zb, false, CH(30), 4);
	assert_int_equal(h2, h0);
	check(zb, h2, CH(30), 4);
	check(zb, h1, CH(20), 2);
	/* and at the LRU tail, then refreshed by that store: other is oldest */
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(other));
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(h0));
	zbud_destroy(zb);
}

static void test_zombie_done_to_lru_tail(void **state)
{
	struct zbud *zb = zbud_create(8);
	struct zbud_victim v;
	uint32_t a, b;

	a = put(zb, true, 3000, 1);
	b = put(zb, true, 3000, 2);
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(a));
	zbud_zombie_done(zb, v.frame);          /* live buddy: back, at the tail */
	check(zb, a, 3000, 1);
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(b));
	assert_int_equal(zbud_zombify_lru(zb, true, &v), 0);
	assert_int_equal(v.frame, ZBUD_HANDLE_FRAME(a));
	zbud_destroy(zb);
}

static void test_zombie_not_stored_into(void **state)
{
	struct zbud *zb = zbud_create(2);
	unsigned char buf[100] = { 0 };
	struct zbud_ref ref = { 0, 0 };
	struct zbud_victim v;
	uint32_t h, h2, hx;

	h = put(zb, false, 100, 1);             /* unbuddied, lots of room */
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	h2 = put(zb, false, 100, 2);
	assert_int_not_equal(ZBUD_HANDLE_FRAME(h2), ZBUD_HANDLE_FRAME(h));
	/* budget of two, both in use (one a zombie): full */
	assert_int_equal(stats(zb).frames, 2);
	hx = put(zb, false, 100, 3);            /* pairs with h2's frame */
	assert_int_equal(ZBUD_HANDLE_FRAME(hx), ZBUD_HANDLE_FRAME(h2));
	assert_int_equal(zbud_store(zb, false, buf, 100, ref, &hx), -ENOSPC);
	assert_int_equal(zbud_store(zb, true, buf, 100, ref, &hx), -ENOSPC);
	check(zb, h, 100, 1);
	zbud_release(zb, h);
	zbud_zombie_done(zb, v.frame);          /* frees the frame */
	h = put(zb, true, 100, 4);
	assert_int_equal(ZBUD_HANDLE_FRAME(h), v.frame);
	zbud_destroy(zb);
}

static void test_zombie_release_twice(void **state)
{
	struct zbud *zb = zbud_create(4);
	struct zbud_victim v;
	struct zbud_stats s;
	uint32_t h0, h1;

	h0 = put(zb, false, 100, 1);
	h1 = put(zb, false, 100, 2);
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	zbud_release(zb, h0);
	zbud_release(zb, h0);                   /* ignored */
	s = stats(zb);
	assert_int_equal(s.buddies, 1);
	assert_int_equal(s.bytes, 100);
	zbud_zombie_done(zb, v.frame);
	zbud_zombie_done(zb, v.frame);          /* not a zombie any more: ignored */
	s = stats(zb);
	assert_int_equal(s.frames, 1);
	assert_int_equal(s.zombies, 0);
	assert_int_equal(s.buddies, 1);
	check(zb, h1, 100, 2);
	assert_null(zbud_data(zb, h0, NULL));
	zbud_destroy(zb);
}

/* ---- budget ------------------------------------------------------------- */

static void test_budget(void **state)
{
	struct zbud *zb = zbud_create(4);
	unsigned char buf[3000] = { 0 };
	struct zbud_ref ref = { 0, 0 };
	uint32_t h[4], hx = 0;
	int i;

	for (i = 0; i < 4; i++)
		h[i] = put(zb, true, 3000, (uint32_t)i);
	assert_int_equal(zbud_store(zb, true, buf, 3000, ref, &hx), -ENOSPC);
	assert_int_equal(zbud_store(zb, false, buf, 64, ref, &hx), -ENOSPC);
	assert_int_equal(stats(zb).frames, 4);
	/* a small persistent page still pairs in a full budget */
	hx = put(zb, true, CH(17), 9);
	assert_int_equal(zbud_store(zb, true, buf, CH(17) + 1, ref, &hx), -ENOSPC);
	assert_int_not_equal(ZBUD_HANDLE_FRAME(hx), ZBUD_HANDLE_FRAME(h[2]));
	zbud_release(zb, h[2]);
	hx = put(zb, false, 3000, 10);
	assert_int_equal(ZBUD_HANDLE_FRAME(hx), ZBUD_HANDLE_FRAME(h[2]));
	assert_int_equal(stats(zb).frames, 4);
	for (i = 0; i < 4; i++)
		if (i != 2)
			check(zb, h[i], 3000, (uint32_t)i);
	check(zb, hx, 3000, 10);
	zbud_destroy(zb);
}

/* ---- data --------------------------------------------------------------- */

static void test_bad_handles(void **state)
{
	struct zbud *zb = zbud_create(4);
	struct zbud_stats before, after;
	struct zbud_victim v;
	unsigned len = 99;
	uint32_t h;

	h = put(zb, false, 100, 1);
	before = stats(zb);
	zbud_release(zb, ZBUD_HANDLE(3, 0));    /* in budget, never used */
	zbud_release(zb, ZBUD_HANDLE(1000, 1)); /* out of range */
	zbud_release(zb, UINT32_MAX);
	zbud_release(zb, h ^ 1);                /* the empty slot */
	zbud_zombie_done(zb, ZBUD_HANDLE_FRAME(h)); /* not a zombie */
	zbud_zombie_done(zb, 1000);
	zbud_zombie_done(zb, UINT32_MAX);
	assert_null(zbud_data(zb, ZBUD_HANDLE(1000, 0), &len));
	assert_int_equal(len, 0);
	assert_null(zbud_data(zb, UINT32_MAX, NULL));
	assert_null(zbud_data(zb, h ^ 1, NULL));
	after = stats(zb);
	assert_int_equal(after.bad_handles, before.bad_handles + 7);
	after.bad_handles = before.bad_handles;
	assert_memory_equal(&before, &after, sizeof(before));
	check(zb, h, 100, 1);
	zbud_release(zb, h);
	zbud_release(zb, h);                    /* twice */
	assert_int_equal(stats(zb).frames, 0);
	assert_int_equal(zbud_zombify_lru(zb, false, &v), -ENOENT);
	h = put(zb, false, 100, 2);
	check(zb, h, 100, 2);
	zbud_destroy(zb);
}

/* ---- figures ------------------------------------------------------------ */

static void test_stats(void **state)
{
	struct zbud *zb = zbud_create(16);
	struct zbud_victim v;
	struct zbud_stats s0, s;
	uint32_t a;

	s0 = stats(zb);
	assert_int_equal(s0.frames, 0);
	assert_int_equal(s0.buddies, 0);
	assert_int_equal(s0.max_frames, 16);
	assert_true(s0.meta_bytes > 0 && s0.meta_bytes < 8192);
	a = put(zb, true, 100, 1);
	put(zb, true, 200, 2);
	put(zb, false, 3000, 3);
	s = stats(zb);
	assert_int_equal(s.frames, 2);
	assert_int_equal(s.frames_pers, 1);
	assert_int_equal(s.frames_eph, 1);
	assert_int_equal(s.buddied, 1);
	assert_int_equal(s.buddies, 3);
	assert_int_equal(s.bytes, 3300);
	assert_int_equal(s.zombies, 0);
	assert_int_equal(s.max_frames, 16);
	/* at most 40 bytes per frame touched */
	assert_true(s.meta_bytes > s0.meta_bytes);
	assert_true(s.meta_bytes - s0.meta_bytes <= 2 * 40);
	zbud_release(zb, a);
	s = stats(zb);
	assert_int_equal(s.buddied, 0);
	assert_int_equal(s.buddies, 2);
	assert_int_equal(s.bytes, 3200);
	assert_int_equal(zbud_zombify_lru(zb, false, &v), 0);
	s = stats(zb);
	assert_int_equal(s.zombies, 1);
	assert_int_equal(s.frames, 2);
	assert_int_equal(s.frames_eph, 1);
	zbud_destroy(zb);
}

/* ---- threads ------------------------------------------------------------ */

#define ST_THREADS 4
#define ST_SLOTS 256
#define ST_ROUNDS 50000

struct stress {
	struct zbud *zb;
	unsigned id;
	uint32_t h[ST_SLOTS];
	unsigned len[ST_SLOTS];
	uint32_t seed[ST_SLOTS];
	uint64_t kept_bytes;
	unsigned kept;
	unsigned errors;
};

static int stress_stop;                 /* atomic */

static void *stress_worker(void *arg)
{
	struct stress *st = arg;
	unsigned r = st->id * 7919u + 1;
	unsigned char buf[ZBUD_BUDDY_MAX];
	struct zbud_ref ref;
	int i, k;

	for (i = 0; i < ST_ROUNDS; i++) {
		k = rand_r(&r) % ST_SLOTS;
		if (st->len[k]) {
			const void *p;
			unsigned got;

			zalloc_suite_fill(buf, st->len[k], st->seed[k]);
			p = zbud_data(st->zb, st->h[k], &got);
			if (!p || got != st->len[k] || memcmp(p, buf, got) != 0)
				st->errors++;
			zbud_release(st->zb, st->h[k]);
			st->len[k] = 0;
			continue;
		}
		st->len[k] = 1 + (unsigned)rand_r(&r) % ZBUD_BUDDY_MAX;
		st->seed[k] = (uint32_t)rand_r(&r);
		ref.objno = st->id;
		ref.index = (uint32_t)k;
		zalloc_suite_fill(buf, st->len[k], st->seed[k]);
		if (zbud_store(st->zb, k & 1, buf, st->len[k], ref, &st->h[k]) != 0) {
			st->errors++;
			st->len[k] = 0;
		}
	}
	for (k = 0; k < ST_SLOTS; k++) {
		if (st->len[k]) {
			st->kept++;
			st->kept_bytes += st->len[k];
		}
	}
	return NULL;
}

/* Zombifies ephemeral frames and hands them back, while the workers run. */
static void *stress_evictor(void *arg)
{
	struct zbud *zb = arg;
	struct zbud_victim v;

	while (!__atomic_load_n(&stress_stop, __ATOMIC_ACQUIRE)) {
		if (zbud_zombify_lru(zb, false, &v) != 0)
			continue;
		if (v.n < 1 || v.n > 2)
			return (void *)1;
		zbud_zombie_done(zb, v.frame);
	}
	return NULL;
}

static void test_threads(void **state)
{
	/* one frame per live buddy at worst, plus the evictor's zombie */
	struct zbud *zb = zbud_create(ST_THREADS * ST_SLOTS + 1);
	static struct stress st[ST_THREADS];
	pthread_t tid[ST_THREADS], ev;
	uint64_t kept = 0, bytes = 0;
	struct zbud_stats s;
	void *ret;
	int t, k;

	assert_non_null(zb);
	__atomic_store_n(&stress_stop, 0, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&ev, NULL, stress_evictor, zb), 0);
	for (t = 0; t < ST_THREADS; t++) {
		memset(&st[t], 0, sizeof(st[t]));
		st[t].zb = zb;
		st[t].id = (unsigned)t;
		assert_int_equal(pthread_create(&tid[t], NULL, stress_worker, &st[t]), 0);
	}
	for (t = 0; t < ST_THREADS; t++) {
		assert_int_equal(pthread_join(tid[t], NULL), 0);
		assert_int_equal(st[t].errors, 0);
		kept += st[t].kept;
		bytes += st[t].kept_bytes;
	}
	__atomic_store_n(&stress_stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(ev, &ret), 0);
	assert_null(ret);
	s = stats(zb);
	assert_int_equal(s.buddies, kept);
	assert_int_equal(s.bytes, bytes);
	assert_int_equal(s.zombies, 0);
	assert_int_equal(s.frames, s.frames_eph + s.frames_pers);
	assert_true(s.frames * 2 >= kept && s.frames <= kept);
	assert_int_equal(s.frames + s.buddied, kept);
	for (t = 0; t < ST_THREADS; t++) {
		for (k = 0; k < ST_SLOTS; k++) {
			if (!st[t].len[k])
				continue;
			check(zb, st[t].h[k], st[t].len[k], st[t].seed[k]);
			zbud_release(zb, st[t].h[k]);
		}
	}
	s = stats(zb);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.buddies, 0);
	assert_int_equal(s.buddied, 0);
	zbud_destroy(zb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_store_edges),
		cmocka_unit_test(test_pair_offsets),
		cmocka_unit_test(test_pair_largest),
		cmocka_unit_test(test_fullest_that_fits),
		cmocka_unit_test(test_first_slot_refilled),
		cmocka_unit_test(test_kinds_apart),
		cmocka_unit_test(test_frame_reuse),
		cmocka_unit_test(test_lru_order),
		cmocka_unit_test(test_lru_restore_to_tail),
		cmocka_unit_test(test_lru_release_keeps_frame),
		cmocka_unit_test(test_zombie_victim),
		cmocka_unit_test(test_zombie_data_survives_release),
		cmocka_unit_test(test_zombie_done_relists),
		cmocka_unit_test(test_zombie_done_to_lru_tail),
		cmocka_unit_test(test_zombie_not_stored_into),
		cmocka_unit_test(test_zombie_release_twice),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_bad_handles),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_threads),
	};

	const struct zalloc_ops *ops = zalloc_ops(ZALLOC_ZBUD);
	int failed;

	zalloc_suite_use(ops);
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	return failed + zalloc_suite_run(ops);
}
