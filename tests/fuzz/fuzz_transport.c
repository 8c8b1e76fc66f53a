/*
 * fuzz_transport.c - libFuzzer target for the frame reader (transport/frame.h),
 * the part of the TCP transport that sees a peer's bytes first.
 *
 * An input is 2 bytes that pick read sizes, then the byte stream. The stream
 * goes into a reader in reads of pseudo-random sizes; the frames coming out
 * must be exactly those a plain reference parser finds in the whole stream,
 * in order, a broken header must stop both at the same frame, and the buffer
 * must stay within FRAME_READER_MAX.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"
#include "transport/frame.h"

struct fuzz_ref {
	size_t off; /* of the header in the stream */
	size_t len;
	size_t plen;
};

static uint32_t fuzz_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * The reference: whole frames of s, straight from transport.h's wording.
 * @return how many; *broken when a bad header follows them, *used their bytes.
 */
static size_t fuzz_ref_parse(const uint8_t *s, size_t n, struct fuzz_ref *out, int *broken,
			     size_t *used)
{
	size_t pos = 0, count = 0, len, plen;
	const uint8_t *h;

	*broken = 0;
	while (n - pos >= TRANSPORT_HDR_SIZE) {
		h = s + pos;
		len = fuzz_le32(h + 8);
		plen = fuzz_le32(h + 12);
		if (fuzz_le32(h) != 0x50534d52u || h[4] != 1 || h[5] != 1 || h[6] || h[7] ||
		    len > 16384 || plen > 65536) {
			*broken = 1;
			break;
		}
		if (n - pos - TRANSPORT_HDR_SIZE < len + plen)
			break;
		out[count].off = pos;
		out[count].len = len;
		out[count].plen = plen;
		count++;
		pos += TRANSPORT_HDR_SIZE + len + plen;
	}
	*used = pos;
	return count;
}

static uint32_t fuzz_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/* A read size: tiny, medium or whatever the room allows, by the seed. */
static size_t fuzz_chunk(uint32_t *x, unsigned mode)
{
	switch (mode % 4) {
	case 0:
		return 1 + fuzz_rand(x) % 7;
	case 1:
		return 1 + fuzz_rand(x) % 300;
	case 2:
		return 1 + fuzz_rand(x) % 20000;
	default:
		return SIZE_MAX;
	}
}

static void fuzz_expect(const struct frame *f, const uint8_t *s, const struct fuzz_ref *ref)
{
	const uint8_t *msg = s + ref->off + TRANSPORT_HDR_SIZE;

	fuzz_assert(f->len == ref->len && f->plen == ref->plen);
	fuzz_assert(ref->len == 0 || !memcmp(f->msg, msg, ref->len));
	if (ref->plen)
		fuzz_assert(f->payload && !memcmp(f->payload, msg + ref->len, ref->plen));
	else
		fuzz_assert(f->payload == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader r;
	struct fuzz_ref *ref;
	struct frame f;
	const char *why = NULL;
	const uint8_t *s;
	size_t n, nref, used, got = 0, pos = 0, room, k;
	unsigned mode;
	uint32_t x;
	uint8_t *p;
	int broken, rc = 0;

	if (size < 2)
		return 0;
	mode = data[0];
	x = 0x9e3779b9u ^ ((uint32_t)data[0] << 8 | data[1]);
	s = data + 2;
	n = size - 2;

	ref = malloc((n / TRANSPORT_HDR_SIZE + 1) * sizeof(*ref));
	fuzz_assert(ref != NULL);
	nref = fuzz_ref_parse(s, n, ref, &broken, &used);
	fuzz_assert(frame_reader_init(&r) == 0);

	for (;;) {
		while ((rc = frame_reader_next(&r, &f, &why)) == 1) {
			fuzz_assert(got < nref);
			fuzz_expect(&f, s, &ref[got]);
			got++;
		}
		if (rc < 0) {
			fuzz_assert(rc == -EPROTO && why != NULL);
			fuzz_assert(broken && got == nref);
			/* and it stays broken */
			fuzz_assert(frame_reader_next(&r, &f, &why) == -EPROTO);
			break;
		}
		if (pos == n)
			break;
		fuzz_assert(frame_reader_room(&r, &p, &room) == 0);
		fuzz_assert(room >= 1 && r.cap <= FRAME_READER_MAX);
		k = fuzz_chunk(&x, mode);
		if (k > room)
			k = room;
		if (k > n - pos)
			k = n - pos;
		memcpy(p, s + pos, k);
		frame_reader_commit(&r, k);
		pos += k;
	}
	if (rc == 0) {
		/* the stream ended inside a frame (or between frames) */
		fuzz_assert(!broken && got == nref);
		fuzz_assert(frame_reader_pending(&r) == n - used);
	}
	frame_reader_fini(&r);
	free(ref);
	return 0;
}
