/*
 * test_client.c - libramster against a real ramsterd: connections, pools,
 * and the tmem contract (article Part 2 and Appendix B) seen by a client.
 *
 * Every case starts its own daemon (harness.c) so counters start from zero
 * and one failure cannot leak into the next case. A get may return a page or
 * an error, never wrong data: every hit is compared byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ramster.h"
#include "tests/integration/harness.h"

#define PAGE RAMSTER_PAGE_SIZE

/* One daemon and one client for a case. */
struct fix {
	struct harness h;
	ramster *r;
};

static const unsigned char uuid_a[16] = { 0xa1, 0x5e, 0x77, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 };
static const unsigned char uuid_b[16] = { 0xb2, 0x5e, 0x77, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14 };

/* ---- fixtures ------------------------------------------------------------ */

static int fix_start(void **state, const char *const *args)
{
	struct fix *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (harness_start(&f->h, args) < 0) {
		free(f);
		return -1;
	}
	f->r = harness_connect(&f->h);
	if (!f->r) {
		fprintf(stderr, "connect %s: %s\n", f->h.sock, strerror(errno));
		harness_stop(&f->h);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int setup(void **state)
{
	static const char *const args[] = { "--local-mb", "64", NULL };

	return fix_start(state, args);
}

static int setup_small(void **state)
{
	static const char *const args[] = { "--local-mb", "1", NULL };

	return fix_start(state, args);
}

static int teardown(void **state)
{
	struct fix *f = *state;
	int rc;

	ramster_close(f->r);
	rc = harness_stop(&f->h);
	free(f);
	if (rc < 0)
		fprintf(stderr, "daemon did not stop cleanly: %s\n", strerror(-rc));
	return rc < 0 ? -1 : 0;
}

/* ---- helpers ------------------------------------------------------------- */

enum kind { K_ZERO, K_TEXT, K_RANDOM };

static void fill(void *page, enum kind k, uint64_t seed)
{
	switch (k) {
	case K_ZERO:
		harness_page_zero(page);
		break;
	case K_TEXT:
		harness_page_text(page, seed);
		break;
	case K_RANDOM:
		harness_page_random(page, seed);
		break;
	}
}

/* Get (pool, oid, index) and require exactly want. */
static void expect_page(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index,
			const void *want)
{
	unsigned char got[PAGE];

	memset(got, 0xa5, sizeof(got));
	assert_int_equal(ramster_get(r, pool, oid, index, got), 0);
	assert_memory_equal(got, want, PAGE);
}

/* Get (pool, oid, index) and require -ENOENT. */
static void expect_absent(ramster *r, int pool, const struct ramster_oid *oid, uint32_t index)
{
	unsigned char got[PAGE];

	assert_int_equal(ramster_get(r, pool, oid, index, got), -ENOENT);
}

static uint64_t stat_of(ramster *r, const char *name)
{
	uint64_t v = 0;
	int rc = harness_stat(r, name, &v);

	if (rc < 0) {
		fprintf(stderr, "no stat %s (%s); the node has:\n", name, strerror(-rc));
		harness_stats_dump(r);
	}
	assert_int_equal(rc, 0);
	return v;
}

/* ---- connections --------------------------------------------------------- */

static void test_open_close(void **state)
{
	struct fix *f = *state;
	ramster *r;
	int i;

	for (i = 0; i < 8; i++) {
		r = harness_connect(&f->h);
		assert_non_null(r);
		ramster_close(r);
	}
	ramster_close(NULL);
	assert_true(harness_alive(&f->h));
}

static void test_open_env(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(1, 1);
	ramster *r;
	int pool;

	assert_int_equal(setenv("RAMSTER_SOCKET", f->h.sock, 1), 0);
	r = ramster_open(NULL);
	unsetenv("RAMSTER_SOCKET");
	assert_non_null(r);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	harness_page_text(page, 1);
	assert_int_equal(ramster_put(r, pool, &oid, 0, page), 0);
	expect_page(r, pool, &oid, 0, page);
	ramster_close(r);
}

static void test_open_env_missing(void **state)
{
	char path[256];
	ramster *r;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/ramster-no-such-dir-%d/sock", (int)getpid());
	assert_int_equal(setenv("RAMSTER_SOCKET", path, 1), 0);
	errno = 0;
	r = ramster_open(NULL);
	unsetenv("RAMSTER_SOCKET");
	assert_null(r);
	assert_int_equal(errno, ENOENT);
}

static void test_open_missing(void **state)
{
	struct fix *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ramster *r;
	int fd;

	errno = 0;
	r = ramster_open("/nonexistent-ramster/sock");
	assert_null(r);
	assert_int_equal(errno, ENOENT);

	/* a socket file nobody listens on: refused */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/dead", f->h.dir);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	errno = 0;
	r = ramster_open(sa.sun_path);
	assert_null(r);
	assert_int_equal(errno, ECONNREFUSED);
	unlink(sa.sun_path);
}

/* ---- pools --------------------------------------------------------------- */

static void test_pool_private_kinds(void **state)
{
	struct fix *f = *state;
	int p1, p2, p3;

	p1 = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	p2 = ramster_pool_new(f->r, 0, NULL);
	p3 = ramster_pool_new(f->r, 0, NULL);
	assert_true(p1 >= 0);
	assert_true(p2 >= 0);
	assert_true(p3 >= 0);
	assert_int_not_equal(p1, p2);
	assert_int_not_equal(p2, p3);
	assert_int_not_equal(p1, p3);
}

static void test_pool_destroy(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(2, 2);
	uint64_t pages0 = stat_of(f->r, "tmem_pages");
	uint64_t pools0 = stat_of(f->r, "tmem_pools");
	uint32_t i;
	int pool;

	pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0 + 1);
	for (i = 0; i < 16; i++) {
		harness_page_text(page, i);
		assert_int_equal(ramster_put(f->r, pool, &oid, i, page), 0);
	}
	assert_int_equal(stat_of(f->r, "tmem_pages"), pages0 + 16);
	assert_int_equal(ramster_pool_destroy(f->r, pool), 0);
	assert_int_equal(stat_of(f->r, "tmem_pages"), pages0);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0);
	/* the pool is gone for every call */
	assert_int_equal(ramster_get(f->r, pool, &oid, 0, page), -ENOENT);
	assert_true(ramster_put(f->r, pool, &oid, 0, page) < 0);
	assert_int_equal(ramster_pool_destroy(f->r, pool), -ENOENT);
	assert_int_equal(ramster_pool_destroy(f->r, 12345), -ENOENT);
	/* and the connection still works */
	pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, page), 0);
	expect_page(f->r, pool, &oid, 0, page);
}

