/*
 * fuzz_wire.c - libFuzzer target for the client protocol decoder (wire.h).
 *
 * An input is one frame: a 16-byte header, the message, then the payload.
 * Request frames go through wire_hdr_decode + wire_request_decode (a roomy and
 * a tight arena); response frames through wire_response_decode against a set
 * of fixed requests (seq FUZZ_SEQ), with malloc and with an arena. Whatever a
 * decoder accepts must hold the invariants wire.h promises; nothing may leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto/wire.h"
#include "ramster.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_SEQ   7
#define FUZZ_ITEMS 4

static struct wire_arena fuzz_roomy; /* decodes anything WIRE_MSG_MAX can say... mostly */
static struct wire_arena fuzz_tight; /* ...and this one mostly cannot */
static Ramster__Item fuzz_items[FUZZ_ITEMS];
static Ramster__Item *fuzz_item_ptrs[FUZZ_ITEMS];
static Ramster__Request fuzz_reqs[16];
static size_t fuzz_n_reqs;
static volatile uint64_t fuzz_sink; /* keeps the walks below from being optimized out */

static void fuzz_add_req(Ramster__Op op, size_t n_items)
{
	Ramster__Request *req;

	if (fuzz_n_reqs == sizeof(fuzz_reqs) / sizeof(fuzz_reqs[0]))
		abort(); /* a new template needs a larger table */
	req = &fuzz_reqs[fuzz_n_reqs++];
	ramster__request__init(req);
	req->seq = FUZZ_SEQ;
	req->op = op;
	req->pool = 1;
	req->n_items = n_items;
	req->items = n_items ? fuzz_item_ptrs : NULL;
}

static void fuzz_init(void)
{
	size_t i;

	if (wire_arena_init(&fuzz_roomy, 4u << 20) || wire_arena_init(&fuzz_tight, 4096))
		abort();
	for (i = 0; i < FUZZ_ITEMS; i++) {
		ramster__item__init(&fuzz_items[i]);
		fuzz_items[i].oid0 = i;
		fuzz_items[i].index = (uint32_t)i;
		fuzz_item_ptrs[i] = &fuzz_items[i];
	}
	fuzz_add_req(RAMSTER__OP__OP_GET, FUZZ_ITEMS);
	fuzz_add_req(RAMSTER__OP__OP_PUT, FUZZ_ITEMS);
	fuzz_add_req(RAMSTER__OP__OP_GET, 1);
	fuzz_add_req(RAMSTER__OP__OP_POOL_NEW, 0);
	fuzz_add_req(RAMSTER__OP__OP_POOL_DESTROY, 0);
	fuzz_add_req(RAMSTER__OP__OP_FLUSH, 1);
	fuzz_add_req(RAMSTER__OP__OP_STATS, 0);
	fuzz_add_req(RAMSTER__OP__OP_STATUS, 0);
	fuzz_add_req(RAMSTER__OP__OP_POOLS, 0);
	fuzz_add_req(RAMSTER__OP__OP_DRAIN, 0);
	fuzz_add_req(RAMSTER__OP__OP_RELOAD, 0);
	fuzz_add_req(RAMSTER__OP__OP_CLIENTS, 0);
	fuzz_add_req(RAMSTER__OP__OP_RESTART, 0);
	fuzz_add_req(RAMSTER__OP__OP_ATTACH, 0);
}

/* Touch every byte the decoded request points at, so ASan sees any stray pointer. */
static void fuzz_walk_request(const struct wire_hdr *h, const Ramster__Request *req,
			      const uint8_t *payload)
{
	uint64_t sum = req->seq + (uint32_t)req->pool + req->flags;
	size_t i;

	fuzz_assert(req->n_items <= WIRE_BATCH_MAX);
	fuzz_assert(req->uuid.len == 0 || req->uuid.len == 16);
	if (req->op == RAMSTER__OP__OP_PUT)
		fuzz_assert(h->payload_len == req->n_items * WIRE_PAGE_SIZE);
	else if (req->op == RAMSTER__OP__OP_PING)
		fuzz_assert(h->payload_len == WIRE_PAGE_SIZE);
	else
		fuzz_assert(h->payload_len == 0);
	/* a node names a peer: PING goes through it, DRAIN drains it */
	fuzz_assert(req->node == 0 ||
		    req->op == RAMSTER__OP__OP_PING || req->op == RAMSTER__OP__OP_DRAIN);
	fuzz_assert(req->node <= 64);
	if (req->op == RAMSTER__OP__OP_DRAIN)
		fuzz_assert(req->flags <= 1);
	for (i = 0; i < req->uuid.len; i++)
		sum += req->uuid.data[i];
	for (i = 0; i < req->n_items; i++)
		sum += req->items[i]->oid0 ^ req->items[i]->oid1 ^ req->items[i]->oid2 ^
		       req->items[i]->index;
	for (i = 0; i < h->payload_len; i += 512)
		sum += payload[i];
	fuzz_sink = sum;
}

