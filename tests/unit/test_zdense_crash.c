/*
 * test_zdense_crash.c - a shared tier (zdense_create_shared) read back by
 * zdense_scan(): after an orderly run (exactly the live pages, dead and free
 * slots skipped, kinds kept), and after a child storing, replacing, releasing
 * and remotifying pages is killed with SIGKILL at a random instruction: every
 * page the child had finished storing is found whole, nothing it had
 * released is, and the one operation in flight left the old page, the new
 * one, or neither; never a torn or stale page. Hostile files (a block record
 * or a slot header out of bounds) are counted, not read past.
 */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "tests/unit/crash_log.h"

#include "tmem/zdense.h"

#define NOBJ	 64
#define NIDX	 64
#define NREF	 (NOBJ * NIDX)
#define FRAMES	 4096
#define HDR_DATA 12 /* objno, index, version at the start of each page */
/* struct zd_block (zdense.c): 24 bytes, ninit at byte 22 (zdense_layout_id covers both) */
#define ZD_BLOCK_BYTES 24
#define ZD_NINIT_AT    22

static uint64_t mix(uint64_t x)
{
	return mix64(x);
}

/* The length of version v of page (o, i): a slot of any class, or a raw page. */
static unsigned page_len(uint32_t o, uint32_t i, uint32_t v)
{
	uint64_t r = mix((uint64_t)o << 40 ^ (uint64_t)i << 20 ^ v);

	if (r % 16 == 0)
		return ZDENSE_HUGE_LEN;
	return HDR_DATA + (unsigned)(r >> 8) % (ZDENSE_MAX_LEN - HDR_DATA + 1);
}

/* Random bytes that pages are cut from: a page is made by a copy, so that
 * the killed child spends its time in zdense_store, not in making pages. */
#define NOISE (64 * 1024)
static unsigned char noise[NOISE + ZDENSE_HUGE_LEN];

static void page_fill(unsigned char *p, uint32_t o, uint32_t i, uint32_t v, unsigned len)
{
	uint64_t r = mix((uint64_t)o << 40 ^ (uint64_t)i << 20 ^ v ^ 0x5eed);
	unsigned k;

	if (!noise[0])
		for (k = 0; k < sizeof(noise); k++)
			noise[k] = (unsigned char)(mix(k) | 1);
	memcpy(p, &o, 4);
	memcpy(p + 4, &i, 4);
	memcpy(p + 8, &v, 4);
	memcpy(p + HDR_DATA, noise + r % NOISE, len - HDR_DATA);
}

/* @return the version a found page holds, 0 if it is not a whole page of its back-reference. */
static uint32_t page_version(const struct zdense_found *f)
{
	static unsigned char want[ZDENSE_HUGE_LEN];
	uint32_t o, i, v;

	if (f->len < HDR_DATA)
		return 0;
	memcpy(&o, f->data, 4);
	memcpy(&i, (const unsigned char *)f->data + 4, 4);
	memcpy(&v, (const unsigned char *)f->data + 8, 4);
	if (o != f->ref.objno || i != f->ref.index || v == 0 || f->len != page_len(o, i, v))
		return 0;
	page_fill(want, o, i, v, f->len);
	return memcmp(want, f->data, f->len) ? 0 : v;
}

static int memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

/* ---- what a scan found -------------------------------------------------- */

struct found {
	uint32_t n[NREF];	/* pages found for each ref */
	uint32_t v[NREF][2];	/* their versions (the first two) */
	unsigned char pers[NREF];
	unsigned bad, out_of_range;
};

static int collect(void *arg, const struct zdense_found *f)
{
	struct found *F = arg;
	uint32_t v = page_version(f), r;

	if (f->ref.objno >= NOBJ || f->ref.index >= NIDX) {
		F->out_of_range++;
		return 0;
	}
	r = f->ref.objno * NIDX + f->ref.index;
	if (!v) {
		F->bad++;
		return 0;
	}
	if (F->n[r] < 2)
		F->v[r][F->n[r]] = v;
	F->n[r]++;
	F->pers[r] = f->pers;
	return 0;
}