static void test_pool_shared_same_pages(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(3, 3);
	ramster *b = harness_connect(&f->h);
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	pb = ramster_pool_new(b, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	assert_true(pa >= 0);
	assert_true(pb >= 0);
	harness_page_text(page, 33);
	assert_int_equal(ramster_put(f->r, pa, &oid, 7, page), 0);
	expect_page(b, pb, &oid, 7, page);
	expect_page(f->r, pa, &oid, 7, page);
	/* B's put replaces A's page, for both */
	harness_page_text(page, 34);
	assert_int_equal(ramster_put(b, pb, &oid, 7, page), 0);
	expect_page(f->r, pa, &oid, 7, page);
	/* B's flush removes it for A */
	assert_int_equal(ramster_flush(b, pb, &oid, 7), 0);
	expect_absent(f->r, pa, &oid, 7);
	ramster_close(b);
}

static void test_pool_shared_distinct_uuids(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(3, 4);
	ramster *b = harness_connect(&f->h);
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	pb = ramster_pool_new(b, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_b);
	assert_true(pa >= 0);
	assert_true(pb >= 0);
	harness_page_text(page, 35);
	assert_int_equal(ramster_put(f->r, pa, &oid, 0, page), 0);
	expect_absent(b, pb, &oid, 0);
	ramster_close(b);
}

static void test_pool_shared_flag_mismatch(void **state)
{
	struct fix *f = *state;
	ramster *b = harness_connect(&f->h);
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	assert_true(pa >= 0);
	pb = ramster_pool_new(b, RAMSTER_SHARED, uuid_a);
	assert_true(pb < 0);
	/* B's connection still works, and the right flags still reach the pool */
	pb = ramster_pool_new(b, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	assert_true(pb >= 0);
	ramster_close(b);
}

static void test_pool_shared_lifetime(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(3, 5);
	ramster *b = harness_connect(&f->h);
	uint64_t pools0 = stat_of(f->r, "tmem_pools");
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	pb = ramster_pool_new(b, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	assert_true(pa >= 0 && pb >= 0);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0 + 1);
	harness_page_text(page, 36);
	assert_int_equal(ramster_put(f->r, pa, &oid, 1, page), 0);
	/* A lets go: the pool and its page stay for B */
	assert_int_equal(ramster_pool_destroy(f->r, pa), 0);
	assert_int_equal(ramster_get(f->r, pa, &oid, 1, page), -ENOENT);
	harness_page_text(page, 36);
	expect_page(b, pb, &oid, 1, page);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0 + 1);
	/* B lets go: freed */
	assert_int_equal(ramster_pool_destroy(b, pb), 0);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0);
	ramster_close(b);
}

static void test_pool_shared_needs_uuid(void **state)
{
	struct fix *f = *state;
	ramster *b = harness_connect(&f->h);

	assert_non_null(b);
	assert_true(ramster_pool_new(b, RAMSTER_SHARED | RAMSTER_PERSISTENT, NULL) < 0);
	ramster_close(b);
	assert_true(harness_alive(&f->h));
	assert_true(ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL) >= 0);
}

/* ---- round trips ---------------------------------------------------------- */

static void round_trip(struct fix *f, unsigned flags, enum kind k)
{
	unsigned char page[PAGE], got[PAGE];
	int pool = ramster_pool_new(f->r, flags, NULL);
	uint32_t i;
	int rc;

	assert_true(pool >= 0);
	for (i = 0; i < 32; i++) {
		struct ramster_oid oid = harness_oid(10 + k, i / 4);

		fill(page, k, i);
		rc = ramster_put(f->r, pool, &oid, i, page);
		if (k == K_RANDOM) {
			/* tmem may refuse an incompressible page, never keep it wrong */
			assert_true(rc == 0 || rc == -E2BIG);
		} else {
			assert_int_equal(rc, 0);
		}
		memset(got, 0x5a, sizeof(got));
		if (rc == 0) {
			assert_int_equal(ramster_get(f->r, pool, &oid, i, got), 0);
			assert_memory_equal(got, page, PAGE);
		} else {
			assert_int_equal(ramster_get(f->r, pool, &oid, i, got), -ENOENT);
		}
	}
}

static void test_rt_pers_zero(void **state)
{
	round_trip(*state, RAMSTER_PERSISTENT, K_ZERO);
}

static void test_rt_pers_text(void **state)
{
	round_trip(*state, RAMSTER_PERSISTENT, K_TEXT);
}

