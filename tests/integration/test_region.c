/*
 * test_region.c - far memory regions (lib/region*.c) against a real ramsterd:
 * a 1 GiB region with a 32 MiB resident budget read and written sequentially
 * and at random, every page checked; untouched pages read zeros and take no
 * memory; the process's RSS stays near the budget; the node holds the pages;
 * fork gives the child a whole copy; a page the node lost is SIGBUS, never a
 * wrong page.
 *
 * Needs userfaultfd with write-protect: without it every case says SKIP.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramster.h"
#include "tests/integration/harness.h"

/* Under ASan the shadow memory of what the test touches is RSS too: the RSS bound is not checked.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ASAN 1 /* a sanitizer's shadow memory counts in RSS */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

#define PAGE	 RAMSTER_PAGE_SIZE
#define REGION	 (1ull << 30)
#define RESIDENT (32ull << 20)
#define NPAGES	 (REGION / PAGE)

struct fix {
	struct harness h;
	ramster *r;
	uint8_t *m;
	uint8_t *ver; /* the version each page holds (0: never written) */
};

/* A page's bytes: its index and version, then one 64-bit value repeated (compressible). */
static uint64_t fill_word(uint64_t idx, uint8_t ver)
{
	uint64_t x = idx * 0x9e3779b97f4a7c15ull ^ ((uint64_t)ver << 56);

	return x ^ (x >> 29);
}

static void page_write(uint8_t *m, uint64_t idx, uint8_t ver)
{
	uint64_t *w = (uint64_t *)(m + idx * PAGE), v = fill_word(idx, ver);
	size_t k;

	w[0] = idx;
	w[1] = ver;
	for (k = 2; k < PAGE / 8; k++)
		w[k] = v;
}

/* @return 0 if page idx holds version ver (ver 0: zeros), else 1 (and says so). */
static int page_check(const uint8_t *m, uint64_t idx, uint8_t ver)
{
	const uint64_t *w = (const uint64_t *)(m + idx * PAGE);
	uint64_t v = fill_word(idx, ver);
	size_t k;

	for (k = 0; k < PAGE / 8; k++) {
		uint64_t want = !ver ? 0 : k == 0 ? idx : k == 1 ? ver : v;

		if (w[k] != want) {
			fprintf(stderr, "page %llu word %zu: %#llx, want %#llx (version %u)\n",
				(unsigned long long)idx, k, (unsigned long long)w[k],
				(unsigned long long)want, ver);
			return 1;
		}
	}
	return 0;
}

static uint64_t rss_kib(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* Whether this kernel is at least major.minor. */
static int kernel_at_least(int major, int minor)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return 0;
	return a > major || (a == major && b >= minor);
}

static uint64_t rng_state = 0x1234567;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static int setup(void **state)
{
	static const char *const args[] = {"--local-mb", "768", NULL};
	struct fix *f = calloc(1, sizeof(*f));

	if (!f || harness_start(&f->h, args) < 0)
		return -1;
	f->r = harness_connect(&f->h);
	if (f->r) /* test_lost_page_sigbus: the node comes back on another socket */
		ramster_set_reconnect_ms(f->r, 1000);
	f->ver = calloc(NPAGES, 1);
	if (!f->r || !f->ver)
		return -1;
	f->m = ramster_region_map(f->r, REGION, RESIDENT, 0);
	if (!f->m && (errno == ENOTSUP || errno == EPERM || errno == ENOSYS))
		fprintf(stderr, "SKIP: no userfaultfd with write-protect here (%s)\n",
			strerror(errno));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	if (f->m)
		assert_int_equal(ramster_region_unmap(f->r, f->m), 0);
	ramster_close(f->r);
	assert_int_equal(harness_stop(&f->h), 0);
	free(f->ver);
	free(f);
	return 0;
}

