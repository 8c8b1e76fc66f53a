/*
 * test_tmem.c - the handle space and its coherency rules, over a fake data
 * side that keeps plain copies (so every rule is tested apart from zbud/LZO);
 * and the crash table tmem keeps (tmem/crashtab.h): its entries, its counts
 * of pages outside the tier, and incomplete pools.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmem/crashtab.h"
#include "tmem/tmem.h"

#define PAGE TMEM_PAGE_SIZE

/* A descriptor is a malloc'd copy; bit 0 set: a page "outside the tier" (ops->in_tier). */
#define FAKE_OUT 1u
#define FAKE_MEM(pampd) ((void *)(uintptr_t)((pampd) & ~(uint64_t)FAKE_OUT))

/* ---- a fake data side ---------------------------------------------------- */

struct fake {
	atomic_long live;        /* descriptors made and not freed */
	atomic_int refuse;       /* refuse puts with this -errno (0: accept) */
	atomic_int lose;         /* get_data answers -EIO */
	atomic_int out;          /* puts make pages outside the tier */
	atomic_int out_by_page;  /* ... when the page's first byte is odd */
	struct tmem *t;
	/* evict_in_create: replace() this ref from inside create (same thread) */
	int evict_in_create;
	struct tmem_ref evict_ref;
	uint64_t evict_expect;
	int evict_result;
};

static struct fake fk;
/* this thread's last create: its ref and descriptor */
static __thread struct tmem_ref last_ref;
static __thread uint64_t last_desc;

static int fake_create(void *ctx, unsigned flags, const void *page, struct tmem_ref ref, uint64_t *pampd)
{
	struct fake *f = ctx;
	unsigned char *copy;
	int r = atomic_load(&f->refuse);

	if (f->evict_in_create) {
		f->evict_result = tmem_replace(f->t, f->evict_ref, f->evict_expect, 0, true);
		if (f->evict_result == 0) {
			free(FAKE_MEM(f->evict_expect));
			atomic_fetch_sub(&f->live, 1);
		}
	}
	if (r)
		return r;
	copy = malloc(PAGE);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, page, PAGE);
	*pampd = (uint64_t)(uintptr_t)copy;
	if (atomic_load(&f->out) || (atomic_load(&f->out_by_page) && (copy[0] & 1)))
		*pampd |= FAKE_OUT;
	last_ref = ref;
	last_desc = *pampd;
	atomic_fetch_add(&f->live, 1);
	return 0;
}

static int fake_get(void *ctx, bool pers, uint64_t pampd, void *page)
{
	struct fake *f = ctx;

	if (atomic_load(&f->lose))
		return -EIO;
	memcpy(page, FAKE_MEM(pampd), PAGE);
	return 0;
}

static void fake_free(void *ctx, bool pers, uint64_t pampd, const struct tmem_handle *h, bool bulk)
{
	struct fake *f = ctx;

	free(FAKE_MEM(pampd));
	atomic_fetch_sub(&f->live, 1);
}

static bool fake_in_tier(uint64_t pampd)
{
	return !(pampd & FAKE_OUT);
}

static const struct tmem_pamops fake_ops = {
	.create = fake_create,
	.get_data = fake_get,
	.free = fake_free,
	.in_tier = fake_in_tier,
};

static int setup(void **state)
{
	memset(&fk, 0, sizeof(fk));
	fk.t = tmem_create(&fake_ops, &fk);
	*state = fk.t;
	return fk.t ? 0 : -1;
}

static int teardown(void **state)
{
	tmem_destroy(*state);
	/* every descriptor made was freed */
	return atomic_load(&fk.live) == 0 ? 0 : -1;
}

static const struct tmem_oid O1 = { { 1, 2, 3 } }, O2 = { { 4, 5, 6 } };

static void fill(unsigned char *p, int seed)
{
	int i;

	for (i = 0; i < PAGE; i++)
		p[i] = (unsigned char)(seed * 31 + i);
}

static void expect_page(struct tmem *t, int pool, const struct tmem_oid *oid, uint32_t idx,
			int seed)
{
	unsigned char want[PAGE], got[PAGE];

	fill(want, seed);
	assert_int_equal(tmem_get(t, pool, oid, idx, got), 0);
	assert_memory_equal(want, got, PAGE);
}