static void test_rt_pers_random(void **state)
{
	round_trip(*state, RAMSTER_PERSISTENT, K_RANDOM);
}

static void test_rt_eph_zero(void **state)
{
	round_trip(*state, 0, K_ZERO);
}

static void test_rt_eph_text(void **state)
{
	round_trip(*state, 0, K_TEXT);
}

static void test_rt_eph_random(void **state)
{
	round_trip(*state, 0, K_RANDOM);
}

static void test_rt_shared_text(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(11, 0);
	int pool = ramster_pool_new(f->r, RAMSTER_SHARED | RAMSTER_PERSISTENT, uuid_b);

	assert_true(pool >= 0);
	harness_page_text(page, 99);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, page), 0);
	expect_page(f->r, pool, &oid, 0, page);
}

/* Page i of the almost-zero kind: one non-zero byte, the rest zero. */
static void test_rt_nearly_zero(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	uint32_t i;

	assert_true(pool >= 0);
	for (i = 0; i < 8; i++) {
		struct ramster_oid oid = harness_oid(12, 0);

		memset(page, 0, sizeof(page));
		page[(i * 577) % PAGE] = (unsigned char)(i + 1);
		assert_int_equal(ramster_put(f->r, pool, &oid, i, page), 0);
	}
	for (i = 0; i < 8; i++) {
		struct ramster_oid oid = harness_oid(12, 0);

		memset(page, 0, sizeof(page));
		page[(i * 577) % PAGE] = (unsigned char)(i + 1);
		expect_page(f->r, pool, &oid, i, page);
	}
}

/* ---- semantics ------------------------------------------------------------ */

static void test_persistent_stays(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	uint32_t i, round;

	assert_true(pool >= 0);
	for (i = 0; i < 256; i++) {
		struct ramster_oid oid = harness_oid(20, i % 7);

		fill(page, i % 5 ? K_TEXT : K_ZERO, 1000 + i);
		assert_int_equal(ramster_put(f->r, pool, &oid, i, page), 0);
	}
	for (round = 0; round < 3; round++) {
		for (i = 0; i < 256; i++) {
			struct ramster_oid oid = harness_oid(20, i % 7);

			fill(page, i % 5 ? K_TEXT : K_ZERO, 1000 + i);
			expect_page(f->r, pool, &oid, i, page);
		}
	}
}

static void test_eph_private_get_destructive(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(21, 0);
	int pool = ramster_pool_new(f->r, 0, NULL);

	assert_true(pool >= 0);
	harness_page_text(page, 21);
	assert_int_equal(ramster_put(f->r, pool, &oid, 3, page), 0);
	expect_page(f->r, pool, &oid, 3, page);
	expect_absent(f->r, pool, &oid, 3);
	/* a zero page too */
	harness_page_zero(page);
	assert_int_equal(ramster_put(f->r, pool, &oid, 4, page), 0);
	expect_page(f->r, pool, &oid, 4, page);
	expect_absent(f->r, pool, &oid, 4);
	/* and a new put brings it back */
	harness_page_text(page, 22);
	assert_int_equal(ramster_put(f->r, pool, &oid, 3, page), 0);
	expect_page(f->r, pool, &oid, 3, page);
}

static void test_eph_shared_get_not_destructive(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(22, 0);
	ramster *b = harness_connect(&f->h);
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_SHARED, uuid_a);
	pb = ramster_pool_new(b, RAMSTER_SHARED, uuid_a);
	assert_true(pa >= 0 && pb >= 0);
	harness_page_text(page, 23);
	assert_int_equal(ramster_put(f->r, pa, &oid, 0, page), 0);
	expect_page(f->r, pa, &oid, 0, page);
	expect_page(f->r, pa, &oid, 0, page);
	expect_page(b, pb, &oid, 0, page);
	expect_page(b, pb, &oid, 0, page);
	ramster_close(b);
}

static void test_pers_get_not_destructive(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(23, 0);
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	harness_page_text(page, 24);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, page), 0);
	expect_page(f->r, pool, &oid, 0, page);
	expect_page(f->r, pool, &oid, 0, page);
}

static void test_get_get_coherency(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(24, 0);
	int pers = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	int eph = ramster_pool_new(f->r, 0, NULL);
	int i;

	assert_true(pers >= 0 && eph >= 0);
	/* never put: every get fails */
	for (i = 0; i < 3; i++) {
		expect_absent(f->r, pers, &oid, 0);
		expect_absent(f->r, eph, &oid, 0);
	}
	/* after a flush: every get fails */
	harness_page_text(page, 25);
	assert_int_equal(ramster_put(f->r, pers, &oid, 0, page), 0);
	assert_int_equal(ramster_flush(f->r, pers, &oid, 0), 0);
	for (i = 0; i < 3; i++)
		expect_absent(f->r, pers, &oid, 0);
	/* after a destructive get: every get fails */
	assert_int_equal(ramster_put(f->r, eph, &oid, 0, page), 0);
	expect_page(f->r, eph, &oid, 0, page);
	for (i = 0; i < 3; i++)
		expect_absent(f->r, eph, &oid, 0);
	/* after a refused put to a new handle: every get fails */
	harness_page_random(page, 26);
	if (ramster_put(f->r, pers, &oid, 9, page) < 0)
		for (i = 0; i < 3; i++)
			expect_absent(f->r, pers, &oid, 9);
}

