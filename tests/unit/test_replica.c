/*
 * test_replica.c - the replica table (tmem/replica.c): records by id, stale
 * ids refused after a move or a remove (no ABA on reused records), bad sets
 * refused, a dead holder marks exactly its records degraded, the degraded and
 * lost counts follow state changes and removals, and the walk sees every
 * live record once across a growth of the table; one-sided read keys live in
 * the side table only for records that have some, and go with the record.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmem/replica.h"

static struct replica_set set2(unsigned a, unsigned b)
{
	struct replica_set s = {.n = 2,
				.node = {(uint8_t)a, (uint8_t)b},
				.epoch = {1, 1},
				.len = 1000,
				.checksum = 0xabcdef};

	return s;
}

/* Padding zeroed: the tests compare handles whole, and the table keeps the fields only. */
static struct tmem_handle handle(uint32_t i)
{
	struct tmem_handle h;

	memset(&h, 0, sizeof(h));
	h.pool = 7;
	h.oid = (struct tmem_oid){{i, 2, 3}};
	h.index = i * 3;
	return h;
}

static void test_add_read_move_remove(void **state)
{
	struct replica_table *t = replica_create();
	struct replica_set s = set2(2, 3), got;
	struct tmem_handle h = handle(1), hg;
	uint64_t id, id2, id3;

	assert_non_null(t);
	assert_int_equal(replica_add(t, &h, true, &s, &id), 0);
	assert_true(replica_is_id(id));
	assert_int_equal(id & 3, 0);
	assert_int_equal(replica_read(t, id, &got, &hg), 0);
	assert_int_equal(got.n, 2);
	assert_int_equal(got.node[0], 2);
	assert_int_equal(got.node[1], 3);
	assert_int_equal(got.len, 1000);
	assert_int_equal(got.checksum, 0xabcdef);
	assert_memory_equal(&hg, &h, sizeof(h));

	/* a move: new id, the old one is stale */
	assert_int_equal(replica_move(t, id, 3, 4, 9, &id2), 0);
	assert_true(id2 != id);
	assert_int_equal(replica_read(t, id, &got, NULL), -ENOENT);
	assert_int_equal(replica_move(t, id, 2, 5, 1, &id3), -ENOENT);
	assert_int_equal(replica_read(t, id2, &got, NULL), 0);
	assert_int_equal(got.node[1], 4);
	assert_int_equal(got.epoch[1], 9);
	/* not a holder, already a holder, bad node */
	assert_int_equal(replica_move(t, id2, 3, 5, 1, &id3), -ENOENT);
	assert_int_equal(replica_move(t, id2, 2, 4, 1, &id3), -EEXIST);
	assert_int_equal(replica_move(t, id2, 2, 65, 1, &id3), -EINVAL);

	/* remove, then a new record reuses the slot under another id */
	assert_int_equal(replica_remove(t, id2), 0);
	assert_int_equal(replica_remove(t, id2), -ENOENT);
	assert_int_equal(replica_add(t, &h, true, &s, &id3), 0);
	assert_true(id3 != id2 && id3 != id);
	assert_int_equal(id3 >> 32, id2 >> 32); /* the same slot */
	assert_int_equal(replica_read(t, id2, &got, NULL), -ENOENT);
	replica_destroy(t);
}

