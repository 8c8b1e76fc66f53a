/*
 * test_collective.c - three real ramsterd nodes on this machine (127.0.0.1,
 * .2, .3, real TCP links) forming a collective: remotify, repatriate, remote
 * flush accounting, a peer killed with SIGKILL (at rest and mid-transfer)
 * and restarted, and peers that must be refused (wrong secret, other
 * cluster, malformed frames).
 *
 * The same suite runs over soft-RoCE in the VM (tests/vm/test-collective-
 * rdma.sh) with, from the environment: RAMSTER_TEST_TRANSPORT (tcp, rdma,
 * or mixed: tcp, rdma, auto), RAMSTER_TEST_NET (address prefix, default
 * "127.0.0."), RAMSTER_TEST_LOCAL_MB (node 1's tier) and RAMSTER_TEST_SLOW
 * (a factor for every wait, for TCG).
 *
 * Every get returns the right page or an error, never wrong data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramster.h"
#include "tests/integration/collective.h"
#include "tests/integration/harness.h"

#define PAGE RAMSTER_PAGE_SIZE
#define NODES_MAX 4
#define HEARTBEAT_MS (50 * SLOW)
#define DEAD_MS (500 * SLOW)
/* how long a get rides out an unreachable holder (from the start of its
 * silence): a load stall of this machine must not fail gets */
#define TIMEOUT_MS (4 * DEAD_MS)
/* a silent holder's lease: a get of a killed holder's page waits this long
 * (from the start of its silence) before the page is lost (issue 20: a get
 * waits for a holder that may be alive rather than report its page lost) */
#define ORPHAN_MS (6 * DEAD_MS)

/* Nodes in the collective and copies of a page: 3 and 1 but for the
 * replication tests (setup_replicated). */
static int NODES = 3;
static int REPLICAS = 1;

/* From the environment (see the header); set in main(). */
static int LOCAL_MB = 4;        /* node 1's tier: 1024 frames */
static int SLOW = 1;
static const char *NET = "127.0.0.";
static const char *TRANSPORT = "tcp";
/* the nodes' tier (RAMSTER_TEST_ALLOCATOR, RAMSTER_TEST_COMPRESSOR): any mix works */
static const char *ALLOCATOR = "dense";
static const char *COMPRESSOR = "lzo";

static const char *transport_of(int n)
{
	static const char *const mixed[NODES_MAX] = { "tcp", "rdma", "auto", "rdma" };

	return strcmp(TRANSPORT, "mixed") ? TRANSPORT : mixed[n];
}

static const char *const names[NODES_MAX] = { "alpha", "beta", "gamma", "delta" };

/* Write the cluster file for node i (cluster name and key as given; NULL: the collective's). */
static void write_conf(struct coll *c, int i, const char *cluster, const char *key)
{
	snprintf(c->cluster, sizeof(c->cluster), "%s", cluster);
	snprintf(c->secret_file, sizeof(c->secret_file), "%s", key ? key : "");
	assert_int_equal(coll_write_conf(c, i), 0);
}

static int setup(void **state)
{
	struct coll *c = coll_create("coll",
				     "3b6f2a7c9d1e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f809a1b2c3\n");
	int i;

	if (!c)
		return -1;
	/* room_wait_ms stretched with the rest: a slow VM's remotify frees room
	 * later than the default 0.5 s */
	snprintf(c->extra, sizeof(c->extra),
		 "heartbeat_ms = %d\ndead_after_ms = %d\nrequest_timeout_ms = %d\n"
		 "orphan_after_ms = %d\nroom_wait_ms = %d\nreplicas = %d\n",
		 HEARTBEAT_MS, DEAD_MS, TIMEOUT_MS, ORPHAN_MS, 500 * SLOW, REPLICAS);
	for (i = 0; i < NODES; i++) {
		struct coll_node *n = &c->node[i];

		coll_set_node(c, i, names[i], i == 0 ? LOCAL_MB : 64, i == 0 ? 16 : 128);
		snprintf(n->host, sizeof(n->host), "%s%d", NET, i + 1);
		snprintf(n->extra, sizeof(n->extra), "transport = %s\nallocator = %s\ncompressor = %s\n",
			 transport_of(i), ALLOCATOR, COMPRESSOR);
		n->args[0] = "--log-level";
		n->args[1] = "notice";
	}
	snprintf(c->cluster, sizeof(c->cluster), "test");
	if (coll_write_confs(c) || coll_start_all(c))
		goto fail;
	if (coll_wait_up(c, 0, NODES - 1, 5000 * SLOW)) {
		fprintf(stderr, "the collective did not come up\n");
		goto fail;
	}
	*state = c;
	return 0;
fail:
	coll_destroy(c); /* cmocka runs no teardown after a failed setup */
	return -1;
}

