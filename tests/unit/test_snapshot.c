/*
 * test_snapshot.c - the tier through a checked image and back (tmem/snapshot.c,
 * node/image.c): every page byte-identical, pools as they were; a torn,
 * changed or truncated image refused, a record that cannot be refused.
 */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "node/restart/image.h"
#include "tmem/snapshot.h"
#include "tmem/zcache.h"

#define KIND  0x54494552u /* "TIER" */
#define PAGES 50000

static struct zcache *tier(unsigned mb)
{
	struct zcache_config c = {.local_mb = mb};
	struct zcache *z = zcache_create(&c);

	assert_non_null(z);
	return z;
}

static struct tmem_oid oid_of(unsigned i)
{
	return (struct tmem_oid){{0x1000 + i / 64, 7, (uint64_t)i * 2654435761u}};
}

/* Page i: zero every 7th, random (incompressible) every 11th, else text-like. */
static void page_of(unsigned i, uint8_t *p)
{
	unsigned k;
	uint64_t x = i * 0x9e3779b97f4a7c15ull + 1;

	if (i % 7 == 0) {
		memset(p, 0, 4096);
		return;
	}
	for (k = 0; k < 4096; k++) {
		if (i % 11 == 0) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[k] = (uint8_t)x;
		} else {
			p[k] = (uint8_t)("ramster page "[k % 13] + (k / 512 == i % 8 ? i : 0));
		}
	}
}

static int emit(void *arg, uint16_t tag, const void *h, size_t hl, const void *b, size_t bl)
{
	return image_record(arg, tag, h, hl, b, bl);
}