/* Read keys: kept beside the records that name some, given back on move and remove. */
static void test_keys_side_table(void **state)
{
	struct replica_table *t = replica_create();
	struct replica_set s = set2(2, 3), k = set2(4, 5), got;
	struct replica_usage u0, u;
	struct tmem_handle h = handle(9), hg;
	uint64_t plain[1000], keyed, moved, moved2;
	unsigned i;

	(void)state;
	assert_non_null(t);
	replica_usage(t, &u0);
	/* 1000 records without keys: 64 bytes each, the side table untouched */
	for (i = 0; i < 1000; i++) {
		struct tmem_handle hi = handle(i);

		assert_int_equal(replica_add(t, &hi, false, &s, &plain[i]), 0);
	}
	replica_usage(t, &u);
	assert_int_equal(u.records, 1000);
	assert_int_equal(u.keyed, 0);
	assert_true(u.bytes <= 4096 * 64 + 16 * sizeof(void *));
	assert_int_equal(replica_read(t, plain[7], &got, &hg), 0);
	assert_int_equal(got.raddr[0], 0);
	assert_int_equal(got.rkey[1], 0);
	assert_int_equal(hg.index, 21);
	assert_int_equal(hg.oid.w[0], 7);

	/* a keyed record reads its keys back, slot for slot */
	k.raddr[0] = 0x1000;
	k.rkey[0] = 11;
	k.lgen[0] = 3;
	k.raddr[1] = 0x2000;
	k.rkey[1] = 12;
	k.lgen[1] = 4;
	assert_int_equal(replica_add(t, &h, true, &k, &keyed), 0);
	replica_usage(t, &u);
	assert_int_equal(u.keyed, 1);
	assert_int_equal(replica_read(t, keyed, &got, &hg), 0);
	assert_memory_equal(&hg, &h, sizeof(h));
	assert_int_equal(got.raddr[0], 0x1000);
	assert_int_equal(got.rkey[0], 11);
	assert_int_equal(got.lgen[0], 3);
	assert_int_equal(got.raddr[1], 0x2000);
	assert_int_equal(got.rkey[1], 12);
	assert_int_equal(got.lgen[1], 4);

	/* a move forgets the moved slot's key, keeps the other; the last key gone frees them */
	assert_int_equal(replica_move(t, keyed, 4, 6, 1, &moved), 0);
	assert_int_equal(replica_read(t, moved, &got, NULL), 0);
	assert_int_equal(got.raddr[0], 0);
	assert_int_equal(got.raddr[1], 0x2000);
	assert_int_equal(got.rkey[1], 12);
	replica_usage(t, &u);
	assert_int_equal(u.keyed, 1);
	assert_int_equal(replica_move(t, moved, 5, 7, 1, &moved2), 0);
	assert_int_equal(replica_read(t, moved2, &got, NULL), 0);
	assert_int_equal(got.raddr[0], 0);
	assert_int_equal(got.raddr[1], 0);
	replica_usage(t, &u);
	assert_int_equal(u.keyed, 0);

	/* a keyed record removed gives its keys back; the next keyed one reuses them */
	assert_int_equal(replica_add(t, &h, true, &k, &keyed), 0);
	replica_usage(t, &u);
	assert_int_equal(u.keyed, 1);
	assert_int_equal(replica_remove(t, keyed), 0);
	replica_usage(t, &u);
	assert_int_equal(u.keyed, 0);
	assert_int_equal(u.records, 1001);
	/* a record reusing a keyed one's slot has no keys of the old */
	assert_int_equal(replica_add(t, &h, true, &s, &keyed), 0);
	assert_int_equal(replica_read(t, keyed, &got, NULL), 0);
	assert_int_equal(got.raddr[0], 0);
	assert_int_equal(got.raddr[1], 0);
	for (i = 0; i < 1000; i++)
		assert_int_equal(replica_remove(t, plain[i]), 0);
	replica_usage(t, &u);
	assert_int_equal(u.records, 2);
	replica_destroy(t);
}

/* An erasure-coded page's set (ec_k: its data fragments) is kept, moved slot for slot, checked. */
static void test_erasure_sets(void **state)
{
	struct replica_table *t = replica_create();
	struct tmem_handle h = handle(4);
	struct replica_set s = {.n = 6,
				.node = {2, 3, 4, 5, 6, 7},
				.epoch = {1, 1, 1, 1, 1, 1},
				.len = 900,
				.checksum = 7,
				.ec_k = 4},
			   got;
	uint64_t id, id2;

	(void)state;
	assert_non_null(t);
	assert_int_equal(replica_add(t, &h, true, &s, &id), 0);
	assert_int_equal(replica_read(t, id, &got, NULL), 0);
	assert_int_equal(got.ec_k, 4);
	assert_int_equal(got.n, 6);
	/* a lost holder's fragment made again elsewhere keeps its slot (its fragment number) */
	assert_int_equal(replica_move(t, id, 4, 8, 2, &id2), 0);
	assert_int_equal(replica_read(t, id2, &got, NULL), 0);
	assert_int_equal(got.node[2], 8);
	assert_int_equal(got.ec_k, 4);
	s.n = REPLICA_MAX;
	s.node[6] = 9;
	s.node[7] = 10;
	s.ec_k = 7;
	assert_int_equal(replica_add(t, &h, true, &s, &id), 0);
	/* no parity, a single data fragment */
	s.ec_k = REPLICA_MAX;
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s.ec_k = 1;
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	replica_destroy(t);
}

