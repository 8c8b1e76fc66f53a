/*
 * test_peerwire.c - the peer message decoder: every op accepted when well
 * formed, every rule of peerwire.h refused with its reason, an exhausted
 * arena a clean failure, and peerwire_pack's bounds. Messages are built with
 * the generated packer, as a peer would.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/peerwire.h"

#define PW_SEQ 42

/* A message with every sub-message it might point at. */
struct pw_msg {
	Ramster__Peer__Msg m;
	Ramster__Peer__Hello hello;
	Ramster__Peer__Auth auth;
	Ramster__Peer__Heartbeat hb;
	Ramster__Peer__Page page;
	uint8_t nonce[64];
	uint8_t mac[64];
	char cluster[128];
};

static struct wire_arena pw_arena;
static uint8_t pw_buf[4096];

static int pw_setup(void **state)
{
	return wire_arena_init(&pw_arena, 64 * 1024);
}

static int pw_teardown(void **state)
{
	wire_arena_fini(&pw_arena);
	return 0;
}

/* Fill p with a well-formed message of op. */
static void pw_valid(struct pw_msg *p, int op)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	ramster__peer__msg__init(&p->m);
	ramster__peer__hello__init(&p->hello);
	ramster__peer__auth__init(&p->auth);
	ramster__peer__heartbeat__init(&p->hb);
	ramster__peer__page__init(&p->page);
	for (i = 0; i < sizeof(p->nonce); i++) {
		p->nonce[i] = (uint8_t)(i * 7 + 1);
		p->mac[i] = (uint8_t)(i * 11 + 5);
	}
	strcpy(p->cluster, "test-cluster");
	p->hello.version = 1;
	p->hello.cluster = p->cluster;
	p->hello.node_id = 3;
	p->hello.incarnation = 0x1122334455667788ull;
	p->hello.nonce.data = p->nonce;
	p->hello.nonce.len = PEERWIRE_NONCE_LEN;
	p->auth.mac.data = p->mac;
	p->auth.mac.len = PEERWIRE_MAC_LEN;
	p->hb.donate_free = 1 << 20;
	p->hb.donate_total = 1 << 30;
	p->hb.sent_ns = 123456789;
	p->page.pool = 7;
	p->page.oid0 = 1;
	p->page.oid1 = 2;
	p->page.oid2 = 3;
	p->page.index = 99;
	p->page.checksum = 0xdeadbeef;

	p->m.op = op;
	switch (op) {
	case RAMSTER__PEER__OP__P_HELLO:
		p->m.hello = &p->hello;
		break;
	case RAMSTER__PEER__OP__P_AUTH:
		p->m.auth = &p->auth;
		break;
	case RAMSTER__PEER__OP__P_HEARTBEAT:
		p->m.heartbeat = &p->hb;
		break;
	case RAMSTER__PEER__OP__P_REPLY:
		p->m.seq = PW_SEQ;
		break;
	default:
		p->m.seq = PW_SEQ;
		p->m.page = &p->page;
		break;
	}
}

/* The payload length a valid message of op carries. */
static size_t pw_plen(int op)
{
	return op == RAMSTER__PEER__OP__P_PUT ? 1000 : 0;
}

static int pw_decode_bytes(const uint8_t *buf, size_t len, size_t plen, Ramster__Peer__Msg **out,
			   const char **why)
{
	wire_arena_reset(&pw_arena);
	*why = NULL;
	*out = NULL;
	return peerwire_decode(buf, len, plen, &pw_arena, out, why);
}

static int pw_decode(const struct pw_msg *p, size_t plen, Ramster__Peer__Msg **out,
		     const char **why)
{
	size_t len = ramster__peer__msg__get_packed_size(&p->m);

	assert_true(len <= sizeof(pw_buf));
	assert_int_equal(ramster__peer__msg__pack(&p->m, pw_buf), len);
	return pw_decode_bytes(pw_buf, len, plen, out, why);
}

static void pw_expect_ok(const struct pw_msg *p, size_t plen)
{
	Ramster__Peer__Msg *out;
	const char *why;
	int rc = pw_decode(p, plen, &out, &why);

	if (rc)
		fail_msg("op %d plen %zu refused: %s", p->m.op, plen, why);
	assert_non_null(out);
	assert_int_equal(out->op, p->m.op);
	assert_int_equal(out->seq, p->m.seq);
}

