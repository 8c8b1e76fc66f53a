/*
 * test_compress.c - unit tests of page compression: round trips of zero,
 * text and random pages, the zero-page test, corrupt and truncated input,
 * per-thread work memory and every rule of the poor-compression policy.
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
#include <lzo/lzo1x.h>

#include "tmem/compress.h"
#include "tmem/zbud.h"

#define PAGE COMPRESS_PAGE_SIZE

static void random_bytes(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 7;
	size_t i;

	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static void random_page(unsigned char *p, unsigned seed)
{
	random_bytes(p, PAGE, seed);
}

static void text_page(unsigned char *p)
{
	static const char *const words[] = { "tmem ", "ramster ", "zbud ", "frame ",
					     "buddy ", "eviction ", "remote ", "page\n" };
	int i = 0, w = 0;

	while (i < PAGE) {
		const char *s = words[(w * 7 + w / 3) % 8];

		while (*s && i < PAGE)
			p[i++] = (unsigned char)*s++;
		w++;
	}
}

static int setup(void **state)
{
	return compress_init();
}

/* Compress, check the length bounds, decompress and compare. @return the length. */
static int round_trip(const unsigned char *page)
{
	unsigned char dst[COMPRESS_BOUND], out[PAGE];
	int len;

	memset(out, 0x5a, sizeof(out));
	len = compress_page(page, dst);
	assert_true(len > 0);
	assert_true(len <= (int)COMPRESS_BOUND);
	assert_int_equal(compress_unpage(dst, (size_t)len, out), 0);
	assert_memory_equal(out, page, PAGE);
	return len;
}

/* ---- init --------------------------------------------------------------- */

static void test_init_idempotent(void **state)
{
	assert_int_equal(compress_init(), 0);
	assert_int_equal(compress_init(), 0);
}

/* ---- zero pages --------------------------------------------------------- */

static void test_zero_page(void **state)
{
	static unsigned char page[PAGE];

	memset(page, 0, sizeof(page));
	assert_true(compress_page_is_zero(page));
}

static void test_zero_page_last_byte(void **state)
{
	static unsigned char page[PAGE];

	memset(page, 0, sizeof(page));
	page[PAGE - 1] = 1;
	assert_false(compress_page_is_zero(page));
}

static void test_zero_page_any_byte(void **state)
{
	static unsigned char page[PAGE];
	int i;

	memset(page, 0, sizeof(page));
	for (i = 0; i < PAGE; i += 61) {
		page[i] = 0x80;
		assert_false(compress_page_is_zero(page));
		page[i] = 0;
	}
	page[0] = 1;
	assert_false(compress_page_is_zero(page));
	page[0] = 0;
	assert_true(compress_page_is_zero(page));
}

static void test_zero_page_unaligned(void **state)
{
	static unsigned char buf[PAGE + 8];

	memset(buf, 0, sizeof(buf));
	buf[0] = 0xff;                          /* outside the page */
	buf[PAGE + 4] = 0xff;                   /* outside the page */
	assert_true(compress_page_is_zero(buf + 3));
	buf[PAGE + 2] = 1;                      /* its last byte */
	assert_false(compress_page_is_zero(buf + 3));
}

/* ---- round trips -------------------------------------------------------- */

static void test_round_trip_zero(void **state)
{
	static unsigned char page[PAGE];

	memset(page, 0, sizeof(page));
	assert_true(round_trip(page) < 128);
}

static void test_round_trip_text(void **state)
{
	static unsigned char page[PAGE];

	text_page(page);
	assert_true(round_trip(page) < PAGE / 2);
}

static void test_round_trip_random(void **state)
{
	static unsigned char page[PAGE];
	unsigned seed;

	for (seed = 1; seed <= 8; seed++) {
		random_page(page, seed);
		assert_true(round_trip(page) > PAGE);
	}
}

static void test_random_over_eph_limit(void **state)
{
	static unsigned char page[PAGE], dst[COMPRESS_BOUND];
	struct compress_policy pol;
	int len;

	random_page(page, 42);
	len = compress_page(page, dst);
	assert_true(len > ZBUD_BUDDY_MAX);
	compress_policy_default(&pol, ZBUD_BUDDY_MAX);
	assert_true(compress_policy_refuse(&pol, false, (unsigned)len, 0));
	assert_true(compress_policy_refuse(&pol, true, (unsigned)len, 0));
}

