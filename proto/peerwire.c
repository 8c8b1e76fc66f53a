/*
 * peerwire.c - the one decoder of peer messages (peerwire.h).
 *
 * A table says, per op, which sub-messages it needs and allows, whether seq
 * must be set, which page flags it takes and how long its payload may be;
 * a message is checked whole against its row before anyone acts on it. It
 * decodes into the caller's bump arena, so a hostile message costs at most
 * the arena. Every refusal names a short static reason.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "proto/peerwire.h"

#define PEERWIRE_ERRNO_MAX 4095 /* P_REPLY results are 0 or -1..-PEERWIRE_ERRNO_MAX */

/* Sub-messages of ramster.peer.Msg, as bits. */
enum {
	PW_HELLO = 1u << 0,
	PW_AUTH = 1u << 1,
	PW_HEARTBEAT = 1u << 2,
	PW_PAGE = 1u << 3,
};

struct peerwire_rule {
	uint8_t valid;   /* 0: an op nobody may send */
	uint8_t need;    /* sub-messages that must be present */
	uint8_t allow;   /* ...and those that may be (a superset of need) */
	uint8_t seq;     /* seq must be non-zero */
	uint8_t flags;   /* page flags this op takes */
	uint16_t pmin;   /* payload bytes: pmin..pmax */
	uint16_t pmax;
};

#define PW_KNOWN_FLAGS (PAGE_PERSISTENT | PAGE_DELETE)

static const struct peerwire_rule peerwire_rules[] = {
	[RAMSTER__PEER__OP__P_HELLO] = { 1, PW_HELLO, PW_HELLO, 0, 0, 0, 0 },
	[RAMSTER__PEER__OP__P_AUTH] = { 1, PW_AUTH, PW_AUTH, 0, 0, 0, 0 },
	[RAMSTER__PEER__OP__P_HEARTBEAT] = { 1, PW_HEARTBEAT, PW_HEARTBEAT, 0, 0, 0, 0 },
	[RAMSTER__PEER__OP__P_PUT] = { 1, PW_PAGE, PW_PAGE, 1, PAGE_PERSISTENT, 1,
				       PEERWIRE_PAGE_MAX },
	[RAMSTER__PEER__OP__P_GET] = { 1, PW_PAGE, PW_PAGE, 1, PW_KNOWN_FLAGS, 0, 0 },
	[RAMSTER__PEER__OP__P_FLUSH] = { 1, PW_PAGE, PW_PAGE, 1, PW_KNOWN_FLAGS, 0, 0 },
	[RAMSTER__PEER__OP__P_FLUSH_OBJECT] = { 1, PW_PAGE, PW_PAGE, 1, PW_KNOWN_FLAGS, 0, 0 },
	[RAMSTER__PEER__OP__P_FLUSH_POOL] = { 1, PW_PAGE, PW_PAGE, 1, PW_KNOWN_FLAGS, 0, 0 },
	/* a diagnostic round trip: the payload comes back in the reply */
	[RAMSTER__PEER__OP__P_ECHO] = { 1, 0, 0, 1, 0, 0, PEERWIRE_PAGE_MAX },
	/* a draining holder's copy, handed back to its owner */
	[RAMSTER__PEER__OP__P_RETURN] = { 1, PW_PAGE, PW_PAGE, 1, PAGE_PERSISTENT, 1,
					  PEERWIRE_PAGE_MAX },
	/* an operator's drain relayed to a peer: one byte, 1 on, 0 off */
	[RAMSTER__PEER__OP__P_DRAIN] = { 1, 0, 0, 1, 0, 1, 1 },
	/* the reply to a GET may carry the page (its checksum) and the bytes */
	[RAMSTER__PEER__OP__P_REPLY] = { 1, 0, PW_PAGE, 1, PW_KNOWN_FLAGS, 0, PEERWIRE_PAGE_MAX },
};

static const struct peerwire_rule *peerwire_rule(int op)
{
	if (op < 0 || (size_t)op >= sizeof(peerwire_rules) / sizeof(peerwire_rules[0]))
		return NULL;
	return peerwire_rules[op].valid ? &peerwire_rules[op] : NULL;
}

static unsigned peerwire_present(const Ramster__Peer__Msg *m)
{
	return (m->hello ? PW_HELLO : 0) | (m->auth ? PW_AUTH : 0) |
	       (m->heartbeat ? PW_HEARTBEAT : 0) | (m->page ? PW_PAGE : 0);
}