static int teardown(void **state)
{
	return coll_destroy(*state) ? -1 : 0;
}

static uint64_t stat_of(struct coll *c, int i, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(coll_stat(c, i, name, &v), 0);
	return v;
}

/*
 * Wait until a + b on the peers equals node 1's remote page count, with
 * remotify at rest: every frame it took is finished and the count held still
 * across two readings 50 ms apart (a match between two remotify batches is
 * not the end; CI once read foreign_pages in such a gap). Return the count.
 */
static uint64_t wait_counts_match(struct coll *c, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms, mine, theirs, last = UINT64_MAX;
	int i;

	do {
		int idle = stat_of(c, 0, "remote_frames_taken") == stat_of(c, 0, "remote_frames_done");

		mine = stat_of(c, 0, "tier_remote_pages");
		theirs = 0;
		for (i = 1; i < NODES; i++) /* the living peers */
			if (c->h[i].pid)
				theirs += stat_of(c, i, "foreign_pages");
		if (mine == theirs && idle && mine == last)
			return mine;
		last = mine == theirs && idle ? mine : UINT64_MAX;
		usleep(50000);
	} while (harness_now_ms() < end);
	fail_msg("node 1 says %llu pages are remote, its peers hold %llu", (unsigned long long)mine,
		 (unsigned long long)theirs);
	return 0;
}

/* 4x node 1's tier: 1024 frames of two text pages each, four times over. */
#define BIG ((uint64_t)LOCAL_MB * 256 * 2 * 4)
#define OBJ_PAGES 512

static void put_all(ramster *r, int pool, uint64_t n, uint64_t tag)
{
	static unsigned char pages[64][PAGE];
	struct ramster_iov v[64];
	uint64_t i, k;

	for (i = 0; i < n; i += 64) {
		size_t m = n - i < 64 ? n - i : 64;

		for (k = 0; k < m; k++) {
			v[k].oid = harness_oid(tag, (i + k) / OBJ_PAGES);
			v[k].index = (uint32_t)((i + k) % OBJ_PAGES);
			v[k].page = pages[k];
			harness_page_text(pages[k], tag * 1000003 + i + k);
		}
		assert_int_equal(ramster_putv(r, pool, v, m), (int)m);
	}
}

/* Read every page back; count hits, misses and losses; every hit exact. */
static void get_all(ramster *r, int pool, uint64_t n, uint64_t tag, uint64_t *hits,
		    uint64_t *misses, uint64_t *lost)
{
	static unsigned char pages[64][PAGE], want[PAGE];
	struct ramster_iov v[64];
	uint64_t i, k;

	*hits = *misses = *lost = 0;
	for (i = 0; i < n; i += 64) {
		size_t m = n - i < 64 ? n - i : 64;

		for (k = 0; k < m; k++) {
			v[k].oid = harness_oid(tag, (i + k) / OBJ_PAGES);
			v[k].index = (uint32_t)((i + k) % OBJ_PAGES);
			v[k].page = pages[k];
		}
		assert_true(ramster_getv(r, pool, v, m) >= 0);
		for (k = 0; k < m; k++) {
			if (v[k].result == 0) {
				harness_page_text(want, tag * 1000003 + i + k);
				assert_memory_equal(want, pages[k], PAGE);
				(*hits)++;
			} else if (v[k].result == -ENOENT) {
				(*misses)++;
			} else {
				assert_int_equal(v[k].result, -EIO);
				(*lost)++;
			}
		}
	}
}