static void test_round_trip_mixed(void **state)
{
	static unsigned char page[PAGE];

	text_page(page);
	random_bytes(page + PAGE / 2, PAGE / 2, 3);
	memset(page + PAGE / 2, 0, 100);
	assert_true(round_trip(page) < PAGE);
}

/* ---- bad input ---------------------------------------------------------- */

static int compress_text(unsigned char *dst)
{
	static unsigned char page[PAGE];
	int len;

	text_page(page);
	len = compress_page(page, dst);
	assert_true(len > 3);
	return len;
}

static void test_corrupt_garbage(void **state)
{
	static unsigned char src[512], out[PAGE];

	memset(src, 0xff, sizeof(src));
	assert_int_equal(compress_unpage(src, sizeof(src), out), -EIO);
	random_page(out, 9);
	memcpy(src, out, sizeof(src));
	assert_int_equal(compress_unpage(src, sizeof(src), out), -EIO);
}

static void test_corrupt_end_marker(void **state)
{
	static unsigned char dst[COMPRESS_BOUND], out[PAGE];
	int len = compress_text(dst);

	/* an LZO1X stream ends with the marker 0x11 0x00 0x00 */
	assert_int_equal(dst[len - 3], 0x11);
	dst[len - 3] = 0xff;
	dst[len - 2] = 0xff;
	assert_int_equal(compress_unpage(dst, (size_t)len, out), -EIO);
}

static void test_corrupt_trailing(void **state)
{
	static unsigned char dst[COMPRESS_BOUND + 1], out[PAGE];
	int len = compress_text(dst);

	dst[len] = 0;
	assert_int_equal(compress_unpage(dst, (size_t)len + 1, out), -EIO);
}

static void test_truncated(void **state)
{
	static unsigned char dst[COMPRESS_BOUND], out[PAGE];
	int len = compress_text(dst);

	assert_int_equal(compress_unpage(dst, (size_t)len - 1, out), -EIO);
	assert_int_equal(compress_unpage(dst, (size_t)len / 2, out), -EIO);
	assert_int_equal(compress_unpage(dst, 1, out), -EIO);
	assert_int_equal(compress_unpage(dst, 0, out), -EIO);
	assert_int_equal(compress_unpage(dst, (size_t)len, out), 0);
}

static void test_truncated_random(void **state)
{
	static unsigned char page[PAGE], dst[COMPRESS_BOUND], out[PAGE];
	int len;

	random_page(page, 5);
	len = compress_page(page, dst);
	assert_int_equal(compress_unpage(dst, (size_t)len - 100, out), -EIO);
	assert_int_equal(compress_unpage(dst, (size_t)len - 1, out), -EIO);
}

/* A valid LZO1X stream of n bytes of text, made with liblzo2 directly. */
static size_t lzo_stream(size_t n, unsigned char *dst)
{
	static unsigned char src[2 * PAGE], wrk[LZO1X_1_MEM_COMPRESS];
	lzo_uint out = 2 * COMPRESS_BOUND;

	assert_true(n <= sizeof(src));
	text_page(src);
	text_page(src + PAGE);
	assert_int_equal(lzo1x_1_compress(src, n, dst, &out, wrk), LZO_E_OK);
	return out;
}

static void test_wrong_size_output(void **state)
{
	static unsigned char dst[2 * COMPRESS_BOUND], out[PAGE + 64];
	size_t len;

	/* one byte short, half a page, one byte over, two pages */
	len = lzo_stream(PAGE - 1, dst);
	assert_int_equal(compress_unpage(dst, len, out), -EIO);
	len = lzo_stream(PAGE / 2, dst);
	assert_int_equal(compress_unpage(dst, len, out), -EIO);
	memset(out + PAGE, 0x77, 64);
	len = lzo_stream(PAGE + 1, dst);
	assert_int_equal(compress_unpage(dst, len, out), -EIO);
	len = lzo_stream(2 * PAGE, dst);
	assert_int_equal(compress_unpage(dst, len, out), -EIO);
	for (len = 0; len < 64; len++)
		assert_int_equal(out[PAGE + len], 0x77);  /* nothing written past the page */
	len = lzo_stream(PAGE, dst);
	assert_int_equal(compress_unpage(dst, len, out), 0);
}