static void put_put_get(struct fix *f, unsigned flags)
{
	unsigned char a[PAGE], b[PAGE];
	struct ramster_oid oid = harness_oid(25, flags);
	int pool = ramster_pool_new(f->r, flags, NULL);

	assert_true(pool >= 0);
	harness_page_text(a, 1);
	harness_page_text(b, 2);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, a), 0);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, b), 0);
	expect_page(f->r, pool, &oid, 0, b);
	/* text over zero and zero over text */
	harness_page_zero(a);
	assert_int_equal(ramster_put(f->r, pool, &oid, 1, a), 0);
	assert_int_equal(ramster_put(f->r, pool, &oid, 1, b), 0);
	expect_page(f->r, pool, &oid, 1, b);
	assert_int_equal(ramster_put(f->r, pool, &oid, 2, b), 0);
	assert_int_equal(ramster_put(f->r, pool, &oid, 2, a), 0);
	expect_page(f->r, pool, &oid, 2, a);
}

static void test_put_put_get_pers(void **state)
{
	put_put_get(*state, RAMSTER_PERSISTENT);
}

static void test_put_put_get_eph(void **state)
{
	put_put_get(*state, 0);
}

/* A accepted, then B refused: A must be gone (Appendix B, option 2). */
static void put_put_refused(struct fix *f, unsigned flags)
{
	unsigned char a[PAGE], b[PAGE], got[PAGE];
	struct ramster_oid oid = harness_oid(26, flags);
	int pool = ramster_pool_new(f->r, flags, flags & RAMSTER_SHARED ? uuid_a : NULL);
	uint64_t flushes0 = stat_of(f->r, "tmem_dup_put_flushes");
	int rc;

	assert_true(pool >= 0);
	harness_page_text(a, 3);
	harness_page_random(b, 4);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, a), 0);
	rc = ramster_put(f->r, pool, &oid, 0, b);
	memset(got, 0, sizeof(got));
	if (rc == 0) {
		/* option 1: replaced */
		assert_int_equal(ramster_get(f->r, pool, &oid, 0, got), 0);
		assert_memory_equal(got, b, PAGE);
	} else {
		assert_int_equal(rc, -E2BIG);
		assert_int_equal(ramster_get(f->r, pool, &oid, 0, got), -ENOENT);
		assert_int_equal(ramster_get(f->r, pool, &oid, 0, got), -ENOENT);
		assert_int_equal(stat_of(f->r, "tmem_dup_put_flushes"), flushes0 + 1);
	}
	/* the handle is usable again */
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, a), 0);
	expect_page(f->r, pool, &oid, 0, a);
}

static void test_put_put_refused_pers(void **state)
{
	put_put_refused(*state, RAMSTER_PERSISTENT);
}

static void test_put_put_refused_eph(void **state)
{
	put_put_refused(*state, 0);
}

static void test_put_put_refused_shared(void **state)
{
	put_put_refused(*state, RAMSTER_PERSISTENT | RAMSTER_SHARED);
}

static void test_flush_page(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE], other[PAGE];
	struct ramster_oid oid = harness_oid(27, 0);
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	harness_page_text(page, 5);
	harness_page_text(other, 6);
	assert_int_equal(ramster_put(f->r, pool, &oid, 0, page), 0);
	assert_int_equal(ramster_put(f->r, pool, &oid, 1, other), 0);
	assert_int_equal(ramster_flush(f->r, pool, &oid, 0), 0);
	expect_absent(f->r, pool, &oid, 0);
	assert_int_equal(ramster_flush(f->r, pool, &oid, 0), -ENOENT);
	/* the neighbour is untouched */
	expect_page(f->r, pool, &oid, 1, other);
	/* a flush of something never put, in a pool that does not exist */
	assert_int_equal(ramster_flush(f->r, pool, &oid, 77), -ENOENT);
	assert_int_equal(ramster_flush(f->r, 4321, &oid, 0), -ENOENT);
}

static void test_flush_object(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid o1 = harness_oid(28, 1), o2 = harness_oid(28, 2);
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	uint32_t i;

	assert_true(pool >= 0);
	for (i = 0; i < 40; i++) {
		harness_page_text(page, 100 + i);
		assert_int_equal(ramster_put(f->r, pool, &o1, i, page), 0);
		harness_page_text(page, 200 + i);
		assert_int_equal(ramster_put(f->r, pool, &o2, i, page), 0);
	}
	assert_int_equal(ramster_flush_object(f->r, pool, &o1), 0);
	for (i = 0; i < 40; i++) {
		expect_absent(f->r, pool, &o1, i);
		harness_page_text(page, 200 + i);
		expect_page(f->r, pool, &o2, i, page);
	}
	assert_int_equal(ramster_flush_object(f->r, pool, &o1), -ENOENT);
	/* the object can be filled again */
	harness_page_text(page, 300);
	assert_int_equal(ramster_put(f->r, pool, &o1, 5, page), 0);
	expect_page(f->r, pool, &o1, 5, page);
}

/* ---- isolation ------------------------------------------------------------ */

static void test_isolation_no_pools(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE], got[PAGE];
	struct ramster_oid oid = harness_oid(30, 0);
	ramster *b = harness_connect(&f->h);
	int pa, id;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	assert_true(pa >= 0);
	harness_page_text(page, 30);
	assert_int_equal(ramster_put(f->r, pa, &oid, 0, page), 0);
	/* B owns no pool: every id, A's included, reaches nothing */
	for (id = 0; id < 16; id++) {
		assert_int_equal(ramster_get(b, id, &oid, 0, got), -ENOENT);
		assert_int_equal(ramster_flush(b, id, &oid, 0), -ENOENT);
		assert_int_equal(ramster_flush_object(b, id, &oid), -ENOENT);
		assert_int_equal(ramster_pool_destroy(b, id), -ENOENT);
		assert_true(ramster_put(b, id, &oid, 0, got) < 0);
	}
	expect_page(f->r, pa, &oid, 0, page);
	ramster_close(b);
}