static void pw_expect_bad(const struct pw_msg *p, size_t plen, const char *reason)
{
	Ramster__Peer__Msg *out;
	const char *why;

	assert_int_equal(pw_decode(p, plen, &out, &why), -EPROTO);
	assert_non_null(why);
	assert_string_equal(why, reason);
}

/* ---- accepted ------------------------------------------------------------- */

static void test_valid_ops(void **state)
{
	struct pw_msg p;
	int op;

	for (op = RAMSTER__PEER__OP__P_HELLO; op <= RAMSTER__PEER__OP__P_REPLY; op++) {
		pw_valid(&p, op);
		pw_expect_ok(&p, pw_plen(op));
	}
}

static void test_valid_fields(void **state)
{
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	assert_int_equal(pw_decode(&p, 0, &out, &why), 0);
	assert_string_equal(out->hello->cluster, "test-cluster");
	assert_int_equal(out->hello->node_id, 3);
	assert_int_equal(out->hello->incarnation, 0x1122334455667788ull);
	assert_int_equal(out->hello->nonce.len, PEERWIRE_NONCE_LEN);
	assert_memory_equal(out->hello->nonce.data, p.nonce, PEERWIRE_NONCE_LEN);

	pw_valid(&p, RAMSTER__PEER__OP__P_PUT);
	p.page.flags = PAGE_PERSISTENT;
	assert_int_equal(pw_decode(&p, PEERWIRE_PAGE_MAX, &out, &why), 0);
	assert_int_equal(out->page->pool, 7);
	assert_int_equal(out->page->oid2, 3);
	assert_int_equal(out->page->index, 99);
	assert_int_equal(out->page->flags, PAGE_PERSISTENT);
	assert_int_equal(out->page->checksum, 0xdeadbeef);
}

static void test_valid_edges(void **state)
{
	struct pw_msg p;

	/* hello: the longest cluster name, both ends of the node id range */
	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	memset(p.cluster, 'c', PEERWIRE_CLUSTER_MAX);
	p.cluster[PEERWIRE_CLUSTER_MAX] = 0;
	p.hello.node_id = 1;
	pw_expect_ok(&p, 0);
	p.hello.node_id = PEERWIRE_NODE_MAX;
	pw_expect_ok(&p, 0);
	/* hello, auth and heartbeat may carry any seq */
	p.m.seq = 5;
	pw_expect_ok(&p, 0);

	/* put: 1 and PEERWIRE_PAGE_MAX payload bytes */
	pw_valid(&p, RAMSTER__PEER__OP__P_PUT);
	pw_expect_ok(&p, 1);
	pw_expect_ok(&p, PEERWIRE_PAGE_MAX);

	/* get may ask to free after */
	pw_valid(&p, RAMSTER__PEER__OP__P_GET);
	p.page.flags = PAGE_PERSISTENT | PAGE_DELETE;
	pw_expect_ok(&p, 0);

	/* replies: plain, failed, with page and bytes, the most negative errno */
	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	pw_expect_ok(&p, 0);
	p.m.result = -ENOENT;
	pw_expect_ok(&p, 0);
	p.m.result = -4095;
	pw_expect_ok(&p, 0);
	p.m.result = 0;
	p.m.page = &p.page;
	pw_expect_ok(&p, 1);
	pw_expect_ok(&p, PEERWIRE_PAGE_MAX);
	p.m.page = NULL;
	pw_expect_ok(&p, PEERWIRE_PAGE_MAX);
}

/* A newer peer's fields are skipped, as protobuf promises. */
static void test_unknown_field(void **state)
{
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;
	size_t len;

	pw_valid(&p, RAMSTER__PEER__OP__P_GET);
	len = ramster__peer__msg__pack(&p.m, pw_buf);
	pw_buf[len++] = 15 << 3; /* field 15, varint */
	pw_buf[len++] = 1;
	assert_int_equal(pw_decode_bytes(pw_buf, len, 0, &out, &why), 0);
	assert_int_equal(out->op, RAMSTER__PEER__OP__P_GET);
}

/* Field number 0 does not exist; protobuf-c lets it through as a long varint tag
 * (found by fuzz_peerwire: it then packs a tag it cannot unpack). */
