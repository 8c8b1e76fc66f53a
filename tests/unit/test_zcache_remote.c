/*
 * test_zcache_remote.c - the remote tier in-process, over a fake collective
 * (and a fake stripe table): remotify and repatriate round trips, flushes of
 * pages, objects and pools told to the right nodes, dead holders, stale
 * remotifies, replicated and stripe pages, frames reused, raw pages of a
 * keep-all pool through a peer. Every test runs with each allocator and
 * compressor (zcache_fixture.h). The local tier's cases are test_zcache.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/unit/zcache_fixture.h"

/* ---- the remote tier, with a fake collective ------------------------------- */

static struct {
	int alive;
	uint64_t dead; /* nodes (bit n-1) dead while alive is set */
	int page_flushes, object_flushes, pool_flushes;
	uint64_t flushed; /* nodes told of page flushes */
	unsigned last_node;
	uint64_t last_nodes;
} coll;

static bool c_alive(void *arg, unsigned node, unsigned epoch)
{
	return coll.alive && epoch == 3 && !(coll.dead & (1ull << (node - 1)));
}
static void c_flush_page(void *arg, unsigned node, bool pers, const struct tmem_handle *h)
{
	coll.page_flushes++;
	coll.flushed |= 1ull << (node - 1);
	coll.last_node = node;
}
static void c_flush_object(void *arg, uint64_t nodes, bool pers, const struct tmem_handle *h)
{
	coll.object_flushes++;
	coll.last_nodes = nodes;
}
static void c_flush_pool(void *arg, uint64_t nodes, bool pers, uint32_t pool)
{
	coll.pool_flushes++;
	coll.last_nodes = nodes;
}
static const struct zcache_remote_ops c_ops = { c_alive, c_flush_page, c_flush_object,
						c_flush_pool, NULL, NULL };

/* Move every page of one frame to node; returns the bytes that went, by index. */
static unsigned remotify_one(struct zcache *z, bool pers, unsigned node,
			     unsigned char saved[][PAGE], unsigned lens[], uint32_t idx[])
{
	static struct zcache_out o;
	unsigned i;

	assert_int_equal(zcache_remotify_take(z, pers, &o), 0);
	assert_true(o.n >= 1 && o.n <= ZCACHE_OUT_MAX);
	assert_int_equal(o.frames, alloc_kind == ZALLOC_ZBUD ? 1 : o.frames);
	for (i = 0; i < o.n; i++) {
		struct replica_set r = { .n = 1, .node = { (uint8_t)node }, .epoch = { 3 },
					 .len = o.p[i].len, .checksum = o.p[i].checksum };

		assert_true(o.p[i].resolved);
		memcpy(saved[i], o.p[i].data, o.p[i].len);
		lens[i] = o.p[i].len;
		idx[i] = o.p[i].h.index;
		assert_int_equal(zcache_remotify_commit(z, &o, i, &r), 0);
	}
	zcache_remotify_done(z, &o);
	return o.n;
}

