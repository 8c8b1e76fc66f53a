/*
 * test_crashload.c - a tier killed at a random instruction comes back from
 * what its files hold: a child runs a real tier (zcache over a shared zdense,
 * tmem keeping its crash table) under a put / flush load on persistent and
 * ephemeral pools, and is killed with SIGKILL; crashload turns its files into
 * a snapshot that a fresh tier loads. Every put the child had answered reads
 * back byte for byte, nothing it had flushed does, the one operation in
 * flight left the old page, the new one or none; zero pages come back too
 * (a crash-kept tier gives them a one-byte slot). Then files made hostile (an
 * object entry torn, a page's bytes broken, a pool that had a page outside
 * the tier) cost only what they name, counted, and a pool that lost pages
 * answers -EIO for a page it lacks.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "tests/unit/crash_log.h"

#include "tmem/crashload.h"
#include "tmem/crashtab.h"
#include "tmem/snapshot.h"
#include "tmem/tmem.h"
#include "tmem/zcache.h"
#include "tmem/zdense.h"

#define NOID	 32
#define NIDX	 64
#define NPOOL	 3 /* P (persistent), Z (persistent, with zero pages), E (ephemeral) */
#define NREF	 (NPOOL * NOID * NIDX)
#define LOCAL_MB 64
#define OBJS_MAX 65536
#define LOG_OPS	 (1u << 21)

static uint32_t pool_id[NPOOL];

static uint64_t mix(uint64_t x)
{
	return mix64(x);
}

/* Version v of ref r: text-like (compresses to a few hundred bytes), or zeros (v % 7 == 0 in Z). */
static void page_make(unsigned char *p, uint32_t r, uint32_t v)
{
	static const char words[] = "ramster lends idle memory to its peers and loses nothing ";
	uint64_t x = mix((uint64_t)r << 32 | v);
	unsigned k;

	if (r / (NOID * NIDX) == 1 && v % 7 == 0) {
		memset(p, 0, 4096);
		return;
	}
	char head[64];
	int n = snprintf(head, sizeof(head), "ref %u version %u ", r, v);

	for (k = 0; k < 4096; k++)
		p[k] = (unsigned char)words[(k + x % 50) % (sizeof(words) - 1)];
	memcpy(p, head, (size_t)n);
	for (k = 0; k < 16; k++) /* some entropy, so that lengths differ */
		p[64 + (mix(x + k) % 4000)] = (unsigned char)(mix(x ^ k) >> 56);
}

static void ref_handle(uint32_t r, uint32_t *pool, struct tmem_oid *oid, uint32_t *index)
{
	*pool = pool_id[r / (NOID * NIDX)];
	memset(oid, 0, sizeof(*oid));
	oid->w[0] = 1000 + r / NIDX % NOID;
	oid->w[2] = 7;
	*index = r % NIDX;
}

struct files {
	int mem, blk, tab;
	uint64_t mem_len, blk_len;
	size_t tab_len;
};

static void files_make(struct files *f)
{
	struct tmem_crashtab *ct;

	f->mem = memfd_create("mem", MFD_CLOEXEC);
	f->blk = memfd_create("blk", MFD_CLOEXEC);
	f->tab = memfd_create("tab", MFD_CLOEXEC);
	assert_true(f->mem >= 0 && f->blk >= 0 && f->tab >= 0);
	assert_int_equal(zdense_file_sizes(LOCAL_MB * 256, &f->mem_len, &f->blk_len), 0);
	f->tab_len = tmem_crashtab_bytes(OBJS_MAX);
	assert_int_equal(ftruncate(f->tab, (off_t)f->tab_len), 0);
	ct = mmap(NULL, f->tab_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->tab, 0);
	assert_true(ct != MAP_FAILED);
	assert_int_equal(tmem_crashtab_init(ct, f->tab_len, OBJS_MAX), 0);
	munmap(ct, f->tab_len);
}

static void files_close(struct files *f)
{
	close(f->mem);
	close(f->blk);
	close(f->tab);
}

static struct zcache *tier_shared(struct files *f, struct tmem_crashtab **ct)
{
	struct zcache_crash cr = {.mem_fd = f->mem, .blk_fd = f->blk};
	struct zcache_config cfg = {.local_mb = LOCAL_MB, .crash = &cr};
	struct zcache *z;

	*ct = mmap(NULL, f->tab_len, PROT_READ | PROT_WRITE, MAP_SHARED, f->tab, 0);
	if (*ct == MAP_FAILED)
		return NULL;
	cr.tab = *ct;
	z = zcache_create(&cfg);
	return z;
}

static void pools_make(struct tmem *t)
{
	int p = tmem_pool_new(t, TMEM_PERSISTENT), z = tmem_pool_new(t, TMEM_PERSISTENT),
	    e = tmem_pool_new(t, 0);

	assert_true(p >= 0 && z >= 0 && e >= 0);
	pool_id[0] = (uint32_t)p;
	pool_id[1] = (uint32_t)z;
	pool_id[2] = (uint32_t)e;
}