/* Save z into a new memfd. @return the fd. */
static int save(struct zcache *z, struct snapshot_stats *st)
{
	struct image_writer w;
	int fd = memfd_create("ramster-test-image", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(image_write_begin(&w, fd, KIND), 0);
	assert_int_equal(snapshot_save(z, emit, &w, st), 0);
	assert_int_equal(image_write_end(&w), 0);
	return fd;
}

/* Load fd into z. @return 0 or what refused it. */
static int load(int fd, struct zcache *z, struct snapshot_stats *st)
{
	struct image_reader r;
	struct snapshot_loader l;
	const char *why;
	const uint8_t *p;
	uint16_t tag;
	size_t len;
	int rc;

	rc = image_read_open(&r, fd, KIND, &why);
	if (rc)
		return rc;
	snapshot_loader_init(&l, z);
	while ((rc = image_next(&r, &tag, &p, &len)) == 1) {
		rc = snapshot_load_record(&l, tag, p, len);
		if (rc)
			break;
	}
	image_read_close(&r);
	if (st)
		*st = l.st;
	return rc;
}

struct fill {
	int priv, shared, keep;
};

static void fill(struct zcache *z, struct fill *f)
{
	struct tmem *t = zcache_tmem(z);
	static uint8_t p[4096];
	unsigned i;

	f->priv = tmem_pool_new(t, TMEM_PERSISTENT);
	f->shared = tmem_pool_new(t, TMEM_PERSISTENT | TMEM_SHARED);
	f->keep = tmem_pool_new(t, TMEM_PERSISTENT | TMEM_KEEP_ALL);
	assert_true(f->priv >= 0 && f->shared >= 0 && f->keep >= 0);
	assert_int_equal(tmem_pool_set_owner(t, (uint32_t)f->shared, 3, 4), 0);
	for (i = 0; i < PAGES; i++) {
		struct tmem_oid o = oid_of(i);
		int pool = i % 3 == 0 ? f->priv : i % 3 == 1 ? f->shared : f->keep;
		int rc;

		page_of(i, p);
		rc = tmem_put(t, (uint32_t)pool, &o, i, p);
		/* random pages are refused by the compressing pools, kept raw by keep-all */
		assert_true(rc == 0 || (rc == -E2BIG && i % 11 == 0 && pool != f->keep));
	}
}

static unsigned check(struct zcache *z, const struct fill *f)
{
	struct tmem *t = zcache_tmem(z);
	static uint8_t p[4096], want[4096];
	unsigned i, found = 0;

	for (i = 0; i < PAGES; i++) {
		struct tmem_oid o = oid_of(i);
		int pool = i % 3 == 0 ? f->priv : i % 3 == 1 ? f->shared : f->keep;
		int rc = tmem_get(t, (uint32_t)pool, &o, i, p);

		if (rc == -ENOENT && i % 11 == 0 && pool != f->keep)
			continue;
		assert_int_equal(rc, 0);
		page_of(i, want);
		assert_memory_equal(p, want, 4096);
		found++;
	}
	return found;
}

static void test_round_trip(void **state)
{
	struct zcache *z = tier(256), *z2 = tier(256);
	struct snapshot_stats st, lt;
	struct tmem_pool_info info;
	struct fill f;
	unsigned before, after;
	int fd;

	(void)state;
	fill(z, &f);
	before = check(z, &f);
	fd = save(z, &st);
	assert_int_equal(st.pools, 3);
	assert_int_equal(st.pages_zero + st.pages_local, before);
	zcache_destroy(z);
	assert_int_equal(load(fd, z2, &lt), 0);
	assert_int_equal(lt.pools, 3);
	assert_int_equal(lt.pages_local, st.pages_local);
	assert_int_equal(lt.pages_zero, st.pages_zero);
	assert_int_equal(lt.bytes_local, st.bytes_local);
	assert_int_equal(lt.pages_refused, 0);
	after = check(z2, &f);
	assert_int_equal(after, before);
	/* the pools as they were: ids, flags, owner and weight */
	assert_int_equal(tmem_pool_info(zcache_tmem(z2), (uint32_t)f.shared, &info), 0);
	assert_int_equal(info.flags, TMEM_PERSISTENT | TMEM_SHARED);
	assert_int_equal(info.owner, 3);
	assert_int_equal(info.weight, 4);
	/* and a tier that works on: new pools take new ids, pages come and go */
	assert_true(tmem_pool_new(zcache_tmem(z2), 0) > f.keep);
	{
		struct tmem_oid o = oid_of(1);

		assert_int_equal(tmem_flush_page(zcache_tmem(z2), (uint32_t)f.shared, &o, 1), 0);
	}
	close(fd);
	zcache_destroy(z2);
	fprintf(stderr, "  snapshot: %u pages (%llu zero, %llu in frames, %llu stored bytes)\n",
		before, (unsigned long long)st.pages_zero, (unsigned long long)st.pages_local,
		(unsigned long long)st.bytes_local);
}

/* A byte changed anywhere, a torn end, an unfinished header: refused, nothing built. */
static void test_torn_refused(void **state)
{
	struct zcache *z = tier(256);
	struct snapshot_stats st;
	struct fill f;
	struct image_reader r;
	const char *why;
	uint8_t b;
	off_t size;
	int fd;

	(void)state;
	fill(z, &f);
	fd = save(z, &st);
	zcache_destroy(z);
	size = lseek(fd, 0, SEEK_END);
	/* a flipped byte in the body */
	assert_int_equal(pread(fd, &b, 1, size / 2), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, size / 2), 1);
	assert_int_equal(image_read_open(&r, fd, KIND, &why), -EBADMSG);
	assert_non_null(strstr(why, "digest"));
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, size / 2), 1);
	assert_int_equal(image_read_open(&r, fd, KIND, &why), 0);
	image_read_close(&r);
	/* another kind */
	assert_int_equal(image_read_open(&r, fd, KIND + 1, &why), -EBADMSG);
	/* torn: the end cut off */
	assert_int_equal(ftruncate(fd, size - 100), 0);
	assert_int_equal(image_read_open(&r, fd, KIND, &why), -EBADMSG);
	assert_non_null(strstr(why, "length"));
	/* a writer that died before its header */
	assert_int_equal(pwrite(fd, "\0\0\0\0\0\0\0\0", 8, 0), 8);
	assert_int_equal(image_read_open(&r, fd, KIND, &why), -EBADMSG);
	assert_int_equal(ftruncate(fd, 10), 0);
	assert_int_equal(image_read_open(&r, fd, KIND, &why), -EBADMSG);
	close(fd);
}