static void scan_files(int mem_fd, int blk_fd, struct found *F, struct zdense_scan_stats *st)
{
	uint64_t ml, bl;
	void *mem, *blk;

	assert_int_equal(zdense_file_sizes(FRAMES, &ml, &bl), 0);
	mem = mmap(NULL, ml, PROT_READ, MAP_SHARED, mem_fd, 0);
	blk = mmap(NULL, bl, PROT_READ, MAP_SHARED, blk_fd, 0);
	assert_true(mem != MAP_FAILED && blk != MAP_FAILED);
	memset(F, 0, sizeof(*F));
	assert_int_equal(zdense_scan(mem, ml, blk, bl, collect, F, st), 0);
	munmap(mem, ml);
	munmap(blk, bl);
}

/* ---- an orderly run ------------------------------------------------------ */

static void test_scan_live_pages(void **state)
{
	static unsigned char buf[ZDENSE_HUGE_LEN];
	static uint64_t h[NREF];
	static uint32_t ver[NREF];
	int mem_fd = memfd("zd-mem"), blk_fd = memfd("zd-blk");
	struct zdense *zd = zdense_create_shared(FRAMES, mem_fd, blk_fd);
	struct zalloc_victim vic;
	struct zdense_scan_stats st;
	static struct found F;
	unsigned r, k, dead = 0;

	(void)state;
	assert_non_null(zd);
	/* the layout's name: the same for every call of this build */
	assert_true(zdense_layout_id() != 0 && zdense_layout_id() == zdense_layout_id());
	for (r = 0; r < NREF; r++) {
		uint32_t o = r / NIDX, i = r % NIDX, len = page_len(o, i, 1);

		page_fill(buf, o, i, 1, len);
		assert_int_equal(zdense_store(zd, i & 1, buf, len, (struct zbud_ref){o, i}, &h[r]), 0);
		ver[r] = 1;
	}
	/* a third released; a zombie with some of its pages released (dead) */
	for (r = 0; r < NREF; r += 3) {
		zdense_release(zd, h[r]);
		ver[r] = 0;
	}
	assert_int_equal(zdense_zombify_lru(zd, true, &vic), 0);
	for (k = 0; k < vic.n; k += 2) {
		r = vic.ref[k].objno * NIDX + vic.ref[k].index;
		zdense_release(zd, vic.handle[k]);
		ver[r] = 0;
		dead++;
	}
	scan_files(mem_fd, blk_fd, &F, &st);
	assert_int_equal(F.bad, 0);
	assert_int_equal(F.out_of_range, 0);
	assert_int_equal(st.dead, dead);
	assert_int_equal(st.bad_blocks + st.bad_slots, 0);
	for (r = 0; r < NREF; r++) {
		assert_int_equal(F.n[r], ver[r] ? 1 : 0);
		if (ver[r]) {
			assert_int_equal(F.v[r][0], 1);
			assert_int_equal(F.pers[r], r % NIDX & 1);
		}
	}
	zdense_zombie_done(zd, vic.frame);
	zdense_destroy(zd);
	/* a new shared tier on the same files starts empty */
	zd = zdense_create_shared(FRAMES, mem_fd, blk_fd);
	assert_non_null(zd);
	scan_files(mem_fd, blk_fd, &F, &st);
	assert_int_equal(st.pages + st.blocks, 0);
	zdense_destroy(zd);
	close(mem_fd);
	close(blk_fd);
}

