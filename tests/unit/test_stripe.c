/*
 * test_stripe.c - stripes of K pages (node/remote/stripe.c) and the erasure
 * calls they stand on (erasure_encode_parity, erasure_rebuild_frag): full and
 * short stripes of blobs of different lengths give every slot back from every
 * pattern of up to M losses; the table's ids go stale on remove and reuse,
 * kill counts dead bytes until the stripe is empty, move and node_gone keep
 * the degraded count, the walk sees every stripe and the stats add up; bad
 * inputs are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/remote/erasure.h"
#include "node/remote/stripe.h"

#define FMAX ERASURE_STRIPE_FRAG_MAX

static const unsigned codes[][2] = {{2, 1}, {4, 2}, {3, 3}, {6, 2}};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

static void fill(uint8_t *p, size_t len, unsigned *seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)rand_r(seed);
}

/* ---- erasure per fragment ------------------------------------------------ */

/* Parity of K fragments of flen; every set of K rebuilds every fragment. */
static void check_frag_code(unsigned k, unsigned m, size_t flen)
{
	struct erasure *e = erasure_create(k, m);
	static uint8_t frags[ERASURE_MAX][FMAX], again[FMAX];
	static uint8_t whole[ERASURE_DATA_MAX], cut[ERASURE_MAX * FMAX];
	const uint8_t *data[ERASURE_MAX];
	uint8_t *parity[ERASURE_MAX];
	unsigned n = k + m, mask, s, seed = (unsigned)(k * 1000 + m * 100 + flen);

	assert_non_null(e);
	for (s = 0; s < n; s++) {
		if (s < k)
			fill(frags[s], flen, &seed);
		else
			memset(frags[s], 0xa5, flen);
		if (s < k)
			data[s] = frags[s];
		else
			parity[s - k] = frags[s];
	}
	erasure_encode_parity(e, data, flen, parity);
	/* the same parity as the bytes cut in K, where those fit */
	if (k * flen <= ERASURE_DATA_MAX) {
		for (s = 0; s < k; s++)
			memcpy(whole + s * flen, frags[s], flen);
		erasure_encode(e, whole, k * flen, cut);
		for (s = k; s < n; s++)
			assert_memory_equal(cut + s * flen, frags[s], flen);
	}
	for (mask = 0; mask < (1u << n); mask++) {
		uint8_t idx[ERASURE_MAX];
		const uint8_t *have[ERASURE_MAX];
		unsigned c = 0;

		if ((unsigned)__builtin_popcount(mask) != k)
			continue;
		/* given backwards: the order of the K does not matter */
		for (s = n; s-- > 0;)
			if (mask & (1u << s)) {
				idx[c] = (uint8_t)s;
				have[c++] = frags[s];
			}
		for (s = 0; s < n; s++) {
			memset(again, 0x5a, flen);
			assert_int_equal(erasure_rebuild_frag(e, idx, have, flen, s, again), 0);
			assert_memory_equal(again, frags[s], flen);
		}
	}
	erasure_destroy(e);
}

static void test_frag_every_loss_pattern(void **state)
{
	static const size_t flens[] = {1, 31, 1000, 1040, 2080, 4096 + 24, FMAX};
	size_t c, l;

	(void)state;
	for (c = 0; c < NCODES; c++)
		for (l = 0; l < sizeof(flens) / sizeof(flens[0]); l++)
			check_frag_code(codes[c][0], codes[c][1], flens[l]);
	check_frag_code(4, 4, FMAX);
}