static void test_remotify_repatriate_flush(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost, remote;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	struct ramster_oid oid;

	assert_true(pool >= 0);
	put_all(r, pool, BIG, 1);
	remote = wait_counts_match(c, 5000 * SLOW);
	assert_true(remote > BIG / 2); /* most of it had to go */
	assert_true(stat_of(c, 1, "foreign_pages") > 0);
	assert_true(stat_of(c, 2, "foreign_pages") > 0);
	get_all(r, pool, BIG, 1, &hits, &misses, &lost);
	assert_int_equal(hits, BIG);
	assert_true(stat_of(c, 0, "tier_repatriated") > 0);
	if (!strcmp(TRANSPORT, "rdma")) {
		/* every link is rdma: the peers named where the bytes are, and the
		 * repatriates read them one-sided, without the holders' CPUs */
		uint64_t reads = stat_of(c, 0, "remote_rdma_reads");

		fprintf(stderr, "rdma: %llu one-sided reads, %llu fell back to messages; "
				"chunks registered: beta %llu, gamma %llu\n",
			(unsigned long long)reads,
			(unsigned long long)stat_of(c, 0, "remote_rdma_read_fallbacks"),
			(unsigned long long)stat_of(c, 1, "remote_rdma_chunks"),
			(unsigned long long)stat_of(c, 2, "remote_rdma_chunks"));
		assert_true(stat_of(c, 1, "remote_rdma_chunks") > 0);
		assert_true(reads > stat_of(c, 0, "tier_repatriated") / 2);
	} else if (!strcmp(TRANSPORT, "tcp")) {
		assert_int_equal(stat_of(c, 0, "remote_rdma_reads"), 0);
	}
	/* flush-object reaches the holders */
	oid = harness_oid(1, 0);
	assert_int_equal(ramster_flush_object(r, pool, &oid), 0);
	wait_counts_match(c, 5000 * SLOW);
	/* destroy-pool brings every peer's foreign count to zero */
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
	assert_int_equal(stat_of(c, 1, "foreign_pages") + stat_of(c, 2, "foreign_pages"), 0);
	ramster_close(r);
}

static void test_ephemeral_and_clients_on_two_nodes(void **state)
{
	struct coll *c = *state;
	ramster *r1 = harness_connect(&c->h[0]), *r2 = harness_connect(&c->h[1]);
	uint64_t hits, misses, lost;
	int pe = ramster_pool_new(r1, 0, NULL), pp = ramster_pool_new(r2, RAMSTER_PERSISTENT, NULL);

	assert_true(pe >= 0 && pp >= 0);
	put_all(r1, pe, BIG, 2);
	put_all(r2, pp, 4096, 3);
	get_all(r1, pe, BIG, 2, &hits, &misses, &lost);
	assert_int_equal(lost, 0);      /* ephemeral: misses allowed, never an error */
	assert_true(hits > 0);
	assert_true(stat_of(c, 0, "remote_pages_placed") > 0); /* some went to the peers */
	get_all(r2, pp, 4096, 3, &hits, &misses, &lost);
	assert_int_equal(hits, 4096);
	/* private ephemeral gets were destructive: nothing left on node 1's peers */
	get_all(r1, pe, BIG, 2, &hits, &misses, &lost);
	assert_int_equal(hits, 0);
	ramster_close(r1);
	assert_int_equal(ramster_pool_destroy(r2, pp), 0);
	ramster_close(r2);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
}

/* Several clients at once on all three nodes, each with its own pools. */
struct worker {
	struct coll *c;
	int node;
	uint64_t tag;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	ramster *r = harness_connect(&w->c->h[w->node]);
	static __thread unsigned char page[PAGE], want[PAGE];
	int pool, i, flags = (w->tag & 1) ? RAMSTER_PERSISTENT : 0;

	if (!r) {
		w->errors++;
		return NULL;
	}
	pool = ramster_pool_new(r, (unsigned)flags, NULL);
	for (i = 0; i < 3000 && pool >= 0; i++) {
		struct ramster_oid oid = harness_oid(w->tag, (uint64_t)i / 100);

		harness_page_text(page, w->tag * 7919 + (uint64_t)i);
		if (ramster_put(r, pool, &oid, (uint32_t)(i % 100), page) && flags)
			w->errors++; /* persistent puts must be taken (the collective has room) */
	}
	for (i = 0; i < 3000 && pool >= 0; i++) {
		struct ramster_oid oid = harness_oid(w->tag, (uint64_t)i / 100);
		int rc = ramster_get(r, pool, &oid, (uint32_t)(i % 100), page);

		harness_page_text(want, w->tag * 7919 + (uint64_t)i);
		if (rc == 0 && memcmp(page, want, PAGE))
			w->errors++; /* never wrong data */
		if (rc && (flags || rc != -ENOENT))
			w->errors++;
	}
	if (pool < 0)
		w->errors++;
	ramster_close(r);
	return NULL;
}

