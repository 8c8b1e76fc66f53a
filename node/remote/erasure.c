/*
 * erasure.c - K+M Reed-Solomon fragments of a page with ISA-L (erasure.h).
 *
 * The encoding matrix is (K + M) x K: the identity over a Cauchy matrix
 * (gf_gen_cauchy1_matrix), so that every K x K submatrix is invertible and
 * any K fragments give the data back. Decoding inverts the K x K submatrix
 * of the rows had and multiplies (ec_encode_data with tables made for that
 * inverse); when the K had are the data fragments, it only copies. The
 * stripes' calls (erasure_encode_parity, erasure_rebuild_frag) share the
 * tables and the decode helpers, per fragment of up to ERASURE_STRIPE_FRAG_MAX.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "node/remote/erasure.h"

struct erasure {
	unsigned k, m;
	unsigned char matrix[ERASURE_MAX * ERASURE_MAX]; /* (k + m) x k */
	unsigned char tables[32 * ERASURE_MAX * ERASURE_MAX]; /* the parity rows' */
};

struct erasure *erasure_create(unsigned k, unsigned m)
{
	struct erasure *e;

	if (k < 2 || m < 1 || k + m > ERASURE_MAX)
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->k = k;
	e->m = m;
	gf_gen_cauchy1_matrix(e->matrix, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, &e->matrix[k * k], e->tables);
	return e;
}

void erasure_destroy(struct erasure *e)
{
	free(e);
}

unsigned erasure_k(const struct erasure *e)
{
	return e->k;
}

unsigned erasure_m(const struct erasure *e)
{
	return e->m;
}

void erasure_encode(const struct erasure *e, const void *data, size_t len, uint8_t *out)
{
	size_t flen = erasure_frag_len(e->k, len);
	unsigned char *src[ERASURE_MAX], *par[ERASURE_MAX];
	unsigned i;

	memcpy(out, data, len);
	memset(out + len, 0, e->k * flen - len); /* the last data fragment's padding */
	for (i = 0; i < e->k; i++)
		src[i] = out + i * flen;
	for (i = 0; i < e->m; i++)
		par[i] = out + (e->k + i) * flen;
	ec_encode_data((int)flen, (int)e->k, (int)e->m, (unsigned char *)e->tables, src, par);
}

/* @return the mask of the K fragments had (idx: distinct, < K + M), or 0 when idx is bad. */
static uint32_t had_mask(const struct erasure *e, const uint8_t *idx)
{
	uint32_t seen = 0;
	unsigned i;

	for (i = 0; i < e->k; i++) {
		if (idx[i] >= e->k + e->m || (seen & (1u << idx[i])))
			return 0;
		seen |= 1u << idx[i];
	}
	return seen;
}

/*
 * What decode and rebuild both start with: the length checked (1..max), the
 * K fragments had (idx) as ISA-L's sources, and the rows of the inverse of
 * their encoding rows, into inv (k x k): inv x had = data. @return 0, -EINVAL.
 */
static int decode_begin(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
			size_t len, size_t max, unsigned char *inv, unsigned char **src)
{
	unsigned char sub[ERASURE_MAX * ERASURE_MAX];
	unsigned i;

	if (!len || len > max || !had_mask(e, idx))
		return -EINVAL;
	for (i = 0; i < e->k; i++) {
		memcpy(&sub[i * e->k], &e->matrix[idx[i] * e->k], e->k);
		src[i] = (unsigned char *)frag[i];
	}
	return gf_invert_matrix(sub, inv, (int)e->k) ? -EINVAL : 0;
}

/* The len bytes from the K data fragments (idx a permutation of 0..K-1): no arithmetic. */
static void decode_data(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
			size_t len, uint8_t *out)
{
	size_t flen = erasure_frag_len(e->k, len);
	unsigned i;

	for (i = 0; i < e->k; i++) {
		size_t off = idx[i] * flen;

		if (off < len)
			memcpy(out + off, frag[i], len - off < flen ? len - off : flen);
	}
}

