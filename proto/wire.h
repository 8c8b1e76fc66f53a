/*
 * wire.h - framing of the client protocol, and its one decoder.
 *
 * A frame is a 16-byte header (little-endian: magic "RMST", version, kind,
 * reserved zero, message length, payload length), then a protobuf-c message
 * (ramster.Request or ramster.Response, client.proto), then the raw page
 * payload: whole 4096-byte pages. Every length and count is checked here
 * against the limits below before anyone uses it; a frame that fails is
 * reported with a reason and the connection that sent it is closed.
 */
#ifndef RAMSTER_WIRE_H
#define RAMSTER_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "proto/client.pb-c.h"

#include "common/fhdr.h"

#define WIRE_MAGIC 0x54534d52u /* "RMST" as little-endian bytes */
#define WIRE_VERSION 1
#define WIRE_HDR_SIZE FHDR_SIZE
#define WIRE_PAGE_SIZE 4096
#define WIRE_BATCH_MAX 256                    /* items a PUT/GET */
#define WIRE_MSG_MAX (64u * 1024)              /* protobuf bytes a frame */
#define WIRE_RESP_MSG_MAX (1024u * 1024)       /* a response may list many stats/pools */
#define WIRE_PAYLOAD_MAX (WIRE_BATCH_MAX * WIRE_PAGE_SIZE)
/* socket send buffer for a largest frame: one send, no wake-ups between its pieces */
#define WIRE_SNDBUF (WIRE_PAYLOAD_MAX + WIRE_MSG_MAX)

enum wire_kind { WIRE_REQUEST = 1, WIRE_RESPONSE = 2 };

/*
 * Pool flags of OP_POOL_NEW (client.proto). The protocol owns these bits;
 * include/ramster.h gives the same values to the public API as
 * RAMSTER_PERSISTENT / RAMSTER_SHARED (lib/ramster.c checks that they agree),
 * so this layer needs nothing from the public header.
 */
#define WIRE_POOL_PERSISTENT (1u << 0)
#define WIRE_POOL_SHARED     (1u << 1)

struct wire_hdr {
	uint8_t version;
	uint8_t kind;
	uint32_t msg_len;
	uint32_t payload_len;
};

/* Write a header for kind with these lengths into out[WIRE_HDR_SIZE]. */
void wire_hdr_encode(uint8_t *out, enum wire_kind kind, uint32_t msg_len, uint32_t payload_len);

/*
 * Decode and check a header: magic, version, kind == expect, reserved zero,
 * msg_len <= the kind's limit, payload_len <= WIRE_PAYLOAD_MAX and a multiple
 * of WIRE_PAGE_SIZE. @return 0, or -EPROTO with *why set to a static reason.
 */
int wire_hdr_decode(const uint8_t *in, enum wire_kind expect, struct wire_hdr *h,
		    const char **why);

/*
 * A bump allocator for decoding without malloc: protobuf-c allocates from
 * buf; an exhausted arena fails the decode. Reset before each decode.
 */
struct wire_arena {
	ProtobufCAllocator pa; /* hand &arena->pa to protobuf-c */
	size_t used;
	size_t size;
	unsigned char *buf;
};

/* @return 0, or -ENOMEM. */
int wire_arena_init(struct wire_arena *a, size_t size);
void wire_arena_fini(struct wire_arena *a);
void wire_arena_reset(struct wire_arena *a);

/*
 * The one request decoder: unpack msg (h->msg_len bytes) from a frame whose
 * header h was already decoded, and check it whole: a known op; pool >= 0
 * where the op takes one; flags and uuid (16 bytes iff WIRE_POOL_SHARED) for
 * POOL_NEW; a token on ATTACH alone (its length is the dispatcher's to
 * refuse, -EINVAL); 1..WIRE_BATCH_MAX items for PUT/GET, exactly 1 for FLUSH and
 * FLUSH_OBJECT, none otherwise; payload_len == items * page for PUT and 0
 * for every other op. On success *out lives in the arena until its reset.
 * @return 0, or -EPROTO with *why set.
 */
int wire_request_decode(const struct wire_hdr *h, const uint8_t *msg, struct wire_arena *a,
			Ramster__Request **out, const char **why);

/*
 * The response decoder (client side), checked against the request it answers:
 * same seq; for PUT/GET one result per item, each 0 or a negative errno; for
 * GET payload_len == hits * page; no payload otherwise. Allocates with a
 * (NULL: malloc); free with ramster__response__free_unpacked.
 * @return 0, or -EPROTO with *why set.
 */
int wire_response_decode(const struct wire_hdr *h, const uint8_t *msg, const Ramster__Request *req,
			 ProtobufCAllocator *a, Ramster__Response **out, const char **why);

#endif /* RAMSTER_WIRE_H */