/* Frames given back are punched out of the file, not only unmapped. */
static void test_shared_gives_back(void **state)
{
	static unsigned char buf[ZDENSE_HUGE_LEN];
	int mem_fd = memfd("zd-mem"), blk_fd = memfd("zd-blk");
	struct zdense *zd = zdense_create_shared(FRAMES, mem_fd, blk_fd);
	uint64_t h[256];
	off_t data_end;
	unsigned k;

	(void)state;
	assert_non_null(zd);
	for (k = 0; k < 256; k++) {
		page_fill(buf, 1, k, 1, ZDENSE_HUGE_LEN);
		assert_int_equal(zdense_store(zd, true, buf, ZDENSE_HUGE_LEN,
					      (struct zbud_ref){1, k}, &h[k]),
				 0);
	}
	for (k = 0; k < 256; k++)
		zdense_release(zd, h[k]);
	assert_true(zdense_trim(zd, 0, UINT64_MAX) >= 256);
	/* nothing left in the file: its first data is at its end (or none) */
	data_end = lseek(mem_fd, 0, SEEK_DATA);
	assert_true(data_end < 0 && errno == ENXIO);
	zdense_destroy(zd);
	close(mem_fd);
	close(blk_fd);
}

/* Hostile files: a block record naming a class or a count out of bounds, a slot header too long. */
static void test_scan_hostile(void **state)
{
	static unsigned char buf[ZDENSE_HUGE_LEN];
	int mem_fd = memfd("zd-mem"), blk_fd = memfd("zd-blk");
	struct zdense *zd = zdense_create_shared(FRAMES, mem_fd, blk_fd);
	struct zdense_scan_stats st;
	static struct found F;
	uint64_t h, ml, bl;
	unsigned char *mem, *blk;
	unsigned k;

	(void)state;
	assert_non_null(zd);
	for (k = 0; k < 3; k++) {
		page_fill(buf, 2, k, 1, 100);
		assert_int_equal(zdense_store(zd, true, buf, 100, (struct zbud_ref){2, k}, &h), 0);
	}
	page_fill(buf, 3, 0, 1, 300);
	assert_int_equal(zdense_store(zd, true, buf, 300, (struct zbud_ref){3, 0}, &h), 0);
	zdense_destroy(zd);
	assert_int_equal(zdense_file_sizes(FRAMES, &ml, &bl), 0);
	mem = mmap(NULL, ml, PROT_READ | PROT_WRITE, MAP_SHARED, mem_fd, 0);
	blk = mmap(NULL, bl, PROT_READ | PROT_WRITE, MAP_SHARED, blk_fd, 0);
	assert_true(mem != MAP_FAILED && blk != MAP_FAILED);
	/* a slot length past its class (block 0, slot 1 of 100-byte pages) */
	{
		struct zdense_class c;
		uint16_t bad = 4000;

		assert_int_equal(zdense_class_of(100, &c), 0);
		memcpy(mem + c.slot, &bad, 2);
	}
	/* block 1 (the 300-byte page) says it has 255 slots */
	blk[1 * ZD_BLOCK_BYTES + ZD_NINIT_AT] = 255;
	scan_files(mem_fd, blk_fd, &F, &st);
	assert_int_equal(st.pages, 2);
	assert_int_equal(st.bad_slots, 1);
	assert_int_equal(st.bad_blocks, 1);
	/* lengths that are not a zdense's */
	assert_int_equal(zdense_scan(mem, 4096, blk, bl, collect, &F, NULL), -EINVAL);
	munmap(mem, ml);
	munmap(blk, bl);
	close(mem_fd);
	close(blk_fd);
}

/* ---- a child killed at a random instruction ------------------------------ */

#define LOG_OPS (1u << 22)