/* ---- the child ------------------------------------------------------------ */

static void child(struct files *f, struct crash_log *log)
{
	static unsigned char page[4096];
	struct tmem_crashtab *ct;
	struct zcache *z = tier_shared(f, &ct);
	uint64_t n = 0, rng = 0x9e3779b97f4a7c15ull;
	struct tmem *t;

	if (!z)
		_exit(3);
	t = zcache_tmem(z);
	pools_make(t);
	for (;;) {
		uint32_t r, pool, index, v;
		struct tmem_oid oid;
		int rc;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		if (n + 1 >= LOG_OPS)
			_exit(0);
		r = (uint32_t)(rng >> 24) % NREF;
		ref_handle(r, &pool, &oid, &index);
		if (rng % 8 == 0) {
			crash_log_begin(log, n, r, 0);
			(void)tmem_flush_page(t, pool, &oid, index);
			crash_log_end(log, n++);
			continue;
		}
		v = (uint32_t)n + 1;
		crash_log_begin(log, n, r, v);
		page_make(page, r, v);
		rc = tmem_put(t, pool, &oid, index, page);
		if (rc)
			log->op[n].v = 0; /* refused: put-put-get left no page */
		crash_log_end(log, n++);
	}
}

/* ---- the parent ----------------------------------------------------------- */

static int load(void *arg, uint16_t tag, const void *head, size_t hl, const void *body, size_t bl)
{
	static uint8_t rec[64 + 4096];
	struct snapshot_loader *l = arg;

	assert_true(hl + bl <= sizeof(rec));
	memcpy(rec, head, hl);
	if (bl)
		memcpy(rec + hl, body, bl);
	return snapshot_load_record(l, tag, rec, hl + bl);
}

/* Turn f's files into a fresh tier. @return it, with *st and incomplete set. */
static struct zcache *reload(struct files *f, struct crashload_stats *st, uint64_t *incomplete)
{
	struct zcache_config cfg = {.local_mb = LOCAL_MB};
	struct zcache *z = zcache_create(&cfg);
	struct snapshot_loader l;
	struct crashload_files cf = {.mem_len = f->mem_len, .blk_len = f->blk_len,
				     .tab_len = f->tab_len, .algo = COMPRESS_LZO};
	uint32_t id;

	assert_non_null(z);
	cf.mem = mmap(NULL, f->mem_len, PROT_READ, MAP_SHARED, f->mem, 0);
	cf.blk = mmap(NULL, f->blk_len, PROT_READ, MAP_SHARED, f->blk, 0);
	cf.tab = mmap(NULL, f->tab_len, PROT_READ, MAP_SHARED, f->tab, 0);
	assert_true(cf.mem != MAP_FAILED && cf.blk != MAP_FAILED && cf.tab != MAP_FAILED);
	snapshot_loader_init(&l, z);
	memset(incomplete, 0, TMEM_MAX_POOLS / 8);
	assert_int_equal(crashload_emit(&cf, load, &l, incomplete, st), 0);
	for (id = 0; id < TMEM_MAX_POOLS; id++)
		if (incomplete[id / 64] >> (id % 64) & 1)
			assert_int_equal(tmem_pool_set_incomplete(zcache_tmem(z), id), 0);
	munmap((void *)cf.mem, f->mem_len);
	munmap((void *)cf.blk, f->blk_len);
	munmap((void *)cf.tab, f->tab_len);
	return z;
}

static bool is_incomplete(const uint64_t *bits, uint32_t id)
{
	return bits[id / 64] >> (id % 64) & 1;
}