static void put_seed(struct tmem *t, int pool, const struct tmem_oid *oid, uint32_t idx, int seed)
{
	unsigned char p[PAGE];

	fill(p, seed);
	assert_int_equal(tmem_put(t, pool, oid, idx, p), 0);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_pools(void **state)
{
	struct tmem *t = *state;
	struct tmem_pool_info info;
	int a = tmem_pool_new(t, TMEM_PERSISTENT), b = tmem_pool_new(t, 0);

	assert_true(a >= 0 && b >= 0 && a != b);
	assert_int_equal(tmem_pool_new(t, 8), -EINVAL);
	assert_int_equal(tmem_pool_info(t, a, &info), 0);
	assert_int_equal(info.flags, TMEM_PERSISTENT);
	assert_int_equal(tmem_pool_destroy(t, a), 0);
	assert_int_equal(tmem_pool_destroy(t, a), -ENOENT);
	assert_int_equal(tmem_pool_info(t, a, &info), -ENOENT);
	assert_int_equal(tmem_pool_destroy(t, TMEM_MAX_POOLS + 5), -ENOENT);
	put_seed(t, b, &O1, 0, 1);
	assert_int_equal(tmem_put(t, a, &O1, 0, "x"), -ENOENT);
}

static void test_persistent_stays(void **state)
{
	struct tmem *t = *state;
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	put_seed(t, p, &O1, 7, 1);
	expect_page(t, p, &O1, 7, 1);
	expect_page(t, p, &O1, 7, 1); /* non-destructive */
}

static void test_private_ephemeral_destructive(void **state)
{
	struct tmem *t = *state;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, 0);

	put_seed(t, p, &O1, 7, 1);
	expect_page(t, p, &O1, 7, 1);
	assert_int_equal(tmem_get(t, p, &O1, 7, page), -ENOENT);
	assert_int_equal(atomic_load(&fk.live), 0);
}

static void test_shared_ephemeral_not_destructive(void **state)
{
	struct tmem *t = *state;
	int p = tmem_pool_new(t, TMEM_SHARED);

	put_seed(t, p, &O1, 7, 1);
	expect_page(t, p, &O1, 7, 1);
	expect_page(t, p, &O1, 7, 1);
}

static void test_get_get(void **state)
{
	struct tmem *t = *state;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	assert_int_equal(tmem_get(t, p, &O1, 1, page), -ENOENT);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -ENOENT);
	/* a refused put does not make a page appear */
	atomic_store(&fk.refuse, -ENOSPC);
	assert_int_equal(tmem_put(t, p, &O1, 1, page), -ENOSPC);
	atomic_store(&fk.refuse, 0);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -ENOENT);
	put_seed(t, p, &O1, 1, 3);
	expect_page(t, p, &O1, 1, 3);
}

static void test_put_put_get_replaces(void **state)
{
	struct tmem *t = *state;
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	put_seed(t, p, &O1, 1, 1);
	put_seed(t, p, &O1, 1, 2);
	expect_page(t, p, &O1, 1, 2);
	assert_int_equal(atomic_load(&fk.live), 1); /* the old copy was freed */
}

static void test_put_put_get_refused_flushes(void **state)
{
	struct tmem *t = *state;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	put_seed(t, p, &O1, 1, 1);
	put_seed(t, p, &O1, 2, 1);
	atomic_store(&fk.refuse, -E2BIG);
	fill(page, 2);
	assert_int_equal(tmem_put(t, p, &O1, 1, page), -E2BIG);
	atomic_store(&fk.refuse, 0);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -ENOENT); /* never the old page */
	expect_page(t, p, &O1, 2, 1);                           /* neighbours untouched */
}

static void test_flush_page(void **state)
{
	struct tmem *t = *state;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT);

	put_seed(t, p, &O1, 1, 1);
	put_seed(t, p, &O1, 2, 2);
	assert_int_equal(tmem_flush_page(t, p, &O1, 1), 0);
	assert_int_equal(tmem_flush_page(t, p, &O1, 1), -ENOENT);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -ENOENT);
	expect_page(t, p, &O1, 2, 2);
	assert_int_equal(tmem_flush_page(t, p, &O2, 1), -ENOENT);
}

