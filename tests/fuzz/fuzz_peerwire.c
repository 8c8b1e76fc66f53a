/*
 * fuzz_peerwire.c - libFuzzer target for the peer message decoder (peerwire.h).
 *
 * An input is a 2-byte little-endian payload length (mod 8192), then the
 * message. It is decoded with a tight and a roomy arena; whatever is accepted
 * must hold every rule peerwire.h states, and must survive peerwire_pack and
 * a second decode unchanged in meaning. Nothing may leak or touch the heap.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/peerwire.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_PLEN_MOD 8192

static struct wire_arena fuzz_tight; /* refuses most messages with unknown fields */
static struct wire_arena fuzz_roomy;
static struct wire_arena fuzz_again; /* for the re-decode of a re-pack */
static uint8_t fuzz_repack[64 * 1024];
static volatile uint64_t fuzz_sink;

static int fuzz_is_request(int op)
{
	return (op >= RAMSTER__PEER__OP__P_PUT && op <= RAMSTER__PEER__OP__P_FLUSH_POOL) ||
	       op == RAMSTER__PEER__OP__P_RETURN;
}

/* What peerwire.h promises of an accepted message; touch every byte it points at. */
static void fuzz_check(const Ramster__Peer__Msg *m, size_t plen)
{
	uint64_t sum = m->seq;
	size_t i;

	fuzz_assert(m->op >= RAMSTER__PEER__OP__P_HELLO && m->op <= RAMSTER__PEER__OP__P_DRAIN);
	fuzz_assert(plen <= PEERWIRE_PAGE_MAX);
	fuzz_assert((m->hello != NULL) == (m->op == RAMSTER__PEER__OP__P_HELLO));
	fuzz_assert((m->auth != NULL) == (m->op == RAMSTER__PEER__OP__P_AUTH));
	fuzz_assert((m->heartbeat != NULL) == (m->op == RAMSTER__PEER__OP__P_HEARTBEAT));
	if (fuzz_is_request(m->op))
		fuzz_assert(m->page != NULL);
	else if (m->op != RAMSTER__PEER__OP__P_REPLY)
		fuzz_assert(m->page == NULL); /* P_ECHO carries no page either */
	if (fuzz_is_request(m->op) || m->op == RAMSTER__PEER__OP__P_REPLY ||
	    m->op == RAMSTER__PEER__OP__P_ECHO || m->op == RAMSTER__PEER__OP__P_DRAIN)
		fuzz_assert(m->seq != 0);
	if (m->op == RAMSTER__PEER__OP__P_REPLY)
		fuzz_assert(m->result <= 0 && m->result >= -4095);
	else
		fuzz_assert(m->result == 0);
	if (m->op == RAMSTER__PEER__OP__P_PUT || m->op == RAMSTER__PEER__OP__P_RETURN)
		fuzz_assert(plen >= 1);
	else if (m->op == RAMSTER__PEER__OP__P_DRAIN)
		fuzz_assert(plen == 1);
	else if (m->op != RAMSTER__PEER__OP__P_REPLY && m->op != RAMSTER__PEER__OP__P_ECHO)
		fuzz_assert(plen == 0);
	if (plen)
		fuzz_assert(m->result == 0);

	if (m->hello) {
		size_t n = strlen(m->hello->cluster);

		fuzz_assert(m->hello->version > 0);
		fuzz_assert(n >= 1 && n <= PEERWIRE_CLUSTER_MAX);
		fuzz_assert(m->hello->node_id >= 1 && m->hello->node_id <= PEERWIRE_NODE_MAX);
		fuzz_assert(m->hello->nonce.len == PEERWIRE_NONCE_LEN);
		fuzz_assert((m->hello->ciphers & ~1u) == 0);
		fuzz_assert(m->hello->security == 1 || m->hello->security == 2);
		for (i = 0; i < n; i++)
			sum += (uint8_t)m->hello->cluster[i];
		for (i = 0; i < PEERWIRE_NONCE_LEN; i++)
			sum += m->hello->nonce.data[i];
	}
	if (m->auth) {
		fuzz_assert(m->auth->mac.len == PEERWIRE_MAC_LEN);
		for (i = 0; i < PEERWIRE_MAC_LEN; i++)
			sum += m->auth->mac.data[i];
	}
	if (m->heartbeat)
		sum += m->heartbeat->donate_free ^ m->heartbeat->echo_ns;
	if (m->page) {
		fuzz_assert(!(m->page->flags & ~(uint32_t)(PAGE_PERSISTENT | PAGE_DELETE)));
		if (m->op == RAMSTER__PEER__OP__P_PUT)
			fuzz_assert(!(m->page->flags & PAGE_DELETE));
		sum += m->page->oid0 ^ m->page->oid1 ^ m->page->oid2 ^ m->page->index;
	}
	fuzz_sink = sum;
}

