/*
 * test_seal - sealed pages (node/remote/seal.c): a sealed page opens as itself only:
 * not as another page, another version, another owner's, nor with a byte
 * changed; secure hides the bytes, integrity does not.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/remote/seal.h"

static const char marker[] = "TOPSECRET card 4111";

static void one_mode(bool integrity)
{
	struct seal *s = seal_create(1, integrity), *other = seal_create(1, integrity);
	struct tmem_handle h = {3, {{10, 20, 30}}, 7}, h2 = h;
	uint8_t data[SEAL_PAGE_MAX], blob[SEAL_BLOB_MAX], old[SEAL_BLOB_MAX], out[SEAL_PAGE_MAX];
	uint32_t v, v_old;
	size_t n, n_old, len = 2000;

	assert_non_null(s);
	assert_non_null(other);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)marker[i % (sizeof(marker) - 1)];

	n_old = seal_page(s, &h, data, len, old, &v_old);
	data[0] ^= 1;
	n = seal_page(s, &h, data, len, blob, &v); /* the page put again */
	assert_int_equal(n, len + SEAL_OVERHEAD);
	assert_int_not_equal(v, v_old);
	assert_int_equal(seal_open(s, &h, v, len, blob, n, out), 0);
	assert_memory_equal(out, data, len);
	/* the bytes on the holder: hidden in secure mode only */
	assert_true((memmem(blob, n, marker + 1, 10) != NULL) == integrity);

	/* an older version of the same page, though its own seal is good */
	assert_int_equal(seal_open(s, &h, v_old, len, old, n_old, out), 0);
	assert_int_equal(seal_open(s, &h, v, len, old, n_old, out), -EBADMSG);
	/* another page (every field of the identity counts) */
	h2.index = 8;
	assert_int_equal(seal_open(s, &h2, v, len, blob, n, out), -EBADMSG);
	h2 = h;
	h2.pool = 4;
	assert_int_equal(seal_open(s, &h2, v, len, blob, n, out), -EBADMSG);
	h2 = h;
	h2.oid.w[2] ^= 1;
	assert_int_equal(seal_open(s, &h2, v, len, blob, n, out), -EBADMSG);
	/* another key (another incarnation, another owner) */
	assert_int_equal(seal_open(other, &h, v, len, blob, n, out), -EBADMSG);
	/* any changed bit; a wrong length */
	for (size_t i = 0; i < n; i += 97) {
		blob[i] ^= 0x40;
		assert_int_equal(seal_open(s, &h, v, len, blob, n, out), -EBADMSG);
		blob[i] ^= 0x40;
	}
	assert_int_equal(seal_open(s, &h, v, len, blob, n - 1, out), -EBADMSG);
	assert_int_equal(seal_open(s, &h, v, len - 1, blob, n - 1, out), -EBADMSG);
	assert_int_equal(seal_open(s, &h, v, len, blob, n, out), 0);
	/* a whole page */
	n = seal_page(s, &h, data, SEAL_PAGE_MAX, blob, &v);
	assert_int_equal(n, SEAL_BLOB_MAX);
	assert_int_equal(seal_open(s, &h, v, SEAL_PAGE_MAX, blob, n, out), 0);
	assert_memory_equal(out, data, SEAL_PAGE_MAX);
	seal_destroy(s);
	seal_destroy(other);
}

static void test_secure(void **state)
{
	one_mode(false);
}

static void test_integrity(void **state)
{
	one_mode(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_secure),
	    cmocka_unit_test(test_integrity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
