/*
 * test_wire.c - unit tests of the client protocol framing and decoder.
 *
 * Frames are built with the generated packers and fed to wire_hdr_decode,
 * wire_request_decode and wire_response_decode: every valid op must pass,
 * every rule of wire.h must refuse with its reason, and a hostile message
 * must exhaust the arena cleanly instead of the heap.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/wire.h"
#include "ramster.h"

#define TEST_ITEMS_MAX	(WIRE_BATCH_MAX + 8)
#define TEST_ARENA_SIZE (256u * 1024)

static struct wire_arena test_arena;
static Ramster__Item test_items[TEST_ITEMS_MAX];
static Ramster__Item *test_item_ptrs[TEST_ITEMS_MAX];
static uint8_t test_msg[WIRE_RESP_MSG_MAX];
static const uint8_t test_uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static int test_setup(void **state)
{
	size_t i;

	for (i = 0; i < TEST_ITEMS_MAX; i++) {
		ramster__item__init(&test_items[i]);
		test_items[i].oid0 = 0x1111111111111111ull * (i + 1);
		test_items[i].oid1 = i;
		test_items[i].oid2 = ~(uint64_t)i;
		test_items[i].index = (uint32_t)(i * 3);
		test_item_ptrs[i] = &test_items[i];
	}
	return wire_arena_init(&test_arena, TEST_ARENA_SIZE);
}

static int test_teardown(void **state)
{
	wire_arena_fini(&test_arena);
	return 0;
}

/* A request of op with n items (pool 3, seq 42) and nothing else set. */
static Ramster__Request test_req(Ramster__Op op, size_t n)
{
	Ramster__Request req = RAMSTER__REQUEST__INIT;

	req.seq = 42;
	req.op = op;
	req.pool = 3;
	req.n_items = n;
	req.items = n ? test_item_ptrs : NULL;
	return req;
}

/* Pack req and run the request decoder on it with payload_len; *why on failure. */
static int test_decode(const Ramster__Request *req, uint32_t payload_len, Ramster__Request **out,
		       const char **why)
{
	struct wire_hdr h = {.version = WIRE_VERSION, .kind = WIRE_REQUEST};

	h.msg_len = (uint32_t)ramster__request__pack(req, test_msg);
	h.payload_len = payload_len;
	wire_arena_reset(&test_arena);
	*why = NULL;
	return wire_request_decode(&h, test_msg, &test_arena, out, why);
}

static void test_expect_reject(const Ramster__Request *req, uint32_t payload_len,
			       const char *reason)
{
	Ramster__Request *out = NULL;
	const char *why;

	assert_int_equal(test_decode(req, payload_len, &out, &why), -EPROTO);
	assert_non_null(why);
	assert_string_equal(why, reason);
	assert_null(out);
}

static void test_expect_accept(const Ramster__Request *req, uint32_t payload_len)
{
	Ramster__Request *out = NULL;
	const char *why = NULL;
	size_t i;

	assert_int_equal(test_decode(req, payload_len, &out, &why), 0);
	assert_null(why);
	assert_non_null(out);
	assert_int_equal(out->seq, req->seq);
	assert_int_equal(out->op, req->op);
	assert_int_equal(out->pool, req->pool);
	assert_int_equal(out->flags, req->flags);
	assert_int_equal(out->uuid.len, req->uuid.len);
	if (req->uuid.len)
		assert_memory_equal(out->uuid.data, req->uuid.data, req->uuid.len);
	assert_int_equal(out->n_items, req->n_items);
	for (i = 0; i < req->n_items; i++) {
		assert_int_equal(out->items[i]->oid0, req->items[i]->oid0);
		assert_int_equal(out->items[i]->oid1, req->items[i]->oid1);
		assert_int_equal(out->items[i]->oid2, req->items[i]->oid2);
		assert_int_equal(out->items[i]->index, req->items[i]->index);
	}
	/* everything it decoded lives in the arena */
	assert_true((uint8_t *)out >= test_arena.buf &&
		    (uint8_t *)out < test_arena.buf + test_arena.size);
}

/* ---- header ---------------------------------------------------------------------- */