/* ---- threads ------------------------------------------------------------ */

#define TH_N 4

static void *thread_round_trips(void *arg)
{
	unsigned char page[PAGE], dst[COMPRESS_BOUND], out[PAGE];
	unsigned seed = (unsigned)(uintptr_t)arg;
	int i, len;

	for (i = 0; i < 200; i++) {
		if (i & 1)
			random_page(page, seed + (unsigned)i);
		else
			text_page(page);
		page[i] = (unsigned char)seed;
		len = compress_page(page, dst);
		if (len <= 0 || compress_unpage(dst, (size_t)len, out) != 0 ||
		    memcmp(page, out, PAGE) != 0)
			return (void *)1;
	}
	return NULL;
}

static void test_threads(void **state)
{
	pthread_t tid[TH_N];
	void *ret;
	int t;

	for (t = 0; t < TH_N; t++)
		assert_int_equal(pthread_create(&tid[t], NULL, thread_round_trips,
						(void *)(uintptr_t)(t + 1)), 0);
	for (t = 0; t < TH_N; t++) {
		assert_int_equal(pthread_join(tid[t], &ret), 0);
		assert_null(ret);
	}
}

/* ---- policy ------------------------------------------------------------- */

/* ---- LZ4, and the choice of compressor ----------------------------------- */

static void test_lz4_round_trip_and_corrupt(void **state)
{
	unsigned char page[PAGE], dst[COMPRESS_BOUND], out[PAGE];
	unsigned seed;
	int len, lzo;

	text_page(page);
	len = compress_page_algo(COMPRESS_LZ4, page, dst);
	lzo = compress_page_algo(COMPRESS_LZO, page, out);
	assert_true(len > 0 && len < PAGE / 4);
	assert_true(lzo > 0);
	/* the two formats differ: LZO cannot read LZ4's bytes as the same page */
	memset(out, 0, sizeof(out));
	assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, (size_t)len, out), 0);
	assert_memory_equal(out, page, PAGE);
	assert_true(compress_unpage_algo(COMPRESS_LZO, dst, (size_t)len, out) != 0 ||
		    memcmp(out, page, PAGE) != 0);
	/* truncated or empty input is -EIO, never a short page */
	assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, (size_t)len - 1, out), -EIO);
	assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, 0, out), -EIO);
	assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, COMPRESS_BOUND + 1, out), -EIO);
	for (seed = 1; seed < 20; seed++) {
		random_page(page, seed);
		len = compress_page_algo(COMPRESS_LZ4, page, dst);
		assert_true(len > PAGE && len <= (int)COMPRESS_BOUND); /* incompressible */
		assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, (size_t)len, out), 0);
		assert_memory_equal(out, page, PAGE);
	}
	memset(page, 0, sizeof(page));
	len = compress_page_algo(COMPRESS_LZ4, page, dst);
	assert_true(len > 0 && len < 64);
	assert_int_equal(compress_unpage_algo(COMPRESS_LZ4, dst, (size_t)len, out), 0);
	assert_memory_equal(out, page, PAGE);
}

static void test_algo_names(void **state)
{
	enum compress_algo a = (enum compress_algo)7;

	assert_int_equal(compress_algo_parse("lz4", &a), 0);
	assert_int_equal(a, COMPRESS_LZ4);
	assert_string_equal(compress_algo_name(a), "lz4");
	assert_int_equal(compress_algo_parse("lzo", &a), 0);
	assert_int_equal(a, COMPRESS_LZO);
	assert_string_equal(compress_algo_name(a), "lzo");
	assert_int_equal(compress_algo_parse("LZ4", &a), -EINVAL);
	assert_int_equal(compress_algo_parse("", &a), -EINVAL);
	assert_true(compress_algo_ok(COMPRESS_LZO) && compress_algo_ok(COMPRESS_LZ4));
	assert_false(compress_algo_ok((enum compress_algo)2));
}

