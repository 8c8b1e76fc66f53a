/*
 * test_nbd_records.c - the warm restart's NBD records (node/nbd/nbd.h): an
 * export's (nbd_record_parse) and a connection's handed over a restart
 * (nbd_conn_record_parse): each of the right length and fields accepted,
 * every field out of its limits refused, a short one refused without reading
 * past it (each parsed from an exact-size heap copy, for ASan).
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
#include "node/nbd/nbd.h"

static int conn(const uint8_t *rec, size_t len, struct nbd_conn_saved *s)
{
	uint8_t *c = malloc(len ? len : 1);
	int rc;

	memcpy(c, rec, len);
	rc = nbd_conn_record_parse(c, len, s);
	if (!rc) /* where the unread bytes are, against our copy */
		assert_memory_equal(s->unread, rec + 16, s->unread_len);
	free(c);
	return rc;
}

static size_t conn_rec(uint8_t *r, uint32_t fd, uint32_t number, uint32_t flags, uint32_t unread)
{
	put_le32(r, fd);
	put_le32(r + 4, number);
	put_le32(r + 8, flags);
	put_le32(r + 12, unread);
	memset(r + 16, 0x5a, unread);
	return 16 + unread;
}

static void test_conn_record(void **state)
{
	static uint8_t r[16 + 5000];
	struct nbd_conn_saved s;
	size_t len;

	(void)state;
	len = conn_rec(r, 9, 2, 1 | 2, 5000);
	assert_int_equal(conn(r, len, &s), 0);
	assert_int_equal(s.fd, 9);
	assert_int_equal(s.number, 2);
	assert_true(s.structured && s.meta_alloc && !s.tcp);
	assert_int_equal(s.unread_len, 5000);
	assert_int_equal(nbd_conn_record_fd(r, len), 9);
	len = conn_rec(r, 3, 0, 4, 0);
	assert_int_equal(conn(r, len, &s), 0);
	assert_true(s.tcp && !s.structured && s.unread_len == 0);

	/* refused: short, the fd out of range, an unknown flag, the length not the record's */
	assert_int_equal(conn(r, 15, &s), -EBADMSG);
	assert_int_equal(conn(r, conn_rec(r, 2, 0, 0, 0), &s), -EBADMSG);
	assert_int_equal(conn(r, conn_rec(r, 65536, 0, 0, 0), &s), -EBADMSG);
	assert_int_equal(conn(r, conn_rec(r, 5, 0, 8, 0), &s), -EBADMSG);
	len = conn_rec(r, 5, 0, 0, 100);
	assert_int_equal(conn(r, len - 1, &s), -EBADMSG);
	put_le32(r + 12, 0xffffffffu); /* more unread than any request: refused, not read */
	assert_int_equal(conn(r, len, &s), -EBADMSG);
	assert_int_equal(nbd_conn_record_fd(r, len), -1);
}

static int export(const uint8_t *rec, size_t len, struct nbd_saved *s)
{
	uint8_t *c = malloc(len ? len : 1);
	int rc;

	memcpy(c, rec, len);
	rc = nbd_record_parse(c, len, s);
	free(c);
	return rc;
}

/* An export's record: size bytes, name, backing (five bitmaps) or not (one). */
static size_t export_rec(uint8_t *r, uint64_t size, const char *name, uint32_t backing)
{
	size_t nlen = strlen(name), mb = (size_t)((size / 4096 + 63) / 64) * 8;

	put_le32(r, 7);
	put_le32(r + 4, 1);
	put_le64(r + 8, size);
	put_le32(r + 16, (uint32_t)nlen);
	put_le32(r + 20, backing);
	memcpy(r + 24, name, nlen);
	memset(r + 24 + nlen, 0xff, mb * (backing ? 5 : 1));
	return 24 + nlen + mb * (backing ? 5 : 1);
}

static void test_export_record(void **state)
{
	static uint8_t r[4096];
	struct nbd_saved s;
	size_t len;

	(void)state;
	len = export_rec(r, 1 << 20, "swap0", 0);
	assert_int_equal(export(r, len, &s), 0);
	assert_string_equal(s.name, "swap0");
	assert_int_equal(s.pool, 7);
	assert_int_equal(s.number, 1);
	assert_int_equal(s.size, 1 << 20);
	assert_int_equal(export(r, export_rec(r, 1 << 20, "disk", 1), &s), 0);
	assert_int_equal(s.backing, 1);

	assert_int_equal(export(r, 23, &s), -EBADMSG);                 /* short */
	assert_int_equal(export(r, len - 1, &s), -EBADMSG);            /* maps cut */
	assert_int_equal(export(r, export_rec(r, 4097, "x", 0), &s), -EBADMSG); /* not pages */
	assert_int_equal(export(r, export_rec(r, 0, "x", 0), &s), -EBADMSG);
	assert_int_equal(export(r, export_rec(r, 4096, "x", 2), &s), -EBADMSG); /* backing 2 */
	len = export_rec(r, 4096, "x", 0);
	put_le32(r + 16, 0); /* no name */
	assert_int_equal(export(r, len, &s), -EBADMSG);
	put_le32(r + 16, 0xffffff00u); /* a name longer than the record */
	assert_int_equal(export(r, len, &s), -EBADMSG);
	len = export_rec(r, 4096, "axb", 0);
	r[25] = '\0'; /* a NUL inside the name */
	assert_int_equal(export(r, len, &s), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conn_record),
	    cmocka_unit_test(test_export_record),
	};

	return cmocka_run_group_tests_name("nbd_records", tests, NULL, NULL);
}