static void test_hdr_round_trip(void **state)
{
	static const uint8_t want[WIRE_HDR_SIZE] = {
	    'R', 'M', 'S', 'T', WIRE_VERSION, WIRE_RESPONSE, 0, 0, 0x34, 0x12, 0, 0, 0, 0x20, 0, 0};
	struct wire_hdr h;
	const char *why = NULL;
	uint8_t b[WIRE_HDR_SIZE];

	wire_hdr_encode(b, WIRE_RESPONSE, 0x1234, 2 * WIRE_PAGE_SIZE);
	assert_memory_equal(b, want, sizeof(want));
	memset(&h, 0xff, sizeof(h));
	assert_int_equal(wire_hdr_decode(b, WIRE_RESPONSE, &h, &why), 0);
	assert_null(why);
	assert_int_equal(h.version, WIRE_VERSION);
	assert_int_equal(h.kind, WIRE_RESPONSE);
	assert_int_equal(h.msg_len, 0x1234);
	assert_int_equal(h.payload_len, 2 * WIRE_PAGE_SIZE);

	/* the limits themselves are allowed, and so is an empty message */
	wire_hdr_encode(b, WIRE_REQUEST, WIRE_MSG_MAX, WIRE_PAYLOAD_MAX);
	assert_int_equal(wire_hdr_decode(b, WIRE_REQUEST, &h, &why), 0);
	assert_int_equal(h.kind, WIRE_REQUEST);
	assert_int_equal(h.msg_len, WIRE_MSG_MAX);
	assert_int_equal(h.payload_len, WIRE_PAYLOAD_MAX);
	wire_hdr_encode(b, WIRE_RESPONSE, WIRE_RESP_MSG_MAX, 0);
	assert_int_equal(wire_hdr_decode(b, WIRE_RESPONSE, &h, &why), 0);
	assert_int_equal(h.msg_len, WIRE_RESP_MSG_MAX);
	wire_hdr_encode(b, WIRE_REQUEST, 0, 0);
	assert_int_equal(wire_hdr_decode(b, WIRE_REQUEST, &h, &why), 0);
	assert_int_equal(h.msg_len, 0);
	assert_int_equal(h.payload_len, 0);
}

static void test_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void test_hdr_expect_reject(const uint8_t *b, enum wire_kind kind, const char *reason)
{
	struct wire_hdr h;
	const char *why = NULL;

	assert_int_equal(wire_hdr_decode(b, kind, &h, &why), -EPROTO);
	assert_non_null(why);
	assert_string_equal(why, reason);
}

static void test_hdr_rejects(void **state)
{
	uint8_t good[WIRE_HDR_SIZE], b[WIRE_HDR_SIZE];

	wire_hdr_encode(good, WIRE_REQUEST, 100, WIRE_PAGE_SIZE);

	memcpy(b, good, sizeof(b));
	b[3] = 'X';
	test_hdr_expect_reject(b, WIRE_REQUEST, "bad magic");
	memcpy(b, good, sizeof(b));
	test_put_le32(b, 0x524d5354); /* "RMST" big-endian */
	test_hdr_expect_reject(b, WIRE_REQUEST, "bad magic");

	memcpy(b, good, sizeof(b));
	b[4] = WIRE_VERSION + 1;
	test_hdr_expect_reject(b, WIRE_REQUEST, "unsupported version");
	b[4] = 0;
	test_hdr_expect_reject(b, WIRE_REQUEST, "unsupported version");

	test_hdr_expect_reject(good, WIRE_RESPONSE, "unexpected frame kind");
	memcpy(b, good, sizeof(b));
	b[5] = 0;
	test_hdr_expect_reject(b, WIRE_REQUEST, "unexpected frame kind");
	b[5] = 3;
	test_hdr_expect_reject(b, WIRE_REQUEST, "unexpected frame kind");

	memcpy(b, good, sizeof(b));
	b[6] = 1;
	test_hdr_expect_reject(b, WIRE_REQUEST, "reserved field not zero");
	memcpy(b, good, sizeof(b));
	b[7] = 0x80;
	test_hdr_expect_reject(b, WIRE_REQUEST, "reserved field not zero");

	/* a request may not use the response's larger message limit */
	wire_hdr_encode(b, WIRE_REQUEST, WIRE_MSG_MAX + 1, 0);
	test_hdr_expect_reject(b, WIRE_REQUEST, "message too long");
	wire_hdr_encode(b, WIRE_RESPONSE, WIRE_RESP_MSG_MAX + 1, 0);
	test_hdr_expect_reject(b, WIRE_RESPONSE, "message too long");
	wire_hdr_encode(b, WIRE_RESPONSE, UINT32_MAX, 0);
	test_hdr_expect_reject(b, WIRE_RESPONSE, "message too long");

	wire_hdr_encode(b, WIRE_REQUEST, 10, WIRE_PAYLOAD_MAX + WIRE_PAGE_SIZE);
	test_hdr_expect_reject(b, WIRE_REQUEST, "payload too long");
	wire_hdr_encode(b, WIRE_REQUEST, 10, UINT32_MAX);
	test_hdr_expect_reject(b, WIRE_REQUEST, "payload too long");
	wire_hdr_encode(b, WIRE_REQUEST, 10, WIRE_PAGE_SIZE - 1);
	test_hdr_expect_reject(b, WIRE_REQUEST, "payload not whole pages");
	wire_hdr_encode(b, WIRE_RESPONSE, 10, 1);
	test_hdr_expect_reject(b, WIRE_RESPONSE, "payload not whole pages");
}

