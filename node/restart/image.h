/*
 * image.h - a checked image: records written to a file (a memfd handed over a
 * planned restart: docs/warm-restart.md) and read back only if whole.
 *
 * Layout, little-endian: a 64-byte header (magic "RAMSTIMG", u32 version,
 * u32 kind, u64 body length, 32 bytes BLAKE2b-256 of the body, u64 spare),
 * then the body: records of {u16 tag, u16 0, u32 length, length bytes}. The
 * header is written last: a writer that dies midway leaves an image that no
 * reader accepts (no magic, or a digest that does not match), and so does any
 * byte changed since. Every length is checked against what is there before a
 * record is handed out.
 */
#ifndef RAMSTER_IMAGE_H
#define RAMSTER_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#define IMAGE_HEADER  64
#define IMAGE_VERSION 1

struct image_writer {
	int fd;
	uint64_t body; /* body bytes written (or buffered) */
	uint8_t *buf;
	size_t n, cap;
	int err; /* the first error; later calls do nothing */
	uint32_t kind;
};

/* Begin an image of kind on fd (truncated). @return 0 or -errno. */
int image_write_begin(struct image_writer *w, int fd, uint32_t kind);

/* One record: head then body (either may be empty). @return 0 or the first error. */
int image_record(struct image_writer *w, uint16_t tag, const void *head, size_t head_len,
		 const void *body, size_t body_len);

/* Flush, digest, header. @return 0 or the first error (the image is then unusable). */
int image_write_end(struct image_writer *w);

struct image_reader {
	const uint8_t *map;
	size_t map_len;
	size_t off, end;
	uint32_t kind;
};

/*
 * Map fd and check it: magic, version, kind, lengths, digest. @return 0, or
 * -EBADMSG with *why saying what did not check out (-errno from mmap/fstat).
 */
int image_read_open(struct image_reader *r, int fd, uint32_t kind, const char **why);

/* The next record. @return 1 with *tag, *p, *len set; 0 at the end; -EBADMSG torn. */
int image_next(struct image_reader *r, uint16_t *tag, const uint8_t **p, size_t *len);

void image_read_close(struct image_reader *r);

#endif /* RAMSTER_IMAGE_H */