int erasure_decode(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		   size_t len, uint8_t *out)
{
	size_t flen = erasure_frag_len(e->k, len);
	unsigned char inv[ERASURE_MAX * ERASURE_MAX], rows[ERASURE_MAX * ERASURE_MAX];
	unsigned char tables[32 * ERASURE_MAX * ERASURE_MAX];
	unsigned char *src[ERASURE_MAX], *dst[ERASURE_MAX];
	uint8_t lost[ERASURE_MAX][ERASURE_FRAG_MAX];
	unsigned i, nlost = 0, want[ERASURE_MAX];
	bool have[ERASURE_MAX] = { false };
	int rc;

	/* the read that asked data fragments first and had them: no matrix at all */
	if (len && len <= ERASURE_DATA_MAX && had_mask(e, idx) == (1u << e->k) - 1) {
		decode_data(e, idx, frag, len, out);
		return 0;
	}
	rc = decode_begin(e, idx, frag, len, ERASURE_DATA_MAX, inv, src);
	if (rc)
		return rc;
	for (i = 0; i < e->k; i++)
		if (idx[i] < e->k)
			have[idx[i]] = true;
	/* the data fragments not had, from the inverse's rows for them */
	for (i = 0; i < e->k; i++) {
		if (have[i])
			continue;
		memcpy(&rows[nlost * e->k], &inv[i * e->k], e->k);
		dst[nlost] = lost[nlost];
		want[nlost++] = i;
	}
	if (nlost) {
		ec_init_tables((int)e->k, (int)nlost, rows, tables);
		ec_encode_data((int)flen, (int)e->k, (int)nlost, tables, src, dst);
	}
	/* the bytes in order: each data fragment had or made */
	for (i = 0; i < e->k; i++) {
		size_t off = i * flen, n = off >= len ? 0 : len - off < flen ? len - off : flen;
		const uint8_t *from = NULL;
		unsigned j;

		if (!n)
			break;
		for (j = 0; j < e->k && !from; j++)
			if (idx[j] == i)
				from = frag[j];
		for (j = 0; j < nlost && !from; j++)
			if (want[j] == i)
				from = lost[j];
		memcpy(out + off, from, n);
	}
	return 0;
}

/*
 * Fragment want (< K + M) of flen bytes from the K fragments had (idx, frag);
 * len is what decode_begin checks against max: the bytes coded (erasure_rebuild)
 * or the fragment's (erasure_rebuild_frag). @return 0, -EINVAL.
 */
static int rebuild(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		   size_t len, size_t max, size_t flen, unsigned want, uint8_t *out)
{
	unsigned char inv[ERASURE_MAX * ERASURE_MAX], row[ERASURE_MAX];
	unsigned char tables[32 * ERASURE_MAX];
	unsigned char *src[ERASURE_MAX], *dst[1] = { out };
	unsigned i, j;
	int rc;

	if (want >= e->k + e->m)
		return -EINVAL;
	rc = decode_begin(e, idx, frag, len, max, inv, src);
	if (rc)
		return rc;
	for (i = 0; i < e->k; i++) {
		if (idx[i] == want) {
			memcpy(out, frag[i], flen);
			return 0;
		}
	}
	/* fragment want = its encoding row x data = (its row x inv) x had */
	for (j = 0; j < e->k; j++) {
		unsigned char acc = 0;

		for (i = 0; i < e->k; i++)
			acc ^= gf_mul(e->matrix[want * e->k + i], inv[i * e->k + j]);
		row[j] = acc;
	}
	ec_init_tables((int)e->k, 1, row, tables);
	ec_encode_data((int)flen, (int)e->k, 1, tables, src, dst);
	return 0;
}

int erasure_rebuild(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		    size_t len, unsigned want, uint8_t *out)
{
	return rebuild(e, idx, frag, len, ERASURE_DATA_MAX, erasure_frag_len(e->k, len), want, out);
}

void erasure_encode_parity(const struct erasure *e, const uint8_t *const *data, size_t flen,
			   uint8_t *const *parity)
{
	unsigned char *src[ERASURE_MAX], *par[ERASURE_MAX];
	unsigned i;

	/* ISA-L's sources are not const, but only read */
	for (i = 0; i < e->k; i++)
		src[i] = (unsigned char *)data[i];
	for (i = 0; i < e->m; i++)
		par[i] = parity[i];
	ec_encode_data((int)flen, (int)e->k, (int)e->m, (unsigned char *)e->tables, src, par);
}

int erasure_rebuild_frag(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
			 size_t flen, unsigned want, uint8_t *out)
{
	return rebuild(e, idx, frag, flen, ERASURE_STRIPE_FRAG_MAX, flen, want, out);
}