/* ---- arena ------------------------------------------------------------------------ */

static void test_arena_bump(void **state)
{
	struct wire_arena a;
	uint8_t *p, *q;

	assert_int_equal(wire_arena_init(&a, 100), 0);
	p = a.pa.alloc(a.pa.allocator_data, 3);
	q = a.pa.alloc(a.pa.allocator_data, 5);
	assert_non_null(p);
	assert_non_null(q);
	assert_true(p >= a.buf && p + 3 <= a.buf + a.size);
	assert_true(q >= p + 3 && q + 5 <= a.buf + a.size);
	assert_int_equal((uintptr_t)q % 16, 0);
	a.pa.free(a.pa.allocator_data, p); /* a no-op, must not crash */
	assert_null(a.pa.alloc(a.pa.allocator_data, 200));
	/* once exhausted, even a small request fails until the reset */
	assert_null(a.pa.alloc(a.pa.allocator_data, 1));
	wire_arena_reset(&a);
	assert_non_null(a.pa.alloc(a.pa.allocator_data, 64));
	wire_arena_fini(&a);
	assert_null(a.buf);
}

/* ---- requests ------------------------------------------------------------------------ */

static void test_request_valid(void **state)
{
	Ramster__Request req;

	req = test_req(RAMSTER__OP__OP_POOL_NEW, 0);
	test_expect_accept(&req, 0);
	req.flags = RAMSTER_PERSISTENT;
	test_expect_accept(&req, 0);
	req.pool = -1; /* POOL_NEW ignores pool */
	req.flags = RAMSTER_SHARED;
	req.uuid.data = (uint8_t *)test_uuid;
	req.uuid.len = 16;
	test_expect_accept(&req, 0);
	req.flags = RAMSTER_SHARED | RAMSTER_PERSISTENT;
	test_expect_accept(&req, 0);

	req = test_req(RAMSTER__OP__OP_POOL_DESTROY, 0);
	test_expect_accept(&req, 0);
	req.pool = 0;
	test_expect_accept(&req, 0);

	req = test_req(RAMSTER__OP__OP_PUT, 1);
	test_expect_accept(&req, WIRE_PAGE_SIZE);
	req = test_req(RAMSTER__OP__OP_PUT, 17);
	test_expect_accept(&req, 17 * WIRE_PAGE_SIZE);
	req = test_req(RAMSTER__OP__OP_PUT, WIRE_BATCH_MAX);
	test_expect_accept(&req, WIRE_PAYLOAD_MAX);

	req = test_req(RAMSTER__OP__OP_GET, 1);
	test_expect_accept(&req, 0);
	req = test_req(RAMSTER__OP__OP_GET, WIRE_BATCH_MAX);
	test_expect_accept(&req, 0);

	req = test_req(RAMSTER__OP__OP_FLUSH, 1);
	test_expect_accept(&req, 0);
	req = test_req(RAMSTER__OP__OP_FLUSH_OBJECT, 1);
	test_expect_accept(&req, 0);

	req = test_req(RAMSTER__OP__OP_STATS, 0);
	test_expect_accept(&req, 0);
	req = test_req(RAMSTER__OP__OP_STATUS, 0);
	test_expect_accept(&req, 0);
	req = test_req(RAMSTER__OP__OP_POOLS, 0);
	req.pool = -7; /* admin ops take no pool */
	test_expect_accept(&req, 0);
}

