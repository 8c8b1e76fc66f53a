/*
 * test_tmem.c - the handle space and its coherency rules, over a fake data
 * side that keeps plain copies (so every rule is tested apart from zbud/LZO).
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

#include "tmem/tmem.h"

#define PAGE TMEM_PAGE_SIZE

/* ---- a fake data side ---------------------------------------------------- */

struct fake {
	atomic_long live;        /* descriptors made and not freed */
	atomic_int refuse;       /* refuse puts with this -errno (0: accept) */
	atomic_int lose;         /* get_data answers -EIO */
	struct tmem *t;
	/* evict_in_create: replace() this ref from inside create (same thread) */
	int evict_in_create;
	struct tmem_ref evict_ref;
	uint64_t evict_expect;
	int evict_result;
};

static struct fake fk;

static int fake_create(void *ctx, unsigned flags, const void *page, struct tmem_ref ref, uint64_t *pampd)
{
	struct fake *f = ctx;
	void *copy;
	int r = atomic_load(&f->refuse);

	if (f->evict_in_create) {
		f->evict_result = tmem_replace(f->t, f->evict_ref, f->evict_expect, 0, true);
		if (f->evict_result == 0) {
			free((void *)(uintptr_t)f->evict_expect);
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
	atomic_fetch_add(&f->live, 1);
	return 0;
}

static int fake_get(void *ctx, bool pers, uint64_t pampd, void *page)
{
	struct fake *f = ctx;

	if (atomic_load(&f->lose))
		return -EIO;
	memcpy(page, (void *)(uintptr_t)pampd, PAGE);
	return 0;
}

static void fake_free(void *ctx, bool pers, uint64_t pampd, const struct tmem_handle *h, bool bulk)
{
	struct fake *f = ctx;

	free((void *)(uintptr_t)pampd);
	atomic_fetch_sub(&f->live, 1);
}

static const struct tmem_pamops fake_ops = { .create = fake_create, .get_data = fake_get, .free = fake_free };

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
	};

	return cmocka_run_group_tests_name("tmem", tests, NULL, NULL);
}
