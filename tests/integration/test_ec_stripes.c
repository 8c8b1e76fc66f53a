/*
 * test_ec_stripes - stripes of K pages (redundancy = ec K+M with
 * ec_layout = stripes, issue 25) on real daemons over real sockets:
 *
 *   - alpha's persistent pages go to its peers in stripes of 2 pages and a
 *     parity fragment, and each reads back from its one holder (no parity);
 *   - the holder of most fragments killed (SIGKILL): every page reads back,
 *     those it held made from the other two of their stripe (counted), none
 *     -EIO; the owner makes the lost slots again elsewhere, and then a second
 *     holder may die and nothing is lost;
 *   - the owner restarts warm (now ec_layout = pages): its stripes come back
 *     with it and its pages read from them;
 *   - a drained holder hands its fragments back: each is made again from the
 *     others and placed elsewhere, and every page still reads back;
 *   - every page flushed: every stripe is flushed, no fragment stays on a holder;
 *   - a third of the pages overwritten: their old slots die (counted dead, kept
 *     for the parity); the compaction walk reads the live pages of the stripes
 *     left sparse home until no stripe holds a dead page (at 2+1 a stripe with
 *     a dead page is half dead), remotify sends them out again in full
 *     stripes, every page reads back at its own version, and the flush of
 *     every page leaves no fragment;
 *   - a lying holder (garbage in every answer): the seal refuses what it
 *     made, the stripe's other slots make the page, none wrong, none -EIO;
 *   - a holder killed, its link down but not yet found silent (dead_after_ms
 *     10 s): every page reads back at once, its pages made from the others.
 */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define EC_LAYOUT "stripes"
#include "ec_bed.h"

static void flush_all_and_check_empty(struct coll *t, ramster *r, int pool, int nodes,
				      const bool *dead)
{
	unsigned i;
	int n;

	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);

		assert_int_equal(ramster_flush(r, pool, &oid, i % PER_OBJ), 0);
	}
	assert_int_equal(coll_wait_stat(t, 0, "remote_ec_stripes", 0, 0, 10000 * SLOW), 0);
	for (n = 1; n < nodes; n++) {
		uint64_t left = 0;

		if (dead[n])
			continue;
		(void)coll_wait_stat(t, n, "foreign_pages", 0, 0, 10000 * SLOW);
		assert_int_equal(coll_stat(t, n, "foreign_pages", &left), 0);
		fprintf(stderr, "  %s holds %llu fragments after every page was flushed\n", names[n],
			(unsigned long long)left);
		assert_int_equal(left, 0);
	}
}

/* The peer holding the most fragments, not in dead. */
static int busiest(struct coll *t, int nodes, const bool *dead)
{
	uint64_t most = 0;
	int i, who = 0;

	for (i = 1; i < nodes; i++) {
		uint64_t v = dead[i] ? 0 : stat_of(t, i, "foreign_pages");

		if (!dead[i] && (!who || v > most)) {
			most = v;
			who = i;
		}
	}
	return who;
}