static void test_many_clients_many_nodes(void **state)
{
	struct coll *c = *state;
	struct worker w[6];
	pthread_t th[6];
	int i;

	for (i = 0; i < 6; i++) {
		w[i] = (struct worker){ c, i % NODES, 100 + (uint64_t)i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	/* every client closed: its pools are gone, here and on the peers */
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
	for (i = 0; i < NODES; i++)
		assert_true(harness_alive(&c->h[i]));
}

static void test_kill_peer(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost, on_gamma, t0, took;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	put_all(r, pool, BIG, 4);
	assert_true(wait_counts_match(c, 5000 * SLOW) > 0);
	on_gamma = stat_of(c, 2, "foreign_pages");
	assert_true(on_gamma > 0);
	/* kill -9 gamma, and read everything at once */
	harness_kill(&c->h[2], SIGKILL);
	t0 = harness_now_ms();
	get_all(r, pool, BIG, 4, &hits, &misses, &lost);
	took = harness_now_ms() - t0;
	assert_int_equal(misses, 0);
	assert_int_equal(lost, on_gamma);          /* exactly its pages: -EIO */
	assert_int_equal(hits + lost, BIG);
	/* issues 11 and 20: a silent holder is unreachable, not dead: gets of its
	 * pages wait for it until its lease ends (orphan_after_ms after its
	 * silence began), then its pages are lost and later gets fail at once.
	 * Printed, not judged (no wall-clock pass/fail in make check). */
	printf("read-back after the kill: %llu ms for %llu pages (orphan_after_ms %d)\n",
	       (unsigned long long)took, (unsigned long long)BIG, ORPHAN_MS);
	assert_true(stat_of(c, 0, "cluster_leases_expired") >= 1);
	assert_true(harness_alive(&c->h[0]) && harness_alive(&c->h[1]));
	/* get-get: a lost page stays lost */
	get_all(r, pool, BIG, 4, &hits, &misses, &lost);
	assert_int_equal(lost, on_gamma);
	/* gamma restarts and rejoins with a new incarnation */
	assert_int_equal(coll_start(c, 2), 0);
	assert_int_equal(coll_wait_up(c, 0, 2, 5000 * SLOW), 0);
	assert_int_equal(coll_wait_up(c, 2, 2, 5000 * SLOW), 0);
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
	ramster_close(r);
}

/* Kill a peer while remotify is still moving pages to it: nothing wrong, nothing hangs. */
static void test_kill_peer_mid_transfer(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	put_all(r, pool, BIG, 5);
	/* no waiting for remotify to settle: frames are in flight to gamma now */
	harness_kill(&c->h[2], SIGKILL);
	get_all(r, pool, BIG, 5, &hits, &misses, &lost);
	assert_int_equal(misses, 0);
	assert_int_equal(hits + lost, BIG);
	/* what gamma held is lost; what was in flight to it stayed local or went to beta */
	assert_true(hits >= BIG / 4);
	assert_true(harness_alive(&c->h[0]) && harness_alive(&c->h[1]));
	/* the survivors agree on what is left, and the pool's destroy clears beta */
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
	ramster_close(r);
}

/*
 * Reset the TCP link between alpha and beta (ss -K): a lost link is not a
 * dead peer, and gets of beta's pages wait for the next link rather than
 * report them lost (a bug the collective benchmark found).
 */
static void test_link_reset_loses_nothing(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost;
	char cmd[160];
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	if (strcmp(TRANSPORT, "tcp")) {
		ramster_close(r);
		skip(); /* ss -K reaches TCP sockets only */
	}
	assert_true(pool >= 0);
	put_all(r, pool, BIG, 6);
	wait_counts_match(c, 5000 * SLOW);
	assert_true(stat_of(c, 1, "foreign_pages") > 0);
	snprintf(cmd, sizeof(cmd), "ss -K dst %s2 src %s1 >/dev/null 2>&1", NET, NET);
	if (system(cmd) != 0) {
		ramster_close(r);
		skip(); /* this kernel cannot destroy sockets (CONFIG_INET_DIAG_DESTROY) */
	}
	get_all(r, pool, BIG, 6, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(hits, BIG);
	assert_int_equal(coll_wait_up(c, 0, 2, 5000 * SLOW), 0);
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	ramster_close(r);
}

/*
 * A holder stopped past dead_after_ms is unreachable, not dead: nothing is
 * dropped on either side. What the owner flushes meanwhile is owed to it and
 * sent when it is back (same incarnation): it then keeps exactly what the
 * owner still names, and every page reads back.
 */
static void test_paused_holder_keeps_pages(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost, on_gamma;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	int gone = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0 && gone >= 0);
	put_all(r, pool, BIG / 2, 14);
	put_all(r, gone, BIG / 2, 15);
	wait_counts_match(c, 5000 * SLOW);
	on_gamma = stat_of(c, 2, "foreign_pages");
	assert_true(on_gamma > 0);
	assert_int_equal(kill(c->h[2].pid, SIGSTOP), 0);
	assert_int_equal(coll_wait_stat(c, 0, "cluster_peers_unreachable", 1, 1, 5000 * SLOW), 0);
	/* meanwhile the owner drops a pool: gamma is owed its flush */
	assert_int_equal(ramster_pool_destroy(r, gone), 0);
	usleep(200000);
	assert_true(stat_of(c, 0, "remote_flushes_logged") > 0);
	assert_int_equal(stat_of(c, 0, "remote_owner_drops"), 0);
	assert_int_equal(stat_of(c, 1, "remote_owner_drops"), 0);
	assert_int_equal(kill(c->h[2].pid, SIGCONT), 0);
	assert_int_equal(coll_wait_up(c, 0, 2, 5000 * SLOW), 0);
	assert_int_equal(stat_of(c, 0, "cluster_peer_restarts"), 0);
	assert_true(stat_of(c, 0, "cluster_peer_returns") >= 1);
	assert_true(stat_of(c, 0, "remote_flushes_replayed") > 0);
	/* no leak: gamma holds just what alpha still names; nothing was dropped */
	wait_counts_match(c, 5000 * SLOW);
	assert_int_equal(stat_of(c, 2, "remote_owner_drops") + stat_of(c, 2, "remote_orphans_expired"),
			 0);
	get_all(r, pool, BIG / 2, 14, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(misses, 0);
	assert_int_equal(hits, BIG / 2);
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), 0);
	ramster_close(r);
}

/* ramster_ping: to the node, and through it to each peer over their link. */
static void test_ping(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	static unsigned char out[PAGE], back[PAGE];
	uint32_t n;

	harness_page_text(out, 77);
	for (n = 0; n <= (uint32_t)NODES; n++) {
		if (n == 1)
			continue; /* node 1 is alpha itself: not its own peer */
		memset(back, 0, PAGE);
		assert_int_equal(ramster_ping(r, n, out, back), 0);
		assert_memory_equal(out, back, PAGE);
	}
	assert_int_equal(ramster_ping(r, 9, out, back), -ENOENT);   /* no such peer */
	assert_int_equal(ramster_ping(r, 65, out, back), -EINVAL);  /* not a node id */
	harness_kill(&c->h[2], SIGKILL);
	/* gamma is gone: the ping waits for the link, then the death (never hangs) */
	assert_true(ramster_ping(r, 3, out, back) < 0);
	assert_true(stat_of(c, 1, "remote_served_echoes") > 0);
	ramster_close(r);
}

/* A node with the wrong secret, and one from another cluster, never join. */
static void test_wrong_secret_and_cluster(void **state)
{
	struct coll *c = *state;
	char badkey[sizeof(c->secret_file)];
	uint64_t before = stat_of(c, 0, "cluster_auth_failures");

	/* restart gamma with another key */
	harness_kill(&c->h[2], SIGKILL);
	snprintf(badkey, sizeof(badkey), "%s/other.key", c->dir);
	assert_int_equal(
	    coll_write_key(badkey, "c0ffee11d0c5e2a9b7f4a38e5d6c1b2a9f8e7d6c5b4a39281706f5e4d3c2b1a0\n"), 0);
	write_conf(c, 2, "test", badkey);
	assert_int_equal(coll_start(c, 2), 0);
	usleep(1500 * 1000 * SLOW);
	/* the dialers (alpha, beta) prove first; gamma, the acceptor, finds their proofs wrong */
	assert_true(stat_of(c, 0, "cluster_auth_failures") + stat_of(c, 1, "cluster_auth_failures") +
			    stat_of(c, 2, "cluster_auth_failures") >
		    before);
	assert_int_equal(coll_wait_up(c, 2, 1, 300), -ETIMEDOUT);
	/* and with the right key but another cluster name */
	assert_int_equal(harness_stop(&c->h[2]), 0);
	write_conf(c, 2, "other", NULL);
	assert_int_equal(coll_start(c, 2), 0);
	usleep(1500 * 1000 * SLOW);
	assert_int_equal(coll_wait_up(c, 2, 1, 300), -ETIMEDOUT);
	assert_true(harness_alive(&c->h[0]) && harness_alive(&c->h[1]));
	/* the two good nodes still work together */
	assert_int_equal(coll_wait_up(c, 0, 1, 1000 * SLOW), 0);
}

/* A raw TCP "peer" sending garbage is cut off; the node carries on. */
static void test_malformed_peer_frames(void **state)
{
	struct coll *c = *state;
	static const unsigned char frames[][16] = {
		{ 'X', 'X', 'X', 'X', 1, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0 },   /* bad magic */
		{ 'R', 'M', 'S', 'P', 1, 1, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0 }, /* huge msg */
		{ 'R', 'M', 'S', 'P', 9, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0 },   /* bad version */
		{ 'R', 'M', 'S', 'P', 1, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0 },   /* junk message */
	};
	uint64_t before = stat_of(c, 0, "cluster_bad_frames") + stat_of(c, 0, "cluster_auth_failures");
	size_t i;

	for (i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)c->port) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		char buf[256];
		struct timeval tv = { 3, 0 };
		ssize_t n;

		char host[32];

		snprintf(host, sizeof(host), "%s1", NET);
		assert_int_equal(inet_pton(AF_INET, host, &sa.sin_addr), 1);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		assert_int_equal(write(fd, frames[i], 16), 16);
		assert_int_equal(write(fd, "\xff\xff\xff\xff", 4), 4);
		/* the node may send its HELLO first; then it must close */
		do
			n = read(fd, buf, sizeof(buf));
		while (n > 0);
		assert_true(n == 0 || (n < 0 && errno == ECONNRESET));
		close(fd);
	}
	assert_true(stat_of(c, 0, "cluster_bad_frames") + stat_of(c, 0, "cluster_auth_failures") >
		    before);
	assert_true(harness_alive(&c->h[0]));
	assert_int_equal(coll_wait_up(c, 0, 2, 1000 * SLOW), 0);
}