static void crash_round(unsigned round)
{
	size_t log_len;
	struct crash_log *log = crash_log_new(LOG_OPS, &log_len);
	static unsigned char want[4096], got[4096];
	static uint32_t ver[NREF];
	static uint64_t incomplete[TMEM_MAX_POOLS / 64];
	uint64_t done, target = 5000 + mix(round) % 60000;
	uint32_t in_ref, in_v, in_old, r;
	struct crashload_stats st;
	struct files f;
	struct zcache *z;
	pid_t pid;
	int status;

	assert_non_null(log);
	files_make(&f);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		child(&f, log);
		_exit(0);
	}
	while (atomic_load_explicit(&log->done, memory_order_acquire) < target)
		if (waitpid(pid, &status, WNOHANG) == pid)
			fail_msg("the child ended early, status %d", status);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	/* the child made its pools first, in this order, in an empty tmem: the same ids here */
	pool_id[0] = 0, pool_id[1] = 1, pool_id[2] = 2;
	done = crash_log_replay(log, ver, NREF, &in_ref, &in_v, &in_old);
	z = reload(&f, &st, incomplete);
	assert_int_equal(st.no_object + st.no_pool + st.bad_bytes + st.bad_blocks + st.bad_slots, 0);
	assert_int_equal(st.pools, NPOOL);
	for (r = 0; r < NREF; r++) {
		uint32_t pool, index, v = ver[r];
		struct tmem_oid oid;
		int rc;

		ref_handle(r, &pool, &oid, &index);
		rc = tmem_get(zcache_tmem(z), pool, &oid, index, got);
		if (r / (NOID * NIDX) == 2) {
			/* ephemeral: dropped */
			assert_int_equal(rc, -ENOENT);
			continue;
		}
		if (r == in_ref) {
			if (rc == 0) {
				bool old_ok = false, new_ok = false;

				if (in_old) {
					page_make(want, r, in_old);
					old_ok = !memcmp(want, got, 4096);
				}
				if (in_v) {
					page_make(want, r, in_v);
					new_ok = !memcmp(want, got, 4096);
				}
				assert_true(old_ok || new_ok);
			}
			continue;
		}
		if (v) {
			if (rc)
				fail_msg("round %u: ref %u version %u: get %d; %lu ops done", round, r, v,
					 rc, (unsigned long)done);
			page_make(want, r, v);
			assert_memory_equal(want, got, 4096);
		} else if (is_incomplete(incomplete, pool)) {
			/* flushed: a pool that lost pages (the op in flight) says so */
			assert_int_equal(rc, -EIO);
		} else {
			assert_int_equal(rc, -ENOENT);
		}
	}
	print_message("round %u: %lu ops, %lu pages back, %lu pools incomplete, %lu dropped as "
		      "duplicates, %lu ephemeral dropped\n",
		      round, (unsigned long)done, (unsigned long)st.pages,
		      (unsigned long)st.pools_incomplete, (unsigned long)st.dup_dropped,
		      (unsigned long)st.eph_dropped);
	/* nothing is lost unless the op in flight left two copies of its page */
	for (r = 0; r < 2; r++)
		if (is_incomplete(incomplete, pool_id[r]))
			assert_true(st.dup_dropped > 0 && in_ref / (NOID * NIDX) == r);
	zcache_destroy(z);
	files_close(&f);
	munmap(log, log_len);
}

static void test_kill_anywhere(void **state)
{
	const char *e = getenv("RAMSTER_CRASH_ROUNDS");
	unsigned round, rounds = e ? (unsigned)atoi(e) : 8;

	(void)state;
	for (round = 0; round < rounds; round++)
		crash_round(round);
}

/* Hostile files: a torn object entry loses that object's pages, a broken page itself. */
static void test_hostile(void **state)
{
	static unsigned char page[4096];
	static uint64_t incomplete[TMEM_MAX_POOLS / 64];
	struct tmem_crashtab *ct;
	struct crashload_stats st;
	struct files f;
	struct zcache *z;
	struct tmem *t;
	struct tmem_oid oid = {{5, 0, 0}};
	unsigned char *mem;
	uint32_t i;

	pid_t pid;
	int status;

	(void)state;
	files_make(&f);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* a node that stores 40 pages, then dies (no destroy: nothing more written) */
		z = tier_shared(&f, &ct);
		if (!z)
			_exit(3);
		t = zcache_tmem(z);
		pools_make(t);
		for (i = 0; i < 40; i++) {
			oid.w[0] = 5 + i / 10; /* objects 0..3, ten pages each */
			page_make(page, i, 1);
			if (tmem_put(t, pool_id[0], &oid, i % 10, page))
				_exit(4);
		}
		/* object 1's entry torn; the first page of object 0 broken (its first
		 * slot); pool Z had a page outside the tier (a remote page) */
		ct->objs[1].oid.w[0] ^= 1;
		ct->nonlocal[pool_id[1]] = 1;
		mem = mmap(NULL, f.mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, f.mem, 0);
		if (mem == MAP_FAILED)
			_exit(5);
		memset(mem + ZDENSE_HDR, 0xee, 24);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	pool_id[0] = 0, pool_id[1] = 1, pool_id[2] = 2;
	z = reload(&f, &st, incomplete);
	assert_int_equal(st.no_object, 10);
	assert_int_equal(st.bad_bytes, 1);
	assert_int_equal(st.pages, 29);
	assert_true(is_incomplete(incomplete, pool_id[0]));
	assert_true(is_incomplete(incomplete, pool_id[1]));
	assert_false(is_incomplete(incomplete, pool_id[2])); /* ephemeral: never */
	assert_int_equal(st.pools_incomplete, 2);
	assert_int_equal(tmem_get(zcache_tmem(z), pool_id[1], &oid, 0, page), -EIO);
	for (i = 0; i < 40; i++) {
		int rc;

		oid.w[0] = 5 + i / 10;
		rc = tmem_get(zcache_tmem(z), pool_id[0], &oid, i % 10, page);
		assert_int_equal(rc, (i >= 10 && i < 20) || i == 0 ? -EIO : 0);
	}
	zcache_destroy(z);
	files_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hostile),
	    cmocka_unit_test(test_kill_anywhere),
	};

	return cmocka_run_group_tests_name("crashload", tests, NULL, NULL);
}
