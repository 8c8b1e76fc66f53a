/*
 * image.c - a checked image (image.h): buffered records, BLAKE2b over the body.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "common/util.h"
#include "node/restart/image.h"

#define IMAGE_MAGIC  "RAMSTIMG"
#define IMAGE_BUF    (1u << 20)
#define IMAGE_DIGEST 32

static int write_all(int fd, const void *p, size_t n, off_t at)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = pwrite(fd, b, n, at);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		b += k;
		n -= (size_t)k;
		at += k;
	}
	return 0;
}

static int flush_buf(struct image_writer *w)
{
	int rc;

	if (!w->n)
		return 0;
	rc = write_all(w->fd, w->buf, w->n, (off_t)(IMAGE_HEADER + w->body - w->n));
	w->n = 0;
	return rc;
}

int image_write_begin(struct image_writer *w, int fd, uint32_t kind)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->kind = kind;
	if (ftruncate(fd, 0))
		return w->err = -errno;
	w->buf = malloc(IMAGE_BUF);
	if (!w->buf)
		return w->err = -ENOMEM;
	w->cap = IMAGE_BUF;
	return 0;
}

static void add(struct image_writer *w, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n && !w->err) {
		size_t k = w->cap - w->n < n ? w->cap - w->n : n;

		memcpy(w->buf + w->n, b, k);
		w->n += k;
		w->body += k;
		b += k;
		n -= k;
		if (w->n == w->cap)
			w->err = flush_buf(w);
	}
}

int image_record(struct image_writer *w, uint16_t tag, const void *head, size_t head_len,
		 const void *body, size_t body_len)
{
	uint8_t rh[8];

	if (w->err)
		return w->err;
	if (head_len + body_len > UINT32_MAX)
		return w->err = -EOVERFLOW;
	put_le16(rh, tag);
	put_le16(rh + 2, 0);
	put_le32(rh + 4, (uint32_t)(head_len + body_len));
	add(w, rh, sizeof(rh));
	if (head_len)
		add(w, head, head_len);
	if (body_len)
		add(w, body, body_len);
	return w->err;
}

int image_write_end(struct image_writer *w)
{
	uint8_t hdr[IMAGE_HEADER] = {0};
	crypto_generichash_state st;
	uint8_t *map = NULL;
	int rc = w->err;

	if (!rc)
		rc = flush_buf(w);
	free(w->buf);
	w->buf = NULL;
	if (rc)
		return w->err = rc;
	/* the digest over what is in the file, not what we meant to write */
	crypto_generichash_init(&st, NULL, 0, IMAGE_DIGEST);
	if (w->body) {
		map = mmap(NULL, IMAGE_HEADER + w->body, PROT_READ, MAP_SHARED, w->fd, 0);
		if (map == MAP_FAILED)
			return w->err = -errno;
		crypto_generichash_update(&st, map + IMAGE_HEADER, w->body);
		munmap(map, IMAGE_HEADER + w->body);
	}
	memcpy(hdr, IMAGE_MAGIC, 8);
	put_le32(hdr + 8, IMAGE_VERSION);
	put_le32(hdr + 12, w->kind);
	put_le64(hdr + 16, w->body);
	crypto_generichash_final(&st, hdr + 24, IMAGE_DIGEST);
	rc = write_all(w->fd, hdr, sizeof(hdr), 0);
	return w->err = rc;
}

int image_read_open(struct image_reader *r, int fd, uint32_t kind, const char **why)
{
	uint8_t digest[IMAGE_DIGEST];
	struct stat sb;
	uint64_t body;

	memset(r, 0, sizeof(*r));
	*why = NULL;
	if (fstat(fd, &sb))
		return -errno;
	if (sb.st_size < IMAGE_HEADER) {
		*why = "shorter than its header";
		return -EBADMSG;
	}
	r->map_len = (size_t)sb.st_size;
	r->map = mmap(NULL, r->map_len, PROT_READ, MAP_SHARED, fd, 0);
	if (r->map == MAP_FAILED) {
		r->map = NULL;
		return -errno;
	}
	if (memcmp(r->map, IMAGE_MAGIC, 8))
		*why = "no image magic (never finished?)";
	else if (get_le32(r->map + 8) != IMAGE_VERSION)
		*why = "another image version";
	else if (get_le32(r->map + 12) != kind)
		*why = "another kind of image";
	body = get_le64(r->map + 16);
	if (!*why && body != r->map_len - IMAGE_HEADER)
		*why = "its length is not the file's";
	if (!*why) {
		crypto_generichash(digest, sizeof(digest), r->map + IMAGE_HEADER, body, NULL, 0);
		if (sodium_memcmp(digest, r->map + 24, sizeof(digest)))
			*why = "its digest does not match (changed or torn)";
	}
	if (*why) {
		image_read_close(r);
		return -EBADMSG;
	}
	r->kind = kind;
	r->off = IMAGE_HEADER;
	r->end = r->map_len;
	return 0;
}

int image_next(struct image_reader *r, uint16_t *tag, const uint8_t **p, size_t *len)
{
	uint64_t n;

	if (!r->map || r->off == r->end)
		return 0;
	if (r->end - r->off < 8 || get_le16(r->map + r->off + 2))
		return -EBADMSG;
	n = get_le32(r->map + r->off + 4);
	if (n > r->end - r->off - 8)
		return -EBADMSG;
	*tag = get_le16(r->map + r->off);
	*p = r->map + r->off + 8;
	*len = (size_t)n;
	r->off += 8 + (size_t)n;
	return 1;
}

void image_read_close(struct image_reader *r)
{
	if (r->map)
		munmap((void *)r->map, r->map_len);
	r->map = NULL;
	r->map_len = r->off = r->end = 0;
}
