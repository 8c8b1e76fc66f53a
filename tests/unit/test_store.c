/*
 * test_store.c - the frontends' storage API on a single node (no
 * collective): puts, gets and flushes reach the tier; a full tier refuses at
 * once (there is no remotify to wait for) and never reports a wait; pool
 * calls pass through; a store request can be cancelled when nothing waits.
 * The waits themselves need a collective: test_client and test_collective
 * drive them with real daemons.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "node/store.h"
#include "tmem/zcache.h"

#define PAGE 4096

struct fixture {
	struct zcache *z;
	struct store *s;
};

static int setup(void **state)
{
	struct zcache_config c = {.local_mb = 1};
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->z = zcache_create(&c);
	assert_non_null(f->z);
	f->s = store_create(NULL, f->z, NULL, 0);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_destroy(f->s);
	zcache_destroy(f->z);
	free(f);
	return 0;
}

/* Incompressible bytes from seed: one page a frame at most. */
static void noise(uint8_t *p, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i < PAGE; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

static int calls;
static void never(void *arg, int result)
{
	calls++;
}

static void test_put_get_flush(void **state)
{
	struct fixture *f = *state;
	struct store_req q;
	struct tmem_oid oid = {{1, 2, 3}};
	uint8_t page[PAGE], back[PAGE];
	int pool = store_pool_new(f->s, TMEM_PERSISTENT);

	assert_true(pool >= 0);
	assert_false(store_collective(f->s));
	memset(page, 'a', sizeof(page));
	store_req_begin(&q, never, NULL);
	assert_int_equal(store_put(f->s, &q, (uint32_t)pool, &oid, 7, page), 0);
	assert_int_equal(store_get(f->s, (uint32_t)pool, &oid, 7, back, never, NULL), 0);
	assert_memory_equal(page, back, PAGE);
	assert_false(store_is_remote(f->s, &(struct tmem_handle){(uint32_t)pool, oid, 7}));
	assert_int_equal(store_get(f->s, (uint32_t)pool, &oid, 8, back, never, NULL), -ENOENT);
	assert_int_equal(store_flush_page(f->s, (uint32_t)pool, &oid, 7), 0);
	assert_int_equal(store_get(f->s, (uint32_t)pool, &oid, 7, back, never, NULL), -ENOENT);
	assert_int_equal(store_put(f->s, &q, (uint32_t)pool, &oid, 9, page), 0);
	assert_int_equal(store_flush_object(f->s, (uint32_t)pool, &oid), 0);
	assert_int_equal(store_get(f->s, (uint32_t)pool, &oid, 9, back, never, NULL), -ENOENT);
	assert_int_equal(calls, 0);
	assert_int_equal(store_pool_destroy(f->s, (uint32_t)pool), 0);
	assert_int_not_equal(store_get(f->s, (uint32_t)pool, &oid, 9, back, never, NULL), 0);
}

/* A full tier without a collective refuses at once: nothing could make room. */
static void test_full_refuses_at_once(void **state)
{
	struct fixture *f = *state;
	struct store_req q;
	struct tmem_oid oid = {{4, 5, 6}};
	uint8_t page[PAGE];
	int pool = store_pool_new(f->s, TMEM_PERSISTENT);
	uint32_t i;
	int rc = 0;

	assert_true(pool >= 0);
	store_req_begin(&q, never, NULL);
	for (i = 0; i < 4096 && rc == 0; i++) {
		/* half noise: compressible enough to be kept, big enough to fill */
		noise(page, i);
		memset(page + PAGE / 2, 0, PAGE / 2);
		rc = store_put(f->s, &q, (uint32_t)pool, &oid, i, page);
	}
	assert_int_equal(rc, -ENOSPC);
	assert_true(i > 64); /* 1 MiB held a good many before it filled */
	assert_false(q.waited);
	assert_null(q.room);
	store_req_cancel(&q); /* nothing waits: a no-op */
	assert_int_equal(calls, 0);
}

static void test_pool_info(void **state)
{
	struct fixture *f = *state;
	struct tmem_pool_info info = {0};
	int pool = store_pool_new(f->s, TMEM_SHARED);

	assert_true(pool >= 0);
	assert_int_equal(store_pool_info(f->s, (uint32_t)pool, &info), 0);
	assert_true(info.flags & TMEM_SHARED);
	assert_false(info.flags & TMEM_PERSISTENT);
	assert_ptr_equal(store_tmem(f->s), zcache_tmem(f->z));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_put_get_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_refuses_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_info, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
