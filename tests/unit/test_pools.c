/*
 * test_pools.c - the node's pool directory over a real local tier: private
 * pools per client, shared pools by uuid with holds counted, persistence
 * mismatch, release when a client goes, and isolation between clients.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "node/client/pools.h"
#include "tmem/zcache.h"

#define PAGE 4096

struct fixture {
	struct zcache *z;
	struct tmem *t;
	struct pools *p;
};

static int setup(void **state)
{
	static struct fixture f;
	struct zcache_config zc = {.local_mb = 4};

	f.z = zcache_create(&zc);
	if (!f.z)
		return -1;
	f.t = zcache_tmem(f.z);
	f.p = pools_create(f.t);
	if (!f.p)
		return -1;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	pools_destroy(f->p);
	zcache_destroy(f->z);
	return 0;
}

static const unsigned char uuid_a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
static const unsigned char uuid_b[16] = {0xff};

/* A page that compresses: a few non-zero bytes. */
static void mkpage(unsigned char *page, unsigned seed)
{
	memset(page, 0, PAGE);
	snprintf((char *)page, PAGE, "page %u", seed);
}

static uint32_t resolve(const struct pools_client *c, int id)
{
	uint32_t pool = UINT32_MAX;

	assert_int_equal(pools_resolve(c, id, &pool), 0);
	return pool;
}

static void counts(const struct pools *p, uint64_t priv, uint64_t shared)
{
	uint64_t a, b;

	pools_count(p, &a, &b);
	assert_int_equal(a, priv);
	assert_int_equal(b, shared);
}

/* Per listed pool: its info, looked up by tmem pool id. */
struct listing {
	size_t n;
	struct pools_info info[16];
};

static void list_one(void *arg, const struct pools_info *info)
{
	struct listing *l = arg;

	assert_true(l->n < 16);
	l->info[l->n++] = *info;
}

static const struct pools_info *find(const struct listing *l, uint32_t pool)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->info[i].pool == pool)
			return &l->info[i];
	return NULL;
}

static void test_private_per_client(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);
	struct tmem_pool_info ti;
	struct listing l = {0};
	int a0, a1, b0;

	assert_non_null(a);
	assert_non_null(b);
	a0 = pools_new(a, 0, NULL);
	a1 = pools_new(a, TMEM_PERSISTENT, NULL);
	b0 = pools_new(b, 0, NULL);
	/* ids are small and per client */
	assert_int_equal(a0, 0);
	assert_int_equal(a1, 1);
	assert_int_equal(b0, 0);
	assert_int_not_equal(resolve(a, a0), resolve(b, b0));
	assert_int_not_equal(resolve(a, a0), resolve(a, a1));
	assert_int_equal(tmem_pool_info(f->t, resolve(a, a1), &ti), 0);
	assert_int_equal(ti.flags, TMEM_PERSISTENT);
	counts(f->p, 3, 0);

	pools_foreach(f->p, list_one, &l);
	assert_int_equal(l.n, 3);
	assert_int_equal(find(&l, resolve(a, a1))->owner, 1);
	assert_int_equal(find(&l, resolve(b, b0))->owner, 2);
	assert_int_equal(find(&l, resolve(b, b0))->clients, 1);

	/* a freed id is reused, lowest first */
	assert_int_equal(pools_release(a, a0), 0);
	assert_int_equal(pools_release(a, a0), -ENOENT);
	assert_int_equal(pools_new(a, 0, NULL), 0);
	counts(f->p, 3, 0);

	pools_client_free(a);
	pools_client_free(b);
	counts(f->p, 0, 0);
}

static void test_bad_flags(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1);

	assert_int_equal(pools_new(a, 4, NULL), -EINVAL);
	assert_int_equal(pools_new(a, TMEM_SHARED, NULL), -EINVAL);
	assert_int_equal(pools_new(a, 0, uuid_a), -EINVAL);
	counts(f->p, 0, 0);
	pools_client_free(a);
}