static void test_policy_defaults(void **state)
{
	struct compress_policy p;

	memset(&p, 0xa5, sizeof(p));
	compress_policy_default(&p, 1234);
	assert_int_equal(p.pers_max, 3584);
	assert_int_equal(p.pers_mean_max, 2560);
	assert_int_equal(p.pers_mean_limit, 2560);
	assert_int_equal(p.eph_max, 1234);
}

static void test_policy_pers_max(void **state)
{
	struct compress_policy p;

	compress_policy_default(&p, ZBUD_BUDDY_MAX);
	assert_false(compress_policy_refuse(&p, true, 3584, 0));
	assert_true(compress_policy_refuse(&p, true, 3585, 0));
	assert_true(compress_policy_refuse(&p, true, 4000, 0));
	assert_false(compress_policy_refuse(&p, true, 100, 4000));
}

static void test_policy_pers_mean(void **state)
{
	struct compress_policy p;

	compress_policy_default(&p, ZBUD_BUDDY_MAX);
	/* above mean_max while the mean is above the limit: refused */
	assert_true(compress_policy_refuse(&p, true, 2561, 2561));
	assert_true(compress_policy_refuse(&p, true, 3584, 3000));
	/* the mean at the limit: kept */
	assert_false(compress_policy_refuse(&p, true, 2561, 2560));
	assert_false(compress_policy_refuse(&p, true, 3584, 2560));
	/* at mean_max: kept whatever the mean */
	assert_false(compress_policy_refuse(&p, true, 2560, 4000));
	assert_false(compress_policy_refuse(&p, true, 2561, 0));
}

static void test_policy_eph(void **state)
{
	struct compress_policy p;

	compress_policy_default(&p, ZBUD_BUDDY_MAX);
	assert_false(compress_policy_refuse(&p, false, ZBUD_BUDDY_MAX, 0));
	assert_true(compress_policy_refuse(&p, false, ZBUD_BUDDY_MAX + 1, 0));
	/* the persistent rules do not apply to ephemeral pages */
	assert_false(compress_policy_refuse(&p, false, 3585, 0));
	assert_false(compress_policy_refuse(&p, false, 3000, 4000));
}

static void test_policy_custom(void **state)
{
	struct compress_policy p = { .pers_max = 1000, .pers_mean_max = 500,
				     .pers_mean_limit = 300, .eph_max = 100 };

	assert_false(compress_policy_refuse(&p, true, 200, 0));     /* not eph_max */
	assert_true(compress_policy_refuse(&p, false, 200, 0));
	assert_false(compress_policy_refuse(&p, false, 100, 0));
	assert_true(compress_policy_refuse(&p, true, 1001, 0));
	assert_true(compress_policy_refuse(&p, true, 501, 301));
	assert_false(compress_policy_refuse(&p, true, 501, 300));
	assert_false(compress_policy_refuse(&p, true, 500, 301));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_idempotent),
		cmocka_unit_test(test_zero_page),
		cmocka_unit_test(test_zero_page_last_byte),
		cmocka_unit_test(test_zero_page_any_byte),
		cmocka_unit_test(test_zero_page_unaligned),
		cmocka_unit_test(test_round_trip_zero),
		cmocka_unit_test(test_round_trip_text),
		cmocka_unit_test(test_round_trip_random),
		cmocka_unit_test(test_random_over_eph_limit),
		cmocka_unit_test(test_round_trip_mixed),
		cmocka_unit_test(test_corrupt_garbage),
		cmocka_unit_test(test_corrupt_end_marker),
		cmocka_unit_test(test_corrupt_trailing),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_truncated_random),
		cmocka_unit_test(test_wrong_size_output),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_lz4_round_trip_and_corrupt),
		cmocka_unit_test(test_algo_names),
		cmocka_unit_test(test_policy_defaults),
		cmocka_unit_test(test_policy_pers_max),
		cmocka_unit_test(test_policy_pers_mean),
		cmocka_unit_test(test_policy_eph),
		cmocka_unit_test(test_policy_custom),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