static void test_remote_round_trip(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	struct zcache_stats s;
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	unsigned char page[PAGE], got[PAGE];
	unsigned lens[ZCACHE_OUT_MAX], n, i;
	uint32_t idx[ZCACHE_OUT_MAX];
	uint64_t pampd;
	bool home;
	struct tmem_oid o = { { 5, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	struct tmem_pool_info pi;

	assert_int_equal(tmem_pool_set_owner(t, p, 7, 1), 0);
	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	for (i = 0; i < 2; i++) {
		mkpage(page, i, 1000);
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
	}
	n = remotify_one(z, true, 4, saved, lens, idx);
	assert_int_equal(n, 2);
	zcache_get_stats(z, &s);
	assert_int_equal(s.frames, 0);
	assert_int_equal(s.remote_pages, 2);
	/* the pool's own count of remote pages, and its owner's */
	assert_int_equal(tmem_pool_info(t, p, &pi), 0);
	assert_int_equal(pi.pages, 2);
	assert_int_equal(pi.remote, 2);
	assert_int_equal(tmem_owner_remote(t, 7), 2);
	/* a get now goes remote */
	assert_int_equal(tmem_get_ex(t, p, &o, idx[0], got, &pampd), -EREMOTE);
	{
		struct tmem_handle h = { (uint32_t)p, o, idx[0] };
		struct replica_set rs;

		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		assert_int_equal(rs.n, 1);
		assert_int_equal(rs.node[0], 4);

		/* a corrupt answer is -EIO, and the page stays (persistent) */
		saved[0][0] ^= 1;
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, false, 0, saved[0],
							  lens[0], got, &home),
				 -EIO);
		saved[0][0] ^= 1;
		zcache_get_stats(z, &s);
		assert_int_equal(s.checksum_errors, 1);
		/* a good answer fills the page and brings it home (the tier has room) */
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, false, 0, saved[0],
							  lens[0], got, &home),
				 0);
		mkpage(page, idx[0], 1000);
		assert_memory_equal(page, got, PAGE);
		assert_true(home);
	}
	/* now local again: one remote page left */
	assert_int_equal(tmem_pool_info(t, p, &pi), 0);
	assert_int_equal(pi.remote, 1);
	assert_int_equal(tmem_get_ex(t, p, &o, idx[0], got, &pampd), 0);
	assert_memory_equal(page, got, PAGE);
	/* flushing the remote one tells node 4 */
	assert_int_equal(tmem_flush_page(t, p, &o, idx[1]), 0);
	assert_int_equal(coll.page_flushes, 1);
	assert_int_equal(coll.last_node, 4);
	zcache_get_stats(z, &s);
	assert_int_equal(s.remote_pages, 0);
	assert_int_equal(tmem_pool_info(t, p, &pi), 0);
	assert_int_equal(pi.remote, 0);
	assert_int_equal(tmem_owner_remote(t, 7), 0);
	zcache_destroy(z);
}

/*
 * A TMEM_KEEP_ALL pool (NBD exports) keeps incompressible pages: raw, a frame
 * each, with zdense (zbud has no huge class: refused as before); they round
 * trip locally and through a peer (the remote descriptor's length 4096 says
 * raw), and leave the mean of compressed persistent pages alone.
 */
static void test_keep_all_raw(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	struct zcache_stats s;
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	unsigned char page[PAGE], got[PAGE];
	unsigned lens[ZCACHE_OUT_MAX], n, i;
	uint32_t idx[ZCACHE_OUT_MAX];
	struct tmem_oid o = { { 9, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT | TMEM_KEEP_ALL);
	int plain = tmem_pool_new(t, TMEM_PERSISTENT);
	uint64_t pampd;
	bool home;

	assert_true(p >= 0);
	mkpage(page, 1, PAGE); /* random: does not compress */
	assert_int_equal(tmem_put(t, plain, &o, 0, page), -E2BIG);
	if (alloc_kind == ZALLOC_ZBUD) {
		assert_int_equal(tmem_put(t, p, &o, 0, page), -E2BIG);
		zcache_destroy(z);
		return;
	}
	for (i = 0; i < 3; i++) {
		mkpage(page, 10 + i, PAGE);
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
	}
	/* 3600 noise bytes: above 7/8 compressed, raw too; 1000: compressed */
	mkpage(page, 20, 3600);
	assert_int_equal(tmem_put(t, p, &o, 3, page), 0);
	mkpage(page, 21, 1000);
	assert_int_equal(tmem_put(t, p, &o, 4, page), 0);
	for (i = 0; i < 5; i++) {
		mkpage(page, i < 3 ? 10 + i : 17 + i, i < 3 ? PAGE : i == 3 ? 3600 : 1000);
		assert_int_equal(tmem_get(t, p, &o, i, got), 0);
		assert_memory_equal(page, got, PAGE);
	}
	zcache_get_stats(z, &s);
	assert_int_equal(s.raw_pages, 4);
	assert_int_equal(s.raw_puts, 4);
	assert_int_equal(s.refused_poor, 1); /* the plain pool's */
	/* a duplicate put of a compressible page over a raw one frees the frame */
	mkpage(page, 22, 500);
	assert_int_equal(tmem_put(t, p, &o, 0, page), 0);
	zcache_get_stats(z, &s);
	assert_int_equal(s.raw_pages, 3);
	assert_int_equal(tmem_flush_page(t, p, &o, 0), 0);
	assert_int_equal(tmem_flush_page(t, p, &o, 4), 0);

	/* to a peer and back: the oldest block is a raw page's frame */
	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	n = remotify_one(z, true, 5, saved, lens, idx);
	assert_int_equal(n, 1);
	assert_int_equal(lens[0], PAGE);
	zcache_get_stats(z, &s);
	assert_int_equal(s.raw_pages, 2);
	assert_int_equal(s.remote_pages, 1);
	assert_int_equal(tmem_get_ex(t, p, &o, idx[0], got, &pampd), -EREMOTE);
	{
		struct tmem_handle h = { (uint32_t)p, o, idx[0] };
		struct replica_set rs;

		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		assert_int_equal(rs.len, PAGE);
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, false, 0, saved[0],
							  lens[0], got, &home),
				 0);
		mkpage(page, 10 + idx[0], PAGE);
		assert_memory_equal(page, got, PAGE);
		assert_true(home);
	}
	zcache_get_stats(z, &s);
	assert_int_equal(s.raw_pages, 3);
	assert_int_equal(tmem_get(t, p, &o, idx[0], got), 0);
	assert_memory_equal(page, got, PAGE);
	assert_int_equal(tmem_pool_destroy(t, p), 0);
	zcache_get_stats(z, &s);
	assert_int_equal(s.raw_pages, 0);
	assert_int_equal(s.frames, 0);
	zcache_destroy(z);
}


