/*
 * frame.c - frame headers and the stream reader (frame.h).
 *
 * Headers go through the one codec of common/fhdr.h. The reader keeps
 * one buffer: bytes [start, end) are read but not yet handed out; a header is
 * checked before the buffer grows for its frame, so a hostile length costs at
 * most FRAME_READER_MAX bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/fhdr.h"
#include "transport/frame.h"

_Static_assert(TRANSPORT_HDR_SIZE == FHDR_SIZE, "transport header is the common one");

static const struct fhdr_spec frame_spec = {
    .magic = TRANSPORT_MAGIC,
    .version = TRANSPORT_VERSION,
    .kind = FRAME_KIND_MESSAGE,
    .kind_why = "unknown frame kind",
    .msg_max = TRANSPORT_MSG_MAX,
    .payload_max = TRANSPORT_PAYLOAD_MAX,
};

void frame_hdr_encode(uint8_t *out, uint32_t msg_len, uint32_t payload_len)
{
	fhdr_encode(out, TRANSPORT_MAGIC, TRANSPORT_VERSION, FRAME_KIND_MESSAGE, msg_len,
		    payload_len);
}

int frame_hdr_decode(const uint8_t *in, struct frame_hdr *h, const char **why)
{
	struct fhdr f;

	if (fhdr_decode(in, &frame_spec, &f, why))
		return -EPROTO;
	h->msg_len = f.msg_len;
	h->payload_len = f.payload_len;
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
