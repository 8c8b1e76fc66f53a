/*
 * test_foreign.c - the foreign store: round trips, replacement, budget
 * refusals (put-put-get), flushes and drops that touch only their own keys,
 * counters, and a long random run against a plain reference model.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/remote/foreign.h"

#define BIG_BUDGET (1ull << 40)

/* What the store charges, measured through its stats (the sizes are private). */
struct costs {
	uint64_t page; /* per page on top of its length */
	uint64_t obj;  /* per object record */
	uint64_t pool; /* per pool record */
};

static struct foreign_key key(uint32_t owner, uint64_t inc, uint32_t pool, uint64_t oid,
			      uint32_t index)
{
	struct foreign_key k = {.owner = owner,
				.incarnation = inc,
				.pool = pool,
				.oid = {oid, ~oid, oid * 3},
				.index = index};

	return k;
}

static void fill(unsigned char *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

static uint64_t used(const struct foreign *f)
{
	struct foreign_stats s;

	foreign_get_stats(f, &s);
	return s.used;
}

static struct costs measure(void)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key a = key(1, 1, 1, 1, 0), b = key(1, 1, 1, 1, 1), c = key(1, 1, 1, 2, 0);
	unsigned char d = 0;
	uint64_t u0, u1, u2;
	struct costs out;

	assert_non_null(f);
	assert_int_equal(used(f), 0);
	assert_int_equal(foreign_put(f, &a, false, &d, 1, 0), 0);
	u0 = used(f);
	assert_int_equal(foreign_put(f, &b, false, &d, 1, 0), 0);
	u1 = used(f);
	assert_int_equal(foreign_put(f, &c, false, &d, 1, 0), 0);
	u2 = used(f);
	out.page = u1 - u0 - 1;
	out.obj = u2 - u1 - 1 - out.page;
	out.pool = u0 - 1 - out.page - out.obj;
	/* a page header is not free; neither is a record */
	assert_true(out.page >= 16);
	assert_true(out.obj >= 16);
	assert_true(out.pool >= 16);
	foreign_destroy(f);
	return out;
}

static void put_ok(struct foreign *f, const struct foreign_key *k, size_t len, uint32_t seed)
{
	unsigned char buf[4096];

	fill(buf, len, seed);
	assert_int_equal(foreign_put(f, k, false, buf, len, seed ^ 0xabcd), 0);
}

static void expect_page(struct foreign *f, const struct foreign_key *k, size_t len, uint32_t seed)
{
	unsigned char buf[4096];
	const void *data;
	size_t l;
	uint32_t cs;

	assert_int_equal(foreign_get(f, k, &data, &l, &cs), 0);
	assert_int_equal(l, len);
	assert_int_equal(cs, seed ^ 0xabcd);
	fill(buf, len, seed);
	assert_memory_equal(data, buf, len);
}

static void expect_none(struct foreign *f, const struct foreign_key *k)
{
	const void *data;
	size_t l;
	uint32_t cs;

	assert_int_equal(foreign_get(f, k, &data, &l, &cs), -ENOENT);
}

static void test_round_trip(void **state)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key k = key(3, 7, 2, 99, 5), other = key(3, 7, 2, 99, 6);
	struct foreign_stats s;

	assert_non_null(f);
	expect_none(f, &k);
	put_ok(f, &k, 4096, 1);
	put_ok(f, &other, 1, 2);
	expect_page(f, &k, 4096, 1);
	expect_page(f, &other, 1, 2);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 2);
	assert_int_equal(s.bytes, 4097);
	assert_int_equal(s.budget, BIG_BUDGET);
	assert_int_equal(foreign_owner_pages(f, 3), 2);
	assert_int_equal(foreign_flush(f, &k), 0);
	assert_int_equal(foreign_flush(f, &k), -ENOENT);
	expect_none(f, &k);
	expect_page(f, &other, 1, 2);
	foreign_destroy(f);
}

/* A put of version v: a sealed page starts with its seal version (seal.h). */
static void put_version(struct foreign *f, const struct foreign_key *k, uint64_t v)
{
	unsigned char buf[64] = {0};
	unsigned i;

	for (i = 0; i < 8; i++)
		buf[i] = (unsigned char)(v >> (8 * i));
	assert_int_equal(foreign_put(f, k, true, buf, sizeof(buf), 0), 0);
}