static const char *peerwire_check_subs(const struct peerwire_rule *rule, unsigned have)
{
	static const char *const missing[] = { "hello missing", "auth missing",
					       "heartbeat missing", "page missing" };
	static const char *const extra[] = { "unexpected hello", "unexpected auth",
					     "unexpected heartbeat", "unexpected page" };
	unsigned i;

	for (i = 0; i < 4; i++) {
		if ((rule->need & (1u << i)) && !(have & (1u << i)))
			return missing[i];
		if (!(rule->allow & (1u << i)) && (have & (1u << i)))
			return extra[i];
	}
	return NULL;
}

static const char *peerwire_check_hello(const Ramster__Peer__Hello *h)
{
	size_t n;

	if (h->version == 0)
		return "hello version zero";
	n = h->cluster ? strnlen(h->cluster, PEERWIRE_CLUSTER_MAX + 1) : 0;
	if (n == 0)
		return "empty cluster name";
	if (n > PEERWIRE_CLUSTER_MAX)
		return "cluster name too long";
	if (h->node_id == 0 || h->node_id > PEERWIRE_NODE_MAX)
		return "node id out of range";
	if (h->nonce.len != PEERWIRE_NONCE_LEN)
		return "nonce not 32 bytes";
	if (h->ciphers & ~1u)
		return "unknown cipher bits";
	if (h->security != 1 && h->security != 2)
		return "link security neither secure (1) nor integrity (2)";
	return NULL;
}

/*
 * protobuf-c keeps a field numbered 0 (no such field exists) when its tag is
 * spelled as a long varint, then packs a tag it refuses to unpack: refuse it.
 */
static int peerwire_field_zero(const ProtobufCMessage *base)
{
	unsigned i;

	for (i = 0; i < base->n_unknown_fields; i++)
		if (base->unknown_fields[i].tag == 0)
			return 1;
	return 0;
}

static int peerwire_any_field_zero(const Ramster__Peer__Msg *m)
{
	return peerwire_field_zero(&m->base) ||
	       (m->hello && peerwire_field_zero(&m->hello->base)) ||
	       (m->auth && peerwire_field_zero(&m->auth->base)) ||
	       (m->heartbeat && peerwire_field_zero(&m->heartbeat->base)) ||
	       (m->page && peerwire_field_zero(&m->page->base));
}

static const char *peerwire_check(const Ramster__Peer__Msg *m, size_t plen)
{
	const struct peerwire_rule *rule = peerwire_rule(m->op);
	const char *bad;

	if (peerwire_any_field_zero(m))
		return "malformed protobuf";
	if (!rule)
		return "unknown op";
	if (rule->seq && m->seq == 0)
		return "zero sequence number";
	if (m->op == RAMSTER__PEER__OP__P_REPLY) {
		if (m->result > 0 || m->result < -PEERWIRE_ERRNO_MAX)
			return "result out of range";
	} else if (m->result != 0) {
		return "result on a request";
	}
	bad = peerwire_check_subs(rule, peerwire_present(m));
	if (bad)
		return bad;
	if (m->hello && (bad = peerwire_check_hello(m->hello)))
		return bad;
	if (m->auth && m->auth->mac.len != PEERWIRE_MAC_LEN)
		return "mac not 32 bytes";
	if (m->page && (m->page->flags & ~(uint32_t)PW_KNOWN_FLAGS))
		return "unknown page flags";
	if (m->page && (m->page->flags & ~(uint32_t)rule->flags))
		return "delete flag where it means nothing (put, return)";
	if (plen > rule->pmax)
		return rule->pmax ? "payload too long" : "unexpected payload";
	if (plen < rule->pmin)
		return "payload missing";
	if (plen && m->result < 0)
		return "payload on a failed reply";
	return NULL;
}

int peerwire_decode(const uint8_t *msg, size_t len, size_t plen, struct wire_arena *a,
		    Ramster__Peer__Msg **out, const char **why)
{
	Ramster__Peer__Msg *m;
	const char *bad;

	m = ramster__peer__msg__unpack(&a->pa, len, msg);
	if (!m) {
		/* wire.c marks an arena that refused an allocation with used > size */
		*why = a->used > a->size ? "message too large to decode" : "malformed protobuf";
		return -EPROTO;
	}
	bad = peerwire_check(m, plen);
	if (bad) {
		*why = bad;
		return -EPROTO;
	}
	*out = m;
	return 0;
}

int peerwire_pack(const Ramster__Peer__Msg *m, uint8_t *buf, size_t cap)
{
	size_t n = ramster__peer__msg__get_packed_size(m);

	if (n > cap || n > INT_MAX)
		return -EMSGSIZE;
	return (int)ramster__peer__msg__pack(m, buf);
}
