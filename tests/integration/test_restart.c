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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define PAGE    4096
#define PAGES   50000 /* over two pools */
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

/* Wait until the re-executed node answers (the same pid: an exec keeps it). */
static ramster *wait_back(struct harness *h)
{
	uint64_t end = harness_now_ms() + 20000;
	ramster *r;

	do {
		r = harness_connect(h);
		if (r) {
			uint64_t warm = 0;

			if (harness_stat(r, "restart_warm", &warm) == 0 && warm == 1)
				return r;
			ramster_close(r);
		}
		usleep(20000);
	} while (harness_now_ms() < end);
	return NULL;
}

static void test_warm_restart(void **state)
{
	static const unsigned char uuid[16] = "restart-shared-1";
	const char *args[] = { "--local-mb", "512", NULL };
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
	ops = wait_back(&h);
	assert_non_null(ops);
	fprintf(stderr, "  node back (warm) after %.0f ms: %llu pools, %llu pages in %llu us "
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
	fprintf(stderr, "  after the restart: %u of %d pages not identical, %u -EIO; "
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_warm_restart),
		cmocka_unit_test(test_torn_image_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