static void test_stripes_kill_repair_flush(void **state)
{
	struct coll *t = *state;
	uint64_t remote, stripes, pages, held = 0;
	bool dead[5] = {false};
	unsigned eio, bad;
	ramster *r;
	int pool, i, first, second;

	r = start_and_fill(t, 5, NULL, &pool);
	remote = stat_of(t, 0, "tier_remote_pages");
	stripes = stat_of(t, 0, "remote_ec_stripes_placed");
	pages = stat_of(t, 0, "remote_ec_stripe_pages");
	for (i = 1; i < 5; i++)
		held += stat_of(t, i, "foreign_pages");
	fprintf(stderr, "  stripes 2+1: %llu remote pages, %llu stripes of %llu pages, "
		"%llu fragments held by 4 peers\n",
		(unsigned long long)remote, (unsigned long long)stripes,
		(unsigned long long)pages, (unsigned long long)held);
	assert_true(stripes > 0);
	assert_true(pages >= remote);
	/* a stripe is at most 2 pages and 1 parity: at most 2 fragments per page, at least 1.5 */
	assert_true(stat_of(t, 0, "remote_ec_fragments_placed") <= 2 * pages);
	assert_int_equal(stat_of(t, 0, "remote_copies_placed"), 0);
	bad = check_all(r, pool, 1, &eio);
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_true(stat_of(t, 0, "remote_ec_stripe_reads") > 0);
	assert_int_equal(stat_of(t, 0, "remote_ec_stripe_degraded_reads"), 0);

	/* the holder of most fragments dies */
	first = busiest(t, 5, dead);
	harness_kill(&t->h[first], SIGKILL);
	dead[first] = true;
	assert_int_equal(coll_wait_stat(t, 0, "remote_ec_stripes_degraded", 1, UINT64_MAX,
					10000 * SLOW), 0);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  %s killed: %u pages not identical, %u -EIO, degraded reads %llu\n",
		names[first], bad, eio,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_degraded_reads"));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);

	/* its slots are made again on the peers left */
	assert_int_equal(coll_wait_stat(t, 0, "remote_ec_stripes_degraded", 0, 0, 60000 * SLOW),
			 0);
	fprintf(stderr, "  repaired: %llu slots made again\n",
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_slots_repaired"));
	assert_true(stat_of(t, 0, "remote_ec_stripe_slots_repaired") > 0);
	assert_int_equal(stat_of(t, 0, "remote_ec_stripe_pages_lost"), 0);

	/* so a second holder may die too */
	second = busiest(t, 5, dead);
	harness_kill(&t->h[second], SIGKILL);
	dead[second] = true;
	assert_int_equal(coll_wait_stat(t, 0, "remote_ec_stripes_degraded", 1, UINT64_MAX,
					10000 * SLOW), 0);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  %s killed too: %u pages not identical, %u -EIO\n", names[second], bad,
		eio);
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_int_equal(stat_of(t, 0, "remote_ec_stripe_pages_lost"), 0);

	/* every page flushed: every stripe goes, and every fragment with it */
	flush_all_and_check_empty(t, r, pool, 5, dead);
	ramster_close(r);
}