static void test_request_bad_op(void **state)
{
	Ramster__Request req;

	req = test_req(RAMSTER__OP__OP_NONE, 0);
	test_expect_reject(&req, 0, "unknown op");
	req.op = (Ramster__Op)99; /* past the last op */
	test_expect_reject(&req, 0, "unknown op");
	req.op = (Ramster__Op)1000;
	test_expect_reject(&req, 0, "unknown op");
	req.op = (Ramster__Op)-1;
	test_expect_reject(&req, 0, "unknown op");
}

static void test_request_bad_pool_new(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_POOL_NEW, 0);

	req.flags = 4;
	test_expect_reject(&req, 0, "unknown pool flags");
	req.flags = RAMSTER_PERSISTENT | 0x80000000u;
	test_expect_reject(&req, 0, "unknown pool flags");

	req.flags = RAMSTER_SHARED;
	test_expect_reject(&req, 0, "shared pool without a 16-byte uuid");
	req.uuid.data = (uint8_t *)test_uuid;
	req.uuid.len = 15;
	test_expect_reject(&req, 0, "shared pool without a 16-byte uuid");

	req.flags = RAMSTER_PERSISTENT;
	req.uuid.len = 16;
	test_expect_reject(&req, 0, "uuid on a private pool");

	req = test_req(RAMSTER__OP__OP_POOL_NEW, 1);
	test_expect_reject(&req, 0, "unexpected items");
	req = test_req(RAMSTER__OP__OP_GET, 1);
	req.uuid.data = (uint8_t *)test_uuid;
	req.uuid.len = 16;
	test_expect_reject(&req, 0, "unexpected uuid");
	req = test_req(RAMSTER__OP__OP_POOL_NEW, 0);
	test_expect_reject(&req, WIRE_PAGE_SIZE, "unexpected payload");
}

static void test_request_bad_pool(void **state)
{
	static const Ramster__Op ops[] = {RAMSTER__OP__OP_POOL_DESTROY, RAMSTER__OP__OP_PUT,
					  RAMSTER__OP__OP_GET, RAMSTER__OP__OP_FLUSH,
					  RAMSTER__OP__OP_FLUSH_OBJECT};
	Ramster__Request req;
	size_t i, n;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		n = ops[i] == RAMSTER__OP__OP_POOL_DESTROY ? 0 : 1;
		req = test_req(ops[i], n);
		req.pool = -1;
		test_expect_reject(&req, ops[i] == RAMSTER__OP__OP_PUT ? WIRE_PAGE_SIZE : 0,
				   "negative pool id");
		req.pool = INT32_MIN;
		test_expect_reject(&req, ops[i] == RAMSTER__OP__OP_PUT ? WIRE_PAGE_SIZE : 0,
				   "negative pool id");
	}
}

static void test_request_bad_items(void **state)
{
	Ramster__Request req;

	req = test_req(RAMSTER__OP__OP_POOL_DESTROY, 1);
	test_expect_reject(&req, 0, "unexpected items");

	req = test_req(RAMSTER__OP__OP_PUT, 0);
	test_expect_reject(&req, 0, "too few items");
	req = test_req(RAMSTER__OP__OP_PUT, WIRE_BATCH_MAX + 1);
	test_expect_reject(&req, WIRE_PAYLOAD_MAX, "too many items");
	req = test_req(RAMSTER__OP__OP_GET, 0);
	test_expect_reject(&req, 0, "too few items");
	req = test_req(RAMSTER__OP__OP_GET, WIRE_BATCH_MAX + 1);
	test_expect_reject(&req, 0, "too many items");

	req = test_req(RAMSTER__OP__OP_FLUSH, 0);
	test_expect_reject(&req, 0, "too few items");
	req = test_req(RAMSTER__OP__OP_FLUSH, 2);
	test_expect_reject(&req, 0, "too many items");
	req = test_req(RAMSTER__OP__OP_FLUSH_OBJECT, 0);
	test_expect_reject(&req, 0, "too few items");
	req = test_req(RAMSTER__OP__OP_FLUSH_OBJECT, 2);
	test_expect_reject(&req, 0, "too many items");

	req = test_req(RAMSTER__OP__OP_STATS, 1);
	test_expect_reject(&req, 0, "unexpected items");
	req = test_req(RAMSTER__OP__OP_STATUS, 1);
	test_expect_reject(&req, 0, "unexpected items");
	req = test_req(RAMSTER__OP__OP_POOLS, 3);
	test_expect_reject(&req, 0, "unexpected items");
}