/* ---- replication and drain -------------------------------------------------------- */

/*
 * The store's room-wait policy (node/store.c), with real daemons: every peer
 * drained, so remotify cannot make room. A batch of persistent puts into the
 * full tier waits once (at most 0.5 s) and then refuses the rest of the batch
 * at once; before the store layer the client waited 0.5 s for every page (a
 * 64-page batch: 32 s). Counted, not timed: one wait and one refusal after
 * waiting for the whole batch, every page -ENOSPC.
 */
static void test_full_tier_batch_waits_once(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	static unsigned char pages[64][PAGE];
	struct ramster_iov v[64];
	uint64_t i, k, waits, refused, t0;
	int pool, rc = 64;

	assert_non_null(r);
	assert_int_equal(ramster_drain(r, 2, 1), 0);
	assert_int_equal(ramster_drain(r, 3, 1), 0);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	/* fill the tier: batches until one is refused in part */
	for (i = 0; rc == 64 && i < BIG * 4; i += 64) {
		for (k = 0; k < 64; k++) {
			v[k].oid = harness_oid(7, (i + k) / OBJ_PAGES);
			v[k].index = (uint32_t)((i + k) % OBJ_PAGES);
			v[k].page = pages[k];
			harness_page_text(pages[k], 7 * 1000003 + i + k);
		}
		rc = ramster_putv(r, pool, v, 64);
		assert_true(rc >= 0);
	}
	assert_true(rc < 64); /* the tier filled: nothing could go to the drained peers */
	waits = stat_of(c, 0, "store_room_waits");
	refused = stat_of(c, 0, "store_room_refused");
	/* one more batch of new pages: one wait, then every page refused */
	for (k = 0; k < 64; k++) {
		v[k].oid = harness_oid(8, 0);
		v[k].index = (uint32_t)k;
		v[k].page = pages[k];
		harness_page_text(pages[k], 8 * 1000003 + k);
	}
	t0 = harness_now_ms();
	rc = ramster_putv(r, pool, v, 64);
	fprintf(stderr, "a 64-page batch into a full tier answered in %llu ms, %d stored\n",
		(unsigned long long)(harness_now_ms() - t0), rc);
	/*
	 * Text pages differ in compressed size: a small one may still fit a gap
	 * the fill left in a frame (seen once, 2 of 64, under TSan). Such a page
	 * is stored without waiting; every other page is refused, and the batch
	 * still waits once.
	 */
	assert_true(rc >= 0 && rc < 8);
	for (k = 0, i = 0; k < 64; k++) {
		assert_true(v[k].result == 0 || v[k].result == -ENOSPC);
		i += v[k].result == 0;
	}
	assert_int_equal(i, (uint64_t)rc);
	assert_int_equal(stat_of(c, 0, "store_room_waits"), waits + 1);
	assert_int_equal(stat_of(c, 0, "store_room_refused"), refused + 1);
	assert_int_equal(stat_of(c, 0, "node_put_room_refused") > 0, 1);
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	ramster_close(r);
}


