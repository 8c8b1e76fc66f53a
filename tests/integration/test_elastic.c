/*
 * test_elastic.c - an elastic collective with real daemons (issue 24,
 * docs/elastic.md): a node with donate_mb = auto grows what it lends while
 * its host is calm, up to donate_max_mb, and peers see it; a node with
 * bring_home reads its pages on peers back into its tier once it has room,
 * every page identical. (Giving back under a real memory cgroup and a hog is
 * the drill's: ramster-drill --drill pressure, in test_drills.sh.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collective.h"
#include "harness.h"

#define PAGE  4096
#define PAGES 3000

static int SLOW = 1;

static const char key_hex[] = "8a1c7e5b2d8046e1f3a5c793f9a1c7e5b2d8046e1f3a5c79b0d2e4f6a8c0e1f3\n";

static uint64_t stat_of(struct coll *c, int i, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(coll_stat(c, i, name, &v), 0);
	return v;
}

static struct coll *two_nodes(const char *tag, const char *one_extra, const char *two_extra,
			      int two_donate)
{
	struct coll *c = coll_create(tag, key_hex);

	assert_non_null(c);
	snprintf(c->cluster, sizeof(c->cluster), "%s", tag);
	snprintf(c->extra, sizeof(c->extra), "heartbeat_ms = 100\ndead_after_ms = %d\n",
		 3000 * SLOW);
	coll_set_node(c, 0, "one", 2, 0);
	coll_set_node(c, 1, "two", 16, two_donate);
	snprintf(c->node[0].extra, sizeof(c->node[0].extra), "%s", one_extra);
	snprintf(c->node[1].extra, sizeof(c->node[1].extra), "%s", two_extra);
	assert_int_equal(coll_write_confs(c), 0);
	assert_int_equal(coll_start(c, 1), 0);
	assert_int_equal(coll_start(c, 0), 0);
	assert_int_equal(coll_wait_up(c, 0, 1, 10000 * SLOW), 0);
	return c;
}

/* donate_mb = auto on a calm host: 0 at start, then up to donate_max_mb; the owner sees it. */
static void test_auto_grows(void **state)
{
	struct coll *c = two_nodes("elastic", "", "donate_max_mb = 48\n", -1);
	uint64_t lent = 0;

	(void)state;
	assert_int_equal(
	    coll_wait_stat(c, 1, "elastic_budget", 48ull << 20, 48ull << 20, 20000 * SLOW), 0);
	assert_int_equal(stat_of(c, 1, "foreign_budget"), 48ull << 20);
	assert_true(stat_of(c, 1, "elastic_grows") >= 1);
	lent = stat_of(c, 1, "elastic_budget");
	fprintf(stderr, "  two lends %llu MiB after %llu ticks\n", (unsigned long long)(lent >> 20),
		(unsigned long long)stat_of(c, 1, "elastic_ticks"));
	assert_int_equal(coll_destroy(c), 0);
}

/*
 * bring_home: one's pages went to two while its tier was full; most are
 * flushed, and the rest come home on their own: none left on two, every one
 * identical.
 */
static void test_bring_home(void **state)
{
	struct coll *c = two_nodes("home", "bring_home = true\n", "", 64);
	static unsigned char p[PAGE], back[PAGE];
	static bool put[PAGES];
	unsigned i, bad = 0, kept = 0;
	ramster *r;
	int pool, rc;

	(void)state;
	r = harness_connect(&c->h[0]);
	assert_non_null(r);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(24, i / 64);

		harness_page_text(p, i);
		rc = ramster_put(r, pool, &oid, i % 64, p);
		assert_true(rc == 0 || rc == -ENOSPC);
		put[i] = rc == 0;
	}
	assert_int_equal(coll_wait_stat(c, 0, "tier_remote_pages", 1000, UINT64_MAX, 10000 * SLOW),
			 0);
	fprintf(stderr, "  %llu of one's pages on two\n",
		(unsigned long long)stat_of(c, 0, "tier_remote_pages"));
	/* nine in ten go: one's tier has room again */
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(24, i / 64);

		if (i % 10 && put[i]) {
			assert_int_equal(ramster_flush(r, pool, &oid, i % 64), 0);
			put[i] = false;
		}
	}
	rc = coll_wait_stat(c, 0, "tier_remote_pages", 0, 0, 30000 * SLOW);
	fprintf(
	    stderr,
	    "  remote %llu, frames %llu, home asked %llu, got %llu, failed %llu, skipped (full) "
	    "%llu, (pressure) %llu; brought home %llu\n",
	    (unsigned long long)stat_of(c, 0, "tier_remote_pages"),
	    (unsigned long long)stat_of(c, 0, "tier_frames"),
	    (unsigned long long)stat_of(c, 0, "home_asked"),
	    (unsigned long long)stat_of(c, 0, "home_got"),
	    (unsigned long long)stat_of(c, 0, "home_failed"),
	    (unsigned long long)stat_of(c, 0, "home_skipped_full"),
	    (unsigned long long)stat_of(c, 0, "home_skipped_pressure"),
	    (unsigned long long)stat_of(c, 0, "tier_brought_home"));
	assert_int_equal(rc, 0);
	fprintf(stderr, "  all home: home_asked %llu, home_got %llu, tier_brought_home %llu\n",
		(unsigned long long)stat_of(c, 0, "home_asked"),
		(unsigned long long)stat_of(c, 0, "home_got"),
		(unsigned long long)stat_of(c, 0, "tier_brought_home"));
	assert_true(stat_of(c, 0, "home_got") >= 1);
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(24, i / 64);

		if (!put[i])
			continue;
		kept++;
		harness_page_text(p, i);
		rc = ramster_get(r, pool, &oid, i % 64, back);
		if (rc || memcmp(p, back, PAGE))
			bad++;
	}
	fprintf(stderr, "  %u pages read back, %u not identical\n", kept, bad);
	assert_int_equal(bad, 0);
	ramster_close(r);
	assert_int_equal(coll_destroy(c), 0);
}

int main(void)
{
	const char *slow = getenv("RAMSTER_TEST_SLOW");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_auto_grows),
	    cmocka_unit_test(test_bring_home),
	};

	if (slow && atoi(slow) > 1 && atoi(slow) <= 100)
		SLOW = atoi(slow);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