/* An image that checks out but says what cannot be: the load stops, -EBADMSG / -EPROTO. */
static void test_bad_records(void **state)
{
	static const struct {
		const char *what;
		uint16_t tag;
		uint8_t rec[48];
		size_t len;
		int want;
	} cases[] = {
	    {"a page before any pool", SNAPSHOT_TAG_PAGE, {0}, 40, -EBADMSG},
	    {"a short pool record", SNAPSHOT_TAG_POOL, {1}, 15, -EBADMSG},
	    {"a pool with unknown flags", SNAPSHOT_TAG_POOL, {1, 0, 0, 0, 0x80}, 16, -EBADMSG},
	    {"a pool id past the table", SNAPSHOT_TAG_POOL, {0, 0, 1, 0}, 16, -EBADMSG},
	    {"an unknown tag", 0x7777, {0}, 4, -EBADMSG},
	};
	struct zcache *z = tier(16);
	struct snapshot_loader l;
	const uint8_t tier_rec[8] = {SNAPSHOT_VERSION, 0, 0, 0, 0, 0, 0, 0};
	const uint8_t other[8] = {SNAPSHOT_VERSION + 1};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snapshot_loader_init(&l, z);
		assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_TIER, tier_rec, 8), 0);
		if (snapshot_load_record(&l, cases[i].tag, cases[i].rec, cases[i].len) !=
		    cases[i].want)
			fail_msg("%s: not refused", cases[i].what);
	}
	snapshot_loader_init(&l, z);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_POOL, cases[1].rec, 16), -EBADMSG);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_TIER, other, 8), -EPROTO);
	zcache_destroy(z);
}

/* Pages of one pool, hand-made: lengths, kinds and holders checked. */
static void test_bad_pages(void **state)
{
	struct zcache *z = tier(16);
	struct snapshot_loader l;
	const uint8_t tier_rec[8] = {SNAPSHOT_VERSION};
	const uint8_t pool_rec[16] = {5, 0, 0, 0, TMEM_PERSISTENT};
	uint8_t page[40 + 8 + 64] = {5};
	uint8_t again[40 + 8];
	struct snapshot_stats st;
	int fd;

	(void)state;
	snapshot_loader_init(&l, z);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_TIER, tier_rec, 8), 0);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_POOL, pool_rec, 16), 0);
	/* the same pool twice */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_POOL, pool_rec, 16), -EBADMSG);
	/* a page of another pool */
	page[0] = 6;
	page[32] = ZCACHE_IMG_ZERO;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), -EBADMSG);
	page[0] = 5;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), 0);
	/* a zero page with bytes; a local page whose length is not what follows */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 41), -EBADMSG);
	page[28] = 1;
	page[32] = ZCACHE_IMG_LOCAL;
	page[34] = 64;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40 + 63), -EBADMSG);
	page[34] = 0;
	page[35] = 0x20; /* 8192 */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), -EBADMSG);
	/* a remote page: holders 1..64, a length, no bytes after its head */
	page[28] = 2;
	page[32] = ZCACHE_IMG_REMOTE;
	page[33] = 2;
	page[34] = 100;
	page[35] = 0;
	page[36] = 0x78; /* its seal version */
	page[40] = 2;
	page[41] = 65; /* no such node */
	page[42] = 1;
	page[43] = 3;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 44), -EBADMSG);
	page[41] = 3;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 45), -EBADMSG);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 44), 0);
	page[33] = 0;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), -EBADMSG);
	/* the remote page is saved again as it came: holders, epochs, length, version */
	fd = save(z, &st);
	assert_int_equal(st.pages_remote, 1);
	assert_int_equal(st.pages_zero, 1);
	{
		struct image_reader r;
		const char *why;
		const uint8_t *p;
		uint16_t tag;
		size_t len;
		int found = 0;

		assert_int_equal(image_read_open(&r, fd, KIND, &why), 0);
		while (image_next(&r, &tag, &p, &len) == 1)
			if (tag == SNAPSHOT_TAG_PAGE && p[32] == ZCACHE_IMG_REMOTE) {
				memcpy(again, p, len);
				assert_int_equal(len, 44);
				found = 1;
			}
		image_read_close(&r);
		assert_true(found);
	}
	page[33] = 2;
	assert_memory_equal(again, page, 44);
	close(fd);
	zcache_destroy(z);
}