static void test_shared_by_uuid(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);
	unsigned char page[PAGE], got[PAGE];
	struct tmem_oid oid = {{7, 8, 9}};
	struct listing l = {0};
	const struct pools_info *info;
	int ia, ib, ib2, other;

	ia = pools_new(a, TMEM_SHARED | TMEM_PERSISTENT, uuid_a);
	assert_true(ia >= 0);
	(void)pools_new(b, 0, NULL); /* b's id 0 is private: the shared one gets 1 */
	ib = pools_new(b, TMEM_SHARED | TMEM_PERSISTENT, uuid_a);
	assert_int_equal(ib, 1);
	assert_int_equal(resolve(a, ia), resolve(b, ib));
	other = pools_new(b, TMEM_SHARED | TMEM_PERSISTENT, uuid_b);
	assert_true(other >= 0);
	assert_int_not_equal(resolve(b, other), resolve(b, ib));
	counts(f->p, 1, 2);

	/* what a puts, b gets */
	mkpage(page, 1);
	assert_int_equal(tmem_put(f->t, resolve(a, ia), &oid, 3, page), 0);
	assert_int_equal(tmem_get(f->t, resolve(b, ib), &oid, 3, got), 0);
	assert_memory_equal(page, got, PAGE);

	/* a second hold by the same client: another id, still one client */
	ib2 = pools_new(b, TMEM_SHARED | TMEM_PERSISTENT, uuid_a);
	assert_true(ib2 >= 0);
	assert_int_not_equal(ib2, ib);
	pools_foreach(f->p, list_one, &l);
	info = find(&l, resolve(a, ia));
	assert_non_null(info);
	assert_int_equal(info->clients, 2);
	assert_int_equal(info->holds, 3);
	assert_int_equal(info->flags, TMEM_SHARED | TMEM_PERSISTENT);
	assert_memory_equal(info->uuid, uuid_a, 16);

	/* releasing holds: the pool and its data stay while anyone holds it */
	assert_int_equal(pools_release(b, ib2), 0);
	assert_int_equal(pools_release(a, ia), 0);
	assert_int_equal(pools_resolve(a, ia, &(uint32_t){0}), -ENOENT);
	memset(got, 0, PAGE);
	assert_int_equal(tmem_get(f->t, resolve(b, ib), &oid, 3, got), 0);
	assert_memory_equal(page, got, PAGE);
	counts(f->p, 1, 2);

	/* a rejoins by uuid and finds the data */
	ia = pools_new(a, TMEM_SHARED | TMEM_PERSISTENT, uuid_a);
	assert_int_equal(resolve(a, ia), resolve(b, ib));
	assert_int_equal(pools_release(a, ia), 0);

	/* the last hold destroys it: the uuid then names a new, empty pool */
	assert_int_equal(pools_release(b, ib), 0);
	counts(f->p, 1, 1);
	ia = pools_new(a, TMEM_SHARED | TMEM_PERSISTENT, uuid_a);
	assert_true(ia >= 0);
	assert_int_equal(tmem_get(f->t, resolve(a, ia), &oid, 3, got), -ENOENT);

	pools_client_free(a);
	pools_client_free(b);
	counts(f->p, 0, 0);
}

static void test_shared_flag_mismatch(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);

	assert_int_equal(pools_new(a, TMEM_SHARED, uuid_a), 0);
	assert_int_equal(pools_new(b, TMEM_SHARED | TMEM_PERSISTENT, uuid_a), -EINVAL);
	assert_int_equal(pools_new(b, TMEM_SHARED, uuid_a), 0);
	/* the refusal took no id */
	assert_int_equal(pools_new(b, 0, NULL), 1);
	pools_client_free(a);
	pools_client_free(b);
	counts(f->p, 0, 0);
}

