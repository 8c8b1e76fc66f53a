/*
 * test_restart.c - a warm restart keeps every page (issue 22): a real
 * ramsterd re-executes itself on SIGUSR2 with its image in a memfd, and the
 * client that was using it reconnects on its own, attaches its pools again
 * and reads every page back byte-identical; an image that does not check out
 * is refused and the node starts cold.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "collective.h"
#include "harness.h"

#define PAGE 4096
static int SLOW = 1;  /* RAMSTER_TEST_SLOW: sanitizer builds stretch the waits */
#define PAGES	50000 /* over two pools */
#define PER_OBJ 512

static uint64_t stat_of(ramster *r, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(harness_stat(r, name, &v), 0);
	return v;
}

/* Page i: a zero page every 9th, else text (the node keeps both). */
static void page_of(unsigned i, void *p)
{
	if (i % 9 == 4)
		harness_page_zero(p);
	else
		harness_page_text(p, 0x5e11 + i);
}

static void put_all(ramster *r, int priv, int shared)
{
	static unsigned char p[PAGE];
	unsigned i;

	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(22, i / PER_OBJ);

		page_of(i, p);
		assert_int_equal(ramster_put(r, i % 2 ? shared : priv, &oid, i % PER_OBJ, p), 0);
	}
}

/* @return the pages that did not read back identical (0 expected); *eio the -EIO among them. */
static unsigned check_all(ramster *r, int priv, int shared, unsigned *eio)
{
	static unsigned char p[PAGE], want[PAGE];
	unsigned i, bad = 0;

	*eio = 0;
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(22, i / PER_OBJ);
		int rc = ramster_get(r, i % 2 ? shared : priv, &oid, i % PER_OBJ, p);

		page_of(i, want);
		if (rc == -EIO)
			(*eio)++;
		if (rc || memcmp(p, want, PAGE)) {
			if (bad < 3)
				fprintf(stderr, "  page %u: rc %d%s\n", i, rc,
					rc ? "" : ", bytes differ");
			bad++;
		}
	}
	return bad;
}

static void test_warm_restart(void **state)
{
	static const unsigned char uuid[16] = "restart-shared-1";
	const char *args[] = {"--local-mb", "512", NULL};
	struct harness h;
	ramster *r, *ops;
	int priv, shared;
	unsigned eio, bad;
	pid_t pid;
	double t0;

	(void)state;
	assert_int_equal(harness_start(&h, args), 0);
	pid = h.pid;
	r = harness_connect(&h);
	assert_non_null(r);
	priv = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	shared = ramster_pool_new(r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid);
	assert_true(priv >= 0 && shared >= 0);
	put_all(r, priv, shared);
	assert_int_equal(check_all(r, priv, shared, &eio), 0);

	/* the restart, while the client is connected */
	t0 = harness_now();
	assert_int_equal(kill(h.pid, SIGUSR2), 0);
	ops = coll_wait_warm(&h, 20000 * SLOW);
	assert_non_null(ops);
	fprintf(stderr,
		"  node back (warm) after %.0f ms: %llu pools, %llu pages in %llu us "
		"from a %.1f MiB image\n",
		(harness_now() - t0) * 1000.0, (unsigned long long)stat_of(ops, "restart_pools"),
		(unsigned long long)stat_of(ops, "restart_pages"),
		(unsigned long long)stat_of(ops, "restart_load_us"),
		(double)stat_of(ops, "restart_image_bytes") / 1048576.0);
	assert_int_equal(h.pid, pid);
	assert_true(harness_alive(&h));
	assert_int_equal(stat_of(ops, "restart_pages"), PAGES);
	assert_int_equal(stat_of(ops, "restart_pages_refused"), 0);
	assert_int_equal(stat_of(ops, "client_pools_restored"), 2);

	/* the client rides through: a delay, not an error; the same pool ids */
	bad = check_all(r, priv, shared, &eio);
	fprintf(stderr,
		"  after the restart: %u of %d pages not identical, %u -EIO; "
		"reconnects %llu\n",
		bad, PAGES, eio, (unsigned long long)ramster_reconnects(r));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_int_equal(ramster_reconnects(r), 1);
	assert_int_equal(stat_of(ops, "client_pools_reattached"), 2);
	/* and it goes on working: new pages, flushes, a second restart */
	{
		static unsigned char p[PAGE];
		struct ramster_oid oid = harness_oid(23, 1);

		harness_page_text(p, 99);
		assert_int_equal(ramster_put(r, priv, &oid, 7, p), 0);
		assert_int_equal(ramster_flush(r, priv, &oid, 7), 0);
	}
	ramster_close(ops);
	/* a second restart, the client in the middle of its reads */
	assert_int_equal(kill(h.pid, SIGUSR2), 0);
	assert_int_equal(check_all(r, priv, shared, &eio), 0);
	assert_int_equal(ramster_reconnects(r), 2);
	ramster_close(r);
	assert_int_equal(harness_stop(&h), 0);
}