static void test_isolation_own_pool(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE], mine[PAGE];
	struct ramster_oid oid = harness_oid(31, 0);
	ramster *b = harness_connect(&f->h);
	int pa, pb;

	assert_non_null(b);
	pa = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	pb = ramster_pool_new(b, RAMSTER_PERSISTENT, NULL);
	assert_true(pa >= 0 && pb >= 0);
	harness_page_text(page, 31);
	assert_int_equal(ramster_put(f->r, pa, &oid, 0, page), 0);
	/* B names A's number: it reaches only its own (empty) pool, if any */
	expect_absent(b, pa, &oid, 0);
	expect_absent(b, pb, &oid, 0);
	harness_page_text(mine, 32);
	assert_true(ramster_put(b, pa, &oid, 0, mine) <= 0);
	ramster_flush(b, pa, &oid, 0);
	ramster_flush_object(b, pa, &oid);
	expect_page(f->r, pa, &oid, 0, page);
	assert_int_equal(ramster_put(b, pb, &oid, 0, mine), 0);
	expect_page(b, pb, &oid, 0, mine);
	expect_page(f->r, pa, &oid, 0, page);
	assert_int_equal(ramster_pool_destroy(b, pb), 0);
	ramster_pool_destroy(b, pa);
	expect_page(f->r, pa, &oid, 0, page);
	ramster_close(b);
	expect_page(f->r, pa, &oid, 0, page);
}

/* Wait up to 2 s for stat name to read want. @return its last value. */
static uint64_t wait_stat(ramster *r, const char *name, uint64_t want)
{
	uint64_t v = 0, deadline = harness_now_ms() + 2000;

	for (;;) {
		v = stat_of(r, name);
		if (v == want || harness_now_ms() > deadline)
			return v;
		usleep(10000);
	}
}

static void test_close_frees_pools(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	ramster *a = harness_connect(&f->h);
	uint64_t pools0 = stat_of(f->r, "tmem_pools");
	uint64_t pages0 = stat_of(f->r, "tmem_pages");
	int pool[3];
	uint32_t i, k;

	assert_non_null(a);
	pool[0] = ramster_pool_new(a, RAMSTER_PERSISTENT, NULL);
	pool[1] = ramster_pool_new(a, 0, NULL);
	pool[2] = ramster_pool_new(a, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_b);
	for (k = 0; k < 3; k++) {
		struct ramster_oid oid = harness_oid(32, k);

		assert_true(pool[k] >= 0);
		for (i = 0; i < 20; i++) {
			harness_page_text(page, i);
			assert_int_equal(ramster_put(a, pool[k], &oid, i, page), 0);
		}
	}
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0 + 3);
	assert_int_equal(stat_of(f->r, "tmem_pages"), pages0 + 60);
	ramster_close(a);
	assert_int_equal(wait_stat(f->r, "tmem_pools", pools0), pools0);
	assert_int_equal(wait_stat(f->r, "tmem_pages", pages0), pages0);
}

