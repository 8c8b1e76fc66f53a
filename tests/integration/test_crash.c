/*
 * test_crash.c - a crash loses no persistent page (issue 22): a real ramsterd
 * with crash_dir on tmpfs is killed with SIGKILL and started again on the
 * same socket; the client that was using it reconnects on its own, attaches
 * its pools again and reads every page back byte-identical (zero pages
 * included), flushed pages stay flushed, and nothing answers -EIO. Then the
 * kill lands while a thread is putting: every put that was answered reads
 * back, the one in flight left the old page or the new. A crash directory
 * that others may enter is refused, and so is a second daemon on it.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "collective.h"
#include "harness.h"

#define PAGE	4096
#define PAGES	50000 /* over two pools */
#define PER_OBJ 512
static int SLOW = 1; /* RAMSTER_TEST_SLOW: sanitizer builds stretch the waits */

static char crash_dir[64];

static bool on_tmpfs(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && (uint32_t)fs.f_type == 0x01021994u;
}

static uint64_t stat_of(ramster *r, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(harness_stat(r, name, &v), 0);
	return v;
}

static uint64_t stat_of_coll(const struct coll *c, int i, const char *name)
{
	uint64_t v = 0;

	assert_int_equal(coll_stat(c, i, name, &v), 0);
	return v;
}

/* The node, once it answers again after a crash. */
static ramster *wait_back(const struct harness *h, unsigned ms)
{
	uint64_t end = harness_now_ms() + ms, found = 0;
	ramster *r;

	do {
		r = harness_connect(h);
		if (r && harness_stat(r, "crash_found", &found) == 0)
			return r;
		if (r)
			ramster_close(r);
		usleep(20000);
	} while (harness_now_ms() < end);
	return NULL;
}

/* Page i in version v: a zero page every 9th, else text. */
static void page_of(unsigned i, unsigned v, void *p)
{
	if (i % 9 == 4)
		harness_page_zero(p);
	else
		harness_page_text(p, 0xc4a5 + i * 7919u + v);
}

static int pool_of(unsigned i, int priv, int shared)
{
	return i % 2 ? shared : priv;
}