static void test_request_bad_payload(void **state)
{
	static const Ramster__Op none[] = {
	    RAMSTER__OP__OP_POOL_DESTROY, RAMSTER__OP__OP_GET,	 RAMSTER__OP__OP_FLUSH,
	    RAMSTER__OP__OP_FLUSH_OBJECT, RAMSTER__OP__OP_STATS, RAMSTER__OP__OP_STATUS,
	    RAMSTER__OP__OP_POOLS};
	Ramster__Request req;
	size_t i, n;

	req = test_req(RAMSTER__OP__OP_PUT, 2);
	test_expect_reject(&req, 0, "payload does not match items");
	test_expect_reject(&req, WIRE_PAGE_SIZE, "payload does not match items");
	test_expect_reject(&req, 3 * WIRE_PAGE_SIZE, "payload does not match items");

	for (i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		n = none[i] == RAMSTER__OP__OP_GET || none[i] == RAMSTER__OP__OP_FLUSH ||
		    none[i] == RAMSTER__OP__OP_FLUSH_OBJECT;
		req = test_req(none[i], n);
		test_expect_reject(&req, WIRE_PAGE_SIZE, "unexpected payload");
	}
}

static void test_request_malformed(void **state)
{
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	struct wire_hdr h = {.version = WIRE_VERSION, .kind = WIRE_REQUEST};
	Ramster__Request req = test_req(RAMSTER__OP__OP_GET, 4), *out = NULL;
	const char *why = NULL;
	size_t len;

	h.msg_len = sizeof(junk);
	wire_arena_reset(&test_arena);
	assert_int_equal(wire_request_decode(&h, junk, &test_arena, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");

	/* a valid message cut short */
	len = ramster__request__pack(&req, test_msg);
	h.msg_len = (uint32_t)len - 1;
	wire_arena_reset(&test_arena);
	why = NULL;
	assert_int_equal(wire_request_decode(&h, test_msg, &test_arena, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");

	/* an empty message decodes (to op NONE, which is then refused) */
	h.msg_len = 0;
	wire_arena_reset(&test_arena);
	assert_int_equal(wire_request_decode(&h, test_msg, &test_arena, &out, &why), -EPROTO);
	assert_string_equal(why, "unknown op");

	/* the decoder holds the message limit even if its caller did not */
	h.msg_len = WIRE_MSG_MAX + 1;
	assert_int_equal(wire_request_decode(&h, test_msg, &test_arena, &out, &why), -EPROTO);
	assert_string_equal(why, "message too long");
	assert_null(out);
}

/*
 * The most items that fit WIRE_MSG_MAX (empty items, 2 bytes each) decode to
 * far more than the message: the arena refuses, the decoder says so.
 */
static void test_request_arena_exhaustion(void **state)
{
	struct wire_hdr h = {.version = WIRE_VERSION, .kind = WIRE_REQUEST};
	Ramster__Request req = test_req(RAMSTER__OP__OP_GET, 0), *out = NULL;
	struct wire_arena big;
	const char *why = NULL;
	size_t len, n = 0;

	len = ramster__request__pack(&req, test_msg);
	while (len + 2 <= WIRE_MSG_MAX) {
		test_msg[len++] = 6 << 3 | 2; /* field 6 (items), length-delimited */
		test_msg[len++] = 0;	      /* an empty Item */
		n++;
	}
	assert_true(n > 30000);
	h.msg_len = (uint32_t)len;

	wire_arena_reset(&test_arena);
	assert_int_equal(wire_request_decode(&h, test_msg, &test_arena, &out, &why), -EPROTO);
	assert_string_equal(why, "message too large to decode");
	assert_null(out);

	/* with room enough the same message decodes, and is refused for its count */
	assert_int_equal(wire_arena_init(&big, 16u << 20), 0);
	assert_int_equal(wire_request_decode(&h, test_msg, &big, &out, &why), -EPROTO);
	assert_string_equal(why, "too many items");
	wire_arena_fini(&big);

	/* the small arena works again after a reset */
	req = test_req(RAMSTER__OP__OP_STATS, 0);
	test_expect_accept(&req, 0);
}

/* ---- responses -------------------------------------------------------------------------- */

/* Pack rsp and check it against req with payload_len; malloc'd decode, freed here. */
static int test_rsp(const Ramster__Response *rsp, const Ramster__Request *req, uint32_t payload_len,
		    const char **why)
{
	struct wire_hdr h = {.version = WIRE_VERSION, .kind = WIRE_RESPONSE};
	Ramster__Response *out = NULL;
	int rc;

	h.msg_len = (uint32_t)ramster__response__pack(rsp, test_msg);
	h.payload_len = payload_len;
	*why = NULL;
	rc = wire_response_decode(&h, test_msg, req, NULL, &out, why);
	if (rc == 0) {
		assert_non_null(out);
		assert_int_equal(out->seq, rsp->seq);
		assert_int_equal(out->result, rsp->result);
		assert_int_equal(out->n_results, rsp->n_results);
		ramster__response__free_unpacked(out, NULL);
	} else {
		assert_non_null(*why);
	}
	return rc;
}

static void test_rsp_reject(const Ramster__Response *rsp, const Ramster__Request *req,
			    uint32_t payload_len, const char *reason)
{
	const char *why;

	assert_int_equal(test_rsp(rsp, req, payload_len, &why), -EPROTO);
	assert_string_equal(why, reason);
}

static void test_rsp_accept(const Ramster__Response *rsp, const Ramster__Request *req,
			    uint32_t payload_len)
{
	const char *why;

	assert_int_equal(test_rsp(rsp, req, payload_len, &why), 0);
	assert_null(why);
}

static void test_response_get(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_GET, 4);
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	int32_t results[4] = {0, -ENOENT, 0, -EIO};

	rsp.seq = 42;
	rsp.results = results;
	rsp.n_results = 4;
	test_rsp_accept(&rsp, &req, 2 * WIRE_PAGE_SIZE);

	rsp.seq = 43;
	test_rsp_reject(&rsp, &req, 2 * WIRE_PAGE_SIZE, "sequence mismatch");
	rsp.seq = 42;

	rsp.n_results = 3;
	test_rsp_reject(&rsp, &req, 2 * WIRE_PAGE_SIZE, "result count does not match items");
	rsp.n_results = 0;
	test_rsp_reject(&rsp, &req, 0, "result count does not match items");
	rsp.n_results = 4;

	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "payload does not match hits");
	test_rsp_reject(&rsp, &req, 3 * WIRE_PAGE_SIZE, "payload does not match hits");
	test_rsp_reject(&rsp, &req, 0, "payload does not match hits");

	results[1] = 1;
	test_rsp_reject(&rsp, &req, 2 * WIRE_PAGE_SIZE, "item result out of range");
	results[1] = -4096;
	test_rsp_reject(&rsp, &req, 2 * WIRE_PAGE_SIZE, "item result out of range");
	results[1] = -4095;
	test_rsp_accept(&rsp, &req, 2 * WIRE_PAGE_SIZE);

	/* no hits, no payload */
	results[0] = results[2] = -ENOENT;
	test_rsp_accept(&rsp, &req, 0);
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");

	/* a batch failed whole: a negative result, no per-item results, nothing follows */
	rsp.result = -ENOENT;
	rsp.n_results = 0;
	test_rsp_accept(&rsp, &req, 0);
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");
	results[0] = 0;
	rsp.n_results = 4;
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");

	rsp.result = 1;
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "result out of range");
}

static void test_response_put(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_PUT, 3);
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	int32_t results[3] = {0, -ENOSPC, -E2BIG};

	rsp.seq = 42;
	rsp.results = results;
	rsp.n_results = 3;
	test_rsp_accept(&rsp, &req, 0);
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");
	rsp.n_results = 4;
	test_rsp_reject(&rsp, &req, 0, "result count does not match items");
	rsp.n_results = 3;
	results[2] = 7;
	test_rsp_reject(&rsp, &req, 0, "item result out of range");
	results[2] = 0;
	rsp.result = 3; /* a count is not a result */
	test_rsp_reject(&rsp, &req, 0, "result out of range");
	rsp.result = -5000;
	test_rsp_reject(&rsp, &req, 0, "result out of range");
}