static void test_stripes_drain(void **state)
{
	struct coll *t = *state;
	bool dead[5] = {false};
	unsigned eio, bad;
	uint64_t on;
	ramster *r;
	int pool, who;

	r = start_and_fill(t, 5, NULL, &pool);
	/* the owner restarts warm, now with ec_layout = pages: its stripes' records come
	 * back with it, and its stripe pages read, drain and flush as before */
	snprintf(t->extra, sizeof(t->extra),
		 "heartbeat_ms = 100\ndead_after_ms = %d\nrequest_timeout_ms = %d\n"
		 "redundancy = ec 2+1\nec_layout = pages\n",
		 1000 * SLOW, 12000 * SLOW);
	assert_int_equal(coll_write_conf(t, 0), 0);
	{
		ramster *ops;

		assert_int_equal(kill(t->h[0].pid, SIGUSR2), 0);
		ops = coll_wait_warm(&t->h[0], 20000 * SLOW);
		assert_non_null(ops);
		ramster_close(ops);
	}
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  after the owner's warm restart (now ec_layout = pages): %llu stripes, "
		"%u pages not identical, %u -EIO, %llu stripe reads\n",
		(unsigned long long)stat_of(t, 0, "remote_ec_stripes"), bad, eio,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_reads"));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_true(stat_of(t, 0, "remote_ec_stripes") > 0);
	assert_true(stat_of(t, 0, "remote_ec_stripe_reads") > 0);
	who = busiest(t, 5, dead);
	on = stat_of(t, who, "foreign_pages");
	assert_true(on > 0);
	assert_int_equal(ramster_drain(r, (unsigned)who + 1, 1), 0);
	assert_int_equal(coll_wait_stat(t, who, "foreign_pages", 0, 0, 90000 * SLOW), 0);
	fprintf(stderr, "  %s drained: %llu fragments handed back, %llu made again elsewhere\n",
		names[who], (unsigned long long)on,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_returns"));
	assert_true(stat_of(t, 0, "remote_ec_stripe_returns") > 0);
	/* then it dies: nothing was left on it */
	harness_kill(&t->h[who], SIGKILL);
	dead[who] = true;
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  %s killed after its drain: %u pages not identical, %u -EIO, "
		"degraded reads %llu\n", names[who], bad, eio,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_degraded_reads"));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_int_equal(stat_of(t, 0, "remote_ec_stripe_degraded_reads"), 0);
	flush_all_and_check_empty(t, r, pool, 5, dead);
	ramster_close(r);
}

/* Every third page at version 2, the others at 1 (test_stripes_overwrite). */
static void mixed_page(unsigned char *p, uint64_t i, uint64_t seed)
{
	(void)seed;
	coll_page_text(p, i, i % 3 == 0 ? 2 : 1);
}

/*
 * Pages overwritten in place: each old copy's slot dies in its stripe (its
 * bytes stay for the parity, counted as dead), the new ones go out in new
 * stripes. The compaction walk (node/remote/compact.c) reads the live pages
 * of the sparse stripes home, which flushes those stripes whole; remotify
 * sends the pages out again in full stripes. Within 30 s no dead page is
 * left (at 2+1 every stripe with a dead page is sparse), every page reads
 * back at its own version, and every page flushed leaves no fragment.
 */
static void test_stripes_overwrite(void **state)
{
	struct coll *t = *state;
	bool dead[5] = {false};
	static unsigned char p[PAGE];
	struct coll_read got;
	uint64_t dead_pages, dead_bytes, live, overwritten;
	unsigned i, bad;
	ramster *r;
	int pool;

	r = start_and_fill(t, 4, NULL, &pool);
	for (i = 0; i < PAGES; i += 3) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);
		int rc, tries = 0;

		coll_page_text(p, i, 2);
		while ((rc = ramster_put(r, pool, &oid, i % PER_OBJ, p)) == -ENOSPC && ++tries < 1500)
			usleep(20000);
		assert_int_equal(rc, 0);
	}
	overwritten = (PAGES + 2) / 3;
	dead_pages = stat_of(t, 0, "remote_ec_stripe_dead_pages");
	fprintf(stderr, "  a third of the pages overwritten (%llu): %llu dead pages kept, %llu read "
		"home by the compaction so far\n",
		(unsigned long long)overwritten, (unsigned long long)dead_pages,
		(unsigned long long)stat_of(t, 0, "remote_ec_compact_read"));
	/* the compaction walk: 64 pages a batch, a batch each 200 ms, while the
	 * tier has room below its high watermark (remotify makes it) */
	for (i = 0; i < 300u * (unsigned)SLOW; i++) {
		dead_pages = stat_of(t, 0, "remote_ec_stripe_dead_pages");
		if (!dead_pages)
			break;
		usleep(100000);
	}
	wait_remote(t);
	dead_pages = stat_of(t, 0, "remote_ec_stripe_dead_pages");
	dead_bytes = stat_of(t, 0, "remote_ec_stripe_dead_bytes");
	live = stat_of(t, 0, "remote_ec_stripe_live_pages");
	bad = (unsigned)coll_read_back(r, pool, 25, PER_OBJ, PAGES, mixed_page, 0, &got);
	fprintf(stderr, "  compacted after %.1f s: %llu live and %llu dead pages in %llu stripes "
		"(%llu dead bytes, %llu stripes flushed whole; compaction read %llu of %llu asked, "
		"%llu passes, %llu ticks skipped near the high watermark); %u not identical, %llu -EIO\n",
		i / 10.0, (unsigned long long)live, (unsigned long long)dead_pages,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripes"),
		(unsigned long long)dead_bytes,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripes_flushed"),
		(unsigned long long)stat_of(t, 0, "remote_ec_compact_read"),
		(unsigned long long)stat_of(t, 0, "remote_ec_compact_asked"),
		(unsigned long long)stat_of(t, 0, "remote_ec_compact_passes"),
		(unsigned long long)stat_of(t, 0, "remote_ec_compact_skipped_full"), bad,
		(unsigned long long)got.eio);
	assert_int_equal(bad, 0);
	assert_int_equal(got.eio, 0);
	assert_true(stat_of(t, 0, "remote_ec_compact_read") > 0);
	assert_int_equal(dead_pages, 0);
	assert_int_equal(dead_bytes, 0);
	assert_true(live > 0);
	flush_all_and_check_empty(t, r, pool, 4, dead);
	ramster_close(r);
}