static void test_crash_keeps_pages(void **state)
{
	static const unsigned char uuid[16] = "crash-shared-001";
	static unsigned char p[PAGE], want[PAGE];
	const char *args[] = {"--local-mb", "512", "--crash-dir", crash_dir, NULL};
	struct harness h;
	ramster *r, *ops;
	int priv, shared, eph;
	unsigned i, bad = 0, eio = 0, flushed = 0;
	double t0;

	(void)state;
	if (!crash_dir[0])
		skip(); /* no tmpfs at /dev/shm */
	assert_int_equal(harness_start(&h, args), 0);
	r = harness_connect(&h);
	assert_non_null(r);
	priv = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	shared = ramster_pool_new(r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid);
	eph = ramster_pool_new(r, 0, NULL);
	assert_true(priv >= 0 && shared >= 0 && eph >= 0);
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);

		page_of(i, 0, p);
		assert_int_equal(ramster_put(r, pool_of(i, priv, shared), &oid, i % PER_OBJ, p), 0);
		if (i % 100 == 0)
			assert_int_equal(ramster_put(r, eph, &oid, i % PER_OBJ, p), 0);
	}
	/* every 13th page flushed again: it must stay gone */
	for (i = 0; i < PAGES; i += 13) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);

		assert_int_equal(ramster_flush(r, pool_of(i, priv, shared), &oid, i % PER_OBJ),
				 0);
		flushed++;
	}

	t0 = harness_now();
	assert_int_equal(harness_crash_restart(&h, args), 0);
	ops = wait_back(&h, 20000 * SLOW);
	assert_non_null(ops);
	fprintf(stderr,
		"  node back after the kill in %.0f ms: %llu pools, %llu pages taken back in %llu "
		"us; %llu refused, %llu pools incomplete\n",
		(harness_now() - t0) * 1000.0, (unsigned long long)stat_of(ops, "crash_pools"),
		(unsigned long long)stat_of(ops, "crash_pages"),
		(unsigned long long)stat_of(ops, "crash_load_us"),
		(unsigned long long)stat_of(ops, "crash_pages_refused"),
		(unsigned long long)stat_of(ops, "crash_pools_incomplete"));
	assert_int_equal(stat_of(ops, "crash_found"), 1);
	assert_int_equal(stat_of(ops, "crash_pages"), PAGES - flushed);
	assert_int_equal(stat_of(ops, "crash_pages_refused"), 0);
	assert_int_equal(stat_of(ops, "crash_pools_incomplete"), 0);
	assert_int_equal(stat_of(ops, "crash_pools"), 3);

	/* the client rides through: the same pool ids, every page back */
	for (i = 0; i < PAGES; i++) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);
		int rc = ramster_get(r, pool_of(i, priv, shared), &oid, i % PER_OBJ, p);

		if (i % 13 == 0) {
			bad += rc != -ENOENT;
			continue;
		}
		page_of(i, 0, want);
		eio += rc == -EIO;
		if (rc || memcmp(p, want, PAGE)) {
			if (bad < 3)
				fprintf(stderr, "  page %u: rc %d%s\n", i, rc,
					rc ? "" : ", bytes differ");
			bad++;
		}
	}
	fprintf(stderr, "  after the crash: %u of %d pages wrong, %u -EIO; reconnects %llu\n", bad,
		PAGES, eio, (unsigned long long)ramster_reconnects(r));
	assert_int_equal(bad, 0);
	assert_int_equal(eio, 0);
	assert_int_equal(ramster_reconnects(r), 1);
	/* the ephemeral pool is back, empty (an ephemeral get may miss) */
	{
		struct ramster_oid oid = harness_oid(25, 0);

		assert_int_equal(ramster_get(r, eph, &oid, 0, p), -ENOENT);
		page_of(1, 1, want);
		assert_int_equal(ramster_put(r, eph, &oid, 0, want), 0);
	}
	/* a second crash: what the first load wrote down is kept again */
	assert_int_equal(harness_crash_restart(&h, args), 0);
	ramster_close(ops);
	ops = wait_back(&h, 20000 * SLOW);
	assert_non_null(ops);
	assert_int_equal(stat_of(ops, "crash_pages"), PAGES - flushed);
	for (i = 1; i < PAGES; i += 97) {
		struct ramster_oid oid = harness_oid(25, i / PER_OBJ);

		if (i % 13 == 0)
			continue;
		assert_int_equal(ramster_get(r, pool_of(i, priv, shared), &oid, i % PER_OBJ, p), 0);
		page_of(i, 0, want);
		assert_memory_equal(p, want, PAGE);
	}
	/* a third crash, and the node comes back with a tier too small for its pages:
	 * those that find no room are lost, and their pools say so (-EIO, never wrong) */
	{
		const char *small[] = {"--local-mb", "48", "--crash-dir", crash_dir, NULL};
		unsigned ok = 0;

		assert_int_equal(harness_crash_restart(&h, small), 0);
		ramster_close(ops);
		ops = wait_back(&h, 20000 * SLOW);
		assert_non_null(ops);
		assert_true(stat_of(ops, "crash_pages_refused") > 0);
		assert_true(stat_of(ops, "crash_pools_incomplete") >= 1);
		bad = eio = 0;
		for (i = 0; i < PAGES; i++) {
			struct ramster_oid oid = harness_oid(25, i / PER_OBJ);
			int rc = ramster_get(r, pool_of(i, priv, shared), &oid, i % PER_OBJ, p);

			page_of(i, 0, want);
			if (rc == 0 && !memcmp(p, want, PAGE) && i % 13)
				ok++;
			else if (rc == -EIO)
				eio++;
			else if (!(i % 13 == 0 && (rc == -ENOENT || rc == -EIO)))
				bad++;
		}
		fprintf(stderr, "  in a 48 MiB tier: %u pages back, %u -EIO, %u wrong\n", ok, eio,
			bad);
		assert_int_equal(bad, 0);
		assert_int_equal(ok, stat_of(ops, "crash_pages"));
		assert_true(eio > 0);
	}
	ramster_close(ops);
	ramster_close(r);
	/* a clean stop leaves nothing to load */
	assert_int_equal(harness_stop(&h), 0);
	assert_int_equal(harness_start(&h, args), 0);
	ops = harness_connect(&h);
	assert_non_null(ops);
	assert_int_equal(stat_of(ops, "crash_found"), 0);
	ramster_close(ops);
	assert_int_equal(harness_stop(&h), 0);
}

/* ---- the kill lands mid-put ------------------------------------------------------- */

#define LIVE_REFS 4096

struct writer {
	ramster *r;
	int pool;
	atomic_bool stop;
	atomic_uint_fast64_t done; /* puts answered */
	uint32_t ver[LIVE_REFS];   /* the version last answered (0: none; UINT32_MAX: failed) */
	unsigned errors;	   /* the writer's alone until it is joined */
};

static void *writer_main(void *arg)
{
	static unsigned char p[PAGE];
	struct writer *w = arg;
	uint32_t v = 0, ref;

	while (!atomic_load(&w->stop)) {
		struct ramster_oid oid;
		int rc;

		v++;
		ref = (v * 2654435761u) % LIVE_REFS;
		oid = harness_oid(26, ref / 64);
		harness_page_text(p, ref * 100003u + v);
		rc = ramster_put(w->r, w->pool, &oid, ref % 64, p);
		if (rc == 0) {
			w->ver[ref] = v;
			atomic_fetch_add(&w->done, 1);
		} else {
			/* the node went away mid-put: the page is the old, the new or none */
			w->errors++;
			w->ver[ref] = UINT32_MAX;
		}
	}
	return NULL;
}