static void test_release_on_client_close(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);
	struct tmem_stats ts;
	unsigned char page[PAGE];
	struct tmem_oid oid = {{1, 0, 0}};
	uint32_t priv, shared;
	int ip, is;

	ip = pools_new(a, TMEM_PERSISTENT, NULL);
	is = pools_new(a, TMEM_SHARED, uuid_b);
	assert_int_equal(pools_new(b, TMEM_SHARED, uuid_b), 0);
	priv = resolve(a, ip);
	shared = resolve(a, is);
	mkpage(page, 2);
	assert_int_equal(tmem_put(f->t, priv, &oid, 0, page), 0);
	tmem_get_stats(f->t, &ts);
	assert_int_equal(ts.pages, 1);

	pools_client_free(a);
	/* a's private pool and its page are gone; the shared pool lives on for b */
	assert_int_equal(tmem_pool_info(f->t, priv, &(struct tmem_pool_info){0}), -ENOENT);
	assert_int_equal(tmem_pool_info(f->t, shared, &(struct tmem_pool_info){0}), 0);
	tmem_get_stats(f->t, &ts);
	assert_int_equal(ts.pages, 0);
	counts(f->p, 0, 1);

	pools_client_free(b);
	assert_int_equal(tmem_pool_info(f->t, shared, &(struct tmem_pool_info){0}), -ENOENT);
	counts(f->p, 0, 0);
}

static void test_isolation(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);
	uint32_t pool;
	int ia, is;

	ia = pools_new(a, 0, NULL);
	is = pools_new(a, TMEM_SHARED, uuid_a);
	assert_int_equal(ia, 0);
	assert_int_equal(is, 1);
	/* b named nothing: none of a's ids resolve for b */
	assert_int_equal(pools_resolve(b, ia, &pool), -ENOENT);
	assert_int_equal(pools_resolve(b, is, &pool), -ENOENT);
	assert_int_equal(pools_release(b, ia), -ENOENT);
	assert_int_equal(pools_release(b, is), -ENOENT);
	assert_int_equal(pools_resolve(a, -1, &pool), -ENOENT);
	assert_int_equal(pools_resolve(a, POOLS_CLIENT_MAX, &pool), -ENOENT);
	assert_int_equal(pools_resolve(a, 1000000, &pool), -ENOENT);
	/* b's own private pool 0 is not a's pool 0 */
	assert_int_equal(pools_new(b, 0, NULL), 0);
	assert_int_not_equal(resolve(b, 0), resolve(a, 0));
	/* a's pools are untouched by b's attempts */
	assert_int_equal(pools_resolve(a, ia, &pool), 0);
	pools_client_free(a);
	pools_client_free(b);
}

static void test_table_limit(void **state)
{
	struct fixture *f = *state;
	struct pools_client *a = pools_client_new(f->p, 1);
	int i;

	for (i = 0; i < POOLS_CLIENT_MAX; i++)
		assert_int_equal(pools_new(a, TMEM_SHARED, uuid_a), i);
	assert_int_equal(pools_new(a, TMEM_SHARED, uuid_a), -ENOSPC);
	assert_int_equal(pools_new(a, 0, NULL), -ENOSPC);
	counts(f->p, 0, 1);
	assert_int_equal(pools_release(a, 17), 0);
	assert_int_equal(pools_new(a, 0, NULL), 17);
	pools_client_free(a);
	counts(f->p, 0, 0);
}

