/*
 * fuzz_snapshot.c - libFuzzer target for the warm-restart image's records
 * (node/restart/image.h image_next) and the tier's loader (tmem/snapshot.h).
 *
 * An input is an image body: records of {u16 tag, u16 0, u32 length, bytes}
 * (the digest is what keeps a changed image out; this target checks what
 * happens past it, to an image that checks out but says what cannot be).
 * The records go to a loader over a fresh small tier; whatever it accepts is
 * saved again and must load again into another tier with the same counts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "node/restart/image.h"
#include "tests/fuzz/fuzz.h"
#include "tmem/snapshot.h"

struct rec_buf {
	uint8_t *b;
	size_t n, cap;
};

/* Collect records in memory, framed as image_next reads them. */
static int collect(void *arg, uint16_t tag, const void *h, size_t hl, const void *body, size_t bl)
{
	struct rec_buf *r = arg;
	size_t need = r->n + 8 + hl + bl;
	uint32_t len = (uint32_t)(hl + bl);

	if (need > r->cap) {
		uint8_t *nb = realloc(r->b, need * 2);

		if (!nb)
			return -12;
		r->b = nb;
		r->cap = need * 2;
	}
	r->b[r->n] = (uint8_t)tag;
	r->b[r->n + 1] = (uint8_t)(tag >> 8);
	r->b[r->n + 2] = r->b[r->n + 3] = 0;
	memcpy(r->b + r->n + 4, &len, 4); /* little-endian hosts only: x86-64, arm64 */
	if (hl)
		memcpy(r->b + r->n + 8, h, hl);
	if (bl)
		memcpy(r->b + r->n + 8 + hl, body, bl);
	r->n = need;
	return 0;
}

static int load_all(struct zcache *z, const uint8_t *data, size_t size, struct snapshot_stats *st)
{
	struct image_reader r = {.map = data, .map_len = size, .off = 0, .end = size};
	struct snapshot_loader l;
	const uint8_t *p;
	uint16_t tag;
	size_t len;
	int rc;

	snapshot_loader_init(&l, z);
	while ((rc = image_next(&r, &tag, &p, &len)) == 1) {
		fuzz_assert(p >= data && len <= size && p + len <= data + size);
		rc = snapshot_load_record(&l, tag, p, len);
		if (rc)
			break;
	}
	*st = l.st;
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct zcache_config cfg = {.local_mb = 2};
	struct zcache *z = zcache_create(&cfg), *z2;
	struct snapshot_stats st, again, saved;
	struct rec_buf out = {0};
	int rc;

	fuzz_assert(z);
	rc = load_all(z, data, size, &st);
	if (rc == 0) {
		/* what was built saves, and the save loads to the same */
		fuzz_assert(snapshot_save(z, collect, &out, &saved) == 0);
		fuzz_assert(saved.pools == st.pools);
		fuzz_assert(saved.pages_local + saved.pages_zero + saved.pages_remote <=
			    st.pages_local + st.pages_zero + st.pages_remote);
		z2 = zcache_create(&cfg);
		fuzz_assert(z2);
		fuzz_assert(load_all(z2, out.b, out.n, &again) == 0);
		fuzz_assert(again.pools == saved.pools);
		fuzz_assert(again.pages_local + again.pages_zero + again.pages_remote +
				again.pages_refused ==
			    saved.pages_local + saved.pages_zero + saved.pages_remote);
		zcache_destroy(z2);
	}
	free(out.b);
	zcache_destroy(z);
	return 0;
}
