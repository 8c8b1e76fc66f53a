/*
 * holder_lie.c - a lying holder, for the hostile tests only
 * (RAMSTER_TEST_HOLDER_LIE, config.h): this node, as a holder, answers its
 * peers' gets with
 *
 *   other    the sealed bytes of another page (the last one put to it);
 *   old      the first sealed bytes it was ever given for that page (an older
 *            version, when the owner has put the page again since);
 *   garbage  the right bytes with one bit flipped.
 *
 * The owner's seal (node/remote/seal.h) must refuse every one of them: the get falls
 * over to another holder, or answers -EIO. Nothing here runs unless the
 * variable is set; remote_holder_lies counts the answers made up.
 */

#include <stdlib.h>
#include <string.h>

#include "node/remote/remote_int.h"

#define LIE_SLOTS 4096

struct lie_slot {
	bool used;
	struct foreign_key k;
	size_t len;
	uint8_t blob[SEAL_BLOB_MAX];
};

struct holder_lie {
	uint8_t last[SEAL_BLOB_MAX], out[SEAL_BLOB_MAX];
	size_t last_len;
	struct foreign_key last_k;
	struct lie_slot *first; /* LIE_SLOTS, by key hash: the first version seen */
};

static size_t lie_hash(const struct foreign_key *k)
{
	uint64_t h = k->oid[0] * 0x9e3779b97f4a7c15ull ^ k->oid[1] * 0xc2b2ae3d27d4eb4full ^
		     k->oid[2] ^ (uint64_t)k->pool << 32 ^ k->index * 0x165667b19e3779f9ull;

	return (size_t)(h ^ h >> 29) % LIE_SLOTS;
}

static struct holder_lie *lie_get(struct remote *r)
{
	if (!r->lie && r->holder_lie) {
		r->lie = calloc(1, sizeof(struct holder_lie));
		if (r->lie)
			r->lie->first = calloc(LIE_SLOTS, sizeof(struct lie_slot));
	}
	return r->lie && r->lie->first ? r->lie : NULL;
}

void holder_lie_put(struct remote *r, const struct foreign_key *k, const uint8_t *blob, size_t len)
{
	struct holder_lie *l = lie_get(r);
	struct lie_slot *s;

	if (!l || len > SEAL_BLOB_MAX)
		return;
	memcpy(l->last, blob, len);
	l->last_len = len;
	l->last_k = *k;
	s = &l->first[lie_hash(k)];
	if (s->used && !memcmp(&s->k, k, sizeof(*k)))
		return; /* keep the first version */
	s->used = true;
	s->k = *k;
	s->len = len;
	memcpy(s->blob, blob, len);
}

const void *holder_lie_get(struct remote *r, const struct foreign_key *k, const void *data,
			   size_t *len)
{
	struct holder_lie *l = lie_get(r);
	struct lie_slot *s;

	if (!l)
		return data;
	switch (r->holder_lie) {
	case HOLDER_LIE_OTHER:
		if (!l->last_len || !memcmp(&l->last_k, k, sizeof(*k)))
			return data;
		*len = l->last_len;
		r->holder_lies++;
		return l->last;
	case HOLDER_LIE_OLD:
		s = &l->first[lie_hash(k)];
		if (!s->used || memcmp(&s->k, k, sizeof(*k)) ||
		    (s->len == *len && !memcmp(s->blob, data, *len)))
			return data;
		*len = s->len;
		r->holder_lies++;
		return s->blob;
	case HOLDER_LIE_GARBAGE:
		memcpy(l->out, data, *len);
		l->out[*len / 2] ^= 0x08;
		r->holder_lies++;
		return l->out;
	}
	return data;
}

void holder_lie_free(struct remote *r)
{
	if (r->lie)
		free(r->lie->first);
	free(r->lie);
	r->lie = NULL;
}
