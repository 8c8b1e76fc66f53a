/*
 * test_far_shim.c - ramster-run's preload shim (tools/ramster-preload.c) under
 * what real programs do to their memory: big malloc/realloc/free, mmap with a
 * partial munmap, mremap both ways, madvise(DONTNEED), mprotect(PROT_NONE)
 * of pages that get evicted, fork, threads.
 *
 * The test runs itself twice: the outer process starts a real ramsterd
 * (harness.c) and runs this same binary under `ramster-run --resident 32M`;
 * the inner one (RAMSTER_FAR_INNER set) runs the cases with the shim loaded
 * and checks every byte and its own RSS; the outer one then checks the
 * counters the shim wrote at exit and the node's. Needs userfaultfd: without
 * it the inner run says SKIP.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ramster.h"
#include "tests/integration/harness.h"

/* A sanitizer build's shim cannot be preloaded into a program (ASan's or TSan's
 * runtime must come first). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

#define MIB (1ul << 20)
#define PAGE 4096ul

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

/*
 * The word at offset k of a span filled with tag: its page's number and the
 * tag, the page's first word its offset (compressible, as the node wants
 * persistent pages to be: it refuses pages that do not compress).
 */
static uint64_t word(size_t k, uint64_t tag)
{
	return (k % PAGE ? (k / PAGE) * 0x9e3779b97f4a7c15ull : k) ^ tag;
}

static void fill(uint8_t *p, size_t len, uint64_t tag)
{
	size_t k;

	for (k = 0; k < len; k += 8)
		*(uint64_t *)(p + k) = word(k, tag);
}

/* Check len bytes at p, which hold offsets [off, off+len) of a span filled with tag. */
static size_t check_at(const uint8_t *p, size_t off, size_t len, uint64_t tag)
{
	size_t k, bad = 0;

	for (k = 0; k < len; k += 8)
		bad += *(const uint64_t *)(p + k) != word(off + k, tag);
	return bad;
}

static size_t check(const uint8_t *p, size_t len, uint64_t tag)
{
	return check_at(p, 0, len, tag);
}

static size_t check_zero(const uint8_t *p, size_t len)
{
	size_t k, bad = 0;

	for (k = 0; k < len; k += 8)
		bad += *(const uint64_t *)(p + k) != 0;
	return bad;
}

/* ---- inside ramster-run ----------------------------------------------------- */

static void test_malloc_realloc(void **state)
{
	size_t n = 160 * MIB;
	uint8_t *p = malloc(n), *q;

	assert_non_null(p);
	assert_true(malloc_usable_size(p) >= n);
	fill(p, n, 1);
	assert_int_equal(check(p, n, 1), 0);
	q = realloc(p, 200 * MIB);
	assert_non_null(q);
	assert_int_equal(check(q, n, 1), 0);
	fill(q + n, 40 * MIB, 2);
	assert_int_equal(check(q + n, 40 * MIB, 2), 0);
	assert_int_equal(check(q, n, 1), 0);
	assert_true(rss_kib() < 64 * 1024);
	free(q);
	p = calloc(1, 96 * MIB); /* a fresh region reads zeros */
	assert_non_null(p);
	assert_int_equal(check_zero(p, 96 * MIB), 0);
	free(p);
	/* a small block stays glibc's and works as ever */
	p = malloc(100);
	memset(p, 7, 100);
	p = realloc(p, 2 * MIB); /* ... and moves to a region when it grows big */
	assert_non_null(p);
	assert_int_equal(p[99], 7);
	free(p);
}

static void test_munmap_mremap_madvise(void **state)
{
	size_t n = 128 * MIB;
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *q;

	assert_true(p != MAP_FAILED);
	fill(p, n, 3);
	/* a hole in the middle: both sides keep their bytes */
	assert_int_equal(munmap(p + 32 * MIB, 16 * MIB), 0);
	assert_int_equal(check(p, 32 * MIB, 3), 0);
	assert_int_equal(check_at(p + 48 * MIB, 48 * MIB, 80 * MIB, 3), 0);
	/* shrink the tail part, then grow it (in place or moved) */
	q = mremap(p + 48 * MIB, 80 * MIB, 40 * MIB, 0);
	assert_true(q == p + 48 * MIB);
	q = mremap(q, 40 * MIB, 90 * MIB, MREMAP_MAYMOVE);
	assert_true(q != MAP_FAILED);
	assert_int_equal(check_at(q, 48 * MIB, 40 * MIB, 3), 0);
	assert_int_equal(check_zero(q + 40 * MIB, 50 * MIB), 0);
	/* DONTNEED: zeros there, the rest intact */
	assert_int_equal(madvise(p + 8 * MIB, 8 * MIB, MADV_DONTNEED), 0);
	assert_int_equal(check_zero(p + 8 * MIB, 8 * MIB), 0);
	assert_int_equal(check(p, 8 * MIB, 3), 0);
	assert_int_equal(check_at(p + 16 * MIB, 16 * MIB, 16 * MIB, 3), 0);
	assert_true(rss_kib() < 64 * 1024);
	assert_int_equal(munmap(p, 32 * MIB), 0);
	assert_int_equal(munmap(q, 90 * MIB), 0);
}