static void test_frag_bad(void **state)
{
	struct erasure *e = erasure_create(4, 2);
	static uint8_t f[6][FMAX], out[FMAX];
	const uint8_t *have[4] = {f[0], f[1], f[2], f[3]};
	uint8_t ok[4] = {0, 1, 4, 5}, twice[4] = {0, 1, 1, 2}, beyond[4] = {0, 1, 2, 6};

	(void)state;
	assert_non_null(e);
	assert_int_equal(erasure_rebuild_frag(e, ok, have, FMAX, 2, out), 0);
	assert_int_equal(erasure_rebuild_frag(e, ok, have, 0, 2, out), -EINVAL);
	assert_int_equal(erasure_rebuild_frag(e, ok, have, FMAX + 1, 2, out), -EINVAL);
	assert_int_equal(erasure_rebuild_frag(e, ok, have, 10, 6, out), -EINVAL);
	assert_int_equal(erasure_rebuild_frag(e, twice, have, 10, 3, out), -EINVAL);
	assert_int_equal(erasure_rebuild_frag(e, beyond, have, 10, 3, out), -EINVAL);
	erasure_destroy(e);
}

/* ---- the builder and a slot made again ------------------------------------ */

/*
 * A stripe of pages blobs of lens (a short one below k): the fragments closed
 * are the blobs, zeros, and parity encoded independently; stripe_rebuild_slot
 * makes every slot again from the first K left after every pattern of up to
 * M losses, the data slots given unpadded and the empty ones NULL or zeros.
 */
static void check_stripe(struct stripe_builder *b, const struct erasure *e, unsigned pages,
			 const size_t *lens)
{
	static uint8_t blob[ERASURE_MAX][FMAX], pad[ERASURE_MAX][FMAX], par[ERASURE_MAX][FMAX];
	static uint8_t out[FMAX];
	const uint8_t *padded[ERASURE_MAX];
	uint8_t *parity[ERASURE_MAX];
	unsigned k = erasure_k(e), m = erasure_m(e), n = k + m, j, s, lost, L = 0;
	unsigned seed = (unsigned)(k * 7919 + pages * 31 + lens[0]);
	struct stripe_frags f;
	struct stripe_rec r;

	memset(&r, 0, sizeof(r));
	r.k = k;
	r.m = m;
	for (j = 0; j < pages; j++) {
		fill(blob[j], lens[j], &seed);
		assert_int_equal(stripe_builder_add(b, blob[j], lens[j]), (int)j);
		assert_int_equal(stripe_builder_count(b), j + 1);
		r.lens[j] = (unsigned)lens[j];
		r.live |= 1u << j;
		if (lens[j] > L)
			L = (unsigned)lens[j];
	}
	if (pages == k)
		assert_int_equal(stripe_builder_add(b, blob[0], 1), -EBUSY);
	r.L = L;
	for (s = 0; s < n; s++)
		r.node[s] = (uint8_t)(s < pages || s >= k ? s + 1 : 0);
	assert_int_equal(stripe_builder_close(b, &f), 0);
	assert_int_equal(stripe_builder_count(b), 0);
	assert_int_equal(f.k, k);
	assert_int_equal(f.m, m);
	assert_int_equal(f.pages, pages);
	assert_int_equal(f.L, L);
	/* the data: each blob as added, then zeros to L; an empty slot all zeros */
	for (j = 0; j < k; j++) {
		size_t len = j < pages ? lens[j] : 0;

		assert_int_equal(f.lens[j], len);
		memset(pad[j], 0, L);
		memcpy(pad[j], blob[j], len);
		assert_memory_equal(f.data[j], pad[j], L);
		padded[j] = pad[j];
	}
	for (j = 0; j < m; j++)
		parity[j] = par[j];
	erasure_encode_parity(e, padded, L, parity);
	for (j = 0; j < m; j++)
		assert_memory_equal(f.parity[j], par[j], L);
	for (lost = 0; lost < (1u << n); lost++) {
		uint8_t idx[ERASURE_MAX];
		const uint8_t *have[ERASURE_MAX];
		unsigned c = 0;

		if ((unsigned)__builtin_popcount(lost) > m)
			continue;
		for (s = 0; s < n && c < k; s++) {
			if (lost & (1u << s))
				continue;
			idx[c] = (uint8_t)s;
			if (s >= k)
				have[c] = par[s - k];
			else if (s < pages)
				have[c] = blob[s]; /* the caller's, unpadded */
			else
				have[c] = (lost & 1) ? NULL : pad[s]; /* either way: zeros */
			c++;
		}
		for (s = 0; s < n; s++) {
			size_t got = 12345;

			memset(out, 0x5a, sizeof(out));
			assert_int_equal(stripe_rebuild_slot(e, &r, idx, have, s, out, &got), 0);
			if (s >= k) {
				assert_int_equal(got, L);
				assert_memory_equal(out, par[s - k], L);
			} else {
				assert_int_equal(got, s < pages ? lens[s] : 0);
				assert_memory_equal(out, blob[s], got);
			}
		}
	}
}