static void test_response_single(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_POOL_NEW, 0);
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	int32_t results[1] = {0};

	rsp.seq = 42;
	rsp.result = 0;
	test_rsp_accept(&rsp, &req, 0);
	rsp.result = 12345; /* a pool id */
	test_rsp_accept(&rsp, &req, 0);
	rsp.result = -ENOSPC;
	test_rsp_accept(&rsp, &req, 0);
	rsp.result = -4096;
	test_rsp_reject(&rsp, &req, 0, "result out of range");
	rsp.result = 1;
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");

	req = test_req(RAMSTER__OP__OP_FLUSH, 1);
	rsp.result = -ENOENT;
	test_rsp_accept(&rsp, &req, 0);
	rsp.result = 1;
	test_rsp_reject(&rsp, &req, 0, "result out of range");
	rsp.result = 0;
	rsp.results = results;
	rsp.n_results = 1;
	test_rsp_reject(&rsp, &req, 0, "per-item results on a single request");
	rsp.n_results = 0;
	rsp.seq = 0;
	test_rsp_reject(&rsp, &req, 0, "sequence mismatch");
}

/* PING: exactly one page out (and back); node only on a PING. */
static void test_request_ping(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_PING, 0);

	test_expect_accept(&req, WIRE_PAGE_SIZE);
	req.node = 3;
	test_expect_accept(&req, WIRE_PAGE_SIZE);
	test_expect_reject(&req, 0, "ping payload is not one page");
	test_expect_reject(&req, 2 * WIRE_PAGE_SIZE, "ping payload is not one page");
	req = test_req(RAMSTER__OP__OP_STATS, 0);
	req.node = 2;
	test_expect_reject(&req, 0, "unexpected node");
}

