/*
 * erasure.c - K+M Reed-Solomon fragments of a page with ISA-L (erasure.h).
 *
 * The encoding matrix is (K + M) x K: the identity over a Cauchy matrix
 * (gf_gen_cauchy1_matrix), so that every K x K submatrix is invertible and
 * any K fragments give the data back. Decoding inverts the K x K submatrix
 * of the rows had and multiplies (ec_encode_data with tables made for that
 * inverse); when the K had are the data fragments, it only copies.
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

/*
 * The rows of the inverse of the K fragments had (idx) that give the data
 * fragments, into inv (k x k): inv x had = data. @return 0, -EINVAL.
 */
static int decode_matrix(const struct erasure *e, const uint8_t *idx, unsigned char *inv)
{
	unsigned char sub[ERASURE_MAX * ERASURE_MAX];
	uint32_t seen = 0;
	unsigned i;

	for (i = 0; i < e->k; i++) {
		if (idx[i] >= e->k + e->m || (seen & (1u << idx[i])))
			return -EINVAL;
		seen |= 1u << idx[i];
		memcpy(&sub[i * e->k], &e->matrix[idx[i] * e->k], e->k);
	}
	return gf_invert_matrix(sub, inv, (int)e->k) ? -EINVAL : 0;
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

	if (!len || len > ERASURE_DATA_MAX)
		return -EINVAL;
	rc = decode_matrix(e, idx, inv);
	if (rc)
		return rc;
	for (i = 0; i < e->k; i++) {
		src[i] = (unsigned char *)frag[i];
		if (idx[i] < e->k)
			have[idx[i]] = true;
	}
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

int erasure_rebuild(const struct erasure *e, const uint8_t *idx, const uint8_t *const *frag,
		    size_t len, unsigned want, uint8_t *out)
{
	size_t flen = erasure_frag_len(e->k, len);
	unsigned char inv[ERASURE_MAX * ERASURE_MAX], row[ERASURE_MAX];
	unsigned char tables[32 * ERASURE_MAX];
	unsigned char *src[ERASURE_MAX], *dst[1] = { out };
	unsigned i, j;
	int rc;

	if (!len || len > ERASURE_DATA_MAX || want >= e->k + e->m)
		return -EINVAL;
	rc = decode_matrix(e, idx, inv);
	if (rc)
		return rc;
	for (i = 0; i < e->k; i++) {
		src[i] = (unsigned char *)frag[i];
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