/*
 * A flush that took the long way (retried after a timeout, or owed while the
 * holder was unreachable) arrives after the owner put the page again: the newer
 * copy stays (the relay storm lost pages this way, 2026-12-05).
 */
static void test_flush_horizon(void **state)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key k = key(3, 7, 2, 99, 5);
	struct foreign_stats s;

	assert_non_null(f);
	put_version(f, &k, 100);
	/* issued when version 100 was the last sealed: removes it */
	assert_int_equal(foreign_flush_upto(f, &k, 100), 0);
	expect_none(f, &k);
	/* issued at 150, arriving after the put of version 151: kept */
	put_version(f, &k, 151);
	assert_int_equal(foreign_flush_upto(f, &k, 150), -ESTALE);
	foreign_get_stats(f, &s);
	assert_int_equal(s.flushes_newer, 1);
	assert_int_equal(s.pages, 1);
	/* a later flush, and one with no horizon, remove it */
	assert_int_equal(foreign_flush_upto(f, &k, 1ull << 40), 0);
	put_version(f, &k, 1ull << 41);
	assert_int_equal(foreign_flush_upto(f, &k, 0), 0);
	assert_int_equal(foreign_flush_upto(f, &k, 5), -ENOENT);
	/* a page too short to carry a version is removed by any flush */
	assert_int_equal(foreign_put(f, &k, false, "abc", 3, 0), 0);
	assert_int_equal(foreign_flush_upto(f, &k, 1), 0);
	/* a fragment: its version comes in the put's checksum field (low 32 bits),
	 * its bytes say nothing (here they would read as a huge version) */
	{
		unsigned char frag[64];

		memset(frag, 0xff, sizeof(frag));
		assert_int_equal(foreign_put(f, &k, true, frag, sizeof(frag), 200), 0);
		assert_int_equal(foreign_flush_upto(f, &k, 200), 0);
		expect_none(f, &k);
		assert_int_equal(foreign_put(f, &k, true, frag, sizeof(frag), 201), 0);
		assert_int_equal(foreign_flush_upto(f, &k, 200), -ESTALE);
		/* serial numbers: past a wrap of the low 32 bits */
		assert_int_equal(foreign_put(f, &k, true, frag, sizeof(frag), 5), 0);
		assert_int_equal(foreign_flush_upto(f, &k, (1ull << 32) + 4), -ESTALE);
		assert_int_equal(foreign_flush_upto(f, &k, (1ull << 32) + 5), 0);
		expect_none(f, &k);
	}
	foreign_destroy(f);
}

static void test_replace(void **state)
{
	struct costs c = measure();
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key k = key(1, 1, 0, 5, 0);
	struct foreign_stats s;

	assert_non_null(f);
	put_ok(f, &k, 100, 1);
	put_ok(f, &k, 50, 2);
	expect_page(f, &k, 50, 2);
	put_ok(f, &k, 3000, 3);
	expect_page(f, &k, 3000, 3);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 1);
	assert_int_equal(s.bytes, 3000);
	assert_int_equal(s.used, 3000 + c.page + c.obj + c.pool);
	assert_int_equal(foreign_owner_pages(f, 1), 1);
	foreign_destroy(f);
}

static void test_budget(void **state)
{
	struct costs c = measure();
	uint64_t one = 100 + c.page + c.obj + c.pool;
	struct foreign *f = foreign_create(one);
	struct foreign_key a = key(1, 1, 0, 5, 0), b = key(1, 1, 0, 5, 1);
	unsigned char buf[4096] = {0};
	struct foreign_stats s;

	assert_non_null(f);
	put_ok(f, &a, 100, 1); /* exactly fits */
	assert_int_equal(used(f), one);
	assert_int_equal(foreign_put(f, &b, false, buf, 1, 0), -ENOSPC);
	expect_page(f, &a, 100, 1);
	put_ok(f, &a, 99, 2); /* a smaller replacement fits */
	expect_page(f, &a, 99, 2);
	put_ok(f, &a, 100, 3); /* and so does an equal one */
	expect_page(f, &a, 100, 3);

	/* a refused replacement takes the old copy with it */
	assert_int_equal(foreign_put(f, &a, false, buf, 101, 0), -ENOSPC);
	expect_none(f, &a);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.used, 0);
	assert_int_equal(s.refused_full, 2);
	assert_int_equal(foreign_owner_pages(f, 1), 0);

	put_ok(f, &a, 100, 4);
	expect_page(f, &a, 100, 4);
	foreign_destroy(f);

	/* a zero budget takes nothing */
	f = foreign_create(0);
	assert_non_null(f);
	assert_int_equal(foreign_put(f, &a, false, buf, 1, 0), -ENOSPC);
	foreign_destroy(f);
}