/* Pages made unreadable are still evicted (through /proc/self/mem) and come back whole. */
static void test_mprotect(void **state)
{
	size_t n = 96 * MIB;
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	assert_true(p != MAP_FAILED);
	fill(p, 16 * MIB, 4);
	assert_int_equal(mprotect(p, 16 * MIB, PROT_NONE), 0);
	fill(p + 16 * MIB, 80 * MIB, 5); /* pushes the protected pages out */
	assert_true(rss_kib() < 64 * 1024);
	assert_int_equal(mprotect(p, 16 * MIB, PROT_READ), 0);
	assert_int_equal(check(p, 16 * MIB, 4), 0);
	assert_int_equal(check_at(p + 16 * MIB, 0, 80 * MIB, 5), 0);
	assert_int_equal(munmap(p, n), 0);
}

static void test_fork(void **state)
{
	size_t n = 96 * MIB;
	uint8_t *p = malloc(n);
	int status;
	pid_t pid;

	assert_non_null(p);
	fill(p, n, 6);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		size_t bad = check(p, n, 6);

		fill(p, MIB, 7); /* its own copy */
		_exit(bad ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(check(p, n, 6), 0);
	free(p);
}

struct slice {
	uint8_t *p;
	size_t len;
	uint64_t tag;
	size_t bad;
};

static void *thread_work(void *arg)
{
	struct slice *s = arg;
	int round;

	for (round = 0; round < 2; round++) {
		fill(s->p, s->len, s->tag + (uint64_t)round);
		s->bad += check(s->p, s->len, s->tag + (uint64_t)round);
	}
	return NULL;
}

static void test_threads(void **state)
{
	enum { T = 4 };
	size_t n = 128 * MIB, k;
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct slice sl[T];
	pthread_t th[T];

	assert_true(p != MAP_FAILED);
	for (k = 0; k < T; k++) {
		sl[k] = (struct slice){.p = p + k * (n / T), .len = n / T, .tag = 100 + 10 * k};
		assert_int_equal(pthread_create(&th[k], NULL, thread_work, &sl[k]), 0);
	}
	for (k = 0; k < T; k++) {
		pthread_join(th[k], NULL);
		assert_int_equal(sl[k].bad, 0);
	}
	assert_int_equal(munmap(p, n), 0);
}

static int inner(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malloc_realloc),
		cmocka_unit_test(test_munmap_mremap_madvise),
		cmocka_unit_test(test_mprotect),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* ---- outside: the daemon, ramster-run, the counters ------------------------- */

/* @return the value of name in the stats line of the shim (the first), or -1. */
static long long stat_of(const char *line, const char *name)
{
	const char *p = strstr(line, name);
	size_t l = strlen(name);

	while (p && (p[l] != ' ' || (p != line && p[-1] != ' ')))
		p = strstr(p + 1, name);
	return p ? atoll(p + l + 1) : -1;
}

int main(int argc, char **argv)
{
	static const char *const args[] = {"--local-mb", "512", NULL};
	const char *bin = getenv("RAMSTER_BIN") ? getenv("RAMSTER_BIN") : "build/bin";
	char run[512], stats[256], line[1536] = "", self[512];
	ssize_t sl;
	struct harness h;
	uint64_t node_puts = 0;
	ramster *r;
	int status;
	pid_t pid;
	FILE *f;

	if (getenv("RAMSTER_FAR_INNER"))
		return inner();
	if (ASAN) {
		printf("[  SKIPPED ] test_far_shim: SKIP: a sanitizer build's shim cannot be preloaded\n"
		       "[  PASSED  ] 0 test(s).\n");
		return 0;
	}
	if (access("/dev/userfaultfd", R_OK | W_OK) && geteuid() != 0) {
		printf("[  SKIPPED ] test_far_shim: SKIP: no access to /dev/userfaultfd\n"
		       "[  PASSED  ] 0 test(s).\n");
		return 0;
	}
	if (harness_start(&h, args) < 0) {
		printf("[  FAILED  ] 1 test(s): ramsterd did not start\n");
		return 1;
	}
	snprintf(run, sizeof(run), "%s/ramster-run", bin);
	sl = readlink("/proc/self/exe", self, sizeof(self) - 1); /* ramster-run's own, once it runs */
	self[sl > 0 ? sl : 0] = 0;
	snprintf(stats, sizeof(stats), "%s/far-stats", h.dir);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setenv("RAMSTER_FAR_INNER", "1", 1);
		execl(run, run, "--socket", h.sock, "--resident", "32M", "--stats", stats, "--",
		      self, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
		printf("[  FAILED  ] 1 test(s): the run under ramster-run failed (status %#x)\n", status);
		harness_stop(&h);
		return 1;
	}
	/* the program's own counters, written by the shim at exit */
	f = fopen(stats, "r");
	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	r = harness_connect(&h);
	if (r)
		(void)harness_stat(r, "tmem_puts", &node_puts);
	ramster_close(r);
	printf("[ RUN      ] counters\nshim: %snode: tmem_puts %llu\n", line,
	       (unsigned long long)node_puts);
	/* pages left memory (put, or kept in the write-back cache) and came back (from either) */
	if (stat_of(line, "puts") + stat_of(line, "zcache_absorbed") <= 0 ||
	    stat_of(line, "gets") + stat_of(line, "zcache_hits") <= 0 || stat_of(line, "get_failed") != 0 ||
	    stat_of(line, "resident_pages") > stat_of(line, "budget_pages") ||
	    node_puts < (uint64_t)stat_of(line, "puts")) {
		printf("[  FAILED  ] 1 test(s): counters\n");
		harness_stop(&h);
		return 1;
	}
	printf("[       OK ] counters\n[  PASSED  ] 1 test(s).\n");
	return harness_stop(&h) ? 1 : 0;
}