static void test_builder_every_loss_pattern(void **state)
{
	static const size_t equal[ERASURE_MAX] = {777, 777, 777, 777, 777, 777, 777, 777};
	static const size_t ones[ERASURE_MAX] = {1, 1, 1, 1, 1, 1, 1, 1};
	static const size_t mixed[ERASURE_MAX] = {1, FMAX, 2, 4095, 1, 33, FMAX, 1};
	size_t randl[ERASURE_MAX];
	unsigned c, pages, j, seed = 42;

	(void)state;
	for (c = 0; c < NCODES; c++) {
		struct erasure *e = erasure_create(codes[c][0], codes[c][1]);
		struct stripe_builder *b = stripe_builder_create(e);

		assert_non_null(b);
		for (pages = 1; pages <= codes[c][0]; pages++) {
			for (j = 0; j < ERASURE_MAX; j++)
				randl[j] = 1 + (size_t)rand_r(&seed) % FMAX;
			check_stripe(b, e, pages, randl);
			check_stripe(b, e, pages, equal);
			check_stripe(b, e, pages, ones);
			check_stripe(b, e, pages, mixed);
		}
		stripe_builder_destroy(b);
		erasure_destroy(e);
	}
}

static void test_builder_bad(void **state)
{
	struct erasure *e = erasure_create(2, 1);
	struct stripe_builder *b = stripe_builder_create(e);
	static uint8_t blob[FMAX + 1];
	struct stripe_frags f;

	(void)state;
	assert_null(stripe_builder_create(NULL));
	stripe_builder_destroy(NULL);
	assert_non_null(b);
	assert_int_equal(stripe_builder_close(b, &f), -ENOENT);
	assert_int_equal(stripe_builder_add(b, blob, 0), -EINVAL);
	assert_int_equal(stripe_builder_add(b, blob, FMAX + 1), -EINVAL);
	assert_int_equal(stripe_builder_add(b, NULL, 10), -EINVAL);
	assert_int_equal(stripe_builder_count(b), 0);
	/* a reset drops the open stripe */
	assert_int_equal(stripe_builder_add(b, blob, 10), 0);
	assert_int_equal(stripe_builder_add(b, blob, 20), 1);
	assert_int_equal(stripe_builder_add(b, blob, 20), -EBUSY);
	stripe_builder_reset(b);
	assert_int_equal(stripe_builder_count(b), 0);
	assert_int_equal(stripe_builder_close(b, &f), -ENOENT);
	/* a close opens the next stripe; a short one's empty slot forgets the last one's */
	assert_int_equal(stripe_builder_add(b, blob, 10), 0);
	assert_int_equal(stripe_builder_add(b, blob, 30), 1);
	assert_int_equal(stripe_builder_close(b, &f), 0);
	assert_int_equal(stripe_builder_add(b, blob, 5), 0);
	assert_int_equal(stripe_builder_close(b, &f), 0);
	assert_int_equal(f.pages, 1);
	assert_int_equal(f.L, 5);
	assert_int_equal(f.lens[1], 0);
	stripe_builder_destroy(b);
	erasure_destroy(e);
}