static void child(int mem_fd, int blk_fd, struct crash_log *log)
{
	static unsigned char buf[ZDENSE_HUGE_LEN];
	static uint64_t h[NREF];
	static uint32_t ver[NREF];
	struct zdense *zd = zdense_create_shared(FRAMES, mem_fd, blk_fd);
	uint64_t n = 0, rng = 88172645463325252ull;
	struct zalloc_victim vic;
	unsigned k;

	if (!zd)
		_exit(3);
	for (;;) {
		uint32_t r, o, i, len;
		uint64_t nh;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		if (n + ZALLOC_VICTIM_MAX + 1 >= LOG_OPS)
			_exit(0);
		if (rng % 512 == 0 && zdense_zombify_lru(zd, true, &vic) == 0) {
			/* remotify: every other page moves away (released), then done */
			for (k = 0; k < vic.n; k += 2) {
				r = vic.ref[k].objno * NIDX + vic.ref[k].index;
				crash_log_begin(log, n, r, 0);
				zdense_release(zd, vic.handle[k]);
				ver[r] = 0;
				crash_log_end(log, n++);
			}
			zdense_zombie_done(zd, vic.frame);
			continue;
		}
		r = (uint32_t)(rng >> 20) % NREF;
		o = r / NIDX;
		i = r % NIDX;
		if (ver[r] && rng % 4 == 0) {
			crash_log_begin(log, n, r, 0);
			zdense_release(zd, h[r]);
			ver[r] = 0;
			crash_log_end(log, n++);
			continue;
		}
		/* a put: the new page stored, then the old released (as tmem_put) */
		crash_log_begin(log, n, r, (uint32_t)n + 1);
		len = page_len(o, i, (uint32_t)n + 1);
		page_fill(buf, o, i, (uint32_t)n + 1, len);
		if (zdense_store(zd, true, buf, len, (struct zbud_ref){o, i}, &nh))
			_exit(4);
		if (ver[r])
			zdense_release(zd, h[r]);
		h[r] = nh;
		ver[r] = (uint32_t)n + 1;
		crash_log_end(log, n++);
	}
}

static void crash_round(unsigned round)
{
	size_t log_len;
	struct crash_log *log = crash_log_new(LOG_OPS, &log_len);
	int mem_fd = memfd("zd-mem"), blk_fd = memfd("zd-blk"), status;
	static uint32_t ver[NREF];
	static struct found F;
	struct zdense_scan_stats st;
	uint64_t done, want = 20000 + mix(round) % 200000, k;
	uint32_t in_ref, in_v, in_old;
	pid_t pid;

	assert_non_null(log);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		child(mem_fd, blk_fd, log);
		_exit(0);
	}
	while (atomic_load_explicit(&log->done, memory_order_acquire) < want)
		if (waitpid(pid, &status, WNOHANG) == pid)
			fail_msg("the child ended early, status %d", status);
	/* a few microseconds more, so that the kill lands anywhere in an op */
	for (k = mix(round + 1) % 5000; k > 0; k--)
		__asm__ volatile("" ::: "memory");
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	done = crash_log_replay(log, ver, NREF, &in_ref, &in_v, &in_old);
	scan_files(mem_fd, blk_fd, &F, &st);
	assert_int_equal(F.bad, 0);
	assert_int_equal(F.out_of_range, 0);
	assert_int_equal(st.bad_blocks + st.bad_slots, 0);
	for (k = 0; k < NREF; k++) {
		if (k == in_ref) {
			/* the old page, the new one, both (a put between its store and
			 * the old page's release), or neither: nothing else */
			unsigned j;

			assert_true(F.n[k] <= 2);
			for (j = 0; j < F.n[k]; j++)
				assert_true((in_old && F.v[k][j] == in_old) ||
					    (in_v && F.v[k][j] == in_v));
			continue;
		}
		if (F.n[k] != (ver[k] ? 1u : 0u) || (ver[k] && F.v[k][0] != ver[k]))
			fail_msg("round %u, ref %lu: found %u (v %u), want v %u; %lu ops done", round,
				 (unsigned long)k, F.n[k], F.v[k][0], ver[k], (unsigned long)done);
	}
	munmap(log, log_len);
	close(mem_fd);
	close(blk_fd);
}

static void test_kill_anywhere(void **state)
{
	unsigned round, rounds = getenv("RAMSTER_CRASH_ROUNDS") ? atoi(getenv("RAMSTER_CRASH_ROUNDS"))
								  : 12;

	(void)state;
	for (round = 0; round < rounds; round++)
		crash_round(round);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scan_live_pages),
	    cmocka_unit_test(test_shared_gives_back),
	    cmocka_unit_test(test_scan_hostile),
	    cmocka_unit_test(test_kill_anywhere),
	};

	return cmocka_run_group_tests_name("zdense_crash", tests, NULL, NULL);
}