/* The keys the scoping tests spread around one object of (1, 10, 2, oid 7). */
enum { K_BASE, K_OTHER_OID, K_OTHER_POOL, K_OTHER_OWNER, K_OTHER_INC, K_GROUPS };

static struct foreign_key group_key(int g, uint32_t index)
{
	switch (g) {
	case K_OTHER_OID:
		return key(1, 10, 2, 8, index);
	case K_OTHER_POOL:
		return key(1, 10, 3, 7, index);
	case K_OTHER_OWNER:
		return key(2, 10, 2, 7, index);
	case K_OTHER_INC:
		return key(1, 11, 2, 7, index);
	default:
		return key(1, 10, 2, 7, index);
	}
}

#define PER_GROUP 4

static struct foreign *fill_groups(void)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key k;
	uint32_t i;
	int g;

	assert_non_null(f);
	for (g = 0; g < K_GROUPS; g++) {
		for (i = 0; i < PER_GROUP; i++) {
			k = group_key(g, i);
			put_ok(f, &k, 10 + i + g, g * 100 + i);
		}
	}
	return f;
}

/* present[g] pages 0..present[g]-1 of group g are there, the rest are not */
static void expect_groups(struct foreign *f, const uint32_t *present)
{
	struct foreign_key k;
	uint32_t i;
	int g;

	for (g = 0; g < K_GROUPS; g++) {
		for (i = 0; i < PER_GROUP; i++) {
			k = group_key(g, i);
			if (i < present[g])
				expect_page(f, &k, 10 + i + g, g * 100 + i);
			else
				expect_none(f, &k);
		}
	}
}

static void test_flush_scope(void **state)
{
	struct foreign *f = fill_groups();
	uint32_t all[K_GROUPS] = {4, 4, 4, 4, 4};
	struct foreign_key k = group_key(K_BASE, 3);
	struct foreign_stats s;

	expect_groups(f, all);
	assert_int_equal(foreign_owner_pages(f, 1), 16);
	assert_int_equal(foreign_owner_pages(f, 2), 4);

	/* one page */
	assert_int_equal(foreign_flush(f, &k), 0);
	all[K_BASE] = 3;
	expect_groups(f, all);

	/* one object: the same oid elsewhere stays */
	assert_int_equal(foreign_flush_object(f, &k), 3);
	assert_int_equal(foreign_flush_object(f, &k), 0);
	all[K_BASE] = 0;
	expect_groups(f, all);
	assert_int_equal(foreign_owner_pages(f, 1), 12);

	/* one pool: the other oid of it goes, other pools/owners/incarnations stay */
	put_ok(f, &k, 10 + 3, 3); /* back again, alone */
	assert_int_equal(foreign_flush_pool(f, 1, 10, 2), 5);
	assert_int_equal(foreign_flush_pool(f, 1, 10, 2), 0);
	expect_none(f, &k);
	all[K_OTHER_OID] = 0;
	expect_groups(f, all);
	assert_int_equal(foreign_owner_pages(f, 1), 8);
	assert_int_equal(foreign_owner_pages(f, 2), 4);

	foreign_get_stats(f, &s);
	assert_int_equal(s.flushes, 1 + 3 + 5);
	assert_int_equal(s.pages, 12);
	assert_int_equal(s.dropped, 0);

	/* and the rest, pool by pool */
	assert_int_equal(foreign_flush_pool(f, 1, 10, 3), 4);
	assert_int_equal(foreign_flush_pool(f, 2, 10, 2), 4);
	assert_int_equal(foreign_flush_pool(f, 1, 11, 2), 4);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.bytes, 0);
	assert_int_equal(s.used, 0);
	foreign_destroy(f);
}