/* An image handed over that does not check out: refused, counted, a cold start that works. */
static void test_torn_image_refused(void **state)
{
	struct harness h;
	char num[16];
	ramster *r;
	int fd, pool;
	static unsigned char p[PAGE];
	struct ramster_oid oid = harness_oid(1, 1);

	(void)state;
	fd = memfd_create("not-an-image", 0);
	assert_true(fd >= 0);
	memset(p, 0xab, sizeof(p));
	assert_int_equal(write(fd, p, sizeof(p)), (ssize_t)sizeof(p));
	snprintf(num, sizeof(num), "%d", fd);
	setenv("RAMSTER_RESTART_FD", num, 1);
	assert_int_equal(harness_start(&h, NULL), 0);
	unsetenv("RAMSTER_RESTART_FD");
	close(fd);
	r = harness_connect(&h);
	assert_non_null(r);
	assert_int_equal(stat_of(r, "restart_images_refused"), 1);
	assert_int_equal(stat_of(r, "restart_warm"), 0);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	harness_page_text(p, 5);
	assert_int_equal(ramster_put(r, pool, &oid, 0, p), 0);
	ramster_close(r);
	assert_int_equal(harness_stop(&h), 0);
}

/* ramsterctl restart's call: the node comes back warm, the caller's handle redials. */
static void test_restart_op(void **state)
{
	struct harness h;
	struct ramster_kv *kv = NULL;
	static unsigned char p[PAGE], back[PAGE];
	struct ramster_oid oid = harness_oid(5, 5);
	ramster *r, *ops;
	size_t n = 0;
	int pool;

	(void)state;
	assert_int_equal(harness_start(&h, NULL), 0);
	r = harness_connect(&h);
	assert_non_null(r);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	harness_page_text(p, 17);
	assert_int_equal(ramster_put(r, pool, &oid, 3, p), 0);
	ops = harness_connect(&h);
	assert_non_null(ops);
	assert_int_equal(ramster_restart(ops, &kv, &n), 0);
	ramster_kv_free(kv, n);
	ramster_close(ops);
	ops = coll_wait_warm(&h, 20000 * SLOW);
	assert_non_null(ops);
	assert_int_equal(ramster_get(r, pool, &oid, 3, back), 0);
	assert_memory_equal(p, back, PAGE);
	assert_int_equal(ramster_reconnects(r), 1);
	ramster_close(ops);
	ramster_close(r);
	assert_int_equal(harness_stop(&h), 0);
}

#define COLL_PAGES 3000

/* Every page put into pool of one reads back identical. @return those that do not. */
static unsigned coll_check(ramster *r, int pool, const bool *put)
{
	static unsigned char p[PAGE], back[PAGE];
	unsigned i, bad = 0;

	for (i = 0; i < COLL_PAGES; i++) {
		struct ramster_oid oid = harness_oid(7, i / 64);
		int rc;

		if (!put[i])
			continue;
		rc = ramster_get(r, pool, &oid, i % 64, back);
		harness_page_text(p, i);
		if (rc || memcmp(p, back, PAGE)) {
			if (bad < 3)
				fprintf(stderr, "  page %u: rc %d\n", i, rc);
			bad++;
		}
	}
	return bad;
}

/*
 * A collective rides through a warm restart of either side: the holder of
 * the owner's pages restarts (SIGUSR2), then the owner (ramsterctl restart's
 * call); each keeps its incarnation, so the other sees a link blip, not a
 * restart, and every persistent page reads back byte-identical.
 */
