/*
 * ec_bed.h - the erasure-coding tests' collective (test_ec, test_ec_stripes):
 * alpha with a 1 MiB tier and up to four peers, redundancy = ec 2+1 in the
 * layout EC_LAYOUT ("pages" or "stripes", defined before the include), and
 * alpha's persistent pages put, read back and checked. Included once by each
 * test: its functions are static.
 */
#ifndef RAMSTER_TESTS_EC_BED_H
#define RAMSTER_TESTS_EC_BED_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collective.h"
#include "harness.h"

#ifndef EC_LAYOUT
#error "define EC_LAYOUT (pages or stripes) before including ec_bed.h"
#endif
#define EC_NAME (strcmp(EC_LAYOUT, "stripes") ? "ec" : "ecs")

#define PAGE  4096
#define PAGES 3072 /* many times alpha's 1 MiB tier */
#define PER_OBJ 256

static const char *const names[5] = {"alpha", "beta", "gamma", "delta", "eps"};

static int SLOW = 1;
/* the collective's dead_after_ms, times SLOW (a case may set it before start_all) */
static int bed_dead_after_ms = 1000;

static uint64_t stat_of(struct coll *t, int node, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(coll_stat(t, node, name, &v), 0);
	return v;
}

/* alpha (1 MiB tier) and nodes - 1 peers, redundancy = ec 2+1 in EC_LAYOUT; node 1 lies when lie is set. */
static void start_all(struct coll *t, int nodes, const char *lie)
{
	int i;

	snprintf(t->cluster, sizeof(t->cluster), "%s", EC_NAME);
	snprintf(t->extra + strlen(t->extra), sizeof(t->extra) - strlen(t->extra),
		 "heartbeat_ms = 100\ndead_after_ms = %d\nrequest_timeout_ms = %d\n"
		 "redundancy = ec 2+1\nec_layout = " EC_LAYOUT "\n",
		 bed_dead_after_ms * SLOW, 12000 * SLOW);
	for (i = 0; i < nodes; i++)
		coll_set_node(t, i, names[i], i ? 16 : 1, i ? 64 : 0);
	assert_int_equal(coll_write_confs(t), 0);
	for (i = nodes - 1; i >= 0; i--) {
		if (i == 1 && lie) {
			setenv("RAMSTER_TEST_HOLDER_LIE", lie, 1);
			setenv("RAMSTER_DAEMON", coll_lie_daemon(), 1);
		}
		assert_int_equal(coll_start(t, i), 0);
		unsetenv("RAMSTER_TEST_HOLDER_LIE");
		unsetenv("RAMSTER_DAEMON");
	}
	(void)coll_wait_stat(t, 0, "cluster_links_up", (uint64_t)nodes - 1, UINT64_MAX,
			     10000 * SLOW);
	assert_int_equal(stat_of(t, 0, "cluster_links_up"), nodes - 1);
}

static int setup(void **state)
{
	*state = coll_create(EC_NAME, "5e2b7c9d1f3a4e6b8c0d2f4a6b8c0e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d\n");
	return *state ? 0 : -1;
}

static int teardown(void **state)
{
	return coll_destroy(*state) ? -1 : 0;
}

/* A persistent put, tried again while the node waits for room (up to 30 s). */
static void put_all(ramster *r, int pool, unsigned version)
{
	static unsigned char p[PAGE];
	unsigned i;

	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);
		int rc, tries = 0;

		coll_page_text(p, i, version);
		while ((rc = ramster_put(r, pool, &oid, i % PER_OBJ, p)) == -ENOSPC && ++tries < 1500)
			usleep(20000);
		assert_int_equal(rc, 0);
	}
}

/* @return the pages not read back identical; *eio the -EIO among them. */
static unsigned check_all(ramster *r, int pool, unsigned version, unsigned *eio)
{
	struct coll_read got;
	unsigned bad =
	    (unsigned)coll_read_back(r, pool, 25, PER_OBJ, PAGES, coll_page_text, version, &got);

	*eio = (unsigned)got.eio;
	return bad;
}

static void wait_remote(struct coll *t)
{
	assert_int_equal(coll_wait_stat(t, 0, "tier_remote_pages", PAGES / 2, UINT64_MAX,
					10000 * SLOW), 0);
}

/* The collective started, alpha's pages put in a new persistent pool and most of them remote. */
static ramster *start_and_fill(struct coll *t, int nodes, const char *lie, int *pool)
{
	ramster *r;

	start_all(t, nodes, lie);
	r = harness_connect(&t->h[0]);
	assert_non_null(r);
	*pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(*pool >= 0);
	put_all(r, *pool, 1);
	wait_remote(t);
	return r;
}

#endif /* RAMSTER_TESTS_EC_BED_H */
