/*
 * test_ec - erasure-coded pages (redundancy = ec K+M, issue 25) on real
 * daemons over real sockets:
 *
 *   - alpha's persistent pages go to its peers as 2+1 fragments and read
 *     back identical from them (data fragments, no parity needed);
 *   - a holder killed (SIGKILL): every page reads back from the two left
 *     (parity used, counted), none -EIO; the owner makes the lost
 *     fragments again on the spare peer, and then a second holder may die
 *     and still nothing is lost;
 *   - the owner restarts warm (SIGUSR2) under another code: its fragments'
 *     records survive, each read and mended under its own K+M;
 *   - pages flushed one by one leave no fragment on a holder;
 *   - a lying holder (one bit flipped in every fragment it answers): the
 *     seal of the whole page refuses the set with its fragment, the others
 *     are asked and every page reads back right, none -EIO.
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

#define EC_LAYOUT "pages"
#include "ec_bed.h"

static void test_ec_kill_repair_restart(void **state)
{
	struct coll *t = *state;
	uint64_t frags, remote, held = 0;
	unsigned eio, bad;
	ramster *r, *ops;
	int pool, i, first = 0, second = 0;

	r = start_and_fill(t, 5, NULL, &pool);
	/* the remote pages first: more may be placed between the two reads */
	remote = stat_of(t, 0, "tier_remote_pages");
	frags = stat_of(t, 0, "remote_ec_fragments_placed");
	for (i = 1; i < 5; i++)
		held += stat_of(t, i, "foreign_pages");
	fprintf(stderr, "  ec 2+1: %llu remote pages, %llu fragments placed, %llu held by 4 peers\n",
		(unsigned long long)remote, (unsigned long long)frags,
		(unsigned long long)held);
	assert_true(frags >= 3 * remote);
	assert_int_equal(stat_of(t, 0, "remote_copies_placed"), 0);
	bad = check_all(r, pool, 1, &eio);
	assert_int_equal(bad, 0);
	assert_true(stat_of(t, 0, "remote_ec_gets") > 0);
	assert_int_equal(stat_of(t, 0, "remote_ec_degraded_reads"), 0);

	/* the owner restarts warm under another code (ec 3+1): the fragments' records come
	 * back with it, each naming its own K+M */
	snprintf(t->extra, sizeof(t->extra),
		 "heartbeat_ms = 100\ndead_after_ms = %d\nrequest_timeout_ms = %d\n"
		 "redundancy = ec 3+1\nec_layout = pages\n",
		 1000 * SLOW, 12000 * SLOW);
	assert_int_equal(coll_write_conf(t, 0), 0);
	assert_int_equal(kill(t->h[0].pid, SIGUSR2), 0);
	ops = coll_wait_warm(&t->h[0], 20000 * SLOW);
	assert_non_null(ops);
	ramster_close(ops);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  after the owner's warm restart (now ec 3+1): %u pages not identical\n",
		bad);
	assert_int_equal(bad, 0);
	assert_int_equal(stat_of(t, 0, "ec_data_fragments"), 3);

	/* the holder of most fragments dies */
	for (i = 2; i < 5; i++)
		if (stat_of(t, i, "foreign_pages") > stat_of(t, first ? first : 1, "foreign_pages"))
			first = i;
	if (!first)
		first = 1;
	harness_kill(&t->h[first], SIGKILL);
	assert_int_equal(coll_wait_stat(t, 0, "replica_below_target", 1, UINT64_MAX, 10000 * SLOW),
			 0);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  %s killed: %u pages not identical, %u -EIO, degraded reads %llu\n",
		names[first], bad, eio,
		(unsigned long long)stat_of(t, 0, "remote_ec_degraded_reads"));
	assert_int_equal(bad, 0);
	assert_true(stat_of(t, 0, "remote_ec_degraded_reads") > 0);

	/* the lost fragments are made again on the peers left */
	assert_int_equal(coll_wait_stat(t, 0, "replica_below_target", 0, 0, 60000 * SLOW), 0);
	fprintf(stderr, "  repaired: %llu fragments made again\n",
		(unsigned long long)stat_of(t, 0, "replica_fragments_rebuilt"));
	assert_true(stat_of(t, 0, "replica_fragments_rebuilt") > 0);
	assert_int_equal(stat_of(t, 0, "replica_lost"), 0);

	/* so a second holder may die too */
	second = first == 1 ? 2 : 1;
	harness_kill(&t->h[second], SIGKILL);
	assert_int_equal(coll_wait_stat(t, 0, "replica_below_target", 1, UINT64_MAX, 10000 * SLOW),
			 0);
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  %s killed too: %u pages not identical, %u -EIO\n", names[second], bad,
		eio);
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	ramster_close(r);
}

