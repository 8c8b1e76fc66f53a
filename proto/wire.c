/*
 * wire.c - framing of the client protocol and its one decoder (wire.h).
 *
 * Headers are (de)serialized byte by byte, little-endian, never by casting a
 * struct over the buffer. Every frame is checked whole before anyone acts on
 * it; a failure names a short static reason. Requests decode into a bump
 * arena, so a hostile message can cost at most the arena, never the heap.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/fhdr.h"
#include "proto/wire.h"

#define WIRE_ARENA_ALIGN 16
#define WIRE_ERRNO_MAX	 4095 /* results are 0 or -1..-WIRE_ERRNO_MAX */

/* ---- header ---------------------------------------------------------------- */

void wire_hdr_encode(uint8_t *out, enum wire_kind kind, uint32_t msg_len, uint32_t payload_len)
{
	fhdr_encode(out, WIRE_MAGIC, WIRE_VERSION, (uint8_t)kind, msg_len, payload_len);
}

int wire_hdr_decode(const uint8_t *in, enum wire_kind expect, struct wire_hdr *h, const char **why)
{
	const struct fhdr_spec spec = {
	    .magic = WIRE_MAGIC,
	    .version = WIRE_VERSION,
	    .kind = (uint8_t)expect,
	    .kind_why = "unexpected frame kind",
	    .msg_max = expect == WIRE_RESPONSE ? WIRE_RESP_MSG_MAX : WIRE_MSG_MAX,
	    .payload_max = WIRE_PAYLOAD_MAX,
	};
	struct fhdr f;

	if (fhdr_decode(in, &spec, &f, why))
		return -EPROTO;
	if (f.payload_len % WIRE_PAGE_SIZE) {
		*why = "payload not whole pages";
		return -EPROTO;
	}
	h->version = f.version;
	h->kind = f.kind;
	h->msg_len = f.msg_len;
	h->payload_len = f.payload_len;
	return 0;
}

/* ---- arena -------------------------------------------------------------------
 * used > size marks an arena that refused an allocation since its last reset:
 * the decoder then says "too large" rather than "malformed".
 */

static void *wire_arena_alloc(void *data, size_t n)
{
	struct wire_arena *a = data;
	uintptr_t base = (uintptr_t)a->buf;
	size_t off;

	if (a->used > a->size)
		return NULL;
	off = ((base + a->used + WIRE_ARENA_ALIGN - 1) & ~(uintptr_t)(WIRE_ARENA_ALIGN - 1)) - base;
	if (off > a->size || n > a->size - off) {
		a->used = a->size + 1;
		return NULL;
	}
	a->used = off + n;
	return a->buf + off;
}

static void wire_arena_free(void *data, void *p)
{
	/* everything goes at the next reset */
}

static int wire_arena_exhausted(const struct wire_arena *a)
{
	return a->used > a->size;
}

int wire_arena_init(struct wire_arena *a, size_t size)
{
	memset(a, 0, sizeof(*a));
	a->buf = malloc(size ? size : 1);
	if (!a->buf)
		return -ENOMEM;
	a->size = size;
	a->pa.alloc = wire_arena_alloc;
	a->pa.free = wire_arena_free;
	a->pa.allocator_data = a;
	return 0;
}

void wire_arena_fini(struct wire_arena *a)
{
	free(a->buf);
	memset(a, 0, sizeof(*a));
}

void wire_arena_reset(struct wire_arena *a)
{
	a->used = 0;
}

/* ---- requests ------------------------------------------------------------------ */

/* What each op carries besides seq. An op without a row (valid == 0) is refused. */
struct wire_op_rule {
	uint8_t valid;
	uint8_t pool;	    /* takes a pool id: it must be >= 0 */
	uint16_t min_items; /* items allowed: min_items..max_items */
	uint16_t max_items;
};

static const struct wire_op_rule wire_op_rules[] = {
    [RAMSTER__OP__OP_POOL_NEW] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_POOL_DESTROY] = {1, 1, 0, 0},
    [RAMSTER__OP__OP_PUT] = {1, 1, 1, WIRE_BATCH_MAX},
    [RAMSTER__OP__OP_GET] = {1, 1, 1, WIRE_BATCH_MAX},
    [RAMSTER__OP__OP_FLUSH] = {1, 1, 1, 1},
    [RAMSTER__OP__OP_FLUSH_OBJECT] = {1, 1, 1, 1},
    [RAMSTER__OP__OP_STATS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_STATUS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_POOLS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_PEERS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_EXPORTS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_PING] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_DRAIN] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_RELOAD] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_CLIENTS] = {1, 0, 0, 0},
    [RAMSTER__OP__OP_ATTACH] = {1, 1, 0, 0},
    [RAMSTER__OP__OP_RESTART] = {1, 0, 0, 0},
};

static const struct wire_op_rule *wire_op_rule(int op)
{
	if (op < 0 || (size_t)op >= sizeof(wire_op_rules) / sizeof(wire_op_rules[0]))
		return NULL;
	return wire_op_rules[op].valid ? &wire_op_rules[op] : NULL;
}