static void test_crash_mid_put(void **state)
{
	static const unsigned char uuid[16] = "crash-shared-002";
	static unsigned char p[PAGE], want[PAGE];
	const char *args[] = {"--local-mb", "256", "--crash-dir", crash_dir, NULL};
	static struct writer w;
	struct harness h;
	pthread_t th;
	ramster *ops;
	uint32_t ref;
	unsigned bad = 0, either = 0, checked = 0;
	uint64_t target;

	(void)state;
	if (!crash_dir[0])
		skip();
	memset(&w, 0, sizeof(w));
	assert_int_equal(harness_start(&h, args), 0);
	w.r = harness_connect(&h);
	assert_non_null(w.r);
	w.pool = ramster_pool_new(w.r, RAMSTER_PERSISTENT | RAMSTER_SHARED, uuid);
	assert_true(w.pool >= 0);
	assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
	target = 20000;
	while (atomic_load(&w.done) < target)
		usleep(1000);
	/* the kill: wherever the node is in the put under way */
	assert_int_equal(harness_crash_restart(&h, args), 0);
	ops = wait_back(&h, 20000 * SLOW);
	assert_non_null(ops);
	/* the writer goes on through the restart (a delay, not an error), then stops */
	target = atomic_load(&w.done) + 2000;
	while (atomic_load(&w.done) < target)
		usleep(1000);
	atomic_store(&w.stop, true);
	pthread_join(th, NULL);
	fprintf(stderr, "  %llu puts answered, %u failed across the kill\n",
		(unsigned long long)atomic_load(&w.done), w.errors);
	assert_int_equal(stat_of(ops, "crash_found"), 1);
	for (ref = 0; ref < LIVE_REFS; ref++) {
		struct ramster_oid oid = harness_oid(26, ref / 64);
		int rc = ramster_get(w.r, w.pool, &oid, ref % 64, p);

		if (w.ver[ref] == UINT32_MAX) {
			either++; /* a put that failed: any outcome but a wrong page */
			continue;
		}
		if (!w.ver[ref]) {
			bad += rc == 0;
			continue;
		}
		harness_page_text(want, ref * 100003u + w.ver[ref]);
		checked++;
		if (rc || memcmp(p, want, PAGE)) {
			if (bad < 3)
				fprintf(stderr, "  ref %u (v %u): rc %d\n", ref, w.ver[ref], rc);
			bad++;
		}
	}
	fprintf(stderr, "  %u pages checked, %u wrong, %u left by failed puts\n", checked, bad,
		either);
	assert_int_equal(bad, 0);
	ramster_close(ops);
	ramster_close(w.r);
	assert_int_equal(harness_stop(&h), 0);
}

/* ---- in a collective: pages on peers are the crash's loss, and say so ------------------ */

#define COLL_PAGES 6000

