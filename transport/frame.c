/*
 * frame.c - frame headers and the stream reader (frame.h).
 *
 * Headers are (de)serialized byte by byte, little-endian. The reader keeps
 * one buffer: bytes [start, end) are read but not yet handed out; a header is
 * checked before the buffer grows for its frame, so a hostile length costs at
 * most FRAME_READER_MAX bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "transport/frame.h"

static void frame_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t frame_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void frame_hdr_encode(uint8_t *out, uint32_t msg_len, uint32_t payload_len)
{
	frame_put_le32(out, TRANSPORT_MAGIC);
	out[4] = TRANSPORT_VERSION;
	out[5] = FRAME_KIND_MESSAGE;
	out[6] = 0;
	out[7] = 0;
	frame_put_le32(out + 8, msg_len);
	frame_put_le32(out + 12, payload_len);
}

int frame_hdr_decode(const uint8_t *in, struct frame_hdr *h, const char **why)
{
	uint32_t msg_len = frame_get_le32(in + 8);
	uint32_t payload_len = frame_get_le32(in + 12);

	if (frame_get_le32(in) != TRANSPORT_MAGIC)
		*why = "bad magic";
	else if (in[4] != TRANSPORT_VERSION)
		*why = "unsupported version";
	else if (in[5] != FRAME_KIND_MESSAGE)
		*why = "unknown frame kind";
	else if (in[6] || in[7])
		*why = "reserved field not zero";
	else if (msg_len > TRANSPORT_MSG_MAX)
		*why = "message too long";
	else if (payload_len > TRANSPORT_PAYLOAD_MAX)
		*why = "payload too long";
	else
		goto ok;
	return -EPROTO;
ok:
	h->msg_len = msg_len;
	h->payload_len = payload_len;
	return 0;
}

int frame_reader_init(struct frame_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(FRAME_READER_MIN);
	if (!r->buf)
		return -ENOMEM;
	r->cap = FRAME_READER_MIN;
	return 0;
}

void frame_reader_fini(struct frame_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Bytes the frame at the front needs in all: a header first, then the whole frame. */
static size_t frame_reader_need(const struct frame_reader *r)
{
	struct frame_hdr h;
	const char *why;

	if (r->end - r->start < TRANSPORT_HDR_SIZE)
		return TRANSPORT_HDR_SIZE;
	if (frame_hdr_decode(r->buf + r->start, &h, &why))
		return 0; /* broken: the caller stops reading */
	return TRANSPORT_HDR_SIZE + (size_t)h.msg_len + h.payload_len;
}

int frame_reader_room(struct frame_reader *r, uint8_t **p, size_t *n)
{
	size_t need;
	uint8_t *nbuf;

	if (r->start == r->end) {
		r->start = r->end = 0;
	} else if (r->start) {
		memmove(r->buf, r->buf + r->start, r->end - r->start);
		r->end -= r->start;
		r->start = 0;
	}
	need = frame_reader_need(r);
	if (need > r->cap) {
		nbuf = realloc(r->buf, need);
		if (!nbuf)
			return -ENOMEM;
		r->buf = nbuf;
		r->cap = need;
	}
	if (r->end == r->cap)
		return -ENOBUFS; /* a whole or a broken frame is waiting: take it first */
	*p = r->buf + r->end;
	*n = r->cap - r->end;
	return 0;
}

void frame_reader_commit(struct frame_reader *r, size_t n)
{
	r->end += n;
}

int frame_reader_next(struct frame_reader *r, struct frame *f, const char **why)
{
	const uint8_t *p = r->buf + r->start;
	size_t avail = r->end - r->start;
	struct frame_hdr h;
	size_t total;

	if (avail < TRANSPORT_HDR_SIZE)
		return 0;
	if (frame_hdr_decode(p, &h, why))
		return -EPROTO;
	total = TRANSPORT_HDR_SIZE + (size_t)h.msg_len + h.payload_len;
	if (avail < total)
		return 0;
	f->msg = p + TRANSPORT_HDR_SIZE;
	f->len = h.msg_len;
	f->payload = h.payload_len ? f->msg + h.msg_len : NULL;
	f->plen = h.payload_len;
	r->start += total;
	return 1;
}

size_t frame_reader_pending(const struct frame_reader *r)
{
	return r->end - r->start;
}