static void test_flush_object(void **state)
{
	struct tmem *t = *state;
	struct tmem_stats s;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	uint32_t i;

	for (i = 0; i < 300; i++) {
		put_seed(t, p, &O1, i * 1000, (int)i);
		put_seed(t, p, &O2, i, (int)i);
	}
	assert_int_equal(tmem_flush_object(t, p, &O1), 0);
	assert_int_equal(tmem_flush_object(t, p, &O1), -ENOENT);
	for (i = 0; i < 300; i++) {
		assert_int_equal(tmem_get(t, p, &O1, i * 1000, page), -ENOENT);
		expect_page(t, p, &O2, i, (int)i);
	}
	tmem_get_stats(t, &s);
	assert_int_equal(s.objects, 1);
	assert_int_equal(s.pages, 300);
	assert_int_equal(atomic_load(&fk.live), 300);
}

static void test_destroy_frees_everything(void **state)
{
	struct tmem *t = *state;
	struct tmem_stats s;
	int p = tmem_pool_new(t, 0);
	uint32_t i;

	for (i = 0; i < 5000; i++) {
		struct tmem_oid o = { { i % 97, i, 0 } };

		put_seed(t, p, &o, i, (int)i);
	}
	assert_int_equal(atomic_load(&fk.live), 5000);
	assert_int_equal(tmem_pool_destroy(t, p), 0);
	assert_int_equal(atomic_load(&fk.live), 0);
	tmem_get_stats(t, &s);
	assert_int_equal(s.objects, 0);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.pools, 0);
}

static void test_lost_persistent_is_eio(void **state)
{
	struct tmem *t = *state;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT), e = tmem_pool_new(t, TMEM_SHARED);

	put_seed(t, p, &O1, 1, 1);
	put_seed(t, e, &O1, 1, 1);
	atomic_store(&fk.lose, 1);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -EIO);
	assert_int_equal(tmem_get(t, p, &O1, 1, page), -EIO); /* stays reported */
	assert_int_equal(tmem_get(t, e, &O1, 1, page), -ENOENT); /* ephemeral: a miss */
	atomic_store(&fk.lose, 0);
	assert_int_equal(tmem_get(t, e, &O1, 1, page), -ENOENT); /* and gone (get-get) */
}

static void test_replace(void **state)
{
	struct tmem *t = *state;
	struct tmem_stats s;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, 0);

	put_seed(t, p, &O1, 5, 1);
	tmem_get_stats(t, &s);
	assert_int_equal(s.pages, 1);
	/* a wrong expectation changes nothing */
	assert_int_equal(tmem_replace(t, (struct tmem_ref){ 0, 5 }, 12345, 0, false), -ENOENT);
	assert_int_equal(tmem_replace(t, (struct tmem_ref){ 999999, 5 }, 12345, 0, false), -ENOENT);
	/* evict index 5 of the same object from inside the put of index 6: the
	 * bucket is held by this thread, the object is pinned and survives */
	fill(page, 2);
	fk.evict_in_create = 1;
	fk.evict_ref = (struct tmem_ref){ 0, 5 };
	fk.evict_expect = 1; /* a wrong descriptor: -ENOENT, nothing changes */
	assert_int_equal(tmem_put(t, p, &O1, 6, page), 0);
	assert_int_equal(fk.evict_result, -ENOENT);
	fk.evict_in_create = 0;
	expect_page(t, p, &O1, 6, 2);
	expect_page(t, p, &O1, 5, 1);
}

/* Evict the only page of an object from inside a put to that object. */
static uint64_t last_pampd;
static int capture_create(void *ctx, unsigned flags, const void *page, struct tmem_ref ref,
			  uint64_t *pampd)
{
	int r = fake_create(ctx, flags, page, ref, pampd);

	if (r == 0)
		last_pampd = *pampd;
	fk.evict_ref.objno = ref.objno;
	return r;
}
static const struct tmem_pamops capture_ops = { .create = capture_create, .get_data = fake_get, .free = fake_free };