/* DRAIN: flags 0 or 1, a node 0..64, no payload, no items. */
static void test_request_drain(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_DRAIN, 0);

	test_expect_accept(&req, 0);
	req.flags = 1;
	req.node = 64;
	test_expect_accept(&req, 0);
	req.node = 65;
	test_expect_reject(&req, 0, "node out of range (1..64, or 0)");
	req.node = 2;
	req.flags = 2;
	test_expect_reject(&req, 0, "drain flags are 0 or 1");
	req.flags = 1;
	test_expect_reject(&req, 10, "unexpected payload");
	/* a uuid is for a shared POOL_NEW only (fuzz_wire found a DRAIN passing with one) */
	{
		uint8_t u[2] = {0x20, 0x2a};

		req.uuid.data = u;
		req.uuid.len = sizeof(u);
		test_expect_reject(&req, 0, "unexpected uuid");
	}
}

/* RELOAD: nothing but the op (the node checks who asks). */
static void test_request_reload(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_RELOAD, 0);

	test_expect_accept(&req, 0);
	req.node = 2;
	test_expect_reject(&req, 0, "unexpected node");
	req.node = 0;
	req.pool = 1;
	test_expect_accept(&req, 0); /* pool is not looked at for admin ops */
	test_expect_reject(&req, 10, "unexpected payload");
}