static void test_field_zero(void **state)
{
	static const uint8_t zero_tag[] = { 0x81, 0x00, 1, 2, 3, 4, 5, 6, 7, 8 };
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;
	size_t len;

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	len = ramster__peer__msg__pack(&p.m, pw_buf);
	memcpy(pw_buf + len, zero_tag, sizeof(zero_tag));
	assert_int_equal(pw_decode_bytes(pw_buf, len + sizeof(zero_tag), 0, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");

	/* inside a sub-message: page (field 7) holding only the bad field */
	pw_valid(&p, RAMSTER__PEER__OP__P_GET);
	p.m.page = NULL;
	len = ramster__peer__msg__pack(&p.m, pw_buf);
	pw_buf[len++] = 7 << 3 | 2;
	pw_buf[len++] = sizeof(zero_tag);
	memcpy(pw_buf + len, zero_tag, sizeof(zero_tag));
	len += sizeof(zero_tag);
	assert_int_equal(pw_decode_bytes(pw_buf, len, 0, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");
}

/* ---- refused -------------------------------------------------------------- */

static void test_bad_bytes(void **state)
{
	static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;
	size_t len;

	assert_int_equal(pw_decode_bytes(junk, sizeof(junk), 0, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");
	assert_null(out);

	/* a message cut short */
	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	len = ramster__peer__msg__pack(&p.m, pw_buf);
	assert_int_equal(pw_decode_bytes(pw_buf, len - 3, 0, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");

	/* the empty message is op P_NONE */
	assert_int_equal(pw_decode_bytes(pw_buf, 0, 0, &out, &why), -EPROTO);
	assert_string_equal(why, "unknown op");
}

static void test_bad_op(void **state)
{
	static const int ops[] = { RAMSTER__PEER__OP__P_NONE, 99, 1000, -1 };
	struct pw_msg p;
	size_t i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		pw_valid(&p, RAMSTER__PEER__OP__P_GET);
		p.m.op = ops[i];
		pw_expect_bad(&p, 0, "unknown op");
	}
}

/* P_ECHO: a payload up to a page, no page message. */
static void test_echo(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_GET);
	p.m.op = RAMSTER__PEER__OP__P_ECHO;
	p.m.page = NULL;
	pw_expect_ok(&p, 4096);
	pw_expect_ok(&p, 0);
	pw_expect_bad(&p, 4097, "payload too long");
}

/* P_RETURN: a page and its bytes (1..4096), persistent flag only. */
static void test_return(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_PUT);
	p.m.op = RAMSTER__PEER__OP__P_RETURN;
	pw_expect_ok(&p, 1000);
	pw_expect_ok(&p, 4096);
	pw_expect_bad(&p, 4097, "payload too long");
	pw_expect_bad(&p, 0, "payload missing");
	p.page.flags = 2; /* PAGE_DELETE means nothing here */
	pw_expect_bad(&p, 1000, "delete flag where it means nothing (put, return)");
	pw_valid(&p, RAMSTER__PEER__OP__P_PUT);
	p.m.op = RAMSTER__PEER__OP__P_RETURN;
	p.m.page = NULL;
	pw_expect_bad(&p, 1000, "page missing");
}

/* P_DRAIN: exactly one byte, no page. */
static void test_drain(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_GET);
	p.m.op = RAMSTER__PEER__OP__P_DRAIN;
	p.m.page = NULL;
	pw_expect_ok(&p, 1);
	pw_expect_bad(&p, 0, "payload missing");
	pw_expect_bad(&p, 2, "payload too long");
	p.m.page = &p.page;
	pw_expect_bad(&p, 1, "unexpected page");
}

static void test_bad_hello(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.m.hello = NULL;
	pw_expect_bad(&p, 0, "hello missing");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.hello.version = 0;
	pw_expect_bad(&p, 0, "hello version zero");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.cluster[0] = 0;
	pw_expect_bad(&p, 0, "empty cluster name");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	memset(p.cluster, 'c', PEERWIRE_CLUSTER_MAX + 1);
	p.cluster[PEERWIRE_CLUSTER_MAX + 1] = 0;
	pw_expect_bad(&p, 0, "cluster name too long");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.hello.node_id = 0;
	pw_expect_bad(&p, 0, "node id out of range");
	p.hello.node_id = PEERWIRE_NODE_MAX + 1;
	pw_expect_bad(&p, 0, "node id out of range");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.hello.nonce.len = PEERWIRE_NONCE_LEN - 1;
	pw_expect_bad(&p, 0, "nonce not 32 bytes");
	p.hello.nonce.len = PEERWIRE_NONCE_LEN + 1;
	pw_expect_bad(&p, 0, "nonce not 32 bytes");
	p.hello.nonce.len = 0;
	pw_expect_bad(&p, 0, "nonce not 32 bytes");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	pw_expect_bad(&p, 1, "unexpected payload");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.m.page = &p.page;
	pw_expect_bad(&p, 0, "unexpected page");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.m.auth = &p.auth;
	pw_expect_bad(&p, 0, "unexpected auth");

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	p.m.result = -1;
	pw_expect_bad(&p, 0, "result on a request");
}

static void test_bad_auth(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_AUTH);
	p.m.auth = NULL;
	pw_expect_bad(&p, 0, "auth missing");

	pw_valid(&p, RAMSTER__PEER__OP__P_AUTH);
	p.auth.mac.len = PEERWIRE_MAC_LEN - 1;
	pw_expect_bad(&p, 0, "mac not 32 bytes");
	p.auth.mac.len = PEERWIRE_MAC_LEN + 1;
	pw_expect_bad(&p, 0, "mac not 32 bytes");

	pw_valid(&p, RAMSTER__PEER__OP__P_AUTH);
	pw_expect_bad(&p, 32, "unexpected payload");

	pw_valid(&p, RAMSTER__PEER__OP__P_AUTH);
	p.m.hello = &p.hello;
	pw_expect_bad(&p, 0, "unexpected hello");
}

static void test_bad_heartbeat(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_HEARTBEAT);
	p.m.heartbeat = NULL;
	pw_expect_bad(&p, 0, "heartbeat missing");

	pw_valid(&p, RAMSTER__PEER__OP__P_HEARTBEAT);
	pw_expect_bad(&p, 1, "unexpected payload");

	pw_valid(&p, RAMSTER__PEER__OP__P_HEARTBEAT);
	p.m.page = &p.page;
	pw_expect_bad(&p, 0, "unexpected page");
}

/* The rules every page request shares. */
static void test_bad_page_requests(void **state)
{
	struct pw_msg p;
	int op;

	for (op = RAMSTER__PEER__OP__P_PUT; op <= RAMSTER__PEER__OP__P_FLUSH_POOL; op++) {
		pw_valid(&p, op);
		p.m.seq = 0;
		pw_expect_bad(&p, pw_plen(op), "zero sequence number");

		pw_valid(&p, op);
		p.m.page = NULL;
		pw_expect_bad(&p, pw_plen(op), "page missing");

		pw_valid(&p, op);
		p.page.flags = 4;
		pw_expect_bad(&p, pw_plen(op), "unknown page flags");
		p.page.flags = 1u << 31;
		pw_expect_bad(&p, pw_plen(op), "unknown page flags");

		pw_valid(&p, op);
		p.m.result = -5;
		pw_expect_bad(&p, pw_plen(op), "result on a request");

		pw_valid(&p, op);
		p.m.heartbeat = &p.hb;
		pw_expect_bad(&p, pw_plen(op), "unexpected heartbeat");

		pw_valid(&p, op);
		if (op == RAMSTER__PEER__OP__P_PUT) {
			pw_expect_bad(&p, 0, "payload missing");
			pw_expect_bad(&p, PEERWIRE_PAGE_MAX + 1, "payload too long");
		} else {
			pw_expect_bad(&p, 1, "unexpected payload");
			pw_expect_bad(&p, PEERWIRE_PAGE_MAX, "unexpected payload");
		}
	}

	pw_valid(&p, RAMSTER__PEER__OP__P_PUT);
	p.page.flags = PAGE_DELETE;
	pw_expect_bad(&p, 100, "delete flag where it means nothing (put, return)");
	p.page.flags = PAGE_DELETE | PAGE_PERSISTENT;
	pw_expect_bad(&p, 100, "delete flag where it means nothing (put, return)");
}

static void test_bad_reply(void **state)
{
	struct pw_msg p;

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	p.m.seq = 0;
	pw_expect_bad(&p, 0, "zero sequence number");

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	p.m.result = 1;
	pw_expect_bad(&p, 0, "result out of range");
	p.m.result = -4096;
	pw_expect_bad(&p, 0, "result out of range");
	p.m.result = INT32_MIN;
	pw_expect_bad(&p, 0, "result out of range");

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	pw_expect_bad(&p, PEERWIRE_PAGE_MAX + 1, "payload too long");

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	p.m.result = -ENOENT;
	pw_expect_bad(&p, 10, "payload on a failed reply");

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	p.m.hello = &p.hello;
	pw_expect_bad(&p, 0, "unexpected hello");

	pw_valid(&p, RAMSTER__PEER__OP__P_REPLY);
	p.m.page = &p.page;
	p.page.flags = 8;
	pw_expect_bad(&p, 0, "unknown page flags");
}

/* ---- arena ---------------------------------------------------------------- */

/* Too small an arena fails cleanly; from some size on, the same bytes decode. */
static void test_arena_exhaustion(void **state)
{
	struct wire_arena small;
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;
	size_t len, size;
	int ok_seen = 0, rc;

	pw_valid(&p, RAMSTER__PEER__OP__P_HELLO);
	memset(p.cluster, 'x', PEERWIRE_CLUSTER_MAX);
	p.cluster[PEERWIRE_CLUSTER_MAX] = 0;
	len = ramster__peer__msg__pack(&p.m, pw_buf);

	for (size = 0; size <= 1024; size += 8) {
		assert_int_equal(wire_arena_init(&small, size), 0);
		out = NULL;
		why = NULL;
		rc = peerwire_decode(pw_buf, len, 0, &small, &out, &why);
		if (rc == 0) {
			assert_string_equal(out->hello->cluster, p.cluster);
			ok_seen = 1;
		} else {
			assert_int_equal(rc, -EPROTO);
			assert_false(ok_seen); /* more room never makes it fail */
			assert_string_equal(why, "message too large to decode");
			assert_null(out);
		}
		/* an arena not reset since it refused stays refused */
		if (rc) {
			assert_int_equal(peerwire_decode(pw_buf, len, 0, &small, &out, &why),
					 -EPROTO);
			wire_arena_reset(&small);
		}
		wire_arena_fini(&small);
	}
	assert_true(ok_seen);
}

/* ---- pack ----------------------------------------------------------------- */

static void test_pack(void **state)
{
	Ramster__Peer__Msg *out;
	const char *why;
	struct pw_msg p;
	uint8_t buf[512];
	int n;

	pw_valid(&p, RAMSTER__PEER__OP__P_HEARTBEAT);
	p.hb.dropped_session = 0x123456789abcull; /* a holder dropped the receiver's pages */
	n = peerwire_pack(&p.m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal((size_t)n, ramster__peer__msg__get_packed_size(&p.m));
	assert_int_equal(peerwire_pack(&p.m, buf, (size_t)n), n);
	assert_int_equal(peerwire_pack(&p.m, buf, (size_t)n - 1), -EMSGSIZE);
	assert_int_equal(peerwire_pack(&p.m, buf, 0), -EMSGSIZE);

	wire_arena_reset(&pw_arena);
	assert_int_equal(peerwire_decode(buf, (size_t)n, 0, &pw_arena, &out, &why), 0);
	assert_int_equal(out->op, RAMSTER__PEER__OP__P_HEARTBEAT);
	assert_int_equal(out->heartbeat->donate_total, 1 << 30);
	assert_int_equal(out->heartbeat->sent_ns, 123456789);
	assert_true(out->heartbeat->dropped_session == 0x123456789abcull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_ops),
		cmocka_unit_test(test_valid_fields),
		cmocka_unit_test(test_valid_edges),
		cmocka_unit_test(test_unknown_field),
		cmocka_unit_test(test_field_zero),
		cmocka_unit_test(test_bad_bytes),
		cmocka_unit_test(test_bad_op),
	cmocka_unit_test(test_echo),
	cmocka_unit_test(test_return),
	cmocka_unit_test(test_drain),
		cmocka_unit_test(test_bad_hello),
		cmocka_unit_test(test_bad_auth),
		cmocka_unit_test(test_bad_heartbeat),
		cmocka_unit_test(test_bad_page_requests),
		cmocka_unit_test(test_bad_reply),
		cmocka_unit_test(test_arena_exhaustion),
		cmocka_unit_test(test_pack),
	};

	return cmocka_run_group_tests(tests, pw_setup, pw_teardown);
}
