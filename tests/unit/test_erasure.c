/*
 * test_erasure.c - K+M fragments (node/remote/erasure.c): for every code
 * the node accepts and every pattern of up to M lost fragments, the bytes
 * come back from the K left, and each lost fragment is made again
 * identical; bad indices are refused.
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

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	size_t i;

	srand(seed);
	for (i = 0; i < len; i++)
		p[i] = (uint8_t)rand();
}

/* Every set of K fragments out of K+M (the lost are the others) decodes and rebuilds. */
static void check_code(unsigned k, unsigned m, size_t len)
{
	struct erasure *e = erasure_create(k, m);
	size_t flen = erasure_frag_len(k, len);
	static uint8_t data[ERASURE_DATA_MAX], out[ERASURE_DATA_MAX];
	static uint8_t frags[ERASURE_MAX * ERASURE_FRAG_MAX], again[ERASURE_FRAG_MAX];
	unsigned n = k + m, mask, patterns = 0;

	assert_non_null(e);
	fill(data, len, (unsigned)(k * 100 + m * 10 + len));
	erasure_encode(e, data, len, frags);
	/* the data fragments are the bytes themselves */
	assert_memory_equal(frags, data, len);
	for (mask = 0; mask < (1u << n); mask++) {
		uint8_t idx[ERASURE_MAX];
		const uint8_t *have[ERASURE_MAX];
		unsigned i, c = 0;

		if ((unsigned)__builtin_popcount(mask) != k)
			continue;
		for (i = 0; i < n; i++)
			if (mask & (1u << i)) {
				idx[c] = (uint8_t)i;
				have[c++] = frags + i * flen;
			}
		memset(out, 0xa5, len);
		assert_int_equal(erasure_decode(e, idx, have, len, out), 0);
		assert_memory_equal(out, data, len);
		for (i = 0; i < n; i++) {
			assert_int_equal(erasure_rebuild(e, idx, have, len, i, again), 0);
			assert_memory_equal(again, frags + i * flen, flen);
		}
		/* the fragments given in another order give the same */
		if (k >= 2) {
			uint8_t t = idx[0];
			const uint8_t *tp = have[0];

			idx[0] = idx[k - 1];
			have[0] = have[k - 1];
			idx[k - 1] = t;
			have[k - 1] = tp;
			assert_int_equal(erasure_decode(e, idx, have, len, out), 0);
			assert_memory_equal(out, data, len);
		}
		patterns++;
	}
	assert_true(patterns > 0);
	erasure_destroy(e);
}

static void test_every_loss_pattern(void **state)
{
	static const unsigned codes[][2] = { { 2, 1 }, { 2, 2 }, { 3, 2 }, { 4, 2 },
					     { 4, 3 }, { 5, 3 }, { 6, 2 }, { 4, 4 } };
	static const size_t lens[] = { 1, 7, 24, 1000, 2047, 4096 + 24, ERASURE_DATA_MAX };
	size_t c, l;

	(void)state;
	for (c = 0; c < sizeof(codes) / sizeof(codes[0]); c++)
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			check_code(codes[c][0], codes[c][1], lens[l]);
}

static void test_bad_codes_and_indices(void **state)
{
	struct erasure *e = erasure_create(4, 2);
	static uint8_t data[4096], frags[6 * 1024], out[4096];
	const uint8_t *have[4] = { frags, frags + 1024, frags + 2048, frags + 3072 };
	uint8_t twice[4] = { 0, 1, 1, 2 }, beyond[4] = { 0, 1, 2, 6 };

	(void)state;
	assert_null(erasure_create(1, 1));
	assert_null(erasure_create(4, 0));
	assert_null(erasure_create(6, 3));
	assert_non_null(e);
	assert_int_equal(erasure_k(e), 4);
	assert_int_equal(erasure_m(e), 2);
	erasure_encode(e, data, sizeof(data), frags);
	assert_int_equal(erasure_decode(e, twice, have, sizeof(data), out), -EINVAL);
	assert_int_equal(erasure_decode(e, beyond, have, sizeof(data), out), -EINVAL);
	assert_int_equal(erasure_decode(e, twice, have, 0, out), -EINVAL);
	assert_int_equal(erasure_rebuild(e, beyond, have, sizeof(data), 1, out), -EINVAL);
	assert_int_equal(erasure_rebuild(e, twice + 0, have, sizeof(data), 6, out), -EINVAL);
	erasure_destroy(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_loss_pattern),
	    cmocka_unit_test(test_bad_codes_and_indices),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