/*
 * A holder killed: its links drop at once (its sockets close), long before it
 * is found silent (dead_after_ms, 10 s here). Every page reads back
 * meanwhile, the dead holder's made from the other slots of their stripes: a
 * read does not wait for a link that is down. (Before, each read of the dead
 * holder's pages waited for it to be declared unreachable: 14 s on soft-RoCE.)
 */
static void test_stripes_link_lost(void **state)
{
	struct coll *t = *state;
	bool dead[5] = {false};
	uint64_t t0, ms;
	unsigned eio, bad;
	ramster *r;
	int pool, who;

	bed_dead_after_ms = 10000;
	r = start_and_fill(t, 4, NULL, &pool);
	bed_dead_after_ms = 1000;
	who = busiest(t, 4, dead);
	harness_kill(&t->h[who], SIGKILL);
	assert_int_equal(coll_wait_stat(t, 0, "cluster_links_up", 0, 2, 5000 * SLOW), 0);
	t0 = harness_now_ms();
	bad = check_all(r, pool, 1, &eio);
	ms = harness_now_ms() - t0;
	fprintf(stderr,
		"  %s killed, its link down: every page read in %llu ms, %u not identical, %u -EIO, "
		"degraded reads %llu, peers unreachable %llu (dead_after_ms %d)\n",
		names[who], (unsigned long long)ms, bad, eio,
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_degraded_reads"),
		(unsigned long long)stat_of(t, 0, "cluster_peers_unreachable"), 10000 * SLOW);
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_true(stat_of(t, 0, "remote_ec_stripe_degraded_reads") > 0);
	/* read before the holder was even found silent */
	assert_int_equal(stat_of(t, 0, "cluster_peers_unreachable"), 0);
	assert_true(ms < 5000u * (unsigned)SLOW);
	ramster_close(r);
}

static void test_stripes_liar(void **state)
{
	struct coll *t = *state;
	unsigned eio, bad;
	ramster *r;
	int pool;

	r = start_and_fill(t, 4, "garbage", &pool);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr,
		"  a lying holder in every stripe: %u pages not identical, %u -EIO, "
		"seal failures %llu, degraded reads %llu, lies %llu\n",
		bad, eio, (unsigned long long)stat_of(t, 0, "remote_seal_failures"),
		(unsigned long long)stat_of(t, 0, "remote_ec_stripe_degraded_reads"),
		(unsigned long long)stat_of(t, 1, "remote_holder_lies"));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_true(stat_of(t, 1, "remote_holder_lies") > 0);
	assert_true(stat_of(t, 0, "remote_seal_failures") > 0);
	assert_true(stat_of(t, 0, "remote_ec_stripe_degraded_reads") > 0);
	ramster_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_stripes_kill_repair_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stripes_drain, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stripes_overwrite, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stripes_liar, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stripes_link_lost, setup, teardown),
	};
	const char *slow = getenv("RAMSTER_TEST_SLOW");

	if (slow && atoi(slow) > 0)
		SLOW = atoi(slow);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