static void test_ec_liar(void **state)
{
	struct coll *t = *state;
	unsigned eio, bad;
	ramster *r;
	int pool;

	r = start_and_fill(t, 4, "garbage", &pool);
	{
		/* `ramsterctl status` names the code */
		struct ramster_kv *kv = NULL;
		size_t n = 0, i;
		bool seen = false;

		assert_int_equal(ramster_status(r, &kv, &n), 0);
		for (i = 0; i < n; i++)
			if (!strcmp(kv[i].key, "redundancy")) {
				assert_string_equal(kv[i].value, "ec 2+1");
				seen = true;
			}
		ramster_kv_free(kv, n);
		assert_true(seen);
	}
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr,
		"  a lying holder of every page's fragment: %u pages not identical, %u -EIO, "
		"seal failures %llu, degraded reads %llu, lies %llu\n",
		bad, eio, (unsigned long long)stat_of(t, 0, "remote_seal_failures"),
		(unsigned long long)stat_of(t, 0, "remote_ec_degraded_reads"),
		(unsigned long long)stat_of(t, 1, "remote_holder_lies"));
	assert_int_equal(bad, 0);
	assert_true(stat_of(t, 1, "remote_holder_lies") > 0);
	assert_true(stat_of(t, 0, "remote_seal_failures") > 0);
	assert_true(stat_of(t, 0, "remote_ec_degraded_reads") > 0);
	ramster_close(r);
}

/*
 * ec_read_extra = 1: three holders asked, the first two answers used. A
 * holder stopped (SIGSTOP: alive, silent) costs no wait: no get waits for it.
 */
static void test_ec_read_extra(void **state)
{
	struct coll *t = *state;
	uint64_t got0, gets0, t0;
	unsigned eio, bad;
	ramster *r;
	int pool;

	snprintf(t->extra, sizeof(t->extra), "ec_read_extra = 1\n");
	r = start_and_fill(t, 4, NULL, &pool);
	got0 = stat_of(t, 0, "remote_ec_fragments_got");
	gets0 = stat_of(t, 0, "remote_ec_gets");
	assert_int_equal(check_all(r, pool, 1, &eio), 0);
	usleep(200000); /* the last late answers */
	fprintf(stderr, "  ec_read_extra 1: %llu gets, %llu fragments used, %llu late\n",
		(unsigned long long)(stat_of(t, 0, "remote_ec_gets") - gets0),
		(unsigned long long)(stat_of(t, 0, "remote_ec_fragments_got") - got0),
		(unsigned long long)stat_of(t, 0, "remote_ec_fragments_late"));
	/* each get asked its three holders: two answers used, the third late */
	assert_true(stat_of(t, 0, "remote_ec_fragments_late") > 0);
	assert_true(stat_of(t, 0, "remote_ec_fragments_got") - got0 +
		    stat_of(t, 0, "remote_ec_fragments_late") >=
		    3 * (stat_of(t, 0, "remote_ec_gets") - gets0) * 9 / 10);

	assert_int_equal(kill(t->h[1].pid, SIGSTOP), 0);
	t0 = harness_now_ms();
	bad = check_all(r, pool, 1, &eio);
	fprintf(stderr, "  beta stopped: every page read in %llu ms (request timeout %d ms), "
		"%u not identical, %u -EIO\n",
		(unsigned long long)(harness_now_ms() - t0), 12000 * SLOW, bad, eio);
	assert_int_equal(kill(t->h[1].pid, SIGCONT), 0);
	assert_int_equal(bad, 0);

	/* every page flushed one by one: no fragment stays on a holder (a holder
	 * told a fragment's version by the put, not by its bytes) */
	for (unsigned i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);

		assert_int_equal(ramster_flush(r, pool, &oid, i % PER_OBJ), 0);
	}
	for (int i = 1; i < 4; i++) {
		uint64_t left = 0;

		(void)coll_wait_stat(t, i, "foreign_pages", 0, 0, 10000 * SLOW);
		assert_int_equal(coll_stat(t, i, "foreign_pages", &left), 0);
		fprintf(stderr, "  %s holds %llu fragments after the flushes (refused as newer: %llu)\n",
			names[i], (unsigned long long)left,
			(unsigned long long)stat_of(t, i, "foreign_flushes_newer"));
		assert_int_equal(left, 0);
	}
	ramster_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_ec_kill_repair_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ec_liar, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ec_read_extra, setup, teardown),
	};
	const char *slow = getenv("RAMSTER_TEST_SLOW");

	if (slow && atoi(slow) > 0)
		SLOW = atoi(slow);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