static void test_rebuild_slot_bad(void **state)
{
	struct erasure *e = erasure_create(2, 1), *e3 = erasure_create(3, 1);
	static uint8_t a[FMAX], p[FMAX], out[FMAX];
	struct stripe_rec r = {
	    .k = 2, .m = 1, .node = {1, 0, 3}, .lens = {100, 0}, .L = 100, .live = 1};
	const uint8_t *have[2] = {a, p}, *none[2] = {a, NULL}, *zero[2] = {NULL, p};
	uint8_t ok[2] = {0, 2}, twice[2] = {0, 0}, beyond[2] = {0, 3}, empty[2] = {1, 2};
	size_t got;

	(void)state;
	assert_int_equal(stripe_rebuild_slot(e, &r, ok, have, 1, out, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(stripe_rebuild_slot(e, &r, empty, zero, 0, out, &got), 0);
	assert_int_equal(got, 100);
	assert_int_equal(stripe_rebuild_slot(e3, &r, ok, have, 0, out, &got), -EINVAL);
	assert_int_equal(stripe_rebuild_slot(e, &r, ok, have, 3, out, &got), -EINVAL);
	assert_int_equal(stripe_rebuild_slot(e, &r, ok, none, 0, out, &got), -EINVAL);
	assert_int_equal(stripe_rebuild_slot(e, &r, twice, have, 1, out, &got), -EINVAL);
	assert_int_equal(stripe_rebuild_slot(e, &r, twice, have, 2, out, &got), -EINVAL);
	assert_int_equal(stripe_rebuild_slot(e, &r, beyond, have, 2, out, &got), -EINVAL);
	r.L = FMAX + 1;
	assert_int_equal(stripe_rebuild_slot(e, &r, ok, have, 2, out, &got), -EINVAL);
	r.L = 50; /* shorter than a blob */
	assert_int_equal(stripe_rebuild_slot(e, &r, ok, have, 2, out, &got), -EINVAL);
	erasure_destroy(e);
	erasure_destroy(e3);
}

/* ---- the table ------------------------------------------------------------- */

/* A stripe of k + m on nodes base, base + 1, ... (none for an empty slot), every blob live. */
static struct stripe_rec rec_make(unsigned k, unsigned m, const unsigned *lens, unsigned base)
{
	struct stripe_rec r;
	unsigned s;

	memset(&r, 0, sizeof(r));
	r.k = k;
	r.m = m;
	for (s = 0; s < k + m; s++) {
		if (s < k) {
			r.lens[s] = lens[s];
			if (lens[s] > r.L)
				r.L = lens[s];
			if (!lens[s])
				continue;
			r.live |= 1u << s;
		}
		r.node[s] = (uint8_t)(base + s);
		r.epoch[s] = (uint8_t)(s + 10);
		r.version[s] = 1000u * base + s;
	}
	return r;
}

static void stats_are(struct stripe_table *t, uint64_t stripes, uint64_t live, uint64_t dead,
		      uint64_t dead_bytes, uint64_t parity_bytes, uint64_t degraded)
{
	struct stripe_stats st;

	stripe_stats(t, &st);
	assert_int_equal(st.stripes, stripes);
	assert_int_equal(st.live_pages, live);
	assert_int_equal(st.dead_pages, dead);
	assert_int_equal(st.dead_bytes, dead_bytes);
	assert_int_equal(st.parity_bytes, parity_bytes);
	assert_int_equal(st.degraded, degraded);
	assert_true(st.bytes >= sizeof(struct stripe_rec));
}

static void test_table_add_kill_remove(void **state)
{
	struct stripe_table *t = stripe_table_create();
	static const unsigned lens[] = {100, 200, 300, 0};
	struct stripe_rec r = rec_make(4, 2, lens, 1), got;
	uint64_t id, id2;
	bool empty = true;

	(void)state;
	assert_non_null(t);
	assert_int_equal(stripe_add(t, &r, &id), 0);
	assert_true(id != 0);
	assert_int_equal(id >> 56, 0);
	assert_int_equal(stripe_read(t, id, &got), 0);
	assert_memory_equal(&got, &r, sizeof(r));
	stats_are(t, 1, 3, 0, 0, 600, 0);
	assert_int_equal(stripe_kill(t, id, 3, &empty), -EINVAL); /* empty slot */
	assert_int_equal(stripe_kill(t, id, 4, &empty), -EINVAL); /* parity */
	assert_int_equal(stripe_kill(t, id, 1, &empty), 0);
	assert_false(empty);
	assert_int_equal(stripe_kill(t, id, 1, &empty), -EINVAL); /* dead already */
	stats_are(t, 1, 2, 1, 200, 600, 0);
	assert_int_equal(stripe_read(t, id, &got), 0);
	assert_int_equal(got.live, 5);
	assert_int_equal(stripe_kill(t, id, 0, NULL), 0);
	assert_int_equal(stripe_kill(t, id, 2, &empty), 0);
	assert_true(empty);
	stats_are(t, 1, 0, 3, 600, 600, 0);
	assert_int_equal(stripe_remove(t, id), 0);
	stats_are(t, 0, 0, 0, 0, 0, 0);
	assert_int_equal(stripe_read(t, id, &got), -ENOENT);
	assert_int_equal(stripe_kill(t, id, 0, &empty), -ENOENT);
	assert_int_equal(stripe_remove(t, id), -ENOENT);
	/* the entry again, under another id: the old one stays stale */
	assert_int_equal(stripe_add(t, &r, &id2), 0);
	assert_int_equal(stripe_number(id2), stripe_number(id));
	assert_true(id2 != id);
	assert_int_equal(stripe_read(t, id, &got), -ENOENT);
	assert_int_equal(stripe_kill(t, id, 0, &empty), -ENOENT);
	assert_int_equal(stripe_move(t, id, 0, 40, 1), -ENOENT);
	assert_int_equal(stripe_remove(t, id), -ENOENT);
	assert_int_equal(stripe_read(t, id2, &got), 0);
	/* ids never made */
	assert_int_equal(stripe_read(t, 0, &got), -ENOENT);
	assert_int_equal(stripe_read(t, id2 | (1ull << 56), &got), -ENOENT);
	assert_int_equal(stripe_read(t, id2 + 5000, &got), -ENOENT);
	assert_int_equal(stripe_read(t, id2 + 1, &got), -ENOENT); /* a free entry */
	stripe_table_destroy(t);
	stripe_table_destroy(NULL);
}

/*
 * A reserved id (the holders' key before the stripe is placed): not a stripe
 * until filled, freed by remove; a filled one reads back with its versions.
 * Restore (a warm restart) puts a stripe back under its old id, gone slots too.
 */
static void test_table_reserve_fill_restore(void **state)
{
	struct stripe_table *t = stripe_table_create(), *t2 = stripe_table_create();
	static const unsigned lens[] = {100, 200, 0};
	struct stripe_rec r = rec_make(3, 2, lens, 1), got, bad;
	uint64_t id, id2, id3;
	bool empty;

	(void)state;
	assert_non_null(t);
	assert_non_null(t2);
	assert_int_equal(stripe_reserve(t, &id), 0);
	assert_true(id && !(id >> 56));
	assert_int_equal(stripe_read(t, id, &got), -ENOENT);
	assert_int_equal(stripe_kill(t, id, 0, &empty), -ENOENT);
	assert_int_equal(stripe_move(t, id, 0, 40, 1), -ENOENT);
	assert_int_equal(stripe_node_gone(t, 1), 0);
	stats_are(t, 0, 0, 0, 0, 0, 0);
	/* a reserved entry is not handed out again */
	assert_int_equal(stripe_add(t, &r, &id2), 0);
	assert_true(stripe_number(id2) != stripe_number(id));
	bad = r;
	bad.L = 1; /* not the longest */
	assert_int_equal(stripe_fill(t, id, &bad), -EINVAL);
	assert_int_equal(stripe_fill(t, id, &r), 0);
	assert_int_equal(stripe_fill(t, id, &r), -ENOENT); /* filled already */
	assert_int_equal(stripe_read(t, id, &got), 0);
	assert_memory_equal(&got, &r, sizeof(r));
	assert_int_equal(got.version[4], 1004);
	stats_are(t, 2, 4, 0, 0, 2 * 400, 0);
	/* a reserved id that came to nothing */
	assert_int_equal(stripe_reserve(t, &id3), 0);
	assert_int_equal(stripe_remove(t, id3), 0);
	assert_int_equal(stripe_fill(t, id3, &r), -ENOENT);
	stats_are(t, 2, 4, 0, 0, 2 * 400, 0);

	/* restored elsewhere under the same ids, a slot gone with it */
	assert_int_equal(stripe_node_gone(t, 4), 2);
	assert_int_equal(stripe_read(t, id, &r), 0);
	assert_int_equal(r.gone, 1u << 3);
	assert_int_equal(stripe_restore(t2, id, &r), 0);
	assert_int_equal(stripe_restore(t2, id, &r), -EEXIST);
	assert_int_equal(stripe_read(t2, id, &got), 0);
	assert_int_equal(got.gone, 1u << 3);
	assert_int_equal(got.state, STRIPE_DEGRADED);
	assert_int_equal(got.version[0], r.version[0]);
	stats_are(t2, 1, 2, 0, 0, 400, 1);
	/* a far id grows the table; a bad record or id is refused */
	assert_int_equal(stripe_restore(t2, (5ull << 32) | 5000, &r), 0);
	assert_int_equal(stripe_read(t2, (5ull << 32) | 5000, &got), 0);
	assert_int_equal(stripe_read(t2, (6ull << 32) | 5000, &got), -ENOENT);
	assert_int_equal(stripe_restore(t2, 0, &r), -EINVAL);
	assert_int_equal(stripe_restore(t2, 1ull << 56 | 7, &r), -EINVAL);
	bad = r;
	bad.node[1] = bad.node[0];
	assert_int_equal(stripe_restore(t2, 9, &bad), -EINVAL);
	/* the entries restored around are still free and handed out */
	assert_int_equal(stripe_add(t2, &r, &id3), 0);
	assert_int_equal(stripe_read(t2, id3, &got), 0);
	stats_are(t2, 3, 6, 0, 0, 3 * 400, 2); /* the far one came back degraded too */
	stripe_table_destroy(t);
	stripe_table_destroy(t2);
}

static void test_table_move_and_node_gone(void **state)
{
	struct stripe_table *t = stripe_table_create();
	static const unsigned la[] = {10, 20}, lc[] = {5, 0, 7};
	struct stripe_rec a = rec_make(2, 1, la, 1), b = rec_make(2, 1, la, 4);
	struct stripe_rec c = rec_make(3, 2, lc, 3), got; /* nodes 3, -, 5, 6, 7 */
	uint64_t ia, ib, ic;

	(void)state;
	assert_int_equal(stripe_add(t, &a, &ia), 0);
	assert_int_equal(stripe_add(t, &b, &ib), 0);
	assert_int_equal(stripe_add(t, &c, &ic), 0);
	stats_are(t, 3, 6, 0, 0, 20 + 20 + 14, 0);
	/* moves: to a holder of the stripe, the slot's own included, is refused */
	assert_int_equal(stripe_move(t, ia, 0, 2, 1), -EEXIST);
	assert_int_equal(stripe_move(t, ia, 0, 1, 1), -EEXIST);
	assert_int_equal(stripe_move(t, ia, 0, 3, 1), -EEXIST);
	assert_int_equal(stripe_move(t, ia, 0, 0, 1), -EINVAL);
	assert_int_equal(stripe_move(t, ia, 0, 65, 1), -EINVAL);
	assert_int_equal(stripe_move(t, ia, 3, 9, 1), -EINVAL);
	assert_int_equal(stripe_move(t, ic, 1, 9, 1), -EINVAL); /* an empty slot */
	assert_int_equal(stripe_move(t, ia, 2, 9, 77), 0);
	assert_int_equal(stripe_read(t, ia, &got), 0);
	assert_int_equal(got.node[2], 9);
	assert_int_equal(got.epoch[2], 77);
	assert_int_equal(got.state, 0);
	/* a dead page's slot moves too */
	assert_int_equal(stripe_kill(t, ia, 0, NULL), 0);
	assert_int_equal(stripe_move(t, ia, 0, 1 + 63, 2), 0);
	assert_int_equal(stripe_move(t, ia, 0, 1, 3), 0);
	stats_are(t, 3, 5, 1, 10, 54, 0);

	/* node 5 holds slot 1 of b and slot 2 of c; node 3 slot 0 of c */
	assert_int_equal(stripe_node_gone(t, 5), 2);
	assert_int_equal(stripe_node_gone(t, 5), 0);
	stats_are(t, 3, 5, 1, 10, 54, 2);
	assert_int_equal(stripe_read(t, ib, &got), 0);
	assert_int_equal(got.state, STRIPE_DEGRADED);
	assert_int_equal(got.gone, 1u << 1);
	assert_int_equal(stripe_read(t, ia, &got), 0);
	assert_int_equal(got.state, 0);
	assert_int_equal(stripe_node_gone(t, 3), 1); /* c again: newly gone slot 0 */
	assert_int_equal(stripe_read(t, ic, &got), 0);
	assert_int_equal(got.gone, (1u << 0) | (1u << 2));
	assert_int_equal(stripe_node_gone(t, 0), 0);
	assert_int_equal(stripe_node_gone(t, 99), 0);
	assert_int_equal(stripe_node_gone(t, 60), 0);
	stats_are(t, 3, 5, 1, 10, 54, 2);
	/* the stripe is mended with its last gone slot */
	assert_int_equal(stripe_move(t, ic, 0, 20, 1), 0);
	stats_are(t, 3, 5, 1, 10, 54, 2);
	assert_int_equal(stripe_move(t, ic, 2, 21, 1), 0);
	stats_are(t, 3, 5, 1, 10, 54, 1);
	assert_int_equal(stripe_read(t, ic, &got), 0);
	assert_int_equal(got.state, 0);
	assert_int_equal(got.gone, 0);
	/* removing a degraded stripe takes it out of the count */
	assert_int_equal(stripe_remove(t, ib), 0);
	stats_are(t, 2, 3, 1, 10, 34, 0);
	stripe_table_destroy(t);
}

struct walk_sums {
	struct stripe_table *t;
	struct stripe_stats st;
	unsigned visits, stop_at;
	bool remove;
};

static int walk_fn(void *arg, uint64_t id, const struct stripe_rec *r)
{
	struct walk_sums *w = arg;
	struct stripe_rec got;
	unsigned j;

	assert_int_equal(stripe_read(w->t, id, &got), 0);
	assert_memory_equal(&got, r, sizeof(got));
	w->st.stripes++;
	w->st.parity_bytes += r->m * r->L;
	w->st.degraded += !!(r->state & STRIPE_DEGRADED);
	for (j = 0; j < r->k; j++) {
		if (r->live & (1u << j)) {
			w->st.live_pages++;
		} else if (r->lens[j]) {
			w->st.dead_pages++;
			w->st.dead_bytes += r->lens[j];
		}
	}
	if (w->remove)
		assert_int_equal(stripe_remove(w->t, id), 0);
	return ++w->visits == w->stop_at ? 7 : 0;
}

static void test_table_walk_and_stats(void **state)
{
	enum { N = 3000 }; /* past the first chunks of entries */
	struct stripe_table *t = stripe_table_create();
	static uint64_t ids[N];
	struct walk_sums w = {.t = t};
	struct stripe_stats st;
	unsigned i, j, seed = 7, alive = 0;

	(void)state;
	for (i = 0; i < N; i++) {
		unsigned k = codes[i % NCODES][0], m = codes[i % NCODES][1], lens[ERASURE_MAX];
		struct stripe_rec r;

		for (j = 0; j < k; j++)
			lens[j] =
			    j && rand_r(&seed) % 4 == 0 ? 0 : 1 + (unsigned)rand_r(&seed) % FMAX;
		r = rec_make(k, m, lens, 1 + i % 50);
		assert_int_equal(stripe_add(t, &r, &ids[i]), 0);
		for (j = 0; j < k; j++)
			if (lens[j] && rand_r(&seed) % 3 == 0)
				assert_int_equal(stripe_kill(t, ids[i], j, NULL), 0);
	}
	for (i = 0; i < N; i++) {
		if (i % 5 == 0)
			assert_int_equal(stripe_remove(t, ids[i]), 0);
		else
			alive++;
	}
	assert_true(stripe_node_gone(t, 17) > 0);
	assert_int_equal(stripe_walk(t, walk_fn, &w), 0);
	assert_int_equal(w.visits, alive);
	stripe_stats(t, &st);
	assert_int_equal(st.stripes, alive);
	assert_int_equal(st.live_pages, w.st.live_pages);
	assert_int_equal(st.dead_pages, w.st.dead_pages);
	assert_int_equal(st.dead_bytes, w.st.dead_bytes);
	assert_int_equal(st.parity_bytes, w.st.parity_bytes);
	assert_int_equal(st.degraded, w.st.degraded);
	assert_true(st.degraded > 0);
	/* a nonzero return stops the walk */
	memset(&w, 0, sizeof(w));
	w.t = t;
	w.stop_at = 5;
	assert_int_equal(stripe_walk(t, walk_fn, &w), 7);
	assert_int_equal(w.visits, 5);
	/* fn may call the table: remove every stripe */
	memset(&w, 0, sizeof(w));
	w.t = t;
	w.remove = true;
	assert_int_equal(stripe_walk(t, walk_fn, &w), 0);
	assert_int_equal(w.visits, alive);
	stats_are(t, 0, 0, 0, 0, 0, 0);
	stripe_table_destroy(t);
}

static void test_table_bad_records(void **state)
{
	struct stripe_table *t = stripe_table_create();
	static const unsigned lens[] = {100, 0, 50};
	const struct stripe_rec good = rec_make(3, 2, lens, 1); /* nodes 1, -, 3, 4, 5 */
	struct stripe_rec r;
	uint64_t id;

	(void)state;
	r = good;
	assert_int_equal(stripe_add(t, &r, &id), 0);
	assert_int_equal(stripe_add(t, NULL, &id), -EINVAL);
	assert_int_equal(stripe_add(t, &r, NULL), -EINVAL);
#define BAD(change)                                                                                \
	do {                                                                                       \
		r = good;                                                                          \
		change;                                                                            \
		assert_int_equal(stripe_add(t, &r, &id), -EINVAL);                                 \
	} while (0)
	BAD(r.k = 1);
	BAD(r.m = 0);
	BAD(r.m = 6);
	BAD(r.m = UINT32_MAX);
	BAD(r.lens[0] = FMAX + 1; r.L = FMAX + 1);
	BAD(r.L = 99);
	BAD(r.L = 101);
	BAD(r.lens[0] = 0; r.lens[2] = 0; r.L = 0; r.node[0] = 0; r.node[2] = 0; r.live = 0);
	BAD(r.live = 0);
	BAD(r.live |= 1u << 1); /* an empty slot */
	BAD(r.live |= 1u << 3); /* a parity slot */
	BAD(r.node[0] = 0);	/* a blob with no holder */
	BAD(r.node[1] = 9);	/* a holder for an empty slot */
	BAD(r.node[4] = 65);
	BAD(r.node[3] = 1); /* twice */
#undef BAD
	stats_are(t, 1, 2, 0, 0, 200, 0);
	stripe_table_destroy(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_frag_every_loss_pattern),
	    cmocka_unit_test(test_frag_bad),
	    cmocka_unit_test(test_builder_every_loss_pattern),
	    cmocka_unit_test(test_builder_bad),
	    cmocka_unit_test(test_rebuild_slot_bad),
	    cmocka_unit_test(test_table_add_kill_remove),
	    cmocka_unit_test(test_table_reserve_fill_restore),
	    cmocka_unit_test(test_table_move_and_node_gone),
	    cmocka_unit_test(test_table_walk_and_stats),
	    cmocka_unit_test(test_table_bad_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