#define NEED_REGION(f)                                                                             \
	do {                                                                                       \
		if (!(f)->m) {                                                                     \
			skip();                                                                    \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static void show(const char *what, const struct ramster_region_stats *st)
{
	fprintf(
	    stderr,
	    "%s: resident %llu/%llu pages, pool %llu, faults %llu (zero %llu, wp %llu), gets %llu "
	    "(prefetched %llu), puts %llu, evicted %llu (background %llu, in a fault %llu), "
	    "zcache hits %llu (%llu pages, %llu/%llu bytes), fault p50 %llu ns p99 %llu ns, "
	    "RSS %llu KiB\n",
	    what, (unsigned long long)st->resident_pages, (unsigned long long)st->budget_pages,
	    (unsigned long long)st->pool_pages, (unsigned long long)st->faults,
	    (unsigned long long)st->faults_zero, (unsigned long long)st->faults_wp,
	    (unsigned long long)st->gets, (unsigned long long)st->prefetched,
	    (unsigned long long)st->puts, (unsigned long long)st->evicted,
	    (unsigned long long)st->evicted_bg, (unsigned long long)st->evicted_sync,
	    (unsigned long long)st->zcache_hits, (unsigned long long)st->zcache_pages,
	    (unsigned long long)st->zcache_bytes, (unsigned long long)st->zcache_cap_bytes,
	    (unsigned long long)st->fault_ns_p50, (unsigned long long)st->fault_ns_p99,
	    (unsigned long long)rss_kib());
}

/* 192 MiB written and read back in order: 6x the budget goes through the node. */
static void test_sequential(void **state)
{
	struct fix *f = *state;
	struct ramster_region_stats st;
	uint64_t i, n = (192ull << 20) / PAGE, bad = 0, node_pages = 0;

	NEED_REGION(f);
	for (i = 0; i < n; i++)
		page_write(f->m, i, 1);
	for (i = 0; i < n; i++)
		bad += page_check(f->m, i, 1) != 0;
	assert_int_equal(bad, 0);
	/* and once more, rewritten: the new version must win over the pool's old copy */
	for (i = 0; i < n; i += 2)
		page_write(f->m, i, 2);
	for (i = 0; i < n; i++)
		bad += page_check(f->m, i, i % 2 ? 1 : 2) != 0;
	assert_int_equal(bad, 0);
	assert_int_equal(ramster_region_stats(f->r, f->m, &st), 0);
	show("sequential", &st);
	assert_true(st.resident_pages <= st.budget_pages);
	/* evicted dirty: put, or kept in the compressed cache (write-back) */
	assert_true(st.puts + st.zcache_absorbed >= n - st.budget_pages);
	/* brought back from the pool or from the compressed cache */
	assert_true(st.gets + st.zcache_hits > 0 && st.prefetched > 0);
	assert_int_equal(st.get_failed, 0);
	assert_true(ASAN || rss_kib() < (RESIDENT >> 10) + 32 * 1024);
	/* the node holds them, or the cache does */
	assert_true(st.pool_pages + st.zcache_pages >= n - st.budget_pages);
	assert_int_equal(harness_stat(f->r, "tmem_pages", &node_pages), 0);
	fprintf(stderr, "node: tmem_pages %llu\n", (unsigned long long)node_pages);
	assert_true(node_pages >= st.pool_pages);
}

/* Random pages over the whole GiB, written and read in another random order. */
static void test_random(void **state)
{
	struct fix *f = *state;
	struct ramster_region_stats st;
	uint64_t i, idx, bad = 0, untouched = 0;
	const uint64_t writes = 40000, reads = 40000;

	NEED_REGION(f);
	for (i = 0; i < writes; i++) {
		idx = rng() % NPAGES;
		f->ver[idx] = (uint8_t)(f->ver[idx] % 250 + 1);
		page_write(f->m, idx, f->ver[idx]);
	}
	for (i = 0; i < reads; i++) {
		idx = rng() % NPAGES;
		untouched += !f->ver[idx];
		bad += page_check(f->m, idx, f->ver[idx]) != 0;
	}
	assert_int_equal(bad, 0);
	/* every page, in order: the whole GiB as the program left it */
	for (idx = 0; idx < NPAGES; idx++)
		bad += page_check(f->m, idx, f->ver[idx]) != 0;
	assert_int_equal(bad, 0);
	assert_int_equal(ramster_region_stats(f->r, f->m, &st), 0);
	show("random", &st);
	assert_true(untouched > 0);
	assert_true(st.faults_zero > 0); /* untouched pages were mapped as zeros */
	/* victims dropped a batch per process_madvise where the kernel takes it (6.13+) */
	fprintf(stderr, "random: evicted %llu, %llu of them in batches\n",
		(unsigned long long)st.evicted, (unsigned long long)st.evicted_batched);
	assert_true(!kernel_at_least(6, 13) || st.evicted_batched > st.evicted / 2);
	assert_true(st.resident_pages <= st.budget_pages);
	assert_true(ASAN || rss_kib() < (RESIDENT >> 10) + 32 * 1024);
}

/*
 * The compressed cache is write-back: a dirty page evicted into it is not put;
 * it is put only when younger entries push it out of the cache (1 MiB here,
 * far less than the 96 MiB that go through it). Every version reads back
 * right, the newest winning over the pool's older copy.
 */
static void test_writeback(void **state)
{
	struct fix *f = *state;
	struct ramster_region_stats st;
	uint64_t i, n = (128ull << 20) / PAGE, bad = 0, node_pages = 0;
	uint8_t *m;

	NEED_REGION(f);
	assert_int_equal(setenv("RAMSTER_FAR_ZCACHE_MB", "1", 1), 0);
	m = ramster_region_map(f->r, n * PAGE, RESIDENT, 0);
	unsetenv("RAMSTER_FAR_ZCACHE_MB");
	assert_non_null(m);
	for (i = 0; i < n; i++)
		page_write(m, i, 1);
	for (i = 0; i < n; i++)
		bad += page_check(m, i, 1) != 0;
	assert_int_equal(bad, 0);
	for (i = 0; i < n; i += 3) /* newer versions of pages the pool holds */
		page_write(m, i, 2);
	for (i = 0; i < n; i++)
		bad += page_check(m, i, i % 3 ? 1 : 2) != 0;
	assert_int_equal(bad, 0);
	assert_int_equal(ramster_region_stats(f->r, m, &st), 0);
	show("write-back", &st);
	fprintf(stderr, "write-back: absorbed %llu, written back %llu (%llu by a fault)\n",
		(unsigned long long)st.zcache_absorbed, (unsigned long long)st.zcache_written_back,
		(unsigned long long)st.zcache_wb_sync);
	assert_int_equal(st.get_failed, 0);
	/* every dirty eviction went into the cache: a put only when it left the cache */
	assert_true(st.zcache_absorbed >= n - st.budget_pages);
	assert_true(st.zcache_written_back > 0);
	assert_int_equal(st.puts, st.zcache_written_back);
	assert_true(st.zcache_written_back < st.zcache_absorbed);
	/* near its bound: the write-back queue on top of it is short */
	assert_true(st.zcache_bytes <= 2 * st.zcache_cap_bytes);
	assert_true(st.pool_pages + st.zcache_pages >= n - st.budget_pages);
	assert_int_equal(harness_stat(f->r, "tmem_pages", &node_pages), 0);
	assert_true(node_pages >= st.pool_pages);
	assert_int_equal(ramster_region_unmap(f->r, m), 0);
}

/* fork: the child sees every page (those in the pool included), the parent carries on. */
static void test_fork(void **state)
{
	struct fix *f = *state;
	uint64_t i, n = (96ull << 20) / PAGE, bad = 0;
	int status;
	pid_t pid;

	NEED_REGION(f);
	for (i = 0; i < n; i++)
		page_write(f->m, i, 3);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (i = 0; i < n; i++)
			bad += page_check(f->m, i, 3) != 0;
		for (i = n; i < n + 100; i++)
			bad += page_check(f->m, i, 0) != 0;
		for (i = 0; i < n; i += 7) /* the child's writes are its own */
			page_write(f->m, i, 9);
		_exit(bad ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	for (i = 0; i < n; i++)
		bad += page_check(f->m, i, 3) != 0;
	assert_int_equal(bad, 0);
}

/*
 * Dirty tracking under fire: threads write versioned pages of a small region with the
 * smallest budget, so that the evictor picks pages while they are being written; each
 * thread checks the pages it owns as it goes, and every page is checked at the end. A
 * write between a victim's check (still write-protected after its put: clean) and its drop
 * would come back as an older version. (With UFFD_FEATURE_WP_ASYNC that window is real:
 * docs/far-memory.md, "Dirty tracking without a fault per first write".)
 */
#define HAMMER_PAGES   2048u
#define HAMMER_THREADS 4u

struct hammer {
	uint8_t *m;
	uint8_t *ver; /* each thread writes only its own pages' entries (idx % HAMMER_THREADS) */
	unsigned t;
	uint64_t bad;
	uint64_t seed;
};

static void *hammer_run(void *arg)
{
	struct hammer *h = arg;
	uint64_t x = h->seed, i, idx;

	for (i = 0; i < 60000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* half the time the pages near the budget's worth, where CLOCK's hand is */
		idx = x % (i & 1 ? HAMMER_PAGES : 384u);
		idx -= idx % HAMMER_THREADS;
		idx += h->t;
		if (idx >= HAMMER_PAGES)
			continue;
		if (x & 0x300) {
			h->ver[idx] = (uint8_t)(h->ver[idx] % 250 + 1);
			page_write(h->m, idx, h->ver[idx]);
		} else {
			h->bad += page_check(h->m, idx, h->ver[idx]) != 0;
		}
	}
	return NULL;
}

/* cache: with the compressed cache (the default), else every victim goes to the node */
static void hammer(struct fix *f, bool cache)
{
	struct hammer h[HAMMER_THREADS];
	pthread_t th[HAMMER_THREADS];
	struct ramster_region_stats st;
	uint64_t idx, bad = 0;
	uint8_t *m, *ver;
	unsigned t;

	ver = calloc(HAMMER_PAGES, 1);
	assert_non_null(ver);
	if (!cache)
		assert_int_equal(setenv("RAMSTER_FAR_ZCACHE_MB", "0", 1), 0);
	m = ramster_region_map(f->r, (size_t)HAMMER_PAGES * PAGE, 1u << 20, 0);
	unsetenv("RAMSTER_FAR_ZCACHE_MB");
	assert_non_null(m);
	for (t = 0; t < HAMMER_THREADS; t++) {
		h[t] = (struct hammer){.m = m, .ver = ver, .t = t, .seed = 0x9e3779b9u * (t + 1)};
		assert_int_equal(pthread_create(&th[t], NULL, hammer_run, &h[t]), 0);
	}
	for (t = 0; t < HAMMER_THREADS; t++) {
		assert_int_equal(pthread_join(th[t], NULL), 0);
		bad += h[t].bad;
	}
	for (idx = 0; idx < HAMMER_PAGES; idx++)
		bad += page_check(m, idx, ver[idx]) != 0;
	assert_int_equal(ramster_region_stats(f->r, m, &st), 0);
	show(cache ? "hammer" : "hammer, no cache", &st);
	assert_int_equal(bad, 0);
	assert_true(st.evicted > HAMMER_PAGES);
	assert_true(st.faults_wp > 0);
	if (!cache)
		assert_true(st.puts > 0 && st.gets > 0);
	assert_int_equal(ramster_region_unmap(f->r, m), 0);
	free(ver);
}

static void test_hammer(void **state)
{
	struct fix *f = *state;

	NEED_REGION(f);
	hammer(f, true);
}

/* The same with every victim put to the node and fetched back from it. */
static void test_hammer_pool(void **state)
{
	struct fix *f = *state;

	NEED_REGION(f);
	hammer(f, false);
}

static void on_sigbus(int sig)
{
	_exit(42);
}

/* The node dies: a page only it held is not handed back as anything: SIGBUS. */
static void test_lost_page_sigbus(void **state)
{
	struct fix *f = *state;
	uint64_t i, n = (64ull << 20) / PAGE, t0;
	int status;
	pid_t pid;

	NEED_REGION(f);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* no compressed cache: its copy of page 0 would be handed back, rightly;
		 * no redialling either (the region's connection takes it from r):
		 * no node will come back */
		ramster *r =
		    setenv("RAMSTER_FAR_ZCACHE_MB", "0", 1) ? NULL : harness_connect(&f->h);
		uint8_t *m = NULL;
		volatile uint64_t sink;

		if (r && !ramster_set_reconnect_ms(r, 0))
			m = ramster_region_map(r, n * PAGE, RESIDENT, 0);

		if (!m)
			_exit(3);
		for (i = 0; i < n; i++)
			page_write(m, i, 5);
		kill(f->h.pid, SIGKILL); /* every copy of page 0 is gone */
		signal(SIGBUS, on_sigbus);
		sink = *(volatile uint64_t *)m;
		(void)sink;
		_exit(4); /* read something: wrong */
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 42);
	/*
	 * The daemon is gone: restart it for teardown's clean stop. It comes
	 * back on another socket: the fixture's connection and its region's
	 * (mapped with setup's 1 s reconnect budget) give up redialling the old
	 * one after a second (with the default, 30 s each: a minute of this case).
	 */
	t0 = harness_now_ms();
	(void)harness_kill(&f->h, SIGKILL);
	assert_int_equal(harness_start(&f->h, NULL), 0);
	assert_int_equal(ramster_region_unmap(f->r, f->m), 0);
	/* the region's connection took f->r's budget, not the 30 s default */
	assert_true(harness_now_ms() - t0 < 20000);
	f->m = NULL;
	ramster_close(f->r);
	f->r = harness_connect(&f->h);
	assert_non_null(f->r);
}

/* Bad arguments are refused with EINVAL; unmapping twice is -ENOENT. */
static void test_bad_args(void **state)
{
	struct fix *f = *state;

	NEED_REGION(f);
	errno = 0;
	assert_null(ramster_region_map(f->r, 0, RESIDENT, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(ramster_region_map(f->r, 1 << 20, 4096, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(ramster_region_map(f->r, 1 << 20, RESIDENT, 7));
	assert_int_equal(errno, EINVAL);
	assert_null(ramster_region_map(NULL, 1 << 20, RESIDENT, 0));
	assert_int_equal(ramster_region_unmap(f->r, f->m + PAGE), -ENOENT);
}

/*
 * Under ThreadSanitizer every fault of a region is served by an instrumented
 * thread through an instrumented node: the case runs for tens of minutes, and
 * what TSan would report (the fault thread reading the program's pages) is
 * ordered by userfaultfd, which it cannot see (tests/tsan.supp). make tsan
 * skips it; make check and make asan run it.
 */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

int main(void)
{
	if (UNDER_TSAN) {
		printf("[  SKIPPED ] %s: SKIP: far-memory regions are not run under TSan\n"
		       "[  PASSED  ] 0 test(s).\n",
		       "test_region");
		return 0;
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sequential, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_random, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_writeback, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fork, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hammer, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hammer_pool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_page_sigbus, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
