/*
 * frame.h - the frame format of transport.h and the reader that cuts a byte
 * stream into frames. No sockets here: a transport reads into the room the
 * reader offers and takes whole frames out, so the parser can be tested and
 * fuzzed on its own. The reader's buffer grows to fit the frame at hand and
 * never beyond FRAME_READER_MAX; a header is checked as soon as it is whole.
 */
#ifndef RAMSTER_FRAME_H
#define RAMSTER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define FRAME_KIND_MESSAGE 1
/* The reader's first buffer, and the most it ever holds: one largest frame. */
#define FRAME_READER_MIN (16u * 1024)
#define FRAME_READER_MAX (TRANSPORT_HDR_SIZE + TRANSPORT_MSG_MAX + TRANSPORT_PAYLOAD_MAX)

struct frame_hdr {
	uint32_t msg_len;
	uint32_t payload_len;
};

/* One whole frame; the pointers live in the reader until its next frame_reader_room. */
struct frame {
	const uint8_t *msg;
	size_t len;
	const uint8_t *payload; /* NULL when plen is 0 */
	size_t plen;
};

struct frame_reader {
	uint8_t *buf;
	size_t cap;   /* bytes allocated at buf */
	size_t start; /* first byte not yet handed out as a frame */
	size_t end;   /* one past the last byte read */
};

/* Write the header of a message frame with these lengths into out[TRANSPORT_HDR_SIZE]. */
void frame_hdr_encode(uint8_t *out, uint32_t msg_len, uint32_t payload_len);

/*
 * Check a header (in: TRANSPORT_HDR_SIZE bytes): magic, version, kind message,
 * reserved zero, lengths within the limits. @return 0, or -EPROTO with *why
 * set to a static reason ("bad magic", ...).
 */
int frame_hdr_decode(const uint8_t *in, struct frame_hdr *h, const char **why);

/* @return 0, or -ENOMEM. */
int frame_reader_init(struct frame_reader *r);
/* Free the buffer. Safe on a zeroed or already finished reader. */
void frame_reader_fini(struct frame_reader *r);

/*
 * Where the next read goes: *p and *n (n >= 1), after moving unread bytes to
 * the front and growing the buffer to hold the frame at hand. Call only after
 * frame_reader_next returned 0; invalidates every frame handed out before.
 * @return 0; -ENOMEM; -ENOBUFS when the buffer is full of a frame not yet
 * taken (or of a broken one).
 */
int frame_reader_room(struct frame_reader *r, uint8_t **p, size_t *n);

/* n bytes (at most the room offered) were read into the room. */
void frame_reader_commit(struct frame_reader *r, size_t n);

/*
 * Take the next whole frame. @return 1 with *f set; 0 when more bytes are
 * needed; -EPROTO with *why set when the stream is broken (it stays broken).
 */
int frame_reader_next(struct frame_reader *r, struct frame *f, const char **why);

/* Bytes read and not yet handed out as frames. */
size_t frame_reader_pending(const struct frame_reader *r);

#endif /* RAMSTER_FRAME_H */
