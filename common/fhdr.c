/*
 * fhdr.c - the frame header codec (fhdr.h): byte by byte, never a struct
 * cast over the buffer; every field checked before anyone uses a length.
 */
#include <errno.h>

#include "common/fhdr.h"
#include "common/util.h"

void fhdr_encode(uint8_t *out, uint32_t magic, uint8_t version, uint8_t kind, uint32_t msg_len,
		 uint32_t payload_len)
{
	put_le32(out, magic);
	out[4] = version;
	out[5] = kind;
	out[6] = 0;
	out[7] = 0;
	put_le32(out + 8, msg_len);
	put_le32(out + 12, payload_len);
}

int fhdr_decode(const uint8_t *in, const struct fhdr_spec *spec, struct fhdr *h, const char **why)
{
	uint32_t msg_len = get_le32(in + 8);
	uint32_t payload_len = get_le32(in + 12);

	if (get_le32(in) != spec->magic)
		*why = "bad magic";
	else if (in[4] != spec->version)
		*why = "unsupported version";
	else if (in[5] != spec->kind)
		*why = spec->kind_why;
	else if (in[6] || in[7])
		*why = "reserved field not zero";
	else if (msg_len > spec->msg_max)
		*why = "message too long";
	else if (payload_len > spec->payload_max)
		*why = "payload too long";
	else
		goto ok;
	return -EPROTO;
ok:
	h->version = in[4];
	h->kind = in[5];
	h->msg_len = msg_len;
	h->payload_len = payload_len;
	return 0;
}