static void fuzz_init(void)
{
	if (wire_arena_init(&fuzz_tight, 256) || wire_arena_init(&fuzz_roomy, 256 * 1024) ||
	    wire_arena_init(&fuzz_again, 256 * 1024))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	Ramster__Peer__Msg *m = NULL, *t = NULL, *again = NULL;
	const char *why = NULL, *twhy = NULL;
	size_t plen;
	int rc, trc, n;

	if (!ready) {
		fuzz_init();
		ready = 1;
	}
	if (size < 2)
		return 0;
	plen = ((size_t)data[0] | (size_t)data[1] << 8) % FUZZ_PLEN_MOD;
	data += 2;
	size -= 2;

	wire_arena_reset(&fuzz_roomy);
	rc = peerwire_decode(data, size, plen, &fuzz_roomy, &m, &why);
	if (rc == 0)
		fuzz_check(m, plen);
	else
		fuzz_assert(rc == -EPROTO && why != NULL);

	/* less room can only turn success into "too large", never the reverse */
	wire_arena_reset(&fuzz_tight);
	trc = peerwire_decode(data, size, plen, &fuzz_tight, &t, &twhy);
	if (trc == 0) {
		fuzz_assert(rc == 0 && t->op == m->op && t->seq == m->seq);
		fuzz_check(t, plen);
	} else {
		fuzz_assert(trc == -EPROTO && twhy != NULL);
		if (rc == 0)
			fuzz_assert(!strcmp(twhy, "message too large to decode"));
		else if (strcmp(twhy, "message too large to decode"))
			fuzz_assert(!strcmp(twhy, why));
	}

	/* what was accepted packs and decodes to the same thing */
	if (rc == 0) {
		n = peerwire_pack(m, fuzz_repack, sizeof(fuzz_repack));
		fuzz_assert(n >= 0);
		fuzz_assert(peerwire_pack(m, fuzz_repack, 0) == -EMSGSIZE || n == 0);
		wire_arena_reset(&fuzz_again);
		fuzz_assert(peerwire_decode(fuzz_repack, (size_t)n, plen, &fuzz_again, &again,
					    &why) == 0);
		fuzz_assert(again->op == m->op && again->seq == m->seq &&
			    again->result == m->result);
		fuzz_assert((again->page == NULL) == (m->page == NULL));
		if (m->hello)
			fuzz_assert(!strcmp(again->hello->cluster, m->hello->cluster) &&
				    again->hello->node_id == m->hello->node_id &&
				    !memcmp(again->hello->nonce.data, m->hello->nonce.data,
					    PEERWIRE_NONCE_LEN));
		if (m->page)
			fuzz_assert(again->page->pool == m->page->pool &&
				    again->page->oid0 == m->page->oid0 &&
				    again->page->oid1 == m->page->oid1 &&
				    again->page->oid2 == m->page->oid2 &&
				    again->page->index == m->page->index &&
				    again->page->flags == m->page->flags &&
				    again->page->checksum == m->page->checksum);
	}
	return 0;
}