static void test_evict_same_object_in_put(void **state)
{
	struct tmem *t;
	unsigned char page[PAGE];
	struct tmem_stats s;
	int p;

	memset(&fk, 0, sizeof(fk));
	t = fk.t = tmem_create(&capture_ops, &fk);
	p = tmem_pool_new(t, 0);

	put_seed(t, p, &O1, 5, 1);
	/* now evict index 5 (objno captured) from the put of index 5 itself */
	fk.evict_in_create = 1;
	fk.evict_ref.index = 5;
	fk.evict_expect = last_pampd;
	fill(page, 9);
	assert_int_equal(tmem_put(t, p, &O1, 5, page), 0);
	assert_int_equal(fk.evict_result, 0);
	fk.evict_in_create = 0;
	expect_page(t, p, &O1, 5, 9);
	tmem_get_stats(t, &s);
	assert_int_equal(s.evicted_pages, 1);
	assert_int_equal(s.pages, 0); /* the destructive get took it */
	assert_int_equal(atomic_load(&fk.live), 0);
	tmem_destroy(t);
}

/* ---- threads ---------------------------------------------------------------- */

struct worker {
	struct tmem *t;
	int pool;
	int id;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned char page[PAGE], want[PAGE];
	uint32_t i, round;

	for (round = 0; round < 3; round++) {
		for (i = 0; i < 2000; i++) {
			struct tmem_oid o = { { (uint64_t)w->id, i % 13, 0 } };

			fill(page, (int)(i + round + (uint32_t)w->id * 7));
			if (tmem_put(w->t, w->pool, &o, i, page))
				w->errors++;
		}
		for (i = 0; i < 2000; i++) {
			struct tmem_oid o = { { (uint64_t)w->id, i % 13, 0 } };

			fill(want, (int)(i + round + (uint32_t)w->id * 7));
			if (tmem_get(w->t, w->pool, &o, i, page) || memcmp(page, want, PAGE))
				w->errors++;
			if (i % 5 == 0 && tmem_flush_page(w->t, w->pool, &o, i))
				w->errors++;
		}
		for (i = 0; i < 13; i++) {
			struct tmem_oid o = { { (uint64_t)w->id, i, 0 } };

			tmem_flush_object(w->t, w->pool, &o);
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct tmem *t = *state;
	struct worker w[4];
	pthread_t th[4];
	struct tmem_stats s;
	int p = tmem_pool_new(t, TMEM_PERSISTENT), i;

	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){ t, p, i, 0 };
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	tmem_get_stats(t, &s);
	assert_int_equal(s.pages, 0);
	assert_int_equal(s.objects, 0);
	assert_int_equal(atomic_load(&fk.live), 0);
}

/* ---- the crash table ---------------------------------------------------------- */

static struct tmem_crashtab *ct;
static size_t ct_len;

/* A handle space over the fake data side, with a crash table of objs_max entries. */
static struct tmem *crash_space(uint32_t objs_max)
{
	struct tmem *t;