static int setup_replicated(void **state)
{
	NODES = 4;
	REPLICAS = 2;
	return setup(state);
}

static int teardown_replicated(void **state)
{
	int rc = teardown(state);

	NODES = 3;
	REPLICAS = 1;
	return rc;
}

/* Pages the living peers hold for node 1, all told. */
static uint64_t peers_foreign(struct coll *c)
{
	uint64_t n = 0;
	int i;

	for (i = 1; i < NODES; i++)
		if (c->h[i].pid)
			n += stat_of(c, i, "foreign_pages");
	return n;
}

/* Wait until node 1's remotify is at rest; return its remote page count. */
static uint64_t wait_remotify_rest(struct coll *c, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms, last = UINT64_MAX, now;

	do {
		int idle = stat_of(c, 0, "remote_frames_taken") == stat_of(c, 0, "remote_frames_done");

		now = stat_of(c, 0, "tier_remote_pages");
		if (idle && now == last)
			return now;
		last = idle ? now : UINT64_MAX;
		usleep(100000);
	} while (harness_now_ms() < end);
	fail_msg("remotify never came to rest");
	return 0;
}

/*
 * replicas = 2 on four nodes: every remote persistent page has two copies on
 * two different peers; a peer killed costs nothing, its copies are made again
 * on the others, and then a second peer killed costs nothing either.
 */