static void test_drop_owner(void **state)
{
	struct foreign *f = fill_groups();
	uint32_t left[K_GROUPS] = {0, 0, 0, 4, 4};
	uint32_t none[K_GROUPS] = {0, 0, 0, 4, 0};
	struct foreign_stats s;

	/* keep incarnation 11 of owner 1; owner 2 is someone else */
	assert_int_equal(foreign_drop_owner(f, 1, 11), 12);
	expect_groups(f, left);
	assert_int_equal(foreign_owner_pages(f, 1), 4);
	assert_int_equal(foreign_owner_pages(f, 2), 4);
	assert_int_equal(foreign_drop_owner(f, 1, 11), 0);
	assert_int_equal(foreign_drop_owner(f, 3, 0), 0);

	/* keep 0: everything of owner 1 */
	assert_int_equal(foreign_drop_owner(f, 1, 0), 4);
	expect_groups(f, none);
	assert_int_equal(foreign_owner_pages(f, 1), 0);
	assert_int_equal(foreign_owner_pages(f, 2), 4);

	/* keep an incarnation that holds nothing: all of it goes */
	assert_int_equal(foreign_drop_owner(f, 2, 99), 4);
	foreign_get_stats(f, &s);
	assert_int_equal(s.dropped, 20);
	assert_int_equal(s.flushes, 0);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.used, 0);

	/* the owner can store again afterwards; keep 0 keeps not even incarnation 0 */
	{
		struct foreign_key k = group_key(K_BASE, 0), z = key(1, 0, 2, 7, 0);

		put_ok(f, &k, 77, 5);
		put_ok(f, &z, 78, 6);
		expect_page(f, &k, 77, 5);
		expect_page(f, &z, 78, 6);
		assert_int_equal(foreign_drop_owner(f, 1, 10), 1);
		expect_none(f, &z);
		expect_page(f, &k, 77, 5);
		put_ok(f, &z, 78, 6);
		assert_int_equal(foreign_drop_owner(f, 1, 0), 2);
		assert_int_equal(foreign_owner_pages(f, 1), 0);
	}
	foreign_destroy(f);
}

static void test_stats(void **state)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key a = key(1, 1, 0, 1, 0), b = key(64, 1, 0, 1, 0), c = key(64, 2, 9, 1, 0);
	struct foreign_stats s;

	assert_non_null(f);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages + s.bytes + s.used + s.puts + s.gets + s.hits + s.flushes +
			     s.refused_full + s.dropped,
			 0);
	put_ok(f, &a, 10, 1);
	put_ok(f, &b, 20, 2);
	put_ok(f, &c, 30, 3);
	put_ok(f, &c, 40, 4); /* replace */
	expect_page(f, &a, 10, 1);
	expect_page(f, &c, 40, 4);
	assert_int_equal(foreign_flush(f, &a), 0);
	expect_none(f, &a);
	assert_int_equal(foreign_owner_pages(f, 1), 0);
	assert_int_equal(foreign_owner_pages(f, 64), 2);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 2);
	assert_int_equal(s.bytes, 60);
	assert_true(s.used > s.bytes);
	assert_int_equal(s.puts, 4);
	assert_int_equal(s.gets, 3);
	assert_int_equal(s.hits, 2);
	assert_int_equal(s.flushes, 1);
	assert_int_equal(s.refused_full, 0);
	assert_int_equal(foreign_drop_owner(f, 64, 2), 1);
	foreign_get_stats(f, &s);
	assert_int_equal(s.dropped, 1);
	assert_int_equal(s.pages, 1);
	assert_int_equal(foreign_owner_pages(f, 64), 1);
	foreign_destroy(f);
}

/*
 * RAM the store holds for real-memory-sized pages (845 bytes, LZO's mean on a
 * Python heap; 1,800, generated text's), 20,000 of them for two owners in
 * 100-page objects: the arena chunks, hash tables and records over the bytes
 * held, printed; the holder-side floor is 1.2x (docs/benchmarks.md).
 */
static void test_ram_per_page(void **state)
{
	static const size_t lens[] = { 845, 1800 };
	unsigned char buf[4096];
	unsigned i, n;

	memset(buf, 0x5a, sizeof(buf));
	for (i = 0; i < 2; i++) {
		struct foreign *f = foreign_create(BIG_BUDGET);
		struct foreign_stats s;
		double r;

		assert_non_null(f);
		foreign_get_stats(f, &s);
		assert_true(s.ram > 0 && s.ram < 64 * 1024); /* tables and the store only */
		for (n = 0; n < 20000; n++) {
			struct foreign_key k = key(1 + n % 2, 1, 1, n / 100, n % 100);

			assert_int_equal(foreign_put(f, &k, true, buf, lens[i], 0), 0);
		}
		foreign_get_stats(f, &s);
		assert_int_equal(s.bytes, 20000 * lens[i]);
		r = (double)s.ram / (double)s.bytes;
		print_message("%zu-byte pages: %.1f B of RAM a page, %.3fx the bytes held\n",
			      lens[i], (double)s.ram / 20000.0, r);
		assert_true(s.ram > s.bytes);
		assert_true(r <= 1.2);
		foreign_destroy(f);
	}
}