/* An erasure-coded remote page: its data fragments ride in the head's holder byte, checked. */
static void test_erasure_pages(void **state)
{
	struct zcache *z = tier(16);
	struct snapshot_loader l;
	const uint8_t tier_rec[8] = {SNAPSHOT_VERSION};
	const uint8_t pool_rec[16] = {5, 0, 0, 0, TMEM_PERSISTENT};
	uint8_t page[40 + 6] = {5}, again[40 + 6];
	struct snapshot_stats st;
	int fd, found = 0;

	(void)state;
	snapshot_loader_init(&l, z);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_TIER, tier_rec, 8), 0);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_POOL, pool_rec, 16), 0);
	page[28] = 3;
	page[32] = ZCACHE_IMG_ZERO;
	page[33] = 2 << 4; /* a zero page has no fragments */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), -EBADMSG);
	page[32] = ZCACHE_IMG_REMOTE;
	page[34] = 200;
	page[40] = 2;
	page[41] = 3;
	page[42] = 4;
	page[43] = page[44] = page[45] = 1;
	page[33] = 3 | 3 << 4; /* no parity */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 46), -EBADMSG);
	page[33] = 3 | 1 << 4; /* one data fragment */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 46), -EBADMSG);
	page[33] = 3 | 2 << 4; /* 2+1 */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 46), 0);
	fd = save(z, &st);
	assert_int_equal(st.pages_remote, 1);
	{
		struct image_reader r;
		const char *why;
		const uint8_t *p;
		uint16_t tag;
		size_t len;

		assert_int_equal(image_read_open(&r, fd, KIND, &why), 0);
		while (image_next(&r, &tag, &p, &len) == 1)
			if (tag == SNAPSHOT_TAG_PAGE && p[32] == ZCACHE_IMG_REMOTE) {
				assert_int_equal(len, 46);
				memcpy(again, p, len);
				found = 1;
			}
		image_read_close(&r);
	}
	assert_true(found);
	assert_memory_equal(again, page, 46);
	close(fd);
	zcache_destroy(z);
}

/* A stripe page (ec_layout = stripes): its slot and stripe id, checked, and saved again as they came. */
static void test_stripe_pages(void **state)
{
	struct zcache *z = tier(16);
	struct snapshot_loader l;
	const uint8_t tier_rec[8] = {SNAPSHOT_VERSION};
	const uint8_t pool_rec[16] = {5, 0, 0, 0, TMEM_PERSISTENT};
	uint8_t page[40 + 8] = {5}, again[40 + 8];
	struct snapshot_stats st;
	int fd, found = 0;

	(void)state;
	snapshot_loader_init(&l, z);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_TIER, tier_rec, 8), 0);
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_POOL, pool_rec, 16), 0);
	page[28] = 4;
	page[32] = ZCACHE_IMG_STRIPE;
	page[33] = 3;                       /* data slot 3 */
	page[40] = 0x45;                    /* stripe number 0x2345 ... */
	page[41] = 0x23;
	page[44] = 0x01;                    /* ... generation 0x030201 */
	page[45] = 0x02;
	page[46] = 0x03;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 40), -EBADMSG); /* no id */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 47), -EBADMSG);
	page[33] = 7; /* no data slot 7 */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 48), -EBADMSG);
	page[33] = 3;
	page[34] = 100; /* a length: its stripe says it */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 48), -EBADMSG);
	page[34] = 0;
	page[47] = 1; /* bits past the id's 56 */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 48), -EBADMSG);
	page[47] = 0;
	page[40] = page[41] = 0; /* number 0 */
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 48), -EBADMSG);
	page[40] = 0x45;
	page[41] = 0x23;
	assert_int_equal(snapshot_load_record(&l, SNAPSHOT_TAG_PAGE, page, 48), 0);
	fd = save(z, &st);
	assert_int_equal(st.pages_remote, 1);
	{
		struct image_reader r;
		const char *why;
		const uint8_t *p;
		uint16_t tag;
		size_t len;

		assert_int_equal(image_read_open(&r, fd, KIND, &why), 0);
		while (image_next(&r, &tag, &p, &len) == 1)
			if (tag == SNAPSHOT_TAG_PAGE && p[32] == ZCACHE_IMG_STRIPE) {
				assert_int_equal(len, 48);
				memcpy(again, p, len);
				found = 1;
			}
		image_read_close(&r);
	}
	assert_true(found);
	assert_memory_equal(again, page, 48);
	close(fd);
	zcache_destroy(z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_torn_refused),
	    cmocka_unit_test(test_bad_records),
	    cmocka_unit_test(test_bad_pages),
	    cmocka_unit_test(test_erasure_pages),
	    cmocka_unit_test(test_stripe_pages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