	memset(&fk, 0, sizeof(fk));
	ct_len = tmem_crashtab_bytes(objs_max);
	ct = calloc(1, ct_len);
	assert_non_null(ct);
	assert_int_equal(tmem_crashtab_init(ct, ct_len, objs_max), 0);
	t = fk.t = tmem_create(&fake_ops, &fk);
	assert_non_null(t);
	assert_int_equal(tmem_set_crashtab(t, ct), 0);
	return t;
}

/* Destroy t: every entry and count it wrote is back to zero. */
static void crash_done(struct tmem *t)
{
	const unsigned char *b = (const unsigned char *)ct;
	size_t i, dirty = 0;

	tmem_destroy(t);
	for (i = offsetof(struct tmem_crashtab, nonlocal); i < ct_len; i++)
		dirty += b[i] != 0;
	assert_int_equal(dirty, 0);
	assert_int_equal(atomic_load(&fk.live), 0);
	free(ct);
	ct = NULL;
}

static void put_kind(struct tmem *t, int pool, const struct tmem_oid *oid, uint32_t idx, int seed,
		     bool out)
{
	atomic_store(&fk.out, out);
	put_seed(t, pool, oid, idx, seed);
	atomic_store(&fk.out, 0);
}

/* A descriptor made by hand, as the data side's remotify or zero-page paths would. */
static uint64_t fake_desc(int seed, bool out)
{
	unsigned char *copy = malloc(PAGE);

	assert_non_null(copy);
	fill(copy, seed);
	atomic_fetch_add(&fk.live, 1);
	return (uint64_t)(uintptr_t)copy | (out ? FAKE_OUT : 0);
}

static void fake_drop(uint64_t pampd)
{
	free(FAKE_MEM(pampd));
	atomic_fetch_sub(&fk.live, 1);
}

static void expect_obj(uint32_t objno, int pool, const struct tmem_oid *oid)
{
	struct tmem_oid got;
	uint32_t p;

	assert_int_equal(tmem_crashtab_obj(ct, ct_len, objno, &p, &got), 0);
	assert_int_equal(p, pool);
	assert_memory_equal(&got, oid, sizeof(got));
}

static int obj_state(uint32_t objno, size_t len)
{
	struct tmem_oid oid;
	uint32_t p;

	return tmem_crashtab_obj(ct, len, objno, &p, &oid);
}

static void test_crash_header(void **state)
{
	size_t len = tmem_crashtab_bytes(8);
	struct tmem_crashtab *h = calloc(1, len);
	struct tmem *t = tmem_create(&fake_ops, &fk);

	assert_non_null(h);
	assert_non_null(t);
	assert_int_equal(len, 16 + 12 * TMEM_MAX_POOLS + 8 * 32);
	assert_int_equal(tmem_crashtab_bytes(UINT32_MAX), 0);
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL); /* zeroes: no magic */
	assert_int_equal(tmem_set_crashtab(t, h), -EINVAL);
	assert_int_equal(tmem_crashtab_init(h, len - 1, 8), -EINVAL);
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	assert_int_equal(tmem_crashtab_init(h, len, 8), 0);
	assert_int_equal(tmem_crashtab_valid(h, len), 0);
	/* a file cut short, or a header naming more than was mapped */
	assert_int_equal(tmem_crashtab_valid(h, len - 1), -EINVAL);
	assert_int_equal(tmem_crashtab_valid(h, 15), -EINVAL);
	h->objs_max = 9;
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	h->objs_max = UINT32_MAX;
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	assert_int_equal(tmem_crashtab_obj(h, len, 8, &(uint32_t){0}, &(struct tmem_oid){{0}}),
			 -ERANGE);
	h->objs_max = 8;
	h->magic ^= 1;
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	assert_int_equal(tmem_set_crashtab(t, h), -EINVAL);
	h->magic ^= 1;
	h->version++;
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	h->version--;
	h->pools = 1;
	assert_int_equal(tmem_crashtab_valid(h, len), -EINVAL);
	h->pools = TMEM_MAX_POOLS;
	assert_int_equal(tmem_set_crashtab(t, NULL), -EINVAL);
	assert_int_equal(tmem_set_crashtab(t, h), 0);
	assert_int_equal(tmem_set_crashtab(t, h), -EBUSY); /* once */
	tmem_destroy(t);
	free(h);
}