/* A client's connection ends: its pools wait the grace, then go as a release would. */
static void test_detach_attach(void **state)
{
	struct fixture *f = *state;
	struct users_cred cred = {.uid = 1000, .gid = 1000};
	struct pools_client *a = pools_client_new(f->p, 1), *b;
	unsigned char tok0[POOLS_TOKEN_LEN], tok1[POOLS_TOKEN_LEN], page[PAGE], got[PAGE];
	struct tmem_oid oid = {{1, 2, 3}};
	struct pools_reattach_stats rs;
	uint32_t pool0;
	int a0, a1;

	pools_set_grace(f->p, 1000);
	pools_client_set_cred(a, NULL, &cred, NULL);
	a0 = pools_new(a, TMEM_PERSISTENT, NULL);
	a1 = pools_new(a, TMEM_PERSISTENT | TMEM_SHARED, uuid_a);
	assert_int_equal(pools_token(a, a0, tok0), 0);
	assert_int_equal(pools_token(a, a1, tok1), 0);
	assert_memory_not_equal(tok0, tok1, POOLS_TOKEN_LEN);
	assert_int_equal(pools_token(a, 9, got), -ENOENT);
	pool0 = resolve(a, a0);
	mkpage(page, 1);
	assert_int_equal(tmem_put(f->t, pool0, &oid, 0, page), 0);

	pools_client_close(a, 5000);
	counts(f->p, 1, 1); /* kept */
	assert_int_equal(pools_expire(f->p, 5999), 6000);

	/* a new connection of the same uid takes them back, at the ids it asks for */
	b = pools_client_new(f->p, 2);
	pools_client_set_cred(b, NULL, &cred, NULL);
	assert_int_equal(pools_new(b, 0, NULL), 0); /* id 0 taken: the attach gets another */
	assert_int_equal(pools_attach(b, tok0, 15, a0), -EINVAL);
	assert_int_equal(pools_attach(b, tok1, POOLS_TOKEN_LEN, a1), a1);
	assert_int_equal(pools_attach(b, tok0, POOLS_TOKEN_LEN, a0), 2);
	assert_int_equal(resolve(b, 2), pool0);
	assert_int_equal(tmem_get(f->t, pool0, &oid, 0, got), 0);
	assert_memory_equal(page, got, PAGE);
	assert_int_equal(pools_expire(f->p, 100000), 0); /* nothing detached now */
	pools_reattach_counts(f->p, &rs);
	assert_int_equal(rs.detached, 2);
	assert_int_equal(rs.reattached, 2);
	assert_int_equal(rs.expired, 0);

	/* closed again and not attached in time: released (counted expired) */
	pools_client_close(b, 10000);
	counts(f->p, 2, 1);
	assert_int_equal(pools_expire(f->p, 10999), 11000);
	assert_int_equal(pools_expire(f->p, 11000), 0);
	counts(f->p, 0, 0);
	pools_reattach_counts(f->p, &rs);
	assert_int_equal(rs.expired, 3);

	b = pools_client_new(f->p, 3);
	assert_int_equal(pools_attach(b, tok0, POOLS_TOKEN_LEN, 0), -ENOENT);
	pools_client_free(b);
}

/* Another uid gets -EACCES for a detached pool's token, counted; the pool stays. */
static void test_attach_other_uid(void **state)
{
	struct fixture *f = *state;
	struct users_cred alice = {.uid = 1000, .gid = 1000}, bob = {.uid = 1001, .gid = 1001};
	struct pools_client *a = pools_client_new(f->p, 1), *b = pools_client_new(f->p, 2);
	unsigned char tok[POOLS_TOKEN_LEN];
	struct pools_reattach_stats rs;
	int a0;

	pools_set_grace(f->p, 1000);
	pools_client_set_cred(a, NULL, &alice, NULL);
	pools_client_set_cred(b, NULL, &bob, NULL);
	a0 = pools_new(a, 0, NULL);
	assert_int_equal(pools_token(a, a0, tok), 0);
	/* held: bob may not join alice's private pool either */
	assert_int_equal(pools_attach(b, tok, POOLS_TOKEN_LEN, 0), -EACCES);
	pools_client_close(a, 0);
	assert_int_equal(pools_attach(b, tok, POOLS_TOKEN_LEN, 0), -EACCES);
	pools_reattach_counts(f->p, &rs);
	assert_int_equal(rs.attach_refused, 2);
	counts(f->p, 1, 0);
	pools_client_free(b);
	/* grace 0: a close releases at once, as before */
	pools_set_grace(f->p, 0);
	a = pools_client_new(f->p, 3);
	pools_client_set_cred(a, NULL, &alice, NULL);
	assert_int_equal(pools_attach(a, tok, POOLS_TOKEN_LEN, 0), 0);
	pools_client_close(a, 0);
	counts(f->p, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_private_per_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_flags, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_by_uuid, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_shared_flag_mismatch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release_on_client_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_table_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_detach_attach, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_attach_other_uid, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
