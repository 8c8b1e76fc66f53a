/*
 * peerwire.h - the one decoder of peer messages (peer.proto), fuzzed.
 *
 * The transport delivers whole frames (transport.h); this checks a message
 * whole before anyone uses it: a known op, the sub-message the op needs and
 * nothing it does not, field ranges (nonce and mac 32 bytes, cluster name
 * <= 63 bytes, node ids 1..64, page flags known), and the payload length the
 * op allows (P_PUT: 1..PEERWIRE_PAGE_MAX bytes; P_REPLY to a GET: 0 or
 * 1..PEERWIRE_PAGE_MAX; otherwise 0).
 */
#ifndef RAMSTER_PEERWIRE_H
#define RAMSTER_PEERWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/peer.pb-c.h"
#include "proto/wire.h"

#define PEERWIRE_NONCE_LEN 32
#define PEERWIRE_MAC_LEN 32
#define PEERWIRE_CLUSTER_MAX 63
#define PEERWIRE_NODE_MAX 64
#define PEERWIRE_PAGE_MAX 4160   /* a page's compressed bytes, sealed (node/remote/seal.h: +24) */
enum { PAGE_PERSISTENT = 1u << 0, PAGE_DELETE = 1u << 1 };

/*
 * Unpack msg (len bytes) with payload length plen into *out, allocating from
 * the arena a (reset by the caller), and check it. @return 0, or -EPROTO with
 * *why set to a static reason.
 */
int peerwire_decode(const uint8_t *msg, size_t len, size_t plen, struct wire_arena *a,
		    Ramster__Peer__Msg **out, const char **why);

/*
 * Pack m into buf (cap bytes). @return the length, or -EMSGSIZE.
 */
int peerwire_pack(const Ramster__Peer__Msg *m, uint8_t *buf, size_t cap);

#endif /* RAMSTER_PEERWIRE_H */