static void test_replicas_survive_two_deaths(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]);
	uint64_t hits, misses, lost, remote, i;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	put_all(r, pool, BIG, 11);
	remote = wait_remotify_rest(c, 10000 * SLOW);
	assert_true(remote > BIG / 2);
	assert_int_equal(stat_of(c, 0, "replica_target"), 2);
	assert_int_equal(stat_of(c, 0, "tier_replica_records"), remote);
	assert_int_equal(peers_foreign(c), 2 * remote);
	for (i = 1; i < (uint64_t)NODES; i++) /* never both copies on one peer */
		assert_true(stat_of(c, (int)i, "foreign_pages") <= remote);

	harness_kill(&c->h[2], SIGKILL);
	get_all(r, pool, BIG, 11, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(misses, 0);
	assert_int_equal(hits, BIG);
	/* gamma declared unreachable, its copies made again on beta and delta (at
	 * least one: on a loaded machine a live peer may flap unreachable too,
	 * which since issue 11 costs nothing) */
	assert_int_equal(coll_wait_stat(c, 0, "cluster_peer_deaths", 1, UINT64_MAX, 5000 * SLOW), 0);
	assert_int_equal(coll_wait_stat(c, 0, "replica_repair_active", 0, 0, 30000 * SLOW), 0);
	assert_int_equal(stat_of(c, 0, "replica_below_target"), 0);
	assert_true(stat_of(c, 0, "replica_rereplicated") > 0);
	assert_int_equal(stat_of(c, 0, "replica_lost"), 0);
	remote = wait_remotify_rest(c, 10000 * SLOW);
	assert_int_equal(peers_foreign(c), 2 * stat_of(c, 0, "tier_replica_records"));

	/* a second death: every page still has a copy */
	harness_kill(&c->h[3], SIGKILL);
	get_all(r, pool, BIG, 11, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(hits, BIG);
	assert_int_equal(stat_of(c, 0, "replica_lost"), 0);
	/* flushes reach every copy: the pool's destroy leaves beta empty */
	assert_int_equal(ramster_pool_destroy(r, pool), 0);
	assert_int_equal(coll_wait_stat(c, 1, "foreign_pages", 0, 0, 5000 * SLOW), 0);
	ramster_close(r);
}

/*
 * Drain gamma (replicas = 1): it hands every page it holds to alpha, which
 * places them on beta; a drained node takes no new page; then gamma is
 * killed and nothing is lost.
 */
static void test_drain_then_kill_loses_nothing(void **state)
{
	struct coll *c = *state;
	ramster *r = harness_connect(&c->h[0]), *g = harness_connect(&c->h[2]);
	uint64_t hits, misses, lost, on_gamma;
	int pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);

	assert_true(pool >= 0);
	assert_non_null(g);
	put_all(r, pool, BIG, 12);
	wait_counts_match(c, 5000 * SLOW);
	on_gamma = stat_of(c, 2, "foreign_pages");
	assert_true(on_gamma > 0);
	/* undrain before anything moved is harmless; drain flags are checked */
	assert_int_equal(ramster_drain(g, 0, 2), -EINVAL);
	assert_int_equal(ramster_drain(g, 0, 0), 0);
	assert_true(ramster_drain(r, 9, 1) < 0); /* no such peer */
	assert_int_equal(ramster_drain(r, 3, 1), 0); /* relayed by alpha to gamma */
	assert_int_equal(stat_of(c, 2, "drain_active"), 1);
	assert_int_equal(coll_wait_stat(c, 2, "foreign_pages", 0, 0, 90000 * SLOW), 0);
	assert_int_equal(stat_of(c, 2, "drain_pages_left"), 0);
	assert_true(stat_of(c, 2, "drain_returned") + stat_of(c, 2, "drain_orphans") >= on_gamma);
	assert_true(stat_of(c, 0, "remote_returns_served") > 0);
	assert_int_equal(wait_counts_match(c, 5000 * SLOW), stat_of(c, 1, "foreign_pages"));
	/* a drained node takes no new pages */
	put_all(r, pool, BIG / 4, 13);
	wait_counts_match(c, 5000 * SLOW);
	assert_int_equal(stat_of(c, 2, "foreign_pages"), 0);

	harness_kill(&c->h[2], SIGKILL);
	get_all(r, pool, BIG, 12, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(hits, BIG);
	get_all(r, pool, BIG / 4, 13, &hits, &misses, &lost);
	assert_int_equal(lost, 0);
	assert_int_equal(hits, BIG / 4);
	ramster_close(g);
	ramster_close(r);
}

static int env_int(const char *name, int def, int lo, int hi)
{
	const char *v = getenv(name);
	int n = v && *v ? atoi(v) : def;

	return n < lo ? lo : n > hi ? hi : n;
}

/*
 * RAMSTER_TEST_CASES="a,b": only the cases of those names, in the suite's
 * order (the VM's mixed-transport pass: tests/vm/test-collective-rdma.sh);
 * a name that matches no case is an error, not a silent skip.
 */
static int run_cases(const struct CMUnitTest *all, size_t n, const char *want)
{
	struct CMUnitTest sel[32];
	bool picked[32] = {false};
	char list[512], *save = NULL, *name;
	size_t i, k = 0;

	if (!want || !*want)
		return _cmocka_run_group_tests("collective", all, n, NULL, NULL);
	if (strlen(want) >= sizeof(list) || n > sizeof(sel) / sizeof(sel[0])) {
		fprintf(stderr, "RAMSTER_TEST_CASES: too long\n");
		return 2;
	}
	strcpy(list, want);
	for (name = strtok_r(list, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
		for (i = 0; i < n && strcmp(all[i].name, name); i++)
			;
		if (i == n) {
			fprintf(stderr, "RAMSTER_TEST_CASES: no case %s\n", name);
			return 2;
		}
		picked[i] = true;
	}
	for (i = 0; i < n; i++)
		if (picked[i])
			sel[k++] = all[i];
	return _cmocka_run_group_tests("collective", sel, k, NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_remotify_repatriate_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ephemeral_and_clients_on_two_nodes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_many_clients_many_nodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_peer_mid_transfer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_reset_loses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_holder_keeps_pages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_secret_and_cluster, setup, teardown),
		cmocka_unit_test_setup_teardown(test_malformed_peer_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_then_kill_loses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_tier_batch_waits_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replicas_survive_two_deaths, setup_replicated,
						teardown_replicated),
	};

	LOCAL_MB = env_int("RAMSTER_TEST_LOCAL_MB", 4, 1, 64);
	SLOW = env_int("RAMSTER_TEST_SLOW", 1, 1, 100);
	if (getenv("RAMSTER_TEST_NET") && *getenv("RAMSTER_TEST_NET"))
		NET = getenv("RAMSTER_TEST_NET");
	if (getenv("RAMSTER_TEST_TRANSPORT") && *getenv("RAMSTER_TEST_TRANSPORT"))
		TRANSPORT = getenv("RAMSTER_TEST_TRANSPORT");
	if (getenv("RAMSTER_TEST_ALLOCATOR") && *getenv("RAMSTER_TEST_ALLOCATOR"))
		ALLOCATOR = getenv("RAMSTER_TEST_ALLOCATOR");
	if (getenv("RAMSTER_TEST_COMPRESSOR") && *getenv("RAMSTER_TEST_COMPRESSOR"))
		COMPRESSOR = getenv("RAMSTER_TEST_COMPRESSOR");
	fprintf(stderr,
		"collective: transport %s, net %sN, node 1 local_mb %d, slow x%d, allocator %s, "
		"compressor %s\n",
		TRANSPORT, NET, LOCAL_MB, SLOW, ALLOCATOR, COMPRESSOR);
	if (getenv("RAMSTER_TEST_FILTER") && *getenv("RAMSTER_TEST_FILTER"))
		cmocka_set_test_filter(getenv("RAMSTER_TEST_FILTER")); /* e.g. "test_kill*" */
	return run_cases(tests, sizeof(tests) / sizeof(tests[0]), getenv("RAMSTER_TEST_CASES"));
}
