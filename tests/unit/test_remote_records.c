/*
 * test_remote_records.c - the warm restart's records of the collective
 * (node/remote/remote_restart.c remote_record_check): each of the right
 * length and fields accepted, a short one refused without reading past it
 * (fuzz_records found a PEER record read before its length was checked),
 * another node's image refused as such.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/util.h"
#include "node/remote/remote.h"

/* An exact-size heap copy: ASan sees a read past it. */
static int check(uint16_t tag, const uint8_t *rec, size_t len, uint32_t self)
{
	uint8_t *c = malloc(len ? len : 1);
	int rc;

	memcpy(c, rec, len);
	rc = remote_record_check(tag, c, len, self);
	free(c);
	return rc;
}

static void test_records(void **state)
{
	uint8_t self[56] = {0}, peer[44] = {0}, flush[48] = {0}, foreign[52 + 100] = {0};
	size_t n;

	(void)state;
	put_le32(self, 2);
	put_le64(self + 4, 0x1234);
	assert_int_equal(check(REMOTE_TAG_SELF, self, sizeof(self), 2), 0);
	assert_int_equal(check(REMOTE_TAG_SELF, self, sizeof(self), 3), -EPROTO);
	assert_int_equal(check(REMOTE_TAG_SELF, self, sizeof(self), 0), -EPROTO);
	assert_int_equal(check(REMOTE_TAG_SELF, self, sizeof(self) - 1, 2), -EBADMSG);

	put_le32(peer, 3);
	put_le64(peer + 4, 0x99);
	assert_int_equal(check(REMOTE_TAG_PEER, peer, sizeof(peer), 2), 0);
	assert_int_equal(check(REMOTE_TAG_PEER, peer, sizeof(peer), 3), -EBADMSG); /* itself */
	for (n = 0; n < sizeof(peer); n++)
		assert_int_equal(check(REMOTE_TAG_PEER, peer, n, 2), -EBADMSG);

	put_le32(flush, 3);
	put_le32(flush + 4, 99);
	assert_int_equal(check(REMOTE_TAG_FLUSH, flush, sizeof(flush), 2),
			 -EBADMSG); /* no such op */
	for (n = 0; n < sizeof(flush); n++)
		assert_int_equal(check(REMOTE_TAG_FLUSH, flush, n, 2), -EBADMSG);

	put_le32(foreign, 3);
	put_le16(foreign + 46, 100);
	assert_int_equal(check(REMOTE_TAG_FOREIGN, foreign, sizeof(foreign), 2), 0);
	assert_int_equal(check(REMOTE_TAG_FOREIGN, foreign, sizeof(foreign) - 1, 2), -EBADMSG);
	foreign[44] = 2; /* persistent is 0 or 1 */
	assert_int_equal(check(REMOTE_TAG_FOREIGN, foreign, sizeof(foreign), 2), -EBADMSG);
	for (n = 0; n < 52; n++)
		assert_int_equal(check(REMOTE_TAG_FOREIGN, foreign, n, 2), -EBADMSG);
	assert_int_equal(check(0x5209, foreign, sizeof(foreign), 2), -EBADMSG);

	/* a stripe: id (number not 0, nothing past 56 bits), a code 2 <= K, 1 <= M, K + M <= 8 */
	{
		uint8_t stripe[80] = {0};

		put_le64(stripe, (7ull << 32) | 9);
		stripe[8] = 4;
		stripe[9] = 2;
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), 0);
		for (n = 0; n < 80; n++)
			assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, n, 2), -EBADMSG);
		stripe[8] = 1;
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
		stripe[8] = 7;
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
		stripe[8] = 4;
		stripe[9] = 0;
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
		stripe[9] = 2;
		stripe[14] = 1; /* padding */
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
		stripe[14] = 0;
		put_le64(stripe, 1ull << 56 | 9);
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
		put_le64(stripe, 7ull << 32);
		assert_int_equal(check(REMOTE_TAG_STRIPE, stripe, sizeof(stripe), 2), -EBADMSG);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