static void test_bad_input(void **state)
{
	struct replica_table *t = replica_create();
	struct tmem_handle h = handle(1);
	struct replica_set s = set2(2, 2); /* two copies on one node */
	struct replica_set got;
	uint64_t id;

	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s = set2(0, 2);
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s = set2(2, 65);
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s = set2(2, 3);
	s.n = REPLICA_MAX + 1;
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s = set2(2, 3);
	s.len = 0;
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	s.len = 4097;
	assert_int_equal(replica_add(t, &h, true, &s, &id), -EINVAL);
	/* ids that were never handed out */
	assert_int_equal(replica_read(t, 0, &got, NULL), -ENOENT);
	assert_int_equal(replica_read(t, 1ull << 29, &got, NULL), -ENOENT);
	assert_int_equal(replica_read(t, (77ull << 32) | (1ull << 29), &got, NULL), -ENOENT);
	assert_int_equal(replica_read(t, ~0ull, &got, NULL), -ENOENT);
	replica_destroy(t);
	replica_destroy(NULL);
}

struct walk_ctx {
	uint64_t seen, degraded;
	unsigned char *hit;
};

static void walk_fn(void *arg, uint64_t id, const struct tmem_handle *h, bool pers,
		    const struct replica_set *s)
{
	struct walk_ctx *w = arg;

	w->seen++;
	w->degraded += !!(s->state & REPLICA_DEGRADED);
	assert_true(pers);
	w->hit[h->oid.w[0]]++;
}

static void test_mark_walk_counts(void **state)
{
	enum { N = 10000 }; /* more than two chunks */
	struct replica_table *t = replica_create();
	static uint64_t ids[N];
	static unsigned char hit[N];
	struct walk_ctx w = {0, 0, hit};
	struct replica_usage u;
	uint32_t cursor = 0;
	uint64_t i, passes = 0;

	for (i = 0; i < N; i++) {
		struct replica_set s = set2(2 + i % 3, 10);
		struct tmem_handle h = handle((uint32_t)i);

		assert_int_equal(replica_add(t, &h, true, &s, &ids[i]), 0);
	}
	/* a record of one copy (kept for its read key) is never marked */
	{
		struct replica_set one = set2(3, 10);
		struct tmem_handle h = handle(N);
		uint64_t id1;

		one.n = 1;
		assert_int_equal(replica_add(t, &h, false, &one, &id1), 0);
		assert_int_equal(replica_remove(t, id1), 0);
		assert_int_equal(replica_add(t, &h, false, &one, &id1), 0);
		assert_int_equal(replica_mark_holder(t, 3), (N + 1) / 3);
		assert_int_equal(replica_read(t, id1, &one, NULL), 0);
		assert_int_equal(one.state, 0);
		assert_int_equal(replica_remove(t, id1), 0);
	}
	/* node 3 held a copy of every third record: marked once */
	assert_int_equal(replica_mark_holder(t, 3), 0); /* marked once */
	replica_usage(t, &u);
	assert_int_equal(u.records, N);
	assert_int_equal(u.degraded, (N + 1) / 3);
	assert_true(u.bytes >= N * 32);
	/* node 10 holds all: the others get marked now */
	assert_int_equal(replica_mark_holder(t, 10), N - (N + 1) / 3);
	/* state changes and removals keep the counts */
	assert_int_equal(replica_set_state(t, ids[1], 0), 0);
	assert_int_equal(replica_set_state(t, ids[4], REPLICA_LOST), 0);
	assert_int_equal(replica_remove(t, ids[7]), 0);
	assert_int_equal(replica_remove(t, ids[4]), 0);
	replica_usage(t, &u);
	assert_int_equal(u.records, N - 2);
	assert_int_equal(u.degraded, N - 3);
	assert_int_equal(u.lost, 0);
	/* the walk visits each live record once, in steps */
	do {
		replica_walk(t, &cursor, 777, walk_fn, &w);
		passes++;
	} while (cursor);
	assert_true(passes > 1);
	assert_int_equal(w.seen, N - 2);
	assert_int_equal(w.degraded, N - 3);
	for (i = 0; i < N; i++)
		assert_int_equal(hit[i], i == 4 || i == 7 ? 0 : 1);
	replica_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_add_read_move_remove),
	    cmocka_unit_test(test_keys_side_table),
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_erasure_sets),
	    cmocka_unit_test(test_mark_walk_counts),
	};

	return cmocka_run_group_tests_name("replica", tests, NULL, NULL);
}