static void test_crash_in_collective(void **state)
{
	static unsigned char p[PAGE];
	char dir[80];
	struct coll *t;
	struct coll_read got;
	ramster *r, *ops;
	uint64_t remote = 0, held = 0;
	unsigned i;
	int pool;

	(void)state;
	if (!crash_dir[0])
		skip();
	snprintf(dir, sizeof(dir), "%s-coll", crash_dir);
	t = coll_create("crash", "6d1f3a5c7e9b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f1a3c5e7b9d0f\n");
	assert_non_null(t);
	snprintf(t->cluster, sizeof(t->cluster), "crash");
	snprintf(t->extra, sizeof(t->extra),
		 "heartbeat_ms = 100\ndead_after_ms = %d\nrequest_timeout_ms = %d\n", 1000 * SLOW,
		 5000 * SLOW);
	coll_set_node(t, 0, "alpha", 4, 0);
	coll_set_node(t, 1, "beta", 16, 64);
	t->node[0].args[0] = "--crash-dir";
	t->node[0].args[1] = dir;
	assert_int_equal(coll_write_confs(t), 0);
	assert_int_equal(coll_start(t, 1), 0);
	assert_int_equal(coll_start(t, 0), 0);
	assert_int_equal(coll_wait_up(t, 0, 1, 10000 * SLOW), 0);
	r = harness_connect(&t->h[0]);
	assert_non_null(r);
	pool = ramster_pool_new(r, RAMSTER_PERSISTENT, NULL);
	assert_true(pool >= 0);
	for (i = 0; i < COLL_PAGES; i++) {
		struct ramster_oid oid = harness_oid(27, i / PER_OBJ);
		int rc, tries = 0;

		coll_page_text(p, i, 1);
		while ((rc = ramster_put(r, pool, &oid, i % PER_OBJ, p)) == -ENOSPC && ++tries < 1500)
			usleep(20000);
		assert_int_equal(rc, 0);
	}
	assert_int_equal(coll_wait_stat(t, 0, "tier_remote_pages", 500, UINT64_MAX, 10000 * SLOW),
			 0);
	assert_int_equal(coll_stat(t, 0, "tier_remote_pages", &remote), 0);
	assert_int_equal(coll_stat(t, 1, "foreign_pages", &held), 0);
	assert_true(held > 0);
	/* alpha dies; its pages on beta belong to an incarnation that is gone */
	assert_int_equal(harness_crash_restart(&t->h[0], t->argv[0]), 0);
	ops = wait_back(&t->h[0], 20000 * SLOW);
	assert_non_null(ops);
	assert_int_equal(stat_of(ops, "crash_found"), 1);
	assert_int_equal(stat_of(ops, "crash_pools_incomplete"), 1);
	assert_int_equal(coll_wait_up(t, 0, 1, 10000 * SLOW), 0);
	coll_read_back(r, pool, 27, PER_OBJ, COLL_PAGES, coll_page_text, 1, &got);
	fprintf(stderr,
		"  %llu remote at the kill; after it: %llu pages back, %llu -EIO (lost with the "
		"incarnation), %llu wrong, %llu other\n",
		(unsigned long long)remote, (unsigned long long)got.ok, (unsigned long long)got.eio,
		(unsigned long long)got.wrong, (unsigned long long)got.other);
	/* never a wrong page, never "no such page" for a page that was put */
	assert_int_equal(got.wrong, 0);
	assert_int_equal(got.other, 0);
	assert_true(got.eio > 0);
	assert_int_equal(got.ok, stat_of(ops, "crash_pages"));
	/*
	 * Beta lets the old incarnation's pages go: every page it held at the
	 * kill is dropped (a put still in flight then adds to the drops). Its
	 * foreign_pages need not fall to 0: the new incarnation's tier, refilled
	 * by the crash load and the reads, may remotify pages to beta again.
	 */
	assert_int_equal(coll_wait_stat(t, 1, "remote_owner_drops", held, UINT64_MAX,
					10000 * SLOW),
			 0);
	fprintf(stderr, "  beta held %llu at the kill, dropped %llu; holds %llu (alpha: %llu remote)\n",
		(unsigned long long)held,
		(unsigned long long)stat_of_coll(t, 1, "remote_owner_drops"),
		(unsigned long long)stat_of_coll(t, 1, "foreign_pages"),
		(unsigned long long)stat_of_coll(t, 0, "tier_remote_pages"));
	ramster_close(ops);
	ramster_close(r);
	assert_int_equal(coll_destroy(t), 0);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- a crash directory is the node's alone ---------------------------------------- */

static void test_crash_dir_refused(void **state)
{
	char open_dir[80];
	const char *args[] = {"--crash-dir", open_dir, NULL};
	const char *args2[] = {"--crash-dir", crash_dir, NULL};
	const char *args3[] = {"--crash-dir", "/var/tmp/ramster-crash-disk", NULL};
	struct harness h, h2;

	(void)state;
	if (!crash_dir[0])
		skip();
	snprintf(open_dir, sizeof(open_dir), "%s-open", crash_dir);
	assert_int_equal(mkdir(open_dir, 0755), 0);
	assert_int_equal(chmod(open_dir, 0755), 0);
	/* group and others may enter it: refused, the daemon does not start */
	assert_int_equal(harness_start(&h, args), -ECHILD);
	assert_int_equal(WEXITSTATUS(h.exit_status), 2);
	rmdir(open_dir);
	/* on a disk, the tier would be written to it: refused */
	if (!on_tmpfs("/var/tmp")) {
		assert_int_equal(harness_start(&h, args3), -ECHILD);
		assert_int_equal(WEXITSTATUS(h.exit_status), 2);
		rmdir("/var/tmp/ramster-crash-disk");
	}
	/* one daemon a directory */
	assert_int_equal(harness_start(&h, args2), 0);
	assert_int_equal(harness_start(&h2, args2), -ECHILD);
	assert_int_equal(harness_stop(&h), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(crash_dir, sizeof(crash_dir), "/dev/shm/ramster-crash.XXXXXX");
	if (!on_tmpfs("/dev/shm") || !mkdtemp(crash_dir))
		crash_dir[0] = 0; /* every case skips */
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (!crash_dir[0])
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", crash_dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const char *slow = getenv("RAMSTER_TEST_SLOW");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_crash_keeps_pages),
	    cmocka_unit_test(test_crash_mid_put),
	    cmocka_unit_test(test_crash_in_collective),
	    cmocka_unit_test(test_crash_dir_refused),
	};

	if (slow && atoi(slow) > 0)
		SLOW = atoi(slow);
	return cmocka_run_group_tests_name("crash", tests, setup, teardown);
}