static void test_crash_objects(void **state)
{
	struct tmem *t = crash_space(64);
	int p = tmem_pool_new(t, TMEM_PERSISTENT), e = tmem_pool_new(t, TMEM_SHARED);
	struct tmem_crashobj save;
	uint32_t n1, n2;

	assert_int_equal(tmem_set_crashtab(t, ct), -EBUSY); /* pools exist */
	put_seed(t, p, &O1, 3, 1);
	n1 = last_ref.objno;
	put_seed(t, e, &O2, 0, 2);
	n2 = last_ref.objno;
	assert_int_not_equal(n1, n2);
	expect_obj(n1, p, &O1);
	expect_obj(n2, e, &O2);
	/* torn entries: a byte of the oid, of the check, the pool */
	save = ct->objs[n1];
	((unsigned char *)&ct->objs[n1].oid)[13] ^= 0x10;
	assert_int_equal(obj_state(n1, ct_len), -ENOENT);
	ct->objs[n1] = save;
	((unsigned char *)&ct->objs[n1].check)[2] ^= 1;
	assert_int_equal(obj_state(n1, ct_len), -ENOENT);
	ct->objs[n1] = save;
	ct->objs[n1].pool ^= 4;
	assert_int_equal(obj_state(n1, ct_len), -ENOENT);
	ct->objs[n1] = save;
	expect_obj(n1, p, &O1);
	/* a whole entry under another number (stale) */
	ct->objs[40] = save;
	assert_int_equal(obj_state(40, ct_len), -ENOENT);
	memset(&ct->objs[40], 0, sizeof(ct->objs[40]));
	/* past objs_max, or past the mapped length */
	assert_int_equal(obj_state(64, ct_len), -ERANGE);
	assert_int_equal(obj_state(UINT32_MAX, ct_len), -ERANGE);
	assert_int_equal(obj_state(n1, tmem_crashtab_bytes(n1)), -ERANGE);
	assert_int_equal(obj_state(0, 8), -ERANGE);
	/* an entry dies with its object */
	assert_int_equal(tmem_flush_object(t, p, &O1), 0);
	assert_int_equal(obj_state(n1, ct_len), -ENOENT);
	assert_int_equal(ct->objs[n1].pool, 0);
	expect_page(t, e, &O2, 0, 2);
	assert_int_equal(tmem_flush_page(t, e, &O2, 0), 0);
	assert_int_equal(obj_state(n2, ct_len), -ENOENT);
	/* a number reused names its new object */
	put_seed(t, e, &O1, 9, 3);
	expect_obj(last_ref.objno, e, &O1);
	crash_done(t);
}

struct swap {
	uint64_t with, old;
};

static int swap_desc(void *arg, struct tmem_ref ref, bool pers, uint64_t *pampd)
{
	struct swap *sw = arg;

	sw->old = *pampd;
	*pampd = sw->with;
	return 0;
}

static void test_crash_nonlocal(void **state)
{
	struct tmem *t = crash_space(64);
	int p = tmem_pool_new(t, TMEM_PERSISTENT), e = tmem_pool_new(t, 0), q;
	struct tmem_handle h = {(uint32_t)p, O1, 2};
	unsigned char page[PAGE];
	struct tmem_ref ref;
	uint64_t want = 0, d0, d;
	struct swap sw;
	uint32_t i;

	put_kind(t, p, &O1, 0, 1, false);
	assert_int_equal(ct->nonlocal[p], want);
	put_kind(t, p, &O1, 1, 2, true);
	assert_int_equal(ct->nonlocal[p], ++want);
	put_kind(t, p, &O1, 0, 3, true); /* in the tier -> outside, by a put */
	assert_int_equal(ct->nonlocal[p], ++want);
	ref = last_ref;
	d0 = last_desc;
	put_kind(t, p, &O1, 1, 4, false); /* outside -> in the tier */
	assert_int_equal(ct->nonlocal[p], --want);
	/* tmem_replace: outside -> in the tier -> outside -> evicted */
	d = fake_desc(5, false);
	assert_int_equal(tmem_replace(t, ref, d0, d, false), 0);
	fake_drop(d0);
	assert_int_equal(ct->nonlocal[p], --want);
	expect_page(t, p, &O1, 0, 5);
	d0 = d;
	d = fake_desc(6, true);
	assert_int_equal(tmem_replace(t, ref, d0, d, false), 0);
	fake_drop(d0);
	assert_int_equal(ct->nonlocal[p], ++want);
	assert_int_equal(tmem_replace(t, ref, d, 0, false), 0);
	fake_drop(d);
	assert_int_equal(ct->nonlocal[p], --want);
	/* tmem_update: outside -> in the tier -> outside -> removed */
	put_kind(t, p, &O1, 2, 7, true);
	assert_int_equal(ct->nonlocal[p], ++want);
	sw.with = fake_desc(8, false);
	assert_int_equal(tmem_update(t, &h, swap_desc, &sw), 0);
	fake_drop(sw.old);
	assert_int_equal(ct->nonlocal[p], --want);
	sw.with = fake_desc(9, true);
	assert_int_equal(tmem_update(t, &h, swap_desc, &sw), 0);
	fake_drop(sw.old);
	assert_int_equal(ct->nonlocal[p], ++want);
	sw.with = 0;
	assert_int_equal(tmem_update(t, &h, swap_desc, &sw), 0);
	fake_drop(sw.old);
	assert_int_equal(ct->nonlocal[p], --want);
	/* flush page; a refused put over an outside page flushes it */
	put_kind(t, p, &O1, 3, 10, true);
	assert_int_equal(ct->nonlocal[p], ++want);
	assert_int_equal(tmem_flush_page(t, p, &O1, 3), 0);
	assert_int_equal(ct->nonlocal[p], --want);
	put_kind(t, p, &O1, 4, 11, true);
	assert_int_equal(ct->nonlocal[p], ++want);
	atomic_store(&fk.refuse, -ENOSPC);
	assert_int_equal(tmem_put(t, p, &O1, 4, page), -ENOSPC);
	atomic_store(&fk.refuse, 0);
	assert_int_equal(ct->nonlocal[p], --want);
	/* flush object: a third of its pages outside */
	for (i = 0; i < 40; i++) {
		put_kind(t, p, &O2, i * 100, (int)i, i % 3 == 0);
		want += i % 3 == 0;
	}
	assert_int_equal(ct->nonlocal[p], want);
	assert_int_equal(tmem_flush_object(t, p, &O2), 0);
	want -= 14;
	assert_int_equal(ct->nonlocal[p], want);
	assert_int_equal(want, 0);
	/* an ephemeral pool counts nothing, a destructive get included */
	put_kind(t, e, &O1, 0, 1, true);
	assert_int_equal(ct->nonlocal[e], 0);
	expect_page(t, e, &O1, 0, 1);
	assert_int_equal(ct->nonlocal[e], 0);
	/* a destroyed pool's count goes with it; a new pool there starts at 0 */
	for (i = 0; i < 10; i++)
		put_kind(t, p, &O2, i, (int)i, true);
	assert_int_equal(ct->nonlocal[p], 10);
	assert_int_equal(tmem_pool_destroy(t, p), 0);
	assert_int_equal(ct->nonlocal[p], 0);
	assert_int_equal(tmem_pool_new_at(t, (uint32_t)p, TMEM_PERSISTENT), p);
	assert_int_equal(ct->nonlocal[p], 0);
	put_kind(t, p, &O1, 0, 1, true);
	assert_int_equal(ct->nonlocal[p], 1);
	ct->nonlocal[100] = 77; /* whatever an id held before */
	assert_int_equal(q = tmem_pool_new_at(t, 100, TMEM_PERSISTENT), 100);
	assert_int_equal(ct->nonlocal[q], 0);
	crash_done(t);
}