static void test_close_keeps_shared_of_others(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(33, 0);
	ramster *a = harness_connect(&f->h);
	uint64_t pools0 = stat_of(f->r, "tmem_pools");
	int pa, pr;

	assert_non_null(a);
	pr = ramster_pool_new(f->r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	pa = ramster_pool_new(a, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	assert_true(pa >= 0 && pr >= 0);
	harness_page_text(page, 40);
	assert_int_equal(ramster_put(a, pa, &oid, 0, page), 0);
	ramster_close(a);
	usleep(50000);
	assert_int_equal(stat_of(f->r, "tmem_pools"), pools0 + 1);
	expect_page(f->r, pr, &oid, 0, page);
}

/* ---- vectors -------------------------------------------------------------- */

#define VN 64

static enum kind vkind(size_t i)
{
	return i % 4 == 3 ? K_RANDOM : i % 4 == 2 ? K_ZERO : K_TEXT;
}

static void test_putv_getv_mixed(void **state)
{
	struct fix *f = *state;
	struct ramster_iov v[VN + 32];
	unsigned char *buf = malloc((VN + 32) * PAGE), want[PAGE];
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	int rc, stored = 0, hits = 0;
	bool kept[VN + 32];
	size_t i;

	assert_non_null(buf);
	assert_true(pool >= 0);
	for (i = 0; i < VN; i++) {
		v[i].oid = harness_oid(40, i % 5);
		v[i].index = (uint32_t)i;
		v[i].page = buf + i * PAGE;
		v[i].result = 12345;
		fill(v[i].page, vkind(i), i);
	}
	rc = ramster_putv(f->r, pool, v, VN);
	for (i = 0; i < VN; i++) {
		if (vkind(i) == K_RANDOM)
			assert_true(v[i].result == 0 || v[i].result == -E2BIG);
		else
			assert_int_equal(v[i].result, 0);
		kept[i] = v[i].result == 0;
		stored += kept[i];
	}
	assert_int_equal(rc, stored);

	/* read back, with 32 handles never put in between */
	for (i = VN; i < VN + 32; i++) {
		v[i].oid = harness_oid(41, i);
		v[i].index = (uint32_t)i;
		v[i].page = buf + i * PAGE;
		kept[i] = false;
	}
	for (i = 0; i < VN + 32; i++) {
		memset(v[i].page, 0xee, PAGE);
		v[i].result = 12345;
	}
	rc = ramster_getv(f->r, pool, v, VN + 32);
	for (i = 0; i < VN + 32; i++) {
		if (!kept[i]) {
			assert_int_equal(v[i].result, -ENOENT);
			continue;
		}
		assert_int_equal(v[i].result, 0);
		fill(want, vkind(i), i);
		assert_memory_equal(v[i].page, want, PAGE);
		hits++;
	}
	assert_int_equal(rc, hits);
	free(buf);
}

static void test_putv_getv_split(void **state)
{
	struct fix *f = *state;
	const size_t n = 3 * RAMSTER_BATCH_MAX + 17;
	struct ramster_iov *v = calloc(n, sizeof(*v));
	unsigned char *buf = malloc(n * PAGE), want[PAGE];
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	size_t i;

	assert_non_null(v);
	assert_non_null(buf);
	assert_true(pool >= 0);
	for (i = 0; i < n; i++) {
		v[i].oid = harness_oid(42, i / 100);
		v[i].index = (uint32_t)(i * 3);
		v[i].page = buf + i * PAGE;
		fill(v[i].page, i % 3 ? K_TEXT : K_ZERO, 5000 + i);
	}
	assert_int_equal(ramster_putv(f->r, pool, v, n), (int)n);
	memset(buf, 0xee, n * PAGE);
	assert_int_equal(ramster_getv(f->r, pool, v, n), (int)n);
	for (i = 0; i < n; i++) {
		assert_int_equal(v[i].result, 0);
		fill(want, i % 3 ? K_TEXT : K_ZERO, 5000 + i);
		assert_memory_equal(v[i].page, want, PAGE);
	}
	free(buf);
	free(v);
}

static void test_getv_eph_destructive(void **state)
{
	struct fix *f = *state;
	struct ramster_iov v[8];
	unsigned char buf[8 * PAGE];
	int pool = ramster_pool_new(f->r, 0, NULL);
	size_t i;

	assert_true(pool >= 0);
	for (i = 0; i < 8; i++) {
		v[i].oid = harness_oid(43, 0);
		v[i].index = (uint32_t)i;
		v[i].page = buf + i * PAGE;
		harness_page_text(v[i].page, i);
	}
	assert_int_equal(ramster_putv(f->r, pool, v, 8), 8);
	assert_int_equal(ramster_getv(f->r, pool, v, 8), 8);
	assert_int_equal(ramster_getv(f->r, pool, v, 8), 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(v[i].result, -ENOENT);
}

static void test_putv_duplicates_in_batch(void **state)
{
	struct fix *f = *state;
	struct ramster_iov v[3];
	unsigned char buf[3 * PAGE], got[PAGE];
	struct ramster_oid oid = harness_oid(44, 0);
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	size_t i;

	assert_true(pool >= 0);
	/* one handle three times: the last put wins */
	for (i = 0; i < 3; i++) {
		v[i].oid = oid;
		v[i].index = 9;
		v[i].page = buf + i * PAGE;
		harness_page_text(v[i].page, 70 + i);
	}
	assert_int_equal(ramster_putv(f->r, pool, v, 3), 3);
	assert_int_equal(ramster_get(f->r, pool, &oid, 9, got), 0);
	assert_memory_equal(got, buf + 2 * PAGE, PAGE);
}

static void test_vectors_empty(void **state)
{
	struct fix *f = *state;
	struct ramster_iov v[1];
	int pool = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	assert_int_equal(ramster_putv(f->r, pool, v, 0), 0);
	assert_int_equal(ramster_getv(f->r, pool, v, 0), 0);
	assert_int_equal(ramster_putv(f->r, pool, NULL, 0), 0);
}

static void test_getv_missing_pool(void **state)
{
	struct fix *f = *state;
	struct ramster_iov v[4];
	unsigned char buf[4 * PAGE];
	size_t i;
	int rc;

	for (i = 0; i < 4; i++) {
		v[i].oid = harness_oid(45, 0);
		v[i].index = (uint32_t)i;
		v[i].page = buf + i * PAGE;
		v[i].result = 12345;
	}
	/* the batch fails whole, or item by item: never a hit */
	rc = ramster_getv(f->r, 777, v, 4);
	if (rc != -ENOENT) {
		assert_int_equal(rc, 0);
		for (i = 0; i < 4; i++)
			assert_int_equal(v[i].result, -ENOENT);
	}
	rc = ramster_putv(f->r, 777, v, 4);
	assert_true(rc <= 0);
	if (rc == 0)
		for (i = 0; i < 4; i++)
			assert_true(v[i].result < 0);
	/* the connection is still good */
	assert_true(ramster_pool_new(f->r, 0, NULL) >= 0);
}

/* ---- arguments and administration ---------------------------------------- */

static void test_bad_arguments(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(46, 0);

	harness_page_text(page, 46);
	assert_true(ramster_pool_new(f->r, 1u << 7, NULL) < 0);
	assert_true(ramster_pool_new(f->r, RAMSTER_PERSISTENT, uuid_a) < 0);
	assert_true(ramster_put(f->r, -1, &oid, 0, page) < 0);
	assert_true(ramster_get(f->r, -1, &oid, 0, page) < 0);
	assert_true(ramster_pool_destroy(f->r, -1) < 0);
	/* none of that broke the connection */
	assert_true(ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL) >= 0);
	assert_true(harness_alive(&f->h));
}

static void test_status(void **state)
{
	struct fix *f = *state;
	struct ramster_kv *kv = NULL;
	size_t n = 0, i;

	assert_int_equal(ramster_status(f->r, &kv, &n), 0);
	assert_true(n > 0);
	for (i = 0; i < n; i++) {
		assert_non_null(kv[i].key);
		assert_non_null(kv[i].value);
	}
	ramster_kv_free(kv, n);
	ramster_kv_free(NULL, 0);
}

static void test_pools_listing(void **state)
{
	struct fix *f = *state;
	struct ramster_pool_info *pi = NULL;
	unsigned char page[PAGE];
	struct ramster_oid oid = harness_oid(47, 0);
	int pp = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	int ps = ramster_pool_new(f->r, RAMSTER_SHARED, uuid_b);
	bool seen_p = false, seen_s = false;
	size_t n = 0, i;
	uint32_t k;

	assert_true(pp >= 0 && ps >= 0);
	for (k = 0; k < 5; k++) {
		harness_page_text(page, k);
		assert_int_equal(ramster_put(f->r, pp, &oid, k, page), 0);
	}
	for (k = 0; k < 3; k++) {
		harness_page_text(page, k);
		assert_int_equal(ramster_put(f->r, ps, &oid, k, page), 0);
	}
	assert_int_equal(ramster_pools(f->r, &pi, &n), 0);
	for (i = 0; i < n; i++) {
		if (pi[i].flags == RAMSTER_PERSISTENT && pi[i].pages == 5) {
			assert_int_equal(pi[i].objects, 1);
			assert_int_equal(pi[i].clients, 1);
			seen_p = true;
		}
		if (pi[i].flags == RAMSTER_SHARED && !memcmp(pi[i].uuid, uuid_b, 16)) {
			assert_int_equal(pi[i].pages, 3);
			assert_int_equal(pi[i].clients, 1);
			seen_s = true;
		}
	}
	free(pi);
	assert_true(seen_p);
	assert_true(seen_s);
}

/* ---- several clients at once ---------------------------------------------- */

#define NTHREADS 4
#define NPAGES 1500

struct worker {
	const struct harness *h;
	pthread_barrier_t *bar;
	unsigned id;
	unsigned errors;
	char why[128];
};

static void worker_fail(struct worker *w, const char *what, uint32_t i, int rc)
{
	if (!w->errors++)
		snprintf(w->why, sizeof(w->why), "thread %u: %s at %u: %d", w->id, what, i, rc);
}

static uint64_t wseed(unsigned id, uint32_t i)
{
	return ((uint64_t)id << 32) | i;
}

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	unsigned char page[PAGE], got[PAGE];
	ramster *r = harness_connect(w->h);
	int priv, shared, rc;
	uint32_t i, j;
	unsigned t;

	if (!r) {
		worker_fail(w, "connect", 0, -errno);
		pthread_barrier_wait(w->bar);
		return NULL;
	}
	priv = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	shared = ramster_pool_new(r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid_a);
	if (priv < 0 || shared < 0)
		worker_fail(w, "pool_new", 0, priv < 0 ? priv : shared);
	for (i = 0; i < NPAGES && !w->errors; i++) {
		struct ramster_oid oid = harness_oid(50 + w->id, i / 64);

		harness_page_text(page, wseed(w->id, i));
		rc = ramster_put(r, priv, &oid, i, page);
		if (rc)
			worker_fail(w, "put private", i, rc);
		rc = ramster_put(r, shared, &oid, i, page);
		if (rc)
			worker_fail(w, "put shared", i, rc);
		if (i % 8 == 7) {
			/* read an earlier one back while the others write */
			j = (uint32_t)(harness_mix(i) % (i + 1));
			oid = harness_oid(50 + w->id, j / 64);
			harness_page_text(page, wseed(w->id, j));
			rc = ramster_get(r, priv, &oid, j, got);
			if (rc || memcmp(got, page, PAGE))
				worker_fail(w, "get private", j, rc);
		}
	}
	pthread_barrier_wait(w->bar);
	/* everyone's shared pages are there for everyone */
	for (t = 0; t < NTHREADS && !w->errors; t++) {
		for (i = w->id; i < NPAGES && !w->errors; i += 3) {
			struct ramster_oid oid = harness_oid(50 + t, i / 64);

			harness_page_text(page, wseed(t, i));
			rc = ramster_get(r, shared, &oid, i, got);
			if (rc || memcmp(got, page, PAGE))
				worker_fail(w, "get shared", i, rc);
		}
	}
	for (i = 0; i < NPAGES && !w->errors; i++) {
		struct ramster_oid oid = harness_oid(50 + w->id, i / 64);

		harness_page_text(page, wseed(w->id, i));
		rc = ramster_get(r, priv, &oid, i, got);
		if (rc || memcmp(got, page, PAGE))
			worker_fail(w, "final get private", i, rc);
	}
	ramster_close(r);
	return NULL;
}

static void test_concurrent_clients(void **state)
{
	struct fix *f = *state;
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t bar;
	unsigned i;

	pthread_barrier_init(&bar, NULL, NTHREADS);
	for (i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].h = &f->h;
		w[i].bar = &bar;
		w[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, worker_run, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (i = 0; i < NTHREADS; i++) {
		if (w[i].errors)
			fprintf(stderr, "%s (%u errors)\n", w[i].why, w[i].errors);
		assert_int_equal(w[i].errors, 0);
	}
	assert_true(harness_alive(&f->h));
}

/* ---- a full local tier ------------------------------------------------------ */

/* Read a page back that must be either absent or exactly right. */
static bool absent_or_right(ramster *r, int pool, const struct ramster_oid *oid, uint32_t i,
			    const void *want)
{
	unsigned char got[PAGE];
	int rc = ramster_get(r, pool, oid, i, got);

	assert_true(rc == 0 || rc == -ENOENT);
	if (rc == 0)
		assert_memory_equal(got, want, PAGE);
	return rc == 0;
}

static void test_full_ephemeral_evicts(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	int pool = ramster_pool_new(f->r, 0, NULL);
	const uint32_t n = 4000; /* ~8x what 1 MiB of frames holds */
	uint32_t i, hits = 0, late = 0;

	assert_true(pool >= 0);
	assert_int_equal(stat_of(f->r, "tier_evicted_frames"), 0);
	for (i = 0; i < n; i++) {
		struct ramster_oid oid = harness_oid(60, i / 32);

		harness_page_text(page, i);
		assert_int_equal(ramster_put(f->r, pool, &oid, i, page), 0);
	}
	assert_true(stat_of(f->r, "tier_evicted_frames") > 0);
	assert_true(stat_of(f->r, "tier_evicted_pages") > 0);
	assert_true(stat_of(f->r, "tier_frames") <= stat_of(f->r, "tier_budget_frames"));
	for (i = 0; i < n; i++) {
		struct ramster_oid oid = harness_oid(60, i / 32);
		bool hit;

		harness_page_text(page, i);
		hit = absent_or_right(f->r, pool, &oid, i, page);
		hits += hit;
		if (i >= n - 64)
			late += hit;
	}
	/* the oldest went, the newest stayed */
	assert_true(hits < n);
	assert_int_equal(late, 64);
}

static void test_full_persistent_refused(void **state)
{
	struct fix *f = *state;
	unsigned char page[PAGE];
	int pers = ramster_pool_new(f->r, RAMSTER_PERSISTENT, NULL);
	int eph = ramster_pool_new(f->r, 0, NULL);
	const uint32_t max = 8000;
	uint32_t i, kept = 0, nospace = 0;
	uint64_t pers_frames;
	bool *ok = calloc(max, sizeof(*ok));
	int rc;

	assert_non_null(ok);
	assert_true(pers >= 0 && eph >= 0);
	/* some ephemeral pages first, for the persistent ones to displace */
	for (i = 0; i < 300; i++) {
		struct ramster_oid oid = harness_oid(61, 0);

		harness_page_text(page, 100000 + i);
		assert_int_equal(ramster_put(f->r, eph, &oid, i, page), 0);
	}
	for (i = 0; i < max && nospace < 50; i++) {
		struct ramster_oid oid = harness_oid(62, i / 32);

		harness_page_text(page, i);
		rc = ramster_put(f->r, pers, &oid, i, page);
		if (rc == 0) {
			ok[i] = true;
			kept++;
		} else {
			assert_int_equal(rc, -ENOSPC);
			nospace++;
		}
	}
	assert_true(nospace > 0);
	assert_true(kept > 0);
	assert_true(stat_of(f->r, "tier_refused_nospace") >= nospace);
	pers_frames = stat_of(f->r, "tier_frames_pers");

	/* ephemeral pressure may be refused, but costs no persistent page */
	for (i = 0; i < 2000; i++) {
		struct ramster_oid oid = harness_oid(63, i / 32);

		harness_page_text(page, 200000 + i);
		rc = ramster_put(f->r, eph, &oid, i, page);
		assert_true(rc == 0 || rc == -ENOSPC);
	}
	assert_int_equal(stat_of(f->r, "tier_frames_pers"), pers_frames);
	for (i = 0; i < max; i++) {
		struct ramster_oid oid = harness_oid(62, i / 32);

		if (!ok[i])
			continue;
		harness_page_text(page, i);
		expect_page(f->r, pers, &oid, i, page);
	}
	/* a zero page takes no frame, but its bookkeeping is charged to the
	 * budget (issue 14): a tier full of persistent data refuses it too */
	harness_page_zero(page);
	{
		struct ramster_oid oid = harness_oid(64, 0);

		assert_int_equal(ramster_put(f->r, pers, &oid, 0, page), -ENOSPC);
	}
	/* flushing persistent pages makes room again */
	for (i = 0; i < max; i++) {
		struct ramster_oid oid = harness_oid(62, i / 32);

		if (ok[i])
			assert_int_equal(ramster_flush(f->r, pers, &oid, i), 0);
	}
	{
		struct ramster_oid oid = harness_oid(65, 0);

		harness_page_text(page, 9);
		assert_int_equal(ramster_put(f->r, pers, &oid, 0, page), 0);
		expect_page(f->r, pers, &oid, 0, page);
	}
	free(ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_env, setup, teardown),
		cmocka_unit_test(test_open_env_missing),
		cmocka_unit_test_setup_teardown(test_open_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_private_kinds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_destroy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_shared_same_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_shared_distinct_uuids, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_shared_flag_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_shared_lifetime, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_shared_needs_uuid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_pers_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_pers_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_pers_random, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_eph_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_eph_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_eph_random, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_shared_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rt_nearly_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persistent_stays, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eph_private_get_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eph_shared_get_not_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pers_get_not_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_get_coherency, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_get_pers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_get_eph, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_refused_pers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_refused_eph, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_refused_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_page, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_object, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolation_no_pools, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolation_own_pool, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_frees_pools, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_keeps_shared_of_others, setup, teardown),
		cmocka_unit_test_setup_teardown(test_putv_getv_mixed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_putv_getv_split, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getv_eph_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_putv_duplicates_in_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vectors_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getv_missing_pool, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pools_listing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_clients, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_ephemeral_evicts, setup_small, teardown),
		cmocka_unit_test_setup_teardown(test_full_persistent_refused, setup_small, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