static void test_response_admin(void **state)
{
	Ramster__Request req = test_req(RAMSTER__OP__OP_POOLS, 0);
	Ramster__Response rsp = RAMSTER__RESPONSE__INIT;
	Ramster__PoolInfo pi[2] = {RAMSTER__POOL_INFO__INIT, RAMSTER__POOL_INFO__INIT};
	Ramster__PoolInfo *pp[2] = {&pi[0], &pi[1]};
	Ramster__Stat st = RAMSTER__STAT__INIT, *sp = &st;
	struct wire_hdr h = {.version = WIRE_VERSION, .kind = WIRE_RESPONSE};
	Ramster__Response *out;
	const char *why;

	rsp.seq = 42;
	rsp.pools = pp;
	rsp.n_pools = 2;
	pi[0].uuid.data = (uint8_t *)test_uuid;
	pi[0].uuid.len = 16;
	test_rsp_accept(&rsp, &req, 0);
	pi[1].uuid.data = (uint8_t *)test_uuid;
	pi[1].uuid.len = 8;
	test_rsp_reject(&rsp, &req, 0, "pool uuid not 16 bytes");
	pi[1].uuid.len = 0;
	test_rsp_reject(&rsp, &req, WIRE_PAGE_SIZE, "unexpected payload");

	/* decoded into an arena too small for it: refused as too large */
	req = test_req(RAMSTER__OP__OP_STATS, 0);
	rsp = (Ramster__Response)RAMSTER__RESPONSE__INIT;
	rsp.seq = 42;
	st.name = (char *)"pages_stored";
	st.value = 77;
	rsp.stats = &sp;
	rsp.n_stats = 1;
	h.msg_len = (uint32_t)ramster__response__pack(&rsp, test_msg);
	wire_arena_reset(&test_arena);
	out = NULL;
	assert_int_equal(wire_response_decode(&h, test_msg, &req, &test_arena.pa, &out, &why), 0);
	assert_string_equal(out->stats[0]->name, "pages_stored");
	assert_int_equal(out->stats[0]->value, 77);
	test_arena.used = test_arena.size - 8;
	out = NULL;
	assert_int_equal(wire_response_decode(&h, test_msg, &req, &test_arena.pa, &out, &why),
			 -EPROTO);
	assert_string_equal(why, "message too large to decode");
	assert_null(out);

	/* junk, and a message over the limit */
	memset(test_msg, 0xff, 16);
	h.msg_len = 16;
	assert_int_equal(wire_response_decode(&h, test_msg, &req, NULL, &out, &why), -EPROTO);
	assert_string_equal(why, "malformed protobuf");
	h.msg_len = WIRE_RESP_MSG_MAX + 1;
	assert_int_equal(wire_response_decode(&h, test_msg, &req, NULL, &out, &why), -EPROTO);
	assert_string_equal(why, "message too long");
}

/* ATTACH: a token of any length passes the decoder (the node answers -EINVAL);
 * a token on any other op, or a negative pool, is a bad frame. */
static void test_request_attach(void **state)
{
	static const uint8_t token[17] = {1};
	Ramster__Request req = test_req(RAMSTER__OP__OP_ATTACH, 0);

	req.token.data = (uint8_t *)token;
	req.token.len = 16;
	test_expect_accept(&req, 0);
	req.token.len = 17;
	test_expect_accept(&req, 0);
	req.token.len = 0;
	test_expect_accept(&req, 0);
	req.pool = -1;
	test_expect_reject(&req, 0, "negative pool id");
	req = test_req(RAMSTER__OP__OP_GET, 1);
	req.token.data = (uint8_t *)token;
	req.token.len = 16;
	test_expect_reject(&req, 0, "unexpected token");
	req = test_req(RAMSTER__OP__OP_ATTACH, 1);
	test_expect_reject(&req, 0, "unexpected items");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hdr_round_trip),
	    cmocka_unit_test(test_hdr_rejects),
	    cmocka_unit_test(test_arena_bump),
	    cmocka_unit_test(test_request_valid),
	    cmocka_unit_test(test_request_bad_op),
	    cmocka_unit_test(test_request_bad_pool_new),
	    cmocka_unit_test(test_request_bad_pool),
	    cmocka_unit_test(test_request_bad_items),
	    cmocka_unit_test(test_request_bad_payload),
	    cmocka_unit_test(test_request_malformed),
	    cmocka_unit_test(test_request_arena_exhaustion),
	    cmocka_unit_test(test_response_get),
	    cmocka_unit_test(test_response_put),
	    cmocka_unit_test(test_response_single),
	    cmocka_unit_test(test_request_ping),
	    cmocka_unit_test(test_request_drain),
	    cmocka_unit_test(test_request_reload),
	    cmocka_unit_test(test_request_attach),
	    cmocka_unit_test(test_response_admin),
	};

	return cmocka_run_group_tests_name("wire", tests, test_setup, test_teardown);
}