static void test_collective_warm(void **state)
{
	struct coll *c = coll_create("restart", "3f9a1c7e5b2d8046e1f3a5c79b0d2e4f"
						"6a8c0e1f3b5d7092c4e6f8a1b3d5e7f9\n");
	static unsigned char p[PAGE];
	static bool put[COLL_PAGES];
	struct ramster_kv *kv = NULL;
	uint64_t remote = 0, held = 0, v = 0;
	size_t n = 0, i;
	unsigned bad;
	ramster *r, *ops;
	int pool, rc;

	(void)state;
	assert_non_null(c);
	snprintf(c->cluster, sizeof(c->cluster), "restart");
	snprintf(c->extra, sizeof(c->extra), "heartbeat_ms = 100\ndead_after_ms = %d\n",
		 3000 * SLOW);
	coll_set_node(c, 0, "one", 2, 0);
	coll_set_node(c, 1, "two", 16, 64);
	assert_int_equal(coll_write_confs(c), 0);
	assert_int_equal(coll_start(c, 1), 0);
	assert_int_equal(coll_start(c, 0), 0);
	assert_int_equal(coll_wait_up(c, 0, 1, 10000 * SLOW), 0);
	r = harness_connect(&c->h[0]);
	assert_non_null(r);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	for (i = 0; i < COLL_PAGES; i++) {
		struct ramster_oid oid = harness_oid(7, i / 64);

		harness_page_text(p, i);
		rc = ramster_put(r, pool, &oid, i % 64, p);
		assert_true(rc == 0 || rc == -ENOSPC);
		put[i] = rc == 0;
	}
	assert_int_equal(coll_wait_stat(c, 0, "tier_remote_pages", 1, UINT64_MAX, 10000 * SLOW), 0);
	assert_int_equal(coll_check(r, pool, put), 0);
	assert_int_equal(coll_stat(c, 0, "tier_remote_pages", &remote), 0);
	assert_int_equal(coll_stat(c, 1, "foreign_pages", &held), 0);

	/* the holder restarts */
	assert_int_equal(kill(c->h[1].pid, SIGUSR2), 0);
	ops = coll_wait_warm(&c->h[1], 20000 * SLOW);
	assert_non_null(ops);
	fprintf(stderr, "  holder back warm: %llu pages held for the owner kept (of %llu), "
		"%llu peers\n",
		(unsigned long long)stat_of(ops, "restart_foreign"), (unsigned long long)held,
		(unsigned long long)stat_of(ops, "restart_peers"));
	assert_true(stat_of(ops, "restart_foreign") >= 1);
	assert_int_equal(stat_of(ops, "restart_peers"), 1);
	ramster_close(ops);
	bad = coll_check(r, pool, put);
	fprintf(stderr, "  after the holder's restart: %u pages not identical (%llu remote)\n", bad,
		(unsigned long long)remote);
	assert_int_equal(bad, 0);
	assert_int_equal(coll_stat(c, 0, "cluster_peer_restarts", &v), 0);
	assert_int_equal(v, 0); /* a link blip, not a new incarnation */

	/* the owner restarts, its pages on the holder */
	ops = harness_connect(&c->h[0]);
	assert_non_null(ops);
	rc = ramster_restart(ops, &kv, &n);
	ramster_kv_free(kv, n);
	ramster_close(ops);
	assert_int_equal(rc, 0);
	ops = coll_wait_warm(&c->h[0], 20000 * SLOW);
	assert_non_null(ops);
	assert_int_equal(stat_of(ops, "restart_peers"), 1);
	assert_true(stat_of(ops, "restart_pages") >= 1);
	ramster_close(ops);
	bad = coll_check(r, pool, put);
	fprintf(stderr, "  after the owner's restart: %u pages not identical\n", bad);
	assert_int_equal(bad, 0);
	assert_int_equal(coll_stat(c, 1, "cluster_peer_restarts", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(coll_stat(c, 0, "remote_seal_failures", &v), 0);
	assert_int_equal(v, 0);

	/* and both go on: new versions of half the pages, sealed after the restart */
	for (i = 0; i < COLL_PAGES; i += 2) {
		struct ramster_oid oid = harness_oid(7, i / 64);

		harness_page_text(p, i);
		rc = ramster_put(r, pool, &oid, i % 64, p);
		assert_true(rc == 0 || rc == -ENOSPC);
		put[i] = rc == 0;
	}
	assert_int_equal(coll_check(r, pool, put), 0);
	ramster_close(r);
	assert_int_equal(coll_destroy(c), 0);
}

int main(void)
{
	const char *slow = getenv("RAMSTER_TEST_SLOW");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_warm_restart),
	    cmocka_unit_test(test_torn_image_refused),
	    cmocka_unit_test(test_restart_op),
	    cmocka_unit_test(test_collective_warm),
	};

	if (slow && atoi(slow) > 1 && atoi(slow) <= 100)
		SLOW = atoi(slow);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