static void test_bad_args(void **state)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_key k = key(1, 1, 0, 1, 0), k0 = key(0, 1, 0, 1, 0),
			   k65 = key(65, 1, 0, 1, 0);
	unsigned char buf[4161] = {0};
	const void *data;
	size_t len;
	uint32_t cs;
	struct foreign_stats s;

	assert_non_null(f);
	assert_int_equal(foreign_put(f, &k, false, buf, 0, 0), -EINVAL);
	assert_int_equal(foreign_put(f, &k, false, buf, 4161, 0), -EINVAL); /* a sealed page at most */
	assert_int_equal(foreign_put(f, &k, false, NULL, 10, 0), -EINVAL);
	assert_int_equal(foreign_put(f, &k0, false, buf, 10, 0), -EINVAL);
	assert_int_equal(foreign_put(f, &k65, false, buf, 10, 0), -EINVAL);
	assert_int_equal(foreign_get(f, &k0, &data, &len, &cs), -EINVAL);
	assert_int_equal(foreign_get(f, &k65, &data, &len, &cs), -EINVAL);
	assert_int_equal(foreign_flush(f, &k0), -EINVAL);
	assert_int_equal(foreign_flush(f, &k65), -EINVAL);
	assert_int_equal(foreign_flush_object(f, &k65), 0);
	assert_int_equal(foreign_flush_pool(f, 0, 1, 0), 0);
	assert_int_equal(foreign_drop_owner(f, 65, 0), 0);
	assert_int_equal(foreign_owner_pages(f, 0), 0);
	assert_int_equal(foreign_owner_pages(f, 65), 0);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages + s.puts + s.gets + s.refused_full, 0);

	/* a refused bad replacement leaves the old page alone */
	put_ok(f, &k, 4096, 1);
	assert_int_equal(foreign_put(f, &k, false, buf, 4161, 0), -EINVAL); /* a sealed page at most */
	expect_page(f, &k, 4096, 1);
	foreign_destroy(f);
	foreign_destroy(NULL);
}

/* Enough pages to grow both tables far past their start and shrink them back. */
static void test_many(void **state)
{
	struct foreign *f = foreign_create(BIG_BUDGET);
	struct foreign_stats s;
	struct foreign_key k;
	uint32_t i;

	assert_non_null(f);
	for (i = 0; i < 40000; i++) {
		k = key(1 + i % 3, 1, i % 5, i / 4, i % 4);
		put_ok(f, &k, 1 + i % 64, i);
	}
	for (i = 0; i < 40000; i += 997) {
		k = key(1 + i % 3, 1, i % 5, i / 4, i % 4);
		expect_page(f, &k, 1 + i % 64, i);
	}
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 40000);
	assert_int_equal(foreign_drop_owner(f, 1, 0) + foreign_drop_owner(f, 2, 0), 26667);
	for (i = 2; i < 40000; i += 3) {
		k = key(1 + i % 3, 1, i % 5, i / 4, i % 4);
		expect_page(f, &k, 1 + i % 64, i);
	}
	assert_int_equal(foreign_flush_pool(f, 3, 1, 0) + foreign_flush_pool(f, 3, 1, 1) +
			     foreign_flush_pool(f, 3, 1, 2) + foreign_flush_pool(f, 3, 1, 3) +
			     foreign_flush_pool(f, 3, 1, 4),
			 13333);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.used, 0);
	/* and still usable after shrinking */
	k = key(5, 5, 5, 5, 5);
	put_ok(f, &k, 5, 5);
	expect_page(f, &k, 5, 5);
	foreign_destroy(f);
}

/* ---- random operations against a reference model ------------------------ */

#define M_OWNERS 3 /* ids 1, 2, 64 */
#define M_INCS	 2 /* 1, 2 */
#define M_POOLS	 2
#define M_OIDS	 3
#define M_INDEX	 4
#define M_KEYS	 (M_OWNERS * M_INCS * M_POOLS * M_OIDS * M_INDEX)

