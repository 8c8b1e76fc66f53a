/*
 * fhdr.h - the 16-byte frame header both protocols use, and its one codec.
 * Little-endian: magic (4 bytes), version, kind, two reserved zero bytes,
 * message length (4), payload length (4). The client protocol (proto/wire.h,
 * magic "RMST") and the peer transport (transport/frame.h, magic "RMSP") each
 * name their magic, version, kind and limits in a struct fhdr_spec; checks
 * beyond these (whole pages, ...) stay with the protocol.
 */
#ifndef RAMSTER_COMMON_FHDR_H
#define RAMSTER_COMMON_FHDR_H

#include <stdint.h>

#define FHDR_SIZE 16

/* What a decoder accepts. */
struct fhdr_spec {
	uint32_t magic;
	uint8_t version;
	uint8_t kind;	      /* the one kind expected */
	const char *kind_why; /* the reason when the kind differs */
	uint32_t msg_max;     /* message bytes at most */
	uint32_t payload_max; /* payload bytes at most */
};

struct fhdr {
	uint8_t version;
	uint8_t kind;
	uint32_t msg_len;
	uint32_t payload_len;
};

/* Write a header into out[FHDR_SIZE]. */
void fhdr_encode(uint8_t *out, uint32_t magic, uint8_t version, uint8_t kind, uint32_t msg_len,
		 uint32_t payload_len);

/*
 * Check in[FHDR_SIZE] against spec, in this order: magic ("bad magic"),
 * version ("unsupported version"), kind (spec->kind_why), reserved bytes
 * ("reserved field not zero"), msg_len ("message too long"), payload_len
 * ("payload too long"). @return 0 with *h set, or -EPROTO with *why set.
 */
int fhdr_decode(const uint8_t *in, const struct fhdr_spec *spec, struct fhdr *h, const char **why);

#endif /* RAMSTER_COMMON_FHDR_H */