static void test_remote_flush_object_and_pool(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	unsigned char page[PAGE];
	unsigned lens[ZCACHE_OUT_MAX], i;
	uint32_t idx[ZCACHE_OUT_MAX];
	struct tmem_oid o = { { 5, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	/* two pages to node 2, two to node 7 (whatever a frame holds) */
	for (i = 0; i < 4; i++) {
		mkpage(page, i, 1000);
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
		if (i == 1)
			assert_int_equal(remotify_one(z, true, 2, saved, lens, idx), 2);
	}
	assert_int_equal(remotify_one(z, true, 7, saved, lens, idx), 2);
	assert_int_equal(tmem_flush_object(t, p, &o), 0);
	assert_int_equal(coll.page_flushes, 0); /* one message a node, not a page */
	assert_int_equal(coll.object_flushes, 1);
	assert_int_equal(coll.last_nodes, (1u << 1) | (1u << 6));
	/* a pool destroy tells the nodes once */
	for (i = 0; i < 2; i++) {
		mkpage(page, i, 1000);
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
	}
	remotify_one(z, true, 3, saved, lens, idx);
	assert_int_equal(tmem_pool_destroy(t, p), 0);
	assert_int_equal(coll.pool_flushes, 1);
	assert_int_equal(coll.last_nodes, 1u << 2);
	zcache_destroy(z);
}

static void test_remote_dead_node(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	unsigned char page[PAGE], got[PAGE];
	unsigned lens[ZCACHE_OUT_MAX], i;
	uint32_t idx[ZCACHE_OUT_MAX];
	struct tmem_oid o = { { 5, 0, 0 } };
	int pp = tmem_pool_new(t, TMEM_PERSISTENT), pe = tmem_pool_new(t, TMEM_SHARED);

	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	mkpage(page, 1, 1000);
	assert_int_equal(tmem_put(t, pp, &o, 1, page), 0);
	remotify_one(z, true, 2, saved, lens, idx);
	assert_int_equal(tmem_put(t, pe, &o, 1, page), 0);
	remotify_one(z, false, 2, saved, lens, idx);
	coll.alive = 0;
	for (i = 0; i < 2; i++) {
		assert_int_equal(tmem_get(t, pp, &o, 1, got), -EIO);    /* persistent: lost */
	}
	assert_int_equal(tmem_get(t, pe, &o, 1, got), -ENOENT);     /* ephemeral: a miss */
	coll.alive = 1;
	assert_int_equal(tmem_get(t, pe, &o, 1, got), -ENOENT);     /* and stays one */
	zcache_destroy(z);
}

/* A page rewritten while its frame was in flight: the commit says stale. */
static void test_remotify_stale(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	static struct zcache_out out;
	struct zcache_stats s;
	unsigned char page[PAGE], got[PAGE];
	struct tmem_oid o = { { 5, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	zcache_set_remote(z, &c_ops, NULL);
	mkpage(page, 1, 1000);
	assert_int_equal(tmem_put(t, p, &o, 1, page), 0);
	assert_int_equal(zcache_remotify_take(z, true, &out), 0);
	mkpage(page, 2, 1000);
	assert_int_equal(tmem_put(t, p, &o, 1, page), 0); /* rewritten meanwhile */
	{
		struct replica_set r = { .n = 1, .node = { 3 }, .epoch = { 3 }, .len = out.p[0].len,
					 .checksum = out.p[0].checksum };

		assert_int_equal(zcache_remotify_commit(z, &out, 0, &r), -ENOENT);
	}
	zcache_remotify_done(z, &out);
	assert_int_equal(tmem_get(t, p, &o, 1, got), 0);
	assert_memory_equal(page, got, PAGE); /* the new page, never the old */
	zcache_get_stats(z, &s);
	assert_int_equal(s.remotify_stale, 1);
	assert_int_equal(s.stored_pages, 1);
	assert_true(s.frames >= 1); /* a zbud frame, or a zdense block of 1..4 frames */
	zcache_destroy(z);
}

/*
 * Pages with two copies: a get goes remote while either holder lives and is
 * lost (-EIO) only when both are dead; a copy moves to another node only
 * under the descriptor it was read with; a flush tells every holder.
 */
static void test_replicated_pages(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	static struct zcache_out out;
	struct zcache_stats s;
	struct replica_set rs;
	unsigned char page[PAGE], got[PAGE];
	struct tmem_oid o = { { 9, 0, 0 } };
	struct tmem_handle h;
	uint64_t pampd, now;
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	unsigned i;

	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	for (i = 0; i < 2; i++) {
		mkpage(page, i, 1000);
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
	}
	assert_int_equal(zcache_remotify_take(z, true, &out), 0);
	for (i = 0; i < out.n; i++) {
		struct replica_set r = { .n = 2, .node = { 2, 5 }, .epoch = { 3, 3 },
					 .len = out.p[i].len, .checksum = out.p[i].checksum };

		assert_int_equal(zcache_remotify_commit(z, &out, i, &r), 0);
	}
	zcache_remotify_done(z, &out);
	zcache_get_stats(z, &s);
	assert_int_equal(s.replica_records, 2);
	assert_int_equal(s.remote_pages, 2);
	assert_int_equal(s.frames, 0);

	assert_int_equal(tmem_get_ex(t, p, &o, 0, got, &pampd), -EREMOTE);
	assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
	assert_int_equal(rs.n, 2);
	assert_true((rs.node[0] == 2 && rs.node[1] == 5));
	coll.dead = 1ull << 1; /* node 2 dies: node 5 still has it */
	assert_int_equal(tmem_get_ex(t, p, &o, 0, got, &pampd), -EREMOTE);
	coll.dead |= 1ull << 4; /* node 5 too: lost */
	assert_int_equal(tmem_get_ex(t, p, &o, 0, got, &pampd), -EIO);
	coll.dead = 1ull << 1;

	/* re-replication: node 2's copy is made again on node 6 */
	h = (struct tmem_handle){ (uint32_t)p, o, 0 };
	assert_int_equal(tmem_get_ex(t, p, &o, 0, got, &pampd), -EREMOTE);
	assert_int_equal(zcache_remote_move(z, &h, pampd, 2, 6, 3, &now), 0);
	assert_true(now != pampd);
	assert_int_equal(zcache_remote_holders(z, pampd, &rs), -ENOENT); /* the old id is stale */
	assert_int_equal(zcache_remote_move(z, &h, pampd, 2, 7, 3, NULL), -ENOENT);
	assert_int_equal(zcache_remote_holders(z, now, &rs), 0);
	assert_true((rs.node[0] == 6 && rs.node[1] == 5) || (rs.node[0] == 5 && rs.node[1] == 6));
	assert_int_equal(zcache_remote_move(z, &h, now, 5, 6, 3, NULL), -EEXIST);
	coll.dead = 1ull << 4; /* node 5 dies now: node 6 has it */
	assert_int_equal(tmem_get_ex(t, p, &o, 0, got, &pampd), -EREMOTE);
	assert_int_equal(pampd, now);

	/* a flush tells both holders, and frees the record */
	assert_int_equal(tmem_flush_page(t, p, &o, 0), 0);
	assert_int_equal(coll.page_flushes, 2);
	assert_int_equal(coll.flushed, (1ull << 5) | (1ull << 4));
	zcache_get_stats(z, &s);
	assert_int_equal(s.replica_records, 1);
	/* an object flush names every node any of its pages ever used */
	assert_int_equal(tmem_flush_object(t, p, &o), 0);
	assert_int_equal(coll.last_nodes & ((1ull << 1) | (1ull << 4)), (1ull << 1) | (1ull << 4));
	zcache_get_stats(z, &s);
	assert_int_equal(s.replica_records, 0);
	assert_int_equal(s.remote_pages, 0);
	zcache_destroy(z);
}

/*
 * A frame holding many pages (a zdense block of small pages; zbud's frame
 * holds two) goes out whole, its pages spread over several peers, and every
 * page comes back through repatriate, right to the byte.
 */
static void test_remotify_many_pages_many_peers(void **state)
{
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	static struct zcache_out out;
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	struct zcache_stats s;
	unsigned char page[PAGE], got[PAGE];
	struct tmem_oid o = { { 11, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	unsigned i, n, home_count = 0;
	uint8_t node_of[40] = { 0 };

	memset(&coll, 0, sizeof(coll));
	coll.alive = 1;
	zcache_set_remote(z, &c_ops, NULL);
	for (i = 0; i < 40; i++) {
		mkpage(page, 500 + i, 150); /* ~160 bytes compressed */
		assert_int_equal(tmem_put(t, p, &o, i, page), 0);
	}
	assert_int_equal(zcache_remotify_take(z, true, &out), 0);
	n = out.n;
	assert_int_equal(n, alloc_kind == ZALLOC_ZBUD ? 2u : 40u);
	zcache_get_stats(z, &s);
	assert_int_equal(s.zombies, 1);
	for (i = 0; i < n; i++) {
		struct replica_set r = { .n = 1, .node = { (uint8_t)(2 + i % 3) }, .epoch = { 3 },
					 .len = out.p[i].len, .checksum = out.p[i].checksum };

		assert_true(out.p[i].resolved);
		memcpy(saved[out.p[i].h.index], out.p[i].data, out.p[i].len);
		node_of[out.p[i].h.index] = r.node[0];
		assert_int_equal(zcache_remotify_commit(z, &out, i, &r), 0);
	}
	zcache_remotify_done(z, &out);
	zcache_get_stats(z, &s);
	assert_int_equal(s.remote_pages, n);
	assert_int_equal(s.zombies, 0);
	assert_int_equal(s.stored_pages, 40 - n);
	for (i = 0; i < 40; i++) {
		struct tmem_handle h = { (uint32_t)p, o, i };
		struct replica_set rs;
		uint64_t pampd;
		bool home;
		int r = tmem_get_ex(t, p, &o, i, got, &pampd);

		mkpage(page, 500 + i, 150);
		if (r == 0) {
			assert_memory_equal(page, got, PAGE);
			continue;
		}
		assert_int_equal(r, -EREMOTE);
		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		assert_int_equal(rs.node[0], node_of[i]);
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, false, 0, saved[i],
							  rs.len, got, &home),
				 0);
		assert_memory_equal(page, got, PAGE);
		home_count += home;
	}
	assert_int_equal(home_count, n); /* the tier has room: all brought home */
	zcache_get_stats(z, &s);
	assert_int_equal(s.remote_pages, 0);
	assert_int_equal(s.stored_pages, 40);
	assert_int_equal(s.bad_handles, 0);
	zcache_destroy(z);
}

/* Frames are reused: filling, emptying and filling again faults nothing new. */
static void test_frames_reused(void **state)
{
	struct zcache *z = mk(4);
	struct tmem *t = zcache_tmem(z);
	struct zcache_stats s;
	unsigned char page[PAGE];
	struct tmem_oid o = { { 12, 0, 0 } };
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	uint64_t touched;
	unsigned round, i;

	for (round = 0; round < 3; round++) {
		for (i = 0; i < 1000; i++) {
			mkpage(page, i, 300 + i % 900);
			assert_int_equal(tmem_put(t, p, &o, i, page), 0);
		}
		zcache_get_stats(z, &s);
		if (round == 0)
			touched = s.frames_touched;
		assert_int_equal(s.frames_touched, touched);
		assert_true(s.frames <= s.frames_touched);
		assert_int_equal(tmem_flush_object(t, p, &o), 0);
		zcache_get_stats(z, &s);
		assert_int_equal(s.frames, 0);
		assert_int_equal(s.stored_pages, 0);
	}
	zcache_destroy(z);
}

/* ---- stripe pages (ec_layout = stripes), with a fake stripe table ------------ */

static struct {
	int holder_calls, kills;
	uint64_t last_id;
	unsigned last_slot;
	int lost; /* the stripe_holder op answers -ENOENT */
} stc;

static int s_holder(void *arg, uint64_t id, unsigned slot, struct replica_set *s)
{
	(void)arg;
	stc.holder_calls++;
	stc.last_id = id;
	stc.last_slot = slot;
	if (stc.lost)
		return -ENOENT;
	memset(s, 0, sizeof(*s));
	s->n = 1;
	s->node[0] = 9;
	s->epoch[0] = 3;
	s->len = 1;
	s->stripe = id;
	s->slot = slot;
	return 0;
}

static void s_kill(void *arg, uint64_t id, unsigned slot)
{
	(void)arg;
	stc.kills++;
	stc.last_id = id;
	stc.last_slot = slot;
}

static const struct zcache_remote_ops s_ops = { c_alive,	c_flush_page, c_flush_object,
						c_flush_pool,	s_holder,     s_kill };

/*
 * A stripe page's descriptor names its stripe (the whole id: number and a
 * 24-bit generation) and data slot; the holder is asked of the stripe
 * table, a death of the page is told to it (not as a flush of a copy), an
 * object's flush names no holder for it, and a snapshot carries the id and
 * slot. zcache_remotify_take_more adds a frame's pages to a taken one.
 */
static void test_remote_stripe_pages(void **state)
{
	struct zcache *z = mk(1);
	struct tmem *t = zcache_tmem(z);
	static struct zcache_out o;
	static unsigned char saved[ZCACHE_OUT_MAX][PAGE];
	unsigned char page[PAGE], got[PAGE];
	struct tmem_oid oid = { { 6, 0, 0 } };
	struct zcache_stats zs;
	unsigned i, n, first;
	uint64_t pampd, ids[ZCACHE_OUT_MAX];
	uint32_t idx[ZCACHE_OUT_MAX];
	unsigned lens[ZCACHE_OUT_MAX];
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	(void)state;
	memset(&coll, 0, sizeof(coll));
	memset(&stc, 0, sizeof(stc));
	coll.alive = 1;
	zcache_set_remote(z, &s_ops, NULL);
	for (i = 0; i < 200; i++) {
		mkpage(page, i, 1000);
		assert_int_equal(tmem_put(t, p, &oid, i, page), 0);
	}
	assert_int_equal(zcache_remotify_take(z, true, &o), 0);
	first = o.n;
	while (o.n < first + 4 && zcache_remotify_take_more(z, &o) == 0)
		;
	assert_true(o.n > first);
	assert_true(o.nmore >= 1);
	n = o.n;
	for (i = 0; i < n; i++) {
		/* generations at the top of their 24 bits, numbers beyond 16 bits */
		struct replica_set r = { .n = 1, .node = { 9 }, .epoch = { 3 }, .len = o.p[i].len,
					 .checksum = 77, .slot = i % 7 };

		r.stripe = ((uint64_t)((0xfffff0u + i) & 0xffffffu) << 32) | (0x12345u + i);
		ids[i] = r.stripe;
		assert_true(o.p[i].resolved);
		memcpy(saved[i], o.p[i].data, o.p[i].len);
		lens[i] = o.p[i].len;
		idx[i] = o.p[i].h.index;
		assert_int_equal(zcache_remotify_commit(z, &o, i, &r), 0);
	}
	zcache_remotify_done(z, &o);
	zcache_get_stats(z, &zs);
	assert_int_equal(zs.remote_pages, n);
	for (i = 0; i < n; i++) {
		struct replica_set rs;
		struct zcache_page_image pi;

		assert_int_equal(tmem_get_ex(t, p, &oid, idx[i], got, &pampd), -EREMOTE);
		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		assert_int_equal(stc.last_id, ids[i]);
		assert_int_equal(stc.last_slot, i % 7);
		assert_int_equal(rs.stripe, ids[i]);
		assert_int_equal(zcache_page_export(z, pampd, &pi), 0);
		assert_int_equal(pi.kind, ZCACHE_IMG_STRIPE);
		assert_int_equal(pi.set.stripe, ids[i]);
		assert_int_equal(pi.set.slot, i % 7);
	}
	/* page 0 brought home: its slot dies in its stripe, no copy is flushed */
	{
		struct tmem_handle h = { (uint32_t)p, oid, idx[0] };
		struct replica_set rs;
		bool home;

		assert_int_equal(tmem_get_ex(t, p, &oid, idx[0], got, &pampd), -EREMOTE);
		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		rs.len = lens[0];
		rs.checksum = zcache_checksum(saved[0], lens[0]); /* not sealed here */
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, false, 0, saved[0],
							  lens[0], got, &home),
				 0);
		assert_true(home);
		assert_int_equal(stc.kills, 1);
		assert_int_equal(stc.last_id, ids[0]);
		assert_int_equal(stc.last_slot, 0);
		assert_int_equal(coll.page_flushes, 0);
	}
	/* page 1 flushed: its slot dies */
	assert_int_equal(tmem_flush_page(t, p, &oid, idx[1]), 0);
	assert_int_equal(stc.kills, 2);
	assert_int_equal(stc.last_id, ids[1]);
	assert_int_equal(stc.last_slot, 1 % 7);
	assert_int_equal(coll.page_flushes, 0);
	/* a stripe that is gone: its page reads as lost */
	stc.lost = 1;
	assert_int_equal(tmem_get(t, p, &oid, idx[2], got), -EIO);
	stc.lost = 0;
	/* a compaction's read (ZCACHE_FIN_COMPACT, node/remote/compact.c) comes home
	 * below the compact limit, where another read above the home limit does not */
	{
		struct tmem_handle h = { (uint32_t)p, oid, idx[3] };
		struct replica_set rs;
		uint64_t sid;
		unsigned sslot;
		bool home;

		assert_true(n > 3);
		assert_int_equal(tmem_get_ex(t, p, &oid, idx[3], got, &pampd), -EREMOTE);
		assert_true(zcache_pampd_stripe(pampd, &sid, &sslot));
		assert_int_equal(sid, ids[3]);
		assert_int_equal(sslot, 3 % 7);
		assert_false(zcache_pampd_stripe(zcache_replica_pampd(5), &sid, &sslot));
		assert_int_equal(zcache_remote_holders(z, pampd, &rs), 0);
		rs.len = lens[3];
		rs.checksum = zcache_checksum(saved[3], lens[3]);
		mkpage(page, idx[3], 1000);
		zcache_set_home_limit(z, 0);
		zcache_set_compact_limit(z, 0);
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, ZCACHE_FIN_COMPACT, 0,
							  saved[3], lens[3], got, &home),
				 0);
		assert_false(home); /* the tier is over both limits */
		assert_memory_equal(got, page, PAGE);
		zcache_set_compact_limit(z, 1u << 20);
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, 0, 0, saved[3], lens[3],
							  got, &home),
				 0);
		assert_false(home); /* a plain read: over the home limit */
		assert_int_equal(stc.kills, 2);
		assert_int_equal(zcache_repatriate_finish(z, &h, pampd, &rs, ZCACHE_FIN_COMPACT, 0,
							  saved[3], lens[3], got, &home),
				 0);
		assert_true(home);
		assert_int_equal(stc.kills, 3); /* its slot dies in its stripe */
		assert_int_equal(stc.last_id, ids[3]);
		assert_int_equal(stc.last_slot, 3 % 7);
		assert_int_equal(tmem_get(t, p, &oid, idx[3], got), 0); /* local now */
		assert_memory_equal(got, page, PAGE);
	}
	/* the object flushed: every remote page's slot dies; no holder is told of the object */
	assert_int_equal(tmem_flush_object(t, p, &oid), 0);
	assert_int_equal(stc.kills, (int)n);
	assert_int_equal(coll.last_nodes, 0);
	zcache_get_stats(z, &zs);
	assert_int_equal(zs.remote_pages, 0);
	zcache_destroy(z);
}

static int run(const char *group)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_remote_round_trip),
		cmocka_unit_test(test_remote_stripe_pages),
		cmocka_unit_test(test_remote_flush_object_and_pool),
		cmocka_unit_test(test_remote_dead_node),
		cmocka_unit_test(test_remotify_stale),
		cmocka_unit_test(test_replicated_pages),
		cmocka_unit_test(test_remotify_many_pages_many_peers),
		cmocka_unit_test(test_frames_reused),
		cmocka_unit_test(test_keep_all_raw),
	};

	return cmocka_run_group_tests_name(group, tests, NULL, NULL);
}

int main(void)
{
	return zcache_fixture_main("zcache remote", run);
}