static void fuzz_request(const struct wire_hdr *h, const uint8_t *msg, size_t len)
{
	Ramster__Request *req = NULL, *tight = NULL;
	const char *why = NULL, *tight_why = NULL;
	int rc, tight_rc;

	if (h->msg_len > len || len - h->msg_len < h->payload_len)
		return; /* a truncated frame: a reader would still be waiting */
	wire_arena_reset(&fuzz_roomy);
	rc = wire_request_decode(h, msg, &fuzz_roomy, &req, &why);
	if (rc == 0)
		fuzz_walk_request(h, req, msg + h->msg_len);
	else
		fuzz_assert(why != NULL);

	wire_arena_reset(&fuzz_tight);
	tight_rc = wire_request_decode(h, msg, &fuzz_tight, &tight, &tight_why);
	/* less room can only turn success into "too large", never the reverse */
	if (tight_rc == 0)
		fuzz_assert(rc == 0 && tight->n_items == req->n_items);
	else if (rc == 0)
		fuzz_assert(tight_why != NULL);
}

static void fuzz_walk_response(const struct wire_hdr *h, const Ramster__Response *rsp,
			       const Ramster__Request *req)
{
	uint64_t sum = rsp->seq + (uint32_t)rsp->result;
	uint32_t hits = 0;
	size_t i, j;

	fuzz_assert(rsp->seq == req->seq);
	if (req->op == RAMSTER__OP__OP_GET && rsp->result == 0) {
		fuzz_assert(rsp->n_results == req->n_items);
		for (i = 0; i < rsp->n_results; i++)
			hits += rsp->results[i] == 0;
		fuzz_assert(h->payload_len == hits * WIRE_PAGE_SIZE);
	} else {
		fuzz_assert(h->payload_len == 0);
	}
	for (i = 0; i < rsp->n_results; i++)
		fuzz_assert(rsp->results[i] <= 0 && rsp->results[i] >= -4095);
	for (i = 0; i < rsp->n_stats; i++)
		for (j = 0; rsp->stats[i]->name[j]; j++)
			sum += (uint8_t)rsp->stats[i]->name[j];
	for (i = 0; i < rsp->n_status; i++)
		sum += (uint8_t)rsp->status[i]->key[0] + (uint8_t)rsp->status[i]->value[0];
	for (i = 0; i < rsp->n_pools; i++) {
		fuzz_assert(rsp->pools[i]->uuid.len == 0 || rsp->pools[i]->uuid.len == 16);
		for (j = 0; j < rsp->pools[i]->uuid.len; j++)
			sum += rsp->pools[i]->uuid.data[j];
	}
	fuzz_sink = sum;
}

static void fuzz_response(const struct wire_hdr *h, const uint8_t *msg, size_t len)
{
	Ramster__Response *rsp;
	const char *why;
	size_t i;

	if (h->msg_len > len || len - h->msg_len < h->payload_len)
		return;
	for (i = 0; i < fuzz_n_reqs; i++) {
		rsp = NULL;
		why = NULL;
		if (wire_response_decode(h, msg, &fuzz_reqs[i], NULL, &rsp, &why) == 0) {
			fuzz_walk_response(h, rsp, &fuzz_reqs[i]);
			ramster__response__free_unpacked(rsp, NULL);
		} else {
			fuzz_assert(why != NULL && rsp == NULL);
		}
		wire_arena_reset(&fuzz_tight);
		rsp = NULL;
		if (wire_response_decode(h, msg, &fuzz_reqs[i], &fuzz_tight.pa, &rsp, &why) == 0)
			fuzz_walk_response(h, rsp, &fuzz_reqs[i]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct wire_hdr h;
	const char *why;

	if (!ready) {
		fuzz_init();
		ready = 1;
	}
	if (size < WIRE_HDR_SIZE)
		return 0;
	if (wire_hdr_decode(data, WIRE_REQUEST, &h, &why) == 0)
		fuzz_request(&h, data + WIRE_HDR_SIZE, size - WIRE_HDR_SIZE);
	else if (wire_hdr_decode(data, WIRE_RESPONSE, &h, &why) == 0)
		fuzz_response(&h, data + WIRE_HDR_SIZE, size - WIRE_HDR_SIZE);
	return 0;
}