static void test_crash_untracked(void **state)
{
	struct tmem *t = crash_space(4);
	int p = tmem_pool_new(t, TMEM_PERSISTENT);
	struct tmem_crash_stats cs;
	uint32_t i, objno[10];

	for (i = 0; i < 10; i++) {
		struct tmem_oid o = {{i, 7, 7}};

		put_kind(t, p, &o, 0, (int)i, i & 1);
		objno[i] = last_ref.objno;
		if (objno[i] < 4)
			expect_obj(objno[i], p, &o);
		else
			assert_int_equal(obj_state(objno[i], ct_len), -ERANGE);
	}
	tmem_get_crash_stats(t, &cs);
	assert_int_equal(cs.untracked_objects, 6);
	assert_int_equal(ct->nonlocal[p], 5); /* per pool: counted all the same */
	for (i = 0; i < 10; i++) {
		struct tmem_oid o = {{i, 7, 7}};

		expect_page(t, p, &o, 0, (int)i);
		assert_int_equal(tmem_flush_object(t, p, &o), 0);
	}
	assert_int_equal(ct->nonlocal[p], 0);
	tmem_get_crash_stats(t, &cs);
	assert_int_equal(cs.untracked_objects, 6);
	crash_done(t);
}

static void test_crash_incomplete(void **state)
{
	struct tmem *t = *state;
	struct tmem_pool_info info;
	struct tmem_crash_stats cs;
	struct tmem_stats s;
	unsigned char page[PAGE];
	int p = tmem_pool_new(t, TMEM_PERSISTENT), q = tmem_pool_new(t, TMEM_PERSISTENT),
	    e = tmem_pool_new(t, TMEM_SHARED);

	put_seed(t, p, &O1, 1, 1);
	assert_int_equal(tmem_pool_set_incomplete(t, e), -EINVAL);
	assert_int_equal(tmem_pool_set_incomplete(t, 9999), -ENOENT);
	assert_int_equal(tmem_pool_set_incomplete(t, TMEM_MAX_POOLS), -ENOENT);
	assert_int_equal(tmem_pool_info(t, p, &info), 0);
	assert_false(info.incomplete);
	assert_int_equal(tmem_pool_set_incomplete(t, p), 0);
	assert_int_equal(tmem_pool_info(t, p, &info), 0);
	assert_true(info.incomplete);
	assert_int_equal(info.flags, TMEM_PERSISTENT);
	expect_page(t, p, &O1, 1, 1);                           /* a hit answers */
	assert_int_equal(tmem_get(t, p, &O1, 2, page), -EIO);   /* no page */
	assert_int_equal(tmem_get(t, p, &O2, 0, page), -EIO);   /* no object */
	assert_int_equal(tmem_get(t, q, &O1, 2, page), -ENOENT); /* others miss as ever */
	assert_int_equal(tmem_get(t, e, &O1, 2, page), -ENOENT);
	tmem_get_crash_stats(t, &cs);
	assert_int_equal(cs.gets_incomplete, 2);
	tmem_get_stats(t, &s);
	assert_int_equal(s.get_errors, 2);
	assert_int_equal(s.misses, 2);
	put_seed(t, p, &O1, 2, 3); /* a put works: the page is there */
	expect_page(t, p, &O1, 2, 3);
	assert_int_equal(tmem_flush_page(t, p, &O1, 2), 0);
	assert_int_equal(tmem_get(t, p, &O1, 2, page), -EIO);
	tmem_get_crash_stats(t, &cs);
	assert_int_equal(cs.gets_incomplete, 3);
}