static const uint32_t m_owner_id[M_OWNERS] = {1, 2, 64};

struct m_page {
	bool present;
	uint16_t len;
	uint32_t seed;
};

struct model {
	struct m_page p[M_OWNERS][M_INCS][M_POOLS][M_OIDS][M_INDEX];
	struct foreign_stats s; /* the counters as the model expects them */
};

static uint64_t rng_state = 0x853c49e6748fea9bull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static struct foreign_key m_key(int o, int i, int p, int d, int x)
{
	return key(m_owner_id[o], (uint64_t)i + 1, (uint32_t)p, (uint64_t)d, (uint32_t)x);
}

static uint64_t m_obj_pages(const struct model *m, int o, int i, int p, int d)
{
	uint64_t n = 0;
	int x;

	for (x = 0; x < M_INDEX; x++)
		n += m->p[o][i][p][d][x].present;
	return n;
}

static uint64_t m_pool_pages(const struct model *m, int o, int i, int p)
{
	uint64_t n = 0;
	int d;

	for (d = 0; d < M_OIDS; d++)
		n += m_obj_pages(m, o, i, p, d);
	return n;
}

static uint64_t m_owner_pages(const struct model *m, int o)
{
	uint64_t n = 0;
	int i, p;

	for (i = 0; i < M_INCS; i++)
		for (p = 0; p < M_POOLS; p++)
			n += m_pool_pages(m, o, i, p);
	return n;
}

/* pages, bytes and used from the model's pages */
static void m_totals(struct model *m, const struct costs *c)
{
	int o, i, p, d, x;

	m->s.pages = m->s.bytes = m->s.used = 0;
	for (o = 0; o < M_OWNERS; o++)
		for (i = 0; i < M_INCS; i++)
			for (p = 0; p < M_POOLS; p++) {
				if (m_pool_pages(m, o, i, p))
					m->s.used += c->pool;
				for (d = 0; d < M_OIDS; d++) {
					if (m_obj_pages(m, o, i, p, d))
						m->s.used += c->obj;
					for (x = 0; x < M_INDEX; x++) {
						const struct m_page *mp = &m->p[o][i][p][d][x];

						if (!mp->present)
							continue;
						m->s.pages++;
						m->s.bytes += mp->len;
						m->s.used += mp->len + c->page;
					}
				}
			}
}

static void m_check(struct foreign *f, struct model *m, const struct costs *c)
{
	struct foreign_stats s;
	int o;

	m_totals(m, c);
	foreign_get_stats(f, &s);
	assert_int_equal(s.pages, m->s.pages);
	assert_int_equal(s.bytes, m->s.bytes);
	assert_int_equal(s.used, m->s.used);
	assert_int_equal(s.budget, m->s.budget);
	assert_int_equal(s.puts, m->s.puts);
	assert_int_equal(s.gets, m->s.gets);
	assert_int_equal(s.hits, m->s.hits);
	assert_int_equal(s.flushes, m->s.flushes);
	assert_int_equal(s.refused_full, m->s.refused_full);
	assert_int_equal(s.dropped, m->s.dropped);
	assert_true(s.used <= s.budget);
	for (o = 0; o < M_OWNERS; o++)
		assert_int_equal(foreign_owner_pages(f, m_owner_id[o]), m_owner_pages(m, o));
}

static void m_put(struct foreign *f, struct model *m, const struct costs *c, int o, int i, int p,
		  int d, int x)
{
	struct m_page *mp = &m->p[o][i][p][d][x];
	struct foreign_key k = m_key(o, i, p, d, x);
	unsigned char buf[4096];
	uint64_t need;
	uint32_t seed = (uint32_t)rng();
	size_t len;
	int rc;

	/* mostly compressible-sized pages, some tiny, some whole */
	switch (rng() % 4) {
	case 0:
		len = 1 + rng() % 16;
		break;
	case 1:
		len = 4096;
		break;
	default:
		len = 1 + rng() % 4096;
	}
	fill(buf, len, seed);
	rc = foreign_put(f, &k, rng() & 1, buf, len, seed ^ 0xabcd);

	m->s.puts++;
	mp->present = false; /* the old copy goes whatever happens */
	m_totals(m, c);
	need = len + c->page;
	if (!m_obj_pages(m, o, i, p, d))
		need += c->obj;
	if (!m_pool_pages(m, o, i, p))
		need += c->pool;
	if (m->s.used + need > m->s.budget) {
		assert_int_equal(rc, -ENOSPC);
		m->s.refused_full++;
		return;
	}
	assert_int_equal(rc, 0);
	mp->present = true;
	mp->len = (uint16_t)len;
	mp->seed = seed;
}