static const char *wire_request_check(const struct wire_hdr *h, const Ramster__Request *req)
{
	const struct wire_op_rule *rule = wire_op_rule(req->op);
	uint32_t want_payload = 0;

	if (!rule)
		return "unknown op";
	if (rule->pool && req->pool < 0)
		return "negative pool id";
	if (req->n_items < rule->min_items)
		return rule->max_items ? "too few items" : "unexpected items";
	if (req->n_items > rule->max_items)
		return rule->max_items ? "too many items" : "unexpected items";
	if (req->op == RAMSTER__OP__OP_POOL_NEW) {
		if (req->flags & ~(uint32_t)(WIRE_POOL_PERSISTENT | WIRE_POOL_SHARED))
			return "unknown pool flags";
		if ((req->flags & WIRE_POOL_SHARED) && req->uuid.len != 16)
			return "shared pool without a 16-byte uuid";
		if (!(req->flags & WIRE_POOL_SHARED) && req->uuid.len != 0)
			return "uuid on a private pool";
		if (req->mode > 0777)
			return "pool mode above 0777";
		if (req->mode && !(req->flags & WIRE_POOL_SHARED))
			return "mode on a private pool";
	} else if (req->uuid.len) {
		/* client.proto: the uuid is empty but for a shared POOL_NEW (a DRAIN
		 * with one passed here once: fuzz_wire found it) */
		return "unexpected uuid";
	}
	/* an ATTACH's token of a wrong length is the request's error (-EINVAL), not the frame's */
	if (req->token.len && req->op != RAMSTER__OP__OP_ATTACH)
		return "unexpected token";
	if (req->op == RAMSTER__OP__OP_DRAIN && req->flags > 1)
		return "drain flags are 0 or 1";
	if (req->mode && req->op != RAMSTER__OP__OP_POOL_NEW)
		return "unexpected mode";
	if (req->node > 64)
		return "node out of range (1..64, or 0)";
	if (req->node && req->op != RAMSTER__OP__OP_PING && req->op != RAMSTER__OP__OP_DRAIN)
		return "unexpected node";
	if (req->op == RAMSTER__OP__OP_PUT)
		want_payload = (uint32_t)req->n_items * WIRE_PAGE_SIZE;
	if (req->op == RAMSTER__OP__OP_PING)
		want_payload = WIRE_PAGE_SIZE;
	if (h->payload_len != want_payload && req->op == RAMSTER__OP__OP_PING)
		return "ping payload is not one page";
	if (h->payload_len != want_payload)
		return want_payload ? "payload does not match items" : "unexpected payload";
	return NULL;
}

int wire_request_decode(const struct wire_hdr *h, const uint8_t *msg, struct wire_arena *a,
			Ramster__Request **out, const char **why)
{
	Ramster__Request *req;
	const char *bad;

	if (h->msg_len > WIRE_MSG_MAX) {
		*why = "message too long";
		return -EPROTO;
	}
	req = ramster__request__unpack(&a->pa, h->msg_len, msg);
	if (!req) {
		*why =
		    wire_arena_exhausted(a) ? "message too large to decode" : "malformed protobuf";
		return -EPROTO;
	}
	bad = wire_request_check(h, req);
	if (bad) {
		*why = bad;
		return -EPROTO;
	}
	*out = req;
	return 0;
}

/* ---- responses ----------------------------------------------------------------- */

static int wire_errno_ok(int32_t v)
{
	return v <= 0 && v >= -WIRE_ERRNO_MAX;
}

static const char *wire_response_check(const struct wire_hdr *h, const Ramster__Response *rsp,
				       const Ramster__Request *req)
{
	int batch = req->op == RAMSTER__OP__OP_PUT || req->op == RAMSTER__OP__OP_GET;
	uint32_t hits = 0;
	size_t i;

	if (rsp->seq != req->seq)
		return "sequence mismatch";
	if (req->op == RAMSTER__OP__OP_POOL_NEW || req->op == RAMSTER__OP__OP_ATTACH
		? rsp->result < -WIRE_ERRNO_MAX
		: !wire_errno_ok(rsp->result))
		return "result out of range";
	if (req->op == RAMSTER__OP__OP_PING) {
		if (rsp->n_results)
			return "per-item results on a single request";
		if (h->payload_len != (rsp->result == 0 ? WIRE_PAGE_SIZE : 0u))
			return "ping payload is not one page";
	} else if (!batch) {
		if (rsp->n_results)
			return "per-item results on a single request";
		if (h->payload_len)
			return "unexpected payload";
	} else if (rsp->n_results == req->n_items) {
		for (i = 0; i < rsp->n_results; i++) {
			if (!wire_errno_ok(rsp->results[i]))
				return "item result out of range";
			hits += rsp->results[i] == 0;
		}
		if (req->op == RAMSTER__OP__OP_PUT || rsp->result < 0)
			hits = 0;
		if (h->payload_len != hits * WIRE_PAGE_SIZE)
			return hits ? "payload does not match hits" : "unexpected payload";
	} else if (rsp->n_results || rsp->result == 0) {
		return "result count does not match items";
	} else if (h->payload_len) {
		/* the batch failed whole (result < 0, no results): nothing follows */
		return "unexpected payload";
	}
	for (i = 0; i < rsp->n_pools; i++)
		if (rsp->pools[i]->uuid.len != 0 && rsp->pools[i]->uuid.len != 16)
			return "pool uuid not 16 bytes";
	if (rsp->token.len != 0 && rsp->token.len != 16)
		return "pool token not 16 bytes";
	return NULL;
}

int wire_response_decode(const struct wire_hdr *h, const uint8_t *msg, const Ramster__Request *req,
			 ProtobufCAllocator *a, Ramster__Response **out, const char **why)
{
	Ramster__Response *rsp;
	const char *bad;

	if (h->msg_len > WIRE_RESP_MSG_MAX) {
		*why = "message too long";
		return -EPROTO;
	}
	rsp = ramster__response__unpack(a, h->msg_len, msg);
	if (!rsp) {
		if (a && a->alloc == wire_arena_alloc && wire_arena_exhausted(a->allocator_data))
			*why = "message too large to decode";
		else
			*why = "malformed protobuf";
		return -EPROTO;
	}
	bad = wire_response_check(h, rsp, req);
	if (bad) {
		ramster__response__free_unpacked(rsp, a);
		*why = bad;
		return -EPROTO;
	}
	*out = rsp;
	return 0;
}