/* Puts and flushes from threads in one pool (different buckets race on its count). */
static void *crash_worker(void *arg)
{
	struct worker *w = arg;
	unsigned char page[PAGE];
	uint32_t i, round;

	for (round = 0; round < 2; round++) {
		for (i = 0; i < 3000; i++) {
			struct tmem_oid o = {{(uint64_t)w->id, i % 17, 1}};

			fill(page, (int)(i + round * 5 + (uint32_t)w->id)); /* odd seed: outside */
			if (tmem_put(w->t, w->pool, &o, i, page))
				w->errors++;
			if (i % 7 == 0 && tmem_flush_page(w->t, w->pool, &o, i))
				w->errors++;
		}
	}
	return NULL;
}

static int count_out(void *arg, const struct tmem_handle *h, bool pers, uint64_t pampd)
{
	*(uint64_t *)arg += !fake_in_tier(pampd);
	return 0;
}

static void test_crash_threads(void **state)
{
	struct tmem *t = crash_space(128);
	struct worker w[4];
	pthread_t th[4];
	uint64_t out = 0;
	int p = tmem_pool_new(t, TMEM_PERSISTENT), i;

	atomic_store(&fk.out_by_page, 1);
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){t, p, i, 0};
		pthread_create(&th[i], NULL, crash_worker, &w[i]);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	assert_int_equal(tmem_walk(t, NULL, count_out, &out), 0);
	assert_true(out > 1000);
	assert_int_equal(ct->nonlocal[p], out);
	crash_done(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pools, setup, teardown),
		cmocka_unit_test_setup_teardown(test_persistent_stays, setup, teardown),
		cmocka_unit_test_setup_teardown(test_private_ephemeral_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared_ephemeral_not_destructive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_get_replaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_put_get_refused_flushes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_page, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_object, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_frees_everything, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_persistent_is_eio, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replace, setup, teardown),
		cmocka_unit_test(test_evict_same_object_in_put),
		cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
		cmocka_unit_test(test_crash_header),
		cmocka_unit_test(test_crash_objects),
		cmocka_unit_test(test_crash_nonlocal),
		cmocka_unit_test(test_crash_untracked),
		cmocka_unit_test_setup_teardown(test_crash_incomplete, setup, teardown),
		cmocka_unit_test(test_crash_threads),
	};

	return cmocka_run_group_tests_name("tmem", tests, NULL, NULL);
}