static void m_get(struct foreign *f, struct model *m, int o, int i, int p, int d, int x)
{
	struct m_page *mp = &m->p[o][i][p][d][x];
	struct foreign_key k = m_key(o, i, p, d, x);

	m->s.gets++;
	if (mp->present) {
		m->s.hits++;
		expect_page(f, &k, mp->len, mp->seed);
	} else {
		expect_none(f, &k);
	}
}

static void test_random(void **state)
{
	struct costs c = measure();
	struct model *m = calloc(1, sizeof(*m));
	struct foreign *f;
	struct foreign_key k;
	uint64_t n, want;
	int step, o, i, p, d, x, r;

	assert_non_null(m);
	/* room for about 24 average pages of the 144 keys: refusals are common */
	m->s.budget = 24 * (2048 + c.page) + 8 * (c.obj + c.pool);
	f = foreign_create(m->s.budget);
	assert_non_null(f);

	for (step = 0; step < 100000; step++) {
		o = (int)(rng() % M_OWNERS);
		i = (int)(rng() % M_INCS);
		p = (int)(rng() % M_POOLS);
		d = (int)(rng() % M_OIDS);
		x = (int)(rng() % M_INDEX);
		k = m_key(o, i, p, d, x);
		r = (int)(rng() % 1000);
		if (r < 450) {
			m_put(f, m, &c, o, i, p, d, x);
		} else if (r < 800) {
			m_get(f, m, o, i, p, d, x);
		} else if (r < 950) {
			want = m->p[o][i][p][d][x].present;
			assert_int_equal(foreign_flush(f, &k), want ? 0 : -ENOENT);
			m->p[o][i][p][d][x].present = false;
			m->s.flushes += want;
		} else if (r < 980) {
			want = m_obj_pages(m, o, i, p, d);
			n = foreign_flush_object(f, &k);
			assert_int_equal(n, want);
			for (x = 0; x < M_INDEX; x++)
				m->p[o][i][p][d][x].present = false;
			m->s.flushes += want;
		} else if (r < 995) {
			want = m_pool_pages(m, o, i, p);
			n = foreign_flush_pool(f, m_owner_id[o], (uint64_t)i + 1, (uint32_t)p);
			assert_int_equal(n, want);
			memset(m->p[o][i][p], 0, sizeof(m->p[o][i][p]));
			m->s.flushes += want;
		} else {
			/* keep one incarnation, none, or one that holds nothing */
			uint64_t keep = rng() % (M_INCS + 2);
			int j;

			want = 0;
			for (j = 0; j < M_INCS; j++) {
				if (keep != 0 && keep == (uint64_t)j + 1)
					continue;
				for (p = 0; p < M_POOLS; p++)
					want += m_pool_pages(m, o, j, p);
				memset(m->p[o][j], 0, sizeof(m->p[o][j]));
			}
			n = foreign_drop_owner(f, m_owner_id[o], keep);
			assert_int_equal(n, want);
			m->s.dropped += want;
		}
		m_check(f, m, &c);
	}
	/* everything the model holds is there, byte for byte */
	for (o = 0; o < M_OWNERS; o++)
		for (i = 0; i < M_INCS; i++)
			for (p = 0; p < M_POOLS; p++)
				for (d = 0; d < M_OIDS; d++)
					for (x = 0; x < M_INDEX; x++)
						m_get(f, m, o, i, p, d, x);
	m_check(f, m, &c);
	/* the run must have exercised refusals and drops, or it proved little */
	assert_true(m->s.refused_full > 1000);
	assert_true(m->s.dropped > 0);
	foreign_destroy(f);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip), cmocka_unit_test(test_flush_horizon),
	    cmocka_unit_test(test_replace),
	    cmocka_unit_test(test_budget),     cmocka_unit_test(test_flush_scope),
	    cmocka_unit_test(test_drop_owner), cmocka_unit_test(test_stats),
	    cmocka_unit_test(test_bad_args),   cmocka_unit_test(test_many),
	    cmocka_unit_test(test_random),
	    cmocka_unit_test(test_ram_per_page),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
